"""Datasette's table view on a brain's tables: the query arguments Datasette 0.65
answers with a 500 (an error without a status is one) are refused first, with a 400
naming the argument. Checked from filters_from_request, which the table view runs
after its permission check and before its own checks: whoever may not read a table
is told only that (403), never which of its columns exist. But a filter's list
(column__in=[...]), which Datasette reads before any hook: checked before the view
(bad_list), its answer the same whatever the table holds."""

import json
import urllib.parse

from datasette import Forbidden
from datasette.views.base import DatasetteError

from . import tools


def refuse(message):
    return DatasetteError(message, title="Bad request", status=400)


async def check(datasette, request, database, table):
    """Raise a 400 DatasetteError for the first of the request's table arguments
    that Datasette would fail on with a 500."""
    await _check_sort(datasette, request, database, table)
    _check_time_limit(request)
    await _check_through(datasette, request, database, table)
    await _check_search(datasette, request, database, table)


async def _check_sort(datasette, request, database, table):
    """_sort and _sort_desc, as the table view reads them (the first value, an empty
    one is none): one of them, naming a column the view sorts by."""
    sort, sort_desc = request.args.get("_sort"), request.args.get("_sort_desc")
    if sort and sort_desc:
        raise refuse("Use _sort or _sort_desc, not both")
    column = sort or sort_desc
    if not column:
        return
    db = datasette.get_database(database)
    use_rowid = not await db.primary_keys(table) and not await db.get_view_definition(table)
    from datasette.views.table import TableView  # not at import: Datasette loads plugins amid its views' imports

    # the table view's own list: the metadata's sortable_columns, else every column, and rowid
    sortable = await TableView(datasette).sortable_columns_for_table(database, table, use_rowid)
    if column not in sortable:
        argument = "_sort" if sort else "_sort_desc"
        raise refuse(f"Cannot sort {table} by {column!r} ({argument}): it has no such sortable column")


def _check_time_limit(request):
    value = request.args.get("_timelimit")
    if not value:
        return
    try:
        int(value)
    except ValueError:
        raise refuse(f"_timelimit must be a whole number of milliseconds, not {value!r}") from None


async def _check_through(datasette, request, database, table):
    """Each _through: a JSON object naming a table, a column and a value, the table
    one the actor may read (Datasette's own check, first) with a foreign key to this one."""
    for through in request.args.getlist("_through"):
        try:
            spec = json.loads(through)
        except ValueError:
            spec = None
        if not isinstance(spec, dict) or not {"table", "column", "value"} <= spec.keys():
            raise refuse('_through must be a JSON object {"table": ..., "column": ..., "value": ...}')
        other = spec["table"]
        if not isinstance(other, str) or not isinstance(spec["column"], str):
            raise refuse("_through's table and column must be names")
        if isinstance(spec["value"], (bool, dict, list)):
            raise refuse("_through's value must be text or a number")
        await datasette.ensure_permissions(
            request.actor, [("view-table", (database, other)), ("view-database", database), "view-instance"]
        )
        keys = await datasette.get_database(database).foreign_keys_for_table(other)
        if not any(key["other_table"] == table for key in keys):
            raise refuse(f"_through: {other} has no foreign key to {table}")


async def _check_search(datasette, request, database, table):
    """_search, _search_COLUMN and _fts_table, as Datasette's search filter reads them. A
    search reads the full-text index and the tables it is kept in: refused (403) to
    whoever may not read one of them. _fts_table may name only this table's own index
    (another's, such as knowledge_fts asked through entities, would read its rows
    through this table)."""
    searched = [key for key in request.args if key.startswith("_search") and key != "_searchmode"]
    odd = next((key for key in searched if key != "_search" and not key.startswith("_search_")), None)
    if odd:  # Datasette reads the column after "_search_" (a 500 on this)
        raise refuse(f"{odd}: search with _search or _search_COLUMN")
    asked = request.args.get("_fts_table")
    if not searched and not asked:
        return
    own = datasette.table_metadata(database, table).get("fts_table") or await datasette.get_database(
        database
    ).fts_table(table)
    if asked and asked != own:
        where = f"its full-text index is {own}" if own else "it has no full-text index"
        raise refuse(f"_fts_table must name {table}'s own full-text index: {where}")
    if not searched or not own:
        return
    # the index and the tables FTS5 keeps it in (knowledge_fts_data...), each of which a deny may name
    stored = await tools.kept_in(datasette, datasette.get_database(database), [own])
    denied = await tools.first_denied(datasette, request.actor, database, [own, *stored])
    if denied is not None:
        raise Forbidden(f"Searching {table} reads its full-text index, {denied}, which you may not read")


def bad_list(query_string):
    """What is wrong with the first `column__in` or `__notin` filter whose value is a
    JSON list (it starts with "[") that Datasette cannot read, or whose items SQLite
    cannot take (a list or an object); None when all are good."""
    for key, value in urllib.parse.parse_qsl(query_string, keep_blank_values=True):
        if key.rsplit("__", 1)[-1] not in ("in", "notin") or "__" not in key or not value.startswith("["):
            continue
        try:
            items = json.loads(value)
        except (ValueError, RecursionError):
            return f"{key}: a value starting with [ must be a JSON list"
        if any(isinstance(item, (list, dict)) for item in items):
            return f"{key}: the list's items must be text, numbers, true, false or null"
    return None
