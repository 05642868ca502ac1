#!/usr/bin/env python3
"""An adversarial pass over every verb of faultkit, through the real CLI (issue 36's "Done when").

    python scripts/adversarial_pass.py --budget 900 [--seed 1] [--jobs 2] [--work /tmp/adversary-pass]
                                       [--verb triage --verb pack ...] [--keep]

Each run is one `python -m faultkit.cli ...` under a wall-clock bound and RLIMIT_AS/RLIMIT_FSIZE, with
HOME, XDG_* and TMPDIR of its own, in a folder of its own (in/: the inputs, out/: where -o goes).
Inputs are real ones (../shared/corpus, tests/data bundles, traces/, files the setup makes with the
real CLI and real tools), mutated: byte flips, cuts, huge lines, NULs, invalid UTF-8, UTF-16, CR line
ends, deep nesting, numbers of 5,000 digits, fields of every wrong type, special files (FIFOs,
folders, /dev/zero, links out of a bundle), escape and markup payloads, planted secrets of every
shape of redact.SHAPES. A run is a defect when it shows:

  internal  a traceback, "internal error", a parser's caught internal error, a signal, an exit status
            the verb does not plan
  hang      the wall-clock bound reached
  blowup    over the memory, time or disk bound (RSS, seconds, bytes written)
  leak      a planted secret in any byte printed or written (archives opened), a file written outside
            the run's out/ and cache, a mode wider than 0600/0700, a terminal escape printed, live
            markup in an HTML report or in a Markdown report rendered by cmark-gfm
  lost      a line the target wrote missing from server.log after a signal to capture

The tally (inputs x runs, defects per verb and class) is printed and written to WORK/tally.json,
with each defect's command and folder (kept) so it can be rerun by hand.
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import lzma
import os
import random
import re
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import tempfile
import threading
import zlib
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT.parent / "shared" / "corpus"
if not CORPUS.is_dir():
    CORPUS = Path("/work/shared/corpus")
DATA = ROOT / "tests" / "data"
PY = sys.executable

WALL_S = 90                 # one run's wall-clock bound (the shared 2-core machine is slow)
SLOW_S = 45                 # a run slower than this is a time blow-up
AS_BYTES = 6 << 30          # address space (pandas, duckdb and numpy map a lot that they never touch)
RSS_BYTES = 1536 << 20      # resident set beyond this is a memory blow-up
FSIZE = 512 << 20           # one file's size (RLIMIT_FSIZE): SIGXFSZ past it
WRITTEN = 128 << 20         # bytes written by one run in all

# ---------------------------------------------------------------- planted secrets (redact.SHAPES)
# (shape, the text planted, the part that must never appear again)
SECRETS = [
    ("token-prefix hf_", "HF_TOKEN=hf_AdvHfTok0001xyzABCDEFGHIJ", "AdvHfTok0001"),
    ("token-prefix sk-", "OPENAI_KEY=sk-AdvOpenAi0002abcdefghijkl", "AdvOpenAi0002"),
    ("token-prefix ghp_", "token ghp_AdvGithub0003abcdefghijklmn", "AdvGithub0003"),
    ("token-prefix AKIA", "aws AKIAADV00000000000Q4 id", "ADV00000000000Q4"),
    ("url-userinfo", "postgres://dbuser:AdvUrlPw0005@db.example:5432/x", "AdvUrlPw0005"),
    ("url-signature", "https://blob.example/c/f?sv=2024&sig=AdvSasSig0006&se=1", "AdvSasSig0006"),
    ("x-amz-signature", "https://s3.example/k?X-Amz-Signature=AdvAmzSig0007&X-Amz-Date=1", "AdvAmzSig0007"),
    ("authorization-header", "Authorization: Bearer AdvBearer0008abcdefgh", "AdvBearer0008"),
    ("user-password-flag", "curl -u admin:AdvCurlPw0009 http://x", "AdvCurlPw0009"),
    ("attached-short-flag", "mysql -uroot -pAdvMysqlPw0010 db", "AdvMysqlPw0010"),
    ("flag value", "server --api-key AdvApiKey0011", "AdvApiKey0011"),
    ("key=value", "WANDB_API_KEY=AdvWandb0012", "AdvWandb0012"),
    ("key: value", "password: AdvColonPw0013", "AdvColonPw0013"),
    ("SSHPASS", "SSHPASS=AdvSshPass0014", "AdvSshPass0014"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJBZHZKd3QwMDE1In0.AdvJwtSig0015abcdef", "AdvJwtSig0015"),
]
PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEAdvPemBody0016aaaaaaaaaaaaaaaaaaaa\nAdvPemBody0016bbbbbbbbbbbbbbbbbbbbbbb\n"
       "-----END RSA PRIVATE KEY-----")
SECRET_MARKS = [m for _, _, m in SECRETS] + ["AdvPemBody0016"]
SECRET_ENV = {"HF_TOKEN": "hf_AdvHfTok0001xyzABCDEFGHIJ", "SSHPASS": "AdvSshPass0014",
              "SERVER_ARGS": "--api-key AdvApiKey0011", "DATABASE_URL": "postgres://dbuser:AdvUrlPw0005@db.example/x",
              "WANDB_API_KEY": "AdvWandb0012", "MYSQL_PWD": "AdvMysqlPw0010"}

# ---------------------------------------------------------------- escape and markup payloads
PAYLOAD = ("adv\x1b]52;c;QURWRVJTQVJZ\x07\x1b[2J\x1b]8;;http://evil.example\x1b\\link\x1b]8;;\x1b\\"
           "\u202eevil\u202c<img src=x onerror=alert(1)><script>alert(1)</script>[adv](javascript:alert(1))"
           "\r\x08\x9b31m|`**_#")
TERMINAL_BAD = re.compile(rb"\x1b|\x07|\x08|\xc2\x9b|\xe2\x80\xae|\r(?!\n)")
LIVE_MARKUP = re.compile(r"<script|<img [^>]*onerror|href=\"?javascript:", re.I)


@dataclass
class Case:
    verb: str                       # the verb counted in the tally ("registry add", "capture", ...)
    name: str                       # what was done to the input
    argv: list                      # after `faultkit`
    rcs: set                        # planned exit statuses
    setup: object = None            # fn(case_dir) -> None: makes in/
    stdin: bytes | None = None
    markup: bool = False            # payloads were planted: check the terminal and the reports
    secrets: bool = False           # secrets were planted: grep everything
    after: object = None            # fn(case_dir, result) -> list of (class, text): a scenario's own checks
    wall: int = WALL_S
    run: object = None              # fn(case, case_dir) -> Result: a scenario that drives faultkit itself


@dataclass
class Result:
    rc: int | None
    wall: float
    rss: int
    stdout: bytes
    stderr: bytes
    timed_out: bool = False
    defects: list = field(default_factory=list)


# ---------------------------------------------------------------- running one command, bounded

def _limits():
    resource.setrlimit(resource.RLIMIT_AS, (AS_BYTES, AS_BYTES))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE, FSIZE))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def env_for(d: Path) -> dict:
    home = d / "home"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_CACHE_HOME": str(home / ".cache"), "XDG_STATE_HOME": str(home / ".local/state"),
           "XDG_DATA_HOME": str(home / ".local/share"), "TMPDIR": str(d / "tmp"),
           "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1", "TERM": "dumb"}
    return env


def spawn(argv: list, d: Path, stdin: bytes | None = None, wall: int = WALL_S, extra_env=None,
          cmd: list | None = None) -> Result:
    """One command under the bounds; its rusage (maxrss) from wait4."""
    env = env_for(d)
    env.update(extra_env or {})
    full = cmd or [PY, "-m", "faultkit.cli", *map(str, argv)]
    out, err = open(d / "stdout", "w+b"), open(d / "stderr", "w+b")
    t0 = time.monotonic()
    p = subprocess.Popen(full, cwd=d, env=env, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         stdout=out, stderr=err, preexec_fn=_limits, start_new_session=True)
    if stdin is not None:
        def feed():
            try:
                p.stdin.write(stdin)
                p.stdin.close()
            except OSError:
                pass
        threading.Thread(target=feed, daemon=True).start()
    timed_out, status, ru, hwm = False, None, None, 0
    while True:
        hwm = max(hwm, _hwm(p.pid))
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() - t0 > wall:
            timed_out = True
            _killpg(p.pid, signal.SIGKILL)
            pid, status, ru = os.wait4(p.pid, 0)
            break
        time.sleep(0.05)
    p.returncode = os.waitstatus_to_exitcode(status)
    _killpg(p.pid, signal.SIGKILL)           # what the run left behind in its own session
    wall_s = time.monotonic() - t0
    res = Result(p.returncode, wall_s, hwm, _bounded(out), _bounded(err), timed_out)
    out.close(), err.close()
    return res


def _bounded(fh, keep: int = 32 << 20) -> bytes:
    """A run's stdout or stderr as judged: its first and last 32 MiB (a run may write 512 MiB of each)."""
    size = fh.seek(0, os.SEEK_END)
    fh.seek(0)
    if size <= 2 * keep:
        return fh.read()
    head = fh.read(keep)
    fh.seek(size - keep)
    return head + b"\n...\n" + fh.read(keep)


