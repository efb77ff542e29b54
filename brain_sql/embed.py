"""The embedding model: loaded once per process, shared by every connection and
thread, from whichever plugin handles the model id first.

A model is fetched over the network (a hub model not in the local cache) only when
a user names it (`--model`, `$BRAIN_MODEL`: `fetch`). The model a brain records
is only ever loaded from what is installed: plain SQL can write any id there, and
recall must not wait on the network, nor reach it, for one."""

import sys
import threading
from typing import Any

import numpy as np

from .config import DEFAULT_MODEL
from .errors import ModelError
from .fields import composed_text
from .plugins import collect

_models: dict[str, Any] = {}  # model id -> the model, loaded once
_widths: dict[str, int] = {}  # model id -> the width of its vectors, probed once
_lock = threading.Lock()

# what a model not installed here is, said by recall and by check alike
NOT_INSTALLED = (
    "a model installed here (this package's, a plugin's, a local model2vec folder, or a hub model in the "
    "local cache: a brain's model is never fetched)"
)


def not_installed(model_id):
    """The ModelError for a brain's model that is not installed here: what to run."""
    return ModelError(
        f"this brain records the model {model_id!r}, which is not {NOT_INSTALLED}: run sqlite-utils brain check DB "
        "(--repair restores the model its memories say they were embedded with, when they all name one), "
        "or re-embed them with an installed model: sqlite-utils brain reindex DB --model M "
        f"(the default is {DEFAULT_MODEL})"
    )


def other_width(model_id, width, stored):
    """The ModelError for a brain whose recorded model makes vectors `width` wide
    while its stored ones are `stored` wide (plain SQL set brain_meta's model to
    another installed model): what to run."""
    return ModelError(
        f"this brain records the model {model_id!r}, which makes vectors {width} wide, but its stored vectors are "
        f"{stored} wide: run sqlite-utils brain check DB (--repair restores the model its memories say they were "
        "embedded with, when they all name one), or re-embed them: sqlite-utils brain reindex DB --model M "
        f"(the default is {DEFAULT_MODEL})"
    )


def _loader(model_id):
    return next(each for each in collect("brain_embedding_models") if each.handles(model_id))


def installed(model_id):
    """Whether `model_id` loads without the network: loaded already, or its loader
    says so (a loader without `installed` never fetches)."""
    if model_id in _models:
        return True
    loader = _loader(model_id)
    return loader.installed is None or bool(loader.installed(model_id))


def get_model(model_id, fetch=False):
    """The loaded model for `model_id`, loaded on first use and cached for the
    process; one that is not installed is fetched only when `fetch` (a user named
    it), else refused (not_installed)."""
    model = _models.get(model_id)
    if model is None:
        with _lock:
            model = _models.get(model_id)
            if model is None:
                if not fetch and not installed(model_id):
                    raise not_installed(model_id)
                model = _models[model_id] = _loader(model_id).load(model_id)
    return model


def model_dimension(model_id, fetch=False):
    """The width of the vectors `model_id` makes (loaded as get_model does)."""
    get_model(model_id, fetch)
    width = _widths.get(model_id)
    if width is None:
        width = _widths[model_id] = int(embed(["dimension probe"], model_id).shape[1])
    return width


def embed(texts, model_id):
    """float32 array (n, dim), each row L2-normalised (a text with no known token is
    zero). Each text is embedded as fields.composed_text reads it: "José" written
    with a combining accent is the same text, and gets the same vector."""
    texts = [composed_text(text) for text in texts]
    vectors = get_model(model_id).encode(texts, use_multiprocessing=False)
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def grouping_free(model_id):
    """Whether the model embeds each text alone, so that how texts are grouped into
    calls changes no vector: a model2vec StaticModel's is the mean of its tokens'
    vectors, while MiniLM pads a group to its longest text."""
    static = sys.modules.get("model2vec")  # imported once such a model is loaded
    return static is not None and isinstance(get_model(model_id), static.StaticModel)


def unread(texts, model_id):
    """[(index, why)] of the texts the model does not read whole, their vectors of
    their start alone: a model2vec model cuts a text at max_length times its median
    token's length in characters, then at max_length tokens (its tokenizer's own cut
    too); MiniLM reads its first MAX_TOKENS, its two marks among them."""
    model = get_model(model_id)
    truncation = getattr(model.tokenizer, "truncation", None) or {}
    tokens = getattr(model, "max_tokens", None) or getattr(model, "max_length", None) or truncation.get("max_length")
    chars = tokens * model.median_token_length if getattr(model, "median_token_length", None) and tokens else None
    if not tokens:
        return []
    reads = f"{model_id} reads at most {tokens:,} tokens" + (f" in {chars:,} characters" if chars else "")
    texts = [composed_text(text) for text in texts]  # what embed gives the model
    encodings = model.tokenizer.encode_batch(texts, add_special_tokens=False)
    found = []
    for at, (text, encoding) in enumerate(zip(texts, encodings)):
        length = len(encoding.ids) + sum(len(o.ids) for o in encoding.overflowing)
        if chars and len(text) > chars:
            found.append((at, f"{len(text):,} characters; {reads}"))
        elif length > tokens:
            found.append((at, f"{length:,} tokens; {reads}"))
    return found


def count_tokens(texts, model_id):
    """How many tokens the model's tokenizer makes of each text."""
    encodings = get_model(model_id).tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [len(e.ids) for e in encodings]
