"""Performance: the cost of streaming a run to an HDF5 store.

Target: a full-batch MGD run (n=20, d=30, 10⁶ steps) recording a log-spaced schedule of
~1000 rows (763 distinct steps) with checkpoints every 10 s costs at most 10% more than the
same run without a store. Stored and plain runs are interleaved and the minimum of each is
compared (other processes on a 2-core machine add noise; the store's worker thread needs
the second core). Also reported: the file size per recorded row, the cost of a checkpoint
and the streaming throughput of a dense record.

Run: ``python -m pytest benchmarks/bench_store.py --benchmark-only -s``
"""

import os
import time

import numpy as np
import pytest

import dlnmomentum as dm

STEPS = 1_000_000
TARGET_OVERHEAD = 0.10
ROUNDS = 9


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, seed=0)


def _observable_bytes(path):
    """Bytes on disk of the recorded rows (chunks of every time-extendable dataset)."""
    import h5py

    with h5py.File(path, "r") as f:
        obs = f["observables"]
        keys = ["step", "time"] + [f"{k}/value" for k in obs if isinstance(obs[k], h5py.Group)]
        return sum(obs[k].id.get_storage_size() for k in keys)


def _interleaved(plain, stored, rounds=ROUNDS):
    """Minimum wall time of each of two callables, run alternately."""
    t_plain, t_stored = [], []
    for _ in range(rounds):
        t = time.perf_counter()
        plain()
        t_plain.append(time.perf_counter() - t)
        t = time.perf_counter()
        stored()
        t_stored.append(time.perf_counter() - t)
    return min(t_plain), min(t_stored), float(np.median(t_stored) / np.median(t_plain))


def test_store_overhead_million_steps(benchmark, problem, machine, tmp_path):
    path = tmp_path / "run.h5"
    record = dm.Record(log=1000)

    def plain():
        return dm.mgd(problem, 0.02, 0.7, steps=STEPS, record=record)

    def stored():
        return dm.mgd(problem, 0.02, 0.7, steps=STEPS, record=record, store=path, overwrite=True,
                      checkpoint_every=10.0)

    plain(), stored()  # warm: compiled kernels, HDF5
    t_plain, t_stored, median_ratio = _interleaved(plain, stored)
    result = benchmark.pedantic(stored, rounds=3, iterations=1)
    rows = len(result.trajectory)
    size = os.path.getsize(path)
    rows_bytes = _observable_bytes(path)
    overhead = t_stored / t_plain - 1.0
    benchmark.extra_info.update(machine=machine, plain_seconds=t_plain, stored_seconds=t_stored,
                                overhead=overhead, median_overhead=median_ratio - 1.0, rows=rows,
                                file_bytes=size, file_bytes_per_row=size / rows,
                                observable_bytes_per_row=rows_bytes / rows)
    print(f"\nMGD 1e6 steps, {rows} log-spaced rows, checkpoints every 10 s: plain {t_plain * 1e3:.0f} ms, "
          f"stored {t_stored * 1e3:.0f} ms, overhead {overhead:+.1%} (median {median_ratio - 1:+.1%}); "
          f"file {size / 1024:.0f} KiB = {size / rows:.0f} B/row, of which recorded rows "
          f"{rows_bytes / rows:.0f} B/row ({(4 * 30 + 4) * 8} B/row raw)  [{machine}]")
    assert overhead <= TARGET_OVERHEAD


def test_store_checkpoint_cost(benchmark, problem, machine, tmp_path):
    """The same run with a checkpoint every 20 ms of wall clock (flush + 2 fsyncs + atomic rename)."""
    path = tmp_path / "run.h5"
    record = dm.Record(log=1000)
    marks = []

    def stored(every):
        from dlnmomentum.store import writer as store

        store._TEST_HOOK = lambda point: marks.append(point) if point == "checkpoint:done" else None
        try:
            return dm.mgd(problem, 0.02, 0.7, steps=STEPS, record=record, store=path, overwrite=True,
                          checkpoint_every=every)
        finally:
            store._TEST_HOOK = None

    stored(10.0), stored(0.02)
    marks.clear()
    t_rare, t_often, _ = _interleaved(lambda: stored(10.0), lambda: stored(0.02), rounds=5)
    n = len(marks) / 5
    benchmark.pedantic(lambda: stored(0.02), rounds=1, iterations=1)
    per = (t_often - t_rare) / max(n, 1)
    benchmark.extra_info.update(machine=machine, checkpoints_per_run=n, seconds_per_checkpoint=per)
    print(f"\n~{n:.0f} checkpoints per run: {t_often * 1e3:.0f} ms vs {t_rare * 1e3:.0f} ms, "
          f"{per * 1e3:.2f} ms of run time per checkpoint (written by the worker thread)  [{machine}]")


def test_store_dense_record_throughput(benchmark, problem, machine, tmp_path):
    """Every 10th step of 10⁶ recorded (10⁵ rows, 100 MB raw): streaming rate and memory bound."""
    path = tmp_path / "dense.h5"
    record = dm.Record(every=10)

    def plain():
        return dm.mgd(problem, 0.02, 0.7, steps=STEPS, record=record)

    def stored():
        return dm.mgd(problem, 0.02, 0.7, steps=STEPS, record=record, store=path, overwrite=True)

    t_plain, t_stored, _ = _interleaved(plain, stored, rounds=3)
    benchmark.pedantic(stored, rounds=1, iterations=1)
    rows = STEPS // 10 + 1
    size = _observable_bytes(path)
    raw = rows * (4 * 30 + 4) * 8
    benchmark.extra_info.update(machine=machine, plain_seconds=t_plain, stored_seconds=t_stored, rows=rows,
                                file_bytes=size, bytes_per_row=size / rows, raw_mb_per_s=raw / t_stored / 1e6)
    print(f"\ndense record ({rows} rows, {raw / 1e6:.0f} MB raw): plain {t_plain:.2f} s, "
          f"stored {t_stored:.2f} s; "
          f"rows on disk {size / 1e6:.1f} MB = {size / rows:.0f} B/row; {raw / t_stored / 1e6:.0f} MB/s  "
          f"[{machine}]")
