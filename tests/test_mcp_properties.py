"""Property tests for the MCP tools: hostile JSON in every argument of every brain
tool, through the MCP SDK's own client, at /-/mcp of a real `datasette serve`,
over stdio (`sqlite-utils brain mcp`) and in-process. The answer is the tool's
result or the route's JSON error (400-class), never an exception inside the tool,
the same error the HTTP route gives for the same body, and an error writes nothing."""

import asyncio
import concurrent.futures
import json
import sqlite3
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import httpx
import httpx2
import pytest
from datasette.app import Datasette
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.mcpserver import MCPServer

from brain_sql import for_plugin
from datasette_brain import mcp_tools

from .conftest import copy_brain, datasette_server

WRITES = {"plugins": {"datasette-brain": {"allow_write": True}}}
# each tool with valid arguments, the example's hostile ones put over them
VALID = {
    "brain_recall": {"q": "how does the graph leg rank memories?"},
    "brain_remember": {"records": [{"_id": "property", "text": "A memory the property test keeps."}]},
    "brain_verify": {"claim": "graph", "id": 1},
    "brain_forget": {"external_ids": ["no-such-record"]},
    "brain_memory": {"id": 1},
    "brain_list": {"size": 2},
}
ARGUMENTS = {
    "brain_recall": [
        "q",
        "k",
        "scope",
        "classes",
        "sources",
        "domain",
        "since",
        "until",
        "now",
        "as_of",
        "include_decayed",
        "min_relevance",
        "graph",
        "provenance",
        "prf",
        "mmr",
        "mmr_lambda",
        "max_tokens",
        "cutoff",
        "database",
    ],
    "brain_remember": ["records", "database"],
    "brain_verify": ["claim", "id", "text", "database"],
    "brain_forget": ["ids", "external_ids", "database"],
    "brain_memory": ["id", "database"],
    "brain_list": ["scope", "classes", "sources", "domain", "since", "until", "now", "page", "size", "database"],
}
ROUTES = {"brain_recall": "recall", "brain_remember": "remember", "brain_verify": "verify", "brain_forget": "forget"}

# What the SDK's client can put on the wire: no lone surrogates, NaN or Infinity
# (its JSON encoder refuses the one and writes null for the others).
WIRE_TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=30),
    st.sampled_from(
        [
            "NaN",
            "Infinity",
            "-Infinity",
            "1e999",
            "-0",
            "0x10",
            "",
            " ",
            "\x00",
            "a\x00b",
            "/b\x00",
            "brain",
            "_internal",
            "full",
            "-999999999y",
            "9999-12-31",
        ]
    ),
    st.sampled_from([3_000, 20_000]).map(lambda n: "é" * n),  # past q's and claim's limits
)
NUMBERS = st.one_of(
    st.integers(),
    st.integers(2**63 - 2, 2**64 + 2),
    st.sampled_from([10**300, -(10**4000)]),
    st.floats(allow_nan=False, allow_infinity=False),
)
WIRE_VALUE = st.recursive(
    st.none() | st.booleans() | NUMBERS | WIRE_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(WIRE_TEXT, children, max_size=3),
    max_leaves=6,
)
# In-process the arguments are not encoded as JSON text: a lone surrogate reaches the tool
# (as a value: the client's model_dump refuses one in a key).
ANY_TEXT = st.one_of(WIRE_TEXT, st.text(max_size=20), st.sampled_from(["\ud800", "x\udfff", "\ud800\x00"]))
ANY_VALUE = st.recursive(
    st.none() | st.booleans() | NUMBERS | ANY_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(WIRE_TEXT, children, max_size=3),
    max_leaves=6,
)


def hostile_calls(values):
    """(tool, arguments): a tool's valid arguments with one to three of its own replaced by `values`."""
    return st.sampled_from(sorted(ARGUMENTS)).flatmap(
        lambda tool: st.dictionaries(st.sampled_from(ARGUMENTS[tool]), values, min_size=1, max_size=3).map(
            lambda hostile: (tool, {**VALID[tool], **hostile})
        )
    )


