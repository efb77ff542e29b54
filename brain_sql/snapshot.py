"""The read state's snapshot: its parts' arrays in one file beside the brain
(`brain.db-brainstate`), so that a server loads in a second what it would take
a minute to rebuild from SQL at a million memories.

It is derived and never trusted: it names the brain's instance id and the
change-log position it holds, each array carries its checksum, and a snapshot
that is damaged, of another format, of another brain or behind what the change
log still reaches is rebuilt from SQL. The brain file stays the one source of
truth: a copy of the file alone works, and builds its state anew.

Layout: the magic line, an 8-byte length, the manifest as JSON, then each array's
bytes at 64-byte boundaries. Written to a temporary file and renamed over, so a
reader never sees half of one.
"""

import contextlib
import ctypes
import json
import mmap
import os
import signal
import stat
import struct
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xxhash

try:
    import fcntl
except ImportError:  # not on Windows: leftovers of killed writers stay there
    fcntl = None  # type: ignore[assignment]

MAGIC = b"datasette-brain read state\n"
# 2: with the lexical postings; 3: their terms one a line; 4: changes with stamps; 5: terms hashed;
# 6: id maps with their far ids (slots.IdMap); 7: columns with room after their rows, the
# graph's document index (a snapshot of 6 is read too: its columns full, its index made on first use)
FORMAT = 7
READABLE = (6, 7)
ALIGN = 64
SUFFIX = "-brainstate"
TEMPORARY = ".brainstate-"  # the prefix of a snapshot's file while it is written
LEFTOVER_SECONDS = 10  # unwritten this long and unlocked: a dead writer's file
# an array's checksum, by the name its manifest entry gives it: written with the first
# (XXH3, three times XXH64's speed over a million memories' gigabyte), read with either
CHECKSUMS = {"xxh3": xxhash.xxh3_64_hexdigest, "xxh64": xxhash.xxh64_hexdigest}
STREAMS = {"xxh3": xxhash.xxh3_64, "xxh64": xxhash.xxh64}  # the same digests, a piece at a time
WRITTEN = next(iter(CHECKSUMS))
PIECE = 1 << 25  # bytes of an array written in one hold of the read state's lock (32 MB: tens of ms)


class SnapshotError(Exception):
    """A snapshot that cannot be used: missing, damaged, or of another format."""


def path_for(brain_path):
    return str(brain_path) + SUFFIX


def save(path, manifest, arrays, like=None, hold=contextlib.nullcontext):
    """Write `arrays` ({name: numpy array}) and `manifest` (JSON-able) to `path`,
    readable by whoever may read the file `like` (the brain) when given. Each
    PIECE of an array is hashed and written inside `hold()`: a context that the
    read state's shared lock makes, so that a refresh waits for one piece, not
    for the whole file, and that raises to give the save up when the arrays
    changed meanwhile (the file is then never renamed into place)."""
    entries, offset = {}, 0
    for name, array in arrays.items():
        entries[name] = {
            "dtype": array.dtype.str,
            "shape": list(array.shape),
            "offset": offset,
            "bytes": array.nbytes,
            WRITTEN: "0" * 16,  # a digest's length, filled in once written
        }
        offset += -(-array.nbytes // ALIGN) * ALIGN
    folder = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=TEMPORARY, dir=folder)
    try:
        with os.fdopen(handle, "wb") as out:
            _hold_while_written(out)
            _remove_leftovers(folder, temporary)
            out.write(_head(manifest, entries))
            out.write(b"\0" * (-out.tell() % ALIGN))
            start = out.tell()
            for name, array in arrays.items():
                out.seek(start + entries[name]["offset"])
                entries[name][WRITTEN] = _write(out, array, hold)
            out.seek(0)
            out.write(_head(manifest, entries))  # as long as the first: every digest is 16 digits
        if like is not None:  # mkstemp makes it the owner's alone: a server run by another user reads it too
            os.chmod(temporary, os.stat(like).st_mode & 0o666)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _hold_while_written(out):
    """Mark the file being written as this process's: a lock the system drops when the
    process ends, however it ends (_remove_leftovers)."""
    if fcntl is not None:
        fcntl.flock(out, fcntl.LOCK_EX | fcntl.LOCK_NB)


