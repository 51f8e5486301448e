"""Layout of the HDF5 run store (see ``docs/store-format.md``).

Dimension scales, explicit chunking and hand-made gzip+shuffle chunks, the problem,
the observables and the encoding of result dataclasses in ``/final``. The public API
is :mod:`dlnmomentum.store`; the files around a store are :mod:`dlnmomentum.store.files`.
"""

import dataclasses
import json
import math
import zlib

import h5py
import numpy as np

from .files import (
    TEXT_CRC,
    Checkpoint,
    StoreCorruptError,
    attr_str,
    dumps,
    guarded,
    is_guard,
    read_dataset,
    resolve_type,
    text_crc,
    to_jsonable,
    type_name,
    verify_guarded,
)
from .kinds import RUN_FORMAT

FORMAT_NAME = RUN_FORMAT  # (defined with the other kinds of file, store.files.FILE_KINDS)
#: 2 (0.3.0): types are named by stable names (``MGDResult``), not module paths; version 1 files are read
#: and resumed (their module paths are mapped by :mod:`dlnmomentum.runs.registry`), and become version 2.
FORMAT_VERSION = 2

#: Chunk sizes of the time-extendable datasets, in bytes (uncompressed).
MIN_CHUNK_BYTES = 10 * 1024
TARGET_CHUNK_BYTES = 32 * 1024
MAX_CHUNK_BYTES = 1024 * 1024
GZIP_LEVEL = 1  # shuffled float64 trajectories: level 4 saves ~1% of space for ~8% more CPU

#: Lists longer than this in a run description are stored as datasets under /config_arrays.
LARGE_LIST = 256

OBSERVABLE_INFO = {
    "step": ("1", "number of updates (MGD/SMGD), grid steps (flows on a grid) or accepted steps (the adaptive "
                  "scheme rodas) done at this row"),
    "time": ("1", "MGF time of the row: t = k*eps with eps = gamma/(1-beta) for MGD/SMGD, t = k*h for flows on a "
                  "grid, the record time for the adaptive scheme rodas"),
    "theta": ("1", "regression parameter theta = u*v = (w_plus^2 - w_minus^2)/4"),
    "w_plus": ("1", "w_plus = u + v"),
    "w_minus": ("1", "w_minus = u - v"),
    "delta": ("1", "balancedness Delta = |w_plus * w_minus| = |u^2 - v^2|"),
    "train_loss": ("1", "training loss L(theta) = ||X theta - y||^2 / (2n)"),
    "test_loss": ("1", "test loss on (X_test, y_test), NaN without a test set"),
    "w_plus_dot": ("1/time", "velocity dw_plus/dt of the flow"),
    "w_minus_dot": ("1/time", "velocity dw_minus/dt of the flow"),
}

#: The names of the axes after ``time`` of the observables that have their own (default: ``coordinate`` for an axis
#: of length d, else ``axis<k>``): a network's parameters are ``params (time, parameter)``, as ``/problem/params0``
#: (stores before 0.6.0 named it ``axis1``; the readers go by path, not by dimension name).
OBSERVABLE_AXES = {"params": ("parameter",)}


# -- chunking and hand-made filtered chunks -----------------------------------------------------