class Held:
    """An MCP client session held open on an event loop of its own, so that every
    example of a property test calls through the one session."""

    def __init__(self, connect):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        ready = concurrent.futures.Future()
        self.held = asyncio.run_coroutine_threadsafe(self._hold(connect, ready), self.loop)
        self.client = ready.result(120)

    async def _hold(self, connect, ready):
        self.closing = asyncio.Event()
        try:
            async with connect() as client:
                ready.set_result(client)
                await self.closing.wait()
        except BaseException as ex:
            if not ready.done():
                ready.set_exception(ex)
            raise

    def call(self, tool, arguments):
        return asyncio.run_coroutine_threadsafe(self.client.call_tool(tool, arguments), self.loop).result(120)

    def close(self):
        self.loop.call_soon_threadsafe(self.closing.set)
        try:
            self.held.result(60)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


class Brain:
    """A brain file served by another connection: whether anything was committed
    to it between two looks (SQLite's data_version, which any other connection's
    commit changes)."""

    def __init__(self, path):
        self.conn = sqlite3.connect(path, check_same_thread=False)

    def version(self):
        return self.conn.execute("pragma data_version").fetchone()[0]


def held_brain(path, connect, log=None):
    """The session and the file it serves, once a write through it is seen: the
    check that an error wrote nothing can fail."""
    session, brain = Held(connect), Brain(path)
    before = brain.version()
    stored = session.call("brain_remember", {"records": [{"_id": "seen", "text": "A write the test can see."}]})
    assert not stored.is_error, (stored.content, log and log.read_text())
    assert brain.version() != before
    return session, brain


def logged_since(log, offset):
    """What the server logged past `offset`: a tool's exception shows there as its traceback."""
    with log.open("rb") as f:
        f.seek(offset)
        return f.read().decode("utf-8", "replace")


def check_answer(tool, arguments, result, brain, before, logged=""):
    """The tool's answer, or the route's JSON error with nothing written; no
    exception inside the tool, in the answer or in what the server logged."""
    text = result.content[0].text if result.content else ""
    assert "Error executing tool" not in text, (tool, arguments, text)
    assert "Traceback" not in logged and "Error executing tool" not in logged, (tool, arguments, logged[-3000:])
    if not result.is_error:
        assert isinstance(result.structured_content, dict) and result.structured_content.get("ok") is not False
        return None
    error = result.structured_content
    assert isinstance(error, dict) and set(error) == {"ok", "error", "status"}, (tool, arguments, text)
    assert error["ok"] is False and isinstance(error["error"], str) and error["error"], error
    assert 400 <= error["status"] < 500, (tool, arguments, error)
    assert json.loads(text) == error
    assert brain.version() == before, (tool, arguments, error)  # nothing written
    database = arguments.get("database")
    if database is not None and not isinstance(database, str):
        assert error == {"ok": False, "error": "database must be a string: the name of a brain database", "status": 400}
    elif database not in (None, "brain"):
        assert error["status"] == 404 and error["error"].startswith("database not found"), error
    return error


class Routes:
    """Datasette's own ASGI client, called synchronously: the HTTP routes of the
    file a stdio server serves, or of the in-process server's Datasette."""

    def __init__(self, datasette):
        self.datasette = datasette

    def get(self, path):
        return asyncio.run(self.datasette.client.get(path))

    def post(self, path, **kwargs):
        return asyncio.run(self.datasette.client.post(path, **kwargs))


def post_route(routes, tool, body):
    """POST `body` (JSON text) to the tool's HTTP route."""
    return routes.post(f"/brain/-/{ROUTES[tool]}", content=body, headers={"content-type": "application/json"})


def route_answer(routes, tool, arguments):
    """The HTTP route's answer to the same JSON: (status, error), or None where the
    route is not the same request (another database in its URL, an id its URL cannot hold)."""
    if arguments.get("database") not in (None, "brain"):
        return None
    if tool == "brain_list":  # the route takes a query string: text, not the JSON values the tool takes
        return None
    if tool == "brain_memory":
        memory_id = arguments.get("id")
        if isinstance(memory_id, bool) or not isinstance(memory_id, int) or not 0 < memory_id < 10**18:
            return None
        response = routes.get(f"/brain/-/memory/{memory_id}.json")
    else:
        body = {n: v for n, v in arguments.items() if n != "database"}
        body = body.get("records") if tool == "brain_remember" else body
        # as an MCP call's arguments are read (mcp_tools._read): UTF-8, not \u escapes, which made the route's body
        # past the size limit where the call's was not (a 413 against the call's 400)
        sent = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        response = post_route(routes, tool, sent)
    return response.status_code, response.json().get("error")


