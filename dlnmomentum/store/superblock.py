"""The HDF5 superblock of a store, read and repaired without HDF5: its version, its status flags (what the
``h5clear`` tool clears), the end of file it records, and the lookup3 checksum that guards versions 2 and 3.

HDF5 refuses a file whose flags say a writer has it open, or which is shorter than the end it records; both
happen to a store whose writer was killed or stopped by a file-size limit, whose committed rows are intact.
Reading these fields directly lets the store layer tell such a file from a damaged one and repair it.
"""

import os

from .errors import StoreCorruptError

HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_MASK32 = 0xFFFFFFFF


def _rot(x, k):
    return ((x << k) | (x >> (32 - k))) & _MASK32


def lookup3(data, initval=0):
    """Bob Jenkins' lookup3 ``hashlittle``, the checksum of HDF5 metadata (H5_checksum_lookup3)."""
    length = len(data)
    a = b = c = (0xDEADBEEF + length + initval) & _MASK32
    k = 0
    while length > 12:
        a = (a + int.from_bytes(data[k:k + 4], "little")) & _MASK32
        b = (b + int.from_bytes(data[k + 4:k + 8], "little")) & _MASK32
        c = (c + int.from_bytes(data[k + 8:k + 12], "little")) & _MASK32
        a = (a - c) & _MASK32; a ^= _rot(c, 4); c = (c + b) & _MASK32  # noqa: E702
        b = (b - a) & _MASK32; b ^= _rot(a, 6); a = (a + c) & _MASK32  # noqa: E702
        c = (c - b) & _MASK32; c ^= _rot(b, 8); b = (b + a) & _MASK32  # noqa: E702
        a = (a - c) & _MASK32; a ^= _rot(c, 16); c = (c + b) & _MASK32  # noqa: E702
        b = (b - a) & _MASK32; b ^= _rot(a, 19); a = (a + c) & _MASK32  # noqa: E702
        c = (c - b) & _MASK32; c ^= _rot(b, 4); b = (b + a) & _MASK32  # noqa: E702
        length -= 12
        k += 12
    if length == 0:
        return c
    tail = bytes(data[k:k + length]) + bytes(12 - length)
    a = (a + int.from_bytes(tail[0:4], "little")) & _MASK32
    b = (b + int.from_bytes(tail[4:8], "little")) & _MASK32
    c = (c + int.from_bytes(tail[8:12], "little")) & _MASK32
    c ^= b; c = (c - _rot(b, 14)) & _MASK32  # noqa: E702
    a ^= c; a = (a - _rot(c, 11)) & _MASK32  # noqa: E702
    b ^= a; b = (b - _rot(a, 25)) & _MASK32  # noqa: E702
    c ^= b; c = (c - _rot(b, 16)) & _MASK32  # noqa: E702
    a ^= c; a = (a - _rot(c, 4)) & _MASK32  # noqa: E702
    b ^= a; b = (b - _rot(a, 14)) & _MASK32  # noqa: E702
    c ^= b; c = (c - _rot(b, 24)) & _MASK32  # noqa: E702
    return c


def _signature_offset(fh, room):
    """The offset of the HDF5 signature (at 0, 512, 1024, 2048, ...) with ``room`` bytes from it, or None."""
    size = os.fstat(fh.fileno()).st_size
    offset = 0
    while offset + room <= size:
        fh.seek(offset)
        if fh.read(8) == HDF5_SIGNATURE:
            return offset
        offset = 512 if offset == 0 else offset * 2
    return None


def _superblock(fh):
    """(offset, bytes) of a version 2/3 superblock, or None."""
    offset = _signature_offset(fh, 48)
    if offset is None:
        return None
    fh.seek(offset)
    head = fh.read(12)
    if head[8] not in (2, 3):
        return None
    fh.seek(offset)
    return offset, fh.read(12 + 4 * head[9] + 4)  # head[9]: the size of an address


def superblock_flags(path):
    """The file-consistency flags of a v2/v3 superblock (0 = closed cleanly), or None."""
    with open(path, "rb") as fh:
        found = _superblock(fh)
    return None if found is None else found[1][11]


def superblock_eof(path):
    """The end-of-file address a v2/v3 superblock records (where HDF5 expects the file to end), or None when
    the file has no such superblock or its checksum does not verify."""
    try:
        with open(path, "rb") as fh:
            found = _superblock(fh)
    except OSError:
        return None
    if found is None:
        return None
    block = found[1]
    if lookup3(block[:-4]) != int.from_bytes(block[-4:], "little"):
        return None
    n = block[9]  # size of an address; then base address, extension address, end-of-file address
    base = int.from_bytes(block[12:12 + n], "little")
    return base + int.from_bytes(block[12 + 2 * n:12 + 3 * n], "little")


def clear_status_flags(path):
    """Clear the "open for writing" flags a killed writer leaves in the superblock (like ``h5clear``).

    Only done when the stored checksum verifies, so a damaged superblock is never rewritten.
    Returns ``(offset, block)``, the superblock as it was (true: :func:`restore_superblock` puts it back where the
    file turns out not to be one to repair), when the flags were set and are now cleared, else None.
    """
    with open(path, "r+b") as fh:
        found = _superblock(fh)
        if found is None:
            return None
        offset, block = found
        if block[11] == 0:
            return None
        body, stored = block[:-4], int.from_bytes(block[-4:], "little")
        if lookup3(body) != stored:
            raise StoreCorruptError(f"{path}: the HDF5 superblock checksum does not verify; not repairing it")
        body = body[:11] + b"\x00" + body[12:]
        fh.seek(offset)
        fh.write(body + lookup3(body).to_bytes(4, "little"))
        fh.flush()
        os.fsync(fh.fileno())
    return offset, bytes(block)


def restore_superblock(path, saved):
    """Put back the superblock :func:`clear_status_flags` returned (a file refused after its flags were cleared to
    read what it is is left byte for byte as it was)."""
    offset, block = saved
    with open(path, "r+b") as fh:
        fh.seek(offset)
        fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())


def superblock_version(path):
    """The version of the HDF5 superblock of ``path`` (0 to 3), or None when there is none."""
    try:
        with open(path, "rb") as fh:
            offset = _signature_offset(fh, 9)
            if offset is None:
                return None
            fh.seek(offset + 8)
            return fh.read(1)[0]
    except OSError:
        return None
