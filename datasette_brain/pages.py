"""Pages for people: recall with its decision path, a memory in its document,
an entity's neighbourhood as a graph, and the decayed-memory review.

Every value reaches the page through Jinja's autoescaping; nothing stored is
ever marked safe.
"""

import dataclasses
import urllib.parse
from collections.abc import Callable
from typing import Any

from datasette import Response
from datasette.utils import path_with_added_args, path_with_replaced_args

import brain_sql
from brain_sql import for_plugin

from . import replica, tools
from .decay import BUCKETS
from .html_errors import html_page, wants_json
from .layout import layout
from .links import linked_text, whole_links
from .routes import brain_database, querydoc_from_args, read_body
from .tools import ApiError, run_recall

FACETS = ("class", "scope", "source", "domain", "decay")


# the recall form is built from brain_sql.QUERY_FIELDS: q is its search line, these fields its
# first row, the rest behind "More options"; provenance is always shown, as the page shows why each hit was found
FIRST_ROW = ("k", "scope", "classes", "sources", "domain", "since", "until")
NOT_ON_THE_PAGE = ("q", "provenance")
PLACEHOLDERS = {
    "scope": "/acme/support",
    "classes": "memory,policy",
    "sources": "vault,crm",
    "domain": "global",
    "since": "-30d or 2026-01-01",
    "until": "2026-12-31",
    "as_of": "-1y or 2025-06-01",
    "now": "2026-06-01",
    "timezone": "Europe/Paris or -08:00",
    "min_relevance": "1",
}
RECOMMENDATIONS = {
    "return": "Confident: the top hits answer the query.",
    "run_prf": "Fairly confident: words from the top hits were, or could be, added to the search to find more.",
    "increase_top_k": (
        "The top hit covers the query but the search methods disagree on it: asking for more hits may help."
    ),
    "clarify_query": "Not confident: try other words, or say more about what you are looking for.",
}
REASONS = {
    "low_confidence": "No memory fits this query well enough.",
    "no_candidates": (
        "No memory matches: the filters (dates read from the query included) leave nothing to search, "
        "or nothing matched."
    ),
    "only_decayed": "Nothing current matches, but expired or archived memories do.",
    "token_budget": "The best hit is longer than the token budget (max tokens) allows.",
}
TIERS = {0: "archived", 1: "normal", 2: "important", 3: "pinned"}
PREVIEW_CHARS, PREVIEW_LINES = 320, 4


def score(value, places=3):
    """A score for people: rounded, and never a bare 0 for something small."""
    if value is None:
        return "–"
    if value and abs(value) < 10**-places:
        return f"{'−' if value < 0 else ''}<{10**-places:.{places}f}"
    return f"{value:.{places}f}".replace("-", "−")


