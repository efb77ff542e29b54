"""Growable numpy columns for the read state's parts: rows live in slots that
never move (a removed row's slot stays dead until a rebuild compacts them), and
dense maps from the brain's integer ids to slots. Plain arrays, so a part is
cheap to hold at a million rows and to persist (snapshot.py)."""

import numpy as np


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
        return {f"{prefix}.{name}": array[: self.size] for name, array in self.arrays.items()}

    def load(self, arrays, prefix):
        """Take the columns `to_arrays` gave (a snapshot's) as they are: the first
        row added copies them into room to grow."""
        for name in self.arrays:
            stored = arrays[f"{prefix}.{name}"]
            self.size = len(stored)
            self.arrays[name] = stored if stored.flags.writeable else stored.copy()


class DenseMap:
    """A map from the brain's row ids (small non-negative integers: SQLite rowids)
    to slots, as one array indexed by id; -1 where an id has none."""

    def __init__(self):
        self.array = np.full(1024, -1, dtype=np.int64)

    def __getitem__(self, key):
        return int(self.array[key]) if 0 <= key < len(self.array) else -1

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
        return found

    def set(self, keys, values):
        keys = np.asarray(keys, dtype=np.int64)
        if not len(keys):
            return
        top = int(keys.max())
        if top >= len(self.array):
            grown = np.full(max(top + 1, 2 * len(self.array)), -1, dtype=np.int64)
            grown[: len(self.array)] = self.array
            self.array = grown
        self.array[keys] = values

    def pop(self, key):
        found = self.get(key)
        if found is not None:
            self.array[key] = -1
        return found

    def keys(self):
        return np.flatnonzero(self.array >= 0)

    def __len__(self):
        return int((self.array >= 0).sum())

    def __contains__(self, key):
        return self[key] >= 0


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
