"""The writer lock ``<store>.lock`` when it is not a plain lock of a live or dead writer, and the second writer of a
store (probe of 2026-11-27).

Before: a directory at the lock path, an unreadable lock file or one with other content was "open for writing by
another process (lock being created)" for 10 s, then renamed away and deleted (a user's directory or file, or a live
writer's lock the process could not read); a JSON list was an ``AttributeError``, ``{"pid": "abc"}`` a live writer
"process abc" for ever; a stale lock that could not be removed was a raw ``PermissionError``; a stale lock replaced
by a new writer's between the check and the removal was deleted (two writers). A second writer of an existing store
that a live process was writing was told the store "already exists" (pass overwrite=True).
"""

import json
import os
import socket
import subprocess
import sys

import pytest

import dlnmomentum as dm
from dlnmomentum.store import files, lockfile
from dlnmomentum.store.files import StoreExistsError, StoreLockedError, WriterLock, lock_holder

SMALL = dict(n=8, d=13, s=3, n_test=50)
OLD = (0, 0)  # an mtime long past: what was judged by its age is judged old


def _lock(path):
    return str(path) + ".lock"


def _refused(path, what):
    """WriterLock.acquire of ``path`` refuses with a StoreError (not a lock of a live writer) naming the lock file."""
    with pytest.raises(dm.StoreError) as info:
        lock = WriterLock.acquire(str(path), "writing a mgd run")
        lock.release()
    assert not isinstance(info.value, StoreLockedError), info.value
    message = str(info.value)
    assert _lock(path) in message and what in message and "remove" in message, message
    return message


@pytest.mark.parametrize("age", ["new", "old"])
def test_a_directory_at_the_lock_path_is_named_and_left(tmp_path, age):
    path = tmp_path / "r.h5"
    os.mkdir(_lock(path))
    (tmp_path / "r.h5.lock" / "mine.txt").write_text("a user's file")
    if age == "old":
        os.utime(_lock(path), OLD)
    _refused(path, "is a directory")
    with pytest.raises(dm.StoreError, match="is a directory"):
        dm.mgd(dm.sparse_regression(**SMALL, seed=0), 0.01, 0.5, steps=10, store=str(path))
    assert (tmp_path / "r.h5.lock" / "mine.txt").read_text() == "a user's file"
    assert sorted(os.listdir(tmp_path)) == ["r.h5.lock"]
    assert lock_holder(str(path)) is None  # (readers: no writer of this package holds it)


CONTENTS = {"text": b"garbage{{", "list": b"[1, 2]", "binary": b"\xff\xfe\x00garbage",
            "pid-string": json.dumps({"pid": "abc", "host": socket.gethostname()}).encode(),
            "no-pid": json.dumps({"host": socket.gethostname()}).encode(),
            "pid-zero": json.dumps({"pid": 0, "host": socket.gethostname()}).encode(),
            "pid-bool": json.dumps({"pid": True, "host": socket.gethostname()}).encode()}


@pytest.mark.parametrize("age", ["new", "old"])
@pytest.mark.parametrize("content", sorted(CONTENTS))
def test_a_lock_file_with_other_content_is_named_and_left(tmp_path, content, age):
    path = tmp_path / "r.h5"
    with open(_lock(path), "wb") as fh:
        fh.write(CONTENTS[content])
    if age == "old":
        os.utime(_lock(path), OLD)
    _refused(path, "does not hold a writer record")
    assert open(_lock(path), "rb").read() == CONTENTS[content]  # never removed: it may be anybody's file


@pytest.mark.parametrize("age", ["new", "old"])
def test_an_unreadable_lock_file_is_named_and_left(tmp_path, monkeypatch, age):
    """(A live writer of another user, under umask 077, has such a lock: it was taken over after 10 s.)"""
    path = tmp_path / "r.h5"
    record = json.dumps({"pid": 1, "host": socket.gethostname()})
    with open(_lock(path), "w") as fh:
        fh.write(record)
    os.chmod(_lock(path), 0)
    if age == "old":
        os.utime(_lock(path), OLD)
    if os.geteuid() == 0:  # root reads a mode-000 file: the refusal of open() is made by hand
        real_open = open

        def refusing_open(name, *args, **kw):
            if os.fspath(name) == _lock(path):
                raise PermissionError(13, "Permission denied", name)
            return real_open(name, *args, **kw)

        monkeypatch.setattr(lockfile, "open", refusing_open, raising=False)
    try:
        _refused(path, "cannot be read (Permission denied)")
        assert os.path.exists(_lock(path))
    finally:
        os.chmod(_lock(path), 0o644)
    monkeypatch.undo()
    assert open(_lock(path)).read() == record


