"""Splitting text into chunks under a size cap, at paragraph boundaries first."""

import functools
import re

from .config import CHUNK_MAX_CHARS
from .document import Chunk

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_LF = re.compile("\n")
_LONE_CR = re.compile("\r(?!\n)")
# an ordered list item's marker before a sentence end: "1." begins a line, ends no sentence (review 119)
_LIST_MARKER = re.compile(r"[ \t>]*\d{1,9}[.)]")
_SPACES_IN_LINE = re.compile(r"(?<=[^ \t\n])[ \t]+")
_SPACES_IN_NOTE_LINE = re.compile(r"(?<=[^ \t\n\r])[ \t]+")


def paragraphs(text, first_line=1):
    """(paragraph, line it starts on) for each block of text between blank lines,
    its lines as written: their indentation and trailing spaces are kept. A CR
    before the block's last line end is that line end's, not the block's."""
    block, start = [], None
    rows = text.split("\n")
    for line, row in enumerate(rows, first_line):
        if row.strip():
            if start is None:
                start = line
            block.append(row)
        elif block:
            yield _ended("\n".join(block)), start
            block, start = [], None
    if block:
        yield "\n".join(block) if rows[-1].strip() else _ended("\n".join(block)), start


def _ended(block):
    """A block followed by a line end, without that line end's CR (a CRLF text's)."""
    return block[:-1] if block.endswith("\r") else block


def line_ends(text, first_line=1):
    """{line: its line end as written, "\\r\\n" or "\\n"} of each line of `text` that has one."""
    return {line: "\r\n" if row.endswith("\r") else "\n" for line, row in enumerate(text.split("\n")[:-1], first_line)}


def pack(
    units,
    heading_path=None,
    max_chars=CHUNK_MAX_CHARS,
    ends=None,
    blank_line=False,
    breaks=None,
    crlf=False,
    code_lines=None,
):
    """Chunks from (text, first line) units, packed whole while they fit under
    `max_chars` with as many blank lines between them as their lines leave, each
    line end as `ends` (line_ends) has it (or with one blank line between units when
    `blank_line`, as a Markdown note's blocks are joined); a unit longer than that is
    cut between sentences, then words. `breaks` is what ends a line inside a unit
    (LF unless given: a Markdown note's lone CR ends one too). With `crlf` a CRLF
    counts as one character, so a note or text file is cut as its LF twin is (each
    was read with LF before 7 December 2026: its next ingest finds its chunks again).
    `code_lines`: the lines of the text that are code (a note's fenced blocks), each
    chunk told which of its own lines they are (Chunk.code)."""
    size = _crlf_as_one if crlf else len
    lines_in = (breaks or _LF).findall
    cut = [_cut(body, start, max_chars, breaks, size) for body, start in units]
    pieces = [(piece, n == 0) for unit in cut for n, piece in enumerate(unit)]
    chunks, current, code, last = [], None, set(), 0  # last: the chunk's last line, counted from 0
    for (body, start, end), opens in pieces:  # the blank line goes between units, never inside one
        between = _between(current, start, ends, blank_line and opens) if current else ""
        if current and size(current[0]) + size(between or " ") + size(body) <= max_chars:
            current = (current[0] + (between or " ") + body, current[1], end)
            first = last + len(lines_in(between)) if code_lines else 0  # a space: the line it was cut inside of
        else:
            if current:
                chunks.append((*current, frozenset(code)))
            current, code, first = (body, start, end), set(), 0
        if code_lines:  # counted only where there is code to place
            last = first + len(lines_in(body))
            code.update(first + n for n in range(last - first + 1) if start + n in code_lines)
    if current:
        chunks.append((*current, frozenset(code)))
    told = code_lines is not None
    return [Chunk(body, heading_path, start, end, code=code if told else None) for body, start, end, code in chunks]


def _between(current, start, ends, blank_line):
    """What goes between the chunk so far and a piece starting on line `start`:
    one blank line written with the line end of the chunk's last line, or the
    lines between them as written."""
    if blank_line and start > current[2]:
        return (ends or {}).get(current[2], "\n") * 2
    return _lines_between(current, start, ends)


def _lines_between(current, start, ends):
    """The line ends from the chunk so far to a piece starting on line `start`, as
    written (`ends`): a CRLF text keeps CRLF on its blank lines (the spaces on a
    blank line are dropped, its line end is not)."""
    return "".join((ends or {}).get(line, "\n") for line in range(current[2], start))


def split_text(text, first_line=1, heading_path=None, crlf=False):
    """Chunks of plain text whose first line is `first_line` in its file (`crlf`: as pack's),
    each told its lines in a fenced code block, as a note's are (fenced_lines)."""
    ends, code = line_ends(text, first_line), fenced_lines(text, first_line)
    return pack(paragraphs(text, first_line), heading_path, ends=ends, crlf=crlf, code_lines=code)


