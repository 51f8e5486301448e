"""Errors of ``dlnm`` name the option the user typed, not the Python API's parameter.

Before: ``dlnm flow --lam 0.1 --t-max -5`` said ``t_max must be in (0, inf)``, ``dlnm run ... --batch-size 0``
said ``batch_size must be ...``, ``dlnm sweep --betas 2`` said ``betas[0] must be ...``. The library's errors now
declare the parameters they are about (``validate.ParameterValueError.parameters``) and the command line's one
error handler writes each as the option of that command that gives it (``cli.common.option_message``).

Every case is refused before any work: the tests forbid Numba compilation (and loading compiled kernels from the
cache), so none of them compiles or runs a kernel.
"""

import numba.core.dispatcher
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.cli.common import EXIT_ERROR, option_message
from dlnmomentum.validate import ParameterTypeError, ParameterValueError, as_float

SMALL = ["--n", "8", "--d", "13", "--s", "3", "--n-test", "50", "--no-progress"]
RUN = ["run", "--gamma", "0.1", "--beta", "0.5", "--steps", "10", *SMALL]
FLOW = ["flow", "--lam", "0.1", "--t-max", "10", *SMALL]
SWEEP = ["sweep", "--gammas", "0.1", "--betas", "0", "--steps", "10", *SMALL]
FLOW_SWEEP = ["sweep", "--lams", "0.1", "--t-max", "5", *SMALL]
TS = ["network", "teacher-student", "--gamma", "0.1", "--beta", "0.5", "--steps", "10", "--n-test", "10",
      "--no-progress"]
DL = ["network", "deep-linear", "--gamma", "0.1", "--beta", "0.5", "--steps", "10", "--n-test", "10", "--no-progress"]
TS_SWEEP = ["network", "teacher-student", "--steps", "10", "--n-test", "10", "--no-progress"]

