"""What people browse: one memory in its document, an entity's neighbourhood, and
the memories that have decayed (expired, expiring soon, archived) for review.
Flagged memories are never shown."""

import json

from .fields import sqlite_time, utcnow

DECAY_BUCKETS = ("expired", "expiring within 7 days", "live")
_BUCKET_SQL = """case
  when expires_at is not null and unixepoch(expires_at) <= unixepoch(coalesce({now}, 'now')) then 'expired'
  when expires_at is not null and unixepoch(expires_at) <= unixepoch(coalesce({now}, 'now'), '+7 days')
    then 'expiring within 7 days'
  else 'live' end"""
DECAYED_COLUMNS = ("id", "title", "content", "class", "scope", "source", "domain", "expires_at", "relevance_tier", "decay")


def decay_bucket_sql(now="null"):
    """The one CASE that buckets a knowledge row by expiry — for the facet, the
    filter and the decayed page, so a bucket always selects what it counted;
    `now` is SQL for the evaluation time (null: the clock)."""
    return _BUCKET_SQL.format(now=now)


def decay_counts_sql(rows_sql):
    """Rows per decay bucket of the knowledge rows `rows_sql` selects."""
    return f"select {decay_bucket_sql()} as bucket, count(*) as count from ({rows_sql}) group by bucket"


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


def entity(conn, entity_id, limit=50):
    """(entity row, neighbours, edges, memories that state its edges) around one
    entity, or None: at most `limit` neighbours, the most connected first; edges
    are (from id, to id, type). Only relationships a reader may see count: what
    flagged memories alone stated is not shown, nor an entity known only from them."""
    row = conn.execute("select id, name, entity_type from entities where id = ?", (entity_id,)).fetchone()
    if row is None:
        return None
    # known from something: a relationship or a document; known to a reader from
    # a relationship it may see, or a document with a section not flagged
    hidden = conn.execute(
        f"""
        select (exists (select 1 from relationships r where r.from_entity_id = :id or r.to_entity_id = :id)
                or exists (select 1 from documents d where d.entity_id = :id))
               and not exists (select 1 from relationships r where (r.from_entity_id = :id or r.to_entity_id = :id)
                               and {_SEEN})
               and not exists (select 1 from documents d join knowledge k on k.document_id = d.document_id
                               where d.entity_id = :id and k.flagged = 0)
        """,
        {"id": entity_id},
    ).fetchone()[0]
    if hidden:
        return None
    neighbours = conn.execute(
        f"""
        select e.id, e.name, e.entity_type, count(*) as ties from relationships r
        join entities e on e.id = case when r.from_entity_id = :id then r.to_entity_id else r.from_entity_id end
        where (r.from_entity_id = :id or r.to_entity_id = :id) and e.id != :id and {_SEEN}
        group by e.id order by ties desc, e.name limit :limit
        """,
        {"id": entity_id, "limit": limit},
    ).fetchall()
    shown = [entity_id] + [n[0] for n in neighbours]
    edges = conn.execute(
        "select distinct from_entity_id, to_entity_id, relation_type from relationships r "
        "where from_entity_id in (select value from json_each(:ids)) and to_entity_id in (select value from json_each(:ids)) "
        f"and (from_entity_id = :id or to_entity_id = :id) and {_SEEN} order by 1, 2, 3",
        {"ids": json.dumps(shown), "id": entity_id},
    ).fetchall()
    documents = conn.execute(
        "select distinct k.id, k.title, k.heading_path from relationships r join knowledge k on k.id = r.knowledge_id "
        "where (r.from_entity_id = ? or r.to_entity_id = ?) and k.flagged = 0 order by k.title, k.id limit 50",
        (entity_id, entity_id),
    ).fetchall()
    return tuple(row), [tuple(n) for n in neighbours], [tuple(e) for e in edges], [tuple(d) for d in documents]


def decayed(conn, now=None, limit=1000):
    """(now, rows): expired, soon-expiring and archived memories as dicts, soonest to
    expire first, at most `limit`; `now` is SQLite UTC text (default: the clock)."""
    now = now or sqlite_time(utcnow())
    bucket = decay_bucket_sql(":now")
    rows = conn.execute(
        f"select id, title, content, class, scope, coalesce(source, '') as source, "
        f"coalesce(domain, 'global') as domain, expires_at, relevance_tier, {bucket} as decay "
        f"from knowledge where flagged = 0 and (relevance_tier < 1 or {bucket} != 'live') "
        "order by expires_at, id limit :limit",
        {"now": now, "limit": limit},
    )
    return now, [dict(zip(DECAYED_COLUMNS, r)) for r in rows]


def memory_content(conn, memory_id):
    """The text of a visible memory, or None."""
    row = conn.execute("select content from knowledge where id = ? and flagged = 0", (memory_id,)).fetchone()
    return row[0] if row else None
