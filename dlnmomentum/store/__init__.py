"""HDF5 stores: run files and sweep files behind one I/O layer.

* :mod:`.errors` — :class:`StoreError` and its kinds, and the ``dlnm`` commands that messages suggest;
* :mod:`.files` — the I/O layer: stable type names, checkpoint files, the writer lock, fsync, opening files so
  that readers never block writers, busy/damaged read errors, guarded text (CRC-32 of the strings that say what
  a store means); with :mod:`.memory_image` (stores built in memory and written in one write),
  :mod:`.lockfile` (what a writer lock file says), :mod:`.superblock` (the HDF5 superblock read and repaired
  without HDF5), :mod:`.global_heap` (HDF5's global heap collections walked before HDF5 opens a file) and
  :mod:`.handles` (this process's own open handles on a store);
* :mod:`.format` — the run-store layout (observables, ``/final``, ``/problem``; ``docs/store-format.md``), with
  :mod:`.final` (the result fields in ``/final``) and :mod:`.integrity` (verifying stored chunks);
* :mod:`.writer` — streaming a run into a store (the driver's sink), :func:`run_with_store`; :mod:`.rows_left`
  — the command line's stored runs, whose rows stay in the store;
* :mod:`.resume` — continuing a stored run bit for bit;
* :mod:`.read` — :func:`open_store`, the :class:`Store` reader and ``dlnm inspect`` text; :mod:`.observable` —
  what it hands out besides results (:class:`Observable`, the run description shown by its lengths);
* :mod:`.sweep_format` — the sweep-store layout (fields per grid point, ``done`` mask); :mod:`.network_sweep` —
  the network sweep-store layout;
* :mod:`.kinds` — which kind of store a path holds, and the reader and command for each.

A store wraps the driver as a sink: run kinds never import this package; the API layer
(:mod:`dlnmomentum.api`) hands a run either to the driver or to :func:`run_with_store`.
"""

from .files import StoreBusyError, StoreCorruptError, StoreError, StoreExistsError, StoreLockedError
from .observable import Observable
from .read import Store, open_store
from .resume import resume
from .writer import run_with_store

__all__ = ["Observable", "Store", "StoreBusyError", "StoreCorruptError", "StoreError", "StoreExistsError",
           "StoreLockedError", "open_store", "resume", "run_with_store"]
