"""The exponential RK4 for MGF(λ) (kernels/flow_exp.py): tableau, order, agreement, Theorem 1, λ → 0, bits."""

import json
import os
import signal

import numpy as np
import pytest
import reference as ref
from conftest import rel
from mpmath import mp
from signal_helpers import sigint_default
from store_checks import assert_same_result

import dlnmomentum as dm
import dlnmomentum.store as S
from dlnmomentum.driver import drive
from dlnmomentum.kernels import flow as K
from dlnmomentum.kernels import flow_exp as KE
from dlnmomentum.runs import flow as runs_flow
from dlnmomentum.runs import stepping
from dlnmomentum.store import writer as store_writer
from dlnmomentum.sweeps import flows

ALPHA = 0.01


# -- the tableau, evaluated independently in high precision ---------------------------------------

def _phi(k, x):
    """φ_k(x) = (e^x - Σ_{j<k} x^j/j!)/x^k in mpmath (60 digits; 1/k! at 0)."""
    if x == 0:
        return mp.mpf(1) / mp.factorial(k)
    return (mp.exp(x) - sum(x**j / mp.factorial(j) for j in range(k))) / x**k


def _tableau(z):
    """Hochbruck-Ostermann's five-stage exponential RK4: {(i, j): a_ij(z)} and {i: b_i(z)}, φ_{j,i} = φ_j(c_i z)."""
    c = {1: 0, 2: mp.mpf(1) / 2, 3: mp.mpf(1) / 2, 4: 1, 5: mp.mpf(1) / 2}

    def p(j, i):
        return _phi(j, c[i] * z)
    a = {(2, 1): p(1, 2) / 2, (3, 1): p(1, 3) / 2 - p(2, 3), (3, 2): p(2, 3),
         (4, 1): p(1, 4) - 2 * p(2, 4), (4, 2): p(2, 4), (4, 3): p(2, 4)}
    a52 = p(2, 5) / 2 - p(3, 4) + p(2, 4) / 4 - p(3, 5) / 2
    a54 = p(2, 5) / 4 - a52
    a.update({(5, 2): a52, (5, 3): a52, (5, 4): a54, (5, 1): p(1, 5) / 2 - 2 * a52 - a54})
    b = {1: _phi(1, z) - 3 * _phi(2, z) + 4 * _phi(3, z), 2: 0, 3: 0, 4: -_phi(2, z) + 4 * _phi(3, z),
         5: 4 * _phi(2, z) - 8 * _phi(3, z)}
    return a, b


def test_underlying_method_is_a_fourth_order_runge_kutta_method():
    """At z = 0 (no linear part) the tableau is a five-stage explicit RK method of order 4 (the m component)."""
    mp.dps = 30
    a0, b0 = _tableau(mp.mpf(0))
    A = np.zeros((5, 5))
    for (i, j), v in a0.items():
        A[i - 1, j - 1] = float(v)
    b = np.array([float(b0[i]) for i in range(1, 6)])
    c = KE.EXP_C
    assert np.array_equal(b, KE.EXP_B0) or np.allclose(b, KE.EXP_B0, rtol=0, atol=1e-16)
    assert np.allclose(A.sum(axis=1), c, rtol=0, atol=1e-16)
    conditions = [(b.sum(), 1), (b @ c, 1 / 2), (b @ c**2, 1 / 3), (b @ (A @ c), 1 / 6), (b @ c**3, 1 / 4),
                  (b @ (c * (A @ c)), 1 / 8), (b @ (A @ c**2), 1 / 12), (b @ (A @ (A @ c)), 1 / 24)]
    for got, want in conditions:
        assert abs(got - want) < 1e-15


