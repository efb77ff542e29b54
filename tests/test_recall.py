"""Recall through the library: filters inside every leg, scopes, decay, flags, dates,
determinism, the lexical spec, abstention, and SQL order equal to the API's.
`sqlite-utils brain recall` and `brain eval`: test_cli_recall.py."""

import json
from pathlib import Path

import pytest

import brain_sql
from brain_sql import quality
from brain_sql.fusion import fuse
from brain_sql.querydoc import QueryError, parse
from brain_sql.hybrid import recall, run_legs

from .conftest import rows, write

NOW = "2026-11-29 12:00:00"
MODEL = "wordllama/l2_supercat"


def record(id_, text, **fields):
    return {"_id": id_, "title": fields.pop("title", id_), "text": text, **fields}


SCOPED = [
    record("support", "Pager escalation: sev1 pages go to the support on-call lead within five minutes.", scope="/acme/support"),
    record("acme", "Pager escalation policy for all of Acme: acknowledge pages within ten minutes.", scope="/acme"),
    record("root", "Pager escalation basics: a page is an urgent alert sent to whoever is on call.", scope="/"),
    record("sales", "Pager escalation for sales: sev1 pages go to the sales on-call lead within five minutes.", scope="/acme/sales"),
    record("other", "Pager escalation at Other Corp: sev1 pages go to the on-call lead within five minutes.", scope="/other"),
]


@pytest.fixture
def brain(tmp_path):
    path = write(tmp_path / "records.jsonl", "\n".join(json.dumps(r) for r in SCOPED))
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [path])
    assert not report.errors
    return conn


def ids(conn, result):
    external = dict(conn.execute("select id, external_id from knowledge"))
    return [external[h["id"]] for h in result["hits"]]


def leg_ids(conn, legs):
    external = dict(conn.execute("select id, external_id from knowledge"))
    return {leg: {external[i] for i in ranked} for leg, ranked in legs.ranked.items()}


def test_scope_sees_itself_and_its_parents_never_a_sibling(brain):
    result = recall(brain, {"q": "sev1 pager escalation on-call lead", "scope": "/acme/support", "now": NOW, "k": 10})
    assert result["decision"] == "ok"
    assert set(ids(brain, result)) == {"support", "acme", "root"}


def test_scope_isolation_holds_in_every_leg(brain):
    doc = parse({"q": "sales on-call lead pager escalation", "scope": "/acme/support", "now": NOW})
    legs = run_legs(brain, doc, MODEL)
    for leg, found in leg_ids(brain, legs).items():
        assert found <= {"support", "acme", "root"}, leg
    # expansion terms come only from hits the caller may read
    fused = fuse(legs.ranked, legs.weights())
    terms = quality.expansion_terms(brain, legs, fused)
    assert "sales" not in terms


def test_graph_leg_never_reaches_a_hidden_chunk(tmp_path):
    notes = tmp_path / "notes"
    write(notes / "Orion.md", "---\nscope: /acme/support\n---\n# Orion\n\nOrion is our pager vendor.\n")
    write(notes / "Orion contract.md", "---\nscope: /acme/legal\n---\n# Orion contract\n\nThe Orion contract renews in May.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [notes])
    legs = run_legs(conn, parse({"q": "What do we know about Orion?", "scope": "/acme/support", "now": NOW}), MODEL)
    assert legs.entity_seeds  # the query names a known entity: the graph walks from it
    titles = dict(conn.execute("select id, title from knowledge"))
    assert {titles[i] for i in legs.ranked["graph"]} == {"Orion"}
    legs = run_legs(conn, parse({"q": "What do we know about Orion?", "now": NOW}), MODEL)
    assert {titles[i] for i in legs.ranked["graph"]} == {"Orion", "Orion contract"}
    # an entity known only from hidden memories is not a seed, nor counted
    hidden = run_legs(conn, parse({"q": "Tell me about the Orion contract", "scope": "/acme/support", "now": NOW}), MODEL)
    assert [titles.get(n) for n in hidden.entity_seeds] != ["Orion contract"]
    named = {name for (name,) in conn.execute("select name from entities where id in (select value from json_each(?))",
             [json.dumps(hidden.entity_seeds)])}  # fmt: skip  (entity ids)
    assert "Orion contract" not in named
    seen = run_legs(conn, parse({"q": "Tell me about the Orion contract", "now": NOW}), MODEL)
    assert "Orion contract" in {name for (name,) in conn.execute(
        "select name from entities where id in (select value from json_each(?))", [json.dumps(seen.entity_seeds)])}  # fmt: skip


def test_selective_filter_still_returns_k_hits(tmp_path):
    noise = [record(f"noise{i}", "Tomato watering, tomato watering: water the tomatoes.", source="noise") for i in range(150)]
    garden = [record(f"garden{i}", f"Allotment note {i}: mulch the beds before the frost.", source="garden") for i in range(5)]
    path = write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in noise + garden))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [path])
    doc = parse({"q": "tomato watering", "sources": ["garden"], "now": NOW})
    legs = run_legs(conn, doc, MODEL)
    # every garden note is far from the query, behind 150 closer notes: only a
    # filter inside the KNN finds them
    assert leg_ids(conn, legs)["vector"] == {f"garden{i}" for i in range(5)}


