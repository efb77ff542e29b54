"""An agent's session end to end, as docs/agents.md tells it: a real `datasette
serve` with datasette-auth-tokens (a bearer token read from an environment
variable) and datasette-mcp; remember, recall and forget over HTTP and over MCP with
the MCP SDK's own client, and over stdio (`sqlite-utils brain mcp`); and that
page's Python examples, run against the server as written."""

import asyncio
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

import brain_sql

from .conftest import copy_brain
from .examples import DOCS_AGENTS, ROOT, block_with, printed_comment, run_python

TOKEN = "s3cret-agent-token"
METADATA = {
    "plugins": {
        "datasette-auth-tokens": {"tokens": [{"token": {"$env": "BRAIN_AGENT_TOKEN"}, "actor": {"id": "agent"}}]},
        "datasette-brain": {"allow_write": {"id": "agent"}},
    }
}
NOTE = {"_id": "deploys", "title": "Deploy window", "text": "Deploys happen on Tuesdays between 10:00 and 12:00 UTC."}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(vault_brain_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("agents")
    path = copy_brain(vault_brain_path, folder / "brain.db")
    (folder / "metadata.json").write_text(json.dumps(METADATA))
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "datasette", "serve", str(path), "-m", str(folder / "metadata.json"), "-p", str(port)],
        env={**os.environ, "BRAIN_AGENT_TOKEN": TOKEN},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"{url}/-/versions.json").status_code == 200:
                break
        except httpx.TransportError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(process.stdout.read().decode())
        time.sleep(0.2)
    yield url, path
    process.terminate()
    process.wait(10)


# the address the examples of docs/agents.md talk to: the server its token recipe starts
DOCUMENTED = "http://127.0.0.1:8002"


def bearer(token=TOKEN):
    return {"Authorization": f"Bearer {token}"}


def test_a_session_over_http(server):
    url, _ = server
    with httpx.Client(base_url=url) as http:
        stored = http.post("/brain/-/remember", json=NOTE, headers=bearer())
        assert stored.status_code == 201, stored.text
        [[memory_id]] = stored.json()["ids"]
        again = http.post(
            "/brain/-/remember", json={**NOTE, "text": NOTE["text"] + " Never on Fridays."}, headers=bearer()
        )
        assert again.json()["updated"] == 1 and again.json()["added"] == 0
        for headers in ({}, bearer("wrong")):
            refused = http.post("/brain/-/remember", json=NOTE, headers=headers)
            assert refused.status_code == 403 and refused.json()["ok"] is False, refused.text
        found = http.post("/brain/-/recall", json={"q": "when do deploys happen?"}).json()
        assert found["hits"][0]["title"] == "Deploy window"
        assert "Never on Fridays" in found["hits"][0]["content"]
        gone = http.post("/brain/-/forget", json={"external_ids": ["deploys"]}, headers=bearer())
        assert gone.status_code == 200 and gone.json()["removed"]["external_ids"] == ["deploys"], gone.text
        after = http.post("/brain/-/recall", json={"q": "when do deploys happen?"}).json()
        assert all(hit["title"] != "Deploy window" for hit in after["hits"])
        assert http.get(f"/brain/-/memory/{memory_id}").status_code == 404


