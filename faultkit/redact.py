"""Secrets never reach what faultkit writes: environments, command lines, transcripts, manifests.

A secret is known by its name or by the shape of its value:
- the name of a variable, a flag or a `key=value`/`key: value` pair (token, key, secret, password,
  pass, pwd, auth, credential, ...), wherever it stands: a separate argument, inside a one-string
  command line (`sh -c "... --api-key X"`), inside another variable's value
  (`SERVER_ARGS="--api-key X"`), a dotted config key (`wandb.api_key=X`), a debugger's escaped
  argument (`--api-key\\ X`) or a string in a backtrace (`api_key=0x... "X"`);
- an HTTP credential (`Authorization: Bearer X`, `Basic X`);
- the shape of the value: credentials in a URL's userinfo, the prefixes of well-known tokens
  (OpenAI/Anthropic `sk-`, Stripe `sk_live_`, Google `AIza`, npm `npm_`, PyPI `pypi-`, Hugging Face
  `hf_`, GitHub `ghp_`/`github_pat_`, GitLab `glpat-`, Slack `xox?-`, AWS `AKIA`, ...), JSON Web Tokens.
Names are judged by their words, with no exemption by prefix (`ROCKSET_API_KEY` is a secret); the
few variables whose names look secret but hold evidence are listed by name (`EVIDENCE_NAMES`).
Requested values are compared by salted fingerprint (HMAC-SHA256), never written.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from . import lazy_re as re   # compiled at first use: start-up (issue #35)
import secrets
from dataclasses import dataclass

MARK = "<redacted>"

# Words that make a name secret (matched on the name upper-cased, `-` and `.` read as `_`).
SECRET_WORDS = re.compile(
    r"TOKEN|KEY|SECRET|PASSW|PASSPHRASE|CREDENTIAL|AUTH|COOKIE|SESSION|PRIVATE|DSN|JWT|WEBHOOK|SIGNATURE|"
    r"(?:^|_)(?:PAT|PASS|PWD|PW|PIN|OTP|SALT)(?:$|_)")
# Names that are secrets though no word of them says so: sshpass's password variable (`sshpass -e`).
SECRET_NAMES = frozenset({"SSHPASS", "MYSQL_PWD", "PGPASSWORD", "REDISCLI_AUTH", "LFTP_PASSWORD", "RSYNC_PASSWORD"})
# Names with those words that count things or name options, not secrets (`--max-new-tokens`,
# `--key-size`, `--kv-cache-dtype`, `sort_key`, `KEYTIMEOUT`).
COUNT_WORDS = re.compile(
    r"^(?:\w*KEY_?(?:SIZE|LEN|LENGTH|DIM|COUNT|NAME|ID|FIELD|COLUMN|TYPE)S?|KV_CACHE\w*|HASH_KEY|SORT_KEY|"
    r"\w*TOKENS?_?(?:PER|LIMIT|COUNT|LEN|SIZE|BUDGET|MAX|NUM|IDS?)\w*|MAX_\w*TOKENS?|NUM_\w*TOKENS?|\w*_TOKENS|"
    r"\w*TOKENIZER\w*|\w*PASS(?:ES|THROUGH)\w*|\w*BYPASS\w*|\w*COMPASS\w*|\w*AUTHOR(?!I[ZS])\w*|"
    r"\w*PIN_MEMORY\w*|SESSION_LEN\w*|\w*KEYWORDS?\w*|\w*KEYBOARD\w*|\w*KEYS?_?(?:PRESSED|CODE|MAP)\w*)$")
# Variables whose names look secret but hold evidence or harmless paths: kept, by name, not prefix.
EVIDENCE_NAMES = frozenset({
    "SSH_AUTH_SOCK", "KEYTIMEOUT", "SESSION_MANAGER", "DBUS_SESSION_BUS_ADDRESS", "XAUTHORITY", "PWD", "OLDPWD",
    "XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_SESSION_DESKTOP", "XDG_SEAT", "GPG_TTY",
    "NCCL_IB_PKEY", "UCX_IB_PKEY", "ROCR_VISIBLE_DEVICES", "HSA_COREDUMP_PATTERN", "HSA_TOOLS_LIB",
    "HSA_ENABLE_DEBUG", "HSA_XNACK", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "TORCH_SHOW_CPP_STACKTRACES",
    "HF_TOKEN_PATH", "KRB5CCNAME",
})
# Short flags that take a password (sshpass -p, mysql -p, `-p X` in a launcher script). `-p` is
# also a port (`-p 8080`) or a path (`mkdir -p /x`): a number or a path after it is kept. Other
# short flags mean too many things (`python -u`, `ls -a`) to hide what follows.
SHORT_SECRET_FLAGS = frozenset({"-p"})
# Flags whose value is `user:password` (curl -u, wget --user): the user is kept, the password hidden.
USER_PASSWORD_FLAGS = frozenset({"-u", "-U", "--user", "--proxy-user", "--http-user", "--ftp-user"})

# Well-known token shapes: (literal prefix, the rest). The prefix is also what a block of text is
# searched for first, so text holding none of them costs one scan per prefix, not a regex pass.
TOKEN_SHAPES = (
    ("sk-", r"(?:proj-|ant-|or-)?[A-Za-z0-9_-]{16,}"),                       # OpenAI, Anthropic, OpenRouter
    ("sk_live_", r"[A-Za-z0-9]{10,}"), ("sk_test_", r"[A-Za-z0-9]{10,}"),   # Stripe
    ("rk_live_", r"[A-Za-z0-9]{10,}"), ("pk_live_", r"[A-Za-z0-9]{10,}"), ("whsec_", r"[A-Za-z0-9]{16,}"),
    ("AIza", r"[0-9A-Za-z_-]{30,}"), ("ya29.", r"[0-9A-Za-z_-]{20,}"),      # Google API key, OAuth token
    ("npm_", r"[A-Za-z0-9]{30,}"), ("pypi-", r"[A-Za-z0-9_-]{40,}"), ("hf_", r"[A-Za-z0-9]{20,}"),
    ("ghp_", r"[A-Za-z0-9]{20,}"), ("gho_", r"[A-Za-z0-9]{20,}"), ("ghu_", r"[A-Za-z0-9]{20,}"),
    ("ghs_", r"[A-Za-z0-9]{20,}"), ("ghr_", r"[A-Za-z0-9]{20,}"), ("github_pat_", r"[A-Za-z0-9_]{20,}"),
    ("xox", r"[abposr]-[A-Za-z0-9-]{10,}"), ("xapp-", r"[A-Za-z0-9-]{10,}"),   # Slack
    ("AKIA", r"[0-9A-Z]{16}"), ("ASIA", r"[0-9A-Z]{16}"), ("glpat-", r"[A-Za-z0-9_-]{16,}"),
    ("dop_v1_", r"[a-f0-9]{32,}"), ("shpat_", r"[a-fA-F0-9]{20,}"), ("shpss_", r"[a-fA-F0-9]{20,}"),
    ("shpca_", r"[a-fA-F0-9]{20,}"), ("SG.", r"[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"),       # SendGrid
    ("eyJ", r"[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),                    # JWT
    ("hooks.slack.com/services/", r"[A-Za-z0-9/]+"),
)
TOKEN_VALUE = re.compile(r"(?<![A-Za-z0-9_-])(?:" + "|".join(re.escape(p) + rest for p, rest in TOKEN_SHAPES) + ")")

# Query parameters that carry a signature or a credential in a URL: Azure SAS `sig=`, AWS presigned
# `X-Amz-Signature`/`-Credential`/`-Security-Token`, Google signed URLs `X-Goog-*`, CloudFront
# `Signature=`, OAuth `access_token=`/`code=`. Only the parameter's value goes: the host, the path
# and the other parameters (expiry, permissions) are evidence of what was asked for.
URL_SECRET_PARAMS = ("sig", "signature", "x-amz-signature", "x-amz-credential", "x-amz-security-token",
                     "x-goog-signature", "x-goog-credential", "googleaccessid", "access_token", "id_token",
                     "refresh_token", "client_secret", "api_key", "apikey", "key", "token", "code", "auth",
                     "password", "passwd", "pass", "pwd", "secret", "jwt", "x-api-key", "ticket")
# What may follow an attached `-p` and is a flag of its own, not mysql's `-pPASSWORD`: gcc's
# -pthread/-pipe/-pie/-pg/-pedantic, find's -print/-path/-perm/-prune, openssl's -pass/-passin
# (their value is judged as a flag's), mkdir/cp's -pv, ssh/nc's -p22 (a port).
SHORT_ATTACHED_WORDS = re.compile(r"(?:thread|ipe|ie|g|edantic(?:-errors)?|rint[0f]?|ath|erm|rune|ass\w*|"
                                  r"[vrRfa]{1,3}|arents|rofile|lugin|ython\d*(?:\.\d+)?|\d{1,6})")


def _pem(m: re.Match) -> str:
    """A private key's body hidden line by line: the block keeps its line count (a log's lines are
    numbered)."""
    body = m["body"]
    return m["begin"] + re.sub(r"[^\r\n]+", MARK, body) + (m["end"] or "")


def _attached(m: re.Match) -> str:
    return m.group(0) if SHORT_ATTACHED_WORDS.fullmatch(m["value"]) or m["value"][:1] in "/.~-=$" \
        else m["head"] + MARK


def _user_password(m: re.Match) -> str:
    # `docker run -u 1000:1000` is a uid and gid, not a user and a password
    if m["user"].isdigit() and m["value"].isdigit():
        return m.group(0)
    return m["head"] + MARK


@dataclass(frozen=True)
class Shape:
    """A secret known by the shape of its value. `hints`: lower-case literals one of which the text
    must hold before the pattern runs (a scan for a literal is cheap; a regex pass is not).
    `replace`: the match's text with the secret hidden (default: the `head` group kept, the `value`
    group replaced)."""
    name: str
    hints: tuple[str, ...]
    pattern: re.Pattern
    replace: object = None

    def apply(self, s: str, low: str) -> str:
        if not any(h in low for h in self.hints):
            return s
        new = self.pattern.sub(self.replace or (lambda m: m["head"] + MARK), s)
        return s if new == s else new


# THE table of secret shapes: every value-shaped secret faultkit knows, in the order applied
# (`value()` and `text()` read it; nothing else matches secrets by shape). Names of variables,
# flags and keys are judged by SECRET_WORDS/SECRET_NAMES above.
SHAPES: tuple[Shape, ...] = (
    # multi-line: a PEM private key's body, BEGIN to END (or to the end of a cut text)
    Shape("pem-private-key", ("private key-----",),
          re.compile(r"(?P<begin>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)(?P<body>[\s\S]*?)"
                     r"(?P<end>-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)"), _pem),
    # a scheme is at most 32 characters: unbounded, every letter of a long run of them would start a
    # scan to the run's end (a 4 MB line of letters and one '://' in the file took hours)
    Shape("url-userinfo", ("://",),
          re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]{0,31}://[^/\s:@]*:)(?P<value>[^/\s@]+)(?=@)")),
    Shape("url-token-user", ("://",),
          re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]{0,31}://)(?P<value>[^/\s:@<>]{20,})(?=@)")),
    Shape("url-signature", tuple(f"{p}=" for p in URL_SECRET_PARAMS),
          re.compile(r"(?i)(?P<head>[?&;](?:" + "|".join(map(re.escape, URL_SECRET_PARAMS)) + r")=)"
                     r"(?P<value>(?!<redacted>)[^&#\s'\"<>]+)")),
    Shape("authorization-header", ("authorization",),
          re.compile(r"(?i)\b(?P<head>(?:proxy-)?authorization[ \t]*[:=][ \t]*(?:(?:bearer|basic|token|"
                     r"digest|negotiate|apikey)[ \t]+)?)(?P<value>(?!<redacted>)"
                     # (the scheme is never the value: `Bearer <redacted>` redacted again stays so)
                     r"(?!(?:bearer|basic|token|digest|negotiate|apikey)[ \t]+<redacted>)[^\s'\",;]+)")),
    Shape("bearer", ("bearer", "basic"),
          re.compile(r"(?i)\b(?P<head>(?:bearer|basic)[ \t]+)(?P<value>[A-Za-z0-9._~+/=-]{8,})")),
    # curl/wget `-u user:password`, `--user user:password`, `-uuser:password`: the user kept
    Shape("user-password-flag", ("-u", "--user", "--proxy-user", "--http-user", "--ftp-user"),
          re.compile(r"(?P<head>(?<![\w-])(?:-u|--user|--proxy-user|--http-user|--ftp-user|-U)=?"
                     r"(?:\\?[ \t])*[\"']?(?P<user>[^\s:'\"@]+):)(?P<value>(?!<redacted>)[^\s'\"]+)"),
          _user_password),
    # mysql's `-pPASSWORD` (the password attached to its short flag); `-p PASSWORD` is a flag's value
    Shape("attached-short-flag", ("-p",),
          re.compile(r"(?P<head>(?<![\w\-./])-p)(?P<value>(?!<redacted>)[^\s'\"]+)"), _attached),
    Shape("token-prefix", tuple(p.lower() for p, _ in TOKEN_SHAPES), TOKEN_VALUE, lambda m: MARK),
)
# A value in free text: one shell word (quoted parts, escaped characters and plain ones run
# together: `'"'"'X'"'"'` is one word inside a quoted `sh -c` string); gdb's escaped space `\ `
# ends it, as gdb escapes the spaces between the words of one argument. Nothing spans a line:
# the recorded log keeps its line count (server.times.tsv numbers its lines).
_VALUE = r"(?:(?:\"[^\"\n]*\"|'[^'\n]*'|\\[^\s]|[^\s\\'\"])+|[\"'][^\s\"']*)"   # or a quote left open (a cut line)
# The value is looked at, not consumed, until it is known to be a secret: a flag or key whose
# value is a whole command line (`sh -c '... --api-key X'`) must not hide the flags inside it.
# These patterns match the name only; its value is read (VALUE, at the match's end) only for a
# name that is a secret: read for every name, `a=a=a=...` made each `a` read the rest of the run.
FLAG = re.compile(r"^(?P<flag>--?[A-Za-z][\w.-]*)$")
VALUE = re.compile(_VALUE)
FLAG_EQ = re.compile(r"(?P<flag>(?<![\w-])--?[A-Za-z][\w.-]*)=")
# flag, separator (spaces, or gdb's escaped space `\ `), value not starting with `-`
FLAG_SPACE = re.compile(r"(?P<flag>(?<![\w-])--?[A-Za-z][\w.-]*)(?P<sep>(?:\\?[ \t])+)(?![-\s])")
# key=value: environment names and config keys (`HF_TOKEN=`, `wandb.api_key=`, `db-password=`)
KEY_EQ = re.compile(r"(?P<name>(?<![\w.-])[A-Za-z_][\w.-]*)=")
# key: value, as in headers, YAML and log lines (`password: X`, `X-Api-Key: X`)
KEY_COLON = re.compile(r"(?P<name>(?<![\w.-])[A-Za-z_][\w.-]*)(?P<sep>\"?[ \t]*:[ \t]*\"?)(?P<value>[^\s\"',;]+)")
# a debugger's view of a string: `api_key=0x55d0 "X"`, `password = "X"`, `token='X'` (bt full, info locals)
# (on one line: a quote left open must not swallow the lines after it)
DEBUGGER_STRING = re.compile(r"(?P<name>(?<![\w.])[A-Za-z_]\w*)(?P<sep>[ \t]*=[ \t]*(?:0x[0-9a-fA-F]+[ \t]+)?)"
                             r"(?P<value>\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*')")
STRING_AFTER_EQ = re.compile(r"=[ \t]*(?:0x[0-9a-fA-F]+[ \t]+)?[\"']")     # what DEBUGGER_STRING needs
POINTER = re.compile(r"0x[0-9a-fA-F]{1,16}")       # an address a debugger prints before a string: evidence
NAME_EQ = re.compile(r"^(?P<name>[A-Za-z_][\w.-]*)=(?P<value>.*)$", re.S)    # one argument `NAME=value`


@functools.lru_cache(maxsize=8192)          # the same few names repeat on every line of a log
def secret_name(name: str) -> bool:
    """A variable, key or flag name (without its dashes) that says it holds a secret."""
    if name in EVIDENCE_NAMES:
        return False
    norm = name.lstrip("-").replace("-", "_").replace(".", "_").upper()
    if norm in SECRET_NAMES or norm.rpartition("_")[2] in SECRET_NAMES:
        return True
    # a dotted key is judged by its last part (`wandb.api_key`), and by the whole where that says more
    return bool(SECRET_WORDS.search(norm)) and not COUNT_WORDS.match(norm)


def secret_flag(flag: str) -> bool:
    return flag.startswith("-") and secret_name(flag)


def _short_secret(flag: str, value: str) -> bool:
    return flag in SHORT_SECRET_FLAGS and not re.fullmatch(r"\d{1,6}", value) and not value.startswith("-") \
        and "/" not in value and not value.startswith(("~", "."))


def value(text: str) -> str:
    """Secret-shaped parts of a value replaced: every shape of the table `SHAPES`, in its order."""
    if not text:
        return text
    out, low = text, text.lower()
    for shape in SHAPES:
        new = shape.apply(out, low)
        if new is not out:
            out, low = new, new.lower()
    return out


def env(variables: dict[str, str]) -> dict[str, str]:
    """Secret names hidden whole; every other value read as free text (a variable can hold a
    command line: `SERVER_ARGS=--api-key X`)."""
    return {k: (MARK if secret_name(k) else text(v)) for k, v in variables.items()}


def argv(args: list[str]) -> list[str]:
    out: list[str] = []
    hide_next: str | None = None       # the flag whose value comes next
    for a in args:
        if hide_next in USER_PASSWORD_FLAGS:
            hide_next = None
            user, colon, pw = a.partition(":")
            if colon and pw and not (user.isdigit() and pw.isdigit()):
                out.append(f"{user}:{MARK}")
                continue
        if hide_next is not None:
            if hide_next in SHORT_SECRET_FLAGS and not _short_secret(hide_next, a):
                hide_next = None
            elif not a.startswith("-"):
                out.append(MARK)
                hide_next = None
                continue
        hide_next = None
        if a in USER_PASSWORD_FLAGS:
            hide_next = a
            out.append(a)
            continue
        shaped = value(a)
        if shaped != a and a.startswith("-"):        # `-pPASSWORD`, `-uuser:password`
            out.append(shaped)
            continue
        if FLAG.match(a) and (secret_flag(a) or a in SHORT_SECRET_FLAGS):
            hide_next = a
            out.append(a)
            continue
        flag, eq, _ = a.partition("=")
        if eq and FLAG.match(flag) and secret_flag(flag):
            out.append(f"{flag}={MARK}")
            continue
        n = NAME_EQ.fullmatch(a)
        if n and not a.startswith("-") and secret_name(n["name"]):
            out.append(f"{n['name']}={MARK}")
            continue
        # an argument with spaces is a command line of its own (`sh -c "..."`, `--args "..."`)
        out.append(text(a))
    return out


def _redact_value(m: re.Match, head: str) -> str:
    v = m["value"]
    if MARK in v:       # redacted already (a report quoting a manifest's command): kept as it is, quotes too
        return f"{head}{v}"
    q = v[0] if v[:1] in "\"'" and len(v) > 1 and v[-1] == v[0] and v.count(v[0]) == 2 else ""
    return f"{head}{q}{MARK}{q}"


class _Ahead:
    """A name's match and the value after it, read when first asked for (`m["value"]`)."""

    def __init__(self, m: re.Match, s: str):
        self.m, self.s, self._value = m, s, None

    def __getitem__(self, key: str) -> str:
        if key != "value":
            return self.m[key]
        if self._value is None:
            v = VALUE.match(self.s, self.m.end())
            self._value = v.group(0) if v else ""
        return self._value

    def group(self, n: int = 0) -> str:
        return self.m.group(n)


