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


def test_what_review_107_found_shown_is_found():
    """A vocabulary of an index, content= after a tokenize string holding ",content=",
    a trigger whose write a comment splits, and one that copies another table's rows:
    each showed rows the check did not follow (review 107, H1)."""
    conn = sqlite3.connect(":memory:")
    for statement in [
        "create table knowledge (title, content)",
        "create table notes (x)",
        "create table entities (name)",
        "create table edges (id)",
        "create table edge_log (id)",
        "create table ent_copy (name)",
        "create virtual table ktext using fts5(title, content, content=knowledge)",
        "create virtual table words using fts5vocab(ktext, 'instance')",
        """create virtual table kf using fts5(content, tokenize="unicode61 separators ',content=notes'", """
        "content=knowledge)",
        "create trigger logged after insert on edges begin insert /* a comment */ into edge_log values (new.id); end",
        "create trigger copied after insert on knowledge begin insert into ent_copy select name from entities; end",
    ]:
        conn.execute(statement)
    shown = {name: lineage.tables_shown(conn, name) for name in ["words", "kf", "edge_log", "ent_copy"]}
    assert shown == {
        "words": {"ktext", "knowledge"},
        "kf": {"knowledge"},
        "edge_log": {"edges"},
        "ent_copy": {"entities", "knowledge"},
    }


def test_what_review_108_found_shown_is_found():
    """A comment holding a quote before content=, `using rtree(` in a comment or a
    name, a trigger writing into its own table, one deleting by another table, one
    SQLite cannot prepare writing into a name with doubled quotes, content= in
    capitals: each showed rows the check did not follow (review 108, H3)."""
    conn = sqlite3.connect(":memory:")
    for statement in [
        "create table knowledge (id integer primary key, content)",
        "create table entities (name)",
        "create table notes (t)",
        "create table guesses (name)",
        'create table "my""log" (x)',
        "create virtual table kc using fts5(content /* ' */, content=knowledge, content_rowid=id /* ' */)",
        "create virtual table kr /* using rtree(a) */ using fts5(content, content=knowledge, content_rowid=id)",
        'create virtual table "x using rtree(a)" using fts5(content, content=knowledge, content_rowid=id)',
        "create virtual table ku using fts5(content, content=KNOWLEDGE, content_rowid=id)",
        "create trigger own after insert on notes begin "
        "update notes set t = (select group_concat(name) from entities) where rowid = new.rowid; end",
        "create trigger gone after insert on knowledge begin "
        "delete from guesses where name in (select name from entities); end",
        "create trigger odd after insert on entities begin "
        'insert into "my""log" values (no_such_function(new.name)); end',
    ]:
        conn.execute(statement)
    shown = {
        name: lineage.tables_shown(conn, name)
        for name in ["kc", "kr", "x using rtree(a)", "ku", "notes", "guesses", 'my"log']
    }
    assert shown == {
        "kc": {"knowledge"},
        "kr": {"knowledge"},
        "x using rtree(a)": {"knowledge"},
        "ku": {"knowledge"},
        "notes": {"entities"},
        "guesses": {"entities", "knowledge"},
        'my"log': {lineage.EVERY_TABLE},
    }


def test_what_review_109_found_shown_is_found():
    """FTS5 reads an option by any prefix of its name (`c=` is `content=`); SQLite folds
    ASCII case alone (a Kelvin sign is no k); a name past ASCII is one name to SQLite
    (review 109, H1)."""
    conn = sqlite3.connect(":memory:")
    for statement in [
        "create table knowledge (id integer primary key, content)",
        "create table \u212anowledge (x)",  # a Kelvin sign: another table to SQLite
        "create table entities (name)",
        "create table log\u20ac (x)",
        "create virtual table kc using fts5(content, c=knowledge, content_rowid=id)",
        "create virtual table kcont using fts5(content, CONT=knowledge, content_rowid=id)",
        "create view v as select content from knowledge",
        "create trigger odd after insert on entities begin "
        "insert into log\u20ac values (no_such_function(new.name)); end",
    ]:
        conn.execute(statement)
    shown = {name: lineage.tables_shown(conn, name) for name in ["kc", "kcont", "v", "log\u20ac"]}
    assert shown == {
        "kc": {"knowledge"},
        "kcont": {"knowledge"},
        "v": {"knowledge"},
        "log\u20ac": {lineage.EVERY_TABLE},
    }


def test_what_review_110_found_shown_is_found():
    """A content= value of several tokens (FTS4 reads `'knowledge' x` as knowledge) is
    not told, so shows every table; a no-break space is part of a name to SQLite, not
    a space (review 110, H1)."""
    conn = sqlite3.connect(":memory:")
    for statement in [
        "create table knowledge (id integer primary key, content)",
        "create table relationships (relation_type)",
        "create view \u00a0v as select id, content from knowledge",
        "create table \u00a0log (t)",
        "create virtual table f4 using fts4(content, content='knowledge' x)",
        "create virtual table f5 using fts5(content, content=\u00a0v, content_rowid=id)",
        "create trigger tf after insert on relationships begin "
        "insert into \u00a0log values (no_such_function(new.relation_type)); end",
    ]:
        conn.execute(statement)
    shown = {name: lineage.tables_shown(conn, name) for name in ["f4", "f5", "\u00a0log"]}
    assert shown == {"f4": {lineage.EVERY_TABLE}, "f5": {"knowledge"}, "\u00a0log": {lineage.EVERY_TABLE}}


def test_what_review_111_found_shown_is_found():
    """A trigger SQLite cannot prepare here writing through a view, whose INSTEAD OF
    trigger fills a table: the table showed nothing (only tables named by the trigger
    were told every table: review 111, H1). A table's foreign keys show the rows they
    point at, as Datasette labels each key with its row's (H2)."""
    conn = sqlite3.connect(":memory:")
    for statement in [
        "create table knowledge (id integer primary key, title, content)",
        "create table secrets (id integer primary key, a)",
        "create table dest (x)",
        "create view inbox as select 1 as x",
        "create trigger into_dest instead of insert on inbox begin insert into dest values (new.x); end",
        "create trigger copied after insert on knowledge begin "
        "insert into inbox (x) values (no_such_function(new.content)); end",
        "create table refs (id integer primary key, s references SECRETS(id), k references knowledge)",
        "create table plain (id integer primary key, note)",
    ]:
        conn.execute(statement)
    shown = {name: lineage.tables_shown(conn, name) for name in ["dest", "refs", "plain"]}
    assert shown == {"dest": {lineage.EVERY_TABLE}, "refs": {"secrets", "knowledge"}, "plain": set()}


def test_a_foreign_key_shows_what_the_rows_it_points_at_show():
    """A key to a view over knowledge, or to a table a trigger fills from it: its
    labels are those rows' (review 113, H1)."""
    conn = sqlite3.connect(":memory:")
    for statement in [
        "create table knowledge (id integer primary key, title, content)",
        "create view titles as select id, title from knowledge",
        "create table copies (id integer primary key, title)",
        "create trigger copied after insert on knowledge begin insert into copies values (new.id, new.title); end",
        "create table refs (id integer primary key, v references titles(id), c references copies(id))",
        "create table via (id integer primary key, r references refs(id))",  # refs' rows: ids alone
    ]:
        conn.execute(statement)
    shown = {name: lineage.tables_shown(conn, name) for name in ["refs", "via"]}
    assert shown == {"refs": {"knowledge", "copies"}, "via": {"refs"}}
