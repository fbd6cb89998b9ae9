"""``run.png`` of every ``--output`` run, ``python -m asyos.report DIR``, and the automatic trace behind them."""
import json
import sys

import numpy as np
import pytest

from asyos.cli.report import main as report_command
from asyos.runs import report
from asyos.cli.run import main
from asyos.learners.trace import AUTO_MAX_ROWS, ObjectiveTrace, StreamTrace

SMALL = ["--n-features", "300", "--n-informative", "10", "--passes", "2"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(autouse=True)
def pictures_on(monkeypatch):
    """tests/conftest.py turns the pictures off for the rest of the suite."""
    monkeypatch.setenv(report.PICTURE_ENV, "1")


def run_cli(args, capsys):
    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    import matplotlib.image
    image = matplotlib.image.imread(str(path))
    assert image.ndim == 3 and image.shape[0] > 200 and image.shape[1] > 200
    assert np.ptp(image[..., :3]) > 0                    # not a blank canvas


def panels_of(directory):
    record, log = report.read_run(str(directory))
    return report.panels(record, log, str(directory))


def test_os_run_draws_its_picture_and_says_where(tmp_path, capsys):
    status, out, err = run_cli([*SMALL, "--output", str(tmp_path)], capsys)
    assert status == 0, err
    assert f"  picture: {tmp_path / 'run.png'}" in out
    assert_png(tmp_path / "run.png")
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["trace"]["every"] == "auto" and len(record["trace"]["time_s"]) >= 2
    assert record["trace"]["steps"][-1] >= record["trace"]["steps"][0]
    assert panels_of(tmp_path) == ["progress_time", "progress_steps", "selection_count", "selection_raster"]


def test_simulator_picture_has_the_staleness(tmp_path, capsys):
    status, out, err = run_cli([*SMALL, "--simulate", "--workers", "3", "--output", str(tmp_path)], capsys)
    assert status == 0, err
    assert_png(tmp_path / "run.png")
    names = panels_of(tmp_path)
    assert "staleness" in names and "progress_time" in names and "selection_raster" in names
    assert "workers" not in names                         # the simulator records no per-worker entries


def test_a_simulated_sample_stream_run_draws_its_staleness(tmp_path, capsys):
    """The sample-stream simulator writes its histogram as ``{staleness: count}`` (string keys in the
    JSON); the picture and ``python -m asyos.report`` read it as the engine's list (they failed with
    a TypeError on README's ``--algorithm b-amd --simulate`` example)."""
    status, out, err = run_cli(["--algorithm", "b-amd", "--n-features", "60", "--n-informative", "5",
                                "--synthetic", "classification", "--simulate", "--workers", "3",
                                "--output", str(tmp_path)], capsys)
    assert status == 0, err
    assert "no picture drawn" not in out + err
    record = json.loads((tmp_path / "results.json").read_text())
    assert isinstance(record["staleness"]["histogram"], dict)
    assert_png(tmp_path / "run.png")
    assert "staleness" in panels_of(tmp_path)
    assert report_command([str(tmp_path)]) == 0


def test_b_arda_in_memory_and_from_a_file_trace_learning_and_selection(tmp_path, capsys):
    from sklearn.datasets import dump_svmlight_file
    args = ["--algorithm", "b-arda", "--synthetic", "classification", "--n-features", "300", "--n-informative", "10",
            "--budget", "10"]
    status, out, err = run_cli([*args, "--output", str(tmp_path / "mem")], capsys)
    assert status == 0, err
    assert_png(tmp_path / "mem" / "run.png")
    record = json.loads((tmp_path / "mem" / "results.json").read_text())
    trace = record["trace"]
    assert trace["kind"] == "stream" and trace["rows"][-1] == record["n_samples_seen"]
    assert trace["support"][-1] == len(record["selected"]) and trace["entered"][-1] >= trace["support"][-1]
    assert trace["mistakes"][-1] == round((1 - record["online_accuracy"]) * record["n_samples_seen"])
    names = panels_of(tmp_path / "mem")
    assert names[:3] == ["stream_learning", "stream_support", "selection_raster"]
    # the same learner reading a libsvm file as it streams
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 40)) * (rng.random((400, 40)) < 0.3)
    y = np.where(X[:, :4].sum(axis=1) > 0, 1, -1)
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"), zero_based=True)
    status, out, err = run_cli(["--algorithm", "b-arda", "--data", str(tmp_path / "d.svm"), "--budget", "4",
                                "--chunk-rows", "50", "--output", str(tmp_path / "file")], capsys)
    assert status == 0, err
    assert_png(tmp_path / "file" / "run.png")
    record = json.loads((tmp_path / "file" / "results.json").read_text())
    assert record["mode"] == "streamed" and record["trace"]["rows"][-1] == record["n_samples_seen"]
    log = (tmp_path / "file" / "selection_log.csv").read_text().splitlines()
    entered = {int(line.split(",")[3]) for line in log[1:] if line.split(",")[4] == "enter"}
    assert set(record["selected"]) <= entered


