"""`sqlite-utils brain mcp DB`: the brain's MCP tools over stdin and stdout, for an
agent without a server. Datasette runs in-process, so the tools are the very ones
/-/mcp serves; apart from the plugin so that loading Datasette's plugins never
imports Datasette's app.

The wire is read here rather than by the SDK's stdio_server, which reads stdin with
undecodable bytes replaced (a Latin-1 é stored as U+FFFD), takes a request whose id
is no whole number or text for a notification (never answered), answers what it
cannot read without the id the line holds, and reads no batch, which protocol
2025-03-26 requires. Each line is one JSON-RPC message or a batch of them (blank
lines are skipped); every request gets an answer. A request reaches the server with
its line as its body, a key given twice kept (the SDK keeps its last value), so that
a tool refuses such arguments as the HTTP route refuses such a body.

Each request reaches the server under an id of its own (the client's may repeat one
still in flight), so that every answer is known for the very request it answers:
the answer goes out under the client's id, with the rest of its batch, and when
stdin ends the server's input is closed only once every request read is answered,
since the SDK cancels what is in flight when its input closes."""

import contextlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import partial

import anyio
import mcp_types
from datasette.app import Datasette
from mcp.server.mcpserver import MCPServer
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from pydantic import ValidationError

from . import mcp_tools
from .tools import file_writable

NO_ID = object()  # a line with no top-level "id"
# a JSON string, or a bracket: what _top_level_id walks a line by
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')
_COLON = re.compile(r"\s*:\s*")
_NOT_JSON_RPC = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"


@dataclass
class _Sent:
    """The request context a request passed on carries (a transport's own, as HTTP's
    is its Starlette request): the message as the line gave it, read as a request's
    body is, so that a tool reads its arguments as they arrived (mcp_tools)."""

    text: str

    async def body(self) -> bytes:
        return self.text.encode("utf-8", "surrogatepass")


class Refusal(SessionMessage):
    """The JSON-RPC error that answers what was read, sent back rather than passed on
    (a client's own error answer to the server's request is passed on)."""


@dataclass
class _Batch:
    """A batch's answers, gathered until its `left` requests have each settled."""

    left: int
    answers: list[str]


@dataclass
class _Unanswered:
    """Word from the SDK that the request it knows as `server_id` settled with no
    answer (cancelled by the client): nothing is written for it."""

    server_id: int


@dataclass
class _InFlight:
    """The requests passed on to the server and not yet settled, by the id the server
    knows each by: the client's id and the batch it came in (None: a line alone)."""

    waiting: dict[int, tuple[int | str, _Batch | None]] = field(default_factory=dict)
    issued: int = 0
    quiet: anyio.Event = field(default_factory=anyio.Event)
    initialize_read: bool = False
    too_early: set[int] = field(default_factory=set)  # requests read before any initialize

    def admit(self, client_id, batch, method):
        """The id the server is to know a request by."""
        self.issued += 1
        self.waiting[self.issued] = (client_id, batch)
        if method == "initialize":
            self.initialize_read = True
        elif not self.initialize_read:
            self.too_early.add(self.issued)
        return self.issued

    def newest(self, client_id):
        """The server's id for the latest request in flight under `client_id`, as the
        SDK takes a cancellation for a repeated id; None when none is in flight."""
        ids = [server_id for server_id, (sent, _) in self.waiting.items() if sent == client_id]
        return max(ids, default=None)

    def settle(self, server_id, answer):
        """The line to write now that the request `server_id` is answered (`answer`,
        its JSON-RPC message) or settled unanswered (None): its answer, or its batch's
        once the batch's last request settles; None when nothing goes out yet."""
        client_id, batch = self.waiting.pop(server_id)
        if not self.waiting:
            self.quiet.set()
        if server_id in self.too_early:
            self.too_early.discard(server_id)
            answer = _said_too_early(answer)
        text = None if answer is None else answer.model_copy(update={"id": client_id}).model_dump_json(**_AS_SENT)
        if batch is None:
            return text
        if text is not None:
            batch.answers.append(text)
        batch.left -= 1
        return "[" + ",".join(batch.answers) + "]" if not batch.left and batch.answers else None

    async def drained(self):
        """Return once every request passed on is settled."""
        while self.waiting:
            self.quiet = anyio.Event()
            await self.quiet.wait()


