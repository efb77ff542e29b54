"""The brain's rules hold against plain SQL: a write that breaks one is refused
by the schema's triggers, naming the column, whichever door it came in by."""

import asyncio

import pytest
from datasette.app import Datasette

import brain_sql
from brain_sql import schema
from brain_sql.connection import sqlite3

from .conftest import fingerprint, without_rules

GRAPH_LEG = "(select document_id from knowledge where title = 'Graph Leg')"


@pytest.mark.parametrize(
    "sql, column",
    [
        ("update knowledge set observed_at = 'now' where id = 1", "knowledge.observed_at"),
        ("update knowledge set valid_from = 'yesterday' where id = 1", "knowledge.valid_from"),
        ("update knowledge set valid_to = '12:00' where id = 1", "knowledge.valid_to"),  # a bare time: no day
        ("update knowledge set expires_at = 2461000.5 where id = 1", "knowledge.expires_at"),  # a Julian day number
        ("update knowledge set valid_from = '2024-13-45' where id = 1", "knowledge.valid_from"),
        ("update knowledge set observed_at = '2024-02-30' where id = 1", "knowledge.observed_at"),  # SQLite: 1 March
        ("update knowledge set valid_from = '0000-01-01' where id = 1", "knowledge.valid_from"),  # Python has no year 0
        ("update knowledge set expires_at = '2024-01-01 24:00:00' where id = 1", "knowledge.expires_at"),
        (
            "update knowledge set valid_to = '9999-12-31T23:00:00-05:00' where id = 1",
            "knowledge.valid_to",
        ),  # year 10000
        ("insert into knowledge (content, observed_at) values ('x', '01/02/2024')", "knowledge.observed_at"),
        ("update entities set created_at = 'now' where id = 1", "entities.created_at"),
        (
            "insert into relationships (from_entity_id, to_entity_id, relation_type) values (9999, 1, 'x')",
            "relationships.from_entity_id",
        ),
        ("update relationships set to_entity_id = 'abc' where id = 1", "relationships.to_entity_id"),
        ("update relationships set knowledge_id = 99999 where id = 1", "relationships.knowledge_id"),
        ("update documents set entity_id = 9999 where rowid = 1", "documents.entity_id"),
        ("insert into documents (document_id, entity_id) values ('new', 9999)", "documents.entity_id"),
    ],
)
def test_plain_sql_that_breaks_a_rule_is_refused_naming_the_column(vault_brain_copy, sql, column):
    conn = brain_sql.connect(vault_brain_copy)
    before = fingerprint(conn)
    with pytest.raises(sqlite3.IntegrityError, match=f"^brain rule: {column} must be "):
        conn.execute(sql)
    assert fingerprint(conn) == before


def test_what_the_rules_allow_is_stored(vault_brain_copy):
    """ISO 8601 in any of its forms, NULL, and ids that name what is there."""
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute("update knowledge set valid_from = '2024-01-10', valid_to = '2024-02-01T09:30:00Z' where id = 1")
    conn.execute("update knowledge set expires_at = null, observed_at = '2024-01-10 09:30:00+02:00' where id = 1")
    conn.execute(
        "insert into relationships (from_entity_id, to_entity_id, relation_type, knowledge_id) values (1, 2, 'x', 1)"
    )
    conn.execute("update documents set entity_id = null where rowid = 1")
    # a value stored before the rules is not judged again when another column of its row changes
    without_rules(conn)
    conn.execute("update knowledge set observed_at = 'now' where id = 2")
    conn.execute("delete from _sqlite_migrations where name = 'm015_rules'")
    brain_sql.migrate(conn)
    conn.execute("update knowledge set flagged = 1 where id = 2")
    assert conn.execute("select observed_at, flagged from knowledge where id = 2").fetchone() == ("now", 1)
    assert "knowledge 2 observed_at: 'now'" in brain_sql.check(conn)["invalid_values"][0]