def _over_http(url, token=TOKEN):
    headers = bearer(token) if token else {}
    return Client(streamable_http_client(f"{url}/-/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=60)))


def test_a_session_over_mcp(server):
    url, _ = server

    async def session():
        async with _over_http(url) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {
                "brain_recall",
                "brain_remember",
                "brain_verify",
                "brain_forget",
                "brain_memory",
                "brain_list",
            } <= names
            assert "execute_sql" in names  # datasette-mcp's own, beside ours
            stored = await client.call_tool("brain_remember", {"records": [{**NOTE, "_id": "mcp-deploys"}]})
            assert not stored.is_error, stored.content
            [[memory_id]] = stored.structured_content["ids"]
            found = await client.call_tool("brain_recall", {"q": "when do deploys happen?", "k": 3})
            assert found.structured_content["hits"][0]["id"] == memory_id
            newest = await client.call_tool("brain_list", {"size": 1})
            assert newest.structured_content["memories"][0]["id"] == memory_id and newest.structured_content["more"]
            async with httpx.AsyncClient(base_url=url) as http:
                assert (await http.get("/brain/-/memories.json?size=1")).json() == newest.structured_content
            refused = await client.call_tool("brain_list", {"size": "1"})
            assert refused.is_error and refused.structured_content["status"] == 400
            one = await client.call_tool("brain_memory", {"id": memory_id})
            assert one.structured_content["memory"]["external_id"] == "mcp-deploys"
            async with httpx.AsyncClient(base_url=url) as http:
                assert (await http.get(f"/brain/-/memory/{memory_id}.json")).json() == one.structured_content
            checked = await client.call_tool("brain_verify", {"claim": "deploys happen on tuesdays", "id": memory_id})
            assert checked.structured_content["supported"] is True
            gone = await client.call_tool("brain_forget", {"ids": [memory_id]})
            assert gone.structured_content["removed"]["memories"] == [memory_id]
        async with _over_http(url, token=None) as anonymous:
            refused = await anonymous.call_tool("brain_remember", {"records": [NOTE]})
            assert refused.is_error and '"status": 403' in refused.content[0].text
            read = await anonymous.call_tool("brain_recall", {"q": "graph leg"})
            assert not read.is_error  # reading is open here, as over HTTP

    asyncio.run(session())


def test_mcp_over_http_keeps_no_session_per_client(server):
    """Each initialize at /-/mcp would otherwise be a session the server holds in memory until
    it is idle for half an hour (thousands of clients: hundreds of MB, then every new client
    refused): none is given, and a request needs none."""
    url, _ = server
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
    with httpx.Client(base_url=url, headers=headers) as http:
        for number in range(3):
            opened = http.post("/-/mcp", json={"jsonrpc": "2.0", "id": number, "method": "initialize", "params": hello})
            assert opened.status_code == 200 and "mcp-session-id" not in opened.headers, opened.headers
        listed = http.post("/-/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
    assert listed.status_code == 200, listed.text
    assert "brain_recall" in {tool["name"] for tool in listed.json()["result"]["tools"]}


def test_a_get_of_mcp_is_refused_not_held_open(server):
    """MCP lets a server answer a GET of its endpoint with 405: the stateless
    transport would hold every such stream open with nothing to send."""
    url, _ = server
    with httpx.Client(base_url=url, timeout=10) as http:
        for accept in ("text/event-stream", "*/*"):
            got = http.get("/-/mcp", headers={"Accept": accept})
            assert got.status_code == 405 and got.headers["allow"] == "POST", got.text


def test_the_same_json_over_mcp_and_http(server):
    url, _ = server
    doc = {"q": "How does the graph leg rank memories?", "k": 3, "now": "2026-11-29 12:00:00"}

    async def both():
        async with _over_http(url) as client:
            over_mcp = (await client.call_tool("brain_recall", doc)).structured_content
        async with httpx.AsyncClient(base_url=url) as http:
            over_http = (await http.post("/brain/-/recall", json=doc)).json()
        return over_mcp, over_http

    over_mcp, over_http = asyncio.run(both())
    for result in (over_mcp, over_http):
        result["telemetry"] = {k: v for k, v in result["telemetry"].items() if not k.endswith("_ms")}
    assert over_mcp == over_http


def test_a_session_over_stdio(vault_brain_copy):
    async def session():
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "sqlite_utils", "brain", "mcp", str(vault_brain_copy)]
        )
        async with Client(params) as client:
            stored = await client.call_tool("brain_remember", {"records": [NOTE]})
            [[memory_id]] = stored.structured_content["ids"]
            found = await client.call_tool("brain_recall", {"q": "when do deploys happen?"})
            assert found.structured_content["hits"][0]["id"] == memory_id
            gone = await client.call_tool("brain_forget", {"external_ids": ["deploys"]})
            assert gone.structured_content["removed"]["memories"] == [memory_id]
            bad = await client.call_tool("brain_recall", {"q": "x", "k": 1000})
            assert bad.is_error and '"status": 400' in bad.content[0].text

    asyncio.run(session())


def test_one_stdio_server_serves_several_brains_each_named(vault_brain_path, tmp_path):
    """SPEC's `mcp DB...`: a tool's `database` chooses the brain, by its file's name;
    without it, the server with several says to name one."""
    work = copy_brain(vault_brain_path, tmp_path / "work.db")
    home = copy_brain(vault_brain_path, tmp_path / "home.db")

    async def session():
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "sqlite_utils", "brain", "mcp", str(work), str(home)]
        )
        async with Client(params) as client:
            stored = await client.call_tool("brain_remember", {"records": [NOTE], "database": "home"})
            unnamed = await client.call_tool("brain_recall", {"q": "when do deploys happen?"})
            at_home = await client.call_tool("brain_recall", {"q": "when do deploys happen?", "database": "home"})
            return stored, unnamed, at_home

    stored, unnamed, at_home = asyncio.run(session())
    assert not stored.is_error, stored.content
    assert unnamed.is_error and "database" in unnamed.content[0].text
    [[memory_id]] = stored.structured_content["ids"]
    assert at_home.structured_content["hits"][0]["id"] == memory_id
    conn = brain_sql.connect(work)
    assert conn.execute("select count(*) from knowledge where external_id = 'deploys'").fetchone() == (0,)
    twice = subprocess.run(
        [sys.executable, "-m", "sqlite_utils", "brain", "mcp", str(work), str(tmp_path / "." / "work.db")],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert twice.returncode == 2 and "is given twice" in twice.stderr, twice.stderr
    os.link(work, tmp_path / "hard.db")  # review 104: a hard link is the same file too
    linked = subprocess.run(
        [sys.executable, "-m", "sqlite_utils", "brain", "mcp", str(work), str(tmp_path / "hard.db")],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
    )
    assert linked.returncode == 2 and "is given twice" in linked.stderr, linked.stderr


def _stdio_mcp(path):
    """`sqlite-utils brain mcp PATH` as a process the test writes raw lines to (text,
    or bytes through its stdin's buffer) and reads with _answers; the test kills it."""
    return subprocess.Popen(
        [sys.executable, "-m", "sqlite_utils", "brain", "mcp", str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
    )


def _answers(process, count, seconds=60):
    """The next `count` JSON lines `process` writes, within `seconds` (read on a
    thread, one for the process, so that a line never written fails the test instead
    of hanging it)."""
    if not hasattr(process, "lines"):
        process.lines = queue.Queue()
        threading.Thread(target=lambda: [process.lines.put(line) for line in process.stdout], daemon=True).start()
    lines = process.lines
    answers, deadline = [], time.monotonic() + seconds
    while len(answers) < count:
        try:
            answers.append(json.loads(lines.get(timeout=max(deadline - time.monotonic(), 0.01))))
        except queue.Empty:
            raise AssertionError(f"no answer in {seconds} s after {answers}") from None
    return answers


def test_stdio_answers_a_line_it_cannot_read(vault_brain_path):
    """Raw JSON-RPC lines to `sqlite-utils brain mcp`: a line that is no JSON (a lone
    surrogate escape, which /-/mcp answers -32700 too, or text cut short) is answered
    with a parse error carrying its id where one can be read (before the text breaks off), JSON that is no
    JSON-RPC message with an invalid request; the requests after them are answered."""
    process = _stdio_mcp(vault_brain_path)
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"brain_recall",'
        '"arguments":{"q":"walruses \\ud800"}}}',
        '{"jsonrpc":"2.0","id":6,"method":"tools/ca',
        '{"jsonrpc":"2.0","id":7}',
        json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}),
    ]
    try:
        process.stdin.write("".join(line + "\n" for line in lines))
        process.stdin.flush()
        initialized, surrogate, cut, no_method, listed = _answers(process, 5, seconds=30)
    finally:
        process.kill()
        process.wait(10)
    assert initialized["id"] == 1 and "result" in initialized
    assert surrogate["id"] == 5 and surrogate["error"]["code"] == -32700, surrogate
    assert "Parse error" in surrogate["error"]["message"]
    assert cut["id"] == 6 and cut["error"]["code"] == -32700, cut  # the id read before the line breaks off
    assert no_method["id"] == 7 and no_method["error"]["code"] == -32600, no_method
    assert listed["id"] == 8 and "brain_recall" in {tool["name"] for tool in listed["result"]["tools"]}


