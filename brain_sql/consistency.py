"""Consistency of a brain: every derived structure agrees with `knowledge`.

`check` finds what disagrees — the SQLite file itself, values of the wrong kind
(values.py), the full-text index, the vectors and their filter columns, edges
whose ends are gone, documents left without their chunks, vectors from another
model, unfinished mention work, quotes of turns that changed and turns' own
lines (speaker, day) that no longer say what their turn does — and
`check(conn, repair=True)` mends each from `knowledge`, which is the truth.
"""

import json
import re
from functools import partial
from typing import Any

from . import conversation, mentions, validity, values
from . import state as read_state
from .config import MAX_ID_CHARS, MAX_METADATA_BYTES, MAX_PATH_CHARS, MAX_TITLE_CHARS
from .connection import Connection, atomic, cannot_write, main_file, sqlite3
from .copies import is_copy, remake_advice
from .document import IngestError, title_refusal
from .errors import BrainError, ReadOnlyBrain
from .fields import entity_key
from .records import record_document
from .schema import (
    CHANGES_TABLE,
    FILE_HELD_KEY,
    IDS_TABLE,
    INSTANCE_TABLE,
    META_TABLE,
    PRUNE_HELD_KEY,
    REQUIRED_TABLES,
    SHADOWED_TABLES,
    STATED_TABLES,
    damaged_tables,
    drop_reindex_leftovers,
    ensure_meta,
    expected_triggers,
    highest_given,
    holds,
    lower_marks,
    marks_past_bound,
    mend_holds,
    meta_lost,
    migrate,
    migrations,
    missing_tables,
    page_indexes,
    pending_migrations,
    recorded_model,
    recorded_model_and_dimension,
    reference_schema,
    reindex_leftovers,
    renew_instance,
    restore_id_mark,
    same_sql,
    shadow_tables,
)
from .vectors import (
    PLACES_INDEX,
    VEC_METADATA,
    backfill_vectors,
    create_vector_table,
    index_vector_places,
    places_index,
    vec_metadata_values,
    vector_dimension,
)
from .wording import shown
from .writer import FIELD_COLUMNS, edited, record_head, restate, rewrite_contexts


def _ids(conn, sql, params=()):
    return [row[0] for row in conn.execute(sql, params)]


def _fts_consistent(conn):
    """FTS5's integrity-check against the content table; a read-only file cannot
    run it (it is an INSERT), so there the index is checked to hold every row and
    no other."""
    try:
        conn.execute("insert into knowledge_fts(knowledge_fts, rank) values ('integrity-check', 1)")
        return True
    except sqlite3.OperationalError as ex:
        if not cannot_write(ex):
            return False
    except sqlite3.DatabaseError:
        return False
    return not conn.execute(
        "select exists (select id from knowledge except select id from knowledge_fts_docsize) "
        "or exists (select id from knowledge_fts_docsize except select id from knowledge)"
    ).fetchone()[0]


def _stale_filters(conn):
    """Ids whose vec0 filter columns differ from what their knowledge row says."""
    columns = ", ".join(f"v.[{name}]" for name in VEC_METADATA)
    return _ids(
        conn,
        f"select k.id from knowledge k join vec_knowledge v on v.knowledge_id = k.id "
        f"where ({columns}) is not ({vec_metadata_values('k')})",
    )


def check(conn: Connection, repair: bool = False) -> dict[str, Any]:
    """{problem: [ids or details]} for every inconsistency found; with `repair`,
    each is mended in one transaction, the brain is checked again, and the result
    says what was found and, under "unrepaired" ({problem: [ids or details]}), what
    is still there: a repair never claims what it did not reach."""
    try:
        problems = _check(conn, repair)
    except ReadOnlyBrain as ex:  # a replica's copy: made again, not mended (said only here, where it helps)
        if not is_copy(main_file(conn)):
            raise
        raise ReadOnlyBrain(f"{ex}; {remake_advice(main_file(conn))}") from ex
    if repair and problems:
        left = _check(conn)
        if left:
            problems["unrepaired"] = left
    return problems


# past this many characters of a memory's metadata, tags, _id and fields together, what ingest
# counts of them may pass MAX_METADATA_BYTES: it counts no more than 4/3 of what they store
# (a tag's quotes and separator), and 12 times what a plain-SQL value stores unescaped; or past
# the limits of an _id, a title or a source path on their own
_OVERSIZED_FROM = MAX_METADATA_BYTES // 12
_STATED = ("metadata", "tags", "external_id", *FIELD_COLUMNS)


