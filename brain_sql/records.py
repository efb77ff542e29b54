"""Records (JSON, JSONL, CSV) and plain .txt files as documents.

A record has `title`, `content` or `text`, `_id` or `id`, optional fields that
map onto knowledge columns, `tags`, and `entities[]` / `relations[]` for
structured graph ingest. Anything else is kept as metadata.

A record `export` wrote puts its memories back where they were: `_chunks` (each
chunk's text taken as it is, with its memory id, heading, lines, own review
state and edges) instead of a text to split, and `_document`, `_source_path`,
`_version_of` (the document it was, its file, the record it is an earlier
version of) instead of a document id made from the file ingested.
"""

import collections
import csv
import difflib
import json
import re
from pathlib import Path

import xxhash

from .chunk import split_text
from .config import (
    MAX_CURRENT_ID_CHARS,
    MAX_DOCUMENT_ID_CHARS,
    MAX_HEADING_PATH_CHARS,
    MAX_ID,
    MAX_ID_CHARS,
    MAX_JSON_FILE_BYTES,
    MAX_METADATA_BYTES,
    MAX_PATH_CHARS,
    MAX_TITLE_CHARS,
)
from .document import (
    CHUNK_FIELDS,
    ID_KEYS,
    TEXT_KEYS,
    Chunk,
    Document,
    IngestError,
    IngestFormat,
    chunks_refusal,
    content_refusal,
    document_fields,
    expanded_size,
    relation,
    text_bytes,
)
from .errors import FieldError
from .fields import key_once, loads_json, name_text, normalize_fields, said, unstorable, whole_number
from .hookspecs import hookimpl
from .wording import shown


@hookimpl
def brain_ingest_formats():
    return [
        IngestFormat("text", (".txt",), parse_txt, "vault"),
        IngestFormat("json", (".json",), parse_json, "import", max_bytes=MAX_JSON_FILE_BYTES),
        IngestFormat("jsonl", (".jsonl", ".ndjson"), parse_jsonl, "import", by_line=True),
        IngestFormat("csv", (".csv",), parse_csv, "import", by_line=True),
    ]


def parse_txt(path, text):
    too_much = content_refusal(text)
    if too_much:
        yield IngestError(path, 1, too_much)
        return
    yield Document(
        document_id=path,
        title=Path(path).stem,
        chunks=split_text(text, crlf=True),
        source_path=path,
        line=1,
        content_bytes=text_bytes(text),
    )


def parse_json(path, text):
    try:
        try:
            data, marked = loads_json(text, unique_keys=True), False
        except json.JSONDecodeError:
            raise
        except ValueError:  # a key given twice, NaN or Infinity: only the record holding it is skipped
            data, marked = json.loads(text, object_pairs_hook=_Pairs.of, parse_constant=_Refused), True
    except (ValueError, RecursionError) as ex:  # not JSON, a number past Python's digit limit, nested too deep
        yield IngestError(path, getattr(ex, "lineno", 1), f"malformed JSON: {said(ex)}")
        return
    items, lines = (data, _element_lines(text)) if isinstance(data, list) else ([data], [1])
    for number, (item, line) in enumerate(zip(items, lines), 1):
        problem = _refused_in(item) if marked else None
        if problem is not None:
            yield IngestError(path, line, f"record {number}: {problem}")
        else:
            yield record_document(path, item, line, f"record {number}")


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _element_lines(text):
    """The line each element of the JSON array `text` (read already) begins on."""
    decoder = json.JSONDecoder(
        parse_int=str, parse_float=str, parse_constant=str, object_pairs_hook=len
    )  # nothing built
    lines, line, counted = [], 1, 0
    at = _JSON_SPACE.match(text, text.index("[") + 1).end()
    while text[at] != "]":
        line += text.count("\n", counted, at)
        lines.append(line)
        counted = at
        at = _JSON_SPACE.match(text, decoder.raw_decode(text, at)[1]).end()
        at = _JSON_SPACE.match(text, at + (text[at] == ",")).end()
    return lines


class _Pairs(dict):
    """An object of a JSON file that gives a key twice, read whole so that the
    records around the one holding it still go in; `problem` names the key."""

    problem = None

    @classmethod
    def of(cls, pairs):
        try:
            return key_once(pairs)
        except FieldError as ex:
            found = cls(pairs)
            found.problem = str(ex)
            return found


