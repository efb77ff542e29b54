"""Pluggy hooks through which packages add ingest formats, entity extractors and
embedding models to brain_sql; the built-in ones register through them too."""

import pluggy

hookspec = pluggy.HookspecMarker("brain")
hookimpl = pluggy.HookimplMarker("brain")


@hookspec
def brain_ingest_formats():
    """Return a list of IngestFormat: (name, file suffixes, parse(path, text) -> items,
    default source, max_bytes read whole, or by_line: parse gets a TextLines instead)."""


@hookspec
def brain_entity_extractors():
    """Return a list of callables taking a Document and returning Relations found in it."""


@hookspec
def brain_embedding_models():
    """Return a list of ModelLoader: (name, handles(model_id), load(model_id)
    [, installed(model_id)]); a loader that may fetch a model over the network says
    which are installed, since the model a brain records is never fetched."""
