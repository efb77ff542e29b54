"""The read state follows writes: after any sequence of ingests, edits, prunes,
flags and deletes it equals a fresh build, without being rebuilt; its vector leg
returns exactly what vec0 returns, and its graph leg what a fresh build walks."""

import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import brain_sql
from brain_sql import graph, querydoc, snapshot, state
from brain_sql.connection import main_file
from brain_sql.embed import embed
from brain_sql.filters import Filters
from brain_sql.hybrid import vector_leg
from brain_sql.vectors import quantize_int8

from .conftest import VAULT, reader_gets_in, write

MODEL = "wordllama/l2_supercat"
WORDS = "pager escalation rota vendor contract renewal runbook owner deploy window backup audit".split()
SCOPES = ["/", "/acme", "/acme/support", "/acme/legal", "/other"]


def note(rng, i):
    words = " ".join(rng.choice(WORDS) for _ in range(12))
    link = f" [[owned_by::Person {rng.randrange(5)}]] [[Note {rng.randrange(i + 1)}]]" if rng.random() < 0.6 else ""
    return (
        f"---\nscope: {rng.choice(SCOPES)}\n---\n# Note {i}\n\n{words}.{link}\n\n## Part\n\n{rng.choice(WORDS)} notes\n"
    )


def records(rng, start, count):
    return [
        {
            "_id": f"r{start + i}",
            "title": f"Record {start + i}",
            "text": " ".join(rng.choice(WORDS) for _ in range(8)),
            "scope": rng.choice(SCOPES),
            "class": rng.choice(["memory", "policy", "reference"]),
            "observed_at": f"2026-0{rng.randrange(1, 10)}-1{rng.randrange(10)}",
            "relations": [{"type": "mentions", "to": f"Person {rng.randrange(5)}"}] if rng.random() < 0.5 else [],
        }
        for i in range(count)
    ]


def writes(rng, conn, folder):
    """Random writes through every path a brain is written by."""
    notes = folder / "notes"
    step = 0
    while True:
        step += 1
        kind = rng.choice(
            [
                "note",
                "edit",
                "delete_note",
                "records",
                "remember",
                "flag",
                "scope",
                "delete_row",
                "delete_edge",
                "delete_entity",
            ]
        )
        existing = sorted(notes.glob("*.md")) if notes.exists() else []
        if kind in ("note", "edit") or not existing:
            path = rng.choice(existing) if kind == "edit" and existing else notes / f"Note {step}.md"
            write(path, note(rng, step))
            brain_sql.ingest(conn, [notes], prune=True)
        elif kind == "delete_note":
            rng.choice(existing).unlink()
            brain_sql.ingest(conn, [notes], prune_all=True)  # the last note may go: prune_all prunes to empty
        elif kind == "records":
            path = write(
                folder / f"records{rng.randrange(3)}.jsonl",
                "\n".join(json.dumps(r) for r in records(rng, rng.randrange(50), rng.randrange(1, 6))),
            )
            brain_sql.ingest(conn, [path], prune_all=True)  # a file written over: every record may be new
        elif kind == "remember":
            brain_sql.remember(conn, records(rng, 100 + rng.randrange(20), 2))
        else:
            table, sql = {
                "flag": ("knowledge", "update knowledge set flagged = 1 - flagged where id = ?"),
                "scope": ("knowledge", f"update knowledge set scope = '{rng.choice(SCOPES)}' where id = ?"),
                "delete_row": ("knowledge", "delete from knowledge where id = ?"),
                "delete_edge": ("relationships", "delete from relationships where id = ?"),
                "delete_entity": ("entities", "delete from entities where id = ?"),
            }[kind]
            ids = [row[0] for row in conn.execute(f"select id from {table}")]
            if ids:
                conn.execute(sql, [rng.choice(ids)])
        yield kind


@pytest.fixture
def brain(tmp_path):
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [VAULT])
    return conn


