"""The settings of a run, declared once by family: name, type, default, flag, help and constraints.

``COMMON`` holds what every run has (what to run, the data, the model's budget and loss, the output, the
checkpoints); ``SUBSTITUTION`` (OS and Asy-OS), ``PARALLEL`` (Asy-OS under ``mpiexec`` and the simulator),
``STREAM`` (the sample-stream learners), ``AVERAGES`` (running averages) and ``DFLS`` hold a family's own.
From these declarations come ``RunConfig``'s fields (``asyos.runs.config``), the command line's argument
groups and ``--help-algorithm NAME`` (``asyos.cli.run``), the TOML keys a config file may hold, and the checks
``RunConfig.validated`` runs: each option's own (finite, a bound, one of its choices) and each family's rules
that tie several options together, in the order they are declared. The options are declared in the order
of ``RunConfig``'s fields (its ``as_dict``, the ``config`` of ``results.json``).
"""
from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import InputError
from ..learners.protocol.transports import TRANSPORT_NAMES

PUSH_MODES = ("auto", "pipelined", "each-step")
TRANSPORTS = ("auto",) + TRANSPORT_NAMES


def or_auto(convert, what):
    """An option's type: ``auto`` (``None``: the default) or ``convert(text)``."""
    def parse(text):
        if text == "auto":
            return None
        try:
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what} or auto; got {text!r}") from None
    return parse


@dataclass(frozen=True)
class Option:
    """One setting: ``RunConfig.<name>``, flag ``--name-with-dashes``.

    ``kind``: int, float, str or bool; ``optional``: ``None`` is a value (not given, or ``auto``);
    ``negatable``: a bool with ``--name`` and ``--no-name``; ``counted``: ``-v``, ``-vv``; ``parse``: the
    command line's converter of the text (default ``kind``); ``choices``: the values allowed; ``at_least`` /
    ``above``: a bound (``at_least=1``: "must be at least 1", ``at_least=0``: "must be >= 0", ``above``:
    "must be > x"); ``check(value)``: a message when the value is bad, for a constraint the bounds do not say;
    ``flag``: no flag of its own when ``False`` (set by another flag: ``resume``); ``families``: the registry
    families that take a common option (``--passes``), refused for the others (``check``)."""
    name: str
    kind: type
    default: object = None
    help: str = ""
    optional: bool = False
    negatable: bool = False
    counted: bool = False
    parse: Optional[Callable] = None
    choices: Optional[tuple] = None
    at_least: Optional[float] = None
    above: Optional[float] = None
    check: Optional[Callable] = None
    metavar: Optional[str] = None
    short: Optional[str] = None
    flag: bool = True
    flag_name: Optional[str] = None       # the flag when it is not the name (fit_intercept: --intercept)
    cli_choices: Optional[tuple] = None    # the command line's choices (argparse's usage error)
    families: tuple = ()                   # a common option only these families take (empty: every one)

    @property
    def option(self) -> str:
        return "--" + (self.flag_name or self.name.replace("_", "-"))

    def problem(self, value) -> Optional[str]:
        """What is wrong with ``value`` (``None``: nothing)."""
        if value is None:
            return None
        if self.choices is not None and value not in self.choices:
            return f"unknown {self.option} {value!r}; choose one of: {', '.join(map(str, self.choices))}"
        if self.at_least is not None and value < self.at_least:
            bound = "at least 1" if self.at_least == 1 else f">= {self.at_least:g}"
            return f"{self.option} must be {bound}; got {value}"
        if self.above is not None and not value > self.above:
            return f"{self.option} must be > {self.above:g}; got {value}"
        return self.check(value) if self.check is not None else None


@dataclass(frozen=True)
class Options:
    """A family's options (``families``: the registry's family names it serves; empty: every run) and its
    rules: each ``rule(config)`` returns the message of a bad combination, or ``None``."""
    key: str
    title: str
    options: tuple
    families: tuple = ()
    rules: tuple = ()

    @property
    def common(self) -> bool:
        return not self.families


