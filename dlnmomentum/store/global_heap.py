"""HDF5 global heap collections (blocks that begin with ``GCOL``: the text of variable-length strings, such as a
store's configuration), found and walked without HDF5.

HDF5 decodes a collection by walking its objects (``H5HG__cache_heap_deserialize``), and a damaged one can make
that walk stand still: HDF5 2.0.0 then loops forever inside the C library, where Ctrl-C cannot stop it. The
store layer walks every collection of a file the same way before HDF5 opens it (:func:`heap_damage`), so such a
file is an error naming it instead of a hang.

The layout (HDF5 File Format Specification, III.E "Global Heap"; L is the superblock's "size of lengths", 8 in
every file of this package): a collection is its signature, version 1, three reserved (zero) bytes and its size
(L bytes, the whole collection, at least 4096); then objects, each a 2-byte heap object index, a 2-byte reference
count, 4 reserved bytes, an L-byte object size and the data padded to a multiple of 8. An object of index > 0 takes
``8 + L + align8(size)`` bytes; index 0 is the free space, whose size already counts its header; fewer than
``8 + L`` bytes left are free space without a header. An index-0 object of size 0 never moves the walk on: the
hang, and the only thing reported: HDF5 2.0.0 refuses (with an error) an object that runs past the collection's
end, so that is left to it, and a walk that meets such an object stops there (a stale collection in space HDF5 freed
and partly reused is never read by HDF5, and must not make a good file unreadable).
"""

import array
import os
import stat

import numpy as np

from .superblock import _signature_offset

SIGNATURE = b"GCOL"
#: The smallest collection HDF5 writes or reads (``H5HG_MINSIZE``).
MIN_SIZE = 4096
#: Bytes read at a time while looking for collections. The file is read, not mapped: a file that another process
#: shortens meanwhile (a failed resume puts a file back to its size) then reads short, where a mapping would kill
#: this process with SIGBUS.
BLOCK = 1 << 22
#: Files up to this size are scanned whole (a few ms). In a larger one (a long trajectory: GBs of recorded rows) the
#: bytes of its stored chunks are left out (:func:`chunk_ranges`): reading it all made every open of a store read the
#: whole file (seconds per GB, and again after each change of a live store).
HEAP_SCAN_WHOLE_BYTES = 64 * 2**20
#: Results of :func:`heap_damage` by (device, inode, size, mtime): an unchanged file is not scanned again.
_CACHE = {}
_CACHE_MAX = 256


def _align8(n):
    return (n + 7) & ~7


def walk(block, length_size=8):
    """Walk the objects of one collection (``block``: its bytes, from its signature to its end) as HDF5 does.

    Returns None when the walk ends at the collection's end, else ``(offset, problem)``: the offset in ``block`` of
    the object where it goes wrong and what is wrong there (a sentence).
    """
    end = len(block)
    head = 8 + length_size  # the collection's header and each object's header have the same length
    p = head
    while p < end:
        if p + head > end:  # too little room for an object header: free space (HDF5 takes it so)
            return None
        index = int.from_bytes(block[p:p + 2], "little")
        size = int.from_bytes(block[p + 8:p + 8 + length_size], "little")
        need = head + _align8(size) if index > 0 else size
        if need == 0:
            return p, "its object header there has index 0 (free space) and size 0, on which HDF5 loops forever"
        if need > end - p:  # HDF5 2.0.0 refuses it itself (an error, no hang) if it ever reads this collection;
            return None     # and bytes a live collection does not reach (freed space) must not refuse a good file
        p += need
    return None


def _length_size(superblock):
    """The "size of lengths" of a superblock (its first 16 bytes: byte 14 in versions 0-1, byte 10 in versions 2-3);
    8 where it cannot be read (HDF5 then refuses the file itself)."""
    at = {0: 14, 1: 14, 2: 10, 3: 10}.get(superblock[8]) if len(superblock) == 16 else None
    size = superblock[at] if at is not None else 8
    return size if size in (2, 4, 8) else 8


def collections(data, length_size=8, total=None, start=0, stop=None):
    """``(offset, size)`` of each global heap collection in ``data`` (bytes of a file from its offset ``start``; the
    file has ``total`` bytes, default ``start + len(data)``): each place where ``GCOL`` begins (before ``stop`` in
    ``data``) a whole collection header, version 1, reserved bytes zero and a size of at least 4096 that stays within
    the file; so these bytes among the numbers of a chunk are not taken for a collection."""
    total = start + len(data) if total is None else total
    stop = len(data) if stop is None else stop
    head = 8 + length_size
    found = []
    at = data.find(SIGNATURE, 0, stop)
    while at >= 0:
        header = data[at:at + head]
        if len(header) == head and header[4] == 1 and header[5:8] == b"\0\0\0":
            size = int.from_bytes(header[8:], "little")
            if MIN_SIZE <= size <= total - start - at:
                found.append((start + at, size))
        at = data.find(SIGNATURE, at + 1, stop)
    return found


def gaps(total, skip):
    """The ``(start, end)`` byte ranges of ``[0, total)`` outside the sorted, disjoint ranges ``skip``."""
    out, at = [], 0
    for start, end in skip:
        if start > at:
            out.append((at, min(start, total)))
        at = max(at, end)
    if at < total:
        out.append((at, total))
    return [(a, b) for a, b in out if a < b]


