"""The brain_* SQL functions, registered on any sqlite3 connection."""

import json

from . import embed, lexical, verify

EMBED_FORMATS = ("float32", "int8")


def register_functions(conn, model_id):
    """Register brain_embed, brain_verify and brain_fts_query on `conn`.

    brain_embed uses `model_id`, the model the database was built with; the
    model itself is loaded on the first call, not here.
    """

    def brain_embed(text, fmt="float32"):
        """brain_embed(text [, 'float32' | 'int8']): the text's L2-normalised vector as a
        BLOB; 'int8' gives the quantised form stored in vec_knowledge.embedding_int8
        (wrap it in vec_int8() to match against that column)."""
        if text is None:
            return None
        if fmt not in EMBED_FORMATS:
            raise ValueError(f"brain_embed format must be one of {EMBED_FORMATS}, not {fmt!r}")
        vectors = embed.embed([str(text)], model_id)
        if fmt == "int8":
            vectors = embed.quantize_int8(vectors)
        return vectors[0].tobytes()

    def brain_verify(claim, text):
        return json.dumps(verify.verify(claim, text))

    def brain_fts_query(text):
        return lexical.fts_query("" if text is None else str(text))

    conn.create_function("brain_embed", 1, brain_embed, deterministic=True)
    conn.create_function("brain_embed", 2, brain_embed, deterministic=True)
    conn.create_function("brain_verify", 2, brain_verify, deterministic=True)
    conn.create_function("brain_fts_query", 1, brain_fts_query, deterministic=True)
