"""The crash-rate report: rates with exact and Wilson intervals, Fisher's and Boschloo's exact tests,
time to crash, signatures, and (HTML) a plot of each arm's rate with its interval."""

from __future__ import annotations

import html
import json
import statistics
from collections import Counter

from .records import Plan, TrialResult
from .stats import (BOSCHLOO_MAX_N, DEFAULT_ALTERNATIVE, alternative_words, arm_rate, boschloo, fisher, metric_compare,
                    trials_for_power)

SCHEMA = "faultkit.trials.report/1"
CONVENTION = ("Fisher's exact test on the 2x2 table [crashes, survivals] per arm (scipy.stats.fisher_exact), "
              "with the sidedness the plan recorded (plan.json's spec.alternative; `--alternative` for counts "
              "given by hand): 'greater' tests 'the first arm crashes more often', 'two-sided' a difference "
              "either way; every comparison lists both p values. Boschloo's exact "
              "unconditional test (scipy.stats.boschloo_exact) alongside, as it has more power at these sizes. "
              "Intervals are 95%: Clopper-Pearson (exact) and Wilson score.")


def summarise(plan: Plan | None, results: list[TrialResult]) -> dict:
    """Rates over the trials that started: a trial that failed to start is listed per arm, never
    counted as a crash or a survival."""
    arm_names = plan.arm_names if plan else sorted({r.arm for r in results})
    arms = []
    for name in arm_names:
        every = [r for r in results if r.arm == name]
        rs = [r for r in every if r.counted]
        crashes = sum(1 for r in rs if r.crashed)
        ttc = [r.time_to_crash_s for r in rs if r.crashed and r.time_to_crash_s is not None]
        values = [r.metric for r in rs if r.metric is not None]
        arms.append(_arm(name, crashes, len(rs)) | {
            "time_to_crash_s": {"median": statistics.median(ttc), "min": min(ttc), "max": max(ttc)} if ttc else None,
            "signatures": dict(Counter(r.signature or "unknown" for r in rs if r.crashed).most_common()),
            "env_mismatch_trials": [r.index for r in rs if r.env.mismatches],
            # no process lived long enough to be read: not a mismatch, not verified either
            "env_unchecked_trials": [r.index for r in rs if not r.env.ok and not r.env.mismatches],
            "env_exited_before_check": sum(len(r.env.exited) for r in rs),
            "failed_to_start_trials": [{"index": r.index, "why": r.failed_to_start} for r in every if not r.counted],
            "ended_by": dict(Counter(r.ended_by for r in rs)),
            "metric": {"values": values, "n": len(values), "median": statistics.median(values),
                       "min": min(values), "max": max(values)} if values else None,
        })
    planned = len(plan.order) if plan else len(results)
    regex = next((r.metric_regex for r in results if r.metric_regex), None)
    counted = [r for r in results if r.counted]
    return _finish(arms, planned, len(counted), plan.spec.seed if plan else None,
                   sorted(((r.index, r.arm, r.crashed, r.outcome) for r in results)), regex,
                   alternative=plan.spec.alternative if plan else DEFAULT_ALTERNATIVE)


def summarise_counts(counts: dict[str, tuple[int, int]], alternative: str = DEFAULT_ALTERNATIVE) -> dict:
    """Counts a user collected by hand (`--counts base=2/5`): the same tests, no per-trial detail."""
    arms = [_arm(name, c, n) | {"time_to_crash_s": None, "signatures": {}, "env_mismatch_trials": [],
                                "env_unchecked_trials": [], "env_exited_before_check": 0,
                                "failed_to_start_trials": [], "ended_by": {}, "metric": None} for name, (c, n) in counts.items()]
    total = sum(n for _, n in counts.values())
    return _finish(arms, total, total, None, [], None, by_hand=True, alternative=alternative)


def _arm(name: str, crashes: int, trials: int) -> dict:
    rate = arm_rate(name, crashes, trials)
    return {"arm": name, "crashes": crashes, "trials": trials, "rate": rate.rate,
            "exact_ci": [float(x) for x in rate.exact_ci], "wilson_ci": [float(x) for x in rate.wilson_ci]}