def _oversized(conn):
    """The records whose export ingest refuses for its size, each named by its first
    memory (and `_id`) with ingest's reason: judged by records.record_document, as an
    export of the record states it (its first memory's fields, tags, metadata, `_id`,
    title and place). An older version counted metadata's characters, not the \\u
    escapes JSON stores them as (review 152), and plain SQL writes any size."""
    lengths = " + ".join(f"length(coalesce([{column}], ''))" for column in _STATED)
    suspects = conn.execute(
        f"select id, document_id from knowledge where {lengths} > ? or length(title) > ? "
        "or length(external_id) > ? or length(source_path) > ?",
        [_OVERSIZED_FROM, MAX_TITLE_CHARS, MAX_ID_CHARS, MAX_PATH_CHARS],
    ).fetchall()
    firsts = sorted(
        {memory_id for memory_id, document_id in suspects if document_id in (None, "")}  # a record each
        | {
            conn.execute(
                "select id from knowledge where document_id = ? order by chunk_index, id limit 1", [document_id]
            ).fetchone()[0]
            for document_id in {document_id for _, document_id in suspects if document_id not in (None, "")}
        }
    )
    found = []
    for memory_id in firsts:
        cursor = conn.execute("select * from knowledge where id = ?", [memory_id])
        row = dict(zip([c[0] for c in cursor.description], cursor.fetchone()))
        refused = record_document("export", {**record_head(row), "_chunks": [{"content": row["content"]}]}, None)
        why = refused.message if isinstance(refused, IngestError) else title_refusal(row["title"])
        if why:
            named = f" (_id {shown(row['external_id'])})" if row["external_id"] not in (None, "") else ""
            found.append(f"memory {memory_id}{named}: {why}")
    return found


