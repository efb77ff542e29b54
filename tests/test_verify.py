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


def regex_ranges(claim, text):
    """What the claim's words joined by `\\s+` find with re.IGNORECASE: the definition."""
    import re

    words = claim.strip(" \t\r\n.,;:!?\"'()[]{}").split()
    if not words or not text:
        return []
    pattern = re.compile(r"\s+".join(re.escape(w) for w in words), re.IGNORECASE)
    return [[m.start(), m.end()] for m in pattern.finditer(text)]


# letters whose cases re pairs oddly (ſ and s, ı and i, K and the Kelvin sign, µ and μ,
# İ and i, ß), whitespace of every kind, a lone surrogate and plain letters
ALPHABET = "aAbBsSſıiIİKkKµμΜßẞ \t\n\u00a0\u2003\u2028\x1c\x85.,\udc80"


@pytest.mark.parametrize("seed", range(6))
def test_occurrences_are_those_a_case_blind_regex_finds(seed):
    """The linear search finds what re.finditer of the words joined by \\s+ finds, with
    re.IGNORECASE's own case rules, in every kind of whitespace."""
    import random

    rng = random.Random(seed)
    for _ in range(3000):
        text = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 40)))
        claim = "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(0, 8)))
        if rng.random() < 0.3 and len(text) > 2:  # a claim cut from the text, in other cases
            a = rng.randrange(len(text))
            claim = text[a : a + rng.randrange(1, 8)].swapcase()
        assert ranges(claim, text) == regex_ranges(claim, text), (claim, text)


def test_a_long_claim_against_a_long_text_is_searched_once():
    """A claim of 2,000 characters against a text of a million, where a regex retries
    the claim at every place (seconds, review 87): the same answer, found by one pass."""
    text = "x" * 1_000_000
    assert ranges("x" * 1999 + "y", text) == []
    assert ranges("x" * 2000, text) == [[i, i + 2000] for i in range(0, 1_000_000 - 1999, 2000)]
    words = "a b " * 250_000
    assert ranges("a b " * 499 + "c", words) == []
    assert ranges("A  B", words)[:2] == [[0, 3], [4, 7]]
