"""A deny on any of a brain's tables, not only `knowledge`: whoever may not read a
table reads nothing derived from it. SQL on the brain (its own, its canned queries,
--crossdb's `_memory`, the brain_* functions) is closed to them, and recall, over
HTTP, MCP and in Python, answers them as the same brain would without its graph."""

import json
import re
import shutil

import pytest
from datasette import hookimpl
from datasette.app import Datasette
from datasette.plugins import pm
from mcp import Client
from mcp.server.mcpserver import MCPServer

import brain_sql
from brain_sql import for_plugin
from datasette_brain import mcp_tools

from .conftest import close_brain, copy_brain

NOW = "2026-01-01 00:00:00"
TURNS = [
    {"_id": "t1", "speaker": "Ann", "session_id": "s1", "observed_at": "2024-01-01T10:00:00", "scope": "/a",
     "text": "My cat is called Pepper and she loves tuna."},
    {"_id": "t2", "speaker": "Bob", "session_id": "s1", "observed_at": "2024-01-01T10:01:00", "scope": "/a",
     "text": "That is lovely, how old is she?"},
    {"_id": "t3", "speaker": "Ann", "session_id": "s1", "observed_at": "2024-01-01T10:02:00", "scope": "/a",
     "text": "She is three years old."},
]  # fmt: skip
# queries that name entities (the graph leads), speakers (dialogue), or nothing the graph knows
QUERIES = [
    {"q": "Ann Pepper"},
    {"q": "how old is she"},
    {"q": "Bob cat", "scope": "/a"},
    {"q": "who owns the support runbook"},
    {"q": "Dana Whitfield", "k": 2},
    {"q": "what is the graph leg", "include_decayed": True},
    {"q": "reciprocal rank fusion"},
]
ADMIN = {"id": "admin"}


def denying(*tables, database="brain"):
    return {"databases": {database: {"tables": {table: {"allow": ADMIN} for table in tables}}}}


def altered_copy(brain, path, *statements):
    """A copy of `brain` at `path` that plain SQL `statements` changed, in one transaction."""
    shutil.copy(brain, path)
    conn = brain_sql.connect(path)
    with conn:
        for statement in statements:
            conn.execute(statement)
    close_brain(conn)
    return path


@pytest.fixture(scope="module")
def brains(vault_brain_path, tmp_path_factory):
    """(brain, twin): the vault with a conversation, and a copy of it whose graph is
    emptied (no entity, no edge, no document entity): the brain without its graph."""
    folder = tmp_path_factory.mktemp("table-deny")
    brain = copy_brain(vault_brain_path, folder / "brain.db", TURNS)
    twin = altered_copy(
        brain,
        folder / "twin.db",
        "delete from relationships",
        "update documents set entity_id = null",
        "delete from entities",
    )
    return brain, twin


def answer(found):
    """A recall's answer, but for how long its parts took."""
    telemetry = {name: value for name, value in found["telemetry"].items() if not name.endswith("_ms")}
    return {**found, "telemetry": telemetry}


def graph_ranks(found):
    return [hit["provenance"].get("graph_rank") for hit in found["hits"]]


def test_recall_without_the_graph_is_the_brains_without_its_graph(brains):
    """brain_sql.recall with graph_visible=False: the answer, every part of it, of the
    brain whose graph is emptied (its graph leg off: there is none to run)."""
    brain, twin = (brain_sql.connect(path) for path in brains)
    for query in QUERIES:
        hidden = brain_sql.recall(brain, {**query, "now": NOW}, graph_visible=False)
        assert answer(hidden) == answer(brain_sql.recall(twin, {**query, "now": NOW, "graph": False})), query
        assert not any(graph_ranks(hidden)) and hidden["telemetry"]["fusion"] == "convex"
    # and the graph does change the answer for whoever may read it
    full = brain_sql.recall(brain, {"q": "Ann Pepper", "now": NOW})
    assert any(graph_ranks(full)) and full["telemetry"]["fusion"] == "rrf"