def _check(conn, repair=False):
    problems = {}
    try:
        integrity = [row[0] for row in conn.execute("pragma integrity_check")]
    except sqlite3.DatabaseError as ex:  # damaged past checking, unless a shadow table gone or misshapen is why
        if not _own_tables_broken(conn):
            return {"integrity": [str(ex)]}
        integrity = [str(ex)]
    if integrity != ["ok"]:
        problems["integrity"] = integrity  # not repairable here: restore from a copy
    unfinished = _unfinished_schema(conn, problems, repair)
    if unfinished is not None:
        return unfinished
    damaged = _misshapen(conn, problems, repair)
    if damaged is not None:
        return damaged
    wrong = values.invalid(conn)
    if wrong:
        # the checks below read these values (their text, their numbers): they are
        # mended first, in the same transaction as the rest, or the repair refuses
        problems["invalid_values"] = [str(item) for item in wrong]
        if not repair:
            return problems
        with atomic(conn):
            values.mend(conn, wrong)
            return {**problems, **_check(conn, repair=True)}
    model_id = recorded_model(conn)
    present = dict(conn.execute("select name, sql from sqlite_master where type = 'trigger'").fetchall())
    # SQLite's names are the same in any case: IDX_KNOWLEDGE_CLASS is idx_knowledge_class
    indexes = {
        name.lower(): sql for name, sql in conn.execute("select name, sql from sqlite_master where type = 'index'")
    }
    expected = expected_triggers()
    vector_ids = set(_ids(conn, "select knowledge_id from vec_knowledge"))
    knowledge_ids = set(_ids(conn, "select id from knowledge"))
    found = {
        # a table rebuilt by a tool (`sqlite-utils transform`) loses its triggers, and
        # with them the full text, the vectors and the change log stop following it
        "missing_triggers": [name for name in expected if name not in present],
        "altered_triggers": [
            name for name in expected if name in present and same_sql(present[name]) != same_sql(expected[name])
        ],
        # ... and indexes: the pages people browse, and each turn written, would read every memory again
        "missing_indexes": sorted(set(page_indexes()) - set(indexes)) + ([] if places_index(conn) else [PLACES_INDEX]),
        "altered_indexes": sorted(
            name for name, sql in page_indexes().items() if name in indexes and same_sql(indexes[name]) != same_sql(sql)
        ),
        # readers tell this brain from another copied over its file by its one instance id
        "instance_id": _instance(conn),
        "fts_out_of_sync": [] if _fts_consistent(conn) else ["knowledge_fts"],
        "missing_vectors": sorted(knowledge_ids - vector_ids),
        "orphan_vectors": sorted(vector_ids - knowledge_ids),
        "stale_vector_filters": _stale_filters(conn),
        "other_model_vectors": _ids(
            conn, "select id from knowledge where embedding_model is not null and embedding_model != ?", (model_id,)
        ),
        "dangling_edges": _ids(
            conn,
            "select r.id from relationships r where r.from_entity_id not in (select id from entities) "
            "or r.to_entity_id not in (select id from entities) "
            "or (r.knowledge_id is not null and r.knowledge_id not in (select id from knowledge))",
        ),
        # chunks plain SQL moved off their document (to an id no document has, or NULL) while
        # documents of their file remain: no prune removes them, and an ingest stores them again
        "detached_memories": [
            f"knowledge {i} document_id {document_id!r:.60}" for i, document_id in _detached(conn).items()
        ],
        "incomplete_documents": _ids(
            conn,
            "select document_id from documents d "
            "where chunks != (select count(*) from knowledge k where k.document_id = d.document_id)",
        ),
        "pending_mentions": _ids(conn, f"select id from {mentions.QUEUE_TABLE}"),
        # entities whose names the name index holds otherwise (emptied or edited by plain SQL):
        # mentions of them in new text would go unfound
        "stale_name_index": mentions.stale_names(conn),
        # the id mark set back, emptied or dropped by plain SQL, or ids written while its
        # trigger was gone: a forgotten memory's id could be given again
        "id_mark_behind": _id_mark(conn),
        # ... or set past config.MAX_ID by a row plain SQL wrote there before the brain's rules refused
        # one: every new id would be refused
        "id_marks_past_bound": [f"{where} {table}: {mark}" for (where, table), mark in marks_past_bound(conn).items()],
        # earlier versions whose record's current version is gone (deleted by plain SQL)
        "orphan_versions": _ids(
            conn,
            "select distinct version_of from knowledge where version_of is not null "
            "and version_of not in (select document_id from knowledge where document_id is not null)",
        ),
        # earlier versions of a record that is itself an earlier version, or of themselves: out of recall
        # with no current version; not repaired, as which version is current is the user's to say
        "nested_versions": _ids(  # two searches of the version_of index: history rows are few
            conn,
            "select document_id from knowledge where version_of in "
            "(select document_id from knowledge where version_of > '') "
            "union select document_id from knowledge where version_of > '' and version_of = document_id",
        ),
        "stale_supersession": sorted(validity.stale(conn)),
        # _ids that supersede one another (written with plain SQL): each hides the next from recall; not
        # repaired, as which of them to correct is the user's to say
        "supersede_cycles": validity.cycles(conn),
        # turns whose contexts quote a turn flagged, changed, deleted or moved with plain SQL
        "stale_quotes": sorted(conversation.stale_quotes(conn)),
        # ... or begin with a speaker, day or time phrases plain SQL changed under them
        "stale_own_lines": sorted(conversation.stale_own_lines(conn)),
        # what a reindex killed before its clean-up left: as large as the vectors
        "reindex_leftovers": reindex_leftovers(conn),
        # entities named alike (composed and decomposed, a non-breaking space, a tab: one
        # fields.entity_key), made apart before names were keyed so, or by plain SQL
        "look_alike_entities": [
            # each name with its code points shown (\u0301, \u00a0): the ones that tell them apart
            "entities " + ", ".join(f"{i} {json.dumps(name)}" for i, name in group)
            for group in look_alike_entities(conn)
        ],
        # what ingest holds back (a folder or records file it refused to prune) in a shape plain SQL
        # wrote: it holds nothing, and the next ingest judges that folder or file afresh; repaired by
        # removal, the one row of all holds written again with what it holds readably (mend_holds)
        "unreadable_holds": [key for kind in (PRUNE_HELD_KEY, FILE_HELD_KEY) for key in holds(conn, kind).unreadable],
        # records an older version stored with more fields and metadata than ingest takes now: their export
        # is refused when ingested again; not repaired, as what to leave out is the user's to say
        "oversized_records": _oversized(conn),
    }
    problems.update({name: items for name, items in found.items() if items})
    if repair and problems:
        _repair(conn, problems, model_id)
    # the read state's snapshot (derived, beside the file): checked once the brain is whole
    dimension = recorded_model_and_dimension(conn)[1]
    try:
        snapshot = read_state.snapshot_problem(conn, dimension)
    except BrainError:  # no state builds from the brain as it is: what check named above is why
        if not problems:
            raise
        snapshot = None
    if snapshot:
        problems["stale_snapshot"] = [snapshot]
        if repair:
            refused = read_state.rewrite_snapshot(conn, dimension)
            if refused:
                problems["stale_snapshot"].append(refused)
    return problems


