"""What each column of a brain's tables may hold, and the rows plain SQL left holding
something else.

SQLite keeps whatever it is given: `update knowledge set confidence = 'high'`, a
BLOB title, an edge whose end is `'abc'` or another dimension in brain_meta is
stored, and recall, pages and repairs then meet a value they cannot read.
`invalid` names each such row and column, with what repair does about it: the
value it reads as one way only (a BLOB holding UTF-8 text is that text; a number
written as text is that number; metadata or tags that are other text, what
exporting the memory and ingesting it again would store), the value derived data
is made again from, or, for a row that is derived whole (an edge, queued mention
work), deleting it; `mend` does those, or refuses; `fault` is the BrainError that
says to run check.
"""

import json
import math
from dataclasses import dataclass

from .config import CLASSES, MAX_NESTING
from .connection import Connection, sqlite3
from .document import names
from .embed import NOT_INSTALLED, installed, model_dimension
from .errors import BrainError, FieldError, ModelError, WrongKind
from .fields import loads_json, normalize_scope, not_json_number, stored_too_deep, unencodable
from .schema import ENTITY_SQL, ID_SAYS, ID_SQL, META_TABLE, SCHEMA_VERSION, TIME_SAYS, TIME_SQL, stored_meta
from .vectors import vector_dimension


@dataclass(frozen=True)
class Rule:
    """A column's valid values: `valid`, SQL over the value `{c}` and the rest of its
    row (true or false, never NULL), `says` them in words, and `kind`, what a wrong
    value may be read as ('text', 'real' or 'integer'). `normal`, when set, is the
    function that checks such values on their way in (fields.py): a valid value
    comes out of it unchanged, a wrong one is mended to what it gives. `derived`,
    SQL over the row, is what a value of a derived column that reads no one way is
    made again from. `read`, when set, is what a value its rule refuses reads as
    (_UNREAD when it reads as nothing). `unsound`, when set, is true of values the
    SQL takes that no export can write (a JSON column's lone surrogate escape), read
    in Python only where `suspect`, SQL over `{c}` like `valid`, holds. `how` says
    what mends a wrong value that --repair cannot."""

    valid: str
    says: str
    kind: str = "text"
    normal: object = None
    derived: str | None = None
    read: object = None
    unsound: object = None
    suspect: str | None = None
    how: str = "set it with SQL"


_UNREAD = object()
INT64 = (-(2**63), 2**63 - 1)  # the whole numbers SQLite stores as INTEGER


def _json_or_text(value):
    """A stored JSON column's value as export gives it: its JSON, or text that is no
    JSON as it is; _UNREAD for JSON holding NaN or an infinity, which no export
    writes, or nested past what Python reads (no one way to read it)."""
    if not isinstance(value, str):
        return value
    try:
        return loads_json(value)
    except RecursionError:
        return _UNREAD
    except ValueError:
        pass
    try:
        json.loads(value)
    except ValueError:
        return value
    return _UNREAD


def _as_metadata(value):
    """Metadata that is no JSON object, as ingest stores an exported record holding
    it: kept whole under "metadata"."""
    value = _json_or_text(value)
    return _UNREAD if value is _UNREAD else json.dumps({"metadata": value})


def _as_tags(value):
    """Tags that are no JSON list of names, as ingest reads an exported record's
    (a list, or names between commas); _UNREAD when no record could give them."""
    value = _json_or_text(value)
    if value is _UNREAD:
        return _UNREAD
    try:
        tags = names(value, "tags")
    except FieldError:
        return _UNREAD
    return json.dumps(tags) if tags else None


def _unsound_json(value):
    """Whether JSON text `value` holds what no export writes and ingest refuses: text
    that is not valid Unicode (a \\ud800 escape), a value nested past MAX_NESTING, or
    a number past a double's range (1e999: an infinity once read). Text that is no
    JSON is for the SQL rule to refuse."""
    if not isinstance(value, str):
        return False
    try:
        data = json.loads(value)
    except RecursionError:
        return True
    except ValueError:
        return False
    return stored_too_deep(data) or unencodable(data) is not None or not_json_number(data) is not None