@pytest.mark.parametrize("z", [-1e-9, -0.3, -0.999, -1.001, -2.0, -7.5, -60.0, -1e4, -1e12, -1e290])
def test_kernel_coefficients_are_the_tableau(z):
    """``exp_coefficients`` (series, recurrences, D_k) against the tableau in 60-digit arithmetic."""
    mp.dps = 60
    lam = 1.0
    h = -z * lam
    co = KE.exp_coefficients(lam, h)
    zz = mp.mpf(z)
    a, b = _tableau(zz)
    a0, b0 = _tableau(mp.mpf(0))

    def close(got, want, what):  # (each coefficient is a sum of O(1) terms: a few ulps of 1 absolute)
        want = float(want)
        assert abs(got - want) <= 1e-13 * abs(want) + 2e-15, (what, got, want)

    close(co[KE.C_EH], mp.exp(zz / 2), "e^(z/2)")
    close(co[KE.C_EZ], mp.exp(zz), "e^z")
    close(co[KE.C_LH] / h, (1 - mp.exp(zz / 2)) / -zz, "lambda(1 - e^(z/2))/h")
    close(co[KE.C_LZ] / h, (1 - mp.exp(zz)) / -zz, "lambda(1 - e^z)/h")
    stages = {(2, 1): (KE.C_HG21, KE.C_B21), (3, 1): (KE.C_HG31, KE.C_B31), (3, 2): (KE.C_HG32, KE.C_B32),
              (4, 1): (KE.C_HG41, KE.C_B41), (4, 2): (KE.C_HG42, KE.C_B42), (5, 1): (KE.C_HG51, KE.C_B51),
              (5, 2): (KE.C_HG52, KE.C_B52), (5, 4): (KE.C_HG54, KE.C_B54)}
    for (i, j), (ig, ib) in stages.items():
        close(co[ig] / h, a0[i, j] - a[i, j], f"gamma_{i}{j}")
        close(co[ib], -zz * a[i, j], f"beta_{i}{j}")
    assert a[4, 2] == a[4, 3] and a[5, 2] == a[5, 3]  # what lets the kernel store g2 + g3
    for i, (ig, ib, iw) in {1: (KE.C_HG1, KE.C_B1, KE.C_HW1), 4: (KE.C_HG4, KE.C_B4, KE.C_HW4),
                            5: (KE.C_HG5, KE.C_B5, KE.C_HW5)}.items():
        close(co[ig] / h, b0[i] - b[i], f"gamma_{i}")
        close(co[ib], -zz * b[i], f"beta_{i}")
        close(co[iw] / h, b[i], f"b_{i}")
    assert abs(b[2]) == 0 and abs(b[3]) == 0


def test_coefficients_stay_finite_as_lambda_goes_to_zero():
    """z = -inf (λ underflowing against h): the gradient-flow limit, nothing overflows or turns NaN."""
    for lam in (1e-300, 5e-324, 0.0):
        co = KE.exp_coefficients(lam, 0.1)
        assert np.all(np.isfinite(co))
        assert co[KE.C_EZ] == 0.0 and co[KE.C_LZ] == lam  # λ(1 - e^z)
    co = KE.exp_coefficients(0.0, 0.1)
    assert co[KE.C_HG1] / 0.1 == pytest.approx(1 / 6) and co[KE.C_HG5] / 0.1 == pytest.approx(2 / 3)


# -- an independent stiff reference: scipy Radau on (w, ẇ) ------------------------------------------

def _radau(problem, lam, t_max, w0, v0):
    """MGF(λ) as the first-order system in (w±, ẇ±), Hessian form of ∇L, with its exact Jacobian."""
    return ref.mgf_radau(problem.hessian, problem.b, lam, t_max, w0, v0)


def _slow_velocity(problem, u0, v0):
    """(u̇0, v̇0) with ẇ± = ∓∇L(θ0) w±0: the gradient-flow velocity, on the slow manifold up to O(λ)."""
    wp, wm = u0 + v0, u0 - v0
    g = problem.hessian @ (u0 * v0) - problem.b
    vp, vm = -g * wp, g * wm
    return (vp + vm) / 2, (vp - vm) / 2


