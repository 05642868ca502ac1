"""Command line: wires the stages together and nothing else."""

from __future__ import annotations

import sys

from . import early_signals

if early_signals.holding_for(sys.argv):     # before the imports: a signal in them must not lose the bundle
    early_signals.hold()

import json
import math
import os
import platform
import re
import signal
from pathlib import Path

import click

from . import __version__
from .demangle import display_name
from .judge.levels import CERTAIN, LIKELY, reaches
from .lazy_commands import LazyGroup
from .terminal import clean


# -q and -v mean the same on every verb: -q leaves only warnings and errors on stderr (what the verb
# makes, a report, a file, still comes out), -v adds what was read and every problem met.
QUIET_HELP = "print nothing on stderr but warnings and errors"
VERBOSE_HELP = "say on stderr what was read and every problem met"


def quiet_option(f):
    return click.option("-q", "--quiet", is_flag=True, help=QUIET_HELP)(f)


def verbose_option(f):
    return click.option("-v", "--verbose", is_flag=True, help=VERBOSE_HELP)(f)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="faultkit")
def main() -> None:
    """GPU fault forensics for ROCm and CUDA crashes."""


@main.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("-f", "--format", "fmt", type=click.Choice(["md", "markdown", "html", "json"]), default=None,
              help="report format [default: from -o's extension (.md, .html, .json), else md]")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="a FILE to write the report to instead of stdout (readable by you only; its folder is made)")
@click.option("--env", "env_pairs", multiple=True, metavar="K=V",
              help="variables the run had (e.g. AMD_SERIALIZE_KERNEL=3): checked against the trace's overlaps "
                   "(a capture bundle's own environment record is used otherwise)")
@click.option("--window", default="2s", show_default=True, metavar="DURATION",
              help="how far before the fault traces are read and searched for in-flight and overlapping work")
@click.option("--debugger", metavar="PATH",
              help="the debugger that opens GPU core dumps among the inputs (default: cuda-gdb / rocgdb on PATH)")
@click.option("--no-open-cores", is_flag=True, help="list GPU core dumps without running a debugger on them")
@click.option("--fail-on", type=click.Choice([CERTAIN, LIKELY, "any-fault"]),
              help="for CI: exit 4 when the verdict is at least this sure (any-fault: when any fault was found)")
@verbose_option
@quiet_option
@click.option("--job", metavar="ID", help="the bundles given are one job's (one per node or rank), whatever job id "
                                         "their manifests carry: judged as one incident across nodes")
def triage(inputs: tuple[str, ...], fmt: str, output: str | None, env_pairs: tuple[str, ...], window: str,
           debugger: str | None, no_open_cores: bool, fail_on: str | None, verbose: bool, job: str | None,
           quiet: bool = False) -> None:
    """Postmortem report from logs, debugger transcripts, traces, code objects: files, folders,
    capture bundles, archives (.tar, .tar.gz/.xz/.bz2/.zst), compressed files (.gz, .xz, .bz2,
    .zst), pipes, and `-` for standard input (`dmesg | faultkit triage -`).

    Each file's kind is detected from its content. Exit status: 0 report written; 1 an input was
    missing or unreadable (the report covers the rest), or -o could not be written; 2 usage; 4
    --fail-on was met.

    \b
    Example:
      faultkit triage server.log dmesg.txt -o report.html      # HTML, from the extension"""
    from .export.report import RENDERERS
    from .triage import TriageOptions, triage as run_triage

    opts = TriageOptions(env=parse_env(env_pairs, "--env") if env_pairs else None,
                         window_ns=int(parse_duration(window) * 1e9), debugger=debugger,
                         open_cores=not no_open_cores)
    from .job_triage import job_of
    bundles = job_of(list(inputs), job)
    if bundles is not None:
        _triage_job(bundles, opts, fmt, output, quiet)
        return
    incident = run_triage(list(inputs), opts)
    if verbose:
        for i in incident.inputs:
            size = f"{i['rows']:,} rows" if "rows" in i else f"{i.get('bytes', 0):,} bytes"
            click.echo(clean(f"read {i['name']} ({size}): {', '.join(i['kinds']) or 'nothing recognised'}"), err=True)
        for p in incident.problems:
            click.echo(clean(f"problem: {p}"), err=True)
    text = RENDERERS[output_format(output, fmt, REPORT_SUFFIXES, "md")](incident)
    v = incident.verdict
    if output:
        write_output(output, text)
        if not quiet:
            click.echo(clean(f"wrote {output}: verdict {v.level}" + (f" ({display_name(v.kernel)})" if v.kernel
                                                                      else "")), err=True)
    else:
        sys.stdout.write(text)
    for m in incident.missing:
        why = next((p.message for p in incident.problems if p.file == m), "no such file, or not readable")
        click.echo(clean(f"error: {m}: {why}"), err=True)
    if fail_on and (reaches(v.level, CERTAIN) or (fail_on == LIKELY and reaches(v.level, LIKELY))
                    or (fail_on == "any-fault" and incident.faults)):
        sys.exit(EXIT_FAIL_ON)
    if incident.missing:
        sys.exit(EXIT_INPUT)


@main.command()
@click.argument("inputs", nargs=-1)
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True),
              help="the trace FILE to write (readable by you only; its folder is made)")
@click.option("-f", "--format", "fmt", type=click.Choice(["pftrace", "json"]), default=None,
              help="native Perfetto protobuf, or Chrome trace-event JSON [default: from -o's extension (.json: "
                   "json), else pftrace]")
@click.option("--window", default="30s", show_default=True, metavar="DURATION|all",
              help="how much before the fault to show, or 'all'")
@click.option("--check", "check_file", type=click.Path(exists=True, dir_okay=False),
              help="check a .pftrace or Chrome JSON trace instead of writing one")
@verbose_option
@quiet_option
def timeline(inputs: tuple[str, ...], output: str | None, fmt: str, window: str, check_file: str | None,
             verbose: bool = False, quiet: bool = False) -> None:
    """Write the incident as a Perfetto trace (opens in ui.perfetto.dev), or check one.

    \b
    Example:
      faultkit timeline bundle/ -o incident.pftrace
      faultkit timeline --check incident.pftrace"""
    from .progress import Progress

    if check_file:
        from .export.pftrace_check import Unreadable, check_json_trace, check_trace, read_trace_file
        try:
            data = read_trace_file(check_file)
        except Unreadable as exc:
            raise click.ClickException(str(exc)) from None
        with Progress(after_s=1e9 if quiet else 2.0) as progress:
            progress.stage("checking", "packets")
            res = (check_json_trace(data) if data[:64].lstrip()[:1] in (b"{", b"[") else
                   check_trace(data, keep_names=False, progress=progress))
        click.echo(f"{clean(check_file)}: {res.packets} packets, {res.tracks} tracks, {res.slices} slices, "
                   f"{res.instants} instants, {res.counters} counter values, {res.flows} flows")
        for e in res.errors:
            click.echo(clean(f"  error: {e}"))
        if not res.ok:
            raise SystemExit(1)
        return
    if not inputs or not output:
        raise click.UsageError("give the inputs and -o FILE (or --check FILE)")
    from .export.timeline import build_timeline, write_json, write_pftrace
    from .triage import TriageOptions, triage as run_triage

    win = None if window.strip().lower() == "all" else int(parse_duration(window) * 1e9)
    missing = [i for i in inputs if i != "-" and not os.path.exists(i)]
    if missing:
        raise click.BadParameter(f"{', '.join(missing)}: no such file or directory", param_hint="INPUTS")
    fmt = output_format(output, fmt, TIMELINE_SUFFIXES, "pftrace")
    from .job_triage import job_of, triage_job
    bundles = job_of(list(inputs))
    with Progress(after_s=1e9 if quiet else 2.0) as progress:
        progress.stage("reading the inputs and the trace")
        if bundles is not None:      # one job's bundles: a process group per node on the aligned clock
            from .export.job_timeline import build_job_timeline
            tl = build_job_timeline(triage_job(bundles[0], bundles[1], lambda p: run_triage([p], TriageOptions())))
        else:
            inc = run_triage(list(inputs), TriageOptions(read_ns=win, read_all=win is None))
            if verbose:
                for p in inc.problems:
                    click.echo(clean(f"problem: {p}"), err=True)
            progress.stage("laying out the tracks")
            tl = build_timeline(inc, win)
        progress.stage("writing", "slices")
        with output_errors(output):            # only the writing: a read error is not the output's
            if fmt == "json":
                n = write_json(tl, output)
            else:
                size = write_pftrace(tl, output, progress)
    if not quiet:
        if fmt == "json":
            click.echo(f"wrote {clean(output)}: {n} events (Chrome trace JSON)", err=True)
        else:
            click.echo(f"wrote {clean(output)}: {size:,} bytes, {len(tl.tracks)} tracks; open it in "
                       f"https://ui.perfetto.dev", err=True)
    unread = [] if bundles is not None else inc.missing     # as triage: an input not read is exit 1, said why
    for m in unread:
        why = next((p.message for p in inc.problems if p.file == m), "not readable")
        click.echo(clean(f"error: {m}: {why}"), err=True)
    if unread:
        sys.exit(EXIT_INPUT)


