"""The front end every text input is read through: what a paste added to each line is taken off
before any parser sees the line, found by looking at the file itself.

People paste logs through containers (`ollama  | `), launchers (`(VllmWorker rank=1 pid=4242) `,
`[rank1]: `), Markdown (`> `, a code block's indentation), collectors (`2024-05-01T10:00:00Z `),
web pages (`&lt;`), terminals and mail clients (a long line hard-wrapped, its end on the next
line), and cut what they thought was noise (`amdgpu 0000:03:00.0: `, `kernel: `). None of these is
listed here as a format: a *wrapper unit* is any leading quote, tag or stamp of a generic shape
(a bracketed token with a digit or a `/` in it, a parenthesised one with a digit, a token before a
`|`, a numbered `N: `, a date-time, a `<N>` priority), and a unit is a wrapper of this file only when the same shape (its
letters and digits collapsed to classes) opens at least half of the file's lines. Units are peeled
from the outside in while another head follows; the innermost one stays when a parser reads it
natively (a worker tag names its process; a stamp dates the line).

Each kept line keeps its number in the file (a joined continuation's line is dropped from the
numbering, the line it continues keeps its own), and `Normalized.notes` says what was taken off,
for the report. One pass to count shapes, one to peel: linear in the input.
"""

from __future__ import annotations

import html
import functools
import re
from collections import Counter
from dataclasses import dataclass, field

from . import prefilter
from ..find_patterns import PatternPrefilter
from .text import BOUNDARY
from .kernel_markers import MARKERS
from .debugger import (SAN_ACCESS, SAN_ADDR, SAN_ADDR_ONLY, SAN_ASSERT, SAN_AT, SAN_AT_BARE, SAN_AT_OLD, SAN_BARRIER,
                       SAN_BY, SAN_DEVICE_FRAME, SAN_FRAME, SAN_HAZARD, SAN_HW, SAN_INIT, SAN_MALLOC, SAN_RACE,
                       SANITIZER_HEAD)
from .kernel_log import (ADDR, CID, COOKIE, DEV_PREFIX, FIELD, HDR, STATUS, TASK, TS_H_ABS, TS_H_REL, TS_HMS,
                         TS_ISO, TS_JOURNAL, TS_MONO, TS_T, V8_DEC, V8_HDR, V8_REG)
from .runtime_log import BRACKET_TS_PREFIX, ISO_PREFIX, RANK_TAG, ROCCLR_PREFIX, WORKER_TAG

# ---- generic wrapper units: shapes, not formats ----
QUOTE = re.compile(r"(?:>[ \t]?)+")
UNIT = re.compile(
    r"(?P<pipe>[^\s|]{1,64}[ \t]*\|[ \t]?)"                             # `name  | ` (compose, stern)
    r"|(?P<paren>\((?=[^()\n]*\d)[^()\n]{1,96}\)(?:[ \t]*:(?=\s|$))?[ \t]?)"  # `(Worker_TP1 pid=9)` `(pid=9, ip=..)`
    # `[rank1]:` `[1,0]<stderr>:` `[pod/node-agent/dmesg] ` (a digit or a path's `/` in it, not a word: `[INFO]`)
    r"|(?P<brack>\[(?!\+?\d+\.\d+\]|\+\d+,\d+\])(?=[^\]\n]*[\d/])[^\]\s]{1,64}\](?:<\w+>)?:?[ \t]?)"
    r"|(?P<num>\d{1,4}: )"                                              # ctest `9: `
    # `journalctl -o short`/`short-precise`: a program's line under its ident (the kernel's own is kept)
    r"|(?P<journal>[^\W\d_]{2,5}\.? +\d{1,2} \d\d:\d\d:\d\d(?:\.\d{1,9})? \S+ [\w.@/-]+(?:\[\d+\])?: )"
    r"|(?P<lineno>[ \t]*\d{1,7}\t)"                                      # `cat -n`'s and `nl`'s `     1\t`
    r"|(?P<diff>\+(?!\+)[ \t]?)"                                         # a ```diff block's `+` (an added line)
    r"|(?P<prio><\d{1,3}>)"                                             # dmesg --raw `<4>`
    r"|(?P<facility>[a-z]{2,8} *:[a-z]{3,6} *: )"                       # dmesg -x `kern  :err   : `
    r"|(?P<iso>\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?(?:Z|[ ]?[+-]\d\d:?\d\d| UTC)?(?: (?:[A-Z]{2}\d+ ?)+)?\]?(?:[ \t]+(?:stdout|stderr)[ \t]+[FP])?[ \t])"
    # `[Di Jan  9 18:55:45 2024]`, `[Jan 9 18:55]`: words of any language around a clock
    r"|(?P<wall>\[(?=[^\]\n]*\d\d:\d\d)[^\]\n]{4,40}\][ \t]?)")
# The parsers' own heads, read where they are the innermost layer: a worker tag names its process
# (runtime_log.WORKER_TAG), ISO and bracketed stamps date a runtime line, the kernel log's stamps
# (dmesg, -T, -H, journalctl) date its lines.
CLASSES = str.maketrans({c: "9" for c in "0123456789"})


def _shape(kind: str, unit: str) -> str:
    """A unit's shape: digits and letters collapsed, so `[rank0]:` and `[rank7]:` are one shape."""
    if kind in ("iso", "wall", "prio", "num", "diff", "lineno", "journal", "facility"):
        return kind
    s = re.sub(r"[^\W\d_]+", "a", unit.translate(CLASSES))
    return kind + ":" + re.sub(r"9+", "9", re.sub(r"\s+", " ", s.strip()))


