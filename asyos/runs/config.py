"""``RunConfig``: everything a run needs, from defaults < ``--config FILE.toml`` < command-line flags.

The config is a frozen dataclass, validated once, and written into the results. A TOML file holds
the same names as the dataclass fields (``n_features`` or ``n-features``), at the top level or in
a ``[run]`` table; an unknown key is an error.

With no data path the run uses a KDD'16 synthetic problem: ``p`` = 2000 features, ``s`` = 100 true
ones, ``n = ceil(1.2 s log2 p)`` samples, noise 0.1 (regression), budget ``s``: the embedded
default that ``python -m asyos.run`` runs with no argument (``cluster_configs/default.toml`` spells
it out).
"""
from __future__ import annotations

import dataclasses
import math
import os
import sys
import typing
from dataclasses import dataclass, fields
from typing import Optional

from ..errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_N_FEATURES = 2000
DEFAULT_N_INFORMATIVE = 100
DEFAULT_SIMULATED_WORKERS = 4
PUSH_MODES = ("auto", "pipelined", "each-step")
TRANSPORTS = ("auto", "shared-memory", "messages", "node-aggregated")


@dataclass(frozen=True)
class RunConfig:
    # what to run
    algorithm: str = "os"
    # data: a path, or a synthetic KDD'16 problem
    data: Optional[str] = None
    test_data: Optional[str] = None
    index_base: str = "auto"
    label_column: Optional[str] = None          # Parquet: the label's column (None: "y")
    synthetic: str = "regression"
    n_samples: Optional[int] = None
    n_features: Optional[int] = None
    n_informative: Optional[int] = None
    noise: Optional[float] = None
    n_test: Optional[int] = None
    # the model
    budget: Optional[int] = None
    loss: str = "auto"
    passes: Optional[int] = None            # None: "auto"
    variant: str = "exchange"               # OS / Asy-OS: exchange or kdd16 (Alg. 1-3 literally)
    fit_intercept: Optional[bool] = None    # None: the variant's default (exchange: on, kdd16: off)
    step_size: Optional[float] = None
    step_divisor: float = 1.0
    decrease_check: bool = True
    ridge: Optional[float] = 0.0            # None: "auto" (chosen by cross-validation when p >= 5 n)
    decrease_constant: Optional[float] = None   # kdd16: the paper's c (default 1)
    refit: bool = True
    seed: int = 0
    scale: Optional[str] = None
    params: Optional[str] = None
    tune: bool = False
    # parallel execution
    simulate: bool = False
    workers: Optional[int] = None
    max_staleness: Optional[int] = None
    staleness_policy: str = "max"
    schedule: str = "round-robin"
    sharding: Optional[str] = None          # None: the variant's (data.sharding.default_sharding)
    budget_mode: Optional[str] = None       # None: global for Asy-OS (resolved_budget_mode)
    cap: Optional[int] = None
    slack: Optional[float] = None
    transport: str = "auto"
    push_mode: str = "auto"
    max_batch: int = 16
    nodes: Optional[int] = None             # --simulate, node-aggregated: virtual nodes (default 1)
    cores: Optional[int] = None             # --simulate with a transport: cores the ranks share (default: one each)
    costs: Optional[str] = None             # --simulate with a transport: JSON file of replay.Costs fields
    watchdog_timeout: float = 5.0
    setup_timeout: float = 600.0
    trace_every: Optional[int] = None       # None: "auto" with --output, else none; 0: none
    chunk_rows: int = 4096
    # dynamic feature space (--algorithm dfls)
    add_features: Optional[str] = None
    remove_features: Optional[str] = None
    group_size: int = 1
    # output
    output: Optional[str] = None
    overwrite: bool = False                 # replace a previous run's files in --output (else refused)
    quiet: bool = False                     # -q: no summary, no progress lines
    picture: bool = True                    # --no-picture: no run.png (asyos.report)
    verbose: int = 0                        # -v: progress lines even when stderr is not a terminal; -vv: debug
    save_model: Optional[str] = None        # --save-model FILE: the fitted model (asyos.records.model_file)
    # checkpoints (asyos.records.resume): seconds between saves (None: DEFAULT_EVERY_S with --output; 0: on stop only)
    checkpoint_every: Optional[float] = None
    time_limit: Optional[float] = None      # --time-limit: stop (and save) after this many seconds of fitting
    resume: bool = False                    # set by --resume DIR (the run's settings come from DIR)

    # -- derived ------------------------------------------------------------------------------
    @property
    def synthetic_features(self) -> int:
        return DEFAULT_N_FEATURES if self.n_features is None else self.n_features

    @property
    def synthetic_informative(self) -> int:
        return DEFAULT_N_INFORMATIVE if self.n_informative is None else self.n_informative

    @property
    def simulated_workers(self) -> int:
        """Workers of the staleness simulator: ``--workers``, or ``DEFAULT_SIMULATED_WORKERS``."""
        return self.workers or DEFAULT_SIMULATED_WORKERS

    @property
    def feature_passes(self):
        """Passes over the features of OS / Asy-OS: a number, or ``"auto"`` (the default: until a
        pass changes nothing for the exchange variant, 3 for kdd16)."""
        return "auto" if self.passes is None else self.passes

    @property
    def resolved_trace_every(self):
        """``--trace-every k`` (0: none); not given, ``"auto"`` with ``--output`` (the cheap trace
        ``run.png`` draws, ``asyos.learners.trace``), else 0."""
        if self.trace_every is not None:
            return self.trace_every
        return "auto" if self.output else 0

    @property
    def feature_scale(self) -> Optional[bool]:
        """OS / Asy-OS: ``--scale standard|none`` as a flag (``None``: the variant's default)."""
        return None if self.scale is None else self.scale == "standard"

    def substitution_options(self):
        """The OS workers' settings (``SubstitutionOptions``), as every scheduler builds them."""
        from ..learners.substitution.workers import SubstitutionOptions
        decrease_constant = None if self.decrease_constant is None else float(self.decrease_constant)
        return SubstitutionOptions(passes=self.feature_passes, step_size=self.step_size,
                                   step_divisor=self.step_divisor, decrease_check=self.decrease_check,
                                   decrease_constant=decrease_constant, log_selection=True, variant=self.variant,
                                   fit_intercept=self.fit_intercept, scale=self.feature_scale,
                                   ridge=self.ridge or 0.0).validated()

    @property
    def estimator_params(self) -> dict:
        """``--param name=value,name=value`` as a dict (values parsed as numbers where they are)."""
        out = {}
        for item in filter(None, (part.strip() for part in (self.params or "").split(","))):
            name, sep, text = item.partition("=")
            if not sep or not name.strip():
                raise InputError(f"--param takes name=value[,name=value...]; got {item!r}")
            out[name.strip().replace("-", "_")] = _parse_value(text.strip())
        return out

    @property
    def resolved_budget_mode(self) -> str:
        """Asy-OS's budget: ``global`` unless ``split`` (KDD'16's ``s/q`` per worker) is asked for
        (global measured better: ``benchmarks/bench_global_budget*.py``)."""
        return self.budget_mode or "global"

    @property
    def resolved_sharding(self) -> str:
        """``--sharding``, or the variant's default (strided for exchange, blocked on a synthetic
        problem, contiguous for kdd16)."""
        from ..data.sharding import default_sharding
        return self.sharding or default_sharding(self.variant, generated=self.data is None)

    @property
    def simulated_transport(self) -> Optional[str]:
        """``--simulate``: the transport whose protocol is simulated, or ``None`` for the
        bounded-staleness simulation (KDD'16 Sec. 5.3; ``--transport auto``)."""
        return None if self.transport == "auto" else self.transport

    def asy_os_plan(self, n_features: int, budget: int, n_workers: int):
        """The ``AsyOSPlan`` of an Asy-OS run with these settings (every rank builds the same)."""
        from ..learners.protocol.plan import AsyOSPlan
        return AsyOSPlan.build(n_features, budget, n_workers, budget_mode=self.resolved_budget_mode, cap=self.cap,
                               variant=self.variant, sharding=self.resolved_sharding, slack=self.slack)

    @property
    def resolved_push_mode(self) -> str:
        """``auto``: pipelined, unless a staleness bound must be enforced step by step."""
        if self.push_mode != "auto":
            return self.push_mode
        return "each-step" if self.max_staleness is not None else "pipelined"

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    def replace(self, **changes) -> "RunConfig":
        return dataclasses.replace(self, **changes)

    def validated(self) -> "RunConfig":
        """Checks that need no data; raise ``InputError`` naming the bad setting."""
        for name, value in vars(self).items():          # inf or nan passed every range check below
            if isinstance(value, float) and not math.isfinite(value):
                raise InputError(f"--{name.replace('_', '-')} must be a finite number; got {value}")
        from ..registry import get_algorithm
        from ..losses import get_loss
        from ..data.sharding import SHARDING_SCHEMES
        from ..learners.protocol.simulator import POLICIES, SCHEDULES

        spec = get_algorithm(self.algorithm)
        if self.loss != "auto":
            get_loss(self.loss, smooth=spec.family != "stream")     # the row loops take the hinge too
        if self.synthetic not in ("regression", "classification"):
            raise InputError(f"--synthetic must be regression or classification; got {self.synthetic!r}")
        _require(self.index_base in ("auto", "0", "1", 0, 1),
                 f"--index-base must be auto, 0 or 1; got {self.index_base!r}")
        for name in ("n_samples", "n_features", "n_informative", "budget", "passes", "workers", "chunk_rows",
                     "group_size", "cap"):
            value = getattr(self, name)
            if value is not None:
                _require(value >= 1, f"--{_flag(name)} must be at least 1; got {value}")
        _require(not (self.quiet and self.verbose), "--quiet and --verbose contradict each other; pass one")
        for name in ("n_test", "max_staleness", "trace_every", "max_batch", "verbose"):
            value = getattr(self, name)
            if value is not None:
                _require(value >= 0, f"--{_flag(name)} must be >= 0; got {value}")
        if self.noise is not None:
            _require(math.isfinite(self.noise) and self.noise >= 0, f"--noise must be >= 0; got {self.noise}")
        if self.step_size is not None:
            _require(math.isfinite(self.step_size) and self.step_size > 0,
                     f"--step-size must be > 0; got {self.step_size}")
        _require(self.step_divisor >= 1, f"--step-divisor (the paper's m) must be >= 1; got {self.step_divisor}")
        _require(self.decrease_constant is None or 0 <= self.decrease_constant <= 1,
                 f"--decrease-constant (the paper's c) must be in [0, 1]; got {self.decrease_constant}")
        from ..learners.substitution.substitution import VARIANTS
        _require(self.variant in VARIANTS, f"unknown --variant {self.variant!r}; choose one of: {', '.join(VARIANTS)}")
        _require(self.decrease_constant is None or self.variant == "kdd16",
                 "--decrease-constant is KDD'16's c (--variant kdd16); the exchange variant keeps a substitution "
                 "only if the loss falls")
        _require(self.ridge is None or (math.isfinite(self.ridge) and self.ridge >= 0),
                 f"--ridge must be a finite number >= 0; got {self.ridge}")
        _require(not self.ridge or self.variant == "exchange",
                 "--ridge is part of the exchange variant; --variant kdd16 has none")
        _require(self.checkpoint_every is None or self.checkpoint_every >= 0,
                 f"--checkpoint-every must be >= 0 seconds; got {self.checkpoint_every}")
        _require(self.checkpoint_every is None or self.output is not None,
                 "--checkpoint-every needs --output (the checkpoint is written there)")
        from ..records.model_file import check_model_path
        check_model_path(self.save_model)
        _require(not self.overwrite or self.output is not None, "--overwrite goes with --output (the directory "
                                                                "whose previous run it replaces)")
        _require(self.time_limit is None or self.time_limit > 0,
                 f"--time-limit must be > 0 seconds; got {self.time_limit}")
        _require(self.time_limit is None or self.output is not None,
                 "--time-limit needs --output (the stopped run's state is saved there)")
        _require(self.watchdog_timeout > 0, f"--watchdog-timeout must be > 0; got {self.watchdog_timeout}")
        _require(self.setup_timeout > 0, f"--setup-timeout must be > 0; got {self.setup_timeout}")
        _require(self.staleness_policy in POLICIES,
                 f"unknown --staleness-policy {self.staleness_policy!r}; choose one of: {', '.join(POLICIES)}")
        _require(self.schedule in SCHEDULES,
                 f"unknown --schedule {self.schedule!r}; choose one of: {', '.join(SCHEDULES)}")
        _require(self.transport in TRANSPORTS,
                 f"unknown --transport {self.transport!r}; choose one of: {', '.join(TRANSPORTS)}")
        _require(not (self.transport in ("shared-memory", "node-aggregated") and self.push_mode != "auto"),
                 f"--push-mode {self.push_mode} applies to --transport messages; with {self.transport} every "
                 f"step is written into shared memory directly")
        _require(self.nodes is None or (self.simulate and self.transport == "node-aggregated"),
                 "--nodes goes with --simulate --transport node-aggregated (under mpiexec the nodes are the "
                 "machines the ranks run on)")
        _require(self.nodes is None or self.nodes >= 1, f"--nodes must be at least 1; got {self.nodes}")
        for flag, value in (("--cores", self.cores), ("--costs", self.costs)):
            _require(value is None or (self.simulate and self.transport != "auto"),
                     f"{flag} goes with --simulate and a --transport (the simulated engine's machine)")
        _require(self.cores is None or self.cores >= 1, f"--cores must be at least 1; got {self.cores}")
        _require(self.push_mode in PUSH_MODES,
                 f"unknown --push-mode {self.push_mode!r}; choose one of: {', '.join(PUSH_MODES)}")
        _require(not (self.push_mode == "pipelined" and self.max_staleness is not None),
                 "--max-staleness is enforced step by step: use it with --push-mode each-step (or auto)")
        _require(self.sharding is None or self.sharding in SHARDING_SCHEMES,
                 f"unknown --sharding {self.sharding!r}; choose one of: {', '.join(SHARDING_SCHEMES)}")
        _require(self.scale in (None, "maxabs", "standard", "none"),
                 f"--scale must be standard or none (OS), maxabs or none (sample-stream learners); got {self.scale!r}")
        feature_stream = self.algorithm in ("os", "asy-os")
        _require(not (self.scale == "maxabs" and feature_stream),
                 "--scale maxabs is the sample-stream learners'; OS takes --scale standard|none")
        _require(not (self.scale == "standard" and not feature_stream),
                 "--scale standard is Online Substitution's; the sample-stream learners take maxabs|none")
        _require(feature_stream or (self.variant == "exchange" and self.fit_intercept is None),
                 f"--variant and --intercept/--no-intercept apply to Online Substitution (os, asy-os), "
                 f"not {self.algorithm!r}")
        _require(feature_stream or self.ridge == 0, f"--ridge applies to Online Substitution (os, asy-os), "
                                                    f"not {self.algorithm!r}")
        _require(self.budget_mode in (None, "split", "global"),
                 f"--budget-mode must be split or global; got {self.budget_mode!r}")
        _require(self.cap is None or self.resolved_budget_mode == "global", "--cap goes with --budget-mode global")
        _require(self.slack is None or self.resolved_budget_mode == "global",
                 "--slack goes with --budget-mode global")
        _require(self.slack is None or (math.isfinite(self.slack) and 0 < self.slack <= 1),
                 f"--slack must be in (0, 1]; got {self.slack}")
        self.estimator_params
        if self.algorithm != "dfls":
            for name in ("add_features", "remove_features"):
                _require(getattr(self, name) is None, f"--{_flag(name)} goes with --algorithm dfls")
            _require(self.group_size == 1, "--group-size goes with --algorithm dfls")
        if self.data is None:
            _require(self.test_data is None, "--test-data needs --data")
            p, s = self.synthetic_features, self.synthetic_informative
            _require(s <= p, f"--n-informative ({s}) is larger than --n-features ({p})")
        return self


