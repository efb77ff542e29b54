"""The examples of the README and of docs/*.md: their fenced code blocks, read from
the files themselves, and the shell commands in them. Shared by the tests that run
them (test_readme.py, test_agents.py, test_install.py)."""

import contextlib
import io
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS_AGENTS = ROOT / "docs" / "agents.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
TEXT = {page: page.read_text(encoding="utf-8") for page in PAGES}

# a fence at any indent (a block inside a list item too), closed at the same indent
_FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```[ \t]*$", flags=re.MULTILINE | re.DOTALL)
# "$(python3 -c '...')" in a command: its output, as the shell would substitute it
_SUBSTITUTION = re.compile(r"\"\$\(python3 -c '([^']*)'\)\"")


def fenced(text):
    """[(language, body)] of a Markdown text's fenced code blocks, in order; an
    indented block's lines lose its indent."""
    found = []
    for indent, language, body in _FENCE.findall(text):
        lines = body.split("\n")
        found.append((language, "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines)))
    return found


BLOCKS = [(page, language, body) for page in PAGES for language, body in fenced(TEXT[page])]


def block_with(text, language=None, page=None):
    """(index into BLOCKS, body) of the first block containing `text`."""
    for index, (where, lang, body) in enumerate(BLOCKS):
        if text in body and (language is None or lang == language) and (page is None or where == page):
            return index, body
    raise AssertionError(f"no example contains {text!r}")


def output_after(text, page=None):
    """The bash block containing `text` and the output block right after it, on the same page."""
    index, command = block_with(text, "bash", page)
    assert index + 1 < len(BLOCKS) and BLOCKS[index + 1][0] == BLOCKS[index][0], f"no output after {text!r}"
    assert BLOCKS[index + 1][1] == "", f"the block after {text!r} is not output"
    return command, BLOCKS[index + 1][2]


def commands(block):
    """The shell commands of a bash block: continuation lines joined, comments and
    blank lines dropped; a command that opens a quote runs on until it closes, and
    one with a here-document (`<<'END'`) takes the document's lines with it."""
    found, current, heredoc = [], "", None
    for line in block.replace("\\\n", " ").split("\n"):
        if heredoc:
            found[-1] += "\n" + line
            heredoc = None if line.strip() == heredoc else heredoc
            continue
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        current = f"{current}\n{line}" if current else line
        try:
            shlex.split(_SUBSTITUTION.sub("X", current), comments=True)
        except ValueError:  # an open quote: the command goes on
            continue
        found.append(current)
        here = re.search(r"<<\s*'?(\w+)'?", current)
        heredoc = here.group(1) if here else None
        current = ""
    return found


def substituted(code):
    """What `python3 -c 'code'` prints, without its final newline (run in this
    process, with the code under test)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "<substitution>", "exec"), {})
    return out.getvalue().removesuffix("\n")


def argv(command):
    """A `sqlite-utils ...` command's arguments (the part after a pipe, before a redirection), each
    "$(python3 -c '...')" replaced by what it prints."""
    command = command.split(" | ", 1)[-1].strip()
    outputs = []

    def placeholder(match):
        outputs.append(substituted(match.group(1)))
        return f"SUBSTITUTION{len(outputs) - 1}"

    words = shlex.split(_SUBSTITUTION.sub(placeholder, command), comments=True)
    words = words[
        : next((i for i, word in enumerate(words) if word in (">", ">>")), len(words))
    ]  # its output to a file
    assert words[0] == "sqlite-utils", command
    return [re.sub(r"SUBSTITUTION(\d+)", lambda m: outputs[int(m.group(1))], word) for word in words[1:]]


def sqlite_utils_commands(block):
    """The block's commands that run `sqlite-utils` (alone or after a pipe)."""
    return [c for c in commands(block) if c.startswith("sqlite-utils") or " | sqlite-utils" in c]


def run_python(code, cwd, replace=()):
    """Run an example's Python in `cwd`, each (old, new) of `replace` replaced
    first (a documented server's address by a test server's); what it printed."""
    for old, new in replace:
        assert old in code, old
        code = code.replace(old, new)
    out = io.StringIO()
    with contextlib.chdir(cwd), contextlib.redirect_stdout(out):
        exec(compile(code, "<example>", "exec"), {"__name__": "__example__"})
    return out.getvalue()


def printed_comment(code):
    """The `# ...` comment of a Python example's print(...) line: what it prints."""
    [expected] = re.findall(r"print\(.*\)\s+# (.*)", code)
    return expected
