"""lineage.tables_shown: what a view, an added full-text index or a trigger-filled
table shows of a file's other tables, however its SQL quotes them."""

from brain_sql import lineage
from brain_sql.connection import sqlite3


def test_the_tables_an_added_object_shows_are_found_however_they_are_quoted():
    conn = sqlite3.connect(":memory:")
    for statement in [
        'create table "my table" (a, b)',
        "create table plain (x)",
        "create table log (y)",
        'create virtual table f4 using fts4(a, content="my table")',
        "create virtual table f5 using fts5(a, content='my table', content_rowid=rowid)",
        "create virtual table f5b using fts5(a, content = [plain])",
        "create virtual table own using fts5(a)",  # its own content: shows nothing of another
        'create view v1 as select a from "my table"',
        "create view v2 as select count(*) from v1, plain",
        "create view v3 as select some_function(x) from plain",  # no such function here: unknown reads
        "create view v4 as select * from missing",
        'create trigger t1 after insert on plain begin insert or replace into "log" values (new.x); end',
    ]:
        conn.execute(statement)
    shown = {
        name: lineage.tables_shown(conn, name)
        for name in [
            "f4",
            "f4_segments",
            "f5",
            "f5_data",
            "f5b",
            "own",
            "own_data",
            "v1",
            "v2",
            "v3",
            "v4",
            "log",
            "plain",
        ]
    }
    assert shown == {
        "f4": {"my table"},
        "f4_segments": {"f4", "my table"},
        "f5": {"my table"},
        "f5_data": {"f5", "my table"},
        "f5b": {"plain"},
        "own": set(),
        "own_data": {"own"},
        "v1": {"my table"},
        "v2": {"my table", "plain"},
        "v3": {lineage.EVERY_TABLE},
        "v4": {lineage.EVERY_TABLE},
        "log": {"plain"},
        "plain": set(),
    }
