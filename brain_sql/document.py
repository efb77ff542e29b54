"""What an ingest format produces: documents made of chunks, with the fields,
entities and relations their input states, or errors that name the file and line.
`document_fields` reads those from a record or a note's frontmatter, the same way
for every format."""

import datetime
import json
import re
from dataclasses import dataclass, field
from typing import BinaryIO, Callable, Iterable

from .config import (
    MAX_CONTENT_BYTES,
    MAX_DOCUMENT_CHUNKS,
    MAX_LINE_BYTES,
    MAX_METADATA_BYTES,
    MAX_NOTE_FILE_BYTES,
    MAX_REMEMBER_INPUT_BYTES,
    MAX_TITLE_CHARS,
)
from .errors import FieldError, InputError
from .fields import (
    FIELD_NAMES,
    grouping_name,
    name_text,
    normalize_fields,
    refuse_hidden,
    stated_day,
    unstorable,
)
from .wording import shown

TEXT_KEYS = ("content", "text")
ID_KEYS = ("_id", "id")
# a record naming a speaker and a session is a turn of a conversation (conversation.py)
SPEAKER_KEYS = ("speaker", "role")
SESSION_KEYS = ("session_id", "conversation_id", "thread_id")
# keys of a record or frontmatter that shape the document; the rest is metadata
STRUCTURE_KEYS = {"title", "tags", "aliases", "entities", "relations", *TEXT_KEYS, *ID_KEYS}
# a note's: its text and id are the file's, so frontmatter's `id` or `text` is metadata (review 88:
# an `id:` of a Zettelkasten note was dropped)
NOTE_STRUCTURE_KEYS = STRUCTURE_KEYS - {*TEXT_KEYS, *ID_KEYS}
# the columns a chunk of a document may hold a value of its own in (review decisions
# are made a memory at a time; a chunk added later was created and observed later)
CHUNK_FIELDS = ("created_at", "observed_at", "expires_at", "relevance_tier")


@dataclass
class Chunk:
    content: str
    heading_path: str | None = None
    line_start: int | None = None
    line_end: int | None = None
    # searched with the chunk but never returned as its text: what a conversation
    # turn needs to be found (its speaker, its time, the turns before it)
    context: str | None = None
    # an exported chunk put back as it was (records' `_chunks`): its memory id, the
    # columns that are its own (CHUNK_FIELDS: what a review changed of it alone),
    # and whether it was flagged
    memory_id: int | None = None
    fields: dict = field(default_factory=dict)
    flagged: bool = False
    # a note's: the lines of its content (from 0) in a fenced code block, as markdown-it reads the whole
    # note, so that what is code is known in a chunk cut from the middle of one (extract); None: not told
    code: frozenset[int] | None = None


@dataclass
class Relation:
    relation_type: str
    to_name: str
    from_name: str | None = None  # None: the document itself
    chunk_index: int | None = None  # the chunk whose text states it
    to_type: str = "entity"  # the type an entity it names first is created with
    from_type: str = "entity"


@dataclass
class Document:
    document_id: str
    title: str | None
    chunks: list[Chunk]
    source_path: str | None = None
    line: int | None = None  # where it starts in its file, for messages
    external_id: str | None = None
    fields: dict = field(default_factory=dict)  # knowledge columns given by the input
    tags: list[str] = field(default_factory=list)
    aliases: list[str] = field(default_factory=list)
    metadata: dict = field(default_factory=dict)
    entities: list[tuple[str, str]] = field(default_factory=list)  # (name, type)
    relations: list[Relation] = field(default_factory=list)
    digest: str | None = None  # content hash, set when ingest accepts it
    # its record's document id, when it is written as an earlier version (validity.place_earlier)
    version_of: str | None = None
    placed: bool = False  # its document id (and file) given by the record (`_document`): put back where it was
    read_from: str | None = None  # the file it was read from, when that is not its source_path: what errors name
    quoting: tuple = ()  # a turn's: the turns of its file said just before it, which its context quotes
    # the bytes of its text as its input gave it (a note's body, a record's content), measured before it was
    # chunked, which joins pieces with blank lines: what the content limit is held to and a refusal names.
    # None: its chunks' texts together (an export's `_chunks`, a format's own chunks)
    content_bytes: int | None = None
    # the day its observed_at names where it was said, when the input gave it with an offset
    # (a turn's title and context say that day; observed_at is kept in UTC); None: its UTC day
    said_on: datetime.date | None = None
    # what its metadata and names take written out (oversized): its fields' room is the rest;
    # None: not read from a record or frontmatter (a plugin's format made it), counted when prepared
    stated_size: int | None = None
    # an export's record (its `_chunks`): every edge its text stated is among the relations its chunks
    # give, so no extractor reads that text again (a chunk read alone is not the text it was cut from)
    exported: bool = False


