"""The largest w² of an adaptive flow (``max_w2``) is taken on its dense output, not only at its steps' points.

A step of ``"rodas"`` (and of the DOP853 start of MGF) can be long against the oscillation of w±: at λ = 2 to t =
300 the largest w² at the steps' points was 0.37 % under the trajectory's (0.08 % at λ = 0.5; gradient flow 2.8e-5).
Each step whose velocity may change sign has its dense output searched for the turns of w± (gradient flow: of P;
``"ndf"``: on the interpolating polynomial of its step).
Reference: SciPy's DOP853 at rtol 1e-12 with an event at every zero of every velocity (``tests/reference.py``),
another method that locates the turns itself. The search reads the dense output only: no other bit of a run changes
(the chunk tests of ``test_rodas.py`` hold ``max_w2`` too, in the state they compare).
"""

import numpy as np
import pytest
from reference import largest_w2_dop853

import dlnmomentum as dm


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, mu=1, sigma=1, seed=0)


def _reference(problem, lam, t_max):
    return largest_w2_dop853(problem.hessian, problem.b, lam, t_max, np.full(2 * problem.d, 0.01))


@pytest.mark.parametrize("lam", [0.05, 0.5, 2.0, 5.0])
def test_mgf_largest_w2_is_the_trajectory_s(problem, lam):
    t_max = 300.0
    res = dm.mgf(problem, lam, t_max=t_max, scheme="rodas")
    ref = _reference(problem, lam, t_max)
    # (the reference is at least the run's two ends: a check of its events; the turns inside are what is tested)
    ends = max(float(np.max(np.square(r))) for r in (res.w_plus0, res.w_minus0, res.w_plus, res.w_minus))
    assert ends <= ref * (1 + 1e-9)
    assert res.max_w2 == pytest.approx(ref, rel=1e-8)


@pytest.mark.parametrize("scheme", ["rodas", "ndf"])
def test_gradient_flow_largest_w2_is_the_trajectory_s(problem, scheme):
    t_max = 300.0
    res = dm.gf(problem, t_max=t_max, scheme=scheme)
    assert res.max_w2 == pytest.approx(_reference(problem, 0.0, t_max), rel=1e-8)


def test_ndf_turn_search_changes_no_other_bit(problem):
    """The NDF's turns are searched on its interpolating polynomial: a run with and without records (which read the
    same polynomial) and in chunks ends with the same ``max_w2`` and θ, bit for bit."""
    whole = dm.gf(problem, t_max=300.0, scheme="ndf")
    recorded = dm.gf(problem, t_max=300.0, scheme="ndf", record=dm.Record(times=tuple(np.linspace(1.0, 299.0, 50))))
    assert whole.max_w2 == recorded.max_w2
    np.testing.assert_array_equal(whole.theta, recorded.theta)

