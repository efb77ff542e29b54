"""The brain schema, built by sqlite-utils migrations.

A superset of the reference system's schema (Brain Server's knowledge, entities and
relationships tables, m001_reference_tables): a file written by the reference
system migrates in place, keeping every row. Fresh files get the
reference tables first and the same additions, so both paths end identical.
"""

import bisect
import contextlib
import datetime
import functools
import json
import re
import secrets
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import sqlite_utils
from sqlite_utils import Migrations

from . import lineage
from .config import CHANGE_LOG_KEEP, INGEST_TRANSACTION_SECONDS, MAX_ID, configured_model
from .connection import UNDECODED_TEXT, Connection, Turns, atomic, may_begin, open_connection, sqlite3
from .conversation import session_sql, speaker_sql
from .embed import model_dimension, other_width
from .errors import RULE_MARK, BrainBusy, BrainError, ModelError, ModelRefused
from .vectors import (
    VEC_METADATA,
    VEC_SOURCE_COLUMNS,
    backfill_vectors,
    create_vector_table,
    dimension_of,
    embedded_text,
    index_vector_places,
    insert_vectors,
    rebuild_vector_table,
    storage_vectors,
    vector_dimension,
)

SCHEMA_VERSION = 1
META_TABLE = "brain_meta"
QUEUE_TABLE = "brain_mention_queue"  # mention matching still to do (mentions.py)
# the name index mentions.py finds entity names in new text by, and where it has
# looked (the last change it followed, the version of its keys, how far it was made again)
MENTION_NAMES_TABLE = "brain_mention_names"
MENTION_NAMES_SEEN_TABLE = "brain_mention_names_seen"
# knowledge's columns in knowledge_fts, in order: the searched ones, then the hash
FTS_INDEXED = ("title", "content", "context", "content_hash")

migrations = Migrations("datasette-brain")

# Columns datasette-brain adds to the reference `knowledge` table.
KNOWLEDGE_COLUMNS = {
    "external_id": "TEXT",  # a record's own _id / id
    "class": "TEXT NOT NULL DEFAULT 'memory'",  # memory | reference | policy
    "scope": "TEXT NOT NULL DEFAULT '/'",  # a path such as /acme/support
    "owner": "TEXT",
    "access": "TEXT",
    "expires_at": "TIMESTAMP",
    "relevance_tier": "INTEGER NOT NULL DEFAULT 1",  # 0 archived .. 3 pinned
    "confidence": "REAL",
    "node_kind": "TEXT",
    "lawful_basis": "TEXT",
    "region": "TEXT",
    "tags": "TEXT",  # JSON list
    "metadata": "TEXT",  # JSON object: frontmatter or record fields kept as they are
    "embedding_model": "TEXT",
    "updated_at": "TIMESTAMP",
    "context": "TEXT",  # searched with the memory, never returned as it: a turn's speaker, time, earlier turns
    # validity in time (m009): the _id a memory replaces, and, derived from that and
    # from later versions of the same record (validity.py), when and by which
    # document it was replaced; a kept earlier version names its current document
    "supersedes": "TEXT",
    "superseded_at": "TIMESTAMP",
    "superseded_by": "TEXT",
    "version_of": "TEXT",
}


def _execute_script(db, sql):
    """Run each statement of `sql` inside the migration's transaction
    (executescript would commit it first)."""
    statement = ""
    for line in (sql + ";").splitlines(keepends=True):
        statement += line
        if sqlite3.complete_statement(statement):
            if statement.strip(" \n;"):
                db.execute(statement)
            statement = ""


@migrations()
def m001_reference_tables(db):
    """The reference system's tables, for fresh files (a reference file has them)."""
    _execute_script(
        db,
        """
        CREATE TABLE IF NOT EXISTS knowledge (
          id INTEGER PRIMARY KEY,
          title TEXT,
          content TEXT NOT NULL,
          knowledge_type TEXT,
          source TEXT DEFAULT 'manual',
          content_hash TEXT,
          created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
          flagged INTEGER NOT NULL DEFAULT 0,
          domain TEXT NOT NULL DEFAULT 'global',
          observed_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
          valid_from TIMESTAMP,
          valid_to TIMESTAMP,
          document_id TEXT,
          chunk_index INTEGER,
          heading_path TEXT,
          line_start INTEGER,
          line_end INTEGER,
          source_path TEXT
        );
        CREATE INDEX IF NOT EXISTS idx_knowledge_source_path ON knowledge(source_path);
        CREATE TABLE IF NOT EXISTS entities (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          name TEXT NOT NULL UNIQUE COLLATE NOCASE,
          entity_type TEXT,
          created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
        );
        CREATE INDEX IF NOT EXISTS idx_entities_name ON entities(name);
        CREATE INDEX IF NOT EXISTS idx_entities_type ON entities(entity_type);
        CREATE TABLE IF NOT EXISTS relationships (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          from_entity_id INTEGER NOT NULL,
          to_entity_id INTEGER NOT NULL,
          relation_type TEXT NOT NULL,
          knowledge_id INTEGER,
          created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP,
          FOREIGN KEY(from_entity_id) REFERENCES entities(id) ON DELETE CASCADE,
          FOREIGN KEY(to_entity_id) REFERENCES entities(id) ON DELETE CASCADE,
          FOREIGN KEY(knowledge_id) REFERENCES knowledge(id) ON DELETE SET NULL
        );
        CREATE INDEX IF NOT EXISTS idx_rels_from ON relationships(from_entity_id);
        CREATE INDEX IF NOT EXISTS idx_rels_to ON relationships(to_entity_id)
        """,
    )


@migrations()
def m002_brain_columns(db):
    """Scopes, classes, expiry, tiers, provenance tags, documents and the meta table.
    An edge is stated once: a reference file's repeats of one (the same ends, type
    and memory), which it allows, are kept as one."""
    _add_knowledge_columns(db)
    if "document_id" not in db["relationships"].columns_dict:
        # the document whose text stated the edge: re-ingesting it replaces its edges
        db.execute("ALTER TABLE relationships ADD COLUMN document_id TEXT")
    _execute_script(
        db,
        """
        DROP INDEX IF EXISTS idx_knowledge_hash;
        CREATE INDEX idx_knowledge_hash ON knowledge(content_hash);
        CREATE INDEX IF NOT EXISTS idx_knowledge_document ON knowledge(document_id, chunk_index);
        CREATE INDEX IF NOT EXISTS idx_knowledge_external_id ON knowledge(external_id);
        CREATE INDEX IF NOT EXISTS idx_knowledge_scope ON knowledge(scope);
        DROP INDEX IF EXISTS idx_rels_unique;
        DELETE FROM relationships WHERE id NOT IN (SELECT min(id) FROM relationships
          GROUP BY from_entity_id, to_entity_id, relation_type, ifnull(knowledge_id, 0), ifnull(document_id, ''));
        CREATE UNIQUE INDEX idx_rels_unique ON relationships(
          from_entity_id, to_entity_id, relation_type,
          ifnull(knowledge_id, 0), ifnull(document_id, ''));
        CREATE INDEX IF NOT EXISTS idx_rels_knowledge ON relationships(knowledge_id);
        CREATE INDEX IF NOT EXISTS idx_rels_document ON relationships(document_id);
        CREATE TABLE IF NOT EXISTS documents (
          document_id TEXT PRIMARY KEY,
          title TEXT,
          source_path TEXT,
          entity_id INTEGER REFERENCES entities(id),
          content_hash TEXT,
          chunks INTEGER NOT NULL DEFAULT 0,
          ingested_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP
        );
        CREATE INDEX IF NOT EXISTS idx_documents_source_path ON documents(source_path)
        """,
    )
    ensure_meta(db.conn, configured_model())


def _add_knowledge_columns(db):
    knowledge = db["knowledge"]
    for column, declaration in KNOWLEDGE_COLUMNS.items():
        if column not in knowledge.columns_dict:
            db.execute(f"ALTER TABLE knowledge ADD COLUMN [{column}] {declaration}")


_FTS_TABLE = """CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_fts USING fts5(
          title, content, content_hash UNINDEXED,
          content='knowledge', content_rowid='id', tokenize='porter unicode61')"""


@migrations()
def m003_full_text(db):
    """FTS5 over title and content, kept in sync by triggers; its vocabulary for PRF."""
    _execute_script(
        db,
        f"""
        {_FTS_TABLE};
        CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_fts_vocab USING fts5vocab(
          knowledge_fts, 'instance')
        """,
    )
    # Whatever triggers a reference file kept FTS in sync with are replaced by
    # ours, so no row is indexed twice; then the index is rebuilt from content.
    for (name,) in db.execute(
        "select name from sqlite_master where type = 'trigger' and tbl_name = 'knowledge'"
    ).fetchall():
        db.execute(f"DROP TRIGGER [{name}]")
    for sql in _fts_triggers(("title", "content", "content_hash")).values():
        db.execute(sql)
    db.execute("INSERT INTO knowledge_fts(knowledge_fts) VALUES ('rebuild')")


def fts_triggers():
    """{name: CREATE TRIGGER} keeping knowledge_fts in step with knowledge."""
    return _fts_triggers(FTS_INDEXED)


def _fts_triggers(indexed):
    columns = ", ".join(indexed)
    old = ", ".join(f"old.{c}" for c in indexed)
    new = ", ".join(f"new.{c}" for c in indexed)
    return {
        "knowledge_fts_insert": f"""CREATE TRIGGER knowledge_fts_insert AFTER INSERT ON knowledge BEGIN
          INSERT INTO knowledge_fts(rowid, {columns}) VALUES (new.id, {new});
        END""",
        "knowledge_fts_delete": f"""CREATE TRIGGER knowledge_fts_delete AFTER DELETE ON knowledge BEGIN
          INSERT INTO knowledge_fts(knowledge_fts, rowid, {columns}) VALUES ('delete', old.id, {old});
        END""",
        "knowledge_fts_update": f"""CREATE TRIGGER knowledge_fts_update AFTER UPDATE OF {columns}
        ON knowledge BEGIN
          INSERT INTO knowledge_fts(knowledge_fts, rowid, {columns}) VALUES ('delete', old.id, {old});
          INSERT INTO knowledge_fts(rowid, {columns}) VALUES (new.id, {new});
        END""",
    }


