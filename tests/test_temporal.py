"""Date phrases in a query resolved into a since/until window against a fixed now."""

import datetime

import pytest

from brain_sql import temporal
from brain_sql.fields import time_zone
from brain_sql.temporal import extract

NOW = datetime.datetime(2026, 11, 29, 12, 0, 0)  # a Sunday


@pytest.mark.parametrize(
    "query, since, until, rest",
    [
        ("pager last week", "2026-11-22 12:00:00", None, "pager"),
        ("LAST WEEK", "2026-11-22 12:00:00", None, ""),
        ("past year", "2025-11-29 12:00:00", None, ""),
        ("in the last month", "2026-10-30 12:00:00", None, ""),
        ("last 3 days", "2026-11-26 12:00:00", None, ""),
        ("in the past 2 weeks deploys", "2026-11-15 12:00:00", None, "deploys"),
        ("yesterday deploy", "2026-11-28 00:00:00", "2026-11-29 00:00:00", "deploy"),
        ("what happened today", "2026-11-29 00:00:00", "2026-11-30 00:00:00", "what happened"),
        ("this week", "2026-11-23 00:00:00", None, ""),
        ("this month", "2026-11-01 00:00:00", None, ""),
        ("this year", "2026-01-01 00:00:00", None, ""),
    ],
)
def test_relative_phrases_resolve_against_now(query, since, until, rest):
    assert extract(query, NOW) == (since, until, rest)


@pytest.mark.parametrize(
    "query, since, until, rest",
    [
        ("since March 2026 outage", "2026-03-01 00:00:00", None, "outage"),
        ("after march", "2026-03-01 00:00:00", None, ""),
        ("since 5 March 2026", "2026-03-05 00:00:00", None, ""),
        ("since March 5th, 2026", "2026-03-05 00:00:00", None, ""),
        ("since Jan. 2026", "2026-01-01 00:00:00", None, ""),
        ("before 2026-01-05 rollout", None, "2026-01-05 00:00:00", "rollout"),
        ("until 2026-03-01T09:30 x", None, "2026-03-01 09:30:00", "x"),
        ("till 2026-01-05 10:30 x", None, "2026-01-05 10:30:00", "x"),
        ("since March 2026 before 2026-06-01", "2026-03-01 00:00:00", "2026-06-01 00:00:00", ""),
    ],
)
def test_since_and_until_take_the_start_of_the_named_date(query, since, until, rest):
    assert extract(query, NOW) == (since, until, rest)


@pytest.mark.parametrize(
    "query, since, until",
    [
        ("alerts in May", "2026-05-01 00:00:00", "2026-06-01 00:00:00"),
        ("during Sept 2025", "2025-09-01 00:00:00", "2025-10-01 00:00:00"),
        ("in November", "2026-11-01 00:00:00", "2026-12-01 00:00:00"),
        # the latest December that has begun is last year's; its window crosses the year
        ("in December", "2025-12-01 00:00:00", "2026-01-01 00:00:00"),
    ],
)
def test_in_a_month_is_that_whole_month(query, since, until):
    assert extract(query, NOW)[:2] == (since, until)


@pytest.mark.parametrize(
    "query",
    [
        "released in 2005",  # a bare year is content, not a filter
        "in may be broken",  # lowercase "may" is not the month
        "since February 31 x",  # no such date
        "after 2026-02-30",
        "last 5000 years",  # before year 1
        "pager alert",
    ],
)
def test_text_without_a_valid_window_is_left_alone(query):
    assert extract(query, NOW) == (None, None, query)


def test_removing_a_phrase_collapses_the_whitespace_around_it():
    assert extract("pager   since March 2026   outage", NOW)[2] == "pager outage"


ASKED = datetime.datetime(2026, 12, 6, 4, 0, 0)  # 20:00 on Saturday 5 December in California, in UTC


@pytest.mark.parametrize(
    "zone, query, since, until",
    [
        # docs/recall.md's example: California's yesterday, given in UTC
        ("America/Los_Angeles", "yesterday", "2026-12-04 08:00:00", "2026-12-05 08:00:00"),
        ("-08:00", "yesterday", "2026-12-04 08:00:00", "2026-12-05 08:00:00"),
        (None, "yesterday", "2026-12-05 00:00:00", "2026-12-06 00:00:00"),
        ("UTC", "yesterday", "2026-12-05 00:00:00", "2026-12-06 00:00:00"),
        ("America/Los_Angeles", "today", "2026-12-05 08:00:00", "2026-12-06 08:00:00"),
        ("America/Los_Angeles", "this week", "2026-11-30 08:00:00", None),  # Monday there
        ("+05:30", "today", "2026-12-05 18:30:00", "2026-12-06 18:30:00"),
        # a named zone keeps each bound's own offset: Paris is +02:00 in May, +01:00 in March
        ("Europe/Paris", "in May", "2026-04-30 22:00:00", "2026-05-31 22:00:00"),
        ("Europe/Paris", "since 5 March 2026", "2026-03-04 23:00:00", None),
        ("Europe/Paris", "before 2026-06-01T10:00", None, "2026-06-01 08:00:00"),
        # a span back from now is the same span wherever it is asked
        ("America/Los_Angeles", "last 3 days", "2026-12-03 04:00:00", None),
    ],
)
def test_the_phrases_name_the_asker_s_days(zone, query, since, until):
    tzinfo = time_zone(zone)[1] if zone else None
    assert extract(query, ASKED, zone=tzinfo) == (since, until, "")