def filters(rng):
    raw = {"q": "x"}
    if rng.random() < 0.5:
        raw["scope"] = rng.choice(SCOPES)
    if rng.random() < 0.3:
        raw["classes"] = rng.sample(["memory", "policy", "reference"], rng.randrange(1, 3))
    if rng.random() < 0.3:
        raw["since"] = f"2026-0{rng.randrange(1, 9)}-01"
    if rng.random() < 0.2:
        raw["include_decayed"] = True
    return Filters.from_querydoc(querydoc.parse(raw))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_followed_state_equals_a_fresh_build(brain, tmp_path, monkeypatch, seed):
    rng = random.Random(seed)
    followed = state.current(brain, 256)
    builds = []
    original = state.ReadState.build
    monkeypatch.setattr(state.ReadState, "build", lambda self, conn: builds.append(1) or original(self, conn))
    for count, kind in enumerate(writes(rng, brain, tmp_path), 1):
        assert state.current(brain, 256) is followed  # one state per file, kept
        fresh = original(state.ReadState(256), brain)
        assert followed.fingerprint() == fresh.fingerprint(), (count, kind)
        if count == 25:
            break
    # every write was followed from the log; a compaction may rebuild once in a while
    assert len(builds) <= 3


def test_in_memory_vector_leg_equals_vec0(brain, tmp_path):
    rng = random.Random(7)
    queries = ["pager escalation", "who owns the runbook", "vectors and quantisation", "graph leg walk", "backup audit"]
    sequence = writes(rng, brain, tmp_path)
    for round_ in range(6):
        current = state.current(brain, 256)
        for q in queries:
            query = quantize_int8(embed([q], MODEL))[0].tobytes()
            for _ in range(4):
                chosen = filters(rng)
                with current.lock:
                    in_memory = current.chunks.nearest(query, current.chunks.visible(chosen), 100)
                assert in_memory == [tuple(row) for row in vector_leg(brain, query, chosen)], (round_, q, chosen)
                with current.lock:  # and under a smaller k, where the cut falls inside the brain
                    assert current.chunks.nearest(query, current.chunks.visible(chosen), 5) == [
                        tuple(row) for row in vector_leg(brain, query, chosen, n=5)
                    ]
        for _ in range(4):
            next(sequence)


def test_graph_leg_equals_a_fresh_build(brain, tmp_path):
    rng = random.Random(11)
    sequence = writes(rng, brain, tmp_path)
    for _ in range(15):
        next(sequence)
    followed = state.current(brain, 256)
    fresh = state.ReadState(256).build(brain)
    ids = [row[0] for row in brain.execute("select id from knowledge")]
    for q in ["What does Person 1 own?", "Note 3 and the pager", "runbook owner", "Tell me about the Graph Leg"]:
        chosen = filters(rng)
        passages = [("vector", i, rng.random()) for i in rng.sample(ids, 10)]
        with followed.lock:
            walked = graph.walk_in(followed, followed.chunks.visible(chosen), q, passages)
        again = graph.walk_in(fresh, fresh.chunks.visible(chosen), q, passages)
        assert [hit for hit, _ in walked[0]] == [hit for hit, _ in again[0]] and walked[1] == again[1], q
        assert [score for _, score in walked[0]] == pytest.approx([score for _, score in again[0]], rel=1e-9)


def test_every_connection_to_a_file_shares_one_state(tmp_path):
    first = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(first, [VAULT])
    second = brain_sql.connect(tmp_path / "brain.db")
    shared = state.current(first, 256)
    assert state.current(second, 256) is shared
    brain_sql.remember(second, [{"_id": "x", "title": "Zebra rota", "text": "The zebra rota changes on Fridays."}])
    found = brain_sql.recall(first, {"q": "zebra rota", "k": 3})
    assert found["hits"] and found["hits"][0]["title"] == "Zebra rota"
    assert state.current(first, 256) is shared and shared.graph.named("zebra rota")


