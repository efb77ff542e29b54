"""A deterministic drawing of an entity's neighbourhood, computed on the server:
the entity in the middle, its neighbours on a ring, theirs on an outer ring in
their parent's sector; one arrow per relation and direction; and every label
placed where it overlaps no other label and no node.

Label widths are estimated from Helvetica's metrics (Liberation Sans and Arial
share them) and the page draws each label at exactly that width (SVG
`textLength`), so the boxes placed here are the boxes the browser draws.
"""

import math
import unicodedata
import zlib

NODE_FONT = 14  # px in the drawing's own units
CENTRE_FONT = 17
EDGE_FONT = 12
PAD = 5  # kept clear around every label (its white halo included)
MARGIN = 12
NAME_CHARS = 36  # longer names are cut, with the whole name in the tooltip
RELATION_CHARS = 28
# a phone's drawing (layout's narrow): about this many units across, labels and
# all, which a 375 px screen shows at a readable scale
NARROW_WIDTH = 430
NARROW_MOST = 0.3  # its rings squeezed at most to this fraction of their width
NARROW_TRIES = 3

# Helvetica's advance widths (thousandths of an em) for printable ASCII
_WIDTHS = dict(
    zip(
        " !\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~",
        [278, 278, 355, 556, 556, 889, 667, 191, 333, 333, 389, 584, 278, 333, 278, 278]
        + [556] * 10
        + [
            278,
            278,
            584,
            584,
            584,
            556,
            1015,
            667,
            667,
            722,
            722,
            667,
            611,
            778,
            722,
            278,
            500,
            667,
            556,
            833,
            722,
            778,
            667,
            778,
            722,
            667,
            611,
            722,
            667,
            944,
            667,
            667,
            611,
            278,
            278,
            278,
            469,
            556,
            333,
            556,
            556,
            500,
            556,
            556,
            278,
            556,
            556,
            222,
            222,
            500,
            222,
            833,
            556,
            556,
            556,
            556,
            333,
            500,
            278,
            556,
            500,
            722,
            500,
            500,
            500,
            334,
            260,
            334,
            584,
        ],
    )
)

TYPE_COLOURS = {
    "document": "#4e79a7",
    "person": "#f28e2b",
    "tag": "#59a14f",
    "alias": "#b07aa1",
    "concept": "#76b7b2",
    "team": "#e15759",
    "organization": "#e15759",
    "entity": "#9d9d9d",
}
_MORE_COLOURS = (
    "#edc948",
    "#ff9da7",
    "#9c755f",
    "#17becf",
    "#bcbd22",
    "#8c564b",
    "#1f77b4",
    "#d62728",
    "#7f7f7f",
    "#2ca02c",
    "#9467bd",
    "#e377c2",
)


def text_width(text, size):
    """The width `text` takes at font size `size`, in the same units."""
    total = 0
    for char in text:
        if char in _WIDTHS:
            total += _WIDTHS[char]
        elif unicodedata.combining(char):
            continue
        else:
            total += 1000 if unicodedata.east_asian_width(char) in ("W", "F") else 650
    return round(total * size / 1000, 1)


def shorten(text, limit):
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def colours(types):
    """A distinct colour for each entity type: the usual types keep theirs, others
    take a free one chosen from their name, so the choice is the same every time."""
    chosen = {t: TYPE_COLOURS[t] for t in types if t in TYPE_COLOURS}
    free = [c for c in _MORE_COLOURS if c not in chosen.values()]
    for kind in sorted(t for t in types if t not in chosen):
        if not free:
            free = list(_MORE_COLOURS)  # more types than colours: shared, still named in the legend
        chosen[kind] = free.pop(zlib.crc32(kind.encode("utf-8", "surrogatepass")) % len(free))
    return chosen


def node_radius(degree):
    return round(min(7 + 2.4 * math.sqrt(degree), 26), 1)


class _Boxes:
    """Placed rectangles (x0, y0, x1, y1), in a grid for quick overlap tests."""

    CELL = 64

    def __init__(self):
        self.grid = {}
        self.all = []

    def _cells(self, box):
        for cx in range(math.floor(box[0] / self.CELL), math.floor(box[2] / self.CELL) + 1):
            for cy in range(math.floor(box[1] / self.CELL), math.floor(box[3] / self.CELL) + 1):
                yield cx, cy

    def free(self, box, slack=0.5):
        """Whether `box` keeps `slack` clear of every placed box (rounding the
        positions for the page then cannot make them touch)."""
        for cell in self._cells((box[0] - slack, box[1] - slack, box[2] + slack, box[3] + slack)):
            for other in self.grid.get(cell, ()):
                if (
                    box[0] < other[2] + slack
                    and other[0] < box[2] + slack
                    and box[1] < other[3] + slack
                    and other[1] < box[3] + slack
                ):
                    return False
        return True

    def add(self, box):
        self.all.append(box)
        for cell in self._cells(box):
            self.grid.setdefault(cell, []).append(box)


