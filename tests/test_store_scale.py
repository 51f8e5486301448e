"""Run stores with long trajectories: summaries read no recorded rows, readers keep one copy of them.

Before: ``dlnm inspect`` (text and ``--json``) and ``Store.summary()`` built the final result with its whole
trajectory (every recorded row read, then copied: 2 GB of memory for a store of 10⁶ rows at d = 30) only to print
a summary; ``Store.trajectory``, a run that recorded more than the writer keeps in memory, and a live run's
trajectory each held two copies of the rows at their peak (read or concatenated, then copied once more); every
open of a store (``dm.open_store``, each reader call, ``dlnm inspect``) read the whole file, looking for damaged
HDF5 global heap collections among the bytes of its recorded rows (0.6 s for 10⁶ rows, seconds per GB from disk).
"""

import json
import os
import struct
import subprocess
import sys
import tracemalloc

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.results import new_record_block, trajectory_from_blocks
from dlnmomentum.store import global_heap as GH
from dlnmomentum.store import read as store_read
from dlnmomentum.store import writer as store_writer

D = 30
STEPS = 4000


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=D, s=5, seed=0)


@pytest.fixture(scope="module")
def long_store(tmp_path_factory, problem):
    path = str(tmp_path_factory.mktemp("scale") / "run.h5")
    res = dm.mgd(problem, 0.02, 0.7, steps=STEPS, record=dm.Record(every=1), store=path)
    return path, res


def _trajectory_bytes(traj):
    return sum(np.asarray(getattr(traj, k)).nbytes for k in ("step", "time", "theta", "w_plus", "w_minus", "delta",
                                                             "train_loss", "test_loss"))


def test_inspect_reads_no_recorded_rows(long_store, monkeypatch, capsys):
    path, res = long_store

    def refused(*args, **kwargs):
        raise AssertionError("a summary read the recorded rows")

    monkeypatch.setattr(store_read, "read_series", refused)
    assert main(["inspect", path]) == 0  # (what it imports, once)
    capsys.readouterr()
    tracemalloc.start()
    try:
        assert main(["inspect", path]) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.25 * _trajectory_bytes(res.trajectory), peak  # (its chunks are checked one at a time)
    out = capsys.readouterr().out
    assert f"recorded    : {STEPS + 1} rows" in out and "prediction gap" in out
    assert main(["inspect", path, "--json"]) == 0
    assert '"steps_done": ' + str(res.steps_done) in capsys.readouterr().out
    dm.open_store(path).summary()
    monkeypatch.undo()
    # the result itself still has every row, as the live run recorded them
    stored = dm.open_store(path).result
    assert np.array_equal(stored.trajectory.theta, res.trajectory.theta)
    assert np.array_equal(stored.trajectory.step, np.arange(STEPS + 1))


def test_store_trajectory_holds_one_copy(long_store):
    path, res = long_store
    s = dm.open_store(path)
    tracemalloc.start()
    try:
        traj = s.trajectory
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = _trajectory_bytes(traj)
    assert size > 4 * STEPS * D * 8
    assert peak < 1.4 * size, (peak, size)  # a second copy made it 2x
    for name in ("step", "time", "theta", "w_plus", "w_minus", "delta", "train_loss", "test_loss"):
        got, want = getattr(traj, name), getattr(res.trajectory, name)
        assert np.array_equal(got, want) and got.dtype == want.dtype and not got.flags.writeable
        assert got.flags.c_contiguous


