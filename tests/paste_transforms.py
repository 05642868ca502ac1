"""Ways people paste a log, as functions text -> text (the metamorphic harness's transforms).

Each is taken from how evidence arrives in public issue threads: a container or orchestrator
prefix on every line, a process launcher's tag, torchrun's rank prefix, a Markdown quote or code
block, tabs, a collector's timestamp, CRLF line ends, a web page's HTML entities, a terminal's
or a mail client's hard wrap, the device prefix cut away as noise. Combinations apply several in
the order a paste would (the innermost first).
"""

from __future__ import annotations

import re
import textwrap


def _each(text: str, f) -> str:
    end = "\n" if text.endswith("\n") else ""
    body = text[:-1] if end else text
    return "\n".join(f(i, ln) for i, ln in enumerate(body.split("\n"))) + end


def prefix(p: str):
    return lambda text: _each(text, lambda i, ln: p + ln)


def numbered(fmt: str):
    return lambda text: _each(text, lambda i, ln: fmt.format(i=i, s=i % 60, us=(i * 7919) % 1000000) + ln)


def crlf(text: str) -> str:
    return text.replace("\n", "\r\n")


def entities(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def tabs(text: str) -> str:
    """A leading run of 4 spaces becomes a tab (an editor's indentation)."""
    return _each(text, lambda i, ln: re.sub(r"^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), ln))


def terminal_wrap(width: int):
    """A terminal's hard wrap: a long line cut at the width, mid-word."""
    def f(text: str) -> str:
        return _each(text, lambda i, ln: "\n".join(ln[k:k + width] for k in range(0, len(ln), width)) if len(ln) > width
                     else ln)
    return f


def mail_wrap(width: int):
    """A mail client's wrap: at the last space before the width, words kept whole."""
    def f(text: str) -> str:
        return _each(text, lambda i, ln: "\n".join(textwrap.wrap(ln, width, break_long_words=False,
                                                                 break_on_hyphens=False, drop_whitespace=True,
                                                                 replace_whitespace=False)) if len(ln) > width else ln)
    return f


CUT_DEV = re.compile(r"amdgpu [0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]: (?:amdgpu: )?")


def cut_device(text: str) -> str:
    """The `amdgpu 0000:03:00.0: amdgpu: ` prefix cut away as noise."""
    return CUT_DEV.sub("", text)


def code_block(text: str) -> str:
    return "```\n" + text + ("" if text.endswith("\n") else "\n") + "```\n"


def compose(*fs):
    def f(text: str) -> str:
        for g in fs:
            text = g(text)
        return text
    return f


SIMPLE = {
    "compose": prefix("vllm-server-1  | "),
    "kubectl-prefix": prefix("[pod/vllm-7d9c/server] "),
    "launcher": prefix("(VllmWorker rank=1 pid=4242) "),
    "torchrun-rank": prefix("[rank3]: "),
    "mpirun-tag": prefix("[1,3]<stderr>:"),
    "ctest": prefix("12: "),
    "quote": prefix("> "),
    "indent": prefix("    "),
    "code-block": code_block,
    "tab-indent": prefix("\t"),
    "tabs": tabs,
    "iso-stamp": numbered("2025-03-0{i_day}T10:00:{s:02d}.{us:06d}Z ".replace("{i_day}", "4")),
    "containerd": numbered("2025-03-04T10:00:{s:02d}.{us:06d}000Z stderr F "),
    "raw-priority": prefix("<4>"),
    "crlf": crlf,
    "entities": entities,
    "terminal-wrap-80": terminal_wrap(80),
    "mail-wrap-72": mail_wrap(72),
    "cut-device": cut_device,
}
COMBOS = {
    "quote+compose": compose(SIMPLE["compose"], SIMPLE["quote"]),
    "indent+iso+crlf": compose(SIMPLE["iso-stamp"], SIMPLE["indent"], crlf),
    "launcher+quote": compose(SIMPLE["launcher"], SIMPLE["quote"]),
    "entities+code-block": compose(entities, code_block),
    "wrap+quote": compose(terminal_wrap(80), SIMPLE["quote"]),
    "cut-device+compose": compose(cut_device, SIMPLE["compose"]),
    "rank+tabs": compose(SIMPLE["torchrun-rank"], tabs),
}
TRANSFORMS = {**SIMPLE, **COMBOS}
