"""A compiled libsvm/svmlight reader that works on byte blocks.

The file (a path, a ``.gz`` path read through ``gzip`` as a stream, or ``-`` for standard input) is
read in blocks of ``BLOCK_BYTES`` bytes; the last, incomplete line of a block is carried over to the
next. Each block is parsed by one compiled loop (``_parse_block``) into CSR arrays (``indptr``,
``indices`` int64, ``data`` float64) and labels (float64), so at most one block of text and its
arrays are held. The syntax is that of the previous pure-Python reader: ``label idx:val ...``,
``#`` starts a comment that runs to the end of the line, blank lines are skipped, ``qid:N`` tokens
are ignored, ``\\r\\n`` line ends are whitespace like any other, indices are non-negative integers.

**Numbers.** A label or value token of the usual decimal syntax (sign, digits, optional ``.`` and
fraction, optional exponent) with at most 19 significant digits whose integer mantissa ``m`` is
``<= 2**53`` and whose decimal exponent ``e`` is in ``[-22, 22]`` is converted in the loop as
``m * 10**e`` or ``m / 10**-e``: both operands are exact doubles, so the one rounding of IEEE
arithmetic gives the correctly rounded value, which is what Python's ``float()`` returns (Clinger's
fast path). Every other token (more digits, larger exponents, ``nan``, ``inf``, underscores, junk)
is handed back by position and converted by Python's ``float()`` itself, so the accepted syntax and
every value are exactly ``float()``'s; junk becomes an ``InputError`` naming the file and the line.
Values written by ``repr`` with 17 digits mostly take that fallback (slower, still exact); values
written with up to 15 digits (``%g``, ``%.6f``, ...) never do. Non-finite labels or values are an
``InputError`` ("contains NaN or infinite").

Line numbers are computed only on the error path (the newlines before the offending byte are
counted), so the loop never tracks them.
"""
from __future__ import annotations

import gzip
import math
import os
import re
import sys
import zlib
from dataclasses import dataclass

import numpy as np
from numba import njit

from ..errors import InputError

BLOCK_BYTES = 1 << 22
MB = float(1 << 20)
"""Text read per block. Measured on a 80 MB file (50 000 rows x 100 values, one core): 1, 4, 8 and 16 MB
blocks parse at 143k, 140k, 137k and 125k rows/s (smaller blocks stay in cache), and a block's text
and arrays are what a stream holds: 4 MB keeps both small while a line of up to megabytes fits."""

_POW10 = np.array([10.0 ** k for k in range(23)])
_MAX_MANTISSA = 1 << 53

# status codes of _parse_block
_OK, _BAD_TOKEN, _NEGATIVE, _TOO_LARGE, _ABOVE, _BELOW, _FALLBACK_FULL, _DUPLICATE = 0, 1, 2, 3, 4, 5, 6, 7


@njit(cache=True, nogil=True, inline="always")
def _is_space(c):
    return c == 32 or c == 9 or c == 13 or c == 11 or c == 12


@njit(cache=True, nogil=True, inline="always")
def _token_end(buf, i, n):
    while i < n:
        c = buf[i]
        if c == 10 or c == 35 or _is_space(c):
            break
        i += 1
    return i


