"""Export: every memory as the record `ingest` reads, so that a brain can be
copied into a new one (another model, another machine) and nothing is lost.

One JSON line per document, in the order it was first stored (its place: its
`documents` row, which a rewrite or a correction keeps, so a corrected conversation
turn is where it was said, and an import quotes the same turns around it): its `_id`,
title, fields, tags and metadata, where it was (`_document`, `_source_path`,
`_version_of`: records.py puts it back there) and `_chunks`, each with its memory
id, text, heading and lines, the values of CHUNK_FIELDS it holds of its own, its
flag, and the edges its text states (with their entities' types). What is derived
— vectors, full text, contexts of conversation turns, superseded_at/by, mentions'
resolution — is derived again when the export is ingested.

Read a page of documents at a time, by place (a page ends once it holds
EXPORT_PAGE_DOCUMENTS memories: what is held in memory at once, with one document
of more); then the memories no `documents` row holds (plain SQL's), by id. By
default every page inside one read transaction: a consistent snapshot whatever is
written meanwhile. With snapshot=False (a server streaming to
a client that may be slow) each page is read in a short transaction of its own,
its lines made before it ends, so no reader waiting to be sent holds the
write-ahead log back: each document is whole as it stood when its page was read;
one there throughout is never missed (its place, or its first memory's id, stays
while it is there, and a new document's is higher); one changed meanwhile
may come twice, the later line last (ingest keeps the first and names the second a
repeat).
"""

import json

from .config import EXPORT_PAGE_DOCUMENTS, MAX_NESTING
from .conversation import observed_as_said
from .document import CHUNK_FIELDS
from .errors import BrainError
from .fields import stored_too_deep
from .schema import is_brain
from .writer import FIELD_COLUMNS

# the next documents by place, with how many memories each holds (none: all its rows gone)
_PLACES = """
select d.rowid, d.document_id, (select count(*) from knowledge k where k.document_id = d.document_id)
from documents d where d.rowid >= :start order by d.rowid limit :size"""
# the first row of each document no documents row holds (and each row no document holds), by id
_UNPLACED_FIRST_ROWS = """
select k.*, (select count(*) from knowledge m where m.document_id = k.document_id) as _rows
from knowledge k
where k.id >= :start and (k.document_id is null
  or not exists (select 1 from documents d where d.document_id = k.document_id)
  and not exists (select 1 from knowledge m where m.document_id = k.document_id and m.id < k.id))
order by k.id limit :size"""
# the edges the documents `:documents` state, with their entities' names and types
# (null: the document's own entity) and the memory that states each
_EDGES = """
select r.document_id, r.knowledge_id, r.relation_type,
  t.name, coalesce(t.entity_type, 'entity'),
  case when r.from_entity_id is not d.entity_id then f.name end, coalesce(f.entity_type, 'entity')
from relationships r
join entities f on f.id = r.from_entity_id join entities t on t.id = r.to_entity_id
left join documents d on d.document_id = r.document_id
where r.document_id in (select value from json_each(:documents))
order by r.document_id, r.relation_type, f.name, t.name"""


def export(conn, progress=None, snapshot=True):
    """Each document of the brain on `conn` as one JSON line (text ending in a
    newline) that ingest reads back into the same memories. `progress(done,
    total)` is called as pages are read, with the memories exported so far and
    all there are. Reads in one transaction of its own (unless `conn` is in one),
    ended when the lines are all read or the generator is closed; with
    `snapshot=False`, a transaction a page, none open while its lines are taken."""
    if not is_brain(conn):
        raise BrainError("this file is not a brain: there is nothing to export")
    began = snapshot and not conn.in_transaction
    if began:
        conn.execute("begin")
    try:
        start, done = (_placed, -(2**63)), 0
        total = conn.execute("select count(*) from knowledge").fetchone()[0] if progress else None
        while start is not None:
            lines, read, start = (_page if snapshot else _in_a_read)(conn, start)
            yield from lines
            done += read
            if progress:
                progress(done, total)
    finally:
        if began and conn.in_transaction:
            conn.execute("rollback")  # a read: nothing to keep


def _in_a_read(conn, start):
    """_page in a read transaction of its own, ended before it returns."""
    if conn.in_transaction:
        return _page(conn, start)
    conn.execute("begin")
    try:
        return _page(conn, start)
    finally:
        conn.execute("rollback")  # a read: nothing to keep


def _page(conn, start):
    """(lines, memories read, where the next page starts: None after the last) of
    the page at `start`, (its kind, the place or id it starts from)."""
    read_page, at = start
    return read_page(conn, at)


def _placed(conn, start):
    """The lines of the documents placed at `start` or after, in place order, until
    they hold EXPORT_PAGE_DOCUMENTS memories."""
    places = conn.execute(_PLACES, {"start": start, "size": EXPORT_PAGE_DOCUMENTS}).fetchall()
    if not places:
        return [], 0, (_unplaced, -(2**63))
    taken, read = [], 0
    for place, document_id, count in places:
        taken.append(document_id)
        read, start = read + count, place + 1
        if read >= EXPORT_PAGE_DOCUMENTS:
            break
    cursor = conn.execute(
        "select * from knowledge where document_id in (select value from json_each(?)) order by chunk_index, id",
        [json.dumps(taken)],
    )
    columns = [c[0] for c in cursor.description]
    held = {}
    for row in cursor:
        row = dict(zip(columns, row))
        held.setdefault(row["document_id"], []).append(row)
    edges = _edges(conn, [d for d in taken if d in held])
    lines = [_line(held[d], edges.get(d, {})) for d in taken if d in held]
    return lines, sum(len(rows) for rows in held.values()), (_placed, start)