def _finish(arms: list[dict], planned: int, finished: int, seed, order, metric_regex, by_hand=False,
            alternative: str = DEFAULT_ALTERNATIVE) -> dict:
    comparisons = []
    for i in range(len(arms)):
        for j in range(i + 1, len(arms)):
            a, b = arms[i], arms[j]
            if a["trials"] and b["trials"]:
                args = (a["crashes"], a["trials"], b["crashes"], b["trials"])
                c = {"arms": [a["arm"], b["arm"]],
                     "fisher_two_sided": fisher(*args), "fisher_greater": fisher(*args, alternative="greater"),
                     "fisher_less": fisher(*args, alternative="less"), "boschloo_two_sided": boschloo(*args)}
                c["alternative"] = alternative
                c["p"] = c["fisher_greater"] if alternative == "greater" else c["fisher_two_sided"]
                c.update(_decides(a, b, c["p"], alternative))
                if a["metric"] and b["metric"]:
                    c["metric"] = metric_compare(a["metric"]["values"], b["metric"]["values"])
                comparisons.append(c)
    return {"schema": SCHEMA, "convention": CONVENTION, "planned_trials": planned, "finished_trials": finished,
            "seed": seed, "by_hand": by_hand, "alternative": alternative, "metric_regex": metric_regex, "arms": arms,
            "comparisons": comparisons, "order": order}


def _decides(a: dict, b: dict, p: float, alternative: str, alpha: float = 0.05, target: float = 0.9) -> dict:
    """A plain-language conclusion, and when the difference is not shown, whether that is because
    the arms are alike or because there were too few trials to tell."""
    ca, na, cb, nb = a["crashes"], a["trials"], b["crashes"], b["trials"]
    counts = f"{ca}/{na} vs {cb}/{nb}"
    sided = "one-sided" if alternative == "greater" else "two-sided"
    # p <= alpha: the rejection rule `trials plan` counts power and "crashes needed against 0" by
    if p <= alpha:
        hi, lo = (a, b) if a["rate"] > b["rate"] else (b, a)
        return {"conclusion": f"{hi['arm']} crashes more often than {lo['arm']} ({counts}; Fisher {sided} "
                              f"p = {_fmt_p(p)}): unlikely to be chance at alpha {alpha}.",
                "too_few_trials": False, "trials_per_arm_to_decide": None}
    if alternative == "greater":       # the direction tested: the first arm against the second
        hi_rate, lo_rate = a["rate"], b["rate"]
    else:
        hi_rate, lo_rate = max(a["rate"], b["rate"]), min(a["rate"], b["rate"])
    need = trials_for_power(hi_rate, lo_rate, target, alpha, alternative)[0] if hi_rate > lo_rate else None
    too_few = need is not None and need > min(na, nb)
    text = (f"No difference shown: {counts} (Fisher {sided} p = {_fmt_p(p)}"
            + (f", testing {alternative_words(alternative, a['arm'], b['arm'])[len('one-sided: '):]}"
               if alternative == "greater" else "") + ") is consistent with chance.")
    if too_few:
        text += (f" Too few trials to tell: if the rates really are {hi_rate:.0%} and {lo_rate:.0%}, {need} trials "
                 f"per arm give {target:.0%} power ({sided}, alpha {alpha}); {min(na, nb)} per arm cannot.")
    elif hi_rate == lo_rate:
        text += " The observed rates are equal."
    elif need is None:
        text += f" At the observed rates no n up to 400 per arm reaches {target:.0%} power: the arms are alike."
    return {"conclusion": text, "too_few_trials": too_few, "trials_per_arm_to_decide": need}


def _fmt_p(p: float) -> str:
    return f"{p:.2g}" if p >= 1e-3 else f"{p:.1e}"


def _in_flight(s: dict) -> str:
    """A report made while a cluster still runs trials says it is partial, and what is still out."""
    running = s.get("in_flight") or {}
    if not running:
        return ""
    jobs = ", ".join(map(str, (s.get("engine") or {}).get("jobs", [])))
    states = Counter(running.values())
    return (f" **Partial:** {len(running)} trial(s) still queued or running on {s['engine']['engine']}"
            f"{f' (job {jobs})' if jobs else ''}: " + ", ".join(f"{n} {st.lower()}" for st, n in states.items())
            + "; this report changes as they finish.")


