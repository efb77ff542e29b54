"""Property tests: hostile QueryDocs through HTTP get 200 or 400, never a 500;
hostile notes and records never crash ingest nor corrupt the file; scopes and
flags hold in every leg for any query; a hostile decision posted from the
decayed page writes nothing unless it is done whole."""

import asyncio
import json
import re
import string
from urllib.parse import parse_qsl, quote, urlsplit

import pytest
from click.testing import CliRunner
from datasette.app import Datasette
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlite_utils.cli import cli

import brain_sql
from brain_sql.consistency import check
from brain_sql.errors import QueryError
from brain_sql.hybrid import run_legs
from brain_sql.querydoc import parse

from .conftest import copy_brain, rows, warmed, write

NOW = "2026-11-29 12:00:00"
FTS_SYNTAX = st.sampled_from(['"', "-", "*", "^", "(", ")", ":", "NEAR", "AND", "OR", "NOT", "{", "}", "+", "\\", "'"])
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=60)
QUERY_TEXT = st.lists(
    st.one_of(TEXT, FTS_SYNTAX, st.sampled_from(["pager", "graph leg", "src/main.rs"])), max_size=6
).map(" ".join)
JSON_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(TEXT, children, max_size=3),
    max_leaves=6,
)
FIELDS = [
    "q",
    "k",
    "sources",
    "source",
    "classes",
    "scope",
    "domain",
    "since",
    "until",
    "now",
    "as_of",
    "min_relevance",
    "include_decayed",
    "graph",
    "provenance",
    "prf",
    "mmr",
    "mmr_lambda",
    "max_tokens",
    "cutoff",
    "colour",
    "query",
]
QUERYDOC = st.dictionaries(st.sampled_from(FIELDS), JSON_VALUE, max_size=6).flatmap(
    lambda doc: st.one_of(st.just(doc), QUERY_TEXT.map(lambda q: {**doc, "q": q}))
)


