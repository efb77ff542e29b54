"""The JSON API through Datasette's own ASGI client: recall, verify, remember,
embeddings, permissions, errors, and inputs that once gave a 500."""

import html
import json
import sqlite3 as stdlib_sqlite3
import threading

import pytest
from datasette.app import Datasette
from mcp import Client
from mcp.server.mcpserver import MCPServer

import brain_sql
from brain_sql import for_plugin
from datasette_brain import mcp_tools

from .conftest import read_slots_taken, warmed

CANNED_JSON = "/brain/recall.json?q=graph+leg&scope=&classes=&sources=&domain=&since=&until="


@pytest.fixture
def plain_path(tmp_path):
    path = tmp_path / "plain.db"
    stdlib_sqlite3.connect(path).execute("create table t (x)")
    return path


def actor_cookie(datasette, actor_id):
    return {"ds_actor": datasette.sign({"a": {"id": actor_id}}, "actor")}


@pytest.mark.asyncio
async def test_recall_get_and_post(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)])
    got = await datasette.client.get("/brain/-/recall", params={"q": "what does the graph leg do", "k": "3"})
    assert got.status_code == 200
    body = got.json()
    assert body["decision"] == "ok" and body["hits"][0]["title"] == "Graph Leg"
    assert {"quality", "telemetry"} <= set(body)
    posted = await datasette.client.post("/brain/-/recall", json={"q": "what does the graph leg do", "k": 3})
    assert [h["id"] for h in posted.json()["hits"]] == [h["id"] for h in body["hits"]]
    # one brain in the instance: /-/recall finds it
    short = await datasette.client.get("/-/recall", params={"q": "what does the graph leg do", "k": "3"})
    assert [h["id"] for h in short.json()["hits"]] == [h["id"] for h in body["hits"]]


@pytest.mark.asyncio
async def test_a_post_with_fields_in_its_url_is_refused_by_name(vault_brain_path):
    """A JSON post reads its fields from the body: a scope put in the URL would be
    dropped without a word, so it is a 400 naming it, and nothing is stored."""
    datasette = Datasette([str(vault_brain_path)])
    recalled = await datasette.client.post("/brain/-/recall?scope=/acme/support&k=abc", json={"q": "discount"})
    assert recalled.status_code == 400 and "not in the URL" in recalled.json()["error"]
    assert "scope" in recalled.json()["error"] and "k" in recalled.json()["error"]
    count = brain_sql.connect(vault_brain_path).execute("select count(*) from knowledge").fetchone()[0]
    remembered = await datasette.client.post("/brain/-/remember?_id=x", json={"text": "A note.", "_id": "y"})
    assert remembered.status_code in (400, 403) and remembered.status_code != 201
    assert brain_sql.connect(vault_brain_path).execute("select count(*) from knowledge").fetchone()[0] == count
    assert (await datasette.client.post("/brain/-/recall", json={"q": "discount"})).status_code == 200


@pytest.mark.asyncio
async def test_recall_lists_and_flags_from_query_string(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)])
    response = await datasette.client.get(
        "/brain/-/recall", params={"q": "graph leg", "classes": "memory,policy", "graph": "false", "k": "2"}
    )
    assert response.status_code == 200
    assert all(h["provenance"]["graph_rank"] is None for h in response.json()["hits"])


@pytest.mark.asyncio
async def test_routes_exist_only_for_brains(vault_brain_path, plain_path):
    datasette = Datasette([str(vault_brain_path), str(plain_path)])
    for path in ("/plain/-/recall", "/missing/-/recall", "/plain/-/verify"):
        response = await datasette.client.get(path, params={"q": "x"})
        assert response.status_code == 404
        assert response.json()["ok"] is False
    assert "not a brain" in (await datasette.client.get("/plain/-/recall", params={"q": "x"})).json()["error"]


@pytest.mark.asyncio
async def test_two_brains_need_the_database_in_the_path(vault_brain_path, tmp_path):
    other = tmp_path / "other.db"
    brain_sql.migrate(brain_sql.connect(other))
    datasette = Datasette([str(vault_brain_path), str(other)])
    response = await datasette.client.get("/-/recall", params={"q": "x"})
    assert response.status_code == 400 and "2 brain databases" in response.json()["error"]


@pytest.mark.asyncio
async def test_without_a_database_only_the_brains_the_caller_may_view_count(vault_brain_path, tmp_path):
    """/-/recall (and MCP brain_recall) without a database names none the caller may not
    view: to them, the instance has the brains they may view, and one is the one."""
    other = tmp_path / "other.db"
    brain_sql.migrate(brain_sql.connect(other))
    admin = {"id": "admin"}
    datasette = Datasette([str(vault_brain_path), str(other)], metadata={"databases": {"other": {"allow": admin}}})
    cookies = {"ds_actor": datasette.sign({"a": admin}, "actor")}
    alone = Datasette([str(vault_brain_path)])
    shown = await datasette.client.get("/-/recall", params={"q": "graph leg", "now": "2026-01-01"})
    assert shown.status_code == 200, shown.text
    expected = (await alone.client.get("/-/recall", params={"q": "graph leg", "now": "2026-01-01"})).json()
    assert [hit["id"] for hit in shown.json()["hits"]] == [hit["id"] for hit in expected["hits"]]
    both = await datasette.client.get("/-/recall", params={"q": "x"}, cookies=cookies)
    assert both.status_code == 400 and "2 brain databases: name one (brain, other)" in both.json()["error"]
    closed = Datasette([str(vault_brain_path), str(other)], metadata={"allow": admin})
    refused = await closed.client.get("/-/recall", params={"q": "x"})
    assert refused.status_code == 403 and "brain" not in refused.text and "other" not in refused.text
    # a brain the caller may view but whose memories it may not read answers nothing: not counted either
    memories = {"databases": {"other": {"tables": {"knowledge": {"allow": admin}}}}}
    unread = Datasette([str(vault_brain_path), str(other)], metadata=memories)
    answered = await unread.client.get("/-/recall", params={"q": "graph leg", "now": "2026-01-01"})
    assert answered.status_code == 200, answered.text
    assert [hit["id"] for hit in answered.json()["hits"]] == [hit["id"] for hit in expected["hits"]]


