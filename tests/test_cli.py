"""``python -m asyos.run`` in one process: the default, the results file, and bad input. The
commands run inside the test process (``tests/inprocess.py``), the default run as a real one."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tests.inprocess import run_asyos

SMALL = ["--n-features", "300", "--n-informative", "10", "--passes", "2"]


def run(*args, timeout=None, cwd=None):
    """``python -m asyos.run *args`` outside MPI (``timeout``: pytest-timeout's guard applies)."""
    env = dict(os.environ)
    env.pop("PMI_SIZE", None)
    return run_asyos(*args, cwd=cwd, env=env)


def run_process(*args, timeout=120):
    env = dict(os.environ)
    env.pop("PMI_SIZE", None)
    proc = subprocess.run([sys.executable, "-m", "asyos.run", *args], capture_output=True, text=True,
                          timeout=timeout, env=env)
    return proc.returncode, proc.stdout, proc.stderr


def test_default_run_prints_a_summary():
    rc, out, err = run_process()
    assert rc == 0, err
    assert "os (sequential)" in out and "n=1316, p=2000, s=100" in out
    recall = float(out.split("recall ")[1].split(";")[0])
    assert recall >= 0.95


def test_output_file_has_the_documented_fields(tmp_path):
    rc, out, err = run(*SMALL, "--output", str(tmp_path), "--quiet")
    assert rc == 0, err
    assert out == ""
    record = json.loads((tmp_path / "results.json").read_text())
    for key in ("algorithm", "config", "selected", "coef", "metrics", "timing", "environment"):
        assert key in record
    assert record["algorithm"] == "os" and len(record["selected"]) == len(record["coef"]) == 10
    for key in ("recall", "objective", "train_error", "test_error", "recovery_error"):
        assert np.isfinite(record["metrics"][key])
    assert record["timing"]["wall_s"] > 0
    assert record["config"]["passes"] == 2
    log = (tmp_path / "selection_log.csv").read_text().splitlines()
    assert log[0] == "worker,step,pass,feature,event,weight" and len(log) > 10


def test_simulator_run_records_staleness(tmp_path):
    rc, out, err = run(*SMALL, "--simulate", "--workers", "4", "--max-staleness", "6", "--schedule", "random",
                       "--output", str(tmp_path))
    assert rc == 0, err
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["algorithm"] == "asy-os" and record["mode"] == "simulated"
    assert record["n_workers"] == 4 and record["max_staleness"] == 6
    assert record["staleness"]["max"] <= 6 and sum(record["staleness"]["histogram"]) > 0
    assert record["refused_pushes"] == 0 and "pushes_per_s" in record


@pytest.mark.parametrize("args, transport, push_mode", [
    (["--transport", "shared-memory", "--cores", "2"], "shared-memory", None),
    (["--transport", "messages", "--push-mode", "each-step", "--max-staleness", "1"], "messages", "each-step"),
    (["--transport", "node-aggregated", "--nodes", "2"], "node-aggregated", None),
])
def test_simulated_transports_from_the_cli(tmp_path, args, transport, push_mode):
    rc, out, err = run(*SMALL, "--simulate", "--workers", "4", *args, "--output", str(tmp_path))
    assert rc == 0, err
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["mode"] == "simulated" and record["transport"] == transport and record["push_mode"] == push_mode
    assert record["simulated_time_s"] > 0 and "staleness_policy" not in record
    if "--max-staleness" in args:
        assert record["staleness"]["max"] <= 1 and record["max_staleness"] == 1


@pytest.mark.parametrize("algorithm", ["proj-gd", "lasso"])
def test_baselines_from_the_cli(algorithm):
    rc, out, err = run(*[a for a in SMALL if a not in ("--passes", "2")], "--algorithm", algorithm,
                       "--synthetic", "classification")
    assert rc == 0, err
    assert f"{algorithm} (sequential)" in out and "test error rate" in out
    rc, out, err = run(*SMALL, "--algorithm", algorithm)        # it has no scans: refused, no longer ignored
    assert rc == 2 and "--passes applies to Online Substitution and the sample-stream learners" in err


def test_config_file(tmp_path):
    (tmp_path / "c.toml").write_text('[run]\nn_features = 200\nn_informative = 5\npasses = 1\n')
    rc, out, err = run("--config", str(tmp_path / "c.toml"), "--seed", "3")
    assert rc == 0, err
    assert "p=200, s=5" in out and "seed=3" in out


def test_list_algorithms():
    rc, out, _ = run("--list-algorithms")
    assert rc == 0 and {"os", "asy-os", "proj-gd", "lasso"} <= {line.split()[0] for line in out.splitlines()}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 8))
    np.savez(d / "ok.npz", X=X, y=rng.standard_normal(30))
    Xn = X.copy()
    Xn[3, 4] = np.nan
    np.savez(d / "nan.npz", X=Xn, y=np.ones(30))
    np.savez(d / "flat.npz", X=X[0], y=np.ones(8))
    np.savez(d / "labels.npz", X=X, y=rng.integers(0, 3, 30))
    (d / "locked.svm").write_text("1 1:1\n")
    os.chmod(d / "locked.svm", 0)
    return d