@migrations()
def m004_vectors(db):
    """vec0 with int8 and bit columns sized from the model, filter columns inside the KNN.

    A reference file's vec_knowledge (other columns, another model's vectors) is
    dropped: vectors are derived data, and every row is re-embedded from its text
    by the recorded model, so no memory is lost.
    """
    model_id, dimension = recorded_model_and_dimension(db.conn)
    create_vector_table(db.conn, dimension)
    for sql in vec_triggers().values():
        db.execute(sql)
    backfill_vectors(db.conn, model_id)


def vec_triggers():
    """{name: CREATE TRIGGER} keeping vec_knowledge (and the edges a chunk stated)
    in step with knowledge."""
    assignments = ", ".join(
        f"[{name}] = {expression.format(row='new')}" for name, (_, expression) in VEC_METADATA.items()
    )
    return {
        "knowledge_vec_delete": """CREATE TRIGGER knowledge_vec_delete AFTER DELETE ON knowledge BEGIN
          DELETE FROM vec_knowledge WHERE knowledge_id = old.id;
          DELETE FROM relationships WHERE knowledge_id = old.id;
        END""",
        "knowledge_vec_stale": """CREATE TRIGGER knowledge_vec_stale AFTER UPDATE OF title, content ON knowledge
        WHEN old.content IS NOT new.content OR old.title IS NOT new.title BEGIN
          DELETE FROM vec_knowledge WHERE knowledge_id = old.id;
        END""",
        "knowledge_vec_filters": f"""CREATE TRIGGER knowledge_vec_filters AFTER UPDATE OF
          {", ".join(f"[{c}]" for c in VEC_SOURCE_COLUMNS)} ON knowledge BEGIN
          UPDATE vec_knowledge SET {assignments} WHERE knowledge_id = new.id;
        END""",
    }


# reindex's new vectors, made beside the live ones until the switch, and the old
# ones after it until they are dropped: derived tables by their names (DERIVED_PREFIXES)
STAGED_VECTORS = "vec_knowledge_staged"
RETIRED_VECTORS = "vec_knowledge_retired"
REINDEX_KEY = "reindexing"  # brain_meta's key naming the reindex the staged table is for
# brain_meta's rows `prune_refused:FOLDER`, one for each folder ingest --prune refused (pipeline.every_held),
# holding the documents it held, and the row `prune_refused` holding them all ({folder: documents}), which
# versions before 7 December 2026 read alone (holds)
PRUNE_HELD_KEY = "prune_refused"
# and `replaced_refused:FILE`, each records file ingest kept the records of, every one replaced by others
FILE_HELD_KEY = "replaced_refused"
REINDEX_BATCH = 512  # memories embedded, then staged in one short transaction
REINDEX_LABELS = 2048  # memories the new model is written on in one short transaction
REINDEX_FINAL_AT_MOST = 256  # memories changed meanwhile that the switch's own transaction embeds
REINDEX_ROUNDS = 8  # rounds staging memories changed meanwhile, before the switch takes however many
REINDEX_ATTEMPTS = 3
# the tables vec0 keeps a table's rows in, named after it
_VEC0_SHADOWS = r"_(?:info|chunks|rowids|auxiliary|vector_chunks\d+|metadatachunks\d+|metadatatext\d+)"


class _Overtaken(Exception):
    """The change log no longer names every memory changed since the staging began."""


def reindex(conn: Connection, model_id: str, progress: Callable[[int, int], object] | None = None) -> int:
    """Re-embed every memory with `model_id` and make it the brain's model, all or
    none: recall keeps the old vectors until the switch commits. The memories are
    embedded with no write lock held and their vectors staged beside vec_knowledge
    in short transactions, so other writers take turns with it; the memories
    written meanwhile, which the change log names, are embedded again; the switch
    is one short transaction (tables renamed, the model recorded). `progress(done,
    total)` is told of the memories embedded. Returns the number of vectors written."""
    dimension = model_dimension(model_id, fetch=True)  # the user named it
    migrate(conn)
    for _ in range(REINDEX_ATTEMPTS):
        run = _Reindex(conn, model_id, dimension, progress)
        try:
            return run.run()
        except _Overtaken:
            continue
        finally:
            run.clean_up()
    raise BrainBusy(
        "the brain changed more than its change log keeps while it was re-embedded, "
        f"{REINDEX_ATTEMPTS} times: its model and vectors are as they were; run reindex when fewer writers are busy"
    )


class _Reindex:
    """One run of reindex: stage, catch up, switch, label.

    Each memory records the model of its vector (knowledge.embedding_model); NULL
    there means the brain's model, whichever it is. Each memory staged is set to
    NULL in the transaction that stages it, so the switch rewrites only memories
    written meanwhile, and the new model is written on each after the switch, in
    short transactions: what a memory says is true at every moment."""

    def __init__(self, conn, model_id, dimension, progress):
        self.conn, self.model_id, self.dimension, self.progress = conn, model_id, dimension, progress
        self.token = secrets.token_hex(8)
        self.instance = None
        self.switched = False
        self.own_changes = []  # (first, last) seq of the change log entries this run's NULLs wrote
        self.caught_up = set()  # memories staged again as other writers changed them
        self.turns = Turns(conn)  # its transactions, taking turns with other writers

    def run(self):
        seen = self._begin()
        total = self.conn.execute("select count(*) from knowledge").fetchone()[0]
        done, after = 0, None
        if self.progress:  # at once: a model such as MiniLM takes a minute or more over a batch
            self.progress(done, total)
        while rows := self._batch(after):
            self._stage([row for row in rows if row[0] not in self.caught_up])
            seen = self._catch_up(seen)  # as it goes: the log is pruned, and what a writer changed is staged early
            done, after = done + len(rows), rows[-1][0]
            if self.progress:
                self.progress(done, max(total, done))
        for _ in range(REINDEX_ROUNDS):  # the switch stages what is left, holding the lock: only a few
            if len(self._changed_since(seen)[0]) <= REINDEX_FINAL_AT_MOST:
                break
            seen = self._catch_up(seen)
        written = self._switch(seen)
        with contextlib.suppress(BrainBusy):  # switched: the memories still NULL say the brain's model, as true
            self._label()
            self._prune()
        return written

    def _begin(self):
        """The staged table made (a run stopped midway left its tables: dropped), and
        the change log's position from which memories changed are staged again."""
        with self.turns.turn():
            for table in (STAGED_VECTORS, RETIRED_VECTORS):
                self.conn.execute(f"DROP TABLE IF EXISTS [{table}]")
            create_vector_table(self.conn, self.dimension, STAGED_VECTORS)
            self.conn.execute(
                f"INSERT OR REPLACE INTO {META_TABLE} (key, value) VALUES (?, ?)", (REINDEX_KEY, self.token)
            )
            self.instance = self.conn.execute(f"select instance from {INSTANCE_TABLE}").fetchone()
            return _change_position(self.conn)

    def _own(self):
        """Fail when another reindex of this brain began since this one did (it dropped our table)."""
        row = self.conn.execute(f"select value from {META_TABLE} where key = ?", (REINDEX_KEY,)).fetchone()
        if row is None or row[0] != self.token:
            raise BrainError(
                "another reindex of this brain began meanwhile, or check --repair dropped what this one staged: "
                "this one stopped, its model and vectors untouched"
            )

    def _batch(self, after, columns="id, title, heading_path, content, context", size=None):
        """`columns` of the next `size` (REINDEX_BATCH) memories by id after id `after` (None: the first ones)."""
        select, size = f"select {columns} from knowledge", size or REINDEX_BATCH
        if after is None:
            return self.conn.execute(f"{select} order by id limit ?", (size,)).fetchall()
        return self.conn.execute(f"{select} where id > ? order by id limit ?", (after, size)).fetchall()

    def _rows(self, ids):
        return self.conn.execute(
            "select id, title, heading_path, content, context from knowledge "
            "where id in (select value from json_each(?)) order by id",
            [json.dumps(sorted(ids))],
        ).fetchall()

    def _embedded(self, rows):
        made = storage_vectors([embedded_text(*row[1:]) for row in rows], self.model_id)
        return [(row[0], *vector) for row, vector in zip(rows, made) if vector]

    def _stage(self, rows, replace=()):
        """Embed `rows` (before taking the lock, unless in the switch's transaction)
        and stage their vectors, in place of those staged for `replace` (knowledge
        ids); the memories' model set to NULL (the brain's), true before the switch
        and after it."""
        if not rows and not replace:
            return
        embedded = self._embedded(rows)
        with atomic(self.conn) if self.conn.in_transaction else self.turns.turn():  # the switch's, or its own
            self._own()
            self.conn.executemany(
                f"delete from [{STAGED_VECTORS}] where knowledge_id = ?", [(i,) for i in sorted(replace)]
            )
            insert_vectors(self.conn, embedded, STAGED_VECTORS)
            first = _change_position(self.conn)
            self.conn.execute(
                "update knowledge set embedding_model = null where embedding_model is not null "
                "and id in (select value from json_each(?))",
                [json.dumps([row[0] for row in rows])],
            )
            last = _change_position(self.conn)
            if last > first:  # this run's own: no memory changed by another writer
                self.own_changes.append((first + 1, last))

    def _catch_up(self, seen):
        """Stage again the memories other writers changed since change `seen`; returns
        the change it caught up to."""
        changed, now = self._changed_since(seen)
        if changed:
            self._stage(self._rows(changed), replace=changed)
            self.caught_up |= changed
        return now

    def _changed_since(self, seen):
        """(ids of the memories changed since change `seen`, the last change now), read
        together; _Overtaken when the log no longer reaches back to `seen` or says
        anything may have changed (a repair), or another brain is at this path."""
        with _reading(self.conn):
            now = _change_position(self.conn)
            if self.conn.execute(f"select instance from {INSTANCE_TABLE}").fetchone() != self.instance:
                raise _Overtaken
            if now == seen:
                return set(), now
            first = self.conn.execute(f"select min(seq) from {CHANGES_TABLE}").fetchone()[0]
            if first is None or first > seen + 1:
                raise _Overtaken
            changed = self.conn.execute(
                f"select seq, kind, key from {CHANGES_TABLE} where seq > ? and seq <= ? and kind in ('chunk', 'all')",
                (seen, now),
            ).fetchall()
        if any(kind == "all" for _, kind, _ in changed):
            raise _Overtaken
        firsts = [first for first, _ in self.own_changes]
        return {key for seq, _, key in changed if not self._own_change(seq, firsts)}, now

    def _own_change(self, seq, firsts):
        """Whether change `seq` is one of this run's NULLs (`firsts`: own_changes' firsts)."""
        at = bisect.bisect_right(firsts, seq) - 1
        return at >= 0 and seq <= self.own_changes[at][1]

    def _switch(self, seen):
        """In one transaction: the memories changed since `seen` staged, the staged
        table made vec_knowledge and the model recorded. The old table is dropped
        after, in a transaction of its own."""
        with self.turns.turn():
            self._own()
            changed, _ = self._changed_since(seen)
            if changed:
                self._stage(self._rows(changed), replace=changed)
            with _legacy_renames(self.conn):  # the triggers' bodies keep naming vec_knowledge
                _rename_vec0(self.conn, "vec_knowledge", RETIRED_VECTORS)
                _rename_vec0(self.conn, STAGED_VECTORS, "vec_knowledge")
            self.conn.executemany(
                f"update {META_TABLE} set value = ? where key = ?",
                [(self.model_id, "model"), (str(self.dimension), "dimension")],
            )
            self.conn.execute(f"delete from {META_TABLE} where key = ?", (REINDEX_KEY,))
            # vec0's rowid table (its count of vec_knowledge reads every vector)
            written = self.conn.execute("select count(*) from vec_knowledge_rowids").fetchone()[0]
        self.switched = True
        return written

    def _label(self):
        """The new model written on each memory whose model is NULL (the brain's), in
        short transactions; a run stopped before it ends leaves the rest NULL, as true."""
        after = None
        while ids := [row[0] for row in self._batch(after, "id", REINDEX_LABELS)]:
            with self.turns.turn():
                if recorded_model(self.conn) != self.model_id:  # another reindex switched since: NULL is its model
                    return
                self.conn.execute(
                    "update knowledge set embedding_model = ? where embedding_model is null "
                    "and id in (select value from json_each(?))",
                    [self.model_id, json.dumps(ids)],
                )
            after = ids[-1]

    def _prune(self):
        """The change log cut to its newest CHANGE_LOG_KEEP entries in short transactions:
        this run wrote two for each memory, which the next remember would otherwise
        delete in its one transaction."""
        more = True
        while more:
            with self.turns.turn() as began:
                more = prune_changes(self.conn, CHANGE_LOG_KEEP, began + INGEST_TRANSACTION_SECONDS)

    def clean_up(self):
        """Drop what this run left: the old table after a switch, the staged one
        without (unless another run took it over)."""
        try:
            with self.turns.turn():
                if self.switched:
                    self.conn.execute(f"DROP TABLE IF EXISTS [{RETIRED_VECTORS}]")
                    return
                row = self.conn.execute(f"select value from {META_TABLE} where key = ?", (REINDEX_KEY,)).fetchone()
                if row and row[0] == self.token:
                    self.conn.execute(f"DROP TABLE IF EXISTS [{STAGED_VECTORS}]")
                    self.conn.execute(f"delete from {META_TABLE} where key = ?", (REINDEX_KEY,))
        except (BrainError, sqlite3.Error):  # noqa: BLE001 - busy or read-only: the next reindex drops them
            pass


