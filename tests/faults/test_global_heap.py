"""A damaged HDF5 global heap collection (a ``GCOL`` block: the text of string attributes) is an error, not a hang.

Before: a store whose global heap collection had zeroed bytes hung forever inside HDF5 (2.0.0), uninterruptibly
(Ctrl-C did nothing): ``dm.open_store``, ``dm.open_sweep``, ``dlnm inspect``, ``dm.resume``, a sweep's resume.
HDF5 walks a collection's objects, and an object header of index 0 (free space) and size 0 never moves the walk
on. Now the store layer walks every collection the same way before HDF5 opens the file
(``store/global_heap.py``), and such a file is a ``StoreCorruptError`` naming it, the offset, and that resuming
cannot repair it; the same while a live writer holds the store's lock is "busy" (a collection being written).

The damaged reads run in a subprocess with a timeout: before the fix they hang, and the timeout fails the test.
"""

import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest
from store_checks import ROOT

import dlnmomentum as dm
from dlnmomentum.store import global_heap as GH
from dlnmomentum.store.files import WriterLock

ENV = dict(os.environ, PYTHONPATH=ROOT)
#: Seconds a damaged read may take (the fix answers in about one; before it, the read never ends).
TIMEOUT = 30
SMALL = {"n": 8, "d": 13, "s": 3, "n_test": 50}


# -- hand-built collections (the layout of the HDF5 File Format Specification, III.E) -------------------------

def obj(index, data=b"", size=None):
    """One global heap object: index, reference count, reserved, size, then the data padded to a multiple of 8."""
    size = len(data) if size is None else size
    return struct.pack("<HHIQ", index, 1 if index else 0, 0, size) + data + bytes(-len(data) % 8)


def collection(*objects, total=4096):
    body = b"".join(objects)
    assert 16 + len(body) <= total
    return b"GCOL" + b"\x01\0\0\0" + struct.pack("<Q", total) + body + bytes(total - 16 - len(body))


def free(total, used):
    """The free-space object (index 0) of a collection of ``total`` bytes whose header and objects take ``used``."""
    return struct.pack("<HHIQ", 0, 0, 0, total - used)


def test_walks_of_hand_built_collections():
    # full: 255 objects of 0 bytes (16 each) after the 16-byte header fill 4096 bytes exactly
    assert GH.walk(collection(*[obj(i) for i in range(1, 256)])) is None
    # objects of odd lengths (padded to 8), then the free-space object, whose size counts its own header
    objects = obj(1, b"dlnmomentum-run") + obj(2, b"mgd") + obj(3, b"x" * 185)  # 16+16, 16+8, 16+192
    assert len(objects) == 264
    assert GH.walk(collection(objects, free(4096, 16 + 264))) is None
    # the last 8 bytes too few for an object header: free space without one
    filler = obj(1, bytes(4096 - 16 - 16 - 8))
    assert GH.walk(collection(filler)) is None and len(collection(filler)) - 16 - len(filler) == 8
    # an index-0 object of size 0 after two objects (16 + 32 + 24 = byte 72): the walk stands still there
    stuck = collection(obj(1, b"dlnmomentum-run"), obj(2, b"mgd"), struct.pack("<HHIQ", 0, 0, 0, 0))
    at, problem = GH.walk(stuck)
    assert at == 72 and "index 0" in problem and "size 0" in problem
    # zeroed bytes read as object headers are exactly that
    assert GH.walk(collection(obj(1, b"abc")))[0] == 40
    # an object longer than what is left of the collection: HDF5 2.0.0 refuses it itself ("ran off end", no hang),
    # so it is left to HDF5 (freed space HDF5 never reads may hold such bytes)
    assert GH.walk(collection(obj(1, b"abc"), struct.pack("<HHIQ", 2, 1, 0, 5000))) is None


def test_gcol_without_a_whole_collection_header_is_not_a_collection():
    good = collection(obj(1, b"abc"), free(4096, 40))
    junk = [b"GCOL\x02\0\0\0" + struct.pack("<Q", 4096),  # version 2
            b"GCOL\x01\0\x07\0" + struct.pack("<Q", 4096),  # reserved bytes not zero
            b"GCOL\x01\0\0\0" + struct.pack("<Q", 4095),  # smaller than HDF5's smallest collection
            b"GCOL\x01\0\0\0" + struct.pack("<Q", 10**9),  # past the end of the file
            b"GCOL"]
    data = b"".join(junk) + bytes(100) + good
    assert GH.collections(data) == [(len(data) - 4096, 4096)]


