"""The JSON API over HTTP: recall, verify, remember, forget (doors to tools.py,
which the MCP tools share) and OpenAI-compatible embeddings.

Each view checks the actor may use the brain before reading a body, which must
be JSON sent as application/json. Every user error is a 400 with {"ok": false,
"error", "status"} (the embeddings route answers in OpenAI's error shape
instead); a write the server could not make (the write lock not had in time, a
failing disk) is a 503 with Retry-After, so a client knows to send the same
request again.
"""

import asyncio
import base64
import contextlib
import contextvars
import json
import urllib.parse
from collections.abc import Generator

from datasette import Response
from datasette.utils import add_cors_headers, await_me_maybe

import brain_sql
from brain_sql import for_plugin

from . import replica, tools
from .tools import MAX_BODY_BYTES, ApiError, brain_names

MAX_EMBEDDING_INPUTS = 256


def error(message, status=400, headers=None):
    return Response.json(tools.error_body(message, status), status=status, headers=headers)


def answering_errors(respond):
    """A decorator for views: the errors tools.as_api_error knows become the
    response `respond(ApiError, datasette, request)` makes (or awaits); any other
    is a bug, and surfaces."""

    def decorate(view):
        async def wrapped(datasette, request):
            if request.method == "OPTIONS":  # a preflight, answered as Datasette's own views answer it
                preflight = Response.text("ok")
                if datasette.cors:
                    add_cors_headers(preflight.headers)
                return preflight
            try:
                return await view(datasette, request)
            except Exception as ex:
                known = tools.as_api_error(ex, datasette.databases.get(request.url_vars.get("database") or ""))
                if known is None:
                    raise
                return await await_me_maybe(respond(known, datasette, request))

        return wrapped

    return decorate


api = answering_errors(lambda ex, *_: error(str(ex), ex.status, ex.headers))


async def brain_database(datasette, request):
    """The brain database the URL names (or the only one), once the actor may read it."""
    return await tools.open_brain(datasette, request.actor, tools.url_database(datasette, request))


async def read_body(request, limit=MAX_BODY_BYTES):
    """The request body, read a chunk at a time and refused (413) as soon as it is
    past `limit`: a huge body is never held in memory whole."""
    too_big = tools.too_large("the request body", limit)
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


def _content_type(scope):
    headers = dict(scope.get("headers") or [])
    return headers.get(b"content-type", b"").split(b";")[0].strip().lower()


async def json_body(request):
    """The request's JSON body. Only `Content-Type: application/json` is read: a
    browser cannot send that cross-site without a CORS preflight, so that header
    is this API's CSRF protection, and anything else is refused in JSON. A field in
    the URL of a JSON post is refused by name: read from the body alone, a scope
    given there would be dropped without a word."""
    if _content_type(request.scope) != b"application/json":
        raise ApiError(
            "send the body as JSON with Content-Type: application/json (other posts are refused: "
            "a cross-site form could send them with your cookies)",
            403,
        )
    if request.args:
        names = ", ".join(sorted({for_plugin.shown(name) for name in request.args.keys()})[:10])
        raise ApiError(f"a POST takes its fields in the JSON body, not in the URL: {names}", 400)
    return tools.read_json(await read_body(request))


def querydoc_from_args(args, checkboxes=()):
    """A QueryDoc from query-string parameters (all strings; empty ones are absent).
    A field of `checkboxes` (the recall page's form) may come as its hidden "false"
    then the checked box's "true", the one way an HTML form sends both states: it
    is true; any other repeat is refused by name, as everywhere."""
    values = {name: args.getlist(name) for name in args.keys()}
    for name in checkboxes:
        if values.get(name) == ["false", "true"]:
            values[name] = ["true"]
    return brain_sql.querydoc_from_strings(values)


