"""What this process has used: peak resident memory and bytes read, for run records and benchmarks.

Linux's ``/proc/self/status`` (``VmHWM``: the peak resident set) and ``/proc/self/io`` (``rchar``:
bytes returned by ``read``-family calls, from disk or the page cache alike, which is what a reader
asked of its files); elsewhere ``resource.getrusage`` for the peak and ``None`` for reads.
"""
from __future__ import annotations

import resource
import sys


def _proc_field(path, field):
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(field):
                    return line.split(":", 1)[1].split()
    except OSError:
        return None
    return None


def peak_rss_bytes() -> int:
    """The peak resident set size of this process, in bytes."""
    found = _proc_field("/proc/self/status", "VmHWM")
    if found:
        return int(found[0]) * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) * (1 if sys.platform == "darwin" else 1024)


def bytes_read():
    """Bytes this process has read through ``read``/``pread`` calls (``None`` where unknown)."""
    found = _proc_field("/proc/self/io", "rchar")
    return int(found[0]) if found else None
