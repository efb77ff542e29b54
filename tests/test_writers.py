"""One writer at a time, by design: writers take the write lock up front and wait
for it; two ingests and remember traffic into one file all succeed; remember is one
transaction, and a lock not had in time is a 503 with Retry-After, never a 400."""

import asyncio
import json
import re
import shutil
import subprocess
import threading

import pytest
from datasette.app import Datasette

import brain_sql
from brain_sql import for_plugin, pipeline, writer
from brain_sql.connection import atomic, sqlite3
from brain_sql.consistency import check

from .conftest import write

SQLITE_UTILS = shutil.which("sqlite-utils") or "sqlite-utils"
WRITER = {"plugins": {"datasette-brain": {"allow_write": True}}}


def jsonl(path, prefix, count):
    lines = (
        json.dumps(
            {
                "_id": f"{prefix}{i}",
                "title": f"{prefix} note {i}",
                "text": f"{prefix} record {i} about pager rota {i % 7}",
            }
        )
        for i in range(count)
    )
    return write(path, "\n".join(lines))


def count(path):
    return brain_sql.connect(path).execute("select count(*) from knowledge").fetchone()[0]


def ingest_process(db_path, source):
    return subprocess.Popen(
        [SQLITE_UTILS, "brain", "ingest", str(db_path), str(source)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_ingests_into_one_new_file_both_succeed(tmp_path):
    db_path = tmp_path / "brain.db"
    # two batches each, and neither has made the schema yet: they meet in the migrations too
    first, second = (ingest_process(db_path, jsonl(tmp_path / f"{name}.jsonl", name, 1500)) for name in ("a", "b"))
    for process in (first, second):
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-2000:]
        assert "0 skipped" in out
    assert count(db_path) == 3000
    assert check(brain_sql.connect(db_path)) == {}


@pytest.mark.asyncio
async def test_ingest_and_remember_together(tmp_path):
    db_path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(db_path))
    datasette = Datasette([str(db_path)], metadata=WRITER)
    ingest = ingest_process(db_path, jsonl(tmp_path / "bulk.jsonl", "bulk", 2500))
    statuses = []
    while ingest.poll() is None or len(statuses) < 10:
        response = await datasette.client.post(
            "/brain/-/remember", json={"_id": f"turn{len(statuses)}", "text": f"agent turn {len(statuses)}"}
        )
        statuses.append(response.status_code)
        await asyncio.sleep(0.05)
    out, err = ingest.communicate()
    assert ingest.returncode == 0, err[-2000:]
    assert set(statuses) == {201}
    assert count(db_path) == 2500 + len(statuses)
    assert check(brain_sql.connect(db_path)) == {}


def test_remember_is_one_transaction_whatever_its_size(tmp_path, monkeypatch):
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.migrate(conn)
    monkeypatch.setattr(pipeline, "INGEST_BATCH_DOCUMENTS", 100)  # several batches in one call
    written = []
    original = pipeline.DocumentWriter._finish  # each document's last step, however its chunks were written

    def failing(self, document, *rest):
        written.append(document.document_id)
        if len(written) == 250:  # the third batch, after two were written
            raise sqlite3.OperationalError("disk I/O error")
        return original(self, document, *rest)

    monkeypatch.setattr(pipeline.DocumentWriter, "_finish", failing)
    records = [{"_id": f"r{i}", "text": f"memory number {i}"} for i in range(300)]
    with pytest.raises(brain_sql.WriteError, match="nothing was stored: disk I/O error"):
        brain_sql.remember(conn, records)
    assert len(written) == 250
    assert conn.execute("select count(*) from knowledge").fetchone()[0] == 0
    assert conn.execute("select count(*) from entities").fetchone()[0] == 0
    monkeypatch.setattr(pipeline.DocumentWriter, "_finish", original)
    report, ids = brain_sql.remember(conn, records)
    assert (report.documents_added, len(ids)) == (300, 300)
    again, same = brain_sql.remember(conn, records[:5] + [{"_id": "r5", "text": "memory number five, edited"}])
    assert (again.documents_added, again.documents_updated, again.documents_unchanged) == (0, 1, 5)
    assert same[:5] == ids[:5] and len(same[5]) == 1  # a retried request with the same _ids duplicates nothing
    assert conn.execute("select count(*) from knowledge").fetchone()[0] == 300


