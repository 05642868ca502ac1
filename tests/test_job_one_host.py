"""One job's ranks on one machine (one boot, one clock), through the README's own command.

A real gloo job (torch CPU): rank 1 segfaults; its TCP sockets are handed to a helper outside the
capture first (SCM_RIGHTS), so the peers see no closed connection: their all_reduce times out
(gloo's own "Timed out waiting 2000ms for recv operation"), and each aborts after its timeout, as a
server with a fatal collective-error handler (or NCCL's watchdog) does. The triage run exactly as
the README writes it (`faultkit triage run/*`, and with `-o job.md`) must name rank 1 alone as the
first mover, on a zero clock offset, and the other ranks' timeouts and aborts as consequences."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

RANK = textwrap.dedent("""
    import ctypes, datetime, os, socket, stat, sys, time, traceback
    import torch, torch.distributed as dist
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{os.environ['PORT']}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=2))
    for step in range(400):
        try:
            dist.all_reduce(torch.ones(8))
        except RuntimeError:
            traceback.print_exc()          # the collective's own error, then the server gives up
            sys.stderr.flush()
            os.abort()
        print(f"step {step} done", flush=True)
        if step == 10 and rank == 1:
            fds = []
            for f in os.listdir("/proc/self/fd"):
                try:
                    if stat.S_ISSOCK(os.fstat(int(f)).st_mode):
                        fds.append(int(f))
                except OSError:
                    pass
            with socket.socket(socket.AF_UNIX) as s:      # the peers' sockets outlive this rank
                s.connect(os.environ["HOLDER"])
                socket.send_fds(s, [b"x"], fds)
                s.recv(1)
            ctypes.string_at(0)
        time.sleep(0.02)
""")
HOLDER = textwrap.dedent("""
    import socket, sys, time
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(sys.argv[1]); s.listen(1)
        print("ready", flush=True)
        c, _ = s.accept()
        msg, fds, _, _ = socket.recv_fds(c, 1, 1024)
        c.send(b"k")
        time.sleep(float(sys.argv[2]))
