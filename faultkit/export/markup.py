"""The report's words with their two marks, rendered for Markdown and HTML so that evidence is
always shown and never interpreted.

Section text is plain text in which faultkit marks code (`code(x)`, a kernel name: `kernel(x)`)
and emphasis (`strong(x)`) with private-use characters, never with Markdown's own backticks or
asterisks: evidence (a kernel name, a log line, a file name) can then hold any character. In
Markdown every character of plain text that could start markup is escaped (links, images,
autolinks, emphasis, strikethrough, entities, raw HTML, block starts), code is fenced by more
backticks than it holds; in HTML everything is escaped; in both, terminal controls are removed
(`terminal.clean`), so the Markdown printed to a terminal is as safe as the stderr lines.
"""

from __future__ import annotations

import html
import re

from ..demangle import display_name
from ..terminal import clean

CODE_OPEN, CODE_CLOSE, STRONG_OPEN, STRONG_CLOSE = "\ue000", "\ue001", "\ue002", "\ue003"
MARKS = re.compile("[\ue000-\ue003]")
PIECE = re.compile("\ue000([^\ue000-\ue003]*)\ue001|\ue002([^\ue000-\ue003]*)\ue003")


def code(x) -> str:
    """`x` shown as code (evidence of any shape: its own marks are dropped)."""
    return CODE_OPEN + MARKS.sub("", str(x)) + CODE_CLOSE


def strong(x) -> str:
    return STRONG_OPEN + MARKS.sub("", str(x)) + STRONG_CLOSE


def kernel(name) -> str:
    """A kernel's name as code, demangled for reading."""
    return code(display_name(name))


AUTHORED = re.compile(r"`([^`\n]+)`|\*\*([^*\n]+)\*\*")


def authored(text: str) -> str:
    """A sentence faultkit wrote with the plain-text notation its JSON keeps (`a command`, **a word**)
    as marked text: the report shows it as code and emphasis, never as the notation's characters."""
    return AUTHORED.sub(lambda m: code(m[1]) if m[1] is not None else strong(m[2]), str(text))


def plain(text: str) -> str:
    """The words without their marks (for a terminal line or a JSON string)."""
    return clean(MARKS.sub("", str(text)))


def _pieces(text: str):
    """(kind, text) in order: kind is 'text', 'code' or 'strong'; stray marks are dropped."""
    pos = 0
    for m in PIECE.finditer(text):
        if m.start() > pos:
            yield "text", MARKS.sub("", text[pos:m.start()])
        yield ("code", m[1]) if m[1] is not None else ("strong", m[2])
        pos = m.end()
    if pos < len(text):
        yield "text", MARKS.sub("", text[pos:])


# ---------------- Markdown ----------------

# Escaped: what opens code, emphasis or strikethrough; a `<` that can open a tag, a comment or an
# autolink (`rptr < wptr` and `k<<<grid>>>` stay as they are); an `&` that makes an entity; the
# backslash itself. `|` only in a table cell (one line of text is never a table).
MD_ALWAYS = re.compile(r"([\\`*~]|<(?=[A-Za-z/!?])|&(?=#?\w+;))")
# Links and images need `](` or `][`; a bare `[x]` is a link only where a definition `[x]: url`
# starts a block (escaped there, MD_BLOCK_START): `[183402.551203]` stays as dmesg wrote it.
MD_LINK_CLOSE = re.compile(r"\](?=[(\[])")
# `_` opens emphasis only at a word's edge (`a_b_c` is literal): escaped there only.
MD_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# GFM's extended autolinks: `scheme://`, `www.`, `mailto:`/`xmpp:`, and e-mail addresses.
MD_SCHEME = re.compile(r"(?i)(?<=[a-z0-9+.-])(?<![\\]):(?=//)|(?<=mailto):|(?<=xmpp):")
MD_WWW = re.compile(r"(?i)\b(www)\.")
MD_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
# What would start a block at the start of a paragraph or list item: a heading, a quote, a list, a
# thematic break or setext underline, a numbered list, a link or footnote definition, a task box.
MD_BLOCK_START = re.compile(r"^(\s*)([#>+=\[-]|\d+(?=[.)]))")


def _md_escape(t: str, cell: bool = False) -> str:
    t = MD_ALWAYS.sub(r"\\\1", t)
    if cell:
        t = t.replace("|", "\\|")
    t = MD_LINK_CLOSE.sub(r"\\]", t)
    t = MD_UNDERSCORE.sub(r"\\_", t)
    t = MD_SCHEME.sub(r"\\:", t)
    return MD_WWW.sub(r"\1\\.", t)


def _md_text(t: str, cell: bool = False) -> str:
    out, pos = [], 0
    for m in MD_EMAIL.finditer(t):            # an address inside a code span is never a mailto link
        out += [_md_escape(t[pos:m.start()], cell), _md_code(m.group(0), cell)]
        pos = m.end()
    out.append(_md_escape(t[pos:], cell))
    return "".join(out)


def _md_code(t: str, cell: bool = False) -> str:
    if not t.strip():
        return t
    run = max((len(r) for r in re.findall(r"`+", t)), default=0)
    fence = "`" * (run + 1)
    pad = " " if t[0] in "` " or t[-1] in "` " else ""
    body = t.replace("|", "\\|") if cell else t
    return f"{fence}{pad}{body}{pad}{fence}"


def md(text, cell: bool = False, block: bool = False) -> str:
    """One line of Markdown from marked text. `block`: it starts a paragraph or list item."""
    out = []
    for kind, t in _pieces(str(text)):
        t = clean(t)
        if kind == "code":
            out.append(_md_code(t, cell))
        elif kind == "strong":
            out.append(f"**{_md_text(t, cell)}**" if t.strip() else _md_text(t, cell))
        else:
            out.append(_md_text(t, cell))
    line = "".join(out)
    if block:
        line = MD_BLOCK_START.sub(lambda m: m[1] + "\\" + m[2] if not m[2][0].isdigit() else
                                  m[1] + m[2] + "\\", line, count=1)
        line = line.lstrip(" ")               # four spaces would start a code block
    return line


def md_code_block(lines: list[str]) -> list[str]:
    """Lines shown verbatim: a fence longer than any backtick run inside, controls removed."""
    body = [clean(c) for c in lines]
    fence = "`" * max(3, 1 + max((len(r) for c in body for r in re.findall(r"`+", c)), default=0))
    return [fence] + body + [fence]


# ---------------- HTML ----------------

def html_inline(text) -> str:
    out = []
    for kind, t in _pieces(str(text)):
        e = html.escape(clean(t))
        out.append(f"<code>{e}</code>" if kind == "code" else f"<strong>{e}</strong>" if kind == "strong" else e)
    return "".join(out)


def html_text(text) -> str:
    """Escaped text for an element or attribute (marks dropped)."""
    return html.escape(plain(text))


def html_block(lines: list[str]) -> str:
    return html.escape("\n".join(clean(c) for c in lines))