@pytest.mark.asyncio
@pytest.mark.parametrize("table", for_plugin.GRAPH_TABLES)
async def test_recall_over_http_for_whoever_may_not_read_the_graph_is_the_brains_without_it(brains, table):
    brain, twin = brains
    datasette = Datasette([str(brain), str(twin)], metadata=denying(table))
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    for query in QUERIES:
        body = {**query, "now": NOW}
        hidden = await datasette.client.post("/brain/-/recall", json=body)
        without = await datasette.client.post("/twin/-/recall", json={**body, "graph": False})
        assert hidden.status_code == 200 == without.status_code, hidden.text
        assert answer(hidden.json()) == answer(without.json()), (table, query)
        page = await datasette.client.get("/brain/-/brain", params=body)
        assert page.status_code == 200 and set(page_graph_ranks(page.text)) <= {"–"}, query
    full = (await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper", "now": NOW}, cookies=admin)).json()
    assert any(graph_ranks(full)) and full["telemetry"]["fusion"] == "rrf"
    page = await datasette.client.get("/brain/-/brain", params={"q": "Ann Pepper"}, cookies=admin)
    assert set(page_graph_ranks(page.text)) - {"–"}
    # the page before a question counts the memories, and the graph's rows only for whoever may read them
    counts = [re.search(r'<p id="brain-counts">.*?</p>', page.text, re.S).group() for page in (
        await datasette.client.get("/brain/-/brain"), await datasette.client.get("/brain/-/brain", cookies=admin)
    )]  # fmt: skip
    assert "memories" in counts[0] and not re.search("document|entit|relationship", counts[0]), counts[0]
    assert "entities" in counts[1] and "relationships" in counts[1]


def page_graph_ranks(html):
    """The graph ranks the recall page's decision paths show ("–": none)."""
    return re.findall(r'<td>connections \(graph\)</td><td class="num">([^<]*)</td>', html)


@pytest.mark.asyncio
async def test_recall_over_mcp_for_whoever_may_not_read_the_graph_is_the_brains_without_it(brains):
    brain, twin = brains
    datasette = Datasette([str(brain), str(twin)], metadata=denying("entities", "relationships"))
    answers = {}
    for name, actor in (("anonymous", None), ("admin", ADMIN)):
        server = MCPServer("test")
        mcp_tools.register(datasette, server, actor=actor)
        async with Client(server) as client:
            for database, graph in (("brain", True), ("twin", False)):
                arguments = {"q": "Ann Pepper", "now": NOW, "database": database, "graph": graph}
                found = await client.call_tool("brain_recall", arguments)
                assert not found.is_error, found.content
                answers[name, database] = answer(found.structured_content)
    assert answers["anonymous", "brain"] == {**answers["anonymous", "twin"]}
    assert not any(graph_ranks(answers["anonymous", "brain"]))
    assert any(graph_ranks(answers["admin", "brain"])) and answers["admin", "brain"]["telemetry"]["fusion"] == "rrf"


@pytest.mark.asyncio
async def test_recall_over_mcp_without_a_database_names_the_permission_the_actor_lacks(brains):
    """An actor who may view the database but not `knowledge`, asking without naming a
    brain, is refused with the permission it lacks, as the brain's own routes refuse it."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying("knowledge"))
    server = MCPServer("test")
    mcp_tools.register(datasette, server, actor=None)
    async with Client(server) as client:
        found = await client.call_tool("brain_recall", {"q": "Ann Pepper"})
    assert found.is_error
    message = " ".join(part.text for part in found.content)
    assert "view-table: you may not view the knowledge table" in message, message
    assert "view-database" not in message, message
    response = await datasette.client.get("/brain/-/recall?q=Ann+Pepper")
    assert response.status_code == 403 and "view-table" in response.text


@pytest.mark.asyncio
@pytest.mark.parametrize("table", for_plugin.VIRTUAL_TABLES)
async def test_whoever_may_not_read_an_index_recall_searches_recalls_nothing(brains, table):
    """Recall's lexical leg searches knowledge_fts and its vector leg vec_knowledge
    (review 90): whoever may not read one of them is refused recall, over HTTP, on the
    recall page and over MCP, naming the table; the memories themselves stay readable."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying(table))
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    for refused in (
        await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper"}),
        await datasette.client.get("/brain/-/recall?q=Ann+Pepper"),
        await datasette.client.get("/brain/-/brain?q=Ann+Pepper"),
    ):
        assert refused.status_code == 403 and f"the {table} table" in refused.text, refused.text[:300]
    found = await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper"}, cookies=admin)
    assert found.status_code == 200 and found.json()["hits"]
    for actor in (None, ADMIN):
        server = MCPServer("test")
        mcp_tools.register(datasette, server, actor=actor)
        async with Client(server) as client:
            called = await client.call_tool("brain_recall", {"q": "Ann Pepper"})
        assert called.is_error == (actor is None), called.content
        if actor is None:
            assert f"the {table} table" in " ".join(part.text for part in called.content)
    assert (await datasette.client.get("/brain/knowledge.json?_size=1")).status_code == 200


@pytest.mark.asyncio
@pytest.mark.parametrize("table", ["knowledge_fts_vocab", "knowledge_fts_docsize", "vec_knowledge_rowids"])
async def test_a_deny_of_a_table_an_index_is_kept_in_refuses_recall(brains, table):
    """Review 91: the lexical leg reads knowledge_fts_vocab and _docsize, the vector leg
    the tables vec0 keeps the vectors in; a deny of one of them refuses recall as a deny
    of the index does, before the request's body is read. The index's tables read each
    other (knowledge_fts_vocab decodes knowledge_fts_data): a deny of one refuses every
    one's page, and none of the other index's."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying(table))
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    for body in ({"q": "Ann Pepper"}, {"q": "Ann Pepper", "bogus": 1}, {"k": "many"}):
        refused = await datasette.client.post("/brain/-/recall", json=body)
        assert refused.status_code == 403 and f"the {table} table" in refused.text, refused.text[:300]
    assert (await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper"}, cookies=admin)).json()["hits"]
    families = {
        "knowledge_fts": ["knowledge_fts", "knowledge_fts_vocab", "knowledge_fts_terms", "knowledge_fts_data",
                          "knowledge_fts_idx", "knowledge_fts_docsize", "knowledge_fts_config"],
        "vec_knowledge": ["vec_knowledge", "vec_knowledge_rowids", "vec_knowledge_chunks", "vec_knowledge_info"],
    }  # fmt: skip
    for index, tables in families.items():
        for other in tables:
            page = await datasette.client.get(f"/brain/{other}.json?_size=1")
            assert page.status_code == (403 if table.startswith(index) else 200), (table, other)
            assert (await datasette.client.get(f"/brain/{other}.json?_size=1", cookies=admin)).status_code == 200
    assert (await datasette.client.get("/brain/knowledge.json?_size=1")).status_code == 200


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "metadata", [denying("knowledge_fts_nosuch"), {"tables": {"vec_knowledge_rowids2": {"allow": ADMIN}}}]
)
async def test_a_rule_naming_no_table_of_the_brain_refuses_nothing(brains, metadata):
    """Review 96: a rule under a name an index's tables might have but no table has (a typo,
    a table of another version) is no rule of this brain's: its index stays open."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=metadata)
    for path in ["/brain/knowledge_fts.json?_size=1", "/brain/knowledge_fts_vocab.json?_size=1",
                 "/brain/vec_knowledge.json?_size=1", "/brain/knowledge.json?_search=Pepper"]:  # fmt: skip
        assert (await datasette.client.get(path)).status_code == 200, path
    recalled = await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper", "now": NOW})
    assert recalled.status_code == 200 and recalled.json()["hits"]


