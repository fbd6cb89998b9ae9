"""Checkpoints and resume (``asyos.records.checkpoint``, ``asyos.records.resume``): the file format and its checks,
sequential OS and the staleness simulator interrupted at seeded random steps and resumed equal to
the uninterrupted run bit for bit, and the CLI stopped by SIGTERM and continued with ``--resume``."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tests.conftest import REPO
from tests.inprocess import run_asyos

from asyos import AsyncOnlineSubstitution, OnlineSubstitution, make_classification, make_regression
from asyos.records.checkpoint import FORMAT, Checkpointer, RunInterrupted, check_header, read_header
from asyos.errors import InputError

PROBLEMS = {
    "regression": make_regression(n_samples=120, n_features=300, n_informative=8, seed=1),
    "classification": make_classification(n_samples=120, n_features=300, n_informative=8, seed=2),
}


def same_fit(a, b):
    """Every result of two fits, exactly."""
    assert np.array_equal(a.support_, b.support_)
    assert np.array_equal(a.coef_, b.coef_)
    assert a.intercept_ == b.intercept_
    assert np.array_equal(a.raw_coef_, b.raw_coef_)
    assert a.n_steps_ == b.n_steps_ and a.n_passes_ == b.n_passes_
    assert a.selection_log_ == b.selection_log_
    assert a.trace_["steps"] == b.trace_["steps"] and a.trace_["objective"] == b.trace_["objective"]
    assert a.objective_selection_ == b.objective_selection_


def interrupted_then_resumed(make, X, y, stop_after, path):
    """Fit stopped at poll ``stop_after`` (``None`` if it finished first), then resumed."""
    try:
        make().fit(X, y, checkpoint=Checkpointer(path, None, {"problem": 1}, stop_after=stop_after))
        return None
    except RunInterrupted as exc:
        assert exc.path == path and os.path.exists(path)
        assert exc.progress["steps"] <= stop_after - 1     # (the simulator polls before a retirement too)
    return make().fit(X, y, checkpoint=Checkpointer(path, None, {"problem": 1}, resume=True))


@pytest.mark.parametrize("task", sorted(PROBLEMS))
@pytest.mark.parametrize("variant", ["exchange", "kdd16"])
def test_sequential_os_resumes_bit_for_bit(task, variant, tmp_path):
    X, y = PROBLEMS[task].X, PROBLEMS[task].y

    def make():
        return OnlineSubstitution(budget=8, variant=variant, trace_every=40)

    reference = make().fit(X, y)
    rng = np.random.default_rng([7, len(task), len(variant)])
    points = [1, 2, reference.n_steps_, reference.n_steps_ + 1] + list(rng.integers(3, reference.n_steps_, 3))
    for k in points:
        resumed = interrupted_then_resumed(make, X, y, int(k), str(tmp_path / "cp.pkl"))
        assert resumed is not None, k
        same_fit(resumed, reference)


@pytest.mark.parametrize("settings", [{}, {"budget_mode": "split", "variant": "kdd16"},
                                      {"policy": "uniform", "schedule": "random"}], ids=["global", "split", "random"])
def test_the_simulator_resumes_bit_for_bit(settings, tmp_path):
    X, y = PROBLEMS["classification"].X, PROBLEMS["classification"].y

    def make():
        return AsyncOnlineSubstitution(budget=8, n_workers=3, trace_every=40, random_state=5, **settings)

    reference = make().fit(X, y)
    rng = np.random.default_rng(len(settings))
    for k in [1, reference.n_steps_ + 1] + list(rng.integers(2, reference.n_steps_, 3)):
        resumed = interrupted_then_resumed(make, X, y, int(k), str(tmp_path / "cp.pkl"))
        same_fit(resumed, reference)
        assert resumed.staleness_ == reference.staleness_


@pytest.mark.parametrize("estimator", [OnlineSubstitution, AsyncOnlineSubstitution])
def test_a_run_that_chose_its_ridge_resumes_with_that_ridge_bit_for_bit(estimator, tmp_path):
    """``ridge="auto"`` chooses before the first step; the checkpoint keeps the choice and its scores."""
    d = make_classification(n_samples=60, n_features=400, n_informative=6, seed=4)

    def make():
        return estimator(budget=6, ridge="auto", trace_every=40)

    reference = make().fit(d.X, d.y)
    assert reference.ridge_scores_ is not None
    for k in (2, reference.n_steps_ // 2):
        resumed = interrupted_then_resumed(make, d.X, d.y, int(k), str(tmp_path / "cp.pkl"))
        same_fit(resumed, reference)
        assert resumed.ridge_ == reference.ridge_ and resumed.ridge_scores_ == reference.ridge_scores_


def test_a_run_interrupted_twice_still_ends_as_the_uninterrupted_one(tmp_path):
    X, y = PROBLEMS["regression"].X, PROBLEMS["regression"].y
    path = str(tmp_path / "cp.pkl")
    reference = OnlineSubstitution(budget=8).fit(X, y)
    with pytest.raises(RunInterrupted):
        OnlineSubstitution(budget=8).fit(X, y, checkpoint=Checkpointer(path, None, {}, stop_after=50))
    with pytest.raises(RunInterrupted) as second:
        OnlineSubstitution(budget=8).fit(X, y, checkpoint=Checkpointer(path, None, {}, resume=True, stop_after=100))
    assert second.value.progress["steps"] == 49 + 99      # poll k comes before step k
    resumed = OnlineSubstitution(budget=8).fit(X, y, checkpoint=Checkpointer(path, None, {}, resume=True))
    assert np.array_equal(resumed.coef_, reference.coef_) and resumed.n_steps_ == reference.n_steps_


def test_periodic_checkpoints_do_not_change_the_result(tmp_path):
    X, y = PROBLEMS["regression"].X, PROBLEMS["regression"].y
    checkpoint = Checkpointer(str(tmp_path / "cp.pkl"), 0.0, {})     # a save at every step
    est = OnlineSubstitution(budget=8).fit(X, y, checkpoint=checkpoint)
    assert checkpoint.saves > est.n_steps_            # before every step and at the end
    reference = OnlineSubstitution(budget=8).fit(X, y)
    assert np.array_equal(est.coef_, reference.coef_)


# -- the file -----------------------------------------------------------------------------------
def saved_checkpoint(tmp_path, identity=None):
    path = str(tmp_path / "cp.pkl")
    X, y = PROBLEMS["regression"].X, PROBLEMS["regression"].y
    with pytest.raises(RunInterrupted):
        OnlineSubstitution(budget=8).fit(X, y, checkpoint=Checkpointer(path, None, identity or {"a": 1},
                                                                       stop_after=20))
    return path


def test_the_checkpoint_holds_no_copy_of_the_data(tmp_path):
    X = np.random.default_rng(0).normal(size=(100, 5000))
    y = X[:, :5] @ np.ones(5)
    path = str(tmp_path / "cp.pkl")
    with pytest.raises(RunInterrupted):
        OnlineSubstitution(budget=5).fit(X, y, checkpoint=Checkpointer(path, None, {}, stop_after=30))
    # X is 4 MB; the state is O(n s) plus the visit order (p integers)
    assert os.path.getsize(path) < 0.1 * X.nbytes


def test_the_file_is_written_with_the_usual_permissions(tmp_path):
    path = saved_checkpoint(tmp_path)
    mask = os.umask(0)
    os.umask(mask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~mask
    assert [f for f in os.listdir(tmp_path) if f.startswith(".tmp")] == []
    header = read_header(path)
    assert header["format"] == FORMAT and header["kind"] == "online-substitution"


def test_another_problem_is_refused_naming_the_difference(tmp_path):
    path = saved_checkpoint(tmp_path, {"settings": {"budget": 8}})
    with pytest.raises(InputError, match=r"another problem \(settings: \{'budget': 8\} then, \{'budget': 9\} now\)"):
        Checkpointer(path, None, {"settings": {"budget": 9}}, resume=True)


def test_another_version_is_refused(tmp_path):
    path = saved_checkpoint(tmp_path)
    with open(path, "rb") as fh:
        magic, _, line = fh.readline(), fh.readline(), fh.readline()
        rest = fh.read()
    header = json.loads(line)
    header["asyos"] = "0.0.1"
    line = json.dumps(header).encode() + b"\n"
    with open(path, "wb") as fh:                          # a well-formed checkpoint of another version
        fh.write(magic + hashlib.sha256(line).hexdigest().encode() + b"\n" + line + rest)
    with pytest.raises(InputError, match=r"written by asyos 0\.0\.1 .*rerun without --resume"):
        check_header(path, {"a": 1})


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_a_damaged_checkpoint_is_refused(tmp_path, damage):
    path = saved_checkpoint(tmp_path)
    X, y = PROBLEMS["regression"].X, PROBLEMS["regression"].y
    if damage == "truncate":
        with open(path, "r+b") as fh:
            fh.truncate(os.path.getsize(path) // 2)
        with pytest.raises(InputError, match="is damaged"):
            OnlineSubstitution(budget=8).fit(X, y, checkpoint=Checkpointer(path, None, {"a": 1}, resume=True))
    else:
        with open(path, "wb") as fh:
            fh.write(b"not a checkpoint at all")
        with pytest.raises(InputError, match="is not an asyos checkpoint"):
            Checkpointer(path, None, {"a": 1}, resume=True)


def test_a_state_of_another_learner_is_refused(tmp_path):
    path = saved_checkpoint(tmp_path)
    X, y = PROBLEMS["regression"].X, PROBLEMS["regression"].y
    with pytest.raises(InputError, match="holds a 'online-substitution' state"):
        AsyncOnlineSubstitution(budget=8).fit(X, y, checkpoint=Checkpointer(path, None, {"a": 1}, resume=True))


# -- the CLI ------------------------------------------------------------------------------------
def cli(*args):
    """``python -m asyos.run *args`` inside this process (``tests/inprocess.py``); the runs that
    receive a signal are real processes (``stop_when_saved``)."""
    status, out, err = run_asyos(*args)
    return subprocess.CompletedProcess(["python", "-m", "asyos.run", *args], status, out, err)


def stop_when_saved(args, directory, sig=signal.SIGTERM, timeout=60):
    """Start the CLI, send ``sig`` once its first checkpoint is on disk; its (rc, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "asyos.run", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while not os.path.exists(os.path.join(directory, "checkpoint.pkl")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint was written"
        time.sleep(0.05)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


@pytest.mark.parametrize("extra", [["--n-features", "6000"], ["--n-features", "3000", "--simulate", "--workers", "3"]],
                         ids=["os", "simulator"])
def test_sigterm_saves_and_resume_finishes_as_the_uninterrupted_run(tmp_path, extra):
    args = ["--n-informative", "40", "--seed", "3", *extra]
    stopped, whole = str(tmp_path / "stopped"), str(tmp_path / "whole")
    rc, err = stop_when_saved([*args, "--output", stopped, "--checkpoint-every", "0.2"], stopped)
    assert rc == 143, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("asyos: stopped by SIGTERM after steps ")
    assert f"--resume {stopped}" in lines[0]
    partial = json.load(open(os.path.join(stopped, "results.json")))
    assert partial["status"] == "interrupted" and partial["exit_status"] == 143
    assert partial["progress"]["steps"] > 0
    resumed = cli("--resume", stopped, "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert not os.path.exists(os.path.join(stopped, "checkpoint.pkl"))
    assert cli(*args, "--output", whole, "--quiet").returncode == 0
    a, b = (json.load(open(os.path.join(d, "results.json"))) for d in (stopped, whole))
    for key in ("selected", "coef", "metrics", "n_steps", "intercept"):
        assert a[key] == b[key], key
    with open(os.path.join(stopped, "selection_log.csv")) as fa, open(os.path.join(whole, "selection_log.csv")) as fb:
        assert fa.read() == fb.read()


def test_a_time_limit_stops_with_the_state_saved_and_resume_ends_as_the_uninterrupted_run(tmp_path):
    args = ["--n-features", "6000", "--n-informative", "40", "--seed", "3"]
    stopped, whole = str(tmp_path / "stopped"), str(tmp_path / "whole")
    first = cli(*args, "--output", stopped, "--time-limit", "0.3", "--quiet")
    assert first.returncode == 142, first.stderr
    assert first.stderr.startswith("asyos: stopped by the time limit (--time-limit) after steps "), first.stderr
    assert os.path.exists(os.path.join(stopped, "checkpoint.pkl"))
    resumed = cli("--resume", stopped, "--quiet")          # the spent limit is not inherited
    assert resumed.returncode == 0, resumed.stderr
    assert cli(*args, "--output", whole, "--quiet").returncode == 0
    a, b = (json.load(open(os.path.join(d, "results.json"))) for d in (stopped, whole))
    for key in ("selected", "coef", "metrics", "n_steps"):
        assert a[key] == b[key], key
    assert cli(*args, "--time-limit", "0", "--output", str(tmp_path / "z")).returncode == 2
    assert "--time-limit needs --output" in cli(*args, "--time-limit", "5").stderr


def test_sigint_exits_130(tmp_path):
    out = str(tmp_path / "out")
    rc, err = stop_when_saved(["--n-features", "6000", "--output", out, "--checkpoint-every", "0.2"], out,
                              sig=signal.SIGINT)
    assert rc == 130 and err.strip().startswith("asyos: stopped by SIGINT"), err


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run = str(tmp_path_factory.mktemp("finished") / "run")
    assert cli("--n-features", "200", "--n-informative", "5", "--output", run, "--quiet").returncode == 0
    return run


@pytest.mark.parametrize("args, message", [
    (["--resume", "{tmp}/nothing"], "not a directory"),
    (["--resume", "{tmp}"], "no run_config.json there"),
    (["--resume", "{run}", "--budget", "3"], "--budget cannot change"),
    (["--resume", "{run}"], "that run finished"),
    (["--checkpoint-every", "5"], "--checkpoint-every needs --output"),
    (["--checkpoint-every", "-1", "--output", "{tmp}/o"], "--checkpoint-every must be >= 0"),
])
def test_resume_refusals(tmp_path, finished_run, args, message):
    proc = cli(*[a.format(tmp=tmp_path, run=finished_run) for a in args])
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr


def test_a_checkpoint_of_changed_data_is_refused(tmp_path):
    from asyos.records.resume import run_identity
    from asyos.runs.config import RunConfig
    data = tmp_path / "d.npz"
    np.savez(data, X=np.ones((5, 3)), y=np.ones(5))
    before = run_identity(RunConfig(data=str(data)))
    os.utime(data, ns=(0, 0))
    after = run_identity(RunConfig(data=str(data)))
    assert before["data"][2] != after["data"][2] and before["settings"] == after["settings"]


def test_the_saved_settings_name_the_data_by_absolute_path(tmp_path, monkeypatch):
    from asyos.runs.config import RunConfig
    from asyos.records.resume import resume_settings, save_run_config
    monkeypatch.chdir(tmp_path)
    np.savez(tmp_path / "d.npz", X=np.ones((5, 3)), y=np.ones(5))
    save_run_config(RunConfig(data="d.npz", output=str(tmp_path / "out")) if os.makedirs(tmp_path / "out") is None
                    else None)
    monkeypatch.chdir("/")
    settings = resume_settings(str(tmp_path / "out"), {"quiet": True})
    assert settings["data"] == str(tmp_path / "d.npz") and settings["resume"] and settings["quiet"]


def llvmlite_callback():
    """A function that calls its argument with its own frame, as if llvmlite called Python back from C."""
    namespace = {}
    exec(compile("import sys\ndef callback(handle):\n    handle(sys._getframe())\n",
                 os.path.join(os.sep, "site-packages", "llvmlite", "binding", "executionengine.py"), "exec"),
         namespace)
    return namespace["callback"]


def wait_for_the_deferred_stop(name):
    """The deferred delivery raises ``RunInterrupted`` back in Python within 10 s (a hang guard)."""
    with pytest.raises(RunInterrupted, match=name):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            time.sleep(0.005)


def test_a_signal_caught_inside_a_callback_from_c_is_raised_once_back_in_python():
    """A stop signal whose handler runs inside a callback from C (numba's object cache, called by
    llvmlite through ctypes) would have its RunInterrupted printed and dropped there: it is
    delivered again a moment later, and raised in the code that propagates it."""
    from asyos.records.checkpoint import StopSignals
    StopSignals.install()
    try:
        llvmlite_callback()(lambda frame: StopSignals._handle(signal.SIGINT, frame))     # no raise in there
        assert StopSignals.requested == signal.SIGINT and not StopSignals.raised
        wait_for_the_deferred_stop("SIGINT")
        assert StopSignals.raised
    finally:
        StopSignals.uninstall()


def test_a_copy_of_the_signal_while_the_deferral_starts_its_timer_raises_nothing_there(monkeypatch):
    """Under ``mpiexec`` a rank may get the same stop twice (the launcher's and its supervisor's copy). When the
    copy arrives while the deferral starts its timer thread, it must not raise inside ``Thread.start`` (the half
    started thread printed "Exception ignored in thread started by ... KeyError"): the deferred delivery still
    raises, once, back in Python."""
    import threading
    from asyos.records.checkpoint import StopSignals
    start = threading.Thread.start

    def start_with_a_copy(thread):          # the copy arrives as the thread starts
        StopSignals._handle(signal.SIGTERM, sys._getframe())
        start(thread)
    monkeypatch.setattr(threading.Thread, "start", start_with_a_copy)
    StopSignals.install()
    try:
        llvmlite_callback()(lambda frame: StopSignals._handle(signal.SIGTERM, frame))   # nothing raised
        monkeypatch.setattr(threading.Thread, "start", start)
        assert StopSignals.requested == signal.SIGTERM and not StopSignals.raised
        wait_for_the_deferred_stop("SIGTERM")
        assert StopSignals.raised
    finally:
        StopSignals.uninstall()


def test_a_stack_that_starts_in_an_import_is_a_callback_from_c():
    """An import that C code started has importlib's frame outermost, and importlib's own frames run
    callbacks from C (its module locks' weakref callbacks); what a handler raises there is printed by C and
    dropped, so the signal is delivered again instead. A module's own code, imported from Python, is not."""
    from types import SimpleNamespace as F
    from asyos.records.checkpoint import in_foreign_callback

    def stack(*files):                     # outermost first
        frame = None
        for name in files:
            frame = F(f_code=F(co_filename=name), f_back=frame)
        return frame
    # the last name is the frame the signal interrupted
    assert in_foreign_callback(stack("<frozen importlib._bootstrap>", "/x/numpy/__init__.py"))
    assert in_foreign_callback(stack("/x/asyos/cli/run.py", "<frozen importlib._bootstrap>"))
    assert not in_foreign_callback(stack("/x/asyos/cli/run.py", "<frozen importlib._bootstrap>",
                                         "/x/numpy/__init__.py"))
    assert not in_foreign_callback(stack("/x/asyos/cli/run.py", "/x/asyos/runs/pipeline.py"))
    assert in_foreign_callback(stack("/x/asyos/cli/run.py", "/x/llvmlite/binding/ffi.py", "/x/numba/core.py"))


LATE_COPY = """
import os, signal, sys, time
import asyos.records.checkpoint as C
C.StopSignals.install()
C.StopSignals.polling = 1                      # inside a loop: the request is recorded
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(0.05)
assert C.StopSignals.requested == signal.SIGTERM
C.StopSignals.uninstall()                      # the run ended for it, the process is exiting
os.kill(os.getpid(), signal.SIGTERM)           # a copy of the same request arriving late: ignored
time.sleep(0.05)
print("alive", flush=True)
C.LATE_REPEAT_S = 0.0                          # past the window: the default action again
os.kill(os.getpid(), signal.SIGTERM)
time.sleep(5)
print("not killed", flush=True)
"""


def test_a_late_copy_of_the_stop_signal_does_not_kill_a_rank_that_exits_after_saving():
    """Under mpiexec a rank may get the stop twice (from the launcher and forwarded by its supervisor);
    a copy that arrives after the run ended for the first must not kill the exit (a clean clone's suite
    once saw "stopped by SIGTERM ..." followed by "rank 0 was killed by signal 15")."""
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", LATE_COPY], capture_output=True, text=True, timeout=60, env=env)
    assert proc.stdout == "alive\n", proc.stderr
    assert proc.returncode == -signal.SIGTERM, proc.stderr


def test_resume_refuses_a_damaged_or_another_runs_checkpoint_with_one_line(tmp_path, monkeypatch, capsys):
    """A flipped byte, a truncation, or the checkpoint of another run of the same settings (files swapped
    between two directories): exit 2 and one line naming the file, before anything is restored; the
    intact checkpoint then resumes to the end."""
    from asyos.cli.run import main
    args = ["--algorithm", "b-arda", "--synthetic", "classification", "--n-samples", "3000", "--n-features", "300",
            "--n-informative", "6", "--budget", "6", "--passes", "3", "--checkpoint-every", "0", "--quiet",
            "--no-picture"]
    monkeypatch.setenv("ASYOS_STOP_AFTER_POLLS", "2")
    for name in ("a", "b"):
        assert main([*args, "--output", str(tmp_path / name)]) == 143
    monkeypatch.delenv("ASYOS_STOP_AFTER_POLLS")
    capsys.readouterr()
    mine, theirs = tmp_path / "a" / "checkpoint.pkl", tmp_path / "b" / "checkpoint.pkl"
    original = mine.read_bytes()
    flipped = bytearray(original)
    flipped[-50] ^= 0x10
    for blob, said in ((theirs.read_bytes(), "belongs to another run"), (bytes(flipped), "damaged"),
                       (original[:len(original) // 2], "truncated")):
        mine.write_bytes(blob)
        assert main(["--resume", str(tmp_path / "a")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0] and str(mine) in err[0], err
    mine.write_bytes(original)
    assert main(["--resume", str(tmp_path / "a"), "--quiet"]) == 0
    assert json.loads((tmp_path / "a" / "results.json").read_text()).get("status") != "interrupted"
    assert not mine.exists()                                   # a finished run drops its checkpoint


def test_resume_takes_quiet_or_verbose_whatever_the_run_was_made_with(tmp_path, monkeypatch, capsys):
    """``--resume DIR -q`` after a run made with ``-v`` (it failed: "--quiet and --verbose contradict each
    other"), and ``-v`` after ``-q``."""
    from asyos.cli.run import main
    args = ["--algorithm", "b-arda", "--synthetic", "classification", "--n-samples", "3000", "--n-features", "300",
            "--n-informative", "6", "--budget", "6", "--passes", "3", "--checkpoint-every", "0", "--no-picture"]
    for made, then in (("-v", "-q"), ("-q", "-v")):
        out = tmp_path / made.strip("-")
        monkeypatch.setenv("ASYOS_STOP_AFTER_POLLS", "2")
        assert main([*args, made, "--output", str(out)]) == 143
        monkeypatch.delenv("ASYOS_STOP_AFTER_POLLS")
        capsys.readouterr()
        assert main(["--resume", str(out), then]) == 0, capsys.readouterr().err
        printed = capsys.readouterr().out
        assert (printed == "") == (then == "-q")
