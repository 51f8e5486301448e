"""The errors of the store layer: every one an ``OSError`` whose message names the file."""


class StoreError(OSError):
    """A store cannot be created, opened, resumed or read; the message names the file."""


class StoreExistsError(StoreError, FileExistsError):
    """The store file exists and ``overwrite`` was not given."""


class StoreLockedError(StoreError):
    """Another live process is writing the store."""


class StoreCorruptError(StoreError):
    """The file is not a readable store (truncated, garbage, or damaged beyond recovery)."""


class StoreBusyError(StoreError):
    """A writer is changing the file at this moment (creating, finalising, resuming it, writing a wave of a
    sweep), or another program holds an HDF5 lock on it: nothing is wrong with it, try again shortly."""