@pytest.mark.asyncio
@pytest.mark.parametrize("table", ["knowledge", "knowledge_fts", "entities"])
async def test_an_instance_level_table_rule_holds_on_a_brain(brains, table):
    """Review 92: metadata's top-level `tables` applies to every database; the plugin's own
    block for a brain (its hidden tables) must not stand in for it (Datasette reads a
    database's `tables` in place of the instance's)."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata={"tables": {table: {"allow": ADMIN}}})
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    assert (await datasette.client.get(f"/brain/{table}.json")).status_code == 403
    assert (await datasette.client.get(f"/brain/{table}.json", cookies=admin)).status_code == 200
    recalled = await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper", "now": NOW})
    if table == "entities":  # the graph hidden: recall as without it
        assert recalled.status_code == 200 and not any(graph_ranks(recalled.json()))
    else:
        assert recalled.status_code == 403


class RemoteMetadata:
    """A plugin giving metadata of its own (as datasette-remote-metadata does): a top-level deny."""

    __name__ = "remote-metadata"

    @hookimpl
    def get_metadata(self, datasette, key, database, table):
        return {"tables": {"knowledge": {"allow": ADMIN}}}


@pytest.mark.asyncio
async def test_an_instance_level_rule_a_plugin_gives_holds_on_a_brain_and_only_its_allow(brains):
    """Review 93: a top-level `tables` rule from another plugin's metadata holds as the
    metadata file's does; of a top-level entry only `allow` reaches a brain's tables
    (Datasette applies no other of its keys to a database's table: a label_column
    there must not undo the brain's labelling of entities by id), and a value that is
    no block is passed over."""
    brain, _ = brains
    pm.register(RemoteMetadata(), name="remote-metadata")
    try:
        datasette = Datasette([str(brain)])
        assert (await datasette.client.get("/brain/knowledge.json")).status_code == 403
        assert (await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper"})).status_code == 403
    finally:
        pm.unregister(name="remote-metadata")
    pm.register(RemoteMetadata(), name="remote-metadata")
    try:  # the operator's rule for the same table, in another case, wins over the plugin's, as Datasette merges them
        datasette = Datasette([str(brain)], metadata={"tables": {"Knowledge": {"allow": True}}})
        assert (await datasette.client.get("/brain/knowledge.json")).status_code == 200
    finally:
        pm.unregister(name="remote-metadata")
    metadata = {"tables": {"entities": {"allow": True, "label_column": "name"}, "knowledge": True}}
    datasette = Datasette([str(brain)], metadata=metadata)
    rows = (await datasette.client.get("/brain/relationships.json?_labels=on&_shape=array")).json()
    assert rows and all(str(row["to_entity_id"]["label"]) == str(row["to_entity_id"]["value"]) for row in rows)
    assert (await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper"})).json()["hits"]


@pytest.mark.asyncio
async def test_a_search_of_another_full_text_index_reads_its_tables_too(brains, tmp_path):
    """Review 92: a table of the operator's own in a brain, searched through its own FTS5
    index: a deny of one of the tables that index is kept in refuses the search."""
    brain, _ = brains
    copy = altered_copy(
        brain,
        tmp_path / "brain.db",
        "create table notes (id integer primary key, body text)",
        "insert into notes (body) values ('the runbook lives in the wiki')",
        "create virtual table notes_fts using fts5 (body, content='notes', content_rowid='id')",
        "insert into notes_fts (rowid, body) select id, body from notes",
    )
    datasette = Datasette([str(copy)], metadata=denying("notes_fts_data"))
    path = "/brain/notes.json?_search=runbook&_fts_table=notes_fts"
    assert (await datasette.client.get(path)).status_code == 400  # a brain's table searches only its own index
    path = "/brain/notes.json?_search=runbook"
    datasette = Datasette([str(copy)], metadata={"databases": {"brain": {"tables": {
        "notes": {"fts_table": "notes_fts"}, "notes_fts_data": {"allow": ADMIN}}}}})  # fmt: skip
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    assert (await datasette.client.get(path)).status_code == 403
    assert (await datasette.client.get(path, cookies=admin)).status_code == 200


class DenyingPlugin:
    """Another plugin's rule naming one table an index is kept in (not Datasette's metadata)."""

    __name__ = "denying-plugin"

    @hookimpl
    def permission_allowed(self, actor, action, resource):
        if action == "view-table" and resource[1] == "vec_knowledge_vector_chunks00" and not actor:
            return False
        return None


@pytest.mark.asyncio
async def test_another_plugins_deny_of_a_table_an_index_is_kept_in_refuses_recall(brains):
    brain, _ = brains
    datasette = Datasette([str(brain)])
    pm.register(DenyingPlugin(), name="denying-plugin")
    try:
        refused = await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper"})
        assert refused.status_code == 403 and "vec_knowledge_vector_chunks00" in refused.text, refused.text
        admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
        assert (await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper"}, cookies=admin)).json()["hits"]
    finally:
        pm.unregister(name="denying-plugin")
    assert (await datasette.client.post("/brain/-/recall", json={"q": "Ann Pepper"})).status_code == 200


@pytest.mark.asyncio
async def test_a_private_database_with_only_its_memories_opened_opens_nothing_derived(brains):
    """Review 91, H1: a database only the admin may view, its `knowledge` table opened to
    everyone (Datasette's way to publish one table): every other table is the
    database's, so closed, as Datasette's own table view has it. Recall, which searches
    the indexes, is refused; so are the table view's search, the graph's pages and the
    export; a memory page shows no edges. The memories themselves are open."""
    brain, _ = brains
    metadata = {"databases": {"brain": {"allow": ADMIN, "tables": {"knowledge": {"allow": True}}}}}
    datasette = Datasette([str(brain)], metadata=metadata)
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    entity = (await datasette.get_database("brain").execute("select id from entities limit 1")).first()[0]
    memory = (await datasette.get_database("brain").execute("select knowledge_id from relationships")).first()[0]
    paths = ["/brain/-/recall?q=Ann+Pepper", "/brain/-/brain?q=Ann+Pepper", "/brain/knowledge.json?_search=Pepper",
             "/brain/-/entities.json", f"/brain/-/entity/{entity}", "/brain/-/export.jsonl",
             "/brain/vec_knowledge.json"]  # fmt: skip
    for path in paths:
        assert (await datasette.client.get(path)).status_code == 403, path
        assert (await datasette.client.get(path, cookies=admin)).status_code == 200, path
    assert (await datasette.client.get("/brain/knowledge.json?_size=1")).status_code == 200
    shown = await datasette.client.get(f"/brain/-/memory/{memory}.json")
    assert shown.status_code == 200 and shown.json()["edges"] == []
    assert (await datasette.client.get(f"/brain/-/memory/{memory}.json", cookies=admin)).json()["edges"]
    # the indexes opened too (the tables their modules keep them in follow them): recall opens
    tables = {table: {"allow": True} for table in ("knowledge", *for_plugin.VIRTUAL_TABLES)}
    datasette = Datasette([str(brain)], metadata={"databases": {"brain": {"allow": ADMIN, "tables": tables}}})
    found = await datasette.client.get("/brain/-/recall?q=Ann+Pepper")
    assert found.status_code == 200 and found.json()["hits"] and not any(graph_ranks(found.json()))
    assert (await datasette.client.get("/brain/knowledge.json?_search=Pepper")).status_code == 200


# SQL of the brain for an actor, each reading the graph (or anything of the brain)
SQL = [
    "select count(*) from relationships",
    "select name from entities",
    "select brain_ppr('Ann Pepper')",
    "select brain_fusion('Ann')",
    "select brain_leg_weight('graph', 'Ann Pepper')",
    "select 1",
]
# one of each kind of a brain's tables: the graph's, the name index, the full text and
# vector tables' shadows, the meta table
DENIED = ["entities", "relationships", "documents", "brain_mention_names", "knowledge_fts_data", "brain_meta"]


@pytest.mark.asyncio
@pytest.mark.parametrize("table", DENIED)
async def test_a_deny_of_any_brain_table_closes_the_brains_sql_to_that_actor(brains, table):
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying(table))
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    recall = "/brain/recall.json?" + "&".join(
        f"{name}=" for name in ("k", "scope", "classes", "sources", "domain", "since", "until", "as_of")
    )
    for sql in SQL:
        anonymous = await datasette.client.get("/brain.json", params={"sql": sql})
        assert anonymous.status_code == 403, (table, sql, anonymous.text[:300])
        allowed = await datasette.client.get("/brain.json", params={"sql": sql}, cookies=admin)
        assert allowed.status_code == 200, (table, sql, allowed.text[:300])
    assert (await datasette.client.get(recall + "&q=Ann+Pepper")).status_code == 403
    assert (await datasette.client.get(recall + "&q=Ann+Pepper", cookies=admin)).status_code == 200
    # the memories themselves stay readable, but for the denied table
    assert (await datasette.client.get("/brain/knowledge.json")).status_code == (403 if table == "knowledge" else 200)


@pytest.mark.asyncio
@pytest.mark.parametrize("table", DENIED)
async def test_crossdb_reads_nothing_of_a_brain_one_of_whose_tables_anonymous_may_not_read(brains, table):
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying(table), crossdb=True)
    await datasette.invoke_startup()
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    for sql in (
        "select count(*) from brain.relationships",
        "select name from brain.entities",
        "select content from brain.knowledge",
        "select count(*) from relationships",  # unqualified: found in the attached brain
        "select brain_ppr('Ann Pepper')",
    ):
        for cookies in (None, admin):  # the crossdb connection is everyone's: it refuses everyone
            response = await datasette.client.get("/_memory.json", params={"sql": sql}, cookies=cookies)
            assert response.status_code == 400 and response.json()["ok"] is False, (table, sql, response.text[:300])
    own = await datasette.client.get("/brain.json", params={"sql": "select count(*) from entities"}, cookies=admin)
    assert own.status_code == 200 and own.json()["rows"][0][0] > 0


def test_every_table_of_a_brain_is_named_as_a_brains(brains):
    """A connection that attached a file it could not judge refuses a brain's tables by
    their names alone (crossdb.py): every table a brain has is named so."""
    brain, _ = brains
    conn = brain_sql.connect(brain)
    tables = [name for (name,) in conn.execute("select name from sqlite_master where type = 'table'")]
    assert len(tables) > 20 and [name for name in tables if not for_plugin.brain_table(name)] == []
    assert json.dumps(sorted(for_plugin.GRAPH_TABLES)) == json.dumps(["documents", "entities", "relationships"])


@pytest.mark.asyncio
async def test_a_row_page_counts_links_only_from_tables_the_actor_may_read(brains):
    """Datasette's row page counts the rows of other tables that point at the row: a
    count of `relationships` is read from it, so whoever may not read it is not shown
    one, on the page nor in the JSON's foreign_key_tables extra."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying("relationships"))
    await datasette.invoke_startup()
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    rows = await datasette.get_database("brain").execute(
        "select knowledge_id from relationships where knowledge_id is not null limit 1"
    )
    row = f"/brain/knowledge/{rows.first()[0]}"
    page = await datasette.client.get(row)
    assert page.status_code == 200 and "in relationships" not in page.text
    shown = await datasette.client.get(row, cookies=admin)
    assert re.search(r"rows?</a>\s*from knowledge_id in relationships", shown.text)
    tilde = row.replace("/brain/", "/b~72ain/")  # Datasette's tilde-encoding of the name
    for path in (
        row + ".json?_extras=foreign_key_tables",
        row + ".json?_extras=foreign%5Fkey%5Ftables",
        row + ".json?_extras=count,foreign%5Fkey%5Ftables",
        tilde + ".json?_extras=foreign_key_tables",
        row + ".json?_extras=foreign_key_tables&_extras=count",
    ):
        extras = await datasette.client.get(path)
        assert extras.status_code == 200, path
        assert "relationships" not in json.dumps(extras.json().get("foreign_key_tables", [])), path
        assert extras.json()["rows"]  # the row itself is the actor's to read


# a brain's tables that record rows of every kind: chunk, entity, edge and document ids
# (the change log, the mention queue, where the name index has followed it), the rows each
# table ever had (sqlite_sequence); the name index holds every entity's name, hashed
# (each with a column to facet and filter on, and a row's key)
EVERY_KIND = {"brain_changes": ("kind", "1"), "brain_mention_queue": ("kind", "entity,1"),
              "brain_mention_names_seen": ("keys", "1"), "sqlite_sequence": ("name", "1")}  # fmt: skip


def table_reads(table, column, row="1"):
    """The ways Datasette reads a table: its page, JSON, CSV, a facet, a filter, a row (last)."""
    return [
        f"/brain/{table}",
        f"/brain/{table}.json",
        f"/brain/{table}.csv",
        f"/brain/{table}.json?_facet={column}",
        f"/brain/{table}.json?{column}__gt=0",
        f"/brain/{table}/{row}.json",
    ]


@pytest.mark.asyncio
@pytest.mark.parametrize("table", ["entities", "relationships"])
async def test_the_tables_derived_from_the_graph_follow_its_permission(brains, table):
    """The name index (brain_mention_names: each entity's name hashed, with its id) follows
    `entities`; the tables recording rows of every kind (the change log names entity ids)
    are for whoever may read every table of the brain. The memories stay readable."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying(table))
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    names = table_reads("brain_mention_names", "entity_id", "1,2,3,4")
    denied = [path for table, key in EVERY_KIND.items() for path in table_reads(table, *key)]
    denied += names if table == "entities" else []
    for path in denied:
        response = await datasette.client.get(path)
        assert response.status_code == 403, (table, path, response.text[:300])
        assert (await datasette.client.get(path, cookies=admin)).status_code in (200, 404), (table, path)
    for path in ([] if table == "entities" else names[:-1]) + ["/brain/knowledge.json", "/brain/knowledge.csv"]:
        assert (await datasette.client.get(path)).status_code == 200, (table, path)
    listed = (await datasette.client.get("/brain.json")).json()["tables"]
    assert not {t["name"] for t in listed} & {*EVERY_KIND, *(["brain_mention_names"] if table == "entities" else [])}


@pytest.mark.asyncio
@pytest.mark.parametrize("table", ["vec_knowledge", "knowledge_fts"])
async def test_a_virtual_tables_shadow_tables_follow_its_permission(brains, table):
    """FTS5 and sqlite-vec keep a virtual table's rows in tables of their own (the vectors
    themselves in vec_knowledge_vector_chunks00): whoever may not read the virtual table
    reads none of them (review 87); the memories stay readable."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying(table))
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    shadows = [
        name
        for (name,) in brain_sql.connect(brain).execute(
            "select name from sqlite_master where type = 'table' and name like ? escape '\\'",
            [table.replace("_", "\\_") + "\\_%"],
        )
    ]
    assert len(shadows) >= 3, shadows
    for name in [table, *shadows]:
        response = await datasette.client.get(f"/brain/{name}.json?_size=1")
        assert response.status_code == 403, (name, response.text[:200])
        assert (await datasette.client.get(f"/brain/{name}.json?_size=1", cookies=admin)).status_code == 200, name
    assert (await datasette.client.get("/brain/knowledge.json")).status_code == 200
    listed = {t["name"] for t in (await datasette.client.get("/brain.json")).json()["tables"]}
    assert not listed & {table, *shadows}


