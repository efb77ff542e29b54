"""Forget and correct: brain_sql.forget removes memories whole (their document,
full text, vectors, the edges they stated and the entities only they tied in) in
one transaction; remembering a stored `_id` replaces that memory and says so."""

import importlib
import json

import pytest

import brain_sql
from brain_sql import state
from brain_sql.config import MAX_FORGET_ITEMS, MAX_ID
from brain_sql.connection import sqlite3

from .conftest import edges, rows, snapshot, write

ZEBRA = {
    "_id": "r-zebra",
    "title": "Zebra rota",
    "text": "The zebra rota changes on Fridays.",
    "scope": "/acme",
    "tags": ["zebrarota"],
    "entities": ["Quokka Crew"],
    "relations": [{"type": "owned_by", "to": "Okapi Office"}],
}
OTHER = {"_id": "r-lunch", "title": "Lunch", "text": "Lunch is served at noon in the atrium.", "tags": ["office"]}


@pytest.fixture
def brain(vault_brain_copy):
    conn = brain_sql.connect(vault_brain_copy)
    brain_sql.remember(conn, [ZEBRA, OTHER])
    yield conn
    conn.close()


def memory_ids(conn, external_id):
    return [i for (i,) in conn.execute("select id from knowledge where external_id = ? order by id", (external_id,))]


def orphans(conn):
    """Entities nothing ties into the graph: no edge and no document."""
    return set(
        rows(
            conn,
            "select name from entities e where not exists (select 1 from relationships r "
            "where r.from_entity_id = e.id or r.to_entity_id = e.id) "
            "and not exists (select 1 from documents d where d.entity_id = e.id)",
        )
    )


def without(before, removed_ids, removed_documents):
    """A snapshot with the rows of removed memories and documents left out."""
    ids = set(removed_ids)
    return {
        "knowledge": [r for r in before["knowledge"] if r[0] not in ids],
        "fts": [r for r in before["fts"] if r[0] not in ids],
        "vectors": [r for r in before["vectors"] if r[0] not in ids],
        "relationships": [r for r in before["relationships"] if r[4] not in ids and r[5] not in removed_documents],
        "documents": [r for r in before["documents"] if r[0] not in removed_documents],
    }


def test_forgetting_a_record_removes_it_and_all_it_brought(brain):
    [zebra] = memory_ids(brain, "r-zebra")
    first = brain_sql.recall(brain, {"q": "zebra rota", "k": 3})  # builds the read state before the removal
    assert first["hits"][0]["id"] == zebra
    stated = rows(
        brain, "select id from relationships where knowledge_id = ? or document_id = 'remember#r-zebra'", (zebra,)
    )
    assert len(stated) == 3  # tagged_with #zebrarota, mentions Quokka Crew, owned_by Okapi Office
    before, orphans_before = snapshot(brain), orphans(brain)

    result = brain_sql.forget(brain, external_ids=["r-zebra"])

    assert result == {
        "removed": {
            "memories": [zebra],
            "external_ids": ["r-zebra"],
            "documents": 1,
            "relationships": len(stated),
            "entities": 4,
        },
        "not_found": {"ids": [], "external_ids": []},
    }
    assert not rows(brain, "select id from knowledge where id = ? or external_id = 'r-zebra'", (zebra,))
    assert not rows(brain, "select rowid from knowledge_fts where knowledge_fts match 'zebra'")
    assert not rows(brain, "select knowledge_id from vec_knowledge where knowledge_id = ?", (zebra,))
    assert not rows(
        brain, "select id from relationships where knowledge_id = ? or document_id = 'remember#r-zebra'", (zebra,)
    )
    assert not rows(brain, "select document_id from documents where document_id = 'remember#r-zebra'")
    names = {name for (name,) in rows(brain, "select name from entities")}
    assert not names & {"Zebra rota", "#zebrarota", "Quokka Crew", "Okapi Office"}
    assert "#office" in names  # the other record's tag
    assert orphans(brain) <= orphans_before
    # every other memory, its full text, vector, edges and document as they were
    after = snapshot(brain)
    expected = without(before, [zebra], {"remember#r-zebra"})
    assert {k: after[k] for k in expected} == expected
    assert brain_sql.check(brain) == {}
    # the read state built before follows the removal; so does a fresh connection
    assert all(hit["id"] != zebra for hit in brain_sql.recall(brain, {"q": "zebra rota", "k": 10})["hits"])
    assert state.current(brain, 256).fingerprint() == state.ReadState(256).build(brain).fingerprint()
    assert brain_sql.recall(brain, {"q": "lunch atrium noon", "k": 1})["hits"][0]["title"] == "Lunch"


