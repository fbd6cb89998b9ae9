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
