"""What the command line says (issue 23, B13, C18 and C20): an interrupted run prints how to continue it,
``dlnm sweep --json`` without ``--store`` prints the points (they are kept nowhere else), and every command
and option the issue found unexplained says what it does.

Before: an interrupted ``dlnm run`` printed no resume command; ``dlnm sweep --json`` printed only
``{"complete": true, ..., "store": null}``; ``reproduce`` and ``plot`` had no description, ``reproduce --help``
said "every diagonal-network figure", ``--gradient`` said only "gradient form" and ``run --tol`` did not say
that without it a run never reports ``converged``; ``dlnm flow`` had no ``--theory``.
"""

import json
import os
import warnings

import numpy as np
import pytest
from signal_helpers import sigint_once_handled

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.cli.common import EXIT_INTERRUPTED, EXIT_OK

SMALL = ["--n", "8", "--d", "13", "--s", "3", "--n-test", "50", "--data-seed", "4", "--no-progress"]


@pytest.mark.parametrize("argv", [
    ["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "1e10"],
    ["flow", "--lam", "0.3", "--t-max", "2e5", "--scheme", "rk4"],  # (a fixed grid: millions of steps)
], ids=["run", "flow"])
def test_an_interrupted_run_prints_its_resume_command(argv, tmp_path, capsys):
    path = str(tmp_path / "r.h5")
    with sigint_once_handled() as sent:
        code = main([*argv, *SMALL, "--store", path])
    assert sent["sent"] and code == EXIT_INTERRUPTED
    err = capsys.readouterr().err
    assert f"continue with: dlnm resume {path}" in err, err
    assert dm.open_store(path).state == "interrupted"


def test_an_interrupted_run_without_a_store_says_nothing_was_kept(capsys):
    with sigint_once_handled() as sent:
        code = main(["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "1e10", *SMALL])
    assert sent["sent"] and code == EXIT_INTERRUPTED
    assert "nothing was kept (no --store)" in capsys.readouterr().err


def test_sweep_json_without_a_store_prints_the_points(capsys):
    argv = ["sweep", "--gammas", "0.01,5", "--betas", "0,0.5", "--steps", "300", "--json", *SMALL]
    assert main(argv) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    ref = dm.sweep({"n": 8, "d": 13, "s": 3, "mu": 1.0, "sigma": 1.0, "n_test": 50}, gammas=[0.01, 5.0],
                   betas=[0.0, 0.5], steps=300, seed=4)
    assert out["store"] is None and out["dims"] == ["rep", "beta", "gamma"] and out["coords"]["gamma"] == [0.01, 5.0]
    assert out["done_mask"] == ref.done.tolist()
    for name in ("train_loss", "l1_norm", "status", "theta"):
        got = np.array(out["data"][name], dtype=float)  # (null: a non-finite value of a diverged point)
        np.testing.assert_array_equal(got[np.isfinite(got)], np.asarray(ref[name], dtype=float)[np.isfinite(got)])
    assert out["status_names"] == ref.status_names.tolist() and "diverged" in json.dumps(out["status_names"])
    assert out["summary"]["diverged_excluded"] == 2


@pytest.mark.parametrize("argv, theorem", [
    (["flow", "--lam", "0.3", "--t-max", "50"], 1),
    (["run", "--gamma", "0.05", "--beta", "0.5", "--steps", "2000"], 2),
], ids=["flow", "run"])
def test_theory_option_of_single_runs(argv, theorem, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (not converged: the gap says so too)
        assert main([*argv, "--theory", *SMALL]) == EXIT_OK
    out = capsys.readouterr().out
    assert f"prediction gap (Thm {theorem})" in out and "normalized distance to GF_D" in out


@pytest.mark.parametrize("argv, theorem", [
    (["flow", "--lam", "0.3", "--t-max", "1e7", "--tol", "1e-20"], 1),
    (["run", "--gamma", "0.05", "--beta", "0.5", "--steps", "1e6", "--tol", "1e-20"], 2),
], ids=["flow", "run"])
def test_theory_option_with_json_carries_the_prediction(argv, theorem, capsys):
    """``--theory --json`` printed no theory at all (the help promises the gap)."""
    assert main([*argv, "--theory", "--json", *SMALL]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["theorem"] == theorem and 0 <= out["prediction_gap"] < 1e-8 and out["normalized_distance"] >= 0
    problem = dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=4)
    again = (dm.mgf(problem, 0.3, t_max=1e7, tol=1e-20) if theorem == 1
             else dm.mgd(problem, 0.05, 0.5, steps=10**6, tol=1e-20))
    assert out["prediction_gap"] == again.prediction_gap and out["predicted_theta"] == again.predicted_theta.tolist()


def test_theory_of_a_diverged_run_says_why_it_has_none(capsys):
    """A diverged run has no limit to predict: said, with the run's own exit code (was: an error, exit 2)."""
    argv = ["run", "--gamma", "5", "--beta", "0.9", "--steps", "1000", "--theory", *SMALL]
    assert main(argv) == 1
    assert "prediction (Thm 2)          : not computed: this run diverged" in capsys.readouterr().out
    assert main([*argv, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["prediction_gap"] is None and "diverged" in out["theory_reason"]
    assert "prediction_gap" in out["non_finite"]


def test_sweep_json_with_a_store_and_network_sweep_json(tmp_path, capsys):
    """``dlnm sweep --json --store`` left the summary out; ``dlnm network`` with a grid ignored ``--json``."""
    path = str(tmp_path / "s.h5")
    assert main(["sweep", "--gammas", "0.01,5", "--betas", "0,0.5", "--steps", "300", "--json", "--store", path,
                 *SMALL]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["store"] == path and out["summary"]["status"] and "data" not in out
    assert main(["network", "teacher-student", "--gammas", "0.01,0.02", "--betas", "0,0.5", "--steps", "100",
                 "--json", "--no-progress"]) == EXIT_OK
    out = json.loads(capsys.readouterr().out)
    assert out["points"] == 4 and out["summary"]["status"] and out["dims"] == ["rep", "beta", "gamma"]


def test_an_adaptive_run_shows_progress_without_its_budget_as_total(capsys):
    """Progress of a rodas run measured its ~1 000 steps against the 1e8-step budget (0 %, an ETA of hours)."""
    dm.gf(dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=4), t_max=1e7, tol=1e-20, progress="log")
    err = capsys.readouterr().err
    assert "1e+08" not in err and "%" not in err and " steps" in err, err


def _help(argv, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "10000")  # argparse wraps at hyphens otherwise ("deep-\nlinear")
    with pytest.raises(SystemExit):
        main([*argv, "--help"])
    return " ".join(capsys.readouterr().out.split())


def test_help_texts_say_what_they_do(capsys, monkeypatch):
    text = _help(["reproduce"], capsys, monkeypatch)
    assert "every figure of the paper" in text and "teacher-student" in text and "deep-linear" in text
    assert "Figures: quadratic" in text
    assert "every diagonal-network figure" not in text
    text = _help(["plot"], capsys, monkeypatch)
    assert "figure stores only" in text and "dlnm inspect describes them" in text
    text = _help(["sweep"], capsys, monkeypatch)
    assert "hessian H theta - b" in text and "data X^T (X theta - y)/n" in text
    assert "none reports converged" in text
    assert "every point's fields" in text  # --json
    text = _help(["run"], capsys, monkeypatch)
    assert "without it a run always uses its whole budget and never reports converged" in text
    text = _help(["network"], capsys, monkeypatch)
    assert "none reports converged" in text


def test_one_way_to_make_a_figure():
    """Issue 23 C21: ``python -m dlnmomentum.figures.networks --out DIR`` (in the README) wrote the same file
    names as ``dlnm figure`` in another layout, then failed with a raw ``KeyError`` when both used one folder,
    warned from runpy and defaulted to the paper's size. Figures 2 and 6 are made as every figure is."""
    import glob

    import dlnmomentum.figures.networks as networks

    for gone in ("main", "teacher_student_figure", "deep_linear_figure"):
        assert not hasattr(networks, gone), gone
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    docs = glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True)
    for path in [os.path.join(root, "README.md"), *docs]:
        if path.endswith("reliability.md"):  # (the tally of fixed faults quotes the old command)
            continue
        with open(path, encoding="utf-8") as fh:
            assert "python -m dlnmomentum.figures" not in fh.read(), path


def test_the_command_line_follows_the_packages_progress_rule():
    """The CLI forced a bar whenever stderr was a terminal, two-second runs included; now it leaves the choice to the
    package's one rule (a bar for work estimated over ten seconds), and --no-progress turns it off."""
    import argparse

    from dlnmomentum.cli.common import progress_wanted
    from dlnmomentum.progress import resolve

    assert progress_wanted(argparse.Namespace(no_progress=True)) is False
    auto = progress_wanted(argparse.Namespace(no_progress=False))
    assert auto is None and resolve(auto, 2.0) is None


def test_json_carries_the_recorded_rows(capsys):
    """--record-every with --json and no --store recorded rows that went nowhere: the JSON now has them."""
    assert main(["run", "--gamma", "0.05", "--beta", "0.5", "--steps", "100", "--record-every", "50", "--json"]
                + SMALL) == 0
    out = json.loads(capsys.readouterr().out)
    ref = dm.mgd(dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=4), 0.05, 0.5, steps=100,
                 record=dm.Record(every=50))
    assert out["trajectory"]["step"] == [0, 50, 100]
    assert np.array_equal(np.array(out["trajectory"]["theta"]), ref.trajectory.theta)


def test_theory_notes_are_one_line_each(capsys):
    """The API's warning that a run has not converged reached the terminal as a RuntimeWarning with a file path and
    its source line."""
    assert main(["run", "--gamma", "0.05", "--beta", "0.8", "--steps", "2000", "--theory"] + SMALL) == 0
    err = capsys.readouterr().err
    assert "RuntimeWarning" not in err and ".py:" not in err
    assert err.startswith("dlnm run: note: the theorems describe the limit") and err.count("\n") == 1
