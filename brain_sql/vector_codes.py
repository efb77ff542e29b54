"""The vector leg's first pass: a sign code of each chunk's int8 vector, one bit
a dimension (32 bytes for 256 where the vector takes 256), from which a query
estimates every visible chunk's similarity while reading an eighth of the bytes;
the chunk index then scores the shortlist exactly (chunk_index.py).

The estimate is RaBitQ's (Gao and Long, SIGMOD 2024), without its random rotation
(no better on these vectors): with c a centre and r = x - c, x·q = c·q + r·q, and
r·q is estimated as (|r|²/|r|₁) s·q where s is the sign of r. The centre matters:
the brain's vectors share a large common part (the mean of the unit vectors has a
length near 0.7), and the sign of a vector without it taken away says little.

The centre is the mean of the live chunks' vectors, rounded to a grid of
VECTOR_CODES_GRID: an exact integer function of which vectors are live, so that a
state that followed writes and one built anew hold the same codes, and a write
costs work only when it moves the rounded mean (a column of every code is then
updated: the sums behind each chunk's scale are integers, kept exactly).

The query is cut to 4 bits a dimension (q̃ = 16u - 120 for u in 0..15, so that
each chunk's count of set bits drops out): s·q̃ = 120·D - 16·Σ_k 2^k H_k, where H_k
is the Hamming distance of the code to the query's k-th bit plane. faiss counts
those (its popcount kernel, without the GIL); everything else is numpy.
"""

import numpy as np

from .config import VECTOR_CODES_GRID
from .slots import Slots

PLANES = 4  # bits a dimension of the query
BLOCK = 32768  # codes estimated at a time: their distances stay in the cache while combined