def reindex_leftovers(conn: Connection) -> list[str]:
    """What a reindex stopped before its clean-up (killed) left: its staged vectors and
    its row in brain_meta, or the old vectors after its switch. A reindex still running
    cannot be told from one killed (it holds no lock between its turns); dropping what
    it staged stops it, its model and vectors untouched (_Reindex._own)."""
    present = {name for (name,) in conn.execute("select name from sqlite_master where type = 'table'")}
    left = [table for table in (STAGED_VECTORS, RETIRED_VECTORS) if table in present]
    if conn.execute(f"select 1 from {META_TABLE} where key = ?", (REINDEX_KEY,)).fetchone():
        left.append(f"{META_TABLE} row {REINDEX_KEY!r}")
    return left


def drop_reindex_leftovers(conn: Connection) -> None:
    """Drop what reindex_leftovers names."""
    for table in (STAGED_VECTORS, RETIRED_VECTORS):
        conn.execute(f"DROP TABLE IF EXISTS [{table}]")
    conn.execute(f"delete from {META_TABLE} where key = ?", (REINDEX_KEY,))


def _change_position(conn):
    """The change log's last change ever written (pruning keeps the newest)."""
    return conn.execute(
        f"select max(coalesce((select max(seq) from {CHANGES_TABLE}), 0), "
        f"coalesce((select seq from sqlite_sequence where name = '{CHANGES_TABLE}'), 0))"
    ).fetchone()[0]


@contextlib.contextmanager
def _reading(conn):
    """One read transaction (unless `conn` is in one, or under a statement calling a
    function): what is read in it is of one moment."""
    if not may_begin(conn):
        yield
        return
    conn.execute("begin")
    try:
        yield
    finally:
        conn.execute("commit")


@contextlib.contextmanager
def _legacy_renames(conn):
    """ALTER TABLE RENAME as SQLite did before 3.26: references to the table in
    trigger bodies are left as they are (and not checked)."""
    conn.execute("pragma legacy_alter_table = on")
    try:
        yield
    finally:
        conn.execute("pragma legacy_alter_table = off")


def _rename_vec0(conn, old, new):
    """Rename the vec0 table `old` and the tables it keeps its rows in (sqlite-vec's
    rename leaves them), so that `new` finds them."""
    pattern = re.compile(re.escape(old) + _VEC0_SHADOWS)

    def shadows():
        names = conn.execute("select name from sqlite_master where type = 'table'").fetchall()
        return [name for (name,) in names if pattern.fullmatch(name)]

    conn.execute(f"ALTER TABLE [{old}] RENAME TO [{new}]")
    for name in shadows():
        conn.execute(f"ALTER TABLE [{name}] RENAME TO [{new}{name[len(old) :]}]")


@migrations()
def m005_term_frequencies(db):
    """fts5vocab 'row': each indexed term's document frequency, for the quality
    estimate and query expansion (the 'instance' table cannot be read by document)."""
    db.execute("CREATE VIRTUAL TABLE IF NOT EXISTS knowledge_fts_terms USING fts5vocab(knowledge_fts, 'row')")


@migrations()
def m006_mention_queue(db):
    """Mention matching still to do, queued in each document's transaction (brains
    written before this migration made the table at run time: IF NOT EXISTS)."""
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {QUEUE_TABLE} (kind TEXT NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (kind, id))"
    )


CHANGES_TABLE = "brain_changes"
# table -> (kind, the key column): what the change log records of each table
CHANGE_KINDS = {
    "knowledge": ("chunk", "id"),
    "entities": ("entity", "id"),
    "relationships": ("edge", "id"),
    "documents": ("document", "document_id"),
}


@migrations()
def m007_change_log(db):
    """The change log: which chunk, entity, edge and document each write touched,
    written by triggers in the writer's own transaction, so the read state that
    recall keeps in memory follows writes instead of being rebuilt."""
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {CHANGES_TABLE} "
        "(seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, key NOT NULL)"
    )
    for sql in _change_triggers_m007().values():
        db.execute(sql)


def _change_triggers_m007():
    """The change log's triggers as m007 made them (m012 adds each change's stamp)."""
    return {
        name: sql.replace(", stamp) VALUES", ") VALUES").replace(", random()); END", "); END")
        for name, sql in change_triggers().items()
    }


def change_triggers():
    """{name: CREATE TRIGGER} writing the change log: a row's key on every insert,
    update and delete, and the old key too when an update changes it."""
    triggers = {}
    for table, (kind, key) in CHANGE_KINDS.items():
        for event, row in (("INSERT", "new"), ("UPDATE", "new"), ("DELETE", "old")):
            triggers[f"{CHANGES_TABLE}_{table}_{event.lower()}"] = (
                f"CREATE TRIGGER {CHANGES_TABLE}_{table}_{event.lower()} AFTER {event} ON {table} "
                f"BEGIN INSERT INTO {CHANGES_TABLE} (kind, key, stamp) VALUES ('{kind}', {row}.{key}, random()); END"
            )
        triggers[f"{CHANGES_TABLE}_{table}_rekey"] = (
            f"CREATE TRIGGER {CHANGES_TABLE}_{table}_rekey AFTER UPDATE OF {key} ON {table} "
            f"WHEN old.{key} IS NOT new.{key} BEGIN INSERT INTO {CHANGES_TABLE} (kind, key, stamp) "
            f"VALUES ('{kind}', old.{key}, random()); END"
        )
    return triggers


def expected_triggers():
    """Every trigger a brain keeps its derived data, change log and id mark in step with,
    and its rules with."""
    return {
        **fts_triggers(),
        **vec_triggers(),
        **change_triggers(),
        **id_mark_triggers(),
        **rule_triggers(),
        **id_rule_triggers(),
    }


INSTANCE_TABLE = "brain_instance"
_INSTANCE = f"CREATE TABLE IF NOT EXISTS {INSTANCE_TABLE} (instance TEXT PRIMARY KEY)"
_NEW_INSTANCE = "lower(hex(randomblob(16)))"


@migrations()
def m008_instance(db):
    """The brain's own random id: memory kept for a file follows only the brain it was
    read from, even if another is copied over the file."""
    db.execute(_INSTANCE)
    db.execute(f"INSERT INTO {INSTANCE_TABLE} SELECT {_NEW_INSTANCE} WHERE NOT EXISTS (SELECT 1 FROM {INSTANCE_TABLE})")


def renew_instance(conn):
    """Give the brain a new instance id, its only one (check's repair of a
    brain_instance plain SQL emptied, filled or dropped): every reader builds its
    read state again."""
    conn.execute(_INSTANCE)
    conn.execute(f"DELETE FROM {INSTANCE_TABLE}")
    conn.execute(f"INSERT INTO {INSTANCE_TABLE} VALUES ({_NEW_INSTANCE})")


