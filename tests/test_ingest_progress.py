"""Ingest's progress: it moves while a batch is embedded, not only when the batch
is written (a slow model spends half a minute on one), and adds up to the whole."""

import json
import threading

import brain_sql
from brain_sql import pipeline

from .conftest import write


def test_progress_moves_while_a_batch_is_embedded(tmp_path, monkeypatch):
    records = [
        {"_id": f"r{i}", "title": f"Record {i}", "text": f"Text number {i} about topic {i % 7}."} for i in range(40)
    ]
    corpus = write(tmp_path / "c.jsonl", "".join(json.dumps(r) + "\n" for r in records))
    monkeypatch.setattr(pipeline, "EMBED_SLICE", 4)
    monkeypatch.setattr(pipeline, "EMBED_SLICE_GROUPING_FREE", 4)
    monkeypatch.setattr(pipeline, "PROGRESS_SECONDS", 0.01)
    real, slices = pipeline.storage_vectors, []
    reported_partly = threading.Event()

    def embed_slowly(texts, model_id):
        if slices:  # every slice after the first waits until part of the batch was reported
            assert reported_partly.wait(30), "no progress reported while the batch was embedded"
        slices.append(len(texts))
        return real(texts, model_id)

    calls = []

    def progress(characters, documents):
        calls.append((characters, documents))
        if 0 < documents < len(records):
            reported_partly.set()

    monkeypatch.setattr(pipeline, "storage_vectors", embed_slowly)
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [corpus], progress=progress)
    assert report.documents_added == len(records) and len(slices) == 10
    assert reported_partly.is_set()
    done = [documents for _, documents in calls]
    assert done == sorted(done) and done[-1] == len(records)
    assert all(characters >= 0 for characters, _ in calls)
    assert sum(characters for characters, _ in calls) == sum(len(r["text"]) for r in records)
