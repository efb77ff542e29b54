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
import json
import os
import stat
import struct
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import xxhash

try:
    import fcntl
except ImportError:  # not on Windows: leftovers of killed writers stay there
    fcntl = None  # type: ignore[assignment]

MAGIC = b"datasette-brain read state\n"
# 2: with the lexical postings; 3: their terms one a line; 4: changes with stamps; 5: terms hashed;
# 6: id maps with their far ids (slots.IdMap)
FORMAT = 6
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
            if handle.read(len(MAGIC)) != MAGIC:
                raise SnapshotError(f"{path} is not a read-state snapshot")
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > 1 << 30:
                raise SnapshotError(f"{path}: its manifest is damaged")
            manifest = json.loads(handle.read(length))
            start = handle.tell() + (-handle.tell() % ALIGN)
    except (OSError, ValueError, struct.error) as ex:
        raise SnapshotError(f"{path} cannot be read: {ex}") from ex
    if manifest.get("format") != FORMAT:
        raise SnapshotError(f"{path} is of format {manifest.get('format')}, not {FORMAT}")
    return manifest, start


def load(path):
    """(manifest, {name: array}) of the snapshot at `path`, every checksum verified.
    A second thread reads the next array while this one verifies the last (reading
    lets go of the GIL): the load takes about as long as reading alone."""
    manifest, start = read_manifest(path)
    arrays = {}
    try:
        entries = list(manifest["arrays"].items())
        with open(path, "rb") as handle, ThreadPoolExecutor(1, thread_name_prefix="brain-snapshot") as reader:
            read = [reader.submit(_read, handle, start + entry["offset"], entry["bytes"]) for _, entry in entries]
            try:
                for (name, entry), data in zip(entries, read):
                    data = data.result()
                    checksum = next((c for c in CHECKSUMS if c in entry), None)
                    if data is None or checksum is None or CHECKSUMS[checksum](data) != entry[checksum]:
                        raise SnapshotError(f"{path}: array {name} is damaged")
                    arrays[name] = data.view(np.dtype(entry["dtype"])).reshape(entry["shape"])
            finally:
                for future in read:
                    future.cancel()
    except (OSError, KeyError, TypeError, ValueError) as ex:
        raise SnapshotError(f"{path} cannot be read: {ex}") from ex
    return manifest, arrays


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