@pytest.mark.asyncio
async def test_a_lock_not_had_in_time_is_a_503_and_nothing_is_stored(tmp_path, monkeypatch):
    monkeypatch.setenv("BRAIN_BUSY_TIMEOUT_MS", "200")
    db_path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(db_path))
    datasette = Datasette([str(db_path)], metadata=WRITER)
    holder = brain_sql.connect(db_path)
    holder.execute("begin immediate")  # another writer, holding the lock
    try:
        response = await datasette.client.post("/brain/-/remember", json={"_id": "x", "text": "a memory"})
        assert response.status_code == 503, response.text
        assert response.headers["retry-after"].isdigit()
        assert "write lock" in response.json()["error"]
        with pytest.raises(brain_sql.BrainBusy):
            brain_sql.ingest(brain_sql.connect(db_path), [jsonl(tmp_path / "r.jsonl", "r", 3)])
    finally:
        holder.execute("rollback")
    assert count(db_path) == 0
    retried = await datasette.client.post("/brain/-/remember", json={"_id": "x", "text": "a memory"})
    assert retried.status_code == 201 and retried.json()["added"] == 1


def test_cli_ingest_says_when_the_lock_was_not_had(run, tmp_path, monkeypatch):
    monkeypatch.setenv("BRAIN_BUSY_TIMEOUT_MS", "200")
    db_path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(db_path))
    holder = brain_sql.connect(db_path)
    holder.execute("begin immediate")
    try:
        result = run("brain", "ingest", db_path, jsonl(tmp_path / "r.jsonl", "r", 3))
    finally:
        holder.execute("rollback")
    assert result.exit_code == 75 and "Traceback" not in result.output
    assert "write lock for 0.2 s" in result.output and "run the same ingest again" in result.output
    assert result.output.count("run the same ingest again") == 1 and ".;" not in result.output  # said once
    assert run("brain", "ingest", db_path, tmp_path / "r.jsonl").exit_code == 0
    assert count(db_path) == 3


def test_followup_work_waits_for_the_lock_too(tmp_path):
    """Mention resolution after a run takes the lock like everything else."""
    db_path = tmp_path / "brain.db"
    conn = brain_sql.connect(db_path)
    brain_sql.ingest(conn, [jsonl(tmp_path / "a.jsonl", "a", 5)])
    other = brain_sql.connect(db_path)
    other.execute("begin immediate")
    done = []

    def run_ingest():
        done.append(
            brain_sql.ingest(conn, [write(tmp_path / "n.md", "# a note 1\n\nmentions a note 2 and the pager rota.\n")])
        )

    thread = threading.Thread(target=run_ingest)
    thread.start()
    thread.join(0.5)
    assert thread.is_alive()  # waiting for the lock, not failing
    other.execute("commit")
    thread.join(30)
    assert done and not done[0].errors and done[0].relationships > 0


@pytest.mark.asyncio
async def test_forget_and_the_decayed_actions_wait_for_the_lock_or_answer_503(tmp_path, monkeypatch):
    """The other writes through the API: a lock not had in time changes nothing and
    says to try again; with the lock free, the same request succeeds."""
    monkeypatch.setenv("BRAIN_BUSY_TIMEOUT_MS", "200")
    db_path = tmp_path / "brain.db"
    conn = brain_sql.connect(db_path)
    brain_sql.remember(conn, [{"_id": "x", "text": "a memory to forget"}, {"_id": "y", "text": "one to archive"}])
    datasette = Datasette([str(db_path)], metadata=WRITER)
    holder = brain_sql.connect(db_path)
    holder.execute("begin immediate")  # another writer, holding the lock
    try:
        response = await datasette.client.post("/brain/-/forget", json={"external_ids": ["x"]})
        assert response.status_code == 503 and response.headers["retry-after"].isdigit(), response.text
        with pytest.raises(brain_sql.BrainBusy):
            brain_sql.archive(
                brain_sql.connect(db_path),
                [conn.execute("select id from knowledge where external_id = 'y'").fetchone()[0]],
            )
    finally:
        holder.execute("rollback")
    assert count(db_path) == 2
    assert conn.execute("select relevance_tier from knowledge where external_id = 'y'").fetchone()[0] == 1
    retried = await datasette.client.post("/brain/-/forget", json={"external_ids": ["x"]})
    assert retried.status_code == 200 and retried.json()["removed"]["external_ids"] == ["x"]