async def serve(paths):
    """Serve the tools for the brains at `paths` as their owner (a tool's `database`
    names one, as Datasette names it: the file's name without .db): reads and writes
    are allowed, as far as each file's own permissions allow."""
    metadata = {"plugins": {"datasette-brain": {"allow_write": True}}}
    writable = [str(path) for path in paths if file_writable(path)]
    # a file that cannot be written is read as it is, as `datasette -i` would: recall works, writes say why not
    datasette = Datasette(
        writable, immutables=[str(path) for path in paths if str(path) not in writable], metadata=metadata
    )
    await datasette.invoke_startup()
    server = MCPServer("datasette-brain", instructions=mcp_tools.INSTRUCTIONS)
    mcp_tools.register(datasette, server, actor={"id": "stdio"})
    lowlevel = server._lowlevel_server  # MCPServer.run_stdio_async, on this module's wire
    with _wire() as (stdin, stdout):
        passed, read = anyio.create_memory_object_stream[SessionMessage](0)
        replies, written = anyio.create_memory_object_stream[SessionMessage | list | _Unanswered](0)
        in_flight = _InFlight()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_read, stdin, passed, replies.clone(), in_flight)
            tasks.start_soon(_write, written, stdout, in_flight)
            await lowlevel.run(read, replies, lowlevel.create_initialization_options())


@contextlib.contextmanager
def _wire():
    """stdin and stdout as binary files the server alone reads and writes: meanwhile
    fd 0 reads nothing and fd 1 writes to stderr, as the SDK's stdio_server has it,
    so that stray output never lands inside a message."""
    wire_in, wire_out = os.dup(0), os.dup(1)
    nothing = os.open(os.devnull, os.O_RDONLY)
    os.dup2(nothing, 0)
    os.close(nothing)
    os.dup2(2, 1)
    try:  # never closed: a thread may still be reading the wire when the server stops
        yield (
            anyio.wrap_file(os.fdopen(wire_in, "rb", closefd=False)),
            anyio.wrap_file(os.fdopen(wire_out, "wb", closefd=False)),
        )
    finally:
        os.dup2(wire_in, 0)
        os.dup2(wire_out, 1)


async def _read(stdin, passed, replies, in_flight):
    """Pass each message read from stdin on to the server, and answer what is no
    message at once; when stdin ends, close the server's input once every request
    read is settled."""
    async with passed, replies:
        async for raw in stdin:
            if not raw.strip():
                continue  # JSON-RPC over stdio is framed by newlines: an empty line frames nothing
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as ex:
                said = f"Parse error: not UTF-8 (byte 0x{raw[ex.start]:02x} at {ex.start})"
                await replies.send(_error(mcp_types.PARSE_ERROR, said, raw.decode("utf-8", "replace")))
                continue
            if line.lstrip().startswith("["):
                await _batch(line, passed, replies, in_flight)
                continue
            read = _message(line)
            if isinstance(read, Refusal):
                await replies.send(read)
            else:
                await _pass(read, None, passed, replies, in_flight)
        await in_flight.drained()


async def _batch(line, passed, replies, in_flight):
    """A batch: each of its messages passed on as a line of its own; the answers to
    its requests, and to what in it is no message, sent as one array (nothing when
    it holds only notifications and responses)."""
    try:
        items = json.loads(line, object_pairs_hook=mcp_tools.JsonPairs)
    except (ValueError, RecursionError) as ex:
        await replies.send(_error(mcp_types.PARSE_ERROR, f"Parse error: {str(ex)[:200]}"))
        return
    if not items:
        await replies.send(_error(mcp_types.INVALID_REQUEST, "Invalid Request: an empty batch"))
        return
    read = [
        _message(mcp_tools.as_json(item))
        if isinstance(item, mcp_tools.JsonPairs)
        else _error(mcp_types.INVALID_REQUEST, _NOT_JSON_RPC)
        for item in items
    ]
    answers = [_dumped(item) for item in read if isinstance(item, Refusal)]
    requests = sum(isinstance(item.message, mcp_types.JSONRPCRequest) for item in read)
    batch = _Batch(left=requests, answers=answers) if requests else None
    if not requests and answers:
        await replies.send(answers)
    for item in read:
        if not isinstance(item, Refusal):
            await _pass(item, batch, passed, replies, in_flight)


async def _pass(read, batch, passed, replies, in_flight):
    """Pass a message on to the server: a request under an id of its own, with word
    sent back should it settle unanswered; a cancellation naming the request the
    server knows (none in flight: nothing to cancel)."""
    message = read.message
    if isinstance(message, mcp_types.JSONRPCRequest):
        server_id = in_flight.admit(message.id, batch, message.method)
        unanswered = partial(replies.send, _Unanswered(server_id))
        sent = read.metadata.request_context if isinstance(read.metadata, ServerMessageMetadata) else None
        read = SessionMessage(
            message.model_copy(update={"id": server_id}),
            metadata=ServerMessageMetadata(request_context=sent, on_request_unanswered=unanswered),
        )
    elif isinstance(message, mcp_types.JSONRPCNotification) and message.method == "notifications/cancelled":
        params = message.params or {}
        named = params.get("requestId")
        server_id = None if isinstance(named, bool) else in_flight.newest(named)
        if server_id is None:
            return
        read = SessionMessage(message.model_copy(update={"params": {**params, "requestId": server_id}}))
    await passed.send(read)


