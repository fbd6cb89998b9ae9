"""One array of an ``.npz`` archive read through its header (``_NpyMember``), and the format of a
scipy sparse ``.npz`` (``_sparse_format``): shared by the row-major readers (``io``) and the
column readers (``columnar``), which import it rather than each other."""
from __future__ import annotations

import zipfile
from dataclasses import dataclass

import numpy as np

from ..errors import InputError
from .source import check_npy_size, reading

_CHUNK_BYTES = 1 << 24          # rows of a member read at a time

@dataclass
class _NpyMember:
    """One array inside an ``.npz`` archive, read through its header only until asked."""

    archive: str
    key: str

    def _open(self):
        """``(zipfile, stream after the header, shape, fortran, dtype)``; the header is checked
        against the member's size, and any read error of the archive is an ``InputError``."""
        with reading(self.archive, ".npz archive"):
            zf = zipfile.ZipFile(self.archive)
        try:
            with reading(self.archive, f"array {self.key!r}"):
                try:
                    info = zf.getinfo(self.key + ".npy")
                except KeyError:
                    raise InputError(f"{self.archive} has no array {self.key!r}") from None
                stream = zf.open(info)
                version = np.lib.format.read_magic(stream)
                read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                               else np.lib.format.read_array_header_2_0)
                shape, fortran, dtype = read_header(stream)
                check_npy_size(shape, dtype, info.file_size - stream.tell(), f"{self.archive}: {self.key}")
        except BaseException:
            zf.close()
            raise
        return zf, stream, shape, fortran, dtype

    def header(self):
        zf, stream, shape, fortran, dtype = self._open()
        stream.close()
        zf.close()
        return shape, fortran, dtype

    def read_columns(self, columns) -> np.ndarray:
        """The 2-D array restricted to ``columns`` as float64, streaming the member row by row."""
        zf, stream, shape, fortran, dtype = self._open()
        try:
            if len(shape) != 2:
                raise InputError(f"{self.archive}: {self.key} must be 2-D; got shape {shape}")
            if dtype.hasobject:
                raise InputError(f"{self.archive}: {self.key} holds Python objects, not numbers")
            if dtype.kind not in "fiub":          # complex: the imaginary part would be dropped silently
                raise InputError(f"{self.archive}: {self.key} must hold real numbers; got dtype {dtype}")
            n, p = shape
            cols = np.arange(p) if columns is None else np.asarray(columns, dtype=np.intp)
            if fortran:  # columns are contiguous: read whole, keep columns (rare for our files)
                data = np.frombuffer(_read_exact(stream, n * p * dtype.itemsize, self), dtype=dtype)
                return np.array(data.reshape((n, p), order="F")[:, cols], dtype=np.float64)
            out = np.empty((n, cols.size))
            row_bytes = max(p * dtype.itemsize, 1)
            rows_per_chunk = max(1, _CHUNK_BYTES // row_bytes)
            from ..utils.progress import Progress
            progress = Progress(f"reading {self.archive} {self.key}", n * row_bytes / MB, "MB")
            for start in range(0, n, rows_per_chunk):
                stop = min(n, start + rows_per_chunk)
                raw = _read_exact(stream, (stop - start) * row_bytes, self)
                block = np.frombuffer(raw, dtype=dtype).reshape(stop - start, p)
                out[start:stop] = block[:, cols]
                progress.advance(len(raw) / MB)
            return out
        finally:
            stream.close()
            zf.close()

    def iter_rows(self, start: int, stop: int, rows_per_chunk: int):
        """Rows ``start:stop`` of a C-ordered 1-D or 2-D member, in blocks of ``rows_per_chunk``
        rows, as float64; the rows before ``start`` are skipped in the stream, never held."""
        zf, stream, shape, fortran, dtype = self._open()
        try:
            if len(shape) not in (1, 2) or dtype.hasobject or dtype.kind not in "fiub":
                raise InputError(f"{self.archive}: {self.key} must be a real-valued vector or matrix; got shape "
                                 f"{shape}, dtype {dtype}")
            if fortran and len(shape) == 2:
                raise InputError(f"{self.archive}: {self.key} is stored column-major; rows cannot be streamed "
                                 f"(save it with np.ascontiguousarray)")
            width = 1 if len(shape) == 1 else int(shape[1])
            row_bytes = width * dtype.itemsize
            if start:
                with reading(self.archive, f"array {self.key!r}"):
                    stream.seek(start * row_bytes, 1)
            for lo in range(start, stop, rows_per_chunk):
                hi = min(stop, lo + rows_per_chunk)
                block = np.frombuffer(_read_exact(stream, (hi - lo) * row_bytes, self), dtype=dtype)
                block = block.astype(np.float64)
                yield block if len(shape) == 1 else block.reshape(hi - lo, width)
        finally:
            stream.close()
            zf.close()

    def read(self) -> np.ndarray:
        """The whole member (its header checked against its size first)."""
        zf, stream, shape, fortran, dtype = self._open()
        try:
            if dtype.hasobject:
                raise InputError(f"{self.archive}: {self.key} holds Python objects, not numbers")
            count = int(np.prod(shape, dtype=np.int64))
            raw = _read_exact(stream, count * dtype.itemsize, self)
            return np.frombuffer(raw, dtype=dtype).reshape(shape, order="F" if fortran else "C").copy()
        finally:
            stream.close()
            zf.close()

    def iter_chunks(self, items: int = 1 << 20):
        """The (1-D) array in consecutive chunks of at most ``items`` elements."""
        zf, stream, shape, fortran, dtype = self._open()
        try:
            if len(shape) != 1 or dtype.hasobject:
                raise InputError(f"{self.archive}: {self.key} must be a 1-D numeric array; got shape {shape}")
            left = int(shape[0])
            while left:
                take = min(items, left)
                yield np.frombuffer(_read_exact(stream, take * dtype.itemsize, self), dtype=dtype)
                left -= take
        finally:
            stream.close()
            zf.close()


READ_PIECE = 1 << 26           # a larger member is read in pieces of this many bytes, with progress lines
MB = float(1 << 20)


def _read_exact(stream, size, member):
    with reading(member.archive, f"array {member.key!r}"):
        raw = stream.read(size) if size <= READ_PIECE else _read_pieces(stream, size, member)
    if len(raw) != size:
        raise InputError(f"{member.archive}: array {member.key} is truncated")
    return raw


def _read_pieces(stream, size, member):
    """``size`` bytes of ``stream`` in ``READ_PIECE`` pieces, counted by a progress reporter (a
    dense ``X`` of gigabytes takes seconds to inflate or read: ``asyos.utils.progress``)."""
    from ..utils.progress import Progress
    progress = Progress(f"reading {member.archive} {member.key}", size / MB, "MB")
    buf = bytearray(size)
    view, got = memoryview(buf), 0
    while got < size:
        n = stream.readinto(view[got:got + READ_PIECE])
        if not n:
            break
        got += n
        progress.advance(n / MB)
    return buf if got == size else buf[:got]


def _sparse_format(fname) -> str:
    fmt = _NpyMember(fname, "format").read()
    if fmt.size != 1:
        raise InputError(f"{fname}: the format member must be one string; got shape {fmt.shape}")
    return fmt.item().decode(errors="replace") if isinstance(fmt.item(), bytes) else str(fmt.item())
