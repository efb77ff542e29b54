"""Deciding about decayed memories: brain_sql's extend_expiry, archive, restore and
flag (one transaction each, seen by recall at once), and the decayed page's
CSRF-protected forms over them, with pagination past a thousand rows."""

import datetime
import json
import re
from html import unescape
from pathlib import Path

import pytest
from datasette.app import Datasette

import brain_sql
from brain_sql import for_plugin
from brain_sql.config import MAX_FORGET_ITEMS

from .conftest import close_brain, copy_brain, fingerprint, rows

DOCS = Path(__file__).parent.parent / "docs"

QUERY = {"q": "when is the zephyr turbine serviced", "k": 5}
RECORDS = [
    {
        "_id": "live",
        "title": "Zephyr turbine",
        "text": "The zephyr turbine is serviced every Monday by the night crew.",
    },
    {
        "_id": "expired",
        "title": "Old zephyr rota",
        "text": "The zephyr turbine was serviced on Thursdays in 2024.",
        "expires_at": "2025-01-01",
    },
    {
        "_id": "archived",
        "title": "Zephyr manual",
        "text": "The zephyr turbine manual, first edition, serviced yearly.",
        "relevance_tier": 0,
    },
    {
        "_id": "later",
        "title": "Zephyr warranty",
        "text": "The zephyr turbine warranty is serviced by the vendor.",
        "expires_at": "2999-01-01",
    },
]
WRITE = {"plugins": {"datasette-brain": {"allow_write": {"id": "keeper"}}}}


@pytest.fixture
def brain(vault_brain_path, tmp_path):
    path = copy_brain(vault_brain_path, tmp_path / "brain.db", RECORDS)
    conn = brain_sql.connect(path)
    yield conn
    conn.close()


def memory_id(conn, external_id):
    return rows(conn, "select id from knowledge where external_id = ?", (external_id,))[0][0]


def recalled(conn, **extra):
    found = brain_sql.recall(conn, {**QUERY, **extra})
    return {hit["external_id"] for hit in found["hits"]}


def state(conn, external_id):
    return rows(
        conn, "select relevance_tier, expires_at, flagged from knowledge where external_id = ?", (external_id,)
    )[0]


def decay_of(conn, external_id):
    _, listed = brain_sql.decayed(conn)
    return {row["id"]: row["decay"] for row in listed}.get(memory_id(conn, external_id), "live")


def test_an_archived_memory_is_archived_not_live(brain):
    assert decay_of(brain, "archived") == "archived"
    assert decay_of(brain, "expired") == "expired"
    assert decay_of(brain, "live") == "live"
    # the knowledge table's facet and filter use the same buckets
    counted = dict(brain.execute(for_plugin.decay_counts_sql("select * from knowledge where external_id is not null")))
    assert counted == {"archived": 1, "expired": 1, "live": 2}


def test_archive_takes_a_memory_out_of_recall(brain):
    assert "live" in recalled(brain)
    target = memory_id(brain, "live")
    archived_before = brain_sql.stats(brain)["decayed"]["archived"]
    assert brain_sql.archive(brain, [target, 99_999_999]) == {
        "action": "archive",
        "changed": [target],
        "not_found": [99_999_999],
    }
    assert state(brain, "live")[0] == 0
    assert decay_of(brain, "live") == "archived"
    assert "live" not in recalled(brain)
    assert "live" in recalled(brain, include_decayed=True)
    assert brain_sql.stats(brain)["decayed"]["archived"] == archived_before + 1


def test_extend_expiry_brings_an_expired_memory_back(brain):
    assert "expired" not in recalled(brain)
    before = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    brain_sql.extend_expiry(brain, [memory_id(brain, "expired")], 30)
    expires = datetime.datetime.fromisoformat(state(brain, "expired")[1])
    # 30 days from now, not from the old expiry (which would still be past)
    assert (
        datetime.timedelta(days=30) - datetime.timedelta(seconds=5)
        <= expires - before
        <= datetime.timedelta(days=30, seconds=5)
    )
    assert decay_of(brain, "expired") == "live"
    assert "expired" in recalled(brain)
    # a later expiry moves on from itself
    brain_sql.extend_expiry(brain, [memory_id(brain, "later")], 365)
    assert state(brain, "later")[1] == "3000-01-01 00:00:00"
    brain_sql.extend_expiry(brain, [memory_id(brain, "later")], 1, now="2999-06-01")
    assert state(brain, "later")[1] == "3000-01-02 00:00:00"


def test_restore_makes_a_memory_live_with_no_expiry(brain):
    archived, expired = memory_id(brain, "archived"), memory_id(brain, "expired")
    assert not {"archived", "expired"} & recalled(brain)
    assert brain_sql.restore(brain, [archived, expired])["changed"] == sorted([archived, expired])
    assert state(brain, "archived") == (1, None, 0) and state(brain, "expired") == (1, None, 0)
    assert {"archived", "expired"} <= recalled(brain)
    assert decay_of(brain, "archived") == decay_of(brain, "expired") == "live"
    brain.execute("update knowledge set relevance_tier = 3 where external_id = 'live'")
    brain_sql.restore(brain, [memory_id(brain, "live")])
    assert state(brain, "live")[0] == 3  # a higher tier is kept


def test_flag_hides_a_memory_everywhere(brain):
    target = memory_id(brain, "expired")
    brain_sql.flag(brain, [target])
    assert state(brain, "expired")[2] == 1
    assert "expired" not in recalled(brain, include_decayed=True)
    assert brain_sql.memory(brain, target) is None
    assert target not in {row["id"] for row in brain_sql.decayed(brain)[1]}
    # a flagged memory is not found by the other actions either
    assert brain_sql.restore(brain, [target]) == {"action": "restore", "changed": [], "not_found": [target]}
    assert state(brain, "expired") == (1, "2025-01-01 00:00:00", 1)


def test_each_action_is_one_transaction(brain):
    first, second = memory_id(brain, "live"), memory_id(brain, "later")
    before = rows(brain, "select * from knowledge order by id")
    brain.execute(
        f"create temp trigger refuse before update on knowledge when new.id = {second} "
        "begin select raise(abort, 'refused'); end"
    )
    for action in (
        lambda ids: brain_sql.archive(brain, ids),
        lambda ids: brain_sql.extend_expiry(brain, ids, 30),
        lambda ids: brain_sql.restore(brain, ids),
        lambda ids: brain_sql.flag(brain, ids),
    ):
        with pytest.raises(brain_sql.BrainError, match="nothing was changed"):  # a tool's trigger: run check
            action([first, second])
        assert rows(brain, "select * from knowledge order by id") == before
    assert not brain.in_transaction


def test_bad_requests_change_nothing(brain):
    before = rows(brain, "select * from knowledge order by id")
    for call, message in [
        (lambda: brain_sql.archive(brain, []), "give the ids"),
        (lambda: brain_sql.archive(brain, "1"), "must be a list"),
        (lambda: brain_sql.flag(brain, [True]), "memory ids"),
        (lambda: brain_sql.restore(brain, [0]), "memory ids"),
        (lambda: brain_sql.extend_expiry(brain, [1], 0), "days must be"),
        (lambda: brain_sql.extend_expiry(brain, [1], "30"), "days must be"),
        (lambda: brain_sql.archive(brain, list(range(1, 10_002))), "at most"),
    ]:
        with pytest.raises(brain_sql.FieldError, match=message):
            call()
    assert rows(brain, "select * from knowledge order by id") == before


# the decayed page's forms, through Datasette's own client


def cookies_for(datasette, actor_id=None):
    return {"ds_actor": datasette.sign({"a": {"id": actor_id}}, "actor")} if actor_id else {}


async def page_with_token(datasette, cookies, path="/brain/-/decayed"):
    """(page HTML, cookies with the CSRF cookie the page set)."""
    response = await datasette.client.get(path, cookies=cookies)
    assert response.status_code == 200, response.text
    return response.text, {**cookies, "ds_csrftoken": response.cookies.get("ds_csrftoken", "")}


def token_in(html):
    found = re.search(r'name="csrftoken" value="([^"]+)"', html)
    return found.group(1) if found else None


@pytest.fixture
def served(brain):
    path = brain.execute("select file from pragma_database_list where name = 'main'").fetchone()[0]
    close_brain(brain)
    return path


