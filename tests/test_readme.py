"""The examples of the README and of docs/*.md, run against the demo brain of the
README's quick start (`sqlite-utils brain ingest demo.db docs/vault`) and checked
against what the pages say they give. Each example is a fenced code block read from
the pages themselves (tests/examples.py), so an example that stops being true fails
here. By kind:

- `sqlite-utils` commands: each one is parsed by the real command-line interface
  (a command it has, options it takes); those on the demo brain run, and print the
  output block that follows them; the sessions on a new brain (history.db in
  docs/recall.md, brain.db in docs/ingest.md) run in order and print theirs;
- the README's HTTP and MCP recalls run on the demo brain, the agents' HTTP session
  on a served copy; docs/agents.md's Python runs against a real server
  (test_agents.py); the wheel command of the README runs in test_install.py;
- JSON and YAML parse; Python compiles, and each Python example runs in one named
  test; SQL runs on the demo brain;
- links lead to a file, and to a heading of the page they name."""

import asyncio
import contextlib
import json
import os
import re
import shlex
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import click
import pytest
import yaml
from click.testing import CliRunner
from datasette.app import Datasette
from mcp import Client, StdioServerParameters
from sqlite_utils.cli import cli

import brain_sql

from .examples import (
    BLOCKS,
    PAGES,
    README,
    ROOT,
    TEXT,
    argv,
    block_with,
    commands,
    output_after,
    printed_comment,
    run_python,
    sqlite_utils_commands,
)

METADATA = yaml.safe_load((ROOT / "metadata.yml").read_text(encoding="utf-8"))
DOCS = ROOT / "docs"
# Python examples, each by what marks it, and the test that runs it
PYTHON_RUN_BY = {
    'brain_sql.connect("demo.db")': "test_python_recall_example",
    'brain_sql.connect("brain.db")': "test_the_python_ingest_example",
    "127.0.0.1:8002": "tests/test_agents.py",
    "client.models.list()": "tests/test_agents.py",
}


def sqlite_utils(command, cwd):
    """Run a page's `sqlite-utils ...` command in-process in `cwd` (with its piped
    `echo '...'` as input); its stdout."""
    stdin = shlex.split(command.split(" | ", 1)[0])[1] if command.startswith("echo ") else None
    with contextlib.chdir(cwd):
        result = CliRunner().invoke(cli, argv(command), input=stdin)
    assert result.exit_code == 0, (command, result.output)
    return result.stdout


def session(page, database, folder):
    """Run, in order and in `folder`, the commands on `database` of every bash block
    of `page` that an output block follows; each block must print its output."""
    ran = 0
    for index, (where, language, body) in enumerate(BLOCKS[:-1]):
        after = BLOCKS[index + 1]
        if where != page or language != "bash" or after[0] != page or after[1] != "":
            continue
        steps = [c for c in sqlite_utils_commands(body) if database in argv(c)]
        if steps:
            printed = [line.rstrip() for step in steps for line in sqlite_utils(step, folder).splitlines()]
            assert printed == after[2].strip().splitlines(), body
            ran += 1
    return ran


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The quick start's demo brain: its ingest command run as written, from a
    folder holding this checkout's docs/vault; returns that folder."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "docs").symlink_to(DOCS)
    quick_start = block_with("datasette demo.db -m metadata.yml", "bash", README)[1]
    [ingest] = [part.strip() for part in quick_start.split("&&") if "brain ingest" in part]
    assert ingest == "sqlite-utils brain ingest demo.db docs/vault"
    sqlite_utils(ingest, folder)
    conn = brain_sql.connect(folder / "demo.db")
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()
    return folder


def test_the_readme_is_a_front_door():
    assert len(TEXT[README].splitlines()) <= 200
    first = " ".join(TEXT[README].split("\n\n")[1].split())  # what it is, in plain words
    assert "convex" not in first and "SQLite file" in first


def test_every_docs_page_is_linked_from_the_index():
    index = TEXT[DOCS / "index.md"]
    for page in PAGES:
        if page.parent == DOCS and page.name != "index.md":
            assert f"]({page.name})" in index, page.name


def test_ci_runs_the_readmes_test_command():
    quick = TEXT[README].split("## Quick start", 1)[1].split("\n## ", 1)[0]
    [test_command] = [
        body.strip() for body in re.findall(r"^```bash\n(.*?)^```", quick, re.M | re.S) if "pytest" in body
    ]
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == test_command