BAD = [
    (["--data", "{d}/missing.npz", "--budget", "3"], "does not exist"),
    (["--data", "{d}/nan.npz", "--budget", "3"], "1 NaN or infinite"),
    (["--data", "{d}/flat.npz", "--budget", "3"], "must be 2-D"),
    (["--data", "{d}/ok.npz"], "--budget is required"),
    (["--data", "{d}/ok.npz", "--budget", "9"], "budget 9 is larger than the number of features (n_features = 8)"),
    (["--budget", "0"], "--budget must be at least 1"),
    (["--data", "{d}/labels.npz", "--budget", "2", "--loss", "squared_hinge"], "must be -1 or +1"),
    (["--data", "{d}/ok.npz", "--budget", "3", "--simulate", "--workers", "9"], "9 workers but n_features = 8"),
    (["--data", "{d}/ok.npz", "--budget", "3", "--simulate", "--workers", "4", "--budget-mode", "split"],
     "budget 3 is smaller"),
    (["--loss", "hinge"], "the hinge loss is not smooth"),
    (["--push-mode", "pipelined", "--max-staleness", "3"], "use it with --push-mode each-step"),
    (["--push-mode", "eager"], "unknown --push-mode 'eager'"),
    (["--transport", "tcp"], "unknown --transport 'tcp'"),
    (["--nodes", "2"], "--nodes goes with --simulate --transport node-aggregated"),
    (["--simulate", "--transport", "node-aggregated", "--nodes", "0"], "--nodes must be at least 1"),
    (["--cores", "2"], "--cores goes with --simulate and a --transport"),
    (["--simulate", "--costs", "c.json"], "--costs goes with --simulate and a --transport"),
    (["--transport", "shared-memory", "--push-mode", "each-step"], "--push-mode each-step applies to --transport "
                                                                    "messages"),
    (["--benchmark", "nope"], "unknown benchmark 'nope'"),
    (["--benchmark"], "--benchmark needs a name"),
    (["--algorithm", "grafting"], "unknown algorithm 'grafting'"),
    (["--budgett", "3"], "unrecognized arguments"),
    (["--passes", "two"], "must be an integer or auto; got 'two'"),
    (["--variant", "kdd17"], "unknown --variant 'kdd17'"),
    (["--decrease-constant", "0.5"], "--decrease-constant is KDD'16's c"),
    (["--ridge", "-0.1"], "--ridge must be a finite number >= 0"),
    (["--ridge", "0.5", "--variant", "kdd16"], "--ridge is part of the exchange variant"),
    (["--algorithm", "proj-gd", "--ridge", "0.5"], "--ridge applies to Online Substitution"),
    (["--algorithm", "dfls", "--simulate"], "--simulate applies to parallel execution"),      # was ignored
    (["--algorithm", "lasso", "--workers", "3"], "--workers applies to parallel execution"),
    (["--scale", "maxabs"], "--scale maxabs is the sample-stream learners'"),
    (["--algorithm", "b-arda", "--scale", "standard"], "--scale standard is Online Substitution's"),
    (["--algorithm", "proj-gd", "--variant", "kdd16"],
     "--variant applies to Online Substitution (os, asy-os); 'proj-gd' does not take it"),
    (["--config", "{d}/missing.toml"], "config file"),
    (["--n-informative", "50", "--n-features", "20"], "larger than --n-features"),
    (["--output", "/proc/asyos-out"], "cannot create output directory"),
    (["--synthetic", "classification", "--n-features", "300", "--step-size", "50"], "step size 50 is too large"),
]
if os.geteuid() != 0:           # root reads files whatever their mode
    BAD.append((["--data", "{d}/locked.svm", "--budget", "1"], "not readable"))