class _Refused:
    """NaN or Infinity in a JSON file (SQLite's JSON has neither), read so that the
    records around the one holding it still go in."""

    def __init__(self, constant):
        self.problem = f"{constant} is not a JSON number"


def _refused_in(item):
    """What is wrong with the first key given twice, NaN or Infinity in `item`, else None."""
    stack = [item]
    while stack:
        value = stack.pop()
        if isinstance(value, _Refused | _Pairs) and value.problem is not None:
            return value.problem
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return None


def parse_jsonl(path, lines):
    for number, line in enumerate(lines, 1):
        yield from lines.problems()  # a line too long or not UTF-8: its place is an empty line
        if not line.strip():
            continue
        try:
            item = loads_json(line, unique_keys=True)
        except (ValueError, RecursionError, FieldError) as ex:
            yield IngestError(path, number, f"malformed JSON line: {said(ex)}")
            continue
        yield record_document(path, item, number)
    yield from lines.problems()


def parse_csv(path, lines):
    """Each CSV record, named by the line it starts on. A record that cannot be read
    (a quote opened and never closed, which runs to the end of the file; a field past
    the csv module's limit) is skipped by name, with the lines it took in, and those
    lines but its first are read again as records: no valid row after it is lost."""
    given = _Replay(lines)
    reader = csv.DictReader(given)
    try:
        fieldnames = reader.fieldnames
    except csv.Error as ex:
        yield IngestError(path, 1, f"malformed CSV header: {ex}")
        return
    yield from lines.problems()
    if lines.unread:
        return
    twice = sorted({name for name in fieldnames or [] if fieldnames.count(name) > 1})
    if twice:  # DictReader would keep the last column of that name and drop the other
        yield IngestError(path, 1, f"the CSV header names the column {shown(twice[0])} twice: name each column once")
        return
    if not any(key in (fieldnames or []) for key in TEXT_KEYS):
        yield IngestError(path, 1, "CSV has no 'content' or 'text' column")
        return
    while True:
        given.taken = []
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as ex:
            row, problem = None, f"malformed CSV: {ex}"
        else:
            problem = _unclosed_quote(given)
        yield from lines.problems()
        if problem is not None:
            yield given.skipped(path, problem)
            reader = csv.DictReader(given, fieldnames=fieldnames)
            continue
        yield from _csv_record(path, row, given.start())
    yield from lines.problems()


def _csv_record(path, row, line):
    extra = [value for value in row.get(None) or () if value.strip()]  # DictReader's place for fields past the header
    if extra:  # an empty one (a trailing comma) says nothing
        yield IngestError(
            path, line, f"this row has {len(extra)} more field{'s' if len(extra) > 1 else ''} than the header"
        )
        return
    record = {k: v for k, v in row.items() if k is not None and v not in (None, "")}
    for key in ("entities", "relations", "metadata"):
        if isinstance(record.get(key), str):
            try:
                record[key] = loads_json(record[key], unique_keys=True)
            except FieldError as ex:  # a key given twice: json would keep its last value and drop the other
                yield IngestError(path, line, f"column {shown(key)}: {ex}")
                return
            except (ValueError, RecursionError):
                yield IngestError(path, line, f"column {shown(key)} must hold JSON")
                return
    yield record_document(path, record, line)


def _unclosed_quote(given):
    """Why the record just read is no record, when it ran to the end of the file in a
    quoted field: else None. The csv module's reader is followed state by state (its
    default dialect, not strict: text after a closing quote goes on as plain text),
    so a loose quote earlier in the record does not hide the one left open."""
    if not given.ended or not given.nonblank():
        return None
    state = "start"  # of a field; "plain", "quoted", or "quote" (a quote seen inside a quoted field)
    for _, line in given.nonblank():
        for char in line.rstrip("\r\n") + "\n":
            ends = char in ",\r\n"
            if state == "quoted":
                state = "quote" if char == '"' else "quoted"
            elif state == "quote" and char == '"':
                state = "quoted"  # a doubled quote: one quote in the field
            elif ends:
                state = "start"
            elif state == "start" and char == '"':
                state = "quoted"
            else:
                state = "plain"
    return "a quote opened in this record is never closed" if state == "quoted" else None


