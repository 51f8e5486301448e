"""Who else has a store open: HDF5 handles of this process (a user's ``h5py.File``, an xarray dataset), HDF5 file
locks of other processes; and what a sweep stopped by one of them says.

Used by :mod:`.files` to tell a busy store from a damaged one (issue 23, B6/B7): nothing here imports the rest
of the package but its errors module.
"""

import os

import h5py

from .errors import command


def open_handles(path):
    """The HDF5 handles of this process open on the file at ``path``, in words ('' when none)."""
    try:
        ids = h5py.h5f.get_obj_ids(types=h5py.h5f.OBJ_FILE)
    except Exception:  # noqa: BLE001 - only a description
        return ""
    modes = []
    for fid in ids:
        try:
            if os.path.samefile(fid.name.decode("utf-8", "replace"), path):
                modes.append("'r+'" if fid.get_intent() & h5py.h5f.ACC_RDWR else "'r'")
        except (OSError, ValueError):
            continue
    if not modes:
        return ""
    return (f"{len(modes)} other HDF5 handle{'s' if len(modes) > 1 else ''} (h5py.File in mode "
            f"{', '.join(sorted(set(modes)))}; xarray.open_dataset and h5netcdf hold one too)")


def locked_by_another_process(path):
    """True when another process holds HDF5's file lock (``flock``) on ``path``: a live program has it open.

    A process that died holds no lock (the system releases it), so a file whose superblock says "open for
    writing" but that nobody locks was left so by a writer that died.
    """
    try:
        import fcntl
    except ImportError:  # no flock (Windows): nothing to tell
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # (releases the probe's own lock)
    return False


def sweep_stopped(exc, path, done, network=False):
    """The :class:`~.files.StoreBusyError` ``exc`` that stopped a sweep writing to ``path`` (another program holds an
    HDF5 lock on the store), with what the store keeps (``done``: the mask of points in it) and how to go on."""
    how = (f"`{command('network', 'ARCHITECTURE', '--store', path, '--resume')}`" if network else
           f"`{command('sweep', '--store', path, '--resume')}`")
    return type(exc)(f"{exc}; the sweep stopped with {int(done.sum())}/{done.size} points in the store {path}: "
                     f"once the other program has closed it, continue with {how} (dlnmomentum.resume_sweep)")
