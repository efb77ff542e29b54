"""Fusion: weighted reciprocal ranks (RRF) or a convex combination of normalised scores, ranks kept per leg."""

import pytest

from brain_sql.config import RRF_K
from brain_sql.fusion import convex, fuse, rrf


def test_rrf_is_weight_over_k_plus_rank():
    assert rrf(1) == pytest.approx(1 / (RRF_K + 1))
    assert rrf(3, k=10, weight=2.0) == pytest.approx(2 / 13)


def test_fuse_sums_legs_and_records_each_rank():
    fused = fuse({"fts": ["a", "b"], "vector": ["b", "c"]}, {})
    assert fused == [
        ("b", pytest.approx(rrf(2) + rrf(1)), {"fts": 2, "vector": 1}),
        ("a", pytest.approx(rrf(1)), {"fts": 1}),
        ("c", pytest.approx(rrf(2)), {"vector": 2}),
    ]


def test_weights_scale_a_legs_contribution():
    fused = fuse({"fts": ["a"], "graph": ["b"]}, {"fts": 1.0, "graph": 10.0}, k=1)
    assert [(item, score) for item, score, _ in fused] == [("b", pytest.approx(5.0)), ("a", pytest.approx(0.5))]


def test_legs_without_a_weight_count_as_weight_one():
    assert fuse({"other": ["a"]}, {"fts": 5.0}, k=1)[0][1] == pytest.approx(0.5)


def test_ties_are_broken_by_id():
    assert [item for item, _, _ in fuse({"x": ["b", "d"], "y": ["a", "c"]}, {})] == ["a", "b", "c", "d"]
    assert [item for item, _, _ in fuse({"x": [3], "y": [1], "z": [2]}, {})] == [1, 2, 3]


def test_zero_weight_leg_records_ranks_but_adds_no_score():
    fused = fuse({"fts": ["a", "b"], "prf": ["b", "a"]}, {"prf": 0})
    assert fused == [
        ("a", pytest.approx(rrf(1)), {"fts": 1, "prf": 2}),
        ("b", pytest.approx(rrf(2)), {"fts": 2, "prf": 1}),
    ]


def test_zero_weight_leg_alone_brings_in_no_items():
    assert fuse({"fts": ["a"], "prf": ["z"]}, {"prf": 0.0}) == [("a", pytest.approx(rrf(1)), {"fts": 1})]


def test_no_legs_fuse_to_nothing():
    assert fuse({}, {}) == []
    assert fuse({"fts": []}, {}) == []


def test_the_graph_leads_only_when_the_query_names_entities():
    from brain_sql.config import CONVEX_WEIGHTS, LEG_WEIGHTS_WITH_ENTITIES
    from brain_sql.fusion import leg_weights, method

    assert (leg_weights(True), method(True)) == (LEG_WEIGHTS_WITH_ENTITIES, "rrf")
    assert method(False) == "convex" and sum(leg_weights(False).values()) == pytest.approx(1.0)
    assert leg_weights(False)["vector"] / leg_weights(False)["fts"] == pytest.approx(
        CONVEX_WEIGHTS["vector"] / CONVEX_WEIGHTS["fts"]
    )
    assert leg_weights(True)["graph"] > leg_weights(True)["fts"]
    assert leg_weights(False)["fts"] > leg_weights(False)["vector"] > 0


def test_convex_fusion_weighs_how_far_apart_scores_are_not_only_their_order():
    """Rank fusion gives a leg's second candidate its full reciprocal rank however
    far behind the first it is; the convex combination of min-max normalised scores
    gives it what its score is worth."""
    legs = {"vector": ["a", "b"], "fts": ["b", "c", "a"]}
    raw = {"vector": {"a": 0.9, "b": 0.1}, "fts": {"b": 10.0, "c": 9.0, "a": 1.0}}
    fused = convex(legs, raw, {"vector": 0.3, "fts": 0.7})
    assert [(item, round(score, 6)) for item, score, _ in fused] == [("b", 0.7), ("c", 0.622222), ("a", 0.3)]
    assert fused[0][2] == {"vector": 2, "fts": 1}  # every leg's rank kept for provenance
    # a leg without weight ranks nothing, but its candidates keep their ranks
    fused = convex({"fts": ["a"], "graph": ["z"]}, {"fts": {"a": 2.0}, "graph": {"z": 5.0}}, {"fts": 1.0})
    assert fused == [("a", 1.0, {"fts": 1}), ("z", 0.0, {"graph": 1})]
    # equal scores all normalise to 1; ties fall back on the id
    fused = convex({"fts": ["y", "x"]}, {"fts": {"y": 3.0, "x": 3.0}}, {"fts": 1.0})
    assert [(item, score) for item, score, _ in fused] == [("x", 1.0), ("y", 1.0)]


def test_a_stronger_dense_model_gets_its_own_weights():
    from brain_sql.config import MINILM_MODEL
    from brain_sql.fusion import leg_weights

    default, minilm = leg_weights(False), leg_weights(False, MINILM_MODEL)
    assert minilm["vector"] > default["vector"] and sum(minilm.values()) == pytest.approx(1.0)
    assert leg_weights(False, "some/other-model") == default
    assert leg_weights(True, MINILM_MODEL) == leg_weights(True)  # the graph leads alike