def test_a_day_begins_at_its_first_midnight_where_clocks_go_back_at_midnight():
    """Havana puts its clocks back from 01:00 to 00:00 on 1 November 2026: asked in the
    hour said twice, today began at the first midnight (04:00 UTC), not the second."""
    havana = time_zone("America/Havana")[1]
    for asked in (datetime.datetime(2026, 11, 1, 4, 30), datetime.datetime(2026, 11, 1, 5, 30)):
        assert extract("today", asked, zone=havana)[:2] == ("2026-11-01 04:00:00", "2026-11-02 05:00:00")
        assert extract("yesterday", asked, zone=havana)[:2] == ("2026-10-31 04:00:00", "2026-11-01 04:00:00")


def test_a_span_back_from_now_is_as_long_across_a_change_of_clocks():
    """California put its clocks forward on 8 March 2026: the last 3 days are 72 hours."""
    asked = datetime.datetime(2026, 3, 10, 19, 0)
    assert extract("last 3 days", asked, zone=time_zone("America/Los_Angeles")[1])[0] == "2026-03-07 19:00:00"


def test_a_month_without_its_year_looks_for_memories_in_utc_times():
    """covered is asked in UTC, as memories are stored; the window found is given in UTC."""
    asked = []

    def covered(since, until):
        asked.append((since, until))
        return since == "2024-05-31 22:00:00"

    paris = time_zone("Europe/Paris")[1]
    assert extract("hikes in June", ASKED, covered, paris) == ("2024-05-31 22:00:00", "2024-06-30 22:00:00", "hikes")
    assert asked[0] == ("2026-05-31 22:00:00", "2026-06-30 22:00:00")


@pytest.mark.parametrize(
    "query, now, zone",
    [
        (
            "today",
            datetime.datetime(9999, 12, 31, 23, 0),
            "+14:00",
        ),  # past the calendar's end there (UTC's today ends so)
        ("since 1 January 0001", NOW, "+05:00"),  # before its start in UTC
        ("since 31 December 9999", NOW, "-10:00"),
    ],
)
def test_at_the_calendar_s_ends_a_window_in_a_zone_is_left_as_text(query, now, zone):
    """A window no UTC time can hold is not applied (nor raised): its phrase stays text."""
    assert extract(query, now, zone=time_zone(zone)[1]) == (None, None, query)


@pytest.mark.parametrize(
    "text, says",
    [
        ("We went camping two weekends ago.", True),
        ("I went to a support group yesterday.", True),
        ("Last Fri I finally took my kids to a pottery workshop.", True),
        ("I've known these friends for 4 years.", True),
        ("We married in 2017.", True),
        ("We went in June, on 7 May and again on March 3rd.", True),
        ("I may go to the lake, in may be.", False),
        ("Painting's a fun way to express my feelings.", False),
    ],
)
def test_a_text_states_a_time_when_it_says_when_or_for_how_long(text, says):
    assert temporal.states_time(text) is says


@pytest.mark.parametrize(
    "question, asks",
    [
        ("When did Caroline go to the support group?", True),
        ("How long has Melanie been creating art?", True),
        ("What year did they marry?", True),
        ("What did Caroline research?", False),
        ("Where does whenever live?", False),
    ],
)
def test_a_question_asks_when_it_asks_for_a_time(question, asks):
    assert temporal.asks_when(question) is asks


@pytest.mark.parametrize(
    "text, lines",
    [
        # said on Monday 8 May 2023
        ("We met the day before yesterday.", ["the day before yesterday: 6 May 2023"]),
        ("Day after tomorrow we fly.", ["day after tomorrow: 10 May 2023"]),
        (
            "The day before the day before yesterday, and the day after the day after tomorrow.",
            [
                "the day before the day before yesterday: 5 May 2023",
                "the day after the day after tomorrow: 11 May 2023",
            ],
        ),
        (
            "Yesterday I rested; two weekends ago we camped.",
            ["yesterday: 7 May 2023", "two weekends ago: the weekend of 29 April 2023"],
        ),
        ("Last Friday I painted, last Monday I ran.", ["last friday: 5 May 2023", "last monday: 1 May 2023"]),
        ("We met last\nweek.", ["last week: the week of 1 May 2023"]),  # one line, however spaced
        ("Last  night, a couple\nof weeks ago", ["last night: 8 May 2023", "a couple of weeks ago: 24 April 2023"]),
        # not a day said relative to this one (review 65)
        ("We meet the last Friday of every month, the last Sunday in May.", []),
        ("The last week of June was the last month of term.", []),
        ("0 weekends ago", []),
        ("TONİGHT, last FRİDAY", []),  # lowercased, "toni̇ght": a line check could not read back
    ],
)
def test_a_turn_s_relative_days_are_read_against_the_day_it_was_said(text, lines):
    """ "The day before yesterday" is two days back, not yesterday (review 63), "two
    weekends ago" the weekend before last, "last Friday" the latest Friday before."""
    assert temporal.resolve_relative(text, datetime.datetime(2023, 5, 8, 13, 56), 5) == lines
