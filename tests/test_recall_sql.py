"""Recall as SQL (brain_sql.RECALL_SQL): the same order as the API for the same
request, filters included, and the same leg weights for what the caller can see."""

import json

import pytest

import brain_sql
from brain_sql.connection import sqlite3
from brain_sql.fusion import CONVEX

from .conftest import write

NOTES = {
    "Orion.md": "---\nscope: /acme/support\nclass: policy\nobserved_at: 2026-03-02\n---\n# Orion\n\n"
    "Orion is our pager vendor; support escalations page through Orion.\n",
    "Orion contract.md": "---\nscope: /acme/legal\nobserved_at: 2026-04-10\n---\n# Orion contract\n\n"
    "The Orion contract renews in spring and covers pager escalations.\n",
}
RECORDS = [
    {"_id": f"r{i}", "title": f"Escalation note {i}", "text": text, "scope": scope, "class": klass, "observed_at": when}
    for i, (text, scope, klass, when) in enumerate(
        [
            ("Pager escalations for support go to the on-call lead.", "/acme/support", "memory", "2026-02-01"),
            ("Support escalations: page the lead, then the manager.", "/acme/support", "policy", "2026-05-01"),
            ("Acme-wide escalation policy: acknowledge pages in ten minutes.", "/acme", "policy", "2026-06-15"),
            ("Escalations in sales go to the sales lead.", "/acme/sales", "memory", "2026-03-20"),
            ("Old escalation rota from last decade.", "/acme/support", "memory", "2015-01-01"),
            ("Root note: a page is an urgent alert to whoever is on call.", "/", "reference", "2026-07-01"),
            ("Escalation drill for support, quarterly.", "/acme/support", "memory", "2026-09-09"),
        ]
    )
] + [
    # validity in time: an ended rota, and a rota a newer one supersedes
    {
        "_id": "rota-2024",
        "title": "Escalation rota 2024",
        "text": "Support escalations page Kim first.",
        "scope": "/acme/support",
        "valid_from": "2024-01-01",
        "valid_to": "2025-01-01",
    },
    {
        "_id": "rota-2025",
        "title": "Escalation rota 2025",
        "text": "Support escalations page Dana first.",
        "scope": "/acme/support",
        "valid_from": "2025-01-01",
    },
    {
        "_id": "rota-2026",
        "title": "Escalation rota 2026",
        "text": "Support escalations page Sam first.",
        "scope": "/acme/support",
        "valid_from": "2026-01-01",
        "supersedes": "rota-2025",
    },
]
FILTERS = ("scope", "classes", "sources", "domain", "since", "until", "as_of")


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sql")
    for name, text in NOTES.items():
        write(folder / "notes" / name, text)
    write(folder / "records.jsonl", "\n".join(json.dumps(r) for r in RECORDS))
    connection = brain_sql.connect(folder / "brain.db")
    report = brain_sql.ingest(connection, [folder / "notes", folder / "records.jsonl"])
    assert not report.errors
    return connection


def by_sql(conn, q, k=100, **filters):
    params = {"q": q, "k": k, **{name: filters.get(name, "") for name in FILTERS}}
    return [(row[0], round(row[2], 12)) for row in conn.execute(brain_sql.RECALL_SQL, params)]


def by_api(conn, q, k=100, **filters):
    """The API's hits in its order, with their scores: fused, then nudged by the
    bounded recency and confidence boosts, as the SQL does (brain_boost)."""
    doc = {"q": q, "k": k, "prf": False, "cutoff": False, **filters}  # the SQL has no relevance cut-off
    hits = brain_sql.recall(conn, brain_sql.querydoc_from_strings(doc))["hits"]
    return [(hit["id"], round(hit["score"], 12)) for hit in hits]


@pytest.mark.parametrize(
    "q, filters",
    [
        ("pager escalations on-call lead", {}),
        ("pager escalations on-call lead", {"scope": "/acme/support"}),
        (
            "support escalations",
            {"scope": "/acme/support", "classes": "policy,memory", "since": "2026-01-01", "until": "2026-12-01"},
        ),
        ("escalation policy", {"scope": "/acme", "classes": "policy", "since": "2026-02-01T00:00:00Z"}),
        ("What do we know about Orion?", {"scope": "/acme/support", "until": "2026-08-01"}),
        ("who do support escalations page first", {}),
        ("who do support escalations page first", {"as_of": "2024-06-01"}),
        ("who do support escalations page first", {"as_of": "2025-06-01T00:00:00Z", "scope": "/acme/support"}),
    ],
)
def test_sql_order_equals_api_order_with_filters(conn, q, filters):
    sql = by_sql(conn, q, **filters)
    assert sql and sql == by_api(conn, q, **filters)
    # and over the first ten, as a user asks for them
    assert [i for i, _ in by_sql(conn, q, k=10, **filters)] == [i for i, _ in sql][:10]