def _label_box(cx, cy, width, size):
    """The box kept for a label of `width` centred on (cx, cy), padding included."""
    half_height = 0.6 * size + PAD
    return (cx - width / 2 - PAD, cy - half_height, cx + width / 2 + PAD, cy + half_height)


def _place(boxes, candidates, width, size, fallback):
    """The first candidate centre whose box is free, else the nearest free spot on
    a widening spiral around `fallback`: always somewhere free, since the placed
    boxes are finitely many."""
    for cx, cy in candidates:
        box = _label_box(cx, cy, width, size)
        if boxes.free(box):
            boxes.add(box)
            return cx, cy
    step = 1.3 * size
    ring = 1
    while True:
        count = 8 * ring
        for i in range(count):
            angle = 2 * math.pi * i / count
            cx, cy = fallback[0] + ring * step * math.cos(angle), fallback[1] + ring * step * math.sin(angle)
            box = _label_box(cx, cy, width, size)
            if boxes.free(box):
                boxes.add(box)
                return cx, cy
        ring += 1


def _rings(nodes, edges, centre_id):
    """Positions: the centre at the origin, hop-1 nodes on one ring with a sector
    each as wide as the hop-2 nodes it leads to, hop-2 nodes on the outer ring."""
    first = [n["id"] for n in nodes if n["hop"] == 1]
    second = [n["id"] for n in nodes if n["hop"] >= 2]
    linked = {}
    for source, target, _ in edges:
        linked.setdefault(source, []).append(target)
        linked.setdefault(target, []).append(source)
    children = {parent: [] for parent in first}
    orphans = []
    for node in second:
        parent = next((p for p in first if p in linked.get(node, ())), None)
        (children[parent] if parent is not None else orphans).append(node)
    sectors = [(p, children[p]) for p in first] + ([(None, orphans)] if orphans else [])
    weights = [max(1, len(kids)) for _, kids in sectors]
    spokes = sum(1 for s, t, _ in edges if centre_id in (s, t) and s != t)
    inner = max(
        170 if not second else 240,
        len(first) * (48 if not second else 70) / (2 * math.pi),
        spokes * 30 / (2 * math.pi * 0.6),
    )
    outer = max(inner + 190, len(second) * 46 / (2 * math.pi))
    positions = {centre_id: (0.0, 0.0)}
    total, start = sum(weights) or 1, -math.pi / 2
    for (parent, kids), weight in zip(sectors, weights):
        width = math.pi * (weight / total + 1 / len(sectors))  # half by its hop-2 nodes, half an equal share
        if parent is not None:
            angle = start + width / 2
            positions[parent] = (inner * math.cos(angle), inner * math.sin(angle))
        for j, kid in enumerate(kids):
            angle = start + width * (j + 0.5) / len(kids)
            positions[kid] = (outer * math.cos(angle), outer * math.sin(angle))
        start += width
    return positions


def _unit(dx, dy):
    length = math.hypot(dx, dy) or 1.0
    return dx / length, dy / length


def _curve(p0, control, p2, t):
    return tuple((1 - t) ** 2 * a + 2 * t * (1 - t) * c + t**2 * b for a, c, b in zip(p0, control, p2))


def _node_candidates(x, y, radius, angle, width, size):
    """Label centres beside a node, first outward from the centre of the drawing."""
    turns = (0, 0.5, -0.5, 1.0, -1.0, 1.6, -1.6, 2.2, -2.2, math.pi)
    for extra in (0, 1, 2, 3):
        distance = radius + 4 + extra * size
        for turn in turns:
            ux, uy = math.cos(angle + turn), math.sin(angle + turn)
            yield x + ux * (distance + width / 2 * abs(ux)), y + uy * (distance + 0.6 * size * abs(uy))


def _edge_candidates(p0, control, p2, preferred, size):
    """Label centres along an edge, nearest its preferred point first, then beside it."""
    ts = sorted((0.5, 0.4, 0.6, 0.3, 0.7, 0.25, 0.75, 0.35, 0.65, 0.45, 0.55), key=lambda t: (abs(t - preferred), t))
    for shift in (0, 1, -1, 2, -2, 3, -3):
        for t in ts:
            x, y = _curve(p0, control, p2, t)
            tx, ty = _unit(*(2 * (1 - t) * (c - a) + 2 * t * (b - c) for a, c, b in zip(p0, control, p2)))
            yield x - ty * shift * 1.2 * size, y + tx * shift * 1.2 * size


