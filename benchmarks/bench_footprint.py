"""What an install and a rank cost before any data: installed size by extra, import time and memory by module,
and each rank's peak memory in a default run.

* **Installed size**: the files each distribution recorded when pip installed it (``importlib.metadata``),
  summed over the dependency closure of asyos's core and of each extra (``mpi``, ``plot``, ``parquet``),
  in this environment. pyarrow (the ``parquet`` extra) was a core dependency before: "core + parquet" is
  what every install carried then.
* **Import time and memory**: each module imported alone in a fresh interpreter (``-c "import M"``,
  ``OPENBLAS_NUM_THREADS=1``), best of ``repeats`` for the time (the machine's noise only adds), and the
  process's peak resident memory after it (``VmHWM``). ``python`` alone is the interpreter's floor.
  ``RANK`` is what an MPI rank imports before it reads its shard (``tests/test_layering.py`` checks that a
  worker rank's set-up imports neither scikit-learn nor pyarrow).
* **Ranks**: ``mpiexec -n 3 python -m asyos.run`` and one process on the default problem; each rank's
  ``peak_rss_bytes`` from ``results.json`` (the central rank's and the workers').

    python benchmarks/bench_footprint.py [--quick]

Time only on a quiet machine: import times double when another process shares the cores.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata

from asyos.benchmarking.common import Run, choose_profile, parser, print_table, run_asyos

PROFILES = {"paper": {"repeats": 5, "ranks": 3}, "quick": {"repeats": 2, "ranks": 3}}
RANK = "asyos.cli.run, asyos.runs.mpi_run, mpi4py.MPI"       # what an MPI rank imports before its data
MODULES = ("numpy", "scipy", "numba", "mpi4py.MPI", "sklearn", "pyarrow", "matplotlib.pyplot", "asyos",
           "asyos.cli.run", RANK)
EXTRAS = ("mpi", "plot", "parquet")
MB = 1024 * 1024
# the peak from /proc/self/status (VmHWM: this image's high-water mark); ru_maxrss would carry over the
# parent's resident size from before the exec (Linux keeps it across execve)
PROBE = ("import time; t = time.perf_counter(); {imp}; dt = time.perf_counter() - t; "
         "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')][0].split()[1]; "
         "print(dt, int(hwm) * 1024)")


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def requirements(dist: str, extra=None) -> list:
    """The names ``dist`` requires (with ``extra``: those its extra adds), markers of this machine only."""
    from packaging.requirements import Requirement
    out = []
    for text in metadata.requires(dist) or ():
        req = Requirement(text)
        env = {"extra": extra or ""}
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        if req.marker is None and extra is not None:
            continue
        if extra is not None and "extra" not in str(req.marker):
            continue
        out.append(_name(req.name))
    return out


def closure(names) -> set:
    """Every installed distribution ``names`` need, themselves included."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        todo.extend(requirements(name))
    return seen


def installed_bytes(name: str) -> int:
    dist = metadata.distribution(name)
    total = 0
    for path in dist.files or ():
        try:
            total += os.path.getsize(dist.locate_file(path))
        except OSError:
            pass
    return total


def probe(module, repeats):
    """(best seconds, peak bytes) of importing ``module`` in a fresh interpreter (``None``: python alone)."""
    imp = "pass" if module is None else f"import {module}"
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    best, peak = None, None
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", PROBE.format(imp=imp)], capture_output=True, text=True,
                             env=env, timeout=300)
        if out.returncode != 0:
            return None, None
        seconds, rss = out.stdout.split()
        best = float(seconds) if best is None else min(best, float(seconds))
        peak = int(rss) if peak is None else min(peak, int(rss))
    return best, peak


def main(argv=None):
    args = parser(__doc__.splitlines()[0]).parse_args(argv)
    profile = choose_profile(args, PROFILES)
    run = Run("footprint", args, profile)

    core = closure(["asyos"]) - {"asyos"}
    sets = {"core": core}
    for extra in EXTRAS:
        sets[extra] = closure(requirements("asyos", extra)) - core
    sizes = {name: installed_bytes(name) for group in sets.values() for name in group}
    rows = []
    run_it = sets["core"] | sets["mpi"] | sets["plot"]
    for label, names in (("core", sets["core"]), ("core + mpi + plot (Run it)", run_it),
                         ("core + mpi + plot + parquet", run_it | sets["parquet"])):
        total = sum(sizes[n] for n in names)
        rows.append([label, f"{total / MB:.0f}", ", ".join(f"{n} {sizes[n] / MB:.0f}" for n in
                                                          sorted(names, key=lambda n: -sizes[n])[:4])])
        run.unit({"kind": "install", "set": label, "bytes": total, "distributions": sorted(names)})
    for extra in EXTRAS:
        run.unit({"kind": "extra", "extra": extra, "bytes": sum(sizes[n] for n in sets[extra]),
                  "distributions": sorted(sets[extra])})
    print_table("installed size (MB, this environment's files)", ["install", "MB", "largest"], rows)

    rows = []
    base_s, base_rss = probe(None, profile["repeats"])
    rows.append(["python (nothing imported)", f"{base_s * 1000:.0f}", f"{base_rss / MB:.0f}"])
    run.unit({"kind": "import", "module": None, "seconds": base_s, "peak_rss_bytes": base_rss})
    for module in MODULES:
        seconds, rss = probe(module, profile["repeats"])
        run.unit({"kind": "import", "module": module, "seconds": seconds, "peak_rss_bytes": rss})
        rows.append([module, "-" if seconds is None else f"{seconds * 1000:.0f}",
                     "-" if rss is None else f"{rss / MB:.0f}"])
    print_table("import alone in a fresh interpreter", ["module", "ms (best)", "peak MB"], rows)

    rows = []
    record, seconds = run_asyos([])
    central = record["resources"]["peak_rss_bytes"]
    rows.append(["one process", "-", f"{central / MB:.0f}", "-"])
    run.unit({"kind": "ranks", "ranks": 1, "peak_rss_bytes": central, "seconds": seconds})
    record, seconds = run_asyos([], ranks=profile["ranks"])
    workers = [w["peak_rss_bytes"] for w in record.get("workers", ()) if w.get("peak_rss_bytes")]
    central = record["resources"]["peak_rss_bytes"]
    rows.append([f"mpiexec -n {profile['ranks']}", f"{central / MB:.0f}", "-",
                 f"{min(workers) / MB:.0f}-{max(workers) / MB:.0f}" if workers else "-"])
    run.unit({"kind": "ranks", "ranks": profile["ranks"], "central_peak_rss_bytes": central,
              "worker_peak_rss_bytes": workers, "seconds": seconds})
    print_table("peak memory of a default run (MB)", ["run", "central rank", "the process", "workers"], rows)
    print(f"results: {run.finish({})}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