def _remove_leftovers(folder, ours):
    """Remove the temporary files of snapshots whose writer died mid-save (a server
    killed, a process ending while its saving thread wrote): at a million memories
    a gigabyte each. One is a leftover when no process holds its lock and it has not
    been written to for LEFTOVER_SECONDS (a writer locks its file just after making it)."""
    if fcntl is None:
        return
    for entry in os.scandir(folder):
        if not entry.name.startswith(TEMPORARY) or entry.path == ours:
            continue
        try:
            if time.time() - entry.stat().st_mtime < LEFTOVER_SECONDS:
                continue
            with open(entry.path, "rb") as other:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # refused while its writer lives
                os.unlink(entry.path)
        except OSError:
            continue


def _head(manifest, entries):
    header = json.dumps({**manifest, "format": FORMAT, "arrays": entries}).encode("utf-8")
    return MAGIC + struct.pack("<Q", len(header)) + header


def _write(out, array, hold):
    """Write `array`'s bytes to `out` a PIECE at a time, each inside `hold()`; its digest."""
    digest = STREAMS[WRITTEN]()
    with hold():
        data = memoryview(np.ascontiguousarray(array)).cast("B")
    for at in range(0, len(data), PIECE):
        with hold():
            piece = data[at : at + PIECE]
            digest.update(piece)
            out.write(piece)
    return digest.hexdigest()


