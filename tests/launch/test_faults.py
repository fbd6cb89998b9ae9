"""No rank can hang the job: a rank that freezes, leaves or raises mid-run ends the job with a
non-zero code and a line naming it, on every transport; Ctrl-C gives 130 and one line.
The faults are injected by wall-clock time from outside asyos (``inject_fault.py``), during the
asynchronous phase of a run that would last several seconds more (``LONG``); a busy machine may
still be loading then, which must end the job just as well. How soon the job ends (within 10 s of
the fault on a quiet machine) is ``benchmarks/bench_faults.py``'s measurement; here the job must end
before ``run_mpiexec``'s hang guard."""
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO
from tests.launch.mpirun import MPIEXEC, run_mpiexec, virtual_nodes

INJECT = os.path.join(REPO, "tests", "launch", "inject_fault.py")
# a run that outlasts AFTER_S by far on a fast machine (nothing ends it before the fault but its passes):
# with 40 passes the whole shared-memory job took 4.4 s on a quiet 2-core machine, so the rank had finished
# and was exiting (its SIGALRM handler already reset) when the timer fired, and the job ended "killed by
# SIGALRM"; with 400 its asynchronous phase lasts about 25 s there. A job ended by its fault never runs them
LONG = ["--n-features", "3000", "--passes", "400", "--quiet"]
# what MPICH's launcher prints when it tears the other ranks down (a fault while they load, when no
# rank can end the job in its own words first)
LAUNCHER_NOTES = ("=", "YOUR APPLICATION TERMINATED", "This typically refers to a problem", "Please see the FAQ",
                  "Abort(")
AFTER_S = "4"                    # set-up takes about 2 s of it


def _mapped_anywhere() -> set:
    """The ``/dev/shm`` files some live process maps now."""
    mapped = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/maps") as fh:
                mapped.update(os.path.basename(line.split(None, 5)[5].strip().removesuffix(" (deleted)"))
                              for line in fh if " /dev/shm/" in line)
        except (OSError, IndexError):
            continue
    return mapped


@pytest.fixture(autouse=True)
def no_segment_outlives_its_job():
    """After each case: no ``/dev/shm`` file made during it that no process maps any more (a leak: MPICH's
    segments of a job that ended without unlinking them hold RAM until reboot). A file a live job of
    another test maps is not counted."""
    before = set(os.listdir("/dev/shm"))
    started = time.time()
    yield
    time.sleep(0.3)                                    # the supervisors' last unlinks
    new = {f for f in set(os.listdir("/dev/shm")) - before if f.startswith("mpich_shm")}
    fresh = set()
    for name in new:
        try:
            if os.stat(os.path.join("/dev/shm", name)).st_mtime >= started - 1:
                fresh.add(name)
        except OSError:
            continue
    left = fresh - _mapped_anywhere()
    assert not left, f"left in /dev/shm: {sorted(left)}"


@pytest.mark.parametrize("transport, mode, rank, named", [
    ("shared-memory", "freeze", 0, "rank 0"),            # the workers watch the central rank's beat
    ("messages", "freeze", 0, "rank 0"),                 # ... or its replies
    ("node-aggregated", "freeze", 0, "rank 0"),
    ("shared-memory", "exit0", 0, "rank 0 exited with status 0 before the run finished"),
    ("messages", "raise", 0, "rank 0 failed: RuntimeError: injected failure"),
    ("node-aggregated", "freeze", 3, "worker rank(s) [3]"),   # not its node's leader: the leader watches it
    ("node-aggregated", "freeze", 1, "worker rank(s) [1] sent nothing"),   # a leader: the central rank does
    ("shared-memory", "exit0", 2, "rank 2"),
])
def test_a_rank_that_fails_ends_the_job(transport, mode, rank, named):
    nodes = 2 if transport == "node-aggregated" else 1          # -n 4 on 2 nodes: {0, 2} and {1, 3}
    rc, out, err, _ = run_mpiexec(4, [sys.executable, INJECT, mode, str(rank), AFTER_S, *LONG,
                                      "--transport", transport], timeout=60, env_extra=virtual_nodes(nodes))
    injected = re.search(r"inject_fault: rank \d+ \S+ at [0-9.]+ s \(epoch ([0-9.]+)\)", err)
    assert injected, err                                        # the run was still going at AFTER_S
    assert rc != 0, err
    # the line names the rank; a slow machine may still be loading at AFTER_S, when the supervisor
    # or the rank itself names it in its own words
    assert named in err or re.search(rf"rank(\(s\))? \[?{rank}\b", err), err
    ours = [line for line in err.splitlines() if line.startswith("asyos:")]
    assert len(ours) in (1, 2) and "Traceback" not in err, err   # the rank's line (and its supervisor's)
    # nothing else but the launcher's own report of the processes it killed
    others = [line for line in err.splitlines() if line.strip() and not line.startswith(("asyos:", "inject_fault:"))]
    assert all(line.startswith(LAUNCHER_NOTES) for line in others), err