@pytest.mark.parametrize("lam, hs", [(1e-6, (0.02, 0.01, 0.005)), (1e-4, (0.02, 0.01, 0.005)),
                                     (1e-2, (0.02, 0.01, 0.005)), (1.0, (0.08, 0.04, 0.02))])
def test_fourth_order_convergence_against_radau(problem, lam, hs):
    """Error ratios ≈ 16 when h halves, uniformly in λ (stiff order 4), on a smooth solution.

    The start is on the slow manifold (no initial layer of width λ) and the steps are uniform
    from t = 0 (``refine_start=None``: no graded mesh, whose remainders would blur the ratios);
    the layer itself is covered by ``test_default_runs_are_accurate_from_rest``.
    """
    d, t_max = problem.d, 4.0
    u0, v0 = np.full(d, 0.1), np.zeros(d)
    ud0, vd0 = _slow_velocity(problem, u0, v0)
    want = _radau(problem, lam, t_max, np.concatenate([u0 + v0, u0 - v0]),
                  np.concatenate([ud0 + vd0, ud0 - vd0]))
    errors = []
    for h in hs:
        res = dm.mgf(problem, lam, t_max=t_max, h=h, u0=u0, v0=v0, u_dot0=ud0, v_dot0=vd0, refine_start=None,
                     scheme="exp-rk4", gradient="hessian")
        errors.append(np.abs(res.theta - want).max())
    ratios = [errors[0] / errors[1], errors[1] / errors[2]]
    assert errors[-1] > 2e-11  # well above the reference's own error (~1e-12)
    assert all(13.5 < r < 18.5 for r in ratios), (errors, ratios)


@pytest.mark.parametrize("lam", [1e-5, 1e-3, 1e-2])
def test_default_runs_are_accurate_from_rest(problem, lam):
    """From ẇ0 = 0 (the paper's start: an initial layer of width λ) the default run is accurate to 1e-9."""
    t_max = 20.0
    d = problem.d
    want = _radau(problem, lam, t_max, np.full(2 * d, ALPHA), np.zeros(2 * d))
    res = dm.mgf(problem, lam, t_max=t_max)
    assert res.config.scheme == "exp-rk4"
    assert np.abs(res.theta - want).max() <= 1e-9


# -- agreement with the RK4 kernel --------------------------------------------------------------------

@pytest.mark.parametrize("lam", [0.05, 0.5])
def test_agrees_with_rk4_where_both_are_accurate(problem, lam):
    kw = dict(t_max=20.0, h=0.001, refine_start=None)
    a = dm.mgf(problem, lam, scheme="rk4", **kw)
    b = dm.mgf(problem, lam, scheme="exp-rk4", **kw)
    assert a.config.scheme == "rk4" and b.config.scheme == "exp-rk4"
    for name in ("theta", "w_plus", "w_minus", "w_plus_dot", "w_minus_dot", "p_integral", "q_integral",
                 "grad_sq_integral"):
        assert np.abs(getattr(a, name) - getattr(b, name)).max() <= 1e-10, name
    for name in ("j_plus", "j_minus", "k_plus", "k_minus"):
        x, y = getattr(a, name), getattr(b, name)
        assert np.array_equal(np.isnan(x), np.isnan(y))
        ok = ~np.isnan(x)
        assert np.all(np.abs(x[ok] - y[ok]) <= 1e-10 * np.maximum(1.0, np.abs(x[ok]))), name
    assert a.n_crossings == b.n_crossings and np.array_equal(a.crossing_coords, b.crossing_coords)
    assert np.abs(a.crossing_times - b.crossing_times).max(initial=0.0) <= 1e-9
    if lam == 0.5:
        assert a.n_crossings > 0  # the crossing search of the exponential step is exercised


