"""Filters mean the same in all their forms: as SQL on vec_knowledge's columns, as
SQL on knowledge rows, as a numpy mask, and as recall.sql's clauses (bounds from
brain_filters); `from_querydoc` reads a request once for all of them."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brain_sql
from brain_sql import querydoc
from brain_sql.filters import Filters, template
from brain_sql.vectors import VEC_METADATA

SCOPES = ["/", "/acme", "/acme/support", "/acme/sales", "/other"]
CLASSES = ["memory", "reference", "policy"]
SOURCES = ["vault", "crm", "remember", ""]
TIMES = ["2024-05-01 00:00:00", "2025-12-31 23:59:59", "2026-06-01 12:00:00", None]


@pytest.fixture(scope="module")
def conn(tmp_path_factory):
    connection = brain_sql.connect(tmp_path_factory.mktemp("filters") / "brain.db")
    brain_sql.migrate(connection)
    rows = [
        (
            f"row {i}",
            SCOPES[i % 5],
            CLASSES[i % 3],
            SOURCES[i % 4] or None,
            ["global", "eu"][i % 2],
            TIMES[i % 4],
            TIMES[(i + 1) % 4],
            i % 4,
            int(i % 7 == 0),
        )
        for i in range(120)
    ]
    connection.executemany(
        "insert into knowledge (content, scope, class, source, domain, observed_at, expires_at, relevance_tier, "
        "flagged) "
        "values (?, ?, ?, ?, ?, coalesce(?, current_timestamp), ?, ?, ?)",
        rows,
    )
    return connection


requests = st.fixed_dictionaries(
    {"q": st.just("x")},
    optional={
        "scope": st.sampled_from(SCOPES),
        "classes": st.lists(st.sampled_from(CLASSES), min_size=1, max_size=2),
        "sources": st.lists(st.sampled_from([s for s in SOURCES if s] + ["nowhere"]), min_size=1, max_size=2),
        "domain": st.sampled_from(["global", "eu", "us"]),
        "since": st.sampled_from(["2024-01-01", "2025-06-01", "2026-01-01T00:00:00Z"]),
        "until": st.sampled_from(["2025-01-01", "2026-07-01"]),
        "now": st.sampled_from(["2025-06-01", "2026-11-29"]),
        "min_relevance": st.integers(0, 3),
        "include_decayed": st.booleans(),
    },
).filter(lambda raw: raw.get("until", "9")[:10] > raw.get("since", "0")[:10])  # a window of no time is refused


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=requests)
def test_sql_mask_and_template_select_the_same_rows(conn, raw):
    filters = Filters.from_querydoc(querydoc.parse(raw))
    condition, params = filters.sql("k")
    by_sql = [r[0] for r in conn.execute(f"select k.id from knowledge k where {condition} order by k.id", params)]
    columns = {name: [] for name in VEC_METADATA}
    ids = []
    for row in conn.execute(
        f"select k.id, {', '.join(e.format(row='k') for _, e in VEC_METADATA.values())} from knowledge k"
    ):
        ids.append(row[0])
        for name, value in zip(VEC_METADATA, row[1:]):
            columns[name].append(value)
    arrays = {
        name: np.array(values, dtype=np.int64 if VEC_METADATA[name][0] == "integer" else object)
        for name, values in columns.items()
    }
    by_mask = sorted(np.array(ids)[filters.mask(arrays)].tolist())
    request = {name: raw[name] for name in raw if name != "q"}
    bound = conn.execute(
        f"with visible as (select brain_filters(?) as bounds) select k.id from knowledge k "
        f"where {template('(select bounds from visible)', row='k')} order by k.id",
        [json.dumps(request)],
    ).fetchall()
    assert by_sql == by_mask == [r[0] for r in bound]
    flagged = {r[0] for r in conn.execute("select id from knowledge where flagged = 1")}
    assert not flagged & set(by_sql)


def test_from_querydoc_reads_scope_ancestors_and_decay_defaults():
    doc = querydoc.parse({"q": "x", "scope": "/acme/support/", "include_decayed": True, "now": "2026-01-01"})
    filters = Filters.from_querydoc(doc, since="2025-01-01 00:00:00")
    assert filters.scopes == ("/", "/acme", "/acme/support")
    assert (filters.min_relevance, filters.include_decayed) == (0, True)
    assert filters.since == "2025-01-01 00:00:00"  # read from the query's text, where the request names none
    assert "now" not in filters.bounds()  # expired rows admitted
    assert Filters.from_querydoc(querydoc.parse({"q": "x"})).min_relevance == 1
