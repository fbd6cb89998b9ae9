"""Fault table: how an Asy-OS MPI job ends when one rank freezes, exits, raises or is killed mid-run.

Each row is one ``mpiexec -n R python tests/launch/inject_fault.py MODE RANK AFTER_S ...`` run: the
rank (central = 0, the first worker = 1, the last worker = R - 1) injects MODE ``AFTER_S`` seconds
after it started (see ``tests/launch/inject_fault.py``). Plus Ctrl-C rows: a plain ``mpiexec ...
python -m asyos.run`` gets SIGINT after ``AFTER_S`` seconds, once to the mpiexec process alone and
once to its process group (what a terminal does; hydra's proxy and the ranks call ``setsid``, so
the group is mpiexec alone, and ``group_size`` records how many of the run's processes it held).

What a row records, and why:

* ``end_s``: seconds from the injection (the marker's time stamp; for Ctrl-C, the signal) to the
  exit of mpiexec: how long a user waits for a dead job to end;
* ``exit``: mpiexec's exit status, or ``timeout`` when the job was still running ``--timeout``
  seconds after ``AFTER_S`` (then mpiexec's group and every process of the run get SIGKILL): a
  hang, or a detection slower than that; a 0 hides a failure;
* ``stderr_lines`` (the marker line not counted), ``tracebacks`` and the ``line`` a user reads
  first: the first ``asyos:`` line naming a rank, else the first line naming one, else the first;
* ``procs_left``: processes of the run still alive ``GRACE_S`` after mpiexec ended (found by an
  environment tag every process of the run inherits, since hydra's proxy and the ranks start new
  sessions); they are then killed by pid so the next row starts clean;
* ``load_1min``: the machine's load average at launch (other jobs on a shared machine slow a run);
* ``shm_left``: files in ``/dev/shm`` the run's processes mapped (listed every ``POLL_S`` seconds;
  a plain before/after listing would also count other jobs' files on a shared machine) that remain
  once its processes are gone and no live process maps them: MPICH's shared-memory segments, which
  ``MPI_Finalize`` unlinks. They are deleted afterwards unless ``--keep-shm``.

``AFTER_S`` is calibrated: one fault-free run per transport measures when the asynchronous phase
starts (mpiexec start-up plus the run's ``setup_s``) and how long it lasts (``async_s``); the fault
lands ``--offset`` seconds into it. A warning is printed when ``async_s`` < 3 x offset (the fault
would hit too near the end). ``--after`` sets ``AFTER_S`` directly instead.

Subprocesses run in a temporary directory, so ``asyos`` comes from the environment (e.g. a snapshot
on ``PYTHONPATH``), never from the current directory.

    python benchmarks/bench_faults.py [--quick] [--transports shared-memory,messages] [--env NAME=VALUE]
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import asyos
from asyos.benchmarking.common import Run, choose_profile, mpiexec_path, parser, usable_cores

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRAPPER = os.path.join(REPO, "tests", "launch", "inject_fault.py")
TAG = "ASYOS_FAULT_RUN_ID"
POLL_S = 0.25           # how often a run's processes and their /dev/shm mappings are listed
GRACE_S = 1.0            # after mpiexec ends, how long the run's processes get to vanish
SLOW_S = 10.0            # rows whose job took longer than this to end are flagged
MODES = ("freeze", "exit0", "exit1", "raise", "kill")
ROLES = ("central", "worker", "last")
PROFILES = {
    "paper": {"ranks": 5, "seeds": 1, "args": ["--n-features", "40000", "--quiet", "--watchdog-timeout", "5"],
              "cases": [(role, mode) for role in ROLES for mode in MODES], "transports": ["shared-memory", "messages"],
              "ctrl_c": True, "offset_s": 4.0, "timeout_s": 60.0},
    # quick: one fault row shows the table end to end (tests/launch/test_faults.py checks how each rank's fault ends)
    "quick": {"ranks": 5, "seeds": 1, "args": ["--n-features", "20000", "--quiet", "--watchdog-timeout", "5"],
              "cases": [("worker", "raise")], "transports": ["shared-memory"],
              "ctrl_c": False, "offset_s": 2.0, "timeout_s": 60.0},
    # smoke (tests/test_benchmarks.py): the quick row on 3 ranks and a smaller problem that still runs for
    # several seconds (40 passes over 3000 features), the fault 1 s into it
    "smoke": {"ranks": 3, "seeds": 1, "args": ["--n-features", "3000", "--passes", "40", "--quiet",
                                               "--watchdog-timeout", "5"],
              "cases": [("worker", "raise")], "transports": ["shared-memory"],
              "ctrl_c": False, "offset_s": 1.0, "timeout_s": 60.0},
}


# ---------------------------------------------------------------------------------------------- processes
def tagged_pids(tag: str) -> list:
    """Live processes of one run: those whose environment holds ``TAG=tag``."""
    needle = f"{TAG}={tag}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in fh.read().split(b"\0"):
                    pids.append(int(entry))
        except OSError:
            pass
    return pids


def process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return "?"


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is neither a zombie nor dead (state Z / X)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def kill_pids(pids, wait_s: float = 5.0):
    """SIGKILL these processes (ours: found by the run's tag) and wait until they are gone."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.time() + wait_s
    while time.time() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.05)