def _remake(conn, missing, misshapen=()):
    """Make the dropped tables `missing` again as a new brain has them, and the derived
    tables `misshapen` (of another shape, damaged_tables) once dropped, with their
    indexes, and what they hold from knowledge: the full text rebuilt, the vectors
    (backfilled by the repair that follows), each document's row (its hash
    forgotten: the next ingest writes it whole again), and a change log that tells
    readers to rebuild; the mention work and names index start again empty. A
    full-text or vector table missing one of its shadow tables is made again whole.
    Refused, changing nothing, for a table only a copy holds."""
    lost = [table for table in missing if table in STATED_TABLES and table != META_TABLE]
    if lost:
        raise BrainError(
            f"the brain has no {', '.join(lost)} table: what it held is stated nowhere else, so no repair can make "
            "it again; restore the file from a copy, or ingest its sources into a new brain"
        )
    if META_TABLE in missing:
        _restore_meta(conn)
        missing = [table for table in missing if table != META_TABLE]
    model_id, dimension = recorded_model_and_dimension(conn)
    if misshapen:
        _drop_misshapen(conn, misshapen, shadow_tables(dimension))
        missing = missing_tables(conn)
    reference = reference_schema(model_id)
    tables = [table for table in missing if table in REQUIRED_TABLES]
    for table, shadows in shadow_tables(dimension).items():
        gone = [name for name in missing if name in shadows]
        if not gone:
            continue
        # its module cannot drop the table without them: made again as a new one has them, then dropped whole
        for name in gone:
            sql, rows = shadows[name]
            conn.execute(sql)
            if rows:
                conn.executemany(f"insert into [{name}] values ({', '.join('?' * len(rows[0]))})", rows)
        conn.execute(f"DROP TABLE [{table}]")
        tables.append(table)
    for table in tables:
        if table == "vec_knowledge":
            create_vector_table(conn, dimension)
            continue
        conn.execute(reference[("table", table)][1])
        for (kind, _), (on, sql) in reference.items():
            if kind == "index" and on == table:
                conn.execute(sql)
    if "knowledge_fts" in tables:
        conn.execute("insert into knowledge_fts(knowledge_fts) values ('rebuild')")
    if "documents" in missing:
        _documents_from_chunks(conn)
    conn.execute(f"INSERT INTO {CHANGES_TABLE} (kind, key, stamp) VALUES ('all', 0, random())")


_DOCUMENTS_OF_CHUNKS = """
select k.document_id, k.title, k.source_path,
  (select count(*) from knowledge c where c.document_id = k.document_id)
from knowledge k
where k.document_id is not null
  and k.id = (select min(f.id) from knowledge f where f.document_id = k.document_id)
  and (:only is null or k.document_id in (select value from json_each(:only)))
  and not exists (select 1 from documents d where d.document_id = k.document_id)
"""


def _documents_from_chunks(conn, only=None):
    """A `documents` row made again for each document_id of chunks that none has (of
    `only`, a list, when given): its first chunk's title and file, its chunks counted.
    Nothing it held is lost: the next ingest of its file writes it whole again."""
    for document_id, title, source_path, chunks in conn.execute(
        _DOCUMENTS_OF_CHUNKS, {"only": None if only is None else json.dumps(only)}
    ).fetchall():
        # the entity a title names, as the writer names it (look-alike titles are one entity)
        entity = (
            conn.execute("select id from entities where name = ?", [entity_key(title)]).fetchone()
            if isinstance(title, str)
            else None
        )
        conn.execute(
            "insert into documents (document_id, title, source_path, entity_id, chunks) values (?, ?, ?, ?, ?)",
            [document_id, title, source_path, entity[0] if entity else None, chunks],
        )


