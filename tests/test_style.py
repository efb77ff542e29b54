"""The style the project keeps: ruff's formatter and linter over every Python file, with
the rules and limits pyproject.toml sets (pyflakes, pycodestyle, import order, bugbear,
complexity). A change that drifts from them fails here, as it fails in CI."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def ruff(*args):
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_is_installed_by_the_test_extra():
    version = ruff("--version")
    assert version.returncode == 0, version.stderr


def test_every_file_is_formatted():
    result = ruff("format", "--check", ".")
    assert result.returncode == 0, f"run `ruff format .`:\n{result.stdout}{result.stderr}"


def test_the_linter_finds_nothing():
    result = ruff("check", "--output-format", "concise", ".")
    assert result.returncode == 0, f"ruff check:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize(
    "source, rule",
    [
        ("import os\n", "F401"),  # pyflakes: an unused import
        ("import sys\nimport os\n\nprint(os, sys)\n", "I001"),  # import order
        ("def f(x=[]):\n    return x\n", "B006"),  # bugbear: a mutable default
        ("x = '" + "a" * 130 + "'\n", "E501"),  # a line over 120 characters
    ],
)
def test_the_rules_are_the_ones_configured(tmp_path, source, rule):
    """The configuration is read and its rules are on: each sample breaks one of them."""
    sample = ROOT / "tests" / f"_style_sample_{rule}.py"
    try:
        sample.write_text(source)
        result = ruff("check", "--output-format", "concise", str(sample.relative_to(ROOT)))
    finally:
        sample.unlink()
    assert rule in result.stdout, result.stdout


def test_complexity_is_bounded():
    branches = "".join(f"    if x == {n}:\n        return {n}\n" for n in range(20))
    sample = ROOT / "tests" / "_style_sample_C901.py"
    try:
        sample.write_text(f"def f(x):\n{branches}    return -1\n")
        result = ruff("check", "--output-format", "concise", str(sample.relative_to(ROOT)))
    finally:
        sample.unlink()
    assert "C901" in result.stdout, result.stdout