def _sub_ahead(pattern: re.Pattern, s: str, secret) -> str:
    """`pattern.sub` for a pattern that matches a name and leaves its value unread: a secret's value
    is read, replaced and skipped; anything else is kept and the scan goes on inside its value."""
    out, pos = [], 0
    for m in pattern.finditer(s):
        if m.start() < pos:
            continue
        a = _Ahead(m, s)
        if not secret(a) or not a["value"]:
            continue
        out += [s[pos:m.start()], _redact_value(a, m.group(0))]
        pos = m.end() + len(a["value"])
    out.append(s[pos:])
    return "".join(out)


def text(s: str) -> str:
    """Free text (a shell command, a transcript line, a log line, a whole file): the value shapes
    of `SHAPES` (multi-line ones included), then the names: secret strings in a debugger's frames,
    flags and their values, key=value and key: value pairs."""
    if not s:
        return s
    return _short_text(s) if len(s) <= MEMO_CHARS else _text(s)


# A report's strings repeat (a file's name, a kind, one kernel in every fault and claim): each short
# one is redacted once per process. In the metamorphic harness's triages, 6,178 strings redacted were
# 1,881 distinct, and redaction was 0.17 s of 0.57. (The redaction is a pure function of the text.)
MEMO_CHARS = 1024


@functools.lru_cache(maxsize=8192)
def _short_text(s: str) -> str:
    return _text(s)


