"""Every text reader runs in time linear in its input (issue 28: 100 KB of newlines took kind
detection > 30 s). Each shape is read at n and at 10n units: a linear reader takes about 10x as
long, a quadratic one 100x. The bound is generous (50x) and no absolute time is asserted, so a
busy machine does not fail it; CPU time of the thread is compared, not the wall clock, and a large
run that looks too slow is tried again (best of three) to keep noise out."""

from __future__ import annotations

import time

import pytest

from faultkit.ingest.debugger import parse_debugger
from faultkit.ingest.kernel_mentions import find_mentions
from faultkit.sources import detect_kinds
from faultkit.ingest.kernel_log import parse_kernel_log
from faultkit.ingest.runtime_log import parse_runtime_log

# Shapes that make backtracking patterns revisit what follows: blank lines (the reproducer of
# #28), blanks before newlines, CRLF, brackets, stamps and prompts repeated without their message.
UNITS = {"newlines": "\n", "blank lines with spaces": " \n", "crlf": "\r\n", "tabs": "\t\n", "brackets": "[\n",
         "stamps without a message": "[    1.000000] \n", "amdgpu without a message": "amdgpu \n",
         "sanitizer rules": "========= \n", "spaces": " ", "prompts": "(gdb) \n", "frames": '  File "\n',
         # kernel mentions: prose with a fault word and backticks, kernel-trace rows, launches
         "backticked kernels beside a fault": "illegal memory access in `k_kernel` `x<\n", "dispatch rows": '"KERNEL_DISPATCH",\n',
         "launch syntax": "CUDA error k<<<x<<<\n"}
READERS = {"detect_kinds": detect_kinds, "kernel log": parse_kernel_log, "runtime log": parse_runtime_log,
           "debugger": parse_debugger, "kernel mentions": lambda t: find_mentions(t, "t")}
# Not fewer units for the long ones: the weakest quadratic (a count of the newlines before each line,
# at memchr speed) took 64x at 10x of 10,000 `launch syntax` lines, but under 50x at 2,000.
SMALL = 10_000


def _cpu(fn, text: str) -> float:
    """CPU seconds of this thread (not the wall clock: on a shared machine, or beside another test
    worker, the time a test is descheduled is not the reader's)."""
    t = time.thread_time()
    fn(text)
    return time.thread_time() - t


def tenfold_ratio(fn, unit: str) -> tuple[float, float, float]:
    """(small, large, large/small) CPU seconds of `fn` on n and 10n copies of `unit`. The small run is
    the best of three; the large one is repeated (best of three) only while it looks too slow: a
    linear reader pays for one large run, a quadratic one fails all three."""
    n = SMALL
    small = min(_cpu(fn, unit * n) for _ in range(3))
    large = ratio = float("inf")
    for _ in range(3):
        large = min(large, _cpu(fn, unit * n * 10))
        # A floor for the small run: timer resolution must not turn a fast run into a huge ratio.
        ratio = large / max(small, 2e-3)
        if ratio < 50:
            break
    return small, large, ratio


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("unit", UNITS)
def test_ten_times_the_input_takes_about_ten_times_as_long(reader, unit):
    small, large, ratio = tenfold_ratio(READERS[reader], UNITS[unit])
    assert ratio < 50, f"{reader} on {unit!r}: {SMALL}x took {small:.4f} s, {SMALL * 10}x took {large:.4f} s"


def test_reproducer_100k_newlines_detected_as_plain_text():
    # The reproducer itself: `print(end='\n'*100000)` piped to triage; it has no kernel marker.
    assert detect_kinds("\n" * 100_000) == {"runtime-log"}