def long_records(path, count):
    """Records of three chunks each: a document half written would show."""
    return write(
        path,
        "".join(
            json.dumps(
                {
                    "_id": f"r{i}",
                    "title": f"Long record {i}",
                    "text": "\n\n".join(
                        f"Part {part} of record {i}: " + "the pager rota moves on Thursdays. " * 50 for part in range(3)
                    ),
                }
            )
            + "\n"
            for i in range(count)
        ),
    )


def test_a_long_ingest_commits_as_it_goes_each_document_whole(tmp_path, monkeypatch):
    """Another connection sees an ingest's documents land while it runs, never part of one."""
    monkeypatch.setattr(pipeline, "INGEST_TRANSACTION_SECONDS", 0, raising=False)  # each document a transaction
    db_path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(db_path))
    reader, seen, original = brain_sql.connect(db_path), [], pipeline.DocumentWriter._finish

    def write_and_look(self, document, *rest):  # each document's last step, however its chunks were written
        if document.external_id == "r20":  # in the ingest's middle: what has landed so far?
            seen.append(
                reader.execute(
                    "select (select count(*) from documents), (select count(*) from knowledge), "
                    "(select count(*) from vec_knowledge), (select count(*) from knowledge_fts_docsize), "
                    "(select count(*) from documents d where chunks != "
                    " (select count(*) from knowledge k where k.document_id = d.document_id))"
                ).fetchone()
            )
        return original(self, document, *rest)

    monkeypatch.setattr(pipeline.DocumentWriter, "_finish", write_and_look)
    report = brain_sql.ingest(brain_sql.connect(db_path), [long_records(tmp_path / "r.jsonl", 40)])
    assert report.documents_added == 40 and report.chunks_added == 120 and not report.errors
    # the twenty documents before it, each whole: its three chunks, their vectors and full-text rows
    assert seen == [(20, 60, 60, 60, 0)]
    assert check(reader) == {}


def test_a_waiting_writer_gets_the_lock_between_an_ingests_transactions(tmp_path, monkeypatch):
    """A writer that starts waiting while an ingest writes gets its turn before the
    ingest ends, not after it: writers take turns with the lock."""
    monkeypatch.setattr(pipeline, "INGEST_TRANSACTION_SECONDS", 0, raising=False)
    db_path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(db_path))
    other, writing, turns = brain_sql.connect(db_path), threading.Event(), []
    original = pipeline.DocumentWriter._finish

    def write(self, document, *rest):
        writing.set()
        return original(self, document, *rest)

    def remember_meanwhile():
        assert writing.wait(60)
        report, _ = brain_sql.remember(other, [{"_id": "turn", "text": "an agent's turn, remembered mid-ingest"}])
        turns.append((report.documents_added, count(db_path)))

    monkeypatch.setattr(pipeline.DocumentWriter, "_finish", write)
    thread = threading.Thread(target=remember_meanwhile)
    thread.start()
    report = brain_sql.ingest(brain_sql.connect(db_path), [long_records(tmp_path / "r.jsonl", 100)])
    thread.join(60)
    assert report.documents_added == 100 and not report.errors
    [(added, chunks)] = turns
    assert added == 1 and 1 < chunks < 301  # the remember landed while the ingest had more to write
    assert count(db_path) == 301 and check(brain_sql.connect(db_path)) == {}


def test_pruning_many_documents_takes_turns_too(tmp_path, monkeypatch):
    """--prune of many gone files removes them in several transactions, each document whole."""
    monkeypatch.setattr(pipeline, "INGEST_TRANSACTION_SECONDS", 0, raising=False)
    notes = tmp_path / "notes"
    for i in range(120):
        write(notes / f"n{i}.md", f"# Note {i}\n\nThe pager rota, week {i}.\n")
    db_path = tmp_path / "brain.db"
    brain_sql.ingest(brain_sql.connect(db_path), [notes])
    for i in range(100):
        (notes / f"n{i}.md").unlink()
    reader, seen, original = brain_sql.connect(db_path), [], writer.remove_documents

    def remove_and_look(conn, document_ids):
        seen.append(
            reader.execute("select (select count(*) from documents), (select count(*) from knowledge)").fetchone()
        )
        return original(conn, document_ids)

    monkeypatch.setattr(writer, "remove_documents", remove_and_look)
    report = brain_sql.ingest(brain_sql.connect(db_path), [notes], prune=True)
    assert report.chunks_removed == 100 and not report.errors
    assert seen == [(120, 120), (70, 70)]  # the first fifty gone, whole, before the rest
    assert count(db_path) == 20 and check(reader) == {}


