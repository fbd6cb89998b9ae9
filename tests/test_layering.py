"""Layering of the ``asyos`` package, checked on its import graph.

The graph is read from the source (the AST), not from ``sys.modules``: every ``import`` and
``from ... import`` counts, relative ones resolved, including those inside functions, because a
deferred import still ties the two modules together (it only hides the circle until run time).
``from pkg import name`` is an import of ``pkg.name`` when that is a module, else of ``pkg``.

The rules: no import circles; no import runs back up a layer (``LAYERS``, top to bottom: the command
lines, the benchmarks they start, the run pipeline, MPI, a run's records, the registry of families, the
learners, the data, and the core of losses, errors and console utilities); the protocol core imports no
family of learners; only the CLI entry points import the CLI module ``asyos.cli.run`` (the library is
usable without it); the package's top level holds at most ``MAX_TOP_LEVEL`` modules.
"""
from __future__ import annotations

import ast
import os
import textwrap

PACKAGE = "asyos"
ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), PACKAGE)
CLI = "asyos.cli.run"
# the ``python -m`` names: ``asyos.run``, ``asyos.convert`` and ``asyos.report`` hand on to ``asyos.cli``
CLI_ENTRY_POINTS = {"asyos.run", "asyos.__main__", "asyos.cli.convert", "asyos.cli.predict", "asyos.cli.report"}
MAX_TOP_LEVEL = 10
# Top to bottom; a module imports its own layer and those below it, never one above. A name is a package
# (its modules included) or a module.
LAYERS = (
    ("face and command lines", ("asyos", "asyos.__main__", "asyos.run", "asyos.convert", "asyos.report",
                                "asyos.cli")),
    ("benchmarks", ("asyos.benchmarking",)),
    ("run pipeline", ("asyos.runs",)),
    ("MPI", ("asyos.distributed",)),
    ("records", ("asyos.records",)),
    ("registry", ("asyos.registry",)),
    ("learners", ("asyos.learners",)),
    ("data", ("asyos.data",)),
    ("core", ("asyos.errors", "asyos.losses", "asyos.truncation", "asyos.metrics", "asyos._env", "asyos.utils")),
)
FAMILIES = ("asyos.learners.substitution", "asyos.learners.stream", "asyos.learners.averages",
            "asyos.learners.path", "asyos.learners.baselines")


def module_files(root: str = ROOT, package: str = PACKAGE) -> dict[str, str]:
    """Dotted module name -> file, for every ``.py`` file of the package (``__init__.py`` is the package)."""
    out = {}
    for folder, _, files in os.walk(root):
        rel = os.path.relpath(folder, os.path.dirname(root))
        prefix = rel.replace(os.sep, ".")
        for name in files:
            if not name.endswith(".py"):
                continue
            stem = name[:-3]
            out[prefix if stem == "__init__" else f"{prefix}.{stem}"] = os.path.join(folder, name)
    return out


def _known(name: str, modules) -> str | None:
    """The nearest module at or above ``name`` (``a.b.attr`` -> ``a.b``), or None outside the package."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: str, modules) -> set[str]:
    """The package modules that ``module`` imports anywhere in its file."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), filename=path)
    is_package = os.path.basename(path) == "__init__.py"
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(_known(alias.name, modules))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = module.split(".") if is_package else module.split(".")[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else _known(base, modules))
    found.discard(None)
    found.discard(module)
    return found


def import_graph(root: str = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    modules = module_files(root, package)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative: no recursion limit on deep chains)."""
    index, low, on_stack, stack, out = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One concrete circle through the component's first module (a -> b -> ... -> a), for the message."""
    members = set(component)
    start = component[0]
    parent = {start: None}
    queue = [start]
    for node in queue:                              # breadth first: the shortest way back to start
        for child in sorted(graph[node] & members):
            if child == start:
                path = [node]
                while parent[path[-1]] is not None:
                    path.append(parent[path[-1]])
                return [start, *reversed(path[:-1]), start]
            if child not in parent:
                parent[child] = node
                queue.append(child)
    return component                                # unreachable for a true component


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    return [c for c in strongly_connected(graph) if len(c) > 1]