@main.command()
@click.argument("bundle", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--pid", "pids", multiple=True, type=click.IntRange(min=1), help="a process to read (repeat for more)")
@click.option("--no-children", is_flag=True, help="only the processes named, not their children (workers)")
@click.option("--samples", type=click.IntRange(1, 10), default=2, show_default=True,
              help="rounds of stacks: two tell a stuck wait from a slow one")
@click.option("--interval", default="3s", show_default=True, metavar="DURATION", help="time between rounds")
@click.option("--deadline", default="10s", show_default=True, metavar="DURATION",
              help="longest a stack tool may take for one process before it is killed")
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", type=click.Path(file_okay=False),
              help="also keep the tools' own output and the records in this folder")
@click.option("--read", "reads", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="judge saved dumps instead (py-spy text or --json, gdb `thread apply all bt`, faulthandler): "
                   "give two of one process, in the order they were taken")
@quiet_option
@verbose_option
def dump(bundle, pids, no_children, samples, interval, deadline, fmt, output, reads, quiet, verbose) -> None:
    """Every thread's stack of live processes (Python and native: py-spy, else gdb), what each
    waits on (GPU, collective, host), and a hang verdict from two samples. Read-only: the
    processes are paused for milliseconds per sample, never stopped.

    BUNDLE: a capture that is still running: its whole process tree is read and the stacks are
    kept in the bundle's stacks/ folder. Exit status: 0 stacks read; 1 none could be read, or -o
    could not keep them (the stacks are printed all the same).

    \b
    Example:
      faultkit dump --pid 48213
      faultkit dump bundle/ --format json
      faultkit dump --read before.txt --read after.txt"""
    from .capture.dump_run import DumpError, dump_live, read_saved, roots_of

    try:
        if reads:
            if pids or bundle:
                raise DumpError("give saved dumps (--read) or live processes (--pid, BUNDLE), not both")
            res = read_saved(list(reads), fmt)
        else:
            roots, folder = roots_of(list(pids), bundle, output)
            res = dump_live(roots, folder, no_children, samples, parse_duration(interval), parse_duration(deadline),
                            fmt)
    except DumpError as exc:
        if exc.param:
            raise click.BadParameter(str(exc), param_hint=exc.param)
        raise click.UsageError(str(exc))
    sys.stdout.write(res.rendered)
    if reads:
        for why in res.problems:
            click.echo(clean(why), err=True)
        sys.exit(0 if res.read_any else EXIT_INPUT)
    if res.unwritten:                   # the stacks above are whole; the folder could not keep them
        click.echo(clean(f"error: {res.unwritten}; kept {len(res.files)} file(s)"), err=True)
    elif res.folder is not None and not quiet:
        click.echo(clean(f"kept {len(res.files)} file(s) in {res.folder}"), err=True)
    if verbose or not res.read_any:
        for why in res.problems:
            click.echo(clean(why), err=True)
    if not res.read_any:
        click.echo("error: no stack could be read (attaching needs ptrace: the same user and "
                   "kernel.yama.ptrace_scope 0, or root / CAP_SYS_PTRACE)", err=True)
        sys.exit(EXIT_INPUT)
    if res.unwritten:
        sys.exit(EXIT_WRITE)

EXIT_INPUT, EXIT_USAGE, EXIT_NOT_STARTED, EXIT_FAIL_ON, EXIT_INTERNAL = 1, 2, 3, 4, 70
EXIT_WRITE = 1          # every verb: a file it writes could not be written (disk full, read-only, quota)
# -o's extension names the format where --format is not given (as a user of other tools expects)
TEXT_SUFFIXES = {".json": "json"}          # show, doctor: text unless the file is .json
REPORT_SUFFIXES = {".md": "md", ".markdown": "md", ".html": "html", ".htm": "html", ".json": "json"}
TIMELINE_SUFFIXES = {".json": "json", ".pftrace": "pftrace"}


def output_format(output: str | None, given: str | None, suffixes: dict[str, str], default: str) -> str:
    """--format where given (a warning where -o's suffix names another format), else -o's suffix."""
    named = suffixes.get(Path(output).suffix.lower()) if output else None
    if given:
        if named and named != {"markdown": "md"}.get(given, given):
            click.echo(clean(f"warning: -o {output} has the suffix of {named}, but is written as {given} "
                             f"(--format {given})"), err=True)
        return given
    return named or default


class output_errors:
    """A file that cannot be written (`-o /proc/x`, a read-only folder, a full disk) is the user's
    error, said in one line (exit 1), not an internal one."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and issubclass(exc_type, OSError):
            raise click.ClickException(f"{clean(self.path)}: cannot write there ({exc.strerror or exc})") from None
        return False


def _triage_job(bundles, opts, fmt: str, output: str | None, quiet: bool = False) -> None:
    """Several nodes' bundles of one job: one incident, the first mover, the others its consequences."""
    from .export.job_report import JOB_RENDERERS
    from .job_triage import triage_job
    from .triage import triage as run_triage
    fmt = output_format(output, fmt, REPORT_SUFFIXES, "md")      # as every report: -f, else -o's extension, else md
    if fmt not in JOB_RENDERERS:
        raise click.UsageError(f"a job's report is Markdown, HTML or JSON, not {fmt}")
    report = triage_job(bundles[0], bundles[1], lambda p: run_triage([p], opts))
    text = JOB_RENDERERS[fmt](report)
    if output:
        write_output(output, text)
        if not quiet:
            click.echo(clean(f"wrote {output}: first mover {', '.join(report.verdict.first_mover) or 'none'}"), err=True)
    else:
        sys.stdout.write(text)


def write_output(path: str, text: str) -> None:
    """Reports are their owner's only (0600, written whole); writers create the folder they write into."""
    from .private_files import write_private
    with output_errors(path):
        write_private(path, text)


