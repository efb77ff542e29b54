"""`reindex` beside other writers: it embeds with no write lock held and switches
models in one short transaction; what others write meanwhile is embedded with the
new model too, and a brain never holds vectors of two models."""

import json

import pytest

import brain_sql
from brain_sql import for_plugin, pipeline, schema, vectors
from brain_sql.consistency import check

from .conftest import write


@pytest.fixture(scope="module")
def other_model(narrow_model):
    """A model of another dimension (128) than the default's: the default's vectors cut short."""
    return narrow_model


def stored(conn):
    """{knowledge id: int8 vector bytes} of vec_knowledge."""
    return dict(conn.execute("select knowledge_id, embedding_int8 from vec_knowledge").fetchall())


def embedded_with(conn, model_id):
    """{knowledge id: int8 vector bytes} that `model_id` makes of each memory's text."""
    rows = conn.execute("select id, title, heading_path, content, context from knowledge order by id").fetchall()
    made = vectors.storage_vectors([vectors.embedded_text(*row[1:]) for row in rows], model_id)
    return {row[0]: made[0] for row, made in zip(rows, made) if made}


def count_of(conn):
    return conn.execute("select count(*) from knowledge").fetchone()[0]


def vector_tables(conn):
    return sorted(
        r[0] for r in conn.execute("select name from sqlite_master where type = 'table' and name like 'vec%'")
    )


@pytest.mark.parametrize("meanwhile_staged", [False, True])
@pytest.mark.parametrize("repaired", [False, True])
def test_reindex_holds_no_write_lock_while_it_embeds_and_what_others_write_meanwhile_is_reembedded(
    vault_brain_copy, other_model, monkeypatch, meanwhile_staged, repaired
):
    """While reindex embeds, another writer (waiting not at all for the lock) adds a
    memory, edits one with plain SQL and forgets one; after it, every memory has the
    new model's vector of its text as it is now, and nothing else is stored. Whether
    those writes are embedded by the switch's transaction or before it
    (`meanwhile_staged`); and when a repair meanwhile says anything may have changed
    (`repaired`: reindex begins again)."""
    if meanwhile_staged:  # and in batches of five, each setting its own memories' model to the brain's
        monkeypatch.setattr(schema, "REINDEX_FINAL_AT_MOST", 0)
        monkeypatch.setattr(schema, "REINDEX_BATCH", 5)
    conn = brain_sql.connect(vault_brain_copy)
    edited, deleted = conn.execute("select min(id), max(id) from knowledge").fetchone()
    real, meanwhile = vectors.embed, []

    def embedding(texts, model_id):
        if model_id == other_model and not meanwhile:
            other = brain_sql.connect(vault_brain_copy)
            other.execute("pragma busy_timeout = 0")
            try:
                brain_sql.remember(other, [{"_id": "mid", "text": "the pager rota moved to Tuesdays mid-reindex"}])
                other.execute("update knowledge set content = 'the runbook was rewritten' where id = ?", [edited])
                brain_sql.forget(other, ids=[deleted])
                if repaired:
                    other.execute("insert into brain_changes (kind, key, stamp) values ('all', 0, random())")
                meanwhile.append("written")
            except Exception as ex:  # noqa: BLE001 - said in the assertion
                meanwhile.append(str(ex))
        return real(texts, model_id)

    monkeypatch.setattr(vectors, "embed", embedding)
    written = brain_sql.reindex(conn, other_model)
    assert meanwhile == ["written"]
    monkeypatch.setattr(vectors, "embed", real)
    conn = brain_sql.connect(vault_brain_copy)
    assert conn.execute("select value from brain_meta where key = 'model'").fetchone()[0] == other_model
    expected = embedded_with(conn, other_model)
    assert stored(conn) == expected and written == len(expected)
    assert deleted not in expected and conn.execute("select count(*) from knowledge where id = ?", [edited]).fetchone()
    assert conn.execute("select external_id from knowledge where id = (select max(id) from knowledge)").fetchone() == (
        "mid",
    )
    assert {r[0] for r in conn.execute("select distinct embedding_model from knowledge")} == {other_model}
    assert check(conn) == {}


def test_a_remember_prepared_before_a_reindex_and_written_after_it_has_the_new_models_vector(
    vault_brain_copy, other_model
):
    """Its text was embedded with the old model before the lock: written after the
    switch, it is embedded again with the new one (never stored with the old's)."""
    conn = brain_sql.connect(vault_brain_copy)
    prepared = for_plugin.prepare_remember(conn, [{"_id": "late", "text": "the NAS moved to the attic"}])
    brain_sql.reindex(brain_sql.connect(vault_brain_copy), other_model)
    report, [[memory]] = for_plugin.write_remember(conn, prepared)
    assert report.documents_added == 1
    assert stored(conn)[memory] == embedded_with(conn, other_model)[memory]
    assert check(conn) == {}