# JSON text that may hold a surrogate's escape, brackets enough to nest past MAX_NESTING, or
# a number past a double's range (an exponent, or 309 digits in a row: 1e999 reads as infinity)
_SUSPECT_JSON = (
    "{c} glob '*\\u[dD][89a-fA-F]*' or "
    f"length({{c}}) - length(replace(replace({{c}}, '[', ''), '{{{{', '')) > {MAX_NESTING} or "
    "{c} glob '*[0-9][eE]*' or {c} glob '*" + "[0-9]" * 309 + "*'"
)

TEXT = Rule("typeof({c}) in ('text', 'null')", "text or NULL")
REQUIRED = Rule("typeof({c}) = 'text'", "text")
TIME = Rule(TIME_SQL, TIME_SAYS)
# a line number, as ingest takes it back from an export (records._line), or a chunk's
# place in its document (export gives the chunks in this order, ingest numbers them from 0)
FROM_ZERO = Rule(
    "typeof({c}) = 'null' or (typeof({c}) = 'integer' and {c} >= 0)", "a whole number from 0, or NULL", "integer"
)
ID = Rule("typeof({c}) = 'integer'", "an id (a whole number)", "integer")
OPTIONAL_ID = Rule("typeof({c}) in ('integer', 'null')", "an id (a whole number) or NULL", "integer")
# a row's own id, which readers and clients hold (schema.ID_TABLES): one past it is not
# a row --repair can give another (what refers to it would not follow)
OWN_ID = Rule(
    ID_SQL,
    ID_SAYS,
    "integer",
    how="give it an id within that with SQL, and what names it the same, or delete it",
)
MEMORY_ID = Rule(
    ID_SQL,
    ID_SAYS,
    "integer",
    how="forget it: sqlite-utils brain forget DB --id=<this id>; or give it an id within that with SQL",
)
_CLASSES = ", ".join(f"'{name}'" for name in CLASSES)

