"""`sqlite-utils brain check`: every inconsistency found, and repaired from knowledge.
Ingest killed mid-write is tested in test_crash_recovery.py."""

import ast
import asyncio
import inspect
import json
import os
import shutil
import sqlite3
import textwrap

import pytest
import sqlite_utils
from datasette.app import Datasette

import brain_sql
from brain_sql import consistency, mentions, schema, values
from brain_sql.consistency import check
from datasette_brain.cli import PROBLEMS

from .conftest import VAULT, edges, model_folder, snapshot, without_rules, write


def test_check_finds_and_repairs(run, db_path):
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    clean = run("brain", "check", db_path)
    assert clean.exit_code == 0 and "consistent" in clean.output
    conn = brain_sql.connect(db_path)
    conn.execute("delete from vec_knowledge where knowledge_id = 1")
    conn.execute(
        "insert into knowledge_fts(knowledge_fts, rowid, title, content, content_hash) "
        "select 'delete', id, title, content, content_hash from knowledge where id = 2"
    )
    conn.execute("update vec_knowledge set scope = '/elsewhere' where knowledge_id = 3")
    gone = conn.execute("insert into entities (name) values ('Gone')").lastrowid  # an entity deleted under its edge
    conn.execute("insert into relationships (from_entity_id, to_entity_id, relation_type) values (?, 1, 'x')", [gone])
    conn.execute("delete from entities where id = ?", [gone])
    conn.execute("update documents set chunks = chunks + 1 where rowid = 1")
    problems = check(conn)
    assert set(problems) == {
        "fts_out_of_sync",
        "missing_vectors",
        "stale_vector_filters",
        "dangling_edges",
        "incomplete_documents",
    }
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and "memories without a vector: 1 (1)" in found.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output
    assert check(brain_sql.connect(db_path)) == {}
    hits = brain_sql.recall(brain_sql.connect(db_path), {"q": "what does the graph leg do", "scope": "/"})["hits"]
    assert hits[0]["title"] == "Graph Leg"  # the repaired filter column no longer hides a memory


def test_triggers_a_tool_drops_are_found_and_restored(run, db_path):
    """`sqlite-utils transform` rebuilds a table without its triggers: full text,
    vectors and the change log would silently stop following it."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    assert run("transform", db_path, "knowledge", "--type", "confidence", "float").exit_code == 0
    conn = brain_sql.connect(db_path)
    conn.execute("update knowledge set flagged = 1 where title = 'Graph Leg'")  # unseen by FTS and vectors now
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and "triggers missing" in found.output and "knowledge_vec_filters" in found.output
    assert run("brain", "check", db_path, "--repair").exit_code == 0
    assert run("brain", "check", db_path).output.strip().endswith("consistent")
    hits = brain_sql.recall(conn, {"q": "what does the graph leg do", "k": 10})["hits"]
    assert "Graph Leg" not in [hit["title"] for hit in hits]
    conn.execute("update knowledge set flagged = 0 where title = 'Graph Leg'")  # followed again
    assert [hit["title"] for hit in brain_sql.recall(conn, {"q": "what does the graph leg do"})["hits"]][
        0
    ] == "Graph Leg"


@pytest.mark.parametrize(
    "change, named",
    [
        (["--drop", "flagged"], "no column flagged"),
        (["--rename", "title", "headline"], "no column title"),
        (["--type", "flagged", "text"], "column flagged holds str, not int"),
    ],
)
def test_a_table_rebuilt_without_its_columns_is_named_not_a_traceback(run, db_path, change, named):
    """A column a tool renamed or dropped cannot be mended from the rest: check
    names it, --repair refuses, and recall says to run check."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    if change[0] != "--type":  # sqlite-utils cannot carry a partial index over a column dropped or renamed
        refused = run("transform", db_path, "knowledge", *change)
        assert refused.exit_code == 1 and "No changes have been applied" in str(refused.exception)
        conn = brain_sql.connect(db_path)
        for name in ("idx_knowledge_decaying", "idx_knowledge_flagged", "idx_knowledge_session"):  # as it says to
            conn.execute(f"drop index {name}")
        conn.close()
    assert run("transform", db_path, "knowledge", *change).exit_code == 0
    for command in (["check"], ["check", "--repair"]):
        result = run("brain", *command, db_path)
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
        assert f"knowledge: {named}" in result.output and "restore a copy" in result.output, result.output
    recalled = run("brain", "recall", db_path, "graph leg")
    assert recalled.exception is None or isinstance(recalled.exception, SystemExit), recalled.output
    assert recalled.exit_code == 0 or "run sqlite-utils brain check" in recalled.output, recalled.output


def test_a_file_that_is_not_a_brain_or_is_damaged_is_named(run, tmp_path):
    path = tmp_path / "noise.db"
    path.write_bytes(bytes(range(256)) * 40)
    for args in (("check", path), ("recall", path, "x"), ("ingest", path, VAULT)):
        result = run("brain", *args)
        assert result.exit_code == 1 and "Traceback" not in result.output, args
        assert "is not an SQLite database, or is damaged" in result.output, args