@pytest.mark.asyncio
async def test_a_search_of_the_memories_reads_their_full_text_index(brains):
    """?_search= reads knowledge_fts: whoever may not read that index may not search the
    memories through the table view either (review 87), though they read the memories.
    And _fts_table names only a table's own index: entities searched through
    knowledge_fts would answer from the index, to whoever may not read it."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying("knowledge_fts"))
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    searches = ["knowledge.json?_search=Pepper", "knowledge.json?_search_content=Pepper", "knowledge?_search=Pepper"]
    for path in ["/brain/" + search for search in [*searches, "knowledge.json?_fts_table=knowledge_fts&_search=x"]]:
        refused = await datasette.client.get(path)
        assert refused.status_code == 403, (path, refused.text[:200])
        assert "knowledge_fts" in refused.text
        assert (await datasette.client.get(path, cookies=admin)).status_code == 200, path
    found = await datasette.client.get("/brain/knowledge.json?_search=Pepper&_shape=array", cookies=admin)
    assert "My cat is called Pepper and she loves tuna." in [row["content"] for row in found.json()]
    nothing = await datasette.client.get("/brain/knowledge.json?_search=zebrafinch&_shape=array", cookies=admin)
    assert nothing.json() == []
    assert (await datasette.client.get("/brain/knowledge.json?_shape=array&_size=1")).status_code == 200
    odd = await datasette.client.get("/brain/knowledge.json?_searchX=1", cookies=admin)  # Datasette: a 500
    assert odd.status_code == 400 and "_search_COLUMN" in odd.json()["error"]
    # a deny naming one of the tables the index is kept in holds as one naming the index
    datasette = Datasette([str(brain)], metadata=denying("knowledge_fts_data"))
    assert (await datasette.client.get("/brain/knowledge.json?_search=Pepper")).status_code == 403
    for cookies in ({}, admin):
        for path in ["/brain/entities.json?_search=Pepper&_fts_table=knowledge_fts",
                     "/brain/knowledge.json?_search=Pepper&_fts_table=entities"]:  # fmt: skip
            answer = await datasette.client.get(path, cookies=cookies)
            assert answer.status_code == 400, (path, answer.text[:200])
            assert "own full-text index" in answer.json()["error"]
    assert (await datasette.client.get("/brain/entities.json?_shape=array&_size=1")).status_code == 200


@pytest.mark.asyncio
async def test_forget_counts_the_graphs_rows_only_to_whoever_may_read_the_graph(vault_brain_copy):
    """Forgetting a memory that names an entity removes that entity only when no other
    memory names it: its count would tell an actor denied `entities` whether the name was
    one already. Their answer leaves the graph's counts out, over HTTP and MCP alike."""
    metadata = {**denying("entities"), "plugins": {"datasette-brain": {"allow_write": {"id": ["agent", "admin"]}}}}
    datasette = Datasette([str(vault_brain_copy)], metadata=metadata)
    cookies = {name: {"ds_actor": datasette.sign({"a": {"id": name}}, "actor")} for name in ("agent", "admin")}
    known = (await datasette.get_database("brain").execute("select name from entities limit 1")).first()[0]

    async def forget(name, entity, mcp=False):
        """What `name` is told when forgetting a memory it remembered naming `entity`."""
        record = {"title": "probe", "content": "a probe", "entities": [entity]}
        stored = await datasette.client.post("/brain/-/remember", json=record, cookies=cookies[name])
        assert stored.status_code == 201, stored.text
        ids = [i for record_ids in stored.json()["ids"] for i in record_ids]
        if not mcp:
            answered = await datasette.client.post("/brain/-/forget", json={"ids": ids}, cookies=cookies[name])
            assert answered.status_code == 200, answered.text
            found = answered.json()
        else:
            server = MCPServer("test")
            mcp_tools.register(datasette, server, actor={"id": name})
            async with Client(server) as client:
                called = await client.call_tool("brain_forget", {"ids": ids})
            assert not called.is_error, called.content
            found = called.structured_content
        assert found["removed"].pop("memories") == ids
        return found

    for mcp in (False, True):
        told = [await forget("agent", entity, mcp) for entity in (known, "Nobody Ever Named")]
        assert told[0] == told[1] and not {"entities", "relationships", "documents"} & set(told[0]["removed"]), told
        shown = [await forget("admin", entity, mcp) for entity in (known, "Nobody Ever Named")]
        assert shown[1]["removed"]["entities"] == shown[0]["removed"]["entities"] + 1, shown  # the new name too
        assert shown[0]["removed"]["documents"] == 1 and "relationships" in shown[0]["removed"]


