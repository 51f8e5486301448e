"""Sweep designs (constant-λ lines, (γ, β) pairs) and the per-point fields the figures need.

Every point is checked against the single run ``dm.mgd`` with the same (γ, β) (bit for bit: the sweep
engine is the single-run kernel in SIMD lanes) and the theory fields against ``dm.theory.predict``.
"""

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.runs.points import TheoryReason

SPEC = {"n": 10, "d": 12, "s": 2, "mu": 1.0, "sigma": 1.0, "n_test": 50}


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(**SPEC, seed=0)


def test_lam_grid_gammas_follow_constant_lambda_lines(problem):
    lams, betas = [0.05, 0.5], [0.0, 0.5, 0.9]
    sw = dm.sweep(problem, lams=lams, betas=betas, steps=300)
    assert sw.dims == ("rep", "beta", "lam")
    expected = np.array(lams)[None, :] * (1 - np.array(betas)[:, None]) ** 2
    np.testing.assert_allclose(sw["gamma"][0], expected, rtol=1e-15)
    np.testing.assert_allclose(sw["lam"][0], np.broadcast_to(lams, (3, 2)), rtol=1e-14)
    for ib, b in enumerate(betas):
        for il in range(len(lams)):
            r = dm.mgd(problem, float(sw["gamma"][0, ib, il]), b, steps=300)
            np.testing.assert_array_equal(sw["theta"][0, ib, il], r.theta)


def test_pairs_equal_single_runs_and_carry_delta_and_theta0_tilde(problem):
    pairs = [(0.05, 0.9), (0.2, 0.0), (0.02, 0.5)]
    sw = dm.sweep(problem, pairs=pairs, steps=400)
    assert sw.dims == ("rep", "pair") and sw.shape == (1, 3)
    for k, (g, b) in enumerate(pairs):
        r = dm.mgd(problem, g, b, steps=400)
        assert sw["gamma"][0, k] == g and sw["beta"][0, k] == b
        np.testing.assert_array_equal(sw["theta"][0, k], r.theta)
        np.testing.assert_array_equal(sw["delta_inf"][0, k], r.delta_inf)
        np.testing.assert_array_equal(sw["theta0_tilde"][0, k], r.theta0_tilde)
        assert sw["sign_changes"][0, k] == int(r.crossings_plus.sum() + r.crossings_minus.sum())
        assert sw["theory_reason"][0, k] == TheoryReason.NOT_REQUESTED


def test_theory_fields_and_reasons():
    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)  # the paper's problem (the README's run)
    # one point converged to 1e-20, one stopped early (not converged), one diverged
    sw = dm.sweep(problem, pairs=[(0.05, 0.8), (1e-4, 0.0), (50.0, 0.0)], steps=1_000_000, tol=1e-20,
                  theory=True)
    reason = sw["theory_reason"][0]
    assert list(reason) == [TheoryReason.COMPUTED, TheoryReason.NOT_CONVERGED, TheoryReason.DIVERGED]
    r = dm.mgd(problem, 0.05, 0.8, steps=1_000_000, tol=1e-20)
    pred = dm.theory.predict(problem.X, problem.y, r.delta_inf, r.theta0_tilde, r.theta)
    np.testing.assert_allclose(sw["theta_pred"][0, 0], pred.predicted_theta, rtol=1e-12, atol=1e-15)
    assert sw["prediction_gap"][0, 0] < 1e-8
    assert sw["pred_train_loss"][0, 0] < 1e-20
    np.testing.assert_allclose(sw["pred_test_loss"][0, 0], problem.test_loss(pred.predicted_theta), rtol=1e-12)
    for k in (1, 2):
        assert np.isnan(sw["prediction_gap"][0, k]) and np.isnan(sw["theta_pred"][0, k]).all()
    assert "theory       : computed 1, not converged 1, diverged 1" in sw.summary()


def test_designs_store_and_resume(tmp_path):
    path = str(tmp_path / "pairs.h5")
    pairs = [(0.05, 0.9), (0.2, 0.0), (0.02, 0.5), (0.1, 0.3)]
    full = dm.sweep(SPEC, pairs=pairs, steps=300, reps=2)
    part = dm.sweep(SPEC, pairs=pairs, steps=300, reps=2, store=path, wave_size=8)
    assert part.complete
    back = dm.open_sweep(path)
    for name in full.fields:
        np.testing.assert_array_equal(back[name], full[name], err_msg=name)
    with h5py.File(path, "r") as f:  # gamma, beta over (rep, pair) for h5py/xarray users
        np.testing.assert_array_equal(f["gamma"][0], [p[0] for p in pairs])
    ds = back.to_xarray()
    assert ds["gamma"].dims == ("rep", "pair")
    with pytest.raises(dm.StoreError, match="design|gammas"):
        dm.sweep(SPEC, lams=[0.1, 1.0], betas=[0.5], steps=300, reps=2, store=path, resume=True)


