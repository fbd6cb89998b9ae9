"""One run per ``--output`` directory (``asyos.records.output_lock``): a second run, ``--overwrite`` or a
second ``--resume`` on a directory in use is refused at once with the holder named, and a lock left by a
killed run does not stop the next one."""
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from asyos.cli.run import main
from asyos.records.output_lock import LOCK_FILE

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LONG = ["--n-features", "400000", "--n-informative", "50", "--checkpoint-every", "0.2"]


def start_holder(directory, *extra, args=LONG):
    """A run writing to ``directory`` in another process, once it holds the lock."""
    env = dict(os.environ, PYTHONPATH=REPO, OPENBLAS_NUM_THREADS="1", ASYOS_PICTURE="0")
    where = [] if "--resume" in args else ["--output", str(directory)]
    proc = subprocess.Popen([sys.executable, "-m", "asyos.run", *args, *where, "--quiet", *extra],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 60
    lock = directory / LOCK_FILE
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip() and json.loads(lock.read_text())["pid"] == proc.pid:
            return proc
        if proc.poll() is not None:
            raise AssertionError(f"the holder ended early: {proc.stderr.read()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("the holder never took the lock")


def stop(proc, sig=signal.SIGKILL):
    if proc.poll() is None:
        os.killpg(proc.pid, sig)
    proc.wait(timeout=60)


@pytest.mark.timeout(120)
def test_a_second_run_on_a_directory_in_use_is_refused_with_the_holder_named(tmp_path, capsys):
    holder = start_holder(tmp_path)
    try:
        for extra in ([], ["--overwrite"]):
            started = time.monotonic()
            assert main(["--n-features", "200", "--n-informative", "5", "--output", str(tmp_path), *extra]) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and "is in use by another run" in err[0] and f"pid {holder.pid}" in err[0], err
            assert time.monotonic() - started < 30                       # at once, not after a fit
        assert holder.poll() is None                                       # the holder goes on untouched
    finally:
        stop(holder)
    # killed with its lock: the kernel released it, and the next run proceeds
    assert main(["--n-features", "200", "--n-informative", "5", "--output", str(tmp_path), "--overwrite",
                 "--quiet", "--no-picture"]) == 0
    assert json.loads((tmp_path / "results.json").read_text())["config"]["n_features"] == 200


@pytest.mark.timeout(180)
def test_one_resume_of_a_directory_at_a_time(tmp_path, capsys):
    first = start_holder(tmp_path)
    time.sleep(1.0)
    stop(first, signal.SIGTERM)                           # stopped with its state saved: resumable
    assert first.returncode == 143, first.stderr.read()
    resumed = start_holder(tmp_path, args=["--resume", str(tmp_path)])
    try:
        assert main(["--resume", str(tmp_path)]) == 2
        assert "is in use by another run" in capsys.readouterr().err
    finally:
        stop(resumed)


def test_the_lock_is_released_when_the_run_ends(tmp_path):
    args = ["--n-features", "200", "--n-informative", "5", "--output", str(tmp_path), "--quiet", "--no-picture"]
    assert main(args) == 0
    assert main([*args, "--overwrite"]) == 0                 # the same process, again: not held any more
    from asyos.records import output_lock
    assert not output_lock.holds(str(tmp_path)) and not (tmp_path / LOCK_FILE).exists()


def test_a_full_disk_ends_the_run_with_one_line_and_leaves_the_directory_as_it_was(tmp_path, capsys, monkeypatch):
    """The results and their log are written in full to temporary files first and renamed into place, the
    results last: a write that fails for want of space (here the results', after the log's) leaves
    neither, no temporary file, and exit status 74 with one line. (Measured on a real 600 KB tmpfs too:
    the same line and files, for one process and for mpiexec -n 3.)"""
    import contextlib
    import errno
    from asyos.records import results
    staging = results._staging

    @contextlib.contextmanager
    def full(path, *args, **kwargs):          # the results' temporary file is made, then the disk is full
        with staging(path, *args, **kwargs) as (fh, tmp):
            if path.endswith("results.json"):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            yield fh, tmp
    monkeypatch.setattr(results, "_staging", full)
    out = tmp_path / "run"
    assert main(["--n-features", "200", "--n-informative", "5", "--output", str(out), "--no-picture"]) == 74
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and str(out) in err[0], err
    assert sorted(os.listdir(out)) == ["run_config.json"]            # the lock file goes with the run
