"""`sqlite-utils brain remember`, `forget` and `stats`, and the help of every
`brain` command: each option explained, each command with an example."""

import asyncio
import json
import os
import resource
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner
from datasette.app import Datasette
from sqlite_utils.cli import cli

import brain_sql
from brain_sql.config import MAX_REMEMBER_INPUT_BYTES

from .conftest import rows, snapshot, write

DEPLOY = {
    "_id": "m-1",
    "title": "Deploy window",
    "text": "Deploys happen on Tuesdays.",
    "scope": "/acme/eng",
    "relations": [{"type": "owned_by", "to": "Platform Team"}],
}


def piped(*args, input):
    """Run `sqlite-utils ...` with `input` on stdin."""
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


def test_remember_from_stdin_then_update(db_path):
    result = piped("brain", "remember", db_path, input=json.dumps(DEPLOY))
    assert result.exit_code == 0, result.output
    conn = brain_sql.connect(db_path)
    [[memory_id]] = rows(conn, "select id from knowledge where external_id = 'm-1'")
    assert result.output == f"1 record: 1 added, 0 updated, 0 unchanged\nmemory ids: {memory_id}\n"
    edited = {**DEPLOY, "text": "Deploys happen on Wednesdays."}
    result = piped("brain", "remember", db_path, "-", "--json", input=json.dumps(edited))
    assert result.exit_code == 0, result.output
    answer = json.loads(result.output)
    assert (answer["added"], answer["updated"], answer["unchanged"]) == (0, 1, 0)
    assert rows(conn, "select content from knowledge where external_id = 'm-1'") == [(edited["text"],)]
    assert "1 unchanged" in piped("brain", "remember", db_path, input=json.dumps(edited)).output


@pytest.mark.parametrize("shape", ["array", "jsonl", "pretty"])
def test_remember_from_a_file_in_every_shape(run, db_path, tmp_path, shape):
    records = [DEPLOY, {"text": "Lunch is at noon."}]
    text = {
        "array": json.dumps(records, indent=2),
        "jsonl": "\n".join(json.dumps(r) for r in records) + "\n\n",
        "pretty": json.dumps(records[0], indent=2),
    }[shape]
    result = run("brain", "remember", db_path, write(tmp_path / "in.json", text), "--scope", "/acme", "--source", "crm")
    assert result.exit_code == 0, result.output
    count = 1 if shape == "pretty" else 2
    assert result.output.startswith(f"{count} record{'s' if count > 1 else ''}: {count} added")
    conn = brain_sql.connect(db_path)
    stored = rows(conn, "select scope, source from knowledge order by id")
    assert stored == [("/acme/eng", "crm"), ("/acme", "crm")][:count]  # a record's own scope wins
    assert brain_sql.check(conn) == {}


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"text": "ok"}\n{"text": "fine"}\n{"text": oops}\n',
            "in.jsonl:3: malformed JSON line: Expecting value at column 10",
        ),
        # review 112: its reason stopped at "at"
        (
            '{"text": "ok"}\n{"text": "open\n{"text": "b"}\n',
            "in.jsonl:2: malformed JSON line: Unterminated string starting at column 10",
        ),
        ('{"text": "ok"}\n\n{"title": "no text"}\n', "in.jsonl:3: record 2: record has no text"),
        # review 152: a misspelled text field is named
        (
            '{"txt": "Deploys on Tuesdays"}\n',
            "in.jsonl:1: record 1: record has no text: give a non-empty 'content' or 'text' (is 'txt' it?)",
        ),  # fmt: skip
        ('{"text": "ok"}\n{"text": "x", "class": "gossip"}\n', "in.jsonl:2: record 2: class must be one of"),
        ('[{"text": "ok"}, {"text": "x", "expires_at": "soon"}]', "in.jsonl: record 2: "),
        ('{"text": "ok",\n "scope": }', "in.jsonl:2: malformed JSON"),
        ('{"text": "ok"}\n{"text": "x", "text": "y"}\n', 'in.jsonl:2: malformed JSON line: the key "text" of one'),
        ('{"text": "x", "text": "y"}', 'in.jsonl:1: malformed JSON: the key "text" of one object is given twice'),
        # review 95: nested past Python's recursion limit, NaN, a number past Python's digit limit
        ("[" * 5000 + "]" * 5000, "in.jsonl:1: malformed JSON: nested too deeply"),
        ('{"text": "ok"}\n' + "[" * 5000 + "]" * 5000, "in.jsonl:2: malformed JSON line: nested too deeply"),
        ('{"text": NaN}', "in.jsonl:1: malformed JSON: NaN is not a JSON number"),
        ('{\n  "text": "ok",\n  "n": -Infinity\n}\n', "in.jsonl:3: malformed JSON: -Infinity is not a JSON number"),
        ('{\n  "text": "ok",\n  "x": 1,\n  "text": "again"\n}', 'in.jsonl:4: malformed JSON: the key "text" of one'),
        (
            '{\n  "text": "ok",\n  "n": ' + "1" * 5000 + "\n}",
            "in.jsonl:3: malformed JSON: a whole number of more than 4,300 digits",
        ),
        ('{\n  "a":\n' + "[" * 5000 + "]" * 5000 + "\n}", "in.jsonl:1: malformed JSON: nested too deeply"),
        (
            '\n{"text": "ok", "n": ' + "1" * 5000 + "}",
            "in.jsonl:2: malformed JSON: a whole number of more than 4,300 digits",
        ),
        ("", "no records"),
        ("42", "in.jsonl:1: record 1: a record must be a JSON object"),
        ('{"records": [{"text": "ok"}]}', "record 1: an object whose only key is 'records' is not a record: send the"),
    ],
)
def test_a_bad_record_is_an_error_naming_its_line_and_nothing_is_stored(run, db_path, tmp_path, text, message):
    brain_sql.migrate(brain_sql.connect(db_path))
    before = snapshot(brain_sql.connect(db_path))
    result = run("brain", "remember", db_path, write(tmp_path / "in.jsonl", text))
    assert result.exit_code == 2 and message in result.output, result.output
    assert "Traceback" not in result.output
    assert snapshot(brain_sql.connect(db_path)) == before
    # the same refusal for a brain not made yet, which makes no file for it (it made an empty brain);
    # and no record at all (review 107)
    assert (
        "holds no record: nothing was stored"
        in run("brain", "remember", tmp_path / "none.db", write(tmp_path / "none.json", "[]")).output
    )
    assert not (tmp_path / "none.db").exists()
    new = tmp_path / "new.db"
    assert run("brain", "remember", new, tmp_path / "in.jsonl").output == result.output
    assert not new.exists()