def test_stdio_says_a_request_before_initialize_needs_initialize(vault_brain_path):
    """A request sent before `initialize` is refused saying so, under its id, with
    the code the SDK gives it; the same request after `initialize` is answered, and
    an unknown method is still 'Method not found'."""
    process = _stdio_mcp(vault_brain_path)
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "no/such"}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": initialize}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
    ]
    try:
        process.stdin.write("".join(line + "\n" for line in lines))
        process.stdin.flush()
        early, unknown, initialized, listed = _answers(process, 4, seconds=30)
    finally:
        process.kill()
        process.wait(10)
    assert early["id"] == 1 and early["error"]["code"] == -32602, early
    assert "initialize" in early["error"]["message"] and "not initialized" in early["error"]["message"]
    assert unknown["id"] == 2 and unknown["error"]["code"] == -32601, unknown
    assert initialized["id"] == 3 and "result" in initialized
    assert listed["id"] == 4 and "brain_recall" in {tool["name"] for tool in listed["result"]["tools"]}


def test_stdio_answers_every_request_it_reads_and_stores_no_replaced_byte(vault_brain_copy):
    """Raw lines to `sqlite-utils brain mcp`, as bytes: blank lines frame nothing and
    get no answer; a line that is no UTF-8 (a Latin-1 é) is a parse error with its
    id, and nothing is stored (no U+FFFD); a request whose id is neither a whole
    number nor text is an invalid request with id null, never taken for a
    notification; an error keeps the top-level id of a line nested past any reader's
    depth or of another JSON-RPC version; a batch (which protocol 2025-03-26
    requires) is answered with one array."""
    process = _stdio_mcp(vault_brain_copy)

    def sent(*lines):
        process.stdin.buffer.write(b"".join(line + b"\n" for line in lines))
        process.stdin.flush()

    initialize = {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    remember = {"name": "brain_remember", "arguments": {"records": [{"_id": "latin", "text": "caf\u00e9 latin"}]}}
    latin = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": remember}, ensure_ascii=False)
    ids = (b"1.5", b"true", b'{"a":1}', b"[1]", b"null")
    try:
        sent(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}).encode())
        [initialized] = _answers(process, 1, seconds=30)
        # an answer to a line is written before any to a later line the server answers
        sent(
            b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
            b"",
            b"  \r",
            b'{"jsonrpc":"2.0","id":20,"method":"ping"}',
        )
        [after_blank_lines] = _answers(process, 1, seconds=30)
        sent(
            latin.encode("latin-1"),
            *(b'{"jsonrpc":"2.0","id":%s,"method":"ping"}' % bad for bad in ids),
            b'{"jsonrpc":"2.0","id":9,"method":"ping","params":{"x":' + b"[" * 5000 + b"]" * 5000 + b"}}",
            b'{"jsonrpc":"1.0","id":11,"method":"ping"}',
            b'[{"jsonrpc":"2.0","id":3,"method":"ping"},{"jsonrpc":"2.0","id":4,"method":"ping"}]',
        )
        answers = _answers(process, 9, seconds=30)
    finally:
        process.kill()
        process.wait(10)
    assert initialized["id"] == 1 and initialized["result"]["protocolVersion"] == "2025-03-26"
    assert after_blank_lines == {"jsonrpc": "2.0", "id": 20, "result": {}}
    [batch] = [answer for answer in answers if isinstance(answer, list)]
    assert sorted(answer["id"] for answer in batch) == [3, 4] and all("result" in answer for answer in batch)
    by_id = {answer["id"]: answer["error"] for answer in answers if isinstance(answer, dict)}
    assert by_id[2]["code"] == -32700 and "not UTF-8 (byte 0xe9" in by_id[2]["message"], by_id
    assert by_id[9]["code"] == -32700 and by_id[11]["code"] == -32600, by_id
    nulls = [answer["error"]["code"] for answer in answers if isinstance(answer, dict) and answer["id"] is None]
    assert nulls == [-32600] * len(ids), answers
    conn = brain_sql.connect(vault_brain_copy)
    assert conn.execute("select count(*) from knowledge where external_id = 'latin'").fetchone()[0] == 0


