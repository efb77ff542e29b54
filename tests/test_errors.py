"""Every door says the same of the same failure. A busy brain (another writer holds
the write lock, or every recall slot is taken) is a 503 with Retry-After over HTTP,
on the pages and in MCP, and "try again" (exit 75) on the command line, with
nothing changed; a caller's bad input is a 400, or a usage error (exit 2) naming
its option."""

import asyncio
import contextlib
import json
import os
import re
import resource
import subprocess
import sys
import threading

import click
import pytest
from datasette.app import Datasette
from mcp import Client
from mcp.server.mcpserver import MCPServer

import brain_sql
from brain_sql.connection import sqlite3
from datasette_brain import mcp_tools

from .conftest import read_slots_taken, write

WRITER = {"plugins": {"datasette-brain": {"allow_write": True}}}


@pytest.fixture
def brain_path(tmp_path, monkeypatch):
    """A brain with one expired memory; a writer waits 0.2 s for the lock."""
    monkeypatch.setenv("BRAIN_BUSY_TIMEOUT_MS", "200")
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    expired = {"_id": "rota", "text": "The pager rota changes on Mondays.", "expires_at": "2020-01-01"}
    brain_sql.remember(conn, [expired])
    conn.close()
    return path


def served(path):
    return Datasette([str(path)], metadata=WRITER, settings={"num_sql_threads": 2})  # one read slot


def stored(path):
    """What the brain holds: its memories' external ids and relevance tiers."""
    conn = brain_sql.connect(path)
    try:
        return conn.execute("select external_id, relevance_tier from knowledge order by external_id").fetchall()
    finally:
        conn.close()


@contextlib.contextmanager
def write_lock_held(path):
    """Another writer holding the brain's write lock."""
    holder = brain_sql.connect(path)
    holder.execute("begin immediate")
    try:
        yield
    finally:
        holder.execute("rollback")
        holder.close()


def busy(response):
    return response.status_code == 503 and response.headers["retry-after"].isdigit()


def test_the_command_line(run, brain_path, tmp_path):
    before = stored(brain_path)
    record = write(tmp_path / "r.jsonl", '{"_id": "new", "text": "Deploys happen on Tuesdays."}')
    with write_lock_held(brain_path):
        answers = [
            run("brain", "remember", brain_path, record),
            run("brain", "ingest", brain_path, record),
            run("brain", "forget", brain_path, "--external-id", "rota"),
        ]
    for result in answers:
        assert result.exit_code == 75 and "Traceback" not in result.output, result.output
        assert "write lock" in result.output and "Try the same command again shortly." in result.output
    assert stored(brain_path) == before
    assert run("brain", "remember", brain_path, record).exit_code == 0  # tried again, it is stored
    for args, message in [
        (("recall", brain_path, "rota", "--k", "0"), "Invalid value for '--k': k must be from 1"),
        (("recall", brain_path, "", "--scope", "/a"), "Invalid value for 'QUERY': q must not be empty"),
        (("remember", brain_path, record, "--scope", "acme"), "scope must be a path starting with '/'"),
        (("forget", brain_path, "--id", str(2**64)), "is out of range for a memory id"),
    ]:
        result = run("brain", *args)
        assert result.exit_code == 2 and message in result.output and "Usage: " in result.output, result.output


@pytest.mark.parametrize("model", ["nosuch/model", "/etc", ""])
def test_a_model_the_caller_names_that_cannot_be_loaded_is_a_usage_error(run, brain_path, tmp_path, model):
    """reindex --model X, ingest --model X: the caller's option (exit 2, naming --model); nothing is changed."""
    before = stored(brain_path)
    note = write(tmp_path / "note.txt", "Deploys happen on Tuesdays.")
    commands = [("reindex", brain_path, "--model", model)] + [("ingest", brain_path, note, "--model", model)] * bool(
        model
    )
    for args in commands:
        result = run("brain", *args)
        assert result.exit_code == 2 and "Invalid value for '--model'" in result.output, result.output
        assert "Traceback" not in result.output
    assert stored(brain_path) == before


