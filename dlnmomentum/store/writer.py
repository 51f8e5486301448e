"""HDF5 run stores: stream a run to disk, survive crashes, resume bit for bit, analyse with h5py/xarray.

One file per run (``run.h5``), written by one process, layout in ``docs/store-format.md``::

    res = dm.mgd(problem, 0.02, 0.7, steps=10**6, record=dm.Record(log=1000), store="run.h5")
    s = dm.open_store("run.h5")          # configuration, problem, result, observables
    s.result                              # the same MGDResult as the live run
    s["theta"].value, s.to_xarray("theta")
    dm.resume("run.h5")                   # after a crash, SIGKILL, SIGTERM or Ctrl-C

How crashes are survived
------------------------
* The ``.h5`` is written in HDF5's single-writer/multiple-reader (SWMR) mode, which
  orders metadata writes so that the file stays readable if the writer dies.
* Rows are written once, as whole compressed chunks (gzip + shuffle, compressed by a
  worker thread while the kernel runs); a chunk is never rewritten, so rows already
  on disk cannot be torn by a later write.
* Every ``checkpoint_every`` seconds the file is flushed and fsynced, then
  ``run.h5.ckpt`` is replaced atomically (temporary file, fsync, ``os.replace``; the
  previous one is kept as ``run.h5.ckpt.prev``). It holds the full kernel state
  (``run.state_arrays()``), the number of rows of every dataset that are on disk
  and the few rows recorded since the last whole chunk.
* :func:`resume` rebuilds the run from the file (configuration, problem, initial
  weights), loads the newest valid checkpoint, cuts every dataset back to its
  committed rows (copying them into a fresh file when the writer died) and
  continues. Since a run's whole state lives in its arrays, the result and every
  row are bitwise those of an uninterrupted run.
* SIGINT/SIGTERM/SIGHUP stop the run between chunks, write a final checkpoint (also
  folded into ``/checkpoint``) and close the file cleanly (status ``interrupted``); a
  finished run writes its result into ``/final`` and removes the side files.
* ``run.h5.lock`` (pid, host, the writer's start time) refuses a second writer; a lock
  whose process is gone is taken over.
"""

import collections
import contextlib
import dataclasses
import json
import os
import platform
import sys
from concurrent.futures import ThreadPoolExecutor

import h5py
import numpy as np

from .. import status as st
from ..driver import Stopwatch, deferred_signals, drive, signals_held
from ..results import Trajectory, block_fields, trajectory_from_fields
from ..runs import registry
from ..validate import as_bool, as_float
from .files import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_VERSION,
    Checkpoint,
    StoreCorruptError,
    StoreError,
    StoreExistsError,
    WriterLock,
    attr_str,
    command,
    fsync_dir,
    fsync_file,
    guarded,
    lock_holder,
    locked_error,
    memory_h5,
    open_h5_for_writing,
    real_path,
    type_name,
    utc_now,
    write_checkpoint_file,
    write_h5_image,
)
from .final import final_handles, update_final_in_place, write_final
from .format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    Dims,
    create_observables,
    encode_chunks,
    schema_from_fields,
    set_attrs,
    split_description,
    write_checkpoint_group,
    write_problem,
)
from .kinds import require_overwritable, require_regular_or_absent
from .read import _trajectory_field, read_series, store_path
from .rows_left import rows_left_request, without_trajectory
from .side_files import clear_for_new_store, remove_checkpoints

__all__ = ["run_with_store"]


#: A stored run keeps its recorded blocks in memory for the returned result while they
#: take less than this; beyond, it drops them and reads the trajectory back at the end.
MAX_COLLECT_BYTES = 256 * 2**20

#: The main thread waits for the writer thread when more than this many bytes of rows are queued
#: (memory stays bounded when compression is slower than the run records).
MAX_QUEUED_BYTES = 64 * 2**20


#: Test hook: called with a point name ("chunk", "checkpoint:flush", "checkpoint:write",
#: "checkpoint:done", "close:start", "close:reopen", "close:done"); tests kill the writer there.
_TEST_HOOK = None


def test_hook(point):
    if _TEST_HOOK is not None:
        _TEST_HOOK(point)