def test_forgetting_one_chunk_forgets_its_whole_note(brain):
    chunks = rows(brain, "select id, document_id from knowledge where title = 'Brain File' order by chunk_index")
    assert len(chunks) == 3
    document_id = chunks[0][1]
    ids = [i for i, _ in chunks]
    brain_sql.recall(brain, {"q": "brain file tables migrations"})
    stated = rows(
        brain,
        "select count(*) from relationships where document_id = ? or knowledge_id in (?, ?, ?)",
        (document_id, *ids),
    )[0][0]
    before, orphans_before = snapshot(brain), orphans(brain)

    result = brain_sql.forget(brain, ids=[ids[1]])

    assert result["removed"]["memories"] == ids and result["removed"]["documents"] == 1
    assert result["removed"]["relationships"] == stated > 0 and result["removed"]["external_ids"] == []
    assert not rows(brain, "select id from knowledge where document_id = ?", (document_id,))
    assert not rows(brain, "select 1 from documents where document_id = ?", (document_id,))
    assert not rows(brain, "select rowid from knowledge_fts where rowid in (?, ?, ?)", ids)
    assert not rows(brain, "select knowledge_id from vec_knowledge where knowledge_id in (?, ?, ?)", ids)
    names = {name for (name,) in rows(brain, "select name from entities")}
    assert "brain.db" not in names  # its alias: only the note stated it
    # the note's own name stays while other notes link to it, with only their edges
    assert {edge for edge in edges(brain) if "Brain File" in edge} == {
        ("Ingest", "references", "Brain File"),
        ("datasette-brain", "references", "Brain File"),
        ("Ingest", "mentions", "Brain File"),
        ("datasette-brain", "mentions", "Brain File"),
    }
    assert orphans(brain) <= orphans_before
    expected = without(before, ids, {document_id})
    assert {k: snapshot(brain)[k] for k in expected} == expected
    assert brain_sql.check(brain) == {}
    assert all(
        h["id"] not in ids for h in brain_sql.recall(brain, {"q": "brain file tables migrations", "k": 20})["hits"]
    )
    assert state.current(brain, 256).fingerprint() == state.ReadState(256).build(brain).fingerprint()


def test_unknown_ids_are_reported_and_change_nothing(brain):
    before = snapshot(brain)
    result = brain_sql.forget(brain, ids=[10**9, MAX_ID], external_ids=["nobody", 404])
    assert result == {
        "removed": {"memories": [], "external_ids": [], "documents": 0, "relationships": 0, "entities": 0},
        "not_found": {"ids": [10**9, MAX_ID], "external_ids": ["nobody", "404"]},
    }
    assert snapshot(brain) == before
    # found and not found in one request; a repeated id counts once
    [lunch] = memory_ids(brain, "r-lunch")
    result = brain_sql.forget(brain, ids=[lunch, lunch, 10**9], external_ids=["r-lunch"])
    assert result["removed"]["memories"] == [lunch] and result["not_found"] == {"ids": [10**9], "external_ids": []}


def test_a_whole_number_external_id_is_the_text_remember_stored(brain):
    brain_sql.remember(brain, [{"_id": 7, "text": "Seven is a whole-number id."}])
    assert brain_sql.forget(brain, external_ids=[7])["removed"]["external_ids"] == ["7"]


@pytest.mark.parametrize(
    "request_, message",
    [
        ({}, "give the ids or external_ids"),
        ({"ids": [], "external_ids": []}, "give the ids or external_ids"),
        ({"ids": ["12"]}, "ids must be whole numbers"),
        ({"ids": [1.5]}, "ids must be whole numbers"),
        ({"ids": [True]}, "ids must be whole numbers"),
        ({"ids": 12}, "ids must be a list"),
        ({"ids": [2**63]}, "out of range"),
        ({"ids": [-1]}, "ids: -1 is out of range for a memory id: ids are 1 to 9,007,199,254,740,991"),
        ({"ids": [0]}, "ids: 0 is out of range for a memory id: ids are 1 to"),
        ({"ids": [MAX_ID + 1]}, "out of range for a memory id"),
        ({"external_ids": "r-zebra"}, "external_ids must be a list"),
        ({"external_ids": [None]}, "external_ids must be records' _ids: non-empty text or whole numbers"),
        ({"external_ids": [""]}, "external_ids must be records' _ids: non-empty text or whole numbers"),
        ({"external_ids": [{"_id": "x"}]}, "external_ids must be records' _ids: non-empty text or whole numbers"),
        ({"external_ids": ["\ud800"]}, "not valid Unicode"),
        (
            {"ids": list(range(1, MAX_FORGET_ITEMS - 399)), "external_ids": [str(i) for i in range(401)]},
            f"at most {MAX_FORGET_ITEMS:,}",
        ),
    ],
)
def test_bad_requests_name_the_problem_and_change_nothing(brain, request_, message):
    before = snapshot(brain)
    with pytest.raises(brain_sql.FieldError, match=message):
        brain_sql.forget(brain, **request_)
    assert snapshot(brain) == before


