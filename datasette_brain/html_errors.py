"""The people's pages answer errors with a page (brain_error.html) and the
error's status; their `.json` forms, like the JSON API, answer in JSON."""

import re

from datasette import Response

from . import routes
from .tools import ApiError

# the people's pages, also where a URL is malformed (/-/memory/abc matches no route)
PAGE_PATH = re.compile(r"^/[^/]+/-/(brain|memory|entity|entities|decayed)(/|\.|$)")

TITLES = {
    400: "Bad request", 403: "Permission denied", 404: "Not found", 405: "Method not allowed",
    409: "The brain needs attention", 413: "Request too large", 503: "Busy: try again shortly",
}  # fmt: skip


def wants_json(request):
    return request.url_vars.get("format") == "json" or request.args.get("_format") == "json"


async def error_page(error, datasette, request):
    """The response for `error` (an ApiError), with its status and headers: a page,
    or JSON for a page's `.json` form."""
    if wants_json(request):
        return routes.error(str(error), error.status, error.headers)
    database = request.url_vars.get("database")
    if database not in datasette.databases or database == "_internal":
        database = None
    html = await datasette.render_template(
        "brain_error.html",
        {"title": TITLES.get(error.status, f"Error {error.status}"), "error": str(error), "status": error.status,
         "database": database},  # fmt: skip
        request=request,
    )
    return Response.html(html, status=error.status, headers=error.headers)


# a decorator for page views: the errors tools.as_api_error knows become an error
# page; any other is a bug, and surfaces
html_page = routes.answering_errors(error_page)


async def not_found_page(datasette, request, exception):
    """Datasette's own 404 under a page's path, as the pages answer errors."""
    return await error_page(ApiError(str(exception) or "no such page", 404), datasette, request)
