"""Hostile input that used to slip through (issue 23, B12 and B14): refused before any work, with an error that
names the parameter (or the file) and the allowed range; nothing silently coerced.

Before: ``store=""`` ran the whole budget, returned ``interrupted`` and wrote nothing; ``networks_sweep`` on a
diagonal sweep store raised a raw ``KeyError``; ``sweep(store=<a directory>)`` said the store "exists"; a
missing directory was reported as a missing ``.lock`` file; ``X * 1e200`` was accepted by ``mgd`` and ``sweep``;
``Record(log=1e30)``, ``gammas="1e-3:1e-1:1e12"`` and ``reps=1e12`` died in NumPy (MemoryError);
``gammas=[True]`` ran γ = 1, ``gammas=['0.1']`` was accepted, ``"0.1,,0.2"`` dropped the empty item,
``resume="no"`` resumed and ``overwrite="yes"`` replaced; ``dlnm network --gamma 0.1 --gammas 0.1`` ignored
``--gamma`` and ``--widths a,b`` did not name ``--widths``.
"""

import os
import time
import warnings

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main

SMALL = dict(n=8, d=13, s=3, n_test=50)
NETWORK = {"generator": "teacher_student", "n": 6, "d": 2, "teacher_width": 2, "student_width": 3, "n_test": 20}
GRID = dict(gammas=[0.01], betas=[0.5], steps=100)


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(**SMALL, seed=4)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in an empty folder: an empty store path must leave nothing behind (no '.lock', no '.creating')."""
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)


STORE_CALLS = {
    "mgd": lambda P, store: dm.mgd(P, 0.01, 0.5, steps=10**9, store=store),
    "mgf": lambda P, store: dm.mgf(P, 0.1, t_max=2e5, store=store),
    "gf": lambda P, store: dm.gf(P, t_max=2e5, store=store),
    "sweep": lambda P, store: dm.sweep(P, gammas=[0.01], betas=[0.5], steps=10**9, store=store),
    "networks_sweep": lambda P, store: dm.networks_sweep(NETWORK, gammas=[0.01], betas=[0.5], steps=10**9,
                                                         store=store),
}


@pytest.mark.parametrize("call", list(STORE_CALLS))
def test_an_empty_store_path_is_refused_before_any_work(problem, in_tmp, call):
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=r"store must be a file path, got '' \(empty\)"):
        STORE_CALLS[call](problem, "")
    assert time.monotonic() - t0 < 5.0  # refused up front, not after a budget of 1e9 steps


@pytest.mark.parametrize("call", list(STORE_CALLS))
def test_a_directory_and_a_missing_directory_are_named(problem, tmp_path, call):
    with pytest.raises(IsADirectoryError, match=f"store {tmp_path} is a directory"):
        STORE_CALLS[call](problem, tmp_path)
    missing = tmp_path / "no" / "s.h5"
    with pytest.raises(FileNotFoundError, match=f"directory {tmp_path / 'no'} does not exist") as info:
        STORE_CALLS[call](problem, missing)
    assert ".lock" not in str(info.value)


def test_networks_sweep_on_a_diagonal_sweep_store_names_it(problem, tmp_path):
    path = tmp_path / "s.h5"
    dm.sweep(problem, store=path, **GRID)
    with pytest.raises(dm.StoreError, match=r"is a sweep store, not a network sweep store; continue it with "
                                            r"dlnmomentum\.resume_sweep") as info:
        dm.networks_sweep(NETWORK, gammas=[0.01], betas=[0.5], steps=10, store=path, resume=True)
    assert str(path) in str(info.value)
    with pytest.raises(dm.StoreError, match=r"is a sweep store, not a network sweep store; continue it with"):
        dm.resume_networks_sweep(path)
    with pytest.raises(dm.StoreError, match=r"is a sweep store, not a network sweep store"):
        dm.open_networks_sweep(path)


def scaled(problem, factor):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dm.Problem(problem.X * factor, problem.y, problem.X_test * factor, problem.y_test)


CASES = {
    "mgd X * 1e200": (lambda P: dm.mgd(scaled(P, 1e200), 0.01, 0.5, steps=10), ValueError,
                      r"X must be scaled so that XᵀX/n and Xᵀy/n are finite: rescale X and y"),
    "smgd X * 1e200": (lambda P: dm.mgd(scaled(P, 1e200), 0.01, 0.5, steps=10, batch_size=2), ValueError,
                       r"X must be scaled so that XᵀX/n and Xᵀy/n are finite"),
    "sweep X * 1e200": (lambda P: dm.sweep(scaled(P, 1e200), **GRID), ValueError,
                        r"X must be scaled so that XᵀX/n and Xᵀy/n are finite"),
    "sweep spec mu 1e200": (lambda P: dm.sweep(dict(SMALL, mu=1e200), **GRID), ValueError,
                            r"mu = 1e\+200 and sigma = 1\.0 give inputs .* XᵀX/n and Xᵀy/n need every \|x\| <="),
    "mgf X * 1e200": (lambda P: dm.mgf(scaled(P, 1e200), 0.1, t_max=1), ValueError,
                      r"X must be scaled so that XᵀX/n, Xᵀy/n and the stiffness estimate"),
    "Record log 1e30": (lambda P: dm.Record(log=1e30), ValueError, r"log must be an integer in \[1, 10000000\]"),
    "gammas num 1e12": (lambda P: dm.sweep(P, gammas="1e-3:1e-1:1e12", betas=[0.5], steps=10), ValueError,
                        r"gammas must be .* \(num must be an integer in \[1, 1000000\], got '1e12'\)"),
    "reps 1e12": (lambda P: dm.sweep(SMALL, gammas=[0.01], betas=[0.5], steps=10, reps=1e12), ValueError,
                  r"reps must be an integer in \[1, 1000000\]"),
    "too many points": (lambda P: dm.sweep(SMALL, gammas="1e-3:1e-1:1000", betas="0:0.9:1000", steps=10, reps=20),
                        ValueError, r"a sweep takes at most 10000000 points .* reps=20 x betas=1000 x gammas=1000"),
    "network reps 1e12": (lambda P: dm.networks_sweep(NETWORK, gammas=[0.01], betas=[0.5], steps=10, reps=1e12),
                          ValueError, r"reps must be an integer in \[1, 1000000\]"),
    "gammas complex": (lambda P: dm.sweep(P, gammas=[1j], betas=[0.5], steps=10), TypeError,
                       r"gammas\[0\] must be a real number in \(0, inf\), got complex"),
    "gammas bool": (lambda P: dm.sweep(P, gammas=[True], betas=[0.5], steps=10), TypeError,
                    r"gammas\[0\] must be a real number in \(0, inf\), got bool"),
    "gammas str": (lambda P: dm.sweep(P, gammas=["0.1"], betas=[0.5], steps=10), TypeError,
                   r"gammas\[0\] must be a real number in \(0, inf\), got str"),
    "betas bool array": (lambda P: dm.sweep(P, gammas=[0.1], betas=np.array([False]), steps=10), TypeError,
                         r"betas\[0\] must be a real number in \[0, 1\), got bool"),
    "lams empty item": (lambda P: dm.sweep(P, lams="0.1,,0.2", t_max=1), ValueError,
                        r"lams must be .*; got '0.1,,0.2' \(value 2 of 3 is empty\)"),
    "gammas trailing comma": (lambda P: dm.sweep(P, gammas="0.1,", betas=[0.5], steps=10), ValueError,
                              r"value 2 of 2 is empty"),
    "pairs bool": (lambda P: dm.sweep(P, pairs=[(True, 0.5)], steps=10), TypeError,
                   r"pairs\[0\] gamma must be a real number in \(0, inf\), got bool"),
    "network gammas str": (lambda P: dm.networks_sweep(NETWORK, gammas=["0.1"], betas=[0.5], steps=10), TypeError,
                           r"gammas\[0\] must be a real number"),
    "network widths float": (lambda P: dm.networks_sweep({"generator": "deep_linear", "widths": [30, 2.5, 1]},
                                                         gammas=[0.1], betas=[0.5], steps=10), TypeError,
                             r"widths\[1\] must be an integer in \[1, inf\), got 2.5"),
    "sweep replace str": (lambda P: dm.sweep(P, gammas=[0.1], betas=[0.5], steps=10, batch_size=2, replace="no"),
                          TypeError, r"replace must be True or False, got 'no'"),
    "mgd overwrite str": (lambda P: dm.mgd(P, 0.01, 0.5, steps=10, store="x.h5", overwrite="yes"), TypeError,
                          r"overwrite must be True or False, got 'yes'"),
    # the kernels count |w| >= 1e150 as diverged: such a start was accepted and "diverged" after 0 steps
    "alpha at the divergence bound": (lambda P: dm.mgd(P, 1e-300, 0.0, steps=10, alpha=1e150), ValueError,
                                      r"alpha must be in \[1e-150, 1e\+150\), got 1e\+150"),
    "u0 at the divergence bound": (lambda P: dm.mgf(P, 0.5, t_max=1, u0=np.full(P.d, 1e150)), ValueError,
                                   r"u0 must have entries in \(-1e\+150, 1e\+150\)"),
    # ignored before
    "alpha beside u0": (lambda P: dm.mgd(P, 0.01, 0.5, steps=10, alpha=0.5, u0=np.full(P.d, 0.1)), ValueError,
                        r"alpha sets the default u0 = alpha \* 1: give alpha \(0.5\) or u0, not both"),
    "negative alpha beside u0": (lambda P: dm.gf(P, t_max=1, alpha=-5, u0=np.full(P.d, 0.1)), ValueError,
                                 r"alpha must be in \[1e-150, 1e\+150\), got -5"),
    "replace without a batch": (lambda P: dm.mgd(P, 0.01, 0.5, steps=10, replace=True), ValueError,
                                r"replace=True draws SMGD batches with replacement: it needs a batch_size"),
    "gradient form of SMGD": (lambda P: dm.mgd(P, 0.01, 0.5, steps=10, batch_size=2, gradient="hessian"),
                              ValueError, r"gradient='hessian' chooses the form of the full-batch gradient"),
    # said "|u0_i| != |v0_i| violated" where u0 = 1e-200, v0 = 0
    "u0 too small": (lambda P: dm.mgd(P, 0.01, 0.5, steps=10, u0=np.full(P.d, 1e-200)), ValueError,
                     r"u0 and v0 are too small: the balancedness Delta0 = \|u0\^2 - v0\^2\| underflows to 0"),
    # the input-validation probe of 2026-11-27: each of these ran, hung, or failed deep inside
    "params a stores cannot keep": (lambda P: dm.Problem(P.X, P.y, params={"a": object()}), TypeError,
                                    r"params\['a'\] must be JSON data .* got object"),
    "record times far past a grid": (lambda P: dm.mgf(P, 0.1, t_max=0.5, scheme="rk4",
                                                      record=dm.Record(times=[1e20])), ValueError,
                                     r"times must be in \[0, t_max = 0.5\]"),
    "network steps 1e30": (lambda P: dm.mgd(dm.teacher_student(n=6, d=2, teacher_width=2, student_width=3,
                                                               n_test=20), 0.05, 0.5, steps=10**30), ValueError,
                           r"steps must be an integer in \[0, 4611686018427387904\]"),
    "network sweep steps 1e30": (lambda P: dm.networks_sweep(NETWORK, gammas=[0.1], betas=[0.5], steps=10**30),
                                 ValueError, r"steps must be an integer in \[0, 4611686018427387904\]"),
    "block_size 1e30": (lambda P: dm.sweep(P, **GRID, block_size=10**30), ValueError,
                        r"block_size must be an integer in \[8, 10000000\]"),
    "figure overwrite str": (lambda P: dm.figures.figure("quadratic", "tiny", "figs", "no"), TypeError,
                             r"overwrite must be True or False, got 'no'"),
    "reproduce names str": (lambda P: dm.figures.reproduce("tiny", "figs", names="quadratic"), TypeError,
                            r"names must be a non-empty list of figure names"),
    "reproduce no names": (lambda P: dm.figures.reproduce("tiny", "figs", names=[]), TypeError,
                           r"names must be a non-empty list of figure names"),
    "implicit_bias delta 1e308": (lambda P: dm.theory.implicit_bias(P.X, P.y, 1e308), ValueError,
                                  r"delta must be finite and in \(0, 1e\+150\]"),
    "implicit_bias tol 3": (lambda P: dm.theory.implicit_bias(P.X, P.y, 1.0, tol=3.0), ValueError,
                            r"tol must be in \(0, 1\), got 3.0"),
    "implicit_bias raise_on_failure str": (lambda P: dm.theory.implicit_bias(P.X, P.y, 1.0, raise_on_failure="no"),
                                           TypeError, r"raise_on_failure must be True or False"),
    "predict theta0_mirror NaN": (lambda P: dm.theory.predict(P.X, P.y, 0.01, 0.0, np.zeros(P.d),
                                                              theta0_mirror=np.full(P.d, np.nan)), ValueError,
                                  r"theta0_mirror must be finite"),
    "mgd_time step True": (lambda P: dm.mgd_time(True, 0.1, 0.5), TypeError, r"step must be real-valued, got bool"),
    "mgd_time step 1.5": (lambda P: dm.mgd_time(1.5, 0.1, 0.5), ValueError, r"step must be whole step numbers"),
    "mgd_time overflow": (lambda P: dm.mgd_time(10, 1e308, 0.5), ValueError, r"eps is beyond float64's range"),
    "u0 object strings": (lambda P: dm.mgd(P, 0.01, 0.5, steps=3, u0=np.array(["0.01"] * P.d, dtype=object)),
                          TypeError, r"u0 must be a real array: got '0.01' \(str\)"),
    "X masked": (lambda P: dm.Problem(np.ma.masked_array(P.X), P.y), TypeError,
                 r"X must be a plain array: the mask of a masked array would be dropped"),
    "gammas nan text": (lambda P: dm.sweep(P, gammas="nan,0.1", betas=[0.5], steps=10), ValueError,
                        r"value 'nan' is not a finite number"),
    "gammas span overflows": (lambda P: dm.sweep(P, gammas="1e308:-1e308:3", betas=[0.5], steps=10), ValueError,
                              r"the span stop - start is beyond float64's range"),
    "mgf_from_mgd default substeps": (lambda P: dm.mgf_from_mgd(P, 1e30, 0.5, steps=10), ValueError,
                                      r"gamma = 1e\+30 and beta = 0.5 give lambda .* would need .* substeps per MGD "
                                      r"step"),
    "sweep log not callable": (lambda P: dm.sweep(P, **GRID, log=3.0), TypeError,
                               r"log must be None or a callable that takes a line of text"),
    "checkpoint_every without a store": (lambda P: dm.mgd(P, 0.01, 0.5, steps=3, checkpoint_every=np.nan),
                                         ValueError, r"checkpoint_every must be finite"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_refused_with_the_parameter_and_its_range(problem, name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    call, exc, match = CASES[name]
    t0 = time.monotonic()
    with pytest.raises(exc, match=match):
        call(problem)
    assert time.monotonic() - t0 < 10.0
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("kind", ["sweep", "networks_sweep"])
def test_resume_and_overwrite_take_bools_only(problem, tmp_path, kind):
    path = tmp_path / "s.h5"
    if kind == "sweep":
        def call(**kw):
            return dm.sweep(problem, store=path, **GRID, **kw)
    else:
        def call(**kw):
            return dm.networks_sweep(NETWORK, gammas=[0.01], betas=[0.5], steps=10, store=path, **kw)
    call()
    before = path.read_bytes()
    with pytest.raises(TypeError, match=r"resume must be True or False, got 'no'"):
        call(resume="no")  # used to resume
    with pytest.raises(TypeError, match=r"overwrite must be True or False, got 'yes'"):
        call(overwrite="yes")  # used to replace the store
    with pytest.raises(TypeError, match=r"resume must be True or False, got 1"):
        call(resume=1)
    assert path.read_bytes() == before


@pytest.mark.parametrize("argv, says", [
    (["sweep", "--gammas", "1e-3:1e-1:1e12", "--betas", "0.5", "--steps", "10"],
     "num must be an integer in [1, 1000000]"),
    (["sweep", "--gammas", "0.1,,0.2", "--betas", "0.5", "--steps", "10"], "value 2 of 3 is empty"),
    (["sweep", "--pairs", "0.01/0.5,,0.1/0", "--steps", "10"], "pair 2 of 3 is empty"),
    (["network", "deep-linear", "--widths", "a,b", "--gamma", "0.01", "--beta", "0.5", "--steps", "10"],
     "--widths must be layer widths"),
    (["network", "deep-linear", "--widths", "30,2.5,1", "--gamma", "0.01", "--beta", "0.5", "--steps", "10"],
     "(entry 2, '2.5')"),
    (["network", "teacher-student", "--gamma", "0.1", "--beta", "0.5", "--gammas", "0.1", "--betas", "0.5",
      "--steps", "10"], "give --gamma and --beta (one run) or --gammas and --betas (a sweep), not both"),
    (["network", "teacher-student", "--gamma", "0.1", "--gammas", "0.1", "--betas", "0.5", "--steps", "10"],
     "not both"),
    (["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "10", "--store", ""], "store must be a file path"),
])
def test_cli_refuses_with_the_option(argv, says, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    try:
        code = main([*argv, "--no-progress"])
    except SystemExit as exc:  # argparse: the option's own type refused it
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err, err
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("scheme", ["auto", "rk4", "rodas"])
def test_an_initial_velocity_for_gradient_flow_is_refused(problem, scheme):
    """Gradient flow is first order: ``mgf(problem, 0.0, u_dot0=...)`` ran it and dropped the velocity."""
    for given in (dict(u_dot0=np.ones(problem.d)), dict(v_dot0=np.zeros(problem.d))):
        with pytest.raises(ValueError, match=r"u_dot0 and v_dot0 are the initial velocity of MGF\(lam > 0\); "
                                             r"gradient flow \(lam = 0\)"):
            dm.mgf(problem, 0.0, t_max=1.0, scheme=scheme, **given)


def test_cli_gf_with_lam_is_refused(capsys):
    """``dlnm flow --gf --lam 0.5`` ran gradient flow and ignored ``--lam``."""
    assert main(["flow", "--gf", "--lam", "0.5", "--t-max", "1", "--n", "8", "--d", "13", "--n-test", "50"]) == 2
    assert "--gf is gradient flow (lambda = 0) and --lam 0.5 asks for MGF(lambda)" in capsys.readouterr().err


@pytest.mark.parametrize("alpha", ["1e160", "-0.1", "0", "1e-200", "nan"])
def test_theory_bound_checks_alpha_as_the_runs_do(alpha, capsys):
    """``dlnm theory bound --alpha 1e160`` crashed (OverflowError traceback, exit 1); -0.1 and 0 gave a bound."""
    assert main(["theory", "bound", "--alpha", alpha]) == 2
    err = capsys.readouterr().err
    assert "--alpha must be" in err and "in [1e-150, 1e+150), got" in err, err


def test_batch_indices_takes_replace_as_a_bool_only():
    """``batch_indices(5, 2, 3, replace="no")`` drew with replacement (``bool("no")``); ``mgd`` refused it."""
    with pytest.raises(TypeError, match="replace must be True or False, got 'no'"):
        dm.batch_indices(5, 2, 3, replace="no")
    assert dm.batch_indices(5, 2, 3, replace=False).shape == (3, 2)


def test_integer_options_are_read_exactly():
    """``--steps 9007199254740993`` ran 9007199254740992 steps (read through a float): digits and exponents are read
    as the decimals they are."""
    import argparse

    from dlnmomentum.cli.common import parse_int

    assert parse_int("9007199254740993") == 9007199254740993
    assert parse_int("9.007199254740993e15") == 9007199254740993
    assert parse_int("1e6") == 1_000_000 and parse_int("1_000") == 1000 and parse_int("-3") == -3
    for bad in ("1e-3", "inf", "nan", "3x"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected an integer"):
            parse_int(bad)
    with pytest.raises(argparse.ArgumentTypeError, match="expected an integer"):
        parse_int("2.5")


@pytest.mark.parametrize("n_steps", [2**53 + 3, 2**62 - 1, 123456789012345679])
def test_a_log_schedule_stays_within_the_budget(n_steps):
    """geomspace's float end rounded past budgets above 2**53: the schedule held n_steps + 1."""
    steps = dm.Record(log=5).step_schedule(n_steps)
    assert steps[-1] == n_steps and steps.max() == n_steps and np.all(np.diff(steps) > 0)


