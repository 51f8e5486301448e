"""Performance of a 400-point (β, γ) grid in lockstep, n=20, d=30, full batch, all accumulators on.

Targets (2-core machine): ≤ 110 ns per run-step (2x the FLOP limit of ~55 ns: a Hessian-form
run-step is 2d² = 1,800 flops, at the dgemm peak measured in the same session) and ≥ 5x the
throughput of the single-run kernel called point by point. Memory does not grow with the
number of steps.

The last benchmark times a λ line of flows (lockstep groups) against ``mgf`` point by point.

Run: ``python -m pytest benchmarks/bench_sweep.py --benchmark-only -s``
"""

import time
import tracemalloc

import numba
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum import sweep

STEPS = 50_000
GAMMAS = np.geomspace(1e-3, 3e-2, 20)
BETAS = np.linspace(0.0, 0.9, 20)
FLOPS_PER_RUN_STEP = 2 * 30 * 30
TARGET_NS = 110.0
TARGET_SPEEDUP = 5.0

_measured = {}


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, seed=0)


def dgemm_gflops(size=2000, repeats=5):
    """Best-of-``repeats`` GFLOP/s of numpy matmul (OpenBLAS dgemm, all threads) on size x size."""
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((size, size)), rng.standard_normal((size, size))
    a @ b
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t0)
    return 2.0 * size**3 / best / 1e9


def test_dgemm_peak(benchmark, machine):
    gflops = benchmark.pedantic(dgemm_gflops, rounds=1, iterations=1)
    _measured["gflops"] = gflops
    limit_ns = FLOPS_PER_RUN_STEP / gflops
    benchmark.extra_info.update(machine=machine, dgemm_gflops=gflops, flop_limit_ns_per_run_step=limit_ns)
    print(f"\ndgemm peak: {gflops:.1f} GFLOP/s -> FLOP limit {limit_ns:.1f} ns per run-step "
          f"({FLOPS_PER_RUN_STEP} flops)  [{machine}]")


def test_sweep_400_points(benchmark, problem, machine):
    sweep(problem, gammas=GAMMAS[:4], betas=BETAS[:2], steps=10)  # warm: load the compiled kernel
    result = benchmark.pedantic(lambda: sweep(problem, gammas=GAMMAS, betas=BETAS, steps=STEPS), rounds=3,
                                iterations=1)
    assert result.complete and result.shape == (1, 20, 20)
    run_steps = int(result.steps_done.sum())
    ns = benchmark.stats.stats.min / run_steps * 1e9
    _measured["sweep_ns"] = ns
    gflops = _measured.get("gflops") or dgemm_gflops()
    limit_ns = FLOPS_PER_RUN_STEP / gflops
    benchmark.extra_info.update(machine=machine, threads=numba.get_num_threads(), ns_per_run_step=ns,
                                dgemm_gflops=gflops, flop_limit_ns=limit_ns,
                                ratio_to_flop_limit=ns / limit_ns, achieved_gflops=FLOPS_PER_RUN_STEP / ns,
                                diverged=int((result.status == 3).sum()))
    print(f"\nsweep 400 points x {STEPS} steps ({numba.get_num_threads()} threads): {ns:.1f} ns per run-step "
          f"= "
          f"{FLOPS_PER_RUN_STEP / ns:.1f} GFLOP/s (mat-vec flops only); FLOP limit {limit_ns:.1f} ns "
          f"(dgemm {gflops:.1f} GFLOP/s): ratio {ns / limit_ns:.2f}  [{machine}]")
    assert ns <= TARGET_NS


def test_point_by_point_single_runs(benchmark, problem, machine):
    points = [(g, b) for g in GAMMAS[::5] for b in BETAS[::10]]
    dm.mgd(problem, 0.01, 0.5, steps=10)

    def run_all():
        return [dm.mgd(problem, g, b, steps=STEPS) for g, b in points]

    results = benchmark.pedantic(run_all, rounds=3, iterations=1)
    ns = benchmark.stats.stats.min / sum(r.steps_done for r in results) * 1e9
    sweep_ns = _measured.get("sweep_ns")
    if sweep_ns is None:
        t0 = time.perf_counter()
        res = sweep(problem, gammas=GAMMAS, betas=BETAS, steps=STEPS)
        sweep_ns = (time.perf_counter() - t0) / int(res.steps_done.sum()) * 1e9
    speedup = ns / sweep_ns
    benchmark.extra_info.update(machine=machine, single_run_ns_per_step=ns, sweep_ns_per_run_step=sweep_ns,
                                speedup=speedup)
    print(f"\nsingle-run kernel point by point: {ns:.1f} ns per step; sweep {sweep_ns:.1f} ns per run-step: "
          f"{speedup:.2f}x the throughput  [{machine}]")
    assert speedup >= TARGET_SPEEDUP


def test_memory_does_not_grow_with_steps(benchmark, problem):
    def peak(steps):
        tracemalloc.start()
        sweep(problem, gammas=GAMMAS[:8], betas=BETAS[:8], steps=steps)
        _, top = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        return top

    sweep(problem, gammas=GAMMAS[:8], betas=BETAS[:8], steps=10)
    small, large = peak(1_000), benchmark.pedantic(lambda: peak(50_000), rounds=1, iterations=1)
    benchmark.extra_info.update(peak_bytes_1k_steps=small, peak_bytes_50k_steps=large)
    print(f"\npeak traced memory, 64 points: {small / 1e6:.2f} MB (1e3 steps), "
          f"{large / 1e6:.2f} MB (5e4 steps)")
    assert large <= 1.1 * small + 100_000


FLOW_LAMS = np.geomspace(0.01, 1.0, 64)
FLOW_T_MAX = 200.0


def test_flow_sweep_lockstep(benchmark, problem, machine):
    """λ line of 64 MGF runs (default steps and start refinement) in lockstep groups vs ``mgf`` point by point.

    No target in the issue; reported, and the lockstep sweep must not be slower than running the
    points one after the other on one core.
    """
    from dlnmomentum import mgf

    sweep(problem, lams=FLOW_LAMS[:2], t_max=2.0)
    result = benchmark.pedantic(lambda: sweep(problem, lams=FLOW_LAMS, t_max=FLOW_T_MAX), rounds=3, iterations=1)
    assert result.complete
    sweep_s = benchmark.stats.stats.min
    mgf(problem, 0.1, t_max=2.0)
    single_s = np.inf
    for _ in range(2):
        t0 = time.perf_counter()
        for lam in FLOW_LAMS:
            mgf(problem, float(lam), t_max=FLOW_T_MAX)
        single_s = min(single_s, time.perf_counter() - t0)
    grid_steps = int(result.steps_done.sum())
    benchmark.extra_info.update(machine=machine, threads=numba.get_num_threads(), sweep_seconds=sweep_s,
                                point_by_point_seconds=single_s, speedup=single_s / sweep_s,
                                grid_steps=grid_steps)
    print(f"\nflow sweep, 64 lambdas to t = {FLOW_T_MAX:g} ({grid_steps} grid steps): lockstep {sweep_s:.3f} s "
          f"({numba.get_num_threads()} threads), mgf point by point {single_s:.3f} s: "
          f"{single_s / sweep_s:.2f}x  [{machine}]")
    assert sweep_s <= single_s