def emit(text: str, output: str | None, quiet: bool) -> None:
    """A verb's result: to stdout, or to -o FILE, 0600 (trials reports, bundle summaries and checks
    name commands and crashes)."""
    if output:
        write_output(output, text)                   # a bad -o is the user's to fix: exit 1, not 70
        if not quiet:
            click.echo(f"wrote {clean(output)}", err=True)
    else:
        sys.stdout.write(text)


def parse_env(pairs: tuple[str, ...], flag: str) -> dict[str, str]:
    env = {}
    for kv in pairs:
        k, sep, v = kv.partition("=")
        if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", k):
            raise click.BadParameter(f"{kv!r}: expected NAME=VALUE", param_hint=flag)
        env[k] = v
    return env


def parse_duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    t = text.strip().lower()
    try:
        value = float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a duration like 90, 30s, 40m or 2h")
    if not math.isfinite(value) or value < 0:
        raise click.BadParameter(f"{text!r}: a duration is a finite number of seconds, not negative")
    return value


def parse_limit(text: str, flag: str) -> float | None:
    """A time limit: a duration, or `none` for no limit; 0 is refused (it would end at once)."""
    if text.strip().lower() in ("none", "inf", "infinity"):
        return None
    value = parse_duration(text)
    if value == 0:
        raise click.BadParameter(f"{text!r}: 0 would end at once; give a duration, or 'none' for no limit",
                                 param_hint=flag)
    return value


def parse_regex(text: str | None, flag: str) -> str | None:
    if text is None:
        return None
    try:
        re.compile(text)
    except re.error as exc:
        raise click.BadParameter(f"{text!r} is not a regular expression ({exc})", param_hint=flag)
    return text


@main.group()
def trials() -> None:
    """Crash-rate A/B experiments with verified environments and exact statistics."""


@trials.command("run")
@click.option("--arm", "arm_specs", multiple=True, required=True, metavar="NAME='CMD'",
              help="an arm: a name and the server command; give two or more")
@click.option("--env", "--env-arm", "env_specs", multiple=True, metavar="ARM:K=V",
              help="set K=V for one arm's server (K=V as in capture's --env), verified in /proc")
@click.option("--client", help="load generator started once the server is ready; its end ends the trial")
@click.option("-n", "n", type=click.IntRange(min=1), default=15, show_default=True, help="trials per arm")
@click.option("--timeout", "--trial-timeout", "trial_timeout", default="40m", show_default=True, metavar="DURATION",
              help="end a trial without a crash after this")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the order within each pair")
@click.option("--port", type=click.IntRange(1, 65535),
              help="server port: must be free before each trial; readiness for --client")
@click.option("--ready-pattern", help="regex in the server output that means ready (instead of the port)")
@click.option("--metric", metavar="REGEX", help="record a per-trial figure from the client (else server) output: "
                                                "the last match's first group (throughput, tokens served)")
@click.option("--alternative", type=click.Choice(["greater", "two-sided"]), default=None,
              help="the test's sidedness, chosen once: greater (the arm named first crashes more often) or "
                   "two-sided [default: greater]; recorded in plan.json and used by its report")
@click.option("-o", "--output", "out", default="trials", show_default=True, type=click.Path(file_okay=False),
              help="the experiment's folder: plan.json and one trial-NNN-ARM folder per trial (0700, files 0600)")
@click.option("--on", "engine", type=click.Choice(["local", "slurm", "ray"]), default="local", show_default=True,
              help="where the trials run: here one after another, as a Slurm job array, or as Ray tasks")
@click.option("--gpus-per-trial", type=click.FloatRange(min=0), default=0, show_default=True,
              help="with --on slurm|ray: GPUs each trial is given (--gpus-per-task, num_gpus)")
@click.option("--slurm-arg", "slurm_args", multiple=True, metavar="ARG",
              help="with --on slurm: an sbatch option for every trial (--partition=gpu, --time=1:00:00)")
@click.option("--ray-address", metavar="ADDR", help="with --on ray: the cluster to join (default: a local one)")
@click.option("--engine-retries", type=click.IntRange(min=0), default=1, show_default=True,
              help="with --on slurm|ray: reruns of a trial whose task the engine lost (node, worker, pre-emption)")
@click.option("--no-wait", is_flag=True, help="with --on slurm: submit and return; `trials report` reports so far")
@verbose_option
@quiet_option
def trials_run(arm_specs, env_specs, client, n, trial_timeout, seed, port, ready_pattern, metric, alternative, out,
               engine="local", gpus_per_trial=0, slurm_args=(), ray_address=None, engine_retries=1, no_wait=False,
               verbose=False, quiet=False) -> None:
    """Run the trials (resumes an interrupted run in the same folder).

    A trial whose server did not start (command not found or not executable, script missing, its
    arguments refused, never ready for --client) is "failed to start": kept, never counted in the
    rates. Exit status: 0 the trials ran; 1 refused (port in use, another experiment's folder);
    3 an arm failed to start in its first pair (the experiment is stopped); 130 interrupted (run the
    same command to resume).

    \b
    Example:
      faultkit trials run --arm base='python -m server' --arm fix='python -m server --no-overlap' \\
          --env fix:AMD_SERIALIZE_KERNEL=3 -n 15 -o trials/"""
    from .trials.runner import Arm, StartFailure, TrialsError, run_trials

    arms: dict[str, Arm] = {}
    for spec in arm_specs:
        name, sep, cmd = spec.partition("=")
        if not sep or not name or not cmd:
            raise click.BadParameter(f"{spec!r}: expected NAME='command'", param_hint="--arm")
        arms[name] = Arm(name, cmd)
    for spec in env_specs:
        name, sep, kv = spec.partition(":")
        k, sep2, v = kv.partition("=")
        if not sep or not sep2 or name not in arms:
            raise click.BadParameter(f"{spec!r}: expected ARM:K=V with a known arm", param_hint="--env")
        arms[name].env[k] = v
    if len(arms) < 2:       # a usage error like any other wrong argument (exit 2), before a folder is made
        raise click.UsageError("give at least two arms with different names (--arm NAME='CMD' twice or more)")
    echo = (lambda m: None) if quiet else lambda m: click.echo(m, err=True)
    warn = lambda m: click.echo(m, err=True)  # noqa: E731
    if engine != "local" and no_wait and engine != "slurm":
        raise click.UsageError("--no-wait is for --on slurm: a Ray task does not outlive its driver")
    try:
        if engine == "local":
            results = run_trials(Path(out), list(arms.values()), n, seed, client, port, parse_duration(trial_timeout),
                                 parse_regex(ready_pattern, "--ready-pattern"), echo=echo,
                                 metric=parse_regex(metric, "--metric"), warn=warn, verbose=verbose,
                                 alternative=alternative)
        else:
            from .trials.distributed import run_on
            results = run_on(engine, Path(out), list(arms.values()), n, seed, client, port,
                             parse_duration(trial_timeout), parse_regex(ready_pattern, "--ready-pattern"), echo=echo,
                             warn=warn, metric=parse_regex(metric, "--metric"), gpus_per_trial=gpus_per_trial,
                             engine_args=list(slurm_args), retries=engine_retries, wait=not no_wait,
                             ray_address=ray_address, alternative=alternative)
    except StartFailure as exc:
        click.echo(clean(f"error: {exc}"), err=True)
        sys.exit(EXIT_NOT_STARTED)
    except TrialsError as exc:
        raise click.ClickException(str(exc))
    except KeyboardInterrupt:
        click.echo(f"interrupted: finished trials are kept in {out}; run the same command to resume", err=True)
        sys.exit(130)
    counted = [r for r in results if r.counted]
    crashed = sum(r.crashed for r in counted)
    failed = len(results) - len(counted)
    if failed:
        click.echo(f"warning: {failed} trial(s) failed to start and are not counted", err=True)
    if quiet:
        return
    click.echo(f"{len(counted)} trials, {crashed} crashed" + (f", {failed} failed to start (not counted)" if failed
                                                               else "") + f"; report: faultkit trials report {out}",
               err=True)


