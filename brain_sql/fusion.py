"""Fusion: the legs' candidates in, one order out.

When the query names entities the caller can reach, the graph walk leads and the
legs are fused by weighted Reciprocal Rank Fusion: a sum of weighted reciprocal
ranks, which lets the walk's order win whatever its scores. Otherwise the legs'
raw scores are fused by a convex combination of their min-max normalised values:
rank fusion gives a weak dense leg's rank
10 the same say as a strong lexical leg's rank 10, while the scores say how far
apart candidates are. Neither fused score is a confidence; quality.py judges that.
"""

import datetime

from .config import BOOST_SCALE, CONVEX_WEIGHTS, LEG_WEIGHTS_WITH_ENTITIES, MODEL_CONVEX_WEIGHTS, RECENCY_DAYS, RRF_K

# legs in the order their terms are summed, as recall.sql sums them
LEGS = ("vector", "fts", "graph", "prf")


def _scaled(weights):
    """Convex weights scaled to sum to 1: a fused score is in [0, 1]."""
    return {leg: weight / sum(weights.values()) for leg, weight in weights.items()}


CONVEX = _scaled(CONVEX_WEIGHTS)  # the default model's
_MODEL_CONVEX = {model_id: _scaled(weights) for model_id, weights in MODEL_CONVEX_WEIGHTS.items()}


def rrf(rank, k=RRF_K, weight=1.0):
    """One leg's contribution for an item at 1-based `rank`: weight / (k + rank)."""
    return weight / (k + rank)


def fuse(legs, weights, k=RRF_K):
    """legs: {name: [id, ...] best first}; returns [(id, fused score, {name: rank})]
    best first, ties broken by id so the order is deterministic."""
    scores, ranks = {}, {}
    for name, ids in legs.items():
        weight = weights.get(name, 1.0)
        for rank, item in enumerate(ids, 1):
            ranks.setdefault(item, {})[name] = rank
            if weight:
                scores[item] = scores.get(item, 0.0) + rrf(rank, k, weight)
    return _ordered(scores, ranks)


def normalised(values):
    """A leg's raw scores min-max normalised to [0, 1] over its own candidates;
    1.0 each when they are all equal."""
    low, high = min(values), max(values)
    return [(value - low) / (high - low) if high > low else 1.0 for value in values]


def convex(legs, raw, weights):
    """legs: {name: [id, ...] best first}, raw: {name: {id: score, higher better}};
    returns [(id, fused score, {name: rank})] best first, ties by id. The fused
    score is the weighted sum of each leg's normalised score; a leg that did not
    return a candidate adds nothing for it. Every candidate keeps its rank in
    every leg, weighted or not, for its provenance."""
    scores, ranks = {}, {}
    for name in sorted(legs, key=lambda leg: (LEGS.index(leg) if leg in LEGS else len(LEGS), leg)):
        ids = legs[name]
        for rank, item in enumerate(ids, 1):
            ranks.setdefault(item, {})[name] = rank
            scores.setdefault(item, 0.0)
        weight = weights.get(name, 0.0)
        if ids and weight:
            for item, value in zip(ids, normalised([raw[name][item] for item in ids])):
                scores[item] += weight * value
    return _ordered(scores, ranks)


def _ordered(scores, ranks):
    ordered = sorted(scores, key=lambda item: (-scores[item], item))
    return [(item, scores[item], ranks[item]) for item in ordered]


def leg_weights(names_entities, model_id=None):
    """Each leg's fusion weight: the graph walk leads (RRF) when the query names
    entities the caller can reach (multi-hop questions); otherwise the convex
    combination's weights for the brain's model."""
    return LEG_WEIGHTS_WITH_ENTITIES if names_entities else _MODEL_CONVEX.get(model_id, CONVEX)


def fused(legs, raw, names_entities, model_id=None):
    """The legs fused as leg_weights says: weighted RRF when the query names
    entities, else the convex combination of normalised scores."""
    if names_entities:
        return fuse(legs, LEG_WEIGHTS_WITH_ENTITIES)
    return convex(legs, raw, leg_weights(False, model_id))


def method(names_entities):
    """'rrf' or 'convex': how a query's legs are fused."""
    return "rrf" if names_entities else "convex"


def boosted(score, observed_at, confidence, now):
    """A fused score nudged by recency and confidence, each bounded so that it only
    breaks near-ties (BOOST_SCALE: at most ±0.5%): a decisive relevance gap is
    never overridden. `observed_at` is SQLite time text, `now` a datetime."""
    recency = 0.5
    if observed_at:
        try:
            age = (now - datetime.datetime.fromisoformat(observed_at)).days
            recency = max(0.0, 1.0 - max(age, 0) / RECENCY_DAYS)
        except ValueError:
            pass
    confidence = confidence if confidence is not None else 0.5
    boost = BOOST_SCALE * ((recency - 0.5) + (confidence - 0.5)) / 2
    return score * (1 + boost)