def _text(s: str) -> str:
    s = value(s)
    low = s.lower()
    if any(h in low for h in NAME_HINTS):
        s = _names_of_hinted_lines(s) if len(s) > 4096 else _names(s)
    return s


# Words one of which a name-based secret must contain (lower case): lines without any skip the
# name passes. `-p` for the short flag.
NAME_HINTS = ("token", "key", "secret", "pass", "pwd", "pw", "auth", "credential", "cookie", "session", "private",
              "dsn", "jwt", "webhook", "signature", "pat", "pin", "otp", "salt", "-p")


def _names_of_hinted_lines(s: str) -> str:
    """A block of output: the name passes run once over the lines that hold a secret-like word,
    joined (no pattern spans a line, so they split back one for one)."""
    lines = s.split("\n")
    hinted = [i for i, ln in enumerate(lines) if any(h in ln.lower() for h in NAME_HINTS)]
    done = _names("\n".join(lines[i] for i in hinted)).split("\n")
    if len(done) != len(hinted):                     # cannot happen; never trade a line for speed
        return "\n".join(_names(ln) if i in set(hinted) else ln for i, ln in enumerate(lines))
    for i, ln in zip(hinted, done):
        lines[i] = ln
    return "\n".join(lines)


def _names(s: str) -> str:
    """The passes that judge a name: debugger strings, flags, key=value, key: value."""
    # each pass only where the characters it needs are there (a scan for a literal is cheap)
    if "=" in s and STRING_AFTER_EQ.search(s):
        s = DEBUGGER_STRING.sub(lambda m: _redact_value(m, m["name"] + m["sep"]) if secret_name(m["name"])
                                else m.group(0), s)
    if "=" in s and "-" in s:
        s = _sub_ahead(FLAG_EQ, s, lambda m: secret_flag(m["flag"]))
    if "-" in s:
        s = _sub_ahead(FLAG_SPACE, s, lambda m: secret_flag(m["flag"]) or (m["flag"] in SHORT_SECRET_FLAGS
                                                                            and _short_secret(m["flag"], m["value"])))
    if "=" in s:
        s = _sub_ahead(KEY_EQ, s, lambda m: secret_name(m["name"]) and MARK not in m["value"]
                       and not POINTER.fullmatch(m["value"].rstrip(",)")))   # `f (keywords=0x0, n=3)`: a pointer
    if ":" not in s:
        return s
    return KEY_COLON.sub(lambda m: _redact_value(m, m["name"] + m["sep"])
                         if _colon_secret(m["name"]) and not m["value"].startswith(MARK)
                         and not NUMBER.fullmatch(m["value"]) else m.group(0), s)


