"""The entity graph and the entities browser in a real browser: Debian's chromium
driven by Playwright, against Datasette served on loopback over the demo vault
(tests/test_pages.py's server)."""

import json
import urllib.request

import pytest

# the same server (the demo vault and a few hostile records), browser and page
from .test_pages import CHROMIUM, browser, page, server  # noqa: F401

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium)"),
]


def most_connected(server, count=3):
    with urllib.request.urlopen(server + "/brain/-/entities.json") as response:
        return [row for row in json.load(response)["rows"][:count]]


def overlapping(boxes):
    return [
        (a, b)
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    ]


@pytest.mark.parametrize("hops", [1, 2])
def test_no_two_labels_overlap_on_the_most_connected_entities(server, page, hops):
    for entity in most_connected(server):
        page.goto(f"{server}/brain/-/entity/{entity['id']}?hops={hops}")
        labels = page.locator("#brain-graph text.label")
        boxes = [labels.nth(i).bounding_box() for i in range(labels.count())]
        assert len(boxes) > 3 and all(box and box["width"] > 0 for box in boxes)
        assert overlapping(boxes) == [], entity["name"]


def test_edges_have_arrowheads_and_one_label_per_relation_and_direction(server, page):
    entity = most_connected(server, 1)[0]
    page.goto(f"{server}/brain/-/entity/{entity['id']}")
    edges = page.locator("#brain-graph path.edge")
    assert edges.count() > 0
    assert all(edges.nth(i).get_attribute("marker-end") == "url(#brain-arrow)" for i in range(edges.count()))
    assert page.locator("#brain-graph marker#brain-arrow path").count() == 1
    ends = [
        (
            edges.nth(i).get_attribute("data-from"),
            edges.nth(i).get_attribute("data-to"),
            edges.nth(i).get_attribute("data-type"),
        )
        for i in range(edges.count())
    ]
    assert len(ends) == len(set(ends)) == page.locator("#brain-graph .edge-label").count()
    assert all(entity["id"] in (int(a), int(b)) for a, b, _ in ends)  # one hop: every edge touches the entity
    # the graph takes the page's width
    width = page.locator("#brain-graph").bounding_box()["width"]
    assert width > 0.5 * page.viewport_size["width"]


def test_the_legend_names_the_types_drawn_in_distinct_colours(server, page):
    for entity in most_connected(server):
        page.goto(f"{server}/brain/-/entity/{entity['id']}?hops=2")
        drawn = {node.get_attribute("data-type") for node in page.locator("#brain-graph a.node").all()}
        legend = page.locator("#brain-legend li")
        assert {item.get_attribute("data-type") for item in legend.all()} == drawn
        assert set(page.locator("#brain-legend .legend-type").all_inner_texts()) == drawn
        colours = {
            page.locator(f"#brain-graph a.node[data-type='{kind}'] circle").first.get_attribute("fill")
            for kind in drawn
        }
        assert len(colours) == len(drawn)


def test_two_hops_draw_more_than_one(server, page):
    entity = most_connected(server, 1)[0]
    page.goto(f"{server}/brain/-/entity/{entity['id']}?hops=1")
    one = page.locator("#brain-graph a.node").count()
    page.locator("#brain-hops a", has_text="2 hops").click()
    page.wait_for_url("**hops=2**")
    two = page.locator("#brain-graph a.node").count()
    assert two > one
    assert page.locator("#brain-graph a.node[data-hop='2']").count() > 0


def test_every_node_links_to_its_entity_page(server, page):
    entity = most_connected(server, 1)[0]
    page.goto(f"{server}/brain/-/entity/{entity['id']}?hops=2")
    nodes = page.locator("#brain-graph a.node")
    names = {}
    for i in range(nodes.count()):
        href = nodes.nth(i).get_attribute("href")
        assert "/brain/-/entity/" in href
        names[href] = nodes.nth(i).locator("title").text_content().split(" (")[0]
    for href, name in list(names.items())[:6]:
        page.goto(server + href)
        assert page.locator("h1").inner_text() == name
    # a node's label is a link too, and a click follows it
    page.goto(f"{server}/brain/-/entity/{entity['id']}")
    page.locator("#brain-graph a.node-link:not(.centre) text").first.click()
    page.wait_for_url("**/-/entity/**")
    assert page.locator("h1").inner_text() != entity["name"]


def test_the_entities_browser_searches_and_links(server, page):
    page.goto(server + "/brain/-/entities")
    rows = page.locator("#brain-entities tbody tr")
    degrees = [int(rows.nth(i).locator("td").nth(2).inner_text()) for i in range(rows.count())]
    assert degrees == sorted(degrees, reverse=True) and degrees[0] > 0
    target = most_connected(server, 2)[1]
    page.fill("#brain-entities-q", target["name"][2:-1].lower())
    page.click("#brain-entities-search input[type=submit]")
    page.wait_for_url("**q=**")
    page.locator("#brain-entities a", has_text=target["name"]).first.click()
    page.wait_for_url(f"**/-/entity/{target['id']}")
    assert page.locator("h1").inner_text() == target["name"]
    # filtered by type: every row is of that type
    page.goto(server + "/brain/-/entities")
    page.locator("#brain-types a", has_text="tag").first.click()
    page.wait_for_url("**type=tag**")
    kinds = page.locator("#brain-entities tbody tr td:nth-child(2)").all_inner_texts()
    assert kinds and set(kinds) == {"tag"}
