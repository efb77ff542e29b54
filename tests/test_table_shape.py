"""A brain table swapped with plain SQL for one of the same name and another shape
(other columns, types or primary key; a plain table for a virtual one): `check`
names it and what is wrong, `--repair` makes the derived ones again from knowledge
and refuses the ones holding stated rows, and recall and writes meeting one say to
run check, never a 500 or a traceback."""

import asyncio
import sqlite3

import pytest
from datasette.app import Datasette

import brain_sql
from brain_sql import schema

from .conftest import write

# every table a brain's schema makes that a repair can make again, with the shape it is swapped for
DERIVED = [
    ("brain_changes", "x"),
    ("brain_changes", "seq TEXT PRIMARY KEY, kind TEXT NOT NULL, key NOT NULL, stamp INTEGER"),  # another type
    ("brain_mention_names", "x"),
    ("brain_mention_names", "head INTEGER, words INTEGER, hash INTEGER, entity_id INTEGER"),  # no primary key
    ("brain_mention_names_seen", "x"),
    ("brain_mention_queue", "x"),
    ("brain_ids", "x"),
    ("brain_ids", "name TEXT PRIMARY KEY, seq INTEGER NOT NULL, note TEXT NOT NULL"),  # a column no write gives
    ("brain_instance", "x"),
    ("documents", "x"),
    ("knowledge_fts", "x"),
    ("knowledge_fts", "title, content, context, content_hash"),  # the columns, in a plain table
    ("knowledge_fts_data", "x"),
    ("knowledge_fts_idx", "x"),
    ("knowledge_fts_docsize", "x"),
    ("knowledge_fts_config", "x"),
    ("knowledge_fts_vocab", "x"),
    ("knowledge_fts_terms", "x"),
    ("vec_knowledge", "x"),
    ("vec_knowledge", "USING vec0(knowledge_id INTEGER PRIMARY KEY, embedding float[4])"),  # a virtual one
    ("knowledge_fts", "USING fts5(title, content)"),
    ("vec_knowledge_chunks", "x"),
    ("vec_knowledge_rowids", "x"),
    ("vec_knowledge_info", "x"),
    ("vec_knowledge_vector_chunks00", "x"),
    ("vec_knowledge_metadatachunks00", "x"),
    ("_sqlite_migrations", "x"),  # the record of migrations: restored as a dropped one is
]
# those a remember writes or reads (the rest it never meets: it stores as ever)
REMEMBER_MEETS = {"brain_changes", "brain_mention_names", "brain_mention_names_seen", "brain_mention_queue"}
REMEMBER_MEETS |= {"brain_ids", "documents", "knowledge_fts", "knowledge_fts_data", "knowledge_fts_idx"}
REMEMBER_MEETS |= {"knowledge_fts_docsize", "knowledge_fts_config", "vec_knowledge", "vec_knowledge_chunks"}
REMEMBER_MEETS |= {"vec_knowledge_rowids", "vec_knowledge_vector_chunks00", "vec_knowledge_metadatachunks00"}
REMEMBER_MEETS |= {"_sqlite_migrations"}


def _swap(path, table, columns):
    """What the review did: the table dropped and another made under its name."""
    conn = brain_sql.connect(path)  # vec0 loaded, to drop its tables
    with conn:
        conn.execute(f"drop table [{table}]")
        if columns.startswith("USING "):
            conn.execute(f"create virtual table [{table}] {columns}")
        else:
            conn.execute(f"create table [{table}] ({columns})")
        if columns == "x":
            conn.execute(f"insert into [{table}] values ('left by plain SQL')")
    conn.close()


def _contents(conn):
    """Every table's rows (the virtual tables' in their own) and the schema: what a file holds."""
    tables = conn.execute("select name from sqlite_master where type = 'table' and sql not like 'CREATE VIRTUAL%'")
    return {
        "schema": conn.execute("select type, name, sql from sqlite_master order by name").fetchall(),
        **{name: sorted(map(repr, conn.execute(f"select * from [{name}]"))) for (name,) in tables.fetchall()},
    }


def _hits(path):
    conn = brain_sql.connect(path)
    try:
        return [h["id"] for h in brain_sql.recall(conn, brain_sql.parse_querydoc({"q": "graph leg"}))["hits"]]
    finally:
        conn.close()


