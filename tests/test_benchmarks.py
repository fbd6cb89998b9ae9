"""Every benchmark runs in its --smoke profile (its quick one where it has no smaller), so none can rot
unnoticed: by default all but those that start several ``mpiexec`` jobs, which the nightly run
(``-m "matrix or not matrix"``) adds; by default every one of those is imported, and ``bench_speedup``
runs as their representative."""
import importlib.util
import json
import os
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.inprocess import run_script as run_inside

BENCHMARKS = sorted(f for f in os.listdir(os.path.join(REPO, "benchmarks")) if f.startswith("bench_"))

# Their smoke runs start two to eight mpiexec jobs each: 15-36 s of CPU apiece, 215 s together, measured
# on this project's 2-core machine, a quarter of the suite's. What they drive under mpiexec is tested
# in tests/launch and tests/mpi; bench_speedup.py, which also starts mpiexec jobs, stays as the
# representative; the nightly run takes them all.
NIGHTLY = {"bench_auto_trace.py", "bench_central.py", "bench_faults.py", "bench_global_budget_mpi.py",
           "bench_mpi.py", "bench_node_aggregated.py", "bench_scale.py", "bench_simulator_mpi.py"}


def test_every_benchmark_imports_and_has_a_main():
    """What the default run does not start still imports (every module it needs, every name it takes
    from asyos) and has its entry point."""
    assert NIGHTLY < set(BENCHMARKS)
    for script in BENCHMARKS:
        spec = importlib.util.spec_from_file_location(f"_benchmark_{script[:-3]}",
                                                      os.path.join(REPO, "benchmarks", script))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        assert callable(getattr(module, "main", None)), script


# Smoke runs that tune or time sample-stream learners: with ASYOS_KERNELS=numpy (the suite run
# against the interpreted kernels) their row loops run as plain Python, some hundred times slower:
# the smoke runs of bench_ecml.py and bench_stream_throughput.py outlasted pytest's 300 s guard, and
# bench_thesis_sfsa.py's did with the rest of the suite beside it (measured). What they compute is
# checked against the compiled loops in tests/test_sample_stream.py.
PLAIN_PYTHON_TOO_SLOW = {"bench_ecml.py", "bench_stream_throughput.py", "bench_thesis_sfsa.py"}
AS_PLAIN_PYTHON = pytest.mark.skipif(
    os.environ.get("ASYOS_KERNELS") == "numpy",
    reason="ASYOS_KERNELS=numpy: sample-stream learners as plain Python outlast the guard")


def _marks(script):
    return ([pytest.mark.matrix] if script in NIGHTLY else []) + \
        ([AS_PLAIN_PYTHON] if script in PLAIN_PYTHON_TOO_SLOW else [])


GUARD_S = 240       # below pytest's 300 s: pytest-timeout ends the test's worker, not the processes it started


def run_script(argv, cwd):
    """``subprocess.run`` of a benchmark in a session of its own: past ``GUARD_S`` the script and every
    process it started (mpiexec jobs included) are killed and the test fails saying so (pytest's own
    timeout, killing only the xdist worker, left a benchmark running 10 minutes later)."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=GUARD_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(argv[1:3])} did not end within {GUARD_S} s\n{out[-2000:]}\n{err[-2000:]}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _check_written(proc, output, script):
    assert proc.returncode == 0, proc.stdout + proc.stderr
    name = script[len("bench_"):-len(".py")]
    summary = json.loads((output / f"{name}.json").read_text())
    assert summary["units"] and summary["environment"]["cpu_count"]
    lines = (output / f"{name}.jsonl").read_text().splitlines()
    assert len(lines) == len(summary["units"]) + 1          # the start record, then one line per unit
    assert "-" * 3 in proc.stdout                           # a table was printed


# Run as processes of their own: those that start mpiexec jobs (the nightly ones and bench_speedup.py, whose
# calibration also forks a pool of processes) and one more script, so that running as a script stays
# tested. The others run inside the test process (``tests/inprocess.py``): a smoke run's own work is a second
# or two, its imports (scikit-learn, scipy, numba, matplotlib) 4-6 s, paid once by the test process instead.
AS_PROCESS = NIGHTLY | {"bench_speedup.py", "bench_ingest.py"}


def run_smoke(script, output, *extra):
    """``python benchmarks/SCRIPT --smoke --output OUTPUT *extra`` (as a process for ``AS_PROCESS``);
    the completed process (or what it would have been)."""
    path = os.path.join(REPO, "benchmarks", script)
    args = ["--smoke", "--output", str(output), *map(str, extra)]
    if script in AS_PROCESS:
        return run_script([sys.executable, path, *args], cwd=str(output.parent))
    status, out, err = run_inside(path, *args, cwd=str(output.parent))
    return subprocess.CompletedProcess([path, *args], status, out, err)


# A smoke run inside the test process that outlasts GUARD_S fails its test (SIGALRM raises in the test) instead
# of meeting pytest's 300 s thread timeout, which ends the whole xdist worker; a process's own guard (run_script)
# fires first.
INSIDE_GUARD = pytest.mark.timeout(GUARD_S + 30, method="signal")


# bench_real_selection.py's smoke run is the first half of the test of its --summarise, below
@INSIDE_GUARD
@pytest.mark.parametrize("script", [pytest.param(s, marks=_marks(s)) for s in BENCHMARKS
                                    if s != "bench_real_selection.py"])
def test_quick_profile_writes_its_results(script, tmp_path):
    output = tmp_path / "out"
    proc = run_smoke(script, output)
    _check_written(proc, output, script)


@INSIDE_GUARD
def test_the_real_data_benchmark_rebuilds_its_report_from_its_logs(tmp_path):
    """The smoke run writes its results, and ``--summarise`` merges JSON-lines logs (a later unit
    replaces the same set, k, method and fold) into the same tables and summary a run prints."""
    first = tmp_path / "first"
    proc = run_smoke("bench_real_selection.py", first)
    _check_written(proc, first, "bench_real_selection.py")
    merged = tmp_path / "merged"
    proc = run_smoke("bench_real_selection.py", merged, "--summarise", first / "real_selection.jsonl",
                     first / "real_selection.jsonl")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    original = json.loads((first / "real_selection.json").read_text())["summary"]["datasets"]
    rebuilt = json.loads((merged / "real_selection.json").read_text())
    assert len(rebuilt["units"]) == len(json.loads((first / "real_selection.json").read_text())["units"])
    for name, entry in original.items():
        for k, result in entry["results"].items():
            for method, cell in result["methods"].items():
                assert rebuilt["summary"]["datasets"][name]["results"][k]["methods"][method]["mean"] == cell["mean"]
    assert "gap = method - best peer" in proc.stdout
