import asyncio
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlite_utils.cli import cli

import brain_sql
from datasette_brain import tools

VAULT = Path(__file__).parent.parent / "docs" / "vault"
SLOW = "slow: run with --run-slow"


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False, help="also run the tests marked slow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason=SLOW)
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def run():
    """Run `sqlite-utils ...` in-process; returns click's Result."""

    def invoke(*args):
        return CliRunner().invoke(cli, [str(a) for a in args])

    return invoke


@pytest.fixture
def db_path(tmp_path):
    return tmp_path / "brain.db"


@pytest.fixture
def conn(db_path):
    connection = brain_sql.connect(db_path)
    brain_sql.migrate(connection)
    yield connection
    connection.close()


def rows(conn, sql, params=()):
    return [tuple(r) for r in conn.execute(sql, params).fetchall()]


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def edges(conn):
    """{(from name, relation, to name)} of every relationship."""
    return set(
        rows(
            conn,
            "select f.name, r.relation_type, t.name from relationships r "
            "join entities f on f.id = r.from_entity_id join entities t on t.id = r.to_entity_id",
        )
    )


def snapshot(conn):
    """Everything a user stored or recall reads, for comparing states."""
    return {
        "knowledge": rows(conn, "select * from knowledge order by id"),
        "fts": rows(conn, "select rowid, title, content from knowledge_fts order by rowid"),
        "vectors": rows(
            conn,
            "select knowledge_id, embedding_int8, embedding_bit, scope, class from vec_knowledge order by knowledge_id",
        ),
        "entities": rows(conn, "select id, name, entity_type from entities order by id"),
        "relationships": rows(
            conn,
            (
                "select id, from_entity_id, to_entity_id, relation_type, knowledge_id, document_id from relationships "
                "order by id"
            ),
        ),
        "documents": rows(conn, "select document_id, content_hash, entity_id from documents order by document_id"),
    }


def without_rules(conn, ids=False):
    """Drop the triggers that refuse values the brain's rules forbid (m015), and with
    `ids` those refusing ids past the bound (m017): a brain written before them, or
    by a tool that dropped them, may hold such values."""
    for (name,) in conn.execute("select name from sqlite_master where name glob 'brain_rules_*'").fetchall():
        if ids or "_id_" not in name:
            conn.execute(f"drop trigger [{name}]")


def close_brain(conn):
    """Close `conn` with its WAL checkpointed, so the .db file alone holds the brain."""
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()


def copy_brain(source, path, records=()):
    """A private copy at `path` of the closed brain file `source`, with `records`
    ingested into it; returns path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(source, path)
    if records:
        records_file = write(path.parent / f"{path.stem}-records.jsonl", "\n".join(json.dumps(r) for r in records))
        conn = brain_sql.connect(path)
        brain_sql.ingest(conn, [records_file])
        close_brain(conn)
    return path


def fingerprint(conn):
    """snapshot() with the brain's meta and schema: any write changes it."""
    return {
        **snapshot(conn),
        "meta": rows(conn, "select key, value from brain_meta order by key"),
        "schema": rows(conn, "select type, name, sql from sqlite_master order by name"),
    }


@pytest.fixture(scope="session")
def vault_brain_path(tmp_path_factory):
    """The docs vault ingested once per session, at brain.db (Datasette's `brain`).
    Shared: read it, never write it; a test that writes takes `vault_brain_copy`."""
    path = tmp_path_factory.mktemp("vault") / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [VAULT])
    before = fingerprint(conn)
    close_brain(conn)
    yield path
    conn = brain_sql.connect(path)
    after = fingerprint(conn)
    conn.close()
    assert after == before, "a test wrote to the shared vault brain: give it vault_brain_copy"


def model_folder(folder, vectors):
    """An installed model2vec model saved in `folder` (its path as text): the default
    model's tokenizer with `vectors(the default's vectors)`, so another model that
    loads offline (cut short: another width; negated: as wide, other vectors)."""
    import numpy as np
    from model2vec import StaticModel

    from brain_sql.embed import get_model

    base = get_model("wordllama/l2_supercat")
    StaticModel(
        vectors=np.ascontiguousarray(vectors(base.embedding)), tokenizer=base.tokenizer, normalize=True
    ).save_pretrained(str(folder))
    return str(folder)


@pytest.fixture(scope="session")
def narrow_model(tmp_path_factory):
    """An installed model (a model2vec folder) of another width (128) than the
    default's (256): the default's vectors cut short."""
    return model_folder(tmp_path_factory.mktemp("model128"), lambda vectors: vectors[:, :128])