#: (argv, the start of the message after "dlnm: error: "): every option of every command that reaches a check of
#: the library. (A problem option is given last: argparse keeps the last of a repeated option.)
CASES = [
    # run
    (["run", "--gamma", "-1", "--beta", "0.5", "--steps", "10"], "--gamma must be in (0, inf)"),
    (["run", "--gamma", "0.1", "--beta", "1", "--steps", "10"], "--beta must be in [0, 1)"),
    (["run", "--gamma", "0.1", "--beta", "0.5", "--steps", "-1"], "--steps must be an integer in [0, "),
    (RUN + ["--alpha", "-1"], "--alpha must be in ["),
    (RUN + ["--batch-size", "0"], "--batch-size must be an integer in [1, 8], got 0"),
    (RUN + ["--batch", "0"], "--batch-size must be an integer in [1, 8], got 0"),  # (argparse's abbreviation)
    (RUN + ["--replace"], "--replace draws SMGD batches with replacement: it needs a --batch-size"),
    (RUN + ["--tol", "-1"], "--tol must be in [0, inf)"),
    (RUN + ["--record-log", "0"], "--record-log must be an integer in [1, "),
    (RUN + ["--record-every", "0"], "--record-every must be in (0, inf)"),
    (RUN + ["--store", "/nonexistent-dlnm-dir/r.h5"], "--store /nonexistent-dlnm-dir/r.h5: directory"),
    (RUN + ["--checkpoint-every", "-1"], "--checkpoint-every must be in [0, inf)"),
    (RUN + ["--n", "0"], "--n must be an integer in [1, "),
    (RUN + ["--d", "0"], "--d must be an integer in [1, "),
    (RUN + ["--s", "100"], "--s must be an integer in [0, 13]"),
    (RUN + ["--mu", "nan"], "--mu must be finite"),
    (RUN + ["--sigma", "-1"], "--sigma must be in (0, inf)"),
    (RUN + ["--n-test", "-1"], "--n-test must be an integer in [0, "),
    # flow
    (["flow", "--lam", "0.1", "--t-max", "-5"], "--t-max must be in (0, inf), got -5.0"),
    (["flow", "--lam", "-1", "--t-max", "10"], "--lam must be in [0, "),
    (["flow", "--lam", "5e-324", "--t-max", "10"], "--lam must be 0 (gradient flow) or in [2.2250738585072014e-308"),
    (FLOW + ["--h", "-1"], "--h must be in (0, inf)"),
    (FLOW + ["--scheme", "rk4", "--h", "100"], "--h must be in (0, "),
    (FLOW + ["--alpha", "0"], "--alpha must be in ["),
    (FLOW + ["--tol", "-1"], "--tol must be in [0, inf)"),
    (FLOW + ["--scheme", "rodas", "--rtol", "1"], "--rtol must be in [1e-15, 0.01]"),
    (FLOW + ["--scheme", "rodas", "--atol", "2"], "--atol must be in [1e-300, 1]"),
    (FLOW + ["--scheme", "rodas", "--max-steps", "0"], "--max-steps must be an integer in [1, "),
    (FLOW + ["--scheme", "rk4", "--rtol", "1e-5"], "--rtol is for the adaptive schemes"),
    (FLOW + ["--scheme", "rodas", "--h", "0.1"], "--h is for the fixed-grid schemes"),
    (FLOW + ["--scheme", "rk4", "--record-accepted"], "--record-accepted records the steps of an adaptive "
     "scheme ('rodas'), which --scheme rk4 rules out"),
    (FLOW + ["--h", "0.1", "--record-accepted"], "--record-accepted records the steps of an adaptive "
     "scheme ('rodas'), which --h rules out; a flow on a grid records every step with --record-every equal to --h"),
    # (API names in these three: refine_start, rtol/atol, Record(every=...), block_size)
    (FLOW + ["--scheme", "rodas", "--no-refine-start"], "--no-refine-start is for the fixed-grid schemes ('rk4', "
     "'exp-rk4'); --scheme rodas chooses its own steps (set --rtol and --atol) and records at times (--record-every "
     "or --record-log)"),
    (FLOW + ["--scheme", "rk4", "--rtol", "1e-9"], "--rtol is for the adaptive schemes ('rodas'); got --scheme rk4"),
    (FLOW + ["--h", "0.01", "--rtol", "1e-9"], "--rtol is for the adaptive schemes ('rodas'), which --h rules out"),
    (FLOW + ["--no-refine-start", "--max-steps", "10"], "--max-steps is for the adaptive schemes ('rodas'), which "
     "--no-refine-start rules out"),
    (["sweep", "--gammas", "0.01", "--betas", "0.5", "--steps", "10", "--block-size", "9"],
     "--block-size must be a multiple of 8"),
    (FLOW + ["--record-every", "-1"], "--record-every must be in (0, inf)"),
    (FLOW + ["--scheme", "rodas", "--record-every", "1e-9"], "--record-every must be at least --t-max/1e+08"),
    (FLOW + ["--record-log", "0"], "--record-log must be an integer in [1, "),
    (FLOW + ["--store", "/nonexistent-dlnm-dir/r.h5"], "--store /nonexistent-dlnm-dir/r.h5: directory"),
    (FLOW + ["--checkpoint-every", "nan"], "--checkpoint-every must be finite"),
    (FLOW + ["--n", "0"], "--n must be an integer in [1, "),
    (["flow", "--gf", "--t-max", "-1"], "--t-max must be in (0, inf)"),
    # negative numbers in every form float() reads (argparse took "-1e3" and "-inf" for options: "expected one
    # argument", without the range)
    (["flow", "--gf", "--t-max", "-1e3"], "--t-max must be in (0, inf), got -1000.0"),
    (["flow", "--gf", "--t-max", "-INF"], "--t-max must be finite and in (0, inf), got -inf"),
    (FLOW + ["--scheme", "rodas", "--rtol", "-1E-9"], "--rtol must be in [1e-15, 0.01], got -1e-09"),
    (["flow", "--lam", "-1e-3", "--t-max", "10"], "--lam must be in [0, 1e+100], got -0.001"),
    (["sweep", "--lams", "-1e-3,2", "--t-max", "5"], "--lams (entry 1) must be in [0, 1e+100]"),
    # sweep
    (["sweep", "--gammas", "0.1", "--betas", "2", "--steps", "10"], "--betas (entry 1) must be in [0, 1), got 2.0"),
    (["sweep", "--gammas", "0.1,-1", "--betas", "0", "--steps", "10"], "--gammas (entry 2) must be in (0, inf)"),
    (["sweep", "--lams", "-1", "--t-max", "5"], "--lams (entry 1) must be in [0, 1e+100]"),
    (["sweep", "--lams", "0,5e-324", "--t-max", "5"], "--lams (entry 2) must be 0 (gradient flow) or in"),
    (["sweep", "--pairs", "0.1/2", "--steps", "10"], "--pairs (entry 1, beta) must be in [0, 1)"),
    (["sweep", "--gammas", "0.1", "--betas", "0", "--pairs", "0.1/0", "--steps", "10"],
     "--pairs is a design of its own: give no --gammas, --betas or --lams with it"),
    (["sweep", "--gammas", "0.1", "--betas", "0", "--steps", "-1"], "--steps must be an integer in [0, "),
    (["sweep", "--gammas", "0.1", "--betas", "0"], "a discrete sweep needs --steps"),
    (SWEEP + ["--t-max", "5"], "--t-max is for flow sweeps (--lams); a discrete sweep takes --steps"),
    (FLOW_SWEEP + ["--steps", "10"], "--steps is for discrete sweeps; a flow sweep (--lams) takes --t-max"),
    (FLOW_SWEEP + ["--batch-size", "3"], "--batch-size is for discrete (SMGD) sweeps"),
    (["sweep", "--lams", "0.1", "--t-max", "-5"], "--t-max must be in (0, inf)"),
    (SWEEP + ["--reps", "0"], "--reps must be an integer in [1, "),
    (SWEEP + ["--batch-size", "0"], "--batch-size must be an integer in [1, 8]"),
    (SWEEP + ["--replace"], "--replace draws SMGD batches with replacement: it needs a --batch-size"),
    (SWEEP + ["--alpha", "0"], "--alpha must be in [1e-150, 1e+150), got 0.0"),
    (SWEEP + ["--tol", "-1"], "--tol must be in [0, inf)"),
    (SWEEP + ["--theory", "--theory-tol", "-1"], "--theory-tol must be in [0, inf)"),
    (SWEEP + ["--block-size", "3"], "--block-size must be an integer in [8, "),
    (SWEEP + ["--wave-size", "0"], "--wave-size must be an integer in [1, inf)"),
    (SWEEP + ["--threads", "0"], "--threads must be an integer in [1, "),
    (SWEEP + ["--data-seed", "9223372036854775807", "--reps", "2"],
     "--data-seed must be an integer in [0, 2**63 - 1 - (reps - 1)]"),
    (SWEEP + ["--resume"], "--resume needs a --store"),
    (SWEEP + ["--store", "/nonexistent-dlnm-dir/s.h5"], "--store /nonexistent-dlnm-dir/s.h5: directory"),
    (SWEEP + ["--n", "0"], "--n must be an integer in [1, "),
    # network: one run, a sweep, each architecture's problem options
    (["network", "teacher-student", "--gamma", "-1", "--beta", "0.5"], "--gamma must be in (0, inf)"),
    (["network", "teacher-student", "--gamma", "0.1", "--beta", "1"], "--beta must be in [0, 1)"),
    (TS + ["--steps", "-1"], "--steps must be an integer in [0, "),
    (TS + ["--tol", "-1"], "--tol must be in [0, inf)"),
    (TS + ["--batch-size", "0"], "--batch-size must be an integer in [1, 15]"),
    (TS + ["--replace"], "--replace draws SMGD batches with replacement: it needs a --batch-size"),
    (TS + ["--record-log", "0"], "--record-log must be an integer in [1, "),
    (TS + ["--record-every", "0"], "--record-every must be in (0, inf)"),
    (TS + ["--store", "/nonexistent-dlnm-dir/n.h5"], "--store /nonexistent-dlnm-dir/n.h5: directory"),
    (TS + ["--n", "0"], "--n must be an integer in [1, "),
    (TS + ["--d", "0"], "--d must be an integer in [1, "),
    (TS + ["--teacher-width", "0"], "--teacher-width must be an integer in [1, "),
    (TS + ["--student-width", "0"], "--student-width must be an integer in [1, "),
    (TS + ["--init-scale", "-1"], "--init-scale must be in (0, inf)"),
    (TS + ["--n-test", "-1"], "--n-test must be an integer in [0, "),
    (DL + ["--init-std", "-1"], "--init-std must be in [0, inf)"),
    (DL + ["--s", "100"], "--s must be an integer in [0, 30]"),
    (DL + ["--mu", "nan"], "--mu must be finite"),
    (DL + ["--sigma", "-1"], "--sigma must be in (0, inf)"),
    (DL + ["--widths", "5,1", "--d", "4"], "--widths (entry 1) (the input width) must equal --d = 4, got 5"),
    (DL + ["--widths", "5,2", "--d", "5"], "--widths (last entry) (the output width) must be 1, got 2"),
    (DL + ["--widths", "5"], "--widths must have at least 2 entries (input and output), got (5,)"),
    (TS_SWEEP + ["--gammas", "0.1", "--betas", "2"], "--betas (entry 1) must be in [0, 1)"),
    (TS_SWEEP + ["--gammas", "-1", "--betas", "0"], "--gammas (entry 1) must be in (0, inf)"),
    (TS_SWEEP + ["--gammas", "0.1", "--betas", "0", "--reps", "0"], "--reps must be an integer in [1, "),
    (TS_SWEEP + ["--gammas", "0.1", "--betas", "0", "--data-seed", "9223372036854775807", "--reps", "2"],
     "--data-seed must be an integer in [0, 2**63 - 1 - (reps - 1)]"),
    (TS_SWEEP + ["--gammas", "0.1", "--betas", "0", "--resume"], "--resume needs a --store"),
    # theory
    (["theory", "lam", "--gamma", "-1", "--beta", "0.5"], "--gamma must be finite and in (0, inf)"),
    (["theory", "lam", "--gamma", "0.1", "--beta", "1"], "--beta must be finite and in [0, 1)"),
    (["theory", "accelerate", "--gamma", "0.1", "--beta", "0.5", "--rho", "-1"], "--rho must be finite and in (0, "),
    (["theory", "from-lam-eps", "--lam", "-1", "--eps", "0.1"], "--lam must be finite and in (0, inf)"),
    (["theory", "from-lam-eps", "--lam", "1", "--eps", "2"], "eps must be in (0, lam] so that beta = 1 - eps/lam is "
     "in [0, 1), got --eps 2.0 > --lam 1.0"),
    (["theory", "accelerate", "--gamma", "0.1", "--beta", "0.5", "--rho", "100"], "rho must satisfy rho * (1 - beta) "
     "<= 1 so that beta_hat = 1 - rho*(1 - beta) is in [0, 1), got --rho 100.0, --beta 0.5"),
    (["theory", "bound", "--alpha", "-1"], "--alpha must be in ["),
    (["theory", "bound", "--n", "0"], "--n must be an integer in [1, "),
    # figure, reproduce
    (["figure", "quadratic", "--tiny", "--problem", "other"], "--problem: figure quadratic has one problem"),
    (["figure", "teacher-student", "--tiny", "--problem", "other"], "--problem must be one of "),
]