def chunk_shape(row_shape, itemsize):
    """Explicit chunk of a dataset ``(rows, *row_shape)`` growing along axis 0.

    Whole rows, ``TARGET_CHUNK_BYTES // row_bytes`` of them (so a chunk holds between
    ``TARGET/2`` and ``TARGET`` bytes); a row larger than ``MAX_CHUNK_BYTES`` is cut along its
    leading axes instead. Always within ``[MIN_CHUNK_BYTES, MAX_CHUNK_BYTES]`` unless a single
    element is larger.
    """
    row_shape = tuple(int(s) for s in row_shape)
    row_bytes = itemsize * math.prod(row_shape)
    if row_bytes <= MAX_CHUNK_BYTES:
        return (max(1, TARGET_CHUNK_BYTES // max(row_bytes, 1)),) + row_shape
    chunk = [1] + list(row_shape)
    for axis in range(1, len(chunk)):
        inner = itemsize * math.prod(chunk[axis + 1:])
        if inner * chunk[axis] <= MAX_CHUNK_BYTES:
            break
        chunk[axis] = max(1, min(chunk[axis], TARGET_CHUNK_BYTES // max(inner, 1)))
    return tuple(chunk)


def encode_chunks(rows, chunks, level=GZIP_LEVEL):
    """HDF5 ``shuffle`` + ``deflate`` encoding of a block of whole chunk rows.

    ``rows`` has at most ``chunks[0]`` rows (a short block is zero-padded, the fill
    value). Returns ``[(offsets_in_row_axes, bytes)]``, one entry per chunk the block
    spans (several only when a row is cut into chunks). Runs without the GIL for the
    compression itself, so a worker thread overlaps it with the kernel.
    """
    rows = np.ascontiguousarray(rows)
    itemsize = rows.dtype.itemsize
    out = []
    trailing = chunks[1:]
    grid = [range(0, s, c) for s, c in zip(rows.shape[1:], trailing, strict=True)]
    for offsets in chunk_offsets(grid):
        src = rows[(slice(None),) + tuple(slice(o, o + c) for o, c in zip(offsets, trailing, strict=True))]
        if src.shape == tuple(chunks):
            full = np.ascontiguousarray(src)
        else:
            full = np.zeros(chunks, dtype=rows.dtype)
            full[tuple(slice(0, s) for s in src.shape)] = src
        raw = full.view(np.uint8).reshape(-1, itemsize).T.tobytes() if itemsize > 1 else full.tobytes()
        out.append((tuple(offsets), zlib.compress(raw, level)))
    return out


def chunk_offsets(ranges):
    if not ranges:
        yield ()
        return
    for head in ranges[0]:
        for tail in chunk_offsets(ranges[1:]):
            yield (head,) + tail


# -- datasets and dimension scales -------------------------------------------------------------

#: Fixed-size datasets up to this size keep their data in the object header (cheaper to create).
COMPACT_BYTES = 8 * 1024

_TYPES = {}
_PLISTS = {}


def _space(shape):
    return h5py.h5s.create_simple(tuple(shape)) if len(shape) else h5py.h5s.create(h5py.h5s.SCALAR)


def _tid(dtype):
    dtype = np.dtype(dtype)
    tid = _TYPES.get(dtype.str)
    if tid is None:
        tid = _TYPES[dtype.str] = h5py.h5t.py_create(dtype, logical=1)
    return tid


def _dcpl(shape, itemsize):
    """Dataset creation property list of a fixed-size dataset (no modification times); never modify it.

    Up to ``COMPACT_BYTES`` the data lives in the object header (covered by its checksum); larger data is
    chunked with HDF5's Fletcher32 checksum, so that damaged bytes are an error, never silent numbers.
    """
    nbytes = itemsize * math.prod(shape)
    kind = "compact" if 0 < nbytes <= COMPACT_BYTES else ("empty" if nbytes == 0 else tuple(shape) + (itemsize,))
    dcpl = _PLISTS.get(kind)
    if dcpl is None:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_obj_track_times(False)
        if kind == "compact":
            dcpl.set_layout(h5py.h5d.COMPACT)
        elif kind != "empty":
            chunks = chunk_shape(shape[1:], itemsize)
            dcpl.set_chunk((min(chunks[0], shape[0]),) + chunks[1:])
            dcpl.set_fletcher32()
        _PLISTS[kind] = dcpl
    return dcpl


_STR = h5py.string_dtype()


def set_attrs(obj, mapping, replace=True):
    """Create (or replace) attributes: str -> UTF-8 string, numbers -> scalars (low-level, fast).

    ``replace=False`` skips the existence check (new objects)."""
    if isinstance(obj, h5py.File):
        obj = obj["/"]
    oid = obj if isinstance(obj, (h5py.h5g.GroupID, h5py.h5d.DatasetID)) else obj.id
    for name, value in mapping.items():
        key = name.encode()
        if isinstance(value, str):
            tid, data = _tid(_STR), np.array(value, dtype=_STR)
        else:
            data = np.asarray(value)
            tid = _tid(data.dtype)
        if replace and h5py.h5a.exists(oid, key):
            h5py.h5a.delete(oid, key)
        h5py.h5a.create(oid, key, tid, _space(data.shape)).write(np.ascontiguousarray(data))


class Dims:
    """Creates small datasets and labels every axis with an index dimension scale.

    Every axis of every dataset gets a scale (an ``int64`` ``arange`` in the same group),
    so that netCDF readers (h5netcdf, xarray) see labelled dimensions in every group. Uses
    the low-level h5py API: a store writes a hundred small objects, and the high-level
    wrappers (and contiguous storage) would cost as much as a short run.
    """

    def __init__(self, d):
        self.d = d
        self._scales = {}

    def array(self, group, name, data, dims=None, **attrs):
        """A fixed-size, uncompressed dataset; ``dims`` names its axes (default: ``coordinate``
        for length-d axes, ``<name>_dim<k>`` otherwise). Returns its low-level id."""
        data = np.asarray(data)
        if data.dtype == np.bool_:
            raise TypeError("no bool datasets in a store (use int8)")
        dsid = h5py.h5d.create(group.id, name.encode(), _tid(data.dtype), _space(data.shape),
                               dcpl=_dcpl(data.shape, data.dtype.itemsize))
        if data.size:
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
        for axis, length in enumerate(data.shape):
            default = "coordinate" if length == self.d else f"{name}_dim{axis}"
            label = dims[axis] if dims is not None and dims[axis] else default
            h5py.h5ds.attach_scale(dsid, self.scale(group, label, length), axis)
        if attrs:
            set_attrs(dsid, attrs, replace=False)
        return dsid

    def scale(self, group, name, length):
        """The index scale ``name`` (= arange(length)) of ``group``, created on first use."""
        key = (group.id.id, name)  # (the open group's identifier: cheaper than its path)
        found = self._scales.get(key)
        if found is None:
            if name in group:
                found = (group[name].id, group[name].shape[0])
            else:
                sid = h5py.h5d.create(group.id, name.encode(), _tid(np.int64), _space((length,)),
                                      dcpl=_dcpl((length,), 8))
                if length:
                    sid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(length, dtype=np.int64))
                h5py.h5ds.set_scale(sid, name.encode())
                found = (sid, length)
            self._scales[key] = found
        if found[1] != length:
            return self.scale(group, f"{name}_{length}", length)
        return found[0]


def string_dataset(group, name, value):
    """A scalar string dataset, its CRC-32 in the attribute :data:`~.files.TEXT_CRC` (see :func:`.files.guarded`)."""
    ds = group.create_dataset(name, data=value, dtype=h5py.string_dtype(), track_times=False)
    ds.attrs[TEXT_CRC] = text_crc(value)
    return ds


def read_text(ds, hint=None):
    """The text of a scalar string dataset, checked against its CRC-32 where it has one (a damaged byte is a
    :class:`StoreCorruptError` naming the file and the dataset; ``hint`` says what repairs it)."""
    text = ds.asstr()[()]
    if TEXT_CRC in ds.attrs and text_crc(text) != int(ds.attrs[TEXT_CRC]):
        raise StoreCorruptError(f"store {ds.file.filename}: the text of dataset {ds.name} is damaged (it does not "
                                f"match the CRC-32 stored beside it){hint or ''}")
    return text


# -- problem ------------------------------------------------------------------------------------

def write_problem(f, dims, problem, hessian=True):
    g = f.create_group("problem")
    if hasattr(problem, "store_arrays"):  # a problem of another kind (a network): its own arrays and class name
        attrs = dict(problem.store_attrs(), params=dumps(problem.params), problem_class=type_name(problem))
        set_attrs(g, guarded(attrs, *(k for k, v in attrs.items() if isinstance(v, str))))
        for name, (value, axes) in problem.store_arrays().items():
            dims.array(g, name, value, axes)
        return g
    set_attrs(g, guarded({"description": "training and test data of the run (L(theta) = ||X theta - y||^2 / (2n))",
                          "params": dumps(problem.params)}, "params"))
    dims.array(g, "X", problem.X, ["sample", "coordinate"])
    dims.array(g, "y", problem.y, ["sample"])
    dims.array(g, "X_test", problem.X_test, ["test_sample", "coordinate"])
    dims.array(g, "y_test", problem.y_test, ["test_sample"])
    if problem.theta_star is not None:
        dims.array(g, "theta_star", problem.theta_star, ["coordinate"])
    # Derived by BLAS; stored so that a resumed run uses the very same bits on any machine. Left out for a run that
    # does not use it (``hessian`` False: MGD in the data or minibatch form, d > 2n), where it is d × d for nothing.
    if hessian:
        dims.array(g, "hessian", problem.hessian, ["coordinate", "coordinate_j"])
    dims.array(g, "b", problem.b, ["coordinate"])
    return g


def read_problem(g):
    import warnings

    from ..problem import Problem

    def arr(name):
        return np.asarray(read_dataset(g[name]))

    verify_guarded(g.attrs, g.file.filename, "/problem")
    problem_class = attr_str(g.attrs.get("problem_class", ""))
    if problem_class:  # see write_problem
        attrs = {k: attr_str(v) for k, v in g.attrs.items() if k not in ("params", "problem_class") and not is_guard(k)}
        # g[k], not g.items(): that gives None for an object that cannot be opened (a damaged header)
        arrays = {k: arr(k) for k in g.keys() if not _is_scale(g[k])}
        return resolve_type(problem_class, "problem class").from_store(
            arrays, attrs, json.loads(attr_str(g.attrs.get("params", "{}"))))
    has_test = g["X_test"].shape[0] > 0
    theta_star = arr("theta_star") if "theta_star" in g else None
    params = json.loads(attr_str(g.attrs.get("params", "{}")))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        problem = Problem(arr("X"), arr("y"), arr("X_test") if has_test else None,
                          arr("y_test") if has_test else None, theta_star=theta_star, params=params)
    for name in ("hessian", "b"):
        if name in g:
            value = np.ascontiguousarray(arr(name), dtype=np.float64)
            value.setflags(write=False)
            problem.__dict__[name] = value  # fills the cached_property with the stored bits
    return problem


# -- run description ----------------------------------------------------------------------------

def split_description(description):
    """(JSON-able description with long lists replaced by references, {dataset path: array})."""
    arrays = {}

    def walk(value, path):
        if isinstance(value, dict):
            return {k: walk(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple, np.ndarray)) and len(value) > LARGE_LIST:
            arr = np.asarray(value)
            if arr.dtype.kind in "iuf" and arr.ndim >= 1:
                ref = f"/config_arrays/{path}"
                arrays[ref] = arr
                return {"$dataset": ref}
        return to_jsonable(value)

    return walk(description, ""), arrays


def join_description(description, f, arrays=False):
    """The description of :func:`split_description` with its long lists read back (``arrays``: as arrays)."""
    def walk(value):
        if isinstance(value, dict):
            if set(value) == {"$dataset"}:
                stored = np.asarray(read_dataset(f[value["$dataset"]]))
                return stored if arrays else stored.tolist()
            return {k: walk(v) for k, v in value.items()}
        return value

    return walk(description)


# -- observables --------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Series:
    """One time-extendable dataset: a recorded field (``step``/``time`` are shared by all groups)."""

    key: str
    path: str
    dtype: np.dtype
    row_shape: tuple
    chunks: tuple
    is_bool: bool = False

    @property
    def chunk_rows(self):
        return self.chunks[0]

    @property
    def chunk_bytes(self):
        return self.dtype.itemsize * math.prod(self.chunks)


def series_path(key):
    return f"/observables/{key}" if key in ("step", "time") else f"/observables/{key}/value"


def schema_from_fields(fields):
    """Series of the recorded fields (name -> array with a leading row axis)."""
    out = {}
    for key, arr in fields.items():
        arr = np.asarray(arr)
        is_bool = arr.dtype == np.bool_
        dtype = np.dtype(np.int8) if is_bool else arr.dtype
        chunks = chunk_shape(arr.shape[1:], dtype.itemsize)
        out[key] = Series(key, series_path(key), dtype, arr.shape[1:], chunks, is_bool)
    return out


def schema_from_file(f):
    out = {}
    if "observables" not in f:
        return out
    obs = f["observables"]
    keys = [k for k in ("step", "time") if k in obs] + [k for k in obs if isinstance(obs[k], h5py.Group)]
    for key in keys:
        ds = f[series_path(key)]
        out[key] = Series(key, series_path(key), ds.dtype, ds.shape[1:], tuple(ds.chunks),
                          attr_str(ds.attrs.get("dlnm_type", "")) == "bool")
    return out


def create_observables(f, dims, schema):
    obs = f.create_group("observables", track_order=True)
    set_attrs(obs, {"description": "recorded rows: one group per quantity with value(time, ...); "
                                   "step and time are shared by hard link"})
    if not schema:
        return obs
    # In the groups of the quantities, the ``coordinates`` attribute of ``value`` makes ``step`` a coordinate in
    # xarray; here no variable names it, so the group says it (as xarray itself writes a coordinate no variable
    # uses): ``xr.open_dataset(path, group="observables")`` gives ``step`` as a coordinate, not a data variable
    # (0.6.0; older stores lack it and open as before, with ``step`` a data variable).
    set_attrs(obs, {"coordinates": "step"}, replace=False)

    def extendable(group, s):
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)  # not the shared (cached) lists
        dcpl.set_obj_track_times(False)
        dcpl.set_chunk(s.chunks)
        dcpl.set_shuffle()
        dcpl.set_deflate(GZIP_LEVEL)
        dcpl.set_fill_value(np.zeros((), dtype=s.dtype))
        space = h5py.h5s.create_simple((0,) + s.row_shape, (h5py.h5s.UNLIMITED,) + s.row_shape)
        name = "value" if s.key not in ("step", "time") else s.key
        tid = h5py.h5t.py_create(s.dtype, logical=1)
        return h5py.h5d.create(group.id, name.encode(), tid, space, dcpl=dcpl)

    time_id = extendable(obs, schema["time"])
    h5py.h5ds.set_scale(time_id, b"time")
    step_id = extendable(obs, schema["step"])
    h5py.h5ds.attach_scale(step_id, time_id, 0)
    for key, oid in (("time", time_id), ("step", step_id)):
        set_attrs(oid, dict(zip(("units", "description"), OBSERVABLE_INFO[key], strict=True)), replace=False)
    for key, s in schema.items():
        if key in ("step", "time"):
            continue
        gid = h5py.h5g.create(obs.id, key.encode())  # (low-level: a store creates many objects)
        gid.links.create_hard(b"time", obs.id, b"time")
        gid.links.create_hard(b"step", obs.id, b"step")
        g = h5py.Group(gid)
        value_id = extendable(g, s)
        h5py.h5ds.attach_scale(value_id, time_id, 0)
        named = OBSERVABLE_AXES.get(key, ())
        for axis, length in enumerate(s.row_shape, start=1):
            if axis <= len(named):
                name = named[axis - 1]
            else:
                name = "coordinate" if length == dims.d and axis == 1 else f"axis{axis}"
            h5py.h5ds.attach_scale(value_id, dims.scale(g, name, length), axis)
        units, description = OBSERVABLE_INFO.get(key, ("1", f"recorded field {key}"))
        attrs = {"units": units, "description": description, "coordinates": "step"}
        if s.is_bool:
            attrs["dlnm_type"] = "bool"
        set_attrs(value_id, attrs, replace=False)
    return obs


# -- checkpoint group -------------------------------------------------------------------------

def write_checkpoint_group(f, dims, ckpt):
    g = f.create_group("checkpoint")
    g.attrs["description"] = ("kernel state and row bookkeeping at the end of the run: resume continues from "
                              "here when no newer <store>.ckpt exists")
    g.attrs["meta"] = json.dumps(ckpt.meta)
    for sub, arrays in (("state", ckpt.state), ("pending", ckpt.pending)):
        h = g.create_group(sub)
        for name, value in arrays.items():
            value = np.asarray(value)
            dims.array(h, name, value.astype(np.int8) if value.dtype == np.bool_ else value)
    return g


def read_checkpoint_group(g):
    meta = json.loads(attr_str(g.attrs["meta"]))
    state = {k: np.asarray(v[()]) for k, v in g["state"].items() if not _is_scale(v)}
    pending = {k: np.asarray(v[()]) for k, v in g["pending"].items() if not _is_scale(v)}
    return Checkpoint(meta, state, pending, source=f"{g.file.filename}:/checkpoint")


def _is_scale(ds):
    return attr_str(ds.attrs.get("CLASS", b"")) == "DIMENSION_SCALE"


def delete_dataset(g, name):
    """Delete ``g[name]`` after detaching it from its dimension scales."""
    ds = g[name]
    for axis in range(ds.ndim):
        for scale in list(ds.dims[axis].values()):
            ds.dims[axis].detach_scale(scale)
    del g[name]


def delete_group(f, name):
    """Delete ``f[name]`` after detaching its datasets from their dimension scales."""
    g = f[name]
    paths = []
    g.visititems(lambda path, obj: paths.append(path) if isinstance(obj, h5py.Dataset) and not obj.is_scale
                 else None)
    for path in paths:
        parent, _, leaf = path.rpartition("/")
        delete_dataset(g[parent] if parent else g, leaf)
    del f[name]
