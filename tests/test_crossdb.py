"""A brain's memories read through another database's connection: `_memory` under
--crossdb, its canned queries, and a database a plugin attached the brain to.
Whoever may not read `knowledge` reads nothing of it that way either."""

import json
import sqlite3

import pytest
from datasette import hookimpl
from datasette.app import Datasette
from datasette.plugins import pm
from datasette.utils import sqlite3 as datasette_sqlite3

import brain_sql

from .conftest import copy_brain

# in a memory's content: no response to anonymous may carry it (digits alone came up, by chance, in query_ms)
SECRET = "zq7391x"
DENY = {"databases": {"brain": {"tables": {"knowledge": {"allow": {"id": "admin"}}}}}}

# every way SQL on another connection could reach the attached brain's memories
LEAKS = [
    "select title, content from brain.knowledge",
    "select content from knowledge",  # unqualified: found in the attached brain
    "select count(*) from knowledge",  # and a read of no column, which SQLite tells with no schema at all
    "select 1 from entities where rowid = 1",
    "select count(*) from brain.knowledge",
    "select rowid, content from brain.knowledge_fts where knowledge_fts match 'zanzibar'",
    "select block from brain.knowledge_fts_data",
    "select term from brain.knowledge_fts_vocab",
    "select knowledge_id from brain.vec_knowledge",
    "select chunk_id from brain.vec_knowledge_rowids",
    "select name from brain.entities",
    "select relation_type from brain.relationships",
    "select document_id from brain.documents",
    "select name, seq from brain.sqlite_sequence",
    "select entity_id from brain.brain_mention_names",  # the name index: which entities the brain holds
    "select seq from brain.brain_mention_names_seen",
    "select tbl, idx, stat from brain.sqlite_stat1",  # ANALYZE's row counts
    "select idx, sample from brain.sqlite_stat4",  # and its sample rows of every index: entity names, scopes
    "select sample from brain.SQLITE_STAT4 where idx = 'idx_entities_name'",
    "with m as (select content from brain.knowledge) select * from m",
    "select (select content from brain.knowledge order by id desc limit 1)",
    "select exists(select 1 from brain.knowledge where content like '%vault code%')",
    "select k.content from brain.knowledge k join brain.entities e on 1 limit 1",
    "select * from pragma_table_info('knowledge', 'brain')",
    "select brain_fts('zanzibar')",  # the brain_* functions read through the same connection
    "select brain_allowed('scope', '')",
]


@pytest.fixture(scope="module")
def secret_brain(vault_brain_path, tmp_path_factory):
    record = {"_id": "code", "title": "Zanzibar", "text": f"The vault code is {SECRET}.", "scope": "/private"}
    path = copy_brain(vault_brain_path, tmp_path_factory.mktemp("secret") / "brain.db", [record])
    conn = datasette_sqlite3.connect(path)
    conn.execute("analyze")  # as `sqlite-utils analyze` does: sqlite_stat1, and sqlite_stat4 (pysqlite3 has STAT4)
    assert conn.execute("select count(*) from sqlite_stat4 where idx = 'idx_entities_name'").fetchone()[0]
    conn.close()
    return path


def admin(datasette):
    return {"ds_actor": datasette.sign({"a": {"id": "admin"}}, "actor")}


async def refused(datasette, path, sql, **kwargs):
    response = await datasette.client.get(path, params={"sql": sql}, **kwargs)
    return response.status_code == 400 and response.json()["ok"] is False and SECRET not in response.text


@pytest.mark.asyncio
async def test_crossdb_reads_nothing_of_a_brain_anonymous_may_not_read(secret_brain):
    datasette = Datasette([str(secret_brain)], crossdb=True, metadata=DENY)
    for sql in LEAKS:
        assert await refused(datasette, "/_memory.json", sql), sql
    assert (await datasette.client.get("/_memory/-/recall", params={"q": "vault code"})).status_code == 404
    own = await datasette.client.get("/brain.json", params={"sql": "select content from knowledge"})
    assert own.status_code == 403


