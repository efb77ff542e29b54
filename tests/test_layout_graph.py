"""The entity graph's layout: the same drawing every time, one arrow per relation
and direction, and no label overlapping another label or a node."""

import pytest

import brain_sql
from datasette_brain.layout import NARROW_WIDTH, layout, text_width


def overlapping(boxes):
    return [
        (a, b)
        for i, a in enumerate(boxes)
        for b in boxes[i + 1 :]
        if a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]
    ]


def star(count, relations=("mentions", "owned_by")):
    nodes = [{"id": 0, "name": "Support Runbook", "type": "document", "hop": 0, "degree": count * len(relations)}]
    nodes += [
        {"id": i, "name": f"Neighbour number {i}", "type": ("person", "tag", "alias")[i % 3], "hop": 1, "degree": 2}
        for i in range(1, count + 1)
    ]
    edges = [(0, i, r) if k % 2 == 0 else (i, 0, r) for i in range(1, count + 1) for k, r in enumerate(relations)]
    return nodes, edges


@pytest.mark.parametrize("narrow", [False, True])
@pytest.mark.parametrize("count", [1, 6, 39])
def test_a_star_draws_without_overlapping_labels(count, narrow):
    nodes, edges = star(count)
    drawing = layout(nodes, edges, 0, narrow=narrow)
    assert overlapping(drawing["label_boxes"]) == []
    assert len(drawing["label_boxes"]) == len(nodes) + len(edges)
    circles = [(n["x"] - n["r"], n["y"] - n["r"], n["x"] + n["r"], n["y"] + n["r"]) for n in drawing["nodes"]]
    assert all(not overlapping([box, circle]) for box in drawing["label_boxes"] for circle in circles)
    assert all(
        0 <= b[0] and b[2] <= drawing["width"] and 0 <= b[1] and b[3] <= drawing["height"]
        for b in drawing["label_boxes"]
    )


def test_the_same_input_gives_the_same_drawing():
    nodes, edges = star(20)
    assert layout(nodes, edges, 0) == layout([dict(n) for n in nodes], list(edges), 0)


def test_each_relation_and_direction_has_its_own_arrow_and_label():
    nodes = [
        {"id": 1, "name": "Support Runbook", "type": "document", "hop": 0, "degree": 3},
        {"id": 2, "name": "Dana Whitfield", "type": "person", "hop": 1, "degree": 3},
    ]
    edges = [(1, 2, "owned_by"), (2, 1, "owned_by"), (1, 2, "mentions")]
    drawing = layout(nodes, edges, 1)
    assert sorted((e["from"], e["to"], e["label"]) for e in drawing["edges"]) == sorted(edges)
    assert len({e["d"] for e in drawing["edges"]}) == 3  # bowed apart, not drawn over each other
    assert overlapping(drawing["label_boxes"]) == []


def test_legend_colours_are_distinct_per_type_and_sizes_follow_degree():
    nodes, edges = star(12)
    nodes.append({"id": 99, "name": "Made-up", "type": "gadget", "hop": 1, "degree": 40})
    edges.append((0, 99, "uses"))
    drawing = layout(nodes, edges, 0)
    legend = {kind: colour for kind, colour, _ in drawing["legend"]}
    assert set(legend) == {"document", "person", "tag", "alias", "gadget"}
    assert len(set(legend.values())) == len(legend)
    radius = {n["id"]: n["r"] for n in drawing["nodes"]}
    assert radius[99] > radius[1]


def test_label_widths_follow_the_text():
    assert text_width("WWW", 14) > text_width("iii", 14) > 0
    assert text_width("日本", 10) == 20


def test_two_hop_neighbourhoods_of_the_demo_vault_draw_cleanly(vault_brain_path):
    conn = brain_sql.connect(vault_brain_path)
    try:
        top = [row[0] for row in brain_sql.entities(conn)["rows"][:5]]
        for entity_id in top:
            one, two = brain_sql.entity(conn, entity_id, hops=1), brain_sql.entity(conn, entity_id, hops=2)
            assert len(two["nodes"]) >= len(one["nodes"])
            for found in (one, two):
                for narrow in (False, True):
                    drawing = layout(found["nodes"], found["edges"], entity_id, narrow=narrow)
                    assert overlapping(drawing["label_boxes"]) == []
                assert len(found["nodes"]) <= 40
                assert len(set(found["edges"])) == len(found["edges"])
    finally:
        conn.close()


