"""Validity in time: `as_of` recalls what was true then; a memory whose validity
ended, or that a newer one superseded, is out of today's answers and found as of
a time inside its validity — in every leg, through the API and the SQL recall."""

import json

import pytest

import brain_sql
from brain_sql import state
from brain_sql.hybrid import run_legs, vector_leg
from brain_sql.querydoc import parse
from brain_sql.vectors import quantize_int8
from brain_sql.wording import shown

from .conftest import rows, without_rules, write

NOW = "2026-11-29 12:00:00"
MODEL = "wordllama/l2_supercat"
Q = "what is Alice's role?"


def remember(conn, *records):
    report, ids = brain_sql.remember(conn, list(records))
    assert not report.errors, report.errors
    return report, ids


def contents(conn, **query):
    result = brain_sql.recall(conn, {"q": Q, "now": NOW, "cutoff": False, **query})
    return [hit["content"] for hit in result["hits"]]


def role(text, **fields):
    return {"_id": "alice-role", "title": "Alice's role", "text": text, **fields}


def versions(conn):
    return conn.execute(
        "select content, valid_from, superseded_at, superseded_by, version_of from knowledge order by id"
    ).fetchall()


def test_an_ended_validity_is_out_of_todays_answers_and_found_as_of_then(conn):
    remember(conn, role("Alice ran the support desk.", valid_from="2023-01-01", valid_to="2025-01-01"))
    assert contents(conn) == []
    assert contents(conn, as_of="2024-06-01") == ["Alice ran the support desk."]
    assert contents(conn, as_of="2022-06-01") == []  # not yet valid
    assert contents(conn, as_of="2025-01-01") == []  # valid_to is the first moment it no longer holds
    echoed = brain_sql.recall(conn, {"q": Q, "now": NOW, "as_of": "-2y"})["query"]
    assert echoed["as_of"] == "2024-11-29 12:00:00" and echoed["now"] == NOW
    assert brain_sql.recall(conn, {"q": Q, "now": NOW})["query"]["as_of"] == NOW


def test_a_later_valid_from_keeps_the_stored_version_as_history(conn):
    _, [[first]] = remember(conn, role("Alice is a support engineer.", valid_from="2024-01-01"))
    report, [[second]] = remember(conn, role("Alice is the support manager.", valid_from="2026-03-01"))
    assert (report.documents_added, report.documents_updated) == (1, 0)
    assert second != first and conn.execute("select count(*) from knowledge where id = ?", (first,)).fetchone()[0]
    assert versions(conn) == [
        (
            "Alice is a support engineer.",
            "2024-01-01 00:00:00",
            "2026-03-01 00:00:00",
            "remember#alice-role",
            "remember#alice-role",
        ),
        ("Alice is the support manager.", "2026-03-01 00:00:00", None, None, None),
    ]
    assert contents(conn) == ["Alice is the support manager."]
    assert contents(conn, as_of="2025-06-01") == ["Alice is a support engineer."]
    # a third version: the second is history too, each valid until the next begins
    remember(conn, role("Alice is head of support.", valid_from="2026-09-01"))
    assert contents(conn, as_of="2026-05-01") == ["Alice is the support manager."]
    assert contents(conn) == ["Alice is head of support."]
    assert brain_sql.check(conn) == {}


def test_the_same_valid_from_or_none_corrects_in_place(conn):
    _, [[first]] = remember(conn, role("Alice is a support engineer.", valid_from="2026-01-01"))
    for fields in ({"valid_from": "2026-01-01"}, {}):
        report, _ = remember(conn, role(f"Alice is a support engineer ({len(fields)}).", **fields))
        assert report.documents_updated == 1
        assert conn.execute("select count(*) from knowledge").fetchone()[0] == 1
    assert contents(conn) == ["Alice is a support engineer (0)."]