@dataclass
class IngestError:
    path: str
    line: int | None
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class IngestFormat:
    name: str
    suffixes: tuple[str, ...]
    # parse(path, text) yields Document or IngestError for each document in the file
    parse: Callable[[str, "str | TextLines"], Iterable["Document | IngestError"]]
    default_source: str = "vault"
    # a file is read whole, and skipped unread when it is larger than this (a note: one memory's content)...
    max_bytes: int = MAX_NOTE_FILE_BYTES
    # ...unless it is read a line at a time (any size): parse then gets its TextLines, not its text
    by_line: bool = False


_LINES = re.compile(r"[^\r\n]*(?:\r\n?|\n)|[^\r\n]+")


class TextLines:
    """A file's lines as text, each ending with its line break as written (the last
    one may have none), read
    a line at a time from a binary `stream` (or split from `text`), so that a file
    of any size is read in bounded memory. A line longer than MAX_LINE_BYTES is
    skipped without being kept, one that is not UTF-8 is skipped: each an
    IngestError in `errors` (taken by the parser with `problems`), an empty line
    in its place, so the lines after it keep their numbers. Line breaks are
    "\n", "\r\n" or "\r" (kept, so that a CSV field's own line breaks are); a byte
    order mark at the start is dropped."""

    def __init__(self, path, stream=None, text=None, limit=MAX_LINE_BYTES):
        self.path, self.stream, self.text, self.limit = path, stream, text, limit
        self.errors = []  # IngestError each
        self.number = 0  # lines given so far
        self.unread = False  # the whole file skipped (wide_text), its one error among `errors`

    def problems(self):
        """The errors found reading the lines given so far (each once)."""
        found, self.errors = self.errors, []
        return found

    def __iter__(self):
        first = True
        for raw in self._raw():
            text = "\n" if raw is None else raw.removeprefix("\ufeff") if first else raw
            first = False
            for line in _LINES.findall(text):  # the last may end the input with no line break
                self.number += 1
                yield line

    def _raw(self):
        """Each line as text, or None for one skipped (its error recorded)."""
        if self.stream is None:
            yield self.text
            return
        offset = 0
        while raw := self.stream.readline(self.limit + 1):
            if offset == 0 and (wide := wide_text(raw)):
                self._skip(wide)  # the whole file, once
                self.unread = True
                yield None
                return
            at, offset = offset, offset + len(raw)
            if len(raw) > self.limit and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # the rest of the line, read and dropped
                    raw = self.stream.readline(1 << 20)
                    offset += len(raw)
                self._skip(f"line is longer than {self.limit:,} bytes, the limit for one record: skipped unread")
                yield None
                continue
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as ex:
                self._skip(f"not UTF-8 text (byte 0x{raw[ex.start]:02x} at offset {at + ex.start})")
                yield None

    def _skip(self, message):
        self.errors.append(IngestError(self.path, self.number + 1, message))


