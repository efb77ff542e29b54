"""`sqlite-utils brain ingest`: every format, edges and mentions, idempotence, edits,
dedup, repeated ids, prune, bad input."""

import json
import os
import resource
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import brain_sql
from brain_sql import mentions
from brain_sql.config import MAX_JSON_FILE_BYTES, MAX_LINE_BYTES
from brain_sql.consistency import check

from .conftest import VAULT, edges, rows, snapshot, write

DATA = os.path.join(os.path.dirname(__file__), "data")


def ingest_ok(run, db_path, *paths, extra=()):
    result = run("brain", "ingest", db_path, *paths, *extra)
    assert result.exit_code == 0, result.output
    return result


def test_vault_notes_chunks_and_structure(run, db_path):
    result = ingest_ok(run, db_path, VAULT)
    notes = len(list(VAULT.rglob("*.md")))
    assert f"{notes} files, {notes} documents" in result.output
    conn = brain_sql.connect(db_path)
    chunks = rows(
        conn,
        "select heading_path, chunk_index, line_start, line_end, source_path, content from knowledge "
        "where title = 'Brain File' order by chunk_index",
    )
    assert [c[:4] for c in chunks] == [
        ("Brain File", 0, 6, 10),
        ("Brain File > Tables", 1, 12, 20),
        ("Brain File > Migrations", 2, 22, 25),
    ]
    source = (VAULT / "Brain File.md").read_text().split("\n")
    for _, _, start, end, path, content in chunks:
        assert path == str(VAULT / "Brain File.md")
        # the line span points at the chunk's own text in the file
        assert content.startswith(source[start - 1]) and content.endswith(source[end - 1])
    assert rows(conn, "select tags, metadata from knowledge where title = 'Brain File' limit 1") == [
        ('["architecture", "storage"]', None)
    ]


def test_vault_edges(run, db_path):
    ingest_ok(run, db_path, VAULT)
    conn = brain_sql.connect(db_path)
    found = edges(conn)
    assert ("Brain File", "part_of", "datasette-brain") in found  # [[part_of::...]]
    assert ("Brain File", "references", "Lexical Leg") in found  # [[wikilink]]
    assert ("Brain File", "tagged_with", "#storage") in found
    assert ("brain.db", "alias_of", "Brain File") in found
    assert ("Ingest", "uses", "Embedding Model") in found
    # an annotation inside `inline code` is an example, not an edge (the name
    # itself, a note's title in the demo vault, is only mentioned)
    assert not [edge for edge in found if edge[0] == "Ingest" and edge[2] == "Dana Whitfield" and edge[1] != "mentions"]
    # a note that names another note's title without linking mentions it
    assert ("Vector Leg", "mentions", "Embedding Model") in found
    assert rows(conn, "select entity_type from entities where name = 'Recall'") == [("document",)]


def test_relationship_carries_the_chunk_that_stated_it(run, db_path):
    ingest_ok(run, db_path, VAULT)
    conn = brain_sql.connect(db_path)
    [(heading,)] = rows(
        conn,
        "select k.heading_path from relationships r join entities t on t.id = r.to_entity_id "
        "join knowledge k on k.id = r.knowledge_id where t.name = 'Lexical Leg' and r.relation_type = 'references' "
        "and k.title = 'Brain File'",
    )
    assert heading == "Brain File > Tables"


def test_frontmatter_fields_and_metadata(run, db_path, tmp_path):
    write(
        tmp_path / "v" / "policy.md",
        "---\ntitle: Refund Policy\nscope: /acme/support/\nclass: policy\nexpires_at: 2027-01-31\n"
        "confidence: 0.9\nowner: dana\nreviewed: 2026-05-01\nteam: billing\n---\n"
        "# Refunds\n\nRefunds within 30 days.\n",
    )
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    row = conn.execute(
        "select title, scope, class, expires_at, confidence, owner, metadata, source from knowledge"
    ).fetchone()
    assert tuple(row[:6]) == ("Refund Policy", "/acme/support", "policy", "2027-01-31 00:00:00", 0.9, "dana")
    assert json.loads(row[6]) == {"reviewed": "2026-05-01", "team": "billing"}
    assert row[7] == "vault"
    assert rows(conn, "select scope, class, datetime(expires_at, 'unixepoch') from vec_knowledge") == [
        ("/acme/support", "policy", "2027-01-31 00:00:00")
    ]


def test_cli_defaults_apply_where_a_note_names_none(run, db_path, tmp_path):
    write(tmp_path / "v" / "a.md", "# A\n\nalpha\n")
    write(tmp_path / "v" / "b.md", "---\nscope: /other\n---\n# B\n\nbeta\n")
    ingest_ok(
        run,
        db_path,
        tmp_path / "v",
        extra=["--scope", "/acme", "--class", "reference", "--source", "wiki", "--domain", "ops"],
    )
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select title, scope, class, source, domain from knowledge order by title") == [
        ("a", "/acme", "reference", "wiki", "ops"),
        ("b", "/other", "reference", "wiki", "ops"),
    ]


def test_long_section_splits_at_paragraphs(run, db_path, tmp_path):
    paragraphs = [f"Paragraph {i} " + "words " * 150 for i in range(8)]
    write(tmp_path / "long.md", "# Long\n\n" + "\n\n".join(paragraphs) + "\n")
    ingest_ok(run, db_path, tmp_path / "long.md")
    conn = brain_sql.connect(db_path)
    chunks = rows(conn, "select content, heading_path, line_start from knowledge order by chunk_index")
    assert len(chunks) > 1
    assert all(len(c[0]) <= 2000 for c in chunks)
    assert all(c[1] == "Long" for c in chunks)
    # no paragraph is cut: each chunk holds whole paragraphs, as written (their trailing space kept)
    for content, _, _ in chunks:
        for part in content.split("\n\n"):
            assert part in ("# Long", *paragraphs)


def test_txt_file(run, db_path, tmp_path):
    write(tmp_path / "standup.txt", "Monday standup.\n\nShip the pager fix.\n")
    ingest_ok(run, db_path, tmp_path / "standup.txt")
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select title, content, line_start, line_end from knowledge") == [
        ("standup", "Monday standup.\n\nShip the pager fix.", 1, 3)
    ]


RECORD = {
    "_id": "m-1",
    "title": "Deploy window",
    "content": "Deploys happen on Tuesdays after 10:00.",
    "scope": "/acme/eng",
    "class": "policy",
    "observed_at": "2026-03-01T09:30:00+02:00",
    "expires_at": "2027-01-01",
    "confidence": 0.8,
    "source": "handbook",
    "domain": "eng",
    "tags": ["deploys", "process"],
    "team": "platform",
    "entities": ["Release Train", {"name": "Platform Team", "type": "team"}],
    "relations": [
        {"type": "owned_by", "to": "Platform Team"},
        {"from": "Release Train", "type": "runs_on", "to": "Tuesday"},
    ],
}


def check_record(conn):
    row = conn.execute(
        "select external_id, title, content, scope, class, observed_at, expires_at, confidence, source, domain, "
        "tags, metadata "
        "from knowledge"
    ).fetchone()
    assert tuple(row) == (
        "m-1",
        "Deploy window",
        "Deploys happen on Tuesdays after 10:00.",
        "/acme/eng",
        "policy",
        "2026-03-01 07:30:00",
        "2027-01-01 00:00:00",
        0.8,
        "handbook",
        "eng",
        '["deploys", "process"]',
        '{"team": "platform"}',
    )
    found = edges(conn)
    assert {
        ("Deploy window", "tagged_with", "#deploys"),
        ("Deploy window", "mentions", "Release Train"),
        ("Deploy window", "owned_by", "Platform Team"),
        ("Release Train", "runs_on", "Tuesday"),
    } <= found
    assert rows(conn, "select entity_type from entities where name = 'Platform Team'") == [("team",)]


@pytest.mark.parametrize("suffix", ["json", "jsonl", "csv"])
def test_record_formats(run, db_path, tmp_path, suffix):
    path = tmp_path / f"records.{suffix}"
    if suffix == "json":
        write(path, json.dumps([RECORD]))
    elif suffix == "jsonl":
        write(path, json.dumps(RECORD) + "\n")
    else:
        columns = {k: (json.dumps(v) if isinstance(v, (list, dict)) else str(v)) for k, v in RECORD.items()}
        columns["tags"] = "deploys, process"
        header = ",".join(columns)
        values = ",".join('"' + v.replace('"', '""') + '"' for v in columns.values())
        write(path, f"{header}\n{values}\n")
    ingest_ok(run, db_path, path)
    check_record(brain_sql.connect(db_path))


def test_beir_corpus_ingests_as_it_is(run, db_path):
    ingest_ok(run, db_path, os.path.join(DATA, "beir_corpus_sample.jsonl"))
    conn = brain_sql.connect(db_path)
    corpus = [json.loads(line) for line in open(os.path.join(DATA, "beir_corpus_sample.jsonl"))]
    stored = rows(conn, "select external_id, title, content, chunk_index from knowledge order by id")
    assert [(r[0], r[1]) for r in stored if r[3] == 0] == [(r["_id"], r["title"]) for r in corpus]
    for record in corpus:
        chunks = [r[2] for r in stored if r[0] == record["_id"]]
        if len(record["text"]) <= 2000:  # one record, one memory
            assert chunks == [record["text"]]
        else:  # longer than a chunk: split, every word kept in order
            assert " ".join(chunks).split() == record["text"].split()
    assert conn.execute("select count(*) from vec_knowledge").fetchone()[0] == len(stored)


def test_mention_of_an_entity_that_arrives_later(run, db_path, tmp_path):
    write(
        tmp_path / "a" / "standup.md",
        "# Standup\n\nThe zephyr project slipped a week.\n\nZephyr Projectile is unrelated.\n",
    )
    ingest_ok(run, db_path, tmp_path / "a")
    write(tmp_path / "b" / "Zephyr Project.md", "# Zephyr Project\n\nA new ingest pipeline.\n")
    ingest_ok(run, db_path, tmp_path / "b")
    conn = brain_sql.connect(db_path)
    mention = rows(
        conn,
        "select f.name, t.name, k.content from relationships r join entities f on f.id = r.from_entity_id "
        "join entities t on t.id = r.to_entity_id join knowledge k on k.id = r.knowledge_id "
        "where r.relation_type = 'mentions'",
    )
    assert mention == [
        (
            "standup",
            "Zephyr Project",
            "# Standup\n\nThe zephyr project slipped a week.\n\nZephyr Projectile is unrelated.",
        )
    ]


