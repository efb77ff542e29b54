"""Datasette's own pages on a brain, with and without metadata.yml: links to the
memory and entity pages, [[wikilinks]] linked safely, internals hidden, search
on the knowledge table, useful columns first, and HTML error pages."""

import re
import sqlite3
from pathlib import Path

import pytest
import yaml
from datasette.app import Datasette

import brain_sql

from .conftest import copy_brain

METADATA = yaml.safe_load((Path(__file__).parent.parent / "metadata.yml").read_text())
HOSTILE = "[[mentions::<img src=x onerror=alert(1)>]] and <script>alert(2)</script> " + "long text " * 60


@pytest.fixture(scope="module")
def demo(vault_brain_path, tmp_path_factory):
    records = [{"_id": "hostile", "title": "<b>Hostile</b>", "text": HOSTILE}]
    return copy_brain(vault_brain_path, tmp_path_factory.mktemp("links") / "demo.db", records)


@pytest.fixture(params=["plain", "metadata"])
def datasette(demo, request):
    return Datasette([str(demo)], metadata=METADATA if request.param == "metadata" else None)


def ids(demo, sql, params=()):
    conn = brain_sql.connect(demo)
    try:
        return conn.execute(sql, params).fetchone()
    finally:
        conn.close()


def cells(html, column):
    return re.findall(rf'<td class="col-{column}[^"]*">(.*?)</td>', html, re.S)


@pytest.mark.asyncio
async def test_internal_tables_hidden_and_links_in_the_database_page(datasette):
    listed = (await datasette.client.get("/demo.json")).json()["tables"]
    shown = {table["name"] for table in listed if not table["hidden"]}
    assert shown == {"knowledge", "entities", "relationships", "documents"}
    assert {"vec_knowledge", "vec_knowledge_rowids", "knowledge_fts_data", "brain_changes"} <= {
        t["name"] for t in listed
    }
    page = (await datasette.client.get("/demo")).text
    body = page[page.index("<h1") :]
    for href in ("/demo/-/brain", "/demo/-/decayed", "/demo/-/entities"):
        assert f'href="{href}"' in body
    assert "vec_knowledge_rowids" not in body.split("hidden table")[0]


@pytest.mark.asyncio
async def test_knowledge_search_and_columns(datasette):
    found = (await datasette.client.get("/demo/knowledge.json?_search=reciprocal&_shape=objects")).json()
    assert [row["title"] for row in found["rows"]] == ["Recall"]
    page = (await datasette.client.get("/demo/knowledge?_search=graph")).text
    assert 'name="_search"' in page
    headers = re.findall(r'<th class="col-([a-z_]+)"', page)
    assert headers[:5] == ["id", "title", "content", "class", "scope"]
    assert headers.index("source") < headers.index("knowledge_type") and headers.index("expires_at") < headers.index(
        "content_hash"
    )
    # each row's cells follow the headers, and its link leads to the memory page
    first = re.search(r"<tbody>\s*<tr>(.*?)</tr>", page, re.S).group(1)
    assert re.findall(r'<td class="col-([a-z_]+)', first) == headers
    assert re.search(r'<td class="col-id type-pk"><a href="/demo/-/memory/\d+">\d+</a></td>', first)


@pytest.mark.asyncio
async def test_knowledge_cells_link_and_stay_short(datasette, demo):
    hostile_id = ids(demo, "select id from knowledge where external_id = 'hostile'")[0]
    entity_id = ids(demo, "select id from entities where name = ?", ("<img src=x onerror=alert(1)>",))[0]
    page = (await datasette.client.get(f"/demo/knowledge?id={hostile_id}")).text
    assert cells(page, "title") == [f'<a href="/demo/-/memory/{hostile_id}">&lt;b&gt;Hostile&lt;/b&gt;</a>']
    content = cells(page, "content")[0]
    assert content.startswith(
        f'<a href="/demo/-/entity/{entity_id}" class="brain-entity-link">'
        "[[mentions::&lt;img src=x onerror=alert(1)&gt;]]</a>"
        " and &lt;script&gt;alert(2)&lt;/script&gt;"
    )
    assert content.endswith(f'… <a href="/demo/-/memory/{hostile_id}" class="brain-more">more</a>')
    assert len(re.sub(r"<[^>]+>", "", content)) < 300
    assert "<script>" not in page.split("</nav>")[-1].split("<script")[0]


