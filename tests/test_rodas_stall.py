"""The adaptive scheme's stall rule: a ``tol`` below float64's rounding floor of the train loss ends ``stalled``.

Before the rule, ``dm.gf(problem, t_max=1e300, tol=1e-40)`` ran its whole budget of 1e8 accepted steps (half
an hour): at the floor the loss no longer falls and the error estimate is rounding noise that holds the step
size near 1e6. The references here are plain NumPy: the loss and the rounding scale of its residual.
"""

import signal

import numpy as np
import pytest
from store_checks import sigkill_adaptive_flow

import dlnmomentum as dm
import dlnmomentum.store as S
from dlnmomentum.driver import drive
from dlnmomentum.kernels import flow_dop853 as KX
from dlnmomentum.kernels import flow_rodas as KR
from dlnmomentum.kernels import flow_stop as KS
from dlnmomentum.kernels.mgd import _loss_rounding_scale
from dlnmomentum.runs.flow_adaptive import prepare_flow_run

EPS = np.finfo(np.float64).eps


def _loss(problem, theta):
    r = problem.X @ theta - problem.y
    return float(r @ r) / (2 * problem.n)


def _rounding_scale(problem, theta):
    a = np.abs(problem.X * theta).sum(axis=1) + np.abs(problem.y)
    return float(np.sum((EPS * a) ** 2)) / (2 * problem.n)


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, mu=1.0, sigma=1.0, seed=0)


def test_rounding_scale_is_the_numpy_formula(problem):
    rng = np.random.default_rng(3)
    for scale in (1e-3, 1.0, 1e5):
        theta = rng.normal(size=problem.d) * scale
        assert _loss_rounding_scale(problem.X, problem.y, theta) == pytest.approx(_rounding_scale(problem, theta),
                                                                                rel=1e-13)


@pytest.mark.parametrize("lam", [0.0, 0.05, 1.0])
def test_a_tol_below_the_floor_stalls_there_in_about_a_hundred_steps(problem, lam):
    kwargs = dict(t_max=1e300, tol=1e-40)
    res = dm.gf(problem, **kwargs) if lam == 0 else dm.mgf(problem, lam, **kwargs)
    assert res.config.scheme == ("ndf" if lam == 0 else "rodas")
    assert res.status == dm.Status.STALLED and res.status_name == "stalled"
    assert "rounding floor" in res.message
    loss = _loss(problem, res.theta)
    assert loss == pytest.approx(res.train_loss, rel=1e-6, abs=1e-33)
    assert 1e-40 < loss <= KS.FLOOR_FACTOR * _rounding_scale(problem, res.theta)
    # it reached train loss 1e-20 first, as the run with that tol does, and stopped soon after
    reach = dm.gf(problem, t_max=1e7, tol=1e-20) if lam == 0 else dm.mgf(problem, lam, t_max=1e7, tol=1e-20)
    assert reach.status == dm.Status.CONVERGED
    assert reach.steps_done + KS.FLOOR_STEPS < res.steps_done < reach.steps_done + 10 * KS.FLOOR_STEPS
    assert res.t_done < 1e10
    # the stalled state is the limit as far as float64 tells: where the run to 1e-20 ended, to its accuracy
    assert np.abs(res.theta - reach.theta).max() < 1e-8
    # a stalled run is a finished one: the theorems' premise holds (its loss is far below theory_tol)
    assert res.prediction().prediction_gap < 1e-6


def test_without_tol_or_with_a_reachable_one_the_rule_never_acts(problem):
    assert dm.gf(problem, t_max=1e9).status == dm.Status.MAX_STEPS
    assert dm.gf(problem, t_max=1e300, tol=1e-25).status == dm.Status.CONVERGED


def _chunked(problem, chunk):
    run = prepare_flow_run(problem, 0.5, t_max=1e300, tol=1e-40, scheme="rodas")
    if chunk is not None:
        run.chunk_steps = chunk
    status, blocks = drive(run)
    return run, run.finish(status, blocks)


