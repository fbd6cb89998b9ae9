"""Every command README.md shows is run here as written, in README order (later examples read what
earlier ones wrote, e.g. a converted file). Only three things are substituted, and only where a
token begins with them: ``python`` -> this interpreter, ``mpiexec`` -> the one next to it (the
mpich wheel's), ``runs/`` -> a temporary directory, and ``../shared/datasets`` -> the data sets
(``find_datasets``). A command is expected to exit 0 unless its comment says ``exit N``.

Not run: the test command itself (``<!-- test-command -->``: it is what runs this file) and the
``pip install`` set-up before the main job's ``mpiexec -n 13 python -m asyos.run``, which is run.
"""
import json
import os
import re
import shlex
import signal
import subprocess
import sys

import pytest

from tests.conftest import REPO, find_datasets, find_mpiexec

README = os.path.join(REPO, "README.md")
TIMEOUT_S = 300


def readme_commands():
    """``(line, command)`` for every command of README's ``bash`` blocks (continuations joined)."""
    commands, in_block, skip_block, joining = [], False, False, False
    for number, line in enumerate(open(README).read().splitlines(), 1):
        if line.strip() == "<!-- test-command -->":
            skip_block = True
        elif line.startswith("```bash"):
            in_block, skip_block = not skip_block, False
        elif line.strip() == "```":
            in_block = False
        elif in_block and line.strip():
            if joining:
                commands[-1] = (commands[-1][0], commands[-1][1][:-1] + " " + line.strip())
            else:
                commands.append((number, line.strip()))
            joining = commands[-1][1].endswith("\\")
    setup = re.compile(r"^python3 -m venv .* && pip install [^&]*&& ")
    return [(number, setup.sub("", text)) for number, text in commands if not text.startswith("#")]


COMMANDS = readme_commands()


def _argv(command, runs, datasets):
    words = shlex.split(command, comments=True)
    mpiexec = find_mpiexec()
    out = []
    for word in words:
        if word == "python":
            word = sys.executable
        elif word == "mpiexec":
            word = mpiexec
        elif word.startswith("runs/"):
            word = os.path.join(runs, word[len("runs/"):])
        elif word.startswith("../shared/datasets"):
            word = datasets + word[len("../shared/datasets"):]
        out.append(word)
    return out


def _expected_status(command) -> int:
    found = re.search(r"#.*\bexit (\d+)", command)
    return int(found.group(1)) if found else 0


def _output_dir(words):
    return words[words.index("--output") + 1] if "--output" in words else None


def test_readme_examples_are_found_and_each_writes_its_own_directory():
    texts = [c for _, c in COMMANDS]
    assert len(texts) >= 25, texts
    assert any(t.startswith("mpiexec -n 13 python -m asyos.run") and "--" not in t for t in texts)
    outputs = [_output_dir(shlex.split(t, comments=True)) for t in texts]
    named = [o for o in outputs if o]
    assert len(named) == len(set(named)), f"README examples share an output directory: {named}"
    for text, out in zip(texts, outputs):
        words = shlex.split(text, comments=True)
        fits = "asyos.run" in text and not {"--list-algorithms", "--resume"} & set(words) and "predict" not in words
        if fits and "mpiexec -n 13 python -m asyos.run" != text:
            assert out and out.startswith("runs/"), f"README example without its own --output runs/...: {text}"
        for word in words:
            assert not word.startswith(("big", "out/", "train.svm")), f"placeholder in a README example: {text}"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return str(tmp_path_factory.mktemp("readme") / "runs")


@pytest.mark.parametrize("line,command", COMMANDS, ids=[f"line{n}" for n, _ in COMMANDS])
def test_readme_command(line, command, runs):
    datasets = find_datasets()
    if datasets is None and "../shared/datasets" in command:
        pytest.skip("the shared data sets are not on this machine (../shared/datasets or ASYOS_DATASETS)")
    words = _argv(command, runs, datasets)
    os.makedirs(runs, exist_ok=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", ASYOS_PICTURE="1",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(words, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        pytest.fail(f"README line {line} did not finish in {TIMEOUT_S} s: {command}\n{out}\n{err}")
    expected = _expected_status(command)
    assert proc.returncode == expected, f"README line {line}: {command}\nexit {proc.returncode}\n{out}\n{err}"
    output = _output_dir(words)
    if output and expected == 0 and "asyos.run" in command:
        record = json.load(open(os.path.join(output, "results.json")))
        assert record.get("status", "finished") != "interrupted"
    if output and "predict" in words:
        assert os.path.getsize(os.path.join(output, "predictions.csv")) > 0