def test_both_quick_start_commands_install_the_checkout_editable():
    # one install mode: the second command reinstalling does not take away the files
    # a server started by the first one serves
    quick = TEXT[README].split("## Quick start", 1)[1].split("\n## ", 1)[0]
    code = "\n".join(re.findall(r"^```bash\n(.*?)^```", quick, flags=re.MULTILINE | re.DOTALL))
    installs = re.findall(r"pip install ([^&]*?)(?: &&|$)", code, flags=re.MULTILINE)
    assert len(installs) == 2, installs
    assert all(spec.split()[0] == "-e" for spec in installs), installs


@pytest.mark.asyncio
async def test_quick_start_serves_the_demo_with_its_metadata(demo):
    datasette = Datasette([str(demo / "demo.db")], metadata=METADATA)
    page = await datasette.client.get("/demo/knowledge")
    assert page.status_code == 200 and 'name="_search"' in page.text
    found = (await datasette.client.get("/demo/knowledge.json?_search=runbook&_shape=objects")).json()
    assert "Support Runbook" in {row["title"] for row in found["rows"]}


def test_recall_command_prints_the_documented_hit(demo):
    command, documented = output_after('brain recall demo.db "who owns the support runbook?"', README)
    printed = sqlite_utils(command.strip(), demo).splitlines()
    expected = documented.strip().splitlines()
    assert printed[0] == expected[0]
    prefix, suffix = expected[1].split("...", 1)
    assert printed[1].startswith(prefix) and printed[1].endswith(suffix), printed[1]
    assert printed[2] == expected[2]
    assert printed[-1] == expected[-1] == "confidence 1.00"


@pytest.mark.asyncio
async def test_the_readmes_http_recall(demo):
    _, block = block_with("curl -s 'http://127.0.0.1:8001/demo/-/recall", "bash", README)
    [command] = commands(block)
    url = urlsplit(next(word for word in shlex.split(command) if word.startswith("http")))
    assert url.netloc == "127.0.0.1:8001"  # the quick start's server
    datasette = Datasette([str(demo / "demo.db")], metadata=METADATA)
    response = await datasette.client.get(f"{url.path}?{url.query}")
    assert response.status_code == 200, response.text
    hits = response.json()["hits"]
    assert hits[0]["title"] == "Support Runbook" and len(hits) <= 3


def test_the_readmes_mcp_recall(demo, tmp_path):
    # the client configuration as written, the brain's path a copy of the demo brain's, run
    # from another folder (a client starts the server in a folder of its own)
    _, config = block_with('"mcpServers"', "json", README)
    [server] = json.loads(config)["mcpServers"].values()
    _, arguments = block_with('"q": "who owns the support runbook?"', "json", README)
    shutil.copy(demo / "demo.db", tmp_path / "demo.db")
    args = [str(tmp_path / "demo.db") if arg == "/path/to/demo.db" else arg for arg in server["args"]]
    assert args != server["args"]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def call():
        params = StdioServerParameters(command=server["command"], args=args, cwd=str(elsewhere), env=dict(os.environ))
        async with Client(params) as client:
            return await client.call_tool("brain_recall", json.loads(arguments))

    result = asyncio.run(call())
    assert not result.is_error, result.content
    hits = result.structured_content["hits"]
    assert hits[0]["title"] == "Support Runbook" and len(hits) <= 3


def test_python_recall_example(demo):
    _, code = block_with('result = brain_sql.recall(conn, {"q": "who owns the support runbook?"', "python")
    assert run_python(code, demo).strip() == printed_comment(code) == "Support Runbook"


def test_the_python_ingest_example(tmp_path):
    _, code = block_with('brain_sql.connect("brain.db")', "python")
    (tmp_path / "notes").symlink_to(DOCS / "vault")
    printed = run_python(code, tmp_path)
    assert printed.startswith("20 files, 20 documents: 26 chunks added"), printed
    conn = brain_sql.connect(tmp_path / "brain.db")
    assert {scope for (scope,) in conn.execute("select distinct scope from knowledge")} >= {"/acme", "/acme/support"}