@api
async def recall_view(datasette, request):
    database = tools.url_database(datasette, request)
    db = await tools.open_brain(datasette, request.actor, database)  # permission before the body
    tools.only(request, "GET", "POST", usage="GET recall with query parameters, or POST its QueryDoc as JSON")
    await tools.ensure_indexes(datasette, request.actor, db)
    if request.method == "POST":
        doc = brain_sql.parse_querydoc(await json_body(request))
    else:
        doc = querydoc_from_args(request.args)
    return Response.json(await tools.run_recall(datasette, db, doc, request.actor, indexes_checked=True))


def _post_view(operation, usage, status=200, writes=False):
    """A JSON POST route for one of tools' operations; its permissions are checked
    before the body is read."""

    @api
    async def view(datasette, request):
        database = tools.url_database(datasette, request)
        if writes and request.method == "POST" and replica.is_replica(datasette.databases.get(database)):
            return await replica.write_request(datasette, request, await read_body(request))  # the primary decides
        db = await tools.open_brain(datasette, request.actor, database)
        tools.only(request, "POST", usage=usage)
        if writes:
            db = await tools.writable_brain(datasette, request.actor, database, db)
        result = await operation(datasette, request.actor, database, await json_body(request), db=db)
        return Response.json(result, status=status)

    return view


verify_view = _post_view(tools.verify, "POST {claim, id} or {claim, text}")
remember_view = _post_view(tools.remember, "POST a record, or a list of records, to remember", status=201, writes=True)
forget_view = _post_view(tools.forget, 'POST {"ids": [...]} or {"external_ids": [...]} to forget', writes=True)


@api
async def memories_view(datasette, request):
    """GET /DB/-/memories.json: what was stored, newest first, filters and paging
    as query parameters (brain_sql.memories)."""
    database = tools.url_database(datasette, request)
    db = await tools.open_brain(datasette, request.actor, database)
    tools.only(request, "GET", usage="GET the memories, with filters and paging as query parameters")
    listing = brain_sql.listing_from_strings({name: request.args.getlist(name) for name in request.args.keys()})
    return Response.json(await tools.memories(datasette, request.actor, database, listing, db=db))


EXPORT_LINES = 200  # lines of an export read at once: what a stream holds in memory
EXPORT_PIECE_BYTES = 64 * 1024  # what one body message sends of them
# A client that takes no piece for this long is dropped: its export slot given back, and a server
# told to stop waits no longer for it ($BRAIN_EXPORT_IDLE_SECONDS, default 30, read as the server
# starts: checked there; None reads it).
EXPORT_IDLE_SECONDS = None


class _ClientStalled(Exception):
    """The client took nothing for EXPORT_IDLE_SECONDS."""


@api
async def export_view(datasette, request):
    """GET /DB/-/export.jsonl: brain_sql.export streamed, read a page of lines at a
    time on Datasette's threads from one connection of its own, each page in a short
    read of its own (snapshot=False), so a client slow to take them holds no snapshot.
    What stops an export before its first line (permissions, a damaged or outdated
    file, too many exports at once) is the JSON error any route gives."""
    db = await tools.exportable_brain(datasette, request.actor, tools.url_database(datasette, request))
    tools.only(request, "GET", usage="GET the export: it takes no parameters")
    if request.args:
        raise ApiError(f"the export takes no parameters, not {', '.join(sorted(request.args.keys()))[:100]}")
    stream = ExportStream(datasette, db.path, tools.take_export_slot(datasette), request.receive)
    await stream.start()
    return stream


