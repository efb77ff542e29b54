"""Forgetting memories on request, in one transaction, leaving nothing half.

A memory is a chunk of a document (a note or a record), and a document is only
ever stored whole, so forgetting one chunk forgets its whole document: the same
removal ingest prunes with (writer.remove_documents), whose triggers take the
full-text rows, the vectors and the edges the chunks stated. Entities that only
the forgotten documents tied into the graph go too: a name that no memory
states any more must not keep seeding recall or matching mentions.
"""

import json
from collections.abc import Callable, Iterable
from typing import Any

from . import mentions, validity
from .config import CHANGE_LOG_KEEP, MAX_FORGET_ITEMS, MAX_ID
from .connection import Connection, atomic, write_failures
from .errors import BrainError, FieldError
from .fields import unencodable
from .schema import is_brain, migrate, prune_changes
from .wording import shown
from .writer import remove_documents


def forget(
    conn: Connection, ids: Iterable[int] | None = (), external_ids: Iterable[str | int] | None = ()
) -> dict[str, Any]:
    """Remove the memories with these knowledge `ids` and record `external_ids`
    (a record's `_id`), each with the rest of its document, in one transaction.

    Returns {"removed": {"memories": [knowledge ids], "external_ids": [...],
    "documents": n, "relationships": n, "entities": n}, "not_found": {"ids": [...],
    "external_ids": [...]}}: ids that match nothing are reported there, not raised,
    but for an id outside 1 to MAX_ID that no row holds (FieldError naming the range).
    Malformed input raises FieldError naming the problem; a write that fails
    raises WriteError (BrainBusy when the write lock was not had in time) and
    nothing is removed.
    """
    ids = _checked(ids, "ids", _memory_id)
    external_ids = _checked(external_ids, "external_ids", _external_id)
    if not ids and not external_ids:
        raise FieldError("give the ids or external_ids of the memories to forget")
    if len(ids) + len(external_ids) > MAX_FORGET_ITEMS:
        raise FieldError(
            f"{len(ids) + len(external_ids):,} ids and external_ids: at most {MAX_FORGET_ITEMS:,} in one request"
        )
    if not is_brain(conn):
        raise BrainError("this file is not a brain: there is nothing to forget")
    migrate(conn)
    with write_failures("nothing was forgotten"):
        with atomic(conn):
            return _forget(conn, ids, external_ids)


def _refuse_shared(conn, external_ids):
    """A FieldError for an `_id` that several stored records carry (a row number of
    two CSV files, the same `_id` in two scopes): which of them to forget is not the
    request's to guess, as remember does not guess which to update. Its versions
    are one record; rows plain SQL wrote without a document count as one."""
    shared = conn.execute(
        "select external_id, count(distinct coalesce(document_id, '')) from knowledge "
        "where external_id in (select value from json_each(?)) and version_of is null "
        "group by external_id having count(distinct coalesce(document_id, '')) > 1 order by external_id limit 1",
        (json.dumps(external_ids),),
    ).fetchone()
    if shared:
        external_id, count = shared
        documents = [
            document or "(no document)"
            for (document,) in conn.execute(
                "select distinct coalesce(document_id, '') from knowledge where external_id = ? "
                "and version_of is null order by 1 limit 3",
                (external_id,),
            )
        ]
        raise FieldError(
            f"external_ids: {shown(external_id)} is the _id of {count} records "
            f"({', '.join(documents)}{' …' if count > 3 else ''}): forget the one you mean by its memory ids"
        )


_SQLITE_INTEGERS = range(-(2**63), 2**63)


def _out_of_range(name, value):
    return f"{name}: {value} is out of range for a memory id: ids are 1 to {MAX_ID:,}"


def _checked(values: Iterable[Any] | None, name: str, check: Callable[[Any, str], Any]) -> list[Any]:
    """The distinct values of a list, in order, each passed through `check`."""
    if values is None:
        return []
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__iter__"):
        raise FieldError(f"{name} must be a list")
    return list(dict.fromkeys(check(value, name) for value in values))


def _memory_id(value, name):
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(f"{name} must be whole numbers (memory ids), not {shown(value)}")
    if value not in _SQLITE_INTEGERS:  # no row can hold it
        raise FieldError(_out_of_range(name, value))
    return value