@migrations()
def m009_validity(db):
    """Validity in time: the supersession columns, and vec_knowledge rebuilt with
    the valid_from / valid_until filter columns, keeping its vectors. Readers
    rebuild their read state."""
    _add_knowledge_columns(db)
    db.execute("CREATE INDEX IF NOT EXISTS idx_knowledge_supersedes ON knowledge(supersedes)")
    db.execute("CREATE INDEX IF NOT EXISTS idx_knowledge_version_of ON knowledge(version_of)")
    rebuild_vector_table(db.conn, recorded_model_and_dimension(db.conn)[1])
    db.execute("DROP TRIGGER IF EXISTS knowledge_vec_filters")
    db.execute(vec_triggers()["knowledge_vec_filters"])
    db.execute(f"INSERT INTO {CHANGES_TABLE} (kind, key) VALUES ('all', 0)")


@migrations()
def m010_searched_context(db):
    """knowledge.context, searched beside title and content (a conversation turn's
    speaker, time and earlier turns): knowledge_fts is made again with it and
    rebuilt from knowledge; its fts5vocab tables read it by name."""
    if "context" not in db["knowledge"].columns_dict:
        db.execute("ALTER TABLE knowledge ADD COLUMN context TEXT")
    for name in fts_triggers():
        db.execute(f"DROP TRIGGER IF EXISTS [{name}]")
    db.execute("DROP TABLE IF EXISTS knowledge_fts")
    searched = ", ".join(FTS_INDEXED[:-1])
    db.execute(
        f"CREATE VIRTUAL TABLE knowledge_fts USING fts5({searched}, content_hash UNINDEXED, "
        "content='knowledge', content_rowid='id', tokenize='porter unicode61')"
    )
    for sql in fts_triggers().values():
        db.execute(sql)
    db.execute("INSERT INTO knowledge_fts(knowledge_fts) VALUES ('rebuild')")


# rows that are, or may become, decayed (decay_bucket_sql): archived, or with an expiry
DECAYING = "expires_at IS NOT NULL OR relevance_tier < 1"


def page_indexes():
    """{name: CREATE INDEX} for the pages people browse (m011): the facet columns
    (class, source, domain; scope has one) and the newest-first order by observed_at;
    the decaying rows alone, with what the decayed page and the decay facet read of
    them; which memories are flagged; each entity's document, and the documents by
    their number of chunks; and each conversation's turns by their session (as
    conversation.session_sql reads it), scope and speaker, so a turn written reads
    its session's turns alone, not every memory, and a session's speakers are a seek
    each (dialogue.session_speakers). check recreates any a tool dropped."""
    session = session_sql(None)
    indexes = {
        "idx_knowledge_class": "knowledge(class)",
        "idx_knowledge_source": "knowledge(source)",
        "idx_knowledge_domain": "knowledge(domain)",
        "idx_knowledge_observed": "knowledge(observed_at)",
        "idx_knowledge_decaying": "knowledge(expires_at, id, relevance_tier, flagged, class, scope, source, domain) "
        f"WHERE {DECAYING}",
        "idx_knowledge_flagged": "knowledge(document_id) WHERE flagged != 0",
        "idx_documents_entity": "documents(entity_id)",
        "idx_documents_chunks": "documents(chunks, entity_id)",
        "idx_knowledge_session": f"knowledge({session}, scope, {speaker_sql(None)}) WHERE {session} IS NOT NULL",
    }
    return {name: f"CREATE INDEX IF NOT EXISTS {name} ON {on}" for name, on in indexes.items()}


@migrations()
def m011_page_indexes(db):
    """page_indexes(), so each page answers in Datasette's time limits on a million
    memories; each is built from one pass over its table (seconds on a million)."""
    for sql in page_indexes().values():
        db.execute(sql)


@migrations()
def m012_change_stamps(db):
    """Each change of the log carries a random stamp: a brain restored from a backup
    and written again holds other stamps at the same positions, so a read state or
    snapshot of what was written before the restore is never taken for it."""
    db.execute(f"ALTER TABLE {CHANGES_TABLE} ADD COLUMN stamp INTEGER")
    for name, sql in change_triggers().items():
        db.execute(f"DROP TRIGGER IF EXISTS {name}")
        db.execute(sql)


IDS_TABLE = "brain_ids"
_IDS = f"CREATE TABLE IF NOT EXISTS {IDS_TABLE} (name TEXT PRIMARY KEY, seq INTEGER NOT NULL)"


@migrations()
def m013_id_mark(db):
    """The highest memory id ever given (brain_ids), raised by a trigger on every
    insert: writers give new memories ids above it, so an id forgotten is never
    another memory's (an agent holding it reads nothing, not a stranger). Seeded
    from the highest id stored; `knowledge` itself is not rebuilt (AUTOINCREMENT
    would copy every row, and FTS5 and vec0 key on the same ids)."""
    db.execute(_IDS)
    db.execute(f"INSERT OR IGNORE INTO {IDS_TABLE} SELECT 'knowledge', coalesce(max(id), 0) FROM knowledge")
    for sql in id_mark_triggers().values():
        db.execute(sql)


def restore_id_mark(conn, given):
    """The id mark made again, as check's repair of one plain SQL set back, emptied,
    overwrote, dropped or set past MAX_ID: at `given` (the highest id given) or
    above, never below what it holds within MAX_ID."""
    conn.execute(_IDS)
    conn.execute(
        f"INSERT OR REPLACE INTO {IDS_TABLE} (name, seq) SELECT 'knowledge', max(?, coalesce(("
        f"SELECT seq FROM {IDS_TABLE} WHERE name = 'knowledge' AND typeof(seq) = 'integer' AND seq <= {MAX_ID}), 0))",
        [given],
    )


def id_mark_triggers():
    """{name: CREATE TRIGGER} raising the id mark to any id written above it (within MAX_ID)."""
    return {
        f"{IDS_TABLE}_knowledge_{name}": (
            f"CREATE TRIGGER {IDS_TABLE}_knowledge_{name} AFTER {event} ON knowledge "
            f"WHEN new.id > coalesce((SELECT seq FROM {IDS_TABLE} WHERE name = 'knowledge'), -1) "
            f"AND new.id <= {MAX_ID} "
            f"BEGIN INSERT INTO {IDS_TABLE} (name, seq) VALUES ('knowledge', new.id) "
            "ON CONFLICT (name) DO UPDATE SET seq = excluded.seq; END"
        )
        for name, event in (("insert", "INSERT"), ("rekey", "UPDATE OF id"))
    }


def next_knowledge_id(conn):
    """The id for the next new memory: above every id ever given (the mark, and
    the rows, should the mark's trigger have been dropped), ids past MAX_ID aside
    (a mark or a row plain SQL set there before the brain's rules refused it);
    MAX_ID + 1 once every id is given."""
    mark = conn.execute(
        f"SELECT max(coalesce((SELECT seq FROM {IDS_TABLE} WHERE name = 'knowledge' AND seq <= {MAX_ID}), 0), "
        f"coalesce((SELECT max(id) FROM knowledge WHERE id <= {MAX_ID}), 0))"
    ).fetchone()[0]
    return mark + 1


# The tables whose ids readers and clients hold (the read state's maps, JSON): each
# id is a whole number from 1 to MAX_ID (SQL over the value {c})
ID_TABLES = ("knowledge", "entities", "relationships")
ID_SQL = f"typeof({{c}}) = 'integer' and {{c}} between 1 and {MAX_ID}"
ID_SAYS = f"a whole number from 1 to {MAX_ID:,} (2**53 - 1, the largest JSON clients keep exactly)"


def highest_given(conn, table):
    """The highest id of `table` given within MAX_ID: of its rows, and of those its
    change log names (removed ones among them, until the log is pruned)."""
    given = conn.execute(f"SELECT coalesce(max(id), 0) FROM [{table}] WHERE id <= {MAX_ID}").fetchone()[0]
    try:
        logged = conn.execute(
            f"SELECT max(key) FROM {CHANGES_TABLE} WHERE kind = ? AND typeof(key) = 'integer' AND key <= {MAX_ID}",
            [CHANGE_KINDS[table][0]],
        ).fetchone()[0]
    except sqlite3.OperationalError:  # no change log: the ids stored are all it knows
        return given
    return max(given, logged or 0)


def marks_past_bound(conn):
    """{(where, table): mark} of the marks past MAX_ID that writers give ids after:
    the id mark (brain_ids) and SQLite's AUTOINCREMENT counters of entities and
    relationships. Past it, every new id would be refused (and SQLite's own at
    the largest integer: the disk is full, it says)."""
    found = {}
    try:
        rows = conn.execute(f"SELECT seq FROM {IDS_TABLE} WHERE name = 'knowledge' AND seq > {MAX_ID}").fetchall()
        found.update(((IDS_TABLE, "knowledge"), seq) for (seq,) in rows)
    except sqlite3.OperationalError:  # no brain_ids: check names that
        pass
    try:
        rows = conn.execute(
            f"SELECT name, seq FROM sqlite_sequence WHERE name IN ('entities', 'relationships') AND seq > {MAX_ID}"
        ).fetchall()
    except sqlite3.OperationalError:  # no AUTOINCREMENT table: no counters
        rows = []
    found.update((("sqlite_sequence", name), seq) for name, seq in rows)
    return found


def lower_marks(conn):
    """Set each of marks_past_bound() back to the highest id given within MAX_ID."""
    for where, table in marks_past_bound(conn):
        if where == IDS_TABLE:
            restore_id_mark(conn, highest_given(conn, table))
        else:
            conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", [highest_given(conn, table), table])


def id_rule_triggers():
    """{name: CREATE TRIGGER} refusing a row of ID_TABLES whose id is past ID_SQL's
    bound, once it is written (before, a rowid SQLite is to pick reads -1), so
    that one SQLite picked is refused too (at random, once a table holds the largest)."""
    return {
        f"brain_rules_{table}_id_{name}": (
            f"CREATE TRIGGER brain_rules_{table}_id_{name} AFTER {event} ON {table} "
            f"WHEN NOT ({ID_SQL.format(c='new.id')}) "
            f"BEGIN SELECT RAISE(ABORT, '{RULE_MARK}{table}.id must be {ID_SAYS}'); END"
        )
        for table in ID_TABLES
        for name, event in (("insert", "INSERT"), ("rekey", "UPDATE OF id"))
    }


