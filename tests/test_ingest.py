"""Ingest through the library: its report counts what was stored, a bad record is
skipped with its file and line while the rest go in, and a prune that would empty
a folder is refused. `sqlite-utils brain ingest` is tested in test_cli_ingest.py,
remember in test_remember.py."""

import collections
import json
import os
import random
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import brain_sql
from brain_sql import extract, mounts, pipeline, records
from brain_sql.connection import sqlite3
from brain_sql.markdown import parse_markdown
from brain_sql.wording import shown

from .conftest import VAULT, rows, write


def test_the_report_counts_what_was_stored(tmp_path):
    """Counts come from the rows written, never from the change log's rows too."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [VAULT])
    stored = {
        table: conn.execute(f"select count(*) from {table}").fetchone()[0]
        for table in ("knowledge", "entities", "relationships", "documents")
    }
    assert (report.chunks_added, report.entities, report.relationships, report.documents_added) == (
        stored["knowledge"],
        stored["entities"],
        stored["relationships"],
        stored["documents"],
    )


def test_numbers_past_pythons_digit_limit_and_deep_nesting_skip_one_record(tmp_path):
    """json and yaml raise ValueError for an integer of over 4,300 digits, and
    RecursionError for deep nesting; YAML reads .nan and .inf, numbers JSON (and
    SQLite's JSON, which reads the metadata) has not: each is that record's
    problem, named with its file and line, and the rest still go in."""
    folder = tmp_path / "in"
    folder.mkdir()
    big = "9" * 5000
    (folder / "records.jsonl").write_text(
        '{"_id": "ok1", "text": "fine"}\n{"_id": "big", "text": "x", "confidence": '
        + big
        + "}\n"
        + '{"_id": "deep", "text": "x", "metadata": '
        + "[" * 3000
        + "]" * 3000
        + "}\n"
        + '{"_id": "ok2", "text": "also fine"}\n'
    )
    (folder / "big.md").write_text(f"---\nconfidence: {big}\n---\n# Big\n\ntext\n")
    (folder / "deep.md").write_text("---\nx: " + "[" * 3000 + "]" * 3000 + "\n---\n# Deep\n\ntext\n")
    (folder / "fine.md").write_text("# Fine\n\na note that is fine\n")
    (folder / "hex.md").write_text("---\nextra: 0x" + "f" * 4000 + "\n---\n# Hex\n\ntext\n")
    (folder / "surrogate.md").write_text('---\ntitle: "\\uD800"\n---\n# S\n\ntext\n')
    (folder / "yes.md").write_text("---\ntitle: true\n---\n# Yes\n\ntext\n")  # a YAML 1.2 boolean: no title
    (folder / "nan.md").write_text(
        "---\nx: .nan\n---\n# NaN\n\ntext\n"
    )  # JSON has no NaN: SQLite's JSON could not read it
    (folder / "inf.md").write_text("---\nx: {y: [1, -.inf]}\n---\n# Inf\n\ntext\n")
    (folder / "bools.jsonl").write_text(
        '{"title": true, "text": "a title that is not one"}\n{"_id": "nan", "text": "x", "metadata": {"x": NaN}}\n'
    )
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [folder])
    problems = sorted((e.path.rsplit("/", 1)[-1], e.line) for e in report.errors)
    assert problems == [
        ("big.md", 1),
        ("bools.jsonl", 1),
        ("bools.jsonl", 2),
        ("deep.md", 1),
        ("inf.md", 1),
        ("nan.md", 1),
        ("records.jsonl", 2),
        ("records.jsonl", 3),
        ("surrogate.md", 1),
        ("yes.md", 1),
    ], report.errors
    assert {r[0] for r in rows(conn, "select coalesce(external_id, title) from knowledge")} == {
        "ok1",
        "ok2",
        "fine",
        "hex",
    }
    # YAML 1.1's hexadecimal is kept as written, as YAML 1.2 readers keep it (it was an int past the digit limit)
    assert rows(conn, "select metadata ->> 'extra' from knowledge where title = 'hex'") == [("0x" + "f" * 4000,)]
    # told without Python's advice to programmers (review 107, L1)
    assert not any("set_int_max_str_digits" in e.message for e in report.errors), report.errors
    assert [e.message for e in report.errors if e.path.endswith("big.md")] == [
        "broken frontmatter: a whole number of more than 4,300 digits, more than is read: write it as text"
    ]


def test_a_folder_held_back_stays_held_whichever_run_stored_its_new_note_and_whatever_holds_it(tmp_path):
    """A "not mounted" note stored in an unmounted drive's mount point read, on the
    next --prune, as a file the folder kept, and the rest was pruned: when a refused
    run stored it (review 128), a plain ingest did (review 129, H4), or the refusal
    moved from the folder to the vault's root and back (H1). The brain holds each
    refused folder with the documents it held; a file of those back, edited or not,
    is one it kept (M1)."""
    vault = tmp_path / "vault"
    for name in ("sub/a0.md", "sub/a1.md", "sub/a2.md", "x.md"):
        write(vault / name, f"# {Path(name).stem}\n\nThe note {name} holds.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [vault])
    count = "select count(*) from knowledge"
    held = rows(conn, count)[0][0]
    away = tmp_path / "away"
    (vault / "sub").rename(away)
    write(vault / "sub" / "NOT_MOUNTED.md", "# Not mounted\n\nThe drive mounts here.\n")
    brain_sql.ingest(conn, [vault])  # an hourly plain ingest stores the note first
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match="it holds only new ones"):
            brain_sql.ingest(conn, [vault], prune=True)
        assert rows(conn, count) == [(held + 1,)]
    (vault / "x.md").rename(tmp_path / "x.md")  # the root's files gone too: the refusal moves to the root
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {vault} was pruned"):
            brain_sql.ingest(conn, [vault], prune=True)
        assert rows(conn, count) == [(held + 1,)]
    (tmp_path / "x.md").rename(vault / "x.md")  # and back to the folder
    with pytest.raises(brain_sql.PruneRefused, match="it holds only new ones"):
        brain_sql.ingest(conn, [vault], prune=True)
    (vault / "sub" / "NOT_MOUNTED.md").unlink()  # remounted, one note edited meanwhile, one deleted
    (vault / "sub").rmdir()
    (away / "a1.md").unlink()
    (away / "a0.md").write_text("# a0\n\nEdited while the drive was away.\n")
    away.rename(vault / "sub")
    report = brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, "select title from knowledge order by 1") == [("a0",), ("a2",), ("x",)], report.summary()
    assert rows(conn, "select count(*) from brain_meta where key like 'prune_refused%'") == [(0,)]


def _unmounted(tmp_path):
    """A vault of two notes in sub/ and one beside it, stored, then sub/'s drive unmounted."""
    vault = tmp_path / "vault"
    for name in ("sub/a0.md", "sub/a1.md", "x.md"):
        write(vault / name, f"# {Path(name).stem}\n\nThe note {name} holds.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [vault])
    (vault / "sub").rename(tmp_path / "away")
    return vault, conn


@pytest.mark.parametrize("how", ["one file", "notes swapped"])
def test_a_note_in_an_unmounted_folder_holds_it_however_it_came(tmp_path, how):
    """Review 130: a "not mounted" note given alone to an ingest (a watcher), or
    swapped for another note and back, each then read as a file the folder kept,
    and the nightly --prune removed the rest. (One in a new folder of the mount
    point stored by a plain ingest is not held: reviews 131, 132.)"""
    vault, conn = _unmounted(tmp_path)
    note = vault / "sub" / "NOT_MOUNTED.md"
    write(note, "# Not mounted\n\nThe drive mounts here.\n")
    brain_sql.ingest(conn, [note if how == "one file" else vault])  # stored before any prune judged it
    if how == "notes swapped":
        with pytest.raises(brain_sql.PruneRefused):
            brain_sql.ingest(conn, [vault], prune=True)
        note.rename(vault / "sub" / "SYNC_ERROR.md")
        brain_sql.ingest(conn, [vault])
        (vault / "sub" / "SYNC_ERROR.md").rename(note)
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {vault / 'sub'} was pruned"):
            brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, "select count(*) from knowledge where title in ('a0', 'a1')") == [(2,)]


@pytest.mark.parametrize("first", ["vault", "parent"])
def test_a_folder_above_the_vault_whose_one_note_is_gone_holds_nothing_of_the_vault(tmp_path, first):
    """A note ingested once from the folder above a vault, since deleted: the walk
    from the vault's new folders up to the nearest folder holding stored files held
    that folder, every note of the vault was then new to the guard, and an unmounted
    folder of it was pruned (review 131, H1), also when the vault's first ingest was
    given that folder (review 132). A folder new to the brain holds nothing."""
    write(tmp_path / "loose.md", "# Loose\n\nA note once ingested alone.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [tmp_path / "loose.md"])
    (tmp_path / "loose.md").unlink()
    vault = tmp_path / "vault"
    for name in ("sub/a0.md", "sub/a1.md", "x.md"):
        write(vault / name, f"# {Path(name).stem}\n\nThe note {name} holds.\n")
    brain_sql.ingest(conn, [vault if first == "vault" else tmp_path])
    assert rows(conn, "select count(*) from brain_meta where key like 'prune_refused%'") == [(0,)]
    (vault / "sub").rename(tmp_path / "away")
    write(vault / "sub" / "NOT_MOUNTED.md", "# Not mounted\n\nThe drive mounts here.\n")
    brain_sql.ingest(conn, [vault])
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {vault / 'sub'} was pruned"):
            brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, "select count(*) from knowledge where title in ('a0', 'a1')") == [(2,)]


def _export(prefix, count=6):
    return "".join(json.dumps({"_id": f"{prefix}{i}", "text": f"Record {prefix} {i}."}) + "\n" for i in range(count))


def _written_over(tmp_path, first, then, count=6):
    """A records file of `first`'s records, stored, then written over by `then`'s: refused, held."""
    crm = write(tmp_path / "crm.jsonl", _export(first, count))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [crm])
    write(crm, _export(then, count))
    with pytest.raises(brain_sql.PruneRefused):
        brain_sql.ingest(conn, [crm])
    return crm, conn


@pytest.mark.parametrize("how", ["written over", "edited"])
def test_a_run_stopped_inside_a_records_file_written_over_leaves_it_held(tmp_path, monkeypatch, how):
    """Review 130, H4: a run stopped (Ctrl-C, a BrainBusy) after the first batch of a
    records file written over by another export committed, before the file's end
    judged it, held nothing, and the next run, finding the new records it stored,
    removed every earlier one. The transaction that first writes a record of such a
    file holds it; a file whose earlier records come after its new ones (edited) is
    judged at its end as before, and its hold forgotten."""

    crm = write(tmp_path / "crm.jsonl", _export("old"))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [crm])
    write(crm, _export("new") + ("" if how == "written over" else _export("old")))
    monkeypatch.setattr(pipeline, "INGEST_BATCH_DOCUMENTS", 2)
    commit = pipeline._Pipeline._commit

    def commit_then_stop(self, batch):
        commit(self, batch)
        raise KeyboardInterrupt  # stopped once the file's first batch is written

    monkeypatch.setattr(pipeline._Pipeline, "_commit", commit_then_stop)
    with pytest.raises(KeyboardInterrupt):
        brain_sql.ingest(conn, [crm])
    monkeypatch.setattr(pipeline._Pipeline, "_commit", commit)
    count = "select count(*) from knowledge where external_id like ?"
    assert rows(conn, count, ["old%"]) == [(6,)] and rows(conn, count, ["new%"]) == [(2,)]
    if how == "written over":
        for _ in range(2):
            with pytest.raises(brain_sql.PruneRefused, match="that would remove all 6 memories"):
                brain_sql.ingest(conn, [crm])
            assert rows(conn, count, ["old%"]) == [(6,)] and rows(conn, count, ["new%"]) == [(6,)]
        brain_sql.ingest(conn, [crm], prune_all=True)
        assert rows(conn, count, ["old%"]) == [(0,)]
    else:
        brain_sql.ingest(conn, [crm])
        assert rows(conn, count, ["old%"]) == [(6,)] and rows(conn, count, ["new%"]) == [(6,)]
    assert rows(conn, "select count(*) from brain_meta where key like 'replaced_refused%'") == [(0,)]


@pytest.mark.parametrize("other", ["ran to its end", "stopped after its first batch"])
def test_an_ingest_reaching_a_file_another_has_held_meanwhile_keeps_its_records(tmp_path, monkeypatch, other):
    """Review 133, H1: an ingest read the holds at its start, and reached a records
    file written over by another export after a second ingest (a watcher given the
    file) had stored its new records: the file, holding some of its stored records,
    was read as edited, and every earlier record removed (exit 0). A file's hold is
    read when the file is reached."""
    crm = write(tmp_path / "crm.jsonl", _export("old"))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [crm])
    write(crm, _export("new"))
    documents, commit = pipeline._Pipeline.documents, pipeline._Pipeline._commit

    def commit_then_stop(self, batch):
        commit(self, batch)
        raise KeyboardInterrupt

    def the_other_first(self, where, params):
        if params == (str(crm),) and not ran:
            ran.append(True)
            if other != "ran to its end":
                monkeypatch.setattr(pipeline, "INGEST_BATCH_DOCUMENTS", 2)
                monkeypatch.setattr(pipeline._Pipeline, "_commit", commit_then_stop)
            with pytest.raises(brain_sql.PruneRefused if other == "ran to its end" else KeyboardInterrupt):
                brain_sql.ingest(brain_sql.connect(tmp_path / "brain.db"), [crm])
            monkeypatch.setattr(pipeline._Pipeline, "_commit", commit)
        return documents(self, where, params)

    ran = []
    monkeypatch.setattr(pipeline._Pipeline, "documents", the_other_first)
    with pytest.raises(brain_sql.PruneRefused, match="that would remove all 6 memories"):
        brain_sql.ingest(conn, [crm])
    assert ran
    count = "select count(*) from knowledge where external_id like ?"
    assert rows(conn, count, ["old%"]) == [(6,)] and rows(conn, count, ["new%"]) == [(6,)]