def test_a_phones_drawing_is_narrower(vault_brain_path):
    """A phone's drawing of any one-hop neighbourhood in the demo vault is at most
    NARROW_WIDTH across (a 375 px screen draws it at 0.8 or more); at two hops it
    is narrower than the wide drawing wherever that is wider, and never wider."""
    conn = brain_sql.connect(vault_brain_path)
    try:
        for (entity_id,) in conn.execute("select id from entities").fetchall():
            for hops in (1, 2):
                found = brain_sql.entity(conn, entity_id, hops=hops)
                wide = layout(found["nodes"], found["edges"], entity_id)
                narrow = layout(found["nodes"], found["edges"], entity_id, narrow=True)
                assert narrow["width"] <= (NARROW_WIDTH if hops == 1 else max(NARROW_WIDTH, wide["width"]))
                if wide["width"] > NARROW_WIDTH:
                    assert narrow["width"] < wide["width"]
                assert len(narrow["nodes"]) == len(wide["nodes"]) and len(narrow["edges"]) == len(wide["edges"])
    finally:
        conn.close()


def test_two_hops_leave_out_what_only_flagged_memories_state(tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "Alpha.md").write_text("# Alpha\n\nAlpha is run by [[owned_by::Bravo]].\n")
    (notes / "Bravo.md").write_text(
        "# Bravo\n\nBravo works with [[works_with::Charlie]].\n\n## Secret\n\nBravo pays [[pays::Zebra Holdings]].\n"
    )
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [notes])
    alpha = conn.execute("select id from entities where name = 'Alpha'").fetchone()[0]
    names = lambda found: {n["name"] for n in found["nodes"]}  # noqa: E731
    assert {"Charlie", "Zebra Holdings"} <= names(brain_sql.entity(conn, alpha, hops=2))
    with conn:
        conn.execute("update knowledge set flagged = 1 where heading_path like '%Secret'")
    two = brain_sql.entity(conn, alpha, hops=2)
    assert "Charlie" in names(two) and "Zebra Holdings" not in names(two)
    assert "Zebra Holdings" not in {n["name"] for n in two["rest"]}
    assert not any(row[1] == "Zebra Holdings" for row in brain_sql.entities(conn)["rows"])
    assert brain_sql.entity(conn, alpha, hops=1)["nodes"][1]["name"] == "Bravo"
    conn.close()


def _on_curve(d, t):
    (x0, y0), (cx, cy), (x2, y2) = (
        tuple(map(float, p.split(","))) for p in d.replace("M", "").replace("Q", "").split()
    )
    return ((1 - t) ** 2 * x0 + 2 * (1 - t) * t * cx + t**2 * x2, (1 - t) ** 2 * y0 + 2 * (1 - t) * t * cy + t**2 * y2)


def test_every_edge_label_is_on_its_own_edge_or_tied_to_it(vault_brain_path):
    """A label pushed off its edge gets a line to it, so it is never read as the
    label of an edge that happens to pass closer."""
    conn = brain_sql.connect(vault_brain_path)
    try:
        for entity_id in [row[0] for row in brain_sql.entities(conn)["rows"][:5]]:
            found = brain_sql.entity(conn, entity_id, hops=2)
            for edge in layout(found["nodes"], found["edges"], entity_id)["edges"]:
                points = [_on_curve(edge["d"], i / 200) for i in range(201)]
                distance = min(((edge["lx"] - x) ** 2 + (edge["ly"] - y) ** 2) ** 0.5 for x, y in points)
                if edge["leader"]:
                    x1, y1 = edge["leader"][:2]
                    assert min(((x1 - x) ** 2 + (y1 - y) ** 2) ** 0.5 for x, y in points) < 6, (
                        edge
                    )  # the drawn curve stops at the nodes
                else:
                    assert distance <= 0.8 * 12 + 1, edge
    finally:
        conn.close()
