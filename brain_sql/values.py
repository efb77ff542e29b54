"""What each column of a brain's tables may hold, and the rows plain SQL left holding
something else.

SQLite keeps whatever it is given: `update knowledge set confidence = 'high'`, a
BLOB title or another dimension in brain_meta is stored, and recall, pages and
repairs then meet a value they cannot read. `invalid` names each such row and
column, with the value it can be mended to when it reads one way only (a BLOB
holding UTF-8 text is that text; a number written as text is that number);
`mend` writes those, or refuses; `fault` is the BrainError that says to run check.
"""

import math
from dataclasses import dataclass

from .config import CLASSES
from .connection import sqlite3
from .errors import BrainError
from .schema import META_TABLE
from .vectors import vector_dimension


@dataclass(frozen=True)
class Rule:
    """A column's valid values: `valid`, SQL over the value `{c}` (true or false,
    never NULL), `says` them in words, and `kind`, what a wrong value may be read
    as ('text', 'real' or 'integer')."""

    valid: str
    says: str
    kind: str = "text"


TEXT = Rule("typeof({c}) in ('text', 'null')", "text or NULL")
REQUIRED = Rule("typeof({c}) = 'text'", "text")
TIME = Rule(
    "typeof({c}) = 'null' or (typeof({c}) = 'text' and unixepoch({c}) is not null)",
    "a time such as 2026-03-01 09:30:00, or NULL",
)
WHOLE = Rule("typeof({c}) in ('integer', 'null')", "a whole number or NULL", "integer")
_CLASSES = ", ".join(f"'{name}'" for name in CLASSES)

# table -> (its key column, {column: Rule})
RULES = {
    "knowledge": ("id", {
        "title": TEXT, "content": REQUIRED, "knowledge_type": TEXT, "source": TEXT, "content_hash": TEXT,
        "created_at": TIME, "flagged": Rule("typeof({c}) = 'integer'", "0, or 1 for flagged", "integer"),
        "domain": REQUIRED, "observed_at": TIME, "valid_from": TIME, "valid_to": TIME, "document_id": TEXT,
        "chunk_index": WHOLE, "heading_path": TEXT, "line_start": WHOLE, "line_end": WHOLE, "source_path": TEXT,
        "external_id": TEXT,
        "class": Rule(f"typeof({{c}}) = 'text' and {{c}} in ({_CLASSES})", f"one of {', '.join(CLASSES)}"),
        "scope": Rule("typeof({c}) = 'text' and substr({c}, 1, 1) = '/'", "a path starting with /, such as /acme"),
        "owner": TEXT, "access": TEXT, "expires_at": TIME,
        "relevance_tier": Rule("typeof({c}) = 'integer' and {c} between 0 and 3", "a whole number from 0 to 3", "integer"),
        "confidence": Rule(
            "typeof({c}) = 'null' or (typeof({c}) in ('integer', 'real') and {c} between 0 and 1)",
            "a number from 0 to 1, or NULL", "real",
        ),
        "node_kind": TEXT, "lawful_basis": TEXT, "region": TEXT, "tags": TEXT, "metadata": TEXT,
        "embedding_model": TEXT, "updated_at": TIME, "context": TEXT, "supersedes": TEXT, "superseded_at": TIME,
        "superseded_by": TEXT, "version_of": TEXT,
    }),
    "entities": ("id", {"name": REQUIRED, "entity_type": TEXT, "created_at": TIME}),
    "relationships": ("id", {"relation_type": REQUIRED, "document_id": TEXT, "created_at": TIME}),
    "documents": ("document_id", {"title": TEXT, "source_path": TEXT, "content_hash": TEXT, "ingested_at": TIME}),
}  # fmt: skip


@dataclass(frozen=True)
class Invalid:
    """One stored value of the wrong kind: where it is, what it is, what it should
    be, and what it is mended to (None: it cannot be told)."""

    table: str
    key: object
    column: str
    value: object
    says: str
    mended: object = None

    def __str__(self):
        found = f"a BLOB of {len(self.value)} bytes" if isinstance(self.value, bytes) else repr(self.value)[:60]
        mend = f"--repair makes it {self.mended!r}"[:80] if self.mended is not None else "set it with SQL"
        return f"{self.table} {self.key} {self.column}: {found}, not {self.says} ({mend})"


