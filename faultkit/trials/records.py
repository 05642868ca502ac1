"""The trials files as typed records: `plan.json` (the experiment and its order) and each trial's
`result.json`. The runner writes them and every reader (resume, report) reads them back through
`from_json`, which checks each field's type: a file edited by hand, cut or from another tool is a
`RecordError` with the field named, never a traceback."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..layout import TRIAL_RESULT_SCHEMA
from .stats import ALTERNATIVES, DEFAULT_ALTERNATIVE, UNRECORDED_ALTERNATIVE

PLAN_SCHEMA = "faultkit.trials.plan/1"
RESULT_SCHEMA = TRIAL_RESULT_SCHEMA               # layout.py owns it: triage reads a trial folder by it

# What a trial came to. A trial that failed to start (command missing or not executable, script not
# found, never ready) says nothing about the crash rate: it is kept, shown, and never counted.
CRASH, NO_CRASH, FAILED_TO_START = "crash", "no-crash", "failed-to-start"
OUTCOMES = (CRASH, NO_CRASH, FAILED_TO_START)


class RecordError(ValueError):
    """A trials file whose content is not the record it should be: the message names the field."""


def _need(d: dict, key: str, kinds: tuple, where: str, optional: bool = False) -> Any:
    if key not in d:
        if optional:
            return None
        raise RecordError(f"{where}: field {key!r} is missing")
    v = d[key]
    if v is None and optional:
        return None
    # bool is an int in Python: a count or an index given as true/false is still the wrong type
    if isinstance(v, bool) and bool not in kinds:
        raise RecordError(f"{where}: field {key!r} is {v!r}, not {_names(kinds)}")
    if not isinstance(v, kinds):
        raise RecordError(f"{where}: field {key!r} is a {_type(v)}, not {_names(kinds)}")
    if isinstance(v, float) and not math.isfinite(v):
        raise RecordError(f"{where}: field {key!r} is {v!r}, not a finite number")
    return v


def _type(v: Any) -> str:
    return {dict: "JSON object", list: "JSON list", str: "string", bool: "boolean", int: "integer",
            float: "number", type(None): "null"}.get(type(v), type(v).__name__)


def _names(kinds: tuple) -> str:
    return " or ".join(_type(k()) if k is not type(None) else "null" for k in kinds)


def _str_list(v: Any, key: str, where: str) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise RecordError(f"{where}: field {key!r} is not a list of strings")
    return v


def _str_dict(v: dict, key: str, where: str) -> dict:
    """A flat object of strings (and one object of strings, the GPUs): what a placement holds."""
    for k, x in v.items():
        if not isinstance(x, str) and not (isinstance(x, dict) and all(isinstance(y, str) for y in x.values())):
            raise RecordError(f"{where}: field {key!r}.{k} is a {_type(x)}, not a string")
    return v


def _int_list(v: Any, key: str, where: str) -> list[int]:
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in v):
        raise RecordError(f"{where}: field {key!r} is not a list of integers")
    return v


NUMBER = (int, float)


@dataclass
class EnvCheck:
    """Did the arm's variables reach the processes that mattered (capture's `verify_env`, as a record)."""
    ok: bool
    checked: list[int] = field(default_factory=list)
    scope: str = "all-processes"
    wanted: dict[str, str] = field(default_factory=dict)
    mismatches: list[dict] = field(default_factory=list)
    exited: list[int] = field(default_factory=list)      # gone before their environment could be read

    @classmethod
    def from_json(cls, d: Any, where: str = "env") -> "EnvCheck":
        if not isinstance(d, dict):
            raise RecordError(f"{where}: not a JSON object")
        mism = _need(d, "mismatches", (list,), where, optional=True) or []
        if not all(isinstance(m, dict) for m in mism):
            raise RecordError(f"{where}: field 'mismatches' is not a list of objects")
        wanted = _need(d, "wanted", (dict,), where, optional=True) or {}
        if not all(isinstance(v, str) for v in wanted.values()):
            raise RecordError(f"{where}: field 'wanted' holds a value that is not a string")
        return cls(ok=_need(d, "ok", (bool,), where),
                   checked=_int_list(d.get("checked", []), "checked", where),
                   scope=_need(d, "scope", (str,), where, optional=True) or "all-processes",
                   wanted=wanted, mismatches=mism,
                   exited=_int_list(d.get("exited", []), "exited", where))

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class TrialResult:
    index: int
    pair: int
    arm: str
    outcome: str
    ended_by: str
    duration_s: float
    env: EnvCheck
    command: str = ""
    exit: str = ""
    exit_code: int | None = None
    time_to_crash_s: float | None = None
    fault_line: str | None = None
    failed_to_start: str | None = None      # why, in words, when the outcome is FAILED_TO_START
    stopped_with: list[str] = field(default_factory=list)
    killed_leftovers: list[int] = field(default_factory=list)
    signature: str | None = None
    clocks: dict = field(default_factory=dict)
    metric: float | None = None
    metric_regex: str | None = None
    # where it ran: engine (local, slurm, ray), node, the engine's job and task ids, its GPUs
    placement: dict = field(default_factory=dict)
    cores: list[dict] = field(default_factory=list)     # the GPU/host cores the trial left (capture.coredump)
    schema: str = RESULT_SCHEMA

    @property
    def crashed(self) -> bool:
        return self.outcome == CRASH

    @property
    def counted(self) -> bool:
        """Only trials that started say anything about the crash rate."""
        return self.outcome != FAILED_TO_START

    def to_json(self) -> dict:
        d = asdict(self)
        d["env"] = self.env.to_json()
        d["crashed"] = self.crashed           # kept for readers of faultkit.trials.result/1 before `outcome`
        return d

    @classmethod
    def from_json(cls, d: Any, where: str = "result.json") -> "TrialResult":
        if not isinstance(d, dict):
            raise RecordError(f"{where}: a JSON {_type(d)}, not an object")
        crashed = _need(d, "crashed", (bool,), where, optional=True)
        outcome = _need(d, "outcome", (str,), where, optional=True)
        if outcome is None:                   # written before outcomes were recorded
            if crashed is None:
                raise RecordError(f"{where}: field 'outcome' is missing")
            outcome = CRASH if crashed else NO_CRASH
        if outcome not in OUTCOMES:
            raise RecordError(f"{where}: field 'outcome' is {outcome!r}, not one of {', '.join(OUTCOMES)}")
        if crashed is not None and crashed != (outcome == CRASH):
            raise RecordError(f"{where}: fields 'crashed' and 'outcome' disagree")
        clocks = _need(d, "clocks", (dict,), where, optional=True) or {}
        return cls(index=_need(d, "index", (int,), where), pair=_need(d, "pair", (int,), where, optional=True) or 0,
                   arm=_need(d, "arm", (str,), where), outcome=outcome,
                   ended_by=_need(d, "ended_by", (str,), where, optional=True) or "unknown",
                   duration_s=float(_need(d, "duration_s", NUMBER, where)),
                   env=EnvCheck.from_json(d.get("env", {"ok": False}), f"{where}: env"),
                   command=_need(d, "command", (str,), where, optional=True) or "",
                   exit=_need(d, "exit", (str,), where, optional=True) or "",
                   exit_code=_need(d, "exit_code", (int,), where, optional=True),
                   time_to_crash_s=_float_or_none(_need(d, "time_to_crash_s", NUMBER, where, optional=True)),
                   fault_line=_need(d, "fault_line", (str,), where, optional=True),
                   failed_to_start=_need(d, "failed_to_start", (str,), where, optional=True),
                   stopped_with=_str_list(d.get("stopped_with") or [], "stopped_with", where),
                   killed_leftovers=_int_list(d.get("killed_leftovers") or [], "killed_leftovers", where),
                   signature=_need(d, "signature", (str,), where, optional=True),
                   clocks=clocks,
                   metric=_float_or_none(_need(d, "metric", NUMBER, where, optional=True)),
                   cores=[c for c in (d.get("cores") or []) if isinstance(c, dict)] if isinstance(d.get("cores"), list)
                   else [],
                   metric_regex=_need(d, "metric_regex", (str,), where, optional=True),
                   placement=_str_dict(_need(d, "placement", (dict,), where, optional=True) or {}, "placement", where))


def _float_or_none(v: Any) -> float | None:
    return None if v is None else float(v)


@dataclass
class PlanEntry:
    index: int
    pair: int
    position: int
    arm: str

    @classmethod
    def from_json(cls, d: Any, where: str) -> "PlanEntry":
        if not isinstance(d, dict):
            raise RecordError(f"{where}: not a JSON object")
        return cls(index=_need(d, "index", (int,), where), pair=_need(d, "pair", (int,), where),
                   position=_need(d, "position", (int,), where, optional=True) or 0, arm=_need(d, "arm", (str,), where))


@dataclass
class ArmSpec:
    """An arm as the plan records it: the command and variables redacted, with fingerprints of the
    real ones so that a resumed run is recognised without writing a secret."""
    name: str
    command: str
    command_fingerprint: str | None
    env: dict[str, str] = field(default_factory=dict)
    env_fingerprints: dict[str, str | None] = field(default_factory=dict)

    @classmethod
    def from_json(cls, d: Any, where: str) -> "ArmSpec":
        if not isinstance(d, dict):
            raise RecordError(f"{where}: not a JSON object")
        env = _need(d, "env", (dict,), where, optional=True) or {}
        fps = _need(d, "env_fingerprints", (dict,), where, optional=True) or {}
        if not all(isinstance(v, str) for v in env.values()) or not all(isinstance(v, (str, type(None)))
                                                                       for v in fps.values()):
            raise RecordError(f"{where}: field 'env' or 'env_fingerprints' holds a value that is not a string")
        return cls(name=_need(d, "name", (str,), where), command=_need(d, "command", (str,), where),
                   command_fingerprint=_need(d, "command_fingerprint", (str,), where, optional=True),
                   env=env, env_fingerprints=fps)


def _alternative(d: dict, where: str) -> str:
    alt = _need(d, "alternative", (str,), where, optional=True)
    if alt is None:
        return UNRECORDED_ALTERNATIVE
    if alt not in ALTERNATIVES:
        raise RecordError(f"{where}: field 'alternative' is {alt!r}, not one of {', '.join(ALTERNATIVES)}")
    return alt


@dataclass
class PlanSpec:
    arms: list[ArmSpec]
    n: int
    seed: int
    client: str | None
    port: int | None
    trial_timeout_s: float
    client_fingerprint: str | None = None
    alternative: str = DEFAULT_ALTERNATIVE      # the test's sidedness, used by the report

    @classmethod
    def from_json(cls, d: Any, where: str = "plan.json: spec") -> "PlanSpec":
        if not isinstance(d, dict):
            raise RecordError(f"{where}: not a JSON object")
        arms = _need(d, "arms", (list,), where)
        return cls(arms=[ArmSpec.from_json(a, f"{where}: arms[{i}]") for i, a in enumerate(arms)],
                   n=_need(d, "n", (int,), where), seed=_need(d, "seed", (int,), where),
                   client=_need(d, "client", (str,), where, optional=True),
                   port=_need(d, "port", (int,), where, optional=True),
                   trial_timeout_s=float(_need(d, "trial_timeout_s", NUMBER, where)),
                   client_fingerprint=_need(d, "client_fingerprint", (str,), where, optional=True),
                   alternative=_alternative(d, where))

    def to_json(self) -> dict:
        return asdict(self)


@dataclass
class Plan:
    spec: PlanSpec
    order: list[PlanEntry]
    created: float = 0.0
    schema: str = PLAN_SCHEMA
    salt: str | None = None          # the fingerprints' HMAC key (redact.fingerprint), random per experiment

    @property
    def arm_names(self) -> list[str]:
        return [a.name for a in self.spec.arms]

    def to_json(self) -> dict:
        return {"schema": self.schema, "spec": self.spec.to_json(), "order": [asdict(e) for e in self.order],
                "created": self.created, "salt": self.salt}

    @classmethod
    def from_json(cls, d: Any, where: str = "plan.json") -> "Plan":
        if not isinstance(d, dict):
            raise RecordError(f"{where}: a JSON {_type(d)}, not an object")
        order = _need(d, "order", (list,), where)
        plan = cls(spec=PlanSpec.from_json(d.get("spec"), f"{where}: spec"),
                   order=[PlanEntry.from_json(e, f"{where}: order[{i}]") for i, e in enumerate(order)],
                   created=float(_need(d, "created", NUMBER, where, optional=True) or 0.0),
                   schema=_need(d, "schema", (str,), where, optional=True) or PLAN_SCHEMA,
                   salt=_need(d, "salt", (str,), where, optional=True))
        # The order names the trial folders: only the plan's own arms, each index once.
        names = set(plan.arm_names)
        for i, e in enumerate(plan.order):
            if e.arm not in names:
                raise RecordError(f"{where}: order[{i}] names arm {e.arm!r}, which is not one of the plan's arms")
        if len({e.index for e in plan.order}) != len(plan.order):
            raise RecordError(f"{where}: the order repeats a trial index")
        return plan
