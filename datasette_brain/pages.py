"""Pages for people: recall with its decision path, a memory in its document,
an entity's neighbourhood as a graph, and the decayed-memory review.

Every value reaches the page through Jinja's autoescaping; nothing stored is
ever marked safe.
"""

import dataclasses
import math

from datasette import Response
from datasette.utils import path_with_added_args, path_with_removed_args

import brain_sql

from .decay import BUCKETS
from . import tools
from .routes import api, brain_database, querydoc_from_args
from .tools import ApiError, run_recall

FACETS = ("class", "scope", "source", "domain", "decay")


GRAPH_SIZE = 640
DECAYED_LIMIT = 1000  # the review page shows the first thousand, soonest to expire first


@api
async def recall_page(datasette, request):
    db = await brain_database(datasette, request)
    args = {name: request.args.get(name) for name in request.args.keys() if request.args.get(name)}
    result, error_message = None, None
    if args.get("q"):
        try:
            doc = dataclasses.replace(querydoc_from_args(request.args), provenance=True)
            result = await run_recall(datasette, db, doc)
        except (ApiError, brain_sql.QueryError, brain_sql.FieldError, brain_sql.BrainError) as ex:
            error_message = str(ex)
    return Response.html(
        await datasette.render_template(
            "brain_recall.html",
            {"database": db.name, "args": args, "result": result, "error": error_message},
            request=request,
        )
    )


@api
async def memory_page(datasette, request):
    loaded = await tools.memory(datasette, request.actor, request.url_vars.get("database"), int(request.url_vars["id"]))
    if request.url_vars.get("format") == "json" or request.args.get("_format") == "json":
        return Response.json(loaded)  # what the brain_memory MCP tool answers
    return Response.html(
        await datasette.render_template("brain_memory.html", {"database": request.url_vars["database"], **loaded}, request=request)
    )


def layout(entity, neighbours, edges, size=GRAPH_SIZE):
    """Positions for a radial drawing: the entity in the middle, neighbours on one
    or two rings; edges keep their type for a label at their middle."""
    centre = size / 2
    nodes = {entity[0]: {"id": entity[0], "name": entity[1], "type": entity[2], "x": centre, "y": centre, "centre": True}}
    rings = [neighbours[:24], neighbours[24:]]
    for ring_index, ring in enumerate(rings):
        radius = size * (0.3 if ring_index == 0 else 0.44)
        for i, (node_id, name, kind, _) in enumerate(ring):
            angle = 2 * math.pi * i / max(len(ring), 1) + ring_index * 0.13
            nodes[node_id] = {
                "id": node_id, "name": name, "type": kind, "centre": False,
                "x": round(centre + radius * math.cos(angle), 1), "y": round(centre + radius * math.sin(angle), 1),
            }  # fmt: skip
    labelled = {}
    for source, target, relation in edges:
        key = tuple(sorted((source, target)))
        labelled.setdefault(key, []).append(relation)
    lines = []
    for (a, b), relations in labelled.items():
        lines.append(
            {
                "x1": nodes[a]["x"], "y1": nodes[a]["y"], "x2": nodes[b]["x"], "y2": nodes[b]["y"],
                "label": ", ".join(sorted(set(relations))),
                "lx": round((nodes[a]["x"] + nodes[b]["x"]) / 2, 1), "ly": round((nodes[a]["y"] + nodes[b]["y"]) / 2, 1),
            }  # fmt: skip
        )
    return list(nodes.values()), lines


@api
async def entity_page(datasette, request):
    db = await brain_database(datasette, request)
    entity_id = int(request.url_vars["id"])
    await tools.ensure_permissions(datasette, request.actor, db.name, [("view-table", (db.name, t)) for t in tools.GRAPH_TABLES])

    found = await db.execute_fn(lambda conn: brain_sql.entity(conn, entity_id))
    if found is None:
        raise ApiError(f"no entity with id {entity_id}", 404)
    entity, neighbours, edges, documents = found
    nodes, lines = layout(entity, neighbours, edges)
    return Response.html(
        await datasette.render_template(
            "brain_entity.html",
            {"database": db.name, "entity": entity, "nodes": nodes, "lines": lines, "size": GRAPH_SIZE,
             "documents": documents},  # fmt: skip
            request=request,
        )
    )


@api
async def decayed_page(datasette, request):
    """Expired, soon-expiring and archived memories for review, with facets."""
    db = await brain_database(datasette, request)
    selected = {name: request.args.get(name) for name in FACETS if request.args.get(name)}
    now, rows = await db.execute_fn(lambda conn: brain_sql.decayed(conn, limit=DECAYED_LIMIT))
    rows = [r for r in rows if all(str(r[k]) == v for k, v in selected.items())]
    facets = {}
    for name in FACETS:
        counts = {}
        for row in rows:
            counts[str(row[name])] = counts.get(str(row[name]), 0) + 1
        values = sorted(counts, key=lambda v: (-counts[v], v)) if name != "decay" else [b for b in BUCKETS if b in counts]
        facets[name] = [
            {
                "value": value,
                "count": counts[value],
                "selected": selected.get(name) == value,
                "toggle_url": path_with_removed_args(request, {name: value})
                if selected.get(name) == value
                else path_with_added_args(request, {name: value}),
            }
            for value in values
        ]
    if request.url_vars.get("format") == "json" or request.args.get("_format") == "json":
        return Response.json({"now": now, "count": len(rows), "selected": selected, "facets": facets, "rows": rows})
    return Response.html(
        await datasette.render_template(
            "brain_decayed.html",
            {"database": db.name, "rows": rows, "facets": facets, "selected": selected, "now": now},
            request=request,
        )
    )
