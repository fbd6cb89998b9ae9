"""Every command that README.md and the pages of docs/ show in their ``bash`` blocks is run here as
written: all pages' commands as one list (README.md first, then ``DOC_ORDER``, then any other
``docs/*.md`` page by name), two one-process commands at a time (an ``mpiexec`` command alone), each
after the earlier ones whose files it reads (a converted file, a saved model, a stopped run;
``_depends``, across pages too). Only four things are substituted, and only where a token begins with
them: ``python`` -> this interpreter, ``mpiexec`` -> the one next to it (the mpich wheel's), ``runs/`` ->
a temporary directory, and ``../shared/datasets`` -> the data sets (``find_datasets``). A command is
expected to exit 0 unless its comment says ``exit N``.

Not run: the test command itself (``<!-- test-command -->``: it is what runs this file), the ``pip
install`` set-up before the main job's ``mpiexec -n 13 python -m asyos.run`` (which is run), and a
command that is set-up alone (``pip install ...``).

The commands run once per session, whatever the number of pytest-xdist workers: the first test that
needs their outcomes claims the run (a file created exclusively in the session's shared temporary
directory), runs them and writes each outcome to a file there; a test in another worker waits for its
command's file. ``test_every_readme_command_runs_as_written`` needs them all (the suite's ordering in
conftest.py counts it as the costly test); ``test_command_runs_as_written[page:line]`` reports one
command.
"""
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest

from tests.conftest import REPO, find_datasets, find_mpiexec


DOCS = os.path.join(REPO, "docs")
DOC_ORDER = ("command-line.md", "python.md", "data.md", "mpi.md", "running.md", "results.md",
             "benchmarks.md", "architecture.md")
TIMEOUT_S = 300          # one command
WAIT_S = 900             # all of them (the tests that wait for them carry this timeout)


def pages():
    """The pages whose commands are run, in their order: README.md, then docs/ (``DOC_ORDER`` first)."""
    found = sorted(name for name in os.listdir(DOCS) if name.endswith(".md")) if os.path.isdir(DOCS) else []
    ordered = [name for name in DOC_ORDER if name in found] + [name for name in found if name not in DOC_ORDER]
    return ["README.md"] + [f"docs/{name}" for name in ordered]


SETUP = re.compile(r"^python3 -m venv .* && pip install [^&]*&& ")
SETUP_ALONE = re.compile(r"^(python3 -m venv \S+ && \. \S+ && )?pip install [^&]*$")


