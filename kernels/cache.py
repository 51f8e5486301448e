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
"""

import hashlib
import os

#: Name of the stamp file (in the in-tree Numba cache directory) holding the digest of the kernel sources.
SOURCES_STAMP = "kernels-sources.sha256"


def drop_stale_caches(here=None):
    """Empty the in-tree Numba cache of the kernel modules when any of their sources changed.

    A digest of every ``*.py`` file in ``here`` (default: the kernels' directory),
    kept next to the cache in ``__pycache__/SOURCES_STAMP``, detects any edit; on a
    mismatch every ``.nbi``/``.nbc`` entry goes and the new digest is written. Returns
    True if the cache was dropped. Read-only installs (Numba then caches elsewhere, by
    file stamps) and any other I/O error are left alone (returns False).
    """
    here = os.path.dirname(os.path.abspath(__file__)) if here is None else here
    cache = os.path.join(here, "__pycache__")
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
