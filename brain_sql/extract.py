"""The built-in entity extractor: inline [[relation::entity]] annotations and
[[wikilinks]] in a document's text, outside code."""

import re
from pathlib import PurePosixPath

from .document import Relation
from .hookspecs import hookimpl

ANNOTATION = re.compile(r"\[\[([A-Za-z0-9_-]+)::([^\[\]|\n]+?)\]\]")
WIKILINK = re.compile(r"\[\[([^\[\]|#\n]+?)(?:#[^\[\]|\n]*)?(?:\|[^\[\]\n]*)?\]\]")
_CODE = re.compile(r"^(```|~~~).*?^\1[^\n]*$|`[^`\n]*`", re.MULTILINE | re.DOTALL)


@hookimpl
def brain_entity_extractors():
    return [annotations_and_wikilinks]


def annotations_and_wikilinks(document):
    """`[[owned_by::Dana Whitfield]]` -> owned_by edge from the note;
    `[[Target]]` / `[[Target|label]]` -> references edge to the note Target."""
    relations = []
    for index, chunk in enumerate(document.chunks):
        if "[[" not in chunk.content:
            continue  # no annotation, no wikilink
        text = _CODE.sub(" ", chunk.content)
        for relation_type, name in ANNOTATION.findall(text):
            relations.append(Relation(relation_type, name.strip(), None, index))
        for target in WIKILINK.findall(text):
            if "::" in target:
                continue
            name = _note_name(target)
            if name:
                relations.append(Relation("references", name, None, index, "document"))
    return relations


def _note_name(target):
    """The note a wikilink's target names: `folder/Note.md` -> `Note`."""
    return PurePosixPath(target.strip()).name.removesuffix(".md").strip()


def entity_links(text: str) -> list[tuple[int, int, str]]:
    """(start, end, entity name) of each `[[relation::Entity]]` and `[[wikilink]]`
    in `text` outside code, in order: the spans ingest reads as naming entities."""
    masked = _CODE.sub(lambda m: " " * len(m.group()), text)  # offsets kept
    found = [(m.start(), m.end(), m.group(2).strip()) for m in ANNOTATION.finditer(masked)]
    for m in WIKILINK.finditer(masked):
        name = "" if "::" in m.group(1) else _note_name(m.group(1))
        if name:
            found.append((m.start(), m.end(), name))
    return sorted(found)
