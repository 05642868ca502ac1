"""The layering the design promises, checked on the package's own source: parsers below, analyses
that open no file, no import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import faultkit

PKG = Path(faultkit.__file__).parent
# limits: the byte bounds every reader and the trace checker share (a leaf: it imports no faultkit module)
MODEL_LAYER = {"faultkit.model", "faultkit.codes", "faultkit.trace_model", "faultkit.agent_model", "faultkit.hang_model",
               "faultkit.limits",
               "faultkit.demangle"}       # demangle: a pure function of a name, used by readers and exporters alike
# The agent's format owners: standard library only, loaded by path inside the target, read by ingest.
AGENT_FORMAT = {"faultkit.agent", "faultkit.agent.ring", "faultkit.agent.files"}


def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every faultkit module a file imports, at the top or inside a function."""
    mod = _module(path)
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("faultkit")}
        elif isinstance(node, ast.ImportFrom):
            base = pkg[: len(pkg) - node.level + 1] if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            if not name.startswith("faultkit"):
                continue
            for a in node.names:      # `from . import layout` imports a module, not a name
                sub = f"{name}.{a.name}"
                out.add(sub if (PKG.parent / (sub.replace(".", "/") + ".py")).exists() else name)
    return out


GRAPH = {_module(p): _imports(p) for p in PKG.rglob("*.py")}


def test_ingest_imports_only_the_model_layer():
    for mod, deps in GRAPH.items():
        if mod.startswith("faultkit.ingest"):
            bad = {d for d in deps if not d.startswith("faultkit.ingest") and d not in MODEL_LAYER | AGENT_FORMAT}
            assert not bad, f"{mod} imports {bad}"


def test_the_bounds_are_a_leaf():
    assert not {d for d in GRAPH.get("faultkit.limits", set()) if d.startswith("faultkit")}


def test_analyses_and_exporters_import_no_parser():
    for mod, deps in GRAPH.items():
        if mod.startswith(("faultkit.analyze", "faultkit.export")):
            bad = {d for d in deps if d.startswith(("faultkit.ingest", "faultkit.capture", "faultkit.bundle",
                                                    "faultkit.triage"))}
            assert not bad, f"{mod} imports {bad}"


def test_analyses_open_no_file():
    words = ("open(", ".read_text(", ".read_bytes(", ".is_file(", ".exists(", "os.walk(", ".rglob(", ".glob(",
             "os.listdir(", "os.stat(")
    for path in (PKG / "analyze").glob("*.py"):
        text = path.read_text()
        found = [w for w in words if w in text]
        assert not found, f"{path.name} touches files: {found}"


def test_pickles_are_read_only_through_the_restricted_unpickler():
    # A flight record is a pickle from the machine of a hung job: plain data only (ingest/flight_recorder.py).
    for path in PKG.rglob("*.py"):
        text = path.read_text()
        found = [w for w in ("pickle.load(", "pickle.loads(", "pickle.Unpickler(", "import cPickle") if w in text]
        assert not found, f"{path.name} unpickles outside SafeUnpickler: {found}"


def test_no_import_cycle():
    state: dict[str, int] = {}

    def visit(mod: str, stack: list[str]) -> None:
        state[mod] = 1
        for dep in sorted(GRAPH.get(mod, ())):
            if dep == mod or dep not in GRAPH:
                continue
            assert state.get(dep) != 1, "import cycle: " + " -> ".join(stack[stack.index(dep):] + [dep]) \
                if dep in stack else f"import cycle through {dep}"
            if dep not in state:
                visit(dep, stack + [dep])
        state[mod] = 2

    for mod in sorted(GRAPH):
        if mod not in state:
            visit(mod, [mod])


def test_the_graph_is_real():
    # The checks above pass trivially on an empty graph; make sure the walker sees the known edges.
    assert "faultkit.trace_model" in GRAPH["faultkit.ingest.rocprof"]
    assert "faultkit.layout" in GRAPH["faultkit.capture.session"]
    assert "faultkit.ingest.traces" in GRAPH["faultkit.triage"]


def test_triage_imports_nothing_of_capture():
    # Core detection and opening, fault lines, debugger tables: shared knowledge lives outside
    # capture/, so reading evidence never depends on the code that records it.
    for mod, deps in GRAPH.items():
        if mod in ("faultkit.triage", "faultkit.bundle", "faultkit.core_debugger", "faultkit.fault_lines", "faultkit.find_words",
                   "faultkit.debuggers") or mod.startswith(("faultkit.ingest", "faultkit.analyze", "faultkit.export",
                                                            "faultkit.sources")):
            bad = {d for d in deps if d.startswith("faultkit.capture")}
            assert not bad, f"{mod} imports {bad}"
    assert "faultkit.core_debugger" in GRAPH["faultkit.triage"]


def test_reports_and_timelines_are_written_only_through_private_files():
    """What the CLI and the exporters write is private and atomic: one owner (private_files) opens it."""
    import re
    writes = re.compile(r"\.write_text\(|\.write_bytes\(|open\([^)]*['\"][wax]b?['\"]|os\.open\(")
    for path in [PKG / "cli.py", PKG / "triage.py", *(PKG / "export").glob("*.py")]:
        found = writes.findall(path.read_text())
        assert not found, f"{path.name} writes a file itself: {found}; use faultkit.private_files"
    assert "faultkit.private_files" in GRAPH["faultkit.export.pftrace"]


def _calls(path: Path, name: str) -> list[int]:
    """Lines where `name(...)` or `x.name(...)` is called in a file."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if called == name:
                out.append(node.lineno)
    return out


def test_only_the_judge_builds_verdicts():
    # Certainty is decided in one package (issue 22): every other module hands it claims.
    built = {str(p.relative_to(PKG)): _calls(p, "Verdict") for p in PKG.rglob("*.py")}
    outside = {p: lines for p, lines in built.items() if lines and not p.startswith("judge/")}
    assert not outside, f"Verdict(...) built outside faultkit/judge: {outside}"
    assert built["judge/decide.py"], "the walker sees no Verdict(...) in judge/decide.py: it is not looking"


def test_analyses_hand_claims_to_the_judge_and_never_call_it():
    for mod, deps in GRAPH.items():
        if mod.startswith(("faultkit.analyze", "faultkit.export")):
            assert "faultkit.judge.decide" not in deps and "faultkit.judge" not in deps, f"{mod} decides verdicts"
        if mod.startswith("faultkit.judge"):
            bad = {d for d in deps if d.startswith(("faultkit.analyze", "faultkit.ingest", "faultkit.capture",
                                                    "faultkit.export", "faultkit.triage", "faultkit.bundle"))}
            assert not bad, f"{mod} imports {bad}: the judge takes claims and faults only"
    assert "faultkit.judge.claims" in GRAPH["faultkit.analyze.log_claims"]


def test_the_agent_imports_nothing_of_faultkit():
    """It runs inside the target's interpreter, loaded by file path: faultkit is not importable there."""
    for mod, deps in GRAPH.items():
        if mod.startswith("faultkit.agent."):
            assert not deps, f"{mod} imports {deps}"


def test_verb_modules_leave_the_command_line_to_cli():
    # show, doctor, pack and trials return records and text; only cli.py parses options and exits
    for mod, path in ((_module(p), p) for p in PKG.rglob("*.py")):
        if mod in ("faultkit.show", "faultkit.doctor", "faultkit.pack") or mod.startswith("faultkit.trials"):
            text = path.read_text()
            assert "import click" not in text and "sys.exit(" not in text, mod
            assert "faultkit.cli" not in GRAPH[mod], mod