@pytest.mark.parametrize("lam", [1e-5, 1e-3])
def test_integrals_and_identities_at_small_lambda(problem, lam):
    """eqs. (w-formula-new), (delta-formula-new) and the two routes to I± (-λK ∓ Q apart) hold with J, P
    integrated by the underlying method and K, Q by the exact decay e^{-(t-s)/λ}."""
    r = dm.mgf(problem, lam, t_max=60.0, scheme="exp-rk4")
    assert r.delta_stayed_positive
    wp, wm = r.w_formula()
    assert np.abs(wp / r.w_plus - 1).max() <= 1e-9 and np.abs(wm / r.w_minus - 1).max() <= 1e-9
    lhs = np.log(r.delta) - np.log(r.delta0)
    assert np.abs(lhs + lam * ((r.j_plus - r.k_plus) + (r.j_minus - r.k_minus))).max() <= 1e-9
    assert np.abs((r.i_plus - r.i_plus_cor) - (-lam * r.k_plus - r.q_integral)).max() <= 1e-9
    assert np.abs((r.i_minus - r.i_minus_cor) - (-lam * r.k_minus + r.q_integral)).max() <= 1e-9
    assert np.all(np.abs(r.q_integral) > 0)  # (the identity is not 0 = 0)


# -- the paper's predictions ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fast_problem():
    return dm.sparse_regression(n=10, d=20, s=3, n_test=100, seed=0)


@pytest.mark.parametrize("lam", [1e-5, 1e-3, 0.1])
def test_theorem_1_prediction_of_converged_flows(fast_problem, lam):
    res = dm.mgf(fast_problem, lam, t_max=5000, alpha=0.1, tol=1e-21, scheme="exp-rk4")
    assert res.status_name == "converged" and res.train_loss <= 1e-21
    assert res.prediction_gap <= 1e-8


def test_mgf_approaches_gf_at_rate_lambda(problem):
    """‖θ_MGF(λ)(t) - θ_GF(t)‖ = O(λ) (the paper's rate), down to λ = 1e-6."""
    t_max = 10.0
    ref = dm.gf(problem, t_max=t_max, h=0.005)
    lams = (1e-3, 1e-4, 1e-5, 1e-6)
    dist = [rel(dm.mgf(problem, lam, t_max=t_max, h=0.005, scheme="exp-rk4").theta, ref.theta) for lam in lams]
    ratios = [dist[i] / dist[i + 1] for i in range(len(lams) - 1)]
    assert all(8.0 < r < 12.0 for r in ratios), (dist, ratios)


def test_small_lambda_formula_of_appendix_c4(problem):
    """Δ∞ ≈ Δ0 exp(-2λ∫∇L²) (Appendix C.4): the relative gap in ln(Δ∞/Δ0) shrinks with λ."""
    gaps = []
    for lam in (1e-2, 1e-3, 1e-4):
        r = dm.mgf(problem, lam, t_max=100.0)
        assert r.config.scheme == "exp-rk4" and r.delta_stayed_positive
        exact = np.log(r.delta_inf_cor / r.delta0)
        approx = np.log(r.delta_inf_small_lam / r.delta0)
        gaps.append(np.abs(exact / approx - 1).max())
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 1e-3
    assert 5.0 < gaps[0] / gaps[1] and 5.0 < gaps[1] / gaps[2]


def test_tiny_lambda_is_gradient_flow(problem):
    """λ far below any step (h/λ overflowing to inf): finite, and gradient flow to the integration error."""
    ref = dm.gf(problem, t_max=10.0, h=0.005)
    for lam in (1e-12, 1e-300):
        res = dm.mgf(problem, lam, t_max=10.0, h=0.005, scheme="exp-rk4")
        assert res.status_name == "max_steps" and np.all(np.isfinite(res.theta))
        assert rel(res.theta, ref.theta) < 1e-9


# -- step size, choice and validation -------------------------------------------------------------------