def _unit(text: str, pos: int):
    m = UNIT.match(text, pos)
    if not m:
        return None
    return m.lastgroup, m.group(0), m.end()


# a terminal's colours copied with the text (SGR and other CSI sequences)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# Discord's block quote: `>>> ` once, before the first line, quotes the rest of the message
BLOCK_QUOTE = re.compile(r"\A(\s*)>>> ")
JOURNAL_KERNEL = re.compile(r"(?:[^\n]*?[ |>\]])?[^\W\d_]{2,5}\.? +\d{1,2} \d\d:\d\d:\d\d(?:\.\d{1,9})? \S* ?kernel: ")
FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$|^\s*(?:<details>|</details>|<summary>.*</summary>)+\s*$", re.I)
ENTITY = re.compile(r"&(?:lt|gt|amp|quot|apos|nbsp|#\d{1,6}|#x[0-9a-fA-F]{1,6});")
GAP_LINE = re.compile(r"^\s*(?:<redacted>|\[redacted\]|\[\s*\.{3}[^\]]{0,60}\]|\(\s*\.{3}[^)]{0,60}\)|<\.{3}>)\s*$", re.I)


@dataclass
class Notes:
    """What the front end took off a file, for the report."""
    wrappers: list[str] = field(default_factory=list)     # e.g. "`pipe:a |` on 41 lines"
    entities: int = 0
    joined: int = 0
    restored: int = 0
    sanitizer: int = 0          # lines compute-sanitizer's cut `=========` was put back on
    indent: str = ""

    def sentences(self) -> list[str]:
        out = []
        if self.wrappers:
            out.append("a per-line wrapper was read off (" + ", ".join(self.wrappers) + ")")
        if self.indent:
            out.append(f"a common indentation of {len(self.indent)} character(s) was read off")
        if self.entities:
            out.append(f"HTML entities were decoded on {self.entities} line(s)")
        if self.joined:
            out.append(f"{self.joined} hard-wrapped line(s) were joined to the line they continue")
        if self.restored:
            out.append(f"a cut device prefix was restored on {self.restored} line(s)")
        if self.sanitizer:
            out.append(f"compute-sanitizer's cut `{SANITIZER_HEAD}` head was restored on {self.sanitizer} line(s)")
        return out


class Normalized(prefilter.Excerpt):
    notes: Notes
    runtime_text: "Normalized"      # the same lines with the runtime parser's own innermost heads kept


def for_runtime(text: str) -> str:
    """What the runtime log parser reads: its own worker tags and stamps kept on the lines."""
    return getattr(text, "runtime_text", text)


def _lines_with_numbers(text: str):
    """(file line number, raw line) for every line held; an excerpt's lines keep the file's numbers."""
    stretches = getattr(text, "stretches", None)
    k = 0
    for idx, raw in enumerate(text.split("\n")):
        if stretches is None:
            yield idx + 1, raw
        else:
            no, k = text.line_no(idx, k)
            yield no, raw


def _native(kind: str, unit: str) -> bool:
    """The innermost unit the runtime log parser reads itself (its worker tag, its stamps): kept,
    so the pid and the time it gives stay with the line."""
    if _tag(kind, unit):
        return True
    if kind == "num":
        return True            # ctest's index: the runtime parser tags the line's process with it
    # a stamp: the runtime parser dates a line by the ones it knows and reads past the others
    if kind == "iso":      # a collector's suffix (containerd's `stderr F`) is not the runtime's own
        m = ISO_PREFIX.match(unit) or BRACKET_TS_PREFIX.match(unit)
        return m is not None and m.end() == len(unit)
    return kind == "wall" or kind == "brack" and re.search(r"\d\d:\d\d", unit) is not None


def _tag(kind: str, unit: str) -> bool:
    """A launcher's tag the runtime parser reads (a worker's pid, a rank): kept for it at any depth
    (vLLM's `(EngineCore_DP0 pid=1234) [rank0]: ...`), so the pid and rank reach the line's faults."""
    if kind == "paren":
        return WORKER_TAG.fullmatch(unit) is not None
    return kind == "brack" and RANK_TAG.fullmatch(unit) is not None


def _kernel_line(rest: str) -> bool:
    """The kernel log's own line (its stamp, its device prefix): what a wrapper before it wraps."""
    # both the detector's marker and the parser's own stamp or prefix: each alone is loose (the
    # marker takes `<4>Oct` for a month, the -T stamp `[1,3]<stderr>:[Tue` for a date)
    return MARKERS.match(rest) is not None and (
        any(ts.match(rest) for ts in KERNEL_STAMPS) or DEV_PREFIX.match(rest) is not None)


def _peel(line: str, wrappers: set[str], used: Counter) -> tuple[str, str | None]:
    """Take the file's wrapper units off one line, from the outside in; and the line from its
    innermost unit on where the runtime log parser reads that unit itself (else None)."""
    pos, native, tags = 0, None, []
    for _ in range(6):
        q = QUOTE.match(line, pos)
        if q and "quote" in wrappers:
            used["quote"] += 1
            pos = q.end()
            continue
        if _kernel_line(line[pos:] if pos else line):
            break          # the kernel log's own line, its stamp included: nothing more is a wrapper
        u = _unit(line, pos)
        if u is None:
            break
        kind, unit, end = u
        shape = _shape(kind, unit)
        if shape not in wrappers or kind == "journal" and unit.endswith(" kernel: "):
            break          # (the journal's line of the kernel itself: the kernel log parser reads its stamp)
        after = _unit(line, end)
        inner_head = after is not None or QUOTE.match(line, end) or _kernel_line(line[end:])
        if not inner_head and _native(kind, unit):
            native = pos           # the producer's own head, kept for the runtime parser: not a paste's
        else:
            used[shape] += 1
            if _tag(kind, unit):
                tags.append(unit)  # (a tag outside another head: the runtime parser reads both)
        pos = end
    own = line[native:] if native is not None else None
    if tags:
        own = "".join(tags) + (own if own is not None else line[pos:])
    return (line[pos:] if pos else line), own


