"""Gradient flow by the variable-order NDF (``scheme="ndf"``, kernels/flow_ndf.py), against independent references.

References: SciPy's own BDF coefficients (its ``BDF`` solver's attributes), polynomials evaluated by NumPy for the
difference array and its interpolant, and SciPy's Radau at rtol 1e-13 on gradient flow in the mirror coordinate
P (with G₂ = ∫g⊙g as extra rows), written here in NumPy from the paper's equations.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.integrate._ivp.bdf import BDF, change_D

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.driver import drive
from dlnmomentum.kernels import flow_ndf as KN
from dlnmomentum.runs.flow_adaptive import CHUNK_STEPS, adaptive_chunk_steps, prepare_flow_run


def _mirror_reference(problem, t_eval, alpha=0.01):
    """(θ, G₂, w₊, w₋, ẇ₊) at the times ``t_eval`` from Radau on Ṗ = g(θ(P)), Ġ₂ = g⊙g (data form, NumPy)."""
    X, y = problem.X, problem.y
    n, d = X.shape
    wp0 = np.full(d, alpha)  # u0 = α, v0 = 0: w± = u0 ± v0
    wm0 = np.full(d, alpha)

    def theta_of(P):
        return (wp0 ** 2 * np.exp(-2 * P) - wm0 ** 2 * np.exp(2 * P)) / 4

    def grad(P):
        return X.T @ (X @ theta_of(P) - y) / n

    def rhs(t, z):
        g = grad(z[:d])
        return np.concatenate([g, g * g])

    def jac(t, z):
        P = z[:d]
        sig = (wp0 ** 2 * np.exp(-2 * P) + wm0 ** 2 * np.exp(2 * P)) / 2
        A = -(X.T @ X / n) * sig[None, :]
        out = np.zeros((2 * d, 2 * d))
        out[:d, :d] = A
        out[d:, :d] = 2 * grad(P)[:, None] * A
        return out

    sol = solve_ivp(rhs, (0.0, max(t_eval)), np.zeros(2 * d), method="Radau", jac=jac, rtol=1e-13, atol=1e-16,
                    t_eval=t_eval)
    assert sol.success
    out = []
    for k in range(len(t_eval)):
        P, G2 = sol.y[:d, k], sol.y[d:, k]
        wp, wm = wp0 * np.exp(-P), wm0 * np.exp(P)
        out.append((theta_of(P), G2, wp, wm, -grad(P) * wp))
    return out


# -- the method's coefficients and its difference array -------------------------------------------------

def test_coefficients_are_scipys_bdf():
    solver = BDF(lambda t, y: -y, 0.0, np.ones(1), 1.0)
    assert np.array_equal(KN.ALPHA_NDF, solver.alpha)
    assert np.array_equal(KN.GAMMA_SUM, solver.gamma)
    assert np.array_equal(KN.ERROR_CONST, solver.error_const)


def _backward_differences(values, order):
    """D[j] = ∇ʲy_n of the values y_n, y_{n-1}, ... (``values[0]`` the newest)."""
    D = np.zeros((KN.N_D_ROWS,) + values.shape[1:])
    diffs = values.copy()
    for j in range(order + 1):
        D[j] = diffs[0]
        diffs = diffs[:-1] - diffs[1:]
    return D


@pytest.mark.parametrize("order", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("factor", [0.2, 0.5, 1.7, 10.0])
def test_difference_array_interpolates_and_rescales_a_polynomial_exactly(order, factor):
    """A polynomial of degree ``order`` is its own interpolant: ``_dense_p`` gives it anywhere, and ``_change_D``
    re-expresses it at the spacing h·factor without changing it."""
    rng = np.random.default_rng(order)
    d, t, h = 3, 5.0, 0.3
    coef = rng.normal(size=(order + 1, d))

    def q(s):
        return np.array([np.polyval(coef[:, i], s) for i in range(d)])

    D = np.zeros((KN.N_D_ROWS, 2, d))
    D[:, 0, :] = _backward_differences(np.array([q(t - i * h) for i in range(order + 1)]), order)
    out = np.empty(d)
    for tr in (t, t - 0.5 * h, t - h, t + 0.25 * h):
        KN._dense_p(D, order, t, h, tr, out)
        assert np.allclose(out, q(tr), rtol=1e-12, atol=1e-12)
    k = KN.MAX_ORDER + 1
    scipy_D = D[:, 0, :].copy()
    change_D(scipy_D, order, factor)  # SciPy's own implementation, the reference
    KN._change_D(D, order, factor, np.empty((k, k)), np.empty((k, k)), np.empty((k, k)), np.empty((k, 2, d)))
    scale = np.abs(scipy_D[:order + 1]).max()
    assert np.abs(D[:order + 1, 0] - scipy_D[:order + 1]).max() < 1e-13 * scale
    # the same polynomial at the new spacing (to the rounding that factor**order amplifies)
    want = _backward_differences(np.array([q(t - i * h * factor) for i in range(order + 1)]), order)
    assert np.abs(D[:order + 1, 0] - want[:order + 1]).max() < 1e-9 * scale
    for tr in (t, t - 0.5 * h * factor, t - h * factor):
        KN._dense_p(D, order, t, h * factor, tr, out)
        assert np.abs(out - q(tr)).max() < 1e-9 * scale


@pytest.mark.parametrize("order", [2, 3, 4, 5])
@pytest.mark.parametrize("turn", [-0.9, -0.5, -0.1])
def test_turn_search_finds_the_extreme_of_the_step_polynomial(order, turn):
    """``_turn_peaks`` on a polynomial P of degree ``order`` with one turn at fraction ``turn`` of the step: the
    largest w² there, w₊(0)²e^{-2P} at a minimum of P, w₋(0)²e^{2P} at a maximum, to the rounding; and the closed
    forms of the slopes at the step's ends (``SLOPE_AT_START``, ``SLOPE_AT_END``) are the polynomial's."""
    from dlnmomentum.kernels import ndf_dense as ND
    from dlnmomentum.kernels.flow import MAX_W2
    h = 0.8
    s_turn = turn * h
    # P(s) = c + a (s − s*)² (1 + small odd terms) has its only turn in [−h, 0] at s* (P' = 0 there only)
    coef_extra = np.zeros(order + 1)
    if order > 2:
        coef_extra[-4] = 0.01  # a cubic term: (s − s*)³ keeps P'(s*) = 0
    signs = [1.0, -1.0]  # a minimum (w₊² peaks) and a maximum (w₋² peaks) in the two coordinates

    def P(s):
        z = s - s_turn
        out = np.array([0.3 + sg * (z * z + (0.01 * z ** 3 if order > 2 else 0.0)) for sg in signs])
        return out + (1e-3 * z ** order if order > 3 else 0.0)  # a term of the full degree, flat at s*

    D = np.zeros((8, 2, 2))
    D[:, 0, :] = _backward_differences(np.array([P(-i * h) for i in range(order + 1)]), order)
    for s in (0.0, -h):  # the closed forms against a central difference of the polynomial
        slope = (P(s + 1e-6) - P(s - 1e-6)) / 2e-6
        closed = np.array([sum(D[j, 0, q] * (ND.SLOPE_AT_END if s == 0.0 else ND.SLOPE_AT_START)[j]
                               for j in range(1, order + 1)) for q in range(2)]) / h
        assert np.allclose(closed, slope, rtol=1e-7, atol=1e-9)
    w_init = np.array([[0.5, 0.5], [0.2, 0.2]])
    fstate = np.zeros((20, 2))
    F = np.zeros((2, 2))
    F[0] = (P(-h + 1e-7) - P(-h)) / 1e-7  # ∇L's sign at the step's start, at its end below
    g = (P(1e-7) - P(0.0)) / 1e-7
    assert np.all(np.sign(F[0]) != np.sign(g))
    ND._turn_peaks(D, order, h, w_init, F, g, fstate, np.empty((2, ND.MAX_ORDER + 1)))
    p_star = P(s_turn)
    want = [max((w_init[0, q] * np.exp(-p_star[q])) ** 2, (w_init[1, q] * np.exp(p_star[q])) ** 2) for q in range(2)]
    np.testing.assert_allclose(fstate[MAX_W2], want, rtol=1e-13)


# -- accuracy against Radau ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def reference(problem):
    return dict(zip((20.0, 2000.0), _mirror_reference(problem, [20.0, 2000.0]), strict=True))


@pytest.mark.parametrize("t_max", [20.0, 2000.0])
def test_default_call_agrees_with_radau_on_every_row(problem, reference, t_max):
    """θ (the issue's 1e-10 at t = 2000), G₂ = J±, w± and ẇ± of the default tolerances; Δ = Δ₀ up to a rounding."""
    res = dm.gf(problem, t_max=t_max, scheme="ndf")
    theta, G2, wp, wm, vp = reference[t_max]
    assert res.config.scheme == "ndf" and res.status_name == "max_steps" and res.t_done == t_max
    assert np.abs(res.theta - theta).max() < (5e-10 if t_max == 20.0 else 1e-10)
    assert np.abs(res.j_plus - G2).max() < 1e-8 * max(1.0, np.abs(G2).max())
    assert np.array_equal(res.j_plus, res.j_minus)
    assert np.abs(res.w_plus - wp).max() < 5e-10 and np.abs(res.w_minus - wm).max() < 5e-10
    assert np.abs(res.w_plus_dot - vp).max() < 5e-9
    assert np.allclose(res.min_delta, np.abs(res.w_plus * res.w_minus), rtol=1e-14)


def test_error_falls_with_the_tolerance(problem, reference):
    """The global error follows rtol (about 16·rtol on this problem): a tighter tolerance is a better answer."""
    theta = reference[20.0][0]
    errors = [np.abs(dm.gf(problem, t_max=20.0, scheme="ndf", rtol=r).theta - theta).max()
              for r in (1e-8, 1e-10, 1e-12)]
    assert errors[0] > 30 * errors[1] > 30 * 30 * errors[2] / 3
    assert errors[2] < 5e-11


def test_records_come_from_the_interpolant(problem):
    """Rows at times inside steps are the difference array's polynomial there, as accurate as the steps' ends."""
    times = [0.3, 1.7, 4.0, 9.99, 20.0]
    res = dm.gf(problem, t_max=20.0, scheme="ndf", record=dm.Record(times=times))
    tr = res.trajectory
    assert np.array_equal(tr.time, [0.0, *times])
    assert np.all(np.diff(tr.step) >= 0) and tr.step[-1] == res.steps_done
    for k, (theta, _, wp, _, vp) in enumerate(_mirror_reference(problem, times), start=1):
        assert np.abs(tr.theta[k] - theta).max() < 5e-9, times[k - 1]
        assert np.abs(tr.w_plus[k] - wp).max() < 5e-9
        assert np.abs(tr.extra["w_plus_dot"][k] - vp).max() < 5e-8


# -- runs to the limit, extremes, bits -----------------------------------------------------------------

def test_a_run_to_the_limit_agrees_with_rodas_and_theorem_1(problem):
    """The default call (auto: ndf) and Rodas5P end at the same interpolator; the NDF in fewer right-hand sides."""
    ndf = dm.gf(problem, t_max=1e7, tol=1e-20)
    rodas = dm.gf(problem, t_max=1e7, tol=1e-20, scheme="rodas")
    assert ndf.config.scheme == "ndf" and ndf.status_name == "converged" and ndf.train_loss <= 1e-20
    assert np.abs(ndf.theta - rodas.theta).max() < 1e-9
    assert ndf.prediction_gap <= 1e-8
    assert ndf.rhs_evaluations < rodas.rhs_evaluations and ndf.factorizations < rodas.factorizations / 2


@pytest.mark.parametrize("alpha", [1e-150, 1e-8, 1.0])
def test_extreme_initial_scales_agree_with_rodas(problem, alpha):
    """At alpha = 1e-150 the weights grow by 150 orders of magnitude: a Jacobian kept from the start let BDF5 run
    unstable (the train loss rose to 2e23 and the run ended 'diverged'); each new matrix now takes the Jacobian
    at its step."""
    ndf = dm.gf(problem, t_max=1e4 if alpha < 1 else 300.0, alpha=alpha, scheme="ndf")
    rodas = dm.gf(problem, t_max=ndf.t_done, alpha=alpha, scheme="rodas")
    assert ndf.status_name == "max_steps", ndf.message
    assert np.abs(ndf.theta - rodas.theta).max() < 1e-8


def _chunked(problem, chunk, record=None, rows=None):
    run = prepare_flow_run(problem, 0.0, t_max=500.0, scheme="ndf", record=record)
    if chunk is not None:
        run.chunk_steps = chunk
    if rows is not None:
        run.block_rows = lambda n, _f=run.block_rows: min(_f(n), rows)
    status, blocks = drive(run)
    return run, run.finish(status, blocks)


@pytest.mark.parametrize("record", [dm.Record(every=0.7), dm.Record(accepted=True)], ids=["every", "accepted"])
def test_chunks_and_record_blocks_change_no_bit_nor_count(problem, record):
    """The factorisation is rebuilt where a call starts, from the state (P_J, c), and not counted again."""
    base_run, base = _chunked(problem, None, record)
    assert set(base_run.state_arrays()) >= {"sstate", "difference", "p_jac"}
    for chunk, rows in ((1, None), (7, 3), (333, 1)):
        run, res = _chunked(problem, chunk, record, rows)
        for name, arr in base_run.state_arrays().items():
            assert np.array_equal(getattr(run, name), arr, equal_nan=True), (name, chunk)
        for name, arr in base.trajectory.fields().items():
            assert np.array_equal(res.trajectory.fields()[name], arr, equal_nan=True), (name, chunk, rows)
        assert (res.rhs_evaluations, res.factorizations) == (base.rhs_evaluations, base.factorizations)


def test_chunks_hold_a_bounded_work_per_scheme():
    """A chunk is about CHUNK_WORK multiply-adds of its own scheme's step (the NDF's is the cheaper, so its chunk
    is the longer), never none and never over the scheme's cap; the run takes its scheme's."""
    for n, d in ((20, 30), (100, 200), (100, 1000), (50, 3000)):
        steps = {s: adaptive_chunk_steps(n, d, s) for s in CHUNK_STEPS}
        for scheme, k in steps.items():
            assert 1 <= k <= CHUNK_STEPS[scheme], (scheme, n, d, k)
        assert steps["ndf"] >= steps["rodas"], (n, d, steps)
    assert adaptive_chunk_steps(100, 200, "ndf") > 5 * adaptive_chunk_steps(100, 200, "rodas")
    problem = dm.sparse_regression(n=12, d=16, s=3, seed=0)
    for scheme in CHUNK_STEPS:
        run = prepare_flow_run(problem, 0.0, t_max=10.0, scheme=scheme)
        assert run.chunk_steps == adaptive_chunk_steps(12, 16, scheme)


def test_a_gradient_flow_sweep_point_is_its_single_run():
    spec = dict(n=12, d=16, s=3)
    sw = dm.sweep(spec, lams=[0.0], t_max=1e7, tol=1e-20, reps=2, scheme="ndf", progress=False)
    for rep in (0, 1):
        single = dm.gf(dm.sparse_regression(**spec, seed=rep), t_max=1e7, tol=1e-20, scheme="ndf")
        assert np.array_equal(np.asarray(sw.data["theta"])[rep, 0], single.theta)
        assert np.asarray(sw.data["steps_done"])[rep, 0] == single.steps_done


# -- refusals ------------------------------------------------------------------------------------------

def test_mgf_is_refused_by_name(problem, capsys):
    with pytest.raises(ValueError, match=r"scheme 'ndf' is for gradient flow \(lam = 0\), got lam = 0.5"):
        dm.mgf(problem, 0.5, t_max=10.0, scheme="ndf")
    with pytest.raises(ValueError, match="scheme 'ndf' is for gradient flow .* and the line has lam > 0"):
        dm.sweep(dict(n=12, d=16, s=3), lams=[0.0, 0.1], t_max=10.0, scheme="ndf")
    with pytest.raises(ValueError, match="h is for the fixed-grid schemes"):
        dm.gf(problem, t_max=10.0, scheme="ndf", h=0.01)
    assert main(["flow", "--lam", "0.5", "--t-max", "10", "--scheme", "ndf", "--n", "12", "--d", "16",
                 "--s", "3"]) == 2
    assert "scheme 'ndf' is for gradient flow" in capsys.readouterr().err
