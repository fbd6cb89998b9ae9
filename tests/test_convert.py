"""``python -m asyos.convert``: every source kind to every output format, read back with numpy, scipy and
pyarrow directly and compared with the matrix the source was made from; tiny ``--memory`` so that several
column groups, spill blocks and row chunks are exercised; refusals; bounded peak memory."""
import gzip
import os
import subprocess
import sys
import zipfile

import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp

import asyos.cli.convert as convert_mod
from asyos.cli.convert import main

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = "0.004"     # MB: groups of a few columns, chunks of a few rows


def _matrix(rng, n, p, density=0.3):
    X = rng.normal(size=(n, p)) * (rng.random((n, p)) < density)
    X[0, :] = 0.0                              # an empty row
    X[:, 1] = 0.0                              # an empty column
    X[2, 3] = 1e-60                            # a value float32 rounds to zero
    return X


def _libsvm_text(X, y):
    lines = []
    for row, label in zip(X, y):
        nz = np.flatnonzero(row)
        lines.append(" ".join([repr(float(label))] + [f"{j + 1}:{float(row[j])!r}" for j in nz]))
    return "\n".join(lines) + "\n"


def _make_source(kind, tmp_path, rng):
    """``(path, extra CLI args, X, y, X_test or None, y_test or None)``."""
    X, y = _matrix(rng, 41, 29), rng.normal(size=41)
    Xt, yt = _matrix(rng, 13, 29), rng.normal(size=13)
    if kind == "npz-split":
        path = tmp_path / "d.npz"
        np.savez(path, X_train=X, y_train=y, X_test=Xt, y_test=yt)
        return str(path), [], X, y, Xt, yt
    if kind == "npz":
        path = tmp_path / "d.npz"
        np.savez_compressed(path, X=X.astype(np.float32), y=y)
        return str(path), [], X.astype(np.float32).astype(np.float64), y, None, None
    if kind == "csr-dir":
        d = tmp_path / "csr"
        d.mkdir()
        sp.save_npz(d / "X_train.npz", sp.csr_matrix(X))
        np.save(d / "y_train.npy", y)
        sp.save_npz(d / "X_test.npz", sp.csr_matrix(Xt))
        np.save(d / "y_test.npy", yt)
        return str(d), [], X, y, Xt, yt
    X[:, -1] = 0.0
    X[5, -1] = 2.5                             # the last column is used: the width is inferred right
    if kind == "libsvm":
        path, test = tmp_path / "d.svm", tmp_path / "t.svm"
        path.write_text(_libsvm_text(X, y))
        test.write_text(_libsvm_text(Xt, yt))
        return str(path), ["--test-data", str(test), "--index-base", "1"], X, y, Xt, yt
    assert kind == "libsvm-gz"
    path = tmp_path / "d.svm.gz"
    with gzip.open(path, "wt") as fh:
        fh.write(_libsvm_text(X, y))
    return str(path), ["--index-base", "1"], X, y, None, None