def test_expired_and_archived_are_excluded_unless_asked_for(tmp_path):
    records = [
        record("live", "The coffee machine is descaled on Fridays."),
        record("expired", "The coffee machine is descaled on Mondays.", expires_at="2026-01-01"),
        record("later", "The coffee machine is descaled on Tuesdays.", expires_at="2027-01-01"),
        record("archived", "The coffee machine is descaled on Sundays.", relevance_tier=0),
    ]
    path = write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in records))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [path])
    query = {"q": "when is the coffee machine descaled", "now": NOW, "prf": False}
    assert set(ids(conn, recall(conn, query))) == {"live", "later"}
    assert set(ids(conn, recall(conn, {**query, "include_decayed": True}))) == {"live", "expired", "later", "archived"}
    assert set(ids(conn, recall(conn, {**query, "min_relevance": 0}))) == {"live", "later", "archived"}
    # evaluated at another time, expiry moves with it
    assert set(ids(conn, recall(conn, {**query, "now": "2025-06-01"}))) == {"live", "expired", "later"}


def test_ancient_expiry_is_stored_and_expires(tmp_path):
    path = write(tmp_path / "r.jsonl", json.dumps({"title": "Old", "text": "an ancient rule", "expires_at": "0001-01-01"}))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [path])
    assert rows(conn, "select expires_at from knowledge") == [("0001-01-01 00:00:00",)]
    assert brain_sql.recall(conn, {"q": "ancient rule", "include_decayed": True})["hits"]
    assert not brain_sql.recall(conn, {"q": "ancient rule"})["hits"]


def test_flagged_rows_never_returned(brain):
    brain.execute("update knowledge set flagged = 1 where external_id = 'support'")
    for query in ({"q": "sev1 pager escalation support on-call lead"}, {"q": "pager", "include_decayed": True}):
        result = recall(brain, {**query, "now": NOW, "min_relevance": 0})
        assert "support" not in ids(brain, result)
        legs = run_legs(brain, parse({**query, "now": NOW}), MODEL)
        assert all("support" not in found for found in leg_ids(brain, legs).values())


def test_relative_and_in_query_dates_against_a_fixed_now(tmp_path):
    records = [
        record("recent", "Standup notes: the pager rotation changed.", observed_at="2026-11-25T10:00:00Z"),
        record("march", "Standup notes: the pager vendor changed.", observed_at="2026-03-10"),
        record("old", "Standup notes: the pager was introduced.", observed_at="2025-06-01"),
    ]
    path = write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in records))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [path])
    base = {"now": NOW, "prf": False}
    assert set(ids(conn, recall(conn, {"q": "standup notes pager", "since": "-30d", **base}))) == {"recent"}
    assert set(ids(conn, recall(conn, {"q": "standup notes pager last week", **base}))) == {"recent"}
    assert set(ids(conn, recall(conn, {"q": "standup notes pager since March 2026", **base}))) == {"recent", "march"}
    assert set(ids(conn, recall(conn, {"q": "standup notes pager", "until": "2026-01-01", **base}))) == {"old"}
    assert set(ids(conn, recall(conn, {"q": "standup notes pager in March", **base}))) == {"march"}


def test_same_inputs_and_now_same_answer(brain):
    query = {"q": "pager escalation within five minutes", "now": NOW, "k": 5}
    first, second = recall(brain, query), recall(brain, query)
    for result in (first, second):
        result.pop("telemetry")
    assert first == second


def test_lexical_spec(tmp_path):
    records = [
        record("phrase", "Reciprocal rank fusion merges ranked lists."),
        record("words", "The rank of each fusion leg is reciprocal to its weight."),
        record("code", "The crash is in src/main.rs when the config is empty."),
        record("nocode", "The main source file crashed on start."),
    ]
    path = write(tmp_path / "r.jsonl", "\n".join(json.dumps(r) for r in records))
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [path])
    external = dict(conn.execute("select id, external_id from knowledge"))

    def lexical(q):
        legs = run_legs(conn, parse({"q": q, "now": NOW}), MODEL, with_graph=False)
        return [external[i] for i in legs.ranked["fts"]]

    assert lexical('"reciprocal rank fusion"') == ["phrase"]
    assert lexical('fusion -"ranked lists"') == ["words"]
    assert lexical("src/main.rs")[0] == "code"
    assert "phrase" not in lexical("fusion -merges")


