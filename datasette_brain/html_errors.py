"""The people's pages answer errors with a page (brain_error.html) and the
error's status; their `.json` forms, like the JSON API, answer in JSON."""

from datasette import Response
from datasette.utils import await_me_maybe, sqlite3

import brain_sql
from brain_sql import for_plugin

from . import links, routes, tools
from .tools import ApiError

# any other URL under a page's or an API route's path (/-/memory/1/x, /-/decayed.csv,
# /-/memories without its .json); one that ends in / is left to Datasette, which sends
# it to the URL without. Datasette read the rest as a row of a table named "-": its
# "Invalid SQL" page, and its log the whole error twice (review 152)
OTHER_PAGE_PATHS = (
    r"^/(?P<database>[^/]+)/-/(?:(?P<name>brain|memory|entity|entities|decayed|memories|export|recall|verify"
    r"|remember|forget|replica)[/.].*(?<!/)|(?P<bare>memories|export|memory|entity))$"
)
# where a URL missing its form was meant to go, said in the 404
API_NAMES = {"memories", "export", "recall", "verify", "remember", "forget", "replica"}
MEANT = {"memories": "-/memories.json", "export": "-/export.jsonl", "memory": "-/memory/ID", "entity": "-/entity/ID"}

TITLES = {
    400: "Bad request",
    403: "Permission denied",
    404: "Not found",
    405: "Method not allowed",
    409: "The brain needs attention",
    413: "Request too large",
    503: "Busy: try again shortly",
}


def wants_json(request):
    """Whether a page is asked for as JSON: its .json form, or ?_format=json."""
    return request.url_vars.get("format") == "json" or request.args.get("_format") == "json"


async def error_page(error, datasette, request):
    """The response for `error` (an ApiError), with its status and headers: a page,
    or JSON for a page's `.json` form."""
    if wants_json(request):
        return routes.error(str(error), error.status, error.headers)
    database = tools.url_database(datasette, request)
    if database not in datasette.databases or database == "_internal":
        database = None
    html = await datasette.render_template(
        "brain_error.html",
        {
            "title": TITLES.get(error.status, f"Error {error.status}"),
            "error": str(error),
            "status": error.status,
            "database": database,
        },
        request=request,
    )
    return Response.html(html, status=error.status, headers=error.headers)


# a decorator for page views: the errors tools.as_api_error knows become an error
# page; any other is a bug, and surfaces
html_page = routes.answering_errors(error_page)


@html_page
async def no_such_page(datasette, request):
    """A URL under a page's path that is no page: the pages' 404, answered here
    rather than raised, so that Datasette's exception handling (which fails under
    its test client when rich is installed) never runs for a page's URL."""
    name = request.url_vars.get("name") or request.url_vars.get("bare")
    said, database = "no such page", tools.url_database(datasette, request)
    if name in MEANT and links.is_brain(datasette, database):  # a brain's: another database has no such URL
        said += f": did you mean {datasette.urls.database(database)}/{MEANT[name]}?"
    if name in API_NAMES:  # an API route's client reads JSON
        return routes.error(said, 404)
    raise ApiError(said, 404)


async def datasette_error(datasette, scope, message, status, headers=None):
    """An error as Datasette's own views answer it, before any of them runs: its
    error page or, for a .json URL, its JSON (for a .csv URL, its message)."""
    info = {"ok": False, "error": message, "status": status, "title": None}
    if scope["path"].endswith(".json"):
        return Response.json(info, status=status, headers=headers)
    if scope["path"].endswith(".csv"):
        return Response.text(message + "\n", status=status, headers=headers)
    html = await datasette.render_template([f"{status}.html", "error.html"], info)  # no request: before CSRF's layer
    return Response.html(html, status=status, headers=headers)


async def not_found(datasette, scope):
    """Datasette's own 404 for a row that is not there ("Record not found")."""
    return await datasette_error(datasette, scope, "Record not found", 404)


def server_failure(datasette, request, exception):
    """An awaitable of the 503 (with Retry-After) for an `exception` Datasette raised
    reading a file another process locked past the busy timeout, or on a failing disk
    (its pages read every database's schema first: a 500, review 112); else None."""
    cause, seen = exception, set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, sqlite3.OperationalError):
            # Datasette reads every database's schema first: the one locked may be another than the URL's
            fault = for_plugin.opening_fault("a database this server serves", cause)
            if isinstance(fault, brain_sql.WriteError):
                return error_page(tools.as_api_error(fault), datasette, request)
            return None
        cause = cause.__cause__ or cause.__context__
    return None


def raised_again(exception, answers):
    """Datasette's answers to an `exception` it handles outside an except block (its
    404 for a URL no route takes), each awaited inside one: its traceback printer,
    rich's when installed, fails outside one, a 500 for a page not found."""

    async def inside(answer):
        try:
            raise exception
        except type(exception):
            return await await_me_maybe(answer)

    return [inside(answer) for answer in answers]
