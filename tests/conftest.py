"""Shared fixtures. ``tests/mpi`` runs inside an MPI job (``--with-mpi``); the plain run starts
that job itself from ``tests/launch/test_mpi_suite.py``."""
import os
import shutil
import sys

# One BLAS thread per process, set before numpy loads here and inherited by pytest-xdist's workers and
# every process a test starts: the suite runs several processes per core, and OpenBLAS threads that
# wait by spinning only take the cores from the others. A value set by the user stays.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# no run.png from the runs of tests that are not about it (1-4 s each: asyos.runs.report.pictures_wanted);
# tests/test_report.py, tests/test_readme.py and the MPI launch test of the parallel fields turn it on
os.environ.setdefault("ASYOS_PICTURE", "0")


WARMED = "ASYOS_TESTS_WARMED"      # set once the bytecode and kernels are compiled; inherited by every process


def pytest_configure(config):
    # once per test run: not in pytest-xdist's workers, nor in a pytest started by a test (the 3 ranks of
    # tests/launch/test_mpi_suite.py each compiled them again, 3-4 s of CPU apiece)
    if not hasattr(config, "workerinput") and not os.environ.get(WARMED):
        own_temporary_directory(config)
        compile_bytecode()
        compile_kernels()
        os.environ[WARMED] = "1"


def own_temporary_directory(config):
    """Every process of the run (the workers, the MPI jobs and CLI runs the tests start) takes its temporary
    files in one directory of the run's, removed at its end: the runs that fail on purpose without
    ``--output`` write their rank's traceback to the temporary directory, as a user's run would, and left
    ~120 files in /tmp per run of the suite."""
    import tempfile
    path = tempfile.mkdtemp(prefix="asyos-tests-")
    os.environ["TMPDIR"] = path
    tempfile.tempdir = None                     # gettempdir() reads TMPDIR again
    config.add_cleanup(lambda: shutil.rmtree(path, ignore_errors=True))


def compile_bytecode():
    """Write the package's bytecode (``__pycache__``) once, before any test starts a process. Where
    Python does not write it as it imports (``PYTHONDONTWRITEBYTECODE``, set on this project's CI
    machines) every process the suite starts (a few hundred: MPI ranks, CLI runs, benchmarks) compiled
    the package's modules from source: 0.17-0.22 s of the 0.41-0.48 s that an MPI rank's imports take
    (``python -X importtime``, measured here); bytecode that exists is read whatever that setting says."""
    import compileall
    compileall.compile_dir(os.path.join(REPO, "asyos"), quiet=1, workers=0)


# numba's kernels, compiled in two processes at once (the sample-stream loops take as long as the rest)
WARM_UPS = (
    "from asyos.learners.substitution.kernels import warm_up; warm_up('numba', visits=True)\n"
    "from asyos.data.libsvm import warm_up; warm_up()\n"
    "import numpy as np; from asyos.learners.averages.running_averages import OLasso\n"
    "OLasso(budget=1).fit(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), np.array([1.0, 0.5, 2.0]))\n",
    "from asyos.learners.stream.stream_learners import warm_up; warm_up()\n",
)


def compile_kernels():
    """Compile numba's kernels (the OS step, the libsvm parser, the running averages' coordinate
    descent, the sample-stream loops and their one-row preparation) once, before any test starts a
    process. From a clean clone every process that needs one compiles it until one of them has
    written numba's cache: the OS step takes 9 s, the sample-stream loops 27 s (measured here), and a
    13-rank job compiled the OS step 13 times at once. The suite from a clean clone took 669 s when the
    libsvm parser, the coordinate descent and the one-row preparation were left to the tests (which
    ranks and CLI runs compiled at once), 562 s with every kernel in the cache."""
    if os.environ.get("ASYOS_KERNELS") == "numpy":
        return
    import subprocess
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""),
               PYTHONWARNINGS="ignore")           # the learners fit two rows: their quality warnings
    procs = [subprocess.Popen([sys.executable, "-c", code], cwd=REPO, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for code in WARM_UPS]
    for proc, code in zip(procs, WARM_UPS):
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"compiling the kernels failed ({code.strip()}):\n{out}{err}")


