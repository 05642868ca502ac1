"""The amplifiers: ONE table of what each arm switches, the cause class it amplifies, how its effect
is read, and the framework and version it applies to. Everything else (the CLI's list, the verdict's
words, the report's table, the checks that an arm reached its processes) is derived from it.

Sources for the versions: PyTorch's CUDA semantics notes (PYTORCH_NO_CUDA_MEMORY_CACHING, the
allocator's `expandable_segments` option since 2.1; ROCm builds read the HIP spellings); CUDA's
programming guide (CUDA_LAUNCH_BLOCKING); HIP's debugging guide (AMD_SERIALIZE_KERNEL/COPY=3,
HIP_LAUNCH_BLOCKING); SGLang's server arguments (the overlap scheduler on by default since v0.4.0,
off with `--disable-overlap-schedule`); vLLM's release notes (`--async-scheduling` experimental since
v0.10.0, PR #19970; on by default since v0.14.0, off with `--no-async-scheduling`).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import asdict, dataclass, field

from ..agent import files as agent_files

# cause classes (the verdict's words live in verdict.py, keyed by these)
MEMORY_REUSE = "memory-reuse"
ERROR_FAR = "error-far-from-launch"
RACE = "race"
CHECKER = "checker"
CLASSES = (MEMORY_REUSE, ERROR_FAR, RACE, CHECKER)

# how an arm's effect on the crash rate is read
RAISES = "raises"          # a crash rate that goes UP names the class (caching off, poison)
REMOVES = "removes"        # a crash rate that goes DOWN names the class (hold-back, serialized launches)
EITHER = "either"          # a change either way names it (jitter, a scheduler switch)
ONE_TRIAL = "one-trial"    # a checker: one trial, its findings read, no rate compared

POISON_BYTE = "0x7f"       # 0x7F7F... as an index or a pointer is far outside any pool; fp16 NaN; float32 3.4e38


@dataclass(frozen=True)
class Amplifier:
    name: str
    cause: str
    reads: str                        # RAISES / REMOVES / EITHER / ONE_TRIAL
    what: str                         # in words, for the report
    env: dict = field(default_factory=dict)       # variables, verified in /proc of the GPU processes
    agent: tuple[str, ...] = ()        # what the agent must say it armed (its header's `armed`)
    flag: str | None = None            # appended to the server's command (a framework's own switch)
    applies_when: str | None = None    # a regex on the server command: the framework the flag is for
    prefix: str | None = None          # a checker's command before the server's
    tool: str | None = None            # the program a checker needs on PATH
    applies_to: str = ""               # framework and version
    needs_sites: bool = False          # jitter / hold-back need --site

    def to_json(self) -> dict:
        return asdict(self)


ARMS: tuple[Amplifier, ...] = (
    Amplifier("caching-off", MEMORY_REUSE, RAISES,
              "the caching allocator off: every free goes to the driver, a stale read faults at once",
              env={"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "PYTORCH_NO_HIP_MEMORY_CACHING": "1"},
              applies_to="PyTorch (CUDA: PYTORCH_NO_CUDA_MEMORY_CACHING; ROCm builds: PYTORCH_NO_HIP_MEMORY_CACHING), "
                         "any version"),
    Amplifier("expandable-on", MEMORY_REUSE, EITHER,
              "expandable segments on: freed memory is unmapped and remapped in pages, block addresses move",
              env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                   "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:True"},
              applies_to="PyTorch >= 2.1 (CUDA; ROCm builds read PYTORCH_HIP_ALLOC_CONF)"),
    Amplifier("expandable-off", MEMORY_REUSE, EITHER,
              "expandable segments off (for a server that turns them on): fixed segments, blocks reused in place",
              env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:False",
                   "PYTORCH_HIP_ALLOC_CONF": "expandable_segments:False"},
              applies_to="PyTorch >= 2.1"),
    Amplifier("poison", MEMORY_REUSE, RAISES,
              f"freed blocks filled with {POISON_BYTE} on their stream (the agent): a stale read reads poison, "
              f"not plausible old data",
              env={agent_files.ENV_POISON: POISON_BYTE}, agent=(agent_files.ARMED_POISON,),
              applies_to="PyTorch's CUDA caching allocator with its trace tracker (2.1+; a C++ compiler and CUDA "
                         "headers on the machine: faultkit's agent builds it once)"),
    Amplifier("release", MEMORY_REUSE, RAISES,
              "PyTorch's CUDA cache emptied each time a chosen site is entered (the agent): what was freed before "
              "goes back to the driver, a stale read faults, and the black box saw the release (it names the block)",
              env={agent_files.ENV_RELEASE: "{sites}"}, agent=(agent_files.ARMED_RELEASE,),
              applies_to="PyTorch with CUDA or ROCm, any version with torch.cuda.empty_cache; needs --site",
              needs_sites=True),
    Amplifier("hold-back", MEMORY_REUSE, REMOVES,
              "memory-owning locals of the chosen sites kept alive 1 s after they return (the agent): their blocks "
              "cannot be reused for that long",
              env={agent_files.ENV_HOLD: "{sites}", agent_files.ENV_HOLD_MS: "1000"}, agent=(agent_files.ARMED_HOLD,),
              applies_to="any Python program (tensors, anything with data_ptr()); needs --site", needs_sites=True),
    Amplifier("launch-blocking", ERROR_FAR, EITHER,
              "every launch waits for its kernel: the error is reported at its launch, and overlap is gone",
              env={"CUDA_LAUNCH_BLOCKING": "1", "HIP_LAUNCH_BLOCKING": "1"},
              applies_to="CUDA runtime (CUDA_LAUNCH_BLOCKING), HIP (HIP_LAUNCH_BLOCKING), any version"),
    Amplifier("serialize", ERROR_FAR, EITHER,
              "kernels and copies serialized by the HIP runtime (wait before and after each)",
              env={"AMD_SERIALIZE_KERNEL": "3", "AMD_SERIALIZE_COPY": "3"},
              applies_to="ROCm HIP runtime (ROCclr), any version; no effect on NVIDIA"),
    Amplifier("jitter", RACE, EITHER,
              "the chosen sites delayed a seeded random 0-2 ms each call (the agent): host timing perturbed",
              env={agent_files.ENV_JITTER: "{sites}", agent_files.ENV_JITTER_MS: "2"}, agent=(agent_files.ARMED_JITTER,),
              applies_to="any Python program; needs --site", needs_sites=True),
    Amplifier("no-overlap-sglang", RACE, EITHER,
              "SGLang's overlap scheduler off: the next batch is scheduled only after the current one ran",
              flag="--disable-overlap-schedule", applies_when=r"sglang",
              applies_to="SGLang >= 0.4.0 (the overlap scheduler is on by default since then)"),
    Amplifier("no-async-vllm", RACE, EITHER,
              "vLLM's async scheduling off: scheduling no longer overlaps the GPU's step",
              flag="--no-async-scheduling", applies_when=r"vllm",
              applies_to="vLLM >= 0.14.0 (async scheduling on by default; 0.10-0.13: it is off unless "
                         "--async-scheduling)"),
    Amplifier("memcheck", CHECKER, ONE_TRIAL, "compute-sanitizer memcheck: every invalid access, with its kernel",
              prefix="compute-sanitizer --tool memcheck --target-processes all --print-limit 100",
              tool="compute-sanitizer", applies_to="NVIDIA CUDA toolkit (compute-sanitizer), any version"),
    Amplifier("racecheck", CHECKER, ONE_TRIAL, "compute-sanitizer racecheck: shared-memory hazards",
              prefix="compute-sanitizer --tool racecheck --target-processes all --print-limit 100",
              tool="compute-sanitizer", applies_to="NVIDIA CUDA toolkit (compute-sanitizer), any version"),
    Amplifier("rocgdb-precise", CHECKER, ONE_TRIAL,
              "rocgdb with precise memory: the faulting wave stops at the faulting instruction",
              prefix="rocgdb -batch -ex 'set amdgpu precise-memory on' -ex run -ex 'info threads' -ex bt --args",
              tool="rocgdb", applies_to="ROCm's rocgdb (precise memory on gfx90a and later)"),
)
BY_NAME = {a.name: a for a in ARMS}
DEFAULT = ("caching-off", "poison", "launch-blocking")


class ArmError(ValueError):
    """An arm that cannot be run as asked: said to the user."""


def applicable(amp: Amplifier, command: str, sites: list[str]) -> str | None:
    """Why this arm cannot run for this command here, or None."""
    if amp.needs_sites and not sites:
        return "needs --site (the Python call sites to act at, e.g. --site scheduler:event_loop)"
    if amp.applies_when and not re.search(amp.applies_when, command):
        return f"its switch ({amp.flag}) is for {amp.applies_to.split(' ')[0]}, and the server command is not"
    if amp.tool and shutil.which(amp.tool) is None:
        return f"{amp.tool} is not installed here"
    return None


def arm_env(amp: Amplifier, sites: list[str]) -> dict[str, str]:
    return {k: v.replace("{sites}", ",".join(sites)) for k, v in amp.env.items()}


def arm_command(amp: Amplifier, command: str) -> str:
    if amp.flag:
        return f"{command} {amp.flag}"
    if amp.prefix:
        return f"{amp.prefix} {command}"
    return command


def table_markdown() -> str:
    """The arms table, as README and `faultkit amplify --list` print it."""
    rows = ["| arm | class | read as | variables / agent / flag | applies to |", "|---|---|---|---|---|"]
    for a in ARMS:
        how = ", ".join(f"`{k}={v}`" for k, v in a.env.items())
        how = how or (f"flag `{a.flag}`" if a.flag else f"prefix `{a.prefix}`" if a.prefix else "")
        if a.agent:
            how += " (agent: " + ", ".join(a.agent) + ")"
        rows.append(f"| {a.name} | {a.cause} | {a.reads} | {how} | {a.applies_to} |")
    return "\n".join(rows) + "\n"
