"""HDF5 stores: run files and sweep files behind one I/O layer.

* :mod:`.files` — the I/O layer: errors, stable type names, checkpoint files, the writer lock,
  durability helpers (fsync, superblock repair), opening files so that readers never block writers;
* :mod:`.format` — the run-store layout (observables, ``/final``, ``/problem``; ``docs/store-format.md``);
* :mod:`.writer` — streaming a run into a store (the driver's sink), :func:`run_with_store`;
* :mod:`.resume` — continuing a stored run bit for bit;
* :mod:`.read` — :func:`open_store`, the :class:`Store` reader and ``dlnm inspect`` text;
* :mod:`.sweep_format` — the sweep-store layout (fields per grid point, ``done`` mask).

A store wraps the driver as a sink: run kinds never import this package; the API layer
(:mod:`dlnmomentum.api`) hands a run either to the driver or to :func:`run_with_store`.
"""

from .files import StoreBusyError, StoreCorruptError, StoreError, StoreExistsError, StoreLockedError
from .read import Observable, Store, open_store
from .resume import resume
from .writer import run_with_store

__all__ = ["Observable", "Store", "StoreBusyError", "StoreCorruptError", "StoreError", "StoreExistsError",
           "StoreLockedError", "open_store", "resume", "run_with_store"]
