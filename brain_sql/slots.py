"""Growable numpy columns for the read state's parts: rows live in slots that
never move (a removed row's slot stays dead until a rebuild compacts them), and
maps from the brain's integer ids to slots. Plain arrays, so a part is
cheap to hold at a million rows and to persist (snapshot.py)."""

import numpy as np
import xxhash

from .config import SNAPSHOT_ROOM_MIN, SNAPSHOT_ROOM_SHARE


def gather(array, index, missing):
    """array[index] where an index is at least 0, `missing` where it is -1 (none): safe
    on an empty array, as a state loaded from a snapshot of no such rows holds."""
    index = np.asarray(index)
    if not len(array):
        return np.full(index.shape, missing, dtype=array.dtype)
    return np.where(index >= 0, array[np.maximum(index, 0)], missing)


class Slots:
    """Parallel numpy columns addressed by slot, grown geometrically."""

    def __init__(self, columns, capacity=1024):
        self.size = 0
        self.arrays = {name: np.zeros((capacity, *shape), dtype=dtype) for name, (dtype, shape) in columns.items()}

    def add(self, count=1):
        """Slots for `count` new rows."""
        start, end = self.size, self.size + count
        self.take(self.room(count))
        self.size = end
        return np.arange(start, end)

    def room(self, count):
        """The columns copied into arrays with room for `count` more rows (None when
        they have it): a refresh makes room while readers go on (nothing writes the
        columns meanwhile), and only puts the grown arrays in place (take) while
        they wait. A state loaded from a snapshot has none: its first write would
        copy every column at a million rows."""
        capacity = len(next(iter(self.arrays.values())))
        if self.size + count <= capacity:
            return None
        capacity = max(self.size + count, 2 * capacity)
        grown = {}
        for name, array in self.arrays.items():
            grown[name] = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
            grown[name][: self.size] = array[: self.size]
        return self.size, grown

    def take(self, room):
        """Put the arrays `room` made in place, when no row came since."""
        if room is not None and room[0] == self.size:
            self.arrays = room[1]

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name][: self.size]
        raise AttributeError(name)

    def to_arrays(self, prefix):
        """The columns with the empty rows they have room for after the last, up to
        SNAPSHOT_ROOM_SHARE of their rows more (at least SNAPSHOT_ROOM_MIN), and the
        number of rows: a state loaded from them takes its first writes in that room
        (a few pages of the mapped file made its own) instead of copying every column
        (a second at a million chunks, which the first recall after a write waited for)."""
        kept = min(
            len(next(iter(self.arrays.values()))), self.size + max(SNAPSHOT_ROOM_MIN, self.size // SNAPSHOT_ROOM_SHARE)
        )
        return {
            **{f"{prefix}.{name}": array[:kept] for name, array in self.arrays.items()},
            f"{prefix}.rows": np.array([self.size], np.int64),
        }

    def load(self, arrays, prefix):
        """Take the columns `to_arrays` gave (a snapshot's) as they are, their empty
        rows as room (a snapshot of before holds none: the first row added copies
        every column into room to grow)."""
        for name in self.arrays:
            stored = arrays[f"{prefix}.{name}"]
            self.arrays[name] = stored if stored.flags.writeable else stored.copy()
        capacity = min(len(array) for array in self.arrays.values())
        rows = arrays.get(f"{prefix}.rows")
        self.size = capacity if rows is None else int(rows[0])
        if not 0 <= self.size <= capacity or any(len(array) != capacity for array in self.arrays.values()):
            raise ValueError(f"{prefix}: {self.size} rows in columns of {capacity}")
        for array in self.arrays.values():  # a new row's columns start at 0 (derived, never trusted)
            if array[self.size :].any():
                array[self.size :] = 0


# An IdMap holds ids from 0 up to DENSE_PER_ID times as many ids as it holds (at
# least DENSE_FLOOR) in one array indexed by id: 8 bytes an entry, so at most 64
# bytes an id, less than a dict's. Any other id is held in sorted arrays beside it.
DENSE_FLOOR = 1 << 16
DENSE_PER_ID = 8


class IdMap:
    """A map from the brain's row ids (SQLite rowids: small positive integers, as
    the brain gives them) to slots; -1 where an id has none. Ids up to a bound
    proportional to how many it holds are kept in one array indexed by id; any
    other (an id a writer set huge, or negative, with plain SQL) in sorted arrays
    beside it (`far`), answered the same: its memory and work are bounded by the
    number of ids it holds, never by their size."""

    def __init__(self):
        self.array = np.full(1024, -1, dtype=np.int64)
        self.far_keys = np.zeros(0, dtype=np.int64)  # ascending
        self.far_values = np.zeros(0, dtype=np.int64)  # -1 where removed
        self.count = 0  # ids held

    def __getitem__(self, key):
        if 0 <= key < len(self.array):
            return int(self.array[key])
        return int(self._far(np.array([key], dtype=np.int64))[0]) if len(self.far_keys) else -1

    def get(self, key):
        """The slot of `key`, or None."""
        found = self[key]
        return None if found < 0 else found

    def many(self, keys):
        """The slots of an int array of ids; -1 for those without one."""
        keys = np.asarray(keys, dtype=np.int64)
        inside = (keys >= 0) & (keys < len(self.array))
        found = np.full(len(keys), -1, dtype=np.int64)
        found[inside] = self.array[keys[inside]]
        if len(self.far_keys) and not inside.all():
            found[~inside] = self._far(keys[~inside])
        return found

    def _far(self, keys):
        at = np.minimum(np.searchsorted(self.far_keys, keys), len(self.far_keys) - 1)
        return np.where(self.far_keys[at] == keys, self.far_values[at], -1)

    def set(self, keys, values):
        """Map each of `keys` to its value (-1: to none); a key given twice, to the last."""
        keys = np.asarray(keys, dtype=np.int64)
        if not len(keys):
            return
        values = np.broadcast_to(np.asarray(values, dtype=np.int64), keys.shape)
        if len(keys) > 1 and not (keys[1:] > keys[:-1]).all():  # ascending, once each
            last = len(keys) - 1 - np.unique(keys[::-1], return_index=True)[1]
            keys, values = keys[last], values[last]
        self.count += int(np.count_nonzero(values >= 0)) - int(np.count_nonzero(self.many(keys) >= 0))
        top = int(keys[-1])
        if top >= len(self.array):
            self._grow(min(max(top + 1, 2 * len(self.array)), max(DENSE_FLOOR, DENSE_PER_ID * self.count)))
        dense = (keys >= 0) & (keys < len(self.array))
        self.array[keys[dense]] = values[dense]
        if not dense.all():
            self._set_far(keys[~dense], values[~dense])

    def _grow(self, size):
        """The array as long as `size` when that is longer, taking the far ids it now covers."""
        if size <= len(self.array):
            return
        grown = np.full(size, -1, dtype=np.int64)
        grown[: len(self.array)] = self.array
        self.array = grown
        moved = (self.far_keys >= 0) & (self.far_keys < size)
        if moved.any():
            self.array[self.far_keys[moved]] = self.far_values[moved]
            self.far_keys, self.far_values = self.far_keys[~moved], self.far_values[~moved]

    def _set_far(self, keys, values):
        """Set ascending `keys` (none of them in the array's range) among the far ones."""
        at = np.searchsorted(self.far_keys, keys)
        held = np.zeros(len(keys), dtype=bool)
        if len(self.far_keys):
            held = self.far_keys[np.minimum(at, len(self.far_keys) - 1)] == keys
        self.far_values[at[held]] = values[held]
        new = ~held & (values >= 0)
        self.far_keys = np.insert(self.far_keys, at[new], keys[new])
        self.far_values = np.insert(self.far_values, at[new], values[new])
        removed = self.far_values < 0
        if removed.sum() * 2 > len(self.far_values):  # mostly removed: dropped
            self.far_keys, self.far_values = self.far_keys[~removed], self.far_values[~removed]

    def pop(self, key):
        found = self.get(key)
        if found is not None:
            self.set([key], [-1])
        return found

    def keys(self):
        """The ids held, ascending."""
        dense = np.flatnonzero(self.array >= 0)
        if not len(self.far_keys):
            return dense
        far = self.far_keys[self.far_values >= 0]
        return np.concatenate((far[far < 0], dense, far[far >= 0]))

    def __len__(self):
        return self.count

    def __contains__(self, key):
        return self[key] >= 0

    def to_arrays(self, prefix):
        return {prefix: self.array, f"{prefix}.far_keys": self.far_keys, f"{prefix}.far_values": self.far_values}

    @classmethod
    def from_arrays(cls, arrays, prefix):
        """The map `to_arrays` gave (a snapshot's)."""
        held = cls()
        held.array, held.far_keys, held.far_values = (
            arrays[name].copy() for name in (prefix, f"{prefix}.far_keys", f"{prefix}.far_values")
        )
        held.count = int(np.count_nonzero(held.array >= 0)) + int(np.count_nonzero(held.far_values >= 0))
        return held


class Strings:
    """A growable column of str (or None) that loads from a snapshot without
    decoding each value: the stored ones stay one text, sliced on demand."""

    def __init__(self):
        self.text, self.ends, self.none = "", np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.bool_)
        self.changed = {}  # index -> value, over the stored ones
        self.added = []

    def __len__(self):
        return len(self.ends) + len(self.added)

    def __getitem__(self, index):
        stored = len(self.ends)
        if index >= stored:
            return self.added[index - stored]
        if index in self.changed:
            return self.changed[index]
        if self.none[index]:
            return None
        return self.text[self.ends[index - 1] if index else 0 : self.ends[index]]

    def __setitem__(self, index, value):
        stored = len(self.ends)
        if index >= stored:
            self.added[index - stored] = value
        else:
            self.changed[index] = value

    def extend(self, values):
        self.added.extend(values)

    def append(self, value):
        self.added.append(value)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def tolist(self):
        """Every value, in order: the stored ones cut from their text in one pass (a
        million names in a fraction of the time indexing each takes)."""
        ends = self.ends.tolist()
        values = [self.text[start:end] for start, end in zip([0, *ends[:-1]], ends)]
        for index in np.flatnonzero(self.none).tolist():
            values[index] = None
        for index, value in self.changed.items():
            values[index] = value
        return values + self.added

    def to_arrays(self, prefix):
        """The column as from_arrays reads it: the stored text kept in runs between the
        values changed since, so a million names are not made one object each."""
        stored = len(self.ends)
        starts = np.concatenate(([0], self.ends[:-1])) if stored else self.ends
        texts, lengths, nones, at = [], [], [], 0
        for index in [*sorted(self.changed), stored]:
            if index > at:  # the stored values [at, index), as they are
                texts.append(self.text[int(starts[at]) : int(self.ends[index - 1])])
                lengths.append(self.ends[at:index] - starts[at:index])
                nones.append(self.none[at:index])
            at = index + 1
            values = [self.changed[index]] if index < stored else self.added
            texts.extend(v or "" for v in values)
            lengths.append(np.array([len(v or "") for v in values], dtype=np.int64))
            nones.append(np.array([v is None for v in values], dtype=np.bool_))
        text = "".join(texts)
        ends = np.cumsum(np.concatenate(lengths), dtype=np.int64)
        none = np.concatenate(nones)
        return {
            f"{prefix}.text": np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8),
            f"{prefix}.ends": ends,
            f"{prefix}.none": none,
        }

    @classmethod
    def from_arrays(cls, arrays, prefix):
        column = cls()
        column.text = arrays[f"{prefix}.text"].tobytes().decode("utf-8", "surrogatepass")
        column.ends, column.none = arrays[f"{prefix}.ends"], arrays[f"{prefix}.none"]
        return column