def _restore_meta(conn):
    """brain_meta made again, recording the model every memory names as the one it was
    embedded with (installed here, making vectors as wide as the stored ones);
    meta_lost where they name no such one model."""
    found = values.embedded_with(conn, vector_dimension(conn))
    if found is None:
        raise meta_lost()
    ensure_meta(conn, found[1])


def _drop_misshapen(conn, misshapen, shadows):
    """Drop the derived tables `misshapen`, for _remake to make again as dropped ones:
    a full-text or vector table of another shape goes with its own tables (its module
    drops them) and with whatever tables of a brain's own are left under their names
    (a plain table under its name has none); one its module cannot open loses its own
    tables, and is then made whole and dropped as one missing them."""
    for name in misshapen:
        if name not in SHADOWED_TABLES:
            conn.execute(f"DROP TABLE [{name}]")
    for table in SHADOWED_TABLES:
        if table not in misshapen:
            continue
        try:
            conn.execute(f"DROP TABLE [{table}]")  # a virtual table's module drops its own with it
        except sqlite3.DatabaseError:  # its module cannot open it: its own go, and _remake makes it whole
            pass
        present = {row[0] for row in conn.execute("select name from sqlite_master where type = 'table'")}
        for name in present.intersection(shadows[table]):  # those of the brain's it did not have, or all
            conn.execute(f"DROP TABLE [{name}]")


def _own_tables_broken(conn):
    """Whether a full-text or vector table's own tables are gone (a table missing_tables
    names) or of another shape (one damaged_tables names that a repair makes again):
    either fails the integrity check, which is run again once they are whole."""
    try:
        return any(table not in REQUIRED_TABLES for table in missing_tables(conn)) or any(
            table not in STATED_TABLES for table in damaged_tables(conn)
        )
    except sqlite3.DatabaseError:
        return False


def _misshapen(conn, problems, repair):
    """check's answer for a brain with tables of another shape than its schema makes
    them (damaged_tables): nothing past here reads them; with `repair`, those derived
    from knowledge are made again (in one transaction with the rest of the repair),
    and while one holding stated rows is among them nothing is changed, as only a
    copy restores it. None for a brain whose tables all have their shape."""
    damaged = damaged_tables(conn)
    if not damaged:
        return None
    problems["damaged_tables"] = [f"{table}: {'; '.join(found)}" for table, found in damaged.items()]
    if any(table not in STATED_TABLES for table in damaged):
        problems.pop("integrity", None)  # what it says is checked again once they are made again
    if not repair or any(table in STATED_TABLES for table in damaged):
        return problems
    with atomic(conn):
        _remake(conn, missing_tables(conn), misshapen=list(damaged))
        return {**problems, **_check(conn, repair=True)}


def _unfinished_schema(conn, problems, repair):
    """check's answer for a brain whose schema is not whole (migrations pending, a
    table dropped): nothing else can be checked before it is, and with `repair` it
    is made whole first; None for a whole one."""
    record = damaged_tables(conn).get(migrations.migrations_table)
    if record:
        # the record of migrations made again under its name with other columns: dropped, it is
        # restored as a dropped one is (the schema it records is all there) or its migrations run
        problems["damaged_tables"] = [f"{migrations.migrations_table}: {'; '.join(record)}"]
        if not repair:
            return problems
        with atomic(conn):
            conn.execute(f"DROP TABLE [{migrations.migrations_table}]")
            return {**problems, **_check(conn, repair=True)}
    pending = pending_migrations(conn)
    if pending:
        # an interrupted first ingest, or an older brain, leaves the schema part-built
        # (columns a later migration adds are missing, not damaged); every
        # migration is atomic, so finishing them is all the repair it needs
        problems["pending_migrations"] = pending
        if not repair:
            return problems
        with atomic(conn):
            if META_TABLE in missing_tables(conn):  # dropped with the record: the memories say its model
                _restore_meta(conn)
            migrate(conn)
            return {**problems, **_check(conn, repair=True)}
    missing = missing_tables(conn)
    if missing:
        # a table a tool or plain SQL dropped: nothing past here reads without it; each is
        # made again (its content from knowledge) in one transaction with the rest of the repair
        problems["missing_tables"] = missing
        # a shadow table gone fails the integrity check: the file is checked once its tables are whole
        if any(table not in REQUIRED_TABLES for table in missing):
            problems.pop("integrity", None)
        if not repair:
            return problems
        with atomic(conn):
            _remake(conn, missing)
            return {**problems, **_check(conn, repair=True)}
    return None


