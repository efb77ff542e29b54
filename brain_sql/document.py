"""What an ingest format produces: documents made of chunks, with the entities
and relations their text states, or errors that name the file and line."""

from dataclasses import dataclass, field
from typing import Callable, Iterable


@dataclass
class Chunk:
    content: str
    heading_path: str | None = None
    line_start: int | None = None
    line_end: int | None = None


@dataclass
class Relation:
    relation_type: str
    to_name: str
    from_name: str | None = None  # None: the document itself
    chunk_index: int | None = None  # the chunk whose text states it
    to_type: str = "entity"


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


@dataclass
class IngestError:
    path: str
    line: int | None
    message: str

    def __str__(self):
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.message}"


@dataclass(frozen=True)
class IngestFormat:
    name: str
    suffixes: tuple[str, ...]
    # parse(path, text) yields Document or IngestError for each document in the file
    parse: Callable[[str, str], Iterable["Document | IngestError"]]
    default_source: str = "vault"