def render_markdown(s: dict) -> str:
    source = ("Counts given by hand (`--counts`): no per-trial detail, environments not verified by faultkit."
              if s.get("by_hand") else
              f"{s['finished_trials']} of {s['planned_trials']} planned trials finished (seed {s['seed']})."
              + _in_flight(s))
    out = ["# faultkit trials report", "", source, "", "## Conclusion", ""]
    for a in s["arms"]:
        failed = a.get("failed_to_start_trials") or []
        if failed:
            out.append(f"- **Warning:** {len(failed)} trial(s) of {a['arm']} failed to start and are not counted "
                       f"in its rate (trial {', '.join(str(f['index']) for f in failed)}: {failed[0]['why']}).")
    for c in s["comparisons"]:
        out.append(f"- {c['conclusion']}")
        if c.get("too_few_trials"):
            out.append(f"- **Warning:** too few trials: {c['arms'][0]} vs {c['arms'][1]} cannot show a difference of "
                       f"this size; run {c['trials_per_arm_to_decide']} per arm "
                       f"(`faultkit trials plan` gives the figure for other rates).")
        m = c.get("metric")
        if m and m["median_change"] is not None:
            mw = f", Mann-Whitney p = {_fmt_p(m['mann_whitney_p'])}" if m["mann_whitney_p"] is not None else ""
            out.append(f"- Metric: {c['arms'][1]}'s median is {m['median_change']:+.0%} against {c['arms'][0]}'s{mw}.")
    out += ["", "| arm | crashes / trials | rate | 95% exact (Clopper-Pearson) | 95% Wilson | median time to crash | "
            "env not verified in |", "|---|---|---|---|---|---|---|"]
    for a in s["arms"]:
        ttc = f"{a['time_to_crash_s']['median']:.1f} s" if a["time_to_crash_s"] else ""
        rate = f"{a['rate']:.0%}" if a["trials"] else ""
        env = "n/a" if s.get("by_hand") else ", ".join(map(str, a["env_mismatch_trials"])) or "none"
        out.append(f"| {a['arm']} | {a['crashes']} / {a['trials']} | {rate} | {a['exact_ci'][0]:.2f}–{a['exact_ci'][1]:.2f}"
                   f" | {a['wilson_ci'][0]:.2f}–{a['wilson_ci'][1]:.2f} | {ttc} | {env} |")
    if any(a["metric"] for a in s["arms"]):
        out += ["", f"## Metric (`{s['metric_regex']}`)", "", "| arm | trials with a value | median | min | max |",
                "|---|---|---|---|---|"]
        for a in s["arms"]:
            m = a["metric"]
            out.append(f"| {a['arm']} | {m['n']} | {m['median']:g} | {m['min']:g} | {m['max']:g} |" if m else
                       f"| {a['arm']} | 0 | | | |")
    out += ["", "## Tests", ""]
    for c in s["comparisons"]:
        x, y = c["arms"]
        out.append(f"- {x} vs {y}: Fisher p = {_fmt_p(c['fisher_two_sided'])} two-sided "
                   f"(one-sided {x} > {y}: {_fmt_p(c['fisher_greater'])}); Boschloo p = "
                   + (f"{_fmt_p(c['boschloo_two_sided'])} two-sided." if c["boschloo_two_sided"] is not None else
                      f"not computed past {BOSCHLOO_MAX_N} trials per arm (Fisher's test stands)."))
    out += ["", f"Convention: {s['convention']}", "", "## Crash signatures", ""]
    for a in s["arms"]:
        for sig, n in a["signatures"].items():
            out.append(f"- {a['arm']}: {n} × {sig}")
    if any(a["env_mismatch_trials"] for a in s["arms"]):
        out += ["", "**Warning:** in some trials the arm's environment did not reach every process (see each "
                "trial's result.json `env`): those trials did not test what the arm says."]
    unchecked = sum(len(a.get("env_unchecked_trials") or []) for a in s["arms"])
    if unchecked:
        out += ["", f"In {unchecked} trial(s) every process had exited before its environment could be read: "
                "their environment is not verified (not a mismatch)."]
    exited = sum(a.get("env_exited_before_check", 0) for a in s["arms"])
    if exited:
        out += ["", f"{exited} short-lived process(es) exited before their environment could be checked (helpers "
                "such as `true`, compilers, `nvidia-smi`); they are listed in each trial's result.json `env.exited`, "
                "not counted as mismatches."]
    return "\n".join(out) + "\n"


