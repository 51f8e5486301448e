"""Extreme and malformed inputs: a ValueError/TypeError naming the parameter and the allowed range, raised
before any work starts; never a ZeroDivisionError, OverflowError, NaN result or a message about
something the caller did not pass.

Before: ``mgf(P, lam=1e-300)``/``1e300`` and data scaled by 1e±150 raised ZeroDivisionError,
``t_max=1e308, h=1e-10`` and ``steps=2**63`` OverflowError, ``alpha=1e200`` gave NaN at step 0,
``mgf_from_mgd(gamma=1e-300, beta=0)`` complained about ``u_dot0``; ``Problem(params=[1, 2])``,
``Record(times="abc")`` and ``parse_grid("a,b")`` did not name the parameter.
"""

import time
import warnings

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.runs import stepping
from dlnmomentum.runs.flow import prepare_flow
from dlnmomentum.runs.flow_from_mgd import prepare_mgf_from_mgd
from dlnmomentum.sweeps.grid import parse_grid

SMALL = dict(n=8, d=13, s=3, n_test=50)


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(**SMALL, seed=4)


def scaled(problem, factor):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dm.Problem(problem.X * factor, problem.y, problem.X_test * factor, problem.y_test)


CASES = {
    "lam tiny": (lambda P: prepare_flow(P, 1e-300, t_max=10), ValueError,
                 r"lam must be 0 \(gradient flow\) or in \[3.\d+e-18, 1e\+100\] for t_max = 10.0"),
    "lam huge": (lambda P: prepare_flow(P, 1e300, t_max=10), ValueError, r"lam must be in \[0, 1e\+100\]"),
    "X * 1e150, mgf": (lambda P: prepare_flow(scaled(P, 1e150), 0.1, t_max=10), ValueError,
                       r"t_max must be in \(0, \S+\] on this problem: its stiffness kappa = \S+ "
                       r"\(it grows with the scale of X and with that of the initial weights: alpha, u0, v0\)"),
    "alpha 1e8, mgf": (lambda P: prepare_flow(P, 0.5, t_max=10, alpha=1e8), ValueError,
                       r"t_max must be in .* initial weights: alpha, u0, v0\).* or start from smaller weights"),
    "X * 1e150, gf": (lambda P: prepare_flow(scaled(P, 1e150), 0.0, t_max=10), ValueError, r"t_max must be in"),
    "X * 1e200": (lambda P: prepare_flow(scaled(P, 1e200), 0.1, t_max=10), ValueError,
                  r"X must be scaled so that XᵀX/n, Xᵀy/n and the stiffness estimate"),
    "t_max and h": (lambda P: prepare_flow(P, 0.0, t_max=1e308, h=1e-10), ValueError,
                    r"h must be in \[\S+, \S+\] for t_max = 1e\+308: h = 1e-10 needs inf grid steps"),
    "steps 2**63": (lambda P: dm.mgd(P, 0.01, 0.5, steps=2**63), ValueError,
                    r"steps must be an integer in \[0, 4611686018427387904\]"),
    "record steps uint64": (lambda P: dm.Record(steps=np.array([2**63], dtype=np.uint64)), ValueError,
                            r"steps must be integers in \[0, 4611686018427387904\]"),
    "record steps str": (lambda P: dm.Record(steps="123"), TypeError, r"steps must be a 1-d sequence of integers"),
    "alpha huge": (lambda P: dm.mgd(P, 0.01, 0.5, steps=10, alpha=1e200), ValueError,
                   r"alpha must be in \[1e-150, 1e\+150\)"),
    "alpha tiny": (lambda P: dm.mgd(P, 0.01, 0.5, steps=10, alpha=1e-200), ValueError,
                   r"alpha must be in \[1e-150, 1e\+150\)"),
    "alpha huge, flow": (lambda P: dm.mgf(P, 0.1, t_max=1, alpha=1e200), ValueError, r"alpha must be in"),
    "u0 huge": (lambda P: dm.mgd(P, 0.01, 0.5, steps=10, u0=np.full(13, 1e200)), ValueError,
                r"u0 must have entries in \(-1e\+150, 1e\+150\)"),
    "mgf_from_mgd gamma huge": (lambda P: prepare_mgf_from_mgd(P, 1e200, 0.999999, steps=10), ValueError,
                                r"gamma and beta must give lambda = gamma/\(1-beta\)\^2 in \(0, 1e\+100\]"),
    "mgf_from_mgd velocity": (lambda P: prepare_mgf_from_mgd(P, 1e-300, 0.0, steps=10, u1=np.full(13, 0.02)),
                              ValueError, r"gamma must be large enough that the initial velocity"),
    "mgf_from_mgd steps": (lambda P: prepare_mgf_from_mgd(P, 0.05, 0.5, steps=2**63), ValueError,
                           r"steps must be an integer in \[1, 4611686018427387904\]"),
    "problem params": (lambda P: dm.Problem(P.X, P.y, params=[1, 2]), TypeError,
                       r"params must be a dict with str keys"),
    "record times": (lambda P: dm.Record(times="abc"), TypeError,
                     r"times must be a 1-d sequence of finite real numbers in \[0, inf\), got str"),
    "record times nan": (lambda P: dm.Record(times=[0.0, float("nan")]), ValueError, r"times .* at index 1"),
    "parse_grid": (lambda P: parse_grid("a,b", "gammas"), ValueError,
                   r"gammas must be 'start:stop:num', 'start:stop:num:log' or a comma list of numbers; "
                   r"got 'a,b' \(value 'a' is not a number\)"),
    "implicit_bias tol": (lambda P: dm.theory.implicit_bias(P.X, P.y, np.ones(13), tol=None), TypeError,
                          r"tol must be a real number in \(0, 1\)"),
    "implicit_bias max_iter": (lambda P: dm.theory.implicit_bias(P.X, P.y, np.ones(13), max_iter=float("nan")),
                               TypeError, r"max_iter must be an integer in \[1, inf\)"),
    "theory.lam shapes": (lambda P: dm.theory.lam([0.1, 0.2], [0.1, 0.2, 0.3]), ValueError,
                          r"gamma of shape \(2,\) and beta of shape \(3,\) do not broadcast"),
    "theory.from_lam_eps shapes": (lambda P: dm.theory.from_lam_eps([0.1, 0.2], [0.1, 0.2, 0.3]), ValueError,
                                   r"lam of shape \(2,\) and eps of shape \(3,\)"),
    "theory.accelerate shapes": (lambda P: dm.theory.accelerate([0.1, 0.2], [0.1, 0.2, 0.3], 2.0), ValueError,
                                 r"gamma of shape \(2,\) and beta of shape \(3,\)"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_refused_before_any_work_with_the_parameter_and_its_range(problem, name):
    call, exc, match = CASES[name]
    t0 = time.monotonic()
    with pytest.raises(exc, match=match):
        call(problem)
    assert time.monotonic() - t0 < 5.0  # refused up front (no run of 2**63 steps or 1e301 grid points)


def test_tiny_data_and_tiny_lambda_that_fit_the_grid_run(problem):
    """What is representable runs: data scaled by 1e-150, and MGD(gamma=1e-300) as a flow."""
    res = dm.mgf(scaled(problem, 1e-150), 0.1, t_max=10)
    assert res.status_name == "max_steps" and np.all(np.isfinite(res.theta))
    run = prepare_mgf_from_mgd(problem, 1e-300, 0.0, steps=10)
    assert run.config.lam == 1e-300 and np.all(run.u_dot0 == 0) and run.total % 10 == 0


def test_a_huge_grid_warns_with_the_estimate(problem):
    with pytest.warns(RuntimeWarning, match=r"MGF\(lambda=5e\+10\) .* needs \d\.\d+e\+0[78] RK4 steps"):
        prepare_mgf_from_mgd(problem, 0.05, 0.999999, steps=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an ordinary flow is quiet
        prepare_flow(problem, 0.3, t_max=50)
    assert stepping.LARGE_GRID == 10**7


def test_max_stable_step_for_large_lambda_kappa():
    """The bisection used to return 0 when the limit was far below the fast mode's (λκ ≫ 1)."""
    for lam, kappa in ((1e100, 5.0), (0.1, 1e297), (1e20, 1e20)):
        h = stepping.max_stable_step(lam, kappa)
        assert 0 < h < 3.0 * np.sqrt(lam / kappa)
        # just stable, and twice that step is not (independent check on the amplification factor)
        s_top = np.sqrt(kappa / lam)
        z = h * (-1.0 / (2 * lam) + 1j * np.linspace(0, s_top, 257))
        assert np.all(np.abs(stepping.rk4_amplification(z)) <= 1 + 1e-9)
        z2 = 2 * z
        assert np.any(np.abs(stepping.rk4_amplification(z2)) > 1)


def test_cli_grid_option_names_itself(capsys):
    from dlnmomentum.cli import build_parser

    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["sweep", "--gammas", "a,b", "--betas", "0"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --gammas: --gammas must be" in err and "invalid" not in err