NUMBER = re.compile(r"\d{1,12}(?:\.\d+)?")     # `#token: 48312` in a log is a count, not a secret


# `name: value` in free text is a secret only for the strong words: `key:` or `session:` alone
# are too common in logs to hide what follows.
COLON_WORDS = re.compile(r"(?:^|_)(?:PASSWORD|PASSWD|PASSPHRASE|PASS|PWD|SECRET|CLIENT_SECRET|API_KEY|APIKEY|"
                         r"ACCESS_KEY|SECRET_KEY|PRIVATE_KEY|TOKEN|ACCESS_TOKEN|AUTH_TOKEN|REFRESH_TOKEN|"
                         r"X_API_KEY|X_AUTH_TOKEN|COOKIE|SET_COOKIE|CREDENTIALS?)$")


@functools.lru_cache(maxsize=8192)
def _colon_secret(name: str) -> bool:
    return bool(COLON_WORDS.search(name.replace("-", "_").replace(".", "_").upper())) and name not in EVIDENCE_NAMES


def new_salt() -> str:
    """A random salt for one bundle or experiment's fingerprints (stored beside them)."""
    return secrets.token_hex(16)


# Fingerprints held only in memory (a capture's /proc records) are keyed per process run.
_PROCESS_SALT = new_salt()