ENTITY_LINK = re.compile(r'<a href="/brain/-/entity/(\d+)"[^>]*>([^<]*)</a>')


@pytest.mark.asyncio
async def test_foreign_key_labels_and_facets_show_no_entity_names(brains):
    """Datasette labels a foreign key with the row it names (relationships.to_entity_id:
    the entity's name), on table pages, in JSON with _labels or _label, and in facets:
    render_cell and the label lookup are not told who asks, so on a brain an entity is
    labelled by its id, for everyone; the ids show as they are, linked to entity pages."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying("entities"))
    names = {name for (name,) in (await datasette.get_database("brain").execute("select name from entities")).rows}
    columns = {"relationships": ["from_entity_id", "to_entity_id"], "documents": ["entity_id"]}
    for table, keys in columns.items():
        for query in ["_labels=on", *(f"_label={key}" for key in keys)]:
            found = await datasette.client.get(f"/brain/{table}.json?{query}&_shape=objects&_size=max")
            assert found.status_code == 200, found.text
            cells = [row[key] for row in found.json()["rows"] for key in keys if row[key] is not None]
            assert cells and all(isinstance(cell, dict) for cell in cells) == (query == "_labels=on" or len(keys) == 1)
            labels = [cell["label"] for cell in cells if isinstance(cell, dict)]
            assert labels and not names & set(map(str, labels)), (table, query)
            assert all(cell["label"] == cell["value"] for cell in cells if isinstance(cell, dict)), (table, query)
        for key in keys:
            faceted = await datasette.client.get(f"/brain/{table}.json?_facet={key}&_size=0")
            [facet] = faceted.json()["facet_results"].values()
            assert facet["results"] and all(row["label"] == row["value"] for row in facet["results"]), (table, key)
        page = await datasette.client.get(f"/brain/{table}?_facet={keys[0]}")
        links = ENTITY_LINK.findall(page.text)
        assert links and all(text == entity_id for entity_id, text in links), (table, links[:5])


def tables_created(schema, names):
    """Which of `names` the schema's statements create (CREATE [VIRTUAL] TABLE name)."""
    created = re.findall(r"CREATE (?:VIRTUAL )?TABLE [\"'\[`]?([^\"'\]`\s(]+)", schema, re.I)
    return set(created) & set(names)


