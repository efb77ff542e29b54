"""Datasette's own pages on a brain in a real browser (Debian's chromium driven by
Playwright), served by a plain `datasette brain.db` and by `datasette demo.db -m
metadata.yml` from the repository root: links followed from a knowledge row to
its memory to an entity, the search box, no internal tables, HTML error pages,
and stored markup that never runs."""

from pathlib import Path

import pytest

from .conftest import copy_brain, datasette_server
from .test_pages import CHROMIUM, browser  # noqa: F401  (its browser fixture, shared)

ROOT = Path(__file__).parent.parent
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"),
]

HOSTILE = (
    '<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2"> Hostile pager text '
    "[[mentions::<img src=x onerror=window.pwned=3>]] and [[Brain File]]."
)


@pytest.fixture(scope="module", params=["plain", "metadata"])
def server(vault_brain_path, tmp_path_factory, request):
    """The URL of the brain database: `datasette brain.db`, or `datasette demo.db
    -m metadata.yml` run in the repository root."""
    folder = tmp_path_factory.mktemp("links")
    name = "brain" if request.param == "plain" else "demo"
    records = [{"_id": "hostile", "title": "<b>Hostile</b> note", "text": HOSTILE}]
    copy_brain(vault_brain_path, folder / f"{name}.db", records)
    options = ["-m", "metadata.yml"] if request.param == "metadata" else []
    with datasette_server(folder / f"{name}.db", *options, cwd=ROOT) as base:
        yield f"{base}/{name}"


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    yield page
    page.close()


def test_from_a_knowledge_row_to_its_memory_to_an_entity(server, page):
    page.goto(server + "/knowledge?_search=ingest")
    page.locator("td.col-title a", has_text="Ingest").first.click()
    page.wait_for_url("**/-/memory/**")
    assert page.locator("h1").inner_text() == "Ingest"
    # a [[wikilink]] in the text leads to the entity it names
    page.locator("#brain-content a.brain-entity-link", has_text="[[Brain File]]").click()
    page.wait_for_url("**/-/entity/**")
    assert "Brain File" in page.locator("h1").inner_text()
    # and the row's id link leads to the memory page too, as does an edge's end
    page.goto(server + "/knowledge?_search=ingest")
    page.locator("td.col-id a").first.click()
    page.wait_for_url("**/-/memory/**")
    page.locator("a", has_text="Embedding Model").first.click()
    page.wait_for_url("**/-/entity/**")
    assert "Embedding Model" in page.locator("h1").inner_text()


def test_knowledge_rows_are_short_and_useful_columns_first(server, page):
    page.goto(server + "/knowledge")
    headers = page.locator("table.rows-and-columns th").all_inner_texts()
    assert [h.strip(" ▼▲\xa0") for h in headers[:5]] == ["id", "title", "content", "class", "scope"]
    rows = page.locator("table.rows-and-columns tbody tr")
    assert rows.count() >= 12
    tallest = max(rows.nth(i).bounding_box()["height"] for i in range(rows.count()))
    assert tallest < 300


def test_search_box_filters_the_knowledge_table(server, page):
    page.goto(server + "/knowledge")
    total = page.locator("table.rows-and-columns tbody tr").count()
    page.fill("input[name=_search]", "graph")
    page.locator("input[name=_search]").press("Enter")
    page.wait_for_url("**_search=graph**")
    found = page.locator("table.rows-and-columns tbody tr")
    assert 0 < found.count() < total
    assert 'search matches "graph"' in page.locator("h3").first.inner_text()


def test_database_page_lists_no_internals_and_links_the_brain_pages(server, page):
    page.goto(server)
    listed = page.locator(".db-table h3 a").all_inner_texts()
    assert set(listed) == {"knowledge", "entities", "relationships", "documents"}
    assert not any(name.startswith(("vec_knowledge", "knowledge_fts", "brain_")) for name in listed)
    links = page.locator(".brain-links a")
    assert links.all_inner_texts()[:3] == ["Recall", "Review decayed memories", "Entities"]
    links.first.click()
    page.wait_for_url("**/-/brain")


def test_missing_pages_answer_with_an_html_page(server, page):
    for path, heading in [("/-/memory/99999", "Not found"), ("/-/entity/99999", "Not found")]:
        response = page.goto(server + path)
        assert response.status == 404
        assert response.headers["content-type"].startswith("text/html")
        assert page.locator("h1").inner_text() == heading
        assert "99999" in page.locator("#brain-error").inner_text()
    page.locator(".brain-error-links a", has_text="Recall from").click()
    page.wait_for_url("**/-/brain")


def test_hostile_stored_html_never_runs(server, page):
    page.goto(server + "/knowledge?_search=hostile")
    assert "<script>window.pwned = 1</script>" in page.locator("td.col-content").first.inner_text()
    assert page.locator("td.col-title").first.inner_text() == "<b>Hostile</b> note"
    assert page.evaluate("window.pwned") is None
    page.locator("td.col-title a").first.click()
    page.wait_for_url("**/-/memory/**")
    assert page.locator("#brain-content img, #brain-content script").count() == 0
    assert page.evaluate("window.pwned") is None
    # the annotation naming a hostile entity is a link, its name text
    page.locator("#brain-content a.brain-entity-link", has_text="onerror").click()
    page.wait_for_url("**/-/entity/**")
    assert page.evaluate("window.pwned") is None
    # verify still highlights in place, the text unchanged
    page.go_back()
    page.wait_for_selector("#brain-content")
    page.fill("#brain-verify input[name=claim]", "hostile pager text")
    page.click("#brain-verify input[type=submit]")
    page.wait_for_selector("#brain-content mark")
    assert page.locator("#brain-content mark").first.inner_text() == "Hostile pager text"
    assert "[[Brain File]]" in page.locator("#brain-content").inner_text()
    assert page.evaluate("window.pwned") is None
