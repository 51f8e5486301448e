"""Distributed sweeps (``sweep(..., client=)``) against the single-process lockstep sweep.

Target (issue 16): with 2 single-threaded worker processes (``LocalCluster(n_workers=2,
threads_per_worker=1)``), a 400-point, 1e5-step (β, γ) grid (n=20, d=30, full batch, written to a store)
reaches ≥ 80 % of the throughput of the same sweep in one process on the same 2 cores (2 Numba threads).

Also reported: the block size (points per task) used by default, the overhead against the single
process, how it changes with the block size (``wave_size``), and where the scheduler becomes the
bottleneck: many tiny blocks on 100 simulated workers (``LocalCluster(processes=False,
n_workers=25, threads_per_worker=4)``, one process: every kernel call is serialised by the per-process lock, so this
measures dispatch only), next to the bare per-task cost of the scheduler (no-op tasks).

Run: ``python -m pytest benchmarks/bench_distributed.py --benchmark-only -s``
"""

import logging
import os
import re
import resource
import time

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum import sweep

distributed = pytest.importorskip("distributed")

STEPS = 100_000
GAMMAS = np.geomspace(1e-3, 3e-2, 20)
BETAS = np.linspace(0.0, 0.9, 20)
TARGET = 0.80
ROUNDS = 5
BLOCK_SIZES = (8, 24, 48, 96, 200)
TINY_POINTS = 8 * 400  # 400 blocks of 8 points, 10 steps each: dispatch only

_measured = {}


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, seed=0)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                       silence_logs=logging.CRITICAL)
    c = distributed.Client(cluster)
    c.wait_for_workers(2, timeout=120)
    try:
        yield c
    finally:
        c.close()
        cluster.close()


def _timed(fn, rounds):
    best, out = np.inf, None
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


_rounds = iter(range(1, 10**6))


def _single(problem, tmp_path):
    path = str(tmp_path / "single.h5")
    return sweep(problem, gammas=GAMMAS, betas=BETAS, steps=STEPS, store=path, overwrite=True)


def _dist(problem, tmp_path, client, wave_size=None, lines=None):
    """The grid on the cluster; a new ``seed`` every call (the same work: full batch) gives new task keys, so
    that no block of an earlier round still held by the cluster is reused."""
    path = str(tmp_path / "dist.h5")
    return sweep(problem, gammas=GAMMAS, betas=BETAS, steps=STEPS, store=path, overwrite=True, client=client,
                 wave_size=wave_size, log=None if lines is None else lines.append, seed=next(_rounds))


def _blocks(lines):
    m = re.match(r"\d+ pending points of \d+ in (\d+) blocks of <= (\d+) points", lines[0])
    return int(m.group(1)), int(m.group(2))


def _cpu_self():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cpu_workers(client):
    return sum(client.run(_cpu_self).values())


def test_distributed_throughput(benchmark, problem, client, tmp_path, machine):
    sweep(problem, gammas=GAMMAS[:8], betas=BETAS[:1], steps=10)  # load the compiled kernels here...
    sweep(problem, gammas=GAMMAS[:8], betas=BETAS[:2], steps=10, client=client)  # ...and on the workers
    singles, dists, lines, cpu = [], [], [], {"single": [], "workers": [], "client": []}
    run_steps = []

    def pair():  # interleaved: the load of a shared machine moves both alike
        c0 = _cpu_self()
        t, res = _timed(lambda: _single(problem, tmp_path), 1)
        cpu["single"].append(_cpu_self() - c0)
        singles.append(t)
        run_steps.append(int(res.steps_done.sum()))
        lines.clear()
        w0, c0 = _cpu_workers(client), _cpu_self()
        t, res = _timed(lambda: _dist(problem, tmp_path, client, lines=lines), 1)
        cpu["client"].append(_cpu_self() - c0)
        cpu["workers"].append(_cpu_workers(client) - w0)
        assert res.complete
        dists.append(t)

    benchmark.pedantic(pair, rounds=ROUNDS, iterations=1)
    single, t, steps = min(singles), min(dists), run_steps[0]
    ntasks, size = _blocks(lines)
    ratio = single / t
    cpu_single = min(cpu["single"])
    cpu_dist = min(w + c for w, c in zip(cpu["workers"], cpu["client"], strict=True))
    _measured.update(single=single, dist=t)
    benchmark.extra_info.update(machine=machine, single_s=singles, distributed_s=dists, ratio=ratio, tasks=ntasks,
                                block_points=size, single_ns_per_run_step=single / steps * 1e9,
                                distributed_ns_per_run_step=t / steps * 1e9, cpu_s=cpu,
                                load_average=os.getloadavg())
    print(f"\n400 points x {STEPS} steps, store: one process (2 threads) {single:.3f} s "
          f"({single / steps * 1e9:.1f} ns/run-step); 2 workers x 1 thread {t:.3f} s "
          f"({t / steps * 1e9:.1f} ns/run-step): {100 * ratio:.1f} % of the single-process throughput, "
          f"overhead {t - single:+.3f} s ({100 * (t / single - 1):+.1f} %); {ntasks} blocks of <= {size} points; "
          f"rounds: one process {', '.join(f'{x:.3f}' for x in singles)} s, cluster "
          f"{', '.join(f'{x:.3f}' for x in dists)} s; CPU seconds (least of the rounds): one process "
          f"{cpu_single:.2f}, cluster {cpu_dist:.2f} (workers "
          f"{', '.join(f'{x:.2f}' for x in cpu['workers'])}; client and scheduler "
          f"{', '.join(f'{x:.2f}' for x in cpu['client'])}): CPU efficiency {100 * cpu_single / cpu_dist:.1f} %; "
          f"load average {os.getloadavg()[0]:.1f}  [{machine}]")
    assert ratio >= TARGET


