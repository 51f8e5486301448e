"""``Record(accepted=True)``: the adaptive scheme records the initial point and the point of every accepted step.

Checked against independent references (SciPy's Radau at the recorded times, the loss recomputed from the
recorded θ), against the run itself (recording changes no bit of the result; the last row is the final state),
and through the run machinery: a store killed by SIGKILL and resumed bit for bit, the CLI, and refusals where a
run has no accepted steps. Chunks and record blocks of any size: ``test_rodas.py``
(``test_chunking_and_record_blocks_do_not_change_bits``, for every kind of record).
"""

import signal

import h5py
import numpy as np
import pytest
from reference import mgf_radau
from store_checks import sigkill_adaptive_flow

import dlnmomentum as dm
import dlnmomentum.store as S
from dlnmomentum.cli import main

ACCEPTED = dm.Record(accepted=True)


@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_rows_are_the_initial_point_and_every_accepted_step(problem, lam):
    flow = dm.gf if lam == 0.0 else (lambda p, **k: dm.mgf(p, lam, **k))
    plain = flow(problem, t_max=1e7, tol=1e-20)
    res = flow(problem, t_max=1e7, tol=1e-20, record=ACCEPTED)
    assert res.config.scheme == ("ndf" if lam == 0.0 else "rodas") and res.status_name == "converged"
    for name in ("theta", "w_plus", "w_minus", "j_plus", "p_integral", "crossing_times", "min_delta"):
        assert np.array_equal(getattr(res, name), getattr(plain, name), equal_nan=True), name  # recording is free
    tr = res.trajectory
    assert np.array_equal(tr.step, np.arange(res.steps_done + 1))
    assert tr.time[0] == 0.0 and tr.time[-1] == res.t_done and np.all(np.diff(tr.time) > 0)
    assert np.array_equal(tr.w_plus[0], res.w_plus0) and np.array_equal(tr.w_minus[0], res.w_minus0)
    assert np.array_equal(tr.w_plus[-1], res.w_plus) and np.array_equal(tr.w_minus[-1], res.w_minus)
    assert np.array_equal(tr.theta[-1], res.theta)
    rows = np.linspace(0, len(tr.step) - 1, 25).astype(int)
    expected = [np.sum((problem.X @ tr.theta[k] - problem.y) ** 2) / (2 * problem.n) for k in rows]
    # (compared as residual norms: at loss 1e-20 the residual is 1e-10 of y, so rounding θ moves the loss by 1e-6)
    assert np.allclose(np.sqrt(tr.train_loss[rows]), np.sqrt(expected), rtol=1e-9, atol=1e-15)
    # the step sizes grow over the slow tail: the rows are where the solver put its steps, not a grid
    h = np.diff(tr.time)
    assert h[-10:].mean() > 1e3 * h[:10].mean()


def test_rows_lie_on_the_trajectory_of_an_independent_solver(problem):
    lam = 0.5
    res = dm.mgf(problem, lam, t_max=50.0, scheme="rodas", record=ACCEPTED)
    tr = res.trajectory
    w0 = np.concatenate([res.w_plus0, res.w_minus0])
    for k in (3, len(tr.step) // 2, len(tr.step) - 1):
        ref = mgf_radau(problem.hessian, problem.b, lam, float(tr.time[k]), w0, np.zeros_like(w0))
        assert np.abs(tr.theta[k] - ref).max() < 1e-9, k


def test_store_sigkill_then_resume_bit_for_bit(problem, tmp_path):
    live = dm.mgf(problem, 0.5, t_max=1e6, tol=1e-20, record=ACCEPTED)
    path = tmp_path / "flow.h5"
    out = sigkill_adaptive_flow(path, 0.5, "dm.Record(accepted=True)", kill_at_chunk=17,
                                problem="n=20, d=30, s=5, mu=1.0, sigma=1.0, n_test=200, seed=0")
    assert out.returncode == -signal.SIGKILL, out.stderr
    assert S.open_store(path).state == "crashed"
    resumed = S.resume(path)
    for res in (resumed, S.open_store(path).result):
        assert res.status_name == "converged" and res.steps_done == live.steps_done
        assert np.array_equal(res.theta, live.theta) and res.t_done == live.t_done
    stored = S.open_store(path)
    assert stored.rows == live.steps_done + 1
    assert np.array_equal(stored["theta"].value, live.trajectory.theta)
    assert np.array_equal(stored["theta"].time, live.trajectory.time)
    assert np.array_equal(stored["theta"].step, live.trajectory.step)
    assert stored.config["record_accepted"] is True


def test_cli_records_every_accepted_step(tmp_path, capsys):
    path = tmp_path / "f.h5"
    assert main(["flow", "--lam", "0.5", "--t-max", "200", "--record-accepted", "--store", str(path), "--json"]) == 0
    capsys.readouterr()
    with h5py.File(path, "r") as f:
        steps = int(f.attrs["steps_done"])
        assert f.attrs["rows"] == steps + 1  # (auto took the adaptive scheme for it)
    assert main(["inspect", str(path)]) == 0
    assert f"recorded    : {steps + 1} rows" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exit_info:  # argparse refuses the pair (mutually exclusive)
        main(["flow", "--lam", "0.5", "--t-max", "200", "--record-accepted", "--record-log", "5"])
    assert exit_info.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("call, match", [
    (lambda p: dm.Record(accepted=False), "accepted must be True"),
    (lambda p: dm.Record(accepted=1), "accepted must be True"),
    (lambda p: dm.Record(accepted=True, log=5), "exactly one of"),
    (lambda p: dm.mgf(p, 0.5, t_max=10.0, scheme="rk4", record=ACCEPTED), r"Record\(every=h\)"),
    (lambda p: dm.mgf(p, 0.5, t_max=10.0, h=0.01, record=ACCEPTED), r"Record\(every=h\)"),
    (lambda p: dm.mgd(p, 0.05, 0.8, steps=100, record=ACCEPTED), r"Record\(every=1\)"),
])
def test_refused_where_there_are_no_accepted_steps(problem, call, match):
    with pytest.raises(ValueError, match=match):
        call(problem)


def test_auto_takes_the_adaptive_scheme_for_it(problem):
    res = dm.mgf(problem, 0.5, t_max=20.0, record=ACCEPTED)  # a short horizon: auto would take RK4 otherwise
    assert res.config.scheme == "rodas" and len(res.trajectory.step) == res.steps_done + 1
    assert dm.mgf(problem, 0.5, t_max=20.0).config.scheme != "rodas"
