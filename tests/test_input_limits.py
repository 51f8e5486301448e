"""The limits of user input: one seed range everywhere, sizes of generated problems, data a generator cannot
represent named by the parameter responsible, validated loss arguments, the quadratic's extremes, and one rule
for the integer options of the command line."""

import argparse

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import build_parser, main
from dlnmomentum.cli.common import parse_int

# ------------------------------------------------------------------------------------------------
# Seeds: one range, [0, 2**63 - 1], for every seed parameter
# ------------------------------------------------------------------------------------------------

SEED_TAKERS = {
    "sparse_regression": lambda s: dm.sparse_regression(n=3, d=4, s=1, n_test=0, seed=s),
    "teacher_student": lambda s: dm.teacher_student(n=3, d=2, teacher_width=2, student_width=2, n_test=0, seed=s),
    "deep_linear": lambda s: dm.deep_linear(widths=(4, 2, 1), n=3, d=4, s=1, n_test=0, seed=s),
    "mgd": lambda s: dm.mgd(dm.sparse_regression(n=3, d=4, s=1, n_test=0), 0.01, 0.5, steps=2, batch_size=2,
                            seed=s),
    "batch_indices": lambda s: dm.batch_indices(5, 2, 3, seed=s),
    "network mgd": lambda s: dm.mgd(dm.teacher_student(n=3, d=2, teacher_width=2, student_width=2, n_test=0),
                                    0.01, 0.5, steps=2, batch_size=2, seed=s),
    "sweep": lambda s: dm.sweep({"n": 3, "d": 4, "s": 1, "n_test": 0}, gammas=[0.01], betas=[0.5], steps=2,
                                seed=s, progress=False),
    "networks_sweep": lambda s: dm.networks_sweep({"generator": "teacher_student", "n": 3, "d": 2,
                                                   "teacher_width": 2, "student_width": 2, "n_test": 0},
                                                  gammas=[0.01], betas=[0.5], steps=2, seed=s, progress=False),
}


@pytest.mark.parametrize("name", SEED_TAKERS)
def test_every_seed_takes_the_same_range(name):
    """Before: generators took any seed >= 0, deep_linear < 2**63 - 2**32, runs < 2**63, sweeps <= 2**62."""
    take = SEED_TAKERS[name]
    take(0)
    take(2**63 - 1)  # the largest int64: every seed parameter takes it
    for bad in (2**63, 2**64 + 5, -1):
        with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 9223372036854775807\]"):
            take(bad)


def test_a_sweeps_last_rep_seed_is_in_range():
    """Rep r uses seed + r: the last rep's seed must be a seed a single run takes."""
    spec = {"n": 3, "d": 4, "s": 1, "n_test": 0}
    with pytest.raises(ValueError, match=r"seed must be an integer in \[0, 2\*\*63 - 1 - \(reps - 1\)\]"):
        dm.sweep(spec, gammas=[0.01], betas=[0.5], steps=2, reps=2, seed=2**63 - 1, progress=False)
    out = dm.sweep(spec, gammas=[0.01], betas=[0.5], steps=2, reps=2, seed=2**63 - 2, batch_size=2,
                   progress=False)
    one = dm.mgd(dm.sparse_regression(**spec, seed=2**63 - 1), 0.01, 0.5, steps=2, batch_size=2, seed=2**63 - 1)
    assert np.array_equal(out.data["theta"][1, 0, 0], one.theta)


def test_deep_linear_keeps_its_initialisation_stream():
    """Widening deep_linear's seed range keeps its weights: those of default_rng(seed + 2**32), drawn here."""
    p = dm.deep_linear(widths=(4, 3, 1), init_std=0.5, n=3, d=4, s=1, n_test=0, seed=2**63 - 1)
    rng = np.random.default_rng(2**63 - 1 + 2**32)
    assert np.array_equal(p.params0, 0.5 * np.concatenate([rng.standard_normal(12), rng.standard_normal(3)]))


# ------------------------------------------------------------------------------------------------
# The command line: one rule for integer options
# ------------------------------------------------------------------------------------------------

