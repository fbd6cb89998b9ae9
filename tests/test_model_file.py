"""Model files (``--save-model FILE``, ``asyos.records.model_file``) and ``predict`` (``asyos.cli.predict``): a model
kept by every kind of run predicts held-back data exactly as the fitted estimator does."""
import csv
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from asyos.records.model_file import FORMAT_VERSION, MAGIC, load_model
from asyos.cli.run import main
from tests.conftest import REPO


@pytest.fixture(scope="module")
def split(tmp_path_factory):
    """scikit-learn's breast cancer set (569 x 30, labels -1/+1): 400 training rows, 169 held back, as
    .npz and as libsvm text (1-based); the diabetes set (442 x 10, regression) likewise, 300 / 142.
    Both ship inside scikit-learn (the same data as ../shared/datasets/sklearn_*), so no data
    directory is needed."""
    from sklearn.datasets import dump_svmlight_file, load_breast_cancer, load_diabetes
    root = tmp_path_factory.mktemp("model")
    out = {}
    cancer, diabetes = load_breast_cancer(), load_diabetes()
    for name, X, y, n_train in (("cancer", cancer.data, 2 * cancer.target - 1, 400),
                                ("diabetes", diabetes.data, diabetes.target, 300)):
        X, y = np.asarray(X, dtype=np.float64), np.asarray(y)
        order = np.random.default_rng(0).permutation(y.size)
        train, test = order[:n_train], order[n_train:]
        for part, rows in (("train", train), ("test", test)):
            np.savez(root / f"{name}_{part}.npz", X=X[rows], y=y[rows])
            dump_svmlight_file(X[rows], y[rows], str(root / f"{name}_{part}.svm"), zero_based=False)
        out[name] = (X[test], y[test])
    out["root"] = root
    return out


def cli(*args):
    """``asyos.run.main`` in this process; its exit status."""
    return main([str(a) for a in args])