@pytest.fixture(scope="module")
def datasette(vault_brain_path):
    return Datasette([str(vault_brain_path)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=QUERYDOC)
def test_any_querydoc_gets_200_or_400(datasette, doc):
    async def both():
        posted = await datasette.client.post("/brain/-/recall", json=doc)
        params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in doc.items()}
        got = await datasette.client.get("/brain/-/recall", params=params)
        return posted, got

    for response in asyncio.run(both()):
        assert response.status_code in (200, 400), response.text
        body = response.json()
        if response.status_code == 400:
            assert body["ok"] is False and body["error"]
        else:
            assert body["decision"] in ("ok", "low_confidence")
            # an explained answer: the request as run, why it is empty, each hit's relevance
            assert body["query"]["k"] >= len(body["hits"]) and (body["reason"] is None) == bool(body["hits"])
            assert all(0 <= hit["relevance"] <= 1 for hit in body["hits"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    frontmatter=st.one_of(st.none(), TEXT, st.dictionaries(TEXT, JSON_VALUE, max_size=4).map(json.dumps)),
    body=st.lists(
        st.one_of(TEXT, st.sampled_from(["# H", "## H2", "[[a::b]]", "[[x|y]]", "```", "- item", "\n\n"])), max_size=12
    ).map("\n".join),
    records=st.lists(
        st.one_of(
            JSON_VALUE,
            st.fixed_dictionaries(
                {"text": TEXT},
                optional={
                    "title": TEXT,
                    "scope": TEXT,
                    "tags": JSON_VALUE,
                    "relations": JSON_VALUE,
                    "entities": JSON_VALUE,
                },
            ),
        ),
        max_size=5,
    ),
)
def test_hostile_notes_and_records_never_crash_or_corrupt(tmp_path_factory, frontmatter, body, records):
    folder = tmp_path_factory.mktemp("hostile")
    note = (f"---\n{frontmatter}\n---\n" if frontmatter is not None else "") + body
    write(folder / "in" / "note.md", note)
    write(folder / "in" / "records.jsonl", "\n".join(json.dumps(r) for r in records))
    conn = brain_sql.connect(folder / "brain.db")
    report = brain_sql.ingest(conn, [folder / "in"])
    assert all(error.path and error.message for error in report.errors)
    assert check(conn) == {}


SCOPES = ["/acme", "/acme/support", "/acme/sales", "/other", "/"]


@pytest.fixture(scope="module")
def scoped(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scoped")
    records = [
        {
            "_id": f"{scope}-{i}",
            "title": f"Pager {scope} {i}",
            "scope": scope,
            "text": f"Pager escalation note {i} for {scope}: call the on-call lead about the graph vendor.",
        }
        for scope in SCOPES
        for i in range(4)
    ]
    records.append(
        {"_id": "flagged", "title": "Pager flagged", "text": "Pager escalation: poisoned advice about vendors."}
    )
    path = write(folder / "r.jsonl", "\n".join(json.dumps(r) for r in records))
    conn = brain_sql.connect(folder / "brain.db")
    brain_sql.ingest(conn, [path])
    conn.execute("update knowledge set flagged = 1 where external_id = 'flagged'")
    return conn


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(q=QUERY_TEXT, scope=st.sampled_from(SCOPES))
def test_scope_and_flags_hold_in_every_leg(scoped, q, scope):
    try:
        doc = parse({"q": q, "scope": scope, "now": NOW})
    except QueryError:  # refused, as recall refuses it (no words, a NUL): nothing read
        return
    allowed = {s for s in SCOPES if scope == s or scope.startswith(s.rstrip("/") + "/") or s == "/"}
    visible = {
        row[0]
        for row in scoped.execute(
            "select id from knowledge where flagged = 0 and scope in (select value from json_each(?))",
            [json.dumps(sorted(allowed))],
        )
    }
    legs = run_legs(scoped, doc, "wordllama/l2_supercat")
    for leg, ids in legs.ranked.items():
        assert set(ids) <= visible, leg
    result = brain_sql.recall(scoped, {"q": q, "scope": scope, "now": NOW, "k": 20})
    assert {hit["id"] for hit in result["hits"]} <= visible
    flagged_words = {"poisoned", "advice"}
    for hit in result["hits"]:
        assert not flagged_words & set(hit["provenance"]["expansion_terms"])


PRIVATE = {"databases": {"brain": {"allow": {"id": "owner"}}}}
ROUTES = [
    ("get", "/brain/-/recall?q=pager"),
    ("post", "/brain/-/recall"),
    ("post", "/brain/-/verify"),
    ("post", "/brain/-/remember"),
    ("get", "/brain/-/decayed"),
    ("get", "/brain/-/decayed.json"),
    ("get", "/brain/-/brain?q=pager"),
    ("get", "/brain/-/memory/1"),
    ("get", "/brain/-/entity/1"),
    ("get", "/brain/knowledge.json"),
    ("get", "/brain/recall.json?q=pager"),
]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actor=st.one_of(st.none(), st.text(string.ascii_lowercase, min_size=1, max_size=8)))
def test_actor_without_permission_reads_nothing(datasette, actor):
    private = Datasette(list(datasette.files), metadata=PRIVATE)

    async def requests():
        cookies = {"ds_actor": private.sign({"a": {"id": actor}}, "actor")} if actor else {}
        responses = []
        for method, path in ROUTES:
            kwargs = {"json": {"q": "pager", "claim": "x", "text": "x"}} if method == "post" else {}
            responses.append((path, await getattr(private.client, method)(path, cookies=cookies, **kwargs)))
        return responses

    for path, response in asyncio.run(requests()):
        if actor == "owner":
            continue
        assert response.status_code == 403, (path, response.status_code)
        assert "Pager" not in response.text and "graph leg" not in response.text.lower()


HOSTILE_TEXT = st.one_of(
    st.text(max_size=40),  # lone surrogates included
    st.sampled_from(
        [
            "\x00",
            "a\x00b",
            "\ud800",
            "x\udfff",
            "-999999999y",
            "+9999999999999999999999d",
            "9999-12-31",
            "0001-01-01",
            "/b\x00",
            "/acme\n",
            "1e400",
        ]
    ),
)
HOSTILE_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | HOSTILE_TEXT,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(HOSTILE_TEXT, children, max_size=3),
    max_leaves=6,
)
RECORD_FIELDS = [
    "_id",
    "title",
    "text",
    "content",
    "scope",
    "class",
    "source",
    "domain",
    "observed_at",
    "expires_at",
    "valid_from",
    "valid_to",
    "supersedes",
    "confidence",
    "relevance_tier",
    "tags",
    "aliases",
    "entities",
    "relations",
    "metadata",
]
HOSTILE_RECORD = st.dictionaries(st.sampled_from(RECORD_FIELDS), HOSTILE_VALUE, max_size=6).map(
    lambda record: {"text": "a memory", **record}
)