def test_a_rolled_back_write_never_reaches_the_shared_state(tmp_path):
    path = tmp_path / "brain.db"
    writer, reader = brain_sql.connect(path), brain_sql.connect(path)
    brain_sql.remember(writer, [{"_id": "door", "title": "Door code", "text": "The back door code is 4711."}])
    writer.execute("update knowledge set flagged = 1")
    assert not brain_sql.recall(reader, {"q": "back door code"})["hits"]
    writer.execute("begin immediate")
    writer.execute("update knowledge set flagged = 0")
    assert brain_sql.recall(writer, {"q": "back door code"})["hits"]  # its own transaction sees it
    writer.execute("rollback")
    brain_sql.remember(
        writer, [{"_id": "other", "text": "An unrelated memory about lunch."}]
    )  # reuses the log's numbers
    assert not brain_sql.recall(reader, {"q": "back door code"})["hits"]
    assert state.current(reader, 256).fingerprint() == state.ReadState(256).build(reader).fingerprint()


def test_edges_come_back_with_an_entity_restored_under_its_id(brain):
    followed = state.current(brain, 256)
    entity_id, name, kind = brain.execute(
        "select e.id, e.name, e.entity_type from entities e join relationships r on r.to_entity_id = e.id "
        "group by e.id order by count(*) desc limit 1"
    ).fetchone()
    brain.execute(
        "insert into relationships (from_entity_id, to_entity_id, relation_type) values (?, ?, 'knows')",
        (entity_id, entity_id + 1),
    )  # an edge no chunk stated
    brain.execute("delete from entities where id = ?", [entity_id])
    assert state.current(brain, 256).fingerprint() == state.ReadState(256).build(brain).fingerprint()
    brain.execute("insert into entities (id, name, entity_type) values (?, ?, ?)", (entity_id, name, kind))
    assert state.current(brain, 256) is followed
    assert followed.fingerprint() == state.ReadState(256).build(brain).fingerprint()


