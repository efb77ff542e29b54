"""The Datasette plugin's hooks: thin, over brain_sql. Datasette reads them through the
package its entry point names (__init__.py)."""

import functools
import sys
import threading

import click
from datasette import Response, hookimpl

import brain_sql
from brain_sql import for_plugin

from . import canned, crossdb, decay, facets, figures, html_errors, links, pages, replica, routes, table_args, tools


@hookimpl
def prepare_connection(conn, database, datasette):
    brain_sql.prepare_connection(conn)
    crossdb.guard_connection(
        conn, datasette, database
    )  # another connection that attaches a brain reads it only if anyone may


@hookimpl
def startup(datasette):
    """Set the process up for concurrent recall, and warm each brain's model and
    read state in the background: the server answers at once, and the first
    recall does not pay for loading."""

    async def inner():
        try:
            for_plugin.check_settings()
        except brain_sql.BrainError as ex:  # a $BRAIN_ setting it cannot use: `datasette serve` says which and stops
            raise click.UsageError(str(ex)) from ex
        brain_sql.serve_many()
        # first, so that loading the model and the read state goes on beside the rest
        # of the start; warm() itself passes over a file that is not a brain
        for db in list(datasette.databases.values()):
            if db.path:  # a brain served immutable (-i) is never written, not even migrated; nor is a replica
                threading.Thread(target=_warm, args=(db.path, db.is_mutable), name="brain-warm", daemon=True).start()
        try:
            await links.remember_brains(datasette)
        except brain_sql.ReadOnlyBrain as ex:  # `datasette serve` says so and stops, without a traceback
            raise click.UsageError(str(ex)) from ex
        except brain_sql.WriteError as ex:  # locked by another process: which databases are brains is unknown
            raise click.ClickException(f"{ex} (start the server again once it is free)") from ex
        await crossdb.learn(datasette)

    return inner


def _warm(path, migrate):
    try:
        brain_sql.warm(path, migrate)
    except Exception:  # only a head start: the first recall meets, and reports, the same problem
        pass


@hookimpl
def register_magic_parameters(datasette):
    """:_brain_recall, which refuses the recall query's bad parameters by name before
    SQLite runs it (canned.py)."""
    return [(canned.MAGIC, canned.magic)]


@hookimpl
def register_routes():
    return [
        (r"^/(?P<database>[^/]+)/-/recall$", routes.recall_view),
        (r"^/-/recall$", routes.recall_view),
        (r"^/(?P<database>[^/]+)/-/verify$", routes.verify_view),
        (r"^/(?P<database>[^/]+)/-/remember$", routes.remember_view),
        (r"^/(?P<database>[^/]+)/-/forget$", routes.forget_view),
        (r"^/-/brain/v1/embeddings$", routes.embeddings_view),
        (r"^/-/brain/v1/models$", routes.models_view),
        (r"^/-/brain/v1/models/(?P<model>.+)$", routes.model_view),  # an id may hold slashes (wordllama/l2_supercat)
        (r"^/(?P<database>[^/]+)/-/memories\.json$", routes.memories_view),
        (r"^/(?P<database>[^/]+)/-/export\.jsonl$", routes.export_view),
        (r"^/(?P<database>[^/]+)/-/brain$", pages.recall_page),
        (r"^/(?P<database>[^/]+)/-/replica$", routes.replica_view),
        # any id: the page answers one that names nothing with its own 404
        (r"^/(?P<database>[^/]+)/-/memory/(?P<id>[^/]+?)(\.(?P<format>json))?$", pages.memory_page),
        (r"^/(?P<database>[^/]+)/-/entity/(?P<id>[^/]+)$", pages.entity_page),
        (r"^/(?P<database>[^/]+)/-/entities(\.(?P<format>json))?$", pages.entities_page),
        (r"^/(?P<database>[^/]+)/-/decayed(\.(?P<format>json))?$", pages.decayed_page),
        (r"^/(?P<database>[^/]+)/-/decayed/act$", pages.decayed_act),  # form posts: CSRF-checked
        (html_errors.OTHER_PAGE_PATHS, html_errors.no_such_page),
        # Datasette's own views, their file figures hidden from whoever may not read every table
        (r"^/-/databases(\.(?P<format>json))?$", figures.databases_view),
        (r"^/(?P<database>[^/.]+)\.(?P<format>json)$", figures.database_view),
    ]


