"""No oracle for hidden rows: the same request gets the same answer — decision,
quality and its signals, hits and their order, provenance, telemetry but for
timings — whether or not rows it cannot see exist (another scope, flagged rows),
through the API and through the SQL recall."""

import json

import pytest

import brain_sql
from brain_sql import RECALL_SQL

from .conftest import close_brain, replica_of, write

NOW = "2026-11-29 12:00:00"
# observed at a set time: two brains built a second apart tell nothing apart but what they hold
PUBLIC = "---\nscope: /b/public\nobserved_at: 2026-11-01 09:00:00\n---\n"
SECRET = "---\nscope: /a/secret\nobserved_at: 2026-11-01 09:00:00\n---\n"

PUBLIC_NOTES = {
    "Orion.md": PUBLIC + "# Orion\n\nOrion is our pager vendor. The support team staff page Orion for escalations. "
    "[[uses::Pager]]\n",
    "Pager.md": PUBLIC + "# Pager\n\nThe pager rota is kept by the support team. Staff swap shifts on Fridays.\n",
    "Escalation.md": PUBLIC + "# Escalation\n\nSev1 escalations go to the on-call lead; the lead calls Orion.\n\n"
    "## Handover\n\nThe handover note lists open pages and the vendor tickets.\n",
    "Rota.md": PUBLIC + "# Rota\n\nThe weekly rota names one lead and two staff for the support desk.\n",
}
SECRET_NOTES = {
    "Orion contract.md": SECRET + "# Orion contract\n\nThe Orion contract renews in May; zebrafish clause 7 "
    "caps the support team staff fees. [[part_of::Orion]] [[uses::Pager]]\n",
    "Staff.md": SECRET + "# Staff\n\n" + "Support team staff salaries, staff bonuses, staff reviews. " * 5 + "\n",
    "Zebrafish.md": (
        "---\nscope: /a/secret\nobserved_at: 2026-11-01 09:00:00\naliases: [Pager]\n---\n# Zebrafish\n\nZebrafish is "
        "the code name of the pager "
        "replacement; the support team staff have not been told.\n"
    ),
}
FLAGGED = {
    "Leak.md": PUBLIC + "# Leak\n\nThe zebrafish escalation pager password is hunter2; support team staff "
    "must rotate it. Orion contract Pager Orion.\n"
}
QUERIES = [
    {"q": "support team staff"},
    {"q": "zebrafish pager"},
    {"q": "What do we know about the Orion contract?"},
    {"q": "Who does the support lead escalate to?", "prf": True, "mmr": True},
    {"q": '"support team" -Orion rota'},
    {"q": "pager vendor", "provenance": True, "k": 3},
    {"q": "Orion"},
]


def build(folder, hidden):
    """A brain holding the public notes; with `hidden`, also secret notes written
    before and after them (so ids interleave) and a flagged public note."""
    conn = brain_sql.connect(folder / "brain.db")

    def ingest(notes, name):
        for file, text in notes.items():
            write(folder / name / file, text)
        report = brain_sql.ingest(conn, [folder / name])
        assert not report.errors, report.errors

    if hidden:
        ingest(dict(list(SECRET_NOTES.items())[:1]), "secret-first")
    ingest(PUBLIC_NOTES, "public")
    if hidden:
        ingest(dict(list(SECRET_NOTES.items())[1:]), "secret-later")
        ingest(FLAGGED, "flagged")
        with conn:
            conn.execute("update knowledge set flagged = 1 where title = 'Leak'")
    return conn


@pytest.fixture(scope="module", params=["primary", "replica"])
def brains(request, tmp_path_factory):
    """The quiet and the crowded brain; or replicas of them, read as a replica reads."""
    built = [(tmp_path_factory.mktemp(name), hidden) for name, hidden in (("quiet", False), ("crowded", True))]
    conns = [build(folder, hidden) for folder, hidden in built]
    if request.param == "primary":
        return conns
    for conn in conns:
        close_brain(conn)
    return [brain_sql.connect(replica_of(folder / "brain.db", folder)) for folder, _ in built]


