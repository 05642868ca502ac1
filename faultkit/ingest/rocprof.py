"""Read rocprofv3 outputs (CSV 6.2–7.x, JSON, rocpd SQLite) into tables with fixed schemas.

Every table is a pandas DataFrame with exactly the columns in SCHEMAS, whatever version or
format it came from: traces have millions of rows, so the records are columns, not objects.
Headers are matched by name, case-insensitively (the rocpd-converted CSV spells `Lds_Block_Size`,
adds `Guid`); rows are sorted by start time (rocprofv3 writes them in buffer-flush order). Files
from a crashed run may be missing, empty, cut mid-row or locked: every complete row is kept, the
damage is a Problem, and reading goes on.
"""

from __future__ import annotations

import io
import json
import os
import re
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..model import Problem
from ..trace_model import MISSING, Trace, conform, int64_cells, labels
from .schema import integer, text

# CSV column (lower-cased) -> schema column, per table
CSV_COLUMNS = {
    "dispatches": {"agent_id": "agent", "queue_id": "queue", "stream_id": "stream", "thread_id": "thread",
                   "dispatch_id": "dispatch_id", "kernel_id": "kernel_id", "kernel_name": "kernel",
                   "correlation_id": "correlation_id", "start_timestamp": "start", "end_timestamp": "end",
                   "grid_size_x": "grid_x", "grid_size_y": "grid_y", "grid_size_z": "grid_z",
                   "workgroup_size_x": "wg_x", "workgroup_size_y": "wg_y", "workgroup_size_z": "wg_z",
                   "lds_block_size": "lds", "group_segment_size": "lds", "scratch_size": "scratch",
                   "private_segment_size": "scratch", "vgpr_count": "vgpr", "sgpr_count": "sgpr"},
    "copies": {"direction": "direction", "source_agent_id": "src_agent", "destination_agent_id": "dst_agent",
               "stream_id": "stream", "correlation_id": "correlation_id", "start_timestamp": "start",
               "end_timestamp": "end"},
    "allocations": {"operation": "operation", "agent_id": "agent", "allocation_size": "size", "address": "address",
                    "starting_address": "address", "correlation_id": "correlation_id", "start_timestamp": "start",
                    "end_timestamp": "end"},
    "api": {"domain": "domain", "function": "function", "process_id": "pid", "thread_id": "thread",
            "correlation_id": "correlation_id", "start_timestamp": "start", "end_timestamp": "end"},
    "agents": {"node_id": "node_id", "logical_node_id": "logical_id", "agent_type": "type", "name": "gfx",
               "product_name": "name"},
}
TEXT_COLUMNS = {"agent", "kernel", "direction", "src_agent", "dst_agent", "operation", "domain", "function", "type",
                "name", "gfx", "address"}
FILE_KIND = re.compile(r"(?:^|[/_])(kernel_trace|memory_copy_trace|memory_allocation_trace|hip_api_trace|"
                       r"hip_runtime_trace|hsa_api_trace|marker_api_trace|rccl_api_trace|agent_info)\.csv$")
TABLE_OF = {"kernel_trace": "dispatches", "memory_copy_trace": "copies", "memory_allocation_trace": "allocations",
            "hip_api_trace": "api", "hip_runtime_trace": "api", "hsa_api_trace": "api", "marker_api_trace": "api",
            "rccl_api_trace": "api", "agent_info": "agents"}
HEADER_KIND = [
    ("dispatches", re.compile(r'"kind","agent_id","queue_id"')),
    ("copies", re.compile(r'"kind","direction"')),
    ("allocations", re.compile(r'"kind","operation","agent_id","(?:allocation_size|address)"')),
    ("api", re.compile(r'"domain","function","process_id"')),
    ("agents", re.compile(r'"node_id","logical_node_id","agent_type"')),
]


def _hex(x: str) -> int:
    try:
        v = int(x, 16)
    except ValueError:
        return MISSING              # a damaged cell: the row stays, this value is unknown
    return v if v < 1 << 63 else MISSING