def test_remember_input_that_is_not_utf8_or_not_there(run, db_path, tmp_path):
    bad = tmp_path / "in.jsonl"
    bad.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    result = run("brain", "remember", db_path, bad)
    assert result.exit_code == 2 and "in.jsonl:2: not UTF-8 text" in result.output
    result = run("brain", "remember", db_path, tmp_path / "missing.jsonl")
    assert result.exit_code == 2 and "cannot read" in result.output


def test_forget_by_id_and_external_id(run, db_path):
    piped(
        "brain",
        "remember",
        db_path,
        input="\n".join(
            json.dumps(r)
            for r in [
                DEPLOY,
                {"_id": "m-2", "text": "Backups run nightly."},
                {"_id": "m-3", "text": "Lunch is at noon."},
            ]
        ),
    )
    conn = brain_sql.connect(db_path)
    ids = dict(rows(conn, "select external_id, id from knowledge"))
    result = run(
        "brain", "forget", db_path, "--external-id", "m-1", "--id", ids["m-2"], "--id", 999, "--external-id", "x"
    )
    assert result.exit_code == 0, result.output
    assert result.output == (
        f"forgot 2 memories of 2 documents (ids {ids['m-1']}, {ids['m-2']}; external ids m-1, m-2); "
        "with them 1 relationship and 2 entities\nnot found: id 999; external id x\n"
    )
    assert rows(conn, "select external_id from knowledge") == [("m-3",)]
    result = run("brain", "forget", db_path, "--external-id", "m-3", "--json")
    assert json.loads(result.output)["removed"]["external_ids"] == ["m-3"]
    assert run("brain", "forget", db_path, "--id", 1).output == "nothing forgotten\nnot found: id 1\n"
    assert brain_sql.check(conn) == {}


def test_forget_needs_something_to_forget_and_a_brain(run, db_path, tmp_path):
    brain_sql.migrate(brain_sql.connect(db_path))
    result = run("brain", "forget", db_path)
    assert result.exit_code == 2 and "--id N or --external-id X" in result.output
    result = run("brain", "forget", db_path, "--id", "twelve")
    assert result.exit_code == 2 and 'id must be a whole number in the digits 0-9, not "twelve"' in result.output
    # ASCII digits only, as the HTTP API takes them; past 19 digits no id (int() refuses 4,300: review 51)
    for given in ("\uff15", "1_000", " 5", "\u0661", "9" * 5000):
        result = run("brain", "forget", db_path, "--id", given)
        assert result.exit_code == 2 and "id must be a whole number in the digits 0-9" in result.output, given
        assert result.exception is None or isinstance(result.exception, SystemExit), given
    assert run("brain", "forget", db_path, "--id", "0" * 30 + "7").output == "nothing forgotten\nnot found: id 7\n"
    result = run("brain", "forget", tmp_path / "missing.db", "--id", 1)
    assert result.exit_code == 1 and "does not exist" in result.output


