"""One writer, read replicas, end to end, each part its own process on loopback:
a primary Datasette, `sqlite-utils brain replicate` (the real Litestream, a
file:// replica), two `sqlite-utils brain follow` copies and a Datasette on each
(one forwarding writes to the primary, one without a primary). Recall keeps
answering on both replicas while the primary takes writes; writes on a replica
reach the primary with the caller's credentials; a follower restarted resumes,
one that cannot bridge a gap says so; the replicas outlive the primary, and a
brain restored from the replica holds every acknowledged write."""

import asyncio
import functools
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import httpx
import httpx2
import pytest
from datasette.app import Datasette
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import brain_sql
from brain_sql.replicas import litestream_binary

from .conftest import wait_for

pytestmark = pytest.mark.slow

SECRET = "replica-test-secret"  # primary and replicas share it: cookies and CSRF tokens hold on both
TOKEN = "replica-test-token"  # only the primary knows it: a replica passes it on
PRIMARY_METADATA = {
    "plugins": {
        "datasette-brain": {"allow_write": {"id": "writer"}},
        "datasette-auth-tokens": {"tokens": [{"token": TOKEN, "actor": {"id": "writer"}}]},
    }
}
SEED = [
    {"_id": f"seed-{i}", "title": f"Seed {i}", "text": f"The {word} report names the {word} owner."}
    for i, word in enumerate(["harbour", "lantern", "orchard", "quarry", "meadow"])
]
DECAYED = {
    "_id": "old-rota",
    "title": "Old rota",
    "text": "The winter rota of the kestrel desk.",
    "expires_at": "2020-01-01T00:00:00Z",
}


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cookie():
    return {"ds_actor": Datasette(secret=SECRET).sign({"a": {"id": "writer"}}, "actor")}


class Processes:
    """Every process the cluster starts, each stopped (and killed if need be) at the end."""

    def __init__(self, folder):
        self.folder, self.running = folder, {}

    def start(self, name, args, **kwargs):
        log = open(self.folder / f"{name}.log", "a")
        self.running[name] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, **kwargs)
        return self.running[name]

    def stop(self, name, sig=signal.SIGTERM):
        process = self.running.pop(name)
        if process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def log(self, name):
        return (self.folder / f"{name}.log").read_text()

    def stop_all(self):
        for name in list(self.running):
            self.stop(name)


def _brain(*args):
    return [sys.executable, "-m", "sqlite_utils", "brain", *map(str, args)]


def _serve(processes, name, path, metadata, port=None):
    meta = processes.folder / f"{name}.json"
    meta.write_text(json.dumps(metadata))
    port = port or _free_port()
    process = processes.start(
        name,
        [
            sys.executable,
            "-m",
            "datasette",
            "serve",
            str(path),
            "-m",
            str(meta),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "--secret",
            SECRET,
        ],
    )
    url = f"http://127.0.0.1:{port}"

    def answers():
        assert process.poll() is None, processes.log(name)
        try:
            return httpx.get(f"{url}/-/versions.json").status_code == 200
        except httpx.TransportError:
            return False

    wait_for(answers, what=f"{name} answering")
    return url


def _following(copy):
    status = brain_sql.replica_status(copy)
    return status is not None and status["state"] == "following" and status["behind"] == 0


