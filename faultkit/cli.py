"""Command line: wires the stages together and nothing else."""

from __future__ import annotations

import sys

import click

from . import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="faultkit")
def main() -> None:
    """GPU fault forensics for ROCm and CUDA crashes."""


@main.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("--format", "fmt", type=click.Choice(["md", "markdown", "html", "json"]), default="md",
              show_default=True, help="report format")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), help="write here instead of stdout")
def triage(inputs: tuple[str, ...], fmt: str, output: str | None) -> None:
    """Postmortem report from logs: server log, dmesg/journalctl, folders, bundles, .tar.gz.

    Each file's kind is detected from its content."""
    from .analyze.incident import build
    from .bundle import collect
    from .export.report import RENDERERS

    incident = build(collect(list(inputs)))
    text = RENDERERS[fmt](incident)
    if output:
        with open(output, "w", encoding="utf-8") as fh:
            fh.write(text)
        v = incident.verdict
        click.echo(f"wrote {output}: verdict {v.level}" + (f" ({v.kernel})" if v.kernel else ""), err=True)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