def test_values_that_cannot_be_computed_say_why(capsys):
    """A loss that overflows at the end of a run that has not (yet) diverged, and S± where an iterate landed exactly
    on 0: the summary says why; the prediction names the cause (it said "theta0_tilde must not be NaN")."""
    far = dm.mgd(dm.sparse_regression(seed=0), 5.0, 0.5, steps=6)
    assert far.status_name == "max_steps" and np.isinf(far.train_loss)
    assert "a loss overflows float64 at this theta" in far.summary()
    zero = dm.mgd(dm.Problem([[1.0, 0.5]], [1.0]), 1.0, 0.3, steps=1000, alpha=0.1, tol=1e-20)
    assert zero.status_name == "converged" and np.isnan(zero.s_minus[0]) and zero.min_delta[0] == 0.0
    assert "undefined at coordinates [0]: an iterate of w+ or w- was exactly 0" in zero.summary()
    with pytest.raises(ValueError, match=r"theta0_tilde is undefined at coordinates \[0\].*exactly 0"):
        _ = zero.prediction_gap
    diverged = dm.mgd(dm.sparse_regression(seed=0), 0.4814, 0.0, steps=100_000)
    assert diverged.status_name == "diverged" and np.all(np.isfinite(diverged.delta_inf))
    assert "|Delta_inf|  : inf" not in diverged.summary()  # (np.linalg.norm overflowed; the entries are finite)


