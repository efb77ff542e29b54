"""The pages on a large brain: the indexes m011 adds, and the queries that read
through them instead of every memory, so each page answers within Datasette's
time limits on a million memories — and still says what it said (each query is
checked against the plain one it replaced, on brains hypothesis makes)."""

import datetime
import re

import pytest
from datasette.app import Datasette
from datasette.utils.asgi import Request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import brain_sql
from brain_sql import browse, for_plugin, inventory, migrations
from datasette_brain import decay

from .conftest import close_brain, rows, without_rules

PAGE_INDEXES = {
    "idx_knowledge_class",
    "idx_knowledge_source",
    "idx_knowledge_domain",
    "idx_knowledge_observed",
    "idx_knowledge_decaying",
    "idx_knowledge_flagged",
    "idx_documents_entity",
    "idx_documents_chunks",
}
NOW = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def indexes(conn):
    return {name for (name,) in rows(conn, "select name from sqlite_master where type = 'index'")}


def before_page_indexes(path):
    """The brain at `path` as a version before m011 left it."""
    conn = brain_sql.connect(path)
    for name in PAGE_INDEXES:
        conn.execute(f"drop index {name}")
    conn.execute("delete from _sqlite_migrations where name = 'm011_page_indexes'")
    close_brain(conn)


@pytest.mark.parametrize("how", ["brain init", "sqlite-utils migrate"])
def test_a_brain_made_before_the_page_indexes_gets_them(run, vault_brain_copy, how):
    before_page_indexes(vault_brain_copy)
    conn = brain_sql.connect(vault_brain_copy)
    assert not PAGE_INDEXES & indexes(conn)
    listed = brain_sql.entities(conn)
    if how == "brain init":
        result = run("brain", "init", vault_brain_copy)
    else:
        result = run("migrate", vault_brain_copy, migrations.__file__)
    assert result.exit_code == 0, result.output
    assert PAGE_INDEXES <= indexes(conn)
    assert brain_sql.check(conn) == {}
    assert brain_sql.entities(conn) == listed


def test_page_indexes_a_tool_dropped_or_changed_are_named_and_rebuilt_by_check(run, vault_brain_copy):
    conn = brain_sql.connect(vault_brain_copy)
    conn.execute("drop index idx_knowledge_decaying")
    conn.execute("drop index idx_documents_entity")
    # one of the same name made otherwise: turn writes would no longer read it
    conn.execute("drop index idx_knowledge_session")
    conn.execute("create index idx_knowledge_session on knowledge(metadata)")
    found = run("brain", "check", vault_brain_copy)
    assert found.exit_code == 1
    assert "they read every memory: 2 (idx_documents_entity, idx_knowledge_decaying)" in found.output
    assert "differ from the brain's own: 1 (idx_knowledge_session)" in found.output
    assert run("brain", "check", vault_brain_copy, "--repair").exit_code == 0
    assert PAGE_INDEXES <= indexes(conn)
    assert brain_sql.check(conn) == {}
    session = conn.execute("select sql from sqlite_master where name = 'idx_knowledge_session'").fetchone()[0]
    assert "json_valid(metadata)" in session
    conn.execute("drop index idx_knowledge_class")  # made again by hand, its name in capitals: the same index
    conn.execute("create index IDX_KNOWLEDGE_CLASS on knowledge(class)")
    assert brain_sql.check(conn) == {}


# brains made of a few documents, chunks, entities and edges, the corners included:
# flagged, archived, expired and soon-expiring chunks, untitled ones, a document
# without chunks, edges a flagged or deleted memory stated, names with LIKE's signs
NAMES = ["Alpha", "alpha beta", "Gamma", "delta_x", "Ep%silon", "zeta", "Eta"]
EXPIRY = [
    None,
    None,
    "2000-01-01 00:00:00",
    "2999-01-01 00:00:00",
    "+3 days",
    "+30 days",
    "garbage",
    "2000-01-01T10:00:00Z",
]
CHUNK = st.tuples(
    st.sampled_from([None, "d1", "d2", "d2", "d3", "d3", "d3", "d4"]),  # document
    st.sampled_from([None, "", "Alpha", "beta", "Gamma"]),  # title
    st.sampled_from([0, 0, 0, 1]),  # flagged
    st.sampled_from([0, 1, 1, 2]),  # relevance tier
    st.sampled_from(EXPIRY),
    st.sampled_from(["/", "/a", "/b"]),  # scope
    st.sampled_from(["memory", "policy"]),  # class
    st.sampled_from([None, "x", "y"]),  # source
)
WORLD = st.fixed_dictionaries(
    {
        "chunks": st.lists(CHUNK, max_size=20),
        "entities": st.lists(st.sampled_from([None, "document", "tag", "thing"]), max_size=len(NAMES)),
        "documents": st.lists(st.one_of(st.none(), st.integers(0, len(NAMES) - 1)), min_size=5, max_size=5),
        "edges": st.lists(
            st.tuples(
                st.integers(0, len(NAMES) - 1),
                st.integers(0, len(NAMES) - 1),
                st.sampled_from("ab"),
                st.one_of(st.none(), st.integers(0, 19), st.just("gone")),
            ),
            max_size=12,
        ),
    }
)


