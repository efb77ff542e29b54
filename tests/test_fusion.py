"""Reciprocal Rank Fusion: weighted reciprocal ranks summed, ranks kept per leg."""

import pytest

from brain_sql.config import RRF_K
from brain_sql.fusion import fuse, rrf


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
    from brain_sql.config import LEG_WEIGHTS_WITH_ENTITIES, LEG_WEIGHTS_WITHOUT_ENTITIES
    from brain_sql.fusion import leg_weights

    assert leg_weights(True) == LEG_WEIGHTS_WITH_ENTITIES
    assert leg_weights(False) == LEG_WEIGHTS_WITHOUT_ENTITIES
    assert leg_weights(True)["graph"] > leg_weights(True)["fts"]
    assert leg_weights(False)["fts"] >= leg_weights(False)["graph"]