def _follow(processes, name, url, copy, *options):
    processes.start(name, _brain("follow", url, copy, "--interval", "0.5", *options))
    wait_for(lambda: copy.exists() and _following(copy), what=f"{name} following")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    folder = tmp_path_factory.mktemp("replicas")
    primary = folder / "primary" / "brain.db"
    primary.parent.mkdir()
    conn = brain_sql.connect(primary)
    brain_sql.remember(conn, SEED + [DECAYED])
    conn.close()
    store = (folder / "store").as_uri()
    copies = [folder / name / "brain.db" for name in ("r1", "r2")]
    processes = Processes(folder)
    try:
        processes.start("replicate", _brain("replicate", primary, store))
        wait_for(lambda: list((folder / "store").glob("ltx/9/*.ltx")), what="the first snapshot")
        for name, copy in zip(("follow1", "follow2"), copies):
            _follow(processes, name, store, copy)
        primary_url = _serve(processes, "primary", primary, PRIMARY_METADATA)
        # the primary's settings, and where writes go; the token is the primary's alone
        forwarding = {"plugins": {"datasette-brain": {"allow_write": {"id": "writer"}, "primary": primary_url}}}
        r1 = _serve(processes, "replica1", copies[0], forwarding)
        r2 = _serve(processes, "replica2", copies[1], {})
        yield SimpleNamespace(
            folder=folder,
            primary_path=primary,
            store=store,
            copies=copies,
            processes=processes,
            primary=primary_url,
            replicas=[r1, r2],
        )
    finally:
        processes.stop_all()


def _remember(url, record, **kwargs):
    response = httpx.post(f"{url}/brain/-/remember", json=record, timeout=60, **kwargs)
    assert response.status_code == 201, response.text
    return response.json()["ids"][0][0]


def _recalls(url, words, memory_id=None, resuming=False):
    """Whether recall on `url` finds `memory_id` (any hit without it); with
    `resuming`, a replica catching up after its follower restarted finds nothing yet."""
    response = httpx.get(f"{url}/brain/-/recall", params={"q": words, "k": 3}, timeout=30)
    if resuming and response.status_code == 503 and "catching up" in response.json()["error"]:
        assert response.headers["retry-after"]
        return False
    assert response.status_code == 200, response.text
    hits = [hit["id"] for hit in response.json()["hits"]]
    return memory_id in hits if memory_id is not None else bool(hits)


def test_a_replica_answers_recall_and_says_what_it_follows(cluster):
    r1, r2 = cluster.replicas
    for url in cluster.replicas:
        assert _recalls(url, "lantern report owner")
    status = httpx.get(f"{r1}/brain/-/replica").json()
    assert status["replica"] is True and status["follows"] == cluster.store and status["state"] == "following"
    assert status["primary"] == cluster.primary and status["stalled"] is False
    assert isinstance(status["applied"]["txid"], int) and isinstance(status["applied"]["change"], int)
    assert status["lag_seconds"] is not None and status["behind"] == 0
    assert httpx.get(f"{r2}/brain/-/replica").json()["primary"] is None
    assert httpx.get(f"{cluster.primary}/brain/-/replica").json() == {"replica": False}
    page = httpx.get(f"{r1}/brain/-/brain").text
    assert "A read-only replica of" in page and cluster.store in page


def test_writes_on_a_replica_reach_the_primary_with_the_callers_credentials(cluster):
    r1, r2 = cluster.replicas
    record = {"_id": "fwd-cookie", "title": "Pelican", "text": "The pelican ledger is kept in the boathouse."}
    anonymous = httpx.post(f"{r1}/brain/-/remember", json=record)
    direct = httpx.post(f"{cluster.primary}/brain/-/remember", json=record)
    assert anonymous.status_code == direct.status_code == 403 and anonymous.json() == direct.json()
    memory_id = _remember(r1, record, cookies=_cookie())
    wait_for(lambda: _recalls(r1, "pelican ledger boathouse", memory_id), what="the forwarded write on the replica")
    token = {"Authorization": f"Bearer {TOKEN}"}  # the replica does not know the token; the primary does
    heron = {"_id": "fwd-token", "title": "Heron", "text": "The heron count is on the gate."}
    other = _remember(r1, heron, headers=token)
    forgot = httpx.post(f"{r1}/brain/-/forget", json={"ids": [other]}, headers=token)
    assert forgot.status_code == 200 and forgot.json()["removed"]["memories"] == [other]
    bad = httpx.post(f"{r1}/brain/-/remember", json={"title": "no text"}, headers=token)
    assert bad.status_code == 400 and bad.json()["ok"] is False  # the primary's own answer
    readonly = httpx.post(f"{r2}/brain/-/remember", json=record, headers=token)
    assert readonly.status_code == 403 and "read-only replica" in readonly.json()["error"]

    def mcp(headers=None):
        http = httpx2.AsyncClient(headers=headers, timeout=60)
        return Client(streamable_http_client(f"{r1}/-/mcp", http_client=http))

    async def over_mcp():
        async with mcp({"Authorization": f"Bearer {TOKEN}"}) as client:
            ibis = {"_id": "fwd-mcp", "text": "The ibis roost."}
            stored = await client.call_tool("brain_remember", {"records": [ibis]})
            assert not stored.is_error, stored.content
            gone = await client.call_tool("brain_forget", {"external_ids": ["fwd-mcp"]})
            assert not gone.is_error
            assert gone.structured_content["removed"]["memories"] == stored.structured_content["ids"][0]
        async with mcp() as anonymous:
            refused = await anonymous.call_tool("brain_remember", {"records": [{"text": "The ibis roost."}]})
            assert refused.is_error and refused.structured_content["status"] == 403

    asyncio.run(over_mcp())