def matches(documented, actual, where="response"):
    """The documented JSON holds for the actual one: "..." stands for anything,
    a string starting with "..." for any prefix, a float for the actual value
    rounded to as many decimals as it is written with."""
    if documented == "...":
        return
    if isinstance(documented, dict):
        for key, value in documented.items():
            if key != "...":
                assert key in actual, f"{where}.{key} missing"
                matches(value, actual[key], f"{where}.{key}")
    elif isinstance(documented, list):
        assert len(actual) >= len(documented), where
        for index, value in enumerate(documented):
            matches(value, actual[index], f"{where}[{index}]")
    elif isinstance(documented, float):
        decimals = len(repr(documented).split(".")[1])
        assert round(actual, decimals) == documented, f"{where}: {actual} documented as {documented}"
    elif isinstance(documented, str) and documented.startswith("..."):
        assert actual.endswith(documented[3:]), f"{where}: {actual!r}"
    else:
        assert actual == documented, f"{where}: {actual!r} documented as {documented!r}"


def test_the_documented_response_is_the_demo_recall(demo):
    _, text = block_with('"hits": [{"id"', "json")
    documented = json.loads(text)
    actual = json.loads(
        sqlite_utils(
            'sqlite-utils brain recall demo.db "who owns the support runbook?" --scope /acme/support --json', demo
        )
    )
    del documented["query"]["now"], documented["query"]["as_of"]  # the clock
    assert actual["query"]["as_of"] == actual["query"]["now"]
    timings = [key for key in documented["telemetry"] if key.endswith("_ms")]
    assert set(timings) <= set(actual["telemetry"])
    matches({key: value for key, value in documented["telemetry"].items() if key not in timings}, actual["telemetry"])
    del documented["telemetry"]
    matches(documented, actual)


def test_the_only_decayed_example(demo):
    _, text = block_with('"reason": "only_decayed"', "json")
    documented = json.loads(text)
    conn = brain_sql.connect(demo / "demo.db")
    actual = brain_sql.recall(conn, {"q": documented["query"]["q"]})
    matches(documented, actual)
    decayed = brain_sql.recall(conn, {"q": documented["query"]["q"], "include_decayed": True})
    assert decayed["hits"][0]["title"] == "Coffee Machine"


def test_scope_reads_itself_and_its_parents_never_a_sibling(demo):
    said = " ".join(TEXT[DOCS / "recall.md"].split())
    assert "a recall at `/acme/support` reads `/acme/support`, `/acme` and `/`, never `/acme/sales`" in said
    conn = brain_sql.connect(demo / "demo.db")
    q = "how much discount may we give on annual plans?"
    sales = brain_sql.recall(conn, {"q": q, "scope": "/acme/sales"})
    assert sales["hits"][0]["title"] == "Sales Discount Policy"
    support = brain_sql.recall(conn, {"q": q, "scope": "/acme/support", "k": 100, "cutoff": False})
    assert {hit["scope"] for hit in support["hits"]} <= {"/", "/acme", "/acme/support"}


def test_the_sql_recall_runs_with_sqlite_utils_query(demo):
    _, block = block_with("brain_sql.RECALL_SQL", "bash")
    [command] = commands(block)
    found = json.loads(sqlite_utils(command, demo))
    assert found[0]["title"] == "Support Runbook"
    # its order equals the API's with prf and the cut-off off
    conn = brain_sql.connect(demo / "demo.db")
    api = brain_sql.recall(
        conn, {"q": "who owns the support runbook?", "k": 5, "scope": "/acme/support", "prf": False, "cutoff": False}
    )
    assert [row["id"] for row in found] == [hit["id"] for hit in api["hits"]]


def test_the_sql_function_examples(demo):
    _, block = block_with("brain_verify('dana whitfield', content)", "bash")
    notes = re.findall(r"^# .*$", block, flags=re.MULTILINE)
    verify, vectors, lexical = commands(block)
    [row] = json.loads(sqlite_utils(verify, demo))
    assert json.loads(row["v"])["supported"] is True and "Dana Whitfield" in notes[0]
    for command, note in ((vectors, notes[1]), (lexical, notes[2])):
        titles = [row["title"] for row in json.loads(sqlite_utils(command, demo))]
        listed = note.split(": ", 1)[1].split(", ...")[0].split(", ")
        assert titles[: len(listed)] == listed, (note, titles)
    assert "Recall" not in [row["title"] for row in json.loads(sqlite_utils(lexical, demo))]


