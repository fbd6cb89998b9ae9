"""``python -m asyos.run --algorithm dfls``: the job, its files, and bad input."""
import csv
import json

import numpy as np
import pytest

from asyos.errors import InputError
from asyos.runs.run_dfls import parse_block
from test_cli import run

SMALL = ["--algorithm", "dfls", "--n-samples", "300", "--n-features", "20", "--n-informative", "5"]


def test_default_dfls_run_matches_the_optimum(tmp_path):
    rc, out, err = run(*SMALL, "--output", str(tmp_path))
    assert rc == 0, err
    assert "asyos dfls: add 4 of 20 features" in out
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["direction"] == "add" and len(record["block"]) == 4
    assert record["dfls"]["kkt_residual"] < 1e-8
    assert record["dfls"]["fallback"] is False
    assert record["reference"]["max_coef_difference"] < 1e-6
    assert record["dfls"]["test_rmse"] == pytest.approx(record["reference"]["test_rmse"], rel=1e-6)
    for key in ("retrain_cold", "retrain_warm"):
        assert record[key]["seconds"] > 0 and record[key]["max_coef_difference"] < 1e-3
    assert len(record["coef"]) == 20
    with open(tmp_path / "path.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][0] == "theta" and len(rows[0]) == 21
    thetas = np.array([float(r[0]) for r in rows[1:]])
    assert thetas[0] == 0.0 and thetas[-1] == 1.0
    # the path ends where the model is (standardized coefficients, the model's column order)
    last = np.array([float(v) for v in rows[-1][1:]])
    assert np.count_nonzero(last) == np.count_nonzero(record["coef"])
    assert (tmp_path / "path.png").stat().st_size > 1000


def test_removing_whole_groups_of_lp_and_group_lasso(tmp_path):
    rc, out, err = run(*SMALL, "--remove-features", "0-3,10", "--group-size", "2", "--param", "alpha=0.05",
                       "--output", str(tmp_path), "--quiet")
    assert rc == 0, err
    record = json.loads((tmp_path / "results.json").read_text())
    assert record["block"] == [0, 1, 2, 3, 10, 11]            # column 10's group is {10, 11}
    assert record["reference"]["max_coef_difference"] < 1e-6
    assert np.all(np.array(record["coef"])[record["block"]] == 0)
    rc, out, err = run(*SMALL, "--remove-features", "25%", "--param", "penalty=lp,alpha=0.5,exponent=6")
    assert rc == 0, err
    assert "lp (p = 6)" in out and "remove 5 of 20" in out


@pytest.mark.parametrize("args,message", [
    (["--add-features", "1", "--remove-features", "2"], "not both"),
    (["--add-features", "0-40"], "out of range"),
    (["--add-features", "120%"], "must be in"),
    (["--remove-features", "x"], "a list like 3,7-9"),
    (["--param", "penalty=ridge"], "The 'penalty' parameter of DFLS must be a str among"),
    (["--param", "penalty=lp,exponent=1"], "The 'exponent' parameter of DFLS must be a float in the range (1.0, inf)"),
    (["--param", "penalty=lp", "--group-size", "3"], "group lasso"),
    (["--param", "alpha=-1"], "alpha"),
    (["--synthetic", "classification"], "least squares"),
])
def test_bad_dfls_input_is_named(args, message):
    rc, out, err = run(*SMALL, *args)
    assert rc == 2
    assert message in err and "Traceback" not in err


def test_dfls_flags_belong_to_dfls():
    rc, out, err = run("--add-features", "3")
    assert rc == 2 and "--add-features applies to dynamic feature space" in err and "'os' does not take it" in err


def test_block_specifications():
    assert parse_block("3,7-9", 12, 0).tolist() == [3, 7, 8, 9]
    picked = parse_block("20%", 50, 1)
    assert picked.size == 10 and np.unique(picked).size == 10
    assert parse_block("20%", 50, 1).tolist() == picked.tolist()      # the seed decides
    assert parse_block("20%", 50, 2).tolist() != picked.tolist()
    with pytest.raises(InputError, match="every feature"):
        parse_block("0-4", 5, 0)
