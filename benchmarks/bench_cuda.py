"""Performance of MGD grids on the GPU, one warp per run, every accumulator on.

Setting: ``sparse_regression(n=20, d=30, s=5, seed=0)``, full batch (Hessian form), 4,096 and 40,000 runs
x 20,000 steps over a stable (β, γ) grid, no convergence test (every run does every step); kernel
time only (compile and transfers excluded). Goal on an H100: <= 0.3 ns per run-step. Next to it, in
the same run on the same GPU: ``jax.jit(jax.vmap(lax.scan))`` of the plain heavy-ball update (no
accumulators; skipped without jax), and the CPU lockstep sweep engine (all cores) for reference.

Skipped without a CUDA GPU and numba-cuda. Run: ``python -m pytest benchmarks/bench_cuda.py --benchmark-only -s``
(``benchmarks/cuda_check.py`` prints the same numbers, with the agreement checks, without pytest).
"""

import pytest
from cuda_check import BENCH_RUNS, BENCH_STEPS, GOAL_NS, cpu_ns_per_run_step, gpu_ns_per_run_step, jax_ns_per_run_step

import dlnmomentum as dm

_measured = {}


@pytest.fixture(scope="module")
def gpu():
    from dlnmomentum.sweeps import cuda as CE

    ok, reason = CE.cuda_available()
    if not ok or "simulator" in reason:
        pytest.skip(f"needs a CUDA GPU: {reason}")
    return reason


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, seed=0)


def _report(benchmark, name, ns, info, device):
    _measured[name] = ns
    benchmark.extra_info.update(device=device, ns_per_run_step=ns, **{k: v for k, v in info.items()
                                                                      if isinstance(v, (int, float, str))})
    print(f"\n{name}: {ns:.4f} ns per run-step  {info}  [{device}]")


@pytest.mark.parametrize("runs", BENCH_RUNS)
def test_cuda_mgd(benchmark, gpu, problem, runs):
    ns, info = benchmark.pedantic(lambda: gpu_ns_per_run_step(problem, runs, BENCH_STEPS), rounds=3, iterations=1)
    _report(benchmark, f"cuda {runs} runs", ns, info, gpu)
    assert ns <= GOAL_NS or runs < BENCH_RUNS[-1]  # the goal is for a full GPU


def test_cuda_mgd_with_loss_test(benchmark, gpu, problem):
    runs = BENCH_RUNS[-1]
    ns, info = benchmark.pedantic(lambda: gpu_ns_per_run_step(problem, runs, BENCH_STEPS, tol=1e-30), rounds=1,
                                  iterations=1)
    _report(benchmark, f"cuda {runs} runs, tol", ns, info, gpu)


@pytest.mark.parametrize("runs", BENCH_RUNS)
def test_jax_plain_heavy_ball(benchmark, gpu, problem, runs):
    pytest.importorskip("jax")
    ns, info = benchmark.pedantic(lambda: jax_ns_per_run_step(problem, runs, BENCH_STEPS), rounds=1, iterations=1)
    _report(benchmark, f"jax {runs} runs (plain heavy ball)", ns, info, gpu)


def test_cpu_sweep_reference(benchmark, gpu, problem):
    ns, info = benchmark.pedantic(lambda: cpu_ns_per_run_step(problem), rounds=1, iterations=1)
    _report(benchmark, "cpu lockstep sweep", ns, info, "CPU")