class _Replay:
    """A CSV file's lines for csv.DictReader, keeping those of the record being read
    (`taken`, as (number, line)), so that the lines of one it could not read are
    read again but its first (`skipped`)."""

    def __init__(self, lines):
        self.lines, self.pending, self.taken, self.ended = enumerate(lines, 1), collections.deque(), [], False

    def __iter__(self):
        return self

    def __next__(self):
        if self.pending:
            item = self.pending.popleft()
        else:
            try:
                item = next(self.lines)
            except StopIteration:
                self.ended = True
                raise
        self.taken.append(item)
        return item[1]

    def nonblank(self):
        return [(number, line) for number, line in self.taken if line.strip()]

    def start(self):
        """The line the record just read starts on."""
        lines = self.nonblank() or self.taken
        return lines[0][0] if lines else None

    def skipped(self, path, problem):
        """The IngestError of the record just read, which is skipped; its lines after
        its first are given again."""
        lines = self.nonblank()
        if len(lines) < 2:
            return IngestError(path, self.start(), problem)
        first, last = lines[0][0], self.taken[-1][0]
        again = [item for item in self.taken if item[0] > first]
        self.pending.extendleft(reversed(again))
        self.ended = False
        return IngestError(
            path,
            first,
            f"{problem}: it took in lines {first}-{last} ({last - first + 1} lines) and is skipped; "
            f"lines {first + 1}-{last} are read again as records",
        )


def _not_a_record(record):
    """Why `record` is no record at all, or None."""
    if not isinstance(record, dict):
        return f"a record must be a JSON object, not {shown(record)}"
    if list(record) == ["records"]:  # a list wrapped as another API takes it: not a record without text
        return "an object whose only key is 'records' is not a record: send the list of records itself"
    return None


def _two_names(record):
    """Why a record giving a field under both its names with different values ('text'
    and 'content', '_id' and 'id') is refused, or None: one of them would be lost."""
    for names in (TEXT_KEYS, ID_KEYS):
        given = [record[name] for name in names if record.get(name) not in (None, "")]
        if len(given) == 2 and given[0] != given[1] and (names is TEXT_KEYS or str(given[0]) != str(given[1])):
            return f"gives both {names[0]!r} and {names[1]!r}, which differ: give one (the other would be lost)"
    return None


def _empty_id(record):
    """Why a record giving an empty `_id` is refused, or None: taken as no id, each
    sending would store another copy, and forget refuses "" as an `_id`. (A CSV's
    empty cell is no field at all.)"""
    empty = next((name for name in ID_KEYS if record.get(name) == ""), None)
    return f"{empty!r} is empty: give the record's id, or leave {empty!r} out" if empty else None


def record_document(path, record, line, where=None):
    """One record as a Document, or an IngestError naming what is wrong with it."""

    def error(message):
        return IngestError(path, line, f"{where}: {message}" if where else message)

    refused = _not_a_record(record) or unstorable(record) or _two_names(record) or _empty_id(record)
    if refused is not None:
        return error(refused)
    text_key = next((k for k in TEXT_KEYS if record.get(k) not in (None, "")), None)
    content = record[text_key] if text_key else None
    try:
        place = _placement(record)
        if record.get("_chunks") is not None:
            if content is not None:
                return error("give 'content' / 'text' or '_chunks' (an export's chunks), not both")
            chunks, stated = given_chunks(record["_chunks"])
        elif content is not None and not isinstance(content, str):
            return error(f"{text_key!r} must be text, not {shown(content)}")
        elif not isinstance(content, str) or not content.strip():
            return error(f"record has no text: give a non-empty 'content' or 'text'{_misspelled_text(record)}")
        elif too_much := content_refusal(content):  # refused before it is chunked, at the cost of its size
            return error(too_much)
        else:
            chunks, stated = split_text(content), []
    except FieldError as ex:
        return error(str(ex))
    record = {k: v for k, v in record.items() if k not in PLACEMENT_KEYS}
    try:
        title = _title(record, placed=place is not None)
        external_id = _external_id(record)
    except FieldError as ex:
        return error(str(ex))
    if external_id is not None:
        key = external_id
    else:
        key = None  # set from the text and fields below
    document = Document(
        document_id=f"{path}#{key}",
        title=title,
        chunks=chunks,
        source_path=path,
        line=line,
        external_id=external_id,
        content_bytes=text_bytes(content) if isinstance(content, str) else None,  # None: an export's `_chunks`
    )
    # its keys are some of those unstorable saw; an export's record (its _chunks) as it was stored
    result = document_fields(document, record, sound=True, exported=content is None)
    if isinstance(result, IngestError):
        return error(result.message)
    result.relations = result.relations + stated
    result.exported = content is None
    if place is not None:
        result.document_id, result.source_path, result.version_of = place
        result.placed = True
    elif external_id is None:
        # without an id a record is its text and fields: the same text in another
        # scope or class is another memory, never an update of this one
        # tags, metadata and the rest count too, added only when given, so a record
        # without them keeps the key it always had (a re-ingest duplicates nothing)
        extra = {
            "tags": result.tags,
            "aliases": result.aliases,
            "metadata": result.metadata,
            "entities": result.entities,
            "relations": [repr(r) for r in result.relations],
        }
        extra = {name: value for name, value in extra.items() if value}
        parts = (str(title), content, json.dumps(result.fields, sort_keys=True))
        if content is None:  # given as chunks: each with what it holds of its own
            parts = (str(title), json.dumps([_chunk_key(c) for c in chunks], default=str), parts[2])
        key = "\n".join(parts + ((json.dumps(extra, sort_keys=True, default=str),) if extra else ()))
        result.document_id = f"{path}#{xxhash.xxh3_64_hexdigest(key.encode('utf-8'))}"
    return result


