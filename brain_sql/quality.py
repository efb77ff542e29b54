"""How good is this result? A confidence in [0, 1] from signals that mean
something on their own — never from the fused RRF score, which is a rank.

Signals:
- coverage: the idf-weighted share of the query's terms that the top hit contains;
- known: the idf-weighted share of the query's terms that the rows the request
  can reach contain at all (hidden rows count for nothing here, as everywhere);
- similarity: the best vector hit's cosine similarity to the query;
- agreement: whether the dense and lexical legs agree on the top hit;
- affinity: the mean cosine similarity of the vector leg's candidates (the rows
  the request can reach nearest the query): how well the query fits what the
  brain holds around it, not only its best row;
- named: whether the query names an entity the request can reach (the graph
  leg's seeds, found as well when the graph leg does not run), surely
  (names_surely): by more than one word that each entity it names writes only
  before a disambiguator ("Maria" of "Maria (Counting Crows)", a song's: the
  brain itself says the word alone does not tell whom it means), or by such a
  word with a row tied to the entity near the query;
- speaker: whether the query names, as a name is written, a speaker of the
  conversation session its best candidate is a turn of (dialogue.speakers_asked,
  over the turns the request can reach). A speaker's name is no seed (it is tied
  to half the conversation), and how near a question naming one sits to the
  turns depends on the name: a rare one ("Melanie") weighs on every vector that
  holds it, a common one ("Tom") little, so the other signals alone judge a
  conversation by its people's names;
- rarity: the mean idf of the query's terms over the rows the request can reach,
  over the idf of a term none of them holds: a brain's own questions are asked in
  its words, which many of its rows hold; another kind's search for words it
  holds in few rows or none;
- stranger: whether the query, naming no entity or speaker the request can
  reach, names someone (a capitalised name not opening a sentence,
  proper_names.py) whom its top hit does not know by that name: "What did Tom
  do with his family?" asked of Wikipedia passages, whose top hit names no Tom
  or several (Tom Hanks, Tom Jones). A conversation's questions name its people;
  asked of a brain that does not know them, they are another kind's.

The confidence is the lower of two probabilities: that the top hit answers the
query (coverage, known, similarity, agreement) and that the query belongs to the
brain at all (coverage, similarity, affinity, named, speaker, rarity, stranger) —
a question from another kind of corpus finds some words and a middling nearest
row anywhere, but not a neighbourhood of rows like it, nor the things or people
it names, nor its words among the brain's common ones. A query whose every
searched term the top hit holds (coverage 1) belongs: no question of another
kind did (bench/abstention.py), and a short exact query in a small brain often
has no neighbourhood to speak of. Nor is belonging asked of a request that reaches
fewer than RECALL_CANDIDATES rows: the mean is then over everything it can read,
not a neighbourhood.

The recommendation: return when confident;
run_prf when confidence is moderate and the top hit is agreed by both legs within
PRF_AGREEMENT_RANK (expansion then builds on genuine signal); increase_top_k when
the top hit covers the query but the legs disagree; clarify_query otherwise.

Each hit's own relevance (hit_relevance) is a probability that it is relevant,
read from the same kinds of signal for that hit (the share of the query's terms it
holds, its own vector similarity, its ties to the entities the query names), from
where it stands in the fused answer, and from the answer's confidence.
"""

import json
import math
from dataclasses import dataclass

import numpy as np

from . import lexical
from .config import (
    ABSTAIN_BELOW,
    MINILM_MODEL,
    PRF_AGREEMENT_RANK,
    PRF_DEPTH,
    PRF_TERMS,
    RECALL_CANDIDATES,
    RELEVANCE_MODEL,
)
from .fields import composed_text
from .proper_names import knows, names_in
from .vectors import quantize_int8, vector_rows