class ExportStream:
    """A streaming response of an export's lines (Datasette sends what a view
    returns through its asgi_send), holding its connection and its export slot
    until the last line is sent, the client goes away or it takes nothing for
    EXPORT_IDLE_SECONDS."""

    def __init__(self, datasette, path, give_back, receive):
        self.datasette, self.path, self.give_back = datasette, path, give_back  # give_back: the export slot
        self.receive = receive  # the request's: it tells when the client went away
        self.idle = EXPORT_IDLE_SECONDS or for_plugin.export_idle_seconds()  # read once an export
        self.conn = self.first = None
        self.lines: Generator[str, None, None] | None = None  # brain_sql.export's

    async def _run(self, operation):
        if self.datasette.executor is None:
            return operation()
        return await asyncio.get_running_loop().run_in_executor(self.datasette.executor, operation)

    def _next(self):
        """The next lines, at most EXPORT_LINES of them, as bytes (b"" when done)."""
        taken = []
        for line in self.lines or ():  # start opened them
            taken.append(line)
            if len(taken) >= EXPORT_LINES:
                break
        return "".join(taken).encode("utf-8")

    async def start(self):
        """Open the connection and read the first lines: a failure is still a JSON error."""

        def opened():
            self.conn = brain_sql.connect(self.path, read_only=True)
            self.lines = brain_sql.export(self.conn, snapshot=False)
            return self._next()

        try:
            self.first = await self._run(opened)
        except BaseException:
            await self._run(self._close)
            raise

    def _close(self):
        try:
            if self.lines is not None:
                self.lines.close()
            if self.conn is not None:
                self.conn.close()
        finally:
            self.give_back()

    async def _gone(self):
        """True once the client has gone away; False when the server cannot tell
        (its receive failed): then the export is sent whole, never cut short."""
        try:
            while (await self.receive())["type"] != "http.disconnect":
                pass
        except Exception:  # noqa: BLE001 - no word of a disconnect: keep sending
            return False
        return True

    async def asgi_send(self, send):
        gone = asyncio.ensure_future(self._gone())

        async def sent(message):
            try:
                await asyncio.wait_for(send(message), self.idle)
            except asyncio.TimeoutError:
                raise _ClientStalled() from None

        try:
            headers = [[b"content-type", b"application/x-ndjson; charset=utf-8"]]
            await sent({"type": "http.response.start", "status": 200, "headers": headers})
            body = self.first
            while body and not (gone.done() and gone.result()):  # a client gone is sent no more: the rest is not read
                for at in range(0, len(body), EXPORT_PIECE_BYTES):
                    await sent(
                        {"type": "http.response.body", "body": body[at : at + EXPORT_PIECE_BYTES], "more_body": True}
                    )
                body = await self._run(self._next)
            await sent({"type": "http.response.body", "body": b""})
        except _ClientStalled:
            _drop_connection()
        finally:
            gone.cancel()
            await self._run(self._close)


def _drop_connection():
    """Abort the connection of the request this task answers. ASGI has no message for it,
    and a response left unfinished is closed by uvicorn only once the client has taken what
    was written (asyncio's transport.close): a client that reads nothing would keep its
    connection open, and a server told to stop waiting for it, for ever. uvicorn runs each
    request as its RequestResponseCycle.run_asgi, whose transport is aborted here; under
    another server nothing is done."""
    task = asyncio.current_task()
    frame = getattr(task.get_coro(), "cr_frame", None) if task else None
    transport = getattr(frame.f_locals.get("self") if frame else None, "transport", None)
    abort = getattr(transport, "abort", None)  # asyncio's transport's, or uvloop's (no subclass of it)
    if callable(abort):
        abort()


@api
async def replica_view(datasette, request):
    """GET /DB/-/replica: what the replica follows, the last change it applied and
    its lag ({"replica": false} on a primary), for whoever may read the memories."""
    db = await tools.open_brain(datasette, request.actor, tools.url_database(datasette, request), ready=False)
    tools.only(request, "GET")
    return Response.json(await replica.status(datasette, db))


EMBEDDING_FIELDS = ("input", "model", "encoding_format", "dimensions", "user")  # OpenAI's; `user` is ignored
ENCODING_FORMATS = ("float", "base64")


class OpenAIError(ApiError):
    """An ApiError that names the body field at fault (`param`) and, where OpenAI
    has one, its error code."""

    def __init__(self, message, param=None, status=400, code=None, headers=None):
        super().__init__(message, status, headers)
        self.param, self.code = param, code


def openai_error(message, status, param=None, code=None, headers=None):
    kind = "server_error" if status >= 500 else "invalid_request_error"
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return Response.json(body, status=status, headers=headers)


