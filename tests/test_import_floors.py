"""The import floors hold: brain_sql's floors never import upward (import-linter's
contracts in pyproject.toml), no package import hides inside a function,
datasette_brain reaches brain_sql only through its two faces, docs/architecture.md
lists the floors the contract holds, and settings are read from the environment in
brain_sql/config.py alone."""

import ast
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("brain_sql", "datasette_brain")


def test_import_linter_contracts_hold(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def _lint_a_copy(folder, module, line):
    """lint-imports, with pyproject.toml's contracts, on a copy of both packages in
    `folder` whose `module` (a path) has `line` added; run by a fresh interpreter in
    the copy's folder, so the packages it reads are the copy."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, folder / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", folder)
    with open(folder / module, "a") as f:
        f.write(f"\n{line}  # noqa\n")
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))",
        ],
        cwd=folder,
        capture_output=True,
        text=True,
    )


def test_the_floors_contract_fails_on_an_upward_import(tmp_path):
    """The contract is not vacuous: a copy of brain_sql whose lexer imports the
    graph leg (two floors up) breaks it."""
    result = _lint_a_copy(tmp_path, "brain_sql/lexical.py", "from . import graph")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "brain_sql.lexical -> brain_sql.graph" in result.stdout


def test_the_faces_contract_fails_on_an_import_past_the_faces(tmp_path):
    """The plugin may import brain_sql and brain_sql.for_plugin, nothing else: a copy
    whose pages import brain_sql.browse breaks the contract."""
    result = _lint_a_copy(tmp_path, "datasette_brain/pages.py", "from brain_sql import browse")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "brain_sql floors KEPT" in result.stdout
    assert "datasette_brain.pages -> brain_sql.browse" in result.stdout


def test_nothing_inside_brain_sql_imports_its_faces():
    graph = grimp.build_graph("brain_sql")
    assert graph.find_modules_that_directly_import("brain_sql") == set()
    assert graph.find_modules_that_directly_import("brain_sql.api") == {"brain_sql"}  # __init__ (for the type checker)
    assert graph.find_modules_that_directly_import("brain_sql.for_plugin") == set()


def test_the_architecture_page_lists_the_floors_of_the_contract():
    """docs/architecture.md's numbered floors are the contract's layers, in order."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = page.split("## The floors", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\d+\. `([^`]+)`", section, flags=re.MULTILINE)
    assert listed == [" | ".join(part.strip() for part in layer.split("|")) for layer in layers]


def _imports_inside_functions(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom):
                    names = [inner.module or ""] if not inner.level else ["."]
                elif isinstance(inner, ast.Import):
                    names = [alias.name for alias in inner.names]
                else:
                    continue
                if any(n == "." or n.split(".")[0] in PACKAGES for n in names):
                    yield f"{path.relative_to(ROOT)}: {ast.unparse(inner)}"


# imports deferred for start-up time, not to hide a circle: the commands sqlite-utils loads
# for every command it runs import stdio (Datasette's app, the MCP SDK) for `brain mcp` alone,
# and the plugin imports its MCP tools (the MCP SDK) when datasette-mcp asks for them
DEFERRED = ["datasette_brain/cli.py: from . import stdio", "datasette_brain/plugin.py: from . import mcp_tools"]


def test_no_package_import_hides_inside_a_function():
    """Imports placed in functions once held an import circle together; each
    module now imports what it needs at the top, from the floors below it."""
    hidden = {
        place
        for package in PACKAGES
        for path in sorted((ROOT / package).glob("*.py"))
        for place in _imports_inside_functions(path)
    }
    assert sorted(hidden) == DEFERRED


def _settings_read(path):
    """Where `path` reads a BRAIN_ environment variable (os.environ or os.getenv)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Subscript):
            key, held = node.slice, node.value
        elif isinstance(node, ast.Call) and node.args:
            key, held = node.args[0], node.func
        else:
            continue
        if not (isinstance(key, ast.Constant) and str(key.value).startswith("BRAIN_")):
            continue
        source = ast.unparse(held)
        if "environ" in source or source.endswith("getenv"):
            yield f"{path.relative_to(ROOT)}:{node.lineno}"


def test_the_settings_are_read_in_config_alone():
    """brain_sql/config.py reads every setting from the environment, with its
    default documented there; other modules ask it."""
    elsewhere = [
        place
        for package in PACKAGES
        for path in sorted((ROOT / package).glob("*.py"))
        if path.name != "config.py"
        for place in _settings_read(path)
    ]
    assert elsewhere == []
    assert list(_settings_read(ROOT / "brain_sql" / "config.py"))  # the check finds a read where there is one