# table -> (its key column, {column: Rule})
RULES = {
    "knowledge": (
        "id",
        {
            "id": MEMORY_ID,
            "title": TEXT,
            "content": REQUIRED,
            "knowledge_type": TEXT,
            "source": TEXT,
            "content_hash": TEXT,
            "created_at": TIME,
            "flagged": Rule("typeof({c}) = 'integer' and {c} in (0, 1)", "0, or 1 for flagged", "integer"),
            "domain": REQUIRED,
            "observed_at": TIME,
            "valid_from": TIME,
            # valid from <= T < to holds at no time T otherwise (fields.normalize_fields refuses it too)
            "valid_to": Rule(
                f"({TIME.valid}) and coalesce(unixepoch({{c}}) > unixepoch([valid_from]), 1)",
                "a time later than valid_from, or NULL",
            ),
            "document_id": TEXT,
            "chunk_index": FROM_ZERO,
            "heading_path": TEXT,
            "line_start": FROM_ZERO,
            "line_end": FROM_ZERO,
            "source_path": TEXT,
            "external_id": TEXT,
            "class": Rule(f"typeof({{c}}) = 'text' and {{c}} in ({_CLASSES})", f"one of {', '.join(CLASSES)}"),
            "scope": Rule(
                "typeof({c}) = 'text' and substr({c}, 1, 1) = '/'",
                "a scope such as /acme/support (as ingest takes it)",
                normal=normalize_scope,
            ),
            "owner": TEXT,
            "access": TEXT,
            "expires_at": TIME,
            "relevance_tier": Rule(
                "typeof({c}) = 'integer' and {c} between 0 and 3", "a whole number from 0 to 3", "integer"
            ),
            "confidence": Rule(
                "typeof({c}) = 'null' or (typeof({c}) in ('integer', 'real') and {c} between 0 and 1)",
                "a number from 0 to 1, or NULL",
                "real",
            ),
            "node_kind": TEXT,
            "lawful_basis": TEXT,
            "region": TEXT,
            "tags": Rule(
                "typeof({c}) = 'null' or (typeof({c}) = 'text' and case when json_valid({c}) then json_type({c}) = "
                "'array' and not exists (select 1 from json_each({c}) where type != 'text') else 0 end)",
                "a JSON list of names (valid Unicode), or NULL",
                read=_as_tags,
                unsound=_unsound_json,
                suspect=_SUSPECT_JSON,
            ),
            "metadata": Rule(
                "typeof({c}) = 'null' or (typeof({c}) = 'text' and case when json_valid({c}) then "
                "json_type({c}) = 'object' else 0 end)",
                f"a JSON object (valid Unicode, numbers a double holds, nested at most {MAX_NESTING} deep), or NULL",
                read=_as_metadata,
                unsound=_unsound_json,
                suspect=_SUSPECT_JSON,
            ),
            "embedding_model": TEXT,
            "updated_at": TIME,
            "context": TEXT,
            "supersedes": TEXT,
            "superseded_at": TIME,
            "superseded_by": TEXT,
            "version_of": TEXT,
        },
    ),
    "entities": ("id", {"id": OWN_ID, "name": REQUIRED, "entity_type": TEXT, "created_at": TIME}),
    "relationships": (
        "id",
        {
            "id": OWN_ID,
            "from_entity_id": ID,
            "to_entity_id": ID,
            "relation_type": REQUIRED,
            "knowledge_id": OPTIONAL_ID,
            "document_id": TEXT,
            "created_at": TIME,
        },
    ),
    "documents": (
        "document_id",
        {
            "document_id": REQUIRED,
            "title": TEXT,
            "source_path": TEXT,
            "content_hash": TEXT,
            "ingested_at": TIME,
            # the entity named by its title (writer.py), and how many chunks it has
            "entity_id": Rule(
                f"typeof({{c}}) = 'null' or (typeof({{c}}) = 'integer' and {ENTITY_SQL})",
                "the id of an entity, or NULL",
                "integer",
                derived="(select e.id from entities e where e.name = documents.title)",
            ),
            "chunks": Rule(
                "typeof({c}) = 'integer' and {c} >= 0",
                "a whole number of chunks",
                "integer",
                derived="(select count(*) from knowledge k where k.document_id = documents.document_id)",
            ),
        },
    ),
    "brain_mention_queue": (
        "rowid",
        {
            "kind": Rule("typeof({c}) = 'text' and {c} in ('chunk', 'entity')", "chunk or entity"),
            "id": ID,
        },
    ),
}
# tables whose rows are derived whole: a row holding a value that reads no one way is
# deleted (an edge whose end is no id is dangling; its document's next ingest states it again)
DERIVED_ROWS = ("relationships", "brain_mention_queue")


@dataclass(frozen=True)
class Invalid:
    """One stored value of the wrong kind: where it is, what it is, what it should
    be, and what --repair does: ("set", value), ("delete", None) for a derived row,
    or None when it cannot be told, and then `how` says what mends it."""

    table: str
    key: object
    column: str
    value: object
    says: str
    repair: tuple | None = None
    how: str = "set it with SQL"
    by: str | None = None  # the column `key` is of, when not the table's own key (RULES)

    def __str__(self):
        if isinstance(self.value, NotUTF8):
            found = f"text that is not UTF-8 ({len(self.value)} bytes)"
        elif isinstance(self.value, bytes):
            found = f"a BLOB of {len(self.value)} bytes"
        else:
            found = repr(self.value)[:60]
        if self.repair is None:
            mend = self.how
        elif self.repair[0] == "delete":
            why = "the brain reads no such key" if self.table == META_TABLE else "it is derived"
            mend = f"--repair deletes the row: {why}"
        else:
            mend = f"--repair makes it {'NULL' if self.repair[1] is None else repr(self.repair[1])}"[:80]
        at = self.key if self.by is None else f"{self.by} {self.key}"
        return f"{self.table} {at} {self.column}: {found}, not {self.says} ({mend})"


def invalid(conn, limit=None):
    """[Invalid] of every row holding a value its column's rule refuses, and of
    brain_meta's dimension when it is not that of the stored vectors; with
    `limit`, at most that many from each table."""
    found = []
    for table, (key, rules) in RULES.items():
        # a key that is itself text not UTF-8 cannot be read to name its row: the
        # table's rows are named by rowid instead
        by = "rowid" if key in rules and _not_utf8(conn, table, "rowid", key) else key
        found += _invalid_rows(conn, table, by, rules, limit=limit)
    return found + _meta(conn) + _schema_version(conn) + _meta_keys(conn)


