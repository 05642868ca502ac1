"""Writing to a terminal that may be closed or broken: what faultkit shows on the side (a status
line, progress) never stops the work it reports on, and evidence shown there cannot drive it.

Evidence (file and member names, kernel names, log text) may carry terminal escapes: OSC 52
writes the clipboard, OSC 8 makes links, DCS and CSI move the cursor or retitle the window, BS/CR
overwrite what was printed, bidi overrides reorder it, a newline forges a line of faultkit's own.
`clean` is the one place that makes such text safe for a terminal line."""

from __future__ import annotations

import re

ERASE = "\r\x1b[K"          # back to the line's start and clear it

# Whole sequences go (their parameters are not text either): CSI, OSC/DCS/SOS/PM/APC up to their
# terminator (BEL or ST) or the end of the text, other two-byte escapes; 7-bit and 8-bit forms.
ESCAPE_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"                          # CSI ... final byte
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"   # OSC/DCS/SOS/PM/APC
    r"|\x1b[ -/]*[0-~]?")                                          # ESC + intermediates + final
# What is left and cannot be shown as text: C0 (newline and CR included: one line stays one line),
# DEL, C1, the bidi embeddings/overrides/isolates and marks, line/paragraph separators, lone
# surrogates (undecodable bytes kept by surrogateescape).
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029\u2066-\u2069\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def clean(text) -> str:
    """`text` as one safe terminal line: escape sequences removed, every other control character
    (newlines too) shown as U+FFFD, tabs as a space."""
    s = ESCAPE_SEQUENCE.sub("", str(text).replace("\t", " "))
    return CONTROL.sub(REPLACEMENT, s)


def isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False


def write_text(stream, text: str) -> None:
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


def write_bytes(stream, data: bytes) -> None:
    """Bytes through the stream's buffer (text streams decode them, replacing what is not UTF-8)."""
    try:
        buf = getattr(stream, "buffer", None)
        if buf is not None:
            stream.flush()
            buf.write(data)
            buf.flush()
        else:
            stream.write(data.decode("utf-8", "replace"))
            stream.flush()
    except (OSError, ValueError):
        pass