# Seconds a test of these files takes, about (measured with --durations on this project's 2-core
# machine, the suite on both cores): the tests that start processes (the commands of README and docs/, benchmark
# scripts, mpiexec jobs) and the few long in-process ones, by the first prefix of the node id that
# matches (a file before its directory). Any other test counts LIGHT.
COST = {"tests/test_readme.py::test_every_readme_command_runs_as_written": 220.0,
        "tests/launch/test_resume_mpi.py": 25.0, "tests/launch/test_mpi_suite.py": 33.0,
        "tests/launch/test_progress_mpi.py": 23.0, "tests/launch/": 8.0,
        "tests/test_benchmarks.py::test_quick_profile_writes_its_results[bench_ingest.py]": 45.0,
        "tests/test_benchmarks.py::test_quick_profile_writes_its_results[bench_speedup.py]": 25.0,
        "tests/test_benchmarks.py": 5.0, "tests/test_resume_learners.py": 6.0,
        "tests/test_resume.py": 4.0, "tests/test_row_streams.py": 1.0, "tests/test_report.py": 1.0}
LIGHT = 0.1


def _cost(item) -> float:
    return next((cost for prefix, cost in COST.items() if item.nodeid.startswith(prefix)), LIGHT)


@pytest.hookimpl(trylast=True)          # after -m and -k have deselected
def pytest_collection_modifyitems(config, items):
    """Order the tests for pytest-xdist's ``worksteal``, which gives each of its n workers one
    contiguous n-th of the list and lets a worker that runs out take the back half of another's
    queue: each n-th starts with its share of the costly tests (the costliest first, each to the
    n-th with the least cost so far) and ends with light ones, which are what gets moved. Handed out
    in collection order instead, the costly tests of the launch and benchmark files all fell to one
    worker, which ran 200 s after the other had stopped; without xdist the order is kept."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers < 2 or len(items) < 2 * workers:
        return
    heavy = sorted((item for item in items if _cost(item) > LIGHT), key=_cost, reverse=True)
    light = [item for item in items if _cost(item) <= LIGHT]
    sizes, left = [], len(items)
    for k in range(workers):                        # worksteal's split: len(pending) // nodes_remaining
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    parts, load = [[] for _ in range(workers)], [0.0] * workers
    for item in heavy:
        open_parts = [k for k in range(workers) if len(parts[k]) < sizes[k]]
        k = min(open_parts, key=lambda k: load[k] + LIGHT * (sizes[k] - len(parts[k])))
        parts[k].append(item)
        load[k] += _cost(item)
    for k in range(workers):
        need = sizes[k] - len(parts[k])
        parts[k].extend(light[:need])
        del light[:need]
    items[:] = [item for part in parts for item in part]


def pytest_ignore_collect(collection_path, config):
    in_mpi_dir = os.path.join(REPO, "tests", "mpi") in str(collection_path)
    if in_mpi_dir and not config.getoption("--with-mpi", default=False):
        return True
    return None


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def find_mpiexec():
    """The ``mpiexec`` next to this interpreter (the mpich wheel's), never a system one."""
    here = os.path.dirname(sys.executable)
    return shutil.which("mpiexec", path=here) or shutil.which("mpiexec")


def find_datasets():
    """The shared data sets (``../shared/datasets`` beside the checkout, as the README's examples
    name them; ``ASYOS_DATASETS`` overrides), or ``None`` when this machine has none."""
    for path in (os.environ.get("ASYOS_DATASETS"), os.path.join(REPO, "..", "shared", "datasets"),
                 "/work/shared/datasets"):
        if path and os.path.isfile(os.path.join(path, "README.md")):
            return os.path.realpath(path)
    return None


@pytest.fixture(params=["numpy", "numba"])
def kernels(request, monkeypatch):
    """Both implementations of the OS step: the numpy reference and the compiled one."""
    monkeypatch.setenv("ASYOS_KERNELS", request.param)
    return request.param