def test_overhead_against_block_size(benchmark, problem, client, tmp_path, machine):
    rows = []

    def all_sizes():
        rows.clear()
        for size in BLOCK_SIZES:  # each next to its own single-process time (load drifts)
            lines = []
            single = _timed(lambda: _single(problem, tmp_path), 1)[0]
            t, _ = _timed(lambda size=size, lines=lines: _dist(problem, tmp_path, client, size, lines), 2)
            single = min(single, _timed(lambda: _single(problem, tmp_path), 1)[0])
            rows.append((size, _blocks(lines)[0], t, single))

    benchmark.pedantic(all_sizes, rounds=1, iterations=1)
    print(f"\nblock size (points per task) vs wall time, 400 points x {STEPS} steps, 2 workers  [{machine}]")
    for size, ntasks, t, single in rows:
        print(f"  {size:4d} points x {ntasks:3d} tasks: {t:.3f} s (one process {single:.3f} s): "
              f"{100 * single / t:5.1f} % of one process, overhead {t - single:+.3f} s")
    benchmark.extra_info.update(machine=machine, rows=[{"block_points": s, "tasks": n, "seconds": t, "single": o}
                                                       for s, n, t, o in rows])


def _noop(x):
    return x


def test_scheduler_bottleneck_with_100_workers(benchmark, problem, tmp_path, machine):
    """Tiny blocks on 100 simulated workers (25 in-process workers x 4 threads: 100 task slots, one process, so
    that 2 cores can hold them): blocks per second through the whole path vs bare tasks."""
    t0 = time.perf_counter()
    cluster = distributed.LocalCluster(n_workers=25, threads_per_worker=4, processes=False, dashboard_address=":0",
                                       silence_logs=logging.CRITICAL)
    c = distributed.Client(cluster)
    start = time.perf_counter() - t0
    try:
        c.wait_for_workers(25, timeout=300)
        gammas = np.geomspace(1e-3, 3e-2, 80)
        betas = np.linspace(0.0, 0.9, TINY_POINTS // 80)

        def tiny(store):
            return sweep(problem, gammas=gammas, betas=betas, steps=10, store=store, overwrite=store is not None,
                         client=c, wave_size=8, seed=next(_rounds))

        tiny(str(tmp_path / "warm.h5"))
        t_sweep, _ = _timed(lambda: tiny(str(tmp_path / "tiny.h5")), 2)
        t_nostore, _ = _timed(lambda: tiny(None), 2)
        per_block = t_sweep / (TINY_POINTS // 8)
        t_local, _ = _timed(lambda: sweep(problem, gammas=gammas, betas=betas, steps=10), 2)
        ntasks = 2000

        def bare():
            futures = c.map(_noop, range(ntasks), pure=False)
            distributed.wait(futures)

        bare()
        t_bare = benchmark.pedantic(bare, rounds=3, iterations=1)
        t_bare = benchmark.stats.stats.min
        per_task = t_bare / ntasks
    finally:
        c.close()
        cluster.close()
    compute = _measured.get("dist", 1.0) * 2 / 400  # single-core seconds of one 1e5-step point
    benchmark.extra_info.update(machine=machine, start_s=start, per_block_s=per_block, per_bare_task_s=per_task,
                                tiny_sweep_s=t_sweep, tiny_local_s=t_local, tiny_no_store_s=t_nostore)
    print(f"\n100 simulated workers (25 x 4 threads, one process; started in {start:.1f} s): "
          f"{TINY_POINTS // 8} blocks of 8 points x 10 steps in {t_sweep:.3f} s = {per_block * 1e3:.2f} ms per block "
          f"through sweep(client=) ({1 / per_block:.0f} blocks/s; without a store {t_nostore:.3f} s; the same grid "
          f"in one process: {t_local:.3f} s); bare no-op tasks: "
          f"{per_task * 1e3:.3f} ms per task ({1 / per_task:.0f} tasks/s)")
    print(f"  -> W workers stay busy while a block takes more than W x {per_block * 1e3:.2f} ms: 100 workers need "
          f">= {100 * per_block:.2f} s blocks, i.e. >= {100 * per_block / compute:.0f} points of 1e5 steps "
          f"(d=30) per block  [{machine}]")