@pytest.mark.asyncio
async def test_writers_see_actions_and_they_work(served):
    datasette = Datasette([served], metadata=WRITE)
    keeper = cookies_for(datasette, "keeper")
    html, cookies = await page_with_token(datasette, keeper, "/brain/-/decayed?decay=expired")
    assert 'action="/brain/-/decayed/act"' in html and 'value="archive"' in html
    conn = brain_sql.connect(served)
    target = memory_id(conn, "expired")
    posted = await datasette.client.post(
        "/brain/-/decayed/act",
        cookies=cookies,
        data={"csrftoken": token_in(html), "id": str(target), "action": "archive", "back": "decay=expired"},
    )
    assert posted.status_code == 302, posted.text
    assert posted.headers["location"] == "/brain/-/decayed?decay=expired"
    assert state(conn, "expired")[0] == 0
    shown = (await datasette.client.get("/brain/-/decayed.json", params={"decay": "archived"})).json()
    assert target in {row["id"] for row in shown["rows"]}
    # extend by a year, then restore
    for action in ("extend:365", "restore"):
        posted = await datasette.client.post(
            "/brain/-/decayed/act",
            cookies=cookies,
            data={"csrftoken": token_in(html), "id": str(target), "action": action},
        )
        assert posted.status_code == 302, posted.text
    assert state(conn, "expired") == (1, None, 0)
    assert "expired" in recalled(conn)
    bad = await datasette.client.post(
        "/brain/-/decayed/act", cookies=cookies, data={"csrftoken": token_in(html), "id": str(target), "action": "burn"}
    )
    assert bad.status_code == 400 and "unknown action" in bad.text
    conn.close()


@pytest.mark.asyncio
async def test_without_brain_write_no_buttons_and_posts_refused(served):
    datasette = Datasette([served], metadata=WRITE)
    conn = brain_sql.connect(served)
    target = memory_id(conn, "expired")
    # a valid token and its cookie, from a writer's page: the permission, not the token, refuses
    writers_page, csrf = await page_with_token(datasette, cookies_for(datasette, "keeper"))
    for actor in (None, "visitor"):
        html = (await datasette.client.get("/brain/-/decayed", cookies=cookies_for(datasette, actor))).text
        assert "Old zephyr rota" in html
        assert "/-/decayed/act" not in html and 'value="archive"' not in html and "brain-write permission" in html
        cookies = {**cookies_for(datasette, actor), "ds_csrftoken": csrf["ds_csrftoken"]}
        refused = await datasette.client.post(
            "/brain/-/decayed/act",
            cookies=cookies,
            data={"csrftoken": token_in(writers_page), "id": str(target), "action": "archive"},
        )
        assert refused.status_code == 403 and "brain-write" in refused.text
    assert state(conn, "expired")[0] == 1
    conn.close()


@pytest.mark.asyncio
async def test_a_post_without_the_csrf_token_is_refused(served):
    datasette = Datasette([served], metadata=WRITE)
    keeper = cookies_for(datasette, "keeper")
    conn = brain_sql.connect(served)
    target = memory_id(conn, "expired")
    html, cookies = await page_with_token(datasette, keeper)
    for data, sent in [
        ({"id": str(target), "action": "archive"}, cookies),  # no token in the form
        ({"id": str(target), "action": "archive", "csrftoken": token_in(html)}, keeper),  # no cookie
        ({"id": str(target), "action": "archive", "csrftoken": "forged"}, cookies),
    ]:
        refused = await datasette.client.post("/brain/-/decayed/act", cookies=sent, data=data)
        assert refused.status_code == 403, refused.text
    # a JSON body is no way round it: the route is not one of the JSON API's
    refused = await datasette.client.post(
        "/brain/-/decayed/act", cookies=keeper, json={"id": [target], "action": "archive"}
    )
    assert refused.status_code == 403
    assert state(conn, "expired")[0] == 1
    conn.close()


@pytest.mark.asyncio
async def test_a_post_with_anything_wrong_changes_nothing_and_says_so(served):
    datasette = Datasette([served], metadata=WRITE)
    html, cookies = await page_with_token(datasette, cookies_for(datasette, "keeper"))
    conn = brain_sql.connect(served)
    target = str(memory_id(conn, "expired"))
    before = fingerprint(conn)
    good = {"csrftoken": token_in(html), "id": target, "action": "archive", "back": "decay=expired"}
    for wrong, named in [
        ({"back": "page=0"}, "back"),
        ({"back": "page=100000000000000000"}, "back"),
        ({"back": "size=1000&page=9223372036854775807"}, "back"),
        ({"back": "size=abc"}, "back"),
        ({"id": "\uff11"}, "id"),
        ({"id": f" {target}"}, "id"),
        ({"id": "9223372036854775808"}, "id"),
        ({"action": "extend:99999999999999999999"}, "days"),
        ({"action": "extend"}, "days"),
        ({"action": "burn"}, "unknown action"),
        # a back that is no query of the decayed page, any part of it: never dropped silently
        ({"back": "%ff%fe"}, "back"),
        ({"back": "_size=1e9"}, '"_size" is no parameter'),
        ({"back": "facet=%00"}, '"facet" is no parameter'),
        ({"back": "?decay=expired"}, "back"),
        ({"back": "decay=expired&decay=archived"}, "decay is given twice"),
        ({"back": "decay=live"}, "decay must be one of"),
        ({"back": "class=nope"}, "class must be"),
        ({"back": "source=%00"}, "NUL"),
        ({"back": "decay=expired&"}, "back"),
        ({"back": "scope=%2Fa%20"}, "a space at the start or end"),
        ({"back": "scope=/acme%E2%80%8B"}, "U+200B ZERO WIDTH SPACE"),
        ({"back": "scope=/acme/e%CC%81"}, "NFC"),
        ({"action": "extend:30", "back": "_size=1e9"}, "back"),
        # one action and one page to go back to: never the last of several taken silently
        ({"action": ["archive", "flag"]}, "action is given 2 times"),
        ({"action": ["archive", "archive"]}, "action is given 2 times"),
        ({"back": ["decay=expired", "decay=archived"]}, "back is given 2 times"),
        ({"actions": "flag"}, 'unknown field "actions"'),
    ]:
        refused = await datasette.client.post("/brain/-/decayed/act", cookies=cookies, data={**good, **wrong})
        assert refused.status_code == 400, (wrong, refused.text)
        assert "Nothing was changed" in refused.text and named in unescape(refused.text), (wrong, refused.text[-3000:])
        assert fingerprint(conn) == before, wrong
    # a form whose bytes are not UTF-8: a back of source=%FF would reach the page as U+FFFD
    body = f"csrftoken={good['csrftoken']}&id={target}&action=archive&back=source%3D%FF".encode()
    headers = {"content-type": "application/x-www-form-urlencoded"}
    refused = await datasette.client.post("/brain/-/decayed/act", cookies=cookies, content=body, headers=headers)
    assert refused.status_code == 400 and "Nothing was changed" in refused.text and fingerprint(conn) == before
    # the same request, whole: done, and back on a page that answers
    done = await datasette.client.post("/brain/-/decayed/act", cookies=cookies, data=good)
    assert done.status_code == 302 and state(conn, "expired")[0] == 0
    back = await datasette.client.get(done.headers["location"], cookies={**cookies, **dict(done.cookies)})
    assert back.status_code == 200 and f"Archived 1 memory (id {target})." in back.text
    conn.close()


@pytest.mark.asyncio
async def test_what_a_large_action_did_is_said_in_a_message_a_browser_keeps(served):
    """The page says what was done through a signed cookie, and a browser drops a cookie
    past 4,096 bytes: a message about thousands of ids gives the counts and the first few."""
    datasette = Datasette([served], metadata=WRITE)
    html, cookies = await page_with_token(datasette, cookies_for(datasette, "keeper"))
    conn = brain_sql.connect(served)
    target = memory_id(conn, "expired")
    gone = [10**12 + i for i in range(MAX_FORGET_ITEMS - 1)]  # with the one found: as many as a request takes
    data = {"csrftoken": token_in(html), "id": [str(target), *map(str, gone)], "action": "archive"}
    done = await datasette.client.post("/brain/-/decayed/act", cookies=cookies, data=data)
    assert done.status_code == 302 and state(conn, "expired")[0] == 0
    cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith("ds_messages="))
    assert len(cookie) < 4_096
    back = await datasette.client.get(done.headers["location"], cookies={**cookies, **dict(done.cookies)})
    said = unescape(back.text)
    assert f"Archived 1 memory (id {target})." in said
    assert f"Not found (or flagged): {len(gone):,} ids: {', '.join(map(str, gone[:5]))}" in said
    assert f"{len(gone) - 5:,} more" in said
    conn.close()