def page_commands(page):
    """``(line, command)`` for every command of the page's ``bash`` blocks (continuations joined)."""
    commands, in_block, skip_block, joining = [], False, False, False
    with open(os.path.join(REPO, page), encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    for number, line in enumerate(lines, 1):
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
    commands = [(number, SETUP.sub("", text)) for number, text in commands if not text.startswith("#")]
    return [(number, text) for number, text in commands if not SETUP_ALONE.match(text)]


@dataclass(frozen=True)
class Command:
    index: int          # its place in the one list of all pages' commands
    page: str
    line: int
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


COMMANDS = [Command(i, page, line, text) for i, (page, line, text) in
            enumerate((page, line, text) for page in pages() for line, text in page_commands(page))]


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
    texts = [c.text for c in COMMANDS]
    assert len(texts) >= 25, texts
    assert {c.page for c in COMMANDS} >= {"README.md", "docs/command-line.md", "docs/data.md", "docs/running.md"}
    assert any(c.page == "README.md" and c.text.startswith("mpiexec -n 13 python -m asyos.run") and "--" not in c.text
               for c in COMMANDS)
    assert not any("pip install" in t or "pytest" in t for t in texts), texts
    outputs = [_output_dir(shlex.split(t, comments=True)) for t in texts]
    named = [o for o in outputs if o]
    assert len(named) == len(set(named)), f"examples share an output directory: {named}"
    for command, out in zip(COMMANDS, outputs):
        text = command.text
        words = shlex.split(text, comments=True)
        fits = ("asyos.run" in text and not {"--list-algorithms", "--help-algorithm", "--resume"} & set(words)
                and "predict" not in words)
        if fits and "mpiexec -n 13 python -m asyos.run" != text:
            assert out and out.startswith("runs/"), f"{command.id}: example without its own --output runs/...: {text}"
        for word in words:
            assert not word.startswith(("big", "out/", "train.svm")), f"{command.id}: placeholder in an example: {text}"


def test_docs_pages_link_to_and_from_readme():
    """README.md links every page of docs/, and every page says what it is for and links back."""
    readme = open(os.path.join(REPO, "README.md"), encoding="utf-8").read()
    assert len(readme.splitlines()) <= 200
    for page in pages()[1:]:
        assert f"]({page})" in readme or f"]({page}#" in readme, f"README.md does not link {page}"
        lines = open(os.path.join(REPO, page), encoding="utf-8").read().splitlines()
        assert lines[0].startswith("# ") and lines[2].strip(), f"{page}: a title, then its purpose in one line"
        assert "](../README.md)" in lines[2], f"{page}: its purpose line does not link back to README.md"


def _depends(later, earlier) -> bool:
    """Whether command ``later`` reads what ``earlier`` wrote: a ``runs/`` path of one is a path of
    the other or under it (a converted file, a saved model, a stopped run, a run to draw). The pages
    share one ``runs/``, so this holds across pages; ``earlier`` is earlier in ``COMMANDS``."""
    mine = [w for w in shlex.split(later, comments=True) if w.startswith("runs/")]
    theirs = [w for w in shlex.split(earlier, comments=True) if w.startswith("runs/")]
    return any(a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")
               for a in mine for b in theirs)


PARALLEL = 2        # one-process commands at a time (this machine's cores); mpiexec commands run alone


def _too_slow_as_plain_python(command) -> bool:
    """With ``ASYOS_KERNELS=numpy`` (the suite run against the interpreted kernels) a ``--tune``
    search of a sample-stream learner runs its row loops as plain Python, some hundred times slower:
    ``--algorithm ofs --data pcmac --tune`` was killed at ``TIMEOUT_S`` (measured); its numbers are
    checked against the compiled loops in tests/test_sample_stream.py instead."""
    return os.environ.get("ASYOS_KERNELS") == "numpy" and "--tune" in shlex.split(command, comments=True)


def _not_run_because(command, datasets, skipped):
    """Why ``command`` is not started (``None``: it is): its data sets are missing, it is too slow
    as plain Python, or an earlier command whose files it reads was not run."""
    if datasets is None and "../shared/datasets" in command.text:
        return "needs the shared data sets, not on this machine (../shared/datasets or ASYOS_DATASETS)"
    if _too_slow_as_plain_python(command.text):
        return "not run with ASYOS_KERNELS=numpy (tuning as plain Python)"
    needed = [e.id for e in COMMANDS[:command.index] if e.index in skipped and _depends(command.text, e.text)]
    return f"reads the files of {', '.join(needed)}, not run" if needed else None


def _run_all(commands, runs, datasets, logs, report):
    """Run ``commands`` once, ``PARALLEL`` one-process commands at a time, a command only after the
    earlier ones it depends on (``_depends``), an ``mpiexec`` command alone; ``report(command,
    outcome)`` as each ends or is not started (its data sets missing, ...)."""
    os.makedirs(runs, exist_ok=True)
    os.makedirs(logs, exist_ok=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", ASYOS_PICTURE="1",
               PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    todo, skipped = [], set()
    for command in commands:
        reason = _not_run_because(command, datasets, skipped)
        if reason:
            skipped.add(command.index)
            report(command, {"skipped": reason})
        else:
            todo.append(command)
    pending = {c.index for c in todo}
    running = {}
    try:
        _start_and_collect(todo, pending, running, runs, datasets, logs, env, report)
    finally:
        for r in running.values():          # only if something above raised
            try:
                os.killpg(r["proc"].pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            r["proc"].wait()


def _start_and_collect(todo, pending, running, runs, datasets, logs, env, report):
    while todo or running:
        for c in list(todo):
            blocked = any(_depends(c.text, e.text) for e in COMMANDS[:c.index] if e.index in pending)
            exclusive = c.text.startswith("mpiexec") or any(r["command"].text.startswith("mpiexec")
                                                            for r in running.values())
            if blocked or len(running) >= PARALLEL or (exclusive and running):
                continue
            out, err = (open(os.path.join(logs, f"{c.index}.{k}"), "w+") for k in ("out", "err"))
            proc = subprocess.Popen(_argv(c.text, runs, datasets), cwd=REPO, env=env, stdout=out, stderr=err,
                                    text=True, start_new_session=True)
            running[c.index] = {"command": c, "proc": proc, "out": out, "err": err,
                                "deadline": time.monotonic() + TIMEOUT_S}
            todo.remove(c)
        for index, r in list(running.items()):
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
                del running[index]
                pending.discard(index)
                try:
                    problems = _problems(r["command"], (status, *texts), runs, datasets)
                except Exception as exc:        # e.g. no results.json: say so, and run the others
                    problems = [f"{r['command'].id}: {r['command'].text}\nits outcome could not be read: {exc!r}"
                                f"\n{texts[0]}\n{texts[1]}"]
                report(r["command"], {"status": status, "problems": problems})
        time.sleep(0.05)


# what the main job prints (README: "It prints the selected features, recall ..., staleness")
EXPECTED_OUTPUT = {"mpiexec -n 13 python -m asyos.run": ["12 workers", "n=1316, p=2000, s=100", "recall ",
                                                          "staleness (versions of u_C"]}


def _problems(command, outcome, runs, datasets):
    """What is wrong with one command's outcome (``[]``: nothing)."""
    status, out, err = outcome
    where, text = command.id, command.text
    expected = _expected_status(text)
    if status != expected:
        return [f"{where}: {text}\nexit {status}, expected {expected}\n{out}\n{err}"]
    problems = [f"{where}: {text}: {wanted!r} not in\n{out}"
                for wanted in EXPECTED_OUTPUT.get(text, ()) if wanted not in out]
    if "no picture drawn" in out + err:          # the run succeeds without it, but the pages show the picture
        problems.append(f"{where}: {text}: its picture failed\n{out}\n{err}")
    words = _argv(text, runs, datasets or "")
    output = _output_dir(words)
    if output and expected == 0 and "asyos.run" in text:
        record = json.load(open(os.path.join(output, "results.json")))
        if record.get("status", "finished") == "interrupted":
            problems.append(f"{where}: {text}: the run says it was interrupted")
    if output and "predict" in words and not os.path.getsize(os.path.join(output, "predictions.csv")) > 0:
        problems.append(f"{where}: {text}: no predictions.csv")
    return problems


class Outcomes:
    """The commands' outcomes, shared by the pytest-xdist workers of one session through files in
    ``root``: the first ``get`` claims the run (``claim``, created exclusively) and runs the commands
    the session selected, with the earlier ones they read from; any other waits for the files."""

    def __init__(self, root, selected):
        self.root, self.selected = root, selected
        self.dir = os.path.join(root, "outcomes")
        self.finished = os.path.join(root, "finished")

    def _file(self, command):
        return os.path.join(self.dir, f"{command.index}.json")

    def _write(self, path, record):
        with open(path + ".tmp", "w") as fh:
            json.dump(record, fh)
        os.replace(path + ".tmp", path)

    def _claim(self) -> bool:
        os.makedirs(self.dir, exist_ok=True)
        try:
            os.close(os.open(os.path.join(self.root, "claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        return True

    def _run(self):
        needed = set(self.selected)
        for command in reversed(COMMANDS):          # and the earlier commands whose files they read
            if command.index in needed:
                needed.update(e.index for e in COMMANDS[:command.index] if _depends(command.text, e.text))
        error = None
        try:
            _run_all([c for c in COMMANDS if c.index in needed], os.path.join(self.root, "runs"), find_datasets(),
                     os.path.join(self.root, "logs"), lambda c, record: self._write(self._file(c), record))
        except BaseException as exc:
            error = f"the run of the commands failed: {exc!r}"
            raise
        finally:
            self._write(self.finished, {"error": error})

    def get(self, command) -> dict:
        if not os.path.exists(self._file(command)) and self._claim():
            self._run()
        deadline = time.monotonic() + WAIT_S
        while not os.path.exists(self._file(command)):
            if os.path.exists(self.finished):
                if os.path.exists(self._file(command)):
                    break
                error = json.load(open(self.finished))["error"]
                pytest.fail(error or f"{command.id} was not run (not selected in the process that ran them)")
            if time.monotonic() > deadline:
                pytest.fail(f"no outcome of {command.id} within {WAIT_S} s")
            time.sleep(0.1)
        return json.load(open(self._file(command)))


@pytest.fixture(scope="session")
def outcomes(request, tmp_path_factory):
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base     # shared by the session's workers
    ids = {item.nodeid for item in request.session.items}
    everything = any(n.endswith("::test_every_readme_command_runs_as_written") for n in ids)
    selected = [c.index for c in COMMANDS
                if everything or any(n.endswith(f"::test_command_runs_as_written[{c.id}]") for n in ids)]
    return Outcomes(os.path.join(str(root), "readme-commands"), selected)


@pytest.mark.timeout(WAIT_S)
def test_every_readme_command_runs_as_written(outcomes):
    """All of them: they run together (two at a time, in dependency order) when the first test needs
    them; each failing command is named here and explained by its own test below."""
    records = {c.id: outcomes.get(c) for c in COMMANDS}
    failed = [i for i, r in records.items() if r.get("problems")]
    assert not failed, (f"{len(failed)} of {len(records)} commands failed: {', '.join(failed)} "
                        f"(test_command_runs_as_written[page:line] says why)")
    not_run = {i: r["skipped"] for i, r in records.items() if "skipped" in r}
    if not_run:
        pytest.skip(f"{len(not_run)} commands not run: " + "; ".join(f"{i}: {why}" for i, why in not_run.items()))


@pytest.mark.timeout(WAIT_S)
@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_command_runs_as_written(command, outcomes):
    record = outcomes.get(command)
    if "skipped" in record:
        pytest.skip(f"{command.id}: {record['skipped']}")
    assert not record["problems"], "\n\n".join(record["problems"])
