"""Checking and normalising the fields a memory may carry: times, scopes, classes,
confidence and tiers. Shared by every ingest format, the CLI and recall filters."""

import collections
import datetime
import difflib
import functools
import json
import math
import re
import sys
import unicodedata
import zoneinfo
from collections.abc import Iterable, Sequence
from typing import Any

from .config import CLASSES, MAX_FILTER_CHARS, MAX_METADATA_BYTES, MAX_NESTING
from .errors import FieldError
from .lookalikes import punctuation_read_as, separator_read_as, skeleton
from .wording import INVISIBLE, shown

TIME_FIELDS = ("observed_at", "valid_from", "valid_to", "expires_at", "created_at")
TEXT_FIELDS = (
    "source",
    "domain",
    "owner",
    "access",
    "node_kind",
    "lawful_basis",
    "region",
    "knowledge_type",
    "supersedes",  # supersedes: the _id of the memory this one replaces
)
# those that group and filter memories (recall's and the listings' filters, the
# facets, stats): each value is held to scope's rule on what shows as nothing
GROUPING_FIELDS = ("source", "domain", "owner", "node_kind", "lawful_basis", "region")
# Every input key that maps onto a knowledge column.
FIELD_NAMES = TIME_FIELDS + TEXT_FIELDS + ("class", "scope", "confidence", "relevance_tier")

NEVER = "9999-12-31 23:59:59"  # no memory is valid or unexpired then (vectors.NEVER_EXPIRES_EPOCH)
_RELATIVE = re.compile(r"^\s*([+-]?)([0-9]+)\s*([smhdwy])\s*$")  # ASCII digits, as every number taken
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def parse_time(value, now=None, name="time"):
    """A time as SQLite's UTC text ('YYYY-MM-DD HH:MM:SS').

    Takes ISO 8601 dates and times (a time without offset is UTC), date objects,
    and relative times such as -30d, -2w, +1h against `now` (default: the clock).
    A fraction of a second is refused by name: a time is kept to the second, and
    cutting it off would change what the user gave.
    """
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, datetime.date):
        moment = datetime.datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        relative = _RELATIVE.match(value)
        if relative:
            sign, amount, unit = relative.groups()
            base = parse_datetime(now, "now") if now else utcnow()
            try:
                delta = datetime.timedelta(seconds=int(amount) * _UNIT_SECONDS[unit])
                moment = base - delta if sign == "-" else base + delta
            except OverflowError:
                raise FieldError(f"{name} {shown(value)} is out of range") from None
        else:
            try:
                moment = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
            except ValueError:
                plus = _URL_PLUS if _SPACED_OFFSET.search(value) else ""
                raise FieldError(
                    f"{name} {shown(value)} is not a date: use ISO 8601 (2026-03-01 or "
                    f"2026-03-01T09:30:00Z) or a relative time such as -30d{plus}"
                ) from None
    else:
        raise FieldError(f"{name} must be a date string, not {shown(value)}")
    if moment.microsecond:  # kept to the second (as the vector index's time columns): refused, never cut
        raise FieldError(
            f"{name} {shown(value)} has a fraction of a second: times are kept to the whole second, "
            "give one without the fraction (2026-03-01T09:30:15Z)"
        )
    if moment.tzinfo is not None:  # a time with an offset (YAML gives aware datetimes) is kept in UTC
        try:
            moment = moment.astimezone(datetime.timezone.utc)
        except OverflowError:
            raise FieldError(f"{name} {shown(value)} is out of range") from None
    return sqlite_time(moment.replace(tzinfo=None))


# an offset whose + a query string read as a space ("2026-12-05T20:00:00 08:00", timezone " 08:00"), and what to say
_UNSIGNED = r"[0-9]{2}(?::?[0-9]{2})?"
_SPACED_OFFSET = re.compile(rf"[0-9]{{2}}:[0-9]{{2}}(?::[0-9]{{2}})? {_UNSIGNED}\s*$")
_URL_PLUS = " (in a URL a + is a space: write %2B)"


def _stated(value):
    """`value` as the aware datetime it names when it is a time with an offset
    other than UTC's, else None (a time without an offset is UTC, a relative one
    the clock's). Read once parse_time has taken `value`."""
    if isinstance(value, str) and not _RELATIVE.match(value):
        try:
            value = datetime.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    return value if isinstance(value, datetime.datetime) and value.utcoffset() else None


def stated_day(value):
    """The day a time with an offset names where it was said ("2023-01-01T00:30+05:30":
    1 January, which is 31 December in UTC), None for any other."""
    moment = _stated(value)
    return moment.date() if moment else None