@pytest.mark.asyncio
async def test_the_decayed_pages_filters_are_checked_as_recall_checks_them(served):
    """A scope recall refuses is a 400 here too, not an empty page: one check of scopes."""
    datasette = Datasette([served])
    for query, named in [
        ("scope=%2Fa%20", "a space at the start or end"),
        ("scope=/acme%E2%80%8B", "U+200B"),
        ("scope=/acme%E2%A0%80", "U+2800 BRAILLE PATTERN BLANK"),
        ("scope=/acme/e%CC%81", "NFC"),
        ("scope=acme", "starting with '/'"),
        ("decay=live", "decay must be one of"),
        ("class=nope", "class must be one of"),
        ("decay=expired&decay=archived", "given twice"),
    ]:
        recall = await datasette.client.get(f"/brain/-/recall?q=zephyr&{query}")
        page = await datasette.client.get(f"/brain/-/decayed?{query}")
        listed = await datasette.client.get(f"/brain/-/decayed.json?{query}")
        assert page.status_code == 400 and named in unescape(page.text), query
        assert listed.status_code == 400 and named in listed.json()["error"], query
        if query.startswith("scope="):
            assert recall.status_code == 400 and named in recall.json()["error"], query
    # the scope as recall reads it; parameters the page does not take left alone on the page, as on any
    # page, and refused by name in its JSON, as memories.json and recall refuse them
    shown = await datasette.client.get("/brain/-/decayed.json?scope=%2F")
    assert shown.status_code == 200 and shown.json()["selected"] == {"scope": "/"} and shown.json()["rows"]
    assert (await datasette.client.get("/brain/-/decayed?scope=%2F&colour=blue")).status_code == 200
    refused = await datasette.client.get("/brain/-/decayed.json?scope=%2F&colour=blue")
    assert refused.status_code == 400 and '"colour" is no parameter' in refused.json()["error"]


@pytest.mark.asyncio
async def test_decayed_pages_past_a_thousand(vault_brain_path, tmp_path):
    records = [{"_id": f"old-{i}", "text": f"Archived note number {i}.", "relevance_tier": 0} for i in range(1_005)]
    path = copy_brain(vault_brain_path, tmp_path / "brain.db", records)
    datasette = Datasette([str(path)])
    first = (await datasette.client.get("/brain/-/decayed.json")).json()
    total = first["count"]
    assert total >= 1_005 and first["pages"] == 2 and len(first["rows"]) == 1_000
    assert first["next"] == "/brain/-/decayed.json?page=2" and first["previous"] is None
    second = (await datasette.client.get(first["next"])).json()
    assert len(second["rows"]) == total - 1_000 and second["next"] is None
    assert not {r["id"] for r in first["rows"]} & {r["id"] for r in second["rows"]}
    # the facets count every page's rows
    assert {f["value"]: f["count"] for f in first["facets"]["decay"]}["archived"] >= 1_005
    small = (
        await datasette.client.get("/brain/-/decayed.json", params={"size": "400", "page": "3", "decay": "archived"})
    ).json()
    assert small["page"] == 3 and small["pages"] == -(-small["count"] // 400)
    assert small["previous"] == "/brain/-/decayed.json?decay=archived&page=2&size=400"
    html = (await datasette.client.get("/brain/-/decayed")).text
    assert f"{total:,} memories" in html and 'rel="next"' in html
    bad = await datasette.client.get("/brain/-/decayed.json", params={"page": "0"})
    assert bad.status_code == 400


def test_extending_past_the_last_time_a_time_holds_stops_there(brain):
    """Review 26, F3: an expiry extended past 9999-12-31 was stored as NULL (SQLite's
    datetime() of a later second), so the memory silently never expired while the
    answer said it was extended: it is extended to the last second a time holds."""
    later = memory_id(brain, "later")
    brain_sql.extend_expiry(brain, [later], 36_500, now="9990-01-01")
    assert state(brain, "later")[1] == "9999-12-31 23:59:59"


SECTIONS = ["## Pumps\n\nThe pumps are checked on Mondays.", "## Valves\n\nThe valves are oiled monthly.",
            "## Fans\n\nThe fans are cleaned in spring."]  # fmt: skip


def decisions(conn):
    """{section: (memory id, relevance tier, expiry)} of the plant note's memories."""
    return {
        next(name for name in ("pumps", "valves", "fans") if name in content): (row_id, tier, expires)
        for row_id, content, tier, expires in conn.execute(
            "select id, content, relevance_tier, expires_at from knowledge order by id"
        )
    }


def test_an_exported_brain_keeps_the_decisions_when_its_notes_are_edited(tmp_path):
    """Review 90, G1: the first section archived, the brain exported and the export
    ingested into a new brain, then the note edited in another section and ingested
    there: the archive stays. The export gives the tier and expiry the record stated,
    and the first chunk's own tier in its `_chunks` entry, as any other chunk's."""
    note = tmp_path / "notes" / "plant.md"
    note.parent.mkdir()
    note.write_text("\n\n".join(SECTIONS) + "\n")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [note.parent])
    brain_sql.archive(conn, [decisions(conn)["pumps"][0]])
    exported = tmp_path / "export.jsonl"
    exported.write_text("".join(brain_sql.export(conn)))
    [record] = [json.loads(line) for line in exported.read_text().splitlines()]
    assert record["relevance_tier"] == 1 and record["_chunks"][0]["relevance_tier"] == 0
    assert "relevance_tier" not in record["_chunks"][1]
    assert brain_sql.ingest(conn, [exported]).documents_unchanged == 1  # the same brain: nothing to write

    copy = brain_sql.connect(tmp_path / "copy.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(copy, [exported])
    assert [tier for _, tier, _ in decisions(copy).values()] == [0, 1, 1]
    note.write_text(note.read_text().replace("in spring", "in spring and autumn"))
    brain_sql.ingest(copy, [note.parent])
    assert [tier for _, tier, _ in decisions(copy).values()] == [0, 1, 1]
    close_brain(copy)

    # stated values no record could state (plain SQL's, review 91): the first chunk's, as before them
    garbage_values = ['{"relevance_tier": "x"}', "7", '{"expires_at": "garbage"}', '{"relevance_tier": 1e400}']
    for n, garbage in enumerate(garbage_values):
        conn.execute("update documents set stated_fields = ?", [garbage])
        conn.commit()
        [record] = [json.loads(line) for line in brain_sql.export(conn)]
        assert record["relevance_tier"] == 0 and "relevance_tier" not in record["_chunks"][0]
        assert record["_chunks"][1]["relevance_tier"] == 1 and "expires_at" not in record
        exported.write_text(json.dumps(record) + "\n")
        again = brain_sql.connect(tmp_path / f"again-{n}.db", model_id=brain_sql.DEFAULT_MODEL)
        report = brain_sql.ingest(again, [exported])
        assert not report.errors and [tier for _, tier, _ in decisions(again).values()] == [0, 1, 1]
        close_brain(again)
    close_brain(conn)


def test_an_edit_of_a_note_keeps_the_decisions_on_its_unchanged_sections(tmp_path):
    """Review 88, L1: archive one section of a note and extend another's expiry, then edit
    a third and ingest the note again: the unchanged sections keep their row and the
    decisions on it (the record states the tier and expiry it stated before). A record
    that states another tier or expiry than before still sets it; a document stored
    before its stated values were recorded is rewritten as it was."""
    note = tmp_path / "notes" / "plant.md"
    note.parent.mkdir()
    note.write_text("---\nexpires_at: 2999-01-01\n---\n\n" + "\n\n".join(SECTIONS) + "\n")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [note.parent])

    before = decisions(conn)
    assert len(before) == 3 and {tier for _, tier, _ in before.values()} == {1}
    brain_sql.archive(conn, [before["pumps"][0]])
    brain_sql.extend_expiry(conn, [before["valves"][0]], 30, now="2998-12-31 00:00:00")
    decided = decisions(conn)
    assert decided["pumps"][1] == 0 and decided["valves"][2] == "2999-01-31 00:00:00"

    note.write_text(note.read_text().replace("in spring", "in spring and autumn"))
    report = brain_sql.ingest(conn, [note.parent])
    assert report.documents_updated == 1
    after = decisions(conn)
    assert after["pumps"] == decided["pumps"] and after["valves"] == decided["valves"]
    assert after["fans"][0] != decided["fans"][0] and after["fans"][1:] == (1, "2999-01-01 00:00:00")
    assert brain_sql.check(conn) == {}

    # the record states another expiry: every section takes it, decided or not
    note.write_text(note.read_text().replace("2999-01-01", "2998-06-01"))
    brain_sql.ingest(conn, [note.parent])
    assert {expires for _, _, expires in decisions(conn).values()} == {"2998-06-01 00:00:00"}
    assert decisions(conn)["pumps"][1] == 0  # its tier, stated as before, keeps the archive

    # stated values not recorded (a brain written before they were): rewritten as before
    conn.execute("update documents set stated_fields = null")
    conn.commit()
    note.write_text(note.read_text().replace("on Mondays", "on Tuesdays"))
    brain_sql.ingest(conn, [note.parent])
    assert {tier for _, tier, _ in decisions(conn).values()} == {1}
    # what plain SQL may write there, JSON too deep for the parser among it (review 90, G2), is none
    for garbage, season in (
        ("[" * 3000 + "]" * 3000, "winter"),
        ("not json", "summer"),
        ('{"relevance_tier": [1]}', "fall"),
    ):
        pumps = decisions(conn)["pumps"][0]
        brain_sql.archive(conn, [pumps])
        conn.execute("update documents set stated_fields = ?", [garbage])
        conn.commit()
        note.write_text(re.sub(r"in spring and \w+", f"in spring and {season}", note.read_text()))
        report = brain_sql.ingest(conn, [note.parent])
        assert not report.errors and report.documents_updated == 1, report.errors
        assert decisions(conn)["pumps"] == (pumps, 1, "2998-06-01 00:00:00")  # kept, its tier the record's
    close_brain(conn)


