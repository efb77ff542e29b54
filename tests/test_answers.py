"""Answers that say what they mean (issue 21), on the command line, the pages, the
JSON API and MCP: counts with the right noun, values as the JSON that was sent,
an empty answer's advice that fits its reason, a section without its note's title
again, links that survive a preview's cut, the decayed page's titles and how to
get brain-write, the recall query's description, remember --json as the route
answers, and MCP tool errors as the tool's result, not the server's log."""

import asyncio
import json
import re
import sys
from html import unescape
from pathlib import Path

import pytest
import yaml
from datasette.app import Datasette
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

import brain_sql
from brain_sql import for_plugin

from .conftest import copy_brain, rows, write

ROOT = Path(__file__).resolve().parent.parent

WRITE = {"plugins": {"datasette-brain": {"allow_write": {"id": "keeper"}}}}
DECAYED = {"_id": "gone", "title": "Old rota", "text": "The 2024 pager rota.", "expires_at": "2025-01-01"}
# a link that the recall page's preview (320 characters) and a table cell (160) would cut in half
FILLER = " ".join(["Quokka valve inspections follow the checklist"] * 7)
LINKED = {
    "_id": "linked",
    "title": "Quokka valve owner",
    "text": FILLER[:300] + " [[owned_by::Dana Whitfield]] signs off.",
}
CELL = {
    "_id": "cell",
    "title": "Quokka cell",
    "text": FILLER[:140] + " [[owned_by::Dana Whitfield]] signs off on this one.",
}


@pytest.fixture(scope="module")
def brain(vault_brain_path, tmp_path_factory):
    return copy_brain(vault_brain_path, tmp_path_factory.mktemp("answers") / "brain.db", [DECAYED, LINKED, CELL])


def test_counts_have_the_right_noun(run, tmp_path):
    one = write(tmp_path / "notes" / "Alone.md", "# Alone\n\nJust one line of text.\n")
    db_path = tmp_path / "brain.db"
    ingested = run("brain", "ingest", db_path, one)
    assert ingested.exit_code == 0, ingested.output
    assert "1 file, 1 document: 1 chunk added," in ingested.output
    assert re.search(r"; 1 entity, 0 relationships added;", ingested.output), ingested.output
    stats = run("brain", "stats", db_path)
    assert "1 memory in 1 document; 1 entity, 0 relationships" in stats.output


@pytest.mark.asyncio
async def test_pages_count_with_the_right_noun(tmp_path):
    db_path = tmp_path / "brain.db"
    brain_sql.ingest(brain_sql.connect(db_path), [write(tmp_path / "Alone.md", "# Alone\n\nJust one line.\n")])
    datasette = Datasette([str(db_path)], metadata=WRITE)
    empty = (await datasette.client.get("/brain/-/brain")).text
    assert "1 memory in 1 document," in unescape(empty)
    found = (await datasette.client.get("/brain/-/brain", params={"q": "just one line"})).text
    assert re.search(r'id="brain-summary">1 hit ·', found)
    decayed = (await datasette.client.get("/brain/-/decayed")).text
    assert 'id="brain-decayed-count">0 memories<' in decayed


@pytest.mark.asyncio
async def test_extending_by_one_day_says_one_day(brain, tmp_path):
    path = copy_brain(brain, tmp_path / "brain.db")
    datasette = Datasette([str(path)], metadata=WRITE)
    keeper = {"ds_actor": datasette.sign({"a": {"id": "keeper"}}, "actor")}
    page = await datasette.client.get("/brain/-/decayed", cookies=keeper)
    token = re.search(r'name="csrftoken" value="([^"]+)"', page.text).group(1)
    [(target,)] = rows(brain_sql.connect(path), "select id from knowledge where external_id = 'gone'")
    posted = await datasette.client.post(
        "/brain/-/decayed/act",
        cookies={**keeper, "ds_csrftoken": page.cookies["ds_csrftoken"]},
        data={"csrftoken": token, "id": str(target), "action": "extend:1", "back": ""},
    )
    assert posted.status_code == 302, posted.text
    after = await datasette.client.get(
        "/brain/-/decayed", cookies={**keeper, "ds_messages": posted.cookies["ds_messages"]}
    )
    assert f"Extended the expiry of 1 memory (id {target}) by 1 day." in after.text