# a kernel log line whose device prefix was cut: the stamp, then a record the kernel log parser knows
KERNEL_STAMPS = (TS_MONO, TS_T, TS_H_ABS, TS_H_REL, TS_JOURNAL, TS_ISO, TS_HMS)
# the kernel log parser's own records (one owner: its patterns): a fault header opens a block,
# the other lines continue one
HEADERS = (HDR, V8_HDR, V8_DEC)
BLOCK_LINES = (ADDR, STATUS, CID, FIELD, TASK, V8_REG, COOKIE)


# a syslog line whose stamp (and host) were cut, or redacted to `...`: the kernel's ident opens it
# (`kernel: NVRM: Xid (PCI:0000:3b:00): 79, ...`); the line from its driver prefix on is the kernel's
# (and `dmesg -x`'s facility and level, `kern  :err   : `, on a line too few to show it as a wrapper)
BARE_KERNEL = re.compile(r"^(?:(?:(?:\.{3}|\u2026|\[\.{3}\])[ \t]*)?(?:[\w.-]+[ \t]+)?kernel: [ \t]*(?=\S)"
                         r"|[a-z]{2,8} *:[a-z]{3,6} *: )")
# a syslog line whose `kernel:` ident was cut: the host is followed by the driver's own prefix
CUT_KERNEL = re.compile(r"^(?P<head>[^\W\d_]{2,5}\.? +\d{1,2} \d\d:\d\d:\d\d \S+ )(?=amdgpu [0-9a-f]{4}:|NVRM: |\[drm)")


def _kernel_stamp(rest: str) -> bool:
    """Opens with one of the kernel log's stamps or its device prefix (loosely: a join guard)."""
    return any(ts.match(rest) for ts in KERNEL_STAMPS) or DEV_PREFIX.match(rest) is not None


def _restore_device(line: str, after_header: bool = False) -> str:
    """`amdgpu: ` put back where a kernel log line's device prefix was cut and its rest is a
    record the kernel log parser knows (a fault header, its address or status line, a task line).
    Without a stamp, only a fault header, or a record line after a restored header, is sure enough."""
    pos = 0
    for ts in KERNEL_STAMPS:
        m = ts.match(line)
        if m:
            pos = m.end()
            break
    rest = line[pos:]
    if DEV_PREFIX.match(rest):
        return line
    header = any(p.match(rest) for p in HEADERS)
    if not header and not (any(p.match(rest) for p in BLOCK_LINES) and (pos or after_header)):
        return line
    return line[:pos] + ("amdgpu:" if rest.startswith(" ") else "amdgpu: ") + rest


