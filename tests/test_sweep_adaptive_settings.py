"""A flow sweep's adaptive settings: ``dm.sweep(..., rtol=, atol=, max_steps=)`` and ``dlnm sweep --rtol --atol
--max-steps``.

Before: ``dm.mgf`` and ``dlnm flow`` took them, a sweep did not, and its adaptive points always ran with the default
tolerances. Every point of such a sweep is its single run ``dm.mgf(problem, lam, ..., rtol=, atol=, max_steps=)``
bit for bit (and differs from the default-tolerance point: the settings are applied); the sweep store keeps them,
``dm.resume_sweep`` continues with them, ``dlnm inspect`` shows them; a store written before them resumes with the
defaults, and a resume that asks for other settings than those stored is refused. (On a Dask cluster:
tests/test_distributed.py.)
"""

import json

import h5py
import numba.core.dispatcher
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.cli.common import EXIT_ERROR, EXIT_OK
from dlnmomentum.runs.points import FIELDS
from dlnmomentum.store.files import StoreError, guarded
from dlnmomentum.validate import ParameterValueError

SPEC = {"n": 20, "d": 30, "s": 5}
LAMS = [0.0, 0.05, 0.5]
#: To the limit (the adaptive schemes: "ndf" at lambda = 0, "rodas" above), at tolerances other than the defaults.
LINE = dict(lams=LAMS, t_max=1e7, tol=1e-20, progress=False)
SETTINGS = dict(rtol=1e-7, atol=1e-9)


def _problem(rep):
    return dm.sparse_regression(**SPEC, seed=rep)


def _single(rep, lam, **kw):
    return dm.mgf(_problem(rep), lam, t_max=LINE["t_max"], tol=LINE["tol"], **kw)


def _assert_same(a, b):
    for name in FIELDS:
        np.testing.assert_array_equal(np.asarray(a.data[name]), np.asarray(b.data[name]), err_msg=name)


@pytest.fixture(scope="module")
def default_line():
    return dm.sweep(SPEC, reps=2, **LINE)


@pytest.fixture(scope="module")
def tolerant_line():
    return dm.sweep(SPEC, reps=2, **LINE, **SETTINGS)


def test_sweep_points_are_the_single_runs_at_the_sweeps_tolerances(default_line, tolerant_line):
    sw = tolerant_line
    assert sw.complete and np.all(np.asarray(sw.data["status"]) == dm.Status.CONVERGED)
    assert (sw.config["rtol"], sw.config["atol"], sw.config["max_steps"]) == (1e-7, 1e-9, None)
    theta, steps = np.asarray(sw.data["theta"]), np.asarray(sw.data["steps_done"])
    for rep in (0, 1):
        for k, lam in enumerate(LAMS):
            single = _single(rep, lam, **SETTINGS)
            assert single.config.scheme == ("rodas" if lam else "ndf")
            assert (single.config.rtol, single.config.atol) == (1e-7, 1e-9)
            assert np.array_equal(theta[rep, k], single.theta), (rep, lam)
            assert steps[rep, k] == single.steps_done
            assert np.asarray(sw.data["train_loss"])[rep, k] == single.train_loss
    # the settings are applied: every point differs from the default-tolerance one (fewer steps, other bits)
    default_theta, default_steps = np.asarray(default_line.data["theta"]), np.asarray(default_line.data["steps_done"])
    assert np.all(steps < default_steps)
    for rep in (0, 1):
        for k in range(len(LAMS)):
            assert not np.array_equal(theta[rep, k], default_theta[rep, k]), (rep, LAMS[k])
    assert default_line.config["rtol"] is None and default_line.config["atol"] is None


def test_a_setting_makes_auto_take_the_adaptive_scheme_at_every_lam_as_mgf():
    """A short horizon, where ``"auto"`` takes a grid scheme by default: with ``rtol``, ``mgf`` runs the adaptive
    one, and so does every point of the sweep."""
    lams = [0.0, 0.5]
    grid = dm.sweep(SPEC, lams=lams, t_max=20.0, progress=False)
    sw = dm.sweep(SPEC, lams=lams, t_max=20.0, rtol=1e-8, progress=False)
    for k, lam in enumerate(lams):
        assert dm.mgf(_problem(0), lam, t_max=20.0).config.scheme in ("rk4", "exp-rk4")
        single = dm.mgf(_problem(0), lam, t_max=20.0, rtol=1e-8)
        assert single.config.scheme == ("rodas" if lam else "ndf")
        assert np.array_equal(np.asarray(sw.data["theta"])[0, k], single.theta)
        assert np.asarray(sw.data["steps_done"])[0, k] == single.steps_done
        assert np.asarray(grid.data["steps_done"])[0, k] != single.steps_done


