"""Reciprocal Rank Fusion: ranks in, a fused order out. The fused score is a sum
of weighted reciprocal ranks, not a confidence; quality.py judges confidence."""

from .config import LEG_WEIGHTS_WITH_ENTITIES, LEG_WEIGHTS_WITHOUT_ENTITIES, RRF_K


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
    ordered = sorted(scores, key=lambda item: (-scores[item], item))
    return [(item, scores[item], ranks[item]) for item in ordered]


def leg_weights(names_entities):
    """Each leg's fusion weight: the graph walk leads when the query names entities
    the caller can reach (multi-hop questions); otherwise lexical evidence does."""
    return LEG_WEIGHTS_WITH_ENTITIES if names_entities else LEG_WEIGHTS_WITHOUT_ENTITIES