def _hex_or_int(s: pd.Series) -> pd.Series:
    text = s.astype(str).str.strip().str.strip('"')
    hexes = text.str.startswith(("0x", "0X"))
    vals = pd.Series(np.full(len(text), MISSING, dtype=np.int64), index=s.index)
    if hexes.any():
        vals[hexes] = [_hex(x) for x in text[hexes]]
    rest = ~hexes
    if rest.any():
        vals[rest] = pd.to_numeric(text[rest], errors="coerce").fillna(MISSING).astype(np.int64)
    return vals


# ---------------- CSV ----------------

def sniff_table(path: Path, header: str) -> str | None:
    m = FILE_KIND.search(path.name)
    if m:
        return TABLE_OF[m.group(1)]
    low = header.lower()
    if low.startswith('"guid",'):
        low = low[len('"guid",'):]
    for table, rx in HEADER_KIND:
        if rx.match(low):
            return table
    return None


def _complete_bytes(path: Path) -> tuple[int, bool]:
    """Length of the file up to its last newline, and whether anything follows it (a cut row)."""
    size = path.stat().st_size
    if size == 0:
        return 0, False
    with open(path, "rb") as fh:
        pos = size
        while pos > 0:
            step = min(1 << 16, pos)
            fh.seek(pos - step)
            block = fh.read(step)
            nl = block.rfind(b"\n")
            if nl >= 0:
                end = pos - step + nl + 1
                return end, end < size
            pos -= step
    return 0, True


HEAD_BYTES = 1 << 16            # a start this near the top is the header (and comment lines) only


def _lines(path: Path, start: int, end: int) -> int:
    """Rows in [start, end): newlines, plus a last row without its newline."""
    if end <= start:
        return 0
    n, last = 0, b"\n"
    with open(path, "rb") as fh:
        fh.seek(start)
        left = end - start
        while left > 0:
            block = fh.read(min(left, 16 << 20))
            if not block:
                break
            n += block.count(b"\n")
            last = block[-1:]
            left -= len(block)
    return n + (last != b"\n")


class _Bounded(io.RawIOBase):
    """A read-only view of the first `limit` bytes of a file (to leave a cut last row out)."""

    def __init__(self, path: Path, limit: int, start: int = 0):
        self.fh = open(path, "rb")
        self.fh.seek(start)
        self.left = limit - start

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.left <= 0:
            return 0
        n = self.fh.readinto(memoryview(b)[:min(len(b), self.left)])
        self.left -= n
        return n

    def close(self) -> None:
        self.fh.close()
        super().close()


PART_BYTES = 8 << 20           # a read is parsed in parts of at least this much (each holds its own buffers)
MAX_PARTS = 8
PART_MAX_BYTES = 16 << 20       # ... and at most this much (so a read of any size holds bounded buffers)