@pytest.mark.asyncio
@pytest.mark.parametrize("denied", [(), ("knowledge",), ("entities",)])
async def test_the_mcp_schema_tool_shows_the_tables_the_database_page_lists(brains, denied):
    """datasette-mcp's get_database_schema, at /-/mcp beside the brain's tools: of the
    tables /brain.json lists to the caller, and no statement naming a table it does not
    (a table whose foreign key names one is left out too)."""
    from datasette_mcp import create_mcp_server

    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying(*denied))
    conn = brain_sql.connect(brain)
    names = [name for (name,) in conn.execute("select name from sqlite_schema where type = 'table'")]
    close_brain(conn)
    listed = {table["name"] for table in (await datasette.client.get("/brain.json")).json()["tables"]}
    async with Client(create_mcp_server(datasette)) as client:
        found = await client.call_tool("get_database_schema", {"database": "brain"})
    assert not found.is_error, found.content
    schema = found.structured_content["schema"]
    hidden = set(names) - listed
    shown = tables_created(schema, names)
    assert shown <= listed and "_sqlite_migrations" in shown
    assert denied or shown == listed  # whoever may read every table is shown every one
    assert ("knowledge" in shown) == ("knowledge" not in denied), shown
    words = {word.lower() for word in re.findall(r"\w+", schema)}
    assert not {name.lower() for name in hidden} & words, hidden & words
    assert bool(denied) == bool(hidden)


