"""Property-based tests (hypothesis) of every reader of user input: generated, mostly malformed, dense
``.npz`` files, CSR/CSC matrices (through the estimators and through files), libsvm text and TOML
configuration files. Each input must be answered by a clean result (a valid input: the data read back
equal to what was written, a fit with finite coefficients) or by ``InputError`` (exit 2 with one line
from the CLI): never another exception, a crash, a hang, or a malformed input accepted silently.

The examples are derandomized (the same ones on every run) and bounded for CI: ``CI_EXAMPLES`` per test
(half or a quarter for the slower tests: 650 examples in all), 11 s for the file on 2 shared cores;
``ASYOS_FUZZ_EXAMPLES=2000`` runs that many per test (13,000 examples, 55 s), for a long local run.
"""
import contextlib
import io
import json
import math
import os
import re
import shutil
import tempfile
import typing
import zipfile
from unittest import mock

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from asyos.errors import InputError
from tests.conftest import REPO
from tests.inprocess import run_asyos

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")     # the learners' warnings on degenerate data

CI_EXAMPLES = 100
EXAMPLES = int(os.environ.get("ASYOS_FUZZ_EXAMPLES", "0")) or CI_EXAMPLES


def fuzz(share=1.0):
    """The settings of every test here: ``share`` of the examples (the slow tests run fewer)."""
    return settings(max_examples=max(5, int(EXAMPLES * share)), deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@contextlib.contextmanager
def scratch():
    directory = tempfile.mkdtemp(prefix="asyos-fuzz-")
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def outcome(read):
    """``("ok", value)`` or ``("refused", message)``; any other exception fails the test. A refusal is one line."""
    try:
        return "ok", read()
    except InputError as exc:
        assert "\n" not in str(exc).strip(), repr(str(exc))
        return "refused", str(exc)


def dense(X):
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def check_dataset(d):
    """What any accepted data set must satisfy."""
    assert d.X.shape[0] == d.y.shape[0]
    assert np.all(np.isfinite(d.y))
    values = d.X.data if sp.issparse(d.X) else np.asarray(d.X)
    assert np.all(np.isfinite(values))


# --------------------------------------------------------------------------------------- dense .npz
REAL_DTYPES = ["float64", "float32", "float16", "int64", "int16", "uint8"]
BAD_DTYPES = ["complex128", "<U4", "S3", "datetime64[s]", "V8", "object"]


def array_of(shape, dtype, draw, special):
    n = int(np.prod(shape))
    if dtype == "object":
        return np.array([1.5] * n + [None], dtype=object)[:n].reshape(shape) if n else np.empty(shape, object)
    values = np.array(draw(st.lists(st.floats(-1e3, 1e3), min_size=n, max_size=n)), dtype=np.float64)
    if special and n:
        values[draw(st.integers(0, n - 1))] = draw(st.sampled_from([np.nan, np.inf, -np.inf]))
    if dtype == "bool":
        return (values > 0).reshape(shape)
    if dtype.startswith(("<U", "S")):
        return values.astype(str).astype(dtype).reshape(shape)
    if dtype.startswith("datetime"):
        with np.errstate(invalid="ignore"):
            return np.nan_to_num(values).astype(np.int64).astype(dtype).reshape(shape)
    if dtype == "V8":
        return np.nan_to_num(values).view("V8").reshape(shape)
    with np.errstate(invalid="ignore", over="ignore"):
        return (values + (0.5j if dtype.startswith("complex") else 0)).astype(dtype).reshape(shape)


DEFECTS = ["x-shape", "x-dtype", "x-special", "y-length", "y-shape", "y-dtype", "y-special", "names", "test",
           "empty"]


@st.composite
def npz_files(draw):
    """``(members, valid, compressed)``: a dense .npz's arrays, valid or with one or two defects drawn
    from ``DEFECTS``, and whether they form a valid data set."""
    defects = set(draw(st.one_of(st.just([]), st.lists(st.sampled_from(DEFECTS), min_size=1, max_size=2))))
    n = 0 if "empty" in defects and draw(st.booleans()) else draw(st.integers(1, 7))
    p = 0 if "empty" in defects and n else draw(st.integers(1, 4))
    x_shape = draw(st.sampled_from([(n,), (n, p, 2), ()])) if "x-shape" in defects else (n, p)
    x_dtype = draw(st.sampled_from(BAD_DTYPES if "x-dtype" in defects else REAL_DTYPES + ["bool"]))
    y_len = (n + 1 if n == 0 or draw(st.booleans()) else n - 1) if "y-length" in defects else n
    y_shape = (y_len, draw(st.integers(2, 3))) if "y-shape" in defects else draw(st.sampled_from([(y_len,),
                                                                                                  (y_len, 1)]))
    y_dtype = draw(st.sampled_from(["bool", "complex128", "<U4", "object"] if "y-dtype" in defects
                                   else REAL_DTYPES))
    names = draw(st.sampled_from([("X", "Y"), ("X_train", "y"), ("x", "y")] if "names" in defects
                                 else [("X", "y"), ("X_train", "y_train")]))
    members = {names[0]: array_of(x_shape, x_dtype, draw, "x-special" in defects),
               names[1]: array_of(y_shape, y_dtype, draw, "y-special" in defects)}
    test = draw(st.sampled_from(["wide", "labels"] if "test" in defects else [None, "good"]))
    if test and len(x_shape) == 2:
        m = draw(st.integers(1, 4))
        members["X_test"] = array_of((m, p + (test == "wide")), "float64", draw, False)
        members["y_test"] = array_of((m + (test == "labels"),), "float64", draw, False)
        if names[0] != "X_train":
            members = {("X_train" if k == names[0] else "y_train" if k == names[1] else k): v
                       for k, v in members.items()} if "names" not in defects else members
    if draw(st.booleans()):
        members["extra"] = np.arange(3)                      # other members are ignored
    exact = ("bool", "int64", "int16", "uint8")               # NaN cast to an integer is some finite number
    valid = not (defects - ({"x-special"} if x_dtype in exact else set())
                 - ({"y-special"} if y_dtype in exact else set()))
    return members, valid, draw(st.booleans())


def save_npz(path, members, compressed):
    (np.savez_compressed if compressed else np.savez)(path, **members)   # object arrays are pickled


def read_npz(path):
    from asyos.data.io import open_source
    source = open_source(path)
    d = source.load()
    check_dataset(d)
    rows = [X for X, _ in source.iter_rows(chunk_rows=3)]
    np.testing.assert_array_equal(np.concatenate(rows) if rows else np.empty((0, d.X.shape[1])), d.X)
    np.testing.assert_array_equal(source.load(columns=[0]).X[:, 0], d.X[:, 0])
    return d


@fuzz()
@given(npz_files())
def test_dense_npz_files(case):
    members, valid, compressed = case
    with scratch() as tmp:
        path = os.path.join(tmp, "data.npz")
        save_npz(path, members, compressed)
        kind, d = outcome(lambda: read_npz(path))
    if valid:
        assert kind == "ok", d
        x_key = "X_train" if "X_train" in members else "X"
        np.testing.assert_array_equal(d.X, members[x_key].astype(np.float64))
        np.testing.assert_array_equal(d.y, members["y_train" if "X_train" in members else "y"].ravel().astype(float))
    else:
        assert kind == "refused", f"accepted a malformed .npz: { {k: (v.shape, v.dtype) for k, v in members.items()} }"


@st.composite
def damaged_npz(draw):
    """A valid dense .npz (bytes) and the same bytes damaged: cut, bytes flipped, or garbage appended."""
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 32 - 1)))
    n, p = draw(st.integers(1, 30)), draw(st.integers(1, 6))
    buffer = io.BytesIO()
    (np.savez_compressed if draw(st.booleans()) else np.savez)(buffer, X=rng.normal(size=(n, p)),
                                                                y=rng.normal(size=n))
    good = buffer.getvalue()
    bad = bytearray(good)
    how = draw(st.sampled_from(["cut", "flip", "flip", "flip", "append", "zero"]))
    if how == "cut":
        bad = bad[:draw(st.integers(0, len(bad) - 1))]
    elif how == "append":
        bad += draw(st.binary(min_size=1, max_size=64))
    else:
        for _ in range(draw(st.integers(1, 8))):
            at = draw(st.integers(0, len(bad) - 1))
            bad[at] = 0 if how == "zero" else bad[at] ^ draw(st.integers(1, 255))
    return good, bytes(bad)


