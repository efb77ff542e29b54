"""Fusion: the legs' candidates in, one order out.

When the query names entities the caller can reach, and the words naming them
hold at least GRAPH_LEADS_SHARE of what it asks (graph_leads), the graph walk
leads and the legs are fused by weighted Reciprocal Rank Fusion: a sum of
weighted reciprocal ranks, which lets the walk's order win whatever its scores.
A claim that names one thing in passing ("... is related to anxiety prevalence")
is not a question about that thing: the walk from it does not lead. Otherwise
the legs' raw scores are fused by a convex combination of their min-max normalised values:
rank fusion gives a weak dense leg's rank
10 the same say as a strong lexical leg's rank 10, while the scores say how far
apart candidates are. Neither fused score is a confidence; quality.py judges that.
"""

import datetime

from .config import (
    BOOST_SCALE,
    CONVEX_WEIGHTS,
    GRAPH_LEADS_SHARE,
    LEG_WEIGHTS_WITH_ENTITIES,
    MODEL_CONVEX_WEIGHTS,
    RECENCY_DAYS,
    RRF_K,
)

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


def graph_leads(named_share):
    """Whether the graph walk leads the fusion of a query whose words naming
    entities the caller can reach hold `named_share` of its idf-weighted terms
    (0 when it names none)."""
    return named_share > 0 and named_share >= GRAPH_LEADS_SHARE


def leg_weights(leads, model_id=None):
    """Each leg's fusion weight: weighted RRF's when the graph walk leads (`leads`:
    graph_leads), else the convex combination's for the brain's model."""
    return LEG_WEIGHTS_WITH_ENTITIES if leads else _MODEL_CONVEX.get(model_id, CONVEX)


def fused(legs, raw, leads, model_id=None):
    """The legs fused as leg_weights says: weighted RRF when the graph walk leads,
    else the convex combination of normalised scores."""
    if leads:
        return fuse(legs, LEG_WEIGHTS_WITH_ENTITIES)
    return convex(legs, raw, leg_weights(False, model_id))


def method(leads):
    """'rrf' or 'convex': how a query's legs are fused."""
    return "rrf" if leads else "convex"


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