def test_a_hold_whose_records_were_forgotten_leaves_the_file_guarded_as_any(tmp_path):
    """Review 133, H2: a file written over was held; the user forgot its earlier
    records (told to look at the file); a failed sync then emptied it, and the hold,
    holding nothing stored, let every record it held go. An emptied file keeps its
    records, held or not."""
    crm = write(tmp_path / "crm.jsonl", _export("old"))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [crm])
    write(crm, _export("new"))
    with pytest.raises(brain_sql.PruneRefused, match="that would remove all 6 memories"):
        brain_sql.ingest(conn, [crm])
    brain_sql.forget(conn, external_ids=[f"old{i}" for i in range(6)])
    write(crm, "")
    with pytest.raises(brain_sql.PruneRefused, match="holds no records now"):
        brain_sql.ingest(conn, [crm])
    assert rows(conn, "select count(*) from knowledge where external_id like 'new%'") == [(6,)]


def test_a_records_file_with_a_bad_record_ends_the_hold_it_made_when_an_earlier_record_came(tmp_path, monkeypatch):
    """Review 133, M1: an export putting its new records first, with one bad record,
    was held by its first write, and the bad record kept the file's end from
    forgetting that, though its earlier records all came after: every later run
    refused the file. A file with a bad record ends no hold but the one it made."""
    crm = write(tmp_path / "crm.jsonl", _export("old"))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [crm])
    monkeypatch.setattr(pipeline, "INGEST_BATCH_DOCUMENTS", 2)
    write(crm, _export("new") + '{"_id": "bad"}\n' + _export("old"))
    report = brain_sql.ingest(conn, [crm])
    assert [e.line for e in report.errors] == [7]
    assert rows(conn, "select count(*) from brain_meta where key like 'replaced_refused%'") == [(0,)]
    write(crm, _export("new", 8))  # the next export: the old records aged out
    report = brain_sql.ingest(conn, [crm])
    assert rows(conn, "select count(*) from knowledge where external_id like 'old%'") == [(0,)], report.summary()


def test_holds_are_a_row_each_and_the_one_row_versions_before_read_is_kept_in_step(tmp_path):
    """Holds are one brain_meta row each (`replaced_refused:FILE`, `prune_refused:FOLDER`),
    so an ingest reading one file reads its one hold, when it reaches it. Versions
    before 7 December 2026 read one row a kind ({name: ids}) alone: it is written
    beside them whenever they change (review 134: an older ingest still running, or a
    downgrade, pruned what the rows held), and a brain holding only it holds as it did."""
    crm, conn = _written_over(tmp_path, "old", "new")
    listed = "select key, value from brain_meta where key like 'replaced_refused%' order by key"
    (whole, (key, value)) = rows(conn, listed)
    assert whole == ("replaced_refused", json.dumps({str(crm): json.loads(value)})) and key == f"replaced_refused:{crm}"
    with conn:
        conn.execute("delete from brain_meta where key = ?", [key])  # as a version before wrote it
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match="that would remove all 6 memories"):
            brain_sql.ingest(conn, [crm])
        assert rows(conn, listed) == [whole, (key, value)]
    assert rows(conn, "select count(*) from knowledge where external_id like 'old%'") == [(6,)]
    write(crm, _export("old"))  # the earlier export back: forgotten, both
    brain_sql.ingest(conn, [crm])
    assert rows(conn, listed) == []


@pytest.mark.parametrize("spoilt", ["'oops'", "json_set(value, '$.\"' || ? || '\"', 7)"], ids=["whole", "entry"])
def test_a_hold_whose_one_row_plain_sql_spoilt_still_holds_by_its_own_row(tmp_path, spoilt):
    """Review 138, H1: the one row of all holds spoilt by plain SQL, whole or the
    file's entry, made the file's own intact row read as a hold an older version
    had ended, and the next run removed the earlier records. A row the one row
    cannot speak for holds; check names the spoilt row, and its repair keeps both."""
    crm, conn = _written_over(tmp_path, "old", "new", 3)
    with conn:
        params = [str(crm)] if "?" in spoilt else []
        conn.execute(f"update brain_meta set value = {spoilt} where key = 'replaced_refused'", params)
    assert brain_sql.check(conn) == {"unreadable_holds": ["replaced_refused"]}
    for repair in (False, True):
        if repair:
            brain_sql.check(conn, repair=True)
            assert brain_sql.check(conn) == {}
        with pytest.raises(brain_sql.PruneRefused, match="that would remove all 3 memories"):
            brain_sql.ingest(conn, [crm])
        assert rows(conn, "select count(*) from knowledge where external_id like 'old%'") == [(3,)]


def test_a_row_an_older_version_held_again_otherwise_is_read_as_it_held_it(tmp_path):
    """Review 138, H4: a version before 7 December 2026 that held a file again, with
    other records, wrote only the one row; the row it did not know, joined to it,
    named a record the file still held, and the file read as edited: its earlier
    records were removed. The one row's entry is the hold."""
    crm, conn = _written_over(tmp_path, "a", "b", 2)
    a_ids = json.loads(rows(conn, "select value from brain_meta where key = ?", [f"replaced_refused:{crm}"])[0][0])
    b_ids = sorted(i.replace("#a", "#b") for i in a_ids)
    with conn:  # as the older version holds it again: its one row alone, now holding the b records
        conn.execute("update brain_meta set value = ? where key = 'replaced_refused'", [json.dumps({str(crm): b_ids})])
    write(crm, _export("a", 1))  # a0 back, and b0, b1 gone: held against the b records, it is written over
    with pytest.raises(brain_sql.PruneRefused, match="that would remove all 2 memories"):
        brain_sql.ingest(conn, [crm])
    assert rows(conn, "select count(*) from knowledge where external_id like 'b%'") == [(2,)]


def test_a_hold_a_version_before_ended_in_its_one_row_is_ended(tmp_path):
    """Review 137: a version before 7 December 2026 ends a hold in the one row it
    reads, and leaves the row `replaced_refused:FILE` it does not know; read again,
    that row held the file against records long gone, and every later run refused
    it. A row the one row does not name (but one a run wrote as it went) is ended."""
    crm, conn = _written_over(tmp_path, "old", "new", 3)
    ((key, value),) = rows(conn, "select key, value from brain_meta where key like 'replaced_refused:%'")
    write(crm, _export("old", 3) + _export("new", 1))  # the older version's run: the hold ended, new1, new2 gone
    brain_sql.ingest(conn, [crm])
    with conn:
        conn.execute("insert into brain_meta (key, value) values (?, ?)", [key, value])  # the row it left
    write(crm, _export("new", 1) + '{"_id": "z0", "text": "Record z 0."}\n')  # an edit: new0 kept, old ones gone
    brain_sql.ingest(conn, [crm])
    assert rows(conn, "select external_id from knowledge order by 1") == [("new0",), ("z0",)]
    assert rows(conn, "select count(*) from brain_meta where key like 'replaced_refused%'") == [(0,)]


@pytest.mark.parametrize(
    "value",
    ["'not json'", """'{"a": 1}'""", """'["a", 2]'""", "'[]x'", "null", "cast(x'5b22ff225d' as text)", "whole"],
    ids=["text", "object", "mixed", "broken", "null", "not utf-8", "one entry of the one row"],
)
def test_a_hold_plain_sql_wrote_in_another_shape_is_named_by_check_and_repair_keeps_the_rest(tmp_path, value):
    """A hold row in another shape holds nothing (every other hold still does); check
    names it rather than leaving the guard's loss unsaid (review 129, L5), text that
    is not UTF-8 too, where it stopped every ingest and check (review 135, M1), and
    --repair removes it. One bad entry of the one row versions before 7 December 2026
    kept every hold in is mended, its other holds kept (review 135, H1: the repair
    deleted the row, and the next --prune pruned the unmounted folder)."""
    vault, conn = _unmounted(tmp_path)
    write(vault / "sub" / "NOT_MOUNTED.md", "# Not mounted\n\nThe drive mounts here.\n")
    with pytest.raises(brain_sql.PruneRefused):
        brain_sql.ingest(conn, [vault], prune=True)
    assert brain_sql.check(conn) == {}
    bad = "prune_refused" if value == "whole" else f"replaced_refused:{tmp_path / 'crm.jsonl'}"
    with conn:
        if value == "whole":  # as a version before wrote it, one entry of it spoilt by plain SQL
            conn.execute("delete from brain_meta where key like 'prune_refused:%'")
            conn.execute("update brain_meta set value = json_set(value, '$.\"/elsewhere\"', 7) where key = ?", [bad])
        else:
            conn.execute(f"insert into brain_meta (key, value) values (?, {value})", [bad])
    assert brain_sql.check(conn) == {"unreadable_holds": [bad]}
    assert brain_sql.check(conn, repair=True) == {"unreadable_holds": [bad]}
    assert brain_sql.check(conn) == {}
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {vault / 'sub'} was pruned"):
            brain_sql.ingest(conn, [vault], prune=True)  # the folder's hold holds still
    assert rows(conn, "select count(*) from knowledge where title in ('a0', 'a1')") == [(2,)]
    assert rows(conn, "select count(*) from brain_meta where key like 'prune_refused:%'") == [(1,)]


def _held_drive(conn, vault, drive, point):
    """Mount `drive` at `vault`/sub (over `point`, the mount point's own folder),
    ingest with a prune, unmount it, have the prune refused, and mount it again;
    returns mount(mounted), which mounts or unmounts it."""

    def mount(mounted):
        (vault / "sub").rename(drive if not mounted else point) if (vault / "sub").exists() else None
        (point if not mounted else drive).rename(vault / "sub")

    mount(True)
    brain_sql.ingest(conn, [vault], prune=True)
    mount(False)
    with pytest.raises(brain_sql.PruneRefused):
        brain_sql.ingest(conn, [vault], prune=True)
    mount(True)
    return mount


def test_a_folder_hold_keeps_its_mount_points_note_new_whatever_became_of_what_it_held(tmp_path):
    """Review 136, H1: a folder hold none of whose documents was stored any more (the
    user forgot them, and the plain ingest stored the notes again as new memories) was
    read as holding nothing, and the mount point's "not mounted" note, stored by the
    refused run and there again each time the drive is unmounted, as a file the
    folder kept: the first night unmounted pruned the drive's notes. (With the notes
    deleted too, the first night's refusal holds nothing stored, the hold is dropped,
    and the second night prunes: older, known.)"""
    vault, drive, point = tmp_path / "vault", tmp_path / "drive", tmp_path / "point"
    write(vault / "keep.md", "# Keep\n\nA note of the vault itself.\n")
    for name in ("a0.md", "a1.md"):
        write(drive / name, f"# {name}\n\nA note on the drive.\n")
    write(point / "NOT_MOUNTED.md", "# Not mounted\n\nThe drive mounts here.\n")

    conn = brain_sql.connect(tmp_path / "brain.db")
    mount = _held_drive(conn, vault, drive, point)
    ids = [i for (i,) in rows(conn, "select id from knowledge where source_path like ?", [f"{vault / 'sub'}/a%"])]
    brain_sql.forget(conn, ids=ids)
    for name in ("c.md", "d.md"):
        write(vault / "sub" / name, f"# {name}\n\nWritten on the drive since.\n")
    brain_sql.ingest(conn, [vault])  # a0 and a1 stored again, c and d new
    mount(False)
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {vault / 'sub'} was pruned"):
            brain_sql.ingest(conn, [vault], prune=True)
    on_drive = "select count(*) from knowledge where source_path like ? and source_path not like '%NOT_MOUNTED%'"
    assert rows(conn, on_drive, [f"{vault / 'sub'}/%"]) == [(4,)]


class _Stopped(Exception):
    """A run stopped midway (Ctrl-C, a kill), raised from its progress callback."""


@pytest.mark.parametrize(
    "days",
    [
        [([2, 3, 4], False), ([4, 5], False)],
        [([2, 3, 4], True), ([2, 3, 4], False), ([4, 5], False)],
    ],
)
def test_a_folder_hold_follows_its_records_files_refreshed_while_the_drive_is_mounted(tmp_path, days):
    """Review 136: a drive's export refreshed by plain ingests while the drive was
    mounted, until none of the records its folder's hold held was stored, left a hold
    of nothing stored: the next night unmounted was refused, that refusal dropped the
    hold, and the night after pruned the drive's records. Records stored from a file
    the hold held records of join it, those the file dropped leave it; also when a run
    that stored them was stopped midway (review 141) and the same ingest is run again.
    (Runs stopped until every held record was gone join nothing: review 142, older.)"""
    vault, drive, point = tmp_path / "vault", tmp_path / "drive", tmp_path / "point"
    write(vault / "keep.md", "# Keep\n\nA note of the vault itself.\n")
    for i in range(300):  # read after the drive's export: a run stops after its records are in
        write(vault / "zz" / f"n{i}.md", f"# Note {i}\n\nA note of the vault, number {i}.\n")
    write(point / "NOT_MOUNTED.md", "# Not mounted\n\nThe drive mounts here.\n")
    records = vault / "sub" / "crm.jsonl"

    def export(ids):
        lines = (json.dumps({"_id": str(i), "text": f"Customer record number {i}."}) for i in ids)
        write((vault / "sub" if (vault / "sub").exists() else drive) / "crm.jsonl", "\n".join(lines) + "\n")

    def crm():
        return rows(conn, "select document_id from documents where source_path = ? order by 1", [str(records)])

    conn = brain_sql.connect(tmp_path / "brain.db")
    export([1, 2, 3])
    mount = _held_drive(conn, vault, drive, point)
    for ids, stopped in days:
        export(ids)
        written = [(f"{records}#{i}",) for i in sorted(ids)]
        if stopped:  # once the export's records are all in and those it dropped removed

            def stop(*_, written=written):
                if crm() == written:
                    raise _Stopped

            with pytest.raises(_Stopped):
                brain_sql.ingest(conn, [vault], progress=stop)
        else:
            brain_sql.ingest(conn, [vault])
    held = json.loads(
        rows(conn, "select value from brain_meta where key = ?", [f"prune_refused:{vault / 'sub'}"])[0][0]
    )
    assert {f"{records}#4", f"{records}#5"} <= set(held)
    mount(False)
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {vault / 'sub'} was pruned"):
            brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, "select content from knowledge where source_path like '%crm.jsonl' order by content") == [
        ("Customer record number 4.",),
        ("Customer record number 5.",),
    ]
    mount(True)
    brain_sql.ingest(conn, [vault], prune=True)  # mounted: the hold is forgotten, the mount point's note pruned
    assert rows(conn, "select count(*) from brain_meta where key like 'prune_refused%'") == [(0,)]
    assert rows(conn, "select count(*) from knowledge where source_path like '%NOT_MOUNTED%'") == [(0,)]