def test_an_earlier_valid_from_is_kept_as_history_never_over_the_later_version(conn):
    """A back-dated version arriving after a later one destroys nothing: it is
    history, valid until the later one begins; stored again it is unchanged, and
    with the same valid_from it corrects that history version."""
    _, [[june]] = remember(conn, role("Alice is the support manager.", valid_from="2024-06-01"))
    report, [[january]] = remember(conn, role("Alice is a support engineer.", valid_from="2024-01-01"))
    assert (report.documents_added, report.documents_updated) == (1, 0) and january != june
    assert versions(conn) == [
        ("Alice is the support manager.", "2024-06-01 00:00:00", None, None, None),
        (
            "Alice is a support engineer.",
            "2024-01-01 00:00:00",
            "2024-06-01 00:00:00",
            "remember#alice-role",
            "remember#alice-role",
        ),
    ]
    assert contents(conn) == ["Alice is the support manager."]
    assert contents(conn, as_of="2024-03-01") == ["Alice is a support engineer."]
    report, [[again]] = remember(conn, role("Alice is a support engineer.", valid_from="2024-01-01"))
    assert (report.documents_unchanged, again) == (1, january)
    report, _ = remember(conn, role("Alice is a support engineer (corrected).", valid_from="2024-01-01"))
    remember(conn, role("Alice is an intern.", valid_from="2023-01-01"))
    assert [row[0] for row in versions(conn)] == [
        "Alice is the support manager.",
        "Alice is a support engineer (corrected).",
        "Alice is an intern.",
    ]
    assert contents(conn, as_of="2023-06-01") == ["Alice is an intern."]
    assert contents(conn, as_of="2024-03-01") == ["Alice is a support engineer (corrected)."]
    assert brain_sql.check(conn) == {}
    # forgetting the current version makes the latest earlier one current again
    brain_sql.forget(conn, ids=[june])
    assert contents(conn) == ["Alice is a support engineer (corrected)."]
    assert brain_sql.check(conn) == {}


def test_a_file_back_dating_a_record_keeps_the_later_version(conn, tmp_path):
    path = tmp_path / "prices.jsonl"
    write(
        path,
        json.dumps(
            {"_id": "h1", "title": "Hat price", "text": "The hat costs 10 dollars.", "valid_from": "2024-06-01"}
        ),
    )
    brain_sql.ingest(conn, [path])
    write(
        path,
        json.dumps(
            {"_id": "h1", "title": "Hat price", "text": "The hat costs 12 dollars.", "valid_from": "2024-01-01"}
        ),
    )
    report = brain_sql.ingest(conn, [path])
    assert (report.documents_added, report.chunks_removed) == (1, 0)
    assert brain_sql.ingest(conn, [path]).documents_unchanged == 1  # idempotent: nothing is added again
    found = conn.execute("select content, superseded_at from knowledge order by valid_from").fetchall()
    assert found == [("The hat costs 12 dollars.", "2024-06-01 00:00:00"), ("The hat costs 10 dollars.", None)]
    assert brain_sql.check(conn) == {}


def test_a_file_giving_one_earlier_version_twice_is_refused_by_file_and_line(conn, tmp_path):
    """A back-dated record and a placed history version (`_document`, `_version_of`)
    of the same valid_from in one file were two documents under one id (check:
    incomplete_documents). The second is refused, named by the file being read."""
    path = tmp_path / "prices.jsonl"
    write(path, json.dumps({"_id": "h1", "text": "The hat costs 10 dollars.", "valid_from": "2024-06-01"}))
    brain_sql.ingest(conn, [path])
    record = f"{path}#h1"
    back_dated = {"_id": "h1", "text": "The hat costs 12 dollars.", "valid_from": "2024-01-01"}
    placed = {"_document": f"{record}@2024-01-01 00:00:00", "_version_of": record, "text": "The hat costs 11."}
    write(path, json.dumps(back_dated) + "\n" + json.dumps(placed))
    report = brain_sql.ingest(conn, [path])
    assert [str(e) for e in report.errors] == [
        f"{path}:2: it is the earlier version {shown(record + '@2024-01-01 00:00:00')} of {shown(record)} that an "
        "earlier record also gives: give it once"
    ]
    assert conn.execute("select content from knowledge order by valid_from").fetchall() == [
        ("The hat costs 12 dollars.",),
        ("The hat costs 10 dollars.",),
    ]
    assert brain_sql.check(conn) == {}
    # the version's id given as a record's _document (no _version_of) after the record placed there
    again = {"_document": f"{record}@2024-01-01 00:00:00", "text": "The hat costs 13."}
    write(path, json.dumps({**back_dated, "text": "The hat costs 14 dollars."}) + "\n" + json.dumps(again))
    assert [e.line for e in brain_sql.ingest(conn, [path]).errors] == [2]
    assert brain_sql.check(conn) == {}


