"""A copy Litestream follows (`sqlite-utils brain follow`): how to tell one, how to
read it so that every change the follower writes is seen, and what its follower
last said of it.

Litestream's follower (`litestream restore -f`) writes the changed pages straight
into the copy, under SQLite's exclusive lock, and keeps the last transaction it
applied in `COPY-txid`. Readers must therefore:

- read it in rollback mode: a reader in WAL mode holds a shared lock for as long
  as its connection is open, and the follower waits for it forever (brain follow
  writes the copy's header in rollback mode before anyone opens it);
- never cache a page across transactions: the follower tells other connections
  of a change only through page 1's change counter, and a transaction that did
  not touch page 1 leaves their caches stale. Reads go through mmap (pages are
  the file's, not copies) and the page cache is off for anything mmap misses.
  FTS5 keeps its structure across transactions until `data_version` moves, which
  takes page 1: every brain write rewrites it (connection.atomic);
- never write it: `query_only` on every connection.
"""

import contextlib
import json
import math
import os
import time

from .config import FOLLOW_STATUS_STALE_SECONDS
from .errors import BrainError

TXID_SUFFIX = "-txid"  # Litestream's: the last transaction applied to the copy
LOCK_SUFFIX = "-follow.lock"  # held by the one brain follow writing the copy
STATUS_SUFFIX = "-follow"  # brain follow's: what it follows, how far it is, and whether it is stuck
DIVERGED = "diverged"  # the follower's state when the copy turned into another brain: never read
MMAP_BYTES = 1 << 40  # SQLite caps it at its build's SQLITE_MAX_MMAP_SIZE


class ReplicaNotReady(BrainError):
    """The copy is being brought back to where it was after its follower restarted
    (Litestream replays changes it already holds): reading it now could mix
    transactions. Try again in a moment."""


def is_copy(path: str | os.PathLike[str] | None) -> bool:
    """Whether the file at `path` is a copy Litestream follows (its -txid file is beside it)."""
    return bool(path) and os.path.exists(str(path) + TXID_SUFFIX)


CHECK_ADVICE = "run sqlite-utils brain check"


def remake_advice(path):
    """What mends a replica's copy: it is never written, so check --repair cannot;
    it is copied again from the store."""
    return (
        f"a replica's copy is never repaired in place: stop brain follow, remove {path} and its {TXID_SUFFIX} "
        "file, and start brain follow again (it copies the brain anew from the store); or repair the primary"
    )


def damage_advice(path: str | os.PathLike[str] | None, message: str) -> str:
    """`message` (a BrainError's), its advice to run check made what works on the
    replica at `path`: a copy made again, as check --repair refuses there."""
    if path is None or CHECK_ADVICE not in message or not is_copy(path):
        return message
    return message.replace(CHECK_ADVICE, f"run sqlite-utils brain check (read-only here); {remake_advice(path)}")


def prepare_reader(conn):
    """Set up a connection to a copy: never written, no page cached across transactions."""
    conn.execute("pragma query_only = 1")
    conn.execute(f"pragma mmap_size = {MMAP_BYTES}")
    conn.execute("pragma cache_size = 0")


def read_txid(path):
    """The last transaction Litestream applied to the copy at `path`, or None."""
    try:
        with open(str(path) + TXID_SUFFIX) as handle:
            return int(handle.read().strip(), 16)
    except (OSError, ValueError):
        return None


def write_txid(path, txid):
    """Write the copy's -txid file as Litestream does (16 hex digits), atomically and durably."""
    _write_atomic(str(path) + TXID_SUFFIX, f"{txid:016x}\n", sync=True)


def _epoch(value):
    return type(value) in (int, float) and math.isfinite(value) and 0 <= value <= LATEST_EPOCH


def _txid(value):
    return type(value) is int and 0 <= value < 2**63


def _text(value):
    return isinstance(value, str)


# each field of the status file, and the values it may hold
STATUS_FIELDS = {
    **dict.fromkeys(("updated_at", "applied_at", "checked_at", "behind_since"), _epoch),
    **dict.fromkeys(("head_txid", "applied_txid", "resume_until", "pid"), _txid),
    **dict.fromkeys(("state", "message", "url", "copy", "instance"), _text),
}
LATEST_EPOCH = 1e11  # the year 5138: a time later than this is a clock far off, not a time


def follower_status(path, refused=None):
    """What brain follow last wrote of the copy at `path` (a dict), or None. A
    field whose value is not one it writes (a file from another version, edited,
    a clock far off) is left out, as unknown, and its name added to `refused`."""
    try:
        with open(str(path) + STATUS_SUFFIX) as handle:
            status = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(status, dict):
        return None
    kept = {}
    for name, value in status.items():
        if value is None or name not in STATUS_FIELDS or STATUS_FIELDS[name](value):
            kept[name] = value
        elif refused is not None:
            refused.append(name)
    return kept


def write_status(path, status):
    """Write the follower's status beside the copy at `path`, readable by no more
    people than the copy itself (0600 while there is no copy)."""
    try:
        mode = os.stat(path).st_mode & 0o644
    except OSError:
        mode = 0o600
    _write_atomic(str(path) + STATUS_SUFFIX, json.dumps({**status, "updated_at": time.time()}), mode=mode)


def ensure_ready(path: str | os.PathLike[str]) -> None:
    """Raise ReplicaNotReady while the copy at `path` is being brought back after a
    restart: set back to a snapshot, and not yet past where it was."""
    status = follower_status(path) if is_copy(path) else None
    if status and status.get("state") == DIVERGED:
        raise ReplicaNotReady(f"this replica's copy is not served: {status.get('message')}")
    until = status.get("resume_until") if status else None
    if status and until is not None and (read_txid(path) or 0) < until:
        gone = _gone(status)
        if gone:
            url, copy = status.get("url") or "URL", status.get("copy") or str(path)
            raise ReplicaNotReady(
                f"this replica's follower {gone} while catching up after a restart (to transaction {until}): "
                "the copy is between two transactions and is not served until it is back; start "
                f"sqlite-utils brain follow {url} {copy} again"
            )
        raise ReplicaNotReady(
            f"this replica is catching up after its follower restarted (to transaction "
            f"{until}): reading it now could mix transactions; try again in a moment"
        )


def _gone(status):
    """How the follower that wrote `status` is seen to have stopped: its process is
    gone, or it has not written its status for a while; None while it runs."""
    pid, updated = status.get("pid"), status.get("updated_at")
    if updated is None or time.time() - updated > FOLLOW_STATUS_STALE_SECONDS:
        return "stopped (no status written for a while)"
    if pid:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return f"stopped (its process {pid} is gone)"
        except OSError:
            pass  # another user's: it runs
    return None


def _write_atomic(path, text, sync=False, mode=0o644):
    temporary = f"{path}.{os.getpid()}.tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temporary)
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "w") as handle:
        os.fchmod(handle.fileno(), mode)  # whatever the umask
        handle.write(text)
        if sync:
            handle.flush()
            os.fsync(handle.fileno())
    os.replace(temporary, path)
