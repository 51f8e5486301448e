"""Finding (h) of docs/findings.md: where MGF(λ)'s limit is beyond heavy ball's stability edge, MGD ends at the edge.

Checked against an independent plain-NumPy gradient descent on (u, v), and the sharpness that
``scripts/findings.py`` computes from a run's θ and Δ∞ against the eigenvalues of ∇²F formed from (u, v).
"""

import importlib.util
import os

import numpy as np
import pytest

import dlnmomentum as dm

GAMMA = 0.75  # the quick size's λ = 0.75 line at β = 0 (γ = λ)


def _findings():
    path = os.path.join(os.path.dirname(os.path.dirname(__file__)), "scripts", "findings.py")
    spec = importlib.util.spec_from_file_location("findings_script", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hessian_top(X, u, v):
    """λmax of ∇²F at an interpolator (residual 0): J H Jᵀ with J = [diag(v); diag(u)], formed in 2d × 2d."""
    J = np.vstack([np.diag(v), np.diag(u)])
    return np.linalg.eigvalsh(J @ (X.T @ X / X.shape[0]) @ J.T)[-1]


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, mu=0.5, sigma=1.0, n_test=1000, seed=0)


def test_gradient_descent_ends_at_the_edge_where_the_flow_limit_is_too_sharp(problem):
    X, y = problem.X, problem.y
    n = X.shape[0]
    run = dm.mgd(problem, gamma=GAMMA, beta=0.0, steps=200_000, tol=1e-20, alpha=0.01)
    assert run.status == dm.Status.CONVERGED
    # independent: plain gradient descent on F(u, v) = ‖X(u ⊙ v) − y‖²/(2n) from u0 = 0.01·1, v0 = 0
    u, v = np.full(X.shape[1], 0.01), np.zeros(X.shape[1])
    for _ in range(200_000):
        r = X @ (u * v) - y
        if r @ r / (2 * n) <= 1e-20:
            break
        g = X.T @ r / n
        u, v = u - GAMMA * g * v, v - GAMMA * g * u
    assert np.max(np.abs(u * v - run.theta)) < 1e-8
    flow = dm.mgf(problem, GAMMA, t_max=1e7, tol=1e-20, alpha=0.01)
    assert flow.status == dm.Status.CONVERGED
    rho_gd = GAMMA * _hessian_top(X, u, v) / 2.0
    up, vp = (flow.w_plus + flow.w_minus) / 2, (flow.w_plus - flow.w_minus) / 2
    rho_flow = GAMMA * _hessian_top(X, up, vp) / 2.0
    assert rho_flow > 1.1  # the flow's limit is beyond gradient descent's edge γS < 2 ...
    assert 0.999 < rho_gd <= 1.0  # ... and gradient descent ends on the edge, on another interpolator
    assert run.test_loss > 1e3 * flow.test_loss


def test_sharpness_from_theta_and_delta_matches_the_hessian(problem):
    """u² + v² = √(4θ² + Δ²) at any (u, v): the script's sharpness from stored θ, Δ∞ equals ∇²F's λmax."""
    rng = np.random.default_rng(3)
    u, v = rng.normal(size=30), rng.normal(size=30)
    wp, wm = u + v, u - v
    theta, delta = (wp ** 2 - wm ** 2) / 4, np.abs(wp * wm)
    s = _findings()._sharpness(problem.X, theta, delta)
    assert s == pytest.approx(_hessian_top(problem.X, u, v), rel=1e-12)
