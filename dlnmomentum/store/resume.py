"""Resume a stored run: rebuild it from the file, load the newest valid checkpoint, continue bit for bit.

See :mod:`dlnmomentum.store.writer` for how a store survives crashes; this module is the way
back: after Ctrl-C/SIGTERM (a clean ``interrupted`` file), after the writer was killed (the
file is rebuilt from its committed chunks) and for runs with no checkpoint yet.
"""

import contextlib
import errno
import json
import os
import stat
import warnings

import h5py
import numpy as np

from .. import status as st
from ..driver import deferred_signals, signals_held
from ..progress import check as check_progress
from ..runs import registry
from ..runs.common import auto_progress, work_flops
from ..validate import as_float
from .files import (
    CRC_SUFFIX,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    WriterLock,
    attr_str,
    clear_status_flags,
    command,
    fsync_dir,
    fsync_file,
    memory_h5,
    open_h5_for_writing,
    reading,
    real_path,
    restore_superblock,
    side_paths,
    superblock_eof,
    utc_now,
    write_h5_image,
)
from .final import FINAL_DAMAGED
from .format import FORMAT_VERSION, chunk_offsets, delete_group
from .integrity import intact_rows
from .read import Store, check_readable, open_h5, read_plan, store_path, valid_checkpoints
from .rows_left import rows_left_request
from .side_files import remove_checkpoints, remove_temporaries, require_own_checkpoints
from .writer import (
    StoreWriter,
    drive_stored,
    software_versions,
    template_result,
    test_hook,
    write_layout,
)


def _run_class(plan, path):
    family = plan.header.get("family")
    try:
        return registry.run_class(family)
    except registry.UnknownTypeError as exc:
        raise StoreError(f"store {path}: {exc}") from None


def _rebuild_run(plan, ckpt, path):
    cls = _run_class(plan, path)
    run = cls.rebuild(plan.problem, plan.description, plan.initial["u0"], plan.initial["v0"])
    if ckpt is not None:
        run.load_state_arrays(ckpt.state)
        if int(run.cursor[0]) != ckpt.rows or run.done != ckpt.done:
            raise StoreCorruptError(f"checkpoint {ckpt.source} is inconsistent (rows {ckpt.rows}, "
                                    f"cursor {int(run.cursor[0])})")
    return run


#: A store rebuilt after its writer died is built in memory up to this size (then written by Python in one
#: write: HDF5 never holds a file it cannot flush; see :func:`.files.memory_h5`); a larger one is built on
#: disk, after the free space was checked against the size of the store it is copied from.
REBUILD_IN_MEMORY_BYTES = 256 * 2**20


def _copy_committed(path, plan, written):
    """A fresh copy of a store whose writer died: layout + the committed chunks, bit for bit.

    A full disk raises :class:`StoreError` naming the store and leaves it as it was (no temporary file):
    HDF5 failing to flush a file on a full disk used to crash the interpreter when it closed it.
    """
    tmp = f"{path}.rebuild{os.getpid()}.tmp"
    size = os.path.getsize(path)
    in_memory = size <= REBUILD_IN_MEMORY_BYTES
    if not in_memory:
        _check_free_space(path, size)
    src, _ = open_h5(path)
    try:
        with src:
            dst = memory_h5(tmp) if in_memory else h5py.File(tmp, "w", libver="latest")
            try:
                _write_committed(src, dst, path, plan, written)
            except BaseException:
                dst.close()
                raise
            if in_memory:
                write_h5_image(dst, tmp)
            else:
                dst.close()
        os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))  # the store keeps its permissions (a 600 store stays 600)
        fsync_file(tmp)
        os.replace(tmp, path)
        fsync_dir(path)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            raise
        raise StoreError(f"store {path} cannot be resumed: rebuilding it from its committed rows needs about "
                         f"{size} bytes beside it and the disk is full ({os.strerror(exc.errno)}); the store is "
                         f"unchanged: free space, then run `{command('resume', path)}` again") from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _check_free_space(path, needed):
    stat = os.statvfs(os.path.dirname(path) or ".")
    free = stat.f_bavail * stat.f_frsize
    if free < needed:
        raise OSError(errno.ENOSPC, f"{free} bytes free, about {needed} needed")