def comparable(conn, result):
    """The result with row ids as the rows they name, and timings left out."""
    names = {row[0]: row[1:] for row in conn.execute("select id, title, heading_path, content from knowledge")}
    hits = [{**h, "id": names[h["id"]], "document_id": None, "source_path": None} for h in result["hits"]]
    telemetry = {k: v for k, v in result["telemetry"].items() if not k.endswith("_ms")}
    return {**result, "hits": hits, "telemetry": telemetry}


@pytest.mark.parametrize("query", QUERIES, ids=[q["q"] for q in QUERIES])
def test_hidden_rows_change_nothing_a_caller_is_told(brains, query):
    quiet, crowded = brains
    doc = {**query, "scope": "/b/public", "now": NOW, "provenance": query.get("provenance", True)}
    seen = [comparable(conn, brain_sql.recall(conn, doc)) for conn in brains]
    assert seen[0] == seen[1]
    # the crowded brain's hidden rows are there to be found by whoever may see them
    assert brain_sql.recall(crowded, {**doc, "scope": "/a/secret"}) != brain_sql.recall(
        quiet, {**doc, "scope": "/a/secret"}
    )


@pytest.mark.parametrize("query", QUERIES, ids=[q["q"] for q in QUERIES])
def test_the_sql_recall_is_as_blind(brains, query):
    params = {
        "q": query["q"],
        "k": 10,
        "scope": "/b/public",
        "classes": "",
        "sources": "",
        "domain": "",
        "since": "",
        "until": "",
        "as_of": "",
    }
    found = []
    for conn in brains:
        names = {row[0]: row[1:] for row in conn.execute("select id, title, heading_path from knowledge")}
        found.append([(names[row[0]], *row[2:6]) for row in conn.execute(RECALL_SQL, params)])
    assert found[0] == found[1]


def test_the_example_the_issue_gave(brains):
    """known, decision and the common-word cut for words only hidden rows hold."""
    quiet, crowded = brains
    for conn in brains:
        result = brain_sql.recall(conn, {"q": "zebrafish", "scope": "/b/public", "now": NOW})
        assert result["quality"]["signals"]["known"] == 0.0
        assert result["decision"] == "low_confidence"
    fts = brain_sql.recall(crowded, {"q": "support team staff", "scope": "/b/public", "now": NOW, "provenance": True})
    assert all(h["provenance"]["fts_bm25"] is not None for h in fts["hits"][:1])


def test_with_nothing_hidden_the_lexical_leg_is_fts5s_bm25(brains):
    """The reach's own BM25 is FTS5's to the bit when nothing is hidden."""
    from brain_sql import bm25, lexical
    from brain_sql.reach import Reach
    from brain_sql.schema import fts_length

    quiet, _ = brains
    rows = quiet.execute("select id, sz from knowledge_fts_docsize").fetchall()
    reach = Reach([r[0] for r in rows], [fts_length(r[1]) for r in rows])  # not marked complete: computed here
    for q in ["support team staff", '"support team" -Orion', "pager vendor escalations", "Orion/pager.rs"]:
        match = lexical.plan(q)
        ours = bm25.search(bm25.TermStats(quiet, reach), match)
        theirs = quiet.execute(
            (
                "select rowid, bm25(knowledge_fts, 3.0, 1.0) s from knowledge_fts where knowledge_fts match ? order "
                "by s, rowid"
            ),
            [match.expression()],
        ).fetchall()
        assert ours == [tuple(r) for r in theirs], q