""")


def _readme_job_triage() -> str:
    """The README's job-triage command line, as written (its comment dropped)."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## One job across nodes", 1)[1].split("```", 2)[1]
    line = next(ln for ln in block.splitlines() if ln.startswith("faultkit triage"))
    return line.split("#", 1)[0].strip()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _faultkit_on_path(tmp: Path) -> dict:
    """`faultkit` on PATH running this checkout (a console script as pip writes one)."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "faultkit"
    exe.write_text(f"#!{sys.executable}\nimport sys\nfrom faultkit.cli import run\nsys.exit(run())\n")
    exe.chmod(0o755)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}


@pytest.fixture(scope="module")
def one_host_job(tmp_path_factory):
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch not installed (pip install torch): the gloo job needs it")
    tmp = tmp_path_factory.mktemp("job")
    (tmp / "rank.py").write_text(RANK)
    (tmp / "holder.py").write_text(HOLDER)
    env = _faultkit_on_path(tmp)
    sock = tmp / "h.sock"
    holder = subprocess.Popen([sys.executable, str(tmp / "holder.py"), str(sock), "12"], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline() == "ready\n"
    port, procs = _free_port(), []
    try:
        for rank in range(3):
            renv = {**env, "RANK": str(rank), "WORLD_SIZE": "3", "TORCHELASTIC_RUN_ID": "job-77", "PORT": str(port),
                    "HOLDER": str(sock)}
            procs.append(subprocess.Popen(["faultkit", "capture", "-q", "--allow-running", "--timeout", "90", "-o",
                                           "run/r%r", "--", sys.executable, str(tmp / "rank.py")],
                                          cwd=tmp, env=renv, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        codes = [p.wait(timeout=240) for p in procs]
    finally:
        holder.kill()
        holder.wait()
    assert codes == [134, 139, 134], [p.stderr.read() for p in procs]
    return tmp, env


def test_readme_job_triage_names_the_crashed_rank_on_one_host(one_host_job):
    tmp, env = one_host_job
    logs = {r: (tmp / "run" / f"r{r}" / "server.log").read_text() for r in range(3)}
    # the evidence: ranks 0 and 2 timed out in gloo (its own words), rank 1 died first
    for r in (0, 2):
        assert re.search(r"Timed out waiting 2000ms for (?:recv|send) operation to complete", logs[r]), logs[r][-2000:]
    ends = {r: json.loads((tmp / "run" / f"r{r}" / "manifest.json").read_text())["end"]["wall"] for r in range(3)}
    assert ends[0] - ends[1] > 1.0 and ends[2] - ends[1] > 1.0          # the others died seconds later
    boots = {json.loads((tmp / "run" / f"r{r}" / "manifest.json").read_text())["system"]["boot_id"] for r in range(3)}
    assert boots == {Path("/proc/sys/kernel/random/boot_id").read_text().strip()}

    cmd = _readme_job_triage()
    assert cmd == "faultkit triage run/*"
    md = subprocess.run(cmd, shell=True, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert md.returncode == 0, md.stderr
    assert md.stdout.startswith("# faultkit job report: job-77")
    assert re.search(r"\*\*first mover\*\*: vm:r1\n|\*\*first mover\*\*: [^,\n]*r1\n", md.stdout), md.stdout[:1500]
    assert "within the clocks' uncertainty" not in md.stdout
    assert "hang" not in md.stdout.split("## The first mover's own report")[0].lower()

    res = subprocess.run(cmd + " -o job.md", shell=True, cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert (tmp / "job.md").read_text() == md.stdout
    res = subprocess.run(cmd + " -o job.json", shell=True, cwd=tmp, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr
    job = json.loads((tmp / "job.json").read_text())
    assert job["schema"] == "faultkit.job/1" and job["job"] == "job-77"
    nodes = {n["rank"]: n for n in job["nodes"]}
    assert job["first_mover"] == [nodes[1]["node"]]
    for r in (0, 2):         # one boot: the offset is zero, to the stamps
        assert abs(nodes[r]["clock_offset_s"]) < 0.005 and nodes[r]["clock_uncertainty_s"] is not None
        assert nodes[r]["first_cause"] is None         # a timeout and an abort after it: no cause of its own
    assert nodes[1]["first_cause"]["kind"] in ("host-segfault", "killed by signal 11")
    kinds = {(c["node"], c["kind"]) for c in job["consequences"]}
    for r in (0, 2):
        assert (nodes[r]["node"], "collective-timeout") in kinds
        assert (nodes[r]["node"], "killed by signal 6") in kinds
    for c in job["consequences"]:
        if c["kind"] == "collective-timeout":
            assert 1.0 < c["after_s"] < 10              # the timeouts came seconds after rank 1's death


def test_a_job_report_in_html_from_the_extension(one_host_job):
    tmp, env = one_host_job
    res = subprocess.run(_readme_job_triage() + " -o job.html", shell=True, cwd=tmp, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    page = (tmp / "job.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and re.search(r"<strong>first mover</strong>: [^<,]*r1</p>", page)
    assert "collective-timeout: RuntimeError" in page and "Timed out waiting 2000ms" in page
    assert "<h2>The first mover's own report" in page and "<h3>faultkit triage report</h3>" in page


def test_the_job_markdown_shows_the_evidence_as_written(one_host_job):
    cmarkgfm = pytest.importorskip("cmarkgfm", reason="pip install cmarkgfm (GitHub's own renderer)")
    import html as html_mod
    tmp, env = one_host_job
    md = subprocess.run(_readme_job_triage(), shell=True, cwd=tmp, env=env, capture_output=True, text=True,
                        timeout=300).stdout
    page = cmarkgfm.github_flavored_markdown_to_html(md, options=cmarkgfm.Options.CMARK_OPT_UNSAFE)
    seen = html_mod.unescape(re.sub(r"<[^>]+>", "", page))
    # gloo's own words, with its `[/__w/...]` path (the `__` would open bold unescaped)
    line = next(ln for ln in (tmp / "run" / "r0" / "server.log").read_text().splitlines() if "Timed out waiting" in ln)
    path = re.search(r"\[(/__w/\S+?)\]", line).group(1)
    assert path in seen and "\\" not in seen.split("The first mover's own report")[0]