BAD_RECALLS = [
    (b"{not json", "not valid JSON"),
    (json.dumps(["q"]).encode(), "must be a JSON object"),
    (json.dumps({"q": 5}).encode(), "q must be a string"),
    (json.dumps({"q": "x", "k": 101}).encode(), "k must be from 1 to 100"),
    (json.dumps({"q": "x", "k": "ten"}).encode(), "k must be a whole number"),
    (json.dumps({"q": "x", "nope": 1}).encode(), "unknown field: nope"),
    (json.dumps({"q": "x" * 2001}).encode(), "limit is 2000"),
    (json.dumps({"q": "x", "since": "last blue moon"}).encode(), "is not a date"),
    (json.dumps({"q": "x", "now": "2026-13-45"}).encode(), "is not a date"),
    (json.dumps({"q": "x", "as_of": "once upon a time"}).encode(), 'as_of "once upon a time" is not a date'),
    (json.dumps({"q": "x", "as_of": 2025}).encode(), "as_of must be a string"),
    (json.dumps({"q": "x", "as_of": "-99999y"}).encode(), 'as_of "-99999y" is out of range'),
    # the time that stands for never: no memory holds then (review 68: "ok", no candidates, "return")
    (json.dumps({"q": "x", "as_of": "9999-12-31T23:59:59"}).encode(), "as_of must be before 9999-12-31 23:59:59"),
    (json.dumps({"q": "x", "now": "9999-12-31 23:59:59"}).encode(), "now must be before 9999-12-31 23:59:59"),
    (json.dumps({"q": "x", "scope": "../etc"}).encode(), "scope must be a path"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("body, message", BAD_RECALLS)
async def test_bad_recall_is_a_400_naming_the_problem(vault_brain_path, body, message):
    datasette = Datasette([str(vault_brain_path)])
    response = await datasette.client.post(
        "/brain/-/recall", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    error = response.json()
    assert error["ok"] is False and error["status"] == 400 and message in error["error"]


@pytest.mark.asyncio
async def test_bad_query_string_is_a_400(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)])
    for params in (
        {"q": "x", "k": "many"},
        {"q": "x", "graph": "maybe"},
        {},
        {"q": "x", "until": "-3 fortnights"},
        {"q": "x", "as_of": "yesteryear"},
    ):
        response = await datasette.client.get("/brain/-/recall", params=params)
        assert response.status_code == 400, params


@pytest.mark.asyncio
async def test_recall_is_not_cut_by_the_sql_time_limit(vault_brain_path):
    datasette = await warmed(Datasette([str(vault_brain_path)], settings={"sql_time_limit_ms": 1}))
    response = await datasette.client.get("/brain/-/recall", params={"q": "what does the graph leg do"})
    assert response.status_code == 200 and response.json()["decision"] == "ok"


@pytest.mark.asyncio
async def test_actor_denied_the_database_gets_403_everywhere(served_brain):
    metadata = {"databases": {"brain": {"allow": {"id": "alice"}}}}
    datasette = Datasette([str(served_brain)], metadata=metadata)
    requests = [
        ("get", "/brain/-/recall", {"params": {"q": "graph"}}),
        ("post", "/brain/-/recall", {"json": {"q": "graph"}}),
        ("post", "/brain/-/verify", {"json": {"claim": "graph", "text": "graph"}}),
        ("post", "/brain/-/remember", {"json": {"text": "hello"}}),
    ]
    for method, path, kwargs in requests:
        denied = await getattr(datasette.client, method)(path, **kwargs)
        assert denied.status_code == 403, path
        assert denied.json()["ok"] is False
    allowed = await datasette.client.get(
        "/brain/-/recall", params={"q": "graph"}, cookies=actor_cookie(datasette, "alice")
    )
    assert allowed.status_code == 200


@pytest.mark.asyncio
async def test_remember_needs_brain_write(tmp_path):
    path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(path))
    record = {"title": "Wifi", "text": "The guest wifi password rotates every month.", "scope": "/office"}
    closed = Datasette([str(path)])
    denied = await closed.client.post("/brain/-/remember", json=record, cookies=actor_cookie(closed, "agent"))
    assert denied.status_code == 403 and "brain-write" in denied.json()["error"]
    config = {"plugins": {"datasette-brain": {"allow_write": {"id": "agent"}}}}
    datasette = Datasette([str(path)], metadata=config)
    anonymous = await datasette.client.post("/brain/-/remember", json=record)
    assert anonymous.status_code == 403
    stored = await datasette.client.post("/brain/-/remember", json=record, cookies=actor_cookie(datasette, "agent"))
    assert stored.status_code == 201, stored.text
    [[memory_id]] = stored.json()["ids"]
    found = await datasette.client.post("/brain/-/recall", json={"q": "guest wifi password", "scope": "/office"})
    assert found.json()["hits"][0]["id"] == memory_id
    again = await datasette.client.post("/brain/-/remember", json=record, cookies=actor_cookie(datasette, "agent"))
    assert again.json()["ids"] == [[memory_id]] and again.json()["added"] == 0  # deduplicated


@pytest.mark.asyncio
async def test_bad_remember_writes_nothing(tmp_path):
    path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(path))
    datasette = Datasette([str(path)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
    batch = [{"title": "Good", "text": "A fine memory."}, {"title": "Bad", "text": "x", "class": "gossip"}]
    response = await datasette.client.post("/brain/-/remember", json=batch)
    assert response.status_code == 400 and "record 2: class must be one of" in response.json()["error"]
    assert brain_sql.connect(path).execute("select count(*) from knowledge").fetchone()[0] == 0
    for body in ([], "text", {"title": "no text"}):
        response = await datasette.client.post("/brain/-/remember", json=body)
        assert response.status_code == 400, body
    # a list wrapped as another API takes it is named, not read as one record without text
    response = await datasette.client.post("/brain/-/remember", json={"records": batch[:1]})
    assert response.status_code == 400 and "only key is 'records'" in response.json()["error"]
    assert "send the list of records itself" in response.json()["error"]
    assert brain_sql.connect(path).execute("select count(*) from knowledge").fetchone()[0] == 0


@pytest.mark.asyncio
async def test_verify_by_id_and_by_text(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)])
    conn = brain_sql.connect(vault_brain_path)
    memory_id, content = conn.execute("select id, content from knowledge where title = 'Recall'").fetchone()
    by_id = await datasette.client.post("/brain/-/verify", json={"claim": "reciprocal  RANK fusion", "id": memory_id})
    result = by_id.json()
    assert result["decision"] == "supported"
    assert [content[a:b].lower() for a, b in result["match_ranges"]] == ["reciprocal rank fusion"]
    by_text = await datasette.client.post("/brain/-/verify", json={"claim": "the moon", "text": "cheese"})
    assert by_text.json() == {"supported": False, "decision": "unsupported", "match_ranges": []}
    for body, status in (
        ({"claim": "x"}, 400),
        ({"claim": "x", "id": 99999}, 404),
        ({"claim": "x", "id": "1"}, 400),
        ({"claim": "x", "text": "y", "id": 1}, 400),
        ({"claim": 3, "text": "y"}, 400),
    ):
        response = await datasette.client.post("/brain/-/verify", json=body)
        assert response.status_code == status, body


@pytest.mark.asyncio
async def test_verify_of_a_text_takes_a_read_slot_and_a_thread(vault_brain_path, monkeypatch):
    """A claim checked against a text (up to a million characters) is work for one of
    the threads, in a read slot like a recall's: never on the server's loop, where it
    held every other request (review 87); with no slot free, a 503 to try again."""
    datasette = Datasette([str(vault_brain_path)], settings={"num_sql_threads": 2})
    ran_on, verify = [], brain_sql.verify
    monkeypatch.setattr(
        brain_sql, "verify", lambda claim, text: ran_on.append(threading.get_ident()) or verify(claim, text)
    )
    response = await datasette.client.post("/brain/-/verify", json={"claim": "pager", "text": "the PAGER alerts"})
    assert response.json()["match_ranges"] == [[4, 9]]
    assert ran_on and ran_on[0] != threading.get_ident()
    async with read_slots_taken(datasette, monkeypatch):
        busy = await datasette.client.post("/brain/-/verify", json={"claim": "pager", "text": "the pager"})
    assert busy.status_code == 503 and busy.headers["retry-after"]