def _parse_value(text: str):
    lowered = text.lower()
    if lowered in ("none", "null"):
        return None
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _flag(name: str) -> str:
    return name.replace("_", "-")


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise InputError(message)


FIELD_TYPES = {f.name: f.type for f in fields(RunConfig)}


def _coerce(name: str, value, source: str):
    """Check a TOML value against the field's type (ints stay ints, no silent truncation)."""
    hint = typing.get_type_hints(RunConfig)[name]
    args = typing.get_args(hint)
    optional = type(None) in args
    base = next((a for a in args if a is not type(None)), hint) if args else hint
    if value is None and optional:
        return None
    if base is bool:
        if isinstance(value, bool):
            return value
    elif base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif base is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
    elif base is str:
        if name == "index_base" and isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, str):
            return value
    raise InputError(f"{source}: {name} must be {base.__name__}; got {value!r}")


def load_toml(path: str) -> dict:
    """Settings from a TOML file, keys normalised to field names and values type-checked."""
    if os.path.isdir(path):
        raise InputError(f"config file {path!r} is a directory, not a TOML file")
    if not os.path.isfile(path):
        raise InputError(f"config file {path!r} does not exist" if not os.path.exists(path)
                         else f"config file {path!r} is not a regular file")
    try:
        with open(path, "rb") as fh:
            raw = tomllib.load(fh)
    except OSError as exc:
        raise InputError(f"cannot read config file {path!r}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:           # TOML is UTF-8; tomllib decodes before it parses
        raise InputError(f"config file {path!r} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
                         f"offset {exc.start}); TOML files must be UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"config file {path!r} is not valid TOML: {exc}") from None
    table = raw.get("run", raw)
    if not isinstance(table, dict):
        raise InputError(f"{path}: [run] must be a table")
    others = sorted(key for key in raw if key != "run") if "run" in raw else []
    if others:                            # they would be ignored: settings go in one place
        raise InputError(f"{path}: {', '.join(others)} outside [run]; put every setting in [run] or every one "
                         f"at the top level")
    out = {}
    for key, value in table.items():
        if isinstance(value, dict):
            if key == "run":
                continue
            raise InputError(f"{path}: unexpected table [{key}]; put settings at the top level or in [run]")
        name = key.replace("-", "_")
        if name == "passes" and value == "auto":
            continue                      # the default
        if name == "ridge" and value == "auto":
            out[name] = None
            continue
        if name == "resume":
            raise InputError(f"{path}: resume is the --resume DIR flag, not a setting")
        if name not in FIELD_TYPES:
            known = ", ".join(sorted(FIELD_TYPES))
            raise InputError(f"{path}: unknown setting {key!r} (known: {known})")
        out[name] = _coerce(name, value, path)
    base = os.path.dirname(os.path.abspath(path))
    for name in ("data", "test_data"):
        if isinstance(out.get(name), str) and not os.path.isabs(out[name]):
            candidate = os.path.join(base, out[name])
            if os.path.exists(candidate):
                out[name] = candidate
    return out


def build_config(file_settings: dict, flag_settings: dict) -> RunConfig:
    merged = {**file_settings, **flag_settings}
    return RunConfig(**merged).validated()