def test_an_ingested_version_of_itself_of_history_or_in_a_cycle_is_refused(conn, tmp_path):
    """Ingest took a `_version_of` naming the record itself, two records naming each
    other, or a record with history of its own made another's: a record history of
    nothing, out of recall, and check said nothing. Each is refused by file and line."""
    path = tmp_path / "a.jsonl"
    write(path, json.dumps({"_id": "x", "text": "Lead is Bob.", "valid_from": "2024-06-01"}))
    brain_sql.ingest(conn, [path])
    x, y = f"{path}#x", f"{path}#y"
    history = f"{x}@2024-01-01 00:00:00"
    export = tmp_path / "export" / "e.jsonl"
    for records, lines in (
        ([{"_document": x, "_version_of": x, "text": "Lead is Bob."}], [1]),
        ([{"_document": y, "_version_of": "z", "text": "A."}, {"_document": "z", "_version_of": y, "text": "B."}], [2]),
        (
            [
                {"_document": history, "_version_of": x, "text": "Lead was Al."},
                {"_document": x, "_version_of": y, "text": "Lead is Bob."},
            ],
            [2],
        ),
    ):
        write(export, "\n".join(json.dumps(r) for r in records) + "\n")
        assert [e.line for e in brain_sql.ingest(conn, [export]).errors] == lines
    assert rows(conn, "select version_of from knowledge where document_id = ?", [x]) == [(None,)]
    assert brain_sql.recall(conn, {"q": "Lead is Bob", "cutoff": False})["hits"]
    # x's history given to a newer record E, then back to x, then x made E's, in three files of one run: x
    # has its history still, and is refused (it would be history of history, with nothing current)
    files = []
    for name, record in (
        ("1", {"_document": history, "_version_of": f"{x}-E"}),
        ("2", {"_document": history, "_version_of": x}),
    ):
        files.append(write(tmp_path / "run" / f"{name}.jsonl", json.dumps({**record, "text": "Lead was Al."}) + "\n"))
    files.append(
        write(tmp_path / "run" / "3.jsonl", json.dumps({"_document": x, "_version_of": f"{x}-E", "text": "B"}))
    )
    report = brain_sql.ingest(conn, files)
    assert [(e.path.rsplit("/", 1)[-1], e.line) for e in report.errors] == [("3.jsonl", 1)]
    assert rows(conn, "select version_of from knowledge where document_id = ?", [x]) == [(None,)]
    assert brain_sql.check(conn) == {"orphan_versions": ["z"]}  # y, a version of z, which no file gave


@pytest.mark.parametrize("version", ["earlier", "later"])
@pytest.mark.parametrize("order", ["version first", "_version_of first"])
def test_a_run_that_gives_a_record_history_and_makes_it_history_is_refused(conn, tmp_path, order, version):
    """One file gave D an earlier version by its valid_from (or a later version,
    keeping the stored one as history), another made D an earlier version of E,
    in one run: history of history, out of recall with nothing current, and no
    error (check only named it since); or the later version written over the one
    made history, its text lost. The second of the two is refused by file and line."""
    path = tmp_path / "one.jsonl"
    current = {"_id": "D", "text": "Deploy on Fridays.", "valid_from": "2024-06-01"}
    write(path, json.dumps(current) + "\n" + json.dumps({"_id": "E", "text": "Deploy at will."}) + "\n")
    brain_sql.ingest(conn, [path])
    d, e = f"{path}#D", f"{path}#E"
    begins = "2024-01-01" if version == "earlier" else "2025-01-01"
    other = {"_document": d, "_id": "D", "text": "Deploy on Mondays.", "valid_from": begins}
    regrouped = {"_document": d, "_version_of": e, **current}
    files = [("b.jsonl", other), ("c.jsonl", regrouped)]
    if order == "_version_of first":
        files.reverse()
    paths = [write(tmp_path / "run" / name, json.dumps(r) + "\n") for name, r in files]
    report = brain_sql.ingest(conn, paths)
    assert [(e.path.rsplit("/", 1)[-1], e.line) for e in report.errors] == [(files[1][0], 1)]
    assert brain_sql.check(conn) == {}