@hookimpl
def permission_allowed(datasette, actor, action, resource):
    if action in replica.WRITE_ACTIONS:
        database = resource[0] if isinstance(resource, (tuple, list)) else resource
        if replica.is_replica(datasette.databases.get(database)):
            return False  # a replica never writes its copy: Litestream's follower alone does
    if action == tools.WRITE_PERMISSION:
        return tools.write_allowed(datasette, actor, resource)
    if (
        action == "view-table"
        and isinstance(resource, (tuple, list))
        and for_plugin.derived_from_knowledge(resource[1])
    ):
        # full text, vectors, documents and the graph are the memories too; the name
        # index is the entities too, and the change log every table
        return routes.derived_table_readable(datasette, actor, *resource)
    if action == "view-table" and isinstance(resource, (tuple, list)) and not for_plugin.brain_table(resource[1]):
        # a view, an index or a table someone added to a brain shows the tables it reads
        return routes.added_table_readable(datasette, actor, *resource)
    if action == "view-query" and isinstance(resource, (tuple, list)):
        return routes.queries_runnable(datasette, actor, resource[0])
    if action in ("execute-sql", "view-database-download") and isinstance(resource, str):
        # arbitrary SQL reads every table, a download is the whole file: neither is
        # for whoever may not read one of a brain's tables
        return routes.sql_runnable(datasette, actor, resource)


@hookimpl
def asgi_wrapper(datasette):
    """Before Datasette's row view, on a brain: its JSON leaves out the foreign_key_tables
    extra (its counts read tables such as relationships that the asker may not be
    allowed, and no hook before the row view knows who asks; the row page filters them
    by actor: row.html), and a row URL with a key of the wrong number of parts is a
    404 (Datasette binds each part to a key column: SQLite's error was a 500); on a
    brain's table, a filter's list that Datasette cannot read or bind is a 400
    (table_args.bad_list; Datasette's was a 500). A GET of /-/mcp is a 405, as MCP
    lets a server answer: the SDK's stateless transport would hold each such stream
    open with nothing to send, for anyone who asks (3,000 of them: 250 MB). The recall
    canned query stopped by a server-side failure is a 503 (canned.answer)."""

    def wrap(app):
        async def wrapped(scope, receive, send):
            if scope.get("type") == "http" and scope.get("method") == "GET" and _is_mcp(datasette, scope):
                await Response.json(
                    {"ok": False, "error": "POST JSON-RPC to /-/mcp"}, 405, {"Allow": "POST"}
                ).asgi_send(send)
                return
            if scope.get("type") == "http":
                await datasette.invoke_startup()  # once: which databases are brains (this runs before Datasette's)
                scope = links.without_link_counts(datasette, scope)
                if await links.key_of_wrong_length(datasette, scope):
                    await (await html_errors.not_found(datasette, scope)).asgi_send(send)
                    return
                wrong = links.is_brain_table(datasette, scope) and table_args.bad_list(
                    (scope.get("query_string") or b"").decode("latin-1")
                )
                if wrong:
                    await (await html_errors.datasette_error(datasette, scope, wrong, 400)).asgi_send(send)
                    return
                with routes.remembering():  # each source of an added object asked once a request
                    if links.is_recall_query(datasette, scope):
                        await canned.answer(app, datasette, scope, receive, send)
                    else:
                        await app(scope, receive, send)
                return
            await app(scope, receive, send)

        return wrapped

    return wrap