@pytest.mark.asyncio
async def test_the_http_routes(brain_path, monkeypatch):
    datasette = served(brain_path)
    before = stored(brain_path)
    with write_lock_held(brain_path):
        remembered = await datasette.client.post("/brain/-/remember", json={"_id": "new", "text": "On Tuesdays."})
        forgotten = await datasette.client.post("/brain/-/forget", json={"external_ids": ["rota"]})
    assert busy(remembered) and "write lock" in remembered.json()["error"], remembered.text
    assert busy(forgotten) and forgotten.json() == {"ok": False, "error": forgotten.json()["error"], "status": 503}
    assert stored(brain_path) == before
    async with read_slots_taken(datasette, monkeypatch):
        recalled = await datasette.client.get("/brain/-/recall", params={"q": "pager rota"})
        listed = await datasette.client.get("/brain/-/memories.json")
    assert busy(recalled) and busy(listed) and "try again" in recalled.json()["error"]
    bad = [
        await datasette.client.post("/brain/-/recall", json={"q": "pager rota", "k": 0}),
        await datasette.client.get("/brain/-/recall", params={"q": "pager rota", "include_decayed": "maybe"}),
        await datasette.client.post("/brain/-/remember", json={"text": "x", "scope": "acme"}),
        await datasette.client.post("/brain/-/forget", json={"ids": ["x"]}),
    ]
    for response in bad:
        assert response.status_code == 400 and response.json()["status"] == 400, response.text
    assert stored(brain_path) == before


@pytest.mark.asyncio
async def test_embeddings_wait_for_the_read_slots_recall_waits_for(brain_path, monkeypatch):
    """An embedding batch takes a thread as long as a recall does: while every read slot is
    taken, /-/brain/v1/embeddings is a 503 with Retry-After in OpenAI's shape, not one more
    batch queued ahead of recalls; once one is free, it embeds."""
    datasette = served(brain_path)
    body = {"input": ["The pager rota changes on Mondays."]}
    async with read_slots_taken(datasette, monkeypatch):
        refused = await datasette.client.post("/-/brain/v1/embeddings", json=body)
    assert busy(refused) and "try again" in refused.json()["error"]["message"], refused.text
    embedded = await datasette.client.post("/-/brain/v1/embeddings", json=body)
    assert embedded.status_code == 200 and len(embedded.json()["data"]) == 1, embedded.text


@pytest.mark.asyncio
async def test_the_pages(brain_path, monkeypatch):
    datasette = served(brain_path)
    before = stored(brain_path)
    async with read_slots_taken(datasette, monkeypatch):
        page = await datasette.client.get("/brain/-/brain", params={"q": "pager rota"})
    assert busy(page) and "try again shortly" in page.text, page.text[:500]
    decayed = await datasette.client.get("/brain/-/decayed")
    token = re.search(r'name="csrftoken" value="([^"]+)"', decayed.text).group(1)
    target = brain_sql.connect(brain_path).execute("select id from knowledge").fetchone()[0]
    form = {"csrftoken": token, "id": str(target), "action": "archive"}
    cookies = {"ds_csrftoken": decayed.cookies["ds_csrftoken"]}
    with write_lock_held(brain_path):
        archived = await datasette.client.post("/brain/-/decayed/act", cookies=cookies, data=form)
    assert busy(archived) and "Busy: try again shortly" in archived.text and "write lock" in archived.text
    assert stored(brain_path) == before
    bad = [
        await datasette.client.get("/brain/-/brain", params={"q": "pager rota", "k": "0"}),
        await datasette.client.post("/brain/-/decayed/act", cookies=cookies, data={**form, "action": "extend:0"}),
    ]
    for response in bad:
        assert response.status_code == 400 and "must be" in response.text, response.text[:500]
    assert stored(brain_path) == before