def invalid_in(conn, table, keys, columns):
    """[Invalid] of the rows `keys` of `table` whose `columns` hold a value its
    rule refuses: what check names of them (a column with a `normal` function
    reads the whole table's distinct values)."""
    key, rules = RULES[table]
    return _invalid_rows(conn, table, key, {column: rules[column] for column in columns}, keys=keys)


def _invalid_rows(conn, table, key, rules, limit=None, keys=None):
    """[Invalid] of the rows of `table` (of `keys` only, when given) holding a
    value one of `rules` refuses."""
    present = {row[1] for row in conn.execute(f"pragma table_info([{table}])")}
    rules = {column: rule for column, rule in rules.items() if column in present}
    if not rules:
        return []
    # text that is not UTF-8 (plain SQL's cast(x'ff' as text)) is read as the bytes it is, and
    # never as text by the rules' own reads; looked for in a whole table's scan (check's, a
    # failure's), not for a few rows of a recall
    undecodable = {column: _not_utf8(conn, table, key, column) if keys is None else [] for column in rules}
    wrong, params = [], []
    for column, rule in rules.items():
        test = f"not ({rule.valid.format(c=f'[{column}]')})"
        abnormal = _abnormal(conn, table, key, column, rule, undecodable[column])
        if abnormal:
            test += f" or [{column}] in (select value from json_each(?))"
            params.append(json.dumps(abnormal))
        unsound = _unsound(conn, table, key, column, rule, undecodable[column])
        if unsound:
            test += f" or [{key}] in (select value from json_each(?))"
            params.append(json.dumps(unsound))
        wrong.append(f"({test})")
    stored, stored_params = [], []
    for at, (column, keys_of) in enumerate(undecodable.items()):
        if keys_of:
            wrong[at] += f" or [{key}] in (select value from json_each(?))"
            params.append(json.dumps(keys_of))
            blob = f"cast([{column}] as blob)"
            stored.append(f"case when [{key}] in (select value from json_each(?)) then {blob} else [{column}] end")
            stored_params.append(json.dumps(keys_of))
        else:
            stored.append(f"[{column}]")
    among = "" if keys is None else f"[{key}] in (select value from json_each(?)) and "
    sql = (
        f"select [{key}], {', '.join(wrong)}, {', '.join(stored)} from [{table}] "
        f"where {among}({' or '.join(wrong)}) order by [{key}]" + (f" limit {int(limit)}" if limit else "")
    )
    found = []
    given = [] if keys is None else [json.dumps(list(keys))]
    for row in conn.execute(sql, params + stored_params + given + params).fetchall():
        flags, stored = row[1 : 1 + len(rules)], row[1 + len(rules) :]
        for (column, rule), bad, value in zip(rules.items(), flags, stored):
            if bad and isinstance(value, bytes) and row[0] in undecodable[column]:
                value = NotUTF8(value)
            if bad:
                repair = _repair(conn, rule, value, table, key, row[0])
                by = None if key == RULES[table][0] else key
                found.append(Invalid(table, row[0], column, value, rule.says, repair, rule.how, by))
    return found


def _abnormal(conn, table, key, column, rule, skip=()):
    """The distinct values of a column with a `normal` function that its SQL rule
    takes and the function does not give back unchanged (few: a column's index
    reads them), but in the rows `skip` keys (text that is not UTF-8)."""
    if rule.normal is None:
        return []
    but, params = _but(key, skip)
    values = conn.execute(
        f"select distinct [{column}] from [{table}] where {rule.valid.format(c=f'[{column}]')}{but}", params
    )
    return [value for (value,) in values if _normal(rule, value) != value]


def _but(key, skip):
    """(SQL, params) leaving out the rows `skip` keys; nothing when it keys none, so a
    query over a column's index stays one."""
    return (f" and [{key}] not in (select value from json_each(?))", [json.dumps(list(skip))]) if skip else ("", [])


