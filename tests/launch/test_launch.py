"""``mpiexec ... python -m asyos.run`` as a user runs it: results, bad input, failing ranks."""
import json
import os
import sys

import numpy as np
import pytest

from tests.conftest import REPO
from tests.launch.mpirun import asyos_run, run_mpiexec, virtual_nodes

SMALL = ["--n-features", "400", "--n-informative", "12", "--passes", "2"]
FAULTY = os.path.join(REPO, "tests", "launch", "faulty_run.py")


@pytest.mark.parametrize("transport, nodes, expected", [("auto", 1, "shared-memory"), ("messages", 1, "messages"),
                                                        ("auto", 2, "node-aggregated")])
def test_asy_os_writes_the_parallel_fields(tmp_path, transport, nodes, expected):
    rc, out, err, _ = asyos_run(3, *SMALL, "--output", str(tmp_path), "--trace-every", "50", "--transport", transport,
                                env_extra={**virtual_nodes(nodes), "ASYOS_PICTURE": "1"})
    assert rc == 0, err
    assert "asy-os (mpi)" in out and "2 workers" in out
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["mode"] == "mpi" and record["n_workers"] == 2
    assert record["transport"] == expected              # auto: one node or several
    assert 0 < len(record["selected"]) <= 12 and 0 <= record["metrics"]["recall"] <= 1
    # the refit minimises the loss on the selected columns, so it cannot do worse than the OS weights
    assert record["metrics"]["objective"] <= record["metrics"]["objective_selection"] * (1 + 1e-12)
    for key in ("mean", "max", "p95", "histogram"):
        assert key in record["staleness"]
    if expected == "node-aggregated":       # every write counted; a worker's last may carry only drops (no step)
        assert 0 <= sum(record["staleness"]["histogram"]) - record["steps"] <= record["n_workers"]
    else:
        assert sum(record["staleness"]["histogram"]) == record["pushes"] > 0
    assert record["pushes_per_s"] > 0 and record["refused_pushes"] == 0
    assert record["max_staleness"] is None
    assert len(record["trace"]["objective"]) >= 2
    assert {w["rank"] for w in record["workers"]} == {1, 2}
    rows = (tmp_path / "selection_log.csv").read_text().splitlines()
    assert {line.split(",")[0] for line in rows[1:]} == {"0", "1"}
    # only the central rank draws the picture, once
    assert out.count("  picture: ") == 1 and (tmp_path / "run.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("transport", ["shared-memory", "messages", "node-aggregated"])
def test_staleness_bound_is_enforced_by_refusing_pushes(tmp_path, transport):
    nodes = 2 if transport == "node-aggregated" else 1
    rc, out, err, _ = asyos_run(4, *SMALL, "--max-staleness", "0", "--transport", transport,
                                "--output", str(tmp_path), env_extra=virtual_nodes(nodes))
    assert rc == 0, err
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["staleness"]["max"] == 0 and record["max_staleness"] == 0
    assert record["refused_pushes"] > 0
    assert sum(w["refused"] for w in record["workers"]) == record["refused_pushes"]


def test_local_launcher_script(tmp_path):
    rc, out, err, _ = run_mpiexec(1, ["bash", os.path.join(REPO, "launch", "local.sh"), "3", *SMALL],
                                  env_extra={"PYTHON": sys.executable})
    assert rc == 0, err
    assert "2 workers" in out


FAILURES = [
    ("raise", 3, "worker rank 2 failed: RuntimeError: injected failure"),
    ("exit", 3, "worker rank 2 failed: SystemExit: 3"),
    ("kill", None, "rank 2 (pid"),
    ("os-exit0", None, "rank 2 (pid"),
    ("hang", 17, "worker rank(s) [2] sent nothing for more than 5 s"),
]
TRANSPORTS = ["shared-memory", "messages", "node-aggregated"]
# by default: a silent worker on every transport (each watches its workers its own way), the other
# failures each on one transport (the worker's own report, or its supervisor's, takes the same path on
# all three); the rest of the matrix with -m matrix
REPRESENTATIVE = {("hang", t) for t in TRANSPORTS} | {("raise", "shared-memory"), ("exit", "messages"),
                                                      ("kill", "node-aggregated"), ("os-exit0", "shared-memory")}


@pytest.mark.parametrize("mode, code, message, transport", [
    pytest.param(mode, code, message, transport,
                 marks=() if (mode, transport) in REPRESENTATIVE else pytest.mark.matrix)
    for mode, code, message in FAILURES for transport in TRANSPORTS])
def test_a_failing_worker_ends_the_job_with_its_rank_named(mode, code, message, transport):
    nodes = 2 if transport == "node-aggregated" else 1     # rank 2 then shares a node with rank 0
    # the job must end by itself (run_mpiexec fails the test after its 60 s hang guard); how soon after the
    # fault is benchmarks/bench_faults.py's measurement (a busy machine stretches it)
    rc, out, err, _ = run_mpiexec(4, [sys.executable, FAULTY, mode, "2", "40", "--passes", "50",
                                      "--transport", transport], timeout=60, env_extra=virtual_nodes(nodes))
    assert rc != 0
    if code is not None:
        assert rc == code
    assert message in err, err


# by default one error found while parsing, one when the run starts and one after every rank has
# loaded its shard; the others (found at the same points) with -m matrix
@pytest.mark.parametrize("args, message", [
    (["--budget", "0"], "--budget must be at least 1"),
    pytest.param(["--n-features", "2", "--n-informative", "2"], "3 workers but n_features = 2",
                 marks=pytest.mark.matrix),
    pytest.param(["--budget", "2", "--n-features", "50", "--n-informative", "2", "--budget-mode", "split"],
                 "budget 2 is smaller than the number of workers (3)", marks=pytest.mark.matrix),
    (["--algorithm", "lasso"], "does not run under mpiexec"),
    pytest.param(["--simulate"], "--simulate runs in one process", marks=pytest.mark.matrix),
    (["--synthetic", "classification", "--n-features", "1000", "--step-size", "9", "--variant", "kdd16"],
     "is too large for these data"),
])
def test_bad_input_under_mpi_exits_2_with_one_line(args, message):
    rc, out, err, _ = asyos_run(4, *args, timeout=60)
    assert rc == 2, (out, err)
    lines = [line for line in err.strip().splitlines() if not line.startswith("Abort(2)")]  # MPICH's own note
    assert len(lines) == 1 and message in lines[0] and lines[0].startswith("asyos: error:"), err
    assert "Traceback" not in err


def test_an_error_in_one_shard_is_agreed_on_by_every_rank(tmp_path):
    """Only the last worker's columns hold the NaN; every rank still exits 2 with one line."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 30))
    X[5, 29] = np.nan
    np.savez(tmp_path / "d.npz", X=X, y=rng.standard_normal(40))
    rc, out, err, _ = asyos_run(4, "--data", str(tmp_path / "d.npz"), "--budget", "6", timeout=60)
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "NaN" in lines[0], err


@pytest.mark.parametrize("extra,transport", [
    ([], "shared-memory"),
    pytest.param(["--transport", "messages"], "messages", marks=pytest.mark.matrix),
    pytest.param(["--push-mode", "each-step"], "messages", marks=pytest.mark.matrix),
    (["--push-mode", "each-step", "--max-staleness", "1"], "messages"),   # messages, refusals included
    ([], "node-aggregated")])
def test_global_budget_under_mpi_keeps_at_most_s(tmp_path, extra, transport):
    """The true features crowd the first of four shards (contiguous sharding, data file reordered):
    the split budget can keep at most 3 of them there, the global budget more; never more than s.
    Every transport: replies carry the others' top |w|, or the shared window holds every worker's (and
    node-aggregated: the other nodes' top |w| that came with the leader's reply).

    500 features a shard: a drop needs a worker to read the first worker's weights before its own two
    passes end. With 100 a shard the workers' passes took 0.01-0.05 s, and on a loaded machine a worker
    sometimes finished before the first had stepped (no drop in 1 of 12 runs under two busy processes);
    with 500 (0.1-0.3 s) the fewest drops in 12 such runs was 46."""
    from asyos import make_regression
    d = make_regression(n_features=2000, n_informative=12, n_samples=200, seed=5)
    order = np.r_[np.flatnonzero(d.true_coef), np.flatnonzero(d.true_coef == 0)]
    path = tmp_path / "crowded.npz"
    np.savez(path, X=d.X[:, order], y=d.y)
    counts = {}
    # the split budget's cap is the same on every transport (3 of s = 12 per worker's shard): its run is
    # made once, with the first case, and the others check the global budget alone
    for mode in ("split", "global") if transport == "shared-memory" and not extra else ("global",):
        out_dir = tmp_path / mode
        rc, out, err, _ = asyos_run(5, "--data", str(path), "--budget", "12", "--passes", "2", "--budget-mode", mode,
                                    "--sharding", "contiguous", "--output", str(out_dir), *extra,
                                    env_extra=virtual_nodes(2 if transport == "node-aggregated" else 1))
        assert rc == 0, err
        record = json.loads((out_dir / "results.json").read_text())
        assert record["budget_mode"] == mode and len(record["selected"]) <= 12
        assert record["transport"] == transport
        counts[mode] = int(np.sum(np.array(record["selected"]) < 12))      # true features are columns 0..11
    assert counts.get("split", 0) <= 3 < counts["global"]
    assert record["n_dropped"] > 0 and record["threshold"] > 0 and record["slack"] == 0.5


def test_global_budget_under_mpi_takes_a_budget_below_the_worker_count(tmp_path):
    rc, out, err, _ = asyos_run(5, "--budget", "2", "--n-features", "60", "--n-informative", "2",
                                "--output", str(tmp_path))
    assert rc == 0, err
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["budget_mode"] == "global" and 0 < len(record["selected"]) <= 2


@pytest.mark.parametrize("layout", ["npz", "column-store"])
def test_ridge_auto_under_mpi_chooses_on_the_workers_offers_what_sequential_os_chooses(tmp_path, layout):
    """p >= 5 n: the workers offer their shards' best features, the central rank reads the pool's columns
    (from the file, or from a column store that each rank reads only in part) and chooses the ridge by
    cross-validation, every rank runs with it; the choice and its scores are sequential OS's on all
    the columns, and the reported model is the ridge refit of the selected columns."""
    import subprocess
    from asyos import OnlineSubstitution
    from asyos.learners.refit import refit_with_intercept
    from asyos.losses import get_loss
    from tests.test_ridge_choice import weak_fingerprints
    X, y = weak_fingerprints()                                # a set where the choice is a ridge
    path = tmp_path / "few.npz"
    np.savez(path, X=np.ascontiguousarray(X), y=y)            # row-major: the converter streams rows
    if layout == "column-store":
        columns = tmp_path / "columns"
        subprocess.run([sys.executable, "-m", "asyos.convert", "-q", str(path), str(columns)], check=True, timeout=60)
        path = columns
    rc, out, err, _ = asyos_run(4, "--data", str(path), "--budget", "10", "--ridge", "auto",
                                "--output", str(tmp_path / "out"))
    assert rc == 0, err
    record = json.loads((tmp_path / "out" / "results.json").read_text())
    seq = OnlineSubstitution(budget=10, ridge="auto").fit(X, y)
    assert record["n_workers"] == 3 and record["ridge"] == seq.ridge_ > 0
    # the same fits on the same pool; the columns' layout in memory may round their products differently
    assert record["ridge_scores"] == pytest.approx({str(a): v for a, v in seq.ridge_scores_.items()}, rel=1e-9)
    assert record["step_size"] == pytest.approx(0.5 / (record["lipschitz"] + record["ridge"]))
    selected = np.asarray(record["selected"])
    coef, b = refit_with_intercept(X[:, selected], y, get_loss("squared_hinge"), ridge=record["ridge"])
    np.testing.assert_allclose(record["coef"], coef, rtol=1e-6, atol=1e-9)


def test_a_ridge_under_mpi_penalises_the_workers_and_the_refit(tmp_path):
    """``--ridge`` reaches every rank: the reported model is the ridge refit of the selected columns
    (recomputed here from the synthetic problem), and the workers' steps are the penalised objective's."""
    from asyos.data.synthetic import SyntheticSource
    from asyos.learners.refit import refit_with_intercept
    from asyos.losses import get_loss
    rc, out, err, _ = asyos_run(3, *SMALL, "--ridge", "0.5", "--output", str(tmp_path))
    assert rc == 0, err
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["config"]["ridge"] == 0.5 and record["n_workers"] == 2
    source = SyntheticSource("regression", 400, 12, None, None, None, 0)
    selected = np.asarray(record["selected"])
    X = source.columns_T(selected, "train").T
    coef, b = refit_with_intercept(X, source.labels("train"), get_loss("squared"), ridge=0.5)
    np.testing.assert_allclose(record["coef"], coef, rtol=1e-8)
    assert record["intercept"] == pytest.approx(b, rel=1e-8, abs=1e-12)
    assert record["step_size"] == pytest.approx(0.5 / (record["lipschitz"] + 0.5))


@pytest.mark.parametrize("n_features", ["1000000000", "10000000000"])
def test_a_declared_size_that_cannot_fit_is_refused_before_anything_is_allocated(n_features):
    """Each rank estimates what its node's ranks would hold (a worker's share of the generated columns and
    their state, the sharding's index arrays) before it allocates: exit 2 and one line. Before, 1e9
    features grew to 2.3 GB before a worker was refused and 1e10 ended in a MemoryError traceback."""
    rc, out, err, _ = asyos_run(3, "--n-features", n_features, timeout=60)
    assert rc == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "of memory needed" in lines[0] and "ranks on this node" in lines[0], err


def test_mpi_warns_as_one_process_does(tmp_path):
    """The central rank checks the final model on u_C as the estimators check theirs: the same warning, in
    the same words, printed once and in results.json (an exact fit of 60 rows with 30 of 600 features)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 600))
    y = np.where(X[:, :3].sum(axis=1) + rng.normal(size=60) > 0, 1.0, -1.0)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    rc, out, err, _ = asyos_run(3, "--data", str(tmp_path / "d.npz"), "--budget", "30", "--output",
                                str(tmp_path / "mpi"))
    assert rc == 0, err
    said = [line for line in err.splitlines() if "fits its 60 training samples exactly" in line]
    assert len(said) == 1 and said[0].startswith("asyos: warning: OnlineSubstitution fits"), err
    record = json.loads((tmp_path / "mpi" / "results.json").read_text())
    assert said[0].removeprefix("asyos: warning: ") in record["warnings"]
    from asyos import OnlineSubstitution
    with pytest.warns(UserWarning, match="fits its 60 training samples exactly with 30 features of p = 600"):
        OnlineSubstitution(budget=30).fit(X, y)