def test_running_averages_and_dfls_draw_what_they_have(tmp_path, capsys):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 30))
    y = X[:, :3] @ np.array([2.0, -1.5, 1.0]) + 0.01 * rng.normal(size=300)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    status, out, err = run_cli(["--algorithm", "ofsa", "--data", str(tmp_path / "d.npz"), "--budget", "3",
                                "--output", str(tmp_path / "ofsa")], capsys)
    assert status == 0, err
    assert_png(tmp_path / "ofsa" / "run.png")
    assert panels_of(tmp_path / "ofsa") == ["coefficients"]
    status, out, err = run_cli(["--algorithm", "dfls", "--n-samples", "200", "--n-features", "20",
                                "--n-informative", "5", "--output", str(tmp_path / "dfls")], capsys)
    assert status == 0, err
    assert "picture:" in out
    assert_png(tmp_path / "dfls" / "run.png")
    assert panels_of(tmp_path / "dfls") == ["dfls_path", "coefficients"]


def test_report_redraws_a_finished_run(tmp_path, capsys):
    status, _, err = run_cli([*SMALL, "--output", str(tmp_path), "--quiet"], capsys)
    assert status == 0, err
    (tmp_path / "run.png").unlink()
    assert report_command([str(tmp_path)]) == 0
    assert_png(tmp_path / "run.png")
    assert report_command([str(tmp_path), "--output", str(tmp_path / "other.png")]) == 0
    assert_png(tmp_path / "other.png")
    assert report_command([str(tmp_path / "nothing")]) == 2
    assert "no results.json" in capsys.readouterr().err


def test_without_matplotlib_the_run_succeeds_with_one_line(tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)       # import matplotlib raises ImportError
    status, out, err = run_cli([*SMALL, "--output", str(tmp_path)], capsys)
    assert status == 0
    assert not (tmp_path / "run.png").exists() and "picture:" not in out
    lines = [line for line in err.splitlines() if "picture" in line]
    assert lines == ["asyos: no picture drawn: matplotlib is not installed (pip install 'asyos[plot]')"]
    assert report_command([str(tmp_path)]) == 2
    assert "pip install 'asyos[plot]'" in capsys.readouterr().err


def test_a_failure_to_draw_is_one_warning(tmp_path, capsys, monkeypatch):
    def broken(directory, output=None):
        raise ValueError("cannot draw")
    monkeypatch.setattr(report, "draw_run", broken)
    status, out, err = run_cli([*SMALL, "--output", str(tmp_path)], capsys)
    assert status == 0 and (tmp_path / "results.json").exists()
    assert "asyos: warning: no picture drawn: ValueError: cannot draw" in err