def test_a_store_write_that_fails_at_the_end_is_an_error_not_an_interruption(problem, tmp_path):
    """A failure of the store's last writes was dropped at close: the run came back "interrupted", with a warning
    to `dlnm resume` a file that was never created."""
    odd = dm.sparse_regression(**SMALL, seed=4)
    object.__setattr__(odd, "params", {"a": object()})  # (past Problem's check: a failure the writer meets)
    path = tmp_path / "s.h5"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "left at its last checkpoint ... dlnm resume" warning
        with pytest.raises(dm.StoreError, match=r"writing store .*s.h5 failed: .*not JSON serializable"):
            dm.mgd(odd, 0.05, 0.5, steps=5, store=str(path))
    assert os.listdir(tmp_path) == []


def test_the_cli_says_when_sizes_do_not_fit_in_memory(capsys):
    # the generator refuses sizes beyond 2**30 entries by name (since the input limits); a flow, which needs the
    # d x d Hessian, on a d whose Hessian does not fit is still met as a MemoryError, reported as such (MGD in the
    # data form no longer forms it: tests/test_wide_data.py)
    assert main(["run", "--gamma", "0.05", "--beta", "0.5", "--steps", "20", "--n", "1000000000000", "--d", "8",
                 "--no-progress"]) == 2
    assert "n must be an integer in [1, 1073741824], got 1000000000000" in capsys.readouterr().err
    assert main(["flow", "--gf", "--t-max", "1", "--n", "2", "--d", "300000", "--n-test", "0", "--no-progress"]) == 2
    assert "not enough memory for these sizes" in capsys.readouterr().err