def test_a_moved_note_or_record_keeps_the_decisions_on_it(tmp_path):
    """A note moved to another folder, or a record to another file, is removed and
    written anew; its archive and extended expiry were dropped, so an archived memory
    came back into recall without a word, where a flag was carried (review 105, M1).
    The copy keeps them, whichever of the two the run writes first."""
    vault, records = tmp_path / "vault", tmp_path / "records"
    (vault / "sub").mkdir(parents=True)
    records.mkdir()
    (vault / "a.md").write_text("---\ntitle: Old\n---\nThe old procedure for deploys on Fridays.\n")
    (vault / "b.md").write_text("---\ntitle: Keep\n---\nOther.\n")
    (records / "one.jsonl").write_text(
        '{"_id": "r", "text": "A record someone extended", "expires_at": "2030-01-01"}\n'
    )
    (records / "stay.jsonl").write_text('{"_id": "s", "text": "A record that stays"}\n')
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault, records])
    [[note]] = rows(conn, "select id from knowledge where title = 'Old'")
    [[record]] = rows(conn, "select id from knowledge where external_id = 'r'")
    brain_sql.archive(conn, [note])
    brain_sql.extend_expiry(conn, [record], 30, now="2029-12-31 00:00:00")

    (vault / "a.md").rename(vault / "sub" / "a.md")  # written during the run, its original removed at its end
    (records / "one.jsonl").rename(records / "z.jsonl")  # the same, for a record
    report = brain_sql.ingest(conn, [vault, records], prune=True)
    assert report.chunks_carried_decision == 2, report.summary()
    assert "2 keeping the review decision on the memory they replace" in report.summary()
    assert rows(
        conn, "select title, source_path like '%/sub/a.md', relevance_tier from knowledge where title = 'Old'"
    ) == [("Old", 1, 0)]
    assert rows(conn, "select expires_at, source_path like '%/z.jsonl' from knowledge where external_id = 'r'") == [
        ("2030-01-31 00:00:00", 1)
    ]
    # a record moved to a file the run reads after its original's file: removed first, then written
    (records / "z.jsonl").write_text('{"_id": "other", "text": "Something else"}\n')
    (records / "zz.jsonl").write_text('{"_id": "r", "text": "A record someone extended", "expires_at": "2030-01-01"}\n')
    report = brain_sql.ingest(conn, [records / "z.jsonl", records / "zz.jsonl"], prune_all=True)
    assert report.chunks_carried_decision == 1, report.summary()
    assert rows(conn, "select expires_at, source_path like '%/zz.jsonl' from knowledge where external_id = 'r'") == [
        ("2030-01-31 00:00:00", 1)
    ]
    # moved again, its record now stating another expiry: that is what it states, no copy's decision
    (records / "zz.jsonl").write_text('{"_id": "q", "text": "Something more"}\n')
    (records / "zzz.jsonl").write_text(
        '{"_id": "r", "text": "A record someone extended", "expires_at": "2031-01-01"}\n'
    )
    report = brain_sql.ingest(conn, [records / "zz.jsonl", records / "zzz.jsonl"], prune_all=True)
    assert report.chunks_carried_decision == 0, report.summary()
    assert rows(conn, "select expires_at from knowledge where external_id = 'r'") == [("2031-01-01 00:00:00",)]
    assert brain_sql.check(conn) == {}
    close_brain(conn)


def test_a_folders_only_note_moved_into_a_subfolder_is_pruned_with_its_decision(tmp_path):
    """The only note of a folder moved into a folder of it: the prune guard took it
    for a drive unmounted, refused, and advised --prune-all, which removed it in a
    second run and brought its archived copy back into recall (review 117, M1). A
    note found again unchanged is moved; one renamed, or gone, is still guarded."""
    project = tmp_path / "proj"
    project.mkdir()
    plan = "# Goals\n\nShip the ledger export by March.\n\n# Risks\n\nThe auditor is late.\n"
    (project / "plan.md").write_text(plan)
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [project])
    brain_sql.archive(conn, [i for (i,) in rows(conn, "select id from knowledge")])
    (project / "2026").mkdir()
    (project / "plan.md").rename(project / "2026" / "plan.md")
    report = brain_sql.ingest(conn, [project], prune=True)
    assert report.chunks_carried_decision == 2, report.summary()
    assert rows(conn, "select source_path like '%/2026/plan.md', relevance_tier from knowledge") == [(1, 0), (1, 0)]
    # renamed as it moves back: not found again, so the guard holds it as before
    (project / "2026" / "plan.md").rename(project / "plan-2026.md")
    (project / "2026").rmdir()
    with pytest.raises(brain_sql.PruneRefused, match="its one file is gone"):
        brain_sql.ingest(conn, [project], prune=True)
    assert rows(conn, "select count(*) from knowledge where source_path like '%/2026/plan.md'") == [(2,)]
    close_brain(conn)


def test_a_copy_stored_before_or_in_another_scope_is_no_move_to_the_prune_guard(tmp_path):
    """A folder emptied (a drive unmounted) whose note a backup folder holds a copy of,
    or whose note another scope holds too: the guard took the copy for the note moved,
    pruned it, and its archive was lost (review 119, H1 and H2); one copy showed two
    notes moved when they were under two PATHs of the command (review 120, M3)."""
    vault = tmp_path / "vault"
    plan = "# Goals\n\nShip the ledger export by March.\n"
    for folder in ("work", "backup", "other"):
        (vault / folder).mkdir(parents=True)
    (vault / "work" / "plan.md").write_text(plan)
    (vault / "backup" / "plan.md").write_text(plan)  # the same title and text, stored before the run
    (vault / "other" / "x.md").write_text("# X\n\nSomething else entirely, kept in place.\n")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    brain_sql.archive(conn, [i for (i,) in rows(conn, "select id from knowledge where source_path like '%work%'")])
    (vault / "work" / "plan.md").unlink()
    (vault / "other" / "plan.md").write_text("---\nscope: /personal\n---\n" + plan)  # written now, elsewhere
    with pytest.raises(brain_sql.PruneRefused, match="work"):
        brain_sql.ingest(conn, [vault], prune=True)
    assert rows(conn, "select relevance_tier from knowledge where source_path like '%work/plan.md'") == [(0,)]
    # both folders emptied, given as PATHs of their own, and one copy written: it shows one of them moved
    (vault / "backup" / "plan.md").unlink()
    (vault / "notes").mkdir()
    (vault / "notes" / "plan.md").write_text(plan)
    with pytest.raises(brain_sql.PruneRefused, match="backup"):
        brain_sql.ingest(conn, [vault / "work", vault / "backup", vault / "notes"], prune=True)
    assert sorted(
        rows(
            conn, "select scope, substr(source_path, -14), relevance_tier from knowledge where content like '%ledger%'"
        )
    ) == [("/", "/notes/plan.md", 0), ("/", "backup/plan.md", 1), ("/personal", "/other/plan.md", 1)]
    close_brain(conn)