def _actions(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _actions(sub)
        else:
            yield action


def test_no_option_parses_integers_with_int():
    """Before: --n, --reps, --batch-size, ... took int() (refusing 1e3), --steps took 1e3, --max-steps took 1.5."""
    ints = [a.option_strings for a in _actions(build_parser()) if a.type is int]
    assert not ints, ints
    assert next(a for a in _actions(build_parser()) if "--max-steps" in a.option_strings).type is not float


@pytest.mark.parametrize("text, value", [("1e3", 1000), ("1E3", 1000), ("1_000", 1000), (" 20 ", 20), ("+5", 5),
                                         ("9007199254740993", 9007199254740993), ("2.0", 2),
                                         ("9223372036854775807", 2**63 - 1)])
def test_parse_int_reads_exact_integers(text, value):
    got = parse_int(text)
    assert got == value and type(got) is int


@pytest.mark.parametrize("text", ["1.5", "1e-3", "nan", "inf", "0x10", "", "1e19", "1e1000000000", "ten"])
def test_parse_int_refuses_what_is_not_an_exact_integer(text):
    with pytest.raises(argparse.ArgumentTypeError, match="expected an integer"):
        parse_int(text)


@pytest.mark.parametrize("argv, dest, value", [
    (["run", "--gamma", "0.1", "--beta", "0", "--steps", "1e3", "--n", "1e1", "--d", "2e1", "--s", "2",
      "--n-test", "1e2", "--batch-size", "5", "--seed", "1e3", "--record-log", "1e1"], None, None),
    (["flow", "--lam", "0.1", "--t-max", "1", "--max-steps", "1e3", "--record-log", "1e1"], "max_steps", 1000),
    (["sweep", "--gammas", "0.1", "--betas", "0", "--steps", "10", "--reps", "2e0", "--threads", "1e0",
      "--wave-size", "8e0", "--block-size", "8e0"], "reps", 2),
    (["network", "teacher-student", "--gamma", "0.1", "--beta", "0", "--n", "1e1", "--teacher-width", "2e0",
      "--student-width", "3e0", "--seed", "7e0", "--data-seed", "1e1"], "student_width", 3),
    (["network", "deep-linear", "--widths", "3e1,2e1,1", "--gamma", "0.1", "--beta", "0"], "widths", [30, 20, 1]),
])
def test_every_integer_option_reads_1e3(argv, dest, value):
    args = build_parser().parse_args(argv)
    if dest is not None:
        assert getattr(args, dest) == value
    else:
        assert (args.steps, args.n, args.d, args.n_test, args.seed, args.record_log) == (1000, 10, 20, 100, 1000, 10)


@pytest.mark.parametrize("argv", [
    ["run", "--gamma", "0.1", "--beta", "0", "--steps", "10", "--n", "1.5"],
    ["run", "--gamma", "0.1", "--beta", "0", "--steps", "10", "--batch-size", "1.5"],
    ["flow", "--lam", "0.1", "--t-max", "1", "--max-steps", "1.5"],
    ["sweep", "--gammas", "0.1", "--betas", "0", "--steps", "10", "--reps", "1.5"],
    ["network", "deep-linear", "--widths", "30,20.5,1", "--gamma", "0.1", "--beta", "0"],
])
def test_every_integer_option_refuses_1_5(argv, capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "1.5" in err or "20.5" in err, err


@pytest.mark.parametrize("option", ["--seed", "--data-seed"])
@pytest.mark.parametrize("text", ["9223372036854775808", "-1", "1.5", "1e30"])
def test_seed_options_have_the_api_range(option, text, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "10", option, text, "--no-progress"])
    assert exc.value.code == 2
    assert f"{option} must be an integer in [0, 9223372036854775807] (2**63 - 1), got {text!r}" \
        in capsys.readouterr().err


def test_seed_options_take_the_largest_seed():
    args = build_parser().parse_args(["run", "--gamma", "0.1", "--beta", "0", "--steps", "1",
                                      "--seed", "9223372036854775807", "--data-seed", "9.223372036854775807e18"])
    assert args.seed == args.data_seed == 2**63 - 1


# ------------------------------------------------------------------------------------------------
# Generators: sizes refused before any allocation, overflowing draws named by their parameter
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, names", [
    (lambda: dm.sparse_regression(n=10**9), "n = 1000000000, n_test = 1000, d = 30"),
    (lambda: dm.sparse_regression(d=10**9), "d = 1000000000"),
    (lambda: dm.sparse_regression(n=1, d=2**15, n_test=2**15), "n_test = 32768"),
    (lambda: dm.teacher_student(n=10**9), "n = 1000000000"),
    (lambda: dm.teacher_student(student_width=10**9), "student_width = 1000000000"),
    (lambda: dm.teacher_student(n=1, n_test=0, d=10**9), "d = 1000000000"),
    (lambda: dm.deep_linear(widths=(30, 10**6, 10**5, 1)), "widths[1] = 1000000"),
    (lambda: dm.deep_linear(n=10**9), "n = 1000000000"),
])
def test_generators_refuse_sizes_beyond_8_gib_at_once(make, names):
    """Before: MemoryError, or minutes of allocation, never naming the parameter."""
    with pytest.raises(ValueError, match=r"float64 entries; at most 1073741824 \(2\*\*30, 8 GiB\)") as exc:
        make()
    assert names in str(exc.value)