def _regular(path):
    """A SnapshotError unless `path` is a regular file (a pipe or device left there
    would block a reader, or never end)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise SnapshotError(f"{path} is not a regular file")
    except OSError as ex:
        raise SnapshotError(f"{path} cannot be read: {ex}") from ex


def read_manifest(path):
    """(manifest, where the arrays start) of the snapshot at `path`."""
    _regular(path)
    try:
        with open(path, "rb") as handle:
            return _manifest(handle, path)
    except OSError as ex:
        raise SnapshotError(f"{path} cannot be read: {ex}") from ex


def _manifest(handle, path):
    try:
        if handle.read(len(MAGIC)) != MAGIC:
            raise SnapshotError(f"{path} is not a read-state snapshot")
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > 1 << 30:
            raise SnapshotError(f"{path}: its manifest is damaged")
        manifest = json.loads(handle.read(length))
        start = handle.tell() + (-handle.tell() % ALIGN)
    except (OSError, ValueError, struct.error) as ex:
        raise SnapshotError(f"{path} cannot be read: {ex}") from ex
    if manifest.get("format") not in READABLE:
        raise SnapshotError(f"{path} is of format {manifest.get('format')}, not {FORMAT}")
    return manifest, start


def load(path, hold=None, lost=None):
    """(manifest, {name: array}) of the snapshot at `path`, every checksum verified.

    With `hold` (a state kept past a moment: a server's, an ingest's), where the
    system grants this process a read lease on the file (Linux, its owner), the
    arrays are a private (copy-on-write) mapping of the file instead of a copy read
    into fresh memory: at a million memories a gigabyte already in the page cache,
    mapped in a fraction of a second instead of read for seconds. The lease keeps
    the file as it was verified: whoever opens it to write it (a `cp` onto it) or
    cuts it short waits until this process has copied what it still maps into its
    own memory, inside `hold()` (the state's shared lock), and let the lease go
    (`Lease`); should the system take the lease away first (this process stopped
    past its lease-break-time), `lost()` is called: the state must not read them
    again. Otherwise the arrays are read, a second thread reading the next while
    this one verifies the last (reading lets go of the GIL)."""
    _regular(path)
    lease = None
    try:
        with open(path, "rb") as handle:
            if hold is not None and lost is not None and _LIBC is not None:
                lease = Lease.take(handle)  # before anything is read: what is verified is what stays
            manifest, start = _manifest(handle, path)
            entries = list(manifest["arrays"].items())
            size = os.fstat(handle.fileno()).st_size
            for name, entry in entries:
                if start + entry["offset"] + entry["bytes"] > size:
                    raise SnapshotError(f"{path}: array {name} is damaged")  # not a buffer of what it says
            data = _arrays(handle, start, entries) if lease is None else _views(handle, start, entries)
            arrays = {}
            for (name, entry), buffer in zip(entries, data):
                checksum = next((c for c in CHECKSUMS if c in entry), None)
                if checksum is None or CHECKSUMS[checksum](buffer) != entry[checksum]:
                    raise SnapshotError(f"{path}: array {name} is damaged")
                arrays[name] = buffer.view(np.dtype(entry["dtype"])).reshape(entry["shape"])
    except BaseException as ex:
        if lease is not None:
            lease.release()
        if isinstance(ex, (OSError, KeyError, TypeError, ValueError)):
            raise SnapshotError(f"{path} cannot be read: {ex}") from ex
        raise
    if lease is not None:
        lease.watch([m for m in {id(m): m for m in map(_mapping_of, arrays.values())}.values() if m], hold, lost)
    return manifest, arrays


def _views(handle, start, entries):
    """Each array's bytes as a private, copy-on-write mapping of its own pages of the
    file: an array no longer used lets its memory go, whatever the others do."""
    for _, entry in entries:
        begin, size = start + entry["offset"], entry["bytes"]
        if not size:
            yield np.zeros(0, dtype=np.uint8)
            continue
        page = begin - begin % mmap.ALLOCATIONGRANULARITY
        mapped = mmap.mmap(handle.fileno(), begin + size - page, access=mmap.ACCESS_COPY, offset=page)
        yield np.frombuffer(mapped, np.uint8, count=size, offset=begin - page)


def _arrays(handle, start, entries):
    """Each array's bytes read into memory, a second thread reading the next while
    the caller verifies the last (reading lets go of the GIL)."""
    with ThreadPoolExecutor(1, thread_name_prefix="brain-snapshot") as reader:
        read = [reader.submit(_read, handle, start + entry["offset"], entry["bytes"]) for _, entry in entries]
        try:
            for future in read:
                data = future.result()
                if data is None:
                    raise ValueError("the file ended early")
                yield data
        finally:
            for future in read:
                future.cancel()


# the time the system gives a lease's holder to let go before taking it away (Linux's
# default): time enough to copy a million memories' gigabyte out of the file many times over
LEASE_BREAK_SECONDS = 45
LEASE_POLL_SECONDS = 0.2  # how often a mapped snapshot's lease is looked at: a writer of the file waits about this
OWN_STEP = 1 << 22  # bytes made the process's own in one hold of the read state's lock (4 MB: ms)
_PROT_READ_WRITE, _MAP_PRIVATE_ANONYMOUS, _MREMAP_MAYMOVE_FIXED = 0x3, 0x22, 0x3  # Linux's values
# the signal the system sends a lease's holder when another process opens its file to
# write: one whose default is to be ignored (the default, SIGIO, ends the process); the
# lease is watched by polling instead
LEASE_SIGNAL = getattr(signal, "SIGURG", None)


def _libc():
    """The C library's mmap and mremap (Linux), or None: the arrays are then read."""
    if not sys.platform.startswith("linux") or fcntl is None or LEASE_SIGNAL is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = libc.mremap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
        libc.mremap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _libc()
_FAILED = ctypes.c_void_p(-1).value


class Lease:
    """A read lease on a snapshot file this process maps: while it holds, nobody can
    open the file to write it or cut it short (the system makes them wait), so the
    mapped pages stay the bytes that were verified, and a page past a cut end never
    kills the process with SIGBUS. When someone asks (the system marks the lease
    breaking, seen within LEASE_POLL_SECONDS), the pages still mapped are copied into
    the process's own memory, moved over them at the same addresses, and the lease
    is let go: the writer goes on, and nothing it does reaches the state. When every
    mapping is gone (the state replaced), the lease is let go too."""

    def __init__(self, fd):
        self.fd = fd

    @classmethod
    def take(cls, handle):
        """A lease on `handle`'s file, or None where none is granted (another user's
        file, a file open to write somewhere, a file system without leases) or where
        the system waits less than LEASE_BREAK_SECONDS for it to be let go before
        taking it away (its lease-break-time, set lower than its default)."""
        if _lease_break_seconds() < LEASE_BREAK_SECONDS:
            return None
        fd = os.dup(handle.fileno())  # the lease is the open file's: kept past `handle`
        try:
            fcntl.fcntl(fd, fcntl.F_SETSIG, LEASE_SIGNAL)
            fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_RDLCK)
        except OSError:
            os.close(fd)
            return None
        lease = cls(fd)
        if lease.status() != "held":  # the system's account of it cannot be read: it could not be watched
            lease.release()
            return None
        return lease

    def release(self):
        if self.fd is None:
            return
        try:
            fcntl.fcntl(self.fd, fcntl.F_SETLEASE, fcntl.F_UNLCK)  # the mappings hold the open file too
        except OSError:
            pass
        os.close(self.fd)
        self.fd = None

    def status(self):
        """ "held"; "breaking" when someone waits to write the file (or the system would
        now take a lease away sooner than LEASE_BREAK_SECONDS: copy while there is
        time); "gone" when the system took it away before it was let go (this process
        was stopped or starved past the lease-break-time): the file may hold another's
        bytes now. Read from the system's own account of the file's locks."""
        try:
            with open(f"/proc/self/fdinfo/{self.fd}") as info:
                leases = [line for line in info if line.startswith("lock:") and " LEASE " in line]
        except OSError:
            return "gone"
        if not leases:
            return "gone"
        if " BREAKING " in leases[0] or _lease_break_seconds() < LEASE_BREAK_SECONDS:
            return "breaking"
        return "held"

    def watch(self, mappings, hold, lost):
        """Watch the lease (LEASE_POLL_SECONDS) until the mappings are gone or made the
        process's own; one thread watches every lease of the process. `lost()` is
        called when the lease was taken away before the pages were copied."""
        global _watcher
        with _leases_lock:
            _leases.append((self, [weakref.ref(m) for m in mappings], hold, lost))
            if _watcher is None:
                _watcher = threading.Thread(target=_watch, name="brain-snapshot-leases", daemon=True)
                _watcher.start()


