"""The theory fields of runs and sweep points on the edge cases a researcher meets, against references written
here from the paper's equations (plain NumPy loops, mpmath, SciPy's DOP853 with events and dense output).

MGD/SMGD: β near 0 and near 1, tiny γ and γ just below divergence, with and without replacement, explicit
unbalanced initialisations with negative entries, runs stopped by ``tol`` or by the budget; the fields
S± (Lemma 4), crossing counts and steps, min Δ, Δ∞, θ̃0 (Theorem 2), the mirror variable G_N of
eq. (MGDmirror) and the identities that tie them. Flows, every scheme: crossing counts, times, coordinates and
signs (MGF λ = 0.5 crosses 51 times on the paper's problem), I±, Δ∞, θ̃0 (Theorem 1), P, ∫∇L², J± (Corollary 2),
min Δ, and the exact finite-time identity between the two routes to I±. Sweep points: ``theory_reason`` says why
a prediction is missing.
"""

import warnings

import mpmath as mp
import numpy as np
import pytest
from reference import mirror_double_sum, smgd_uv
from scipy.integrate import quad, solve_ivp

import dlnmomentum as dm
from dlnmomentum.runs.mgd import batch_indices
from dlnmomentum.runs.points import TheoryReason, theory_fields


@pytest.fixture(scope="module")
def small():
    return dm.sparse_regression(n=6, d=10, s=2, seed=1, n_test=10)


def _lemma4(w, beta):
    """S of Lemma 4 term by term over the rows of ``w`` (k = 1, 2, ...), r(z) = z - 1 - ln|z|."""
    z = w[1:] / w[:-1]
    r = lambda z: (z - 1.0) - np.log(np.abs(z))  # noqa: E731
    return (r(z) + beta * r(1.0 / z)).sum(axis=0) / (1.0 - beta)


def _crossing_steps(w):
    """Per column: (number of sign changes, step of the first, step of the last; -1 where none), a sign change
    being counted at the update after which the sign differs."""
    flips = (w[1:] < 0) != (w[:-1] < 0)
    count = flips.sum(axis=0)
    first = np.where(count > 0, np.argmax(flips, axis=0) + 1, -1)
    last = np.where(count > 0, w.shape[0] - 1 - np.argmax(flips[::-1], axis=0), -1)
    return count, first, last


_RNG = np.random.default_rng(0)
_U0 = _RNG.normal(size=10) * 0.05  # unbalanced, negative entries: w±0 of both signs
_V0 = _RNG.normal(size=10) * 0.05

MGD_CASES = {
    "beta=0": (0.01, 0.0, 2000, {}),
    "beta=1e-6": (0.01, 1e-6, 2000, {}),
    "beta=0.99": (0.01, 0.99, 2000, {}),
    "gamma=1e-6": (1e-6, 0.5, 2000, {}),
    "large gamma*beta": (0.5, 0.9, 2000, {}),
    "just below divergence, beta=0.9": (0.65, 0.9, 2000, {}),
    "just below divergence, beta=0.99": (0.25, 0.99, 6000, {}),
    "smgd": (0.05, 0.9, 2000, {"batch_size": 2}),
    "smgd with replacement": (0.05, 0.9, 2000, {"batch_size": 2, "replace": True}),
    "unbalanced negative init": (0.05, 0.9, 2000, {"u0": _U0, "v0": _V0}),
    "stopped by tol": (0.05, 0.9, 40000, {"tol": 1e-20}),
}


