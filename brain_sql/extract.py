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
            name = PurePosixPath(target.strip()).name.removesuffix(".md").strip()
            if name:
                relations.append(Relation("references", name, None, index, "document"))
    return relations