def build(conn, world):
    without_rules(conn)  # its corners (an expiry of 'garbage', an edge a memory gone stated) are brains of before them
    entity_ids = [
        conn.execute("insert into entities (name, entity_type) values (?, ?)", (NAMES[i], kind)).lastrowid
        for i, kind in enumerate(world["entities"])
    ]
    chunk_ids = [
        conn.execute(
            "insert into knowledge (document_id, title, content, flagged, relevance_tier, expires_at, scope, class, "
            "source) values (?, ?, 'text', ?, ?, case when ?5 like '+%' then datetime('now', ?5) else ?5 end, ?, ?, ?)",
            (document, title, flagged, tier, expires, scope, kind, source),
        ).lastrowid
        for document, title, flagged, tier, expires, scope, kind, source in world["chunks"]
    ]
    for n, entity in enumerate(world["documents"]):  # d5 has no chunks
        entity_id = entity_ids[entity] if entity is not None and entity < len(entity_ids) else None
        conn.execute(
            "insert into documents (document_id, entity_id, chunks) "
            "values (:d, :e, (select count(*) from knowledge where document_id = :d))",
            {"d": f"d{n + 1}", "e": entity_id},
        )
    for a, b, kind, stated in world["edges"]:
        if a < len(entity_ids) and b < len(entity_ids):
            knowledge_id = (
                99_999
                if stated == "gone"
                else None
                if stated is None or stated >= len(chunk_ids)
                else chunk_ids[stated]
            )
            conn.execute(
                "insert or ignore into relationships (from_entity_id, to_entity_id, relation_type, knowledge_id) "
                "values (?, ?, ?, ?)",
                (entity_ids[a], entity_ids[b], kind, knowledge_id),
            )


def plain_entities(conn, q, entity_type, page, per_page):
    """The entities browser as one query over every entity (what entities() replaced)."""
    pattern = None if not q else "%" + q.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
    seen = f"""
    with seen as (select distinct r.from_entity_id as f, r.to_entity_id as t, r.relation_type from relationships r
                  where {browse._SEEN}),
    degree as (select id, count(*) as degree from (select f as id from seen union all select t from seen where t != f)
               group by id),
    visible as (
      select e.id, e.name, coalesce(e.entity_type, 'entity') as type, coalesce(degree.degree, 0) as degree
      from entities e left join degree on degree.id = e.id
      where (:pattern is null or e.name like :pattern escape '\\')
        and (degree.degree is not null or {browse._VISIBLE.format(e="e.id", seen=browse._SEEN)}))"""
    params = {"pattern": pattern, "type": entity_type, "limit": per_page, "offset": (page - 1) * per_page}
    listed = rows(
        conn,
        seen + " select id, name, type, degree from visible where :type is null or type = :type "
        "order by degree desc, name collate nocase, id limit :limit offset :offset",
        params,
    )
    types = rows(conn, seen + " select type, count(*) from visible group by type order by count(*) desc, type", params)
    total = rows(conn, seen + " select count(*) from visible where :type is null or type = :type", params)[0][0]
    return {"rows": listed, "total": total, "types": types}


def plain_examples(conn, limit):
    return [
        title
        for (title,) in rows(
            conn,
            "select min(title) from knowledge where flagged = 0 and relevance_tier >= 1 and title is not null "
            "and title != '' and (expires_at is null or unixepoch(expires_at) > unixepoch('now')) "
            "group by coalesce(document_id, -id) order by count(*) desc, min(id) limit ?",
            (limit,),
        )
    ]


