"""A recall request is defined once: QueryDoc's fields, with their help and bounds
(brain_sql.QUERY_FIELDS; the listing's, LISTING_FIELDS). Each door takes exactly
those fields, as they define them: the MCP tools' arguments, the CLI's recall
options, the recall page's form; the QueryDoc's checks keep their bounds; the docs
name every one. A field added to the table reaches every door built from it, and
the docs test names it until it is written down."""

import asyncio
import dataclasses
import json
import re
from html.parser import HTMLParser

import pytest
from datasette.app import Datasette
from mcp.server.mcpserver import MCPServer
from sqlite_utils.cli import cli

import brain_sql
from brain_sql import querydoc
from datasette_brain import cli as brain_cli
from datasette_brain import mcp_tools, pages

from .examples import ROOT, block_with

JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean", tuple: "array"}


def names(fields):
    return [field.name for field in fields]


def test_the_table_is_querydocs_fields_and_the_checks_keep_its_bounds():
    assert names(brain_sql.QUERY_FIELDS) == [field.name for field in dataclasses.fields(brain_sql.QueryDoc)]
    parsed = brain_sql.parse_querydoc({"q": "x"})
    for field in brain_sql.QUERY_FIELDS[1:]:
        assert field.help and field.label, field.name
        if field.default is not None:
            assert getattr(parsed, field.name) == field.default, field.name
        if field.bounds:
            low, high = field.bounds
            for fine in (low, high):
                assert getattr(brain_sql.parse_querydoc({"q": "x", field.name: fine}), field.name) == fine
            for wrong in (low - 1, high + 1):
                with pytest.raises(brain_sql.QueryError) as refused:
                    brain_sql.parse_querydoc({"q": "x", field.name: wrong})
                assert refused.value.field == field.name and f"{low} to {high}" in str(refused.value)
        if field.choices:
            with pytest.raises(brain_sql.QueryError, match=f"{field.name} must be among"):
                brain_sql.parse_querydoc({"q": "x", field.name: ["nonesuch"]})


def test_the_listing_is_recalls_filters_and_its_paging_keeps_its_bounds():
    recalls = {field.name: field for field in brain_sql.QUERY_FIELDS}
    *filters, page, size = brain_sql.LISTING_FIELDS
    assert all(field is recalls[field.name] for field in filters)
    for field in (page, size):
        low, high = field.bounds
        assert getattr(brain_sql.parse_listing({field.name: high}), field.name) == high
        for wrong in (low - 1, high + 1):
            with pytest.raises(brain_sql.QueryError) as refused:
                brain_sql.parse_listing({field.name: wrong})
            assert refused.value.field == field.name and f"{low} to {high:,}" in str(refused.value)
    assert brain_sql.parse_listing({}).size == size.default


def test_a_querydoc_field_without_its_help_is_refused():
    plain = dataclasses.make_dataclass(
        "Plain", [("freshness", float, dataclasses.field(default=0.5))], bases=(brain_sql.QueryDoc,), frozen=True
    )
    with pytest.raises(TypeError, match="freshness"):
        querydoc._fields(plain)


def tool_schemas():
    server = MCPServer("test")
    mcp_tools.register(Datasette([]), server)
    return {tool.name: tool.input_schema["properties"] for tool in asyncio.run(server.list_tools())}


@pytest.mark.parametrize("tool, fields", [("brain_recall", "QUERY_FIELDS"), ("brain_list", "LISTING_FIELDS")])
def test_the_mcp_tools_take_the_fields(tool, fields):
    fields = getattr(brain_sql, fields)
    arguments = tool_schemas()[tool]
    assert list(arguments) == [*names(fields), "database"]
    for field in fields:
        schema = arguments[field.name]
        assert schema["type"] == JSON_TYPES[field.type] and schema["description"] == field.description, field.name
        assert (schema.get("minimum"), schema.get("maximum")) == (field.bounds or (None, None)), field.name
    if tool == "brain_recall":
        assert arguments["classes"]["items"]["enum"] == list(brain_sql.CLASSES)


def recall_command():
    return cli.commands["brain"].commands["recall"]


def test_the_cli_recall_options_are_the_fields():
    options = {param.name: param for param in recall_command().params}
    assert [name for name in options if name not in ("db_path", "as_json")] == [
        "query",
        *(field.name for field in dataclasses.fields(brain_sql.QueryDoc)[1:]),
    ]
    for field in brain_sql.QUERY_FIELDS[1:]:
        option = options[field.name]
        assert option.help.startswith(field.description), field.name
        assert option.multiple is (field.type is tuple), field.name
        if field.type is bool:  # a pair: --graph / --no-graph
            assert option.opts == [f"--{field.name.replace('_', '-')}"] and option.secondary_opts, field.name