def test_a_later_version_that_is_an_earlier_version_of_another_record_is_refused(conn, tmp_path):
    """A record with a later valid_from than its stored version keeps that one as
    its history; given a `_version_of` too, it made that history of history (check
    only named it since). Refused, by ingest and by remember, nothing written."""
    path = tmp_path / "one.jsonl"
    records = [{"_id": "D", "text": "Deploy on Fridays.", "valid_from": "2024-01-01"}, {"_id": "E", "text": "At will."}]
    write(path, "\n".join(json.dumps(r) for r in records) + "\n")
    brain_sql.ingest(conn, [path])
    d, e = f"{path}#D", f"{path}#E"
    later = {"_document": d, "_id": "D", "text": "Deploy on Saturdays.", "valid_from": "2025-01-01", "_version_of": e}
    before = rows(conn, "select document_id, version_of, content from knowledge order by id")
    report, _ = brain_sql.remember(conn, [later])
    assert [m.message for m in report.errors] == [
        f"record 1: it is a later version of {shown(d)} (its valid_from is later than the stored one's, or the "
        "stored one has none), which would keep the stored one as an earlier version of its own: it cannot become "
        "an earlier version of another record (give it the stored valid_from, or none)"
    ]
    write(tmp_path / "two.jsonl", json.dumps(later) + "\n")
    assert [m.line for m in brain_sql.ingest(conn, [tmp_path / "two.jsonl"]).errors] == [1]
    assert rows(conn, "select document_id, version_of, content from knowledge order by id") == before
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("begins", ["2022-01-01", "2023-01-01", "2023-06-01"])
def test_a_record_made_history_given_again_changed_is_refused_not_written_over_its_history(conn, tmp_path, begins):
    """X made an earlier version of Y (a later _version_of), then given again
    changed with `_document` or through remember, with an earlier, the same or a
    later valid_from: it was written over that history version as a record of its
    own, the regroup undone and, with a later valid_from, its text lost with no
    error. Refused, saying how to change that version; unchanged, it stays history."""
    path = tmp_path / "one.jsonl"
    x = {"_id": "X", "text": "Deploy on Fridays.", "valid_from": "2023-01-01"}
    write(
        path,
        json.dumps({"_id": "Y", "text": "Deploy at will.", "valid_from": "2024-01-01"}) + "\n" + json.dumps(x) + "\n",
    )
    brain_sql.ingest(conn, [path])
    d, y = f"{path}#X", f"{path}#Y"
    placed = {"_document": d, "_source_path": str(path), **x}
    remember(conn, {**placed, "_version_of": y})
    before = rows(conn, "select document_id, version_of, valid_from, content from knowledge order by id")
    assert before[1] == (d, y, "2023-01-01 00:00:00", x["text"])
    changed = {"_document": d, "_id": "X", "text": "Deploy on Mondays.", "valid_from": begins}
    report, _ = brain_sql.remember(conn, [changed])
    assert [e.message for e in report.errors] == [
        f"record 1: its id {shown(d)} is that of an earlier version of {shown(y)} kept as history: to change that "
        f"version, give it '_version_of' {shown(y)} (with '_document'); else give the record another _id"
    ]
    write(tmp_path / "two.jsonl", json.dumps(changed) + "\n")
    assert [(e.path, e.line) for e in brain_sql.ingest(conn, [tmp_path / "two.jsonl"]).errors] == [
        (str(tmp_path / "two.jsonl"), 1)
    ]
    remember(conn, placed)  # the same again: unchanged
    remember(conn, {**placed, "class": "memory", "scope": "/"})  # the same memories: written, still history
    for moved in ({"valid_from": "2025-01-01"}, {"scope": "/team"}):  # later than Y, or out of Y's scope
        assert [e.line for e in brain_sql.remember(conn, [{**placed, **moved}])[0].errors] == [None]
    assert brain_sql.ingest(conn, [path]).errors == []  # its own file, unchanged
    assert rows(conn, "select document_id, version_of, valid_from, content from knowledge order by id") == before
    remember(conn, {**changed, "_version_of": y})  # as the refusal says: that version changed, still Y's history
    assert rows(conn, "select version_of, content from knowledge where document_id = ?", [d]) == [
        (y, "Deploy on Mondays.")
    ]
    assert brain_sql.check(conn) == {}
    conn.execute("delete from knowledge where document_id = ?", [y])  # Y gone: X is history of no record
    remember(conn, {**changed, "text": "Deploy on Tuesdays."})  # nothing to keep it under: current again
    assert rows(conn, "select version_of, content from knowledge where document_id = ?", [d]) == [
        (None, "Deploy on Tuesdays.")
    ]


