"""Performance of one full-batch MGD run, n=20, d=30, 10⁶ steps, all accumulators on.

Targets: ≤ 0.3 s per run on the 2-core machine; ≥ 100× the plain NumPy
reference per step. Compile time is measured separately, in a fresh process
with an empty Numba cache.

Run: ``python -m pytest benchmarks/bench_mgd.py --benchmark-only``
"""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

import dlnmomentum as dm

STEPS = 1_000_000
TARGET_SECONDS = 0.3
TARGET_RATIO = 100.0


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, seed=0)


def numpy_reference_seconds_per_step(problem, gamma=0.02, beta=0.7, steps=3000):
    """The NumPy loop users write today: (u, v) update + the same accumulators."""
    X, y, n = problem.X, problem.y, problem.n
    u, v = np.full(problem.d, 0.01), np.zeros(problem.d)
    up, vp = u.copy(), v.copy()
    s_plus = np.zeros(problem.d)
    s_minus = np.zeros(problem.d)
    mom = np.zeros(problem.d)
    mirror = np.zeros(problem.d)
    t0 = time.perf_counter()
    for _ in range(steps):
        g = X.T @ (X @ (u * v) - y) / n
        un = u - gamma * g * v + beta * (u - up)
        vn = v - gamma * g * u + beta * (v - vp)
        zp = (un + vn) / (u + v)
        zm = (un - vn) / (u - v)
        s_plus += (zp - 1 - np.log(np.abs(zp))) + beta * (1 / zp - 1 + np.log(np.abs(zp)))
        s_minus += (zm - 1 - np.log(np.abs(zm))) + beta * (1 / zm - 1 + np.log(np.abs(zm)))
        mom = beta * mom + g
        mirror += gamma * mom
        up, vp, u, v = u, v, un, vn
    return (time.perf_counter() - t0) / steps


def test_mgd_million_steps(benchmark, problem, machine):
    dm.mgd(problem, 0.02, 0.7, steps=10)  # warm (loads the compiled kernel)
    result = benchmark.pedantic(lambda: dm.mgd(problem, 0.02, 0.7, steps=STEPS), rounds=5, iterations=1)
    assert result.steps_done == STEPS
    seconds = benchmark.stats.stats.min
    ref = numpy_reference_seconds_per_step(problem)
    ratio = ref / (seconds / STEPS)
    benchmark.extra_info.update(machine=machine, ns_per_step=seconds / STEPS * 1e9,
                                numpy_us_per_step=ref * 1e6, speedup_vs_numpy=ratio)
    print(f"\nMGD 1e6 steps: {seconds:.3f} s ({seconds / STEPS * 1e9:.0f} ns/step); NumPy reference "
          f"{ref * 1e6:.1f} us/step; speed-up {ratio:.0f}x  [{machine}]")
    assert ratio >= TARGET_RATIO
    assert seconds <= TARGET_SECONDS


def test_smgd_million_steps(benchmark, problem, machine):
    dm.mgd(problem, 0.02, 0.7, steps=10, batch_size=5)
    result = benchmark.pedantic(lambda: dm.mgd(problem, 0.02, 0.7, steps=STEPS, batch_size=5), rounds=3,
                                iterations=1)
    assert result.steps_done == STEPS
    benchmark.extra_info.update(machine=machine, ns_per_step=benchmark.stats.stats.min / STEPS * 1e9)


def test_compile_time(benchmark, machine):
    """First call in a fresh process with an empty cache directory: JIT compile + 10 steps."""
    code = ("import time; t=time.perf_counter(); import dlnmomentum as dm; p=dm.sparse_regression(); "
            "t1=time.perf_counter(); dm.mgd(p, 0.02, 0.7, steps=10); print(time.perf_counter()-t1)")

    def compile_once():
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, NUMBA_CACHE_DIR=cache)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
            return float(out.stdout.strip().splitlines()[-1])

    seconds = benchmark.pedantic(compile_once, rounds=1, iterations=1)
    benchmark.extra_info.update(machine=machine, compile_seconds=seconds)
    print(f"\ncompile (fresh cache) + 10 steps: {seconds:.2f} s")