@migrations()
def m014_mention_names(db):
    """The name index: each entity name's (head, words, hash) as mentions.name_keys
    makes them, so that a few new chunks are matched without reading every name;
    and where it has looked, the change log's seq and stamp (mentions.follow_names).
    Filled from the entities at the next ingest (or over the next remembers), then
    kept up with the change log. A _seen table without stamps (from a development
    version of this migration) is dropped: the index is then made again."""
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {MENTION_NAMES_TABLE} (head INTEGER NOT NULL, words INTEGER NOT NULL, "
        "hash INTEGER NOT NULL, entity_id INTEGER NOT NULL, PRIMARY KEY (head, words, hash, entity_id)) WITHOUT ROWID"
    )
    db.execute(f"CREATE INDEX IF NOT EXISTS idx_mention_names_entity ON {MENTION_NAMES_TABLE}(entity_id)")
    db.execute(f"DROP TABLE IF EXISTS {MENTION_NAMES_SEEN_TABLE}")
    db.execute(
        f"CREATE TABLE {MENTION_NAMES_SEEN_TABLE} "
        "(seq INTEGER NOT NULL, stamp INTEGER, keys INTEGER NOT NULL, rebuilt INTEGER)"
    )


# a time as the brain writes one: a date (ISO 8601), then what unixepoch() reads, or
# NULL; SQLite's 'now', a bare time or a Julian day number read as times too, but
# name no moment of their own, and it reads 30 February, hour 24 or year 0 as
# another day, where Python (which writes and reads the brain's times) refuses
# them: the day must be one of its month, the hour below 24 and the moment, in UTC,
# from year 1 to 9999 (SQL over the value {c}: true or false, never NULL)
TIME_SQL = (
    "typeof({c}) = 'null' or (typeof({c}) = 'text' and {c} glob '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*' "
    "and coalesce(unixepoch({c}) between unixepoch('0001-01-01') and unixepoch('9999-12-31 23:59:59'), 0) "
    "and date(substr({c}, 1, 8) || '01', '+' || (substr({c}, 9, 2) - 1) || ' days') = substr({c}, 1, 10) "
    "and substr({c}, 12, 2) < '24')"
)
TIME_SAYS = "a time such as 2026-03-01 09:30:00 (ISO 8601), or NULL"
TIME_COLUMNS = {
    "knowledge": ("created_at", "observed_at", "valid_from", "valid_to", "expires_at", "updated_at", "superseded_at"),
    "entities": ("created_at",),
    "relationships": ("created_at",),
    "documents": ("ingested_at",),
}
ENTITY_SQL = "exists (select 1 from entities e where e.id = {c})"


def refused():
    """{table: {column: (SQL over the value {c} that holds, what it says)}}: what
    the brain's own writes always hold, and rule_triggers() refuse plain SQL to
    write otherwise."""
    rules = {table: {column: (TIME_SQL, TIME_SAYS) for column in columns} for table, columns in TIME_COLUMNS.items()}
    rules["relationships"].update(
        {
            "from_entity_id": (ENTITY_SQL, "the id of an entity"),
            "to_entity_id": (ENTITY_SQL, "the id of an entity"),
            "knowledge_id": (
                "typeof({c}) = 'null' or exists (select 1 from knowledge k where k.id = {c})",
                "the id of a memory (the one that stated the edge), or NULL",
            ),
        }
    )
    rules["documents"]["entity_id"] = (f"typeof({{c}}) = 'null' or {ENTITY_SQL}", "the id of an entity, or NULL")
    return rules


def rule_triggers():
    """{name: CREATE TRIGGER} refusing a write that breaks refused()'s rules, with
    a message naming the column (SQLite answers it as a constraint failed): a
    time that is no moment ('now', 'yesterday'), an edge or a document naming an
    entity that is not there. A value is judged when it is written, not again
    when other columns of its row change (check names one stored before)."""
    triggers = {}
    for table, rules in refused().items():
        for event in ("INSERT", "UPDATE"):
            body = "".join(
                f"  SELECT RAISE(ABORT, '{RULE_MARK}{table}.{column} must be {says}') WHERE "
                + (f"new.{column} IS NOT old.{column} AND " if event == "UPDATE" else "")
                + f"NOT ({valid.format(c=f'new.{column}')});\n"
                for column, (valid, says) in rules.items()
            )
            name = f"brain_rules_{table}_{event.lower()}"
            on = event if event == "INSERT" else f"UPDATE OF {', '.join(rules)}"
            triggers[name] = f"CREATE TRIGGER {name} BEFORE {on} ON {table} BEGIN\n{body}END"
    return triggers


@migrations()
def m015_rules(db):
    """rule_triggers(): plain SQL can no longer store a time that is no moment, or
    an edge or a document naming an entity that is not there. Values stored
    before stay as they are; check names them."""
    for sql in rule_triggers().values():
        db.execute(sql)


@migrations()
def m016_real_dates(db):
    """rule_triggers() made again with TIME_SQL's calendar: plain SQL can no longer
    store a day its month has not, an hour 24 or a year 0. Values stored before
    stay as they are; check names them."""
    for name, sql in rule_triggers().items():
        db.execute(f"DROP TRIGGER IF EXISTS {name}")
        db.execute(sql)


@migrations()
def m017_id_bound(db):
    """id_rule_triggers(): plain SQL can no longer write an id past MAX_ID (the
    read state's maps, JSON clients and SQLite's next rowid all break on one), and
    the id mark follows ids within it. Marks a row past it raised are set back
    (lower_marks): new ids follow the highest one within it again. Rows stored
    past it stay as they are; check names them."""
    for name, sql in {**id_mark_triggers(), **id_rule_triggers()}.items():
        db.execute(f"DROP TRIGGER IF EXISTS {name}")
        db.execute(sql)
    lower_marks(db.conn)


@migrations()
def m018_session_index(db):
    """page_indexes()' index of conversation turns by session: writing a turn read
    every memory's metadata to find its session's turns (a second a turn on a
    million memories); one pass over the table builds it."""
    for sql in page_indexes().values():
        db.execute(sql)


@migrations()
def m019_session_speakers(db):
    """page_indexes()' index of turns by session, scope and now speaker: the speakers
    of a session of 20,000 turns were read from every turn's metadata (36 ms a
    recall), now a seek each. A brain m018 indexed is indexed again (one pass)."""
    name = "idx_knowledge_session"
    if not page_index_current(db, name):
        db.execute(f"DROP INDEX IF EXISTS {name}")
        db.execute(page_indexes()[name])


@migrations()
def m020_vector_places(db):
    """vectors.index_vector_places on vec_knowledge (a brain whose vec0 table plain SQL
    dropped has it made again, indexed, by check --repair): a page of the table
    sorted every vector first. One pass over vec0's rowids (`brain init` 8.7 s at a
    million, most of it this index)."""
    index_vector_places(db.conn)


@migrations()
def m021_stated_fields(db):
    """documents.stated_fields: the relevance tier and expiry the document's record
    stated when last written (JSON). A rewrite of the document keeps a review's
    decision (archive, restore, extend) on a chunk whose text is unchanged unless the
    record now states another value than it did. A document written before has NULL:
    its next rewrite states its record's values, as rewrites did before."""
    if "stated_fields" not in {row[1] for row in db.execute("pragma table_info(documents)")}:
        db.execute("ALTER TABLE documents ADD COLUMN stated_fields TEXT")


def page_index_current(conn, name):
    """Whether the brain holds the page index `name` as page_indexes() writes it
    (named in any case, as check reads it)."""
    found = conn.execute(
        "select sql from sqlite_master where type = 'index' and name = ? collate nocase", [name]
    ).fetchone()
    return found is not None and same_sql(found[0]) == _page_index_sql(name)


@functools.lru_cache
def _page_index_sql(name):
    return same_sql(page_indexes()[name])


# Tables whose rows are memories' text, or derived from it: whoever may not read
# `knowledge` may read none of them.
DERIVED_TABLES = (
    "documents",
    "entities",
    "relationships",
    QUEUE_TABLE,
    MENTION_NAMES_TABLE,
    MENTION_NAMES_SEEN_TABLE,
    CHANGES_TABLE,
    "sqlite_sequence",
    IDS_TABLE,
)  # counters: rows a table ever had
# the FTS and vector tables and their shadows; and ANALYZE's statistics, sqlite_stat1
# to sqlite_stat4: row counts of every table and index, and sample rows of each index
# (entity names, scopes, source paths)
DERIVED_PREFIXES = ("knowledge_fts", "vec_knowledge", "sqlite_stat")


def derived_from_knowledge(table: str) -> bool:
    """Whether `table` holds memories' text or anything derived from it."""
    return table in DERIVED_TABLES or table.startswith(DERIVED_PREFIXES)


# Of those, the ones derived from `entities` too: the name index holds every entity's
# name (hashed) with its id, so whoever may not read `entities` may read none of them.
ENTITY_DERIVED_TABLES = (MENTION_NAMES_TABLE,)
# and the ones recording rows of every table: the change log names chunk, entity, edge
# and document ids, the mention queue chunks and entities, the name index's position in
# the change log counts every change, sqlite_sequence the rows each table ever had, and
# ANALYZE's statistics sample every index: for whoever may read every table of a brain.
EVERY_TABLE_TABLES = (CHANGES_TABLE, QUEUE_TABLE, MENTION_NAMES_SEEN_TABLE, "sqlite_sequence")
EVERY_TABLE_PREFIXES = ("sqlite_stat",)


# the virtual tables whose modules keep their rows in tables of their own (FTS5's
# knowledge_fts_data, sqlite-vec's vec_knowledge_vector_chunks00...): those are that table
VIRTUAL_TABLES = ("knowledge_fts", "vec_knowledge")


def stored_for(table: str) -> str | None:
    """The virtual table whose rows `table` stores (one of its shadow tables), or None."""
    return next((v for v in VIRTUAL_TABLES if table.startswith(v + "_")), None)


