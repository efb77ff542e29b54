"""Records (JSON, JSONL, CSV) and plain .txt files as documents.

A record has `title`, `content` or `text`, `_id` or `id`, optional fields that
map onto knowledge columns, `tags`, and `entities[]` / `relations[]` for
structured graph ingest. Anything else is kept as metadata.
"""

import csv
import io
import json
from pathlib import Path

import xxhash

from .chunk import split_text
from .document import ID_KEYS, TEXT_KEYS, Document, IngestError, IngestFormat, document_fields
from .fields import loads_json, unencodable
from .hookspecs import hookimpl
from .wording import shown


@hookimpl
def brain_ingest_formats():
    return [
        IngestFormat("text", (".txt",), parse_txt, "vault"),
        IngestFormat("json", (".json",), parse_json, "import"),
        IngestFormat("jsonl", (".jsonl", ".ndjson"), parse_jsonl, "import"),
        IngestFormat("csv", (".csv",), parse_csv, "import"),
    ]


def parse_txt(path, text):
    yield Document(
        document_id=path, title=Path(path).stem, chunks=split_text(text), source_path=path, line=1
    )


def parse_json(path, text):
    try:
        data = loads_json(text)
    except (ValueError, RecursionError) as ex:  # not JSON, a number past Python's digit limit, nested too deep
        yield IngestError(path, getattr(ex, "lineno", 1), f"malformed JSON: {getattr(ex, 'msg', ex)}")
        return
    items = data if isinstance(data, list) else [data]
    for number, item in enumerate(items, 1):
        yield record_document(path, item, None, f"record {number}")


def parse_jsonl(path, text):
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            item = loads_json(line)
        except (ValueError, RecursionError) as ex:
            yield IngestError(path, number, f"malformed JSON line: {getattr(ex, 'msg', ex)}")
            continue
        yield record_document(path, item, number)


def parse_csv(path, text):
    reader = csv.DictReader(io.StringIO(text))
    if not any(key in (reader.fieldnames or []) for key in TEXT_KEYS):
        yield IngestError(path, 1, "CSV has no 'content' or 'text' column")
        return
    try:
        for row in reader:
            line = reader.line_num
            record = {k: v for k, v in row.items() if k is not None and v not in (None, "")}
            for key in ("entities", "relations", "metadata"):
                if isinstance(record.get(key), str):
                    try:
                        record[key] = loads_json(record[key])
                    except (ValueError, RecursionError):
                        yield IngestError(path, line, f"column {shown(key)} must hold JSON")
                        break
            else:
                yield record_document(path, record, line)
    except csv.Error as ex:
        yield IngestError(path, reader.line_num, f"malformed CSV: {ex}")


def record_document(path, record, line, where=None):
    """One record as a Document, or an IngestError naming what is wrong with it."""

    def error(message):
        return IngestError(path, line, f"{where}: {message}" if where else message)

    if not isinstance(record, dict):
        return error(f"a record must be a JSON object, not {shown(record)}")
    bad = unencodable(record)
    if bad is not None:
        return error(f"text {shown(bad)} is not valid Unicode (a lone surrogate)")
    content = next((record[k] for k in TEXT_KEYS if record.get(k) is not None), None)
    if not isinstance(content, str) or not content.strip():
        return error("record has no text: give a non-empty 'content' or 'text'")
    title = record.get("title")
    if title is not None and (isinstance(title, bool) or not isinstance(title, (str, int, float))):
        return error("'title' must be text")
    title = str(title).strip() if title is not None and str(title).strip() else None
    external_id = next((record[k] for k in ID_KEYS if record.get(k) not in (None, "")), None)
    if external_id is not None:
        if isinstance(external_id, bool) or not isinstance(external_id, (str, int)):
            return error("'_id' / 'id' must be text or a whole number")
        external_id = str(external_id)
        key = external_id
    else:
        key = None  # set from the text and fields below
    document = Document(
        document_id=f"{path}#{key}",
        title=title,
        chunks=split_text(content),
        source_path=path,
        line=line,
        external_id=external_id,
    )
    result = document_fields(document, record)
    if isinstance(result, IngestError):
        return error(result.message)
    if external_id is None:
        # without an id a record is its text and fields: the same text in another
        # scope or class is another memory, never an update of this one
        # tags, metadata and the rest count too, added only when given, so a record
        # without them keeps the key it always had (a re-ingest duplicates nothing)
        extra = {"tags": result.tags, "aliases": result.aliases, "metadata": result.metadata,
                 "entities": result.entities, "relations": [repr(r) for r in result.relations]}  # fmt: skip
        extra = {name: value for name, value in extra.items() if value}
        parts = (str(title), content, json.dumps(result.fields, sort_keys=True))
        key = "\n".join(parts + ((json.dumps(extra, sort_keys=True, default=str),) if extra else ()))
        result.document_id = f"{path}#{xxhash.xxh3_64_hexdigest(key.encode('utf-8'))}"
    return result