def layout(nodes, edges, centre_id, narrow=False):
    """The drawing of `nodes` (dicts with id, name, type, hop, degree; the centre's
    hop 0) and `edges` ((from id, to id, relation type), each drawn once): a dict
    with `width` and `height` of the drawing, `nodes` and `edges` with their
    geometry and label positions, and the `legend` (type, colour, count). The
    same input always gives the same drawing, and no two labels overlap.

    `narrow`, for a phone: the rings squeezed into a tall ellipse, narrowed by
    the factor that makes the drawing NARROW_WIDTH across (found in a few
    tries, since the labels take room too, and never below NARROW_MOST) and
    made taller by its square root. A phone scrolls down through it, not across."""
    positions = _rings(nodes, edges, centre_id)
    drawing = _draw(nodes, edges, centre_id, positions)
    span = 2 * max(abs(x) for x, _ in positions.values())
    factor = 1.0
    for _ in range(NARROW_TRIES if narrow and span else 0):
        labels = drawing["width"] - span * factor  # what the labels and margins add to the nodes' span
        fitting = max(NARROW_MOST, (NARROW_WIDTH - labels) / span)
        if drawing["width"] <= NARROW_WIDTH or fitting >= factor:
            break
        factor = fitting
        squeezed = {key: (x * factor, y / math.sqrt(factor)) for key, (x, y) in positions.items()}
        drawing = _draw(nodes, edges, centre_id, squeezed)
    return drawing


def _draw(nodes, edges, centre_id, positions):
    """layout's drawing with the nodes at `positions`."""
    palette = colours({n["type"] for n in nodes})
    boxes = _Boxes()
    drawn = {}
    for node in nodes:
        x, y = positions[node["id"]]
        radius = node_radius(node["degree"])
        drawn[node["id"]] = {
            "id": node["id"],
            "name": node["name"],
            "type": node["type"],
            "hop": node["hop"],
            "degree": node["degree"],
            "centre": node["id"] == centre_id,
            "x": x,
            "y": y,
            "r": radius,
            "colour": palette[node["type"]],
            "label": shorten(node["name"], NAME_CHARS),
            "size": CENTRE_FONT if node["id"] == centre_id else NODE_FONT,
        }
        boxes.add((x - radius - 1, y - radius - 1, x + radius + 1, y + radius + 1))
    for node in drawn.values():
        node["width"] = text_width(node["label"], node["size"])
        angle = -math.pi / 2 if node["centre"] else math.atan2(node["y"], node["x"])
        candidates = _node_candidates(node["x"], node["y"], node["r"], angle, node["width"], node["size"])
        node["lx"], node["ly"] = _place(boxes, candidates, node["width"], node["size"], (node["x"], node["y"]))
    lines = _edges(drawn, edges, centre_id, boxes)
    return _fit(list(drawn.values()), lines, palette, boxes)


def _edges(drawn, edges, centre_id, boxes):
    pairs = {}
    for edge in edges:
        pairs.setdefault(tuple(sorted(edge[:2])), []).append(edge)
    lines = []
    for (low, high), group in sorted(pairs.items()):
        group.sort(key=lambda e: (e[0] != low, e[2]))
        a, b = drawn[low], drawn[high]
        nx, ny = _unit(-(b["y"] - a["y"]), b["x"] - a["x"])
        for i, (source, target, relation) in enumerate(group):
            lines.append(_edge(drawn[source], drawn[target], relation, (i - (len(group) - 1) / 2) * 30, (nx, ny)))
    for line in lines:
        p0, control, p2 = line.pop("geometry")
        preferred = 0.5
        if centre_id in (line["from"], line["to"]) and line["from"] != line["to"]:
            preferred = 0.6 if line["from"] == centre_id else 0.4
        line["width"] = text_width(line["label"], EDGE_FONT)
        anchor = _curve(p0, control, p2, preferred)
        x, y = _place(boxes, _edge_candidates(p0, control, p2, preferred, EDGE_FONT), line["width"], EDGE_FONT, anchor)
        line["lx"], line["ly"] = x, y
        # a label not on its own edge gets a line to it: never read as another edge's
        nearest = min(
            (_curve(p0, control, p2, i / 40) for i in range(41)), key=lambda p: math.hypot(x - p[0], y - p[1])
        )
        far = math.hypot(x - nearest[0], y - nearest[1]) > 0.8 * EDGE_FONT
        line["leader"] = (nearest[0], nearest[1], x, y) if far else None
    return lines


