"""The files next to a store that its writer owns: the side checkpoints ``.ckpt``, ``.ckpt.prev`` and the temporaries
of writers that died (:func:`.files.side_paths`). Only the holder of the store's writer lock removes them (the check
:func:`require_own_checkpoints` only reads), and only what this package wrote is removed: a file of a checkpoint's
name that is not one (:func:`.files.written_as_checkpoint` tells the package's own, damaged ones too) refuses a new
store and a resume, by name, and is left as it is."""

import contextlib
import os

from .files import StoreExistsError, side_paths, written_as_checkpoint


def clear_for_new_store(path):
    """The store at ``path`` and its side checkpoints, before a new store is written there (by the holder of its lock,
    after the overwrite checks). A ``.ckpt`` or ``.ckpt.prev`` next to it that is not a checkpoint this package
    wrote (a user's file of that name: these were deleted unread) refuses the new store, by name, and is left."""
    checkpoints = require_own_checkpoints(path)
    for p in (path, *checkpoints):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
    remove_temporaries(path)


def require_own_checkpoints(path):
    """The side checkpoints next to the store at ``path`` (those that exist), after checking that each is one this
    package wrote, intact or damaged; raise :class:`StoreExistsError`, naming the first that is not, otherwise. A new
    store and a resume both replace or remove them; a resume falls back from a damaged one to the next valid one."""
    sides = side_paths(path)
    checkpoints = [p for p in (sides["checkpoint"], sides["previous"]) if os.path.lexists(p)]
    for side in checkpoints:
        if _own_checkpoint(side):
            continue
        if os.path.islink(side) or not os.path.isfile(side):
            what = "a symbolic link" if os.path.islink(side) else "not a regular file"
        else:
            what = "not a checkpoint dlnmomentum wrote"
        raise StoreExistsError(f"{side} is in the way of store {path}: it is {what}. The package deletes only the "
                               f"checkpoints it wrote; move or delete it yourself, then run again")
    return checkpoints


def remove_checkpoints(path):
    """The side checkpoints of a finished store, ``.ckpt`` and ``.ckpt.prev`` (only the lock holder calls this): a
    finished run is the one file. A file of their names that the package did not write (put there while the run
    went on) is left, and the next resume names it."""
    sides = side_paths(path)
    for name in ("checkpoint", "previous"):
        side = sides[name]
        with contextlib.suppress(FileNotFoundError):
            if _own_checkpoint(side):
                os.unlink(side)


def _own_checkpoint(side):
    """Whether ``side`` is a regular file (not a link to one) that this package wrote as a checkpoint."""
    return os.path.isfile(side) and not os.path.islink(side) and written_as_checkpoint(side)


def remove_temporaries(path):
    """Temporary files of writers that died (only the lock holder calls this)."""
    directory, base = os.path.split(os.path.abspath(path))
    prefixes = tuple(base + suffix for suffix in (".ckpt.tmp", ".rebuild", ".creating"))
    for name in os.listdir(directory):
        if name.startswith(prefixes) and (name.endswith(".tmp") or ".ckpt.tmp" in name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