@trials.command("task", hidden=True)
@click.argument("folder", type=click.Path(file_okay=False))
@click.option("--index", type=click.IntRange(min=0), required=True)
@click.option("--engine", type=click.Choice(["slurm"]), default="slurm")
@verbose_option
@quiet_option
def trials_task(folder, index, engine, verbose=False, quiet=False) -> None:
    """One trial of a plan, run by a cluster engine's task on its node (`trials run --on slurm`)."""
    from .trials.placement import placement
    from .trials.task import ARMS_VARIABLE, Experiment, TaskError, run_task
    from .trials.runner import read_plan, PLAN
    from .trials.records import RecordError
    try:
        plan = read_plan(Path(folder) / PLAN)
        experiment = Experiment.from_json(os.environ.get(ARMS_VARIABLE, ""))
        entry = next((e for e in plan.order if e.index == index), None)
        if entry is None:
            raise TaskError(f"trial index {index} is not in {folder}/{PLAN}")
        where = placement(engine, job_id=os.environ.get("SLURM_ARRAY_JOB_ID"),
                          task_id=os.environ.get("SLURM_ARRAY_TASK_ID"), slurm_job=os.environ.get("SLURM_JOB_ID"))
        result = run_task(experiment.task(Path(folder), entry), plan, where)
    except (TaskError, RecordError) as exc:
        click.echo(clean(f"error: {exc}"), err=True)
        sys.exit(EXIT_NOT_STARTED)
    except KeyboardInterrupt:   # scancel, pre-emption, a time limit: SIGTERM to every process of the task
        click.echo(f"trial {index}: ended by a signal from {engine}; no result kept (not counted)", err=True)
        sys.exit(143)
    if not quiet:
        click.echo(f"trial {index}: {result.outcome} on {where['node']}")


@trials.command("report")
@click.argument("folder", required=False, type=click.Path(exists=True, file_okay=False))
@click.option("--counts", "count_specs", multiple=True, metavar="ARM=C/N",
              help="crashes C of N trials counted by hand, instead of a folder; give two or more")
@click.option("--metric", metavar="REGEX",
              help="read a per-trial figure from each trial's client (else server) output: the last match's first "
                   "group, e.g. 'throughput \\(token/s\\): ([\\d.]+)'")
@click.option("-f", "--format", "fmt", type=click.Choice(["md", "html", "json"]), default=None,
              help="report format [default: from -o's extension (.md, .html, .json), else md]")
@click.option("-o", "--output", type=click.Path(dir_okay=False),
              help="a FILE to write the report to instead of stdout (readable by you only; its folder is made)")
@click.option("--alternative", type=click.Choice(["greater", "two-sided"]), default=None,
              help="with --counts: the test's sidedness [default: greater, the arm named first crashes more "
                   "often]; a folder's report takes its plan's")
@verbose_option
@quiet_option
def trials_report(folder, count_specs, metric, fmt, output, alternative=None, verbose=False, quiet=False) -> None:
    """Crash rates, intervals, exact tests, a conclusion and signatures of a trials folder, or of
    counts collected by hand.

    \b
    Example:
      faultkit trials report trials/ --format html -o trials.html
      faultkit trials report --counts base=2/5 --counts fix=0/5"""
    from .trials.metric import metric_from
    from .trials.report import RENDERERS, summarise, summarise_counts
    from .trials.runner import load_results, trial_dir

    if bool(folder) == bool(count_specs):
        raise click.UsageError("give a trials folder or --counts ARM=C/N (twice or more), not both")
    if count_specs:
        counts = {}
        for spec in count_specs:
            m = re.fullmatch(r"([^=]+)=(\d{1,9})/(\d{1,9})", spec.strip())     # a count by hand: under a billion
            if not m or int(m.group(2)) > int(m.group(3)) or int(m.group(3)) == 0:
                raise click.BadParameter(f"{spec!r}: expected ARM=C/N with 0 <= C <= N, N > 0", param_hint="--counts")
            counts[m.group(1)] = (int(m.group(2)), int(m.group(3)))
        if len(counts) < 2:
            raise click.BadParameter("give two or more arms", param_hint="--counts")
        summary = summarise_counts(counts, **({"alternative": alternative} if alternative else {}))
    else:
        if alternative:
            raise click.UsageError("--alternative goes with --counts: a trials folder's report uses the sidedness "
                                   "its plan.json recorded")
        plan, results, problems = load_results(Path(folder))
        for p in problems:
            click.echo(clean(f"warning: {p}"), err=True)
        if verbose:
            click.echo(clean(f"read {len(results)} trial result(s)" + (f" of {len(plan.order)} planned" if plan else
                                                                       ", no plan") + f" from {folder}"), err=True)
        if not results:
            raise click.ClickException(f"no finished trials in {folder}")
        if metric:
            regex = parse_regex(metric, "--metric")
            for r in results:
                r.metric, r.metric_regex = metric_from(trial_dir(Path(folder), r), regex) if r.counted else None, regex
        summary = summarise(plan, results)
        from .trials.distributed import engine_state, in_flight
        summary["engine"] = engine_state(Path(folder)) or {"engine": "local"}
        summary["in_flight"] = {str(i): s for i, s in sorted(in_flight(Path(folder)).items())}
    emit(RENDERERS[output_format(output, fmt, REPORT_SUFFIXES, "md")](summary), output, quiet)


@trials.command("plan")
@click.option("--rate", "rates", multiple=True, required=True, metavar="ARM=P", help="expected crash rate; give two")
@click.option("--alpha", type=float, default=0.05, show_default=True)
@click.option("--power", "target", type=float, default=0.9, show_default=True)
@click.option("-n", "n", type=click.IntRange(min=1), help="report the power of this many trials per arm instead")
@click.option("-f", "--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option("--alternative", type=click.Choice(["greater", "two-sided"]), default=None,
              help="the test's sidedness, chosen once: greater (the arm named first crashes more often) or "
                   "two-sided [default: greater]; recorded in plan.json and used by its report")
