"""Theorem 2 and Corollary 1 checked on actual runs."""

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum import theory


@pytest.fixture(scope="module")
def fast_problem():
    """A small instance that converges to loss 1e-21 in ~10⁴ steps (α = 0.1)."""
    return dm.sparse_regression(n=10, d=20, s=3, n_test=100, seed=0)


@pytest.mark.parametrize("gamma, beta, batch_size, crossed", [
    (0.05, 0.5, None, False),
    (0.02, 0.9, None, True),
    (0.02, 0.5, 3, False),
    (0.01, 0.8, 5, True),
])
def test_theorem_2_prediction_of_converged_runs(fast_problem, gamma, beta, batch_size, crossed):
    res = dm.mgd(fast_problem, gamma, beta, steps=2_000_000, tol=1e-21, alpha=0.1, batch_size=batch_size, seed=1)
    assert res.status_name == "converged" and res.train_loss <= 1e-21
    assert res.crossed == crossed  # Theorem 2 holds with and without sign changes
    assert res.prediction_gap <= 1e-8
    # the prediction is itself an interpolator satisfying the KKT conditions of Theorem 2
    X, y = fast_problem.X, fast_problem.y
    pred = res.predicted_theta
    assert np.linalg.norm(X @ pred - y) <= 1e-10 * np.linalg.norm(y)
    gap = theory.hyperbolic_entropy_grad(pred, res.delta_inf) - theory.hyperbolic_entropy_grad(
        res.theta0_tilde, res.delta_inf)
    coef, *_ = np.linalg.lstsq(X.T, gap, rcond=None)
    assert np.linalg.norm(X.T @ coef - gap) <= 1e-8 * max(np.linalg.norm(gap), 1.0)


def test_prediction_gap_shrinks_with_train_loss(fast_problem):
    gaps = []
    for tol in (1e-9, 1e-13, 1e-17, 1e-21):
        res = dm.mgd(fast_problem, 0.05, 0.5, steps=2_000_000, tol=tol, alpha=0.1)
        gaps.append(res.prediction_gap)
    assert all(a > b for a, b in zip(gaps, gaps[1:], strict=False))
    assert gaps[-1] < 1e-8 < gaps[0]


def test_paper_normalized_distance_check(problem):
    """The paper's check ‖θ∞ - θ^GF_Δ∞‖/‖θ^GF_Δ∞‖ < 0.01 on its own setting (α = 0.01)."""
    res = dm.mgd(problem, 0.05, 0.8, steps=2_000_000, tol=1e-21)
    assert res.status_name == "converged"
    assert res.normalized_distance < 0.01
    gf = theory.implicit_bias(problem.X, problem.y, res.delta_inf)
    assert np.allclose(res.theta_gf_delta_inf, gf.theta, rtol=0, atol=1e-12)


def test_corollary_1_acceleration_rule(problem):
    """MGD(ρ²γ, 1-ρ(1-β)) after k steps ≈ MGD(γ, β) after ρk steps; GD(ρ²γ) is not GD(γ) sped up ρ times."""
    gamma, beta, rho = 0.005, 0.9, 2
    g_hat, b_hat = theory.accelerate(gamma, beta, rho)
    assert theory.lam(g_hat, b_hat) == pytest.approx(theory.lam(gamma, beta), rel=1e-14)
    ratios = []
    for k in (200, 1000, 3000):
        fast = dm.mgd(problem, g_hat, b_hat, steps=k).theta
        slow = dm.mgd(problem, gamma, beta, steps=rho * k).theta
        err_momentum = np.linalg.norm(fast - slow) / np.linalg.norm(slow)
        fast_gd = dm.mgd(problem, rho**2 * gamma, 0.0, steps=k).theta
        slow_gd = dm.mgd(problem, gamma, 0.0, steps=rho * k).theta
        err_gd = np.linalg.norm(fast_gd - slow_gd) / np.linalg.norm(slow_gd)
        ratios.append(err_gd / err_momentum)
        assert err_momentum < 5e-3
    print("GD / MGD relative-error ratios (Corollary 1):", [f"{r:.0f}" for r in ratios])
    assert min(ratios) > 50