def _edge(source, target, relation, offset, normal):
    """One arrow from `source` to `target`, bowed `offset` along the pair's normal."""
    line = {
        "from": source["id"],
        "to": target["id"],
        "type": relation,
        "label": shorten(relation, RELATION_CHARS),
        "from_name": source["name"],
        "to_name": target["name"],
    }
    p0, p2 = (source["x"], source["y"]), (target["x"], target["y"])
    if source is target:  # a loop above the node
        x, y, r = source["x"], source["y"], source["r"]
        control = (x, y - 5 * r - 30)
        start, end = (x - 0.7 * r, y - 0.7 * r), (x + 0.7 * r, y - 0.7 * r)
        line["d"] = (
            f"M{start[0]:.1f},{start[1]:.1f} C{x - 3 * r - 20:.1f},{control[1]:.1f} "
            f"{x + 3 * r + 20:.1f},{control[1]:.1f} {end[0]:.1f},{end[1]:.1f}"
        )
        line["geometry"] = ((x - r, y - r), control, (x + r, y - r))
        line["bounds"] = ((x - 3 * r - 20, control[1]), (x + 3 * r + 20, control[1]))
        return line
    control = ((p0[0] + p2[0]) / 2 + normal[0] * 2 * offset, (p0[1] + p2[1]) / 2 + normal[1] * 2 * offset)
    ux, uy = _unit(control[0] - p0[0], control[1] - p0[1])
    vx, vy = _unit(p2[0] - control[0], p2[1] - control[1])
    start = (p0[0] + ux * source["r"], p0[1] + uy * source["r"])
    end = (p2[0] - vx * (target["r"] + 2), p2[1] - vy * (target["r"] + 2))
    line["d"] = f"M{start[0]:.1f},{start[1]:.1f} Q{control[0]:.1f},{control[1]:.1f} {end[0]:.1f},{end[1]:.1f}"
    line["geometry"] = (p0, control, p2)
    line["bounds"] = (p0, control, p2)
    return line


def _fit(nodes, lines, palette, boxes):
    """Move everything so the drawing starts at the margin; its width and height."""
    xs = [b[0] for b in boxes.all] + [b[2] for b in boxes.all]
    ys = [b[1] for b in boxes.all] + [b[3] for b in boxes.all]
    for line in lines:
        for point in line.pop("bounds", ()):
            xs.append(point[0])
            ys.append(point[1])
    dx, dy = MARGIN - min(xs), MARGIN - min(ys)
    for node in nodes:
        node["x"], node["y"], node["lx"], node["ly"] = node["x"] + dx, node["y"] + dy, node["lx"] + dx, node["ly"] + dy
        node["baseline"] = round(node["ly"] + 0.35 * node["size"], 1)
    for line in lines:
        line["d"] = _shift_path(line["d"], dx, dy)
        line["lx"], line["ly"] = line["lx"] + dx, line["ly"] + dy
        line["baseline"] = round(line["ly"] + 0.35 * EDGE_FONT, 1)
        if line["leader"]:
            x1, y1, x2, y2 = line["leader"]
            line["leader"] = tuple(round(v, 1) for v in (x1 + dx, y1 + dy, x2 + dx, y2 + dy))
    for item in nodes + lines:
        for key in ("x", "y", "lx", "ly"):
            if key in item:
                item[key] = round(item[key], 1)
    counts = {}
    for node in nodes:
        counts[node["type"]] = counts.get(node["type"], 0) + 1
    legend = [(kind, palette[kind], counts[kind]) for kind in sorted(counts, key=lambda k: (-counts[k], k))]
    width, height = math.ceil(max(xs) - min(xs) + 2 * MARGIN), math.ceil(max(ys) - min(ys) + 2 * MARGIN)
    return {
        "width": width,
        "height": height,
        "nodes": nodes,
        "edges": lines,
        "legend": legend,
        "label_boxes": [_label_box(i["lx"], i["ly"], i["width"], i.get("size", EDGE_FONT)) for i in nodes + lines],
    }


def _shift_path(d, dx, dy):
    """`d` (M, Q and C commands with x,y pairs) moved by (dx, dy)."""
    parts = []
    for token in d.split(" "):
        command = token[0] if token[0].isalpha() else ""
        x, y = token[len(command) :].split(",")
        parts.append(f"{command}{float(x) + dx:.1f},{float(y) + dy:.1f}")
    return " ".join(parts)
