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
of more); memories no `documents` row holds (plain SQL's) are placed at their first
memory's id, as a conversation places them. By default every page inside one read
transaction: a consistent snapshot whatever is written meanwhile. With
snapshot=False (a server streaming to a client that may be slow) each page is read
in a short transaction of its own, its lines made before it ends, so no reader
waiting to be sent holds the write-ahead log back: each document is whole as it
stood when its page was read; one there throughout is never missed (its place, or
its first memory's id, stays while it is there, and a new document's is higher than
any there, but for one placed where the last placed, forgotten meanwhile, was: a
plain-SQL document corrected meanwhile, not read yet, can be missed so);
one changed meanwhile may come twice, the later line last (ingest keeps the first
and names the second a repeat).
"""

import json

from .config import EXPORT_PAGE_DOCUMENTS, MAX_NESTING
from .document import CHUNK_FIELDS
from .errors import BrainError
from .fields import stored_too_deep
from .schema import is_brain
from .writer import record_head, stated_values

# the next documents by place, with how many memories each holds (none: all its rows gone)
_PLACES = """
select d.rowid, d.document_id, (select count(*) from knowledge k where k.document_id = d.document_id)
from documents d where d.rowid >= :start and d.document_id != '' order by d.rowid limit :size"""
# the first memory of each document no documents row holds, and each memory no document
# holds (its document id null or empty, as plain SQL writes), by id, with how many
# memories the document holds
_UNPLACED = """
select k.id, k.document_id,
  case when coalesce(k.document_id, '') = '' then 1
  else (select count(*) from knowledge m where m.document_id = k.document_id) end
from knowledge k
where k.id >= :start and (coalesce(k.document_id, '') = ''
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
        places, done = _Places(), 0
        total = conn.execute("select count(*) from knowledge").fetchone()[0] if progress else None
        while not places.done:
            lines, read = (_page if snapshot else _in_a_read)(conn, places)
            yield from lines
            done += read
            if progress:
                progress(done, total)
    finally:
        if began and conn.in_transaction:
            conn.execute("rollback")  # a read: nothing to keep


def _in_a_read(conn, places):
    """_page in a read transaction of its own, ended before it returns."""
    if conn.in_transaction:
        return _page(conn, places)
    conn.execute("begin")
    try:
        return _page(conn, places)
    finally:
        conn.execute("rollback")  # a read: nothing to keep


class _Places:
    """Where an export stands: the place of the next document to read, the
    documents no documents row holds read ahead (a page of them at most: their
    first memory's id, document id and memories), and the id from which those
    are not read yet. Such a document is placed at its first memory's id, as a
    conversation places it (conversation._stored_documents)."""

    def __init__(self):
        self.placed = self.scanned = -(2**63)
        self.unplaced = []
        self.more = self.done = False


def _page(conn, places):
    """(lines, memories read) of the next documents in place order, until they hold
    EXPORT_PAGE_DOCUMENTS memories; `places` moved past them (done after the last).
    Both kinds are read a page ahead, and a document is taken only when neither
    kind can hold one placed before it unread."""
    size = EXPORT_PAGE_DOCUMENTS
    placed = conn.execute(_PLACES, {"start": places.placed, "size": size}).fetchall()
    if not places.unplaced:
        unplaced = conn.execute(_UNPLACED, {"start": places.scanned, "size": size}).fetchall()
        places.unplaced = [(place, document_id or None, count) for place, document_id, count in unplaced]
        places.more = len(unplaced) == size
        if places.more:
            places.scanned = places.unplaced[-1][0] + 1
        else:  # every memory read: a new one has a higher id
            places.scanned = (conn.execute("select max(id) from knowledge").fetchone()[0] or places.scanned) + 1
    if not placed and not places.unplaced:
        places.done = True
        return [], 0

    def order(item):  # a memory no document holds (its document id null) sorts first of its place
        return item[0], item[1] is not None, item[1] or ""

    # what each kind read ahead bounds what may be taken, unless it holds all of that kind
    full = [order(batch[-1]) for batch, more in ((placed, len(placed) == size), (places.unplaced, places.more)) if more]
    horizon = min(full, default=None)
    queued = sorted(
        [(place, document_id, count, True) for place, document_id, count in placed]
        + [(place, document_id, count, False) for place, document_id, count in places.unplaced],
        key=order,
    )
    taken, read = [], 0
    for place, document_id, count, is_placed in queued:
        if horizon is not None and order((place, document_id)) > horizon or read >= size:
            break
        taken.append((place, document_id, is_placed))
        read += count
    for place, _, is_placed in taken:
        if is_placed:
            places.placed = place + 1
    places.unplaced = places.unplaced[sum(1 for item in taken if not item[2]) :]
    held = _held(conn, [(place, document_id) for place, document_id, _ in taken])
    edges = _edges(conn, sorted({rows[0]["document_id"] for rows in held if rows[0]["document_id"] is not None}))
    return [_line(rows, edges.get(rows[0]["document_id"], {})) for rows in held], sum(len(r) for r in held)


def _held(conn, documents):
    """The rows of each of `documents` ((its place or first memory's id, its id or
    None for a memory no document holds)) in their order, each in chunk order;
    those gone since they were read ahead left out."""
    ids = [document_id for _, document_id in documents if document_id is not None]
    cursor = conn.execute(
        "select * from knowledge where document_id in (select value from json_each(?)) order by chunk_index, id",
        [json.dumps(ids)],
    )
    columns = [c[0] for c in cursor.description]
    held = {}
    for row in cursor:
        row = dict(zip(columns, row))
        held.setdefault(row["document_id"], []).append(row)
    # what each record stated of the columns a review decides: the record's, where a chunk's own differ
    stated = dict(
        conn.execute(
            "select document_id, stated_fields from documents where document_id in (select value from json_each(?))",
            [json.dumps(ids)],
        ).fetchall()
    )
    found = []
    for place, document_id in documents:
        if document_id is not None:
            rows = held.get(document_id)
            if rows:
                rows[0]["_stated"] = stated_values(stated.get(document_id))
        else:
            cursor = conn.execute("select * from knowledge where id = ? and coalesce(document_id, '') = ''", [place])
            rows = [dict(zip([c[0] for c in cursor.description], row)) for row in cursor]
        if rows:
            found.append(rows)
    return found


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
    """A document's record: what its first chunk holds (but the tier and expiry its
    record stated, where those are recorded: a review's decision on the first chunk is
    its own), and each chunk in `_chunks`."""
    first = rows[0]
    stated = {**first, **first.get("_stated", {})}
    record = record_head(first, first.get("_stated"))
    ids = {row["id"] for row in rows}
    loose = [relation for memory_id, relations in edges.items() if memory_id not in ids for relation in relations]
    record["_chunks"] = [
        _chunk(row, stated, edges.get(row["id"], []) + (loose if row is first else [])) for row in rows
    ]
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