def test_stability_region_and_default_step(problem):
    kappa = stepping.stiffness_estimate(problem, np.full(problem.d, ALPHA), np.zeros(problem.d))
    for lam in (1e-6, 1e-3, 0.1, 1.0):
        h = stepping.max_stable_step(lam, kappa, "exp-rk4")
        radius = [np.abs(np.linalg.eigvals(m)).max()
                  for m in stepping.exp_amplification(lam, h, np.linspace(0, kappa, 401))]
        assert max(radius) <= 1 + 1e-9
        radius = [np.abs(np.linalg.eigvals(m)).max()
                  for m in stepping.exp_amplification(lam, 1.02 * h, np.linspace(0, kappa, 401))]
        assert max(radius) > 1
    # not limited by λ: for small λ the step of gradient flow, not ∝ λ
    assert stepping.default_step(1e-6, kappa, "exp-rk4") == pytest.approx(stepping.default_step(0.0, kappa))
    assert stepping.max_stable_step(1e-6, kappa, "exp-rk4") > 1e4 * stepping.max_stable_step(1e-6, kappa)
    assert stepping.choose_scheme("auto", 1e-4, kappa) == "exp-rk4"
    assert stepping.choose_scheme("auto", 1.0, kappa) == "rk4"
    assert stepping.choose_scheme("auto", 0.0, kappa) == "rk4"
    res = dm.mgf(problem, 1e-4, t_max=1.0)
    assert res.config.scheme == "exp-rk4" and res.h == pytest.approx(1.0 / np.ceil(1.0 / res.h))
    assert res.h >= 0.99 * stepping.default_step(1e-4, kappa, "exp-rk4")
    assert dm.mgf(problem, 1e-4, t_max=1.0, scheme="rk4").config.scheme == "rk4"


def test_validation(problem):
    with pytest.raises(ValueError, match="scheme must be one of 'rk4', 'exp-rk4', 'rodas', 'ndf', 'auto'"):
        dm.mgf(problem, 1e-3, t_max=1.0, scheme="etd")
    with pytest.raises(ValueError, match="scheme must be 'rk4', 'rodas', 'ndf' or 'auto' for gradient flow"):
        dm.gf(problem, t_max=1.0, scheme="exp-rk4")
    with pytest.raises(ValueError, match=r"h must be in \(0, .*\] for MGF\(lambda=0.001\) with scheme 'exp-rk4'"):
        dm.mgf(problem, 1e-3, t_max=10.0, h=1.0, scheme="exp-rk4")
    with pytest.raises(ValueError, match="scheme must be 'rk4', 'rodas', 'ndf' or 'auto' for a line with lam = 0"):
        dm.sweep(problem, lams=[0.0, 0.1], t_max=1.0, scheme="exp-rk4")
    with pytest.raises(ValueError, match="scheme is for flow sweeps"):
        dm.sweep(problem, gammas=[0.1], betas=[0.5], steps=10, scheme="rk4")


# -- chunks, stores, resume -------------------------------------------------------------------------------

def _chunked(problem, lam, chunk, record=None):
    run = runs_flow.prepare_flow(problem, lam, t_max=10.0, record=record, scheme="exp-rk4")
    if chunk:
        run.chunk_steps = chunk
    status, blocks = drive(run)
    return run, run.finish(status, blocks)


@pytest.mark.parametrize("lam", [1e-3, 0.5])
def test_chunking_and_recording_do_not_change_bits(problem, lam):
    base_run, base = _chunked(problem, lam, None)
    assert base.config.start_steps > 1  # chunks also split the refined start and the layer
    if lam == 0.5:
        assert base.n_crossings > 0
    for chunk in (1, 7, 333):
        for record in (None, dm.Record(every=0.5)):
            if chunk == 1 and record is not None:
                continue
            run, res = _chunked(problem, lam, chunk, record)
            for name in ("fstate", "istate", "counters", "log_time", "log_coord", "log_sign"):
                assert np.array_equal(getattr(run, name), getattr(base_run, name), equal_nan=True), name
            if record is not None:
                assert np.array_equal(res.trajectory.theta[-1], base.theta)


