"""Runs ``tests/mpi`` inside an MPI job of 3 ranks (pytest-mpi), from the plain test run."""
import re
import sys

from tests.launch.mpirun import run_mpiexec


def test_in_mpi_suite_passes():
    # without the plugins the ranks do not use (hypothesis's alone takes 1.5 s to import)
    rc, out, err, _ = run_mpiexec(3, [sys.executable, "-m", "mpi4py", "-m", "pytest", "--with-mpi", "-q",
                                      "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:xdist",
                                      "--timeout=120", "--timeout-method=thread", "tests/mpi"], timeout=300)
    assert rc == 0, out + err
    passed = [int(n) for n in re.findall(r"(\d+) passed", out)]
    assert len(passed) == 3 and min(passed) >= 9, out       # every rank ran the suite
    assert "skipped" not in out and "failed" not in out, out
