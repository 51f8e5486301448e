"""The store of a network sweep (:func:`dlnmomentum.networks_sweep`): one HDF5 file per sweep.

Layout (format ``dlnmomentum-network-sweep`` version 1): root attributes ``kind =
"network-sweep"``, ``format``/``format_version``, the configuration JSON ``config``, ``dims``
(``rep,beta,gamma``) and ``sessions``; dimension scales ``rep``, ``beta``, ``gamma``; a dataset
per field of :data:`dlnmomentum.runs.network.POINT_FIELDS` over ``(rep, beta, gamma)`` (``status`` with the CF
attributes ``flag_values``/``flag_meanings``, the name of every code; older stores lack them);
``done`` (1 where the point is written, written last so a torn write leaves points not done)
and ``session``; ``/problem`` (as in run stores, :func:`.format.write_problem`) when the sweep
ran on one given :class:`~dlnmomentum.NetworkProblem`.

Protections (as the diagonal sweep store, :mod:`.sweep_format`; since 0.5.0):

* the file is built in memory and written in one write, fsynced, then renamed into place: a full
  disk while it is created leaves nothing behind;
* HDF5's newest superblock (``libver="latest"``): readers open the file without a file lock
  (:func:`.files.open_h5`), so a reader never blocks the writer; a writer waits up to
  :data:`.files.WRITE_WAIT` for a reader of another program that holds a lock;
* every grid dataset is chunked by line of the last axis with HDF5's Fletcher32 checksum: a damaged
  chunk is an error naming the file and the dataset, not wrong numbers;
* points are written (fields, flush, then ``done``, flush) with signals held: an interruption or a
  full disk loses at most the points of that write, and the mask never claims a point not on disk.

Stores written before 0.5.0 (contiguous datasets, older superblock) are read and continued as they are.
"""

import json
import os
import time

import numpy as np

from ..driver import signals_held
from ..runs.network import POINT_FIELDS
from ..runs.points import PARAMETER_FIELDS, flag_attributes
from .files import (
    READ_ERRORS,
    StoreError,
    WriterLock,
    attr_str,
    command,
    fsync_dir,
    guarded,
    memory_h5,
    metadata_damaged,
    open_h5,
    open_h5_for_writing,
    read_error,
    reading,
    retry_busy,
    to_jsonable,
    verify_guarded,
    write_h5_image,
)
from .format import Dims, read_problem, write_problem
from .kinds import NETWORK_SWEEP_FORMAT, kind_of, wrong_kind
from .sweep_format import DIM_DESCRIPTIONS, fill_value, grid_chunks, stored_fill

FORMAT_NAME = NETWORK_SWEEP_FORMAT  # (defined with the other kinds of file, store.kinds.FORMATS)
FORMAT_VERSION = 1
KIND = "network-sweep"
#: The datasets over the grid: the point fields and the two masks, each ``(dtype, description)``.
GRID = {**POINT_FIELDS,
        "done": (np.uint8, "1 where the point has been computed and written"),
        "session": (np.int16, "the run (1, 2, ...) of the sweep that computed the point, 0: none")}


