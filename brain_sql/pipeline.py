"""Ingest: files to documents to chunks, vectors, entities and edges.

Idempotent and exact. A document whose content and fields are unchanged is
skipped outright; a changed one is written again by writer.DocumentWriter, which
keeps the chunks whose text is unchanged. Vectors are reused by content hash
across documents. This module is the pipeline around it: reading and checking
documents, batching them, embedding the next batch while one is written, writing
in short transactions that other writers take turns with (each document whole;
retried one savepoint per document when one fails), and pruning what is gone.
"""

import collections
import contextlib
import json
import os
import stat
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from . import mentions, validity
from . import state as read_state
from .config import (
    CHANGE_LOG_KEEP,
    INGEST_BATCH_DOCUMENTS,
    INGEST_TRANSACTION_SECONDS,
    MAX_CONTENT_BYTES,
    MAX_METADATA_BYTES,
    MAX_NOTE_FILE_BYTES,
    MAX_REMEMBER_CHUNKS,
    MAX_REMEMBER_NAMES,
    MAX_REMEMBER_RECORDS,
    MENTION_REMEMBER_SECONDS,
    requested_model,
)
from .connection import Connection, Turns, atomic, main_file, open_connection, write_failures
from .conversation import Sessions, flagged, said_day, said_once, stored_turns, turn_of, turns_before
from .document import (
    Document,
    IngestError,
    IngestFormat,
    TextLines,
    chunks_refusal,
    content_refusal,
    over_budget,
    oversized,
    title_refusal,
    wide_text,
)
from .embed import get_model, grouping_free
from .errors import BrainBusy, BrainError, FieldError, ModelError, ModelRefused, PruneRefused, SettingError
from .fields import ScopesAlike, ScopeSkeletons, normalize_fields
from .follower import last_change
from .mounts import MOUNTS_KEY, Mounts
from .plugins import collect
from .records import record_document
from .schema import (
    CHANGES_TABLE,
    FILE_HELD_KEY,
    META_TABLE,
    PRUNE_HELD_KEY,
    all_held,
    early_value,
    hold_ids,
    holds,
    is_brain,
    migrate,
    prune_changes,
    recorded_model,
    write_whole,
)
from .vectors import insert_vectors, storage_vectors, stored_vector, vectored
from .wording import counted, shown
from .writer import (
    CHUNKS_PER_INSERT,
    DocumentWriter,
    chunk_text,
    claimed,
    content_hash,
    may_exist,
    rewrite_contexts,
    unlinked_contexts,
)

# While a batch is embedded, progress is reported this often; its text is embedded
# this many texts at a time, so that there is progress to report (MiniLM takes
# half a minute over a batch of 1000 documents). A model that embeds each text alone
# (embed.grouping_free) takes more at a time: the default one embeds 512 texts in
# 0.2 s, with one model2vec call (and one GIL hand-back) where slices of 32 made 16
# (10,000 texts alone: 3.3 s of CPU at 512, 3.8-4.0 s at 32).
PROGRESS_SECONDS = 0.5
EMBED_SLICE = 32
EMBED_SLICE_GROUPING_FREE = 512
# A file is read through a buffer this large: each refill is a read that lets the
# embedding thread take the interpreter, and with 8 kB (a few records) waiting to
# get it back cost as much as parsing the lines.
READ_BUFFER = 1 << 20


@dataclass
class IngestReport:
    files: int = 0
    documents: int = 0
    documents_added: int = 0  # new to the brain
    documents_updated: int = 0  # stored before, with other content or fields
    documents_unchanged: int = 0  # stored before exactly so
    chunks_added: int = 0
    chunks_updated: int = 0
    chunks_unchanged: int = 0
    chunks_removed: int = 0
    # chunks written or left flagged as moved copies of flagged memories this run removed
    chunks_carried_flag: int = 0
    # chunks written anew (moved copies, a text whose line ends alone changed) that keep a review's decision
    chunks_carried_decision: int = 0
    entities: int = 0
    relationships: int = 0
    errors: list[IngestError] = field(default_factory=list)
    seconds: float = 0.0
    # a remember's mention matching left for transactions of their own (finish_remember)
    unfinished: Any = field(default=None, repr=False, compare=False)
    # why a remember's memories are stored without all the edges their text's names make
    warning: str | None = None

    def answer(self, ids: list[list[int]]) -> dict[str, Any]:
        """What a remember of these records answers, over HTTP, MCP and `remember --json`
        alike: `ids` per record, documents added, updated and unchanged, and chunks."""
        return {
            "ok": True,
            "ids": ids,
            "added": self.documents_added,
            "updated": self.documents_updated,
            "unchanged": self.documents_unchanged,
            "chunks": {
                "added": self.chunks_added,
                "updated": self.chunks_updated,
                "unchanged": self.chunks_unchanged,
                "removed": self.chunks_removed,
            },
            **({"warning": self.warning} if self.warning else {}),
        }

    def summary(self) -> str:
        """One line: files, documents, chunks (and how many carried a removed memory's
        flag or review decision), entities and relationships, what was skipped, the time."""
        carried, decided = self.chunks_carried_flag, self.chunks_carried_decision
        moved = f", {carried:,} flagged as moved copies of flagged memories" if carried else ""
        moved += f", {decided:,} keeping the review decision on the memory they replace" if decided else ""
        return (
            f"{counted(self.files, 'file')}, {counted(self.documents, 'document')}: "
            f"{counted(self.chunks_added, 'chunk')} added, {self.chunks_updated:,} updated, "
            f"{self.chunks_unchanged:,} unchanged, {self.chunks_removed:,} removed{moved}; "
            f"{counted(self.entities, 'entity', 'entities')}, {counted(self.relationships, 'relationship')} added; "
            f"{len(self.errors):,} skipped; {self.seconds:.1f}s"
        )


def discover(
    paths: Iterable[str | os.PathLike[str]],
) -> tuple[list[tuple[str, IngestFormat]], list[IngestError]]:
    """(file path, IngestFormat) for every file to ingest, each once, and errors for paths that cannot be."""
    files, errors, _ = _discover(paths)
    return files, errors


