"""The capture bundle's manifest (manifest.json) as one typed record: the one owner of its fields.

capture builds a `Manifest` and writes `dumps(manifest)` (private_files.write_private, atomically, at the start, once the
target runs and at the end); every reader gets one from `ingest.schema.read_manifest` (which checks
each field's type against the spec derived here: a bad field is a problem and is dropped, the rest
is kept); docs/schemas/bundle-manifest.schema.json is generated from these classes
(`json_schema`, scripts/gen_manifest_schema.py; tests/test_schemas.py fails when they differ).

Field names are those on disk since faultkit.bundle/1: old bundles read as they are. A field that
is None is not written, except the end's fields (`AT_END`), written as null once the capture ended
(a finished manifest says "no exit status", not nothing). A field marked `always` is
written null too (the kernel log's `problem: null` says "readable, nothing missing"). Fields this
version does not know (a
newer writer's, a backend's own record) ride in `extra`, unread and written back as they were.
Open records whose shape belongs to their writer (the arming, the system facts, the launch, the
debuggers' status) are objects here: their writers' `to_json` owns their fields.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Union

SCHEMA = "faultkit.bundle/1"
STATES = ("running", "finished", "cut")     # cut: faultkit itself was killed (its watchdog's rewrite)
Command = Union[str, list[str]]   # a shown command line, or (older bundles) its argv


def _field(doc: str = "", at_end: bool = False, always: bool = False):
    return field(default=None, metadata={"doc": doc, "at_end": at_end, "always": always})


@dataclass
class Record:
    """A part of the manifest: its known fields typed, the rest kept in `extra`."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False, metadata={"extra": True})


@dataclass
class Clocks(Record):
    """The manifest's clock readings at one moment, to put logs and traces on one clock."""
    wall: float | None = _field("time.time() at the event")
    monotonic_ns: int | None = _field("CLOCK_MONOTONIC, ns")
    boottime_ns: int | None = _field("CLOCK_BOOTTIME, ns (the kernel log's clock)")


@dataclass
class KernelLog(Record):
    """The manifest's record of how the kernel log was captured, or why it was not."""
    before: str | None = _field("snapshot file before the run (or why there is none)", always=True)
    follow: str | None = _field("the followed /dev/kmsg file, or why it could not be followed", always=True)
    after: str | None = _field("snapshot file after the run")
    readable: bool | None = _field("whether the kernel's records of the capture are in the bundle", always=True)
    problem: str | None = _field("why not, and what to do (null: none)", always=True)
    faults_of_capture: int | None = _field("kernel fault records of the captured processes")
    faults_elsewhere: int | None = _field("kernel fault records of other processes during the capture")


@dataclass
class Agent(Record):
    """The manifest's record of the in-process agent."""
    enabled: bool | None = _field("whether the in-process agent was loaded")
    mode: str | None = _field("its mode")
    processes: list[dict] | None = _field("every process that ran it (its header)")
    note: str | None = _field("why it was off")


@dataclass
class Core(Record):
    """The manifest's record of one core dump the capture found."""
    path: str | None = field(default=None, metadata={"doc": "the core file", "required": True})
    pid: int | None = _field()
    how_found: str | None = _field()
    size: int | None = _field()
    time: float | None = _field()
    platform: str | None = _field("host, cuda, rocm, or 'not a core'")
    problems: list[str] | None = _field()
    analysed_with: str | None = _field("the debugger that opened it")
    transcript: str | None = _field("its transcript")
    seconds: float | None = _field()
    merged: bool | None = _field()
    open_with: str | None = _field("how to open it, where no debugger was here")