def test_as_many_items_as_the_limit_is_not_too_many(brain):
    result = brain_sql.forget(brain, ids=list(range(10**6, 10**6 + MAX_FORGET_ITEMS - 1)), external_ids=["r-lunch"])
    assert len(result["not_found"]["ids"]) == MAX_FORGET_ITEMS - 1 and result["removed"]["external_ids"] == ["r-lunch"]


def test_forget_is_one_transaction(brain, monkeypatch):
    before = snapshot(brain)
    module = importlib.import_module("brain_sql.forgetting")

    def fail(conn, keep):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(module, "prune_changes", fail)  # the last step, after every delete
    with pytest.raises(brain_sql.WriteError, match="nothing was forgotten"):
        brain_sql.forget(brain, external_ids=["r-zebra", "r-lunch"])
    assert snapshot(brain) == before and not brain.in_transaction


def test_forget_on_a_file_that_is_not_a_brain(tmp_path):
    conn = brain_sql.connect(tmp_path / "plain.db")
    conn.execute("create table t (x)")
    with pytest.raises(brain_sql.BrainError, match="not a brain"):
        brain_sql.forget(conn, ids=[1])


# -- correcting: remembering an _id that is stored already


def test_remembering_a_stored_id_updates_it(conn):
    first, [[memory_id]] = brain_sql.remember(conn, [ZEBRA])
    assert (first.documents_added, first.documents_updated, first.documents_unchanged) == (1, 0, 0)
    edited = {"_id": "r-zebra", "title": "Zebra rota", "text": "The zebra rota changes on Mondays now."}
    report, [ids] = brain_sql.remember(conn, [edited])
    assert (report.documents_added, report.documents_updated, report.documents_unchanged) == (0, 1, 0)
    assert memory_ids(conn, "r-zebra") == ids
    again, [same] = brain_sql.remember(conn, [edited])
    assert (again.documents_added, again.documents_updated, again.documents_unchanged) == (0, 0, 1) and same == ids
    assert brain_sql.check(conn) == {}


def test_an_update_replaces_the_whole_record(conn):
    full = {
        **ZEBRA,
        "expires_at": "2030-01-01",
        "observed_at": "2026-01-05",
        "confidence": 0.5,
        "owner": "dana",
        "class": "policy",
        "relevance_tier": 3,
        "color": "red",
    }
    brain_sql.remember(conn, [full])
    [memory_id] = memory_ids(conn, "r-zebra")
    conn.execute("update knowledge set flagged = 1 where id = ?", (memory_id,))
    created = rows(conn, "select created_at from knowledge where id = ?", (memory_id,))
    # the same text with most fields left out
    brain_sql.remember(conn, [{"_id": "r-zebra", "title": "Zebra rota", "text": ZEBRA["text"]}])
    row = dict(
        zip(
            (
                "id",
                "expires_at",
                "confidence",
                "owner",
                "class",
                "scope",
                "relevance_tier",
                "source",
                "tags",
                "metadata",
                "observed_at",
                "flagged",
            ),
            rows(
                conn,
                "select id, expires_at, confidence, owner, class, scope, relevance_tier, source, tags, metadata, "
                "observed_at, flagged from knowledge where external_id = 'r-zebra'",
            )[0],
        )
    )
    assert row == {
        "id": memory_id,
        "expires_at": None,
        "confidence": None,
        "owner": None,
        "class": "memory",
        "scope": "/",
        "relevance_tier": 1,
        "source": "remember",
        "tags": None,
        "metadata": None,
        "observed_at": "2026-01-05 00:00:00",
        "flagged": 1,
    }
    assert rows(conn, "select created_at from knowledge where id = ?", (memory_id,)) == created
    assert not rows(conn, "select id from relationships where document_id = 'remember#r-zebra'")
    # the names it no longer states stay known; forget removes them
    assert {"Quokka Crew", "Okapi Office"} <= {n for (n,) in rows(conn, "select name from entities")}
    # changed text is a new chunk, which may have another id, and stays flagged
    brain_sql.remember(conn, [{"_id": "r-zebra", "title": "Zebra rota", "text": "Now on Mondays."}])
    assert rows(conn, "select flagged from knowledge where external_id = 'r-zebra'") == [(1,)]
    assert brain_sql.check(conn) == {}