@pytest.mark.parametrize("chunks_per_entity", [0, 10**9])
def test_mentions_same_by_fts_lookup_and_full_scan(run, db_path, tmp_path, monkeypatch, chunks_per_entity):
    monkeypatch.setattr(mentions, "MENTION_SCAN_CHUNKS_PER_ENTITY", chunks_per_entity)
    write(tmp_path / "a" / "one.md", "# One\n\nWe met Ada Lovelace and ada lovelace's notes; not Adam.\n")
    write(tmp_path / "a" / "two.md", "# Two\n\nNothing here about Ada.\n")
    ingest_ok(run, db_path, tmp_path / "a")
    write(tmp_path / "b" / "Ada Lovelace.md", "---\naliases: [Countess of Lovelace]\n---\n# Ada\n\nMathematician.\n")
    write(tmp_path / "b" / "three.md", "# Three\n\nThe Countess of Lovelace wrote the first program.\n")
    ingest_ok(run, db_path, tmp_path / "b")
    conn = brain_sql.connect(db_path)
    mentioned = {(a, b) for a, t, b in edges(conn) if t == "mentions"}
    assert mentioned == {("one", "Ada Lovelace"), ("three", "Ada Lovelace")}


def test_reingest_unchanged_changes_nothing(run, db_path, tmp_path):
    ingest_ok(run, db_path, VAULT, os.path.join(DATA, "beir_corpus_sample.jsonl"))
    conn = brain_sql.connect(db_path)
    before = snapshot(conn)
    changes = conn.total_changes
    result = ingest_ok(run, db_path, VAULT, os.path.join(DATA, "beir_corpus_sample.jsonl"))
    assert "0 chunks added, 0 updated" in result.output and "0 removed" in result.output
    assert snapshot(conn) == before
    assert conn.total_changes == changes


def test_edit_replaces_only_what_changed(run, db_path, tmp_path):
    note = write(
        tmp_path / "v" / "Ops.md",
        "# Ops\n\nKeep this paragraph.\n\n## Pager\n\nOld pager vendor is Beeper. [[uses::Beeper]]\n",
    )
    write(tmp_path / "v" / "Beeper.md", "# Beeper\n\nA pager vendor.\n")
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    [(kept_id,)] = rows(conn, "select id from knowledge where content like '%Keep this%'")
    kept_vector = rows(conn, "select embedding_int8 from vec_knowledge where knowledge_id = ?", (kept_id,))
    assert ("Ops", "uses", "Beeper") in edges(conn) and ("Ops", "mentions", "Beeper") in edges(conn)

    note.write_text("# Ops\n\nKeep this paragraph.\n\n## Pager\n\nNew pager vendor is Klaxon. [[uses::Klaxon]]\n")
    result = ingest_ok(run, db_path, tmp_path / "v")
    assert "1 chunk added, 1 updated" in result.output and "1 removed" in result.output
    assert rows(conn, "select id from knowledge where content like '%Keep this%'") == [(kept_id,)]
    assert rows(conn, "select embedding_int8 from vec_knowledge where knowledge_id = ?", (kept_id,)) == kept_vector
    assert rows(conn, "select count(*) from knowledge where content like '%Beeper. [[%'") == [(0,)]
    assert rows(conn, "select knowledge_id from vec_knowledge order by 1") == rows(
        conn, "select id from knowledge order by 1"
    )
    [(new_id,)] = rows(conn, "select id from knowledge where content like '%Klaxon%'")
    assert rows(
        conn,
        "select embedding_int8 = brain_embed(?, 'int8') from vec_knowledge where knowledge_id = ?",
        ("Ops\nOps > Pager\n## Pager\n\nNew pager vendor is Klaxon. [[uses::Klaxon]]", new_id),
    ) == [(1,)]
    assert (
        rows(
            conn,
            "select rowid from knowledge_fts where knowledge_fts match 'beeper' and rowid != "
            "(select id from knowledge where title = 'Beeper')",
        )
        == []
    )
    assert rows(conn, "select count(*) from knowledge_fts where knowledge_fts match 'klaxon'") == [(1,)]
    found = edges(conn)
    assert ("Ops", "uses", "Klaxon") in found
    assert ("Ops", "uses", "Beeper") not in found and ("Ops", "mentions", "Beeper") not in found


def test_dedup_repeated_records_and_shared_vectors(run, db_path, tmp_path):
    same = {"title": "Wifi", "text": "The guest wifi password rotates monthly."}
    write(
        tmp_path / "r.jsonl",
        "\n".join(
            json.dumps(r) for r in [same, same, {"_id": "a", **same}, {"_id": "a", **same}, {"_id": "b", **same}]
        ),
    )
    ingest_ok(run, db_path, tmp_path / "r.jsonl")
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select external_id from knowledge order by id") == [(None,), ("a",), ("b",)]
    vectors = {r[0] for r in rows(conn, "select embedding_int8 from vec_knowledge")}
    assert len(vectors) == 1 and conn.execute("select count(*) from vec_knowledge").fetchone()[0] == 3


def test_repeated_ids_in_a_file(run, tmp_path):
    same = {"_id": "a", "text": "one"}
    path = write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in [same, same, {"_id": "b", "text": "two"}]))
    db_path = tmp_path / "brain.db"
    for _ in range(2):  # an exact repeat is stored once, run after run
        assert run("brain", "ingest", db_path, path).exit_code == 0
        assert rows(brain_sql.connect(db_path), "select external_id from knowledge order by 1") == [("a",), ("b",)]
    path.write_text("\n".join(json.dumps(r) for r in [same, {"_id": "a", "text": "other"}]))
    result = run("brain", "ingest", db_path, path)
    assert result.exit_code == 1 and 'repeats the id of an earlier record with other content: "a"' in result.output
    assert rows(brain_sql.connect(db_path), "select content from knowledge where external_id = 'a'") == [("one",)]


def test_records_gone_from_a_file_are_removed(run, db_path, tmp_path):
    path = write(tmp_path / "r.jsonl", '{"_id": 1, "text": "one"}\n{"_id": 2, "text": "two"}\n')
    ingest_ok(run, db_path, path)
    path.write_text('{"_id": 1, "text": "one"}\n')
    ingest_ok(run, db_path, path)
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select external_id from knowledge") == [("1",)]
    # a file with a bad line keeps what it had: a typo never deletes memories
    path.write_text("{broken\n")
    result = run("brain", "ingest", db_path, path)
    assert result.exit_code == 1
    assert rows(conn, "select external_id from knowledge") == [("1",)]


def test_prune_removes_files_no_longer_present(run, db_path, tmp_path):
    write(tmp_path / "v" / "keep.md", "# Keep\n\nstays\n")
    gone = write(tmp_path / "v" / "sub" / "gone.md", "# Gone\n\ngoes [[tagged::X]]\n")
    ingest_ok(run, db_path, tmp_path / "v")
    gone.unlink()
    gone.parent.rmdir()  # a folder left with nothing to ingest is not pruned (see below); one deleted is
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select title from knowledge order by title") == [("gone",), ("keep",)]
    result = ingest_ok(run, db_path, tmp_path / "v", extra=["--prune"])
    assert rows(conn, "select title from knowledge") == [("keep",)]
    assert rows(conn, "select count(*) from vec_knowledge") == [(1,)]
    assert rows(conn, "select count(*) from relationships where document_id like '%gone.md'") == [(0,)]
    assert rows(conn, "select document_id from documents") == [(str(tmp_path / "v" / "keep.md"),)]
    assert "1 removed" in result.output