# The confidence is a logistic model of the signals, fitted on SciFact's training
# queries and conv-26's questions (answerable) against half of
# tests/data/trap_queries.jsonl asked of each (not), conv-26 also with its people
# called otherwise (bench/abstention.py's RENAMED): fitted on SciFact alone, a
# conversation between people with common names lost up to 5.4% of its questions
# (held-out names), with rare ones 1.3%; bench/tune.py refits it. SIMILARITY_RANGE
# maps the default model's cosine similarities to [0, 1]; another model may want its own range.
SIGNAL_WEIGHTS = {"coverage": 2.74, "known": 3.51, "similarity": 6.89, "agreement": 1.35, "speaker": 3.09}
SIGNAL_BIAS = -6.94
# The belonging model: a logistic fit (each brain x question set weighed alike)
# of every brain's own questions (SciFact train, conv-26, the MuSiQue and HotpotQA
# training samples) against each other kind's, over the questions it is asked of;
# SciFact's test claims held out. Its bias is the fit's (-6.59) raised by the most
# (0.25) that keeps every cross pair of those questions abstaining on >= 95% and a
# brain's own on <= 3%. `speaker` came later, with the weight the same fit gives it
# once conv-26 renamed is among its brains (the whole model fitted again would cost
# SciFact's test claims 0.6956 -> 0.6885 nDCG@10). `stranger` came last, the same
# way: with its fit's weight, the Wikipedia brains asked conv-26's questions renamed
# (held-out names too) abstain on >= 93.3% (3 of 27 cells under 95%), against 89.9%
# (8 cells) without it; since `named` needs more than a bare word (graph.Named.surely),
# >= 94.0% (1 of 27), with other common names too >= 94.0% (4 of 45; 71.8% before);
# `named`'s weight is the one fitted when any entity named counted.
# `python3 bench/abstention.py --fit` refits it.
BELONGING_WEIGHTS = {
    "coverage": 5.74,
    "similarity": 6.03,
    "affinity": 19.18,
    "named": 3.96,
    "speaker": 3.08,
    "rarity": -6.9,
    "stranger": -1.87,
}
BELONGING_BIAS = -6.34
# A model whose vectors sit otherwise has its own, fitted the same way on brains made
# with it (`python3 bench/abstention.py --model M --fit`). MiniLM's: with the default
# model's, its HotpotQA brain abstained on 90.6% of conv-26's questions; with its own
# every cross pair of the training questions on >= 95.3%, a brain's own on <= 3.0%
# (the fit's bias -5.97, +0.25); SciFact train nDCG@10 0.7367 -> 0.7354 (test 0.7189 -> 0.7206).
# `speaker` came later, as the default model's did: the weight the same fit on MiniLM
# brains gives it. `stranger` is not weighed here: its fit's weight (-1.23) lifted the
# Wikipedia brains asked conv-26's questions renamed from >= 82.6% to >= 83.9% only,
# for 4 of SciFact's training claims (docs/evaluation.md).
MODEL_BELONGING = {
    MINILM_MODEL: (
        {"coverage": 2.51, "similarity": 7.97, "affinity": 19.03, "named": 3.31, "speaker": 2.47, "rarity": -8.11},
        -5.72,
    )
}


def belonging_model(model_id):
    """(weights, bias) of the belonging model for a brain made with `model_id`."""
    return MODEL_BELONGING.get(model_id, (BELONGING_WEIGHTS, BELONGING_BIAS))


SIMILARITY_RANGE = (0.2, 0.6)
# the similarity (scaled as `similarity`) a row tied to an entity named by a bare word
# needs for the word to name it (names_surely). Review 60's notes brain of 50 "X
# (project)" titles asked 200 questions about them abstains on 54 (53 with every bare
# word naming, 100 with none), 400 short ones ("Orion status?") on 16 (14, 200); the
# HotpotQA brain asked conv-26's questions about a Maria on 94.0% (71.8% with every bare
# word naming); at 0.5 the notes brain loses none, but a brain holding the song and a
# book club's note answers "What books has Maria read?" (review 61). docs/evaluation.md
BARE_NAME_SIMILARITY = 0.6
RETURN_ABOVE = 0.75
BRIDGED_EVIDENCE = 0.5  # a hit one step from a named entity in the graph holds half the evidence of one tied to it


@dataclass
class Assessment:
    confidence: float
    recommendation: str
    signals: dict
    abstain: bool

    def report(self):
        return {
            "confidence": round(self.confidence, 4),
            "recommendation": self.recommendation,
            "signals": {k: round(v, 4) for k, v in self.signals.items()},
        }


def _top_row(conn, knowledge_id):
    """(title, content, context) of the top hit, each '' when it has none."""
    row = conn.execute(
        "select coalesce(title, '') || '', coalesce(content, '') || '', coalesce(context, '') || '' "
        "from knowledge where id = ?",
        (knowledge_id,),
    ).fetchone()
    return row or ("", "", "")


