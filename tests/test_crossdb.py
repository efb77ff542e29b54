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

SECRET = "7391"  # in a memory's content: no response to anonymous may carry it
DENY = {"databases": {"brain": {"tables": {"knowledge": {"allow": {"id": "admin"}}}}}}

# every way SQL on another connection could reach the attached brain's memories
LEAKS = [
    "select title, content from brain.knowledge",
    "select content from knowledge",  # unqualified: found in the attached brain
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
