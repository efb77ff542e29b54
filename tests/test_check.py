"""`check` and its repair, called from Python; ingest killed mid-write leaves
nothing half-written and converges when run again. The command
`sqlite-utils brain check` is tested in test_cli_check.py."""

import subprocess
import sys
from pathlib import Path

import pytest

import brain_sql
from brain_sql.pipeline import remember

from .conftest import rows
from .test_conversation import TURNS, quotes, transcript


@pytest.mark.slow
def test_killed_ingest_converges(tmp_path):
    """bench/crash.py with 3 kills; run it by hand for 20 or more."""
    script = Path(__file__).resolve().parent.parent / "bench" / "crash.py"
    result = subprocess.run(
        [sys.executable, str(script), "--kills", "2", "--records", "1500", "--work", str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kills, 0 failed" in result.stdout


@pytest.mark.parametrize("change", [
    "update knowledge set scope = '/b' where external_id = 'S1:3'",  # moved to another scope
    "update knowledge set metadata = json_set(metadata, '$.session_id', 'chat/2') where external_id = 'S1:3'",
    "delete from knowledge where external_id = 'S1:3'",
])  # fmt: skip
def test_quotes_of_a_turn_moved_or_deleted_with_plain_sql_are_found_and_dropped(conn, tmp_path, change):
    """The turns after a turn quote it in their contexts; a turn moved to another
    scope or session or deleted with plain SQL is no longer what they quote
    there, and a recall in their scope would find its old words."""
    brain_sql.ingest(conn, [transcript(tmp_path, [{**t, "scope": "/a"} for t in TURNS])])
    assert brain_sql.check(conn) == {}
    conn.execute(change)
    quoting = rows(conn, "select document_id from knowledge where external_id in ('S1:4', 'S1:5') order by 1")
    assert brain_sql.check(conn)["stale_quotes"][-2:] == [row[0] for row in quoting]
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert "support group" not in quotes(conn, "S1:4") + quotes(conn, "S1:5")
    assert quotes(conn, "S1:5").splitlines()[1:] == ["Melanie: What did the counsellor say about it?"]
    assert not rows(conn, "select k.external_id from knowledge_fts f join knowledge k on k.id = f.rowid "
                          "where knowledge_fts match 'powerful' and k.external_id in ('S1:4', 'S1:5')")  # fmt: skip


def test_a_turn_moved_to_another_scope_keeps_no_quote_of_its_old_one(conn, tmp_path):
    brain_sql.ingest(conn, [transcript(tmp_path, [{**t, "scope": "/a"} for t in TURNS])])
    conn.execute("update knowledge set scope = '/b' where external_id = 'S1:5'")
    moved = conn.execute("select document_id from knowledge where external_id = 'S1:5'").fetchone()[0]
    assert brain_sql.check(conn) == {"stale_quotes": [moved]}
    brain_sql.check(conn, repair=True)
    assert quotes(conn, "S1:5") == "Caroline, 8 May 2023"  # its own lines stay
    assert not rows(conn, "select k.external_id from knowledge_fts f join knowledge k on k.id = f.rowid "
                          "where knowledge_fts match 'counsellor' and k.scope = '/b'")  # fmt: skip


def test_contexts_as_ingest_writes_them_are_consistent(conn, tmp_path):
    """Long names and turns cut in quotes, time phrases, several lines, repeated
    words, a session over two scopes: check finds nothing to restate, until a
    turn quoting the same words twice is moved."""
    turns = [{"_id": "1", "text": "Yesterday was long.\nLast week too.", "speaker": "Today"},
             {"_id": "2", "text": "x " * 900, "speaker": "S" * 300},
             {"_id": "3", "text": "Thanks", "speaker": "Bo\nB"}, {"_id": "4", "text": "Thanks", "speaker": "Bo\nB"},
             {"_id": "5", "text": "Two days ago?", "speaker": "Al", "scope": "/x"},
             {"_id": "6", "text": "Thanks", "speaker": "Bo\nB"}, {"_id": "7", "text": "Ok.", "speaker": "Al"}]  # fmt: skip
    brain_sql.ingest(conn, [transcript(tmp_path, turns)])
    assert brain_sql.check(conn) == {}
    remember(conn, [{**turns[1], "text": "Shorter now.", "session_id": "chat/1"}])  # corrected: quoted as it is now
    brain_sql.flag(conn, [conn.execute("select id from knowledge where external_id = '3'").fetchone()[0]])
    assert brain_sql.check(conn) == {}
    # 7 quotes both of 4 and 6's "Thanks"; 2, rewritten after it, quotes 6 and 7
    conn.execute("update knowledge set scope = '/x' where external_id = '7'")
    stale = rows(conn, "select document_id from knowledge where external_id in ('2', '7') order by 1")
    assert brain_sql.check(conn) == {"stale_quotes": [row[0] for row in stale]}
    brain_sql.check(conn, repair=True)
    assert (quotes(conn, "7"), quotes(conn, "2").splitlines()[-2:]) == ("Al, 8 May 2023", ["Bo", "B: Thanks"])
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize("turn, corrected", [
    (0, "Hi Mel! Long time no see, how was the weekend?"),
    (2, "I stayed home and read all day."),  # its own context said "yesterday: 7 May 2023" too
])  # fmt: skip
def test_a_turn_whose_words_plain_sql_changed_is_quoted_as_it_is_now(tmp_path, turn, corrected):
    """A turn edited in place with plain SQL: check names the turns quoting its old
    words, and its own context when its time phrases are gone; repair quotes its
    new words, as correcting the turn through remember does, instead of dropping
    the quote, and reads its own time phrases again."""
    external_id, original = TURNS[turn]["_id"], f"{TURNS[turn]['speaker']}: {TURNS[turn]['text']}"
    contexts = []
    for way in ("sql", "remember"):
        conn = brain_sql.connect(tmp_path / f"{way}.db")
        brain_sql.ingest(conn, [transcript(tmp_path, TURNS)])
        if way == "sql":
            quoting = sorted(d for d, context in rows(conn, "select document_id, context from knowledge")
                             if f"\n{original}\n" in context + "\n")  # fmt: skip
            conn.execute("update knowledge set content = ? where external_id = ?", [corrected, external_id])
            found = brain_sql.check(conn)
            assert quoting and found["stale_quotes"] == quoting, found
            assert "unrepaired" not in brain_sql.check(conn, repair=True)
            assert brain_sql.check(conn) == {}
        else:
            remember(conn, [{**TURNS[turn], "text": corrected, "session_id": "chat/1",
                             "observed_at": "2023-05-08T13:56:00"}])  # fmt: skip
        contexts.append([quotes(conn, t["_id"]) for t in TURNS])
    # the turns after it, as remember leaves them (which quotes the turns stored last in the corrected turn's own)
    assert contexts[0][:turn] + contexts[0][turn + 1 :] == contexts[1][:turn] + contexts[1][turn + 1 :]
    assert f"{TURNS[turn]['speaker']}: {corrected}" in contexts[0][turn + 1].splitlines()
    before = [f"{t['speaker']}: {t['text']}" for t in TURNS[:turn]]
    assert contexts[0][turn].splitlines() == ["Caroline, 8 May 2023"] + before


def test_a_turn_whose_day_plain_sql_changed_is_said_on_its_new_day(conn, tmp_path):
    """A turn's context begins with its speaker and day and its time phrases read
    against that day: when plain SQL moves the turn to another day, check names
    it and repair restates them (a turn whose record named no day keeps none)."""
    brain_sql.ingest(conn, [transcript(tmp_path)])
    remember(conn, [{"_id": "S2:1", "text": "Morning all.", "speaker": "Ann", "session_id": "chat/2"}])
    conn.execute("update knowledge set observed_at = '2024-01-10 09:00:00' where external_id = 'S1:3'")
    moved = conn.execute("select document_id from knowledge where external_id = 'S1:3'").fetchone()[0]
    assert brain_sql.check(conn)["stale_own_lines"] == [moved]
    brain_sql.check(conn, repair=True)
    assert brain_sql.check(conn) == {}
    assert quotes(conn, "S1:3").splitlines() == [
        "Caroline, 10 January 2024", "yesterday: 9 January 2024",
        f"Caroline: {TURNS[0]['text']}", f"Melanie: {TURNS[1]['text']}",
    ]  # fmt: skip
    assert quotes(conn, "S2:1") == "Ann"
    hits = brain_sql.recall(conn, {"q": "support group 9 January 2024", "k": 1, "cutoff": False})["hits"]
    assert hits[0]["external_id"] == "S1:3"