def _read_back(fmt, dst, has_test):
    """``[(X, y)]`` per split, read with numpy / scipy / pyarrow only."""
    if fmt == "dense":
        names = [("X.npy", "y.npy"), ("X_test.npy", "y_test.npy")]
        out = []
        for xn, yn in names[:1 + has_test]:
            X = np.load(os.path.join(dst, xn), mmap_mode="r")
            assert X.flags.f_contiguous and not X.flags.c_contiguous
            out.append((np.asarray(X), np.load(os.path.join(dst, yn))))
        return out
    if fmt == "csc":
        names = [("X_train.npz", "y_train.npy"), ("X_test.npz", "y_test.npy")] if has_test else [("X.npz", "y.npy")]
        out = []
        for xn, yn in names:
            path = os.path.join(dst, xn)
            with zipfile.ZipFile(path) as zf:
                assert sorted(zf.namelist()) == ["data.npy", "format.npy", "indices.npy", "indptr.npy", "shape.npy"]
                assert all(info.compress_type == zipfile.ZIP_STORED for info in zf.infolist())
            X = sp.load_npz(path)
            assert X.format == "csc"
            assert X.indices.dtype == np.int32 and X.indptr.dtype == np.int32
            check = X.copy()
            check.has_canonical_format = False
            check.sum_duplicates()
            assert np.array_equal(check.indices, X.indices)           # sorted, no duplicates
            assert np.all(X.data != 0)                                # no explicit zeros
            out.append((X.toarray(), np.load(os.path.join(dst, yn))))
        return out
    files = [os.path.join(dst, "train.parquet"), os.path.join(dst, "test.parquet")] if has_test else [dst]
    out = []
    for f in files:
        table = pq.read_table(f)
        p = table.num_columns - 1
        assert table.column_names == [f"f{j}" for j in range(p)] + ["y"]
        X = np.column_stack([table[f"f{j}"].to_numpy() for j in range(p)])
        out.append((X, table["y"].to_numpy()))
    return out


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("fmt", ["dense", "csc", "parquet"])
@pytest.mark.parametrize("kind", ["npz-split", "npz", "csr-dir", "libsvm", "libsvm-gz"])
def test_round_trip(kind, fmt, dtype, tmp_path, rng, capsys):
    src, extra, X, y, Xt, yt = _make_source(kind, tmp_path, rng)
    has_test = Xt is not None
    dst = str(tmp_path / ("out.parquet" if fmt == "parquet" and not has_test else "out"))
    memory = "0.3" if fmt == "parquet" else TINY     # parquet: row groups of a few rows (see test_parquet_refusals)
    assert main([src, dst, "--format", fmt, "--dtype", dtype, "--memory", memory, *extra]) == 0
    summary = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"p={X.shape[1]}" in summary and f"n={X.shape[0]}" in summary
    expected = [(X, y)] + ([(Xt, yt)] if has_test else [])
    got = _read_back(fmt, dst, has_test)
    assert len(got) == len(expected)
    for (Xg, yg), (Xe, ye) in zip(got, expected):
        assert Xg.dtype == np.dtype(dtype) and yg.dtype == np.float64
        assert np.array_equal(Xg, Xe.astype(dtype))    # float64 bit-exact; float32 the rounded values
        assert np.array_equal(yg, ye)
    assert os.listdir(tmp_path).count("out") + os.listdir(tmp_path).count("out.parquet") == 1
    assert not [f for f in os.listdir(tmp_path) if ".convert-" in f]      # the staging directory is gone


def test_default_formats(tmp_path, rng):
    src, _, X, y, _, _ = _make_source("npz", tmp_path, rng)
    assert main([src, str(tmp_path / "a"), "-q"]) == 0
    assert os.path.exists(tmp_path / "a" / "X.npy")
    assert main([src, str(tmp_path / "b.parquet"), "-q"]) == 0
    assert pq.read_table(tmp_path / "b.parquet").num_rows == X.shape[0]
    src, extra, *_ = _make_source("libsvm-gz", tmp_path, rng)
    assert main([src, str(tmp_path / "c"), "-q", *extra]) == 0
    assert os.path.exists(tmp_path / "c" / "X.npz")


def test_progress_lines_and_summary(tmp_path, rng, monkeypatch, capsys):
    src, extra, X, y, Xt, yt = _make_source("libsvm", tmp_path, rng)
    monkeypatch.setenv("ASYOS_PROGRESS_EVERY", "0")
    assert main([src, str(tmp_path / "out"), "--memory", TINY, *extra]) == 0
    lines = capsys.readouterr().err.splitlines()
    reading = [ln for ln in lines if "read train rows" in ln]
    assert reading and all("rows/s" in ln for ln in reading) and all("ETA" in ln for ln in reading[:-1])
    assert reading[-1].startswith(f"asyos: convert: read train rows: {X.shape[0]} of {X.shape[0]} rows (100%)")
    assert any(f"read test rows: {Xt.shape[0]} of {Xt.shape[0]}" in ln for ln in lines)
    assert any("wrote columns" in ln for ln in lines)
    nnz = np.count_nonzero(X) + np.count_nonzero(Xt)
    assert lines[-1].startswith("asyos: convert: ") and f"nnz={nnz}," in lines[-1] and "bytes written in" in lines[-1]
    assert main([src, str(tmp_path / "quiet"), "-q", *extra]) == 0
    assert capsys.readouterr().err == ""


