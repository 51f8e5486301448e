"""Keeping the in-tree Numba cache of the kernels consistent with their sources.

Numba keys a cached function by the stamp (modification time and size) of its own
file only, but the kernels compile each other's functions into themselves
(``flow.py`` the gradients of ``mgd.py``, ``flow_sweep.py`` the RK4 passes of
``flow.py``, the stochastic kernels the generator of ``rng.py``, every kernel
``config.fma``), and the constants of ``layout.py`` and ``status.py`` are frozen into
the machine code of every kernel that reads them. After an edit of one module, the
cached code of the others would still load and silently differ from the source.
:func:`drop_stale_caches` closes that gap; :mod:`dlnmomentum.kernels` calls it when it
is imported.

Numba caches the kernels in the in-tree ``__pycache__`` only where no ``NUMBA_CACHE_DIR`` is
set and that directory is writable; otherwise in ``NUMBA_CACHE_DIR`` or the user-wide cache
directory (a read-only install), under a subdirectory named after the kernels' directory. The
same gap is there, so the digest guards whichever of these directories Numba uses
(:func:`numba_cache_dir`).
"""

import hashlib
import os
import tempfile

#: Name of the stamp file holding the digest of the kernel sources (in their Numba cache directory, numba_cache_dir).
SOURCES_STAMP = "kernels-sources.sha256"


def cache_subpath(here):
    """The subdirectory of ``NUMBA_CACHE_DIR`` or of the user-wide cache that Numba caches the modules of the
    directory ``here`` in (``numba.core.caching``'s ``get_suitable_cache_subpath``: the directory's name and the
    SHA-1 of its absolute path, not resolved through symlinks)."""
    path = os.path.abspath(here)
    return "_".join([os.path.basename(path), hashlib.sha1(path.encode()).hexdigest()])


def numba_cache_dir(here):
    """The directory Numba caches the functions of the modules in ``here`` in, found as Numba finds it: the first
    of ``NUMBA_CACHE_DIR``/:func:`cache_subpath`, ``here/__pycache__`` and the user-wide cache/:func:`cache_subpath`
    that exists or can be made and takes a new file; None if none does (Numba then does not cache them)."""
    from numba.core import config
    from numba.misc.appdirs import AppDirs

    candidates = [os.path.join(here, "__pycache__"),
                  os.path.join(AppDirs(appname="numba", appauthor=False).user_cache_dir, cache_subpath(here))]
    if config.CACHE_DIR:
        candidates.insert(0, os.path.join(config.CACHE_DIR, cache_subpath(here)))
    for path in candidates:
        try:
            os.makedirs(path, exist_ok=True)
            tempfile.TemporaryFile(dir=path).close()
        except OSError:
            continue
        return path
    return None


def drop_stale_caches(here=None):
    """Empty the Numba cache of the kernel modules when any of their sources changed.

    A digest of every ``*.py`` file in ``here`` (default: the kernels' directory),
    kept next to the cache (the directory :func:`numba_cache_dir` finds, as Numba does:
    ``__pycache__``, or under ``NUMBA_CACHE_DIR`` or the user-wide cache directory) in
    ``SOURCES_STAMP``, detects any edit; on a mismatch every ``.nbi``/``.nbc`` entry
    goes and the new digest is written. Returns True if the cache was dropped. Any I/O
    error (no writable cache directory, another process dropping the same entries at
    the same moment: it writes the stamp) is left alone (returns False).
    """
    here = os.path.dirname(os.path.abspath(__file__)) if here is None else here
    cache = numba_cache_dir(here)
    if cache is None:
        return False
    try:
        digest = hashlib.sha256()
        for name in sorted(os.listdir(here)):
            if name.endswith(".py"):
                with open(os.path.join(here, name), "rb") as f:
                    digest.update(name.encode() + b"\0" + f.read())
        stamp = os.path.join(cache, SOURCES_STAMP)
        try:
            with open(stamp) as f:
                if f.read().strip() == digest.hexdigest():
                    return False
        except OSError:
            pass
        if os.path.isdir(cache):
            for name in os.listdir(cache):
                if name.endswith((".nbi", ".nbc")):
                    os.remove(os.path.join(cache, name))
        os.makedirs(cache, exist_ok=True)
        tmp = f"{stamp}.{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(digest.hexdigest())
        os.replace(tmp, stamp)
        return True
    except OSError:
        return False