@fuzz()
@given(damaged_npz())
def test_damaged_npz_files_are_refused_or_read_exactly(case):
    """A damaged archive is refused, or (a byte the format does not check: a time stamp, a comment) read
    back exactly: a flip inside a member fails its CRC-32."""
    good, bad = case
    with scratch() as tmp:
        for name, raw in (("good.npz", good), ("bad.npz", bad)):
            with open(os.path.join(tmp, name), "wb") as fh:
                fh.write(raw)
        expected = read_npz(os.path.join(tmp, "good.npz"))
        kind, d = outcome(lambda: read_npz(os.path.join(tmp, "bad.npz")))
    if kind == "ok":
        np.testing.assert_array_equal(d.X, expected.X)
        np.testing.assert_array_equal(d.y, expected.y)


@st.composite
def damaged_sparse_directories(draw):
    """A valid CSR or CSC ``X.npz`` (stored or compressed), its bytes and the same bytes damaged."""
    fmt, compressed = draw(st.sampled_from(["csr", "csc"])), draw(st.booleans())
    n, p = draw(st.integers(1, 40)), draw(st.integers(1, 8))
    M = sp.random(n, p, density=draw(st.floats(0.05, 1)), format=fmt, random_state=draw(st.integers(0, 1000)))
    buffer = io.BytesIO()
    sp.save_npz(buffer, M, compressed=compressed)
    bad = bytearray(buffer.getvalue())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(bad) - 1))
        bad[at] ^= draw(st.integers(1, 255))
    return buffer.getvalue(), bytes(bad), n