@pytest.mark.asyncio
async def test_a_canned_query_of_memory_reads_nothing_of_it(secret_brain):
    peek = {"queries": {"peek": "select content from brain.knowledge"}}
    metadata = {"databases": {**DENY["databases"], "_memory": peek}}
    datasette = Datasette([str(secret_brain)], crossdb=True, metadata=metadata)
    response = await datasette.client.get("/_memory/peek.json")
    assert response.status_code == 400 and SECRET not in response.text


@pytest.mark.asyncio
async def test_a_table_added_to_a_protected_brain_gives_no_count_to_unqualified_sql(secret_brain, tmp_path):
    """A read of no column of a table named without its database is told by SQLite
    with no database: only a brain's own table names were refused, so a table added
    to a protected brain's file answered its row count (review 111, L1), and its
    columns to pragma_table_info. The protected files' tables are known by name, read
    again when one's schema changes; a CTE, a table-valued function or another
    database's table answers as SQLite does (review 128, L1)."""
    path = tmp_path / "brain.db"
    path.write_bytes(secret_brain.read_bytes())
    with sqlite3.connect(path) as conn:
        conn.execute("create table dest (x)")
        conn.execute("insert into dest values (?)", [SECRET])
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("create table t (x)")
        conn.execute("insert into t values (1)")
    datasette = Datasette([str(path), str(other)], crossdb=True, metadata=DENY)
    hidden = ["select count(*) from dest", "select 1 from dest", "select exists(select 1 from DEST)"]
    for sql in [
        *hidden,
        "select name from pragma_table_info('dest')",
        "select count(*) from pragma_index_list('dest')",
    ]:
        assert await refused(datasette, "/_memory.json", sql), sql
    page = await datasette.client.get("/_memory", params={"sql": "select count(*) from dest"})
    assert "name it, as in db.table" in page.text
    answered = {
        "select count(*) from other.t": 1,
        "select count(*) from t": 1,
        "select count(*) from json_each('[1, 2]')": 2,
        "with recursive c(n) as (select 1 union all select n + 1 from c where n < 5) select count(*) from c": 5,
    }
    for sql, count in answered.items():
        response = await datasette.client.get("/_memory.json", params={"sql": sql})
        assert response.status_code == 200 and response.json()["rows"] == [[count]], sql
    with sqlite3.connect(path) as conn:  # added while the server runs
        conn.execute("create table later (x)")
        conn.execute("insert into later values (1)")
    assert await refused(datasette, "/_memory.json", "select count(*) from later")
    copy = tmp_path / "copy.db"  # a restore: another file takes the brain's path (review 129)
    with sqlite3.connect(path) as conn:
        conn.execute("pragma wal_checkpoint(truncate)")  # no frame of the file replaced is read over the new one
    copy.write_bytes(path.read_bytes())
    conn = sqlite3.connect(copy)
    with conn:
        conn.execute('create table "" (y unique)')
        conn.execute("create table restored (z)")
    conn.close()  # the last connection: its WAL written into the file
    copy.replace(path)
    for sql in ['select count(*) from ""', "select count(*) from restored", "select * from pragma_table_info('')"]:
        assert await refused(datasette, "/_memory.json", sql), sql
    assert await refused(datasette, "/_memory.json", "select * from pragma_index_info('sqlite_autoindex__1')")


@pytest.mark.asyncio
async def test_only_the_protected_brain_is_refused_and_admin_reads_it_through_its_own_database(
    secret_brain, vault_brain_path
):
    datasette = Datasette([str(secret_brain), str(vault_brain_path)], crossdb=True, metadata=DENY)
    # the two files are both named brain.db: Datasette serves the second as brain_2, with no deny
    assert {"brain", "brain_2"} <= set(datasette.databases)
    open_brain = await datasette.client.get("/_memory.json", params={"sql": "select count(*) from brain_2.knowledge"})
    assert open_brain.status_code == 200 and open_brain.json()["rows"][0][0] > 0
    cookies = admin(datasette)
    own = await datasette.client.get("/brain.json", params={"sql": "select content from knowledge"}, cookies=cookies)
    assert own.status_code == 200 and SECRET in own.text
    # admin too: the crossdb connection is shared by every actor, so it refuses everyone
    assert await refused(datasette, "/_memory.json", "select content from brain.knowledge", cookies=cookies)
    refusal = {"sql": "select content from brain.knowledge"}
    page = await datasette.client.get("/_memory", params=refusal, cookies=cookies)
    assert "query it through its own database" in page.text and 'href="/brain"' in page.text