def test_a_record_and_its_history_moved_under_a_newer_record_are_both_its_history(conn, tmp_path):
    """D with its earlier version H, then E, newer than both: a file or a remember
    call making H and D earlier versions of E was refused (D had history of its
    own) though H moved first. It is taken; a later file of the run putting H back
    under D is refused, and so is D when H stays under it."""

    def record(name, text, version_of=None):
        return {"_document": f"x#{name}", "_id": name, "text": text} | (
            {"_version_of": f"x#{version_of}"} if version_of else {}
        )

    start = [record("D", "Deploy on Fridays."), record("H", "Deploy on Mondays.", "D"), record("E", "Deploy at will.")]
    moved = [record("H", start[1]["text"], "E"), record("D", start[0]["text"], "E")]
    write(tmp_path / "one.jsonl", "\n".join(json.dumps(r) for r in start) + "\n")
    brain_sql.ingest(conn, [tmp_path / "one.jsonl"])
    run = [write(tmp_path / "run" / "a.jsonl", json.dumps(moved[0]) + "\n")]  # H moved under E ...
    run.append(write(tmp_path / "run" / "b.jsonl", json.dumps(start[1]) + "\n"))  # ... and back under D
    run.append(write(tmp_path / "run" / "c.jsonl", json.dumps(moved[1]) + "\n"))
    assert [(e.path.rsplit("/", 1)[-1], e.line) for e in brain_sql.ingest(conn, run).errors] == [("c.jsonl", 1)]
    assert brain_sql.check(conn) == {}
    write(tmp_path / "two.jsonl", "\n".join(json.dumps(r) for r in moved) + "\n")
    assert not brain_sql.ingest(conn, [tmp_path / "two.jsonl"]).errors
    other = brain_sql.connect(tmp_path / "other.db")
    remember(other, *start)
    remember(other, *moved[::-1])  # a call is taken whole: its order does not matter
    for brain in (conn, other):
        assert rows(brain, "select document_id, version_of from knowledge order by document_id") == [
            ("x#D", "x#E"),
            ("x#E", None),
            ("x#H", "x#E"),
        ]
        assert brain_sql.check(brain) == {}


def test_check_names_versions_of_a_version_plain_sql_wrote_and_repair_leaves_them(conn):
    """An earlier version of a record that is itself an earlier version (or of itself)
    has no current version: out of recall, and check said nothing."""
    remember(conn, {"_id": "a", "text": "Alice leads QA"}, {"_id": "b", "text": "Bob leads ops"})
    assert left_to_the_user(
        conn,
        "nested_versions",
        "update knowledge set version_of = 'remember#b' where external_id = 'a'",
        "update knowledge set version_of = 'remember#a' where external_id = 'b'",
    ) == ["remember#a", "remember#b"]


def left_to_the_user(conn, problem, *updates):
    """What check names under `problem` once plain SQL ran `updates`; --repair leaves it as it was."""
    with conn:
        without_rules(conn)
        for sql in updates:
            conn.execute(sql)
    found = brain_sql.check(conn)[problem]
    assert brain_sql.check(conn, repair=True)["unrepaired"][problem] == found
    return found


def test_supersedes_names_the_memory_a_newer_one_replaces(conn):
    remember(conn, role("Alice is a support engineer.", valid_from="2024-01-01"))
    remember(
        conn,
        {
            "_id": "promotion",
            "title": "Alice promoted",
            "text": "Alice is now the support manager.",
            "supersedes": "alice-role",
            "valid_from": "2026-03-01",
        },
    )
    assert contents(conn) == ["Alice is now the support manager."]
    assert contents(conn, as_of="2025-01-01") == ["Alice is a support engineer."]
    superseded = conn.execute("select superseded_at, superseded_by from knowledge where external_id = 'alice-role'")
    assert superseded.fetchone() == ("2026-03-01 00:00:00", "remember#promotion")
    # forgetting the newer memory makes the older one current again
    brain_sql.forget(conn, external_ids=["promotion"])
    assert contents(conn) == ["Alice is a support engineer."]
    assert versions(conn)[0][2:] == (None, None, None)