def test_the_decayed_pages_decisions_on_a_replica_are_the_primarys(cluster):
    r1, _ = cluster.replicas
    with httpx.Client(base_url=r1, cookies=_cookie()) as browser:
        page = browser.get("/brain/-/decayed")
        token = re.search(r'name="csrftoken" value="([^"]+)"', page.text).group(1)
        [memory_id] = re.findall(r'name="id" value="(\d+)"', page.text)[:1]
        done = browser.post(
            "/brain/-/decayed/act", data={"csrftoken": token, "id": memory_id, "action": "extend:30", "back": ""}
        )
        assert done.status_code == 302 and done.headers["location"].endswith("/brain/-/decayed"), done.text
        stale = browser.post("/brain/-/decayed/act", data={"id": memory_id, "action": "extend:30"})
        assert stale.status_code == 403  # no CSRF token: refused before anything is sent on
    primary = httpx.get(f"{cluster.primary}/brain/-/memory/{memory_id}.json").json()["memory"]
    assert primary["expires_at"] > "2026"


# memories the lag test writes (20 x 2 replicas took 35 s of the suite's 15 minutes, for the same check)
LAG_WRITES = 10


def test_an_acknowledged_memory_is_recalled_on_both_replicas_under_constant_recall(cluster):
    failures, served, stop = [], [0], threading.Event()

    def keep_recalling(url):
        with httpx.Client(timeout=30) as client:  # one connection kept open, as a busy client does
            while not stop.is_set():
                response = client.get(f"{url}/brain/-/recall", params={"q": "report owner", "k": 5})
                served[0] += 1
                if response.status_code != 200:
                    failures.append((url, response.status_code, response.text[:200]))

    readers = [threading.Thread(target=keep_recalling, args=(url,)) for url in cluster.replicas for _ in range(2)]
    for reader in readers:
        reader.start()
    lags = []
    try:
        for i in range(LAG_WRITES):
            word = f"zq{i}marker"
            memory_id = _remember(
                cluster.primary, {"_id": f"lag-{i}", "text": f"The {word} crate is in bay {i}."}, cookies=_cookie()
            )
            acknowledged = time.monotonic()
            for url in cluster.replicas:
                wait_for(
                    functools.partial(_recalls, url, word, memory_id), seconds=30, every=0.05, what=f"{word} on {url}"
                )
                lags.append(time.monotonic() - acknowledged)
    finally:
        stop.set()
        for reader in readers:
            reader.join()
    assert not failures, failures[:3]
    lags.sort()
    print(
        f"\nlag over {len(lags)} writes x replicas: p50 {statistics.median(lags):.2f} s, "
        f"p99 {lags[int(0.99 * (len(lags) - 1))]:.2f} s, max {lags[-1]:.2f} s; {served[0]} recalls served"
    )
    for copy in cluster.copies:  # read in rollback mode only: nothing beside the copy but its follower's files
        assert not [p.name for p in copy.parent.iterdir() if p.name.endswith(("-wal", "-shm", "-journal"))]