@fuzz(0.5)
@given(damaged_sparse_directories())
def test_damaged_sparse_directories_are_refused_or_read_exactly(case):
    """Read whole (CSR through scipy's arrays, CSC through the column reader, whose stored members have
    their CRC-32 checked when read from start to end): refused, or the matrix exactly."""
    from asyos.data.io import open_source
    good, bad, n = case
    with scratch() as tmp:
        for name, raw in (("good", good), ("bad", bad)):
            os.mkdir(os.path.join(tmp, name))
            with open(os.path.join(tmp, name, "X.npz"), "wb") as fh:
                fh.write(raw)
            np.save(os.path.join(tmp, name, "y.npy"), np.arange(n, dtype=np.float64))
        expected = dense(open_source(os.path.join(tmp, "good")).load().X)
        kind, X = outcome(lambda: dense(open_source(os.path.join(tmp, "bad")).load().X))
    if kind == "ok":
        np.testing.assert_array_equal(X, expected)


# -------------------------------------------------------------------------------------------- CSR/CSC
@st.composite
def sparse_parts(draw):
    """``(data, indices, indptr, shape, format)``, random and often inconsistent."""
    n, p = draw(st.integers(0, 6)), draw(st.integers(0, 6))
    nnz = draw(st.integers(0, 12))
    fmt = draw(st.sampled_from(["csr", "csc"]))
    major = n if fmt == "csr" else p
    minor = p if fmt == "csr" else n
    if draw(st.integers(0, 3)):  # a well-formed matrix, then perhaps one thing broken
        M = sp.random(max(major, 1), max(minor, 1), density=draw(st.floats(0, 1)), format="csr",
                      random_state=draw(st.integers(0, 1000)))[:major, :minor]
        M = sp.csr_matrix(M)
        data, indices, indptr = M.data.copy(), M.indices.astype(np.int64), M.indptr.astype(np.int64)
        broken = draw(st.sampled_from(["none"] * 6 + ["index", "negative", "pointer", "length", "value", "dup"]))
        if broken == "index" and indices.size:
            indices[draw(st.integers(0, indices.size - 1))] = minor + draw(st.integers(0, 3))
        elif broken == "negative" and indices.size:
            indices[draw(st.integers(0, indices.size - 1))] = -1
        elif broken == "pointer" and indptr.size > 2:
            k = draw(st.integers(1, indptr.size - 2))
            indptr[k] = indptr[-1] + 1
        elif broken == "length":
            indptr = indptr[:-1] if draw(st.booleans()) else np.append(indptr, indptr[-1])
        elif broken == "value" and data.size:
            data[draw(st.integers(0, data.size - 1))] = draw(st.sampled_from([np.nan, np.inf]))
        elif broken == "dup" and indices.size >= 2 and indptr[1] >= 2:
            indices[1] = indices[0]                  # a repeated index in the first row: summed, as scipy does
    else:
        data = np.array(draw(st.lists(st.floats(-5, 5), min_size=nnz, max_size=nnz)))
        indices = np.array(draw(st.lists(st.integers(-2, minor + 2), min_size=nnz, max_size=nnz)), dtype=np.int64)
        indptr = np.array(sorted(draw(st.lists(st.integers(-1, nnz + 1), min_size=major + 1, max_size=major + 1)))
                          if draw(st.booleans()) else
                          draw(st.lists(st.integers(-1, nnz + 1), min_size=major + 1, max_size=major + 1)),
                          dtype=np.int64)
    return data, indices, indptr, (n, p), fmt


