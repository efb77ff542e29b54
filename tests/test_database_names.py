"""Brains whose file names Datasette tilde-encodes in URLs (team.notes.db is
/team~2Enotes, my brain.db is /my+brain): every brain route takes the database as
Datasette's own routes do, and every link and forwarded URL the plugin builds is
the encoded one."""

import json
import re
import shutil
from html import unescape

import pytest
from datasette.app import Datasette
from mcp import Client
from mcp.server.mcpserver import MCPServer

import brain_sql
from datasette_brain import mcp_tools

from .conftest import close_brain, copy_brain, datasette_server

NAMES = ["team.notes", "my brain", "a~b", "50%", "café", "x.y z~%é"]
RECORDS = [
    {
        "_id": "live",
        "title": "Zephyr turbine",
        "text": "The zephyr turbine is serviced on Mondays.",
        "entities": ["Zephyr"],
    },
    {
        "_id": "old",
        "title": "Old zephyr rota",
        "text": "The zephyr turbine was serviced on Thursdays.",
        "expires_at": "2025-01-01",
    },
]
WRITER = {"id": "keeper"}


def brain_named(vault_brain_path, folder, name):
    path = copy_brain(vault_brain_path, folder / f"{name}.db", RECORDS)
    close_brain(brain_sql.connect(path))
    return path


def ids(path):
    conn = brain_sql.connect(path)
    try:
        memory = conn.execute("select id from knowledge where external_id = 'live'").fetchone()[0]
        old = conn.execute("select id from knowledge where external_id = 'old'").fetchone()[0]
        entity = conn.execute("select id from entities where name = 'Zephyr'").fetchone()[0]
        return memory, old, entity
    finally:
        conn.close()


def links(html):
    return {unescape(href) for href in re.findall(r'(?:href|action)="([^"#]+)"', html)}


@pytest.mark.asyncio
@pytest.mark.parametrize("name", NAMES)
async def test_every_brain_route_takes_the_encoded_name_and_links_there(vault_brain_path, tmp_path, name):
    path = brain_named(vault_brain_path, tmp_path, name)
    memory, old, entity = ids(path)
    datasette = Datasette([str(path)], metadata={"plugins": {"datasette-brain": {"allow_write": WRITER}}})
    assert name in datasette.databases
    base = datasette.urls.database(name)
    assert base != f"/{name}"  # Datasette encodes it
    cookies = {"ds_actor": datasette.sign({"a": WRITER}, "actor")}
    client = datasette.client

    pages = [
        f"{base}/-/brain?q=zephyr",
        f"{base}/-/memory/{memory}",
        f"{base}/-/entity/{entity}",
        f"{base}/-/entities",
        f"{base}/-/decayed",
    ]
    seen = set()
    for page in pages:
        answer = await client.get(page, cookies=cookies)
        assert answer.status_code == 200, (page, answer.text[:300])
        seen |= {link for link in links(answer.text) if "/-/" in link and link.startswith(base)}
    if name == "team.notes":  # reached by its name as written, a page still links to the encoded path
        raw = await client.get(f"/{name}/-/decayed", params={"size": 1}, cookies=cookies)
        assert raw.status_code == 200, raw.text
        assert not [link for link in links(raw.text) if link.startswith(f"/{name}/")]
        assert any("page=2" in link for link in links(raw.text))
    database_page = await client.get(base, cookies=cookies)
    assert f"{base}/-/brain" in links(database_page.text)
    # every link a page gives under the brain is a page that answers
    for link in sorted(seen):
        if "/-/decayed/act" in link:
            continue
        answer = await client.get(link, cookies=cookies)
        assert answer.status_code == 200, (link, answer.text[:300])

    for api in [
        f"{base}/-/recall?q=zephyr",
        f"{base}/-/memories.json",
        f"{base}/-/export.jsonl",
        f"{base}/-/memory/{memory}.json",
        f"{base}/-/entities.json",
        f"{base}/-/decayed.json",
        f"{base}/-/replica",
    ]:
        answer = await client.get(api, cookies=cookies)
        assert answer.status_code == 200, (api, answer.text[:300])
    recalled = (await client.get(f"{base}/-/recall", params={"q": "zephyr"})).json()
    assert recalled["hits"]

    verified = await client.post(f"{base}/-/verify", json={"claim": "serviced on Mondays", "id": memory})
    assert verified.status_code == 200, verified.text
    remembered = await client.post(
        f"{base}/-/remember", json=[{"_id": "new", "text": "The quasar pump is oiled weekly."}], cookies=cookies
    )
    assert remembered.status_code == 201, remembered.text
    forgot = await client.post(f"{base}/-/forget", json={"external_ids": ["new"]}, cookies=cookies)
    assert forgot.status_code == 200, forgot.text

    html = (await client.get(f"{base}/-/decayed", cookies=cookies)).text
    token = re.search(r'name="csrftoken" value="([^"]+)"', html).group(1)
    assert f"{base}/-/decayed/act" in links(html)
    acted = await client.post(
        f"{base}/-/decayed/act",
        cookies={**cookies, "ds_csrftoken": token},
        data={"csrftoken": token, "id": str(old), "action": "archive"},
    )
    assert acted.status_code == 302, acted.text
    assert acted.headers["location"].startswith(f"{base}/-/decayed")
    conn = brain_sql.connect(path)
    assert conn.execute("select relevance_tier from knowledge where id = ?", (old,)).fetchone()[0] == 0
    assert conn.execute("select count(*) from knowledge where external_id = 'new'").fetchone()[0] == 0
    conn.close()


@pytest.mark.asyncio
async def test_a_replica_forwards_writes_to_the_primarys_encoded_route(vault_brain_path, tmp_path):
    name = "team.notes b"
    primary = brain_named(vault_brain_path, tmp_path, name)
    copy = tmp_path / "replica" / f"{name}.db"
    copy.parent.mkdir()
    shutil.copy(primary, copy)
    (copy.parent / f"{name}.db{'-txid'}").write_text("%016x\n" % 1)
    write = {"plugins": {"datasette-brain": {"allow_write": True}}}
    (tmp_path / "primary.json").write_text(json.dumps(write))
    with datasette_server(primary, "-m", tmp_path / "primary.json") as url:
        replica = Datasette(
            [str(copy)], metadata={"plugins": {"datasette-brain": {"primary": url, "allow_write": True}}}
        )
        base = replica.urls.database(name)
        over_http = await replica.client.post(f"{base}/-/remember", json=[{"_id": "fwd", "text": "Forwarded once."}])
        assert over_http.status_code == 201, over_http.text
        server = MCPServer("test")
        mcp_tools.register(replica, server)
        async with Client(server) as client:
            over_mcp = await client.call_tool("brain_remember", {"database": name, "records": [{"text": "By tool."}]})
        assert not over_mcp.is_error, over_mcp.content
    conn = brain_sql.connect(primary)
    texts = {row[0] for row in conn.execute("select content from knowledge")}
    conn.close()
    assert {"Forwarded once.", "By tool."} <= texts