def _hwm(pid: int) -> int:
    """The process's peak resident set (VmHWM), sampled while it runs (wait4's ru_maxrss would
    count the harness's own size at fork)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    return 0


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# ---------------------------------------------------------------- mutations

JUNK = [b'"', b",", b"\n", b"{", b"}", b"]", b"[", b"0x", b"", b"\xff", b"\x00", b"NaN", b"-1", b"\t", b"\r",
        b"99999999999999999999999999", b"0xffffffffffffffffffffffff", b"\xc3", b"\xed\xa0\x80", b"%s%n"]


def m_flip(b: bytes, r: random.Random) -> bytes:
    out = bytearray(b)
    for _ in range(r.randint(1, 12)):
        pos = r.randrange(len(out)) if out else 0
        op = r.random()
        if op < 0.3:
            out[pos:pos + 1] = r.choice(JUNK)
        elif op < 0.5:
            del out[pos:pos + r.randint(1, 64)]
        elif op < 0.7:
            out[pos:pos] = out[r.randrange(len(out) or 1):][:r.randint(1, 200)]
        elif op < 0.85 and out:
            out[pos] = r.randrange(256)
        else:
            out[pos:pos] = bytes(r.randrange(256) for _ in range(r.randint(1, 16)))
    return bytes(out)


def m_cut(b: bytes, r: random.Random) -> bytes:
    return b[:r.randrange(len(b) + 1)]


def m_huge_line(b: bytes, r: random.Random) -> bytes:
    pos = r.randrange(len(b) + 1)
    filler = r.choice([b"A", b"Memory access fault by GPU node-1 ", b"0x", b"\t", b" ", b"(", b"[", b"Xid"])
    return b[:pos] + filler * ((4 << 20) // len(filler)) + b[pos:]


def m_nul(b: bytes, r: random.Random) -> bytes:
    out = bytearray(b)
    for _ in range(r.randint(1, 50)):
        pos = r.randrange(len(out) + 1)
        out[pos:pos] = b"\x00" * r.randint(1, 4096)
    return bytes(out)


def m_bad_utf8(b: bytes, r: random.Random) -> bytes:
    out = bytearray(b)
    for _ in range(r.randint(1, 40)):
        pos = r.randrange(len(out) + 1)
        out[pos:pos] = r.choice([b"\xff\xfe", b"\xc3", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"])
    return bytes(out)


def m_utf16(b: bytes, r: random.Random) -> bytes:
    t = b.decode("utf-8", "replace")
    return t.encode(r.choice(["utf-16", "utf-16-le", "utf-16-be", "utf-32"]))


def m_cr(b: bytes, r: random.Random) -> bytes:
    return b.replace(b"\n", r.choice([b"\r", b"\r\n", b"\r\r\n", b"\x0b", b"\x85", b"\u2028".decode("unicode_escape").encode()]))


NUM = re.compile(rb"0x[0-9a-fA-F]+|\b\d+\b")


def m_huge_numbers(b: bytes, r: random.Random) -> bytes:
    def rep(m):
        if r.random() < 0.3:
            return (b"0x" + b"f" * 5000) if m.group().startswith(b"0x") else b"9" * 5000
        return m.group()
    return NUM.sub(rep, b)


def m_repeat(b: bytes, r: random.Random) -> bytes:
    lines = b.splitlines(True)
    if not lines:
        return b
    keep = [ln for ln in lines if re.search(rb"(?i)fault|error|xid|abort|signal|kernel|dispatch", ln)] or lines
    ln = r.choice(keep)
    pos = r.randrange(len(lines) + 1)
    times = min(r.randint(2000, 40000), (8 << 20) // max(1, len(ln)))      # at most 8 MB more
    return b"".join(lines[:pos]) + ln * times + b"".join(lines[pos:])


IDENT = re.compile(rb"\b[A-Za-z_][A-Za-z0-9_:<>]{7,}\b")


def m_payload(b: bytes, r: random.Random) -> bytes:
    """The escape and markup payload into identifiers (kernel names, functions, processes); never
    into a planted secret's line (a name changed by it is no longer a secret's name)."""
    p = PAYLOAD.encode()
    return b"".join(ln if ln.startswith((b"[adv]", b"-----")) or b"PRIVATE KEY" in ln or b"AdvPem" in ln else
                    IDENT.sub(lambda m: m.group() + p if r.random() < 0.2 else m.group(), ln, count=40)
                    for ln in b.splitlines(True))


def m_secrets(b: bytes, r: random.Random) -> bytes:
    lines = b.splitlines(True) or [b""]
    for _, text, _ in SECRETS:
        pos = r.randrange(len(lines) + 1)
        lines.insert(pos, f"[adv] {text}\n".encode())
    lines.insert(r.randrange(len(lines) + 1), (PEM + "\n").encode())
    return b"".join(lines)


def m_splice(b: bytes, r: random.Random) -> bytes:
    other = r.choice(TEXT_SEEDS).read_bytes()
    a, c = r.randrange(len(b) + 1), r.randrange(len(other) + 1)
    return b[:a] + other[c:] if r.random() < 0.5 else other[:c] + b[a:]


BYTE_MUTATORS = {"flip": m_flip, "cut": m_cut, "huge-line": m_huge_line, "nul": m_nul, "bad-utf8": m_bad_utf8,
                 "utf16": m_utf16, "cr": m_cr, "huge-numbers": m_huge_numbers, "repeat": m_repeat,
                 "payload": m_payload, "secrets": m_secrets, "splice": m_splice}

WRONG = [5, -1, 0, 1 << 70, 2 ** 63, -(2 ** 63) - 1, 1e308, -0.0, "x", "", "../../../etc/passwd", "/etc/shadow", [], {},
         None, True, [[[[]]]], {"a": {"b": {}}}, "²¹", "\x00", "9" * 400, PAYLOAD, ["x", 5, None], {"5": 5}]
HUGE_INT_TEXT = "9" * 5000


def json_paths(v, path=()):
    yield path
    if isinstance(v, dict):
        for k, x in list(v.items())[:200]:
            yield from json_paths(x, path + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v[:50]):
            yield from json_paths(x, path + (i,))


def set_path(v, path, new):
    if not path:
        return new
    cur = v
    for p in path[:-1]:
        cur = cur[p]
    cur[path[-1]] = new
    return v


def m_json_types(b: bytes, r: random.Random) -> bytes:
    """Fields of every wrong type and size, deep nesting and 5,000-digit numbers in a JSON input."""
    try:
        doc = json.loads(b)
    except (ValueError, RecursionError):
        return m_flip(b, r)
    paths = list(json_paths(doc))
    for _ in range(r.randint(1, 6)):
        path = r.choice(paths)
        roll = r.random()
        new = r.choice(WRONG) if roll < 0.7 else "\u0000HUGEINT\u0000" if roll < 0.8 else \
            "\u0000DEEP\u0000" if roll < 0.9 else "x" * (1 << 20)
        try:
            doc = set_path(doc, path, new)
        except (KeyError, IndexError, TypeError):
            continue
        paths = list(json_paths(doc))
    text = json.dumps(doc, allow_nan=True)
    text = text.replace('"\\u0000HUGEINT\\u0000"', HUGE_INT_TEXT)
    text = text.replace('"\\u0000DEEP\\u0000"', "[" * 100000 + "]" * 100000)
    return text.encode()


def mutate_bytes(b: bytes, r: random.Random, kinds=None) -> tuple[bytes, str]:
    names = kinds or list(BYTE_MUTATORS)
    picked = [r.choice(names) for _ in range(r.choice([1, 1, 1, 2]))]
    for n in picked:
        b = BYTE_MUTATORS[n](b, r)
    return b, "+".join(picked)


# ---------------------------------------------------------------- seeds

def corpus_files(folder: str) -> list[Path]:
    d = CORPUS / folder
    return sorted(p for p in d.rglob("*") if p.is_file() and not p.name.endswith((".py", ".cu", ".sh"))) \
        if d.is_dir() else []


TEXT_SEEDS: list[Path] = []
BUNDLES: list[Path] = []


def load_seeds() -> None:
    for f in ("dmesg", "runtime", "gdb", "cuda", "rocprofv3"):
        TEXT_SEEDS.extend(p for p in corpus_files(f) if not p.name.endswith(".xz"))
    for d in ("shapes", "source_shapes"):
        TEXT_SEEDS.extend(p for p in sorted((DATA / d).glob("*.txt")))
    for m in sorted(DATA.rglob("manifest.json")):
        BUNDLES.append(m.parent)
    BUNDLES.append(ROOT / "traces" / "sglang-tp2-mi300x")


# ---------------------------------------------------------------- fixtures made once with the real CLI

class Fixtures:
    def __init__(self, work: Path):
        self.dir = work / "fixtures"
        self.reports: list[Path] = []
        self.traces: list[Path] = []
        self.dumps: list[Path] = []
        self.trials: Path | None = None
        self.amplify: Path | None = None
        self.db: Path | None = None
        self.signature: str | None = None

    def make(self, verbs: set) -> None:
        d = self.dir
        if d.exists():
            shutil.rmtree(d)
        (d / "home").mkdir(parents=True, mode=0o700)
        (d / "tmp").mkdir()
        bundle = DATA / "live_h200_tp2_fault"
        for i, src in enumerate([bundle, DATA / "live_h200_coredump" / "fault", ROOT / "traces" / "sglang-tp2-mi300x",
                                 *TEXT_SEEDS[::25]]):
            out = d / f"report{i}.json"
            spawn(["triage", "--no-open-cores", str(src), "-f", "json", "-o", str(out)], d)
            if out.exists():
                self.reports.append(out)
        for fmt in ("pftrace", "json"):
            out = d / f"timeline.{fmt}"
            spawn(["timeline", str(ROOT / "traces" / "sglang-tp2-mi300x"), "-o", str(out)], d)
            if out.exists():
                self.traces.append(out)
        self.db = d / "registry.duckdb"
        spawn(["registry", "add", "--db", str(self.db), *map(str, self.reports)], d)
        r = spawn(["registry", "top", "--db", str(self.db), "-f", "json"], d)
        try:
            self.signature = json.loads(r.stdout)["signatures"][0]["signature"]
        except (ValueError, KeyError, IndexError):
            pass
        self._dumps()
        if verbs & {"trials report", "trials"}:
            self._trials()
        if verbs & {"amplify report", "amplify"}:
            self._amplify()

    def _dumps(self) -> None:
        d = self.dir
        prog = ("import threading, time\nl = threading.Lock(); l.acquire()\n"
                "def worker_kernel_wait():\n    l.acquire()\n"
                "threading.Thread(target=worker_kernel_wait).start()\ntime.sleep(120)\n")
        p = subprocess.Popen([PY, "-c", prog])
        time.sleep(1.0)
        pyspy = Path(PY).parent / "py-spy"
        try:
            for i in range(2):
                for args, name in (([str(pyspy), "dump", "--pid", str(p.pid)], f"pyspy{i}.txt"),
                                   ([str(pyspy), "dump", "--json", "--pid", str(p.pid)], f"pyspy{i}.json"),
                                   (["gdb", "-q", "-batch", "-p", str(p.pid), "-ex", "thread apply all bt"],
                                    f"gdb{i}.txt")):
                    try:
                        out = subprocess.run(args, capture_output=True, timeout=60).stdout
                    except (OSError, subprocess.TimeoutExpired):
                        continue
                    if out:
                        (d / name).write_bytes(out)
                        self.dumps.append(d / name)
                time.sleep(1.0)
        finally:
            p.kill()
            p.wait()

    def _trials(self) -> None:
        out = self.dir / "trials"
        spawn(["trials", "run", "--arm", "crash=python3 -c 'import os; print(\"Memory access fault by GPU node-1\"); "
               "os.abort()'", "--arm", "ok=python3 -c 'print(1)'", "-n", "2", "--timeout", "20s", "-o", str(out)],
              self.dir, wall=200)
        if (out / "plan.json").exists():
            self.trials = out

    def _amplify(self) -> None:
        out = self.dir / "amplify"
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        server = ROOT / "scripts" / "uaf_server.py"
        spawn(["amplify", "run", "--arm", "caching-off", "--port", str(port), "-n", "2", "--timeout", "60s",
               "--client", f"{PY} {server} --client --port {port} --requests 2", "-o", str(out), "--",
               PY, str(server), "--port", str(port), "--device", "cpu", "--seed", "11"], self.dir, wall=300)
        if (out / "plan.json").exists():
            self.amplify = out


# ---------------------------------------------------------------- hostile files and bundles

def write(p: Path, data: bytes) -> Path:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def special(kind: str, p: Path, d: Path) -> str:
    """Something that is not a plain file where a file is expected."""
    p.parent.mkdir(parents=True, exist_ok=True)
    if p.exists() or p.is_symlink():
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink()
    if kind == "fifo":
        os.mkfifo(p)
    elif kind == "dir":
        p.mkdir()
        (p / "inner.log").write_bytes(b"Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x1000. "
                                      b"Reason: Page not present or supervisor privilege.\n")
    elif kind == "devzero":
        p.symlink_to("/dev/zero")
    elif kind == "devurandom":
        p.symlink_to("/dev/urandom")
    elif kind == "loop":
        p.symlink_to(p.name)
    elif kind == "dangling":
        p.symlink_to(d / "nowhere" / "x")
    elif kind == "outside":
        sec = write(d / "outside" / "secret.log", ("\n".join(t for _, t, _ in SECRETS) + "\n" + PEM + "\n"
                                                   "Memory access fault by GPU node-1 (Agent handle: 0x1) on address "
                                                   "0x7f00AdvOutside0017. Reason: Unknown.\n").encode())
        p.symlink_to(sec)
    elif kind == "proc":
        p.symlink_to("/proc/self/environ")
    elif kind == "unreadable":
        p.write_bytes(b"x")
        os.chmod(p, 0)
    return kind


SPECIALS = ["fifo", "dir", "devzero", "devurandom", "loop", "dangling", "outside", "proc"]


def copy_bundle(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=True)
    for p in [dst, *dst.rglob("*")]:
        if not p.is_symlink():
            os.chmod(p, 0o700 if p.is_dir() else 0o600)
    return dst


def mutate_bundle(src: Path, dst: Path, r: random.Random, markup=False, secrets=False) -> str:
    copy_bundle(src, dst)
    files = [p for p in dst.rglob("*") if p.is_file() and not p.is_symlink()]
    did = []
    for _ in range(r.randint(1, 3)):
        roll = r.random()
        f = r.choice(files)
        if roll < 0.35:
            if f.suffix == ".json" and r.random() < 0.7:
                f.write_bytes(m_json_types(f.read_bytes(), r))
                did.append(f"types:{f.name}")
            else:
                data, how = mutate_bytes(f.read_bytes(), r)
                f.write_bytes(data)
                did.append(f"{how}:{f.name}")
        elif roll < 0.55:
            kind = special(r.choice(SPECIALS), f, dst.parent)
            did.append(f"{kind}:{f.name}")
        elif roll < 0.7:
            name = r.choice([PAYLOAD.replace("/", "_")[:120] + ".log", "a\nb.log", "-rf.log", ".." + "x" * 200,
                             "\udcff.log", "²¹.json", "server.log.gz"])
            try:
                p = dst / name
                data = gzip.compress(m_secrets(b"Memory access fault by GPU node-1 on address 0x10.\n", r)) \
                    if name.endswith(".gz") else b"Memory access fault by GPU node-1 on address 0x10.\n"
                p.write_bytes(data)
                did.append("hostile-name")
            except (OSError, UnicodeEncodeError):
                pass
        elif roll < 0.85:
            m = dst / "manifest.json"
            if m.exists() and not m.is_symlink() and m.is_file():
                try:
                    doc = json.loads(m.read_bytes())
                    if isinstance(doc, dict):
                        doc["command"] = r.choice([PAYLOAD, " ".join(t for _, t, _ in SECRETS), ["x", 5], 5, None])
                        fl = doc.get("files")
                        if isinstance(fl, dict):
                            fl["../../outside/secret.log"] = 10
                            fl["/etc/shadow"] = 10
                        doc.setdefault("system", {})
                        if isinstance(doc["system"], dict):
                            doc["system"]["host"] = r.choice(["../../x", PAYLOAD, "h\nfaultkit: forged"])
                        m.write_text(json.dumps(doc))
                        did.append("manifest-hostile")
                except (ValueError, RecursionError):
                    pass
        else:
            f2 = dst / r.choice(["server.log", "kernel.log"])
            if f2.is_file() and not f2.is_symlink():
                data = f2.read_bytes()
                data = m_payload(data, r) if r.random() < 0.5 else m_secrets(data, r)
                f2.write_bytes(data)
                did.append("planted:" + f2.name)
    if markup:
        f2 = dst / "server.log"
        if f2.is_file() and not f2.is_symlink():
            f2.write_bytes(m_payload(f2.read_bytes(), r))
    if secrets:
        for name in ("server.log", "kernel.log"):
            f2 = dst / name
            if f2.is_file() and not f2.is_symlink():
                f2.write_bytes(m_secrets(f2.read_bytes(), r))
        env = dst / "environ.json"
        if env.is_file() and not env.is_symlink():
            try:
                doc = json.loads(env.read_bytes())
                for proc in (doc if isinstance(doc, list) else doc.values() if isinstance(doc, dict) else []):
                    if isinstance(proc, dict) and isinstance(proc.get("env"), dict):
                        proc["env"].update(SECRET_ENV)
                    if isinstance(proc, dict) and isinstance(proc.get("cmdline"), list):
                        proc["cmdline"] += ["--api-key", "AdvApiKey0011", "-pAdvMysqlPw0010"]
                env.write_text(json.dumps(doc))
            except (ValueError, RecursionError):
                pass
    return ",".join(did) or "copy"


def hostile_tar(src: Path, dst: Path, r: random.Random) -> str:
    """A .tar.gz of a bundle with members that escape: ../, absolute paths, links out, a device, a huge
    sparse member, duplicates."""
    did = []
    with tarfile.open(dst, "w:gz") as tf:
        tf.add(src, arcname="bundle")
        for _ in range(r.randint(1, 4)):
            roll = r.random()
            if roll < 0.2:
                ti = tarfile.TarInfo(r.choice(["../../escape.log", "/tmp/adversary-abs.log", "bundle/../../x.log"]))
                data = b"Memory access fault by GPU node-1 on address 0x10.\n"
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
                did.append("dotdot")
            elif roll < 0.4:
                ti = tarfile.TarInfo("bundle/server.log.link")
                ti.type, ti.linkname = tarfile.SYMTYPE, r.choice(["/etc/passwd", "../../../../etc/shadow", "/proc/self/environ"])
                tf.addfile(ti)
                did.append("symlink-out")
            elif roll < 0.55:
                ti = tarfile.TarInfo("bundle/hard.log")
                ti.type, ti.linkname = tarfile.LNKTYPE, "/etc/passwd"
                tf.addfile(ti)
                did.append("hardlink-out")
            elif roll < 0.7:
                ti = tarfile.TarInfo("bundle/dev.log")
                ti.type, ti.devmajor, ti.devminor = tarfile.CHRTYPE, 1, 5
                tf.addfile(ti)
                did.append("device")
            elif roll < 0.85:
                data = m_secrets(b"Memory access fault by GPU node-1 (Agent handle: 0x1) on address 0x10. Reason: x\n", r)
                ti = tarfile.TarInfo("bundle/server.log")
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
                did.append("duplicate+secrets")
            else:
                data = PAYLOAD.encode() * 10
                ti = tarfile.TarInfo("bundle/" + PAYLOAD.replace("/", "_")[:80] + ".log")
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
                did.append("payload-name")
    return "tar:" + ",".join(did)


# ---------------------------------------------------------------- case generators, one per verb

def in_dir(d: Path) -> Path:
    p = d / "in"
    p.mkdir(exist_ok=True)
    return p


def gen_triage(r: random.Random, fx: Fixtures) -> Case:
    roll = r.random()
    markup, secrets = r.random() < 0.25, r.random() < 0.25
    fmt = r.choice(["md", "html", "json", None])
    out_args = ["-o", f"out/report.{fmt}"] if fmt else []
    if roll < 0.5:
        seed = r.choice(TEXT_SEEDS)
        data, how = mutate_bytes(seed.read_bytes(), r)
        if markup:
            data = m_payload(data, r)
        if secrets:
            data = m_secrets(data, r)
        name = r.choice([seed.name, seed.name + ".gz", seed.name + ".xz"]) if r.random() < 0.2 else seed.name

        def setup(d, data=data, name=name):
            blob = gzip.compress(data) if name.endswith(".gz") else lzma.compress(data) if name.endswith(".xz") else data
            write(in_dir(d) / name, blob)
        stdin = None
        argv = ["triage", "--no-open-cores", f"in/{name}", *out_args]
        if r.random() < 0.1:
            argv, stdin, setup = ["triage", "--no-open-cores", "-", *out_args], data, (lambda d: in_dir(d))
        return Case("triage", f"{seed.parent.name}/{seed.name}:{how}", argv, {0, 1}, setup, stdin=stdin,
                    markup=markup, secrets=secrets)
    if roll < 0.8:
        src = r.choice(BUNDLES)
        state = {}

        def setup(d, src=src):
            state["how"] = mutate_bundle(src, in_dir(d) / "b", r, markup, secrets)
        return Case("triage", f"bundle:{src.name}", ["triage", "--no-open-cores", "in/b", *out_args], {0, 1}, setup,
                    markup=markup, secrets=secrets)
    if roll < 0.9:
        src = r.choice(BUNDLES)

        def setup(d, src=src):
            hostile_tar(src, in_dir(d) / "b.tar.gz", r)
        return Case("triage", f"tar:{src.name}", ["triage", "--no-open-cores", "in/b.tar.gz", *out_args], {0, 1}, setup,
                    secrets=True)
    kind = r.choice(SPECIALS + ["unreadable"])

    def setup(d, kind=kind):
        special(kind, in_dir(d) / "x.log", d)
        if kind == "fifo":          # read as a stream, as `cat` would: someone writes it
            def writer(path=d / "in" / "x.log"):
                with open(path, "wb") as fh:
                    fh.write(m_secrets(TEXT_SEEDS[0].read_bytes(), r))
            threading.Thread(target=writer, daemon=True).start()
    return Case("triage", f"special:{kind}", ["triage", "--no-open-cores", "in/x.log", *out_args], {0, 1}, setup,
                secrets=kind == "outside", wall=30 if kind == "fifo" else WALL_S)


def gen_timeline(r: random.Random, fx: Fixtures) -> Case:
    if fx.traces and r.random() < 0.4:
        src = r.choice(fx.traces)
        data = src.read_bytes()
        if src.suffix == ".json" and r.random() < 0.5:
            data, how = m_json_types(data, r), "types"
        else:
            data, how = mutate_bytes(data, r, ["flip", "cut", "nul", "splice"] if src.suffix == ".pftrace" else None)
        return Case("timeline --check", f"{src.name}:{how}", ["timeline", "--check", f"in/{src.name}"], {0, 1},
                    lambda d, data=data, src=src: write(in_dir(d) / src.name, data))
    case = gen_triage(r, fx)
    inputs = [a for a in case.argv[2:] if not a.startswith("-o") and not a.startswith("out/")]
    fmt = r.choice(["pftrace", "json"])
    argv = ["timeline", *inputs, "-o", f"out/t.{fmt}"]
    if r.random() < 0.2:
        argv += ["--window", "all"]
    # a link loop or a dangling link given as an input is click's "no such file": a usage error
    return Case("timeline", case.name, argv, {0, 1, 2} if case.name.startswith("special:") else {0, 1}, case.setup, stdin=case.stdin, markup=case.markup,
                secrets=case.secrets, wall=case.wall)


def gen_show(r: random.Random, fx: Fixtures) -> Case:
    src = r.choice([b for b in BUNDLES if (b / "manifest.json").exists()])
    markup, secrets = r.random() < 0.3, r.random() < 0.3
    argv = ["show", "in/b"] + (r.choice([[], ["-f", "json"], ["-o", "out/s.json"], ["-o", "out/s.txt"], ["-v"]]))
    if r.random() < 0.15:
        return Case("show", f"tar:{src.name}", ["show", "in/b.tar.gz"], {0, 1},
                    lambda d, src=src: hostile_tar(src, in_dir(d) / "b.tar.gz", r), secrets=True)
    return Case("show", f"bundle:{src.name}", argv, {0, 1},
                lambda d, src=src: mutate_bundle(src, in_dir(d) / "b", r, markup, secrets), markup=markup,
                secrets=secrets)


def gen_pack(r: random.Random, fx: Fixtures) -> Case:
    src = r.choice([b for b in BUNDLES if (b / "manifest.json").exists()])
    flags = [f for f in ("--with-cores", "--with-env", "--with-kernel-history") if r.random() < 0.2]
    secrets = True
    markup = r.random() < 0.3
    return Case("pack", f"bundle:{src.name}{''.join(flags)}", ["pack", "in/b", "-o", "out/p.tar.gz", "-v", *flags],
                {0, 1}, lambda d, src=src: mutate_bundle(src, in_dir(d) / "b", r, markup, secrets), markup=markup,
                secrets=secrets and "--with-env" not in flags)


def gen_dump(r: random.Random, fx: Fixtures) -> Case:
    if not fx.dumps:
        return gen_triage(r, fx)
    kind = r.choice(["pyspy", "gdb"])
    pair = [p for p in fx.dumps if p.name.startswith(kind)] or fx.dumps
    a, b = r.choice(pair), r.choice(pair)
    markup, secrets = r.random() < 0.3, r.random() < 0.3
    da, how = (m_json_types(a.read_bytes(), r), "types") if a.suffix == ".json" and r.random() < 0.5 \
        else mutate_bytes(a.read_bytes(), r)
    db = b.read_bytes()
    if markup:
        da = m_payload(da, r)
    if secrets:
        da = m_secrets(da, r)
    fmt = r.choice([[], ["-f", "json"], ["-o", "out/d"]])

    def setup(d):
        write(in_dir(d) / ("a" + a.suffix), da)
        write(in_dir(d) / ("b" + b.suffix), db)
    return Case("dump --read", f"{a.name}:{how}", ["dump", "--read", f"in/a{a.suffix}", "--read", f"in/b{b.suffix}", *fmt],
                {0, 1}, setup, markup=markup, secrets=secrets)


def gen_registry(r: random.Random, fx: Fixtures) -> Case:
    sub = r.choice(["add", "add", "add", "similar", "top", "show", "export"])
    markup, secrets = r.random() < 0.3, r.random() < 0.3
    src = r.choice(fx.reports) if fx.reports else None
    data = b""
    how = ""
    if src:
        data = src.read_bytes()
        if markup or secrets:
            data = json.dumps(plant_strings(json.loads(data), markup, secrets)).encode()
        data, how = (m_json_types(data, r), "types") if r.random() < 0.7 else mutate_bytes(data, r)

    def setup(d):
        in_dir(d)
        if fx.db and fx.db.exists():
            shutil.copy(fx.db, d / "in" / "r.duckdb")
        write(d / "in" / "rep.json", data)
    db = ["--db", "in/r.duckdb"]
    if sub == "add":
        argv = ["registry", "add", *db, "in/rep.json", *(["-v"] if r.random() < 0.5 else [])]
        after = _registry_after
    elif sub == "similar":
        argv, after = ["registry", "similar", *db, "in/rep.json", *r.choice([[], ["-f", "json"]])], None
    elif sub == "top":
        argv, after = ["registry", "top", *db, *r.choice([[], ["-f", "json"], ["-n", "1"]])], None
    elif sub == "show":
        argv, after = ["registry", "show", *db, r.choice([fx.signature or "x", PAYLOAD, "", "%", "'; drop table x; --"])], None
    else:
        argv, after = ["registry", "export", *db, "-o", r.choice(["out/x.parquet", "out/x.duckdb", "in/r.duckdb"])], None
    return Case(f"registry {sub}", f"{src.name if src else '-'}:{how}", argv, {0, 1}, setup, markup=markup,
                secrets=secrets, after=after)


PLANT_KEYS = {"kernel", "name", "text", "line", "command", "host", "node", "function", "what", "why", "signature"}


def plant_strings(v, markup: bool, secrets: bool, key=None):
    """A report's text fields with the payload or a secret appended (what a hostile report carries)."""
    if isinstance(v, dict):
        return {k: plant_strings(x, markup, secrets, k) for k, x in v.items()}
    if isinstance(v, list):
        return [plant_strings(x, markup, secrets, key) for x in v]
    if isinstance(v, str) and key in PLANT_KEYS:
        return v + (PAYLOAD if markup else "") + (" " + " ".join(t for _, t, _ in SECRETS[:6]) if secrets else "")
    return v


