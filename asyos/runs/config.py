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
import os
import sys
import typing
from dataclasses import fields
from typing import Optional

from ..errors import InputError
from .options import OPTIONS, check as check_options

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_N_FEATURES = 2000
DEFAULT_N_INFORMATIVE = 100
DEFAULT_SIMULATED_WORKERS = 4


class _Settings:
    """What ``RunConfig`` computes from its fields (its fields are ``asyos.runs.options``' declarations)."""

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
        """Checks that need no data (``asyos.runs.options.check``: each option's own, then each family's
        rules); raise ``InputError`` naming the bad setting."""
        check_options(self)
        return self


def _annotation(option):
    return Optional[option.kind] if option.optional else option.kind


RunConfig = dataclasses.make_dataclass(
    "RunConfig", [(o.name, _annotation(o), dataclasses.field(default=o.default)) for o in OPTIONS.values()],
    bases=(_Settings,), frozen=True)
RunConfig.__module__ = __name__               # pickled with the checkpoints: found here by name
RunConfig.__doc__ = """Everything a run needs, a frozen dataclass whose fields are the options declared by family in
``asyos.runs.options`` (the common core, then OS / Asy-OS, parallel execution, sample stream, DFLS)."""


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