def _is_mcp(datasette, scope):
    """Whether the request is for datasette-mcp's /-/mcp (under Datasette's base_url)."""
    return scope.get("path", "").rstrip("/") == datasette.urls.path("/-/mcp")


@hookimpl
def register_mcp_tools(datasette, mcp):
    """datasette-mcp's hook: the brain's tools beside its SQL ones at /-/mcp, served
    statelessly (stateless_http)."""
    from . import mcp_tools  # the MCP SDK: loaded when datasette-mcp is there to ask for the tools

    mcp_tools.register(datasette, mcp)
    # datasette-mcp makes /-/mcp with mcp.streamable_http_app(...) right after this hook, with the SDK's
    # stateful sessions and no setting of its own for them: each initialize is a session kept in memory
    # until 30 idle minutes pass (about 37 KB each, up to 10,000, then every new client is refused). The
    # tools need nothing between requests (each reads its actor from its own request), so every request
    # gets a fresh transport and nothing is kept. An argument datasette-mcp gives itself wins.
    mcp.streamable_http_app = functools.partial(mcp.streamable_http_app, stateless_http=True)


@hookimpl(hookwrapper=True, specname="register_mcp_tools")
def schema_tool_by_permission(datasette, mcp):
    """Once every plugin has added its tools: datasette-mcp's get_database_schema
    shows only the tables the caller may read (mcp_tools.replace_schema_tool)."""
    yield
    from . import mcp_tools

    mcp_tools.replace_schema_tool(datasette, mcp)


@hookimpl(hookwrapper=True, specname="handle_exception")
def busy_is_a_503(datasette, request, exception):
    """A file locked by another process past the busy timeout, or a failing disk, is a
    503 with Retry-After on every page, Datasette's own too, in place of Datasette's
    handling (its traceback, rich's, fails outside an except block); Datasette's own
    answer to one it handles outside any (a URL no route takes) is awaited inside one."""
    handled = sys.exc_info()[1]
    outcome = yield
    answer = html_errors.server_failure(datasette, request, exception)
    if answer is not None:
        outcome.force_result([answer])
    elif handled is None:
        outcome.force_result(html_errors.raised_again(exception, outcome.get_result()))


@hookimpl
def skip_csrf(scope):
    """Posts to the JSON API need no CSRF token: the API reads only JSON bodies
    sent as application/json, which a browser cannot send cross-site without a
    CORS preflight, and refuses anything else in JSON (routes.json_body)."""
    return routes.is_api_post(scope)


def _links(datasette, database):
    base = datasette.urls.database(database)
    return [
        {"href": f"{base}/-/brain", "label": f"Recall from {database}"},
        {"href": f"{base}/-/decayed", "label": f"Review decayed memories in {database}"},
    ]


async def _linked(datasette, actor, name):
    """Whether database `name` is a brain whose memories `actor` may read, for the
    links every page shows, its error pages too: a brain another process has locked
    now has none, not a 500 (review 112)."""
    try:
        return await tools.is_brain(datasette, name) and await tools.memories_readable(datasette, actor, name)
    except brain_sql.WriteError:
        return False


@hookimpl
def menu_links(datasette, actor):
    async def inner():
        links = []
        for name in list(datasette.databases):
            if await _linked(datasette, actor, name):
                links.extend(_links(datasette, name)[:1])
        return links

    return inner


@hookimpl
def database_actions(datasette, actor, database):
    """The brain's pages, for whoever may read its memories (the pages answer nobody else)."""

    async def inner():
        return _links(datasette, database) if await _linked(datasette, actor, database) else []

    return inner


@hookimpl
def table_actions(datasette, actor, database, table):
    async def inner():
        if table == "knowledge" and await tools.memories_readable(datasette, actor, database):
            return _links(datasette, database)
        return []

    return inner