@verbose_option
@quiet_option
def trials_plan(rates, alpha, target, n, fmt, alternative=None, verbose=False, quiet=False) -> None:
    """How many trials per arm reach the power asked (exact enumeration under Fisher's test).
    The answer goes to stdout; -q and -v change nothing here (nothing else is said).

    \b
    Example:
      faultkit trials plan --rate base=0.4 --rate fix=0"""
    import json

    from .trials.report import plan_summary
    from .trials.stats import MAX_N

    if n is not None and n > MAX_N:         # the exact power costs n squared: 100,000 asked for 80 GB
        raise click.BadParameter(f"{n}: at most {MAX_N} trials per arm", param_hint="-n")
    parsed = {}
    for spec in rates:
        name, sep, p = spec.partition("=")
        try:
            parsed[name] = float(p)
        except ValueError:
            raise click.BadParameter(f"{spec!r}: expected ARM=P", param_hint="--rate")
        if not sep or not 0 <= parsed[name] <= 1:
            raise click.BadParameter(f"{spec!r}: expected ARM=P with 0 <= P <= 1", param_hint="--rate")
    if len(parsed) != 2:
        raise click.BadParameter("give exactly two --rate", param_hint="--rate")
    s = plan_summary(parsed, alpha, target, n, **({"alternative": alternative} if alternative else {}))
    if fmt == "json":
        click.echo(json.dumps(s, indent=2))
        return
    a, b = s["arms"]
    need = s["trials_per_arm"]
    click.echo(clean(f"{a} at {s['rates'][0]:.0%} vs {b} at {s['rates'][1]:.0%}, alpha {alpha}, {s['alternative']}:"))
    if n is not None:
        click.echo(f"  {n} trials per arm give power {s['power']:.0%}")
    elif need is None:
        click.echo(f"  no n up to 400 per arm reaches power {target:.0%} (best {s['power']:.0%})")
    else:
        click.echo(f"  {need} trials per arm reach power {s['power']:.0%} (target {target:.0%})")
    if s.get("crashes_needed_vs_zero") is not None:
        click.echo(f"  the test needs at least {s['crashes_needed_vs_zero']} crashes against 0 at that size")
    two = s["two_sided"]
    if n is None and two["trials_per_arm"] and s["alternative"] != "two-sided":
        click.echo(f"  two-sided: {two['trials_per_arm']} per arm (power {two['power']:.0%})")
    click.echo(f"  method: {s['method']}")


def _amplify() -> click.Command:
    from .amplify.command import registered       # the verb lives in its package; imported when used
    return registered(parse_duration, parse_regex, emit, output_format)


main.add_lazy("amplify", _amplify)


@main.command()
@click.argument("bundle", type=click.Path(exists=True))
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]), default=None,
              help="[default: from -o's extension (.json), else text]")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the summary to this file (0600)")
@verbose_option
@quiet_option
def show(bundle, fmt, output, verbose, quiet) -> None:
    """What a capture bundle holds, in a few lines: how the capture ended and its exit status, the
    environment check, cores, whether the kernel log was readable, the tools found.

    Exit status: 0 shown; 1 not a faultkit bundle (what it holds is still said).

    \b
    Example:
      faultkit show bundle/
      faultkit show bundle.tar.gz --format json"""
    from .show import render_json, render_text, summarise

    s = summarise(bundle)
    fmt = output_format(output, fmt, TEXT_SUFFIXES, "text")
    text = (render_json if fmt == "json" else render_text)(s)
    if verbose:
        for p in s.problems:
            click.echo(clean(f"problem: {p}"), err=True)
    emit(text, output, quiet)
    if not s.is_bundle:
        sys.exit(EXIT_INPUT)


@main.command()
@click.option("--dir", "folder", default=".", show_default=True, type=click.Path(file_okay=False),
              help="where bundles will be written: its disk is the one checked")
@click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]), default=None,
              help="[default: from -o's extension (.json), else text]")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="write the checks to this file (0600)")
@verbose_option
@quiet_option
def doctor(folder, fmt, output, verbose, quiet) -> None:
    """Check that a capture here records what it should, before a long run: kernel log readable,
    core limits and core_pattern, debuggers, rocprofv3 and compute-sanitizer with their versions,
    GPU runtimes and versions, free disk, debugger attach. Each failure says what to do.

    Exit status: 0 nothing failed (warnings allowed); 1 a check failed.

    \b
    Example:
      faultkit doctor --dir /scratch/bundles"""
    from .doctor import OK, INFO, exit_status, render_json, render_text, run_checks

    checks = run_checks(Path(folder))
    fmt = output_format(output, fmt, TEXT_SUFFIXES, "text")
    shown = [c for c in checks if c.status not in (OK, INFO)] if quiet and fmt != "json" else checks
    emit((render_json if fmt == "json" else render_text)(shown), output, quiet)
    sys.exit(exit_status(checks))


@main.command()
@click.argument("bundle", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="the archive to write (.tar.gz, 0600)")
@click.option("--with-cores", is_flag=True, help="include core dumps (process memory; often gigabytes)")
@click.option("--with-env", is_flag=True, help="include every process's environment (environ.json)")
@click.option("--with-kernel-history", is_flag=True,
              help="include the machine's kernel log from before the capture (default: the capture's window only)")
@verbose_option
@quiet_option
def pack(bundle, output, with_cores, with_env, with_kernel_history, verbose, quiet) -> None:
    """A shareable copy of a bundle for an issue tracker: no cores or environments unless asked,
    every text file redacted again, and pack-manifest.json listing what was left out and why.

    Exit status: 0 written; 1 the bundle or the output could not be used.

    \b
    Example:
      faultkit pack bundle/ -o incident.tar.gz"""
    from .pack import PackError, pack as run_pack

    try:
        res = run_pack(Path(bundle), Path(output), with_cores, with_env, with_kernel_history)
    except PackError as exc:
        raise click.ClickException(str(exc))
    if verbose:
        for f in res.included:
            click.echo(clean(f"included {f['name']} ({f['bytes']:,} bytes" + (f", {f['redacted']} redacted" if f["redacted"]
                                                                         else "") + ")"), err=True)
    for f in res.left_out:
        if verbose or not quiet:
            click.echo(clean(f"left out {f['name']}: {f['why']}"), err=True)
    redacted = sum(f["redacted"] for f in res.included)
    if not quiet:
        click.echo(f"wrote {output}: {len(res.included)} files" + (f", {redacted} secret(s) redacted" if redacted
                                                                   else "") + f", {len(res.left_out)} left out "
                   f"(listed in its pack-manifest.json)", err=True)


# Options end at COMMAND's first word (or at `--`): everything after it is COMMAND's. An unknown
# option before it is a usage error, never taken as the command.
@main.command(context_settings={"allow_interspersed_args": False})
@click.option("--with", "backend", default="none", show_default=True,
              type=click.Choice(["none", "coredump", "runtime-log", "rocgdb", "gdb", "cuda-gdb", "rocprofv3",
                                 "sanitizer"]),
              help="how to watch the target: plain (GPU core dumps only: `none` and `coredump` are the same), "
                   "AMD_LOG_LEVEL dispatch log, under a debugger, compute-sanitizer, rocprofv3 tracing")
@click.option("--no-coredump", is_flag=True,
              help="do not arm the runtimes' GPU core dumps (armed by default: lightweight, written at the fault, "
                   "no cost before it)")
@click.option("--full-core", is_flag=True,
              help="GPU core dumps keep GPU memory: the core is as large as the GPU memory in use (tens to "
                   "hundreds of GB)")
@click.option("--no-agent", is_flag=True,
              help="do not place faultkit's agent into the target's Python processes (by default each one writes "
                   "every thread's stack at an abort and its device-memory segments, with their Python sites)")
@click.option("--alloc-history", is_flag=True,
              help="the agent records every tensor allocation and free (address, size, stream, Python site), not "
                   "only segments: names the exact block a fault address was in")
@click.option("--hang-after", default=None, metavar="DURATION",
              help="no output from the target for this long, and its stacks (sampled twice) show a stuck GPU or "
                   "collective wait, a blocked process or a rank behind: a hang. Ask each GPU process for a core dump, "
                   "then stop. A silent tree whose every thread waits for work is idle: it goes on")
@click.option("--even-idle", is_flag=True, help="--hang-after stops an idle tree too")
@click.option("--attach-workers", is_flag=True,
              help="debuggers: start COMMAND normally and attach one debugger to each process that opens a GPU")