def test_an_ingest_that_loses_the_lock_midway_keeps_what_it_committed_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(pipeline, "INGEST_TRANSACTION_SECONDS", 0, raising=False)
    db_path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(db_path))
    holder = brain_sql.connect(db_path)  # waits for the lock as long as it takes
    monkeypatch.setenv("BRAIN_BUSY_TIMEOUT_MS", "200")
    conn, holding, release = brain_sql.connect(db_path), threading.Event(), threading.Event()
    original = pipeline.DocumentWriter._finish

    def hold():
        with atomic(holder):  # between two of the ingest's transactions, and for longer than it waits
            holding.set()
            release.wait(60)

    def write(self, document, *rest):
        if document.external_id == "r5":
            threading.Thread(target=hold).start()
        return original(self, document, *rest)

    monkeypatch.setattr(pipeline.DocumentWriter, "_finish", write)
    source = long_records(tmp_path / "r.jsonl", 40)
    try:
        with pytest.raises(brain_sql.BrainBusy) as raised:
            brain_sql.ingest(conn, [source])
    finally:
        release.set()
    assert holding.is_set()
    kept = int(re.search(r"What was written before is kept \((\d+) documents\)", str(raised.value)).group(1))
    assert 5 < kept < 40 and "run the same ingest again" in str(raised.value)
    assert count(db_path) == 3 * kept  # each of them whole
    monkeypatch.setattr(pipeline.DocumentWriter, "_finish", original)
    again = brain_sql.ingest(brain_sql.connect(db_path), [source])
    assert (again.documents_added, again.documents_unchanged) == (40 - kept, kept)
    assert check(brain_sql.connect(db_path)) == {}


@pytest.mark.asyncio
async def test_a_remember_holds_no_write_lock_while_its_records_are_embedded(tmp_path, monkeypatch):
    """Its records are read, checked and embedded before it writes: meanwhile
    another writer gets Datasette's write thread and SQLite's write lock at once."""
    db_path = tmp_path / "brain.db"
    brain_sql.remember(brain_sql.connect(db_path), [{"_id": "x", "text": "a memory"}])
    datasette = Datasette([str(db_path)], metadata=WRITER)
    database, loop = datasette.get_database("brain"), asyncio.get_running_loop()
    embed, meanwhile = pipeline.storage_vectors, []

    def embedding(texts, model_id):
        if not meanwhile:  # another writer, while these are embedded
            other = brain_sql.connect(db_path)
            other.execute("pragma busy_timeout = 0")
            try:
                other.execute("begin immediate")
                other.execute("rollback")
                meanwhile.append("locked by none")
            except sqlite3.OperationalError as ex:
                meanwhile.append(str(ex))
            written = asyncio.run_coroutine_threadsafe(database.execute_write_fn(lambda conn: 1, block=True), loop)
            try:
                meanwhile.append(written.result(timeout=10))
            except TimeoutError:
                meanwhile.append("the write thread was busy")
        return embed(texts, model_id)

    monkeypatch.setattr(pipeline, "storage_vectors", embedding)
    response = await datasette.client.post("/brain/-/remember", json=[{"text": f"note {i}"} for i in range(20)])
    assert response.status_code == 201 and response.json()["added"] == 20, response.text
    assert meanwhile == ["locked by none", 1]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "records, said",
    [
        ([{"text": f"note {i}"} for i in range(pipeline.MAX_REMEMBER_RECORDS + 1)], "at most 1,000 in one remember"),
        (
            [{"_id": "big", "title": "Big", "_chunks": [{"content": f"part {i}"} for i in range(1001)]}],
            "make 1,001 memories (chunks): at most 1,000 in one remember",
        ),
        (  # 12 records of 6,500 entities held the lock for seconds and left the name index behind (review 152)
            [
                {"_id": f"r{i}", "title": f"R{i}", "text": "t", "entities": [f"E{i}-{j}" for j in range(900)]}
                for i in range(12)
            ],  # fmt: skip
            "state 10,800 entities, relations, tags and aliases: at most 10,000 in one remember",
        ),
    ],
)
async def test_a_remember_past_its_bounds_is_refused_naming_them(run, tmp_path, records, said):
    """More records or memories than one transaction may write while others wait:
    a 400 (the CLI: exit 2) naming the limit and what writes any number; nothing stored."""
    db_path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(db_path))
    datasette = Datasette([str(db_path)], metadata=WRITER)
    response = await datasette.client.post("/brain/-/remember", json=records)
    assert response.status_code == 400 and said in response.json()["error"], response.text
    assert "sqlite-utils brain ingest" in response.json()["error"]
    source = write(tmp_path / "records.jsonl", "\n".join(json.dumps(r) for r in records))
    result = run("brain", "remember", db_path, source)
    assert result.exit_code == 2 and said in result.output, result.output
    assert count(db_path) == 0