def test_reindex_leaves_one_vector_table_that_writers_keep_in_step(vault_brain_copy, other_model):
    """No staged or old vector table is left behind; writes after it (twice, and to the
    same model) keep vec_knowledge in step through the brain's triggers."""
    conn = brain_sql.connect(vault_brain_copy)
    before = vector_tables(conn)
    for model in (other_model, other_model, "wordllama/l2_supercat"):
        brain_sql.reindex(conn, model)
        assert vector_tables(conn) == before
        brain_sql.remember(conn, [{"_id": f"after {model}", "text": "a memory written after the reindex"}])
        brain_sql.forget(conn, external_ids=[f"after {model}"])
        assert stored(conn) == embedded_with(conn, model)
        assert check(conn) == {}


def test_reindex_reports_its_progress(vault_brain_copy, other_model):
    """From the start, before the first batch is embedded (review 68: MiniLM sat a
    minute and a half at no bar, whose pace then counted from the first batch's end)."""
    conn = brain_sql.connect(vault_brain_copy)
    total = conn.execute("select count(*) from knowledge").fetchone()[0]
    seen = []
    brain_sql.reindex(conn, other_model, progress=lambda done, of: seen.append((done, of)))
    assert seen[0] == (0, total) and seen[-1] == (total, total)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_the_cli_shows_reindex_progress(run, vault_brain_copy, other_model):
    result = run("brain", "reindex", vault_brain_copy, "--model", other_model)
    assert result.exit_code == 0, result.output
    assert "Re-embedding" in result.output and "re-embedded with" in result.output


def test_an_ingest_that_a_reindex_overtakes_stops_instead_of_writing_the_old_models_vectors(
    tmp_path, other_model, monkeypatch
):
    """A reindex switches models between two of an ingest's transactions: the ingest
    stops saying so (what it wrote is kept, re-embedded by the reindex) rather than
    write vectors of the model it began with; run again, it writes the rest."""
    monkeypatch.setattr(pipeline, "INGEST_TRANSACTION_SECONDS", 0, raising=False)
    db_path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(db_path), "wordllama/l2_supercat")
    source = write(
        tmp_path / "r.jsonl",
        "".join(
            json.dumps({"_id": f"r{i}", "text": f"record {i}: the pager rota moves on Thursdays"}) + "\n"
            for i in range(10)
        ),
    )
    original, turns = pipeline._Pipeline._transaction, []

    def transaction(self, documents, embedded):
        turns.append(len(documents))
        if len(turns) == 3:
            brain_sql.reindex(brain_sql.connect(db_path), other_model)
        return original(self, documents, embedded)

    monkeypatch.setattr(pipeline._Pipeline, "_transaction", transaction)
    with pytest.raises(brain_sql.ModelError, match="run the same ingest again") as raised:
        brain_sql.ingest(brain_sql.connect(db_path), [source])
    assert other_model in str(raised.value) and "(2 documents)" in str(raised.value)
    conn = brain_sql.connect(db_path)
    assert count_of(conn) == 2
    assert stored(conn) == embedded_with(conn, other_model)  # their mentions still queued: found by the next run
    monkeypatch.setattr(pipeline._Pipeline, "_transaction", original)
    again = brain_sql.ingest(conn, [source])
    assert (again.documents_added, again.errors) == (8, []) and count_of(conn) == 10
    assert stored(conn) == embedded_with(conn, other_model) and check(conn) == {}


def test_the_switch_rewrites_no_memory_that_nothing_changed(vault_brain_copy, other_model, monkeypatch):
    """The switch's one transaction renames tables and records the model: it writes
    no memory row nobody changed meanwhile (its hold does not grow with the brain),
    and after the reindex every memory records the new model."""
    conn = brain_sql.connect(vault_brain_copy)
    original, logged = schema._Reindex._switch, []

    def switch(self, seen):
        before = conn.execute("select coalesce(max(seq), 0) from brain_changes").fetchone()[0]
        written = original(self, seen)
        logged.append(conn.execute("select count(*) from brain_changes where seq > ?", [before]).fetchone()[0])
        return written

    monkeypatch.setattr(schema._Reindex, "_switch", switch)
    brain_sql.reindex(conn, other_model)
    assert logged == [0]
    assert {r[0] for r in conn.execute("select distinct embedding_model from knowledge")} == {other_model}
    assert stored(conn) == embedded_with(conn, other_model) and check(conn) == {}