@pytest.mark.asyncio
async def test_the_mcp_tools(brain_path, monkeypatch):
    datasette = served(brain_path)
    server = MCPServer("test")
    mcp_tools.register(datasette, server)
    before = stored(brain_path)
    async with Client(server) as client:
        with write_lock_held(brain_path):
            remembered = await client.call_tool("brain_remember", {"records": [{"_id": "new", "text": "Tuesdays."}]})
            forgotten = await client.call_tool("brain_forget", {"external_ids": ["rota"]})
        async with read_slots_taken(datasette, monkeypatch):
            recalled = await client.call_tool("brain_recall", {"q": "pager rota"})
        for result in (remembered, forgotten, recalled):
            assert result.is_error and result.structured_content["status"] == 503, result
        assert stored(brain_path) == before
        for tool, arguments in [
            ("brain_recall", {"q": "pager rota", "k": 0}),
            ("brain_remember", {"records": [{"text": "x", "scope": "acme"}]}),
            ("brain_forget", {"ids": ["x"]}),
        ]:
            result = await client.call_tool(tool, arguments)
            assert result.is_error and result.structured_content["status"] == 400, (tool, result)
    assert stored(brain_path) == before


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_command_whose_stdout_cannot_be_written_says_so_in_a_line_and_what_it_committed(vault_brain_copy):
    """A full disk under stdout: one line naming the problem, not a traceback, exit non-zero; a write
    (forget) says its change is committed, a read that the brain is unchanged."""

    def run_into_full_disk(*args):
        with open("/dev/full", "w") as full:
            return subprocess.run(
                [sys.executable, "-m", "sqlite_utils", "brain", *map(str, args)],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
            )

    conn = brain_sql.connect(vault_brain_copy)
    doomed = conn.execute("select min(id) from knowledge").fetchone()[0]
    conn.close()
    for args, says in (
        (("stats", vault_brain_copy), "the brain is unchanged"),
        (("export", vault_brain_copy), "the brain is unchanged"),
        (("forget", vault_brain_copy, "--id", doomed), "what forget changed is committed"),
    ):
        failed = run_into_full_disk(*args)
        assert failed.returncode != 0 and "Traceback" not in failed.stderr, failed.stderr
        assert (
            failed.stderr.strip()
            .splitlines()[-1]
            .endswith(f"could not write to stdout (No space left on device); {says}")
        )
    conn = brain_sql.connect(vault_brain_copy)
    assert conn.execute("select count(*) from knowledge where id = ?", [doomed]).fetchone()[0] == 0
    conn.close()


HOLD_EXCLUSIVELY = """
import sqlite3, sys
holder = sqlite3.connect(sys.argv[1], isolation_level=None)
holder.execute("pragma locking_mode = exclusive")
holder.execute("begin exclusive")
holder.execute("create table held(x)")  # a write: the lock is taken, and held
print("held", flush=True)
sys.stdin.read()
holder.execute("rollback")
"""