def test_where_a_run_stalls_does_not_depend_on_its_chunks(problem):
    base_run, base = _chunked(problem, None)
    assert base.status == dm.Status.STALLED
    for chunk in (1, 7, 101):
        run, res = _chunked(problem, chunk)
        assert res.status == dm.Status.STALLED
        for name, arr in base_run.state_arrays().items():
            assert np.array_equal(getattr(run, name), arr, equal_nan=True), (name, chunk)


def test_sigkill_while_counting_then_resume_stalls_bit_for_bit(problem, tmp_path):
    live = dm.gf(problem, t_max=1e300, tol=1e-40, record=dm.Record(log=50))
    assert live.status == dm.Status.STALLED
    path = tmp_path / "stall.h5"
    # 37 steps a chunk: chunk 29 ends at step 1 073, inside the count (the loss reaches 1e-20 at step 997)
    out = sigkill_adaptive_flow(path, 0.0, "dm.Record(log=50)", kill_at_chunk=29, t_max=1e300, tol=1e-40)
    assert out.returncode == -signal.SIGKILL, out.stderr
    resumed = S.resume(path)
    stored = S.open_store(path)
    assert stored.state == "complete"
    for res in (resumed, stored.result):
        assert res.status == dm.Status.STALLED
        assert (res.steps_done, res.t_done) == (live.steps_done, live.t_done)
        assert np.array_equal(res.theta, live.theta)


def test_a_checkpoint_from_before_the_rule_loads_with_its_count_at_zero(problem):
    run = prepare_flow_run(problem, 0.0, t_max=1e300, tol=1e-40, scheme="rodas")
    state = {name: np.array(arr, copy=True) for name, arr in run.state_arrays().items()}
    state["sstate"] = np.arange(1.0, KR.N_SSTATE_BEFORE_STALL + 1.0)
    run.load_state_arrays(state)
    assert np.array_equal(run.sstate[:KR.N_SSTATE_BEFORE_STALL], state["sstate"])
    assert not run.sstate[KR.N_SSTATE_BEFORE_STALL:KR.N_SSTATE].any()
    assert run.sstate[KX.PHASE] == 1.0  # (from before the explicit start: it goes on by Rodas5P)
    state["sstate"] = np.zeros(KR.N_SSTATE + 1)
    with pytest.raises(ValueError, match="sstate"):
        run.load_state_arrays(state)


def test_a_sweep_point_stalls_as_its_single_run_and_the_file_names_the_code(tmp_path):
    path = tmp_path / "line.h5"
    sw = dm.sweep(dict(n=20, d=30, s=5), lams=[0.0, 0.5], t_max=1e300, tol=1e-40, store=path)
    assert np.all(np.asarray(sw.data["status"]) == dm.Status.STALLED)
    problem = dm.sparse_regression(n=20, d=30, s=5)
    for k, single in enumerate((dm.gf(problem, t_max=1e300, tol=1e-40), dm.mgf(problem, 0.5, t_max=1e300, tol=1e-40))):
        assert np.array_equal(np.asarray(sw.data["theta"])[0, k], single.theta)
        assert np.asarray(sw.data["steps_done"])[0, k] == single.steps_done
    import h5py

    with h5py.File(path, "r") as f:
        found = [obj.attrs["flag_meanings"] for obj in _datasets(f) if "flag_meanings" in obj.attrs
                 and "max_steps" in str(obj.attrs["flag_meanings"])]
    assert found and all("stalled" in str(m) for m in found)


def _datasets(group):
    import h5py

    for obj in group.values():
        if isinstance(obj, h5py.Dataset):
            yield obj
        elif isinstance(obj, h5py.Group):
            yield from _datasets(obj)


def test_the_command_line_says_stalled_and_exits_0(tmp_path):
    from dlnmomentum.cli import main

    assert main(["flow", "--gf", "--t-max", "1e300", "--tol", "1e-40", "--no-progress"]) == 0