def test_damaged_pages_are_named_by_every_command_and_route(run, vault_brain_copy):
    """A file that opens but has pages overwritten: each command says to run check
    or names the damage, each route answers without a 500."""
    data = bytearray(vault_brain_copy.read_bytes())
    page = 4096
    for number in range(4, len(data) // page, 3):  # every third page from the fourth on
        data[number * page : number * page + 64] = bytes(range(64))
    vault_brain_copy.write_bytes(bytes(data))
    commands = [
        ("check",),
        ("recall", "graph leg"),
        ("stats",),
        ("ingest", VAULT),
        ("forget", "--id", "1"),
        ("reindex", "--model", "wordllama/l2_supercat"),
        ("export",),
    ]
    for command in commands:
        result = run("brain", command[0], vault_brain_copy, *command[1:])
        assert result.exit_code == 1 and isinstance(result.exception, SystemExit), (command, result.output)
        assert "Traceback" not in result.output, command

    async def routes():
        datasette = Datasette([str(vault_brain_copy)])
        paths = [
            "/brain/-/recall?q=graph+leg",
            "/brain/-/brain?q=graph+leg",
            "/brain/-/memory/1",
            "/brain/-/entity/1",
            "/brain/-/decayed.json",
            "/brain/-/memories.json",
            "/brain/-/export.jsonl",
        ]
        return [(path, (await datasette.client.get(path)).status_code) for path in paths]

    for path, status in asyncio.run(routes()):
        assert status < 500, path


def test_a_blob_where_a_name_belongs_is_a_409_on_every_route_and_command(run, vault_brain_copy):
    """A BLOB written over an entity's name and an edge's type with plain SQL: the
    memory page's JSON (read through Datasette's connections, whose rows are Rows),
    the export and the CLI's export say to run check, never a 500 or a traceback."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute("update entities set name = x'ff00' where id = (select min(from_entity_id) from relationships)")
        conn.execute(
            "update relationships set relation_type = x'ff00' where rowid = (select min(rowid) from relationships)"
        )
    conn.close()
    memory_id = sqlite3.connect(vault_brain_copy).execute("select min(knowledge_id) from relationships").fetchone()[0]

    async def routes():
        datasette = Datasette([str(vault_brain_copy)])
        for path in (f"/brain/-/memory/{memory_id}.json", f"/brain/-/memory/{memory_id}", "/brain/-/export.jsonl"):
            answer = await datasette.client.get(path)
            assert answer.status_code == 409 and "check" in answer.text, (path, answer.status_code, answer.text[:200])

    asyncio.run(routes())
    result = run("brain", "export", vault_brain_copy)
    assert result.exit_code == 1 and "Traceback" not in result.output and "check" in result.output


def test_an_infinite_confidence_is_a_409_not_json_it_has_not(run, vault_brain_copy):
    """confidence = 1e999 (an infinity plain SQL may write): check names it, and the
    memory's JSON, the listing and the export say to run check instead of answering
    `Infinity`, which is no JSON."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        without_rules(conn)
        conn.execute("update knowledge set confidence = 1e999 where id = 1")
    conn.close()

    async def routes():
        datasette = Datasette([str(vault_brain_copy)])
        for path in ("/brain/-/memory/1.json", "/brain/-/memories.json?size=1000", "/brain/-/export.jsonl"):
            answer = await datasette.client.get(path)
            assert answer.status_code == 409 and "Infinity" not in answer.text, (path, answer.text[:200])

    asyncio.run(routes())
    assert "confidence" in run("brain", "check", vault_brain_copy).output


@pytest.mark.parametrize(
    "column, value",
    [
        ("confidence", 1.7976931348623157e308),
        ("confidence", 1e308),
        ("confidence", -1e308),
        ("confidence", 1.01),
        ("confidence", "high"),
        ("confidence", b"\x00\xff"),
        ("confidence", 0.0),
        ("confidence", 1),
        ("confidence", None),
        ("observed_at", "2024-02-30 10:00:00"),
        ("observed_at", 99999999999999),
        ("observed_at", "2024-02-28 10:00:00"),
    ],
)
def test_recall_refuses_a_hit_exactly_when_check_names_the_value_its_score_reads(vault_brain_copy, column, value):
    """The recency and confidence boost moves a score by at most ±0.5%: a value
    check names (confidence 1e308 would put the memory first, whatever the query)
    is answered 409 saying to run check, as 'high' is; any other is answered."""
    conn = brain_sql.connect(vault_brain_copy)
    graph_leg = conn.execute("select id from knowledge where title = 'Graph Leg'").fetchone()[0]
    with conn:
        without_rules(conn)
        conn.execute(f"update knowledge set [{column}] = ? where id = ?", [value, graph_leg])
    named = [line for line in check(conn).get("invalid_values", []) if f"knowledge {graph_leg} {column}" in line]
    conn.close()

    async def recalled():
        datasette = Datasette([str(vault_brain_copy)])
        return await datasette.client.get("/brain/-/recall?q=what+does+the+graph+leg+do&cutoff=false")

    answer = asyncio.run(recalled())
    if named:
        assert answer.status_code == 409 and "run sqlite-utils brain check" in answer.json()["error"], answer.text
        assert f"knowledge {graph_leg}" not in answer.json()["error"]  # check names it, for whoever holds the file
    else:
        assert answer.status_code == 200, answer.text
        hits = answer.json()["hits"]
        assert hits[0]["id"] == graph_leg and hits[0]["score"] < 1.01 * hits[0]["provenance"]["fused_score"]


def test_values_of_the_wrong_kind_are_named_and_mended_when_they_read_one_way(run, db_path):
    """Plain SQL stores any value anywhere: a BLOB holding a title's or a name's
    UTF-8 text, a number as bytes, another dimension in brain_meta. Check names
    each row and column; --repair makes each what it reads as, and recall works."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    graph_leg = conn.execute("select id from knowledge where title = 'Graph Leg'").fetchone()[0]
    entity = conn.execute("select id from entities where name = 'Graph Leg'").fetchone()[0]
    conn.execute(
        "update knowledge set title = cast(title as blob), confidence = cast('0.5' as blob) where id = ?", [graph_leg]
    )
    conn.execute("update entities set name = cast(name as blob) where id = ?", [entity])
    conn.execute("update brain_meta set value = '64' where key = 'dimension'")
    conn.close()
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and "Traceback" not in found.output
    for named in (
        f"knowledge {graph_leg} title: a BLOB of 9 bytes",
        f"knowledge {graph_leg} confidence: a BLOB",
        f"entities {entity} name: a BLOB",
        "brain_meta dimension value: '64', not 256",
    ):
        assert named in found.output, found.output
    recalled = run("brain", "recall", db_path, "zzqx unknown words")
    assert recalled.exit_code == 1 and "run sqlite-utils brain check" in recalled.output, recalled.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    conn = brain_sql.connect(db_path)
    assert conn.execute("select title, confidence from knowledge where id = ?", [graph_leg]).fetchone() == (
        "Graph Leg",
        0.5,
    )
    assert conn.execute("select name from entities where id = ?", [entity]).fetchone()[0] == "Graph Leg"
    assert conn.execute("select value from brain_meta where key = 'dimension'").fetchone()[0] == "256"
    hits = brain_sql.recall(conn, {"q": "what does the graph leg do"})["hits"]
    assert hits[0]["title"] == "Graph Leg"
    assert run("brain", "recall", db_path, "zzqx unknown words").exit_code == 0


@pytest.fixture
def no_network(monkeypatch):
    """The hub's downloads recorded and refused: what a model fetched would have asked
    for (a look in the local cache, local_files_only, is no fetch)."""
    import huggingface_hub

    fetched, look = [], huggingface_hub.snapshot_download

    def download(*args, **kwargs):
        if kwargs.get("local_files_only"):
            return look(*args, **kwargs)
        fetched.append(args or kwargs)
        raise OSError("no network in this test")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    return fetched


def test_a_model_not_installed_is_one_problem_and_never_fetched(run, db_path, no_network):
    """brain_meta's model set with plain SQL to an id no model here has: recall and
    check never fetch it; recall names it and says to run check or reindex; check
    names that one value (not every memory as embedded by another model), and
    --repair restores the model every memory says it was embedded with."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    conn.execute("update brain_meta set value = 'nope/model' where key = 'model'")
    conn.close()
    recalled = run("brain", "recall", db_path, "graph leg")
    assert recalled.exit_code == 1 and "Traceback" not in recalled.output, recalled.output
    for named in ("'nope/model'", "not a model installed here", "sqlite-utils brain check", "brain reindex"):
        assert named in recalled.output, recalled.output
    found = run("brain", "check", db_path)
    assert found.exit_code == 1, found.output
    assert found.output.splitlines()[1:] == [
        "  brain_meta model value: 'nope/model', not a model installed here (this package's, a plugin's, a local "
        "model2vec folder, or a hub model in the local cache: a brain's model is never fetched) (--repair makes it "
        "'wordllama/l2_supercat')"
    ], found.output
    assert "another model" not in found.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    assert run("brain", "recall", db_path, "graph leg").exit_code == 0
    assert not no_network


def test_an_installed_model_of_another_width_is_one_problem_and_repair_sets_it_back(run, db_path, narrow_model):
    """brain_meta's model set with plain SQL to another installed model, whose vectors
    are not as wide as the stored ones: recall names it and both widths (no
    traceback), check names that one value, and --repair restores the model every
    memory says it was embedded with, instead of re-embedding into the stored table."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    conn.execute("update brain_meta set value = ? where key = 'model'", (narrow_model,))
    conn.close()
    recalled = run("brain", "recall", db_path, "graph leg")
    assert recalled.exit_code == 1 and "Traceback" not in recalled.output, recalled.output
    for named in (repr(narrow_model), "128 wide", "256 wide", "sqlite-utils brain check", "brain reindex"):
        assert named in recalled.output, recalled.output
    found = run("brain", "check", db_path)
    assert found.exit_code == 1, found.output
    assert found.output.splitlines()[1:] == [
        f"  brain_meta model value: {narrow_model!r}, not a model making vectors 256 wide, as the stored ones are "
        "(it makes them 128 wide) (--repair makes it 'wordllama/l2_supercat')"
    ], found.output
    assert "another model" not in found.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    conn = brain_sql.connect(db_path)
    assert conn.execute("select value from brain_meta where key = 'model'").fetchone() == ("wordllama/l2_supercat",)
    conn.close()
    again = run("brain", "recall", db_path, "graph leg")
    assert again.exit_code == 0 and "Graph Leg" in again.output, again.output


def test_a_folder_that_holds_no_model_is_one_problem_and_repair_sets_it_back(run, db_path, tmp_path):
    """brain_meta's model set with plain SQL to a folder that exists but holds no
    model (review 12, F2): recall says to run check (not a usage error: the brain
    names it, not the caller), check names that one value and --repair restores the
    model the memories record."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    conn = brain_sql.connect(db_path)
    conn.execute("update brain_meta set value = ? where key = 'model'", (str(folder),))
    conn.close()
    recalled = run("brain", "recall", db_path, "graph leg")
    assert recalled.exit_code == 1 and "Traceback" not in recalled.output, recalled.output
    assert "run sqlite-utils brain check" in recalled.output, recalled.output
    found = run("brain", "check", db_path)
    text = " ".join(found.output.split())
    assert found.exit_code == 1 and "brain_meta model value:" in text, found.output
    assert f"not a model that loads here (it does not: cannot load model2vec model {str(folder)!r}" in text
    assert "(--repair makes it 'wordllama/l2_supercat')" in found.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    again = run("brain", "recall", db_path, "graph leg")
    assert again.exit_code == 0 and "Graph Leg" in again.output, again.output


def test_a_model_not_installed_that_no_memory_tells_is_mended_by_reindex(run, db_path, no_network):
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    conn.execute("update brain_meta set value = 'nope/model' where key = 'model'")
    conn.execute("update knowledge set embedding_model = 'nope/model'")
    conn.close()
    before = snapshot(brain_sql.connect(db_path))
    refused = run("brain", "check", db_path, "--repair")
    assert refused.exit_code == 1 and "cannot tell what these values should be" in refused.output, refused.output
    assert "'nope/model'" in refused.output and "sqlite-utils brain reindex DB --model M" in refused.output
    assert snapshot(brain_sql.connect(db_path)) == before
    reindexed = run("brain", "reindex", db_path, "--model", "wordllama/l2_supercat")
    assert reindexed.exit_code == 0, reindexed.output
    assert run("brain", "check", db_path).output.endswith(": consistent\n")
    assert not no_network


def test_a_value_that_reads_no_one_way_is_named_and_repair_refuses_changing_nothing(run, db_path):
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    conn.execute("update knowledge set confidence = 'high' where id = 1")
    conn.execute("update knowledge set title = x'ff00' where id = 2")  # no UTF-8 text
    conn.execute("update entities set name = cast(name as blob) where id = 1")  # mendable, but not alone
    conn.close()
    before = snapshot(brain_sql.connect(db_path))
    refused = run("brain", "check", db_path, "--repair")
    assert refused.exit_code == 1 and isinstance(refused.exception, SystemExit), refused.output
    assert "cannot tell what these values should be" in refused.output
    assert "knowledge 1 confidence: 'high', not a number from 0 to 1" in refused.output
    assert "knowledge 2 title: a BLOB of 2 bytes, not text or NULL (set it with SQL)" in refused.output
    assert snapshot(brain_sql.connect(db_path)) == before  # all or nothing
    for command in (["recall", db_path, "graph leg"], ["stats", db_path]):
        result = run("brain", *command)
        assert "Traceback" not in result.output and not isinstance(result.exception, TypeError), result.output
    recalled = run("brain", "recall", db_path, "what does the graph leg do")
    assert recalled.exit_code == 1 and "run sqlite-utils brain check" in recalled.output
    conn = brain_sql.connect(db_path)
    conn.execute("update knowledge set confidence = 0.9 where id = 1")
    conn.execute("update knowledge set title = 'Two' where id = 2")
    conn.close()
    assert run("brain", "check", db_path, "--repair").exit_code == 0
    assert run("brain", "check", db_path).output.strip().endswith("consistent")


@pytest.mark.parametrize(
    "change, named, mended",
    [
        ("update knowledge set flagged = 2 where id = 1", "knowledge 1 flagged: 2, not 0, or 1 for flagged", None),
        (
            "update knowledge set valid_from = '2024-02-01', valid_to = '2024-01-01' where id = 1",
            "knowledge 1 valid_to: '2024-01-01', not a time later than valid_from",
            None,
        ),
        (
            "update knowledge set scope = '/acme/support/' where id = 1",
            "knowledge 1 scope: '/acme/support/'",
            "/acme/support",
        ),
        ("update knowledge set scope = '/acme/../support' where id = 1", "knowledge 1 scope: '/acme/../support'", None),
        ("update knowledge set scope = '/acme' || char(8203) where id = 1", "knowledge 1 scope: '/acme\\u200b'", None),
        (
            "update knowledge set observed_at = 'now' where id = 1",
            "knowledge 1 observed_at: 'now'",
            None,
        ),  # before the rules
    ],
)
def test_values_outside_the_rules_are_named_not_passed_over(run, db_path, change, named, mended):
    """A flag of 2, a validity that ends before it begins, a scope ingest would
    refuse or store otherwise, a time that is no moment: check names each; --repair
    mends what reads one way only (a scope as ingest stores it), refuses the rest."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    without_rules(conn)  # a brain written before them may hold a time that is no moment
    conn.execute(change)
    conn.close()
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and named in found.output, found.output
    repaired = run("brain", "check", db_path, "--repair")
    if mended is None:
        assert repaired.exit_code == 1 and "cannot tell what these values should be" in repaired.output
        assert named in repaired.output and "(set it with SQL)" in repaired.output, repaired.output
    else:
        assert repaired.exit_code == 0 and f"--repair makes it {mended!r}" in repaired.output, repaired.output
        assert brain_sql.connect(db_path).execute("select scope from knowledge where id = 1").fetchone()[0] == mended


def assert_answers_or_says_to_run_check(run, path, query):
    """Recall (CLI and API) and the pages on the brain at `path` (Datasette's `brain`):
    each answers, or says to run check (409); never a 500 or a traceback."""
    recalled = run("brain", "recall", path, query)
    assert recalled.exit_code == 0 or "run sqlite-utils brain check" in recalled.output, recalled.output
    assert recalled.exception is None or isinstance(recalled.exception, SystemExit), recalled.output

    async def routes():
        datasette = Datasette([str(path)])
        for route in (
            f"/brain/-/recall?q={query}",
            f"/brain/-/brain?q={query}",
            "/brain/-/memory/1",
            "/brain/-/memory/1.json",
            "/brain/-/memories.json?size=1000",
            "/brain/-/decayed.json?size=1000",
            "/brain/-/decayed",
            "/brain/-/export.jsonl",
            "/brain/-/entity/1",
        ):
            answer = await datasette.client.get(route)
            assert answer.status_code in (200, 409), (route, answer.status_code, answer.text[:300])
            assert answer.status_code == 200 or "check" in answer.text, (route, answer.text[:300])

    asyncio.run(routes())


@pytest.mark.parametrize(
    "change, named, mended",
    [
        (
            "update knowledge set metadata = '{bad' where id = 1",
            "knowledge 1 metadata: '{bad', not a JSON object",
            '{"metadata": "{bad"}',
        ),
        (
            "update knowledge set metadata = '[1, 2]' where id = 1",
            "knowledge 1 metadata: '[1, 2]', not",
            '{"metadata": [1, 2]}',
        ),
        (
            "update knowledge set tags = 'not json' where id = 1",
            "knowledge 1 tags: 'not json', not a JSON list of names",
            '["not json"]',
        ),
        ("update knowledge set tags = '[\"a\", 7]' where id = 1", "knowledge 1 tags: '[\"a\", 7]', not", '["a", "7"]'),
        ("update knowledge set tags = '{\"a\": 1}' where id = 1", "knowledge 1 tags: '{\"a\": 1}', not", None),
        # a lone surrogate's escape, and nesting past MAX_NESTING, SQLite's JSON takes: no export writes them
        (
            'update knowledge set metadata = \'{"k": "\\ud800"}\' where id = 1',
            'knowledge 1 metadata: \'{"k": "\\\\ud800"}\', not a JSON object (valid Unicode, numbers a double holds, '
            "nested at most 100",
            None,
        ),
        (
            'update knowledge set tags = \'["a", "\\udc00"]\' where id = 1',
            'knowledge 1 tags: \'["a", "\\\\udc00"]\', not a JSON list of names (valid Unicode)',
            None,
        ),
        pytest.param(
            f"update knowledge set metadata = '{{\"k\": {'[' * 150}{']' * 150}}}' where id = 1",
            'knowledge 1 metadata: \'{"k": [[[[[[[[[[[[[[[',
            None,
            id="metadata nested 150 deep",
        ),
        pytest.param(
            f"update knowledge set metadata = '{{\"k\": {'[' * 990}{']' * 990}}}' where id = 1",
            'knowledge 1 metadata: \'{"k": [[[[[[[[[[[[[[[',
            None,
            id="metadata nested 990 deep",
        ),
        # what an older version stored from YAML's .nan: no JSON to SQLite, no export writes it
        (
            "update knowledge set metadata = '{\"x\": NaN}' where id = 1",
            "knowledge 1 metadata: '{\"x\": NaN}', not",
            None,
        ),
    ],
)
def test_metadata_and_tags_plain_sql_broke_are_named_and_read_as_export_then_ingest_would(
    run, db_path, tmp_path, change, named, mended
):
    """metadata holds a JSON object, tags a JSON list of names: other text is named by
    check; --repair makes it what exporting the memory and ingesting it again stores
    (text that is no object kept under "metadata", a tag list written as text read as
    ingest reads one), the memory and the rest of its row kept; what no record could
    give is refused. Recall and the pages answer meanwhile."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    column = change.split()[3]
    conn = brain_sql.connect(db_path)
    conn.execute(change)
    conn.close()
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and named in found.output, found.output
    assert_answers_or_says_to_run_check(run, db_path, "graph leg")
    exported = run("brain", "export", db_path)
    again = tmp_path / "again.db"
    reingested = run("brain", "ingest", again, write(tmp_path / "export.jsonl", exported.stdout))
    before = snapshot(brain_sql.connect(db_path))
    repaired = run("brain", "check", db_path, "--repair")
    if mended is None:  # the export refuses it, or ingesting the export does
        refused = exported if exported.exit_code else reingested
        assert refused.exit_code == 1 and "Traceback" not in refused.output, refused.output
        assert "run sqlite-utils brain check" in refused.output or f"{column} must be a list" in refused.output
        assert repaired.exit_code == 1 and "cannot tell what these values should be" in repaired.output
        assert named in repaired.output and "(set it with SQL)" in repaired.output, repaired.output
        assert snapshot(brain_sql.connect(db_path)) == before
        return
    assert exported.exit_code == 0 and reingested.exit_code == 0, exported.output + reingested.output
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    conn = brain_sql.connect(db_path)
    after = conn.execute(f"select {column} from knowledge where id = 1").fetchone()[0]
    assert json.loads(after) == json.loads(mended)
    assert after == brain_sql.connect(again).execute(f"select {column} from knowledge where id = 1").fetchone()[0]
    unchanged = [row for row in snapshot(conn)["knowledge"] if row[0] != 1]
    assert unchanged == [row for row in before["knowledge"] if row[0] != 1]


@pytest.mark.parametrize(
    "column, value",
    [
        ("observed_at", "0000-01-01"),
        ("observed_at", "2024-02-30"),
        ("valid_from", "2023-02-29"),
        ("valid_to", "0000-01-01"),
        ("expires_at", "2024-04-31 10:00:00"),
        ("created_at", "2024-01-01 24:00:00"),
    ],
)
def test_an_impossible_date_is_named_and_repair_refuses_it(run, db_path, column, value):
    """No calendar has a 30 February, a year 0 or an hour 24 (SQLite reads them as
    other days): check names the row and column, --repair cannot tell what was
    meant and changes nothing, never deleting the memory; recall and the pages
    answer meanwhile, and once the date is set the brain is consistent."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    without_rules(conn)  # as a brain written before they refused them
    conn.execute(f"update knowledge set {column} = ? where id = 1", [value])
    conn.close()
    named = f"knowledge 1 {column}: {value!r}, not a time"
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and named in found.output, found.output
    before = snapshot(brain_sql.connect(db_path))
    refused = run("brain", "check", db_path, "--repair")
    assert refused.exit_code == 1 and "cannot tell what these values should be" in refused.output, refused.output
    assert named in refused.output and "(set it with SQL)" in refused.output, refused.output
    assert snapshot(brain_sql.connect(db_path)) == before
    assert_answers_or_says_to_run_check(run, db_path, "graph leg")
    conn = brain_sql.connect(db_path)
    conn.execute(f"update knowledge set {column} = '2024-02-29' where id = 1")
    conn.close()
    assert run("brain", "check", db_path, "--repair").exit_code == 0
    assert run("brain", "check", db_path).output.strip().endswith("consistent")


@pytest.mark.parametrize(
    "change",
    [
        "delete from brain_instance",
        "insert into brain_instance values ('copied')",
        "drop table brain_instance",
    ],
)
def test_a_brain_instance_emptied_filled_or_dropped_is_named_and_given_a_new_id(run, db_path, change):
    """Readers tell a brain from another copied over its file by its one instance
    id: check names a table holding none or several, and --repair gives the brain
    a new one, so no reader takes it for what it read before."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    before = conn.execute("select instance from brain_instance").fetchall()
    conn.execute(change)
    conn.close()
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and "the brain's instance id" in found.output, found.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    after = brain_sql.connect(db_path).execute("select instance from brain_instance").fetchall()
    assert len(after) == 1 and after != before and after[0][0] != "copied"


def test_repair_checks_again_and_says_what_is_still_there(run, db_path):
    """--repair mends what it can, then checks the brain again: what it did not
    reach (an index that disagrees with its table) is named, never claimed mended."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    conn.execute("delete from vec_knowledge where knowledge_id = 1")
    conn.execute("pragma writable_schema = on")  # an index of another column than its entries: integrity_check fails
    conn.execute(
        "update sqlite_master set sql = 'CREATE INDEX idx_knowledge_scope ON knowledge(domain)' "
        "where name = 'idx_knowledge_scope'"
    )
    conn.close()
    result = check(brain_sql.connect(db_path), repair=True)
    assert result["missing_vectors"] == [1] and set(result["unrepaired"]) == {"integrity"}, result
    assert "row 1 missing from index idx_knowledge_scope" in result["unrepaired"]["integrity"]
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 1 and "memories without a vector" not in repaired.output, repaired.output
    assert f"{db_path} still has:\n  the SQLite file fails its integrity check" in repaired.output, repaired.output


@pytest.mark.parametrize(
    "change",
    [
        "update relationships set from_entity_id = 2.5 where id = 1",
        "update relationships set knowledge_id = 3.5 where id = 1",
        "update documents set entity_id = 1.5 where rowid = 1",
        "update relationships set to_entity_id = 'abc' where id = 1",
    ],
)
def test_an_id_that_is_no_whole_number_is_named_when_recall_reads_it(run, db_path, change):
    """The graph holds ids in arrays of whole numbers: recall reading 2.5 or 'abc'
    where an id belongs says to run check (which names it, and deletes the edge or
    derives the document's entity again), not a traceback, nor takes 2 for it."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    without_rules(conn)  # as a brain written before them may hold
    conn.execute(change)
    conn.close()
    recalled = run("brain", "recall", db_path, "what does the graph leg do")
    assert recalled.exit_code == 1 and isinstance(recalled.exception, SystemExit), recalled.output
    assert "run sqlite-utils brain check" in recalled.output, recalled.output
    assert run("brain", "check", db_path, "--repair").exit_code == 0
    assert run("brain", "recall", db_path, "what does the graph leg do").exit_code == 0


def test_every_problem_check_finds_is_told_in_words():
    """The CLI names each problem check may find in words, never by its key: every
    key _check reports (the literals of its `found` dict and of `problems[...] =`)
    has a line in the CLI's PROBLEMS."""
    source = inspect.getsource(consistency._check)
    keys = set()
    for node in ast.walk(ast.parse(textwrap.dedent(source))):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict) and node.targets[0].id == "found":
            keys.update(key.value for key in node.value.keys)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            keys.add(node.slice.value)
    assert {"integrity", "invalid_values", "id_mark_behind", "stale_quotes", "stale_snapshot"} <= keys
    assert keys - set(PROBLEMS) == set()


@pytest.mark.parametrize(
    "damage",
    [
        "insert into knowledge_fts(knowledge_fts) values ('delete-all')",
        "delete from knowledge_fts_docsize",
        "update knowledge_fts_docsize set sz = x'ff'",
    ],
)
def test_a_full_text_index_plain_sql_damaged_is_a_message_saying_to_run_check(run, vault_brain_copy, damage):
    """recall on a brain whose knowledge_fts lost its lengths says to run check (no
    traceback); check names it and --repair mends it."""
    conn = sqlite3.connect(vault_brain_copy)
    conn.execute(damage)
    conn.commit()
    conn.close()
    recalled = run("brain", "recall", vault_brain_copy, "graph leg")
    assert recalled.exit_code == 1 and not isinstance(recalled.exception, ZeroDivisionError), recalled.output
    assert "full-text index is damaged" in recalled.output and "run sqlite-utils brain check" in recalled.output
    assert run("brain", "check", vault_brain_copy, "--repair").exit_code == 0
    assert run("brain", "recall", vault_brain_copy, "graph leg").exit_code == 0


DERIVED_DROPPED = [
    "vec_knowledge",
    "knowledge_fts",
    "documents",
    "brain_mention_queue",
    "brain_changes",
    "brain_mention_names",
    "brain_mention_names_seen",
    # the full-text and vector tables' own (their modules' shadow tables) and the vocabulary tables
    "vec_knowledge_rowids",
    "vec_knowledge_info",
    "vec_knowledge_chunks",
    "vec_knowledge_vector_chunks00",
    "knowledge_fts_data",
    "knowledge_fts_idx",
    "knowledge_fts_docsize",
    "knowledge_fts_config",
    "knowledge_fts_vocab",
    "knowledge_fts_terms",
]


@pytest.mark.parametrize("table", DERIVED_DROPPED)
def test_a_dropped_derived_table_is_named_and_made_again(run, vault_brain_copy, table):
    """A derived table dropped with plain SQL: check names it (never telling to run
    itself), a write says to run check (not 'try again', forever), and --repair
    makes it again from knowledge: consistent, and it recalls and remembers."""
    before = brain_sql.recall(brain_sql.connect(vault_brain_copy), brain_sql.parse_querydoc({"q": "graph leg"}))
    conn = brain_sql.connect(vault_brain_copy)  # vec0 loaded, to drop its table
    conn.execute(f"drop table {table}")
    conn.close()
    checked = run("brain", "check", vault_brain_copy)
    assert checked.exit_code == 1 and "tables a tool or plain SQL dropped" in checked.output, checked.output
    assert table in checked.output and "run sqlite-utils brain check" not in checked.output
    records = write(vault_brain_copy.parent / "one.jsonl", '{"text": "Deploys happen on Tuesdays."}')
    if not table.startswith(("vec_knowledge", "knowledge_fts", "documents")):  # written by every remember
        remembered = run("brain", "remember", vault_brain_copy, records)
        assert remembered.exit_code == 1 and "run sqlite-utils brain check" in remembered.output, remembered.output
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 0 and "now consistent" in repaired.output, repaired.output
    assert run("brain", "check", vault_brain_copy).exit_code == 0
    after = brain_sql.recall(brain_sql.connect(vault_brain_copy), brain_sql.parse_querydoc({"q": "graph leg"}))
    assert [h["id"] for h in after["hits"]] == [h["id"] for h in before["hits"]]
    assert run("brain", "remember", vault_brain_copy, records).exit_code == 0


def test_a_dropped_table_no_repair_can_make_is_named_and_nothing_changed(run, vault_brain_copy):
    """entities holds names stated nowhere else: --repair refuses by name, saying to
    restore a copy, and changes nothing."""
    conn = sqlite3.connect(vault_brain_copy)
    conn.execute("drop table entities")
    conn.commit()
    edges = conn.execute("select count(*) from relationships").fetchone()[0]
    conn.close()
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 1 and "no entities table" in repaired.output, repaired.output
    assert "restore the file from a copy" in repaired.output and "Traceback" not in repaired.output
    assert sqlite3.connect(vault_brain_copy).execute("select count(*) from relationships").fetchone()[0] == edges


@pytest.mark.parametrize("change", ["delete from _sqlite_migrations", "drop table _sqlite_migrations"])
def test_an_emptied_migrations_record_is_restored_by_repair_and_init(run, vault_brain_copy, tmp_path, change):
    """The record of migrations emptied or dropped: check names the migrations; --repair
    restores the record (the schema is all there) and init, which check advises, does too."""
    other = tmp_path / "other.db"
    other.write_bytes(vault_brain_copy.read_bytes())
    for path in (vault_brain_copy, other):
        conn = sqlite3.connect(path)
        conn.execute(change)
        conn.commit()
        conn.close()
    assert "schema migrations not applied yet" in run("brain", "check", vault_brain_copy).output
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 0 and "now consistent" in repaired.output, repaired.output
    initialized = run("brain", "init", other)
    assert initialized.exit_code == 0 and "brain ready" in initialized.output, initialized.output
    for path in (vault_brain_copy, other):
        assert run("brain", "check", path).output.endswith("consistent\n")


@pytest.mark.parametrize(
    "value, unread", [("'abc'", True), ("1e19", True), ("''", False), ("' 1'", False), ("x'31'", False)]
)
def test_a_schema_version_that_is_no_whole_number_is_named_and_mended(run, vault_brain_copy, value, unread):
    """brain_meta's schema_version written with plain SQL as no whole number (1e19 is
    stored in its TEXT column as '1.0e+19'): check names it, init and stats say to run
    check instead of a traceback when they cannot read it, and --repair writes the
    version a brain is made with."""
    conn = sqlite3.connect(vault_brain_copy)
    conn.execute(f"update brain_meta set value = {value} where key = 'schema_version'")
    conn.commit()
    conn.close()
    checked = run("brain", "check", vault_brain_copy)
    assert checked.exit_code == 1 and "brain_meta schema_version value: " in checked.output, checked.output
    assert "not a whole number (--repair makes it '1')" in checked.output, checked.output
    for command in ("init", "stats"):
        answered = run("brain", command, vault_brain_copy)
        assert answered.exception is None or isinstance(answered.exception, SystemExit), answered.output
        assert (answered.exit_code == 1 and "run sqlite-utils brain check" in answered.output) is unread

    async def models():
        return await Datasette([str(vault_brain_copy)]).client.get("/-/brain/v1/models")

    answer = asyncio.run(models())  # the model is served whatever schema_version says (review 20, N6)
    assert answer.status_code == 200, answer.text
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 0 and "now consistent" in repaired.output, repaired.output
    assert brain_sql.info(brain_sql.connect(vault_brain_copy))["schema_version"] == schema.SCHEMA_VERSION
    assert run("brain", "init", vault_brain_copy).exit_code == 0


def _leave_reindex_tables(path, switched):
    """What a reindex killed (kill -9) leaves: its staged vectors and its row in
    brain_meta while staging, the old vectors once it switched."""
    conn = brain_sql.connect(path)
    model, dimension = schema.recorded_model_and_dimension(conn)
    run = schema._Reindex(conn, model, dimension, None)
    seen = run._begin()
    run._stage(run._batch(None))
    if switched:
        run._switch(seen)
    conn.close()


@pytest.mark.parametrize("switched", [False, True])
def test_tables_a_killed_reindex_left_are_named_and_dropped(run, vault_brain_copy, switched):
    """A reindex killed before its clean-up leaves tables as large as the vectors (GBs at
    scale) that only the next reindex dropped: check names them and --repair drops them."""
    _leave_reindex_tables(vault_brain_copy, switched)
    left = {"vec_knowledge_retired"} if switched else {"vec_knowledge_staged"}
    checked = run("brain", "check", vault_brain_copy)
    assert checked.exit_code == 1 and all(table in checked.output for table in left), checked.output
    assert ("reindexing" in checked.output) is not switched
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 0 and "now consistent" in repaired.output, repaired.output
    tables = sqlite_utils.Database(vault_brain_copy).table_names()
    assert not [table for table in tables if table.startswith(("vec_knowledge_staged", "vec_knowledge_retired"))]
    assert brain_sql.recall(brain_sql.connect(vault_brain_copy), brain_sql.parse_querydoc({"q": "graph leg"}))["hits"]


def test_look_alike_entities_of_an_older_brain_are_named_and_merged(run, db_path, tmp_path):
    """Entities made apart before names were keyed (composed and decomposed, a
    non-breaking space): check names them, --repair makes each group one entity with
    every edge and document of the group, and ingest then adds no twin."""
    records = [
        {"title": "Caf\u00e9 notes", "text": "Coffee at noon.", "entities": ["Jos\u00e9 M\u00fcller"]},
        {"title": "Tea notes", "text": "Tea at four.", "entities": ["Dana Whitfield"]},
    ]
    source = write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in records))
    assert run("brain", "ingest", db_path, source).exit_code == 0
    conn = brain_sql.connect(db_path)
    # as an older brain holds them: the same names written apart, each with its own edges
    conn.execute("insert into entities (name, entity_type) values ('Jose\u0301 Mu\u0308ller', 'entity')")
    conn.execute("insert into entities (name, entity_type) values ('Dana\u00a0Whitfield', 'entity')")
    twin = conn.execute("select id from entities where name = 'Dana\u00a0Whitfield'").fetchone()[0]
    tea = conn.execute("select id from entities where name = 'Tea notes'").fetchone()[0]
    conn.execute(
        "insert into relationships (from_entity_id, to_entity_id, relation_type, document_id) "
        "select ?, ?, 'mentions', document_id from documents where entity_id = ?",
        (tea, twin, tea),
    )
    conn.execute("update entities set name = 'Caf\u00e9\u00a0notes' where name = 'Caf\u00e9 notes'")
    conn.close()
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and "entities whose names are one name" in found.output, found.output
    assert (
        "Mu\\u0308ller" in found.output
        and "Dana\\u00a0Whitfield" in found.output
        and "Caf\\u00e9\\u00a0notes" in found.output
    )
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "unrepaired" not in repaired.output, repaired.output
    assert run("brain", "check", db_path).exit_code == 0
    conn = brain_sql.connect(db_path)
    names = sorted(name for (name,) in conn.execute("select name from entities"))
    assert names == ["Caf\u00e9 notes", "Dana Whitfield", "Jos\u00e9 M\u00fcller", "Tea notes"], names
    assert ("Tea notes", "mentions", "Dana Whitfield") in edges(conn)
    assert ("Caf\u00e9 notes", "mentions", "Jos\u00e9 M\u00fcller") in edges(conn)
    cafe = conn.execute("select entity_id from documents where title = 'Caf\u00e9 notes'").fetchone()[0]
    assert conn.execute("select name, entity_type from entities where id = ?", (cafe,)).fetchone() == (
        "Caf\u00e9 notes",
        "document",
    )
    conn.close()
    again = write(tmp_path / "s.jsonl", json.dumps({"title": "More", "text": "x", "entities": ["Dana\u00a0Whitfield"]}))
    assert run("brain", "ingest", db_path, again).exit_code == 0
    conn = brain_sql.connect(db_path)
    assert conn.execute("select count(*) from entities where name like 'Dana%'").fetchone()[0] == 1


