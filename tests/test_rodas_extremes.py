"""The adaptive scheme at the extremes a probe of 2026-11-27 found wrong, each against an independent reference.

* α small: the default ``atol`` was an absolute 1e-11 whatever the initial scale, so a coordinate below atol/rtol
  was followed to an absolute, not a relative, accuracy. At α = 1e-8 Δ∞ was off by 3e-5 (relative), at α = 1e-16 by
  20 %, with half the sign crossings missing, and below α = 1e-40 a run never left the initialisation. Reference:
  the fixed-step RK4 (another method, on its own grid).
* λ <= 1e-11: the first step's guess (about λ) was below the smallest step the run accepts, and the run ended
  "diverged" at t = 0. Reference: the exponential RK4 and the gradient-flow limit.
* The implicit-bias solver with n > d and a rank-deficient X failed in a QR refinement ("expected square matrix");
  its stationarity residual, where a continuation stage failed, was the stage's (1e-15), not the asked Δ's.
"""

import numpy as np
import pytest

import dlnmomentum as dm


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=10, d=20, s=3, seed=1)


@pytest.mark.parametrize("alpha", [1e-8, 1e-16])
def test_small_initial_scales_are_followed_to_a_relative_accuracy(problem, alpha):
    adaptive = dm.mgf(problem, 0.3, t_max=150, alpha=alpha, scheme="rodas")
    grid = dm.mgf(problem, 0.3, t_max=150, alpha=alpha, scheme="rk4")
    assert adaptive.config.atol == pytest.approx(1e-11 * alpha / 0.01)
    assert np.abs(adaptive.theta - grid.theta).max() < 1e-9
    assert np.abs(np.log(adaptive.delta_inf) - np.log(grid.delta_inf)).max() < 1e-6
    assert adaptive.n_crossings == grid.n_crossings


def test_a_tiny_initial_scale_still_reaches_the_limit(problem):
    run = dm.mgf(problem, 0.3, t_max=1e12, tol=1e-20, alpha=1e-50)
    assert run.status_name == "converged" and run.prediction_gap < 1e-8


def test_the_default_scale_keeps_the_default_tolerance(problem):
    assert dm.mgf(problem, 0.3, t_max=10, scheme="rodas").config.atol == 1e-11
    assert dm.gf(problem, t_max=10, alpha=1e-8, scheme="rodas").config.atol == 1e-11  # (P: relative already)


def test_a_tiny_lambda_takes_its_first_step(problem):
    run = dm.mgf(problem, 1e-12, t_max=1e9, tol=1e-20)
    assert run.config.scheme == "rodas" and run.status_name == "converged", run.summary()
    limit = dm.gf(problem, t_max=1e9, tol=1e-20)
    assert np.abs(run.theta - limit.theta).max() < 1e-8
    assert run.prediction_gap < 1e-8


def test_implicit_bias_with_more_samples_than_dimensions():
    rng = np.random.default_rng(7)
    X = rng.standard_normal((30, 8))
    X[:, 3] = X[:, 2]  # rank 7: a line of interpolators
    y = X @ np.array([1, 0, 1, 0, 0, 0, 0, 2.0])
    res = dm.theory.implicit_bias(X, y, np.full(8, 1e-4))
    assert res.converged and np.abs(X @ res.theta - y).max() < 1e-9
    assert res.theta[2] == pytest.approx(res.theta[3], rel=1e-6)  # the symmetric point of the line


def test_the_stationarity_residual_is_the_asked_deltas(problem):
    res = dm.theory.implicit_bias(problem.X, problem.y, np.logspace(12, -12, 20), raise_on_failure=False)
    if res.converged:
        pytest.skip("the continuation converged here")
    assert res.stationarity_residual > 1e-3  # (it read 8e-16, the residual of a stage at a clipped Δ)
    ok = dm.theory.implicit_bias(problem.X, problem.y, np.full(20, 1e-3))
    assert ok.converged and ok.stationarity_residual < 1e-12