def names_surely(legs):
    """Whether the query names an entity the request can reach surely: by more than
    a bare word (graph.Named.surely), or by a bare word ("Maria" of "Maria (Counting
    Crows)") with a row tied to the entity near the query (legs.named_similarity,
    scaled as `similarity`, >= BARE_NAME_SIMILARITY): "Who leads Apollo?" of notes
    titled "Apollo (project)" is about that project, "What books has Maria read?"
    of a Wikipedia brain holding the song is not, however near a book club's note."""
    return legs.named_surely or (bool(legs.named) and _scaled(legs.named_similarity) >= BARE_NAME_SIMILARITY)


def _scaled(cosine):
    """A cosine similarity mapped by SIMILARITY_RANGE to [0, 1]."""
    low, high = SIMILARITY_RANGE
    return min(1.0, max(0.0, (cosine - low) / (high - low)))


def stranger(legs, title, content, named):
    """Whether the query, naming no entity or speaker the request can reach, names
    someone (proper_names.names_in) whom its top hit's title and content do not
    know by that name (proper_names.knows): not at all, or only inside longer names
    that disagree ("Anna" where it says "Anna Pavlova" and "Anna Karenina"). A
    conversation's question about its people, asked of a brain that does not know
    them, or any question about someone its answer does not name. Not the context,
    which quotes other turns, some of which the caller may not read. `named`:
    whether the query names an entity surely (names_surely)."""
    if named or legs.speakers:
        return False
    text = composed_text(title + "\n" + content)  # read as the query is: "José" stored decomposed
    return any(not knows(text, name) for name in names_in(lexical.asked(legs.question or legs.text)))


def assess(conn, legs, fused):
    """The Assessment of a fused result for the query the legs searched."""
    signals = dict.fromkeys(
        ("coverage", "known", "similarity", "agreement", "affinity", "named", "speaker", "stranger"), 0.0
    )
    signals["rarity"] = 1.0
    if not fused:
        return Assessment(0.0, "clarify_query", signals, True)
    idf = legs.terms.query_idf(legs.text)
    top = fused[0][0]
    title, content, context = _top_row(conn, top)
    if idf:
        # the terms the top hit is indexed under, found by the same tokenizer the index
        # uses (the index's own per-document lists are slow to read: fts5vocab scans
        # each term's postings)
        terms = lexical.indexed_terms(title + "\n" + content + "\n" + context)
        signals["coverage"] = legs.terms.share(legs.text, terms)
        signals["known"] = sum(idf[t] for t in idf if legs.terms.rows(t)) / sum(idf.values())
    signals["rarity"] = legs.terms.rarity(legs.text)
    vector = legs.raw.get("vector", {})
    if vector:
        signals["similarity"] = _scaled(max(vector.values()))
        signals["affinity"] = max(0.0, sum(vector.values()) / len(vector))
    signals["agreement"] = 1.0 if agreed(legs, top) else 0.0
    named = names_surely(legs)
    signals["named"] = 1.0 if named else 0.0
    signals["speaker"] = 1.0 if legs.speakers else 0.0
    signals["stranger"] = 1.0 if stranger(legs, title, content, named) else 0.0
    confidence = _logistic(SIGNAL_BIAS, SIGNAL_WEIGHTS, signals)
    if signals["coverage"] < 1.0 and len(vector) >= RECALL_CANDIDATES:
        weights, bias = belonging_model(legs.model_id)
        confidence = min(confidence, _logistic(bias, weights, signals))
    if confidence >= RETURN_ABOVE:
        recommendation = "return"
    elif signals["agreement"]:
        recommendation = "run_prf"  # moderate confidence, and the agreement gate holds
    elif signals["coverage"] >= 0.5:
        recommendation = "increase_top_k"
    else:
        recommendation = "clarify_query"
    return Assessment(confidence, recommendation, signals, confidence < ABSTAIN_BELOW)


def _logistic(bias, weights, signals):
    return 1.0 / (1.0 + math.exp(-(bias + sum(weight * signals[name] for name, weight in weights.items()))))


def agreed(legs, item, within=PRF_AGREEMENT_RANK):
    """Whether both the dense and the lexical leg rank `item` within `within`."""
    return all(item in legs.ranked.get(leg, [])[:within] for leg in ("vector", "fts"))