def _external_id(value, name):
    """A record's `_id` as stored: text, or a whole number as its text. Records take
    both (records.record_document stores `_id: 1` as "1"), so forget does too."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value:
        raise FieldError(f"{name} must be records' _ids: non-empty text or whole numbers, not {shown(value)}")
    if unencodable(value) is not None:
        raise FieldError(f"{name}: {shown(value)} is not valid Unicode (a lone surrogate)")
    return value


def _forget(conn, ids, external_ids):
    _refuse_shared(conn, external_ids)
    matched = conn.execute(
        "select id, document_id, external_id from knowledge "
        "where id in (select value from json_each(:ids)) or external_id in (select value from json_each(:external))",
        {"ids": json.dumps(ids), "external": json.dumps(external_ids)},
    ).fetchall()
    found_ids = {i for i, _, _ in matched}
    # an id outside 1 to MAX_ID is no memory's (0, -1 as 2**63), unless plain SQL wrote one before the brain's
    # rules refused it: check names such a row and says to forget it by its id, which is why it is looked for
    past = [i for i in ids if not 1 <= i <= MAX_ID and i not in found_ids]
    if past:
        raise FieldError(_out_of_range("ids", past[0]))
    documents = sorted({document_id for _, document_id, _ in matched if document_id is not None})
    loose = sorted(i for i, document_id, _ in matched if document_id is None)  # rows written without a document
    chunks = {"documents": json.dumps(documents), "loose": json.dumps(loose)}
    doomed = conn.execute(
        "select id, external_id from knowledge where document_id in (select value from json_each(:documents)) "
        "or id in (select value from json_each(:loose)) order by id",
        chunks,
    ).fetchall()
    doomed_ids = json.dumps([i for i, _ in doomed])
    stated = (
        "document_id in (select value from json_each(:documents)) "
        "or knowledge_id in (select value from json_each(:doomed))"
    )
    edges = {**chunks, "doomed": doomed_ids}
    # the entities these memories tie into the graph: candidates to go with them
    candidates = {
        entity_id
        for row in conn.execute(f"select from_entity_id, to_entity_id from relationships where {stated}", edges)
        for entity_id in row
    } | {
        entity_id
        for (entity_id,) in conn.execute(
            "select entity_id from documents where document_id in (select value from json_each(:documents)) "
            "and entity_id is not null",
            chunks,
        )
    }
    relationships = conn.execute(f"select count(*) from relationships where {stated}", edges).fetchone()[0]
    stored_documents = conn.execute(
        "select count(*) from documents where document_id in (select value from json_each(?))", (chunks["documents"],)
    ).fetchone()[0]

    remove_documents(conn, documents)
    validity.promote(conn, documents)  # a forgotten current version's latest earlier one is current again
    conn.execute("delete from knowledge where id in (select value from json_each(?))", (chunks["loose"],))
    conn.execute(
        f"delete from {mentions.QUEUE_TABLE} where kind = 'chunk' and id in (select value from json_each(?))",
        (doomed_ids,),
    )
    orphans = [
        entity_id
        for (entity_id,) in conn.execute(
            "select id from entities e where id in (select value from json_each(?)) "
            "and not exists (select 1 from relationships r where r.from_entity_id = e.id or r.to_entity_id = e.id) "
            "and not exists (select 1 from documents d where d.entity_id = e.id)",
            (json.dumps(sorted(candidates)),),
        )
    ]
    conn.executemany("delete from entities where id = ?", [(i,) for i in orphans])
    conn.executemany(f"delete from {mentions.QUEUE_TABLE} where kind = 'entity' and id = ?", [(i,) for i in orphans])
    prune_changes(conn, CHANGE_LOG_KEEP)

    found_external = {external_id for _, _, external_id in matched}
    return {
        "removed": {
            "memories": [i for i, _ in doomed],
            "external_ids": sorted({external_id for _, external_id in doomed if external_id is not None}),
            "documents": stored_documents,
            "relationships": relationships,
            "entities": len(orphans),
        },
        "not_found": {
            "ids": [i for i in ids if i not in found_ids],
            "external_ids": [x for x in external_ids if x not in found_external],
        },
    }