def recorded_mounts(conn):
    """{mount point: its identity} ingest read files from (brain_meta's MOUNTS_KEY), {}
    where none is recorded or the row is of another shape (an entry of another shape is
    none)."""
    if not conn.execute("select 1 from sqlite_master where name = ?", [META_TABLE]).fetchone():
        return {}
    row = conn.execute(f"select value from {META_TABLE} where key = ?", [MOUNTS_KEY]).fetchone()
    try:
        found = json.loads(row[0]) if row else {}
    except (TypeError, ValueError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {m: known for m, known in found.items() if os.path.isabs(m) and _identity(known)}


def _identity(known):
    """Whether `known` is a mount point's identity as mounts.identity writes it (a whole
    number, not a bool, as its device)."""
    return isinstance(known, dict) and type(known.get("device")) is int


def _unmounted_unread(files, mounts, report):
    """`files` but those under a recorded mount point that is out (Mounts.out_of), each
    such mount point named in the report's errors: what is there is the mount point's
    own folder, not the drive whose memories the brain holds (a note of the same name,
    written there with the drive out, would be stored over the drive's, and read as it
    by a prune)."""
    unread = collections.Counter()
    kept = []
    for path, fmt in files:
        if where := mounts.out_of(path):
            unread[where] += 1
        else:
            kept.append((path, fmt))
    for where, count in sorted(unread.items()):
        report.errors.append(
            IngestError(
                where,
                None,
                f"{counted(count, 'file')} in it not read: a drive was mounted here when the brain's memories of it "
                "were stored, and none is now (unplugged?); mount it, or ingest this folder (or one holding it) "
                "with --prune-all to read it as it is and remove the drive's memories",
            )
        )
    return kept


def _listed(paths):
    """`paths`, refused when one path is given bare: a str is a sequence of its
    characters, and "notes/" read so ingested "/", the whole disk."""
    if isinstance(paths, (str, bytes, os.PathLike)):
        raise FieldError(f"paths must be a list of paths: give [{str(paths)!r}], not {str(paths)!r}")
    return list(paths)


def _discover(paths):
    """discover's, and [(path, its IngestError)] of the files found in a folder
    whose names are not UTF-8 text."""
    paths = _listed(paths)
    unnamed = []
    formats = {suffix: f for f in collect("brain_ingest_formats") for suffix in f.suffixes}
    files, errors, paths = [], [], list(paths)
    unreachable = {given: why for given in paths if (why := _unreachable(given))}
    errors += [IngestError(str(given), None, why) for given, why in unreachable.items()]
    paths = [given for given in paths if given not in unreachable]
    walked = [Path(given).resolve() for given in paths if Path(given).resolve().is_dir()]
    for given in paths:
        path = Path(given).resolve()
        if not _decodable(str(path), ""):
            errors.append(_undecodable(str(path)))
        elif path.is_dir():
            found = []
            # a folder that cannot be read is reported, not passed over in silence
            for folder, folders, names in os.walk(path, onerror=lambda ex: errors.append(_unreadable(ex))):
                folders[:] = sorted(f for f in folders if not f.startswith("."))
                # a link to a folder is not walked (a loop, a folder walked twice): named, unless
                # where it points is walked anyway (a PATH, or a folder in one)
                links = [os.path.join(folder, f) for f in folders if os.path.islink(os.path.join(folder, f))]
                errors.extend(
                    _linked(link) for link in links if not any(_under(link, at, resolve=True) for at in walked)
                )
                folders[:] = [f for f in folders if not os.path.islink(os.path.join(folder, f))]
                names = [n for n in names if not n.startswith(".") and Path(n).suffix.lower() in formats]
                for odd in (os.path.join(folder, n) for n in names if not _decodable(folder, n)):
                    unnamed.append((odd, _undecodable(odd)))
                    errors.append(unnamed[-1][1])
                found += [Path(folder) / n for n in names if _decodable(folder, n)]
            files += [(str(child), formats[child.suffix.lower()]) for child in sorted(found)]
        elif path.exists() and not path.is_file():  # a named pipe, a device, a socket: never opened
            errors.append(IngestError(str(path), None, _refusal(path, path.stat(), None)))
        elif path.exists():
            if path.suffix.lower() in formats:
                files.append((str(path), formats[path.suffix.lower()]))
            else:
                errors.append(
                    IngestError(str(path), None, f"unsupported file type; ingest takes {', '.join(sorted(formats))}")
                )
        else:
            errors.append(IngestError(str(path), None, "no such file or folder"))
    # overlapping roots (a folder and one inside it, or the same through a symlink) name
    # a file once: it is one document, stored and counted once
    return list(dict.fromkeys(files)), errors, unnamed


def _decodable(folder, name):
    """Whether a file's path is text a brain can store (a name written on another
    system, in Latin-1 say, reaches Python as undecodable bytes)."""
    try:
        os.path.join(folder, name).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _unreachable(path):
    """Why PATH cannot be read at all, or None: a symbolic link loop (`ln -s loop
    loop`), which resolves to nothing, or a name the system will not look up (a part
    longer than 255 bytes, a folder on the way that may not be entered: review 132
    found a traceback). One that is not there is said so by _discover."""
    try:
        Path(path).resolve()
    except (RuntimeError, OSError):
        return "a symbolic link loop: nothing to read"
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as ex:
        return f"cannot be looked at: {ex.strerror or ex}"
    except ValueError:  # a NUL in the name
        return "cannot be looked at: its name holds a NUL"
    return None


def _undecodable(path):
    shown = path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return IngestError(shown, None, "its name is not UTF-8 text: rename it to ingest it")


def _prune_roots(paths):
    """The folders to prune under for PATHS: each resolved, and also as given (made
    absolute as the shell spells it) where a symbolic link makes that another
    spelling of the same folder: the memories stored under it while it was the folder
    itself (the vault since moved and linked back) are that PATH's too, pruned as
    moved when they open through the link. A spelling that opens another folder
    (`link/..` spelled out) is not the PATH's."""
    roots = []
    for given in paths:
        resolved = str(Path(given).resolve())
        for root in (resolved, _as_given(given)):
            if root not in roots and _decodable(root, "") and os.path.realpath(root) == resolved:
                roots.append(root)
    return roots


def _as_given(path):
    """`path` made absolute without resolving links: a relative one from the shell's
    folder ($PWD, where it is the process's own folder: the spelling the user sees,
    which getcwd gives resolved)."""
    path = os.fsdecode(path)
    if not os.path.isabs(path):
        here = os.environ.get("PWD")
        try:
            logical = here is not None and os.path.isabs(here) and os.path.samefile(here, ".")
        except OSError:
            logical = False
        path = os.path.join(here if logical else os.getcwd(), path)
    return os.path.normpath(path)


def _under(path, root, resolve=False):
    """Whether `path` is `root` or inside it (paths as given or resolved; a symbolic
    link is where it is, not where it points, unless `resolve`)."""
    path = Path(path).resolve() if resolve else Path(path).parent.resolve() / Path(path).name
    root = Path(root).resolve()
    return path == root or root in path.parents


def _within(path, folder):
    """Whether `path` is `folder` or inside it, as stored (no link resolved, nothing looked at)."""
    return path == folder or path.startswith(folder + os.sep)


def _linked(path):
    return IngestError(
        path, None, f"a symbolic link to a folder ({os.path.realpath(path)}), not followed: give its target as a PATH"
    )


def _unreadable(error):
    return IngestError(str(error.filename), None, f"cannot read this folder ({error.strerror or error})")


def ingest(
    conn: Connection,
    paths: Sequence[str | os.PathLike[str]],
    *,
    scope: str | None = None,
    klass: str | None = None,
    source: str | None = None,
    domain: str | None = None,
    prune: bool = False,
    prune_all: bool = False,
    progress: Callable[[int, int], object] | None = None,
    model: str | None = None,
) -> IngestReport:
    """Ingest files and folders into the brain on `conn`; returns an IngestReport.

    scope / klass / source / domain are defaults: a record's or a note's own
    fields win. `model` creates a new brain with that embedding model; a brain
    made with another one is a BrainError (re-embed it with reindex).
    `prune` removes the memories whose files under the folders in `paths` are
    gone, except where that looks like a folder unmounted or a sync that failed
    rather than files deleted: a root whose memories from before this run would
    all go (whatever new files arrived), or a folder under it that held memories
    and is still there but holds nothing to ingest. Those keep theirs, and once
    the rest of the ingest is in, PruneRefused names them; a folder deleted is
    pruned. A records file that held memories and now holds no record (emptied by
    a failed sync), or none of the records it held (another file written over it),
    keeps them too, with or without `prune`. `prune_all` removes them.
    `progress(n, documents)` is called as the work goes on, embedding included,
    with the characters of content handled since the last call and the number of
    documents handled so far.
    """
    started = time.perf_counter()
    paths = _listed(paths)
    defaults = normalize_fields({"scope": scope, "class": klass, "source": source, "domain": domain})
    _check_model(conn, model)
    migrate(conn, model)
    report = IngestReport()
    files, report.errors, unnamed = _discover(paths)
    paths = [given for given in paths if not _unreachable(given)]  # named by _discover
    prune = prune or prune_all
    # only a root that was there is pruned: an unmounted or renamed folder must not
    # read as "every file in it was deleted"; nor is one with a folder it could not read
    # (and one whose name is no text a brain stores: it was skipped by name)
    prune_roots = [p for p in paths if _decodable(str(Path(p).resolve()), "") and Path(p).resolve().exists()]
    prune_roots = prune_roots if prune else []
    # a file found with a name that is no text may be a note the brain holds, renamed by a
    # tool of another encoding: the notes of its folder stay, not every one of its PATH
    spared = [_renamed_from(path) for path, _ in unnamed] if prune else []
    if prune:
        for (folder, whole), (_, error) in zip(spared, unnamed):
            error.message += f": nothing {'under' if whole else 'in'} {folder} was pruned"
        for error in (e for e in report.errors if all(e is not error for _, error in unnamed)):
            prune_roots = [p for p in prune_roots if not _under(error.path, p)]
            error.message += ": nothing under it was pruned"
    # the PATHs as pruned under: resolved, and as given through a link (the vault moved and linked back: review 151)
    mounts = Mounts(recorded_mounts(conn), _prune_roots(paths))
    # --prune-all reads a PATH as it is: the mount points it is or holds, no other (reviews 147 H1, 148)
    given = [str(Path(r).resolve()) for r in prune_roots]
    released = [m for m in mounts.out if prune_all and any(_within(m, r) for r in given)]
    mounts.out = [m for m in mounts.out if m not in released]
    files = _unmounted_unread(files, mounts, report)
    try:
        try:
            with _Pipeline(conn, recorded_model(conn), report, progress=progress) as pipeline:
                pipeline.note_mounts(files, mounts, released)
                pipeline.mounts = mounts
                # what each root held before this run: new files never make a prune of all of that look partial
                roots = {root: pipeline.documents_under(root) for root in _prune_roots(prune_roots)}
                pipeline.hold_before_writing(files, paths)
                refused = _ingest_files(pipeline, files, defaults, roots, prune_all, spared)
        except BrainBusy as ex:
            raise BrainBusy(
                f"{ex} What was written before is kept "
                f"({counted(report.documents_added + report.documents_updated, 'document')}): "
                "run the same ingest again to write the rest."
            ) from ex
        # a big brain's read state is saved now, so that a server starting next loads it
        # instead of building it (state.persist); the time it takes is the ingest's
        read_state.persist(conn)
    finally:
        read_state.drop_ahead(conn)  # the postings flush started for persist, when it did not take them
    report.seconds = time.perf_counter() - started
    if refused:
        raise PruneRefused("; ".join(refused), report)
    return report


def stored_scopes(conn):
    """The brain's distinct scopes, one seek of knowledge's scope index each (a
    1M-memory brain's few scopes are read at once, not its million rows)."""
    return [
        scope
        for (scope,) in conn.execute(
            "with recursive s(scope) as (select min(scope) from knowledge union all "
            "select (select min(scope) from knowledge where scope > s.scope) from s where s.scope is not null) "
            "select scope from s where scope is not null"
        )
        if isinstance(scope, str) and scope.startswith("/")
    ]


_SKELETONS: dict[str, tuple[tuple, ScopeSkeletons]] = {}  # brain file -> (its last change, its scopes' skeletons)
_SKELETON_FILES = 8  # brains whose skeletons a process keeps
_SKELETONS_LOCK = threading.Lock()
_FOLLOWED_CHANGES = 50_000  # more changes than this since the skeletons were made: made anew


def stored_skeletons(conn):
    """The skeletons of the brain's scopes (fields.ScopeSkeletons), kept per brain
    file and process and brought up to date from the change log: the scopes of the
    chunks written since are added, so a remember of a scope outside ASCII costs
    in proportion to what changed, not to the brain's scopes. A scope forgotten
    since stays listed, and is confirmed with a seek before it refuses another.
    An in-memory brain, or one without a change log, is read whole each time."""
    path, version = main_file(conn), last_change(conn)
    holds = partial(_holds_scope, conn)
    if not path or version[0] is None:
        return ScopeSkeletons(stored_scopes(conn), holds)
    with _SKELETONS_LOCK:
        kept = _SKELETONS.pop(path, None)
        if kept is None or not _follow_scopes(conn, kept, version):
            kept = (version, ScopeSkeletons(stored_scopes(conn)))
        _SKELETONS[path] = (version, kept[1])  # the newest last
        while len(_SKELETONS) > _SKELETON_FILES:
            del _SKELETONS[next(iter(_SKELETONS))]
    return kept[1].confirmed_by(holds)


def _follow_scopes(conn, kept, version):
    """Add to `kept` (version, skeletons) the scopes of the chunks the change log
    names since; False when it cannot: another brain, a log that no longer reaches
    back, or a repair that says anything may have changed, or too many changes."""
    (seq, instance, stamp), skeletons = kept
    if version == kept[0]:
        return True
    if version[1] != instance or version[0] < seq or version[0] - seq > _FOLLOWED_CHANGES:
        return False
    if seq and conn.execute(f"select stamp from {CHANGES_TABLE} where seq = ?", (seq,)).fetchone() != (stamp,):
        return False  # the log no longer reaches back to where the skeletons were made, or is another file's
    changes = conn.execute(
        f"select kind, key from {CHANGES_TABLE} where seq > ? and seq <= ? and kind in ('chunk', 'all')",
        (seq, version[0]),
    ).fetchall()
    if any(kind == "all" for kind, _ in changes):
        return False
    ids = json.dumps(sorted({key for _, key in changes if isinstance(key, int)}))
    skeletons.add(
        scope
        for (scope,) in conn.execute(
            "select distinct scope from knowledge where id in (select value from json_each(?))", (ids,)
        )
        if isinstance(scope, str) and scope.startswith("/")
    )
    return True


def _holds_scope(conn, scope):
    """Whether the brain holds `scope` or a scope under it (two seeks of the scope index)."""
    return (
        conn.execute(
            "select exists(select 1 from knowledge where scope = ?1) "
            "or exists(select 1 from knowledge where scope > ?1 || '/' and scope < ?1 || '0')",
            (scope,),
        ).fetchone()[0]
        == 1
    )


def check_options(
    scope: str | None = None,
    klass: str | None = None,
    source: str | None = None,
    domain: str | None = None,
    model: str | None = None,
    path: str | os.PathLike[str] | None = None,
) -> None:
    """Refuse ingest's or remember's defaults, or a model that cannot be loaded, before
    a brain file is made for them: FieldError or ModelRefused naming the first bad one.
    Where no brain is at `path` yet, the model $BRAIN_MODEL would give it too
    (SettingError naming $BRAIN_MODEL, not --model)."""
    normalize_fields({"scope": scope, "class": klass, "source": source, "domain": domain})
    if model:
        get_model(model, fetch=True)  # loaded once for the process: the ingest finds it loaded
    elif path is not None and requested_model() and not (os.path.isfile(path) and os.path.getsize(path)):
        try:
            get_model(requested_model(), fetch=True)
        except ModelError as ex:
            raise SettingError(f"$BRAIN_MODEL: {ex}; no brain is made for it") from ex


def check_records(records: Sequence[object], **options: Any) -> IngestReport:
    """The report remember(conn, records, **options) would give in a new brain, its
    errors naming each refused record, made in a brain in memory: records refused
    for a brain not yet made make no file."""
    check_options(*(options.get(name) for name in ("scope", "klass", "source", "domain")))
    scratch = open_connection(":memory:")
    try:
        migrate(scratch)
        return prepare_remember(scratch, records, embed=False, **options).report
    finally:
        scratch.close()


def _check_model(conn, model):
    """A ModelRefused when `model` is given for a brain made with another model:
    its vectors could not be compared with the new ones."""
    if model and is_brain(conn) and recorded_model(conn) != model:
        raise ModelRefused(
            f"this brain was made with the model {recorded_model(conn)!r}, not {model!r}: ingest without --model "
            "to add to it with its own model, or re-embed it first with "
            f"`sqlite-utils brain reindex DB --model {model}`"
        )


@dataclass
class Prepared:
    """A remember's records made into documents and their new text embedded, with
    no write lock held: the write takes them as they are when the brain is as it
    was then (`seen`: its model and last change), else makes them again under the
    lock, reusing the vectors (write_remember)."""

    records: Sequence[object]
    options: dict  # remember's scope, klass, source, domain and lines
    report: IngestReport
    documents: list
    document_ids: list
    seen: tuple
    vectors: dict = field(default_factory=dict)  # content hash -> (int8, bit)


def remember(
    conn: Connection,
    records: Sequence[object],
    *,
    scope: str | None = None,
    klass: str | None = None,
    source: str | None = "remember",
    domain: str | None = None,
    lines: Sequence[int | None] | None = None,
) -> tuple[IngestReport, list[list[int]]]:
    """Store in-memory records (ingest's record fields) as memories, all or none.

    A record whose `_id` is stored already replaces that memory (counted as
    updated, or unchanged when nothing in it changed), wherever it came from.
    Returns (IngestReport, [[knowledge ids] per record]); when any record is
    malformed nothing is written and the report's errors say which and why
    (`lines`, the line each record starts on in its input, puts it in them). The
    records are written in one transaction, holding the write lock only to write:
    they are read, checked and embedded before (prepare_remember); the mention edges
    their text makes past a quarter second's matching follow in transactions of
    their own (finish_remember), done before this returns. At most
    MAX_REMEMBER_RECORDS records and MAX_REMEMBER_CHUNKS chunks (FieldError past
    them). When writing the records fails (BrainBusy when another writer held the
    lock too long), nothing is stored and WriteError is raised; when a later
    transaction of edges fails, they are stored and the report's `warning` says so.
    """
    check_options(scope, klass, source, domain)  # a refused default migrates nothing
    migrate(conn)
    prepared = prepare_remember(conn, records, scope=scope, klass=klass, source=source, domain=domain, lines=lines)
    report, ids = write_remember(conn, prepared)
    while finish_remember(conn, report):
        pass
    return report, ids


def prepare_remember(
    conn: Connection,
    records: Sequence[object],
    *,
    scope: str | None = None,
    klass: str | None = None,
    source: str | None = "remember",
    domain: str | None = None,
    lines: Sequence[int | None] | None = None,
    embed: bool = True,
) -> Prepared:
    """What remember does before taking the write lock, reading `conn` only (a
    read-only connection will do): the records checked and made into documents
    (their errors in the report), and their new text embedded (unless not `embed`)."""
    started = time.perf_counter()
    if len(records) > MAX_REMEMBER_RECORDS:
        raise FieldError(
            f"{len(records):,} records: at most {MAX_REMEMBER_RECORDS:,} in one remember "
            "(sqlite-utils brain ingest writes any number, in bounded transactions)"
        )
    options: dict[str, Any] = {"scope": scope, "klass": klass, "source": source, "domain": domain, "lines": lines}
    model_id, seen = recorded_model(conn), last_change(conn)
    report, documents, document_ids = _remembered(conn, records, model_id, **options)
    prepared = Prepared(records, options, report, documents, document_ids, (model_id, seen))
    if embed and not report.errors:
        prepared.vectors = _embedded_ahead(conn, documents, model_id)
    report.seconds = time.perf_counter() - started
    return prepared


def write_remember(conn: Connection, prepared: Prepared) -> tuple[IngestReport, list[list[int]]]:
    """Write what prepare_remember made ready, in one transaction; when the brain
    changed since (another writer wrote meanwhile), the records are made into
    documents again under the lock, so they are exactly what remember would have
    made now. Returns (IngestReport, [[knowledge ids] per record])."""
    started = time.perf_counter() - prepared.report.seconds
    migrate(conn)
    report, documents, document_ids = prepared.report, prepared.documents, prepared.document_ids
    ids: list[list[int]] = []
    if report.errors:
        return report, ids
    with write_failures("nothing was stored"):
        with atomic(conn):
            model_id, vectors = recorded_model(conn), prepared.vectors
            if (model_id, last_change(conn)) != prepared.seen:
                report, documents, document_ids = _remembered(conn, prepared.records, model_id, **prepared.options)
            if model_id != prepared.seen[0]:  # a reindex switched models meanwhile: the text is embedded again
                vectors = {}
            as_prepared = [d.document_id for d in documents]
            if not report.errors:
                with _Pipeline(conn, model_id, report, all_or_none=True, vectors=vectors) as pipeline:
                    for document in documents:
                        pipeline.add(document)
                    pipeline.flush()
    if not report.errors:
        # a record remembered with an earlier valid_from than its stored one's went to history under an id of
        # its own (validity.place_earlier): it answers with that document's memories
        placed = {before: d.document_id for before, d in zip(as_prepared, documents) if before != d.document_id}
        ids = [
            [r[0] for r in conn.execute("select id from knowledge where document_id = ? order by chunk_index", (d,))]
            for d in (placed.get(d, d) for d in document_ids)
        ]
    report.seconds = time.perf_counter() - started
    return report, ids


def finish_remember(conn: Connection, report: IngestReport) -> bool:
    """Match more of the mentions a remember's transaction left (`report.unfinished`),
    in a transaction of its own taken as a bulk writer's; returns whether any are left.
    The memories are stored already: when writing fails (the lock not had in time, the
    disk) the rest stays queued, for the next ingest or `check --repair`, and
    `report.warning` says so: the remember succeeded, never "not written"."""
    resolution = report.unfinished
    if resolution is None:
        return False
    before = resolution.added
    try:
        with write_failures("the edges were not all written"), atomic(conn, bulk=True):
            left = resolution.step(time.perf_counter() + MENTION_REMEMBER_SECONDS)
            if not left:
                prune_changes(conn, CHANGE_LOG_KEEP)
    except BrainError as ex:  # the lock, the disk, a read-only or damaged file: none unstores the memories
        why = "another writer held the write lock past the busy timeout" if isinstance(ex, BrainBusy) else str(ex)
        report.warning = (
            f"the memories are stored, but not all the edges the names in their text make ({why}): "
            "`sqlite-utils brain check --repair` on the brain's file, or its next ingest, writes the rest"
        )
        left = False
    else:
        report.relationships += resolution.added - before
    if not left:
        report.unfinished = None
    return left


def _remembered(
    conn: Connection,
    records: Sequence[object],
    model_id: str,
    *,
    scope: str | None,
    klass: str | None,
    source: str | None,
    domain: str | None,
    lines: Sequence[int | None] | None,
) -> tuple[IngestReport, list[Document], list[str]]:
    """(IngestReport with the records' errors, the documents they make, each record's
    document id) as remember reads them from `conn`; FieldError past MAX_REMEMBER_CHUNKS
    or MAX_REMEMBER_NAMES."""
    defaults = normalize_fields({"scope": scope, "class": klass, "source": source, "domain": domain})
    report = IngestReport()
    documents, document_ids = [], []
    seen: dict[object, str] = {}  # document id (or ("placed", id): _accept) -> its content's hash
    extractors = collect("brain_entity_extractors")
    sessions = Sessions(
        partial(stored_turns, conn),
        partial(flagged, conn),
        partial(turns_before, conn),
        partial(_corrected_day, conn),
    )
    scopes = ScopesAlike(partial(stored_skeletons, conn))
    supersedes = validity.Supersedes(conn)
    versions = []  # (record number, line, document) of each placed by its _version_of
    numbers = []  # (record number, line) of each document
    for number, record in enumerate(records, 1):
        line = lines[number - 1] if lines else None
        item = record_document("remember", record, line, f"record {number}")
        if isinstance(item, Document) and not item.placed:  # a placed one is put back where it was
            item.source_path = None
            item = _stored_as(conn, item, number)
        if isinstance(item, Document):
            _said_again(item, seen)  # before its id is told
            document_ids.append(item.document_id)
        item = _accept(item, defaults, seen, model_id, extractors, sessions, scopes, supersedes)
        if isinstance(item, IngestError):
            if not item.message.startswith(f"record {number}:"):
                item = IngestError("remember", line, f"record {number}: {item.message}")
            report.errors.append(item)
        elif item is not None:  # None: a repeat of an earlier record, stored once
            documents.append(item)
            numbers.append((number, line))
            if item.version_of:
                versions.append((number, line, item))
    current = {d.document_id for d in documents if not d.version_of}
    report.errors.extend(_unversioned(conn, versions, current))
    for position, why in claimed(conn, documents).items():  # refused before writing: remember is all or none
        number, line = numbers[position]
        report.errors.append(IngestError("remember", line, f"record {number}: {why}"))
    chunks = sum(len(document.chunks) for document in documents)
    if chunks > MAX_REMEMBER_CHUNKS:
        raise FieldError(
            f"the records make {chunks:,} memories (chunks): at most {MAX_REMEMBER_CHUNKS:,} in one remember "
            "(sqlite-utils brain ingest writes any number, in bounded transactions)"
        )
    names = sum(len(d.entities) + len(d.relations) + len(d.tags) + len(d.aliases) for d in documents)
    if names > MAX_REMEMBER_NAMES:
        raise FieldError(
            f"the records state {names:,} entities, relations, tags and aliases: at most {MAX_REMEMBER_NAMES:,} "
            "in one remember (sqlite-utils brain ingest writes any number, in bounded transactions)"
        )
    return report, documents, document_ids


def _unversioned(conn, versions, current):
    """An error for each record placed as an earlier version (`_version_of`) that
    validity.version_refusal refuses, `current` being the call's current records."""
    given = {document.document_id: document.version_of for _, _, document in versions}
    for number, line, document in versions:
        why = validity.version_refusal(conn, document, current, given)
        if why:
            yield IngestError("remember", line, f"record {number}: {why}")


def _embedded_ahead(conn, documents, model_id):
    """{content hash: (int8, bit)} of the documents' chunk texts that no stored
    chunk has a vector for: embedded before the write lock is taken."""
    texts = {}
    for document in documents:
        for chunk in document.chunks:
            text = chunk_text(document, chunk)
            texts[content_hash(text)] = text
    todo = {digest: text for digest, text in texts.items() if stored_vector(conn, digest, model_id) is None}
    return dict(zip(todo, storage_vectors(list(todo.values()), model_id))) if todo else {}


def _corrected_day(conn, document):
    """The day the stored turn `document` corrects was said (conversation.said_day),
    None when it is none or `document` is a new version beside it (validity.place_of:
    a new memory, said when it says)."""
    day = said_day(conn, document.document_id)  # one indexed read; a new turn's finds nothing
    return None if day is None or validity.place_of(conn, document) else day


def _stored_as(conn, document, number):
    """A remembered record under the id of the document it updates: the one stored
    with its `_id` (a record ingested from a file keeps that file's document id),
    else its own. An `_id` that several stored documents carry is an IngestError:
    which of them to replace is not the record's to guess."""
    if document.external_id is None:
        return document
    stored = [
        document_id
        for (document_id,) in conn.execute(
            "select distinct document_id from knowledge where external_id = ? and document_id is not null "
            "and version_of is null order by document_id",  # earlier versions kept as history are not updated
            (document.external_id,),
        )
    ]
    if len(stored) > 1 and document.document_id not in stored:
        return IngestError(
            "remember",
            document.line,
            f"record {number}: _id {document.external_id!r} is stored in {len(stored)} documents "
            f"({', '.join(stored[:3])}{' …' if len(stored) > 3 else ''}): forget all but one of them first",
        )
    if len(stored) == 1:
        document.document_id = stored[0]
    return document


def _ingest_files(pipeline, files, defaults, prune_roots, prune_all, spared=()):
    """Ingest `files`, then prune under `prune_roots` ({root: the documents it held
    before}) but the folders `spared` holds (Pipeline.prune); returns why roots or
    folders under them were not pruned."""
    report = pipeline.report
    extractors = collect("brain_entity_extractors")
    scopes = ScopesAlike(partial(stored_skeletons, pipeline.conn))
    supersedes = validity.Supersedes(pipeline.conn)
    versions = {}  # {document id: the record it is an earlier version of}, as the run accepted them
    emptied = []
    pipeline.hold({}, (), FILE_HELD_KEY)  # holds a version before 7 December 2026 wrote: a row each, read by file
    judged, kept = set(), {}
    for path, fmt in files:
        report.files += 1
        seen, failed = {}, False
        before, held = (
            (set(), pipeline.held_file(path) is not None) if prune_all else _judged_against(pipeline, path, seen)
        )
        sessions = Sessions(hidden=partial(flagged, pipeline.conn), day=partial(_corrected_day, pipeline.conn))
        for item in _read(path, fmt):
            given = {"source": fmt.default_source, **defaults}
            item = _accept(item, given, seen, pipeline.model_id, extractors, sessions, scopes, supersedes)
            if isinstance(item, Document) and item.version_of:  # history of itself, of history, or of history's
                why = validity.version_refusal(pipeline.conn, item, given=versions)
                if why:
                    item = IngestError(path, item.line, why)
                else:
                    versions[item.document_id] = item.version_of
            elif isinstance(item, Document):  # placed as history by its valid_from: of no version
                why = validity.placed_refusal(pipeline.conn, item, versions)
                if why:
                    item = IngestError(path, item.line, why)
            if isinstance(item, IngestError):  # named by the file it is read from, not the one a record gives
                report.errors.append(IngestError(path, item.line, item.message))
                failed = True
                continue
            if item is None:
                continue  # the same record again: stored once
            item.read_from = path
            pipeline.add(item)
        if failed:  # a file with a bad record keeps the rest, so a typo never deletes memories
            if path in pipeline.held_early and not held and not before.isdisjoint(seen):
                judged.add(path)  # nor does it end a hold, but the one it made, an earlier record read (review 133)
            continue
        if held or path in pipeline.held_early:
            judged.add(path)
        if before and not seen:
            # a file that held records and now holds none was emptied by a failed sync or a
            # full disk far more often than on purpose: its memories stay, and the ingest says so
            emptied.append(f"{path} holds no records now: the memories it held were kept (--prune-all removes them)")
            kept[path] = before
        elif before and before <= pipeline.removable("source_path = ?", (path,), keep=seen):
            # every record it held replaced by others: another file written over it, as likely as an edit; and
            # on the next run too, whose records its run stored are new still (review 128): held at the run's end
            emptied.append(pipeline.replaced(path, before))
            kept[path] = before
        else:
            # records no longer in the file are gone from the brain too
            pipeline.remove_documents("source_path = ?", (path,), keep=seen)
    pipeline.write_pending()
    pipeline.hold(kept, judged, FILE_HELD_KEY)
    pipeline.join_held()
    live = _folders_of(path for path, _ in files)
    read = {path for path, _ in files}
    refused, told = [], set()  # a folder under two PATHs (vault vault/sub) is refused once (review 127, L1)
    for root, held in prune_roots.items():
        found = pipeline.prune(root, held, live, prune_all, read, spared)
        refused += [why for folder, why in found if folder not in told]
        told |= {folder for folder, _ in found}
    pipeline.flush()
    return emptied + refused


def _judged_against(pipeline, path, seen):
    """The documents the file `path` held before this run (none of its written yet),
    those a hold kept if it is held, and whether it is held: read now, not at the
    run's start, as another ingest may have held it meanwhile (review 133, H1). A hold
    none of whose documents is stored any more (forgotten) holds nothing (H2). Watched
    from here if not held (watch_replaced)."""
    before = pipeline.documents("source_path = ?", (path,))
    held = pipeline.held_file(path)
    if held is not None and not before.isdisjoint(held):
        return before & held, True
    if before:
        pipeline.watch_replaced(path, before, seen)
    return before, held is not None


def _folders_of(paths):
    """Every folder that holds one of `paths`, at any depth."""
    folders = set()
    for path in paths:
        folder = os.path.dirname(path)
        while folder not in folders and folder != os.path.dirname(folder):
            folders.add(folder)
            folder = os.path.dirname(folder)
    return folders


def _there(root, stored, live, read):
    """Whether a file or folder stored under `root` (resolved) is there for a prune:
    may_exist, and, when it is reached through a symbolic link (itself or a folder of
    it under `root`), not read where it really is: the walk follows no link, so a note
    moved and linked back is stored again under its real path once a PATH reaches it,
    and its copy under the link's path is then gone (moved). A file is read where it
    is when `stored(real path)` (the brain holds a document from it), a folder when it
    is one of `live` (it holds files read now). Through a link to what nothing reads
    (a dot-folder, a PATH not given, a note too big) it is there: its memories stay;
    and a file this run read (`read`: a link to a file is read as the note it opens,
    a copy under another name) is there."""
    linked = {root: os.path.realpath(root) != root}  # a PATH as given, through a link: every file of it is
    # a records file (many documents, named by their ids) reached through a link is there: the link may
    # open other records (another file linked over it), which the guard against a file written over
    # it never sees under the link's path; kept, at worst stored twice
    records = {s for f in collect("brain_ingest_formats") if f.default_source == "import" for s in f.suffixes}

    def through(folder):
        if folder not in linked:
            parent = os.path.dirname(folder)
            under = parent != folder and folder.startswith(root + os.sep)
            linked[folder] = under and (os.path.islink(folder) or through(parent))
        return linked[folder]

    def there(path):
        if path in read:
            return True
        if not may_exist(path):
            return False
        if not (os.path.islink(path) or through(os.path.dirname(path))):
            return True
        if os.path.splitext(path)[1].lower() in records:
            return True
        real = os.path.realpath(path)
        return real == path or not (real in live if os.path.isdir(real) else stored(real))

    return there


def _folder_now(path):
    try:
        return os.path.isdir(path)
    except OSError:  # cannot be looked at: not known to be a folder, so there (may_exist)
        return False


def _emptied_folder(folder, root, live, remaining, there=may_exist):
    """(folder, why) for the outermost folder under `root` that holds `folder` (a gone
    file's) and is still there but holds nothing to ingest (`live`: the folders that
    do; why "nothing") or none of its files of before (`remaining`: the folders that
    hold one; why "new"), as a drive unmounted from it or a failed sync leaves it;
    None when the nearest of them still there is the root or keeps files of before:
    the file, or a folder of it, was deleted."""
    while folder.startswith(root + os.sep) and not there(folder):
        folder = os.path.dirname(folder)
    empty = folder not in live
    if not folder.startswith(root + os.sep) or not empty and folder in remaining:
        return None
    while os.path.dirname(folder) != root and os.path.dirname(folder) not in (live if empty else remaining):
        folder = os.path.dirname(folder)
    return folder, "nothing" if empty else "new"


def _holds(folder, whole, path):
    """Whether `path` is a file in `folder`, or under it when `whole`."""
    return os.path.dirname(path) == folder or whole and path.startswith(folder + os.sep)


def _dangling(folder, root, links):
    """The symbolic link to a folder that is not there (a drive unplugged) that
    `folder` (a gone file's, under `root`) is in, or None; `links` caches each
    folder's answer."""
    if folder not in links:
        outer = os.path.dirname(folder)
        if not folder.startswith(root + os.sep):
            links[folder] = None
        elif os.path.islink(folder) and not os.path.exists(folder):
            links[folder] = folder
        else:
            links[folder] = _dangling(outer, root, links)
    return links[folder]


def _placeholder(path):
    """Whether the note `path` names is evicted by a cloud sync to a placeholder beside
    it (iCloud Drive's .NAME.icloud): not downloaded, not deleted."""
    folder, name = os.path.split(path)
    return bool(name) and os.path.lexists(os.path.join(folder, f".{name}.icloud"))


def _renamed_from(path):
    """(folder, whole) for a file found with a name that is not UTF-8 text, which a
    tool of another encoding may have renamed from a note the brain holds: the
    folder the path's first such part is in, and whether that part is a folder's
    (then every note under the folder may be one; else only the folder's own)."""
    part = path
    while not _decodable(os.path.dirname(part), ""):
        part = os.path.dirname(part)
    return os.path.dirname(part), part != path


# why a folder was not pruned (Pipeline._refusal) that a later run must hold to, though it stored new files there
HELD_REFUSALS = ("root", "root, moved", "new", "nothing")


def _documents_under(root):
    """(where, params) selecting the documents from files under `root` (a folder, as
    stored: resolved, or as given for _prune_roots)."""
    # a range, not LIKE: LIKE ignores the case of ASCII letters, and /x/Notes is not /x/notes
    return "source_path = ? or (source_path >= ? and source_path < ?)", (root, root + "/", root + "0")


def _read(path, fmt):
    """The documents of one file, read within its bounds: a regular file only, its
    type and size taken before a byte is read; one read whole no larger than its
    format's max_bytes (at most a byte more is read, should it grow meanwhile), one
    read by line a line at a time (document.TextLines)."""
    try:
        refused = _refusal(path, os.stat(path), fmt)
        if refused is None:
            # opened without waiting (a file swapped for a named pipe since would block), then looked at again
            descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(descriptor, "rb", buffering=READ_BUFFER) as stream:
                refused = _refusal(path, os.fstat(descriptor), fmt)
                if refused is None and fmt.by_line:
                    yield from fmt.parse(path, TextLines(path, stream))
                    return
                data = stream.read(fmt.max_bytes + 1) if refused is None else b""
                if len(data) > fmt.max_bytes:
                    refused = _too_large(fmt, len(data))
    except OSError as ex:
        yield IngestError(path, None, f"cannot read: {ex.strerror or ex}")
        return
    if refused is not None:
        yield IngestError(path, None, refused)
        return
    if wide := wide_text(data):
        yield IngestError(path, None, wide)
        return
    try:
        text = data.decode("utf-8")  # line ends as written: each format reads its own
    except UnicodeDecodeError as ex:
        line = data[: ex.start].count(b"\n") + 1
        yield IngestError(path, line, f"not UTF-8 text (byte 0x{data[ex.start]:02x} at offset {ex.start})")
        return
    yield from fmt.parse(path, text.removeprefix("\ufeff"))


_KINDS = {
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
    stat.S_IFDIR: "a folder",
}


def _refusal(path, status, fmt):
    """Why the file at `path` (its `status`) is not read, or None: only a regular
    file is, and one read whole only up to its format's max_bytes."""
    if not stat.S_ISREG(status.st_mode):
        kind = _KINDS.get(stat.S_IFMT(status.st_mode), "not a regular file")
        if os.path.islink(path):
            kind = f"a symlink to {os.path.realpath(path)}, {kind}"
        return f"{kind}: only regular files are read; skipped"
    if fmt is not None and not fmt.by_line and status.st_size > fmt.max_bytes:
        return _too_large(fmt, status.st_size)
    return None


def _too_large(fmt, size):
    if fmt.max_bytes == MAX_NOTE_FILE_BYTES:
        why = (
            f"a note or text file is one memory: its content at most {MAX_CONTENT_BYTES:,} bytes (1 MB) "
            f"and its frontmatter {MAX_METADATA_BYTES:,}"
        )
    else:
        why = f"a {fmt.name} file is read whole (a JSON lines file, a line at a time, may be of any size)"
    return f"file is {size:,} bytes; the limit is {fmt.max_bytes:,} ({why}): skipped unread"


def _accept(item, defaults, seen, model_id, extractors, sessions, scopes, supersedes):
    """A prepared Document to write, None for an exact repeat of one already
    accepted, or an IngestError; `seen` maps document ids to their hashes, and
    `supersedes` (a validity.Supersedes) refuses a supersedes cycle."""
    if not isinstance(item, Document):
        return item
    _said_again(item, seen)
    try:
        item = _prepare(item, defaults, extractors, sessions, scopes)
        if isinstance(item, IngestError):
            return item
        digest = _document_hash(item, model_id)
    except Exception as ex:  # a malformed document never stops the others
        return IngestError(item.source_path, item.line, f"cannot be read: {ex}")
    # as an earlier version, one document an id: where its valid_from places it (seen as ("placed", id)), or
    # the id its _version_of gives
    place = validity.place_of(supersedes.conn, item)
    twice = place is not None and (("placed", place[0]) in seen or (not item.version_of and place[0] in seen))
    if item.document_id in seen or ("placed", item.document_id) in seen or twice:
        if seen.get(item.document_id) == digest:
            return None
        if twice:
            why = validity.taken_twice(place)
        else:
            why = (
                f"repeats the id of an earlier record with other content: {shown(item.external_id or item.document_id)}"
            )
        return IngestError(item.source_path, item.line, why)
    cycle = supersedes.refusal(item)
    if cycle is not None:
        return IngestError(item.source_path, item.line, cycle)
    seen[item.document_id] = digest
    if place and not item.version_of:
        seen[("placed", place[0])] = digest
    item.digest = digest
    return item


def _said_again(document, seen):
    """A conversation turn without an `_id` is known by its words and fields, which a
    turn says again ("ok", "thanks!"): said again further on among the records of one
    file or call (`seen`, _accept's), it is another turn, stored as ~2, ~3, ...; the
    file ingested again, or the call sent again, finds each where it was."""
    if document.external_id is not None or document.placed or document.document_id not in seen:
        return
    if turn_of(document) is None:
        return
    said = ("said", document.document_id)  # the last number given: no scan from ~2 each time
    number = seen.get(said, 1) + 1
    while f"{document.document_id}~{number}" in seen:
        number += 1
    seen[said] = number
    document.document_id = f"{document.document_id}~{number}"


def _prepare(document, defaults, extractors, sessions, scopes):
    """Check a document against the caps and its scope against the brain's
    (`scopes`, a fields.ScopesAlike), apply defaults, run entity extractors, link
    a conversation turn into its session (`sessions`, a conversation.Sessions)."""

    def error(message):
        return IngestError(document.source_path, document.line, message)

    too_much = (
        title_refusal(document.title)
        or chunks_refusal(len(document.chunks))
        or content_refusal(
            document.content_bytes
            if document.content_bytes is not None
            else "".join(c.content for c in document.chunks)
        )
    )
    if too_much:
        return error(too_much)
    if not document.chunks:
        return error("no text to remember")
    document.fields = {**defaults, **document.fields}
    if document.stated_size is None:  # made by a plugin's format: its parts as an export states them
        size = oversized({"_id": document.external_id, "tags": document.tags, "metadata": document.metadata})
        if isinstance(size, str):
            return error(size)
        document.stated_size = size
    too_large = over_budget(document.stated_size, document.fields)  # with the defaults given it
    if too_large:
        return error(too_large)
    alike = scopes.refusal(document.fields.get("scope") or "/")
    if alike:
        return error(alike)
    for extractor in () if document.exported else extractors:
        document.relations = document.relations + list(extractor(document))
    sessions.add(document)
    if not document.title and (
        document.entities or document.aliases or document.tags or any(r.from_name is None for r in document.relations)
    ):
        return error("entities, tags, aliases and relations need a title: the title names the record in the graph")
    return document


class _Same(Exception):
    """A write _Pipeline._unless_same takes back: it changed nothing."""


def _exported_again(document, plan):
    """Whether stored `document` is given again by an export record (its chunks name
    their memories) holding every stored chunk's text and no other: what
    _Pipeline._unless_same may find changes nothing."""
    return any(chunk.memory_id is not None for chunk in document.chunks) and not plan["new"] and not plan["removed"]


def _document_hash(document, model_id):
    return content_hash(
        json.dumps(
            [
                model_id,
                document.title,
                document.external_id,
                document.fields,
                document.tags,
                document.aliases,
                document.metadata,
                document.entities,
                [_given(r, _DEFAULTS["relation"]) for r in document.relations],
                # a turn's context leaves it out: the quotes in it follow forgets, flags and
                # corrections in place (writer.restate), which an unchanged file must not undo
                [_given(c, _DEFAULTS["chunk"]) for c in document.chunks],
                # a turn's day where its record gave an offset (its title and context say it):
                # added only then, so that every other document hashes as it always has
                *([str(document.said_on)] if document.said_on and turn_of(document) else []),
            ],
            sort_keys=True,
            default=str,
        )
    )


# what an exported record alone gives a chunk or a relation, at the value every other
# input leaves it: left out of the hash, so that such a document hashes as it always has
_DEFAULTS = {
    "chunk": {"memory_id": None, "fields": {}, "flagged": False, "context": object(), "code": object()},
    "relation": {"from_type": "entity"},
}


def _given(item, defaults):
    """`item`'s attributes but those at their `defaults` (context, and a note's code lines, read from
    its text: always left out)."""
    return {k: v for k, v in vars(item).items() if k not in defaults or (k not in _UNHASHED and v != defaults[k])}


_UNHASHED = ("context", "code")


class _Pipeline:
    """Collects documents into batches and writes them in short transactions.

    Batches move through a two-stage pipeline: while one batch is written, the
    next one's new text is embedded on a worker thread (the tokenizer and SQLite
    both release the GIL while they work). With the writer busy on one core, the
    tokenizer's own thread pool would only oversubscribe the other, so it is
    switched off (TOKENIZERS_PARALLELISM) until the ingest ends.

    Other writers take turns with it: an ingest writes in transactions of about
    INGEST_TRANSACTION_SECONDS of work each, every document whole, and begins the
    next one only after a pause (`_turn`). A remember (`all_or_none`) writes in
    its caller's one transaction.
    """

    def __init__(self, conn, model_id, report, all_or_none=False, progress=None, vectors=None):
        self.conn, self.model_id, self.report = conn, model_id, report
        self.vectors = vectors or {}  # content hash -> (int8, bit): embedded ahead (a remember's)
        self.all_or_none = all_or_none  # a failure fails the whole run: no per-document retry
        self.progress = progress  # progress(characters, documents done), as ingest() says
        self.done = 0  # documents whose batch is written
        self.turns = Turns(conn)
        self.writer = DocumentWriter(conn, model_id, report)
        if all_or_none:
            self.writer.mentioned = {"chunk": [], "entity": []}
        self.pending = []
        self.embedding = None  # the _Batch embedded ahead of the writer
        self.replacing = {}  # records file -> (the documents it held, its records read so far): watch_replaced
        self.held_early = set()  # records files held by the transaction that first wrote one of their records
        self.held_records = {}  # {held folder: (the records files this run reads of its hold, their documents)}
        self.mounts = None  # a Mounts: nothing under a recorded mount point that is out is pruned
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="brain-embed")
        self.parallelism = os.environ.get("TOKENIZERS_PARALLELISM")
        os.environ["TOKENIZERS_PARALLELISM"] = "false"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.executor.shutdown(cancel_futures=True)
        if self.parallelism is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = self.parallelism

    def add(self, document):
        self.pending.append(document)
        if len(self.pending) >= INGEST_BATCH_DOCUMENTS:
            self._advance()

    def _advance(self):
        """Start embedding the pending documents; write the batch embedded before them."""
        documents, self.pending = self.pending, []
        batch = _Batch(documents, self._texts_to_embed(documents))
        batch.future = self.executor.submit(self._embed, batch)
        previous, self.embedding = self.embedding, batch
        if previous:
            self._commit(previous)

    def _embed(self, batch):
        """storage_vectors of the batch's texts, a slice at a time, counting the
        characters embedded (the writer's thread reports them as progress)."""
        texts, vectors = list(batch.texts.values()), []
        step = EMBED_SLICE_GROUPING_FREE if grouping_free(self.model_id) else EMBED_SLICE
        for start in range(0, len(texts), step):
            part = texts[start : start + step]
            vectors += storage_vectors(part, self.model_id)
            batch.embedded += sum(map(len, part))
        return vectors

    def _embedded(self, batch):
        """{content hash: vectors} of the batch (and those embedded ahead), reporting
        progress while they come."""
        while self.progress and not wait([batch.future], timeout=PROGRESS_SECONDS).done:
            self._report_progress(batch, batch.embedded / batch.characters)
        return {**self.vectors, **dict(zip(batch.texts, batch.future.result()))}

    def _report_progress(self, batch, share):
        """Report `share` of the batch done: its embedding so far, or 1 once written."""
        if self.progress:
            size = round(batch.size * share)
            self.progress(size - batch.reported, self.done + round(len(batch.documents) * share))
            batch.reported = size

    def write_pending(self):
        """Write everything added so far."""
        if self.pending:
            self._advance()
        previous, self.embedding = self.embedding, None
        if previous:
            self._commit(previous)

    def flush(self):
        """Write everything added so far, give its copies of removed memories their
        decisions, then find the mentions it brought."""
        self.write_pending()
        if self.writer.decisions_to_carry():
            with contextlib.nullcontext() if self.all_or_none else atomic(self.conn):
                self.writer.carry_decisions()
        if self.all_or_none:  # a remember: its own mentions, in its caller's transaction as far as they go
            mentioned = self.writer.mentioned
            resolution = mentions.Resolution(self.conn, mentioned["chunk"], mentioned["entity"])
            if resolution.step(time.perf_counter() + MENTION_REMEMBER_SECONDS):
                self.report.unfinished = resolution  # the rest in transactions of their own: finish_remember
            else:
                prune_changes(self.conn, CHANGE_LOG_KEEP)
            self.report.relationships += resolution.added
            return
        # the snapshot's postings, built by a second process while the mentions are found here
        read_state.persist_ahead(self.conn)
        self._in_turns(partial(mentions.follow_names, self.conn))  # the name index up to date, for prepare
        resolution = mentions.Resolution(self.conn).prepare()  # its automatons built before taking the lock
        self._in_turns(resolution.step, partial(prune_changes, self.conn, CHANGE_LOG_KEEP))
        self.report.relationships += resolution.added

    def remove_documents(self, where, params, keep=()):
        """Remove the documents `where` selects but those in `keep`, in transactions
        of their own. Documents still in the pipeline are never among those removed:
        they came from files being ingested, in `keep`."""
        self._remove(where, params, keep)

    def documents(self, where, params):
        """The ids of the stored documents `where` selects."""
        return {row[0] for row in self.conn.execute(f"select document_id from documents where {where}", params)}

    def _stored(self, path):
        """Whether the brain holds a document read from the file at `path` (never one
        whose name is not UTF-8 text: such a file is not read)."""
        if not _decodable(path, ""):
            return False
        return self.conn.execute("select 1 from documents where source_path = ? limit 1", [path]).fetchone() is not None

    def removable(self, where, params, keep):
        """The ids of the documents remove_documents would remove."""
        return set(self.writer.removable(where, params, keep)[1])

    def documents_under(self, root):
        """The ids of the documents from files under `root`."""
        return self.documents(*_documents_under(root))

    def every_held(self, key=PRUNE_HELD_KEY):
        """{folder (or records file, for FILE_HELD_KEY): the documents it held when a run
        first refused to prune it} of the refusals that still hold (schema.holds)."""
        return all_held(holds(self.conn, key))

    def held_file(self, path):
        """The documents a hold keeps for the records file `path`, or None: one row read."""
        row = self.conn.execute(
            f"select cast(value as blob) from {META_TABLE} where key = ?", [f"{FILE_HELD_KEY}:{path}"]
        ).fetchone()
        return hold_ids(row[0]) if row else None

    def held_over(self, root, key=PRUNE_HELD_KEY):
        """every_held's entries that are `root`, under it, or over it (a hold made for
        the vault holds for a run given one of its folders)."""
        return {f: ids for f, ids in self.every_held(key).items() if _within(f, root) or _within(root, f)}

    def new_under(self, root, held):
        """The stored documents under `root` that a `held` folder (or file) it is, or is
        under or over, did not hold when it was refused: new to the guard still,
        whichever run stored them (a refused one, a plain ingest, one stopped)."""
        found = set()
        for name, ids in held.items():
            inner = name if name.startswith(root + os.sep) else root
            found |= self.documents(*_documents_under(inner)) - ids
        return found

    def hold(self, refused, judged, key=PRUNE_HELD_KEY):
        """Record `refused` ({folder or file: the documents it held}) as held under
        brain_meta's `key`, and forget those of `judged` (the names this run judged)
        not refused now, and any of those whose documents are all gone (pruned, or
        deleted). Read again in the write transaction: another ingest may have held
        something meanwhile (review 130)."""

        def merged(every):
            kept = {name: ids for name, ids in every.items() if name not in judged or name in refused}
            kept |= {name: frozenset(ids) | kept.get(name, frozenset()) for name, ids in refused.items()}
            checked = set(judged) | set(refused)
            return {name: ids for name, ids in kept.items() if ids and (name not in checked or self._any_stored(ids))}

        held = holds(self.conn, key)
        if merged(all_held(held)) == held.rows == held.whole and not held.early:
            return
        with self._turn():
            self._store_held(key, merged)

    def _store_held(self, key, merged):
        """Write merged(the holds of brain_meta's `key`) there, in the caller's
        transaction: a row each, only those that change (thousands of files held
        write what each holds once), and the one row of them all that versions before
        7 December 2026 read (review 134: one of them running beside this one, or
        after a downgrade, would otherwise prune what is held)."""
        held = holds(self.conn, key)
        rows, whole = held.rows, held.whole
        kept = merged(all_held(held))
        for name in rows.keys() - kept.keys():
            self.conn.execute(f"delete from {META_TABLE} where key = ?", [f"{key}:{name}"])
        for name, ids in kept.items():
            if rows.get(name) != ids or name in held.early:
                self.conn.execute(
                    f"insert or replace into {META_TABLE} (key, value) values (?, ?)",
                    [f"{key}:{name}", json.dumps(sorted(ids))],
                )
        if kept != whole:
            write_whole(self.conn, key, kept)

    def watch_replaced(self, path, before, seen):
        """Hold the records file `path` (`before`: the documents it held) in the
        transaction that first writes one of its records, unless one of `before` is
        among `seen` (its records read so far) by then: a run stopped inside a file
        written over by another export must leave the next run judging that file
        against what it held, not against the records the stopped run stored (review
        130). The file's end judges it (hold, in `judged`)."""
        self.replacing[path] = (before, seen)

    def _hold_replaced(self, documents):
        """Hold, in the current transaction, the watched records files of
        `documents` none of whose earlier records has been read again; returns the
        files looked at (their watch ends once this transaction commits)."""
        looked = {d.read_from for d in documents if d.read_from in self.replacing}
        early = {
            path: self.replacing[path][0]
            for path in looked
            if self.replacing[path][0].isdisjoint(self.replacing[path][1])
        }
        for path, ids in early.items():  # with what another ingest may have held of it meanwhile
            ids = ids | (self.held_file(path) or frozenset())
            # marked early: into the one row of all holds at the run's end, or the next run's start
            self.conn.execute(
                f"insert or replace into {META_TABLE} (key, value) values (?, ?)",
                [f"{FILE_HELD_KEY}:{path}", early_value(ids)],
            )
        self.held_early |= early.keys()
        return looked

    def note_mounts(self, files, mounts, released):
        """Record the mount points (but /) of the `files` this run reads, with their
        devices, before it writes one; forget those `released` (read as they are by
        --prune-all) and those out under which no document is stored (a drive retired).
        Merged with the row as it is in the write transaction: another ingest may have
        recorded its own meanwhile (review 147, H3)."""
        found = mounts.found(path for path, _ in files)

        def kept(m):
            return m not in released and (m not in mounts.out or self._stored_under(m))

        def merged(recorded):
            return {m: d for m, d in recorded.items() if kept(m)} | found

        if merged(mounts.recorded) == mounts.recorded:
            return
        with self._turn():
            recorded = recorded_mounts(self.conn)
            if merged(recorded) != recorded:
                self.conn.execute(
                    f"insert or replace into {META_TABLE} (key, value) values (?, ?)",
                    [MOUNTS_KEY, json.dumps(merged(recorded), sort_keys=True)],
                )

    def _stored_under(self, folder):
        where, params = _documents_under(folder)
        return self.conn.execute(f"select 1 from documents where {where} limit 1", params).fetchone() is not None

    def hold_before_writing(self, files, paths):
        """Hold, before this run writes a file, each folder that gets a new file while
        none of the files stored from under it is there (a "not mounted" note in an
        unmounted drive's mount point): a run that stores that note without judging a
        prune (a plain ingest, a watcher given the one file, one stopped) must leave
        the next --prune reading it as new (reviews 129, 130). The new file's own
        folder only, within the run's `paths`: one new to the brain holds nothing, and
        no folder above it (a new vault beside a note since deleted was held whole,
        reviews 131, 132). A folder held already, or one over it, keeps what it held.
        A file that is there ends a folder's look (one stat, for a vault that keeps
        its files). With the holds read here, it notes the held records files the run
        reads, for join_held at its end."""
        held = self.every_held()
        bounds = [str(Path(p).resolve()) if Path(p).is_dir() else str(Path(p).resolve().parent) for p in paths]
        keeps = {}  # folder -> whether a file stored from under it is there (None: nothing stored under it)

        def keeping(folder):
            if folder not in keeps:
                rows = self.conn.execute(
                    "select source_path from documents where source_path >= ? and source_path < ? "
                    "order by source_path",  # the index's order, read as it goes: no sort, no DISTINCT's tree
                    (folder + os.sep, folder + chr(ord(os.sep) + 1)),
                )
                keeps[folder], last = None, None
                for (path,) in rows:
                    if path == last:
                        continue  # a records file's many documents: one look
                    keeps[folder], last = False, path
                    if may_exist(path):
                        keeps[folder] = True
                        break
            return keeps[folder]

        refused = {}
        new = sorted({os.path.dirname(path) for path, _ in files if not self._stored(path)})
        for folder in new:
            if not any(_within(folder, b) for b in bounds) or keeping(folder) is not False:
                continue
            if any(_within(folder, f) for f in [*held, *refused]):
                continue  # a folder held already, or one over it, keeps what it held (review 130)
            # a folder held under it (a failed sync's) keeps its own: what is new to it is new here (review 131)
            inner = {f: ids for f, ids in held.items() if f.startswith(folder + os.sep)}
            refused[folder] = self.documents(*_documents_under(folder)) - self.new_under(folder, inner)
        if refused:
            self.hold(refused, ())
        self.held_records = self._held_records(held, files) if held else {}

    def _held_records(self, held, files):
        """{held folder: (the records files of `files` (path, format) under it that a
        document of its hold is stored from, and the documents stored from them)}
        (join_held). Stored: an id's text names no file surely (a note named
        crm.jsonl#x.md, a record `remember` replaced, an `_id` holding "#": reviews
        143, 144)."""
        paths = [path for path, fmt in files if fmt.default_source == "import"]
        found = {}
        for folder, ids in held.items():
            if under := [path for path in paths if _within(path, folder)]:
                rows = self._records_of(under)
                if ours := {path for document_id, path in rows if document_id in ids}:
                    found[folder] = (ours, frozenset(d for d, path in rows if path in ours))
        return found

    def join_held(self):
        """Hold, with what each held folder held, every record stored from a records
        file of it that its hold's documents were from, but those this run removed: a CRM
        export on a drive refreshed by plain ingests while the drive is mounted, until
        none of the records the hold first held is stored, left a hold of nothing
        stored, which the next refusal dropped, and the night after pruned the drive
        (review 136). Records of a file the hold held already are of before, wherever
        the file was read from; so the files a hold reads as there are the same, and
        nothing else joins: a new note may be the mount point's, or a failed sync's
        (reviews 139 to 141). Read from the file again by any run that reads it, also
        after one stopped midway, while one held record of it is stored."""
        if not self.held_records:
            return
        # read once, before the write lock: a writer meanwhile joins what it stored itself
        now = {folder: {d for d, _ in self._records_of(paths)} for folder, (paths, _) in self.held_records.items()}

        def merged(every):
            kept = dict(every)
            for folder, (_, before) in self.held_records.items():
                if folder in every:  # those the file dropped leave it
                    kept[folder] = frozenset(every[folder] - (before - now[folder]) | now[folder])
            return kept

        every = self.every_held()
        if merged(every) != every:
            with self._turn():
                self._store_held(PRUNE_HELD_KEY, merged)

    def _records_of(self, paths):
        """[(id, path)] of the stored documents read from the files `paths`."""
        return self.conn.execute(
            "select document_id, source_path from documents where source_path in (select value from json_each(?))",
            [json.dumps(sorted(paths))],
        ).fetchall()

    def _files_there(self, documents):
        """Whether the file of one of the stored `documents` read from a file is there
        (None: none of them is stored with a file): read as it goes, ending at the first."""
        rows = self.conn.execute(
            "select distinct source_path from documents where source_path is not null "
            "and document_id in (select value from json_each(?))",
            [json.dumps(sorted(documents))],
        )
        there = None
        for (path,) in rows:
            if there := may_exist(path):
                break
        return there

    def _any_stored(self, ids):
        return (
            self.conn.execute(
                "select 1 from documents where document_id in (select value from json_each(?)) limit 1",
                [json.dumps(sorted(ids))],
            ).fetchone()
            is not None
        )

    def replaced(self, path, documents):
        """Why the `documents` of the records file `path`, none of them in it any more, were kept."""
        memories = self.conn.execute(
            "select count(*) from knowledge where document_id in (select value from json_each(?))",
            [json.dumps(sorted(documents))],
        ).fetchone()[0]
        lost = "the one memory" if memories == 1 else f"all {memories:,} memories"
        return (
            f"nothing of {path} was removed: that would remove {lost} it held before this ingest, as none of its "
            "records is in it now (another file written over it, a sync that failed?); look at the file, or "
            f"ingest it with --prune-all to remove {'it' if memories == 1 else 'them'}"
        )

    def prune(self, root, before, live, everything=False, read=frozenset(), spared=()):
        """Remove the documents from files under `root` that are gone, in
        transactions of their own; returns why some were not ((folder, why) pairs). Unless
        `everything`, nothing is removed when that would take every document of
        `before` (what `root` held before this run) still stored, leaving out those
        moved (below): its folder is empty or none of its files is there. Nor under
        a folder in it that held some and is still there but holds no file to ingest
        (`live`: the folders that do): an unmounted drive mounted there, a sync that
        failed; nor under a symbolic link to a folder that is not there (a drive
        unplugged). A file reached through a symbolic link whose real path the brain
        holds a document of is gone: moved there (_there), unless this run read it
        (`read`). Whatever `everything` says, the documents of the folders `spared`
        holds ([(folder, whole)]: _renamed_from's) stay."""
        under = _documents_under(root)
        folder_there = _there(root, self._stored, live, read)

        def there(path):  # a document's file: one replaced by a folder of its name (an empty one, say) is gone
            return folder_there(path) and not _folder_now(path)

        held, doomed = self.writer.removable(*under, gone=there)
        # a file stored by a run that refused its folder is new still: the next run must not read the folder
        # as keeping one of its files, and prune what a drive unmounted took away (review 128)
        kept_back = self.held_over(root)
        before = (before & set(held)) - self.new_under(root, kept_back)
        paths = self._paths(before | set(doomed)) if doomed else {}
        # spared folders are found where they really are: a note stored through a link is matched there too
        doomed = [
            d
            for d in doomed
            if not any(
                _holds(folder, whole, path)
                for path in {paths.get(d, ""), os.path.realpath(paths.get(d) or "/")}
                for folder, whole in spared
            )
        ]
        refused = {}  # {(the folder refused, why): its documents}
        # a note a cloud sync replaced by its placeholder (.NAME.icloud) is there, not downloaded: kept always
        for document_id in [d for d in doomed if _placeholder(paths.get(d, ""))]:
            refused.setdefault((os.path.dirname(paths[document_id]), "placeholder"), []).append(document_id)
            doomed.remove(document_id)
        for document_id in list(doomed) if self.mounts else ():  # an unplugged drive's, even with --prune-all
            if where := self.mounts.out_of(paths.get(document_id) or ""):
                refused.setdefault((where, "unmounted"), []).append(document_id)
                doomed.remove(document_id)
        if doomed and not everything:
            links = {}
            for document_id in doomed:
                link = _dangling(os.path.dirname(paths.get(document_id, root)), root, links)
                if link:
                    refused.setdefault((link, "dangling"), []).append(document_id)
            rest = [d for d in doomed if not links.get(os.path.dirname(paths.get(d, root)))]
            # a note that still opens (through a link) is pruned as moved, stored where it is: not lost
            moved = {d for d in rest if may_exist(paths[d]) and not _folder_now(paths[d])}
            # a note this run found again in another folder of the PATH, unchanged (review 117, M1)
            moved |= self.writer.written_again(set(rest) - moved)
            at_stake = before - moved - {d for documents in refused.values() for d in documents}
            if at_stake and at_stake <= set(rest):
                refused[(root, "root" if not moved else "root, moved")] = [d for d in rest if d not in moved]
            else:
                # every folder under which a file of before is still there
                remaining = _folders_of(paths[d] for d in before - set(doomed) if d in paths)
                emptied = {}  # {a gone file's folder: (the folder refused, why) or None}
                for document_id in [d for d in rest if d not in moved]:
                    folder = os.path.dirname(paths.get(document_id) or root)
                    if folder not in emptied:
                        emptied[folder] = _emptied_folder(folder, root, live, remaining, folder_there)
                    if emptied[folder]:
                        refused.setdefault(emptied[folder], []).append(document_id)
        kept = {document_id for documents in refused.values() for document_id in documents}
        self._remove(*under, gone=there, only=set(doomed) - kept)
        # the holds this run judged: under the root (not one over it), and neither spared nor refused otherwise
        # (a file of a name no text, a dangling link, a cloud placeholder: review 132)
        looked = [*(folder for folder, _ in spared), *(folder for folder, _ in refused)]
        judged = {f for f in kept_back if _within(f, root) and not any(_within(f, o) or _within(o, f) for o in looked)}
        # but one whose held files this run read and that are gone now (its drive unplugged as the run went: what
        # it read counts as there) is judged by its next run (review 139, H4)
        judged = {f for f in judged if self._files_there(kept_back[f]) is not False}
        now = {f: self.documents(*_documents_under(f)) & before for f, why in refused if why in HELD_REFUSALS}
        self.hold(now, judged)
        return [(folder, self._refusal(folder, why, documents)) for (folder, why), documents in sorted(refused.items())]

    def _paths(self, documents):
        """{document id: its source_path} for the ids in `documents`."""
        return dict(
            self.conn.execute(
                "select document_id, source_path from documents where document_id in (select value from json_each(?))",
                [json.dumps(sorted(documents))],
            ).fetchall()
        )

    def _refusal(self, folder, why, documents):
        """Why the documents of `folder` were not pruned: `why` is "root" (every memory
        of a PATH; "root, moved": but those of notes moved to another PATH), "nothing"
        (a folder in it with nothing to ingest), "new" (one holding only new files),
        "dangling" (a symbolic link to a folder that is not there) or "placeholder" (notes
        a cloud sync evicted: those are named)."""
        memories, files = self.conn.execute(
            "select count(*), count(distinct source_path) from knowledge "
            "where document_id in (select value from json_each(?))",
            [json.dumps(documents)],
        ).fetchone()
        lost = "the one memory" if memories == 1 else f"all {memories:,} memories"
        gone = "its one file is" if files == 1 else f"all {files:,} of its files are"
        said = {
            "root": f"that would remove {lost} it held before this ingest, as {gone} gone",
            "root, moved": f"that would remove {lost} it held before this ingest besides the notes moved to another "
            f"PATH or folder (those were pruned), as {gone.replace('its', 'their')} gone",
            "nothing": f"the folder is there but holds nothing to ingest, and that would remove {lost} from it",
            "new": f"none of the files it held is there (it holds only new ones), and that would remove {lost} from it",
            "dangling": f"it is a symbolic link to {os.readlink(folder) if os.path.islink(folder) else 'a folder'}, "
            f"which is not there, and that would remove {lost} from it",
        }.get(why)
        if why == "unmounted":  # even with --prune-all, unless it is given this folder or one holding it
            return (
                f"nothing under {folder} was pruned: a drive was mounted there when its memories were stored, and "
                f"none is now, and that would remove {lost} from it (unplugged?); mount the drive, or ingest "
                f"{folder} (or a folder holding it) with --prune-all to read it as it is and remove "
                f"{'it' if memories == 1 else 'them'}"
            )
        if why == "placeholder":
            it = "it" if files == 1 else "them"
            names = sorted(os.path.basename(path) for path in self._paths(documents).values())
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3:,} more" if len(names) > 3 else "")
            return (
                f"kept the memories of {shown} in {folder}, even with --prune-all: "
                f"{'it is only a cloud placeholder' if files == 1 else 'they are only cloud placeholders'} "
                f"(.NAME.icloud: not downloaded); download {it}, or delete {it} in the cloud if meant to go"
            )
        advice = {
            "root": "look at the folder, ",
            "root, moved": "look at the folder, ",
            "dangling": "mount what it points to, delete the link if its notes are meant to go, ",
        }.get(why, "look at the folder, delete it if its notes are meant to go, ")
        nothing = "nothing else" if why == "root, moved" else "nothing"  # the notes moved were (review 125)
        return (
            f"{nothing} under {folder} was pruned: {said} (an unmounted drive, a sync that failed?); {advice}"
            f"or prune with --prune-all to remove {'it' if memories == 1 else 'them'}"
        )

    def _remove(self, where, params, keep=(), gone=False, only=None):
        """writer.remove of the documents writer.removable selects (of `only`, when
        given), in turns: each looks again, so a document written meanwhile stays."""

        def doomed():
            return [d for d in self.writer.removable(where, params, keep, gone)[1] if only is None or d in only]

        if doomed():  # looked at first without the lock: most files lost no records
            self._in_turns(lambda deadline: bool(self.writer.remove(doomed(), deadline)))

    def _in_turns(self, *works):
        """Call each work(deadline), which does some of its work until the deadline
        and says whether any is left, in transactions (`_turn`) until none is; the
        next work begins in the same transaction when there is time left."""
        works = list(works)
        while works:
            with self._turn() as deadline:
                while works and not works[0](deadline):
                    works.pop(0)
                    if time.perf_counter() >= deadline:
                        break

    @contextlib.contextmanager
    def _turn(self):
        """One write transaction of the ingest (Turns.turn), yielding the time
        (perf_counter) to commit by."""
        with self.turns.turn() as began:
            yield began + INGEST_TRANSACTION_SECONDS

    def _commit(self, batch):
        embedded, documents = self._embedded(batch), batch.documents
        if self.all_or_none:
            with atomic(self.conn):  # a savepoint in the caller's transaction
                self._write_batch(documents, embedded, isolate=False)
        else:
            while documents:
                documents = documents[self._transaction(documents, embedded) :]
        self._report_progress(batch, 1.0)
        self.done += len(batch.documents)

    def _transaction(self, documents, embedded):
        """Write documents from the start of `documents` in one transaction, for
        INGEST_TRANSACTION_SECONDS; returns how many were written."""
        mark = self._mark()
        try:
            with self._turn() as deadline:
                looked = self._hold_replaced(documents)
                written = self._write_batch(documents, embedded, isolate=False, deadline=deadline)
        except Exception as ex:
            if isinstance(ex, BrainBusy | ModelError):
                raise  # no document's fault: retrying one by one would not help
            # Something in it failed: write from the same document again, one
            # savepoint per document, so the bad document is reported and the rest land.
            self._undo(mark)
            self.writer.forget_entities()
            with self._turn() as deadline:
                looked = self._hold_replaced(documents)
                written = self._write_batch(documents, embedded, isolate=True, deadline=deadline)
        for path in looked:
            del self.replacing[path]
        return written

    def _texts_to_embed(self, batch):
        """{content hash: text} of the chunks in `batch` that may need a new vector."""
        stored = self.writer.stored_hashes(batch)
        texts = {}
        for document in batch:
            if stored.get(document.document_id) != document.digest:
                for chunk in document.chunks:
                    text = chunk_text(document, chunk)
                    texts[content_hash(text)] = text
        texts = {h: t for h, t in texts.items() if h not in self.vectors}
        stored = vectored(self.conn, texts, self.model_id)  # one statement: each lets the embedding thread in
        return {h: t for h, t in texts.items() if h not in stored}

    def _write_batch(self, batch, embedded, isolate, deadline=None):
        """Write documents of `batch` in order until `deadline` (time.perf_counter)
        has passed, at least one, or all when None; returns how many it wrote.
        Documents new to the brain in a row are written together, up to
        CHUNKS_PER_INSERT chunks at once (DocumentWriter.write_new), so the
        deadline may pass by the time of writing that many. With `isolate`, each
        in a savepoint of its own (slower: vec0 journals every page a savepoint touches)."""
        self._same_model()
        for document in batch:
            validity.place_earlier(self.conn, document)  # an earlier version is history, never over a later one
        refused = claimed(self.conn, batch)  # {position: why}, refused by name as it comes
        stored = self.writer.stored_hashes(batch)
        for document_id in validity.regrouped(self.conn, batch):  # a new _version_of: written though unchanged
            stored[document_id] = None
        changing = [d for i, d in enumerate(batch) if stored.get(d.document_id) != d.digest and i not in refused]
        self.writer.look_up_entities(changing)
        try:
            changing_ids = [d.document_id for d in changing]
            return self._write_documents(batch, embedded, isolate, deadline, stored, changing_ids, refused)
        finally:
            self.writer.done_looking()

    def _write_documents(self, batch, embedded, isolate, deadline, stored, changing, refused):
        """_write_batch's writing, once `stored` ({document id: stored content hash}),
        the `changing` documents' ids and those `refused` ({position: why}) are known."""
        report = self.report
        before = validity.touched(self.conn, changing)
        new_vectors, written = [], 0
        fresh, vectors, chunks = [], {}, 0  # new documents not written yet, as (document, plan); their chunks
        followers = []  # unchanged turns whose contexts may quote a turn placed after them (_follow)

        def write_fresh():
            nonlocal chunks
            new_vectors.extend(self.writer.write_new(fresh, vectors))
            fresh.clear()
            vectors.clear()
            chunks = 0

        for position, document in enumerate(batch):
            written += 1
            if position in refused:
                report.errors.append(
                    IngestError(document.read_from or document.source_path, document.line, refused[position])
                )
                continue
            report.documents += 1
            if stored.get(document.document_id) == document.digest:
                report.documents_unchanged += 1
                report.chunks_unchanged += len(document.chunks)
                if document.quoting:
                    followers.append(document)
            elif not isolate and document.document_id not in stored and not document.version_of:
                plan = self.writer.plan(document, False)  # an earlier version (place_earlier) is _write's
                if chunks + len(plan["new"]) > CHUNKS_PER_INSERT:
                    write_fresh()
                fresh.append((document, plan))
                chunks += len(plan["new"])
                vectors.update(self._vectors(plan["new"], embedded))
                self._count("added")
            elif not isolate:
                write_fresh()  # first: documents are written in order
                written_vectors, outcome = self._write(document, stored, embedded)
                new_vectors.extend(written_vectors)  # inserted together: vec0 takes many rows at once faster
                self._count(outcome)
            else:
                mark = self._mark()
                try:
                    with atomic(self.conn):
                        written_vectors, outcome = self._write(document, stored, embedded)
                        insert_vectors(self.conn, written_vectors)
                        self.writer.queue_mentions()
                    self._count(outcome)
                except Exception as ex:
                    self._undo(mark)  # what it counted and queued was taken back with it
                    self.writer.forget_entities()
                    report.errors.append(
                        IngestError(document.read_from or document.source_path, document.line, f"not written: {ex}")
                    )
            if deadline is not None and time.perf_counter() >= deadline:
                break
        write_fresh()
        self._follow(followers)
        insert_vectors(self.conn, self.writer.vectors_due(new_vectors))
        self.writer.queue_mentions()
        validity.settle(self.conn, before, validity.touched(self.conn, changing))
        self.writer.batch_done(batch)
        return written

    def _same_model(self):
        """A ModelError when a reindex switched the brain's model since this run began:
        its vectors, of the model it began with, cannot be written beside the new ones."""
        model_id = recorded_model(self.conn)
        if model_id != self.model_id:
            written = counted(self.report.documents_added + self.report.documents_updated, "document")
            raise ModelError(
                f"a reindex made {model_id!r} the brain's model while this ingest embedded with {self.model_id!r}: "
                f"what was written before is kept ({written}), and the reindex re-embedded it; "
                "run the same ingest again to write the rest"
            )

    def _follow(self, followers):
        """Give unchanged turns (`followers`) the contexts their file gives them now
        where a turn they quote is placed after them: added to the file before them
        (inserted, or forgotten and given again), in this run or one cut short. A
        digest leaves contexts out, so these kept what they had. Not where such a
        turn's words are another's of its session too: which one a quote is of is
        read by place (conversation._sources), and a quote read as a twin's would
        be taken for stale."""
        if not followers:
            return
        ids = {d.document_id for d in followers} | {q for d in followers for q in d.quoting}
        place = dict(
            self.conn.execute(
                "select document_id, rowid from documents where document_id in (select value from json_each(?))",
                [json.dumps(sorted(ids))],
            )
        )
        due = {
            document.document_id: [q for q in document.quoting if place.get(q, 0) > place.get(document.document_id, 0)]
            for document in followers
        }
        once = said_once(self.conn, {q for later in due.values() for q in later})
        for document in followers:
            later = due[document.document_id]
            if later and once.issuperset(later):
                rewrite_contexts(self.conn, unlinked_contexts(self.conn, document))

    def _write(self, document, stored, embedded):
        """writer.write of a new or changed document: (its new vectors, "added",
        "updated" or "unchanged"). A later version of the stored one is new: that is
        kept as history first; an earlier one (placed by validity.place_earlier)
        is written as history."""
        known = document.document_id in stored
        flagged = False
        if known and validity.later_version(self.conn, document):
            flagged, known = validity.keep_as_history(self.conn, document), False
        plan = self.writer.plan(document, known)

        def write():
            vectors = self.writer.write(document, plan, self._vectors(plan["new"], embedded))
            if flagged:  # a new version of a flagged memory is flagged too: it goes into recall only reviewed
                self.conn.execute("update knowledge set flagged = 1 where document_id = ?", (document.document_id,))
            if document.version_of:
                validity.mark_history(self.conn, document)
            return vectors

        if known and _exported_again(document, plan) and self._unless_same(document, plan, write):
            return [], "unchanged"
        return write(), "updated" if known else "added"

    def _unless_same(self, document, plan, write):
        """`write()` `document` (_exported_again) in a savepoint, taken back when it
        changed nothing a reader sees of it (writer.stored_form), added no entity and
        restated no turn's quote of it in another's context: a brain's own export
        ingested into it again is then unchanged, where the record and the note it
        was made from hash differently. Its stored hash (the note's) is kept, so the
        note ingested again is unchanged too (and the export is written and taken
        back again each time). Whether it was taken back."""
        mark = self._mark()
        before = self.writer.stored_form(document.document_id)
        try:
            with atomic(self.conn):  # a savepoint in the ingest's transaction
                write()
                if (
                    self.report.entities == mark[0]["entities"]
                    and not self.writer.last_restated
                    and self.writer.stored_form(document.document_id) == before
                ):
                    raise _Same
        except _Same:
            self._undo(mark)
            self.report.chunks_unchanged += len(plan["kept"])
            return True
        return False

    def _mark(self):
        """What the report counts and the writer has queued for mentions so far, for
        _undo when what is written after is taken back."""
        return dict(vars(self.report)), {kind: len(ids) for kind, ids in self.writer.queued.items()}

    def _undo(self, mark):
        counts, queued = mark
        vars(self.report).update(counts)
        for kind, count in queued.items():
            del self.writer.queued[kind][count:]

    def _count(self, outcome):
        if outcome == "added":
            self.report.documents_added += 1
        elif outcome == "updated":
            self.report.documents_updated += 1
        else:
            self.report.documents_unchanged += 1

    def _vectors(self, new_chunks, embedded):
        """content hash -> (int8, bit) for new chunks: embedded ahead, reused from a
        stored row with the same text, or embedded now."""
        vectors = {}
        for digest, *_ in new_chunks:
            if digest not in vectors:
                vectors[digest] = embedded.get(digest) or stored_vector(self.conn, digest, self.model_id)
        todo = {h: t for h, t, *_ in new_chunks if vectors[h] is None}
        for digest, vector in zip(todo, storage_vectors(list(todo.values()), self.model_id) if todo else []):
            vectors[digest] = vector
        return vectors


@dataclass
class _Batch:
    """Documents written in one transaction, and the new text embedded for them."""

    documents: list
    texts: dict  # {content hash: text} to embed ahead of the writer
    future: object = None  # of storage_vectors(texts), in order
    embedded: int = 0  # characters of `texts` embedded so far (counted by the embedding thread)
    reported: int = 0  # characters of content reported as progress

    @property
    def size(self):
        """Characters of content in the batch: what progress counts."""
        return sum(len(c.content) for d in self.documents for c in d.chunks)

    @property
    def characters(self):
        return sum(map(len, self.texts.values())) or 1