@pytest.mark.asyncio
@pytest.mark.parametrize("denied", [("knowledge",), ("entities",), ("brain_changes",)])
async def test_the_files_size_is_only_for_whoever_may_read_every_table(brains, denied):
    """The file grows with every memory, hidden ones too: /-/databases.json and
    /brain.json give its size (and hash) only to whoever may read all of its tables."""
    brain, _ = brains
    datasette = Datasette([str(brain)], metadata=denying(*denied))
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    size = brain.stat().st_size
    for cookies, told in ((None, None), (admin, size)):
        (listed,) = (await datasette.client.get("/-/databases.json", cookies=cookies)).json()
        assert (listed["size"], listed["hash"]) == (told, None), cookies
        page = await datasette.client.get("/-/databases", cookies=cookies)
        assert page.status_code == 200 and (str(size) in page.text) == bool(told)
        database = await datasette.client.get("/brain.json", cookies=cookies)
        assert database.status_code == 200 and database.json()["size"] == told, cookies
    # a query's rows are left as they are
    query = await datasette.client.get("/brain.json?sql=select+1+as+size", cookies=admin)
    assert query.json()["rows"] == [[1]]


@pytest.mark.asyncio
@pytest.mark.parametrize("table", ["knowledge", "entities", "relationships"])
async def test_a_view_index_or_table_added_to_a_brain_follows_the_tables_it_shows(brains, tmp_path, table):
    """A view over a brain's table, an FTS index `sqlite-utils enable-fts` made over one
    (with its shadow tables), a table a trigger fills from one: each answered its rows
    to whoever was denied that table (review 106, F1). They follow it now; a view of
    what a brain function computes follows every table; what shows none of a denied
    table stays readable, and the admin reads all."""
    import sqlite_utils

    brain = altered_copy(
        brains[0],
        tmp_path / "brain.db",
        "create view recent as select id, title, content from knowledge order by id desc",
        "create view counted as select count(*) as n from recent",  # a view of a view
        "create view entity_names as select name from entities",
        "create view edges as select relation_type from relationships",
        "create view computed as select brain_k(3) as k",  # reads what SQLite cannot tell
        "create table notes (body text)",
        "create view mine as select body from notes",
        "create table edge_log (id integer)",
        "create trigger edge_logged after insert on relationships begin insert into edge_log values (new.id); end",
        # review 107: named like the brain's own, a vocabulary of its index
        "create view knowledge_fts_names as select name from entities",
        "create view vec_knowledge_x as select relation_type from relationships",
        "create virtual table words using fts5vocab(knowledge_fts, 'instance')",
        # review 108: a name an FTS5 index would give its content, which the brain's keeps none of
        "create table knowledge_fts_content (name)",
        "create trigger named after insert on entities begin insert into knowledge_fts_content values (new.name); end",
        # and tables whose triggers fill each other: a check that asked their sources' sources never ended
        "create table a (x)",
        "create table b (x)",
        "create trigger ab after insert on a begin insert into b values (new.x); end",
        "create trigger ba after insert on b when new.x not in (select x from a) "
        "begin insert into a values (new.x); end",
    )
    sqlite_utils.Database(brain).table("entities").enable_fts(["name"])
    follows = {
        "knowledge": ["recent", "counted", "words"],
        "entities": [
            "entity_names",
            "entities_fts",
            "entities_fts_data",
            "entities_fts_config",
            "knowledge_fts_names",
            "knowledge_fts_content",
        ],
        "relationships": ["edges", "edge_log", "vec_knowledge_x"],
    }
    datasette = Datasette([str(brain)], metadata=denying(table))
    admin = {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}
    for name in [*follows[table], "computed"]:
        assert (await datasette.client.get(f"/brain/{name}.json")).status_code == 403, (table, name)
        assert (await datasette.client.get(f"/brain/{name}.json", cookies=admin)).status_code == 200, (table, name)
    # the graph's tables are derived from the memories: whoever may not read those reads none of them
    others = [] if table == "knowledge" else [n for other, names in follows.items() if other != table for n in names]
    readable = [*others, "mine", "notes", "a", "b"]
    for name in readable:
        assert (await datasette.client.get(f"/brain/{name}.json")).status_code == 200, (table, name)
    listed = {t["name"] for t in (await datasette.client.get("/brain.json")).json()["tables"]}
    listed |= {v["name"] for v in (await datasette.client.get("/brain.json")).json()["views"]}
    assert not listed & {*follows[table], "computed"} and {"mine", "notes"} <= listed


