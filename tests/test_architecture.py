"""The layering the design promises, checked on the package's own source: parsers below, analyses
that open no file, no import cycle."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import faultkit

PKG = Path(faultkit.__file__).parent
# limits: the byte bounds every reader and the trace checker share (a leaf: it imports no faultkit module)
MODEL_LAYER = {"faultkit.model", "faultkit.codes", "faultkit.trace_model", "faultkit.agent_model", "faultkit.hang_model",
               "faultkit.limits", "faultkit.manifest",     # manifest: the bundle's typed record, written and read
               "faultkit.demangle",       # demangle: a pure function of a name, used by readers and exporters alike
               "faultkit.lazy_re",        # lazy_re: re with compile() at first use (standard library and re_cache)
               "faultkit.re_cache",       # re_cache: the own patterns' compiled code across runs (in the user's cache)
               "faultkit.find_patterns"}  # find_patterns: which of many patterns may match (a leaf: re, hyperscan)
# The agent's format owners: standard library only, loaded by path inside the target, read by ingest.
AGENT_FORMAT = {"faultkit.agent", "faultkit.agent.ring", "faultkit.agent.files"}


def _module(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def _tree(path: Path) -> ast.Module:
    """A package file's syntax tree, parsed once per test run: every check here walks the whole
    package (the checks only read the trees)."""
    return ast.parse(path.read_text())


def _imports(path: Path) -> set[str]:
    """Every faultkit module a file imports, at the top or inside a function."""
    mod = _module(path)
    pkg = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
    out = set()
    for node in ast.walk(_tree(path)):
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
    for node in ast.walk(_tree(path)):
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


# Modules that open files for writing without faultkit.private_files, and why they may.
WRITERS_ALLOWED = {
    "faultkit/private_files.py": "the one writer",
    "faultkit/agent/runtime.py": "runs inside the target, loaded by path: it imports nothing of faultkit",
    "faultkit/agent/ring.py": "the agent's ring, written inside the target (same reason)",
    "faultkit/agent/build.py": "builds the agent's library with the compiler into faultkit's cache",
    "faultkit/limits.py": "a leaf (imports no faultkit module): spills a core out of an archive, 0600 O_EXCL",
    "faultkit/capture/cgroup.py": "writes the kernel's cgroup control files (cgroup.kill), not files of its own",
    "faultkit/capture/launcher.py": "writes a pid into the kernel's cgroup.procs",
    "faultkit/capture/coredump.py": "opens the core-pipe FIFO to unblock its reader",
}
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
WRITE_CALLS = {"write_text", "write_bytes", "mkstemp", "NamedTemporaryFile", "TemporaryFile", "SpooledTemporaryFile",
               "write_to_textfile", "copyfile", "copy", "copy2", "copytree", "move"}


def _mode_writes(node: ast.Call, pos: int) -> bool:
    mode = node.args[pos] if len(node.args) > pos else next((k.value for k in node.keywords if k.arg == "mode"), None)
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and bool(set(mode.value) & set("wax+"))


def file_writes(tree: ast.AST) -> list[tuple[int, str]]:
    """Every call in a module that opens a file for writing: open()/fdopen()/tarfile.open()/gzip.open()
    in a writing mode, os.open with a writing flag, Path.write_text/write_bytes, temporary files,
    copies, prometheus_client's textfile writer."""
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
        if name == "open" and owner == "os":
            flags = {n.attr for a in node.args[1:2] for n in ast.walk(a) if isinstance(n, ast.Attribute)}
            if flags & WRITE_FLAGS:
                out.append((node.lineno, "os.open for writing"))
        elif name == "open" and owner in ("", "io", "builtins") and _mode_writes(node, 1):
            out.append((node.lineno, "open(..., 'w')"))
        elif name == "open" and owner in ("tarfile", "gzip", "lzma", "bz2", "zipfile") and _mode_writes(node, 1) \
                and not any(k.arg == "fileobj" for k in node.keywords):     # into a stream the writer opened
            out.append((node.lineno, f"{owner}.open for writing"))
        elif name == "fdopen" and _mode_writes(node, 1):
            out.append((node.lineno, "os.fdopen for writing"))
        elif name in ("write_text", "write_bytes"):
            if isinstance(f, ast.Attribute) and owner != "terminal":      # Path's; terminal's write a stream
                out.append((node.lineno, name))
        elif name in WRITE_CALLS and (name not in ("copy", "move") or owner == "shutil"):
            out.append((node.lineno, name))
        elif name in ("mkdir", "makedirs"):      # folders too: private_dir makes them, and those above, 0700
            out.append((node.lineno, name))
    return out


