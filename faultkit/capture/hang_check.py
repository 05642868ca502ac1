"""Two looks at every process before anything is stopped: stacks sampled twice, a few seconds
apart, judged by analyze/hang.py. Used by `faultkit dump` and by capture at `--hang-after` and
`--timeout` (one call there: `HangCheck.confirm`).

The flight recorder is armed in every capture (`flight_recorder_env`): PyTorch then writes each
rank's last collectives into the bundle when its watchdog times out.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .. import layout
from ..private_files import CannotWrite, write_private
from ..analyze.hang import HangFinding, analyse
from ..hang_model import ProcessStacks
from ..ingest.schema import read_manifest
from . import stacks as collector

DEFAULT_SAMPLES, DEFAULT_INTERVAL_S, DEFAULT_DEADLINE_S = 2, 3.0, 10.0
TRACE_BUFFER_ENTRIES = "2000"


class NotRunning(Exception):
    pass


def running_root(bundle: Path) -> int:
    """The root pid of a capture that is still writing `bundle` (its manifest says so)."""
    manifest, problems = read_manifest(bundle / layout.MANIFEST)
    if manifest is None:
        raise NotRunning(f"{bundle}: no readable {layout.MANIFEST} ({'; '.join(p.message for p in problems)})")
    if manifest.state != "running":
        raise NotRunning(f"{bundle}: not a running capture (state {manifest.state!r}); give --pid PID")
    if manifest.root_pid is None:
        raise NotRunning(f"{bundle}: its manifest names no process yet (the target is starting); try again, "
                         f"or give --pid PID")
    return manifest.root_pid


def time_tag() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def flight_recorder_env(out: Path) -> dict[str, str]:
    """PyTorch's flight recorder, dumped on a collective timeout into the bundle's collectives/.
    Costs a ring of small records per collective; nothing without torch.distributed."""
    return {"TORCH_NCCL_TRACE_BUFFER_SIZE": TRACE_BUFFER_ENTRIES, "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
            "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(out / layout.COLLECTIVES_DIR / layout.FLIGHT_RECORD_PREFIX)}


@dataclass
class Sampling:
    samples: list[list[ProcessStacks]] = field(default_factory=list)
    files: list[str] = field(default_factory=list)        # written into the stacks folder
    interval_s: float = 0.0
    unwritten: str | None = None    # the folder could not take them (disk full, read-only): why; stacks still read


def sample(pids, n: int = DEFAULT_SAMPLES, interval_s: float = DEFAULT_INTERVAL_S,
           deadline_s: float = DEFAULT_DEADLINE_S, folder: Path | None = None, tag: str = "dump",
           sources=None) -> Sampling:
    """`pids`: a list, or a function returning the live pids at each round (a tree that changes).
    The processes of one round are read at once, each by its own tool process."""
    out = Sampling(interval_s=interval_s)
    for k in range(n):
        if k:
            time.sleep(interval_s)
        now = [p for p in (pids() if callable(pids) else pids) if collector.alive(p)]
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(now)))) as pool:
            dumps = list(pool.map(lambda p: collector.take(p, sources, deadline_s), now))
        out.samples.append([d.stacks for d in dumps])
        if folder is not None and out.unwritten is None:
            _keep(out, lambda: [out.files.extend(collector.write(d, folder, k + 1)) for d in dumps])
    if folder is not None and out.unwritten is None:
        name = layout.STACK_SAMPLES.format(tag=tag)
        _keep(out, lambda: write_private(folder / name, json.dumps({"interval_s": interval_s, "samples": [
            [p.to_json() for p in s] for s in out.samples]}, indent=1)))
        if out.unwritten is None:
            out.files.append(name)
    return out


def _keep(out: Sampling, write) -> None:
    """A write of the stacks: a full disk or a read-only folder stops the writing, not the sampling."""
    try:
        write()
    except OSError as exc:
        out.unwritten = str(exc) if isinstance(exc, CannotWrite) else f"stacks: cannot write ({exc.strerror or exc})"


class HangCheck:
    """At `--hang-after` silence: sample the tree twice; a hang only if the stacks say so (a stuck
    GPU or collective wait, a blocked process, a rank behind) or cannot tell (no stack readable: the
    silence alone decides, as before). An idle tree is let run (the silence clock starts again)
    unless `even_idle`; so is a busy one (a thread on a CPU, stacks that moved: progress), until the
    next silence or the --timeout."""

    def __init__(self, out: Path, even_idle: bool = False, interval_s: float = DEFAULT_INTERVAL_S, echo=print,
                 sources=None):
        """`sources`: the stack sources in order (default py-spy, then gdb); an in-process agent's
        file (capture.stacks.AgentFileSource) goes last, for processes no tool may attach to."""
        self.out, self.even_idle, self.interval_s, self.echo = out, even_idle, interval_s, echo
        self.sources = sources
        self.rounds: dict[str, int] = {}
        self.findings: list[dict] = []

    def confirm(self, pids, ended_by: str = "hang", gone=()) -> bool:
        """True: treat it as a hang (stop the tree). The finding and stacks go into the bundle.
        `gone`: the GPU workers of the tree that died before (analyze.hang.GoneWorker)."""
        self.rounds[ended_by] = self.rounds.get(ended_by, 0) + 1
        tag = f"{ended_by}-{self.rounds[ended_by]}"
        s = sample(pids, interval_s=self.interval_s, folder=self.out / layout.STACKS_DIR, tag=tag,
                   sources=self.sources)
        hf: HangFinding = analyse(s.samples, s.interval_s, gone=list(gone))
        self.findings.append({"tag": tag, "state": hf.state, "level": hf.level, "summary": hf.summary,
                              "waits_on": hf.waits_on})
        self.echo(f"stacks of {len(s.samples[-1]) if s.samples else 0} process(es), {len(s.samples)} samples: "
                  f"{hf.state}: {hf.summary}")
        if ended_by != "hang":
            return True                       # a timeout or an interrupt ends the capture whatever the stacks say
        if hf.state == "idle" and not self.even_idle:
            self.echo("idle, not hung: the capture goes on (--even-idle stops an idle server too)")
            return False
        if hf.state == "busy":
            self.echo("working, not stuck: the capture goes on")
            return False
        return True
