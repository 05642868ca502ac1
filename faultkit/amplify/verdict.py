"""The cause class, in words, from each amplifier arm's crash rate against the plain arm's.

One table (MEANING) says what a decided change means, per arm and direction; the verdict names every
class a decided arm points to (strongest first), the fastest-reproducing arm with its median time to
crash, and, where nothing is decided, how many trials per arm would decide at the rates seen."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ..trials.stats import trials_for_power
from . import arms as A
from .sequential import DECIDED, UNDECIDABLE, threshold

UP, DOWN = "up", "down"
MAX_N = 60                   # "how many trials would decide" is looked for up to this many per arm

# (arm, direction) -> (what it did, what that says). Arms not listed use their class's line.
MEANING: dict[tuple[str, str], tuple[str, str]] = {
    ("caching-off", UP): ("caching off raised the crash rate", "a use of freed device memory (a stale pointer or "
                          "index into a block the program had freed)"),
    ("caching-off", DOWN): ("caching off removed the crash", "memory freed while another stream still used it: "
                            "the driver's free waits for the device, which hides the reuse"),
    ("poison", UP): ("poisoning freed blocks raised the crash rate", "a read of freed device memory (the stale data "
                     "it read was plausible until poisoned)"),
    ("poison", DOWN): ("poisoning freed blocks removed the crash", "a read of freed memory whose stale contents "
                       "were what crashed (poison reads differently)"),
    ("release", UP): ("releasing the cache at the site raised the crash rate", "a use of freed device memory "
                      "(a stale pointer or index into a block freed before the call)"),
    ("release", DOWN): ("releasing the cache at the site removed the crash", "a block reused while something "
                        "still read it (released blocks come back at new addresses)"),
    ("hold-back", DOWN): ("holding freed blocks back removed the crash", "a freed block reused too soon while "
                          "something still read it"),
    ("hold-back", UP): ("holding freed blocks back raised the crash rate", "memory pressure or a changed "
                        "allocation pattern (a held block is not reused): look at out-of-memory paths"),
    ("expandable-on", UP): ("expandable segments raised the crash rate", "an access outside its block that a "
                            "fixed segment kept mapped"),
    ("expandable-on", DOWN): ("expandable segments removed the crash", "a reuse of freed memory at the same "
                              "address (blocks move with expandable segments)"),
    ("expandable-off", UP): ("fixed segments raised the crash rate", "a reuse of freed memory in place"),
    ("expandable-off", DOWN): ("fixed segments removed the crash", "an access outside its block that unmapped "
                               "pages exposed"),
    ("launch-blocking", DOWN): ("serialized launches removed the crash", "a race between streams or with the "
                                "host"),
    ("launch-blocking", UP): ("serialized launches raised the crash rate", "a timing-dependent bug (a race); "
                              "with launches serialized the error is reported at its launch"),
    ("serialize", DOWN): ("serialized kernels and copies removed the crash", "a race between streams, copies or "
                          "the host"),
    ("serialize", UP): ("serialized kernels and copies raised the crash rate", "a timing-dependent bug; the "
                        "error is now reported at its launch"),
}
STOPPED_UNCOUNTED = {"not-reached": "stopped: the amplifier did not reach the processes that ran the work",
                     "failed-to-start": "stopped: its server failed to start"}
CLASS_LINE = {A.RACE: "a race between the host's scheduling and the GPU work (timing decides it)",
              A.MEMORY_REUSE: "a use of freed or reused device memory",
              A.ERROR_FAR: "an error reported far from its launch, or a race"}


@dataclass
class ArmOutcome:
    """One amplifier arm against the plain arm, as the verdict reads it."""
    arm: str
    cause: str
    crashes: int
    trials: int
    plain_crashes: int
    plain_trials: int
    p: float
    state: str                          # decided / undecidable / running (sequential.py)
    median_time_to_crash_s: float | None = None
    not_counted: int = 0
    black_box: list[str] = field(default_factory=list)      # owner findings of its crashes

    @property
    def direction(self) -> str | None:
        if not self.trials or not self.plain_trials:
            return None
        a, b = self.crashes / self.trials, self.plain_crashes / self.plain_trials
        return UP if a > b else DOWN if a < b else None


def _effect(o: ArmOutcome) -> tuple[str, str]:
    d = o.direction or UP
    if (o.arm, d) in MEANING:
        return MEANING[(o.arm, d)]
    amp = A.BY_NAME.get(o.arm)
    said = f"{o.arm} {'raised the crash rate' if d == UP else 'removed the crash' if o.crashes == 0 else 'lowered the crash rate'}"
    return said, CLASS_LINE.get(amp.cause if amp else "", "a change the table does not name")


def fmt_p(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def sentence(o: ArmOutcome) -> str:
    did, means = _effect(o)
    counts = (f"from {o.plain_crashes}/{o.plain_trials} to {o.crashes}/{o.trials}" if o.direction == UP else
              f"({o.crashes}/{o.trials} vs {o.plain_crashes}/{o.plain_trials})")
    text = f"{did} {counts} (Fisher p = {fmt_p(o.p)}): {means}"
    if o.black_box:
        text += f"; the black box of the amplified crashes {o.black_box[0]}"
    return text


def trials_to_decide(o: ArmOutcome, alpha: float, rounds: int, target: float = 0.9) -> int | None:
    if not o.trials or not o.plain_trials:
        return None
    a, b = o.crashes / o.trials, o.plain_crashes / o.plain_trials
    if a == b:
        return None
    hi, lo = max(a, b), min(a, b)
    # bounded: the exact power scan costs n^2 per n, and an amplifier that needs more than this many
    # trials per arm to show itself is not amplifying
    return trials_for_power(hi, lo, target, threshold(alpha, rounds), "two-sided", max_n=MAX_N)[0]


def decide(outcomes: list[ArmOutcome], alpha: float, rounds: int, plain: tuple[int, int]) -> dict:
    """The verdict: JSON, with `text` its words."""
    decided = sorted([o for o in outcomes if o.state == DECIDED and o.direction], key=lambda o: o.p)
    classes = []
    for o in decided:
        if o.cause not in classes:
            classes.append(o.cause)
    lines = [sentence(o) + "." for o in decided]
    # an arm that crashes no more often than the plain server is no better place to iterate than it
    fastest = min((o for o in outcomes if o.median_time_to_crash_s is not None and o.crashes and
                   o.crashes / o.trials >= 0.5 and o.direction == UP),
                  key=lambda o: (-o.crashes / o.trials, o.median_time_to_crash_s), default=None)
    undecided = []
    for o in outcomes:
        if o.state == DECIDED:
            continue
        need = trials_to_decide(o, alpha, rounds)
        why = ("stopped: no outcome of the remaining rounds could decide" if o.state == UNDECIDABLE else
               "still running when the experiment ended")
        if o.state in STOPPED_UNCOUNTED:
            undecided.append({"arm": o.arm, "text": f"{o.arm}: {STOPPED_UNCOUNTED[o.state]} ({o.not_counted} trial(s) "
                                                    f"not counted; see the report's list)",
                              "trials_per_arm_to_decide": None})
            continue
        if o.direction is None:
            words = f"{o.arm}: no change ({o.crashes}/{o.trials} vs {o.plain_crashes}/{o.plain_trials}); {why}"
        else:
            words = (f"{o.arm}: {o.crashes}/{o.trials} vs {o.plain_crashes}/{o.plain_trials} (p = {fmt_p(o.p)}) "
                     f"is not decided; {why}")
        if need is not None:
            words += f"; at these rates {need} trials per arm would decide (90% power)"
        elif o.direction is not None:
            words += f"; at these rates no n up to {MAX_N} per arm would"
        undecided.append({"arm": o.arm, "text": words, "trials_per_arm_to_decide": need})
    if decided:
        head = "Cause class: " + "; ".join(CLASS_LINE.get(c, c) for c in classes) + "."
    elif plain[1] and all(o.trials for o in outcomes):
        head = ("No amplifier changed the crash rate decidedly: the cause class is not shown by these arms" +
                (" (too few trials: see below)." if any(u["trials_per_arm_to_decide"] for u in undecided) else "."))
    else:
        head = "Too few counted trials to say anything."
    text = [head] + lines
    if fastest is not None:
        text.append(f"Fastest to reproduce: {fastest.arm} ({fastest.crashes}/{fastest.trials} crashed, median "
                    f"{fastest.median_time_to_crash_s:.1f} s to crash): iterate there.")
    text += [u["text"] + "." for u in undecided]
    return {"classes": classes, "decided": [{"arm": o.arm, "cause": o.cause, "direction": o.direction, "p": o.p,
                                             "text": sentence(o)} for o in decided],
            "fastest": ({"arm": fastest.arm, "median_time_to_crash_s": fastest.median_time_to_crash_s,
                         "crashes": fastest.crashes, "trials": fastest.trials} if fastest else None),
            "undecided": undecided, "text": "\n".join(text), "outcomes": [asdict(o) for o in outcomes]}
