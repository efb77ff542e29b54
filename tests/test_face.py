"""brain_sql's two faces: the public one (brain_sql.api, re-exported by brain_sql)
is what docs/python.md lists, every function in it annotated and held to its
annotations by mypy; the plugin's (brain_sql.for_plugin) holds what only
datasette_brain needs, and datasette_brain uses nothing of either face that they
do not list."""

import ast
import inspect
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import brain_sql
import brain_sql.api
from brain_sql import for_plugin

ROOT = Path(__file__).resolve().parent.parent
FACES = {"brain_sql": brain_sql.api, "for_plugin": for_plugin}


def test_brain_sql_exports_exactly_its_face():
    dir(brain_sql)  # the face loads on first use
    public = {name for name, value in vars(brain_sql).items() if not (name.startswith("_") or inspect.ismodule(value))}
    assert public == set(brain_sql.api.__all__)
    assert len(brain_sql.api.__all__) == len(set(brain_sql.api.__all__))
    assert len(for_plugin.__all__) == len(set(for_plugin.__all__))


def test_the_faces_share_no_name_and_define_each():
    assert set(brain_sql.api.__all__) & set(for_plugin.__all__) == set()
    for face in FACES.values():
        assert [name for name in face.__all__ if not hasattr(face, name)] == []


def _listed_names(text):
    """The `names` of the bullet list under python.md's "The public face"."""
    section = text.split("## The public face", 1)[1].split("\n## ", 1)[0]
    items = "\n".join(line for line in section.splitlines() if line.startswith(("- ", "  ")))
    return re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", items)


def test_python_md_lists_exactly_the_public_face():
    listed = _listed_names((ROOT / "docs" / "python.md").read_text(encoding="utf-8"))
    assert sorted(set(listed)) == sorted(brain_sql.api.__all__)
    assert len(listed) == len(set(listed)), "a name listed twice"


def _plugin_uses():
    """{face: {name: [where]}}: what datasette_brain takes from each face, as
    `brain_sql.NAME`, `for_plugin.NAME` or `from brain_sql[.for_plugin] import NAME`."""
    used = {face: {} for face in FACES}
    for path in sorted((ROOT / "datasette_brain").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            found = []
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in FACES:
                found = [(node.value.id, node.attr)]
            elif isinstance(node, ast.ImportFrom) and node.module in ("brain_sql", "brain_sql.for_plugin"):
                face = "brain_sql" if node.module == "brain_sql" else "for_plugin"
                found = [(face, alias.name) for alias in node.names]
            for face, name in found:
                used[face].setdefault(name, []).append(f"{path.name}:{node.lineno}")
    return used


def test_the_plugin_takes_only_what_the_faces_list():
    used = _plugin_uses()
    unlisted = {
        f"{face}.{name}": where
        for face, names in used.items()
        for name, where in names.items()
        if name not in FACES[face].__all__ and not (face == "brain_sql" and name == "for_plugin")
    }
    assert unlisted == {}


def test_the_plugins_face_holds_only_what_the_plugin_uses():
    """A name no part of datasette_brain takes is either public or not a face's."""
    assert sorted(set(for_plugin.__all__) - set(_plugin_uses()["for_plugin"])) == []


def _unannotated(label, function):
    """The parameters (and 'return') of `function` with no annotation; a face's
    operations are read through their wrapper (brain_sql.faults.named)."""
    signature = inspect.signature(function)  # follows __wrapped__
    parameters = [p for p in signature.parameters.values() if p.name not in ("self", "cls")]
    missing = [p.name for p in parameters if p.annotation is p.empty]
    if signature.return_annotation is signature.empty:
        missing.append("return")
    return [f"{label}: {name}" for name in missing]


def test_every_function_of_the_faces_is_annotated():
    missing = []
    for face in FACES.values():
        for name in face.__all__:
            value = getattr(face, name)
            if inspect.isclass(value):
                for method, function in vars(value).items():
                    if inspect.isfunction(function) and (method == "__init__" or not method.startswith("_")):
                        missing += _unannotated(f"{name}.{method}", function)
            elif callable(value):
                missing += _unannotated(name, value)
    assert missing == []


def _mypy(cwd):
    return subprocess.run([sys.executable, "-m", "mypy"], cwd=cwd, capture_output=True, text=True)


def test_the_type_check_passes():
    """mypy, configured in pyproject.toml: the faces typed whole, the bodies of typed
    functions held to their annotations, and the plugin's calls checked against them."""
    result = _mypy(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("Success")


@pytest.mark.slow
def test_the_type_check_fails_on_a_call_the_face_refuses(tmp_path):
    """The check is not vacuous: a plugin module that hands forget text for its ids
    (Iterable[int]) fails it, though the function holding the call is not annotated."""
    for part in ("brain_sql", "datasette_brain"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "datasette_brain" / "wrong.py").write_text(
        'import brain_sql\n\n\ndef forget_one(conn):\n    return brain_sql.forget(conn, ids="7")\n'
    )
    result = _mypy(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    refused = 'Argument "ids" has incompatible type "str"; expected "Iterable[int] | None"'
    assert f"wrong.py:5: error: {refused}" in result.stdout
