"""redact.text remembers the short strings it redacted (a report's strings repeat): each string still
gets its own redaction, the first time and every later time, and a string past the memo's bound is
redacted the same way without it."""

from __future__ import annotations

from faultkit import redact

# two texts of one length: one holds a token (tests/test_redact_idempotent.py's line), one does not
SECRET = "--hf-token=hf_abcdefghijklmnopqrstuvwxyz"
PLAIN = "--hf-model=qwen_abcdefghijklmnopqrstuvwx"


def test_each_short_string_gets_its_own_redaction_every_time():
    assert len(SECRET) == len(PLAIN)
    for _ in range(2):
        assert redact.text(SECRET) == "--hf-token=<redacted>"
        assert redact.text(PLAIN) == PLAIN


def test_a_string_past_the_memo_bound_is_redacted_as_a_short_one():
    pad = "x" * redact.MEMO_CHARS
    long = f"{pad}\n{SECRET}\n"
    assert len(long) > redact.MEMO_CHARS
    assert redact.text(long) == f"{pad}\n--hf-token=<redacted>\n"
    assert redact.text(long) == redact.text(f"{pad}\n{SECRET}") + "\n"