def test_remembering_the_id_of_a_file_record_updates_that_record(conn, tmp_path):
    path = write(tmp_path / "crm.jsonl", json.dumps({**ZEBRA, "expires_at": "2030-01-01"}) + "\n")
    brain_sql.ingest(conn, [path])
    [memory_id] = memory_ids(conn, "r-zebra")
    edited = {"_id": "r-zebra", "title": "Zebra rota", "text": "The zebra rota changes on Mondays now."}
    report, [ids] = brain_sql.remember(conn, [edited])
    assert (report.documents_added, report.documents_updated) == (0, 1)
    assert memory_ids(conn, "r-zebra") == ids
    assert rows(conn, "select document_id, source_path, content from knowledge where external_id = 'r-zebra'") == [
        (f"{path}#r-zebra", None, edited["text"])
    ]
    assert brain_sql.remember(conn, [edited])[0].documents_unchanged == 1
    # the file is still its record's source: ingesting it again puts its version back
    again = brain_sql.ingest(conn, [path])
    assert again.documents_updated == 1
    assert rows(conn, "select source_path, content from knowledge where external_id = 'r-zebra'") == [
        (str(path), ZEBRA["text"])
    ]
    assert brain_sql.check(conn) == {}


def test_an_id_stored_in_two_files_is_not_guessed(conn, tmp_path):
    for name in ("a.jsonl", "b.jsonl"):
        brain_sql.ingest(conn, [write(tmp_path / name, json.dumps({"_id": "1", "text": f"From {name}."}))])
    before = snapshot(conn)
    report, ids = brain_sql.remember(conn, [{"text": "fine"}, {"_id": 1, "text": "Which one?"}])
    assert ids == [] and len(report.errors) == 1
    assert report.errors[0].message.startswith("record 2: _id '1' is stored in 2 documents")
    assert snapshot(conn) == before


def test_an_edit_of_a_flagged_memory_stays_flagged(conn):
    """Someone flagged it: rewriting it through remember must not put it back in recall."""
    brain_sql.remember(conn, [{"_id": "leak", "title": "Leak", "text": "The vault code is 4711."}])
    with conn:
        conn.execute("update knowledge set flagged = 1 where external_id = 'leak'")
    report, _ = brain_sql.remember(conn, [{"_id": "leak", "title": "Leak", "text": "The vault code is 4711, or 4712."}])
    assert report.documents_updated == 1
    assert conn.execute("select flagged from knowledge where external_id = 'leak'").fetchall() == [(1,)]
    hits = brain_sql.recall(conn, {"q": "vault code", "cutoff": False})["hits"]
    assert all(hit["title"] != "Leak" for hit in hits)


def test_a_record_without_an_id_is_its_text_and_everything_it_gives(conn):
    """The same text with other metadata or tags is another memory, not an update."""
    brain_sql.remember(conn, [{"text": "same text here"}])
    report, _ = brain_sql.remember(conn, [{"text": "same text here", "metadata": {"a": 1}}])
    assert (report.documents_added, report.documents_updated) == (1, 0)
    report, _ = brain_sql.remember(conn, [{"text": "same text here", "confidence": 0.5, "metadata": {"a": 2}}])
    assert (report.documents_added, report.documents_updated) == (1, 0)
    report, _ = brain_sql.remember(conn, [{"text": "same text here"}])
    assert report.documents_unchanged == 1