@contextlib.contextmanager
def exclusive_lock_held(path):
    """Another process holding the brain in SQLite's exclusive locking mode (a
    maintenance script, the sqlite3 shell): no other connection may even read it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_EXCLUSIVELY, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.communicate("", timeout=30)


def test_a_brain_another_connection_holds_exclusively_says_try_again(run, brain_path, tmp_path):
    """Every command on a brain another connection holds exclusively says to try again
    (exit 75), never a traceback (review 88), and changes nothing."""
    before = stored(brain_path)
    record = write(tmp_path / "r.jsonl", '{"_id": "new", "text": "Deploys happen on Tuesdays."}')
    with exclusive_lock_held(brain_path):
        for args in (("recall", brain_path, "rota"), ("stats", brain_path), ("remember", brain_path, record)):
            result = run("brain", *args)
            assert result.exit_code == 75 and "Traceback" not in result.output, (args, result.output)
            assert "locked by another connection" in result.output and "try again" in result.output, result.output
    assert stored(brain_path) == before


@pytest.mark.asyncio
async def test_a_brain_another_process_holds_exclusively_is_a_503_on_every_page_and_route(brain_path, tmp_path):
    """A brain another process holds exclusively (a rollback-journal file in a long
    write, a maintenance script): the plugin's pages, Datasette's own, the OpenAI
    routes and the MCP tools answered 500s, the error page's menu reading the file
    again, and `datasette serve` died with a traceback (review 112)."""
    plain = tmp_path / "plain.db"
    sqlite3.connect(plain).execute("create table t (x)")
    sqlite3.connect(brain_path).execute("pragma journal_mode = delete").fetchone()  # served as it is: readers wait
    datasette = Datasette([str(brain_path), str(plain)], metadata=WRITER)
    assert (await datasette.client.get("/brain/-/recall", params={"q": "pager"})).status_code == 200
    server = MCPServer("test")
    mcp_tools.register(datasette, server)
    with exclusive_lock_held(brain_path):
        for path in ("/", "/brain/-/brain?q=pager", "/-/brain/v1/models"):  # Datasette's, a page's, an OpenAI route
            answer = await datasette.client.get(path)
            assert busy(answer) and "Traceback" not in answer.text, (path, answer.status_code, answer.text[:300])
        embedded = await datasette.client.post("/-/brain/v1/embeddings", json={"input": "pager"})
        assert busy(embedded) and embedded.json()["error"]["message"], embedded.text[:300]
        async with Client(server) as client:
            recalled = await client.call_tool("brain_recall", {"q": "pager rota"})
        assert recalled.is_error and recalled.structured_content["status"] == 503, recalled


@pytest.mark.asyncio
async def test_a_server_started_on_a_brain_another_process_holds_exclusively_says_so(brain_path):
    """`datasette serve` on a brain another process holds exclusively died with a
    traceback (review 112): which of its databases are brains cannot be told."""
    sqlite3.connect(brain_path).execute("pragma journal_mode = delete").fetchone()
    with exclusive_lock_held(brain_path):
        with pytest.raises(click.ClickException) as refused:  # `datasette serve` says it and stops
            await Datasette([str(brain_path)]).invoke_startup()
    assert "locked by another connection" in str(refused.value) and "start the server again" in str(refused.value)


def test_a_full_disk_when_a_brain_is_opened_is_no_damage(run, brain_path, monkeypatch):
    """A brain opened on a full or failing disk (SQLite cannot make its -shm file) is
    sound: try again (exit 75; over HTTP a 503), never "damaged: restore it from a
    copy", which would throw away what was written since the copy (review 88)."""
    from brain_sql import connection

    def full(conn):
        raise connection.sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(connection, "_wal", full)
    for args in (("recall", brain_path, "rota"), ("stats", brain_path), ("check", brain_path)):
        result = run("brain", *args)
        assert result.exit_code == 75 and "Traceback" not in result.output, (args, result.output)
        assert "disk is full or failing" in result.output and "restore it" not in result.output, result.output
    with pytest.raises(brain_sql.WriteError, match="not damaged"):
        brain_sql.connect(brain_path)


@pytest.mark.asyncio
async def test_a_full_disk_under_a_server_is_a_503_not_damage(brain_path, monkeypatch):
    """Datasette's own connection failing on a full or failing disk as it reads the
    brain's tables for a permission check is a 503 to retry (review 88: a 409 "damaged");
    a damaged file stays a 409 naming check."""
    datasette = served(brain_path)
    assert (await datasette.client.get("/brain/-/recall?q=rota")).status_code == 200
    for error, status, said in (("disk I/O error", 503, "not damaged"), ("file is not a database", 409, "check")):

        async def failing(*args, error=error, **kwargs):
            raise brain_sql.connection.sqlite3.DatabaseError(error)

        monkeypatch.setattr(datasette, "ensure_permissions", failing)
        response = await datasette.client.get("/brain/-/recall?q=rota")
        assert response.status_code == status and said in response.json()["error"], response.text
        assert (status == 503) == ("retry-after" in response.headers)


def test_init_on_a_failing_disk_says_try_again(run, tmp_path, monkeypatch):
    """brain init whose commit meets a full disk: nothing made, try again (review 88: a traceback)."""
    from brain_sql import schema

    made = schema.migrate

    def full(conn, model_id=None):
        made(conn, model_id)
        raise brain_sql.connection.sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(schema, "migrate", full)
    result = run("brain", "init", tmp_path / "new.db")
    assert result.exit_code == 75 and "Traceback" not in result.output, result.output
    assert "disk is full" in result.output and "schema was not made" in result.output, result.output
    # review 95: not "again shortly", which a full disk will not heed
    assert "Free space on the brain's disk" in result.output and "shortly" not in result.output


