"""What an ingest stores, row by row, is what it stored before its writer was made
faster: the memories, entities, edges, documents, mention index and change log
(each row's order and ids too) of records with titles named again in other case,
tags, aliases, entities and relations, ingested into a new brain in small
batches and then updated, are those in tests/data/ingest_stored.json (written by
the ingest of commit d67622d; since, a rewritten document keeps its documents row,
so the change log holds one row for it where the replace wrote two; and that row keeps the
tier and expiry its record stated). Times, random stamps and the temporary folder are
left out. To write the file again after a change meant to store otherwise:
BRAIN_WRITE_STORED=1 pytest tests/test_ingest_stored.py."""

import json
import os
from pathlib import Path

import brain_sql
from brain_sql import pipeline

STORED = Path(__file__).parent / "data" / "ingest_stored.json"
CORPUS = Path(__file__).parent / "data" / "beir_corpus_sample.jsonl"
# columns whose values are the clock's or chance's, not the records'
VOLATILE = {"created_at", "observed_at", "updated_at", "ingested_at", "stamp"}
TABLES = {
    "knowledge": "id",
    "entities": "id",
    "relationships": "id",
    "documents": "document_id",
    "brain_changes": "seq",
    "brain_mention_names": "1",
    "brain_mention_queue": "1",
    "brain_ids": "name",
    "sqlite_sequence": "name",
}
NAMES = ["Apple", "APPLE", "apple", "Straße", "STRASSE", "Café", "CAFÉ", "Microstructural development"]


def _records(version):
    """Records with titles, tags, aliases, entities and relations that name each
    other's titles in other case; `version` 2 changes some and adds others."""
    corpus = [json.loads(line) for line in CORPUS.read_text().splitlines()]
    records = []
    for i in range(40 if version == 1 else 48):
        text = corpus[i % len(corpus)]["text"][: 300 + 37 * i]
        if version == 2 and i % 5 == 0:
            text += " Revised."
        record = {"_id": f"r{i}", "title": NAMES[i % len(NAMES)] if i % 3 == 0 else f"Paper {i % 17}", "text": text}
        if i % 4 == 1:
            record["tags"] = ["bio", f"t{i % 3}"]
        if i % 6 == 2:
            record["aliases"] = [NAMES[(i + 1) % len(NAMES)], f"alias {i}"]
        if i % 5 == 3:
            record["entities"] = [NAMES[(i + 2) % len(NAMES)], {"name": f"Thing {i % 4}", "type": "thing"}]
        if i % 7 == 4:
            record["relations"] = [
                {"type": "cites", "to": f"paper {(i + 3) % 17}"},
                {"type": "about", "from": NAMES[i % len(NAMES)], "to": f"Thing {i % 4}", "to_type": "thing"},
            ]
        records.append(record)
    return records


def _stored(conn, tmp_path):
    """Every row the tables hold, in order, without VOLATILE columns or the temporary folder."""
    stored = {}
    for table, order in TABLES.items():
        cursor = conn.execute(f"select * from [{table}] order by {order}")
        columns = [c[0] for c in cursor.description]
        stored[table] = [{c: v for c, v in zip(columns, row) if c not in VOLATILE} for row in cursor.fetchall()]
    stored["vec_knowledge"] = [r[0] for r in conn.execute("select knowledge_id from vec_knowledge order by 1")]
    return json.loads(json.dumps(stored).replace(str(tmp_path), "TMP"))


def test_an_ingest_stores_what_it_always_stored(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "INGEST_BATCH_DOCUMENTS", 7)  # several batches, a title met again in each
    conn = brain_sql.connect(tmp_path / "brain.db")
    for version in (1, 2):
        path = tmp_path / "records.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in _records(version)))
        report = brain_sql.ingest(conn, [path])
        assert not report.errors
    stored = _stored(conn, tmp_path)
    if os.environ.get("BRAIN_WRITE_STORED"):
        STORED.write_text(json.dumps(stored, indent=0, ensure_ascii=False) + "\n")
    expected = json.loads(STORED.read_text())
    for table in expected:
        assert stored[table] == expected[table], table


def test_the_default_model_embeds_each_text_as_it_would_alone():
    """Ingest embeds a grouping-free model's text many texts at a time (fewer
    calls): each vector is the one its text gets embedded alone."""
    from brain_sql.config import DEFAULT_MODEL
    from brain_sql.embed import grouping_free
    from brain_sql.vectors import storage_vectors

    texts = [json.loads(line)["text"][: 40 + 61 * i] for i, line in enumerate(CORPUS.read_text().splitlines())]
    assert grouping_free(DEFAULT_MODEL)
    assert storage_vectors(texts, DEFAULT_MODEL) == [storage_vectors([t], DEFAULT_MODEL)[0] for t in texts]