@pytest.mark.parametrize("value", [1e19, -1e308, "9223372036854775808"])
@pytest.mark.parametrize("column", ["line_start", "line_end", "chunk_index", "flagged", "relevance_tier"])
def test_a_number_beyond_64_bits_in_a_whole_number_column_is_named_never_a_traceback(
    run, vault_brain_copy, column, value
):
    """SQLite keeps 1e19 written to an INTEGER column as a REAL (no INTEGER holds
    it): check names the row and column, --repair refuses by name (it reads as no
    whole number), and recall and the pages that read it answer 409 saying to run
    check, never an OverflowError (review 10, F2)."""
    conn = brain_sql.connect(vault_brain_copy)
    graph_leg = conn.execute("select id from knowledge where title = 'Graph Leg'").fetchone()[0]
    with conn:
        without_rules(conn)
        conn.execute("update knowledge set content = content || ' (edited)' where id = ?", [graph_leg])  # stale
        conn.execute(f"update knowledge set [{column}] = ? where id = ?", [value, graph_leg])
    conn.close()
    shown = repr(float(value))  # the text too: SQLite stores it as that REAL
    found = run("brain", "check", vault_brain_copy)
    assert found.exit_code == 1 and not isinstance(found.exception, OverflowError), found.output
    assert f"knowledge {graph_leg} {column}: {shown}, not " in found.output, found.output
    before = snapshot(brain_sql.connect(vault_brain_copy))
    refused = run("brain", "check", vault_brain_copy, "--repair")
    assert refused.exit_code == 1 and isinstance(refused.exception, SystemExit), refused.output
    assert "cannot tell what these values should be" in refused.output
    assert f"knowledge {graph_leg} {column}: {shown}" in refused.output
    assert snapshot(brain_sql.connect(vault_brain_copy)) == before
    recalled = run("brain", "recall", vault_brain_copy, "what does the graph leg do")
    assert recalled.exception is None or isinstance(recalled.exception, SystemExit), recalled.output
    read = column in ("flagged", "relevance_tier")  # the read state's filter columns
    assert (
        (recalled.exit_code == 1 and "run sqlite-utils brain check" in recalled.output)
        if read
        else (recalled.exit_code == 0)
    ), recalled.output

    async def answers():
        datasette = Datasette([str(vault_brain_copy)])
        return [
            (path, await datasette.client.get(path))
            for path in (
                "/brain/-/recall?q=what+does+the+graph+leg+do",
                "/brain/-/brain?q=graph+leg",
                f"/brain/-/memory/{graph_leg}.json",
                f"/brain/-/memory/{graph_leg}",
            )
        ]

    for path, answer in asyncio.run(answers()):
        if read and ("memory" not in path or column == "flagged"):
            assert answer.status_code == 409 and "run sqlite-utils brain check" in answer.text, (path, answer.text)
        else:
            assert answer.status_code == 200, (path, answer.text[:300])


