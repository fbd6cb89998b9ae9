"""Running averages under ``mpiexec``: every rank reads its own rows, rank 0 gets the exact sum."""
import json
import os
import re
import sys

import numpy as np
import pytest

from asyos.runs.accumulate import rows_of_rank
from asyos.learners.averages.stats import RunningAverages
from tests.conftest import REPO
from tests.launch.mpirun import asyos_run, run_mpiexec

REPORT_IMPORTS = os.path.join(REPO, "tests", "launch", "report_imports.py")


@pytest.fixture(scope="module")
def data_file(tmp_path_factory):
    """The thesis' correlated design (Sec. 4.1), 8 true features among 60, plus a test split."""
    rng = np.random.default_rng(0)
    n, p = 1201, 60
    X = rng.normal(size=(n + 300, 1)) + rng.normal(size=(n + 300, p))
    beta = np.zeros(p)
    beta[9::10][:6] = 1.0
    beta[[3, 44]] = 0.7
    y = X @ beta + 5.0 + rng.normal(size=n + 300)
    path = tmp_path_factory.mktemp("ra") / "corr.npz"
    np.savez_compressed(path, X_train=X[:n], y_train=y[:n], X_test=X[n:], y_test=y[n:])
    return str(path), np.flatnonzero(beta)


def run(nprocs, out, *args):
    """``python -m asyos.run`` on ``nprocs`` ranks (through ``report_imports.py``): the record, the statistics,
    stdout, and which ranks imported scikit-learn (``{rank: bool}``)."""
    rc, stdout, stderr, _ = run_mpiexec(nprocs, [sys.executable, REPORT_IMPORTS, *args, "--output", str(out)],
                                        timeout=120)
    assert rc == 0, stderr
    said = re.findall(r"report_imports: rank (\d+) scikit-learn (\w+)", stderr)
    imported = {int(rank): answer == "True" for rank, answer in said}
    assert sorted(imported) == list(range(nprocs)), stderr
    return (json.loads((out / "results.json").read_text()), RunningAverages.load(out / "running_averages.npz"), stdout,
            imported)


@pytest.mark.parametrize("algorithm", ["ofsa", pytest.param("omcp", marks=pytest.mark.matrix)])  # one reduction
def test_ranks_give_the_statistics_and_features_of_one_process(tmp_path, data_file, algorithm):
    path, truth = data_file
    args = ["--algorithm", algorithm, "--data", path, "--budget", "8", "--chunk-rows", "100"]
    one, stats1, _, _ = run(1, tmp_path / "one", *args)
    four, stats4, stdout, imported = run(4, tmp_path / "four", *args)
    # rank 0 alone builds the estimator; the others only add rows, without scikit-learn's import (2.3-2.9 s of CPU
    # a rank: mpiexec -n 13 --algorithm ofsa took 34.6 s when every rank made it, 10.1 s since)
    assert imported == {0: True, 1: False, 2: False, 3: False}
    assert four["mode"] == "mpi-reduce" and four["ranks"] == 4 and one["mode"] == "streamed"
    assert "on 4 rank(s)" in stdout
    assert four["rows_per_rank"] == [[0, 301], [301, 601], [601, 901], [901, 1201]]
    assert stats4.n_seen == stats1.n_seen == 1201
    np.testing.assert_allclose(stats4.comoment_xx(), stats1.comoment_xx(), rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(stats4.comoment_xy(), stats1.comoment_xy(), rtol=1e-10, atol=1e-8)
    np.testing.assert_allclose(stats4.mean_x, stats1.mean_x, rtol=1e-12, atol=1e-12)
    assert four["selected"] == one["selected"] == truth.tolist()
    np.testing.assert_allclose(four["coef"], one["coef"], rtol=1e-7)
    assert four["metrics"]["test_error"] == pytest.approx(one["metrics"]["test_error"], rel=1e-7)
    assert four["metrics"]["test_error"] < 1.1                 # noise level 1


def test_forgetting_is_refused_under_mpi(data_file):
    rc, out, err, _ = asyos_run(2, "--algorithm", "ols-th", "--data", data_file[0], "--budget", "3",
                                "--param", "forgetting=0.01")
    assert rc == 2 and "forgetting weighs samples by their order" in err
    assert err.count("asyos: error") == 1


def test_bad_labels_stop_every_rank_with_one_message(tmp_path, data_file):
    """Labels the loss cannot use are found at set-up; every rank exits 2, no rank hangs."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5))
    y = np.where(X[:, 0] > 0, 1.0, -1.0)
    y[350] = 0.5                                             # in the last rank's block
    bad = tmp_path / "bad.npz"
    np.savez(bad, X=X, y=y)
    rc, out, err, seconds = asyos_run(3, "--algorithm", "ofsa", "--data", str(bad), "--budget", "2",
                                      "--loss", "squared_hinge", timeout=60)
    assert rc == 2 and "must be -1 or +1" in err


def test_rows_of_rank_cover_the_rows_once():
    for n, size in ((10, 3), (2, 4), (1201, 4), (0, 2)):
        blocks = [rows_of_rank(n, size, r) for r in range(size)]
        assert blocks[0][0] == 0 and blocks[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
        assert max(b - a for a, b in blocks) - min(b - a for a, b in blocks) <= 1
