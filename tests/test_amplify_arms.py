"""The amplifier arms table: the variables each arm sets (as the issue and the runtimes' docs name
them), what the agent must report, when an arm applies, how its command is made, and that README's
table is the table."""

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from faultkit.agent import files
from faultkit.amplify import arms as A
from faultkit.amplify.reach import check
from faultkit.cli import main
from faultkit.trials.records import EnvCheck, TrialResult

ROOT = Path(__file__).resolve().parent.parent


def test_the_variables_of_each_class():
    env = {a.name: a.env for a in A.ARMS}
    assert env["caching-off"] == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "PYTORCH_NO_HIP_MEMORY_CACHING": "1"}
    assert env["expandable-on"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert env["expandable-off"]["PYTORCH_HIP_ALLOC_CONF"] == "expandable_segments:False"
    assert env["launch-blocking"] == {"CUDA_LAUNCH_BLOCKING": "1", "HIP_LAUNCH_BLOCKING": "1"}
    assert env["serialize"] == {"AMD_SERIALIZE_KERNEL": "3", "AMD_SERIALIZE_COPY": "3"}
    assert A.BY_NAME["no-overlap-sglang"].flag == "--disable-overlap-schedule"
    assert A.BY_NAME["no-async-vllm"].flag == "--no-async-scheduling"
    for a in A.ARMS:
        assert a.cause in A.CLASSES and a.reads in (A.RAISES, A.REMOVES, A.EITHER, A.ONE_TRIAL)
        assert a.applies_to                       # every arm says the framework and version it is for
        assert (a.cause == A.CHECKER) == (a.reads == A.ONE_TRIAL) == bool(a.prefix)


def test_agent_arms_name_what_the_agent_writes():
    # the armed words are the agent's own constants, and each agent arm sets the agent's variable
    assert A.BY_NAME["poison"].agent == (files.ARMED_POISON,) and files.ENV_POISON in A.BY_NAME["poison"].env
    assert A.BY_NAME["hold-back"].agent == (files.ARMED_HOLD,) and files.ENV_HOLD in A.BY_NAME["hold-back"].env
    assert A.BY_NAME["jitter"].agent == (files.ARMED_JITTER,) and files.ENV_JITTER in A.BY_NAME["jitter"].env
    # (that the agent really writes them in a live process: tests/test_amplify_agent.py)


def test_when_an_arm_applies(monkeypatch):
    sglang = "python -m sglang.launch_server --model-path m --port 30000"
    assert A.applicable(A.BY_NAME["no-overlap-sglang"], sglang, []) is None
    assert "is not" in A.applicable(A.BY_NAME["no-overlap-sglang"], "python -m vllm.entrypoints.openai.api_server", [])
    assert A.arm_command(A.BY_NAME["no-overlap-sglang"], sglang) == sglang + " --disable-overlap-schedule"
    assert "needs --site" in A.applicable(A.BY_NAME["jitter"], sglang, [])
    assert A.arm_env(A.BY_NAME["jitter"], ["scheduler:event_loop", "step"])[files.ENV_JITTER] == \
        "scheduler:event_loop,step"
    monkeypatch.setenv("PATH", "/nonexistent")
    assert A.applicable(A.BY_NAME["memcheck"], "python x.py", []) == "compute-sanitizer is not installed here"
    assert A.arm_command(A.BY_NAME["memcheck"], "python x.py").startswith(
        "compute-sanitizer --tool memcheck --target-processes all")


def test_a_flag_arm_counts_only_where_the_flag_reached(tmp_path):
    amp = A.BY_NAME["no-overlap-sglang"]
    res = TrialResult(index=1, pair=0, arm=amp.name, outcome="no-crash", ended_by="client-exit", duration_s=1.0,
                      env=EnvCheck(ok=True))
    (tmp_path / "environ.json").write_text('[{"pid": 5, "cmdline": ["python", "-m", "sglang.launch_server"]}]')
    r = check(amp, res, tmp_path)
    assert not r.ok and "--disable-overlap-schedule" in r.why
    (tmp_path / "environ.json").write_text('[{"pid": 5, "cmdline": ["python", "-m", "sglang.launch_server", '
                                           '"--disable-overlap-schedule"]}]')
    assert check(amp, res, tmp_path).ok


def test_readme_holds_the_table_and_the_cli_prints_it():
    table = A.table_markdown()
    assert table in (ROOT / "README.md").read_text()
    res = CliRunner().invoke(main, ["amplify", "arms"])
    assert res.exit_code == 0 and res.output == table
    rows = [ln for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| arm")]
    assert len(rows) == len(A.ARMS)
    assert re.search(r"\| no-async-vllm \| race \| either \| flag `--no-async-scheduling` \| vLLM >= 0.14.0", table)


@pytest.mark.parametrize("name", [a.name for a in A.ARMS])
def test_every_arm_has_a_verdict_line(name):
    from faultkit.amplify.verdict import ArmOutcome, sentence
    amp = A.BY_NAME[name]
    if amp.reads == A.ONE_TRIAL:
        return
    for c, pc in ((10, 1), (0, 6)):
        text = sentence(ArmOutcome(name, amp.cause, c, 10, pc, 10, 0.001, "decided"))
        assert ": " in text and "Fisher p = 0.001" in text and "a change the table does not name" not in text
