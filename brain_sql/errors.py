"""The errors brain_sql raises for problems a user can fix; each message says how."""

from typing import Any


class BrainError(Exception):
    """A problem the user can fix; its message says how."""


class SettingError(BrainError):
    """An environment variable brain_sql reads holds a value it cannot use: said by
    name, never read as its default without a word."""


class ModelError(BrainError):
    """A model cannot be loaded, or does not match the one a brain was built with."""


class ModelRefused(ModelError):
    """A model the caller named cannot be used: no model of that name or folder can be
    loaded, or the brain was made with another. The caller's to fix (the CLI's usage
    error naming --model), unlike a model that is known but not installed here."""


class InputError(ValueError):
    """A caller's input that cannot be used as given (a field, a request, a file
    of queries): the caller's to fix, never the brain's. The HTTP API answers it
    400, the CLI with a usage error."""


class FieldError(InputError):
    """A field value that cannot be used; the message names the field."""


class QueryError(InputError):
    """A recall request that cannot be run as given; `field` names the field at fault."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class RuleRefused(BrainError):
    """A write the brain's own triggers refused (schema.rule_triggers): its message
    names the column and what it must hold."""


# how the triggers' messages begin: their refusals told from other constraints'
RULE_MARK = "brain rule: "


class WrongKind(BrainError):
    """The brain holds values of the wrong kind that plain SQL wrote (a BLOB title,
    confidence 'high'): its message names the first few, rows and values, for whoever
    holds the file; `public` says only what to do, for a caller who may not read
    every row (a server's answer)."""

    public = "the brain holds values of the wrong kind, written with plain SQL: run sqlite-utils brain check"


class ReadOnlyBrain(BrainError):
    """The brain file (or its folder, or its filesystem) cannot be written: it can
    be recalled from, and nothing was changed."""


class WriteError(BrainError):
    """Writing failed on the server's side (the disk, the file, the lock): nothing
    of the failed transaction was stored, and the same request may be tried again."""


class BrainBusy(WriteError):
    """Another writer held the brain's write lock for the whole busy timeout."""


class PruneRefused(BrainError):
    """A prune would have removed every memory of a root (an empty folder: an
    unmounted drive, a failed sync), and was not confirmed with prune_all. Nothing
    under those roots was removed; the rest of the ingest went in, and `report`,
    its IngestReport, says what it did."""

    def __init__(self, message: str, report: Any = None) -> None:  # an IngestReport: pipeline.py, floors above
        super().__init__(message)
        self.report = report