@pytest.mark.asyncio
async def test_graph_tables_link_to_entity_and_memory_pages(datasette, demo):
    edge = ids(
        demo, "select id, from_entity_id, to_entity_id, knowledge_id from relationships where knowledge_id is not null"
    )
    page = (await datasette.client.get(f"/demo/relationships?id={edge[0]}")).text
    assert cells(page, "from_entity_id")[0].startswith(f'<a href="/demo/-/entity/{edge[1]}">')
    assert cells(page, "to_entity_id")[0].startswith(f'<a href="/demo/-/entity/{edge[2]}">')
    assert cells(page, "knowledge_id")[0].startswith(f'<a href="/demo/-/memory/{edge[3]}">')
    entity = ids(demo, "select id, name from entities where name = 'Recall'")
    page = (await datasette.client.get(f"/demo/entities?id={entity[0]}")).text
    assert cells(page, "name") == [f'<a href="/demo/-/entity/{entity[0]}">Recall</a>']
    assert cells(page, "id") == [f'<a href="/demo/-/entity/{entity[0]}">{entity[0]}</a>']


@pytest.mark.asyncio
async def test_canned_recall_query_links_and_hides_its_sql(datasette):
    page = (await datasette.client.get("/demo/recall", params={"q": "what does the graph leg do", "k": "3"})).text
    assert re.search(r"<title>demo: Recall</title>", page)
    assert 'id="sql-query"' not in page and "<textarea" not in page  # the SQL is one click away
    assert re.match(r'<a href="/demo/-/memory/\d+">\d+</a>$', cells(page, "id")[0])
    assert re.match(r'<a href="/demo/-/memory/\d+">Graph Leg</a>$', cells(page, "title")[0])
    assert re.match(r"0\.\d{4}$", cells(page, "score")[0])  # rounded
    assert 'id="sql-query"' in (await datasette.client.get("/demo/recall?_show_sql=1")).text


@pytest.mark.asyncio
async def test_memory_page_links_wikilinks_safely(datasette, demo):
    memory_id = ids(demo, "select id from knowledge where content like '%[[Brain File]]%'")[0]
    entity_id = ids(demo, "select id from entities where name = 'Brain File'")[0]
    page = (await datasette.client.get(f"/demo/-/memory/{memory_id}")).text
    assert f'<a href="/demo/-/entity/{entity_id}" class="brain-entity-link">[[Brain File]]</a>' in page
    hostile_id = ids(demo, "select id from knowledge where external_id = 'hostile'")[0]
    page = (await datasette.client.get(f"/demo/-/memory/{hostile_id}")).text
    content = re.search(r'<div class="brain-content" id="brain-content">(.*?)</div>', page, re.S).group(1)
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in content and "<script" not in content and "<img" not in content


@pytest.mark.asyncio
async def test_recall_page_links_wikilinks_safely(datasette, demo):
    entity_id = ids(demo, "select id from entities where name = 'Brain File'")[0]
    page = (
        await datasette.client.get("/demo/-/brain", params={"q": "Brain File migrations tables", "cutoff": "false"})
    ).text
    assert f'<a href="/demo/-/entity/{entity_id}" class="brain-entity-link">[[Brain File]]</a>' in page
    hostile = (
        await datasette.client.get("/demo/-/brain", params={"q": "onerror alert long text", "cutoff": "false"})
    ).text
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in hostile and "<script>alert(2)" not in hostile
    assert "<img src=x" not in hostile


@pytest.mark.asyncio
async def test_html_pages_answer_errors_as_pages_and_json_forms_as_json(datasette):
    for path, status in [
        ("/demo/-/memory/99999", 404),
        ("/demo/-/entity/99999", 404),
        ("/nope/-/brain", 404),
        ("/nope/-/decayed", 404),
        ("/demo/-/entity/1?hops=7", 400),
        ("/demo/-/memory/abc", 404),
        ("/demo/-/memory/1/x", 404),
        ("/demo/-/entity/1.5", 404),
        ("/demo/-/memory/-1", 404),
        ("/demo/-/memory/9223372036854775808", 404),
        ("/demo/-/entity/1234567890123456789", 404),
        ("/demo/-/entity/%EF%BC%91", 404),
        ("/demo/-/decayed.csv", 404),
        ("/demo/-/brain/x", 404),
        ("/demo/-/decayed?size=1000&page=9223372036854775807", 400),
        ("/demo/-/entities?page=99999999999999999999", 400),
    ]:
        response = await datasette.client.get(path)
        assert response.status_code == status, path
        assert response.headers["content-type"].startswith("text/html"), path
        assert 'id="brain-error"' in response.text and "<!DOCTYPE html>" in response.text
    bad = await datasette.client.get("/demo/-/brain?q=x&k=abc")
    assert bad.status_code == 400 and "k must be" in bad.text and bad.headers["content-type"].startswith("text/html")
    missing = await datasette.client.get("/demo/-/memory/99999.json")
    assert missing.status_code == 404 and missing.json() == {
        "ok": False,
        "error": "no memory with id 99999",
        "status": 404,
    }
    assert (await datasette.client.get("/nope/-/decayed.json")).json()["status"] == 404
    assert (await datasette.client.get("/demo/-/memory/abc.json")).json()["status"] == 404
    deep = await datasette.client.get("/demo/-/decayed.json?page=100000000000000000")
    assert deep.status_code == 400 and "page must be a whole number from 1 to 1,000,000" in deep.json()["error"]
    assert (await datasette.client.get("/demo/-/recall?q=")).headers["content-type"].startswith("application/json")


