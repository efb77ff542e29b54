"""Every page of the plugin on a phone (375 px wide) and on a desktop (1280 px),
in a real browser (Debian's chromium driven by Playwright, Datasette on loopback,
no metadata.yml): nothing wider than the screen, no control on top of another,
every value in a table or card under its label; the knowledge table's cards show
what a person needs, and the entity graph fits a phone at a readable size."""

import shutil
import sqlite3
import urllib.parse

import pytest
from datasette.app import Datasette

from datasette_brain.links import PHONE_COLUMNS

from .conftest import copy_brain, datasette_server
from .test_pages import browser  # noqa: F401  (the same chromium, launched once a module)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"),
]

PHONE, DESKTOP = 375, 1280
SECRET = "test-pages-phones-secret"
LONG_WORD = "https://example.com/" + "runbook-" * 20 + "end"  # breaks nowhere by itself
LONG_ID = "crm:" + "escalation-" * 10 + "link"
RECORDS = [
    {"_id": LONG_ID, "title": "Pager escalation link", "text": f"The pager escalation steps are at {LONG_WORD} now."},
    {
        "_id": "expired",
        "title": "Old pager rota",
        "text": "The 2024 pager rota.",
        "expires_at": "2025-01-01",
        "class": "policy",
    },
    {"_id": "archived", "title": "Archived fax note", "text": "The fax machine number.", "relevance_tier": 0},
]

# what the page holds, measured in the browser
MEASURE = r"""() => {
  const shown = el => {
    const style = getComputedStyle(el);
    if (style.visibility === "hidden" || style.display === "none" || !el.checkVisibility({opacityProperty: true}))
      return false;
    const box = el.getBoundingClientRect();
    return box.width > 0 && box.height > 0 && box.right + scrollX > 0 && box.bottom + scrollY > 0;
  };
  const name = el => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.name ? `[name=${el.name}]` : "")
    + (el.className && typeof el.className === "string" ? "." + el.className.trim().split(/\s+/).join(".") : "")
    + " " + JSON.stringify((el.textContent || el.value || el.getAttribute("href") || "").trim().slice(0, 40));
  // each control and the boxes it is drawn in (a link wrapped over two lines has two)
  const controls = [...document.querySelectorAll("a[href], button, input:not([type=hidden]), select, textarea")]
    .concat([...document.querySelectorAll("summary")]).filter(shown)
    .map(el => ({el, rects: [...el.getClientRects()].filter(r => r.width > 0 && r.height > 0)}));
  const overlaps = [];
  controls.forEach((a, i) => controls.slice(i + 1).forEach(b => {
    if (a.el.contains(b.el) || b.el.contains(a.el)) return;
    const over = a.rects.some(r => b.rects.some(s => Math.min(r.right, s.right) - Math.max(r.left, s.left) > 1
                                                  && Math.min(r.bottom, s.bottom) - Math.max(r.top, s.top) > 1));
    if (over) overlaps.push(name(a.el) + " over " + name(b.el));
  }));
  // a value in a table is labelled by its row's header, by its column's header when
  // that is on the page, or, in a card, by the label drawn before it
  const unlabelled = [];
  for (const table of [...document.querySelectorAll("table")].filter(shown)) {
    const head = table.querySelector("thead tr")
      || [...table.rows].find(row => [...row.cells].every(cell => cell.tagName === "TH"));
    for (const row of [...table.rows].filter(row => row !== head && shown(row))) {
      const rowHeader = [...row.cells].some(c => c.tagName === "TH" && c.textContent.trim() && shown(c));
      for (const cell of [...row.cells].filter(c => c.tagName === "TD" && c.textContent.trim() && shown(c))) {
        const before = getComputedStyle(cell, "::before");
        const drawn = before.display !== "none" && !["none", "normal", '""'].includes(before.content);
        const header = head && head.cells[cell.cellIndex];
        const headed = getComputedStyle(cell).display === "table-cell" && header && header.textContent.trim()
          && shown(header) && header.getBoundingClientRect().left + scrollX >= 0;
        if (!(rowHeader || drawn || headed))
          unlabelled.push(name(table) + ": " + JSON.stringify(cell.textContent.trim().slice(0, 40)));
      }
    }
  }
  // a box that scrolls or cuts its content sideways (a text box's own text aside)
  const sideways = [...document.querySelectorAll("body *:not(input, textarea, select)")].filter(el => shown(el)
    && getComputedStyle(el).overflowX !== "visible" && el.scrollWidth > el.clientWidth + 1).map(name);
  // a label whose words run out of its box, under the box beside it (review 152: a query's parameters)
  const cramped = [...document.querySelectorAll("label")].filter(el => shown(el)
    && el.scrollWidth > el.clientWidth + 1).map(name);
  return {scrollWidth: document.documentElement.scrollWidth, innerWidth, overlaps, unlabelled, sideways, cramped};
}"""