@pytest.mark.parametrize("table, columns", DERIVED)
def test_a_derived_table_of_another_shape_is_named_and_made_again(run, vault_brain_copy, table, columns):
    before = _hits(vault_brain_copy)
    _swap(vault_brain_copy, table, columns)
    checked = run("brain", "check", vault_brain_copy)
    assert checked.exit_code == 1 and isinstance(checked.exception, SystemExit), checked.output
    assert "tables of another shape than the brain's" in checked.output and f"{table}: " in checked.output
    assert "run sqlite-utils brain check" not in checked.output  # never tells to run itself
    records = write(vault_brain_copy.parent / "one.jsonl", '{"text": "Deploys happen on Tuesdays."}')
    if table in REMEMBER_MEETS and columns == "x":  # a retyped column a write can still fill: check finds it
        remembered = run("brain", "remember", vault_brain_copy, records)
        assert remembered.exit_code == 1 and "run sqlite-utils brain check" in remembered.output, remembered.output
        assert "Traceback" not in remembered.output
    recalled = run("brain", "recall", vault_brain_copy, "graph leg")
    assert recalled.exit_code == 0 or "run sqlite-utils brain check" in recalled.output, recalled.output
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 0 and "now consistent" in repaired.output, repaired.output
    checked = run("brain", "check", vault_brain_copy)
    assert checked.exit_code == 0 and checked.output.endswith("consistent\n"), checked.output
    assert _hits(vault_brain_copy) == before
    assert run("brain", "remember", vault_brain_copy, records).exit_code == 0
    assert "Deploys" in run("brain", "recall", vault_brain_copy, "when do deploys happen").output


def test_a_full_text_table_its_module_cannot_open_is_named_and_made_again(run, vault_brain_copy):
    """knowledge_fts_config emptied with plain SQL: FTS5 cannot open knowledge_fts, whose
    own tables all have their shape; check names it and --repair makes it again whole."""
    before = _hits(vault_brain_copy)
    conn = sqlite3.connect(vault_brain_copy)
    conn.execute("delete from knowledge_fts_config")
    conn.commit()
    conn.close()
    checked = run("brain", "check", vault_brain_copy)
    assert checked.exit_code == 1 and "knowledge_fts: cannot be opened (invalid fts5 file format" in checked.output
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 0 and "now consistent" in repaired.output, repaired.output
    assert run("brain", "check", vault_brain_copy).output.endswith("consistent\n")
    assert _hits(vault_brain_copy) == before


@pytest.mark.parametrize(
    "table, columns, named",
    [
        ("entities", "x", "entities: no column created_at; no column entity_type; no column id; no column name"),
        ("relationships", "x", "relationships: no column created_at"),
        ("brain_meta", "key TEXT, value TEXT", "brain_meta: primary key (), not (key)"),
        ("brain_meta", "x", "brain_meta: no column key; no column value"),
    ],
)
def test_a_stated_table_of_another_shape_is_named_and_repair_changes_nothing(
    run, vault_brain_copy, table, columns, named
):
    """What entities, relationships and brain_meta hold is stated nowhere else: named,
    and --repair refuses by name, changing nothing, even where derived tables are
    misshapen too."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        rows = conn.execute(f"select * from [{table}]").fetchall()
        conn.execute(f"drop table [{table}]")
        conn.execute(f"create table [{table}] ({columns})")
        if columns != "x":
            conn.executemany(f"insert into [{table}] values (?, ?)", rows)
        conn.execute("drop table brain_changes")
        conn.execute("create table brain_changes (x)")
    before = _contents(conn)
    conn.close()
    for command in (["check"], ["check", "--repair"]):
        result = run("brain", *command, vault_brain_copy)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert named in result.output and "restore a copy" in result.output, result.output
        assert "brain_changes: no column" in result.output
    conn = brain_sql.connect(vault_brain_copy)
    assert _contents(conn) == before
    conn.close()


def test_the_expected_shape_is_the_schemas_own_and_a_new_brain_has_it(tmp_path):
    """The shapes compared with are what the migrations make: a brain just made, and
    one that memories were written to, have every table of that shape."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    assert schema.damaged_tables(conn) == {}
    reference = schema.reference_shapes(schema.recorded_model_and_dimension(conn)[1])
    tables = {name for (name,) in conn.execute("select name from sqlite_master where type = 'table'")}
    assert {"knowledge_fts_data", "vec_knowledge_rowids", "brain_changes", "knowledge_fts", "vec_knowledge"} <= set(
        reference
    )
    assert set(reference) == {name for name in tables if not name.startswith("sqlite_")}


@pytest.mark.parametrize("table", ["brain_changes", "knowledge_fts_docsize", "vec_knowledge_rowids", "documents"])
def test_recall_and_remember_over_http_meeting_one_are_409s_saying_to_run_check(vault_brain_copy, table):
    _swap(vault_brain_copy, table, "x")
    config = {"plugins": {"datasette-brain": {"allow_write": True}}}

    async def routes():
        datasette = Datasette([str(vault_brain_copy)], metadata=config)
        remembered = await datasette.client.post("/brain/-/remember", json={"text": "Deploys happen on Tuesdays."})
        assert remembered.status_code == 409, (remembered.status_code, remembered.text[:300])
        assert "run sqlite-utils brain check" in remembered.text
        recalled = await datasette.client.get("/brain/-/recall?q=graph+leg")
        assert recalled.status_code in (200, 409), (recalled.status_code, recalled.text[:300])
        if recalled.status_code == 409:
            assert "run sqlite-utils brain check" in recalled.text

    asyncio.run(routes())
    stored = sqlite3.connect(vault_brain_copy).execute("select count(*) from knowledge where content like 'Deploys%'")
    assert stored.fetchone()[0] == 0  # nothing half-written