def _title(record, placed):
    """The record's title, stripped (blank: none); an export's (`placed`) as the brain
    held it, a note's with its frontmatter's spaces."""
    if record.get("title") is None:
        return None
    title = name_text(record["title"], "'title'")
    return title if placed else title.strip() or None


def _external_id(record):
    """The record's `_id` (or `id`) as text, or None; FieldError past MAX_ID_CHARS (every
    memory of the record stores it twice)."""
    external_id = next((record[k] for k in ID_KEYS if record.get(k) not in (None, "")), None)
    if external_id is None:
        return None
    external_id = name_text(external_id, "'_id' / 'id'")
    if len(external_id) > MAX_ID_CHARS:
        raise FieldError(f"'_id' is {len(external_id):,} characters; the limit is {MAX_ID_CHARS:,}")
    return external_id


# keys of an exported record that say where it was: they place it, and are no metadata
PLACEMENT_KEYS = ("_document", "_source_path", "_version_of", "_chunks")
CHUNK_KEYS = ("id", *TEXT_KEYS, "heading_path", "line_start", "line_end", *CHUNK_FIELDS, "flagged", "relations")


def _placement(record):
    """(document id, source path, version_of) a record names with `_document`,
    `_source_path` and `_version_of`, or None when it names no `_document`."""
    given = {key: record.get(key) for key in PLACEMENT_KEYS[:3]}
    for key, value in given.items():
        if value is not None and (not isinstance(value, str) or not value.strip()):
            raise FieldError(f"{key!r} must be text: the document id or path the export gave")
        # a current version's id leaves room for what a history version's adds ("@" and its time)
        history = key == "_document" and given["_version_of"] is not None
        limit = MAX_PATH_CHARS if key == "_source_path" else MAX_DOCUMENT_ID_CHARS if history else MAX_CURRENT_ID_CHARS
        if value is not None and len(value) > limit:
            raise FieldError(f"{key!r} is {len(value):,} characters; the limit is {limit:,}")
    if given["_document"] is None:
        if given["_source_path"] is not None or given["_version_of"] is not None:
            raise FieldError("'_source_path' and '_version_of' place a record only with its '_document'")
        return None
    return given["_document"], given["_source_path"], given["_version_of"]


def _misspelled_text(record):
    """' (is 'txt' it?)' for a record whose own key is spelled near 'text' or
    'content' and holds text: a field it keeps as metadata, not its text."""
    for key, value in record.items():
        if isinstance(key, str) and isinstance(value, str) and value.strip() and key not in TEXT_KEYS:
            if difflib.get_close_matches(key.strip().lower(), TEXT_KEYS, n=1, cutoff=0.7):
                return f" (is {key!r} it?)"
    return ""