@pytest.mark.parametrize(
    "day",
    [
        "unplugged_midway",
        "unplugged_during_a_prune",
        "plugged_in_midway",
        "same_name",
        "same_name_never_stored",
        "sync_back_a_while",
        "subfolder_sync_failed",
        "remembered",
        "a_note_named_after_a_records_file",
        "a_note_named_after_a_records_file_forgotten",
    ],
)
def test_what_a_run_stores_in_a_held_folder_never_reads_as_the_drive_kept(tmp_path, day):
    """Reviews 139 to 141: the notes a run stores in a held folder join no hold (but
    records of a file it held, test above). When they did, a
    run the drive was unplugged or plugged in during, a note of the mount point's name
    written over by the drive's (or never stored), a note written while a failed sync was back a while,
    and one a subfolder's failed sync left on the drive each joined the hold, and the
    next night read the folder as keeping that file and pruned the rest. A prune the
    drive was unplugged during ended the hold (139 H4, older); a record of the drive
    `remember` replaced (no file) stopped the ingest (140 M1). A note named after a
    records file and "#" read as one of its records, stored or forgotten (143 H1, 144 H1)."""
    vault, drive, point = tmp_path / "vault", tmp_path / "drive", tmp_path / "point"
    write(vault / "keep.md", "# Keep\n\nA note of the vault itself.\n")
    for name in ("a.md", "b.md", "proj/p.md", "contacts.csv#notes.md"):
        write(drive / name, f"# {name}\n\nA note on the drive.\n")
    write(drive / "crm.jsonl", json.dumps({"_id": "1", "text": "Customer record one."}) + "\n")
    write(point / "NOT_MOUNTED.md", "# Not mounted\n\nThe drive mounts here.\n")
    if day == "same_name":  # made in the mount point while the drive was out, stored by the refused night
        write(point / "Untitled.md", "# Untitled\n\nShopping list.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    mount = _held_drive(conn, vault, drive, point)
    sub, refused = vault / "sub", vault / "sub"
    if day.startswith("unplugged"):  # the prune too: what it read of the drive counted as there, the hold ended
        write(sub / "c.md", "# c\n\nWritten on the drive today.\n")
        unplug = lambda *_: (sub / "c.md").exists() and mount(False)  # noqa: E731
        brain_sql.ingest(conn, [vault], progress=unplug, prune=day == "unplugged_during_a_prune")
    elif day == "same_name_never_stored":  # written in the mount point with the drive out, no run since
        mount(False)
        write(sub / "Untitled.md", "# Untitled\n\nShopping list.\n")
        mount(True)
        write(sub / "Untitled.md", "# Untitled\n\nMeeting notes, on the drive.\n")
        brain_sql.ingest(conn, [vault])
        mount(False)
    elif day in ("same_name", "plugged_in_midway"):
        write(sub / "Untitled.md", "# Untitled\n\nMeeting notes, on the drive.\n")
        if day == "plugged_in_midway":  # a watcher given the mount point's note as the drive comes in
            mount(False)
            write(sub / "Untitled.md", "# Untitled\n\nShopping list.\n")
            plug = lambda *_: (drive / "Untitled.md").exists() and mount(True)  # noqa: E731
            brain_sql.ingest(conn, [sub / "Untitled.md"], progress=plug)
        else:
            brain_sql.ingest(conn, [sub / "Untitled.md"])  # a watcher
        mount(False)
    elif day == "sync_back_a_while":  # a held note back a while, where notes were written while it was out
        (sub / "a.md").rename(tmp_path / "a.md")
        mount(False)
        write(sub / "todo.md", "# Todo\n\nThe user's own note.\n")
        with pytest.raises(brain_sql.PruneRefused):
            brain_sql.ingest(conn, [vault], prune=True)
        (tmp_path / "a.md").rename(sub / "a.md")
        write(sub / "new.md", "# New\n\nWritten while a.md was back.\n")
        brain_sql.ingest(conn, [sub / "a.md", sub / "new.md"])  # a watcher, while a.md is back
        (sub / "a.md").unlink()
    elif day == "subfolder_sync_failed":  # the drive mounted, its proj/ emptied by a sync, a conflict note left
        (sub / "proj" / "p.md").unlink()
        write(sub / "proj" / "conflict.md", "# Conflict\n\nA sync's conflict copy.\n")
        brain_sql.ingest(conn, [sub / "proj" / "conflict.md"])  # a watcher
        refused = sub / "proj"
    elif day.startswith("a_note_named_after"):  # an export job writes contacts.csv in the mount point
        mount(False)
        if day.endswith("forgotten"):
            brain_sql.forget(
                conn, ids=[i for (i,) in rows(conn, "select id from knowledge where title like 'contacts%'")]
            )
        write(sub / "contacts.csv", "_id,text\n1,Contact one.\n2,Contact two.\n")
        for _ in range(2):  # a watcher, then the same again
            brain_sql.ingest(conn, [sub / "contacts.csv"])
    else:
        mount(False)
        brain_sql.remember(conn, [{"_id": "1", "text": "Customer record one, corrected."}])  # now of no file
        write(sub / "todo.md", "# Todo\n\nWritten in the mount point.\n")
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {refused} was pruned"):
            brain_sql.ingest(conn, [vault], prune=True)
    on_drive = [str(sub / name) for name in ("a.md", "b.md", "proj/p.md")]
    assert rows(conn, "select count(*) from documents where source_path in (?, ?, ?)", on_drive) == [(3,)]


def test_a_held_folder_a_sync_gives_back_edited_is_judged_as_before(tmp_path):
    """A failed sync's folder given back with one of its notes edited is there: the
    hold ends, and a note deleted since is pruned."""
    vault = tmp_path / "vault"
    write(vault / "keep.md", "# Keep\n\nA note of the vault itself.\n")
    for name in ("a.md", "b.md", "c.md"):
        write(vault / "sub" / name, f"# {name}\n\nA note synced.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [vault], prune=True)
    shutil.move(vault / "sub", tmp_path / "away")
    (vault / "sub").mkdir()
    with pytest.raises(brain_sql.PruneRefused):
        brain_sql.ingest(conn, [vault], prune=True)
    (vault / "sub").rmdir()
    shutil.move(tmp_path / "away", vault / "sub")
    write(vault / "sub" / "a.md", "# a.md\n\nEdited while the sync was away.\n")
    (vault / "sub" / "c.md").unlink()
    brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, "select count(*) from brain_meta where key like 'prune_refused%'") == [(0,)]
    on_sync = "select source_path from documents where source_path like ? order by source_path"
    assert rows(conn, on_sync, [f"{vault}/sub/%"]) == [(str(vault / "sub" / "a.md"),), (str(vault / "sub" / "b.md"),)]


@pytest.mark.parametrize("edit", ["a_line_added", "a_word_changed"])
def test_an_inbox_emptied_while_its_note_was_edited_is_pruned(tmp_path, edit):
    """An Inbox whose captured notes were deleted the day its own note was edited is
    pruned: a folder that keeps one file of before is no unmounted drive."""
    vault = tmp_path / "vault"
    write(vault / "keep.md", "# Keep\n\nA note of the vault itself.\n")
    write(vault / "Inbox" / "Inbox.md", "# Inbox\n\nThings to file this week.\n")
    for i in range(3):
        write(vault / "Inbox" / f"idea{i}.md", f"# Idea {i}\n\nCaptured idea {i}.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [vault], prune=True)
    for i in range(3):
        (vault / "Inbox" / f"idea{i}.md").unlink()
    text = "Things to file this week.\nAll filed today." if edit == "a_line_added" else "Things to file this month."
    write(vault / "Inbox" / "Inbox.md", f"# Inbox\n\n{text}\n")
    brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, "select count(*) from documents where source_path like '%idea%'") == [(0,)]
    assert rows(conn, "select count(*) from brain_meta where key like 'prune_refused%'") == [(0,)]


@pytest.mark.parametrize("waits", [True, False])
def test_a_hold_joined_waits_for_another_writers_lock_and_is_written_whole(tmp_path, monkeypatch, waits):
    """join_held writes in a transaction of its own: another writer holding the lock
    is waited for, and one holding it past BRAIN_BUSY_TIMEOUT_MS makes the ingest a
    BrainBusy with the hold as it was (the records written before are kept)."""
    vault, drive, point = tmp_path / "vault", tmp_path / "drive", tmp_path / "point"
    write(vault / "keep.md", "# Keep\n\nA note of the vault itself.\n")
    write(drive / "crm.jsonl", "".join(json.dumps({"_id": str(i), "text": f"Record {i}."}) + "\n" for i in (1, 2)))
    write(point / "NOT_MOUNTED.md", "# Not mounted\n\nThe drive mounts here.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    _held_drive(conn, vault, drive, point)
    key = f"prune_refused:{vault / 'sub'}"
    before = rows(conn, "select value from brain_meta where key = ?", [key])
    write(
        vault / "sub" / "crm.jsonl", "".join(json.dumps({"_id": str(i), "text": f"Record {i}."}) + "\n" for i in (2, 3))
    )
    monkeypatch.setenv("BRAIN_BUSY_TIMEOUT_MS", "5000" if waits else "200")
    join = pipeline._Pipeline.join_held
    holder = brain_sql.connect(tmp_path / "brain.db")

    releases = []

    def held_meanwhile(self):
        holder.execute("begin immediate")  # another writer, holding the lock as the join comes
        releases.append(threading.Timer(1.0 if waits else 2.0, lambda: holder.execute("rollback")))
        releases[-1].start()
        return join(self)

    monkeypatch.setattr(pipeline._Pipeline, "join_held", held_meanwhile)
    ingesting = brain_sql.connect(tmp_path / "brain.db")  # its busy timeout as set
    if waits:
        brain_sql.ingest(ingesting, [vault])
        held = json.loads(rows(conn, "select value from brain_meta where key = ?", [key])[0][0])
        assert f"{vault / 'sub' / 'crm.jsonl'}#3" in held and f"{vault / 'sub' / 'crm.jsonl'}#1" not in held
    else:
        with pytest.raises(brain_sql.BrainBusy):
            brain_sql.ingest(ingesting, [vault])
        assert rows(conn, "select value from brain_meta where key = ?", [key]) == before
    releases[0].join()
    stored = "select count(*) from documents where source_path = ?"
    assert rows(conn, stored, [str(vault / "sub" / "crm.jsonl")]) == [(2,)]


def test_a_held_folder_deleted_ends_its_hold_though_remember_replaced_one_of_its_records(tmp_path):
    """Review 142: a record `remember` replaced is stored with no file; a prune that
    counted it as held but could not look at its file kept the hold of a folder
    deleted for good, and a folder made there later was refused every night."""
    vault, drive, point = tmp_path / "vault", tmp_path / "drive", tmp_path / "point"
    write(vault / "keep.md", "# Keep\n\nA note of the vault itself.\n")
    write(drive / "a.md", "# a\n\nA note on the drive.\n")
    write(drive / "crm.jsonl", json.dumps({"_id": "1", "text": "Customer record one."}) + "\n")
    write(point / "NOT_MOUNTED.md", "# Not mounted\n\nThe drive mounts here.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    mount = _held_drive(conn, vault, drive, point)
    mount(False)
    brain_sql.remember(conn, [{"_id": "1", "text": "Customer record one, corrected."}])
    shutil.rmtree(vault / "sub")  # the drive retired, its mount point deleted
    brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, "select count(*) from brain_meta where key like 'prune_refused%'") == [(0,)]


def test_a_prune_that_would_empty_a_folder_raises_after_the_rest_went_in(tmp_path):
    """PruneRefused names the folder; nothing under it is removed, another root's
    files and its pruning still go in, and the exception carries the report."""
    empty, kept = tmp_path / "mounted", tmp_path / "kept"
    for folder in (empty, kept):
        (folder / "sub").mkdir(parents=True)
        (folder / "sub" / f"{folder.name} a.md").write_text("# A\n\none\n")
        (folder / f"{folder.name} b.md").write_text("# B\n\ntwo\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [empty, kept])
    for path in (empty / "sub" / "mounted a.md", empty / "mounted b.md", kept / "kept b.md"):
        path.unlink()
    (kept / "kept c.md").write_text("# C\n\nthree\n")
    with pytest.raises(brain_sql.PruneRefused) as raised:
        brain_sql.ingest(conn, [empty, kept], prune=True)
    assert str(raised.value) == (
        f"nothing under {empty} was pruned: that would remove all 2 memories it held before this ingest, as all 2 "
        "of its files are "
        "gone (an unmounted drive, a sync that failed?); look at the folder, or prune with --prune-all "
        "to remove them"
    )
    assert isinstance(raised.value, brain_sql.BrainError)
    report = raised.value.report
    assert (report.documents_added, report.chunks_removed) == (1, 1)
    assert rows(conn, "select title from knowledge order by title") == [
        ("kept a",),
        ("kept c",),
        ("mounted a",),
        ("mounted b",),
    ]
    report = brain_sql.ingest(conn, [empty, kept], prune_all=True)
    assert report.chunks_removed == 2 and not report.errors
    assert rows(conn, "select title from knowledge order by title") == [("kept a",), ("kept c",)]


def test_a_record_whose_validity_ends_before_it_begins_is_skipped_with_its_line(tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "roles.jsonl").write_text(
        '{"_id": "ok", "text": "Alice ran support.", "valid_from": "2023-01-01", "valid_to": "2025-01-01"}\n'
        '{"_id": "back", "text": "Bob ran support.", "valid_from": "2025-01-01", "valid_to": "2024-01-01"}\n'
    )
    (folder / "role.md").write_text("---\nvalid_from: 2025-01-01\nvalid_to: 2025-01-01\n---\n# Role\n\nCarol\n")
    (folder / "scoped.csv").write_text(
        'text,scope\nfine,/acme\nhidden,"/acme\u200b"\nmixed,/\u0430cme\nslash,/acme\u2215support\n'
        "ace,/ace\ncyrillic,/\u0430\u0441\u0435\n"  # /асе: the /ace of the record before, in Cyrillic
    )
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [folder])
    problems = sorted((e.path.rsplit("/", 1)[-1], e.line, e.message) for e in report.errors)
    assert problems == [
        (
            "role.md",
            1,
            "valid_to (2025-01-01 00:00:00) must be later than valid_from (2025-01-01 00:00:00): "
            "a memory holds from valid_from until valid_to, and would hold at no time",
        ),
        (
            "roles.jsonl",
            2,
            "valid_to (2024-01-01 00:00:00) must be later than valid_from (2025-01-01 00:00:00): "
            "a memory holds from valid_from until valid_to, and would hold at no time",
        ),
        (
            "scoped.csv",
            3,
            'scope "/acme\\u200b" may not contain U+200B ZERO WIDTH SPACE: '
            "it would be a separate scope that looks like another",
        ),
        (
            "scoped.csv",
            4,
            'scope "/\u0430cme" has a part, "\u0430cme", that mixes letters of different scripts: '
            "U+0430 CYRILLIC SMALL LETTER A is CYRILLIC, U+0063 LATIN SMALL LETTER C is LATIN; "
            "it would be a separate scope that looks like another: write each part in one script",
        ),
        (
            "scoped.csv",
            5,
            'scope "/acme\u2215support" may not contain U+2215 DIVISION SLASH: it reads as "/", so one part '
            "reads as two; it would be a separate scope that looks like another",
        ),
        (
            "scoped.csv",
            7,
            'scope "/\u0430\u0441\u0435" reads like "/ace", a scope this brain holds: U+0430 CYRILLIC SMALL '
            "LETTER A, U+0441 CYRILLIC SMALL LETTER ES, U+0435 CYRILLIC SMALL LETTER IE read as its characters; "
            'it would be a separate scope that looks like another: write "/ace" where that is meant, or another name',
        ),
    ]
    assert rows(conn, "select coalesce(external_id, content) from knowledge order by 1") == [
        ("ace",),
        ("fine",),
        ("ok",),
    ]


@pytest.mark.parametrize("imitation", ["a-shared.md", "z-shared.md"])
def test_the_ascii_scope_is_ingested_whichever_file_comes_first(tmp_path, imitation):
    """A note with scope /ɑcme/support (Latin alpha) read before the runbook with
    /acme/support must not make the runbook skipped: which one survives may not
    depend on file names. Read after it, the imitation is the one skipped."""
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / imitation).write_text("---\nscope: /\u0251cme/support\n---\n# Shared note\n\nfrom a contractor\n")
    (vault / "m-runbook.md").write_text("---\nscope: /acme/support\n---\n# Runbook\n\nrestart the widget\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [vault])
    stored = rows(conn, "select title, scope from knowledge order by title")
    if imitation == "z-shared.md":
        assert stored == [("m-runbook", "/acme/support")]
        assert [(e.path.rsplit("/", 1)[-1], e.message.split(":")[0]) for e in report.errors] == [
            ("z-shared.md", 'scope "/\u0251cme/support" reads like "/acme", a scope this brain holds')
        ]
    else:  # both stored: `check` names the pair
        assert stored == [("a-shared", "/\u0251cme/support"), ("m-runbook", "/acme/support")] and not report.errors


def test_an_ingest_prepares_its_statements_once_not_once_a_document(tmp_path):
    """A connection keeps the statements it prepared: pysqlite3's cache, once full,
    drops the statement added last, and a new brain's migrations fill it on the
    connection that goes on to ingest, so each document's statements were compiled
    again (with their tables' triggers) for every document. SQLite asks the
    authorizer about a statement when it prepares it, and only then."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)  # a new brain, made on the connection that ingests
    records = tmp_path / "records.jsonl"
    records.write_text(
        "".join(
            json.dumps({"_id": f"r{i}", "title": f"Note {i}", "text": f"Memory number {i}."}) + "\n" for i in range(300)
        )
    )
    prepared = collections.Counter()

    def authorize(action, table, *_):
        if action == sqlite3.SQLITE_INSERT:
            prepared[table] += 1
        return sqlite3.SQLITE_OK

    conn.set_authorizer(authorize)
    report = brain_sql.ingest(conn, [records])
    assert not report.errors and report.documents_added == 300
    assert prepared["documents"] <= 2 and prepared["entities"] <= 2, prepared


def test_an_unclosed_quote_in_a_csv_names_its_record_and_loses_no_row_after_it(tmp_path):
    """A quote opened on line 4 and never closed runs to the end of the file: that
    record is skipped by its line, with the lines it took in; those lines are read
    again as records, so the valid rows after it go in and each bad one is named.
    A quoted field over several lines that closes is one record, named by its first."""
    path = tmp_path / "r.csv"
    path.write_text(
        "title,content,confidence\n"
        "good,first good row,0.5\n"
        'multi,"a field\nover two lines",0.5\n'
        '"unclosed,quote,0.5\n'
        "conf,bad confidence,high\n"
        "good2,second good row,\n"
    )
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [path])
    assert [(e.line, e.message) for e in report.errors] == [
        (
            5,
            "a quote opened in this record is never closed: it took in lines 5-7 (3 lines) and is skipped; "
            "lines 6-7 are read again as records",
        ),
        (6, 'confidence must be a number from 0 to 1, not "high"'),
    ]
    assert rows(conn, "select title, content, line_start from knowledge order by id") == [
        ("good", "first good row", 1),
        ("multi", "a field\nover two lines", 1),
        ("good2", "second good row", 1),
    ]
    assert rows(conn, "select count(*) from documents") == [(3,)]
    assert "3 documents" in report.summary() and "2 skipped" in report.summary()


def test_a_csv_cut_off_inside_a_quoted_field_changes_and_removes_nothing(tmp_path):
    """A file a crash or a sync left half written ends inside a quoted field: its
    last record is that fragment, named and skipped, and since the file could not be
    read whole no record it held is removed or overwritten with the fragment."""
    path = tmp_path / "c.csv"
    path.write_text("id,text\n" + "".join(f'{i},"record, number {i}"\n' for i in range(1, 11)))
    conn = brain_sql.connect(tmp_path / "brain.db")
    assert not brain_sql.ingest(conn, [path]).errors
    before = rows(conn, "select external_id, content from knowledge order by id")
    path.write_text(path.read_text()[:60])  # ... 2,"record, number 2"\n3,"record,
    report = brain_sql.ingest(conn, [path])
    assert [(e.line, e.message) for e in report.errors] == [(4, "a quote opened in this record is never closed")]
    assert rows(conn, "select external_id, content from knowledge order by id") == before
    # a loose quote earlier in the record (text after a closing quote, which csv reads on) hides nothing
    path.write_text('id,text\n1,"record, number 1"\n2,"record, number 2"\n3,"said" so,"record, num')
    report = brain_sql.ingest(conn, [path])
    assert [(e.line, e.message) for e in report.errors] == [(4, "a quote opened in this record is never closed")]
    assert rows(conn, "select external_id, content from knowledge order by id") == before


def test_a_brain_in_a_folder_that_is_not_there_is_an_input_error_naming_it(tmp_path):
    """connect() to a file whose folder does not exist: an InputError naming the
    path and the folder, not SQLite's 'unable to open database file'."""
    with pytest.raises(brain_sql.InputError, match=r"nonexist/x\.db .*its folder .*nonexist does not exist"):
        brain_sql.connect(tmp_path / "nonexist" / "x.db")


def test_content_over_the_limit_is_refused_before_it_is_chunked(tmp_path, monkeypatch):
    """A record, a .txt file or a remembered record whose text is past the content
    limit is skipped by name without being cut into chunks (chunking 60 MB only to
    refuse it took minutes); a record within the limit is still chunked and stored."""
    from brain_sql import chunk, config, records

    chunked = []

    def counted(text, *args, **kwargs):
        chunked.append(len(text))
        return chunk.split_text(text, *args, **kwargs)

    monkeypatch.setattr(records, "split_text", counted)
    over = "words." * (config.MAX_CONTENT_BYTES // 6 + 1)
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "big.jsonl").write_text(json.dumps({"text": over}) + "\n" + json.dumps({"text": "fits"}) + "\n")
    (folder / "big.txt").write_text(over)
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [folder])
    said = f"content is {len(over):,} bytes; the limit is {config.MAX_CONTENT_BYTES:,}"
    assert sorted((e.path.rsplit("/", 1)[-1], e.line) for e in report.errors) == [("big.jsonl", 1), ("big.txt", 1)]
    assert all(said in e.message for e in report.errors), report.errors
    report, _ = brain_sql.remember(conn, [{"text": over}])
    assert len(report.errors) == 1 and said in report.errors[0].message, report.errors
    assert chunked == [len("fits")]
    assert rows(conn, "select content from knowledge") == [("fits",)]


def test_look_alike_entity_names_are_one_entity_and_invisible_characters_are_refused(tmp_path):
    """An entity is known by its name composed (NFC) with its whitespace one plain space:
    'José' composed or decomposed, a non-breaking space or a tab, name one entity (the
    title as stored keeps its bytes); a character that shows as nothing (zero-width,
    bidi controls) in a name, alias, tag, relation end or title skips the record, named."""
    same = [
        {"title": "Caf\u00e9 notes", "text": "a", "entities": ["Jos\u00e9 M\u00fcller", "Dana Whitfield"]},
        {"title": "Cafe\u0301 notes", "text": "b", "entities": ["Jose\u0301 Mu\u0308ller", "Dana\u00a0Whitfield"]},
        {
            "title": "Tc",
            "text": "c",
            "entities": ["Dana\tWhitfield", " Dana  Whitfield "],
            "aliases": ["Jose\u0301\u00a0M\u00fcller"],
        },
        {
            "title": "Td",
            "text": "d",
            "tags": ["caf\u00e9"],
            "relations": [{"type": "knows", "from": "Dana Whitfield", "to": "Cafe\u0301 notes"}],
        },
        {"title": "Te", "text": "e", "tags": ["cafe\u0301"]},
    ]
    hidden = [
        ({"title": "Tf", "text": "f", "entities": ["Dana\u200bWhitfield"]}, "entities[]", "U+200B ZERO WIDTH SPACE"),
        (
            {"title": "Tg", "text": "g", "entities": [{"name": "Dana\u202eWhitfield"}]},
            "entities[]",
            "U+202E RIGHT-TO-LEFT OVERRIDE",
        ),
        ({"title": "Th", "text": "h", "aliases": ["Dana\u2060Whitfield"]}, "aliases", "U+2060 WORD JOINER"),
        ({"title": "Ti", "text": "i", "tags": ["caf\u00e9\u200d"]}, "tags", "U+200D ZERO WIDTH JOINER"),
        (
            {"title": "Tj", "text": "j", "relations": [{"type": "knows", "to": "Dana\ufeffWhitfield"}]},
            "relations[]",
            "U+FEFF",
        ),
        ({"title": "zw\u200btitle", "text": "k"}, "title", "U+200B ZERO WIDTH SPACE"),
    ]
    (tmp_path / "u.jsonl").write_text("\n".join(json.dumps(r) for r in same + [r for r, _, _ in hidden]) + "\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [tmp_path / "u.jsonl"])
    problems = sorted((e.line, e.message) for e in report.errors)
    assert [line for line, _ in problems] == list(range(len(same) + 1, len(same) + len(hidden) + 1)), problems
    for (_, message), (_, what, character) in zip(problems, hidden):
        assert message.startswith(what) and character in message, message
    names = [name for (name,) in rows(conn, "select name from entities order by name")]
    assert names == ["#caf\u00e9", "Caf\u00e9 notes", "Dana Whitfield", "Jos\u00e9 M\u00fcller", "Tc", "Td", "Te"], (
        names
    )
    titles = {title for (title,) in rows(conn, "select distinct title from knowledge where title like 'caf%'")}
    assert titles == {"Caf\u00e9 notes", "Cafe\u0301 notes"}  # as written
    assert not any(c in name for (name,) in rows(conn, "select name from entities") for c in "\u200b\u202e\u2060")


def test_a_memory_keeps_its_text_as_written(tmp_path):
    """Indentation and blank lines are meaning in code, YAML and Markdown: a record's
    and a note's text is stored, recalled and exported as written."""
    folder = tmp_path / "in"
    folder.mkdir()
    code, yaml_text = "def f():\n    x = 1\n\n    return x", "a:\n  b: 1\n\n\n  c: 2  "
    lines = [json.dumps({"_id": "code", "text": code}), json.dumps({"_id": "yaml", "text": "\n\n" + yaml_text + "\n"})]
    (folder / "records.jsonl").write_text("\n".join(lines) + "\n")
    (folder / "note.md").write_text("---\ntitle: n\n---\n# Code\n    indented block\n\n    more of it\nright under\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    assert not brain_sql.ingest(conn, [folder]).errors
    stored = dict(rows(conn, "select coalesce(external_id, title), content from knowledge"))
    assert stored == {
        "code": code,
        "yaml": yaml_text,
        "n": "# Code\n\n    indented block\n\n    more of it\n\nright under",  # a note's blocks: a blank line between
    }


@pytest.mark.parametrize("end", ["\r\n", "\r"])
def test_a_note_or_text_file_keeps_the_line_ends_it_was_written_with(tmp_path, end):
    """Every note of the vault, and a text file, written with CRLF (or a lone CR, as
    old Mac files end lines) is stored as it is with LF but for its line ends, on the
    same lines: the files were read with their line ends made LF (review 103, L5). So
    are the manual's long pages, cut into chunks between the same lines (review 107, M3:
    a lone CR's code line was cut inside; review 108, H4: a CRLF counted two characters
    of a chunk, so a CRLF page was cut elsewhere than its LF twin)."""
    memories = {}
    pages = list(VAULT.rglob("*.md")) + list(VAULT.parent.glob("*.md"))
    for number, ending in enumerate(["\n", end]):
        folder = tmp_path / str(number)
        for note in pages:
            target = folder / (note.relative_to(VAULT) if note.is_relative_to(VAULT) else note.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(note.read_bytes().replace(b"\n", ending.encode()))
        (folder / "plain.txt").write_bytes(b"a text\n\nof two paragraphs\nand lines\n".replace(b"\n", ending.encode()))
        conn = brain_sql.connect(tmp_path / f"{number}.db")
        assert not brain_sql.ingest(conn, [folder]).errors
        columns = "replace(document_id, ?, ''), chunk_index, content, line_start, line_end"
        memories[ending] = rows(conn, f"select {columns} from knowledge order by 1, 2", [str(folder)])
    assert len(memories["\n"]) > 20
    as_written = [(*row[:2], row[2].replace("\n", end), *row[3:]) for row in memories["\n"]]
    if end == "\r":  # a lone CR is no line end in a text file, as in a record's text: all of it is kept
        plain = ("/plain.txt", 0, "a text\r\rof two paragraphs\rand lines\r", 1, 1)
        as_written = [plain if row[0] == "/plain.txt" else row for row in as_written]
    assert memories[end] == as_written


def test_a_csv_fields_line_ends_are_kept_as_written_and_a_mac_csvs_rows_still_read(tmp_path):
    """A quoted CSV field's CRLF or lone CR is its text, as a JSON record's is: the
    file's lines were read with their line ends made LF (review 105, H2). Rows ended
    by a lone CR (old Mac spreadsheets) are rows still, named by their lines."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "lf.csv").write_bytes(b'_id,text\na,"crlf\r\ninside"\nb,"lone\rcr"\n')
    (folder / "crlf.csv").write_bytes(b'_id,text\r\nc,"two\r\n\r\nparagraphs"\r\nd,plain\r\n')
    (folder / "mac.csv").write_bytes(b'_id,text\re,"mac\rinside"\rf,plain\rg,\r')
    (folder / "r.jsonl").write_bytes(b'{"_id": "h", "text": "crlf\\r\\ninside"}\r\n')
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [folder])
    assert dict(rows(conn, "select external_id, content from knowledge")) == {
        "a": "crlf\r\ninside",
        "b": "lone\rcr",
        "c": "two\r\n\r\nparagraphs",
        "d": "plain",
        "e": "mac\rinside",
        "f": "plain",
        "h": "crlf\r\ninside",
    }
    assert [(Path(e.path).name, e.line) for e in report.errors] == [("mac.csv", 5)]


def test_a_record_that_gives_a_key_twice_or_a_row_past_its_header_is_skipped_by_name(tmp_path):
    """json keeps a repeated key's last value and csv files a row's fields past the
    header under None: either drops what the file said without a word. Each is that
    record's problem, as it is a request's; the rest go in."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "r.jsonl").write_text('{"_id": "a", "text": "kept", "text": "dropped"}\n{"_id": "b", "text": "fine"}\n')
    (folder / "r.json").write_text(  # a file of records: the one giving a key twice is skipped, not the file
        '[{"_id": "c", "text": "one", "title": "t", "title": "u"}, {"_id": "d", "text": "two"},'
        ' {"_id": "e", "text": "three", "metadata": {"n": 1, "n": 2}},\n{"_id": "f", "text": "four", "v": NaN}]'
    )
    (folder / "r.csv").write_text(  # 7: a trailing comma; 9: JSON in a column gives a key twice
        'id,title,text,metadata\n5,t5,five,,extra\n6,t6,six\n7,t7,seven,,\n9,t9,nine,"{""k"": 1, ""k"": 2}"\n'
    )
    (folder / "h.csv").write_text("id,text,text\n8,eight,EIGHT\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [folder])
    assert sorted((e.path.rsplit("/", 1)[-1], e.line, e.message) for e in report.errors) == [
        ("h.csv", 1, 'the CSV header names the column "text" twice: name each column once'),
        ("r.csv", 2, "this row has 1 more field than the header"),
        ("r.csv", 5, 'column "metadata": the key "k" of one object is given twice: give it once'),
        ("r.json", 1, 'record 1: the key "title" of one object is given twice: give it once'),
        ("r.json", 1, 'record 3: the key "n" of one object is given twice: give it once'),
        ("r.json", 2, "record 4: NaN is not a JSON number"),  # each named by its line, too
        ("r.jsonl", 1, 'malformed JSON line: the key "text" of one object is given twice: give it once'),
    ]
    assert rows(conn, "select external_id, content from knowledge order by external_id") == [
        ("6", "six"),
        ("7", "seven"),
        ("b", "fine"),
        ("d", "two"),
    ]


def ingested_records(tmp_path, records):
    """A new brain with `records` ingested from a JSON lines file, and its errors as (line, message)."""
    path = write(tmp_path / "r.jsonl", "".join(json.dumps(record) + "\n" for record in records))
    conn = brain_sql.connect(tmp_path / "brain.db")
    return conn, [(e.line, e.message) for e in brain_sql.ingest(conn, [path]).errors]


def test_a_record_giving_one_field_under_both_its_names_is_skipped_unless_they_agree(tmp_path):
    """'text' and 'content', '_id' and 'id' name one field: a record giving both with
    different values kept one and lost the other without a word (review 68); it is
    skipped by name, and one giving the same value twice goes in. A text that is no
    text is named as such, not as missing."""
    lines = [
        {"_id": "a", "text": "Deploys happen on Tuesdays.", "content": "Deploys happen on Fridays."},
        {"_id": "b", "id": "crm-77", "text": "Call the vendor."},
        {"_id": "c", "id": "c", "text": "Same id twice.", "content": "Same id twice."},
        {"_id": "d", "text": 5},
        {"_id": 7, "id": "7", "content": "", "text": "The same id as a number and as text."},  # review 69
    ]
    conn, errors = ingested_records(tmp_path, lines)
    assert errors == [
        (1, "gives both 'content' and 'text', which differ: give one (the other would be lost)"),
        (2, "gives both '_id' and 'id', which differ: give one (the other would be lost)"),
        (4, "'text' must be text, not 5"),
    ]
    assert rows(conn, "select external_id, content from knowledge order by id") == [
        ("c", "Same id twice."),
        ("7", "The same id as a number and as text."),
    ]


def test_an_empty_id_is_refused_by_name_as_forget_refuses_it(tmp_path):
    """`"_id": ""` was taken for no id: each sending stored another copy, a
    "correction" added a second memory, and `forget --external-id ""` refused it."""
    lines = [{"_id": "", "text": "First."}, {"id": "", "text": "Second."}, {"_id": "k", "text": "Kept."}]
    conn, errors = ingested_records(tmp_path, lines)
    assert errors == [
        (1, "'_id' is empty: give the record's id, or leave '_id' out"),
        (2, "'id' is empty: give the record's id, or leave 'id' out"),
    ]
    report, ids = brain_sql.remember(conn, [{"_id": "", "text": "Third."}])
    assert [e.message for e in report.errors] == ["record 1: '_id' is empty: give the record's id, or leave '_id' out"]
    assert rows(conn, "select external_id, content from knowledge") == [("k", "Kept.")]


def test_a_notes_frontmatter_id_and_text_are_kept_in_its_metadata(tmp_path):
    """A note's id is its file and its text its body: frontmatter's `id`, `_id`, `content`
    and `text` (a Zettelkasten note's `id: 202301011200`) are kept in its metadata with
    the other keys, not dropped without a word (review 88); a record's stay its own."""
    folder = tmp_path / "vault"
    folder.mkdir()
    front = "id: 202301011200\n_id: zettel-7\ncontent: a summary\ntext: a field\nstatus: evergreen"
    (folder / "zettel.md").write_text(f"---\n{front}\n---\n# Zettel\n\nThe body.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    assert not brain_sql.ingest(conn, [folder]).errors
    brain_sql.remember(conn, [{"_id": "r", "text": "A record's text.", "status": "draft"}])
    assert [
        (e, json.loads(m), c) for e, m, c in rows(conn, "select external_id, metadata, content from knowledge")
    ] == [
        (
            None,
            {"id": 202301011200, "_id": "zettel-7", "content": "a summary", "text": "a field", "status": "evergreen"},
            "# Zettel\n\nThe body.",
        ),
        ("r", {"status": "draft"}, "A record's text."),
    ]


def test_frontmatter_scalars_are_kept_as_written_unless_written_as_their_value(tmp_path):
    """YAML 1.1 read 010 as 8, 1.50 as 1.5, 12:30 as 750, 0x10 as 16 and on or no as
    booleans, so a note's title, tags, aliases and metadata were stored changed
    (review 105, H1); YAML 1.2 readers such as Obsidian's keep them as text."""
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "a.md").write_text(
        "---\ntitle: 010\nmeeting: 12:30\nversion: 1.10\nzip: 01234\non: 2024-01-01\nsigned: +3\nnought: -0\n"
        "stamp: 2024-01-01T10:00:00Z\nkept: {n: 12, f: 1.5, z: -0.0, b: true, B: False, d: 2024-02-03, none: ~}\n"
        "---\nbody one\n"
    )
    (folder / "b.md").write_text("---\ntitle: 1.50\ntags: [NO, SE, on, 1.0, 010]\naliases: [0x10]\n---\nbody two\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    assert not brain_sql.ingest(conn, [folder]).errors
    stored = {
        title: (json.loads(m or "{}"), json.loads(t or "[]"))
        for title, m, t in rows(conn, "select title, metadata, tags from knowledge")
    }
    assert stored == {
        "010": (
            {
                "meeting": "12:30",
                "version": "1.10",
                "zip": "01234",
                "on": "2024-01-01",
                "signed": "+3",
                "nought": "-0",
                "stamp": "2024-01-01T10:00:00Z",
                "kept": {"n": 12, "f": 1.5, "z": -0.0, "b": True, "B": False, "d": "2024-02-03", "none": None},
            },
            [],
        ),
        "1.50": ({}, ["NO", "SE", "on", "1.0", "010"]),
    }
    names = {name for (name,) in rows(conn, "select name from entities")}
    assert {"#NO", "#on", "#010", "0x10"} <= names and not {"#False", "#True", "#8", "16"} & names


def test_a_frontmatter_key_given_twice_is_refused_by_line(tmp_path):
    """YAML keeps a key's last value: `title: One` then `title: Two` lost "One" with
    no word, where a JSON key given twice is refused. A merge (<<) may be overridden."""
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "twice.md").write_text("---\ntitle: One\nscope: /a\ntitle: Two\n---\nBody.\n")
    (folder / "nested.md").write_text("---\nmeta:\n  k: 1\n  k: 2\n---\nBody.\n")
    (folder / "merge.md").write_text("---\nbase: &b {title: X}\n<<: *b\ntitle: Merged\n---\nBody.\n")
    # review 70: a merged mapping flattened by an earlier user is still its own, overridden once
    deep = "---\na: &a {x: 1}\nouter:\n  b: &b\n    <<: *a\n    x: 2\nc:\n  <<: *b\n---\nDeep.\n"
    (folder / "deep.md").write_text(deep)
    # keys stored as one text: 1.5 and "1.5", a day and its text, 1 and true (one key to a dict)
    (folder / "types.md").write_text('---\n1.5: first\n"1.5": second\n---\nBody.\n')
    (folder / "day.md").write_text('---\nm:\n  2023-01-01: a\n  "2023-01-01": b\n---\nBody.\n')
    (folder / "kinds.md").write_text("---\nm: {1: one, true: so, 2: two, b: c}\n---\nBody.\n")
    (folder / "no.md").write_text("---\nfalse: a\nFALSE: b\n---\nBody.\n")  # both the boolean false
    (folder / "value.md").write_text("---\nscore:\n  =: 10\n  max: 20\n---\nBody.\n")  # YAML 1.1's value key
    (folder / "equals.md").write_text("---\nop: =\nops: [=, <]\n---\nBody.\n")  # and "=" as a value: its text
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [folder])
    twice = 'broken frontmatter: key "{}" given twice (one value would be lost)'
    assert sorted((Path(e.path).name, e.line, e.message) for e in report.errors) == [
        ("day.md", 4, twice.format("2023-01-01")),
        ("nested.md", 4, twice.format("k")),
        ("no.md", 3, 'broken frontmatter: key "FALSE" (stored as "false") given twice (one value would be lost)'),
        ("twice.md", 4, twice.format("title")),
        ("types.md", 3, twice.format("1.5")),
    ]
    stored = dict(rows(conn, "select title, metadata from knowledge"))
    assert json.loads(stored["Merged"]) == {"base": {"title": "X"}}
    assert json.loads(stored["deep"])["c"] == {"x": 2}
    assert json.loads(stored["kinds"]) == {"m": {"1": "one", "true": "so", "2": "two", "b": "c"}}
    assert json.loads(stored["value"]) == {"score": {"=": 10, "max": 20}}
    assert json.loads(stored["equals"]) == {"op": "=", "ops": ["=", "<"]}


def test_yaml_sets_and_binary_values_are_stored_the_same_on_every_ingest(tmp_path):
    """JSON has neither: a !!set was stored as Python's text of it, in an order each
    process's hash seed chose (so an unchanged note was "updated" at random), a
    !!binary as "b'...'". Now a sorted list, and the base64 text as written."""
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "n.md").write_text("---\nb: !!binary aGVs\n  bG8=\nset: !!set {b, a, 3}\n---\nbody\n")
    stored = []
    for seed in ("1", "2"):
        brain = tmp_path / f"brain{seed}.db"
        code = (
            "import sys, brain_sql; conn = brain_sql.connect(sys.argv[1]); "
            "r = brain_sql.ingest(conn, [sys.argv[2]]); r = brain_sql.ingest(conn, [sys.argv[2]]); "
            "print(r.documents_unchanged, conn.execute('select metadata from knowledge').fetchone()[0])"
        )
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", code, brain, folder], env=env, capture_output=True, text=True)
        stored.append(out.stdout.strip())
    assert stored[0] == stored[1] == '1 {"b": "aGVsbG8=", "set": [3, "a", "b"]}'


def test_a_batch_repeating_a_document_with_other_content_names_it(tmp_path):
    conn = brain_sql.connect(tmp_path / "brain.db")
    report, ids = brain_sql.remember(
        conn,
        [
            {"_document": "dd", "_chunks": [{"content": "one"}]},
            {"_document": "dd", "_chunks": [{"content": "two"}]},
        ],
    )
    assert [e.message for e in report.errors] == [
        'record 2: repeats the id of an earlier record with other content: "dd"'
    ]
    assert ids == [] and rows(conn, "select count(*) from knowledge") == [(0,)]  # a batch is all or none


def test_memories_no_documents_row_holds_are_rewritten_not_stored_twice(tmp_path):
    """A migrated reference file's memories name documents it kept no rows of, and
    plain SQL may delete the derived rows: ingesting the same records again stored
    every one twice. Now they are matched by their memories and the rows made again."""
    path = tmp_path / "m.jsonl"
    path.write_text(
        "".join(json.dumps({"_id": f"p{i}", "text": f"The cafeteria opens at {i}."}) + "\n" for i in range(3))
    )
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [path])
    before = rows(conn, "select id, document_id, content from knowledge order by id")
    with conn:
        conn.execute("delete from documents")
    report = brain_sql.ingest(conn, [path])
    assert (report.chunks_added, report.documents_updated) == (0, 3)
    assert rows(conn, "select id, document_id, content from knowledge order by id") == before
    assert rows(conn, "select count(*) from documents") == [(3,)]
    assert brain_sql.check(conn) == {}


def test_a_files_record_made_history_is_ingested_again_unchanged(tmp_path):
    """b.jsonl's record made an earlier version of a.jsonl's by a correction
    (`_document`, `_version_of`) was refused on every later ingest of the folder,
    as a record taking a history version's id. Unchanged, it is that version: it
    stays history. Changed, it is still refused by name."""
    notes = tmp_path / "notes"
    write(notes / "a.jsonl", json.dumps({"_id": "x", "text": "Lead is Bob.", "valid_from": "2024-06-01"}) + "\n")
    given = {"_id": "x", "text": "Lead is Ann.", "valid_from": "2024-01-01", "title": "Lead"}
    write(notes / "b.jsonl", json.dumps(given) + "\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [notes])
    current, earlier = f"{notes / 'a.jsonl'}#x", f"{notes / 'b.jsonl'}#x"
    fix = {**given, "_document": earlier, "_source_path": str(notes / "b.jsonl"), "_version_of": current}
    write(tmp_path / "fix.jsonl", json.dumps(fix) + "\n")
    assert brain_sql.ingest(conn, [tmp_path / "fix.jsonl"]).documents_updated == 1
    report = brain_sql.ingest(conn, [notes])
    assert (report.errors, report.documents_unchanged) == ([], 2)
    assert rows(conn, "select version_of from knowledge where document_id = ?", [earlier]) == [(current,)]
    write(notes / "b.jsonl", json.dumps({**given, "text": "Lead is Ann!"}) + "\n")
    assert ["earlier version" in e.message for e in brain_sql.ingest(conn, [notes]).errors] == [True]
    assert brain_sql.check(conn) == {}


def test_a_document_id_another_files_memory_or_a_history_version_holds_is_refused_by_name(tmp_path):
    """A '#' in a file's name or in an _id can make one document id of two: the note
    `r.jsonl#X.md` and r.jsonl's record `X.md`; a record's _id `X@<time>` is the id of
    X's earlier version kept as history. Each run took the other's place (one memory
    lost, "1 removed"), the next run took it back. The one arriving is refused by name."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "r.jsonl").write_text('{"_id": "X.md", "text": "the record"}\n')
    (folder / "r.jsonl#X.md").write_text("the note\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    for _ in range(2):  # in one run and again: the same memory kept, the same refusal
        report = brain_sql.ingest(conn, [folder])
        assert [(e.path.rsplit("/", 1)[-1], e.message.split(" (")[0]) for e in report.errors] == [
            (
                "r.jsonl#X.md",
                f"its id {shown(str(folder / 'r.jsonl#X.md'))} is that of a memory of {shown(str(folder / 'r.jsonl'))}",
            )
        ]
        assert rows(conn, "select content from knowledge") == [("the record",)]
    records = tmp_path / "h.jsonl"
    records.write_text('{"_id": "X", "text": "Alice was QA", "valid_from": "2024-01-01"}\n')
    brain_sql.ingest(conn, [records])
    records.write_text('{"_id": "X", "text": "Alice leads QA", "valid_from": "2025-01-01"}\n')
    brain_sql.ingest(conn, [records])
    records.write_text(records.read_text() + '{"_id": "X@2024-01-01 00:00:00", "text": "another record"}\n')
    report = brain_sql.ingest(conn, [records])
    assert [(e.line, "earlier version" in e.message) for e in report.errors] == [(2, True)]
    assert rows(conn, "select content from knowledge where source_path = ? order by content", [str(records)]) == [
        ("Alice leads QA",),
        ("Alice was QA",),
    ]
    for text, begins in (("Bob was new", "2024-01-01"), ("Bob leads", "2025-01-01")):
        assert not brain_sql.remember(conn, [{"_id": "B", "text": text, "valid_from": begins}])[0].errors
    report, _ = brain_sql.remember(conn, [{"text": "fine"}, {"_id": "B@2024-01-01 00:00:00", "text": "other"}])
    assert [str(e).split(": ")[1] for e in report.errors] == ["record 2"]
    assert rows(conn, "select count(*) from knowledge") == [(5,)]  # remember is all or none


def test_edges_no_document_states_outlive_their_memorys_rewrite(tmp_path):
    """A migrated reference file's relationships (no document states them: another
    system wrote them, bound to a memory) went with the memory's old chunk when
    ingesting its note again rewrote it. They move to the chunk in its place; the
    edges the note states are stated again, and forgetting the note takes them all."""
    note = tmp_path / "notes" / "nas.md"
    note.parent.mkdir()
    note.write_text("# NAS\n\nThe NAS sits in the server cupboard.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [note.parent])
    with conn:
        conn.execute("insert into entities (name, entity_type) values ('on-call lead', 'role'), ('Backups', 'job')")
        conn.execute(
            "insert into relationships (from_entity_id, to_entity_id, relation_type, knowledge_id) "
            "select a.id, b.id, 'uses', (select min(id) from knowledge) from entities a, entities b "
            "where a.name = 'on-call lead' and b.name = 'Backups'"
        )
    note.write_text("# NAS\n\nThe NAS sits in the server cupboard, top shelf.\n")
    report = brain_sql.ingest(conn, [note.parent])
    assert report.documents_updated == 1
    assert rows(
        conn,
        "select r.relation_type, k.content from relationships r join knowledge k on k.id = r.knowledge_id "
        "where r.document_id is null",
    ) == [("uses", "# NAS\n\nThe NAS sits in the server cupboard, top shelf.")]
    assert brain_sql.check(conn) == {}
    brain_sql.forget(conn, [row[0] for row in conn.execute("select id from knowledge")])
    assert rows(conn, "select count(*) from relationships") == [(0,)]


def test_a_record_the_brain_refuses_is_skipped_and_counts_nothing(tmp_path):
    """A trigger plain SQL added refuses one record's documents row, after its chunk
    is written: the record is skipped with its line, the rest go in, and the report
    counts what was written, never the chunk and edges taken back with it (review 86)."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn, "wordllama/l2_supercat")
    conn.execute(
        "create trigger no_secrets before insert on documents when new.title = 'Secret' "
        "begin select raise(abort, 'no secrets here'); end"
    )
    records = [
        {"_id": "a", "title": "Alpha", "text": "Alpha is tagged.", "tags": ["one"]},
        {"_id": "s", "title": "Secret", "text": "The secret is tagged.", "tags": ["two", "three"]},
        {"_id": "b", "title": "Beta", "text": "Beta is tagged.", "tags": ["four"]},
    ]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    report = brain_sql.ingest(conn, [path])
    assert [(error.line, "no secrets here" in error.message) for error in report.errors] == [(2, True)]
    assert (report.documents_added, report.chunks_added) == (2, 2)
    stored = conn.execute("select count(*) from knowledge").fetchone()[0]
    edges = conn.execute("select count(*) from relationships").fetchone()[0]
    assert (stored, report.relationships) == (2, edges)
    assert brain_sql.check(conn) == {}


def test_a_skipped_record_of_a_json_file_is_named_by_the_line_it_begins_on(tmp_path):
    """A file of records written with indent (a tool's export) named a skipped one by
    its number alone: the line takes the editor there."""
    records = [{"_id": "a", "text": "one"}, {"_id": "b", "title": "no text"}, {"_id": "c", "text": "three"}]
    path = write(tmp_path / "r.json", json.dumps(records, indent=2))
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [path])
    assert json.dumps(records, indent=2).splitlines()[5] == "  {"  # the second record begins on line 6
    assert [(e.line, e.message.split(":")[0]) for e in report.errors] == [(6, "record 2")]
    assert str(report.errors[0]).startswith(f"{path}:6: record 2: ")
    assert rows(conn, "select external_id from knowledge order by 1") == [("a",), ("c",)]


def test_a_malformed_json_line_says_what_and_where(tmp_path):
    """Its reason stopped at "at" ("Invalid control character at"), and told of the
    line end a string not closed ran into, not of the string (review 112)."""
    path = write(tmp_path / "r.jsonl", '{"_id": "a", "text": "good"}\n{"_id": "b", "text": "open\n{"_id" "c"}\n')
    report = brain_sql.ingest(brain_sql.connect(tmp_path / "brain.db"), [path])
    assert [(e.line, e.message) for e in report.errors] == [
        (2, "malformed JSON line: a string is not closed before the end of its line (column 27)"),
        (3, "malformed JSON line: Expecting ':' delimiter at column 8"),
    ]


@pytest.mark.parametrize("line_end", ["\n", "\r\n", "\r"])
def test_annotations_inside_code_are_examples_not_edges(tmp_path, line_end):
    """A fence longer than a chunk (its later pieces lost that they were code) and a
    code span of two backticks made edges (review 112). What is not code still
    does: after a closed fence, a list item's continuation, text beside a span, a
    list longer than a chunk (its later pieces begin indented: read alone, as code,
    they lost 91 of 120 edges, review 114), and so an indented block too. Whatever a
    note's line ends."""
    vault = tmp_path / "vault"
    vault.mkdir()
    long_fence = "".join(f"line {i} of example code\n" for i in range(250))
    notes = {
        "long.md": f"# Long\n\nIntro.\n\n```\n{long_fence}[[owned_by::Fenced]]\n```\n\n[[owned_by::After Fence]]\n",
        "other.md": "# Other\n\nAn example:\n\n    [[owned_by::Indented]]\n\n"
        "and ``[[owned_by::Double]]`` and `[[owned_by::Single]]` and ``a ` b`` [[owned_by::Beside]].\n\n"
        "- Project\n    [[owned_by::Listed]]\n\n~~~~\n[[owned_by::Tilde]]\n~~~\n[[owned_by::Still Tilde]]\n~~~~\n"
        "\n- a `tick\n- [[owned_by::Ticked]] and a `tick` more\n\nAn escaped \\`[[owned_by::Escaped]] tick`.\n",
        "team.md": "# Team\n\n- Platform\n"
        + "".join(f"\t- [[member_of::Person {i}]] works on it\n" for i in range(120)),
    }
    for name, text in notes.items():
        (vault / name).write_bytes(text.replace("\n", line_end).encode())
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [vault])
    assert not report.errors, report.errors
    assert rows(conn, "select count(*) from knowledge where source_path like '%long.md'")[0][0] > 2  # cut in pieces
    owners = rows(
        conn,
        "select b.name from relationships r join entities b on b.id = r.to_entity_id "
        "where r.relation_type = 'owned_by' order by 1",
    )
    assert owners == [("After Fence",), ("Beside",), ("Escaped",), ("Indented",), ("Listed",), ("Ticked",)]
    assert rows(conn, "select count(*) from knowledge where source_path like '%team.md'")[0][0] > 1  # cut in pieces
    assert rows(conn, "select count(*) from relationships where relation_type = 'member_of'") == [(120,)]