@pytest.fixture
def vault_brain_copy(vault_brain_path, tmp_path):
    """A private, writable copy of the session's vault brain."""
    return copy_brain(vault_brain_path, tmp_path / "vault" / "brain.db")


@contextlib.asynccontextmanager
async def read_slots_taken(datasette, monkeypatch, database="brain"):
    """Every read slot of `datasette` (for recalls and listings: one fewer than its
    SQL threads) held by a read that waits until the block ends; another read
    waits 0.05 s for one."""
    monkeypatch.setattr(tools, "RECALL_WAIT_SECONDS", 0.05)
    inside, release = threading.Event(), threading.Event()

    def hold(conn):
        inside.set()
        release.wait(30)

    holder = asyncio.ensure_future(tools.run_read(datasette, datasette.get_database(database), hold))
    while not inside.is_set():
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        release.set()
        await holder


async def warmed(datasette):
    """`datasette` once its startup hooks ran and the plugin's background warm-up
    (model and read state) finished: for tests that time requests."""
    await datasette.invoke_startup()
    for thread in threading.enumerate():
        if thread.name.startswith("brain-warm"):
            thread.join()
    return datasette


@contextlib.contextmanager
def datasette_server(*args, cwd=None, log=subprocess.DEVNULL):
    """`python -m datasette *args` on a free loopback port, once it answers; yields
    its base URL and stops it after. Its output goes to `log` (a file), if given."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "datasette", *map(str, args), "-h", "127.0.0.1", "-p", str(port)],
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(base + "/-/versions.json", timeout=1)
                break
            except OSError:
                time.sleep(0.1)
        yield base
    finally:
        process.terminate()
        process.wait(10)


def wait_for(check, seconds=60, every=0.1, what="the condition"):
    """check()'s first truthy value, polled until `seconds` have passed (a bound
    on waiting, not a timing the test asserts)."""
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {seconds} s")
        time.sleep(every)


@contextlib.contextmanager
def in_thread(operation, *args, **kwargs):
    """Run brain_sql.replicate or brain_sql.follow in a thread until the block ends."""
    stop = threading.Event()
    thread = threading.Thread(
        target=operation, args=args, kwargs={**kwargs, "stop": stop, "say": lambda line: None}, daemon=True
    )
    thread.start()
    try:
        yield thread
    finally:
        stop.set()
        thread.join(60)


def replica_of(primary, folder, records=()):
    """A copy at `folder`/brain.db that Litestream's follower made of the brain file
    `primary` (through a file:// replica in `folder`/store), with `records`
    remembered on the primary while it was followed; the follower stopped."""
    url, copy = (folder / "store").as_uri(), folder / "replica" / "brain.db"
    with in_thread(brain_sql.replicate, primary, url):
        wait_for(lambda: list((folder / "store").glob("ltx/9/*.ltx")), what="the first snapshot")
        with in_thread(brain_sql.follow, url, copy):
            conn = brain_sql.connect(primary)
            if records:
                brain_sql.remember(conn, list(records))
            target = conn.execute("select max(seq) from brain_changes").fetchone()[0]
            conn.close()

            def caught_up():
                status = brain_sql.replica_status(copy)
                if not status or status["state"] != "following":
                    return False
                conn = brain_sql.connect(copy)
                try:
                    return conn.execute("select max(seq) from brain_changes").fetchone()[0] == target
                finally:
                    conn.close()

            wait_for(caught_up, what="the copy catching up")
    return copy


@pytest.fixture(scope="session")
def vault_replica_path(vault_brain_path, tmp_path_factory):
    """A replica of the docs vault brain: a copy Litestream followed, at
    replica/brain.db (Datasette's `brain`, as the primary's). Read it only."""
    folder = tmp_path_factory.mktemp("vault-replica")
    primary = copy_brain(vault_brain_path, folder / "primary" / "brain.db")
    return replica_of(primary, folder)


@pytest.fixture(params=["primary", "replica"])
def served_brain(request, vault_brain_path):
    """The vault brain, and a replica of it: permission tests run against both."""
    if request.param == "primary":
        return vault_brain_path
    return request.getfixturevalue("vault_replica_path")


def reader_gets_in(followed, seconds=10):
    """Whether a reader on another thread takes `followed`'s lock within `seconds`:
    what a refresh's work done beside the readers lets it do."""
    done = threading.Event()

    def reader():
        with followed.lock:
            done.set()

    threading.Thread(target=reader, daemon=True).start()
    return done.wait(seconds)