def is_valid(data, indices, indptr, shape, fmt):
    """True, False, or None when both answers are right: values past ``indptr[-1]`` (scipy ignores them;
    a reader may refuse them)."""
    major, minor = shape if fmt == "csr" else shape[::-1]
    if not (indptr.shape == (major + 1,) and indptr[0] == 0 and np.all(np.diff(indptr) >= 0)
            and indptr[-1] <= data.size == indices.size and min(shape) >= 1):
        return False
    used = slice(0, indptr[-1])
    if not (np.all(np.isfinite(data[used])) and (indptr[-1] == 0 or (indices[used].min() >= 0
                                                                     and indices[used].max() < minor))):
        return False
    return True if indptr[-1] == data.size else None


def expected_matrix(data, indices, indptr, shape, fmt):
    out = np.zeros(shape)
    for row in range(indptr.size - 1):
        for k in range(indptr[row], indptr[row + 1]):
            if fmt == "csr":
                out[row, indices[k]] += data[k]
            else:
                out[indices[k], row] += data[k]
    return out


@fuzz(0.5)
@given(sparse_parts(), st.sampled_from(["OnlineSubstitution", "BudgetedARDA", "OFS"]))
def test_sparse_matrices_through_the_estimators(parts, name):
    import asyos
    data, indices, indptr, shape, fmt = parts
    make = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
    try:
        X = make((data, indices, indptr), shape=shape)
    except (ValueError, IndexError, TypeError):
        assume(False)                      # scipy's own constructor refused it: nothing reaches asyos
    y = np.where(np.arange(shape[0]) % 2 == 0, 1.0, -1.0)
    estimator = getattr(asyos, name)(budget=1)
    kind, fitted = outcome(lambda: estimator.fit(X, y))
    if is_valid(data, indices, indptr, shape, fmt) is False:
        assert kind == "refused", f"{name} accepted a malformed {fmt}"
    elif kind == "ok":
        assert np.all(np.isfinite(fitted.coef_))
    else:   # B-ARDA diverged on a value of 2.2e-313 (its step squares and divides): a vanishing scale
        tiny = data[:indptr[-1]][(data[:indptr[-1]] != 0) & (np.abs(data[:indptr[-1]]) < 1e-150)]
        assert "diverged" in fitted and tiny.size, fitted


@fuzz(0.5)
@given(sparse_parts(), st.sampled_from(["load", "columns", "rows", "block"]))
def test_sparse_matrices_through_files(parts, how):
    """The members of a scipy .npz written as they are (no scipy check on the way), read by the
    directory readers (CSR whole, by columns, by rows; CSC whole and by columns)."""
    from asyos.data.io import open_source
    data, indices, indptr, shape, fmt = parts
    with scratch() as tmp:
        np.savez(os.path.join(tmp, "X.npz"), data=data, indices=indices, indptr=indptr, shape=np.array(shape),
                 format=np.array(fmt.encode()))
        np.save(os.path.join(tmp, "y.npy"), np.arange(shape[0], dtype=np.float64))

        def read():
            source = open_source(tmp)
            if how == "rows":
                parts = [dense(X) for X, _ in source.iter_rows(chunk_rows=2)]
                return np.concatenate(parts) if parts else np.empty((0, shape[1]))
            if how == "block" and hasattr(source, "matrix"):      # the column reader (values checked there)
                return dense(source.matrix()[:, np.arange(shape[1])])
            cols = np.arange(shape[1]) if how == "columns" else None
            d = source.load(columns=cols)
            check_dataset(d)
            return dense(d.X)
        kind, X = outcome(read)
    valid = is_valid(data, indices, indptr, shape, fmt)
    if valid is False:
        assert kind == "refused", f"accepted a malformed {fmt} file ({how})"
    elif kind == "ok":
        np.testing.assert_allclose(X, expected_matrix(data, indices, indptr, shape, fmt), rtol=1e-12, atol=0)
    elif valid:
        assert "rows cannot be streamed" in X, X            # a CSC file read by rows


# --------------------------------------------------------------------------------------------- libsvm
FRAGMENTS = [b"1", b"-1", b"+1", b"0", b"2.5", b"-3e-2", b"1e3", b"nan", b"inf", b"1e999", b"1_0", b"0x1",
             b"3:1", b"1:2", b"2:0.5", b"0:1", b"-0:1", b"+4:1", b"-2:1", b"1:", b":1", b"1:2:3", b"a:1",
             b"1.5:1", b"1e3:1", b"99999999999999999999:1", b"123456789012345678:1", b"100000:1", b"qid:3",
             b"#", b"# note", b" ", b" ", b" ", b"\t", b"\r\n", b"\n", b"\n", b"\n", b"\x00", "\u00e9".encode(),
             b"\xff", b"\x0b", b"\xc2\xa0", b"1:1e-400", b"2:1e308", b"4:-0"]