def check_against_route(routes, tool, arguments, error):
    """An error is the route's own for the same JSON (its body named as the call); a
    read the tool answered, the route answers too. (A write is not sent twice.)"""
    if error is not None:
        answer = route_answer(routes, tool, arguments)
        if answer is not None:
            answer = (answer[0], answer[1].replace("the request body", f"the {tool} call"))
        assert answer in (None, (error["status"], error["error"])), (tool, arguments, error, answer)
    elif tool in ("brain_recall", "brain_verify", "brain_memory"):
        assert route_answer(routes, tool, arguments) in (None, (200, None)), (tool, arguments)


@dataclass
class Door:
    """One way in to the tools: its session, the file it serves, that file's HTTP
    routes, and the log of the server's own process (when it has one)."""

    session: Held
    brain: Brain
    routes: object
    log: Path | None = None

    def call(self, tool, arguments):
        """The tool's answer, checked, and checked against the route's for the same JSON."""
        before, offset = self.brain.version(), self.log.stat().st_size if self.log else 0
        result = self.session.call(tool, arguments)
        logged = logged_since(self.log, offset) if self.log else ""
        error = check_answer(tool, arguments, result, self.brain, before, logged)
        check_against_route(self.routes, tool, arguments, error)
        return result


@pytest.fixture(scope="module")
def over_http(vault_brain_path, tmp_path_factory):
    """A real `datasette serve` with datasette-mcp, its log in a file; an MCP session at /-/mcp."""
    folder = tmp_path_factory.mktemp("mcp-http")
    path = copy_brain(vault_brain_path, folder / "brain.db")
    (folder / "metadata.json").write_text(json.dumps(WRITES))
    log = folder / "server.log"
    with log.open("w") as output, datasette_server(path, "-m", folder / "metadata.json", log=output) as url:

        def connect():
            return Client(streamable_http_client(f"{url}/-/mcp", http_client=httpx2.AsyncClient(timeout=60)))

        session, brain = held_brain(path, connect, log)
        try:
            with httpx.Client(base_url=url, timeout=60) as http:
                yield Door(session, brain, http, log)
        finally:
            session.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=hostile_calls(WIRE_VALUE))
def test_hostile_arguments_over_mcp_get_the_routes_answer(over_http, call):
    over_http.call(*call)


@pytest.fixture(scope="module")
def over_stdio(vault_brain_path, tmp_path_factory):
    """`sqlite-utils brain mcp DB`, its stderr in a file."""
    folder = tmp_path_factory.mktemp("mcp-stdio")
    path = copy_brain(vault_brain_path, folder / "brain.db")
    log = folder / "stderr.log"
    params = StdioServerParameters(command=sys.executable, args=["-m", "sqlite_utils", "brain", "mcp", str(path)])
    with log.open("w") as errlog:
        session, brain = held_brain(path, lambda: Client(stdio_client(params, errlog=errlog)), log)
        try:
            yield Door(session, brain, Routes(Datasette([str(path)], metadata=WRITES)), log)
        finally:
            session.close()


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=hostile_calls(WIRE_VALUE))
def test_hostile_arguments_over_stdio_get_the_routes_answer(over_stdio, call):
    over_stdio.call(*call)


@pytest.fixture(scope="module")
def in_process(vault_brain_path, tmp_path_factory):
    """The tools on an MCPServer in this process, the SDK's client connected to it
    directly: no JSON encoding between them, so anything a Python value can be arrives."""
    path = copy_brain(vault_brain_path, tmp_path_factory.mktemp("mcp-inproc") / "brain.db")
    server, datasette = MCPServer("test"), Datasette([str(path)], metadata=WRITES)
    mcp_tools.register(datasette, server)
    session, brain = held_brain(path, lambda: Client(server))
    yield Door(session, brain, Routes(datasette))
    session.close()


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=hostile_calls(ANY_VALUE))
def test_hostile_arguments_in_process_get_the_routes_answer(in_process, call):
    """Lone surrogates too: refused as the HTTP route refuses them in a body."""
    tool, arguments = call
    result = in_process.call(tool, arguments)
    if for_plugin.unencodable(arguments) is not None and arguments.get("database") in (None, "brain"):
        assert result.is_error and "not valid Unicode (a lone surrogate)" in result.structured_content["error"], result