def test_stats_readable_and_json(run, db_path):
    piped("brain", "remember", db_path, input=json.dumps(DEPLOY))
    result = run("brain", "stats", db_path)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"{db_path}: 1 memory in 1 document; 2 entities, 1 relationship"
    assert "class: memory 1" in lines and "scope: /acme/eng 1" in lines and "source: remember 1" in lines
    assert "decayed: 0 expired, 0 expiring within 7 days, 0 archived; 0 flagged" in lines
    assert any(line.startswith("model: wordllama/l2_supercat (256 dimensions)") for line in lines)
    found = json.loads(run("brain", "stats", db_path, "--json").output)
    assert found == brain_sql.stats(brain_sql.connect(db_path)) | {"wal_bytes": found["wal_bytes"]}


def test_every_brain_command_explains_every_option_and_gives_an_example(run):
    group = cli.commands["brain"]
    assert "Example:" in run("brain", "--help").output
    assert {"remember", "forget", "stats"} <= set(group.commands)
    for name, command in group.commands.items():
        result = run("brain", name, "--help")
        assert result.exit_code == 0, (name, result.output)
        assert "Example:" in result.output and f"sqlite-utils brain {name}" in result.output, name
        for param in command.params:
            if isinstance(param, click.Option) and param.name != "help":
                assert param.help, f"brain {name} {param.opts[0]} has no help text"
                assert param.opts[0] in result.output, (name, param.opts)


def nested(depth, inner):
    """`inner` inside `depth` objects, each {"a": ...}."""
    for _ in range(depth):
        inner = {"a": inner}
    return inner