def test_stats_prints_the_documented_counts(demo):
    command, documented = output_after("sqlite-utils brain stats demo.db")
    printed = dict(line.split(": ", 1) for line in sqlite_utils(command.strip(), demo).splitlines())
    expected = dict(line.split(": ", 1) for line in documented.strip().splitlines())
    assert printed.keys() == expected.keys()
    for key in ("demo.db", "class", "scope", "source", "model"):
        assert printed[key] == expected[key], key

    def decayed(line):  # expired and expiring follow the clock; their sum does not
        expired, expiring, archived, flagged = (int(n) for n in re.findall(r"\d+(?! days)", line))
        return expired + expiring, archived, flagged

    assert decayed(printed["decayed"]) == decayed(expected["decayed"])


@pytest.mark.asyncio
async def test_the_http_session(demo, tmp_path):
    # the agents' curl session, against a copy of the demo served as `brain`
    shutil.copy(demo / "demo.db", tmp_path / "brain.db")
    datasette = Datasette(
        [str(tmp_path / "brain.db")], metadata={"plugins": {"datasette-brain": {"allow_write": True}}}
    )
    _, block = block_with("curl -s $B/-/remember", "bash")
    base = re.search(r"^B=(\S+)", block, flags=re.MULTILINE).group(1)
    # the server the token recipe starts, not the quick start's
    _, recipe = block_with("datasette serve brain.db -m agents.yml", "bash")
    assert f"-p {urlsplit(base).port}" in recipe and urlsplit(base).port != 8001
    answers = {}
    for command in commands(block):
        if not command.startswith("curl"):
            continue
        words = shlex.split(command.replace("$B", base))
        path = urlsplit(next(word for word in words if word.startswith("http"))).path
        body = json.loads(words[words.index("-d") + 1])
        response = await datasette.client.post(path, json=body)
        assert response.status_code in (200, 201), (path, response.text)
        answers[path.rsplit("/", 1)[1]] = response.json()
    remembered = answers["remember"]
    assert (remembered["ok"], remembered["added"], remembered["updated"], remembered["unchanged"]) == (True, 1, 0, 0)
    assert answers["recall"]["hits"][0]["title"] == "Deploy window"
    assert answers["forget"]["removed"]["external_ids"] == ["deploys"]
    assert answers["forget"]["removed"]["memories"] == [i for ids in remembered["ids"] for i in ids]


@pytest.mark.asyncio
async def test_the_pages_show_the_demo(demo):
    datasette = Datasette([str(demo / "demo.db")], metadata=METADATA)
    conn = brain_sql.connect(demo / "demo.db")
    [(memory_id,)] = conn.execute("select id from knowledge where heading_path = 'Support Runbook'").fetchall()
    [(dana,)] = conn.execute("select id from entities where name = 'Dana Whitfield'").fetchall()
    recall = await datasette.client.get(
        "/demo/-/brain", params={"q": "who owns the support runbook?", "scope": "/acme/support"}
    )
    assert recall.status_code == 200 and "Support Runbook" in recall.text
    memory = await datasette.client.get(f"/demo/-/memory/{memory_id}")
    assert memory.status_code == 200 and "Dana Whitfield" in memory.text and "owned_by" in memory.text
    entity = await datasette.client.get(f"/demo/-/entity/{dana}")
    assert entity.status_code == 200 and "Support Runbook" in entity.text
    decayed = await datasette.client.get("/demo/-/decayed.json")
    assert decayed.status_code == 200
    for title in ("Coffee Machine", "Summer Pager Rota", "Old Ticketing System"):
        assert title in decayed.text, title


def test_the_demo_vault_holds_what_the_examples_ask_about(demo):
    conn = brain_sql.connect(demo / "demo.db")
    edges = set(
        conn.execute(
            "select f.name, r.relation_type, t.name from relationships r "
            "join entities f on f.id = r.from_entity_id join entities t on t.id = r.to_entity_id"
        ).fetchall()
    )
    assert ("Support Runbook", "owned_by", "Dana Whitfield") in edges
    assert ("Dana Whitfield", "reports_to", "Priya Raman") in edges
    scopes = {scope for (scope,) in conn.execute("select distinct scope from knowledge where class = 'policy'")}
    assert {"/acme", "/acme/support", "/acme/sales"} <= scopes
    assert os.path.isdir(DOCS / "vault" / "acme")


def test_the_screenshots_the_pages_show_exist():
    shown = set()
    for page in PAGES:
        for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", TEXT[page]):
            assert (page.parent / image).is_file(), f"{page.name}: {image}: run python3 bench/screenshots.py"
            shown.add(Path(image).name)
    assert shown >= {"recall.png", "memory.png", "entity.png", "decayed.png"}
    assert "python3 bench/screenshots.py" in TEXT[DOCS / "pages.md"]