def test_a_fence_in_a_callout_or_a_list_item_is_code_across_chunks(tmp_path):
    """A fence in a callout (a block quote) or under a nested list item, longer than a
    chunk, was read on as if at the top: the later chunks made edges of its code, and
    its closing line opened a fence that hid the callout's link after it (review 118,
    H1). A fence's own indent (up to three spaces) is no container."""
    step = "Step {}: write [[Code Example {}]] in the template file of the project here."
    notes = {
        "callout.md": "# Setup\n\n> [!example] How to\n> ```md\n"
        + "".join(f"> {step.format(i, i)}\n" for i in range(80))
        + "> ```\n> Then see [[Callout Prose Link]] for more.\n\n[[Real Prose Link]]\n",
        "install.md": "# Install\n\n1. Download\n    - On Linux run:\n      ```bash\n"
        + "".join(f"      echo '{step.format(i, i + 100)}'\n" for i in range(90))
        + "      ```\n    - then read [[Install Guide]]\n",
        "indented.md": "# Indented\n\n  ~~~~\n"
        + "".join(f"{step.format(i, i + 200)}\n" for i in range(80))
        + "  ~~~~\n\n[[After Indented]]\n",
    }
    for name, text in notes.items():
        write(tmp_path / "vault" / name, text)
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [tmp_path / "vault"])
    assert rows(conn, "select count(distinct source_path) from knowledge where chunk_index > 0") == [(3,)]
    assert rows(
        conn,
        "select distinct e.name from relationships r join entities e on e.id = r.to_entity_id order by 1",
    ) == [("After Indented",), ("Callout Prose Link",), ("Install Guide",), ("Real Prose Link",)]