@pytest.mark.parametrize("case", list(MGD_CASES))
def test_mgd_theory_fields_match_the_paper_term_by_term(small, case):
    """The fields from the paper's formulas applied to the run's own iterates (recorded at every step), and the
    iterates against the (u, v) recursion of eq. (SMGD:diag) where the run is not chaotic (just below divergence,
    rounding differences grow to 1e-6 after a few thousand steps)."""
    gamma, beta, steps, kw = MGD_CASES[case]
    res = dm.mgd(small, gamma, beta, steps=steps, record=dm.Record(every=1), **kw)
    assert res.status_name in ("max_steps", "converged")
    k = res.steps_done
    tr = res.trajectory
    wp, wm = tr.w_plus, tr.w_minus
    assert len(tr) == k + 1 and np.array_equal(wp[-1], res.w_plus) and np.array_equal(wm[-1], res.w_minus)
    batches = None
    if "batch_size" in kw:
        batches = batch_indices(small.n, kw["batch_size"], k, seed=0, replace=kw.get("replace", False))
    if "divergence" not in case:
        u0 = 0.5 * (res.w_plus0 + res.w_minus0)
        v0 = 0.5 * (res.w_plus0 - res.w_minus0)
        ref_p, ref_m, _ = smgd_uv(small.X, small.y, gamma, beta, k, u0, v0, batches)
        for got, want in ((wp, ref_p), (wm, ref_m)):  # (near a crossing: relative to the scale of w)
            np.testing.assert_allclose(got, want, rtol=1e-8, atol=1e-9 * np.abs(want).max())
    # exact identities of the result: θ = (w₊² - w₋²)/4 = u⊙v, Δ∞ = |w₊w₋| = |u² - v²|
    np.testing.assert_allclose(res.theta, res.u * res.v, rtol=1e-14, atol=1e-300)
    assert np.all(np.abs(res.delta_inf - np.abs(res.u**2 - res.v**2)) <= 4e-16 * (res.u**2 + res.v**2))
    # Lemma 4, Theorem 2
    sp, sm = _lemma4(wp, beta), _lemma4(wm, beta)
    np.testing.assert_allclose(res.s_plus, sp, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(res.s_minus, sm, rtol=1e-9, atol=1e-11)
    np.testing.assert_array_equal(res.delta_inf, np.abs(wp[-1] * wm[-1]))
    with np.errstate(over="ignore"):  # (θ̃0 overflows after ~190 sign changes at β = 0.99)
        theta0 = 0.25 * (wp[0] ** 2 * np.exp(-2 * sp) - wm[0] ** 2 * np.exp(-2 * sm))
    big = ~np.isfinite(theta0)
    np.testing.assert_array_equal(res.theta0_tilde[big], theta0[big])
    # (θ̃0 is a difference of two terms of size w±0²: its error is measured against them)
    scale = max(np.abs(theta0[~big]).max(), (wp[0] ** 2).max(), (wm[0] ** 2).max())
    np.testing.assert_allclose(res.theta0_tilde[~big], theta0[~big], rtol=1e-8, atol=1e-12 * scale)
    # its mirror coordinate arcsinh(2θ̃0/Δ∞), finite where θ̃0 overflows, in mpmath
    mp.mp.dps = 30
    for i in range(small.d):
        t0 = (mp.mpf(wp[0, i]) ** 2 * mp.exp(-2 * mp.mpf(sp[i])) - mp.mpf(wm[0, i]) ** 2 * mp.exp(-2 * mp.mpf(sm[i])))
        want = float(mp.asinh(2 * t0 / 4 / mp.mpf(res.delta_inf[i])))
        assert abs(res.theta0_tilde_mirror[i] - want) <= 1e-8 * max(1.0, abs(want))
    # crossings: counts, first and last step, per coordinate and sign
    for side, w in (("plus", wp), ("minus", wm)):
        count, first, last = _crossing_steps(w)
        np.testing.assert_array_equal(getattr(res, f"crossings_{side}"), count)
        np.testing.assert_array_equal(getattr(res, f"first_crossing_{side}"), first)
        np.testing.assert_array_equal(getattr(res, f"last_crossing_{side}"), last)
    assert res.crossed == bool((_crossing_steps(wp)[0] + _crossing_steps(wm)[0]).any())
    np.testing.assert_array_equal(res.min_delta, np.abs(wp * wm).min(axis=0))
    # eq. (MGDmirror): G_N by its double sum over the gradients at the recorded θ_1 ... θ_N
    theta = tr.theta[:-1]
    if batches is None:
        grads = (theta @ small.X.T - small.y) @ small.X / small.n
    else:
        grads = np.stack([small.X[b].T @ (small.X[b] @ th - small.y[b]) / len(b)
                          for th, b in zip(theta, batches, strict=True)])
    np.testing.assert_allclose(res.mirror, mirror_double_sum(grads, gamma, beta), rtol=1e-9,
                               atol=1e-12 * np.abs(res.mirror).max())


def test_mgd_mirror_identity_at_convergence(small):
    """w_{±,N+1} = α_{±,N+1} e^{∓G_N} and α_{±,N} → w_{±,0} e^{-S±}: ln|w_±/w_{±,0}| ± G + S± → 0 at the limit
    (the tail Σ β^{N+1-m} Q_m is below the float64 rounding of a converged run), to near machine precision,
    and the limit solves ½arcsinh(2θ/Δ∞) - ½arcsinh(2θ̃0/Δ∞) = -G (the optimality of Theorem 2)."""
    for gamma, beta, kw in [(0.3, 0.9, {}), (0.05, 0.9, {"u0": _U0, "v0": _V0}), (0.02, 0.99, {}),
                            (0.05, 0.9, {"batch_size": 2})]:
        res = dm.mgd(small, gamma, beta, steps=400_000, tol=1e-26, **kw)
        assert res.status_name == "converged" and res.crossed
        ep = np.log(np.abs(res.w_plus / res.w_plus0)) + res.mirror + res.s_plus
        em = np.log(np.abs(res.w_minus / res.w_minus0)) - res.mirror + res.s_minus
        assert np.abs(ep).max() < 1e-10 and np.abs(em).max() < 1e-10
        # Theorem 2's Δ∞ = Δ0 e^{-(S₊+S₋)} (the sum of the two identities; at the limit only)
        np.testing.assert_allclose(res.delta_inf, res.delta0 * np.exp(-(res.s_plus + res.s_minus)), rtol=1e-10)
        lhs = 0.5 * np.arcsinh(2 * res.theta / res.delta_inf) - 0.5 * res.theta0_tilde_mirror
        assert np.abs(lhs + res.mirror).max() < 1e-10
        assert res.prediction_gap < 1e-9


def test_lemma4_sums_are_accurate_in_absolute_terms_at_tiny_gamma(small):
    """At γ = 1e-10, S± ~ 1e-17: the kernel's telescoped sum is accurate to ~1e-16 absolute (not relative: its
    terms are O(γ) and the sum O(γ²)), which keeps Δ∞ = Δ0 e^{-(S₊+S₋)} and θ̃0 to float64 precision; an
    mpmath sum of r(z) over the run's own iterates is the reference."""
    mp.mp.dps = 40
    res = dm.mgd(small, 1e-10, 0.5, steps=300, record=dm.Record(every=1))

    def exact(w):
        r = lambda z: (z - 1) - mp.log(abs(z))  # noqa: E731
        total = mp.mpf(0)
        for a, b in zip(w[:-1], w[1:], strict=True):
            z = mp.mpf(b) / mp.mpf(a)
            total += r(z) + mp.mpf(0.5) * r(1 / z)
        return float(total / mp.mpf(0.5))

    for i in (0, 3):
        assert abs(res.s_plus[i] - exact(res.trajectory.w_plus[:, i])) < 1e-14
        assert abs(res.s_minus[i] - exact(res.trajectory.w_minus[:, i])) < 1e-14


# -- an iterate exactly 0, Δ∞ = 0: the sweep point says why there is no prediction ---------------------------


def _exact_zero_problem():
    # γ∇L(θ_1) = 0.5·(0 - 2) = -1 exactly, so w_{-,2} = w_{-,1}(1 + γ∇L) = 0: the iterate lands on zero.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (d = 1 <= n = 1: not overparametrised)
        return dm.Problem(np.array([[1.0]]), np.array([2.0]))


def test_sweep_point_with_an_iterate_exactly_zero_says_no_reference():
    problem = _exact_zero_problem()
    u0, v0 = np.array([0.01]), np.array([0.0])
    wp, wm, _ = smgd_uv(problem.X, problem.y, 0.5, 0.5, 3, u0, v0)
    assert wm[1, 0] == 0.0 and wm[2, 0] < 0.0  # the reference lands on 0, then crosses
    res = dm.mgd(problem, 0.5, 0.5, steps=200)
    assert res.train_loss <= 1e-8 and np.isnan(res.s_minus[0]) and np.isnan(res.theta0_tilde[0])
    with pytest.raises(ValueError, match="exactly 0"):
        res.prediction()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no "theory prediction failed" warning either
        sw = dm.sweep(problem, gammas=[0.5], betas=[0.5], steps=200, theory=True, progress=False)
    assert sw.theory_reason_names[0, 0, 0] == "no_reference"
    assert np.isnan(sw.prediction_gap[0, 0, 0])
    assert "exactly 0" in TheoryReason.NO_REFERENCE.message


def test_theory_fields_with_a_zero_delta_inf_say_assumption_2_fails(small):
    theta = np.linalg.lstsq(small.X, small.y, rcond=None)[0]
    delta = np.full(small.d, 1e-4)
    delta[3] = 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        out = theory_fields(small, theta, delta, np.zeros(small.d), dm.Status.CONVERGED, 0.0, 1e-8)
    assert out["theory_reason"] == TheoryReason.ZERO_DELTA_INF and np.isnan(out["prediction_gap"])
    assert "Assumption 2" in TheoryReason.ZERO_DELTA_INF.message


# -- flows -----------------------------------------------------------------------------------------------------


def _mgf_reference(H, b, lam, t_max, wp0, wm0, vp0, vm0):
    """MGF(λ) in (w₊, w₋, ẇ₊, ẇ₋) with P = ∫∇L and G₂ = ∫∇L² by DOP853 at rtol 1e-12, an event at every zero of
    every coordinate of w±, and J± = ∫(ẇ/w)² by quadrature of the dense output where a coordinate never
    crosses."""
    d = b.shape[0]

    def rhs(t, z):
        wp, wm, vp, vm = z[:d], z[d:2 * d], z[2 * d:3 * d], z[3 * d:4 * d]
        g = H @ ((wp * wp - wm * wm) / 4) - b
        return np.concatenate([vp, vm, -(vp + g * wp) / lam, -(vm - g * wm) / lam, g, g * g])

    def zero_of(j):
        return lambda t, z: z[j]

    events = [zero_of(j) for j in range(2 * d)]
    z0 = np.concatenate([wp0, wm0, vp0, vm0, np.zeros(2 * d)])
    sol = solve_ivp(rhs, (0.0, t_max), z0, method="DOP853", rtol=1e-12, atol=1e-16, events=events,
                    dense_output=True)
    assert sol.success, sol.message
    z = sol.y[:, -1]
    J = np.full(2 * d, np.nan)
    grid = np.concatenate([[0.0], np.geomspace(1e-3, t_max, 60)])
    for j in range(2 * d):
        if len(sol.t_events[j]) == 0:
            def f(t, j=j):
                y = sol.sol(t)
                return (y[2 * d + j] / y[j]) ** 2
            J[j] = sum(quad(f, a, c, epsabs=0, epsrel=1e-12, limit=200)[0]
                       for a, c in zip(grid[:-1], grid[1:], strict=True))
    return {"sol": sol, "wp": z[:d], "wm": z[d:2 * d], "P": z[4 * d:5 * d], "G2": z[5 * d:], "J": J,
            "times": sol.t_events}


@pytest.fixture(scope="module")
def paper():
    return dm.sparse_regression(seed=0)


FLOW_CASES = {
    "lam=0.5, 51 crossings": ("paper", 0.5, 100.0, {}),
    "lam=0.5, unbalanced negative init": ("small", 0.5, 60.0, {"u0": _U0, "v0": _V0}),
    "lam=0.05, initial velocity": ("small", 0.05, 60.0, {"u0": _U0, "v0": _V0, "u_dot0": _U0[::-1] / 3,
                                                          "v_dot0": _V0[::-1] / 3}),
}


@pytest.mark.parametrize("scheme", ["rk4", "exp-rk4", "rodas"])
@pytest.mark.parametrize("case", list(FLOW_CASES))
def test_flow_theory_fields_match_a_dop853_reference(request, case, scheme):
    which, lam, t_max, kw = FLOW_CASES[case]
    problem = request.getfixturevalue(which)
    res = dm.mgf(problem, lam, t_max=t_max, scheme=scheme, **kw)
    assert res.config.scheme == scheme and res.status_name == "max_steps"
    d, t = problem.d, res.t_done
    ref = _mgf_reference(problem.hessian, problem.b, lam, t, res.w_plus0, res.w_minus0, res.w_plus_dot0,
                         res.w_minus_dot0)
    # crossings: counts, first/last times per coordinate, and the log sorted by time with coordinate and sign
    counts = np.array([len(te) for te in ref["times"]])
    np.testing.assert_array_equal(res.crossings_plus, counts[:d])
    np.testing.assert_array_equal(res.crossings_minus, counts[d:])
    log = sorted((te, j % d, 1 if j < d else -1) for j in range(2 * d) for te in ref["times"][j])
    assert res.n_crossings == len(log) and len(res.crossing_times) == len(log)
    np.testing.assert_allclose(res.crossing_times, [e[0] for e in log], rtol=0, atol=1e-7)
    np.testing.assert_array_equal(res.crossing_coords, [e[1] for e in log])
    np.testing.assert_array_equal(res.crossing_signs, [e[2] for e in log])
    for k, side in enumerate(("plus", "minus")):
        for pick, name in ((0, "first"), (-1, "last")):
            want = np.array([te[pick] if len(te) else np.nan for te in ref["times"][k * d:(k + 1) * d]])
            np.testing.assert_allclose(getattr(res, f"{name}_crossing_{side}"), want, rtol=0, atol=1e-7)
    crossed = (res.crossings_plus + res.crossings_minus) > 0
    assert res.crossed == bool(crossed.any()) and res.delta_stayed_positive == (not crossed.any())
    # Theorem 1 through α± = w± e^{±P}
    i_plus = np.log(np.abs(res.w_plus0)) - (np.log(np.abs(ref["wp"])) + ref["P"])
    i_minus = np.log(np.abs(res.w_minus0)) - (np.log(np.abs(ref["wm"])) - ref["P"])
    np.testing.assert_allclose(res.i_plus, i_plus, rtol=0, atol=5e-8)
    np.testing.assert_allclose(res.i_minus, i_minus, rtol=0, atol=5e-8)
    np.testing.assert_allclose(res.delta_inf, res.delta0 * np.exp(-(i_plus + i_minus)), rtol=5e-8)
    theta0 = 0.25 * (res.w_plus0**2 * np.exp(-2 * i_plus) - res.w_minus0**2 * np.exp(-2 * i_minus))
    np.testing.assert_allclose(res.theta0_tilde, theta0, rtol=1e-6, atol=1e-8 * np.abs(theta0).max())
    np.testing.assert_allclose(res.p_integral, ref["P"], rtol=0, atol=1e-8)
    np.testing.assert_allclose(res.grad_sq_integral, ref["G2"], rtol=1e-8)
    np.testing.assert_allclose(res.theta, res.u * res.v, rtol=1e-14, atol=1e-300)
    # J± where the coordinate never crossed (Corollary 2's integrand); NaN after a crossing
    J = np.concatenate([res.j_plus, res.j_minus])
    np.testing.assert_array_equal(np.isnan(J), np.isnan(ref["J"]))
    np.testing.assert_allclose(J[~np.isnan(J)], ref["J"][~np.isnan(ref["J"])], rtol=1e-6)
    # min Δ: 0 where a coordinate crossed, the minimum along the dense reference elsewhere
    Z = ref["sol"].sol(np.linspace(0.0, t, 100_001))
    assert np.all(res.min_delta[crossed] == 0.0)
    np.testing.assert_allclose(res.min_delta[~crossed], np.abs(Z[:d] * Z[d:2 * d]).min(axis=1)[~crossed],
                               rtol=1e-7)


@pytest.mark.parametrize("scheme", ["rk4", "exp-rk4", "rodas"])
def test_flow_routes_to_i_differ_by_the_exact_finite_time_terms(small, scheme):
    """From eq. (w-formula-new) at finite t, I± (through α±) - λ(J± - ġ±0) = λġ±0 e^{-t/λ} - λK± ∓ Q."""
    lam = 0.05
    res = dm.mgf(small, lam, t_max=60.0, scheme=scheme, u0=_U0, v0=_V0, u_dot0=_U0[::-1] / 3,
                 v_dot0=_V0[::-1] / 3)
    assert not res.crossed
    t = res.t_done
    gp, gm = res.w_plus_dot0 / res.w_plus0, res.w_minus_dot0 / res.w_minus0
    ep = res.i_plus - res.i_plus_cor - (lam * gp * np.exp(-t / lam) - lam * res.k_plus - res.q_integral)
    em = res.i_minus - res.i_minus_cor - (lam * gm * np.exp(-t / lam) - lam * res.k_minus + res.q_integral)
    assert np.abs(ep).max() < 1e-7 and np.abs(em).max() < 1e-7
    assert np.abs(res.i_plus - res.i_plus_cor).max() > 1e-4  # (the terms are not negligible at this t)


def test_gradient_flow_conserves_delta_to_machine_precision_with_rodas(small):
    """Along gradient flow Δ_t = Δ0 and I± = 0; ``rodas`` integrates it in its mirror coordinate, where this holds
    to rounding, with u0/v0 of both signs."""
    res = dm.gf(small, t_max=200.0, scheme="rodas", u0=_U0, v0=_V0)
    assert np.abs(res.i_plus).max() < 1e-14 and np.abs(res.i_minus).max() < 1e-14
    np.testing.assert_allclose(res.delta, res.delta0, rtol=1e-15)
    np.testing.assert_allclose(res.delta_inf, res.delta0, rtol=1e-14)
    np.testing.assert_allclose(res.min_delta, res.delta0, rtol=1e-15)
    np.testing.assert_allclose(res.theta0_tilde, _U0 * _V0, rtol=1e-12)


def test_a_full_crossing_log_keeps_the_earliest_crossings(paper):
    """``max_crossings`` keeps the first crossings in time. A ``"rodas"`` step of this run holds several crossings,
    which a step visits in coordinate order: an append-only log that filled up inside it kept the crossing at
    t = 0.924 (coordinate 19) and dropped the one at t = 0.914 (coordinate 20)."""
    d = paper.d
    w0 = np.full(d, 0.01)
    ref = _mgf_reference(paper.hessian, paper.b, 0.5, 100.0, w0, w0, np.zeros(d), np.zeros(d))
    log = sorted((te, j % d, 1 if j < d else -1) for j in range(2 * d) for te in ref["times"][j])
    assert len(log) == 51
    for scheme in ("rk4", "exp-rk4", "rodas"):
        for cap in (1, 10, 50):
            res = dm.mgf(paper, 0.5, t_max=100.0, scheme=scheme, max_crossings=cap)
            assert res.n_crossings == 51 and len(res.crossing_times) == cap
            np.testing.assert_allclose(res.crossing_times, [e[0] for e in log[:cap]], rtol=0, atol=1e-7)
            np.testing.assert_array_equal(res.crossing_coords, [e[1] for e in log[:cap]])
            np.testing.assert_array_equal(res.crossing_signs, [e[2] for e in log[:cap]])
