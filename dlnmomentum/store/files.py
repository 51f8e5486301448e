"""The I/O layer under every store (run and sweep files): stable type names, checkpoint files, the writer
lock, durability helpers, opening files so that readers never block writers, busy/damaged read errors and
guarded text.

``<store>.ckpt`` (atomically replaced, previous kept as ``.ckpt.prev``), ``<store>.lock``
(pid/host of the writer). Re-exported from here: the errors (:mod:`.errors`), stores built in memory
(:mod:`.memory_image`) and the repair of the superblock flags a killed HDF5 writer leaves behind
(:mod:`.superblock`). See ``docs/store-format.md``.
"""

import contextlib
import dataclasses
import datetime
import json
import math
import os
import socket
import time
import zlib

import h5py
import numpy as np

from ..runs import registry
from .errors import (  # noqa: F401 (re-exported: the package imports them from here)
    StoreBusyError,
    StoreCorruptError,
    StoreError,
    StoreExistsError,
    StoreLockedError,
    command,
)
from .global_heap import heap_damage
from .handles import locked_by_another_process, open_handles
from .lockfile import (  # noqa: F401 (process_start, pid_alive, read_lock re-exported)
    describe_writer,
    lock_age,
    lock_is_stale,
    lock_record,
    pid_alive,
    process_start,
    read_lock,
)
from .memory_image import memory_h5, write_h5_image  # noqa: F401 (re-exported: the store modules import them from here)
from .superblock import (  # noqa: F401 (re-exported: the store modules import them from here)
    HDF5_SIGNATURE,
    clear_status_flags,
    lookup3,
    restore_superblock,
    superblock_eof,
    superblock_flags,
    superblock_version,
)

CHECKPOINT_FORMAT = "dlnmomentum-checkpoint"
CHECKPOINT_VERSION = 1

# -- small utilities ----------------------------------------------------------------------------

def utc_now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def real_path(path):
    """``path`` itself, or, when a symbolic link is on the way, the file it leads to (``os.path.realpath``).

    Writers work on this path: the lock and the checkpoints of a store are named after the file itself, so
    a symlink to a store is locked out while another process writes the store (and finds its checkpoints),
    and a file written through a symlink replaces the file, never the link.
    """
    path = os.fspath(path)
    real = os.path.realpath(path)
    return path if real == os.path.abspath(path) else real


def side_paths(path):
    """The files next to a store (named after :func:`real_path`): checkpoint, previous checkpoint, lock."""
    path = real_path(path)
    return {"checkpoint": path + ".ckpt", "previous": path + ".ckpt.prev", "lock": path + ".lock"}


