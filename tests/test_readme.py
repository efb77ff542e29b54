"""The README's examples, run against the demo brain of its quick start
(`sqlite-utils brain ingest demo.db docs/vault`), each checked against the result
the README documents. The commands and outputs are read from README.md itself, so
an example that stops being true fails here."""

import contextlib
import io
import json
import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from datasette.app import Datasette
from sqlite_utils.cli import cli

import brain_sql

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
METADATA = yaml.safe_load((ROOT / "metadata.yml").read_text(encoding="utf-8"))
RECALL_SQL_SUBSTITUTION = "\"$(python3 -c 'import brain_sql; print(brain_sql.RECALL_SQL)')\""


def blocks():
    """[(language, text)] of the README's top-level fenced code blocks, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```", README, flags=re.MULTILINE | re.DOTALL)


def block_with(text, language=None):
    """(index, block text) of the first block containing `text`."""
    for index, (lang, body) in enumerate(blocks()):
        if text in body and (language is None or lang == language):
            return index, body
    raise AssertionError(f"no README code block contains {text!r}")


def output_after(text):
    """The command block containing `text` and the output block right after it."""
    index, command = block_with(text, "bash")
    return command, blocks()[index + 1][1]


def commands(block):
    """The shell commands of a bash block: continuation lines joined, comments and
    blank lines dropped; a command that opens a quote runs on until it closes."""
    found, current = [], ""
    for line in block.replace("\\\n", " ").split("\n"):
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current = f"{current}\n{line}" if current else line
        try:
            shlex.split(current.replace(RECALL_SQL_SUBSTITUTION, "RECALL_SQL"))
        except ValueError:  # an open quote: the command goes on
            continue
        found.append(current)
        current = ""
    return found


def argv(command):
    """A `sqlite-utils ...` command's arguments, the recall SQL substituted."""
    words = shlex.split(command.replace(RECALL_SQL_SUBSTITUTION, "RECALL_SQL"))
    assert words[0] == "sqlite-utils", command
    return [brain_sql.RECALL_SQL if word == "RECALL_SQL" else word for word in words[1:]]


def sqlite_utils(command, cwd):
    """Run a README `sqlite-utils ...` command in-process in `cwd`; its stdout."""
    with contextlib.chdir(cwd):
        result = CliRunner().invoke(cli, argv(command))
    assert result.exit_code == 0, (command, result.output)
    return result.stdout


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The quick start's demo brain: its ingest command run as written, from a
    folder holding this checkout's docs/vault; returns that folder."""
    folder = tmp_path_factory.mktemp("readme")
    (folder / "docs").symlink_to(ROOT / "docs")
    quick_start = block_with("datasette demo.db -m metadata.yml", "bash")[1]
    [ingest] = [part.strip() for part in quick_start.split("&&") if "brain ingest" in part]
    assert ingest == "sqlite-utils brain ingest demo.db docs/vault"
    sqlite_utils(ingest, folder)
    conn = brain_sql.connect(folder / "demo.db")
    conn.execute("pragma wal_checkpoint(truncate)")
    conn.close()
    return folder


def test_both_quick_start_commands_install_the_checkout_editable():
    # one install mode: the second command reinstalling does not take away the files
    # a server started by the first one serves
    quick = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
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
    command, documented = output_after('brain recall demo.db "who owns the support runbook?"')
    printed = sqlite_utils(command.strip(), demo).splitlines()
    expected = documented.strip().splitlines()
    assert printed[0] == expected[0]
    prefix, suffix = expected[1].split("...", 1)
    assert printed[1].startswith(prefix) and printed[1].endswith(suffix), printed[1]
    assert printed[2] == expected[2]
    assert printed[-1] == expected[-1] == "confidence 1.00"


def test_python_recall_example(demo):
    _, code = block_with('result = brain_sql.recall(conn, {"q": "who owns the support runbook?"', "python")
    [expected] = re.findall(r"print\(.*\)\s+# (.*)", code)
    out = io.StringIO()
    with contextlib.chdir(demo), contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue().strip() == expected == "Support Runbook"


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
        sqlite_utils('sqlite-utils brain recall demo.db "who owns the support runbook?" --scope /acme/support --json', demo)
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
    assert "a recall at `/acme/support` reads `/acme/support`, `/acme` and\n`/`, never `/acme/sales`" in README
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
    # the Agents section's curl session, against a copy of the demo served as `brain`
    shutil.copy(demo / "demo.db", tmp_path / "brain.db")
    datasette = Datasette([str(tmp_path / "brain.db")], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
    _, block = block_with("curl -s $B/-/remember", "bash")
    base = re.search(r"^B=(\S+)", block, flags=re.MULTILINE).group(1)
    answers = {}
    for command in commands(block):
        if not command.startswith("curl"):
            continue
        words = shlex.split(command.replace("$B", base))
        url = next(word for word in words if word.startswith("http"))
        body = json.loads(words[words.index("-d") + 1])
        path = url.split("127.0.0.1:8001", 1)[1]
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
    recall = await datasette.client.get("/demo/-/brain", params={"q": "who owns the support runbook?", "scope": "/acme/support"})
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
    assert os.path.isdir(ROOT / "docs" / "vault" / "acme")


def test_the_screenshots_the_readme_shows_exist():
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", README)
    assert {Path(image).name for image in images} >= {"recall.png", "memory.png", "entity.png", "decayed.png"}
    for image in images:
        assert (ROOT / image).is_file(), f"{image}: run python3 bench/screenshots.py"
    assert "python3 bench/screenshots.py" in README


def test_the_validity_in_time_example(tmp_path):
    command, documented = output_after("sqlite-utils brain remember history.db")
    printed = []
    for command in commands(command):
        if command.startswith("echo"):  # echo '<record>' | sqlite-utils brain remember ...
            echo, pipe = command.split(" | ", 1)
            with contextlib.chdir(tmp_path):
                result = CliRunner().invoke(cli, argv(pipe.strip()), input=shlex.split(echo)[1])
            assert result.exit_code == 0 and "1 added" in result.output, result.output
        else:
            printed += sqlite_utils(command, tmp_path).splitlines()
    assert [line.rstrip() for line in printed] == documented.strip().splitlines()
    # the analyst's query of the same section
    _, sql = block_with("(superseded_at is null or :t < superseded_at)", "sql")
    conn = brain_sql.connect(tmp_path / "history.db")
    assert [row[1] for row in conn.execute(sql, {"t": "2025-06-01"})] == ["Kim leads the weekend pager rota."]
    assert [row[1] for row in conn.execute(sql, {"t": "2026-06-01"})] == ["Sam leads the weekend pager rota."]