def test_supersedes_without_valid_from_replaces_from_when_it_was_observed(conn):
    remember(conn, role("Alice is a support engineer."))
    remember(
        conn,
        {
            "_id": "n",
            "title": "Alice's new role",
            "text": "Alice leads support now.",
            "supersedes": "alice-role",
            "observed_at": "2026-06-01T09:00:00Z",
        },
    )
    assert conn.execute("select superseded_at from knowledge where external_id = 'alice-role'").fetchone()[0] == (
        "2026-06-01 09:00:00"
    )
    # a memory without valid_from holds at any time; the one it replaced, until it was observed
    assert "Alice is a support engineer." in contents(conn, as_of="2026-05-01")
    assert contents(conn) == ["Alice leads support now."]


def test_forgetting_a_version(conn):
    _, [[first]] = remember(conn, role("Alice is a support engineer.", valid_from="2024-01-01"))
    _, [[second]] = remember(conn, role("Alice is the support manager.", valid_from="2026-03-01"))
    # by id: that version goes, and the one before it is the record's current version again
    brain_sql.forget(conn, ids=[second])
    assert versions(conn) == [("Alice is a support engineer.", "2024-01-01 00:00:00", None, None, None)]
    assert conn.execute("select document_id from knowledge").fetchone()[0] == "remember#alice-role"
    assert contents(conn) == ["Alice is a support engineer."]
    # by _id: every version goes
    remember(conn, role("Alice is the support manager.", valid_from="2026-03-01"))
    removed = brain_sql.forget(conn, external_ids=["alice-role"])["removed"]
    assert len(removed["memories"]) == 2 and not versions(conn)
    assert brain_sql.check(conn) == {}


def test_a_new_version_of_a_flagged_memory_is_flagged(conn):
    remember(conn, role("Alice is a support engineer.", valid_from="2024-01-01"))
    with conn:
        conn.execute("update knowledge set flagged = 1")
    remember(conn, role("Alice is the support manager.", valid_from="2026-03-01"))
    remember(conn, role("Alice was an intern.", valid_from="2023-01-01"))  # an earlier one, kept as history
    assert conn.execute("select count(*), sum(flagged) from knowledge").fetchone() == (3, 3)


def test_a_file_keeps_the_history_of_its_records(conn, tmp_path):
    path = tmp_path / "people.jsonl"
    write(path, json.dumps(role("Alice is a support engineer.", valid_from="2024-01-01")))
    brain_sql.ingest(conn, [path])
    write(path, json.dumps(role("Alice is the support manager.", valid_from="2026-03-01")))
    report = brain_sql.ingest(conn, [path])
    assert report.chunks_removed == 0 and len(versions(conn)) == 2
    assert brain_sql.ingest(conn, [path]).documents_unchanged == 1  # idempotent: the history stays
    assert contents(conn, as_of="2025-01-01") == ["Alice is a support engineer."]
    # a record gone from its file goes with its history (every record of the file
    # replaced: kept unless confirmed, test_cli_ingest)
    write(path, json.dumps({"_id": "other", "text": "Bob runs sales."}))
    brain_sql.ingest(conn, [path], prune_all=True)
    assert [row[0] for row in versions(conn)] == ["Bob runs sales."]


RECORDS = (
    [
        {
            "_id": "rota-2024",
            "title": "Pager rota",
            "text": "The pager rota: Kim leads escalations on weekends.",
            "valid_from": "2024-01-01",
            "valid_to": "2025-01-01",
        },
        {
            "_id": "rota-2025",
            "title": "Pager rota",
            "text": "The pager rota: Dana leads escalations on weekends.",
            "valid_from": "2025-01-01",
        },
        {
            "_id": "rota-2026",
            "title": "Pager rota",
            "text": "The pager rota: Sam leads escalations on weekends.",
            "valid_from": "2026-01-01",
            "supersedes": "rota-2025",
        },
    ]
    + [
        # nearer to the query than any rota, and valid only from 2030: a validity
        # filter applied after the k cut would leave the vector leg empty
        {
            "_id": f"later{i}",
            "title": "Pager rota",
            "text": f"Who leads escalations on weekends? Dana Sam Kim, rota {i}.",
            "valid_from": "2030-01-01",
        }
        for i in range(120)
    ]
    + [
        {"_id": f"other{i}", "text": f"Other note {i}: {topic}."}
        for i, topic in enumerate(
            [
                "the office closes at six",
                "invoices go out monthly",
                "the garden needs water",
                "lunch is at noon",
                "the printer is on floor two",
                "badges are blue",
                "parking is free",
                "the wifi password changed",
            ]
        )
    ]
)