@dataclass
class Manifest(Record):
    """A bundle's manifest: what was run, how, and what the capture recorded."""
    schema: str | None = field(default=SCHEMA, metadata={"doc": "faultkit.bundle/N", "required": True})
    command: Command | None = field(default=None, metadata={"doc": "the command as shown (redacted)", "required": True})
    backend: str | None = field(default=None, metadata={"doc": "plain, gdb, rocgdb, rocprof, follow ...",
                                                         "required": True})
    env_requested: dict[str, str] | None = field(default=None, metadata={"doc": "--env", "required": True})
    start: Clocks | None = field(default=None, metadata={"doc": "when the capture started", "required": True})
    state: str | None = field(default=None, metadata={"doc": "running, finished or cut", "required": True,
                                                       "enum": STATES})
    files: dict[str, int] | None = field(default=None, metadata={"doc": "file -> bytes", "required": True})
    coredump: dict | None = field(default=None, metadata={"doc": "the core-dump arming (capture/coredump.py)",
                                                          "required": True})
    attached_to_pid: int | None = _field("--pid: the running server followed")
    started_as: Command | None = _field("the argv exec'd")
    tree_held_by: dict | None = _field("cgroup, subreaper, marker")
    kernel_log: KernelLog | None = _field()
    system: dict | None = _field("host facts (capture/facts.py)")
    launch: dict | None = _field("the launcher's identity of the run: job, rank, host (launch_env.py)")
    root_pid: int | None = _field("the target's pid once it runs")
    interrupted_by: str | None = _field("the signal that interrupted the capture")
    stacks_asked: dict[str, str] | None = _field("pid -> what the agent's stack request did")
    hang_check: list[dict] | None = _field("each hang check's finding (tag, state, level, summary, waits_on)")
    hang_dumps: dict[str, str] | None = _field("pid -> the user-triggered core dump's outcome")
    hang_snapshots: dict[str, str] | None = _field("pid -> the rocgdb snapshot's outcome")
    live_output_dropped_bytes: int | None = _field("bytes of live output not mirrored")
    end: Clocks | None = _field("when it ended", at_end=True)
    ended_by: str | None = _field("target-exit, timeout, hang, interrupted, debugger-stop ...", at_end=True)
    exit_code: int | None = _field("the target's status (negative: its signal)", at_end=True)
    fault_line: str | None = _field("the line that ended the capture", at_end=True)
    env_check: dict | None = _field("whether the processes saw the requested environment", at_end=True)
    stopped_with: list[str] | None = _field("the signals sent to stop the tree")
    killed_leftovers: list[int] | None = _field("processes of the tree killed after the root")
    exit: str | None = _field("how the target ended, in words", at_end=True)
    debuggers: list[dict] | None = _field("each debugger's status (gdb backends)")
    not_attached: list | None = _field("processes a debugger could not attach to")
    followed: dict | None = _field("the followed server's record (--pid)")
    rocprofv3: dict | None = _field("the tracer's record (rocprof backend)")
    agent: Agent | None = _field()
    cores: list[Core] | None = _field()
    note: str | None = _field("what the capture concluded")
    warnings: list[str] | None = _field()

    def set(self, **fields) -> None:
        """Fields by name (a backend's stop record): known ones typed, the rest kept in `extra`."""
        known = {f.name for f in dataclasses.fields(self)} - {"extra"}
        for k, v in fields.items():
            if k in known:
                setattr(self, k, v)
            else:
                self.extra[k] = v

    def warn(self, text: str) -> None:
        self.warnings = [*(self.warnings or []), text]

    def to_json(self) -> dict:
        return to_json(self)


# ---------------- (de)serialization ----------------

@functools.cache
def _hints(cls) -> dict:
    # once per class and process: every manifest read (from_json) asks again
    return typing.get_type_hints(cls)


def _fields(cls):
    return [f for f in dataclasses.fields(cls) if not f.metadata.get("extra")]


def to_json(rec: Record) -> dict:
    """The record as written: known fields (None left out, but the end's once ended), then `extra`."""
    ended = isinstance(rec, Manifest) and rec.state not in (None, "running")
    out: dict = {}
    for f in _fields(type(rec)):
        v = getattr(rec, f.name)
        if v is None and not f.metadata.get("always") and not (ended and f.metadata.get("at_end")):
            continue
        out[f.name] = _value_json(v)
    for k, v in rec.extra.items():
        out.setdefault(k, v)
    return out


def _value_json(v):
    if isinstance(v, Record):
        return to_json(v)
    if isinstance(v, list):
        return [_value_json(x) for x in v]
    return v


def dumps(manifest: Manifest) -> str:
    """The one serialization of a manifest (capture and its watchdog write it with private_files)."""
    return json.dumps(to_json(manifest), indent=2, default=str)


def from_json(cls, value: dict):
    """A record from an object already type-checked against `spec(cls)` (ingest/schema.clean)."""
    hints = _hints(cls)
    kwargs: dict = {}
    names = set()
    for f in _fields(cls):
        names.add(f.name)
        # a field the file lacks is None, never the writer's default (a manifest naming no schema
        # is no bundle's)
        kwargs[f.name] = _value_from(hints[f.name], value.get(f.name))
    rec = cls(**kwargs)
    rec.extra = {k: v for k, v in value.items() if k not in names}
    return rec


