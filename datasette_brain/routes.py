"""The JSON API: recall, verify, remember and OpenAI-compatible embeddings.

Each view checks the database is a brain and the actor may use it, turns the
request into brain_sql's terms, and runs brain_sql on Datasette's own
connections (execute_fn has no SQL time limit; recall has its own bounds).
Every user error is a 400 with {"ok": false, "error", "status"}; a write the
server could not make (the write lock not had in time, a failing disk) is a 503
with Retry-After, so a client knows to send the same request again.
"""

import asyncio
import json
import threading
import weakref

from datasette import Forbidden, Response
from datasette.utils import actor_matches_allow

import brain_sql

MAX_BODY_BYTES = brain_sql.MAX_CONTENT_BYTES + 100_000
MAX_EMBEDDING_INPUTS = 256
WRITE_PERMISSION = "brain-write"
RETRY_AFTER_SECONDS = 2


class ApiError(Exception):
    def __init__(self, message, status=400, headers=None):
        super().__init__(message)
        self.status, self.headers = status, headers


def error(message, status=400, headers=None):
    return Response.json({"ok": False, "error": message, "status": status}, status=status, headers=headers)


def api(view):
    """Run a view, turning ApiError, QueryError and Forbidden into JSON errors."""

    async def wrapped(datasette, request):
        try:
            return await view(datasette, request)
        except ApiError as ex:
            return error(str(ex), ex.status, ex.headers)
        except (brain_sql.QueryError, brain_sql.FieldError) as ex:
            return error(str(ex))
        except Forbidden as ex:
            return error(str(ex) or "permission denied", 403)
        except brain_sql.ReadOnlyBrain as ex:
            return error(str(ex), 403)
        except brain_sql.WriteError as ex:
            return error(str(ex), 503, {"Retry-After": str(RETRY_AFTER_SECONDS)})

    return wrapped


async def brain_names(datasette):
    names = []
    for name, db in datasette.databases.items():
        if name != "_internal" and await db.execute_fn(brain_sql.is_brain):
            names.append(name)
    return names


async def brain_database(datasette, request):
    """The brain database the URL names (or the only one), once the actor may read it."""
    name = request.url_vars.get("database")
    if name is None:
        names = await brain_names(datasette)
        if len(names) != 1:
            raise ApiError(
                f"this instance has {len(names)} brain databases: use /<database>/-/recall", 404
            )
        name = names[0]
    if name not in datasette.databases or name == "_internal":
        raise ApiError(f"database not found: {name}", 404)
    # memories are the knowledge table's rows: whoever may not see it reads nothing
    await datasette.ensure_permissions(
        request.actor, [("view-table", (name, "knowledge")), ("view-database", name), "view-instance"]
    )
    db = datasette.get_database(name)
    if not await db.execute_fn(brain_sql.is_brain):
        raise ApiError(f"database {name} is not a brain: create one with sqlite-utils brain init", 404)
    return db


async def read_body(request, limit=MAX_BODY_BYTES):
    """The request body, read a chunk at a time and refused (413) as soon as it is
    past `limit`: a huge body is never held in memory whole."""
    too_big = ApiError(f"the request body is larger than the limit; the limit is {limit:,} bytes", 413)
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise too_big
    chunks, size, more = [], 0, True
    while more:
        message = await request.receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


async def json_body(request):
    body = await read_body(request)
    try:
        value = json.loads(body or b"null")
    except (json.JSONDecodeError, UnicodeDecodeError) as ex:
        raise ApiError(f"the request body is not valid JSON: {ex}") from None
    except RecursionError:
        raise ApiError("the request body is nested too deeply") from None
    bad = brain_sql.unencodable(value)
    if bad is not None:
        raise ApiError(f"the request body has text that is not valid Unicode (a lone surrogate) in {bad[:40]!r}")
    return value


def querydoc_from_args(args):
    """A QueryDoc from query-string parameters (all strings; empty ones are absent)."""
    return brain_sql.querydoc_from_strings({name: args.getlist(name) for name in args.keys()})


@api
async def recall_view(datasette, request):
    db = await brain_database(datasette, request)
    if request.method == "POST":
        doc = brain_sql.parse_querydoc(await json_body(request))
    else:
        doc = querydoc_from_args(request.args)
    try:
        result = await run_recall(datasette, db, doc)
    except brain_sql.BrainError as ex:
        raise ApiError(str(ex), 409) from ex
    return Response.json(result)


RECALL_WAIT_SECONDS = 5
_recall_slots = weakref.WeakKeyDictionary()  # Datasette instance -> its semaphore


async def run_recall(datasette, db, doc):
    """brain_sql.recall on one of Datasette's threads, at most one fewer at once than
    it has (`num_sql_threads`), so table pages always find a thread free; a recall
    that finds no slot within RECALL_WAIT_SECONDS is a 503 with Retry-After."""
    slots = _recall_slots.get(datasette)
    if slots is None:
        slots = _recall_slots[datasette] = threading.BoundedSemaphore(max(1, datasette.setting("num_sql_threads") - 1))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RECALL_WAIT_SECONDS
    while not slots.acquire(blocking=False):
        if loop.time() >= deadline:
            raise ApiError("the server is busy with other recalls; try again shortly", 503,
                           {"Retry-After": str(RETRY_AFTER_SECONDS)})  # fmt: skip
        await asyncio.sleep(0.01)
    try:
        return await db.execute_fn(lambda conn: brain_sql.recall(conn, doc))
    finally:
        slots.release()


