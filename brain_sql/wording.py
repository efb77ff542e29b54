"""How messages word what they say, the same on the command line, on the pages
and in the JSON API: counts with their nouns, values as the JSON a caller sent,
and a memory's section without its note's title again."""

import json

SHOWN_CHARS = 40  # of a value quoted in a message


def counted(n, singular, plural=None):
    """'1 file', '2 files', '1,000 memories' (with plural='memories')."""
    return f"{n:,} {singular if n == 1 else plural or singular + 's'}"


def shown(value, limit=SHOWN_CHARS):
    """`value` as JSON, as the caller sent it (true, not True; "a", not 'a'), cut to
    `limit` characters; characters that do not print (a NUL, a zero-width space, a
    lone surrogate) escaped, so that a message shows what is there."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str)
    except (ValueError, RecursionError):  # NaN or Infinity, nested too deeply, an integer past Python's digit limit
        try:
            text = repr(value)
        except ValueError:
            text = "(a number too long to show)"
    text = "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[:limit] + "…"


def section(title, heading_path):
    """A chunk's heading path as shown after its note's title: without the title
    again at its start ('Support Runbook > Severity' under 'Support Runbook' is
    'Severity'); None when nothing is left."""
    if not heading_path:
        return None
    parts = heading_path.split(" > ")
    if title and parts[0].strip() == title.strip():
        parts = parts[1:]
    return " > ".join(parts) or None