@pytest.mark.parametrize("mode, code, said", [
    ("exit0", 1, "rank 2 (pid {}) exited with status 0 before the run finished"),
    ("kill", 137, "rank 2 (pid {}) was killed by signal 9"),
])
def test_a_rank_that_goes_before_mpi_is_up_ends_the_job(mode, code, said):
    # AFTER_S 0: the fault lands as soon as the rank is forked by its supervisor, before MPI_Init, where
    # MPICH's launcher by itself would leave the other ranks waiting in MPI_Init for it
    # (under load the timer's signal may wait until the rank's first bytecode after MPI_Init, in _mpi_world,
    # or land in the forked rank while main installs its stop handlers, before MPI_Init: each seen once in
    # CI, with the right status and line)
    rc, out, err, _ = run_mpiexec(4, [sys.executable, INJECT, mode, "2", "0", *LONG], timeout=60)
    assert re.search(r"inject_fault: rank 2 \S+ at [0-9.]+ s \(epoch [0-9.]+\) in (\?|<module>|main > supervise\b|"
                     r"main > install\b|main > _main > _mpi_world\b)", err), err
    assert rc == code, err
    assert re.search(re.escape(said).replace(r"\{\}", r"\d+"), err), err
    assert [line for line in err.splitlines() if line.strip() and not line.startswith("inject_fault:")] == [
        line for line in err.splitlines() if line.startswith("asyos:")], err       # no launcher banner


