"""Types checked where structured input enters: a JSON document, a manifest, process records.

A value of the wrong type is never handed on: it is dropped, the drop is said as a problem (with
the field's path), and everything else of the document is kept. Readers of tables (rocprofv3 JSON)
use `integer`/`text` for single cells.

A spec is a type (`str`, `int`, `float` meaning any real number, `bool`, `dict`, `list`), a tuple of
specs (any of them), `[spec]` (a list whose items match), or `{field: spec}` (an object whose known
fields match; other fields are kept as they are).
"""

from __future__ import annotations

import functools
import json
import math

from ..manifest import Manifest, from_json
from ..manifest import spec as manifest_spec
from ..model import Problem

INT64 = 1 << 63
NONE = type(None)


def load_json(text: str | bytes, name: str) -> tuple[object | None, list[Problem]]:
    """Parse JSON; nesting deep enough to exhaust Python's parser, or non-JSON, is a problem."""
    try:
        return json.loads(text), []
    except RecursionError:
        return None, [Problem(name, "JSON nested too deeply to read; ignored")]
    except (ValueError, TypeError) as exc:
        return None, [Problem(name, f"not valid JSON ({str(exc)[:200]}); ignored")]


def _type_name(v) -> str:
    return {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list",
            dict: "an object", NONE: "null"}.get(type(v), type(v).__name__)


def _matches(v, spec) -> bool:
    if isinstance(spec, tuple):
        return any(_matches(v, s) for s in spec)
    if isinstance(spec, list):
        return isinstance(v, list)
    if isinstance(spec, dict):
        return isinstance(v, dict)
    if spec is float:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
    if spec is int:
        return isinstance(v, int) and not isinstance(v, bool) and -INT64 <= v < INT64
    return isinstance(v, spec)


def clean(value, spec, name: str, where: str, problems: list[Problem]):
    """`value` with every part that does not match `spec` removed; (value or None)."""
    if not _matches(value, spec):
        problems.append(Problem(name, f"{where or 'the document'} is {_type_name(value)}, not what it should be: "
                                      f"ignored"))
        return None
    inner = next((s for s in spec if isinstance(s, (list, dict)) and _matches(value, s)), None) \
        if isinstance(spec, tuple) else spec
    if isinstance(inner, list) and inner:
        kept = []
        for i, item in enumerate(value):
            c = clean(item, inner[0], name, f"{where}[{i}]", problems)
            if c is not None or item is None and _matches(None, inner[0]):
                kept.append(c)
        return kept
    if isinstance(inner, dict):
        out = {}
        for k, v in value.items():
            if k in inner:
                c = clean(v, inner[k], name, f"{where}.{k}" if where else k, problems)
                if c is not None or v is None:
                    out[k] = c
            else:
                out[k] = v
        return out
    return value


OPT_STR, OPT_INT, OPT_NUM = (str, NONE), (int, NONE), (float, NONE)


@functools.cache
def manifest_fields():
    """What faultkit reads of a capture's manifest: derived from the typed record (faultkit/manifest.py),
    the one owner of its fields. Derived at the first manifest read, not at import: resolving the
    classes' type hints is a tenth of a text triage's start-up, and a pasted log has no manifest."""
    return manifest_spec(Manifest)


PROCESS = {"pid": int, "ppid": OPT_INT, "argv": ([str], NONE), "env": ({}, NONE), "cmdline": (str, list, NONE),
           "exe": OPT_STR, "comm": OPT_STR}


def check_manifest(value, name: str) -> tuple[Manifest | None, list[Problem]]:
    """A decoded manifest held to its types: the typed record (bad fields dropped, each a problem)."""
    problems: list[Problem] = []
    if not isinstance(value, dict):
        return None, [Problem(name, f"unreadable manifest (a JSON {type(value).__name__}, not an object); files are "
                                    f"read without it")]
    out = clean(value, manifest_fields(), name, "", problems)
    # a core record without its path cannot be matched to a file: dropped by `clean` (path: str)
    if isinstance(out.get("cores"), list):
        out["cores"] = [c for c in out["cores"] if isinstance(c, dict) and isinstance(c.get("path"), str)]
    return from_json(Manifest, out), problems


MANIFEST_BYTES = 64 << 20      # a manifest is kilobytes; a bigger file is not one


def read_manifest(path) -> tuple[Manifest | None, list[Problem]]:
    """A bundle's manifest file (the one owner of reading it): decoded, type-checked, or None with
    the reason. Every reader of a manifest goes through here or through `check_manifest`."""
    name = str(path)
    try:
        with open(path, "rb") as fh:
            data = fh.read(MANIFEST_BYTES + 1)
    except OSError as exc:
        return None, [Problem(name, f"not readable ({exc.strerror or exc})")]
    if len(data) > MANIFEST_BYTES:
        return None, [Problem(name, f"larger than {MANIFEST_BYTES >> 20} MiB: not a manifest; not read")]
    value, problems = load_json(data.decode("utf-8", "replace"), name)
    if value is None:
        return None, problems
    value, more = check_manifest(value, name)
    return value, problems + more


def records(value, name: str, problems: list[Problem]) -> list[dict]:
    """capture's process records (environ.json): a list of objects; wrong items are dropped."""
    if value is None:
        return []
    if not isinstance(value, list):
        problems.append(Problem(name, "process record is not a list: ignored"))
        return []
    out = []
    for i, p in enumerate(value):
        c = clean(p, PROCESS, name, f"[{i}]", problems)
        if isinstance(c, dict):
            out.append(c)
    return out


def record_pids(procs) -> set[int]:
    """The pids of capture's process records (environ.json's list): what the capture saw run."""
    return {p["pid"] for p in procs if isinstance(p, dict) and isinstance(p.get("pid"), int)}


# ---- single cells of tables ----

def integer(v, lo: int = -INT64, hi: int = INT64) -> int | None:
    """An integer cell in [lo, hi), or None (a string, a float, a number out of range, NaN)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            return None
        v = int(v)
    if isinstance(v, str):
        s = v.strip()
        if not s or len(s) > 40:
            return None
        try:
            v = int(s, 0) if s.lower().startswith("0x") else int(s)
        except ValueError:
            return None
    if not isinstance(v, int):
        return None
    return v if lo <= v < hi else None


def text(v) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return None