@pytest.fixture(scope="module")
def server(vault_brain_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pages-phones")
    path = copy_brain(vault_brain_path, folder / "brain.db", RECORDS)
    conn = sqlite3.connect(path)
    ids = {
        "memory": conn.execute("select id from knowledge where title = 'Pager escalation link'").fetchone()[0],
        "entity": conn.execute("select id from entities where name = 'Dana Whitfield'").fetchone()[0],
    }
    conn.close()
    (folder / "metadata.json").write_text('{"plugins": {"datasette-brain": {"allow_write": {"id": "keeper"}}}}')
    with datasette_server(path, "-m", folder / "metadata.json", "--secret", SECRET) as base:
        yield base, ids


@pytest.fixture(scope="module")
def replica_server(vault_replica_path):
    with datasette_server(vault_replica_path) as base:
        yield base


def open_page(browser, url, width, actor_id=None):  # noqa: F811
    context = browser.new_context(viewport={"width": width, "height": 800})
    if actor_id:
        signed = Datasette(secret=SECRET).sign({"a": {"id": actor_id}}, "actor")
        context.add_cookies([{"name": "ds_actor", "value": signed, "url": url}])
    page = context.new_page()
    response = page.goto(url)
    assert response.status == 200, url
    page.wait_for_load_state("networkidle")
    return context, page


def assert_fits(page, width):
    found = page.evaluate(MEASURE)
    assert found["innerWidth"] == width
    assert found["scrollWidth"] <= width, found["sideways"]
    assert found["overlaps"] == []
    assert found["cramped"] == []
    assert found["unlabelled"] == []
    # on a desktop Datasette's table of every column scrolls in its own box, as its
    # SQL editor does at any width; nothing else does
    allowed = ("div.CodeMirror", "div.table-wrapper") if width == DESKTOP else ("div.CodeMirror",)
    assert [box for box in found["sideways"] if not box.startswith(allowed)] == []


QUERY = urllib.parse.urlencode({"q": "who owns the support runbook? pager escalation", "scope": "/"})
PAGES = {
    "recall with hits": (f"/brain/-/brain?{QUERY}", None),
    "recall, before a query": ("/brain/-/brain", None),
    "memory": ("/brain/-/memory/{memory}", None),
    "knowledge table": ("/brain/knowledge", None),
    "a facet": ("/brain/knowledge?_facet=scope&class=policy", None),
    "entity graph": ("/brain/-/entity/{entity}", None),
    "entity graph, 2 hops": ("/brain/-/entity/{entity}?hops=2", None),
    "entities browser": ("/brain/-/entities", None),
    "decayed": ("/brain/-/decayed", None),
    "decayed, with decisions": ("/brain/-/decayed", "keeper"),
    "the recall query": ("/brain/recall?q=pager+escalation", None),
    "database": ("/brain", None),
}


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
@pytest.mark.parametrize("name", PAGES)
def test_every_page_fits_the_screen(server, browser, name, width):  # noqa: F811
    base, ids = server
    path, actor = PAGES[name]
    context, page = open_page(browser, base + path.format(**ids), width, actor)
    try:
        if name == "recall with hits":
            assert page.locator(".brain-hit").count() >= 2
            page.locator("#brain-more-options summary").click()  # its fields too
        if name == "decayed, with decisions":
            assert page.locator("button[name=action]").count() >= 6
        assert_fits(page, width)
    finally:
        context.close()


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_a_replicas_recall_page_fits_the_screen(replica_server, browser, width):  # noqa: F811
    context, page = open_page(browser, f"{replica_server}/brain/-/brain?q=support+runbook", width)
    try:
        assert "A read-only replica" in page.inner_text("#brain-replica")
        assert_fits(page, width)
    finally:
        context.close()


def card_labels(page, row):
    """The labels of the cells a phone shows in the `row`th card of the table."""
    return page.evaluate(
        """row => [...document.querySelectorAll("table.rows-and-columns tbody tr")[row].cells]
        .filter(cell => getComputedStyle(cell).display !== "none")
        .map(cell => getComputedStyle(cell, "::before").content.replace(/^"|"$/g, ""))""",
        row,
    )


def test_a_phone_shows_a_memorys_card_not_every_column(server, browser):  # noqa: F811
    base, ids = server
    context, page = open_page(browser, f"{base}/brain/knowledge?id={ids['memory']}", PHONE)
    try:
        labels = card_labels(page, 0)
        assert {"id", "title", "content"} <= set(labels) <= set(PHONE_COLUMNS)
        content = page.locator("td.col-content").first.bounding_box()
        assert 0 <= content["x"] and content["x"] + content["width"] <= PHONE  # nothing cut off
        # a column the page is filtered or sorted by shows too; picking columns shows those picked
        page.goto(f"{base}/brain/knowledge?external_id__contains=escalation&_sort=line_start")
        assert {"external_id", "line_start"} <= set(card_labels(page, 0))
        page.goto(f"{base}/brain/knowledge?_col=heading_path&_col=embedding_model")
        assert {"heading_path", "embedding_model"} <= set(card_labels(page, 0))
    finally:
        context.close()
    context, page = open_page(browser, f"{base}/brain/knowledge", DESKTOP)
    try:  # a desktop's table has every column
        headers = page.locator("table.rows-and-columns thead th").all_inner_texts()
        assert {"source_path", "embedding_model", "valid_from"} <= {header.strip() for header in headers}
    finally:
        context.close()


@pytest.mark.parametrize("hops", [1, 2])
def test_the_entity_graph_fits_a_phone_at_a_readable_size(server, browser, hops):  # noqa: F811
    base, ids = server
    context, page = open_page(browser, f"{base}/brain/-/entity/{ids['entity']}?hops={hops}", PHONE)
    try:
        graph = page.locator("svg.brain-graph").filter(visible=True)
        assert graph.count() == 1
        scale = graph.evaluate("svg => svg.getBoundingClientRect().width / svg.viewBox.baseVal.width")
        shapes = graph.locator("circle, text.label")
        boxes = [shapes.nth(i).bounding_box() for i in range(shapes.count())]
        assert len(boxes) > 10 and all(0 <= box["x"] and box["x"] + box["width"] <= PHONE for box in boxes)
        if hops == 1:  # edge labels drawn at 12 units: 9 px or more on the screen
            assert 12 * scale >= 9
    finally:
        context.close()


@pytest.mark.parametrize("width", [PHONE, DESKTOP])
def test_the_memory_page_lists_provenance_that_has_a_value(server, browser, width):  # noqa: F811
    base, ids = server
    context, page = open_page(browser, f"{base}/brain/-/memory/{ids['memory']}", width)
    try:
        rows = page.locator("#brain-provenance tr").all_inner_texts()
        values = dict(row.split("\t", 1) for row in rows)
        assert values["class"] == "memory" and values["external_id"] == LONG_ID
        assert all(value.strip() not in ("", "–") for value in values.values())
        unset = page.inner_text("#brain-unset")
        assert unset.startswith("Not set:") and "superseded_by" in unset and "superseded_by" not in values
    finally:
        context.close()
