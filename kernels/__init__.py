"""Numba kernels of dlnmomentum (installed as ``dlnmomentum.kernels``).

Only ``@njit`` code lives here: arrays and scalars in, arrays filled in place,
an integer status or count out. No I/O, no Python objects. Validation and
conversion happen in the thin Python layer of :mod:`dlnmomentum`.
"""

import hashlib
import os

#: Name of the stamp file (in the in-tree Numba cache directory) holding the digest of the kernel sources.
SOURCES_STAMP = "kernels-sources.sha256"


def drop_stale_caches(here=None):
    """Empty the in-tree Numba cache of these modules when any of their sources changed.

    Numba keys a cached function by the stamp of its own file only, but the kernels compile
    each other's functions into themselves (``flow.py`` and ``sweep.py`` inline the loops of
    ``mgd.py`` and ``config.fma``): after an edit of one module, the cached code of the others
    would still load and silently differ from the source. A digest of all ``*.py`` files here,
    kept next to the cache, detects any edit; on a mismatch every ``.nbi``/``.nbc`` entry goes.
    Read-only installs (Numba then caches elsewhere, by file stamps) are left alone.
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


drop_stale_caches()