@click.option("--attach-match", metavar="REGEX",
              help="debuggers: attach to the processes whose command line matches (instead of GPU users)")
@click.option("--attach-delay", default=None, metavar="DURATION",
              help="debuggers: wait this long after a worker opens the GPU before attaching (default: 15s for "
                   "cuda-gdb, 0 otherwise)")
@click.option("--debugger", metavar="PATH", help="the debugger, compute-sanitizer or rocprofv3 binary to use")
@click.option("--rocprof-args", metavar="ARGS", default="",
              help="more rocprofv3 flags, as one quoted string (e.g. '--kernel-include-regex gemm'); "
                   "they come after faultkit's, so they win")
@click.option("--command-timeout", "--command-deadline", "command_deadline", default="60s", show_default=True,
              metavar="DURATION",
              help="debuggers: longest wait for one debugger command before it counts as hung")
@click.option("--env", "env_pairs", multiple=True, metavar="K=V", help="set for the target; verified in /proc")
@click.option("--port", type=click.IntRange(1, 65535), help="refuse to start if this port is already listening")
@click.option("--allow-running", is_flag=True, help="start even if the same server seems to be running")
@click.option("--timeout", default="2h", show_default=True, metavar="DURATION|none",
              help="end the capture after this (exit 124, like timeout(1)); none: no limit")
@click.option("--no-redact", is_flag=True,
              help="keep secrets (variables, flags and values shaped like tokens or URL passwords) in the process "
                   "records and the manifest (debugger transcripts are redacted always)")
@click.option("--redact-output", is_flag=True, help="replace secrets in the target's own output as well")
@click.option("--force", is_flag=True, help="write into an -o folder that is not empty")
@click.option("--pid", type=click.IntRange(min=1),
              help="follow a server that already runs instead of starting COMMAND: its output files, processes, "
                   "kernel log and exit; it is never stopped (debuggers attach with --with gdb/rocgdb/cuda-gdb)")
@click.option("-q", "--quiet", is_flag=True,
              help="show neither the target's output nor the status line nor the summary (warnings still)")
@verbose_option
@click.option("-o", "--output", "out", default=None, type=click.Path(file_okay=False),
              help="the bundle FOLDER, new or empty (readable by you only; default: faultkit-bundle-<time>)")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def capture(backend, no_coredump, full_core, no_agent, alloc_history, hang_after, even_idle, attach_workers, attach_match, attach_delay, debugger,
            rocprof_args, command_deadline, env_pairs, port, allow_running, timeout, no_redact, redact_output, force,
            pid, quiet, out, command, verbose=False) -> None:
    """Run COMMAND, record its output, kernel log, environments and system facts into a bundle,
    with the runtimes' GPU core dumps armed. Exits with COMMAND's status (128+N for a signal).

    \b
    Example:
      faultkit capture -o bundle/ -- python -m sglang.launch_server --model-path ... --port 30000
      faultkit capture --hang-after 5m --timeout 2h -o bundle/ -- python -m vllm.entrypoints.openai.api_server ...
      faultkit capture --pid 48213 -o bundle/"""
    import shlex
    import time

    from .capture.console import Console
    from .capture.session import CaptureError, CaptureOptions, capture as run_capture
    from .triage import triage as run_triage

    from .launch_env import PatternError, expand, launch_of
    out = out or time.strftime("faultkit-bundle-%Y%m%d-%H%M%S")
    try:        # srun/torchrun/mpirun start one faultkit per rank: `-o run/%h` gives each its own bundle
        out = expand(out, launch_of(dict(os.environ), platform.node()), os.getpid())
    except PatternError as exc:
        raise click.UsageError(f"-o {out}: {exc}") from None
    if not command and pid is None:
        raise click.UsageError("a command is needed: give the COMMAND to run (after --), or --pid PID of a "
                               "running server")
    if command and pid is not None:
        raise click.UsageError("give the COMMAND to run (after --) or --pid PID of a running server, not both")
    if command and command[0].startswith("-"):
        raise click.UsageError(f"No such option '{command[0]}' (COMMAND cannot start with '-'; to run a program "
                               f"named so, give its path: ./{command[0]})")
    if pid is not None:
        from .capture.proctree import cmdline_of
        command = (shlex.join(("pid", str(pid), *(cmdline_of(pid) or []))),)
    try:
        opts = CaptureOptions(command=list(command), pid=pid, out=Path(out), backend=backend,
                              env=parse_env(env_pairs, "--env"),
                              port=port, allow_running=allow_running, timeout_s=parse_limit(timeout, "--timeout"),
                              redact=not no_redact, redact_output=redact_output, force=force, attach_workers=attach_workers,
                              attach_match=parse_regex(attach_match, "--attach-match"),
                              debugger=debugger, command_deadline_s=parse_duration(command_deadline),
                              attach_delay_s=parse_duration(attach_delay) if attach_delay else None,
                              coredump=not no_coredump, full_core=full_core, agent=not no_agent,
                              alloc_history=alloc_history,
                              hang_after_s=parse_limit(hang_after, "--hang-after") if hang_after else None, even_idle=even_idle,
                              rocprof_args=shlex.split(rocprof_args))
        console = Console(quiet)
        manifest = run_capture(opts, echo=console.message, console=console)
    except CaptureError as exc:
        if exc.status in (126, 127):                # refused like a shell: one line, its status
            click.echo(clean(f"faultkit capture: {exc}"), err=True)
            sys.exit(exc.status)
        raise click.ClickException(str(exc))
    if quiet:
        sys.exit(capture_status(manifest))
    if verbose:
        for note in (manifest.coredump or {}).get("notes") or []:
            click.echo(f"armed: {note}", err=True)
        click.echo(f"files: {', '.join(f'{k} ({v:,} bytes)' for k, v in (manifest.files or {}).items())}",
                   err=True)
    v = run_triage([out]).verdict
    click.echo(clean(f"bundle: {out} ({manifest.ended_by}, {manifest.exit})"), err=True)
    if manifest.kernel_log and manifest.kernel_log.problem:
        click.echo(clean(f"kernel log: missing: {manifest.kernel_log.problem}"), err=True)
    if manifest.live_output_dropped_bytes:
        click.echo(f"live output: {manifest.live_output_dropped_bytes:,} bytes not shown (what faultkit's output "
                   f"goes to did not keep up); {clean(os.path.join(out, 'server.log'))} has all of it", err=True)
    click.echo(clean(f"verdict: {v.level}" + (f" {display_name(v.kernel)}" if v.kernel else "")
                     + (f" (top candidate {display_name(v.candidates[0].kernel)})" if v.candidates and not v.kernel
                        else "")), err=True)
    import shlex                                    # commands to copy-paste: quoted, no "bundle//x"
    click.echo(clean(f"report: faultkit triage {shlex.quote(str(out))}    timeline: faultkit timeline "
                     f"{shlex.quote(str(out))} -o {shlex.quote(os.path.join(out, 'timeline.pftrace'))}"), err=True)
    sys.exit(capture_status(manifest))


from ._signals import EXIT_TIMEOUT  # noqa: E402,F401 - one owner: the capture status rule


def capture_status(manifest) -> int:
    """Like a shell: the target's exit status, 128+N for a signal; an interrupted capture 128+signal;
    a capture whose --timeout or --hang-after ran out 124, like timeout(1)."""
    from ._signals import capture_exit_status
    return capture_exit_status(manifest)


FOLDER_OUTPUTS = (("capture",), ("trials", "run"), ("amplify", "run"))     # verbs whose -o is a folder; elsewhere a file


