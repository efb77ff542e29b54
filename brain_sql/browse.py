"""What people browse: one memory in its document, an entity's neighbourhood, and
the memories that have decayed (expired, expiring soon, archived) for review.
Flagged memories are never shown."""

import json
from collections.abc import Iterable, Mapping
from typing import Any

from . import values as kinds
from .config import CLASSES, ENTITY_PAGE_ROWS, MAX_PAGE, MAX_PAGE_ROWS
from .connection import Connection
from .errors import FieldError
from .fields import given_once, normalize_scope, sqlite_time, unknown_parameters, utcnow, whole_number
from .schema import DECAYING
from .wording import shown

DECAY_BUCKETS = ("expired", "expiring within 7 days", "archived", "live")
# archived (relevance tier 0) is a decision someone made, so it wins over expiry
_BUCKET_SQL = """case
  when relevance_tier < 1 then 'archived'
  when expires_at is not null and unixepoch(expires_at) <= unixepoch(coalesce({now}, 'now')) then 'expired'
  when expires_at is not null and unixepoch(expires_at) <= unixepoch(coalesce({now}, 'now'), '+7 days')
    then 'expiring within 7 days'
  else 'live' end"""
DECAYED_COLUMNS = (
    "id",
    "title",
    "content",
    "class",
    "scope",
    "source",
    "domain",
    "expires_at",
    "relevance_tier",
    "decay",
)


def decay_bucket_sql(now: str = "null") -> str:
    """The one CASE that buckets a knowledge row by relevance tier and expiry — for the facet, the
    filter and the decayed page, so a bucket always selects what it counted;
    `now` is SQL for the evaluation time (null: the clock)."""
    return _BUCKET_SQL.format(now=now)


def decay_counts_sql(rows_sql: str) -> str:
    """(bucket, count) for each decay bucket that holds any of the knowledge rows
    `rows_sql` selects (with their expires_at and relevance_tier). Only the decaying
    rows (schema.DECAYING: idx_knowledge_decaying holds them, with what they are
    bucketed by) are bucketed one by one: all others are live, so live is the rest
    of the total."""
    return f"""with decaying as (
  select {decay_bucket_sql()} as bucket, count(*) as n from ({rows_sql}) where ({DECAYING}) group by bucket),
total as materialized (select count(*) as n from ({rows_sql})),
counted as (
  select bucket, n from decaying where bucket != 'live'
  union all
  select 'live', (select n from total) - (select coalesce(sum(n), 0) from decaying where bucket != 'live'))
select bucket, n as count from counted where n > 0"""


def decay_filter_sql(bucket: str, param: str = ":decay_bucket") -> str:
    """A where clause keeping the knowledge rows in decay `bucket` (one of
    DECAY_BUCKETS, bound to `param`): the decayed ones are found among the decaying
    rows alone, live ones are all but those, so no bucket is worked out row by row."""
    if bucket == "live":
        return f"id not in (select id from knowledge where ({DECAYING}) and {decay_bucket_sql()} != 'live')"
    return f"id in (select id from knowledge where ({DECAYING}) and {decay_bucket_sql()} = {param})"


DECAYED_FACETS = ("class", "scope", "source", "domain", "decay")
DECAYED_PARAMETERS = DECAYED_FACETS + ("page", "size")  # the decayed page's query: all it takes