def test_live_trajectory_holds_one_copy():
    rows, d = 20_000, D
    block = new_record_block(rows, d)
    rng = np.random.default_rng(0)
    block["step"][:] = np.arange(rows)
    block["vectors"][:] = rng.standard_normal(block["vectors"].shape)
    block["losses"][:] = rng.standard_normal(block["losses"].shape)
    halves = [(block, rows // 2), ({k: v[rows // 2:] for k, v in block.items()}, rows - rows // 2)]
    tracemalloc.start()
    try:
        traj = trajectory_from_blocks(halves, d, lambda s: np.asarray(s, dtype=np.float64) * 0.5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = _trajectory_bytes(traj)
    assert peak < 1.4 * size, (peak, size)
    assert np.array_equal(traj.theta, block["vectors"][:, 0]) and np.array_equal(traj.step, np.arange(rows))
    assert np.array_equal(traj.time, np.arange(rows) * 0.5) and np.array_equal(traj.test_loss, block["losses"][:, 1])
    assert not traj.theta.flags.writeable
    block["vectors"][:] = 0.0  # the trajectory never aliases the kernel's record block
    assert np.any(traj.theta != 0.0)


def test_writer_result_keeps_the_rows_it_reads_back(problem, tmp_path, monkeypatch):
    """A run that records more than the writer keeps in memory reads its rows back at the end: one copy."""
    monkeypatch.setattr(store_writer, "MAX_COLLECT_BYTES", 0)
    seen = {}
    real = store_writer.read_series

    def spy(*args, **kwargs):
        seen.update(real(*args, **kwargs))
        return seen

    monkeypatch.setattr(store_writer, "read_series", spy)
    res = dm.mgd(problem, 0.02, 0.7, steps=500, record=dm.Record(every=1), store=str(tmp_path / "r.h5"))
    assert res.trajectory.theta is seen["theta"] and res.trajectory.train_loss is seen["train_loss"]
    live = dm.mgd(problem, 0.02, 0.7, steps=500, record=dm.Record(every=1))
    for name in ("step", "time", "theta", "w_plus", "w_minus", "delta", "train_loss", "test_loss"):
        assert np.array_equal(getattr(res.trajectory, name), getattr(live.trajectory, name))


# -- opening: the recorded rows are not read ------------------------------------------------------------------

def test_gaps_between_skipped_ranges():
    assert GH.gaps(100, []) == [(0, 100)]
    assert GH.gaps(100, [(0, 10), (10, 30), (50, 60), (90, 120)]) == [(30, 50), (60, 90)]
    assert GH.gaps(100, [(5, 100)]) == [(0, 5)]


def test_a_collection_between_skipped_ranges_is_found_at_any_block_size(tmp_path, monkeypatch):
    stuck = b"GCOL\x01\0\0\0" + struct.pack("<Q", 4096) + struct.pack("<HHIQ", 0, 0, 0, 0) + bytes(4096 - 32)
    data = b"\x89HDF\r\n\x1a\n\x03\x08\x08\x00" + bytes(88) + b"GCOL" * 50 + stuck + b"GCOL" * 30
    path = tmp_path / "f.h5"
    path.write_bytes(data)
    for block in (64, 97, 1 << 22):
        monkeypatch.setattr(GH, "BLOCK", block)
        monkeypatch.setattr(GH, "_CACHE", {})
        # signatures in the skipped range (chunk bytes) are not looked at; the collection after it is found
        assert GH.heap_damage(str(path), [(100, 300)]) == (300, 316, GH.walk(stuck)[1]), block
        monkeypatch.setattr(GH, "_CACHE", {})
        assert GH.heap_damage(str(path), [(100, 300), (300, 300 + 4096)]) is None  # (a chunk, were it one)


def test_opening_a_large_store_does_not_read_its_rows(long_store, monkeypatch):
    path, res = long_store
    monkeypatch.setattr(GH, "HEAP_SCAN_WHOLE_BYTES", 0, raising=False)  # (counts as large)
    monkeypatch.setattr(GH, "_CACHE", {})
    read = []

    class Counted:
        def __init__(self, *args, **kwargs):
            self.fh = open(*args, **kwargs)  # noqa: SIM115 - closed by __exit__

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def read(self, n=-1):
            out = self.fh.read(n)
            read.append(len(out))
            return out

        def readinto(self, buf):
            n = self.fh.readinto(buf)
            read.append(n)
            return n

    monkeypatch.setattr(GH, "open", Counted, raising=False)
    s = dm.open_store(path)
    assert s.rows == STEPS + 1 and s.state == "complete"
    size = os.path.getsize(path)
    assert read and sum(read) < 0.2 * size, (sum(read), size)  # the whole file before
    assert np.array_equal(s["theta"].value, res.trajectory.theta)
    # an unchanged file is neither scanned nor are its chunks listed again
    listed = []
    monkeypatch.setattr(GH, "chunk_ranges", lambda f: listed.append(1) or ())
    read.clear()
    assert dm.open_store(path).rows == STEPS + 1 and read == [] and listed == []


def test_a_damaged_collection_of_a_large_store_is_still_an_error(long_store, tmp_path):
    path, _ = long_store
    data = bytearray(open(path, "rb").read())
    heap = data.index(b"GCOL")
    first = heap + 16
    second = first + 16 + (struct.unpack_from("<Q", data, first + 8)[0] + 7) // 8 * 8
    data[second:second + 16] = bytes(16)  # index 0, size 0: HDF5 would walk it forever
    damaged = tmp_path / "damaged.h5"
    damaged.write_bytes(bytes(data))
    program = ("import json, sys\nimport dlnmomentum as dm\nfrom dlnmomentum.store import global_heap\n"
               "global_heap.HEAP_SCAN_WHOLE_BYTES = 0\n"
               "try:\n    dm.open_store(sys.argv[1])\n    print(json.dumps(None))\n"
               "except Exception as e:\n    print(json.dumps([type(e).__name__, str(e)]))\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, "-c", program, str(damaged)], capture_output=True, text=True, timeout=60,
                         env=dict(os.environ, PYTHONPATH=root), cwd=root)
    assert out.returncode == 0, out.stderr
    kind, message = json.loads(out.stdout.strip().splitlines()[-1])
    assert kind == "StoreCorruptError" and f"global heap collection at byte {heap}" in message, message
    assert f"at byte {second}" in message


_IMAGE_PEAK = r"""
import resource, sys
import h5py
import numpy as np
from dlnmomentum.store.files import memory_h5, write_h5_image
f = memory_h5(sys.argv[1])
ds = f.create_dataset("x", shape=(12_500_000,), dtype=np.float64)  # 100 MB that do not compress, written in parts
rng = np.random.default_rng(0)
for start in range(0, 12_500_000, 500_000):
    ds[start:start + 500_000] = rng.random(500_000)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
size = write_h5_image(f, sys.argv[1])
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before) / size)
"""


def test_writing_an_in_memory_store_does_not_copy_it(tmp_path):
    # every store is built in memory and then written (a full disk leaves nothing half-made): HDF5's in-memory driver
    # handed its image out only as a copy, so the peak held the store twice (a sweep store of 4.5e5 points: 1.4 GB
    # of its sweep's 1.5 GB peak); the peak now grows by far less than the file while it is written
    out = subprocess.run([sys.executable, "-c", _IMAGE_PEAK, str(tmp_path / "big.h5")], capture_output=True,
                         text=True, timeout=120, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 0.5, out.stdout
    with h5py.File(tmp_path / "big.h5", "r") as f:
        assert f["x"].shape == (12_500_000,) and f["x"][:500_000].tobytes() == np.random.default_rng(0).random(
            500_000).tobytes()