def _unplaced(conn, start):
    """The lines of the memories no documents row holds, from id `start` on: each
    document of them whole, at its first memory."""
    cursor = conn.execute(_UNPLACED_FIRST_ROWS, {"start": start, "size": EXPORT_PAGE_DOCUMENTS})
    columns = [c[0] for c in cursor.description]
    firsts = [dict(zip(columns, row)) for row in cursor.fetchall()]
    if not firsts:
        return [], 0, None
    edges = _edges(conn, [row["document_id"] for row in firsts if row["document_id"] is not None])
    lines, read = [], 0
    for first in firsts:
        rows = [first] if first.pop("_rows") <= 1 else _rows(conn, first["document_id"])
        lines.append(_line(rows, edges.get(first["document_id"], {})))
        read, start = read + len(rows), first["id"] + 1
        if read >= EXPORT_PAGE_DOCUMENTS:
            break
    return lines, read, (_unplaced, start)


def _rows(conn, document_id):
    """The rows of a document of several, in chunk order."""
    cursor = conn.execute("select * from knowledge where document_id = ? order by chunk_index, id", (document_id,))
    columns = [c[0] for c in cursor.description]
    return [dict(zip(columns, row)) for row in cursor]


def _edges(conn, document_ids):
    """{document id: {memory id (None: stated by no memory): [relation objects]}}."""
    found = {}
    for document_id, knowledge_id, kind, to_name, to_type, from_name, from_type in conn.execute(
        _EDGES, {"documents": json.dumps(document_ids)}
    ):
        relation = {"type": kind, "to": to_name}
        if to_type != "entity":
            relation["to_type"] = to_type
        if from_name is not None:
            relation["from"] = from_name
            if from_type != "entity":
                relation["from_type"] = from_type
        found.setdefault(document_id, {}).setdefault(knowledge_id, []).append(relation)
    return found


def _record(rows, edges):
    """A document's record: what its first chunk holds, and each chunk in `_chunks`."""
    first = rows[0]
    record = {}
    for key, column in (("_id", "external_id"), ("_document", "document_id")):
        if first[column] is not None:
            record[key] = first[column]
    if first["document_id"] is not None:  # only a placed record takes these
        for key, column in (("_source_path", "source_path"), ("_version_of", "version_of")):
            if first[column] is not None:
                record[key] = first[column]
    if first["title"] is not None:
        record["title"] = first["title"]
    record.update((column, first[column]) for column in FIELD_COLUMNS if first[column] is not None)
    if first["context"] is not None and first["observed_at"] is not None:  # a turn said on its own day
        record["observed_at"] = observed_as_said(first["observed_at"], first["context"])
    for column in ("tags", "metadata"):
        if first[column] is not None:
            record[column] = _json(first[column])
    ids = {row["id"] for row in rows}
    loose = [relation for memory_id, relations in edges.items() if memory_id not in ids for relation in relations]
    record["_chunks"] = [_chunk(row, first, edges.get(row["id"], []) + (loose if row is first else [])) for row in rows]
    return record


def _chunk(row, first, relations):
    chunk = {"id": row["id"], "content": row["content"]}
    for column in ("heading_path", "line_start", "line_end"):
        if row[column] is not None:
            chunk[column] = row[column]
    chunk.update((column, row[column]) for column in CHUNK_FIELDS if row[column] != first[column])
    if row["flagged"]:
        chunk["flagged"] = True
    if relations:
        chunk["relations"] = relations
    return chunk


def _json(text):
    """A JSON column's value; text that is no JSON, as it is (kept as metadata)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return text


def _line(rows, edges):
    """A document's record (`_record`) as a JSON line. A value plain SQL wrote of a
    kind no record holds (a BLOB where text belongs, an infinite number, JSON holding
    a lone surrogate's escape or nested deeper than ingest takes) is the brain's
    fault, named as check names it, never a half-written line, a line UTF-8 cannot
    carry or a number JSON has not."""
    try:
        record = _record(rows, edges)
        if any(stored_too_deep(record.get(column)) for column in ("tags", "metadata")):
            raise ValueError(f"JSON nested more than {MAX_NESTING} levels deep, which ingest refuses")
        line = json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n"
        line.encode("utf-8")  # a lone surrogate, which json.loads made of a \ud800 escape, fails here
    except (TypeError, ValueError, RecursionError) as ex:  # UnicodeEncodeError is a ValueError
        raise BrainError(
            f"memory {rows[0]['id']} holds a value no JSON line can carry ({str(ex)[:200]}): "
            "run sqlite-utils brain check"
        ) from ex
    return line