def ref_float(token):
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def ref_libsvm(text):
    """The reference reader (plain Python; the module docstring of ``asyos.data.libsvm`` is the spec):
    ``(labels, entries, min_index, max_index)`` or ``None`` when the text must be refused."""
    labels, entries = [], []
    for line in text.split(b"\n"):
        tokens = [t for t in re.split(rb"[ \t\r\v\f]+", line.split(b"#", 1)[0]) if t]
        if not tokens:
            continue
        label = ref_float(tokens[0])
        if label is None:
            return None
        row = {}
        for token in tokens[1:]:
            if token.startswith(b"qid:"):
                continue
            match = re.fullmatch(rb"([+-]?)([0-9]+):(.*)", token, flags=re.S)
            if not match or len(match.group(2)) > 18:
                return None
            index = int(match.group(2))
            value = ref_float(match.group(3))
            if (match.group(1) == b"-" and index != 0) or value is None or index in row:
                return None
            row[index] = value
        labels.append(label)
        entries.append(row)
    indices = [i for row in entries for i in row]
    if not labels or not indices:
        return None
    return labels, entries, min(indices), max(indices)


AVAILABLE = 1 << 30       # the memory the width check sees during these tests (machine-independent)


def expected_libsvm(text):
    """``ref_libsvm``, and ``None`` too when the width it implies is refused for memory."""
    from asyos.data.source import BYTES_PER_FEATURE
    expected = ref_libsvm(text)
    if expected is not None and (expected[3] - (0 if expected[2] == 0 else 1) + 1) * BYTES_PER_FEATURE > AVAILABLE:
        return None
    return expected


def read_libsvm(path, columns_seed):
    from asyos.data.io import open_source
    source = open_source(path)
    d = source.load()
    check_dataset(d)
    chunks = list(source.iter_rows(chunk_rows=2))
    streamed = sp.vstack([X for X, _ in chunks]).tocsr()
    assert (streamed != d.X).nnz == 0
    np.testing.assert_array_equal(np.concatenate([y for _, y in chunks]), d.y)
    cols = np.random.default_rng(columns_seed).choice(d.X.shape[1], size=min(3, d.X.shape[1]), replace=False)
    assert (source.load(columns=cols).X != d.X[:, cols]).nnz == 0
    return d


@st.composite
def libsvm_texts(draw):
    """Random fragments (one in four), or lines of the right shape (CRLF or LF, blank lines, comments)
    with, in half of the files, one or two pieces damaged or an index repeated."""
    if draw(st.integers(0, 3)) == 0:
        return b"".join(draw(st.lists(st.sampled_from(FRAGMENTS), max_size=40)))
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        label = draw(st.sampled_from([b"1", b"-1", b"0.5", b"+1", b"2", b"-0", b"1e2", b"3.25"]))
        indices = draw(st.lists(st.integers(0, 12), max_size=5, unique=True))
        if draw(st.booleans()):
            indices = sorted(indices)
        values = [draw(st.sampled_from([b"1", b"0.25", b"-2", b"3e1", b"7", b"0", b"1.0000000000000000001",
                                        b"-1E-5", b".5", b"5."])) for _ in indices]
        pieces = [label] + [b"%d:%s" % (i, v) for i, v in zip(indices, values)]
        if draw(st.integers(0, 5)) == 0:
            pieces.append(draw(st.sampled_from([b"qid:7", b"# a comment", b"#", b"qid:1 # x:y"])))
        lines.append(draw(st.sampled_from([b" ", b"\t", b"  ", b" \x0b"])).join(pieces))
        if draw(st.integers(0, 5)) == 0:
            lines.append(draw(st.sampled_from([b"", b"# only a comment", b"   "])))
    if draw(st.booleans()):
        for _ in range(draw(st.integers(1, 2))):
            k = draw(st.integers(0, len(lines) - 1))
            how = draw(st.sampled_from(["fragment", "duplicate", "replace"]))
            if how == "fragment":
                lines[k] += b" " + draw(st.sampled_from(FRAGMENTS))
            elif how == "duplicate" and b":" in lines[k]:
                lines[k] += b" " + lines[k].split()[-1]
            else:
                lines[k] = draw(st.sampled_from(FRAGMENTS)) + lines[k][1:]
    return draw(st.sampled_from([b"\n", b"\r\n"])).join(lines) + draw(st.sampled_from([b"", b"\n", b"\n\n"]))


