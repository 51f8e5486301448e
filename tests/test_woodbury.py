"""The Woodbury form of the adaptive schemes' step matrix (``kernels/woodbury.py``), taken where d ≥ 3n.

The solves against NumPy's dense solve of the same matrices; whole runs on a problem with d = 4n (n = 5, d = 20,
where every adaptive scheme factorises in the Woodbury form) against SciPy's Radau with the exact Jacobian, the
route they take, their chunk invariance, and Theorem 1 at the limit; the paper's problem (n = 20, d = 30) keeps the
d × d route.
"""

import numpy as np
import pytest
from reference import gf_radau, mgf_radau

import dlnmomentum as dm
from dlnmomentum.driver import drive
from dlnmomentum.kernels import woodbury as KW
from dlnmomentum.runs.flow_adaptive import prepare_flow_run


@pytest.mark.parametrize("n, d, woodbury", [(20, 30, False), (20, 59, False), (20, 60, True), (10, 40, True),
                                            (30, 20, False)])
def test_the_route_is_the_rule(n, d, woodbury):
    assert KW._use_woodbury(n, d) == woodbury
    M, MT = KW._woodbury_matrices(n, d)
    assert M.shape == MT.shape == ((n, n) if woodbury else (1, 1))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("kappa", [1e-6, 0.3, 1e4])
def test_solves_are_the_dense_solves(seed, kappa):
    """(I + κ diag(e) H)⁻¹ t and (I + κ H diag(e))⁻¹ t, H = XᵀX/n, against numpy.linalg.solve, over e spanning
    eight decades."""
    rng = np.random.default_rng(seed)
    n, d = 7, 40
    X = rng.normal(1.0, 1.0, size=(n, d))
    H = X.T @ X / n
    e = 10.0 ** rng.uniform(-4, 4, size=d)
    t = rng.normal(size=d)
    M, MT = np.zeros((n, n)), np.zeros((n, n))
    assert KW._woodbury_factor(X, e, kappa, M, MT)
    for form, matrix in (("eh", np.eye(d) + kappa * np.diag(e) @ H), ("he", np.eye(d) + kappa * H @ np.diag(e))):
        got = t.copy()
        if form == "eh":
            KW._woodbury_solve_eh(X, e, M, MT, got, np.zeros(n))
        else:
            KW._woodbury_solve_he(X, e, M, MT, got, np.zeros(n), np.zeros(d))
        want = np.linalg.solve(matrix, t)
        cond = np.linalg.cond(matrix)
        assert np.abs(got - want).max() <= 1e-14 * cond * max(1.0, np.abs(want).max()), (form, cond)


@pytest.fixture(scope="module")
def wide():
    """d = 4n: every adaptive scheme takes the Woodbury form."""
    return dm.sparse_regression(n=5, d=20, s=2, mu=1.0, sigma=1.0, seed=3)


@pytest.mark.parametrize("lam, scheme", [(0.0, "ndf"), (0.0, "rodas"), (1e-3, "rodas"), (0.05, "rodas"),
                                         (0.5, "rodas")])
def test_runs_agree_with_radau(wide, lam, scheme):
    t_max = 20.0
    w0 = np.full(2 * wide.d, 0.01)
    res = dm.mgf(wide, lam, t_max=t_max, scheme=scheme) if lam else dm.gf(wide, t_max=t_max, scheme=scheme)
    assert res.config.scheme == scheme and res.t_done == t_max
    # (tighter tolerances move these references by under 2e-15: rtol 1e-12, atol 1e-15)
    want = (mgf_radau(wide.hessian, wide.b, lam, t_max, w0, np.zeros(2 * wide.d), rtol=1e-11, atol=1e-13) if lam
            else gf_radau(wide.hessian, wide.b, t_max, w0, rtol=1e-12, atol=1e-14))
    assert np.abs(res.theta - want).max() < 1e-9


@pytest.mark.parametrize("lam", [0.0, 0.05])
def test_the_limit_and_theorem_1(wide, lam):
    res = dm.mgf(wide, lam, t_max=1e7, tol=1e-20) if lam else dm.gf(wide, t_max=1e7, tol=1e-20)
    assert res.status_name == "converged" and res.train_loss <= 1e-20
    assert res.prediction_gap <= 1e-8


@pytest.mark.parametrize("lam, scheme", [(0.0, "ndf"), (0.0, "rodas"), (0.05, "rodas")])
def test_chunks_change_no_bit(wide, lam, scheme):
    """The Woodbury factors are rebuilt where a call starts (the NDF's) or every step (Rodas5P's): chunks of 1 and 7
    steps end where one call does, bit for bit."""
    def run(chunk):
        r = prepare_flow_run(wide, lam, t_max=200.0, scheme=scheme)
        if chunk is not None:
            r.chunk_steps = chunk
        status, blocks = drive(r)
        return r.finish(status, blocks)

    whole = run(None)
    for chunk in (1, 7):
        res = run(chunk)
        assert np.array_equal(res.theta, whole.theta) and res.steps_done == whole.steps_done
        assert np.array_equal(res.j_plus, whole.j_plus, equal_nan=True) and res.max_w2 == whole.max_w2
        assert res.factorizations == whole.factorizations and res.rhs_evaluations == whole.rhs_evaluations
