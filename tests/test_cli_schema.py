"""The brain file through the CLI: `brain init`'s fresh schema, `sqlite-utils migrate`,
reference files, models and `brain reindex`."""

import numpy as np
import pytest

import brain_sql
from brain_sql.connection import load_sqlite_vec, sqlite3
from brain_sql.vectors import VEC_METADATA

from .conftest import VAULT, rows

REFERENCE_DDL = """
CREATE TABLE knowledge (
  id INTEGER PRIMARY KEY, title TEXT, content TEXT NOT NULL, knowledge_type TEXT,
  source TEXT DEFAULT 'manual', content_hash TEXT,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, flagged INTEGER NOT NULL DEFAULT 0,
  domain TEXT NOT NULL DEFAULT 'global', observed_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  valid_from TIMESTAMP, valid_to TIMESTAMP, document_id TEXT, chunk_index INTEGER,
  heading_path TEXT, line_start INTEGER, line_end INTEGER, source_path TEXT
);
CREATE UNIQUE INDEX idx_knowledge_hash ON knowledge(content_hash);
CREATE INDEX idx_knowledge_source_path ON knowledge(source_path);
CREATE VIRTUAL TABLE knowledge_fts USING fts5(
  title, content, content_hash UNINDEXED,
  content='knowledge', content_rowid='id', tokenize='porter unicode61'
);
CREATE TRIGGER knowledge_ai AFTER INSERT ON knowledge BEGIN
  INSERT INTO knowledge_fts(rowid, title, content, content_hash)
  VALUES (new.id, new.title, new.content, new.content_hash);
END;
CREATE TRIGGER knowledge_ad AFTER DELETE ON knowledge BEGIN
  INSERT INTO knowledge_fts(knowledge_fts, rowid, title, content, content_hash)
  VALUES ('delete', old.id, old.title, old.content, old.content_hash);
END;
CREATE VIRTUAL TABLE knowledge_fts_vocab USING fts5vocab(knowledge_fts, 'instance');
CREATE VIRTUAL TABLE vec_knowledge USING vec0(
  knowledge_id INTEGER PRIMARY KEY, embedding_bit BIT[512], embedding_int8 INT8[512],
  source TEXT, created_at TEXT
);
CREATE TABLE entities (
  id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE COLLATE NOCASE,
  entity_type TEXT, created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
);
CREATE INDEX idx_entities_name ON entities(name);
CREATE INDEX idx_entities_type ON entities(entity_type);
CREATE TABLE relationships (
  id INTEGER PRIMARY KEY AUTOINCREMENT, from_entity_id INTEGER NOT NULL,
  to_entity_id INTEGER NOT NULL, relation_type TEXT NOT NULL, knowledge_id INTEGER,
  created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
  FOREIGN KEY(from_entity_id) REFERENCES entities(id) ON DELETE CASCADE,
  FOREIGN KEY(to_entity_id) REFERENCES entities(id) ON DELETE CASCADE,
  FOREIGN KEY(knowledge_id) REFERENCES knowledge(id) ON DELETE SET NULL
);
CREATE INDEX idx_rels_from ON relationships(from_entity_id);
CREATE INDEX idx_rels_to ON relationships(to_entity_id);
CREATE UNIQUE INDEX idx_rels_unique ON relationships(from_entity_id, to_entity_id, relation_type);
"""

REFERENCE_ROWS = [
    (1, "Pager policy", "Escalate sev1 incidents to the on-call lead within five minutes.", "health"),
    (2, "Kettle", "The office kettle is descaled every Friday afternoon.", "manual"),
    (3, "Backups", "Nightly backups of brain.db are copied to the NAS at 02:00.", "ops"),
]