def stated_zone(value):
    """The offset a time was given with, as a time zone's name ("2026-12-05T20:00-08:00":
    "-08:00"), None for a time without one or in UTC."""
    moment = _stated(value)
    return _offset_name(moment.utcoffset()) if moment else None


_OFFSET = re.compile(r"(?P<sign>[+-])(?P<hours>[0-9]{2})(?::?(?P<minutes>[0-9]{2})(?::(?P<seconds>[0-9]{2}))?)?")
UTC_NAMES = ("UTC", "Z", "GMT")


def _offset_name(offset):
    sign, offset = ("-", -offset) if offset < datetime.timedelta(0) else ("+", offset)
    minutes, seconds = divmod(offset.seconds, 60)
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}" + (f":{seconds:02d}" if seconds else "")


def time_zone(value, name="timezone"):
    """(the name it is kept by, its tzinfo) for a time zone given as an IANA name
    ("Europe/Paris", read from the system's zone files or the tzdata package), UTC,
    or an offset ("-08:00", "+0530", "+05"); a FieldError naming `name` otherwise."""
    text = value.strip()
    if text.upper() in UTC_NAMES:
        return "UTC", datetime.timezone.utc
    offset = _OFFSET.fullmatch(text)
    if offset:
        hours, minutes, seconds = (int(offset[part] or 0) for part in ("hours", "minutes", "seconds"))
        if hours > 23 or minutes > 59 or seconds > 59:
            raise FieldError(f"{name} {shown(value)} is not an offset: hours 00 to 23, minutes 00 to 59")
        delta = datetime.timedelta(hours=hours, minutes=minutes, seconds=seconds) * (-1 if offset["sign"] == "-" else 1)
        return _offset_name(delta), datetime.timezone(delta)
    if text in _zones().values() and text != "localtime":  # the IANA zones; not the server's own by that name
        return text, zoneinfo.ZoneInfo(text)
    near = _known_zone(text)
    plus = _URL_PLUS if re.fullmatch(_UNSIGNED, text) else ""
    raise FieldError(
        f"{name} {shown(value)} is not a time zone: give an IANA name such as Europe/Paris "
        f"or an offset such as -08:00{plus}{f' (did you mean {near}?)' if near else ''}"
    )


def utc_to(moment, zone):
    """A naive UTC time as the wall time of `zone` (a tzinfo; None: UTC)."""
    if zone is None:
        return moment
    # fold 0: in an hour said twice (clocks put back at midnight) a day begins at its first midnight
    return moment.replace(tzinfo=datetime.timezone.utc).astimezone(zone).replace(tzinfo=None, fold=0)


def wall_time(value: str, zone: str) -> str:
    """SQLite UTC text (`value`) as the wall time of the time zone named `zone`, as SQLite text."""
    try:
        return sqlite_time(utc_to(datetime.datetime.strptime(value, "%Y-%m-%d %H:%M:%S"), time_zone(zone)[1]))
    except OverflowError:
        return value


@functools.cache
def _zones():
    return {zone.lower(): zone for zone in zoneinfo.available_timezones()}


def _known_zone(text):
    """The known zone `text` most likely meant ("europe/paris": Europe/Paris), or None."""
    key = text.lower().replace(" ", "_")
    if key in _zones() and key != "localtime":
        return _zones()[key]
    near = difflib.get_close_matches(key, _zones(), n=1, cutoff=0.8)
    return _zones()[near[0]] if near else None


def sqlite_time(moment):
    """A naive UTC datetime as SQLite's time text, the year always four digits."""
    return moment.replace(microsecond=0).isoformat(" ")


def parse_datetime(value, name="time"):
    return datetime.datetime.strptime(parse_time(value, name=name), "%Y-%m-%d %H:%M:%S")


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, microsecond=0)


def _not_json(constant):
    raise ValueError(f"{constant} is not a JSON number")


def loads_json(text: str | bytes, unique_keys: bool = False) -> Any:
    """JSON as the brain reads it: Python's json, but NaN and Infinity, which it
    accepts and SQLite's JSON does not, are refused (a ValueError, like bad JSON);
    with `unique_keys` (a request), a key given twice in one object is a FieldError
    naming it, where Python's json would keep the last value and drop the other. A
    whole number past Python's digit limit is said so, not with Python's advice."""
    try:
        return json.loads(text, parse_constant=_not_json, object_pairs_hook=key_once if unique_keys else None)
    except ValueError as ex:
        if "integer string conversion" not in str(ex) or isinstance(ex, json.JSONDecodeError):
            raise
        raise ValueError(too_many_digits()) from None