def test_panels_follow_the_data():
    base = {"algorithm": "os", "mode": "sequential", "problem": {"budget": 2, "loss": "squared"},
            "selected": [1, 4], "coef": [0.5, -1.0], "metrics": {}}
    assert report.panels(base) == ["coefficients"]
    traced = dict(base, trace={"every": "auto", "time_s": [0.0, 1.0], "steps": [0, 5], "objective": [1.0, 0.5],
                               "train_error": [1.0, 0.7]})
    assert report.panels(traced) == ["progress_time", "progress_steps"]
    log = [{"worker": "0", "step": "1", "pass": "0", "feature": "4", "event": "enter", "weight": "1"}]
    parallel = dict(traced, staleness={"histogram": [3, 1], "mean": 0.25, "p95": 1, "max": 1}, n_workers=2,
                    workers=[{"rank": 1, "steps": 3}, {"rank": 2, "steps": 2}])
    assert report.panels(parallel, log) == ["progress_time", "progress_steps", "selection_count", "selection_raster",
                                            "staleness", "workers"]
    idle = dict(parallel, staleness={"histogram": [0], "mean": 0, "p95": 0, "max": 0})
    assert "staleness" not in report.panels(idle, log)
    stream = dict(base, trace={"every": "auto", "kind": "stream", "time_s": [0.0, 1.0], "rows": [10, 20],
                               "pass": [0, 0], "mistakes": [None, None], "support": [1, 2], "entered": [1, 2],
                               "left": [0, 0]})
    assert report.panels(stream) == ["stream_support", "coefficients"]       # regression: no mistake rate


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Loss:
    def value(self, y, u):
        return float(np.sum((y - u) ** 2))

    def error(self, y, u):
        return 0.0


class FakeCentral:
    version = steps = 0
    u = np.zeros(3)


def test_the_automatic_trace_keeps_few_rows_however_long_the_run():
    clock = FakeClock()
    trace = ObjectiveTrace("auto", Loss(), np.ones(3), clock=clock)
    central = FakeCentral()
    for step in range(200000):                     # 2000 s of steps of 10 ms each
        clock.now += 0.01
        central.steps = central.version = step
        trace(central)
    times = np.asarray(trace.as_dict()["time_s"])
    assert AUTO_MAX_ROWS // 2 <= times.size <= AUTO_MAX_ROWS
    assert times[0] < 0.1 and times[-1] > 1900          # spread over the whole run
    gaps = np.diff(times)
    assert gaps.max() < 10 * np.median(gaps)


def test_the_automatic_trace_does_not_change_the_fit(tmp_path):
    from asyos.records.checkpoint import Checkpointer
    from asyos.data.synthetic import make_classification, make_regression
    from asyos.learners.stream.budgeted import BudgetedARDA
    from asyos.learners.substitution.asy_os import AsyncOnlineSubstitution
    from asyos.learners.substitution.online_substitution import OnlineSubstitution
    data = make_regression(n_features=400, n_informative=10, seed=2)
    for make in (lambda every: OnlineSubstitution(budget=10, trace_every=every),
                 lambda every: AsyncOnlineSubstitution(budget=10, n_workers=3, trace_every=every, random_state=1)):
        plain, traced = make(0).fit(data.X, data.y), make("auto").fit(data.X, data.y)
        assert plain.trace_ is None and len(traced.trace_["time_s"]) >= 2
        assert plain.support_.tolist() == traced.support_.tolist()
        assert np.array_equal(plain.coef_, traced.coef_)
        assert [tuple(r.values()) for r in plain.selection_log_] == [tuple(r.values()) for r in traced.selection_log_]
    data = make_classification(n_features=300, n_informative=10, seed=4)
    plain = BudgetedARDA(budget=10, passes=3).fit(data.X, data.y)
    checkpoint = Checkpointer(str(tmp_path / "cp.pkl"), None)
    traced = BudgetedARDA(budget=10, passes=3).fit(data.X, data.y, checkpoint=checkpoint)
    assert np.array_equal(plain.coef_, traced.coef_) and len(traced.trace_["rows"]) >= 2