def test_a_source_without_a_streamed_test_split(tmp_path, rng, monkeypatch):
    """A source that cannot stream its test split (test_source not implemented) has it loaded whole."""
    from asyos.data.io import DenseNpzSource
    src, _, X, y, Xt, yt = _make_source("npz-split", tmp_path, rng)

    def not_implemented(self):
        raise NotImplementedError
    monkeypatch.setattr(DenseNpzSource, "test_source", not_implemented)
    assert main([src, str(tmp_path / "out"), "--format", "csc", "--memory", TINY, "-q"]) == 0
    assert np.array_equal(sp.load_npz(tmp_path / "out" / "X_test.npz").toarray(), Xt)
    assert np.array_equal(np.load(tmp_path / "out" / "y_test.npy"), yt)
    assert np.array_equal(sp.load_npz(tmp_path / "out" / "X_train.npz").toarray(), X)


def test_csc_members_are_what_save_npz_writes(tmp_path, rng):
    """Byte for byte the members ``scipy.sparse.save_npz(X.tocsc(), compressed=False)`` writes."""
    src, extra, X, y, _, _ = _make_source("libsvm-gz", tmp_path, rng)
    assert main([src, str(tmp_path / "out"), "--memory", TINY, "-q", *extra]) == 0
    sp.save_npz(tmp_path / "ref.npz", sp.csr_matrix(X).tocsc(), compressed=False)
    with zipfile.ZipFile(tmp_path / "out" / "X.npz") as mine, zipfile.ZipFile(tmp_path / "ref.npz") as ref:
        assert mine.namelist() == ref.namelist()
        for name in ref.namelist():
            assert mine.read(name) == ref.read(name), name


def test_tiny_memory_uses_several_groups_chunks_and_column_ranges(tmp_path, rng, monkeypatch):
    src, extra, X, y, _, _ = _make_source("libsvm", tmp_path, rng)
    seen = {"dense_add": 0, "csc_add": 0, "ranges": 0}
    dense_add, csc_add, group = convert_mod._DenseWriter.add, convert_mod._CscWriter.add, convert_mod._CscWriter._group

    def count(key, fn):
        def wrapped(self, *a):
            seen[key] += 1
            seen[key + "_groups"] = max(seen.get(key + "_groups", 0), len(self.bounds) - 1)
            return fn(self, *a)
        return wrapped

    monkeypatch.setattr(convert_mod._DenseWriter, "add", count("dense_add", dense_add))
    monkeypatch.setattr(convert_mod._CscWriter, "add", count("csc_add", csc_add))
    real_write = convert_mod._write_all

    def spy_group(self, g, index, out_indices, out_data):
        before = seen["ranges"]

        def write(fh, buf):
            if fh is out_data:
                seen["ranges"] += 1
            return real_write(fh, buf)
        monkeypatch.setattr(convert_mod, "_write_all", write)
        group(self, g, index, out_indices, out_data)
        monkeypatch.setattr(convert_mod, "_write_all", real_write)
        assert seen["ranges"] > before

    monkeypatch.setattr(convert_mod._CscWriter, "_group", spy_group)
    real_pwrite = convert_mod._pwrite_all

    def spy_pwrite(*a):
        seen["pwrite"] = seen.get("pwrite", 0) + 1
        return real_pwrite(*a)
    monkeypatch.setattr(convert_mod, "_pwrite_all", spy_pwrite)
    for fmt in ("dense", "csc"):
        assert main([src, str(tmp_path / fmt), "--format", fmt, "--memory", "0.002", "-q", *extra]) == 0
    assert seen["dense_add"] > 3 and seen["dense_add_groups"] > 3
    assert seen["pwrite"] > 2 * X.shape[1]          # groups written in row blocks, column by column
    assert seen["csc_add"] > 3 and seen["csc_add_groups"] > 1
    assert seen["ranges"] > seen["csc_add_groups"]                # some group was split in column ranges
    assert np.array_equal(sp.load_npz(tmp_path / "csc" / "X_train.npz").toarray(), X)
    assert np.array_equal(np.load(tmp_path / "dense" / "X.npy"), X)


def test_existing_destination_refused_then_overwritten(tmp_path, rng, capsys):
    src, _, X, y, _, _ = _make_source("npz", tmp_path, rng)
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "keep").write_text("old")
    assert main([src, str(dst)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--overwrite" in err
    assert (dst / "keep").exists()
    assert main([src, str(dst), "--overwrite", "-q"]) == 0
    assert sorted(os.listdir(dst)) == ["X.npy", "y.npy"]
    assert np.array_equal(np.load(dst / "X.npy"), X)


@pytest.mark.parametrize("name, content, message", [
    ("bad.svm", "1 1:2\n-1 3:x\n", "line 2"),
    ("bad.svm", "1 1:2 4:nan\n", "finite"),
    ("bad.svm.gz", "1 1:2\n", "cannot read"),          # not gzip data
])
def test_malformed_source_exits_2_with_one_line(tmp_path, name, content, message):
    src = tmp_path / name
    src.write_text(content)
    dst = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "asyos.convert", str(src), str(dst)], capture_output=True,
                          text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO}, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("asyos: error:") and message in proc.stderr
    assert sorted(os.listdir(tmp_path)) == [name]                  # no DST, no staging directory