def test_a_restarted_follower_resumes_without_copying_again(cluster):
    r1, _ = cluster.replicas
    copy = cluster.copies[0]
    inode = os.stat(copy).st_ino
    cluster.processes.stop("follow1")
    stopped = httpx.get(f"{r1}/brain/-/replica").json()
    assert stopped["state"] == "stopped" and stopped["stalled"] is True
    ids = [
        _remember(cluster.primary, {"_id": f"resume-{i}", "text": f"The resumed kiwi{i} note."}, cookies=_cookie())
        for i in range(3)
    ]
    cluster.processes.start("follow1", _brain("follow", cluster.store, copy, "--interval", "0.5"))
    for i, memory_id in enumerate(ids):
        wait_for(
            functools.partial(_recalls, r1, f"kiwi{i}", memory_id, resuming=True), what="the resumed follower's changes"
        )
    assert os.stat(copy).st_ino == inode  # the same file, brought forward: nothing copied again
    assert (
        "resuming" in cluster.processes.log("follow1")
        and "restored" not in cluster.processes.log("follow1").split("resuming")[-1]
    )
    wait_for(lambda: _following(copy), what="follow1 following again")


def _first(ltx_file):
    return int(ltx_file.stem.split("-")[0], 16)


def _last(ltx_file):
    return int(ltx_file.stem.split("-")[1], 16)


@pytest.mark.asyncio
async def test_a_follower_that_cannot_bridge_a_gap_says_it_is_stalled(tmp_path):
    """Litestream issue 1515: a change missing from the store's lower levels leaves
    its follower behind for good, and Litestream says nothing. brain follow does."""
    primary, copy = tmp_path / "primary" / "brain.db", tmp_path / "replica" / "brain.db"
    ltx = tmp_path / "store" / "ltx"
    primary.parent.mkdir()
    conn = brain_sql.connect(primary)
    brain_sql.remember(conn, SEED)
    store, processes = (tmp_path / "store").as_uri(), Processes(tmp_path)
    try:
        processes.start("replicate", _brain("replicate", primary, store))
        wait_for(lambda: list(ltx.glob("9/*.ltx")), what="the first snapshot")
        _follow(processes, "follow", store, copy)
        processes.stop("follow")
        at = brain_sql.replica_status(copy)["applied"]["txid"]
        brain_sql.remember(conn, [{"_id": "gap-1", "text": "The lost gannet note."}])

        def covering(txid):
            return [p for p in ltx.glob("[0-8]/*.ltx") if _first(p) <= txid <= _last(p)]

        for path in wait_for(lambda: covering(at + 1), what="the next change in the store"):
            path.unlink()  # a change the store lost: no level below the snapshots covers it any more
        brain_sql.remember(conn, [{"_id": "gap-2", "text": "The later gannet note."}])
        wait_for(lambda: any(_last(p) > at + 1 for p in ltx.glob("0/*.ltx")), what="a later change")
        for path in covering(at + 1):  # a compaction that read the lost change just before it went
            path.unlink()
        processes.start("follow", _brain("follow", store, copy, "--interval", "0.5", "--stall-after", "3"))
        status = wait_for(lambda: (s := brain_sql.replica_status(copy))["state"] == "stalled" and s, what="the stall")
        assert status["stalled"] is True and status["behind"] > 0 and "1515" in status["message"]
        assert status["applied"]["txid"] == at
        assert "stalled" in processes.log("follow")
        served = await Datasette([str(copy)]).client.get("/brain/-/replica")
        assert served.json()["stalled"] is True and served.json()["state"] == "stalled"
    finally:
        conn.close()
        processes.stop_all()


