"""The layout holds: brain_sql's floors never import upward (import-linter's
contracts in pyproject.toml), no package import hides inside a function, and
datasette_brain reaches brain_sql only through its public face."""

import ast
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


def test_the_floors_contract_fails_on_an_upward_import(tmp_path):
    """The contract is not vacuous: a copy of brain_sql whose lexer imports the
    graph leg (two floors up) breaks it."""
    shutil.copytree(ROOT / "brain_sql", tmp_path / "brain_sql", ignore=shutil.ignore_patterns("__pycache__"))
    with open(tmp_path / "brain_sql" / "lexical.py", "a") as f:
        f.write("\nfrom . import graph  # noqa\n")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    floors = next(c for c in config["contracts"] if c["type"] == "layers")
    (tmp_path / ".importlinter").write_text(
        "[importlinter]\nroot_package = brain_sql\n\n[importlinter:contract:floors]\n"
        f"name = {floors['name']}\ntype = layers\ncontainers = brain_sql\nexhaustive = true\nlayers =\n"
        + "".join(f"    {layer}\n" for layer in floors["layers"])
    )
    # a fresh interpreter in the copy's folder, so `brain_sql` is the copy
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports; "
         "sys.exit(lint_imports(config_filename='.importlinter', no_cache=True, no_logo=True))"],
        cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "brain_sql.lexical -> brain_sql.graph" in result.stdout


def test_nothing_inside_brain_sql_imports_its_public_face():
    graph = grimp.build_graph("brain_sql")
    assert graph.find_modules_that_directly_import("brain_sql") == set()


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
    hidden = {place for package in PACKAGES for path in sorted((ROOT / package).glob("*.py"))
              for place in _imports_inside_functions(path)}  # fmt: skip
    assert sorted(hidden) == DEFERRED
