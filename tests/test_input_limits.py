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