@pytest.mark.parametrize("args, message", BAD, ids=[b[1][:30] for b in BAD])
def test_bad_input_exits_2_with_one_line(files, args, message):
    rc, out, err = run(*[a.format(d=files) for a in args])
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyos: error:"), err
    assert message in lines[0]
    assert "Traceback" not in err + out


def test_a_suspect_result_is_reported_as_a_warning(tmp_path):
    rc, out, err = run("--synthetic", "classification", "--n-features", "1000", "--step-size", "4.5", "--simulate",
                       "--workers", "8", "--variant", "kdd16", "--output", str(tmp_path))
    assert rc == 0
    assert err.startswith("asyos: warning: the final objective") and "worse than the empty model" in err
    assert len(json.loads((tmp_path / "results.json").read_text())["warnings"]) == 1


def test_the_cli_and_the_estimators_share_their_defaults():
    """``python -m asyos.run`` builds the estimators with their own defaults (the loss it passes
    is the one "auto" resolves to from the labels)."""
    from asyos import AsyncOnlineSubstitution, OnlineSubstitution
    from asyos.runs.config import RunConfig
    from asyos.registry import get_algorithm
    config = RunConfig().validated()
    built = get_algorithm("os").build(config, "squared", 100)
    assert built.get_params() == OnlineSubstitution(budget=100, loss="squared").get_params()
    simulated = get_algorithm("asy-os").build(config.replace(workers=4), "squared_hinge", 100)
    expected = AsyncOnlineSubstitution(budget=100, n_workers=4, loss="squared_hinge").get_params()
    assert simulated.get_params() == {**expected, "budget_mode": "global"}


def test_the_run_records_the_intercept_and_the_variant(tmp_path):
    rc, out, err = run("--n-features", "300", "--n-informative", "6", "--output", str(tmp_path))
    assert rc == 0, err
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["variant"] == "exchange" and "variant exchange" in out
    assert record["intercept"] != 0.0 and record["n_passes"] >= 2
    rc, out, err = run("--n-features", "300", "--n-informative", "6", "--variant", "kdd16", "--output",
                       str(tmp_path / "kdd16"))
    record = json.loads((tmp_path / "kdd16" / "results.json").read_text())
    assert rc == 0 and record["intercept"] == 0.0 and record["n_passes"] == 3


# ---------------------------------------------------------------- bad inputs answered before any work
@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    d = tmp_path_factory.mktemp("odd")
    rng = np.random.default_rng(1)
    X = rng.standard_normal((40, 6))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.standard_normal(40)
    np.savez(d / "rows0.npz", X=np.zeros((0, 5)), y=np.zeros(0))
    np.savez(d / "cols0.npz", X=np.zeros((40, 0)), y=y)
    np.savez(d / "huge.npz", X=X * 1e300, y=y)
    np.savez(d / "tiny.npz", X=X * 1e-300, y=y)
    np.savez(d / "zero.npz", X=np.zeros_like(X), y=y)
    (d / "ok.svm").write_text("".join(f"{v:.3f} 1:{a:.3f} 2:{b:.3f}\n" for v, a, b in zip(y, X[:, 0], X[:, 1])))
    (d / "empty.svm").write_text("")
    os.mkfifo(d / "fifo")
    (d / "hugecol").mkdir()                     # column-major: read by ColumnShard
    np.save(d / "hugecol" / "X.npy", np.asfortranarray(X * 1e300))
    np.save(d / "hugecol" / "y.npy", y)
    return d