@pytest.fixture(scope="module")
def rotas(tmp_path_factory):
    folder = tmp_path_factory.mktemp("validity")
    path = write(folder / "rotas.jsonl", "\n".join(json.dumps(r) for r in RECORDS))
    connection = brain_sql.connect(folder / "brain.db")
    assert not brain_sql.ingest(connection, [path]).errors
    return connection


@pytest.mark.parametrize(
    "as_of, found", [(None, "rota-2026"), ("2025-06-01", "rota-2025"), ("2024-06-01", "rota-2024")]
)
def test_every_leg_applies_as_of_inside_its_own_search(rotas, as_of, found):
    external = dict(rotas.execute("select id, external_id from knowledge"))
    doc = parse(
        {
            "q": "who leads escalations on weekends on the pager rota? Dana Sam Kim",
            "now": NOW,
            **({"as_of": as_of} if as_of else {}),
        }
    )
    legs = run_legs(rotas, doc, MODEL)
    assert legs.ranked.get("graph"), "the query names the rota: the graph leg walks from it"
    for leg, ranked in legs.ranked.items():
        rotas_found = [external[i] for i in ranked if external[i].startswith("rota")]
        assert rotas_found == [found], leg
        assert not any(external[i].startswith("later") for i in ranked), leg
    # the vector leg as vec0 computes it, with the filters as its constraints, agrees
    in_sql = vector_leg(rotas, quantize_int8(legs.vectors)[0].tobytes(), legs.filters)
    assert [i for i, _ in in_sql] == legs.ranked["vector"]


def test_the_read_state_follows_versions_and_forgets(conn):
    remember(conn, role("Alice is a support engineer.", valid_from="2024-01-01"))
    state.current(conn, 256)  # built before the writes below, then followed
    remember(conn, role("Alice is the support manager.", valid_from="2026-03-01"))
    remember(conn, {"_id": "p", "title": "Alice promoted", "text": "Alice leads.", "supersedes": "alice-role"})
    brain_sql.forget(conn, external_ids=["p"])
    assert state.current(conn, 256).fingerprint() == state.ReadState(256).build(conn).fingerprint()


def test_check_finds_and_repairs_stale_supersession(conn):
    remember(conn, role("Alice is a support engineer.", valid_from="2024-01-01"))
    remember(conn, role("Alice is the support manager.", valid_from="2026-03-01"))
    with conn:
        conn.execute("update knowledge set superseded_at = null, superseded_by = null")
    problems = brain_sql.check(conn, repair=True)
    assert len(problems["stale_supersession"]) == 1
    assert brain_sql.check(conn) == {}
    assert contents(conn) == ["Alice is the support manager."]


def test_an_older_brain_migrates_keeping_its_vectors(conn):
    remember(conn, role("Alice is a support engineer.", valid_from="2024-01-01", valid_to="2025-01-01"))
    vectors = conn.execute("select knowledge_id, embedding_int8, embedding_bit from vec_knowledge").fetchall()
    # as a brain written before validity: no supersession columns, no validity filter columns
    with conn:
        without_rules(conn)  # nor the rules, which m015 made later
        conn.execute("delete from _sqlite_migrations where name = 'm015_rules'")
        conn.execute("drop trigger knowledge_vec_filters")  # m009 writes it anew
        conn.execute("drop index idx_knowledge_supersedes")
        conn.execute("drop index idx_knowledge_version_of")
        for column in ("supersedes", "superseded_at", "superseded_by", "version_of"):
            conn.execute(f"alter table knowledge drop column {column}")
        conn.execute("drop table vec_knowledge")
        conn.execute(
            "create virtual table vec_knowledge using vec0(knowledge_id integer primary key, "
            "embedding_int8 int8[256] distance_metric=cosine, embedding_bit bit[256], class text)"
        )
        conn.executemany("insert into vec_knowledge values (?, vec_int8(?), vec_bit(?), 'memory')", vectors)
        conn.execute("delete from _sqlite_migrations where name = 'm009_validity'")
    assert brain_sql.check(conn) == {"pending_migrations": ["m009_validity", "m015_rules"]}
    brain_sql.migrate(conn)
    assert conn.execute("select knowledge_id, embedding_int8, embedding_bit from vec_knowledge").fetchall() == vectors
    assert brain_sql.check(conn) == {}
    assert contents(conn, as_of="2024-06-01") == ["Alice is a support engineer."] and contents(conn) == []


