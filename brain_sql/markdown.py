"""Markdown notes (an Obsidian-style vault): YAML frontmatter, chunks split at
headings with their heading path and line span, parsed by markdown-it-py."""

import functools
from pathlib import Path

import yaml

from .chunk import pack
from .config import MAX_FRONTMATTER_ALIASES
from .document import Document, IngestError, IngestFormat, document_fields
from .hookspecs import hookimpl


@functools.cache
def _parser():
    """markdown-it, loaded when a note is read (a tenth of a second that ingests of
    records and every other command do without)."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.front_matter import front_matter_plugin

    return MarkdownIt("commonmark").use(front_matter_plugin).enable("table")


@hookimpl
def brain_ingest_formats():
    return [IngestFormat("markdown", (".md", ".markdown"), parse_markdown, "vault")]


def parse_markdown(path, text):
    """One note: a Document, or an IngestError for broken frontmatter."""
    lines = text.split("\n")
    tokens = _parser().parse(text)
    frontmatter = {}
    if tokens and tokens[0].type == "front_matter":
        try:
            frontmatter = _load_frontmatter(tokens[0].content)
        except (yaml.YAMLError, ValueError, RecursionError) as ex:  # a number past Python's digit limit, too deep
            mark = getattr(ex, "problem_mark", None)
            line = mark.line + 2 if mark else 1
            problem = getattr(ex, "problem", None) or str(ex) or "nested too deeply"
            yield IngestError(path, line, f"broken frontmatter: {problem}")
            return
        if frontmatter is None:
            frontmatter = {}
        if not isinstance(frontmatter, dict):
            yield IngestError(path, 1, "broken frontmatter: it must be a mapping of keys to values")
            return
    title = frontmatter.get("title")
    if isinstance(title, (bool, dict, list, set, bytes)):
        yield IngestError(path, 1, "'title' must be text")
        return
    title = title if title not in (None, "") else Path(path).stem
    units_by_section = _sections(tokens, lines)
    chunks = [c for heading_path, units in units_by_section for c in pack(units, heading_path)]
    yield document_fields(
        Document(document_id=path, title=str(title), chunks=chunks, source_path=path, line=1),
        frontmatter,
    )


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses more than MAX_FRONTMATTER_ALIASES aliases: a few
    hundred bytes of nested anchors and aliases can otherwise expand to gigabytes."""

    aliases = 0

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_FRONTMATTER_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_FRONTMATTER_ALIASES} YAML aliases (*name)")
        return super().compose_node(parent, index)


def _load_frontmatter(text):
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _sections(tokens, lines):
    """[(heading path, [(block text, first line)])] in document order.

    Each top-level block is one unit, so code blocks and lists are never cut at
    a blank line inside them; a heading's own line opens its section.
    """
    sections, stack, units = [], [], []
    heading_path = None
    for index, token in enumerate(tokens):
        if token.level != 0 or token.map is None or token.type == "front_matter":
            continue
        start, end = token.map
        if token.type == "heading_open":
            if units:
                sections.append((heading_path, units))
            level = int(token.tag[1:])
            stack = [(lvl, name) for lvl, name in stack if lvl < level]
            stack.append((level, tokens[index + 1].content.strip()))
            heading_path = " > ".join(name for _, name in stack)
            units = []
        block = "\n".join(lines[start:end]).strip("\n")
        if block.strip():
            units.append((block, start + 1))
    if units:
        sections.append((heading_path, units))
    return sections
