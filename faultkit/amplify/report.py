"""The amplify report: per arm its rate over the counted trials, the trials not counted and why, when
it stopped; the verdict on the cause class; how long the user waited against plain trials; the
checkers' findings. JSON (faultkit.amplify.report/1) and Markdown from the same dict."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from ..trials.runner import trial_name
from ..trials.stats import arm_rate
from . import arms as A
from .engine import ArmState, crashed_dirs
from .sequential import (DECIDED, FIXED_RULE, RULE, bonferroni, fisher_p, fixed_n_for_same_decision,
                         plain_trials_for_crashes, threshold)
from .verdict import ArmOutcome, decide, fmt_p
from ..analyze.allocation_owner import NOT_AN_ADDRESS, AllocationOwner

SCHEMA = "faultkit.amplify.report/1"


BLACK_BOX_LOOK = 3      # crashed trials triaged at most per arm, looking for one whose black box names the block


def black_box_findings(dirs: list[Path], limit: int) -> list[str]:
    """What the black box says about the fault address in the first crashed trials (triage of each
    trial's folder: the agent's allocation map against the fault's address), looking at up to
    BLACK_BOX_LOOK of them: first the block they name together (name_the_block), then the first `limit`
    findings; where none names a block, one line saying why."""
    from ..triage import triage
    found, why = [], []
    for d in dirs[:max(limit, BLACK_BOX_LOOK)]:
        try:
            inc = triage([str(d)])
        except Exception as exc:          # a report without the finding, never a traceback
            why.append(f"{d.name}: triage failed ({type(exc).__name__})")
            continue
        bb = inc.black_box
        # an address the map places in a block or segment; "in no allocation" names nothing (caching off
        # bypasses the allocator and its trace, so its crashes leave the map empty)
        named = [o for o in (bb.owners if bb else []) if o.verdict in ("freed", "past-end", "live")]
        if named:
            found.append((d.name, named[0]))
        else:
            why.append(f"{d.name}: {_no_block(bb, d)}")
    if not found:
        return ["name no block (" + "; ".join(why) + ")"] if why else []
    return [name_the_block(found, len(found) + len(why))] + [f"{o.text} [{n}]" for n, o in found[:limit]]


def name_the_block(found: list[tuple[str, "AllocationOwner"]], looked: int) -> str:
    """The block the amplified crashes have in common: the owners grouped by what they name (the
    allocation site, the size, freed or live); the largest group is the block, with how many of the
    crashed trials looked at name it and how long before each fault it was freed."""
    groups: dict[tuple, list[tuple[str, AllocationOwner]]] = {}
    for n, o in found:
        groups.setdefault((o.verdict, o.allocated_at, o.size, o.level), []).append((n, o))
    (verdict, site, size, level), g = max(groups.items(), key=lambda kv: len(kv[1]))
    ms = sorted(o.freed_ms_before for _, o in g if o.freed_ms_before is not None)
    when = ""
    if verdict == "freed":
        when = (f", freed {ms[0]:,.1f} ms before the fault" if len(ms) == 1 or ms[0] == ms[-1] else
                f", freed {ms[0]:,.1f} to {ms[-1]:,.1f} ms before the fault") if ms else ", freed before the fault"
    state = {"freed": "", "live": " (live at the fault)", "past-end": " (the fault just past its end)"}[verdict]
    text = (f"name the block: the {size:,}-byte {level or 'allocation'} allocated at {site or 'no Python site'}"
            f"{state}{when}, in {len(g)} of {looked} crashed trial(s) looked at ({', '.join(n for n, _ in g)})")
    others = len(found) - len(g)
    if others:
        text += f"; {others} other trial(s) name another block"
    return text


def _no_block(bb, d: Path) -> str:
    """Why a crashed trial's black box names no block, from what the trial holds."""
    if bb is None:
        return "no agent files in the trial"
    notes = [p["note"] for p in bb.processes if p.get("note") and not p.get("allocations")]
    if not any(p.get("allocations") for p in bb.processes):
        return notes[0] if notes and notes[0].startswith("no allocation map") else \
            "no allocation map" + (f": {notes[0]}" if notes else "")
    if bb.owners:
        o = bb.owners[0]
        if o.verdict == NOT_AN_ADDRESS:     # a register's value (allocation_owner): no address to place
            return f"no fault address ({o.text})"
        return f"the fault address is {o.verdict} ({o.text})"
    cores = [p for p in (d / "cores").glob("*") if p.is_file() and not p.name.startswith("pipe.")] \
        if (d / "cores").is_dir() else []
    return ("no fault address in the evidence (" + ("its GPU core's transcript gave none" if cores else
            "no GPU core in the trial") + ", and no trusted kernel-log address)")


def _median_ttc(st: ArmState) -> float | None:
    t = [r.time_to_crash_s for r in st.counted() if r.crashed and r.time_to_crash_s is not None]
    return statistics.median(t) if t else None


def _mean_duration(st: ArmState) -> float | None:
    d = [r.duration_s for r in st.counted()]
    return statistics.fmean(d) if d else None


def summarise(facts: dict, black_box: bool = True) -> dict:
    opts = facts["options"]
    rate: list[ArmState] = facts["arms"]
    plain = rate[0]
    pc, pn = plain.rate()
    rounds = opts.rounds
    arms_out, outcomes = [], []
    for st in rate:
        c, n = st.rate()
        r = arm_rate(st.arm.name, c, n)
        not_counted = [{"index": x.index, "why": st.reached[x.index].why if x.counted else
                        f"failed to start ({x.failed_to_start})"} for x in sorted(st.results, key=lambda x: x.index)
                       if not (x.counted and st.reached[x.index].ok)]
        amp = st.amp
        row = {"arm": st.arm.name, "class": amp.cause if amp else None, "reads": amp.reads if amp else None,
               "what": amp.what if amp else "the server as the user runs it",
               "applies_to": amp.applies_to if amp else None, "variables": st.arm.env,
               "agent": list(amp.agent) if amp else [], "flag": amp.flag if amp else None,
               "command": st.arm.command if amp and (amp.flag or amp.prefix) else None,
               "crashes": c, "trials": n, "rate": r.rate if n else None, "exact_ci": list(map(float, r.exact_ci)),
               "median_time_to_crash_s": _median_ttc(st), "mean_trial_s": _mean_duration(st),
               "not_counted": not_counted, "state": st.state if amp else None, "stopped_after_round":
               st.decided_round, "p_vs_plain": fisher_p(c, n, pc, pn) if amp else None,
               "reached_proof": next((st.reached[x.index].proof for x in st.counted() if st.reached[x.index].proof),
                                     [])}
        arms_out.append(row)
        if amp is not None:
            bb = []
            if black_box and c and amp.cause == A.MEMORY_REUSE and n and c / n > (pc / pn if pn else 0):
                bb = black_box_findings(crashed_dirs(opts.out, st), opts.black_box_trials)
            # the verdict quotes the look that stopped the arm (the plain arm may run on for other arms)
            (dc, dn), (dpc, dpn), dp = st.at_decision or ((c, n), (pc, pn), row["p_vs_plain"])
            outcomes.append(ArmOutcome(st.arm.name, amp.cause, dc, dn, dpc, dpn, dp, st.state,
                                       row["median_time_to_crash_s"], len(not_counted), bb))
            row["at_decision"] = {"crashes": dc, "trials": dn, "plain_crashes": dpc, "plain_trials": dpn, "p": dp}
            row["black_box"] = bb
    verdict = decide(outcomes, opts.alpha, rounds, (pc, pn))
    return {"schema": SCHEMA, "command": opts.command, "client": opts.client, "seed": opts.seed,
            "rule": (RULE.format(n=rounds, threshold=threshold(opts.alpha, rounds), alpha=opts.alpha,
                                 bonferroni=bonferroni(opts.alpha, rounds)) if opts.early_stop else
                     FIXED_RULE.format(n=rounds, alpha=opts.alpha)),
            "threshold": threshold(opts.alpha, rounds) if opts.early_stop else opts.alpha,
            "alpha": opts.alpha, "max_rounds": rounds, "rounds_run": len(facts["rounds"]),
            "slots": [{"gpus": list(s.gpus), "port": s.port} for s in facts["slots"]],
            "arms": arms_out, "skipped": facts["skipped"], "verdict": verdict,
            "waiting": _waiting(facts, rate, verdict), "checkers": [_checker(c) for c in facts["checkers"]],
            "arms_table": [a.to_json() for a in A.ARMS]}


def _waiting(facts: dict, rate: list[ArmState], verdict: dict) -> dict:
    """How long the experiment took, and what plain trials alone would have cost: the time per crash
    (a trial's mean length over its crash rate) and, for each decided arm, the trials a fixed design
    without looks would need at the same rates."""
    rounds = facts["rounds"]
    waited = sum(float((v or {}).get("wall_s") or 0.0) for v in rounds.values())
    plain = rate[0]
    pc, pn = plain.rate()
    mean_plain = _mean_duration(plain)
    out = {"waited_s": round(waited, 1), "plain_seconds_per_crash": (round(mean_plain * pn / pc, 1)
                                                                     if pc and mean_plain else None),
           "plain_crashes": pc, "plain_trials": pn, "arms": []}
    for st in rate[1:]:
        c, n = st.rate()
        if not st.decided_round:
            continue
        until = sum(float((rounds.get(str(r)) or {}).get("wall_s") or 0.0) for r in range(st.decided_round))
        mean = _mean_duration(st)
        dc = (st.at_decision or ((c, n),))[0][0]
        alone = plain_trials_for_crashes(dc, (pc, pn), facts["options"].alpha) if st.state == DECIDED else None
        if alone is not None:
            alone["crashes"] = dc
            alone["seconds"] = round(alone["trials"] * mean_plain, 1) if mean_plain else None
        out["arms"].append({"arm": st.arm.name, "state": st.state, "after_rounds": st.decided_round,
                            "of_rounds": facts["options"].rounds, "waited_s": round(until, 1),
                            "seconds_per_crash": round(mean * n / c, 1) if c and mean else None,
                            "fixed_design_trials_per_arm": fixed_n_for_same_decision((c, n), (pc, pn)),
                            "plain_alone": alone})
    return out


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _checker(c: dict) -> dict:
    r = c["result"]
    said = None
    try:
        from ..triage import triage
        inc = triage([str(c["dir"])])
        v = inc.verdict
        said = f"{v.level} {v.kernel}" if v and v.kernel else (v.level if v else None)
    except Exception as exc:
        said = f"triage failed: {type(exc).__name__}"
    log = c["dir"] / "server.log"
    try:
        reached = b"COMPUTE-SANITIZER" in log.read_bytes() or b"rocgdb" in log.read_bytes().lower()
    except OSError:
        reached = False
    return {"arm": c["arm"], "outcome": r.outcome, "signature": r.signature, "fault_line": r.fault_line,
            "triage": said, "checker_output_seen": reached, "dir": str(c["dir"])}


def render_markdown(s: dict) -> str:
    v = s["verdict"]
    out = ["# faultkit amplify report", "", f"Server: `{s['command']}`" + (f"; client: `{s['client']}`" if s["client"]
                                                                          else ""), "",
           "## Verdict", ""] + [ln for ln in v["text"].splitlines()] + ["", "## Arms", "",
           "| arm | class | crashes / counted | rate | 95% exact | vs plain p | median time to crash | stopped | not counted |",
           "|---|---|---|---|---|---|---|---|---|"]
    for a in s["arms"]:
        rate = f"{a['rate']:.0%}" if a["rate"] is not None else ""
        ttc = f"{a['median_time_to_crash_s']:.1f} s" if a["median_time_to_crash_s"] is not None else ""
        p = fmt_p(a["p_vs_plain"]) if a["p_vs_plain"] is not None else ""
        stop = f"{a['state']} after round {a['stopped_after_round']}" if a["stopped_after_round"] else (a["state"] or "")
        out.append(f"| {a['arm']} | {a['class'] or 'baseline'} | {a['crashes']} / {a['trials']} | {rate} | "
                   f"{a['exact_ci'][0]:.2f}-{a['exact_ci'][1]:.2f} | {p} | {ttc} | {stop} | {len(a['not_counted'])} |")
    nc = [(a["arm"], x) for a in s["arms"] for x in a["not_counted"]]
    if nc:
        out += ["", "**Not counted** (the amplifier did not reach the work, or the server did not start):", ""]
        out += [f"- {arm}, {trial_name(x['index'], arm)}: {x['why']}" for arm, x in nc]
    for a in s["arms"]:
        if a["black_box"] if "black_box" in a else False:
            out += ["", f"Black box of {a['arm']}'s crashes:", ""] + [f"- {t}" for t in a["black_box"]]
    w = s["waiting"]
    out += ["", "## Waiting", "", f"The experiment ran {s['rounds_run']} round(s) in {w['waited_s']:.0f} s."]
    if w["plain_seconds_per_crash"]:
        out.append(f"Plain trials gave a crash every {w['plain_seconds_per_crash']:.0f} s ({w['plain_crashes']}/"
                   f"{w['plain_trials']}).")
    elif w["plain_trials"]:
        out.append(f"Plain trials gave no crash in {w['plain_trials']}.")
    for a in w["arms"]:
        line = (f"- {a['arm']}: {a['state']} after {a['after_rounds']} of at most {a['of_rounds']} rounds, "
                f"{a['waited_s']:.0f} s: {2 * a['after_rounds']} trials of it and the plain arm where the full plan "
                f"(every round) takes {2 * a['of_rounds']}")
        if a["seconds_per_crash"]:
            line += f"; a crash every {a['seconds_per_crash']:.0f} s there"
        if a["fixed_design_trials_per_arm"]:
            line += (f"; knowing these rates in advance, a fixed design at alpha {s['alpha']} would need "
                     f"{a['fixed_design_trials_per_arm']} per arm")
        alone = a.get("plain_alone")
        if alone:
            line += (f"; plain trials alone would need {'at least ' if alone['at_least'] else ''}{alone['trials']:,} "
                     f"to give its {alone['crashes']} crash(es) with a {1 - s['alpha']:.0%} chance ({alone['basis']})"
                     + (f", {_duration(alone['seconds'])} at their mean length, against the {a['waited_s']:.0f} s "
                        f"waited here" if alone["seconds"] else ""))
        out.append(line)
    if s["checkers"]:
        out += ["", "## Checkers (one trial each)", ""]
        for c in s["checkers"]:
            out.append(f"- {c['arm']}: {c['outcome']}; triage: {c['triage'] or 'nothing named'}"
                       + (f"; {c['fault_line'][:160]}" if c["fault_line"] else "")
                       + ("" if c["checker_output_seen"] else " (the checker's own output was not seen in the log)"))
    if s["skipped"]:
        out += ["", "## Not run here", ""] + [f"- {x['arm']}: {x['why']}" for x in s["skipped"]]
    out += ["", "## Rule", "", s["rule"] + ".", "",
            "Trials run in rounds (every running arm once, seeded order, the plain arm in each); a trial is counted "
            "only when its server started and its amplifier is proven to have reached the processes that ran the "
            "GPU work (variables in /proc, the agent's own record, the flag in the command line)."]
    if len(s["slots"]) > 1:
        out.append("Parallel slots (disjoint GPU sets): " + "; ".join(f"GPUs {','.join(x['gpus'])}"
                                                                    + (f" port {x['port']}" if x["port"] else "")
                                                                    for x in s["slots"]) + ".")
    return "\n".join(out) + "\n"


def render_json(s: dict) -> str:
    return json.dumps(s, indent=2, default=str) + "\n"


RENDERERS = {"md": render_markdown, "json": render_json}
