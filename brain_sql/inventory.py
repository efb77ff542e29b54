"""What a brain holds, counted: for `sqlite-utils brain stats` and anyone asking
how big a memory has grown and how much of it has decayed."""

import os
from typing import Any

from .browse import decay_counts_sql, sql_order
from .connection import Connection
from .errors import BrainError
from .schema import info, is_brain


def stats(conn: Connection) -> dict[str, Any]:
    """A JSON-able summary of the brain on `conn`, read from one snapshot:

    {"memories": n, "by_class": {class: n}, "by_scope": {scope: n}, "by_source":
    {source: n}, "decayed": {"expired": n, "expiring within 7 days": n,
    "archived": n}, "flagged": n, "documents": n, "entities": n, "relationships": n,
    "model": id, "dimension": n, "schema_version": n, "file_bytes": n, "wal_bytes": n}.

    Memories are knowledge rows (chunks), flagged ones included; the decay buckets
    are the decayed page's (expiry against the clock; archived is relevance tier 0).
    """
    if not is_brain(conn):
        raise BrainError("this file is not a brain: create one with sqlite-utils brain init")
    own = not conn.in_transaction
    if own:
        conn.execute("begin")  # one read snapshot: every count from the same moment
    try:
        result = _counts(conn)
    finally:
        if own and conn.in_transaction:
            conn.execute("commit")
    return {**result, **info(conn), **_file_sizes(conn)}


def _counts(conn):
    """Each count read through an index (m011): a group by a column walks that
    column's index, the decay buckets and the flagged rows read theirs alone."""

    def count(sql):
        return conn.execute(sql).fetchone()[0]

    def per(column):
        counted = {}
        for value, n in conn.execute(f"select [{column}], count(*) from knowledge group by 1"):
            value = "" if value is None else value  # null and '' are one value
            counted[value] = counted.get(value, 0) + n
        return dict(sorted(counted.items(), key=lambda item: (-item[1], sql_order(item[0]))))

    memories = count("select count(*) from knowledge")
    buckets = dict(conn.execute(decay_counts_sql("select expires_at, relevance_tier from knowledge")))
    return {
        "memories": memories,
        "by_class": per("class"),
        "by_scope": per("scope"),
        "by_source": per("source"),
        "decayed": {name: buckets.get(name, 0) for name in ("expired", "expiring within 7 days", "archived")},
        "flagged": count("select count(*) from knowledge where flagged != 0"),
        "documents": count("select count(*) from documents"),
        "entities": count("select count(*) from entities"),
        "relationships": count("select count(*) from relationships"),
    }


def _file_sizes(conn):
    """The file's size on disk and its write-ahead log's (not yet checkpointed into it)."""
    row = conn.execute("select file from pragma_database_list where name = 'main'").fetchone()
    path = row[0] if row else ""
    if not path:  # an in-memory database
        size = conn.execute("select page_count * page_size from pragma_page_count, pragma_page_size").fetchone()[0]
        return {"file_bytes": size, "wal_bytes": 0}
    wal = f"{path}-wal"
    return {"file_bytes": os.path.getsize(path), "wal_bytes": os.path.getsize(wal) if os.path.exists(wal) else 0}