_WIDE_MARKS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def wide_text(head: bytes) -> str | None:
    """Why a file beginning with `head` is skipped whole, when it begins with UTF-16's
    or UTF-32's byte-order mark (Windows' "Unicode"): each of its lines was a fault of
    its own, a line not UTF-8 and the next malformed JSON; else None."""
    for mark, encoding in _WIDE_MARKS:
        if head.startswith(mark):
            return f"{encoding} text (it begins with {encoding}'s byte-order mark): save it as UTF-8 to ingest it"
    return None


def read_input(stream: BinaryIO, name: str, limit: int = MAX_REMEMBER_INPUT_BYTES) -> bytes:
    """What remember reads from a file or stdin (`stream`, binary): at most `limit`
    bytes, a byte more read to know; past it (a device, a pipe that never ends) an
    InputError naming `name` and the limit, the rest never read."""
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise InputError(
            f"{name} holds more than {limit:,} bytes; the limit is {limit:,} for one remember: "
            "sqlite-utils brain ingest reads a larger JSON lines file, a line at a time"
        )
    return data


def text_bytes(text: str) -> int:
    """`text`'s size in UTF-8."""
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def content_refusal(content: str | int) -> str | None:
    """Why `content` (a memory's text as given, or its size in bytes) is not stored:
    past MAX_CONTENT_BYTES in UTF-8; else None. Asked of a text before it is chunked,
    so that refusing 60 MB costs one count of its bytes, not its chunking."""
    size = content if isinstance(content, int) else text_bytes(content)
    if size > MAX_CONTENT_BYTES:
        return f"content is {size:,} bytes; the limit is {MAX_CONTENT_BYTES:,} (1 MB)"
    return None


def title_refusal(title: str | None) -> str | None:
    """Why a document's `title` is not stored: past MAX_TITLE_CHARS; else None."""
    if title and len(title) > MAX_TITLE_CHARS:
        return f"title is {len(title)} characters; the limit is {MAX_TITLE_CHARS}"
    return None


def chunks_refusal(count: int, why: str = "") -> str | None:
    """Why a document of `count` chunks is not stored: more than MAX_DOCUMENT_CHUNKS
    (`why`, when given: how it makes at least that many); else None."""
    if count > MAX_DOCUMENT_CHUNKS:
        made = f"at least {count:,} memories (chunks), {why}" if why else f"{count:,} memories (chunks)"
        return f"it makes {made}; the limit is {MAX_DOCUMENT_CHUNKS:,} for one document (split it into several)"
    return None


def document_fields(document, raw, sound=False, structure=STRUCTURE_KEYS, exported=False):
    """Apply a record's or frontmatter's fields, tags, aliases, entities and relations
    to `document`; an IngestError when one of them is malformed — any value, of any
    size or depth, is this record's problem, never the run's. `sound`: the caller
    found nothing unstorable in `raw` (or in a record holding it) already.
    `structure`: the keys that shape the document, not kept in its metadata."""
    try:
        return _document_fields(document, raw, sound, structure, exported)
    except (ValueError, OverflowError, RecursionError) as ex:  # a number past Python's digit limit, say
        return IngestError(document.source_path, document.line, f"a value cannot be read: {str(ex)[:200]}")


