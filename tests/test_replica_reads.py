"""A replica's Datasette and CLI on a copy Litestream followed (the session's
replica of the vault brain): they read it, never write it, and say why."""

import hashlib
import html
import json
import os
import sqlite3
import stat
import subprocess
import sys
import threading
import time

import pytest
from datasette.app import Datasette

import brain_sql

from .conftest import wait_for, write


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


@pytest.mark.asyncio
async def test_a_replica_url_s_credentials_are_never_shown(vault_replica_path, tmp_path):
    """A URL with a password and a key in its query (docs: any URL Litestream reads):
    the follower's status file, its messages and /-/replica show it without them,
    and the status file is readable by no more people than the copy."""
    copy = tmp_path / "brain.db"
    for suffix in ("", "-txid"):
        copy.with_name("brain.db" + suffix).write_bytes(vault_replica_path.with_name("brain.db" + suffix).read_bytes())
    os.chmod(copy, 0o600)
    url = "sftp://alice:S3cretPW@127.0.0.1:1/brain?key=AKIASECRETKEY"
    said, stop = [], threading.Event()
    timer = threading.Timer(3, stop.set)
    timer.start()
    try:
        brain_sql.follow(url, copy, stop=stop, say=said.append)
    finally:
        timer.cancel()
    status_file = tmp_path / "brain.db-follow"
    shown = [status_file.read_text(), *said]
    served = await Datasette([str(copy)]).client.get("/brain/-/replica")
    shown.append(served.text)
    assert said and not [text for text in shown if "S3cretPW" in text or "AKIASECRETKEY" in text], shown
    assert served.json()["follows"] == "sftp://***@127.0.0.1:1/brain?key=***"
    assert stat.S_IMODE(os.stat(status_file).st_mode) == 0o600


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "written",
    [
        {"updated_at": "x"},
        {"updated_at": 1e20, "applied_at": 1e20},
        {"updated_at": None, "head_txid": "a", "behind_since": "z", "state": 3, "message": ["m"], "url": 5},
        {"updated_at": float("nan"), "checked_at": True, "resume_until": "9"},
        ["not", "an", "object"],
    ],
)
async def test_a_status_file_with_values_not_understood_is_said_so_never_a_500(vault_replica_path, tmp_path, written):
    """A status file from another version, edited by hand, or of a clock far off:
    /-/replica and the recall page say it cannot be read, and what to do."""
    copy = tmp_path / "brain.db"
    for suffix in ("", "-txid"):
        copy.with_name("brain.db" + suffix).write_bytes(vault_replica_path.with_name("brain.db" + suffix).read_bytes())
    (tmp_path / "brain.db-follow").write_text(json.dumps(written))
    datasette = Datasette([str(copy)])
    status = await datasette.client.get("/brain/-/replica")
    assert status.status_code == 200, status.text
    assert status.json()["stalled"] is True and status.json()["state"] in ("unknown", "not running")
    if isinstance(written, dict) and written.get("updated_at") != None:  # noqa: E711
        assert "brain.db-follow" in status.json()["message"]
    page = await datasette.client.get("/brain/-/brain", params={"q": "graph leg"})
    assert page.status_code == 200, page.text


@pytest.mark.asyncio
@pytest.mark.parametrize("gone", ["silent", "dead"])
async def test_a_follower_gone_while_catching_up_is_named_not_try_again_in_a_moment(vault_replica_path, tmp_path, gone):
    """A follower killed while it replays what the copy held leaves it between two
    transactions: the replica says its follower stopped and what to run, not to
    try again in a moment (which would never come)."""
    copy = tmp_path / "brain.db"
    for suffix in ("", "-txid"):
        copy.with_name("brain.db" + suffix).write_bytes(vault_replica_path.with_name("brain.db" + suffix).read_bytes())
    dead = subprocess.Popen(["true"])
    dead.wait()
    txid = brain_sql.replica_status(copy)["applied"]["txid"]
    status = {"state": "resuming", "resume_until": txid + 5, "url": "file:///srv/store", "copy": str(copy)}
    status |= {"pid": dead.pid, "updated_at": time.time()} if gone == "dead" else {"pid": 1, "updated_at": 1.0}
    (tmp_path / "brain.db-follow").write_text(json.dumps(status))
    answer = await Datasette([str(copy)]).client.get("/brain/-/recall", params={"q": "graph leg"})
    assert answer.status_code == 503 and answer.headers["retry-after"], answer.text
    said = answer.json()["error"]
    assert "follower stopped" in said and "sqlite-utils brain follow file:///srv/store" in said and "moment" not in said