def test_a_forgotten_id_is_never_given_to_another_memory(conn):
    """An agent holding the id of a forgotten memory reads nothing, never another
    memory: new memories get ids above every id ever given, by remember and ingest
    alike, and the read state follows them."""
    records = [{"_id": "a", "text": "The gate code is 1234."}, {"_id": "b", "text": "The boiler is serviced in May."}]
    _, [[first], [highest]] = brain_sql.remember(conn, records)
    state.current(conn, 256)  # built now, then follows the changes below
    brain_sql.forget(conn, ids=[highest])
    _, [[new]] = brain_sql.remember(conn, [{"_id": "c", "text": "Parcels go to the side door."}])
    assert new > highest and brain_sql.memory(conn, highest) is None
    brain_sql.forget(conn, ids=[new, first])  # the brain empty: still no id is given again
    _, [[newer]] = brain_sql.remember(conn, [{"_id": "d", "text": "Bins go out on Tuesday."}])
    assert newer > new
    assert state.current(conn, 256).fingerprint() == state.ReadState(256).build(conn).fingerprint()
    assert brain_sql.check(conn) == {}


def test_a_brain_from_before_the_id_mark_migrates_and_gives_no_id_again(conn):
    """m013 seeds the mark from the highest id stored: ids forgotten before it ran
    may have been given again then, none after."""
    _, [[low], [high]] = brain_sql.remember(conn, [{"text": "first note"}, {"text": "second note"}])
    with conn:  # as a brain written before m013
        for name in ("brain_ids_knowledge_insert", "brain_ids_knowledge_rekey"):
            conn.execute(f"drop trigger {name}")
        conn.execute("drop table brain_ids")
        conn.execute("delete from _sqlite_migrations where name = 'm013_id_mark'")
    assert brain_sql.pending_migrations(conn) == ["m013_id_mark"]
    brain_sql.migrate(conn)
    brain_sql.forget(conn, ids=[high])
    _, [[new]] = brain_sql.remember(conn, [{"text": "third note"}])
    assert new > high and brain_sql.check(conn) == {}


def test_check_finds_and_repairs_an_id_mark_left_behind(conn):
    """Rows written by plain SQL while the mark's trigger was dropped: check names
    the trigger and the mark, and --repair raises the mark over them."""
    brain_sql.remember(conn, [{"text": "first note"}])
    with conn:
        conn.execute("drop trigger brain_ids_knowledge_insert")
        conn.execute("insert into knowledge (id, content) values (40, 'written by hand')")
    found = brain_sql.check(conn)
    assert found["missing_triggers"] == ["brain_ids_knowledge_insert"] and found["id_mark_behind"] == [40]
    brain_sql.check(conn, repair=True)
    assert not {"missing_triggers", "id_mark_behind"} & set(brain_sql.check(conn))
    brain_sql.forget(conn, ids=[40])
    _, [[new]] = brain_sql.remember(conn, [{"text": "second note"}])
    assert new == 41


@pytest.mark.parametrize(
    "change",
    [
        "update brain_ids set seq = 0",
        "delete from brain_ids",
        "update brain_ids set seq = 'abc'",
        "update brain_ids set seq = 2.5",
        "drop table brain_ids",
    ],
)
def test_an_id_mark_set_back_with_plain_sql_is_named_in_words_and_restored(run, db_path, change):
    """The id mark keeps a forgotten memory's id from being given again: plain SQL
    that sets it back, empties, overwrites or drops it is named by check in words,
    and --repair restores it over every id the brain gave, the forgotten ones its
    change log names too, so no new memory takes a forgotten one's id."""
    conn = brain_sql.connect(db_path)
    _, ids = brain_sql.remember(conn, [{"text": "first note"}, {"text": "second note"}, {"text": "third note"}])
    forgotten = ids[-1][0]
    brain_sql.forget(conn, ids=[forgotten])
    conn.execute(change)
    conn.commit()
    conn.close()
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and "Traceback" not in found.output, found.output
    assert "the id mark" in found.output and "id_mark_behind" not in found.output, found.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    conn = brain_sql.connect(db_path)
    assert conn.execute("select seq from brain_ids where name = 'knowledge'").fetchone()[0] == forgotten
    _, [[new]] = brain_sql.remember(conn, [{"text": "fourth note"}])
    assert new > forgotten and brain_sql.check(conn) == {}