class CountsTableChecks:
    """Another plugin that counts the view-table checks Datasette asks its plugins."""

    __name__ = "counts-table-checks"  # Datasette lists its plugins by name

    def __init__(self):
        self.asked = 0

    @hookimpl
    def permission_allowed(self, action):
        self.asked += action == "view-table"


@pytest.mark.asyncio
async def test_a_page_asks_each_source_of_a_chain_of_added_tables_once(tmp_path, vault_brain_path):
    """A chain of tables each filled by a trigger from the one before: each table's
    check asked its whole chain again, so a database page of a 400-table chain took
    34 s (review 109, M1). A request asks each source once: the checks grow with the
    chain, not with its square."""
    asked = {}
    for length in (10, 40):
        path = tmp_path / f"chain{length}.db"
        shutil.copy(vault_brain_path, path)
        conn = brain_sql.connect(path)
        for i in range(length):
            conn.execute(f"create table t{i} (a)")
        for i in range(length - 1):
            conn.execute(f"create trigger g{i} after insert on t{i} begin insert into t{i + 1} values (new.a); end")
        conn.commit()
        close_brain(conn)
        counter = CountsTableChecks()
        pm.register(counter, name="counts-table-checks")
        try:
            datasette = Datasette([str(path)])
            page = await datasette.client.get(f"/chain{length}")
            assert page.status_code == 200 and f"t{length - 1}" in page.text
        finally:
            pm.unregister(name="counts-table-checks")
        asked[length] = counter.asked
    # some checks a table more (Datasette's own among them): asking each table's chain, 63 a table more
    assert asked[40] - asked[10] < 25 * 30, asked
