"""Start ``mpiexec`` from a test with a hard timeout; never leaves ranks behind."""
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import REPO, find_mpiexec

MPIEXEC = find_mpiexec()


def run_mpiexec(nprocs, argv, timeout=120, env_extra=None):
    """``(returncode, stdout, stderr, seconds)`` of ``mpiexec -n nprocs <argv>``."""
    if MPIEXEC is None:
        pytest.fail("mpiexec not found next to the interpreter: install the test extra (pip install -e .[test])")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.update(env_extra or {})
    cmd = [MPIEXEC, "-n", str(nprocs), *argv]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, cwd=REPO)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()                        # hydra tears every rank down on SIGTERM
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        pytest.fail(f"mpiexec timed out after {timeout} s\n{out}\n{err}")
    return proc.returncode, out, err, time.monotonic() - start


def asyos_run(nprocs, *args, timeout=120, env_extra=None):
    return run_mpiexec(nprocs, [sys.executable, "-m", "asyos.run", *args], timeout=timeout, env_extra=env_extra)


def virtual_nodes(count):
    """The environment that makes MPICH split the ranks into ``count`` nodes (round-robin) for
    ``Split_type(COMM_TYPE_SHARED)``: several nodes on one machine."""
    return {"MPIR_CVAR_NUM_CLIQUES": str(count)}