def _instance(conn):
    """What is wrong with brain_instance, which holds the brain's one instance id."""
    try:
        ids = _ids(conn, f"select instance from {INSTANCE_TABLE}")
    except sqlite3.OperationalError:  # dropped
        return [f"no {INSTANCE_TABLE} table"]
    if len(ids) != 1:
        return [f"{INSTANCE_TABLE} holds {len(ids)} rows, not one"]
    return [] if isinstance(ids[0], str) and ids[0] else [f"{INSTANCE_TABLE} holds {ids[0]!r:.60}, not an id (text)"]


def _id_mark(conn):
    """What is wrong with the id mark (brain_ids), which keeps every memory id ever
    given from being given again: the highest id given when the mark is below it,
    else what it holds that is no mark."""
    given = highest_given(conn, "knowledge")
    try:
        marks = _ids(conn, f"select seq from {IDS_TABLE} where name = 'knowledge'")
    except sqlite3.OperationalError:  # dropped
        return [f"no {IDS_TABLE} table"]
    if marks and not isinstance(marks[0], int):
        return [f"{IDS_TABLE} holds {marks[0]!r:.60}, not a memory id"]
    return [given] if given > (marks[0] if marks else 0) else []


# a document "of its file": one of its source_path, or, remembered (no file), its record's
_OF_ITS_FILE = (
    "(f.source_path = k.source_path or (k.source_path is null and f.document_id = 'remember#' || k.external_id))"
)
_DETACHED = f"""
select k.id, k.document_id from knowledge k left join documents d on d.document_id = k.document_id
where d.document_id is null
  and (exists (select 1 from documents f where {_OF_ITS_FILE})
    or (k.source_path is null and k.document_id like 'remember#%'))  -- a remembered memory's: the brain's own
"""
# the documents of chunk :id's file it may be of: missing a chunk, none of its index, and
# none of another record (external_id)
_OWNERS = f"""
select f.document_id from knowledge k join documents f on {_OF_ITS_FILE}
where k.id = :id
  and (k.external_id is null or f.document_id = coalesce(k.source_path, 'remember') || '#' || k.external_id)
  and (k.external_id is not null or f.title = k.title)
  and f.chunks > (select count(*) from knowledge c where c.document_id = f.document_id)
  and not exists (select 1 from knowledge c where c.document_id = f.document_id
    and (c.chunk_index is k.chunk_index or c.external_id is not k.external_id))
limit 2"""


def _detached(conn):
    """{knowledge id: document_id} of the chunks whose document_id names no document
    while a document of their file (source_path; a remembered record's own) is
    stored (the reference system's chunks name documents it keeps no rows of, and
    no file's)."""
    return dict(conn.execute(_DETACHED).fetchall())


def _own_id(conn, knowledge_id, document_id):
    """Whether `document_id` is the one the writer gives chunk `knowledge_id`'s document:
    its file's path (a note), or the path (`remember` for a remembered memory), "#" and
    its record's id, or the key of a record without one; not one plain SQL moved it to."""
    path, external_id = conn.execute(
        "select coalesce(source_path, 'remember'), external_id from knowledge where id = ?", [knowledge_id]
    ).fetchone()
    if not isinstance(path, str) or not isinstance(document_id, str):
        return False
    if external_id is not None:
        return document_id == f"{path}#{external_id}"
    return document_id == path or re.fullmatch(re.escape(path) + r"#[0-9a-f]{16}(~[0-9]+)?", document_id) is not None