def _read_as_prose(text):
    """The names of the annotations and wikilinks a CommonMark reader (markdown-it, on
    the whole note) shows as text: outside fences and code spans (each on one line);
    an indented code block counts as text, as documented."""
    from markdown_it import MarkdownIt

    reader, shown = MarkdownIt("commonmark"), []
    for token in reader.parse(text):
        if token.type == "code_block":
            shown.append(token.content)
        elif token.type == "inline":  # a line at a time: a code span is on one line, as documented
            for line in token.content.split("\n"):
                [inline] = reader.parseInline(line)
                shown.append("".join(child.content if child.type == "text" else " " for child in inline.children))
    said = "\n".join(shown)
    names = [name.strip() for _, name in extract.ANNOTATION.findall(said)]
    return sorted(names + [extract._note_name(t) for t in extract.WIKILINK.findall(said) if "::" not in t])


def _fenced(prefix, opener, lines, closer, gap=None):
    """A fence of `lines`, each line after `prefix`, `gap` a line after every third."""
    body = "".join(
        f"{prefix}{line}\n" + (f"{gap}\n" if gap is not None and n % 3 == 2 else "") for n, line in enumerate(lines)
    )
    return f"{prefix}{opener}\n{body}{prefix}{closer}\n"


CODE = [f"echo 'step {i}: see [[Shell Step {i}]] for this one'" for i in range(80)]
PYTHON = [f"{line}" for i in range(60) for line in (f"def step_{i}(ctx):", f"    # [[Helper {i}]]", f"    return {i}")]