def test_interrupted_conversion_leaves_nothing(tmp_path, rng, monkeypatch, capsys):
    src, _, X, y, _, _ = _make_source("npz-split", tmp_path, rng)

    def interrupted(self, progress):
        raise KeyboardInterrupt

    monkeypatch.setattr(convert_mod._DenseWriter, "finish", interrupted)
    assert main([src, str(tmp_path / "out")]) == 130
    assert sorted(os.listdir(tmp_path)) == ["d.npz"]


def test_parquet_refusals(tmp_path, rng, monkeypatch, capsys):
    src, _, X, *_ = _make_source("npz-split", tmp_path, rng)
    assert main([src, str(tmp_path / "o.parquet")]) == 2
    assert "test split" in capsys.readouterr().err
    assert main([src, str(tmp_path / "o"), "--format", "parquet", "--memory", "0.004"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "row-group metadata" in err and "--memory" in err
    monkeypatch.setattr(convert_mod, "PARQUET_MAX_FEATURES", X.shape[1] - 1)
    assert main([src, str(tmp_path / "o"), "--format", "parquet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--format dense" in err
    assert sorted(os.listdir(tmp_path)) == ["d.npz"]


def test_parquet_uses_feature_names(tmp_path, rng):
    X, y = rng.normal(size=(200, 3)), rng.normal(size=200)
    np.savez(tmp_path / "d.npz", X=X, y=y, feature_names=np.array(["age", "bmi", "bp"]))
    assert main([str(tmp_path / "d.npz"), str(tmp_path / "o.parquet"), "-q", "--memory", "0.02"]) == 0
    assert pq.ParquetFile(tmp_path / "o.parquet").metadata.num_row_groups > 2
    table = pq.read_table(tmp_path / "o.parquet")
    assert table.column_names == ["age", "bmi", "bp", "y"]
    assert np.array_equal(table["bmi"].to_numpy(), X[:, 1]) and np.array_equal(table["y"].to_numpy(), y)


def _write_big_npz(path, n, p, rng):
    """A row-major float64 ``X, y`` .npz written in row chunks (never held whole)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        with zf.open("X.npy", "w", force_zip64=True) as fh:
            fh.write(convert_mod._npy_header((n, p), np.float64))
            for lo in range(0, n, 256):
                fh.write(rng.normal(size=(min(256, n - lo), p)).tobytes())
        with zf.open("y.npy", "w", force_zip64=True) as fh:
            np.lib.format.write_array(fh, rng.normal(size=n))


PEAK_SCRIPT = """
import sys
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024
import numpy, scipy.sparse, zipfile
from asyos.cli.convert import main
base = hwm()
assert main(sys.argv[1:]) == 0
print(base, hwm())
"""


def test_peak_memory_is_bounded(tmp_path, rng):
    n, p = 1200, 32000                             # 307 MB of float64
    src = tmp_path / "big.npz"
    _write_big_npz(src, n, p, rng)
    dst = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, str(src), str(dst), "--memory", "64", "-q"],
                          capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": REPO},
                          timeout=200)
    assert proc.returncode == 0, proc.stderr
    base, peak = (int(v) for v in proc.stdout.split())
    print("peak growth MB", (peak - base) / 2 ** 20)
    assert peak - base < 110 * 2 ** 20, (base, peak)    # well below the 307 MB of data
    X = np.load(dst / "X.npy", mmap_mode="r")
    with zipfile.ZipFile(src) as zf, zf.open("X.npy") as fh:
        np.lib.format.read_magic(fh)
        np.lib.format.read_array_header_1_0(fh)
        for lo in range(0, n, 300):                  # compare in row blocks
            block = np.frombuffer(fh.read(300 * p * 8), dtype=np.float64).reshape(-1, p)
            assert np.array_equal(X[lo:lo + block.shape[0]], block)
