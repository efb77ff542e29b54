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

import re
import time

from datasette.utils import sqlite3
from datasette.utils.asgi import Request

import brain_sql
from brain_sql import for_plugin

from . import html_errors, links, tools

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


CUT_SHORT = (
    "the recall query stopped before it finished: Datasette's SQL time limit (sql_time_limit_ms) cut it. Try "
    "again shortly, raise the limit, or recall through /-/recall, which no time limit cuts"
)
OWN_LIMIT = (
    "the recall query stopped before it finished, within the _timelimit given: raise it, or ask the query's "
    "JSON (recall.json) why"
)
FAILED_ELSEWHERE = (
    "the recall query failed outside the brain's functions (a lock, the disk, a damaged file?): its JSON "
    "(recall.json) says why; try again shortly"
)
NEEDS_CHECK = (
    "the recall query stopped: this brain could not answer it (the server's log says why): run sqlite-utils brain check"
)


FUNCTION_FAILED = b"user-defined function raised exception"  # SQLite's words for a brain_* function's error
TIME_LIMIT = b"SQL query took too long"  # Datasette's, for a statement its time limit stopped between steps
WRONG_WIDTH = b"Dimension mismatch"  # sqlite-vec's, for a query vector of another width than the stored ones
# the query's own page or JSON, which Datasette answers when the statement failed (its own refusals, such as
# _next with _stream, are its error page); stopped by the progress handler, a statement fails in whatever words
# the part it stopped has: SQLite's "interrupted", "expected 0 columns for" a CTE, sqlite-vec's "Could not open
# metadata blob", "chunks iter error", … (review 115)
QUERY_FAILED = re.compile(rb'"query_name"|name="q"')


async def answer(app, datasette, scope, receive, send):
    """Datasette's answer to a request of the recall query, but for a 400 that is no
    fault of the caller's: the query is the plugin's own. Stopped at Datasette's time
    limit (which it answers 400 "SQL query took too long"; in a brain_* function,
    which counts it (interruptions); or, after the limit's time, in the words of the
    part it stopped, SQLite's or sqlite-vec's) it is a 503 with Retry-After, or the 400 naming a
    parameter at fault (a time limit cuts the query before its parameters are read);
    a brain_* function failing otherwise on parameters without fault failed on the
    brain itself (its log line says why): the JSON API's 409. Any other 400 is
    Datasette's (a parameter named, `_next` with `_stream`), and so is a limit the
    caller set (`_timelimit`). Datasette's 500 for a statement it stopped with no
    columns yet (review 115) is the time limit's 503 too, after the limit's time, or
    the caller's limit's 400 after theirs (it was passed on as a 500).
    Its CSV is Datasette's 200 whatever happened, a failed query's a bare line end
    where any answer's has the columns' names first (review 113): held until those
    come, and failed if they do not, as a brain_* function's error is."""
    held, began, interrupted, failures = [], time.perf_counter(), for_plugin.interruptions(), for_plugin.failures()
    args = Request(scope, receive).args
    # with no header row, or a trace's page before it, nothing tells a failure from an answer
    csv = (scope["path"].endswith(".csv") or args.get("_format") == "csv") and not (
        args.get("_header") == "off" or args.get("_trace")
    )

    async def holding(message):
        if not held and not (message["type"] == "http.response.start" and (message["status"] in (400, 500) or csv)):
            await send(message)
            return
        held.append(message)
        body = b"".join(part.get("body", b"") for part in held)
        if held[0]["status"] == 200 and (body.strip(b"\r\n") or len(body) > 2):  # the columns' names: an answer
            for part in held:
                await send(part)
            held.clear()
            return
        if message["type"] == "http.response.body" and not message.get("more_body"):
            late = (time.perf_counter() - began) * 1000 >= _limit(datasette, args)
            if held[0]["status"] == 200:  # a CSV with no columns: a brain_* function failed, or SQL elsewhere
                cut, failed = late or for_plugin.interruptions() != interrupted, for_plugin.failures() != failures
            elif held[0]["status"] == 500:
                cut, failed = late, False  # anything else's 500 is sent as it is
            elif FUNCTION_FAILED in body:
                cut, failed = for_plugin.interruptions() != interrupted, True
            else:  # Datasette's own 400s (_next with _stream) are the caller's, however long they took (review 114)
                cut, failed = TIME_LIMIT in body or (late and QUERY_FAILED.search(body) is not None), False
            await _answered(datasette, scope, args, held, cut, failed, send)

    await app(scope, receive, holding)


async def _trouble(db):
    """What is wrong with the brain `db` itself that every recall of it meets (its
    model not installed here, its vectors of another width), in the words /-/recall
    answers with; None when its model and vectors are as they should be."""
    if db is None:
        return None
    try:
        await db.execute_fn(for_plugin.model_ready)
    except Exception as ex:
        error = tools.as_api_error(ex, db)
        if error is None:
            raise
        return f"the recall query stopped: {error}"
    return None


def _limit(datasette, args):
    """The time limit of the request in milliseconds: Datasette's, or the caller's
    `_timelimit` where it is lower, as Datasette reads it."""
    limit, own = datasette.setting("sql_time_limit_ms"), args.get("_timelimit", "")
    return min(limit, int(own)) if own.isdigit() else limit


async def _answered(datasette, scope, args, held, cut, failed, send):
    """Send the answer to a recall query Datasette answered 400 or 500, or as a CSV of
    no columns (`held`): `cut` by a time limit, or `failed` in a brain_* function
    otherwise, as answer says. A CSV says nothing of why: it is answered here."""
    error = for_plugin.recall_params_error({name: args.get(name) for name in args})
    status, body = held[0]["status"], b"".join(part.get("body", b"") for part in held)
    # a brain whose model cannot be used stops every recall that runs: in a brain_* function, in
    # sqlite-vec (Datasette's 400 in its words), or as a CSV of no columns; said as /-/recall says it.
    # Only a query that ran: never Datasette's refusal of the caller (a 403 names no model: review
    # 152), the caller's own parameters or limit, or a time limit
    ran = failed or status == 200 or status == 400 and WRONG_WIDTH in body
    trouble = None
    if ran and not (error or cut or "_timelimit" in args):
        trouble = await _trouble(links.recall_query_database(datasette, scope))
    if trouble:
        await (await html_errors.datasette_error(datasette, scope, trouble, 409)).asgi_send(send)
        return
    said = status != 200  # Datasette's page or JSON names what failed
    failed = failed and not (error and said)
    retry = {"Retry-After": str(tools.RETRY_AFTER_SECONDS)}
    own = "_timelimit" in args
    if said and (own and not (held[0]["status"] == 500 and cut) or not (own or cut or failed)):
        for part in held:
            await send(part)
    elif error:
        await (await html_errors.datasette_error(datasette, scope, error, 400)).asgi_send(send)
    elif own:
        await (await html_errors.datasette_error(datasette, scope, OWN_LIMIT, 400)).asgi_send(send)
    elif cut:
        await (await html_errors.datasette_error(datasette, scope, CUT_SHORT, 503, retry)).asgi_send(send)
    elif failed:
        await (await html_errors.datasette_error(datasette, scope, NEEDS_CHECK, 409)).asgi_send(send)
    else:  # a CSV's query failed outside the brain_* functions, which Datasette's CSV does not say: a 503
        await (await html_errors.datasette_error(datasette, scope, FAILED_ELSEWHERE, 503, retry)).asgi_send(send)