@pytest.mark.parametrize("whole", [False, True])
def test_a_section_filled_in_where_it_is_gives_the_next_notes_copy_no_decision(tmp_path, whole):
    """An archived daily template: its Blockers (or every section) filled in where it
    is while the next day's note is made from the template. The new note's Blockers
    took the archive, read as the section moved out (review 118, H0), and filled in
    whole, as the note moved (review 119, H5): a note that stays is no move, and one
    rewritten whole with a text of its own is no swap."""
    vault = tmp_path / "vault"
    vault.mkdir()
    agenda = "## Agenda\n\nReview yesterday, plan today, raise anything blocking the release.\n\n"
    blockers = "## Blockers\n\nList anything that blocks you here, with who can unblock it.\n"
    (vault / "mon.md").write_text(agenda + blockers)
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    brain_sql.archive(conn, [i for (i,) in rows(conn, "select id from knowledge")])
    filled = "## Agenda\n\nDemo the ledger export to finance.\n\n" if whole else agenda
    (vault / "mon.md").write_text(filled + "## Blockers\n\nWaiting on the infra team for the credentials.\n")
    (vault / "tue.md").write_text(agenda + blockers)
    report = brain_sql.ingest(conn, [vault], prune_all=True)
    assert report.chunks_carried_decision == 0, report.summary()
    assert rows(conn, "select relevance_tier from knowledge where source_path like '%tue.md'") == [(1,), (1,)]
    assert rows(conn, "select heading_path, relevance_tier from knowledge where source_path like '%mon.md'") == [
        ("Agenda", 1 if whole else 0),
        ("Blockers", 1),
    ]
    close_brain(conn)


@pytest.mark.parametrize("from_another", ["cut from a note that stays", "shared with a note deleted", "merged"])
def test_a_template_filled_in_whole_with_another_notes_section_is_no_swap(tmp_path, from_another):
    """A template filled in whole while the next note is made from it, the filled note
    holding a section of another removed in the run too (cut from a note that stays,
    or the same as a deleted note's, or a deleted note's whole text): it was taken for
    a swap, and the new note took the template's archive (reviews 121, 122)."""
    vault = tmp_path / "vault"
    vault.mkdir()
    template = "## Agenda\n\nReview yesterday, plan today, raise anything blocking.\n\n## Notes\n\nWrite here.\n"
    vendors = "## Vendors\n\nAcme ships the racks on Thursday, Globex next month.\n"
    (vault / "mon.md").write_text(template)
    if from_another == "cut from a note that stays":
        (vault / "inbox.md").write_text("## Keep\n\nThe inbox note keeps this section.\n\n" + vendors)
    elif from_another == "merged":  # a note of one section, merged into the filled template and deleted
        (vault / "old.md").write_text(vendors)
    else:
        (vault / "old.md").write_text(vendors + "\n## Old\n\nAn old note's own section, long enough.\n")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    brain_sql.archive(conn, [i for (i,) in rows(conn, "select id from knowledge where source_path like '%mon.md'")])
    if from_another == "cut from a note that stays":
        (vault / "inbox.md").write_text("## Keep\n\nThe inbox note keeps this section.\n")
    else:
        (vault / "old.md").unlink()
    (vault / "mon.md").write_text("## Agenda\n\nDemo the export to finance.\n\n" + vendors)
    (vault / "tue.md").write_text(template)
    brain_sql.ingest(conn, [vault], prune_all=True)
    assert rows(conn, "select relevance_tier from knowledge where source_path like '%tue.md'") == [(1,), (1,)]
    close_brain(conn)


@pytest.mark.parametrize("tue", ["written over", "moved away first", "short", "short section"])
def test_a_template_written_over_another_note_is_no_swap(tmp_path, tue):
    """An archived template filled in while its text is written over an existing
    note (whose own text is gone, or moved to another file): the existing note was
    in the run's replaced notes, and the two read as a swap (review 123, H1). Or the
    template reset to a short text another note deleted in the run held (M1). Or the
    existing note's whole text a short section the filled template holds, which closed
    a "cycle" with it (review 124)."""
    vault = tmp_path / "vault"
    vault.mkdir()
    template = "## Agenda\n\nReview yesterday, plan today, raise anything blocking.\n\n## Blockers\n\nList them.\n"
    (vault / "mon.md").write_text(template)
    (vault / ("old.md" if tue == "short" else "tue.md")).write_text(
        "No blockers.\n" if tue == "short" else "## Notes\n\nLast week we shipped the ledger export.\n"
    )
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    brain_sql.archive(conn, [i for (i,) in rows(conn, "select id from knowledge where source_path like '%mon.md'")])
    if tue == "short":
        (vault / "old.md").unlink()
        (vault / "mon.md").write_text("No blockers.\n")
    elif tue == "short section":
        (vault / "tue.md").write_text("## Blockers\n\nNone.\n")
        brain_sql.ingest(conn, [vault])
        (vault / "mon.md").write_text("## Agenda\n\nDemo the export at ten.\n\n## Blockers\n\nNone.\n")
    else:
        (vault / "mon.md").write_text("## Agenda\n\nDemo the export at ten.\n\n## Blockers\n\nWaiting on ops.\n")
    if tue == "moved away first":
        (vault / "archive").mkdir()
        (vault / "tue.md").rename(vault / "archive" / "tue-old.md")
    (vault / "tue.md").write_text(template)
    report = brain_sql.ingest(conn, [vault], prune_all=True)
    assert report.chunks_carried_decision == 0, report.summary()
    assert rows(conn, "select relevance_tier from knowledge where source_path like '%/tue.md'") == [(1,), (1,)]
    close_brain(conn)


def test_notes_rotated_keep_their_decisions_and_a_chain_ending_at_a_new_note_gives_its_first_none(tmp_path):
    """Thirty archived notes rotated in one run (each takes the one before's text, the
    first the last's) keep every archive: a cycle of notes replaced whole, found in
    one pass (review 124: a search from each took minutes for thousands). Shifted
    instead, the first given a new note's text, the first's old text loses its
    archive: a note renamed while a new one is written at its path, as documented."""
    vault = tmp_path / "vault"
    vault.mkdir()
    texts = [f"## Log {i}\n\nThe log of day {i}, long enough to be a copy of itself.\n" for i in range(30)]
    for i, text in enumerate(texts):
        (vault / f"log{i}.md").write_text(text)
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    brain_sql.archive(conn, [i for (i,) in rows(conn, "select id from knowledge")])
    for i in range(30):
        (vault / f"log{i}.md").write_text(texts[i - 1])
    report = brain_sql.ingest(conn, [vault])
    assert report.chunks_carried_decision == 30, report.summary()
    for i in range(30):
        (vault / f"log{i}.md").write_text(texts[i - 2] if i else "## New\n\nToday's log, not reviewed by anyone.\n")
    brain_sql.ingest(conn, [vault])
    tiers = {Path(path).name: tier for path, tier in rows(conn, "select source_path, relevance_tier from knowledge")}
    assert tiers.pop("log1.md") == 1 and tiers.pop("log0.md") == 1  # log0's old text, and the new note
    assert set(tiers.values()) == {0}
    close_brain(conn)