def test_prune_of_a_missing_folder_removes_nothing(run, db_path, tmp_path):
    """An unmounted or renamed folder is not "every note deleted"."""
    write(tmp_path / "notes" / "a.md", "# A\n\none\n")
    write(tmp_path / "notes" / "b.md", "# B\n\ntwo\n")
    ingest_ok(run, db_path, tmp_path / "notes")
    (tmp_path / "notes").rename(tmp_path / "moved")
    result = run("brain", "ingest", db_path, tmp_path / "notes", "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "no such file or folder: nothing under it was pruned" in result.output and "0 removed" in result.output
    assert rows(brain_sql.connect(db_path), "select title from knowledge order by title") == [("a",), ("b",)]


@pytest.mark.parametrize("leftover", [None, "lost+found/", "cover.png"])
def test_prune_of_an_emptied_folder_is_refused_unless_confirmed(run, db_path, tmp_path, leftover):
    """An empty mount point, or a sync that took every file: --prune would leave
    the folder's memories none, so it prunes nothing there, names the folder and
    what it would remove, and exits non-zero; the rest of the ingest still goes in.
    --prune-all removes them."""
    write(tmp_path / "v" / "a.md", "# A\n\none\n")
    write(tmp_path / "v" / "sub" / "b.md", "# B\n\ntwo\n")
    other = write(tmp_path / "crm.jsonl", '{"_id": "c1", "text": "first"}\n')
    ingest_ok(run, db_path, tmp_path / "v", other)
    (tmp_path / "v").rename(tmp_path / "v.away")
    (tmp_path / "v").mkdir()
    if leftover:
        write(tmp_path / "v" / leftover / "x" if leftover.endswith("/") else tmp_path / "v" / leftover, "")
    write(other, '{"_id": "c1", "text": "first"}\n{"_id": "c2", "text": "second"}\n')
    result = run("brain", "ingest", db_path, tmp_path / "v", other, "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"nothing under {tmp_path / 'v'} was pruned: that would remove all 2 memories it held" in result.output
    assert "as all 2 of its files are gone" in result.output and "--prune-all" in result.output
    assert "0 removed" in result.output  # the report of what did go in is still told
    conn = brain_sql.connect(db_path)
    stored = [("a",), ("b",), ("c1",), ("c2",)]
    assert rows(conn, "select coalesce(title, external_id) from knowledge order by 1") == stored
    result = ingest_ok(run, db_path, tmp_path / "v", other, extra=["--prune-all"])
    assert "2 removed" in result.output
    assert rows(conn, "select external_id from knowledge order by 1") == [("c1",), ("c2",)]
    assert check(conn) == {}


@pytest.mark.parametrize("emptied", ["", "[]", "id,text\n"])
@pytest.mark.parametrize("prune", [[], ["--prune"]])
def test_a_records_file_emptied_keeps_its_memories_unless_confirmed(run, db_path, tmp_path, emptied, prune):
    """A records file a failed sync left empty (no record at all) does not take
    its memories with it, with or without --prune: it is named and the command
    exits 1, the other files still go in; --prune-all removes them."""
    suffix = {"": "jsonl", "[]": "json", "id,text\n": "csv"}[emptied]
    records = {
        "jsonl": '{"_id": "r1", "text": "first"}\n{"_id": "r2", "text": "second"}\n',
        "json": '[{"_id": "r1", "text": "first"}, {"_id": "r2", "text": "second"}]',
        "csv": "_id,text\nr1,first\nr2,second\n",
    }[suffix]
    crm = write(tmp_path / f"crm.{suffix}", records)
    other = write(tmp_path / "notes.jsonl", '{"_id": "n1", "text": "kept"}\n')
    ingest_ok(run, db_path, crm, other)
    write(crm, emptied)
    write(other, '{"_id": "n1", "text": "kept"}\n{"_id": "n2", "text": "new"}\n')
    result = run("brain", "ingest", db_path, crm, other, *prune)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"{crm} holds no records now" in result.output and "--prune-all" in result.output
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select external_id from knowledge order by 1") == [("n1",), ("n2",), ("r1",), ("r2",)]
    ingest_ok(run, db_path, crm, other, extra=["--prune-all"])
    assert rows(conn, "select external_id from knowledge order by 1") == [("n1",), ("n2",)]


@pytest.mark.parametrize("prune", [[], ["--prune"]])
def test_a_records_file_replaced_keeps_its_memories_unless_confirmed(run, db_path, tmp_path, prune):
    """A records file whose every earlier record is gone, replaced by others (another
    export written over it, a sync that failed), is refused as a folder whose files
    all went: its new records go in, its earlier memories stay, it is named and the
    command exits 1; --prune-all removes them. A file that keeps some records loses
    the rest as always."""
    crm = write(tmp_path / "crm.jsonl", '{"_id": "r1", "text": "first"}\n{"_id": "r2", "text": "second"}\n')
    ingest_ok(run, db_path, crm)
    write(crm, '{"_id": "r3", "text": "third"}\n')
    result = run("brain", "ingest", db_path, crm, *prune)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "0 removed" in result.output
    said = " ".join(result.output.split())
    assert f"nothing of {crm} was removed: that would remove all 2 memories it held before this ingest" in said
    assert "--prune-all" in said
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select external_id from knowledge order by 1") == [("r1",), ("r2",), ("r3",)]
    # and the next run, whose "r3" the run before stored: a new record still, not one the file kept (review 128)
    result = run("brain", "ingest", db_path, crm, *prune)
    assert result.exit_code == 1 and "that would remove all 2 memories" in " ".join(result.output.split())
    assert rows(conn, "select external_id from knowledge order by 1") == [("r1",), ("r2",), ("r3",)]
    result = ingest_ok(run, db_path, crm, extra=["--prune-all"])
    assert "2 removed" in result.output
    assert rows(conn, "select count(*) from brain_meta where key like 'replaced_refused%'") == [(0,)]  # forgotten
    assert rows(conn, "select external_id from knowledge order by 1") == [("r3",)]
    write(crm, '{"_id": "r3", "text": "third"}\n{"_id": "r4", "text": "fourth"}\n')
    ingest_ok(run, db_path, crm)
    write(crm, '{"_id": "r4", "text": "fourth"}\n')
    assert "1 removed" in ingest_ok(run, db_path, crm, extra=prune).output
    assert rows(conn, "select external_id from knowledge order by 1") == [("r4",)]
    assert check(conn) == {}


def test_ingest_help_says_what_a_prune_refuses(run):
    said = " ".join(run("brain", "ingest", "--help").output.split())
    assert "a records file whose earlier records are all gone" in said


def test_a_prune_is_judged_against_what_the_folder_held_before_the_ingest(run, db_path, tmp_path):
    """The vault replaced by an empty folder with a placeholder note: the new file
    is ingested, but the prune that would take every memory the folder held
    before is refused, as for an empty folder, and on the next run too (review 128:
    the placeholder it stored then read as a file the folder kept); renaming every
    file is no different."""
    vault = shutil.copytree(VAULT, tmp_path / "notes")
    stored = len(list(VAULT.rglob("*.md")))
    ingest_ok(run, db_path, vault)
    conn = brain_sql.connect(db_path)
    held = rows(conn, "select count(*) from knowledge")[0][0]
    shutil.rmtree(vault)
    write(vault / "lost+found" / "x", "")
    write(vault / ".DS_Store", "\0\0")
    write(vault / "README.txt", "This folder is a mount point: the notes drive mounts here.\n")
    result = run("brain", "ingest", db_path, vault, "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert (
        f"nothing under {vault} was pruned: that would remove all {held} memories it held before this ingest, "
        f"as all {stored} of its files are gone"
    ) in " ".join(result.output.split())
    assert "0 removed" in result.output
    assert rows(conn, "select count(*) from knowledge") == [(held + 1,)]  # the placeholder is in; nothing went
    # the next night's run: the placeholder it stored is a new file still, not one the folder kept (review 128)
    result = run("brain", "ingest", db_path, vault, "--prune")
    assert result.exit_code == 1 and f"all {held} memories it held before" in " ".join(result.output.split())
    assert rows(conn, "select count(*) from knowledge") == [(held + 1,)]
    result = ingest_ok(run, db_path, vault, extra=["--prune-all"])
    assert f"{held} removed" in result.output
    assert rows(conn, "select title from knowledge") == [("README",)]
    # its one file renamed: every memory the folder held would go, as for a placeholder, run after run
    (vault / "README.txt").rename(vault / "READ ME.txt")
    for _ in range(2):
        result = run("brain", "ingest", db_path, vault, "--prune")
        assert result.exit_code == 1
        assert "the one memory it held before this ingest, as its one file is gone" in result.output
        assert rows(conn, "select title from knowledge order by title") == [("READ ME",), ("README",)]
    result = ingest_ok(run, db_path, vault, extra=["--prune-all"])
    assert "1 removed" in result.output
    assert rows(conn, "select title from knowledge") == [("READ ME",)]


def test_a_folder_in_the_root_emptied_is_refused_and_a_folder_deleted_is_pruned(run, db_path, tmp_path):
    """acme/ emptied (a drive unmounted from it leaves lost+found/ and .DS_Store):
    its memories stay, the ingest names it and exits 1, a note deleted elsewhere
    is still pruned; once the folder itself is deleted, its memories go."""
    vault = shutil.copytree(VAULT, tmp_path / "notes")
    ingest_ok(run, db_path, vault)
    conn = brain_sql.connect(db_path)
    in_acme = rows(conn, "select count(*) from knowledge where source_path like ?", (f"{vault}/acme/%",))[0][0]
    shutil.rmtree(vault / "acme")
    write(vault / "acme" / "lost+found" / "x", "")
    write(vault / "acme" / ".DS_Store", "\0\0")
    (vault / "Vector Leg.md").unlink()
    result = run("brain", "ingest", db_path, vault, "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    text = " ".join(result.output.split())
    assert (
        f"nothing under {vault / 'acme'} was pruned: the folder is there but holds nothing to ingest, "
        f"and that would remove all {in_acme} memories from it"
    ) in text and "--prune-all" in text
    assert rows(conn, "select count(*) from knowledge where source_path like ?", (f"{vault}/acme/%",)) == [(in_acme,)]
    assert rows(conn, "select count(*) from knowledge where title = 'Vector Leg'") == [(0,)]
    shutil.rmtree(vault / "acme")  # deleted: the user's intent
    result = ingest_ok(run, db_path, vault, extra=["--prune"])
    assert f"{in_acme} removed" in result.output
    assert rows(conn, "select count(*) from knowledge where source_path like ?", (f"{vault}/acme/%",)) == [(0,)]
    assert check(conn) == {}


def test_a_folder_in_the_root_whose_files_are_all_gone_but_a_new_one_is_refused(run, db_path, tmp_path):
    """acme/ unmounted, a "not mounted" note left in it: every file it held is gone but
    it holds a new one. As for the root itself, its memories stay and the ingest names
    it and exits 1; a folder that keeps one of its files loses only the gone ones."""
    vault = shutil.copytree(VAULT, tmp_path / "notes")
    ingest_ok(run, db_path, vault)
    conn = brain_sql.connect(db_path)
    in_acme = rows(conn, "select count(*) from knowledge where source_path like ?", (f"{vault}/acme/%",))[0][0]
    shutil.move(vault / "acme", tmp_path / "acme.away")
    write(vault / "acme" / "README.txt", "Drive not mounted. Mount the team share here.")
    result = run("brain", "ingest", db_path, vault, "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    text = " ".join(result.output.split())
    assert (
        f"nothing under {vault / 'acme'} was pruned: none of the files it held is there (it holds only new ones), "
        f"and that would remove all {in_acme} memories from it"
    ) in text and "--prune-all" in text
    assert rows(conn, "select count(*) from knowledge where source_path like ?", (f"{vault}/acme/%",)) == [
        (in_acme + 1,)  # the new note is in
    ]
    # the next run: the note it stored is a new file still, not one the folder kept (review 128); the folder
    # a PATH of its own too, it is named once, not once a PATH in two wordings (review 127, L1)
    for paths in ([vault], [vault, vault / "acme"]):
        result = run("brain", "ingest", db_path, *paths, "--prune")
        assert result.exit_code == 1 and " ".join(result.output.split()).count(f"under {vault / 'acme'}") == 1
        assert rows(conn, "select count(*) from knowledge where source_path like ?", (f"{vault}/acme/%",)) == [
            (in_acme + 1,)
        ]
    assert rows(conn, "select count(*) from brain_meta where key like 'prune_refused:%'") == [(1,)]
    kept = sorted((tmp_path / "acme.away").rglob("*.md"))[0]  # one of its files back: the others were deleted
    shutil.copy(kept, vault / "acme" / kept.relative_to(tmp_path / "acme.away"))
    result = ingest_ok(run, db_path, vault, extra=["--prune"])
    assert rows(conn, "select count(*) from knowledge where source_path like ? and title = ?",
                (f"{vault}/acme/%", kept.stem)) != [(0,)]  # fmt: skip
    assert rows(conn, "select count(*) from brain_meta where key like 'prune_refused%'") == [(0,)]  # forgotten
    assert check(conn) == {}


def test_ingest_help_says_what_prune_refuses(run):
    result = run("brain", "ingest", "--help")
    text = " ".join(result.output.split())
    assert "a PATH that would lose every memory it held before this ingest, whatever new files it has" in text
    assert "a folder in it that held memories and is still there but holds nothing to ingest, or only new files" in text
    assert "A folder deleted is pruned" in text and "--prune-all" in text


def test_a_record_valid_to_before_its_valid_from_is_skipped_with_its_line(run, db_path, tmp_path):
    path = write(
        tmp_path / "roles.jsonl",
        "\n".join(
            [
                '{"_id": "ok", "text": "Alice ran support.", "valid_from": "2023-01-01", "valid_to": "2025-01-01"}',
                '{"_id": "back", "text": "Bob ran support.", "valid_from": "2025-01-01", "valid_to": "2024-01-01"}',
            ]
        ),
    )
    result = run("brain", "ingest", db_path, path)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert (
        f"{path}:2: valid_to (2024-01-01 00:00:00) must be later than valid_from (2025-01-01 00:00:00)" in result.output
    ), result.output
    assert rows(brain_sql.connect(db_path), "select external_id from knowledge") == [("ok",)]


@pytest.mark.parametrize(
    "scope, named",
    [
        ("/acme ", "a space at the start or end"),
        ("/acme\u200b", "U+200B ZERO WIDTH SPACE"),
        ("/acme\u2800", "U+2800 BRAILLE PATTERN BLANK"),
        ("/acme/e\u0301", "write é as U+00E9"),
        ("/\u0430cme", "U+0430 CYRILLIC SMALL LETTER A is CYRILLIC"),
    ],
)
def test_a_scope_option_that_looks_like_another_is_refused(run, db_path, tmp_path, scope, named):
    path = write(tmp_path / "a.md", "# A\n\none\n")
    result = run("brain", "ingest", db_path, path, "--scope", scope)
    assert result.exit_code == 2 and "Traceback" not in result.output and named in result.output, result.output
    ingest_ok(run, db_path, path)
    result = run("brain", "recall", db_path, "one", "--scope", scope)
    assert result.exit_code != 0 and "Traceback" not in result.output and named in result.output, result.output


def bad_inputs(folder):
    """(file, line, what the message must say) for each kind of bad input."""
    write(folder / "good.md", "# Good\n\nThis one ingests.\n")
    (folder / "latin1.md").write_bytes("# Caf\xe9\n".encode("latin-1"))
    os.symlink("/proc/self/mem", folder / "unreadable.md")
    write(folder / "lines.jsonl", '{"text": "first ok"}\n{"text": broken}\n{"text": "third ok"}\n')
    write(folder / "frontmatter.md", "---\ntitle: [unclosed\n---\n# X\n\ntext\n")
    write(folder / "notext.csv", "title,body\nA,B\n")
    write(folder / "big.jsonl", json.dumps({"text": "x" * 1_000_001}) + "\n")
    write(folder / "title.json", json.dumps([{"title": "t" * 501, "text": "fine"}]))
    write(folder / "boolid.jsonl", '{"_id": true, "text": "an id that is not one"}\n')
    return [
        ("latin1.md", 1, "not UTF-8"),
        ("unreadable.md", None, "cannot read"),
        ("lines.jsonl", 2, "malformed JSON line"),
        ("frontmatter.md", 2, "broken frontmatter"),
        ("notext.csv", 1, "no 'content' or 'text' column"),
        ("big.jsonl", 1, "the limit is 1,000,000"),
        ("title.json", None, "limit is 500"),
        ("boolid.jsonl", 1, "'_id' / 'id' must be text or a whole number"),
    ]


def test_bad_inputs_are_named_and_skipped(run, db_path, tmp_path):
    expected = bad_inputs(tmp_path / "in")
    result = run("brain", "ingest", db_path, tmp_path / "in")
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    messages = [line for line in result.output.splitlines() if line.startswith("skipped ")]
    assert len(messages) == len(expected)
    for name, line, text in expected:
        where = f"{tmp_path / 'in' / name}:{line}:" if line else f"{tmp_path / 'in' / name}:"
        assert any(m.startswith(f"skipped {where}") and text in m for m in messages), (name, messages)
    conn = brain_sql.connect(db_path)
    # everything good still ingested, nothing of the bad ones written
    assert rows(conn, "select content from knowledge order by content") == [
        ("# Good\n\nThis one ingests.",),
        ("first ok",),
        ("third ok",),
    ]
    assert conn.execute("select count(*) from vec_knowledge").fetchone()[0] == 3
    assert conn.execute("select count(*) from knowledge_fts").fetchone()[0] == 3
    assert f"{len(expected)} skipped" in result.output


def test_a_malformed_document_never_stops_the_run(run, tmp_path):
    write(tmp_path / "in" / "mixed.md", "---\n2024: x\nproject: y\n---\n# Mixed\n\nkeys of two types\n")
    write(
        tmp_path / "in" / "r.jsonl",
        "\n".join(
            json.dumps(r)
            for r in [
                {"text": "far", "observed_at": "-99999y"},
                {"text": "huge", "relevance_tier": 1e400},
                {"text": "fine"},
            ]
        ),
    )
    db_path = tmp_path / "brain.db"
    result = run("brain", "ingest", db_path, tmp_path / "in")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert 'observed_at "-99999y" is out of range' in result.output
    assert "r.jsonl:2: malformed JSON line: Infinity is not a JSON number" in result.output
    conn = brain_sql.connect(db_path)
    assert {r[0] for r in rows(conn, "select content from knowledge")} == {"# Mixed\n\nkeys of two types", "fine"}
    assert check(conn) == {}


def test_missing_path_and_unsupported_type(run, db_path, tmp_path):
    """Both named; for a brain not made yet, nothing is there to ingest, and no file is
    made for it (review 105, L4: an empty brain was left behind)."""
    write(tmp_path / "image.png", "not really")
    (tmp_path / "empty").mkdir()
    for paths in ([tmp_path / "nope", tmp_path / "image.png"], [tmp_path / "empty"]):
        result = run("brain", "ingest", db_path, *paths)
        assert result.exit_code == 2 and "nothing to ingest in" in result.output, result.output
        assert f"sqlite-utils brain init {db_path} makes an empty one" in result.output.replace("\n", " ")
        assert not db_path.exists()
    # review 107, M2: every file refused (broken frontmatter, not UTF-8, an empty note, a CSV header alone)
    for name, data in [("broken.md", b"---\ntitle: [\n---\n"), ("bad.txt", b"\xff\xfe"), ("empty.md", b"")]:
        (tmp_path / "refused" / name).parent.mkdir(exist_ok=True)
        (tmp_path / "refused" / name).write_bytes(data)
    write(tmp_path / "refused" / "header.csv", "id,text\n")
    # that is known only once they are read, by which time another process may have the new file open:
    # it stays, and is said to be empty (review 108, H6: removed, a write through the other process was lost)
    result = run("brain", "ingest", db_path, tmp_path / "refused")
    assert result.exit_code == 1 and f"nothing was stored: {db_path} is an empty brain made" in result.output
    db_path.unlink()
    assert run("brain", "init", db_path).exit_code == 0
    result = run("brain", "ingest", db_path, tmp_path / "nope", tmp_path / "image.png")
    assert result.exit_code == 1
    assert "no such file or folder" in result.output and "unsupported file type" in result.output


def test_bad_cli_scope_is_a_clear_error(run, db_path, tmp_path):
    write(tmp_path / "a.md", "# A\n\ntext\n")
    result = run("brain", "ingest", db_path, tmp_path / "a.md", "--scope", "acme")
    assert result.exit_code == 2
    assert "scope must be a path starting with '/'" in result.output
    assert "Traceback" not in result.output


def test_bad_record_fields_are_named(run, db_path, tmp_path):
    write(
        tmp_path / "r.jsonl",
        "\n".join(
            json.dumps(r)
            for r in [
                {"text": "a", "class": "gossip"},
                {"text": "b", "expires_at": "next tuesday"},
                {"text": "c", "confidence": 7},
                {"text": "d", "relations": [{"to": "X"}]},
                {"text": "e", "tags": ["t"]},
                {"title": "ok", "text": "f"},
            ]
        ),
    )
    result = run("brain", "ingest", db_path, tmp_path / "r.jsonl")
    assert result.exit_code == 1
    out = result.output
    assert "r.jsonl:1: class must be one of memory, reference, policy" in out
    assert 'r.jsonl:2: expires_at "next tuesday" is not a date' in out
    assert "r.jsonl:3: confidence must be from 0 to 1" in out
    assert "r.jsonl:4: each of relations[] must be an object with 'type' and 'to'" in out
    assert "r.jsonl:5: entities, tags, aliases and relations need a title" in out
    assert rows(brain_sql.connect(db_path), "select title from knowledge") == [("ok",)]


def test_frontmatter_that_expands_is_refused_and_the_rest_goes_in(run, db_path, tmp_path):
    """A YAML alias bomb: a few hundred bytes that would expand to gigabytes, in
    any key, `text` included (no content: a note's text is its body)."""
    bomb = ["---", "a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    bomb += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    write(tmp_path / "in" / "bomb.md", "\n".join(bomb + ["---", "# Bomb", "", "boom"]) + "\n")
    doubled = ", ".join(["&b0 [x, x]"] + [f"&b{i} [*b{i - 1}, *b{i - 1}]" for i in range(1, 45)])
    write(tmp_path / "in" / "text.md", f"---\ntext: [{doubled}]\n---\n# Text\n\nboom\n")
    aliases = "\n".join(f"k{i}: *x" for i in range(150))
    write(tmp_path / "in" / "aliases.md", f"---\nx: &x 1\n{aliases}\n---\n# Aliases\n\nmany\n")
    write(tmp_path / "in" / "fine.md", "---\nx: &x 1\ny: *x\n---\n# Fine\n\nok\n")
    # review 103: merges (<<) of ten into each level, 80 aliases; their pairs were copied ten times a level
    merges = ["---", "l0: &l0 {" + ", ".join(f"k{i}: {i}" for i in range(10)) + "}"]
    merges += [f"l{n}: &l{n} {{<<: [{', '.join([f'*l{n - 1}'] * 10)}], own{n}: {n}}}" for n in range(1, 9)]
    write(tmp_path / "in" / "merges.md", "\n".join(merges + ["---", "# Merges", "", "fine"]) + "\n")
    write(tmp_path / "in" / "itself.md", "---\na: &a {x: 1, <<: *a}\n---\n# Itself\n\nloop\n")
    write(tmp_path / "in" / "within.md", "---\na: &a {x: {y: [*a]}}\n---\n# Within\n\nloop\n")  # review 104
    # review 104: one key spelled two ways (true and True): the mapping's own value wins, as YAML means
    spelled = (
        "---\np: &p {true: merged}\ns: &s {<<: *p, True: own}\nt: &t {TRUE: other}\nm: {<<: [*s, *t]}\n---\n# Spelled\n"
    )
    write(tmp_path / "in" / "spelled.md", spelled + "\nkeys\n")
    result = run("brain", "ingest", db_path, tmp_path / "in")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "bomb.md:1: its fields and metadata come to more than 64,000 bytes" in result.output
    assert "text.md:1: its fields and metadata come to more than 64,000 bytes" in result.output
    assert "aliases.md" in result.output and "more than 100 YAML aliases" in result.output
    assert "itself.md:2: broken frontmatter: the alias *a is inside the value it names" in result.output
    assert "within.md:2: broken frontmatter: the alias *a is inside the value it names" in result.output
    assert sorted(rows(brain_sql.connect(db_path), "select title from knowledge")) == [
        ("fine",),
        ("merges",),
        ("spelled",),
    ]
    [(spelled_metadata,)] = rows(brain_sql.connect(db_path), "select metadata from knowledge where title = 'spelled'")
    assert json.loads(spelled_metadata)["m"] == {"true": "own"}
    [(metadata,)] = rows(brain_sql.connect(db_path), "select metadata from knowledge where title = 'merges'")
    assert json.loads(metadata)["l8"] == {**{f"k{i}": i for i in range(10)}, **{f"own{n}": n for n in range(1, 9)}}


def test_prune_with_an_unreadable_folder_removes_nothing_under_it(db_path, tmp_path):
    """A folder ingest may not read is reported, the run exits non-zero, and the
    memories from it stay: it was not read, so nothing says they were deleted.
    Root reads any folder, so as root the command runs without that power (capsh)."""
    write(tmp_path / "notes" / "a.md", "# A\n\none\n")
    write(tmp_path / "notes" / "sub" / "b.md", "# B\n\ntwo\n")
    command = [
        sys.executable,
        "-m",
        "sqlite_utils",
        "brain",
        "ingest",
        str(db_path),
        str(tmp_path / "notes"),
        "--prune",
    ]
    assert subprocess.run(command, capture_output=True).returncode == 0
    if os.geteuid() == 0:
        if not shutil.which("capsh"):
            pytest.skip("root reads every folder, and capsh is not here to drop that")
        command = ["capsh", "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", shlex.join(command)]
    (tmp_path / "notes" / "sub").chmod(0)
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    finally:
        (tmp_path / "notes" / "sub").chmod(0o755)
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output
    assert "cannot read this folder" in output and "nothing under it was pruned" in output, output
    assert rows(brain_sql.connect(db_path), "select title from knowledge order by title") == [("a",), ("b",)]


def test_a_folder_linked_back_keeps_the_memories_its_target_did_not_give_again(db_path, tmp_path):
    """The notes under a folder moved and linked back are pruned as moved only where
    each is stored again where it really is: with a folder in the target that cannot
    be read, that PATH is not pruned, and the memory of the note in it stays under the
    link's path; the note read where it is goes from there. Root reads any folder, so
    as root the command runs without that power (capsh)."""
    write(tmp_path / "v" / "keep.md", "# Keep\n\nstays\n")
    write(tmp_path / "v" / "acme" / "a.md", "# A\n\none\n")
    write(tmp_path / "v" / "acme" / "sub" / "b.md", "# B\n\ntwo\n")
    command = [sys.executable, "-m", "sqlite_utils", "brain", "ingest", str(db_path), str(tmp_path / "v")]
    assert subprocess.run(command, capture_output=True).returncode == 0
    (tmp_path / "ext").mkdir()
    (tmp_path / "v" / "acme").rename(tmp_path / "ext" / "acme")
    (tmp_path / "v" / "acme").symlink_to(tmp_path / "ext" / "acme")
    command += [str(tmp_path / "ext" / "acme"), "--prune"]
    if os.geteuid() == 0:
        if not shutil.which("capsh"):
            pytest.skip("root reads every folder, and capsh is not here to drop that")
        command = ["capsh", "--drop=cap_dac_override,cap_dac_read_search", "--", "-c", shlex.join(command)]
    (tmp_path / "ext" / "acme" / "sub").chmod(0)
    try:
        result = subprocess.run(command, capture_output=True, text=True)
    finally:
        (tmp_path / "ext" / "acme" / "sub").chmod(0o755)
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output
    assert "cannot read this folder" in output and "nothing under it was pruned" in output, output
    assert rows(brain_sql.connect(db_path), "select source_path from documents order by source_path") == [
        (str(tmp_path / "ext" / "acme" / "a.md"),),
        (str(tmp_path / "v" / "acme" / "sub" / "b.md"),),
        (str(tmp_path / "v" / "keep.md"),),
    ]


def _bounded(command, **kwargs):
    """`command` run with at most 3 GB of address space, and stopped if it waits
    on input for good: what an unbounded read of a device or a pipe would take."""

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    return subprocess.run(command, capture_output=True, text=True, timeout=300, preexec_fn=limit, **kwargs)


def test_ingest_reads_regular_files_only_and_none_past_its_limit(tmp_path):
    """A symlink to /dev/zero, a named pipe, a 3 GB sparse note, a 2 MB note, a .json
    past its limit and a JSON line past the limit of a line: each is skipped by name,
    without being read whole (the run stays within 3 GB and never waits on the pipe),
    and the rest goes in, lines after the long one included."""
    folder = tmp_path / "in"
    write(folder / "good.md", "# Good\n\nThis one ingests.\n")
    os.symlink("/dev/zero", folder / "zero.md")
    os.mkfifo(folder / "pipe.md")
    with open(folder / "sparse.md", "wb") as f:
        f.truncate(3 << 30)
    write(folder / "big.md", "# Big\n\n" + "word " * 400_000)
    with open(folder / "big.json", "wb") as f:
        f.truncate(MAX_JSON_FILE_BYTES + 1)
    with open(folder / "long.jsonl", "wb") as f:
        f.write(b'{"text": "before the long line"}\n')
        f.truncate(MAX_LINE_BYTES + 100)
        f.seek(0, os.SEEK_END)
        f.write(b'\n{"text": "after the long line"}\n')
    os.mkfifo(tmp_path / "named.jsonl")
    db_path = tmp_path / "brain.db"
    named = [str(folder), str(tmp_path / "named.jsonl"), str(folder / "zero.md")]  # named too, not only found
    result = _bounded([sys.executable, "-m", "sqlite_utils", "brain", "ingest", str(db_path), *named])
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output
    skipped = sorted(line for line in output.splitlines() if line.startswith("skipped "))
    assert skipped == [
        "skipped /dev/zero: a character device: only regular files are read; skipped",
        f"skipped {folder / 'big.json'}: file is {MAX_JSON_FILE_BYTES + 1:,} bytes; the limit is "
        f"{MAX_JSON_FILE_BYTES:,} (a json file is read whole (a JSON lines file, a line at a time, may be of any "
        "size)): skipped unread",
        f"skipped {folder / 'big.md'}: file is 2,000,007 bytes; the limit is 1,064,000 (a note or text file is one "
        "memory: its content at most 1,000,000 bytes (1 MB) and its frontmatter 64,000): skipped unread",
        f"skipped {folder / 'long.jsonl'}:2: line is longer than {MAX_LINE_BYTES:,} bytes, the limit for one "
        "record: skipped unread",
        f"skipped {folder / 'pipe.md'}: a named pipe (FIFO): only regular files are read; skipped",
        f"skipped {folder / 'sparse.md'}: file is 3,221,225,472 bytes; the limit is 1,064,000 (a note or text file "
        "is one memory: its content at most 1,000,000 bytes (1 MB) and its frontmatter 64,000): skipped unread",
        f"skipped {folder / 'zero.md'}: a symlink to /dev/zero, a character device: only regular files are read; "
        "skipped",
        f"skipped {tmp_path / 'named.jsonl'}: a named pipe (FIFO): only regular files are read; skipped",
    ]
    assert "8 skipped" in output
    assert rows(brain_sql.connect(db_path), "select content from knowledge order by content") == [
        ("# Good\n\nThis one ingests.",),
        ("after the long line",),
        ("before the long line",),
    ]


def test_overlapping_roots_count_each_document_once(run, db_path, tmp_path):
    """`ingest b.db w/sub w` (or the same folder through a symlink): each file is one
    document, stored once and counted once in the summary."""
    write(tmp_path / "w" / "top.md", "# Top\n\nThe top note.")
    write(tmp_path / "w" / "sub" / "a.md", "# A\n\nThe first note.")
    write(tmp_path / "w" / "sub" / "b.md", "# B\n\nThe second note.")
    (tmp_path / "wlink").symlink_to(tmp_path / "w")
    for roots in [(tmp_path / "w" / "sub", tmp_path / "w"), (tmp_path / "wlink" / "sub", tmp_path / "w")]:
        report = brain_sql.ingest(brain_sql.connect(db_path), roots)
        assert (report.files, report.documents) == (3, 3), report.summary()
    result = run("brain", "ingest", db_path, tmp_path / "wlink" / "sub", tmp_path / "w", tmp_path / "w" / "top.md")
    assert result.exit_code == 0 and "3 files, 3 documents" in result.output and "3 unchanged" in result.output
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select count(*) from documents") == [(3,)]


def test_a_linked_folder_inside_a_path_is_named_not_passed_over(run, db_path, tmp_path):
    """A folder inside a PATH that is a symbolic link to one (moved to another drive,
    linked back) is not walked: named as skipped with where it points, and the ingest
    exits 1; nothing under the PATH is pruned. Given its target as a PATH it goes in,
    and a link to a folder walked anyway (a loop) is not named."""
    write(tmp_path / "v" / "keep.md", "# Keep\n\nstays\n")
    gone = write(tmp_path / "v" / "gone.md", "# Gone\n\ngoes\n")
    write(tmp_path / "ext" / "acme" / "Linked.md", "# Linked\n\nunder the link\n")
    (tmp_path / "v" / "acme").symlink_to(tmp_path / "ext" / "acme")
    (tmp_path / "ext" / "acme" / "loop").symlink_to(tmp_path / "ext")
    result = run("brain", "ingest", db_path, tmp_path / "v")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert (
        f"skipped {tmp_path / 'v' / 'acme'}: a symbolic link to a folder ({tmp_path / 'ext' / 'acme'}), "
        "not followed: give its target as a PATH"
    ) in result.output
    assert "2 files, 2 documents" in result.output and "1 skipped" in result.output
    gone.unlink()
    pruned = run("brain", "ingest", db_path, tmp_path / "v", "--prune")
    assert pruned.exit_code == 1 and "not followed: give its target as a PATH: nothing under it was pruned" in (
        pruned.output
    )
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select title from knowledge order by title") == [("gone",), ("keep",)]
    ingest_ok(run, db_path, tmp_path / "v", tmp_path / "ext", extra=["--prune"])
    assert rows(conn, "select title from knowledge order by title") == [("Linked",), ("keep",)]


@pytest.mark.parametrize("relative", [False, True])
def test_a_folder_moved_and_linked_back_is_pruned_once_its_target_is_a_path(run, db_path, tmp_path, relative):
    """Review 11, F3: notes stored under v/acme, then the folder moved to ext/acme and
    linked back. Given v alone, the link is named and nothing is pruned; given v and
    ext/acme as the message says, the notes go in under ext/acme and --prune removes
    those stored under the link's path (still opening through it) as moved: each note
    is stored once, and stays so."""
    shutil.copytree(VAULT, tmp_path / "v")
    notes = len(list(VAULT.rglob("*.md")))
    ingest_ok(run, db_path, tmp_path / "v")
    (tmp_path / "ext").mkdir()
    (tmp_path / "v" / "acme").rename(tmp_path / "ext" / "acme")
    (tmp_path / "v" / "acme").symlink_to("../ext/acme" if relative else tmp_path / "ext" / "acme")
    conn = brain_sql.connect(db_path)
    stored = rows(conn, "select count(*), count(distinct title) from knowledge")
    skipped = run("brain", "ingest", db_path, tmp_path / "v", "--prune")
    assert skipped.exit_code == 1 and "not followed: give its target as a PATH: nothing under it was pruned" in (
        skipped.output
    )
    assert rows(conn, "select count(*), count(distinct title) from knowledge") == stored
    for _ in range(2):
        ingest_ok(run, db_path, tmp_path / "v", tmp_path / "ext" / "acme", extra=["--prune"])
        assert rows(conn, "select count(distinct source_path), count(distinct title) from knowledge") == [
            (notes, notes)
        ]
        assert rows(
            conn, "select count(*) from documents where source_path like ?", (f"{tmp_path / 'v' / 'acme'}/%",)
        ) == [(0,)]
    assert rows(conn, "select count(*) from knowledge") == [stored[0][:1]]


def test_a_folder_moved_into_a_dot_folder_and_linked_back_keeps_its_memories(run, db_path, tmp_path):
    """Review 12, F1: v/acme moved to v/.archive/acme (a folder the walk passes over)
    and linked back: its notes open through the link and nothing reads them under their
    new path, so --prune keeps the memories stored under the link's path."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    stored = rows(conn, "select count(*) from knowledge")
    (tmp_path / "v" / ".archive").mkdir()
    (tmp_path / "v" / "acme").rename(tmp_path / "v" / ".archive" / "acme")
    (tmp_path / "v" / "acme").symlink_to(".archive/acme")
    run("brain", "ingest", db_path, tmp_path / "v", "--prune")
    assert rows(conn, "select count(*) from knowledge") == stored


def test_a_link_to_a_note_is_read_as_a_copy_and_kept(run, db_path, tmp_path):
    """A link to a file is read as the note it opens, a copy under another name: a
    note moved to another PATH and linked back, or an alias in a folder of its own,
    stays stored under both names, and a second --prune run adds and removes nothing
    (review 12, F3; review 13, F2)."""
    note = write(tmp_path / "v" / "Note.md", "# Note\n\nthe pager rota\n")
    write(tmp_path / "v" / "Other.md", "# Other\n\nstays\n")
    ingest_ok(run, db_path, tmp_path / "v")
    (tmp_path / "ext").mkdir()
    note.rename(tmp_path / "ext" / "Note.md")
    note.symlink_to(tmp_path / "ext" / "Note.md")
    (tmp_path / "v" / "refs").mkdir()
    (tmp_path / "v" / "refs" / "Alias.md").symlink_to(tmp_path / "v" / "Other.md")
    conn = brain_sql.connect(db_path)
    ingest_ok(run, db_path, tmp_path / "v", tmp_path / "ext", extra=["--prune"])
    again = ingest_ok(run, db_path, tmp_path / "v", tmp_path / "ext", extra=["--prune"])
    assert "0 chunks added" in again.output and "0 removed" in again.output, again.output
    assert [Path(p).name for (p,) in rows(conn, "select source_path from documents order by source_path")] == [
        "Note.md",
        "Note.md",
        "Other.md",
        "Alias.md",
    ]


def test_a_prune_never_touches_a_folder_whose_name_differs_in_case(run, db_path, tmp_path):
    """Review 13, F4: v/Work and v/work are two folders; a prune of work never removes
    what Work holds (SQL's LIKE ignores the case of ASCII letters)."""
    shutil.copytree(VAULT, tmp_path / "n" / "Work")
    write(tmp_path / "n" / "work" / "Other.md", "# Other\n\nabout llamas\n")
    ingest_ok(run, db_path, tmp_path / "n" / "Work", tmp_path / "n" / "work")
    conn = brain_sql.connect(db_path)
    held = rows(conn, "select count(*) from knowledge")
    shutil.rmtree(tmp_path / "n" / "Work")
    ingest_ok(run, db_path, tmp_path / "n" / "work", extra=["--prune"])
    assert rows(conn, "select count(*) from knowledge") == held


def test_a_file_whose_name_is_not_utf8_is_skipped_by_name_and_the_rest_goes_in(run, db_path, tmp_path):
    """Review 13, F1: a name written on another system (Latin-1) is no text a brain can
    store: that file is named and skipped, the rest of the folder goes in, exit 1."""
    write(tmp_path / "v" / "Quokka.md", "# Quokka\n\nA note about quokkas\n")
    odd = os.fsdecode(bytes(tmp_path / "v") + b"/R\xe9call.md")
    with open(odd, "w") as out:
        out.write("# Recall\n\nzebra\n")
    odd_folder = os.fsdecode(bytes(tmp_path) + b"/w\xe9")
    os.mkdir(odd_folder)
    for extra in ([], ["--prune"]):
        result = run("brain", "ingest", db_path, tmp_path / "v", *extra)
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert "R\\xe9call.md" in result.output and "its name is not UTF-8 text" in result.output, result.output
        given = run("brain", "ingest", db_path, odd_folder, tmp_path / "v", *extra)  # a PATH so named
        assert given.exit_code == 1 and "Traceback" not in given.output, given.output
        assert "w\\xe9" in given.output and "its name is not UTF-8 text" in given.output, given.output
    assert rows(brain_sql.connect(db_path), "select title from knowledge") == [("Quokka",)]


@pytest.mark.parametrize(
    "option, value, named",
    [
        ("--source", "crm\u200b", 'source "crm\\u200b" may not contain U+200B ZERO WIDTH SPACE'),
        ("--source", "crm ", 'source "crm " may not begin or end with a space'),
        ("--domain", "sales\u00a0x", 'domain "sales\\u00a0x" may not contain U+00A0 NO-BREAK SPACE'),
        ("--domain", "sales\u200e", "U+200E LEFT-TO-RIGHT MARK"),
        # review 95: a record's fields are held to the limit, so the options are (an export would not ingest)
        ("--source", "s" * 70_000, "source is 70,000 characters; the limit is 64,000"),
        ("--domain", "d" * 70_000, "domain is 70,000 characters; the limit is 64,000"),
        ("--scope", "/" + "p" * 70_000, "scope is 70,001 characters; the limit is 64,000"),
    ],
)
def test_a_source_or_domain_option_that_looks_like_another_is_a_usage_error(
    run, db_path, tmp_path, option, value, named
):
    """--source 'crm\\u200b' would store a second source that reads as crm, which a
    filter on crm misses: refused by name as a scope is (review 10, F4)."""
    path = write(tmp_path / "a.jsonl", '{"title": "a", "content": "source probe"}\n')
    for command in ("ingest", "remember"):
        result = run("brain", command, db_path, path, option, value)
        assert result.exit_code == 2 and "Traceback" not in result.output and named in result.output, result.output
        assert not db_path.exists(), "an option refused makes no brain file"


def test_an_ingest_of_nothing_there_makes_no_brain_file(run, db_path, tmp_path):
    """Every PATH missing (a typo): nothing to ingest, so no empty brain is left behind
    (review 103). Into a brain there already, a missing PATH is named as it was."""
    result = run("brain", "ingest", db_path, tmp_path / "no-such-notes")
    assert result.exit_code == 2 and "nothing to ingest" in result.output and "Traceback" not in result.output
    assert not db_path.exists()
    assert run("brain", "init", db_path).exit_code == 0
    result = run("brain", "ingest", db_path, tmp_path / "no-such-notes")
    assert result.exit_code == 1 and "no such file or folder" in result.output, result.output


def test_a_model_that_cannot_be_loaded_makes_no_brain_file(run, db_path, tmp_path):
    """init or ingest --model naming no model a brain can use is refused before the
    file is made: a typo leaves nothing to delete, nor a brain of the wrong model."""
    path = write(tmp_path / "a.jsonl", '{"title": "a", "content": "model probe"}\n')
    for args in (["init", db_path], ["ingest", db_path, path]):
        result = run("brain", *args, "--model", str(tmp_path / "no-such-model"))
        assert result.exit_code == 2 and "Traceback" not in result.output, result.output
        assert "cannot load model2vec model" in result.output and "there is no folder" in result.output
        assert not db_path.exists()
    other = tmp_path / "not-a-model"  # a folder of something else (--model /usr named a pipe deep in it)
    (other / "deep").mkdir(parents=True)
    os.mkfifo(other / "deep" / "pipe")
    result = run("brain", "ingest", db_path, path, "--model", str(other))
    assert result.exit_code == 2 and f"{other} holds no config.json" in " ".join(result.output.split())
    assert not db_path.exists()


def test_a_brain_model_setting_that_cannot_be_loaded_makes_no_brain_file(run, db_path, tmp_path, monkeypatch):
    """$BRAIN_MODEL naming no model is refused before init or ingest makes the file,
    and named as the setting at fault: it left an empty file, and its error named a
    --model nobody gave (review 152). A brain there already keeps its own model."""
    path = write(tmp_path / "a.jsonl", '{"title": "a", "content": "model probe"}\n')
    monkeypatch.setenv("BRAIN_MODEL", str(tmp_path / "no-such-model"))
    for args in (["init", db_path], ["ingest", db_path, path]):
        result = run("brain", *args)
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert "$BRAIN_MODEL: cannot load model2vec model" in result.output and "--model" not in result.output
        assert not db_path.exists()
    monkeypatch.delenv("BRAIN_MODEL")
    assert run("brain", "init", db_path).exit_code == 0
    monkeypatch.setenv("BRAIN_MODEL", str(tmp_path / "no-such-model"))
    assert run("brain", "init", db_path).exit_code == 0


def test_records_whose_grouping_fields_look_like_another_value_are_skipped_by_file_and_line(run, db_path, tmp_path):
    """source, domain, owner, node_kind, lawful_basis, region and a turn's speaker
    and session follow scope's rule on what shows as nothing: such a record is
    skipped, naming its file, its line and the field (review 10, F4)."""
    records = [
        {"title": "ok", "content": "fine", "source": "crm", "speaker": "Alice", "session_id": "s1"},
        {"title": "a", "content": "x", "source": "crm\u200b"},
        {"title": "b", "content": "x", "domain": "sales "},
        {"title": "c", "content": "x", "owner": "ops\u2060"},
        {"title": "d", "content": "x", "node_kind": "note\ufeff"},
        {"title": "e", "content": "x", "lawful_basis": "consent\u202e"},
        {"title": "f", "content": "x", "region": "e\u0301u"},
        {"title": "g", "content": "x", "speaker": "Alice\u200b", "session_id": "s1"},
        {"title": "h", "content": "x", "speaker": "Alice", "session_id": "s\u00a01"},
    ]
    path = write(tmp_path / "r.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    result = run("brain", "ingest", db_path, path)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    for line, named in [
        (2, 'source "crm\\u200b" may not contain U+200B ZERO WIDTH SPACE'),
        (3, 'domain "sales " may not begin or end with a space'),
        (4, "owner"),
        (5, "node_kind"),
        (6, "lawful_basis"),
        (7, "region"),
        (8, 'speaker "Alice\\u200b" may not contain U+200B'),
        (9, 'session_id "s\\u00a01" may not contain U+00A0 NO-BREAK SPACE'),
    ]:
        assert f"{path}:{line}: {named}" in result.output, result.output
    assert rows(brain_sql.connect(db_path), "select title from knowledge") == [("ok",)]


def test_a_file_whose_name_is_not_utf8_does_not_stop_pruning_its_folder(run, db_path, tmp_path):
    """Review 14, F4: a file skipped for its name (no text a brain can store, so no
    memory of it can be stored either) keeps nothing else from being pruned: a note
    deleted beside it, or anywhere under the PATH, goes; the skipped file is named and
    the ingest exits 1."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    with open(os.fsdecode(bytes(tmp_path / "v" / "acme") + b"/Caf\xe9.md"), "w") as out:
        out.write("# Cafe\n\nx\n")
    (tmp_path / "v" / "Recall.md").unlink()
    result = run("brain", "ingest", db_path, tmp_path / "v", "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "Caf\\xe9.md: its name is not UTF-8 text: rename it to ingest it" in result.output, result.output
    assert "nothing under" not in result.output, result.output
    assert rows(conn, "select count(*) from documents where source_path like '%/Recall.md'") == [(0,)]


def test_everything_a_path_held_moved_to_another_path_and_linked_back_is_pruned_as_moved(run, db_path, tmp_path):
    """Review 13, F3: every note of v moved to ext/acme and linked back as v/acme:
    given v and ext, the notes go in under ext and --prune removes their copies
    stored under the link's path as moved: nothing is lost (they are stored where
    they are), so the guard against a root emptied (an unmounted drive) does not
    hold them, and no message says they are gone."""
    shutil.copytree(VAULT / "acme", tmp_path / "v" / "acme")
    notes = len(list((VAULT / "acme").rglob("*.md")))
    ingest_ok(run, db_path, tmp_path / "v")
    (tmp_path / "ext").mkdir()
    (tmp_path / "v" / "acme").rename(tmp_path / "ext" / "acme")
    (tmp_path / "v" / "acme").symlink_to("../ext/acme")
    conn = brain_sql.connect(db_path)
    for _ in range(2):
        result = ingest_ok(run, db_path, tmp_path / "v", tmp_path / "ext", extra=["--prune"])
        assert "gone" not in result.output, result.output
        assert rows(conn, "select count(distinct source_path), count(distinct title) from knowledge") == [
            (notes, notes)
        ]
        assert rows(conn, "select count(*) from documents where source_path like ?", (f"{tmp_path / 'v'}/%",)) == [(0,)]


def test_a_note_renamed_to_a_name_that_is_not_utf8_keeps_its_memory(run, db_path, tmp_path):
    """Review 15, F1: an unzip or a sync of another encoding renames v/Crème.md to
    v/Cr\\xe8me.md and v/café/ to v/caf\\xe9/: the files are there, so --prune keeps
    the memories stored under the old names (the notes of the folder the odd name is
    in; under it, for a folder's name), names each file skipped and what was spared,
    and still prunes a note deleted in another folder."""
    write(tmp_path / "v" / "café" / "Espresso.md", "# Espresso\n\nserviced every Tuesday, quokka\n")
    write(tmp_path / "v" / "Crème.md", "# Creme\n\nneeds vanilla, wombat\n")
    write(tmp_path / "v" / "Plain.md", "# Plain\n\nplain note\n")
    write(tmp_path / "w" / "sub" / "Gone.md", "# Gone\n\ndeleted on purpose\n")
    write(tmp_path / "w" / "Keep.md", "# Keep\n\nstays\n")
    write(tmp_path / "w" / "sub" / "Other.md", "# Other\n\nstays too\n")
    ingest_ok(run, db_path, tmp_path / "v", tmp_path / "w")
    os.rename(bytes(tmp_path / "v" / "café"), bytes(tmp_path / "v") + b"/caf\xe9")
    os.rename(bytes(tmp_path / "v" / "Crème.md"), bytes(tmp_path / "v") + b"/Cr\xe8me.md")
    with open(os.fsdecode(bytes(tmp_path / "w") + b"/Caf\xe9.md"), "w") as out:
        out.write("# Cafe\n\nx\n")
    (tmp_path / "w" / "sub" / "Gone.md").unlink()
    result = run("brain", "ingest", db_path, tmp_path / "v", tmp_path / "w", "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert (
        f"Cr\\xe8me.md: its name is not UTF-8 text: rename it to ingest it: nothing in {tmp_path / 'v'} was pruned"
        in (result.output)
    )
    assert f"Espresso.md: its name is not UTF-8 text: rename it to ingest it: nothing under {tmp_path / 'v'}" in (
        result.output
    )
    titles = {title for (title,) in brain_sql.connect(db_path).execute("select title from knowledge")}
    assert titles == {"Espresso", "Crème", "Plain", "Keep", "Other"}, titles


def test_a_path_whose_notes_vanished_beside_a_folder_moved_and_linked_back_is_not_emptied(run, db_path, tmp_path):
    """Review 15, F2: v/acme moved to ext/acme and linked back, and v's own notes gone
    (a sync that failed): --prune of v and ext prunes the copies under the link as
    moved, but refuses to remove every other memory v held, exit 1, saying so."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    own = len(list((tmp_path / "v").glob("*.md")))
    (tmp_path / "ext").mkdir()
    (tmp_path / "v" / "acme").rename(tmp_path / "ext" / "acme")
    (tmp_path / "v" / "acme").symlink_to("../ext/acme")
    for note in (tmp_path / "v").glob("*.md"):
        note.unlink()
    result = run("brain", "ingest", db_path, tmp_path / "v", tmp_path / "ext", "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert (
        f"nothing else under {tmp_path / 'v'} was pruned" in result.output and "moved to another PATH" in result.output
    )
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select count(*) from documents where source_path like ?", (f"{tmp_path / 'v'}/%",)) == [(own,)]
    assert rows(conn, "select count(*) from documents where source_path like ?", (f"{tmp_path / 'v' / 'acme'}/%",)) == [
        (0,)
    ]


def test_a_folder_linked_to_a_drive_that_is_not_there_keeps_its_memories(run, db_path, tmp_path):
    """Review 15, F4: v/acme moved to a drive and linked back; the drive unplugged (the
    link dangles): --prune keeps the memories under the link, names it and where it
    points, exit 1; --prune-all removes them."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    stored = rows(conn, "select count(*) from knowledge")
    (tmp_path / "usb").mkdir()
    (tmp_path / "v" / "acme").rename(tmp_path / "usb" / "acme")
    (tmp_path / "v" / "acme").symlink_to(tmp_path / "usb" / "acme")
    (tmp_path / "usb").rename(tmp_path / "usb.unplugged")
    result = run("brain", "ingest", db_path, tmp_path / "v", "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert (
        f"nothing under {tmp_path / 'v' / 'acme'} was pruned: it is a symbolic link to {tmp_path / 'usb' / 'acme'}"
        in (result.output)
    )
    assert rows(conn, "select count(*) from knowledge") == stored
    ingest_ok(run, db_path, tmp_path / "v", extra=["--prune-all"])
    assert rows(conn, "select count(*) from documents where source_path like ?", (f"{tmp_path / 'v' / 'acme'}/%",)) == [
        (0,)
    ]


def test_a_path_replaced_by_a_link_to_another_folder_prunes_what_it_held_as_given(run, db_path, tmp_path):
    """Review 19, F2: the vault moved and a link left at its PATH: the memories stored
    under the PATH as given (while it was the folder) were never pruned, even with
    --prune-all, and a note of the link's target was stored twice. Now the PATH as
    given is pruned too: a note that opens through the link is pruned as moved (one
    copy left), the rest, all gone, refused by the root guard (exit 1), and removed
    with --prune-all."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    (tmp_path / "v").rename(tmp_path / "v.away")
    (tmp_path / "e").mkdir()
    shutil.copy(tmp_path / "v.away" / "Recall.md", tmp_path / "e" / "Recall.md")
    (tmp_path / "v").symlink_to(tmp_path / "e")
    result = run("brain", "ingest", db_path, tmp_path / "v", "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"nothing else under {tmp_path / 'v'} was pruned: that would remove all" in result.output, result.output
    recall = "select source_path from documents where source_path like '%/Recall.md'"
    assert rows(conn, recall) == [(str(tmp_path / "e" / "Recall.md"),)]
    assert rows(conn, "select count(*) from documents where source_path like ?", (f"{tmp_path / 'v'}/%",))[0][0] > 0
    ingest_ok(run, db_path, tmp_path / "v", extra=["--prune-all"])
    assert rows(conn, "select source_path from documents") == [(str(tmp_path / "e" / "Recall.md"),)]


def test_notes_a_cloud_sync_evicted_to_placeholders_keep_their_memories(run, db_path, tmp_path):
    """Review 19, F3: notes iCloud Drive replaced by their placeholders (.NAME.icloud)
    beside one note still downloaded were pruned. They are not deleted: kept, even
    with --prune-all, named with their folder, exit 1; a note deleted beside them is
    still pruned."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    notes = sorted((tmp_path / "v").rglob("*.md"))
    for note in notes[1:-1]:
        note.rename(note.with_name(f".{note.name}.icloud"))
    notes[-1].unlink()
    before = rows(conn, "select source_path from documents order by 1")
    for prune in ("--prune", "--prune-all"):
        result = run("brain", "ingest", db_path, tmp_path / "v", prune)
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert "only cloud placeholders (.NAME.icloud: not downloaded)" in result.output, result.output
        assert rows(conn, "select source_path from documents order by 1") == [
            row for row in before if row != (str(notes[-1]),)
        ]


def test_a_note_renamed_to_a_name_not_utf8_through_a_path_that_is_a_link_keeps_its_memory(run, db_path, tmp_path):
    """Review 20, N1: the vault moved and linked back, then a note renamed by a tool of
    another encoding: the folder it is in was spared where it really is, not under the
    PATH as given, so --prune-all removed the note's memory stored there."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    (tmp_path / "v").rename(tmp_path / "v.away")
    (tmp_path / "v").symlink_to(tmp_path / "v.away")
    folder = os.fsencode(tmp_path / "v.away" / "acme")
    os.rename(folder + b"/Refund Policy.md", folder + b"/Refund Polic\xe9.md")
    result = run("brain", "ingest", db_path, tmp_path / "v", "--prune-all")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert rows(conn, "select count(*) from documents where source_path like '%/Refund Policy.md'") == [(1,)]


def test_a_path_spelled_through_a_link_and_dot_dot_prunes_only_the_folder_it_opens(run, db_path, tmp_path):
    """Review 20, N2: `v/sub/..` with v/sub a link opens the link's parent folder (as the
    system reads it); its spelling made absolute without links (v) is another folder,
    whose notes filed elsewhere were pruned by a command that named the other."""
    shutil.copytree(VAULT, tmp_path / "v")
    (tmp_path / "y" / "w" / "inner").mkdir(parents=True)
    (tmp_path / "y" / "w" / "inner" / "W.md").write_text("# W\n\nAbout wallabies in the outback.\n")
    ingest_ok(run, db_path, tmp_path / "v", tmp_path / "y" / "w")
    conn = brain_sql.connect(db_path)
    (tmp_path / "v" / "sub").symlink_to(tmp_path / "y" / "w" / "inner")
    (tmp_path / "v" / "Recall.md").rename(tmp_path / "Recall.md")
    ingest_ok(run, db_path, f"{tmp_path / 'v' / 'sub'}/..", extra=["--prune"])
    assert rows(conn, "select count(*) from documents where source_path like '%/Recall.md'") == [(1,)]


def test_a_relative_path_from_inside_a_folder_reached_through_a_link_prunes_it_as_given(
    run, db_path, tmp_path, monkeypatch
):
    """Review 20, N3: `cd v; ingest ../b.db . --prune` with v now a link to where the
    vault moved: `.` was made absolute from the resolved folder, so what was stored
    under v/ (a note deleted since among it) was neither pruned nor named, and every
    note stored twice. A relative PATH is made absolute from the shell's folder ($PWD)."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    (tmp_path / "v").rename(tmp_path / "v.away")
    (tmp_path / "v").symlink_to(tmp_path / "v.away")
    (tmp_path / "v.away" / "Recall.md").unlink()
    monkeypatch.chdir(tmp_path / "v")
    monkeypatch.setenv("PWD", str(tmp_path / "v"))
    result = run("brain", "ingest", db_path, ".", "--prune")
    assert result.exit_code == 1 and f"nothing else under {tmp_path / 'v'} was pruned" in result.output, result.output
    notes = len(list((tmp_path / "v.away").rglob("*.md")))
    stored = rows(conn, "select count(*) from documents where source_path like ?", (f"{tmp_path / 'v.away'}/%",))
    assert stored == [(notes,)]
    assert rows(conn, "select source_path from documents where source_path like ?", (f"{tmp_path / 'v'}/%",)) == [
        (str(tmp_path / "v" / "Recall.md"),)
    ]


def test_a_placeholder_kept_beside_a_note_deleted_is_named_not_its_folder(run, db_path, tmp_path):
    """Review 20, N4: the message said nothing in the folder was pruned while a note
    deleted there was: it names the notes kept."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    acme = tmp_path / "v" / "acme"
    (acme / "Refund Policy.md").rename(acme / ".Refund Policy.md.icloud")
    (acme / "Coffee Machine.md").unlink()
    result = run("brain", "ingest", db_path, tmp_path / "v", "--prune")
    assert result.exit_code == 1, result.output
    assert f"kept the memories of Refund Policy.md in {acme}, even with --prune-all" in result.output, result.output
    assert f"nothing in {acme} was pruned" not in result.output


def test_a_note_renamed_to_a_name_not_utf8_in_a_folder_moved_and_linked_back_keeps_its_memory(run, db_path, tmp_path):
    """Review 20, N1 (older form): v/acme moved to ext/acme and linked back, then one of
    its notes renamed by a tool of another encoding: its memory, stored under the
    link's path, was pruned as moved although its folder was spared."""
    shutil.copytree(VAULT, tmp_path / "v")
    ingest_ok(run, db_path, tmp_path / "v")
    conn = brain_sql.connect(db_path)
    (tmp_path / "ext").mkdir()
    (tmp_path / "v" / "acme").rename(tmp_path / "ext" / "acme")
    (tmp_path / "v" / "acme").symlink_to(tmp_path / "ext" / "acme")
    folder = os.fsencode(tmp_path / "ext" / "acme")
    os.rename(folder + b"/Refund Policy.md", folder + b"/Refund Polic\xe9.md")
    result = run("brain", "ingest", db_path, tmp_path / "v", tmp_path / "ext" / "acme", "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert rows(conn, "select count(*) from documents where source_path like '%/Refund Policy.md'") == [(1,)]


def test_a_records_file_replaced_by_a_link_to_other_records_keeps_its_memories(run, db_path, tmp_path):
    """Review 21, R4: data.jsonl moved to an archive and a link to another records file
    left at its path: its records, read through the link as moved, were pruned with
    exit 0, past the guard against a file written over. A records file reached through
    a link is there: its memories stay."""
    data = tmp_path / "data.jsonl"
    data.write_text('{"_id": "a1", "text": "alpha one"}\n{"_id": "a2", "text": "alpha two"}\n')
    (tmp_path / "new.jsonl").write_text('{"_id": "b1", "text": "beta one"}\n')
    ingest_ok(run, db_path, data)
    conn = brain_sql.connect(db_path)
    (tmp_path / "archive").mkdir()
    data.rename(tmp_path / "archive" / "data.jsonl")
    data.symlink_to(tmp_path / "new.jsonl")
    result = run("brain", "ingest", db_path, data, "--prune")
    assert "Traceback" not in result.output, result.output
    assert rows(conn, "select count(*) from documents where source_path = ?", (str(data),)) == [(2,)]


@pytest.mark.parametrize("odd", ["loop", "a" * 300])
def test_a_path_that_is_a_symbolic_link_loop_is_skipped_by_name(run, db_path, tmp_path, odd):
    """Review 21, R2: `ln -s loop loop` given as a PATH ended the ingest in a traceback
    (Path.resolve raises on a loop) and the other PATHs went in neither; so did a
    name part longer than the system looks up (review 132)."""
    if odd == "loop":
        (tmp_path / "loop").symlink_to(tmp_path / "loop")
    result = run("brain", "ingest", db_path, VAULT, tmp_path / odd, "--prune")
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert ("a symbolic link loop" if odd == "loop" else "cannot be looked at: File name too long") in result.output
    conn = brain_sql.connect(db_path)
    assert rows(conn, "select count(*) from documents")[0][0] == len(list(VAULT.rglob("*.md")))


def test_a_records_file_replaced_by_an_empty_folder_is_named_and_kept_unless_confirmed(run, db_path, tmp_path):
    """Review 22, F4: data.jsonl replaced by an empty folder of its name: --prune said
    nothing and exited 0, and --prune-all removed nothing. Its file is gone: the root
    guard keeps its memories and names it (exit 1); --prune-all removes them."""
    data = tmp_path / "data.jsonl"
    data.write_text('{"_id": "a1", "text": "alpha one"}\n{"_id": "a2", "text": "alpha two"}\n')
    ingest_ok(run, db_path, data)
    conn = brain_sql.connect(db_path)
    data.unlink()
    data.mkdir()
    refused = run("brain", "ingest", db_path, data, "--prune")
    assert refused.exit_code == 1 and f"nothing under {data} was pruned" in refused.output, refused.output
    assert rows(conn, "select count(*) from documents") == [(2,)]
    confirmed = run("brain", "ingest", db_path, data, "--prune-all")
    assert confirmed.exit_code == 0 and "2 removed" in confirmed.output, confirmed.output
    assert rows(conn, "select count(*) from documents") == [(0,)]