@fuzz()
@given(libsvm_texts(), st.integers(0, 1000))
def test_libsvm_text_matches_the_reference_reader(text, seed):
    import asyos.data.source as data_source
    expected = expected_libsvm(text)
    with scratch() as tmp, mock.patch.object(data_source, "available_memory_bytes", lambda: AVAILABLE):
        path = os.path.join(tmp, "data.svm")
        with open(path, "wb") as fh:
            fh.write(text)
        kind, d = outcome(lambda: read_libsvm(path, seed))
    if expected is None:
        assert kind == "refused", f"accepted {text!r}"
        return
    assert kind == "ok", f"refused {text!r}: {d}"
    labels, entries, lo, _ = expected
    base = 0 if lo == 0 else 1
    np.testing.assert_array_equal(d.y, labels)
    coo = d.X.tocoo()
    got = {(int(r), int(c)): float(v) for r, c, v in zip(coo.row, coo.col, coo.data)}
    want = {(r, i - base): v for r, row in enumerate(entries) for i, v in row.items() if v != 0.0}
    assert {k: v for k, v in got.items() if v != 0.0} == want


@fuzz(0.5)
@given(libsvm_texts(), st.integers(0, 2 ** 32 - 1))
def test_damaged_gzip_libsvm_is_refused_or_read_exactly(text, seed):
    """A ``.gz`` libsvm file with bytes flipped: gzip's CRC-32 refuses it (a damaged deflate stream was a
    zlib.error traceback), or the text read is the text written."""
    import gzip
    import asyos.data.source as data_source
    rng = np.random.default_rng(seed)
    raw = bytearray(gzip.compress(text))
    flips = int(rng.integers(0, 4))
    for at in rng.integers(0, len(raw), size=flips):
        raw[at] ^= int(rng.integers(1, 256))
    expected = expected_libsvm(text)
    with scratch() as tmp, mock.patch.object(data_source, "available_memory_bytes", lambda: AVAILABLE):
        path = os.path.join(tmp, "data.svm.gz")
        with open(path, "wb") as fh:
            fh.write(bytes(raw))
        kind, d = outcome(lambda: read_libsvm(path, seed))
    if kind == "ok":
        assert expected is not None and list(d.y) == expected[0]
    else:
        assert expected is None or flips, f"refused a valid .gz file: {d}"


# ----------------------------------------------------------------------------------------------- TOML
def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) \
            else repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return "[" + ", ".join(toml_value(v) for v in value) + "]"


def field_names():
    from asyos.runs.config import FIELD_TYPES
    return sorted(FIELD_TYPES)


VALUES = st.one_of(st.integers(-10 ** 20, 10 ** 20), st.integers(-3, 200), st.floats(), st.booleans(),
                   st.text(max_size=8), st.sampled_from(["os", "auto", "exchange", "standard", "1", "0"]),
                   st.lists(st.integers(0, 3), max_size=3))


@st.composite
def toml_files(draw):
    """``(bytes, settings or None)``: the settings when the file is a well-typed table of known names."""
    if draw(st.booleans()):                  # known names, values of their types (ranges unchecked)
        keys = draw(st.lists(st.sampled_from(field_names()), max_size=5, unique=True))
        values = [draw(typed_values(k)) for k in keys]
        keys = [k.replace("_", "-") if draw(st.booleans()) else k for k in keys]
    else:
        keys = draw(st.lists(st.one_of(st.sampled_from(field_names()),
                                       st.sampled_from(["n-features", "step-divisor", "budgets", "run", "Budget"]),
                                       st.text(alphabet="abcdefgh_-", min_size=1, max_size=6)),
                             max_size=5, unique_by=lambda k: k.replace("-", "_")))
        values = [draw(VALUES) for _ in keys]
    layout = draw(st.sampled_from(["top", "top", "run", "run", "run", "both", "other-table"]))
    body = "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in zip(keys, values))
    if layout == "top":
        text = body
    elif layout == "run":
        text = "[run]\n" + body
    elif layout == "both":
        text = "budget = 3\n[run]\n" + body
    else:
        text = "[run]\n" + body + "[extra]\nx = 1\n"
    raw = text.encode()
    damage = draw(st.sampled_from(["none"] * 8 + ["latin1", "cut", "nul", "binary"]))
    if damage == "latin1":
        raw = raw + "# caf\u00e9\n".encode("latin-1")
    elif damage == "cut" and raw:
        raw = raw[:draw(st.integers(0, len(raw) - 1))]
    elif damage == "nul":
        raw = raw + b"\x00"
    elif damage == "binary":
        raw = draw(st.binary(max_size=40))
    known = all(k.replace("-", "_") in field_names() for k in keys)
    expected_ok = damage == "none" and layout in ("top", "run") and known and all(
        well_typed(k.replace("-", "_"), v) for k, v in zip(keys, values))
    return raw, expected_ok, damage == "none" and (layout in ("both", "other-table") or not known or not all(
        well_typed(k.replace("-", "_"), v) for k, v in zip(keys, values) if k.replace("-", "_") in field_names()))