def said(error: Exception) -> str:
    """What a parser's error says to whoever sent the text: a number past Python's
    digit limit as too_many_digits; JSON's with the column it is at (its message
    alone stopped at "at"), a line end in a string as the string not closed; else its
    own message."""
    if "integer string conversion" in str(error):
        return too_many_digits()
    if isinstance(error, json.JSONDecodeError):
        if error.msg.startswith("Invalid control character") and error.doc[error.pos : error.pos + 1] in "\r\n":
            return f"a string is not closed before the end of its line (column {error.colno})"
        return f"{error.msg.removesuffix(' at')} at column {error.colno}"
    return str(getattr(error, "msg", error))


def too_many_digits() -> str:
    """What a whole number past Python's digit limit is told (Python's own message
    advises sys.set_int_max_str_digits(), a word for programmers, not for senders)."""
    return f"a whole number of more than {sys.get_int_max_str_digits():,} digits, more than is read: write it as text"


def key_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object_pairs_hook that refuses a key given twice in one object (a
    FieldError naming it), where json would keep its last value and drop the other."""
    unique = dict(pairs)
    if len(unique) == len(pairs):
        return unique
    counts = collections.Counter(key for key, _ in pairs)
    for key, count in counts.items():
        if count > 1:
            given_once(f"the key {shown(key)} of one object", [None] * count)
    return dict(pairs)


def given_once(name: str, values: Sequence[Any]) -> Any:
    """The one value of `name` (a query parameter, a form field, a JSON key) given
    as `values`, or None for none; a FieldError when it is given more than once:
    taking one value and dropping another would answer what was not asked."""
    if len(values) > 1:
        raise FieldError(f"{name} is given {'twice' if len(values) == 2 else f'{len(values)} times'}: give it once")
    return values[0] if values else None


def unknown_parameters(names: Iterable[str], takes: Sequence[str], what: str) -> None:
    """A FieldError naming those of `names` that `what` (a page) does not take."""
    unknown = sorted({name for name in names if name not in takes}, key=str)
    if unknown:
        named = ", ".join(shown(name) for name in unknown)
        raise FieldError(
            f"{named} {'is no parameter' if len(unknown) == 1 else 'are no parameters'} of {what}, "
            f"which takes {', '.join(takes)}"
        )


def unencodable(value: object) -> str | None:
    """The first string in `value` (a string, list or dict, keys included) that is
    not valid Unicode — a lone surrogate, which JSON's \\ud800 escapes can make — or None."""
    return _first(value, _not_unicode)


def not_json_number(value: object) -> float | None:
    """The first number in `value` (as unencodable reads it) that JSON has not: NaN
    or an infinity, which YAML reads (.nan, .inf) and SQLite's JSON cannot; or None."""
    return _first(value, lambda item: isinstance(item, float) and not math.isfinite(item))


def _not_unicode(item):
    if not isinstance(item, str):
        return False
    try:
        item.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _first(value, bad):
    """The first item of `value` and of the lists and dicts it holds, at any depth
    (keys included), for which `bad` holds, or None. Walked with a stack of its own:
    what Python's JSON reads nests deeper than Python's recursion goes (a YAML value
    holding itself is refused by its size first, document.expanded_size)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if bad(item):
            return item
        if isinstance(item, dict):
            item = [part for pair in item.items() for part in pair]
        if isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
    return None


_SCALARS = (str, int, float, bool, type(None))


def unstorable(record: dict) -> str | None:
    """What no stored value may hold, found in `record` (a record or a note's
    frontmatter, its size already bounded): a field nested too deep, text that is
    not valid Unicode, a number JSON has not; said as the record's error, or None."""
    if isinstance(record, dict) and _flat_and_sound(record):
        return None  # most records: nothing nests, so one pass in C says so
    deep = too_deep(record)
    if deep is not None:
        return deep
    bad = unencodable(record)
    if bad is not None:
        return f"text {shown(bad)} is not valid Unicode (a lone surrogate)"
    number = not_json_number(record)
    if number is not None:  # stored, SQLite's JSON functions could not read the metadata, nor export write it
        return (
            f"a value is {number} (past the largest number JSON keeps, or YAML's .nan or .inf), a number JSON "
            "has not: write it as text, in quotes"
        )
    return None


