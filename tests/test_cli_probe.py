"""What an end-to-end probe of ``dlnm`` found (each test fails on the code before its fix).

- ``dlnm run/flow/resume/network --json`` gave ``"status": 2`` where ``dlnm inspect --json`` gave
  ``"status": "max_steps"`` (and its ``final.status`` was ``2`` again): the status is a name in every JSON now,
  the code beside it as ``status_code``.
- ``dlnm sweep --json`` named the ``status`` codes of its points (``status_names``) but not the ``theory_reason``
  codes.
- ``dlnm figure/reproduce --json`` printed ``NaN`` (not JSON) for a measure that could not be computed.
- A library warning came out as Python shows it: the package's file, line, category and a line of its source.
- An existing sweep store was refused with "pass resume=True ... overwrite=True": API words, not the options.
"""

import json
import math
import os
import subprocess
import sys
import warnings

import pytest

import dlnmomentum as dm
import dlnmomentum.cli.figure as cli_figure
from dlnmomentum.cli import main
from dlnmomentum.cli.common import EXIT_DIVERGED, EXIT_ERROR, EXIT_OK

SMALL = ["--n", "8", "--d", "13", "--s", "3", "--n-test", "50", "--data-seed", "4", "--no-progress"]


def strict_json(text):
    """``json.loads`` that refuses NaN/Infinity: standard JSON only."""
    def refuse(token):
        raise ValueError(f"not standard JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_every_run_json_gives_the_status_by_name(tmp_path, capsys):
    path = str(tmp_path / "r ü n.h5")
    assert main(["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "1e2", "--json", "--store", path,
                 *SMALL]) == EXIT_OK
    run = strict_json(capsys.readouterr().out)
    assert main(["inspect", path, "--json"]) == EXIT_OK
    inspected = strict_json(capsys.readouterr().out)
    assert main(["resume", path, "--json", "--no-progress"]) == EXIT_OK
    resumed = strict_json(capsys.readouterr().out)
    for out in (run, inspected, inspected["final"], resumed):
        assert out["status"] == "max_steps", out["status"]
    for out in (run, inspected["final"], resumed):
        assert out["status_code"] == 2 and out["status_name"] == "max_steps"  # (dlnmomentum.Status: 2 max_steps)
    assert main(["run", "--gamma", "50", "--beta", "0.5", "--steps", "200", "--json", *SMALL]) == EXIT_DIVERGED
    assert strict_json(capsys.readouterr().out)["status"] == "diverged"
    assert main(["network", "teacher-student", "--gamma", "0.1", "--beta", "0.5", "--steps", "20", "--n-test", "10",
                 "--json", "--no-progress"]) == EXIT_OK
    assert strict_json(capsys.readouterr().out)["status"] == "max_steps"


def test_sweep_json_names_the_theory_reason_codes(capsys):
    argv = ["sweep", "--gammas", "0.01,5", "--betas", "0,0.5", "--steps", "300", "--theory", "--json", *SMALL]
    assert main(argv) == EXIT_OK
    out = strict_json(capsys.readouterr().out)
    # (dlnmomentum.runs.points.TheoryReason: 2 not_converged, 3 diverged; gamma = 5 diverges, 0.01 does not converge
    # in 300 steps)
    assert out["data"]["theory_reason"] == [[[2, 3], [2, 3]]]
    assert out["theory_reason_names"] == [[["not_converged", "diverged"], ["not_converged", "diverged"]]]
    assert out["status_names"] == [[["max_steps", "diverged"], ["max_steps", "diverged"]]]


def test_figure_json_is_standard_json(monkeypatch, tmp_path, capsys):
    """A summary with a measure not computed (NaN, as the tiny network figures' lambda spread) is printed as null."""
    summary = {"lambda_spread": {"along": math.nan, "total": 1.5, "reason": "too few points"}}
    monkeypatch.setattr(cli_figure, "figure", lambda *a, **k: ("x.h5", ["x.png"], summary))
    assert main(["figure", "deep-linear", "--tiny", "--out", str(tmp_path), "--json"]) == EXIT_OK
    out = strict_json(capsys.readouterr().out)
    assert out["summary"]["lambda_spread"] == {"along": None, "total": 1.5, "reason": "too few points"}


def test_a_library_warning_is_one_line_on_stderr(monkeypatch, capsys):
    monkeypatch.setattr("dlnmomentum.runs.stepping.LARGE_GRID", 10)  # (the estimate warning of a long RK4 grid)
    with pytest.warns(RuntimeWarning):  # (outside main: the warning display is the caller's again)
        assert main(["flow", "--lam", "0.3", "--t-max", "1", "--scheme", "rk4", *SMALL]) == EXIT_OK
        warnings.warn("after main", RuntimeWarning, stacklevel=1)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if "RK4 steps" in line]
    assert len(lines) == 1 and lines[0].startswith("dlnm flow: warning: MGF(lambda=0.3)"), err
    assert ".py:" not in err and "RuntimeWarning" not in err and "prepare_flow" not in err, err


@pytest.mark.parametrize("argv", [
    ["sweep", "--gammas", "0.01", "--betas", "0", "--steps", "10", *SMALL],
    ["network", "teacher-student", "--gammas", "0.1", "--betas", "0", "--steps", "10", "--n-test", "10",
     "--no-progress"],
], ids=["sweep", "network"])
def test_an_existing_sweep_store_is_refused_naming_the_options(argv, tmp_path, capsys):
    path = str(tmp_path / "s.h5")
    assert main([*argv, "--store", path]) == EXIT_OK
    capsys.readouterr()
    assert main([*argv, "--store", path]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert "exists" in err and "--resume" in err and "--overwrite" in err, err
    assert dm.open_sweep(path).complete


@pytest.mark.parametrize("scheme", ["auto", "exp-rk4", "rodas", "rk4"])
def test_a_subnormal_lambda_is_refused_by_name(scheme):
    """Before: --lam 5e-324 raised a ZeroDivisionError (auto: the default RK4 step 0.7 lambda underflowed to 0),
    never returned from the first chunk, deaf to SIGTERM (exp-rk4), or reported "diverged" at step 0 (rodas).
    Run in a subprocess: without the fix the exponential scheme would not return."""
    argv = ["flow", "--t-max", "1", "--lam", "5e-324", "--scheme", scheme, *SMALL]
    proc = subprocess.run([sys.executable, "-m", "dlnmomentum", *argv], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert proc.returncode == EXIT_ERROR, proc.stderr[-2000:]
    assert "dlnm: error: --lam must be 0 (gradient flow) or in [2.2250738585072014e-308, 1e+100]" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_subnormal_lambda_is_refused_in_a_flow_sweep(capsys):
    assert main(["sweep", "--lams", "0,5e-324", "--t-max", "1", *SMALL]) == EXIT_ERROR
    assert "--lams (entry 2) must be 0 (gradient flow) or in [2.2250738585072014e-308" in capsys.readouterr().err


def test_the_smallest_normal_lambda_runs(capsys):
    assert main(["flow", "--t-max", "1", "--lam", "2.2250738585072014e-308", "--json", *SMALL]) == EXIT_OK
    assert json.loads(capsys.readouterr().out)["status"] == "max_steps"