def test_ctrl_c_ends_the_job_with_130_and_one_line():
    env = dict(os.environ, PYTHONPATH=REPO, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen([MPIEXEC, "-n", "4", sys.executable, "-m", "asyos.run", *LONG], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(4)
        proc.send_signal(signal.SIGINT)                         # as a terminal's Ctrl-C reaches mpiexec
        out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert err.strip() == "asyos: stopped by SIGINT; ending the job", err        # no --output: nothing to save


@pytest.mark.parametrize("sig, code, after", [
    (signal.SIGINT, 130, 0.8), (signal.SIGTERM, 143, 0.8),
    pytest.param(signal.SIGINT, 130, 1.5, marks=pytest.mark.xfail(
        strict=False, reason="seen once under CI load: right status, and besides the line a rank printed the "
                             "RunInterrupted its handler raised inside an import run from C code (a traceback "
                             "whose only frame is importlib's _find_and_load); not reproduced in 6 quiet runs"))])
def test_a_stop_while_the_ranks_start_ends_the_job_with_its_status_and_one_line(sig, code, after):
    """Ctrl-C or SIGTERM while the ranks import, parse or join MPI (they load for seconds after): the job ends
    with the stop's status and one line, whichever phase each rank was in (a rank blocked in MPI_Init runs no
    handler; one noted before its handlers were installed stops at its first step)."""
    env = dict(os.environ, PYTHONPATH=REPO, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen([MPIEXEC, "-n", "4", sys.executable, "-m", "asyos.run", *LONG], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        time.sleep(after)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    name = signal.Signals(sig).name
    assert proc.returncode == code, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and re.fullmatch(rf"asyos: stopped by {name}(; ending the job| while the job was "
                                            rf"starting; nothing to save)", lines[0]), err


def job_segments(launcher: int) -> set:
    """The files under ``/dev/shm`` that ``launcher`` (an ``mpiexec``'s pid) and the processes it
    started map now (hydra's proxy starts every rank in a session of its own: the parent links, not
    the session, say which job a rank belongs to)."""
    parents = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                parents[int(pid)] = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):               # gone meanwhile
            continue
    job, grown = {launcher}, True
    while grown:
        more = {pid for pid, parent in parents.items() if parent in job} - job
        job |= more
        grown = bool(more)
    mapped = set()
    for pid in job:
        try:
            with open(f"/proc/{pid}/maps") as fh:
                mapped.update(os.path.basename(line.split(None, 5)[5].strip()) for line in fh if " /dev/shm/" in line)
        except OSError:                                          # gone, or not ours to read
            continue
    return mapped


def test_an_aborted_job_leaves_no_shared_memory_segment():
    """The segments this job's ranks mapped while it ran (watched from outside, so that a job of
    another test running meanwhile, which may leave its own behind, is not counted) are gone once
    it has ended."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([MPIEXEC, "-n", "4", sys.executable, INJECT, "raise", "1", AFTER_S, *LONG], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    ours = set()
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            ours |= job_segments(proc.pid)
            time.sleep(0.05)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode != 0 and "injected failure" in err, err
    ours = {f for f in ours if f.startswith("mpich_shm")}
    assert ours, "the job's ranks were never seen mapping a shared-memory segment"
    left = ours & set(os.listdir("/dev/shm"))
    assert not left, left


def _children(pid: int) -> list:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as fh:
            return [int(c) for c in fh.read().split()]
    except OSError:
        return []


def _rank_of(pid: int):
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            for item in fh.read().split(b"\0"):
                if item.startswith(b"PMI_RANK="):
                    return int(item[len(b"PMI_RANK="):])
    except (OSError, ValueError):
        return None
    return None


@pytest.mark.parametrize("proxies", [1, 2])
def test_a_lost_launcher_ends_the_job_within_seconds_and_leaves_a_note(tmp_path, proxies):
    """SIGKILL of hydra's proxy (what a node crash looks like), here the proxy holding rank 2 (with two
    proxies on this machine: ``-launcher fork`` and two names of it): every rank it started is killed by
    its supervisor within a poll, mpiexec ends soon with its own status (255) and lines (the proxy that
    would carry ours to the terminal is gone), and the rank's note is in the run's directory. Before, the
    orphaned ranks ran on: the job ended 20-129 s later."""
    hosts = ["-launcher", "fork", "-hosts", "localhost,127.0.0.1", "-ppn", "2"] if proxies == 2 else []
    env = dict(os.environ, PYTHONPATH=REPO, OPENBLAS_NUM_THREADS="1")
    out = tmp_path / "run"
    proc = subprocess.Popen([MPIEXEC, *hosts, "-n", "3", sys.executable, "-m", "asyos.run", *LONG, "--output",
                             str(out)], cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        target, deadline = None, time.monotonic() + 60
        while target is None and time.monotonic() < deadline and proc.poll() is None:
            for proxy in _children(proc.pid):
                # supervisors are the proxy's children, the ranks theirs; either carries PMI_RANK
                if any(_rank_of(c) == 2 for c in _children(proxy)):
                    target = proxy
            time.sleep(0.1)
        assert target is not None, "rank 2 never started"
        time.sleep(2.0)                                     # the ranks load and start
        killed_at = time.monotonic()
        os.kill(target, signal.SIGKILL)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - killed_at
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0, (proc.returncode, took, err)   # communicate's timeout is the hang guard; how
    # soon (0.3-0.5 s on a quiet machine) is measured outside the suite
    notes = [p.read_text() for p in out.glob("asyos-rank2-traceback-*.txt")]
    assert len(notes) == 1 and "rank 2" in notes[0] and "lost its launcher" in notes[0], notes
    time.sleep(0.5)
    assert not [pid for pid in filter(str.isdigit, os.listdir("/proc")) if _mentions(pid, str(out))]


def _mentions(pid: str, text: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return text.encode() in fh.read()
    except OSError:
        return False