@hookimpl
def get_metadata(datasette, key, database, table):
    """Brains' internal tables hidden and the knowledge table searchable, with or
    without metadata.yml (whose words win)."""
    return links.metadata(datasette, key, database, table)


@hookimpl
def render_cell(row, value, column, table, database, datasette):
    """Memories, entities and [[wikilinks]] link to the brain's pages."""
    return links.render_cell(row, value, column, table, database, datasette)


@hookimpl
def extra_css_urls(database, datasette):
    """A brain's pages, Datasette's among them, fit a phone's screen (static/brain.css)."""
    if database is not None and links.is_brain(datasette, database):
        return [datasette.urls.static_plugins("datasette-brain", "brain.css")]
    return []


@hookimpl
def extra_template_vars(template, database, table, request, datasette):
    """For the templates that extend Datasette's own (database.html, table.html,
    query.html): whether this is a brain (and its pages are the actor's to see),
    the table page's arrangement and the columns a phone shows, and where a
    refused crossdb query may read."""
    if database is None:
        return {}

    async def inner():
        brain = links.is_brain(datasette, database)
        variables = {"is_brain_database": brain}
        if brain and template == "database.html":
            actor = request.actor if request else None
            variables["brain_links"] = await tools.memories_readable(datasette, actor, database)
        if template == "query.html":
            variables["brain_explain_error"] = lambda error: crossdb.explain(datasette, error)
        if table is not None and template.startswith("row"):
            variables["brain_links_from"] = await tools.links_readable(datasette, request.actor, database, table)
        if table is not None:
            variables["brain_arrange"] = links.table_arranger(datasette, database, table)
            variables["brain_phone_columns"] = links.phone_columns(datasette, database, table, request)
        return variables

    return inner


@hookimpl
def register_facet_classes():
    return [decay.DecayFacet]


@hookimpl(hookwrapper=True, specname="register_facet_classes")
def sampled_facet_classes():
    """Datasette's facets (from every plugin's register_facet_classes) suggest
    from a brain table's first rows (facets.py)."""
    outcome = yield
    outcome.force_result([facets.sampled(classes) for classes in outcome.get_result()])


@hookimpl(tryfirst=True)  # before Datasette's own (its _through filter fails with a 500)
def filters_from_request(request, database, table, datasette):
    """The knowledge table's _decay filter; on a brain, first, the table arguments
    Datasette itself would answer with a 500 are refused with a 400 (table_args.py)."""

    async def inner():
        if links.is_brain(datasette, database):
            await table_args.check(datasette, request, database, table)
        return decay.decay_filter(request) if table == "knowledge" else None

    return inner


CONFIGURED = "_brain_metadata"  # the metadata's recall entry, as it was written


@hookimpl
def canned_queries(datasette, database, actor):
    """The recall query; what the metadata says of it (title, description, allow)
    is kept. Whoever may not read the memories runs none of a brain's canned
    queries (permission_allowed's view-query)."""

    async def inner():
        if not await datasette.get_database(database).execute_fn(brain_sql.is_brain):
            return {}
        entry = (datasette.metadata("queries", database=database) or {}).get("recall") or {}
        # Datasette stores what this hook returns over the metadata's own entry, so
        # the metadata's words travel along with ours, kept under CONFIGURED
        configured = entry.get(CONFIGURED, entry)
        query = {
            CONFIGURED: configured,
            "title": "Recall",
            "hide_sql": True,  # its 60 lines of SQL one click away, the form and results first
            "description": "Hybrid recall as plain SQL: vector KNN, FTS5 BM25 and the graph walk, fused by a "
            "convex combination of their normalised scores, or by weighted Reciprocal Rank Fusion when q names "
            "an entity (the graph walk then leads). Filters may be left empty; classes and sources are "
            "comma-separated; as_of (ISO) recalls what was true then.",
            **{key: value for key, value in configured.items() if key not in ("sql", CONFIGURED)},
            "sql": canned.RECALL_SQL,
        }
        return {"recall": query}

    return inner