def test_only_private_files_opens_a_file_for_writing():
    """One writer: atomic, 0600 in 0700 folders, evidence text redacted on the way (issue 36)."""
    found = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = f"faultkit/{path.relative_to(PKG).as_posix()}"
        if rel in WRITERS_ALLOWED:
            continue
        hits = file_writes(_tree(path))
        if hits:
            found[rel] = hits
    assert not found, f"these modules write files themselves; write through faultkit.private_files: {found}"
    for rel in WRITERS_ALLOWED:
        assert (PKG.parent / rel).exists(), f"{rel} is allowed to write but does not exist"


def test_every_writer_of_private_files_is_used():
    """One writer, no dead door: each public function of private_files is called by some other
    module (write_evidence, the redacting writer, was once defined and never used: evidence went
    through write_private with the redaction left to each caller)."""
    writer = ast.parse((PKG / "private_files.py").read_text())
    public = {n.name for n in writer.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}
    used = set()
    for path in PKG.rglob("*.py"):
        if path.name == "private_files.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Name) and node.id in public or isinstance(node, ast.Attribute) and node.attr in public:
                used.add(node.id if isinstance(node, ast.Name) else node.attr)
    assert public - used == set(), f"private_files defines writers no module uses: {sorted(public - used)}"


def test_kept_stacks_and_core_transcripts_are_written_redacting():
    """Evidence text goes through write_evidence: a stack tool's output is redacted as it is
    written, whoever made the Dump (capture's own path redacts it earlier too)."""
    import tempfile
    from faultkit.capture.stacks import Dump, RawStacks, write
    from faultkit.ingest.stacks import ProcessStacks
    raw = RawStacks(pid=7, source="py-spy", parser="py-spy",
                    text='Process 7: python serve.py --api-key sk-live0123456789abcdefABCDEF\nThread 7 (idle)\n')
    with tempfile.TemporaryDirectory() as d:
        (name,) = write(Dump(stacks=ProcessStacks(pid=7, source="py-spy"), raw=[raw]), Path(d), 1)
        kept = (Path(d) / name).read_text()
    assert "sk-live0123456789" not in kept and "--api-key <redacted>" in kept


def test_the_writer_check_sees_writes():
    # planted: each form the check must see, and two reads it must not count
    code = ("import os, shutil, tarfile\nopen(p, 'w')\nopen(p, mode='ab')\nos.open(p, os.O_WRONLY | os.O_CREAT)\n"
            "Path(p).write_text('x')\ntarfile.open(p, 'w:gz')\nshutil.copyfile(a, b)\nos.fdopen(fd, 'wb')\n"
            "Path(p).mkdir(parents=True)\nopen(p)\nos.open(p, os.O_RDONLY)\n")
    assert [line for line, _ in file_writes(ast.parse(code))] == [2, 3, 4, 5, 6, 7, 8, 9]
    assert file_writes(ast.parse((PKG / "private_files.py").read_text())), "the writer itself writes"


EVIDENCE_PRINTERS = ("faultkit/cli.py", "faultkit/show.py", "faultkit/fleet/render.py", "faultkit/export/hang_text.py")