def _opt(name, kind, default=None, help="", **more) -> Option:
    return Option(name, kind, default, help, **more)


# -- the common core -------------------------------------------------------------------------------------------
def _known_algorithm(name) -> Optional[str]:
    from ..registry import get_algorithm
    get_algorithm(name)                     # InputError naming the algorithms
    return None


WHAT = Options("run", "what to run", (
    _opt("algorithm", str, "os", "registered algorithm (default: os)", check=_known_algorithm),
))

DATA = Options("data", "data (default: a KDD'16 synthetic problem)", (
    _opt("data", str, None, "dense .npz, a directory of sparse X_*.npz + y_*.npy, or libsvm text (also .gz, or - for "
                            "standard input with --n-features); column-major (python -m asyos.convert): a directory "
                            "with a Fortran-ordered X.npy + y.npy or a CSC X.npz, or a .parquet file (one column per "
                            "feature), read by column (OS, Asy-OS); the sample-stream learners learn from libsvm text "
                            "and .parquet rows as they are read", optional=True),
    _opt("test_data", str, None, "libsvm test file", optional=True),
    _opt("index_base", str, "auto", "libsvm feature indices: auto (default), 0 or 1",
         check=lambda v: None if v in ("auto", "0", "1", 0, 1) else f"--index-base must be auto, 0 or 1; got {v!r}"),
    _opt("label_column", str, None, "Parquet: the column holding the labels (default y)", optional=True),
    _opt("synthetic", str, "regression", "KDD'16 task (default regression)",
         cli_choices=("regression", "classification"),
         check=lambda v: None if v in ("regression", "classification") else
         f"--synthetic must be regression or classification; got {v!r}"),
    _opt("n_samples", int, None, "default ceil(1.2 s log2 p)", optional=True, at_least=1),
    _opt("n_features", int, None, "p (default 2000); declares p for libsvm", optional=True, at_least=1),
    _opt("n_informative", int, None, "s, the true features (default 100)", optional=True, at_least=1),
    _opt("noise", float, None, "default 0.1 (regression), 0 (classification)", optional=True, at_least=0),
    _opt("n_test", int, None, "synthetic test samples (default n)", optional=True, at_least=0),
), rules=(
    lambda c: "--test-data needs --data" if c.data is None and c.test_data is not None else None,
    lambda c: (f"--n-informative ({c.synthetic_informative}) is larger than --n-features ({c.synthetic_features})"
               if c.data is None and c.synthetic_informative > c.synthetic_features else None),
))


def _known_loss(config) -> Optional[str]:
    if config.loss != "auto":
        from ..losses import get_loss
        get_loss(config.loss, smooth=family_of(config) != "stream")   # the row loops take the hinge too
    return None


# the families that scan their data in passes and scale it: Online Substitution and the sample-stream learners
SCANNING = ("substitution", "stream")
FAMILY_NAMES = {"substitution": "Online Substitution", "stream": "the sample-stream learners"}


def _params_parse(config) -> Optional[str]:
    config.estimator_params                  # raises InputError on a malformed --param
    return None


