"""Datasette integration: metadata.yml, the canned recall query, the decay facet,
the decayed review JSON, and links from menus and actions."""

import sys
from pathlib import Path

import pytest
import yaml
from datasette.app import Datasette
from markupsafe import escape

from .conftest import copy_brain

METADATA = yaml.safe_load((Path(__file__).parent.parent / "metadata.yml").read_text())


@pytest.fixture(scope="module")
def demo(vault_brain_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    records = [
        {
            "_id": "gone",
            "title": "Old rota",
            "text": "The 2024 pager rota.",
            "expires_at": "2025-01-01",
            "class": "policy",
        },
        {"_id": "soon", "title": "Trial", "text": "The trial licence.", "expires_at": "2999-01-01"},
        {"_id": "archived", "title": "Archived", "text": "Kept for the record.", "relevance_tier": 0},
    ]
    return copy_brain(vault_brain_path, folder / "demo.db", records)


@pytest.mark.asyncio
async def test_metadata_titles_facets_and_search(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    table = (await datasette.client.get("/demo/knowledge.json?_shape=objects&_extra=facet_results")).json()
    assert {"class", "scope", "source", "domain", "decay"} <= set(table["facet_results"])
    decay = {r["value"]: r["count"] for r in table["facet_results"]["decay"]["results"]}
    assert decay["expired"] >= 1 and decay["archived"] >= 1 and decay["live"] > 1  # an archived memory is not live
    assert sum(decay.values()) == table["filtered_table_rows_count"]
    page = (await datasette.client.get("/demo/knowledge")).text
    assert "Memories" in page and 'name="_search"' in page
    found = (await datasette.client.get("/demo/knowledge.json?_search=reciprocal&_shape=objects")).json()
    assert [row["title"] for row in found["rows"]] == ["Recall"]


@pytest.mark.asyncio
async def test_decay_filter_selects_a_bucket(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    expired = (await datasette.client.get("/demo/knowledge.json?_decay=expired&_shape=objects")).json()
    assert "gone" in [row["external_id"] for row in expired["rows"]]
    archived = (await datasette.client.get("/demo/knowledge.json?_decay=archived&_shape=objects")).json()
    assert "archived" in [row["external_id"] for row in archived["rows"]]
    assert all(row["relevance_tier"] == 0 for row in archived["rows"])
    nothing = (await datasette.client.get("/demo/knowledge.json?_decay=someday&_shape=objects")).json()
    assert nothing["rows"] == []


@pytest.mark.asyncio
async def test_canned_recall_query_matches_the_api(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    params = {
        "q": "what does the graph leg do",
        "k": "5",
        "scope": "",
        "classes": "",
        "sources": "",
        "domain": "",
        "since": "",
        "until": "",
        "as_of": "",
        "_shape": "array",
    }
    canned = await datasette.client.get("/demo/recall.json", params=params)
    assert canned.status_code == 200, canned.text
    api = await datasette.client.post("/demo/-/recall", json={"q": "what does the graph leg do", "k": 5, "prf": False})
    assert [row["id"] for row in canned.json()] == [hit["id"] for hit in api.json()["hits"]]
    empty = await datasette.client.get("/demo/recall")
    assert empty.status_code == 200


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "params, named",
    [
        ({"since": "notadate"}, 'since "notadate" is not a date'),
        ({"as_of": "yesterday"}, 'as_of "yesterday" is not a date'),
        ({"scope": "acme"}, "scope must be a path starting with '/'"),
        ({"classes": "memory,bogus"}, "classes must be among memory, reference, policy, not bogus"),
        ({"k": "abc"}, "k must be a whole number"),
        ({"k": "-3"}, "k must be from 1 to 100, not -3"),  # not every row
    ],
)
async def test_the_canned_recall_query_names_a_bad_parameter(demo, params, named, monkeypatch, capsys):
    """SQLite says of a brain_* function's error only that it raised one, and Datasette
    logs that function's traceback: the parameters are read before SQLite runs the
    query, and its 400 names the one at fault, in its JSON and on its page, as the
    JSON API would, with no traceback in the server's log; whoever may not run it
    still gets Datasette's 403."""
    unraisable = []  # where Datasette's enable_callback_tracebacks sends a SQL function's exception
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    datasette = Datasette([str(demo)], metadata=METADATA)
    for shape in ({}, {"_shape": "array"}):
        answer = await datasette.client.get("/demo/recall.json", params={"q": "graph leg", **params, **shape})
        assert answer.status_code == 400 and named in answer.json()["error"], answer.text[:300]
    page = await datasette.client.get("/demo/recall", params={"q": "graph leg", **params})
    assert page.status_code == 400 and escape(named) in page.text
    private = Datasette([str(demo)], metadata={"databases": {"demo": {"tables": {"knowledge": {"allow": False}}}}})
    refused = await private.client.get("/demo/recall.json", params={"q": "graph leg", **params})
    assert refused.status_code == 403 and named not in refused.text
    logged = capsys.readouterr()
    assert not unraisable and "Traceback" not in logged.err + logged.out, [u.exc_value for u in unraisable]


@pytest.mark.asyncio
async def test_decayed_json_and_html(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    data = (await datasette.client.get("/demo/-/decayed.json")).json()
    decays = {row["title"]: row["decay"] for row in data["rows"]}
    assert {decays["Old rota"], decays["Archived"]} == {"expired", "archived"} and "Trial" not in decays
    assert (
        {"expired", "archived"}
        <= {f["value"] for f in data["facets"]["decay"]}
        <= {"expired", "expiring within 7 days", "archived"}
    )
    same = (await datasette.client.get("/demo/-/decayed", params={"_format": "json", "decay": "expired"})).json()
    assert "Old rota" in [row["title"] for row in same["rows"]] and {row["decay"] for row in same["rows"]} == {
        "expired"
    }
    html = (await datasette.client.get("/demo/-/decayed")).text
    assert f"{data['count']} memories" in html and 'id="facet-decay"' in html


@pytest.mark.asyncio
async def test_links_from_menu_database_and_table(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    home = (await datasette.client.get("/")).text
    assert "/demo/-/brain" in home
    database = (await datasette.client.get("/demo")).text
    assert "/demo/-/decayed" in database
    table = (await datasette.client.get("/demo/knowledge")).text
    assert "/demo/-/brain" in table and "/demo/-/decayed" in table


@pytest.mark.asyncio
async def test_links_only_for_actors_who_may_read_the_memories(demo):
    metadata = {"databases": {"demo": {"tables": {"knowledge": {"allow": {"id": "admin"}}}}}}
    datasette = Datasette([str(demo)], metadata=metadata, crossdb=True)
    anonymous = [(await datasette.client.get(path)).text for path in ("/", "/demo")]
    assert not [page for page in anonymous if "/demo/-/brain" in page or "/demo/-/decayed" in page]
    admin = {"ds_actor": datasette.sign({"a": {"id": "admin"}}, "actor")}
    pages = ("/", "/demo", "/demo/knowledge")
    home, database, table = [(await datasette.client.get(path, cookies=admin)).text for path in pages]
    assert "/demo/-/brain" in home and "/demo/-/decayed" in database and "/demo/-/brain" in table
    assert "/_memory/-/brain" not in home  # --crossdb's _memory attaches the brain, and is not one