def _hash(value):
    return xxhash.xxh3_64_intdigest(value.encode("utf-8", "surrogatepass"))


def hashed_at(hashes, key):
    """The positions in the sorted `hashes` holding `key`."""
    at = end = int(np.searchsorted(hashes, key))
    while end < len(hashes) and hashes[end] == key:
        end += 1
    return range(at, end)


class StringIndex:
    """value -> its index in a Strings column, as a dict of them would answer, for
    values that are never changed (only added). Loaded from a snapshot it is the
    values' hashes, sorted, and each one's index: no Python object a value, where a
    dict of a million document ids took over a second to make at the first write
    after a load. Values added since are kept in a dict beside it."""

    def __init__(self, column, hashes=None, order=None):
        self.column = column
        self.hashes = np.zeros(0, np.uint64) if hashes is None else hashes  # ascending
        self.order = np.zeros(0, np.int64) if order is None else order  # the index of each hash's value
        self.added = {}
        self._later = []  # (hash, index) of each added value, hashed as it comes (not all at a save)

    @classmethod
    def of(cls, column):
        """The index of every value `column` holds now (a snapshot saved without one)."""
        values = column.tolist()
        order = np.array([i for i, v in enumerate(values) if v is not None], np.int64)
        hashes = np.fromiter((_hash(values[i]) for i in order.tolist()), np.uint64, len(order))
        sort = np.argsort(hashes, kind="stable")
        return cls(column, hashes[sort], order[sort])

    def get(self, value, default=None):
        """Its index, or `default`."""
        found = self.many([value])[0]
        return default if found < 0 else found

    def many(self, values):
        """get() of each of `values` (-1 where none), looked up at once: a refresh's
        documents, thousands at a time, under the lock readers wait for."""
        values = list(values)
        found = [self.added.get(value, -1) for value in values]
        asked = [i for i, index in enumerate(found) if index < 0 and values[i] is not None]
        if asked and len(self.hashes):
            keys = np.fromiter((_hash(values[i]) for i in asked), np.uint64, len(asked))
            starts = np.searchsorted(self.hashes, keys)
            held = starts < len(self.hashes)
            held[held] = self.hashes[starts[held]] == keys[held]
            for j in np.flatnonzero(held).tolist():  # only a value whose hash is held is compared
                i, key, at = asked[j], keys[j], int(starts[j])
                while at < len(self.hashes) and self.hashes[at] == key:
                    index = int(self.order[at])
                    if self.column[index] == values[i]:
                        found[i] = index
                        break
                    at += 1
        return found

    def __setitem__(self, value, index):
        """Index a value get() did not find (a value's index never changes)."""
        if value in self.added:
            raise ValueError(f"{value!r} is indexed already")
        self.added[value] = index
        self._later.append((_hash(value), index))

    def to_arrays(self, prefix):
        """The table, the values added since merged in (hashed as they came)."""
        later = np.array(self._later, np.uint64).reshape(-1, 2)
        hashes = np.concatenate((self.hashes, later[:, 0]))
        order = np.concatenate((self.order, later[:, 1].astype(np.int64)))
        sort = np.argsort(hashes, kind="stable")
        return {f"{prefix}.hashes": hashes[sort], f"{prefix}.order": order[sort]}

    @classmethod
    def from_arrays(cls, arrays, prefix, column):
        """The index a snapshot holds of `column`; None for a snapshot saved without one."""
        if f"{prefix}.hashes" not in arrays:
            return None
        hashes, order = arrays[f"{prefix}.hashes"], arrays[f"{prefix}.order"]
        if len(hashes) != len(order) or (len(order) and not 0 <= int(order.max()) < len(column)):
            raise ValueError(f"{prefix}: an index of values the column does not hold")
        return cls(column, hashes, order)