MODEL = Options("model", "model", (
    _opt("budget", int, None, "features to keep (default: the true s of synthetic data)", optional=True, at_least=1),
    _opt("loss", str, "auto", "squared, squared_hinge, logistic, hinge (sample-stream learners only) or auto (default: "
                              "from the labels; the choices are asyos.losses.TABLE)"),
    _opt("passes", int, None, "OS: scans over the features, or auto (default: until a pass changes nothing, 2 to 10; "
                              "3 with --variant kdd16); sample-stream learners: passes over the samples (default "
                              "ceil(2 p / n), ECML'18's)", optional=True, parse=or_auto(int, "an integer"), at_least=1,
         families=SCANNING),
    _opt("seed", int, 0, "seed of the synthetic data, the L_F estimate, the simulator's schedule, the learners' "
                         "shuffles and DFLS's block (default 0): in one process a run repeats exactly; under mpiexec "
                         "the data and each rank's own random choices repeat, but the order in which the workers' "
                         "updates meet u_C (so the staleness, and possibly the selection) depends on timing, which no "
                         "seed fixes"),
    _opt("scale", str, None, "OS: standard (default with --variant exchange: dense columns centred and scaled to unit "
                             "variance, sparse ones to unit root mean square) or none; sample-stream learners: maxabs "
                             "(their default: each feature divided by its largest |value|) or none (the data as given, "
                             "the ECML'18 protocol)", optional=True,
         check=lambda v: None if v in ("maxabs", "standard", "none") else
         f"--scale must be standard or none (OS), maxabs or none (sample-stream learners); got {v!r}",
         families=SCANNING),
    _opt("params", str, None, "the learner's parameters, name=value[,name=value...] (e.g. eta=0.01,lam=1e-4; see "
                              "--list-algorithms and the class docstrings)", optional=True, flag_name="param"),
), rules=(
    _known_loss,
    _params_parse,
    lambda c: (f"--budget and --loss do not apply to {c.algorithm!r}: its model is set by --param alpha=A (and "
               f"the squared loss)" if family_of(c) == "path" and (c.budget is not None or c.loss not in
                                                                 ("auto", "squared")) else None),
    lambda c: ("--scale maxabs is the sample-stream learners'; OS takes --scale standard|none"
               if c.scale == "maxabs" and family_of(c) == "substitution" else None),
    lambda c: ("--scale standard is Online Substitution's; the sample-stream learners take maxabs|none"
               if c.scale == "standard" and family_of(c) != "substitution" else None),
))

OUTPUT = Options("output", "output", (
    _opt("output", str, None, "directory for results.json and selection_log.csv", optional=True),
    _opt("overwrite", bool, False, "replace the files of a previous run in --output (without it, a used --output is "
                                   "refused)"),
    _opt("quiet", bool, False, "no summary on stdout and no progress lines on stderr (warnings and errors still)",
         short="-q"),
    _opt("picture", bool, True, "with --output, draw DIR/run.png at the end (the default; --no-picture: none, as "
                                "ASYOS_PICTURE=0 in the environment; python -m asyos.report DIR draws it later)",
         negatable=True),
    _opt("verbose", int, 0, "progress lines on stderr even when it is not a terminal (a log file); -vv: debug "
                            "messages too", counted=True, short="-v", at_least=0),
    _opt("save_model", str, None, "write the fitted model (selected features, coefficients, intercept, scaling, "
                                  "algorithm, asyos version) to FILE; 'predict --model FILE' applies it to new data",
         optional=True, metavar="FILE"),
    _opt("trace_every", int, None, "record the training objective and error every k worker steps, with the time "
                                   "(default: with --output, rows by time at a negligible cost, for DIR/run.png; 0: "
                                   "none)", optional=True, at_least=0),
    _opt("checkpoint_every", float, None, "with --output: save the run's state to DIR/checkpoint.pkl every SECONDS "
                                          "(default 60; 0: only when stopped by SIGTERM or Ctrl-C, which save and exit "
                                          "143 / 130)", optional=True, metavar="SECONDS",
         check=lambda v: None if v >= 0 else f"--checkpoint-every must be >= 0 seconds; got {v}"),
    _opt("time_limit", float, None, "stop after SECONDS of fitting as SIGTERM would (with --output: the state saved, "
                                    "exit 142; continue with --resume DIR, which may give a new --time-limit); for "
                                    "batch queues' limits", optional=True, metavar="SECONDS",
         check=lambda v: None if v > 0 else f"--time-limit must be > 0 seconds; got {v}"),
    _opt("resume", bool, False, "continue the stopped run whose --output was DIR, with its settings "
                                "(DIR/run_config.json) from its last checkpoint", flag=False),
), rules=(
    lambda c: "--quiet and --verbose contradict each other; pass one" if c.quiet and c.verbose else None,
    lambda c: ("--checkpoint-every needs --output (the checkpoint is written there)"
               if c.checkpoint_every is not None and c.output is None else None),
    lambda c: _model_path(c.save_model),
    lambda c: ("--overwrite goes with --output (the directory whose previous run it replaces)"
               if c.overwrite and c.output is None else None),
    lambda c: ("--time-limit needs --output (the stopped run's state is saved there)"
               if c.time_limit is not None and c.output is None else None),
))


