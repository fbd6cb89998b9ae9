"""Row streams: the compiled libsvm block reader (files, .gz, stdin), Parquet row groups, and the
sample-stream learners learning from a file as it is read (``asyos.runs.stream_run``)."""
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_file

import asyos.data.libsvm as libsvm
from asyos.data.io import open_source
from asyos.errors import InputError
from tests.inprocess import run_asyos

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ENV = {**os.environ, "PYTHONPATH": REPO, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
FORMATS = [repr, lambda v: f"{v:.6g}", lambda v: f"{v:e}", lambda v: f"{v:.3E}", lambda v: f"{v:+.4f}",
           lambda v: f"{v:.17g}", lambda v: f"{v:.15g}"]


def _short(text):
    """``.5`` for ``0.5`` and ``-.5`` for ``-0.5``: forms float() accepts that some writers use."""
    if text.startswith("0.") and len(text) > 2:
        return text[1:]
    if text.startswith("-0.") and len(text) > 3:
        return "-" + text[2:]
    return text


def _random_doubles(rng, size):
    """Finite doubles of every kind: random bit patterns (all exponents, subnormals), normal values
    of random magnitudes, short decimals, integers and zeros."""
    bits = rng.integers(0, 2 ** 63, size=size, dtype=np.int64).view(np.float64)
    bits[~np.isfinite(bits)] = 1.0
    bits *= rng.choice([-1, 1], size)
    kinds = rng.integers(0, 5, size=size)
    out = np.where(kinds == 0, bits, rng.standard_normal(size) * 10.0 ** rng.integers(-30, 30, size))
    out = np.where(kinds == 2, np.round(rng.standard_normal(size) * 10.0 ** rng.integers(0, 6, size)) / 1000, out)
    out = np.where(kinds == 3, rng.integers(-1000, 1000, size), out)
    return np.where(kinds == 4, 0.0, out)


def libsvm_text(rng):
    """``(text, rows, y, p)``: a random sparse matrix written in random forms (comments, qid, blank
    lines, CRLF, tabs, scientific notation, ``.5``, repr's 17 digits); ``rows`` holds each row's
    columns and the values float() gives for the tokens written."""
    n, p = int(rng.integers(1, 13)), int(rng.integers(1, 26))
    newline = ["\n", "\r\n"][rng.integers(2)]
    lines, labels, rows = (["# a comment line"] if rng.integers(2) else []), [], []
    for _ in range(n):
        cols = sorted(rng.choice(p, int(rng.integers(0, p + 1)), replace=False).tolist())
        fmt = FORMATS[rng.integers(len(FORMATS))]
        texts = [fmt(float(v)) for v in _random_doubles(rng, len(cols))]
        if rng.integers(2):
            texts = [_short(t) for t in texts]
        label = float(rng.choice([1.0, -1.0, 0.5, 2.5e-3, -7.0]))
        tokens = [str(rng.choice(["+1", "1", "1.0"])) if label == 1.0 else repr(label)]
        if rng.integers(2):
            tokens.append(f"qid:{rng.integers(100)}")
        tokens += [f"{c}:{t}" for c, t in zip(cols, texts)]
        line = str(rng.choice([" ", "\t", "  "])).join(tokens)
        if rng.integers(2):
            line += " # trailing comment 1:2"
        lines.append(line)
        if rng.integers(2):
            lines.append("")
        labels.append(label)
        rows.append((cols, [float(t) for t in texts]))
    return newline.join(lines) + (newline if rng.integers(2) else ""), rows, np.array(labels), p


@pytest.mark.parametrize("seed", range(60))
def test_parser_equals_sklearn_and_float(tmp_path, monkeypatch, seed):
    """Random files (seeded; ``libsvm_text``) give scikit-learn's matrix and Python float()'s values
    bit for bit, whatever the block size (tiny blocks force lines across blocks)."""
    rng = np.random.default_rng(seed)
    text, rows, y, p = libsvm_text(rng)
    path = tmp_path / "case.svm"
    path.write_bytes(text.encode())
    monkeypatch.setattr(libsvm, "BLOCK_BYTES", [1 << 24, 7, 64][seed % 3])
    data = open_source(str(path), index_base=0, n_features=p).load()
    X_ref, y_ref = load_svmlight_file(str(path), n_features=p, zero_based=True)
    X = data.X.tocsr()
    assert X.shape == X_ref.shape
    np.testing.assert_array_equal(X.toarray(), X_ref.toarray())
    np.testing.assert_array_equal(data.y, y_ref)
    np.testing.assert_array_equal(data.y, y)
    for i, (cols, vals) in enumerate(rows):
        got = X[i].toarray().ravel()[cols]
        assert [v.hex() for v in got] == [v.hex() for v in vals] or np.array_equal(got, vals)   # -0.0
    chunks = list(open_source(str(path), index_base=0, n_features=p).iter_rows(0, None, 3))
    np.testing.assert_array_equal(sp.vstack([c[0] for c in chunks]).toarray(), X_ref.toarray())


@pytest.mark.parametrize("form", ["{!r}", "{:.17g}", "{:.16e}", "{:.15g}", "{:.1f}", "{:.20f}", "{:.25e}",
                                  "{:.3g}"])
def test_values_equal_python_float(form):
    """20000 doubles of every kind (``_random_doubles``) in one block: each value is float()'s."""
    values = _random_doubles(np.random.default_rng(7), 20000)
    tokens = [form.format(float(v)) for v in values]
    text = "".join(f"1 3:{t}\n" for t in tokens).encode()
    block = libsvm.parse_bytes(text, len(text), True, 0, -1, "x")
    expected = np.array([float(t) for t in tokens])
    np.testing.assert_array_equal(block.data.view(np.int64), expected.view(np.int64))


def _write(path, X, y, base=1):
    with open(path, "w") as fh:
        for i in range(X.shape[0]):
            row = X[i]
            fh.write(f"{y[i]:g} " + " ".join(f"{j + base}:{v:.6g}" for j, v in zip(row.indices, row.data)) + "\n")


@pytest.fixture(scope="module")
def svm_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = sp.random(600, 80, density=0.1, format="csr", random_state=2)
    X.data = np.round(X.data * 10 - 5, 3)
    w = np.zeros(80)
    w[:6] = rng.normal(size=6)
    y = np.where(X @ w + 0.01 * rng.normal(size=600) >= 0, 1.0, -1.0)
    d = tmp_path_factory.mktemp("rows")
    path = d / "train.svm"
    _write(path, X, y)
    with open(path, "rb") as src, gzip.open(str(path) + ".gz", "wb") as dst:
        dst.write(src.read())
    return str(path), X, y


def test_gz_and_columns_give_the_same_rows(svm_file):
    path, X, y = svm_file
    plain, packed = open_source(path), open_source(path + ".gz")
    assert (plain.n_features, plain.n_train, plain.index_base) == (packed.n_features, packed.n_train, 1) == (80, 600, 1)
    np.testing.assert_array_equal(packed.load().X.toarray(), X.toarray())
    np.testing.assert_array_equal(packed.labels(), y)
    cols = np.array([70, 3, 41, 0])
    np.testing.assert_array_equal(plain.load(cols).X.toarray(), X[:, cols].toarray())
    got = list(packed.iter_rows(100, 450, 64))
    np.testing.assert_array_equal(sp.vstack([c[0] for c in got]).toarray(), X[100:450].toarray())


def test_columns_of_a_file_with_a_huge_index(tmp_path):
    """A line with index 10^9: a shard's load follows the features that occur, not the largest index
    (the former O(p) position map needed 8 GB here)."""
    path = tmp_path / "wide.svm"
    path.write_text("1 1:2 1000000000:3\n-1 5:1.5 1:4\n")
    source = open_source(str(path), index_base=1, n_features=10 ** 9)
    assert source.n_features == 10 ** 9
    d = source.load(columns=[10 ** 9 - 1, 0, 4])
    np.testing.assert_array_equal(d.X.toarray(), [[3, 2, 0], [0, 4, 1.5]])


def test_an_inferred_width_beyond_memory_is_refused_with_the_memory_needed(tmp_path, monkeypatch):
    """One stray index of 10^9 and no --n-features: refused before any p-sized array exists, saying the
    memory (4 GiB available here by monkeypatch, so that the check does not depend on the machine)."""
    import asyos.data.source as source
    monkeypatch.setattr(source, "available_memory_bytes", lambda: 4 << 30)
    path = tmp_path / "wide.svm"
    path.write_text("1 1:2 1000000000:3\n-1 5:1.5 1:4\n")
    with pytest.raises(InputError, match=r"index, 1000000000, makes p = 1,000,000,000 .* 29.8 GiB, more than "
                                         r"the 4.0 GiB available"):
        open_source(str(path))
    assert open_source(str(path), n_features=10 ** 9).n_features == 10 ** 9     # declared: taken as meant
    path.write_text("1 1:2 100000:3\n")
    assert open_source(str(path)).n_features == 100000


@pytest.mark.parametrize("line", ["1 2:1 2:2.5 1:1", "1 1:1 2:2 1:3", "1 3:1 1:2 3:1", "1 1:1 1:1"])
def test_duplicate_indices_in_a_line_are_refused(tmp_path, line):
    """As scikit-learn's ``load_svmlight_file`` does (it also refuses unsorted indices; those are accepted
    here, being unambiguous): a value given twice was summed silently."""
    path = tmp_path / "dup.svm"
    path.write_text(f"-1 4:1\n{line}\n1 2:1\n")
    from asyos.data.libsvm import iter_blocks, scan
    for read in (lambda: scan(str(path)), lambda: list(iter_blocks(str(path), True)),  # the scan, the reads
                 lambda: open_source(str(path))):
        with pytest.raises(InputError, match=r"dup.svm line 2: duplicate feature index (1|2|3)"):
            read()
    path.write_text("1 3:1 1:2 2:4\n")
    np.testing.assert_array_equal(open_source(str(path), index_base=1).load().X.toarray(), [[2, 4, 1]])


@pytest.mark.parametrize("content, message", [
    ("1 1:1\n1 2:1\n# c\n\n1 3:x\n", "bad.svm line 5: cannot read '3:x' as index:value"),
    ("1 1:1\r\n+1 2:1 qid:3 4\r\n", "line 2: cannot read '4' as index:value"),
    ("1 1:1\nfoo 1:2\n", "line 2: label 'foo' is not a number"),
    ("1 1:1\n\n1 -3:2\n", "line 3: negative feature index -3"),
    ("1 1:1\n1 2:nan\n", "line 2: the data contains NaN or infinite values"),
    ("inf 1:1\n", "line 1: the data contains NaN or infinite values"),
    ("1 1:1e999\n", "line 1: the data contains NaN or infinite values"),
    ("1 99999999999999999999:1\n", "line 1: feature index in '99999999999999999999:1' is too large"),
    ("1 1:1 2:\n", "line 1: cannot read '2:' as index:value"),
])
@pytest.mark.parametrize("block", [None, 5])
def test_errors_name_the_line(tmp_path, monkeypatch, content, message, block):
    if block is not None:
        monkeypatch.setattr(libsvm, "BLOCK_BYTES", block)
    path = tmp_path / "bad.svm"
    path.write_text(content)
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        open_source(str(path)).load()


def run_cli(args, tmp_path, stdin=None, name="out"):
    """``python -m asyos.run``: a real process when it reads ``stdin``, else inside this one
    (``tests/inprocess.py``; stderr as bytes either way)."""
    out = tmp_path / name
    args = [*args, "--output", str(out), "--quiet"]
    if stdin is not None:
        proc = subprocess.run([sys.executable, "-m", "asyos.run", *args], input=stdin, capture_output=True,
                              timeout=300, cwd=REPO, env=ENV)
    else:
        status, stdout, stderr = run_asyos(*args, cwd=REPO, env=ENV)
        proc = subprocess.CompletedProcess(args, status, stdout.encode(), stderr.encode())
    record = json.loads((out / "results.json").read_text()) if proc.returncode == 0 else None
    return proc, record


def _in_memory(X, y, chunk, passes, budget):
    from asyos.runs.config import RunConfig
    from asyos.registry import get_algorithm
    config = RunConfig(algorithm="b-arda", budget=budget, passes=passes).validated()
    est = get_algorithm("b-arda").build(config, "squared_hinge", budget)
    for _ in range(passes):
        for lo in range(0, X.shape[0], chunk):
            est.partial_fit(X[lo:lo + chunk], y[lo:lo + chunk], classes=[-1.0, 1.0])
    return est


def test_streamed_cli_equals_partial_fit_on_the_same_chunks(svm_file, tmp_path):
    path, _, _ = svm_file
    X, y = load_svmlight_file(path, n_features=81, zero_based=True)   # the file's own values
    X = X[:, 1:]
    proc, rec = run_cli(["--algorithm", "b-arda", "--data", path, "--budget", "5", "--passes", "2",
                         "--chunk-rows", "70", "--test-data", path + ".gz"], tmp_path)
    assert proc.returncode == 0, proc.stderr.decode()
    est = _in_memory(X, y, 70, 2, 5)
    assert rec["mode"] == "streamed" and rec["n_passes"] == 2 and rec["train_metrics"] == "final model"
    np.testing.assert_array_equal(rec["selected"], est.support_)
    np.testing.assert_array_equal(rec["coef"], est.coef_[est.support_])
    u = X @ est.coef_
    assert rec["metrics"]["train_error"] == pytest.approx(np.mean(np.where(u >= 0, 1, -1) != y))
    assert rec["metrics"]["test_error"] == rec["metrics"]["train_error"]
    assert rec["problem"]["n_samples"] == 600 and rec["n_samples_seen"] == 1200
    # stdin: one pass, the same model as the file's one pass
    text = open(path, "rb").read()
    _, one = run_cli(["--algorithm", "b-arda", "--data", path, "--budget", "5", "--passes", "1",
                      "--chunk-rows", "70"], tmp_path, name="file1")
    proc, piped = run_cli(["--algorithm", "b-arda", "--data", "-", "--n-features", "80", "--budget", "5",
                           "--passes", "1", "--chunk-rows", "70"], tmp_path, stdin=text, name="stdin")
    assert proc.returncode == 0, proc.stderr.decode()
    assert piped["selected"] == one["selected"] and piped["coef"] == one["coef"]
    assert piped["train_metrics"] == "progressive" and piped["problem"]["n_samples"] == 600


@pytest.mark.parametrize("args, message", [
    (["--passes", "2", "--n-features", "80"], "standard input is read once: --passes 2 needs a file"),
    (["--passes", "1"], "needs --n-features"),
    (["--passes", "1", "--n-features", "10"], "<stdin> line 1: feature index .* beyond 10 features"),
])
def test_stdin_refusals(svm_file, tmp_path, args, message):
    path, _, _ = svm_file
    proc, _ = run_cli(["--algorithm", "b-arda", "--data", "-", "--budget", "5", *args], tmp_path,
                      stdin=open(path, "rb").read())
    assert proc.returncode == 2
    import re
    assert re.search(message, proc.stderr.decode()), proc.stderr.decode()


def test_parquet_rows_both_layouts_and_the_cli(svm_file, tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    from asyos.data.parquet_rows import write_sparse_parquet
    path, X, y = svm_file
    X = open_source(path).load().X          # the values as written (6 digits)
    sparse_path = str(tmp_path / "rows.parquet")
    write_sparse_parquet(sparse_path, X, y, row_group_rows=128)
    dense = X.toarray()
    wide_path = str(tmp_path / "wide.parquet")
    pq.write_table(pa.table({**{f"f{j}": dense[:, j] for j in range(80)}, "y": y}), wide_path, row_group_size=100)
    for p in (sparse_path, wide_path):
        source = open_source(p, rows=True)
        assert (source.n_train, source.n_features) == (600, 80)
        chunks = list(source.iter_rows(130, 530, 50))
        assert all(c[0].shape[0] <= 50 for c in chunks)
        got = np.vstack([c[0].toarray() if sp.issparse(c[0]) else c[0] for c in chunks])
        np.testing.assert_array_equal(got, dense[130:530])
        np.testing.assert_array_equal(np.concatenate([c[1] for c in chunks]), y[130:530])
    runs = [run_cli(["--algorithm", "b-arda", "--data", p, "--budget", "5", "--passes", "1", "--chunk-rows", "64"],
                    tmp_path, name=f"o{i}")[1] for i, p in enumerate((path, sparse_path, wide_path))]
    assert runs[0]["selected"] == runs[1]["selected"] == runs[2]["selected"]
    np.testing.assert_allclose(runs[1]["coef"], runs[0]["coef"], rtol=0, atol=0)
    np.testing.assert_allclose(runs[2]["coef"], runs[0]["coef"], rtol=1e-12)


PEAK_SCRIPT = """
import sys
def hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
import numpy as np, scipy.sparse as sp, sklearn, asyos.runs.stream_run, asyos.data.libsvm as L
from asyos.learners.stream.budgeted import BudgetedARDA
line = bytearray(b"1 1:1 2:2\\n")
L.parse_bytes(line, len(line), True, 0, -1, "warm")
L.parse_bytes(line, len(line), False, 0, -1, "warm")
BudgetedARDA(budget=1, passes=1).partial_fit(sp.random(10, 5, density=0.5, format="csr"), np.arange(10) % 2 * 2 - 1.0)
before = hwm()
from asyos.cli.run import main
status = main(sys.argv[1:])
print("PEAK", before, hwm(), status)
"""


def test_streaming_a_large_file_holds_a_block_not_the_file(tmp_path):
    """125 000 rows x 100 values (a 200 MB CSR as float64 + int64): the streamed CLI run's peak RSS
    grows by far less than the matrix."""
    rng = np.random.default_rng(1)
    n_distinct, repeat, d, k = 500, 250, 200000, 100
    lines = []
    for i in range(n_distinct):
        cols = np.sort(rng.choice(d, k, replace=False)) + 1
        vals = rng.normal(size=k)
        lines.append(f"{1 if i % 2 else -1} " + " ".join(f"{c}:{v:.5f}" for c, v in zip(cols, vals)))
    text = ("\n".join(lines) + "\n").encode()
    path = tmp_path / "big.svm"
    with open(path, "wb") as fh:
        for _ in range(repeat):
            fh.write(text)
    n = n_distinct * repeat
    csr_bytes = n * k * 16
    assert csr_bytes >= 200e6
    proc = subprocess.run([sys.executable, "-c", PEAK_SCRIPT, "--algorithm", "b-arda", "--data", str(path),
                           "--budget", "10", "--passes", "1", "--quiet"],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=ENV)
    assert proc.returncode == 0, proc.stderr
    before, after, status = (int(v) for v in proc.stdout.split("PEAK")[1].split())
    assert status == 0
    assert after - before < 0.5 * csr_bytes, (before, after)    # measured: about 0.35


def test_parquet_rows_refuse_what_they_cannot_read(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    path = str(tmp_path / "nolabel.parquet")
    pq.write_table(pa.table({"a": [1.0, 2.0], "b": [0.0, 1.0]}), path)
    with pytest.raises(InputError, match="no label column 'y'"):
        open_source(path, rows=True)
    path = str(tmp_path / "nulls.parquet")
    pq.write_table(pa.table({"a": [1.0, None], "y": [1.0, -1.0]}), path)
    with pytest.raises(InputError, match="holds 1 missing value"):
        list(open_source(path, rows=True).iter_rows())
    path = str(tmp_path / "nan.parquet")
    pq.write_table(pa.table({"a": [1.0, float("nan")], "y": [1.0, -1.0]}), path)
    with pytest.raises(InputError, match="NaN or infinite"):
        list(open_source(path, rows=True).iter_rows())
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(InputError, match="cannot read .* as Parquet"):
        open_source(str(tmp_path / "junk.parquet"), rows=True)


def test_stdin_read_whole_by_the_other_runners(svm_file, tmp_path):
    """A runner that needs the labels first (running averages) reads standard input once, keeps it,
    and then streams its rows: the same model as from the file."""
    path, _, _ = svm_file
    args = ["--algorithm", "ofsa", "--budget", "4", "--loss", "squared"]
    proc, from_file = run_cli([*args, "--data", path], tmp_path, name="file")
    assert proc.returncode == 0, proc.stderr.decode()
    proc, piped = run_cli([*args, "--data", "-", "--n-features", "80"], tmp_path, stdin=open(path, "rb").read(),
                          name="stdin")
    assert proc.returncode == 0, proc.stderr.decode()
    assert piped["selected"] == from_file["selected"] and piped["coef"] == from_file["coef"]
    assert piped["problem"]["n_samples"] == 600
