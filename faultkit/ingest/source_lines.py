"""The source line of a frame where py-spy shows no frame below it: read from the program's file.

py-spy without --native marks a thread `idle` when it released the GIL (a C call) and shows no
frame for builtins: a thread blocked in `with lock:` shows only its own line. That line's text,
where the file can be read here, tells analyze/hidden_call.py which call it is.
"""

from __future__ import annotations

import dataclasses
import linecache
import os
import re
import shlex

from ..hang_model import ProcessStacks

# a comment after the code (crude: a '#' in a string on the line is cut too; the text is for words)
TRAILING_COMMENT = re.compile(r"\s+#[^'\"]*$")


def source_line(file: str | None, line: int | None, command: str | None = None) -> str | None:
    """The text of FILE:LINE where the file can be read: as given, else a path in the process's
    command line with the same base name (py-spy's text prints `dl.py` for `/tmp/dl.py`)."""
    if not file or not line:
        return None
    candidates = [file]
    if command and not os.path.isabs(file):
        try:
            words = shlex.split(command)
        except ValueError:
            words = command.split()
        candidates += [w for w in words if os.path.basename(w) == os.path.basename(file) and w != file]
    for path in candidates:
        if os.path.isfile(path):
            text = TRAILING_COMMENT.sub("", linecache.getline(path, line)).strip()
            if text:
                return text
    return None




def add_source_lines(ps: ProcessStacks) -> ProcessStacks:
    """The innermost frame's source text for each thread py-spy marks idle with no native frame
    (the only case where the line is what says the wait); every other frame is left as it is."""
    for t in ps.threads:
        if t.active is False and t.frames and not any(f.native for f in t.frames):
            f = t.frames[0]
            code = source_line(f.file, f.line, ps.command)
            if code:
                t.frames[0] = dataclasses.replace(f, code=code)
    return ps
