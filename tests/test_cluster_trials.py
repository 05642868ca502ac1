"""`trials run --on slurm` and `--on ray` against a real single-node Slurm cluster (munged, slurmctld
and slurmd from the system's packages, started here with a slurm.conf written here) and a real local
Ray cluster: the same plan gives the same counts as the local run, each trial records where it ran,
an engine's failure (a cancelled job, a killed worker) is never counted, and the experiment resumes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import own_processes

# Under -n: this module's Slurm and Ray clusters (module fixtures) are made once, on one worker, and
# never beside another multi-process cluster (tests marked "clusters": the torch gloo jobs too).
pytestmark = pytest.mark.xdist_group("clusters")

PY = sys.executable

# One Slurm cluster and one Ray cluster at a time (each starts daemons and several workers): under
# xdist these tests run on one worker, in order, sharing the module's cluster.
pytestmark = pytest.mark.xdist_group("clusters")


def cli(*args, env=None, timeout=300):
    return subprocess.run([PY, "-m", "faultkit.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Arms whose outcome is fixed: the counts of any engine must equal the local run's, trial by trial.
# (each lives half a second, so that its environment is read in /proc however loaded the machine is)
CRASH = "python3 -c 'import os, time; time.sleep(0.5); os.kill(os.getpid(), 11)'"
CLEAN = "python3 -c 'import os, time; time.sleep(0.5); assert os.environ[\"FK_ARM\"] == \"clean\"'"
ARMS = ["--arm", f"crash={CRASH}", "--arm", f"clean={CLEAN}", "--env", "clean:FK_ARM=clean", "-n", "2",
        "--seed", "11"]


def outcomes(folder: Path) -> list[tuple[int, str, str, bool]]:
    got = []
    for p in sorted(folder.glob("trial-*/result.json")):
        r = json.loads(p.read_text())
        got.append((r["index"], r["arm"], r["outcome"], r["env"]["ok"]))
    return got


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("local") / "t"
    res = cli("trials", "run", *ARMS, "-o", out)
    assert res.returncode == 0, res.stderr
    return outcomes(out)


# ---------------------------------------------------------------- Slurm

@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    missing = [c for c in ("munged", "slurmctld", "slurmd", "sbatch", "scontrol", "scancel")
               if shutil.which(c) is None and not Path(f"/usr/sbin/{c}").exists()]
    if missing:
        pytest.skip(f"Slurm is not installed here ({', '.join(missing)} missing): apt-get install slurm-wlm munge")
    if os.geteuid() != 0:
        pytest.skip("starting slurmd needs root (it runs each task as its user)")
    d = tmp_path_factory.mktemp("slurm")
    os.chmod(d, 0o700)
    for sub in ("state", "spool", "log", "munge"):
        (d / sub).mkdir(mode=0o700)
    key = d / "munge" / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = d / "munge" / "munge.socket"
    host = socket.gethostname()
    conf = d / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=faultkit-test", f"SlurmctldHost={host}", "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", f"AuthInfo=socket={sock}", "CredType=cred/munge",
        f"SlurmctldPort={_free_port()}", f"SlurmdPort={_free_port()}", f"StateSaveLocation={d}/state",
        f"SlurmdSpoolDir={d}/spool", f"SlurmctldPidFile={d}/slurmctld.pid", f"SlurmdPidFile={d}/slurmd.pid",
        f"SlurmctldLogFile={d}/log/slurmctld.log", f"SlurmdLogFile={d}/log/slurmd.log",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core", "ReturnToService=2", "MpiDefault=none", "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none", "MinJobAge=3600", "SchedulerType=sched/backfill",
        f"NodeName={host} CPUs={os.cpu_count() or 1} State=UNKNOWN",
        "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
    env = dict(os.environ, SLURM_CONF=str(conf))
    procs = [subprocess.Popen(["munged", "-F", f"--socket={sock}", f"--key-file={key}", f"--pid-file={d}/munged.pid",
                               f"--log-file={d}/log/munged.log", f"--seed-file={d}/munge/seed", "--force"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    time.sleep(0.5)
    for daemon in ("slurmctld", "slurmd"):
        procs.append(subprocess.Popen([daemon, "-D", "-f", str(conf)], env=env, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        r = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip() in ("idle", "mixed", "allocated"):
            break
        time.sleep(0.5)
    else:
        for p in procs:
            p.kill()
        logs = "".join(p.read_text(errors="replace")[-800:] for p in (d / "log").glob("*.log"))
        pytest.fail(f"the test's Slurm cluster did not come up: {logs}")
    yield env
    for p in reversed(procs):
        p.terminate()
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()


def test_slurm_array_gives_the_local_runs_counts_and_records_where_each_trial_ran(slurm, local_run, tmp_path):
    out = tmp_path / "t"
    res = cli("trials", "run", "--on", "slurm", *ARMS, "-o", out, env=slurm)
    assert res.returncode == 0, res.stderr
    assert outcomes(out) == local_run                # same indices, arms, outcomes, environments verified
    job = json.loads((out / "engine.json").read_text())["jobs"][0]
    for p in out.glob("trial-*/result.json"):
        where = json.loads(p.read_text())["placement"]
        assert where["engine"] == "slurm" and where["job_id"] == job and where["node"] == socket.gethostname()
        assert where["task_id"] == str(json.loads(p.read_text())["index"])   # one array task per trial index
    report = json.loads(cli("trials", "report", out, "--format", "json", env=slurm).stdout)
    assert {a["arm"]: (a["crashes"], a["trials"]) for a in report["arms"]} == {"crash": (2, 2), "clean": (0, 2)}
    assert report["in_flight"] == {} and report["engine"]["engine"] == "slurm"


def _wait(pred, what, timeout=60):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")


def test_cancelled_slurm_job_counts_nothing_and_resumes(slurm, tmp_path):
    """A user's scancel mid-experiment: no trial is counted as a crash or a survival, a partial report
    says what is still out, and the same command later runs exactly the trials that have no result."""
    gate = tmp_path / "go"
    # Waits until the gate exists (at most 60 s), then exits cleanly: the same command before and after.
    arm = f"sh -c 'i=0; while [ ! -e {gate} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done'"
    args = ["--arm", f"a={arm}", "--arm", f"b={arm}", "-n", "2", "--seed", "1", "--timeout", "2m"]
    out = tmp_path / "t"
    res = cli("trials", "run", "--on", "slurm", *args, "-o", out, "--no-wait", env=slurm)
    assert res.returncode == 0, res.stderr
    job = json.loads((out / "engine.json").read_text())["jobs"][0]
    _wait(lambda: list(out.glob("trial-*/server.log")), "a trial to start")
    # a driver waiting on the submitted job, as a user's second terminal would
    driver = subprocess.Popen([PY, "-m", "faultkit.cli", "trials", "run", "--on", "slurm", *args, "-o", str(out)],
                              env=slurm, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = driver.stderr.readline()
    assert first.startswith("waiting for 4 trial(s) still queued or running on slurm"), first  # none resubmitted
    subprocess.run(["scancel", job], env=slurm, check=True)
    _, err = driver.communicate(timeout=120)
    assert driver.returncode == 0, err
    assert "CANCELLED" in err and "not counted" in err
    assert not list(out.glob("trial-*/result.json")), err     # nothing counted
    records = [json.loads(p.read_text()) for p in out.glob("trial-*/engine.json")]
    assert len(records) == 4 and {r["state"] for r in records} == {"CANCELLED"} and not any(r["rerun"] for r in records)
    gate.touch()
    res = cli("trials", "run", "--on", "slurm", *args, "-o", out, env=slurm)
    assert res.returncode == 0, res.stderr
    done = outcomes(out)
    assert [d[0] for d in done] == [0, 1, 2, 3] and {d[2] for d in done} == {"no-crash"}
    jobs = json.loads((out / "engine.json").read_text())["jobs"]
    assert len(jobs) == 2 and jobs[0] == job                # resubmitted once, the cancelled job's trials only
    # and a finished experiment is not resubmitted
    res = cli("trials", "run", "--on", "slurm", *args, "-o", out, env=slurm)
    assert res.returncode == 0 and len(json.loads((out / "engine.json").read_text())["jobs"]) == 2


def test_partial_report_while_slurm_tasks_run(slurm, tmp_path):
    gate = tmp_path / "go"
    fast = "python3 -c pass"
    slow = f"sh -c 'while [ ! -e {gate} ]; do sleep 0.1; done'"
    out = tmp_path / "t"
    res = cli("trials", "run", "--on", "slurm", "--arm", f"fast={fast}", "--arm", f"slow={slow}", "-n", "1",
              "--timeout", "2m", "-o", out, "--no-wait", env=slurm)
    assert res.returncode == 0, res.stderr
    _wait(lambda: list(out.glob("trial-*-fast/result.json")), "the fast trial to finish")
    rep = json.loads(cli("trials", "report", out, "--format", "json", env=slurm).stdout)
    assert rep["finished_trials"] == 1 and list(rep["in_flight"].values()) in (["RUNNING"], ["PENDING"])
    md = cli("trials", "report", out, env=slurm).stdout
    assert "Partial:** 1 trial(s) still queued or running on slurm" in md
    gate.touch()
    _wait(lambda: list(out.glob("trial-*-slow/result.json")), "the slow trial to finish")


# ---------------------------------------------------------------- Ray

@pytest.fixture(scope="module")
def ray_env():
    pytest.importorskip("ray", reason="Ray is not installed: pip install ray (the test extra has it)")
    return dict(os.environ, RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0")


def test_ray_tasks_give_the_local_runs_counts(ray_env, local_run, tmp_path):
    out = tmp_path / "t"
    res = cli("trials", "run", "--on", "ray", *ARMS, "-o", out, env=ray_env)
    assert res.returncode == 0, res.stderr
    assert outcomes(out) == local_run
    for p in out.glob("trial-*/result.json"):
        where = json.loads(p.read_text())["placement"]
        assert where["engine"] == "ray" and where["node"] == socket.gethostname() and where["task_id"]


def _argv0(pid: int) -> str:
    """The program of a process (the driver's command line names the gate too, as an --arm value)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def test_killed_ray_worker_is_not_counted_and_the_experiment_resumes(ray_env, tmp_path):
    gate = tmp_path / "go"
    arm = f"sh -c 'i=0; while [ ! -e {gate} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done'"
    args = ["--arm", f"a={arm}", "--arm", f"b={arm}", "-n", "1", "--seed", "2", "--timeout", "2m",
            "--engine-retries", "0"]
    out = tmp_path / "t"
    driver = subprocess.Popen([PY, "-m", "faultkit.cli", "trials", "run", "--on", "ray", *args, "-o", str(out)],
                              env=ray_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the Ray worker running a trial is the parent of that trial's server (the gate loop)
    servers = _wait(lambda: [p for p in own_processes(str(gate)) if _argv0(p) == "sh"],
                    "a trial's server under a Ray worker", timeout=120)
    with open(f"/proc/{servers[0]}/stat") as fh:
        worker = int(fh.read().rsplit(")", 1)[1].split()[1])
    os.kill(worker, signal.SIGKILL)
    time.sleep(1)
    gate.touch()                                  # the other trial finishes normally
    _, err = driver.communicate(timeout=180)
    assert driver.returncode == 0, err
    assert "worker-died" in err and "not counted" in err
    lost = [json.loads(p.read_text()) for p in out.glob("trial-*/engine.json")]
    assert len(lost) == 1 and lost[0]["state"] == "worker-died"
    assert len(outcomes(out)) == 1                 # the lost trial has no result: neither crash nor survival
    for pid in own_processes(str(gate)):         # the killed worker's server, orphaned: ends at the gate
        if _argv0(pid) == "sh":
            os.kill(pid, signal.SIGKILL)
    res = cli("trials", "run", "--on", "ray", *args, "-o", out, env=ray_env)
    assert res.returncode == 0, res.stderr
    assert [o[0] for o in outcomes(out)] == [0, 1] and {o[2] for o in outcomes(out)} == {"no-crash"}
