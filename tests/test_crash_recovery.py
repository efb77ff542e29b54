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


@pytest.mark.slow
def test_an_ingest_stopped_with_ctrl_c_says_what_is_stored_and_how_to_finish(tmp_path):
    """Ctrl-C said only "Aborted!", and check then named unfinished mention matching
    without saying what to do (review 102 L7). It says what is stored and to run the
    ingest again, which finishes it: the brain is then whole."""
    import json
    import signal
    import time

    records = tmp_path / "r.jsonl"
    records.write_text(
        "".join(
            json.dumps({"_id": f"r{i}", "text": f"Note {i} about Project Falcon {i % 97}."}) + "\n"
            for i in range(30_000)
        )
    )
    brain = tmp_path / "brain.db"
    command = [sys.executable, "-m", "sqlite_utils", "brain", "ingest", str(brain), str(records)]
    running = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (brain.with_name("brain.db-wal").exists() and running.poll() is None):
        time.sleep(0.05)
    time.sleep(1.5)  # into its first transactions
    running.send_signal(signal.SIGINT)
    _, stderr = running.communicate(timeout=120)
    if running.returncode == 0:
        pytest.skip("the ingest ended before it was stopped")
    assert running.returncode == 130 and "Traceback" not in stderr, stderr
    assert "run the same ingest again to finish" in stderr
    again = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    check = subprocess.run(
        [sys.executable, "-m", "sqlite_utils", "brain", "check", str(brain)], capture_output=True, text=True
    )
    assert check.returncode == 0 and check.stdout.endswith(": consistent\n"), check.stdout + check.stderr
