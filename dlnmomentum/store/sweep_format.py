"""The sweep-store layout: one HDF5 file per sweep, a dataset per point field, a ``done`` mask.

Root attributes ``kind = "sweep"``, ``format``/``format_version``, the configuration JSON in
``config``, ``dims`` and the number of ``sessions``; dimension scales ``rep``, ``beta``, ``gamma``
(or ``lam``) and ``coord``; a dataset per field of :mod:`dlnmomentum.runs.points`; ``done`` (1
where a point is written) and ``session`` (which run of the sweep wrote it); ``/problem`` when
the sweep ran on a given :class:`~dlnmomentum.Problem`. The coded fields ``status`` and ``theory_reason``
carry the CF attributes ``flag_values`` and ``flag_meanings``, the name of every code (older stores lack
them; their codes are the same), first the fill -1 ``not_done`` of a point not done (since 0.6.0; 0 before).
Opens in xarray (``xarray.open_dataset(path, engine="h5netcdf")``).

How a sweep store survives crashes, full disks and damage
---------------------------------------------------------
* Since 0.3.0 every dataset carries HDF5's Fletcher32 checksum (chunked: one chunk per line of the last
  grid axis, at most :data:`CHUNK_BYTES` of it in a store created since 0.6.0, so every chunk is whole and is
  rewritten without being read), and the superblock has
  HDF5's status flags (``libver="latest"``), which let readers open it without a file lock (see
  :func:`dlnmomentum.store.files.open_h5`): a reader never blocks the writer.
* Points are written in waves: the chunks a wave touches are written whole from the writer's copy in
  memory, flushed, and only then the ``done`` mask, so a write torn by a crash or a full disk leaves
  the new points not done and the points before intact.
* A chunk whose checksum fails is reported by readers (:class:`StoreCorruptError` naming the file and the
  dataset); the next ``--resume`` recomputes the points it held (sweeps are deterministic: bit for bit).
"""

import itertools
import json
import os
import time

import h5py
import numpy as np

from ..driver import signals_held
from ..problem import Problem
from ..runs.points import (
    ADDED_IN_V2,
    CODED_FIELDS,
    FIELDS,
    NOT_DONE,
    PARAMETER_FIELDS,
    SCALAR_FIELDS,
    VECTOR_FIELDS,
    flag_attributes,
    point_columns,
)
from .files import (
    READ_ERRORS,
    UNREPAIRABLE,
    StoreCorruptError,
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
    read_dataset,
    read_error,
    reading,
    retry_busy,
    to_jsonable,
    verify_guarded,
    write_h5_image,
)
from .global_heap import file_key, keep_clean
from .kinds import SWEEP_FORMAT, kind_of, wrong_kind

FORMAT_NAME = SWEEP_FORMAT  # (defined with the other kinds of file, store.kinds.FORMATS)
FORMAT_VERSION = 2
#: Format history: 1 (0.2.0-0.3.0); 2 (0.4.0): designs (``lam-grid``, ``pairs``; the point parameters
#: ``gamma``, ``beta``, ``lam`` that are not dims as datasets over the grid) and the fields
#: :data:`~dlnmomentum.runs.points.ADDED_IN_V2`. A format-1 store is read (the new fields as NaN / -1 /
#: ``NOT_RECORDED``) and continued (the first session adds their datasets).

#: What the dims that are not run parameters index (``gamma``, ``beta``, ``lam``: :data:`PARAMETER_FIELDS`).
DIM_DESCRIPTIONS = {"rep": "data set r: the problem of seed seed + r (the given problem for every r)",
                    "pair": "index of the (gamma, beta) pair of config gammas and betas",
                    "coord": "coordinate index of theta and the other vectors"}

#: Datasets of the grid with their fill value: the point fields, then ``session`` and ``done``.
MASKS = {"session": (np.int16, 0), "done": (np.uint8, 0)}


