"""Checking stored chunks: which recorded rows of a run store are intact, and HDF5's Fletcher32 checksum.

The recorded rows of a run store are chunks compressed by hand (shuffle + deflate, see
:func:`dlnmomentum.store.format.encode_chunks`); deflate's zlib stream ends with the Adler-32 checksum of
the uncompressed bytes, so inflating a chunk checks it. Fixed-size datasets larger than a few KiB carry
HDF5's Fletcher32 filter (:func:`fletcher32` computes it the way HDF5 does), which HDF5 checks on every
read. A resume keeps only rows whose chunks verify (:func:`intact_rows`) and continues from the newest
checkpoint within them.
"""

import zlib

import h5py
import numpy as np

from .files import READ_ERRORS
from .format import chunk_offsets


def fletcher32(data):
    """HDF5's Fletcher32 checksum of ``data`` (``H5_checksum_fletcher32``): sums of big-endian 16-bit words
    folded to 16 bits every 360 words; stored after the chunk as a little-endian uint32."""
    data = bytes(data)
    words = np.frombuffer(data, dtype=">u2", count=len(data) // 2).astype(np.int64)
    sum1 = sum2 = 0
    for start in range(0, len(words), 360):
        sums = np.cumsum(words[start:start + 360])
        # C's uint32 arithmetic: at most the wrap-around of sum2 in one block, undone here by the mask
        sum2 = (sum2 + len(sums) * sum1 + int(sums.sum())) & 0xFFFFFFFF
        sum1 = sum1 + int(sums[-1])
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    if len(data) % 2:
        sum1 += data[-1] << 8
        sum2 += sum1
        sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
        sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    sum1 = (sum1 & 0xFFFF) + (sum1 >> 16)
    sum2 = (sum2 & 0xFFFF) + (sum2 >> 16)
    return (sum2 << 16) | sum1


def _filters(ds):
    dcpl = ds.id.get_create_plist()
    return [dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters())]


def chunk_is_intact(data, mask, filters, nbytes):
    """Whether the raw bytes of one chunk decode (checksums) to ``nbytes`` bytes through ``filters``."""
    data = bytes(data)
    for i in reversed(range(len(filters))):
        if mask & (1 << i):
            continue  # the filter was skipped for this chunk
        code = filters[i]
        if code == h5py.h5z.FILTER_FLETCHER32:
            if len(data) < 4 or fletcher32(data[:-4]) != int.from_bytes(data[-4:], "little"):
                return False
            data = data[:-4]
        elif code == h5py.h5z.FILTER_DEFLATE:
            try:
                data = zlib.decompress(data)  # checks the stream and the Adler-32 of the content
            except zlib.error:
                return False
        elif code != h5py.h5z.FILTER_SHUFFLE:  # shuffling keeps the length; nothing else is written here
            return True
    return len(data) == nbytes


def intact_rows(f, schema, limit=None):
    """``{key: rows}``: the rows of each recorded dataset up to its first chunk that does not verify.

    Only rows below ``limit[key]`` (default: all of them) are checked; the result is at most that.
    """
    out = {}
    for key, s in schema.items():
        ds = f[s.path]
        n = ds.shape[0] if limit is None else min(ds.shape[0], int(limit[key]))
        filters = _filters(ds)
        grid = [range(0, size, c) for size, c in zip(s.row_shape, s.chunks[1:], strict=True)]
        good = 0
        for row in range(0, n, s.chunk_rows):
            for offsets in chunk_offsets(grid):
                try:
                    mask, data = ds.id.read_direct_chunk((row,) + offsets)
                except READ_ERRORS:
                    data = None
                if data is None or not chunk_is_intact(data, mask, filters, s.chunk_bytes):
                    break
            else:
                good = min(row + s.chunk_rows, n)
                continue
            break
        out[key] = good
    return out
