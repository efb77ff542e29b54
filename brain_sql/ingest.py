"""Ingest: files to documents to chunks, vectors, entities and edges.

Idempotent and exact. A document whose content and fields are unchanged is
skipped outright; a changed one keeps the chunks whose text is unchanged (no
re-embedding), replaces the rest, and restates its edges. Vectors are reused by
content hash across documents. Each batch of documents is one transaction and
each document a savepoint inside it, so nothing is ever half-written.
"""

import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import xxhash

from . import embed, mentions
from .config import INGEST_BATCH_DOCUMENTS, MAX_CONTENT_BYTES, MAX_TITLE_CHARS
from .document import Document, IngestError
from .fields import normalize_fields
from .plugins import collect
from .schema import migrate, recorded_model, vec_metadata_values

# knowledge columns written from a document's fields
FIELD_COLUMNS = (
    "class", "scope", "source", "domain", "created_at", "observed_at", "valid_from", "valid_to",
    "expires_at", "confidence", "relevance_tier", "owner", "access", "node_kind",
    "lawful_basis", "region", "knowledge_type",
)  # fmt: skip
_CHUNK_COLUMNS = ("chunk_index", "line_start", "line_end")
_STORED_TIMES = ("created_at", "observed_at")


@dataclass
class IngestReport:
    files: int = 0
    documents: int = 0
    chunks_added: int = 0
    chunks_updated: int = 0
    chunks_unchanged: int = 0
    chunks_removed: int = 0
    entities: int = 0
    relationships: int = 0
    errors: list = field(default_factory=list)
    seconds: float = 0.0

    def summary(self):
        return (
            f"{self.files} files, {self.documents} documents: {self.chunks_added} chunks added, "
            f"{self.chunks_updated} updated, {self.chunks_unchanged} unchanged, "
            f"{self.chunks_removed} removed; {self.entities} entities, "
            f"{self.relationships} relationships added; {len(self.errors)} skipped; "
            f"{self.seconds:.1f}s"
        )


def discover(paths):
    """(file path, IngestFormat) for every file to ingest, and errors for paths that cannot be."""
    formats = {suffix: f for f in collect("brain_ingest_formats") for suffix in f.suffixes}
    files, errors = [], []
    for given in paths:
        path = Path(given).resolve()
        if path.is_dir():
            for child in sorted(path.rglob("*")):
                relative = child.relative_to(path).parts
                if child.is_file() and child.suffix.lower() in formats and not any(
                    p.startswith(".") for p in relative
                ):
                    files.append((str(child), formats[child.suffix.lower()]))
        elif path.is_file():
            if path.suffix.lower() in formats:
                files.append((str(path), formats[path.suffix.lower()]))
            else:
                errors.append(IngestError(str(path), None, f"unsupported file type; ingest takes {', '.join(sorted(formats))}"))
        else:
            errors.append(IngestError(str(path), None, "no such file or folder"))
    return files, errors


def ingest(conn, paths, *, scope=None, klass=None, source=None, domain=None, prune=False, progress=None):
    """Ingest files and folders into the brain on `conn`; returns an IngestReport.

    scope / klass / source / domain are defaults: a record's or a note's own
    fields win. `progress(n)` is called with the number of bytes handled.
    """
    started = time.perf_counter()
    migrate(conn)
    defaults = normalize_fields({"scope": scope, "class": klass, "source": source, "domain": domain})
    report = IngestReport()
    files, report.errors = discover(paths)
    writer = _Writer(conn, recorded_model(conn), report)
    try:
        _ingest_files(writer, files, defaults, paths if prune else (), progress)
    finally:
        writer.close()
    report.seconds = time.perf_counter() - started
    return report


def remember(conn, records, *, scope=None, klass=None, source="remember", domain=None):
    """Store in-memory records (ingest's record fields) as memories, all or none.

    Returns (IngestReport, [[knowledge ids] per record]); when any record is
    malformed nothing is written and the report's errors say which and why.
    """
    from .records import record_document

    started = time.perf_counter()
    defaults = normalize_fields({"scope": scope, "class": klass, "source": source, "domain": domain})
    report = IngestReport()
    model_id = recorded_model(conn)
    documents, document_ids, seen = [], [], {}
    for number, record in enumerate(records, 1):
        item = record_document("remember", record, None, f"record {number}")
        if isinstance(item, Document):
            item.source_path = None
            document_ids.append(item.document_id)
        item = _accept(item, defaults, seen, model_id)
        if isinstance(item, IngestError):
            report.errors.append(item)
        elif item is not None:  # None: a repeat of an earlier record, stored once
            documents.append(item)
    ids = []
    if not report.errors:
        writer = _Writer(conn, model_id, report, atomic=True)
        try:
            for document in documents:
                writer.add(document)
            writer.flush()
        except Exception as ex:
            report.errors.append(IngestError("remember", None, f"nothing was stored: {ex}"))
            return report, []
        finally:
            writer.close()
        ids = [
            [r[0] for r in conn.execute("select id from knowledge where document_id = ? order by chunk_index", (d,))]
            for d in document_ids
        ]
    report.seconds = time.perf_counter() - started
    return report, ids