def _relink(conn, detached):
    """Give each `detached` chunk back to its document: the one document of its file
    still missing a chunk, none of its index and none another record's; where there is
    none and the chunk names a document of its file as the writer names them, that
    document's row was lost, and is made again from its chunks. Refused, by chunk,
    otherwise: which it was is the user's to say."""
    if not detached:
        return
    stuck, lost = [], []
    for knowledge_id, document_id in conn.execute(_DETACHED).fetchall():
        owners = _ids(conn, _OWNERS, {"id": knowledge_id})
        if len(owners) == 1:
            conn.execute("update knowledge set document_id = ? where id = ?", [owners[0], knowledge_id])
        elif not owners and _own_id(conn, knowledge_id, document_id):  # its document's row was what was lost
            lost.append(document_id)
        else:
            why = "several documents of its file" if owners else "no document of its file"
            stuck.append(f"knowledge {knowledge_id} (document_id {document_id!r:.60}: {why} could be its)")
    remade = []
    for document_id in dict.fromkeys(lost):  # made again only of its own chunks, none another's moved in
        chunks = conn.execute(
            "select id, title, chunk_index from knowledge where document_id = ?", [document_id]
        ).fetchall()
        # a record without an `_id` is known by its title among them; two chunks of one place, by nothing
        mixed = len({title for _, title, _ in chunks}) > 1 or len({i for *_, i in chunks}) < len(chunks)
        stranger = next((i for i, *_ in chunks if not _own_id(conn, i, document_id) or mixed), None)
        if stranger is None:
            remade.append(document_id)
        else:
            stuck.append(f"knowledge {stranger} (document_id {document_id!r:.60}: another record's chunk is under it)")
    _documents_from_chunks(conn, remade)
    if stuck:
        raise BrainError(
            "check --repair cannot tell which document these chunks belong to (the one of its file missing a "
            "chunk, none of its index and none of another record): "
            + "; ".join(stuck[:10])
            + (" …" if len(stuck) > 10 else "")
            + ". Set each one's document_id with SQL (or delete the chunk), then run sqlite-utils brain check "
            "--repair again"
        )


def _repair(conn, problems, model_id):
    with atomic(conn):
        _relink(conn, problems.get("detached_memories"))  # first: the documents' chunk counts are then right again
        broken = problems.get("missing_triggers", []) + problems.get("altered_triggers", [])
        if broken:
            expected = expected_triggers()
            for name in problems.get("altered_triggers", []):
                conn.execute(f"DROP TRIGGER [{name}]")
            for name in broken:
                conn.execute(expected[name])
            # what was written while they were gone was never logged: readers rebuild
            conn.execute(f"INSERT INTO {CHANGES_TABLE} (kind, key, stamp) VALUES ('all', 0, random())")
        if problems.get("instance_id"):
            renew_instance(conn)
        for name in problems.get("altered_indexes", []):
            conn.execute(f"DROP INDEX {name}")
        for name in problems.get("missing_indexes", []) + problems.get("altered_indexes", []):
            if name == PLACES_INDEX:
                index_vector_places(conn)
            else:
                conn.execute(page_indexes()[name])
        if "fts_out_of_sync" in problems:
            conn.execute("insert into knowledge_fts(knowledge_fts) values ('rebuild')")
            # every row's length may have changed, and no trigger logged it: readers rebuild
            conn.execute(f"INSERT INTO {CHANGES_TABLE} (kind, key, stamp) VALUES ('all', 0, random())")
        stale = problems.get("orphan_vectors", []) + problems.get("other_model_vectors", [])
        conn.executemany("delete from vec_knowledge where knowledge_id = ?", [(i,) for i in stale])
        for knowledge_id in problems.get("stale_vector_filters", []):
            assignments = ", ".join(
                f"[{name}] = (select {expression.format(row='k')} from knowledge k where k.id = ?)"
                for name, (_, expression) in VEC_METADATA.items()
            )
            conn.execute(
                f"update vec_knowledge set {assignments} where knowledge_id = ?",
                [knowledge_id] * len(VEC_METADATA) + [knowledge_id],
            )
        conn.executemany("delete from relationships where id = ?", [(i,) for i in problems.get("dangling_edges", [])])
        # forgetting the document's hash makes the next ingest write it whole again
        conn.executemany(
            "update documents set content_hash = null, "
            "chunks = (select count(*) from knowledge k where k.document_id = documents.document_id) "
            "where document_id = ?",
            [(d,) for d in problems.get("incomplete_documents", [])],
        )
        if problems.get("missing_vectors") or problems.get("other_model_vectors"):
            backfill_vectors(conn, model_id)
        _mend_marks(conn, problems)
        if problems.get("reindex_leftovers"):
            drop_reindex_leftovers(conn)
        _mend_mentions(conn, problems)
        validity.promote(conn, problems.get("orphan_versions", []))
        if problems.get("stale_supersession"):
            validity.rederive(conn)
        # a quote of a turn still at its place quotes its words and speaker now, as
        # remember's correction does; the quotes go first: making a turn's own lines
        # again rehashes it and names its speaker, which is what tells a turn plain SQL changed
        for quotes in conversation.stale_quotes(conn, partial(edited, conn)).values():
            restate(conn, quotes)
        for contexts in conversation.stale_own_lines(conn).values():
            rewrite_contexts(conn, contexts)
        merge_look_alike_entities(conn)  # none, mostly
        mend_holds(conn, problems.get("unreadable_holds", []))


