"""Wire layout of the Asy-OS hot-path messages: flat float64 buffers, no pickling.

A push is ``[delta_u (n) | version_read | steps | own_unseen]``: ``steps`` is how many worker steps
the push sums, ``own_unseen`` how many of the worker's own earlier pushes its steps saw although the
snapshot did not (they were in flight). A reply is ``[u_C (n) | version | status]``.
Versions are counters below ``2**53``, exact in float64. Setup, final results and error reports
are pickled (off the hot path).
"""
from __future__ import annotations

import numpy as np

PUSH_HEADER = 3
PUSH_VERSION, PUSH_STEPS, PUSH_OWN_UNSEEN = 0, 1, 2     # offsets after the n values

REPLY_HEADER = 2
REPLY_VERSION, REPLY_STATUS = 0, 1
STATUS_ACCEPTED, STATUS_REFUSED = 1.0, 0.0

# MPI tags
TAG_PUSH, TAG_REPLY, TAG_FINAL, TAG_ERROR, TAG_SHUTDOWN = 11, 12, 13, 14, 15


def push_buffer(n: int) -> np.ndarray:
    return np.zeros(n + PUSH_HEADER)


def reply_buffer(n: int) -> np.ndarray:
    return np.zeros(n + REPLY_HEADER)