def test_a_second_follower_of_one_copy_is_refused_naming_the_first(tmp_path):
    """Two `brain follow` on one copy would both write its pages and set it back
    under each other: the second exits 2 at once, naming the first's pid."""
    copy, url = tmp_path / "r" / "brain.db", "file:///nonexistent/store"
    stop = threading.Event()
    first = threading.Thread(target=brain_sql.follow, args=(url, copy), kwargs={"stop": stop, "say": lambda _: None})
    first.start()
    try:
        wait_for(lambda: (tmp_path / "r" / "brain.db-follow").exists(), what="the first follower's status")
        second = subprocess.run(
            [sys.executable, "-m", "sqlite_utils", "brain", "follow", url, str(copy)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        stop.set()
        first.join()
    assert second.returncode == 2, second.stderr
    assert f"already followed by another brain follow (pid {os.getpid()})" in second.stderr


@pytest.mark.asyncio
async def test_a_damaged_replica_says_what_mends_it_there(vault_replica_path, tmp_path, run):
    """check --repair refuses on a replica (it is never written): a damaged copy's
    recall, over HTTP and the CLI, and that refusal say what works there instead —
    the copy made again from the store — not only to run check."""
    copy = tmp_path / "brain.db"
    for suffix in ("", "-txid"):
        copy.with_name("brain.db" + suffix).write_bytes(vault_replica_path.with_name("brain.db" + suffix).read_bytes())
    txid = (tmp_path / "brain.db-txid").read_text()
    (tmp_path / "brain.db-txid").unlink()
    conn = sqlite3.connect(copy)
    conn.execute("update knowledge set confidence = 'high' where id = (select min(id) from knowledge)")
    conn.commit()
    conn.close()
    (tmp_path / "brain.db-txid").write_text(txid)
    remade = "remove " + str(copy)
    answer = await Datasette([str(copy)]).client.get("/brain/-/recall", params={"q": "graph leg"})
    assert answer.status_code == 409 and remade in answer.json()["error"], answer.text
    page = await Datasette([str(copy)]).client.get("/brain/-/brain", params={"q": "graph leg"})
    assert remade in html.unescape(page.text)
    recalled = run("brain", "recall", copy, "graph leg")
    assert recalled.exit_code == 1 and remade in recalled.output, recalled.output
    repaired = run("brain", "check", copy, "--repair")
    assert repaired.exit_code != 0 and remade in repaired.output, repaired.output
    # a write to a sound copy says where to write, and no more: how a copy is mended was said to every
    # writer (review 152)
    sound = tmp_path / "sound" / "brain.db"
    sound.parent.mkdir()
    for suffix in ("", "-txid"):
        sound.with_name("brain.db" + suffix).write_bytes(vault_replica_path.with_name("brain.db" + suffix).read_bytes())
    remembered = run("brain", "remember", sound, write(tmp_path / "r.jsonl", '{"text": "a new memory"}\n'))
    assert remembered.exit_code != 0 and "write to its primary" in remembered.output, remembered.output
    assert remade not in remembered.output and "repair" not in remembered.output


def test_the_command_line_refuses_to_follow_into_a_file_it_did_not_make(run, tmp_path):
    """`brain follow URL existing.db` is the caller's mistake: exit 2, naming the file; the file is untouched."""
    existing = tmp_path / "brain.db"
    assert run("brain", "init", existing).exit_code == 0
    before = existing.read_bytes()
    result = run("brain", "follow", (tmp_path / "store").as_uri(), existing)
    assert result.exit_code == 2 and "exists and is not a copy brain follow made" in result.output, result.output
    assert existing.read_bytes() == before
