"""What people browse: one memory in its document, an entity's neighbourhood, and
the memories that have decayed (expired, expiring soon, archived) for review.
Flagged memories are never shown."""

import json

from .config import ENTITY_PAGE_ROWS, MAX_PAGE, MAX_PAGE_ROWS
from .fields import sqlite_time, utcnow, whole_number

DECAY_BUCKETS = ("expired", "expiring within 7 days", "archived", "live")
# archived (relevance tier 0) is a decision someone made, so it wins over expiry
_BUCKET_SQL = """case
  when relevance_tier < 1 then 'archived'
  when expires_at is not null and unixepoch(expires_at) <= unixepoch(coalesce({now}, 'now')) then 'expired'
  when expires_at is not null and unixepoch(expires_at) <= unixepoch(coalesce({now}, 'now'), '+7 days')
    then 'expiring within 7 days'
  else 'live' end"""
DECAYED_COLUMNS = ("id", "title", "content", "class", "scope", "source", "domain", "expires_at", "relevance_tier", "decay")


def decay_bucket_sql(now="null"):
    """The one CASE that buckets a knowledge row by relevance tier and expiry — for the facet, the
    filter and the decayed page, so a bucket always selects what it counted;
    `now` is SQL for the evaluation time (null: the clock)."""
    return _BUCKET_SQL.format(now=now)


def decay_counts_sql(rows_sql):
    """Rows per decay bucket of the knowledge rows `rows_sql` selects (with their
    expires_at and relevance_tier)."""
    return f"select {decay_bucket_sql()} as bucket, count(*) as count from ({rows_sql}) group by bucket"


DECAYED_FACETS = ("class", "scope", "source", "domain", "decay")


MEMORIES_LISTED = 50  # an entity page lists this many of its memories, and says how many there are

# relationships a reader may see: stated by no memory, or by one not flagged
_SEEN = "(r.knowledge_id is null or exists (select 1 from knowledge s where s.id = r.knowledge_id and s.flagged = 0))"


def memory(conn, memory_id):
    """(memory row as a dict, its document's other visible chunks, the edges its
    text stated), or None when there is no such visible memory."""
    columns = [c[1] for c in conn.execute("pragma table_info(knowledge)")]
    row = conn.execute("select * from knowledge where id = ? and flagged = 0", (memory_id,)).fetchone()
    if row is None:
        return None
    found = dict(zip(columns, row))
    siblings = conn.execute(
        "select id, chunk_index, heading_path, line_start, line_end from knowledge "
        "where document_id = ? and flagged = 0 order by chunk_index",
        (found["document_id"],),
    ).fetchall() if found["document_id"] else []  # fmt: skip
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
select e.id, e.name, coalesce(e.entity_type, 'entity'), count(distinct r.relation_type || '>' || r.from_entity_id) as ties
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


def entity(conn, entity_id, hops=1, limit=ENTITY_NODES, listed=ENTITY_REST):
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
        "where from_entity_id in (select value from json_each(:ids)) and to_entity_id in (select value from json_each(:ids)) "
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
        "entity": tuple(row), "nodes": nodes, "edges": edges, "rest": rest[:listed], "more": len(rest) > listed,
        "documents": [tuple(d) for d in documents], "documents_total": total,
    }  # fmt: skip


def page_numbers(page=1, size=MAX_PAGE_ROWS):
    """(page, size) of a page of rows: a page number from 1 to MAX_PAGE and a size
    from 1 to MAX_PAGE_ROWS, given as whole numbers or as their text (a URL's);
    FieldError saying the bounds otherwise."""
    return whole_number(page, "page", 1, MAX_PAGE), whole_number(size, "size", 1, MAX_PAGE_ROWS)


def entities(conn, q=None, entity_type=None, page=1, per_page=ENTITY_PAGE_ROWS):
    """The entities a reader may see, most connected first: a dict of `rows` (id,
    name, type, degree: distinct visible edges) for `page` (from 1) of `per_page`
    rows (page_numbers' bounds), the `total` matching, and `types` (type, count)
    among those whose name matches `q` (a substring, any case)."""
    page, per_page = page_numbers(page, per_page)
    pattern = None if not q else "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    seen = f"""
    with seen as (select distinct r.from_entity_id as f, r.to_entity_id as t, r.relation_type from relationships r where {_SEEN}),
    degree as (select id, count(*) as degree from (select f as id from seen union all select t from seen where t != f) group by id),
    visible as (
      select e.id, e.name, coalesce(e.entity_type, 'entity') as type, coalesce(degree.degree, 0) as degree
      from entities e left join degree on degree.id = e.id
      where (:pattern is null or e.name like :pattern escape '\\')
        and (degree.degree is not null or {_VISIBLE.format(e='e.id', seen=_SEEN)}))"""
    params = {"pattern": pattern, "type": entity_type, "limit": per_page, "offset": (page - 1) * per_page}
    rows = conn.execute(
        seen + " select id, name, type, degree, count(*) over () from visible where :type is null or type = :type "
        "order by degree desc, name collate nocase, id limit :limit offset :offset",
        params,
    ).fetchall()
    types = conn.execute(seen + " select type, count(*) from visible group by type order by count(*) desc, type", params)
    total = rows[0][4] if rows else conn.execute(
        seen + " select count(*) from visible where :type is null or type = :type", params
    ).fetchone()[0]  # fmt: skip
    return {"rows": [r[:4] for r in rows], "total": total, "types": [tuple(t) for t in types]}


def _decayed_rows(now, selected):
    """(SQL, params) selecting the decayed rows (expired, soon-expiring and
    archived, never flagged) whose facet columns equal `selected`'s values."""
    selected = {name: str(value) for name, value in (selected or {}).items() if name in DECAYED_FACETS}
    where = "".join(f" and [{name}] = :f_{name}" for name in selected)
    sql = (
        f"select * from (select id, title, content, class, scope, coalesce(source, '') as source, "
        f"coalesce(domain, 'global') as domain, expires_at, relevance_tier, {decay_bucket_sql(':now')} as decay "
        f"from knowledge where flagged = 0) where decay != 'live'{where}"
    )
    return sql, {"now": now, **{f"f_{name}": value for name, value in selected.items()}}


def decayed(conn, now=None, page=1, size=MAX_PAGE_ROWS, selected=None):
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


def decayed_facets(conn, now, selected=None):
    """(count, {facet: {value: count}}) over the decayed rows `selected` keeps."""
    sql, params = _decayed_rows(now, selected)
    counts = {
        name: dict(conn.execute(f"select [{name}], count(*) from ({sql}) group by 1 order by 2 desc, 1", params))
        for name in DECAYED_FACETS
    }
    return sum(counts["decay"].values()), counts


def examples(conn, limit=6):
    """Titles of the live documents with the most sections: queries the brain can answer."""
    return [
        row[0]
        for row in conn.execute(
            "select min(title) from knowledge where flagged = 0 and relevance_tier >= 1 and title is not null "
            "and title != '' and (expires_at is null or unixepoch(expires_at) > unixepoch('now')) "
            "group by coalesce(document_id, -id) order by count(*) desc, min(id) limit ?",
            (limit,),
        )
    ]


def memory_content(conn, memory_id):
    """The text of a visible memory, or None."""
    row = conn.execute("select content from knowledge where id = ? and flagged = 0", (memory_id,)).fetchone()
    return row[0] if row else None