def sorted_unique(values):
    """np.unique of a 1-d array, by a sort: numpy 2.4's np.unique hashes, ten times
    slower at a million distinct integers (0.8 s against 0.06)."""
    values = np.sort(np.asarray(values))
    return values[np.concatenate(([True], values[1:] != values[:-1]))] if len(values) else values


def distinct(values, size):
    """np.unique of integers in [0, size): by a mark per value when they are many
    for `size` (the nodes around a speaker of half a long conversation: 1 ms where
    a sort takes 30), else by a sort (sorted_unique)."""
    values = np.asarray(values, dtype=np.int64)
    if len(values) * 8 < size:
        return sorted_unique(values)
    mark = np.zeros(size, dtype=bool)
    mark[values] = True
    return np.flatnonzero(mark)


def distinct_counts(groups, values, count, size):
    """Per group 0..count-1, how many distinct `values` (integers in [0, size)) it
    holds, `groups` giving each value's group. Each value's slot is stamped with one
    of the positions that wrote it, whichever numpy keeps: the position finding its
    own stamp is its value's one count. No sort of the values (a speaker's 500,000
    ties: 1 ms where np.unique took 50)."""
    groups, values = np.asarray(groups, dtype=np.int64), np.asarray(values, dtype=np.int64)
    counts = np.zeros(count, dtype=np.int64)
    if not len(values):
        return counts
    if count > 1:
        order = np.argsort(groups, kind="stable")
        groups, values = groups[order], values[order]
    bounds = np.searchsorted(groups, np.arange(count + 1))
    stamp = np.empty(size, dtype=np.int64)  # only the slots a group writes are read back
    for group in np.flatnonzero(bounds[1:] > bounds[:-1]).tolist():
        mine = values[bounds[group] : bounds[group + 1]]
        positions = np.arange(len(mine))
        stamp[mine] = positions
        counts[group] = np.count_nonzero(stamp[mine] == positions)
    return counts