@njit(cache=True, nogil=True)
def _fast_float(buf, i, j):
    """``(True, value, end)`` for a number of the fast path (module docstring) that starts at ``buf[i]``
    and ends at ``end <= j`` on a delimiter (whitespace, newline, ``#``, or ``j``), else ``(False, 0, i)``:
    the caller then finds the token's end. Reading the token once, not once to find its end and once
    to convert it: 254k rows/s instead of 187k (80 MB file, 100 values a row, one core)."""
    if i >= j:
        return False, 0.0, i
    neg = False
    c = buf[i]
    if c == 45 or c == 43:
        neg = c == 45
        i += 1
    mant = np.uint64(0)
    digits = 0                     # significant digits (leading zeros not counted)
    seen = 0                       # any digit at all in the mantissa
    exp10 = 0
    while i < j and 48 <= buf[i] <= 57:
        d = buf[i] - 48
        seen += 1
        if digits > 0 or d != 0:
            digits += 1
            if digits <= 19:
                mant = mant * np.uint64(10) + np.uint64(d)
            else:
                return False, 0.0, i
        i += 1
    if i < j and buf[i] == 46:
        i += 1
        while i < j and 48 <= buf[i] <= 57:
            d = buf[i] - 48
            seen += 1
            if digits > 0 or d != 0:
                digits += 1
                if digits <= 19:
                    mant = mant * np.uint64(10) + np.uint64(d)
                else:
                    return False, 0.0, i
            exp10 -= 1
            i += 1
    if seen == 0:
        return False, 0.0, i
    if i < j and (buf[i] == 101 or buf[i] == 69):
        i += 1
        eneg = False
        if i < j and (buf[i] == 45 or buf[i] == 43):
            eneg = buf[i] == 45
            i += 1
        start = i
        e = 0
        while i < j and 48 <= buf[i] <= 57:
            if e < 100000:
                e = e * 10 + (buf[i] - 48)
            i += 1
        if i == start:
            return False, 0.0, i
        exp10 += -e if eneg else e
    if i < j and not (buf[i] == 10 or buf[i] == 35 or _is_space(buf[i])):
        return False, 0.0, i
    if mant == 0:
        return True, (-0.0 if neg else 0.0), i
    if mant > np.uint64(_MAX_MANTISSA) or exp10 < -22 or exp10 > 22:
        return False, 0.0, i
    value = float(mant)
    if exp10 >= 0:
        value = value * _POW10[exp10]
    else:
        value = value / _POW10[-exp10]
    return True, (-value if neg else value), i


@njit(cache=True, nogil=True)
def _parse_block(buf, n, store, idx_lo, idx_hi, labels, indptr, indices, data, fb_start, fb_end, fb_slot, out):
    """Parse the complete lines of ``buf[:n]``. Labels always go to ``labels``; with ``store`` the
    rows go to ``indptr, indices, data`` (else they are only counted, ``indices`` holding the current
    row's: a line naming an index twice is ``_DUPLICATE``, found by sorting the row's indices when they
    are not increasing, so that ordered rows pay one comparison a value). Indices must be in
    ``[idx_lo, idx_hi)`` (``idx_hi < 0``: no upper limit). Tokens outside the fast path are listed in
    ``fb_start, fb_end, fb_slot`` (slot ``-1 - row`` for a label, the value's position otherwise).
    ``out`` receives ``rows, nnz, fallbacks, min index, max index, error position, error index, values
    at index 0``; returns a status code (``_OK`` or the error)."""
    i = 0
    row = 0
    nnz = 0
    zeros = 0
    nfb = 0
    cap = fb_start.shape[0]
    lo = np.int64(1) << 62
    hi = np.int64(-1)
    status = _OK
    if store:
        indptr[0] = 0
    while i < n:
        c = buf[i]
        while i < n and _is_space(buf[i]):
            i += 1
        if i >= n:
            break
        c = buf[i]
        if c == 10:
            i += 1
            continue
        if c == 35:
            while i < n and buf[i] != 10:
                i += 1
            continue
        line_start = i
        row_start = nnz
        prev = np.int64(-1)
        ordered = True
        ok, v, j = _fast_float(buf, i, n)
        labels[row] = v
        if not ok:
            j = _token_end(buf, i, n)
            if nfb == cap:
                status = _FALLBACK_FULL
                break
            fb_start[nfb] = i
            fb_end[nfb] = j
            fb_slot[nfb] = -1 - row
            nfb += 1
        i = j
        while True:
            while i < n and _is_space(buf[i]):
                i += 1
            if i >= n:
                break
            c = buf[i]
            if c == 10:
                i += 1
                break
            if c == 35:
                while i < n and buf[i] != 10:
                    i += 1
                continue
            if c == 113 and i + 3 < n and buf[i + 1] == 105 and buf[i + 2] == 100 and buf[i + 3] == 58:
                i = _token_end(buf, i, n)
                continue                                  # qid:N
            k = i
            neg = False
            if buf[k] == 43 or buf[k] == 45:
                neg = buf[k] == 45
                k += 1
            d0 = k
            idx = np.int64(0)
            while k < n and 48 <= buf[k] <= 57:
                if k - d0 >= 18:
                    status = _TOO_LARGE
                    break
                idx = idx * 10 + (buf[k] - 48)
                k += 1
            if status != _OK:
                break
            if k == d0 or k >= n or buf[k] != 58:
                status = _BAD_TOKEN
                break
            if neg and idx != 0:
                status = _NEGATIVE
                out[6] = -idx
                break
            if idx < idx_lo:
                status = _BELOW
                out[6] = idx
                break
            if idx_hi >= 0 and idx >= idx_hi:
                status = _ABOVE
                out[6] = idx
                break
            k += 1
            ok, v, j = _fast_float(buf, k, n)
            if not ok:
                j = _token_end(buf, k, n)
                if nfb == cap:
                    status = _FALLBACK_FULL
                    break
                fb_start[nfb] = k
                fb_end[nfb] = j
                fb_slot[nfb] = nnz
                nfb += 1
            if store:
                indices[nnz] = idx
                data[nnz] = v
            else:
                indices[nnz - row_start] = idx
            if idx <= prev:
                ordered = False
            prev = idx
            nnz += 1
            if idx == 0:
                zeros += 1
            if idx < lo:
                lo = idx
            if idx > hi:
                hi = idx
            i = j
        if status != _OK:
            break
        if not ordered:
            first = row_start if store else 0
            seen = np.sort(indices[first:first + nnz - row_start])
            for k in range(1, seen.size):
                if seen[k] == seen[k - 1]:
                    status = _DUPLICATE
                    out[6] = seen[k]
                    break
            if status != _OK:
                i = line_start
                break
        row += 1
        if store:
            indptr[row] = nnz
    out[0] = row
    out[1] = nnz
    out[2] = nfb
    out[3] = lo
    out[4] = hi
    out[5] = i
    out[7] = zeros
    return status


