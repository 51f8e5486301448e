"""The errors of the store layer: every one an ``OSError`` whose message names the file; and :func:`command`, the
commands their messages suggest."""

import os
import shlex


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


def command(*words):
    """The command line ``dlnm WORDS...`` that a message suggests, each word shell-quoted where it needs it
    (:func:`shell_word`): a path with a space or a quote, copied from the message, runs as it reads. Placeholders
    (``ARCHITECTURE``, ``NAME``, ``...``) need no quoting and are left as they are. The one builder of such commands:
    messages put it between backticks."""
    return " ".join(["dlnm", *map(shell_word, words)])


def shell_word(word):
    """``word`` (a path) as one word of a POSIX shell command line: :func:`shlex.quote` (quoted only where needed)."""
    return shlex.quote(os.fspath(word))