def given_chunks(value):
    """(chunks, the relations they state) of an exported record's `_chunks`: each
    an object with its text (`content`), optional memory `id`, `heading_path`,
    `line_start` / `line_end`, values of its own for CHUNK_FIELDS (null clears
    one), `flagged` and `relations`; taken as they are, never split again.
    FieldError names the first bad one."""
    if not isinstance(value, list) or not value:
        raise FieldError("'_chunks' must be a non-empty list of chunk objects, each with its 'content'")
    too_many = chunks_refusal(len(value))  # before any is read
    if too_many:
        raise FieldError(f"'_chunks': {too_many}")
    chunks, stated = [], []
    for index, item in enumerate(value):
        where = f"_chunks[{index}]"
        if not isinstance(item, dict):
            raise FieldError(f"{where} must be an object with its 'content'")
        unknown = sorted(set(item) - set(CHUNK_KEYS), key=str)
        if unknown:
            raise FieldError(
                f"{where} has an unknown key {str(unknown[0])[:40]!r}; a chunk takes {', '.join(CHUNK_KEYS)}"
            )
        if expanded_size({k: v for k, v in item.items() if k not in (*TEXT_KEYS, "relations", "heading_path")}) > (
            MAX_METADATA_BYTES
        ):
            raise FieldError(f"{where}: its fields come to more than {MAX_METADATA_BYTES:,} bytes")
        too_many = relations_refusal(item.get("relations"))
        if too_many:
            raise FieldError(f"{where}: {too_many}")
        content = next((item[k] for k in TEXT_KEYS if item.get(k) is not None), None)
        if not isinstance(content, str) or not content.strip():
            raise FieldError(f"{where} has no text: give a non-empty 'content'")
        try:
            chunk = Chunk(content, _heading_path(item), *(_line(item, key) for key in ("line_start", "line_end")))
            if chunk.line_start is not None and chunk.line_end is not None and chunk.line_end < chunk.line_start:
                raise FieldError(f"line_end ({chunk.line_end}) is before line_start ({chunk.line_start})")
            chunk.memory_id = whole_number(item["id"], "id", high=MAX_ID) if item.get("id") is not None else None
            chunk.fields = {
                **normalize_fields({k: item.get(k) for k in CHUNK_FIELDS}),
                **{k: None for k in CHUNK_FIELDS[:3] if k in item and item[k] is None},
            }
            if not isinstance(item.get("flagged", False), bool):
                raise FieldError("flagged must be true or false")
            chunk.flagged = item.get("flagged", False)
            relations = item.get("relations") or []
            if not isinstance(relations, list):
                raise FieldError("relations must be a list")
            stated += [relation(r, index) for r in relations]
        except FieldError as ex:
            raise FieldError(f"{where}: {ex}") from None
        chunks.append(chunk)
    return chunks, stated


def relations_refusal(relations):
    """Why an exported chunk's `relations` are more than a chunk can state, or None.
    Each is stored once (an edge; each name once, as an entity), never again for every
    memory, so the line stating them bounds their bytes; their number is bounded at
    MAX_METADATA_BYTES, more than a record's names and a chunk's matched mentions make."""
    if isinstance(relations, list) and len(relations) > MAX_METADATA_BYTES:
        return f"it states {len(relations):,} relations; the limit is {MAX_METADATA_BYTES:,}"
    return None


def _heading_path(item):
    """A chunk's heading path, each heading in it at a title's length at most, as ingest
    cuts a note's (an export from before that held one of 100,000 characters in every chunk)."""
    path = _text(item, "heading_path")
    if not path or len(path) <= MAX_TITLE_CHARS:
        return path
    parts = path.split(" > ")
    path = " > ".join(part if len(part) <= MAX_TITLE_CHARS else part[:MAX_TITLE_CHARS].strip() for part in parts)
    if len(path) > MAX_HEADING_PATH_CHARS:
        raise FieldError(f"heading_path is {len(path):,} characters; a note's is at most {MAX_HEADING_PATH_CHARS:,}")
    return path


def _text(item, key):
    value = item.get(key)
    if value is not None and not isinstance(value, str):
        raise FieldError(f"{key} must be text")
    return value


def _line(item, key):
    return whole_number(item[key], key, 0) if item.get(key) is not None else None


def _chunk_key(chunk):
    """What a given chunk holds, for the key of a record without an `_id`."""
    return {k: v for k, v in vars(chunk).items() if v not in (None, {}, False) and k != "context"}