def read_predictions(path):
    with open(path, newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["row", "prediction", "decision"]
    body = np.array(rows[1:], dtype=float)
    assert np.array_equal(body[:, 0], np.arange(len(body)))
    return body[:, 1], body[:, 2]


FAMILIES = [   # (name, data set, training file suffix, extra flags)
    ("os", "cancer", "npz", ()),
    ("os", "diabetes", "npz", ()),
    ("b-arda", "cancer", "svm", ("--passes", "2")),            # learns from the file as it is read
    ("ofsa", "cancer", "npz", ()),                             # running averages
    ("asy-os", "cancer", "npz", ("--workers", "3")),           # Asy-OS in the simulator
    ("b-arda", "cancer", "npz", ("--simulate", "--workers", "2")),
]


@pytest.mark.parametrize("algorithm,name,suffix,extra", FAMILIES)
def test_a_saved_model_predicts_the_held_back_split_as_its_estimator(split, tmp_path, algorithm, name, suffix,
                                                                     extra, capsys):
    root = split["root"]
    model = tmp_path / "m.model"
    assert cli("--algorithm", algorithm, "--data", root / f"{name}_train.{suffix}", "--budget", 5,
               "--save-model", model, "--output", tmp_path / "fit", *extra) == 0
    assert f"  model: {model}" in capsys.readouterr().out
    record = json.loads((tmp_path / "fit" / "results.json").read_text())
    assert record["model"] == str(model)
    assert cli("predict", "--model", model, "--data", root / f"{name}_test.{suffix}", "--output", tmp_path / "p") == 0
    predicted, decision = read_predictions(tmp_path / "p" / "predictions.csv")

    X, y = split[name]
    saved = load_model(str(model), trust_estimator=True)
    assert saved.selected.tolist() == record["selected"] and saved.n_features == X.shape[1]
    assert saved.settings["algorithm"] == algorithm and saved.data == str(root / f"{name}_train.{suffix}")
    estimator = saved.estimator
    assert estimator is not None
    classification = name == "cancer"
    expected = estimator.decision_function(X) if classification else estimator.predict(X)
    np.testing.assert_allclose(decision, expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(predicted, estimator.predict(X), rtol=0, atol=1e-12)     # labels, or values
    result = json.loads((tmp_path / "p" / "results.json").read_text())
    assert result["n_samples"] == y.size and result["model"]["features"] == record["selected"]
    if classification:
        assert saved.task == "classification" and saved.classes == [-1.0, 1.0]
        assert result["metrics"]["accuracy"] == pytest.approx(np.mean(estimator.predict(X) == y), abs=1e-15)
    else:
        assert result["metrics"]["rmse"] == pytest.approx(np.sqrt(np.mean((expected - y) ** 2)), rel=1e-12)
        assert result["metrics"]["r2"] == pytest.approx(estimator.score(X, y), rel=1e-12)
    scaling = saved.scaling                     # the weights on the scaled columns, back in the data's units
    assert scaling is not None and scaling["kind"] == ("maxabs" if algorithm == "b-arda" else "standard")
    inner = getattr(estimator, "learner_", estimator)
    np.testing.assert_allclose(scaling["raw_coef"] * scaling["scales"], inner.raw_coef_[saved.selected],
                               rtol=1e-12, atol=1e-15)


def test_the_cli_model_is_the_python_estimator_fitted_with_the_same_settings(split, tmp_path):
    from asyos import OnlineSubstitution
    root = split["root"]
    model = tmp_path / "os.model"
    assert cli("--data", root / "cancer_train.npz", "--budget", 4, "--save-model", model, "-q") == 0
    assert cli("predict", "--model", model, "--data", root / "cancer_test.npz", "--output", tmp_path / "p") == 0
    _, decision = read_predictions(tmp_path / "p" / "predictions.csv")
    train = np.load(root / "cancer_train.npz")
    fitted = OnlineSubstitution(budget=4).fit(train["X"], train["y"])
    np.testing.assert_allclose(decision, fitted.decision_function(split["cancer"][0]), rtol=0, atol=1e-12)


def test_a_fresh_process_loads_the_model_and_predicts(split, tmp_path):
    root = split["root"]
    model = tmp_path / "m.model"
    assert cli("--data", root / "diabetes_train.npz", "--budget", 3, "--save-model", model, "-q") == 0
    script = ("import sys, numpy as np\nfrom asyos.records.model_file import load_model\n"
              "m = load_model(sys.argv[1], trust_estimator=True); X = np.load(sys.argv[2])['X']\n"
              "np.save(sys.argv[3], np.c_[m.predict(X), m.estimator.predict(X)])\n")
    env = dict(os.environ, PYTHONPATH=REPO)
    out = tmp_path / "p.npy"
    done = subprocess.run([sys.executable, "-c", script, str(model), str(root / "diabetes_test.npz"), str(out)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    both = np.load(out)
    saved = load_model(str(model), trust_estimator=True)
    X = split["diabetes"][0]
    np.testing.assert_allclose(both[:, 0], X[:, saved.selected] @ saved.coef + saved.intercept, rtol=1e-12)
    np.testing.assert_allclose(both[:, 1], both[:, 0], rtol=0, atol=1e-12)


def test_without_output_the_predictions_go_to_stdout_and_the_summary_to_stderr(split, tmp_path, capsys):
    root = split["root"]
    model = tmp_path / "m.model"
    assert cli("--data", root / "cancer_train.npz", "--budget", 3, "--save-model", model, "-q") == 0
    capsys.readouterr()
    assert cli("predict", "--model", model, "--data", root / "cancer_test.svm") == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == "row,prediction,decision" and len(lines) == 1 + split["cancer"][1].size
    assert "accuracy" in captured.err and "accuracy" not in captured.out


def test_a_narrower_libsvm_file_is_padded_with_zero_columns(split, tmp_path):
    from sklearn.datasets import dump_svmlight_file
    root = split["root"]
    model = tmp_path / "m.model"
    assert cli("--data", root / "cancer_train.svm", "--budget", 5, "--save-model", model, "-q") == 0
    saved = load_model(str(model), trust_estimator=True)
    X, y = split["cancer"]
    width = int(saved.selected.max())                   # drops the last selected column and those after it
    dump_svmlight_file(X[:, :width], y, str(tmp_path / "narrow.svm"), zero_based=False)
    assert cli("predict", "--model", model, "--data", tmp_path / "narrow.svm", "--output", tmp_path / "p") == 0
    _, decision = read_predictions(tmp_path / "p" / "predictions.csv")
    padded = np.hstack([X[:, :width], np.zeros((y.size, X.shape[1] - width))])
    np.testing.assert_allclose(decision, saved.decision_function(padded), rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def saved(split, tmp_path_factory):
    """A model of the cancer set, and bad model files and data made from it."""
    root = split["root"]
    tmp = tmp_path_factory.mktemp("bad")
    model = tmp / "m.model"
    assert cli("--data", root / "cancer_train.npz", "--budget", 3, "--save-model", model, "-q") == 0
    raw = model.read_bytes()
    header_end = raw.index(b"\n", len(MAGIC)) + 1
    (tmp / "cut.model").write_bytes(raw[:-50])
    flipped = bytearray(raw)
    flipped[header_end + 40] ^= 0xFF
    (tmp / "flipped.model").write_bytes(bytes(flipped))
    version = '"format_version": {}'
    newer = raw.replace(version.format(FORMAT_VERSION).encode(), version.format(FORMAT_VERSION + 1).encode())
    (tmp / "newer.model").write_bytes(newer)
    (tmp / "header.model").write_bytes(MAGIC + b"{not json\n" + raw[header_end:])
    (tmp / "version0.model").write_bytes(raw.replace(version.format(FORMAT_VERSION).encode(),
                                                     version.format(0).encode()))
    header = json.loads(raw[len(MAGIC):header_end])
    (tmp / "wider.model").write_bytes(MAGIC + json.dumps({**header, "n_features": 31}).encode() + b"\n"
                                      + raw[header_end:])
    body = json.loads(raw[header_end:header_end + header["model_bytes"]])
    altered = json.dumps({**body, "selected": [0, 1, 99]}).encode()
    (tmp / "altered.model").write_bytes(MAGIC + json.dumps({**header, "model_bytes": len(altered), "model_sha256":
                                                            hashlib.sha256(altered).hexdigest()}).encode() + b"\n"
                                        + altered + raw[header_end + header["model_bytes"]:])
    X, y = split["cancer"]
    np.savez(tmp / "wide.npz", X=np.hstack([X, X[:, :2]]), y=y)
    np.savez(tmp / "narrow.npz", X=X[:, :-1], y=y)
    from sklearn.datasets import dump_svmlight_file
    dump_svmlight_file(np.hstack([X, X[:, :2]]), y, str(tmp / "wide.svm"), zero_based=False)
    np.savez(tmp / "labels.npz", X=X, y=np.where(y > 0, 2, 0))
    return tmp


BAD_PREDICT = [
    (("--model", "{root}/cancer_test.npz"), "is not an asyos model file"),
    (("--model", "{bad}/cut.model"), "is damaged: "),
    (("--model", "{bad}/flipped.model"), "does not match the checksum"),
    (("--model", "{bad}/newer.model"), f"has format version {FORMAT_VERSION + 1}"),
    (("--model", "{bad}/header.model"), "its header cannot be read"),
    (("--model", "{bad}/version0.model"), "format version 0: no asyos writes it"),
    (("--model", "{bad}/wider.model"), "n_features 30 where its header says 31"),
    (("--model", "{bad}/altered.model"), "selected features that are not distinct columns of 0..29"),
    (("--model", "{bad}"), "is a directory"),
    (("--model", "{bad}/none.model"), "cannot read model file"),
    (("--data", "{bad}/wide.npz"), "has 32 feature columns; the model was fitted on 30"),
    (("--data", "{bad}/narrow.npz"), "has 29 feature columns; the model was fitted on 30"),
    (("--data", "{bad}/wide.svm"), "has 32 feature columns; the model was fitted on 30"),
    (("--data", "{bad}/labels.npz"), "not among the model's classes"),
    (("--data", "{root}/cancer_test.npz", "--split", "test"), "has no test split"),
    (("--data", "{root}/cancer_test.npz", "--overwrite"), "--overwrite goes with --output"),
]


@pytest.mark.parametrize("args,message", BAD_PREDICT)
def test_bad_predict_input_exits_2_with_one_line(split, saved, args, message, capsys):
    given = {"--model": str(saved / "m.model"), "--data": str(split["root"] / "cancer_test.npz")}
    extra = [a.format(root=split["root"], bad=saved) for a in args]
    for flag in ("--model", "--data"):
        if flag in extra[:1]:
            given[flag] = extra[1]
            extra = extra[2:]
    assert cli("predict", *[x for kv in given.items() for x in kv], *extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("asyos: error: ") and message in err, err


@pytest.mark.parametrize("where,message", [("{tmp}", "is a directory"),
                                           ("{tmp}/missing/m.model", "does not exist")])
def test_a_bad_save_model_path_is_refused_before_any_fit(split, tmp_path, where, message, capsys):
    assert cli("--data", split["root"] / "cancer_train.npz", "--budget", 3, "--save-model",
               where.format(tmp=tmp_path), "--output", tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not (tmp_path / "out").exists()                  # refused before the output was prepared


def test_predict_help_names_the_command(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli("predict", "--help")
    assert exit_.value.code == 0
    assert "predict" in capsys.readouterr().out.splitlines()[0]


@pytest.mark.parametrize("change,columns", [(("--add-features", "0-2"), [3, 4, 5, 6, 7, 8, 9, 0, 1, 2]),
                                            (("--remove-features", "0-2"), [3, 4, 5, 6, 7, 8, 9])])
def test_a_dfls_model_takes_the_global_columns_its_estimator_takes_in_its_order(split, tmp_path, change, columns):
    root = split["root"]
    model = tmp_path / "dfls.model"
    assert cli("--algorithm", "dfls", "--data", root / "diabetes_train.npz", *change, "--save-model", model,
               "--output", tmp_path / "fit", "-q") == 0
    assert json.loads((tmp_path / "fit" / "results.json").read_text())["model"] == str(model)
    assert cli("predict", "--model", model, "--data", root / "diabetes_test.npz", "--output", tmp_path / "p") == 0
    predicted, decision = read_predictions(tmp_path / "p" / "predictions.csv")
    saved = load_model(str(model), trust_estimator=True)
    X = split["diabetes"][0]
    assert saved.estimator_columns.tolist() == columns           # an added block comes last
    assert set(saved.selected.tolist()) <= set(columns)
    np.testing.assert_allclose(decision, saved.estimator.predict(X[:, saved.estimator_columns]), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(predicted, decision)
    scaling = saved.scaling
    np.testing.assert_allclose(scaling["raw_coef"] * scaling["scales"], saved.coef, rtol=1e-12)


class _Hostile:
    """Unpickling this runs ``open(marker, "w")``: what a hostile model file would do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _with_estimator_section(raw, section):
    """``raw`` (a model file) with its estimator section replaced by ``section``, the header's checksum kept
    true: a file whose every check passes."""
    header_end = raw.index(b"\n", len(MAGIC)) + 1
    header = json.loads(raw[len(MAGIC):header_end])
    body = raw[header_end:header_end + header["model_bytes"]]
    header.update(estimator_bytes=len(section), estimator_sha256=hashlib.sha256(section).hexdigest())
    return MAGIC + json.dumps(header).encode() + b"\n" + body + section


def test_a_model_with_a_hostile_pickle_predicts_without_running_it(split, saved, tmp_path):
    """``predict`` and ``load_model`` read the model's JSON only: a pickle in the file runs nowhere unless the
    caller trusts the file."""
    import pickle
    marker = tmp_path / "ran"
    hostile = _with_estimator_section((saved / "m.model").read_bytes(), pickle.dumps(_Hostile(str(marker))))
    path = tmp_path / "hostile.model"
    path.write_bytes(hostile)
    assert main(["predict", "--model", str(path), "--data", str(split["root"] / "cancer_test.npz"), "-q",
                 "--output", str(tmp_path / "out")]) == 0
    model = load_model(str(path))
    assert model.estimator is None and not marker.exists()
    load_model(str(path), trust_estimator=True)                 # the caller's choice: now it runs
    assert marker.exists()


def test_a_pickled_version_1_file_is_refused_unless_trusted(saved, tmp_path, capsys):
    import pickle
    marker = tmp_path / "ran"
    body = pickle.dumps(_Hostile(str(marker)))
    header = {"format": "asyos-model", "format_version": 1, "asyos": "0.1.0", "algorithm": "os",
              "task": "classification", "n_features": 30, "n_selected": 3, "body_bytes": len(body),
              "body_sha256": hashlib.sha256(body).hexdigest()}
    path = tmp_path / "v1.model"
    path.write_bytes(MAGIC + json.dumps(header).encode() + b"\n" + body)
    assert main(["predict", "--model", str(path), "--data", str(saved / "narrow.npz")]) == 2
    assert "format version 1" in capsys.readouterr().err and not marker.exists()


def test_the_model_section_reads_back_bit_for_bit(split, tmp_path):
    from asyos.records.model_file import SavedModel, save_model
    rng = np.random.default_rng(0)
    model = SavedModel("os", "classification", "squared_hinge", 30, np.array([1, 4, 9]), rng.standard_normal(3),
                       float(rng.standard_normal()), classes=[-1.0, 1.0],
                       scaling={"kind": "maxabs", "offsets": np.zeros(3), "scales": np.array([np.inf, 0.5, 1e-300]),
                                "raw_coef": rng.standard_normal(3)}, settings={"seed": 0})
    save_model(str(tmp_path / "m.model"), model)
    back = load_model(str(tmp_path / "m.model"))
    assert np.array_equal(back.coef, model.coef) and back.intercept == model.intercept
    assert back.selected.dtype == np.int64 and back.selected.tolist() == [1, 4, 9]
    assert all(np.array_equal(back.scaling[k], model.scaling[k]) for k in ("offsets", "scales", "raw_coef"))