def describe(pids) -> list:
    """``"rank R: name state"`` of each process (state T = stopped, S = sleeping, R = running; a
    supervised rank appears twice, the supervisor hydra launched and the child it forked, whose parent
    has its rank), to see who a hung job waits for."""
    seen = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                env = dict(item.split(b"=", 1) for item in fh.read().split(b"\0") if b"=" in item)
            with open(f"/proc/{pid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        seen[pid] = (env.get(b"PMI_RANK", b"-").decode(), fields[0], int(fields[1]))
    out = []
    for pid, (rank, state, parent) in seen.items():
        role = "child" if rank != "-" and seen.get(parent, ("",))[0] == rank else "launched"
        out.append(f"rank {rank}: {process_name(pid)} {state} ({role})")
    return sorted(out)


def group_size(pgid: int, tag: str) -> int:
    """How many of the run's processes are in process group ``pgid`` (what a terminal's Ctrl-C reaches)."""
    count = 0
    for pid in tagged_pids(tag):
        try:
            count += os.getpgid(pid) == pgid
        except ProcessLookupError:
            pass
    return count


# ---------------------------------------------------------------------------------------------- /dev/shm
def shm_listing() -> set:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


def mapped_shm(pids=None) -> set:
    """Names of ``/dev/shm`` files mapped by ``pids`` (default: by any live process); files already
    unlinked (``(deleted)``) cannot be left behind and are not listed."""
    names = set()
    for entry in (map(str, pids) if pids is not None else os.listdir("/proc")):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/maps") as fh:
                for line in fh:
                    if "/dev/shm/" in line and not line.rstrip().endswith("(deleted)"):
                        names.add(line.split("/dev/shm/", 1)[1].split()[0])
        except OSError:
            pass
    return names


def shm_leftovers(ours: set) -> list:
    """Segments this run's processes mapped that still exist and no live process maps."""
    return sorted((shm_listing() & ours) - mapped_shm())


def remove_shm(names):
    for name in names:
        try:
            os.unlink(os.path.join("/dev/shm", name))
        except OSError:
            pass


# ---------------------------------------------------------------------------------------------- one run
def run_env(extra: dict, tag: str) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", **extra)
    env[TAG] = tag
    return env


def watch(proc, tag: str, until: float, segments: set):
    """Wait for mpiexec until ``until`` (epoch s), noting every ``/dev/shm`` file the run's processes
    map (polled, so that leftovers are told apart from other jobs' files). Returns the exit status or
    ``None`` if mpiexec is still running."""
    while True:
        segments |= mapped_shm(tagged_pids(tag))
        try:
            return proc.wait(timeout=min(max(until - time.time(), 0.0), POLL_S))
        except subprocess.TimeoutExpired:
            if time.time() >= until:
                return None


def kill_run(proc, tag: str):
    """SIGKILL mpiexec's process group, then every process of the run (hydra's proxy and the ranks
    are in sessions of their own, so the group alone would leave them running)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    kill_pids(tagged_pids(tag))
    proc.wait()


def launch_and_watch(cmd, env, cwd, timeout_s, ctrl_c=None, after_s=None):
    """Run ``cmd`` in a new session; with ``ctrl_c`` ("pid" or "group") send SIGINT after ``after_s``.
    On ``timeout_s`` from launch the run is killed and its exit is ``"timeout"``. Returns the raw facts
    of the run (stderr text, exit, times, leftovers)."""
    tag = env[TAG]
    segments = set()
    load = os.getloadavg()[0]
    err_path = os.path.join(cwd, f"stderr-{tag}.txt")
    with open(err_path, "w") as err, open(os.devnull, "w") as out:
        start = time.time()
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=err, start_new_session=True)
        sent, members, rc = None, None, None
        if ctrl_c:
            rc = watch(proc, tag, start + after_s, segments)
            if rc is None:
                members = group_size(proc.pid, tag)
                sent = time.time()
                if ctrl_c == "group":
                    os.killpg(proc.pid, signal.SIGINT)
                else:
                    os.kill(proc.pid, signal.SIGINT)
        if rc is None:
            rc = watch(proc, tag, start + timeout_s, segments)
        end = time.time()
        at_timeout = None
        if rc is None:
            at_timeout = describe(tagged_pids(tag))
            kill_run(proc, tag)
            rc = "timeout"
    time.sleep(GRACE_S)
    left = tagged_pids(tag)
    left_names = sorted(process_name(pid) for pid in left)
    kill_pids(left)
    with open(err_path, errors="replace") as fh:
        stderr = fh.read()
    os.unlink(err_path)
    return {"exit": rc, "at_timeout": at_timeout, "load_1min": load, "start": start, "end": end, "sent": sent,
            "group_size": members, "stderr": stderr, "procs_left": len(left), "procs_left_names": left_names,
            "shm_mapped": sorted(segments), "shm_left_files": shm_leftovers(segments)}


# ---------------------------------------------------------------------------------------------- reading stderr
MARKER = re.compile(r"^inject_fault: rank (\d+) (\S+) at ([\d.]+) s \(epoch ([\d.]+)\)(?: in (.*))?")


def relevant_line(lines) -> str:
    """The line a user reads first: ``asyos: ... rank ...`` / ``... rank N ...``, else the first line."""
    for pattern in (r"^asyos: .*\brank", r"\brank \d+"):
        for line in lines:
            if re.search(pattern, line):
                return line
    return lines[0] if lines else ""


def summarise(raw: dict) -> dict:
    """Turn one run's raw facts into a row: times, exit, stderr counts and the relevant line."""
    lines = [line for line in raw["stderr"].splitlines() if line.strip()]
    markers = [MARKER.match(line) for line in lines if MARKER.match(line)]
    others = [line for line in lines if not MARKER.match(line)]
    injected = float(markers[0].group(4)) if markers else raw["sent"]
    row = {"exit": raw["exit"], "injected_at_s": None if injected is None else injected - raw["start"],
           "landed_in": markers[0].group(5) if markers else None, "at_timeout": raw["at_timeout"],
           "end_s": None if injected is None else raw["end"] - injected, "wall_s": raw["end"] - raw["start"],
           "stderr_lines": len(others), "tracebacks": sum("Traceback (most recent call last)" in line
                                                          for line in others),
           "line": relevant_line(others), "procs_left": raw["procs_left"], "procs_left_names": raw["procs_left_names"],
           "shm_left": len(raw["shm_left_files"]), "shm_left_files": raw["shm_left_files"],
           "shm_mapped": len(raw["shm_mapped"]),
           "stderr_head": others[:60], "load_1min": raw["load_1min"]}
    if raw["group_size"] is not None:
        row["group_size"] = raw["group_size"]
    return row


# ---------------------------------------------------------------------------------------------- calibration
def calibrate(transport, profile, extra_env, workdir, launcher) -> dict:
    """One fault-free run: when the asynchronous phase starts (mpiexec start-up + ``setup_s``, measured
    from outside) and how long it lasts (``async_s``); its leftovers are the control (a clean end
    should leave no process and no /dev/shm file). A failed run gives ``error`` (its last lines)."""
    out_dir = tempfile.mkdtemp(prefix="calibrate-", dir=workdir)
    cmd = [launcher, "-n", str(profile["ranks"]), sys.executable, "-m", "asyos.run", *profile["args"],
           "--transport", transport, "--output", out_dir]
    raw = launch_and_watch(cmd, run_env(extra_env, uuid.uuid4().hex), workdir, 4 * profile["timeout_s"])
    result = {"kind": "calibration", "transport": transport, "exit": raw["exit"], "wall_s": raw["end"] - raw["start"],
              "load_1min": raw["load_1min"], "procs_left": raw["procs_left"], "shm_left_files": raw["shm_left_files"]}
    try:
        with open(os.path.join(out_dir, "results.json")) as fh:
            timing = json.load(fh)["timing"]
    except OSError:
        result["error"] = raw["stderr"].strip().splitlines()[-20:]
        return result
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    startup = result["wall_s"] - timing["wall_s"]
    result.update(setup_s=timing["setup_s"], async_s=timing["async_s"], async_start_s=startup + timing["setup_s"])
    return result


def injection_time(calibration, args, profile) -> float:
    if args.after is not None:
        return args.after
    if calibration["async_s"] < 3 * profile["offset_s"]:
        print(f"warning: {calibration['transport']}: the asynchronous phase lasts {calibration['async_s']:.1f} s, "
              f"less than 3 x the {profile['offset_s']} s offset; the fault may hit near its end", flush=True)
    return round(calibration["async_start_s"] + profile["offset_s"], 1)


# ---------------------------------------------------------------------------------------------- the matrix
def role_rank(role: str, ranks: int) -> int:
    return {"central": 0, "worker": 1, "last": ranks - 1}[role]


def fault_row(transport, role, mode, after_s, profile, extra_env, workdir, launcher) -> dict:
    rank = role_rank(role, profile["ranks"])
    cmd = [launcher, "-n", str(profile["ranks"]), sys.executable, WRAPPER, mode, str(rank), str(after_s),
           *profile["args"], "--transport", transport]
    raw = launch_and_watch(cmd, run_env(extra_env, uuid.uuid4().hex), workdir, after_s + profile["timeout_s"])
    return {"kind": "fault", "transport": transport, "role": role, "rank": rank, "mode": mode, "after_s": after_s,
            **summarise(raw)}


def ctrl_c_row(transport, target, after_s, profile, extra_env, workdir, launcher) -> dict:
    cmd = [launcher, "-n", str(profile["ranks"]), sys.executable, "-m", "asyos.run", *profile["args"],
           "--transport", transport]
    raw = launch_and_watch(cmd, run_env(extra_env, uuid.uuid4().hex), workdir, after_s + profile["timeout_s"],
                           ctrl_c=target, after_s=after_s)
    return {"kind": "ctrl-c", "transport": transport, "role": "mpiexec", "rank": None,
            "mode": f"SIGINT to {target}", "after_s": after_s, **summarise(raw)}


# ---------------------------------------------------------------------------------------------- output
def cell(value, digits=1) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def short_places(rows) -> list:
    """Each row's ``landed_in`` stack without the frames every stack starts with, as ``first ... last``
    (e.g. the phase's function and the innermost one); ``-`` where nothing was injected."""
    stacks = [r["landed_in"].split(" > ") if r["landed_in"] else None for r in rows]
    known = [st for st in stacks if st]
    common = 0
    while known and all(len(st) > common + 1 and st[common] == known[0][common] for st in known):
        common += 1
    out = []
    for st in stacks:
        rest = st[common:] if st else []
        out.append("-" if not rest else rest[0] if len(rest) == 1 else f"{rest[0]} … {rest[-1]}")
    return out


def markdown_table(rows) -> str:
    header = ["transport", "role (rank)", "mode", "injected at (s)", "landed in", "end after (s)", "exit",
              "stderr lines", "tracebacks", "procs left", "/dev/shm left", "relevant line"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r, place in zip(rows, short_places(rows)):
        who = r["role"] if r["rank"] is None else f"{r['role']} ({r['rank']})"
        text = r["line"].replace("|", "\\|")
        text = text if len(text) <= 110 else text[:107] + "..."
        cells = [r["transport"], who, r["mode"], cell(r["injected_at_s"]), place, cell(r["end_s"]),
                 cell(r["exit"]), cell(r["stderr_lines"]), cell(r["tracebacks"]), cell(r["procs_left"]),
                 cell(r["shm_left"]), f"`{text}`" if text else ""]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def flags(rows) -> dict:
    """Rows a reader must look at: slow to end, exit 0, timeouts, leftover processes or segments."""
    name = lambda r: f"{r['transport']} {r['role']} {r['mode']}"  # noqa: E731
    return {"slow": [name(r) for r in rows if r["exit"] == "timeout" or (r["end_s"] or 0) > SLOW_S],
            "exit_0": [name(r) for r in rows if r["exit"] == 0],
            "timeout": [name(r) for r in rows if r["exit"] == "timeout"],
            "not_injected": [name(r) for r in rows if r["injected_at_s"] is None],
            "procs_left": [name(r) for r in rows if r["procs_left"]],
            "shm_left": [name(r) for r in rows if r["shm_left"]]}


# ---------------------------------------------------------------------------------------------- main
def parse_args():
    p = parser(__doc__.splitlines()[0])
    p.add_argument("--transports", help="comma-separated (default: the profile's; e.g. add node-aggregated)")
    p.add_argument("--modes", help=f"comma-separated fault modes (default {','.join(MODES)}; os-exit0 also works)")
    p.add_argument("--roles", help=f"comma-separated, of {','.join(ROLES)} (default: all)")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="extra environment of every run, e.g. MPIR_CVAR_NUM_CLIQUES=3 (repeatable)")
    p.add_argument("--after", type=float, help="inject this many seconds after start (default: calibrated)")
    p.add_argument("--offset", type=float, help="calibrated AFTER_S: seconds into the asynchronous phase "
                                                "(default 4; 2 with --quick)")
    p.add_argument("--timeout", type=float, help="seconds after AFTER_S before a run is killed (default 60)")
    p.add_argument("--no-ctrl-c", action="store_true", help="skip the Ctrl-C rows")
    p.add_argument("--keep-shm", action="store_true", help="leave the /dev/shm files runs left behind")
    return p.parse_args()


def apply_options(args, profile) -> dict:
    """The profile with the command line's overrides (transports, modes, roles, timeout, offset, Ctrl-C)."""
    split = lambda text: [t.strip() for t in text.split(",") if t.strip()]  # noqa: E731
    if args.transports:
        profile["transports"] = split(args.transports)
    if args.modes or args.roles:
        roles = split(args.roles) if args.roles else list(ROLES)
        modes = split(args.modes) if args.modes else list(MODES)
        profile["cases"] = [(role, mode) for role in roles for mode in modes]
    if args.timeout:
        profile["timeout_s"] = args.timeout
    if args.offset is not None:
        profile["offset_s"] = args.offset
    if args.no_ctrl_c:
        profile["ctrl_c"] = False
    profile["env"] = dict(item.split("=", 1) for item in args.env)
    return profile


def announce_calibration(c, after_s):
    if "error" in c:
        print(f"{c['transport']}: the fault-free run failed (exit {c['exit']}); transport skipped:\n  "
              + "\n  ".join(c["error"]), flush=True)
        return
    print(f"{c['transport']}: fault-free run {c['wall_s']:.1f} s (exit {c['exit']}, {len(c['shm_left_files'])} "
          f"/dev/shm files left), asynchronous phase from {c['async_start_s']:.1f} s for {c['async_s']:.1f} s; "
          f"injecting at {after_s} s", flush=True)
    if c["load_1min"] > usable_cores():
        print(f"warning: load average {c['load_1min']:.1f} on {usable_cores()} cores: other jobs are running, "
              f"so timings (and the calibrated AFTER_S) are distorted", flush=True)


def run_transport(transport, args, profile, run, workdir, launcher) -> list:
    """Calibrate, then every fault row and the Ctrl-C rows of one transport (none if the fault-free
    run failed); removes the /dev/shm files each run left (unless ``--keep-shm``)."""
    calibration = run.unit(calibrate(transport, profile, profile["env"], workdir, launcher))
    after_s = None if "error" in calibration else injection_time(calibration, args, profile)
    announce_calibration(calibration, after_s)
    if not args.keep_shm:
        remove_shm(calibration["shm_left_files"])
    if after_s is None:
        return []
    jobs = [(fault_row, (transport, role, mode)) for role, mode in profile["cases"]]
    jobs += [(ctrl_c_row, (transport, target)) for target in ("pid", "group") if profile["ctrl_c"]]
    rows = []
    for make_row, head in jobs:
        row = run.unit(make_row(*head, after_s, profile, profile["env"], workdir, launcher))
        rows.append(row)
        print(f"  {' '.join(map(str, head))}: exit {row['exit']}, end after {cell(row['end_s'])} s, "
              f"{row['procs_left']} procs / {row['shm_left']} shm left", flush=True)
        if not args.keep_shm:
            remove_shm(row["shm_left_files"])
    return rows


def main():
    args = parse_args()
    profile = apply_options(args, choose_profile(args, PROFILES))
    launcher = mpiexec_path()
    if launcher is None:
        raise SystemExit("mpiexec not found: pip install 'asyos[mpi]'")
    run = Run("faults", args, profile)
    workdir = tempfile.mkdtemp(prefix="bench-faults-")
    rows = []
    try:
        for transport in profile["transports"]:
            rows += run_transport(transport, args, profile, run, workdir, launcher)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    table = markdown_table(rows)
    print("\n" + table + "\n")
    summary = {"flags": flags(rows), "table": table, "shm_removed": not args.keep_shm,
               "calibration": {u["transport"]: u for u in run.units if u["kind"] == "calibration"},
               "asyos": os.path.dirname(asyos.__file__), "command": sys.argv}
    for what, names in summary["flags"].items():
        if names:
            print(f"{what}: {'; '.join(names)}")
    print(f"results: {run.finish(summary)}")


if __name__ == "__main__":
    main()