def test_memories_alike_but_for_their_decisions_carry_none_when_moved(tmp_path):
    """Two notes of one text, one archived, both renamed in one run: both copies came
    back archived, so the note never archived left recall without a word (review
    107, H3). What cannot be told apart carries no decision."""
    vault = tmp_path / "vault"
    vault.mkdir()
    for name in ("a", "b"):
        (vault / f"{name}.md").write_text("The same paragraph in two notes, word for word.\n")
    (vault / "c.md").write_text("Another note.\n")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    [[archived]] = rows(conn, "select id from knowledge where source_path like '%/a.md'")
    brain_sql.archive(conn, [archived])
    for name in ("a", "b"):
        (vault / f"{name}.md").rename(vault / f"{name}2.md")
    report = brain_sql.ingest(conn, [vault], prune=True)
    assert report.chunks_carried_decision == 0, report.summary()
    assert rows(conn, "select relevance_tier from knowledge where source_path like '%2.md'") == [(1,), (1,)]
    close_brain(conn)


def test_a_note_whose_line_ends_alone_change_keeps_the_decisions_on_it(tmp_path):
    """A note written with CRLF was stored with LF before 7 December 2026; its next
    ingest writes it again as written, and dropped an archive or an extended expiry on
    it: it came back into recall (review 107, H4). A change of line ends alone (an
    editor's setting, too) keeps them; an edit does not."""
    vault = tmp_path / "vault"
    vault.mkdir()
    note = vault / "win.md"  # a long page, of many chunks (review 108, H4: only a one-chunk note kept them)
    note.write_bytes(b"# Old note\n\nA Windows paragraph about deploys.\n\n" + (DOCS / "ingest.md").read_bytes())
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    ids = [row[0] for row in rows(conn, "select id from knowledge")]
    assert len(ids) > 10
    brain_sql.archive(conn, ids)
    brain_sql.extend_expiry(conn, ids, 30, now="2030-01-01 00:00:00")
    note.write_bytes(note.read_bytes().replace(b"\n", b"\r\n"))
    report = brain_sql.ingest(conn, [vault])
    written = [row[0] for row in rows(conn, "select count(*) from knowledge where content like '%' || char(13) || '%'")]
    assert report.chunks_carried_decision == written[0] > 10, report.summary()
    assert rows(conn, "select distinct relevance_tier, expires_at from knowledge") == [(0, "2030-01-31 00:00:00")]
    note.write_bytes(note.read_bytes().replace(b"about deploys", b"about releases"))  # an edit: another memory
    report = brain_sql.ingest(conn, [vault])
    assert report.chunks_carried_decision == 0
    assert rows(conn, "select relevance_tier, expires_at from knowledge where content like '%releases%'") == [(1, None)]
    assert brain_sql.check(conn) == {}
    close_brain(conn)


def test_a_copy_written_between_two_removals_takes_no_decision_the_second_makes_ambiguous(tmp_path):
    """Two records of one text in two files, one archived, both given new _ids: the
    copy written in a batch after the archived one's removal and before the other's
    took the archive, and left recall (review 108, H5). Decisions go to copies at
    the end of the run, when every removal is known."""
    folder = tmp_path / "records"
    folder.mkdir()
    text = "Shared paragraph P about the billing escalation path."

    def files(a, b):
        (folder / "a.jsonl").write_text(json.dumps({"_id": a, "text": text}) + "\n")
        fillers = "".join(json.dumps({"_id": f"f{i}", "text": f"Filler record {i}."}) + "\n" for i in range(2100))
        (folder / "b.jsonl").write_text(json.dumps({"_id": b, "text": text}) + "\n" + fillers)

    files("a1", "b1")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [folder])
    [[archived]] = rows(conn, "select id from knowledge where external_id = 'a1'")
    brain_sql.archive(conn, [archived])
    files("a2", "b2")
    report = brain_sql.ingest(conn, [folder], prune_all=True)
    assert report.chunks_carried_decision == 0, report.summary()
    assert rows(
        conn, "select external_id, relevance_tier from knowledge where external_id in ('a2', 'b2') order by 1"
    ) == [
        ("a2", 1),
        ("b2", 1),
    ]
    close_brain(conn)


def test_a_record_without_an_id_keeps_its_decision_moved_and_a_new_one_saying_the_same_takes_none(tmp_path):
    """A record without an _id is its text and fields: moved to another file it keeps
    the decision on it, but a log's new line saying what an archived line said, on
    another day or from another source, is another memory, and was written archived
    (review 127, M2)."""
    folder = tmp_path / "records"
    folder.mkdir()
    said = "Nightly backup completed successfully on the NAS volume."
    line = {"text": said, "observed_at": "2026-12-05"}
    other = json.dumps({"text": "Disk usage at 71 percent on the NAS volume.", "observed_at": "2026-12-05"})
    (folder / "log.jsonl").write_text(json.dumps(line) + "\n" + other + "\n")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [folder])
    brain_sql.archive(conn, [row[0] for row in rows(conn, "select id from knowledge where content = ?", [said])])
    for change in ({"observed_at": "2026-12-06"}, {"source": "cron"}):
        (folder / "log.jsonl").write_text(other + "\n" + json.dumps({**line, **change}) + "\n")
        report = brain_sql.ingest(conn, [folder])
        assert report.chunks_carried_decision == 0, (change, report.summary())
        assert rows(conn, "select relevance_tier from knowledge where content = ?", [said]) == [(1,)], change
        (folder / "log.jsonl").write_text(json.dumps(line) + "\n" + other + "\n")  # the archived line back
        brain_sql.ingest(conn, [folder])
        brain_sql.archive(conn, [row[0] for row in rows(conn, "select id from knowledge where content = ?", [said])])
    (folder / "log.jsonl").write_text(other + "\n")
    (folder / "moved.jsonl").write_text(json.dumps(line) + "\n")
    report = brain_sql.ingest(conn, [folder])
    assert report.chunks_carried_decision == 1, report.summary()
    # a turn said again is stored as its saying's second (~2): moved alone, it is the same record (review 128)
    said_twice = "Sounds good, let's ship the release on Friday then."
    turns = ["What is the plan for the release?", said_twice, "Is Friday fine for QA too?", said_twice]
    chat = [json.dumps({"speaker": "user", "session_id": "s1", "text": text}) for text in turns]
    (folder / "chat.jsonl").write_text("\n".join(chat) + "\n")
    brain_sql.ingest(conn, [folder])
    [second] = rows(conn, "select id from knowledge where content = ? and document_id like '%~2'", [said_twice])
    brain_sql.archive(conn, list(second))
    (folder / "chat.jsonl").write_text("\n".join(chat[:3]) + "\n")
    (folder / "chat-2.jsonl").write_text(chat[3] + "\n")
    assert brain_sql.ingest(conn, [folder]).chunks_carried_decision == 1
    assert rows(conn, "select relevance_tier from knowledge where source_path like '%chat-2.jsonl'") == [(0,)]
    assert rows(
        conn, "select relevance_tier, source_path like '%moved.jsonl' from knowledge where content = ?", [said]
    ) == [(0, 1)]
    close_brain(conn)


def test_a_moved_record_of_many_chunks_keeps_the_decision_on_each(tmp_path):
    """Every chunk of a record shares its _id: the rule that a decision goes to a sole
    copy counted them as several copies, and a long archived record moved to another
    file came back into recall (review 109, H2)."""
    folder = tmp_path / "records"
    folder.mkdir()
    text = " ".join(f"Sentence {i} of the long archived record about billing escalation." for i in range(80))
    (folder / "old.jsonl").write_text(
        json.dumps({"_id": "long", "text": text}) + "\n" + '{"_id": "k", "text": "Kept."}\n'
    )
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [folder])
    ids = [row[0] for row in rows(conn, "select id from knowledge where external_id = 'long'")]
    assert len(ids) == 3
    brain_sql.archive(conn, ids)
    (folder / "new.jsonl").write_text(json.dumps({"_id": "long", "text": text}) + "\n")
    (folder / "old.jsonl").write_text('{"_id": "k", "text": "Kept."}\n')
    report = brain_sql.ingest(conn, [folder])
    assert report.chunks_carried_decision == 3, report.summary()
    assert rows(conn, "select distinct relevance_tier from knowledge where external_id = 'long'") == [(0,)]
    close_brain(conn)


