"""The built-in embedding models, registered through the brain_embedding_models hook.

The embedded default reads WordLlama's l2_supercat token embeddings and tokenizer
from the files inside the `wordllama` wheel, so it never touches the network.
Any model2vec model (a local folder or a hub id) can be configured instead, or
all-MiniLM-L6-v2 when the optional `minilm` extra is installed (minilm.py).
"""

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from . import minilm
from .config import DEFAULT_MODEL
from .errors import ModelError, ModelRefused
from .hookspecs import hookimpl


@dataclass(frozen=True)
class ModelLoader:
    """A kind of model: which ids it `handles`, how to `load` one (an object with
    .encode(list[str]) -> ndarray), and, for a loader that may fetch a model over the
    network, whether one is `installed` (loads without it). A brain's recorded
    model that is not installed is refused, never fetched; None: load never fetches."""

    name: str
    handles: Callable[[str], bool]
    load: Callable[[str], object]
    installed: Callable[[str], bool] | None = None


def _load_wordllama(model_id):
    from model2vec import StaticModel
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    # the wheel's files, found without importing the package: it imports an HTTP stack
    # (requests, urllib3) a local model never uses, a third of the load
    spec = importlib.util.find_spec("wordllama")
    root = Path(spec.origin).parent if spec and spec.origin else Path("(not installed)")
    weights = root / "weights" / "l2_supercat_256.safetensors"
    tokenizer = root / "tokenizers" / "l2_supercat_tokenizer_config.json"
    if not weights.exists() or not tokenizer.exists():
        raise ModelError(
            f"the wordllama wheel at {root} does not ship l2_supercat_256 weights; "
            "reinstall it with: pip install --force-reinstall wordllama"
        )
    vectors = load_file(str(weights))["embedding.weight"].astype(np.float32)
    tokenizer = Tokenizer.from_file(str(tokenizer))
    # StaticModel keeps a deep copy of the tokenizer it is given, lest its settings reach
    # the caller's: a JSON round trip, a third of the load. This one is new and the
    # model's alone, so the copy is the tokenizer itself.
    tokenizer.__deepcopy__ = lambda memo: tokenizer
    return StaticModel(vectors=vectors, tokenizer=tokenizer, normalize=True, base_model_name=model_id)


def _model2vec_folder(model_id):
    """The folder model2vec loads `model_id` from without the network: the id itself
    when it is a folder, or a hub model's snapshot in the local cache; None when it
    would have to be fetched."""
    try:
        if model_id and Path(model_id).is_dir():  # '' would be the folder the command runs in
            return Path(model_id)
    except (OSError, ValueError):  # a name no file system takes (a NUL in it, too long)
        return None
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(model_id, local_files_only=True))
    except Exception:  # noqa: BLE001 - not cached, or no hub id at all: huggingface_hub raises several kinds
        return None


def _regular_files(folder):
    """Refuse a model folder whose files are not regular files: a named pipe or a
    device would block the load, or never end (as ingest never opens one)."""
    for at, folders, names in os.walk(folder, followlinks=True):  # model2vec reads sub-folders' layouts too
        if os.path.relpath(at, folder).count(os.sep) >= 2:
            folders[:] = []  # deeper than any layout it reads (and a link loop ends)
        for name in names:
            path = os.path.join(at, name)
            if os.path.exists(path) and not os.path.isfile(path):
                raise ValueError(f"{os.path.relpath(path, folder)} is not a regular file")


_LOADS = (
    "Give a local folder with config.json, model.safetensors and tokenizer.json, or a hub id when the hub "
    f"is reachable; the offline default is {DEFAULT_MODEL!r}"
)


def _load_model2vec(model_id):
    from model2vec import StaticModel

    folder = _model2vec_folder(model_id)  # a cached hub model: loaded from its folder, never fetched again
    if folder is None and model_id.startswith(("/", ".", "~")):  # a path, never a hub id: said as one
        raise ModelRefused(f"cannot load model2vec model {model_id!r}: there is no folder {model_id}. {_LOADS}")
    if folder is not None and not any((folder / name).is_file() for name in ("config.json", "modules.json")):
        raise ModelRefused(f"cannot load model2vec model {model_id!r}: {folder} holds no config.json. {_LOADS}")
    try:
        if folder is not None:
            _regular_files(folder)
        return StaticModel.from_pretrained(str(folder) if folder else model_id)
    except Exception as ex:  # model2vec raises many kinds; all mean "cannot load"
        raise ModelRefused(f"cannot load model2vec model {model_id!r}: {str(ex).strip().rstrip('.')}. {_LOADS}") from ex


@hookimpl
def brain_embedding_models():
    return [
        ModelLoader("wordllama", lambda model_id: model_id == DEFAULT_MODEL, _load_wordllama),
        ModelLoader("minilm", lambda model_id: model_id == minilm.MODEL_ID, minilm.load),
        ModelLoader(
            "model2vec",
            lambda model_id: True,
            _load_model2vec,
            lambda model_id: _model2vec_folder(model_id) is not None,
        ),
    ]