def test_nonsense_abstains(brain):
    for q in ("flurbo gnaxle quizzotic zzyzx", "asdfghjkl qwertyuiop", "🧠🧠🧠"):
        result = recall(brain, {"q": q, "now": NOW})
        assert result["decision"] == "low_confidence" and result["hits"] == [], q
        if result["quality"]["recommendation"] == "clarify_query":
            assert result["telemetry"]["graph_rescue"] is False  # tried, did not help


def test_provenance_on_every_hit(brain):
    result = recall(brain, {"q": "sev1 pager escalation on-call lead", "now": NOW})
    for hit in result["hits"]:
        provenance = hit["provenance"]
        assert set(provenance) >= {"vector_rank", "fts_rank", "graph_rank", "fused_score", "expansion_terms"}
        assert hit["score"] == pytest.approx(provenance["fused_score"], rel=0.01)
        assert {"id", "title", "content", "class", "scope", "source", "node_kind", "lawful_basis", "region"} <= set(hit)
    assert {"embed_ms", "vector_ms", "fts_ms", "graph_ms", "total_ms", "fused_count"} <= set(result["telemetry"])
    assert 0 <= result["quality"]["confidence"] <= 1


def test_mmr_and_token_budget(brain):
    base = {"q": "sev1 pager escalation on-call lead", "now": NOW, "k": 5}
    plain = recall(brain, base)
    diverse = recall(brain, {**base, "mmr": True})
    assert sorted(ids(brain, plain)) == sorted(ids(brain, diverse))
    packed = recall(brain, {**base, "max_tokens": 40})
    assert 0 < len(packed["hits"]) < len(plain["hits"])
    assert packed["telemetry"]["tokens"] <= 40


@pytest.mark.parametrize(
    "doc, message",
    [
        ({}, "q is required"),
        ({"q": ""}, "q must not be empty"),
        ({"q": "x" * 2001}, "limit is 2000"),
        ({"q": "x", "k": 0}, "k must be from 1 to 100"),
        ({"q": "x", "k": "5"}, "k must be a whole number"),
        ({"q": "x", "colour": "red"}, "unknown field: colour"),
        ({"q": "x", "since": "yesterday-ish"}, "since 'yesterday-ish' is not a date"),
        ({"q": "x", "classes": ["gossip"]}, "classes must be among"),
        ({"q": "x", "scope": "acme"}, "scope must be a path"),
        ({"q": "x", "graph": "no"}, "graph must be true or false"),
    ],
)
def test_bad_querydoc_is_a_clear_error(doc, message):
    with pytest.raises(QueryError, match=message):
        parse(doc)


SQL = brain_sql.RECALL_SQL


def test_sql_order_equals_api_order(vault_brain_path):
    conn = brain_sql.connect(vault_brain_path)
    for q in ("how are vectors stored", "Graph Leg and Recall", "reciprocal rank fusion", "ingest markdown notes"):
        params = {"q": q, "k": 10, "scope": "", "classes": "", "sources": "", "domain": "", "since": "", "until": ""}
        by_sql = [row[0] for row in conn.execute(SQL, params)]
        by_api = [hit["id"] for hit in recall(conn, {"q": q, "k": 10, "prf": False})["hits"]]
        assert by_sql and by_sql == by_api, q


SCIFACT = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "scifact"


@pytest.mark.slow
@pytest.mark.skipif(not SCIFACT.exists(), reason="needs ../shared/data/scifact")
def test_trap_queries_abstain_and_scifact_queries_do_not(tmp_path):
    conn = brain_sql.connect(tmp_path / "scifact.db")
    brain_sql.ingest(conn, [SCIFACT / "corpus.jsonl"])
    traps = [json.loads(line)["text"] for line in open(Path(__file__).parent / "data" / "trap_queries.jsonl")]
    assert len(traps) >= 100
    abstained = sum(recall(conn, {"q": q, "now": NOW})["decision"] == "low_confidence" for q in traps)
    assert abstained / len(traps) >= 0.9
    queries = {str(q["_id"]): q["text"] for q in map(json.loads, open(SCIFACT / "queries.jsonl"))}
    test_ids = {line.split("\t")[0] for line in open(SCIFACT / "qrels" / "test.tsv")} - {"query-id"}
    abstained = sum(recall(conn, {"q": queries[i], "now": NOW})["decision"] == "low_confidence" for i in test_ids)
    assert abstained / len(test_ids) <= 0.02
