"""`faultkit amplify`: the verb's arguments, wired to engine.run and the report (cli.py registers it).

A verb of its own rather than a mode of `trials run`: its arms come from a table rather than from the
user, it stops arms early, runs checkers and ends with a verdict on the cause class; what it shares
with trials (the plan, the trial folders, run_one, the statistics) it imports from there."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from . import arms as A

# The CLI's own helpers (one owner each, in cli.py), handed over when cli.py registers the verb: an
# import of cli.py from here would be a cycle.
_cli: dict = {}


def registered(parse_duration, parse_regex, emit, output_format) -> click.Group:
    _cli.update(parse_duration=parse_duration, parse_regex=parse_regex, emit=emit, output_format=output_format)
    return amplify


@click.group()
def amplify() -> None:
    """Make an intermittent GPU crash come every time, and say which kind of bug it is."""


@amplify.command("run")
@click.argument("server", nargs=-1, required=True)
@click.option("--arm", "arm_names", multiple=True, metavar="NAME",
              help=f"an amplifier arm (repeat); default {', '.join(A.DEFAULT)}; `faultkit amplify arms` lists them")
@click.option("--site", "sites", multiple=True, metavar="[MODULE:]FUNCTION",
              help="a Python call site for jitter and hold-back (a scheduler's step, a request's hand-off)")
@click.option("--client", help="load generator started once the server is ready; its end ends the trial "
                               "({port} is replaced by the trial's port)")
@click.option("-n", "--rounds", type=click.IntRange(min=1), default=10, show_default=True,
              help="at most this many trials per arm (each round: every running arm once)")
@click.option("--alpha", type=click.FloatRange(0.0001, 0.5), default=0.05, show_default=True,
              help="false-decision rate per arm over all looks")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the order and of the jitter")
@click.option("--port", type=click.IntRange(1, 65535), help="server port: free before each trial; readiness for --client")
@click.option("--ready-pattern", help="regex in the server output that means ready (instead of the port)")
@click.option("--timeout", "trial_timeout", default="40m", show_default=True, metavar="DURATION",
              help="end a trial without a crash after this")
@click.option("--gpus", help="GPU ids for parallel trials, e.g. 0,1,2,3 (one set per trial, disjoint)")
@click.option("--gpus-per-trial", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--no-agent", is_flag=True, help="no in-process agent (no black box; the agent's arms cannot run)")
@click.option("--no-coredump", is_flag=True, help="do not arm GPU core dumps in the trials")
@click.option("--alloc-history", is_flag=True, help="the agent records every block, not only segments (slower)")
@click.option("--no-early-stop", is_flag=True, help="run every round; one look at the end decides (Fisher at alpha)")
@click.option("-o", "--output", "out", default="amplify", show_default=True, type=click.Path(file_okay=False),
              help="the experiment's folder (0700): plan.json, one folder per trial, amplify-report.md/.json")
@click.option("-q", "--quiet", is_flag=True, help="print nothing on stderr but warnings and errors")
@click.option("-v", "--verbose", is_flag=True, help="say on stderr what was read and every problem met")
def amplify_run(server, arm_names, sites, client, rounds, alpha, seed, port, ready_pattern, trial_timeout, gpus,
                gpus_per_trial, no_agent, no_coredump, alloc_history, no_early_stop, out, quiet=False,
                verbose=False) -> None:
    """Run the plain server and amplifier arms in rounds until each arm is decided (resumes in the
    same folder), then write the report and print the verdict.

    Exit status: 0 done; 1 refused (port in use, bad arguments, another experiment's folder); 130
    interrupted (run the same command to resume).

    \b
    Example:
      faultkit amplify run --port 30123 --client 'python scripts/uaf_server.py --client --port 30123' \\
          -o amp/ -- python scripts/uaf_server.py --port 30123"""
    parse_duration, parse_regex = _cli["parse_duration"], _cli["parse_regex"]
    from .engine import AmplifyError, Options, run
    from ..trials.runner import TrialsError
    command = server[0] if len(server) == 1 else shlex.join(server)
    agent_arms = [n for n in arm_names if n in A.BY_NAME and A.BY_NAME[n].agent]
    if no_agent and agent_arms:
        raise click.UsageError(f"--no-agent: the arm(s) {', '.join(agent_arms)} are applied by the agent")
    opts = Options(command=command, out=Path(out), client=client, arms=tuple(arm_names) or A.DEFAULT,
                   sites=tuple(sites), rounds=rounds, alpha=alpha, seed=seed, port=port,
                   timeout_s=parse_duration(trial_timeout), ready_pattern=parse_regex(ready_pattern, "--ready-pattern"),
                   gpus=tuple(g for g in (gpus or "").split(",") if g.strip()), gpus_per_trial=gpus_per_trial,
                   agent=not no_agent, coredump=not no_coredump, alloc_history=alloc_history,
                   early_stop=not no_early_stop)
    say = (lambda m: None) if quiet else (lambda m: click.echo(m, err=True))
    try:
        facts = run(opts, echo=say, warn=lambda m: click.echo(m, err=True))
    except (AmplifyError, TrialsError) as exc:
        raise click.ClickException(str(exc))
    except KeyboardInterrupt:
        click.echo(f"interrupted: finished trials are kept in {out}; run the same command to resume", err=True)
        sys.exit(130)
    _write(facts, Path(out), quiet)


def _write(facts: dict, out: Path, quiet: bool) -> dict:
    from ..private_files import write_private
    from .report import RENDERERS, summarise
    s = summarise(facts)
    write_private(out / "amplify-report.json", RENDERERS["json"](s))
    write_private(out / "amplify-report.md", RENDERERS["md"](s))
    click.echo(s["verdict"]["text"])
    if not quiet:
        click.echo(f"report: {out / 'amplify-report.md'} (JSON: {out / 'amplify-report.json'})", err=True)
    return s


# the report's formats by -o's extension (as every report verb: -f, else the extension, else md)
REPORT_SUFFIXES = {".md": "md", ".markdown": "md", ".json": "json"}


@amplify.command("report")
@click.argument("folder", type=click.Path(exists=True, file_okay=False))
@click.option("-f", "--format", "fmt", type=click.Choice(["md", "json"]),
              help="md or json  [default: from -o's extension, else md]")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="a FILE instead of stdout (0600)")
@click.option("-q", "--quiet", is_flag=True, help="print nothing on stderr but warnings and errors")
@click.option("-v", "--verbose", is_flag=True, help="say on stderr what was read and every problem met")
def amplify_report(folder, fmt, output, quiet=False, verbose=False) -> None:
    """The report of an amplify folder (its finished trials, the looks replayed)."""
    emit = _cli["emit"]
    from .engine import AmplifyError, load_options, run
    from .report import RENDERERS, summarise
    try:
        opts = load_options(Path(folder))
        facts = run(opts, echo=(lambda m: click.echo(m, err=True)) if verbose else (lambda m: None),
                    warn=lambda m: click.echo(m, err=True), replay=True)
    except AmplifyError as exc:
        raise click.ClickException(str(exc))
    emit(RENDERERS[_cli["output_format"](output, fmt, REPORT_SUFFIXES, "md")](summarise(facts)), output, quiet)


@amplify.command("arms")
@click.option("-f", "--format", "fmt", type=click.Choice(["md", "json"]), default="md", show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="print nothing on stderr but warnings and errors")
@click.option("-v", "--verbose", is_flag=True, help="say on stderr what was read and every problem met")
def amplify_arms(fmt, quiet=False, verbose=False) -> None:
    """The amplifier arms: class, variables or switch, and the framework and version each applies to."""
    import json
    click.echo(json.dumps([a.to_json() for a in A.ARMS], indent=2) if fmt == "json" else A.table_markdown(), nl=False)