def _flat_and_sound(record: dict) -> bool:
    """Whether `record` holds no list or object, no text that is not valid Unicode and
    no number JSON has not, keys included: what unstorable finds, known at once for a
    flat record (its texts encoded together, which fails on any lone surrogate)."""
    parts = [part for pair in record.items() for part in pair]
    if not all(type(part) in _SCALARS for part in parts):
        return False
    if any(type(part) is float and not math.isfinite(part) for part in parts):
        return False
    try:
        "".join([part for part in parts if type(part) is str]).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def too_deep(record: object) -> str | None:
    """What is wrong with `record` (a dict) when the value of one of its fields, or
    of one of the fields its "metadata" object holds (stored as the record's own,
    and exported under "metadata"), nests lists and objects more than MAX_NESTING
    deep; or None. Such a value is refused before it is stored, so that every
    stored value is one Python's JSON and SQLite's read and write whole."""
    if not isinstance(record, dict):
        return None
    for key, value in record.items():
        if stored_too_deep(value) if key == "metadata" else nesting(value) > MAX_NESTING:
            return f"{shown(key)} nests lists and objects more than {MAX_NESTING} levels deep"
    return None


def stored_too_deep(data: object) -> bool:
    """Whether a stored JSON column's value nests deeper than a record too_deep
    takes gives it: metadata, an object, holds field values; tags, a list, is one."""
    return any(nesting(value) > MAX_NESTING for value in (data.values() if isinstance(data, dict) else [data]))