def test_evidence_printed_by_the_verbs_goes_through_terminal_clean():
    """One terminal: what a verb prints from evidence passes terminal.clean. Checked where evidence
    is printed: every click.echo / print / stream write in these modules either prints a constant,
    or its text is built by clean(), or by a renderer whose module cleans (show, render, hang_text)."""
    for rel in EVIDENCE_PRINTERS:
        path = PKG.parent / rel
        text = path.read_text()
        assert "clean" in text, f"{rel} prints evidence without terminal.clean"
    tree = ast.parse((PKG / "cli.py").read_text())
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "echo" \
                and node.args and isinstance(node.args[0], (ast.JoinedStr, ast.BinOp)):
            names = {n.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
            calls = {n.func.id for n in ast.walk(node.args[0]) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            # an f-string that formats evidence (a problem, a why, a name from a record) must clean it
            evidence = names & {"p", "why", "f", "r", "x", "o", "path", "exc", "folder", "source"}
            if evidence and "clean" not in calls:
                bad.append(node.lineno)
    assert not bad, f"cli.py echoes evidence without clean() at lines {bad}"


# ---------------- one owner per fact (issue 32) ----------------

def _trees():
    for p in sorted(PKG.rglob("*.py")):
        yield str(p.relative_to(PKG)), _tree(p)


def test_levels_are_assigned_only_by_the_judge():
    """A level (certain, likely, candidates, or a private word such as 'possible') is given to a
    verdict, a claim's ceiling or a finding only in judge/; everything else reads them (`unknown`
    stands where there is no verdict to read)."""
    from faultkit.judge.levels import CANDIDATES, CERTAIN, LIKELY
    words = {CERTAIN, LIKELY, CANDIDATES, "possible", "candidate"}
    names = {"CERTAIN", "LIKELY", "CANDIDATES", "CANDIDATE"}

    def is_level(v) -> bool:
        return (isinstance(v, ast.Constant) and v.value in words) or (isinstance(v, ast.Name) and v.id in names) or \
            (isinstance(v, ast.IfExp) and (is_level(v.body) or is_level(v.orelse)))

    found = []
    for rel, tree in _trees():
        if rel.startswith("judge/"):
            continue
        for n in ast.walk(tree):
            targets = []
            if isinstance(n, ast.Assign):
                targets = [(t, n.value) for t in n.targets]
            elif isinstance(n, ast.AnnAssign) and n.value is not None:
                targets = [(n.target, n.value)]
            elif isinstance(n, ast.keyword) and n.arg in ("level", "ceiling"):
                targets = [(ast.Name(n.arg), n.value)]
            for t, v in targets:
                for tt, vv in (zip(t.elts, v.elts) if isinstance(t, ast.Tuple) and isinstance(v, ast.Tuple) else [(t, v)]):
                    name = tt.attr if isinstance(tt, ast.Attribute) else tt.id if isinstance(tt, ast.Name) else ""
                    if name in ("level", "ceiling") and is_level(vv):
                        found.append(f"{rel}:{n.lineno}")
    assert not found, f"levels assigned outside faultkit/judge: {found}"


def test_no_module_outside_sources_lists_a_fault_word():
    """The words whose line ends a capture are the sources' stop anchors (faultkit/sources/): no
    other module holds a list of them (a tuple, list or set of strings with one in it, or a pattern
    joining two), so what a fault line is cannot drift apart again."""
    from faultkit.sources import stop_words
    stops = stop_words()
    found = []
    for rel, tree in _trees():
        if rel.startswith("sources/"):
            continue
        for n in ast.walk(tree):
            if isinstance(n, (ast.Tuple, ast.List, ast.Set)):
                items = [e.value for e in n.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
                if len(items) > 1 and any(i in stops for i in items):
                    found.append(f"{rel}:{n.lineno}: {items[:3]}")
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and "|" in n.value:
                hits = [w for w in stops if w in n.value or w.replace(" ", r"\ ") in n.value]
                if len(hits) > 1:
                    found.append(f"{rel}:{n.lineno}: a pattern of {hits[:3]}")
    assert not found, f"fault words listed outside faultkit/sources: {found}"


def test_one_table_of_xids():
    """codes.XIDS is the one table of NVIDIA Xids (meaning, hardware sign, consequence); a module that
    speaks of Xids holds no literal of two Xid numbers of its own."""
    from faultkit.codes import XIDS
    known = set(XIDS)
    found = []
    for rel, tree in _trees():
        if rel == "codes.py" or "xid" not in (PKG / rel).read_text().lower():
            continue
        for n in ast.walk(tree):
            keys = n.keys if isinstance(n, ast.Dict) else n.elts if isinstance(n, (ast.Set, ast.Tuple, ast.List)) else []
            ints = {k.value for k in keys if isinstance(k, ast.Constant) and type(k.value) is int}
            if len(ints & known) >= 2:
                found.append(f"{rel}:{n.lineno}: {sorted(ints & known)}")
    assert not found, f"a second table of Xids: {found}"


def test_a_manifest_is_read_only_by_its_owner():
    """ingest/schema.py reads a bundle's manifest (read_manifest, check_manifest): nothing else parses
    one with json (a call on a manifest's path or text, into a name of it, or in a function named
    for it), bypassing the type checks."""
    found = []
    for rel, tree in _trees():
        if rel == "ingest/schema.py":
            continue
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            nodes = list(ast.walk(fn))
            into = {id(a.value): a.targets[0] for a in nodes if isinstance(a, ast.Assign)}   # unparsed where it matters
            for n in nodes:
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("loads", "load") \
                        and isinstance(n.func.value, ast.Name) and n.func.value.id == "json":
                    target = ast.unparse(into[id(n)]) if id(n) in into else ""
                    said = " ".join([*(ast.unparse(a) for a in n.args), target, fn.name]).lower()
                    if "manifest" in said:
                        found.append(f"{rel}:{n.lineno} in {fn.name}")
    assert not found, f"a manifest parsed outside ingest/schema.py: {found}"



# The words of a gdb-family session's grammar: its prompt, how it says a program ended.
GDB_GRAMMAR = ("gdb)", "gdb\\)", "Inferior ", "Program terminated with signal", "not being run")


def test_one_gdb_grammar():
    """The debugger's prompt and exit lines are written once, in the transcript parser
    (ingest/debugger.py) and the debugger source's markers (sources/debugger.py): the live driver
    (capture/gdb_driver.py) waits on the parser's patterns. No other module's string handed to
    re.compile holds a prompt or an exit line."""
    found = []
    for rel, tree in _trees():
        if rel in ("ingest/debugger.py", "sources/debugger.py"):
            continue
        for n in ast.walk(tree):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                    "compile", "search", "match", "fullmatch", "finditer", "findall") \
                    and isinstance(n.func.value, ast.Name) and n.func.value.id == "re" and n.args:
                for c in ast.walk(n.args[0]):
                    if isinstance(c, ast.Constant) and isinstance(c.value, (str, bytes)):
                        text = c.value.decode("latin-1") if isinstance(c.value, bytes) else c.value
                        hit = [w for w in GDB_GRAMMAR if w in text]
                        if hit:
                            found.append(f"{rel}:{n.lineno}: {hit}")
    assert not found, f"a second copy of the gdb grammar (use ingest/debugger.py's): {found}"


# ---------------- the README's Layout section is the package as it is ----------------

def _layout_paragraphs() -> tuple[str, dict[str, str]]:
    """The Layout block of README.md, and each top-level folder's paragraph (its line and the lines
    indented under it)."""
    readme = (PKG.parent / "README.md").read_text()
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    paragraphs: dict[str, str] = {}
    current = None
    for line in block.splitlines():
        m = __import__("re").match(r"^  (\w+)/ ", line)
        if m:
            current = m.group(1)
            paragraphs[current] = line
        elif line.startswith("   ") and current:
            paragraphs[current] += "\n" + line
        else:
            current = None
    return block, paragraphs


def test_the_readme_layout_names_every_module():
    import re
    block, paragraphs = _layout_paragraphs()
    missing = []
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG)
        if p.name == "__init__.py":
            continue
        if len(rel.parts) == 1:
            if not re.search(rf"(?<![\w/]){re.escape(p.name)}\b", block):
                missing.append(str(rel))
        elif not re.search(rf"\b{re.escape(p.stem)}\b", paragraphs.get(rel.parts[0], "")):
            missing.append(str(rel))
    assert not missing, f"README.md's Layout does not name: {missing}"


def test_the_readme_layout_names_no_module_that_is_gone():
    """Every `name.py` of the block is a file, and every snake_case name in a folder's paragraph is a
    module of that folder (or a file named elsewhere in the tree)."""
    import re
    block, paragraphs = _layout_paragraphs()
    stems = {p.stem for d in (PKG, PKG.parent / "scripts", PKG.parent / "tests") for p in d.rglob("*")}
    gone = [n for n in re.findall(r"(?<![\w.])(\w+)\.py\b", block) if n not in stems]
    for folder, text in paragraphs.items():
        here = {p.stem for p in (PKG / folder).rglob("*.py")} if (PKG / folder).is_dir() else set()
        gone += [f"{folder}/{w}" for w in re.findall(r"(?<![\w.`/-])([a-z]+(?:_[a-z]+)+)(?![\w.`(])", text)
                 if w not in here and w not in stems]
    assert not gone, f"README.md's Layout names what is not there: {gone}"
