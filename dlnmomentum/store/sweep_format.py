"""The sweep-store layout: one HDF5 file per sweep, a dataset per point field, a ``done`` mask.

Root attributes ``kind = "sweep"``, ``format``/``format_version``, the configuration JSON in
``config``, ``dims`` and the number of ``sessions``; dimension scales ``rep``, ``beta``, ``gamma``
(or ``lam``) and ``coord``; a dataset per field of :mod:`dlnmomentum.runs.points`; ``done`` (1
where a point is written) and ``session`` (which run of the sweep wrote it); ``/problem`` when
the sweep ran on a given :class:`~dlnmomentum.Problem`. Points are written in waves, the
``done`` mask last, so a torn write leaves them not done. Opens in xarray
(``xarray.open_dataset(path, engine="h5netcdf")``).
"""

import json
import os
import time

import h5py
import numpy as np

from ..driver import signals_held
from ..problem import Problem
from ..runs.points import FIELDS, SCALAR_FIELDS, VECTOR_FIELDS
from .files import StoreCorruptError, StoreError, WriterLock, attr_str, to_jsonable

FORMAT_NAME = "dlnmomentum-sweep"
FORMAT_VERSION = 1


class SweepFile:
    """Create / reopen a sweep store and write finished points into it (the sweep layer's ``plan`` says what)."""

    def __init__(self, path):
        self.path = path

    # -- creation ------------------------------------------------------------------------------------
    def create(self, plan):
        tmp = self.path + ".creating"
        with h5py.File(tmp, "w") as f:
            f.attrs["kind"] = "sweep"
            f.attrs["format"] = FORMAT_NAME
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["config"] = json.dumps(to_jsonable(plan.config))
            f.attrs["dims"] = ",".join(plan.dims)
            f.attrs["sessions"] = 0
            f.attrs["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            coords = plan.coords()
            for name in plan.dims + ("coord",):
                ds = f.create_dataset(name, data=coords[name])
                ds.make_scale(name)
            for name, (dtype, desc) in SCALAR_FIELDS.items():
                if name == "lam" and not plan.discrete:
                    continue  # a flow sweep's lambda is its dimension scale
                self._field(f, plan, name, dtype, desc, vector=False)
            for name, (dtype, desc) in VECTOR_FIELDS.items():
                self._field(f, plan, name, dtype, desc, vector=True)
            if plan.discrete:
                f["lam"][...] = plan.lam_grid()
            done = f.create_dataset("done", shape=plan.shape, dtype=np.uint8, fillvalue=0)
            done.attrs["description"] = "1 where the point has been computed and written"
            session = f.create_dataset("session", shape=plan.shape, dtype=np.int16, fillvalue=0)
            session.attrs["description"] = "the run (1, 2, ...) of the sweep that computed the point, 0: none"
            for ds in (done, session):
                for axis, dim in enumerate(plan.dims):
                    ds.dims[axis].attach_scale(f[dim])
            if plan.problem is not None:
                g = f.create_group("problem")
                for name in ("X", "y", "X_test", "y_test"):
                    g.create_dataset(name, data=getattr(plan.problem, name))
                if plan.problem.theta_star is not None:
                    g.create_dataset("theta_star", data=plan.problem.theta_star)
                g.attrs["params"] = json.dumps(to_jsonable(plan.problem.params))
        os.replace(tmp, self.path)

    @staticmethod
    def _field(f, plan, name, dtype, desc, vector):
        shape = plan.shape + ((plan.d,) if vector else ())
        kw = {"fillvalue": np.nan} if np.issubdtype(dtype, np.floating) else {}
        ds = f.create_dataset(name, shape=shape, dtype=dtype, **kw)
        ds.attrs["description"] = desc
        for axis, dim in enumerate(plan.dims):
            ds.dims[axis].attach_scale(f[dim])
        if vector:
            ds.dims[len(plan.dims)].attach_scale(f["coord"])

    # -- reading -------------------------------------------------------------------------------------
    def read_config(self):
        try:
            with h5py.File(self.path, "r") as f:
                if attr_str(f.attrs.get("kind", "")) != "sweep":
                    raise StoreError(f"{self.path} is not a sweep store (kind {f.attrs.get('kind')!r})")
                config = json.loads(attr_str(f.attrs["config"]))
                config["sessions"] = int(f.attrs.get("sessions", 0))
                problem = None
                if "problem" in f:
                    g = f["problem"]
                    problem = Problem(g["X"][...], g["y"][...],
                                      g["X_test"][...] if g["X_test"].size else None,
                                      g["y_test"][...] if g["y_test"].size else None,
                                      theta_star=g["theta_star"][...] if "theta_star" in g else None,
                                      params=json.loads(attr_str(g.attrs.get("params", "{}"))))
                return config, problem
        except OSError as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreCorruptError(f"sweep store {self.path} cannot be read: {exc}") from exc

    def read(self, plan):
        with h5py.File(self.path, "r") as f:
            data = {}
            for name in FIELDS:
                if name == "lam" and not plan.discrete:
                    data[name] = np.broadcast_to(f["lam"][...], plan.shape).copy()
                else:
                    data[name] = f[name][...]
            done = f["done"][...].astype(bool)
            session = f["session"][...]
            config = json.loads(attr_str(f.attrs["config"]))
            config["sessions"] = int(f.attrs.get("sessions", 0))
        return data, done, session, config

    # -- writing -------------------------------------------------------------------------------------
    def start_session(self):
        with h5py.File(self.path, "r+") as f:
            n = int(f.attrs.get("sessions", 0)) + 1
            f.attrs["sessions"] = n
        return n

    def write_points(self, plan, points, results, session):
        """Write finished points; the done mask is written last (a torn write leaves them not done)."""
        idx = tuple(np.array(ix) for ix in np.unravel_index(np.asarray(points), plan.shape))
        with signals_held(), h5py.File(self.path, "r+") as f:
            for name in FIELDS:
                if name == "lam":
                    continue
                ds = f[name]
                arr = ds[...]
                values = [res.get(name, np.nan) for res in results]
                arr[idx] = np.asarray(values, dtype=arr.dtype)
                ds[...] = arr
            sess = f["session"][...]
            sess[idx] = session
            f["session"][...] = sess
            done = f["done"][...]
            done[idx] = 1
            f["done"][...] = done
            f.flush()


def lock(path):
    """The writer lock of a sweep store (refuses a second writer)."""
    return WriterLock.acquire(path, "writing a sweep")


# ---------------------------------------------------------------------------------------------------
# Driver