def test_stream_trace_counts_entries_and_exits():
    class Learner:
        online_accuracy_ = 0.5             # a classifier: its mistakes are counted

        def __init__(self):
            self._state = type("S", (), {"counts": np.array([0, 0, 0, 0])})()
            self.kept = (np.array([], dtype=np.int64), np.array([]))

        def _kept(self, state):
            return self.kept

    learner = Learner()
    trace = StreamTrace(clock=FakeClock())
    for seen, kept in ((10, [1, 2]), (20, [2, 5]), (30, [5, 7, 8])):
        learner._state.counts = np.array([seen, 0, 0, seen // 10])
        learner.kept = (np.array(kept), np.ones(len(kept)))
        trace.record(learner, 0)
    out = trace.finish(learner, 0)
    assert out["support"] == [2, 2, 3, 3] and out["entered"] == [2, 3, 5, 5] and out["left"] == [0, 1, 2, 2]
    assert out["mistakes"] == [1, 2, 3, 3]
    assert [(r["step"], r["feature"], r["event"]) for r in trace.log()] == [
        (10, 1, "enter"), (10, 2, "enter"), (20, 1, "leave"), (20, 5, "enter"), (30, 2, "leave"), (30, 7, "enter"),
        (30, 8, "enter")]


def test_no_picture_flag_and_environment(tmp_path, capsys, monkeypatch):
    status, out, _ = run_cli([*SMALL, "--output", str(tmp_path / "a"), "--no-picture"], capsys)
    assert status == 0 and "picture:" not in out and not (tmp_path / "a" / "run.png").exists()
    monkeypatch.setenv(report.PICTURE_ENV, "0")
    status, out, _ = run_cli([*SMALL, "--output", str(tmp_path / "b")], capsys)
    assert status == 0 and "picture:" not in out and not (tmp_path / "b" / "run.png").exists()


def test_the_progress_panel_marks_the_final_models_test_score():
    """Where the run has a test split, the objective panel marks the final model's test error beside the
    training curve; without one it does not."""
    plt = report._pyplot()
    record = {"problem": {"loss": "squared_hinge"}, "metrics": {"test_error": 0.125},
              "trace": {"wall_s": [0.1, 0.2, 0.3], "objective": [1.0, 0.5, 0.4], "train_error": [0.3, 0.2, 0.1],
                        "every": "auto"}}
    fig, ax = plt.subplots()
    try:
        report._progress(ax, record, "wall_s", "seconds")
        labels = [line.get_label() for other in fig.axes for line in other.get_lines()]
        assert "test error rate of the final model 0.125" in labels
        fig2, ax2 = plt.subplots()
        report._progress(ax2, {**record, "metrics": {}}, "wall_s", "seconds")
        assert not any("test" in line.get_label() for other in fig2.axes for line in other.get_lines())
    finally:
        plt.close("all")


def _modes():
    from asyos.registry import all_algorithms
    for spec in all_algorithms():
        task = "regression" if spec.tasks == ("regression",) else "classification"
        yield pytest.param(spec.name, task, False, id=spec.name)
        if spec.family in ("substitution", "stream"):
            yield pytest.param(spec.name, task, True, id=f"{spec.name}-simulated")


@pytest.mark.parametrize("algorithm, task, simulated", list(_modes()))
def test_every_algorithm_and_mode_draws_its_picture_with_the_summarys_time(algorithm, task, simulated, tmp_path,
                                                                           capsys):
    """Each kind of run the command line makes draws its picture, ``python -m asyos.report`` redraws it,
    and the picture's time line is the summary's (the title printed the fit's own clock before)."""
    args = ["--algorithm", algorithm, "--synthetic", task, "--n-samples", "300", "--n-features", "60",
            "--n-informative", "4", "--output", str(tmp_path)]
    if algorithm != "dfls":                 # its model is set by its l1 weight, not a budget
        args += ["--budget", "4"]
    if simulated:
        args += ["--simulate", "--workers", "3"]
    status, out, err = run_cli(args, capsys)
    assert status == 0, err
    assert f"  picture: {tmp_path / 'run.png'}" in out and "no picture" not in out + err
    assert_png(tmp_path / "run.png")
    record, _ = report.read_run(str(tmp_path))
    time_lines = [line.strip() for line in out.splitlines() if line.strip().startswith("time ")]
    assert len(time_lines) == 1
    assert report.title(record).splitlines()[-1] in time_lines[0]      # DFLS adds what its fitting covers
    (tmp_path / "run.png").unlink()
    assert report_command([str(tmp_path)]) == 0
    assert_png(tmp_path / "run.png")
