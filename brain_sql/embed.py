"""The embedding model: loaded once per process, shared by every connection and thread.

The embedded default reads WordLlama's l2_supercat token embeddings and tokenizer
from the files inside the `wordllama` wheel, so it never touches the network.
Any model2vec model (a local folder or a hub id) can be configured instead.
"""

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from .config import DEFAULT_MODEL
from .connection import BrainError
from .hookspecs import hookimpl


class ModelError(BrainError):
    """A model cannot be loaded, or does not match the one a brain was built with."""


@dataclass(frozen=True)
class ModelLoader:
    name: str
    handles: Callable[[str], bool]
    load: Callable[[str], object]  # returns an object with .encode(list[str]) -> ndarray


def _load_wordllama(model_id):
    import wordllama
    from model2vec import StaticModel
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    root = Path(wordllama.__file__).parent
    weights = root / "weights" / "l2_supercat_256.safetensors"
    tokenizer = root / "tokenizers" / "l2_supercat_tokenizer_config.json"
    if not weights.exists() or not tokenizer.exists():
        raise ModelError(
            f"the wordllama wheel at {root} does not ship l2_supercat_256 weights; "
            "reinstall it with: pip install --force-reinstall wordllama"
        )
    vectors = load_file(str(weights))["embedding.weight"].astype(np.float32)
    return StaticModel(
        vectors=vectors,
        tokenizer=Tokenizer.from_file(str(tokenizer)),
        normalize=True,
        base_model_name=model_id,
    )


def _load_model2vec(model_id):
    from model2vec import StaticModel

    try:
        return StaticModel.from_pretrained(model_id)
    except Exception as ex:  # model2vec raises many kinds; all mean "cannot load"
        raise ModelError(
            f"cannot load model2vec model {model_id!r}: {ex}. Give a local folder with "
            "config.json, model.safetensors and tokenizer.json, or a hub id when the hub "
            f"is reachable; the offline default is {DEFAULT_MODEL!r}"
        ) from ex


@hookimpl
def brain_embedding_models():
    return [
        ModelLoader("wordllama", lambda model_id: model_id == DEFAULT_MODEL, _load_wordllama),
        ModelLoader("model2vec", lambda model_id: True, _load_model2vec),
    ]


_models = {}
_lock = threading.Lock()


def get_model(model_id):
    """The loaded model for `model_id`, loaded on first use and cached for the process."""
    model = _models.get(model_id)
    if model is None:
        from .plugins import collect

        with _lock:
            model = _models.get(model_id)
            if model is None:
                loader = next(l for l in collect("brain_embedding_models") if l.handles(model_id))
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


def quantize_int8(vectors):
    """int8 rows scaled so each row's largest component is ±127.

    Cosine distance ignores a row's scale, so this keeps far more precision than
    mapping [-1, 1] to int8: a unit vector of 256 dimensions has components near
    ±0.06, which a fixed [-1, 1] scale would round to a handful of levels.
    """
    peak = np.abs(vectors).max(axis=1, keepdims=True)
    scale = np.divide(127.0, peak, out=np.zeros_like(peak), where=peak > 0)
    return np.rint(vectors * scale).astype(np.int8)