def test_store_keeps_the_scheme_and_resume_uses_it(small_problem, tmp_path, monkeypatch):
    kwargs = dict(t_max=30.0, record=dm.Record(every=0.5), scheme="exp-rk4")
    live = dm.mgf(small_problem, 1e-3, **kwargs)
    assert live.config.scheme == "exp-rk4"
    run = runs_flow.prepare_flow(small_problem, 1e-3, **kwargs)
    run.chunk_steps = 50
    calls = []

    def hook(point):  # Ctrl-C after a few chunks
        calls.append(point)
        if point == "chunk" and calls.count("chunk") == 7:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(store_writer, "_TEST_HOOK", hook)
    path = tmp_path / "flow.h5"
    with sigint_default():
        first = S.run_with_store(run, path, checkpoint_every=0.0)
    monkeypatch.setattr(store_writer, "_TEST_HOOK", None)
    assert first.status_name == "interrupted" and 0 < first.steps_done < live.steps_done
    import h5py

    with h5py.File(path, "r") as f:
        assert json.loads(f.attrs["config"])["config"]["scheme"] == "exp-rk4"
    resumed = S.resume(path)
    assert resumed.config.scheme == "exp-rk4"
    assert_same_result(live, resumed)
    assert_same_result(live, S.open_store(path).result)


def test_configs_without_a_scheme_are_rk4(problem):
    """Stores written before the scheme existed hold configurations without it: they read as RK4."""
    run = runs_flow.prepare_flow(problem, 0.3, t_max=1.0)
    desc = json.loads(json.dumps(run.description()))
    del desc["config"]["scheme"]
    again = runs_flow.FlowRun.rebuild(problem, desc, run.u0, run.v0)
    assert again.config.scheme == "rk4"


# -- flow sweeps ----------------------------------------------------------------------------------------

def test_flow_sweep_with_mixed_schemes_equals_single_runs(problem):
    lams = [0.0, 1e-5, 1e-3, 0.05, 0.5]
    sw = dm.sweep(problem, lams=lams, t_max=8.0)
    schemes = set()
    for il, lam in enumerate(lams):
        res = dm.mgf(problem, lam, t_max=8.0)
        schemes.add(res.config.scheme)
        assert np.array_equal(sw["theta"][0, il], res.theta)
        assert np.array_equal(sw["s_plus"][0, il], res.i_plus, equal_nan=True)
        assert sw["train_loss"][0, il] == res.train_loss and sw["steps_done"][0, il] == res.steps_done
    assert schemes == {"rk4", "exp-rk4"}


SPEC = dict(n=12, d=30, s=4, n_test=20)


def _exp_runs(problems, specs, **kw):
    runs = []
    for p in problems:
        for lam, extra in specs:
            run = runs_flow.prepare_flow(p, lam, scheme="exp-rk4", **{**kw, **extra.get("args", {})})
            if "diverge" in extra:  # far outside the stability region, in the refined start or after it
                fine = extra["diverge"] == "fine"
                run.config = run.config._replace(h=5.0, n_steps=20, start_steps=3 if fine else 0,
                                                 start_substeps=4 if fine else 1)
                run.total = 20
            runs.append(run)
    return runs


@pytest.mark.parametrize("gradient", ["hessian", "data"])
def test_exp_lockstep_lanes_equal_single_runs_state_for_state(gradient):
    """Every array of every exponential lane is the single run's, bit for bit (layer, start, crossings, stops)."""
    problems = [dm.sparse_regression(**SPEC, seed=s) for s in (5, 6)]
    specs = [(1e-6, {}), (1e-3, {}), (0.05, {}), (0.6, {}), (0.1, {"args": {"tol": 0.03}}),
             (1e-4, {"args": {"refine_start": None}}), (0.5, {"args": {"h": 0.05}}),
             (0.3, {"args": {"u0": np.full(30, 1.0)}, "diverge": "coarse"}),
             (0.3, {"args": {"u0": np.full(30, 1.0)}, "diverge": "fine"})]
    kw = {"t_max": 25.0, "gradient": gradient}
    lockstep = _exp_runs(problems, specs, **kw)
    reps = [r for r in range(len(problems)) for _ in specs]

    class _Engine:
        seconds_per_step = None

    statuses = flows._flow_batch(lockstep, reps, {"signum": None}, None, _Engine())
    codes = {K.RUNNING: dm.MAX_STEPS, K.CONVERGED: dm.CONVERGED, K.DIVERGED: dm.DIVERGED}
    seen = set()
    for run, got, status in zip(_exp_runs(problems, specs, **kw), lockstep, statuses, strict=True):
        block = run.new_block(0)
        code = K.RUNNING
        while code == K.RUNNING and run.done < run.total:  # the single run, in uneven chunks
            code = run.advance(min(37, run.total - run.done), block, 0)
        assert codes[code] == status
        seen.add(status)
        for name, want in run.state_arrays().items():
            if name != "cursor":
                assert np.array_equal(getattr(got, name), want, equal_nan=True), name
    assert seen == {dm.MAX_STEPS, dm.CONVERGED, dm.DIVERGED}
    assert any(run.counters[K.N_CROSSINGS] > 0 for run in lockstep)


