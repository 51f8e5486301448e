"""The adaptive schemes on short time scales, and two input ranges found beside them.

The smallest step of ``"rodas"`` and ``"ndf"`` was 1e-13·max(t, 1): a run with t_max under 1e-13, and the NDF on
data scaled by 1e3 (whose first steps are under 1e-14), ended "diverged" at t = 0 although nothing diverged. A step
that lands on t_max is now always tried, and the NDF's floor is max(1e-13·t, 1e-300) (``kernels/flow_ndf.py``,
``_h_min``); Rodas5P keeps its own, which ends a blow-up at once (``tests/test_api_edges.py``).
"""

import numpy as np
import pytest

import dlnmomentum as dm


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=10, d=20, s=3, seed=0)


@pytest.mark.parametrize("scheme,lam", [("rodas", 0.5), ("rodas", 0.0), ("ndf", 0.0)])
@pytest.mark.parametrize("t_max", [1e-14, 1e-300])
def test_a_horizon_under_the_old_smallest_step_is_run(problem, scheme, lam, t_max):
    run = dm.gf(problem, t_max=t_max, scheme=scheme) if lam == 0.0 else \
        dm.mgf(problem, lam, t_max=t_max, scheme=scheme)
    assert run.status_name == "max_steps" and run.t_done == t_max and run.steps_done >= 1
    # θ(0) = u0·v0 = 0 and |θ'(0)| <= α²|∇L(0)| (about 1e-4 here): θ(t) is within t of it
    assert np.all(np.isfinite(run.theta)) and np.abs(run.theta).max() <= t_max


@pytest.mark.parametrize("k", [1e3, 1e4])
def test_gradient_flow_on_scaled_data_is_the_same_flow_in_rescaled_time(problem, k):
    """L(θ; kX, ky) = k²·L(θ; X, y), so gradient flow on (kX, ky) at time t is gradient flow on (X, y) at k²t, and
    both have the same limit. The NDF, gradient flow's scheme for a ``tol``, ended "diverged" at t = 0 for k >= 1e3
    (while ``"rodas"`` ran)."""
    scaled = dm.Problem(problem.X * k, problem.y * k)
    t = 3.0  # (the weights have left the initialisation: θ is O(1))
    fast = dm.gf(scaled, t_max=t / k**2, scheme="ndf")
    slow = dm.gf(problem, t_max=t, scheme="ndf")
    assert fast.status_name == "max_steps" and np.abs(slow.theta).max() > 0.1
    assert np.abs(fast.theta - slow.theta).max() < 1e-8
    limit = dm.gf(scaled, t_max=1e7 / k**2, tol=1e-20 * k**2)  # (the same loss as 1e-20 on the unscaled data)
    reference = dm.gf(problem, t_max=1e7, tol=1e-20)
    assert limit.config.scheme == "ndf" and limit.status_name == "converged"
    assert np.abs(limit.theta - reference.theta).max() < 1e-9


@pytest.mark.parametrize("name", ["u_dot0", "v_dot0"])
@pytest.mark.parametrize("value", [1e200, -1e150])
def test_an_initial_velocity_has_the_initial_weights_range(problem, name, value):
    """u0 and v0 were bounded by the kernels' divergence bound, the velocities only finite: 1e200 ran and ended
    "diverged" at t = 0."""
    with pytest.raises(ValueError, match=rf"{name} must have entries in \(-1e\+150, 1e\+150\)"):
        dm.mgf(problem, 0.5, t_max=3.0, scheme="rodas", **{name: np.full(problem.d, value)})


@pytest.mark.parametrize("lams,message", [
    ([np.nan], r"lams\[0\] must be finite and in \[0, 1e\+100\]"),  # (was "in [0, inf)": not dm.mgf's range)
    ([0.1, -0.5], r"lams\[1\] must be in \[0, 1e\+100\]"),
    ([0.0, 1e-320], r"lams\[1\] must be 0 \(gradient flow\) or in \[2.2250738585072014e-308, 1e\+100\]"),
])
def test_a_flow_lines_lams_are_checked_as_dm_mgf_checks_lam(problem, lams, message):
    with pytest.raises(ValueError, match=message):
        dm.sweep(problem, lams=lams, t_max=3.0, progress=False)