def _said_too_early(answer):
    """The SDK's refusal of a request read before `initialize` ("Invalid request
    parameters", the code kept for clients that key off it) saying what to do."""
    if not isinstance(answer, mcp_types.JSONRPCError) or answer.error.code != mcp_types.INVALID_PARAMS:
        return answer
    said = "Invalid request parameters: the session is not initialized; send 'initialize' first"
    return answer.model_copy(update={"error": answer.error.model_copy(update={"message": said})})


def _message(line):
    """The SessionMessage a line holds, or the JSON-RPC error that answers it (as a
    SessionMessage to send back): -32700 for no JSON (text cut short, a lone
    surrogate escape, which JSON text may not hold in UTF-8, nesting past what the
    SDK reads), -32600 for JSON that is no request, notification or response, or a
    request whose id is neither a whole number nor text; with the line's id where
    one can be read, else null."""
    try:
        message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as ex:
        found = dict(ex.errors()[0]) if ex.errors() else {}
        if found.get("type") == "json_invalid":
            return _error(mcp_types.PARSE_ERROR, f"Parse error: {found.get('msg', ex)}", line)
        return _error(mcp_types.INVALID_REQUEST, _NOT_JSON_RPC, line)
    if isinstance(message, mcp_types.JSONRPCNotification) and _top_level_id(line) is not NO_ID:
        # the SDK reads {"id": 1.5, "method": ...} as a notification: no answer would come
        return _error(mcp_types.INVALID_REQUEST, "Invalid Request: an id must be a whole number or text")
    if isinstance(message, mcp_types.JSONRPCRequest):
        return SessionMessage(message, metadata=ServerMessageMetadata(request_context=_Sent(line)))
    return SessionMessage(message)


def _error(code, message, line=None):
    """The Refusal with a JSON-RPC error answering `line` (None: no id to read)."""
    request_id = None if line is None else _answerable(_top_level_id(line))
    return Refusal(
        mcp_types.JSONRPCError(jsonrpc="2.0", id=request_id, error=mcp_types.ErrorData(code=code, message=message))
    )


def _top_level_id(line):
    """The value of the "id" key of the object `line` holds (the last, as JSON's
    readers take it), read even when the rest of the line is no JSON (nested past
    any reader's depth, cut short); NO_ID when there is none."""
    depth, found = 0, NO_ID
    for token in _TOKENS.finditer(line):
        text = token.group()
        if text in ("[", "{"):
            depth += 1
        elif text in ("]", "}"):
            depth -= 1
        elif depth == 1 and text == '"id"':
            colon = _COLON.match(line, token.end())
            if colon and line[colon.end() : colon.end() + 1] not in ("[", "{"):
                try:
                    found = json.JSONDecoder().raw_decode(line, colon.end())[0]
                except ValueError:
                    continue
            elif colon:
                found = None  # a list or an object: no id
    return found


def _answerable(value: object) -> int | str | None:
    """`value` when it can be answered as a JSON-RPC id: an integer, or text that
    UTF-8 can carry (no lone surrogate); else None."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return value


async def _write(written, stdout, in_flight):
    """Write each answer as a line: the server's to a request under the client's id,
    and as one JSON array with the rest of its batch once the batch's every request
    is settled."""
    async with written:
        async for item in written:
            if isinstance(item, list):
                text = "[" + ",".join(item) + "]"
            elif isinstance(item, _Unanswered):
                text = in_flight.settle(item.server_id, None)
            elif (
                not isinstance(item, Refusal)
                and isinstance(item.message, _ANSWERS)
                and item.message.id in in_flight.waiting
            ):
                text = in_flight.settle(item.message.id, item.message)
            else:
                text = _dumped(item)
            if text is not None:
                await _line(stdout, text)


_ANSWERS = (mcp_types.JSONRPCResponse, mcp_types.JSONRPCError)
_AS_SENT = {"by_alias": True, "exclude_unset": True}  # as the SDK's stdio transport writes a message


def _dumped(item):
    """A SessionMessage's JSON, as the SDK's stdio transport writes it."""
    return item.message.model_dump_json(**_AS_SENT)


async def _line(stdout, text):
    await stdout.write(text.encode("utf-8") + b"\n")
    await stdout.flush()