def nesting(value: object, bound: int = MAX_NESTING) -> int:
    """How deep lists and objects nest in `value` (0 for a string or a number), read
    no further than `bound` + 1 levels: past that, `bound` + 1 (a YAML alias may
    hold itself)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            item = list(item.values())
        if not isinstance(item, (list, tuple)):
            continue
        deepest = max(deepest, depth + 1)
        if deepest > bound:
            return deepest
        stack.extend((child, depth + 1) for child in item)
    return deepest


def _unseen(character):
    """Whether `character` shows as nothing, or as a space other than the plain one."""
    return (
        unicodedata.category(character) == "Cf"
        or (character.isspace() and character != " ")
        or INVISIBLE.match(character) is not None
    )


def entity_key(name: str) -> str:
    """The name an entity is known by: composed (NFC), each run of whitespace one plain
    space, none at the ends. 'Café' composed or decomposed, 'A\u00a0B', 'A\tB' and 'A B'
    each name one entity, not two that look the same on a page."""
    return " ".join(unicodedata.normalize("NFC", name).split())


def _hidden(character):
    """Whether `character`, not whitespace, shows as nothing: a format character (Cf:
    zero-width spaces and joiners, bidi controls), a control character, or another
    blank (a Hangul filler, the braille blank); variation selectors (marks) go with
    the letter before them."""
    if character.isspace():
        return False
    category = unicodedata.category(character)
    return category in ("Cf", "Cc") or (category != "Mn" and INVISIBLE.match(character) is not None)


def refuse_hidden(value: str, what: str) -> str:
    """`value`, a name in the graph (an entity, alias, tag, relation end or title);
    FieldError naming `what` and the character when it holds one that shows as
    nothing: it would name a separate entity that looks like another."""
    hidden = next((c for c in value if _hidden(c)), None)
    if hidden:
        raise FieldError(
            f"{what} {shown(value)} may not contain {_character(hidden)}: "
            "it would name a separate entity that looks like another"
        )
    return value


_BOXES = {"\ufffd": "which stands for text that could not be read", "\ufffc": "which stands for an object"}


def _shown_as_box(character):
    """Why `character` shows as a box or as nothing in every font, or None: private
    use (Co) and unassigned code points and noncharacters (Cn), the replacement
    characters U+FFFD and U+FFFC."""
    category = unicodedata.category(character)
    if category == "Co":
        return "a private-use character"
    if category == "Cn":
        code = ord(character)
        if 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE:
            return "a noncharacter, never meant for text"
        return "a code point Unicode has not assigned"
    return _BOXES.get(character)


def _character(character):
    name = unicodedata.name(character, "")
    return f"U+{ord(character):04X}{f' {name}' if name else ''}"


# Scripts that one word may mix (Unicode's UTS #39, its "highly restrictive" level):
# Japanese writes Han, Hiragana and Katakana beside Latin; Chinese Han with Bopomofo;
# Korean Hangul with Han. Any other mix in a part of a scope is refused.
_SCRIPTS_TOGETHER = (
    frozenset({"LATIN", "HAN", "HIRAGANA", "KATAKANA"}),
    frozenset({"LATIN", "HAN", "BOPOMOFO"}),
    frozenset({"LATIN", "HAN", "HANGUL"}),
)
_SCRIPT_NAMES = {"CJK": "HAN", "IDEOGRAPHIC": "HAN"}  # a Han character's name begins with CJK
_LETTERS = ("Lu", "Ll", "Lt", "Lo")  # not Lm: modifier letters (ー, 々, ʼ) go with any script


def _script(character):
    """A letter's script, taken from the first word of its Unicode name (LATIN,
    CYRILLIC, GREEK, ...; the FULLWIDTH and HALFWIDTH forms are their letters'):
    an approximation of Unicode's Script property that needs no table. None for
    what is no letter (digits, punctuation, marks), which belongs to no script."""
    if unicodedata.category(character) not in _LETTERS:
        return None
    words = unicodedata.name(character, "").split()
    if words[:1] in (["FULLWIDTH"], ["HALFWIDTH"]):
        words = words[1:]
    return _SCRIPT_NAMES.get(words[0], words[0]) if words else None


def _mixed_scripts(part):
    """(a letter of the script with the fewest letters in `part`, a letter of another)
    when `part` mixes scripts no word mixes; None when it is written in one script
    (or in a mix Unicode allows)."""
    letters = {}
    for character in part:
        script = _script(character)
        if script is not None:
            letters.setdefault(script, []).append(character)
    if len(letters) < 2 or any(set(letters) <= together for together in _SCRIPTS_TOGETHER):
        return None
    fewest = min(letters, key=lambda script: len(letters[script]))
    other = next(script for script in letters if script != fewest)
    return (letters[fewest][0], fewest), (letters[other][0], other)


def _refuse_unseen(value, name, allow=""):
    """FieldError naming field `name` when `value` holds what shows as nothing or
    as something else on every page: control, format and invisible characters,
    spaces other than the plain one, code points that show as a box, or text not in
    Unicode's composed form (NFC). Scope's rule, and that of the fields that group
    and filter memories (GROUPING_FIELDS). The characters in `allow` are let stand."""
    if any(unicodedata.category(c) == "Cc" and c not in allow for c in value):
        # a NUL or newline would make "/b\0" a different scope that reads like /b
        raise FieldError(f"{name} {shown(value)} may not contain control characters")
    unseen = next((c for c in value if _unseen(c) and c not in allow), None)
    if unseen:
        raise FieldError(
            f"{name} {shown(value)} may not contain {_character(unseen)}: "
            f"it would be a separate {name} that looks like another"
        )
    boxed = next(((c, why) for c in value if (why := _shown_as_box(c))), None)
    if boxed:
        raise FieldError(
            f"{name} {shown(value)} may not contain {_character(boxed[0])}, {boxed[1]}: it shows as a box or as "
            f"nothing, so it would be a separate {name} that looks like another"
        )
    if not unicodedata.is_normalized("NFC", value):
        raise FieldError(
            f"{name} {shown(value)} is not in Unicode's composed form (NFC): write each accented letter as one "
            "character (write é as U+00E9, not as e and U+0301 COMBINING ACUTE ACCENT)"
        )


def grouping_name(value: str, name: str, lines: bool = False) -> str:
    """`value` of `name`, a field that groups or filters memories (GROUPING_FIELDS,
    a turn's speaker and session); FieldError naming the field when it holds what
    scope may not (_refuse_unseen) or begins or ends with a space: 'crm' and
    'crm\u200b' would be two sources that read alike, and a filter on one misses
    the other. With `lines`, a line break stands (a turn's speaker over two lines,
    as a transcript may give it)."""
    _refuse_unseen(value, name, "\n" if lines else "")
    if value != value.strip():
        raise FieldError(
            f"{name} {shown(value)} may not begin or end with a space: "
            f"it would be a separate {name} that looks like another"
        )
    return value


def normalize_scope(value):
    """'/acme/support/' -> '/acme/support'; scopes are absolute paths.

    A scope that would read like another on a page is refused, not stored as a
    separate scope: control, format and invisible characters, code points that show
    as a box (private use, unassigned, noncharacters, U+FFFD, U+FFFC), spaces other than the
    plain one, a space at the start or end of a part ('/acme '), a part that begins
    with a combining mark, text not in Unicode's composed form (NFC), where é
    is one character, not e and a combining accent, punctuation and symbols that
    read as ASCII or as a dash ('/acme∕support' with a division slash reads as two
    parts), compatibility forms (NFKC: the ligature ﬁ, a fullwidth ａ, a bold 𝟏),
    a part that mixes letters of two scripts ('/аcme' with a Cyrillic а reads
    as '/acme'), and one holding a letter that reads as '/', '.' or '_' beside Latin
    ('/acmeノsupport'). Scopes that read alike letter by letter, each in one script
    ('/асе' in Cyrillic and '/ace'), are told apart by ScopesAlike, which knows
    the brain's scopes."""
    if not isinstance(value, str) or not value.startswith("/"):
        raise FieldError(f"scope must be a path starting with '/', such as /acme/support, not {shown(value)}")
    _refuse_unseen(value, "scope")
    _refuse_lookalike_characters(value)
    parts = [p for p in value.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise FieldError(f"scope {shown(value)} may not contain '.' or '..'")
    if any(p != p.strip() for p in parts):
        raise FieldError(
            f"scope {shown(value)} may not have a space at the start or end of a part: "
            "it would be a separate scope that looks like another"
        )
    marked = next((p[0] for p in parts if unicodedata.category(p[0]).startswith("M")), None)
    if marked:
        raise FieldError(
            f"scope {shown(value)} has a part that begins with {_character(marked)}, a mark with no letter to go on: "
            "it would be a separate scope that looks like another"
        )
    for part in parts:
        _refuse_separator_letters(value, part)
        mixed = _mixed_scripts(part)
        if mixed:
            (odd, odd_script), (usual, usual_script) = mixed
            raise FieldError(
                f"scope {shown(value)} has a part, {shown(part)}, that mixes letters of different scripts: "
                f"{_character(odd)} is {odd_script}, {_character(usual)} is {usual_script}; "
                "it would be a separate scope that looks like another: write each part in one script"
            )
    return "/" + "/".join(parts)


def _refuse_lookalike_characters(value):
    """FieldError for a scope holding punctuation that reads as other text, or a
    compatibility form of other text (not in NFKC): each one a second scope that
    reads like the first."""
    for character in value:
        read = punctuation_read_as(character) if not character.isascii() else None
        if read:
            raise FieldError(
                f"scope {shown(value)} may not contain {_character(character)}: it reads as {shown(read)}"
                f"{', so one part reads as two' if '/' in read else ''}; "
                "it would be a separate scope that looks like another"
            )
    if not unicodedata.is_normalized("NFKC", value):
        odd = next((c for c in value if unicodedata.normalize("NFKC", c) != c), None)
        plain = unicodedata.normalize("NFKC", odd or value)
        said = f": it holds {_character(odd)}, a compatibility form of {shown(plain)}" if odd else ""
        raise FieldError(
            f"scope {shown(value)} is not in Unicode's compatibility form (NFKC){said}; write {shown(plain)} instead: "
            "it would be a separate scope that looks like another"
        )


def _refuse_separator_letters(value, part):
    """FieldError for a part holding a letter, digit or mark that reads as '/', '.'
    or '_' beside Latin letters or ASCII digits: /acme〳support, with U+3033, reads
    as /acme/support, a child of /acme; a part wholly of its script (ノート) is a
    word of it."""
    if not any(c in _ASCII_DIGITS or _script(c) == "LATIN" for c in part):
        return
    for character in part:
        read = separator_read_as(character)
        if read:
            raise FieldError(
                f"scope {shown(value)} has a part, {shown(part)}, that holds {_character(character)} beside Latin "
                f"letters or digits: there it reads as {shown(read)}"
                f"{', so one part reads as two' if '/' in read else ''}; "
                "it would be a separate scope that looks like another"
            )


_ASCII_DIGITS = frozenset("0123456789")


def scope_prefixes(scope):
    """'/a/b/c' -> ['/a', '/a/b', '/a/b/c']: a scope and its parents but the root."""
    parts = scope.split("/")[1:]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts)) if parts[i]]