ODD = [
    (["--data", "{d}/fifo", "--budget", "1"], "is a named pipe (FIFO)"),
    (["--data", "/dev/zero", "--budget", "1", "--n-features", "5"], "is a character device"),
    (["--data", "{d}/ok.svm", "--test-data", "{d}/fifo", "--budget", "1"], "--test-data"),
    (["--data", "{d}/rows0.npz", "--budget", "1"], "has no samples"),
    (["--data", "{d}/rows0.npz", "--budget", "1", "--algorithm", "ofs"], "has no samples"),
    (["--data", "{d}/empty.svm", "--budget", "1", "--n-features", "5"], "no samples"),
    (["--data", "{d}/cols0.npz", "--budget", "1"], "has no features"),
    (["--data", "{d}/huge.npz", "--budget", "2"], "squares overflow float64"),
    (["--data", "{d}/huge.npz", "--budget", "2", "--variant", "kdd16"], "squares overflow float64"),
    (["--data", "{d}/huge.npz", "--budget", "2", "--simulate"], "squares overflow float64"),
    (["--data", "{d}/hugecol", "--budget", "2"], "squares overflow float64"),
    (["--data", "{d}/ok.svm", "--budget", "1", "--n-features", "100000000000"], "of memory needed"),
    (["--n-features", "1000000000", "--n-informative", "5"], "of memory needed"),
]


@pytest.mark.parametrize("args, message", ODD, ids=[" ".join(a[:2]) for a, _ in ODD])
def test_odd_input_exits_2_with_one_line(odd, args, message):
    rc, out, err = run("--quiet", *[a.format(d=odd) for a in args], timeout=60)
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyos: error:"), err
    assert message in lines[0]


@pytest.mark.parametrize("name, warning, selected", [
    ("tiny", "squares underflow float64", None), ("zero", "X is all zeros", 0)])
@pytest.mark.parametrize("variant", ["exchange", "kdd16"])
def test_a_vanishing_or_zero_scale_is_a_warning(odd, tmp_path, name, warning, selected, variant):
    rc, out, err = run("--data", str(odd / f"{name}.npz"), "--budget", "2", "--variant", variant,
                       "--output", str(tmp_path), "--quiet", timeout=60)
    assert rc == 0, err
    # the data's warning, then (when the fit shows it) the learner's: fewer features than the budget
    lines = err.strip().splitlines()
    assert all(line.startswith("asyos: warning:") for line in lines) and warning in lines[0], err
    assert len(lines) == 1 or "selected 0 of its budget" in lines[1], err
    record = json.loads((tmp_path / "results.json").read_text())
    assert len(record["warnings"]) == len(lines) and warning in record["warnings"][0]
    if selected is not None and variant == "exchange":
        assert len(record["selected"]) == selected


def _data_run(odd, output, *extra):
    return run("--data", str(odd / "ok.svm"), "--budget", "1", "--output", str(output), "--quiet", *extra,
               timeout=60)


@pytest.mark.parametrize("name", ["results.json", "selection_log.csv"])
def test_a_result_file_that_is_a_directory_is_refused_before_the_run(odd, tmp_path, name):
    (tmp_path / name).mkdir()
    rc, out, err = _data_run(odd, tmp_path)
    assert rc == 2 and err.count("\n") == 1 and f"{name} is a directory" in err, err
    assert sorted(os.listdir(tmp_path)) == [name]          # nothing computed, nothing written


def test_an_output_that_is_a_file_is_refused(odd, tmp_path):
    (tmp_path / "f").write_text("keep")
    rc, out, err = _data_run(odd, tmp_path / "f")
    assert rc == 2 and "is a file, not a directory" in err, err
    assert (tmp_path / "f").read_text() == "keep"


