"""Wire layout of the Asy-OS hot-path messages: flat float64 buffers, no pickling.

A push is ``[delta_u (n) | version_read | steps | own_unseen | count | |w_1| .. |w_cap|]``: ``steps``
is how many worker steps the push sums, ``own_unseen`` how many of the worker's own earlier pushes its
steps saw although the snapshot did not (they were in flight); ``count`` and the ``|w|`` that follow
are the worker's retained weights (read by the central node under the global budget). A reply is
``[u_C (n) | version | status | steps | top |w| of the other workers (global budget only)]``
(``steps``: the worker steps ``u_C`` holds).
Versions are counters below ``2**53``, exact in float64. Setup, final results and error reports
are pickled (off the hot path).
"""
from __future__ import annotations

import numpy as np

PUSH_HEADER = 3
PUSH_VERSION, PUSH_STEPS, PUSH_OWN_UNSEEN = 0, 1, 2     # offsets after the n values
PUSH_COUNT = PUSH_HEADER                                # then the retained weights

REPLY_HEADER = 3
REPLY_VERSION, REPLY_STATUS, REPLY_STEPS = 0, 1, 2
REPLY_OTHERS = REPLY_HEADER                             # then the others' top |w| (global budget)
STATUS_ACCEPTED, STATUS_REFUSED = 1.0, 0.0

# MPI tags
TAG_PUSH, TAG_REPLY, TAG_FINAL, TAG_ERROR, TAG_SHUTDOWN, TAG_ALIVE = 11, 12, 13, 14, 15, 16


def push_buffer(n: int, budget: int = 0) -> np.ndarray:
    """A push with room for ``budget`` retained weights."""
    return np.zeros(n + PUSH_HEADER + 1 + budget)


def write_weights(buffer: np.ndarray, n: int, weights) -> None:
    """The retained ``|w|`` into a push's weight section."""
    k = len(weights)
    buffer[n + PUSH_COUNT] = k
    np.abs(weights, out=buffer[n + PUSH_COUNT + 1:n + PUSH_COUNT + 1 + k])


def weights_section(buffer: np.ndarray, n: int) -> np.ndarray:
    """The view of a push where its ``|w|`` go (after ``count``)."""
    return buffer[n + PUSH_COUNT + 1:]


def read_weights(buffer: np.ndarray, n: int) -> np.ndarray:
    k = int(buffer[n + PUSH_COUNT])
    return buffer[n + PUSH_COUNT + 1:n + PUSH_COUNT + 1 + k]


def reply_buffer(n: int, others: int = 0) -> np.ndarray:
    """A reply with room for ``others`` values of the other workers' top ``|w|``."""
    return np.zeros(n + REPLY_HEADER + others)


def others_section(reply: np.ndarray, n: int) -> np.ndarray:
    """The view of a reply that holds the other workers' top ``|w|`` (empty without a global budget)."""
    return reply[n + REPLY_OTHERS:]