@njit(cache=True, nogil=True)
def _count(buf, n):
    """``(newlines, colons)`` in ``buf[:n]``: the sizes of a block's arrays (``bytearray.count`` took
    a third of the parse time)."""
    lines = 0
    colons = 0
    for i in range(n):
        c = buf[i]
        if c == 10:
            lines += 1
        elif c == 58:
            colons += 1
    return lines, colons


@dataclass
class Block:
    """The rows of one block: ``labels``, CSR ``indptr, indices, data`` (empty when not stored),
    the smallest and largest index met (``hi = -1``: none), the number of values, and the number
    of newlines of its text."""
    labels: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    lo: int
    hi: int
    nnz: int
    newlines: int
    zeros: int = 0                  # values at index 0 (how sure the guess of a 0-based file is)


def _display(path):
    return "<stdin>" if path == "-" else os.fspath(path)


def open_binary(path):
    """A binary stream of ``path`` (``-``: standard input, ``*.gz``: decompressed as it is read)."""
    if path == "-":
        return _Unclosed(sys.stdin.buffer)
    try:
        if os.fspath(path).endswith(".gz"):
            return gzip.open(path, "rb")
        return open(path, "rb")
    except OSError as exc:
        raise InputError(f"cannot open {os.fspath(path)!r}: {exc.strerror}") from None


class _Unclosed:
    """Standard input as a context manager that leaves it open."""

    def __init__(self, stream):
        self.stream = stream

    def readinto(self, buffer):
        return self.stream.readinto(buffer)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def iter_blocks(path, store=True, idx_lo=0, idx_hi=-1, block_bytes=None, progress=None):
    """The rows of a libsvm file as ``Block``s, one per ``block_bytes`` (default ``BLOCK_BYTES``) of text.

    ``idx_lo``/``idx_hi`` bound the raw indices (an index outside is an ``InputError`` naming the
    line). With ``store=False`` only labels and index statistics are kept (a scan). The text goes
    into one reused buffer (``readinto``; the carried-over line moved to its front): a fresh
    ``bytes`` per block made glibc keep the freed blocks, and the peak RSS of a scan of a 187 MB
    file grew by 100 MB instead of the 50 MB a block and its arrays take. ``progress`` (an
    ``asyos.utils.progress.Progress`` counting MB) is advanced by the text of each block."""
    name = _display(path)
    block_bytes = max(1, BLOCK_BYTES if block_bytes is None else int(block_bytes))
    lines_before = 0
    buf = bytearray(block_bytes)
    have = 0                                    # bytes of the carried-over line at the front
    with open_binary(path) as fh:
        while True:
            if have == len(buf):                # one line fills the buffer: a larger one
                buf = buf + bytearray(len(buf))
            got = _fill(fh, buf, have, name)
            stop = have + got
            if got:
                end = buf.rfind(b"\n", 0, stop) + 1
                if end == 0:
                    have = stop
                    continue
            else:
                end = stop
                if end == 0:
                    return
            block = parse_bytes(buf, end, store, idx_lo, idx_hi, name, lines_before)
            if progress is not None:
                progress.advance(end / MB)
            lines_before += block.newlines
            buf[:stop - end] = buf[end:stop]
            have = stop - end
            if block.labels.size:
                yield block
            if not got:
                return