def _registry_after(d: Path, res: Result) -> list:
    """After a hostile add: the registry's own readers on the same store."""
    out = []
    for argv in (["registry", "top", "--db", "in/r.duckdb"], ["registry", "top", "--db", "in/r.duckdb", "-f", "json"]):
        r2 = spawn(argv, d)
        out += classify_exit(r2, {0, 1}, "registry top (after add)")
        if TERMINAL_BAD.search(r2.stdout + r2.stderr):
            out.append(("leak", "registry top (after add): terminal escape printed"))
        for m in SECRET_MARKS:
            if m.encode() in r2.stdout + r2.stderr:
                out.append(("leak", f"registry top (after add): secret {m} printed"))
    return out


def _experiment_setup(r: random.Random, source, name: str, markup: bool, secrets: bool, fault: bytes = b""):
    """A copy of a trials/amplify folder with 1-3 of its files mutated, its trials' server logs given
    the markup payload (after `fault`, a fault line for the report to quote) and planted secrets."""
    def setup(d):
        dst = in_dir(d) / name
        copy_bundle(source, dst)
        files = [p for p in dst.rglob("*") if p.is_file()]
        for _ in range(r.randint(1, 3)):
            f = r.choice(files)
            if f.suffix == ".json" and r.random() < 0.7:
                f.write_bytes(m_json_types(f.read_bytes(), r))
            elif r.random() < 0.2:
                special(r.choice(SPECIALS), f, d)
            else:
                f.write_bytes(mutate_bytes(f.read_bytes(), r)[0])
        for f in dst.glob("trial-*/server.log"):
            if markup:
                f.write_bytes(m_payload(f.read_bytes() + fault, r))
            if secrets:
                f.write_bytes(m_secrets(f.read_bytes(), r))
    return setup