def software_versions():
    import numba

    import dlnmomentum

    return {"package_version": dlnmomentum.__version__, "numba_version": numba.__version__,
            "numpy_version": np.__version__, "h5py_version": h5py.version.version,
            "hdf5_version": h5py.version.hdf5_version, "python_version": platform.python_version()}


# -- the writer -------------------------------------------------------------------------------

class StoreWriter:
    """The sink of :func:`dlnmomentum.driver.drive` for a stored run.

    One worker thread owns the HDF5 file: it creates the layout, compresses and
    writes chunks, flushes and writes checkpoints, in the order the main thread
    submits them, while the main thread runs the (GIL-free) kernel. The main thread
    only cuts recorded rows into chunks and snapshots the state for checkpoints.

    Invariant, per dataset ``key``: ``issued[key]`` rows are written (or queued to be
    written, in order) as whole chunks, ``pending[key]`` holds the rows after them,
    and together they make ``rows`` = the run's ``cursor[0]``. A checkpoint queued
    after the writes of ``issued`` rows records them as committed.
    """

    def __init__(self, path, lock, run, schema, header, *, checkpoint_every, f=None, setup=None, rows=0,
                 written=None, pending=None, sequence=0, collect=True, tmp_path=None):
        self.path, self.lock, self.run = path, lock, run
        self.tmp_path = tmp_path  # the file being created, until it becomes ``path``
        self.created_as = tmp_path  # (kept: HDF5's errors name the file by it)
        self.schema = schema
        self.header = header
        self.f = f
        self.dsets = {}
        self.final_handles = None
        self.fd = None
        self.rows = int(rows)
        self.issued = {k: int((written or {}).get(k, 0)) for k in schema}
        self.pending = {k: [] for k in schema}
        self.pending_rows = {k: 0 for k in schema}
        self.jobs = collections.deque()
        self.queued_bytes = 0
        self.checkpoint_future = None
        self.failed = None
        with signals_held():  # the worker thread starts here and inherits a mask without SIGINT/SIGTERM
            self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="dlnm-store")
            self._io(self._open_job, setup)
        for key, arr in (pending or {}).items():
            if key in schema and len(arr):
                self._push(key, np.asarray(arr))
        self.told = rows_left_request()  # (inside rows_left_in_store: no rows kept nor read back)
        self.collected = [] if collect and self.told is None else None
        self.collected_bytes = 0
        self.checkpoint_every = checkpoint_every
        self.watch = Stopwatch()
        self.sequence = int(sequence)
        self.result = None
        self.closed = False
        if not self._consistent(run):
            raise StoreError(f"store {self.path}: {self.rows} rows stored but the run recorded "
                             f"{int(run.cursor[0])}")

    # -- the worker thread ------------------------------------------------------------------
    def _io(self, fn, *args, nbytes=0):
        """Queue ``fn(*args)`` on the worker; errors surface in the main thread at the next call."""
        def job():
            if self.failed is not None:
                return None  # after a failure nothing else is written (checkpoints stay consistent)
            try:
                return fn(*args)
            except BaseException as exc:
                self.failed = exc
                raise
        future = self.pool.submit(job)
        self.jobs.append((future, nbytes))
        self.queued_bytes += nbytes
        self._reap(wait=False)
        return future

    def _reap(self, wait):
        """Collect finished jobs (all of them when ``wait``, enough to bound the queue otherwise)."""
        while self.jobs and (wait or self.jobs[0][0].done() or self.queued_bytes > MAX_QUEUED_BYTES):
            future, nbytes = self.jobs.popleft()
            self.queued_bytes -= nbytes
            future.exception()  # waits; the error itself is kept in self.failed
        if self.failed is not None:
            raise self._failure_error() from self.failed

    def _failure_error(self):
        """The StoreError that says what the worker's failure ``self.failed`` means for the store."""
        failed = self.failed
        message = str(failed) if isinstance(failed, StoreError) else f"writing store {self.path} failed: {failed}"
        if self.created_as:  # HDF5 names the file by the temporary name it was created under
            message = message.replace(self.created_as, self.path)
        if not isinstance(failed, StoreError) and self.tmp_path is None:  # the store exists: say how to go on
            message += (f"\nthe rows committed before are kept: `{command('resume', self.path)}` continues the run "
                        "once the cause is gone (free space, raise the file-size limit)")
        return StoreError(message)

    def _open_job(self, setup):
        if setup is not None:
            self.f, self.final_handles = setup(self.f)
            self.tmp_path = None
        elif "final" in self.f:
            try:
                self.final_handles = final_handles(self.f["final"])
            except StoreCorruptError:  # a damaged /final of a store computed again: rewritten at the close
                self.final_handles = None
        if not self.f.swmr_mode:
            self.f.swmr_mode = True
        self.dsets = {k: self.f[s.path] for k, s in self.schema.items()}
        self.extent = {k: ds.shape[0] for k, ds in self.dsets.items()}
        try:
            self.fd = self.f.id.get_vfd_handle()
        except Exception:  # noqa: BLE001 - another driver: fsync by path
            self.fd = None

    def _write_job(self, key, offset, rows, pieces=None):
        if pieces is None:
            pieces = encode_chunks(rows, self.schema[key].chunks)
        dsid = self.dsets[key].id
        end = offset + len(rows)
        if self.extent[key] < end:
            dsid.set_extent((end,) + self.schema[key].row_shape)
            self.extent[key] = end
        for offsets, data in pieces:
            dsid.write_direct_chunk((offset,) + offsets, data)

    def _sync(self):
        self.f.flush()
        if self.fd is not None:
            getattr(os, "fdatasync", os.fsync)(self.fd)
        else:
            fsync_file(self.path)

    def _checkpoint_job(self, ckpt):
        test_hook("checkpoint:flush")
        self._sync()
        test_hook("checkpoint:write")
        write_checkpoint_file(self.path, ckpt)
        test_hook("checkpoint:done")

    # -- driver protocol --------------------------------------------------------------------
    def append(self, block, rows):
        fields = block_fields(block, rows, self.run.time_of_step)
        if set(fields) != set(self.schema):
            raise StoreError(f"store {self.path}: the run recorded fields {sorted(fields)}, the store holds "
                             f"{sorted(self.schema)}")
        with signals_held():
            for key, arr in fields.items():
                self._push(key, np.asarray(arr)[:rows])
            self.rows += rows
        if self.collected is not None:
            self.collected.append((block, rows))
            self.collected_bytes += sum(np.asarray(v).nbytes for v in block.values())
            if self.collected_bytes > MAX_COLLECT_BYTES:
                self.collected = None  # memory stays bounded: the result reads the file instead
        self._reap(wait=False)

    def chunk_done(self, run, status=st.RUNNING):
        due = self.checkpoint_every <= 0 or self.watch.elapsed() >= self.checkpoint_every
        if status == st.RUNNING and due:
            self.checkpoint(run)
        test_hook("chunk")

    def close(self, run, status):
        if self.closed:
            return
        self.closed = True
        try:
            if status == st.RUNNING or not self._consistent(run) or self.failed is not None:
                self._abort()
                if self.failed is not None and status != st.RUNNING:
                    # a failed write of the last jobs (its end already reached): said, never left to read as an
                    # interruption with a resume hint for a store that may not exist
                    raise self._failure_error() from self.failed
                return
            with signals_held():
                self._finalise(run, status)
        finally:
            self.pool.shutdown(wait=True, cancel_futures=True)
            with contextlib.suppress(Exception):
                if self.f.id.valid:
                    self.f.close()
            self.lock.release()

    # -- rows -------------------------------------------------------------------------------
    def _push(self, key, arr):
        if not len(arr):
            return
        s = self.schema[key]
        arr = np.asarray(arr, dtype=s.dtype)
        if arr.shape[1:] != s.row_shape:
            raise StoreError(f"store {self.path}: rows of {key!r} have shape {arr.shape[1:]}, "
                             f"expected {s.row_shape}")
        self.pending[key].append(arr)
        self.pending_rows[key] += len(arr)
        per_chunk = s.chunk_rows
        if self.pending_rows[key] >= per_chunk:
            buf = np.concatenate(self.pending[key])
            full = len(buf) // per_chunk
            for i in range(full):
                self._submit(key, buf[i * per_chunk:(i + 1) * per_chunk])
            rest = buf[full * per_chunk:]
            self.pending[key] = [rest.copy()] if len(rest) else []
            self.pending_rows[key] = len(rest)

    def _submit(self, key, rows, pieces=None):
        offset = self.issued[key]
        self.issued[key] += len(rows)
        self._io(self._write_job, key, offset, rows, pieces, nbytes=rows.nbytes)

    def _consistent(self, run):
        return self.rows == int(run.cursor[0])

    # -- checkpoints ------------------------------------------------------------------------
    def _make_checkpoint(self, run, status):
        self.sequence += 1
        meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
                "store_id": self.header["store_id"], "sequence": self.sequence,
                "family": self.header["family"], "kind": self.header["kind"], "done": int(run.done),
                "status": int(status), "rows": self.rows, "written": dict(self.issued), "time": utc_now(),
                "pid": os.getpid()}
        state = {k: np.array(v, copy=True) for k, v in run.state_arrays().items()}
        pending = {k: np.concatenate(v) for k, v in self.pending.items() if v}
        return Checkpoint(meta, state, pending)

    def checkpoint(self, run, status=st.RUNNING):
        """Queue: flush + fsync the file, then atomically replace ``<store>.ckpt``.

        At most one checkpoint is queued: while the previous one is still being written the
        request is skipped (and retried after the next chunk).
        """
        if not self._consistent(run):
            return
        if self.checkpoint_future is not None and not self.checkpoint_future.done():
            return
        self.checkpoint_future = self._io(self._checkpoint_job, self._make_checkpoint(run, status))
        self.watch.reset()

    # -- the end ----------------------------------------------------------------------------
    def _abort(self):
        """An exception ended the run: leave the file resumable from its last checkpoint."""
        self.pool.shutdown(wait=True, cancel_futures=True)
        with contextlib.suppress(Exception):
            self.f.close()
        if self.tmp_path is not None:  # the store was never complete
            with contextlib.suppress(OSError):
                os.unlink(self.tmp_path)

    def _finalise(self, run, status):
        test_hook("close:start")
        final_ckpt = self._make_checkpoint(run, status)
        if status == st.INTERRUPTED:
            self._io(self._checkpoint_job, final_ckpt)
        tails = [key for key in self.schema if self.pending_rows[key]]
        for i, key in enumerate(tails):  # the last, partial chunks: written once, at the end
            rows = np.concatenate(self.pending[key])
            self.pending[key], self.pending_rows[key] = [], 0
            # the main thread, idle from here on, encodes every other tail itself
            self._submit(key, rows, encode_chunks(rows, self.schema[key].chunks) if i % 2 else None)
        if self.collected is not None:
            result = run.finish(status, self.collected)  # overlaps with the last writes
        else:
            result = run.finish(status, ())  # (its empty trajectory tells /final which field the rows are)
            name = _trajectory_field(result)
            if name is not None and self.schema and self.told is None:
                future = self._io(self._read_job)
                self._reap(wait=True)  # raises if a write failed
                result = dataclasses.replace(result, **{name: trajectory_from_fields(future.result(), owned=True)})
        self._io(self._finalise_job, run, status, result, final_ckpt)
        self._reap(wait=True)
        self.result = without_trajectory(result, self.told)
        test_hook("close:done")

    def _read_job(self):
        for ds in self.dsets.values():
            if ds.shape[0] != self.rows:
                ds.resize(self.rows, axis=0)
        return read_series(self.f, self.schema, self.rows)

    def _finalise_job(self, run, status, result, final_ckpt):
        for ds in self.dsets.values():
            if ds.shape[0] != self.rows:
                ds.resize(self.rows, axis=0)
        closing = {"status": np.int64(status), "status_name": st.status_name(status),
                   "writer_state": "closed", "steps_done": np.int64(run.done), "rows": np.int64(self.rows),
                   "updated": utc_now(), "result_class": type_name(result)}
        event = {"event": "closed", "time": closing["updated"], "status": st.status_name(status),
                 "steps_done": int(run.done), "rows": self.rows, "pid": os.getpid()}
        done = False
        if status != st.INTERRUPTED and self.final_handles is not None:
            # The common case: values into the datasets pre-created from the template result,
            # still in SWMR mode (no reopen, no new object).
            try:
                if update_final_in_place(self.final_handles, result, Trajectory, type(run.problem)):
                    self._close_attrs(self.f, closing, event, modify=True)
                    done = True
                    test_hook("close:final-written")
            except (OSError, ValueError, KeyError, TypeError):
                done = False
        self.final_handles = None
        self.f.close()
        if not done:
            test_hook("close:reopen")
            with open_h5_for_writing(self.path, libver="latest") as f:  # waits for readers holding a lock
                dims = Dims(run.problem.d)
                write_final(f, dims, result, Trajectory, type(run.problem), complete=True)
                if status == st.INTERRUPTED:
                    write_checkpoint_group(f, dims, final_ckpt)
                self._close_attrs(f, closing, event, modify=False)
        fsync_file(self.path)
        if status != st.INTERRUPTED:
            remove_checkpoints(self.path)

    @staticmethod
    def _close_attrs(f, closing, event, modify):
        history = json.loads(attr_str(f.attrs.get("history", "[]")))
        history.append(event)
        closing = dict(closing, history=json.dumps(history))
        if modify:
            for key, value in closing.items():
                f.attrs.modify(key, value)
        else:
            f.attrs.update(closing)