def test_an_unchanged_file_is_not_scanned_again(tmp_path, monkeypatch):
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(100) + collection(obj(1, b"abc"), struct.pack("<HHIQ", 0, 0, 0, 0)))
    assert GH.heap_damage(str(path)) is None  # not an HDF5 file (no signature): HDF5 says what it is
    data = bytearray(b"\x89HDF\r\n\x1a\n\x03\x08\x08\x00" + bytes(88)) + collection(
        obj(1, b"abc"), struct.pack("<HHIQ", 0, 0, 0, 0))
    path.write_bytes(bytes(data))
    assert GH.heap_damage(str(path)) == (100, 140, GH.walk(bytes(data[100:]))[1])
    scans = []
    monkeypatch.setattr(GH, "scan", lambda *args: scans.append(1))
    assert GH.heap_damage(str(path))[:2] == (100, 140) and scans == []  # from the cache
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # changed (its time): scanned again
    assert GH.heap_damage(str(path)) is None and scans == [1]


def test_a_collection_is_found_wherever_the_blocks_read_cut_the_file(tmp_path, monkeypatch):
    data = b"\x89HDF\r\n\x1a\n\x03\x08\x08\x00" + bytes(88) + collection(obj(1, b"abc"))  # stuck at byte 140
    path = tmp_path / "f.h5"
    path.write_bytes(data)
    for block in (64, 97, 99, 101, 103, 110, 115, 116, 4096, 1 << 22):  # cuts before, inside, after the header
        monkeypatch.setattr(GH, "BLOCK", block)
        monkeypatch.setattr(GH, "_CACHE", {})
        assert GH.heap_damage(str(path))[:2] == (100, 140), block


# -- stores with a damaged collection -------------------------------------------------------------------------

def second_object_zeroed(src, dst):
    """A copy of ``src`` whose first collection has its second object's header zeroed; returns its offsets."""
    data = bytearray(src.read_bytes())
    heap = data.index(b"GCOL")
    first = heap + 16
    size = struct.unpack_from("<Q", data, first + 8)[0]
    second = first + 16 + (size + 7) // 8 * 8
    data[second:second + 16] = bytes(16)
    dst.write_bytes(bytes(data))
    return heap, second


def in_subprocess(code, path):
    """Run ``code`` (with ``path`` as ``p``) in a fresh process; ``{"type", "message"}`` of what it raised (or
    ``{"type": None}``), and the seconds it took. A hang fails the test by the timeout."""
    program = ("import json, sys\nimport dlnmomentum as dm\nfrom dlnmomentum.store import files\np = sys.argv[1]\n"
               "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) +
               "    print(json.dumps({'type': None}))\n"
               "except Exception as e:\n"
               "    print(json.dumps({'type': type(e).__name__, 'message': str(e)}))\n")
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-c", program, str(path)], capture_output=True, text=True,
                         timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), time.monotonic() - start


def assert_refused(outcome, path, heap, at):
    assert outcome["type"] == "StoreCorruptError", outcome
    message = outcome["message"]
    assert str(path) in message and f"global heap collection at byte {heap}" in message, message
    assert f"at byte {at}" in message and "cannot repair" in message and "resume`" not in message, message


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gcol")
    run, sweep, network = folder / "run.h5", folder / "sweep.h5", folder / "network.h5"
    dm.mgd(dm.sparse_regression(**SMALL, seed=0), 0.01, 0.5, steps=2000, store=str(run), progress=False)
    dm.sweep(SMALL, gammas=[0.01, 0.05], betas=[0.0, 0.5], steps=500, store=str(sweep), progress=False)
    dm.networks_sweep(dm.teacher_student(n_test=20, seed=0), gammas=[0.05], betas=[0.0, 0.5], steps=200,
                      store=str(network), progress=False)
    return {"run": run, "sweep": sweep, "network": network}


