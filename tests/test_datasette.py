"""Datasette integration: metadata.yml, the canned recall query, the decay facet,
the decayed review JSON, and links from menus and actions."""

import shutil
import sys
from pathlib import Path

import pytest
import yaml
from datasette.app import Datasette
from markupsafe import escape

import brain_sql
from brain_sql.connection import sqlite3

from .conftest import copy_brain, warmed

METADATA = yaml.safe_load((Path(__file__).parent.parent / "metadata.yml").read_text())


@pytest.fixture(scope="module")
def demo(vault_brain_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    records = [
        {
            "_id": "gone",
            "title": "Old rota",
            "text": "The 2024 pager rota.",
            "expires_at": "2025-01-01",
            "class": "policy",
        },
        {"_id": "soon", "title": "Trial", "text": "The trial licence.", "expires_at": "2999-01-01"},
        {"_id": "archived", "title": "Archived", "text": "Kept for the record.", "relevance_tier": 0},
    ]
    return copy_brain(vault_brain_path, folder / "demo.db", records)


@pytest.mark.asyncio
async def test_metadata_titles_facets_and_search(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    table = (await datasette.client.get("/demo/knowledge.json?_shape=objects&_extra=facet_results")).json()
    assert {"class", "scope", "source", "domain", "decay"} <= set(table["facet_results"])
    decay = {r["value"]: r["count"] for r in table["facet_results"]["decay"]["results"]}
    assert decay["expired"] >= 1 and decay["archived"] >= 1 and decay["live"] > 1  # an archived memory is not live
    assert sum(decay.values()) == table["filtered_table_rows_count"]
    page = (await datasette.client.get("/demo/knowledge")).text
    assert "Memories" in page and 'name="_search"' in page
    found = (await datasette.client.get("/demo/knowledge.json?_search=reciprocal&_shape=objects")).json()
    assert [row["title"] for row in found["rows"]] == ["Recall"]


@pytest.mark.asyncio
@pytest.mark.parametrize("q", ["\0", "\0 \0"])
async def test_canned_recall_and_the_api_name_a_nul_in_the_query(demo, q, capsys):
    """SQLite reads text up to a NUL, Python past it ("Melanie\\0pottery" asked the SQL
    recall "Melanie" and the API "Melanie pottery", review 63): both say the NUL is
    the problem, and nothing raises (brain_ppr once did, with a traceback in the log);
    plain SQL given one reads an empty query and recalls nothing."""
    datasette = Datasette([str(demo)], metadata=METADATA)
    canned = await datasette.client.get("/demo/recall.json", params={"q": q, "_shape": "array"})
    api = await datasette.client.get("/demo/-/recall", params={"q": q})
    for answer in (canned, api):
        assert answer.status_code == 400 and "q must not hold a NUL character" in answer.text, answer.text
    assert "Traceback" not in capsys.readouterr().err
    params = {"q": q, "k": 5, **{name: "" for name in ("scope", "classes", "sources", "domain", "since", "until")}}
    with brain_sql.connect(demo) as conn:
        assert conn.execute(brain_sql.RECALL_SQL, {**params, "as_of": ""}).fetchall() == []


@pytest.mark.asyncio
async def test_decay_filter_selects_a_bucket(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    expired = (await datasette.client.get("/demo/knowledge.json?_decay=expired&_shape=objects")).json()
    assert "gone" in [row["external_id"] for row in expired["rows"]]
    archived = (await datasette.client.get("/demo/knowledge.json?_decay=archived&_shape=objects")).json()
    assert "archived" in [row["external_id"] for row in archived["rows"]]
    assert all(row["relevance_tier"] == 0 for row in archived["rows"])
    nothing = (await datasette.client.get("/demo/knowledge.json?_decay=someday&_shape=objects")).json()
    assert nothing["rows"] == []


@pytest.mark.asyncio
async def test_canned_recall_query_matches_the_api(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    params = {
        "q": "what does the graph leg do",
        "k": "5",
        "scope": "",
        "classes": "",
        "sources": "",
        "domain": "",
        "since": "",
        "until": "",
        "as_of": "",
        "_shape": "array",
    }
    canned = await datasette.client.get("/demo/recall.json", params=params)
    assert canned.status_code == 200, canned.text
    api = await datasette.client.post("/demo/-/recall", json={"q": "what does the graph leg do", "k": 5, "prf": False})
    assert [row["id"] for row in canned.json()] == [hit["id"] for hit in api.json()["hits"]]
    empty = await datasette.client.get("/demo/recall")
    assert empty.status_code == 200


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "params, named",
    [
        ({"since": "notadate"}, 'since "notadate" is not a date'),
        ({"as_of": "yesterday"}, 'as_of "yesterday" is not a date'),
        ({"scope": "acme"}, "scope must be a path starting with '/'"),
        ({"classes": "memory,bogus"}, "classes must be among memory, reference, policy, not bogus"),
        ({"k": "abc"}, "k must be a whole number"),
        ({"k": "-3"}, "k must be from 1 to 100, not -3"),  # not every row
        ({"k": "1234567890"}, "k must be from 1 to 100, not 1234567890"),  # as the CLI says it
        ({"k": "9" * 19}, "k must be from 1 to 100, not 9999999999999999999"),
        ({"k": "9" * 101}, "k must be a whole number"),  # no field takes one so large
        ({"since": "2021-01-01", "until": "2020-01-01"}, "until (2020-01-01 00:00:00) must be later than since"),
    ],
)
async def test_the_canned_recall_query_names_a_bad_parameter(demo, params, named, monkeypatch, capsys):
    """SQLite says of a brain_* function's error only that it raised one, and Datasette
    logs that function's traceback: the parameters are read before SQLite runs the
    query, and its 400 names the one at fault, in its JSON and on its page, as the
    JSON API would, with no traceback in the server's log; whoever may not run it
    still gets Datasette's 403."""
    unraisable = []  # where Datasette's enable_callback_tracebacks sends a SQL function's exception
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    datasette = Datasette([str(demo)], metadata=METADATA)
    for shape in ({}, {"_shape": "array"}):
        answer = await datasette.client.get("/demo/recall.json", params={"q": "graph leg", **params, **shape})
        assert answer.status_code == 400 and named in answer.json()["error"], answer.text[:300]
    page = await datasette.client.get("/demo/recall", params={"q": "graph leg", **params})
    assert page.status_code == 400 and escape(named) in page.text
    private = Datasette([str(demo)], metadata={"databases": {"demo": {"tables": {"knowledge": {"allow": False}}}}})
    refused = await private.client.get("/demo/recall.json", params={"q": "graph leg", **params})
    assert refused.status_code == 403 and named not in refused.text
    logged = capsys.readouterr()
    assert not unraisable and "Traceback" not in logged.err + logged.out, [u.exc_value for u in unraisable]


@pytest.mark.asyncio
async def test_the_canned_recall_query_cut_by_the_time_limit_is_a_503(demo):
    """The recall query is the plugin's own: Datasette's SQL time limit stopping it
    (Datasette answered 400, at times in SQLite's words "expected 0 columns for ''")
    is a server-side failure, a 503 with Retry-After that says what to do, on its page
    and in its JSON; a bad parameter is still the caller's 400, and so is a limit the
    caller set with _timelimit."""
    hurried = Datasette([str(demo)], metadata=METADATA, settings={"sql_time_limit_ms": 1})
    for path in ("/demo/recall.json", "/demo/recall"):
        cut = await hurried.client.get(path, params={"q": "what does the graph leg do"})
        assert cut.status_code == 503 and cut.headers["Retry-After"], cut.text[:300]
        assert "sql_time_limit_ms" in cut.text and "/-/recall" in cut.text
    named = await hurried.client.get("/demo/recall.json", params={"q": "graph leg", "k": "abc"})
    assert named.status_code == 400 and named.json()["error"] == "k must be a whole number"
    datasette = await warmed(Datasette([str(demo)], metadata=METADATA))  # else its first recall may pass 1 s
    assert (await datasette.client.get("/demo/recall.json", params={"q": "graph leg"})).status_code == 200
    own = await datasette.client.get("/demo/recall.json", params={"q": "graph leg", "_timelimit": "1"})
    assert own.status_code == 400 and "Retry-After" not in own.headers
    for limit in (2, 4, 8):  # cut wherever it lands, sqlite-vec's words too ("Could not filter metadata fields")
        cut = Datasette([str(demo)], metadata=METADATA, settings={"sql_time_limit_ms": limit})
        for i in range(6):
            answer = await cut.client.get("/demo/recall.json", params={"q": f"graph leg walk {i}"})
            assert answer.status_code in (200, 503), (limit, answer.status_code, answer.text[:300])
    # its CSV: Datasette's is a 200 of one line end whatever failed (review 113)
    for params in ({}, {"_stream": "1"}, {"_dl": "1"}, {"_format": "csv"}):
        path = "/demo/recall" if params.get("_format") else "/demo/recall.csv"
        cut = await hurried.client.get(path, params={"q": "what does the graph leg do", **params})
        assert cut.status_code == 503 and cut.headers["Retry-After"] and "sql_time_limit_ms" in cut.text, params
    named = await hurried.client.get("/demo/recall.csv", params={"q": "graph leg", "k": "abc"})
    assert named.status_code == 400 and named.text == "k must be a whole number\n"
    own = await datasette.client.get("/demo/recall.csv", params={"q": "graph leg", "_timelimit": "1"})
    assert own.status_code == 400 and "_timelimit" in own.text and "Retry-After" not in own.headers
    answered = await datasette.client.get("/demo/recall.csv", params={"q": "graph leg", "_stream": "1"})
    assert answered.status_code == 200 and answered.text.startswith("id,title,score,") and "graph" in answered.text
    nothing = await datasette.client.get("/demo/recall.csv", params={"q": "zzqx", "scope": "/nowhere/at/all"})
    assert nothing.status_code == 200 and nothing.text.startswith("id,title,score,")
    theirs = await datasette.client.get("/demo/recall.csv", params={"q": "graph leg", "_stream": "1", "_next": "3"})
    assert theirs.status_code == 400 and "Retry-After" not in theirs.headers  # Datasette's own refusal
    form = await datasette.client.get("/demo/recall", params={"q": "graph leg", "k": "abc"})
    assert form.status_code == 400 and 'name="k"' in form.text  # Datasette's page, the form kept


@pytest.mark.asyncio
async def test_the_canned_recall_querys_csv_failing_outside_the_brains_functions_is_a_503(demo, tmp_path):
    """Datasette's CSV of a failed query says nothing of why: one that failed in no
    brain_* function and was not cut (here SQLite's "no such column" of a brain whose
    column plain SQL renamed) is a 503 pointing at its JSON, not a 409 "run check",
    nor Datasette's 200 (review 128)."""
    path = tmp_path / "demo.db"
    shutil.copy(demo, path)
    conn = brain_sql.connect(path)
    with conn:
        conn.execute("alter table knowledge rename column heading_path to heading")
    conn.close()
    datasette = Datasette([str(path)], metadata=METADATA)
    answer = await datasette.client.get("/demo/recall.csv", params={"q": "graph leg"})
    assert answer.status_code == 503 and answer.headers["Retry-After"] and "recall.json" in answer.text
    assert "run sqlite-utils brain check" not in answer.text
    traced = await datasette.client.get("/demo/recall.csv", params={"q": "graph leg", "_trace": "1"})
    assert traced.status_code == 200  # a trace's page comes before any header row: Datasette's, as documented


@pytest.mark.asyncio
async def test_decayed_json_and_html(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    data = (await datasette.client.get("/demo/-/decayed.json")).json()
    decays = {row["title"]: row["decay"] for row in data["rows"]}
    assert {decays["Old rota"], decays["Archived"]} == {"expired", "archived"} and "Trial" not in decays
    assert (
        {"expired", "archived"}
        <= {f["value"] for f in data["facets"]["decay"]}
        <= {"expired", "expiring within 7 days", "archived"}
    )
    same = (await datasette.client.get("/demo/-/decayed", params={"_format": "json", "decay": "expired"})).json()
    assert "Old rota" in [row["title"] for row in same["rows"]] and {row["decay"] for row in same["rows"]} == {
        "expired"
    }
    html = (await datasette.client.get("/demo/-/decayed")).text
    assert f"{data['count']} memories" in html and 'id="facet-decay"' in html


@pytest.mark.asyncio
async def test_links_from_menu_database_and_table(demo):
    datasette = Datasette([str(demo)], metadata=METADATA)
    home = (await datasette.client.get("/")).text
    assert "/demo/-/brain" in home
    database = (await datasette.client.get("/demo")).text
    assert "/demo/-/decayed" in database
    table = (await datasette.client.get("/demo/knowledge")).text
    assert "/demo/-/brain" in table and "/demo/-/decayed" in table


@pytest.mark.asyncio
async def test_links_only_for_actors_who_may_read_the_memories(demo):
    metadata = {"databases": {"demo": {"tables": {"knowledge": {"allow": {"id": "admin"}}}}}}
    datasette = Datasette([str(demo)], metadata=metadata, crossdb=True)
    anonymous = [(await datasette.client.get(path)).text for path in ("/", "/demo")]
    assert not [page for page in anonymous if "/demo/-/brain" in page or "/demo/-/decayed" in page]
    admin = {"ds_actor": datasette.sign({"a": {"id": "admin"}}, "actor")}
    pages = ("/", "/demo", "/demo/knowledge")
    home, database, table = [(await datasette.client.get(path, cookies=admin)).text for path in pages]
    assert "/demo/-/brain" in home and "/demo/-/decayed" in database and "/demo/-/brain" in table
    assert "/_memory/-/brain" not in home  # --crossdb's _memory attaches the brain, and is not one


# a brain_* function given a bad argument, and the one line the server logs for it
BAD_CALLS = [
    ("select brain_k('abc')", "brain_k: k must be a whole number"),
    ("select brain_filters('[1]')", "brain_filters: filters must be a JSON object"),
    ("select brain_embed('x', 'bogus')", "brain_embed format must be one of"),
    ("select brain_ppr('x', 'not json')", 'brain_ppr: passages is not JSON: "not json"'),
    ("select brain_ppr('x', '[1]')", "brain_ppr: passages must be a JSON array"),
    ("select brain_dialogue('x', 'not json')", 'brain_dialogue: fused is not JSON: "not json"'),
    ("select brain_dialogue('x', '[[1]]')", "brain_dialogue: fused must be a JSON array of [id, score] pairs"),
    ("select brain_dialogue('x', '[[\"a\", 1]]')", "brain_dialogue: fused must be a JSON array of [id, score] pairs"),
    ("select brain_verify(x'ff', x'ff')", "brain_verify: claim must be text"),
    ("select brain_leg_weight('fts', 'x', '[')", "brain_leg_weight: filters is not JSON"),
    ("select brain_boost(1, '2024-02-30', 0.5)", 'brain_boost: observed_at "2024-02-30" is not a date'),
    ("select brain_boost(1, '2024-01-01', 7)", "brain_boost: confidence must be from 0 to 1, not 7"),
    ("select brain_boost('x', '2024-01-01', 0.5)", "brain_boost: score must be a number"),
    ("select brain_rrf(1, 1, -60)", "brain_rrf: k must be a number greater than 0, not -60"),
    ("select brain_rrf(1, 1, 0)", "brain_rrf: k must be a number greater than 0, not 0"),
    ("select brain_rrf(0)", "brain_rrf: rank must be a whole number from 1"),
    ("select brain_rrf(1, -1)", "brain_rrf: weight must be a number at least 0, not -1"),
    # every argument is bounded by what its route allows: a call's work is bounded by its input, as
    # Datasette's time limit never stops a function mid-call (one kind of argument each)
    ("select brain_verify('a', printf('%.*c', 1000001, 'a'))", "brain_verify: text is 1,000,001 characters; the limit"),
    (
        "select brain_verify(printf('%.*c', 2001, 'a'), 'a')",
        "brain_verify: claim is 2,001 characters; the limit is 2,000",
    ),
    ("select brain_fts(printf('%.*c', 2001, 'a'))", "brain_fts: q is 2,001 characters; the limit is 2,000"),
    # composed, U+0958 is two characters: bounded after, as the API bounds q (review 64)
    ("select brain_query_text(printf('%.*c', 1001, char(2392)))", "brain_query_text: q is 2,002 characters composed"),
    ("select brain_query_text(x'61')", "brain_query_text: q must be text, not a BLOB"),
    ("select brain_embed(zeroblob(1000001))", "brain_embed: text is 1,000,001 bytes; the limit is 1,000,000"),
    ("select brain_filters(printf('%.*c', 1000001, ' '))", "brain_filters: filters is 1,000,001 characters"),
    ("select brain_k(printf('%.*c', 501, '1'))", "brain_k: k is 501 characters; the limit is 500"),
    (
        "with recursive n(i) as (select 1 union all select i + 1 from n where i < 10001) "
        "select brain_dialogue('x', (select json_group_array(json_array(i, 1)) from n))",
        "brain_dialogue: fused holds 10,001 items; the limit is 10,000",
    ),
    (
        "with recursive n(i) as (select 1 union all select i + 1 from n where i < 10001) select brain_ppr('x', "
        "(select json_group_array(json_object('leg', 'leg' || i, 'id', i, 'score', 1)) from n))",
        "brain_ppr: passages holds 10,001 items; the limit is 10,000",
    ),
    ("select brain_ppr('x', '[]', '{}', 1)", "brain_ppr takes 1 to 3 arguments (q, passages, filters), not 4"),
]


@pytest.mark.asyncio
@pytest.mark.parametrize("sql, said", BAD_CALLS)
async def test_a_bad_argument_to_a_brain_function_is_a_400_and_one_line_in_the_log(demo, sql, said, capsys):
    """SQLite tells the caller only "user-defined function raised exception" (sqlite3
    gives a function no way to set its message): the server's log names the problem
    in one line, and no traceback (Datasette turns sqlite3's callback tracebacks on)."""
    datasette = Datasette([str(demo)], metadata=METADATA)
    response = await datasette.client.get("/demo.json", params={"sql": sql})
    assert response.status_code == 400 and response.json()["ok"] is False
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"brain_sql: {said}" in err, err


@pytest.mark.asyncio
async def test_a_brain_function_on_a_database_that_is_not_a_brain_says_so(demo, capsys):
    datasette = Datasette([str(demo)], metadata=METADATA, crossdb=True)
    for sql in ("select brain_fts('zebra42')", "select brain_ppr('zebra42')", "select brain_fusion('zebra42')"):
        response = await datasette.client.get("/_memory.json", params={"sql": sql})
        assert response.status_code == 400, sql
        err = capsys.readouterr().err
        name = sql.split("(")[0].split()[-1]
        assert "Traceback" not in err and f"brain_sql: {name} needs a brain, and this database is not one" in err


def test_a_bad_date_or_bound_is_refused_and_good_ones_answer_as_recall_does(tmp_path):
    """brain_boost and brain_rrf take what the API takes: the same numbers for good
    arguments (a stored time in any ISO spelling), refusals for the rest."""
    conn = brain_sql.connect(tmp_path / "b.db")
    brain_sql.migrate(conn)
    boost = "select brain_boost(1, ?, 0.5, '2026-01-01')"
    same = [conn.execute(boost, [when]).fetchone()[0] for when in ("2025-12-01 00:00:00", "2025-12-01T00:00:00Z")]
    assert same[0] == same[1] > 1.0
    assert conn.execute("select brain_rrf(1), brain_rrf(2, 0.5, 10)").fetchone() == (1 / 61, 0.5 / 12)
    for sql in ("select brain_boost(1, '2024-02-30', 0.5)", "select brain_rrf(1, 1, -60)"):
        with pytest.raises(sqlite3.OperationalError):
            conn.execute(sql).fetchone()
