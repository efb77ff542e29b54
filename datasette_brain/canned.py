"""The recall canned query's parameters, read before SQLite runs it.

SQLite tells a brain_* function's error only as "user-defined function raised
exception", and Datasette (its enable_callback_tracebacks) logs the function's
traceback: a bad parameter must never reach the functions. So the plugin's
recall query binds one parameter more, `:_brain_recall`, a Datasette magic
parameter. SQLite takes every parameter's value before it runs a step, after
Datasette has checked the actor's permissions; this one's reads the request's
parameters as the JSON API reads them and refuses the query with an error naming
the one at fault, which Datasette answers 400, on the query's page and in its JSON.
"""

from datasette.utils import sqlite3

import brain_sql
from brain_sql import for_plugin

MAGIC = "brain"  # Datasette's magic parameters are named _<prefix>_<suffix>: this plugin's prefix
CHECKED = "recall"  # :_brain_recall, the recall query's parameters checked

_FIRST = "\nrequest as materialized ("
# RECALL_SQL with :_brain_recall bound, in a table nothing reads
RECALL_SQL = brain_sql.RECALL_SQL.replace(
    _FIRST,
    f"\nchecked as (\n  -- Datasette gives :_{MAGIC}_{CHECKED} once the parameters below are read as the JSON API "
    f"reads them\n  select :_{MAGIC}_{CHECKED}\n),{_FIRST}",
    1,
)


def magic(suffix, request):
    """The magic parameter _brain_<suffix>: for `recall`, NULL once the request's
    parameters read as the JSON API reads them, else an error naming the one at
    fault (a DatabaseError: Datasette answers it as the query's 400)."""
    if suffix != CHECKED:
        raise KeyError(suffix)  # Datasette then looks for a parameter of that name
    error = for_plugin.recall_params_error({name: request.args.get(name) for name in request.args})
    if error:
        raise sqlite3.OperationalError(error)
    return None