@pytest.mark.parametrize("recorded", ["abc", "", "256.0", "1e3", "1e19", "999999", " 256"])
def test_a_recorded_dimension_that_is_no_whole_number_is_a_finding_repair_mends(run, vault_brain_copy, recorded):
    """brain_meta's dimension set with plain SQL to text that is no whole number:
    check lists it like any other value of the wrong kind (it used to answer 'run
    check' itself) and --repair makes it the stored vectors' (review 10, F3)."""
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute("update brain_meta set value = ? where key = 'dimension'", [recorded])
    conn.close()
    found = run("brain", "check", vault_brain_copy)
    assert found.exit_code == 1 and "run sqlite-utils brain check" not in found.output, found.output
    assert f"brain_meta dimension value: {recorded!r}, not 256" in found.output
    assert "(--repair makes it '256')" in found.output
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    conn = brain_sql.connect(vault_brain_copy)
    assert conn.execute("select value from brain_meta where key = 'dimension'").fetchone()[0] == "256"
    assert brain_sql.recall(conn, {"q": "what does the graph leg do"})["hits"][0]["title"] == "Graph Leg"
    assert run("brain", "check", vault_brain_copy).output.endswith(": consistent\n")


def test_a_model_folder_holding_a_named_pipe_is_refused_not_waited_on(run, db_path, tmp_path, narrow_model):
    """brain_meta's model set to a folder whose config.json is a named pipe (review
    13, F5): opening it would block for ever; it is not a model that loads here."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    folder = tmp_path / "piped"
    shutil.copytree(narrow_model, folder)
    (folder / "config.json").unlink()
    os.mkfifo(folder / "config.json")
    conn = brain_sql.connect(db_path)
    conn.execute("update brain_meta set value = ? where key = 'model'", (str(folder),))
    conn.close()
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and "config.json is not a regular file" in " ".join(found.output.split())
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output


def test_an_installed_model_as_wide_as_the_brains_is_set_back_not_used_to_reembed(run, db_path, tmp_path):
    """brain_meta's model set with plain SQL to another installed model of the same
    width (review 13, finding 6): check names that value, and --repair sets back the
    model every memory records, re-embedding nothing."""
    other = model_folder(tmp_path / "other-256", lambda vectors: -vectors)
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    vectors = conn.execute("select knowledge_id, embedding_int8 from vec_knowledge order by 1").fetchall()
    conn.execute("update brain_meta set value = ? where key = 'model'", (other,))
    conn.close()
    found = run("brain", "check", db_path)
    text = " ".join(found.output.split())
    assert found.exit_code == 1 and "'wordllama/l2_supercat', the model every memory was embedded with" in text, text
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    conn = brain_sql.connect(db_path)
    assert conn.execute("select value from brain_meta where key = 'model'").fetchone() == ("wordllama/l2_supercat",)
    assert conn.execute("select knowledge_id, embedding_int8 from vec_knowledge order by 1").fetchall() == vectors


def test_a_model_folder_holding_a_named_pipe_in_a_sub_folder_or_an_empty_name_is_refused(
    run, db_path, tmp_path, monkeypatch
):
    """Review 14: model2vec reads a sub-folder's layout too (a pipe there hung it), and
    an empty model name is no folder (it was the folder the command ran in)."""
    folder = tmp_path / "layered"
    model_folder(folder / "0_StaticEmbedding", lambda vectors: vectors)
    (folder / "0_StaticEmbedding" / "tokenizer.json").unlink()
    os.mkfifo(folder / "0_StaticEmbedding" / "tokenizer.json")
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    model_folder(tmp_path / "here", lambda vectors: -vectors)
    monkeypatch.chdir(tmp_path / "here")  # a model folder: '' named it
    for value in (str(folder), ""):
        conn = brain_sql.connect(db_path)
        conn.execute("update brain_meta set value = ? where key = 'model'", (value,))
        conn.close()
        found = run("brain", "check", db_path)
        assert found.exit_code == 1 and "brain_meta model value" in found.output, found.output
        repaired = run("brain", "check", db_path, "--repair")
        assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output


@pytest.mark.parametrize(
    "change",
    ["delete from brain_meta where key = 'model'", "update brain_meta set value = ''", "delete from brain_meta"],
)
def test_a_model_row_deleted_or_emptied_says_run_check_and_repair_restores_it(run, db_path, change):
    """Review 21, R3: brain_meta's model row deleted (or emptied) with plain SQL; and
    every brain_meta row deleted (review 22, F1). The
    memories still say which model their vectors are of, so the brain is one still:
    recall, stats and init say to run check (not "not a brain: init", nor that a
    rebuild is the only way), the server's recall answers 409 saying so, check names
    the row, and --repair restores the model the memories name."""
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    conn = brain_sql.connect(db_path)
    with conn:
        conn.execute(change.replace("set value = ''", "set value = '' where key = 'model'"))
    conn.close()
    for command in (("recall", db_path, "graph leg"), ("stats", db_path), ("init", db_path)):
        said = run("brain", *command)
        assert said.exit_code == 1 and "Traceback" not in said.output, said.output
        assert "sqlite-utils brain check" in said.output and "not a brain" not in said.output, said.output

    async def served():
        return await Datasette([db_path]).client.get(f"/{db_path.stem}/-/recall?q=graph")

    answer = asyncio.run(served())
    assert answer.status_code == 409 and "sqlite-utils brain check" in answer.json()["error"], answer.text
    found = run("brain", "check", db_path)
    assert found.exit_code == 1, found.output
    assert "brain_meta model value:" in found.output and "--repair makes it 'wordllama/l2_supercat'" in found.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    assert run("brain", "recall", db_path, "graph leg").exit_code == 0
    assert brain_sql.info(brain_sql.connect(db_path))["model"] == "wordllama/l2_supercat"


def test_another_files_brain_meta_table_does_not_make_it_a_brain(run, tmp_path):
    """Review 22, F2: a file that is no brain but has a table named brain_meta (of
    another key) is not taken for one: the CLI says so, and serving it writes no
    brain schema into it."""
    path = foreign_file(
        tmp_path / "fake.db",
        "create table brain_meta (key text primary key, value); create table t (a);"
        "insert into brain_meta values ('foo', 'bar');",
    )
    recalled = run("brain", "recall", str(path), "coffee")
    assert recalled.exit_code == 1 and "is not a brain" in recalled.output, recalled.output

    async def served():
        return await Datasette([str(path)]).client.get("/fake")

    assert asyncio.run(served()).status_code == 200
    assert set(sqlite_utils.Database(path).table_names()) == {"brain_meta", "t"}


def detach_last_chunk(conn, column, detached):
    """Move the last chunk of the first document of several chunks off it with plain
    SQL (document_id set to the SQL value `detached`): (its `column`, its id)."""
    value, chunk = conn.execute(
        f"select {column}, max(id) from knowledge where document_id = "
        "(select document_id from documents where chunks > 1 order by document_id limit 1)"
    ).fetchone()
    with conn:
        conn.execute(f"update knowledge set document_id = {detached} where id = ?", [chunk])
    return value, chunk


@pytest.mark.parametrize("detached", ["'zz'", "null"])
def test_a_chunk_moved_off_its_document_is_named_and_given_back(run, vault_brain_copy, detached):
    """Review 22, F3: a chunk's document_id set with plain SQL to an id no document has
    (or NULL) left it out of its document: --repair said consistent, a prune never
    removed it and an ingest stored it again. Check names the chunk, --repair gives it
    back to the one document of its file."""
    conn = brain_sql.connect(vault_brain_copy)
    document, chunk = detach_last_chunk(conn, "document_id", detached)
    found = run("brain", "check", str(vault_brain_copy))
    assert found.exit_code == 1 and f"knowledge {chunk} document_id" in found.output, found.output
    repaired = run("brain", "check", str(vault_brain_copy), "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    assert conn.execute("select document_id from knowledge where id = ?", [chunk]).fetchone() == (document,)


def test_chunks_of_two_records_moved_off_their_documents_are_refused_by_name(run, db_path, tmp_path):
    """Review 22, F3: chunks of a records file (whose documents are its records) moved
    off their documents: with two records' documents each missing its chunk, which
    was whose is not the brain's to guess; --repair names them and changes nothing."""
    records = tmp_path / "data.jsonl"
    records.write_text('{"_id": "a1", "text": "alpha one"}\n{"_id": "a2", "text": "alpha two"}\n')
    assert run("brain", "ingest", str(db_path), str(records)).exit_code == 0
    conn = brain_sql.connect(db_path)
    with conn:
        conn.execute("update knowledge set document_id = 'zz', external_id = null")
    refused = run("brain", "check", str(db_path), "--repair")
    assert refused.exit_code == 1 and "cannot tell which document" in refused.output, refused.output
    # untitled, without their ids: no document of the file can be told to be either's (review 100)
    assert "knowledge 1 (document_id 'zz': no document of its file could be its)" in refused.output
    assert conn.execute("select document_id from knowledge where id = 1").fetchone() == ("zz",)