def error_folders(argv: list[str]) -> list[Path]:
    """Where an internal error's traceback may go, best first: beside what the command writes (its
    -o folder, or the folder of its -o file, where that exists), else the user's cache folder. A
    traceback holds paths and evidence: never a shared folder like /tmp."""
    from .private_files import cache_dir
    out = []
    words = [a for a in argv if not a.startswith("-")][:2]
    for i, a in enumerate(argv):
        if a == "--":
            break
        value = argv[i + 1] if a in ("-o", "--output") and i + 1 < len(argv) else \
            a.split("=", 1)[1] if a.startswith("--output=") else None
        if value:
            p = Path(value)
            folder = p if any(tuple(words[:len(v)]) == v for v in FOLDER_OUTPUTS) else p.parent
            if folder.is_dir():
                out.append(folder)
    try:
        out.append(cache_dir())
    except OSError:
        pass
    return out

# ---------------- the fleet: `watch` (a node agent) and `registry` (incidents of many nodes) ----------------


def _store(db, read_only=False):
    try:
        from .fleet.store import RegistryError, open_store
    except ImportError as exc:      # pragma: no cover - the extra is part of the test install
        raise click.ClickException(f"the registry needs its extra: pip install 'faultkit[fleet]' ({exc})") from None
    try:
        return open_store(db, read_only=read_only)
    except ImportError as exc:
        raise click.ClickException(f"the registry needs its extra: pip install 'faultkit[fleet]' ({exc})") from None
    except RegistryError as exc:
        raise click.ClickException(str(exc)) from None


_db = click.option("--db", envvar="FAULTKIT_REGISTRY", metavar="PATH|postgresql://...",
                   help="the registry: a DuckDB file (default ~/.local/share/faultkit/registry.duckdb) "
                        "or a PostgreSQL URL")
_fmt = click.option("-f", "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)


@main.group()
def registry() -> None:
    """Incidents from many nodes in one store: which signatures recur, where, and whether they look
    like software (many nodes and GPUs) or hardware (one GPU with a history)."""


@registry.command("add")
@click.argument("inputs", nargs=-1, required=True)
@_db
@click.option("--node", help="the node the evidence came from (default: the bundle's manifest)")
@click.option("--job", help="the job id (default: the manifest or the launcher's variables)")
@quiet_option
@verbose_option
def registry_add(inputs, db, node, job, quiet, verbose) -> None:
    """Add triage reports (faultkit.triage/1 JSON), bundles or logs (triaged here). Adding the same
    report twice keeps one copy. Exit 1 when an input could not be read (the others are added)."""
    from .fleet.intake import intake
    failed, read = False, []
    for path in inputs:            # triaged first: a DuckDB registry is held only while adding
        records, problems = intake(path, node=node, job=job)
        for p in problems:
            click.echo(f"problem: {clean(p)}", err=True)
        if verbose:
            for r in records:
                click.echo(clean(f"{path}: {r.node} {r.gpu or '?'} pid {r.pid}: signature {r.signature} "
                                 f"({r.kernel_key or 'no kernel named'}, {r.fault_kind})"), err=True)
        failed |= bool(problems) and not records
        read.append((path, records))
    store = _store(db)
    for path, records in read:
        added = store.add(records)
        if not quiet:
            click.echo(clean(f"{path}: {len(records)} incident(s), {added} new"), err=True)
    store.close()
    if failed:
        sys.exit(EXIT_INPUT)


@registry.command("top")
@_db
@click.option("-n", "limit", type=click.IntRange(min=1), default=20, show_default=True)
@_fmt
@quiet_option
@verbose_option
def registry_top(db, limit, fmt, quiet, verbose) -> None:  # noqa: ARG001 - one -q/-v on every verb
    """Signatures ranked by incidents, then nodes."""
    from .fleet.render import row_json, top_text
    store = _store(db, read_only=True)
    rows, total = store.top(limit), store.count()
    store.close()
    if fmt == "json":
        click.echo(json.dumps({"incidents": total, "signatures": [row_json(r) for r in rows]}, indent=2))
    else:
        click.echo(top_text(rows, total), nl=False)


@registry.command("show")
@click.argument("signature")
@_db
@_fmt
@quiet_option
@verbose_option
def registry_show(signature, db, fmt, quiet, verbose) -> None:  # noqa: ARG001 - one -q/-v on every verb
    """One signature: where and when, its driver-event chains, versions, and the hardware/software suspicion."""
    from .fleet.render import show_text
    store = _store(db, read_only=True)
    data = _show(store, signature)
    store.close()
    if data is None:
        raise click.ClickException(f"no signature {signature!r} in the registry (or the prefix is ambiguous)")
    click.echo(json.dumps(data, indent=2) if fmt == "json" else show_text(data), nl=fmt == "json")


def _show(store, signature):
    from .fleet.hardware import judge_signature
    from .fleet.render import show_json
    sig = store.resolve(signature)
    row = store.signature(sig) if sig else None
    if row is None:
        return None
    hist = store.gpu_histories(sig)
    return show_json(row, judge_signature(row.incidents, row.nodes, row.gpus, hist), hist,
                     store.versions(sig), store.chains(sig), store.incidents(sig)[:50])


@registry.command("similar")
@click.argument("source")
@_db
@_fmt
@quiet_option
@verbose_option
def registry_similar(source, db, fmt, quiet, verbose) -> None:  # noqa: ARG001 - one -q/-v on every verb
    """Incidents like this bundle's, log's or report's: the same signature, the same kernel with
    another fault, other signatures on the same GPU."""
    from .fleet.intake import intake
    records, problems = intake(source)
    for p in problems:
        click.echo(clean(f"problem: {p}"), err=True)
    if not records:
        raise click.ClickException(f"{source}: no fault found to compare")
    store = _store(db, read_only=True)
    out = []
    for r in records:
        same = store.signature(r.signature)
        out.append({"signature": r.signature, "kernel_key": r.kernel_key, "fault_kind": r.fault_kind,
                    "same_signature": _show(store, r.signature) if same else None,
                    "same_kernel_other_fault": [dict(zip(("signature", "fault_kind", "code", "incidents"), x))
                                                for x in (store.same_kernel(r.kernel_key, r.signature)
                                                          if r.kernel_key else [])],
                    "same_gpu_other_signatures": [dict(zip(("signature", "kernel_key", "fault_kind", "incidents"), x))
                                                  for x in store.same_gpu(r.node, r.gpu or "?", r.signature)]})
    store.close()
    if fmt == "json":
        click.echo(json.dumps(out, indent=2))
        return
    from .fleet.render import show_text
    for o in out:
        click.echo(clean(f"{source}: signature {o['signature']} ({o['kernel_key'] or 'no kernel named'}, {o['fault_kind']})"))
        if o["same_signature"]:
            click.echo(show_text(o["same_signature"]), nl=False)
        else:
            click.echo("  not seen before in the registry")
        for x in o["same_kernel_other_fault"]:
            click.echo(clean(f"  same kernel, other fault: {x['signature']} {x['fault_kind']} {x['code'] or ''} ({x['incidents']})"))
        for x in o["same_gpu_other_signatures"]:
            click.echo(clean(f"  same GPU, other signature: {x['signature']} {x['kernel_key'] or ''} {x['fault_kind']} ({x['incidents']})"))


@registry.command("export")
@_db
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="a .parquet file")
@quiet_option
@verbose_option
def registry_export(db, output, quiet, verbose) -> None:  # noqa: ARG001 - one -q/-v on every verb
    """Every incident (with its signature) as Parquet, for analysis elsewhere."""
    from .fleet.store import write_parquet
    store = _store(db, read_only=True)
    try:
        n = write_parquet(store, output)
    except OSError as exc:
        raise click.ClickException(f"cannot write {output}: {exc.strerror or exc}") from None
    finally:
        store.close()
    if not quiet:
        click.echo(f"wrote {output}: {n:,} incident(s)", err=True)