def _mend_mentions(conn, problems):
    """The name index made again, then the mention work left finished (it looks names up there)."""
    if problems.get("stale_name_index"):
        mentions.remake_names(conn)
    if problems.get("pending_mentions"):
        mentions.resolve_mentions(conn)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def look_alike_entities(conn: Connection) -> list[list[tuple[int, str]]]:
    """[[(id, name), ...]] of the entities whose names are one name as fields.entity_key
    keys them (and entities.name's NOCASE compares them), each group by id; an entity
    alone whose name is not so keyed too: the writer would make its twin."""
    groups: dict[str, list[tuple[int, str]]] = {}
    # a name of printable ASCII, single spaces between words, is its own key, and no other such
    # name is one with it (NOCASE, UNIQUE): only the others are read, then each key's plain twin
    odd = conn.execute(
        "select id, name from entities where typeof(name) = 'text' "
        "and (name glob '*[^ -~]*' or name glob '*  *' or name glob ' *' or name glob '* ') order by id"
    )
    for entity_id, name in odd:
        groups.setdefault(entity_key(name).translate(_ASCII_LOWER), []).append((entity_id, name))
    for group in groups.values():
        plain = conn.execute("select id, name from entities where name = ?", [entity_key(group[0][1])]).fetchone()
        if plain and tuple(plain) not in group:
            group.append(tuple(plain))
            group.sort()
    return [group for group in groups.values() if len(group) > 1 or group[0][1] != entity_key(group[0][1])]


def merge_look_alike_entities(conn):
    """Make each group of look_alike_entities one entity, inside the caller's transaction:
    the first (lowest id) keeps its id under the keyed name and takes the others' edges
    and documents (a document's entity stays a document node); the others go."""
    for group in look_alike_entities(conn):
        (keep, name), others = group[0], [entity_id for entity_id, _ in group[1:]]
        for other in others:
            for end in ("from_entity_id", "to_entity_id"):
                conn.execute(f"update or ignore relationships set {end} = ? where {end} = ?", (keep, other))
            conn.execute("delete from relationships where ? in (from_entity_id, to_entity_id)", (other,))
            conn.execute("update documents set entity_id = ? where entity_id = ?", (keep, other))
        conn.execute("delete from relationships where from_entity_id = ? and to_entity_id = ?", (keep, keep))
        if (
            others
            and conn.execute(
                "select 1 from entities where id in (select value from json_each(?)) and entity_type = 'document'",
                [json.dumps(others)],
            ).fetchone()
        ):
            conn.execute("update entities set entity_type = 'document' where id = ?", (keep,))
        conn.executemany("delete from entities where id = ?", [(other,) for other in others])
        conn.execute("update entities set name = ? where id = ?", (entity_key(name), keep))


def _mend_marks(conn, problems):
    """The id mark set to the highest id given when it is behind, and those past the bound set back."""
    if problems.get("id_mark_behind"):
        restore_id_mark(conn, highest_given(conn, "knowledge"))
    lower_marks(conn)  # those past the bound: none, mostly


def fingerprint(conn):
    """What a brain holds, independent of row ids: for comparing two brains."""
    return {
        "chunks": sorted(
            conn.execute("select document_id, chunk_index, content_hash, scope, class from knowledge").fetchall()
        ),
        "vectors": sorted(
            conn.execute(
                "select k.document_id, k.chunk_index, v.embedding_int8 from vec_knowledge v "
                "join knowledge k on k.id = v.knowledge_id"
            ).fetchall()
        ),
        "fts": conn.execute("select count(*) from knowledge_fts").fetchone()[0],
        "entities": sorted(r[0] for r in conn.execute("select name from entities")),
        "edges": sorted(
            conn.execute(
                "select f.name, r.relation_type, t.name, k.document_id, k.chunk_index from relationships r "
                "join entities f on f.id = r.from_entity_id join entities t on t.id = r.to_entity_id "
                "left join knowledge k on k.id = r.knowledge_id"
            ).fetchall(),
            key=repr,
        ),
        "documents": sorted(conn.execute("select document_id, content_hash, chunks from documents").fetchall()),
    }
