"""The recorder scans the server's and the client's output on two threads at once: the word finder
must answer on every thread (hyperscan's scratch is one scan's at a time; seen live as
ScratchInUseError in a trials run on the H200, which killed the reader thread of that trial)."""

import threading

import pytest

from faultkit.find_words import WordFinder


@pytest.mark.parametrize("engine", ["hyperscan", "re2"])
def test_concurrent_scans_on_many_threads(engine):
    pytest.importorskip("hyperscan" if engine == "hyperscan" else "re2")
    finder = WordFinder({"fault": [b"illegal memory access"], "dump": [b"core dump"]}, engine=engine)
    block = b"x" * 200_000 + b"CUDA error: an illegal memory access was encountered" + b"y" * 200_000
    errors, answers = [], []

    def scan():
        try:
            for _ in range(100):
                answers.append(finder.found(block))
        except Exception as exc:          # noqa: BLE001 - what the reader thread died of
            errors.append(repr(exc))

    threads = [threading.Thread(target=scan) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(answers) == 800 and all(a == {"fault"} for a in answers)