def _model_path(path) -> Optional[str]:
    from ..records.model_file import check_model_path
    check_model_path(path)
    return None


# -- the families' own -----------------------------------------------------------------------------------------
def family_of(config) -> str:
    """The registry's family of ``config.algorithm`` (the rules below ask it, not algorithm names)."""
    from ..registry import get_algorithm
    return get_algorithm(config.algorithm).family


def _one_of(flag, names):
    return lambda v: None if v in names() else f"unknown {flag} {v!r}; choose one of: {', '.join(names())}"


def _variants():
    from ..learners.substitution.substitution import VARIANTS
    return VARIANTS


SUBSTITUTION = Options("substitution", "Online Substitution (os, asy-os)", (
    _opt("variant", str, "exchange", "OS / Asy-OS: exchange (default: intercept, scaled columns, Newton weights for "
                                     "newcomers, substitutions that must lower the loss, features visited by marginal "
                                     "gain) or kdd16 (KDD'16 Alg. 1-3 literally)",
         check=_one_of("--variant", _variants)),
    _opt("fit_intercept", bool, None, "OS: fit an unpenalised intercept (default with --variant exchange; "
                                      "--no-intercept drops it)", optional=True, negatable=True, flag_name="intercept"),
    _opt("step_size", float, None, "eta (default 0.5 / L_F estimated from the data)", optional=True, above=0),
    _opt("step_divisor", float, 1.0, "the paper's m >= 1 (default 1)",
         check=lambda v: None if v >= 1 else f"--step-divisor (the paper's m) must be >= 1; got {v}"),
    _opt("decrease_check", bool, True, "keep the objective-decrease check (default on; --no-decrease-check follows "
                                       "Alg. 3 literally)", negatable=True),
    _opt("ridge", float, None, "OS / Asy-OS (exchange): alpha >= 0 of a (alpha / 2) ||w||^2 on the scaled columns in "
                               "the selection and the refit, or auto (default): 0 unless p >= 5 n and n <= 1000, "
                               "where alpha is chosen between 0 and 10 by cross-validation on the training rows; 0: none",
         optional=True,
         parse=or_auto(float, "a number >= 0"),
         check=lambda v: None if v >= 0 else f"--ridge must be a finite number >= 0; got {v}"),
    _opt("decrease_constant", float, None, "--variant kdd16: the paper's c in [0, 1] (default 1)", optional=True,
         check=lambda v: None if 0 <= v <= 1 else
         f"--decrease-constant (the paper's c) must be in [0, 1]; got {v}"),
    _opt("refit", bool, True, "refit on the selected features before evaluation (default on; --no-refit)",
         negatable=True),
), families=("substitution",), rules=(
    lambda c: ("--decrease-constant is KDD'16's c (--variant kdd16); the exchange variant keeps a substitution only "
               "if the loss falls" if c.decrease_constant is not None and c.variant != "kdd16" else None),
    lambda c: ("--ridge is part of the exchange variant; --variant kdd16 has none"
               if c.ridge and c.variant != "exchange" else None),
))


def _policies():
    from ..learners.protocol.simulator import POLICIES
    return POLICIES


def _schedules():
    from ..learners.protocol.simulator import SCHEDULES
    return SCHEDULES


def _shardings():
    from ..data.sharding import SHARDING_SCHEMES
    return SHARDING_SCHEMES