def test_replicas_outlive_the_primary_and_a_restore_holds_every_acknowledged_write(cluster):
    r1, r2 = cluster.replicas
    acknowledged = [f"final-{i}" for i in range(5)]
    for external_id in acknowledged:
        _remember(cluster.primary, {"_id": external_id, "text": f"The {external_id} puffin note."}, cookies=_cookie())
    time.sleep(3)  # past the sync interval (1 s) and Litestream's WAL monitor (1 s): what is acknowledged is sent
    cluster.processes.stop("primary", signal.SIGKILL)
    cluster.processes.stop("replicate", signal.SIGKILL)  # the primary's machine is gone
    for url in (r1, r2):
        assert _recalls(url, "lantern report owner")
    down = httpx.post(f"{r1}/brain/-/remember", json={"text": "too late"}, cookies=_cookie())
    assert down.status_code == 503 and down.headers["retry-after"] and "could not be reached" in down.json()["error"]
    restored = cluster.folder / "restored" / "brain.db"
    restore = [litestream_binary(), "restore", "-o", str(restored), cluster.store]
    subprocess.run(restore, check=True, capture_output=True)
    conn = brain_sql.connect(restored)
    assert brain_sql.check(conn) == {}
    held = {row[0] for row in conn.execute("select external_id from knowledge where external_id is not null")}
    expected = {r["_id"] for r in SEED} | {f"lag-{i}" for i in range(LAG_WRITES)} | set(acknowledged) | {"fwd-cookie"}
    assert expected <= held, expected - held
    assert "fwd-token" not in held  # forgotten through the replica
    recalled = brain_sql.recall(conn, {"q": "final-4 puffin note", "k": 3})
    assert any(hit["title"] or hit["content"] for hit in recalled["hits"])
    conn.close()


@pytest.mark.asyncio
async def test_connections_kept_open_on_a_copy_see_every_write_and_the_read_state_follows_it(tmp_path, monkeypatch):
    """Datasette keeps its connections open, and a busy replica reads all the
    time: each write reaches a connection that stays open on the copy (FTS5
    included, whose structure SQLite keeps between transactions), and the read
    state follows it change by change, built once."""
    from brain_sql import follower

    from .conftest import in_thread

    builds = []
    real_build = follower.build
    monkeypatch.setattr(follower, "build", lambda state, conn: builds.append(1) or real_build(state, conn))
    primary, copy = tmp_path / "primary" / "brain.db", tmp_path / "replica" / "brain.db"
    primary.parent.mkdir()
    writer = brain_sql.connect(primary)
    brain_sql.remember(writer, SEED)
    with writer:  # a table of the primary's own, written with plain SQL: no page 1 for the follower to send
        writer.execute("create table notes (id integer primary key, body text)")
        writer.executemany("insert into notes (body) values (?)", [("x" * 200,)] * 2000)
    store = (tmp_path / "store").as_uri()
    with in_thread(brain_sql.replicate, primary, store):
        wait_for(lambda: list((tmp_path / "store").glob("ltx/9/*.ltx")), what="the first snapshot")
        with in_thread(brain_sql.follow, store, copy, interval=0.5):
            wait_for(lambda: copy.exists() and _following(copy), what="the copy")
            reader = brain_sql.connect(copy)  # kept open throughout, reading all the time
            datasette = Datasette([str(copy)])
            assert (await datasette.client.get("/brain/-/recall", params={"q": "harbour owner"})).status_code == 200
            for i in range(5):
                word = f"kx{i}stoat"
                [[memory_id]] = brain_sql.remember(writer, [{"_id": f"open-{i}", "text": f"The {word} lives here."}])[1]

                def seen(word=word, memory_id=memory_id):
                    found = reader.execute("select rowid from knowledge_fts where knowledge_fts match ?", [word])
                    return found.fetchall() == [(memory_id,)]

                wait_for(seen, seconds=30, every=0.02, what=f"{word} on the open connection")
                response = await datasette.client.get("/brain/-/recall", params={"q": word, "k": 3})
                assert memory_id in [hit["id"] for hit in response.json()["hits"]]
                with writer:
                    writer.execute("update notes set body = ? where id = 1500", [word])
                wait_for(
                    lambda word=word: reader.execute("select body from notes where id = 1500").fetchone() == (word,),
                    seconds=30,
                    every=0.02,
                    what="a plain write on the open connection",
                )
            reader.close()
    writer.close()
    assert len(builds) == 1  # built once when first read; every change after that followed, not rebuilt
    assert not [p.name for p in copy.parent.iterdir() if p.name.endswith(("-wal", "-shm", "-journal"))]


