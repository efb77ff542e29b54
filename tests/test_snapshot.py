"""The read state's snapshot: a server loads it instead of building the state from
SQL, follows the change log from where it stops, and never trusts one that is
damaged, another brain's or out of the log's reach; check verifies it."""

import contextlib
import gc
import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import weakref

import numpy as np
import pytest

import brain_sql
from brain_sql import schema, snapshot, state
from brain_sql.connection import main_file

from .conftest import reader_gets_in, write


@pytest.fixture
def small_snapshots(monkeypatch):
    monkeypatch.setattr(state, "SNAPSHOT_MIN_CHUNKS", 1)
    monkeypatch.setattr(state, "_states", {})


@pytest.fixture
def builds(monkeypatch, tmp_path):
    """How many times a state of a brain of this test's was built from SQL (not one
    an earlier test's thread still builds aside: a compaction under load)."""
    counted = []
    original = state.ReadState.build

    def build(self, conn):
        if main_file(conn).startswith(str(tmp_path)):
            counted.append(1)
        return original(self, conn)

    monkeypatch.setattr(state.ReadState, "build", build)
    return counted


def notes(folder, start, count):
    for i in range(start, start + count):
        write(folder / f"Note {i}.md", f"# Note {i}\n\nThe pager rota of team {i} [[owned_by::Person {i % 3}]].\n")
    return folder


def fresh_state(conn):
    return state.ReadState(256).build(conn)


def reopen(path):
    """A new process's view: no state held yet."""
    state._states.clear()
    return brain_sql.connect(path)


def test_ingest_saves_a_snapshot_that_a_new_process_loads_instead_of_building(small_snapshots, builds, tmp_path):
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    assert (tmp_path / "brain.db-brainstate").exists()
    conn = reopen(path)
    builds.clear()
    loaded = state.current(conn, 256)
    assert builds == []  # loaded, not built
    assert loaded.fingerprint() == fresh_state(conn).fingerprint()
    assert brain_sql.recall(conn, {"q": "pager rota team 7"})["hits"]


def test_a_snapshot_behind_the_brain_is_followed_to_now(small_snapshots, builds, tmp_path):
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    folder = notes(tmp_path / "notes", 0, 12)
    brain_sql.ingest(conn, [folder])
    saved = (tmp_path / "brain.db-brainstate").read_bytes()
    (folder / "Note 3.md").unlink()
    brain_sql.ingest(conn, [notes(folder, 12, 3)], prune=True)
    brain_sql.remember(conn, [{"_id": "extra", "title": "Extra", "text": "a pager rota for the night"}])
    (tmp_path / "brain.db-brainstate").write_bytes(saved)  # the older snapshot
    conn = reopen(path)
    builds.clear()
    followed = state.current(conn, 256)
    assert builds == []
    assert followed.fingerprint() == fresh_state(conn).fingerprint()


