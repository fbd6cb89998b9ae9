"""The wall time of a command, split into the phases a user waits through.

A run's summary used to print the fit's own clock, which under ``mpiexec`` left out the start-up
(interpreter, numpy, MPI) and the loading: ``time 0.85 s`` for a command that took 6 s.
``command_timing`` measures from the moment the process started (Linux: ``/proc/self/stat``
against ``/proc/uptime``, 10 ms resolution; elsewhere from when ``asyos`` was first imported) to
now, and names ``start-up`` (until the runner began its work), the phases the runner timed
(loading, fitting, ...) and the rest (evaluation, the final refit, writing).
Under ``mpiexec`` it is the central rank's process that is timed: the launcher's own start and the
ranks' exit after the summary are not counted (1.5 s of a 10.1 s ``mpiexec -n 13 python -m asyos.run``
on 2 cores, timed from outside).
"""
from __future__ import annotations

import os
import time

_IMPORTED_AT = time.time()

# the phases a summary names, in the order it names them
PHASE_NAMES = {"startup_s": "start-up", "load_s": "loading", "fit_s": "fitting", "evaluate_s": "evaluation",
               "accumulate_s": "reading and accumulating", "reduce_s": "reduction across ranks",
               "extract_s": "extraction", "async_s": "asynchronous phase", "finish_s": "finish and evaluation",
               "connect_s": "transport set-up",
               "other_s": "the rest"}


def process_start_epoch():
    """When this process started, in seconds since the epoch (``None`` where ``/proc`` is missing)."""
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        ticks = os.sysconf("SC_CLK_TCK")
        started_after_boot = int(fields[19]) / ticks          # field 22 of proc(5): starttime
        return time.time() - (uptime - started_after_boot)
    except (OSError, ValueError, IndexError):
        return None


def command_timing(since: float, **phases) -> dict:
    """``{"command_s", "startup_s", <phases>, "other_s", "phases"}``: seconds from the process's start
    to now; the start-up, until ``since`` (the ``time.perf_counter()`` at which the runner began:
    the interpreter, the imports, parsing and, under MPI, ``MPI_Init``); each phase given
    (``load_s=..., fit_s=...``); and what remains (evaluation, the summary, the output files)."""
    now, clock = time.time(), time.perf_counter()
    start = min(process_start_epoch() or _IMPORTED_AT, _IMPORTED_AT)
    command_s = now - start
    timing = {"command_s": command_s, "startup_s": max(0.0, command_s - (clock - since))}
    timing.update({name: float(value) for name, value in phases.items()})
    named = sum(v for k, v in timing.items() if k != "command_s")
    timing["other_s"] = max(0.0, command_s - named)
    timing["phases"] = ["startup_s", *phases, "other_s"]
    return timing


def describe(timing: dict) -> str:
    """``time 6.02 s (start-up 1.10 s, loading 0.40 s, fitting 3.85 s, evaluation and output 0.67 s)``;
    records without ``command_s`` (older results) print their wall time."""
    if "command_s" not in timing:
        return f"time {timing['wall_s']:.2f} s"
    parts = [f"{PHASE_NAMES.get(k, k[:-2].replace('_', ' '))} {timing[k]:.2f} s" for k in timing["phases"]
             if k != "other_s" or timing[k] >= 0.005]
    return f"time {timing['command_s']:.2f} s ({', '.join(parts)})"
