"""``python -m asyos.run`` with one worker rank made to fail, for the launch tests.

Usage: ``mpiexec -n N python faulty_run.py MODE RANK AFTER [asyos.run arguments...]``

After ``AFTER`` steps (or compiled batches of steps, ``Worker.visit_view``), worker ``RANK`` raises
(``raise``), calls ``sys.exit(3)`` (``exit``), leaves without MPI noticing (``os-exit0``), kills itself
(``kill``) or hangs (``hang``).
"""
import os
import signal
import sys
import time

mode, target, after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
my_rank = int(os.environ.get("PMI_RANK", "-1"))

from asyos.learners.substitution import asy_worker as worker  # noqa: E402

original_propose = worker.Worker.propose
original_visit_view = worker.Worker.visit_view
calls = 0


def maybe_fail():
    global calls
    calls += 1
    if my_rank == target and calls > after:
        if mode == "raise":
            raise RuntimeError("injected failure")
        if mode == "exit":
            sys.exit(3)
        if mode == "os-exit0":
            os._exit(0)
        if mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "hang":
            while True:
                time.sleep(0.5)
        raise ValueError(f"unknown mode {mode}")


def failing_propose(self, u, version=0, *others_top):
    maybe_fail()
    return original_propose(self, u, version, *others_top)


def failing_visit_view(self, u, visits, others_top=None):
    maybe_fail()
    return original_visit_view(self, u, visits, others_top)


worker.Worker.propose = failing_propose
worker.Worker.visit_view = failing_visit_view

from asyos.cli.run import main  # noqa: E402

sys.exit(main(sys.argv[4:]))