def test_a_required_phrase_and_an_exclusion_score_alike(tmp_path):
    """FTS5's own bm25 may leave out instances after AND and NOT (an earlier row
    holding a required phrase's words apart): such queries are scored here
    whether or not anything is hidden, so a hidden row changes nothing."""
    rows = [
        {"_id": "a", "title": "First", "text": "audit x support"},
        {"_id": "b", "title": "Second", "text": "invoice audit support"},
    ]
    rows += [{"_id": f"f{i}", "title": f"Filler {i}", "text": f"filler words number {i} nothing"} for i in range(8)]
    hidden = {"_id": "h", "title": "Secret", "text": "unrelated secret words", "scope": "/a/secret"}
    answers = []
    for name, extra in (("quiet", []), ("crowded", [hidden])):
        path = write(tmp_path / name / "r.jsonl", "\n".join(json.dumps({"scope": "/b", **r}) for r in rows + extra))
        conn = brain_sql.connect(tmp_path / name / "brain.db")
        brain_sql.ingest(conn, [path])
        result = brain_sql.recall(conn, {"q": 'invoice "audit support" -vendor', "scope": "/b", "now": NOW})
        answers.append([(h["title"], h["provenance"]["fts_bm25"]) for h in result["hits"]])
    assert answers[0] == answers[1] and answers[0]


CHAT = [
    ("c1", "Caroline", "I went to a support group yesterday and it was so powerful."),
    ("c2", "Melanie", "That is great! I painted a sunrise at the lake last week."),
    ("c3", "Caroline", "I am researching adoption agencies for my family."),
    ("c4", "Melanie", "We went camping with the kids, they loved the hike."),
]
CHAT_QUESTIONS = [
    "When did Melanie paint a sunrise?",
    "What did Caroline research?",
    "What did Melanie do with her kids?",
    "When did Caroline go to the support group?",
]


def chat_brain(folder, hidden):
    """A conversation in /chat; with `hidden`, stored before it in /secret: a note
    titled as its session (its entity then a document's) and a turn by MELANIE (the
    entity's name then written so)."""
    folder.mkdir()
    conn = brain_sql.connect(folder / "brain.db")
    turn = {"session_id": "chat/1", "observed_at": "2023-05-08T13:56:00", "scope": "/chat"}
    if hidden:
        secret = {"scope": "/secret", "observed_at": "2023-05-08T13:56:00"}
        brain_sql.remember(conn, [{**secret, "_id": "n", "title": "chat/1", "text": "Minutes of the board."}])
        brain_sql.remember(conn, [{**secret, "_id": "s", "speaker": "MELANIE", "session_id": "x", "text": "Hello."}])
    brain_sql.remember(conn, [{**turn, "_id": key, "speaker": who, "text": text} for key, who, text in CHAT])
    return conn


@pytest.mark.parametrize("question", CHAT_QUESTIONS)
def test_hidden_rows_rank_no_conversation_otherwise(tmp_path, question):
    """Review 52: a session is its turns' in_session edges whatever claimed its entity,
    and a speaker is named as the turns the caller reads name it: a note in another
    scope titled as the session (which made its entity a document's) switched the
    dialogue ranking off, and a hidden turn by MELANIE (the entity's name then written
    so) took the `speaker` signal away, through the API and the SQL recall alike."""
    brains = [chat_brain(tmp_path / name, hidden) for name, hidden in (("quiet", False), ("crowded", True))]
    doc = {"q": question, "scope": "/chat", "now": NOW, "provenance": True}
    seen = [comparable(conn, brain_sql.recall(conn, doc)) for conn in brains]
    assert seen[0] == seen[1]
    assert seen[0]["quality"]["signals"]["speaker"] == 1.0 and seen[0]["hits"]
    params = dict.fromkeys(("classes", "sources", "domain", "since", "until", "as_of"), "")
    params |= {"q": question, "k": 10, "scope": "/chat"}
    found = []
    for conn in brains:
        names = dict(conn.execute("select id, external_id from knowledge"))
        found.append([(names[row[0]], *row[2:6]) for row in conn.execute(RECALL_SQL, params)])
    assert found[0] == found[1] and found[0]