def _fill(fh, buf, start, name):
    """Read into ``buf[start:]`` until it is full or the stream ends; the bytes read."""
    total = 0
    with memoryview(buf) as view:
        while start + total < len(buf):
            try:
                got = fh.readinto(view[start + total:])
            except (OSError, EOFError, zlib.error) as exc:          # a corrupt .gz among others
                raise InputError(f"cannot read {name!r}: {exc}") from None
            if not got:
                break
            total += got
    return total


def parse_bytes(buf, end, store, idx_lo, idx_hi, name, lines_before=0):
    """The complete lines of ``buf[:end]`` (bytes or bytearray) as a ``Block``; errors name ``name`` and the line
    (``lines_before`` newlines precede ``buf``)."""
    arr = np.frombuffer(buf, dtype=np.uint8)
    newlines, colons = _count(arr, end)
    max_rows = newlines + 1
    max_nnz = colons if store else 0
    labels = np.empty(max_rows)
    indptr = np.empty(max_rows + 1 if store else 1, dtype=np.int64)
    indices = np.empty(colons, dtype=np.int64)     # a scan touches only the longest row's pages
    data = np.empty(max_nnz)
    out = np.zeros(8, dtype=np.int64)
    cap = 1024
    while True:
        fb = np.empty((3, cap), dtype=np.int64)
        status = _parse_block(arr, end, store, idx_lo, idx_hi, labels, indptr, indices, data,
                              fb[0], fb[1], fb[2], out)
        if status != _FALLBACK_FULL:
            break
        cap = max_rows + colons + 1                    # every token: cannot fill again
    rows, nnz, nfb, lo, hi, pos, bad, zeros = (int(v) for v in out)
    if status != _OK:
        _raise(status, buf, pos, bad, name, lines_before, idx_lo, idx_hi)
    if nfb:
        _convert_fallbacks(buf, fb[:, :nfb], labels, data, store, name, lines_before)
    labels = labels[:rows]
    if not store:
        indptr, indices, data = np.zeros(1, dtype=np.int64), np.empty(0, dtype=np.int64), np.empty(0)
    else:
        indptr, indices, data = indptr[:rows + 1], indices[:nnz], data[:nnz]
    return Block(labels, indptr, indices, data, lo, hi, nnz, newlines, zeros)


def warm_up() -> None:
    """Compile (or load from numba's cache) the block parser now rather than inside a timed run."""
    text = b"1 1:0.5 3:2\n-1 2:1e-3 4:7.25e+300\n"
    parse_bytes(text, len(text), True, 0, -1, "warm-up")
    parse_bytes(text, len(text), False, 0, -1, "warm-up")


_TOKEN = re.compile(rb"[^\s#]*")


def _token_at(buf, pos):
    return _TOKEN.match(buf, pos).group().decode("utf-8", errors="replace")


def _line_of(buf, pos, lines_before):
    return lines_before + buf.count(b"\n", 0, pos) + 1


def _not_text(buf, pos):
    """True when the line holding ``pos`` is not UTF-8 text (a binary file)."""
    start = buf.rfind(b"\n", 0, pos) + 1
    stop = buf.find(b"\n", pos)
    try:
        buf[start:len(buf) if stop < 0 else stop].decode("utf-8")
    except UnicodeDecodeError:
        return True
    return b"\x00" in buf[start:len(buf) if stop < 0 else stop]


