"""The H200's amplify trials as recorded (tests/data/live_h200_amplify): what the black box says of them."""

from pathlib import Path

from faultkit.analyze import allocation_owner as AO
from faultkit.ingest.agent_files import parse_agent

DATA = Path(__file__).parent / "data" / "live_h200_amplify"


def test_caching_off_says_the_tracker_saw_nothing_not_that_it_did_not_attach():
    """The third run's report said 'the agent recorded no device memory (the tracker did not attach)' of
    every caching-off crash; the worker's header says it attached (`mechanism: c++ trace tracker`) and its
    ring holds no record: the uncached path bypasses the allocator's trace."""
    agent = DATA / "trial-002-caching-off" / "agent"
    log = parse_agent([(f.name, f.read_bytes()) for f in sorted(agent.iterdir())])
    p = log.processes[681]
    assert p.header["alloc"]["mechanism"] == "c++ trace tracker" and p.events == []
    # the trial's only address: its kernel log's Xid 31 (`faulted @ 0x1821a8_01371970`)
    o = AO.black_box(log, [AO.FaultAddress(0x1821A801371970, 681, "the kernel log's fault")], None).owners[0]
    assert o.verdict == "no-map"
    assert o.text == ("pid 681: the agent recorded no device memory (the tracker attached and saw no allocation: "
                      "with PYTORCH_NO_CUDA_MEMORY_CACHING set, PyTorch's memory bypasses the caching allocator and "
                      "its trace)")
