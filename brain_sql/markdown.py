"""Markdown notes (an Obsidian-style vault): YAML frontmatter, chunks split at
headings with their heading path and line span, parsed by markdown-it-py."""

import functools
import json
import math
import re
from pathlib import Path

import yaml

from .chunk import fence_lines, pack
from .config import MAX_DOCUMENT_CHUNKS, MAX_FRONTMATTER_ALIASES, MAX_TITLE_CHARS
from .document import (
    NOTE_STRUCTURE_KEYS,
    Document,
    IngestError,
    IngestFormat,
    chunks_refusal,
    content_refusal,
    document_fields,
    text_bytes,
)
from .fields import said
from .hookspecs import hookimpl
from .wording import shown


@functools.cache
def _parser():
    """markdown-it, loaded when a note is read (a tenth of a second that ingests of
    records and every other command do without)."""
    from markdown_it import MarkdownIt
    from mdit_py_plugins.front_matter import front_matter_plugin

    # inline markup is never read (a chunk is its lines as written; a heading's name, its text as written): not
    # parsing it spares seconds and hundreds of MB on a 1 MB note of brackets or emphasis
    parser = MarkdownIt("commonmark").use(front_matter_plugin).enable("table").disable("inline")
    for rule in parser.block.ruler.__rules__:
        if rule.name in ("heading", "lheading"):
            parser.block.ruler.at(rule.name, _counted(rule.fn), {"alt": rule.alt})
    return parser


class _TooManySections(Exception):
    def __init__(self, sections, line):
        super().__init__(sections, line)
        self.sections, self.line = sections, line


def _counted(rule):
    """A heading rule of markdown-it that counts the sections its headings open (one
    with text, at the top level) and stops the parse at the first past
    MAX_DOCUMENT_CHUNKS: each makes a memory at least, so the note is refused, and
    parsing a 1 MB note of headings whole took seconds and hundreds of MB."""

    def counted(state, start, end, silent):
        found = rule(state, start, end, silent)
        if found and not silent and state.tokens[-3].level == 0 and state.tokens[-2].content.strip():
            state.env["brain_sections"] = state.env.get("brain_sections", 0) + 1
            if state.env["brain_sections"] > MAX_DOCUMENT_CHUNKS:
                raise _TooManySections(state.env["brain_sections"], start + 1)
        return found

    return counted


_LINE_END = re.compile(r"(\r\n?|\n)")  # markdown-it's: a lone CR ends a line of a note too


@hookimpl
def brain_ingest_formats():
    return [IngestFormat("markdown", (".md", ".markdown"), parse_markdown, "vault")]


