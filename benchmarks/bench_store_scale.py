"""Performance: run stores as the recorded trajectory grows (10⁴, 10⁵, ... rows of θ, w±, Δ at d = 30).

For each size, MGD (n = 20, d = 30) records every step into a store: the writer's time against the same run without
a store, the file size against the raw rows; then the readers, each timed with its peak of traced memory (NumPy's
arrays are traced) against the raw rows: ``dm.open_store`` (+ ``rows``), ``dlnm inspect`` (text and ``--json``),
``Store.trajectory``, ``Store.observable("theta")``, ``Store.to_xarray()``, a window of 1000 rows through
``Store.observable("theta", rows=...)``, h5py and ``xarray.open_dataset(..., engine="h5netcdf",
group="observables/theta")``; and the peak of the same stored run through the API (its result has every row) and
through ``dlnm run --store`` (its rows stay in the store). Summaries must stay small (``inspect`` reads no rows into
arrays), a window reads its rows only, and a full read must hold one copy of the rows.

Run: ``python -m pytest benchmarks/bench_store_scale.py --benchmark-only -s``; larger sizes with
``DLNM_BENCH_STORE_ROWS=1000000`` (comma-separated; 10⁶ rows: ~1 GB raw, ~0.5 GB of file, a few minutes).
"""

import contextlib
import io
import os
import time
import tracemalloc

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.store import global_heap

SIZES = [int(float(s)) for s in os.environ.get("DLNM_BENCH_STORE_ROWS", "10000,100000").split(",")]
D = 30


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=D, s=5, seed=0)


def _measure(fn):
    """(seconds, peak traced bytes, value) of one call, with a cold global-heap cache (as a fresh process)."""
    global_heap._CACHE.clear()
    tracemalloc.start()
    try:
        t = time.perf_counter()
        value = fn()
        seconds = time.perf_counter() - t
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return seconds, peak, value


def _inspect(path, *flags):
    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["inspect", path, *flags]) == 0
    return len(out.getvalue())


@pytest.mark.parametrize("rows", SIZES)
def test_store_scale(benchmark, problem, machine, tmp_path, rows):
    xr = pytest.importorskip("xarray")
    path = str(tmp_path / "run.h5")
    steps = rows - 1
    record = dm.Record(every=1)
    dm.mgd(problem, 0.02, 0.7, steps=10, record=record)  # (compiled)
    t = time.perf_counter()
    dm.mgd(problem, 0.02, 0.7, steps=steps, record=record)
    t_plain = time.perf_counter() - t
    t_stored, api_peak, _ = _measure(lambda: dm.mgd(problem, 0.02, 0.7, steps=steps, record=record, store=path))
    cli_run = ["run", "--gamma", "0.02", "--beta", "0.7", "--steps", str(steps), "--record-every", "1", "--n", "20",
               "--d", str(D), "--data-seed", "0", "--no-progress", "--store", str(tmp_path / "cli.h5")]
    with contextlib.redirect_stdout(io.StringIO()):
        t_cli, cli_peak, code = _measure(lambda: main(cli_run))
    assert code == 0
    raw = rows * (4 * D * 8 + 2 * 8 + 8 + 8)
    size = os.path.getsize(path)
    _inspect(path)  # (imports)
    window = slice(rows // 2, rows // 2 + 1000)

    def xr_window():
        with xr.open_dataset(path, engine="h5netcdf", group="observables/theta") as ds:
            return ds["value"].isel(time=window).values

    def h5_window():
        import h5py

        with h5py.File(path, "r") as f:
            return f["observables/theta/value"][window]

    ops = {"open+rows": lambda: dm.open_store(path).rows, "inspect": lambda: _inspect(path),
           "inspect --json": lambda: _inspect(path, "--json"), "trajectory": lambda: dm.open_store(path).trajectory,
           "observable theta": lambda: dm.open_store(path).observable("theta"),
           "observable window": lambda: dm.open_store(path).observable("theta", rows=window),
           "to_xarray()": lambda: dm.open_store(path).to_xarray(), "h5py window": h5_window,
           "xarray window": xr_window}
    found = {name: _measure(fn)[:2] for name, fn in ops.items()}
    benchmark.pedantic(lambda: dm.open_store(path).rows, rounds=3, iterations=1)
    benchmark.extra_info.update(machine=machine, rows=rows, plain_seconds=t_plain, stored_seconds=t_stored,
                                raw_bytes=raw, file_bytes=size, api_run_peak_raw=api_peak / raw,
                                cli_run_seconds=t_cli, cli_run_peak_raw=cli_peak / raw,
                                **{f"{k} seconds": v[0] for k, v in found.items()},
                                **{f"{k} peak/raw": v[1] / raw for k, v in found.items()})
    print(f"\n{rows} rows ({raw / 2**20:.0f} MiB raw, file {size / 2**20:.0f} MiB = {size / raw:.2f} of raw): "
          f"plain run {t_plain:.2f} s, stored {t_stored:.2f} s ({t_stored / t_plain:.2f}x)  [{machine}]")
    for name, (seconds, peak) in dict(found, **{"stored run (API)": (t_stored, api_peak),
                                                "dlnm run --store": (t_cli, cli_peak)}).items():
        print(f"  {name:<17} {seconds:8.3f} s  peak traced {peak / 2**20:8.1f} MiB = {peak / raw:5.2f} x raw")
    fixed = 16 * 2**20  # (buffers that do not grow with the rows: the global heap scan reads 4 MiB blocks)
    assert found["inspect"][1] < 0.25 * raw + fixed  # a summary reads no rows into arrays
    assert found["trajectory"][1] < 1.4 * raw + fixed  # one copy of the rows
    assert found["observable window"][1] < fixed  # its rows only
    assert cli_peak < 0.25 * raw + 64 * 2**20  # (the driver's record block and the writer's queue: no trajectory)
    assert np.isfinite(t_stored)
