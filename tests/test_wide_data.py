"""MGD on wide data (d ≫ n, the data form of the gradient) never forms the d × d matrix XᵀX/n.

At n = 10, d = 100 000 that matrix is 80 GB: a run, its store and a sweep must work from X alone (they formed
it, stored it and ran out of memory). The reference is plain NumPy heavy ball in the w± coordinates.
"""

import h5py
import numpy as np
import pytest
from reference import heavy_ball_theta

import dlnmomentum as dm

N, D = 10, 100_000


@pytest.fixture(scope="module")
def wide():
    return dm.sparse_regression(n=N, d=D, s=5, n_test=0, seed=2)


def _hessian_formed(problem):
    return "hessian" in problem.__dict__ or "_padded_hessian" in problem.__dict__



def test_a_run_and_its_store_use_x_alone(wide, tmp_path):
    path = tmp_path / "wide.h5"
    res = dm.mgd(wide, 0.05, 0.5, steps=30, store=str(path), progress=False)
    assert not _hessian_formed(wide)
    ref = heavy_ball_theta(wide, 0.05, 0.5, 30)
    assert np.abs(res.theta - ref).max() <= 1e-12 * np.abs(ref).max()
    with h5py.File(path, "r") as f:
        assert "hessian" not in f["problem"] and "X" in f["problem"]
    stored = dm.open_store(path)
    assert np.array_equal(stored.result.theta, res.theta)
    assert not _hessian_formed(wide)


def test_a_sweep_uses_x_alone_and_each_point_is_its_single_run(wide):
    sw = dm.sweep(wide, gammas=[0.02, 0.05], betas=[0.5], steps=30, progress=False)
    assert not _hessian_formed(wide)
    for k, gamma in enumerate((0.02, 0.05)):
        single = dm.mgd(wide, gamma, 0.5, steps=30, progress=False)
        assert np.array_equal(np.asarray(sw.data["theta"])[0, 0, k], single.theta)


def test_the_hessian_form_still_forms_and_stores_it(tmp_path):
    narrow = dm.sparse_regression(n=20, d=30, s=5, n_test=0)
    path = tmp_path / "narrow.h5"
    dm.mgd(narrow, 0.05, 0.5, steps=30, store=str(path), progress=False)
    assert _hessian_formed(narrow)
    with h5py.File(path, "r") as f:
        assert np.array_equal(f["problem"]["hessian"][()], narrow.hessian)


@pytest.mark.parametrize("scale", [1.0, 1e100, 1e153, 1e154, 1e200])
def test_the_moment_check_without_the_hessian_agrees_with_the_hessian(scale):
    p = dm.sparse_regression(n=20, d=30, s=5, n_test=0)
    X = p.X * scale
    with np.errstate(over="ignore", invalid="ignore"):
        H = X.T @ X / 20
        expected = bool(np.all(np.isfinite(0.5 * (H + H.T))) and np.all(np.isfinite(X.T @ p.y / 20)))
    q = dm.Problem(X, p.y)
    assert q.moments_finite() == expected
    if not expected:
        with pytest.raises(ValueError, match="X must be scaled"):
            dm.mgd(q, 0.01, 0.5, steps=1)