def derived_from_every_table(table: str) -> bool:
    """Whether `table` records rows of every table of a brain (the graph's among them)."""
    return table in EVERY_TABLE_TABLES or table.startswith(EVERY_TABLE_PREFIXES)


# the tables a brain's schema makes under fixed names (the FTS and vector tables' shadows
# are named by their modules; sqlite-utils records the migrations run): a file that is
# no brain yet may become one under them
BRAIN_TABLES = ("knowledge", *DERIVED_TABLES, META_TABLE, INSTANCE_TABLE, "_sqlite_migrations")
# the entity graph's: recall's graph leg, its entity and conversation evidence, and the
# graph pages read them; whoever may not read one of them is answered as by the brain
# without its graph
GRAPH_TABLES = ("entities", "relationships", "documents")


def brain_table(table: str) -> bool:
    """Whether `table` is one of a brain's, by its name alone."""
    return table in BRAIN_TABLES or derived_from_knowledge(table)


# the virtual tables a brain makes, and the tables sqlite-vec keeps vec_knowledge in (FTS5's say they are its)
OWN_VIRTUAL_TABLES = ("knowledge_fts", "knowledge_fts_vocab", "knowledge_fts_terms", "vec_knowledge")
# exactly those the modules make for the brain's tables: a table someone made under a name they could
# make (knowledge_fts_content: the index keeps no content; vec_knowledge_vector_chunks07) is no shadow of
# theirs (review 108); one a later brain makes that is not here is decided by what it shows, its module's
_OWN_STORED_TABLES = frozenset(
    [f"knowledge_fts_{part}" for part in ("data", "idx", "docsize", "config")]
    + [f"vec_knowledge_{part}" for part in ("chunks", "rowids", "info")]
    + [f"vec_knowledge_vector_chunks{n:02d}" for n in range(2)]
    + [f"vec_knowledge_metadatachunks{n:02d}" for n in range(11)]
    + [f"vec_knowledge_metadatatext{n:02d}" for n in range(4)]
)
_STATISTICS = re.compile(r"sqlite_stat[1-4]")


def own_name(name: str) -> bool:
    """Whether `name` is exactly one a brain gives a table of its own (its name alone:
    what recall's permission checks ask, with no query). Another object named like
    the brain's (`knowledge_fts_names`) is not; shown_by_added tells by its kind too."""
    return (
        name in BRAIN_TABLES
        or name in OWN_VIRTUAL_TABLES
        or name in _OWN_STORED_TABLES
        or _STATISTICS.fullmatch(name) is not None
    )


def shown_by_added(conn: Connection, name: str) -> set[str] | None:
    """None when `name` is one of the brain's own tables (by its name and kind); else,
    an object someone added (a view, an index, a table, named like the brain's or
    not: review 107), the tables whose rows it shows (lineage.tables_shown)."""
    kind = lineage.object_kind(conn, name)
    if kind is None:
        return set()
    own = (
        (name in BRAIN_TABLES and kind == "table")
        or (name in OWN_VIRTUAL_TABLES and kind == "virtual")
        or (name in _OWN_STORED_TABLES and kind in ("shadow", "table"))
        or (_STATISTICS.fullmatch(name) is not None and kind == "table")
    )
    return None if own else lineage.tables_shown(conn, name)


def prune_changes(conn, keep, deadline=None):
    """Forget all but the newest `keep` changes; a reader further behind rebuilds.
    They go a thousand at a time until `deadline` (time.perf_counter; None: all of
    them); returns whether any are left to forget."""
    while True:
        forgotten = conn.execute(
            f"DELETE FROM {CHANGES_TABLE} WHERE seq IN (SELECT seq FROM {CHANGES_TABLE} "
            f"WHERE seq <= (SELECT max(seq) FROM {CHANGES_TABLE}) - ? ORDER BY seq LIMIT 1000)",
            (keep,),
        ).rowcount
        if forgotten < 1000:
            return False
        if deadline is not None and time.perf_counter() >= deadline:
            return True


def ensure_meta(conn, model_id):
    """Create the meta table and record `model_id` unless a model is recorded already."""
    conn.execute(f"CREATE TABLE IF NOT EXISTS {META_TABLE} (key TEXT PRIMARY KEY, value TEXT)")
    if stored_meta(conn).get("model") is None:
        conn.executemany(
            f"INSERT OR REPLACE INTO {META_TABLE} (key, value) VALUES (?, ?)",
            [
                ("model", model_id),
                ("dimension", str(model_dimension(model_id, fetch=True))),  # $BRAIN_MODEL or --model
                ("schema_version", str(SCHEMA_VERSION)),
            ],
        )


def stored_meta(conn):
    """brain_meta's META_KEYS as {key: value}; {} where there is none. Main's own: a
    connection that attached a brain (Datasette's --crossdb) is not one. Text plain
    SQL wrote that is not UTF-8 is read with escapes (a model so named is then one
    not installed here, which check names and mends), a key so written left out.
    Those keys only: a server asks on every request, and ingest's holds may be
    megabytes (review 134's 5,000 records files held)."""
    keys = ", ".join(f"'{key}'" for key in META_KEYS)
    try:
        return dict(conn.execute(f"select key, value from main.{META_TABLE} where key in ({keys})").fetchall())
    except sqlite3.OperationalError as ex:
        if UNDECODED_TEXT not in str(ex):
            return {}
    meta = {}
    for key, value, kind in conn.execute(
        # a key that is no text (a BLOB spelled 'model') is none of brain_meta's, as the fast path reads it
        f"select cast(key as blob), cast(value as blob), typeof(value) from main.{META_TABLE} "
        f"where typeof(key) = 'text' and key in ({keys})"
    ):
        try:
            name = key.decode("utf-8")
        except (AttributeError, UnicodeDecodeError):
            continue
        meta[name] = value if value is None else value.decode("utf-8", "backslashreplace")
        if kind in ("integer", "real"):
            meta[name] = (int if kind == "integer" else float)(meta[name])
    return meta


def meta_lost():
    """The BrainError for a brain whose brain_meta plain SQL dropped or emptied, where
    the memories do not say which model made the vectors."""
    return BrainError(
        f"the brain has no {META_TABLE} table (or it records no model), and its memories do not all name one model "
        "installed here that makes vectors as wide as the stored ones: no repair can tell which model made them; "
        f"restore the file from a copy, or make {META_TABLE} (key, value) with SQL holding the model's id under "
        "'model' and run sqlite-utils brain check --repair"
    )


def recorded_model(conn):
    """The model id the brain records, or the configured default for a non-brain file.
    A brain whose model row plain SQL deleted or emptied records none: the default
    would embed queries with a model its vectors may not be of."""
    model = stored_meta(conn).get("model")
    if model is None or model == "":
        if not is_brain(conn):
            return configured_model()
        raise ModelError(
            "this brain records no model (brain_meta's model row is gone or empty): run sqlite-utils brain check DB "
            "(--repair restores the model its memories say they were embedded with, when they all name one)"
        )
    return model


def recorded_model_and_dimension(conn):
    return recorded_model(conn), int(stored_meta(conn)["dimension"])


def checked_dimension(conn):
    """The dimension check compares the vector tables' shapes with, before it reads
    brain_meta's values: the one vec_knowledge was made with (brain_meta's may be
    any text plain SQL wrote: check names it, and --repair makes it this one), else
    the recorded one when it is a whole number, else 1."""
    stored, recorded = vector_dimension(conn), stored_meta(conn).get("dimension")
    if stored:
        return stored
    return int(recorded) if isinstance(recorded, str) and re.fullmatch("[1-9][0-9]{0,3}", recorded) else 1


def check_width(conn, model_id):
    """Fail clearly (a ModelError, before anything is embedded or read) when
    `model_id` makes vectors of another width than the brain's stored ones
    (vec_knowledge's): plain SQL set brain_meta's model to another installed model.
    A model not installed here is refused as get_model refuses it."""
    stored = vector_dimension(conn)
    if stored is None:
        return
    try:
        width = model_dimension(model_id)
    except ModelRefused as ex:  # the brain names it, not the caller: a value to mend
        raise ModelError(
            f"{str(ex).split('. ')[0]}: this brain's model cannot be used; run sqlite-utils brain check"
        ) from ex
    if width != stored:
        raise other_width(model_id, width, stored)


# the brain_meta rows a brain has (another file's brain_meta table holds none of them)
META_KEYS = ("model", "dimension", "schema_version")
# knowledge columns only a brain has (m002 adds them): what tells its knowledge from another's
BRAIN_COLUMNS = frozenset(("scope", "relevance_tier", "embedding_model"))


def is_brain(conn: Connection) -> bool:
    """Whether the main database of `conn` is a brain: its knowledge table has the
    columns a brain gives it (m002) beside brain_instance or the record of
    migrations saying m002 ran, whatever plain SQL did to brain_meta since (check
    mends that from the memories); or, knowledge gone or rebuilt by a tool without
    them, brain_meta records one of its keys and that record says a brain was made
    there. Another app's knowledge (or a view of that name) or brain_meta, a table
    of a brain's columns alone, or a reference file still to adopt, is none."""
    asked = ("knowledge", migrations.migrations_table, INSTANCE_TABLE)
    tables = {
        name
        for (name,) in conn.execute(
            "select name from main.sqlite_master where type = 'table' and name in (?, ?, ?)", asked
        )
    }
    columns = (
        {row[0] for row in conn.execute("select name from pragma_table_info('knowledge', 'main')")}
        if "knowledge" in tables  # a table: a view of another app's is none
        else set()
    )
    made = migrations.migrations_table in tables and bool(
        conn.execute(
            f"select 1 from main.[{migrations.migrations_table}] where migration_set = ? "
            "and name = 'm002_brain_columns'",
            [migrations.name],
        ).fetchone()
    )
    if BRAIN_COLUMNS <= columns and (made or INSTANCE_TABLE in tables):
        return True
    return made and any(key in META_KEYS for key in stored_meta(conn))


def check_model(conn, model_id):
    """Fail clearly when `model_id` is not the model this brain was embedded with."""
    recorded, dimension = recorded_model_and_dimension(conn)
    if model_id == recorded:
        return
    other = model_dimension(model_id, fetch=True)  # the model asked for by name
    raise BrainError(
        f"this brain was embedded with {recorded!r} ({dimension} dimensions), not "
        f"{model_id!r} ({other} dimensions): recall with {recorded!r}, or run "
        f"`sqlite-utils brain reindex DB --model {model_id}` to re-embed everything"
    )