def _unsound(conn, table, key, column, rule, skip=()):
    """The keys of the rows whose value of `column` its SQL rule takes and its
    `unsound` function does not (read only where `suspect` holds: few rows), but the
    rows `skip` keys (text that is not UTF-8)."""
    if rule.unsound is None:
        return []
    column_sql = f"[{column}]"
    but, params = _but(key, skip)
    rows = conn.execute(
        f"select [{key}], {column_sql} from [{table}] where ({rule.valid.format(c=column_sql)}) "
        f"and ({rule.suspect.format(c=column_sql)}){but}",
        params,
    )
    return [at for at, value in rows if rule.unsound(value)]


class NotUTF8(bytes):
    """A stored text's bytes that are not UTF-8 (plain SQL's cast(x'ff' as text))."""


# text holding a character past ASCII: text that may not be UTF-8
_NON_ASCII = "*[^" + chr(1) + "-" + chr(127) + "]*"


def _not_utf8(conn, table, key, column):
    """The keys of the rows whose `column` holds text that is not UTF-8, which SQLite
    stores as given and Python cannot read (read as bytes where it holds more than
    ASCII: few rows in most brains)."""
    rows = conn.execute(
        f"select [{key}], cast([{column}] as blob) from [{table}] "
        # text past ASCII, and text holding a NUL (where SQLite's GLOB and length() stop reading)
        f"where typeof([{column}]) = 'text' "
        f"and ([{column}] glob ? or length(cast([{column}] as blob)) != length([{column}]))",
        [_NON_ASCII],
    )
    found = []
    for at, data in rows:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            found.append(at)
    return found


def _normal(rule, value):
    """What `rule.normal` makes of `value`; None when it refuses it."""
    try:
        return rule.normal(value)
    except FieldError:
        return None


def _meta(conn):
    """brain_meta's model must be text naming a model installed here (recall never
    fetches one), and its dimension that of vec_knowledge: recall builds its
    vectors' arrays that wide."""
    meta = {key: value for key, value in stored_meta(conn).items() if key in ("model", "dimension")}
    found = []
    dimension = vector_dimension(conn)
    if meta.get("model") in (None, ""):  # the row deleted or emptied: the memories say which it was
        how = "set it with SQL to the model the stored vectors were made with (the memories name no one model)"
        says = "the model the stored vectors were made with"
        found.append(
            Invalid(META_TABLE, "model", "value", meta.get("model"), says, embedded_with(conn, dimension), how)
        )
    elif not isinstance(meta.get("model"), str):
        value = meta.get("model")
        found.append(Invalid(META_TABLE, "model", "value", value, "text", _repair(conn, REQUIRED, value)))
    elif not installed(meta["model"]):
        repair = embedded_with(conn, dimension)
        how = "re-embed the memories with an installed model: sqlite-utils brain reindex DB --model M"
        found.append(Invalid(META_TABLE, "model", "value", meta["model"], NOT_INSTALLED, repair, how))
    elif dimension is not None and (width := _width(meta["model"])) != dimension:
        repair = embedded_with(conn, dimension)
        how = "re-embed the memories with an installed model: sqlite-utils brain reindex DB --model M"
        says = (
            f"a model that loads here (it does not: {width})"
            if isinstance(width, str)
            else f"a model making vectors {dimension} wide, as the stored ones are (it makes them {width} wide)"
        )
        found.append(Invalid(META_TABLE, "model", "value", meta["model"], says, repair, how))
    elif (embedded := embedded_with(conn, dimension)) is not None and embedded[1] != meta["model"]:
        # as wide, but not the model every memory says it was embedded with: queries would
        # be embedded by one model and searched among another's vectors
        says = f"{embedded[1]!r}, the model every memory was embedded with"
        found.append(Invalid(META_TABLE, "model", "value", meta["model"], says, embedded))
    if dimension is not None and meta.get("dimension") != str(dimension):
        says = f"{dimension}, the dimension of the stored vectors"
        found.append(Invalid(META_TABLE, "dimension", "value", meta.get("dimension"), says, ("set", str(dimension))))
    return found