# -- command line ---------------------------------------------------------------------------------------

def test_cli_flow_scheme(capsys):
    from dlnmomentum.cli import main

    small = ["--n", "8", "--d", "12", "--s", "2", "--n-test", "10"]
    assert main(["flow", "--lam", "1e-4", "--t-max", "2", "--json", "--scheme", "exp-rk4", *small]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["scheme"] == "exp-rk4" and out["status_name"] == "max_steps"
    assert main(["flow", "--lam", "1e-4", "--t-max", "2", "--json", "--scheme", "rk4", *small]) == 0
    assert json.loads(capsys.readouterr().out)["config"]["scheme"] == "rk4"
    assert main(["flow", "--gf", "--t-max", "2", "--scheme", "exp-rk4", *small]) == 2
    assert "scheme must be 'rk4', 'rodas', 'ndf' or 'auto' for gradient flow" in capsys.readouterr().err
    assert main(["sweep", "--lams", "1e-4,0.5", "--t-max", "2", "--scheme", "exp-rk4", "--json", *small]) == 0
    assert json.loads(capsys.readouterr().out)["complete"]
    assert main(["sweep", "--lams", "0,0.5", "--t-max", "2", "--scheme", "exp-rk4", *small]) == 2
    assert "lam = 0" in capsys.readouterr().err


def test_mgf_from_mgd_takes_a_scheme():
    """mgf_from_mgd(scheme=...): the exponential scheme gives the same flow as RK4 (to 1e-10) with the grid its own
    step allows, and the scheme used is recorded."""
    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)
    exp = dm.mgf_from_mgd(problem, 1e-4, 0.0, steps=5000, scheme="exp-rk4")
    rk4 = dm.mgf_from_mgd(problem, 1e-4, 0.0, steps=5000, scheme="rk4")
    assert exp.config.scheme == "exp-rk4" and rk4.config.scheme == "rk4"
    assert exp.config.n_steps < rk4.config.n_steps  # RK4 needs h < 0.7 lambda = 0.7 eps: substeps
    scale = np.abs(rk4.theta).max()
    assert np.abs(exp.theta - rk4.theta).max() <= 1e-10 * scale
    assert dm.mgf_from_mgd(problem, 1e-4, 0.0, steps=10).config.scheme == "exp-rk4"  # auto


def test_resuming_a_sweep_with_another_scheme_says_how_to_continue(tmp_path):
    path = str(tmp_path / "line.h5")
    spec = dict(n=10, d=12, s=2)
    dm.sweep(spec, lams=[0.001, 0.1], t_max=5, store=path, scheme="rk4", progress=False)
    with pytest.raises(dm.StoreError, match="differs in scheme.*scheme 'rk4'.*resume_sweep"):
        dm.sweep(spec, lams=[0.001, 0.1], t_max=5, store=path, resume=True, progress=False)
    assert dm.sweep(spec, lams=[0.001, 0.1], t_max=5, store=path, resume=True, scheme="rk4").complete
