"""Writing to a terminal that may be closed or broken: what faultkit shows on the side (a status
line, progress) never stops the work it reports on."""

from __future__ import annotations

ERASE = "\r\x1b[K"          # back to the line's start and clear it


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


_CONTROL = None


def safe_line(text: str) -> str:
    """Evidence-derived text as one harmless terminal line: escape sequences, C0/C1 controls and
    bidi overrides removed, line breaks shown as spaces."""
    global _CONTROL
    if _CONTROL is None:
        import re
        _CONTROL = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[PX^_][^\x1b]*(?:\x1b\\)?|.)?"
                              r"|[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f]")
    return _CONTROL.sub("", str(text).replace("\r\n", " ").replace("\n", " ").replace("\t", " "))