def gen_trials(r: random.Random, fx: Fixtures) -> Case:
    roll = r.random()
    if roll < 0.35:
        vals = ["2/5", "0/5", "5/2", "-1/5", "1/0", "9" * 5000 + "/5", "1e9/1e9", "nan/5", "3/" + "9" * 30, "0/0",
                "x", "1/5/5", PAYLOAD + "=1/2"]
        argv = ["trials", "report", "--counts", f"base={r.choice(vals)}", "--counts", f"{r.choice(['fix', 'base', PAYLOAD])}={r.choice(vals)}"]
        argv += r.choice([[], ["-f", "json"], ["-o", "out/t.html"], ["--alternative", "two-sided"]])
        return Case("trials report --counts", " ".join(argv[3:6]), argv, {0, 1, 2}, markup=True)
    if roll < 0.5:
        vals = ["0.4", "0", "1", "1.5", "-0.1", "nan", "inf", "1e-300", "9" * 400, "0.999999999"]
        argv = ["trials", "plan", "--rate", f"a={r.choice(vals)}", "--rate", f"b={r.choice(vals)}"]
        if r.random() < 0.5:
            argv += ["--power", r.choice(["0.9", "0.999999", "1", "0", "nan", "2"])]
        if r.random() < 0.3:
            argv += ["-n", r.choice(["1", "100000", "9" * 30])]
        if r.random() < 0.3:
            argv += ["--alpha", r.choice(["0.05", "1e-12", "0", "1", "nan"])]
        return Case("trials plan", " ".join(argv[2:]), argv, {0, 2}, wall=60)
    if not fx.trials:
        return gen_triage(r, fx)
    markup, secrets = r.random() < 0.3, r.random() < 0.3
    setup = _experiment_setup(r, fx.trials, "t", markup, secrets,
                              b" Memory access fault by GPU node-1 kernel_name_x\n")
    argv = ["trials", "report", "in/t", *r.choice([[], ["-f", "json"], ["-o", "out/t.html"], ["-o", "out/t.md"],
                                                    ["--metric", r.choice(["(", "(.*)", "(a*)*b", "x" * 5000])]])]
    return Case("trials report", "folder", argv, {0, 1, 2}, setup, markup=markup, secrets=secrets)