def _document_fields(document, raw, sound, structure, exported):
    def error(message):
        return IngestError(document.source_path, document.line, message)

    # YAML aliases share one object many times over: a small file can expand to gigabytes (a text
    # key's too, unless it holds text: the content, capped on its own)
    size = oversized(raw, structure)
    if isinstance(size, str):
        return error(size)
    refused = None if sound else unstorable(raw)  # after the size: it walks every shared part
    if refused is not None:
        return error(refused)
    try:
        document.fields = normalize_fields(raw, exported)
    except FieldError as ex:
        return error(str(ex))
    document.stated_size = size
    too_large = over_budget(size, document.fields)
    if too_large:
        return error(too_large)
    document.said_on = stated_day(raw.get("observed_at")) if document.fields.get("observed_at") else None
    try:
        if isinstance(raw.get("title"), str):
            refuse_hidden(raw["title"], "title")  # it names the record's entity
        document.tags = names(raw.get("tags"), "tags")
        document.aliases = names(raw.get("aliases"), "aliases")
        document.entities = [_entity(e) for e in _list(raw.get("entities"), "entities")]
        document.relations = [relation(r) for r in _list(raw.get("relations"), "relations")]
    except FieldError as ex:
        return error(str(ex))
    metadata = {str(k): v for k, v in raw.items() if k not in structure and k not in FIELD_NAMES}
    nested = metadata.pop("metadata", None)
    if isinstance(nested, dict):
        # a key in metadata and beside it, of two values: one would be lost (review 146)
        if twice := [str(k) for k, v in nested.items() if str(k) in metadata and metadata[str(k)] != v]:
            return error(f"{shown(twice[0])} is given in metadata and beside it, with another value: give it once")
        metadata = {**nested, **metadata}
    elif nested is not None:
        metadata["metadata"] = nested
    refused = _turn_refusal(metadata)
    if refused:
        return error(refused)
    document.metadata = metadata
    return document


def _turn_refusal(metadata):
    """Why a record naming both halves of a turn (a speaker and a session) names one
    of them with what is no name (a list, an object, true, 1.5), or None: such a
    record was stored as a plain memory holding them. A `role` alone is anything."""
    given = [[k for k in keys if metadata.get(k) is not None] for keys in (SPEAKER_KEYS, SESSION_KEYS)]
    if all(given):
        for key in given[0] + given[1]:
            try:
                grouping_name(name_text(metadata[key], key).strip(), key, lines=True)  # turn_of strips it
            except FieldError as ex:
                return str(ex)
    return None


def oversized(raw, structure=STRUCTURE_KEYS):
    """What a record's or frontmatter's metadata and names (`raw`, shaped by the keys
    `structure`; all but its text and fields) take written out, as an export writes them
    back (an id and nested metadata by their values, tags and aliases as the names they
    hold), so that a brain's export ingests whatever the brain took; or why they are too
    large to store. Counted before anything is read, so a YAML alias bomb stops it early,
    each field too (fields_size counts them once normalised)."""
    for key in FIELD_NAMES:
        if key in raw and expanded_size(raw[key]) > MAX_METADATA_BYTES:
            return f"its {key} comes to more than {MAX_METADATA_BYTES:,} bytes"
    size = 2
    for key, value in raw.items():
        if key in FIELD_NAMES or (key in TEXT_KEYS and key in structure and isinstance(value, str)):
            continue  # the fields are counted once normalised, the text by MAX_CONTENT_BYTES
        if key == "title" and key in structure and isinstance(value, str):
            continue  # held to MAX_TITLE_CHARS on its own (a note's export states the title its heading gave)
        if key in ID_KEYS and key in structure:
            size += expanded_size(value)  # `id` or `_id`: an export spells it `_id`
        elif key == "metadata" and isinstance(value, dict):
            size += expanded_size(value) - 2  # its keys are metadata's, as if given beside it
        elif key in ("tags", "aliases") and key in structure:
            size += len(key) + 2 + names_size(value)
        else:
            size += written_length(str(key)) + expanded_size(value)
        if size > MAX_METADATA_BYTES:
            return TOO_LARGE
    return size


# a field's first characters, which every record's export states (its class, scope, source and
# times, given or not), count for nothing: only what a value holds beyond them does
FIELD_ALLOWANCE = 64


TOO_LARGE = f"its fields and metadata come to more than {MAX_METADATA_BYTES:,} bytes"


def over_budget(stated_size, fields):
    """Why a memory's metadata and names (`stated_size`, oversized's) with its normalised
    `fields` (defaults given to ingest or remember among them) are too large to store,
    or None: every memory of its record stores them again."""
    return TOO_LARGE if stated_size + fields_size(fields) > MAX_METADATA_BYTES else None