def test_an_id_two_records_carry_is_not_guessed(conn, tmp_path):
    """Row 1 of one file and record 1 of another are two records: forgetting "1"
    would lose both, so it is refused as remember refuses to guess which to update,
    and the one meant is forgotten by its memory ids."""
    write(tmp_path / "a.csv", "id,text\n1,csv one\n2,csv two\n")
    write(tmp_path / "b.jsonl", json.dumps({"_id": "1", "text": "jsonl one"}))
    brain_sql.ingest(conn, [tmp_path / "a.csv", tmp_path / "b.jsonl"])
    before = snapshot(conn)
    with pytest.raises(brain_sql.FieldError, match=r'external_ids: "1" is the _id of 2 records .*a\.csv.*b\.jsonl'):
        brain_sql.forget(conn, external_ids=["1"])
    assert snapshot(conn) == before
    assert brain_sql.forget(conn, external_ids=["2"])["removed"]["external_ids"] == ["2"]  # one record's: forgotten
    (csv_one,) = [i for (i,) in conn.execute("select id from knowledge where content = 'csv one'")]
    assert brain_sql.forget(conn, ids=[csv_one])["removed"]["memories"] == [csv_one]
    assert brain_sql.forget(conn, external_ids=[1])["removed"]["external_ids"] == ["1"]  # now one record's
    assert rows(conn, "select count(*) from knowledge") == [(0,)]


@pytest.mark.parametrize("moved_to", ["a.jsonl", "z.jsonl"])  # read before its old file, and after
def test_a_flagged_memory_moved_to_another_file_stays_flagged(conn, tmp_path, moved_to):
    """A record moved to another file (same _id, scope and class), or a note renamed
    (same text), came back into recall unflagged: its old document was removed and
    the new one written as new. What one ingest removes flagged and writes anew is
    flagged, in the transaction that removes the one or writes the other, whichever
    comes second; a flagged memory that stays flags nothing else, nor does one in
    another scope, nor a document rewritten in place."""
    vault = tmp_path / "vault"
    write(
        vault / "m.jsonl",
        json.dumps({"_id": "leak", "text": "The vault code is 4711."})
        + "\n"
        + json.dumps({"_id": "x", "text": "Stays."})
        + "\n",
    )
    write(vault / "keep.jsonl", json.dumps({"_id": "c", "text": "Call the vendor.", "source": "x"}) + "\n")
    write(vault / "plan.md", "# Plan\n\nThe launch is on Friday and the password is swordfish.\n")
    write(vault / "dup.jsonl", json.dumps({"text": "Call the vendor."}) + "\n")
    write(vault / "yes.jsonl", json.dumps({"_id": "1", "text": "Yes."}) + "\n")
    brain_sql.ingest(conn, [vault])
    flagged_ids = [
        row[0]
        for row in conn.execute(
            "select id from knowledge where content like '%4711%' or content like '%swordfish%' "
            "or source_path like '%dup.jsonl' or source_path like '%yes.jsonl'"
        )
    ]
    assert brain_sql.flag(conn, flagged_ids)["changed"] == flagged_ids
    # the record moves out of a file that stays
    write(vault / "m.jsonl", json.dumps({"_id": "x", "text": "Stays."}) + "\n")
    write(vault / moved_to, json.dumps({"_id": "leak", "text": "The vault code is 4711, or 4712."}) + "\n")
    (vault / "dup.jsonl").unlink()  # a flagged record gone, while another file's record with its text is edited
    write(vault / "keep.jsonl", json.dumps({"_id": "c", "text": "Call the vendor.", "source": "y"}) + "\n")
    write(vault / "other.jsonl", json.dumps({"text": "Call the vendor.", "scope": "/team"}) + "\n")
    write(vault / "new.jsonl", json.dumps({"_id": "1", "text": "Yes."}) + "\n")  # the flagged one stays
    (vault / "plan.md").rename(vault / "renamed.md")
    brain_sql.ingest(conn, [vault], prune=True)
    assert rows(
        conn, "select source_path like ?, flagged from knowledge where external_id = 'leak'", [f"%{moved_to}"]
    ) == [(1, 1)]
    assert rows(
        conn, "select flagged from knowledge where source_path like '%renamed.md' and content like '%swordfish%'"
    ) == [(1,)]
    unflagged = "select count(*), sum(flagged) from knowledge where source_path like ?"
    for name in ("%keep.jsonl", "%other.jsonl", "%new.jsonl", "%m.jsonl"):
        assert rows(conn, unflagged, [name]) == [(1, 0)], name
    hits = brain_sql.recall(conn, {"q": "vault code swordfish password", "cutoff": False})["hits"]
    assert not any("4711" in hit["content"] or "swordfish" in hit["content"] for hit in hits)


