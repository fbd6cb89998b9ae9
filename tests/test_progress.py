"""Progress lines on stderr (``asyos.utils.progress``): shown with ``-v`` (stderr a file), not by default
there nor with ``-q``, throttled, naming what is done of what; never changing a result."""
import json
import re

import numpy as np
import pytest

from asyos.utils.logs import configure
from asyos.utils.progress import ENV, Progress, ProgressPoller
from asyos.cli.run import main

SMALL = ["--n-features", "1500", "--n-informative", "20", "--passes", "2", "--seed", "3"]


@pytest.fixture
def fast_lines(monkeypatch):
    """Lines every 10 ms (the default waits 2 s for the first one)."""
    monkeypatch.setenv(ENV, "0.01")
    yield
    configure()


def _progress(err):
    return [ln for ln in err.splitlines() if re.match(r"asyos: [^ ]+.*: .* of \d+ ", ln) or " steps/s" in ln]


def test_verbose_writes_lines_naming_done_and_total(fast_lines, capsys):
    assert main([*SMALL, "-v"]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("asyos: os: ")]
    assert len(lines) >= 2, err
    done = [int(re.search(r"(\d+) of 3000 feature visits \(\d+%\)", ln).group(1)) for ln in lines]
    assert done == sorted(done) and 0 < done[-1] <= 3000
    assert all("feature visits/s" in ln and "objective " in ln for ln in lines)
    assert any("ETA " in ln for ln in lines)


def test_auto_passes_say_when_the_pass_ends(fast_lines, capsys):
    """With passes until the selection is stable there is no total, so no ETA: the line says when the current
    pass ends instead (the time left the user can be given)."""
    assert main(["--n-features", "20000", "--n-informative", "20", "--seed", "3", "-v"]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("asyos: os: ")]
    assert lines and all("ETA" not in ln for ln in lines)
    assert any(re.search(r"pass ends in [0-9.]+ s", ln) for ln in lines), lines


def test_default_and_quiet_write_none_when_stderr_is_not_a_terminal(fast_lines, capsys):
    assert main(SMALL) == 0
    captured = capsys.readouterr()
    assert "selected" in captured.out and captured.err == ""
    assert main([*SMALL, "-q"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""


def test_a_short_run_stays_silent_with_the_default_interval(monkeypatch, capsys):
    monkeypatch.delenv(ENV, raising=False)
    assert main(["--n-features", "300", "--n-informative", "10", "-v"]) == 0
    assert capsys.readouterr().err == ""
    configure()


@pytest.mark.parametrize("args", [[], ["--algorithm", "asy-os"],
                                  ["--algorithm", "b-arda", "--synthetic", "classification"]])
def test_results_are_the_same_with_and_without_progress(fast_lines, tmp_path, capsys, monkeypatch, args):
    monkeypatch.setenv(ENV, "0")                    # a line at every poll
    records = []
    for name, flag in (("quiet", "-q"), ("verbose", "-v")):
        out = tmp_path / name
        # a third of SMALL's features: a line at every poll costs an objective each (51 s at SMALL for asy-os)
        assert main([*SMALL, "--n-features", "500", *args, flag, "--output", str(out)]) == 0
        records.append(json.loads((out / "results.json").read_text()))
    err = capsys.readouterr().err
    assert _progress(err), err                      # the second run did print lines
    quiet, verbose = records
    assert quiet["selected"] == verbose["selected"] and quiet["coef"] == verbose["coef"]
    assert quiet["metrics"] == verbose["metrics"]


def test_a_progress_poller_polled_at_every_step_changes_no_fit(fast_lines, monkeypatch):
    from asyos.learners.stream.budgeted import BudgetedARDA
    from asyos.learners.substitution.online_substitution import OnlineSubstitution
    monkeypatch.setenv(ENV, "0")
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, 60))
    y = X[:, :4] @ np.array([1.0, -2.0, 1.5, 0.7]) + 0.01 * rng.standard_normal(1000)
    configure(verbose=1, stream=open("/dev/null", "w"))
    for make, target in ((lambda: OnlineSubstitution(budget=4, passes=2), y),
                         (lambda: BudgetedARDA(budget=4, passes=3, random_state=0), np.sign(y))):
        poller = ProgressPoller(Progress("t").polled())
        plain, polled = make().fit(X, target), make().fit(X, target, checkpoint=poller)
        assert poller.reporter.lines > 0
        np.testing.assert_array_equal(plain.coef_, polled.coef_)


def test_the_sample_stream_learners_count_rows_of_a_file(fast_lines, tmp_path, capsys):
    from sklearn.datasets import dump_svmlight_file
    rng = np.random.default_rng(1)
    X = rng.standard_normal((3000, 40))
    path = tmp_path / "d.svm"
    dump_svmlight_file(X, np.sign(X[:, 0] + 0.1), str(path))
    assert main(["--algorithm", "b-arda", "--data", str(path), "--budget", "5", "--passes", "2",
                 "--chunk-rows", "50", "-v"]) == 0
    err = capsys.readouterr().err
    rows = [ln for ln in err.splitlines() if ln.startswith("asyos: b-arda: ")]
    assert rows and all(re.search(r"\d+ of 6000 rows", ln) and "rows/s" in ln for ln in rows), err
    assert re.search(r"asyos: scanning .*d\.svm: [\d.]+ of [\d.]+ MB", err), err


def test_tune_says_which_point_of_how_many_and_the_best_so_far(fast_lines, capsys, monkeypatch):
    monkeypatch.setenv(ENV, "0")
    from asyos.learners.stream.budgeted import BudgetedARDA
    from asyos.learners.stream.tuning import grid_search
    configure(verbose=1)
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 20))
    grid_search(BudgetedARDA(budget=3, random_state=0), X, np.sign(X[:, 0]), grid={"eta": [0.1, 0.01, 0.001]})
    lines = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("asyos: --tune BudgetedARDA: ")]
    assert lines and all(re.search(r"best so far eta=[\d.e-]+ \(train score [\d.]+\), [123] of 3 points", ln)
                         for ln in lines), lines


def test_the_throttle_writes_at_most_one_line_per_interval(monkeypatch, capsys):
    import asyos.utils.progress as progress
    monkeypatch.setenv(ENV, "3600")
    configure(verbose=1)
    reporter = Progress("x", 10)
    for _ in range(10):
        reporter.advance(1)
    assert reporter.lines == 0 and capsys.readouterr().err == ""
    monkeypatch.setattr(progress.time, "monotonic", lambda: reporter.start + 3601)
    reporter.advance(0)
    assert capsys.readouterr().err == "asyos: x: 10 of 10 rows (100%), 0.00278 rows/s, 1 h 00 min\n"
    configure()


def test_a_phase_without_a_loop_says_it_is_still_working_unless_a_loop_does(monkeypatch, capsys):
    import time
    from asyos.utils.progress import phase
    monkeypatch.setenv(ENV, "0.05")
    configure(verbose=1)
    with phase("loading x"):
        time.sleep(0.4)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) >= 3 and all(re.fullmatch(r"asyos: loading x: \d+ s", ln) for ln in lines), lines
    reporter = Progress("loop", 100)
    with phase("fitting"):
        for _ in range(40):                     # the loop's own lines keep the phase's quiet
            reporter.line()
            time.sleep(0.01)
    err = capsys.readouterr().err
    assert "loop: " in err and "fitting" not in err, err
    configure(quiet=True)
    with phase("silent"):
        time.sleep(0.2)
    assert capsys.readouterr().err == ""
    configure()
