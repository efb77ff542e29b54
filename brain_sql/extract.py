"""The built-in entity extractor: inline [[relation::entity]] annotations and
[[wikilinks]] in a document's text, outside code."""

import bisect
import functools
import re
from collections import defaultdict
from pathlib import PurePosixPath

from .document import Relation
from .hookspecs import hookimpl

ANNOTATION = re.compile(r"\[\[([A-Za-z0-9_-]+)::([^\[\]|\n]+?)\]\]")
WIKILINK = re.compile(r"\[\[([^\[\]|#\n]+?)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
# a run of backticks, which opens a code span that a run as long closes, on its line (CommonMark lets one go
# on in its paragraph, but a chunk does not say where a list item's or a table row's paragraph ends: review 114)
_TICKS = re.compile(r"`+")
_LINE_END = re.compile(r"(\r\n|\r|\n)")  # CommonMark's
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_CLOSING = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")


@hookimpl
def brain_entity_extractors():
    return [annotations_and_wikilinks]


def annotations_and_wikilinks(document):
    """`[[owned_by::Dana Whitfield]]` -> owned_by edge from the note;
    `[[Target]]` / `[[Target|label]]` -> references edge to the note Target.
    Code is examples: fenced code blocks, a fence cut across chunks read on from
    the chunk before (review 112), and code spans of any backticks. Not indented
    lines: a chunk that begins inside a list reads as code to a parser that sees
    it alone (review 114: a nested list lost 91 of 120 edges)."""
    relations, fence, last = [], None, None
    for index, chunk in enumerate(document.chunks):
        # a chunk cut inside a line begins mid-line: a ``` there opens no fence (review 115)
        mid_line = last is not None and chunk.line_start is not None and chunk.line_start <= last
        text, fence = _without_code(chunk.content, fence, mid_line)
        last = chunk.line_end
        if "[[" not in text:
            continue  # no annotation, no wikilink
        for relation_type, name in ANNOTATION.findall(text):
            relations.append(Relation(relation_type, name.strip(), None, index))
        for target in WIKILINK.findall(text):
            if "::" in target:
                continue
            name = _note_name(target)
            if name:
                relations.append(Relation("references", name, None, index, "document"))
    return relations


@functools.cache
def _blocks():
    """markdown-it's block parser alone (inline markup is never read here)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable("inline")


def _without_code(text, fence=None, mid_line=False):
    """(`text` with its code blanked, each character a space, lines and offsets kept;
    the fence left open at its end, else None). `fence`: the fence a chunk before
    left open, whose code `text` begins in; `mid_line`: `text` begins inside a line."""
    if "[[" not in text and "```" not in text and "~~~" not in text:
        return text, fence  # no annotation, and no fence opened or closed
    opened = f"{fence}\n" if fence else ("." if mid_line else "")  # a first line that is no line's start
    parts = _LINE_END.split(opened + text)  # line, its end, line, ...: a note's ends as written (CRLF, CR)
    lines = parts[::2]
    code, left_open, written = set(), None, len(lines)
    while written and not lines[written - 1].strip():
        written -= 1  # blank lines at the end: a fence that runs to the end maps to its last written line
    for token in _blocks().parse("\n".join(lines)):
        if token.type == "fence" and token.map:
            start, end = token.map
            code.update(range(start, end))
            marker = _FENCE.match(lines[start])
            closing = _CLOSING.match(lines[end - 1]) if end - 1 > start else None
            closed = closing and closing[1][0] == marker[1][0] and len(closing[1]) >= len(marker[1]) if marker else True
            left_open = marker[1] if marker and end >= written and not closed else None
    parts[::2] = [" " * len(line) if n in code else _spans_blanked(line) for n, line in enumerate(lines)]
    return "".join(parts)[len(opened) :], left_open


def _spans_blanked(line):
    """`line` with its code spans blanked: a run of backticks opens one, closed by the
    next run as long (CommonMark: a backslash before a run escapes its first backtick,
    while inside a span a backslash escapes nothing), in one pass (a regex took 10 s
    on a 1 MB line)."""
    if "[[" not in line or "`" not in line:
        return line  # a span hides no annotation here
    runs = [(m.start(), m.end()) for m in _TICKS.finditer(line)]
    by_length = defaultdict(list)
    for at, (start, end) in enumerate(runs):
        by_length[end - start].append(at)
    spans, at = [], 0
    while at < len(runs):
        start, end = runs[at]
        start += _escaped(line, start)  # \` is a backtick, not the start of a run
        following = by_length[end - start] if end > start else ()
        closing = bisect.bisect_right(following, at)
        if closing < len(following):
            spans.append((start, runs[following[closing]][1]))
            at = following[closing] + 1
        else:
            at += 1  # no run as long after it: its backticks are text
    pieces, kept = [], 0
    for start, end in spans:
        pieces += [line[kept:start], " " * (end - start)]
        kept = end
    return "".join(pieces) + line[kept:]


def _escaped(line, at):
    """Whether the character at `at` is escaped: an odd number of backslashes before it."""
    before = at
    while before and line[before - 1] == "\\":
        before -= 1
    return (at - before) % 2


def _note_name(target):
    """The note a wikilink's target names: `folder/Note.md` -> `Note`; in a table,
    Obsidian writes an alias's bar escaped, `[[Note\\|alias]]`: its backslash is no
    part of the name (review 117)."""
    return PurePosixPath(target.strip().removesuffix("\\").strip()).name.removesuffix(".md").strip()


def entity_links(text: str) -> list[tuple[int, int, str]]:
    """(start, end, entity name) of each `[[relation::Entity]]` and `[[wikilink]]`
    in `text` outside code, in order: the spans ingest reads as naming entities."""
    masked = _without_code(text)[0]  # offsets kept
    found = [(m.start(), m.end(), m.group(2).strip()) for m in ANNOTATION.finditer(masked)]
    for m in WIKILINK.finditer(masked):
        name = "" if "::" in m.group(1) else _note_name(m.group(1))
        if name:
            found.append((m.start(), m.end(), name))
    return sorted(found)