def test_concurrent_readers_with_different_filters(brain):
    current = state.current(brain, 256)
    failures = []

    def reader(seed):
        rng = random.Random(seed)
        try:
            for _ in range(30):
                chosen = filters(rng)
                with current.lock:
                    graph.walk_in(current, current.chunks.visible(chosen), "the graph leg", [])
        except Exception as ex:  # noqa: BLE001 - any failure in a reader is the finding
            failures.append(ex)

    threads = [threading.Thread(target=reader, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_the_change_log_is_pruned(tmp_path, monkeypatch):
    from brain_sql import pipeline

    monkeypatch.setattr(pipeline, "CHANGE_LOG_KEEP", 50)
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [VAULT])
    assert conn.execute("select count(*) from brain_changes").fetchone()[0] == 50
    followed = state.current(conn, 256)
    brain_sql.ingest(
        conn, [write(tmp_path / "more.jsonl", "\n".join(json.dumps(r) for r in records(random.Random(1), 0, 40)))]
    )
    # far more than the log kept changed since: the state is built anew, and right
    assert state.current(conn, 256).fingerprint() == state.ReadState(256).build(conn).fingerprint()
    assert followed.seq == conn.execute("select max(seq) from brain_changes").fetchone()[0]


@pytest.mark.parametrize("copies, k", [(10, 3), (1100, 5), (1100, 1030)])
def test_equal_distances_make_the_cut_as_in_vec0(tmp_path, copies, k):
    """vec0 scans its chunks (1,024 rows each) in order, keeps what it has over an
    equal newcomer, and within a chunk takes the later row: so does the state."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    records = [{"_id": f"d{i}", "text": "The pager rota changes on Mondays."} for i in range(copies)]
    for start in range(0, copies, 1000):  # as many records as one remember takes
        brain_sql.remember(conn, records[start : start + 1000])
    brain_sql.remember(conn, [{"_id": "other", "text": "Lunch is at noon."}])
    query = quantize_int8(embed(["pager rota"], MODEL))[0].tobytes()
    chosen = filters(random.Random(0))
    current = state.current(conn, 256)
    with current.lock:
        assert current.chunks.nearest(query, current.chunks.visible(chosen), k) == [
            tuple(row) for row in vector_leg(conn, query, chosen, n=k)
        ]


def test_recall_never_returns_a_row_as_it_no_longer_passes_the_filters(tmp_path):
    path = tmp_path / "brain.db"
    conn, other = brain_sql.connect(path), brain_sql.connect(path)
    brain_sql.remember(
        conn, [{"_id": "s", "title": "Vendor contract", "text": "The vendor contract renews in May.", "scope": "/acme"}]
    )
    assert brain_sql.recall(conn, {"q": "vendor contract renewal", "scope": "/acme"})["hits"]
    other.execute("update knowledge set scope = '/elsewhere'")  # committed before the transaction below
    conn.execute("begin")  # a connection inside its own transaction does not refresh the shared state
    try:
        found = brain_sql.recall(conn, {"q": "vendor contract renewal", "scope": "/acme"})
    finally:
        conn.execute("rollback")
    assert found["hits"] == []


def test_recall_inside_a_transaction_answers_as_the_brain_it_sees(tmp_path):
    """Review 97: inside a caller's own transaction, recall read the shared state as it
    last was: a memory another connection flagged since kept rank 1 of the vector leg,
    moving every other hit's rank and score, and the decision was "ok" where the brain
    held no answer. A write of the transaction's own counts too."""
    path = tmp_path / "brain.db"
    conn, other = brain_sql.connect(path), brain_sql.connect(path)
    brain_sql.ingest(conn, [VAULT])
    note = {"_id": "z1", "title": "Zorblax note", "text": "Zorblax Quint owns the backup migration runbook."}
    brain_sql.remember(conn, [note])
    q = {"q": "Zorblax Quint backup migration", "k": 5, "prf": False, "cutoff": False, "provenance": True}

    def answer():
        found = brain_sql.recall(conn, q)
        return found["decision"], [(h["id"], h["score"], h["provenance"]) for h in found["hits"]]

    first = answer()[1][0]
    assert first[0] == conn.execute("select id from knowledge where external_id = 'z1'").fetchone()[0]
    other.execute("update knowledge set flagged = 1 where external_id = 'z1'")
    conn.execute("begin")
    inside = answer()
    conn.execute("commit")
    assert inside == answer() and first[0] not in [hit[0] for hit in inside[1]]
    conn.execute("begin")
    conn.execute("update knowledge set flagged = 0 where external_id = 'z1'")  # its own, uncommitted
    inside = answer()
    conn.execute("commit")
    assert inside == answer() and inside[1][0][0] == first[0] and inside[1][0][2]["vector_rank"] == 1


def test_a_file_copied_over_the_brain_is_read_anew(tmp_path):
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    for path, text in ((first, "The alpha pager rota changes on Mondays."), (second, "Beta lunch is at noon.")):
        conn = brain_sql.connect(path)
        brain_sql.remember(
            conn, [{"_id": f"r{i}", "text": f"{text} Note {i}."} for i in range(30 if path == second else 20)]
        )
        conn.execute("pragma wal_checkpoint(truncate)")
        conn.close()
    conn = brain_sql.connect(first)
    followed = state.current(conn, 256)
    conn.close()
    (tmp_path / "first.db").write_bytes(second.read_bytes())  # the same inode, another brain
    conn = brain_sql.connect(first)
    assert state.current(conn, 256) is followed
    assert followed.fingerprint() == state.ReadState(256).build(conn).fingerprint()
    assert not brain_sql.recall(conn, {"q": "alpha pager rota"})["hits"]


def test_a_refresh_that_fails_half_way_is_built_anew(brain, monkeypatch):
    followed = state.current(brain, 256)
    brain_sql.remember(brain, [{"_id": "x", "title": "Zebra rota", "text": "The zebra rota changes on Fridays."}])
    original = state.ReadState._apply

    def failing(self, conn, fetched):
        original(self, conn, fetched)
        raise brain_sql.BrainError("interrupted")

    monkeypatch.setattr(state.ReadState, "_apply", failing)
    with pytest.raises(brain_sql.BrainError):
        state.current(brain, 256)
    monkeypatch.setattr(state.ReadState, "_apply", original)
    assert state.current(brain, 256) is followed
    assert followed.fingerprint() == state.ReadState(256).build(brain).fingerprint()


@pytest.mark.parametrize("work", ["rows", "vectors", "tokens"])
def test_readers_go_on_while_a_refresh_reads_what_a_write_changed(brain, monkeypatch, work):
    """A refresh reads the rows the change log names, their vectors, and tokenizes
    their texts beside the readers, and holds them off only while it puts them in
    place: a recall never waits for SQL or tokenizing behind a write."""
    from brain_sql import follower, postings

    module, name = {
        "rows": (follower, "_rows_by_id"),
        "vectors": (follower, "_stored_vectors"),
        "tokens": (postings.lexical, "index_terms"),
    }[work]
    followed = state.current(brain, 256)
    brain_sql.remember(brain, [{"_id": "x", "title": "Zebra rota", "text": "The zebra rota changes on Fridays."}])
    original, read_meanwhile = getattr(module, name), []

    def working(*args):
        found = original(*args)
        read_meanwhile.append(reader_gets_in(followed))
        return found

    monkeypatch.setattr(module, name, working)
    assert state.current(brain, 256) is followed
    assert read_meanwhile and all(read_meanwhile)
    monkeypatch.setattr(module, name, original)
    assert followed.fingerprint() == state.ReadState(256).build(brain).fingerprint()
    assert brain_sql.recall(brain, {"q": "zebra rota"})["hits"]


def test_readers_that_meet_a_write_together_see_it_after_one_refresh(brain, monkeypatch):
    """Threads that see the same write at once wait for one refresh, and each
    answers from the state that holds it."""
    followed = state.current(brain, 256)
    brain_sql.remember(brain, [{"_id": "y", "title": "Yak rota", "text": "The yak rota changes on Tuesdays."}])
    applied, original = [], state.ReadState._apply
    monkeypatch.setattr(state.ReadState, "_apply", lambda self, *args: applied.append(1) or original(self, *args))
    path = brain.execute("pragma database_list").fetchone()[2]
    seen, start = [], threading.Barrier(4)

    def reader():
        conn = brain_sql.connect(path)
        start.wait()
        seen.append(brain_sql.recall(conn, {"q": "yak rota"})["hits"][0]["external_id"])
        conn.close()

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert seen == ["y"] * 4 and applied == [1]
    assert state.current(brain, 256) is followed


def test_slots_left_by_removed_rows_are_compacted_aside(brain, tmp_path, monkeypatch):
    """A state full of dead slots is rebuilt on a thread of its own while readers go
    on with it, then swapped in, brought up to the writes made meanwhile."""
    monkeypatch.setattr(state, "REBUILD_SHARE", 0.02)
    monkeypatch.setattr(state, "MIN_COMPACT_SLOTS", 0)
    compacted = []
    original = state._compact
    monkeypatch.setattr(state, "_compact", lambda *args: compacted.append(1) or original(*args))
    followed = state.current(brain, 256)
    sequence = writes(random.Random(5), brain, tmp_path)
    for _ in range(12):
        next(sequence)
        assert state.current(brain, 256) is followed
        for thread in threading.enumerate():
            if thread.name == "brain-compact":
                thread.join()
    assert compacted and (followed.garbage() <= 0.02 or followed.compacting)
    assert state.current(brain, 256).fingerprint() == state.ReadState(256).build(brain).fingerprint()


def test_the_visible_mask_follows_time_and_writes(tmp_path):
    """The chunk index keeps the mask of the clauses that name no time until it
    changes and applies `now` to the chunks with a time bound: at every moment and
    after every write it equals the filters applied to every row."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    records = [
        {
            "_id": f"m{i}",
            "text": f"pager rota {i}",
            "scope": SCOPES[i % len(SCOPES)],
            **({"expires_at": f"2026-0{1 + i % 9}-15"} if i % 3 == 0 else {}),
            **({"valid_from": f"2026-0{1 + i % 5}-01", "valid_to": f"2026-0{5 + i % 5}-01"} if i % 4 == 0 else {}),
        }
        for i in range(40)
    ]
    brain_sql.remember(conn, records)
    for step in range(3):
        current = state.current(conn, 256)
        for month in range(1, 13):
            for raw in (
                {"q": "x", "now": f"2026-{month:02d}-10 12:00:00"},
                {"q": "x", "now": f"2026-{month:02d}-10 12:00:00", "scope": "/acme", "as_of": "2026-03-02"},
                {"q": "x", "now": f"2026-{month:02d}-10 12:00:00", "include_decayed": True},
            ):
                chosen = Filters.from_querydoc(querydoc.parse(raw))
                with current.lock:
                    everything = current.chunks.rows.live & chosen.mask(current.chunks.columns(), current.chunks.codes)
                    assert np.array_equal(current.chunks.visible(chosen), everything), (step, raw)
        brain_sql.forget(conn, external_ids=[f"m{step}", f"m{step + 3}"])
        brain_sql.remember(conn, [{"_id": f"n{step}", "text": "night pager", "expires_at": "2026-06-01"}])


@pytest.mark.parametrize("child", ["works", "fails", "read_other_rows"])
def test_a_build_with_its_postings_made_by_a_second_process_is_the_same(brain, monkeypatch, child):
    """A big brain's postings are built by a second process beside the rest; the
    state is the one a single process builds, and when that process fails or read
    other rows than the build, the postings are built in the first one."""
    from brain_sql import follower

    brain_sql.ingest(brain, [VAULT])
    single = state.ReadState(256).build(brain)
    monkeypatch.setattr(follower, "PARALLEL_BUILD_CHUNKS", 1)
    taken = []
    original = follower._Beside.result

    def result(self, conn, seq, instance, size):
        found = original(self, conn, seq, instance, size + (child == "read_other_rows"))
        taken.append(found is not None)
        return found

    monkeypatch.setattr(follower._Beside, "result", result)
    if child == "fails":
        monkeypatch.setattr(follower.sys, "executable", "/bin/false")
    built = state.ReadState(256).build(brain)
    assert taken == [child == "works"]
    assert built.fingerprint() == single.fingerprint()


def _taking(monkeypatch):
    """The results of the second process's postings each build asked for: whether it took them."""
    from brain_sql import follower

    taken, original = [], follower._Beside.result

    def result(self, conn, seq, instance, size):
        found = original(self, conn, seq, instance, size)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(follower._Beside, "result", result)
    return taken


def _entity_and_edge(conn):
    with conn:
        conn.execute("insert into entities (name, entity_type) values ('Zed Ahead', 'person')")
        conn.execute(
            "insert into relationships (from_entity_id, to_entity_id, relation_type) "
            "select min(id), max(id), 'mentions' from entities"
        )


@pytest.mark.parametrize(
    "between", ["nothing", "an entity and an edge", "a chunk", "a chunk its log entry deleted", "its entry rewritten"]
)
def test_postings_started_ahead_are_taken_only_while_no_chunk_changed(brain, monkeypatch, between):
    """Postings a second process built ahead of a build (an ingest's, before its
    mention work) are taken when the build reads the chunks they were read from:
    at a later change-log position only entities, edges or documents changed.
    After a chunk changed they are not, nor when the log cannot tell (an entry
    deleted in between, the one they were read at rewritten), and the state is the
    one built in one process."""
    from brain_sql import follower

    taken = _taking(monkeypatch)
    follower.postings_ahead(brain)
    assert follower._ahead[main_file(brain)].process.wait() == 0  # read before the change
    read = brain.execute("select max(seq) from brain_changes").fetchone()[0]
    if between == "an entity and an edge":
        _entity_and_edge(brain)
    elif between.startswith("a chunk"):
        brain_sql.remember(brain, [{"_id": "late", "text": "a late note about the pager rota"}])
    if between == "a chunk its log entry deleted":  # plain SQL hides it: a later change shows the gap
        _entity_and_edge(brain)
        with brain:
            brain.execute("delete from brain_changes where seq > ? and kind = 'chunk'", (read,))
    elif between == "its entry rewritten":
        with brain:
            brain.execute("update brain_changes set stamp = stamp + 1 where seq = ?", (read,))
    built = state.ReadState(256).build(brain)
    assert taken == [between in ("nothing", "an entity and an edge")]
    assert built.fingerprint() == state.ReadState(256).build(brain).fingerprint()
    assert not follower._ahead
    assert not list(Path(main_file(brain)).parent.glob(".brainstate-*"))


def test_the_second_process_ends_with_the_one_that_started_it(tmp_path):
    """The postings process asks to be killed when its parent ends (Linux's
    parent-death signal): an ingest killed mid-way leaves no process building on."""
    child = (
        "import os, time; from brain_sql.follower import _end_with; "
        "_end_with(os.getppid()); open('started', 'w').close(); time.sleep(60)"
    )
    parent = (  # it ends once the child has asked (a loaded machine may take seconds to start it)
        f"import os, subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', {child!r}]); "
        "print(p.pid, flush=True); t = time.time()\n"
        "while not os.path.exists('started') and time.time() - t < 50: time.sleep(0.05)"
    )
    result = subprocess.run([sys.executable, "-c", parent], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    pid = int(result.stdout)
    assert (tmp_path / "started").exists(), result.stderr
    for _ in range(100):
        if not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the second process outlived the one that started it")


def test_an_ingest_builds_its_snapshots_postings_beside_its_mention_work(tmp_path, monkeypatch):
    """An ingest that saves a snapshot built from SQL starts its postings in a second
    process before it looks for mentions, and takes them: the snapshot holds the
    state one process builds, and nothing of the second process is left."""
    from brain_sql import follower

    monkeypatch.setattr(state, "SNAPSHOT_MIN_CHUNKS", 1)
    taken = _taking(monkeypatch)
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [VAULT])
    assert taken == [True]
    loaded = state.ReadState.load(snapshot.path_for(str(tmp_path / "brain.db")), 256)
    assert loaded.fingerprint() == state.ReadState(256).build(conn).fingerprint()
    assert not follower._ahead and not list(tmp_path.glob(".brainstate-*"))


def test_the_chunk_index_distances_are_vec0s(brain):
    """The hits' similarities the quality estimate reads from the chunk index are
    sqlite-vec's vec_distance_cosine, to the bit."""
    from brain_sql.vectors import vector_rows

    brain_sql.ingest(brain, [VAULT])
    current = state.current(brain, 256)
    ids = [row[0] for row in brain.execute("select id from knowledge")]
    for q in ("who owns the runbook", "vectors and quantisation", "zzz"):
        query = quantize_int8(embed([q], MODEL))[0].tobytes()
        with current.lock:
            found = current.chunks.distances(query, ids + [10**9])
        expected = dict(vector_rows(brain, "vec_distance_cosine(embedding_int8, vec_int8(?))", ids, [query]))
        assert found == expected


def test_a_requests_reach_is_what_sql_counts_after_each_write(tmp_path):
    """The rows a request reaches (kept per filters until the state changes: a
    million-row copy otherwise at every recall) follow every write, as SQL counts them."""
    from brain_sql import reach
    from brain_sql.filters import Filters

    rng = random.Random(7)
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.remember(conn, records(rng, 0, 40))
    for i, raw in enumerate([{"q": "x"}, {"q": "x", "scope": "/acme"}, {"q": "x", "classes": ["policy"]}] * 3):
        filters = Filters.from_querydoc(querydoc.parse(raw))
        ours = reach.of(conn, filters)
        assert reach.of(conn, filters).count == ours.count  # kept: asked again, the same
        conn.execute("begin")  # inside a transaction: counted by SQL
        assert conn.in_transaction
        theirs = reach.of(conn, filters)
        conn.execute("rollback")
        assert (ours.ids.tolist(), ours.lengths.tolist(), ours.tokens) == (
            theirs.ids.tolist(),
            theirs.lengths.tolist(),
            theirs.tokens,
        ), raw
        brain_sql.remember(conn, records(rng, 100 * (i + 1), 5))
        conn.execute("delete from knowledge where id = (select min(id) from knowledge)")