@pytest.fixture(scope="module")
def writable(tmp_path_factory, vault_brain_path):
    path = copy_brain(vault_brain_path, tmp_path_factory.mktemp("hostile-routes") / "brain.db")
    return Datasette([str(path)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    route=st.sampled_from(["/brain/-/recall", "/brain/-/remember", "/brain/-/verify", "/-/brain/v1/embeddings"]),
    body=st.one_of(
        HOSTILE_VALUE,
        HOSTILE_RECORD,
        st.lists(HOSTILE_RECORD, max_size=3),
        st.dictionaries(st.sampled_from(FIELDS + ["claim", "id", "input", "model"]), HOSTILE_VALUE, max_size=5),
    ),
)
def test_hostile_values_on_every_route_get_a_clear_answer(writable, route, body):
    """Lone surrogates, NULs, out-of-range numbers and dates: a 2xx or a 4xx with a
    JSON error, never a 500."""
    content = json.dumps(body).encode()  # escapes surrogates as \\ud800, as a client may send them
    response = asyncio.run(writable.client.post(route, content=content, headers={"content-type": "application/json"}))
    assert response.status_code < 500, (route, body, response.text[:300])
    if response.status_code >= 400:
        payload = response.json()
        assert payload.get("error"), payload


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=st.lists(HOSTILE_RECORD, min_size=1, max_size=5))
def test_hostile_records_are_skipped_one_by_one(tmp_path_factory, records):
    folder = tmp_path_factory.mktemp("hostile-records")
    good = {"_id": "good", "text": "A memory that is fine."}
    path = write(folder / "records.jsonl", "\n".join(json.dumps(r) for r in [*records, good]))
    conn = brain_sql.connect(folder / "brain.db")
    report = brain_sql.ingest(conn, [path])
    assert all(error.path == str(path) and error.line for error in report.errors)
    assert conn.execute("select count(*) from knowledge where external_id = 'good'").fetchone()[0] == 1
    assert check(conn) == {}


def _query_string(params):
    """A query string (or form body) of a dict or (name, value) pairs as any client
    may send it: lone surrogates and NULs percent-encoded as their (invalid) UTF-8 bytes."""
    pairs = params.items() if isinstance(params, dict) else params
    return "&".join(f"{quote(name)}={quote(value.encode('utf-8', 'surrogatepass'), safe='')}" for name, value in pairs)