def test_each_cli_option_reaches_its_field(run, vault_brain_path):
    given = {
        "k": "3",
        "scope": "/acme",
        "classes": "policy",
        "sources": "vault",
        "domain": "global",
        "since": "2000-01-01",
        "until": "2999-01-01",
        "now": "2026-06-01",
        "timezone": "Europe/Paris",
        "as_of": "2026-05-01",
        "min_relevance": "2",
        "mmr_lambda": "0.25",
        "max_tokens": "5000",
    }
    argv = []
    for field in brain_sql.QUERY_FIELDS[1:]:
        name = "--" + (field.one or field.name).replace("_", "-")
        if field.type is bool:  # given as the opposite of its default
            argv.append(name.replace("--", "--no-") if field.default else name)
        else:
            argv += [name, given[field.name]]
    result = run("brain", "recall", vault_brain_path, "support runbook", *argv, "--json")
    assert result.exit_code == 0, result.output
    query = json.loads(result.output)["query"]
    for field in brain_sql.QUERY_FIELDS[1:]:
        if field.type is bool:
            assert query[field.name] is (not field.default), field.name
        elif field.shape == "time":
            assert query[field.name].startswith(given[field.name]), field.name
        else:
            expected = [given[field.name]] if field.type is tuple else field.type(given[field.name])
            assert query[field.name] == expected, field.name


class FormInputs(HTMLParser):
    """The named inputs of the recall form: {name: [attributes of each]}."""

    def __init__(self):
        super().__init__()
        self.inputs, self.in_form = {}, False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form":
            self.in_form = attrs.get("id") == "brain-recall-form"
        elif tag == "input" and self.in_form and attrs.get("name"):
            self.inputs.setdefault(attrs["name"], []).append(attrs)

    def handle_endtag(self, tag):
        if tag == "form":
            self.in_form = False


@pytest.mark.asyncio
async def test_the_recall_page_form_has_every_field(vault_brain_path):
    datasette = Datasette([str(vault_brain_path)])
    response = await datasette.client.get(f"/{vault_brain_path.stem}/-/brain")
    assert response.status_code == 200
    form = FormInputs()
    form.feed(response.text)
    # provenance is always on: the page shows why each hit was found
    assert sorted(form.inputs) == sorted(set(f.name for f in dataclasses.fields(brain_sql.QueryDoc)) - {"provenance"})
    for field in brain_sql.QUERY_FIELDS[1:]:
        if field.name == "provenance":
            continue
        shown = form.inputs[field.name][-1]
        assert shown["type"] == ("checkbox" if field.type is bool else "number" if field.bounds else "text"), field.name
        if field.bounds:
            assert (float(shown["min"]), float(shown["max"])) == field.bounds, field.name
    # a choice behind "More options" keeps them open; a default one does not
    for query, opened in (("?q=runbook&mmr_lambda=0.3", True), ("?q=runbook&mmr_lambda=0.7", False)):
        page = (await datasette.client.get(f"/{vault_brain_path.stem}/-/brain{query}")).text
        assert bool(re.search(r'<details id="brain-more-options"\s+open', page)) is opened, query


def recall_docs_options():
    """The options docs/recall.md's command-line section names."""
    text = (ROOT / "docs" / "recall.md").read_text(encoding="utf-8")
    section = text[text.index("## From the command line") : text.index("## From Python")]
    return set(re.findall(r"`(--[a-z-]+)", section))


def undocumented(fields):
    """The fields docs/recall.md does not name: neither an option of the CLI's
    section (either of a pair) nor a field of the documented response's query."""
    options = recall_docs_options()
    _, text = block_with('"hits": [{"id"', "json")
    query = json.loads(text)["query"]
    missing = []
    for field in fields:
        option = "--" + (field.one or field.name).replace("_", "-")
        spelled = {option, option.replace("--", "--no-")} if field.type is bool else {option}
        if field.name != "q" and not spelled & options or field.name not in query:
            missing.append(field.name)
    return missing


def test_the_docs_name_every_field():
    assert undocumented(brain_sql.QUERY_FIELDS) == []
    _, text = block_with('"hits": [{"id"', "json")
    assert list(json.loads(text)["query"]) == [*names(brain_sql.QUERY_FIELDS), "searched"]
    listing = (ROOT / "docs" / "export.md").read_text(encoding="utf-8")
    table = listing[listing.index("| parameter |") : listing.index("```json", listing.index("| parameter |"))]
    assert [name for name in names(brain_sql.LISTING_FIELDS) if f"`{name}`" not in table] == []


def test_a_field_added_reaches_every_door_and_the_docs_test_names_it(monkeypatch):
    new = querydoc.Field("freshness", float, None, "how much newer memories count", bounds=(0, 1))
    monkeypatch.setattr(brain_sql, "QUERY_FIELDS", (*brain_sql.QUERY_FIELDS, new))
    assert "freshness" in tool_schemas()["brain_recall"]
    options = brain_cli.recall_options(lambda **options: None).__click_params__
    assert [option.name for option in options if option.name == "freshness"] == ["freshness"]
    assert "freshness" in [field["name"] for field in pages.form_fields()]
    assert undocumented(brain_sql.QUERY_FIELDS) == ["freshness"]


