"""Run stores with long trajectories: summaries read no recorded rows, readers keep one copy of them.

Before: ``dlnm inspect`` (text and ``--json``) and ``Store.summary()`` built the final result with its whole
trajectory (every recorded row read, then copied: 2 GB of memory for a store of 10⁶ rows at d = 30) only to print
a summary; ``Store.trajectory``, a run that recorded more than the writer keeps in memory, and a live run's
trajectory each held two copies of the rows at their peak (read or concatenated, then copied once more).
"""

import tracemalloc

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.results import new_record_block, trajectory_from_blocks
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