class SignCodes:
    """Sign codes of a chunk index's vectors, in slots beside the index's own."""

    def __init__(self, dimension):
        self.dimension = dimension
        self.width = -(-dimension // 64) * 8  # bytes a code: faiss counts whole 64-bit words
        self.rows = Slots(
            {
                "bits": (np.uint8, (self.width,)),
                "sq": (np.int32, ()),  # |r|²: at most 256 x 255² for int8 vectors of 256
                "l1": (np.int32, ()),  # |r|₁
                "weight": (np.float32, ()),  # 16 |r|² / (|r|₁ |x|): the scale of the sign part
                "inverse": (np.float32, ()),  # 1 / |x|
            }
        )
        self.total = np.zeros(dimension, dtype=np.int64)  # the sum of the live vectors
        self.count = 0  # how many they are
        self.center = np.zeros(dimension, dtype=np.int16)  # the centre every code is taken around

    # -- the centre ----------------------------------------------------------------

    def wanted_center(self):
        """The live vectors' mean rounded to the grid, computed in integers."""
        if not self.count:
            return np.zeros(self.dimension, dtype=np.int16)
        grid = VECTOR_CODES_GRID
        return (grid * ((2 * self.total + self.count * grid) // (2 * self.count * grid))).astype(np.int16)

    # -- writing ---------------------------------------------------------------------

    def make(self, vectors, sqnorm, live):
        """Codes of every slot of `vectors` (the index's int8 matrix), around the mean
        of the `live` ones (a mask: live chunks with a vector)."""
        self.rows = SignCodes(self.dimension).rows
        self.rows.add(len(vectors))
        self.total = np.zeros(self.dimension, dtype=np.int64)
        for start in range(0, len(vectors), BLOCK):
            part = vectors[start : start + BLOCK][live[start : start + BLOCK]]
            self.total += part.sum(axis=0, dtype=np.int64)
        self.count = int(live.sum())
        self.center = self.wanted_center()
        self._encode(0, len(vectors), vectors, sqnorm)

    def add(self, slots, vectors, sqnorm, counted):
        """Codes for new `slots` (the next ones) of the index's `vectors`; `counted`
        are those of them that are live with a vector, which move the mean."""
        added = self.rows.add(len(slots))
        assert np.array_equal(added, slots), "codes and chunks out of step"
        self._count(vectors[counted], +1)
        self._recenter(vectors, sqnorm, int(slots[0]) if len(slots) else len(vectors))
        self._encode(len(vectors) - len(slots), len(vectors), vectors, sqnorm)

    def remove(self, vectors, sqnorm, uncounted):
        """Slots `uncounted` (live with a vector until now) leave the mean."""
        self._count(vectors[uncounted], -1)
        self._recenter(vectors, sqnorm, len(vectors))

    def _count(self, matrix, sign):
        if len(matrix):
            self.total += sign * matrix.sum(axis=0, dtype=np.int64)
            self.count += sign * len(matrix)

    def _recenter(self, vectors, sqnorm, size):
        """Bring the codes of the first `size` slots to the centre the live vectors
        now want: a column of every code for each dimension whose centre moved."""
        wanted = self.wanted_center()
        moved = np.flatnonzero(wanted != self.center)
        if not len(moved):
            return
        if len(moved) > self.dimension // 8:
            self.center = wanted
            self._encode(0, size, vectors, sqnorm)
            return
        rows = self.rows
        for j in moved:
            column = vectors[:size, j].astype(np.int32)
            before, after = column - int(self.center[j]), column - int(wanted[j])
            rows.sq[:size] += after * after - before * before
            rows.l1[:size] += np.abs(after) - np.abs(before)
            byte, bit = j // 8, np.uint8(1 << (j % 8))
            kept = rows.bits[:size, byte] & ~bit
            rows.bits[:size, byte] = kept | np.where(after > 0, bit, np.uint8(0))
        self.center = wanted
        rows.weight[:size] = _weight(rows.sq[:size], rows.l1[:size], rows.inverse[:size])

    def _encode(self, start, stop, vectors, sqnorm):
        """Codes of slots `start` to `stop` around the current centre."""
        rows = self.rows
        center = self.center
        threshold = np.clip(center, -128, 127).astype(np.int8)  # x > c alike for every int8 x
        ones = np.ones(self.dimension, dtype=np.float32)
        for first in range(start, stop, BLOCK):
            part = slice(first, min(stop, first + BLOCK))
            x = vectors[part]
            bits = np.packbits(x > threshold, axis=1, bitorder="little")
            rows.bits[part, : bits.shape[1]] = bits
            # in float32, exactly: every sum is an integer below 2^24 (256 x 255² at most)
            r = x.astype(np.float32)
            r -= center
            rows.sq[part] = np.einsum("ij,ij->i", r, r)
            np.abs(r, out=r)
            rows.l1[part] = r @ ones
            norm = np.sqrt(sqnorm[part].astype(np.float64))
            rows.inverse[part] = np.divide(1.0, norm, out=np.zeros(len(norm)), where=norm > 0)
            rows.weight[part] = _weight(rows.sq[part], rows.l1[part], rows.inverse[part])

    # -- reading -----------------------------------------------------------------------

    def estimate(self, query, slots=None):
        """float32 estimates of the cosine distance's order (lower is nearer; not the
        distance itself) of int8 `query` (an array) to the chunks in `slots`, or in
        every slot; each chunk's the same wherever it sits, so that the first pass
        picks the same chunks in a followed state as in a fresh build."""
        faiss = kernel()
        u = (query.astype(np.int16) + 128) >> 4
        planes = np.zeros((PLANES, self.width), dtype=np.uint8)
        bits = np.packbits((u[None] >> np.arange(PLANES)[:, None]) & 1, axis=1, bitorder="little")
        planes[:, : bits.shape[1]] = bits
        offset = np.float32(7.5 * self.dimension)  # 120·D / 16: s·q̃ / 16 = offset - Σ_k 2^k H_k
        qc = np.float32(query.astype(np.int64) @ self.center.astype(np.int64))
        rows = self.rows
        count = rows.size if slots is None else len(slots)
        out = np.empty(count, dtype=np.float32)
        counts = np.empty((PLANES, min(BLOCK, count)), dtype=np.int32)
        for start in range(0, count, BLOCK):
            end = min(count, start + BLOCK)
            at = slice(start, end) if slots is None else slots[start:end]
            codes = np.ascontiguousarray(rows.bits[at])
            part = counts[:, : end - start]
            if end - start < counts.shape[1]:
                part = np.ascontiguousarray(part)
            faiss.hammings(
                faiss.swig_ptr(planes), faiss.swig_ptr(codes), PLANES, end - start, self.width, faiss.swig_ptr(part)
            )
            weighted = part[PLANES - 1]
            for k in range(PLANES - 2, -1, -1):
                weighted <<= 1
                weighted += part[k]
            block = out[start:end]
            np.subtract(weighted, offset, out=block, casting="unsafe")
            block *= rows.weight[at]
            block -= rows.inverse[at] * qc
        return out

    # -- comparing and persisting ------------------------------------------------------

    def to_arrays(self):
        return self.rows.to_arrays("signs")

    def meta(self):
        return {
            "grid": VECTOR_CODES_GRID,
            "center": self.center.tolist(),
            "total": self.total.tolist(),
            "count": self.count,
        }

    @classmethod
    def from_arrays(cls, dimension, arrays, meta, size):
        """The codes a snapshot holds, or None when it holds none that fit (saved
        without them, or around another grid): the index makes them anew."""
        codes = cls(dimension)
        if (
            not meta
            or meta.get("grid") != VECTOR_CODES_GRID
            or any(f"signs.{name}" not in arrays for name in codes.rows.arrays)
        ):
            return None
        codes.rows.load(arrays, "signs")
        codes.total = np.array(meta["total"], dtype=np.int64)
        codes.count = int(meta["count"])
        codes.center = np.array(meta["center"], dtype=np.int16)
        if (
            codes.rows.size != size
            or codes.rows.bits.shape[1:] != (codes.width,)
            or codes.total.shape != (dimension,)
            or not np.array_equal(codes.center, codes.wanted_center())
        ):
            return None
        return codes


_kernel: list = []


def kernel():
    """faiss, which counts the Hamming distances; None where it cannot be imported
    (the vector leg then scans every visible vector). Imported on first use: a
    process that never scans a big brain never loads it."""
    if not _kernel:
        try:
            import faiss
        except ImportError:
            faiss = None
        _kernel.append(faiss)
    return _kernel[0]


def _weight(sq, l1, inverse):
    """16 |r|² / (|r|₁ |x|) as float32, 0 where |r|₁ is: the same arithmetic whether
    a code was made whole or had a column moved."""
    weight = np.multiply(sq, inverse, dtype=np.float32)
    weight *= np.float32(16.0)
    np.divide(weight, l1, out=weight, where=l1 > 0)
    weight[l1 <= 0] = 0
    return weight