@pytest.mark.asyncio
async def test_an_entity_page_is_drawn_in_a_read_slot(vault_brain_path, monkeypatch):
    """An entity's neighbourhood and its drawings (a hub's take a second) are made on a
    thread in a read slot, as a recall is (review 87): with none free, a 503 to retry."""
    datasette = Datasette([str(vault_brain_path)], settings={"num_sql_threads": 2})
    dana = (
        brain_sql.connect(vault_brain_path)
        .execute("select id from entities where name = 'Dana Whitfield'")
        .fetchone()[0]
    )
    page = await datasette.client.get(f"/brain/-/entity/{dana}?hops=2")
    assert page.status_code == 200 and "<svg" in page.text
    assert (await datasette.client.get("/brain/-/entity/999999")).status_code == 404
    async with read_slots_taken(datasette, monkeypatch):
        busy = await datasette.client.get(f"/brain/-/entity/{dana}")
    assert busy.status_code == 503 and busy.headers["retry-after"]


@pytest.mark.asyncio
async def test_openai_compatible_embeddings(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)])
    single = (await datasette.client.post("/-/brain/v1/embeddings", json={"input": "memory palace"})).json()
    assert single["object"] == "list" and single["model"] == "wordllama/l2_supercat"
    assert single["data"][0]["object"] == "embedding" and len(single["data"][0]["embedding"]) == 256
    assert single["usage"]["prompt_tokens"] > 0
    batch = (await datasette.client.post("/-/brain/v1/embeddings", json={"input": ["memory palace", "graph"]})).json()
    assert [d["index"] for d in batch["data"]] == [0, 1]
    assert batch["data"][0]["embedding"] == single["data"][0]["embedding"]
    # one model served: whatever model the client names, the brain's embeds (and is named)
    named = (
        await datasette.client.post("/-/brain/v1/embeddings", json={"input": "x", "model": "/no/such/model"})
    ).json()
    assert named["model"] == "wordllama/l2_supercat"
    for body in (
        {},
        {"input": []},
        {"input": [1, 2]},
        {"input": ""},
        {"input": "x", "model": 3},
        {"input": "x", "k": 1},
    ):
        response = await datasette.client.post("/-/brain/v1/embeddings", json=body)
        assert response.status_code == 400, body
        error = response.json()["error"]  # OpenAI's shape
        assert error["message"] and error["type"] == "invalid_request_error" and "param" in error and "code" in error


@pytest.mark.asyncio
async def test_form_posts_need_the_csrf_token(tmp_path):
    path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(path))
    datasette = Datasette([str(path)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
    cookies = {**actor_cookie(datasette, "agent"), "ds_csrftoken": "anything"}
    forged = await datasette.client.post("/brain/-/remember", data={"text": "forged memory"}, cookies=cookies)
    assert forged.status_code == 403 and "application/json" in forged.json()["error"]
    for route in ("/brain/-/remember", "/brain/-/forget"):
        plain = await datasette.client.post(
            route, content=b'{"text": "forged", "ids": [1]}', cookies=cookies, headers={"content-type": "text/plain"}
        )
        assert plain.status_code == 403 and plain.json()["ok"] is False, route
    assert brain_sql.connect(path).execute("select count(*) from knowledge").fetchone()[0] == 0


@pytest.mark.asyncio
async def test_inputs_that_once_gave_500s(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)])
    checks = [
        ("get", "/brain/-/recall", {"params": {"q": "x", "k": "²"}}, 400),
        ("get", "/brain/-/recall", {"params": {"q": "x", "since": "-99999y"}}, 400),
        ("get", "/brain/-/recall", {"params": {"q": "graph leg before 9999-12-31 in the last 99999999 years"}}, 200),
        ("post", "/brain/-/recall", {"content": b"[" * 100_000, "headers": {"content-type": "application/json"}}, 400),
        ("get", "/brain/-/memory/99999999999999999", {}, 404),
        ("get", "/brain/-/memory/999999999999999999999", {}, 404),
        ("post", "/brain/-/verify", {"json": {"claim": "x", "id": 2**70}}, 400),
        ("get", "/brain/-/brain", {"params": {"q": "graph leg", "provenance": "false"}}, 200),
    ]
    for method, path, kwargs, status in checks:
        response = await getattr(datasette.client, method)(path, **kwargs)
        assert response.status_code == status, (path, kwargs, response.text[:200])


@pytest.mark.asyncio
async def test_table_permission_guards_the_memories(served_brain):
    metadata = {"databases": {"brain": {"tables": {"knowledge": {"allow": False}}}}}
    datasette = Datasette([str(served_brain)], metadata=metadata)
    for path in (
        "/brain/-/recall?q=graph",
        "/brain/-/memory/1",
        "/brain/-/decayed.json",
        "/brain/-/memories.json",
        "/brain/-/export.jsonl",
    ):
        assert (await datasette.client.get(path)).status_code == 403, path


@pytest.mark.asyncio
async def test_a_scope_with_a_control_character_is_refused(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)])
    for scope in ("/b\x00", "/b\n"):
        response = await datasette.client.post("/brain/-/recall", json={"q": "graph leg", "scope": scope})
        assert response.status_code == 400 and "control characters" in response.json()["error"], scope


@pytest.mark.asyncio
async def test_a_deny_on_knowledge_covers_everything_derived_from_it(served_brain):
    metadata = {
        "databases": {
            "brain": {
                "tables": {"knowledge": {"allow": {"id": "admin"}}},
                "queries": {"recall": {"allow": {"id": "admin"}, "title": "Recall (admins)"}},
            }
        }
    }
    datasette = Datasette([str(served_brain)], metadata=metadata)
    anonymous = [
        "/brain/recall.json?q=graph+leg&scope=&classes=&sources=&domain=&since=&until=",
        "/brain/knowledge_fts.json?_search=graph",
        "/brain/knowledge_fts_vocab.json",
        "/brain/knowledge_fts_terms.json",
        "/brain/vec_knowledge.json",
        "/brain/documents.json",
        "/brain/entities.json",
        "/brain/relationships.json",
        "/brain/-/recall?q=graph",
        "/brain/-/memory/1",
        "/brain/-/entity/1",
        "/brain/-/memories.json",
        "/brain/-/export.jsonl",
        "/brain.json?sql=select+content+from+knowledge",
        "/brain/sqlite_sequence.json",
        "/brain/brain_mention_names.json",
        "/brain/brain_mention_names_seen.json",
    ]
    for path in anonymous:
        assert (await datasette.client.get(path)).status_code in (403, 404), path
    immutable = Datasette(immutables=[str(served_brain)], metadata=metadata)
    assert (await immutable.client.get("/brain.db")).status_code == 403  # the whole file, downloadable under -i
    listed = (await datasette.client.get("/brain.json")).json()
    assert not [t["name"] for t in listed["tables"] if for_plugin.derived_from_knowledge(t["name"])]
    admin = {"ds_actor": datasette.sign({"a": {"id": "admin"}}, "actor")}
    assert (await datasette.client.get("/brain/entities.json", cookies=admin)).status_code == 200
    assert (
        await datasette.client.get("/brain.json?sql=select+count(*)+from+knowledge", cookies=admin)
    ).status_code == 200
    canned = await datasette.client.get(anonymous[0], cookies=admin)
    assert canned.status_code == 200 and canned.json()["rows"]
    page = await datasette.client.get("/brain/recall", cookies=admin)
    assert "Recall (admins)" in page.text  # the metadata's own words for the query are kept