def fenced_lines(text, first_line=1):
    """The lines of `text` (the first `first_line`) in a fenced code block, as a
    Markdown reader reads the whole text (a record's text may hold fences too: read
    chunk by chunk, a fence in a list or a quote was misread, review 121). None for a
    text with a lone CR, which ends no line of plain text here and one for a reader:
    its chunks are read one by one, as before (review 122)."""
    if "```" not in text and "~~~" not in text:
        return set()
    if _LONE_CR.search(text):
        return None
    return fence_lines(block_parser().parse(text), first_line)


def fence_lines(tokens, first_line=1):
    """The lines (the first `first_line`) markdown-it's fence `tokens` cover, wherever
    they are (a callout's, a list item's)."""
    return {first_line + n for token in tokens if token.type == "fence" and token.map for n in range(*token.map)}


@functools.cache
def block_parser():
    """markdown-it's block parser alone (inline markup is never read here), loaded
    when a text holds a fence."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").disable("inline")


def _crlf_as_one(text):
    return len(text) - text.count("\r\n")


def _reach(body, pos, max_chars, size):
    """Where a window of `body` from `pos` of at most `max_chars` by `size` ends."""
    end = min(len(body), pos + max_chars)
    if size is len:
        return end
    while end < len(body) and size(body[pos:end]) < max_chars:
        end = min(len(body), pos + max_chars + (end - pos - size(body[pos:end])))
    if end < len(body) and body[end - 1] == "\r" and body[end] == "\n":  # a CRLF whole: it counts one
        end += 1
    return end


def _cut(body, start, max_chars, breaks=None, size=len):
    """A paragraph as pieces of at most max_chars, cut where _last_boundary says
    (a sentence end, a line end, a space inside a line), else hard; each with its
    line span. Only the spaces at a cut are dropped: a piece that starts a line keeps
    its indentation. The lines are counted on from the last piece's start, so the work
    is linear in the text."""
    pieces, pos = [], 0
    line, counted = start, 0  # the line that body[counted] is on
    ends = "\n" if breaks is None else "\r\n"  # the characters that end a line (a note's lone CR too)
    while pos < len(body):
        end = _reach(body, pos, max_chars, size)
        if end < len(body):
            end = pos + (_last_boundary(body[pos:end], ends, size) or end - pos)
        piece = body[pos:end]
        text = piece
        if pos:  # the spaces at a cut inside a line, then a line end: the next line's indentation stays
            text = (text if body[pos - 1] in ends else text.lstrip(" \t")).lstrip("\r\n")
        begins = pos + len(piece) - len(text)
        text = text.rstrip() if end < len(body) else text
        if text.strip():
            line += _line_ends_in(body, breaks, counted, begins)
            counted = begins
            pieces.append((text, line, line + _line_ends_in(text, breaks)))
        pos = end
    return pieces


def _line_ends_in(text, breaks, start=0, end=None):
    """How many lines end in text[start:end]: LFs, or what the pattern `breaks` finds."""
    end = len(text) if end is None else end
    return text.count("\n", start, end) if breaks is None else len(breaks.findall(text, start, end))


def _list_marker(window, end):
    """Whether the line of `window` ending at `end` (a sentence end's) is so far an
    ordered list item's marker: "1." begins a line, and ends no sentence."""
    if not window[end - 2 : end - 1].isdigit():
        return False
    start = max(window.rfind("\n", 0, end), window.rfind("\r", 0, end)) + 1
    return _LIST_MARKER.fullmatch(window, start, end) is not None


def _last_boundary(window, ends="\n", size=len):
    """Where to cut `window`: after its last sentence end (before the indentation of
    the line after it, when that end is a line end), else after its last line end (code
    and lists are cut between lines) when it is in the window's second half, else after
    its last space inside a line (never in its indentation), else its last line end.
    A line ends at a character of `ends`."""
    sentence_ends = [m for m in _SENTENCE_END.finditer(window) if not _list_marker(window, m.start())]
    if sentence_ends:
        gap = sentence_ends[-1]
        line_end = max(window.rfind(end, gap.start(), gap.end()) for end in ends)
        return line_end + 1 if line_end >= 0 else gap.end()
    line_end = max(window.rfind(end) for end in ends)
    # a line's indentation is no place to cut (after a lone CR too, where that ends a line)
    spaces = [m.end() for m in (_SPACES_IN_LINE if ends == "\n" else _SPACES_IN_NOTE_LINE).finditer(window)]
    at = size(window[: line_end + 1]) - 1  # where the line end is, a CRLF being one character with `size`
    if at > 0 and (at >= size(window) // 2 or not spaces):  # not a sliver before one long line
        return line_end + 1
    return spaces[-1] if spaces else None