def parse_markdown(path, text):
    """One note: a Document, or an IngestError for broken frontmatter."""
    parts = _LINE_END.split(text)  # lines as markdown-it counts them, each with its line end as written
    lines, ends = parts[0::2], dict(enumerate(parts[1::2], 1))
    try:
        tokens = _parser().parse(text, {})
    except _TooManySections as ex:
        yield IngestError(path, ex.line, chunks_refusal(ex.sections, "one for each heading up to this line"))
        return
    frontmatter = {}
    body = 0
    if tokens and tokens[0].type == "front_matter":
        body = tokens[0].map[1]
        try:
            frontmatter = _load_frontmatter(tokens[0].content)
        except (yaml.YAMLError, ValueError, RecursionError) as ex:  # a number past Python's digit limit, too deep
            mark = getattr(ex, "problem_mark", None)
            line = mark.line + 2 if mark else 1
            problem = getattr(ex, "problem", None) or said(ex) or "nested too deeply"
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
    size = text_bytes("".join(lines[n] + ends.get(n + 1, "") for n in range(body, len(lines))))  # as written
    too_much = content_refusal(size)
    if too_much:
        yield IngestError(path, body + 1, too_much)
        return
    units_by_section = _sections(tokens, lines, ends)
    code = fence_lines(tokens)  # as the whole note reads
    # a note's blocks are joined by a blank line, as Markdown renders them (and as every
    # brain stored them before a memory kept its text as written: a re-ingest keeps their rows)
    chunks = [
        c
        for heading_path, units in units_by_section
        for c in pack(units, heading_path, ends=ends, blank_line=True, breaks=_LINE_END, crlf=True, code_lines=code)
    ]
    yield document_fields(
        Document(document_id=path, title=str(title), chunks=chunks, source_path=path, line=1, content_bytes=size),
        frontmatter,
        structure=NOTE_STRUCTURE_KEYS,
    )


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses more than MAX_FRONTMATTER_ALIASES aliases: a few
    hundred bytes of nested anchors and aliases can otherwise expand to gigabytes."""

    aliases = 0

    def compose_node(self, parent, index):
        """A node, its aliases counted; an alias inside the value it names (`a: &a
        {x: *a}`) is refused by name: the value would hold itself, and no JSON can."""
        opened = self.__dict__.setdefault("opened_anchors", [])
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_FRONTMATTER_ALIASES:
                raise yaml.YAMLError(f"more than {MAX_FRONTMATTER_ALIASES} YAML aliases (*name)")
            event = self.peek_event()
            if event.anchor in opened:
                raise yaml.composer.ComposerError(
                    None,
                    None,
                    f"the alias *{event.anchor} is inside the value it names: it would hold itself",
                    event.start_mark,
                )
            return super().compose_node(parent, index)
        anchor = getattr(self.peek_event(), "anchor", None)
        opened.append(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            opened.pop()

    def compose_mapping_node(self, anchor):
        """A key given twice is refused, as JSON's is: YAML would keep the last value
        and drop the other; keys are compared as the text they are stored as (1 and
        "1", true and "true" are one key). Checked as written, before any merge (<<)
        is flattened into a mapping: a merged key may be overridden, as YAML means."""
        node = super().compose_mapping_node(anchor)
        if node.tag != _SET:
            keys = set()
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == _MERGE:
                    continue  # a mapping or list as a key is refused as unhashable when constructed
                # a plain "=" is YAML 1.1's value key, which flattening makes its text
                key = key_node.value if key_node.tag == _VALUE else _key_text(self.construct_object(key_node))
                if key in keys:
                    # named as written, and as stored when that differs ("no" is stored as "false")
                    named = shown(key_node.value) + (f" (stored as {shown(key)})" if key_node.value != key else "")
                    raise yaml.composer.ComposerError(
                        None, None, f"key {named} given twice (one value would be lost)", key_node.start_mark
                    )
                keys.add(key)
        return node

    def flatten_mapping(self, node):
        """Merges (<<) flattened into `node` as YAML means them, whichever PyYAML reads
        them: the mapping's own keys override merged ones, and of a list of merged
        mappings the first that has a key gives it. (PyYAML 6.0.4 keeps the first pair
        of a key, so a merged mapping's own key lost to what it merged in turn.) Each
        key is kept once, with the value that wins: a mapping merging ten that each
        merge ten would otherwise hold their pairs ten times over at each level (a
        600-byte note took 15 GB). A mapping cannot merge itself: compose_node refuses
        an alias inside the value it names."""
        merged, own = {}, []
        for key_node, value_node in node.value:
            if key_node.tag != _MERGE:
                if key_node.tag == _VALUE:  # a plain "=" as a key: its text, as PyYAML reads it
                    key_node.tag = "tag:yaml.org,2002:str"
                own.append((key_node, value_node))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"expected a mapping or list of mappings for merging, but found {source.id}",
                        source.start_mark,
                    )
            for source in reversed(sources):  # later pairs win: the first source's go last
                self.flatten_mapping(source)
                for pair in source.value:
                    merged[self._key_identity(pair[0])] = pair
        node.value = list(merged.values()) + own

    def _key_identity(self, key_node):
        """What tells a merged pair's key from another's: the text it is stored as
        (1, 01 and 0x1 are one key; a plain "=" is its text), as compose_mapping_node
        compares keys; a mapping or list as a key is its node (refused when constructed)."""
        if not isinstance(key_node, yaml.ScalarNode):
            return id(key_node)
        return (
            key_node.value
            if key_node.tag in (_VALUE, "tag:yaml.org,2002:str")
            else _key_text(self.construct_object(key_node))
        )

    def construct_mapping(self, node, deep=False):
        """A mapping with each key as the text JSON stores it as: a dict would make
        one key of 1 and true, and JSON cannot sort a mapping of numbers and text."""
        if not isinstance(node, yaml.MappingNode) or node.tag == _SET:
            return super().construct_mapping(node, deep=deep)
        return {_key_text(key): value for key, value in super().construct_pairs(_flattened(self, node), deep=deep)}


_SET, _MERGE, _VALUE = "tag:yaml.org,2002:set", "tag:yaml.org,2002:merge", "tag:yaml.org,2002:value"


def _flattened(loader, node):
    """`node` with its merges (<<) flattened in, as SafeConstructor reads a mapping,
    its keys checked hashable."""
    loader.flatten_mapping(node)
    for key_node, _ in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, "found unhashable key", key_node.start_mark
            )
    return node


def _key_text(key):
    """A mapping key as the text JSON stores it as (a date as its ISO text)."""
    if isinstance(key, str):
        return key
    if isinstance(key, (bool, float)) or key is None:
        return json.dumps(key)
    return str(key)


def _sorted_set(loader, node):
    """A YAML !!set as a list sorted by its members' text: JSON has no sets, and a
    set's order changes with each process's hash seed (an unchanged note "updated")."""
    return sorted(loader.construct_mapping(node), key=lambda member: (type(member).__name__, str(member)))


def _base64_text(loader, node):
    """A YAML !!binary as the base64 text it is written in: JSON has no bytes."""
    return "".join(loader.construct_scalar(node).split())


def _as_written(construct, canonical):
    """A constructor of YAML 1.1's numbers, booleans and times that keeps a scalar as
    the text written unless the value is written as it would be written back
    (`canonical(value, text)`): 010 was stored as 8, 1.50 as 1.5, 12:30 as 750, 0x10
    as 16 and on or no as true or false. Frontmatter is mostly read by YAML 1.2
    readers (Obsidian's), where these are text; YAML 1.2's true and false and an
    infinity (refused later, by name) keep their meaning."""

    def constructed(loader, node):
        value, text = construct(loader, node), loader.construct_scalar(node)
        return value if canonical(value, text) else text

    return constructed


_DECIMAL = re.compile(r"0|-?[1-9][0-9]*")  # an int as Python writes it, told without writing a huge one
_BoundedLoader.add_constructor(
    "tag:yaml.org,2002:int", _as_written(yaml.SafeLoader.construct_yaml_int, lambda _, text: _DECIMAL.fullmatch(text))
)
_BoundedLoader.add_constructor(
    "tag:yaml.org,2002:float",
    _as_written(
        yaml.SafeLoader.construct_yaml_float, lambda value, text: repr(value) == text or not math.isfinite(value)
    ),
)
_BoundedLoader.add_constructor(
    "tag:yaml.org,2002:bool",
    _as_written(yaml.SafeLoader.construct_yaml_bool, lambda _, text: text.lower() in ("true", "false")),
)
_BoundedLoader.add_constructor(
    "tag:yaml.org,2002:timestamp",
    _as_written(yaml.SafeLoader.construct_yaml_timestamp, lambda value, text: str(value) == text),
)
_BoundedLoader.add_constructor("tag:yaml.org,2002:set", _sorted_set)
_BoundedLoader.add_constructor("tag:yaml.org,2002:binary", _base64_text)
# a plain "=" (YAML 1.1's value key) as a value is its text, as it is as a key: PyYAML has no constructor for it
_BoundedLoader.add_constructor(_VALUE, yaml.SafeLoader.construct_scalar)


def _load_frontmatter(text):
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _sections(tokens, lines, ends):
    """[(heading path, [(block text, first line)])] in document order.

    Each top-level block is one unit, so code blocks and lists are never cut at
    a blank line inside them; a heading's own line opens its section. A heading
    with no text (`#`) names nothing: it closes the sections at its level and
    below, and opens one only when that changes the heading path, so a run of
    them packs into chunks with what follows instead of a memory each with no words.
    """
    sections, stack, units = [], [], []
    heading_path = None
    for index, token in enumerate(tokens):
        if token.level != 0 or token.map is None or token.type == "front_matter":
            continue
        start, end = token.map
        if token.type == "heading_open":
            # a heading stands in every chunk of its section: one of a title's length at most
            level, name = int(token.tag[1:]), tokens[index + 1].content.strip()[:MAX_TITLE_CHARS].strip()
            stack = [(lvl, named) for lvl, named in stack if lvl < level] + ([(level, name)] if name else [])
            path = " > ".join(named for _, named in stack) or None
            if name or path != heading_path:
                if units:
                    sections.append((heading_path, units))
                heading_path, units = path, []
        rows = lines[start:end]
        while rows and not rows[-1].strip():
            rows.pop()
        first = next((n for n, row in enumerate(rows) if row.strip()), len(rows))
        if first < len(rows):  # the block's lines as written, less blank ones at its ends
            begin, stop = start + first, start + len(rows)
            units.append(("".join(lines[n] + ends[n + 1] for n in range(begin, stop - 1)) + lines[stop - 1], begin + 1))
    if units:
        sections.append((heading_path, units))
    return sections