# canned queries of the brain's own, in its metadata: each reads the memories
CANNED = {
    "count_by_scope": "select scope, count(*) as n from knowledge group by scope",
    "titles": {"sql": "select title from knowledge where title like :p", "title": "Titles"},
}


@pytest.mark.asyncio
@pytest.mark.parametrize("deny", ["database", "table"])
async def test_a_brains_canned_queries_are_for_whoever_may_read_its_memories(served_brain, deny):
    admins = {"allow": {"id": "admin"}}
    brain = {"queries": CANNED, **(admins if deny == "database" else {"tables": {"knowledge": admins}})}
    datasette = Datasette([str(served_brain)], metadata={"databases": {"brain": brain}})
    admin = {"ds_actor": datasette.sign({"a": {"id": "admin"}}, "actor")}
    for path in ("/brain/count_by_scope.json", "/brain/titles.json?p=%25", "/brain/count_by_scope", "/brain/titles"):
        refused = await datasette.client.get(path)
        assert refused.status_code == 403 and "/acme" not in refused.text, path
        allowed = await datasette.client.get(path, cookies=admin)
        assert allowed.status_code == 200, path
    assert (await datasette.client.get("/brain/count_by_scope.json", cookies=admin)).json()["rows"]
    if deny == "table":  # the database page lists none of them to whoever may not run them
        listed = (await datasette.client.get("/brain.json")).json()
        assert not {q["name"] for q in listed["queries"]} & {"recall", *CANNED}
    listed = (await datasette.client.get("/brain.json", cookies=admin)).json()
    assert {"recall", *CANNED} <= {q["name"] for q in listed["queries"]}


@pytest.mark.asyncio
async def test_analyze_statistics_are_derived_from_the_memories(vault_brain_copy):
    """sqlite_stat4 samples every index's rows (entity names, scopes, source paths),
    sqlite_stat1 counts them: after `sqlite-utils analyze`, read by whoever may read knowledge alone."""
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute("analyze")
    names = {row[0] for row in conn.execute("select name from entities")}
    conn.close()
    metadata = {"databases": {"brain": {"tables": {"knowledge": {"allow": {"id": "admin"}}}}}}
    datasette = Datasette([str(vault_brain_copy)], metadata=metadata)
    paths = [
        "/brain/sqlite_stat4.json?idx=idx_entities_name",
        "/brain/sqlite_stat4.json?idx=idx_knowledge_scope",
        "/brain/SQLITE_STAT4.json",
        "/brain/sqlite_stat1.json",
        "/brain/sqlite_stat1.json?tbl=knowledge",
    ]
    for path in paths:
        response = await datasette.client.get(path)
        assert response.status_code in (403, 404) and not any(name in response.text for name in names), path
    listed = (await datasette.client.get("/brain.json")).json()
    assert not [t["name"] for t in listed["tables"] if t["name"].startswith("sqlite_stat")]
    admin = {"ds_actor": datasette.sign({"a": {"id": "admin"}}, "actor")}
    samples = await datasette.client.get(paths[0] + "&_shape=array", cookies=admin)
    assert samples.status_code == 200 and samples.json()


@pytest.mark.asyncio
async def test_a_deny_on_the_graph_tables_holds_on_the_pages(served_brain):
    metadata = {"databases": {"brain": {"tables": {"relationships": {"allow": False}}}}}
    datasette = Datasette([str(served_brain)], metadata=metadata)
    assert (await datasette.client.get("/brain/-/entity/1")).status_code == 403
    conn = brain_sql.connect(served_brain)
    [memory_id] = [
        r[0] for r in conn.execute("select knowledge_id from relationships where knowledge_id is not null limit 1")
    ]
    page = await datasette.client.get(f"/brain/-/memory/{memory_id}")
    open_page = await Datasette([str(served_brain)]).client.get(f"/brain/-/memory/{memory_id}")
    assert page.status_code == 200 and "/-/entity/" in open_page.text and "/-/entity/" not in page.text