def _ingest_files(writer, files, defaults, prune_paths, progress):
    report = writer.report
    for path, fmt in files:
        report.files += 1
        seen, failed = {}, False
        for item in _read(path, fmt):
            item = _accept(item, {"source": fmt.default_source, **defaults}, seen, writer.model_id)
            if isinstance(item, IngestError):
                report.errors.append(item)
                failed = True
                continue
            if item is None:
                continue  # the same record again: stored once
            writer.add(item)
            if progress:
                progress(sum(len(c.content) for c in item.chunks))
        if not failed:
            # records no longer in the file are gone from the brain too; a file
            # with a bad record keeps them, so a typo never deletes memories
            writer.remove_documents("source_path = ?", (path,), keep=seen)
    for given in prune_paths:
        root = str(Path(given).resolve())
        writer.remove_documents(
            "source_path = ? or source_path like ? escape '\\'",
            (root, _like_prefix(root + "/")),
            gone=True,
        )
    writer.flush()


def _like_prefix(text):
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def _read(path, fmt):
    try:
        data = Path(path).read_bytes()
    except OSError as ex:
        yield IngestError(path, None, f"cannot read: {ex.strerror}")
        return
    try:
        text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as ex:
        line = data[: ex.start].count(b"\n") + 1
        yield IngestError(path, line, f"not UTF-8 text (byte 0x{data[ex.start]:02x} at offset {ex.start})")
        return
    yield from fmt.parse(path, text.removeprefix("\ufeff"))


def _accept(item, defaults, seen, model_id):
    """A prepared Document to write, None for an exact repeat of one already
    accepted, or an IngestError; `seen` maps document ids to their hashes."""
    if not isinstance(item, Document):
        return item
    try:
        item = _prepare(item, defaults)
        if isinstance(item, IngestError):
            return item
        digest = _document_hash(item, model_id)
    except Exception as ex:  # a malformed document never stops the others
        return IngestError(item.source_path, item.line, f"cannot be read: {ex}")
    if item.document_id in seen:
        if seen[item.document_id] == digest:
            return None
        return IngestError(item.source_path, item.line, f"repeats the id of an earlier record with other content: {item.external_id}")
    seen[item.document_id] = digest
    item.digest = digest
    return item


def _prepare(document, defaults):
    """Check a document against the caps, apply defaults, run entity extractors."""

    def error(message):
        return IngestError(document.source_path, document.line, message)

    if document.title and len(document.title) > MAX_TITLE_CHARS:
        return error(f"title is {len(document.title)} characters; the limit is {MAX_TITLE_CHARS}")
    size = sum(len(c.content.encode("utf-8")) for c in document.chunks)
    if size > MAX_CONTENT_BYTES:
        return error(f"content is {size:,} bytes; the limit is {MAX_CONTENT_BYTES:,} (1 MB)")
    if not document.chunks:
        return error("no text to remember")
    document.fields = {**defaults, **document.fields}
    for extractor in collect("brain_entity_extractors"):
        document.relations = document.relations + list(extractor(document))
    if not document.title and (
        document.entities or document.aliases or document.tags
        or any(r.from_name is None for r in document.relations)
    ):
        return error("entities, tags, aliases and relations need a title: the title names the record in the graph")
    return document


def _chunk_text(document, chunk):
    """The text a chunk is embedded (and content-hashed) as."""
    return "\n".join(p for p in (document.title, chunk.heading_path, chunk.content) if p)


def _digest(value):
    return xxhash.xxh3_64_hexdigest(value.encode("utf-8"))


def _document_hash(document, model_id):
    return _digest(
        json.dumps(
            [model_id, document.title, document.external_id, document.fields, document.tags,
             document.aliases, document.metadata, document.entities,
             [vars(r) for r in document.relations], [vars(c) for c in document.chunks]],
            sort_keys=True, default=str,
        )
    )  # fmt: skip