def gen_amplify(r: random.Random, fx: Fixtures) -> Case:
    if r.random() < 0.1:
        return Case("amplify arms", "-", ["amplify", "arms", *r.choice([[], ["-f", "json"]])], {0})
    if not fx.amplify:
        return gen_triage(r, fx)
    markup, secrets = r.random() < 0.3, r.random() < 0.3
    setup = _experiment_setup(r, fx.amplify, "a", markup, secrets)
    argv = ["amplify", "report", "in/a", *r.choice([[], ["-f", "json"], ["-o", "out/a.md"], ["-o", "out/a.json"]])]
    return Case("amplify report", "folder", argv, {0, 1}, setup, markup=markup, secrets=secrets)


def gen_watch(r: random.Random, fx: Fixtures) -> Case:
    seed = r.choice([p for p in TEXT_SEEDS if "dmesg" in str(p) or "runtime" in str(p)])
    data, how = mutate_bytes(seed.read_bytes(), r)
    markup, secrets = r.random() < 0.3, r.random() < 0.3
    if markup:
        data = m_payload(data, r)
    if secrets:
        data = m_secrets(data, r)
    kind = r.choice([None] * 6 + SPECIALS)
    logs = []
    if r.random() < 0.4:
        logs = ["--log", "in/server.log"] + (["--log", "in/sub/server.log"] if r.random() < 0.3 else [])

    def setup(d):
        k = write(in_dir(d) / "kern.log", data)
        if kind:
            special(kind, k, d)
        write(d / "in" / "server.log", data)
        write(d / "in" / "sub" / "server.log", data)
    mode = r.choice(["npd", "slurm"])
    argv = ["watch", "--mode", mode, "--node", r.choice(["n1", "../../x", PAYLOAD.replace("/", "")[:60]]),
            "--kernel-log", "in/kern.log", "--from-start", "--spool", "out/spool", *logs,
            *(["--textfile", "out/m.prom"] if r.random() < 0.3 else []), *(["--db", "out/r.duckdb"] if r.random() < 0.3 else [])]
    return Case(f"watch --mode {mode}", f"{seed.name}:{how}:{kind}", argv, {0, 1, 2}, setup, markup=markup,
                secrets=secrets, wall=60)