def normalize(text: str) -> str:
    """`text` with every line's paste wrapper off, hard wraps joined and entities decoded; `text`
    itself when nothing was found (the common case costs two passes and no copy)."""
    if not text:
        return text
    if "\x1b" in text:
        text = _as_before(text, ANSI.sub("", text))
    m = BLOCK_QUOTE.match(text)
    if m:
        text = _as_before(text, m.group(1) + text[m.end():])
    numbered = list(_lines_with_numbers(text))
    # (a code fence and GitHub's <details> lines are the paste's markup: they count for no shape)
    nonblank = [raw for _, raw in numbered if raw.strip() and not FENCE.match(raw)]
    if not nonblank:
        return text
    outer = _common_indent(nonblank) or _block_indent(nonblank)    # a code block around the (whole) paste
    if outer:
        nonblank = [raw[len(outer):] if raw.startswith(outer) else raw for raw in nonblank]
    # 1. shapes of the first few units of every line
    first = Counter()
    for raw in nonblank:
        pos, seen = 0, set()
        for _ in range(4):
            q = QUOTE.match(raw, pos)
            if q:
                seen.add("quote")
                pos = q.end()
                continue
            u = _unit(raw, pos)
            if u is None:
                break
            seen.add(_shape(u[0], u[1]))
            pos = u[2]
        first.update(seen)
    need = max(2, (len(nonblank) + 1) // 2)
    wrappers = {s for s, n in first.items() if n >= need}
    if "journal" in wrappers and any(JOURNAL_KERNEL.match(raw) for raw in nonblank):
        # a journal with the kernel's own lines: the kernel log parser reads every line's head (another
        # program's line between a fault's lines is told by its ident), none is a paste's wrapper
        wrappers.discard("journal")
    notes = Notes()
    used: Counter = Counter()
    has_entities = ENTITY.search(text) is not None
    header_restored = False
    out: list[tuple[int, str, bool]] = []       # (line number, text, had a head)
    headed: set[int] = set()        # lines whose kernel head (`kernel: `) was read off
    for no, raw in numbered:
        line = raw.rstrip("\r")
        if outer:
            line = line[len(outer):] if line.startswith(outer) else line.lstrip(" \t")
        if has_entities and "&" in line:
            dec = html.unescape(line)
            if dec != line:
                notes.entities += 1
                line = dec
        peeled, own = _peel(line, wrappers, used) if wrappers else (line, None)
        if GAP_LINE.match(peeled):
            peeled = "[...]"
        elif FENCE.match(peeled):
            peeled = ""            # a Markdown code fence is the paste's markup, never a log's line
        m = BARE_KERNEL.match(peeled)
        if m and MARKERS.match(peeled[m.end():]) is not None:
            peeled = peeled[m.end():]
            used["`kernel:` (a syslog line's stamp cut)" if "kernel:" in m.group(0) else "facility"] += 1
            headed.add(len(out))       # the kernel's line: one without such a head after it is its rest
        m = CUT_KERNEL.match(peeled)
        if m:
            peeled = m.group("head") + "kernel: " + peeled[m.end():]
            notes.restored += 1
        restored = _restore_device(peeled, header_restored)
        if restored is not peeled and any(p.match(_message(restored)) for p in HEADERS):
            header_restored = True
        elif not peeled.strip() or peeled.startswith("["):
            header_restored = header_restored and bool(peeled.strip())
        if restored is not peeled:
            peeled = restored
            notes.restored += 1
        if own is not None and peeled[:1].isspace() and not _kernel_line(own):
            own = None             # an indented line continues a record: the head only breaks it up
        out.append((no, peeled, own if own is not None else peeled))
    notes.wrappers = [f"`{s}` on {n} line(s)" for s, n in sorted(used.items(), key=lambda kv: -kv[1])]
    # 2. a code block's indentation: the whitespace every non-blank line starts with
    ind = _common_indent([t for _, t, _ in out if t.strip()])
    notes.indent = outer + ind
    if ind:
        out = [(no, t[len(ind):] if t.startswith(ind) else t.lstrip(" \t"),
                r[len(ind):] if r.startswith(ind) else r.lstrip(" \t")) for no, t, r in out]
    # 3. compute-sanitizer's `=========` cut off a report's lines (the parser reads its lines by it)
    out = _restore_sanitizer(out, notes)
    # 4. hard wraps
    out = _join_wraps(out, numbered, wrappers, notes, headed)
    if not (notes.wrappers or notes.indent or notes.entities or notes.joined or notes.restored or notes.sanitizer) and \
            all(t == raw.rstrip("\r") for (_, t, _), (_, raw) in zip(out, numbered)):
        return text
    total = getattr(text, "total_lines", len(numbered))
    n = _excerpt([(no, t) for no, t, _ in out], notes, total)
    n.runtime_text = _excerpt([(no, r) for no, _, r in out], notes, total) \
        if any(t is not r and t != r for _, t, r in out) else n
    return n


# a compute-sanitizer report's first line, and the lines of its body (the debugger parser's patterns)
SAN_HEADS = (SAN_ACCESS, SAN_HW, SAN_MALLOC, SAN_ASSERT, SAN_INIT, SAN_RACE, SAN_HAZARD, SAN_BARRIER)
SAN_ATS = (SAN_AT, SAN_AT_OLD, SAN_AT_BARE)
SAN_BODY = SAN_ATS + (SAN_BY, SAN_ADDR, SAN_ADDR_ONLY, SAN_DEVICE_FRAME, SAN_FRAME, re.compile(r"^Saved host backtrace"))


def _restore_sanitizer(out, notes: Notes):
    """compute-sanitizer's `========= ` put back on a report whose lines lost it (a paste that took it
    for decoration): a report's first line (`Illegal instruction`, `Invalid __global__ read of size 4
    bytes`) with its `at <function>` line next, and the body's lines after (`by thread`, `Address`,
    frames). A head alone is no report: its words are common."""
    if not any(t.lstrip().startswith("at ") for _, t, _ in out):
        return out         # (no `at` line without its head: the common case, one scan)
    res = list(out)
    k = 0
    while k < len(res) - 1:
        no, t, own = res[k]
        body = t.strip()
        nxt = res[k + 1][1].strip()
        if t.startswith("=") or not any(p.match(body) for p in SAN_HEADS) or not any(p.match(nxt) for p in SAN_ATS):
            k += 1
            continue
        res[k] = (no, f"{SANITIZER_HEAD} {body}", f"{SANITIZER_HEAD} {body}")
        notes.sanitizer += 1
        k += 1
        while k < len(res) and (b := res[k][1].strip()) and not res[k][1].startswith("=") and \
                any(p.match(b) for p in SAN_BODY):
            res[k] = (res[k][0], f"{SANITIZER_HEAD}     {b}", f"{SANITIZER_HEAD}     {b}")
            notes.sanitizer += 1
            k += 1
    return res


def _as_before(old: str, new: str) -> str:
    """`new` with `old`'s line map, where `old` is an excerpt (the decoding keeps every line)."""
    if getattr(old, "stretches", None) is None:
        return new
    n = prefilter.Excerpt(new)
    n.stretches, n.total_lines = old.stretches, old.total_lines
    return n


def _common_indent(lines: list[str]) -> str:
    """The whitespace every line opens with; on a paste of one line, its own indentation (no line
    before it that it could be the indented rest of)."""
    if not lines:
        return ""
    ind = None
    for t in lines:
        lead = t[:len(t) - len(t.lstrip(" \t"))]
        if not lead:
            return ""
        if ind is None or not lead.startswith(ind):
            k = 0
            ref = ind if ind is not None else lead
            while k < min(len(ref), len(lead)) and ref[k] == lead[k]:
                k += 1
            ind = ref[:k]
            if not ind:
                return ""
    return ind or ""


PROSE_LINES = 3     # a paste's own sentences around its code block ("here is dmesg:")


def _block_indent(lines: list[str]) -> str:
    """The indentation of a code block that all of a paste is but a few sentences of prose before or
    after it (`here is dmesg:` then the log, each line indented by four): the block's common indent,
    where a line of it is a log's line once that is off. '' where the unindented lines are more, are
    records themselves, or stand between the block's lines (then they are the log's own)."""
    flags = [t[:1] in (" ", "\t") for t in lines]
    if True not in flags or False not in flags:
        return ""
    first, last = flags.index(True), len(flags) - 1 - flags[::-1].index(True)
    block = lines[first:last + 1]
    prose = lines[:first] + lines[last + 1:]
    if not all(flags[first:last + 1]) or len(prose) > max(PROSE_LINES, len(block) // 4) or \
            any(_record(t) or _kernel_line(t) for t in prose):
        return ""          # (a record unindented: the log's own line, its indented lines its rest)
    ind = _common_indent(block)
    if not ind or not any(_kernel_line(t[len(ind):]) or _record(t[len(ind):]) for t in block):
        return ""
    return ind


HEAD = re.compile(r"\s|\[|\(|<|#|=|>|\d{4}-\d\d-\d\d|[^\W\d_]{2,5}\.? +\d{1,2} \d\d:\d\d|\d\d:\d\d:\d\d ")


def _stamped(t: str, own: str) -> bool:
    """A line that opens with a stamp or a device prefix (`own`: the line with the runtime parser's
    own innermost head, a stamp or a worker tag, where one was there), or with ROCclr's own line
    prefix (`:0:rocdevice.cpp :2893: 9002 us:`: ROCclr opens every line it prints with it, so it is
    never a cut line's rest; asked as one, every line of a big ROCclr log was tried against every
    record pattern joined to its neighbours)."""
    return _kernel_stamp(t) or bool(STAMP_HEAD.match(t)) or own != t or ROCCLR_PREFIX.match(t) is not None




STAMP_HEAD = re.compile(r"\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d|\[[^\]\n]{0,30}\d\d:\d\d")


def _join_wraps(out, numbered, wrappers, notes, headed: set[int] = frozenset()):
    """Join a line's continuation that a terminal or a mail client cut onto the next line.
    A wrap shows as a width: the line cut ends at (a terminal's) or near (a mail client's, at a
    space) the longest line's length. In a file whose lines open with a stamp, a line without one
    after such a line continues it. Anywhere, a line continues the one before where a record a
    parser reads (one of its anchored patterns) runs on across the break: the pattern's match on
    the two joined crosses the junction and it does not match the first alone, or it was cut
    mid-word at the width."""
    lengths = [len(raw.rstrip("\r")) for _, raw in numbered]
    if not lengths:
        return out
    width = max(lengths)
    if width < 60 or width > 250:     # no terminal or mail client wraps past this: a line of its own
        return out
    mail = _mail_width(out, lengths, width)
    exact = sum(1 for n in lengths if n == width)
    near = sum(1 for n in lengths if width - 12 <= n < width)
    # a terminal cuts at the width itself; a mail client short of it, where the next word would not fit
    terminal = exact >= 2 and exact >= near
    stamped = [bool(t.strip()) and _stamped(t, own) for _, t, own in out]
    nonblank = sum(1 for _, t, _ in out if t.strip())
    # a kernel log: the kernel stamps every line it prints, so one without a stamp is a rest (a runtime
    # log's tags and stamps are not on every line: there an untagged line is another process's)
    # the producer's own line head: the kernel's stamps, or a head of punctuation every line of
    # the producer opens with (compute-sanitizer's `=========`)
    lead = _line_head(out)
    kstamped = [bool(t.strip()) and (_kernel_stamp(t) or bool(lead) and t.startswith(lead) or k in headed)
                for k, (_, t, _) in enumerate(out)]
    stamped = [a or b for a, b in zip(stamped, kstamped)]
    rests = [k for k, (_, t, _) in enumerate(out) if t.strip() and not kstamped[k]]
    after_long = sum(1 for k in rests if k and lengths[k - 1] >= width // 2)
    # (wrapped, a kernel log has a rest after many of its lines: stamped ones may be the fewer, but
    # every unstamped line follows a long one)
    heads = sum(kstamped) * 2 >= nonblank or sum(kstamped) * 3 >= nonblank and after_long * 10 >= len(rests) * 9
    res: list[list] = []
    for k, ((no, t, h), (_, raw)) in enumerate(zip(out, numbered)):
        if res and t.strip() and not stamped[k] and not t.startswith("#") and not BOUNDARY.match(t) \
                and not BOUNDARY.match(res[-1][1]):
            prev_len, prev = res[-1][3], res[-1][1]
            flowed = prev[-1:] in (" ", "\t") and not cut_at(prev_len, width, terminal)
            if flowed:
                prev = prev.rstrip()     # a mail client's soft break keeps the space (format=flowed)
            # (a line of ROCclr's prefix alone has its message next, whatever record that opens)
            opens = _opens_record(t) and not ROCCLR_PREFIX.fullmatch(prev.strip() + " ")
            cut = terminal and prev_len == width and not opens
            # (in a kernel log any stampless line is a rest: the word may not fit for the run of
            # spaces the client dropped at the break, so only the line before being cut is asked)
            # (an indented line is a record's own rest, except after a line cut at the width: a
            # terminal's cut may fall just before a space)
            word = not cut and (not t[0].isspace() or prev_len == width) and prev_len >= width // 3 and (
                heads and res[-1][4] and not _opens_record(t, OTHER_READERS)
                or (not opens or prev.endswith(",")) and prev_len + 1 + len(t.split(None, 1)[0]) > mail)
            # (a line that ends in a comma is a list the break cut: its rest may open with a field a record reads)
            sep = None
            # a mail wrap too few lines show the width of: a record's own words (its anchor) run on across
            # the break, no record on either line alone (`HIP error: an` / `illegal memory access ...`)
            if not (cut or word) and not t[0].isspace() and prev_len >= width // 2 and not _opens_record(t) \
                    and _words_run_on(prev, t):
                sep = " "
            elif not cut and TQDM_REST.match(t) and TQDM_OPEN.search(prev):
                sep = " "      # tqdm's bar cut at its blanks: the line goes on after the bar (`| 5/20 [...]`)
            elif not (cut or word) and _label_alone(prev, t, mail):
                sep = " "      # a record's label whose value, one word too long for the line, went to the next
            elif cut or word:
                want = "" if cut else " "
                if heads and res[-1][4]:
                    sep = want
                else:
                    # a line at the width may be a terminal's cut even where it is the only one
                    # (one long line wrapped once): the record decides
                    at_width = prev_len == width
                    # the lines after, for a record the wrap cut into three or more lines
                    # (and before, for a record whose head is lines up: the cut is inside its rest)
                    # (as the parser reads them, a line each; or, after lines at the width, as
                    # the rest of the same cut line)
                    more = ["\n" + "\n".join(x for _, x, _ in out[k + 1:k + 1 + RECORD_LINES])]
                    j = k
                    while j + 1 < len(out) and j < k + RECORD_LINES and lengths[j] == width:
                        j += 1
                    if j > k:
                        more.append("".join(x for _, x, _ in out[k + 1:j + 1]))
                    if not cut:
                        # (a mail client's wrap: the record's rest on the next lines, each cut at a space)
                        more.append(" " + " ".join(x.strip() for _, x, _ in out[k + 1:k + 1 + RECORD_LINES]))
                    before = "\n".join(r[1] for r in res[-1 - RECORD_LINES:-1])
                    order = ("", " ")
                    if not terminal and prev[-1:] in (",", ";"):
                        order = (" ", "")     # a list cut after its comma: a mail client dropped the space
                    for cand in (order if (cut or at_width) and not flowed else (want,)):
                        if _continues(prev, t, cand, cut or at_width, tuple(more), before):
                            sep = cand
                            break
            if sep is not None:
                res[-1][1] = prev + sep + t
                res[-1][2] = (res[-1][2].rstrip() if flowed else res[-1][2]) + sep + h
                res[-1][3] = len(raw.rstrip("\r"))
                notes.joined += 1
                # a terminal cut one line into several, each at the width: where the record
                # decided the last cut, the cuts before it (lines at the width, no record of their
                # own after them) are the same line's
                while terminal and len(res) > 1 and res[-2][3] == width and res[-1][5]:
                    last = res.pop()
                    res[-1][1] += last[1]
                    res[-1][2] += last[2]
                    res[-1][3] = last[3]
                    notes.joined += 1
                continue
        # [4]: a producer's stamped line; [5]: a line that could be a cut's rest (no head, no record opened)
        rest_like = bool(t.strip()) and not stamped[k] and not t.startswith("#") and not BOUNDARY.match(t) \
            and not _opens_record(t)
        res.append([no, t, h, len(raw.rstrip("\r")), kstamped[k], rest_like])
    return [(no, t, h) for no, t, h, _, _, _ in res]


def _label_alone(prev: str, nxt: str, mail: int) -> bool:
    """A mail client's wrap of a label and its one long value (ROCclr's `Kernel Name: _ZN6alpaka...`, a
    mangled name longer than the line): the label ends the line, the value alone is the next (no
    blank in it, too long to have fitted after the label), and a record reads the two as one."""
    word = nxt.strip()
    return prev.rstrip().endswith(":") and bool(word) and not nxt[0].isspace() and not any(
        c.isspace() for c in word) and len(prev.rstrip()) + 1 + len(word) > mail and \
        _continues(prev.rstrip(), word, " ", False)


def cut_at(length: int, width: int, terminal: bool) -> bool:
    """A line a terminal cut at its width (its trailing space is the record's own)."""
    return terminal and length == width


def _mail_width(out, lengths: list[int], width: int) -> int:
    """The column a mail client wrapped at: the width W most lines fit under while their next line's
    first word would not have (len <= W < len + 1 + word). The longest line is not it where a word
    longer than the width (a path, a stamp run together) ran past it; `width` where no such column
    is shared by a few lines."""
    cover = [0] * (width + 2)
    for k in range(len(out) - 1):
        n, nxt = lengths[k], out[k + 1][1]
        if n < 40 or not nxt.strip() or nxt[:1].isspace():
            continue
        hi = min(width, n + len(nxt.split(None, 1)[0]))
        for w in range(n, hi + 1):
            cover[w] += 1
    best = max(range(len(cover)), key=lambda w: (cover[w], w))
    return best if cover[best] >= 3 and best < width else width


RECORD_LINES = 4    # the runtime parser reads a record's rest on up to four lines after its head


def _line_head(out) -> str:
    """A head of punctuation that opens at least half of the lines (`=========` of compute-sanitizer):
    a producer's own mark on each line it prints; '' where there is none."""
    heads = Counter(m.group(0) for _, t, _ in out if (m := PUNCT_HEAD.match(t)))
    nonblank = sum(1 for _, t, _ in out if t.strip())
    if not heads:
        return ""
    head, n = heads.most_common(1)[0]
    return head if n * 2 >= nonblank else ""


PUNCT_HEAD = re.compile(r"[=*#|:~+-]{4,}(?= |$)")


@functools.lru_cache(maxsize=4096)    # (a pure function: each line is asked at both of its junctions)
def _message(line: str) -> str:
    """A kernel log line's message: its stamp and device prefix off (the kernel parser's
    patterns are anchored there)."""
    for ts in KERNEL_STAMPS:
        m = ts.match(line)
        if m:
            line = line[m.end():]
            break
    m = DEV_PREFIX.match(line)
    return line[m.end():] if m else line


# (a pure function of its text: a log that repeats one line, a client's retry loop, asks the same
# junction thousands of times, at ~1 ms each)
@functools.lru_cache(maxsize=8192)
def _continues(prev: str, nxt: str, sep: str, at_width: bool, more: tuple = (), before: str = "") -> bool:
    """Whether a record a parser reads runs on from `prev` into `nxt` (see _join_wraps): one of
    the parsers' anchored patterns, matched on the two joined, crosses the junction and reads more
    of the record (more of its fields) than on either line alone. `more`: the lines after `nxt` (each way they may run on),
    tried last where a record that opens on `prev` is no record there alone (a wrap cut it into
    three or more lines: its end is further down); `before`: the lines before `prev`, where its
    head may be."""
    if sep == " " and ROCCLR_PREFIX.fullmatch(prev.strip() + " "):
        return True        # a producer's line prefix with its message on the next line
    head = ROCCLR_PREFIX.search(prev)
    if head is not None:   # the prefix itself runs on (its pid and thread on the next line)
        whole = ROCCLR_PREFIX.match(prev + sep + nxt, head.start())
        if whole is not None and whole.end() > len(prev) + len(sep) and _fields(whole) > _fields(head):
            return True
    # (the parsers read a line without its indentation: a debugger's table row is indented in a paste)
    for first in {prev, _message(prev), prev.lstrip()}:
        joined = first + sep + nxt
        junction = len(first)
        for pattern, own_word in _record_patterns(joined):
            m = pattern.search(joined)
            if m is None or m.end() <= junction + len(sep) or m.start() >= junction:
                continue
            alone, after = _search(pattern, first), _search(pattern, nxt)
            if own_word and alone is not None and after is not None and _opens(after, nxt):
                continue           # a record on each line, the next opening its own: two records, never a wrap
            if _fields(m) > max(_fields(alone), _fields(after)) or own_word and alone is None and after is None:
                return True
            if own_word and alone is not None and sep == "" and at_width and _token_cut(alone, m, junction, joined):
                return True
    firsts = {prev, _message(prev)} | ({before + "\n" + prev} if before else set())
    for rest in more or ([""] if before else []):
        # (only a record told by its own word counts here: the anchored guards whose anchor is in the
        # longest of the texts, which holds every other as a part of it, and the word-led continuations,
        # each `^`-anchored: one scan for all the ways the lines may join, not one per way)
        longest = (before + "\n" + prev if before else prev) + sep + nxt + rest
        guards = [(prefilter.GUARDS[i].pattern.search, prefilter.GUARDS[i].pattern)
                  for i in RECORD_PATTERNS.find(longest)[0]]
        for first in firsts:
            joined, junction = first + sep + nxt + rest, len(first)
            for find, pattern in guards + RECORD_PATTERNS.word_led(joined):
                if find(first):
                    continue
                m = find(joined)
                if m is not None and m.start() < junction < m.end() and pattern.search(nxt + rest) is None:
                    return True
    return False


@functools.lru_cache(maxsize=4096)
def _search(pattern: re.Pattern, line: str) -> re.Match | None:
    """A record pattern on one line alone: each line is asked as the end of one junction and the
    start of the next, with each separator (a pure function of its text)."""
    return pattern.search(line)


# a tqdm progress bar left open at the end of a line: `25%|████▊` (its blanks and closing `|` on the next)
TQDM_OPEN = re.compile(r"\d{1,3}%\|[\u2580-\u259f]*(?: *\|)?$")
TQDM_REST = re.compile(r"\|? ?[\d.]+[kMG]?/[\d.]+[kMG]? \[")     # `| 5.00/20.0 [1:04:24<...`


def _words_run_on(prev: str, nxt: str) -> bool:
    """A record told by its own words (an anchored pattern, its anchor on the lines) matches across
    the break, and on neither line alone."""
    joined, junction = prev + " " + nxt, len(prev)
    # (one scan of the parsers' anchors from a little before the break: most lines stop here)
    window = joined[max(0, junction - 64):]
    if not any(prefilter.may_matter(r).search(window) for r in READERS):
        return False
    for i in RECORD_PATTERNS.find(joined)[0]:
        g = prefilter.GUARDS[i]
        m = g.pattern.search(joined)
        if m is not None and m.start() < junction < m.end() and g.pattern.search(prev) is None \
                and g.pattern.search(nxt) is None:
            return True
    return False


class _RecordPatterns:
    """The parsers' record patterns that may match a text: the anchored guards with an anchor in it
    and the lines read inside an open record (prefilter.CONTINUATION_PATTERNS) that may match it.
    Asked one by one, a junction costs ~500 substring scans and ~95 searches (1-2 ms), and a paste of
    many distinct lines of one width asks at every line: once a paste has asked often (`PAYS`), one
    Hyperscan database of every anchor and pattern answers in one pass (find_patterns). It takes ~1 s
    to build, so a paste that asks a few times, and a text the prefilter cannot answer for (no
    Hyperscan, not all ASCII), are answered one by one. Rebuilt when a parser module registered more
    (they register at import)."""

    PAYS = 2000         # questions after which the database is worth its build

    def __init__(self):
        self.key, self.asked, self.pre = None, 0, None

    def _table(self) -> None:
        key = (len(prefilter.GUARDS), len(prefilter.CONTINUATION_PATTERNS))
        if self.key == key:
            return
        self.key, self.pre = key, None
        self.conts = [(p, WORD_LED.match(p.pattern) is not None) for p in prefilter.CONTINUATION_PATTERNS]
        self.led_always, self.led_at, self.led_blank = [], {}, {}
        for p, word in self.conts:
            if not word:
                continue
            m = LED_HEAD.match(p.pattern)
            if p.flags & (re.M | re.I) or m is None:
                self.led_always.append((p.search, p))
            else:        # (`^\s*Word`: after the text's blanks; `^Word`: at its start)
                table = self.led_blank if m.group("blank") else self.led_at
                table.setdefault(m.group("word"), []).append((p.match, p))
        self.guards = [(i, g.anchors) for i, g in enumerate(prefilter.GUARDS) if g.pattern is not None and g.anchors]

    def _prefilter(self) -> PatternPrefilter:
        pats, self.rows = [], []          # (is a guard, its index)
        for i, anchors in self.guards:
            for a in anchors:
                pats.append(re.compile(re.escape(a)))
                self.rows.append((True, i))
        for i, (p, _) in enumerate(self.conts):
            pats.append(p)
            self.rows.append((False, i))
        return PatternPrefilter(pats)

    def word_led(self, text: str) -> list[tuple]:
        """The continuations a word of their own leads (`^Address: 0x`) that may match `text`, each with
        how to find it: `^`-anchored, a match at the start is all a search could find (without re.M),
        so only those whose first three letters open the text (after its blanks, where the pattern
        allows them) can; a pattern the table cannot tell so (re.M, re.I) is always named."""
        self._table()
        return self.led_always + self.led_at.get(text[:3], []) + self.led_blank.get(text.lstrip()[:3], [])

    def find(self, text: str) -> tuple[list[int], list[tuple[re.Pattern, bool]]]:
        """(the guards' indices, in order; the continuations that may match, in order)."""
        self._table()
        self.asked += 1
        if self.pre is None and self.asked >= self.PAYS:
            self.pre = self._prefilter()
        hit = self.pre.may(text) if self.pre is not None else None
        if hit is None:
            return [i for i, anchors in self.guards if any(a in text for a in anchors)], self.conts
        guards, conts = set(), []
        for k in hit:
            is_guard, i = self.rows[k]
            if is_guard:
                guards.add(i)
            else:
                conts.append(i)
        return sorted(guards), [self.conts[i] for i in sorted(conts)]


RECORD_PATTERNS = _RecordPatterns()


def _record_patterns(joined: str, words_only: bool = False):
    """The parsers' record patterns that could match `joined`, each with whether it is told by a
    word of its own: the anchored ones whose anchor is in it (an anchor the cut split too), and
    the lines they read inside an open record. Of these, only those that open with a word
    (`Address: 0x...`) are a record by matching at all; the others (a bare frame, a numbered line)
    match almost any text, so only reading more of their fields across the cut counts. `words_only`:
    the word-led ones alone (a caller that counts no other)."""
    guards, conts = RECORD_PATTERNS.find(joined)
    for i in guards:
        yield prefilter.GUARDS[i].pattern, True
    for p, own_word in conts:
        if own_word or not words_only:
            yield p, own_word


WORD_LED = re.compile(r"\^(?:\\s\*)?[A-Za-z]{3,}")
# a word-led pattern's first three letters, literal (no quantifier on the third)
LED_HEAD = re.compile(r"\^(?P<blank>\\s\*)?(?P<word>[A-Za-z]{3})(?![?*+{])")


def _opens(m: re.Match, line: str) -> bool:
    """A record's match that opens the line (but for blanks): its head was not cut off by a wrap."""
    return not line[:m.start()].strip()


def _fields(m: re.Match | None) -> int:
    return -1 if m is None else sum(1 for g in m.groups() if g is not None)


def _token_cut(alone: re.Match, joined_m: re.Match, junction: int, joined: str) -> bool:
    """A terminal cut a value mid-token: a group of the record ends at the cut on the first line
    alone and runs on, without a space, into the next (an address `0x7f00000` + `1000`)."""
    for i in range(1, (alone.re.groups or 0) + 1):
        if alone.end(i) == junction and joined_m.start(i) == alone.start(i) and joined_m.end(i) > junction \
                and not any(c.isspace() for c in joined[junction:joined_m.end(i)]):
            return True
    return False


READERS = (prefilter.RUNTIME, prefilter.KERNEL, prefilter.DEBUGGER)
OTHER_READERS = (prefilter.RUNTIME, prefilter.DEBUGGER)     # a kernel log's rest never opens their records


def _opens_record(line: str, readers: tuple[str, ...] = READERS) -> bool:
    """A line that starts with one of the parsers' anchors: a record's first line, no one's rest."""
    return any((m := prefilter.may_matter(r).match(line)) is not None and m.end() > 0 for r in readers)


def _record(line: str) -> bool:
    """A line a parser reads as a record of its own (one of their anchors is on it)."""
    for r in READERS:
        for m in prefilter.may_matter(r).finditer(line):
            if m.end() > m.start():           # an empty match is no anchor
                return True
    return False


def _excerpt(out, notes: Notes, total: int) -> Normalized:
    stretches: list[tuple[int, int]] = []
    prev = None
    for i, (no, _) in enumerate(out):
        if prev is None or no != prev + 1:
            stretches.append((i, no))
        prev = no
    n = Normalized("\n".join(t for _, t in out))
    n.stretches = stretches or [(0, 1)]
    n.total_lines = total
    n.notes = notes
    return n