# like api, but every error in OpenAI's shape, which OpenAI's clients parse and show
openai_api = answering_errors(
    lambda ex, *_: openai_error(str(ex), ex.status, getattr(ex, "param", None), getattr(ex, "code", None), ex.headers)
)


def embedding_inputs(value):
    """The texts `input` gives: a non-empty string, or a list of them."""
    if value is None:
        raise OpenAIError("give input: the text to embed, as a string or a list of strings", "input")
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not texts:
        raise OpenAIError("input must be a string or a non-empty list of strings", "input")
    if len(texts) > MAX_EMBEDDING_INPUTS:
        raise OpenAIError(f"input has {len(texts)} texts; the limit is {MAX_EMBEDDING_INPUTS} per request", "input")
    for i, text in enumerate(texts):
        where = "input" if texts is not value else f"input[{i}]"
        if isinstance(text, (int, list)) and not isinstance(text, bool):
            raise OpenAIError(
                f"{where} is token ids: this server embeds text only (its model's tokenizer is not OpenAI's); "
                "send the text as a string",
                "input",
            )
        if not isinstance(text, str):
            raise OpenAIError("input must be a string or a non-empty list of strings", "input")
        if not text:
            raise OpenAIError(f"{where} is an empty string: give text to embed", "input")
        if len(text) > for_plugin.MAX_CONTENT_BYTES:
            raise OpenAIError(
                f"{where} is {len(text):,} characters; the limit is {for_plugin.MAX_CONTENT_BYTES:,}", "input"
            )
    return texts


async def served_models(datasette, actor):
    """{model id: dimension} of the models of the brains whose memories `actor` may
    read (a brain's model is read from it, as they are); with none, the configured
    model (its dimension not known before it is loaded). Only these: a request never
    makes the server load a folder or fetch a hub model it names."""
    models, damaged = {}, []
    for name in await brain_names(datasette):
        if await tools.memories_readable(datasette, actor, name):
            try:
                model, dimension = await datasette.get_database(name).execute_fn(for_plugin.served_model)
            except brain_sql.BrainError as ex:
                damaged.append(ex)  # one brain check would name keeps no other's model from serving
                continue
            models.setdefault(model, dimension)
    if damaged and not models:
        raise damaged[0]  # no model a readable brain records can be told: what check would say
    return models or {for_plugin.configured_model(): None}


def chosen_model(name, models):
    """The model to embed with: the instance's only model whatever `name` says (the
    official client sends "text-embedding-3-small" by default), else the one named."""
    if name is not None and not isinstance(name, str):
        raise OpenAIError("model must be a string", "model")
    if len(models) == 1:
        return next(iter(models))
    if name in models:
        return name
    served = ", ".join(models)
    if name is None:
        raise OpenAIError(f"give model: this instance's brains use several models: {served}", "model")
    raise OpenAIError(
        f"model {for_plugin.shown(name, 100)} is not served here; this instance's brains use: {served}",
        "model",
        code="model_not_found",
    )


def check_dimensions(dimensions, actual, model_id):
    if dimensions is not None and actual is not None and dimensions != actual:
        raise OpenAIError(
            f"dimensions is {dimensions}, but {model_id} makes {actual}-dimensional vectors and cannot shorten "
            f"them: leave dimensions out or give {actual}",
            "dimensions",
        )


def encoded(vector, encoding_format):
    """One vector as OpenAI sends it: a list of floats, or base64 of its
    little-endian float32 bytes."""
    if encoding_format == "base64":
        return base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii")
    return vector.tolist()