def test_a_remember_prepared_before_another_write_is_made_again_under_the_lock(tmp_path):
    """Records read before the lock are read again when the brain changed since:
    an `_id` that an ingest stored meanwhile is updated there, not stored twice."""
    db_path = tmp_path / "brain.db"
    conn = brain_sql.connect(db_path)
    brain_sql.migrate(conn)
    prepared = for_plugin.prepare_remember(conn, [{"_id": "x", "text": "the new text"}])
    brain_sql.ingest(
        brain_sql.connect(db_path), [write(tmp_path / "r.jsonl", '{"_id": "x", "text": "the old text"}\n')]
    )
    report, [[memory]] = for_plugin.write_remember(conn, prepared)
    assert (report.documents_added, report.documents_updated) == (0, 1)
    assert conn.execute("select id, content from knowledge").fetchall() == [(memory, "the new text")]


@pytest.mark.asyncio
async def test_a_forget_past_its_bound_is_refused_naming_it(run, tmp_path):
    """At most 1,000 ids and external ids in one forget (docs/ingest.md): it holds the
    write lock about a second at most; more is a 400 (the CLI: exit 2), nothing forgotten."""
    db_path = tmp_path / "brain.db"
    brain_sql.remember(brain_sql.connect(db_path), [{"_id": "x", "text": "a memory to keep"}])
    datasette = Datasette([str(db_path)], metadata=WRITER)
    asked = {"ids": list(range(2, 1002)), "external_ids": ["x"]}
    response = await datasette.client.post("/brain/-/forget", json=asked)
    assert response.status_code == 400 and "at most 1,000 in one request" in response.json()["error"], response.text
    result = run("brain", "forget", db_path, *[f"--id={i}" for i in asked["ids"]], "--external-id", "x")
    assert result.exit_code == 2 and "at most 1,000 in one request" in result.output, result.output
    assert count(db_path) == 1


@pytest.mark.parametrize("table", ["brain_changes", "brain_mention_names", "entities"])
def test_a_write_into_a_dropped_table_is_a_brain_error_not_one_to_try_again(vault_brain_copy, table):
    """remember and forget on a brain plain SQL dropped a table of: a BrainError
    saying to run check, never a WriteError (a 503 / exit 75 a client retries
    forever); nothing written."""
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute(f"drop table {table}")
    count = conn.execute("select count(*) from knowledge").fetchone()[0]
    writes = [lambda: brain_sql.remember(conn, [{"text": "Deploys happen on Tuesdays."}])]
    if table == "brain_changes":  # every write logs its changes there: a forget too
        writes.append(lambda: brain_sql.forget(conn, ids=[1]))
    for write_it in writes:
        with pytest.raises(brain_sql.BrainError, match="run sqlite-utils brain check") as raised:
            write_it()
        assert not isinstance(raised.value, brain_sql.WriteError)
    assert conn.execute("select count(*) from knowledge").fetchone()[0] == count


@pytest.mark.parametrize("change", ["delete from _sqlite_migrations", "drop table _sqlite_migrations"])
def test_an_emptied_migrations_record_on_a_whole_schema_is_restored(vault_brain_copy, change):
    """migrate() on a brain whose _sqlite_migrations plain SQL emptied or dropped, its
    schema all there: the record is restored, nothing applied again."""
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute(change)
    brain_sql.migrate(conn)
    assert conn.execute("select count(*) from _sqlite_migrations").fetchone()[0] > 0
    assert brain_sql.check(conn) == {}


