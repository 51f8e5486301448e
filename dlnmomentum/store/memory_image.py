"""Stores built in memory and written to disk in one write: a full disk leaves nothing half-made.

HDF5 then never holds a file it cannot flush (a full disk while a store was created used to leave it so, and the
interpreter crashed when HDF5 closed it at exit). Run, sweep, network-sweep and figure stores are created this way,
and :mod:`.resume` rebuilds a damaged store so.
"""

import contextlib
import io
import os
import weakref

import h5py

#: The buffer each file of :func:`memory_h5` is built in (by the file: h5py's File takes no attributes of ours).
_MEMORY_BUFFERS = weakref.WeakKeyDictionary()


def memory_h5(name):
    """A new HDF5 file built in memory (``libver="latest"``), for :func:`write_h5_image` to put on disk.

    HDF5 then never holds a file it cannot flush: a full disk while a store is created used to leave it
    so, and the interpreter crashed when HDF5 closed it at exit. The file lives in a ``BytesIO`` (h5py's
    file-object driver), which :func:`write_h5_image` writes without copying it: HDF5's own in-memory driver
    hands its image out only as a copy, so a store was held twice while it was written (a sweep store of
    4.5e5 points: 1.4 GB of its sweep's 1.5 GB peak). ``name`` names the file in messages only.
    """
    buffer = io.BytesIO()
    f = h5py.File(buffer, "w", libver="latest")
    _MEMORY_BUFFERS[f] = buffer
    return f


def write_h5_image(f, path):
    """Write the in-memory file ``f`` (:func:`memory_h5`) to ``path`` (one write, fsync) and close it; returns
    the size.

    A full disk is a plain ``OSError`` of that write, and ``path`` is removed.
    """
    buffer = _MEMORY_BUFFERS.pop(f)
    f.close()
    image = buffer.getbuffer()  # (a view of the buffer: no copy)
    try:
        with open(path, "wb") as fh:
            fh.write(image)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise
    finally:
        size = len(image)
        image.release()
    return size