def decayed_selection(pairs: Iterable[tuple[str, str]], strict: bool = True) -> tuple[dict[str, str], int, int]:
    """(selected facets, page, size) of the decayed page's query, its (name, value)
    pairs as a URL gives them: DECAYED_FACETS' values (an empty one selects nothing),
    page and size (page_numbers' bounds). A FieldError names the first part that is
    no such query: a name given twice, a NUL, a class not among CLASSES, a bucket the
    page does not show (live), a scope normalize_scope refuses, and, `strict`, a name
    the page does not take (else it is left alone, as a URL's other parameters)."""
    pairs = list(pairs)
    if strict:
        unknown_parameters((name for name, _ in pairs), DECAYED_PARAMETERS, "the decayed page")
    given = {}
    for name in DECAYED_PARAMETERS:
        value = given_once(name, [value for given_name, value in pairs if given_name == name])
        if value is None:
            continue
        if "\x00" in value:
            raise FieldError(f"{name} {shown(value)} may not contain NUL")
        given[name] = value
    selected = {name: given[name] for name in DECAYED_FACETS if given.get(name)}
    if "scope" in selected:
        selected["scope"] = normalize_scope(selected["scope"])
    if selected.get("class", CLASSES[0]) not in CLASSES:
        raise FieldError(f"class must be one of {', '.join(CLASSES)}, not {shown(selected['class'])}")
    buckets = [bucket for bucket in DECAY_BUCKETS if bucket != "live"]
    if selected.get("decay", buckets[0]) not in buckets:
        raise FieldError(f"decay must be one of {', '.join(buckets)}, not {shown(selected['decay'])}")
    page, size = page_numbers(given.get("page") or 1, given.get("size") or MAX_PAGE_ROWS)
    return selected, page, size


MEMORIES_LISTED = 50  # an entity page lists this many of its memories, and says how many there are

# relationships a reader may see: stated by no memory, or by one not flagged
_SEEN = "(r.knowledge_id is null or exists (select 1 from knowledge s where s.id = r.knowledge_id and s.flagged = 0))"


def memory(conn: Connection, memory_id: int) -> tuple[dict[str, Any], list[Any], list[Any]] | None:
    """(memory row as a dict, its document's other visible chunks, the edges its
    text stated), or None when there is no such visible memory."""
    columns = [c[1] for c in conn.execute("pragma table_info(knowledge)")]
    row = _visible(conn, "*", memory_id)
    if row is None:
        return None
    found = dict(zip(columns, row))
    siblings = (
        conn.execute(
            "select id, chunk_index, heading_path, line_start, line_end from knowledge "
            "where document_id = ? and flagged = 0 order by chunk_index",
            (found["document_id"],),
        ).fetchall()
        if found["document_id"]
        else []
    )
    edges = conn.execute(
        "select f.id, f.name, r.relation_type, t.id, t.name from relationships r "
        "join entities f on f.id = r.from_entity_id join entities t on t.id = r.to_entity_id "
        "where r.knowledge_id = ? order by r.relation_type, t.name",
        (memory_id,),
    ).fetchall()
    return found, siblings, edges


# an entity a reader may see: known from nothing yet, or from a relationship it may
# see, or a document with a section not flagged (what flagged memories alone
# stated never shows)
_VISIBLE = """(
  (not exists (select 1 from relationships r where r.from_entity_id = {e} or r.to_entity_id = {e})
   and not exists (select 1 from documents d where d.entity_id = {e}))
  or exists (select 1 from relationships r where (r.from_entity_id = {e} or r.to_entity_id = {e}) and {seen})
  or exists (select 1 from documents d join knowledge k on k.document_id = d.document_id
             where d.entity_id = {e} and k.flagged = 0))"""
# the distinct visible edges (from, to, type) touching :id's other end
_TIES = f"""
select e.id, e.name, coalesce(e.entity_type, 'entity'),
  count(distinct r.relation_type || '>' || r.from_entity_id) as ties
from relationships r join json_each(:ids) h
  on (r.from_entity_id = h.value or r.to_entity_id = h.value)
join entities e on e.id = case when r.from_entity_id = h.value then r.to_entity_id else r.from_entity_id end
where e.id not in (select value from json_each(:known)) and {_SEEN}
group by e.id order by ties desc, e.name collate nocase, e.id limit :limit"""
_DEGREE = f"""
select h.value, (select count(*) from (select distinct r.from_entity_id, r.to_entity_id, r.relation_type
                 from relationships r where (r.from_entity_id = h.value or r.to_entity_id = h.value) and {_SEEN}))
from json_each(:ids) h"""
ENTITY_NODES = 40  # the most an entity page draws; the rest are listed
ENTITY_REST = 200  # the most it lists beside the drawing