def test_migrate_refuses_a_brain_whose_brain_meta_was_dropped(vault_brain_copy):
    """brain_meta records the model the vectors were made with: migrate() given a
    model refuses, saying to run check (whose --repair makes the table again from the
    memories), and neither it nor migrate() without one records a model (one recorded
    now could be another than the vectors')."""
    conn = brain_sql.connect(vault_brain_copy)
    model = brain_sql.info(conn)["model"]
    conn.execute("drop table brain_meta")
    with pytest.raises(brain_sql.BrainError, match="sqlite-utils brain check"):
        brain_sql.migrate(conn, model)
    brain_sql.migrate(conn)
    assert conn.execute("select count(*) from sqlite_master where name = 'brain_meta'").fetchone()[0] == 0


def test_a_repair_of_stale_quotes_waits_for_the_lock_then_rewrites_them_all(tmp_path):
    """check --repair takes the write lock like every writer: with another holding
    it, the repair waits (never fails half-way), then drops every stale quote."""
    db_path = tmp_path / "brain.db"
    lines = [
        {"_id": i, "speaker": s, "text": t, "session_id": "chat/1", "observed_at": "2023-05-08T13:56:00"}
        for i, s, t in [("T1", "A", "a"), ("T2", "A", "a\nA: a"), ("T3", "B", "b")]
    ]
    conn = brain_sql.connect(db_path)
    brain_sql.ingest(conn, [write(tmp_path / "chat.jsonl", "".join(json.dumps(line) + "\n" for line in lines))])
    fresh = conn.execute("select context from knowledge where external_id = 'T3'").fetchone()[0]
    filled = fresh + "".join(f"\nC: gone {n}" for n in range(50))
    conn.execute("update knowledge set context = ? where external_id = 'T3'", [filled])
    conn.commit()
    other = brain_sql.connect(db_path)
    other.execute("begin immediate")
    done = []
    thread = threading.Thread(target=lambda: done.append(check(conn, repair=True)))
    thread.start()
    thread.join(0.5)
    assert thread.is_alive()  # waiting for the lock, not failing
    assert other.execute("select context from knowledge where external_id = 'T3'").fetchone()[0] == filled
    other.execute("commit")
    thread.join(30)
    assert done and "stale_quotes" in done[0]
    assert conn.execute("select context from knowledge where external_id = 'T3'").fetchone()[0] == fresh
    assert check(conn) == {}


def _naming_record():
    """One record of 20 memories, each naming 30 of the 60 entities it states: 600 mention edges."""
    names = [f"Zq{j:03d}" for j in range(60)]
    chunks = [{"content": " ".join(names[(i * 7 + k) % 60] for k in range(30))} for i in range(20)]
    return {"_id": "big", "title": "Big", "entities": names, "_chunks": chunks}


@pytest.mark.asyncio
@pytest.mark.parametrize("door", ["python", "server"])
async def test_a_remember_writes_the_edges_its_names_make_in_bounded_transactions(tmp_path, monkeypatch, door):
    """The mentions a remember's text makes past a step's worth are written in
    transactions of their own after its own, each a write of the server's queue that
    others take turns with (a 1 MB remember made 130,870 and held the lock 2-5 s:
    review 152); the edges are those written at once, and none is left undone."""
    whole = tmp_path / "whole.db"
    brain_sql.remember(brain_sql.connect(whole), [_naming_record()])
    monkeypatch.setattr(brain_sql.mentions, "MENTION_STEP_EDGES", 100)
    transactions, queued = [], []
    real_atomic = pipeline.atomic

    def counted_atomic(conn, *args, **kwargs):
        if not conn.in_transaction:
            transactions.append(1)
        return real_atomic(conn, *args, **kwargs)

    monkeypatch.setattr(pipeline, "atomic", counted_atomic)
    db_path = tmp_path / "brain.db"
    if door == "python":
        brain_sql.remember(brain_sql.connect(db_path), [_naming_record()])
    else:
        brain_sql.migrate(brain_sql.connect(db_path))
        datasette = Datasette([str(db_path)], metadata=WRITER)
        database = datasette.get_database("brain")
        real_queue = database.execute_write_fn

        async def each_queued(fn, block=True):
            queued.append(fn)
            return await real_queue(fn, block=block)

        monkeypatch.setattr(database, "execute_write_fn", each_queued)
        response = await datasette.client.post("/brain/-/remember", json=_naming_record())
        assert response.status_code == 201, response.text
        assert len(queued) == len(transactions) >= 5  # each step a write of its own
        before = len(queued)
        small = await datasette.client.post("/brain/-/remember", json={"text": "a note naming nothing"})
        assert small.status_code == 201 and len(queued) == before + 1  # one write: no step left to queue
    assert len(transactions) >= 5  # 600 edges, 100 a step (and its chunk's rest)
    conn = brain_sql.connect(db_path)
    assert _mentioned(conn) == _mentioned(brain_sql.connect(whole)) and len(_mentioned(conn)) >= 600
    assert conn.execute("select count(*) from brain_mention_queue").fetchone()[0] == 0


