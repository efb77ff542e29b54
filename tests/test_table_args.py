"""Datasette's table pages on a brain: a query argument Datasette itself fails on with a
500 (a column that is not there to sort by, _sort beside _sort_desc, a _timelimit or a
_through it cannot read) is a 400 naming the argument, on the JSON, the page and the
CSV, on every table of the brain; whoever may not read the table is told only that."""

import json

import pytest
from datasette.app import Datasette

ADMIN = {"id": "admin"}
TABLES = ["knowledge", "entities", "relationships", "knowledge_fts", "vec_knowledge", "brain_changes"]


def served(path, metadata=None):
    return Datasette([str(path)], metadata=metadata)


def as_admin(datasette):
    return {"ds_actor": datasette.sign({"a": ADMIN}, "actor")}


@pytest.mark.asyncio
@pytest.mark.parametrize("table", TABLES)
async def test_sorting_by_a_column_that_is_not_there_is_a_400_naming_it(vault_brain_path, table):
    datasette = served(vault_brain_path)
    for argument in ("_sort", "_sort_desc"):
        for suffix in (".json", "", ".csv"):
            response = await datasette.client.get(f"/brain/{table}{suffix}?{argument}=no_such_column")
            assert response.status_code == 400, (table, argument, suffix)
            assert "no_such_column" in response.text and argument in response.text
    both = await datasette.client.get(f"/brain/{table}.json?_sort=rowid&_sort_desc=rowid")
    assert both.status_code == 400 and "_sort or _sort_desc" in both.json()["error"]


@pytest.mark.asyncio
async def test_sorting_by_a_column_that_is_there_still_sorts(vault_brain_path):
    datasette = served(vault_brain_path)
    titles = (await datasette.client.get("/brain/knowledge.json?_sort_desc=title&_col=title&_shape=array")).json()
    assert [row["title"] for row in titles] == sorted((row["title"] for row in titles), reverse=True)
    for table, column in (("knowledge_fts", "rowid"), ("vec_knowledge", "knowledge_id"), ("entities", "name")):
        assert (await datasette.client.get(f"/brain/{table}.json?_sort={column}")).status_code == 200, table


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "query, named",
    [
        ("_timelimit=abc", "_timelimit"),
        ("_through=garbage", "_through"),
        ("_through={}", "_through"),
        ('_through={"table": "entities", "column": "id", "value": 1}', "_through: entities has no foreign key"),
        ('_through={"table": "relationships", "column": "id", "value": {"a": 1}}', "_through's value"),
        ('_through={"table": ["x"], "column": "id", "value": 1}', "_through's table and column"),
    ],
)
async def test_other_arguments_datasette_fails_on_are_a_400_naming_them(vault_brain_path, query, named):
    datasette = served(vault_brain_path)
    response = await datasette.client.get(f"/brain/knowledge.json?{query}")
    assert response.status_code == 400, query
    assert named in response.json()["error"]


@pytest.mark.asyncio
async def test_a_good_through_still_filters(vault_brain_path):
    datasette = served(vault_brain_path)
    edge = (await datasette.client.get("/brain/relationships.json?_shape=array&knowledge_id__notnull=1")).json()[0]
    through = json.dumps({"table": "relationships", "column": "id", "value": edge["id"]})
    rows = (await datasette.client.get("/brain/knowledge.json", params={"_through": through, "_shape": "array"})).json()
    assert [row["id"] for row in rows] == [edge["knowledge_id"]]


@pytest.mark.asyncio
async def test_whoever_may_not_read_the_table_learns_nothing_of_its_columns(vault_brain_path):
    """A 403 whether or not the column is there: a 400 for one that is not would tell
    which are; _through names a table the actor may not read: a 403 too."""
    metadata = {"databases": {"brain": {"tables": {"knowledge": {"allow": ADMIN}, "relationships": {"allow": ADMIN}}}}}
    datasette = served(vault_brain_path, metadata)
    for query in ("_sort=no_such_column", "_sort=title", "_sort_desc=no_such_column"):
        assert (await datasette.client.get(f"/brain/knowledge.json?{query}")).status_code == 403, query
        admin = await datasette.client.get(f"/brain/knowledge.json?{query}", cookies=as_admin(datasette))
        assert admin.status_code == (200 if "title" in query else 400), query
    through = json.dumps({"table": "relationships", "column": "nope", "value": 1})
    response = await datasette.client.get("/brain/entities.json", params={"_through": through})
    assert response.status_code == 403


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "query, said",
    [
        ("id__in=[", "id__in: a value starting with [ must be a JSON list"),
        ("id__notin=[1,", "id__notin: a value starting with [ must be a JSON list"),
        ("id__in=" + "[" * 5000, "id__in: a value starting with [ must be a JSON list"),
        ('id__in=[{"a": 1}]', "id__in: the list's items must be text, numbers, true, false or null"),
        ("title__notin=[[1]]", "title__notin: the list's items must be"),
    ],
)
async def test_a_filters_list_datasette_cannot_read_is_a_400_naming_it(vault_brain_path, query, said):
    """Datasette reads the list before any hook, and SQLite binds its items: refused
    before the view, the answer is the same whoever asks (it says nothing of the table)."""
    datasette = served(vault_brain_path, {"databases": {"brain": {"tables": {"knowledge": {"allow": ADMIN}}}}})
    for cookies in (as_admin(datasette), None):
        response = await datasette.client.get(f"/brain/knowledge.json?{query}", cookies=cookies)
        assert response.status_code == 400 and response.json()["error"].startswith(said), query
        assert (await datasette.client.get(f"/brain/knowledge?{query}", cookies=cookies)).status_code == 400
    good = await datasette.client.get(
        "/brain/entities.json?_shape=array&id__in=[1,2]&id__notin=2", cookies=as_admin(datasette)
    )
    assert [row["id"] for row in good.json()] == [1]
