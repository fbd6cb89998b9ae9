"""The run's settings declared by family (``asyos.runs.options``): ``RunConfig``'s fields, the command line's
flags, ``--help`` and the checks all come from the one declaration."""
import dataclasses
import re

import pytest

from asyos.cli.run import make_parser
from asyos.errors import InputError
from asyos.learners.protocol.transports import TRANSPORT_NAMES
from asyos.runs.config import RunConfig
from asyos.runs.options import GROUPS, OPTIONS, TRANSPORTS, Option, Options, groups_for


def test_the_config_fields_are_the_declared_options_in_order():
    assert [f.name for f in dataclasses.fields(RunConfig)] == list(OPTIONS)
    assert {f.name: f.default for f in dataclasses.fields(RunConfig)} == {n: o.default for n, o in OPTIONS.items()}
    assert len({o.name for g in GROUPS for o in g.options}) == sum(len(g.options) for g in GROUPS)   # each once


def test_every_option_has_a_help_and_a_flag_that_sets_it():
    parser = make_parser(everything=True)
    dests = {a.dest: a for a in parser._actions}
    for option in OPTIONS.values():
        assert option.help, option.name
        assert option.name in dests, f"{option.name} has no flag"
    assert dests["resume"].option_strings == ["--resume"]           # its own flag: a directory, not a bool


VALUES = {int: "3", float: "0.5", str: "x"}


@pytest.mark.parametrize("name", [n for n, o in OPTIONS.items() if o.flag and o.kind in (int, float)
                                  and not o.counted])
def test_each_numeric_flag_parses_into_its_field(name):
    option = OPTIONS[name]
    args = vars(make_parser().parse_args([option.option, VALUES[option.kind]]))
    assert args == {name: option.kind(VALUES[option.kind])}


def test_boolean_and_counted_flags():
    parse = lambda *argv: vars(make_parser().parse_args(list(argv)))       # noqa: E731
    assert parse("--no-intercept", "--no-refit", "--no-picture") == {"fit_intercept": False, "refit": False,
                                                                     "picture": False}
    assert parse("-q", "--simulate", "--tune") == {"quiet": True, "simulate": True, "tune": True}
    assert parse("-vv") == {"verbose": 2}
    assert parse("--passes", "auto", "--ridge", "auto") == {"passes": None, "ridge": None}


BAD = [(name, value) for name, option in OPTIONS.items()
       for value in ([option.at_least - 1] if option.at_least is not None else [])
       + ([option.above] if option.above is not None else [])
       + (["no-such-choice"] if option.choices is not None else [])]


@pytest.mark.parametrize("name, value", BAD, ids=[f"{n}={v}" for n, v in BAD])
def test_each_declared_constraint_refuses_a_bad_value_by_its_flag(name, value):
    with pytest.raises(InputError, match=OPTIONS[name].option):
        RunConfig(**{name: value}).validated()


def test_a_non_finite_number_is_refused_for_every_float_option():
    for name, option in OPTIONS.items():
        if option.kind is float:
            with pytest.raises(InputError, match="finite"):
                RunConfig(**{name: float("nan")}).validated()


def test_a_family_rule_refuses_a_combination():
    with pytest.raises(InputError, match="--cap goes with --budget-mode global"):
        RunConfig(cap=3, budget_mode="split").validated()
    with pytest.raises(InputError, match="--group-size applies to dynamic feature space .*; 'os' does not take it"):
        RunConfig(group_size=2).validated()
    RunConfig(algorithm="dfls", group_size=2).validated()


def test_the_option_class_words_its_bounds():
    assert Option("k", int, at_least=1).problem(0) == "--k must be at least 1; got 0"
    assert Option("k", int, at_least=0).problem(-1) == "--k must be >= 0; got -1"
    assert Option("t", float, above=0).problem(0.0) == "--t must be > 0; got 0.0"
    assert Option("m", str, choices=("a", "b")).problem("c") == "unknown --m 'c'; choose one of: a, b"
    assert Option("m", str, choices=("a", "b")).problem(None) is None


def _listed(*argv):
    """The flags ``--help`` lists (an option line of its own) for ``make_parser(*argv)``."""
    text = make_parser(*argv).format_help()
    return set(re.findall(r"^  (?:-\w, )?(--[\w-]+)", text, re.M))


def test_help_shows_the_common_options_and_says_how_to_see_a_familys():
    common = _listed()
    assert {"--budget", "--output", "--help-algorithm", "--help-all"} <= common
    assert not {"--max-staleness", "--variant", "--tune", "--add-features"} & common
    assert len(common) <= 35
    substitution = _listed("substitution")
    assert {"--variant", "--max-staleness"} <= substitution and "--add-features" not in substitution
    stream = _listed("stream")
    assert {"--tune", "--max-staleness"} <= stream and "--variant" not in stream
    assert "--add-features" in _listed("path") and "--max-staleness" not in _listed("averages")
    assert {o.option for o in OPTIONS.values() if o.flag} <= _listed(None, True)


def test_help_algorithm_prints_the_family_and_exits(capsys):
    with pytest.raises(SystemExit) as exit_:
        make_parser().parse_args(["--help-algorithm", "b-arda"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "\n  --tune" in out and "\n  --variant" not in out
    with pytest.raises(InputError, match="unknown algorithm"):
        make_parser().parse_args(["--help-algorithm", "nope"])


def test_groups_for_a_family():
    assert [g.key for g in groups_for("substitution")] == ["run", "data", "model", "output", "substitution",
                                                           "parallel"]
    assert [g.key for g in groups_for("averages")] == ["run", "data", "model", "output", "stream"]
    assert all(isinstance(g, Options) for g in groups_for(None)) and len(groups_for(None)) == len(GROUPS)


def test_transports_are_named_once():
    from asyos.learners.substitution.asy_os import TRANSPORTS as SIMULATED
    from asyos.runs.mpi_run import TRANSPORTS as CLASSES
    assert tuple(CLASSES) == TRANSPORT_NAMES                   # a class under MPI for each, in the same order
    assert SIMULATED == TRANSPORT_NAMES
    assert TRANSPORTS == ("auto",) + TRANSPORT_NAMES
