"""The built-in entity extractor: inline [[relation::entity]] annotations and
[[wikilinks]] in a document's text, outside code."""

import bisect
import re
from collections import defaultdict
from pathlib import PurePosixPath

from .chunk import block_parser
from .document import Relation
from .hookspecs import hookimpl

ANNOTATION = re.compile(r"\[\[([A-Za-z0-9_-]+)::([^\[\]|\n]+?)\]\]")
WIKILINK = re.compile(r"\[\[([^\[\]|#\n]+?)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
# a run of backticks, which opens a code span that a run as long closes, on its line (CommonMark lets one go
# on in its paragraph, but a chunk does not say where a list item's or a table row's paragraph ends: review 114)
_TICKS = re.compile(r"`+")
_LINE_END = re.compile(r"(\r\n|\r|\n)")  # CommonMark's
# a list item's marker, and the spaces after it (its content begins after them)
_ITEM = re.compile(r"[ \t]*(?:[-+*]|\d{1,9}[.)])(?:[ \t]+|$)")
_QUOTE = re.compile(r" {0,3}>[ \t]?")
_CLOSING = re.compile(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")


@hookimpl
def brain_entity_extractors():
    return [annotations_and_wikilinks]


def annotations_and_wikilinks(document):
    """`[[owned_by::Dana Whitfield]]` -> owned_by edge from the note;
    `[[Target]]` / `[[Target|label]]` -> references edge to the note Target.
    Code is examples: fenced code blocks (a note's or a record's as markdown-it reads
    the whole text, review 121; a text with a lone CR, or a format's own chunks, read on
    from chunk to chunk, review 112; an export's is never read: pipeline), and
    code spans of any backticks. Not indented
    lines: a chunk that begins inside a list reads as code to a parser that sees
    it alone (review 114: a nested list lost 91 of 120 edges)."""
    relations, fence, last = [], None, None
    for index, chunk in enumerate(document.chunks):
        # a chunk cut inside a line begins mid-line: a ``` there opens no fence (review 115)
        mid_line = last is not None and chunk.line_start is not None and chunk.line_start <= last
        if fence and last is not None and chunk.line_start is not None and chunk.line_start > last + 1:
            fence = fence if fence.blank("") else None  # the blank lines between: a block quote's end (review 120)
        if chunk.code is not None:  # a note's: its fenced lines read on the whole note
            text = _lines_blanked(chunk.content, chunk.code)
        else:
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


def _lines_blanked(text, code):
    """`text` with the lines numbered in `code` (from 0) blanked, each character a
    space, and the code spans of the others (lines and offsets kept)."""
    if "[[" not in text:
        return text
    parts = _LINE_END.split(text)
    parts[::2] = [" " * len(line) if n in code else _spans_blanked(line) for n, line in enumerate(parts[::2])]
    return "".join(parts)


def _without_code(text, fence=None, mid_line=False):
    """(`text` with its code blanked, each character a space, lines and offsets kept;
    the fence left open at its end, else None). `fence`: the fence a chunk before
    left open, whose code `text` begins in (_Fence); `mid_line`: `text` begins inside
    a line."""
    if "[[" not in text and "```" not in text and "~~~" not in text:
        return text, fence  # no annotation, and no fence opened or closed
    parts = _LINE_END.split(text)  # line, its end, line, ...: a note's ends as written (CRLF, CR)
    lines = parts[::2]
    read_on, still_open = fence.read_on(lines, mid_line) if fence else (0, False)  # the fence's lines, its end's
    code, left_open = set(range(read_on)), fence if still_open else None
    if read_on < len(lines):
        rest = lines[read_on:]
        if mid_line and not read_on:
            rest = ["." + rest[0], *rest[1:]]  # a first line that is no line's start opens no fence
        containers = []  # the block quotes and list items open where a token is: (">" or "item", first line)
        for token in block_parser().parse("\n".join(rest)):
            if token.type in ("blockquote_open", "list_item_open"):
                containers.append(token.map[0] if token.type == "list_item_open" and token.map else ">")
            elif token.type in ("blockquote_close", "list_item_close"):
                containers.pop()
            elif token.type == "fence" and token.map:
                start, end = token.map
                code.update(range(read_on + start, read_on + end))
                opened = _Fence.within(rest, containers, token.markup)
                closed = end - 1 > start and opened.closes(rest[end - 1])
                # open at the chunk's end when all after it is blank in its containers (a callout's ">" lines)
                left_open = opened if not closed and all(opened.blank(line) for line in rest[end:]) else None
    parts[::2] = [" " * len(line) if n in code else _spans_blanked(line) for n, line in enumerate(lines)]
    return "".join(parts), left_open


class _Fence:
    """A fenced block left open at a chunk's end, to be read on in the next: its
    marker, and the containers it is in (a callout's `>`, a list item's indent), which
    each line of it begins with (review 118: a fence in a callout or a nested list
    item, read on as if at the top, lost the callout's later links, or made edges of
    its code; review 119: a tab's indent, a list item's of two columns)."""

    def __init__(self, marker, containers):
        self.marker, self.containers = marker, containers

    @classmethod
    def within(cls, lines, containers, marker):
        """The fence `marker` opens inside `containers` (a block quote's ">", a list
        item's first line, outermost first, as markdown-it's tokens nest them): a
        list item's content begins after its marker, as many columns in."""
        fence = cls(marker, [])
        for container in containers:
            if container == ">":
                fence.containers.append(">")
            else:
                item = _ITEM.match(fence.inside(lines[container]) or "")
                fence.containers.append(len(item[0].expandtabs(4)) if item else 0)
        return fence

    def inside(self, line):
        """`line` without its containers, or None when it is not in them (a block
        quote ended, a list item's indent left): the fence ends there."""
        at = 0
        for container in self.containers:
            if container == ">":
                quoted = _QUOTE.match(line, at)
                if not quoted:
                    return None
                at = quoted.end()
                continue
            column = 0  # a list item's indent, in columns: a tab to the next multiple of 4
            while column < container and at < len(line) and line[at] in " \t":
                column = column + 4 - column % 4 if line[at] == "\t" else column + 1
                at += 1
            if column < container:
                return None if line[at:].strip() else ""
        return line[at:]

    def blank(self, line):
        """Whether `line` is blank inside this fence's containers."""
        inner = self.inside(line)
        return inner is not None and not inner.strip()

    def closes(self, line):
        """Whether `line` closes this fence: its marker's character, as many at least."""
        inner = self.inside(line)
        closing = _CLOSING.match(inner) if inner is not None else None
        return bool(closing) and closing[1][0] == self.marker[0] and len(closing[1]) >= len(self.marker)

    def read_on(self, lines, mid_line):
        """(how many of `lines`, a chunk's after the one that left this fence open, are
        its code, the line closing it too; whether it is open still at their end: one
        closed on the chunk's last line is not, review 120)."""
        for n, line in enumerate(lines):
            if n == 0 and mid_line:
                continue  # the rest of a line of code
            if self.inside(line) is None:
                return n, False
            if self.closes(line):
                return n + 1, False
        return len(lines), True


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