def fingerprint(v: str | None, salt: str | None = None) -> str | None:
    """Compare a requested value with what a process had without writing either: HMAC-SHA256 under
    a random salt (the process's own where none is given), so a written fingerprint cannot be
    checked against guesses without the salt, and two bundles' fingerprints of one value differ."""
    if v is None:
        return None
    key = (salt or _PROCESS_SALT).encode()
    return "hmac-sha256:" + hmac.new(key, v.encode("utf-8", "surrogateescape"), hashlib.sha256).hexdigest()


class LineStream:
    """`text()` for a stream read in chunks of whole lines (the recorder's `--redact-output`): a
    multi-line secret (a PEM private key) that a chunk leaves open is still hidden in the next
    chunks, up to its END line; chunk by chunk, `text()` alone would redact only the chunk that holds
    the BEGIN line and let the rest of the key's body through."""

    _OPEN = "-----BEGIN PRIVATE KEY-----\n"        # stands for the BEGIN line an earlier chunk held
    _BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
    _END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")

    def __init__(self):
        self.in_block = False

    def feed(self, chunk: str) -> str:
        opened = self._OPEN if self.in_block else ""
        whole = opened + chunk
        begins = [m.start() for m in self._BEGIN.finditer(whole)]
        ends = [m.start() for m in self._END.finditer(whole)]
        self.in_block = bool(begins) and (not ends or begins[-1] > ends[-1])
        out = text(whole)
        return out[len(opened):] if opened else out