@pytest.mark.parametrize("damage", ["flip", "truncate", "format", "other_brain", "out_of_reach"])
def test_a_snapshot_that_cannot_be_trusted_is_rebuilt_and_check_says_so(small_snapshots, builds, tmp_path, damage):
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    where = tmp_path / "brain.db-brainstate"
    data = bytearray(where.read_bytes())
    if damage == "flip":  # a byte in the middle of the largest array
        manifest, start = snapshot.read_manifest(where)
        entry = max(manifest["arrays"].values(), key=lambda e: e["bytes"])
        data[start + entry["offset"] + entry["bytes"] // 2] ^= 0xFF
        where.write_bytes(bytes(data))
    elif damage == "truncate":
        where.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "format":
        manifest, _ = snapshot.read_manifest(where)
        where.write_bytes(bytes(data).replace(f'"format": {snapshot.FORMAT}'.encode(), b'"format": 99'))
    elif damage == "other_brain":
        other = tmp_path / "other.db"
        other_conn = brain_sql.connect(other)
        brain_sql.ingest(other_conn, [notes(tmp_path / "other", 100, 12)])
        shutil.copy(tmp_path / "other.db-brainstate", where)
    elif damage == "out_of_reach":
        brain_sql.ingest(conn, [notes(tmp_path / "notes", 12, 6)])
        where.write_bytes(bytes(data))
        schema.prune_changes(conn, 1)  # the log keeps only its last entry
    conn = reopen(path)
    builds.clear()
    current = state.current(conn, 256)
    assert builds == [1]  # built from SQL, the snapshot not trusted
    assert current.fingerprint() == fresh_state(conn).fingerprint()
    found = brain_sql.check(conn)
    if damage == "out_of_reach":  # only older than the log reaches: not wrong, not used
        assert found == {}, found
        return
    assert list(found) == ["stale_snapshot"], found
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("damage", [None, "flip"])
def test_a_snapshot_with_xxh64_checksums_an_earlier_version_wrote_is_loaded_or_refused(
    small_snapshots, builds, tmp_path, monkeypatch, damage
):
    """Snapshots written before XXH3 carry XXH64 checksums: one that holds is loaded
    (no minute-long rebuild after an upgrade), one that does not is rebuilt."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    with monkeypatch.context() as patched:
        patched.setattr(snapshot, "WRITTEN", "xxh64")
        brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    where = tmp_path / "brain.db-brainstate"
    manifest, start = snapshot.read_manifest(where)
    assert all("xxh64" in entry and "xxh3" not in entry for entry in manifest["arrays"].values())
    if damage:
        data = bytearray(where.read_bytes())
        entry = max(manifest["arrays"].values(), key=lambda e: e["bytes"])
        data[start + entry["offset"] + entry["bytes"] // 2] ^= 0xFF
        where.write_bytes(bytes(data))
    conn = reopen(path)
    builds.clear()
    loaded = state.current(conn, 256)
    assert builds == ([1] if damage else [])
    assert loaded.fingerprint() == fresh_state(conn).fingerprint()


def test_a_snapshot_whose_manifest_names_more_bytes_than_the_file_holds_is_rebuilt(small_snapshots, builds, tmp_path):
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    where = tmp_path / "brain.db-brainstate"
    manifest, start = snapshot.read_manifest(where)
    entry = max(manifest["arrays"].values(), key=lambda e: e["bytes"])
    entry["bytes"] = 1 << 45  # 32 TB: no buffer of that is ever asked for
    header = json.dumps(manifest).encode()
    data = where.read_bytes()
    head = snapshot.MAGIC + struct.pack("<Q", len(header)) + header
    where.write_bytes(head + b"\0" * (-len(head) % snapshot.ALIGN) + data[start:])
    conn = reopen(path)
    builds.clear()
    current = state.current(conn, 256)
    assert builds == [1]  # built: the manifest is not believed
    assert current.fingerprint() == fresh_state(conn).fingerprint()


def test_a_snapshot_holding_other_rows_is_found_by_check(small_snapshots, tmp_path):
    """A snapshot whose checksums hold but whose contents are not the brain's
    (written by a bug, or edited): check compares it with a build."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    loaded = state.ReadState.load(tmp_path / "brain.db-brainstate", 256)
    loaded.chunks.rows.arrays["length"][0] += 1
    loaded.save(tmp_path / "brain.db-brainstate")
    assert "does not hold what the brain holds" in brain_sql.check(conn)["stale_snapshot"][0]
    assert brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}


def test_a_snapshot_followed_past_a_forget_is_found_to_hold_what_the_brain_holds(small_snapshots, tmp_path):
    """Forgotten memories' words stay in the vocabulary of a state followed from its
    snapshot (a word is not taken out of it): check must not call that snapshot
    stale, nor repair rewrite it for nothing."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    folder = notes(tmp_path / "notes", 0, 12)
    write(folder / "Aardvark.md", "# Aardvark\n\nAardvarks abscond; abacus.\n")  # words no other note holds
    brain_sql.ingest(conn, [folder])
    assert brain_sql.check(conn) == {}
    gone = [row[0] for row in conn.execute("select id from knowledge where title in ('Aardvark', 'Note 3')")]
    brain_sql.forget(conn, gone)
    conn = reopen(path)
    assert brain_sql.check(conn) == {}


def test_a_snapshot_being_written_never_holds_a_refresh_off_and_a_write_meanwhile_gives_it_up(
    small_snapshots, monkeypatch, tmp_path
):
    """A server writes its snapshot a piece at a time under the shared lock: a write
    landing meanwhile is followed at once (readers see it), and the snapshot, which
    no longer holds one moment's state, is given up and the older one kept."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    where = tmp_path / "brain.db-brainstate"
    before = where.read_bytes()
    followed = state.current(conn, 256)
    monkeypatch.setattr(snapshot, "PIECE", 256)
    original, holds, seen = snapshot.save, [], []

    def write_and_recall():
        other = brain_sql.connect(path)
        brain_sql.remember(other, [{"_id": "w", "title": "Walrus rota", "text": "The walrus rota is on Sundays."}])
        seen.extend(hit["external_id"] for hit in brain_sql.recall(other, {"q": "walrus rota"})["hits"][:1])

    def save(target, manifest, arrays, like=None, hold=contextlib.nullcontext):
        @contextlib.contextmanager
        def meanwhile():
            holds.append(1)
            if len(holds) == 3:  # between two pieces
                worker = threading.Thread(target=write_and_recall, daemon=True)
                worker.start()
                worker.join(30)
                assert not worker.is_alive(), "the write's refresh waited for the whole snapshot"
            with hold():
                yield

        return original(target, manifest, arrays, like, meanwhile)

    monkeypatch.setattr(snapshot, "save", save)
    with pytest.raises(state.Overtaken):
        followed.save(str(where), str(path))
    assert seen == ["w"]
    assert where.read_bytes() == before and not list(tmp_path.glob(".brainstate-*"))
    monkeypatch.setattr(snapshot, "save", original)
    saved = followed.save(str(where), str(path))  # nothing written meanwhile: saved
    assert saved == followed.seq
    conn = reopen(path)
    assert state.current(conn, 256).fingerprint() == fresh_state(conn).fingerprint()