def expansion_terms(conn, legs, fused):
    """Up to PRF_TERMS words to add to the query, from the top PRF_DEPTH hits:
    frequent in those hits, rare in the brain, not already asked for."""
    ids = [item for item, _, _ in fused[:PRF_DEPTH]]
    rows = conn.execute(
        "select coalesce(title, '') || ' ' || content || ' ' || coalesce(context, '') from knowledge "
        "where id in (select value from json_each(?)) and flagged = 0",
        [json.dumps(ids)],
    ).fetchall()
    counts = {}
    for (text,) in rows:
        for word in lexical.tokens(text.lower()):
            if len(word) > 2 and not word.isdigit() and word not in lexical.STOPWORDS:
                counts[word] = counts.get(word, 0) + 1
    asked = set(lexical.stems(lexical.tokens(legs.text)).values())
    stemmed = lexical.stems(list(counts))
    by_stem = {}
    for word, count in counts.items():
        stem = stemmed.get(word)
        if stem and stem not in asked:
            best = by_stem.get(stem)
            by_stem[stem] = (best[0] + count, best[1]) if best else (count, word)
    if not by_stem:
        return []
    # only stems whose best possible score could make the cut are counted exactly
    bounds = legs.terms.idf_bounds(by_stem)
    lowest = sorted((count * bounds[stem][0] for stem, (count, _) in by_stem.items()), reverse=True)
    cut = lowest[PRF_TERMS - 1] if len(lowest) >= PRF_TERMS else -math.inf
    contenders = {stem: entry for stem, entry in by_stem.items() if entry[0] * bounds[stem][1] >= cut}
    legs.terms.frequencies([word for _, word in contenders.values()])
    scored = sorted(
        ((count * legs.terms.idf(stem), word) for stem, (count, word) in contenders.items()),
        key=lambda s: (-s[0], s[1]),
    )
    return [word for _, word in scored[:PRF_TERMS]]


@dataclass
class Evidence:
    """What one hit holds of the query, and where it stands in the answer.

    Its own evidence, each in [0, 1]:
    - terms: the idf-weighted share of the query's terms the hit contains (idf over
      the rows the request can reach), as `coverage` is for the top hit; `matched`
      names the query's words it holds;
    - similarity: its own cosine similarity to the query, mapped through
      SIMILARITY_RANGE (0 at what unrelated text scores, 1 near a paraphrase);
    - entities: over the entities the query names, the mean of 1 for each it is
      tied to in the graph (mentions it, states an edge with it, or is its
      document), BRIDGED_EVIDENCE for each it is one step from (it is the
      document of an entity linked to it), 0 otherwise; None when the query
      names none. `tied` names those it is tied to or one step from.
    Its standing: `fused_rank` (1 for the first of the fused order, before the
    cut-off), `fused_share` (its fused score over the first's) and
    `lexical_share` (its BM25 over the lexical leg's best; 0 when that leg did
    not find it).

    strength = 1 - (1 - terms)(1 - similarity)(1 - entities): whether the hit
    holds any evidence at all (the cut-off reads it). `relevance` is the
    probability that the hit is relevant: a logistic model of all of the above
    and the answer's confidence, fitted on training data (config.RELEVANCE_MODEL,
    bench/relevance.py)."""

    terms: float
    similarity: float
    entities: float | None
    matched: tuple = ()
    tied: tuple = ()
    fused_rank: int = 1
    fused_share: float = 1.0
    lexical_share: float = 0.0
    confidence: float = 0.0  # the answer's (Assessment.confidence)

    @property
    def strength(self):
        return 1.0 - (1.0 - self.terms) * (1.0 - self.similarity) * (1.0 - (self.entities or 0.0))

    def features(self):
        """{name: value} of what the relevance model reads (config.RELEVANCE_MODEL's names)."""
        return {
            "terms": self.terms,
            "similarity": self.similarity,
            "entities": self.entities or 0.0,
            "names_entities": float(self.entities is not None),
            "inverse_rank": 1.0 / self.fused_rank,
            "fused_share": self.fused_share,
            "lexical_share": self.lexical_share,
            "confidence": self.confidence,
        }

    @property
    def relevance(self):
        return relevance(self.features())

    def report(self):
        values = {
            "terms": self.terms,
            "similarity": self.similarity,
            "entities": self.entities,
            "fused_share": self.fused_share,
            "lexical_share": self.lexical_share,
            "strength": self.strength,
        }
        report = {name: round(value, 4) if value is not None else None for name, value in values.items()}
        return {**report, "matched": list(self.matched), "tied": list(self.tied), "fused_rank": self.fused_rank}