@pytest.mark.parametrize(
    "parse, given, named",
    [
        (brain_sql.querydoc_from_strings, {"q": "x", "k": ["1", "2"]}, "k"),
        (brain_sql.querydoc_from_strings, {"q": ["x", "y"]}, "q"),
        (brain_sql.listing_from_strings, {"size": ["1", "2"]}, "size"),
        (brain_sql.listing_from_strings, {"since": ["-1d", "-2d"]}, "since"),
    ],
)
def test_a_single_valued_parameter_given_twice_is_refused_by_name(parse, given, named):
    """k=1&k=2: refused naming k, never one value taken and the other dropped; a
    list (sources=a&sources=b) still takes both."""
    with pytest.raises(brain_sql.QueryError, match=f"^{named} is given twice: give it once") as raised:
        parse(given)
    assert raised.value.field == named
    assert brain_sql.querydoc_from_strings({"q": "x", "sources": ["a", "b"]}).sources == ("a", "b")


@pytest.mark.parametrize(
    "parse, given",
    [
        (brain_sql.querydoc_from_strings, {"q": "x", "since": "2021-01-01", "until": "2020-01-01"}),
        (brain_sql.querydoc_from_strings, {"q": "x", "since": "2020-01-01", "until": "2020-01-01"}),
        (brain_sql.listing_from_strings, {"since": "-1d", "until": "-2d"}),  # memories.json
        (brain_sql.parse_querydoc, {"q": "x", "since": "2021-01-01T00:00:00+05:00", "until": "2020-12-31T19:00:00Z"}),
    ],
)
def test_an_until_not_later_than_since_is_refused_naming_both(parse, given):
    """A window holding no time is refused by name (400, a usage error), as a memory
    whose valid_to is not later than its valid_from, not answered 'no memory'."""
    with pytest.raises(brain_sql.QueryError, match=r"^until \(.*\) must be later than since \(") as raised:
        parse(given)
    assert raised.value.field == "until"
    assert parse({**given, "until": "+1d"})


def test_a_key_given_twice_in_a_request_is_refused_by_name():
    """A JSON key given twice in one object, at any depth: a FieldError naming it
    where a request is read (unique_keys); stored JSON is read as before."""
    with pytest.raises(brain_sql.FieldError, match='the key "k" of one object is given twice'):
        brain_sql.for_plugin.loads_json('{"q": "a", "filters": {"k": 1, "k": 2}}', unique_keys=True)
    assert brain_sql.for_plugin.loads_json('{"k": 1, "k": 2}') == {"k": 2}


@pytest.mark.asyncio
async def test_yesterday_is_the_asker_s_yesterday_in_the_time_zone_given(tmp_path):
    """At 20:00 on 5 December in California, "yesterday" is 4 December there: named
    by timezone, or by the offset now is given with; a zone that is none is a 400
    naming the field, with the zone most likely meant."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    said = {
        "4 Dec there": "2026-12-04T17:00:00Z",
        "5 Dec there": "2026-12-05T17:00:00Z",
        "5 Dec late": "2026-12-06T02:00:00Z",
    }
    records = [
        {"_id": title, "title": title, "content": "the dentist and the crown", "observed_at": at}
        for title, at in said.items()
    ]
    assert not brain_sql.remember(conn, records)[0].errors
    conn.close()
    datasette = Datasette([str(path)])

    async def titles(**params):
        response = await datasette.client.get("/brain/-/recall", params={"q": "dentist crown yesterday", **params})
        assert response.status_code == 200, response.text
        return sorted(hit["title"] for hit in response.json()["hits"]), response.json()["query"]["timezone"]

    assert await titles(now="2026-12-06T04:00:00Z", timezone="America/Los_Angeles") == (
        ["4 Dec there"],
        "America/Los_Angeles",
    )
    assert await titles(now="2026-12-05T20:00:00-08:00") == (["4 Dec there"], "-08:00")
    assert await titles(now="2026-12-05T20:00:00-08:00", timezone="UTC") == (["5 Dec there"], "UTC")
    assert await titles(now="2026-12-06T04:00:00Z") == (["5 Dec there"], None)
    # the recall page shows the window read from the query on the asker's clock, naming it
    page = await datasette.client.get(
        "/brain/-/brain",
        params={"q": "dentist crown yesterday", "now": "2026-12-06T04:00:00Z", "timezone": "America/Los_Angeles"},
    )
    assert "2026-12-04 (America/Los_Angeles)" in page.text and "2026-12-05 (America/Los_Angeles)" in page.text
    response = await datasette.client.get("/brain/-/recall", params={"q": "dentist", "timezone": "america/los_angeles"})
    assert response.status_code == 400
    assert "timezone" in response.json()["error"] and "did you mean America/Los_Angeles?" in response.json()["error"]