def _around(conn, ids, known, limit):
    """Entities one visible edge away from `ids`, not in `known`, most ties first."""
    rows = conn.execute(_TIES, {"ids": json.dumps(ids), "known": json.dumps(known), "limit": limit}).fetchall()
    return [{"id": i, "name": n, "type": t, "ties": ties} for i, n, t, ties in rows]


def entity(
    conn: Connection, entity_id: int, hops: int = 1, limit: int = ENTITY_NODES, listed: int = ENTITY_REST
) -> dict[str, Any] | None:
    """An entity's neighbourhood `hops` (1 or 2) visible edges deep, or None: a dict
    of `entity` (id, name, type), `nodes` drawn (the entity first; each with its
    `hop` and visible `degree`, at most `limit`), `edges` among them, (from id, to
    id, type) once each, that reach no further than `hops`, `rest` (the next
    `listed` not drawn) with `more` (whether there are others still), and
    `documents`, the memories that state its edges. Only relationships a reader
    may see count: what flagged memories alone stated is not shown at any depth,
    nor an entity known only from them."""
    row = conn.execute(
        f"select id, name, coalesce(entity_type, 'entity') from entities e where id = :id "
        f"and {_VISIBLE.format(e=':id', seen=_SEEN)}",
        {"id": entity_id},
    ).fetchone()
    if row is None:
        return None
    fetch = limit + listed
    first = _around(conn, [entity_id], [entity_id], fetch + 1)
    drawn1 = first[: (limit - 1) * 2 // 3 if hops == 2 else limit - 1]
    second = []
    if hops == 2 and drawn1:
        second = _around(conn, [n["id"] for n in drawn1], [entity_id] + [n["id"] for n in first], fetch + 1)
    room = limit - 1 - len(drawn1)
    drawn2 = second[:room]
    drawn1 = first[: len(drawn1) + room - len(drawn2)]
    for node in first:
        node["hop"] = 1
    for node in second:
        node["hop"] = 2
    centre = {"id": row[0], "name": row[1], "type": row[2], "ties": 0, "hop": 0}
    nodes = [centre] + drawn1 + drawn2
    drawn = {n["id"]: n for n in nodes}
    rest = [n for n in first + second if n["id"] not in drawn]
    degrees = dict(conn.execute(_DEGREE, {"ids": json.dumps(list(drawn))}).fetchall())
    for node in nodes:
        node["degree"] = degrees.get(node["id"], 0)
    edges = conn.execute(
        "select distinct from_entity_id, to_entity_id, relation_type from relationships r "
        "where from_entity_id in (select value from json_each(:ids)) "
        "and to_entity_id in (select value from json_each(:ids)) "
        f"and {_SEEN} order by 1, 2, 3",
        {"ids": json.dumps(list(drawn))},
    ).fetchall()
    edges = [tuple(e) for e in edges if min(drawn[e[0]]["hop"], drawn[e[1]]["hop"]) < hops]
    # the memories that state its edges, and its own document's (an entity with no
    # edge still leads to its note), at most MEMORIES_LISTED of them, and how many
    memories = """
        select k.id, k.title, k.heading_path from knowledge k where k.flagged = 0 and (
          k.id in (select knowledge_id from relationships where from_entity_id = :id or to_entity_id = :id)
          or k.document_id in (select document_id from documents where entity_id = :id))"""
    documents = conn.execute(f"{memories} order by k.title, k.id limit {MEMORIES_LISTED}", {"id": entity_id}).fetchall()
    total = conn.execute(f"select count(*) from ({memories})", {"id": entity_id}).fetchone()[0]
    return {
        "entity": tuple(row),
        "nodes": nodes,
        "edges": edges,
        "rest": rest[:listed],
        "more": len(rest) > listed,
        "documents": [tuple(d) for d in documents],
        "documents_total": total,
    }


def page_numbers(page: int | str = 1, size: int | str = MAX_PAGE_ROWS) -> tuple[int, int]:
    """(page, size) of a page of rows: a page number from 1 to MAX_PAGE and a size
    from 1 to MAX_PAGE_ROWS, given as whole numbers or as their text (a URL's);
    FieldError saying the bounds otherwise."""
    return whole_number(page, "page", 1, MAX_PAGE), whole_number(size, "size", 1, MAX_PAGE_ROWS)


# the distinct visible edges (from, to, type), and each entity's degree: how many touch it (a loop once)
_DEGREES = f"""with seen as (
  select distinct r.from_entity_id as f, r.to_entity_id as t, r.relation_type from relationships r where {_SEEN}),
degree as (select id, count(*) as degree from (select f as id from seen union all select t from seen where t != f)
           group by id)"""
_NAMED = "(:pattern is null or e.name like :pattern escape '\\')"
_MATCHING = f"{_NAMED} and (:type is null or coalesce(e.entity_type, 'entity') = :type)"
# the entities a reader may not see, usually few: found among the ends of edges only flagged
# (or deleted) memories stated and the entities of documents with a flagged chunk or none
# (a document keeps its chunks: check's incomplete_documents), which are all that may be
_HIDDEN = f"""select e.id, coalesce(e.entity_type, 'entity') as type from entities e where e.id in (
  select from_entity_id from relationships r where not {_SEEN}
  union select to_entity_id from relationships r where not {_SEEN}
  union select entity_id from documents where chunks = 0
  union select entity_id from documents where document_id in (select document_id from knowledge where flagged != 0))
  and {_NAMED} and not {_VISIBLE.format(e="e.id", seen=_SEEN)}"""


def entities(
    conn: Connection,
    q: str | None = None,
    entity_type: str | None = None,
    page: int | str = 1,
    per_page: int | str = ENTITY_PAGE_ROWS,
) -> dict[str, Any]:
    """The entities a reader may see, most connected first: a dict of `rows` (id,
    name, type, degree: distinct visible edges) for `page` (from 1) of `per_page`
    rows (page_numbers' bounds), the `total` matching, and `types` (type, count)
    among those whose name matches `q` (a substring, any case).

    Read without testing every entity: the connected ones through their edges, the
    others along idx_entities_name but for the few hidden; counts are every
    entity's by type (idx_entities_type) less the hidden ones."""
    page, per_page = page_numbers(page, per_page)
    pattern = None if not q else "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    offset = (page - 1) * per_page
    params = {"pattern": pattern, "type": entity_type, "limit": per_page, "offset": offset}
    counts: dict[str, int] = {}
    for kind, count in conn.execute(
        f"select e.entity_type, count(*) from entities e where {_NAMED} group by 1", params
    ):
        kind = "entity" if kind is None else kind
        counts[kind] = counts.get(kind, 0) + count
    for kind, count in conn.execute(f"select type, count(*) from ({_HIDDEN}) group by 1", params):
        counts[kind] -= count
    types = sorted(
        ((kind, count) for kind, count in counts.items() if count > 0), key=lambda t: (-t[1], sql_order(t[0]))
    )
    total = sum(count for kind, count in types if entity_type is None or kind == entity_type)
    if offset >= total:
        return {"rows": [], "total": total, "types": types}
    connected = (
        f"{_DEGREES} select e.id, e.name, coalesce(e.entity_type, 'entity'), degree.degree "
        f"from degree join entities e on e.id = degree.id where {_MATCHING}"
    )
    rows = conn.execute(
        f"{connected} order by degree.degree desc, e.name collate nocase, e.id limit :limit offset :offset", params
    ).fetchall()
    rows = [tuple(r) for r in rows]
    if len(rows) < per_page:  # then the unconnected, by name, after as many as the connected ones on earlier pages
        before = 0 if offset == 0 else conn.execute(f"select count(*) from ({connected})", params).fetchone()[0]
        rows += conn.execute(
            f"{_DEGREES}, hidden as ({_HIDDEN}) select e.id, e.name, coalesce(e.entity_type, 'entity'), 0 "
            f"from entities e where {_MATCHING} and e.id not in (select id from degree) "
            "and e.id not in (select id from hidden) order by e.name collate nocase, e.id limit :limit offset :offset",
            {**params, "limit": per_page - len(rows), "offset": max(0, offset - before)},
        ).fetchall()
    return {"rows": rows, "total": total, "types": types}


def _decayed_rows(now, selected):
    """(SQL, params) selecting the decayed rows (expired, soon-expiring and
    archived, never flagged) whose facet columns equal `selected`'s values; read
    from the decaying rows alone (idx_knowledge_decaying holds every column used)."""
    selected = {name: str(value) for name, value in (selected or {}).items() if name in DECAYED_FACETS}
    # unary + keeps the facet columns' own indexes out: the decaying rows are fewer
    where = "".join(f" and +[{name}] = :f_{name}" for name in selected)
    sql = (
        f"select * from (select id, title, content, class, scope, coalesce(source, '') as source, "
        f"coalesce(domain, 'global') as domain, expires_at, relevance_tier, {decay_bucket_sql(':now')} as decay "
        f"from knowledge where flagged = 0 and ({DECAYING})) where decay != 'live'{where}"
    )
    return sql, {"now": now, **{f"f_{name}": value for name, value in selected.items()}}


def decayed(
    conn: Connection,
    now: str | None = None,
    page: int | str = 1,
    size: int | str = MAX_PAGE_ROWS,
    selected: Mapping[str, object] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """(now, rows): expired, soon-expiring and archived memories as dicts, soonest to
    expire first (archived ones without expiry before them), page `page` of `size`
    rows (page_numbers' bounds); `selected` keeps only rows whose facet columns
    (DECAYED_FACETS) have the values it gives; `now` is SQLite UTC text (default:
    the clock)."""
    page, size = page_numbers(page, size)
    now = now or sqlite_time(utcnow())
    sql, params = _decayed_rows(now, selected)
    params.update(limit=size, offset=(page - 1) * size)
    rows = conn.execute(f"{sql} order by expires_at, id limit :limit offset :offset", params)
    return now, [dict(zip(DECAYED_COLUMNS, r)) for r in rows]


def decayed_facets(
    conn: Connection, now: str, selected: Mapping[str, object] | None = None
) -> tuple[int, dict[str, dict[Any, int]]]:
    """(count, {facet: {value: count}}) over the decayed rows `selected` keeps,
    counted in one pass over them."""
    sql, params = _decayed_rows(now, selected)
    names = ", ".join(f"[{name}]" for name in DECAYED_FACETS)
    counts: dict[str, dict[Any, int]] = {name: {} for name in DECAYED_FACETS}
    for *values, count in conn.execute(f"select {names}, count(*) from ({sql}) group by {names}", params):
        for name, value in zip(DECAYED_FACETS, values):
            counts[name][value] = counts[name].get(value, 0) + count
    ordered = {
        name: dict(sorted(found.items(), key=lambda item: (-item[1], sql_order(item[0]))))
        for name, found in counts.items()
    }
    return sum(counts["decay"].values()), ordered


def sql_order(value):
    """A sort key ordering values as SQLite does: null, numbers, text, blobs."""
    if value is None:
        return (0, 0)
    return (1, value) if isinstance(value, (int, float)) else (2, value) if isinstance(value, str) else (3, value)


# a chunk an example may come from: live, titled
_EXAMPLE = (
    "flagged = 0 and relevance_tier >= 1 and title is not null and title != '' "
    "and (expires_at is null or unixepoch(expires_at) > :now)"
)
EXAMPLE_BATCH = 2_000  # the documents whose live sections are counted in one query


def examples(conn: Connection, limit: int = 6) -> list[str]:
    """Titles of the live documents with the most live sections (the first stored
    among equals; a chunk without a document is one of its own): queries the brain
    can answer.

    Found without grouping every chunk: a document has at most as many live sections
    as chunks (documents.chunks, on idx_documents_chunks; check keeps it true), so
    documents are taken from the most chunks down, a level at a time, until `limit`
    are known to beat the rest; on a level of many documents, chunks are read in id
    order until enough are found."""
    now = conn.execute("select unixepoch('now')").fetchone()[0]
    levels = conn.execute("select chunks, count(*) from documents group by chunks order by chunks desc").fetchall()
    found = {}  # group (a document_id, or a loose chunk's -id) -> (live sections, first live id, title)
    counted, few = 0, None
    for chunks, documents in levels:  # the top levels, as long as their documents are few
        if chunks <= 1 or counted + documents > EXAMPLE_BATCH:
            break
        counted, few = counted + documents, chunks
    if few is not None:  # every document with at least `few` chunks, counted exactly at once
        for document_id, live, first, title in conn.execute(
            f"select document_id, count(*), min(id), min(title) from knowledge where {_EXAMPLE} and document_id in "
            "(select document_id from documents where chunks >= :few) group by document_id",
            {"now": now, "few": few},
        ):
            found[document_id] = (live, first, title)
    for level in [chunks for chunks, _ in levels if chunks > 1] + [1]:
        if few is None or level < few:
            _walk_level(conn, found, level, limit, now)
        if sum(live >= level for live, _, _ in found.values()) >= limit:
            break  # every other document has fewer chunks than these have live sections
    return [title for _, _, title in sorted(found.values(), key=lambda f: (-f[0], f[1]))[:limit]]


def _walk_level(conn, found, level, limit, now):
    """Add to `found` the groups of `level` chunks, reading live chunks in id order
    (each group first met at its first live chunk) until `limit` groups with at
    least `level` live sections come before where the reading is."""
    for chunk_id, document_id, title in conn.execute(
        f"select id, document_id, title from knowledge where {_EXAMPLE} order by id", {"now": now}
    ):
        group = -chunk_id if document_id is None else document_id
        if group in found:
            continue
        if document_id is None:
            found[group] = (1, chunk_id, title)
        else:
            chunks = conn.execute("select chunks from documents where document_id = ?", (document_id,)).fetchone()
            if chunks is not None and chunks[0] != level:
                continue  # another level's: known already, or met in its own turn
            found[group] = tuple(
                conn.execute(
                    f"select count(*), min(id), min(title) from knowledge where document_id = :d and {_EXAMPLE}",
                    {"d": document_id, "now": now},
                ).fetchone()
            )
        if sum(live > level or live == level and first <= chunk_id for live, first, _ in found.values()) >= limit:
            return


def memory_content(conn: Connection, memory_id: int) -> str | None:
    """The text of a visible memory, or None."""
    row = _visible(conn, "content", memory_id)
    return row[0] if row else None


def _visible(conn: Connection, columns: str, memory_id: int) -> Any:
    """Memory `memory_id`'s `columns` (SQL) when it is there and not flagged; None
    when it is not there or flagged; check's BrainError when its flagged holds a
    value of the wrong kind (1e19, 'high': neither flagged nor not, so no answer)."""
    row = conn.execute(f"select flagged, {columns} from knowledge where id = ?", (memory_id,)).fetchone()
    if row is None or row[0] == 1:
        return None
    if row[0] != 0:
        wrong = kinds.invalid_in(conn, "knowledge", [memory_id], ["flagged"])
        if wrong:
            raise kinds.faulted(wrong)
        return None
    return row[1:]