def test_the_validity_in_time_session(tmp_path):
    assert session(DOCS / "recall.md", "history.db", tmp_path) == 1
    # the analyst's query of the same history
    _, sql = block_with("(superseded_at is null or :t < superseded_at)", "sql")
    conn = brain_sql.connect(tmp_path / "history.db")
    assert [row[1] for row in conn.execute(sql, {"t": "2025-06-01"})] == ["Kim leads the weekend pager rota."]
    assert [row[1] for row in conn.execute(sql, {"t": "2026-06-01"})] == ["Sam leads the weekend pager rota."]


def test_the_remember_correct_forget_session(tmp_path):
    assert session(DOCS / "ingest.md", "brain.db", tmp_path) == 3
    conn = brain_sql.connect(tmp_path / "brain.db")
    assert conn.execute("select count(*) from knowledge").fetchone()[0] == 0


# every example, by kind


def examples(*languages):
    return [
        pytest.param(body, id=f"{page.name}:{n}") for n, (page, lang, body) in enumerate(BLOCKS) if lang in languages
    ]


def test_every_example_is_of_a_kind_the_tests_check():
    for page, language, _ in BLOCKS:
        assert language in {"bash", "json", "python", "sql", "yaml", ""}, f"{page.name}: ```{language}"


@pytest.mark.parametrize("body", examples("json"))
def test_json_examples_parse(body):
    json.loads(body)


@pytest.mark.parametrize("body", examples("yaml"))
def test_yaml_examples_parse(body):
    assert isinstance(yaml.safe_load(body), dict)


@pytest.mark.parametrize("body", examples("python"))
def test_python_examples_compile_and_each_runs_in_a_test(body):
    compile(body, "<example>", "exec")
    assert sum(marker in body for marker in PYTHON_RUN_BY) == 1, "give the example a test that runs it"


@pytest.mark.parametrize("body", examples("sql"))
def test_sql_examples_run_on_the_demo(body, demo):
    conn = brain_sql.connect(demo / "demo.db")
    conn.execute(body, {name: None for name in re.findall(r":(\w+)", body)}).fetchall()


def parsed(args):
    """click's parse of a sqlite-utils command line, without running it: a command
    it has, options it takes, the arguments it needs. Files it would read are the
    reader's, so their existence is not checked."""
    command, name = cli, "sqlite-utils"
    while isinstance(command, click.Group):
        name, *args = args
        command = command.get_command(click.Context(cli), name)
        assert command is not None, f"no command {name}"
    paths = [p.type for p in command.params if isinstance(p.type, click.Path) and p.type.exists]
    for path in paths:
        path.exists = False
    try:
        return command.make_context(name, list(args))
    finally:
        for path in paths:
            path.exists = True


SQLITE_UTILS = [
    pytest.param(command, id=f"{page.name}:{n}")
    for n, (page, language, body) in enumerate(BLOCKS)
    if language == "bash"
    for command in sqlite_utils_commands(body)
]


@pytest.mark.parametrize("command", SQLITE_UTILS)
def test_every_sqlite_utils_command_parses(command):
    parsed(argv(command))


@pytest.mark.parametrize("command", [c for c in SQLITE_UTILS if "demo.db" in argv(c.values[0])])
def test_every_command_on_the_demo_runs(command, demo, tmp_path):
    # on a copy: what one command does is never what the next one's example shows
    shutil.copy(demo / "demo.db", tmp_path / "demo.db")
    (tmp_path / "docs").symlink_to(DOCS)
    sqlite_utils(command, tmp_path)


def test_the_bench_scripts_the_pages_name_exist():
    for page in PAGES:
        for script in set(re.findall(r"\bbench/(\w+\.py)", TEXT[page])):
            assert (ROOT / "bench" / script).is_file(), f"{page.name}: bench/{script}"


def slug(heading):
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_leads_to_a_file_and_a_heading():
    for page in PAGES:
        prose = re.sub(r"^( *)```.*?^\1```", "", TEXT[page], flags=re.MULTILINE | re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.exists(), f"{page.name}: {target}"
            if anchor:
                headings = re.findall(r"^#+ (.*)$", file.read_text(encoding="utf-8"), flags=re.MULTILINE)
                assert anchor in {slug(h) for h in headings}, f"{page.name}: {target}"
