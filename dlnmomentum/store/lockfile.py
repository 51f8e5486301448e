"""What the writer lock file ``<store>.lock`` of a store says: the record of its writer (pid, host, start time), or what
is wrong with it (a directory, unreadable, other content); whether that writer is alive. Reads only: taking, removing
and releasing the lock is :class:`.files.WriterLock`'s (see ``docs/store-format.md``)."""

import json
import math
import os
import socket
import time

#: Seconds an empty lock file is taken for one being created: a writer creates it (O_EXCL), then writes its record at
#: once; an older empty one was left by a writer that died in between, and is taken over.
LOCK_CREATION_WAIT = 10.0


def describe_writer(info):
    """``process PID on HOST since ... (purpose)``: what a lock record says of its writer (fields it lacks left out)."""
    text = f"process {info['pid']} on {info['host']}"
    if info.get("since"):
        text += f" since {info['since']}"
    return text + f" ({info.get('purpose') or 'writing'})"


def lock_record(lock_path):
    """``(record, None)`` for a lock file holding a writer record (a JSON object with an integer pid > 0 and a host),
    else ``(None, problem)``: ``"missing"``, ``"empty"`` (being created, or its writer died before writing it), or
    what is wrong with it as the rest of a sentence ("is a directory, ..."). Never raises."""
    try:
        with open(lock_path, "rb") as fh:
            data = fh.read(1 << 16)
    except FileNotFoundError:
        return None, "missing"
    except IsADirectoryError:
        return None, "is a directory, not a lock file"
    except OSError as exc:  # (a lock of another user's writer made under umask 077 reads so)
        return None, f"cannot be read ({exc.strerror or exc})"
    if not data:
        return None, "empty"
    try:
        info = json.loads(data.decode("utf-8"))
    except ValueError:  # (UnicodeDecodeError is one)
        info = None
    pid = info.get("pid") if isinstance(info, dict) else None
    if type(pid) is not int or pid <= 0 or not isinstance(info.get("host"), str):  # (os.kill(0 or -1) is a group)
        return None, (f"does not hold a writer record of dlnmomentum (a JSON object naming the writer's pid and "
                      f"host; it has {len(data)} bytes of other content)")
    return info, None


def read_lock(lock_path):
    """The writer record in the lock file ``lock_path``, or None (no lock file, or no record: :func:`lock_record`)."""
    return lock_record(lock_path)[0]


def lock_age(lock_path):
    try:
        return time.time() - os.path.getmtime(lock_path)
    except OSError:
        return math.inf


def pid_alive(pid):
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def process_start(pid):
    """When process ``pid`` started (clock ticks after boot: field 22 of Linux's ``/proc/<pid>/stat``), or None where
    that cannot be read. With the pid it names one process: a pid the system gave to another process since is not
    the lock's writer."""
    try:
        with open(f"/proc/{int(pid)}/stat", "rb") as fh:
            data = fh.read()
        return int(data[data.rindex(b")") + 2:].split()[19])  # (fields after the command name start at field 3)
    except (OSError, ValueError, IndexError):
        return None


def lock_is_stale(lock_path, info):
    """True when the lock's process is gone (same host; a live process that got its pid since is not it), or the
    lock file (``info`` None: no record in it) is empty and older than :data:`LOCK_CREATION_WAIT`."""
    if info is None:
        return lock_age(lock_path) > LOCK_CREATION_WAIT
    if info.get("host") != socket.gethostname():
        return False
    pid = info["pid"]
    if not pid_alive(pid):
        return True
    started = info.get("process_start")
    now = process_start(pid) if started is not None else None
    return now is not None and now != started  # (a writer killed, its pid reused: the store is not running)
