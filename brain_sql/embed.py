"""The embedding model: loaded once per process, shared by every connection and
thread, from whichever plugin handles the model id first."""

import threading
from typing import Any

import numpy as np

from .plugins import collect

_models: dict[str, Any] = {}  # model id -> the model, loaded once
_lock = threading.Lock()


def get_model(model_id):
    """The loaded model for `model_id`, loaded on first use and cached for the process."""
    model = _models.get(model_id)
    if model is None:
        with _lock:
            model = _models.get(model_id)
            if model is None:
                loader = next(each for each in collect("brain_embedding_models") if each.handles(model_id))
                model = _models[model_id] = loader.load(model_id)
    return model


def model_dimension(model_id):
    return int(embed(["dimension probe"], model_id).shape[1])


def embed(texts, model_id):
    """float32 array (n, dim), each row L2-normalised (a text with no known token is zero)."""
    vectors = get_model(model_id).encode(list(texts), use_multiprocessing=False)
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)


def count_tokens(texts, model_id):
    """How many tokens the model's tokenizer makes of each text."""
    encodings = get_model(model_id).tokenizer.encode_batch(list(texts), add_special_tokens=False)
    return [len(e.ids) for e in encodings]