@pytest.mark.asyncio
async def test_a_brains_pages_carry_the_stylesheet_that_fits_a_phone(datasette, demo):
    """static/brain.css (tests/test_pages_phones.py has what it does in a browser)."""
    memory_id = ids(demo, "select min(id) from knowledge")[0]
    hrefs = set()
    for path in (
        "/demo",
        "/demo/knowledge",
        "/demo/recall",
        "/demo/-/brain",
        f"/demo/-/memory/{memory_id}",
        "/demo/-/decayed",
        "/demo/-/entities",
    ):
        page = (await datasette.client.get(path)).text
        [href] = re.findall(r'<link rel="stylesheet" href="([^"]*/brain\.css)"', page)
        hrefs.add(href)
    [href] = hrefs
    css = await datasette.client.get(href)
    assert css.status_code == 200 and "@media only screen and (max-width: 576px)" in css.text


@pytest.mark.asyncio
async def test_not_a_brain_is_left_alone(tmp_path):
    other = tmp_path / "other.db"
    conn = sqlite3.connect(other)
    conn.execute("create table knowledge (id integer primary key, title text, content text)")
    conn.execute("insert into knowledge values (1, 'T', '[[X]]')")
    conn.commit()
    conn.close()
    datasette = Datasette([str(other)])
    page = (await datasette.client.get("/other/knowledge")).text
    assert "/-/memory/" not in page and "/-/entity/" not in page and "brain.css" not in page
    assert 'class="brain-links"' not in (await datasette.client.get("/other")).text


@pytest.mark.asyncio
async def test_a_row_url_with_too_few_or_too_many_key_values_is_not_found(datasette):
    """Datasette's row page binds each part of the URL's key to a primary key column:
    a brain table whose key has two columns, given one value (or three), is a 404 as
    a row that is not there is, not SQLite's binding error as a 500."""
    for path in (
        "/demo/brain_mention_queue/1",
        "/demo/brain_mention_queue/1.json",
        "/demo/brain_mention_queue/chunk,1,2.json",
        "/demo/knowledge/1,2",
    ):
        response = await datasette.client.get(path)
        assert response.status_code == 404, (path, response.status_code, response.text[:200])
        if path.endswith(".json"):
            assert response.json()["ok"] is False
    assert (await datasette.client.get("/demo/knowledge/1.json")).status_code == 200


@pytest.mark.asyncio
async def test_an_api_url_missing_its_form_says_where_it_is(datasette, tmp_path):
    """/-/memories without its .json, /-/export without its .jsonl: a 404 naming the
    URL meant, as JSON for an API's client; Datasette read them as a row of a table
    named "-" (its "Invalid SQL" page, review 152)."""
    for path, meant in [
        ("/demo/-/memories", "/demo/-/memories.json"),
        ("/demo/-/memories.csv", "/demo/-/memories.json"),
        ("/demo/-/export", "/demo/-/export.jsonl"),
        ("/demo/-/export.json", "/demo/-/export.jsonl"),
    ]:
        response = await datasette.client.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"] == f"no such page: did you mean {meant}?", path
    page = await datasette.client.get("/demo/-/memory")
    assert page.status_code == 404 and "did you mean /demo/-/memory/ID?" in page.text
    assert page.headers["content-type"].startswith("text/html")
    unknown = await datasette.client.get("/nope/-/memories")
    assert unknown.status_code == 404 and unknown.json()["error"] == "no such page"
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("create table notes (body text)")
    other = await Datasette([str(plain)]).client.get("/plain/-/memories")  # not a brain: no such URL to mean
    assert other.status_code == 404 and other.json()["error"] == "no such page"
    assert (await datasette.client.get("/demo/-/recall.json")).status_code == 404


@pytest.mark.asyncio
async def test_a_page_past_the_last_says_so_and_leads_back_to_the_last(datasette):
    listed = (await datasette.client.get("/demo/-/entities.json")).json()
    past = (await datasette.client.get("/demo/-/entities.json?page=999")).json()
    assert past["rows"] == [] and past["previous"] == f"/demo/-/entities.json?page={listed['pages']}"
    page = (await datasette.client.get("/demo/-/entities?page=999")).text
    assert f"page 999 is past the last, page {listed['pages']}" in page
    decayed = (await datasette.client.get("/demo/-/decayed.json?page=999")).json()
    assert decayed["rows"] == [] and decayed["pages"] < 999
    assert (await datasette.client.get(decayed["previous"])).json()["page"] == decayed["pages"]