def test_a_flagged_record_moved_over_two_ingests_is_flagged_when_its_original_goes(conn, tmp_path):
    """A record moved to another file and ingested before its old file was pruned
    (or by a watcher ingesting each file alone, or a run interrupted before its
    prune) came back into recall unflagged for good. When the flagged original is
    removed, a copy written after it with the same _id and text, in the same scope
    and class, is flagged; another file's row with that _id and other text is not,
    nor one whose text, the same, is too short to tell a copy ("Yes")."""
    vault = tmp_path / "vault"
    write(vault / "a.jsonl", json.dumps({"_id": "r1", "text": "Secret plan alpha: launch at dawn."}) + "\n")
    write(vault / "rows.jsonl", json.dumps({"_id": "1", "text": "The vault code is 4711."}) + "\n")
    write(vault / "survey-2023.jsonl", json.dumps({"_id": "7", "text": "Yes"}) + "\n")
    # a record of four chunks, the last a short one: it carries the record's flag as the others do
    long = "\n\n".join([(f"Paragraph {i} " + "word " * 400)[:1998] for i in range(3)] + ["Ok."])
    write(vault / "long.jsonl", json.dumps({"_id": "R1", "text": long}) + "\n")
    budget = {"_id": "M1", "text": "The quarterly budget review moved to Thursday."}
    office = {"_id": "G1", "text": "The office moves to the third floor in May."}
    write(vault / "budget.jsonl", json.dumps(budget) + "\n")
    write(vault / "office.jsonl", json.dumps(office) + "\n")
    brain_sql.ingest(conn, [vault])
    flagged = [i for (i,) in conn.execute("select id from knowledge")]
    assert brain_sql.flag(conn, flagged)["changed"] == flagged
    (vault / "a.jsonl").rename(vault / "b.jsonl")
    (vault / "long.jsonl").rename(vault / "long-copy.jsonl")
    write(vault / "budget-copy.jsonl", json.dumps(budget) + "\n")
    write(vault / "office-copy.jsonl", json.dumps(office) + "\n")
    write(vault / "other" / "rows.jsonl", json.dumps({"_id": "1", "text": "Water the roses."}) + "\n")
    write(vault / "survey-2024.jsonl", json.dumps({"_id": "7", "text": "Yes"}) + "\n")  # too short to be a copy
    brain_sql.ingest(conn, [vault])  # no --prune: the original stays, and the copy is another memory meanwhile
    copy = "select flagged from knowledge where source_path like '%b.jsonl'"
    assert rows(conn, copy) == [(0,)]
    (vault / "rows.jsonl").unlink()
    (vault / "survey-2023.jsonl").unlink()
    (vault / "budget.jsonl").unlink()  # its copy given a title in the same run: no edit of its text, still a copy
    write(vault / "budget-copy.jsonl", json.dumps({**budget, "title": "Budget"}) + "\n")
    (vault / "office.jsonl").unlink()  # its copy gone in the same run too: flagged as a copy, then removed
    (vault / "office-copy.jsonl").unlink()
    report = brain_sql.ingest(conn, [vault], prune=True)
    assert (report.chunks_removed, report.chunks_carried_flag, report.errors) == (11, 6, [])
    assert "11 removed, 6 flagged as moved copies of flagged memories;" in report.summary()
    assert rows(conn, "select flagged from knowledge where external_id = 'M1'") == [(1,)]
    assert rows(conn, copy) == [(1,)]
    assert rows(conn, "select chunk_index, flagged from knowledge where external_id = 'R1'") == [
        (0, 1),
        (1, 1),
        (2, 1),
        (3, 1),
    ]
    for other in ("%other/rows.jsonl", "%survey-2024.jsonl"):
        assert rows(conn, "select flagged from knowledge where source_path like ?", [other]) == [(0,)], other
    hits = brain_sql.recall(conn, {"q": "secret plan alpha", "cutoff": False})["hits"]
    assert not any("alpha" in hit["content"] for hit in hits)
    assert brain_sql.check(conn) == {}