EXIT_NPD_PROBLEM, EXIT_NPD_UNKNOWN = 1, 2          # node-problem-detector's custom plugin protocol
EXIT_SLURM_DRAIN = 1                                # a health check's non-zero: the node needs attention


def _default_spool() -> str:
    import os
    if os.geteuid() == 0:
        return "/var/spool/faultkit"
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return os.path.join(base, "faultkit", "spool")


@main.command()
@click.option("--node", help="this node's name in metrics and incidents (default: the host name)")
@click.option("--spool", type=click.Path(file_okay=False), help="incident folders and the read cursors "
              "(default /var/spool/faultkit as root, else ~/.local/state/faultkit/spool)")
@click.option("--kernel-log", default="kmsg", show_default=True, metavar="kmsg|PATH",
              help="/dev/kmsg, or a file a syslog daemon writes (followed across rotation)")
@click.option("--log", "logs", multiple=True, metavar="PATH", help="a server log to follow too")
@click.option("--cores", "core_dirs", multiple=True, metavar="DIR", help="where runtimes drop cores (listed per incident)")
@click.option("--metrics-port", type=click.IntRange(0, 65535), help="serve Prometheus metrics on this port")
@click.option("--metrics-addr", default="127.0.0.1", show_default=True)
@click.option("--textfile", type=click.Path(dir_okay=False), help="also write the metrics for node_exporter's textfile collector")
@click.option("--otlp-endpoint", metavar="URL", help="send an OpenTelemetry log record per incident (OTLP/HTTP)")
@click.option("--db", metavar="PATH|postgresql://...", help="add each incident to this registry")
@click.option("--quiet-after", default="5s", show_default=True, metavar="DURATION",
              help="an incident closes after this long without a new sign (a storm stays one incident)")
@click.option("--from-start", is_flag=True, help="on a first start, read the log from its start (else from now on)")
@click.option("--mode", type=click.Choice(["daemon", "npd", "slurm"]), default="daemon", show_default=True,
              help="npd: one pass, node-problem-detector's exit codes (0 ok, 1 problem, 2 unknown); slurm: one "
                   "pass, exit 1 only when the hardware is suspected (a health check that drains)")
@quiet_option
@verbose_option
def watch(node, spool, kernel_log, logs, core_dirs, metrics_port, metrics_addr, textfile, otlp_endpoint, db,
          quiet_after, from_start, mode, quiet, verbose) -> None:
    """Follow this node's kernel log (and server logs): each GPU fault or hang sign becomes an incident
    folder in the spool, triaged, counted in Prometheus metrics, sent as an OpenTelemetry record and
    added to a registry. Ends on SIGTERM or Ctrl-C."""
    import platform
    import signal
    from pathlib import Path

    from .fleet.watch import WatchOptions, run

    stopping = {"now": False}
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.__setitem__("now", True))
    # SIGHUP (a logrotate postrotate, a closed terminal) is no end for an agent: the logs are
    # followed across rotation without it. Its default action lost the open incident.
    signal.signal(signal.SIGHUP, lambda *_: None)
    opts = WatchOptions(node=node or platform.node(), spool=Path(spool or _default_spool()), kernel_log=kernel_log,
                        logs=tuple(logs), core_dirs=tuple(core_dirs), quiet_s=parse_duration(quiet_after),
                        from_start=from_start, metrics_port=metrics_port, metrics_addr=metrics_addr,
                        textfile=textfile, otlp_endpoint=otlp_endpoint, registry_db=db)
    once = mode != "daemon"
    if not quiet and not once:
        click.echo(clean(f"faultkit watch: {opts.node}: following {kernel_log}" + "".join(f", {p}" for p in logs)
                         + f"; incidents into {opts.spool}"), err=True)
    try:
        w = run(opts, once=once, stop=lambda: stopping["now"])
    except RuntimeError as exc:            # the registry named by --db cannot be used: said, no traceback
        raise click.ClickException(clean(str(exc))) from None
    except OSError as exc:                 # the spool cannot be made (read-only, full): said
        message = clean(f"{exc.filename}: {exc.strerror or exc}" if exc.filename else f"{exc.strerror or exc}")
        if mode == "npd":                  # NPD's "unknown", never its "problem"
            click.echo(f"Error: {message}", err=True)
            sys.exit(EXIT_NPD_UNKNOWN)
        raise click.ClickException(message) from None
    for p in w.problems:
        click.echo(f"problem: {clean(p)}", err=True)
    for s in w.closed:             # the incidents themselves are the verb's output: on stdout, always
        click.echo(clean(s["line"]))
        if verbose:
            click.echo(clean(f"incident {s['id']}: {opts.spool / s['id']}"), err=True)
    if mode == "npd":
        sys.exit(EXIT_NPD_PROBLEM if w.closed else EXIT_NPD_UNKNOWN if w.problems else 0)
    if mode == "slurm":
        hard = [s for s in w.closed if s["suspect"] == "hardware"]
        for s in hard:
            click.echo(clean(f"faultkit: drain {opts.node}: hardware suspected ({', '.join(s['gpus']) or 'GPU'}: "
                       f"{', '.join(sorted(s['kinds']))})"))
        sys.exit(EXIT_SLURM_DRAIN if hard else 0)




def run() -> None:
    """The entry point: any unexpected error is one line, with the traceback saved to a file."""
    try:
        main(standalone_mode=True, prog_name="faultkit")   # also under `python -m faultkit.cli`: usage, completion
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as exc:
        from .private_files import WRITE_ERRNOS, CannotWrite
        if not isinstance(exc, CannotWrite) and exc.errno not in WRITE_ERRNOS:
            _internal_error(exc)
        # A full disk, a read-only folder, a quota: the system's answer, not faultkit's fault. Files
        # already written are complete and kept; the one being written never replaced anything.
        what = exc if isinstance(exc, CannotWrite) else \
            f"{exc.filename}: cannot write ({exc.strerror})" if exc.filename else f"cannot write ({exc.strerror})"
        click.echo(clean(f"faultkit: {what}; no file was left half-written"), err=True)
        sys.exit(EXIT_WRITE)
    except Exception as exc:                         # noqa: BLE001 - the last line of defence
        _internal_error(exc)
    finally:
        # Everything is written and closed by now. The interpreter's last collections at exit would
        # walk every object the imports made (pandas' alone: about 0.12 s); frozen, they are skipped.
        import gc
        gc.freeze()


def _internal_error(exc: BaseException) -> None:
    """One line, the traceback saved beside the output (or in the user's cache), exit 70 (called
    inside the `except` that caught it: the traceback is the current one)."""
    import traceback
    where = ""
    for folder in error_folders(sys.argv[1:]):
        path = folder / f"faultkit-error-{os.getpid()}.txt"
        try:
            from .private_files import write_private
            write_private(path, traceback.format_exc())
        except OSError:
            continue
        where = f"; details in {path}"
        break
    click.echo(clean(f"faultkit: internal error: {type(exc).__name__}: {exc}{where}"), err=True)
    sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    run()