def test_an_id_two_new_documents_give_is_no_ones_copy(tmp_path):
    """An archived record removed, and two files each adding a record of its _id with
    other texts: both were archived (review 110, H2). An _id is a sole copy's when
    one new document gives it."""
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "old.jsonl").write_text('{"_id": "X", "text": "The archived note about the old path."}\n')
    (folder / "keep.jsonl").write_text('{"_id": "k", "text": "Kept."}\n')
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [folder])
    [[archived]] = rows(conn, "select id from knowledge where external_id = 'X'")
    brain_sql.archive(conn, [archived])
    (folder / "old.jsonl").unlink()
    (folder / "a.jsonl").write_text('{"_id": "X", "text": "Team A: the new on-call rota."}\n')
    (folder / "b.jsonl").write_text('{"_id": "X", "text": "Team B: the office wifi."}\n')
    report = brain_sql.ingest(conn, [folder], prune=True)
    assert report.chunks_carried_decision == 0, report.summary()
    assert rows(conn, "select distinct relevance_tier from knowledge where external_id = 'X'") == [(1,)]
    close_brain(conn)


def test_a_decided_text_moved_into_a_stored_document_keeps_its_decision(tmp_path):
    """Two notes swapped (one with a section added too), or one renamed over another's
    path, or moved and saved with other line ends: its archive was dropped (only
    documents new to the brain, written with the same line ends, were looked at:
    review 111, H3 and M2; review 120, M2)."""
    vault = tmp_path / "vault"
    vault.mkdir()
    alpha = "# Alpha\n\nAlpha note about the quarterly budget review and its owners.\n"
    beta = "# Beta\n\nBeta note about the onboarding checklist for new engineers.\n"
    (vault / "a.md").write_text(alpha)
    (vault / "b.md").write_text(beta)
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])

    def archive_alpha():
        [[alpha_id]] = rows(conn, "select id from knowledge where content like '%Alpha note%'")
        brain_sql.archive(conn, [alpha_id])

    def tiers():
        return rows(conn, "select substr(content, 3, 5), relevance_tier, source_path like '%/b.md' from knowledge")

    archive_alpha()
    (vault / "a.md").write_text(beta + "\n# Added\n\nA section added to Beta as the two swapped.\n")
    (vault / "b.md").write_text(alpha)
    report = brain_sql.ingest(conn, [vault])  # a swap, one side with a section added (review 120, M2)
    assert report.chunks_carried_decision == 1, report.summary()
    assert sorted(tiers()) == [("Added", 1, 0), ("Alpha", 0, 1), ("Beta\n", 1, 0)]
    (vault / "a.md").write_text(beta)
    brain_sql.ingest(conn, [vault])
    (vault / "a.md").write_text("Call Bob at 3.\n")
    brain_sql.ingest(conn, [vault])
    (vault / "a.md").write_text(alpha)  # a swap with a note shorter than 20 characters (review 122)
    (vault / "b.md").write_text("Call Bob at 3.\n")
    report = brain_sql.ingest(conn, [vault])
    assert report.chunks_carried_decision == 1, report.summary()
    (vault / "b.md").write_text(beta)
    brain_sql.ingest(conn, [vault])
    (vault / "a.md").rename(vault / "c.md")  # a moved on, b moved over it: mv a c; mv b a (review 122)
    (vault / "b.md").rename(vault / "a.md")
    report = brain_sql.ingest(conn, [vault], prune=True)
    assert report.chunks_carried_decision == 1, report.summary()
    assert rows(conn, "select substr(source_path, -4), relevance_tier from knowledge where content like '%Alpha%'") == [
        ("c.md", 0)
    ]
    (vault / "c.md").rename(vault / "b.md")
    brain_sql.ingest(conn, [vault], prune=True)
    (vault / "b.md").replace(vault / "a.md")  # Alpha renamed over Beta's path
    report = brain_sql.ingest(conn, [vault], prune=True)
    assert report.chunks_carried_decision == 1, report.summary()
    assert tiers() == [("Alpha", 0, 0)]
    (vault / "sub").mkdir()
    (vault / "sub" / "c.md").write_bytes(alpha.replace("\n", "\r\n").encode())  # moved, and saved with CRLF
    (vault / "a.md").unlink()
    report = brain_sql.ingest(conn, [vault], prune_all=True)  # its one memory's file gone: a prune would ask
    assert report.chunks_carried_decision == 1, report.summary()
    assert rows(conn, "select relevance_tier from knowledge") == [(0,)]
    assert brain_sql.check(conn) == {}
    close_brain(conn)


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_only_an_unedited_copy_of_a_decided_memory_takes_its_decision(tmp_path, line_end):
    """A decision goes to a copy: the record of the same _id with the same text, or a
    note of the same text. An archived record removed while another file held it
    edited and a new record of its old text archived both (review 111, H4); an edited
    record moved took it where the same edit in place did not (M3); a deleted
    "No blockers." gave its archive to the next standup's (M1), and did so saved with
    CRLF, its line end counted twice against the 20 characters (review 118, L1)."""
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"_id": "r1", "text": "Deploys happen on Tuesdays after the change board."}\n')
    standup = "---\ntitle: Standup {}\n---\nNo blockers.\nAll ok\n"  # 19 characters
    (folder / "standup-1.md").write_bytes(standup.format("2 March").replace("\n", line_end).encode())
    (folder / "keep.jsonl").write_text('{"_id": "k", "text": "A record that stays in its file."}\n')
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [folder])
    brain_sql.archive(conn, [row[0] for row in rows(conn, "select id from knowledge where external_id is not 'k'")])
    assert rows(conn, "select count(*) from knowledge where relevance_tier = 0") == [(2,)]  # the record, the note
    (folder / "a.jsonl").unlink()
    (folder / "standup-1.md").unlink()
    (folder / "b.jsonl").write_text(
        '{"_id": "r1", "text": "Deploys happen on Thursdays now, the board said."}\n'
        '{"_id": "r2", "text": "Deploys happen on Tuesdays after the change board."}\n'
    )
    (folder / "standup-2.md").write_bytes(standup.format("9 March").replace("\n", line_end).encode())
    report = brain_sql.ingest(conn, [folder], prune=True)
    assert report.chunks_carried_decision == 0, report.summary()
    assert rows(conn, "select distinct relevance_tier from knowledge") == [(1,)]
    close_brain(conn)


def test_a_removal_taken_back_gives_no_copy_its_decision(tmp_path):
    """A note edited so its write fails (here a trigger someone added refuses it) is
    taken back whole, its archived section still stored: a new note of that
    section's text is a memory of its own, not a copy taking the archive."""
    vault = tmp_path / "vault"
    vault.mkdir()
    section = "The archived paragraph about the old deploy freeze rules."
    (vault / "a.md").write_text(f"# A\n\n{section}\n")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    [[archived]] = rows(conn, "select id from knowledge")
    brain_sql.archive(conn, [archived])
    conn.execute(
        "create trigger refuse before insert on knowledge when new.content like '%REFUSED%' "
        "begin select raise(abort, 'refused by a trigger'); end"
    )
    conn.commit()
    (vault / "a.md").write_text("# A\n\nREFUSED: the note rewritten.\n")
    (vault / "b.md").write_text(f"# A\n\n{section}\n")
    report = brain_sql.ingest(conn, [vault])
    assert [error.path.endswith("a.md") for error in report.errors] == [True], report.errors
    assert report.chunks_carried_decision == 0, report.summary()
    assert rows(conn, "select source_path like '%/b.md', relevance_tier from knowledge order by id") == [
        (0, 0),
        (1, 1),
    ]
    close_brain(conn)


def test_a_note_written_with_the_text_of_one_whose_write_failed_took_no_move(tmp_path):
    """An archived note renamed while another's text is copied to its path, that
    other note's own write failing in the run: its old text, taken back, still
    stored, was counted as removed whole, so the archived note seemed to have taken
    a note moved over it and gave its archive to its renamed copy (review 126). A
    note renamed while a new one is written at its path gives none."""
    vault = tmp_path / "vault"
    vault.mkdir()
    archived, other = "# D\n\nThe archived note about the old deploy freeze.\n", "# F\n\nThe note about the new rota.\n"
    (vault / "d.md").write_text(archived)
    (vault / "f.md").write_text(other)
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    brain_sql.archive(conn, [i for (i,) in rows(conn, "select id from knowledge where source_path like '%/d.md'")])
    conn.execute(
        "create trigger refuse before insert on knowledge when new.content like '%REFUSED%' "
        "begin select raise(abort, 'refused by a trigger'); end"
    )
    conn.commit()
    (vault / "f.md").write_text("# F\n\nREFUSED: the note rewritten.\n")
    (vault / "d.md").write_text(other)
    (vault / "n.md").write_text(archived)
    report = brain_sql.ingest(conn, [vault])
    assert [error.path.endswith("f.md") for error in report.errors] == [True], report.errors
    assert report.chunks_carried_decision == 0, report.summary()
    assert rows(conn, "select relevance_tier from knowledge where source_path like '%/n.md'") == [(1,)]
    close_brain(conn)