def test_a_number_past_pythons_digit_limit_is_refused_in_process(in_process):
    """As the route refuses it in a body (over the wire the SDK's parser refuses it first)."""
    for tool, name, value in [
        ("brain_recall", "k", 10**5000),
        ("brain_remember", "records", [10**5000]),
        ("brain_forget", "ids", [10**5000]),
        ("brain_memory", "id", 10**5000),
    ]:
        before = in_process.brain.version()
        result = in_process.session.call(tool, {**VALID[tool], name: value})
        check_answer(tool, {name: "10**5000"}, result, in_process.brain, before)
        assert result.structured_content["status"] == 400, result.structured_content
        assert result.structured_content["error"].startswith(
            f"the {tool} call is not valid JSON: a whole number of more than"
        )


MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def raw_session(http):
    """tools/call with arguments written as JSON text, as a client in any language
    may write them: NaN and Infinity, which the SDK's client cannot send."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}
    started = http.post("/-/mcp", json=initialize, headers=MCP_HEADERS)
    headers = {**MCP_HEADERS, "mcp-protocol-version": "2025-06-18"}
    if "mcp-session-id" in started.headers:  # as a client does: a session id given is sent back (/-/mcp gives none)
        headers["mcp-session-id"] = started.headers["mcp-session-id"]
    http.post("/-/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)

    def call(tool, arguments):
        params = f'{{"name": {json.dumps(tool)}, "arguments": {arguments}}}'
        request = f'{{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {params}}}'
        return http.post("/-/mcp", content=request, headers=headers).json()["result"]

    return call


NOT_JSON = [
    ("brain_remember", "records", '[{"text": "A memory", "confidence": NaN}]', "NaN"),
    ("brain_recall", "mmr_lambda", "Infinity", "Infinity"),
    ("brain_verify", "id", "-Infinity", "-Infinity"),
    ("brain_forget", "ids", "[NaN]", "NaN"),
    ("brain_memory", "id", "NaN", "NaN"),
]


def test_nan_and_infinity_are_refused_as_the_route_refuses_them(over_http):
    brain, http, log = over_http.brain, over_http.routes, over_http.log
    call = raw_session(http)
    for tool, name, value, constant in NOT_JSON:
        fields = [f"{json.dumps(n)}: {json.dumps(v)}" for n, v in VALID[tool].items() if n != name]
        arguments = "{" + ", ".join([*fields, f"{json.dumps(name)}: {value}"]) + "}"
        before, offset = brain.version(), log.stat().st_size
        result = call(tool, arguments)
        assert "Traceback" not in logged_since(log, offset)
        assert brain.version() == before
        error = f"the {tool} call is not valid JSON: {constant} is not a JSON number"
        assert result["isError"] and result["structuredContent"] == {"ok": False, "error": error, "status": 400}, result
        if tool in ROUTES:  # the route's own words, for its body
            route = post_route(http, tool, value if tool == "brain_remember" else arguments)
            said = route.json()["error"].replace("the request body", f"the {tool} call")
            assert (route.status_code, said) == (400, error)


def test_a_key_given_twice_is_refused_as_the_route_refuses_it(over_http):
    """Arguments giving a key twice, which the SDK's parser would read as its last
    value, are refused at /-/mcp with the route's words for such a body."""
    brain, http = over_http.brain, over_http.routes
    call = raw_session(http)
    for tool, arguments in [
        ("brain_recall", '{"q": "white", "q": "matter", "k": 1}'),
        ("brain_remember", '{"records": [{"text": "a", "text": "b"}]}'),
    ]:
        before = brain.version()
        result = call(tool, arguments)
        route = post_route(http, tool, arguments)
        said = route.json()["error"].replace("the request body", f"the {tool} call")
        assert route.status_code == 400 and "is given twice" in said, route.text
        assert result["isError"] and result["structuredContent"] == {"ok": False, "error": said, "status": 400}, result
        assert brain.version() == before