# -- creating a store -------------------------------------------------------------------------

def _run_class_name(run):
    try:
        registry.run_class(getattr(run, "family", None))
        return type_name(run)
    except registry.UnknownTypeError as exc:
        raise StoreError(f"cannot store this run: {exc}") from None


def _initial_arrays(run):
    return {"u0": np.asarray(run.u0, dtype=np.float64), "v0": np.asarray(run.v0, dtype=np.float64)}


def write_layout(f, header, description, problem, initial, schema, template=None, hessian=True):
    """Root attributes, /problem, /initial, /config_arrays, empty /observables and a template /final.

    ``template`` is the result of the fresh run: ``/final`` is created from it (marked
    ``complete = 0``) so that closing the store only overwrites values. ``hessian``: whether /problem holds
    XᵀX/n (the run uses it: :func:`.format.write_problem`).
    """
    desc, arrays = split_description(description)
    set_attrs(f, guarded(dict(header, config=json.dumps(desc)), "config"), replace=False)
    dims = Dims(problem.d)
    write_problem(f, dims, problem, hessian)
    g = f.create_group("initial")
    set_attrs(g, {"description": "initial weights of the run (w_plus0 = u0 + v0, w_minus0 = u0 - v0)"})
    for name, value in initial.items():
        dims.array(g, name, value, ["coordinate"])
    if arrays:
        ca = f.create_group("config_arrays")
        set_attrs(ca, {"description": "long lists of the run configuration (referenced from the config "
                                      "attribute)"})
        for ref, value in arrays.items():
            dims.array(ca, ref.rsplit("/", 1)[-1], value)
    create_observables(f, dims, schema)
    if template is not None:
        return write_final(f, dims, template, Trajectory, type(problem), complete=False)
    return None


