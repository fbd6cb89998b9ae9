"""The printed summary is honest: the command's wall time with its phases named, and staleness with
its unit and a readable distribution (``asyos.utils.timing``, ``asyos.runs.summary.staleness_line``)."""
import json
import subprocess
import sys
import time

import numpy as np
import pytest

from asyos.learners.protocol.central import staleness_summary
from asyos.runs.summary import staleness_line
from asyos.utils.timing import command_timing, describe, process_start_epoch


def test_staleness_line_names_unit_percentiles_and_tail():
    hist = np.zeros(2438, dtype=np.int64)
    hist[0], hist[1], hist[2], hist[30], hist[2437] = 600, 300, 60, 30, 10
    st = staleness_summary(hist)
    assert (st["median"], st["p95"], st["p99"], st["max"]) == (0, 2, 30, 2437)
    assert st["mean"] > st["p95"]                      # the case the old line left unexplained
    line = staleness_line(st, "versions of u_C")
    assert "versions of u_C" in line
    assert "median 0, p95 2, p99 30, max 2437" in line
    assert "above p95: 4% of steps were more than 2 behind" in line
    assert "0: 60%, 1-3: 36%, 16-63: 3%, 1024-2437: 1%" in line
    shares = [float(part.split(": ")[1].rstrip("%")) for part in line.split("; ")[-1].split(", ")]
    assert sum(shares) == pytest.approx(100, abs=0.5)


def test_staleness_line_without_a_tail_and_as_a_dict():
    st = staleness_summary([5, 5])
    line = staleness_line(st, "versions of the shared model")
    assert "above p95" not in line and "0: 50%, 1: 50%" in line
    st_dict = dict(st, histogram={0: 5, 1: 5})
    assert staleness_line(st_dict, "versions of the shared model") == line


def test_command_timing_phases_add_up():
    assert process_start_epoch() <= time.time()
    t0 = time.perf_counter()
    time.sleep(0.05)
    timing = command_timing(t0, load_s=0.02, fit_s=0.02)
    assert timing["phases"] == ["startup_s", "load_s", "fit_s", "other_s"]
    total = sum(timing[k] for k in timing["phases"])
    assert total == pytest.approx(timing["command_s"], abs=1e-9)
    assert timing["other_s"] >= 0.009                   # the sleep's remainder
    assert timing["startup_s"] >= 0
    assert describe(timing).startswith(f"time {timing['command_s']:.2f} s (start-up ")


def test_cli_time_is_the_commands_wall_time(tmp_path):
    out = tmp_path / "run"
    started = time.time()
    done = subprocess.run([sys.executable, "-m", "asyos.run", "--n-features", "400", "--n-informative", "10",
                           "--output", str(out), "--no-picture"], capture_output=True, text=True, timeout=120)
    outside = time.time() - started
    assert done.returncode == 0, done.stderr
    timing = json.loads((out / "results.json").read_text())["timing"]
    # measured from the process's start, so start-up (imports: most of a small run) is counted
    assert 0.7 * outside - 0.1 <= timing["command_s"] <= outside
    assert timing["startup_s"] > 0.1                    # python, numpy, scikit-learn imports
    line = next(line for line in done.stdout.splitlines() if line.strip().startswith("time "))
    assert f"time {timing['command_s']:.2f} s (start-up {timing['startup_s']:.2f} s, loading " in line
    assert "fitting" in line