def test_the_reported_run_store_is_an_error_within_seconds(stores, tmp_path):
    # the report's damage: 100 bytes zeroed at 100 bytes into the collection (the second half of an object's
    # header, then the next header: index 0, size 0)
    data = bytearray(stores["run"].read_bytes())
    heap = data.index(b"GCOL")
    data[heap + 100:heap + 200] = bytes(100)
    path = tmp_path / "g.h5"
    path.write_bytes(bytes(data))
    stuck = GH.walk(bytes(data[heap:heap + 4096]))[0] + heap
    start = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "dlnmomentum", "inspect", str(path)], capture_output=True,
                         text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert_refused({"type": "StoreCorruptError", "message": out.stderr}, path, heap, stuck)
    assert time.monotonic() - start < TIMEOUT
    for call in ("dm.open_store(p)", "dm.resume(p, progress=False)"):
        outcome, _ = in_subprocess(call, path)
        assert_refused(outcome, path, heap, stuck)


@pytest.mark.parametrize("kind, calls", [
    ("run", ["dm.open_store(p)", "dm.resume(p, progress=False)", "files.open_h5_for_writing(p)"]),
    ("sweep", ["dm.open_sweep(p)", "dm.resume_sweep(p, progress=False)"]),
    ("network", ["dm.open_networks_sweep(p)", "dm.resume_networks_sweep(p, progress=False)"])])
def test_a_zeroed_object_header_is_an_error_naming_the_file_and_offset(stores, tmp_path, kind, calls):
    path = tmp_path / f"{kind}.h5"
    heap, second = second_object_zeroed(stores[kind], path)
    before = path.read_bytes()
    for call in calls:
        outcome, _ = in_subprocess(call, path)
        assert_refused(outcome, path, heap, second)
    assert path.read_bytes() == before  # left as it was


def test_the_sweep_command_line_exits_2(stores, tmp_path):
    path = tmp_path / "sweep.h5"
    heap, second = second_object_zeroed(stores["sweep"], path)
    out = subprocess.run([sys.executable, "-m", "dlnmomentum", "sweep", "--resume", "--no-progress", "--store",
                          str(path)], capture_output=True, text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    assert_refused({"type": "StoreCorruptError", "message": out.stderr}, path, heap, second)


def test_while_a_live_writer_holds_the_lock_it_is_busy(stores, tmp_path):
    path = tmp_path / "run.h5"
    heap, _ = second_object_zeroed(stores["run"], path)
    lock = WriterLock.acquire(str(path), "writing (another process)")  # this process: a live writer
    try:
        outcome, took = in_subprocess("files.open_h5(p, wait=0.5)", path)
    finally:
        lock.release()
    assert outcome["type"] == "StoreBusyError" and str(path) in outcome["message"], outcome
    assert f"global heap collection at byte {heap}" in outcome["message"], outcome
    outcome, _ = in_subprocess("files.open_h5(p, wait=0.5)", path)  # no writer: damaged
    assert outcome["type"] == "StoreCorruptError", outcome


def test_gcol_in_the_numbers_of_a_healthy_store_is_not_refused(tmp_path):
    # test inputs whose float64 bytes spell b"GCOL": alone, and with version 1 and reserved zeros but a size past
    # the end of the file (the bytes of 1.0)
    spelled = [struct.unpack("<d", b"GCOL" + tail)[0] for tail in (b"\x33\x44\x55\x40", b"\x01\0\0\0")]
    problem = dm.sparse_regression(**SMALL, seed=0)
    X_test = np.array(problem.X_test)
    X_test[0, :4] = [spelled[0], 1.5, spelled[1], 1.0]
    path = tmp_path / "numbers.h5"
    dm.mgd(dm.Problem(problem.X, problem.y, X_test, problem.y_test), 0.01, 0.5, steps=500, store=str(path),
           progress=False)
    data = path.read_bytes()
    assert data.count(b"GCOL") > len(GH.collections(data)) >= 1  # the spelled bytes are there, as bytes
    assert GH.heap_damage(str(path)) is None
    out = subprocess.run([sys.executable, "-m", "dlnmomentum", "inspect", str(path)], capture_output=True,
                         text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert np.array_equal(dm.open_store(str(path)).problem.X_test, X_test)
