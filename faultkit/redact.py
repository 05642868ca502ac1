"""Secrets never reach what faultkit writes: environments, command lines, transcripts, manifests.

A secret is known by its variable or flag name (token, key, secret, password, ...) or by the
shape of its value: credentials in a URL's userinfo, the prefixes of well-known tokens (OpenAI
`sk-`, Hugging Face `hf_`, GitHub `ghp_`/`github_pat_`, Slack `xox?-`, AWS `AKIA`, GitLab
`glpat-`), JSON Web Tokens. Requested values are compared by fingerprint, never written.
"""

from __future__ import annotations

import hashlib
import re

MARK = "<redacted>"
SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|DSN|JWT|"
                         r"WEBHOOK|SIGNATURE|PAT\b|_PAT_|^PAT_", re.I)
# Names that match the words above but hold no secret (kept: they are evidence).
NOT_SECRET = re.compile(r"^(?:HSA_|HIP_|AMD_|ROC|CUDA_|NCCL_|TORCH_|PYTORCH_|OMP_|MIOPEN_|XDG_SESSION_|"
                        r"SSH_AUTH_SOCK$|KEYTIMEOUT$|SESSION_MANAGER$|DBUS_SESSION_BUS_ADDRESS$)")
TOKEN_VALUE = re.compile(
    r"(?<![A-Za-z0-9_-])(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|"
    r"github_pat_[A-Za-z0-9_]{20,}|xox[abposr]-[A-Za-z0-9-]{10,}|A(?:KIA|SIA)[0-9A-Z]{16}|glpat-[A-Za-z0-9_-]{16,}|"
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}|"
    r"hooks\.slack\.com/services/[A-Za-z0-9/]+)")
URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@]*):(?P<pw>[^/\s@]+)@")
URL_TOKEN_USER = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^/\s:@]{20,})@")   # https://TOKEN@host
SECRET_FLAG = re.compile(r"^--?(?:[\w-]*(?:token|key|secret|passw(?:or)?d|passphrase|credential|auth|cookie|"
                         r"signature|dsn|jwt)[\w-]*)$", re.I)
NOT_SECRET_FLAG = re.compile(r"^--?(?:[\w-]*key[-_]?(?:size|len|length|dim|count|name)s?|kv[-_]cache[\w-]*|"
                             r"hash[-_]key|sort[-_]key|[\w-]*tokens?[-_]?(?:per|limit|count|len|size|budget|max|num)"
                             r"[\w-]*|max[-_][\w-]*tokens?|num[-_][\w-]*tokens?)$", re.I)
FLAG_EQ = re.compile(r"(?P<flag>--?[\w-]+)=(?P<value>\S+)")
FLAG_SPACE = re.compile(r"(?P<flag>--?[\w-]+)(?P<sep>\s+)(?P<value>(?!-)\S+)")
NAME_EQ = re.compile(r"\b(?P<name>[A-Z_][A-Z0-9_]*)=(?P<value>[^\s'\"]+)")   # environment-style names


def secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name)) and not NOT_SECRET.match(name)


def secret_flag(flag: str) -> bool:
    return bool(SECRET_FLAG.match(flag)) and not NOT_SECRET_FLAG.match(flag)


def value(text: str) -> str:
    """Secret-shaped parts of a value (URL userinfo, token prefixes, JWTs) replaced."""
    if not text:
        return text
    out = URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{MARK}@", text)
    out = URL_TOKEN_USER.sub(lambda m: f"{m['scheme']}{MARK}@", out)
    return TOKEN_VALUE.sub(MARK, out)


def env(variables: dict[str, str]) -> dict[str, str]:
    return {k: (MARK if secret_name(k) else value(v)) for k, v in variables.items()}


def argv(args: list[str]) -> list[str]:
    out: list[str] = []
    hide_next = False
    for a in args:
        if hide_next and not a.startswith("-"):
            out.append(MARK)
            hide_next = False
            continue
        hide_next = False
        m = FLAG_EQ.fullmatch(a)
        if m and secret_flag(m["flag"]):
            out.append(f"{m['flag']}={MARK}")
            continue
        if a.startswith("-") and secret_flag(a):
            hide_next = True
        n = NAME_EQ.fullmatch(a)
        if n and secret_name(n["name"]):
            out.append(f"{n['name']}={MARK}")
            continue
        out.append(value(a))
    return out


def text(s: str) -> str:
    """Free text (a shell command, a transcript line, a log line): flags, NAME=value pairs and
    secret-shaped values."""
    if not s:
        return s
    s = FLAG_EQ.sub(lambda m: f"{m['flag']}={MARK}" if secret_flag(m["flag"]) else m.group(0), s)
    s = FLAG_SPACE.sub(lambda m: f"{m['flag']}{m['sep']}{MARK}" if secret_flag(m["flag"]) else m.group(0), s)
    s = NAME_EQ.sub(lambda m: f"{m['name']}={MARK}" if secret_name(m["name"]) else m.group(0), s)
    return value(s)


def fingerprint(v: str | None) -> str | None:
    """Compare a requested value with what a process had without writing either."""
    return None if v is None else "sha256:" + hashlib.sha256(v.encode("utf-8", "surrogateescape")).hexdigest()[:16]
