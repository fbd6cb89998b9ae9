"""The supervisor of a rank (``asyos.distributed.supervisor``) without a launcher: a process that
runs ``supervise()`` with a stand-in PMI descriptor, and the child it forks, which goes on with the script.

A stop signal the supervisor forwards must end the rank: taken up by the rank's handler (the rank
saves and stops in its own time), or, when the rank cannot run its handler (blocked inside a C
call: an MPI collective waiting for a rank that died while the job was setting up), by the
supervisor after ``STOP_GRACE`` seconds, with a line and the stop's exit code."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import REPO

SCRIPT = textwrap.dedent("""
    import os, signal, sys, time
    from asyos.distributed import supervisor
    mode = sys.argv[1]
    supervisor.STOP_GRACE = float(sys.argv[2])
    status = supervisor.supervise()                        # None in the child it forks
    if status is not None:                                 # the supervisor
        sys.exit(status)
    if mode == "deaf":                                     # SIGTERM stays pending: no handler can run
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        print("child ready", flush=True)
        while True:
            time.sleep(1)
    if mode == "slow-stop":                                # takes the signal up, then needs a while to stop
        from asyos.records.checkpoint import StopSignals
        StopSignals.install(supervisor.note_stopping)
        StopSignals.polling = 1                            # as inside a loop: the request is recorded
        print("child ready", flush=True)
        while StopSignals.requested is None:
            time.sleep(0.05)
        time.sleep(float(sys.argv[3]))                     # saving
        import atexit
        atexit.register(supervisor.mark_finished)          # as asyos.run.main: the run ended through main
        supervisor.run_ended()
        sys.exit(128 + StopSignals.requested)
""")


def start(mode, grace, *extra):
    read_end, write_end = os.pipe()                        # a stand-in for hydra's PMI socket
    env = dict(os.environ, PMI_FD=str(read_end), PMI_RANK="3", PMI_SIZE="4",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, mode, str(grace), *extra], env=env, pass_fds=(read_end,),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    os.close(read_end)
    os.close(write_end)
    assert proc.stdout.readline().strip() == "child ready"
    return proc


def finish(proc, timeout=60):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        pytest.fail("the supervisor did not end")
    return proc.returncode, err


def test_a_rank_that_cannot_take_up_sigterm_is_killed_after_the_grace_with_the_stops_exit_code():
    proc = start("deaf", 1.0)
    proc.send_signal(signal.SIGTERM)                       # as hydra forwards a queue's or timeout's SIGTERM
    started = time.monotonic()
    rc, err = finish(proc)
    assert rc == 128 + signal.SIGTERM, err
    assert time.monotonic() - started >= 1.0               # not before the grace
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyos: rank 3 (pid "), err
    assert "did not take up SIGTERM within 1 s" in lines[0] and lines[0].endswith("ending the job"), err


def test_a_rank_that_took_up_the_stop_is_given_the_time_it_needs():
    proc = start("slow-stop", 0.5, "2.0")                  # stopping takes 4x the grace
    proc.send_signal(signal.SIGTERM)
    rc, err = finish(proc)
    assert rc == 128 + signal.SIGTERM and "asyos:" not in err, err