@pytest.mark.asyncio
async def test_a_records_sections_are_given_the_lines_of_its_text_a_notes_of_its_file(tmp_path):
    """A record's lines are its own text's: its memory page said "lines 1–2" as if of
    its file (review 70)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "Orion.md").write_text("# Orion\n\nOrion is our vendor.\n\n## Terms\n\nPaid monthly.\n")
    text = "Deploys happen on Tuesdays.\n\n" + "\n\n".join(
        f"Step {i} of the deploy is written here." for i in range(80)
    )
    (tmp_path / "r.jsonl").write_text(json.dumps({"_id": "a", "text": text}) + "\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [notes, tmp_path / "r.jsonl"])
    datasette = Datasette([str(tmp_path / "brain.db")])
    note, record = (
        conn.execute("select min(id) from knowledge where source_path like ?", [pattern]).fetchone()[0]
        for pattern in ("%.md", "%.jsonl")
    )
    note_page = (await datasette.client.get(f"/brain/-/memory/{note}")).text
    record_page = (await datasette.client.get(f"/brain/-/memory/{record}")).text
    assert "lines 1–" in note_page and "of its text" not in note_page
    assert "of its text" in record_page


@pytest.mark.asyncio
async def test_flagged_memories_show_on_no_page(tmp_path):
    """Neither a flagged section's heading among its siblings, nor the entities
    and edges only flagged text stated, nor an entity known only from it."""
    notes = tmp_path / "notes"
    (notes).mkdir()
    (notes / "Orion.md").write_text(
        "# Orion\n\nOrion is our pager vendor.\n\n## Secret terms\n\n"
        "Orion pays a kickback to [[owned_by::Zebra Holdings]].\n\n## Support\n\nCall Orion.\n"
    )
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [notes])
    orion, zebra = (
        conn.execute("select id from entities where name = ?", [n]).fetchone()[0] for n in ("Orion", "Zebra Holdings")
    )
    first = conn.execute("select id from knowledge where heading_path = 'Orion'").fetchone()[0]
    datasette = Datasette([str(tmp_path / "brain.db")])
    before = [(await datasette.client.get(p)).text for p in (f"/brain/-/memory/{first}", f"/brain/-/entity/{orion}")]
    assert all("Secret terms" in t or "Zebra Holdings" in t for t in before)
    with conn:
        conn.execute("update knowledge set flagged = 1 where heading_path like '%Secret terms'")
    memory = await datasette.client.get(f"/brain/-/memory/{first}")
    assert memory.status_code == 200 and "Secret terms" not in memory.text and "Support" in memory.text
    orion_page = await datasette.client.get(f"/brain/-/entity/{orion}")
    assert (
        orion_page.status_code == 200 and "Zebra Holdings" not in orion_page.text and "kickback" not in orion_page.text
    )
    assert (await datasette.client.get(f"/brain/-/entity/{zebra}")).status_code == 404
    # a flagged note that states no edge at all: its own entity is gone from the pages too
    (notes / "Payroll.md").write_text("# Payroll\n\nThe payroll password is hunter2.\n")
    brain_sql.ingest(conn, [notes])
    payroll = conn.execute("select id from entities where name = 'Payroll'").fetchone()[0]
    assert (await datasette.client.get(f"/brain/-/entity/{payroll}")).status_code == 200
    with conn:
        conn.execute("update knowledge set flagged = 1 where title = 'Payroll'")
    assert (await datasette.client.get(f"/brain/-/entity/{payroll}")).status_code == 404


@pytest.mark.asyncio
async def test_a_body_past_the_limit_is_refused_as_it_arrives(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)])
    limit = 1_100_000

    async def chunks():  # no content-length: the server must count as it reads
        for _ in range(40):
            yield b" " * 100_000

    response = await datasette.client.post(
        "/brain/-/recall", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413 and "larger than the limit" in response.json()["error"]
    declared = await datasette.client.post(
        "/brain/-/recall", content=b" " * (limit + 1), headers={"content-type": "application/json"}
    )
    assert declared.status_code == 413
    # a body past the limit was a 400 once; it is a 413 now, and still names the limit
    big = await datasette.client.post(
        "/brain/-/recall",
        content=b"{" + b'"q": "' + b"x" * 1_200_000 + b'"}',
        headers={"content-type": "application/json"},
    )
    assert big.status_code == 413 and big.json()["status"] == 413 and "the limit is" in big.json()["error"]


@pytest.mark.asyncio
async def test_recalls_leave_a_thread_for_everything_else(vault_brain_path, monkeypatch):
    """With every recall slot taken, a table page still answers, and a recall that
    finds no slot in time is a 503 with Retry-After."""
    datasette = Datasette([str(vault_brain_path)], settings={"num_sql_threads": 2})
    async with read_slots_taken(datasette, monkeypatch):
        table = await datasette.client.get("/brain/knowledge.json?_size=1")
        busy = await datasette.client.get("/brain/-/recall", params={"q": "graph leg"})
    assert table.status_code == 200
    assert busy.status_code == 503 and busy.headers["retry-after"].isdigit() and "busy" in busy.json()["error"]
    assert (await datasette.client.get("/brain/-/recall", params={"q": "graph leg"})).status_code == 200


@pytest.mark.asyncio
async def test_remembers_take_a_read_slot_too(vault_brain_copy, monkeypatch):
    """A remember reads and embeds its records on one of Datasette's threads: with every
    read slot taken it is a 503 with Retry-After that stores nothing (review 49: 80
    large remembers at once took every thread, and a recall waited 31 s)."""
    datasette = Datasette(
        [str(vault_brain_copy)],
        settings={"num_sql_threads": 2},
        metadata={"plugins": {"datasette-brain": {"allow_write": True}}},
    )
    count = "select count(*) from knowledge"
    before = brain_sql.connect(vault_brain_copy).execute(count).fetchone()[0]
    async with read_slots_taken(datasette, monkeypatch):
        busy = await datasette.client.post("/brain/-/remember", json={"text": "Deploys happen on Mondays."})
    assert busy.status_code == 503 and busy.headers["retry-after"].isdigit() and "busy" in busy.json()["error"]
    assert brain_sql.connect(vault_brain_copy).execute(count).fetchone()[0] == before
    stored = await datasette.client.post("/brain/-/remember", json={"text": "Deploys happen on Mondays."})
    assert stored.status_code == 201, stored.text


@pytest.mark.asyncio
async def test_remember_on_an_immutable_brain_says_so(vault_brain_path):
    datasette = Datasette(
        immutables=[str(vault_brain_path)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}}
    )
    response = await datasette.client.post("/brain/-/remember", json={"text": "a memory"})
    assert response.status_code == 403 and "immutable" in response.json()["error"]
    assert (await datasette.client.get("/brain/-/recall", params={"q": "graph leg"})).status_code == 200


@pytest.mark.asyncio
async def test_new_routes_read_nothing_for_an_actor_denied_the_database_or_knowledge(served_brain):
    """The entities browser, the memory JSON, forget, the decayed actions and the
    MCP tools: a database deny and a deny on `knowledge` alone both read nothing."""
    denies = [
        {"databases": {"brain": {"allow": {"id": "owner"}}}},
        {"databases": {"brain": {"tables": {"knowledge": {"allow": {"id": "owner"}}}}}},
    ]
    for metadata in denies:
        metadata = {**metadata, "plugins": {"datasette-brain": {"allow_write": True}}}
        datasette = Datasette([str(served_brain)], metadata=metadata)
        for path in (
            "/brain/-/entities",
            "/brain/-/entities.json",
            "/brain/-/memory/1.json",
            "/brain/-/entity/1?hops=2",
        ):
            response = await datasette.client.get(path)
            assert response.status_code == 403 and "Graph Leg" not in response.text, (path, metadata)
        forget = await datasette.client.post("/brain/-/forget", json={"ids": [1]})
        assert forget.status_code == 403, metadata
        server = MCPServer("test")
        mcp_tools.register(datasette, server)
        async with Client(server) as client:
            for name, arguments in [
                ("brain_recall", {"q": "graph leg"}),
                ("brain_memory", {"id": 1}),
                ("brain_verify", {"claim": "graph", "id": 1}),
                ("brain_forget", {"ids": [1]}),
            ]:
                result = await client.call_tool(name, arguments)
                assert result.is_error and result.structured_content["status"] == 403, (name, metadata)
    assert brain_sql.connect(served_brain).execute("select count(*) from knowledge where id = 1").fetchone()[0] == 1


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "change, named, paths",
    [
        (
            "update knowledge set confidence = 'high' where title = 'Graph Leg'",
            "confidence: 'high'",  # named by check, never in an answer: the row may be any caller's
            ["/brain/-/recall?q=what+does+the+graph+leg+do", "/brain/-/brain?q=what+does+the+graph+leg+do"],
        ),
        (
            "update knowledge set title = cast(title as blob) where title = 'Graph Leg'",
            "title: a BLOB",
            [
                "/brain/-/recall?q=what+does+the+graph+leg+do",
                "/brain/-/memory/{knowledge}",
                "/brain/-/memory/{knowledge}.json",
            ],
        ),
        (
            "update brain_meta set value = '64' where key = 'dimension'",
            "brain_meta dimension value: '64'",
            ["/brain/-/recall?q=zzqx+unknown+words"],
        ),
        (
            "update brain_meta set value = 'nope/model' where key = 'model'",  # never fetched: not installed here
            "'nope/model', which is not a model installed here",
            # the recall canned query too: it said only that the log said why (review 152)
            ["/brain/-/recall?q=graph+leg", "/brain/-/brain?q=graph+leg", "/brain/recall?q=graph+leg", CANNED_JSON],
        ),
        (
            "update entities set name = cast(name as blob) where name = 'Graph Leg'",
            "name: a BLOB",
            ["/brain/-/entity/{entity}", "/brain/-/recall?q=graph+leg"],
        ),
    ],
)
async def test_values_of_the_wrong_kind_are_a_409_saying_to_run_check(vault_brain_copy, change, named, paths):
    """Plain SQL stores a value of any kind in any column; recall, the pages and
    MCP then answer 409 saying to run check, never a 500. A value of the wrong
    kind is not named there (its row may be one the caller may not read: review 15,
    F3): check names it; a model not installed here is."""
    conn = brain_sql.connect(vault_brain_copy)
    ids = {
        "knowledge": conn.execute("select id from knowledge where title = 'Graph Leg'").fetchone()[0],
        "entity": conn.execute("select id from entities where name = 'Graph Leg'").fetchone()[0],
    }
    conn.execute(change)
    conn.close()
    datasette = Datasette([str(vault_brain_copy)])
    for path in paths:
        response = await datasette.client.get(path.format(**ids))
        text = html.unescape(response.text)
        assert response.status_code == 409 and "run sqlite-utils brain check" in text, (path, text[:300])
        if "model" in named:
            assert named in text, (path, text[:300])
        else:
            assert "values of the wrong kind" in text and named not in text, (path, text[:300])
    server = MCPServer("test")
    mcp_tools.register(datasette, server)
    q = paths[0].split("q=")[-1].replace("+", " ") if "q=" in paths[0] else "graph leg"
    async with Client(server) as client:
        result = await client.call_tool("brain_recall", {"q": q})
    assert result.is_error and result.structured_content["status"] == 409, result


@pytest.mark.asyncio
async def test_a_brain_whose_model_is_not_installed_starts_quietly_and_recall_is_a_409(
    vault_brain_copy, monkeypatch, capsys
):
    """A model id no model here has (brain_meta set with plain SQL): the server's warm-up
    neither fetches it nor prints a traceback, and recall is a 409 saying what to run."""
    thread_errors = []
    monkeypatch.setattr(threading, "excepthook", thread_errors.append)
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute("update brain_meta set value = 'nope/model' where key = 'model'")
    conn.close()
    datasette = await warmed(Datasette([str(vault_brain_copy)]))
    response = await datasette.client.get("/brain/-/recall", params={"q": "graph leg"})
    assert response.status_code == 409 and "'nope/model'" in response.json()["error"], response.text
    assert "sqlite-utils brain reindex DB --model M" in response.json()["error"]
    logged = capsys.readouterr()
    assert not thread_errors and "Traceback" not in logged.err + logged.out, [e.exc_value for e in thread_errors]


@pytest.mark.asyncio
async def test_a_brain_whose_model_is_another_installed_width_is_a_409_until_repaired(vault_brain_copy, narrow_model):
    """brain_meta's model set with plain SQL to another installed model of another
    width: recall, the recall page and MCP answer 409 naming the model and both
    widths and saying to run check (never a 500); once check --repair sets it
    back, the same server recalls."""
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute("update brain_meta set value = ? where key = 'model'", (narrow_model,))
    conn.close()
    datasette = Datasette([str(vault_brain_copy)])
    for path in ("/brain/-/recall?q=graph+leg", "/brain/-/brain?q=graph+leg", "/brain/recall?q=graph+leg", CANNED_JSON):
        response = await datasette.client.get(path)
        text = html.unescape(response.text)
        assert response.status_code == 409, (path, text[:300])
        for named in (repr(narrow_model), "128 wide", "256 wide", "run sqlite-utils brain check"):
            assert named in text, (path, text[:300])
    server = MCPServer("test")
    mcp_tools.register(datasette, server)
    async with Client(server) as client:
        result = await client.call_tool("brain_recall", {"q": "graph leg"})
    assert result.is_error and result.structured_content["status"] == 409, result
    conn = brain_sql.connect(vault_brain_copy)
    assert brain_sql.check(conn, repair=True)["invalid_values"]
    assert brain_sql.check(conn) == {}
    conn.close()
    response = await datasette.client.get("/brain/-/recall", params={"q": "graph leg"})
    assert response.status_code == 200 and response.json()["hits"], response.text[:300]


@pytest.mark.asyncio
async def test_validity_ending_before_it_begins_and_look_alike_scopes_are_400s(tmp_path):
    """Over HTTP and MCP alike: a record valid_to before its valid_from, or a scope
    with a trailing space, a zero-width space, letters of two scripts, a slash or
    dash that is not / or -, a compatibility form, or reading like a scope the
    brain holds, is refused by name; nothing is stored."""
    path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(path))
    datasette = Datasette([str(path)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
    backwards = {"text": "Bob ran support.", "valid_from": "2025-01-01", "valid_to": "2024-01-01"}
    bad = [
        ("remember", backwards, "record 1: valid_to (2024-01-01 00:00:00) must be later than valid_from"),
        ("remember", {"text": "x", "scope": "/acme "}, 'record 1: scope "/acme " may not have a space at the start'),
        ("remember", {"text": "x", "scope": "/acme\u200b"}, "may not contain U+200B ZERO WIDTH SPACE"),
        ("recall", {"q": "support", "scope": "/acme\u200b"}, "may not contain U+200B ZERO WIDTH SPACE"),
        ("recall", {"q": "support", "scope": "/acme "}, "may not have a space at the start or end"),
        ("remember", {"text": "x", "scope": "/acme/e\u0301"}, "not in Unicode's composed form (NFC)"),
        ("recall", {"q": "support", "scope": "/acme/e\u0301"}, "write é as U+00E9"),
        ("remember", {"text": "x", "scope": "/acme\u2800"}, "may not contain U+2800 BRAILLE PATTERN BLANK"),
        ("recall", {"q": "support", "scope": "/acme\u2800"}, "may not contain U+2800 BRAILLE PATTERN BLANK"),
        ("remember", {"text": "x", "scope": "/acme/\u0301"}, "begins with U+0301 COMBINING ACUTE ACCENT"),
        ("remember", {"text": "x", "scope": "/\u0430cme"}, "U+0430 CYRILLIC SMALL LETTER A is CYRILLIC"),
        ("recall", {"q": "support", "scope": "/acme/supp\u043ert"}, "mixes letters of different scripts"),
        ("remember", {"text": "x", "scope": "/acme\u2215support"}, "U+2215 DIVISION SLASH: it reads as"),
        ("recall", {"q": "support", "scope": "/acme\u2044support"}, "U+2044 FRACTION SLASH: it reads as"),
        ("remember", {"text": "x", "scope": "/\ufb01nance"}, "U+FB01 LATIN SMALL LIGATURE FI, a compatibility form"),
        ("remember", {"text": "x", "scope": "/acme\u2010x"}, 'U+2010 HYPHEN: it reads as "-"'),
        ("remember", {"text": "x", "scope": "/acme\u30cesupport"}, "U+30CE KATAKANA LETTER NO beside Latin"),
        ("recall", {"q": "support", "scope": "/acme\ue000"}, "U+E000, a private-use character"),
        ("remember", {"title": "t", "text": "x", "entities": ["Dana\u200bW"]}, 'entities[] "Dana\\u200bW" may not'),
        ("remember", {"title": "zw\u202etitle", "text": "x"}, 'title "zw\\u202etitle" may not contain U+202E'),
        # the fields that group and filter memories follow scope's rule (review 10, F4)
        ("remember", {"text": "x", "source": "crm\u200b"}, 'source "crm\\u200b" may not contain U+200B'),
        ("remember", {"text": "x", "domain": "sales "}, 'domain "sales " may not begin or end with a space'),
        ("remember", {"text": "x", "owner": "ops\u00a0"}, 'owner "ops\\u00a0" may not contain U+00A0'),
        ("remember", {"text": "x", "region": "eu\u200e"}, "region"),
        ("remember", {"text": "x", "speaker": "Al\u200bice", "session_id": "s1"}, 'speaker "Al\\u200bice"'),
        ("remember", {"text": "x", "speaker": "Alice", "session_id": "s\u20601"}, 'session_id "s\\u20601"'),
        # and recall's filters on them, which would find nothing without a word (review 49)
        ("recall", {"q": "support", "sources": ["crm\u200b"]}, 'source "crm\\u200b" may not contain U+200B'),
        ("recall", {"q": "support", "sources": ["crm\u0000"]}, "may not contain control characters"),
        ("recall", {"q": "support", "domain": "ops\u0001"}, 'domain "ops\\u0001" may not contain control'),
        # whole Cyrillic: refused beside the /ace stored below, by name
        ("remember", {"text": "x", "scope": "/\u0430\u0441\u0435"}, 'reads like "/ace", a scope this brain holds'),
    ]
    stored = await datasette.client.post("/brain/-/remember", json={"text": "Ace of support.", "scope": "/ace"})
    assert stored.status_code == 201, stored.text
    for route, body, message in bad:
        response = await datasette.client.post(f"/brain/-/{route}", json=body)
        assert response.status_code == 400 and message in response.json()["error"], (body, response.text)
    server = MCPServer("test")
    mcp_tools.register(datasette, server)
    async with Client(server) as client:
        for route, body, message in bad:
            arguments = {"records": [body]} if route == "remember" else body
            result = await client.call_tool(f"brain_{route}", arguments)
            assert result.is_error and result.structured_content["status"] == 400, body
            assert message in result.structured_content["error"], (body, result.structured_content)
    assert brain_sql.connect(path).execute("select scope from knowledge").fetchall() == [("/ace",)]


NOT_AN_ID = "external_ids must be records' _ids: non-empty text or whole numbers"


@pytest.mark.asyncio
async def test_forget_takes_a_whole_number_external_id_as_remember_stored_it(tmp_path):
    """A record's `_id` may be text or a whole number (stored as its text), so forget
    takes both, over HTTP and MCP; anything else is refused by name."""
    path = tmp_path / "brain.db"
    brain_sql.migrate(brain_sql.connect(path))
    datasette = Datasette([str(path)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
    records = [{"_id": 1, "text": "one"}, {"_id": 2, "text": "two"}]
    stored = await datasette.client.post("/brain/-/remember", json=records)
    assert stored.status_code == 201, stored.text
    for value in (1.0, True, [1]):
        refused = await datasette.client.post("/brain/-/forget", json={"external_ids": [value]})
        assert refused.status_code == 400 and NOT_AN_ID in refused.json()["error"], value
    gone = await datasette.client.post("/brain/-/forget", json={"external_ids": [1]})
    assert gone.status_code == 200 and gone.json()["removed"]["external_ids"] == ["1"]
    server = MCPServer("test")
    mcp_tools.register(datasette, server)
    async with Client(server) as client:
        result = await client.call_tool("brain_forget", {"external_ids": [2]})
        assert not result.is_error and result.structured_content["removed"]["external_ids"] == ["2"]
        refused = await client.call_tool("brain_forget", {"external_ids": [2.5]})
        assert refused.is_error and NOT_AN_ID in refused.structured_content["error"]
    assert brain_sql.connect(path).execute("select count(*) from knowledge").fetchone()[0] == 0


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "damage",
    [
        "insert into knowledge_fts(knowledge_fts) values ('delete-all')",
        "update knowledge_fts_docsize set sz = x'00000000'",
    ],
)
async def test_a_full_text_index_plain_sql_damaged_is_a_409_saying_to_run_check(vault_brain_copy, damage):
    """Recall over HTTP, the recall page and MCP on a brain whose knowledge_fts lost
    its lengths: a 409 saying to run check, never a 500."""
    conn = stdlib_sqlite3.connect(vault_brain_copy)
    conn.execute(damage)
    conn.commit()
    conn.close()
    datasette = Datasette([str(vault_brain_copy)])
    for path in ("/brain/-/recall?q=graph+leg", "/-/recall?q=graph+leg", "/brain/-/brain?q=graph+leg"):
        response = await datasette.client.get(path)
        assert response.status_code == 409, (path, response.status_code, response.text[:300])
        assert "run sqlite-utils brain check" in html.unescape(response.text), (path, response.text[:300])
    server = MCPServer("test")
    mcp_tools.register(datasette, server)
    async with Client(server) as client:
        result = await client.call_tool("brain_recall", {"q": "graph leg"})
    assert result.is_error and result.structured_content["status"] == 409, result


@pytest.mark.asyncio
@pytest.mark.parametrize("setting", ["yes", ["agent"], {"id": {"nested": 1}}])
async def test_a_malformed_allow_write_is_a_503_naming_the_setting(vault_brain_copy, setting):
    """allow_write that is no allow block ("yes", a list): remember, forget and the
    decayed page answer a 503 naming the setting (the server's misconfiguration),
    never a 500, and nothing is written."""
    datasette = Datasette([str(vault_brain_copy)], metadata={"plugins": {"datasette-brain": {"allow_write": setting}}})
    before = stdlib_sqlite3.connect(vault_brain_copy).execute("select count(*) from knowledge").fetchone()[0]
    for path, body in (("/brain/-/remember", {"text": "A probe."}), ("/brain/-/forget", {"ids": [1]})):
        answer = await datasette.client.post(path, json=body)
        assert answer.status_code == 503 and "allow_write is malformed" in answer.json()["error"], answer.text
        assert answer.headers.get("retry-after")
    page = await datasette.client.get("/brain/-/decayed")
    assert page.status_code == 503 and "allow_write is malformed" in html.unescape(page.text), page.text[:300]
    assert stdlib_sqlite3.connect(vault_brain_copy).execute("select count(*) from knowledge").fetchone()[0] == before


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "method, path, body, named",
    [
        ("get", "/brain/-/decayed.json?now=zzz", None, '"now" is no parameter of the decayed page'),
        ("get", "/brain/-/entities.json?now=zzz", None, '"now" is no parameter of the entities page'),
        ("get", "/brain/-/entities?now=zzz&_format=json", None, '"now" is no parameter of the entities page'),
        ("get", "/brain/-/recall?q=graph&k=1&k=2", None, "k is given twice"),
        ("get", "/brain/-/memories.json?size=1&size=2", None, "size is given twice"),
        ("get", "/brain/-/entities.json?page=1&page=2", None, "page is given twice"),
        ("get", "/brain/-/decayed.json?size=1&size=2", None, "size is given twice"),
        ("post", "/brain/-/recall", b'{"q": "graph", "k": 1, "k": 2}', 'the key "k" of one object is given twice'),
        ("post", "/brain/-/remember", b'{"text": "a", "text": "b"}', 'the key "text" of one object is given twice'),
        ("post", "/brain/-/forget", b'{"ids": [1], "ids": [2]}', 'the key "ids" of one object is given twice'),
    ],
)
async def test_unknown_and_repeated_parameters_are_refused_by_name(vault_brain_copy, method, path, body, named):
    """The brain's JSON routes refuse a parameter they do not take, a query parameter
    given twice and a JSON key given twice (400 naming it), rather than pass it over
    or take one value; Datasette's _format is still taken, and nothing is written."""
    datasette = Datasette([str(vault_brain_copy)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
    before = stdlib_sqlite3.connect(vault_brain_copy).execute("select count(*) from knowledge").fetchone()[0]
    if method == "get":
        answer = await datasette.client.get(path)
    else:
        answer = await datasette.client.post(path, content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400 and named in answer.json()["error"], answer.text
    assert stdlib_sqlite3.connect(vault_brain_copy).execute("select count(*) from knowledge").fetchone()[0] == before
    for page in ("/brain/-/entities.json?_format=json&page=1", "/brain/-/decayed?_format=json"):
        assert (await datasette.client.get(page)).status_code == 200, page


@pytest.mark.asyncio
async def test_a_write_into_a_dropped_table_is_a_409_saying_to_run_check(vault_brain_copy):
    """/-/remember on a brain plain SQL dropped brain_changes of: a 409 saying to run
    check, not a 503 with Retry-After that a client would follow forever."""
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute("drop table brain_changes")
    conn.close()
    datasette = Datasette([str(vault_brain_copy)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
    answer = await datasette.client.post("/brain/-/remember", json={"text": "Deploys happen on Tuesdays."})
    assert answer.status_code == 409 and "run sqlite-utils brain check" in answer.json()["error"], answer.text
    assert "retry-after" not in answer.headers


@pytest.mark.asyncio
async def test_the_recall_page_takes_its_checkboxes_and_refuses_other_repeats(vault_brain_path):
    """The recall page's form sends a checked box as its hidden "false" then "true":
    taken as true; any other parameter given twice is refused by name (400)."""
    datasette = Datasette([str(vault_brain_path)])
    checked = await datasette.client.get("/brain/-/brain?q=graph+leg&prf=false&prf=true")
    assert checked.status_code == 200, checked.text[:300]
    repeated = await datasette.client.get("/brain/-/brain?q=graph+leg&k=1&k=2")
    assert repeated.status_code == 400 and "k is given twice" in html.unescape(repeated.text)


@pytest.mark.asyncio
async def test_a_method_a_route_does_not_take_is_a_405_naming_those_it_does(vault_brain_path):
    """A DELETE of a memory's URL answered 200 with the memory and deleted nothing; a
    PUT of a recall with a JSON body answered as a GET, its body ignored (review 112)."""
    datasette = Datasette([str(vault_brain_path)])
    routes = {
        "/brain/-/recall?q=graph": "GET, POST",
        "/brain/-/memory/1.json": "GET",
        "/brain/-/memory/1": "GET",
        "/brain/-/entities.json": "GET",
        "/brain/-/entity/1": "GET",
        "/brain/-/decayed.json": "GET",
        "/brain/-/brain?q=graph": "GET",
        "/brain/-/replica": "GET",
        "/brain/-/memories.json": "GET",
        "/brain/-/verify": "POST",
        "/-/brain/v1/models": "GET",
        "/-/brain/v1/embeddings": "POST",
    }
    for path, allowed in routes.items():
        for method in ("DELETE", "PUT", "PATCH"):
            answer = await datasette.client.request(method, path, json={"q": "graph", "k": 1})
            assert answer.status_code == 405 and answer.headers["Allow"] == allowed, (method, path, answer.text[:200])
        if "GET" in allowed:
            assert (await datasette.client.request("HEAD", path)).status_code == 200, path
        # a preflight is answered as Datasette's own views answer it (review 114: a 405 broke --cors)
        assert (await datasette.client.request("OPTIONS", path)).status_code == 200, path
    assert (await datasette.client.get("/brain/-/memory/1.json")).status_code == 200  # nothing deleted
    # the database's own JSON, its file figures hidden from whoever may not read a table (review 115: a 500)
    private = Datasette(
        [str(vault_brain_path)], metadata={"databases": {"brain": {"tables": {"documents": {"allow": False}}}}}
    )
    for method in ("GET", "HEAD", "OPTIONS"):
        assert (await private.client.request(method, "/brain.json")).status_code == 200, method


@pytest.mark.asyncio
async def test_a_caller_refused_the_brain_learns_nothing_of_its_model(vault_brain_copy):
    """The recall canned query names a model that cannot be used only to whoever ran it:
    a caller the database refuses gets Datasette's 403, also as CSV, whose every answer
    the plugin holds (it was a 409 naming the model: review 152)."""
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute("update brain_meta set value = 'nope/model' where key = 'model'")
    conn.close()
    datasette = Datasette([str(vault_brain_copy)], metadata={"databases": {"brain": {"allow": {"id": "owner"}}}})
    for path in ("/brain/recall.csv?q=graph+leg", "/brain/recall.csv?q=graph+leg&_stream=on", CANNED_JSON):
        response = await datasette.client.get(path)
        assert response.status_code == 403 and "nope/model" not in response.text, (path, response.text[:300])
    owner = {"ds_actor": datasette.sign({"a": {"id": "owner"}}, "actor")}
    response = await datasette.client.get("/brain/recall.csv?q=graph+leg", cookies=owner)
    assert response.status_code == 409 and "nope/model" in response.text, response.text[:300]
    response = await datasette.client.get("/brain/recall.csv?q=graph+leg&_timelimit=1", cookies=owner)
    assert response.status_code != 409, response.text[:300]  # the caller's own limit, answered as it is