def _describe(graph, components) -> str:
    return "\n".join(textwrap.fill(", ".join(c), 110, initial_indent="  ", subsequent_indent="  ")
                     + f"\n    e.g. {' -> '.join(a_cycle(graph, c))}" for c in components)


GRAPH = import_graph()


def test_graph_sees_relative_function_level_and_from_imports():
    """The builder must see the kinds of import the rules are about, or the rules prove nothing."""
    assert "asyos.errors" in GRAPH["asyos.cli.run"]              # from ..errors import ... (top level)
    assert "asyos.registry" in GRAPH["asyos.cli.run"]            # from ..registry import ... (in a function)
    assert "asyos._env" in GRAPH["asyos"]                        # from . import _env (a module by name)
    assert "asyos.learners.stream.sample_stream" in GRAPH["asyos.learners.stream.ofs"]


def test_cycle_detection_on_a_made_up_graph():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert a_cycle(graph, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_cycles():
    found = cycles(GRAPH)
    assert not found, "import circles (strongly connected components):\n" + _describe(GRAPH, found)


def test_library_does_not_import_the_cli():
    offenders = sorted(m for m, deps in GRAPH.items() if CLI in deps and m not in CLI_ENTRY_POINTS)
    assert not offenders, f"library modules import the CLI module {CLI}: {', '.join(offenders)}"


def layer_of(module: str) -> int:
    """The index in ``LAYERS`` of the layer a module belongs to (the longest name that holds it)."""
    best, found = -1, None
    for index, (_, names) in enumerate(LAYERS):
        for name in names:
            if (module == name or (name != PACKAGE and module.startswith(name + "."))) and len(name) > best:
                best, found = len(name), index
    assert found is not None, f"{module} is in no layer of LAYERS: place it"
    return found


def upward_imports(graph) -> list[str]:
    return sorted(f"{m} ({LAYERS[layer_of(m)][0]}) -> {d} ({LAYERS[layer_of(d)][0]})"
                  for m, deps in graph.items() for d in deps if layer_of(d) < layer_of(m))


def test_every_module_has_a_layer():
    for module in GRAPH:
        layer_of(module)


def test_no_import_runs_back_up_a_layer():
    offenders = upward_imports(GRAPH)
    assert not offenders, "imports that run back up a layer:\n  " + "\n  ".join(offenders)


def test_the_layer_rule_sees_an_import_that_runs_back_up():
    graph = {"asyos.learners.base": {"asyos.registry"}, "asyos.runs.config": {"asyos.learners.base"},
             "asyos.registry": set()}
    assert upward_imports(graph) == ["asyos.learners.base (learners) -> asyos.registry (registry)"]


def test_the_protocol_core_imports_no_family():
    """``asyos.learners.protocol`` is driven by the families (Asy-OS's workers, the sample-stream
    simulator); it names none of them."""
    offenders = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() if m.startswith("asyos.learners.protocol")
                       for d in deps if d.startswith(FAMILIES))
    assert not offenders, "the protocol core imports a family:\n  " + "\n  ".join(offenders)


def test_the_top_level_is_the_library_face():
    modules = sorted(name for name in os.listdir(ROOT) if name.endswith(".py"))
    assert len(modules) <= MAX_TOP_LEVEL, f"{len(modules)} modules at asyos/'s top level: {', '.join(modules)}"