_leases: list = []  # (Lease, weak references to its mappings, the hold its state's arrays are written under)
_leases_lock = threading.Lock()
_watcher = None


def leases():
    """How many mapped snapshots' leases this process holds."""
    with _leases_lock:
        return len(_leases)


def leased(path):
    """Whether this process holds a lease on the file at `path` (a mapped snapshot's)."""
    try:
        wanted = os.stat(path)
    except OSError:
        return False
    with _leases_lock:  # held while the files are looked at: the watcher closes a lease's under it
        return any(_same(lease.fd, wanted) for lease, _, _, _ in _leases if lease.fd is not None)


def _same(fd, wanted):
    try:
        return os.path.samestat(os.fstat(fd), wanted)
    except OSError:  # closed meanwhile
        return False


def _watch():
    global _watcher
    while True:
        time.sleep(LEASE_POLL_SECONDS)
        with _leases_lock:
            watched = list(_leases)
        for entry in watched:
            lease, refs, hold, lost = entry
            if any(ref() is not None for ref in refs):
                status = lease.status()
                if status == "held":
                    continue
                if status == "gone":
                    lost()  # its pages may be another's bytes, or past a cut end: not to be read again
                elif not _own(refs, hold):
                    continue  # no memory for it now: again next time, while the system waits
            lease.release()
            with _leases_lock:
                _leases.remove(entry)
        with _leases_lock:
            if not _leases:
                _watcher = None
                return


def _lease_break_seconds():
    try:
        with open("/proc/sys/fs/lease-break-time") as setting:
            return int(setting.read())
    except (OSError, ValueError):
        return 0


def _mapping_of(array):
    """The mmap an array views (through views of views and a memoryview), or None."""
    while isinstance(array, np.ndarray):
        array = array.base
    array = array.obj if isinstance(array, memoryview) else array
    return array if isinstance(array, mmap.mmap) else None


def mapped(arrays):
    """How many of `arrays` (as load returned them) view a mapping of the file."""
    return sum(_mapping_of(array) is not None for array in arrays.values())


def _own(refs, hold):
    """Make the pages of the mappings `refs` name the process's own, OWN_STEP bytes at
    a time inside `hold()`: a refresh, which writes to the arrays, waits for a step,
    and readers go on. Each step copies its pages into new memory and moves that over
    them: the same bytes at the same addresses. False when memory ran out."""
    for ref in refs:
        at = 0
        while (pages := ref()) is not None and at < len(pages):  # an array let go: its pages are gone
            size = min(OWN_STEP, len(pages) - at)
            with hold():
                done = _own_step(ctypes.addressof(ctypes.c_char.from_buffer(pages)) + at, size)
            del pages
            if not done:
                return False
            at += size
    return True


def _own_step(address, size):
    """Copy `size` bytes at `address` (page-aligned) into new memory moved over them."""
    fresh = _LIBC.mmap(None, size, _PROT_READ_WRITE, _MAP_PRIVATE_ANONYMOUS, -1, 0)
    if fresh in (None, _FAILED):
        return False
    ctypes.memmove(fresh, address, size)
    if _LIBC.mremap(fresh, size, size, _MREMAP_MAYMOVE_FIXED, address) in (None, _FAILED):
        _LIBC.munmap(fresh, size)
        return False
    return True


def _read(handle, offset, size):
    """`size` bytes of `handle` from `offset` (the reader thread's alone), or None when
    the file ends before."""
    if offset + size > os.fstat(handle.fileno()).st_size:
        return None  # a damaged manifest: not a buffer of what it says
    data = np.empty(size, dtype=np.uint8)  # writable, not zeroed: the state's arrays are these
    view, done = memoryview(data), 0
    while done < size:  # one read stops short of 2 GB
        got = os.preadv(handle.fileno(), [view[done:]], offset + done)
        if got <= 0:
            return None
        done += got
    return data