def test_as_of_acts_inside_the_sql_legs(conn):
    external = dict(conn.execute("select id, external_id from knowledge"))

    def rotas(**filters):
        return [
            external[i]
            for i, _ in by_sql(conn, "who do support escalations page first", **filters)
            if (external[i] or "").startswith("rota")
        ]

    assert rotas() == ["rota-2026"]
    assert rotas(as_of="2024-06-01") == ["rota-2024"]
    assert rotas(as_of="2025-06-01") == ["rota-2025"]


def test_filters_act_inside_the_sql_legs(conn):
    scopes = dict(conn.execute("select id, scope from knowledge"))
    found = [i for i, _ in by_sql(conn, "escalations", scope="/acme/support", since="2026-01-01")]
    assert found and {scopes[i] for i in found} <= {"/", "/acme", "/acme/support"}
    observed = dict(conn.execute("select id, observed_at from knowledge"))
    assert all(observed[i] >= "2026-01-01" for i in found)


def test_a_name_known_only_outside_the_scope_leaves_the_weights_alone(conn):
    """The graph leads only when the query names an entity the caller can reach:
    'Orion contract' is known only from /acme/legal, which /acme/support cannot
    read — there it neither leads nor hides the 'Orion' inside it, as in a brain
    that never held it."""

    def weight(q, **filters):
        return conn.execute("select brain_leg_weight('graph', ?, ?)", [q, json.dumps(filters)]).fetchone()[0]

    q = "Tell me about the Orion contract"

    def fusion(q, **filters):
        return conn.execute("select brain_fusion(?, ?)", [q, json.dumps(filters)]).fetchone()[0]

    assert weight(q) == weight(q, scope="/acme/legal") == 10.0
    assert fusion(q) == fusion(q, scope="/acme/legal") == "rrf"
    assert weight("the contract renewal dates", scope="/acme/support") == CONVEX["graph"]
    assert fusion("the contract renewal dates", scope="/acme/support") == "convex"
    assert weight(q, scope="/acme/support") == weight("Tell me about Orion", scope="/acme/support") == 10.0
    assert by_sql(conn, q, scope="/acme/support") == by_api(conn, q, scope="/acme/support")


def test_brain_filters_reads_the_request_as_the_api_does(conn):
    bounds = json.loads(
        conn.execute(
            "select brain_filters(?)",
            [json.dumps({"scope": "/acme/support", "classes": "policy, memory", "since": "2026-01-01"})],
        ).fetchone()[0]
    )
    assert bounds["scopes"] == ["/", "/acme", "/acme/support"]
    assert bounds["classes"] == ["policy", "memory"]
    assert bounds["since"] == 1767225600  # 2026-01-01 UTC
    assert set(bounds["sources"]) == {r[0] for r in conn.execute("select distinct coalesce(source, '') from knowledge")}
    with pytest.raises(sqlite3.OperationalError):  # scope must be a path
        conn.execute("select brain_filters(?)", [json.dumps({"scope": "acme"})]).fetchone()


@pytest.mark.parametrize("q", ["\0", "\0 \0"])
def test_a_query_of_no_words_recalls_nothing_in_sql_and_is_named_by_the_api(conn, q):
    """SQLite reads a query up to a NUL: an empty one, no nearest neighbours, nothing
    for the graph walk to start from (it once raised in brain_ppr). The API, which
    reads past it, names the NUL as the problem."""
    assert by_sql(conn, q) == []
    with pytest.raises(brain_sql.QueryError, match="NUL character"):
        by_api(conn, q)


@pytest.mark.parametrize("q", ["\u200b", "\u00a0\u2028 \t", "\u200b\u202e"])
def test_a_query_of_invisible_marks_or_spaces_recalls_nothing_in_sql(conn, q):
    """A query of spaces and invisible marks is empty to the API (a 400) and to the SQL
    recall: it embedded the marks and answered with the nearest neighbours of nothing."""
    assert by_sql(conn, q) == []
    with pytest.raises(brain_sql.QueryError, match="q must not be empty"):
        by_api(conn, q)