def gen_doctor(r: random.Random, fx: Fixtures) -> Case:
    kind = r.choice(["ok", "fifo", "devzero", "dangling", "outside", "file", "ro"])

    def setup(d):
        x = in_dir(d) / "x"
        if kind == "file":
            write(x, b"x")
        elif kind == "ro":
            x.mkdir()
            os.chmod(x, 0o500)
        elif kind != "ok":
            special(kind, x, d)
        else:
            x.mkdir()
    argv = ["doctor", "--dir", "in/x", *r.choice([[], ["-o", "out/d.json"], ["-f", "json"], ["-o", "in/x/d.txt"]])]
    return Case("doctor", kind, argv, {0, 1, 2}, setup, wall=120)


def gen_capture(r: random.Random, fx: Fixtures) -> Case:
    """A real capture with secrets in the target's environment and arguments, payloads in its
    output, hostile -o patterns; sometimes a signal to faultkit mid-run (then no line may be lost)."""
    sig = r.choice([None, None, signal.SIGINT, signal.SIGTERM, signal.SIGKILL, signal.SIGHUP])
    n = r.randint(50, 3000)
    prog = ("import sys, time, os\n"
            "side = open(sys.argv[1], 'a', buffering=1)\n"
            f"for i in range({n}):\n"
            "    sys.stdout.write(f'line {i:06d} ' + 'x' * (i % 300) + '\\n'); sys.stdout.flush()\n"
            "    side.write(f'{i}\\n')\n"
            "    if i % 97 == 0: time.sleep(0.01)\n"
            f"print({PAYLOAD!r})\n"
            "print('[adv] ' + os.environ.get('HF_TOKEN', ''))\n"
            "time.sleep(0.5)\n")
    redact = r.random() < 0.5
    o = r.choice(["out/b", "out/b-%h-%j", "out/%p"])
    envs = [x for k, v in SECRET_ENV.items() for x in ("--env", f"{k}={v}")]
    argv = ["capture", "-q", "--timeout", "40s", "--allow-running", *envs, *(["--redact-output"] if redact else []),
            "-o", o, "--", PY, "in/prog.py", "in/sent.txt", "--api-key", "AdvApiKey0011", "-pAdvMysqlPw0010"]

    def setup(d):
        write(in_dir(d) / "prog.py", prog.encode())

    def run(case, d):
        return run_capture(case, d, sig, redact)
    return Case("capture" + (f" +{signal.Signals(sig).name}" if sig else ""), f"{n} lines, o={o}, redact={redact}", argv,
                {0, 1, 124, 130, 129, 143, -9, 137}, setup, markup=True, secrets=True, run=run, wall=90)