def template_result(run_class, problem, description, initial):
    """The result of a fresh run (its fields have the final shapes and types, mostly)."""
    import warnings

    fresh = run_class.rebuild(problem, description, initial["u0"], initial["v0"])
    with warnings.catch_warnings():  # diagnostics about a run that has not started are meaningless
        warnings.simplefilter("ignore")
        return fresh.finish(st.RUNNING, ())


def _new_header(run, store_id):
    import uuid

    now = utc_now()
    header = {"format": FORMAT_NAME, "format_version": np.int64(FORMAT_VERSION), "kind": run.kind,
              "family": run.family, "run_class": _run_class_name(run),
              "store_id": store_id or uuid.uuid4().hex, "created": now, "updated": now,
              "status": np.int64(st.RUNNING), "status_name": "running", "writer_state": "open",
              "steps_total": np.int64(run.total), "steps_done": np.int64(0), "rows": np.int64(0),
              "platform": platform.platform()}
    header.update(software_versions())
    header["history"] = json.dumps([{"event": "created", "time": now, "pid": os.getpid(), **software_versions()}])
    return header


def _create(path, run, lock, checkpoint_every):
    """The writer of a new store.

    The worker thread writes the layout while the run starts, into a temporary file that
    replaces ``path`` once it is complete and in SWMR mode: a writer killed while creating
    the store leaves no store rather than a half-made one.
    """
    header = _new_header(run, None)
    schema = schema_from_fields(block_fields(run.new_block(0), 0, run.time_of_step)) if run.has_records() else {}
    description = run.description(arrays=True)
    initial = _initial_arrays(run)
    tmp = f"{path}.creating{os.getpid()}.tmp"
    f = memory_h5(tmp)  # the layout is built in memory and written by Python (see memory_h5)

    def setup(memory):
        template = template_result(type(run), run.problem, description, initial)
        write_layout(memory, header, description, run.problem, initial, schema, template,
                     getattr(run, "uses_hessian", True))
        try:
            write_h5_image(memory, tmp)
        except OSError as exc:
            raise StoreError(f"cannot create store {path}: {exc}; nothing was written") from exc
        f = h5py.File(tmp, "r+", libver="latest")
        test_hook("create:layout")
        f.swmr_mode = True
        os.replace(tmp, path)
        fsync_dir(path)
        return f, final_handles(f["final"])

    try:
        return StoreWriter(path, lock, run, schema, header, checkpoint_every=checkpoint_every, f=f, setup=setup,
                       tmp_path=tmp)
    except BaseException:
        f.close()
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _short_switch_interval(seconds=2e-4):
    """While the store's worker thread runs Python (HDF5 calls), hand the GIL back to the main
    thread quickly when a kernel chunk returns (CPython's default waits up to 5 ms)."""
    previous = sys.getswitchinterval()
    if previous > seconds:
        sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        if sys.getswitchinterval() == seconds and previous > seconds:
            sys.setswitchinterval(previous)