@pytest.mark.parametrize("stopped_at", ["staging", "labelling"])
def test_a_reindex_stopped_midway_leaves_a_consistent_brain(vault_brain_copy, other_model, monkeypatch, stopped_at):
    """Stopped while it stages (an error, Ctrl-C): the brain is as it was, with the old
    model's vectors; stopped after the switch, while it records the model on each
    memory: the new model's. `check` finds nothing wrong either way."""
    monkeypatch.setattr(schema, "REINDEX_BATCH", 5)
    conn = brain_sql.connect(vault_brain_copy)
    before = stored(conn)
    real, calls = vectors.embed, []

    def embedding(texts, model_id):
        calls.append(model_id)
        if stopped_at == "staging" and calls.count(other_model) == 3:
            raise KeyboardInterrupt
        return real(texts, model_id)

    def label(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(vectors, "embed", embedding)
    if stopped_at == "labelling":
        monkeypatch.setattr(schema._Reindex, "_label", label)
    with pytest.raises(KeyboardInterrupt):
        brain_sql.reindex(conn, other_model)
    monkeypatch.setattr(vectors, "embed", real)
    conn = brain_sql.connect(vault_brain_copy)
    model = other_model if stopped_at == "labelling" else "wordllama/l2_supercat"
    assert conn.execute("select value from brain_meta where key = 'model'").fetchone()[0] == model
    assert stored(conn) == (embedded_with(conn, model) if stopped_at == "labelling" else before)
    assert check(conn) == {}


def test_a_reindex_overtaken_by_another_while_it_labels_leaves_the_labels_to_the_brains_model(
    vault_brain_copy, other_model, monkeypatch
):
    """Reindex A switched and writes its model on each memory; reindex B switches to
    another model meanwhile (and stops before writing its own): A stops too, so no
    memory says A's model for B's vectors."""
    original, runs = schema._Reindex._label, []

    def label(self):
        runs.append(self.model_id)
        if len(runs) == 1:  # A, before it writes its model: B runs whole, stopped before its labels
            brain_sql.reindex(brain_sql.connect(vault_brain_copy), "wordllama/l2_supercat")
            return original(self)
        return None

    monkeypatch.setattr(schema._Reindex, "_label", label)
    brain_sql.reindex(brain_sql.connect(vault_brain_copy), other_model)
    assert runs == [other_model, "wordllama/l2_supercat"]
    conn = brain_sql.connect(vault_brain_copy)
    assert conn.execute("select count(*) from knowledge where embedding_model = ?", [other_model]).fetchone() == (0,)
    assert stored(conn) == embedded_with(conn, "wordllama/l2_supercat") and check(conn) == {}


def test_reindex_leaves_the_change_log_cut_to_its_newest_entries(vault_brain_copy, other_model, monkeypatch):
    """It writes two entries for each memory; it cuts them itself, in short
    transactions, rather than leave that to the next remember's one transaction."""
    monkeypatch.setattr(schema, "CHANGE_LOG_KEEP", 5)
    conn = brain_sql.connect(vault_brain_copy)
    brain_sql.reindex(conn, other_model)
    assert conn.execute("select count(*) from brain_changes").fetchone() == (5,)


def test_a_repair_meeting_a_running_reindex_stops_it_with_the_brain_as_it_was(
    vault_brain_copy, other_model, monkeypatch
):
    """check cannot tell a running reindex from a killed one: --repair drops what one
    staged, and the reindex, at its next turn, stops with its model and vectors as they were."""
    monkeypatch.setattr(schema, "REINDEX_BATCH", 5)
    conn = brain_sql.connect(vault_brain_copy)
    before = stored(conn)
    real, calls, found = vectors.embed, [], []

    def embedding(texts, model_id):
        calls.append(model_id)
        if calls.count(other_model) == 3:  # between its turns: it holds no lock
            found.append(check(brain_sql.connect(vault_brain_copy), repair=True))
        return real(texts, model_id)

    monkeypatch.setattr(vectors, "embed", embedding)
    with pytest.raises(brain_sql.BrainError, match="check --repair dropped what this one staged"):
        brain_sql.reindex(conn, other_model)
    monkeypatch.setattr(vectors, "embed", real)
    assert found == [{"reindex_leftovers": ["vec_knowledge_staged", "brain_meta row 'reindexing'"]}]
    conn = brain_sql.connect(vault_brain_copy)
    assert conn.execute("select value from brain_meta where key = 'model'").fetchone()[0] == "wordllama/l2_supercat"
    assert stored(conn) == before and check(conn) == {}