@pytest.mark.parametrize("name", ["n", "d", "n_test"])
def test_generator_sizes_have_a_range(name):
    with pytest.raises(ValueError, match=rf"{name} must be an integer in \[\d, 1073741824\]"):
        dm.sparse_regression(**{name: 10**12})


@pytest.mark.parametrize("kw", [dict(sigma=1e308), dict(mu=1e308), dict(mu=-1e200), dict(sigma=1e160)])
def test_sparse_regression_names_mu_and_sigma_when_the_moments_overflow(kw):
    """Before: 'X must contain only finite values', 'y must contain ...', or (1e200) a problem whose XᵀX/n is inf."""
    with pytest.raises(ValueError, match=r"mu = .* and sigma = .* give inputs .*need every \|x\| <= 1\.42e\+153"):
        dm.sparse_regression(**kw)


def test_sparse_regression_keeps_data_whose_moments_are_finite():
    """The bound sqrt(realmax / (2 n sqrt(s))), from the NumPy float64 maximum: just below it every moment is finite."""
    limit = np.sqrt(np.finfo(np.float64).max / (2 * 20 * np.sqrt(5)))
    p = dm.sparse_regression(mu=limit / 1.5, sigma=1.0, n_test=0)
    assert np.all(np.isfinite(p.X.T @ p.X / p.n)) and np.all(np.isfinite(p.X.T @ p.y / p.n))


@pytest.mark.parametrize("make, name", [(lambda: dm.teacher_student(init_scale=1.79e308), "init_scale"),
                                        (lambda: dm.deep_linear(init_std=1e308), "init_std")])
def test_network_generators_name_the_scale_of_overflowing_weights(make, name):
    """Before: 'params0 must contain only finite values'."""
    with pytest.raises(ValueError, match=rf"^{name} = .* gives initial weights that overflow float64"):
        make()


# ------------------------------------------------------------------------------------------------
# Losses validate their argument
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("theta, error, message", [
    (np.zeros(5), ValueError, r"theta must have shape \(30,\)"),
    (np.full(30, np.nan), ValueError, "theta must contain only finite values"),
    (np.r_[np.inf, np.zeros(29)], ValueError, "theta must contain only finite values"),
    (np.array([None] * 30, dtype=object), TypeError, "theta must be a real array"),
    (np.zeros((30, 1)), ValueError, "theta must be 1-dimensional"),
    (["0.1"] * 30, TypeError, "theta must be a real array"),
])
@pytest.mark.parametrize("loss", ["train_loss", "test_loss"])
def test_problem_losses_validate_theta(loss, theta, error, message):
    """Before: a matmul error, NaN, NaN, a TypeError from float(), a TypeError about 0-d arrays, 0.1 read."""
    p = dm.sparse_regression()
    with pytest.raises(error, match=message):
        getattr(p, loss)(theta)


def test_a_loss_that_overflows_is_inf_not_nan():
    """θ = (1e308, -1e308, 0, ...) on uncentred data: Xθ is inf - inf in float64 (NaN before); the loss is inf."""
    p = dm.sparse_regression(n_test=10)
    theta = np.r_[1e308, -1e308, np.zeros(28)]
    assert p.train_loss(theta) == np.inf and p.test_loss(theta) == np.inf
    assert p.train_loss(p.theta_star) == 0.0


@pytest.mark.parametrize("bad", [np.zeros(5), "short", "nan"])
@pytest.mark.parametrize("loss", ["train_loss", "test_loss"])
def test_network_losses_validate_the_parameters(loss, bad):
    """Before: a vector shorter than n_params was read past its end by the kernel."""
    q = dm.teacher_student()
    flat = {"short": q.params0[:-1], "nan": np.full(q.n_params, np.nan)}.get(bad, bad) if isinstance(bad, str) else bad
    with pytest.raises(ValueError, match=r"flat must (have shape \(80,\)|contain only finite values)"):
        getattr(q, loss)(flat)


# ------------------------------------------------------------------------------------------------
# Figure 1's quadratic at extreme inputs
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("gamma, beta", [(1e308, 0.5), (1e290, 1 - 2**-53)])
def test_heavy_ball_final_iterate_and_path_take_the_same_gamma_beta(gamma, beta):
    """Before: heavy_ball_quadratic returned (x0, DIVERGED) where the path raised (its λ, ε overflow)."""
    A, c, x0 = np.eye(2), np.ones(2), np.zeros(2)
    for f in (dm.heavy_ball_quadratic, dm.heavy_ball_quadratic_path):
        with pytest.raises(ValueError, match=r"lam is beyond float64's range for gamma=.*, beta=.*"):
            f(A, c, x0, gamma, beta, 10)