def canned_recall(path, capfd, form="json"):
    """(the answer to the canned recall query on the brain at `path`, what the server logged)."""

    async def canned():
        return await Datasette([str(path)]).client.get(f"/brain/recall.{form}?q=refund")

    answer = asyncio.run(canned())
    return answer, capfd.readouterr().err


@pytest.mark.parametrize("change", ["title = x'ff00'", "confidence = 'high'"])
def test_the_sql_functions_on_a_brain_holding_a_blob_title_log_run_check_not_a_traceback(
    vault_brain_copy, capfd, change
):
    """Review 14, F3: the canned recall query (SQL calling brain_fts) on a brain whose
    title plain SQL made a BLOB: SQLite answers only "user-defined function raised
    exception", so the server's log line is what tells the operator: one line saying
    the brain holds values of the wrong kind and to run check, not an AttributeError's
    traceback. So too when the query passes such a value on to a function as its
    argument (brain_boost's confidence: review 16, F1)."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute(f"update knowledge set {change} where id = (select min(id) from knowledge)")
    conn.close()

    answer, logged = canned_recall(vault_brain_copy, capfd)
    assert answer.status_code == 409 and "run sqlite-utils brain check" in answer.json()["error"], answer.text
    assert "Traceback" not in logged and "AttributeError" not in logged, logged
    assert "run sqlite-utils brain check" in logged, logged
    assert ("values of the wrong kind" if "title" in change else "a memory's own?") in logged, logged
    answer, _ = canned_recall(vault_brain_copy, capfd, "csv")  # Datasette's CSV was a 200 of no columns (review 113)
    assert answer.status_code == 409 and "run sqlite-utils brain check" in answer.text, answer.text


@pytest.mark.parametrize("model", ["nope/model", "nope/\udcffmodel"])
def test_the_sql_functions_on_a_brain_whose_model_is_not_installed_log_one_line(vault_brain_copy, capfd, model):
    """Review 18's note: the canned recall query on a brain whose recorded model plain
    SQL changed to one not installed here logged a traceback with a locals panel
    (which may print the caller's query text); now the one line saying what to run."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute(
            "update brain_meta set value = cast(? as text) where key = 'model'",
            [model.encode("utf-8", "surrogateescape")],
        )
    conn.close()

    answer, logged = canned_recall(vault_brain_copy, capfd)
    assert answer.status_code == 409 and "run sqlite-utils brain check" in answer.json()["error"], answer.text
    assert "Traceback" not in logged and "locals" not in logged, logged
    assert "brain_sql: " in logged and "run sqlite-utils brain check" in logged, logged