def _write_committed(src, dst, path, plan, written):
    header = {k: v for k, v in src.attrs.items() if k not in ("config", "config" + CRC_SUFFIX)}
    template = template_result(_run_class(plan, path), plan.problem, plan.description, plan.initial)
    write_layout(dst, header, plan.description, plan.problem, plan.initial, plan.schema, template,
                 hessian="hessian" in src["problem"])  # (as the store being rebuilt)
    for key, s in plan.schema.items():
        n = written[key]
        if not n:
            continue
        sds, dds = src[s.path], dst[s.path]
        dds.resize(n, axis=0)
        grid = [range(0, size, c) for size, c in zip(s.row_shape, s.chunks[1:], strict=True)]
        for row in range(0, n, s.chunk_rows):
            for offsets in chunk_offsets(grid):
                mask, data = sds.id.read_direct_chunk((row,) + offsets)
                dds.id.write_direct_chunk((row,) + offsets, data, mask)


def _reopen(path, plan, ckpt):
    """The store opened for SWMR writing with every dataset cut back to the checkpoint's rows."""
    written = ckpt.written if ckpt is not None else {k: 0 for k in plan.schema}
    if not plan.clean:
        _copy_committed(path, plan, written)
    f = open_h5_for_writing(path, libver="latest")  # waits for readers holding a lock
    try:
        if "checkpoint" in f:
            delete_group(f, "checkpoint")
        if "final" in f:
            f["final"].attrs["complete"] = np.int8(0)
        for key, s in plan.schema.items():
            if f[s.path].shape[0] != written[key]:
                f[s.path].resize(written[key], axis=0)
        history = json.loads(attr_str(f.attrs.get("history", "[]")))
        history.append({"event": "resumed", "time": utc_now(), "pid": os.getpid(),
                        "from_step": ckpt.done if ckpt is not None else 0,
                        "checkpoint": os.path.basename(ckpt.source) if ckpt is not None else None,
                        "recovered": not plan.clean, **software_versions()})
        f.attrs.update({"status": np.int64(st.RUNNING), "status_name": "running", "writer_state": "open",
                        "format_version": np.int64(FORMAT_VERSION),
                        "updated": utc_now(), "history": json.dumps(history)})
        f.flush()
        test_hook("resume:reopened")
    except BaseException:
        f.close()
        raise
    return f


def _newest_intact_checkpoint(path, plan):
    """The most advanced valid checkpoint whose committed rows all verify (or None), and a description of
    the damaged rows found below the checkpoints (or None)."""
    candidates = valid_checkpoints(path, plan)
    if not candidates:
        return None, None
    limit = {k: max(c.written[k] for c in candidates) for k in plan.schema}
    f, _ = open_h5(path)
    with f, reading(path):
        intact = intact_rows(f, plan.schema, limit)
    good = [c for c in candidates if all(c.written[k] <= intact[k] for k in plan.schema)]
    bad = [f"{plan.schema[k].path} from row {intact[k]}" for k in plan.schema if intact[k] < limit[k]]
    damage = f"store {path}: damaged chunks in {', '.join(bad)}" if bad else None
    return (good[0] if good else None), damage


def _repair_flags(path):
    """Clear the "open for writing" superblock flags of a writer that died outside SWMR mode.

    Returns the superblock as it was (:func:`.files.restore_superblock` puts it back) when the file needed it (it is
    then rebuilt from its committed rows), else None.
    """
    try:
        f, _ = open_h5(path)
        f.close()
    except StoreCorruptError as exc:
        if "left open by a writer" not in str(exc):
            raise
        return clear_status_flags(path)
    return None


def _extend_short_file(path):
    """Extend a store shorter than the end its superblock records (with zeros) so that HDF5 opens it.

    A writer stopped by a file-size limit (EFBIG) leaves the store so: the rows it committed and its checkpoints
    are intact, but HDF5 refuses a file short of its recorded end. The added zeros are never trusted: the store is
    then rebuilt from the committed rows that verify by their checksums. Returns the original size, or None when
    the file was not short.
    """
    eof, size = superblock_eof(path), os.path.getsize(path)
    if eof is None or eof <= size:
        return None
    try:
        os.truncate(path, eof)
    except OSError as exc:
        raise StoreError(f"store {path} cannot be resumed: it has {size} bytes of the {eof} its HDF5 superblock "
                         f"records and extending it failed ({exc.strerror}): raise the file-size limit (ulimit -f) "
                         f"or free space, then run `{command('resume', path)}` again") from exc
    return size


def _finished_result(path):
    """The result of a finished store that has nothing left to do (no side checkpoints to remove, its bytes intact),
    read as any reader does; None otherwise (the locked path below handles it)."""
    sides = side_paths(path)
    if os.path.exists(sides["checkpoint"]) or os.path.exists(sides["previous"]):
        return None
    try:
        done = Store(path)
        return _stored_result(done) if done.state == "complete" else None
    except StoreError:  # left open, damaged, truncated, another kind...: the locked path says or repairs it
        return None


