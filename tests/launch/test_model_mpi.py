"""``--save-model`` under ``mpiexec``: the central rank writes Asy-OS's model, ``predict`` applies it."""
import csv
import json

import numpy as np

from asyos.records.model_file import load_model
from asyos.cli.predict import main as predict
from tests.launch.mpirun import asyos_run


def test_asy_os_under_mpiexec_saves_the_model_of_its_record(tmp_path):
    from sklearn.datasets import load_breast_cancer        # ships with scikit-learn: no data directory needed
    cancer = load_breast_cancer()
    X, y = cancer.data.astype(np.float64), 2 * cancer.target - 1
    order = np.random.default_rng(1).permutation(y.size)
    train, test = order[:400], order[400:]
    np.savez(tmp_path / "train.npz", X=X[train], y=y[train])
    np.savez(tmp_path / "test.npz", X=X[test], y=y[test])
    model = tmp_path / "asy.model"
    rc, out, err, _ = asyos_run(3, "--data", str(tmp_path / "train.npz"), "--budget", "5", "--save-model", str(model),
                                "--output", str(tmp_path / "fit"), timeout=120)
    assert rc == 0, err
    assert out.count(f"  model: {model}") == 1                  # the central rank only
    record = json.loads((tmp_path / "fit" / "results.json").read_text())
    assert record["mode"] == "mpi" and record["model"] == str(model)
    saved = load_model(str(model), trust_estimator=True)
    assert saved.estimator is None and saved.algorithm == "asy-os" and saved.selected.tolist() == record["selected"]
    scaling = saved.scaling                                     # weights on the scaled columns, back in units
    np.testing.assert_allclose(scaling["raw_coef"] * scaling["scales"], record["raw_coef"], rtol=1e-12)
    assert predict(["--model", str(model), "--data", str(tmp_path / "test.npz"), "--output", str(tmp_path / "p")]) == 0
    with open(tmp_path / "p" / "predictions.csv", newline="") as fh:
        rows = np.array(list(csv.reader(fh))[1:], dtype=float)
    u = X[test][:, record["selected"]] @ np.array(record["coef"]) + record["intercept"]
    np.testing.assert_allclose(rows[:, 2], u, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(rows[:, 1], np.where(u >= 0, 1.0, -1.0))
    result = json.loads((tmp_path / "p" / "results.json").read_text())
    assert result["metrics"]["accuracy"] == np.mean(np.where(u >= 0, 1, -1) == y[test])