def test_bad_as_of_is_a_query_error():
    for value, message in (("someday", "is not a date"), (7, "must be a string"), ("-99999y", "out of range")):
        with pytest.raises(brain_sql.QueryError, match=message) as raised:
            brain_sql.parse_querydoc({"q": "x", "as_of": value})
        assert raised.value.field == "as_of"


def test_only_a_memory_its_readers_may_read_supersedes_one(conn):
    """A newer memory in another scope (one a reader of the old one may not read),
    or a flagged one, replaces nothing: no reader's answer changes because of a
    memory it cannot see. In a parent scope it does."""
    old = {
        "_id": "pager-old",
        "title": "Pager lead",
        "text": "Kim leads the pager rota.",
        "scope": "/acme/support",
        "valid_from": "2025-01-01",
    }
    remember(
        conn,
        old,
        {
            "_id": "pager-legal",
            "title": "Pager lead",
            "text": "Legal's pager rota.",
            "scope": "/acme/legal",
            "valid_from": "2026-01-01",
            "supersedes": "pager-old",
        },
    )
    assert versions(conn)[0][2:4] == (None, None)
    flagged = {
        "_id": "pager-new",
        "title": "Pager lead",
        "text": "Sam leads the pager rota.",
        "scope": "/acme",
        "valid_from": "2026-02-01",
        "supersedes": "pager-old",
    }
    _, ids = remember(conn, flagged)
    assert versions(conn)[0][2] == "2026-02-01 00:00:00"  # /acme is a parent of /acme/support: it replaces
    brain_sql.flag(conn, ids[0])
    assert versions(conn)[0][2:4] == (None, None)  # flagged, it replaces nothing
    assert brain_sql.check(conn) == {}


def policy(_id, text, **fields):
    return {"_id": _id, "title": f"policy {_id}", "text": f"The refund window is {text} zebra.", **fields}


def test_a_supersedes_cycle_is_refused_by_name_and_a_record_may_not_supersede_itself(conn, tmp_path):
    """a, then b superseding a, then a again superseding b: each would hide the
    other, and neither be recalled. That last record is refused naming the cycle
    (remember: nothing stored; ingest: the record skipped with its file and line),
    as is a record superseding its own _id; the brain stays as it was."""
    remember(conn, policy("a", "30 days"))
    remember(conn, policy("b", "60 days", supersedes="a"))
    before = versions(conn)
    report, ids = brain_sql.remember(conn, [policy("a", "90 days", supersedes="b")])
    assert [e.message for e in report.errors] == [
        'record 1: supersedes "b", which supersedes "a", this record\'s own _id: a cycle, in which each memory '
        "would hide the next from recall; correct or forget one of them instead"
    ]
    report, _ = brain_sql.remember(conn, [policy("c", "10 days", supersedes="c")])
    assert [e.message for e in report.errors] == [
        'record 1: supersedes its own _id "c": a memory cannot replace itself'
    ]
    assert versions(conn) == before
    # within one file too, the lines after the cycle's first record going in
    lines = [
        policy("x", "1 day", supersedes="y"),
        policy("y", "2 days", supersedes="z"),
        policy("z", "3", supersedes="x"),
    ]
    report = brain_sql.ingest(conn, [write(tmp_path / "cycle.jsonl", "\n".join(json.dumps(r) for r in lines))])
    assert [(e.path.rsplit("/", 1)[-1], e.line, e.message.split(",")[0]) for e in report.errors] == [
        ("cycle.jsonl", 3, 'supersedes "x"')
    ]
    assert brain_sql.check(conn) == {}
    assert "The refund window is 60 days zebra." in contents(conn, q="refund window zebra")


def test_check_names_a_supersedes_cycle_plain_sql_wrote_and_repair_leaves_it_to_the_user(conn):
    remember(conn, policy("a", "30 days"), policy("b", "60 days", supersedes="a"), policy("c", "5 days"))
    assert left_to_the_user(
        conn,
        "supersede_cycles",
        "update knowledge set supersedes = 'b' where external_id = 'a'",
        "update knowledge set supersedes = 'c' where external_id = 'c'",
    ) == ['"a" and "b" supersede one another', '"c" supersedes itself']
