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