def test_a_section_takes_a_decision_as_part_of_its_notes_copy(tmp_path):
    """A deleted standup's archived "No blockers" section gave its archive to the next
    standup's same section (review 113, H3), and a README's License section to
    another folder's README, titled alike by its file's name (review 114, H2): a
    note's section is a copy when its note holds every section removed from the
    original (moved, renamed); a note moved and edited is another memory."""
    vault = tmp_path / "vault"
    (vault / "alpha").mkdir(parents=True)
    blockers = "# Blockers\n\nNo blockers, the release train is on time.\n"
    license = "# License\n\nReleased under the MIT license, see the LICENSE file.\n"
    (vault / "standup-1.md").write_text(f"# Yesterday\n\nWired the billing export to the ledger.\n\n{blockers}")
    (vault / "alpha" / "README.md").write_text(f"# Alpha\n\nThe alpha service.\n\n{license}")
    (vault / "plan.md").write_text("# Goals\n\nShip the ledger export by March.\n\n# Risks\n\nThe auditor is late.\n")
    (vault / "keep.md").write_text("# Keep\n\nA note that stays where it is, about the kitchen rota.\n")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    brain_sql.archive(
        conn, [row[0] for row in rows(conn, "select id from knowledge where source_path not like '%keep.md'")]
    )
    (vault / "standup-1.md").unlink()
    (vault / "standup-2.md").write_text(f"# Yesterday\n\nShipped the onboarding emails.\n\n{blockers}")
    (vault / "alpha" / "README.md").unlink()
    (vault / "alpha").rmdir()
    (vault / "beta").mkdir()
    (vault / "beta" / "README.md").write_text(f"# Beta\n\nThe beta service.\n\n{license}")
    (vault / "sub").mkdir()
    (vault / "sub" / "plan.md").write_text((vault / "plan.md").read_text())  # moved as it was
    (vault / "plan.md").unlink()
    report = brain_sql.ingest(conn, [vault], prune=True)
    assert report.chunks_carried_decision == 2, report.summary()
    tiers = (
        "select substr(content, 3, 5), relevance_tier from knowledge where source_path not like '%keep.md' order by id"
    )
    assert sorted(rows(conn, tiers)) == [
        ("Beta\n", 1),
        ("Block", 1),  # the next standup's
        ("Goals", 0),  # its note moved whole
        ("Licen", 1),  # another folder's README, never reviewed
        ("Risks", 0),
        ("Yeste", 1),
    ]
    (vault / "sub" / "plan.md").write_text("# Goals\n\nShip the ledger export by March.\n\n# Risks\n\nNone left.\n")
    (vault / "sub" / "plan.md").rename(vault / "plan.md")  # moved back, and edited: another memory
    (vault / "sub").rmdir()
    report = brain_sql.ingest(conn, [vault], prune=True)
    assert report.chunks_carried_decision == 0, report.summary()
    close_brain(conn)


def test_a_note_renamed_or_split_keeps_the_decisions_on_its_sections(tmp_path):
    """A note whose one section's text it holds twice, archived and renamed, lost both
    archives: two copies of one text read as a copy too many (review 115, H2). A note
    split into two with the original deleted lost its archived section's decision,
    where the same split keeping the original kept it (review 115, M3)."""
    vault = tmp_path / "vault"
    vault.mkdir()
    attendees = "## Attendees\n\nDana Whitfield, Lee Park and the platform team.\n"
    (vault / "meetings.md").write_text(
        f"# Monday sync\n\nWe agreed to move the Atlas tables.\n\n{attendees}\n"
        f"# Tuesday sync\n\nThe cert rotation is done.\n\n{attendees}"
    )
    (vault / "ledger.md").write_text(
        "# Decisions\n\nWe chose Postgres over MySQL for the ledger.\n\n# Open questions\n\nWho owns the nightly run?\n"
    )
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    archived = "select id from knowledge where source_path like '%meetings.md' or content like '%Postgres%'"
    brain_sql.archive(conn, [row[0] for row in rows(conn, archived)])
    (vault / "meetings.md").rename(vault / "meetings-week49.md")
    text = (vault / "ledger.md").read_text()
    (vault / "ledger-decisions.md").write_text(text[: text.index("# Open")])
    (vault / "ledger-questions.md").write_text(text[text.index("# Open") :])
    (vault / "ledger.md").unlink()
    report = brain_sql.ingest(conn, [vault], prune_all=True)  # both files gone: a prune would ask
    assert report.chunks_carried_decision == 5, report.summary()
    assert sorted(rows(conn, "select substr(content, 1, 12), relevance_tier from knowledge")) == [
        ("# Decisions\n", 0),
        ("# Monday syn", 0),
        ("# Open quest", 1),
        ("# Tuesday sy", 0),
        ("## Attendees", 0),
        ("## Attendees", 0),
    ]
    close_brain(conn)


def test_a_shared_section_takes_no_decision_when_only_one_of_its_notes_moved(tmp_path):
    """Two standups ending in the same archived Blockers section: one moved, the other
    deleted and a new one holding that section. The new note's section took the
    archive, the moved note vouching for both copies (review 116, H1). Which copy is
    whose cannot be told: neither takes it."""
    vault = tmp_path / "vault"
    vault.mkdir()
    blockers = "## Blockers\n\nNone this week; waiting on the auditor.\n"
    (vault / "mon.md").write_text(f"# Monday standup\n\nShipped the importer rewrite.\n\n{blockers}")
    (vault / "tue.md").write_text(f"# Tuesday standup\n\nFixed the nightly export.\n\n{blockers}")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    brain_sql.archive(
        conn, [row[0] for row in rows(conn, "select id from knowledge where content like '## Blockers%'")]
    )
    (vault / "archive").mkdir()
    (vault / "mon.md").rename(vault / "archive" / "mon.md")
    (vault / "tue.md").unlink()
    (vault / "wed.md").write_text(f"# Wednesday standup\n\nStarted on the export.\n\n{blockers}")
    brain_sql.ingest(conn, [vault], prune_all=True)
    assert rows(conn, "select relevance_tier from knowledge where source_path like '%wed.md' order by id") == [
        (1,),
        (1,),
    ]
    close_brain(conn)


def test_a_section_written_again_only_for_another_note_vouches_for_none(tmp_path):
    """An archived template (Agenda, Blockers) deleted, while a note holding the same
    Agenda moved and a new note holds the Blockers: the moved note's Agenda stood in
    for the template's, and the new note's Blockers took the archive (review 117,
    H1). A section is written again when the run wrote as many copies as it removed."""
    vault = tmp_path / "vault"
    vault.mkdir()
    agenda = "## Agenda\n\nReview yesterday, plan today, raise blockers.\n"
    blockers = "## Blockers\n\nNone this week; waiting on the auditor.\n"
    (vault / "tue.md").write_text(f"{agenda}\n{blockers}")
    (vault / "mon.md").write_text(f"{agenda}\n## Done\n\nMonday: shipped the importer rewrite.\n")
    conn = brain_sql.connect(tmp_path / "brain.db", model_id=brain_sql.DEFAULT_MODEL)
    brain_sql.ingest(conn, [vault])
    brain_sql.archive(conn, [row[0] for row in rows(conn, "select id from knowledge where source_path like '%tue.md'")])
    (vault / "tue.md").unlink()
    (vault / "archive").mkdir()
    (vault / "mon.md").rename(vault / "archive" / "mon.md")
    (vault / "wed.md").write_text(f"## Done\n\nWednesday: started the export.\n\n{blockers}")
    brain_sql.ingest(conn, [vault], prune_all=True)
    assert rows(conn, "select distinct relevance_tier from knowledge") == [(1,)]
    close_brain(conn)
