"""The figures Datasette gives of a whole database file: its size in bytes (and, for
an immutable file, its hash), at /-/databases.json and /<db>.json. A brain's file
grows with every memory, hidden ones too: whoever may not read every one of its
tables (tools.tables_readable) is told neither, as the database page already hides
the download link that shows the size. Both routes are Datasette's own views, asked
here first (a plugin's route comes before Datasette's) and their answer trimmed."""

import json

from datasette.utils import tilde_decode

from . import tools

FIGURES = ("size", "hash")  # what the file's bytes decide


async def _hidden(datasette, actor, name):
    """Whether `actor` is told none of database `name`'s file figures."""
    return not await tools.tables_readable(datasette, actor, name)


async def databases_view(datasette, request):
    """Datasette's /-/databases(.json), with each database's figures as null for
    whoever may not read all of its tables."""
    from datasette.views.special import JsonDataView  # not at import: Datasette loads plugins amid its views'

    hidden = {name for name in list(datasette.databases) if await _hidden(datasette, request.actor, name)}

    def data():
        listed = datasette._connected_databases()
        return [{**db, **dict.fromkeys(FIGURES)} if db["name"] in hidden else db for db in listed]

    return await JsonDataView.as_view(datasette, "databases.json", data)(request, None)


async def database_view(datasette, request):
    """Datasette's /<db>.json, the database's own listing (not a query's rows) without
    its size for whoever may not read all of its tables."""
    from datasette.views.database import DatabaseView

    response = await DatabaseView.as_view(datasette)(request, None)
    try:
        name = datasette.get_database(route=tilde_decode(request.url_vars["database"])).name
    except KeyError:
        return response
    if request.method != "GET" or request.args.get("sql") or response.status != 200:
        return response  # HEAD's and OPTIONS' hold no listing (review 115: a 500 reading one)
    if not await _hidden(datasette, request.actor, name):
        return response
    listing = json.loads(response.body)
    if isinstance(listing, dict) and listing.get("database") == name:
        listing.update({figure: None for figure in FIGURES if figure in listing})
        response.body = json.dumps(listing)
    return response