def typed_values(name):
    from asyos.runs.config import RunConfig
    hint = typing.get_type_hints(RunConfig)[name]
    base = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
    if base is bool:
        return st.booleans()
    if base is int:
        return st.integers(-2, 50)
    if base is float:
        return st.floats(-1, 100, allow_nan=False) | st.sampled_from([math.inf, math.nan])
    return st.sampled_from(["os", "auto", "exchange", "kdd16", "standard", "none", "max", "0", "1", "x"])


def well_typed(name, value):
    from asyos.runs.config import RunConfig
    hint = typing.get_type_hints(RunConfig)[name]
    base = next((a for a in typing.get_args(hint) if a is not type(None)), hint)
    if base is bool:
        return isinstance(value, bool)
    if base is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if base is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, str) or (name == "index_base" and isinstance(value, int)
                                      and not isinstance(value, bool))


@fuzz()
@given(toml_files())
def test_toml_config_files(case):
    """Unknown keys, wrong types, tables other than [run], top-level keys next to [run], damaged or
    non-UTF-8 bytes: refused with one line. A well-typed file of known names may still be refused by
    the range checks of the configuration, never with another exception."""
    from asyos.runs.config import load_toml
    from asyos.cli.run import parse_config
    raw, well_formed, must_refuse = case
    with scratch() as tmp:
        path = os.path.join(tmp, "run.toml")
        with open(path, "wb") as fh:
            fh.write(raw)
        kind, settings_ = outcome(lambda: load_toml(path))
        if kind == "ok":
            kind, _ = outcome(lambda: parse_config(["--config", path]))
    if must_refuse:
        assert kind == "refused", f"accepted {raw!r}"
    if well_formed:
        assert settings_ is not None