def test_heavy_ball_divergence_is_the_same_status_in_both():
    A, c, x0 = np.eye(2), np.ones(2), np.zeros(2)
    x, status = dm.heavy_ball_quadratic(A, c, x0, 1e200, 0.5, 10)
    path = dm.heavy_ball_quadratic_path(A, c, x0, 1e200, 0.5, 10)
    assert status == path.status == dm.Status.DIVERGED
    assert np.array_equal(x, x0) and np.array_equal(path.x, [x0])


def test_heavy_ball_path_refuses_times_that_overflow():
    """x0 the minimiser: the iterates stay, their times k·ε (ε = 1e307) overflowed to inf silently before."""
    with pytest.raises(ValueError, match=r"the MGF time k·eps of iterate k = 100 overflows float64"):
        dm.heavy_ball_quadratic_path(np.eye(1), [1.0], [1.0], 1e306, 0.9, 1000, every=100)


def _mode(a, lam, t, z0, e):
    """The scalar mode λz'' + z' + az = e, z(0) = z0, z'(0) = 0, at time t, in 60-digit arithmetic (mpmath)."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(60):
        a, lam, t, z0, e = (mp.mpf(v) for v in (a, lam, t, z0, e))
        if lam == 0:
            h = mp.exp(-a * t)
            phi = t if a == 0 else -mp.expm1(-a * t) / a
        else:
            D = 1 - 4 * lam * a
            root = mp.sqrt(D) if D >= 0 else 1j * mp.sqrt(-D)
            sp, sm = (-1 + root) / (2 * lam), (-1 - root) / (2 * lam)
            h = mp.re((sp * mp.exp(sm * t) - sm * mp.exp(sp * t)) / (sp - sm))
            phi = (1 - h) / a
        return float(h * z0 + phi * e)


@pytest.mark.parametrize("lam", [0.0, 1e-3, 1.0, 1e5])
@pytest.mark.parametrize("t", [1e20, 1e300, 1e308, 1.7e308])
@pytest.mark.parametrize("a", [1e10, 1.0, 1e-10])
def test_quadratic_flow_at_absurd_horizons_gives_the_limits(a, t, lam):
    """Before: NaN (1e308 with λ > 0: cos of an overflowed phase, 0·inf) and 0 for the limit 1/a (λ = 0: t·φ₁(-at)
    with at overflowed), depending on λ."""
    A, c, x0 = np.diag([a, 2.0]), np.array([1.0, 1.0]), np.array([1.0, 3.0])
    x = dm.quadratic_flow(A, c, x0, lam, [0.0, 1.0, t]).x
    assert np.array_equal(x[0], x0)
    want = [_mode(a, lam, t, 1.0, 1.0), _mode(2.0, lam, t, 3.0, 1.0)]
    np.testing.assert_allclose(x[2], want, rtol=1e-13)
    np.testing.assert_allclose(x[2], [1 / a, 0.5], rtol=1e-13)  # the minimiser A⁻¹c


def test_quadratic_flow_along_a_null_space_to_huge_times():
    """a = 0: x(t) = x0 + c(t - λ(1 - e^{-t/λ})); t = λ = 1e300 overflowed t²/λ before (inf, then NaN)."""
    x = dm.quadratic_flow(np.zeros((1, 1)), [1.0], [0.0], 1e300, [1e300]).x[0]
    assert x[0] == pytest.approx(1e300 * np.exp(-1.0), rel=1e-14)
    with pytest.raises(ValueError, match=r"overflows float64 at times\[0\] = 1e\+308"):
        dm.quadratic_flow(np.diag([0.0, 2.0]), [10.0, 1.0], [0.0, 3.0], 1.0, [1e308])


def test_quadratic_flow_refuses_an_unresolved_oscillation():
    """λ = t = 1e300, a = 2: e^{-t/2λ} ≈ 0.6, phase t·√(a/λ) ≈ 1.4e150 whose rounding is worth more than a turn: any
    number in the envelope was as good as another (a value differing from the exact one by 0.15 before)."""
    with pytest.raises(ValueError, match=r"is not resolved at times\[0\] = 1e\+300: the mode of eigenvalue 2\.0"):
        dm.quadratic_flow(np.diag([1e-300, 2.0]), [0.0, 1.0], [0.0, 3.0], 1e300, [1e300])
