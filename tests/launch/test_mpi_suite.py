"""Runs ``tests/mpi`` inside an MPI job of 3 ranks (pytest-mpi), from the plain test run."""
import re
import sys

from tests.launch.mpirun import run_mpiexec


def test_in_mpi_suite_passes():
    rc, out, err, _ = run_mpiexec(3, [sys.executable, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-q",
                                      "-p", "no:cacheprovider", "--timeout=120", "--timeout-method=thread",
                                      "tests/mpi"], timeout=300)
    assert rc == 0, out + err
    passed = [int(n) for n in re.findall(r"(\d+) passed", out)]
    assert len(passed) == 3 and min(passed) >= 9, out       # every rank ran the suite
    assert "skipped" not in out and "failed" not in out, out