def test_a_409_for_values_of_the_wrong_kind_names_no_row_a_caller_may_not_see(run, vault_brain_copy):
    """Review 15, F3: a BLOB title and a hidden note's words copied with SQL into a
    whole-number column of a /hidden memory: every recall answers 409 (the brain's
    state cannot be built), and the answer says to run check without the rows' ids or
    values, which may be anyone's; the CLI, run by whoever holds the file, names them."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        without_rules(conn)
        hidden = conn.execute("select max(id) from knowledge").fetchone()[0]
        conn.execute(
            "update knowledge set scope = '/hidden', line_start = 'the vault code is 4417' where id = ?", [hidden]
        )
        conn.execute("update knowledge set title = x'ff00' where id = ?", [hidden - 1])
    conn.close()

    async def recalled():
        datasette = Datasette([str(vault_brain_copy)])
        return await datasette.client.get("/brain/-/recall?q=what+does+the+graph+leg+do&scope=/acme")

    answer = asyncio.run(recalled())
    said = answer.json()["error"]
    assert answer.status_code == 409 and "run sqlite-utils brain check" in said, answer.text
    assert "4417" not in said and f"knowledge {hidden}" not in said and "BLOB" not in said, said
    result = run("brain", "recall", vault_brain_copy, "what does the graph leg do")
    assert result.exit_code == 1 and f"knowledge {hidden - 1} title" in result.output, result.output


@pytest.mark.parametrize(
    "answer, unreadable",
    [
        ({"hits": [{"title": "a", "score": 0.5, "tags": ["x"]}], "n": None}, False),
        ({"hits": [{"title": b"\xff\x00"}]}, True),
        ({"hits": [{"confidence": float("inf")}]}, True),
        ([[float("nan")]], True),
        ({"rows": "row"}, False),
        ({"rows": "blob row"}, True),
    ],
)
def test_an_answer_holding_a_blob_or_an_infinity_is_told_apart_from_one_json_carries(answer, unreadable):
    """What every operation's answer is checked by (faults.named): a BLOB read where
    text belongs or a number JSON has not, at any depth and in a Row of Datasette's
    connections, is unreadable; a plain answer is not."""
    conn = brain_sql.connection.sqlite3.connect(":memory:")
    conn.row_factory = brain_sql.connection.sqlite3.Row
    if answer.get("rows") if isinstance(answer, dict) else False:
        answer = {
            "rows": [
                conn.execute("select x'ff' as a" if answer["rows"] == "blob row" else "select 'a' as a").fetchone()
            ]
        }
    assert values.holds_unreadable(answer) is unreadable


def test_metadata_holding_a_number_past_a_doubles_range_is_named(run, vault_brain_copy):
    """Review 17, F1: metadata '{"a": [{"b": 1e999}]}' written with SQL is valid JSON to
    SQLite but an infinity once read, which no export writes: check names it (it said
    consistent, while export answered "run check"), and --repair refuses it by name."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        memory = conn.execute("select min(id) from knowledge").fetchone()[0]
        conn.execute("update knowledge set metadata = ? where id = ?", ['{"a": [{"b": 1e999}]}', memory])
    conn.close()
    for extra in ([], ["--repair"]):
        result = run("brain", "check", vault_brain_copy, *extra)
        assert result.exit_code == 1 and f"knowledge {memory} metadata" in result.output, result.output
        assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "change, named",
    [
        ("update knowledge set title = cast(x'52ff66756e64' as text) where id = {memory}", "knowledge {memory} title"),
        ("update knowledge set content = cast(x'52ff' as text) where id = {memory}", "knowledge {memory} content"),
        ("update entities set name = cast(x'52ff' as text) where id = {entity}", "entities {entity} name"),
        # review 18, F1 and F3: a NUL before the bad byte, a scope, metadata holding an exponent
        ("update entities set name = cast(x'4100ff' as text) where id = {entity}", "entities {entity} name"),
        ("update knowledge set title = cast(x'4100ff' as text) where id = {memory}", "knowledge {memory} title"),
        ("update knowledge set scope = cast(x'2f61ff' as text) where id = {memory}", "knowledge {memory} scope"),
        (
            "update knowledge set metadata = cast(x'7b2261223a2031653520ff7d' as text) where id = {memory}",
            "knowledge {memory} metadata",
        ),
        # review 18, F1, where it was named by column only: a column check reads before it
        # names values, and a table's own key (its rows are named by rowid)
        (
            "update knowledge set embedding_model = cast(x'6d6fff' as text) where id = {memory}",
            "knowledge {memory} embedding_model",
        ),
        (
            "update documents set document_id = cast(x'6d6fff' as text) where rowid = {document}",
            "documents rowid {document} document_id",
        ),
    ],
)
def test_text_that_is_not_utf8_is_named_as_a_value_of_the_wrong_kind(run, vault_brain_copy, change, named):
    """Review 17, F2: text plain SQL wrote that is not UTF-8 (cast(x'ff' as text)) is
    stored by SQLite as given and cannot be read by Python: check named nothing and
    stopped saying the file was damaged and to run check (itself). It is named by row
    and column, --repair refuses it by name, and recall says to run check."""
    conn = brain_sql.connect(vault_brain_copy)
    ids = {
        "memory": conn.execute("select min(id) from knowledge").fetchone()[0],
        "entity": conn.execute("select min(entity_id) from documents").fetchone()[0],
        "document": conn.execute("select min(rowid) from documents").fetchone()[0],
    }
    with conn:
        without_rules(conn)
        conn.execute(change.format(**ids))
    conn.close()
    for extra in ([], ["--repair"]):
        result = run("brain", "check", vault_brain_copy, *extra)
        assert result.exit_code == 1 and "Traceback" not in result.output, result.output
        assert f"{named.format(**ids)}: text that is not UTF-8" in result.output, result.output
    result = run("brain", "recall", vault_brain_copy, "refund")  # answered, or refused saying to run check
    assert result.exit_code == 0 or "run sqlite-utils brain check" in result.output, result.output
    assert "damaged" not in result.output and "Traceback" not in result.output, result.output


def test_brain_meta_text_that_is_not_utf8_is_named_or_left_out(run, vault_brain_copy, tmp_path):
    """Review 18, F1 and F2: brain_meta's model written as text that is not UTF-8 is a
    model not installed here, which check names and --repair sets back; a row whose
    key is such text (no key the brain reads) is left out, never a KeyError's
    traceback nor "not a brain"."""
    junk = tmp_path / "junk.db"
    shutil.copy(vault_brain_copy, junk)
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute("update brain_meta set value = cast(x'6d6fff' as text) where key = 'model'")
    conn.close()
    result = run("brain", "check", vault_brain_copy)
    assert result.exit_code == 1 and "brain_meta model value: 'mo\\\\xff', not a model installed here" in result.output
    assert run("brain", "check", vault_brain_copy, "--repair").exit_code == 0
    assert run("brain", "check", vault_brain_copy).exit_code == 0
    conn = brain_sql.connect(junk)
    with conn:
        conn.execute("insert into brain_meta (key, value) values (cast(x'6bff' as text), 'x')")
    conn.close()
    result = run("brain", "recall", junk, "refund")
    assert result.exit_code == 0 and "Traceback" not in result.output, result.output
    # review 19, F1: named by check (its bytes) and deleted by --repair, no key the brain reads
    result = run("brain", "check", junk)
    assert result.exit_code == 1 and "brain_meta x'6bff' key: text that is not UTF-8 (2 bytes)" in result.output
    assert run("brain", "check", junk, "--repair").exit_code == 0
    assert run("brain", "check", junk).exit_code == 0


@pytest.mark.parametrize("key", ["schema_version", "dimension"])
def test_brain_meta_numbers_written_as_text_not_utf8_are_named_by_row(run, vault_brain_copy, key):
    """Review 19, F1: brain_meta's schema_version written as text that is not UTF-8 was
    named by column only and never mended, and init (which a "not a brain" message
    advises) ended in a ValueError's traceback: now named by key as any other text
    that is no number, init says to run check, --repair sets it back."""
    value = "x'52ff'"
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute(f"update brain_meta set value = cast({value} as text) where key = ?", [key])
    conn.close()
    result = run("brain", "init", vault_brain_copy)
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert f"brain_meta {key} value: " in result.output and "run sqlite-utils brain check" in result.output
    result = run("brain", "check", vault_brain_copy)
    assert result.exit_code == 1 and f"brain_meta {key} value: " in result.output, result.output
    assert run("brain", "check", vault_brain_copy, "--repair").exit_code == 0
    assert run("brain", "check", vault_brain_copy).exit_code == 0


