"""The files next to a store that its writer owns: the side checkpoints ``.ckpt``, ``.ckpt.prev`` and the temporaries
of writers that died (:func:`.files.side_paths`). Only the holder of the store's writer lock calls these, and only
what this package wrote is removed: a file of a checkpoint's name that is not one refuses a new store, by name."""

import contextlib
import os

from .files import StoreCorruptError, StoreExistsError, read_checkpoint_file, side_paths


def clear_for_new_store(path):
    """The store at ``path`` and its side checkpoints, before a new store is written there (by the holder of its lock,
    after the overwrite checks). A ``.ckpt`` or ``.ckpt.prev`` next to it that is not a checkpoint this package
    wrote (a user's file of that name: these were deleted unread) refuses the new store, by name, and is left."""
    sides = side_paths(path)
    checkpoints = [p for p in (sides["checkpoint"], sides["previous"]) if os.path.lexists(p)]
    for p in checkpoints:
        _require_own_checkpoint(p, path)
    for p in (path, *checkpoints):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)
    remove_temporaries(path)


def _require_own_checkpoint(side, path):
    """Raise :class:`StoreExistsError` unless ``side`` is a regular file holding a checkpoint this package wrote."""
    if os.path.islink(side) or not os.path.isfile(side):
        what = "a symbolic link" if os.path.islink(side) else "not a regular file"
    else:
        try:
            read_checkpoint_file(side)
            return
        except StoreCorruptError:
            what = "not a checkpoint dlnmomentum wrote (or a damaged one)"
    raise StoreExistsError(f"{side} is in the way of store {path}: it is {what}. The package deletes only the "
                           f"checkpoints it wrote; move or delete it yourself, then run again")


def remove_checkpoints(path):
    """The side checkpoints of a finished store, ``.ckpt`` and ``.ckpt.prev`` (only the lock holder calls this): a
    finished run is the one file."""
    sides = side_paths(path)
    for name in ("checkpoint", "previous"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sides[name])


def remove_temporaries(path):
    """Temporary files of writers that died (only the lock holder calls this)."""
    directory, base = os.path.split(os.path.abspath(path))
    prefixes = tuple(base + suffix for suffix in (".ckpt.tmp", ".rebuild", ".creating"))
    for name in os.listdir(directory):
        if name.startswith(prefixes) and (name.endswith(".tmp") or ".ckpt.tmp" in name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(directory, name))