def scan(fh, total, base=0, skip=()):
    """``(collection, object, problem)`` for the first collection of the open file ``fh`` (``total`` bytes, its
    superblock at ``base``) whose walk :func:`walk` reports, offsets from the file's start; or None.

    ``skip``: sorted, disjoint ``(start, end)`` byte ranges where no collection begins (the stored chunks of the
    file's datasets: HDF5 never places a collection in bytes a live chunk holds), not searched: the recorded rows
    of a long run are most of its file."""
    fh.seek(base)
    length_size = _length_size(fh.read(16))
    head = 8 + length_size
    buf = bytearray(BLOCK + head - 1)  # blocks overlap by a header less a byte: a header across two is seen whole
    for low, high in gaps(total, skip):
        for begin in range(low, high, BLOCK):
            # (signatures that begin in [begin, min(begin + BLOCK, high)); the header itself may run on past high)
            want = min(BLOCK, high - begin) + head - 1
            fh.seek(begin)
            n = fh.readinto(memoryview(buf)[:want])
            stop = want - head + len(SIGNATURE)
            for at, size in collections(buf if n == len(buf) else bytes(buf[:n]), length_size, total, begin,
                                        stop=stop):
                fh.seek(at)
                block = fh.read(size)
                bad = walk(block, length_size) if len(block) == size else None
                if bad is not None:
                    return at, at + bad[0], bad[1]
    return None


def heap_damage(path, skip=None):
    """``(collection, object, problem)`` for the first global heap collection of the file ``path`` on which HDF5's
    reader would hang: the byte offsets of the collection and of the object, and what is
    wrong; None when there is none, or when the file cannot be read (HDF5 then says what is wrong with it).
    ``skip``: byte ranges not searched (:func:`scan`); by default, for a file over :data:`HEAP_SCAN_WHOLE_BYTES`,
    the bytes of its stored chunks (:func:`chunk_ranges`: a few microseconds per chunk, listed only when the file is
    scanned, so not again for an unchanged file).

    The result is kept for the file's (device, inode, size, modification time): opening an unchanged file again
    does not scan it again.
    """
    try:
        with open(path, "rb", buffering=0) as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size < MIN_SIZE:
                return None
            key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            if key in _CACHE:
                return _CACHE[key]
            base = _signature_offset(fh, 16)
            if base is None:  # not HDF5: HDF5 says so
                return None
            if skip is None:
                skip = chunk_ranges(path) if st.st_size > HEAP_SCAN_WHOLE_BYTES else ()
            result = scan(fh, st.st_size, base, skip)
    except (OSError, ValueError):
        return None
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[key] = result
    return result


def file_key(path):
    """The key of :func:`heap_damage`'s results for the file ``path`` as it is now; None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def keep_clean(path, before):
    """After this process rewrote only chunk bytes of ``path`` in place (a sweep store's wave: every chunk allocated
    when the store was made, no string written), the file's collections are those of the file as it was (key
    ``before``): when that one had no damage, neither has the file as it is now, which is not scanned again.

    Without this a writer scanned its whole store before every wave (its modification time had changed): ~2 ms
    per MB, the store's size times the number of waves. A file of another size is scanned again.
    """
    after = file_key(path)
    if before is None or after is None or after[:3] != before[:3] or before not in _CACHE or _CACHE[before] is not None:
        return
    if len(_CACHE) >= _CACHE_MAX:
        _CACHE.clear()
    _CACHE[after] = None


def chunk_ranges(path):
    """Sorted, merged ``(start, end)`` byte ranges of the stored chunks of the chunked datasets of the HDF5 file
    ``path`` with more than a few chunks, listed by HDF5 (``H5Dchunk_iter``; opening a file and listing its chunks
    reads no collection: HDF5 walks one only to read a string's value); ``()`` where they cannot be listed (a file
    HDF5 does not open now: it is then scanned whole). No collection lies in a live chunk's bytes."""
    import h5py  # (only here: the collections themselves are found and walked without HDF5)

    found = array.array("q")  # (byte_offset, size) of each chunk, 16 bytes each: 10⁷ rows at d = 30 have 3·10⁵

    def visit(_name, obj):
        if isinstance(obj, h5py.Dataset) and obj.chunks is not None and obj.id.get_num_chunks() > 16:
            obj.id.chunk_iter(lambda info: found.extend(info[2:]))

    for swmr in (False, True):  # (a file a writer holds in SWMR mode opens in SWMR mode only)
        try:
            with h5py.File(path, "r", locking=False, swmr=swmr) as f:
                f.visititems(visit)
            break
        except Exception:  # noqa: BLE001 - busy, damaged, open in this process otherwise: the whole file is scanned
            del found[:]
    if not found:
        return ()
    ranges = np.frombuffer(found, dtype=np.int64).reshape(-1, 2).copy()
    ranges[:, 1] += ranges[:, 0]
    ranges = ranges[np.argsort(ranges[:, 0], kind="stable")]
    ends = np.maximum.accumulate(ranges[:, 1])
    first = np.flatnonzero(np.r_[True, ranges[1:, 0] > ends[:-1]])  # each merged range begins past all before
    last = np.r_[first[1:] - 1, len(ranges) - 1]
    return list(zip(ranges[first, 0].tolist(), ends[last].tolist(), strict=True))