def _raw(method, request_id=None, params=None):
    """One JSON-RPC message as a line's text: a request when it has an id."""
    message = {"jsonrpc": "2.0", "method": method}
    if request_id is not None:
        message["id"] = request_id
    if params is not None:
        message["params"] = params
    return message


RAW_START = [
    _raw(
        "initialize",
        1,
        {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
    ),
    _raw("notifications/initialized"),
]


def _recall(request_id, q="deploy window"):
    return _raw("tools/call", request_id, {"name": "brain_recall", "arguments": {"q": q}})


def test_stdio_answers_every_request_read_before_stdin_ends(vault_brain_path):
    """Requests piped to `sqlite-utils brain mcp` and stdin closed behind them: each
    is answered as it would be with stdin open (a recall with its result, not
    "Connection closed"), then the process exits 0. Five runs, as whether an answer
    was lost depended on how far the server had got when stdin ended."""
    lines = [*RAW_START, _raw("nosuch", 16), _raw("tools/list", 17), _recall(18)]
    piped = "".join(json.dumps(line) + "\n" for line in lines)
    for _ in range(5):
        process = subprocess.run(
            [sys.executable, "-m", "sqlite_utils", "brain", "mcp", str(vault_brain_path)],
            input=piped,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
        )
        assert process.returncode == 0, process.stderr[-2000:]
        by_id = {answer["id"]: answer for answer in map(json.loads, process.stdout.splitlines())}
        assert sorted(by_id) == [1, 16, 17, 18], process.stdout
        assert by_id[16]["error"]["code"] == -32601
        assert "brain_recall" in {tool["name"] for tool in by_id[17]["result"]["tools"]}
        assert not by_id[18]["result"].get("isError") and by_id[18]["result"]["content"], by_id[18]


def test_stdio_answers_the_rest_of_a_batch_when_one_request_is_cancelled(vault_brain_path):
    """A batch one of whose requests the client cancels is answered with the others
    as one array; a later request under the cancelled id, or under an id a batch
    still has in flight, is answered on a line of its own, not gathered into a batch."""
    process = _stdio_mcp(vault_brain_path)

    def sent(*lines):
        process.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
        process.stdin.flush()

    cancel = _raw("notifications/cancelled", params={"requestId": 40, "reason": "no longer needed"})
    try:
        sent(*RAW_START)
        _answers(process, 1, seconds=30)
        sent([_recall(40), _raw("tools/list", 41), cancel])
        [batch] = _answers(process, 1, seconds=30)
        sent(_raw("ping", 40))
        [alone] = _answers(process, 1, seconds=30)
        sent([_recall(7), _raw("ping", 8)], _raw("ping", 7))
        answers = _answers(process, 2, seconds=30)
    finally:
        process.kill()
        process.wait(10)
    assert [answer["id"] for answer in batch] == [41] and batch[0]["result"]["tools"], batch
    assert alone == {"jsonrpc": "2.0", "id": 40, "result": {}}
    [pinged] = [answer for answer in answers if isinstance(answer, dict)]
    [batch] = [answer for answer in answers if isinstance(answer, list)]
    assert pinged == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert sorted(answer["id"] for answer in batch) == [7, 8], batch
    assert next(answer for answer in batch if answer["id"] == 7)["result"]["content"], batch


def test_mcp_arguments_are_checked_as_the_routes_check_them(server):
    """JSON as sent: `true` is not an id, "2" is not a k, an unknown argument is
    named with a suggestion, and each refusal is the route's own JSON."""
    url, _ = server

    async def calls():
        async with _over_http(url) as client:
            return [
                await client.call_tool(name, arguments)
                for name, arguments in [
                    ("brain_forget", {"ids": [True]}),
                    ("brain_memory", {"id": True}),
                    ("brain_recall", {"q": "deploys", "k": "2"}),
                    ("brain_recall", {"q": "deploys", "limit": 3}),
                    ("brain_verify", {"claim": "x", "id": "1"}),
                    ("brain_remember", {"records": [{"text": "x" * 1_200_000}]}),
                ]
            ]

    forget, memory, k, limit, verify, huge = asyncio.run(calls())
    for result in (forget, memory, k, limit, verify):
        assert result.is_error and result.structured_content["status"] == 400, result.content
        assert json.loads(result.content[0].text) == result.structured_content
    assert "did you mean k" in limit.structured_content["error"]
    assert huge.is_error and huge.structured_content["status"] == 413
    with httpx.Client(base_url=url) as http:
        assert http.post("/brain/-/forget", json={"ids": [True]}, headers=bearer()).status_code == 400
        assert http.get("/brain/-/memory/1").status_code == 200  # memory 1 is still there


def test_stdio_serves_a_brain_that_cannot_be_written(vault_brain_path, tmp_path):
    """A read-only file in a read-only folder (chattr +i holds for root too)."""
    path = copy_brain(vault_brain_path, tmp_path / "frozen" / "brain.db")
    if subprocess.run(["chattr", "+i", str(path), str(path.parent)], capture_output=True).returncode:
        pytest.skip("chattr +i is not possible here")

    async def session():
        params = StdioServerParameters(command=sys.executable, args=["-m", "sqlite_utils", "brain", "mcp", str(path)])
        async with Client(params) as client:
            found = await client.call_tool("brain_recall", {"q": "How does the graph leg rank memories?"})
            stored = await client.call_tool("brain_remember", {"records": [NOTE]})
            return found, stored

    try:
        found, stored = asyncio.run(session())
    finally:
        subprocess.run(["chattr", "-i", str(path), str(path.parent)])
    assert not found.is_error and found.structured_content["hits"]
    assert stored.is_error and stored.structured_content["status"] == 403


def run_agents_example(text, url, tmp_path, monkeypatch):
    """What the docs/agents.md Python example containing `text` prints, run against
    the test server in place of the documented one, with the agent's token."""
    _, code = block_with(text, "python", DOCS_AGENTS)
    monkeypatch.setenv("BRAIN_AGENT_TOKEN", TOKEN)
    return code, run_python(code, tmp_path, replace=[(DOCUMENTED, url)])


def test_the_documented_mcp_example(server, tmp_path, monkeypatch):
    url, path = server
    _, printed = run_agents_example("streamable_http_client", url, tmp_path, monkeypatch)
    assert printed.strip() == "Deploys happen on Tuesdays."
    with httpx.Client(base_url=url) as http:  # and it forgot what it stored
        found = http.post("/brain/-/recall", json={"q": "when do deploys happen?", "cutoff": False}).json()
    assert all(hit["external_id"] != "deploys" for hit in found["hits"])


def test_the_documented_prompt_example(server, tmp_path, monkeypatch):
    url, _ = server
    _, printed = run_agents_example("def recall_prompt", url, tmp_path, monkeypatch)
    sources = printed.split("\n\nQuestion: ")[0]
    assert printed.startswith("Answer from these memories only, citing them as [n].")
    assert sources.split("\n\n")[1].startswith("[1] Support Runbook (")
    assert "Escalations go to Dana Whitfield first." in sources
    assert printed.rstrip().endswith("Question: who owns the support runbook?")


def test_the_documented_openai_example(server, tmp_path, monkeypatch):
    url, _ = server
    code, printed = run_agents_example("from openai import OpenAI", url, tmp_path, monkeypatch)
    assert printed.strip() == printed_comment(code) == "wordllama/l2_supercat 256"


def test_the_documented_models_example(server, tmp_path):
    url, _ = server
    _, code = block_with("client.models.list()", "python", ROOT / "docs" / "export.md")
    printed = run_python(code, tmp_path, replace=[("http://localhost:8001", url)])
    assert printed.strip() == printed_comment(code) == "['wordllama/l2_supercat']"


def test_stdio_refuses_a_key_given_twice_in_a_tool_calls_arguments(vault_brain_path):
    """`sqlite-utils brain mcp`: arguments giving a key twice are refused as the HTTP
    route refuses the body (one value taken and another dropped would answer what was
    not asked), with the route's JSON as a tool error; a boolean sent as the text
    "false" is refused saying to send the JSON boolean."""
    process = _stdio_mcp(vault_brain_path)
    call = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"brain_recall","arguments":%s}}'
    lines = [
        *(json.dumps(line) for line in RAW_START),
        call % (2, '{"q":"white","q":"matter","k":1}'),
        call % (3, '{"q":"deploy window","graph":"false"}'),
        call % (4, '{"q":"deploy window","k":1}'),
        "[" + call % (5, '{"q":"white","k":1,"q":"matter"}') + "]",
    ]
    try:
        process.stdin.write("".join(line + "\n" for line in lines))
        process.stdin.flush()
        answers = _answers(process, 5, seconds=60)
        answers = {answer["id"]: answer for item in answers for answer in (item if isinstance(item, list) else [item])}
    finally:
        process.kill()
        process.wait(10)
    text, fine = answers[3]["result"], answers[4]["result"]
    error = 'the brain_recall call: the key "q" of one object is given twice: give it once'
    for twice in (answers[2]["result"], answers[5]["result"]):  # alone, and in a batch
        assert twice["isError"] and twice["structuredContent"] == {"ok": False, "error": error, "status": 400}, twice
    said = 'graph must be true or false, a JSON boolean without quotes: not the string "false"'
    assert text["isError"] and said in text["structuredContent"]["error"], text
    assert not fine.get("isError") and fine["content"], fine  # the same call, its key given once


def test_an_unknown_prompt_is_invalid_params_told_in_one_line(server, vault_brain_path):
    """Review 15, F5: prompts/get of a name the brain does not hold (it holds no prompt)
    is -32602 over /-/mcp and over stdio, as resources/read of an unknown URI is, and
    the server logs no traceback for it (the SDK answered code 0 and logged one)."""
    url, _ = server
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18"}
    asked = {"jsonrpc": "2.0", "id": 2, "method": "prompts/get", "params": {"name": "x"}}
    with httpx.Client(base_url=url, headers=headers) as http:
        answer = http.post("/-/mcp", json=asked).json()
    assert answer["error"]["code"] == -32602 and "unknown prompt: x" in answer["error"]["message"], answer
    process = _stdio_mcp(vault_brain_path)
    initialize = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
    lines = [
        json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize}),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json.dumps(asked),
    ]
    try:
        process.stdin.write("".join(line + "\n" for line in lines))
        process.stdin.flush()
        _, answer = _answers(process, 2, seconds=30)
    finally:
        process.kill()
        logged = process.communicate(timeout=10)[1]
    assert answer["error"]["code"] == -32602 and "unknown prompt: x" in answer["error"]["message"], answer
    assert "Traceback" not in logged, logged