def test_an_ingest_past_the_file_size_limit_says_what_is_stored_and_how_to_finish(tmp_path):
    """A write past `ulimit -f` is SQLite's "disk I/O error": the message said nothing of
    the transaction was stored and to try again shortly, while the ingest's earlier
    transactions were stored and a full file will not clear by itself (review 105, M3)."""
    db_path, records = tmp_path / "brain.db", tmp_path / "records.jsonl"
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi".split()
    records.write_text(
        "".join(
            json.dumps({"_id": f"r{i}", "text": " ".join(words[(i * j) % 16] for j in range(60))}) + "\n"
            for i in range(3000)
        )
    )
    assert subprocess.run([sys.executable, "-m", "sqlite_utils", "brain", "init", db_path]).returncode == 0

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (3 << 20, 3 << 20))

    command = [sys.executable, "-m", "sqlite_utils", "brain", "ingest", db_path, records]
    failed = subprocess.run(command, capture_output=True, text=True, timeout=300, preexec_fn=limit)
    assert failed.returncode == 75 and "Traceback" not in failed.stderr, failed.stderr
    assert "what this ingest wrote before it is stored: run the same ingest again to finish" in failed.stderr
    assert "the file-size limit" in failed.stderr and "shortly" not in failed.stderr, failed.stderr
    stored = brain_sql.connect(db_path).execute("select count(*) from knowledge").fetchone()[0]
    assert 0 < stored < 3000  # as said: some stored, and running it again finishes
    finished = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert brain_sql.connect(db_path).execute("select count(*) from knowledge").fetchone()[0] == 3000


@pytest.mark.parametrize("command", ["init", "stats", "check", "export"])
def test_a_named_pipe_given_as_the_brain_is_named_not_waited_on(run, tmp_path, command):
    """SQLite opening a named pipe waits for a writer forever (review 88): a brain is a
    regular file, and anything else is named at once."""
    fifo = tmp_path / "brain.fifo"
    os.mkfifo(fifo)
    result = run("brain", command, fifo)
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "is not a regular file" in result.output, result.output


def test_a_schema_damaged_into_bytes_that_are_no_text_is_named_damage(run, brain_path):
    """SQLite quotes a damaged schema's SQL in its message, and pysqlite3 failed to
    decode bytes that are no UTF-8: every command gave a traceback (review 102 M1).
    It is named as the damage it is."""
    data = bytearray(brain_path.read_bytes())
    at = data.index(b"CREATE TRIGGER brain_rules_knowledge_insert")
    data[data.rindex(b"'", at, data.index(b"END", at))] = 0xDE  # its last string unclosed, quoted with the byte
    brain_path.write_bytes(bytes(data))
    for args in (("stats", brain_path), ("recall", brain_path, "rota"), ("check", brain_path), ("export", brain_path)):
        result = run("brain", *args)
        assert result.exit_code == 1 and "Traceback" not in result.output, (args, result.output)
        assert "is damaged" in result.output and "restore it from a copy" in result.output, result.output