@pytest.fixture
def no_kernels(monkeypatch):
    """Numba may not compile (nor load from its cache) any function: the errors come before any work."""
    def refuse(self, *args, **kwargs):
        raise AssertionError(f"a kernel was compiled: {self.py_func.__qualname__}")

    monkeypatch.setattr(numba.core.dispatcher.Dispatcher, "_compile_for_args", refuse)


@pytest.mark.parametrize("argv, expected", CASES, ids=[" ".join(a[:1] + a[-2:]) for a, _ in CASES])
def test_an_error_names_the_option(argv, expected, no_kernels, capsys):
    assert main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"dlnm: error: {expected}"), err


@pytest.mark.parametrize("command", ["figure", "reproduce"])
def test_a_file_for_out_names_the_option(command, tmp_path, no_kernels, capsys):
    path = tmp_path / "file"
    path.write_text("")
    argv = [command, "quadratic", "--tiny"] if command == "figure" else [command, "--tiny", "--only", "quadratic"]
    assert main([*argv, "--out", str(path)]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith(f"dlnm: error: --out must be a folder: {path} is a file")


def test_the_api_keeps_its_names_and_its_exception_types(small_problem):
    """Library users see the messages as before, as ValueError/TypeError (the new classes are subclasses)."""
    with pytest.raises(ValueError, match=r"^t_max must be in \(0, inf\), got -5") as info:
        dm.mgf(small_problem, 0.1, t_max=-5)
    assert isinstance(info.value, ParameterValueError) and info.value.parameters == ("t_max",)
    with pytest.raises(ValueError, match=r"^betas\[0\] must be in \[0, 1\)") as info:
        dm.sweep(small_problem, gammas=[0.1], betas=[2.0], steps=10)
    assert info.value.parameters == ("betas[0]",)
    with pytest.raises(TypeError, match="^gamma must be a real number") as info:
        dm.mgd(small_problem, "0.1", 0.5, steps=10)
    assert isinstance(info.value, ParameterTypeError) and info.value.parameters == ("gamma",)


def test_only_names_that_are_options_of_the_command_are_rewritten():
    options = {"t_max": "--t-max", "lam": "--lam", "lams": "--lams", "store": "--store", "scheme": "--scheme",
               "betas": "--betas"}
    # u0 is no option: kept; lam_central and --lam are other words
    exc = ParameterValueError("u0 and lam must agree (lam_central, --lam)", "u0", "lam")
    assert option_message(exc, options) == "u0 and --lam must agree (lam_central, --lam)"
    # a name as the value of another (Record(every=h)) is no reference to the parameter
    exc = ParameterValueError("h rules it out: record with Record(every=h)", "h")
    assert option_message(exc, {"h": "--h"}) == "--h rules it out: record with Record(every=h)"
    # a path that holds a name is not changed
    exc = ParameterValueError("store /tmp/store is a directory (e.g. /tmp/store/store.h5)", "store")
    assert option_message(exc, options) == "--store /tmp/store is a directory (e.g. /tmp/store/store.h5)"
    # API values: scheme='rk4' is --scheme rk4; a name declared with '=' is rewritten only in that form
    exc = ParameterValueError("rtol is for the adaptive scheme; got scheme='rk4'", "scheme=")
    assert option_message(exc, options) == "rtol is for the adaptive scheme; got --scheme rk4"
    exc = ParameterValueError("got lam=1e-05 and t_max=inf, lams=...", "lam=", "t_max=", "lams")
    assert option_message(exc, options) == "got --lam 1e-05 and --t-max inf, --lams"
    # an entry of a list option is counted from 1
    assert option_message(ParameterValueError("betas[3] must be in [0, 1)", "betas[3]"), options) == \
        "--betas (entry 4) must be in [0, 1)"
    # an error that declares nothing is left as it is
    assert option_message(ValueError("t_max must be in (0, inf)"), options) == "t_max must be in (0, inf)"
    with pytest.raises(ParameterValueError) as info:
        as_float("t_max", -1.0, low=0.0, low_open=True)
    assert option_message(info.value, {}) == str(info.value)


@pytest.mark.parametrize("alpha", [0.0, 1e-200, 1e200])
def test_a_sweep_states_the_range_of_alpha_a_run_accepts(alpha, small_problem):
    """Before: a sweep said ``alpha must be in (0, inf)`` for alpha = 0, though alpha = 1e-200 was refused too (by the
    run's check, [1e-150, 1e+150)): the range stated was not the one enforced."""
    with pytest.raises(ValueError) as run:
        dm.mgd(small_problem, 0.1, 0.5, steps=10, alpha=alpha)
    with pytest.raises(ValueError) as swept:
        dm.sweep(small_problem, gammas=[0.1], betas=[0.5], steps=10, alpha=alpha)
    assert str(swept.value) == str(run.value) and "[1e-150, 1e+150)" in str(run.value)


def test_theory_tol_without_theory_is_refused(no_kernels, capsys):
    """Before: ``dlnm sweep ... --theory-tol 1e-3`` without ``--theory`` ran the sweep and ignored the option (its
    help says it is read with --theory)."""
    assert main([*SWEEP, "--theory-tol", "1e-3"]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith("dlnm: error: --theory-tol is the train loss under which --theory")


def test_flow_help_gives_the_range_of_lam_it_accepts(capsys):
    """Before: ``dlnm flow --help`` said "--lam lambda > 0" while ``--lam 0`` is accepted (gradient flow) and the
    error of ``--lam -1`` says 0 is allowed."""
    with pytest.raises(SystemExit):
        main(["flow", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--lam LAM lambda of MGF(lambda), >= 0 (0: gradient flow, as --gf)" in text, text
    assert main(["flow", "--lam", "-1", "--t-max", "1"]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith("dlnm: error: --lam must be in [0, ")


def test_device_cuda_without_a_gpu_names_the_option(no_kernels, capsys):
    from dlnmomentum.sweeps.cuda import cuda_available

    if cuda_available()[0]:
        pytest.skip("a usable CUDA GPU: --device cuda runs here")
    assert main([*SWEEP, "--device", "cuda"]) == EXIT_ERROR
    assert capsys.readouterr().err.startswith("dlnm: error: --device cuda was requested but the CUDA engine cannot run")


def test_plot_refuses_a_file_as_out(tmp_path, capsys):
    """Before: ``dlnm plot STORE --out FILE`` said "[Errno 17] File exists (the figure store ... is complete: `dlnm
    plot ...` draws it again once there is room)": a full disk, not the file given as --out."""
    out = tmp_path / "figs"
    assert main(["figure", "quadratic", "--tiny", "--out", str(out)]) == 0
    capsys.readouterr()
    path = tmp_path / "file"
    path.write_text("")
    assert main(["plot", str(out / "quadratic.h5"), "--out", str(path)]) == EXIT_ERROR
    assert capsys.readouterr().err == f"dlnm: error: --out must be a folder: {path} is a file\n"