def reference_file(path):
    """A brain written with the reference system's DDL (REFERENCE_DDL), with rows in every table."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    load_sqlite_vec(conn)
    conn.executescript(REFERENCE_DDL)
    for id_, title, content, source in REFERENCE_ROWS:
        conn.execute(
            "insert into knowledge (id, title, content, source, content_hash) values (?, ?, ?, ?, ?)",
            (id_, title, content, source, f"hash{id_}"),
        )
        vector = np.ones(512, dtype=np.float32) / np.sqrt(512)
        conn.execute(
            "insert into vec_knowledge (knowledge_id, embedding_bit, embedding_int8, source, created_at) "
            "values (?, vec_bit(?), vec_int8(?), ?, '2025-01-01')",
            (id_, np.packbits(vector > 0).tobytes(), np.rint(vector * 127).astype(np.int8).tobytes(), source),
        )
    conn.execute("insert into entities (name, entity_type) values ('on-call lead', 'role'), ('NAS', 'device')")
    conn.execute(
        "insert into relationships (from_entity_id, to_entity_id, relation_type, knowledge_id) values (1, 2, 'uses', 3)"
    )
    conn.close()


def test_init_creates_every_table(run, db_path):
    result = run("brain", "init", db_path)
    assert result.exit_code == 0, result.output
    assert "wordllama/l2_supercat (256 dimensions)" in result.output
    conn = brain_sql.connect(db_path)
    names = {r[0] for r in rows(conn, "select name from sqlite_master")}
    assert {
        "knowledge",
        "knowledge_fts",
        "knowledge_fts_vocab",
        "vec_knowledge",
        "entities",
        "relationships",
        "documents",
        "brain_meta",
    } <= names
    meta = dict(rows(conn, "select key, value from brain_meta"))
    assert meta == {"model": "wordllama/l2_supercat", "dimension": "256", "schema_version": "1"}
    vec_sql = conn.execute("select sql from sqlite_master where name = 'vec_knowledge'").fetchone()[0]
    assert "distance_metric=cosine" in vec_sql
    assert "INT8[256]" in vec_sql and "BIT[256]" in vec_sql
    for column in VEC_METADATA:
        assert column in vec_sql
    knowledge_columns = {r[1] for r in rows(conn, "pragma table_info(knowledge)")}
    assert {
        "class",
        "scope",
        "expires_at",
        "relevance_tier",
        "confidence",
        "source",
        "node_kind",
        "lawful_basis",
        "region",
        "embedding_model",
        "owner",
        "access",
    } <= knowledge_columns


def test_init_twice_is_a_no_op(run, db_path):
    assert run("brain", "init", db_path).exit_code == 0
    before = brain_sql.connect(db_path).execute("select sql from sqlite_master order by name").fetchall()
    assert run("brain", "init", db_path).exit_code == 0
    after = brain_sql.connect(db_path).execute("select sql from sqlite_master order by name").fetchall()
    assert before == after


def test_sqlite_utils_migrate_builds_the_same_schema(run, tmp_path):
    import brain_sql.migrations

    by_migrate, by_init = tmp_path / "a.db", tmp_path / "b.db"
    result = run("migrate", by_migrate, brain_sql.migrations.__file__)
    assert result.exit_code == 0, result.output
    assert run("brain", "init", by_init).exit_code == 0
    schema = "select type, name, sql from sqlite_master where name not like 'sqlite_%' order by name"
    assert rows(brain_sql.connect(by_migrate), schema) == rows(brain_sql.connect(by_init), schema)
    assert run("brain", "ingest", by_migrate, VAULT).exit_code == 0


def test_reference_file_migrates_without_losing_a_row(run, db_path):
    reference_file(db_path)
    result = run("brain", "init", db_path)
    assert result.exit_code == 0, result.output
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select id, title, content, source from knowledge order by id") == REFERENCE_ROWS
    assert rows(conn, "select name from entities order by id") == [("on-call lead",), ("NAS",)]
    assert rows(conn, "select from_entity_id, to_entity_id, relation_type, knowledge_id from relationships") == [
        (1, 2, "uses", 3)
    ]
    # recall-ready: every row re-embedded with the recorded model, filters mirrored
    assert rows(conn, "select knowledge_id, source, scope from vec_knowledge order by knowledge_id") == [
        (1, "health", "/"),
        (2, "manual", "/"),
        (3, "ops", "/"),
    ]
    nearest = conn.execute(
        "select knowledge_id from vec_knowledge where embedding_int8 match vec_int8(brain_embed(?, 'int8')) and k = 1",
        ("when are backups copied to the NAS",),
    ).fetchone()[0]
    assert nearest == 3
    # the old FTS triggers are replaced, not doubled: a new row is indexed once
    conn.execute("insert into knowledge (title, content) values ('Zebra', 'a zebra crossing')")
    assert rows(conn, "select rowid from knowledge_fts where knowledge_fts match 'zebra'") == [(4,)]
    assert rows(conn, "select rowid from knowledge_fts where knowledge_fts match 'kettle'") == [(2,)]


def test_a_migrated_reference_file_recalls_queries_naming_its_entities(run, db_path):
    """Its memories are in no `documents` row (the reference system has none): a query
    naming an entity a relationship ties to one of them walked off the end of an
    empty column (a traceback from the CLI, a 500 from the server)."""
    reference_file(db_path)
    assert run("brain", "init", db_path).exit_code == 0
    result = run("brain", "recall", db_path, "when are backups copied to the NAS")
    assert result.exit_code == 0, result.output
    assert "Nightly backups of brain.db" in result.output.split("\n2.")[0]
    conn = brain_sql.connect(db_path)
    answer = brain_sql.recall(conn, {"q": "NAS backups", "provenance": True})
    assert answer["hits"][0]["id"] == 3
    assert conn.execute("select brain_ppr('NAS')").fetchone()[0].startswith("[")


def test_ingest_after_reference_migration(run, db_path, tmp_path):
    reference_file(db_path)
    note = tmp_path / "notes" / "NAS.md"
    note.parent.mkdir()
    note.write_text("# NAS\n\nThe NAS sits in the server cupboard.\n")
    result = run("brain", "ingest", db_path, note.parent)
    assert result.exit_code == 0, result.output
    conn = brain_sql.connect(db_path)
    assert conn.execute("select count(*) from knowledge").fetchone()[0] == 4
    assert conn.execute("select count(*) from vec_knowledge").fetchone()[0] == 4


def saved_model(folder):
    from brain_sql.embed import get_model

    get_model("wordllama/l2_supercat").save_pretrained(str(folder))
    return folder


def test_model2vec_folder_as_model(run, db_path, tmp_path):
    folder = saved_model(tmp_path / "model")
    result = run("brain", "init", db_path, "--model", folder)
    assert result.exit_code == 0, result.output
    assert f"{folder} (256 dimensions)" in result.output
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select distinct embedding_model from knowledge") == [(str(folder),)]


def test_model_mismatch_is_a_clear_error(run, db_path, tmp_path):
    assert run("brain", "init", db_path).exit_code == 0
    folder = saved_model(tmp_path / "model")
    result = run("brain", "init", db_path, "--model", folder)
    assert result.exit_code == 1
    assert "embedded with 'wordllama/l2_supercat' (256 dimensions)" in result.output
    assert "sqlite-utils brain reindex" in result.output
    assert "Traceback" not in result.output


def test_unloadable_recorded_model_is_a_clear_error(run, db_path, tmp_path):
    assert run("brain", "init", db_path).exit_code == 0
    conn = brain_sql.connect(db_path)
    conn.execute("update brain_meta set value = ? where key = 'model'", (str(tmp_path / "missing-model"),))
    note = tmp_path / "a.md"
    note.write_text("# A\n\ntext")
    result = run("brain", "ingest", db_path, note)
    assert result.exit_code == 1
    assert "missing-model', which is not a model installed here" in result.output  # a folder gone: no hub id either
    assert "Traceback" not in result.output


def test_reindex_switches_the_model(run, vault_brain_copy, tmp_path, monkeypatch):
    db_path = vault_brain_copy
    folder = saved_model(tmp_path / "model")
    monkeypatch.setenv("BRAIN_MODEL", str(folder))
    mismatch = run("brain", "recall", db_path, "vectors")
    assert mismatch.exit_code == 1 and "sqlite-utils brain reindex" in mismatch.output
    result = run("brain", "reindex", db_path, "--model", folder)
    assert result.exit_code == 0, result.output
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select value from brain_meta where key = 'model'") == [(str(folder),)]
    assert (
        conn.execute("select count(*) from vec_knowledge").fetchone()[0]
        == conn.execute("select count(*) from knowledge").fetchone()[0]
    )
    assert run("brain", "recall", db_path, "how are vectors stored").exit_code == 0


@pytest.mark.asyncio
async def test_a_running_server_notices_reindex(vault_brain_copy, narrow_model):
    """Another model, of another dimension, put in by `reindex` while Datasette runs."""
    from datasette.app import Datasette

    folder = narrow_model
    datasette = Datasette([str(vault_brain_copy)])
    name = vault_brain_copy.stem
    canned = f"/{name}/recall.json?q=graph+leg&scope=&classes=&sources=&domain=&since=&until="
    assert (await datasette.client.get(canned)).status_code == 200
    brain_sql.reindex(brain_sql.connect(vault_brain_copy), str(folder))
    after = await datasette.client.get(canned)
    assert after.status_code == 200 and after.json()["rows"], after.text[:300]
    api = await datasette.client.get(f"/{name}/-/recall", params={"q": "graph leg"})
    assert api.status_code == 200 and api.json()["hits"]


def test_a_reference_file_stating_an_edge_twice_is_adopted_with_it_once(run, db_path):
    """Review 25, F9 (a): the reference tables as m001 makes them let an edge be stored
    twice (the same ends, type and memory); a brain states it once (a unique index),
    and init was an IntegrityError's traceback. The file is adopted, every memory
    kept, the edge once."""
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.executescript(
        "create table knowledge (id integer primary key, title text, content text not null, source text, "
        "content_hash text, document_id text, chunk_index integer, heading_path text, line_start integer, "
        "line_end integer, source_path text, valid_from timestamp, valid_to timestamp, flagged integer not null "
        "default 0, domain text not null default 'global', knowledge_type text, created_at timestamp, "
        "observed_at timestamp);"
        "create table entities (id integer primary key autoincrement, name text not null unique collate nocase, "
        "entity_type text, created_at timestamp);"
        "create table relationships (id integer primary key autoincrement, from_entity_id integer not null, "
        "to_entity_id integer not null, relation_type text not null, knowledge_id integer, created_at timestamp);"
        "insert into knowledge (id, title, content) values (1, 'Backups', 'Nightly backups go to the NAS.');"
        "insert into entities (name) values ('Backups'), ('NAS');"
        "insert into relationships (from_entity_id, to_entity_id, relation_type, knowledge_id) "
        "values (1, 2, 'uses', 1), (1, 2, 'uses', 1);"
    )
    conn.close()
    result = run("brain", "init", db_path)
    assert result.exit_code == 0, result.output
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select id, title, content from knowledge") == [(1, "Backups", "Nightly backups go to the NAS.")]
    assert rows(conn, "select from_entity_id, to_entity_id, relation_type, knowledge_id from relationships") == [
        (1, 2, "uses", 1)
    ]


def test_a_reference_file_with_a_blob_title_is_refused_by_row_not_a_traceback(run, db_path):
    """Review 25, F9 (b): a reference file whose title is a BLOB: init embedded every
    row and met a TypeError's traceback. It names the row and column and changes nothing."""
    reference_file(db_path)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    conn.execute("insert into knowledge (id, title, content) values (4, x'ff', 'a blob title')")
    before = rows(conn, "select * from sqlite_master")
    conn.close()
    result = run("brain", "init", db_path)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "knowledge 4 title is no text" in result.output, result.output
    assert rows(sqlite3.connect(str(db_path)), "select * from sqlite_master") == before