@pytest.mark.parametrize(
    "name, value, said",
    [
        ("BRAIN_RECALL_GRAPH_ENABLED", "nonsense", "give on or off"),
        ("BRAIN_BUSY_TIMEOUT_MS", "abc", "give a whole number from 0"),
        ("BRAIN_BUSY_TIMEOUT_MS", "\u00b2", "give a whole number from 0"),  # a digit to str.isdigit, not to int()
        ("BRAIN_BUSY_TIMEOUT_MS", "3000000000", "give a whole number from 0 to 2,147,483,647"),  # SQLite: 0
        ("BRAIN_BUSY_TIMEOUT_MS", "9" * 5000, "give a whole number from 0"),  # past Python's int digits
        ("BRAIN_BLAS_THREADS", "2147483647", "give a whole number from 1 to 1,024"),
        ("BRAIN_BLAS_THREADS", "0", "give a whole number from 1"),
        ("BRAIN_EXPORT_IDLE_SECONDS", "-1", "give seconds above 0"),
        ("BRAIN_VECTOR_CODES", "maybe", "give on or off"),
    ],
)
def test_a_setting_that_cannot_be_used_is_named_not_read_as_its_default(brain_path, name, value, said):
    """$BRAIN_RECALL_GRAPH_ENABLED=nonsense left the graph on without a word (review
    102 L6): a server stops as it starts naming the setting, and a command says so."""
    env = {**os.environ, name: value}
    served = subprocess.run(
        [sys.executable, "-m", "datasette", "serve", str(brain_path), "-p", "0", "--get", "/-/versions.json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert served.returncode != 0 and f"${name} is {repr(value)[:40]}" in served.stderr and said in served.stderr, (
        served.stderr
    )
    assert "Traceback" not in served.stderr
    if name in ("BRAIN_BLAS_THREADS", "BRAIN_EXPORT_IDLE_SECONDS"):
        return  # a server's settings alone
    command = subprocess.run(
        [sys.executable, "-m", "sqlite_utils", "brain", "recall", str(brain_path), "rota"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert command.returncode == 1 and f"${name} is {repr(value)[:40]}" in command.stderr and said in command.stderr, (
        command.stderr
    )


def test_a_write_whose_error_quotes_schema_bytes_that_are_no_text_is_named(run, brain_path, tmp_path):
    """A trigger plain SQL made, naming a table in bytes that are no UTF-8: the brain
    opens, and its first write's error quotes them; remember gave a traceback
    (review 103 L4)."""
    from brain_sql.connection import sqlite3 as driver

    conn = driver.connect(str(brain_path))
    conn.execute("create table qqqqqqqq (x)")
    conn.execute("create trigger zz_damage after insert on knowledge begin insert into qqqqqqqq values (1); end")
    conn.commit()
    conn.execute("drop table qqqqqqqq")
    conn.commit()
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()
    data = brain_path.read_bytes()
    brain_path.write_bytes(data.replace(b"qqqqqqqq", b"qq\xff\xfeqqqq"))
    record = write(tmp_path / "r.jsonl", '{"_id": "new", "text": "Deploys happen on Tuesdays."}')
    result = run("brain", "remember", brain_path, record)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert "bytes that are not UTF-8 text" in result.output and "sqlite-utils brain check" in result.output


@pytest.mark.asyncio
@pytest.mark.parametrize("path", ["/brain/knowledge/-/nope", "/a/b/c/d/e", "/brain/knowledge/1/x/y", "/-/nope"])
async def test_a_url_no_route_takes_is_a_404(brain_path, path):
    """Datasette answers a URL no route takes outside an except block, where its
    traceback printer (rich's, when installed) fails: that was a 500, or no answer."""
    pytest.importorskip("rich")
    response = await Datasette([str(brain_path)]).client.get(path)
    assert response.status_code == 404, response.text[:300]
    assert "<title>Error 404</title>" in response.text


@pytest.mark.asyncio
async def test_a_remember_queued_past_the_busy_timeout_is_a_503_that_writes_nothing(brain_path, monkeypatch):
    """Datasette writes one request at a time: a remember queued behind others for
    longer than the busy timeout (1 ms here), a second at least, is a 503 with Retry-After and writes
    nothing, also once its turn comes, as one that waited that long for the lock is
    (queued behind large remembers, a one-line remember waited 107 s and was a 201:
    review 152). One whose turn comes in time is written, the first to an idle
    server's write thread too (it is started then)."""
    monkeypatch.setenv("BRAIN_BUSY_TIMEOUT_MS", "1")
    datasette = served(brain_path)
    db = datasette.get_database("brain")
    response = await datasette.client.post("/brain/-/remember", json={"_id": "first", "text": "The first write."})
    assert response.status_code == 201, response.text
    started, release = threading.Event(), threading.Event()

    def long_write(conn):
        started.set()
        release.wait(10)

    before = stored(brain_path)
    blocker = asyncio.ensure_future(db.execute_write_fn(long_write, block=True))
    await asyncio.get_running_loop().run_in_executor(None, started.wait, 10)
    response = await datasette.client.post("/brain/-/remember", json={"_id": "late", "text": "Deploys on Tuesdays."})
    assert busy(response) and "busy timeout" in response.json()["error"], response.text
    release.set()
    await blocker
    await db.execute_write_fn(lambda conn: None, block=True)  # the thread has passed the given-up remember
    assert stored(brain_path) == before
    response = await datasette.client.post("/brain/-/remember", json={"_id": "late", "text": "Deploys on Tuesdays."})
    assert response.status_code == 201, response.text
    assert {("late", 1), ("first", 1)} <= set(stored(brain_path))