def create(path, config, dims, coords, shape, problem=None):
    """A new, empty store at ``path`` (built in memory, written to ``<path>.creating``, then moved into place)."""
    tmp = path + ".creating"
    f = memory_h5(tmp)
    try:
        f.attrs.update(guarded({"kind": KIND, "format": FORMAT_NAME, "format_version": FORMAT_VERSION,
                                "config": json.dumps(to_jsonable(config)), "dims": ",".join(dims), "sessions": 0,
                                "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}, "config"))
        for name in dims:
            scale = f.create_dataset(name, data=coords[name], fletcher32=True)
            scale.make_scale(name)
            scale.attrs["description"] = DIM_DESCRIPTIONS.get(name) or PARAMETER_FIELDS[name][1]
        f.attrs["coordinates"] = "lam"  # xarray: lambda over the grid is a coordinate of the fields (0.6.0)
        for name, (dtype, desc) in GRID.items():
            fill = fill_value(dtype, name)  # (a coded field: -1 not_done, named in its flag attributes)
            ds = f.create_dataset(name, shape=shape, dtype=dtype, fillvalue=fill, chunks=grid_chunks(shape, len(shape)),
                                  fletcher32=True)  # one line of the last axis per chunk, as sweep stores
            ds[...] = fill  # every chunk allocated now: later writes never grow the file
            ds.attrs["description"] = desc
            ds.attrs.update(flag_attributes(name, dtype, not_done=True))  # status: the name of every code
            for axis, dim in enumerate(dims):
                ds.dims[axis].attach_scale(f[dim])
        if problem is not None:
            write_problem(f, Dims(problem.d), problem)
    except BaseException:
        f.close()
        raise
    try:
        write_h5_image(f, tmp)
    except OSError as exc:
        raise StoreError(f"cannot create network sweep store {path}: {exc}; nothing was written") from exc
    os.replace(tmp, path)
    fsync_dir(path)


def is_network_sweep(path):
    """True when ``path`` is an HDF5 file of this layout (False for anything else, unreadable included)."""
    try:
        f, _ = open_h5(path)
    except OSError:  # (StoreError is one)
        return False
    with f, reading(path, "its root group"):  # opened but damaged: an error naming the file
        return attr_str(f.attrs.get("kind", "")) == KIND


def read(path):
    """``(config, problem or None, data, done)`` of the store at ``path``.

    A damaged dataset is a :class:`~.files.StoreCorruptError` naming it; a writer rewriting what was
    being read makes the read start again (for up to :data:`.files.READ_WAIT` seconds).
    """
    return retry_busy(lambda: _read(path))


def _read(path):
    f, _ = open_h5(path)
    with f:
        try:
            kind = kind_of(f.attrs)
            if kind != KIND:  # another kind of file: say which, and name its reader
                raise wrong_kind(path, kind, KIND)
            verify_guarded(f.attrs, path, "the file's root")
            config = json.loads(attr_str(f.attrs["config"]))
            config["sessions"] = int(f.attrs.get("sessions", 0))
            problem = read_problem(f["problem"]) if "problem" in f else None
        except StoreError:
            raise
        except READ_ERRORS as exc:
            raise read_error(path, exc, "its attributes or problem") from exc
        data = {name: _read_grid(path, f, name) for name in POINT_FIELDS}
        done = _read_grid(path, f, "done").astype(bool)
    return config, problem, data, done


def repair(path):
    """Rewrite the chunks that fail their checksum, their points marked not done; returns how many points that is.

    For the holder of the writer lock, before a resume: the resume then computes those points again
    (sweeps are deterministic, so bit for bit). Every grid dataset is chunked alike (one line of the last
    axis), so a damaged chunk of any of them is rewritten whole, in every dataset, without being read.
    Stores of 0.4.0 have no checksums: nothing to check.
    """
    try:
        return _repair(path)
    except StoreError:
        raise
    except READ_ERRORS as exc:  # the structure (a header, a chunk index) of the file: named, never raw
        raise read_error(path, exc, "its grid datasets (while checking their chunks)") from exc


def _repair(path):
    with signals_held(), open_h5_for_writing(path, rdcc_nbytes=0) as f:
        if _dataset(path, f, "done").chunks is None:
            return 0
        damaged = {}
        for name in GRID:
            ds = _dataset(path, f, name)
            for sel in ds.iter_chunks():
                try:
                    ds[sel]
                except READ_ERRORS as exc:
                    if metadata_damaged(exc):  # the chunk index, not a chunk: rewriting chunks cannot mend it
                        raise read_error(path, exc, f"dataset /{name}") from exc
                    damaged[tuple((s.start, s.stop) for s in sel)] = sel
        for sel in damaged.values():
            for name in GRID:
                ds = f[name]
                ds[sel] = np.full(tuple(s.stop - s.start for s in sel), stored_fill(ds), dtype=ds.dtype)
        f.flush()
    return sum(int(np.prod([s.stop - s.start for s in sel])) for sel in damaged.values())


def _dataset(path, f, name):
    """``f[name]``; a missing or damaged object is an error naming the file and the dataset."""
    try:
        return f[name]
    except READ_ERRORS as exc:
        raise read_error(path, exc, f"dataset /{name}") from exc


def _read_grid(path, f, name):
    ds = _dataset(path, f, name)
    try:
        return ds[...]
    except READ_ERRORS as exc:
        raise read_error(path, exc, f"dataset {ds.name}",
                         hint=f"; resuming the sweep (dlnmomentum.resume_networks_sweep, "
                              f"`{command('network', '...', '--store', path, '--resume')}`) computes the points "
                              "of a damaged chunk again") from exc


def start_session(path):
    with signals_held(), open_h5_for_writing(path) as f:
        n = int(f.attrs.get("sessions", 0)) + 1
        f.attrs["sessions"] = n
        f.flush()
    return n


def write_points(path, index, values, session):
    """Write finished points (``index``: tuple of index arrays; ``values``: field -> array): the fields, then
    (after a flush) ``done``. A failed write raises :class:`~.files.StoreError`; the points already
    marked done stay intact."""
    with signals_held():
        try:
            # no chunk cache: a chunk goes to the file in the write call itself, so a failed write (a full
            # disk) raises here, not later, ignored, when HDF5 evicts the chunk
            with open_h5_for_writing(path, rdcc_nbytes=0) as f:
                for name in POINT_FIELDS:
                    _put(f[name], index, values[name])
                _put(f["session"], index, session)
                f.flush()  # the points are on disk before the mask says so
                _put(f["done"], index, 1)
                f.flush()
        except StoreError:
            raise
        except (OSError, RuntimeError, ValueError) as exc:
            raise StoreError(f"writing points to network sweep store {path} failed ({type(exc).__name__}: {exc}); "
                             "the points it already marked done are intact, and resuming the sweep computes "
                             "the others again") from exc


def _put(ds, index, values):
    arr = ds[...]
    arr[index] = values
    ds[...] = arr


def lock(path):
    """The writer lock of a network sweep store (refuses a second writer)."""
    return WriterLock.acquire(path, "writing a network sweep")