def _raise(status, buf, pos, bad, name, lines_before, idx_lo, idx_hi):
    where = f"{name} line {_line_of(buf, pos, lines_before)}"
    if _not_text(buf, pos):
        raise InputError(f"{name!r} is neither an .npz archive nor libsvm text")
    if status == _BAD_TOKEN:
        raise InputError(f"{where}: cannot read {_token_at(buf, pos)!r} as index:value")
    if status == _NEGATIVE:
        raise InputError(f"{where}: negative feature index {bad}")
    if status == _TOO_LARGE:
        raise InputError(f"{where}: feature index in {_token_at(buf, pos)!r} is too large")
    if status == _DUPLICATE:
        raise InputError(f"{where}: duplicate feature index {bad} (each index may appear once on a line)")
    if status == _BELOW:
        raise InputError(f"{where}: feature index {bad} found, but the indices start at {idx_lo} "
                         f"(--index-base)")
    raise InputError(f"{where}: feature index {bad} beyond {idx_hi - idx_lo} features")


def _convert_fallbacks(buf, fb, labels, data, store, name, lines_before):
    """Convert the tokens the loop left to Python's ``float()`` (module docstring). The fast path
    never yields a non-finite value, so NaN and infinities are caught here, with their line."""
    for start, stop, slot in fb.T.tolist():
        token = buf[start:stop]
        try:
            value = float(token)
            finite = math.isfinite(value)
        except ValueError:
            value, finite = None, True
        if value is None or not finite:
            if _not_text(buf, start):
                raise InputError(f"{name!r} is neither an .npz archive nor libsvm text") from None
            where = f"{name} line {_line_of(buf, start, lines_before)}"
            text = token.decode("utf-8", errors="replace")
            if not finite:
                raise InputError(f"{where}: the data contains NaN or infinite values ({text!r})")
            if slot < 0:
                raise InputError(f"{where}: label {text!r} is not a number") from None
            first = start
            while first > 0 and buf[first - 1] not in b" \t\r\v\f\n#":
                first -= 1
            raise InputError(f"{where}: cannot read {_token_at(buf, first)!r} as index:value") from None
        if slot < 0:
            labels[-1 - slot] = value
        elif store:
            data[slot] = value


def scan(path, idx_lo=0, idx_hi=-1, block_bytes=None, progress=None):
    """``(n_rows, n_values, min_index, max_index, labels, values_at_index_0)`` of a libsvm file
    (``max_index = -1``: none); every line is checked, errors name it. The labels (8 bytes a row) come
    with the scan, so that a caller needs no second read for them."""
    nnz = zeros = 0
    lo, hi = 1 << 62, -1
    labels = []
    for block in iter_blocks(path, False, idx_lo, idx_hi, block_bytes, progress):
        labels.append(block.labels)
        nnz += block.nnz
        zeros += block.zeros
        if block.hi >= 0:
            lo, hi = min(lo, block.lo), max(hi, block.hi)
    y = np.concatenate(labels) if labels else np.empty(0)
    return y.size, nnz, (lo if hi >= 0 else 0), hi, y, zeros


def rechunk(blocks, start, stop, chunk_rows):
    """``(labels, indptr, indices, data)`` chunks of at most ``chunk_rows`` rows holding the rows
    ``start:stop`` (``stop=None``: to the end) of a stream of ``Block``s; the blocks are read as the
    chunks are taken, so at most one block and one chunk are held."""
    stop = float("inf") if stop is None else stop
    pending, have, row = [], 0, 0
    for b in blocks:
        n = b.labels.size
        lo, hi = max(start - row, 0), min(stop - row, n)
        row += n
        r = lo
        while r < hi:
            take = min(chunk_rows - have, hi - r)
            a, z = b.indptr[r], b.indptr[r + take]
            pending.append((b.labels[r:r + take], b.indptr[r:r + take + 1] - a, b.indices[a:z], b.data[a:z]))
            have += take
            r += take
            if have == chunk_rows:
                yield _join(pending)
                pending, have = [], 0
        if row >= stop:
            break
    if pending:
        yield _join(pending)


def _join(pieces):
    if len(pieces) == 1:
        return pieces[0]
    offsets = np.cumsum([0] + [p[2].size for p in pieces])
    indptr = np.concatenate([pieces[0][1][:1]] + [p[1][1:] + off for p, off in zip(pieces, offsets)])
    return (np.concatenate([p[0] for p in pieces]), indptr, np.concatenate([p[2] for p in pieces]),
            np.concatenate([p[3] for p in pieces]))