def fsync_file(path):
    """Data of ``path`` on disk (fdatasync where available)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        getattr(os, "fdatasync", os.fsync)(fd)
    finally:
        os.close(fd)


def fsync_dir(path):
    """fsync the directory holding ``path`` (makes renames durable; best effort)."""
    try:
        fd = os.open(os.path.dirname(os.path.abspath(path)) or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def resolve_type(name, what="type"):
    """The class of a stable type name written in a store (:mod:`dlnmomentum.runs.registry`)."""
    try:
        return registry.resolve(name, what)
    except registry.UnknownTypeError as exc:
        raise StoreError(f"{exc}: the store was written by another version of dlnmomentum") from None


def type_name(obj_or_cls):
    """The stable name written for a type (never a Python module path)."""
    return registry.type_name(obj_or_cls)


def to_jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if hasattr(value, "_asdict"):
        return to_jsonable(value._asdict())
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value


def dumps(value):
    return json.dumps(to_jsonable(value), sort_keys=False)


def finite_json(value):
    """``to_jsonable(value)`` with every non-finite float as ``None``: standard JSON, which has no NaN or
    Infinity (a diverged run's losses are ``null``; its status says why)."""
    value = to_jsonable(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite_json(v) for v in value]
    return value


def json_text(value):
    """``value`` as standard JSON text (:func:`finite_json`; ``allow_nan=False`` proves it)."""
    return json.dumps(finite_json(value), allow_nan=False)


def attr_str(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return str(value)


# -- guarded strings ------------------------------------------------------------------------------
# HDF5 keeps the text of a variable-length string (an attribute's or a dataset's) in its global heap, which has no
# checksum, while object headers, chunk indexes and the other heaps of the newest superblock have one. A string
# that decides what a store means (a run's configuration, the types of /final, a problem's parameters) is therefore
# written with its CRC-32 beside it, in a fixed-size attribute of the same object (in its checksummed header): one
# damaged byte of a configuration is then an error, not another configuration. Stores written before 0.6.0 have no
# such attributes and are read as before.

#: The attribute ``<name>_crc32`` guards the string attribute ``<name>`` of the same object.
CRC_SUFFIX = "_crc32"
#: The attribute of a string dataset that guards its text.
TEXT_CRC = "text_crc32"


def text_crc(text):
    """The CRC-32 of ``text`` (UTF-8), as stored beside it (int64)."""
    return np.int64(zlib.crc32(attr_str(text).encode("utf-8")))


def guarded(mapping, *names):
    """``mapping`` (attributes to write) plus ``<name>_crc32`` for each of ``names`` (strings in it)."""
    out = dict(mapping)
    for name in names:
        out[name + CRC_SUFFIX] = text_crc(mapping[name])
    return out


def is_guard(name):
    """Whether the attribute ``name`` is a guard of :func:`guarded` (not part of what it guards)."""
    return name.endswith(CRC_SUFFIX)


def verify_guarded(attrs, path, where, hint=None):
    """Raise :class:`StoreCorruptError` (naming the file, ``where`` and the attribute) if a guarded string attribute
    of ``attrs`` (an object's attributes) does not match its CRC-32; ``hint`` says what repairs it (default: what
    damaged HDF5 metadata needs, :data:`UNREPAIRABLE`)."""
    for key in list(attrs.keys()):
        if not is_guard(key):
            continue
        name = key[:-len(CRC_SUFFIX)]
        value = attrs.get(name)
        if value is None or text_crc(value) != int(attrs[key]):
            raise StoreCorruptError(f"store {path}: the attribute {name!r} of {where} is damaged (its text does not "
                                    f"match the CRC-32 stored beside it){UNREPAIRABLE if hint is None else hint}")


# -- checkpoints --------------------------------------------------------------------------------

@dataclasses.dataclass
class Checkpoint:
    """Kernel state + row bookkeeping: everything needed to continue a run bit for bit.

    ``written[key]`` rows of each dataset are in the .h5 as whole chunks (flushed before the
    checkpoint); ``pending[key]`` holds the rows recorded after them (less than a chunk).
    """

    meta: dict
    state: dict
    pending: dict
    source: str = ""

    @property
    def done(self):
        return int(self.meta["done"])

    @property
    def rows(self):
        return int(self.meta["rows"])

    @property
    def written(self):
        return {k: int(v) for k, v in self.meta["written"].items()}

    @property
    def store_id(self):
        return self.meta.get("store_id")

    def arrays(self):
        out = {f"state.{k}": np.asarray(v) for k, v in self.state.items()}
        out.update({f"pending.{k}": np.asarray(v) for k, v in self.pending.items()})
        return out


def write_checkpoint_file(path, ckpt):
    """Atomically replace ``<path>.ckpt`` (tmp file, fsync, rename; the old one kept as ``.ckpt.prev``)."""
    sides = side_paths(path)
    target, previous = sides["checkpoint"], sides["previous"]
    tmp = f"{target}.tmp{os.getpid()}"
    payload = {"meta": np.frombuffer(json.dumps(ckpt.meta).encode("utf-8"), dtype=np.uint8)}
    payload.update(ckpt.arrays())
    try:
        with open(tmp, "wb") as fh:
            np.savez(fh, **payload)
            fh.flush()
            os.fsync(fh.fileno())
        if os.path.exists(target):
            os.replace(target, previous)
        os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(target)


# The opening bytes of every checkpoint this package wrote, damaged or not: np.savez stores ``meta`` first and
# uncompressed, and ``meta``'s JSON opens with its format. A damaged checkpoint is recognised by them, so a file of a
# checkpoint's name that lacks them (a user's) is refused where the package's own are replaced or removed.
CHECKPOINT_MARK = json.dumps({"format": CHECKPOINT_FORMAT})[:-1].encode("utf-8")
CHECKPOINT_MARK_WINDOW = 4096  # (the zip member header and the .npy header before the mark take about 200 bytes)


def written_as_checkpoint(file):
    """Whether the regular file ``file`` is a checkpoint this package wrote, intact or damaged: a zip whose opening
    bytes hold :data:`CHECKPOINT_MARK`, or an empty file (a checkpoint whose bytes a crash kept from the disk: it
    holds nothing of anyone's). Only the opening bytes are read."""
    with open(file, "rb") as fh:
        head = fh.read(CHECKPOINT_MARK_WINDOW)
    return not head or (head.startswith(b"PK\x03\x04") and CHECKPOINT_MARK in head)


def read_checkpoint_file(file):
    """The checkpoint in ``file``; raises ``StoreCorruptError`` if it is incomplete or damaged."""
    import zipfile

    try:
        with np.load(file, allow_pickle=False) as z:
            meta = json.loads(bytes(z["meta"]).decode("utf-8"))
            arrays = {k: z[k] for k in z.files if k != "meta"}
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise StoreCorruptError(f"checkpoint {file} is unreadable: {exc}") from exc
    if meta.get("format") != CHECKPOINT_FORMAT:
        raise StoreCorruptError(f"{file} is not a dlnmomentum checkpoint")
    state = {k[6:]: v for k, v in arrays.items() if k.startswith("state.")}
    pending = {k[8:]: v for k, v in arrays.items() if k.startswith("pending.")}
    return Checkpoint(meta, state, pending, source=str(file))


# -- lock file ----------------------------------------------------------------------------------

def locked_error(path, holder):
    """The :class:`StoreLockedError` for a store whose lock ``holder`` (:func:`lock_holder`'s dict; ``{}``: its lock
    file is being created) is a live writer: it names the writer and what to do."""
    who = describe_writer(holder) if holder else "another process (its lock file is being created)"
    return StoreLockedError(f"store {path} is open for writing by {who}; wait for it to finish or stop it "
                            f"(if no such process exists, delete {side_paths(path)['lock']})")


class WriterLock:
    """``<store>.lock``: created with O_EXCL, holds the writer's pid/host; stale locks are taken over.

    Only what this package writes is ever removed: a lock file that is not a writer record (a directory, a file it
    cannot read, other content) refuses the writer with a message naming it, and is left as it is.
    """

    def __init__(self, path, info):
        self.path = path
        self.lock_path = side_paths(path)["lock"]
        self.info = info
        self.released = False

    @classmethod
    def acquire(cls, path, purpose):
        info = {"pid": os.getpid(), "host": socket.gethostname(), "since": utc_now(), "purpose": purpose,
                "token": os.urandom(8).hex()}
        started = process_start(os.getpid())
        if started is not None:
            info["process_start"] = started
        lock_path = side_paths(path)["lock"]
        for _ in range(5):
            try:
                fd = os.open(lock_path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except PermissionError as exc:  # a read-only directory: said, with what still works
                raise StoreError(f"cannot create the lock file {lock_path} of store {path} ({exc.strerror}): "
                                 f"{purpose} needs a writable directory; reading a store needs nothing "
                                 f"(dlnmomentum.open_store, open_sweep, dlnm inspect)") from None
            except FileExistsError:
                other, problem = lock_record(lock_path)
                if problem == "missing":  # released between the two calls
                    continue
                if problem not in (None, "empty"):  # not a lock this package wrote: whose it is cannot be known
                    raise StoreError(
                        f"the lock file {lock_path} of store {path} {problem}: {purpose} cannot tell whether another "
                        f"process is writing the store, and removes only lock files it wrote; if no process writes "
                        f"the store, remove {lock_path} (or move it away), then try again") from None
                if lock_is_stale(lock_path, other):
                    _remove_stale(lock_path, path, other)
                    continue
                raise locked_error(path, other or {}) from None
            try:
                with os.fdopen(fd, "w") as fh:
                    json.dump(info, fh)
            except OSError as exc:  # a full disk: no half-written lock is left behind
                with contextlib.suppress(OSError):
                    os.unlink(lock_path)
                raise StoreError(f"cannot write the lock file {lock_path} of store {path}: {exc}") from exc
            return cls(path, info)
        raise StoreLockedError(f"could not acquire the lock {lock_path} of store {path}")

    def release(self):
        if self.released:
            return
        self.released = True
        other = read_lock(self.lock_path)
        if other is not None and other.get("token") == self.info["token"]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.lock_path)


def lock_holder(path, ignore_self=False):
    """The live writer of a store as a dict, or None (``ignore_self``: None when it is this process).

    ``{}``: a writer whose lock file is being created (empty and new). A lock file that holds no writer record (a
    directory, unreadable, other content) names no writer: None (a writer refuses it, see :class:`WriterLock`).
    """
    lock_path = side_paths(path)["lock"]
    info, problem = lock_record(lock_path)
    if problem not in (None, "empty"):
        return None
    if lock_is_stale(lock_path, info):
        return None
    if ignore_self and info and info.get("pid") == os.getpid() and info.get("host") == socket.gethostname():
        return None
    return info or {}


def _remove_stale(lock_path, path, stale):
    """Remove the lock file ``lock_path`` of ``path`` judged stale (``stale``: its record, None for an old empty
    file). It is renamed away first, then read again: another writer may have taken the stale lock over and made its
    own between the check and the rename, and that live lock is put back (a hard link: only where nothing is)."""
    tmp = f"{lock_path}.stale{os.getpid()}"
    try:
        os.replace(lock_path, tmp)
    except FileNotFoundError:
        return
    except OSError as exc:  # (a sticky /tmp and another user's lock, a read-only directory)
        whose = f"by {describe_writer(stale)}, which is gone" if stale else "empty, by a writer that died"
        raise StoreError(f"the lock file {lock_path} of store {path} was left {whose}, and cannot be removed "
                         f"({exc.strerror or exc}): remove it (its owner can), then try again") from None
    try:
        info, problem = lock_record(tmp)
        same = info == stale if stale is not None else problem == "empty" and lock_is_stale(tmp, None)
        if not same:
            with contextlib.suppress(OSError):
                os.link(tmp, lock_path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


# -- opening HDF5 files: readers never block writers ------------------------------------------------
#
# HDF5 locks a file while it is open (shared for readers, exclusive for a writer outside SWMR mode), so a
# reader that opens a store while its writer reopens it (to finalise a run, resume it, write a wave of a
# sweep) makes the writer fail. Readers therefore open without a lock wherever the file's superblock has
# the status flags of version 2/3 (every store since 0.3.0 and every run store): HDF5 itself refuses them
# while a writer has the file open outside SWMR mode, so they never read a file being changed, and they
# wait and retry; a writer waits for readers that do hold a lock (files of older versions, other
# programs). See docs/store-format.md, "Readers and writers".

#: Seconds a reader waits for a writer's short exclusive phases before reporting the file busy.
READ_WAIT = 10.0
#: Seconds a writer waits for readers holding an HDF5 lock on the file before giving up.
WRITE_WAIT = 60.0
#: Seconds a writer waits for another handle of its own process on the file (a reader thread's) to close.
OWN_HANDLE_WAIT = 1.0
#: HDF5's error when a file open in this process is opened again with other file-locking settings.
_LOCKING_MISMATCH = "file locking flag values don't match"


def check_readable(path):
    if not os.path.exists(path):
        raise FileNotFoundError(f"store {path} does not exist")
    if os.path.isdir(path):
        raise StoreError(f"store {path} is a directory, not an HDF5 file")


def _backoff(deadline, delay):
    if time.monotonic() > deadline:
        return None
    time.sleep(delay)
    return min(2 * delay, 0.2)


def _busy(path, what, exc):
    holder = lock_holder(path, ignore_self=True)
    who = f" (process {holder.get('pid')} on {holder.get('host')})" if holder else ""
    return StoreBusyError(f"store {path} is {what}{who}; try again in a moment (HDF5: {exc})")


def require_walkable_heaps(path, deadline):
    """Raise :class:`StoreCorruptError` (the file, the offset; resuming cannot repair it) when a global heap
    collection of ``path`` would make HDF5 loop forever, uninterruptibly (:func:`.global_heap.heap_damage`): checked
    before HDF5 opens a file. While a live writer (another process) holds the store's lock, the collection may be
    one it is writing: waited for until ``deadline``, then :class:`StoreBusyError`."""
    delay = 0.005
    while (damage := heap_damage(path)) is not None:
        heap, obj, problem = damage
        if lock_holder(path, ignore_self=True) is None:
            raise StoreCorruptError(f"store {path}: the HDF5 global heap collection at byte {heap} (the text of "
                                    f"string attributes) is damaged at byte {obj}: {problem}{UNREPAIRABLE}")
        if (delay := _backoff(deadline, delay)) is None:
            holder = lock_holder(path, ignore_self=True)
            who = describe_writer(holder) if holder else "another process"
            raise StoreBusyError(f"store {path} is being written by {who}, and its HDF5 global heap collection at "
                                 f"byte {heap} is unfinished ({problem}); try again in a moment")


def open_h5(path, wait=READ_WAIT):
    """``(h5py.File, live)`` read-only; ``live`` when a writer has the file open in SWMR mode or died with it.

    Raises :class:`StoreBusyError` when a writer keeps the file in an exclusive phase for ``wait``
    seconds, :class:`StoreCorruptError` (naming the file) when it is not a readable HDF5 file, or one on which
    HDF5 would hang (:func:`require_walkable_heaps`).
    """
    check_readable(path)
    unlocked = superblock_version(path) in (2, 3)
    kw = {"locking": False} if unlocked else {}
    deadline, delay = time.monotonic() + wait, 0.005
    require_walkable_heaps(path, deadline)
    while True:
        try:
            return h5py.File(path, "r", **kw), False
        except OSError as exc:
            last = exc
        msg = str(last)
        if _LOCKING_MISMATCH in msg and kw:  # a handle of this process (h5py, xarray) holds it with HDF5's lock
            kw = {}
            continue
        if "already open for write" in msg or "open for SWMR" in msg:
            try:
                return h5py.File(path, "r", swmr=True, **kw), True
            except OSError as exc:
                last = exc
            if "unable to lock" not in str(last):  # the file is marked open for writing outside SWMR mode
                # a writer that died left the flags; a live one (ours, or another program's: its lock) is waited for
                if lock_holder(path, ignore_self=True) is None and not locked_by_another_process(path):
                    raise StoreCorruptError(
                        f"store {path} was left open by a writer that died outside its streaming phase; "
                        f"continuing it repairs it: `{command('resume', path)}` (dlnmomentum.resume) for a run, "
                        f"dlnmomentum.resume_sweep({path!r}) (`{command('sweep', '--store', path, '--resume')}`, "
                        f"`{command('network', 'ARCHITECTURE', '--store', path, '--resume')}`) for a sweep") from last
        elif "truncated file" in msg and lock_holder(path, ignore_self=True) is not None:
            pass  # a live writer is extending the file under this unlocked reader: wait and retry
        elif "unable to lock" not in msg:
            raise _open_error(path, last) from last
        delay = _backoff(deadline, delay)
        if delay is None:
            raise _busy(path, "being written by another process", last) from last


def open_h5_for_writing(path, wait=WRITE_WAIT, **kwargs):
    """``h5py.File(path, "r+")`` for the holder of the store's writer lock, waiting for readers.

    Only readers that hold an HDF5 file lock can be in the way (see above); after ``wait`` seconds
    :class:`StoreBusyError` names the file. A file on which HDF5 would hang is :class:`StoreCorruptError`
    (:func:`require_walkable_heaps`); other errors are raised as they are.
    """
    start, delay = time.monotonic(), 0.005
    deadline = start + wait
    require_walkable_heaps(path, deadline)
    while True:
        try:
            return h5py.File(path, "r+", **kwargs)
        except OSError as exc:
            handles = open_handles(path)
            if handles:  # a handle of this process: a reader thread's closes in a moment, a user's does not
                delay = _backoff(start + min(wait, OWN_HANDLE_WAIT), delay)
                if delay is None:
                    raise StoreBusyError(f"store {path} is open in this process through {handles}; HDF5 cannot "
                                         f"open it for writing meanwhile: close that handle first (f.close(), "
                                         f"ds.close()), then try again (HDF5: {exc})") from exc
                continue
            if "unable to lock" not in str(exc):
                raise
            delay = _backoff(deadline, delay)
            if delay is None:
                raise StoreBusyError(f"store {path} cannot be opened for writing: another program keeps it "
                                     f"open with an HDF5 file lock (close it there; HDF5: {exc})") from exc


def _open_error(path, exc):
    msg = str(exc)
    if _LOCKING_MISMATCH in msg or "already open for read-only" in msg:
        handles = open_handles(path)
        return StoreBusyError(f"store {path} is open in this process through {handles or 'another HDF5 handle'} "
                              f"with other settings: close it first (f.close(), ds.close()) (HDF5: {msg})")
    try:
        with open(path, "rb") as fh:
            head = fh.read(8)
        size = os.path.getsize(path)
    except OSError:
        head, size = b"", -1
    if size == 0:
        return StoreCorruptError(f"store {path} is empty (0 bytes): not an HDF5 file")
    if "truncated file" in msg:
        eof = superblock_eof(path)
        if eof is not None and eof > size:
            return StoreCorruptError(
                f"store {path} is truncated: it has {size} bytes of the {eof} its HDF5 superblock records. A "
                f"writer stopped by a file-size limit (ulimit -f) or a full disk leaves a run store so: "
                f"`{command('resume', path)}` extends it and rebuilds it from its committed rows (which verify by "
                f"their checksums) unless the missing bytes held part of its HDF5 metadata (then it says so and "
                f"leaves the file as it is). Sweep, network sweep and figure stores are never left so by their writers "
                f"(made whole, then written in place): such a file was cut short afterwards (a copy), restore it "
                f"from a copy or compute it again (HDF5: {msg})")
        return StoreCorruptError(f"store {path} is truncated ({size} bytes; HDF5: {msg})")
    if head != HDF5_SIGNATURE and "signature" in msg:
        return StoreCorruptError(f"store {path} is not an HDF5 file (no HDF5 signature; {size} bytes)")
    return StoreCorruptError(f"store {path} cannot be opened: it is damaged or not a dlnmomentum store "
                             f"(HDF5: {msg})")


#: What HDF5 says when the file's own structure (object headers, chunk indexes, heaps: every one has a
#: checksum in files of the newest superblock) is damaged, rather than the numbers of a chunk.
_METADATA_DAMAGE = ("incorrect metadata checksum", "bad object header", "wrong signature", "bad signature")
#: The advice for such damage: resuming rewrites chunks of numbers, never the file's structure.
UNREPAIRABLE = ("; the damage is in the file's HDF5 metadata (its structure, not the numbers of a chunk), which "
                "resuming cannot repair: restore the file from a copy, or compute it again into a new store")


def metadata_damaged(exc):
    """True when ``exc`` (an h5py error) reports damage to the file's HDF5 metadata (see :data:`UNREPAIRABLE`)."""
    text = str(exc).lower()
    return any(m in text for m in _METADATA_DAMAGE)


def read_error(path, exc, what=None, hint="", rebuilt=False):
    """The error to raise for ``exc``, met while reading ``what`` (a dataset, a group) of an open store.

    A live writer may be changing the file under an unlocked reader: that is :class:`StoreBusyError`;
    otherwise the file is damaged: :class:`StoreCorruptError` naming the file and ``what`` (and ``hint``,
    what repairs it: only where the damage is to numbers; damaged HDF5 metadata gets :data:`UNREPAIRABLE`, unless
    ``rebuilt``: the repair writes ``what`` anew, structure and all, as a resume writes a run's ``/final``).
    """
    if isinstance(exc, StoreError):
        return exc
    where = f" {what}" if what else ""
    if lock_holder(path, ignore_self=True) is not None:
        return _busy(path, f"being written while{where or ' it'} was read", exc)
    if metadata_damaged(exc) and not rebuilt:
        hint = UNREPAIRABLE
    return StoreCorruptError(f"store {path}:{where or ' the file'} is damaged and cannot be read "
                             f"({type(exc).__name__}: {exc}){hint}")


#: What reading a damaged or changing HDF5 object can raise (h5py: OSError, KeyError for a missing
#: object, ValueError/TypeError for a damaged attribute or header, RuntimeError from some filters).
READ_ERRORS = (OSError, KeyError, ValueError, TypeError, RuntimeError)


@contextlib.contextmanager
def reading(path, what=None, hint="", rebuilt=False):
    """Turn the errors of reading an open store into :func:`read_error`'s (busy or damaged, named)."""
    try:
        yield
    except StoreError:
        raise
    except READ_ERRORS as exc:
        raise read_error(path, exc, what, hint, rebuilt) from exc


def retry_busy(read, wait=READ_WAIT):
    """``read()``, again while it raises :class:`StoreBusyError` (a writer rewriting what it read), for up to
    ``wait`` seconds."""
    deadline, delay = time.monotonic() + wait, 0.01
    while True:
        try:
            return read()
        except StoreBusyError:
            delay = _backoff(deadline, delay)
            if delay is None:
                raise


def read_dataset(ds, selection=()):
    """``ds[selection]``; a damaged chunk (checksum, inflate) is an error naming the file and the dataset."""
    try:
        return ds[selection]
    except READ_ERRORS as exc:
        raise read_error(ds.file.filename, exc, f"dataset {ds.name}") from exc