def _stored_result(store):
    """The result of the finished ``store``: :attr:`Store.result`, or inside :func:`.writer.rows_left_in_store` the
    result without its trajectory (the rows checked chunk by chunk, not read into memory)."""
    told = rows_left_request()
    if told is None:
        return store.result
    result = store._result_without_rows()
    told.update(path=store.path, rows=store.rows)
    return result


def resume(path, *, progress=None, checkpoint_every=60.0):
    """Continue a stored run from its last checkpoint; returns the result (as the live run would).

    Works after Ctrl-C/SIGTERM (clean ``interrupted`` file), after the writer was killed
    (the file is rebuilt from its committed rows) and for runs with no checkpoint yet
    (restarted from step 0). Recorded rows whose chunks do not verify are dropped and the run
    continues from the newest checkpoint before them (a ``RuntimeWarning`` says so); a finished
    store is returned as is, or, when its bytes were damaged, computed again. The resumed run is
    bitwise identical to an uninterrupted one.
    """
    check_progress(progress)  # before any work
    path = real_path(store_path(path))  # through a symlink: the file it leads to is locked and rebuilt, the link stays
    check_readable(path)
    checkpoint_every = as_float("checkpoint_every", checkpoint_every, low=0.0)
    require_own_checkpoints(path)  # (before anything is read or repaired: the rest replaces or removes them)
    if not os.stat(path).st_mode & stat.S_IWUSR:  # (its owner's write bit: root may write it all the same)
        finished = _finished_result(path)  # a finished store is only read (no writer writes a read-only file)
        if finished is None:
            raise StoreError(f"store {path} is read-only: resuming writes to it (a rebuild by copy would replace it "
                             "all the same); make it writable (chmod u+w) to continue it (reading it needs nothing: "
                             "dlnmomentum.open_store, dlnm inspect)")
        return finished
    with deferred_signals() as flag:
        try:
            lock = WriterLock.acquire(path, "resuming")
        except StoreLockedError:
            raise
        except StoreError:  # no lock file can be made (a read-only directory): a finished store is only read
            finished = _finished_result(path)
            if finished is None:
                raise
            return finished
        try:
            with signals_held():
                remove_temporaries(path)
                short = _extend_short_file(path)
                saved = None
                try:
                    saved = _repair_flags(path)
                    repaired = saved is not None or short is not None
                    plan = read_plan(path)
                except BaseException as exc:
                    if saved is not None:  # not a store this can repair: leave it as it was, flags too
                        restore_superblock(path, saved)
                    if short is not None:
                        os.truncate(path, short)
                        if isinstance(exc, StoreCorruptError):  # (the reader's advice said this may happen: say why)
                            raise StoreCorruptError(
                                f"store {path} is truncated: it has {short} bytes of the {superblock_eof(path)} its "
                                f"HDF5 superblock records, and the missing bytes held part of its HDF5 metadata (its "
                                f"structure), which resuming cannot rebuild; the file is left as it was: restore it "
                                f"from a copy, or compute it again into a new store ({exc})") from exc
                    raise
                plan.clean = plan.clean and not repaired
                if short is not None:
                    warnings.warn(f"store {path} had {short} bytes of the {os.path.getsize(path)} it records (its "
                                  "writer was stopped by a file-size limit or a full disk): it is rebuilt from its "
                                  "committed rows that verify", RuntimeWarning, stacklevel=2)
                status = int(plan.header.get("status", st.RUNNING))
                damage = None
                if plan.clean and status in st.TERMINAL:
                    try:
                        result = _stored_result(Store(path))
                    except StoreCorruptError as exc:  # bytes of the finished store were damaged
                        damage = str(exc).removesuffix(FINAL_DAMAGED)  # (the advice this resume follows)
                    else:
                        remove_checkpoints(path)  # (left by a writer killed between their two removals at close)
                        lock.release()
                        return result
                ckpt, damaged_rows = _newest_intact_checkpoint(path, plan)
                damage = damage or damaged_rows
                if damage:
                    plan.clean = False  # rebuilt from the verified chunks only
                    warnings.warn(f"{damage}; it is computed again from step {ckpt.done if ckpt else 0}",
                                  RuntimeWarning, stacklevel=2)
                run = _rebuild_run(plan, ckpt, path)
                f = _reopen(path, plan, ckpt)
                writer = StoreWriter(path, lock, run, plan.schema, plan.header, checkpoint_every=checkpoint_every,
                                 f=f, rows=ckpt.rows if ckpt else 0, written=ckpt.written if ckpt else None,
                                 pending=ckpt.pending if ckpt else None,
                                 sequence=int(ckpt.meta.get("sequence", 0)) if ckpt else 0, collect=False)
        except BaseException:
            lock.release()
            raise
        return drive_stored(run, writer, flag, auto_progress(progress, work_flops(run)))