class ScopeSkeletons:
    """The skeleton (UTS #39) of each of a brain's scopes and their parents, and the
    scopes each skeleton is of. `holds(scope)` says whether the brain still holds a
    scope (or a child of it): entries may outlive what they say (a scope forgotten
    since), so a scope found here is confirmed before it refuses another."""

    def __init__(self, scopes=(), holds=None):
        self.of = {}  # scope or parent -> its skeleton
        self.by_skeleton = {}  # skeleton -> the scopes with it
        self.holds = holds or (lambda scope: True)
        self.add(scopes)

    def add(self, scopes):
        for scope in scopes:
            for prefix in scope_prefixes(scope):
                if prefix not in self.of:
                    self.of[prefix] = read = skeleton(prefix)
                    self.by_skeleton.setdefault(read, []).append(prefix)

    def confirmed_by(self, holds):
        """These skeletons (the same ones, not a copy), with `holds` to confirm a scope."""
        view = ScopeSkeletons(holds=holds)
        view.of, view.by_skeleton = self.of, self.by_skeleton
        return view

    def alike(self, prefix, read):
        """The scopes other than `prefix` this brain holds whose skeleton is `read`."""
        return [found for found in self.by_skeleton.get(read, ()) if found != prefix and self.holds(found)]


class ScopesAlike:
    """Refuses a scope new to a brain that reads like a different one it holds, or
    one accepted before by the same ingest or remember: each part in one script,
    letter by letter alike ('/асе' in Cyrillic beside '/ace', '/ᎪᏟᎷᎬ' in Cherokee
    beside '/ACME'), so normalize_scope cannot tell. Two scopes read alike when
    Unicode's skeletons (UTS #39) of them, or of a parent of one, are the same.
    Only a scope (or parent) outside ASCII is refused: a plain-ASCII scope is what
    the twins imitate, never refused because one was written first, and two ASCII
    scopes alike (/team/m1 beside /team/ml) are a naming choice, not a disguise. So
    an ASCII scope needs none of the brain's scopes; `stored()` gives them (a
    ScopeSkeletons, or the scopes), asked once, on the first scope outside ASCII.
    Each distinct scope is checked once."""

    def __init__(self, stored):
        self._stored = stored
        self._brain = None  # ScopeSkeletons of the brain's scopes
        self._new = ScopeSkeletons()  # the scopes accepted here
        self._checked = {}  # scope -> why it is refused, or None

    def refusal(self, scope):
        """Why `scope` (normalised) may not be written: the scope it reads like; None when it may."""
        if scope == "/":
            return None
        if scope not in self._checked:
            self._checked[scope] = None if scope.isascii() else self._why(scope)
            if self._checked[scope] is None:
                self._new.add([scope])
        return self._checked[scope]

    def _why(self, scope):
        if self._brain is None:
            stored = self._stored()
            self._brain = stored if isinstance(stored, ScopeSkeletons) else ScopeSkeletons(stored)
        for prefix in scope_prefixes(scope):
            if prefix.isascii() or prefix in self._new.of or (prefix in self._brain.of and self._brain.holds(prefix)):
                continue
            read = skeleton(prefix)
            alike = self._brain.alike(prefix, read) + self._new.alike(prefix, read)
            if alike:
                alike = min(alike, key=lambda found: not found.isascii())  # an ASCII one, if any
                return (
                    f"scope {shown(scope)} reads like {shown(alike)}, a scope this brain holds: "
                    f"{_differing(prefix, alike)} read as its characters; "
                    f"it would be a separate scope that looks like another: write {shown(alike)} where that is "
                    "meant, or another name"
                )
        return None