@pytest.mark.asyncio
async def test_values_in_messages_are_the_json_that_was_sent(brain, tmp_path):
    path = copy_brain(brain, tmp_path / "brain.db")
    datasette = Datasette([str(path)], metadata=WRITE)
    keeper = {"ds_actor": datasette.sign({"a": {"id": "keeper"}}, "actor")}
    for route, body, said in [
        ("forget", {"ids": [True]}, "ids must be whole numbers (memory ids), not true"),
        ("forget", {"external_ids": [None]}, "non-empty text or whole numbers, not null"),
        ("remember", {"text": "x", "confidence": True}, "confidence must be a number from 0 to 1, not true"),
        ("remember", {"text": "x", "domain": False}, "domain must be text, not false"),
        ("remember", {"text": "x", "observed_at": {"day": 1}}, 'observed_at must be a date string, not {"day": 1}'),
        ("remember", {"text": "x", "class": "gossip"}, 'class must be one of memory, reference, policy, not "gossip"'),
    ]:
        answer = await datasette.client.post(f"/brain/-/{route}", json=body, cookies=keeper)
        assert answer.status_code == 400 and said in answer.json()["error"], (body, answer.text)
    assert for_plugin.shown("\u200b/acme\x00") == '"\\u200b/acme\\u0000"'  # what does not print is escaped


def test_remember_json_prints_what_the_route_answers(run, brain, tmp_path):
    record = {"_id": "deploys", "title": "Deploy window", "text": "Deploys happen on Tuesdays."}
    cli_path, route_path = copy_brain(brain, tmp_path / "cli.db"), copy_brain(brain, tmp_path / "route.db")
    printed = run("brain", "remember", cli_path, write(tmp_path / "r.json", json.dumps(record)), "--json")
    assert printed.exit_code == 0, printed.output

    async def answered():
        datasette = Datasette([str(route_path)], metadata=WRITE)
        keeper = {"ds_actor": datasette.sign({"a": {"id": "keeper"}}, "actor")}
        return (await datasette.client.post("/route/-/remember", json=record, cookies=keeper)).json()

    route = asyncio.run(answered())
    assert json.loads(printed.output) == route and route["ok"] is True


def test_only_decayed_answers_give_no_advice_on_the_query_words(run, vault_brain_path):
    """The README's example: the coffee machine's rota expired; nothing says to try other words."""
    said = run("brain", "recall", vault_brain_path, "when is the coffee machine descaled")
    assert said.exit_code == 0, said.output
    assert "expired or archived memories do: --include-decayed shows them" in said.output
    assert "clarify_query" not in said.output and "recommendation" not in said.output

    async def page():
        datasette = Datasette([str(vault_brain_path)])
        return (await datasette.client.get("/brain/-/brain", params={"q": "when is the coffee machine descaled"})).text

    box = unescape(re.search(r'id="brain-abstain">(.*?)</div>', asyncio.run(page()), re.S).group(1))
    assert "Nothing current matches, but expired or archived memories do." in box and "Show them" in box
    assert "Not confident" not in box and "try other words" not in box


def test_a_section_does_not_repeat_its_notes_title(run, vault_brain_path):
    said = run("brain", "recall", vault_brain_path, "who owns the support runbook?", "--scope", "/acme/support").output
    assert "Support Runbook › Severity" in said and "Support Runbook › Support Runbook" not in said
    assert for_plugin.section("Support Runbook", "Support Runbook > Severity") == "Severity"
    assert for_plugin.section("Support Runbook", "Support Runbook") is None
    assert for_plugin.section("Notes", "Other > Part") == "Other > Part"

    async def pages():
        datasette = Datasette([str(vault_brain_path)])
        query = {"q": "who owns the support runbook?", "scope": "/acme/support"}
        recalled = (await datasette.client.get("/brain/-/brain", params=query)).text
        [runbook] = (await datasette.client.get("/brain/entities.json?_shape=array&name=Support+Runbook")).json()
        return unescape(recalled), unescape((await datasette.client.get(f"/brain/-/entity/{runbook['id']}")).text)

    html, entity = asyncio.run(pages())
    assert "<small>› Severity</small>" in html and "› Support Runbook >" not in html
    assert "</a> › Severity</li>" in entity and "› Support Runbook >" not in entity
    # and each hit shows the evidence its relevance was read from
    evidence = re.findall(r'class="brain-evidence">\((.*?)\)</span>', html)
    assert evidence[0] == "words owns, support, runbook · similarity 0.87 · tied to Support Runbook", evidence