def plain_decayed(conn, selected):
    """The decayed page's rows and facets, every memory bucketed one by one."""
    where = "".join(f" and [{name}] = :f_{name}" for name in selected)
    sql = (
        "select * from (select id, title, content, class, scope, coalesce(source, '') as source, "
        f"coalesce(domain, 'global') as domain, expires_at, relevance_tier, {browse.decay_bucket_sql(':now')} as decay "
        f"from knowledge where flagged = 0) where decay != 'live'{where}"
    )
    params = {"now": NOW, **{f"f_{name}": value for name, value in selected.items()}}
    listed = [dict(zip(browse.DECAYED_COLUMNS, r)) for r in rows(conn, f"{sql} order by expires_at, id", params)]
    facets = {
        name: dict(rows(conn, f"select [{name}], count(*) from ({sql}) group by 1 order by 2 desc, 1", params))
        for name in browse.DECAYED_FACETS
    }
    return listed, facets


@given(world=WORLD)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_each_page_says_what_the_plain_query_said(conn, monkeypatch, world):
    conn.execute("begin")
    try:
        build(conn, world)
        for q in (None, "a", "_", "%", "zzz"):
            for kind in (None, "document", "entity", "thing"):
                for page, size in ((1, 50), (1, 2), (2, 2), (3, 2), (6, 1)):
                    assert browse.entities(conn, q, kind, page, size) == plain_entities(conn, q, kind, page, size)
        for batch in (0, 1, 3, 2_000):  # every level read chunk by chunk, some, or all at once
            monkeypatch.setattr(browse, "EXAMPLE_BATCH", batch)
            for limit in (1, 3, 6):
                assert browse.examples(conn, limit) == plain_examples(conn, limit)
        for where in ("", "where scope = '/a'", "where class = 'policy' and flagged = 0"):
            counted = rows(conn, for_plugin.decay_counts_sql(f"select * from knowledge {where}"))
            plain = rows(conn, f"select {browse.decay_bucket_sql()}, count(*) from knowledge {where} group by 1")
            assert sorted(counted) == sorted(plain)
        for bucket in for_plugin.DECAY_BUCKETS:
            chosen = rows(
                conn, f"select id from knowledge where {for_plugin.decay_filter_sql(bucket)}", {"decay_bucket": bucket}
            )
            assert chosen == rows(conn, f"select id from knowledge where {browse.decay_bucket_sql()} = ?", (bucket,))
        for selected in ({}, {"decay": "expired"}, {"scope": "/a", "class": "policy"}, {"source": ""}):
            listed, facets = plain_decayed(conn, selected)
            assert browse.decayed(conn, NOW, selected=selected)[1] == listed
            assert browse.decayed_facets(conn, NOW, selected) == (sum(facets["decay"].values()), facets)
        counted = inventory._counts(conn)
        for column in ("class", "scope", "source"):
            assert counted[f"by_{column}"] == dict(
                rows(conn, f"select coalesce([{column}], ''), count(*) from knowledge group by 1 order by 2 desc, 1")
            )
        assert counted["flagged"] == rows(conn, "select count(*) from knowledge where flagged != 0")[0][0]
    finally:
        conn.execute("rollback")


def work(conn, read):
    """How much SQLite did for `read()`: its virtual machine's steps, in hundreds."""
    steps = []
    conn.set_progress_handler(lambda: steps.append(1) and 0, 100)
    try:
        read()
    finally:
        conn.set_progress_handler(None, 100)
    return len(steps)


def about_the_same(after, before):
    """Work that did not grow with the rows added (a deeper b-tree aside)."""
    return after <= 1.1 * before + 5


def more_documents(conn, count, start=0):
    """`count` more live one-chunk documents, each with its document entity."""
    with conn:
        conn.execute("begin")
        for n in range(start, start + count):
            entity_id = conn.execute(
                "insert into entities (name, entity_type) values (?, 'document')", (f"Note {n}",)
            ).lastrowid
            conn.execute(
                "insert into knowledge (document_id, title, content) values (?, ?, 'text')", (f"n{n}", f"Note {n}")
            )
            conn.execute(
                "insert into documents (document_id, entity_id, chunks) values (?, ?, 1)", (f"n{n}", entity_id)
            )


def test_the_decayed_page_reads_only_the_decaying_memories(conn):
    brain_sql.remember(
        conn,
        [
            {"_id": f"old{n}", "text": f"Expired memory {n}.", "expires_at": "2020-01-01", "scope": f"/s{n % 3}"}
            for n in range(30)
        ]
        + [{"_id": f"kept{n}", "text": f"Archived memory {n}.", "relevance_tier": 0} for n in range(10)],
    )

    expired = decay.decay_filter(Request.fake("/brain/knowledge?_decay=expired"))  # the table page's ?_decay=

    def review():
        brain_sql.decayed(conn, NOW)
        for_plugin.decayed_facets(conn, NOW, {"scope": "/s1"})
        rows(conn, f"select id from knowledge where {expired.where_clauses[0]} order by id limit 101", expired.params)

    before = work(conn, review)
    more_documents(conn, 3_000)
    assert about_the_same(work(conn, review), before)


