"""Progress lines under ``mpiexec`` (``asyos.utils.progress``, ``asyos.distributed.watch``): with ``-v`` the
central rank writes one line per interval for the whole job (total steps of all workers, steps/s,
workers still running); the workers write none."""
import re
import time

from tests.launch.mpirun import asyos_run

EVERY = 0.5


def test_one_line_per_interval_from_the_central_rank_only():
    started = time.monotonic()
    rc, out, err, _ = asyos_run(4, "--n-features", "20000", "--n-informative", "40", "--seed", "4", "-v",
                                env_extra={"ASYOS_PROGRESS_EVERY": str(EVERY), "OPENBLAS_NUM_THREADS": "1"})
    wall = time.monotonic() - started
    assert rc == 0, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    # while the workers load and the ranks choose the ridge (p >= 5 n), the central rank says so
    # (asyos.utils.progress.phase); then the job's lines
    loading = [ln for ln in lines if ln.startswith("asyos: loading: the 3 workers read their shards of ")]
    lines = lines[len(loading):]
    choosing = [ln for ln in lines if ln.startswith("asyos: choosing the ridge: cross-validation on all 20000 ")]
    lines = lines[len(choosing):]
    assert all(re.fullmatch(r"asyos: loading: .*: \d+ s", ln) for ln in loading), err
    assert all(re.fullmatch(r"asyos: choosing the ridge: .*: \d+ s", ln) for ln in choosing), err
    assert lines and all(ln.startswith("asyos: asy-os, 3 workers: workers running ") for ln in lines), err
    steps = [int(re.search(r", (\d+) steps, ", ln).group(1)) for ln in lines]
    assert steps == sorted(steps), err                                           # one rank's sequence
    assert all(re.search(r"workers running [0-3] of 3, \d+ steps, \d+ steps/s, objective ", ln) for ln in lines)
    assert len(loading) + len(choosing) + len(lines) <= wall / EVERY + 2, (wall, err)           # not one per rank
    assert "selected" in out