def _mentioned(conn):
    """{(the memory's _id and chunk number, the entity it names)} of every mention edge."""
    return set(
        conn.execute(
            "select k.external_id, k.chunk_index, e.name from relationships r "
            "join knowledge k on k.id = r.knowledge_id join entities e on e.id = r.to_entity_id "
            "where r.relation_type = 'mentions'"
        ).fetchall()
    )


def test_a_remember_whose_later_edges_cannot_be_written_is_stored_and_says_so(tmp_path, monkeypatch):
    """Another writer holding the lock through a later step's busy timeout: the
    memories are stored, so the remember succeeds with a warning (never "not
    written": review 153), the rest stays queued, and check --repair finishes it."""
    monkeypatch.setattr(brain_sql.mentions, "MENTION_STEP_EDGES", 100)
    db_path = tmp_path / "brain.db"
    conn = brain_sql.connect(db_path)
    brain_sql.migrate(conn)
    report, ids = for_plugin.write_remember(conn, for_plugin.prepare_remember(conn, [_naming_record()]))
    assert report.unfinished is not None and len(ids[0]) == 20
    other = brain_sql.connect(db_path)
    other.execute("begin immediate")
    conn.execute("pragma busy_timeout = 50")
    assert for_plugin.finish_remember(conn, report) is False
    other.execute("rollback")
    answer = report.answer(ids)
    assert answer["ok"] and answer["ids"] == ids and "the memories are stored" in answer["warning"]
    assert "check --repair" in answer["warning"] and "not written" not in answer["warning"]
    assert conn.execute("select count(*) from knowledge").fetchone()[0] == 20
    assert check(conn).get("pending_mentions")
    conn.execute("pragma busy_timeout = 30000")
    check(conn, repair=True)
    whole = tmp_path / "whole.db"
    brain_sql.remember(brain_sql.connect(whole), [_naming_record()])
    assert _mentioned(conn) == _mentioned(brain_sql.connect(whole)) and not check(conn)


def test_an_entity_many_older_memories_name_is_tied_to_them_in_bounded_steps(tmp_path, monkeypatch):
    """A remember stating an entity that hundreds of stored memories name writes those
    edges a part at a time, in steps of their own: one name in 23,000 older chunks held
    the remember's lock 1.3 s (review 154). The edges are those written at once."""
    older = [
        {"_id": f"o{i}", "title": f"Note {i}", "text": f"Met the Zorblax Cell team, visit {i}."} for i in range(500)
    ]
    stated = [{"_id": "new", "title": "Zorblax Cell", "text": "The team that runs the reactor."}]
    whole = brain_sql.connect(tmp_path / "whole.db")
    brain_sql.remember(whole, older)
    brain_sql.remember(whole, stated)
    monkeypatch.setattr(brain_sql.mentions, "MENTION_STEP_EDGES", 40)
    monkeypatch.setattr(brain_sql.mentions, "_SCAN_AT_ONCE", 25)
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.remember(conn, older)
    transactions, real_atomic = [], pipeline.atomic

    def counted_atomic(c, *args, **kwargs):
        if not c.in_transaction:
            transactions.append(1)
        return real_atomic(c, *args, **kwargs)

    monkeypatch.setattr(pipeline, "atomic", counted_atomic)
    report, _ = brain_sql.remember(conn, stated)
    assert len(transactions) >= 5 and report.relationships >= 500  # 500 edges, about 40 a step
    assert _mentioned(conn) == _mentioned(whole) and len(_mentioned(conn)) >= 500
    assert conn.execute("select count(*) from brain_mention_queue").fetchone()[0] == 0