def _differing(scope, alike):
    """The characters of `scope` that make it another scope than `alike`, which
    reads the same, named (three at most): those `alike` lacks, else those outside
    ASCII."""
    odd = list(dict.fromkeys(c for c in scope if c not in alike)) or list(
        dict.fromkeys(c for c in scope if not c.isascii())
    )
    return ", ".join(_character(c) for c in odd[:3]) + (" …" if len(odd) > 3 else "")


def scope_ancestors(scope):
    """The scopes a recall pinned at `scope` may read: itself and every parent."""
    parts = normalize_scope(scope).split("/")[1:]
    return ["/"] + ["/" + "/".join(parts[: i + 1]) for i in range(len(parts)) if parts[i]]


def normalize_fields(raw, exported=False):
    """Check and normalise the knowledge fields in `raw` (keys outside FIELD_NAMES
    are ignored); raises FieldError naming the first bad one. An `exported` record
    (an export's) keeps a scope, source or domain past MAX_FILTER_CHARS, stored
    before they were held to it: an export and its import lose no memory."""
    fields = {}
    for name in FIELD_NAMES:
        value = raw.get(name)
        if value is None or value == "":
            continue
        if isinstance(value, str) and len(value) > MAX_METADATA_BYTES:  # a record's are counted as it is read too
            raise FieldError(f"{name} is {len(value):,} characters; the limit is {MAX_METADATA_BYTES:,}")
        long = isinstance(value, str) and len(value) > MAX_FILTER_CHARS
        if name in ("scope", "source", "domain") and long and not exported:
            raise FieldError(
                f"{name} is {len(value):,} characters; the limit is {MAX_FILTER_CHARS:,}, what recall's filters take"
            )
        if name in TIME_FIELDS:
            fields[name] = parse_time(value, name=name)
        elif name == "class":
            if value not in CLASSES:
                raise FieldError(f"class must be one of {', '.join(CLASSES)}, not {shown(value)}")
            fields[name] = value
        elif name == "scope":
            fields[name] = normalize_scope(value)
        elif name == "confidence":
            fields[name] = _number(name, value, float, 0, 1)
        elif name == "relevance_tier":
            fields[name] = _number(name, value, int, 0, 3)
        elif name == "supersedes":
            fields[name] = name_text(value, "supersedes", " (the _id of a record)")
        else:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise FieldError(f"{name} must be text, not {shown(value)}")
            fields[name] = grouping_name(str(value), name) if name in GROUPING_FIELDS else str(value)
    if fields.get("valid_to") and fields.get("valid_from") and fields["valid_to"] <= fields["valid_from"]:
        # valid from <= T < to holds at no T: the memory could never be recalled
        raise FieldError(
            f"valid_to ({fields['valid_to']}) must be later than valid_from ({fields['valid_from']}): "
            "a memory holds from valid_from until valid_to, and would hold at no time"
        )
    return fields