def test_a_value_nested_past_the_bound_is_refused_by_name_on_every_door(run, db_path, tmp_path):
    """A record's field, or a field its metadata holds, nesting lists and objects
    more than MAX_NESTING deep is refused by name (remember: exit 2 and nothing
    stored; ingest: skipped with its file and line; /-/remember: a 400), here with a
    lone surrogate at the bottom that, stored, no export could write. As deep as the
    bound goes in, and its export ingests back the same."""
    deep = {"_id": "deep", "text": "deep surrogate note zebra", "metadata": nested(150, "\ud800")}
    extra = {"_id": "extra", "text": "an extra field too deep", "extra": [nested(100, 1)]}
    brain_sql.migrate(brain_sql.connect(db_path))
    before = snapshot(brain_sql.connect(db_path))
    for record, key in ((deep, "metadata"), (extra, "extra")):
        path = write(tmp_path / f"{record['_id']}.jsonl", json.dumps(record))
        said = f'"{key}" nests lists and objects more than 100 levels deep'
        remembered = run("brain", "remember", db_path, path)
        assert remembered.exit_code == 2 and f"{path}:1: record 1: {said}" in remembered.output, remembered.output
        ingested = run("brain", "ingest", db_path, path)
        assert ingested.exit_code == 1 and f"skipped {path}:1: {said}" in ingested.output, ingested.output

        async def posted(record=record):
            datasette = Datasette([str(db_path)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
            return await datasette.client.post(
                "/brain/-/remember", content=json.dumps(record), headers={"content-type": "application/json"}
            )

        answer = asyncio.run(posted())  # the body's surrogate is named before its records are read
        named = said if key == "extra" else "not valid Unicode (a lone surrogate)"
        assert answer.status_code == 400 and named in answer.json()["error"], answer.text
    assert snapshot(brain_sql.connect(db_path)) == before

    bound = [
        {"_id": "meta", "text": "metadata as deep as it goes", "metadata": {"k": nested(100, "\u00e9")}},
        {"_id": "field", "text": "a field as deep as it goes", "extra": nested(99, [])},  # 100 with the list,
    ]
    stored = run("brain", "remember", db_path, write(tmp_path / "bound.json", json.dumps(bound)))
    assert stored.exit_code == 0, stored.output
    exported = run("brain", "export", db_path)
    assert exported.exit_code == 0, exported.output
    again = tmp_path / "again.db"
    assert run("brain", "ingest", again, write(tmp_path / "export.jsonl", exported.stdout)).exit_code == 0
    metadata = "select external_id, metadata from knowledge order by external_id"
    assert rows(brain_sql.connect(again), metadata) == rows(brain_sql.connect(db_path), metadata)
    assert run("brain", "check", db_path).exit_code == 0


def test_remember_reads_no_more_than_its_limit_from_a_device_or_stdin(tmp_path):
    """`remember brain.db /dev/zero` and a stream on stdin longer than the limit
    are refused naming it, after reading at most a byte past it (the run stays
    within 3 GB of address space); nothing is stored."""
    db_path = tmp_path / "brain.db"
    command = [sys.executable, "-m", "sqlite_utils", "brain", "remember", str(db_path)]

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    message = f"holds more than {MAX_REMEMBER_INPUT_BYTES:,} bytes; the limit is {MAX_REMEMBER_INPUT_BYTES:,}"
    device = subprocess.run([*command, "/dev/zero"], capture_output=True, text=True, timeout=300, preexec_fn=limit)
    assert device.returncode == 2 and f"/dev/zero {message}" in device.stderr, device.stderr
    record = json.dumps({"text": "x" * 1000}).encode() + b"\n"
    with subprocess.Popen([*command, "-"], stdin=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=limit) as piped:
        try:
            for _ in range(MAX_REMEMBER_INPUT_BYTES // len(record) * 3):  # three times the limit, if it reads on
                piped.stdin.write(record)
            piped.stdin.close()
        except BrokenPipeError:  # it stopped reading: what is refused need not be read
            piped.stdin = None
        error = piped.stderr.read().decode()
    assert piped.returncode == 2 and f"stdin {message}" in error, error
    assert not db_path.exists() or rows(brain_sql.connect(db_path), "select count(*) from knowledge") == [(0,)]


@pytest.mark.parametrize("command", [["init"], ["ingest", "{records}"], ["remember", "{records}"]])
def test_a_brain_in_a_folder_that_is_not_there_is_named_not_a_traceback(run, tmp_path, command):
    """init, ingest and remember into nonexist/x.db: a usage error (exit 2) naming
    the path and its folder."""
    records = write(tmp_path / "one.jsonl", '{"text": "Deploys happen on Tuesdays."}')
    args = [arg.format(records=records) for arg in command]
    result = run("brain", args[0], tmp_path / "nonexist" / "x.db", *args[1:])
    assert result.exit_code == 2, result.output
    assert (
        "x.db cannot be opened or created: its folder" in result.output and "nonexist does not exist" in result.output
    )


def test_a_write_command_ends_when_it_has_committed_though_a_reader_holds_the_log(tmp_path):
    """A write command's last step empties the write-ahead log; a reader holding an old
    snapshot (Litestream's always does) made it wait out the whole busy timeout after
    its write had committed, holding off every other writer (review 106, F2). It
    leaves the log to that reader now (here the timeout is ten minutes)."""
    db_path = tmp_path / "brain.db"
    brain_sql.ingest(brain_sql.connect(db_path), [write(tmp_path / "r.jsonl", '{"_id": "a", "text": "alpha"}\n')])
    reader = brain_sql.connect(db_path)
    reader.execute("begin")
    assert reader.execute("select count(*) from knowledge").fetchone() == (1,)  # holds its snapshot
    environment = {**os.environ, "BRAIN_BUSY_TIMEOUT_MS": "600000"}
    command = [sys.executable, "-m", "sqlite_utils", "brain", "remember", str(db_path)]
    done = subprocess.run(
        command, input='{"_id": "b", "text": "beta"}', capture_output=True, text=True, env=environment, timeout=120
    )
    assert done.returncode == 0, done.stderr
    reader.execute("rollback")
    assert rows(brain_sql.connect(db_path), "select external_id from knowledge order by 1") == [("a",), ("b",)]


def test_remember_names_each_records_memory_ids(db_path):
    """One id a record reads as a list; a record of several memories as their run, by record."""
    records = [
        {"_id": "x", "title": "X", "_chunks": [{"content": f"part {i}"} for i in range(3)]},
        {"_id": "y", "text": "one memory"},
    ]
    result = piped("brain", "remember", db_path, input=json.dumps(records))
    assert result.exit_code == 0, result.output
    conn = brain_sql.connect(db_path)
    x = [i for (i,) in rows(conn, "select id from knowledge where external_id = 'x' order by chunk_index")]
    [[y]] = rows(conn, "select id from knowledge where external_id = 'y'")
    assert result.output.splitlines()[-1] == f"memory ids: {x[0]}-{x[-1]} (record 1); {y} (record 2)"
    result = piped("brain", "remember", db_path, input=json.dumps([{"text": "a"}, {"text": "b"}]))
    a, b = (i for (i,) in rows(conn, "select id from knowledge where content in ('a', 'b') order by content"))
    assert result.output.splitlines()[-1] == f"memory ids: {a}, {b}"