def test_max_steps_is_every_points_budget():
    """Each point stops after ``max_steps`` accepted steps, as its single run does (a point's chunk was its whole
    ``chunk_steps``, up to 8000 steps, whatever was left of the budget)."""
    sw = dm.sweep(SPEC, max_steps=50, **LINE)
    assert sw.config["max_steps"] == 50
    assert np.all(np.asarray(sw.data["steps_done"]) == 50)
    assert np.all(sw.status_names == "max_steps")
    for k, lam in enumerate(LAMS):
        single = _single(0, lam, max_steps=50)
        assert single.status_name == "max_steps" and single.steps_done == 50
        assert np.array_equal(np.asarray(sw.data["theta"])[0, k], single.theta)


# -- refusals: before any work, in the words of mgf ------------------------------------------------------

def _forbid_kernels(patch):
    """Numba may not compile (nor load from its cache) any function: the errors come before any work."""
    def refuse(self, *args, **kwargs):
        raise AssertionError(f"a kernel was compiled: {self.py_func.__qualname__}")

    patch.setattr(numba.core.dispatcher.Dispatcher, "_compile_for_args", refuse)


@pytest.fixture
def no_kernels(monkeypatch):
    _forbid_kernels(monkeypatch)


@pytest.mark.parametrize("scheme", ["rk4", "exp-rk4"])
@pytest.mark.parametrize("settings", [dict(rtol=1e-8), dict(atol=1e-12, max_steps=10)])
def test_a_grid_scheme_refuses_them_as_mgf_does(scheme, settings, tmp_path, monkeypatch):
    path = tmp_path / "line.h5"
    with monkeypatch.context() as m:
        _forbid_kernels(m)  # (mgf's own refusal below may run what it likes)
        with pytest.raises(ParameterValueError) as swept:
            dm.sweep(SPEC, lams=[0.05, 0.5], t_max=10.0, scheme=scheme, store=str(path), **settings)
    with pytest.raises(ParameterValueError) as single:
        dm.mgf(_problem(0), 0.05, t_max=10.0, scheme=scheme, **settings)
    assert str(swept.value) == str(single.value) and swept.value.parameters == single.value.parameters
    assert "for the adaptive schemes ('rodas')" in str(swept.value)
    assert not path.exists()  # (no store made)


@pytest.mark.parametrize("settings, match", [(dict(rtol=0.5), r"rtol must be in \[1e-15, 0.01\]"),
                                             (dict(atol=0.0), r"atol must be in \[1e-300, 1\]"),
                                             (dict(max_steps=0), r"max_steps must be an integer in \[1, ")])
def test_ranges_are_mgfs(settings, match, tmp_path, monkeypatch):
    path = tmp_path / "line.h5"
    with monkeypatch.context() as m:
        _forbid_kernels(m)  # (mgf's own refusal below may run what it likes)
        with pytest.raises(ValueError, match=match) as swept:
            dm.sweep(SPEC, store=str(path), **LINE, **settings)
    with pytest.raises(ValueError) as single:
        _single(0, 0.05, **settings)
    assert str(swept.value) == str(single.value)
    assert not path.exists()


def test_discrete_and_network_sweeps_refuse_them(no_kernels):
    with pytest.raises(ParameterValueError, match=r"^rtol, max_steps are for flow sweeps \(lams=...\) whose points "
                                                  r"run by an adaptive scheme") as info:
        dm.sweep(SPEC, gammas=[0.01], betas=[0.5], steps=10, rtol=1e-8, max_steps=5)
    assert info.value.parameters[:2] == ("rtol", "max_steps")
    with pytest.raises(ParameterValueError, match="^atol is for flow sweeps"):
        dm.sweep(SPEC, lams=[0.05], betas=[0.5], steps=10, atol=1e-12)
    with pytest.raises(ValueError, match="a network sweep takes gammas, betas and steps"):
        dm.sweep(dm.teacher_student(n_test=10), gammas=[0.01], betas=[0.5], steps=10, rtol=1e-8)


# -- stores and resume ---------------------------------------------------------------------------------

def _forget(path, points):
    """Mark ``points`` (index arrays of the grid) not done, as a sweep stopped before them leaves them."""
    with h5py.File(path, "r+") as f:
        done = f["done"][...]
        done[points] = 0
        f["done"][...] = done


def _store_config(path, edit):
    """Rewrite the store's configuration text by ``edit`` (with its CRC-32, as the package writes it)."""
    with h5py.File(path, "r+") as f:
        config = json.loads(f.attrs["config"])
        edit(config)
        f.attrs.update(guarded({"config": json.dumps(config)}, "config"))


