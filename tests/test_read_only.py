"""A brain that cannot be written — a read-only file in a read-only folder, as on
a read-only filesystem: recall, check and pages work; every write says the file
is read-only, and nothing changes. The file is made immutable (chattr +i), which
holds even for root; where that is not possible the tests are skipped."""

import contextlib
import subprocess

import pytest
from click.testing import CliRunner
from datasette.app import Datasette
from datasette.cli import cli

import brain_sql

from .conftest import copy_brain, fingerprint, write


def _chattr(flag, *paths):
    return subprocess.run(["chattr", flag, *map(str, paths)], capture_output=True).returncode == 0


DECAYED = [{"_id": "old", "title": "Old pager rota", "text": "The 2024 pager rota.", "expires_at": "2025-01-01"}]


@contextlib.contextmanager
def _immutable(*paths):
    if not _chattr("+i", *paths):
        pytest.skip("chattr +i is not possible here")
    try:
        with pytest.raises(OSError):
            paths[0].open("ab").close()
        yield
    finally:
        _chattr("-i", *paths)


@pytest.fixture
def frozen(vault_brain_path, tmp_path):
    path = copy_brain(vault_brain_path, tmp_path / "frozen" / "brain.db")
    with _immutable(path, path.parent):
        yield path


@pytest.fixture
def frozen_file(vault_brain_path, tmp_path):
    """Only the file read-only, in a folder that can be written (SQLite makes its
    -shm and -wal files there, so Datasette can serve it without -i)."""
    path = copy_brain(vault_brain_path, tmp_path / "frozen" / "brain.db", DECAYED)
    with _immutable(path):
        yield path


def test_recall_works_and_writes_say_read_only(frozen):
    conn = brain_sql.connect(frozen)
    before = fingerprint(conn)
    result = brain_sql.recall(conn, {"q": "How does the graph leg rank memories?"})
    assert result["decision"] == "ok" and result["hits"]
    with pytest.raises(brain_sql.ReadOnlyBrain, match="read-only"):
        brain_sql.remember(conn, [{"title": "New", "text": "A memory that cannot be stored."}])
    assert brain_sql.check(conn) == {}
    assert fingerprint(conn) == before


def test_cli_writes_fail_clearly_and_reads_work(frozen, run, tmp_path):
    note = write(tmp_path / "notes" / "New.md", "# New\n\nA note that cannot be stored.\n")
    for command in (
        ["ingest", frozen, note.parent],
        ["reindex", "--model", "wordllama/l2_supercat", frozen],
        ["check", "--repair", frozen],
    ):
        result = run("brain", *command)
        if command[0] == "check":  # nothing to repair: a consistent read-only brain
            assert result.exit_code == 0 and "consistent" in result.output, result.output
        else:
            assert result.exit_code != 0 and "read-only" in result.output, (command, result.output)
            assert "Traceback" not in result.output
    result = run("brain", "recall", frozen, "graph leg")
    assert result.exit_code == 0 and "Graph Leg" in result.output, result.output


def test_served_writable_from_a_read_only_folder_it_says_to_serve_it_immutable(frozen):
    """Review 95: `datasette serve` of a brain whose folder cannot be written (SQLite
    makes the -wal and -shm files there) stopped with a traceback from the plugin's start."""
    result = CliRunner().invoke(cli, ["serve", str(frozen), "--get", "/brain.json"])
    assert result.exit_code == 2, result.output
    assert f"Serve it immutable instead: datasette -i {frozen}" in result.output and "Traceback" not in result.output
    result = CliRunner().invoke(cli, ["serve", "-i", str(frozen), "--get", "/brain/knowledge.json?_size=1"])
    assert result.exit_code == 0 and '"rows"' in result.output, result.output


@pytest.mark.asyncio
async def test_served_immutable_it_recalls_and_refuses_writes(frozen):
    datasette = Datasette(immutables=[str(frozen)])
    response = await datasette.client.post("/brain/-/recall", json={"q": "graph leg"})
    assert response.status_code == 200 and response.json()["hits"]
    page = await datasette.client.get("/brain/-/recall?q=graph+leg")
    assert page.status_code == 200 and "Graph Leg" in page.text


@pytest.mark.asyncio
async def test_the_decayed_page_offers_no_decisions_and_says_why_once(frozen_file):
    write = {"plugins": {"datasette-brain": {"allow_write": {"id": "keeper"}}}}
    conn = brain_sql.connect(frozen_file)
    before = fingerprint(conn)
    target = conn.execute("select id from knowledge where external_id = 'old'").fetchone()[0]
    for datasette, why in [
        (Datasette(immutables=[str(frozen_file)], metadata=write), "served immutable (datasette -i)"),
        (Datasette([str(frozen_file)], metadata=write), "is read-only"),
    ]:
        keeper = {"ds_actor": datasette.sign({"a": {"id": "keeper"}}, "actor")}
        page = await datasette.client.get("/brain/-/decayed", cookies=keeper)
        assert page.status_code == 200 and "Old pager rota" in page.text
        assert "/-/decayed/act" not in page.text and 'value="archive"' not in page.text
        assert page.text.count(why) == 1 and "brain-write permission" not in page.text
        token = page.cookies.get("ds_csrftoken")
        refused = await datasette.client.post(
            "/brain/-/decayed/act",
            cookies={**keeper, "ds_csrftoken": token},
            data={"csrftoken": token, "id": str(target), "action": "archive"},
        )
        assert refused.status_code == 403 and why in refused.text
    assert fingerprint(conn) == before