def test_a_name_typed_with_odd_spaces_names_its_entity_in_sql_as_in_the_api(tmp_path):
    """Every leg reads the query's spaces as the API does: "Tom  Baker" (two spaces, a
    non-breaking one, a tab) names the entity Tom Baker, and the graph walk leads in
    SQL as in the API (review 64: only the SQL's vector leg read them so)."""
    notes = [
        ("Tom Baker", "Tom Baker leads the billing team in New York and reviews refunds."),
        ("Maria Lopez on holiday", "Maria Lopez is on holiday in August; Tom Baker covers escalations."),
        ("Refund policy", "Refunds above 500 dollars need approval from billing within two days."),
        ("Kiln maintenance", "The pottery studio kiln needs new elements every spring."),
    ]
    records = [json.dumps({"_id": f"n{i}", "title": title, "text": text}) for i, (title, text) in enumerate(notes)]
    path = write(tmp_path / "names.jsonl", "\n".join(records))
    names = brain_sql.connect(tmp_path / "names.db")
    assert not brain_sql.ingest(names, [path]).errors
    typed = ["what does Tom Baker review?"] + [f"what does Tom{space}Baker review?" for space in ("  ", "\u00a0", "\t")]
    for q in typed:
        assert names.execute("select brain_fusion(?)", [q]).fetchone()[0] == "rrf", q
        assert by_sql(names, q) == by_api(names, q) == by_api(names, typed[0]), q


def test_a_query_typed_with_two_spaces_recalls_in_sql_as_the_api_does(conn):
    """Two spaces typed by mistake, a tab or a line break are one space to the API and
    to the SQL recall (brain_query_text): the API embedded the query so and the SQL
    recall did not."""
    q = "who gets support escalations first?"
    assert by_api(conn, q)
    for spaced in ("who gets  support escalations first?", "who\tgets support\u00a0escalations\nfirst?"):
        assert by_sql(conn, spaced) == by_api(conn, spaced) == by_api(conn, q)


def test_a_name_mentioned_in_passing_does_not_let_the_graph_lead(conn):
    """The graph walk leads when what the query names is much of what it asks: a
    long question about escalations that mentions Orion once is fused by the legs'
    scores (the walk from Orion one leg among them), in SQL and in the API alike;
    a question about Orion is led by the walk."""

    def fusion(q, **filters):
        return conn.execute("select brain_fusion(?, ?)", [q, json.dumps(filters)]).fetchone()[0]

    passing = (
        "do quarterly drills page the on-call lead first, then the manager, for urgent support escalations at Orion"
    )
    about = "Tell me about Orion"
    assert fusion(passing) == "convex" and fusion(about) == "rrf"
    assert brain_sql.recall(conn, {"q": passing})["telemetry"]["fusion"] == "convex"
    assert brain_sql.recall(conn, {"q": about})["telemetry"]["fusion"] == "rrf"
    assert brain_sql.recall(conn, {"q": passing})["telemetry"]["entity_seeds"] == 1  # the walk still starts there
    assert by_sql(conn, passing) == by_api(conn, passing)
    assert by_sql(conn, about) == by_api(conn, about)


@pytest.mark.parametrize(
    "excluded", ["support escalations -Orion", 'support escalations -"Orion"', "-orion support escalations"]
)
def test_a_name_the_query_excludes_is_not_walked_from_nor_embedded(conn, excluded):
    """-Orion keeps the lexical leg from the rows saying Orion and is read by no other
    leg: the walk does not start from Orion (it did, and ranked Orion's own note first:
    review 152), and the vector leg embeds the rest; in SQL as in the API."""
    asked = "support escalations"
    assert brain_sql.recall(conn, {"q": f"{asked} Orion"})["telemetry"]["entity_seeds"] == 1
    result = brain_sql.recall(conn, {"q": excluded})
    assert result["telemetry"]["entity_seeds"] == 0
    assert conn.execute("select brain_query_text(?)", [excluded]).fetchone()[0] == asked
    assert conn.execute("select brain_fusion(?)", [excluded]).fetchone()[0] == "convex"
    assert by_sql(conn, excluded) == by_api(conn, excluded)
    similarity = {h["id"]: h["provenance"]["vector_similarity"] for h in result["hits"]}
    plain = {h["id"]: h["provenance"]["vector_similarity"] for h in brain_sql.recall(conn, {"q": asked})["hits"]}
    assert similarity and similarity == {item: plain.get(item) for item in similarity}
    assert not any("orion" in h["content"].lower() and h["provenance"]["fts_rank"] for h in result["hits"])