def served_model(conn: Connection) -> tuple[str, int | None]:
    """(model, dimension) a server offers embeddings with for this brain: brain_meta's,
    once they are what check takes (a model installed here, the stored vectors'
    width); else the WrongKind naming them, so one damaged brain is left out."""
    meta = stored_meta(conn)
    model, stored, recorded = meta.get("model"), vector_dimension(conn), meta.get("dimension")
    # what _meta checks, but the scan of every memory's model (asked on every request): that only to name them
    if (
        not isinstance(model, str)
        or not installed(model)
        or stored is not None
        and (_width(model) != stored or recorded != str(stored))
    ):
        raise faulted(_meta(conn) or [Invalid(META_TABLE, "model", "value", model, NOT_INSTALLED)])
    if stored is not None:
        return model, stored
    # none only in a brain of no vector yet: not known before its model loads
    return model, int(recorded) if isinstance(recorded, str) and recorded.isdigit() else None


def _width(model_id):
    """The width of the vectors installed model `model_id` makes, or why it does not
    load (a folder that holds no model, say)."""
    try:
        return model_dimension(model_id)
    except ModelError as ex:
        return str(ex).split(". ")[0]


def _schema_version(conn):
    """brain_meta's schema_version must be a whole number, as it is written (init
    and stats read it as one). It is the version the brain was made with, which
    its migrations never change (_sqlite_migrations records those): --repair
    writes the one every brain is made with. None recorded reads as None."""
    value = stored_meta(conn).get("schema_version", "0")  # text not UTF-8 read with escapes: not a number
    if isinstance(value, str) and value.isascii() and value.isdigit() and str(int(value)) == value:
        return []
    return [Invalid(META_TABLE, "schema_version", "value", value, "a whole number", ("set", str(SCHEMA_VERSION)))]


def _meta_keys(conn):
    """brain_meta's keys that are text not UTF-8 (plain SQL's): no one reads them (the
    brain's own keys are ASCII), so --repair deletes them."""
    found = []
    for (key,) in conn.execute(f"select cast(key as blob) from {META_TABLE} where typeof(key) = 'text'"):
        try:
            key.decode("utf-8")
        except UnicodeDecodeError:
            found.append(Invalid(META_TABLE, f"x'{key.hex()}'", "key", NotUTF8(key), "text", ("delete", None)))
    return found


def embedded_with(conn, dimension):
    """("set", model) when the memories that name the model they were embedded with
    (the reference system's name none) all name one, installed here and making
    vectors as wide as the stored ones; None otherwise."""
    # read as bytes: text that is not UTF-8 there is named by the row scan, and names no model
    try:
        models = conn.execute(
            "select distinct typeof(embedding_model), cast(embedding_model as blob) from knowledge "
            "where embedding_model is not null limit 2"
        ).fetchall()
    except sqlite3.OperationalError:  # knowledge dropped, or rebuilt by a tool without the column: none named
        return None
    if len(models) != 1 or models[0][0] != "text":
        return None
    try:
        model = models[0][1].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not installed(model):
        return None
    return ("set", model) if dimension is None or model_dimension(model) == dimension else None


def _repair(conn, rule, value, table=None, key=None, at=None):
    """What --repair does about `value`, stored in row `at` of `table` (Invalid.repair)."""
    if rule.derived is not None:
        value = conn.execute(f"select {rule.derived} from [{table}] where [{key}] = ?", [at]).fetchone()[0]
        return ("set", value) if _valid(conn, rule, value, table, key, at) else None
    value = _read(rule, value)
    if value is not _UNREAD and _valid(conn, rule, value, table, key, at):
        return ("set", value)
    if value is not _UNREAD and rule.read is not None:
        value = rule.read(value)
        if value is not _UNREAD and _valid(conn, rule, value, table, key, at):
            return ("set", value)
    return ("delete", None) if table in DERIVED_ROWS else None