def _holder(path):
    """Another process that holds the writer lock of ``path`` until it is killed."""
    child = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom dlnmomentum.store.files import WriterLock\n"
                              "WriterLock.acquire(sys.argv[1], 'resuming')\nprint('held', flush=True)\ntime.sleep(120)",
                              str(path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    return child


def test_a_live_lock_refuses_a_dead_or_empty_old_one_is_taken_over(tmp_path):
    path = tmp_path / "r.h5"
    child = _holder(path)
    try:
        record = open(_lock(path)).read()
        os.utime(_lock(path), OLD)  # (age does not make a live writer's lock stale)
        with pytest.raises(StoreLockedError, match=rf"open for writing by process {child.pid} on .* \(resuming\)"):
            WriterLock.acquire(str(path), "writing a mgd run")
        assert open(_lock(path)).read() == record
    finally:
        child.kill()
        child.wait()
    WriterLock.acquire(str(path), "writing a mgd run").release()  # its process is gone: taken over
    open(_lock(path), "w").close()  # empty: a writer between creating its lock and writing it
    with pytest.raises(StoreLockedError, match="its lock file is being created"):
        WriterLock.acquire(str(path), "writing a mgd run")
    os.utime(_lock(path), OLD)  # ... or one that died there
    WriterLock.acquire(str(path), "writing a mgd run").release()
    assert not os.path.exists(_lock(path))


def test_a_stale_lock_taken_over_by_another_writer_meanwhile_is_put_back(tmp_path, monkeypatch):
    path = tmp_path / "r.h5"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    with open(_lock(path), "w") as fh:
        json.dump({"pid": int(dead.stdout), "host": socket.gethostname()}, fh)
    live = json.dumps({"pid": os.getppid(), "host": socket.gethostname(), "token": "another writer"})
    real_replace = os.replace

    def another_writer_first(src, dst):  # between the staleness check and the rename, another writer took it over
        if os.fspath(src) == _lock(path):
            os.unlink(src)
            with open(src, "w") as fh:
                fh.write(live)
        return real_replace(src, dst)

    monkeypatch.setattr(files.os, "replace", another_writer_first)
    with pytest.raises(StoreLockedError, match=f"process {os.getppid()}"):
        WriterLock.acquire(str(path), "writing a mgd run")
    monkeypatch.undo()
    assert open(_lock(path)).read() == live
    assert sorted(os.listdir(tmp_path)) == ["r.h5.lock"]


def test_a_stale_lock_that_cannot_be_removed_is_named(tmp_path, monkeypatch):
    """(Another user's stale lock in a sticky directory such as /tmp.)"""
    path = tmp_path / "r.h5"
    with open(_lock(path), "w") as fh:
        json.dump({"pid": 2**22 + 12345, "host": socket.gethostname()}, fh)  # (above Linux's pid_max: gone)

    def refused(src, dst):
        raise PermissionError(1, "Operation not permitted", src)

    monkeypatch.setattr(files.os, "replace", refused)
    with pytest.raises(dm.StoreError, match=rf"the lock file {_lock(path)} of store .* was left by process 4206649 "
                                            r"on .*, which is gone, and cannot be removed \(Operation not permitted\)"):
        WriterLock.acquire(str(path), "writing a mgd run")


def test_a_second_writer_is_told_the_store_is_being_written_not_that_it_exists(tmp_path):
    path = tmp_path / "r.h5"
    problem = dm.sparse_regression(**SMALL, seed=0)
    dm.mgd(problem, 0.01, 0.5, steps=10, store=str(path))
    child = _holder(path)  # (a resume of it in another process)
    try:
        for overwrite in (False, True):
            with pytest.raises(StoreLockedError) as info:
                dm.mgd(problem, 0.01, 0.5, steps=10, store=str(path), overwrite=overwrite)
            assert f"is open for writing by process {child.pid}" in str(info.value), str(info.value)
            assert "already exists" not in str(info.value)
    finally:
        child.kill()
        child.wait()
    with pytest.raises(StoreExistsError, match="already exists"):  # once it is not written: what is true then
        dm.mgd(problem, 0.01, 0.5, steps=10, store=str(path))