def migrate(conn: Connection, model_id: str | None = None) -> None:
    """Create or upgrade the brain schema on `conn`; `model_id` is used for a new
    brain. Every pending migration is applied in one write transaction. The common
    case, nothing to apply, takes no write lock and leaves the statements `conn`
    prepared as they are (every remember and ingest begins here). A brain whose
    record of migrations plain SQL emptied, while the schema they make is all
    there, has the record restored: applying them again would meet what they made."""
    brain = is_brain(conn)
    new = bool(model_id) and not brain
    if model_id and not new:
        check_model(conn, model_id)
    pending = migrations.pending(sqlite_utils.Database(conn, recursive_triggers=False, execute_plugins=False))
    if not brain and "m002_brain_columns" not in {migration.name for migration in pending}:
        raise meta_lost()  # made once, and gone since: a model recorded now could be another than its vectors'
    if not new and not pending:
        present = dict(conn.execute("select name, sql from main.sqlite_master where type = 'table'").fetchall())
        if not _all_there(present):  # no brain ready: check names them, --repair makes again those from knowledge
            lost = [table for table in missing_tables(conn) if table != META_TABLE]
            lost += [table for table in (IDS_TABLE, INSTANCE_TABLE) if table not in present]
            raise BrainError(f"the brain has no {', '.join(lost)} table: run sqlite-utils brain check")
        _recursive_triggers(conn)
        return
    db = sqlite_utils.Database(conn)
    # every migration pending on a brain: its record emptied (an older brain has some recorded)
    whole = not new and len(pending) == len(migrations._migrations) and is_brain(conn) and _schema_whole(conn)
    with atomic(conn):
        if new:
            ensure_meta(conn, model_id)
        if whole:
            _record_applied(conn, [migration.name for migration in pending])
            return
        try:
            migrations.apply(db)
        except (sqlite3.OperationalError, sqlite3.IntegrityError) as ex:  # tables of another shape than theirs
            raise BrainError(
                f"this file's tables are not those a brain's migrations build on ({ex}): it is no brain this "
                "version can make or migrate; restore the file from a copy, or ingest its sources into a new file"
            ) from ex


# the brain's own tables, each named by check when a tool or plain SQL dropped it (check
# names brain_instance and brain_ids apart); all but the first three it makes again
REQUIRED_TABLES = (
    "knowledge",
    "entities",
    "relationships",
    "documents",
    QUEUE_TABLE,
    CHANGES_TABLE,
    MENTION_NAMES_TABLE,
    MENTION_NAMES_SEEN_TABLE,
    "knowledge_fts",
    "knowledge_fts_vocab",
    "knowledge_fts_terms",
    "vec_knowledge",
    META_TABLE,
)
# the virtual tables whose modules keep their rows in tables of their own (shadow tables)
SHADOWED_TABLES = ("knowledge_fts", "vec_knowledge")


def _all_there(present):
    """Whether every table a brain has is among `present` ({name: its SQL}, one read
    of sqlite_master): the common case of every remember and ingest, told without
    missing_tables' shape checks, which name what is gone when this says something is."""
    # every shadow table, whatever missing_tables' shape checks would say of its virtual table
    # (their names are the dimension's; 1, as checked_dimension falls back to, without vectors)
    shadows = shadow_tables(dimension_of(present.get("vec_knowledge")) or 1).values()
    names = [*REQUIRED_TABLES, IDS_TABLE, INSTANCE_TABLE, *(name for names in shadows for name in names)]
    return all(name in present for name in names if name != META_TABLE)


def missing_tables(conn):
    """Those of REQUIRED_TABLES the brain on `conn` does not have, and the shadow
    tables of those it has (their virtual table fails without them, or reads as empty)."""
    present = {name for (name,) in conn.execute("select name from sqlite_master where type = 'table'")}
    missing = [table for table in REQUIRED_TABLES if table not in present]
    if META_TABLE in missing or not is_brain(conn):  # the vectors' dimension, which names their shadows, is unknown
        return missing
    dimension = checked_dimension(conn)
    shadows, reference = shadow_tables(dimension), reference_shapes(dimension)
    # a plain table under a virtual one's name has none of its own, and one of another shape
    # has others: damaged_tables names either, and it is made again whole
    return missing + [
        name
        for table in SHADOWED_TABLES
        if table in present and table_module(conn, table) and not _other_shape(conn, table, reference[table])
        for name in shadows[table]
        if name not in present
    ]


@functools.lru_cache
def shadow_tables(dimension: int) -> dict[str, dict[str, tuple[str, list[tuple[Any, ...]]]]]:
    """{virtual table: {shadow table: (its CREATE TABLE, its rows)}} as a new brain
    whose vectors have `dimension` has them, before any memory is written."""
    conn = open_connection(":memory:")
    try:
        create_vector_table(conn, dimension)
        conn.execute(_FTS_TABLE)
        rows = conn.execute(
            "select name, sql from sqlite_master where type = 'table' and sql not like 'CREATE VIRTUAL%'"
        ).fetchall()
        return {
            table: {
                name: (sql, conn.execute(f"select * from [{name}]").fetchall())
                for name, sql in rows
                if name.startswith(f"{table}_")
            }
            for table in SHADOWED_TABLES
        }
    finally:
        conn.close()


def reference_schema(model_id):
    """{(type, name): (the table it is on, its SQL)} of every table, index and
    trigger of a new brain of `model_id`, made in memory by every migration: what a
    brain's schema is."""
    conn = open_connection(":memory:")
    try:
        migrate(conn, model_id)
        rows = conn.execute("select type, name, tbl_name, sql from sqlite_master where sql is not null").fetchall()
    finally:
        conn.close()
    return {(kind, name): (table, sql) for kind, name, table, sql in rows}


def _schema_whole(conn):
    """Whether the brain on `conn` has every table (with its columns), index and
    trigger all migrations make."""
    try:
        reference = reference_schema(recorded_model(conn))
    except BrainError:  # a model not installed here: no reference to compare with
        return False
    present = {(kind, name): sql for kind, name, sql in conn.execute("select type, name, sql from sqlite_master")}
    # the record's own table and index, dropped with it, are made again with the record
    recorded = {key for key, (table, _) in reference.items() if table == migrations.migrations_table}
    # vectors.index_vector_places's index may have another name (a reindex's): check names it missing
    places = {key for key, (table, _) in reference.items() if key[0] == "index" and table.endswith("_rowids")}
    if set(reference) - set(present) - recorded - places:
        return False
    if any(same_sql(present[key]) != same_sql(sql) for key, (_, sql) in reference.items() if key[0] == "trigger"):
        return False  # an earlier version's trigger: its migrations are to apply
    columns = {}
    for kind, name in reference:
        if kind == "table":
            columns[name] = {row[1] for row in conn.execute(f"pragma table_info([{name}])")}
    fresh = open_connection(":memory:")
    try:
        for (kind, name), (_, sql) in reference.items():
            if kind == "table" and (kind, name) not in recorded and not name.startswith((*DERIVED_PREFIXES, "sqlite_")):
                fresh.execute(sql)
                if not {row[1] for row in fresh.execute(f"pragma table_info([{name}])")} <= columns[name]:
                    return False
    finally:
        fresh.close()
    return True


def same_sql(sql):
    """SQL as compared: spacing and IF NOT EXISTS aside."""
    return " ".join((sql or "").replace("IF NOT EXISTS ", "").split()).lower()


def _record_applied(conn, names):
    """Record migrations `names` as applied, in sqlite-utils' own table."""
    table = migrations.migrations_table
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS [{table}] (id INTEGER PRIMARY KEY, migration_set TEXT, name TEXT, applied_at TEXT)"
    )
    conn.execute(
        f"CREATE UNIQUE INDEX IF NOT EXISTS [idx_{table}_migration_set_name] ON [{table}] (migration_set, name)"
    )
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(" ")
    conn.executemany(
        f"INSERT OR IGNORE INTO [{table}] (migration_set, name, applied_at) VALUES (?, ?, ?)",
        [(migrations.name, name, now) for name in names],
    )


def _recursive_triggers(conn):
    """Recursive triggers on, as sqlite-utils' Database leaves a connection it is
    given, so the brain is always written with them (a REPLACE fires the delete
    triggers of the row it replaces: the change log records it); set only when
    off, as setting it expires every statement the connection prepared."""
    if not conn.execute("pragma recursive_triggers").fetchone()[0]:
        conn.execute("pragma recursive_triggers = on")


def pending_migrations(conn: Connection) -> list[str]:
    """Names of the migrations not applied to the brain on `conn` yet."""
    return [m.name for m in migrations.pending(sqlite_utils.Database(conn))]


def info(conn: Connection) -> dict[str, Any]:
    """What the brain records about itself: model, dimension and schema version
    (a ModelError saying to run check when it records no model)."""
    meta = stored_meta(conn)
    return {
        "model": recorded_model(conn) if is_brain(conn) else None,
        "dimension": int(meta["dimension"]) if meta.get("dimension") else None,
        "schema_version": int(meta["schema_version"]) if meta.get("schema_version") else None,
    }


def fts_varints(blob):
    """The whole numbers of one of FTS5's records (a docsize, the averages): SQLite
    varints, seven bits a byte, most significant first; None for what is none."""
    if not isinstance(blob, bytes) or not blob or blob[-1] & 0x80:
        return None
    values, value = [], 0
    for byte in blob:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            values.append(value)
            value = 0
    return values


def fts_length(size_blob):
    """The tokens of a row across its columns, from its FTS5 docsize record (a
    varint per column of knowledge_fts): the length FTS5's bm25 takes for it; None
    for what is no such record."""
    values = fts_varints(size_blob)
    return sum(values) if values is not None and len(values) == len(FTS_INDEXED) else None


def fts_damaged(what):
    """The BrainError for a full-text index plain SQL damaged (`what` says how)."""
    return BrainError(f"the full-text index is damaged ({what}): run sqlite-utils brain check")