@pytest.mark.parametrize(
    "note",
    [
        # a callout's fence whose chunk ends on a blank quoted line (review 119, H3)
        "> [!example] Setup\n" + _fenced("> ", "```python", PYTHON, "```", ">") + "> After it, [[Callout Link]].\n",
        # a fence under a list item indented with tabs, as Obsidian indents (H4)
        "- Download\n\t- On Linux run:\n" + _fenced("\t\t", "```bash", CODE, "```", "") + "\t- [[Last Item]]\n",
        # an ordered item's line opening the fence: "1." cut as a sentence end (M1)
        _fenced("   ", "```sh", CODE, "```", "").replace("   ```sh", "1. ```sh", 1) + "2. [[Item Two]]\n",
        # a list item of two columns ending inside its fence (M2)
        "- Install:\n\n" + _fenced("  ", "```bash", CODE[:60], "", "") + "Prose after [[Prose After]].\n",
        # a fence closed on a chunk's last line: prose follows, then another fence (review 120, H1)
        "```python\n"
        + "".join(
            f"print('step {i} of the example script, nothing to link')\n" + "\n" * (i % 5 == 4) for i in range(40)
        )
        + "```\n\n"
        + " ".join(f"Sentence {i} of the long paragraph after the code block, plain words." for i in range(26))
        + " See [[After Fence]].\n\n```\nexample [[Only An Example]]\n```\n",
        # a callout's fence cut at a line blank without ">": the quote ends there, and its fence (M1)
        "> [!example] Script\n> ```python\n"
        + "".join(f"> {line}\n" for line in CODE[:30])
        + "\n"
        + "".join(f"> Step {i}: the notes are in [[Step Note {i}]].\n" for i in range(20))
        + "> ```\n> Code again: [[Code After]]\n",
        # a quote ending inside its fence, a fence too short to close, a lazy line
        "> ````\n" + "".join(f"> {line}\n" for line in CODE) + "> ```\n\n[[After Quote]]\nlazy [[Lazy]]\n",
    ],
)
def test_annotations_are_edges_where_a_markdown_reader_shows_them_as_text(tmp_path, note):
    """Across the chunks a note is cut into, wherever the cuts fall, the edges are the
    annotations a CommonMark reader of the whole note shows as text: none from code,
    none lost (reviews 118, 119)."""
    for pad in range(0, 200, 3):  # the cuts move with the length of the first line
        text = f"# Note {'x' * pad}\n\n{note}\nAt the end [[Final Link]].\n"
        document = next(iter(parse_markdown(str(tmp_path / "n.md"), text)))
        assert len(document.chunks) > 1
        made = sorted(r.to_name for r in extract.annotations_and_wikilinks(document))
        assert made == _read_as_prose(text), pad
        assert "Final Link" in made and not any(name.startswith(("Shell Step", "Helper", "Only")) for name in made)


