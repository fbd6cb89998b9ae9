"""Every benchmark runs in its --quick profile, so none can rot unnoticed."""
import json
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

BENCHMARKS = sorted(f for f in os.listdir(os.path.join(REPO, "benchmarks")) if f.startswith("bench_"))


@pytest.mark.parametrize("script", BENCHMARKS)
def test_quick_profile_writes_its_results(script, tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(REPO, "benchmarks", script), "--quick", "--output",
                           str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    name = script[len("bench_"):-len(".py")]
    summary = json.loads((tmp_path / f"{name}.json").read_text())
    assert summary["units"] and summary["environment"]["cpu_count"]
    lines = (tmp_path / f"{name}.jsonl").read_text().splitlines()
    assert len(lines) == len(summary["units"]) + 1          # the start record, then one line per unit
    assert "-" * 3 in proc.stdout                           # a table was printed


def test_the_real_data_benchmark_rebuilds_its_report_from_its_logs(tmp_path):
    """``--summarise`` merges JSON-lines logs (a later unit replaces the same set, k, method and fold)
    into the same tables and summary a run prints."""
    script = os.path.join(REPO, "benchmarks", "bench_real_selection.py")
    first = tmp_path / "first"
    proc = subprocess.run([sys.executable, script, "--quick", "--methods", "os,kbest+refit", "--output", str(first)],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    merged = tmp_path / "merged"
    proc = subprocess.run([sys.executable, script, "--quick", "--output", str(merged), "--summarise",
                           str(first / "real_selection.jsonl"), str(first / "real_selection.jsonl")],
                          capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    original = json.loads((first / "real_selection.json").read_text())["summary"]["datasets"]
    rebuilt = json.loads((merged / "real_selection.json").read_text())
    assert len(rebuilt["units"]) == len(json.loads((first / "real_selection.json").read_text())["units"])
    for name, entry in original.items():
        for k, result in entry["results"].items():
            for method, cell in result["methods"].items():
                assert rebuilt["summary"]["datasets"][name]["results"][k]["methods"][method]["mean"] == cell["mean"]
    assert "gap = method - best peer" in proc.stdout
