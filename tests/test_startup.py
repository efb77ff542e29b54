"""Starting up: every `sqlite-utils` command loads the brain's commands, so they load
nothing heavy until one of them runs; a server warms a brain so that its first recall
loads nothing more. Each check runs a fresh interpreter, whose imports are its own.
The figures (seconds) are bench/startup.py's."""

import json
import subprocess
import sys

import pytest
from datasette.app import Datasette

# what a command that only parses its options must not pay for: the MCP SDK, Datasette,
# the embedding models' libraries, an HTTP client, and brain_sql's engines
HEAVY = [
    "mcp",
    "datasette",
    "model2vec",
    "wordllama",
    "tokenizers",
    "safetensors",
    "onnxruntime",
    "httpx",
    "brain_sql.api",
]


def imported(code, before=""):
    """The modules a fresh interpreter imports running `code` (after `before`), sorted."""
    script = f"import json, sys\n{before}\nknown = set(sys.modules)\n{code}\n"
    script += "print(json.dumps(sorted(set(sys.modules) - known)))"
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def heavy(modules):
    return [name for name in HEAVY if name in modules]


def sqlite_utils(*args):
    """`sqlite-utils ARGS` as its console script runs it, plugins loaded from their entry points."""
    return f"from sqlite_utils.cli import cli; cli({list(args)!r}, standalone_mode=False)"


def test_importing_the_commands_loads_nothing_heavy():
    assert heavy(imported("import datasette_brain.cli")) == []


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["brain", "--help"], ["brain", "recall", "--help"]])
def test_sqlite_utils_help_loads_nothing_heavy(args):
    modules = imported(sqlite_utils(*args))
    assert "datasette_brain.cli" in modules and heavy(modules) == []


def test_sqlite_utils_help_lists_every_brain_command():
    result = subprocess.run(
        [sys.executable, "-m", "sqlite_utils", "brain", "--help"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    commands = result.stdout.split("Commands:")[1].split()
    for command in (
        "init",
        "ingest",
        "recall",
        "eval",
        "reindex",
        "check",
        "remember",
        "forget",
        "stats",
        "replicate",
        "follow",
        "mcp",
    ):
        assert command in commands


def test_a_recall_loads_the_model_not_the_mcp_sdk_or_datasette(vault_brain_copy):
    recall = sqlite_utils("brain", "recall", str(vault_brain_copy), "who owns the support runbook?")
    assert heavy(imported(recall)) == ["model2vec", "tokenizers", "safetensors", "brain_sql.api"]


def test_an_ingest_of_records_never_loads_the_markdown_parser(tmp_path):
    records = tmp_path / "records.jsonl"
    records.write_text(json.dumps({"_id": "a", "text": "The pager rota changes on Mondays."}) + "\n")
    modules = imported(sqlite_utils("brain", "ingest", str(tmp_path / "brain.db"), str(records)))
    assert "brain_sql.pipeline" in modules and "markdown_it" not in modules


def test_the_default_model_loads_from_the_wordllama_wheel_without_importing_it():
    """Its files are read where the wheel put them; the package itself imports an HTTP
    stack (requests, urllib3) a local model never uses."""
    embed = "import brain_sql; brain_sql.embed_with_usage(['a test'], brain_sql.DEFAULT_MODEL)"
    modules = imported(embed)
    assert "model2vec" in modules and "wordllama" not in modules and "requests" not in modules


def test_after_warming_the_first_recall_loads_nothing(vault_brain_copy):
    """What the first recall would load (the model, the read state, numpy's parts imported
    on first use) the server's warm-up at startup has loaded: the first answer is as fast
    as the rest."""
    path = str(vault_brain_copy)
    warm = f"import brain_sql; brain_sql.warm({path!r}, False); conn = brain_sql.connect({path!r})"
    recall = "brain_sql.recall(conn, brain_sql.parse_querydoc({'q': 'who owns the support runbook?'}))"
    assert imported(recall, before=warm) == []


@pytest.mark.asyncio
async def test_datasette_registers_every_hook_of_the_plugin(vault_brain_copy):
    """The hooks live in datasette_brain.plugin and load when Datasette reads the package
    its entry point names: Datasette lists each of them, and serves the brain's routes."""
    from datasette_brain import plugin as module

    marks = [
        getattr(module, name).datasette_impl | {"name": name}
        for name in dir(module)
        if hasattr(getattr(module, name), "datasette_impl")
    ]
    hooks = {mark.get("specname") or mark["name"] for mark in marks}
    assert {"startup", "register_routes", "register_mcp_tools", "prepare_connection", "canned_queries"} <= hooks
    datasette = Datasette([str(vault_brain_copy)])
    plugins = (await datasette.client.get("/-/plugins.json")).json()
    [brain] = [plugin for plugin in plugins if plugin["name"] == "datasette-brain"]
    assert set(brain["hooks"]) == hooks
    assert brain["templates"]  # the package's templates, found from its name
    response = await datasette.client.post("/brain/-/recall", json={"q": "who owns the support runbook?"})
    assert response.status_code == 200 and response.json()["hits"]


def test_without_datasette_mcp_the_plugin_serves_recall_and_never_loads_the_mcp_sdk(vault_brain_copy):
    """The plugin imports its MCP tools (and the MCP SDK) when datasette-mcp asks for them."""
    hide = (
        "import importlib.metadata as metadata; every = metadata.distributions; metadata.distributions = "
        "lambda **kw: (d for d in every(**kw) if d.metadata['Name'] != 'datasette-mcp')"
    )
    serve = f"""
import asyncio
from datasette.app import Datasette

async def recall():
    datasette = Datasette([{str(vault_brain_copy)!r}])
    response = await datasette.client.post("/brain/-/recall", json={{"q": "who owns the support runbook?"}})
    assert response.status_code == 200 and response.json()["hits"], response.text

asyncio.run(recall())
"""
    modules = imported(serve, before=hide)
    assert "datasette_brain.plugin" in modules and "datasette_mcp" not in modules and "mcp" not in modules
