"""Literal support of a claim by a text: deterministic, case-insensitive and
tolerant of whitespace, with the character ranges where the claim stands."""

import re
from typing import Any

_EDGE_PUNCTUATION = " \t\r\n.,;:!?\"'()[]{}"


def verify(claim: str | None, text: str | None) -> dict[str, Any]:
    """{"supported", "decision", "match_ranges"}: match_ranges are [start, end)
    character offsets into `text` of each occurrence of the claim."""
    words = (claim or "").strip(_EDGE_PUNCTUATION).split()
    ranges = []
    if words and text:
        pattern = re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE)
        ranges = [[m.start(), m.end()] for m in pattern.finditer(text)]
    return {
        "supported": bool(ranges),
        "decision": "supported" if ranges else "unsupported",
        "match_ranges": ranges,
    }