def run_capture(case: Case, d: Path, sig, redact: bool) -> Result:
    env = env_for(d)
    env["SLURM_JOB_ID"] = "../../../adv-escape"
    out, err = open(d / "stdout", "w+b"), open(d / "stderr", "w+b")
    t0 = time.monotonic()
    p = subprocess.Popen([PY, "-m", "faultkit.cli", *case.argv], cwd=d, env=env, stdin=subprocess.DEVNULL, stdout=out,
                         stderr=err, preexec_fn=_limits, start_new_session=True)
    if sig:
        time.sleep(random.uniform(0.3, 4.0))
        try:
            os.kill(p.pid, sig)
        except ProcessLookupError:
            pass
    timed_out = False
    try:
        p.wait(timeout=case.wall)
    except subprocess.TimeoutExpired:
        timed_out = True
        _killpg(p.pid, signal.SIGKILL)
        p.wait()
    time.sleep(0.5)
    _killpg(p.pid, signal.SIGKILL)
    out.seek(0), err.seek(0)
    res = Result(p.returncode, time.monotonic() - t0, 0, out.read(), err.read(), timed_out)
    out.close(), err.close()
    bundles = [m.parent for m in (d / "out").rglob("manifest.json")] if (d / "out").is_dir() else []
    escaped = [p for p in d.rglob("manifest.json") if "out" not in p.relative_to(d).parts]
    if escaped:
        res.defects.append(("leak", f"bundle written outside -o: {escaped}"))
    if not bundles:
        if (d / "in" / "sent.txt").exists():       # the target ran: its lines had to go somewhere
            res.defects.append(("lost", "no bundle with a manifest.json under out/"))
        return res
    b = bundles[0]
    sent = (d / "in" / "sent.txt").read_text().split() if (d / "in" / "sent.txt").exists() else []
    log = (b / "server.log").read_bytes() if (b / "server.log").exists() else b""
    got = set(re.findall(rb"^line (\d{6}) ", log, re.M))
    missing = [i for i in sent if f"{int(i):06d}".encode() not in got]
    if missing and sig != signal.SIGKILL:
        res.defects.append(("lost", f"{len(missing)} of {len(sent)} lines the target wrote are not in server.log "
                                    f"(first {missing[:3]}) after {signal.Signals(sig).name if sig else 'no signal'}"))
    elif missing:
        res.defects.append(("note", f"SIGKILL: {len(missing)} of {len(sent)} lines not in server.log"))
    if not redact and b"AdvHfTok0001" in log:
        pass          # the target's own output, unredacted unless asked: allowed
    for argv in (["triage", "--no-open-cores", str(b)], ["show", str(b)]):
        r2 = spawn(argv, d)
        res.defects += classify_exit(r2, {0, 1}, f"{argv[0]} of the bundle")
        for m in SECRET_MARKS:
            if m.encode() in r2.stdout + r2.stderr and (redact or m != "AdvHfTok0001"):
                res.defects.append(("leak", f"{argv[0]} of the bundle prints secret {m}"))
    return res


GENERATORS = {"triage": gen_triage, "timeline": gen_timeline, "show": gen_show, "pack": gen_pack, "dump": gen_dump,
              "registry": gen_registry, "trials": gen_trials, "amplify": gen_amplify, "watch": gen_watch,
              "doctor": gen_doctor, "capture": gen_capture}
WEIGHTS = {"triage": 5, "timeline": 2, "show": 2, "pack": 2, "dump": 2, "registry": 3, "trials": 2, "amplify": 1,
           "watch": 2, "doctor": 1, "capture": 1}


# ---------------------------------------------------------------- judging one run

def classify_exit(res: Result, rcs: set, who: str) -> list:
    out = []
    err = res.stderr.decode("utf-8", "replace")
    text = err + res.stdout.decode("utf-8", "replace")
    if res.timed_out:
        out.append(("hang", f"{who}: no end after {res.wall:.0f} s"))
        return out
    if "Traceback (most recent call last)" in text or "faultkit: internal error" in err:
        line = next((ln for ln in err.splitlines() if "internal error" in ln or ln.startswith(("Error", "Memory"))),
                    err.strip().splitlines()[-1] if err.strip() else "")
        out.append(("internal", f"{who}: {line[:300]}"))
    elif res.rc is not None and res.rc < 0 and res.rc not in rcs:
        out.append(("internal" if res.rc != -signal.SIGXFSZ else "blowup", f"{who}: killed by signal {-res.rc}"))
    elif res.rc not in rcs:
        out.append(("internal", f"{who}: exit {res.rc} (planned {sorted(rcs)}): {err.strip()[-200:]}"))
    m = re.search(r"internal (?:parser|reader) error[^\n\"]{0,200}", text)
    if m:
        out.append(("internal", f"{who}: {m.group(0)}"))
    if "MemoryError" in text or "Cannot allocate memory" in text:
        out.append(("blowup", f"{who}: out of memory"))
    if res.rss > RSS_BYTES:
        out.append(("blowup", f"{who}: RSS {res.rss >> 20} MiB"))
    if res.wall > SLOW_S and not res.timed_out:
        out.append(("blowup", f"{who}: {res.wall:.0f} s"))
    return out


def read_all(p: Path) -> list[tuple[str, bytes]]:
    """A written file's bytes, archives and compressed files opened (what a reader would see)."""
    try:
        data = p.read_bytes()
    except OSError:
        return []
    out = [(str(p), data)]
    held = len(data)
    try:
        if tarfile.is_tarfile(p):
            with tarfile.open(p) as tf:
                for m in tf.getmembers():
                    if held > READ_ALL_MAX:
                        break                  # what one output may cost the harness's memory
                    if m.isfile():
                        f = tf.extractfile(m)
                        blob = f.read(64 << 20) if f else b""
                        out += [(f"{p}:{m.name}", x) for x in _decoded(blob)]
                        held += sum(len(x) for _, x in out[-3:])
                    out.append((f"{p}:{m.name}(name)", m.name.encode("utf-8", "surrogateescape")))
    except (tarfile.TarError, OSError, EOFError, lzma.LZMAError, ValueError):
        pass
    out += [(str(p) + "(decoded)", x) for x in _decoded(data)[1:]]
    return out


READ_ALL_MAX = 512 << 20        # bytes read_all holds for one output file, members and decodings included
HARNESS_AS = 10 << 30          # the harness's own address space: a MemoryError is a harness error, not the OOM killer


def _inflated(blob: bytes, kind: str, limit: int = 64 << 20) -> bytes:
    """At most `limit` bytes of a gzip or xz blob: decompressed whole, a bomb among the outputs (a
    packed 8 GiB core-like member) took the harness to 22 GB and the OOM killer (the pass's tally lost)."""
    d = zlib.decompressobj(16 + zlib.MAX_WBITS) if kind == "gzip" else lzma.LZMADecompressor()
    return d.decompress(blob, limit)