def test_a_used_output_is_refused_unless_overwrite_which_removes_every_old_file(odd, tmp_path):
    out = tmp_path / "o"
    assert _data_run(odd, out)[0] == 0
    first = (out / "results.json").read_text()
    assert (out / "results.json").stat().st_mode & 0o777 == 0o666 & ~_umask()
    assert (out / "selection_log.csv").stat().st_size > 0
    rc, _, err = _data_run(odd, out)                        # a rerun does not mix with the old results
    assert rc == 2 and "holds a previous run's files" in err and "--overwrite" in err, err
    assert (out / "results.json").read_text() == first
    (out / "checkpoint").mkdir()                             # what an interrupted MPI run leaves
    (out / "checkpoint" / "rank-1.pkl").write_bytes(b"x")
    (out / "asyos-rank1-traceback-7.txt").write_text("old")
    (out / "notes.txt").write_text("the user's")
    rc, _, err = _data_run(odd, out, "--budget", "9", "--overwrite")     # fails on its input
    assert rc == 2 and "budget 9" in err, err
    assert sorted(os.listdir(out)) == ["notes.txt", "run_config.json"]  # no stale result survives
    rc, _, err = _data_run(odd, out, "--overwrite")
    assert rc == 0, err
    assert {"results.json", "selection_log.csv", "notes.txt"} <= set(os.listdir(out))


def test_overwrite_from_a_toml_file(odd, tmp_path):
    out = tmp_path / "o"
    assert _data_run(odd, out)[0] == 0
    config = tmp_path / "c.toml"
    config.write_text(f"[run]\noverwrite = true\noutput = '{out}'\n")
    rc, _, err = run("--config", str(config), "--data", str(odd / "ok.svm"), "--budget", "1", "--quiet", timeout=60)
    assert rc == 0, err


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_prepare_output_dir_accepts_a_used_directory_to_resume(tmp_path):
    from asyos.errors import InputError
    from asyos.records.results import prepare_output_dir
    (tmp_path / "results.json").write_text("{}")
    (tmp_path / "checkpoint.pkl").write_bytes(b"state")
    with pytest.raises(InputError, match="previous run's files"):
        prepare_output_dir(str(tmp_path))
    from asyos.records.output_lock import LOCK_FILE, release_outputs
    try:
        prepare_output_dir(str(tmp_path), resume=True, overwrite=True)      # resuming never removes anything
        assert sorted(os.listdir(tmp_path)) == [LOCK_FILE, "checkpoint.pkl", "results.json"]   # held: in use
        prepare_output_dir(str(tmp_path), overwrite=True)
        assert os.listdir(tmp_path) == [LOCK_FILE]
    finally:
        release_outputs()
    assert os.listdir(tmp_path) == []


def test_atomic_file_leaves_the_old_file_when_writing_fails(tmp_path):
    from asyos.records.results import atomic_file
    path = tmp_path / "selection_log.csv"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_file(str(path)) as fh:
            fh.write("half")
            raise RuntimeError("killed")
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["selection_log.csv"]
    with atomic_file(str(path)) as fh:
        fh.write("new\n")
    assert path.read_text() == "new\n" and path.stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_a_namespace_import_of_the_package_does_not_fail_the_run(tmp_path):
    """Run from the directory holding a checkout named ``asyos``, the package was a namespace
    package without ``__version__``: the environment record raised ImportError after the fit."""
    package = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "asyos")
    script = (f"import sys, types\nns = types.ModuleType('asyos')\nns.__path__ = [{package!r}]\n"
              f"sys.modules['asyos'] = ns\nfrom asyos.cli.run import main\n"
              f"sys.exit(main(['--n-features', '40', '--n-informative', '3', '--quiet',\n"
              f"               '--output', {str(tmp_path)!r}]))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    from importlib.metadata import version
    env = json.loads((tmp_path / "results.json").read_text())["environment"]
    assert env["asyos"] == version("asyos") and env["python"]