def test_a_blob_key_spelled_as_a_brain_meta_key_is_none_of_its_keys(run, vault_brain_copy):
    """Review 20, C1: brain_meta read through its not-UTF-8 fallback took a BLOB key
    spelled 'model' for the model (the brain then recorded 'evil/model'), as the fast
    path never does: a key that is no text is none of brain_meta's."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute("insert into brain_meta values (cast('model' as blob), 'evil/model')")
        conn.execute("update brain_meta set value = cast(x'31ff' as text) where key = 'schema_version'")
    conn.close()
    result = run("brain", "check", vault_brain_copy)
    assert result.exit_code == 1 and "brain_meta schema_version value" in result.output, result.output
    assert "evil/model" not in result.output, result.output
    assert schema.stored_meta(brain_sql.connect(vault_brain_copy))["model"] != "evil/model"


@pytest.mark.parametrize(
    # (one without its model row is no brain: its canned queries are not there)
    "change",
    [
        "delete from brain_meta where key = 'dimension'",
        "update brain_meta set key = cast(key as blob) where key = 'dimension'",
    ],
)
def test_the_sql_functions_on_a_brain_missing_a_brain_meta_row_log_run_check(vault_brain_copy, capfd, change):
    """Review 20, N5: brain_meta's dimension row deleted with plain SQL: the canned
    recall query logged a KeyError's traceback; now the one line naming it, run check."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute(change)
    conn.close()

    answer, logged = canned_recall(vault_brain_copy, capfd)
    assert answer.status_code == 409 and "run sqlite-utils brain check" in answer.json()["error"], answer.text
    assert "Traceback" not in logged and "KeyError" not in logged, logged
    assert "brain_sql: " in logged and "run sqlite-utils brain check" in logged, logged


def foreign_file(path, script):
    """Another app's SQLite file at `path`, made by `script`."""
    conn = sqlite3.connect(path)
    conn.executescript(script)
    conn.commit()
    conn.close()
    return path


FOREIGN = {
    # brain_meta beside another app's knowledge table (none of a brain's columns)
    "bk": "create table brain_meta (key text primary key, value); insert into brain_meta values ('foo', 'bar');"
    "create table knowledge (id integer primary key, text); insert into knowledge (text) values ('hello');",
    # brain_meta naming a model, and no brain's tables at all
    "bmodel": "create table brain_meta (key text primary key, value); "
    "insert into brain_meta values ('model', 'gpt-4o'); create table t (a);",
}


@pytest.mark.parametrize("name", sorted(FOREIGN))
def test_another_apps_knowledge_or_model_key_makes_no_brain_and_serving_it_beside_one_fails_nothing(
    run, vault_brain_copy, name
):
    """Review 23, F1: a file holding brain_meta beside another app's knowledge table,
    or brain_meta with a `model` key and no brain's tables, was taken for a brain: served
    beside a brain it made the OpenAI routes 500 for every brain on the server, and was
    listed as one. It is no brain: the CLI says so, the routes serve the real brain's
    model, and nothing is written into it."""
    path = foreign_file(vault_brain_copy.parent / f"{name}.db", FOREIGN[name])
    tables = set(sqlite_utils.Database(path).table_names())
    assert not brain_sql.is_brain(sqlite3.connect(path))
    said = run("brain", "stats", str(path))
    assert said.exit_code == 1 and "is not a brain" in said.output, said.output

    async def served():
        datasette = Datasette([str(vault_brain_copy), str(path)])
        models = await datasette.client.get("/-/brain/v1/models")
        model = await datasette.client.get("/-/brain/v1/models/wordllama/l2_supercat")
        embedded = await datasette.client.post("/-/brain/v1/embeddings", json={"input": "hi"})
        menu = await datasette.client.get("/")
        return models, model, embedded, menu

    models, model, embedded, menu = asyncio.run(served())
    assert models.status_code == 200 and [m["id"] for m in models.json()["data"]] == ["wordllama/l2_supercat"]
    assert model.status_code == 200 and embedded.status_code == 200, (model.text, embedded.text)
    assert f"Recall from {name}" not in menu.text
    assert set(sqlite_utils.Database(path).table_names()) == tables


def test_a_dropped_brain_meta_is_made_again_from_the_memories_model(run, vault_brain_copy):
    """Review 23, F5: brain_meta DROPPED with plain SQL (review 22 mended it emptied)
    made the file "not a brain: init", and every command said no repair could make it
    again, though every memory names the model its vector was made with. It is a brain
    still: recall says to run check, check names the table, --repair makes it again
    from the memories, and recall works."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute("drop table brain_meta")
    conn.close()
    for command in (("recall", "graph leg"), ("init",)):
        said = run("brain", command[0], vault_brain_copy, *command[1:])
        assert said.exit_code == 1 and "not a brain" not in said.output and "check" in said.output, said.output
    found = run("brain", "check", vault_brain_copy)
    assert found.exit_code == 1 and "brain_meta" in found.output, found.output
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    assert brain_sql.info(brain_sql.connect(vault_brain_copy)) == {
        "model": "wordllama/l2_supercat",
        "dimension": 256,
        "schema_version": schema.SCHEMA_VERSION,
    }
    assert run("brain", "recall", vault_brain_copy, "graph leg").exit_code == 0


@pytest.mark.parametrize("column", ["document_id", "source_path", "external_id", "heading_path", "metadata", "tags"])
def test_a_blob_in_a_memorys_placement_is_a_409_from_export_not_a_traceback(run, vault_brain_copy, column):
    """Review 23, F4: a BLOB knowledge.document_id made `brain export` a TypeError's
    traceback and /-/export.jsonl a 500; the export says to run check, as every
    other surface does, and check names the cell."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        without_rules(conn)
        conn.execute(f"update knowledge set [{column}] = x'ff00' where id = (select min(id) from knowledge)")
    conn.close()

    async def exported():
        return await Datasette([str(vault_brain_copy)]).client.get("/brain/-/export.jsonl")

    answer = asyncio.run(exported())
    assert answer.status_code == 409 and "sqlite-utils brain check" in answer.text, answer.text[:300]
    result = run("brain", "export", vault_brain_copy)
    assert result.exit_code == 1 and "Traceback" not in result.output and "brain check" in result.output
    assert column in run("brain", "check", vault_brain_copy).output


def records_brain(run, db_path, tmp_path):
    """A brain of one records file of two records, r0 and r1."""
    records = tmp_path / "data.jsonl"
    records.write_text(
        "".join(json.dumps({"_id": f"r{i}", "content": f"Record {i} about alpacas."}) + "\n" for i in (0, 1))
    )
    assert run("brain", "ingest", str(db_path), str(records)).exit_code == 0
    return brain_sql.connect(db_path)


def test_a_chunk_whose_records_document_row_is_gone_is_given_to_no_other_record(run, db_path, tmp_path):
    """Review 23, F2 (a): record r1's documents row deleted with plain SQL: --repair
    gave its chunk to r0's document (the file's only one), so forgetting r0 then forgot
    r1 too; then it refused, and told the user to delete the chunk (review 95). r1's
    row is made again from its chunk, which stays r1's."""
    conn = records_brain(run, db_path, tmp_path)
    with conn:
        conn.execute("delete from documents where document_id like '%#r1'")
    assert "is now consistent" in run("brain", "check", str(db_path), "--repair").output
    assert conn.execute("select chunks from documents where document_id like '%#r1'").fetchall() == [(1,)]
    owners = conn.execute("select external_id, document_id from knowledge order by id").fetchall()
    assert [(external_id, document_id.rsplit("#")[1]) for external_id, document_id in owners] == [
        ("r0", "r0"),
        ("r1", "r1"),
    ]


def test_a_lost_documents_row_is_made_again_of_its_own_chunks_only(run, db_path, tmp_path):
    """Review 98: r0's documents row deleted and r1's chunk moved under r0's id: --repair
    gave r0's chunk to r1's document and made r0's row again of r1's chunk, then said
    consistent (the two records swapped). Each chunk goes back to its own record."""
    conn = records_brain(run, db_path, tmp_path)
    before = conn.execute("select external_id, document_id from knowledge order by id").fetchall()
    with conn:
        conn.execute("delete from documents where document_id like '%#r0'")
        conn.execute("update knowledge set document_id = ? where external_id = 'r1'", [before[0][1]])
    assert "is now consistent" in run("brain", "check", str(db_path), "--repair").output
    assert conn.execute("select external_id, document_id from knowledge order by id").fetchall() == before
    assert conn.execute("select document_id, chunks from documents order by document_id").fetchall() == [
        (d, 1) for _, d in before
    ]


def test_records_without_an_id_are_not_swapped_by_a_repair(run, db_path, tmp_path):
    """Review 99: the same as above for records without an `_id` (each known by a key of
    its text): any document of the file missing a chunk was taken as its. A chunk goes
    only to a document of its own title, and a row made again holds one title's chunks."""
    records = tmp_path / "r.jsonl"
    records.write_text('{"title": "Bravo", "text": "Bravo is about boats."}\n{"title": "Alpha", "text": "Apples."}\n')
    assert run("brain", "ingest", str(db_path), str(records)).exit_code == 0
    conn = brain_sql.connect(db_path)
    before = conn.execute("select title, document_id from knowledge order by id").fetchall()
    with conn:
        conn.execute("delete from documents where document_id = ?", [before[0][1]])
        conn.execute("update knowledge set document_id = ? where title = 'Alpha'", [before[0][1]])
    assert "is now consistent" in run("brain", "check", str(db_path), "--repair").output
    assert conn.execute("select title, document_id from knowledge order by id").fetchall() == before
    assert sorted(conn.execute("select title, document_id from documents").fetchall()) == sorted(before)


def test_untitled_records_without_an_id_moved_under_one_id_are_refused_not_swapped(run, db_path, tmp_path):
    """Review 100: the same without titles: nothing tells the two apart, and two chunks
    of one place under one id are no document. --repair names them and changes nothing."""
    records = tmp_path / "r.jsonl"
    records.write_text('{"text": "Bravo is about boats."}\n{"text": "Apples."}\n')
    assert run("brain", "ingest", str(db_path), str(records)).exit_code == 0
    conn = brain_sql.connect(db_path)
    first = conn.execute("select document_id from knowledge order by id").fetchone()[0]
    with conn:
        conn.execute("delete from documents where document_id = ?", [first])
        conn.execute("update knowledge set document_id = ? where id = 2", [first])
    refused = run("brain", "check", str(db_path), "--repair")
    assert refused.exit_code == 1 and "cannot tell which document" in refused.output, refused.output
    assert conn.execute("select document_id from knowledge order by id").fetchall() == [(first,), (first,)]


def test_remembered_memories_whose_documents_rows_are_gone_are_named_and_made_again(run, db_path):
    """Review 98: every `documents` row of remembered memories deleted with plain SQL, and
    check said consistent (no document of their "file" was left to notice it by)."""
    conn = brain_sql.connect(db_path)
    brain_sql.remember(conn, [{"_id": "a", "title": "A", "text": "alpha"}, {"text": "one without an id"}])
    before = conn.execute("select document_id, title, chunks from documents order by document_id").fetchall()
    with conn:
        conn.execute("delete from documents")
    found = run("brain", "check", str(db_path))
    assert found.exit_code == 1 and "knowledge 1 document_id 'remember#a'" in found.output, found.output
    assert "is now consistent" in run("brain", "check", str(db_path), "--repair").output
    assert conn.execute("select document_id, title, chunks from documents order by document_id").fetchall() == before


