"""The store of a network sweep (:func:`dlnmomentum.networks_sweep`): one HDF5 file per sweep.

Layout (format ``dlnmomentum-network-sweep`` version 1): root attributes ``kind =
"network-sweep"``, ``format``/``format_version``, the configuration JSON ``config``, ``dims``
(``rep,beta,gamma``) and ``sessions``; dimension scales ``rep``, ``beta``, ``gamma``; a dataset
per field of :data:`dlnmomentum.runs.network.POINT_FIELDS` over ``(rep, beta, gamma)``;
``done`` (1 where the point is written, written last so a torn write leaves points not done)
and ``session``; ``/problem`` (as in run stores, :func:`.format.write_problem`) when the sweep
ran on one given :class:`~dlnmomentum.NetworkProblem`.
"""

import json
import os
import time

import h5py
import numpy as np

from ..driver import signals_held
from ..runs.network import POINT_FIELDS
from .files import StoreCorruptError, StoreError, WriterLock, attr_str, to_jsonable
from .format import Dims, read_problem, write_problem

FORMAT_NAME = "dlnmomentum-network-sweep"
FORMAT_VERSION = 1
KIND = "network-sweep"


def create(path, config, dims, coords, shape, problem=None):
    """A new, empty store at ``path`` (written to a temporary file, then moved into place)."""
    tmp = path + ".creating"
    with h5py.File(tmp, "w") as f:
        f.attrs.update({"kind": KIND, "format": FORMAT_NAME, "format_version": FORMAT_VERSION,
                        "config": json.dumps(to_jsonable(config)), "dims": ",".join(dims), "sessions": 0,
                        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        for name in dims:
            f.create_dataset(name, data=coords[name]).make_scale(name)
        for name, (dtype, desc) in POINT_FIELDS.items():
            kw = {"fillvalue": np.nan} if np.issubdtype(dtype, np.floating) else {}
            ds = f.create_dataset(name, shape=shape, dtype=dtype, **kw)
            ds.attrs["description"] = desc
        done = f.create_dataset("done", shape=shape, dtype=np.uint8, fillvalue=0)
        done.attrs["description"] = "1 where the point has been computed and written"
        session = f.create_dataset("session", shape=shape, dtype=np.int16, fillvalue=0)
        session.attrs["description"] = "the run (1, 2, ...) of the sweep that computed the point, 0: none"
        for name in tuple(POINT_FIELDS) + ("done", "session"):
            for axis, dim in enumerate(dims):
                f[name].dims[axis].attach_scale(f[dim])
        if problem is not None:
            write_problem(f, Dims(problem.d), problem)
    os.replace(tmp, path)


def is_network_sweep(path):
    """True when ``path`` is an HDF5 file of this layout (False for anything else, unreadable included)."""
    try:
        with h5py.File(path, "r") as f:
            return attr_str(f.attrs.get("kind", "")) == KIND
    except OSError:
        return False


def read(path):
    """``(config, problem or None, data, done)`` of the store at ``path``."""
    try:
        with h5py.File(path, "r") as f:
            if attr_str(f.attrs.get("kind", "")) != KIND:
                raise StoreError(f"{path} is not a network sweep store (kind {attr_str(f.attrs.get('kind', ''))!r})")
            config = json.loads(attr_str(f.attrs["config"]))
            config["sessions"] = int(f.attrs.get("sessions", 0))
            problem = read_problem(f["problem"]) if "problem" in f else None
            data = {name: f[name][...] for name in POINT_FIELDS}
            done = f["done"][...].astype(bool)
    except OSError as exc:
        if isinstance(exc, StoreError):
            raise
        raise StoreCorruptError(f"network sweep store {path} cannot be read: {exc}") from exc
    return config, problem, data, done


def start_session(path):
    with h5py.File(path, "r+") as f:
        n = int(f.attrs.get("sessions", 0)) + 1
        f.attrs["sessions"] = n
    return n


def write_points(path, index, values, session):
    """Write finished points (``index``: tuple of index arrays; ``values``: field -> array); ``done`` last."""
    with signals_held(), h5py.File(path, "r+") as f:
        for name in POINT_FIELDS:
            arr = f[name][...]
            arr[index] = values[name]
            f[name][...] = arr
        sess = f["session"][...]
        sess[index] = session
        f["session"][...] = sess
        done = f["done"][...]
        done[index] = 1
        f["done"][...] = done
        f.flush()


def lock(path):
    """The writer lock of a network sweep store (refuses a second writer)."""
    return WriterLock.acquire(path, "writing a network sweep")