@pytest.mark.asyncio
async def test_a_brain_with_no_deny_answers_crossdb_queries_once_started(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)], crossdb=True)
    # until the server knows which brains are protected, it refuses (fails closed)
    with pytest.raises(datasette_sqlite3.DatabaseError, match="prohibited|not authorized"):
        await datasette.execute("_memory", "select count(*) from brain.knowledge")
    await datasette.invoke_startup()
    assert (await datasette.execute("_memory", "select count(*) from brain.knowledge")).rows[0][0] > 0


@pytest.mark.parametrize("cuts", [1, 10], ids=["once", "always"])
@pytest.mark.asyncio
async def test_a_start_whose_permission_queries_the_time_limit_cuts_still_starts(vault_brain_path, monkeypatch, cuts):
    """On a loaded machine with a tiny SQL time limit, Datasette's own permission
    query may be interrupted: the server still starts; asked again, a brain anyone may
    read answers through _memory, and one never settled counts as protected."""
    from datasette.database import QueryInterrupted

    datasette = Datasette([str(vault_brain_path)], crossdb=True)
    original, left = datasette.permission_allowed, [cuts]

    async def cut(*args, **kwargs):
        if left[0] > 0:
            left[0] -= 1
            raise QueryInterrupted(None, "select name from sqlite_master", ())
        return await original(*args, **kwargs)

    monkeypatch.setattr(datasette, "permission_allowed", cut)
    await datasette.invoke_startup()
    monkeypatch.setattr(datasette, "permission_allowed", original)
    if cuts == 1:
        assert (await datasette.execute("_memory", "select count(*) from brain.knowledge")).rows[0][0] > 0
    else:
        with pytest.raises(datasette_sqlite3.DatabaseError, match="prohibited|not authorized"):
            await datasette.execute("_memory", "select count(*) from brain.knowledge")


@pytest.mark.asyncio
async def test_a_file_served_empty_and_ingested_into_later_is_protected(tmp_path):
    """Served before it is a brain (an empty file), then ingested into: anonymous
    reads nothing of its memories through _memory."""
    path = tmp_path / "brain.db"
    path.write_bytes(b"")
    datasette = Datasette([str(path)], crossdb=True, metadata=DENY)
    await datasette.invoke_startup()
    record = {"_id": "code", "title": "Zanzibar", "text": f"The vault code is {SECRET}.", "scope": "/private"}
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps(record))
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [records])
    conn.close()
    for sql in ("select title, content from brain.knowledge", "select count(*) from brain.knowledge"):
        assert await refused(datasette, "/_memory.json", sql), sql


class AttachBrain:
    """Another plugin that attaches a brain file to the `plain` database's connections
    under a name of its own."""

    def __init__(self, path):
        self.path = path

    @hookimpl
    def prepare_connection(self, conn, database):
        if database == "plain":
            conn.execute(f"attach database 'file:{self.path}?mode=ro' as mirror")


@pytest.mark.asyncio
async def test_a_database_that_attaches_the_brain_reads_nothing_of_it(secret_brain, tmp_path):
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).executescript("create table t (x); insert into t values (1);")
    datasette = Datasette([str(secret_brain), str(plain)], metadata=DENY)
    pm.register(AttachBrain(secret_brain), name="attach-brain")
    try:
        for sql in (
            "select content from mirror.knowledge",
            "select content from knowledge",
            "select block from mirror.knowledge_fts_data",
            "select name from mirror.entities",
            "select * from mirror.sqlite_stat1",
            "select * from mirror.sqlite_stat4",
        ):
            assert await refused(datasette, "/plain.json", sql), sql
        mine = await datasette.client.get("/plain.json", params={"sql": "select x from t"})
        assert mine.status_code == 200 and mine.json()["rows"] == [[1]]
    finally:
        pm.unregister(name="attach-brain")


