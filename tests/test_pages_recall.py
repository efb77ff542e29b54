"""The recall and decayed pages in a real browser (Debian's chromium driven by
Playwright, Datasette on loopback): every recall filter, rounded scores, people's
words, expandable content, the dates read from a query, the empty state; decayed
states and the decisions an actor with brain-write can take, and one without cannot."""

import re
import shutil

import pytest
from datasette.app import Datasette

from .conftest import copy_brain, datasette_server
from .test_pages import browser  # noqa: F401  (the same chromium, launched once a module)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"),
]

SECRET = "test-pages-recall-secret"
LONG = "\n".join(f"Step {i}: check quokka valve gauge {i}." for i in range(1, 31))  # one chunk
RECORDS = [
    {"_id": "long", "title": "Quokka valve checklist", "text": LONG},
    {"_id": "to-archive", "title": "Old badge policy", "text": "Badges were blue in 2024.", "expires_at": "2025-01-01"},
    {"_id": "archived", "title": "Archived fax note", "text": "The fax machine number.", "relevance_tier": 0},
    {"_id": "untouched", "title": "Old parking rule", "text": "Parking was free in 2024.", "expires_at": "2025-02-01"},
]
FILTERS = (
    "q",
    "k",
    "scope",
    "classes",
    "sources",
    "domain",
    "since",
    "until",
    "as_of",
    "now",
    "min_relevance",
    "include_decayed",
    "graph",
    "prf",
    "mmr",
    "mmr_lambda",
    "max_tokens",
    "cutoff",
)
INTERNAL = (
    "clarify_query",
    "run_prf",
    "increase_top_k",
    "low_confidence",
    "no_candidates",
    "only_decayed",
    "token_budget",
)