# ------------------------------------------------------------------------------- the CLI, end to end
def cli_cases(tmp):
    """A few malformed inputs of each kind, written under ``tmp``: ``(name, argv)``."""
    rng = np.random.default_rng(0)
    join = lambda name: os.path.join(tmp, name)  # noqa: E731
    np.savez(join("good.npz"), X=rng.normal(size=(30, 4)), y=rng.normal(size=30))
    raw = bytearray(open(join("good.npz"), "rb").read())
    with zipfile.ZipFile(join("good.npz")) as zf:
        info = zf.getinfo("X.npy")
    raw[info.header_offset + 200] ^= 0xFF
    with open(join("crc.npz"), "wb") as fh:
        fh.write(bytes(raw))
    with open(join("cut.npz"), "wb") as fh:
        fh.write(bytes(raw[:len(raw) // 2]))
    texts = {"dup.svm": b"1 1:1 2:2\n-1 3:1 3:2\n", "huge.svm": b"1 100000000000000000000000:1.0\n",
             "nul.svm": b"1 1:1\n\x00\x01\x02\n", "latin1.toml": "# caf\u00e9\nbudget = 2\n".encode("latin-1"),
             "both.toml": b"budget = 5\n[run]\nseed = 1\n"}
    for name, text in texts.items():
        with open(join(name), "wb") as fh:
            fh.write(text)
    data = [["--data", join(name)] for name in ("crc.npz", "cut.npz", "dup.svm", "huge.svm", "nul.svm")]
    configs = [["--config", join(name)] for name in ("latin1.toml", "both.toml")]
    return data + configs


def test_malformed_inputs_end_the_cli_with_exit_2_and_one_line():
    """Inside the test process (``tests/inprocess.py``): a crash ends the test run (pytest-xdist names
    the test whose worker died), a hang meets pytest-timeout's guard."""
    with scratch() as tmp:
        for argv in cli_cases(tmp):
            status, _, stderr = run_asyos(*argv, "--budget", "2", "--output", os.path.join(tmp, "out"), cwd=REPO)
            assert status == 2, (argv, status, stderr[-2000:])
            assert stderr.strip().count("\n") == 0 and stderr.startswith("asyos: error: "), stderr


@pytest.mark.parametrize("algorithm", ["os", "b-arda"])
@fuzz(0.25)
@given(st.integers(0, 10 ** 6))
def test_damaged_data_through_main_in_process(algorithm, seed):
    """``asyos.run.main`` in-process on a damaged .npz or libsvm file: 0 with finite results, or 2."""
    from asyos.cli.run import main
    rng = np.random.default_rng(seed)
    damaged = seed % 4 != 0                      # one in four is left valid: the run must then succeed
    with scratch() as tmp:
        if seed % 2:
            path = os.path.join(tmp, "d.npz")
            buffer = io.BytesIO()
            np.savez(buffer, X=rng.normal(size=(25, 5)), y=np.sign(rng.normal(size=25)))
            raw = bytearray(buffer.getvalue())
            for at in rng.integers(0, len(raw), size=rng.integers(1, 4) * damaged):
                raw[at] ^= int(rng.integers(1, 256))
        else:
            path = os.path.join(tmp, "d.svm")
            raw = bytearray(b"".join(rng.choice(np.array(FRAGMENTS, dtype=object), size=20 * damaged)))
            raw += b"\n1 1:1 2:1\n-1 3:1\n1 1:-1 3:2\n-1 2:1 3:1\n"
        with open(path, "wb") as fh:
            fh.write(bytes(raw))
        out = os.path.join(tmp, "out")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            status = main(["--algorithm", algorithm, "--data", path, "--budget", "1", "--output", out, "--quiet"])
        assert status in (0, 2), err.getvalue()
        assert status == 0 or damaged, err.getvalue()
        if status == 2:
            assert err.getvalue().strip().count("\n") == 0 and "asyos: error: " in err.getvalue(), err.getvalue()
        else:
            with open(os.path.join(out, "results.json")) as fh:
                results = json.load(fh)
            assert len(results["selected"]) <= 1
            assert all(math.isfinite(v) for v in results["coef"])


# -- checkpoints: every damaged file refused before anything is restored ---------------------------------------
@pytest.fixture(scope="module")
def a_checkpoint():
    """The bytes of a checkpoint of a stopped B-ARDA fit (a state with no externals)."""
    from asyos import BudgetedARDA, make_classification
    from asyos.records.checkpoint import Checkpointer, RunInterrupted
    data = make_classification(n_samples=2000, n_features=200, n_informative=6, seed=3)
    with scratch() as directory:
        path = os.path.join(directory, "cp.pkl")
        with pytest.raises(RunInterrupted):
            BudgetedARDA(budget=6, passes=3).fit(data.X, data.y, checkpoint=Checkpointer(
                path, None, {"problem": "p"}, stop_after=2, run_id=lambda: "run-a"))
        with open(path, "rb") as fh:
            yield fh.read()


def restore(path):
    """What ``--resume`` does with a checkpoint: check it, then unpickle its state."""
    from asyos.records.checkpoint import Checkpointer
    checkpoint = Checkpointer(path, None, {"problem": "p"}, resume=True, run_id=lambda: "run-a")
    return checkpoint.take("sample-stream")


@fuzz()
@given(st.data())
def test_a_damaged_checkpoint_is_refused_before_anything_is_restored(a_checkpoint, data):
    """A flipped byte anywhere (the magic line, the header's digest, the header, the state) or a truncation
    at any length: one line naming the file, before the state is unpickled."""
    damage = data.draw(st.sampled_from(["flip", "truncate"]))
    blob = bytearray(a_checkpoint)
    if damage == "flip":
        at = data.draw(st.integers(0, len(blob) - 1))
        blob[at] ^= data.draw(st.integers(1, 255))
    else:
        blob = blob[:data.draw(st.integers(0, len(blob) - 1))]
    with scratch() as directory:
        path = os.path.join(directory, "cp.pkl")
        with open(path, "wb") as fh:
            fh.write(bytes(blob))
        kind, message = outcome(lambda: restore(path))
    assert kind == "refused" and path in message, (kind, message)


def test_the_undamaged_checkpoint_restores(a_checkpoint):
    with scratch() as directory:
        path = os.path.join(directory, "cp.pkl")
        with open(path, "wb") as fh:
            fh.write(a_checkpoint)
        assert restore(path) is not None
        from asyos.records.checkpoint import Checkpointer
        with pytest.raises(InputError, match="belongs to another run"):
            Checkpointer(path, None, {"problem": "p"}, resume=True, run_id=lambda: "run-b")