def relevance(features):
    """The relevance model: a probability from {name: value} (Evidence.features)."""
    logit = RELEVANCE_MODEL["bias"] + sum(
        weight * features[name] for name, weight in RELEVANCE_MODEL["weights"].items()
    )
    return 1.0 / (1.0 + math.exp(-logit))


def hit_relevance(conn, legs, standing, confidence):
    """{id: Evidence} of the rows in `standing` ({id: (fused rank, fused share)})
    for the query the legs searched, in an answer of `confidence`."""
    ids = list(standing)
    if not ids:
        return {}
    idf = legs.terms.query_idf(legs.text)
    total = sum(idf.values())
    words = _searched_words(legs.text, idf)
    texts = dict(
        conn.execute(
            "select id, coalesce(title, '') || char(10) || content || char(10) || coalesce(context, '') from knowledge "
            "where id in (select value from json_each(?))",
            [json.dumps(ids)],
        ).fetchall()
    )
    similarities = _similarities(conn, legs, ids)
    named = legs.entity_chunks
    names = _entity_names(conn, named)
    held = dict(zip(texts, lexical.terms_held(texts.values(), idf)))
    bm25 = legs.raw.get("fts", {})
    best_bm25 = max(bm25.values(), default=0.0)
    found = {}
    for item in ids:
        holds = held.get(item, set())
        # summed in idf's own order, so a hit holding every term has exactly 1
        terms = sum(weight for term, weight in idf.items() if term in holds) / total if total else 0.0
        similarity = _scaled(similarities.get(item, 0.0))
        ties = {entity: _tie(item, *chunks) for entity, chunks in named.items()}
        entities = sum(ties.values()) / len(named) if named else None
        rank, share = standing[item]
        found[item] = Evidence(
            terms,
            similarity,
            entities,
            matched=tuple(word for word, stem in words if stem in holds),
            tied=tuple(names.get(entity, str(entity)) for entity, tie in ties.items() if tie),
            fused_rank=rank,
            fused_share=share,
            lexical_share=bm25[item] / best_bm25 if item in bm25 and best_bm25 > 0 else 0.0,
            confidence=confidence,
        )
    return found


def _searched_words(text, idf):
    """[(word, its index term)] of the query's searched words, each term once, in
    the order the query has them."""
    spec = lexical.parse(text)
    words = spec.terms + [w for phrase in spec.phrases + spec.compounds for w in phrase]
    stemmed = lexical.stems(words)
    seen, found = set(), []
    for word in words:
        stem = stemmed.get(word)
        if stem in idf and stem not in seen:
            seen.add(stem)
            found.append((word, stem))
    return found


def _entity_names(conn, named):
    """{entity id: name} of the entities the query names."""
    rows = (
        conn.execute(
            "select id, name from entities where id in (select value from json_each(?))", [json.dumps(sorted(named))]
        )
        if named
        else []
    )
    return dict(rows)


def _tie(item, direct, bridged):
    """1 for a chunk tied to a named entity, BRIDGED_EVIDENCE for one a step away, else 0."""
    if _holds(direct, item):
        return 1.0
    return BRIDGED_EVIDENCE if _holds(bridged, item) else 0.0


def _holds(ids, item):
    at = np.searchsorted(ids, item)
    return bool(at < len(ids) and ids[at] == item)


def _similarities(conn, legs, ids):
    """{id: cosine similarity to the query}: the vector leg's own, or for a row it
    did not rank, sqlite-vec's int8 cosine (the distance its KNN ranks by)."""
    vector = legs.raw.get("vector", {})
    known = {item: vector[item] for item in ids if item in vector}
    missing = [item for item in ids if item not in known]
    if missing and legs.vectors is not None and legs.vectors.any():
        query = quantize_int8(legs.vectors)[0].tobytes()
        if legs.state is not None:  # the read state holds them, and computes vec0's distance
            with legs.state.lock:
                known.update(
                    {item: 1.0 - distance for item, distance in legs.state.chunks.distances(query, missing).items()}
                )
            missing = [item for item in missing if item not in known]
        rows = vector_rows(conn, "vec_distance_cosine(embedding_int8, vec_int8(?))", missing, [query])
        known.update({item: 1.0 - distance for item, distance in rows if distance is not None})
    return known