def test_an_entity_page_reads_only_its_neighbourhood(vault_brain_copy):
    conn = brain_sql.connect(vault_brain_copy)
    dana = rows(conn, "select id from entities where name = 'Dana Whitfield'")[0][0]
    before = work(conn, lambda: brain_sql.entity(conn, dana, hops=2))
    more_documents(conn, 3_000)
    assert about_the_same(work(conn, lambda: brain_sql.entity(conn, dana, hops=2)), before)


def test_the_entities_browser_reads_each_entity_once(conn):
    """Twice the entities, about twice the work: never each entity against every other."""
    more_documents(conn, 1_000)
    once = work(conn, lambda: brain_sql.entities(conn))
    more_documents(conn, 1_000, start=1_000)
    assert work(conn, lambda: brain_sql.entities(conn)) < 2.5 * once


@pytest.fixture(scope="module")
def decaying_brain(tmp_path_factory):
    """A brain of 4,000 memories with an expiry, in two domains but for the last 40."""
    path = tmp_path_factory.mktemp("decaying") / "decaying.db"
    conn = brain_sql.connect(path)
    brain_sql.migrate(conn)
    records = [
        {
            "_id": f"e{n}",
            "text": f"Memory {n} expires.",
            "domain": ("work", "home")[n % 2],
            "expires_at": "2020-01-01" if n % 2 else "2999-01-01",
        }
        for n in range(1_200)
    ]
    for start in range(0, len(records), 600):  # as many records as one remember takes
        brain_sql.remember(conn, records[start : start + 600])
    with conn:
        conn.execute("begin")
        conn.executemany(
            "insert into knowledge (title, content, expires_at, domain) values (?, 'text', '2020-01-01', ?)",
            [(f"t{n}", ("work", "home")[n % 2] if n < 2_760 else f"zz{n}") for n in range(2_800)],
        )
        conn.execute("create view domains as select id, domain from knowledge")
    close_brain(conn)
    return path


@pytest.mark.asyncio
async def test_a_decay_facet_past_its_time_limit_says_so(decaying_brain):
    datasette = Datasette([str(decaying_brain)], settings={"facet_time_limit_ms": 1})
    response = await datasette.client.get("/decaying/knowledge?_facet_decay=expires_at")
    assert response.status_code == 200, response.text
    assert "These facets timed out: decay<" in response.text
    counted = await Datasette([str(decaying_brain)]).client.get("/decaying/knowledge.json?_facet_decay=expires_at")
    buckets = {r["value"]: r["count"] for r in counted.json()["facet_results"]["decay"]["results"]}
    assert buckets == {"expired": 600 + 2_800, "live": 600}


@pytest.mark.asyncio
async def test_facet_suggestions_consider_a_brains_first_thousand_rows(decaying_brain):
    """domain has two values but in the last 40 memories: as Datasette 1.0 does, the
    suggestion is made from 1,000 rows (over every row, it could not finish in time
    on a large brain)."""
    datasette = Datasette([str(decaying_brain)])
    suggested = (await datasette.client.get("/decaying/knowledge.json")).json()["suggested_facets"]
    assert {"domain", "decay"} <= {facet["name"] for facet in suggested}
    # on a filtered page, from the first rows the filter keeps (found once, then read by id)
    suggested = (await datasette.client.get("/decaying/knowledge.json?_decay=expired")).json()["suggested_facets"]
    assert "domain" in {facet["name"] for facet in suggested}
    # every table's and view's page answers: vec0 and FTS5's, WITHOUT ROWID ones, a view
    names = await datasette.get_database("decaying").execute(
        "select name from sqlite_master where type in ('table', 'view')"
    )
    for (name,) in names.rows:
        assert (await datasette.client.get(f"/decaying/{name}.json")).status_code == 200, name
    # nothing is suggested on the internals: vec0 answered one out of time with a 400 page
    for name in ("vec_knowledge", "knowledge_fts", "brain_changes"):
        assert (await datasette.client.get(f"/decaying/{name}.json")).json()["suggested_facets"] == [], name