def test_a_writable_canned_query_breaking_a_rule_answers_its_message(vault_brain_copy):
    """Datasette's write path for plain SQL, a writable canned query, answers with
    the rule's message (Datasette 0.65 answers a failed write with ok: false)."""
    queries = {
        "link": {
            "sql": "insert into relationships (from_entity_id, to_entity_id, relation_type) values (:a, :b, 'knows')",
            "write": True,
        }
    }
    datasette = Datasette([str(vault_brain_copy)], metadata={"databases": {"brain": {"queries": queries}}})

    async def post(a, b):
        return await datasette.client.post("/brain/link", json={"a": a, "b": b}, headers={"accept": "application/json"})

    refused = asyncio.run(post(9999, 1))
    assert refused.status_code < 500 and refused.json()["ok"] is False, refused.text
    assert refused.json()["message"] == "brain rule: relationships.from_entity_id must be the id of an entity"
    assert asyncio.run(post(1, 2)).json()["ok"] is True


def test_the_brains_own_write_meeting_a_rule_is_a_409_and_a_cli_message(run, tmp_path):
    """A value stored before the rules (here a time that is no ISO date), copied by
    the brain's own write (the time a newer version replaced an older one from),
    is refused with the rest of that write: the API answers 409 saying to run check
    (not naming the value: its row may be one the caller may not read), the CLI names
    it, never a 500 or a traceback."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.remember(conn, [{"_id": "rota", "text": "Kim leads the pager rota."}])
    brain_sql.remember(conn, [{"_id": "rota2", "text": "Lee leads the pager rota.", "supersedes": "rota"}])
    without_rules(conn)  # as a brain written before them holds it
    conn.execute("update knowledge set observed_at = '01/02/2024' where external_id = 'rota2'")
    conn.execute("delete from _sqlite_migrations where name = 'm015_rules'")
    brain_sql.migrate(conn)
    before = fingerprint(conn)
    conn.close()
    record = {"_id": "rota3", "text": "Mo leads the pager rota.", "supersedes": "rota"}
    datasette = Datasette([str(path)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
    answer = asyncio.run(datasette.client.post("/brain/-/remember", json=record))
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert "01/02/2024" not in error and "run sqlite-utils brain check" in error
    records = tmp_path / "records.json"
    records.write_text('{"_id": "rota3", "text": "Mo leads the pager rota.", "supersedes": "rota"}')
    result = run("brain", "remember", path, records)
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "observed_at: '01/02/2024'" in result.output and "Traceback" not in result.output
    assert fingerprint(brain_sql.connect(path)) == before


def test_an_entity_deleted_with_plain_sql_stops_no_write(vault_brain_copy):
    """Plain SQL may delete an entity a document stands for (its edges wait for it):
    matching a new name in that document's text writes no edge from it, which the
    rules would refuse along with the whole write; check names the document's
    entity, and repair makes it the one named by its title again, or none."""
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute("delete from entities where name = 'Graph Leg'")
    report, _ = brain_sql.remember(
        conn, [{"_id": "ppr", "title": "Personalized PageRank", "text": "A restarting walk."}]
    )
    assert not report.errors
    assert "Graph Leg.md entity_id" in brain_sql.check(conn)["invalid_values"][0]
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}


# the rule m015 made: any text SQLite reads as a time after a date
M015_TIME_SQL = (
    "typeof({c}) = 'null' or (typeof({c}) = 'text' and {c} glob '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*' "
    "and unixepoch({c}) is not null)"
)


def test_a_brain_whose_rules_took_impossible_dates_is_migrated_to_refuse_them(vault_brain_copy, monkeypatch):
    """m015's rules took 30 February (SQLite reads it as 1 March): m016 makes them
    again, refusing it; what was stored before stays, and check names it."""
    conn = brain_sql.connect(vault_brain_copy)
    with monkeypatch.context() as patched:
        patched.setattr(schema, "TIME_SQL", M015_TIME_SQL)
        m015 = schema.rule_triggers()
    with conn:
        for name, sql in m015.items():
            conn.execute(f"drop trigger {name}")
            conn.execute(sql)
        conn.execute("delete from _sqlite_migrations where name = 'm016_real_dates'")
    conn.execute("update knowledge set observed_at = '2024-02-30' where id = 1")
    assert brain_sql.pending_migrations(conn) == ["m016_real_dates"]
    brain_sql.migrate(conn)
    with pytest.raises(sqlite3.IntegrityError, match="^brain rule: knowledge.observed_at must be "):
        conn.execute("update knowledge set observed_at = '2023-02-29' where id = 2")
    found = brain_sql.check(conn)
    assert list(found) == ["invalid_values"] and "knowledge 1 observed_at: '2024-02-30'" in found["invalid_values"][0]