GET_ROUTES = [
    "/brain/-/recall",
    "/brain/-/brain",
    "/brain/-/decayed",
    "/brain/-/decayed.json",
    "/brain/recall.json",
    "/brain/-/memory/{}",
    "/brain/-/entity/{}",
    "/brain/knowledge_fts.json",
    "/brain/-/entities",
    "/brain/-/entities.json",
    "/brain/-/memory/{}.json",
]
QUERY_PARAMS = FIELDS + ["_search", "decay", "class", "_format", "sql", "hops", "page", "size", "type"]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    route=st.sampled_from(GET_ROUTES),
    segment=HOSTILE_TEXT,
    params=st.dictionaries(st.sampled_from(QUERY_PARAMS), HOSTILE_TEXT, max_size=5),
)
def test_hostile_query_strings_and_paths_get_a_clear_answer(writable, route, segment, params):
    """Every GET route and page, its path and its query string hostile: never a 500."""
    path = route.format(quote(segment.encode("utf-8", "surrogatepass"), safe="")) if "{}" in route else route
    response = asyncio.run(writable.client.get(f"{path}?{_query_string(params)}"))
    assert response.status_code < 500, (path, params, response.text[:300])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    q=HOSTILE_TEXT,
    options=st.dictionaries(
        st.sampled_from(
            ["--scope", "--since", "--until", "--now", "--domain", "--source", "--k", "--max-tokens", "--min-relevance"]
        ),
        HOSTILE_TEXT,
        max_size=4,
    ),
)
def test_hostile_cli_recall_gets_a_message_not_a_traceback(vault_brain_path, q, options):
    args = ["brain", "recall", str(vault_brain_path), q, *[item for pair in options.items() for item in pair], "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 1, 2), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


REVIEWED = [
    {
        "_id": f"old-{i}",
        "title": f"Old rota {i}",
        "text": f"The old pager rota, version {i}.",
        "expires_at": "2025-01-01",
        **({"relevance_tier": 0} if i % 3 == 0 else {}),
    }
    for i in range(8)
]
NUMBER_TEXT = st.one_of(
    st.integers().map(str),
    st.sampled_from(
        [
            "0",
            "-1",
            "1e3",
            "0x10",
            " 1",
            "1 ",
            "1_0",
            "+1",
            "\uff11",
            "\u0661",
            "9223372036854775807",
            "9223372036854775808",
            "100000000000000000",
            "1" * 5000,
        ]
    ),
    HOSTILE_TEXT,
)
# each part of a decision mostly well formed, so that some are done whole
ACTIONS = st.sampled_from(["archive", "restore", "flag", "extend:30", "extend:365"])
DECISION = st.one_of(
    ACTIONS,
    ACTIONS,
    st.one_of(st.sampled_from(["extend", "extend:", "burn", ""]), NUMBER_TEXT.map("extend:{}".format), HOSTILE_TEXT),
)
GOOD_BACK = st.sampled_from(
    [
        "",
        "decay=expired",
        "decay=archived&page=2&size=3",
        "size=1000&page=1",
        "scope=%2F",
        "class=memory&decay=expired&source=",
        "scope=/&domain=global",
    ]
)
# backs that are no query of the decayed page, alone or after a good one: the decision is refused whole
BAD_BACK = st.sampled_from(
    [
        "%ff%fe",
        "_size=1e9",
        "facet=%00",
        "?decay=expired",
        "decay=expired&",
        "&",
        "=",
        "x",
        "decay=expired&decay=archived",
        "decay=live",
        "class=nope",
        "source=%00",
        "page=-1",
        "scope=%2Fa%20",
        "scope=/acme%E2%80%8B",
        "scope=/acme%E2%A0%80",
        "scope=/acme/e%CC%81",
    ]
)
BACK_ARGS = st.dictionaries(
    st.sampled_from(["page", "size", "decay", "class", "scope", "colour"]), NUMBER_TEXT, max_size=3
)
GOOD_THEN_BAD = st.tuples(GOOD_BACK, BAD_BACK).map(lambda parts: "&".join(part for part in parts if part))
BACK = st.one_of(GOOD_BACK, GOOD_BACK, BACK_ARGS.map(_query_string), HOSTILE_TEXT, BAD_BACK, GOOD_THEN_BAD)
CSRF = ["valid"] * 4 + ["no token", "forged token", "no cookie", "JSON body"]


@pytest.fixture(scope="module")
def reviewing(tmp_path_factory, vault_brain_path):
    """(Datasette over a brain with decayed memories, a writer's cookies and the
    CSRF token the decayed page gives, their ids, a connection that watches the file)."""
    path = copy_brain(vault_brain_path, tmp_path_factory.mktemp("hostile-decisions") / "brain.db", REVIEWED)
    datasette = Datasette([str(path)], metadata={"plugins": {"datasette-brain": {"allow_write": {"id": "keeper"}}}})
    asyncio.run(warmed(datasette))  # the warm-up's own reads and migrations, done before anything is watched
    cookies = {"ds_actor": datasette.sign({"a": {"id": "keeper"}}, "actor")}
    page = asyncio.run(datasette.client.get("/brain/-/decayed", cookies=cookies))
    token = re.search(r'name="csrftoken" value="([^"]+)"', page.text).group(1)
    conn = brain_sql.connect(path)
    ids = [row[0] for row in conn.execute("select id from knowledge where external_id like 'old-%'")]
    yield datasette, {**cookies, "ds_csrftoken": page.cookies["ds_csrftoken"]}, token, ids, conn
    conn.close()


def carried(back, location):
    """Whether the page `location` names keeps every part of `back` that selects
    something (page and size aside, which it leaves out at their defaults): a part
    dropped on the way would send the reviewer back to another page than the one
    they decided on, as would a back that is no query string at all."""
    try:
        asked = parse_qsl(back, keep_blank_values=True, strict_parsing=True, errors="strict")
    except ValueError:
        return False
    kept = {name for name, _ in parse_qsl(urlsplit(location).query)}
    return all(name in kept for name, value in asked if value and name not in ("page", "size"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), csrf=st.sampled_from(CSRF))
def test_hostile_decisions_on_the_decayed_page_write_nothing_when_refused(reviewing, data, csrf):
    """Hostile ids, actions, days and back URLs posted from the decayed page's
    forms, with and without the CSRF token: a redirect to a page that answers
    when the decision was done, else a 4xx that wrote nothing; never a 500."""
    datasette, cookies, token, ids, conn = reviewing
    real = st.sampled_from(ids).map(str)
    form = data.draw(
        st.fixed_dictionaries(
            {
                "id": st.lists(real, min_size=1, max_size=3) | st.lists(real | NUMBER_TEXT, max_size=3),
                "action": DECISION,
            },
            optional={"back": BACK},
        )
    )
    pairs = [("id", value) for value in form["id"]] + [
        (name, form[name]) for name in ("action", "back") if name in form
    ]
    pairs += data.draw(st.lists(st.tuples(st.sampled_from(["id", "action", "back", "days"]), HOSTILE_TEXT), max_size=1))
    pairs += {
        "valid": [("csrftoken", token)],
        "no cookie": [("csrftoken", token)],
        "forged token": [("csrftoken", "x")],
    }.get(csrf, [])
    sent = {name: value for name, value in cookies.items() if csrf != "no cookie" or name != "ds_csrftoken"}
    if csrf == "JSON body":
        body, kind = json.dumps(data.draw(HOSTILE_VALUE | st.just({**form, "csrftoken": token}))), "application/json"
    else:
        body, kind = _query_string(pairs), "application/x-www-form-urlencoded"
    version, before = (
        conn.execute("pragma data_version").fetchone()[0],
        rows(conn, "select * from knowledge order by id"),
    )

    async def post():
        headers = {"content-type": kind}
        return await datasette.client.post("/brain/-/decayed/act", content=body.encode(), cookies=sent, headers=headers)

    response = asyncio.run(post())
    event(f"{csrf}: {response.status_code}")  # how often each answer comes (--hypothesis-show-statistics)
    assert response.status_code in (302, 400, 403), (pairs, response.status_code, response.text[-500:])
    if response.status_code == 302:
        assert csrf == "valid"
        sent_back = ([value for name, value in pairs if name == "back" and value] or [""])[-1]  # the form's last back
        assert carried(sent_back, response.headers["location"]), (pairs, response.headers["location"])
        back = asyncio.run(datasette.client.get(response.headers["location"], cookies=sent))
        assert back.status_code == 200, (response.headers["location"], back.text[-500:])
    else:
        assert conn.execute("pragma data_version").fetchone()[0] == version, (pairs, response.text[-500:])
        assert rows(conn, "select * from knowledge order by id") == before
        if response.status_code == 400:
            assert "Nothing was changed" in response.text


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(back=BACK, action=ACTIONS, data=st.data())
def test_a_decision_is_done_only_with_a_back_the_decayed_page_takes(reviewing, back, action, data):
    """A decision whole but for its back: done, and back on the very page it was made
    on, when every part of back is a query of the decayed page; else nothing is written."""
    datasette, cookies, token, ids, conn = reviewing
    pairs = [("id", str(data.draw(st.sampled_from(ids)))), ("action", action), ("back", back), ("csrftoken", token)]
    version = conn.execute("pragma data_version").fetchone()[0]
    body, headers = _query_string(pairs).encode(), {"content-type": "application/x-www-form-urlencoded"}
    response = asyncio.run(
        datasette.client.post("/brain/-/decayed/act", content=body, cookies=cookies, headers=headers)
    )
    event(f"{response.status_code}")
    assert response.status_code in (302, 400), (back, response.status_code, response.text[-500:])
    if response.status_code == 302:
        assert carried(back, response.headers["location"]), (back, response.headers["location"])
        page = asyncio.run(datasette.client.get(response.headers["location"], cookies=cookies))
        assert page.status_code == 200, (response.headers["location"], page.text[-500:])
    else:
        assert "Nothing was changed" in response.text and "back" in response.text, (back, response.text[-500:])
        assert conn.execute("pragma data_version").fetchone()[0] == version, back


def test_a_decayed_pages_id_past_the_brains_ids_is_named_with_forgets_range(reviewing):
    """Review 24, F3: the decayed page's form took ids up to 2**63 - 1 and named that
    range, while forget names ids 1 to MAX_ID: an id between them is refused with the
    one range every surface gives, and nothing is written."""
    datasette, cookies, token, ids, conn = reviewing
    version = conn.execute("pragma data_version").fetchone()[0]
    pairs = [("id", str(2**53 + 1)), ("action", "archive"), ("csrftoken", token)]
    body, headers = _query_string(pairs).encode(), {"content-type": "application/x-www-form-urlencoded"}
    response = asyncio.run(
        datasette.client.post("/brain/-/decayed/act", content=body, cookies=cookies, headers=headers)
    )
    assert response.status_code == 400 and "from 1 to 9,007,199,254,740,991" in response.text, response.text[-500:]
    assert conn.execute("pragma data_version").fetchone()[0] == version


@pytest.mark.parametrize("action", ["flag:1", "archive:zzz", "restore:"])
def test_a_decayed_action_with_a_suffix_only_extend_takes_is_refused(reviewing, action):
    """Review 25, F8: only extend takes its days after a colon; `flag:1` flagged and
    `archive:zzz` archived, the rest ignored. Such an action is refused by name and
    nothing is written."""
    datasette, cookies, token, ids, conn = reviewing
    version = conn.execute("pragma data_version").fetchone()[0]
    pairs = [("id", str(ids[0])), ("action", action), ("csrftoken", token)]
    body, headers = _query_string(pairs).encode(), {"content-type": "application/x-www-form-urlencoded"}
    response = asyncio.run(
        datasette.client.post("/brain/-/decayed/act", content=body, cookies=cookies, headers=headers)
    )
    assert response.status_code == 400 and "unknown action" in response.text, response.text[-500:]
    assert conn.execute("pragma data_version").fetchone()[0] == version