def _random_note(rng):
    """A note of block quotes and lists (bullets, numbers; spaces and tabs) nested at
    random, holding fences of ``` and ~~~ opened and closed at random indents (some
    closers too short, some never written), prose and blank lines between."""
    lines, links = [], iter(range(10**6))
    for _ in range(rng.randint(20, 60)):
        prefix = "".join(rng.choice(["> ", ">\t", "- ", "1. ", "  ", "\t", "   "]) for _ in range(rng.randint(0, 3)))
        if rng.random() < 0.3:
            marker = rng.choice("`~") * rng.randint(3, 5)
            lines.append(prefix + " " * rng.randint(0, 3) + marker + rng.choice(["", "python", " sh"]))
            for _ in range(rng.randint(1, 40)):
                lines.append(prefix + rng.choice(["", "    ", "\t"]) + f"code [[Code {next(links)}]] and more text")
            if rng.random() < 0.8:
                lines.append(prefix + " " * rng.randint(0, 3) + marker[0] * rng.randint(3, len(marker) + 1))
        else:
            lines.append(prefix + rng.choice(["", f"prose [[Prose {next(links)}]] here.", "plain words, no link."]))
    return "\n".join(lines) + "\n"


def test_a_notes_edges_are_what_a_markdown_reader_shows_as_text_however_its_blocks_nest(tmp_path):
    """Chunks read one by one took fences nested in quotes and lists for text, or text
    for code: 681 of 1,000 random notes differed from the reader (review 120). A note's
    fenced lines are now read on the whole note."""
    rng = random.Random(121)
    for seed in range(150):
        text = f"# Note {seed}\n\n" + _random_note(rng)
        note = next(iter(parse_markdown(str(tmp_path / "n.md"), text)))
        record = records.record_document(str(tmp_path / "r.jsonl"), {"title": "r", "text": text}, 1)
        for document in (note, record):  # a record's text is read so too (review 121: 1,002 of 1,500 differed)
            made = sorted(r.to_name for r in extract.annotations_and_wikilinks(document))
            assert made == _read_as_prose(text), text


def test_an_export_of_texts_whose_blocks_nest_gives_the_same_edges_ingested_again(tmp_path):
    """An export's chunks were read one by one, a fence carried from each to the next,
    where the text they were cut from was read whole: 26 of these 150 records, their
    fences nested in quotes and lists, made edges of their code when their export was
    ingested again, into the brain or a new one (review 122, M2). An export states
    every edge of its document, so its text is not read for more."""
    rng = random.Random(121)
    lines = [json.dumps({"_id": f"r{n}", "title": f"r{n}", "text": _random_note(rng)}) for n in range(150)]
    write(tmp_path / "in" / "r.jsonl", "\n".join(lines) + "\n")
    edges = "select count(*) from relationships"
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [tmp_path / "in"])
    stated = rows(conn, edges)
    export = "".join(brain_sql.export(conn))
    write(tmp_path / "copy" / "brain.jsonl", export)
    again = brain_sql.ingest(conn, [tmp_path / "copy"])
    assert (again.documents_updated, again.documents_added, rows(conn, edges)) == (0, 0, stated)
    copy = brain_sql.connect(tmp_path / "copy.db")
    brain_sql.ingest(copy, [tmp_path / "copy"])
    assert rows(copy, edges) == stated and "".join(brain_sql.export(copy)) == export


def test_a_lone_cr_before_a_records_fence_moves_no_code_line(tmp_path):
    """A lone CR is no line end of a record's or a text file's text, but one to the
    reader of its chunks: the code lines told to them were shifted by one a CR, an
    annotation outside the fence lost and one inside made an edge (review 122)."""
    text = "One\rtwo [[mentions::Alpha]]\rthree\n```\n[[example_of::CodeOnly]]\n```\nAfter [[mentions::Beta]]\n"
    write(tmp_path / "in" / "r.jsonl", json.dumps({"_id": "r1", "title": "rec", "text": text}) + "\n")
    (tmp_path / "in" / "t.txt").write_bytes(text.encode())
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [tmp_path / "in"])
    assert sorted(
        rows(
            conn,
            "select k.document_id like '%.txt', e.name from relationships r join entities e on e.id = r.to_entity_id "
            "join knowledge k on k.id = r.knowledge_id",
        )
    ) == [(0, "Alpha"), (0, "Beta"), (1, "Alpha"), (1, "Beta")]


def test_a_utf16_or_utf32_file_is_skipped_once_saying_to_save_it_as_utf8(tmp_path):
    """Windows' "Unicode" files: a JSON lines file was two faults (its first line not
    UTF-8, its second malformed JSON), a CSV file one about its header (review 109)."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "r.jsonl").write_text('{"text": "hi"}\n{"text": "there"}\n', encoding="utf-16")
    (folder / "c.csv").write_text("id,text\n1,hi\n", encoding="utf-16-be")  # its mark written by hand below
    (folder / "c.csv").write_bytes(b"\xfe\xff" + (folder / "c.csv").read_bytes())
    (folder / "n.md").write_text("# Note\n\nText.\n", encoding="utf-32")
    (folder / "ok.md").write_text("# Fine\n\nUTF-8 text.\n")
    report = brain_sql.ingest(brain_sql.connect(tmp_path / "brain.db"), [folder])
    assert sorted((Path(e.path).name, e.message.split(" (")[0]) for e in report.errors) == [
        ("c.csv", "UTF-16 text"),
        ("n.md", "UTF-32 text"),
        ("r.jsonl", "UTF-16 text"),
    ]
    assert all(e.message.endswith("save it as UTF-8 to ingest it") for e in report.errors)
    assert report.documents_added == 1


def test_a_chunk_cut_inside_a_line_opens_no_fence(tmp_path):
    """A long one-line paragraph cut before a sentence that begins with ```: the next
    chunk began with it, read as a fence left open, and every later annotation of the
    note was lost (review 115, M1)."""
    sentence = "This sentence is filler about the deploy process and nothing else. "
    paragraph = sentence * 28 + "``` opens a code fence in Markdown and is followed by a name " + "x " * 60 + ". "
    note = write(
        tmp_path / "prose.md",
        f"# Prose\n\n{paragraph + sentence * 5}\n\nLater: [[owned_by::Prose Owner]].\n\n## Two\n\n"
        "[[related_to::Two]]\n",
    )
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [note])
    assert rows(conn, "select substr(content, 1, 3) from knowledge where chunk_index = 1") == [("```",)]
    edges = (
        "select b.name from relationships r join entities b on b.id = r.to_entity_id "
        "where r.relation_type != 'mentions'"
    )
    assert sorted(name for (name,) in rows(conn, edges) if name != "prose") == ["Prose Owner", "Two"]


def test_a_wikilink_in_a_table_with_an_escaped_alias_bar_names_its_note(tmp_path):
    """Obsidian writes an alias in a table as `[[Note\\|alias]]`: the edge went to a
    note named "Note\\" (review 117, L1)."""
    note = write(
        tmp_path / "plan.md", "# Plan\n\n| step | owner |\n| --- | --- |\n| 1 | [[Ledger Export\\|Ledger]] |\n"
    )
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [note])
    assert rows(
        conn,
        "select b.name from relationships r join entities b on b.id = r.to_entity_id "
        "where r.relation_type = 'references'",
    ) == [("Ledger Export",)]


@pytest.mark.parametrize("bare", [str, Path])
def test_one_path_given_bare_is_refused_by_name(tmp_path, bare):
    """Review 146: a str is a sequence of its characters, so ingest(conn, "notes/")
    ingested "/", the whole disk, one path a character."""
    write(tmp_path / "notes" / "a.md", "# A\n\nThe one note.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    with pytest.raises(brain_sql.FieldError, match=r"paths must be a list of paths: give \["):
        brain_sql.ingest(conn, bare(tmp_path / "notes"))
    with pytest.raises(brain_sql.FieldError, match="paths must be a list of paths"):
        brain_sql.discover(bare(tmp_path / "notes"))
    assert rows(conn, "select count(*) from sqlite_master where name = 'knowledge'") == [(0,)]  # nothing made
    brain_sql.ingest(conn, (p for p in [tmp_path / "notes"]))  # any iterable of paths, read once
    assert rows(conn, "select count(*) from knowledge") == [(1,)]


def test_a_key_given_in_metadata_and_beside_it_with_two_values_skips_its_record_by_name(tmp_path):
    """Review 146: {"metadata": {"ticket": "OPS-7"}, "ticket": "OPS-8"} stored one of
    the two values and dropped the other, silently; the same value twice is one."""
    write(
        tmp_path / "r.jsonl",
        json.dumps({"_id": "1", "text": "Two tickets.", "metadata": {"ticket": "OPS-7"}, "ticket": "OPS-8"})
        + "\n"
        + json.dumps({"_id": "2", "text": "One ticket.", "metadata": {"ticket": "OPS-7"}, "ticket": "OPS-7"})
        + "\n",
    )
    write(tmp_path / "v" / "c.md", "---\nmetadata: {team: platform}\nteam: support\n---\nWho owns this?\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [tmp_path / "r.jsonl", tmp_path / "v"])
    said = sorted((os.path.basename(e.path), e.line, e.message) for e in report.errors)
    assert said == [
        ("c.md", 1, '"team" is given in metadata and beside it, with another value: give it once'),
        ("r.jsonl", 1, '"ticket" is given in metadata and beside it, with another value: give it once'),
    ]
    assert rows(conn, "select external_id, metadata from knowledge") == [("2", '{"ticket": "OPS-7"}')]
    report, _ = brain_sql.remember(conn, [{"_id": "3", "text": "x", "metadata": {"a": 1}, "a": 2}])
    assert [e.message for e in report.errors] == [
        'record 1: "a" is given in metadata and beside it, with another value: give it once'
    ]


@pytest.fixture
def drive_mount():
    """(drive(folder): a file system of its own (tmpfs) mounted on `folder`, a drive's;
    mount(source, target): a bind mount; unmount(target)), real mounts (root only;
    skipped elsewhere), every one undone at the end."""
    mounted = []

    def run(*command):
        done = subprocess.run(["mount", *map(str, command)], capture_output=True, text=True)
        if done.returncode:
            pytest.skip(f"mounting needs root here: {done.stderr.strip()}")
        mounted.append(command[-1])

    def unmount(target):
        subprocess.run(["umount", str(target)], check=True)
        mounted.remove(target)

    yield (lambda folder: run("-t", "tmpfs", "tmpfs", folder)), (lambda s, t: run("--bind", s, t)), unmount
    for target in reversed(mounted):
        subprocess.run(["umount", str(target)], capture_output=True)


def test_an_unplugged_drives_mount_point_is_neither_read_nor_pruned(tmp_path, drive_mount):
    """A drive mounted at vault/sub, unplugged: a note written in the mount point under
    one of the drive's names (Obsidian's Untitled.md) was stored over the drive's, a
    records file of the drive's export's name cut its records to its own, and the night
    read the folder as kept and pruned the rest of the drive. The brain records the
    mount points it reads files from; while one is not mounted, nothing under it is
    read or pruned. Mounted again, all is as before."""
    drive_fs, mount, unmount = drive_mount
    vault, drive, sub = tmp_path / "vault", tmp_path / "drive", tmp_path / "vault" / "sub"
    drive.mkdir()
    drive_fs(drive)  # the drive's own file system, plugged in and out at sub below
    write(vault / "keep.md", "# Keep\n\nA note of the vault itself.\n")
    for name in ("a.md", "b.md", "Untitled.md"):
        write(drive / name, f"# {name}\n\nA note on the drive.\n")
    write(drive / "crm.jsonl", "".join(json.dumps({"_id": str(i), "text": f"Record {i}."}) + "\n" for i in range(3)))
    sub.mkdir()
    conn = brain_sql.connect(tmp_path / "brain.db")
    mount(drive, sub)
    brain_sql.ingest(conn, [vault], prune=True)
    stored = "select source_path, content from knowledge where source_path like ? order by source_path, content"
    before = rows(conn, stored, [f"{sub}/%"])
    assert len(before) == 6
    unmount(sub)
    write(sub / "Untitled.md", "# Untitled\n\nShopping list.\n")
    write(sub / "crm.jsonl", json.dumps({"_id": "1", "text": "Another export."}) + "\n")
    report = brain_sql.ingest(conn, [sub / "Untitled.md"])  # a watcher
    assert [(e.path, e.message.split(":")[0]) for e in report.errors] == [(str(sub), "1 file in it not read")]
    report = brain_sql.ingest(conn, [vault])
    assert "a drive was mounted here" in report.errors[0].message and "--prune-all" in report.errors[0].message
    for _ in range(2):
        with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {sub} was pruned: a drive was mounted"):
            brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, stored, [f"{sub}/%"]) == before
    mount(drive, sub)
    brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, stored, [f"{sub}/%"]) == before
    (drive / "b.md").unlink()  # deleted on the drive, mounted: pruned
    brain_sql.ingest(conn, [vault], prune=True)
    assert len(rows(conn, stored, [f"{sub}/%"])) == 5


def test_prune_all_reads_an_unmounted_drives_folder_as_it_is_and_forgets_the_mount(tmp_path, monkeypatch):
    """With --prune-all the mount point is read as it is: the drive's memories are
    removed, the mount point's notes stored, and the mount point forgotten (the next
    runs read the folder as any other). The system's mounts are the test's here (the
    drive a folder renamed in and out); a real mount is the test above."""
    vault, drive, point = tmp_path / "vault", tmp_path / "drive", tmp_path / "point"
    write(vault / "keep.md", "# Keep\n\nA note of the vault itself.\n")
    write(drive / "a.md", "# a\n\nA note on the drive.\n")
    write(drive / "old" / "x.md", "# x\n\nAn old note on the drive.\n")
    write(point / "Untitled.md", "# Untitled\n\nWritten in the mount point.\n")
    sub = vault / "sub"
    plugged = set()
    monkeypatch.setattr(mounts.Mounts, "mounted", staticmethod(lambda folder: folder in plugged))

    def on_drive(folder):
        return any(folder == p or folder.startswith(p + os.sep) for p in plugged)

    monkeypatch.setattr(mounts, "_device", lambda folder: 7 if on_drive(folder) else 1)  # the drive's is 7
    drive_id = {"device": 7}

    def plug(on):
        sub.rename(point if on else drive) if sub.exists() else None
        (drive if on else point).rename(sub)
        plugged.clear()
        plugged.update([str(sub.resolve())] if on else [])

    conn = brain_sql.connect(tmp_path / "brain.db")
    plug(True)
    brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, "select value from brain_meta where key = 'mount_points'") == [
        (json.dumps({str(sub): drive_id}),)
    ]
    plug(False)
    with pytest.raises(brain_sql.PruneRefused, match="a drive was mounted there"):
        brain_sql.ingest(conn, [vault], prune=True)
    write(tmp_path / "elsewhere" / "e.md", "# e\n\nAnother folder.\n")
    brain_sql.ingest(conn, [tmp_path / "elsewhere"], prune_all=True)  # another PATH: the mount point stays
    (sub / "old").mkdir()
    with pytest.raises(brain_sql.PruneRefused, match=f"or ingest {sub} .or a folder holding it. with --prune-all"):
        brain_sql.ingest(conn, [sub / "old"], prune_all=True)  # a folder in it: the rest of the drive stays held
    assert rows(conn, "select value from brain_meta where key = 'mount_points'") == [
        (json.dumps({str(sub): drive_id}),)
    ]
    (sub / "old").rmdir()
    brain_sql.ingest(conn, [vault], prune_all=True)
    assert rows(conn, "select title from documents where source_path like ?", [f"{sub}/%"]) == [("Untitled",)]
    assert rows(conn, "select value from brain_meta where key = 'mount_points'") == [("{}",)]
    brain_sql.ingest(conn, [vault], prune=True)  # the folder as any other now


