"""The decisive finding is the judge's choice (judge/decisive.py), made from claims: the trace's
placement of the address and the agent's owner are claims like any other, and the report renders
the sentence it is handed."""

from pathlib import Path

from faultkit.export.report import render_markdown
from faultkit.triage import triage

ROOT = Path(__file__).resolve().parent.parent


def test_the_trace_address_is_a_claim_and_the_decisive_finding():
    inc = triage([str(ROOT / "traces" / "sglang-tp2-mi300x")])
    a = inc.traces.address
    # traces/sglang-tp2-mi300x/README.md: the fault address lies in a 4 MiB allocation freed 3.1 ms before the fault
    assert a.verdict == "freed" and a.address == 0x7f3a2c400000
    (claim,) = [c for c in inc.verdict.claims if c.basis.kind == "trace-address"]
    assert claim.kernel is None and claim.ids.page == 0x7f3a2c400000 >> 12
    assert inc.verdict.decisive == a.text
    assert f"Decisive finding: {a.text}" in render_markdown(inc).replace("\\_", "_")


def test_without_a_placed_address_the_top_claim_decides():
    # live_h200_coredump/fault: the CUDA driver's exception report names the kernel (certain), no trace
    inc = triage([str(ROOT / "tests" / "data" / "live_h200_coredump" / "fault")])
    assert inc.verdict.level == "certain"
    top = inc.verdict.claim(inc.verdict.candidates[0].claims[0])
    assert inc.verdict.decisive == top.headline and ";" not in top.headline