def test_prediction_is_lazy_and_cached(fast_problem):
    res = dm.mgd(fast_problem, 0.05, 0.5, steps=50_000, tol=1e-21, alpha=0.1)
    assert "_prediction" not in res.__dict__
    first = res.prediction()
    assert res.prediction() is first


@pytest.mark.parametrize("lam, stays_positive", [(0.02, True), (0.5, False), (2.0, False)])
def test_theorem_1_prediction_of_converged_flows(fast_problem, lam, stays_positive):
    """MGF(λ) converges to argmin D_ψΔ∞(θ, θ̃0) over the interpolators, with or without sign crossings."""
    res = dm.mgf(fast_problem, lam, t_max=5000, alpha=0.1, tol=1e-21)
    assert res.status_name == "converged" and res.train_loss <= 1e-21
    assert res.delta_stayed_positive == stays_positive
    assert res.prediction_gap <= 1e-8


def test_theorem_1_prediction_after_a_hundred_crossings():
    """At λ = 24.6 on the paper's problem MGF crosses zero 122 times and θ̃0 reaches 1.4e49: the prediction is
    still computed and matches the flow (it failed before the solver's start far from the reference point:
    a point of `dlnm reproduce --full`'s Figure 7 grid)."""
    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)
    res = dm.mgf(problem, lam=24.633928442641, t_max=1e7, tol=1e-20, alpha=0.01)
    assert res.status_name == "converged" and res.n_crossings > 100
    assert np.abs(res.theta0_tilde).max() > 1e40
    assert res.prediction_gap <= 1e-8


def test_theorem_2_prediction_with_an_astronomical_theta0_tilde():
    """MGD(0.2, 0.98) (λ = 500) converges in about 3 000 steps with θ̃0 ~ 1e181 after its sign crossings: the
    prediction is computed and matches the run (before the solver's start far from the reference point, 12 of
    192 such points of a (β, γ) grid at β ≥ 0.95 had no prediction)."""
    problem = dm.sparse_regression(n=20, d=30, s=5, n_test=100, seed=1)
    res = dm.mgd(problem, 0.2, 0.98, steps=400_000, tol=1e-20)
    assert res.status_name == "converged"
    assert np.abs(res.theta0_tilde).max() > 1e150
    assert res.prediction_gap <= 1e-8


def test_predictions_where_theta0_tilde_overflows():
    """MGD(0.1, 0.99) (λ = 1000) and MGF(λ = 1000) cross zero hundreds of times: θ̃0 = ±inf in float64, its
    mirror coordinate is finite and the predictions of Theorems 1-2 match the runs; a sweep point is its run."""
    problem = dm.sparse_regression(n=20, d=30, s=5, n_test=100, seed=0)
    res = dm.mgd(problem, 0.1, 0.99, steps=1_000_000, tol=1e-20)
    assert res.status_name == "converged" and not np.all(np.isfinite(res.theta0_tilde))
    assert np.all(np.isfinite(res.theta0_tilde_mirror))
    assert res.prediction_gap <= 1e-8
    sweep = dm.sweep(dict(n=20, d=30, s=5, n_test=100), pairs=[(0.1, 0.99)], steps=1_000_000, tol=1e-20,
                     theory=True, progress=False)
    assert sweep.theory_reason_names[0, 0] == "computed"
    assert sweep.prediction_gap[0, 0] == res.prediction_gap
    flow = dm.mgf(dm.sparse_regression(n=20, d=30, s=5, seed=3), lam=1e3, t_max=1e8, tol=1e-20)
    assert flow.status_name == "converged" and flow.n_crossings > 400
    assert not np.all(np.isfinite(flow.theta0_tilde))
    assert flow.prediction_gap <= 1e-8


def test_gradient_flow_from_sqrt_delta_matches_implicit_bias(fast_problem):
    """Gradient flow from u0 = √Δ, v0 = 0 (θ0 = 0, Δ conserved) reaches implicit_bias(X, y, Δ)."""
    d = fast_problem.d
    res = dm.gf(fast_problem, t_max=20_000, u0=np.full(d, 0.05), v0=np.zeros(d), tol=1e-21)
    assert res.status_name == "converged"
    target = theory.implicit_bias(fast_problem.X, fast_problem.y, np.full(d, 0.05**2)).theta
    assert np.linalg.norm(res.theta - target) / np.linalg.norm(target) < 1e-8
