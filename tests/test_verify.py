"""Literal support of a claim by a text, with the ranges where it stands."""

import pytest

from brain_sql.claims import verify


def ranges(claim, text):
    return verify(claim, text)["match_ranges"]


def test_supported_claim_reports_its_decision_and_range():
    text = "The pager alerts the on-call engineer."
    assert verify("pager alerts", text) == {"supported": True, "decision": "supported", "match_ranges": [[4, 16]]}


def test_unsupported_claim_has_no_ranges():
    assert verify("pager sleeps", "The pager alerts.") == {
        "supported": False,
        "decision": "unsupported",
        "match_ranges": [],
    }


def test_match_is_case_insensitive_and_ranges_index_the_text():
    text = "first PAGER Alerts, then pager alerts"
    found = ranges("Pager ALERTS", text)
    assert found == [[6, 18], [25, 37]]
    assert [text[start:end].lower() for start, end in found] == ["pager alerts", "pager alerts"]


def test_any_whitespace_between_words_matches():
    text = "the pager\n\t  alerts"
    assert ranges("pager   alerts", text) == [[4, len(text)]]


def test_words_must_be_separated_by_whitespace_in_the_text():
    assert not verify("pager alerts", "pageralerts")["supported"]


def test_punctuation_at_the_edges_of_the_claim_is_ignored():
    assert ranges('  "(Pager alerts!)."  ', "the pager alerts engineers") == [[4, 16]]


def test_punctuation_inside_the_claim_must_match():
    assert verify("pager, alerts", "pager, alerts")["supported"]
    assert not verify("pager, alerts", "pager alerts")["supported"]


@pytest.mark.parametrize("claim", ["a.b", "x+y", "f(x)*2", "a[0-9]b", "$5 ^up"])
def test_regex_metacharacters_are_literal(claim):
    assert ranges(claim, f"see {claim} here") == [[4, 4 + len(claim)]]
    assert not verify(claim, "see axb xxy fx2 a5b $ up here")["supported"]


@pytest.mark.parametrize("claim", ["", "   ", None, ".,!?", "()"])
def test_empty_claim_is_unsupported(claim):
    assert verify(claim, "anything at all . , ! ? ()") == {
        "supported": False,
        "decision": "unsupported",
        "match_ranges": [],
    }


@pytest.mark.parametrize("text", ["", None])
def test_empty_text_supports_nothing(text):
    assert verify("pager", text)["supported"] is False
