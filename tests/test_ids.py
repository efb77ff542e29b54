"""Ids stay within 1 to MAX_ID (2**53 - 1): a writer giving one past it is refused by
name, plain SQL too; a row stored past it before (or a mark it raised) is named by
check, and readers answer as for any other id, with memory bounded by how many
ids there are, never by how large they are."""

import json
import random

import numpy as np
import pytest
from datasette.app import Datasette
from hypothesis import given
from hypothesis import strategies as st

import brain_sql
from brain_sql import state, writer
from brain_sql.config import MAX_ID, MAX_KEPT_ID
from brain_sql.errors import RuleRefused
from brain_sql.slots import DENSE_FLOOR, DENSE_PER_ID, IdMap

from .conftest import without_rules

WRITER = {"plugins": {"datasette-brain": {"allow_write": True}}}
PAST = [2**63 - 1, MAX_ID + 1, -7, 0]


def test_an_id_map_answers_as_a_dict_does_with_memory_bounded_by_its_ids():
    """Any ids (huge, negative, dense or not, set, reset and removed in any order),
    answered as a dict answers them, before and after a snapshot's round trip; its
    array never longer than its bound for the most ids it held."""
    chooser = random.Random(18)
    held, expected, most = IdMap(), {}, 0
    for _ in range(300):
        keys = [
            chooser.choice([chooser.randrange(50), chooser.randrange(10**5), 2**63 - 1 - chooser.randrange(9), -5])
            for _ in range(chooser.randrange(1, 12))
        ]
        values = [chooser.choice([-1, chooser.randrange(1000)]) for _ in keys]
        held.set(keys, values)
        for key, value in zip(keys, values):
            if value < 0:
                expected.pop(key, None)
            else:
                expected[key] = value
        for key in chooser.sample(list(expected), min(2, len(expected))):
            assert held.pop(key) == expected.pop(key)
        most = max(most, len(expected))
        asked = np.array(keys + [3, 2**63 - 2, -1], dtype=np.int64)
        assert held.many(asked).tolist() == [expected.get(k, -1) for k in asked.tolist()]
        assert [held[k] for k in asked.tolist()] == [expected.get(k, -1) for k in asked.tolist()]
        assert held.keys().tolist() == sorted(expected) and len(held) == len(expected)
        assert len(held.array) <= max(1024, DENSE_FLOOR, DENSE_PER_ID * most)
    loaded = IdMap.from_arrays(held.to_arrays("map"), "map")
    assert loaded.keys().tolist() == sorted(expected) and len(loaded) == len(expected)
    assert loaded.many(list(expected)).tolist() == list(expected.values())


def _hand_written(conn, memory_id):
    """A memory plain SQL wrote with `memory_id`, in a brain from before the rules
    refused one past MAX_ID; an entity and a relationship with ids as large."""
    brain_sql.remember(
        conn, [{"_id": "cat", "title": "Cat", "text": "Pepper the cat sleeps on the sofa.", "entities": ["Pepper"]}]
    )
    with conn:
        without_rules(conn, ids=True)
        conn.execute(
            "insert into knowledge (id, title, content) values (?, 'Hand written', 'a zebracorn grazes by the sofa')",
            [memory_id],
        )
        conn.execute("insert into entities (id, name) values (?, 'Zebracorn')", [memory_id])
        conn.execute(
            "insert into relationships (id, from_entity_id, to_entity_id, relation_type, knowledge_id) "
            "select ?, ?, id, 'grazes_near', ? from entities where name = 'Pepper'",
            [memory_id, memory_id, memory_id],
        )


@pytest.mark.parametrize("memory_id", [*PAST, 10**11])
def test_a_memory_id_past_the_bound_is_recalled_named_by_check_and_forgotten(tmp_path, conn, memory_id):
    """Recall finds it as any memory (the read state's maps stay small), a snapshot
    keeps it, check names the rows by id and --repair refuses, saying what to do;
    once it is forgotten the brain gives ids after the highest within the bound."""
    _hand_written(conn, memory_id)
    read = state.current(conn, 256)
    assert read.chunks.slot_of.array.nbytes + read.graph.node_of_entity.array.nbytes < 8 << 20
    found = brain_sql.recall(conn, {"q": "zebracorn sofa", "cutoff": False})
    assert memory_id in [hit["id"] for hit in found["hits"]]
    read.save(tmp_path / "snapshot")
    assert state.ReadState.load(tmp_path / "snapshot", 256).fingerprint() == read.fingerprint()
    named = brain_sql.check(conn).get("invalid_values", [])
    if memory_id in PAST:
        for table in ("knowledge", "entities", "relationships"):
            assert any(
                line.startswith(f"{table} {memory_id} id: ") and "9,007,199,254,740,991" in line for line in named
            )
        with pytest.raises(brain_sql.BrainError, match=f"knowledge {memory_id} id: .*forget it"):
            brain_sql.check(conn, repair=True)
    else:
        assert named == []
    with conn:
        conn.execute("delete from entities where id = ?", [memory_id])
    brain_sql.forget(conn, ids=[memory_id])
    brain_sql.check(conn, repair=True)  # the rules' triggers made again
    assert brain_sql.check(conn) == {}
    _, [[new]] = brain_sql.remember(
        conn, [{"title": "Garden", "text": "A new note about the garden.", "entities": ["Garden"]}]
    )
    highest = conn.execute("select max(id) from knowledge where id != ?", [new]).fetchone()[0]
    assert new == (highest if memory_id in PAST else memory_id) + 1  # an id within the bound is never given again
    assert conn.execute("select max(id) from entities").fetchone()[0] <= MAX_ID