PARALLEL = Options("parallel", "parallel execution (Asy-OS under mpiexec; --simulate: Asy-OS or a sample-stream "
                               "learner in the simulator)", (
    _opt("simulate", bool, False, "run Asy-OS, or a sample-stream learner as data-parallel workers, in one process: "
                                  "with --transport shared-memory, messages or node-aggregated, a discrete-event "
                                  "simulation of what mpiexec runs with it (--push-mode, --max-batch, --max-staleness, "
                                  "--nodes, --cores, --costs); without, KDD'16's bounded-staleness simulation "
                                  "(--max-staleness = tau, --staleness-policy, --schedule)"),
    _opt("workers", int, None, "simulated workers (default 4)", optional=True, at_least=1),
    _opt("max_staleness", int, None, "bound tau: simulator default = workers; MPI default unbounded (measured only)",
         optional=True, at_least=0),
    _opt("staleness_policy", str, "max", "simulator: max (default), uniform or fresh",
         check=_one_of("--staleness-policy", _policies)),
    _opt("schedule", str, "round-robin", "simulator: round-robin (default) or random",
         check=_one_of("--schedule", _schedules)),
    _opt("sharding", str, None, "contiguous, strided, blocked (strided by 16 columns) or hashed (default: strided; "
                                "blocked on a synthetic problem; contiguous with --variant kdd16)", optional=True,
         check=_one_of("--sharding", _shardings)),
    _opt("budget_mode", str, None, "Asy-OS: global (default) or split (each worker keeps s/q features, KDD'16). "
                                   "global: each worker may keep up to --cap; theta is the s-th largest |w| over all "
                                   "workers (the others' come with the replies, or from the shared window); workers "
                                   "drop features below --slack x theta; the union is cut to s", optional=True,
         check=lambda v: None if v in ("split", "global") else f"--budget-mode must be split or global; got {v!r}"),
    _opt("cap", int, None, "global budget: the most features a worker keeps (default min(s, ceil(3 s / q), "
                           "ceil(s/q + 5 sd)), sd the spread of a shard's share of s random features)", optional=True,
         at_least=1),
    _opt("slack", float, None, "global budget: workers drop features below slack x theta, in (0, 1] (default 0.5)",
         optional=True, check=lambda v: None if 0 < v <= 1 else f"--slack must be in (0, 1]; got {v}"),
    _opt("transport", str, "auto", "MPI (and --simulate): shared-memory (the workers add their changes into u_C in "
                                   "memory shared on the node; the central rank only watches), messages (pushes to "
                                   "the central rank, which works across nodes), node-aggregated (shared memory "
                                   "within each node, one push per node from its leader), or auto (default: messages "
                                   "with a --push-mode, else shared-memory when every rank is on one node, "
                                   "node-aggregated when they span several)", choices=TRANSPORTS),
    _opt("push_mode", str, "auto", "MPI: pipelined (one push in flight, the steps taken meanwhile summed into the "
                                   "next), each-step (wait for the fresh u_C after every step, KDD'16 Alg. 3 "
                                   "literally), or auto (default: pipelined, each-step with --max-staleness)",
         choices=PUSH_MODES),
    _opt("max_batch", int, 16, "MPI, pipelined: the most steps a worker sums into one push while its previous push "
                               "is in flight; then it waits (default 16; 0 = no limit)", at_least=0),
    _opt("nodes", int, None, "--simulate --transport node-aggregated: nodes the workers are spread over, round-robin "
                             "(default 1)", optional=True, at_least=1),
    _opt("cores", int, None, "--simulate with a --transport: cores the simulated ranks share (default: one each)",
         optional=True, at_least=1),
    _opt("costs", str, None, "--simulate with a --transport: JSON file of the simulated costs (fields of "
                             "asyos.learners.protocol.replay.Costs; default: measured on the development machine)",
         optional=True),
    _opt("watchdog_timeout", float, 5.0, "MPI: seconds of silence before a worker is declared lost (default 5)",
         above=0),
    _opt("setup_timeout", float, 600.0, "MPI: seconds every rank may take to load its data (default 600)", above=0),
), families=("substitution", "stream"), rules=(
    lambda c: (f"--push-mode {c.push_mode} applies to --transport messages; with {c.transport} every step is written "
               f"into shared memory directly"
               if c.transport in ("shared-memory", "node-aggregated") and c.push_mode != "auto" else None),
    lambda c: ("--nodes goes with --simulate --transport node-aggregated (under mpiexec the nodes are the machines "
               "the ranks run on)" if c.nodes is not None and not (c.simulate and c.transport == "node-aggregated")
               else None),
    lambda c: ("--cores goes with --simulate and a --transport (the simulated engine's machine)"
               if c.cores is not None and not (c.simulate and c.transport != "auto") else None),
    lambda c: ("--costs goes with --simulate and a --transport (the simulated engine's machine)"
               if c.costs is not None and not (c.simulate and c.transport != "auto") else None),
    lambda c: ("--max-staleness is enforced step by step: use it with --push-mode each-step (or auto)"
               if c.push_mode == "pipelined" and c.max_staleness is not None else None),
    lambda c: ("--cap goes with --budget-mode global" if c.cap is not None and c.resolved_budget_mode != "global"
               else None),
    lambda c: ("--slack goes with --budget-mode global" if c.slack is not None and c.resolved_budget_mode != "global"
               else None),
))