@api
async def verify_view(datasette, request):
    db = await brain_database(datasette, request)
    if request.method != "POST":
        raise ApiError("POST {claim, id} or {claim, text}", 405)
    body = await json_body(request)
    if not isinstance(body, dict) or not isinstance(body.get("claim"), str):
        raise ApiError("give claim (a string) and either id or text")
    unknown = sorted(set(body) - {"claim", "id", "text"})
    if unknown:
        raise ApiError(f"unknown field: {', '.join(unknown)}")
    if ("id" in body) == ("text" in body):
        raise ApiError("give either id (a memory) or text, not both or neither")
    if "id" in body and (isinstance(body["id"], bool) or not isinstance(body["id"], int) or not 0 < body["id"] < 2**63):
        raise ApiError("id must be a memory's id, a positive whole number")
    if "text" in body and not isinstance(body["text"], str):
        raise ApiError("text must be a string")
    if len(body["claim"]) > brain_sql.MAX_QUERY_CHARS:
        raise ApiError(f"claim is {len(body['claim'])} characters; the limit is {brain_sql.MAX_QUERY_CHARS}")
    if "text" in body:
        return Response.json(brain_sql.verify(body["claim"], body["text"]))
    result = await db.execute_fn(lambda conn: brain_sql.verify_memory(conn, body["claim"], body["id"]))
    if result is None:
        raise ApiError(f"no memory with id {body['id']}", 404)
    return Response.json(result)


@api
async def remember_view(datasette, request):
    db = await brain_database(datasette, request)
    if request.method != "POST":
        raise ApiError("POST a record, or a list of records, to remember", 405)
    if not await datasette.permission_allowed(request.actor, WRITE_PERMISSION, resource=db.name, default=False):
        raise Forbidden(f"adding memories needs the {WRITE_PERMISSION} permission")
    if not db.is_mutable:
        raise ApiError(f"database {db.name} is served immutable (datasette -i): nothing can be written to it", 403)
    body = await json_body(request)
    records = body if isinstance(body, list) else [body]
    if not records or not all(isinstance(r, dict) for r in records):
        raise ApiError("the body must be a record object or a non-empty list of them")
    report, ids = await db.execute_write_fn(lambda conn: brain_sql.remember(conn, records), block=True)
    if report.errors:
        raise ApiError("; ".join(e.message for e in report.errors))
    return Response.json(
        {"ok": True, "ids": ids, "added": report.documents_added, "updated": report.documents_updated,
         "unchanged": report.documents_unchanged,
         "chunks": {"added": report.chunks_added, "updated": report.chunks_updated,
                    "unchanged": report.chunks_unchanged, "removed": report.chunks_removed}},
        status=201,
    )  # fmt: skip


@api
async def embeddings_view(datasette, request):
    await datasette.ensure_permissions(request.actor, ["view-instance"])
    if request.method != "POST":
        raise ApiError("POST {input, model}", 405)
    body = await json_body(request)
    if not isinstance(body, dict) or "input" not in body:
        raise ApiError("give input: a string or a list of strings")
    inputs = body["input"]
    inputs = [inputs] if isinstance(inputs, str) else inputs
    if not isinstance(inputs, list) or not inputs or not all(isinstance(i, str) for i in inputs):
        raise ApiError("input must be a string or a non-empty list of strings")
    if len(inputs) > MAX_EMBEDDING_INPUTS:
        raise ApiError(f"at most {MAX_EMBEDDING_INPUTS} inputs per request")
    if any(len(i) > brain_sql.MAX_CONTENT_BYTES for i in inputs):
        raise ApiError(f"each input must be at most {brain_sql.MAX_CONTENT_BYTES:,} characters")
    # only the models this instance's brains use: a request never makes the
    # server load a folder or fetch a hub model of the caller's choosing
    models = [(await datasette.get_database(n).execute_fn(brain_sql.info))["model"] for n in await brain_names(datasette)]
    models = list(dict.fromkeys(models)) or [brain_sql.configured_model()]
    model_id = body.get("model", models[0])
    if model_id not in models:
        raise ApiError(f"model must be one of this instance's: {', '.join(models)}")
    try:
        vectors, tokens = await asyncio.get_running_loop().run_in_executor(
            datasette.executor, brain_sql.embed_with_usage, inputs, model_id
        )
    except brain_sql.ModelError as ex:
        raise ApiError(str(ex)) from ex
    return Response.json(
        {
            "object": "list",
            "data": [{"object": "embedding", "embedding": v.tolist(), "index": i} for i, v in enumerate(vectors)],
            "model": model_id,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


def knowledge_readable(datasette, actor, database):
    """An awaitable: False when `actor` may not view the knowledge table of
    `database`, else None (no opinion): what guards everything derived from it."""

    async def inner():
        allowed = await datasette.permission_allowed(actor, "view-table", (database, "knowledge"), default=True)
        return None if allowed else False

    return inner


def write_allowed(datasette, actor, database):
    """brain-write: denied unless the plugin's configuration grants it, e.g.
    plugins: {datasette-brain: {allow_write: {id: agent}}} (per instance or database)."""
    config = datasette.plugin_config("datasette-brain", database=database) or {}
    allow = config.get("allow_write")
    return False if allow is None else actor_matches_allow(actor, allow)


API_PATHS = ("/-/recall", "/-/verify", "/-/remember", "/-/brain/v1/embeddings")


def is_json_api_request(scope):
    headers = dict(scope.get("headers") or [])
    content_type = headers.get(b"content-type", b"").split(b";")[0].strip()
    return content_type == b"application/json" and scope.get("path", "").endswith(API_PATHS)