def test_a_records_chunk_moved_off_is_given_back_to_its_own_record(run, db_path, tmp_path):
    """The chunk of r0 moved off its document: of the file's two documents only r0's
    misses a chunk (and holds none of another record): --repair gives it back."""
    conn = records_brain(run, db_path, tmp_path)
    document = conn.execute("select document_id from knowledge where external_id = 'r0'").fetchone()[0]
    with conn:
        conn.execute("update knowledge set document_id = 'zz' where external_id = 'r0'")
    repaired = run("brain", "check", str(db_path), "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    assert conn.execute("select document_id from knowledge where external_id = 'r0'").fetchone() == (document,)


def test_a_detached_chunk_stored_again_since_is_not_given_back_beside_its_copy(run, tmp_path):
    """Review 23, F2 (b): a note's chunk moved off its document, then the note edited and
    ingested (its chunk stored again): --repair put the old chunk back beside the new
    one of the same index (recall showed it twice, and a new problem was left). It is
    refused by chunk, changing nothing."""
    vault = tmp_path / "w"
    shutil.copytree(VAULT, vault)
    db_path = tmp_path / "b.db"
    assert run("brain", "ingest", db_path, vault).exit_code == 0
    conn = brain_sql.connect(db_path)
    note, chunk = detach_last_chunk(conn, "source_path", "'zz'")
    with open(note, "a") as f:
        f.write("\n\nOne more line about llamas.\n")
    assert run("brain", "ingest", db_path, vault).exit_code == 0
    before = conn.execute("select id, document_id from knowledge order by id").fetchall()
    refused = run("brain", "check", db_path, "--repair")
    assert refused.exit_code == 1 and f"knowledge {chunk} (document_id 'zz'" in refused.output, refused.output
    assert conn.execute("select id, document_id from knowledge order by id").fetchall() == before


def test_a_remembered_memory_moved_off_its_document_is_named_and_given_back(run, db_path, tmp_path):
    """Review 23, F3: a remembered memory (no file) moved off its document: check said
    consistent after --repair, and the next remember of its _id kept both texts. Check
    names it, --repair gives it back to its record's document, and a remember of the
    same _id replaces it."""
    record = tmp_path / "m2.json"
    record.write_text('{"_id": "m2", "content": "A line about owls."}')
    said = run("brain", "remember", db_path, record)
    assert said.exit_code == 0, said.output
    conn = brain_sql.connect(db_path)
    with conn:
        conn.execute("update knowledge set document_id = 'zz' where external_id = 'm2'")
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and "knowledge 1 document_id 'zz'" in found.output, found.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    record.write_text('{"_id": "m2", "content": "A line about owls, revised."}')
    again = run("brain", "remember", db_path, record)
    assert again.exit_code == 0, again.output
    assert conn.execute("select content from knowledge").fetchall() == [("A line about owls, revised.",)]


HALF_BRAINS = {
    "alone": "",
    # another app's brain_meta beside it (review 25, F4), or one naming a model
    "foreign meta": "create table brain_meta (foo, bar); insert into brain_meta values (1, 2);",
    "meta with a model": "create table brain_meta (key text primary key, value);"
    "insert into brain_meta values ('model', 'wordllama/l2_supercat');",
}


@pytest.mark.parametrize("beside", sorted(HALF_BRAINS))
def test_a_table_of_a_brains_columns_alone_is_no_brain_and_init_names_why_it_cannot(run, tmp_path, beside):
    """Review 24, F1: a file whose only table is a knowledge of a brain's columns was
    taken for a brain: every command sent the user to init, and init was a traceback.
    It is no brain (no brain_instance, no record of migrations), whatever brain_meta
    it has beside: the commands say so, and init says it cannot make one of it,
    adding nothing."""
    path = foreign_file(
        tmp_path / "h.db",
        "create table knowledge (id integer primary key, title, content, scope, relevance_tier, embedding_model);"
        "insert into knowledge (title, content, scope, relevance_tier, embedding_model) "
        "values ('t', 'c', '/', 'x', 'wordllama/l2_supercat');" + HALF_BRAINS[beside],
    )
    before = sqlite_utils.Database(path).execute("select * from sqlite_master").fetchall()
    recalled = run("brain", "recall", path, "c")
    assert recalled.exit_code == 1 and "is not a brain" in recalled.output, recalled.output
    made = run("brain", "init", path)
    assert made.exit_code == 1 and isinstance(made.exception, SystemExit), made.output
    assert "no such column: source_path" in made.output and "restore the file from a copy" in made.output
    assert sqlite_utils.Database(path).execute("select * from sqlite_master").fetchall() == before


@pytest.mark.parametrize(
    "table",
    [
        "knowledge",
        "entities",
        "relationships",
        "documents",
        "knowledge_fts",
        # review 26, F1: the brain's id mark and instance, and tables a full-text or vector table keeps
        "brain_ids",
        "brain_instance",
        "knowledge_fts_docsize",
        "vec_knowledge_chunks",
    ],
)
def test_init_on_a_brain_whose_stated_table_was_dropped_says_run_check(run, vault_brain_copy, table):
    """Review 24, F2: init said "brain ready" (exit 0) on a brain whose knowledge or
    entities table plain SQL dropped, while every other command refused it; and on one
    whose documents or full-text table was dropped (review 25, F1). It says what is
    gone and to run check."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute(f"drop table {table}")
    conn.close()
    said = run("brain", "init", vault_brain_copy)
    assert said.exit_code == 1 and f"no {table} table: run sqlite-utils brain check" in said.output, said.output
    assert "brain ready" not in said.output


@pytest.mark.parametrize("record", ["drop table _sqlite_migrations", "delete from _sqlite_migrations"])
def test_brain_meta_dropped_with_the_record_of_migrations_is_mended_as_either_alone(run, vault_brain_copy, record):
    """Review 25, F2: brain_meta dropped and the record of migrations dropped (or
    emptied) too: each alone is mended, but together the file was "not a brain:
    init", and init and --repair said no brain could be made of it, though every
    memory, its full text, vectors and brain_instance were there. It is a brain
    still: recall says to run check, and --repair makes brain_meta again from the
    memories' model, then restores the record."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        conn.execute("drop table brain_meta")
        conn.execute(record)
    conn.close()
    said = run("brain", "recall", vault_brain_copy, "graph leg")
    assert said.exit_code == 1 and "not a brain" not in said.output and "brain check" in said.output, said.output
    repaired = run("brain", "check", vault_brain_copy, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output, repaired.output
    assert run("brain", "check", vault_brain_copy).exit_code == 0
    assert run("brain", "recall", vault_brain_copy, "graph leg").exit_code == 0


@pytest.mark.parametrize(
    "command", [("recall", "c"), ("stats",), ("check",), ("check", "--repair"), ("forget", "--id", "1")]
)
def test_a_command_refusing_another_apps_file_leaves_it_as_it_was(run, tmp_path, command):
    """Review 25, F5 and F6: recall, stats, check and forget on another app's file
    said it was no brain but switched its journal to WAL first (bytes of its header
    changed, -wal and -shm files left); check called it a brain with migrations
    pending, and --repair made one of it. Each says it is no brain and leaves the
    file byte for byte as it was."""
    path = foreign_file(tmp_path / "app.db", "create table t (a); insert into t values (1);")
    before = path.read_bytes()
    said = run("brain", command[0], path, *command[1:])
    assert said.exit_code == 1 and "is not a brain" in said.output, said.output
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.db"]


@pytest.mark.parametrize("line", ["line_end = -1", "line_start = -5", "chunk_index = -3"])
def test_a_negative_line_number_is_named_by_check(run, vault_brain_copy, line):
    """Review 25, F7: a negative line_end written with plain SQL: check said
    consistent, and the export it made was refused by ingest (line numbers are from
    0), so export -> ingest lost the note; a negative chunk_index (review 26, F2)
    reordered the note's chunks in the export, and ingest gave them other ids. Check
    names the cell; --repair, which cannot tell the number, refuses by cell."""
    conn = brain_sql.connect(vault_brain_copy)
    with conn:
        without_rules(conn)
        conn.execute(f"update knowledge set {line} where id = 1")
    conn.close()
    found = run("brain", "check", vault_brain_copy)
    column = line.split()[0]
    assert found.exit_code == 1 and f"knowledge 1 {column}" in found.output, found.output
    refused = run("brain", "check", vault_brain_copy, "--repair")
    assert refused.exit_code == 1 and "cannot tell" in refused.output, refused.output


@pytest.mark.parametrize("page", [10_000, 3])
def test_a_name_index_plain_sql_emptied_is_named_and_made_again(run, vault_brain_copy, monkeypatch, page):
    """The index new text's mentions are looked up in, emptied or edited by plain SQL,
    said it was complete, so check passed while new notes naming an entity were tied
    to none. Check names those entities (read a page of entity ids at a time) and
    --repair makes the index again."""
    monkeypatch.setattr(mentions, "_FOLLOW_AT_ONCE", page)
    assert check(brain_sql.connect(vault_brain_copy)) == {}
    with sqlite3.connect(vault_brain_copy) as plain:
        held = plain.execute("select count(*) from brain_mention_names").fetchone()[0]
        plain.execute("delete from brain_mention_names where entity_id % 2 = 0")
        for odd in ("'x'", "-5"):  # ids no entity has: rows a repair must take out too
            plain.execute(f"insert into brain_mention_names (head, words, hash, entity_id) values (1, 2, 3, {odd})")
        plain.execute(
            "update brain_mention_names set hash = hash + 1 "
            "where entity_id = (select max(entity_id) from brain_mention_names)"
        )
    conn = brain_sql.connect(vault_brain_copy)
    named = check(conn)["stale_name_index"]
    assert len(named) > 3 and named[0] == -5 and named[-1] == "'x'"
    result = run("brain", "check", vault_brain_copy)
    assert result.exit_code == 1 and "the name index holds otherwise" in result.output
    assert run("brain", "check", vault_brain_copy, "--repair").exit_code == 0
    assert check(conn) == {}
    assert conn.execute("select count(*) from brain_mention_names").fetchone()[0] == held


def test_repair_says_it_mended_nothing_when_each_finding_is_the_users(run, db_path):
    """A record stored past ingest's limits is the user's to shorten or forget:
    `--repair` writes nothing and says so, never "repaired what it could" (review 154)."""
    brain = brain_sql.connect(db_path)
    assert not brain_sql.remember(brain, [{"_id": "old", "title": "Old", "text": "Kept from before."}])[0].errors
    with brain:
        brain.execute("update knowledge set metadata = ?", [json.dumps({"k": "\U0001f600" * 6000})])
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and '(_id "old"): its fields and metadata come to more than 64,000' in found.output
    before = snapshot(brain)
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 1 and f"mended nothing it may; {db_path} still has:" in repaired.output
    assert "repaired what it could" not in repaired.output and snapshot(brain) == before