def _read(rule, value):
    """What `value` reads as one way only under `rule`; _UNREAD when it does not."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return _UNREAD
    if isinstance(value, str) and rule.kind != "text":
        try:
            value = float(value.strip())
        except ValueError:
            return _UNREAD
    if isinstance(value, float) and rule.kind != "text":
        if not math.isfinite(value) or (rule.kind == "integer" and not value.is_integer()):
            return _UNREAD
        value = int(value) if rule.kind == "integer" else value
    if isinstance(value, int) and rule.kind == "integer" and not INT64[0] <= value <= INT64[1]:
        return _UNREAD  # 1e19 a REAL in an INTEGER column: no whole number SQLite stores
    if isinstance(value, str) and rule.normal is not None:
        value = _normal(rule, value)
    return _UNREAD if value is None else value


def _valid(conn, rule, value, table=None, key=None, at=None):
    """Whether `rule` takes `value` in place of what row `at` of `table` holds."""
    if rule.normal is not None and _normal(rule, value) != value:
        return False
    if rule.unsound is not None and rule.unsound(value):
        return False
    if table is None:
        return bool(conn.execute(f"select {rule.valid.format(c='?1')}", [value]).fetchone()[0])
    row = conn.execute(f"select {rule.valid.format(c='?1')} from [{table}] where [{key}] = ?2", [value, at]).fetchone()
    return bool(row and row[0])


def mend(conn, found):
    """Do what --repair does about each of `found` (inside the caller's transaction),
    or, when any cannot be told, change nothing and raise a BrainError naming them."""
    stuck = [item for item in found if item.repair is None]
    if stuck:
        raise BrainError(
            "check --repair cannot tell what these values should be: "
            + "; ".join(map(str, stuck[:10]))
            + (" …" if len(stuck) > 10 else "")
            + ". Set each with SQL (or restore a copy), then run sqlite-utils brain check --repair again"
        )
    for item in found:
        if item.table == META_TABLE and item.repair[0] == "delete":  # a key not UTF-8, matched as its bytes
            conn.execute(f"delete from {META_TABLE} where cast(key as blob) = ?", [bytes(item.value)])
            continue
        if item.table == META_TABLE:
            conn.execute(f"insert or replace into {META_TABLE} (key, value) values (?, ?)", [item.key, item.repair[1]])
            continue
        key = item.by or RULES[item.table][0]
        if item.repair[0] == "set":
            try:
                conn.execute(
                    f"update [{item.table}] set [{item.column}] = ? where [{key}] = ?", [item.repair[1], item.key]
                )
                continue
            except sqlite3.IntegrityError as ex:  # another row holds that already: a derived one is a repeat
                if item.table not in DERIVED_ROWS:
                    raise BrainError(
                        f"check --repair cannot make {item.table} {item.key} {item.column} {item.repair[1]!r} "
                        f"({ex}): set it with SQL, then run check --repair again"
                    ) from ex
        conn.execute(f"delete from [{item.table}] where [{key}] = ?", [item.key])


# what a value of the wrong kind makes Python raise where it is read (a BLOB's .encode, 'high' + 1)
VALUE_FAILURES = (TypeError, ValueError, AttributeError, OverflowError, KeyError)  # KeyError: a brain_meta row deleted


def fault(conn):
    """The BrainError to raise for a failure that values of the wrong kind may have
    caused: it names the first few; None when the brain holds none (or cannot be read)."""
    try:
        found = invalid(conn, limit=3)
    except sqlite3.Error:
        return None
    return faulted(found) if found else None


def faulted(found):
    """The BrainError saying to run check, naming the first few of `found` ([Invalid])."""
    return WrongKind(
        f"the brain holds values of the wrong kind ({'; '.join(map(str, found[:3]))}{' …' if len(found) > 3 else ''}): "
        "run sqlite-utils brain check"
    )


def holds_unreadable(value, depth=0):
    """Whether a result holds what no answer can carry: bytes (a BLOB read where text
    belongs) or a number JSON has not (an infinity or NaN plain SQL wrote)."""
    if depth == 0:
        try:  # most answers are plain JSON: the encoder's C code says so at once
            json.dumps(value, allow_nan=False)
            return False
        except (TypeError, ValueError, RecursionError):
            pass  # bytes, an infinity, or what JSON does not take (a Row): looked at below
    if isinstance(value, bytes) or (isinstance(value, float) and not math.isfinite(value)):
        return True
    if depth > 20:
        return False
    if isinstance(value, dict):
        return any(holds_unreadable(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple, sqlite3.Row)):  # a Row: a Datasette connection's rows
        return any(holds_unreadable(v, depth + 1) for v in value)
    return False