def canned_attach(queries):
    """Metadata: the brain denied to anonymous, and write canned queries (the
    admin's own) on `other`."""
    other = {"queries": {name: {"sql": sql, "write": True} for name, sql in queries.items()}}
    return {"databases": {**DENY["databases"], "other": other}}


def plain_files(tmp_path, *names):
    paths = []
    for name in names:
        path = tmp_path / f"{name}.db"
        sqlite3.connect(path).executescript("create table t (x);")
        paths.append(str(path))
    return paths


async def copied(datasette):
    """What anonymous reads of `other`'s table after the canned queries ran."""
    response = await datasette.client.get("/other.json", params={"sql": "select x from t"})
    assert response.status_code == 200
    return response.text


@pytest.mark.asyncio
async def test_a_brain_attached_under_a_served_database_name_reads_nothing_of_it(secret_brain, tmp_path):
    """The file decides, not the name: the protected brain attached by a canned query
    as `third` (another served, unprotected database's name) is still the brain."""
    queries = {
        "attach_archive": "attach database :file as :name",
        "copy": "insert into t select content from third.knowledge",
    }
    files = plain_files(tmp_path, "other", "third")
    datasette = Datasette([str(secret_brain), *files], metadata=canned_attach(queries))
    await datasette.invoke_startup()
    attach = await datasette.client.post("/other/attach_archive", json={"file": str(secret_brain), "name": "third"})
    assert attach.status_code == 302
    await datasette.client.post("/other/copy", json={})
    assert SECRET not in await copied(datasette)


@pytest.mark.asyncio
@pytest.mark.parametrize("spelling", ["path", "uri", "link", "hard link"])
async def test_a_brain_attached_by_any_spelling_of_its_file_is_refused(secret_brain, tmp_path, spelling):
    files = plain_files(tmp_path, "other", "third")
    if spelling == "path":
        file = str(secret_brain)
    elif spelling == "uri":
        file = f"file:{secret_brain.parent}/%62rain.db?mode=ro"
    else:
        file = tmp_path / "alias.db"
        (file.symlink_to if spelling == "link" else file.hardlink_to)(secret_brain)
    queries = {
        "attach": f"attach database '{file}' as third",
        "copy": "insert into t select content from third.knowledge",
    }
    datasette = Datasette([str(secret_brain), *files], metadata=canned_attach(queries))
    await datasette.invoke_startup()
    await datasette.client.post("/other/attach", json={})
    await datasette.client.post("/other/copy", json={})
    assert SECRET not in await copied(datasette)


@pytest.mark.asyncio
async def test_an_attach_of_another_file_still_works(secret_brain, vault_brain_path, tmp_path):
    """What is refused is the protected file: another file attached by a parameter
    is read, and an open brain attached by its path is read, memories included."""
    queries = {
        "attach_archive": "attach database :file as :name",
        "copy": "insert into t select x from third.t",
        "attach_open": f"attach database '{vault_brain_path}' as open_brain",
        "copy_open": "insert into t select count(*) from open_brain.knowledge",
    }
    files = plain_files(tmp_path, "other", "third")
    sqlite3.connect(files[1]).execute("insert into t values ('archived')").connection.commit()
    datasette = Datasette([str(secret_brain), *files], metadata=canned_attach(queries))
    await datasette.invoke_startup()
    for name in ("attach_open", "copy_open"):
        await datasette.client.post(f"/other/{name}", json={})
    await datasette.client.post("/other/attach_archive", json={"file": files[1], "name": "third"})
    await datasette.client.post("/other/copy", json={})
    rows = json.loads(await copied(datasette))["rows"]
    assert [row[0] for row in rows][-1] == "archived" and rows[0][0] > 0