def preview(content):
    """(the first lines of `content`, ending at a line or word boundary and never
    inside a [[link]], whether there is more): the rest is a click away."""
    content = (content or "").strip("\n")
    lines = content.split("\n")
    shown = "\n".join(lines[:PREVIEW_LINES])
    if len(shown) > PREVIEW_CHARS:
        cut = shown[:PREVIEW_CHARS]
        at = cut.rfind(" ") if " " in cut[PREVIEW_CHARS // 2 :] else PREVIEW_CHARS
        shown = shown[: whole_links(shown, at)]
    return shown, shown != content


def shown_time(value):
    """SQLite UTC text as people read it: midnight without its clock."""
    return value[:-9] if value and value.endswith(" 00:00:00") else value


def zoned_time(value, zone):
    """A UTC time of the request as the asker reads it: in its time zone, named, when it gives one."""
    return f"{shown_time(for_plugin.wall_time(value, zone))} ({zone})" if zone else shown_time(value)


def evidence_view(evidence):
    """The evidence a hit's relevance was read from, in words: the query's words it
    holds, its similarity, the entities the query names that it is tied to."""
    if not evidence:
        return None
    words = ", ".join(evidence["matched"])
    parts = [
        f"words {words}" if words else "none of the query's words",
        f"similarity {score(evidence['similarity'], 2)}",
    ]
    if evidence.get("entities") is not None:
        tied = ", ".join(evidence["tied"])
        parts.append(f"tied to {tied}" if tied else "tied to none of the entities the query names")
    return " · ".join(parts)


def hit_view(hit):
    """What the page shows of a hit besides its title and content: only fields that have a value."""
    facts = [
        ("class", hit.get("class")),
        ("scope", hit.get("scope")),
        ("source", hit.get("source")),
        ("domain", hit.get("domain")),
        ("tier", TIERS.get(hit.get("relevance_tier"))),
        ("observed", shown_time(hit.get("observed_at"))),
        ("expires", shown_time(hit.get("expires_at"))),
        ("valid from", shown_time(hit.get("valid_from"))),
        ("valid to", shown_time(hit.get("valid_to"))),
        ("superseded", shown_time(hit.get("superseded_at"))),
        ("node kind", hit.get("node_kind")),
        ("lawful basis", hit.get("lawful_basis")),
        ("region", hit.get("region")),
    ]
    where = for_plugin.cited(hit)
    text, more = preview(hit.get("content"))
    return {
        "facts": [(k, v) for k, v in facts if v not in (None, "")],
        "where": where,
        "preview": text,
        "more": more,
        "section": for_plugin.section(hit.get("title"), hit.get("heading_path")),
        "evidence": evidence_view((hit.get("provenance") or {}).get("evidence")),
    }


def form_fields():
    """The recall form's inputs, one a QueryDoc field: {name, label, help, input
    (its type), min, max, step, placeholder, default (as the form shows it), row
    ("first", "more", or "checks")}."""
    inputs = []
    for field in brain_sql.QUERY_FIELDS:
        if field.name in NOT_ON_THE_PAGE:
            continue
        low, high = field.bounds or (None, None)
        number = field.type in (int, float)
        inputs.append(
            {
                "name": field.name,
                "label": field.label,
                "help": field.description,
                "input": "checkbox" if field.type is bool else "number" if number else "text",
                "min": low,
                "max": high,
                "step": (field.bounds[1] - field.bounds[0]) / 20 if field.type is float and field.bounds else None,
                "placeholder": PLACEHOLDERS.get(field.name, ""),
                "default": field.default if field.type is bool else "" if field.default is None else str(field.default),
                "row": "first" if field.name in FIRST_ROW else "checks" if field.type is bool else "more",
            }
        )
    order = {name: place for place, name in enumerate(FIRST_ROW)}
    return sorted(inputs, key=lambda field: order.get(field["name"], len(order)))


def recall_form(request):
    """{field: value shown in the form}: the last value given (recall refuses a
    single-valued one given twice, and the form shows it again to mend), or the
    default; check boxes as True/False."""
    form = {"q": request.args.get("q") or ""}
    for field in form_fields():
        given = [v for v in request.args.getlist(field["name"]) if v != ""]
        if field["input"] == "checkbox":
            form[field["name"]] = given[-1].lower() in ("1", "true", "yes", "on") if given else field["default"]
        else:
            form[field["name"]] = given[-1] if given else field["default"]
    return form


def applied_filters(request, query):
    """[(label, value, where it came from)]: the filters recall applied, dates read
    from the query's words among them."""
    applied = []
    for name, label in (("scope", "scope"), ("classes", "classes"), ("sources", "sources"), ("domain", "domain")):
        value = query.get(name)
        if value:
            applied.append((label, ", ".join(value) if isinstance(value, list) else value, "filter"))
    for name in ("since", "until"):
        if query.get(name):
            given = any(v for v in request.args.getlist(name))
            applied.append(
                (name, zoned_time(query[name], query.get("timezone")), "filter" if given else "read from the query")
            )
    if request.args.get("now"):
        applied.append(("now", shown_time(query.get("now")), "filter"))
    if request.args.get("as_of"):
        applied.append(("valid as of", shown_time(query.get("as_of")), "filter"))
    if query.get("include_decayed"):
        applied.append(("expired and archived", "included", "filter"))
    return applied


@html_page
async def recall_page(datasette, request):
    db = await brain_database(datasette, request)
    tools.only(request, "GET")
    form, fields = recall_form(request), form_fields()
    # "More options" stays open while one of its fields is not its default
    more_open = any(form[field["name"]] != field["default"] for field in fields if field["row"] != "first")
    result, error, context = None, None, {}
    if replica.is_replica(db):
        context["replica"] = await replica.status(datasette, db)
    if form["q"]:
        try:
            checkboxes = [field["name"] for field in fields if field["input"] == "checkbox"]
            doc = dataclasses.replace(querydoc_from_args(request.args, checkboxes), provenance=True)
            result = await run_recall(datasette, db, doc, request.actor)
        except Exception as ex:  # noqa: BLE001 - what as_api_error knows is said on the page; the rest surfaces
            error = tools.as_api_error(ex, db)
            if error is None:
                raise
    if result is not None:
        query = result["query"]
        context = {
            "applied": applied_filters(request, query),
            "searched": query.get("searched") if query.get("searched") != query.get("q") else None,
            # advice on the words of the query, unless the answer is empty for another reason
            "recommendation": ""
            if result.get("reason") in ("only_decayed", "token_budget")
            else RECOMMENDATIONS.get(result["quality"]["recommendation"], ""),
            "reason": REASONS.get(result.get("reason"), "No memory returned."),
            "decayed_url": path_with_added_args(request, {"include_decayed": "true"}),
            "views": [hit_view(hit) for hit in result["hits"]],
            **context,
        }
        entities = await tools.graph_readable(datasette, request.actor, db.name)
        for view, hit in zip(context["views"], result["hits"]):
            view["linked"] = await linked_text(datasette, db.name, hit["content"], entities=entities)
            view["preview"] = await linked_text(datasette, db.name, view["preview"], entities=entities)
    elif not form["q"]:
        stats = await db.execute_fn(brain_sql.stats)
        if not await tools.graph_readable(datasette, request.actor, db.name):
            stats = {name: value for name, value in stats.items() if name not in for_plugin.GRAPH_TABLES}
        context = {"examples": await db.execute_fn(for_plugin.examples), "stats": stats, **context}
    return Response.html(
        await datasette.render_template(
            "brain_recall.html",
            {
                "database": db.name,
                "form": form,
                "fields": fields,
                "more_open": more_open,
                "result": result,
                "error": error and str(error),
                "score": score,
                "tiers": TIERS,
                "counted": for_plugin.counted,
                **context,
            },
            request=request,
        ),
        # the page says what is wrong, and so does its status: the request's fault, or the brain's
        status=error.status if error else 200,
        headers=error.headers if error else None,
    )


# the memory page's provenance, in the order people read it
PROVENANCE = (
    "source_path",
    "line_start",
    "line_end",
    "document_id",
    "chunk_index",
    "external_id",
    "class",
    "scope",
    "source",
    "domain",
    "node_kind",
    "lawful_basis",
    "region",
    "observed_at",
    "created_at",
    "valid_from",
    "valid_to",
    "supersedes",
    "superseded_at",
    "superseded_by",
    "version_of",
    "expires_at",
    "relevance_tier",
    "confidence",
    "flagged",
    "embedding_model",
)


def provenance(memory):
    """([(field, value)] of the fields `memory` has a value for, [the fields it has
    none for]): a row each for the first, one line naming the others."""
    given = [(name, memory.get(name)) for name in PROVENANCE if memory.get(name) not in (None, "")]
    return given, [name for name in PROVENANCE if memory.get(name) in (None, "")]


def path_id(request, kind):
    """The id the page's URL names; a URL whose id is not one names nothing: a 404."""
    text = request.url_vars["id"]
    try:
        return for_plugin.whole_number(text, "id")
    except brain_sql.FieldError:
        raise ApiError(f"no {kind} with id {text[:40]}", 404) from None


@html_page
async def memory_page(datasette, request):
    memory_id = path_id(request, "memory")
    database = tools.url_database(datasette, request)
    loaded = await tools.memory(datasette, request.actor, database, memory_id)
    tools.only(request, "GET")
    if wants_json(request):
        return Response.json(loaded)  # what the brain_memory MCP tool answers
    return Response.html(
        await datasette.render_template(
            "brain_memory.html",
            {
                "database": database,
                **loaded,
                "provenance": provenance(loaded["memory"]),
                "lines_of_file": for_plugin.lines_of_file(loaded["memory"]),
                "content_html": await linked_text(
                    datasette,
                    database,
                    loaded["memory"]["content"],
                    entities=await tools.graph_readable(datasette, request.actor, database),
                ),
            },
            request=request,
        )
    )


@html_page
async def entity_page(datasette, request):
    """An entity's neighbourhood, 1 or 2 hops deep, drawn with arrows and a legend."""
    db = await brain_database(datasette, request)
    tools.only(request, "GET")
    entity_id = path_id(request, "entity")
    await tools.ensure_graph(datasette, request.actor, db.name)
    hops = request.args.get("hops") or "1"
    if hops not in ("1", "2"):
        raise ApiError("hops is 1 or 2", 400)

    def drawn(conn):
        """The neighbourhood and its two drawings (a hub's: a second of layout), made on a
        thread in a read slot, as a recall is: not on the server's loop (review 87)."""
        found = brain_sql.entity(conn, entity_id, hops=int(hops))
        if found is None:
            return None, None, None
        return (
            found,
            layout(found["nodes"], found["edges"], entity_id),
            layout(found["nodes"], found["edges"], entity_id, narrow=True),
        )

    found, drawing, narrow = await tools.run_read(datasette, db, drawn)
    if found is None:
        raise ApiError(f"no entity with id {entity_id}", 404)
    return Response.html(
        await datasette.render_template(
            "brain_entity.html",
            {
                "database": db.name,
                "entity": found["entity"],
                "graph": drawing,
                "narrow": narrow,
                "hops": int(hops),
                "rest": found["rest"],
                "more": found["more"],
                "documents": found["documents"],
                "documents_total": found["documents_total"],
                "counted": for_plugin.counted,
                "section": for_plugin.section,
            },
            request=request,
        )
    )


ENTITIES_PARAMETERS = ("q", "type", "page")


def page_args(request, takes, what):
    """The values of the parameters `takes` of page `what` (None for one not
    given), each given once; as JSON, the page takes no other (but Datasette's
    _format, which asks for it): a name it does not know is refused, not passed over."""
    if wants_json(request):
        for_plugin.unknown_parameters((n for n in request.args.keys() if n != "_format"), takes, what)
    return [for_plugin.given_once(name, request.args.getlist(name)) or None for name in takes]


@html_page
async def entities_page(datasette, request):
    """The entities a reader may see, most connected first: searchable by name,
    filtered by type, a page at a time; also as JSON."""
    db = await brain_database(datasette, request)
    tools.only(request, "GET")
    await tools.ensure_graph(datasette, request.actor, db.name)
    q, kind, page = page_args(request, ENTITIES_PARAMETERS, "the entities page")
    page, _ = for_plugin.page_numbers(page or 1)
    found = await db.execute_fn(lambda conn: brain_sql.entities(conn, q=q, entity_type=kind, page=page))
    base = datasette.urls.database(db.name)
    rows = [{"id": i, "name": n, "type": t, "degree": d, "url": f"{base}/-/entity/{i}"} for i, n, t, d in found["rows"]]
    pages = max(1, -(-found["total"] // for_plugin.ENTITY_PAGE_ROWS))
    links = {
        "next": path_with_replaced_args(request, {"page": str(page + 1)}) if page < pages else None,
        # past the last page (rows forgotten since, or a page number typed), back to the last
        "previous": path_with_replaced_args(request, {"page": str(min(page - 1, pages))}) if page > 1 else None,
    }
    if wants_json(request):
        return Response.json(
            {
                "q": q,
                "type": kind,
                "page": page,
                "pages": pages,
                "total": found["total"],
                "types": dict(found["types"]),
                "rows": rows,
                **links,
            }
        )
    types = [
        {
            "type": t,
            "count": c,
            "selected": t == kind,
            "url": path_with_replaced_args(request, {"type": None if t == kind else t, "page": None}),
        }
        for t, c in found["types"]
    ]
    return Response.html(
        await datasette.render_template(
            "brain_entities.html",
            {
                "database": db.name,
                "q": q or "",
                "type": kind,
                "page": page,
                "pages": pages,
                "total": found["total"],
                "types": types,
                "rows": rows,
                **links,
            },
            request=request,
        )
    )


DECAY_ACTIONS: dict[str, Callable[..., dict[str, Any]]] = {
    "extend": brain_sql.extend_expiry,
    "archive": brain_sql.archive,
    "restore": brain_sql.restore,
    "flag": brain_sql.flag,
}
EXTEND_CHOICES = ((30, "+30 days"), (365, "+1 year"))
DONE = {"extend": "Extended the expiry of", "archive": "Archived", "restore": "Restored", "flag": "Flagged"}


def decayed_query(selected, page=1, size=for_plugin.MAX_PAGE_ROWS, **changes):
    """The decayed page's query string for `selected` facets with `changes`
    (a value of None removes that facet), page and size."""
    values = {**selected, **changes}
    pairs = [(name, values[name]) for name in FACETS if values.get(name) is not None]
    pairs += [("page", str(page))] if page > 1 else []
    pairs += [("size", str(size))] if size != for_plugin.MAX_PAGE_ROWS else []
    return "?" + urllib.parse.urlencode(pairs) if pairs else ""


def back_pairs(back):
    """The (name, value) pairs of `back`, a decayed page's query string; an ApiError
    when it is none (a part without '=', percent-encoding that is not UTF-8)."""
    try:
        return urllib.parse.parse_qsl(back, keep_blank_values=True, strict_parsing=True, errors="strict")
    except ValueError:
        shown = for_plugin.shown(back, 80)
        raise ApiError(f"back, the page to go back to, is no query string (percent-encoded UTF-8): {shown}") from None


@html_page
async def decayed_page(datasette, request):
    """Expired, soon-expiring and archived memories for review, with facets, a
    page at a time; for actors with brain-write, what to do about each, unless
    the brain cannot be written (the page then says why, once)."""
    db = await brain_database(datasette, request)
    tools.only(request, "GET")
    given = [(name, value) for name in request.args.keys() for value in request.args.getlist(name)]
    strict = wants_json(request)  # as JSON, a name it does not take is refused (but _format, which asks for it)
    given = [(name, value) for name, value in given if not (strict and name == "_format")]
    selected, page, size = for_plugin.decayed_selection(given, strict=strict)

    def read(conn):
        now, rows = brain_sql.decayed(conn, page=page, size=size, selected=selected)
        return now, rows, *for_plugin.decayed_facets(conn, now, selected)

    now, rows, count, counts = await db.execute_fn(read)
    page_url = f"{datasette.urls.database(db.name)}/-/decayed"  # encoded as Datasette's own links, however reached
    here = page_url + (".json" if request.url_vars.get("format") == "json" else "")
    facets = {}
    for name in FACETS:
        found = counts[name]
        values = (
            [b for b in BUCKETS if b in found] if name == "decay" else sorted(found, key=lambda v: (-found[v], str(v)))
        )
        facets[name] = []
        for value in values:
            chosen = selected.get(name) == str(value)
            toggled = decayed_query(selected, size=size, **{name: None if chosen else str(value)})
            facets[name].append(
                {"value": value, "count": found[value], "selected": chosen, "toggle_url": here + toggled}
            )
    pages = max(1, -(-count // size))
    links = {
        "next": here + decayed_query(selected, page + 1, size) if page < pages else None,
        "previous": here + decayed_query(selected, min(page - 1, pages), size) if page > 1 else None,
    }
    if wants_json(request):
        return Response.json(
            {
                "now": now,
                "count": count,
                "page": page,
                "pages": pages,
                "size": size,
                **links,
                "selected": selected,
                "facets": facets,
                "rows": rows,
            }
        )
    read_only = None if replica.forwards(datasette, db) else tools.read_only(db)
    can_write = read_only is None and await datasette.permission_allowed(
        request.actor, tools.WRITE_PERMISSION, resource=db.name, default=False
    )
    return Response.html(
        await datasette.render_template(
            "brain_decayed.html",
            {
                "database": db.name,
                "rows": rows,
                "facets": facets,
                "selected": selected,
                "now": now,
                "count": count,
                "page": page,
                "pages": pages,
                "first": (page - 1) * size + 1,
                **links,
                "can_write": can_write,
                "read_only": read_only,
                "back": decayed_query(selected, page, size)[1:],
                "extend_choices": EXTEND_CHOICES,
                "json_url": f"{page_url}.json{decayed_query(selected, page, size)}",
                "counted": for_plugin.counted,
                "write_how": tools.WRITE_HOW,
            },
            request=request,
        )
    )


FORM_FIELDS = ("id", "action", "back", "csrftoken")  # what the decayed page's forms send; all but id once
MESSAGE_IDS = 5  # the ids a message after an action names; a browser keeps no cookie past 4 KB


def decision(form):
    """(action, ids, days, the query string of the page to go back to) from a
    decayed page's form, all of it checked before anything is written: a field
    the forms do not send, or one of theirs sent twice, is refused, never a value
    taken and another dropped."""
    unknown = sorted(set(form) - set(FORM_FIELDS))
    if unknown:
        fields = ", ".join(for_plugin.shown(name) for name in unknown)
        raise ApiError(f"unknown field {fields}: the form sends {', '.join(FORM_FIELDS)}")
    for name in FORM_FIELDS[1:]:
        if len(form.get(name, ())) > 1:
            raise ApiError(f"{name} is given {len(form[name])} times: give it once")
    given = (form.get("action") or [""])[-1]
    action, colon, days = given.partition(":")
    if action not in DECAY_ACTIONS or (colon and action != "extend"):  # only extend takes its days after a colon
        raise ApiError(f"unknown action {for_plugin.shown(given)}: one of {', '.join(DECAY_ACTIONS)}")
    ids = [for_plugin.whole_number(value, "id", 1, for_plugin.MAX_ID) for value in form.get("id", [])]  # as forget's
    days = for_plugin.whole_number(days, "extend's days", 1, for_plugin.MAX_EXTEND_DAYS) if action == "extend" else None
    try:
        selected, page, size = for_plugin.decayed_selection(back_pairs((form.get("back") or [""])[-1]))
    except brain_sql.FieldError as ex:
        raise ApiError(f"back, the page to go back to: {ex}") from None
    return action, ids, days, decayed_query(selected, page, size)


def first_ids(ids):
    """The first MESSAGE_IDS of `ids`, and how many more: a message fits a cookie."""
    shown = ", ".join(map(str, ids[:MESSAGE_IDS]))
    return f"{shown} and {len(ids) - MESSAGE_IDS:,} more" if len(ids) > MESSAGE_IDS else shown


@html_page
async def decayed_act(datasette, request):
    """POST id (repeatable), action (extend:DAYS, archive, restore, flag), back
    (the decayed page's query string) and the page's csrftoken from the decayed
    page's forms, for actors with brain-write: done by brain_sql in one
    transaction, then back to the page it came from, which says what was done.
    A request with anything wrong in it changes nothing, and says so."""
    database = tools.url_database(datasette, request)
    await tools.open_brain(datasette, request.actor, database)
    tools.only(
        request, "POST", usage="POST id and action (extend:DAYS, archive, restore or flag) from the decayed page"
    )
    if replica.is_replica(datasette.databases.get(database)):  # the primary decides, and says where to go back to
        return await replica.write_request(datasette, request, await read_body(request))
    db = await tools.writable_brain(datasette, request.actor, database)
    try:
        # strictly: a value whose bytes are not UTF-8 would reach the page changed (U+FFFD for each)
        form = urllib.parse.parse_qs((await read_body(request)).decode("utf-8"), errors="strict")
    except ValueError:
        raise ApiError("Nothing was changed: the form is not percent-encoded UTF-8") from None
    try:
        action, ids, days, back = decision(form)
        operation, arguments = DECAY_ACTIONS[action], (ids, days) if action == "extend" else (ids,)
        result = await tools.write(db, lambda conn: operation(conn, *arguments))
    except (ApiError, brain_sql.InputError) as ex:  # the request's fault, found before writing
        raise ApiError(f"Nothing was changed: {ex}", getattr(ex, "status", 400)) from None
    changed, missing = result["changed"], result["not_found"]
    message = f"{DONE[action]} {for_plugin.counted(len(changed), 'memory', 'memories')}"
    message += f" (id {first_ids(changed)})" if changed else ""
    message += f" by {for_plugin.counted(days, 'day')}." if action == "extend" and changed else "."
    if missing:
        message += f" Not found (or flagged): {for_plugin.counted(len(missing), 'id')}: {first_ids(missing)}."
    datasette.add_message(request, message, datasette.INFO if changed else datasette.WARNING)
    return Response.redirect(f"{datasette.urls.database(database)}/-/decayed{back}")