def test_the_store_keeps_them_and_resume_continues_with_them(tolerant_line, tmp_path, capsys):
    path = str(tmp_path / "line.h5")
    dm.sweep(SPEC, reps=2, store=path, **LINE, **SETTINGS)
    with h5py.File(path, "r") as f:
        stored = json.loads(f.attrs["config"])
    assert (stored["rtol"], stored["atol"], stored["max_steps"]) == (1e-7, 1e-9, None)
    _forget(path, (np.array([0, 1, 1]), np.array([2, 0, 1])))
    resumed = dm.resume_sweep(path, progress=False)  # (the stored settings: none given here)
    assert resumed.complete
    _assert_same(resumed, tolerant_line)
    # a resume that asks for other settings is refused, naming them and the stored ones
    _forget(path, (np.array([0]), np.array([1])))
    with pytest.raises(StoreError, match=r"differs in rtol, atol\); .*its flows ran with rtol 1e-07, atol 1e-09"):
        dm.sweep(SPEC, reps=2, store=path, resume=True, **LINE)
    with pytest.raises(StoreError, match=r"differs in rtol\); .*rtol 1e-07 .*pass that"):
        dm.sweep(SPEC, reps=2, store=path, resume=True, **LINE, rtol=1e-8, atol=1e-9)
    again = dm.sweep(SPEC, reps=2, store=path, resume=True, **LINE, **SETTINGS)
    _assert_same(again, tolerant_line)
    assert main(["inspect", path]) == EXIT_OK
    out = capsys.readouterr().out
    assert "scheme       : auto; adaptive points: rtol=1e-07, atol=1e-09, max_steps=default" in out


def test_a_store_written_before_them_resumes_with_the_defaults(default_line, tmp_path, capsys):
    path = str(tmp_path / "old.h5")
    dm.sweep(SPEC, reps=2, store=path, **LINE)

    def drop(config):
        for name in ("rtol", "atol", "max_steps"):
            del config[name]

    _store_config(path, drop)  # (a store of 0.5.0, or of an earlier 0.6.0)
    _forget(path, (np.array([1, 1]), np.array([0, 2])))
    assert main(["inspect", path]) == EXIT_OK
    assert "scheme       : auto; adaptive points: rtol=default, atol=default, max_steps=default" in \
        capsys.readouterr().out
    with pytest.raises(StoreError, match=r"differs in rtol\)"):  # (the defaults it ran with, not 1e-7)
        dm.sweep(SPEC, reps=2, store=path, resume=True, **LINE, rtol=1e-7)
    resumed = dm.sweep(SPEC, reps=2, store=path, resume=True, **LINE)  # (the same configuration as before)
    assert resumed.complete
    _assert_same(resumed, default_line)
    _forget(path, (np.array([0]), np.array([1])))
    _assert_same(dm.resume_sweep(path, progress=False), default_line)


# -- the command line ----------------------------------------------------------------------------------

CLI_LINE = ["sweep", "--lams", "0,0.5", "--t-max", "1e7", "--tol", "1e-20", "--n", "20", "--d", "30", "--s", "5",
            "--no-progress"]


def test_the_command_line_takes_them_and_keeps_them(tmp_path, capsys):
    path = str(tmp_path / "line.h5")
    assert main([*CLI_LINE, "--rtol", "1e-7", "--atol", "1e-9", "--max-steps", "400", "--store", path]) == EXIT_OK
    assert "scheme       : auto; adaptive points: rtol=1e-07, atol=1e-09, max_steps=400" in capsys.readouterr().out
    sw = dm.open_sweep(path)
    spec = dict(SPEC, mu=1.0, sigma=1.0, n_test=1000)  # (the command line's data)
    for k, lam in enumerate([0.0, 0.5]):
        single = dm.mgf(dm.sparse_regression(**spec, seed=0), lam, t_max=1e7, tol=1e-20, rtol=1e-7, atol=1e-9,
                        max_steps=400)
        assert np.array_equal(sw.theta[0, k], single.theta) and sw.steps_done[0, k] == single.steps_done
    # --resume with other settings than the store's is refused, naming the option
    assert main(["sweep", "--store", path, "--resume", "--rtol", "1e-8"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"dlnm: error: --store {path} holds a sweep made with other arguments: --rtol differs "
                          "from the stored sweep (in rtol)"), err
    assert main(["sweep", "--store", path, "--resume", "--rtol", "1e-7", "--atol", "1e-9", "--max-steps",
                 "400"]) == EXIT_OK
    capsys.readouterr()


@pytest.mark.parametrize("argv, expected", [
    ([*CLI_LINE, "--scheme", "rk4", "--rtol", "1e-8"],
     "--rtol is for the adaptive schemes ('rodas' or 'ndf'); got --scheme rk4"),
    ([*CLI_LINE, "--rtol", "1"], "--rtol must be in [1e-15, 0.01]"),
    ([*CLI_LINE, "--max-steps", "0"], "--max-steps must be an integer in [1, "),
    (["sweep", "--gammas", "0.1", "--betas", "0", "--steps", "10", "--atol", "1e-9"], "--atol is for flow sweeps"),
])
def test_the_command_line_refuses_them_by_option(argv, expected, no_kernels, capsys):
    assert main(argv) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"dlnm: error: {expected}"), err


def test_sweep_and_flow_describe_them_alike(capsys):
    texts = {}
    for command in ("sweep", "flow"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = " ".join(capsys.readouterr().out.split()).split("options:", 1)[1]  # (after the usage line)
        texts[command] = [text[text.index(option):].split(" --", 1)[0] for option in ("--rtol", "--atol",
                                                                                      "--max-steps")]
    assert texts["sweep"] == texts["flow"]
    assert "relative tolerance in [1e-15, 1e-2]" in texts["sweep"][0]
