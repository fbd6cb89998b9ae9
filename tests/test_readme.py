"""Every command README.md shows is run here as written: in README order, two one-process commands at a
time (an ``mpiexec`` command alone), each after the earlier ones whose files it reads (a converted
file, a saved model, a stopped run; ``_depends``). Only three things are substituted, and only where a
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
import time

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


def _depends(later, earlier) -> bool:
    """Whether README command ``later`` reads what ``earlier`` wrote: a ``runs/`` path of one is a
    path of the other or under it (a converted file, a saved model, a stopped run, a run to draw)."""
    mine = [w for w in shlex.split(later, comments=True) if w.startswith("runs/")]
    theirs = [w for w in shlex.split(earlier, comments=True) if w.startswith("runs/")]
    return any(a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")
               for a in mine for b in theirs)


PARALLEL = 2        # one-process commands at a time (this machine's cores); mpiexec commands run alone


def _run_all(runs, datasets):
    """Run every README command once, ``PARALLEL`` one-process commands at a time, a command only
    after those it depends on (``_depends``), an ``mpiexec`` command alone; ``{line: (status, out,
    err)}`` (a command whose data sets are missing is not started)."""
    os.makedirs(runs, exist_ok=True)
    logs = os.path.join(os.path.dirname(runs), "logs")
    os.makedirs(logs, exist_ok=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", ASYOS_PICTURE="1",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    todo = [(n, c) for n, c in COMMANDS if (datasets is not None or "../shared/datasets" not in c)
            and not _too_slow_as_plain_python(c)]
    done, running = {}, {}
    while todo or running:
        for n, c in list(todo):
            blocked = any(_depends(c, e) for m, e in COMMANDS if m < n and m not in done)
            exclusive = c.startswith("mpiexec") or any(r["command"].startswith("mpiexec") for r in running.values())
            if blocked or len(running) >= PARALLEL or (exclusive and running):
                continue
            out, err = (open(os.path.join(logs, f"{n}.{k}"), "w+") for k in ("out", "err"))
            proc = subprocess.Popen(_argv(c, runs, datasets), cwd=REPO, env=env, stdout=out, stderr=err, text=True,
                                    start_new_session=True)
            running[n] = {"command": c, "proc": proc, "out": out, "err": err, "deadline": time.monotonic() + TIMEOUT_S}
            todo.remove((n, c))
        for n, r in list(running.items()):
            status = r["proc"].poll()
            if status is None and time.monotonic() > r["deadline"]:
                os.killpg(r["proc"].pid, signal.SIGKILL)
                status = r["proc"].wait()
                r["err"].write(f"\n(killed: no end within {TIMEOUT_S} s)")
            if status is not None:
                texts = []
                for fh in (r["out"], r["err"]):
                    fh.flush()
                    fh.seek(0)
                    texts.append(fh.read())
                    fh.close()
                done[n] = (status, *texts)
                del running[n]
        time.sleep(0.05)
    return done


def _too_slow_as_plain_python(command) -> bool:
    """With ``ASYOS_KERNELS=numpy`` (the suite run against the interpreted kernels) a ``--tune``
    search of a sample-stream learner runs its row loops as plain Python, some hundred times slower:
    ``--algorithm ofs --data pcmac --tune`` was killed at ``TIMEOUT_S`` (measured); its numbers are
    checked against the compiled loops in tests/test_sample_stream.py instead."""
    return os.environ.get("ASYOS_KERNELS") == "numpy" and "--tune" in shlex.split(command, comments=True)


# what the main job prints (README: "It prints the selected features, recall ..., staleness")
EXPECTED_OUTPUT = {"mpiexec -n 13 python -m asyos.run": ["12 workers", "n=1316, p=2000, s=100", "recall ",
                                                          "staleness (versions of u_C"]}


def _problems(line, command, outcome, runs, datasets):
    """What is wrong with one command's outcome (``[]``: nothing)."""
    status, out, err = outcome
    expected = _expected_status(command)
    if status != expected:
        return [f"README line {line}: {command}\nexit {status}, expected {expected}\n{out}\n{err}"]
    problems = [f"README line {line}: {command}: {text!r} not in\n{out}"
                for text in EXPECTED_OUTPUT.get(command, ()) if text not in out]
    if "no picture drawn" in out + err:          # the run succeeds without it, but README shows the picture
        problems.append(f"README line {line}: {command}: its picture failed\n{out}\n{err}")
    words = _argv(command, runs, datasets or "")
    output = _output_dir(words)
    if output and expected == 0 and "asyos.run" in command:
        record = json.load(open(os.path.join(output, "results.json")))
        if record.get("status", "finished") == "interrupted":
            problems.append(f"README line {line}: {command}: the run says it was interrupted")
    if output and "predict" in words and not os.path.getsize(os.path.join(output, "predictions.csv")) > 0:
        problems.append(f"README line {line}: {command}: no predictions.csv")
    return problems


@pytest.mark.timeout(900)
def test_every_readme_command_runs_as_written(tmp_path):
    """One test for all of them: they run together (``_run_all``, two at a time, in dependency order),
    so that pytest-xdist hands them to one worker as a whole; every failing command is reported."""
    runs, datasets = str(tmp_path / "runs"), find_datasets()
    outcomes = _run_all(runs, datasets)
    problems = [p for line, command in COMMANDS if line in outcomes
                for p in _problems(line, command, outcomes[line], runs, datasets)]
    assert not problems, f"{len(problems)} of {len(outcomes)} README commands failed:\n\n" + "\n\n".join(problems)
    slow = [command for line, command in COMMANDS if line not in outcomes and _too_slow_as_plain_python(command)]
    not_run = [command for line, command in COMMANDS if line not in outcomes and command not in slow]
    if not_run or slow:
        pytest.skip(" ".join(
            ([f"{len(not_run)} README commands need the shared data sets, not on this machine "
              f"(../shared/datasets or ASYOS_DATASETS): {not_run}."] if not_run else []) +
            ([f"Not run with ASYOS_KERNELS=numpy (tuning as plain Python): {slow}."] if slow else [])))
