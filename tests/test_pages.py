"""The pages in a real browser: Debian's chromium driven by Playwright, against
Datasette served on loopback."""

import json
import shutil

import pytest

from .conftest import copy_brain, datasette_server

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"),
]

HOSTILE = '<script>window.pwned = 1</script><img src="x" onerror="window.pwned = 2"> Pager policy text.'


@pytest.fixture(scope="module")
def server(vault_brain_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pages")
    records = [
        {
            "_id": "hostile",
            "title": "<b>Hostile</b> pager note",
            "text": HOSTILE,
            "entities": ["<script>window.pwned = 3</script>"],
        },
        {"_id": "hostile-old", "title": "<i>Expired</i> hostile note", "text": HOSTILE, "expires_at": "2025-03-01"},
        {
            "_id": "expired1",
            "title": "Old pager rota",
            "text": "The 2024 pager rota.",
            "expires_at": "2025-01-01",
            "class": "policy",
        },
        {"_id": "expired2", "title": "Old wifi", "text": "The 2024 wifi password.", "expires_at": "2025-02-01"},
        {"_id": "archived", "title": "Archived note", "text": "Kept for the record.", "relevance_tier": 0},
    ]
    copy_brain(vault_brain_path, folder / "brain.db", records)
    with datasette_server(folder / "brain.db") as base:
        yield base


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--disable-quic",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    page = browser.new_page()
    yield page
    page.close()


def test_recall_page_shows_hits_with_provenance(server, page):
    page.goto(server + "/brain/-/brain")
    page.fill("input[name=q]", "what does the graph leg do")
    page.click("input[type=submit]")
    page.wait_for_selector(".brain-hit")
    assert page.locator(".brain-hit h3").first.inner_text().startswith("1. Graph Leg")
    page.locator(".brain-decision-path summary").first.click()
    table = page.locator(".brain-path").first.inner_text()
    assert "vector" in table and "lexical" in table and "graph" in table
    assert "relevance tier" in page.locator(".brain-decision-path").first.inner_text()


def test_recall_page_says_plainly_when_it_abstains(server, page):
    page.goto(server + "/brain/-/brain?q=flurbo+gnaxle+zzyzx")
    assert "No memory fits this query" in page.locator("#brain-abstain").inner_text()
    assert page.locator(".brain-hit").count() == 0


def test_entity_page_draws_the_neighbourhood(server, page):
    page.goto(server + "/brain/entities.json?name=Recall&_shape=array")
    entity_id = json.loads(page.inner_text("body"))[0]["id"]
    page.goto(f"{server}/brain/-/entity/{entity_id}")
    nodes = page.locator("#brain-graph circle")
    assert nodes.count() >= 5
    labels = page.locator("#brain-graph .edge-label").all_text_contents()
    assert any("part_of" in label for label in labels)
    page.locator("#brain-graph a.node:not(.centre) circle").first.click()
    page.wait_for_url("**/-/entity/**")
    assert page.locator("#brain-graph circle").count() >= 2


def test_decayed_page_facets_filter(server, page):
    def shown():
        rows = page.locator("table.rows-and-columns tbody tr")
        assert f"{rows.count()} memor{'y' if rows.count() == 1 else 'ies'}" in page.inner_text("body")
        return rows.all_inner_texts()

    page.goto(server + "/brain/-/decayed")
    everything = shown()
    assert any("Archived note" in row and "archived" in row for row in everything)
    page.locator("#facet-decay a", has_text="expired").first.click()
    page.wait_for_url("**decay=expired**")
    expired = shown()
    assert all("\texpired\t" in row for row in expired) and len(expired) < len(everything)
    assert sum(title in row for row in expired for title in ("Old pager rota", "Old wifi", "Expired")) == 3
    page.locator("#facet-class a", has_text="policy").first.click()
    page.wait_for_url("**class=policy**")
    policies = shown()
    assert any("Old pager rota" in row for row in policies) and all("\tpolicy\t" in row for row in policies)


def test_stored_script_renders_as_text_and_never_runs(server, page):
    page.goto(server + "/brain/-/brain?q=hostile+pager+policy+text")
    page.wait_for_selector(".brain-hit")
    assert page.evaluate("window.pwned") is None
    assert "<script>window.pwned = 1</script>" in page.locator(".brain-content").first.inner_text()
    link = page.locator(".brain-hit h3 a", has_text="<b>Hostile</b>")
    assert link.count() == 1  # the title's markup shows as text
    link.click()
    page.wait_for_selector("#brain-content")
    assert page.evaluate("window.pwned") is None
    # verify highlights the claim in place, still as text
    page.fill("#brain-verify input[name=claim]", "pager policy")
    page.click("#brain-verify input[type=submit]")
    page.wait_for_selector("#brain-content mark")
    assert page.locator("#brain-content mark").inner_text() == "Pager policy"
    assert "<script>" in page.locator("#brain-content").inner_text()
    assert page.evaluate("window.pwned") is None
    assert page.inner_text("#brain-verify-result") == "supported (1 match)"


def test_verify_highlights_and_keeps_the_links(server, page):
    """A claim across a [[link]]: marked, and the link is still a link to its entity."""
    page.goto(server + "/brain/knowledge.json?_shape=array&title=Support+Runbook&heading_path=Support+Runbook")
    memory_id = json.loads(page.inner_text("body"))[0]["id"]
    page.goto(f"{server}/brain/-/memory/{memory_id}")
    links = page.locator("#brain-content a.brain-entity-link")
    before = [(links.nth(i).inner_text(), links.nth(i).get_attribute("href")) for i in range(links.count())]
    assert ("[[owned_by::Dana Whitfield]]", before[0][1]) in before
    text = page.inner_text("#brain-content")
    for claim, marks in (("dana whitfield first. [[owned_by", 2), ("escalations go", 1)):
        page.fill("#brain-verify input[name=claim]", claim)
        page.click("#brain-verify input[type=submit]")
        page.wait_for_function("document.querySelectorAll('#brain-content mark').length == %d" % marks)
        after = [(links.nth(i).inner_text(), links.nth(i).get_attribute("href")) for i in range(links.count())]
        assert after == before and page.inner_text("#brain-content") == text
        assert "".join(page.locator("#brain-content mark").all_inner_texts()).lower() == claim
    # a mark inside the link: the link holds it
    assert page.locator("#brain-content a.brain-entity-link mark").count() == 0
    page.fill("#brain-verify input[name=claim]", "owned_by::Dana")
    page.click("#brain-verify input[type=submit]")
    page.wait_for_selector("#brain-content a.brain-entity-link mark")
    assert page.locator("#brain-content a.brain-entity-link mark").inner_text() == "owned_by::Dana"


def test_entity_and_decayed_pages_escape_stored_names(server, page):
    page.goto(server + "/brain/entities.json?_shape=array&name__startswith=%3Cscript")
    entity_id = json.loads(page.inner_text("body"))[0]["id"]
    page.goto(f"{server}/brain/-/entity/{entity_id}")
    assert page.locator("h1").inner_text() == "<script>window.pwned = 3</script>"
    page.goto(server + "/brain/-/decayed")
    assert "<i>Expired</i> hostile note" in page.inner_text("table.rows-and-columns")
    assert page.evaluate("window.pwned") is None
