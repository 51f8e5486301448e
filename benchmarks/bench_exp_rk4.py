"""Performance of the exponential RK4 (``scheme="exp-rk4"``) for MGF(λ) at small λ, against RK4 and gradient flow.

Classic RK4 needs a step below ~0.7λ (the fast mode -1/λ), so MGF(λ) costs ∝ 1/λ; the
exponential scheme's step is set by the gradient time scale, as gradient flow's. Measured here,
on the paper's default problem (n=20, d=30, s=5, α=0.01) to t_max = 200:

* ``test_small_lambda_costs_like_gradient_flow``: at equal accuracy (max error of θ(t_max) <= 1e-10
  against scipy's stiff ``Radau`` at rtol 1e-12; gradient flow against ``DOP853`` at rtol 1e-13), the
  default ``dm.mgf`` (``scheme="auto"``) for λ in {1e-6, ..., 1e-2} costs at most 2x ``dm.gf``;
* ``test_before_and_after_table``: h and time of ``scheme="rk4"`` (before) and ``scheme="auto"``
  (after) for λ in {0, 1e-4, 1e-3, 1e-2, 0.1, 1}, in one run;
* ``test_lambda_line_sweep``: a 32-point λ line from 1e-5 to 1 (``dm.sweep(..., lams=...)``),
  ``scheme="rk4"`` against ``scheme="auto"``.

Run: ``python -m pytest benchmarks/bench_exp_rk4.py --benchmark-only -s`` (the Radau references and
the RK4 runs at small λ take a few minutes).
"""

import time

import numpy as np
import pytest
import reference as ref  # tests/reference.py (benchmarks/conftest.py puts tests/ on the path)

import dlnmomentum as dm

T_MAX = 200.0
ALPHA = 0.01
TARGET_ERROR = 1e-10
TARGET_RATIO = 2.0
SMALL_LAMS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
TABLE_LAMS = (0.0, 1e-4, 1e-3, 1e-2, 0.1, 1.0)


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, seed=0)


def _reference(problem, lam):
    """θ(T_MAX) of MGF(λ) by Radau (rtol 1e-12, exact Jacobian) on (w±, ẇ±); gradient flow by DOP853."""
    w0 = np.full(2 * problem.d, ALPHA)
    if lam == 0.0:
        return ref.gf_dop853(problem.hessian, problem.b, T_MAX, w0)
    return ref.mgf_radau(problem.hessian, problem.b, lam, T_MAX, w0, np.zeros(2 * problem.d))


@pytest.fixture(scope="module")
def references(problem):
    return {lam: _reference(problem, lam) for lam in (0.0,) + SMALL_LAMS}


def _best(fn, rounds=5):
    fn()  # warm (loads the compiled kernels)
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def _flow(problem, lam, **kw):
    if lam == 0.0:
        return dm.gf(problem, t_max=T_MAX, **kw)
    return dm.mgf(problem, lam, t_max=T_MAX, **kw)


def _steps(res):
    c = res.config
    return c.n_steps + c.start_steps * (c.start_substeps - 1)


def test_small_lambda_costs_like_gradient_flow(benchmark, problem, references, machine):
    gf_seconds, gf = _best(lambda: dm.gf(problem, t_max=T_MAX))
    gf_error = float(np.abs(gf.theta - references[0.0]).max())
    print(f"\nGF: h={gf.h:.4g}, {gf_seconds * 1e3:.1f} ms, error {gf_error:.1e}  [{machine}]")
    assert gf_error <= TARGET_ERROR
    rows = {}
    for lam in SMALL_LAMS:
        seconds, res = _best(lambda lam=lam: dm.mgf(problem, lam, t_max=T_MAX))
        error = float(np.abs(res.theta - references[lam]).max())
        rows[lam] = dict(scheme=res.config.scheme, h=res.h, seconds=seconds, error=error,
                         ratio=seconds / gf_seconds)
        print(f"MGF({lam:g}) [{res.config.scheme}]: h={res.h:.4g}, {seconds * 1e3:.1f} ms "
              f"({seconds / gf_seconds:.2f}x GF), error {error:.1e}")
    benchmark.pedantic(lambda: dm.mgf(problem, 1e-4, t_max=T_MAX), rounds=5, iterations=1)
    benchmark.extra_info.update(machine=machine, gf_seconds=gf_seconds, gf_error=gf_error, mgf=rows)
    for lam, row in rows.items():
        assert row["scheme"] == "exp-rk4"
        assert row["error"] <= TARGET_ERROR, lam
        assert row["ratio"] <= TARGET_RATIO, lam


def test_before_and_after_table(benchmark, problem, machine):
    rows = []
    for lam in TABLE_LAMS:
        rounds = 1 if lam and lam < 1e-3 else 3  # RK4 at λ = 1e-4 takes seconds
        before_s, before = _best(lambda lam=lam: _flow(problem, lam, scheme="rk4"), rounds=rounds)
        after_s, after = _best(lambda lam=lam: _flow(problem, lam, scheme="auto"), rounds=3)
        gap = float(np.abs(before.theta - after.theta).max())
        rows.append((lam, before.h, _steps(before), before_s, after.config.scheme, after.h, _steps(after), after_s,
                     gap))
    benchmark.pedantic(lambda: dm.mgf(problem, 1e-3, t_max=T_MAX), rounds=3, iterations=1)
    benchmark.extra_info.update(machine=machine, rows=rows)
    print(f"\n[{machine}]  t_max = {T_MAX:g}, default settings")
    print("| λ | rk4: h | steps | time | auto: scheme | h | steps | time | speed-up | max |Δθ| |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for lam, hb, nb, tb, scheme, ha, na, ta, gap in rows:
        print(f"| {lam:g} | {hb:.3g} | {nb} | {tb * 1e3:.1f} ms | {scheme} | {ha:.3g} | {na} | {ta * 1e3:.1f} ms | "
              f"{tb / ta:.1f}x | {gap:.1e} |")
    for lam, _, _, tb, _, _, _, ta, gap in rows:
        assert gap <= 1e-9, lam  # both accurate: they agree
        if lam and lam <= 1e-3:
            assert tb / ta > 10.0


def test_lambda_line_sweep(benchmark, problem, machine):
    lams = np.logspace(-5, 0, 32)
    times, sweeps = {}, {}
    for scheme in ("auto", "rk4"):
        dm.sweep(problem, lams=lams[[0, -1]], t_max=1.0, scheme=scheme)  # warm (compiles both lockstep kernels)
        t0 = time.perf_counter()
        sweeps[scheme] = dm.sweep(problem, lams=lams, t_max=T_MAX, scheme=scheme)
        times[scheme] = time.perf_counter() - t0
    benchmark.pedantic(lambda: dm.sweep(problem, lams=lams, t_max=T_MAX), rounds=3, iterations=1)
    times["auto"] = min(times["auto"], benchmark.stats.stats.min)
    gap = float(np.abs(sweeps["auto"]["theta"] - sweeps["rk4"]["theta"]).max())
    steps = {k: int(np.sum(s["steps_done"])) for k, s in sweeps.items()}
    benchmark.extra_info.update(machine=machine, seconds=times, gap=gap, grid_steps=steps)
    print(f"\n32-point lambda line 1e-5..1, t_max={T_MAX:g}: rk4 {times['rk4']:.2f} s, auto {times['auto']:.2f} s "
          f"({times['rk4'] / times['auto']:.1f}x), max |dtheta| {gap:.1e}  [{machine}]")
    assert gap <= 1e-9
    assert times["rk4"] / times["auto"] > 5.0