def storage_vectors(texts, model_id):
    """(int8 bytes, bit bytes) per text, None for a text with no known token."""
    if not texts:
        return []
    vectors = embed.embed(texts, model_id)
    quantized = embed.quantize_int8(vectors)
    bits = np.packbits(vectors > 0, axis=1, bitorder="little")
    zero = ~vectors.any(axis=1)
    return [None if z else (q.tobytes(), b.tobytes()) for q, b, z in zip(quantized, bits, zero)]


def insert_vectors(conn, rows):
    """rows: (knowledge_id, int8 bytes, bit bytes); filter columns copied from knowledge."""
    conn.executemany(
        "insert into vec_knowledge select ?, vec_int8(?), vec_bit(?), "
        f"{vec_metadata_values('k')} from knowledge k where k.id = ?",
        [(kid, q, b, kid) for kid, q, b in rows],
    )


def backfill_vectors(conn, model_id, batch=512):
    """Embed every knowledge row that has no vector yet; returns how many were added."""
    missing = conn.execute(
        "select id, title, heading_path, content from knowledge "
        "where id not in (select knowledge_id from vec_knowledge) order by id"
    ).fetchall()
    added = 0
    for start in range(0, len(missing), batch):
        rows = missing[start : start + batch]
        texts = ["\n".join(p for p in (t, h, c) if p) for _, t, h, c in rows]
        vectors = storage_vectors(texts, model_id)
        insert_vectors(conn, [(r[0], *v) for r, v in zip(rows, vectors) if v])
        conn.execute(
            f"update knowledge set embedding_model = ? where id in ({','.join('?' * len(rows))})",
            [model_id, *(r[0] for r in rows)],
        )
        added += sum(1 for v in vectors if v)
    return added