def _record_in(tp):
    """The Record class inside `X | None` or `list[X]`, or None."""
    if isinstance(tp, type) and issubclass(tp, Record):
        return tp
    for a in typing.get_args(tp):
        r = _record_in(a)
        if r is not None:
            return r
    return None


def _value_from(tp, v):
    rec = _record_in(tp)
    if rec is None or v is None:
        return v
    if isinstance(v, list):
        return [from_json(rec, x) for x in v if isinstance(x, dict)]
    return from_json(rec, v) if isinstance(v, dict) else None


# ---------------- the type spec (ingest/schema.clean) and the JSON Schema, from the classes ----------------

def _is_optional(tp) -> tuple[Any, bool]:
    args = typing.get_args(tp)
    if typing.get_origin(tp) in (Union, types.UnionType) and type(None) in args:
        rest = [a for a in args if a is not type(None)]
        return (rest[0] if len(rest) == 1 else Union[tuple(rest)]), True
    return tp, False


def spec(tp):
    """The `ingest.schema.clean` spec of a type: what the reader holds each field to."""
    inner, optional = _is_optional(tp)
    s = _spec(inner)
    return (s, type(None)) if optional else s


def _spec(tp):
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, Record):
        return {f.name: spec(_hints(tp)[f.name]) for f in _fields(tp)}
    if origin in (Union, types.UnionType):
        return tuple(_spec(a) for a in typing.get_args(tp))
    if origin is list:
        (item,) = typing.get_args(tp)
        return [_spec(item)] if item is not Any and item is not dict else []
    if origin is dict or tp is dict:
        return {}
    return tp


_JSON = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}


def _schema(tp, meta=None) -> dict:
    inner, optional = _is_optional(tp)
    s = _schema_of(inner)
    if meta and meta.get("enum"):
        s = {"enum": list(meta["enum"])}
    if meta and meta.get("doc"):
        s = {"description": meta["doc"], **s}
    if optional:
        s = {"anyOf": [s, {"type": "null"}]} if "description" not in s else \
            {"description": s.pop("description"), "anyOf": [s, {"type": "null"}]}
    return s


def _schema_of(tp) -> dict:
    origin = typing.get_origin(tp)
    if isinstance(tp, type) and issubclass(tp, Record):
        hints = _hints(tp)
        s: dict = {"type": "object", "additionalProperties": True,
                   "properties": {f.name: _schema(hints[f.name], f.metadata) for f in _fields(tp)}}
        required = [f.name for f in _fields(tp) if f.metadata.get("required") and tp is not Manifest]
        if required:
            s["required"] = required
        return s
    if origin in (Union, types.UnionType):
        return {"anyOf": [_schema_of(a) for a in typing.get_args(tp)]}
    if origin is list:
        (item,) = typing.get_args(tp)
        return {"type": "array", "items": _schema_of(item)}
    if origin is dict:
        _, value = typing.get_args(tp)
        return {"type": "object", "additionalProperties": _schema_of(value)}
    if tp is Any:
        return {}
    return {"type": _JSON[tp]}


def json_schema() -> dict:
    """docs/schemas/bundle-manifest.schema.json, generated (scripts/gen_manifest_schema.py writes it)."""
    body = _schema_of(Manifest)
    fields = _fields(Manifest)
    body["properties"]["schema"] = {"description": "the bundle format", "const": SCHEMA}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://faultkit.invalid/schemas/bundle-manifest.schema.json",
        "title": f"faultkit capture bundle manifest ({SCHEMA})",
        "description": "manifest.json of a capture bundle. Written at the start (state running), once the target "
                       "runs and at the end (state finished); a bundle whose faultkit died keeps the last one "
                       "written (its watchdog marks it cut). GENERATED from faultkit/manifest.py by "
                       "scripts/gen_manifest_schema.py: edit the classes, not this file.",
        **body,
        "required": [f.name for f in fields if f.metadata.get("required")],
        "if": {"properties": {"state": {"const": "finished"}}},
        "then": {"required": [f.name for f in fields if f.metadata.get("at_end")]},
    }


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2) + "\n"