@pytest.mark.parametrize("argv, says", [
    (["teacher-student", "--gamma", "0.1", "--beta", "0.5", "--widths", "3,1"],
     "--widths is an option of deep-linear networks, not of teacher-student ones"),
    (["deep-linear", "--gamma", "0.01", "--beta", "0.5", "--teacher-width", "3"],
     "--teacher-width is an option of teacher-student networks"),
    (["teacher-student", "--gamma", "0.1", "--beta", "0.5", "--reps", "3"], "--reps is not read by one run"),
    (["teacher-student", "--gammas", "0.1", "--betas", "0.5", "--seed", "3"], "--seed is not read by a sweep"),
])
def test_network_options_that_would_be_ignored_are_refused(argv, says, capsys):
    assert main(["network"] + argv + ["--steps", "10", "--no-progress"]) == 2
    assert says in capsys.readouterr().err


def test_extreme_but_valid_theory_inputs_are_computed():
    """Δ = 1e-320 failed with numpy's "Maximum allowed size exceeded" (c/Δ overflowed the continuation's stage
    count); θ = 1e300 gave a prediction gap of inf (the norms' squares overflowed)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3, 5))
    y = X @ np.array([1.0, 0, 0, 0, 0])
    tiny = dm.theory.implicit_bias(X, y, 1e-320)
    assert tiny.converged and np.all(np.isfinite(tiny.theta))
    gap = dm.theory.predict(X, y, 0.01, 0.0, np.full(5, 1e300)).prediction_gap
    assert np.isfinite(gap) and gap > 1e299


def test_summaries_say_what_a_nan_means():
    p = dm.sparse_regression(**dict(SMALL, n_test=0), seed=4)
    assert "test loss    : nan (no test set)" in dm.mgd(p, 0.01, 0.5, steps=3).summary()
    flow = dm.mgf(dm.sparse_regression(**SMALL, seed=4), 0.1, t_max=0.5, tol=1e308)
    assert flow.steps_done == 0 and "last h=- (no step)" in flow.summary()
    far = dm.mgf(dm.sparse_regression(n=5, d=8, s=2, n_test=10), 0.1, t_max=1e20)
    assert far.status_name == "diverged" and far.train_loss < 1e-25  # (a horizon past what t resolves)
    assert "far past the limit, time has too few digits" in far.summary()
    assert far.message.startswith("diverged: the adaptive step size fell below 1e-13")  # (not "non-finite")


def test_inspect_names_an_empty_path_as_the_other_commands_do(capsys):
    assert main(["inspect", ""]) == 2
    assert "path must be a file path, got '' (empty)" in capsys.readouterr().err  # ("store  does not exist")