def test_only_a_whole_unedited_copy_carries_a_removed_records_flag(conn, tmp_path):
    """A stored copy carries a removed flagged record's flag only when it is the same
    document (its _id, every chunk's text), and not edited in the same run: an edited
    copy was flagged on its unchanged chunks, or whole when edited in the removing run;
    another file's "Ok." took the flag of a long record ending in "Ok."; and two short
    removed records added up to a long one."""
    vault = tmp_path / "vault"
    paragraphs = [(f"Paragraph {i} " + "word " * 400)[:1998] for i in range(3)]
    records = {
        "long.jsonl": {"_id": "R1", "text": "\n\n".join(paragraphs + ["Ok."])},
        "edited-later.jsonl": {"_id": "R2", "text": "The quarterly budget review moved to Friday."},
        "y1.jsonl": {"_id": "1", "text": "Yes, I agree."},
        "y2.jsonl": {"_id": "1", "text": "Yes, I agree."},
    }
    rota = {"_id": "R3", "text": "The pager rota changes on Mondays from now on."}  # in a file that stays
    lunch = {"_id": "R4", "text": "Lunch for the whole team is at noon on Tuesdays."}
    write(vault / "rota.jsonl", "\n".join(json.dumps(r) for r in (rota, lunch, {"text": "Stays."})) + "\n")
    for name, record in records.items():
        write(vault / name, json.dumps(record) + "\n")
    write(vault / "keep.md", "# Keep\n\nA note that stays.\n")
    brain_sql.ingest(conn, [vault])
    assert brain_sql.flag(conn, [i for (i,) in conn.execute("select id from knowledge where external_id is not null")])
    copies = {
        "long-copy.jsonl": {"_id": "R1", "text": "\n\n".join(paragraphs[:2] + ["Paragraph 2 rewritten.", "Ok."])},
        "ok.jsonl": {"_id": "R1", "text": "Ok."},
        "edited-later-copy.jsonl": records["edited-later.jsonl"],
        "y3.jsonl": records["y1.jsonl"],
        "rota-copy.jsonl": rota,
        "lunch-copy.jsonl": lunch,
    }
    for name, record in copies.items():
        write(vault / name, json.dumps(record) + "\n")
    brain_sql.ingest(conn, [vault])
    for name in records:
        (vault / name).unlink()
    # edited in the run that removes its flagged original
    write(vault / "edited-later-copy.jsonl", json.dumps({"_id": "R2", "text": "The review moved to Monday."}) + "\n")
    # dropped from its file, removed before the run writes, while its copy moves to another scope: no copy
    write(vault / "rota.jsonl", json.dumps({"text": "Stays."}) + "\n")
    write(vault / "rota-copy.jsonl", json.dumps({**rota, "scope": "/home"}) + "\n")
    said = {"speaker": "Ann", "session_id": "s1", "text": "Lunch moved to Wednesdays."}  # made a turn: no copy
    write(vault / "lunch-copy.jsonl", json.dumps({**lunch, **said}) + "\n")
    report = brain_sql.ingest(conn, [vault], prune=True)
    assert (report.chunks_removed, report.chunks_carried_flag, report.errors) == (11, 0, [])
    assert "flagged as moved copies" not in report.summary()
    assert rows(conn, "select count(*), sum(flagged) from knowledge") == [(10, 0)]
    assert brain_sql.check(conn) == {}


def test_a_flag_the_user_set_survives_a_run_that_carries_another(conn, tmp_path):
    """In a run that carried a removed record's flag to its copy, a flagged history
    version rewritten with edited text came back unflagged: only current memories
    were read for the flags the run had carried."""
    text = "The on-call engineer must page the database team before any schema migration."
    records = [{"_document": "x#D", "content": "Deploys are on Fridays."}]
    history = {"_document": "x#H", "content": "Deploys were on Mondays.", "_version_of": "x#D"}
    write(tmp_path / "a.jsonl", json.dumps({"_id": "m-1", "content": text}) + "\n" + json.dumps({"text": "Stays."}))
    write(tmp_path / "h.jsonl", "\n".join(json.dumps(r) for r in [*records, history]) + "\n")
    brain_sql.ingest(conn, [tmp_path])
    flagged = [i for (i,) in conn.execute("select id from knowledge where document_id = 'x#H' or external_id = 'm-1'")]
    brain_sql.flag(conn, flagged)
    write(tmp_path / "b.jsonl", json.dumps({"_id": "m-1", "content": text}) + "\n")
    brain_sql.ingest(conn, [tmp_path / "b.jsonl"])
    write(tmp_path / "a.jsonl", json.dumps({"text": "Stays."}) + "\n")  # m-1 leaves: its copy in b.jsonl carries
    edited = {**history, "content": "Deploys were on Mondays, until May."}
    write(tmp_path / "h.jsonl", "\n".join(json.dumps(r) for r in [*records, edited]) + "\n")
    report = brain_sql.ingest(conn, [tmp_path])
    assert report.chunks_carried_flag == 1 and not report.errors
    assert rows(conn, "select flagged from knowledge where document_id = 'x#H'") == [(1,)]
    assert brain_sql.check(conn) == {}
