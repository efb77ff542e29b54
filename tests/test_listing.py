"""Listing what was stored: brain_sql.memories and GET /DB/-/memories.json —
newest first, a page at a time, recall's filters read recall's way, flagged
memories never listed nor counted, bad input a 400, a busy server a 503, and
nothing for whoever may not read the memories."""

import asyncio

import pytest
from datasette.app import Datasette

import brain_sql

from .conftest import read_slots_taken

NOW = "2026-06-01 00:00:00"
RECORDS = [
    {
        "_id": f"n{day}",
        "title": f"Note {day}",
        "text": f"What happened on day {day} of May.",
        "observed_at": f"2026-05-{day:02d}",
        "scope": scope,
        "class": klass,
        "source": source,
    }
    for day, scope, klass, source in [
        (1, "/", "memory", "crm"),
        (2, "/acme", "policy", "crm"),
        (3, "/acme/support", "memory", "chat"),
        (4, "/acme/sales", "memory", "chat"),
        (5, "/acme/support", "reference", "crm"),
        (6, "/", "memory", "chat"),
    ]
]


@pytest.fixture
def brain(tmp_path):
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    report, _ = brain_sql.remember(conn, RECORDS)
    assert not report.errors
    yield conn
    conn.close()


def listed(conn, **request):
    return [m["external_id"] for m in brain_sql.memories(conn, request)["memories"]]


def test_newest_first_a_page_at_a_time(brain):
    assert listed(brain) == ["n6", "n5", "n4", "n3", "n2", "n1"]
    first = brain_sql.memories(brain, {"size": 4})
    assert [m["external_id"] for m in first["memories"]] == ["n6", "n5", "n4", "n3"] and first["more"] is True
    last = brain_sql.memories(brain, {"size": 4, "page": 2})
    assert [m["external_id"] for m in last["memories"]] == ["n2", "n1"] and last["more"] is False
    assert brain_sql.memories(brain, {"page": 3, "size": 4})["memories"] == []
    row = first["memories"][0]
    assert (row["title"], row["content"], row["observed_at"]) == (
        "Note 6",
        "What happened on day 6 of May.",
        "2026-05-06 00:00:00",
    )
    assert {"id", "scope", "class", "source", "valid_from", "superseded_at", "expires_at"} <= set(row)


def test_recalls_filters_read_recalls_way(brain):
    # a scope is itself and its parents: never a sibling, never a child
    assert listed(brain, scope="/acme/support") == ["n6", "n5", "n3", "n2", "n1"]
    assert listed(brain, scope="/acme") == ["n6", "n2", "n1"]
    assert listed(brain, classes=["memory"], sources=["chat"]) == ["n6", "n4", "n3"]
    assert listed(brain, since="2026-05-03", until="2026-05-05") == ["n4", "n3"]
    assert listed(brain, since="-28d", now=NOW) == ["n6", "n5", "n4"]  # from 4 May
    answer = brain_sql.memories(brain, {"scope": "/acme/", "classes": "memory"})
    assert answer["query"] == {"scope": "/acme", "classes": ["memory"]}


def test_flagged_memories_are_never_listed_nor_counted(brain):
    brain_sql.flag(brain, [brain.execute("select id from knowledge where external_id = 'n3'").fetchone()[0]])
    assert listed(brain) == ["n6", "n5", "n4", "n2", "n1"]
    # five are visible: a page of five has no next page, however many rows are stored
    assert brain_sql.memories(brain, {"size": 5})["more"] is False


@pytest.mark.parametrize(
    "request_, field, words",
    [
        ({"size": 0}, "size", "size must be a whole number from 1 to 1,000"),
        ({"size": 1001}, "size", "from 1 to 1,000"),
        ({"page": "2"}, "page", "page must be a whole number"),
        ({"page": True}, "page", "page must be a whole number"),
        ({"limit": 5}, None, "unknown field: limit (did you mean size?)"),
        ({"q": "x"}, None, "unknown field: q"),
        ({"scope": "acme"}, "scope", "scope must be a path"),
        ({"classes": ["bogus"]}, "classes", "classes must be among"),
        ({"since": "yesterday"}, "since", "is not a date"),
    ],
)
def test_bad_requests_name_the_field(brain, request_, field, words):
    with pytest.raises(brain_sql.QueryError) as raised:
        brain_sql.memories(brain, request_)
    assert words in str(raised.value) and raised.value.field == field


def get(datasette, path):
    return asyncio.run(datasette.client.get(path))


def test_the_route_answers_as_the_library(brain):
    path = brain.execute("select file from pragma_database_list").fetchone()[0]
    datasette = Datasette([path])
    response = get(datasette, "/brain/-/memories.json?scope=/acme/support&classes=memory,reference&size=2&page=2")
    assert response.status_code == 200
    expected = brain_sql.memories(
        brain, {"scope": "/acme/support", "classes": ["memory", "reference"], "size": 2, "page": 2}
    )
    assert response.json() == expected and [m["external_id"] for m in expected["memories"]] == ["n3", "n1"]
    for query, words in [
        ("size=x", "size must be a whole number"),
        ("limit=2", "did you mean size?"),
        ("scope=acme", "scope must be a path"),
        ("since=soon", "is not a date"),
    ]:
        refused = get(datasette, f"/brain/-/memories.json?{query}")
        assert refused.status_code == 400 and words in refused.json()["error"], query
        assert set(refused.json()) == {"ok", "error", "status"}
    posted = asyncio.run(datasette.client.post("/brain/-/memories.json", json={}))
    assert posted.status_code == 405 and posted.headers["allow"] == "GET"


@pytest.mark.parametrize(
    "denied", [{"allow": False}, {"databases": {"brain": {"tables": {"knowledge": {"allow": False}}}}}]
)
def test_whoever_may_not_read_the_memories_lists_nothing(brain, denied):
    path = brain.execute("select file from pragma_database_list").fetchone()[0]
    response = get(Datasette([path], metadata=denied), "/brain/-/memories.json")
    assert response.status_code == 403 and response.json()["ok"] is False
    assert "n1" not in response.text


def test_a_busy_server_says_when_to_try_again(brain, monkeypatch):
    """With every read slot taken (one, of two SQL threads), a listing waits its
    bound and is a 503 with Retry-After; once one is free it is answered."""
    path = brain.execute("select file from pragma_database_list").fetchone()[0]
    datasette = Datasette([path], settings={"num_sql_threads": 2})

    async def scenario():
        async with read_slots_taken(datasette, monkeypatch):
            busy = await datasette.client.get("/brain/-/memories.json")
        return busy, await datasette.client.get("/brain/-/memories.json")

    busy, answered = asyncio.run(scenario())
    assert busy.status_code == 503 and busy.headers["retry-after"] == "2" and "try again" in busy.json()["error"]
    assert answered.status_code == 200 and len(answered.json()["memories"]) == 6
