"""A replica's Datasette and CLI on a copy Litestream followed (the session's
replica of the vault brain): they read it, never write it, and say why."""

import hashlib
import threading

import pytest
from datasette.app import Datasette

import brain_sql

from .conftest import write


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.asyncio
async def test_a_replica_never_writes_its_copy(vault_replica_path, vault_brain_path, run, tmp_path):
    before = _digest(vault_replica_path)
    metadata = {"plugins": {"datasette-brain": {"allow_write": True}}}
    datasette = Datasette([str(vault_replica_path)], metadata=metadata)
    db = datasette.get_database("brain")
    with pytest.raises(Exception, match="readonly"):  # even Datasette's own write connection is query_only
        await db.execute_write("update knowledge set title = 'changed'", block=True)
    for action in ("insert-row", "update-row", "delete-row", "create-table", "drop-table", "alter-table"):
        assert await datasette.permission_allowed({"id": "root"}, action, ("brain", "knowledge"), default=True) is False
    writes = [("/brain/-/remember", {"text": "A memory a replica cannot keep."}), ("/brain/-/forget", {"ids": [1]})]
    for path, body in writes:
        refused = await datasette.client.post(path, json=body)
        assert refused.status_code == 403 and "read-only replica" in refused.json()["error"], refused.text
    page = await datasette.client.get("/brain/-/decayed")
    assert "read-only replica" in page.text and 'name="action"' not in page.text
    status = (await datasette.client.get("/brain/-/replica")).json()
    assert status["replica"] is True and status["primary"] is None and status["state"] == "stopped"
    frozen = await Datasette(immutables=[str(vault_replica_path)]).client.get("/brain/-/replica")
    assert "immutable" in frozen.json()["message"]  # it would never see a change: said, not silent
    note = write(tmp_path / "new.jsonl", '{"text": "A memory a replica cannot keep."}')
    refused = run("brain", "remember", vault_replica_path, note)
    assert refused.exit_code != 0 and "read-only replica" in refused.output, refused.output
    assert "Graph Leg" in run("brain", "recall", vault_replica_path, "graph leg").output
    # its export, over HTTP and from the CLI, is its primary's (a copy of the vault brain); its listing reads it
    primary = brain_sql.connect(vault_brain_path, read_only=True)
    exported = "".join(brain_sql.export(primary))
    primary.close()
    assert (await datasette.client.get("/brain/-/export.jsonl")).text == exported
    assert run("brain", "export", vault_replica_path).stdout == exported
    assert len((await datasette.client.get("/brain/-/memories.json?size=3")).json()["memories"]) == 3
    conn = brain_sql.connect(vault_replica_path)
    assert conn.execute("pragma query_only").fetchone()[0] == 1 and brain_sql.check(conn) == {}
    conn.close()
    assert _digest(vault_replica_path) == before
    assert not list(vault_replica_path.parent.glob("brain.db-wal"))  # never opened in WAL mode


@pytest.mark.parametrize("url", ["ftp://x/y", "notaurl", "s3://", "file:///", "http://[::1"])
def test_a_replica_url_litestream_cannot_read_is_refused_at_once(tmp_path, url):
    """follow (and replicate) with a URL of a scheme Litestream does not read, or
    naming no bucket or path: an InputError naming it before anything runs, not
    a follower that retries forever."""
    stop = threading.Event()
    timer = threading.Timer(10, stop.set)  # were it to retry, the test ends anyway
    timer.start()
    try:
        with pytest.raises(brain_sql.InputError, match="replica URL|names no"):
            brain_sql.follow(url, tmp_path / "copy.db", stop=stop)
    finally:
        timer.cancel()
    assert not (tmp_path / "copy.db").exists()


def test_the_command_line_refuses_a_replica_url_litestream_cannot_read(run, tmp_path):
    """`brain follow ftp://x/y COPY` exits 2 at once, naming the URL."""
    result = run("brain", "follow", "ftp://x/y", tmp_path / "copy.db")
    assert result.exit_code == 2 and "'ftp://x/y' is no replica URL Litestream reads" in result.output, result.output


def test_the_command_line_refuses_to_follow_into_a_file_it_did_not_make(run, tmp_path):
    """`brain follow URL existing.db` is the caller's mistake: exit 2, naming the file; the file is untouched."""
    existing = tmp_path / "brain.db"
    assert run("brain", "init", existing).exit_code == 0
    before = existing.read_bytes()
    result = run("brain", "follow", (tmp_path / "store").as_uri(), existing)
    assert result.exit_code == 2 and "exists and is not a copy brain follow made" in result.output, result.output
    assert existing.read_bytes() == before