def invalid(conn, limit=None):
    """[Invalid] of every row holding a value its column's rule refuses, and of
    brain_meta's dimension when it is not that of the stored vectors; with
    `limit`, at most that many from each table."""
    found = []
    for table, (key, rules) in RULES.items():
        present = {row[1] for row in conn.execute(f"pragma table_info([{table}])")}
        rules = {column: rule for column, rule in rules.items() if column in present}
        if not rules:
            continue
        wrong = [f"not ({rule.valid.format(c=f'[{column}]')})" for column, rule in rules.items()]
        sql = (
            f"select [{key}], {', '.join(wrong)}, {', '.join(f'[{c}]' for c in rules)} from [{table}] "
            f"where {' or '.join(wrong)} order by [{key}]" + (f" limit {int(limit)}" if limit else "")
        )
        for row in conn.execute(sql).fetchall():
            flags, stored = row[1 : 1 + len(rules)], row[1 + len(rules) :]
            for (column, rule), bad, value in zip(rules.items(), flags, stored):
                if bad:
                    found.append(Invalid(table, row[0], column, value, rule.says, _mended(conn, rule, value)))
    return found + _meta(conn)


def _meta(conn):
    """brain_meta's model must be text, and its dimension that of vec_knowledge:
    recall builds its vectors' arrays that wide."""
    meta = dict(conn.execute(f"select key, value from {META_TABLE} where key in ('model', 'dimension')").fetchall())
    found = []
    if not isinstance(meta.get("model"), str):
        value = meta.get("model")
        found.append(Invalid(META_TABLE, "model", "value", value, "text", _mended(conn, REQUIRED, value)))
    dimension = vector_dimension(conn)
    if dimension is not None and meta.get("dimension") != str(dimension):
        says = f"{dimension}, the dimension of the stored vectors"
        found.append(Invalid(META_TABLE, "dimension", "value", meta.get("dimension"), says, str(dimension)))
    return found


def _mended(conn, rule, value):
    """What `value` reads as one way only, when that is valid under `rule`; else None."""
    if isinstance(value, bytes):
        try:
            value = value.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(value, str) and rule.kind != "text":
        try:
            number = float(value.strip())
        except ValueError:
            return None
        if not math.isfinite(number) or (rule.kind == "integer" and not number.is_integer()):
            return None
        value = int(number) if rule.kind == "integer" else number
    if value is None or not conn.execute(f"select {rule.valid.format(c='?1')}", [value]).fetchone()[0]:
        return None
    return value


def mend(conn, found):
    """Write the mended value of each of `found` (inside the caller's transaction),
    or, when any cannot be mended, change nothing and raise a BrainError naming them."""
    stuck = [item for item in found if item.mended is None]
    if stuck:
        raise BrainError(
            "check --repair cannot tell what these values should be: "
            + "; ".join(map(str, stuck[:10])) + (" …" if len(stuck) > 10 else "")
            + ". Set each with SQL (or restore a copy), then run sqlite-utils brain check --repair again"
        )
    for item in found:
        if item.table == META_TABLE:
            conn.execute(f"insert or replace into {META_TABLE} (key, value) values (?, ?)", [item.key, item.mended])
        else:
            key = RULES[item.table][0]
            conn.execute(f"update [{item.table}] set [{item.column}] = ? where [{key}] = ?", [item.mended, item.key])


def fault(conn):
    """The BrainError to raise for a failure that values of the wrong kind may have
    caused: it names the first few; None when the brain holds none (or cannot be read)."""
    try:
        found = invalid(conn, limit=3)
    except sqlite3.Error:
        return None
    if not found:
        return None
    return BrainError(
        f"the brain holds values of the wrong kind ({'; '.join(map(str, found[:3]))}{' …' if len(found) > 3 else ''}): "
        "run sqlite-utils brain check"
    )


def holds_bytes(value, depth=0):
    """Whether a result holds bytes anywhere: what a BLOB in a text column reads as."""
    if isinstance(value, bytes):
        return True
    if depth > 20:
        return False
    if isinstance(value, dict):
        return any(holds_bytes(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(holds_bytes(v, depth + 1) for v in value)
    return False