STREAM = Options("stream", "sample-stream learners (b-arda, b-amd, ofs, sofs, l1-arda, ada-fobos, opg, rda, sfsa, "
                           "tsgd) and running averages", (
    _opt("tune", bool, False, "choose eta, lam (1/gamma for SOFS) from {1e-1, 1e-1.5, ..., 1e-8} on training "
                              "accuracy (ECML'18), then fit"),
    _opt("chunk_rows", int, 4096, "sample-stream learners and running averages: rows read from the file at a time "
                                  "(default 4096)", at_least=1),
), families=("stream", "averages"))

DFLS = Options("dfls", "dynamic feature space (--algorithm dfls; --param penalty=group_lasso|lp,alpha=A,exponent=P)", (
    _opt("add_features", str, None, "fit without these columns, then add them by following the solution path: "
                                    "indices and ranges (3,7-9) or a share chosen by --seed (20%%, the default)",
         optional=True, metavar="SPEC"),
    _opt("remove_features", str, None, "fit on every column, then remove these", optional=True, metavar="SPEC"),
    _opt("group_size", int, 1, "group lasso over consecutive groups of K columns (default 1)", at_least=1),
), families=("path",))

# every group, in the order of RunConfig's fields; the common ones come first in --help
GROUPS = (WHAT, DATA, MODEL, OUTPUT, SUBSTITUTION, PARALLEL, STREAM, DFLS)
OPTIONS = {option.name: option for group in GROUPS for option in group.options}


def groups_for(family: Optional[str]) -> tuple:
    """The groups a run of ``family`` reads (every group for ``None``)."""
    return tuple(g for g in GROUPS if g.common or family is None or family in g.families)


def _own_family_only(config) -> None:
    """A family's option (a group's, or a common option's own ``families``) set away from its default on a run
    of another family is refused: it would be ignored (``--algorithm dfls --simulate`` ran DFLS alone and said
    nothing; ``--passes`` and ``--scale`` were ignored by the batch baselines, the running averages and DFLS)."""
    family = family_of(config)
    for group in GROUPS:
        for option in group.options:
            families = option.families or group.families
            if not families or family in families or not option.flag or getattr(config, option.name) == option.default:
                continue
            what = group.title if not option.families else " and ".join(FAMILY_NAMES[f] for f in option.families)
            raise InputError(f"{option.option} applies to {what}; {config.algorithm!r} does not take it")


def check(config) -> None:
    """Each option's own constraints, then every group's rules; ``InputError`` names the first problem."""
    for name, option in OPTIONS.items():          # inf or nan passed every range check
        value = getattr(config, name)
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"{option.option} must be a finite number; got {value}")
    for group in GROUPS:
        for option in group.options:
            message = option.problem(getattr(config, option.name))
            if message:
                raise InputError(message)
    _own_family_only(config)
    for group in GROUPS:
        for rule in group.rules:
            message = rule(config)
            if message:
                raise InputError(message)
