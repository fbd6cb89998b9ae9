import os

import pytest

from asyos.runs.config import RunConfig, build_config, load_toml
from asyos.errors import InputError
from asyos.runs.problem import open_data_source, resolve_problem

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(REPO, "cluster_configs")


def resolved(config):
    source = open_data_source(config)
    problem = resolve_problem(config, source, source.labels("train"))
    return source, problem


def test_default_toml_is_the_embedded_default():
    from_file = build_config(load_toml(os.path.join(CONFIGS, "default.toml")), {})
    embedded = RunConfig()
    (sf, pf), (se, pe) = resolved(from_file), resolved(embedded)
    assert (sf.name, sf.n_test_samples) == (se.name, se.n_test_samples)   # effective n, p, s, noise, seed
    assert (pf.budget, pf.loss.name, pf.n_samples) == (pe.budget, pe.loss.name, pe.n_samples) == (100, "squared", 1316)
    assert from_file.feature_passes == embedded.feature_passes == "auto"
    for name in ("algorithm", "variant", "fit_intercept", "scale", "step_divisor", "decrease_check",
                 "decrease_constant", "refit", "seed", "watchdog_timeout"):
        assert getattr(from_file, name) == getattr(embedded, name), name
    assert from_file.resolved_sharding == embedded.resolved_sharding == "blocked"   # a synthetic problem's


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(CONFIGS) if f.endswith(".toml")))
def test_every_shipped_config_loads_and_resolves(name):
    config = build_config(load_toml(os.path.join(CONFIGS, name)), {})
    source, problem = resolved(config)
    assert problem.budget <= source.n_features


def test_flags_override_the_file(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('budget = 7\nn-features = 50\nn_informative = 7\npasses = 2\n')
    config = build_config(load_toml(str(path)), {"passes": 4})
    assert (config.budget, config.n_features, config.passes) == (7, 50, 4)


@pytest.mark.parametrize("text, message", [
    ("budget = 2.5\n", "budget must be int"), ("bugdet = 3\n", "unknown setting 'bugdet'"),
    ("budget = \n", "not valid TOML"), ("[other]\nx = 1\n", "unexpected table"),
    ("loss = 'hinge'\n", "hinge loss is not smooth"), ("passes = 0\n", "passes must be at least 1"),
    ("algorithm = 'grafting'\n", "unknown algorithm 'grafting'"),
    ("n_informative = 30\nn_features = 20\n", "larger than --n-features")])
def test_bad_config_files_are_named(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=message):
        build_config(load_toml(str(path)), {})


def test_missing_config_file():
    with pytest.raises(InputError, match="does not exist"):
        load_toml("/nonexistent/x.toml")


def test_data_flags_that_do_not_fit():
    with pytest.raises(InputError, match="--n-informative describes a synthetic problem"):
        open_data_source(RunConfig(data=REPO, n_informative=3))
    with pytest.raises(InputError, match="--budget is required with --data"):
        import numpy as np
        resolve_problem(RunConfig(data="x"), type("S", (), {"n_features": 5, "name": "x"})(), np.zeros(3))


@pytest.mark.parametrize("flag", ["--step-divisor", "--watchdog-timeout", "--noise", "--slack"])
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_non_finite_numbers_are_refused(flag, value):
    with pytest.raises(InputError, match=f"{flag} must be a finite number"):
        build_config({}, {flag[2:].replace("-", "_"): float(value)})


@pytest.mark.parametrize("text, name", [("budget = 5\n[run]\npasses = 2\n", "budget"),
                                        ("[run]\npasses = 2\n[extra]\nx = 1\n", "extra")])
def test_settings_outside_the_run_table_are_refused_not_ignored(tmp_path, text, name):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=f"{name} outside \\[run\\]"):
        load_toml(str(path))


def test_a_config_file_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "latin1.toml"
    path.write_bytes(b"budget = 5\n# caf\xe9\n")
    with pytest.raises(InputError, match="latin1.toml' is not UTF-8 text \\(byte 0xe9 at offset 16\\)"):
        load_toml(str(path))


def test_a_config_path_that_is_a_directory_is_named(tmp_path):
    with pytest.raises(InputError, match="is a directory, not a TOML file"):
        load_toml(str(tmp_path))


def test_overwrite_goes_with_output(tmp_path):
    with pytest.raises(InputError, match="--overwrite goes with --output"):
        build_config({}, {"overwrite": True})
    path = tmp_path / "c.toml"
    path.write_text("overwrite = true\noutput = 'out'\n")
    assert build_config(load_toml(str(path)), {}).overwrite is True
    assert RunConfig().overwrite is False