@openai_api
async def embeddings_view(datasette, request):
    """OpenAI's POST /v1/embeddings, for the model this instance's brains use."""
    if not await datasette.permission_allowed(request.actor, "view-instance", default=True):
        raise OpenAIError("permission denied: this actor may not use this Datasette instance", status=403)
    tools.only(request, "POST", usage="POST {input, model} to embed text")
    body = await json_body(request)
    if not isinstance(body, dict):
        raise OpenAIError("the body must be a JSON object: {input, model}")
    unknown = [name for name in body if name not in EMBEDDING_FIELDS]
    if unknown:
        raise OpenAIError(
            f"unknown field{'s' if len(unknown) > 1 else ''}: {', '.join(repr(n[:40]) for n in unknown)}; "
            f"this route takes {', '.join(EMBEDDING_FIELDS)}",
            unknown[0][:40],
            code="unknown_parameter",
        )
    texts = embedding_inputs(body.get("input"))
    models = await served_models(datasette, request.actor)
    model_id = chosen_model(body.get("model"), models)
    encoding_format = "float" if body.get("encoding_format") is None else body["encoding_format"]
    if encoding_format not in ENCODING_FORMATS:
        raise OpenAIError('encoding_format must be "float" or "base64"', "encoding_format")
    dimensions = body.get("dimensions")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int)):
        raise OpenAIError("dimensions must be a whole number", "dimensions")
    check_dimensions(dimensions, models[model_id], model_id)
    try:
        vectors, tokens = await tools.in_read_slot(  # a recall's slot: a batch takes a thread as long as one
            datasette,
            lambda: asyncio.get_running_loop().run_in_executor(
                datasette.executor, brain_sql.embed_with_usage, texts, model_id
            ),
        )
    except brain_sql.ModelError as ex:
        raise OpenAIError(str(ex), "model") from ex
    except brain_sql.InputError as ex:  # a text longer than the model reads; one given as a string is `input`
        said = str(ex).replace("input[0]", "input", 1) if isinstance(body.get("input"), str) else str(ex)
        raise OpenAIError(said, "input", code="context_length_exceeded") from ex
    check_dimensions(dimensions, vectors.shape[1], model_id)
    return Response.json(
        {
            "object": "list",
            "data": [
                {"object": "embedding", "embedding": encoded(v, encoding_format), "index": i}
                for i, v in enumerate(vectors)
            ],
            "model": model_id,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


async def _models_served(datasette, request):
    """served_models, for an actor who may use this instance (as embeddings_view): a
    model only brains the actor may not read use is not one, and is the 404 of a
    model never served (a 403 would tell that a hidden brain uses it)."""
    if not await datasette.permission_allowed(request.actor, "view-instance", default=True):
        raise OpenAIError("permission denied: this actor may not use this Datasette instance", status=403)
    tools.only(request, "GET", usage="GET the models this instance serves")
    return await served_models(datasette, request.actor)


def model_object(model_id):
    """A model as OpenAI lists one. A brain records no time its model was made: created is 0."""
    return {"id": model_id, "object": "model", "created": 0, "owned_by": "datasette-brain"}


@openai_api
async def models_view(datasette, request):
    """OpenAI's GET /v1/models: the models this instance's brains embed with,
    which /-/brain/v1/embeddings takes."""
    models = await _models_served(datasette, request)
    return Response.json({"object": "list", "data": [model_object(model_id) for model_id in models]})


@openai_api
async def model_view(datasette, request):
    """OpenAI's GET /v1/models/{model}: one served model, or a 404 in OpenAI's shape."""
    models = await _models_served(datasette, request)
    model_id = urllib.parse.unquote(request.url_vars["model"])  # OpenAI's client sends wordllama%2Fl2_supercat
    if model_id not in models:
        raise OpenAIError(
            f"model {model_id[:100]!r} is not served here; this instance's brains use: {', '.join(models)}",
            "model",
            status=404,
            code="model_not_found",
        )
    return Response.json(model_object(model_id))


def derived_table_readable(datasette, actor, database, table):
    """An awaitable: False when `table` is derived from tables of `database` that
    `actor` may not view, else None (no opinion): a table derived from `knowledge`
    follows it; the name index follows `entities` too; a virtual table and the tables
    its module keeps it in (knowledge_fts_data, vec_knowledge_vector_chunks00...) are
    one index, a deny of any holding for each (knowledge_fts_vocab decodes
    knowledge_fts_data); a table recording
    rows of every table (the change log) is for whoever may view every table of the brain."""

    async def inner():
        if not await datasette.permission_allowed(actor, "view-table", (database, "knowledge"), default=True):
            return False
        index = table if table in for_plugin.VIRTUAL_TABLES else for_plugin.stored_for(table)
        if index and not await tools.index_readable(datasette, actor, database, index):
            return False
        if table in for_plugin.ENTITY_DERIVED_TABLES and not await datasette.permission_allowed(
            actor, "view-table", (database, "entities"), default=True
        ):
            return False
        if for_plugin.derived_from_every_table(table) and await tools.is_brain(datasette, database):
            return None if await tools.tables_readable(datasette, actor, database) else False
        if for_plugin.own_name(table):  # recall asks for these: no query for them
            return None
        # named like one of the brain's, but added by someone (a view): what it shows decides (review 107)
        return await added_table_readable(datasette, actor, database, table)()

    return inner


def added_table_readable(datasette, actor, database, table):
    """An awaitable: False when `table` of a brain, one added to it (a view, an index
    `sqlite-utils enable-fts` made, a vocabulary, a table triggers fill, under any
    name), shows rows of a table `actor` may not view, or of every table (what SQLite
    cannot tell) when `actor` may not read them all; else None (no opinion)."""

    async def inner():
        if _following.get() or not await tools.is_brain(datasette, database):
            return None  # asked for a source of an added object: its own rules alone (the sources are all known)
        shown = await datasette.databases[database].execute_fn(lambda conn: for_plugin.shown_by_added(conn, table))
        if shown is None:  # one of the brain's own
            return None
        if for_plugin.EVERY_TABLE in shown and not await tools.tables_readable(datasette, actor, database):
            return False
        following, memo = _following.set(True), _verdicts.get()
        memo = {} if memo is None else memo
        try:
            for source in sorted(shown - {for_plugin.EVERY_TABLE, table}):
                key = (json.dumps(actor, sort_keys=True, default=repr), database, source)
                if key not in memo:
                    memo[key] = await datasette.permission_allowed(
                        actor, "view-table", (database, source), default=True
                    )
                if not memo[key]:
                    return False
        finally:
            _following.reset(following)
        return None

    return inner


# set while the sources of an added object are asked about: tables_shown gave them all, transitively, so a
# source's check is its own rules (and the brain's derived ones), not its sources again: a cycle of triggers
# recursed without end, a chain of them took time exponential in its length (review 108)
_following = contextvars.ContextVar("brain_following_sources", default=False)
# a request's verdicts on the sources of added objects: a page listing a chain of trigger-fed tables asked
# each table's whole chain again (review 109: 34 s for a chain of 400); one request's alone (remembering)
_verdicts: contextvars.ContextVar[dict | None] = contextvars.ContextVar("brain_source_verdicts", default=None)


@contextlib.contextmanager
def remembering():
    """Within it (one request), each source's verdict is asked once."""
    token = _verdicts.set({})
    try:
        yield
    finally:
        _verdicts.reset(token)


def queries_runnable(datasette, actor, database):
    """An awaitable: False when `database` is a brain one of whose tables `actor` may
    not read, else None: a brain's canned queries (its metadata's own too) read its
    tables, and its SQL functions the graph."""

    async def inner():
        if await tools.is_brain(datasette, database):
            return await sql_runnable(datasette, actor, database)()
        return None

    return inner


def sql_runnable(datasette, actor, database):
    """An awaitable: False when `actor` may not read one of the brain tables of
    `database` (tools.tables_readable), else None (no opinion): arbitrary SQL reads
    every table, and a download is the whole file."""

    async def inner():
        return None if await tools.tables_readable(datasette, actor, database) else False

    return inner


API_PATHS = ("/-/recall", "/-/verify", "/-/remember", "/-/forget", "/-/brain/v1/embeddings")


def is_api_post(scope):
    """A POST to the JSON API: its CSRF check is json_body's, which answers in JSON."""
    return scope.get("method") == "POST" and scope.get("path", "").endswith(API_PATHS)
