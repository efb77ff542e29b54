"""How messages word what they say, the same on the command line, on the pages
and in the JSON API: counts with their nouns, values as the JSON a caller sent,
and a memory's section without its note's title again."""

import json
import re

SHOWN_CHARS = 40  # of a value quoted in a message


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """'1 file', '2 files', '1,000 memories' (with plural='memories')."""
    return f"{n:,} {singular if n == 1 else plural or singular + 's'}"


# Characters that show as nothing: Unicode's Default_Ignorable_Code_Point (zero-width
# spaces and joiners, bidi marks, variation selectors, Hangul fillers, the byte order
# mark, ...) and the blank symbols that are not (braille pattern blank, the musical null
# notehead, the Khitan filler). White_Space other than the plain space is refused as
# whitespace, format characters (Cf) by their category.
INVISIBLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U00016fe4\U0001bca0-\U0001bca3\U0001d159"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """`value` as JSON, as the caller sent it (true, not True; "a", not 'a'), cut to
    `limit` characters; characters that do not print (a NUL, a zero-width space, a
    lone surrogate) and those that show as nothing (INVISIBLE: a grapheme joiner, a
    Hangul filler) escaped, so that a message shows what is there."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    except (ValueError, RecursionError):  # NaN or Infinity, nested too deeply, an integer past Python's digit limit
        try:
            text = repr(value)
        except ValueError:
            text = "(a number too long to show)"
    text = "".join(c if c.isprintable() and not INVISIBLE.match(c) else json.dumps(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit] + "…"


def cited(hit: dict) -> str:
    """Where a memory came from, as a person finds it again: a note's file and its
    lines there ('Runbook.md:8-10'; an earlier version's id, then its lines); a record's
    id ('conv.jsonl#D1:3'), whose lines are its own text's, not its file's (every
    one-line record said 1-1); a record without an `_id`, its file alone (its id
    is a hash no file holds)."""
    path, document_id, start, end = (hit.get(k) for k in ("source_path", "document_id", "line_start", "line_end"))
    if path is None or not document_id:  # an empty document id (plain SQL's) is none
        return document_id or path or ""
    if not lines_of_file(hit):
        return document_id if hit.get("external_id") else path
    if not start:
        return document_id
    lines = f"{start}" + (f"-{end}" if end not in (None, start) else "")
    return f"{path}:{lines}" if document_id == path else f"{document_id}, lines {lines}"  # an earlier version's


def lines_of_file(hit: dict) -> bool:
    """Whether a memory's lines are its file's (a note, or a note's earlier version),
    not its own text's (a record's)."""
    path, document_id = hit.get("source_path"), hit.get("document_id")
    return path is not None and document_id is not None and (document_id == path or document_id.startswith(f"{path}@"))


def section(title: str | None, heading_path: str | None) -> str | None:
    """A chunk's heading path as shown after its note's title: without the title
    again at its start ('Support Runbook > Severity' under 'Support Runbook' is
    'Severity'); None when nothing is left."""
    if not heading_path:
        return None
    parts = heading_path.split(" > ")
    if title and parts[0].strip() == title.strip():
        parts = parts[1:]
    return " > ".join(parts) or None