@pytest.mark.asyncio
async def test_a_preview_never_cuts_a_link_in_half(brain):
    datasette = Datasette([str(brain)])
    [(dana,)] = rows(brain_sql.connect(brain), "select id from entities where name = 'Dana Whitfield'")
    link = f'<a href="/brain/-/entity/{dana}" class="brain-entity-link">[[owned_by::Dana Whitfield]]</a>'
    page = (await datasette.client.get("/brain/-/brain", params={"q": "quokka valve inspections"})).text
    preview = re.search(r'<div class="brain-preview">(.*?)</div>', page, re.S).group(1)
    assert link in preview and preview.rstrip().endswith("…")
    # a table cell (160 characters) too: the link whole, then "more"
    assert CELL["text"].index("[[") < 160 < CELL["text"].index("]]")
    cell = (await datasette.client.get("/brain/knowledge", params={"external_id": "cell"})).text
    assert link + '… <a href="/brain/-/memory/' in cell


@pytest.mark.asyncio
async def test_decayed_titles_lead_to_their_memories_and_the_page_says_how_to_get_brain_write(brain):
    datasette = Datasette([str(brain)], metadata=WRITE)
    [(gone,)] = rows(brain_sql.connect(brain), "select id from knowledge where external_id = 'gone'")
    html = (await datasette.client.get("/brain/-/decayed")).text
    assert f'<a href="/brain/-/memory/{gone}">Old rota</a>' in html
    how = unescape(re.search(r'id="brain-write-how">(.*?)</span>', html, re.S).group(1))
    assert "brain-write permission" in how and "allow_write" in how and "token" in how
    refused = await datasette.client.post("/brain/-/forget", json={"ids": [gone]})
    assert refused.status_code == 403 and "allow_write" in refused.json()["error"]


@pytest.mark.asyncio
async def test_the_recall_querys_description_says_how_it_fuses(vault_brain_path):
    metadata = yaml.safe_load((ROOT / "metadata.yml").read_text())
    for given in (None, metadata):
        datasette = Datasette([str(vault_brain_path)], metadata=given)
        await datasette.invoke_startup()
        text = " ".join((await datasette.get_canned_queries("brain", None))["recall"]["description"].split())
        assert "convex combination" in text and "Reciprocal Rank Fusion when q names an entity" in text, text
        assert "fused by weighted RRF." not in text


def test_tool_errors_over_stdio_come_back_to_the_caller_only(brain, tmp_path):
    path = copy_brain(brain, tmp_path / "brain.db")
    log = tmp_path / "stderr.log"

    async def session():
        params = StdioServerParameters(command=sys.executable, args=["-m", "sqlite_utils", "brain", "mcp", str(path)])
        with open(log, "w") as errlog:
            async with Client(stdio_client(params, errlog=errlog)) as client:
                return [
                    await client.call_tool("brain_forget", {"ids": [True]}),
                    await client.call_tool("brain_remember", {"records": [{"text": "x", "confidence": True}]}),
                ]

    forget, remember = asyncio.run(session())
    logged = log.read_text()
    assert "must be" not in logged, logged  # the server's log is not where the caller looks
    for result, said in ((forget, "not true"), (remember, "confidence must be a number from 0 to 1, not true")):
        assert (
            result.is_error
            and result.structured_content["status"] == 400
            and said in result.structured_content["error"]
        )
