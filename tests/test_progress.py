"""Progress of long work (issue 23 C22): the one rule of :mod:`dlnmomentum.progress`, a bar in Jupyter, log
lines when asked for, and ``progress`` validated before any work.

Before: the Python API's runs and sweeps were silent outside a terminal (a 20 × 20 × 5 grid ran 6 minutes
with no output, in Jupyter too), and three copies of the rule decided it, in flops or run-steps.
"""

import sys
import types

import pytest

import dlnmomentum as dm
from dlnmomentum import progress as P

SMALL = {"n": 8, "d": 13, "s": 3, "n_test": 50}


@pytest.fixture
def notebook(monkeypatch):
    """An IPython kernel as Jupyter runs one (its shell class is ``ZMQInteractiveShell``)."""
    shell = type("ZMQInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))


@pytest.fixture
def no_terminal(monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)


def test_the_rule(no_terminal, monkeypatch):
    assert not P.in_notebook() or "IPython" in sys.modules
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert P.resolve(None, 1e6) is None  # nobody watching: silent
    assert P.resolve(True, 0.0) == "bar" and P.resolve(False, 1e6) is None and P.resolve("log", 0.0) == "log"
    for bad in ("yes", "bar", 1, 0, "LOG"):
        with pytest.raises(ValueError, match="progress must be"):
            P.resolve(bad, 1.0)


def test_a_bar_in_jupyter_for_long_work_only(no_terminal, notebook):
    assert P.in_notebook() and P.watched()
    assert P.resolve(None, P.AUTO_SECONDS * 2) == "bar"
    assert P.resolve(None, P.AUTO_SECONDS / 2) is None


def test_a_terminal_ipython_is_no_notebook(no_terminal, monkeypatch):
    shell = type("TerminalInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert not P.in_notebook()


def test_log_lines(capsys):
    log = P.LogLines(total=1000, desc="mgd", unit="step", every=0.0)
    log.update(100)
    log.update(400)
    log.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[0].startswith("[dlnm] mgd: 100/1000 steps (10 %)") and "elapsed" in lines[0]
    assert lines[1].startswith("[dlnm] mgd: 500/1000 steps (50 %)") and "left" in lines[1]
    assert lines[-1].startswith("[dlnm] mgd: 500/1000 steps") and lines[-1].endswith("ended")


@pytest.mark.parametrize("call", ["mgd", "mgf", "sweep", "networks_sweep"])
def test_log_lines_of_runs_and_sweeps(capsys, monkeypatch, call):
    monkeypatch.setattr(P, "LOG_SECONDS", 0.0)
    p = dm.sparse_regression(**SMALL, seed=0)
    if call == "mgd":
        dm.mgd(p, 0.01, 0.5, steps=50_000, progress="log")
    elif call == "mgf":
        dm.mgf(p, lam=0.1, t_max=200.0, progress="log")
    elif call == "sweep":
        dm.sweep(SMALL, gammas=[0.01, 0.02], betas=[0.0, 0.5], steps=2000, progress="log")
    else:
        dm.networks_sweep(dm.teacher_student(n_test=50), gammas=[0.05, 0.1], betas=[0.0], steps=500,
                          progress="log")
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines and all(line.startswith("[dlnm] ") for line in lines), lines
    assert lines[-1].endswith("ended") and "100 %" in lines[-1], lines


def test_a_bar_in_jupyter_from_the_api(capsys, monkeypatch, no_terminal, notebook):
    monkeypatch.setattr(P, "AUTO_SECONDS", 0.0)  # this small run counts as long
    dm.mgd(dm.sparse_regression(**SMALL, seed=0), 0.01, 0.5, steps=20_000)
    assert "20.0k/20.0k" in capsys.readouterr().err  # tqdm.auto's bar (text outside a real kernel)
    monkeypatch.setattr(P, "AUTO_SECONDS", 1e9)
    dm.mgd(dm.sparse_regression(**SMALL, seed=0), 0.01, 0.5, steps=20_000)
    assert capsys.readouterr().err == ""


def test_a_bad_progress_is_refused_before_any_work(tmp_path):
    p = dm.sparse_regression(**SMALL, seed=0)
    with pytest.raises(ValueError, match="progress must be"):
        dm.mgd(p, 0.01, 0.5, steps=100, progress="yes", store=str(tmp_path / "r.h5"))
    with pytest.raises(ValueError, match="progress must be"):
        dm.sweep(SMALL, gammas=[0.01], betas=[0.0], steps=100, progress="yes", store=str(tmp_path / "s.h5"))
    with pytest.raises(ValueError, match="progress must be"):
        dm.networks_sweep(dm.teacher_student(n_test=50), gammas=[0.05], betas=[0.0], steps=10, progress=1,
                          store=str(tmp_path / "n.h5"))
    assert list(tmp_path.iterdir()) == []
