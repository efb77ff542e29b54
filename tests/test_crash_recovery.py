"""Crash recovery: ingest killed mid-write leaves nothing half-written, and run
again converges to the uninterrupted result (bench/crash.py). `check` and its
repair are tested in test_cli_check.py."""

import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_killed_ingest_converges(tmp_path):
    """bench/crash.py with 2 kills; run it by hand for 20 or more."""
    script = Path(__file__).resolve().parent.parent / "bench" / "crash.py"
    result = subprocess.run(
        [sys.executable, str(script), "--kills", "2", "--records", "1500", "--work", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kills, 0 failed" in result.stdout