def test_a_mount_points_row_of_another_shape_is_read_as_none_and_written_again(tmp_path, monkeypatch):
    """docs/operators.md: a mount_points row plain SQL wrote as no JSON list of folders
    holds nothing back, and the next ingest reading a mount point writes it again."""
    vault = tmp_path / "vault"
    write(vault / "sub" / "a.md", "# a\n\nA note on the drive.\n")
    drive = str((vault / "sub").resolve())
    monkeypatch.setattr(mounts.Mounts, "mounted", staticmethod(lambda folder: folder == drive))
    monkeypatch.setattr(mounts, "_device", lambda folder: 7 if folder.startswith(drive) else 1)
    known = {"device": 7}
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [vault])
    for value in (
        '{"x": 1}',
        "not json",
        f'["{drive}"]',
        json.dumps({drive: 7}),
        json.dumps({drive: {"device": True}}),
        json.dumps({drive: {"device": "7"}}),
    ):
        conn.execute("update brain_meta set value = ? where key = 'mount_points'", [value])
        conn.commit()
        assert brain_sql.ingest(conn, [vault], prune=True).errors == []
        assert rows(conn, "select value from brain_meta where key = 'mount_points'") == [(json.dumps({drive: known}),)]


def test_a_folder_bound_on_itself_is_no_drive(tmp_path, drive_mount):
    """Review 147, M1: a service sandboxed by systemd (ReadWritePaths) or a container
    sees the vault as a bind mount of itself; recorded, the user's own shell, which does
    not, read none of it. A mount of the same file system is no drive."""
    _, mount, unmount = drive_mount
    vault = tmp_path / "vault"
    write(vault / "a.md", "# a\n\nA note.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    mount(vault, vault)
    brain_sql.ingest(conn, [vault], prune=True)
    unmount(vault)
    assert rows(conn, "select value from brain_meta where key = 'mount_points'") == []
    write(vault / "b.md", "# b\n\nAnother note.\n")
    assert brain_sql.ingest(conn, [vault], prune=True).errors == []
    assert rows(conn, "select count(*) from documents") == [(2,)]


def test_a_vault_a_container_sees_as_a_mount_is_read_by_the_host_and_the_other_way(tmp_path, drive_mount):
    """Review 148: a container that binds the vault in over its own root sees the vault
    as a mount point (another device than its parent), and the host, which does not,
    read none of it; a host whose /home is a partition of its own recorded it, and a
    container seeing the vault bound into a plain /home read none of it. A mount point
    is out only when another device is there, and a file on a file system mounted
    inside it is read."""
    drive_fs, mount, unmount = drive_mount
    home, keep = tmp_path / "home", tmp_path / "keep"
    vault = home / "vault"
    write(vault / "a.md", "# a\n\nA note.\n")
    write(vault / "b.md", "# b\n\nAnother note.\n")
    keep.mkdir()
    conn = brain_sql.connect(tmp_path / "brain.db")
    mount(vault, keep)  # the container: its root a file system of its own, the vault bound in
    drive_fs(home)
    vault.mkdir()
    mount(keep, vault)
    brain_sql.ingest(conn, [vault])
    assert list(json.loads(rows(conn, "select value from brain_meta where key = 'mount_points'")[0][0])) == [str(vault)]
    unmount(vault)
    unmount(home)
    unmount(keep)
    write(vault / "a.md", "# a\n\nA note, edited on the host.\n")
    (vault / "b.md").unlink()
    report = brain_sql.ingest(conn, [vault], prune=True)  # the host
    assert report.errors == []
    assert rows(conn, "select content from knowledge order by content") == [("# a\n\nA note, edited on the host.",)]

    store = tmp_path / "store"  # now /home a partition of the host's own, the container binding the vault in
    store.mkdir()
    drive_fs(store)
    write(store / "vault" / "c.md", "# c\n\nOn the partition.\n")
    mount(store, home)
    brain_sql.ingest(conn, [vault], prune_all=True)
    assert str(home) in json.loads(rows(conn, "select value from brain_meta where key = 'mount_points'")[0][0])
    unmount(home)
    vault.mkdir(exist_ok=True)
    mount(store / "vault", vault)
    write(vault / "d.md", "# d\n\nWritten in the container.\n")
    report = brain_sql.ingest(conn, [vault], prune=True)
    assert report.errors == []
    assert rows(conn, "select count(*) from documents") == [(2,)]


def test_an_empty_mount_point_bound_in_is_no_drive(tmp_path, drive_mount):
    """Review 149: with the drive out, a login script's bind mounted its empty mount
    point on the vault's folder: a mount point, so read as the drive, and the night
    pruned it. Its device is that of a folder over it (the file system it is a folder
    of): no file system of its own, out."""
    drive_fs, mount, unmount = drive_mount
    home, drive, empty = tmp_path / "home", tmp_path / "drive", tmp_path / "media"
    for folder in (home, drive, empty):
        folder.mkdir()
    drive_fs(home)  # /home, a partition of its own
    drive_fs(drive)
    for name in ("a.md", "b.md", "Untitled.md"):
        write(drive / name, f"# {name}\n\nA note on the drive.\n")
    usb = home / "vault" / "usb"
    usb.mkdir(parents=True)
    conn = brain_sql.connect(tmp_path / "brain.db")
    mount(drive, usb)
    brain_sql.ingest(conn, [home / "vault"], prune=True)
    unmount(usb)
    mount(empty, usb)  # the drive's mount point, empty, bound in
    write(usb / "Untitled.md", "# Untitled\n\nShopping list.\n")
    with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {usb} was pruned: a drive was mounted"):
        brain_sql.ingest(conn, [home / "vault"], prune=True)
    assert rows(conn, "select count(*) from documents where source_path like ?", [f"{usb}/%"]) == [(3,)]
    assert rows(conn, "select count(*) from knowledge where content like '%Shopping%'") == [(0,)]


def test_a_recorded_mount_point_apart_from_the_runs_paths_is_not_looked_at(tmp_path, monkeypatch):
    """A network share the brain once read from, hung now, must stall no ingest of
    another folder: only the recorded mount points a run's PATHs are in or hold are
    looked at."""
    vault, share = tmp_path / "vault", tmp_path / "share"
    write(vault / "a.md", "# a\n\nA note.\n")
    write(share / "s.md", "# s\n\nOn the share.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [vault, share])
    conn.execute(
        "insert into brain_meta (key, value) values ('mount_points', ?)", [json.dumps({str(share): {"device": 3}})]
    )
    conn.commit()
    looked = []
    monkeypatch.setattr(mounts.Mounts, "there", lambda self, folder, known: looked.append(folder) or True)
    write(vault / "b.md", "# b\n\nAnother note.\n")
    brain_sql.ingest(conn, [vault], prune=True)
    brain_sql.ingest(conn, [vault / "b.md"])
    assert looked == []
    brain_sql.ingest(conn, [tmp_path], prune=True)
    assert looked == [str(share)]


def test_a_drive_in_a_vault_moved_and_linked_back_is_looked_at_as_pruned(tmp_path, drive_mount):
    """Review 151: a run looked only at the mount points its PATHs resolved are in or
    hold; the vault moved and linked back is pruned under its old spelling too, where the
    drive's mount point was recorded, and the drive's notes there were pruned as moved."""
    drive_fs, mount, unmount = drive_mount
    home, data, drive = tmp_path / "home", tmp_path / "data", tmp_path / "drive"
    for folder in (home / "vault" / "usb", data, drive):
        folder.mkdir(parents=True)
    drive_fs(drive)
    for name in ("a.md", "Untitled.md"):
        write(drive / name, f"# {name}\n\nA note on the drive.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    mount(drive, home / "vault" / "usb")
    brain_sql.ingest(conn, [home / "vault"], prune=True)
    unmount(home / "vault" / "usb")
    (home / "vault").rename(data / "vault")
    (home / "vault").symlink_to(data / "vault")
    write(data / "vault" / "usb" / "Untitled.md", "# Untitled\n\nShopping list.\n")
    usb = home / "vault" / "usb"
    with pytest.raises(brain_sql.PruneRefused, match=f"nothing under {usb} was pruned: a drive was mounted"):
        brain_sql.ingest(conn, [home / "vault"], prune=True)
    stored = "select content from knowledge where source_path like ? order by content"
    assert rows(conn, stored, [f"{usb}/%"]) == [
        ("# Untitled.md\n\nA note on the drive.",),
        ("# a.md\n\nA note on the drive.",),
    ]


@pytest.mark.parametrize("waits", [True, False])
def test_a_mount_point_recorded_waits_for_another_writers_lock(tmp_path, monkeypatch, waits):
    """note_mounts writes in a transaction of its own before the run writes a file:
    another writer holding the lock is waited for, and one holding it past
    BRAIN_BUSY_TIMEOUT_MS makes the ingest a BrainBusy with nothing written (no row,
    no memory)."""
    vault = tmp_path / "vault"
    write(vault / "sub" / "a.md", "# a\n\nA note on the drive.\n")
    drive = str((vault / "sub").resolve())
    monkeypatch.setattr(mounts, "_device", lambda folder: 7 if folder.startswith(drive) else 1)
    conn = brain_sql.connect(tmp_path / "brain.db")
    write(tmp_path / "other" / "o.md", "# o\n\nAnother folder.\n")
    brain_sql.ingest(conn, [tmp_path / "other"])  # the brain made, no mount point recorded
    monkeypatch.setenv("BRAIN_BUSY_TIMEOUT_MS", "5000" if waits else "200")
    note = pipeline._Pipeline.note_mounts
    holder = brain_sql.connect(tmp_path / "brain.db")
    releases = []

    def held_meanwhile(self, *args):
        holder.execute("begin immediate")  # another writer, holding the lock as the row is written
        releases.append(threading.Timer(1.0 if waits else 2.0, lambda: holder.execute("rollback")))
        releases[-1].start()
        return note(self, *args)

    monkeypatch.setattr(pipeline._Pipeline, "note_mounts", held_meanwhile)
    ingesting = brain_sql.connect(tmp_path / "brain.db")  # its busy timeout as set
    recorded = "select value from brain_meta where key = 'mount_points'"
    if waits:
        brain_sql.ingest(ingesting, [vault])
        assert rows(conn, recorded) == [(json.dumps({drive: {"device": 7}}),)]
        assert rows(conn, "select count(*) from documents where source_path like ?", [f"{drive}/%"]) == [(1,)]
    else:
        with pytest.raises(brain_sql.BrainBusy):
            brain_sql.ingest(ingesting, [vault])
        assert rows(conn, recorded) == []
        assert rows(conn, "select count(*) from documents where source_path like ?", [f"{drive}/%"]) == [(0,)]
    releases[0].join()