def fts_lengths(ids, sizes):
    """Each row's length in tokens (fts_length), its docsize record read beside its
    id. A row without one, or with one that is no record of a length per column
    (plain SQL on knowledge_fts: 'delete-all', its docsize rows deleted or rewritten),
    is fts_damaged's BrainError: BM25 divides by their mean."""
    lengths = [fts_length(size) for size in sizes]
    if None in lengths:
        at = lengths.index(None)
        held = "no row" if sizes[at] is None else f"{sizes[at]!r:.40}, no length per column,"
        raise fts_damaged(f"knowledge_fts_docsize holds {held} for memory {ids[at]}")
    return lengths


# the tables a brain's stated rows are in: what they hold is stated nowhere else (a record's
# entities and relations; the model its vectors were made with), so no repair makes them again
STATED_TABLES = ("knowledge", "entities", "relationships", META_TABLE)


@functools.lru_cache
def reference_shapes(dimension: int) -> dict[str, tuple[str | None, dict[str, tuple[type, int, bool]]]]:
    """{table: (its virtual table's module or None, {column: (affinity, position in the
    primary key or 0, whether it must be given)})} of every table a new brain whose
    vectors have `dimension` has, its full-text and vector tables' own among them:
    made in memory by every migration, so the shape a brain's tables should have is
    the schema's own (SQLite's own tables aside)."""
    conn = open_connection(":memory:")
    try:
        conn.execute(f"CREATE TABLE {META_TABLE} (key TEXT PRIMARY KEY, value TEXT)")
        conn.executemany(  # no model is loaded or fetched: no memory is embedded
            f"INSERT INTO {META_TABLE} VALUES (?, ?)",
            [("model", "reference"), ("dimension", str(dimension)), ("schema_version", str(SCHEMA_VERSION))],
        )
        with atomic(conn):
            migrations.apply(sqlite_utils.Database(conn))
        names = _ids_of(conn, "select name from sqlite_master where type = 'table'")
        return {name: shape for name in names if not name.startswith("sqlite_") for shape in [_shape(conn, name)]}
    finally:
        conn.close()


def _ids_of(conn, sql):
    return [row[0] for row in conn.execute(sql)]


def table_module(conn, table):
    """The module of virtual table `table` (fts5, vec0), or None for a plain table."""
    row = conn.execute("select sql from main.sqlite_master where type = 'table' and name = ?", [table]).fetchone()
    found = re.match(r"\s*CREATE\s+VIRTUAL\s+TABLE\b.*?\bUSING\s+(\w+)", (row[0] or "") if row else "", re.I | re.S)
    return found.group(1).lower() if found else None


def _shape(conn, table):
    """`table`'s (module, {column: (affinity, primary key position, required)}) as
    reference_shapes has them; SQLite's error for a virtual table its module cannot
    open (one of its own tables gone, of another shape, or holding what it cannot read)."""
    rows = conn.execute(f"pragma main.table_xinfo([{table}])").fetchall()
    columns = {
        name: (sqlite_utils.utils.column_affinity(kind or ""), pk, bool(notnull) and default is None and not pk)
        for _, name, kind, notnull, default, pk, hidden in rows
        if not hidden
    }
    return table_module(conn, table), columns


def damaged_tables(conn):
    """{table: [what is wrong]} for the brain's own tables, its full-text and vector
    tables' own among them, compared with the shape reference_shapes says they have:
    a tool that rebuilt a table (`sqlite-utils transform --rename/--drop/--type`), or
    plain SQL that dropped one and made another under its name, leaves it without
    columns the brain reads, with another type where vec0 and the keys need integers,
    another primary key, a column every write would have to fill, or a plain table
    for a virtual one. Read by check only: nothing on the way of a recall."""
    reference = reference_shapes(checked_dimension(conn))
    present = set(_ids_of(conn, "select name from main.sqlite_master where type = 'table'"))
    damaged, unopened = {}, {}
    for table in sorted(present & set(reference)):
        try:
            found = _shape(conn, table)
        except sqlite3.DatabaseError as ex:
            unopened[table] = f"cannot be opened ({ex})"
            continue
        problems = _differences(reference[table], found)
        if problems:
            damaged[table] = problems
    # a virtual table its module cannot open: named unless one of its own, named already, is why
    for table, error in unopened.items():
        if not any(name.startswith(f"{table}_") for name in damaged):
            damaged[table] = [error]
    return damaged


def _other_shape(conn, table, expected):
    """Whether `table` opens with another shape than `expected` (one that cannot be
    opened may lack one of its own tables: it has no shape to tell)."""
    try:
        return bool(_differences(expected, _shape(conn, table)))
    except sqlite3.DatabaseError:
        return False


def _differences(expected, found):
    """What differs between two of _shape's shapes, in words."""
    (module, columns), (found_module, found_columns) = expected, found
    if module != found_module:
        said = {None: "a plain table"}
        return [
            f"{said.get(found_module, f'a virtual table using {found_module}')}, "
            f"not {said.get(module, f'a virtual table using {module}')}"
        ]
    problems = [f"no column {name}" for name in sorted(set(columns) - set(found_columns))]
    problems += [
        f"column {name} holds {found_columns[name][0].__name__}, not {kind.__name__}"
        for name, (kind, _, _) in sorted(columns.items())
        if name in found_columns and found_columns[name][0] is not kind
    ]
    key = [name for name, (_, pk, _) in sorted(columns.items(), key=lambda item: item[1][1]) if pk]
    found_key = [name for name, (_, pk, _) in sorted(found_columns.items(), key=lambda item: item[1][1]) if pk]
    if key != found_key and not set(key) - set(found_columns):
        problems.append(f"primary key ({', '.join(found_key)}), not ({', '.join(key)})")
    problems += [
        f"column {name} is no column of the brain's and must be given: nothing the brain writes gives it"
        for name in sorted(set(found_columns) - set(columns))
        if found_columns[name][2]
    ]
    return problems


def hold_ids(value):
    """The documents a hold's brain_meta value (read as a BLOB) names, a JSON list or
    {"early": list} (a records file held as a run went: pipeline._hold_replaced), or
    None for a value in another shape (text that is not UTF-8 among them: review 135)."""
    return _hold_value(value)[0]


def _hold_value(value):
    """(hold_ids(value), whether it is a hold written as a run went)."""
    try:
        found = json.loads(value.decode("utf-8") if isinstance(value, bytes) else value)
    except (TypeError, ValueError):
        return None, False
    early = isinstance(found, dict) and set(found) == {"early"}
    return _ids(found["early"] if early else found), early


def early_value(ids):
    """The brain_meta value of a hold a run made as it went, before its end (hold_ids)."""
    return json.dumps({"early": sorted(ids)})


def _ids(ids):
    return frozenset(ids) if isinstance(ids, list) and all(isinstance(i, str) for i in ids) else None


class Holds(NamedTuple):
    """What brain_meta holds under one kind of hold (holds())."""

    rows: dict  # {name: documents} of the rows `KIND:name`
    whole: dict  # {name: documents} of the one row `KIND`, which versions before 7 December 2026 read alone
    unreadable: list  # the keys of rows that are, or hold entries, in another shape: those hold nothing
    early: set  # the names of rows a run wrote as it went ({"early": ids})
    doubtful: set | None  # names the one row holds in another shape; None: all (it is one, or none is readable)


def holds(conn, key):
    """The holds brain_meta keeps under `key` (PRUNE_HELD_KEY, FILE_HELD_KEY)."""
    rows, whole, unreadable, early, doubtful = {}, {}, [], set(), set()
    for row_key, value in conn.execute(
        f"select cast(key as blob), cast(value as blob) from {META_TABLE} "
        "where key = ? or (key >= ? and key < ?) order by key",
        [key, key + ":", key + ";"],
    ):
        row_key = row_key.decode("utf-8", "backslashreplace")  # a key not UTF-8: check's own invalid-key check
        if row_key != key:
            name = row_key[len(key) + 1 :]
            ids, was_early = _hold_value(value)
            found, into = {name: ids}, rows
            if was_early:
                early.add(name)
        else:
            try:
                every = json.loads(value.decode("utf-8")) if value is not None else None
            except (TypeError, ValueError):
                every = None
            found = {n: _ids(ids) for n, ids in every.items()} if isinstance(every, dict) else {}
            doubtful = {n for n, ids in found.items() if ids is None} if isinstance(every, dict) else None
            into = whole
        if None in found.values() or (row_key == key and doubtful is None):
            unreadable.append(row_key)
        into.update((name, ids) for name, ids in found.items() if ids is not None)
    return Holds(rows, whole, unreadable, early, doubtful)


def all_held(held):
    """{name: documents} of every hold `held` (a Holds) reads. The one row of them all
    is what versions before 7 December 2026 read and write alone: a row it does not
    name was ended by one of them (review 137), and a row it names otherwise was held
    again by one (review 138), so its entry is the hold; but a row it cannot speak
    for (its entry spoilt, or itself) holds, and so does one a run wrote as it went."""
    every = dict(held.whole)
    for name, ids in held.rows.items():
        if name in held.early or held.doubtful is None or name in held.doubtful:
            every[name] = every.get(name, frozenset()) | ids
    return every


def write_whole(conn, key, held):
    """Write holds()'s one row `key` holding `held` ({name: documents}), or none for none."""
    if held:
        value = json.dumps({name: sorted(ids) for name, ids in sorted(held.items())})
        conn.execute(f"insert or replace into {META_TABLE} (key, value) values (?, ?)", [key, value])
    else:
        conn.execute(f"delete from {META_TABLE} where key = ?", [key])


def mend_holds(conn, unreadable):
    """Remove the `unreadable` rows `KIND:name` (holds()), and write a kind's one row
    `KIND` again with what it and the rows hold readably: one bad entry of it is no
    reason to lose the holds beside it, which versions before 7 December 2026 kept
    there alone (review 135)."""
    for key in (PRUNE_HELD_KEY, FILE_HELD_KEY):
        held = holds(conn, key)
        conn.executemany(
            f"delete from {META_TABLE} where key = ?", [(k,) for k in unreadable if k.startswith(key + ":")]
        )
        if key in unreadable:
            write_whole(conn, key, all_held(held))