def test_a_snapshot_saved_after_following_writes_loads_as_a_build(small_snapshots, builds, tmp_path):
    """A state loaded from a snapshot, then following renames, removals and new words,
    saves a snapshot that loads to what a build holds (the names and terms it had
    loaded are written back as they were, the changed and new ones with them)."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    folder = notes(tmp_path / "notes", 0, 12)
    brain_sql.ingest(conn, [folder])
    conn = reopen(path)
    followed = state.current(conn, 256)
    (folder / "Note 3.md").unlink()
    write(folder / "Note 4.md", "# Note 4\n\nThe xylophone quartet of team 4 [[owned_by::Person 7]].\n")
    brain_sql.ingest(conn, [notes(folder, 12, 3)], prune=True)
    brain_sql.remember(conn, [{"_id": "q", "title": "Quokka", "text": "A quokka zoologist's rota."}])
    conn.execute("update entities set name = 'Person Renamed' where name = 'Person 1'")
    assert state.current(conn, 256) is followed
    followed.save(str(tmp_path / "brain.db-brainstate"), str(path))
    conn = reopen(path)
    builds.clear()
    loaded = state.current(conn, 256)
    assert builds == []
    assert loaded.fingerprint() == fresh_state(conn).fingerprint()
    for q, expected in (
        ("xylophone quartet", "Note 4"),
        ("quokka zoologist", "Quokka"),
        ("pager rota team 7", "Note 7"),
    ):
        assert brain_sql.recall(conn, {"q": q, "k": 1})["hits"][0]["title"] == expected, q


@pytest.fixture
def snapshots_of_before(monkeypatch):
    """Snapshots saved as before format 7: columns exactly full, no document index."""
    from brain_sql import slots

    monkeypatch.setattr(slots, "SNAPSHOT_ROOM_MIN", 0)
    monkeypatch.setattr(slots, "SNAPSHOT_ROOM_SHARE", 1 << 60)
    monkeypatch.setattr(slots.StringIndex, "to_arrays", lambda self, prefix: {})


def test_a_snapshot_keeps_room_so_the_first_write_after_it_loads_copies_no_column(
    small_snapshots, monkeypatch, tmp_path
):
    """A snapshot's columns keep empty rows after their last, and it holds the graph's
    document index: the first write after a load takes that room (no column copied,
    at a million chunks a second) and finds its documents there (no dict of them
    made, another second), and the state is what a build holds."""
    from brain_sql.entity_graph import EntityGraph
    from brain_sql.slots import Slots

    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    conn = reopen(path)
    followed = state.current(conn, 256)
    assert followed.graph._document_index is not None
    room, made = Slots.room, []
    monkeypatch.setattr(Slots, "room", lambda self, count: made.append(room(self, count)) or made[-1])
    monkeypatch.setattr(EntityGraph, "document_index", property(lambda self: self._document_index))
    brain_sql.remember(conn, [{"_id": "g", "title": "Gecko rota", "text": "The gecko rota is on Mondays."}])
    brain_sql.ingest(conn, [notes(tmp_path / "more", 12, 3)])
    assert state.current(conn, 256) is followed
    assert made and all(grown is None for grown in made)
    assert followed.fingerprint() == fresh_state(conn).fingerprint()
    assert brain_sql.recall(conn, {"q": "gecko rota", "k": 1})["hits"][0]["title"] == "Gecko rota"
    followed.save(str(tmp_path / "brain.db-brainstate"), str(path))  # the rows taken and the index as it grew
    conn = reopen(path)
    assert state.current(conn, 256).fingerprint() == fresh_state(conn).fingerprint()


def test_the_first_write_after_a_snapshot_of_before_loads_grows_the_columns_beside_the_readers(
    small_snapshots, snapshots_of_before, monkeypatch, tmp_path
):
    """A snapshot saved before format 7 holds columns exactly full: the first write
    grows every one (copies of every column, at a million chunks most of a second);
    the copies are made while readers go on, and only put in place while they wait."""
    from brain_sql.slots import Slots

    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    conn = reopen(path)
    followed = state.current(conn, 256)
    brain_sql.remember(conn, [{"_id": "g", "title": "Gecko rota", "text": "The gecko rota is on Mondays."}])
    original, grown = Slots.room, []

    def room(self, count):
        made = original(self, count)
        if made is not None:
            grown.append(reader_gets_in(followed))
        return made

    monkeypatch.setattr(Slots, "room", room)
    assert state.current(conn, 256) is followed
    assert grown and all(grown)
    assert followed.fingerprint() == fresh_state(conn).fingerprint()
    assert brain_sql.recall(conn, {"q": "gecko rota", "k": 1})["hits"][0]["title"] == "Gecko rota"


def test_the_first_write_after_a_snapshot_of_before_loads_indexes_the_documents_beside_the_readers(
    small_snapshots, snapshots_of_before, monkeypatch, tmp_path
):
    """A graph loaded from a snapshot saved before format 7 finds a document's index
    through an index made on first use (a million documents: a second); the first
    write makes it while readers go on."""
    from brain_sql.entity_graph import EntityGraph

    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    conn = reopen(path)
    followed = state.current(conn, 256)
    brain_sql.remember(conn, [{"_id": "h", "title": "Heron rota", "text": "The heron rota is on Fridays."}])
    original, made = EntityGraph.document_index, []

    def document_index(self):
        if self._document_index is None:  # made now
            made.append(reader_gets_in(followed))
        return original.fget(self)

    monkeypatch.setattr(EntityGraph, "document_index", property(document_index))
    assert state.current(conn, 256) is followed
    assert made == [True]
    assert followed.fingerprint() == fresh_state(conn).fingerprint()


def test_a_server_warmed_from_a_snapshot_puts_its_first_write_in_place_with_no_growing(
    small_snapshots, monkeypatch, tmp_path
):
    """warm (a server's start) readies a loaded state for writes: the first write
    then grows no column and makes no document index, and every recall asking after
    it waits only for what the write holds."""
    from brain_sql.entity_graph import EntityGraph
    from brain_sql.slots import Slots

    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    conn.close()
    state._states.clear()
    brain_sql.warm(path)
    conn = brain_sql.connect(path)
    followed = state.current(conn, 256)
    brain_sql.remember(conn, [{"_id": "i", "title": "Ibis rota", "text": "The ibis rota is on Sundays."}])
    grown, indexed = [], []
    room, index = Slots.room, EntityGraph.document_index
    monkeypatch.setattr(Slots, "room", lambda self, count: grown.append(room(self, count)) or grown[-1])
    monkeypatch.setattr(
        EntityGraph, "document_index", property(lambda self: indexed.append(self._document_index) or index.fget(self))
    )
    assert state.current(conn, 256) is followed
    assert grown and all(made is None for made in grown)
    assert indexed and all(made is not None for made in indexed)
    assert followed.fingerprint() == fresh_state(conn).fingerprint()
    assert brain_sql.recall(conn, {"q": "ibis rota", "k": 1})["hits"][0]["title"] == "Ibis rota"


@pytest.mark.parametrize("weak_hash", [False, True])
def test_an_index_of_a_column_finds_what_a_dict_of_it_finds(monkeypatch, weak_hash):
    """StringIndex (how a graph finds a document's index) answers as a dict of the
    column's values would: made of a column, added to, saved with a snapshot and
    loaded, and where hashes collide (a weak hash: every value one of three)."""
    import random

    from brain_sql import slots
    from brain_sql.slots import StringIndex, Strings

    if weak_hash:
        monkeypatch.setattr(slots, "_hash", lambda value: len(value) % 3)
    rng = random.Random(5)
    for _ in range(50):
        column, expected = Strings(), {}
        index = StringIndex(column)
        for _ in range(rng.randrange(0, 40)):
            value = "".join(rng.choice("ab#é\udc80/") for _ in range(rng.randrange(0, 5)))
            if value not in expected:
                expected[value] = len(column)
                column.append(value)
                index[value] = expected[value]
        arrays = {**column.to_arrays("c"), **index.to_arrays("i")}
        loaded_column = Strings.from_arrays(arrays, "c")
        loaded = StringIndex.from_arrays(arrays, "i", loaded_column)
        before = dict(expected)
        for later in ("later", "b#", "ab"):
            if later not in expected:
                expected[later] = len(loaded_column)
                loaded_column.append(later)
                loaded[later] = expected[later]
        remade = StringIndex.of(loaded_column)
        candidates = [*expected, "", "zz", "aé"]
        for each, holds in ((index, before), (loaded, expected), (remade, expected)):
            assert each.many([*candidates, None]) == [holds.get(c, -1) for c in candidates] + [-1]
            for candidate in candidates:
                assert each.get(candidate) == holds.get(candidate), candidate


def test_a_column_of_names_lists_what_it_holds():
    """Strings.tolist (how a loaded graph indexes its documents) gives what indexing
    each value gives: stored values, None among them, changed ones and added ones."""
    import random

    from brain_sql.slots import Strings

    rng = random.Random(3)
    for _ in range(200):
        values = [rng.choice([None, "", "a", "bé", "xyz" * rng.randint(0, 3)]) for _ in range(rng.randint(0, 12))]
        column = Strings()
        column.extend(values)
        if rng.random() < 0.8:
            column = Strings.from_arrays(column.to_arrays("p"), "p")
        for _ in range(rng.randint(0, 5)):
            value = rng.choice([None, "q", "", "ünïcode"])
            if values and rng.random() < 0.6:
                at = rng.randrange(len(values))
                values[at] = column[at] = value
            else:
                values.append(value)
                column.append(value)
        assert column.tolist() == values == list(column)
        assert Strings.from_arrays(column.to_arrays("p"), "p").tolist() == values


def test_a_copy_of_the_file_alone_recalls_the_same(small_snapshots, tmp_path):
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    expected = brain_sql.recall(conn, {"q": "pager rota team 4", "now": "2026-01-01 00:00:00"})
    conn.close()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(path, elsewhere / "brain.db")
    copy = reopen(elsewhere / "brain.db")
    found = brain_sql.recall(copy, {"q": "pager rota team 4", "now": "2026-01-01 00:00:00"})
    assert [h["id"] for h in found["hits"]] == [h["id"] for h in expected["hits"]]


def test_small_brains_write_no_snapshot(tmp_path):
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 5)])
    assert not (tmp_path / "brain.db-brainstate").exists()


def test_the_snapshot_names_what_it_holds(small_snapshots, tmp_path):
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 5)])
    manifest, _ = snapshot.read_manifest(tmp_path / "brain.db-brainstate")
    instance = conn.execute(f"select instance from {schema.INSTANCE_TABLE}").fetchone()[0]
    seq = conn.execute(f"select max(seq) from {schema.CHANGES_TABLE}").fetchone()[0]
    assert (manifest["instance"], manifest["seq"], manifest["format"]) == (instance, seq, snapshot.FORMAT)
    assert json.dumps(manifest)  # plain JSON


def test_an_ingest_rewrites_the_snapshot_only_once_it_is_far_behind(small_snapshots, monkeypatch, tmp_path):
    """A small ingest into a big brain leaves a recent snapshot alone (a server
    follows the gap); once it is SNAPSHOT_EVERY changes behind, ingest rewrites it."""
    conn = brain_sql.connect(tmp_path / "brain.db")
    folder = notes(tmp_path / "notes", 0, 12)
    brain_sql.ingest(conn, [folder])
    where = tmp_path / "brain.db-brainstate"
    first = snapshot.read_manifest(where)[0]["seq"]
    monkeypatch.setattr(state, "SNAPSHOT_EVERY", 10_000)
    brain_sql.ingest(conn, [notes(folder, 12, 2)])
    assert snapshot.read_manifest(where)[0]["seq"] == first
    monkeypatch.setattr(state, "SNAPSHOT_EVERY", 1)
    brain_sql.ingest(conn, [notes(folder, 14, 2)])
    latest = conn.execute(f"select max(seq) from {schema.CHANGES_TABLE}").fetchone()[0]
    assert snapshot.read_manifest(where)[0]["seq"] == latest > first


def test_the_snapshot_is_as_readable_as_the_brain(small_snapshots, tmp_path):
    """Written by one user's ingest, read by a server another user runs: the
    snapshot takes the brain file's read permissions, not a temporary file's."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    path.chmod(0o644)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 5)])
    assert (tmp_path / "brain.db-brainstate").stat().st_mode & 0o777 == 0o644


def test_a_brain_restored_from_a_backup_and_written_again_builds_its_state_anew(
    small_snapshots, builds, monkeypatch, tmp_path
):
    """Restored from a backup, then written again to the same change-log position
    with other words (the same ids, kinds and keys): the snapshot of what was
    written before the restore is not taken for it (each change has its stamp)."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    backup = tmp_path / "backup.db"
    conn.execute(f"vacuum into '{backup}'")
    records = tmp_path / "f.jsonl"
    write(records, json.dumps({"_id": "f1", "title": "Quokka ledger", "text": "the vault passphrase is marmalade"}))
    monkeypatch.setattr(state, "SNAPSHOT_EVERY", 1)
    brain_sql.ingest(conn, [records])  # its snapshot holds the marmalade
    saved = snapshot.read_manifest(tmp_path / "brain.db-brainstate")[0]["seq"]
    conn.close()
    shutil.copy(backup, path)
    conn = reopen(path)
    write(records, json.dumps({"_id": "f1", "title": "Quokka ledger", "text": "the pantry code is blueberry"}))
    monkeypatch.setattr(state, "SNAPSHOT_EVERY", 10**9)
    brain_sql.ingest(conn, [records])
    assert conn.execute(f"select max(seq) from {schema.CHANGES_TABLE}").fetchone()[0] == saved  # the same position
    conn = reopen(path)
    builds.clear()
    current = state.current(conn, 256)
    assert builds == [1]
    assert current.fingerprint() == fresh_state(conn).fingerprint()
    hits = brain_sql.recall(conn, {"q": "pantry code blueberry"})["hits"]
    assert hits and "blueberry" in hits[0]["content"]


@pytest.mark.parametrize("kind", ["fifo", "folder", "dangling_link"])
def test_something_else_at_the_snapshots_path_is_never_read(small_snapshots, builds, tmp_path, kind):
    """A pipe there would block a reader for ever: only a regular file is opened;
    check names it and --repair puts a snapshot in its place."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.ingest(conn, [notes(tmp_path / "notes", 0, 12)])
    where = tmp_path / "brain.db-brainstate"
    where.unlink()
    if kind == "fifo":
        os.mkfifo(where)
    elif kind == "folder":
        where.mkdir()
    else:
        where.symlink_to(tmp_path / "nowhere")
    conn = reopen(path)
    builds.clear()
    assert brain_sql.recall(conn, {"q": "pager rota team 3"})["hits"]
    assert builds == [1]
    assert list(brain_sql.check(conn)) == ["stale_snapshot"]
    repaired = brain_sql.check(conn, repair=True)
    if kind == "folder":  # a folder is the user's: repair says so and leaves it
        assert "move it away" in repaired["stale_snapshot"][-1] and where.is_dir()
        return
    assert brain_sql.check(conn) == {} and where.is_file()


def test_check_on_the_command_line_names_a_damaged_snapshot(small_snapshots, run, tmp_path):
    path = tmp_path / "brain.db"
    brain_sql.ingest(brain_sql.connect(path), [notes(tmp_path / "notes", 0, 12)])
    (tmp_path / "brain.db-brainstate").write_bytes(b"not a snapshot")
    result = run("brain", "check", path)
    assert result.exit_code == 1 and "snapshot" in result.output and "Traceback" not in result.output, result.output
    repaired = run("brain", "check", path, "--repair")
    assert repaired.exit_code == 0 and "now consistent" in repaired.output, repaired.output


def test_a_snapshot_a_killed_process_left_half_written_is_removed_by_the_next_save(tmp_path):
    """A process that dies while it writes a snapshot (a server killed, an ingest's
    process ending mid-save) leaves its temporary file: at a million memories a
    gigabyte a time. The next save removes such leftovers beside the brain, but
    never one that a live writer is still writing."""
    import fcntl
    import subprocess
    import sys

    arrays = {"a": np.arange(10)}
    left = tmp_path / ".brainstate-left"
    script = (
        "import sys, numpy as np\n"
        "from brain_sql import snapshot\n"
        "def hold():\n"
        "    import contextlib, os\n"
        "    @contextlib.contextmanager\n"
        "    def inner():\n"
        "        os._exit(9)  # killed mid-write\n"
        "        yield\n"
        "    return inner()\n"
        "snapshot.save(sys.argv[1], {'seq': 1}, {'a': np.arange(10)}, hold=hold)\n"
    )
    died = subprocess.run([sys.executable, "-c", script, str(tmp_path / "brain.db-brainstate")])
    assert died.returncode == 9
    (leftover,) = [path for path in tmp_path.iterdir() if path.name.startswith(".brainstate-")]
    left.write_bytes(b"half")  # another leftover, of a writer long gone
    busy = tmp_path / ".brainstate-busy"
    with open(busy, "wb") as writing:
        fcntl.flock(writing, fcntl.LOCK_EX)  # as a live writer holds its file
        fresh = tmp_path / ".brainstate-fresh"  # unlocked, but only just made: its writer may not have locked it yet
        fresh.write_bytes(b"")
        for path in (leftover, left, busy):
            os.utime(path, (time.time() - 60, time.time() - 60))
        snapshot.save(tmp_path / "other.db-brainstate", {"seq": 1}, arrays)
        assert not leftover.exists() and not left.exists() and busy.exists() and fresh.exists()
    assert snapshot.load(tmp_path / "other.db-brainstate")[1]["a"].tolist() == list(range(10))


LEASED = pytest.mark.skipif(snapshot._LIBC is None, reason="snapshots are read where the system grants no lease")
# a second process that maps a snapshot as a server's state does, says when it has, then
# checks what it loaded after the test changed the file (a page lost would kill it: SIGBUS)
MAPPING_PROCESS = """
import contextlib, sys, time
import numpy as np
from brain_sql import snapshot
_, arrays = snapshot.load(sys.argv[1], hold=contextlib.nullcontext, lost=lambda: print("lost", flush=True))
print(snapshot.mapped(arrays), flush=True)
sys.stdin.readline()  # the test changed the file
while snapshot.leases():
    time.sleep(0.05)
print(arrays["a"].tolist() == list(range(300_000)), float(arrays["b"].sum()), flush=True)
"""


def _saved(path):
    arrays = {"a": np.arange(300_000, dtype=np.int64), "b": np.linspace(0, 1, 70_000, dtype=np.float32)}
    snapshot.save(path, {"seq": 1}, arrays)
    return arrays


@LEASED
@pytest.mark.parametrize("change", ["written over", "cut short"])
def test_a_mapped_snapshot_is_copied_before_another_process_may_write_the_file(tmp_path, change):
    """A state's snapshot is mapped, not read, under a read lease: another process that
    writes the file over in place (a cp onto it) or cuts it short waits until the
    pages are the mapping process's own; then the process still has what it loaded
    and lives (a mapped page past a cut end would have killed it with SIGBUS)."""
    path = tmp_path / "brain.db-brainstate"
    arrays = _saved(path)
    mapper = subprocess.Popen(
        [sys.executable, "-c", MAPPING_PROCESS, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert mapper.stdout.readline().strip() == "2"  # both arrays map the file
        if change == "written over":
            with open(path, "r+b") as out:  # opened to write: waits for the lease to be let go
                out.write(b"\xff" * os.path.getsize(path))
        else:
            os.truncate(path, 100)
        mapper.stdin.write("\n")
        mapper.stdin.flush()
        assert mapper.stdout.readline().split() == ["True", str(float(arrays["b"].sum()))]
    finally:
        mapper.stdin.close()
        assert mapper.wait(timeout=60) == 0


@LEASED
def test_a_snapshot_open_to_write_elsewhere_is_read_not_mapped(tmp_path):
    """No lease while someone holds the file open to write: the arrays are read."""
    path = tmp_path / "brain.db-brainstate"
    arrays = _saved(path)
    with open(path, "r+b"):
        _, loaded = snapshot.load(path, hold=contextlib.nullcontext, lost=list)
    assert snapshot.mapped(loaded) == 0 and loaded["a"].tolist() == arrays["a"].tolist()
    _, loaded = snapshot.load(path)  # nor without a state to keep them (check's, a test's)
    assert snapshot.mapped(loaded) == 0


@LEASED
def test_a_mapped_snapshot_let_go_lets_its_lease_go(tmp_path):
    """Once no array maps the file (the state replaced), a writer of it need not wait."""
    path = tmp_path / "brain.db-brainstate"
    _saved(path)
    _, loaded = snapshot.load(path, hold=contextlib.nullcontext, lost=list)
    assert snapshot.mapped(loaded) == 2 and snapshot.leased(path)
    del loaded
    assert _until(lambda: not snapshot.leased(path))
    writer = subprocess.run(["timeout", "5", "sh", "-c", f"printf x >> '{path}'"])
    assert writer.returncode == 0  # the system made it wait for no lease


@LEASED
def test_a_server_state_loaded_from_its_snapshot_survives_another_snapshot_copied_onto_it(
    small_snapshots, builds, tmp_path
):
    """`cp other.db-brainstate brain.db-brainstate` while a state still maps the file it
    loaded: the cp waits for the state to make the pages its own, and the state's
    answers stay its brain's."""
    path, other = tmp_path / "brain.db", tmp_path / "other.db"
    brain_sql.ingest(brain_sql.connect(path), [notes(tmp_path / "notes", 0, 12)])
    brain_sql.ingest(brain_sql.connect(other), [notes(tmp_path / "others", 40, 3)])
    conn = reopen(path)
    builds.clear()
    loaded = state.current(conn, 256)
    assert builds == [] and snapshot.leased(tmp_path / "brain.db-brainstate")  # loaded from the snapshot, mapped
    before = brain_sql.recall(conn, {"q": "pager rota team 7"})["hits"]
    copied = subprocess.run(["cp", str(tmp_path / "other.db-brainstate"), str(tmp_path / "brain.db-brainstate")])
    assert copied.returncode == 0
    assert (tmp_path / "brain.db-brainstate").read_bytes() == (tmp_path / "other.db-brainstate").read_bytes()
    assert loaded.fingerprint() == fresh_state(conn).fingerprint()
    assert brain_sql.recall(conn, {"q": "pager rota team 7"})["hits"] == before


@LEASED
def test_a_snapshot_is_read_where_the_system_would_take_a_lease_away_sooner_than_its_default(tmp_path, monkeypatch):
    """A lease-break-time set lower than Linux's 45 s might end a lease before the
    pages are copied: the snapshot is read then, never mapped."""
    path = tmp_path / "brain.db-brainstate"
    _saved(path)
    monkeypatch.setattr(snapshot, "_lease_break_seconds", lambda: 5)
    _, loaded = snapshot.load(path, hold=contextlib.nullcontext, lost=list)
    assert snapshot.mapped(loaded) == 0
    monkeypatch.setattr(snapshot, "_lease_break_seconds", lambda: 45)
    _, loaded = snapshot.load(path, hold=contextlib.nullcontext, lost=list)
    assert snapshot.mapped(loaded) == 2


def test_an_ingest_saves_the_snapshot_once(small_snapshots, monkeypatch, tmp_path):
    """The ingest's own save (persist) is the one: the save that waits for a quiet
    moment finds nothing left to write (a second write of a million memories' gigabyte,
    cut short as the command exits, left a temporary file behind)."""
    monkeypatch.setattr(state, "SNAPSHOT_QUIET_SECONDS", 0.05)
    saves = []
    original = state.ReadState.save

    def save(self, path, brain=None):
        if str(path).startswith(str(tmp_path)):  # not an earlier test's state saving late
            saves.append(path)
        return original(self, path, brain)

    monkeypatch.setattr(state.ReadState, "save", save)
    brain_sql.ingest(brain_sql.connect(tmp_path / "brain.db"), [notes(tmp_path / "notes", 0, 12)])
    time.sleep(0.5)  # the quiet moment passes
    for thread in threading.enumerate():
        if thread.name == "brain-snapshot":
            thread.join(timeout=30)
    assert len(saves) == 1


def _until(condition, seconds=30):
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


@LEASED
def test_a_lease_the_system_would_now_take_away_sooner_is_let_go_once_the_pages_are_copied(tmp_path, monkeypatch):
    """lease-break-time lowered after the lease was taken: the pages are copied while
    there is time, and the lease let go."""
    path = tmp_path / "brain.db-brainstate"
    arrays = _saved(path)
    _, loaded = snapshot.load(path, hold=contextlib.nullcontext, lost=list)
    assert snapshot.leased(path)
    monkeypatch.setattr(snapshot, "_lease_break_seconds", lambda: 1)
    assert _until(lambda: not snapshot.leased(path))
    os.truncate(path, 100)  # no wait, and nothing lost: the pages are the process's own
    assert loaded["a"].tolist() == arrays["a"].tolist()


@LEASED
def test_a_state_whose_lease_was_taken_away_before_its_pages_were_copied_is_built_anew(
    small_snapshots, builds, tmp_path, monkeypatch
):
    """A server stopped past the lease-break-time while another process wrote its
    snapshot: the file may hold another's bytes, so the state is not read again; the
    next recall brings it up anew (from SQL, or from the file if it verifies) and
    answers as a fresh build does."""
    path = tmp_path / "brain.db"
    brain_sql.ingest(brain_sql.connect(path), [notes(tmp_path / "notes", 0, 12)])
    conn = reopen(path)
    builds.clear()
    loaded = state.current(conn, 256)
    before = brain_sql.recall(conn, {"q": "pager rota team 7"})["hits"]
    assert builds == [] and snapshot.leased(tmp_path / "brain.db-brainstate")
    status = snapshot.Lease.status
    monkeypatch.setattr(snapshot.Lease, "status", lambda lease: "gone")  # as the system reports it then
    assert _until(lambda: not loaded.built)
    assert _until(lambda: not snapshot.leased(tmp_path / "brain.db-brainstate"))
    monkeypatch.setattr(snapshot.Lease, "status", status)
    assert brain_sql.recall(conn, {"q": "pager rota team 7"})["hits"] == before  # the file verified again: loaded anew
    assert loaded.built and loaded.fingerprint() == fresh_state(conn).fingerprint()


@LEASED
def test_a_state_put_aside_is_freed_and_its_lease_let_go(small_snapshots, tmp_path):
    """A state no longer used (put aside for another, as a dimension change does) is
    not kept alive by the watch on its snapshot's lease: its memory and the lease go."""
    path = tmp_path / "brain.db"
    brain_sql.ingest(brain_sql.connect(path), [notes(tmp_path / "notes", 0, 12)])
    conn = reopen(path)
    loaded = weakref.ref(state.current(conn, 256))
    assert snapshot.leased(tmp_path / "brain.db-brainstate")
    state._states.clear()  # put aside
    gc.collect()
    assert loaded() is None
    assert _until(lambda: not snapshot.leased(tmp_path / "brain.db-brainstate"))


@pytest.mark.parametrize("behind_at_start, saved", [(1, True), (10**9, False)])
def test_a_server_starting_from_a_snapshot_far_behind_saves_it_anew(
    small_snapshots, monkeypatch, tmp_path, behind_at_start, saved
):
    """Small ingests leave the snapshot up to SNAPSHOT_EVERY changes behind, and every
    start of a server followed them again (3 s at a million chunks): a server preparing
    a writable brain (prepare_for_writes) that found its snapshot
    SNAPSHOT_BEHIND_AT_START changes behind writes it anew once quiet."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    folder = notes(tmp_path / "notes", 0, 12)
    brain_sql.ingest(conn, [folder])
    where = tmp_path / "brain.db-brainstate"
    first = snapshot.read_manifest(where)[0]["seq"]
    monkeypatch.setattr(state, "SNAPSHOT_EVERY", 10**9)
    brain_sql.ingest(conn, [notes(folder, 12, 3)])
    latest = conn.execute(f"select max(seq) from {schema.CHANGES_TABLE}").fetchone()[0]
    assert snapshot.read_manifest(where)[0]["seq"] == first < latest
    monkeypatch.setattr(state, "SNAPSHOT_BEHIND_AT_START", behind_at_start)
    monkeypatch.setattr(state, "SNAPSHOT_QUIET_SECONDS", 0.05)
    state.prepare_for_writes(reopen(path), 256)
    for thread in threading.enumerate():
        if thread.name == "brain-snapshot":
            thread.join(timeout=30)
    assert snapshot.read_manifest(where)[0]["seq"] == (latest if saved else first)