def fields_size(fields):
    """What normalised `fields` count towards a memory's fields and metadata: each
    value's characters beyond FIELD_ALLOWANCE (the same for a record as given and as
    its export states it, defaults and all)."""
    return sum(max(0, len(str(value)) - FIELD_ALLOWANCE) for value in fields.values())


def names_size(value):
    """What names (tags, aliases) given as `value` take written out, the same given as
    a list or as comma-separated text; any other value, as written out."""
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        return expanded_size(value)
    return sum(written_length(name.strip()) + 2 for name in value if name.strip())  # '"name", ' each, in a list


def written_length(text):
    """The characters `text` takes in the JSON a memory's metadata is stored as, which
    writes a character past ASCII as a \\u escape: an emoji is 12 of them (counted as
    one, 63,000 emoji were 756,000 characters on each chunk of their record: review 152)."""
    return len(json.dumps(text))


def expanded_size(value, budget=MAX_METADATA_BYTES + 1):
    """Roughly how many bytes `value` takes written out, counting shared parts every
    time they appear, and stopping as soon as it passes `budget`."""
    size, stack = 0, [value]
    while stack and size <= budget:
        item = stack.pop()
        if isinstance(item, dict):
            size += 2
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            size += 2
            stack.extend(item)
        else:
            size += written_length(item) if isinstance(item, str) else len(str(item)) + 2
    return size


def _list(value, name):
    if value is None:
        return []
    if not isinstance(value, list):
        raise FieldError(f"{name} must be a list")
    return value


def names(value, name):
    """Tags or aliases: a list, or a comma-separated string."""
    if isinstance(value, str):
        value = value.split(",")
    items = _list(value, name)
    if not all(isinstance(v, (str, int, float)) for v in items):
        raise FieldError(f"{name} must be a list of names")
    return [refuse_hidden(str(v).strip().lstrip("#"), name) for v in items if str(v).strip().lstrip("#")]


def _entity(value):
    if isinstance(value, str) and value.strip():
        return refuse_hidden(value.strip(), "entities[]"), "entity"
    if isinstance(value, dict) and isinstance(value.get("name"), str) and value["name"].strip():
        kind = value.get("type")
        if kind and not isinstance(kind, str):  # a list was stored as Python wrote it (none, false or 0: entity)
            raise FieldError(f"an entity's 'type' must be text, as a relation's to_type is, not {shown(kind)}")
        return refuse_hidden(value["name"].strip(), "entities[]"), kind or "entity"
    raise FieldError("each of entities[] must be a name or an object with a 'name'")


def relation(value, chunk_index=0):
    """A relation object of a record (`relations[]`) as a Relation stated by chunk
    `chunk_index`. `to_type` / `from_type` are the types its entities are created
    with when they are new (default entity): an export names each entity's type."""
    if isinstance(value, dict):
        relation_type = value.get("type") or value.get("relation") or value.get("relation_type")
        to_name, from_name = value.get("to"), value.get("from")
        types = [value.get(key) for key in ("to_type", "from_type")]
        if (
            isinstance(relation_type, str)
            and relation_type.strip()
            and isinstance(to_name, str)
            and to_name.strip()
            and (from_name is None or (isinstance(from_name, str) and from_name.strip()))
            and all(kind is None or (isinstance(kind, str) and kind.strip()) for kind in types)
        ):
            to_type, from_type = (kind.strip() if kind else "entity" for kind in types)
            for end in (to_name, from_name):
                if end is not None:
                    refuse_hidden(end, "relations[]")
            return Relation(
                relation_type.strip(),
                to_name.strip(),
                from_name.strip() if from_name else None,
                chunk_index,
                to_type,
                from_type,
            )
    raise FieldError(
        "each of relations[] must be an object with 'type' and 'to' (and an optional 'from'; "
        "without it the relation starts at the record; optional 'to_type' and 'from_type' name the types)"
    )