def _svg(s: dict) -> str:
    width, row, left = 560, 34, 140
    h = row * len(s["arms"]) + 40
    h += 18
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{h}" role="img" '
             f'aria-label="crash rate per arm with 95% exact interval">',
             f'<text x="{left}" y="{h - 2}" font-size="11">dot: observed crash rate; bar: 95% exact '
             f'(Clopper-Pearson) interval</text>']
    scale = width - left - 20
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = left + tick * scale
        parts.append(f'<line x1="{x:.1f}" y1="10" x2="{x:.1f}" y2="{h - 43}" stroke="#ddd"/>'
                     f'<text x="{x:.1f}" y="{h - 26}" font-size="11" text-anchor="middle">{tick:.0%}</text>')
    for i, a in enumerate(s["arms"]):
        y = 25 + i * row
        lo, hi = a["exact_ci"]
        parts.append(f'<text x="{left - 8}" y="{y + 4}" font-size="12" text-anchor="end">'
                     f'{html.escape(a["arm"])} ({a["crashes"]}/{a["trials"]})</text>')
        parts.append(f'<line x1="{left + lo * scale:.1f}" y1="{y}" x2="{left + hi * scale:.1f}" y2="{y}" '
                     f'stroke="#555" stroke-width="2"/>')
        if a["trials"]:
            parts.append(f'<circle cx="{left + a["rate"] * scale:.1f}" cy="{y}" r="5" fill="#c0392b"/>')
    parts.append("</svg>")
    return "".join(parts)


def render_html(s: dict) -> str:
    md = render_markdown(s)
    body = []
    for line in md.splitlines():
        if line.startswith("# "):
            body.append(f"<h1>{html.escape(line[2:])}</h1>")
        elif line.startswith("## "):
            body.append(f"<h2>{html.escape(line[3:])}</h2>")
        elif line.startswith("|---"):
            continue
        elif line.startswith("| "):
            cells = [c.strip() for c in line.strip("|").split("|")]
            tag = "th" if line.startswith("| arm |") else "td"
            body.append("<tr>" + "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in cells) + "</tr>")
        elif line.startswith("- **Warning:**"):
            body.append(f'<p class="warn">{html.escape(line[2:]).replace("**", "")}</p>')
        elif line.startswith("- "):
            body.append(f"<li>{html.escape(line[2:])}</li>")
        elif line:
            body.append(f"<p>{html.escape(line).replace('**', '')}</p>")
    wrapped, tables = [], 0
    for i, b in enumerate(body):          # each run of rows is one table; the plot follows the first
        row, prev_row = b.startswith("<tr>"), i > 0 and body[i - 1].startswith("<tr>")
        if row and not prev_row:
            wrapped.append("<table>")
        wrapped.append(b)
        if row and not (i + 1 < len(body) and body[i + 1].startswith("<tr>")):
            wrapped.append("</table>")
            tables += 1
            if tables == 1:
                wrapped.append(_svg(s))
    body = wrapped
    return ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>faultkit trials</title><style>"
            "body{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto}td,th{border:1px solid #ccc;"
            "padding:.2rem .5rem}table{border-collapse:collapse}.warn{background:#fdecea;border-left:4px solid #c0392b;"
            "padding:.4rem .6rem}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def render_json(s: dict) -> str:
    return json.dumps(s, indent=2) + "\n"


RENDERERS = {"md": render_markdown, "html": render_html, "json": render_json}


def plan_summary(rates: dict[str, float], alpha: float, target: float, n: int | None,
                 alternative: str = DEFAULT_ALTERNATIVE) -> dict:
    """The plan's figures under the test its report will use (`trials run --alternative` records it)."""
    from .stats import min_crashes_vs_zero, power, trials_for_power
    (a, p1), (b, p2) = list(rates.items())[:2]
    alternative = alternative if p1 != p2 else "two-sided"
    if p1 < p2:
        (a, p1), (b, p2) = (b, p2), (a, p1)
    out = {"arms": [a, b], "rates": [p1, p2], "alpha": alpha, "target_power": target, "alternative": alternative}
    if n is not None:
        out.update(trials_per_arm=n, power=power(p1, p2, n, n, alpha, alternative))
    else:
        need, pw = trials_for_power(p1, p2, target, alpha, alternative)
        out.update(trials_per_arm=need, power=pw)
    two = trials_for_power(p1, p2, target, alpha, "two-sided")
    out["two_sided"] = {"trials_per_arm": two[0], "power": two[1]}
    if p2 == 0 and out["trials_per_arm"]:
        out["crashes_needed_vs_zero"] = min_crashes_vs_zero(out["trials_per_arm"], alpha, alternative)
    out["method"] = ("exact: every pair of binomial outcomes enumerated, Fisher's exact test at alpha on each "
                     "(the arm named first is the one expected to crash more)")
    return out