class _Writer:
    """Collects documents into batches and writes each batch in one transaction.

    Batches move through a two-stage pipeline: while one batch is written, the
    next one's new text is embedded on a worker thread (the tokenizer and SQLite
    both release the GIL while they work). With the writer busy on one core, the
    tokenizer's own thread pool would only oversubscribe the other, so it is
    switched off (TOKENIZERS_PARALLELISM) until the ingest ends.
    """

    def __init__(self, conn, model_id, report, atomic=False):
        self.conn, self.model_id, self.report = conn, model_id, report
        self.atomic = atomic  # all documents or none: no per-document retry
        self.pending = []
        self.embedding = None  # (batch, content hashes, future of their vectors) ahead of the writer
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="brain-embed")
        self.parallelism = os.environ.get("TOKENIZERS_PARALLELISM")
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
        self.entity_ids = {}
        mentions.ensure_queue(conn)

    def add(self, document):
        self.pending.append(document)
        if len(self.pending) >= INGEST_BATCH_DOCUMENTS:
            self._advance()

    def _advance(self):
        """Start embedding the pending documents; write the batch embedded before them."""
        batch, self.pending = self.pending, []
        texts = self._texts_to_embed(batch)
        future = self.executor.submit(storage_vectors, list(texts.values()), self.model_id)
        previous, self.embedding = self.embedding, (batch, list(texts), future)
        if previous:
            self._commit(*previous)

    def flush(self):
        """Write everything added so far, then find the mentions it brought."""
        if self.pending:
            self._advance()
        previous, self.embedding = self.embedding, None
        if previous:
            self._commit(*previous)
        with _transaction(self.conn):
            self.report.relationships += mentions.resolve_mentions(self.conn)

    def close(self):
        self.executor.shutdown(cancel_futures=True)
        if self.parallelism is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = self.parallelism

    def _commit(self, batch, hashes, future):
        embedded = dict(zip(hashes, future.result()))
        counts = dict(vars(self.report))
        try:
            with _transaction(self.conn):
                self._write_batch(batch, embedded, isolate=False)
        except Exception:
            if self.atomic:
                raise
            # Something in the batch failed: write it again one savepoint per
            # document, so the bad document is reported and the rest land.
            vars(self.report).update(counts)
            self.entity_ids.clear()
            with _transaction(self.conn):
                self._write_batch(batch, embedded, isolate=True)

    def _texts_to_embed(self, batch):
        """{content hash: text} of the chunks in `batch` that may need a new vector."""
        stored = self._stored_hashes(batch)
        texts = {}
        for document in batch:
            if stored.get(document.document_id) != document.digest:
                for chunk in document.chunks:
                    text = _chunk_text(document, chunk)
                    texts[_digest(text)] = text
        return {h: t for h, t in texts.items() if self._stored_vector(h) is None}

    def _stored_hashes(self, batch):
        ids = [d.document_id for d in batch]
        return dict(
            self.conn.execute(
                f"select document_id, content_hash from documents where document_id in ({','.join('?' * len(ids))})",
                ids,
            ).fetchall()
        )

    def _stored_vector(self, content_hash):
        row = self.conn.execute(
            "select v.embedding_int8, v.embedding_bit from knowledge k "
            "join vec_knowledge v on v.knowledge_id = k.id "
            "where k.content_hash = ? and k.embedding_model = ? limit 1",
            (content_hash, self.model_id),
        ).fetchone()
        return tuple(row) if row else None

    def remove_documents(self, where, params, keep=(), gone=False):
        """Delete the documents `where` selects, except those in `keep` (and, with
        `gone`, those whose file still exists). Documents still in the pipeline
        are never among them: they came from files being ingested, in `keep`."""
        doomed = [
            document_id
            for document_id, path in self.conn.execute(
                f"select document_id, source_path from documents where {where}", params
            ).fetchall()
            if document_id not in keep and not (gone and path and Path(path).exists())
        ]
        with _transaction(self.conn):
            for document_id in doomed:
                self.report.chunks_removed += self.conn.execute(
                    "delete from knowledge where document_id = ?", (document_id,)
                ).rowcount
                self.conn.execute("delete from relationships where document_id = ?", (document_id,))
                self.conn.execute("delete from documents where document_id = ?", (document_id,))

    def _write_batch(self, batch, embedded, isolate):
        """Write a batch; with `isolate`, each document in a savepoint of its own
        (slower: vec0 journals every page a savepoint touches)."""
        conn = self.conn
        stored = self._stored_hashes(batch)
        plans = []
        for document in batch:
            self.report.documents += 1
            if stored.get(document.document_id) == document.digest:
                self.report.chunks_unchanged += len(document.chunks)
                continue
            plans.append((document, self._plan(document, document.document_id in stored)))
        vectors = self._vectors([c for _, plan in plans for c in plan["new"]], embedded)
        new_vectors = []
        for document, plan in plans:
            if not isolate:
                new_vectors += self._write_document(document, plan, vectors)
                continue
            conn.execute("savepoint document")
            try:
                insert_vectors(conn, self._write_document(document, plan, vectors))
            except Exception as ex:
                conn.execute("rollback to document")
                self.entity_ids.clear()  # ids created inside the savepoint are gone
                self.report.errors.append(IngestError(document.source_path, document.line, f"not written: {ex}"))
            conn.execute("release document")
        insert_vectors(conn, new_vectors)

    def _plan(self, document, known):
        """Match the document's chunks to its stored rows (if `known`) by content hash."""
        existing = {}
        stored_rows = self.conn.execute(
            "select id, content_hash from knowledge where document_id = ? order by id", (document.document_id,)
        ) if known else ()  # fmt: skip
        for row_id, content_hash in stored_rows:
            existing.setdefault(content_hash, []).append(row_id)
        kept, new = [], []
        for index, chunk in enumerate(document.chunks):
            text = _chunk_text(document, chunk)
            content_hash = _digest(text)
            rows = existing.get(content_hash)
            if rows:
                kept.append((rows.pop(0), index, chunk))
            else:
                new.append((content_hash, text, index, chunk))
        removed = [row_id for rows in existing.values() for row_id in rows]
        return {"kept": kept, "new": new, "removed": removed}

    def _vectors(self, new_chunks, embedded):
        """content hash -> (int8, bit) for new chunks: embedded ahead, reused from a
        stored row with the same text, or embedded now."""
        vectors = {}
        for content_hash, *_ in new_chunks:
            if content_hash not in vectors:
                vectors[content_hash] = embedded.get(content_hash) or self._stored_vector(content_hash)
        todo = {h: t for h, t, *_ in new_chunks if vectors[h] is None}
        for content_hash, vector in zip(todo, storage_vectors(list(todo.values()), self.model_id) if todo else []):
            vectors[content_hash] = vector
        return vectors

    def _write_document(self, document, plan, vectors):
        """Write one document's rows and edges; returns the vectors of its new chunks."""
        conn, report = self.conn, self.report
        columns = self._row_values(document)
        conn.execute("delete from relationships where document_id = ?", (document.document_id,))
        if plan["removed"]:
            conn.executemany("delete from knowledge where id = ?", [(i,) for i in plan["removed"]])
        report.chunks_removed += len(plan["removed"])
        chunk_ids = {}
        # a memory is created and observed when first stored, unless its input says when
        assignments = ", ".join(
            f"[{c}] = coalesce(?, {c})" if c in _STORED_TIMES else f"[{c}] = ?" for c in (*columns, *_CHUNK_COLUMNS)
        )
        for row_id, index, chunk in plan["kept"]:
            conn.execute(
                f"update knowledge set {assignments}, updated_at = current_timestamp where id = ?",
                (*columns.values(), index, chunk.line_start, chunk.line_end, row_id),
            )
            chunk_ids[index] = row_id
        report.chunks_updated += len(plan["kept"])
        names = ("title", "content", "content_hash", "document_id", "heading_path", *columns, *_CHUNK_COLUMNS)
        values = ", ".join("coalesce(?, current_timestamp)" if n in _STORED_TIMES else "?" for n in names)
        insert = f"insert into knowledge ({', '.join(f'[{n}]' for n in names)}) values ({values})"
        stored_vectors = []
        for content_hash, _, index, chunk in plan["new"]:
            cursor = conn.execute(
                insert,
                (document.title, chunk.content, content_hash, document.document_id, chunk.heading_path,
                 *columns.values(), index, chunk.line_start, chunk.line_end),
            )  # fmt: skip
            chunk_ids[index] = cursor.lastrowid
            if vectors[content_hash]:
                stored_vectors.append((cursor.lastrowid, *vectors[content_hash]))
        report.chunks_added += len(plan["new"])
        entity_id = self._entity(document.title, "document", claim=True) if document.title else None
        conn.execute(
            "insert or replace into documents (document_id, title, source_path, entity_id, content_hash, chunks) "
            "values (?, ?, ?, ?, ?, ?)",
            (document.document_id, document.title, document.source_path, entity_id, document.digest, len(document.chunks)),
        )
        self._write_edges(document, entity_id, chunk_ids)
        mentions.queue(conn, "chunk", chunk_ids.values())
        return stored_vectors

    def _row_values(self, document):
        values = {c: document.fields.get(c) for c in FIELD_COLUMNS}
        values["class"] = values["class"] or "memory"
        values["scope"] = values["scope"] or "/"
        values["domain"] = values["domain"] or "global"
        values["relevance_tier"] = 1 if values["relevance_tier"] is None else values["relevance_tier"]
        return {
            **values,
            "external_id": document.external_id,
            "source_path": document.source_path,
            "tags": json.dumps(document.tags) if document.tags else None,
            "metadata": json.dumps(document.metadata, default=str) if document.metadata else None,
            "embedding_model": self.model_id,
        }

    def _write_edges(self, document, entity_id, chunk_ids):
        first = chunk_ids.get(0)
        edges = []
        for tag in document.tags:
            edges.append((entity_id, self._entity(f"#{tag}", "tag"), "tagged_with", first))
        for alias in document.aliases:
            edges.append((self._entity(alias, "alias"), entity_id, "alias_of", first))
        for name, entity_type in document.entities:
            edges.append((entity_id, self._entity(name, entity_type), "mentions", first))
        for relation in document.relations:
            source = entity_id if relation.from_name is None else self._entity(relation.from_name, "entity")
            target = self._entity(relation.to_name, relation.to_type)
            edges.append((source, target, relation.relation_type, chunk_ids.get(relation.chunk_index, first)))
        rows = [(a, b, t, k, document.document_id) for a, b, t, k in edges if a != b]
        cursor = self.conn.executemany(
            "insert or ignore into relationships (from_entity_id, to_entity_id, relation_type, knowledge_id, document_id) "
            "values (?, ?, ?, ?, ?)",
            rows,
        )
        self.report.relationships += max(cursor.rowcount, 0)

    def _entity(self, name, entity_type, claim=False):
        """The id of the entity called `name`, created when new; `claim` makes it a document node."""
        key = name.casefold()
        entity_id = self.entity_ids.get(key)
        if entity_id is None:
            row = self.conn.execute("select id from entities where name = ?", (name,)).fetchone()
            if row:
                entity_id = row[0]
            else:
                entity_id = self.conn.execute(
                    "insert into entities (name, entity_type) values (?, ?)",
                    (name, "document" if claim else entity_type),
                ).lastrowid
                self.report.entities += 1
                mentions.queue(self.conn, "entity", [entity_id])
                self.entity_ids[key] = entity_id
                return entity_id
            self.entity_ids[key] = entity_id
        if claim:
            self.conn.execute("update entities set entity_type = 'document' where id = ? and entity_type is not 'document'", (entity_id,))
        return entity_id


class _transaction:
    """BEGIN ... COMMIT, or ROLLBACK on any exception (the connection is in autocommit mode)."""

    def __init__(self, conn):
        self.conn = conn

    def __enter__(self):
        self.conn.execute("begin")

    def __exit__(self, kind, value, tb):
        self.conn.execute("commit" if kind is None else "rollback")