def drive_stored(run, writer, flag, progress):
    if flag["signum"] is not None:  # a signal arrived while the store was being set up
        writer.close(run, st.INTERRUPTED)
        run.interrupt_signal = flag["signum"]
    else:
        try:
            with _short_switch_interval():
                drive(run, progress=progress, desc=run.kind, sink=writer, collect=False)
        finally:
            if not writer.closed:
                writer.close(run, st.RUNNING)
    if writer.told is not None:
        writer.told.update(path=writer.path, rows=writer.rows)
    if writer.result is None:
        import warnings

        warnings.warn(f"store {writer.path} was left at its last checkpoint (the run was stopped between a "
                      f"chunk and its recording); `{command('resume', writer.path)}` continues it", RuntimeWarning,
                      stacklevel=3)
        return without_trajectory(run.finish(st.INTERRUPTED, writer.collected or ()), writer.told)
    return writer.result


def run_with_store(run, store, *, overwrite=False, checkpoint_every=60.0, progress=False):
    """Drive ``run`` to its end while streaming it to the HDF5 file ``store``.

    Called by :func:`dlnmomentum.mgd` (and the flows) for ``store=...``; returns the
    same result object as the live run.

    Raises
    ------
    StoreExistsError
        ``store`` exists and ``overwrite`` is false.
    StoreLockedError
        Another live process writes ``store``.
    """
    path = store_path(store)  # not empty, not a directory, its directory exists: before any work
    checkpoint_every = as_float("checkpoint_every", checkpoint_every, low=0.0)
    overwrite = as_bool("overwrite", overwrite)
    path = real_path(path)  # through a symlink: the file it leads to is locked and written, the link stays
    exists = StoreExistsError(f"store {path} already exists; pass overwrite=True (--overwrite) to replace "
                              f"it, or dlnmomentum.resume({path!r}) (`{command('resume', path)}`) to continue it")
    if os.path.lexists(path) and not overwrite:
        holder = lock_holder(path)  # another writer is writing it: that, not "exists", is what stops this one
        raise exists if holder is None else locked_error(path, holder)
    if overwrite:
        require_regular_or_absent(path, "run")  # a device, FIFO, ...: refused before a lock file is made next to it
    with deferred_signals() as flag:
        lock = WriterLock.acquire(path, f"writing a {run.kind} run")
        try:
            if overwrite:
                require_overwritable(path, "run")  # only a run store that this package wrote is replaced
            elif os.path.lexists(path):  # another process wrote it, and let go of its lock, since the check above
                raise exists
            with signals_held():
                clear_for_new_store(path)
                writer = _create(path, run, lock, checkpoint_every)
        except BaseException:
            lock.release()
            raise
        return drive_stored(run, writer, flag, progress)
