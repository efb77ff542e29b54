"""brain_sql.stats: what a brain holds, counted, and the decay buckets the
decayed page uses."""

import datetime
import json
import os

import pytest

import brain_sql

from .conftest import rows


def soon(days):
    return (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(days=days)).strftime("%Y-%m-%dT%H:%M:%SZ")


RECORDS = [
    {"_id": "a", "text": "Expired memory about the old office.", "scope": "/acme", "expires_at": "2020-01-01"},
    {
        "_id": "b",
        "text": "Expiring soon: the parking permit.",
        "scope": "/acme/eng",
        "class": "policy",
        "expires_at": soon(3),
    },
    {"_id": "c", "text": "Archived: the first logo.", "relevance_tier": 0, "class": "reference", "source": "crm"},
    {
        "_id": "d",
        "title": "Kept",
        "text": "Live for a long time.",
        "expires_at": soon(60),
        "relations": [{"type": "owned_by", "to": "Dana"}],
    },
]


def test_stats_counts_what_the_brain_holds(vault_brain_copy):
    conn = brain_sql.connect(vault_brain_copy)
    before = brain_sql.stats(conn)
    brain_sql.remember(conn, RECORDS)
    conn.execute("update knowledge set flagged = 1 where external_id = 'd'")
    found = brain_sql.stats(conn)
    json.dumps(found)  # JSON-able as it is

    def added(name):
        return {k: v - before[name].get(k, 0) for k, v in found[name].items() if v != before[name].get(k, 0)}

    assert found["memories"] == before["memories"] + 4
    assert added("by_class") == {"memory": 2, "policy": 1, "reference": 1}
    assert added("by_scope") == {"/": 2, "/acme": 1, "/acme/eng": 1}
    assert added("by_source") == {"remember": 3, "crm": 1}
    assert added("decayed") == {"expired": 1, "expiring within 7 days": 1, "archived": 1}
    assert found["flagged"] == 1
    for table in ("documents", "entities", "relationships"):
        assert found[table] == rows(conn, f"select count(*) from {table}")[0][0] > 0, table
    assert {k: found[k] for k in ("model", "dimension", "schema_version")} == brain_sql.info(conn)
    assert found["file_bytes"] == os.path.getsize(vault_brain_copy)
    assert found["wal_bytes"] == os.path.getsize(f"{vault_brain_copy}-wal")
    # the buckets are the decayed page's: what it lists is what stats counted
    _, listed = brain_sql.decayed(conn)
    records = {i for (i,) in rows(conn, "select id from knowledge where external_id in ('a', 'b', 'c')")}
    ours = {r["id"]: r["decay"] for r in listed if r["id"] in records}
    assert sorted(ours.values()) == ["archived", "expired", "expiring within 7 days"]


def test_stats_of_an_empty_brain_and_of_a_file_that_is_not_one(conn, tmp_path):
    found = brain_sql.stats(conn)
    assert found["memories"] == found["entities"] == found["flagged"] == 0
    assert found["by_class"] == {} and found["decayed"] == {"expired": 0, "expiring within 7 days": 0, "archived": 0}
    plain = brain_sql.connect(tmp_path / "plain.db")
    with pytest.raises(brain_sql.BrainError, match="not a brain"):
        brain_sql.stats(plain)


def test_stats_inside_a_transaction_leaves_it_open(conn):
    conn.execute("begin")
    brain_sql.stats(conn)
    assert conn.in_transaction
    conn.execute("rollback")