@pytest.mark.parametrize("memory_id", [2**63 - 1, MAX_ID + 1, 0, -3])
def test_plain_sql_cannot_write_an_id_past_the_bound(conn, memory_id):
    brain_sql.remember(conn, [{"title": "Cat", "text": "Pepper the cat sleeps on the sofa.", "entities": ["Pepper"]}])
    for sql in (
        "insert into knowledge (id, content) values (?, 'hand written')",
        "update knowledge set id = ? where id = (select min(id) from knowledge)",
        "insert into entities (id, name) values (?, 'Hand Written')",
        "update entities set id = ? where id = (select min(id) from entities)",
    ):
        with pytest.raises(RuleRefused, match=r"\.id must be a whole number from 1 to 9,007,199,254,740,991"):
            with brain_sql.connection.atomic(conn):
                conn.execute(sql, [memory_id])


def _exported(memory_id):
    return {"_id": "c1", "title": "Chosen", "_chunks": [{"id": memory_id, "text": "a chunk with its own id"}]}


@pytest.mark.asyncio
@pytest.mark.parametrize("memory_id", [2**63 - 1, MAX_ID + 1])
async def test_an_exported_id_past_the_bound_is_refused_by_name(tmp_path, run, memory_id):
    """By remember (nothing stored), over HTTP (a 400), on the command line (exit
    2) and by ingest (the record skipped with its file and line)."""
    db_path = tmp_path / "brain.db"
    conn = brain_sql.connect(db_path)
    report, _ = brain_sql.remember(conn, [_exported(memory_id)])
    said = "_chunks[0]: id must be a whole number from 1 to 9,007,199,254,740,991"
    assert said in report.errors[0].message
    datasette = Datasette([str(db_path)], metadata=WRITER)
    answer = await datasette.client.post("/brain/-/remember", json=_exported(memory_id))
    assert answer.status_code == 400 and said in answer.json()["error"], answer.text
    source = tmp_path / "export.jsonl"
    source.write_text(json.dumps({"text": "another"}) + "\n" + json.dumps(_exported(memory_id)) + "\n")
    cli = run("brain", "remember", db_path, source)
    assert cli.exit_code == 2 and said in cli.output, cli.output
    ingested = run("brain", "ingest", db_path, source)
    assert f"{source}:2" in ingested.output and said in ingested.output, ingested.output
    assert conn.execute("select count(*) from knowledge where content = 'a chunk with its own id'").fetchone()[0] == 0


def test_an_exported_id_keeps_room_for_as_many_new_ones(conn):
    """An exported memory keeps its id up to MAX_KEPT_ID; one above it gets a new
    id as one below the brain's would: however high a writer sets it, new ids follow."""
    _, [[kept]] = brain_sql.remember(conn, [_exported(MAX_KEPT_ID)])
    _, [[renumbered]] = brain_sql.remember(conn, [{**_exported(MAX_ID), "_id": "c2"}])
    _, [[new]] = brain_sql.remember(conn, [{"text": "after them"}])
    assert (kept, renumbered, new) == (MAX_KEPT_ID, MAX_KEPT_ID + 1, MAX_KEPT_ID + 2)


def test_marks_a_huge_id_raised_are_named_and_set_back(conn):
    """An id mark or an AUTOINCREMENT counter past the bound (a row plain SQL wrote
    there, since removed) would make every new id refused: the migration and
    check --repair set them back to the highest id given within it."""
    _, [[first]] = brain_sql.remember(conn, [{"title": "Cat", "text": "Pepper the cat.", "entities": ["Pepper"]}])
    with conn:
        conn.execute("update brain_ids set seq = ? where name = 'knowledge'", [2**63 - 1])
        conn.execute("update sqlite_sequence set seq = ? where name = 'entities'", [2**63 - 1])
    found = brain_sql.check(conn)["id_marks_past_bound"]
    assert found == [f"brain_ids knowledge: {2**63 - 1}", f"sqlite_sequence entities: {2**63 - 1}"]
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    _, [[new]] = brain_sql.remember(
        conn, [{"title": "Garden", "text": "A note on the garden.", "entities": ["Garden"]}]
    )
    assert new == first + 1 and conn.execute("select max(id) from entities").fetchone()[0] < 100
    with conn:  # as a brain from before the bound, whose marks a huge id raised
        conn.execute("update brain_ids set seq = ? where name = 'knowledge'", [2**63 - 1])
        conn.execute("update sqlite_sequence set seq = ? where name = 'entities'", [2**63 - 1])
        conn.execute("delete from _sqlite_migrations where name = 'm017_id_bound'")
    brain_sql.migrate(conn)
    _, [[newer]] = brain_sql.remember(conn, [{"title": "Shed", "text": "A note on the shed.", "entities": ["Shed"]}])
    assert newer == new + 1 and brain_sql.check(conn) == {}


@given(st.lists(st.lists(st.integers(1, 80), min_size=1, max_size=12), min_size=1, max_size=12))
def test_the_ids_a_run_gave_are_held_as_runs_that_answer_as_a_set(batches):
    """An import's record of the ids it gave (writer._Given) holds them as runs of
    consecutive ids, not a million ints; it answers every membership as a set would."""
    held, ids = writer._Given(), set()
    for batch in batches:
        held.update(batch)
        ids.update(batch)
        assert [i for i in range(90) if i in held] == sorted(ids)
    assert all(end + 1 < start for end, start in zip(held.ends, held.starts[1:]))  # disjoint, apart