def _external_imports(path: str) -> set[str]:
    """Top-level names of the packages outside ``asyos`` that a file imports."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), filename=path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names.add(node.module.split(".")[0])
    return names - {PACKAGE}


def test_the_protocol_core_does_no_io():
    """``asyos.learners.protocol`` is plain objects and in-process schedulers: no MPI, nothing of
    ``asyos.distributed`` (which drives it across processes)."""
    modules = module_files()
    offenders = sorted(f"{m} -> {d}" for m in modules if m.startswith("asyos.learners.protocol")
                       for d in GRAPH[m] if d.startswith("asyos.distributed"))
    offenders += sorted(f"{m} -> mpi4py" for m, path in modules.items() if m.startswith("asyos.learners.protocol")
                        and "mpi4py" in _external_imports(path))
    assert not offenders, "the protocol core reaches out:\n  " + "\n  ".join(offenders)


def test_learners_do_not_import_distributed():
    offenders = sorted(f"{m} -> {d}" for m, deps in GRAPH.items() if m.startswith("asyos.learners")
                       for d in deps if d == "asyos.distributed" or d.startswith("asyos.distributed."))
    assert not offenders, "learners import asyos.distributed:\n  " + "\n  ".join(offenders)


# -- who drives the Asy-OS protocol ------------------------------------------------------------
# A scheduler is the only place that loops over a worker's steps: it calls ``Worker.propose`` (or its
# compiled batches, ``visit_batch``/``visit_view``), or a link's ``step`` (``asyos.learners.protocol.links``),
# inside a loop. One loop per scheduler (the shared window's has a batched twin).
SCHEDULER_LOOPS = {
    "asyos.learners.protocol.loopback": {"run_loopback"},                    # sequential OS, the finish
    "asyos.learners.protocol.simulator": {"Simulation.run"},                 # bounded staleness (KDD'16 Sec. 5.3)
    "asyos.learners.protocol.replay": {"_Simulation.run"},                   # every transport in simulated time
    "asyos.distributed.mpi_messages": {"MessagesTransport._each_step", "MessagesTransport._pipelined"},
    "asyos.distributed.mpi_shared": {"shared_steps", "shared_batches"},     # shared memory, node-aggregated
}


def _protocol_loops(path: str) -> set[str]:
    """``Class.function`` (or ``function``) names whose loops step a worker: a call of ``propose``,
    or of ``step`` on a link, inside a ``for``/``while`` body; the event loop of ``replay`` runs
    its handlers, which step the links (counted as its ``run``)."""
    with open(path, encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), filename=path)
    found = set()

    def steps(node) -> bool:
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute):
                receiver = ast.unparse(call.func.value)
                if call.func.attr in ("propose", "visit_batch", "visit_view") or \
                        (call.func.attr == "step" and "link" in receiver):
                    return True
                if call.func.attr == "handle" or receiver == "handle":
                    return True
            if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "handle":
                return True
        return False

    def visit(node, owner):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                visit(child, child.name)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{owner}.{child.name}" if owner else child.name
                if any(isinstance(n, (ast.For, ast.While)) and steps(n) for n in ast.walk(child)
                       if n is not child):
                    found.add(name)
    visit(tree, None)
    return found


def test_only_the_schedulers_loop_over_worker_steps():
    modules = module_files()
    loops = {m: _protocol_loops(path) for m, path in modules.items()}
    loops = {m: names for m, names in loops.items() if names}
    assert loops == SCHEDULER_LOOPS


def test_the_loop_finder_sees_a_loop_over_propose(tmp_path):
    path = tmp_path / "m.py"
    path.write_text(textwrap.dedent("""
        def drive(worker, u):
            while worker.propose(u) is not None:
                pass
        class S:
            def run(self, link):
                for _ in range(3):
                    link.step()
            def once(self, worker, u):
                return worker.propose(u)
    """))
    assert _protocol_loops(str(path)) == {"drive", "S.run"}


def test_a_worker_rank_sets_up_without_importing_scikit_learn():
    """An MPI rank of Asy-OS parses the command line, reads its shard and builds its worker without
    scikit-learn (``asyos.learners.checks``, ``asyos.learners.substitution.workers``): importing it
    was 2 of the 3.3 s of CPU every rank spent starting up, 13 times over under ``mpiexec -n 13``.
    In a fresh interpreter, since this one has it loaded."""
    import subprocess
    import sys
    script = textwrap.dedent("""
        import sys
        from asyos.cli.run import parse_config
        from asyos.runs.mpi_run import _worker_setup
        config = parse_config(["--n-features", "60", "--n-informative", "4"])
        setup = _worker_setup(config, rank=1, n_workers=2)
        assert setup["shard"].n_local == 32, setup["shard"].n_local     # blocks 0 and 2 of 16 columns
        heavy = sorted(m for m in ("sklearn", "pandas", "scipy.stats", "pyarrow") if m in sys.modules)
        print(",".join(heavy))
    """)
    root = os.path.dirname(ROOT)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=root,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "", f"a worker rank imported {done.stdout.strip()}"