def _decoded(blob: bytes) -> list[bytes]:
    out = [blob]
    for kind in ("gzip", "xz"):
        try:
            out.append(_inflated(blob, kind))
        except Exception:      # noqa: BLE001 - not that format
            pass
    for enc in ("utf-16", "utf-32"):
        if blob[:2] in (b"\xff\xfe", b"\xfe\xff") or blob[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
            try:
                out.append(blob.decode(enc).encode())
            except UnicodeDecodeError:
                pass
    return out


def snapshot(d: Path) -> dict:
    out = {}
    for p in d.rglob("*"):
        try:
            st = p.lstat()
        except OSError:
            continue
        out[p] = (st.st_mtime_ns, st.st_size)
    return out


def judge(case: Case, d: Path, before: dict, res: Result) -> list:
    defects = list(res.defects)
    if case.run is None:
        defects += classify_exit(res, case.rcs, case.verb)
    elif res.timed_out:
        defects.append(("hang", f"{case.verb}: no end after {res.wall:.0f} s"))
    elif any(s in res.stderr for s in (b"Traceback (most recent", b"internal error")):
        defects += classify_exit(res, case.rcs, case.verb)
    after = snapshot(d)
    new = [p for p in after if p not in before or after[p] != before[p]]
    new = [p for p in new if p.name not in ("stdout", "stderr")]
    told = {(d / case.argv[i + 1]).resolve() for i, a in enumerate(case.argv[:-1]) if a in ("-o", "--output")}
    written = 0
    for p in new:
        rel = p.relative_to(d)
        top = rel.parts[0]
        try:
            st = p.lstat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            written += st.st_size
        if top == "in" and p not in before and not (case.verb.startswith("capture") and p.name == "sent.txt") \
                and p.resolve() not in told:
            defects.append(("leak", f"{case.verb}: wrote {rel} beside its inputs"))
        elif top == "tmp" and p.is_file():
            defects.append(("leak", f"{case.verb}: left {rel} in TMPDIR"))
        elif top not in ("in", "out", "home", "tmp", "outside"):
            defects.append(("leak", f"{case.verb}: wrote {rel} outside its -o"))
        if top in ("out", "home") and not stat.S_ISLNK(st.st_mode) and p not in before:
            mode = stat.S_IMODE(st.st_mode)
            if (stat.S_ISDIR(st.st_mode) and mode & 0o077) or (stat.S_ISREG(st.st_mode) and mode & 0o177):
                defects.append(("leak", f"{case.verb}: {rel} is {oct(mode)}"))
    if written > WRITTEN:
        defects.append(("blowup", f"{case.verb}: wrote {written >> 20} MiB"))
    if case.secrets:
        blobs = [("stdout", res.stdout), ("stderr", res.stderr)]
        for p in new:
            if p.is_file() and not p.is_symlink() and p.relative_to(d).parts[0] in ("out", "home", "tmp"):
                if p.suffix in (".duckdb", ".wal", ".parquet") or p.stat().st_size > (256 << 20):
                    continue
                blobs += read_all(p)
        seen = set()
        for where, blob in blobs:
            for m in SECRET_MARKS:
                if m.encode() in blob and (m, where.split(":")[0]) not in seen:
                    if case.verb.startswith("capture") and m == "AdvHfTok0001" and "--redact-output" not in case.argv \
                            and where.endswith(("server.log", "stdout")):
                        continue      # the target's own output is kept as it was unless --redact-output
                    seen.add((m, where.split(":")[0]))
                    defects.append(("leak", f"{case.verb}: secret {m} in {Path(where).name if '/' in where else where}"))
    if case.markup:
        if TERMINAL_BAD.search(res.stderr) or (TERMINAL_BAD.search(res.stdout) and not _json(res.stdout)):
            which = "stderr" if TERMINAL_BAD.search(res.stderr) else "stdout"
            m = TERMINAL_BAD.search(res.stderr if which == "stderr" else res.stdout)
            blob = res.stderr if which == "stderr" else res.stdout
            defects.append(("leak", f"{case.verb}: terminal escape on {which}: {blob[max(0, m.start() - 40):m.end() + 10]!r}"))
        for p in new:
            if p.is_file() and p.suffix in (".html", ".md") and p.relative_to(d).parts[0] == "out":
                text = p.read_text("utf-8", "replace")
                page = text if p.suffix == ".html" else _render_md(text)
                hit = LIVE_MARKUP.search(page) if page is not None else None
                if hit:
                    defects.append(("leak", f"{case.verb}: live markup in {p.name}: {page[max(0, hit.start() - 60):hit.end() + 20]!r}"))
    if case.after:
        defects += case.after(d, res)
    return defects


def _json(b: bytes) -> bool:
    try:
        json.loads(b)
        return True
    except ValueError:
        return False


def _render_md(text: str):
    try:
        import cmarkgfm
    except ImportError:
        return None
    return cmarkgfm.github_flavored_markdown_to_html(text)     # GitHub's own renderer, its safe default


# ---------------------------------------------------------------- the pass

def run_case(i: int, case: Case, work: Path) -> tuple[Case, Result, list, Path]:
    d = work / "runs" / f"{i:05d}-{re.sub(r'[^a-z]+', '-', case.verb)}"
    if d.exists():
        shutil.rmtree(d, ignore_errors=True)
    (d / "home").mkdir(parents=True, mode=0o700)
    (d / "tmp").mkdir(mode=0o700)
    if case.setup:
        case.setup(d)
    before = snapshot(d)
    res = case.run(case, d) if case.run else spawn(case.argv, d, case.stdin, case.wall)
    defects = judge(case, d, before, res)
    return case, res, defects, d


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--budget", type=float, default=600, help="seconds of runs (setup not counted)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work", default="/tmp/adversary-pass")
    ap.add_argument("--verb", action="append", help="only these verbs (triage, timeline, show, pack, dump, "
                    "registry, trials, amplify, watch, doctor, capture)")
    ap.add_argument("--keep", action="store_true", help="keep every run's folder, not only the defects'")
    args = ap.parse_args()
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    if (work / "runs").exists():
        shutil.rmtree(work / "runs", ignore_errors=True)
    load_seeds()
    if not TEXT_SEEDS:
        print(f"no corpus at {CORPUS}: the pass needs ../shared/corpus", file=sys.stderr)
        return 2
    verbs = set(args.verb or GENERATORS)
    # The harness itself was OOM-killed twice at 23 GB (dmesg), its tally lost: bounded, it says so.
    resource.setrlimit(resource.RLIMIT_AS, (HARNESS_AS, resource.getrlimit(resource.RLIMIT_AS)[1]))
    # SIGTERM, SIGHUP or Ctrl-C (during the setup too) end the pass after the runs in flight, with its
    # tally (the third pass died without one).
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    fx = Fixtures(work)
    t0 = time.monotonic()
    fx.make(verbs)
    print(f"setup {time.monotonic() - t0:.0f} s: {len(fx.reports)} reports, {len(fx.traces)} traces, "
          f"{len(fx.dumps)} dumps, trials {'yes' if fx.trials else 'no'}, amplify {'yes' if fx.amplify else 'no'}",
          file=sys.stderr)
    rng = random.Random(args.seed)
    names = [v for v in GENERATORS if v in verbs]
    weights = [WEIGHTS[v] for v in names]
    tally: dict[str, Counter] = defaultdict(Counter)
    defects_out = []
    lock = threading.Lock()
    start = time.monotonic()
    counter = iter(range(10 ** 9))

    def save() -> None:
        """tally.json as it stands (after every run: a pass killed even by SIGKILL leaves its figures)."""
        data = json.dumps({"seed": args.seed, "budget_s": args.budget, "elapsed_s": round(time.monotonic() - start),
                           "tally": {v: dict(c) for v, c in tally.items()}, "defects": defects_out}, indent=1)
        tmp = work / "tally.json.part"
        tmp.write_text(data)
        os.replace(tmp, work / "tally.json")

    def worker(wseed: int):
        r = random.Random(wseed)
        # No run starts that could not end (its wall bound) before the budget does.
        while not stop.is_set() and time.monotonic() - start < args.budget - min(WALL_S, args.budget / 4):
            try:
                with lock:
                    i = next(counter)
                    verb = r.choices(names, weights)[0]
                    case = GENERATORS[verb](r, fx)
                case, res, defects, d = run_case(i, case, work)
            except Exception as exc:       # noqa: BLE001 - a harness bug is said, the pass goes on
                with lock:
                    tally["harness"]["errors"] += 1
                    defects_out.append({"verb": "harness", "class": "harness", "what": repr(exc)[:300]})
                continue
            with lock:
                t = tally[case.verb]
                t["runs"] += 1
                for cls in {c for c, _ in defects if c != "note"}:
                    t[cls] += 1
                for cls, what in defects:
                    defects_out.append({"verb": case.verb, "class": cls, "what": what, "input": case.name,
                                        "argv": [str(a) for a in case.argv], "folder": str(d), "rc": res.rc,
                                        "wall_s": round(res.wall, 1)})
                if not defects and not args.keep:
                    shutil.rmtree(d, ignore_errors=True)
                print(f"[{i}] {case.verb} {case.name[:60]!r}: rc {res.rc} {res.wall:.1f}s "
                      f"{'; '.join(w for _, w in defects)[:300]}", file=sys.stderr, flush=True)
                try:
                    save()
                except OSError as exc:
                    print(f"tally.json not saved: {exc}", file=sys.stderr)

    threads = [threading.Thread(target=worker, args=(rng.randrange(1 << 30),), daemon=True) for _ in range(args.jobs)]
    try:
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(timeout=0.5)
    finally:
        with lock:
            classes = ["internal", "hang", "blowup", "leak", "lost"]
            lines = [f"{'verb':28} {'runs':>5} " + " ".join(f"{c:>8}" for c in classes)]
            for verb in sorted(tally):
                t = tally[verb]
                lines.append(f"{verb:28} {t['runs']:>5} " + " ".join(f"{t[c]:>8}" for c in classes))
            print("\n".join(lines), flush=True)
            try:
                save()
            except OSError as exc:
                print(f"tally.json not saved: {exc}", file=sys.stderr)
            print(f"defects: {len(defects_out)}; details in {work / 'tally.json'}"
                  + (" (stopped early by a signal)" if stop.is_set() else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