# invisible marks pasted text may carry: a zero-width space or a word joiner between
# two words, read as the break it is (Thai, Khmer and Lao write no other), and
# direction marks and controls and a byte-order mark, which no word holds; fewer than
# wording.INVISIBLE, which a name may not hold: not the zero-width joiners nor
# variation selectors, which some scripts' words and emoji hold, as stored texts do
_BREAKS = re.compile("[\u200b\u2060]")
_MARKS = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def composed_text(text: str) -> str:
    """`text` as recall reads a query and the model a text: composed (NFC), as names,
    scopes and fields are, and without invisible marks (a zero-width space a space).
    "José" typed as an e and a combining accent (macOS, some keyboards) asks what
    "José" asks; a right-to-left override before "Orion status" asks "Orion status"."""
    if text.isascii():  # most text: composed, and no such mark
        return text
    return unicodedata.normalize("NFC", _MARKS.sub("", _BREAKS.sub(" ", text)))


_SPACE_RUNS = re.compile(r"\s{2,}|[^\S ]")


def query_text(text: str) -> str:
    """`text` as recall reads a query (querydoc, and each SQL function reading one):
    composed_text, each run of spaces, tabs or line breaks one space. People type two
    spaces by mistake ("Input from  mental health", SciFact's claims): to the default
    model's tokenizer a second space is a word (one test claim found its abstract
    only without it), and "Tom  Baker" names no entity Tom Baker."""
    return _SPACE_RUNS.sub(" ", composed_text(text))


def name_text(value: object, name: str, what: str = "") -> str:
    """`value` as the text it names something by (an _id, the _id superseded, a title,
    a turn's speaker or session): text as it is, a whole number as its digits, as a
    record's `_id: 1` has always been stored "1"; FieldError naming `name` for anything
    else (1.5 or 7.0 would be text nobody wrote, true or a list no name at all)."""
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    raise FieldError(f"{name} must be text or a whole number{what}, not {shown(value)}")


_DIGITS = re.compile(r"-?0*[0-9]{1,100}")


def read_digits(text: str) -> int | None:
    """The whole number `text` spells in ASCII digits (a '-' first, leading zeros
    allowed), None for any other text: int() would also take '+', spaces, '_' and
    other scripts' digits. More than 100 digits past the zeros are none either: no
    field takes one so large (its range is named up to there), and int() refuses
    text past 4,300 digits."""
    return int(text) if _DIGITS.fullmatch(text) else None


def whole_number(value: object, name: str, low: int = 1, high: int = 2**63 - 1) -> int:
    """`value`, a whole number or its digits as text (as a URL or a form gives
    them: read_digits), when it is from `low` to `high`; FieldError naming the
    range otherwise."""
    number = read_digits(value) if isinstance(value, str) else None
    value = value if number is None else number
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise FieldError(f"{name} must be a whole number from {low:,} to {high:,}, not {shown(value)}")
    return value


def _number(name, value, kind, low, high):
    try:
        if isinstance(value, bool):
            raise ValueError
        number = kind(value)
        if kind is int and number != float(value):
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        raise FieldError(f"{name} must be a number from {low} to {high}, not {shown(value)}") from None
    if not low <= number <= high:
        raise FieldError(f"{name} must be from {low} to {high}, not {shown(value)}")
    return number