@pytest.mark.asyncio
async def test_a_store_holding_another_brain_is_refused_and_a_follower_stops_when_its_copy_turns_into_another(
    tmp_path,
):
    """Two brains replicated to one URL mix in the store: `replicate` refuses the
    second (exit 2, naming it); and should another brain's pages reach a copy all
    the same (Litestream run by hand), its follower stops, says so, and the copy is
    not served."""
    primary, other, copy = tmp_path / "p" / "brain.db", tmp_path / "o" / "brain.db", tmp_path / "r" / "brain.db"
    for path in (primary, other):
        path.parent.mkdir()
        conn = brain_sql.connect(path)
        brain_sql.remember(conn, SEED if path == primary else [{"text": "The other brain's only note."}])
        conn.close()
    store, processes = (tmp_path / "store").as_uri(), Processes(tmp_path)
    try:
        processes.start("replicate", _brain("replicate", primary, store))
        wait_for(lambda: list((tmp_path / "store").glob("ltx/9/*.ltx")), what="the first snapshot")
        processes.start("follow", _brain("follow", store, copy, "--interval", "0.5"))
        wait_for(lambda: copy.exists() and _following(copy), what="the follower following")
        second = subprocess.run(_brain("replicate", other, store), capture_output=True, text=True, timeout=60)
        assert second.returncode == 2 and "already holds another brain" in second.stderr, second.stderr
        # the same mix made by hand: Litestream itself, not brain replicate
        processes.stop("replicate")
        config = tmp_path / "other.yml"
        config.write_text(json.dumps({"dbs": [{"path": str(other), "replica": {"url": store, "sync-interval": "1s"}}]}))
        processes.start("litestream", [litestream_binary(), "replicate", "-config", str(config)])
        status = wait_for(
            lambda: (s := brain_sql.replica_status(copy))["state"] == "diverged" and s, what="the follower stopping"
        )
        assert status["stalled"] is True and "another brain" in status["message"]
        wait_for(lambda: processes.running["follow"].poll() is not None, what="brain follow exiting")
        assert "another brain" in processes.log("follow")
        served = await Datasette([str(copy)]).client.get("/brain/-/recall", params={"q": "other brain note"})
        assert served.status_code == 503 and "another brain" in served.json()["error"], served.text
    finally:
        processes.stop_all()


def test_a_write_forwarded_to_a_replica_is_refused_at_once_naming_the_loop(tmp_path):
    """A replica whose `primary` leads back to a replica (itself, here: a name that
    load-balances over the replicas too) answers the forwarded write with a 508
    naming the misconfiguration, instead of forwarding it round for ever."""
    copy = tmp_path / "r" / "brain.db"
    copy.parent.mkdir()
    conn = brain_sql.connect(copy)
    brain_sql.remember(conn, SEED)
    conn.execute("pragma journal_mode = delete")
    conn.close()
    (tmp_path / "r" / "brain.db-txid").write_text(f"{1:016x}\n")  # a copy Litestream follows
    processes, port = Processes(tmp_path), _free_port()
    try:
        itself = {"plugins": {"datasette-brain": {"allow_write": True, "primary": f"http://127.0.0.1:{port}"}}}
        url = _serve(processes, "replica", copy, itself, port=port)
        answer = httpx.post(f"{url}/brain/-/remember", json={"text": "A write going round."}, timeout=20)
        assert answer.status_code == 508 and answer.headers["retry-after"], answer.text
        assert "leads back to a replica" in answer.json()["error"]
        assert brain_sql.replica_status(copy)["replica"] is True
    finally:
        processes.stop_all()
