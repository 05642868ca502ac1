"""Ways people paste a log, as functions text -> text (the metamorphic harness's transforms).

Each is taken from how evidence arrives in public issue threads: a container or orchestrator
prefix on every line, a process launcher's tag, torchrun's rank prefix, a Markdown quote or code
block, tabs, a collector's timestamp, CRLF line ends, a web page's HTML entities, a terminal's
or a mail client's hard wrap, the device prefix cut away as noise. Combinations apply several in
the order a paste would (the innermost first). Later ones from public threads: GitHub's
`<details>` block, Discord's `>>> `, `journalctl -o short-precise` / `-o cat`, `cat -n`, a ```diff
block's `+`, terminal colours.
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


def details(text: str) -> str:
    """GitHub's collapsed block: `<details><summary>..</summary>`, a blank line, a fenced block."""
    return "<details><summary>Full log</summary>\n\n" + code_block(text) + "\n</details>\n"


def discord_quote(text: str) -> str:
    """Discord's block quote: `>>> ` once, on the first line; the rest of the message is quoted."""
    return ">>> " + text


KERNELISH = re.compile(r"amdgpu [0-9a-f]{4}:|amdgpu: |NVRM: |\[drm|drmn\d|kfd |gmc_v\d|Evicting PASID|qcm fence")
# the kernel's own heads a kernel log line may carry: dmesg's stamps (plain, -e, -T/-H in any locale),
# a journal's or syslog's `... host kernel: `
KERNEL_STAMP = re.compile(r"^(?:\[\s*\+?\d+[.,]\d+\] ?|\d\d:\d\d:\d\d |\[[^\W\d_]{2,4}\.? [^\]\n]{0,30}\d\d:\d\d[^\]\n]{0,12}\] ?|"
                          r"[^\W\d_]{2,5}\.? +\d{1,2} \d\d:\d\d:\d\d(?:\.\d+)? \S* ?kernel: |"
                          r"\d{4}-\d\d-\d\dT\S+ \S+ kernel: )")


def journal_precise(text: str) -> str:
    """`journalctl -o short-precise` of a whole boot: each line under its producer's ident, the
    kernel's lines under `kernel:` (without dmesg's or another journal's stamp), a program's under
    its name and pid."""
    def f(i, ln):
        kernel = KERNEL_STAMP.match(ln) is not None or KERNELISH.search(ln) is not None
        ident = "kernel" if kernel else "python3[4242]"
        # (one stamp for all: a burst within a microsecond's print; a file in reverse order, `journalctl -r`,
        # keeps its order)
        return f"Mar 04 10:00:00.123456 gpu-node-3 {ident}: " + KERNEL_STAMP.sub("", ln)
    return _each(text, f)


DMESG_STAMP = re.compile(r"^\[\s*\d+\.\d+\] ")


def journal_cat(text: str) -> str:
    """`journalctl -o cat`: the messages alone, the kernel's own stamp gone."""
    return _each(text, lambda i, ln: DMESG_STAMP.sub("", ln))


def cat_n(text: str) -> str:
    """`cat -n` (and `nl -ba`): the line's number right-aligned in six columns and a tab."""
    return _each(text, lambda i, ln: f"{i + 1:6d}\t{ln}")


def ansi(text: str) -> str:
    """A terminal's colours copied with the text (vLLM colours its worker tags, loggers their levels)."""
    return _each(text, lambda i, ln: "\x1b[0;36m" + ln[:8] + "\x1b[0m" + ln[8:] if ln else ln)


def compose(*fs):
    def f(text: str) -> str:
        for g in fs:
            text = g(text)
        return text
    return f


SIMPLE = {
    "compose": prefix("vllm-server-1  | "),
    "kubectl-prefix": prefix("[pod/vllm-7d9c/server] "),
    # `kubectl logs --prefix` of a pod whose name has no digit (a DaemonSet's `node-agent-xkqzp`, a plain `vllm`)
    "kubectl-prefix-letters": prefix("[pod/node-agent/dmesg] "),
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
    "details": details,
    "discord-quote": discord_quote,
    "journal-precise": journal_precise,
    "journal-cat": journal_cat,
    "cat-n": cat_n,
    "diff-plus": prefix("+"),
    "ansi": ansi,
}
COMBOS = {
    "quote+compose": compose(SIMPLE["compose"], SIMPLE["quote"]),
    "indent+iso+crlf": compose(SIMPLE["iso-stamp"], SIMPLE["indent"], crlf),
    "launcher+quote": compose(SIMPLE["launcher"], SIMPLE["quote"]),
    "entities+code-block": compose(entities, code_block),
    "wrap+quote": compose(terminal_wrap(80), SIMPLE["quote"]),
    "cut-device+compose": compose(cut_device, SIMPLE["compose"]),
    "rank+tabs": compose(SIMPLE["torchrun-rank"], tabs),
    "diff+quote": compose(prefix("+"), SIMPLE["quote"]),
    "cat-n+quote": compose(cat_n, SIMPLE["quote"]),
    "journal+details": compose(journal_precise, details),
    "ansi+launcher+quote": compose(ansi, SIMPLE["launcher"], SIMPLE["quote"]),
    "kubectl+diff": compose(SIMPLE["kubectl-prefix"], prefix("+")),
}
TRANSFORMS = {**SIMPLE, **COMBOS}