def test_design_validation(problem):
    with pytest.raises(ValueError, match="pairs"):
        dm.sweep(problem, pairs=[(0.1, 0.5)], gammas=[0.1], steps=10)
    with pytest.raises(ValueError, match=r"pairs\[1\] beta"):
        dm.sweep(problem, pairs=[(0.1, 0.5), (0.1, 1.0)], steps=10)
    with pytest.raises(ValueError, match="repeat"):
        dm.sweep(problem, pairs=[(0.1, 0.5), (0.1, 0.5)], steps=10)
    with pytest.raises(ValueError, match="pairs"):
        dm.sweep(problem, pairs=[0.1, 0.5], steps=10)
    with pytest.raises(ValueError, match="lams"):
        dm.sweep(problem, lams=[0.0, 0.1], betas=[0.5], steps=10)  # a constant-lambda line needs lambda > 0


def test_cli_pairs_and_lambda_lines(tmp_path, capsys):
    assert main(["sweep", "--pairs", "0.05/0.9,0.2/0", "--steps", "100", "--n", "10", "--d", "12", "--s", "2",
                 "--no-progress"]) == 0
    assert "(pairs with beta)" in capsys.readouterr().out
    assert main(["sweep", "--lams", "0.05,0.5", "--betas", "0,0.9", "--steps", "100", "--n", "10", "--d", "12",
                 "--s", "2", "--no-progress"]) == 0
    assert "gamma = lambda (1-beta)^2" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["sweep", "--pairs", "0.05:0.9", "--steps", "100"])
    assert "--pairs must be" in capsys.readouterr().err


def test_progress_eta_starts_after_the_compiling_first_call():
    """The first kernel call compiles: the bar's clock starts after it, so the ETA is that of the work."""
    import io
    import time

    from tqdm import tqdm

    from dlnmomentum.sweeps.execute import CompileAwareBar

    buf = io.StringIO()
    bar = CompileAwareBar(tqdm(total=1000, file=buf, mininterval=0, smoothing=0.1))
    time.sleep(0.6)  # the compiling first chunk
    bar.update(10)
    for _ in range(4):
        time.sleep(0.01)
        bar.update(10)
    info = bar.bar.format_dict
    assert info["n"] == 50 and info["elapsed"] < 0.3
    remaining = (info["total"] - info["n"]) / info["rate"]
    assert remaining < 5.0  # about 1 s of work left; a rate over the compile would say about 12 s
    bar.close()


def test_single_run_prediction_says_why_it_is_not_a_limit():
    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)
    early = dm.mgd(problem, 0.05, 0.8, steps=1000)
    with pytest.warns(RuntimeWarning, match="train loss .* above 1e-08"):
        early.prediction()
    with pytest.raises(ValueError, match="diverged"):
        dm.mgd(problem, 50.0, 0.8, steps=1000).prediction()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dm.mgd(problem, 0.05, 0.8, steps=10**6, tol=1e-20).prediction_gap < 1e-8


def test_a_failing_block_is_described_by_its_own_points():
    from dlnmomentum.sweeps.distributed import describe_block
    from dlnmomentum.sweeps.plan import Plan, make_config

    config, problem = make_config(SPEC, None, [0.5, 0.9], [0.1, 1.0], 10, None, 1, None, 0, None, 0.01, False,
                                  "auto", False, 1e-8)
    text = describe_block(Plan(config, problem), [0, 1, 2, 3])
    assert "beta 0.5..0.9, gamma 0.001..0.25" in text  # gamma = lam (1 - beta)^2 over the block


def test_theory_columns_are_the_per_point_rule():
    """The theory fields of a wave (reasons as whole-wave masks, θ̃0's mirror in one call) are, bit for bit, those of
    :func:`theory_fields` called point by point with its own mirror, for converged, stopped, stalled-below-tol and
    diverged points."""
    from dlnmomentum.runs.common import initial_weights
    from dlnmomentum.runs.points import theory_fields
    from dlnmomentum.theory.entropy import _reference_mirror

    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)
    pairs = [(0.05, 0.8), (1e-4, 0.0), (50.0, 0.0), (0.05, 0.5), (0.02, 0.9)]
    sw = dm.sweep(problem, pairs=pairs, steps=400_000, tol=1e-20, theory=True, theory_tol=1e-8)
    reason = sw["theory_reason"][0]
    assert {TheoryReason.COMPUTED, TheoryReason.NOT_CONVERGED, TheoryReason.DIVERGED} <= set(reason.tolist())
    assert sw["status"][0, 3] == dm.MAX_STEPS and reason[3] == TheoryReason.COMPUTED  # (stopped below theory_tol)
    u0, v0 = initial_weights(problem.d, 0.01, None, None)  # (the sweeps' initialisation, α = 0.01)
    for k in range(len(pairs)):
        mirror = _reference_mirror(u0 + v0, u0 - v0, sw["s_plus"][0, k], sw["s_minus"][0, k], sw["delta_inf"][0, k])
        ref = theory_fields(problem, sw["theta"][0, k].copy(), sw["delta_inf"][0, k], sw["theta0_tilde"][0, k],
                            int(sw["status"][0, k]), float(sw["train_loss"][0, k]), 1e-8, mirror)
        for name, value in ref.items():
            np.testing.assert_array_equal(sw[name][0, k], value, err_msg=f"point {k}: {name}")
