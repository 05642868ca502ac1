"""What the adversarial pass of issue 36 (scripts/adversarial_pass.py, docs/adversarial-pass.md)
found, each through the real CLI: a test per defect that failed before its fix."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAULT = ("[  100.000000] amdgpu 0000:03:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:0 vmid:1 "
         "pasid:32769, for process python3 pid 4242 thread python3 pid 4242)\n"
         "[  100.000001] amdgpu 0000:03:00.0: amdgpu:   in page starting at address 0x00007f0000001000 from client 27\n")


def cli(*args, env=None, cwd=None, timeout=120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}, cwd=cwd)


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_folders_made_above_an_output_are_0700(tmp_path):
    """`--spool new/deep/spool` and `capture -o new/deep/b` made `new` and `new/deep` 0755
    (mkdir(parents=True) gives the upper folders the umask's mode); only the last was 0700."""
    log = tmp_path / "kern.log"
    log.write_text(FAULT)
    res = cli("watch", "--mode", "npd", "--node", "n1", "--kernel-log", log, "--from-start",
              "--spool", tmp_path / "w" / "deep" / "spool", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.returncode in (0, 1), res.stderr
    for d in (tmp_path / "w", tmp_path / "w" / "deep", tmp_path / "w" / "deep" / "spool"):
        assert mode(d) == 0o700, (d, oct(mode(d)))
    res = cli("capture", "-q", "--timeout", "30s", "-o", tmp_path / "c" / "deep" / "b", "--", "true",
              env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    for d in (tmp_path / "c", tmp_path / "c" / "deep", tmp_path / "c" / "deep" / "b"):
        assert mode(d) == 0o700, (d, oct(mode(d)))
    assert json.loads((tmp_path / "c" / "deep" / "b" / "manifest.json").read_text())["state"] == "finished"


SECRETS = ["HF_TOKEN=hf_plantedWatchToken0001abcdef", "curl -u admin:planted-curl-pw-0002 http://x",
           "postgres://svc:planted-url-pw-0003@db/app", "Authorization: Bearer planted-bearer-0004abcdef",
           "mysql -uroot -pplanted-mysql-pw-0005", "https://b.example/f?sv=1&sig=planted-sas-sig-0006"]
MARKS = ["plantedWatchToken0001", "planted-curl-pw-0002", "planted-url-pw-0003", "planted-bearer-0004",
         "planted-mysql-pw-0005", "planted-sas-sig-0006"]


def every_byte(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_watch_incidents_hold_no_secret_of_the_logs_lines(tmp_path):
    """The spool's incident folders kept the kernel log's and server log's lines as read: secrets
    next to a fault line reached kernel.log, server.log.log and the incident's manifest ('first')."""
    kern = tmp_path / "kern.log"
    kern.write_text("[   99.000000] " + SECRETS[0] + "\n" + FAULT.replace("for process python3",
                                                                          "for process " + SECRETS[4].split()[-1])
                    + "".join(f"[  100.5] {s}\n" for s in SECRETS))
    server = tmp_path / "server.log"
    server.write_text("".join(s + "\n" for s in SECRETS) + "Memory access fault by GPU node-1 (Agent handle: 0x1) on "
                      "address 0x7f0000001000. Reason: Page not present or supervisor privilege.\n" + SECRETS[1] + "\n")
    spool = tmp_path / "spool"
    res = cli("watch", "--mode", "npd", "--node", "n1", "--kernel-log", kern, "--log", server, "--from-start",
              "--spool", spool, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.returncode == 1, res.stderr                  # npd: a problem found
    incidents = [p for p in spool.iterdir() if p.is_dir()]
    assert incidents and (incidents[0] / "kernel.log").exists() and (incidents[0] / "server.log.log").exists()
    assert b"no-retry page fault" in (incidents[0] / "kernel.log").read_bytes()    # the evidence kept
    written = every_byte(spool) + res.stdout.encode() + res.stderr.encode()
    assert not [m for m in MARKS if m.encode() in written]


def test_registry_holds_and_prints_no_secret_of_a_hostile_report(tmp_path):
    """A report from elsewhere (registry add takes any faultkit.triage/1 JSON) with secrets in its
    kernel name and fault fields: `add -v` printed them and the registry kept them for `top`/`show`."""
    log = tmp_path / "kern.log"
    log.write_text(FAULT)
    rep = tmp_path / "r.json"
    res = cli("triage", "--no-open-cores", log, "-o", rep, env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert rep.exists(), res.stderr
    doc = json.loads(rep.read_text())
    secret = " ".join(SECRETS)
    for f in doc["faults"]:
        f["kind"] = f["kind"] + " " + secret
        f["engine"] = secret
    doc["verdict"].update(level="certain", kernel="gemm_kernel " + secret)
    for inc in doc.get("incidents") or []:
        inc["verdict"].update(level="certain", kernel="gemm_kernel " + secret)
    rep.write_text(json.dumps(doc))
    db = tmp_path / "r.duckdb"
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    add = cli("registry", "add", "-v", "--db", db, "--node", "n1", rep, env=env)
    assert add.returncode == 0, add.stderr
    top = cli("registry", "top", "--db", db, "-f", "json", env=env)
    sig = json.loads(top.stdout)["signatures"][0]["signature"]
    assert "gemm_kernel" in top.stdout                       # the kernel is kept, its neighbours hidden
    show = cli("registry", "show", "--db", db, sig, env=env)
    printed = add.stdout + add.stderr + top.stdout + show.stdout + show.stderr
    assert not [m for m in MARKS if m in printed], printed


def test_trials_statistics_are_bounded(tmp_path):
    """Exact statistics cost the square of the trials per arm: `trials plan` of close rates tried every
    n up to 400 (minutes) to say 'not within 400'; `--counts` of a million trials asked Boschloo's test
    for 5 TiB (an internal MemoryError); `-n 100000` and a 5,000-digit count were internal errors too."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    plan = cli("trials", "plan", "--rate", "a=0.40", "--rate", "b=0.39", "-f", "json", env=env, timeout=90)
    assert plan.returncode == 0, plan.stderr
    assert json.loads(plan.stdout)["trials_per_arm"] is None
    plan = cli("trials", "plan", "--rate", "base=0.4", "--rate", "fix=0", "-f", "json", env=env)
    assert json.loads(plan.stdout)["trials_per_arm"] == 15          # the README's figure, still the smallest n
    big = cli("trials", "report", "--counts", "base=3/1000000", "--counts", "fix=500000/1000000", env=env, timeout=90)
    assert big.returncode == 0, big.stderr
    assert "Boschloo p = not computed past 150 trials per arm (Fisher's test stands)." in big.stdout
    for args in (["trials", "plan", "--rate", "a=0.4", "--rate", "b=0", "-n", "100000"],
                 ["trials", "report", "--counts", "base=3/" + "9" * 5000, "--counts", "fix=1/2"]):
        res = cli(*args, env=env, timeout=90)
        assert res.returncode == 2 and "internal error" not in res.stderr, res.stderr[-300:]


def test_pack_leaves_out_a_link_that_loops(tmp_path):
    """A bundle's file replaced by a link to itself: resolve() raised RuntimeError (an internal error)."""
    b = tmp_path / "b"
    b.mkdir()
    (b / "manifest.json").write_text(json.dumps({"schema": "faultkit.bundle/1", "command": "server", "state": "finished"}))
    (b / "server.log").write_text("hello\n")
    (b / "kernel.log").symlink_to("kernel.log")
    res = cli("pack", b, "-o", tmp_path / "p.tar.gz", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    import tarfile
    with tarfile.open(tmp_path / "p.tar.gz") as tf:
        names = [m.name for m in tf.getmembers()]
        manifest = json.loads(tf.extractfile(next(m for m in tf.getmembers() if m.name.endswith("pack-manifest.json"))).read())
    assert any(n.endswith("server.log") for n in names) and not any(n.endswith("kernel.log") for n in names)
    assert {"name": "kernel.log", "bytes": 0, "why": "not a regular file (a link, pipe or device)"} in manifest["left_out"]


def test_dump_read_takes_a_thread_id_of_5000_digits(tmp_path):
    """py-spy's text with a thread id of 5,000 digits: int() raised ValueError (Python's 4,300-digit
    limit), an internal error; the number is now read through limits.small_int (no id) and the rest kept."""
    dump = ("Process 4242: python3 server.py\nPython v3.11.7 (/usr/bin/python3.11)\n\n"
            "Thread {tid} (idle): \"MainThread\"\n    wait (threading.py:320)\n    serve (server.py:{line})\n")
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(dump.format(tid="9" * 5000, line="9" * 5000))
    b.write_text(dump.format(tid="4242", line="17"))
    res = cli("dump", "--read", a, "--read", b, "-f", "json", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    assert "internal error" not in res.stderr and "serve" in res.stdout


def test_amplify_report_changes_nothing_in_the_folder(tmp_path):
    """`amplify report` (a read) renamed a cut result.json to result.json.unreadable in the experiment's
    folder, as a resumed `amplify run` does before running the trial again."""
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    server = ROOT / "scripts" / "uaf_server.py"
    out = tmp_path / "amp"
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = cli("amplify", "run", "-q", "--arm", "caching-off", "--no-agent", "--port", port, "-n", "1", "--timeout", "60s",
              "--client", f"{sys.executable} {server} --client --port {port} --requests 1", "-o", out, "--",
              sys.executable, server, "--port", port, "--device", "cpu", "--seed", "11", env=env, timeout=240)
    assert run.returncode == 0, run.stderr
    result = out / "trial-001-caching-off" / "result.json"
    cut = result.read_text()[:40]
    result.write_text(cut)                                      # cut, as a full disk leaves it
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    rep = cli("amplify", "report", out, "-f", "json", env=env)
    assert rep.returncode == 0, rep.stderr
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    assert result.read_text() == cut
    (out / "rounds.json").write_text("[" * 100_000 + "]" * 100_000)      # nested past the parser's recursion
    rep = cli("amplify", "report", out, env=env)
    assert rep.returncode == 0 and "internal error" not in rep.stderr, rep.stderr[-300:]


def test_dump_read_takes_a_gdb_frame_level_of_5000_digits(tmp_path):
    """gdb's `thread apply all bt` with a frame number of 5,000 digits: the debugger parser's int()
    raised ValueError (an internal error of `dump --read`)."""
    bt = ("Thread 1 (Thread 0x7f0000000740 (LWP 4242) \"python3\"):\n#{n}  0x00007f0000001000 in "
          "cudaStreamSynchronize () from /usr/lib/libcudart.so\n#1  0x00007f0000002000 in main () at x.c:3\n")
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text(bt.format(n="9" * 5000).replace("x.c:3", "x.c:" + "9" * 5000))
    b.write_text(bt.format(n="0"))
    res = cli("dump", "--read", a, "--read", b, "-f", "json", env={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert res.returncode == 0, res.stderr
    assert "internal error" not in res.stderr and "cudaStreamSynchronize" in res.stdout


def test_triage_reports_quote_no_secret_of_the_evidence(tmp_path):
    """A kernel log's unstamped line is read as the rest of the Xid message above it; the report
    quoted that message, a secret in it included, in Markdown, HTML and JSON."""
    log = tmp_path / "kernel.log"
    log.write_text("[  280.041915] NVRM: Xid (PCI:0000:00:06): 13, Graphics SM Warp Exception on (GPC 3, TPC 4, "
                   "SM 0): MMU Fault\nOPENAI_KEY=sk-plantedOpenAiKey0007abcdef HF_TOKEN=hf_plantedWatchToken0001abcdef\n")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    for fmt in ("md", "html", "json"):
        res = cli("triage", "--no-open-cores", log, "-f", fmt, env=env)
        assert res.returncode == 0, res.stderr
        assert "Xid" in res.stdout and "13" in res.stdout
        assert "plantedOpenAiKey0007" not in res.stdout and "plantedWatchToken0001" not in res.stdout, fmt
    assert json.loads(cli("triage", "--no-open-cores", log, "-f", "json", env=env).stdout)["faults"]


def test_timelines_carry_no_secret_of_the_evidence(tmp_path):
    """The timeline's fault, kernel-event and verdict points quoted the evidence (the verdict's why,
    the Xid message with the unstamped line read as its rest) with its secrets, in both formats."""
    log = tmp_path / "kernel.log"
    log.write_text("[  280.041915] NVRM: Xid (PCI:0000:00:06): 13, Graphics SM Warp Exception on (GPC 3, TPC 4, "
                   "SM 0): MMU Fault\nOPENAI_KEY=sk-plantedOpenAiKey0007abcdef HF_TOKEN=hf_plantedWatchToken0001abcdef\n")
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    for name in ("t.json", "t.pftrace"):
        res = cli("timeline", log, "-o", tmp_path / name, env=env)
        assert res.returncode == 0, res.stderr
        data = _inflated((tmp_path / name).read_bytes())
        assert b"MMU Fault" in data, name
        assert b"plantedOpenAiKey0007" not in data and b"plantedWatchToken0001" not in data, name
        assert cli("timeline", "--check", tmp_path / name, env=env).returncode == 0


def _inflated(data: bytes) -> bytes:
    """A trace's bytes with its compressed packet batches inflated (found by their zlib headers)."""
    import re
    import zlib
    out = [data]
    for m in re.finditer(rb"x[\x01\x5e\x9c\xda]", data):
        try:
            out.append(zlib.decompressobj().decompress(data[m.start():]))
        except zlib.error:
            pass
    return b"".join(out)