def fill_value(dtype, name=None):
    """The fill of a grid dataset ``name``: NaN for floats (a point not written), :data:`NOT_DONE` (-1, named
    ``not_done`` in its flag attributes) for a coded field, 0 otherwise.

    A coded field's fill was 0 before 0.6.0: status ``running`` and theory_reason ``computed`` for a point never
    computed, in every reader that does not look at ``done`` (``xr.open_dataset``, h5py). Such a store keeps its 0
    (:func:`stored_fill`): its flag attributes do not name -1."""
    if name in CODED_FIELDS:
        return NOT_DONE
    return np.nan if np.issubdtype(dtype, np.floating) else 0


def stored_fill(ds):
    """The fill of a point not done of the grid dataset ``ds`` of a store, as the store was created: its HDF5 fill
    value for a coded field (-1 since 0.6.0, 0 before), :func:`fill_value` for the others."""
    name = ds.name.rsplit("/", 1)[-1]
    return ds.fillvalue if name in CODED_FIELDS else fill_value(ds.dtype, name)


#: Most bytes of a chunk of a new sweep store's grid dataset along its last grid axis (:func:`grid_chunks`).
CHUNK_BYTES = 1 << 20


def grid_chunks(shape, grid_ndim, itemsize=None):
    """One chunk per line of the last grid axis (with the trailing ``coord`` axis whole): every chunk is
    whole, so a wave rewrites a chunk without reading it (a damaged one included).

    With ``itemsize`` (new sweep stores), a line longer than :data:`CHUNK_BYTES` is cut into chunks of that size
    along the last grid axis: a wave rewrites the chunks it touches, and a chunk of a whole line of 10^5 pairs
    (24 MB of ``theta``) was rewritten in every wave (waves × line bytes, quadratic in a long line). Stores chunked
    one line per chunk (before) are read and written as they are: the writer takes each dataset's own chunks."""
    chunks = (1,) * (grid_ndim - 1) + tuple(max(1, n) for n in shape[grid_ndim - 1:])
    if itemsize is None:
        return chunks
    point_bytes = int(itemsize) * int(np.prod(chunks[grid_ndim:], dtype=np.int64))
    last = min(chunks[grid_ndim - 1], max(1, CHUNK_BYTES // max(1, point_bytes)))
    return chunks[:grid_ndim - 1] + (last,) + chunks[grid_ndim:]


def _write_failed(path, exc, done):
    if metadata_damaged(exc):  # not a full disk: the file's structure is damaged, and no resume mends it
        return StoreCorruptError(f"sweep store {path} cannot be written: it is damaged ({type(exc).__name__}: "
                                 f"{exc}){UNREPAIRABLE}")
    return StoreError(f"writing sweep store {path} failed ({type(exc).__name__}: {exc}); the {done} points "
                      f"done before are intact: free the space (or fix the cause) and continue with "
                      f"`{command('sweep', '--store', path, '--resume')}` (dlnmomentum.resume_sweep)")


class SweepFile:
    """Create / reopen a sweep store and write finished points into it (the sweep layer's ``plan`` says what).

    The writer keeps a copy of every grid dataset in memory (read by :meth:`read` with ``repair``) and
    writes the chunks a wave touches from it. The point fields :meth:`read` with ``repair`` returns *are* that copy
    (one copy of the grid, not two: the sweep's grid while it runs, :func:`dlnmomentum.sweeps.execute.begin`);
    :meth:`write_points` puts the points into it, and :meth:`release` lets it go.
    """

    def __init__(self, path):
        self.path = path
        self._memory = None
        self._created = None  # the plan of a store this object has just created (nothing written to it since)

    # -- creation ------------------------------------------------------------------------------------
    def create(self, plan):
        """Write the whole store, every chunk allocated, as ``<path>.creating``, then rename it to ``path``.

        HDF5 builds the file in memory and Python writes its image: a full disk is then a plain ``OSError``
        of one ``write`` (HDF5 never holds a file it cannot flush, which used to crash the interpreter
        at exit), and the temporary file is removed.
        """
        tmp = self.path + ".creating"
        f = memory_h5(tmp)
        try:
            self._layout(f, plan)
        except BaseException:
            f.close()
            raise
        try:
            write_h5_image(f, tmp)
        except OSError as exc:
            raise StoreError(f"cannot create sweep store {self.path}: {exc}; nothing was written") from exc
        os.replace(tmp, self.path)
        fsync_dir(self.path)
        self._created = plan

    def _layout(self, f, plan):
        f.attrs["kind"] = "sweep"
        f.attrs["format"] = FORMAT_NAME
        f.attrs["format_version"] = FORMAT_VERSION
        f.attrs.update(guarded({"config": json.dumps(to_jsonable(plan.config))}, "config"))
        f.attrs["dims"] = ",".join(plan.dims)
        f.attrs["sessions"] = 0
        f.attrs["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        coords = plan.coords()
        for name in plan.dims + ("coord",):
            ds = f.create_dataset(name, data=coords[name], fletcher32=True)
            ds.make_scale(name)
            ds.attrs["description"] = DIM_DESCRIPTIONS.get(name) or PARAMETER_FIELDS[name][1]
        for name, (dtype, desc) in SCALAR_FIELDS.items():
            self._field(f, plan, name, dtype, desc, vector=False)
        for name, (dtype, desc) in VECTOR_FIELDS.items():
            self._field(f, plan, name, dtype, desc, vector=True)
        over_grid = []
        for name, values in plan.parameters().items():  # for xarray and h5py users; readers use the config
            if name in plan.dims:
                continue
            dtype, desc = PARAMETER_FIELDS[name]
            self._field(f, plan, name, dtype, desc, vector=False)
            f[name][...] = values
            over_grid.append(name)
        if over_grid:  # xarray: the parameters over the grid are coordinates of the fields, not fields (0.6.0)
            f.attrs["coordinates"] = " ".join(over_grid)
        self._field(f, plan, "done", np.uint8, "1 where the point has been computed and written", False)
        self._field(f, plan, "session", np.int16, "the run (1, 2, ...) of the sweep that computed the point, "
                    "0: none", False)
        if plan.problem is not None:
            g = f.create_group("problem")
            for name in ("X", "y", "X_test", "y_test"):
                value = getattr(plan.problem, name)
                g.create_dataset(name, data=value, fletcher32=bool(value.size))
            if plan.problem.theta_star is not None:
                g.create_dataset("theta_star", data=plan.problem.theta_star, fletcher32=True)
            g.attrs.update(guarded({"params": json.dumps(to_jsonable(plan.problem.params))}, "params"))

    @staticmethod
    def _field(f, plan, name, dtype, desc, vector):
        shape = plan.shape + ((plan.d,) if vector else ())
        # Every chunk is allocated (and filled) now: a wave then only overwrites bytes the file already
        # has, so a full disk can stop the sweep when the store is created, hardly ever in a wave.
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        ds = f.create_dataset(name, shape=shape, dtype=dtype, fillvalue=fill_value(dtype, name), fletcher32=True,
                              chunks=grid_chunks(shape, len(plan.shape), np.dtype(dtype).itemsize), dcpl=dcpl)
        ds.attrs["description"] = desc
        # status, theory_reason: the name of every code, and of the fill -1 of a point not done
        ds.attrs.update(flag_attributes(name, dtype, not_done=True))
        for axis, dim in enumerate(plan.dims):
            ds.dims[axis].attach_scale(f[dim])
        if vector:
            ds.dims[len(plan.dims)].attach_scale(f["coord"])

    # -- reading -------------------------------------------------------------------------------------
    def read_config(self, action="read"):
        """``(config, problem or None)``; another kind of file is an error naming its reader (``action="read"``)
        or how to continue it (``"resume"``)."""
        return retry_busy(lambda: self._read_config(action))

    def _read_config(self, action="read"):
        f, _ = open_h5(self.path)
        with f, reading(self.path):
            kind = kind_of(f.attrs)
            if kind != "sweep":  # another kind of file: say which, and name its reader
                raise wrong_kind(self.path, kind, "sweep", action)
            missing = [name for name in ("config",) if name not in f.attrs]
            if missing:
                raise StoreCorruptError(f"sweep store {self.path} is incomplete: it has no {missing[0]!r} "
                                        "attribute (not written by dlnmomentum, or damaged)")
            verify_guarded(f.attrs, self.path, "the file's root")
            config = json.loads(attr_str(f.attrs["config"]))
            if not isinstance(config, dict) or "kind" not in config:
                raise StoreCorruptError(f"sweep store {self.path} has a damaged 'config' attribute")
            config["sessions"] = int(f.attrs.get("sessions", 0))
            problem = None
            if "problem" in f:
                g = f["problem"]
                verify_guarded(g.attrs, self.path, "/problem")

                def arr(name):
                    return read_dataset(g[name])

                problem = Problem(arr("X"), arr("y"), arr("X_test") if g["X_test"].size else None,
                                  arr("y_test") if g["y_test"].size else None,
                                  theta_star=arr("theta_star") if "theta_star" in g else None,
                                  params=json.loads(attr_str(g.attrs.get("params", "{}"))))
            return config, problem

    def read(self, plan, repair=False):
        """``(data, done, session, config)`` of the store; with ``repair``, ``data`` is the writer's copy (see the
        class), written by :meth:`write_points`.

        A damaged chunk raises :class:`StoreCorruptError` naming the dataset; with ``repair`` (the
        writer, before a session) the points it held are not done instead (the session recomputes them).
        A read that met a wave being written is read again (:func:`retry_busy`).

        The writer's read of a store it has just created (under its lock, nothing written since) is not a read:
        every point holds its fill value, and reading them back (every chunk, the whole file) took about a tenth
        of a sweep of short runs.
        """
        if repair and self._created is plan and self._memory is None:
            return self._fresh(plan)
        return retry_busy(lambda: self._read(plan, repair))

    def _fresh(self, plan):
        """What :meth:`_read` with ``repair`` gives for the store :meth:`create` has just written for ``plan``."""
        arrays = {}
        for name in FIELDS:
            dtype = (SCALAR_FIELDS.get(name) or VECTOR_FIELDS[name])[0]
            shape = plan.shape + ((plan.d,) if name in VECTOR_FIELDS else ())
            arrays[name] = np.full(shape, fill_value(dtype, name), dtype=dtype)
        for name, (dtype, fill) in MASKS.items():
            arrays[name] = np.full(plan.shape, fill, dtype=dtype)
        config = json.loads(json.dumps(to_jsonable(plan.config)))
        config["sessions"] = 0
        arrays.update(plan.parameters())
        done = arrays.pop("done").astype(bool)
        session = arrays.pop("session")
        self._keep(arrays, done, session)
        self.repaired = 0
        return arrays, done, session, config

    def _keep(self, arrays, done, session):
        """Make ``arrays`` the writer's copy: the same arrays, not copies of them (a copy of every field was a
        second copy of the whole grid, held for the whole session); ``done`` and ``session`` copied (small)."""
        self._memory = dict(arrays)
        self._memory.update(done=done.astype(np.uint8), session=session.copy())

    def release(self):
        """Let the writer's copy of the grid go (the sweep's final read then does not hold it beside its own); a
        later :meth:`write_points` reads the store again."""
        self._memory = None
        self._created = None  # (what the file holds is no longer the fill of a fresh store)

    def _read(self, plan, repair):
        f, _ = open_h5(self.path)
        with f, reading(self.path):
            names = list(FIELDS) + list(MASKS)
            arrays, damaged, fills = {}, np.zeros(plan.shape, dtype=bool), {}
            for name in names:
                if name not in f:
                    if name in ADDED_IN_V2:  # a format-1 store
                        arrays[name] = self._added_field(name, plan)
                        fills[name] = fill_value(arrays[name].dtype, name)  # (the dataset the session adds)
                        continue
                    raise StoreCorruptError(f"sweep store {self.path} is incomplete: no dataset /{name}")
                arrays[name] = self._read_grid(f[name], plan, damaged if repair else None)
                fills[name] = MASKS[name][1] if name in MASKS else stored_fill(f[name])
            verify_guarded(f.attrs, self.path, "the file's root")
            config = json.loads(attr_str(f.attrs["config"]))
            config["sessions"] = int(f.attrs.get("sessions", 0))
        arrays.update(plan.parameters())
        if damaged.any():
            for name, arr in arrays.items():  # (each dataset's own fill: a coded field's 0 in an older store)
                arr[damaged] = fills.get(name, fill_value(arr.dtype, name))
        done = arrays.pop("done").astype(bool)
        session = arrays.pop("session")
        if repair:
            self._keep(arrays, done, session)
            self.repaired = int(damaged.sum())
        return arrays, done, session, config

    @staticmethod
    def _added_field(name, plan):
        """What a store written before ``name`` existed holds for it (:data:`ADDED_IN_V2`)."""
        dtype = (SCALAR_FIELDS.get(name) or VECTOR_FIELDS[name])[0]
        shape = plan.shape + ((plan.d,) if name in VECTOR_FIELDS else ())
        return np.full(shape, ADDED_IN_V2[name], dtype=dtype)

    def _add_missing_fields(self, f, plan):
        """Give a format-1 store the datasets of :data:`ADDED_IN_V2` (the writer's copy holds their values)."""
        for name in ADDED_IN_V2:
            if name in f:
                continue
            vector = name in VECTOR_FIELDS
            dtype, desc = (VECTOR_FIELDS if vector else SCALAR_FIELDS)[name]
            self._field(f, plan, name, dtype, desc, vector)
            f[name][...] = self._memory[name]

    def _read_grid(self, ds, plan, damaged):
        """``ds[...]``; with a ``damaged`` mask, chunks that fail their checksum are filled and marked."""
        try:
            return ds[...]
        except READ_ERRORS as exc:
            if damaged is None or ds.chunks is None:
                raise read_error(self.path, exc, f"dataset {ds.name}",
                                 hint=f"; `{command('sweep', '--store', self.path, '--resume')}` recomputes the "
                                      "points of a damaged chunk") from exc
        out = np.full(ds.shape, ds.fillvalue, dtype=ds.dtype)
        grid = len(plan.shape)
        for sel in ds.iter_chunks():
            try:
                out[sel] = ds[sel]
            except READ_ERRORS as exc:
                if metadata_damaged(exc):  # the chunk index, not a chunk: rewriting chunks cannot mend it
                    raise read_error(self.path, exc, f"dataset {ds.name}") from exc
                damaged[sel[:grid]] = True
        return out

    # -- writing -------------------------------------------------------------------------------------
    def start_session(self, plan=None):
        try:
            with signals_held(), open_h5_for_writing(self.path) as f:
                if plan is not None and self._memory is not None:
                    self._add_missing_fields(f, plan)
                n = int(f.attrs.get("sessions", 0)) + 1
                f.attrs["sessions"] = n
        except (OSError, RuntimeError) as exc:
            if isinstance(exc, StoreError):
                raise
            done = int(self._memory["done"].sum()) if self._memory is not None else "already"
            raise _write_failed(self.path, exc, done) from exc
        return n

    def write_points(self, plan, points, results, session):
        """Write finished points: the chunks they touch, then (after a flush) the done mask.

        ``results``: the point dicts, or their :func:`~dlnmomentum.runs.points.point_columns`."""
        if self._memory is None:
            self.read(plan, repair=True)
        memory = self._memory
        idx = tuple(np.array(ix) for ix in np.unravel_index(np.asarray(points), plan.shape))
        done_before = int(memory["done"].sum())
        columns = point_columns(results)
        for name in FIELDS:
            memory[name][idx] = columns[name].astype(memory[name].dtype, copy=False)
        memory["session"][idx] = session
        with signals_held():
            before = file_key(self.path)  # (the key of the scan of its global heaps, made as it is opened)
            try:
                # no chunk cache: a chunk goes to the file in the write call itself, so a failed write (a full
                # disk) raises there, not later, ignored, when HDF5 evicts the chunk
                f = open_h5_for_writing(self.path, rdcc_nbytes=0)
            except (OSError, RuntimeError) as exc:
                if isinstance(exc, StoreError):
                    raise
                raise _write_failed(self.path, exc, done_before) from exc
            try:
                with f:
                    names = list(FIELDS) + ["session"]
                    self._write_chunks(f, names, idx)
                    f.flush()  # the points are on disk before the mask says so
                    memory["done"][idx] = 1
                    self._write_chunks(f, ["done"], idx)
                    f.flush()
            except (OSError, RuntimeError, ValueError) as exc:
                memory["done"][idx] = 0  # as on disk: a session that goes on rewrites them
                raise _write_failed(self.path, exc, done_before) from exc
            keep_clean(self.path, before)  # chunks rewritten in place: its global heaps are as they were

    def _write_chunks(self, f, names, idx):
        touched = {}  # (the selections, found once per layout of dataset: scalar and vector fields)
        for name in names:
            ds = f[name]
            arr = self._memory[name]
            if ds.chunks is None:  # a store written before checksums: contiguous datasets, written whole
                ds[...] = arr
                continue
            layout = (ds.shape, ds.chunks)
            if layout not in touched:
                touched[layout] = list(_touched_chunks(ds.shape, ds.chunks, idx))
            for sel in touched[layout]:
                ds[sel] = arr[sel]


def _touched_chunks(shape, chunks, idx):
    """The selections of a dataset that hold the grid points ``idx`` (index arrays of the grid axes), each made of
    whole chunks: the chunks the points touch, consecutive ones along the fastest grid axis cut into chunks
    merged into one selection.

    Merged, because HDF5 writes each whole chunk of a selection without reading it, as it writes a chunk
    written alone, and one write call per chunk cost more than the kernels of a sweep of short runs (a
    (5, 300, 300) grid has 1 500 chunks per dataset, written one by one in every wave).
    """
    lead = len(idx)
    nchunks = [-(-n // c) for n, c in zip(shape[:lead], chunks[:lead], strict=True)]
    keys = sorted(set(zip(*(np.asarray(ix) // c for ix, c in zip(idx, chunks[:lead], strict=True)), strict=True)))
    # the last grid axis with more than one chunk: runs of consecutive chunks along it become one selection
    axis = max((a for a in range(lead) if nchunks[a] > 1), default=None)
    runs = []  # [first key, last index along `axis`]
    for key in keys:
        key = tuple(int(k) for k in key)
        if (runs and axis is not None and runs[-1][0][:axis] == key[:axis] and runs[-1][0][axis + 1:] == key[axis + 1:]
                and runs[-1][1] + 1 == key[axis]):
            runs[-1][1] = key[axis]
        else:
            runs.append([key, key[axis] if axis is not None else 0])
    trailing = [range(0, n, c) for n, c in zip(shape[lead:], chunks[lead:], strict=True)]
    for key, last in runs:
        head = tuple(slice(k * c, min((last if a == axis else k) * c + c, n))
                     for a, (k, c, n) in enumerate(zip(key, chunks[:lead], shape[:lead], strict=True)))
        for tail in itertools.product(*trailing):
            yield head + tuple(slice(t, min(t + c, n)) for t, c, n in zip(tail, chunks[lead:], shape[lead:],
                                                                            strict=True))


def lock(path):
    """The writer lock of a sweep store (refuses a second writer)."""
    return WriterLock.acquire(path, "writing a sweep")


# ---------------------------------------------------------------------------------------------------
# Driver