def _read_parts(path: Path, start: int, limit: int, cols: list[str], text: dict,
                usecols: list[str]) -> pd.DataFrame | None:
    """Columns `usecols` of rows start..limit parsed in parts on as many threads as there are cores
    (up to 8): the C parser releases the GIL while it tokenizes, and a pandas before 3.1 reads a
    file on one thread. (Skipping the unused columns saves a fifth here; pandas' own parallel read
    of a path would not run with usecols.)
    None when the parts cannot be cut safely (a cut line does not start the way the first row does:
    it could be inside a quoted field) or disagree on a column's type; the caller then reads it whole."""
    workers = min(MAX_PARTS, os.cpu_count() or 1)
    # parts of at most PART_MAX_BYTES whatever the file's size: each part's tokenizer buffers (its
    # text and a pointer per field, twice the part's size) are freed and reused for the next, so
    # the read's memory is bounded and fresh pages (the kernel's page faults) are few
    n = max(min(workers, (limit - start) // PART_BYTES), -(-(limit - start) // PART_MAX_BYTES))
    if n < 2:
        return None
    cuts = [start]
    with open(path, "rb") as fh:
        fh.seek(start)
        first = fh.readline()
        first = first[:first.find(b",") + 1]
        for k in range(1, n):
            fh.seek(start + (limit - start) * k // n)
            fh.readline()
            at = fh.tell()
            if not first or not fh.readline().startswith(first) or not cuts[-1] < at < limit:
                return None
            cuts.append(at)
    cuts.append(limit)

    def parse(lo_hi: tuple[int, int]) -> pd.DataFrame:
        src = _Bounded(path, lo_hi[1], lo_hi[0])
        try:
            return pd.read_csv(io.BufferedReader(src, 1 << 20), header=None, names=cols, dtype=text, engine="c",
                               index_col=False, na_filter=False, usecols=usecols)
        finally:
            src.close()
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(min(n, workers)) as pool:
        parts = list(pool.map(parse, zip(cuts[:-1], cuts[1:])))
        out = {}
        plain = []
        for c in usecols:
            columns = [part[c] for part in parts]
            if all(isinstance(x.dtype, pd.CategoricalDtype) for x in columns):
                out[c] = pd.api.types.union_categoricals(columns, ignore_order=True)
            elif all(x.dtype == columns[0].dtype for x in columns) and isinstance(columns[0].dtype, np.dtype):
                out[c] = np.empty(sum(len(x) for x in columns), columns[0].dtype)
                plain.append(c)
            elif all(x.dtype == columns[0].dtype for x in columns):      # text (pandas' own str dtype)
                out[c] = np.concatenate([x.to_numpy() for x in columns])
            else:
                return None
        # Each part's columns copied into place by the threads that parsed them: one thread copying
        # 18 columns of a million rows into fresh memory was 0.1-0.4 s of the read's serial time
        offsets = np.cumsum([0] + [len(part) for part in parts]).tolist()

        def place(k: int) -> None:
            for c in plain:
                out[c][offsets[k]:offsets[k + 1]] = parts[k][c].to_numpy()
        list(pool.map(place, range(len(parts))))
    return pd.DataFrame(out, copy=False)


WINDOWED = {"dispatches", "api", "copies"}
WINDOW_MIN_BYTES = 32 << 20
SLACK_NS = 500_000_000         # rows are in buffer-flush order: read this much earlier than asked


def read_csv(path: Path, trace: Trace, since_ns: int | None = None, until_ns: int | None = None) -> int:
    """Read one rocprofv3 CSV into `trace`. Returns the rows kept.

    With `since_ns`, a large trace is read only from about that time on: a binary search over
    byte offsets finds where Start_Timestamp passes it (rows are nearly time-ordered), so a
    triage of a multi-GB trace reads the window before the fault, not the whole file. With
    `until_ns` it also stops where Start_Timestamp passes that time (rows are written when they
    complete, so the caller keeps a margin after the fault for work that ended after it)."""
    name = str(path)
    try:
        limit, cut = _complete_bytes(path)
        header, start_byte = _header(path)
        if cut and _whole_row(path, limit, header):
            limit, cut = path.stat().st_size, False
    except OSError as exc:
        trace.problems.append(Problem(name, f"unreadable ({exc.strerror or exc})"))
        return 0
    if not header:
        trace.problems.append(Problem(name, "empty file (the run ended before rocprofv3 wrote it)"))
        trace.files.append({"path": name, "table": None, "rows": 0, "state": "empty"})
        return 0
    table = sniff_table(path, header)
    if table is None:
        trace.problems.append(Problem(name, f"not a rocprofv3 trace this reader knows (header {header[:80]!r})"))
        return 0
    cols = [c.strip().strip('"') for c in header.split(",")]
    seen_cols: set[str] = set()
    for k, c in enumerate(cols):
        if c.lower() in seen_cols:          # a damaged header repeats a name: the repeat is not read
            cols[k] = f"{c}#{k}"
        seen_cols.add(cols[k].lower())
    windowed_from = None
    if since_ns is not None and table in WINDOWED and limit > WINDOW_MIN_BYTES:
        at = _offset_of_time(path, cols, start_byte, limit, since_ns - SLACK_NS)
        if at > start_byte:
            start_byte, windowed_from = at, since_ns - SLACK_NS
        if until_ns is not None:
            end = _offset_of_time(path, cols, start_byte, limit, until_ns)
            if start_byte < end < limit:
                limit, cut = end, False     # the rest is after the window, not damage
    mapping = CSV_COLUMNS[table]
    wanted = {c: mapping[c.lower()] for c in cols if c.lower() in mapping}
    try:
        df = _parse(path, limit, cols, wanted, start_byte)
    except (ValueError, pd.errors.ParserError) as exc:
        trace.problems.append(Problem(name, f"unreadable as CSV ({exc}); skipped"))
        return 0
    df = df.rename(columns=wanted)
    if windowed_from is not None:
        df = df[df["start"] >= windowed_from]
    if "start" in df and "end" in df:
        # a time that is not an int64 (cut, 2**64, inf) is as missing as an empty cell
        bad = (int64_cells(df["start"]) == MISSING) | (int64_cells(df["end"]) == MISSING)
        if bad.any():
            trace.problems.append(Problem(name, f"{int(bad.sum())} row(s) without timestamps (elisions or damage) "
                                                f"left out"))
            df = df[~bad]
    if cut:
        trace.problems.append(Problem(name, "cut mid-row (the run ended while it was written): the last, "
                                            "incomplete row was left out, every complete row kept"))
    df = _values(df, table)
    if "pid" not in df or (df["pid"] == MISSING).all():
        df["pid"] = _pid_from_name(path)
    conformed = conform(df, table)
    trace.add(table, conformed)
    trace.files.append({"path": name, "table": table, "rows": len(conformed), "format": "csv",
                        "read_from_byte": start_byte if windowed_from is not None else 0,
                        "read_to_byte": limit,
                        "header": "rocpd-converted" if header.lower().startswith('"guid"') else "direct",
                        "state": "cut" if cut else "complete"})
    return len(conformed)


def _offset_of_time(path: Path, cols: list[str], lo: int, hi: int, since_ns: int) -> int:
    """The byte offset of the first line whose Start_Timestamp is at or after `since_ns`."""
    try:
        col = [c.lower() for c in cols].index("start_timestamp")
    except ValueError:
        return lo
    with open(path, "rb") as fh:
        def start_at(off: int) -> tuple[int, int] | None:
            fh.seek(off)
            if off > lo:
                fh.readline()
            line_at = fh.tell()
            line = fh.readline()
            if not line or line_at >= hi:
                return None
            fields = line.decode("utf-8", "replace").split(",")
            # names may hold commas: count the start column from the end when the row is long
            k = col if len(fields) == len(cols) else len(fields) - (len(cols) - col)
            try:
                return int(fields[k].strip().strip('"')), line_at
            except (ValueError, IndexError):
                return None
        a, b = lo, hi
        while b - a > 1 << 16:
            mid = (a + b) // 2
            got = start_at(mid)
            if got is None or got[0] >= since_ns:
                b = mid
            else:
                a = mid
        fh.seek(a)
        if a > lo:
            fh.readline()
        return fh.tell()


def last_end_ns(path: Path) -> int | None:
    """The largest End_Timestamp among a trace's last rows (its end, cheaply)."""
    try:
        header, _ = _header(path)
        cols = [c.strip().strip('"').lower() for c in header.split(",")]
        col = cols.index("end_timestamp")
        size = path.stat().st_size
        with open(path, "rb") as fh:
            fh.seek(max(0, size - (1 << 16)))
            lines = fh.read().decode("utf-8", "replace").splitlines()[1:]
    except (OSError, ValueError):
        return None
    best = None
    for line in lines:
        fields = line.split(",")
        k = col if len(fields) == len(cols) else len(fields) - (len(cols) - col)
        try:
            v = int(fields[k].strip().strip('"'))
            best = v if best is None or v > best else best
        except (ValueError, IndexError):
            continue
    return best


def _header(path: Path) -> tuple[str, int]:
    """The header line and where the data starts: corpus excerpts carry `# ` comment lines and
    copy-pasted headers can be wrapped (an odd number of quotes until the line is whole)."""
    with open(path, "rb") as fh:
        pos, header = 0, ""
        for raw in fh:
            pos += len(raw)
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not header and line.startswith("# "):
                continue
            header += line
            if header.count('"') % 2 == 0:
                return header.strip(), pos
            if len(header) > 65536:
                break
    return header.strip(), pos


def _whole_row(path: Path, limit: int, header: str) -> bool:
    """A last line with every field and a final value is a row without its newline, not a cut one."""
    with open(path, "rb") as fh:
        fh.seek(limit)
        tail = fh.read(1 << 16).decode("utf-8", "replace")
    return tail.count(",") == header.count(",") and bool(re.search(r'(?:\d|")$', tail))


def _parse(path: Path, limit: int, cols: list[str], wanted: dict[str, str], start_byte: int) -> pd.DataFrame:
    """The C parser, letting it infer numbers (its fastest path; explicit dtypes were 2x slower).

    rocprofv3 writes names with unescaped quotes (`"op<"x">(int)"`), which the tokenizer splits
    into extra fields, shifting the rest: shifted text then shows up in a numeric column, and the
    file goes to the lenient reader instead of being kept shifted."""
    usecols = list(wanted)
    text = {c: "category" for c in cols if c in wanted and wanted[c] in TEXT_COLUMNS and wanted[c] != "address"}
    # A read of 16 MB or more (two parts) is parsed on several threads. Otherwise, from the file's
    # start, pandas reads the path itself: twice as fast as through a Python file object; a window that starts
    # later, or a header that is not one line (an excerpt's comments, a wrapped header whose quotes
    # span lines), is read through a bounded view from its first byte.
    from_top = start_byte <= HEAD_BYTES and _lines(path, 0, start_byte) == 1
    src = None if from_top else _Bounded(path, limit, start_byte)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", pd.errors.ParserWarning)
            df = _read_parts(path, start_byte, limit, cols, text, usecols)
            if df is None and from_top:
                # nrows (only for a cut file: its last row is left out) halves pandas' speed
                rows = _lines(path, start_byte, limit) if limit < path.stat().st_size else None
                df = pd.read_csv(path, header=None, names=cols, dtype=text, engine="c", index_col=False,
                                 na_filter=False, skiprows=1, nrows=rows)
            elif df is None:
                df = pd.read_csv(io.BufferedReader(src, 1 << 20), header=None, names=cols, dtype=text,
                                 engine="c", index_col=False, na_filter=False)
    except (pd.errors.ParserError, ValueError):
        return _parse_lenient(path, limit, cols, usecols, start_byte)
    finally:
        if src is not None:
            src.close()
    if any(issubclass(w.category, pd.errors.ParserWarning) for w in caught):
        return _parse_lenient(path, limit, cols, usecols, start_byte)     # rows with extra fields
    df = df[usecols]
    for c in usecols:
        if wanted[c] not in TEXT_COLUMNS and not pd.api.types.is_numeric_dtype(df[c]):
            as_text = df[c].astype(str)
            if (~as_text.str.fullmatch(r"\s*-?\d*\.?\d*\s*")).any():
                return _parse_lenient(path, limit, cols, usecols, start_byte)
            df[c] = pd.to_numeric(as_text.str.strip().replace("", None), errors="coerce")
    return df


def _parse_lenient(path: Path, limit: int, cols: list[str], usecols: list[str], start_byte: int) -> pd.DataFrame:
    """Split on commas and give the surplus back to the free-text column (kernel name, API
    function or marker message), the only field that can hold commas and quotes."""
    text_at = next((i for i, c in enumerate(cols) if c.lower() in ("kernel_name", "function")), None)
    n = len(cols)
    rows = []
    with open(path, "rb") as fh:
        fh.seek(start_byte)
        data = fh.read(limit - start_byte).decode("utf-8", "replace")
    for line in data.splitlines():
        if not line:
            continue
        f = line.split(",")
        if len(f) > n and text_at is not None:
            extra = len(f) - n
            f = f[:text_at] + [",".join(f[text_at:text_at + extra + 1])] + f[text_at + extra + 1:]
        if len(f) != n:
            f = (f + [""] * n)[:n]
        rows.append([x[1:-1] if len(x) >= 2 and x[0] == '"' and x[-1] == '"' else x for x in f])
    df = pd.DataFrame(rows, columns=cols)[usecols]
    for c in usecols:
        if c.lower() not in ("kernel_name", "function", "domain", "kind", "direction", "operation", "agent_id",
                             "source_agent_id", "destination_agent_id", "address", "agent_type", "name",
                             "product_name"):
            df[c] = pd.to_numeric(df[c], errors="coerce")
    return df


def _values(df: pd.DataFrame, table: str) -> pd.DataFrame:
    if "address" in df:
        df["address"] = _hex_or_int(df["address"])
    for col in ("agent", "src_agent", "dst_agent"):
        if col in df:
            df[col] = _each_unique(df[col], lambda v: str(v).strip('"'))
    if table == "copies" and "direction" in df:
        df["direction"] = _each_unique(df["direction"], lambda v: str(v).replace("MEMORY_COPY_", ""))
    if table == "allocations" and "operation" in df:
        df["operation"] = _each_unique(df["operation"], lambda v: str(v).replace("MEMORY_ALLOCATION_", ""))
    return df


def _each_unique(s: pd.Series, fn) -> pd.Series:
    """Apply `fn` once per distinct value (a column of millions holds a handful of values)."""
    cat = s.astype("category")
    return cat.cat.rename_categories([fn(c) for c in cat.cat.categories]) if \
        len(set(fn(c) for c in cat.cat.categories)) == len(cat.cat.categories) else cat.map(fn)


def _pid_from_name(path: Path) -> int:
    m = re.match(r"(\d+)_", path.name)
    return int(m.group(1)) if m else MISSING


# ---------------- JSON ----------------

def load_json(path: Path, trace: Trace, why_unreadable: str):
    """The parsed document, or None with a Problem saying what a cut or missing file means."""
    try:
        return json.loads(path.read_bytes())
    except RecursionError:
        trace.problems.append(Problem(str(path), f"JSON nested too deeply to read: {why_unreadable}"))
        return None
    except (OSError, ValueError) as exc:
        trace.problems.append(Problem(str(path), f"not readable JSON ({exc}): {why_unreadable}"))
        return None


def _o(v) -> dict:
    """A JSON object where one is expected; anything else reads as an empty one (its fields as missing)."""
    return v if isinstance(v, dict) else {}


def _l(v) -> list:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def read_json(path: Path, trace: Trace) -> None:
    """rocprofv3 JSON. Every field is type-checked where it is read: an object where an object
    belongs, cells converted by `conform` (a cell of another type reads as missing), names as text."""
    name = str(path)
    doc = load_json(path, trace, "rocprofv3 writes it in one go at the end, so a cut file holds nothing usable")
    if doc is None:
        return
    procs = doc.get("rocprofiler-sdk-tool") if isinstance(doc, dict) else None
    if not isinstance(procs, list):
        trace.problems.append(Problem(name, "JSON without a 'rocprofiler-sdk-tool' list"))
        return
    wrong = 0
    for proc in procs:
        if not isinstance(proc, dict):
            wrong += 1
            continue
        pid = integer(_o(proc.get("metadata")).get("pid"))
        pid = MISSING if pid is None else pid
        agents = {}
        for a in _l(proc.get("agents")):
            h = integer(_o(a.get("id")).get("handle"))
            if h is not None:
                agents[h] = a
        node = {h: _cell(a.get("node_id")) for h, a in agents.items()}
        symbols = {}
        for k in _l(proc.get("kernel_symbols")):
            kid = integer(k.get("kernel_id"))
            if kid is not None:
                symbols[kid] = text(k.get("formatted_kernel_name")) or text(k.get("kernel_name"))
        recs = _o(proc.get("buffer_records"))
        nested = lambda r, key, inner: _o(r.get(key)).get(inner, MISSING)  # noqa: E731
        handle = lambda r, key: integer(_o(r.get(key)).get("handle"))      # noqa: E731
        rows = []
        for r in _l(recs.get("kernel_dispatch")):
            info = _o(r.get("dispatch_info"))
            wg, grid = _o(info.get("workgroup_size")), _o(info.get("grid_size"))
            h = handle(info, "agent_id")
            rows.append({"pid": pid, "agent": str(node.get(h, h)), "agent_node": node.get(h, MISSING),
                         "queue": nested(info, "queue_id", "handle"), "stream": nested(r, "stream_id", "handle"),
                         "thread": r.get("thread_id", MISSING), "dispatch_id": info.get("dispatch_id", MISSING),
                         "kernel_id": info.get("kernel_id", MISSING), "kernel": symbols.get(integer(info.get("kernel_id"))),
                         "correlation_id": nested(r, "correlation_id", "internal"),
                         "start": r.get("start_timestamp", MISSING), "end": r.get("end_timestamp", MISSING),
                         "grid_x": grid.get("x", MISSING), "grid_y": grid.get("y", MISSING), "grid_z": grid.get("z", MISSING),
                         "wg_x": wg.get("x", MISSING), "wg_y": wg.get("y", MISSING), "wg_z": wg.get("z", MISSING),
                         "lds": info.get("group_segment_size", MISSING), "scratch": info.get("private_segment_size", MISSING)})
        trace.add("dispatches", conform(pd.DataFrame(rows), "dispatches"))
        copies = [{"pid": pid, "src_agent": str(node.get(handle(r, "src_agent_id"))),
                   "dst_agent": str(node.get(handle(r, "dst_agent_id"))),
                   "dst_node": node.get(handle(r, "dst_agent_id"), MISSING),
                   "correlation_id": nested(r, "correlation_id", "internal"),
                   "start": r.get("start_timestamp", MISSING), "end": r.get("end_timestamp", MISSING),
                   "bytes": r.get("bytes", MISSING), "stream": nested(r, "stream_id", "handle"),
                   "direction": str(text(r.get("operation")))} for r in _l(recs.get("memory_copy"))]
        trace.add("copies", conform(pd.DataFrame(copies), "copies"))
        allocs = [{"pid": pid, "operation": _alloc_op(r.get("operation")),
                   "agent": str(node.get(handle(r, "agent_id"), "")), "address": _int(r.get("address")),
                   "size": r.get("allocation_size", MISSING), "correlation_id": nested(r, "correlation_id", "internal"),
                   "start": r.get("start_timestamp", MISSING), "end": r.get("end_timestamp", MISSING)}
                  for r in _l(recs.get("memory_allocation"))]
        trace.add("allocations", conform(pd.DataFrame(allocs), "allocations"))
        ops = _operation_names(proc)
        api = [{"pid": pid, "thread": r.get("thread_id", MISSING), "domain": dom,
                "function": ops.get((dom, integer(r.get("operation")))) or str(text(r.get("operation"))),
                "correlation_id": nested(r, "correlation_id", "internal"),
                "start": r.get("start_timestamp", MISSING), "end": r.get("end_timestamp", MISSING)}
               for dom in ("hip_api", "hsa_api", "marker_api") for r in _l(recs.get(dom))]
        trace.add("api", conform(pd.DataFrame(api), "api"))
        ag = [{"pid": pid, "node_id": a.get("node_id", MISSING), "logical_id": a.get("logical_node_id", MISSING),
               "type": {1: "CPU", 2: "GPU"}.get(integer(a.get("type")), str(text(a.get("type")))),
               "name": text(a.get("product_name")) or text(a.get("name")), "gfx": text(a.get("name"))}
              for a in agents.values()]
        trace.add("agents", conform(pd.DataFrame(ag), "agents"))
    if wrong:
        trace.problems.append(Problem(name, f"{wrong} process record(s) that are not objects: left out"))
    trace.files.append({"path": name, "table": "all", "rows": len(trace.dispatches), "format": "json",
                        "state": "complete"})


def _cell(v) -> int:
    got = integer(v)
    return MISSING if got is None else got


def _int(v) -> int:
    return _cell(v)


def _alloc_op(op) -> str:
    if isinstance(op, str):
        return op.replace("MEMORY_ALLOCATION_", "")
    return {1: "ALLOCATE", 2: "FREE", 3: "VMEM_ALLOCATE", 4: "VMEM_FREE"}.get(integer(op), str(text(op)))


def _operation_names(proc: dict) -> dict:
    out = {}
    for entry in _l(_o(proc.get("strings")).get("buffer_records")):
        kind = str(text(entry.get("kind")) or "").lower()
        ops = entry.get("operations")
        for i, op in enumerate(ops if isinstance(ops, list) else []):
            if isinstance(op, str):
                out[(kind, i)] = op
    return out


# ---------------- rocpd SQLite ----------------

def read_rocpd(path: Path, trace: Trace) -> None:
    """The rocpd database through its plain-named views (tables carry per-process suffixes)."""
    name = str(path)
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=2)
        con.text_factory = lambda b: b.decode("utf-8", "replace")     # a damaged name is text, not a stop
        con.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error as exc:
        trace.problems.append(Problem(name, f"database unreadable ({exc}): a run that died while writing it, "
                                            f"or a lock held by a live process"))
        return
    got = []
    try:
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type IN ('view','table')")}

        def q(sql: str) -> pd.DataFrame | None:
            try:
                return pd.read_sql_query(sql, con)
            except (sqlite3.Error, pd.errors.DatabaseError) as exc:
                trace.problems.append(Problem(name, f"query failed ({exc}); that table is left out"))
                return None
        if "rocpd_kernel_dispatch" in names:
            df = q("SELECT k.pid, k.tid AS thread, k.agent_id AS agent_row, k.queue_id AS queue, k.stream_id AS stream, "
                   "k.dispatch_id, k.kernel_id, s.display_name AS kernel, e.stack_id AS correlation_id, k.start, k.end, "
                   "k.grid_size_x AS grid_x, k.grid_size_y AS grid_y, k.grid_size_z AS grid_z, "
                   "k.workgroup_size_x AS wg_x, k.workgroup_size_y AS wg_y, k.workgroup_size_z AS wg_z, "
                   "k.group_segment_size AS lds, k.private_segment_size AS scratch, a.absolute_index AS agent_node "
                   "FROM rocpd_kernel_dispatch k LEFT JOIN rocpd_info_kernel_symbol s ON s.id = k.kernel_id "
                   "LEFT JOIN rocpd_event e ON e.id = k.event_id LEFT JOIN rocpd_info_agent a ON a.id = k.agent_id")
            if df is not None:
                df["agent"] = labels(df["agent_node"])
                trace.add("dispatches", conform(df, "dispatches"))
                got.append(f"{len(df)} dispatches")
        if "rocpd_memory_copy" in names:
            df = q("SELECT c.pid, s.string AS direction, c.src_agent_id AS src_agent, c.dst_agent_id AS dst_agent, "
                   "a.absolute_index AS dst_node, c.stream_id AS stream, e.stack_id AS correlation_id, c.start, c.end, "
                   "c.size AS bytes FROM rocpd_memory_copy c LEFT JOIN rocpd_string s ON s.id = c.name_id "
                   "LEFT JOIN rocpd_event e ON e.id = c.event_id LEFT JOIN rocpd_info_agent a ON a.id = c.dst_agent_id")
            if df is not None:
                trace.add("copies", conform(_values(df, "copies"), "copies"))
        if "rocpd_memory_allocate" in names:
            df = q("SELECT m.pid, m.type AS operation, a.absolute_index AS agent, m.address, m.size, "
                   "e.stack_id AS correlation_id, m.start, m.end FROM rocpd_memory_allocate m "
                   "LEFT JOIN rocpd_event e ON e.id = m.event_id LEFT JOIN rocpd_info_agent a ON a.id = m.agent_id "
                   "WHERE m.level IS NULL OR m.level != 'SCRATCH'")
            if df is not None:
                df["operation"] = df["operation"].map({"ALLOC": "ALLOCATE", "FREE": "FREE"}).fillna(df["operation"])
                df["agent"] = labels(df["agent"])
                trace.add("allocations", conform(df, "allocations"))
        if "rocpd_region" in names:
            df = q("SELECT r.pid, r.tid AS thread, c.string AS domain, s.string AS function, e.stack_id AS correlation_id, "
                   "r.start, r.end FROM rocpd_region r LEFT JOIN rocpd_string s ON s.id = r.name_id "
                   "LEFT JOIN rocpd_event e ON e.id = r.event_id LEFT JOIN rocpd_string c ON c.id = e.category_id")
            if df is not None:
                trace.add("api", conform(df, "api"))
        if "rocpd_info_agent" in names:
            df = q("SELECT pid, absolute_index AS node_id, logical_index AS logical_id, type, "
                   "COALESCE(product_name, name) AS name, name AS gfx FROM rocpd_info_agent")
            if df is not None:
                trace.add("agents", conform(df, "agents"))
    finally:
        con.close()
    trace.files.append({"path": name, "table": "all", "rows": sum(int(g.split()[0]) for g in got) if got else 0,
                        "format": "rocpd", "state": "complete" if got else "no kernel table"})