@pytest.mark.asyncio
async def test_a_facet_of_the_vectors_table_past_its_time_limit_says_so(decaying_brain):
    """vec0 reports a query interrupted while it reads a metadata column as its own
    error, not as a time-out: a facet asked of vec_knowledge that runs out of time is
    shown as timed out, as Datasette shows any other, never an Invalid SQL page.
    Each limit stops the facets somewhere else in their scan (here 4 to 19 ms gave
    the 400); the last counts them all."""
    for limit in [*range(1, 41, 3), 60_000]:
        datasette = Datasette([str(decaying_brain)], settings={"facet_time_limit_ms": limit})
        response = await datasette.client.get("/decaying/vec_knowledge?_facet=valid_from&_facet=source")
        assert response.status_code == 200, (limit, response.text[:300])
        counted = set(re.findall(r'class="facet-info [^"]*" id="facet-[^"]*" data-column="([^"]*)"', response.text))
        timed_out = re.search(r"These facets timed out: ([^<]*)<", response.text)
        assert counted | set(timed_out.group(1).split(", ") if timed_out else ()) == {"valid_from", "source"}, limit
        # an error that is no time-out is never shown as one (review 81)
        wrong = await datasette.client.get("/decaying/vec_knowledge?_facet=valid_from&_facet=nosuch")
        assert wrong.status_code == 400 and "no such column: nosuch" in wrong.text, limit
    assert counted == {"valid_from", "source"}


def place_index(conn):
    """The index made on vec0's rowids table of every row (sqlite-vec makes none of its own)."""
    made = "select name from pragma_index_list('vec_knowledge_rowids') where origin = 'c' and not partial"
    return rows(conn, made)[0][0]


def sorts_every_vector(path):
    """Whether vec0's scan of vec_knowledge without a KNN constraint (a page of the
    table: sqlite-vec reads its rowids by chunk and offset) sorts every row first. A
    new connection: a connection's cached EXPLAIN keeps the plan it was made with."""
    plan = rows(
        brain_sql.connect(path),
        "explain query plan select rowid from vec_knowledge_rowids order by chunk_id, chunk_offset",
    )
    return any("TEMP B-TREE" in step[-1] for step in plan)


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "how", ["new", "made before the index", "dropped by plain SQL", "reindexed twice", "reindexed, record emptied"]
)
async def test_a_page_of_the_vectors_table_reads_them_where_they_are_kept(run, vault_brain_copy, how):
    """vec0 reads a table without a KNN constraint in the order it keeps its vectors,
    sorting every one first without an index on that order: at a million, past the
    page's time limit (a 400). Each way a brain comes to be, it has that index; check
    names it gone, --repair makes it again; the page still lists every vector."""
    conn = brain_sql.connect(vault_brain_copy)
    memories = {memory for (memory,) in rows(conn, "select id from knowledge")}
    if how == "made before the index":
        conn.execute(f"drop index {place_index(conn)}")
        conn.execute("delete from _sqlite_migrations where name = 'm020_vector_places'")
        conn.commit()
        assert sorts_every_vector(vault_brain_copy)
        assert run("brain", "init", vault_brain_copy).exit_code == 0
    elif how == "dropped by plain SQL":  # a view holds the name it had: the next free one is taken
        conn.execute(f"drop index {place_index(conn)}")
        conn.execute("create view vec_knowledge_rowids_place as select 1")
        conn.execute("create index vec_knowledge_rowids_place1 on vec_knowledge_rowids(chunk_id, chunk_offset) where 0")
        found = run("brain", "check", vault_brain_copy)
        assert found.exit_code == 1
        assert "they read every memory: 1 (vec_knowledge_rowids_place)" in found.output
        assert run("brain", "check", vault_brain_copy, "--repair").exit_code == 0
        assert place_index(conn) == "vec_knowledge_rowids_place2"
    elif how.startswith("reindexed"):  # the staged table's index keeps its name when the table is renamed
        for _ in range(2 if how == "reindexed twice" else 1):
            brain_sql.reindex(conn, "wordllama/l2_supercat")
        if how == "reindexed, record emptied":  # the brain is still read as whole, its record restored
            conn.execute("delete from _sqlite_migrations")
            conn.commit()
            assert run("brain", "init", vault_brain_copy).exit_code == 0
    assert not sorts_every_vector(vault_brain_copy)
    assert brain_sql.check(conn) == {}
    page = await Datasette([str(vault_brain_copy)]).client.get("/brain/vec_knowledge.json?_shape=array&_size=max")
    assert page.status_code == 200, page.text
    assert {row["knowledge_id"] for row in page.json()} == memories
