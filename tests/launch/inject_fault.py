"""``python -m asyos.run`` with one rank made to fail after a wall-clock delay, for fault tables.

Usage::

    mpiexec -n N python tests/launch/inject_fault.py MODE RANK AFTER_S [asyos.run arguments...]

The process whose ``PMI_RANK`` is ``RANK`` injects ``MODE`` ``AFTER_S`` seconds after the wrapper
started (``signal.setitimer(ITIMER_REAL)`` and a SIGALRM handler, so nothing of asyos' internals is
patched and the fault lands wherever the rank happens to be; an exception is never raised inside a callback
from C, which would drop it, but as soon as the rank is back in Python code):

* ``freeze``: SIGSTOP to itself (the process stays alive but never runs again);
* ``exit0`` / ``exit1``: ``sys.exit(0)`` / ``sys.exit(1)`` raised from the handler;
* ``raise``: ``RuntimeError("injected failure")`` raised from the handler;
* ``kill``: SIGKILL to itself;
* ``os-exit0``: ``os._exit(0)`` (neither MPI nor Python sees it coming).

Just before injecting, the rank writes ``inject_fault: rank R MODE at T s (epoch E) in F1 > F2 > ...``
to stderr, so a run's log shows that, when and where the fault was injected: ``E`` is ``time.time()``,
``F1 > F2 > ...`` the asyos functions on the rank's stack, outermost first (which phase the fault
hit: a busy machine can stretch the setup past ``AFTER_S``).

Under hydra ``asyos.run`` forks the rank and stays its supervisor (``asyos/distributed/supervisor.py``).
The timer is armed only in the process that runs the rank, never in the supervisor: at once when the
run is unsupervised, else in the forked child (``os.register_at_fork``: timers are not inherited by a
fork). ``AFTER_S`` counts from when hydra started the wrapper, not from the child's (later) start.
"""
import os
import signal
import sys
import time

MODES = ("freeze", "exit0", "exit1", "raise", "kill", "os-exit0")
T0_ENV = "INJECT_FAULT_T0"


def start_time() -> float:
    """The wrapper's start (epoch seconds): given in ``INJECT_FAULT_T0``, else now."""
    if T0_ENV not in os.environ:
        os.environ[T0_ENV] = repr(time.time())
    return float(os.environ[T0_ENV])


def inject(mode: str):
    """Do ``mode`` to this process (from the SIGALRM handler)."""
    if mode == "freeze":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif mode == "exit0":
        sys.exit(0)
    elif mode == "exit1":
        sys.exit(1)
    elif mode == "raise":
        raise RuntimeError("injected failure")
    elif mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif mode == "os-exit0":
        os._exit(0)


def where(frame, depth: int = 16) -> str:
    """The functions of the ``asyos`` package on the stack (the innermost ``depth``), outermost first."""
    names = []
    while frame is not None and len(names) < depth:
        if f"{os.sep}asyos{os.sep}" in frame.f_code.co_filename:
            names.append(frame.f_code.co_name)
        frame = frame.f_back
    return " > ".join(reversed(names)) or "?"


# Modes that raise from the handler: not inside a callback from C, which would print and drop the
# exception (``asyos.records.checkpoint.in_foreign_callback``: numba's object cache, which llvmlite calls
# through ctypes while a rank loads its kernels; a clean clone's CI once caught ``raise`` there and
# the run finished with exit 0).
RAISING = ("exit0", "exit1", "raise")
RETRY_S = 0.02


def arm(mode: str, rank: str, after_s: float, t0: float):
    """Set a one-shot real-time timer that announces the fault on stderr and then injects it; an
    exception that would be raised inside a callback from C (and dropped there) waits until the
    rank is back in Python code that propagates it, checked every ``RETRY_S``."""
    from asyos.records.checkpoint import in_foreign_callback     # imported before the timer is armed
    def handler(_signum, frame):
        if mode in RAISING and in_foreign_callback(frame):
            signal.setitimer(signal.ITIMER_REAL, RETRY_S)
            return
        now = time.time()
        marker = f"inject_fault: rank {rank} {mode} at {now - t0:.2f} s (epoch {now:.3f}) in {where(frame)}\n"
        os.write(2, marker.encode())        # unbuffered: written even if the next step kills us
        inject(mode)

    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, max(after_s - (time.time() - t0), 1e-3))


def main(argv) -> int:
    if len(argv) < 3 or argv[0] not in MODES:
        sys.stderr.write(f"usage: inject_fault.py {{{'|'.join(MODES)}}} RANK AFTER_S [asyos.run args...]\n")
        return 2
    mode, rank, after_s, rest = argv[0], argv[1], float(argv[2]), argv[3:]
    t0 = start_time()
    from asyos.distributed import supervisor
    if os.environ.get("PMI_RANK") == rank:
        if not supervisor.should_supervise():
            arm(mode, rank, after_s, t0)
        else:                                   # in the rank its supervisor forks (its first fork only)
            forked = []
            def arm_once():
                if not forked:
                    forked.append(True)
                    arm(mode, rank, after_s, t0)
            os.register_at_fork(after_in_child=arm_once)
    from asyos.cli.run import main as asyos_main
    return asyos_main(rest)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
