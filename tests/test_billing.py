"""The bill covers the process: a real run timed from outside, as /usr/bin/time would,
against what its summary and its billing ledger say it billed."""

import json
import subprocess
import sys
import time

import pytest
from conftest import PATIENCE_SECONDS, ROOT, tiny_flags
from processes import MAIN, env_for

# Python's own start before app/main.py's first line, and the exit after the summary.
UNBILLABLE_SECONDS = 1.0


def test_the_bill_covers_the_process_from_outside_and_the_ledger_agrees(digits_dir, tmp_path):
    """Before, the ledger closed before the summary was made and the frameworks' teardown
    followed it: 1.8-5.4 s of a 15 s process were on no bill."""
    logdir = tmp_path / "run"
    began = time.time()
    done = subprocess.run([sys.executable, MAIN, *tiny_flags(digits_dir, logdir)], cwd=ROOT,
                          env=env_for(), capture_output=True, text=True,
                          timeout=PATIENCE_SECONDS)
    outside = time.time() - began
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((logdir / "summary.json").read_text())
    assert outside - UNBILLABLE_SECONDS <= summary["billed_seconds"] <= outside
    (attempt,) = json.loads((logdir / "billing.json").read_text())["attempts"]
    assert attempt["last_seen"] - attempt["started_at"] == pytest.approx(
        summary["billed_seconds"], abs=0.01)  # one end for the ledger and the summary
    assert summary["wall_seconds"] == summary["billed_seconds"]  # one attempt, no pause
    assert summary["projected_cost_usd"] == summary["cost_usd"]  # at the end: the cost
