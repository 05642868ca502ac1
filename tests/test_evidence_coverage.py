"""docs/evidence-coverage.md stays true: every row that says faultkit reads a message names a test
that exists, so a row cannot keep its claim after its test is deleted or renamed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "evidence-coverage.md"
STATUSES = ("covered", "added now", "not yet")
TEST_REF = re.compile(r"^(?P<file>tests/[\w/]+\.py)::(?P<name>test_\w+)$")


def _cells(line: str) -> list[str]:
    # a `|` inside a code span is part of a format, not a column border; a span opened by N
    # backticks closes at the next run of N (formats that hold a backtick use ``double`` ones)
    parts, cell, fence = [], "", 0
    for run in re.findall(r"`+|[^`]", line.strip()[1:-1]):
        if run.startswith("`"):
            fence = len(run) if not fence else (0 if len(run) == fence else fence)
        if run == "|" and not fence:
            parts.append(cell.strip())
            cell = ""
        else:
            cell += run
    parts.append(cell.strip())
    return parts


def coverage_rows(text: str) -> list[dict[str, str]]:
    """Every data row of every table that has `status` and `test` columns, as {column: cell}."""
    rows, header = [], None
    for line in text.splitlines():
        if not line.startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            header = cells
            continue
        if set(cells) <= {"---", ":---", "---:"} or all(set(c) <= set("-: ") for c in cells):
            continue
        if "status" in header and "test" in header:
            assert len(cells) == len(header), f"row has {len(cells)} cells, header {len(header)}: {line[:120]}"
            rows.append(dict(zip(header, cells)))
    return rows


def _test_functions(path: Path) -> set[str]:
    """Every function defined in a file, at any depth (in classes, functions, if/try/with/match blocks).
    A def is a statement, so only statement lists are walked, not expressions: the same names as
    ast.walk finds (checked on every test file), at a tenth of its time."""
    names, todo = set(), list(ast.parse(path.read_text()).body)
    while todo:
        n = todo.pop()
        if isinstance(n, ast.FunctionDef):
            names.add(n.name)
        for name in ("body", "orelse", "finalbody", "handlers", "cases"):
            block = getattr(n, name, None)
            if isinstance(block, list):
                todo.extend(block)
    return names


def test_every_reading_row_names_a_test_that_exists():
    rows = coverage_rows(DOC.read_text())
    assert len(rows) > 50, "the coverage table lost its rows"
    ids, cache = set(), {}
    for row in rows:
        assert row["id"] not in ids, f"row id {row['id']} twice"
        ids.add(row["id"])
        status = next((s for s in STATUSES if row["status"].startswith(s)), None)
        assert status, f"{row['id']}: status {row['status']!r} is none of {STATUSES}"
        if status == "not yet":
            continue
        m = TEST_REF.match(row["test"])
        assert m, f"{row['id']} says {status} but names no test (tests/<file>.py::test_name): {row['test']!r}"
        path = ROOT / m["file"]
        assert path.is_file(), f"{row['id']}: {m['file']} does not exist"
        names = cache.setdefault(path, _test_functions(path))
        assert m["name"] in names, f"{row['id']}: {m['file']} has no {m['name']}"


def test_the_row_check_catches_a_missing_test(tmp_path):
    # the checker itself: a covered row whose test is gone is caught, a 'not yet' row needs none
    table = ("| id | message | status | test |\n|---|---|---|---|\n"
             "| a | `x | y` ``p `q' | r`` | covered | tests/test_evidence_coverage.py::test_no_such_test |\n"
             "| b | z | not yet | — |\n")
    rows = coverage_rows(table)
    assert [(r["id"], r["message"], r["status"]) for r in rows] == [("a", "`x | y` ``p `q' | r``", "covered"),
                                                                     ("b", "z", "not yet")]
    assert "test_no_such_test" not in _test_functions(Path(__file__))