@pytest.fixture(scope="module")
def server(vault_brain_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pages-recall")
    copy_brain(vault_brain_path, folder / "brain.db", RECORDS)
    (folder / "metadata.json").write_text('{"plugins": {"datasette-brain": {"allow_write": {"id": "keeper"}}}}')
    with datasette_server(folder / "brain.db", "-m", folder / "metadata.json", "--secret", SECRET) as base:
        yield base


def new_page(browser, server, actor_id=None):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    if actor_id:
        signed = Datasette(secret=SECRET).sign({"a": {"id": actor_id}}, "actor")
        context.add_cookies([{"name": "ds_actor", "value": signed, "url": server}])
    return context, context.new_page()


@pytest.fixture
def page(browser, server):
    context, page = new_page(browser, server)
    yield page
    context.close()


@pytest.fixture
def keeper_page(browser, server):
    context, page = new_page(browser, server, "keeper")
    yield page
    context.close()


def test_recall_page_has_every_filter_of_the_api(server, page):
    page.goto(server + "/brain/-/brain")
    for name in FILTERS:
        assert page.locator(f"#brain-recall-form [name={name}]").count() >= 1, name
    # the options past the first row open, and a choice there travels with the query
    page.click("#brain-more-options summary")
    page.fill("input[name=q]", "what does the graph leg do")
    page.uncheck("input[type=checkbox][name=graph]")
    page.fill("input[name=until]", "2999-01-01")
    page.click("input[type=submit]")
    page.wait_for_selector(".brain-hit, #brain-abstain")
    assert "graph=false" in page.url and "until=2999-01-01" in page.url
    assert not page.locator("input[type=checkbox][name=graph]").is_checked()
    assert page.locator("input[type=checkbox][name=prf]").is_checked()
    assert page.locator("input[name=until]").input_value() == "2999-01-01"
    assert "until 2999-01-01" in page.inner_text("#brain-applied")


def test_recall_page_rounds_scores_and_speaks_plainly(server, page):
    page.goto(server + "/brain/-/brain?q=what+does+the+graph+leg+do")
    page.wait_for_selector(".brain-hit")
    for summary in page.locator(".brain-decision-path summary").all():
        summary.click()
    text = page.inner_text("#brain-recall-results")
    assert not re.search(r"\d\.\d{4,}", text), re.findall(r"\S*\d\.\d{4,}\S*", text)[:5]
    assert "Why this hit: combined score" in text
    for token in INTERNAL:
        assert token not in text
    assert "node kind" not in text and "lawful basis" not in text and "region" not in text  # the demo has none
    assert "–  ·" not in text and "· –" not in text
    assert "confident" in page.inner_text("#brain-summary").lower()
    # an abstention says why in words
    page.goto(server + "/brain/-/brain?q=flurbo+gnaxle+zzyzx")
    said = page.inner_text("#brain-abstain")
    assert "No memory" in said and not any(token in said for token in INTERNAL)


def test_long_content_expands(server, page):
    page.goto(server + "/brain/-/brain?q=quokka+valve+checklist")
    page.wait_for_selector(".brain-hit")
    hit = page.locator(".brain-hit", has_text="Quokka valve checklist").first
    preview = hit.locator(".brain-preview")
    assert preview.is_visible() and "Step 1:" in preview.inner_text() and "Step 30:" not in preview.inner_text()
    assert not hit.locator(".brain-more .brain-content").is_visible()
    hit.locator(".brain-more summary").click()
    full = hit.locator(".brain-more .brain-content")
    assert full.is_visible() and "Step 30: check quokka valve gauge 30." in full.inner_text()
    assert not preview.is_visible()  # the full text replaces the preview


def test_dates_read_from_the_query_show_as_applied(server, page):
    page.goto(server + "/brain/-/brain?q=what+happened+last+week")
    page.wait_for_selector("#brain-applied")
    applied = page.inner_text("#brain-applied")
    assert re.search(r"since \d{4}-\d\d-\d\d", applied), applied
    assert "read from the query" in applied
    assert "searched for “what happened”" in applied


def test_empty_recall_page_offers_examples_and_counts(server, page):
    page.goto(server + "/brain/-/brain")
    counts = page.inner_text("#brain-counts")
    assert re.search(r"\d+ memories in \d+ documents", counts) and "archived" in counts
    examples = page.locator("#brain-examples a")
    assert examples.count() >= 3
    title = examples.first.inner_text()
    examples.first.click()
    page.wait_for_selector(".brain-hit")
    assert page.locator("input[name=q]").input_value() == title
    assert title in page.locator(".brain-hit h3").first.inner_text()


def row_state(page, title):
    return page.locator("table.rows-and-columns tbody tr", has_text=title).locator(".brain-decay").inner_text()


def test_decayed_page_labels_an_archived_memory_archived(server, page):
    page.goto(server + "/brain/-/decayed")
    assert row_state(page, "Archived fax note") == "archived"
    assert row_state(page, "Old parking rule") == "expired"
    assert "live" not in [t.strip() for t in page.locator(".brain-decay").all_inner_texts()]


def test_without_brain_write_there_are_no_actions(server, page):
    page.goto(server + "/brain/-/decayed")
    assert page.locator("table.rows-and-columns").is_visible()
    assert page.locator(".brain-actions, form[action$='/-/decayed/act'], button[name=action]").count() == 0
    assert "brain-write permission" in page.inner_text("body")


def test_with_brain_write_the_actions_work(server, keeper_page):
    page = keeper_page
    page.goto(server + "/brain/-/decayed?decay=expired")
    row = page.locator("table.rows-and-columns tbody tr", has_text="Old badge policy")
    assert row.locator("button", has_text="Archive").is_visible()
    assert (
        row.locator("button", has_text="+30 days").is_visible() and row.locator("button", has_text="Flag").is_visible()
    )
    row.locator("button", has_text="Archive").click()
    page.wait_for_load_state()
    assert "decay=expired" in page.url  # back where the decision was taken
    assert "Archived 1 memory" in page.inner_text("body")
    assert page.locator("tr", has_text="Old badge policy").count() == 0  # no longer expired
    page.goto(server + "/brain/-/decayed")
    assert row_state(page, "Old badge policy") == "archived"
    # restore: live again, so off the review page, and recall finds it
    page.locator("tr", has_text="Old badge policy").locator("button", has_text="Restore").click()
    page.wait_for_load_state()
    assert "Restored 1 memory" in page.inner_text("body")
    assert page.locator("tr", has_text="Old badge policy").count() == 0
    page.goto(server + "/brain/-/brain?q=badges+blue+2024")
    page.wait_for_selector(".brain-hit")
    assert "Old badge policy" in page.locator(".brain-hit h3").first.inner_text()


def test_a_post_without_the_csrf_token_fails(server, keeper_page):
    page = keeper_page
    page.goto(server + "/brain/-/decayed")
    row = page.locator("tr", has_text="Old parking rule")
    memory_id = row.locator("input[name=id]").get_attribute("value")
    response = page.request.post(server + "/brain/-/decayed/act", form={"id": memory_id, "action": "archive"})
    assert response.status == 403
    page.reload()
    assert row_state(page, "Old parking rule") == "expired"
