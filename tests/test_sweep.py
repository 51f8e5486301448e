"""Sweeps: lockstep kernel bitwise against single runs, thread/block independence, store, resume, λ."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numba
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum import Sweep, open_sweep, parse_grid, resume_sweep, sweep
from dlnmomentum.runs.points import FIELDS
from dlnmomentum.sweeps import execute, flows, lockstep
from dlnmomentum.sweeps import plan as sweep_plan

SPEC = {"n": 20, "d": 30, "s": 5, "n_test": 100}
SCALARS = ("test_loss", "train_loss", "delta_inf_norm", "l1_norm", "crossed", "status", "steps_done")
VECTORS = ("theta", "s_plus", "s_minus")


def _same(a, b):
    return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


def _assert_point_equals_run(sw, index, res):
    """Every field of sweep point ``index`` equals the single run ``res`` bit for bit."""
    got = {name: sw[name][index] for name in SCALARS + VECTORS}
    with np.errstate(over="ignore"):  # diverged runs end huge: their finite ‖Δ∞‖ is taken scaled by max Δ∞
        delta_norm = np.linalg.norm(res.delta_inf)
        if not np.isfinite(delta_norm) and np.all(np.isfinite(res.delta_inf)):
            scale = np.abs(res.delta_inf).max()
            delta_norm = scale * np.linalg.norm(res.delta_inf / scale)
            assert np.isfinite(delta_norm)
    want = {"test_loss": res.test_loss, "train_loss": res.train_loss, "delta_inf_norm": delta_norm,
            "l1_norm": res.l1_norm, "crossed": int(res.crossed),
            "status": res.status, "steps_done": res.steps_done, "theta": res.theta, "s_plus": res.s_plus,
            "s_minus": res.s_minus}
    bad = [name for name in want if not _same(got[name], want[name])]
    assert not bad, f"point {index}: fields {bad} differ from the single run ({res.status_name})"


def _assert_sweeps_equal(a, b):
    assert a.dims == b.dims and _same(a.done, b.done)
    for name in FIELDS:
        assert _same(a[name], b[name]), name


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(**SPEC, seed=3)


# -- each point is the single run, bit for bit ----------------------------------------------------

GAMMAS = [0.004, 0.02, 0.3]
BETAS = [0.0, 0.6, 0.9]   # (0.9, 0.3) diverges, (0.6, 0.02) and (0.9, 0.02) cross zero


@pytest.mark.parametrize("kw", [
    {},                                                   # full batch, Hessian form (d <= 2n)
    {"gradient": "data", "tol": 1e-4},                    # data form, some points converge
    {"batch_size": 5},                                    # SMGD without replacement
    {"batch_size": 3, "replace": True, "tol": 1e-3},      # SMGD with replacement, converging
], ids=["hessian", "data-tol", "smgd", "smgd-replace-tol"])
def test_every_point_equals_single_run(problem, kw):
    steps = 3000
    sw = sweep(problem, gammas=GAMMAS, betas=BETAS, steps=steps, seed=11, **kw)
    assert sw.complete and sw.shape == (1, 3, 3)
    statuses = set()
    for ib, beta in enumerate(BETAS):
        for ig, gamma in enumerate(GAMMAS):
            res = dm.mgd(problem, gamma, beta, steps=steps, seed=11, **kw)
            _assert_point_equals_run(sw, (0, ib, ig), res)
            statuses.add(res.status_name)
    assert "diverged" in statuses
    if "tol" in kw:
        assert "converged" in statuses
    assert sw.crossed.sum() >= 2


@pytest.mark.parametrize("n, d", [(8, 13), (40, 10)])
def test_padding_and_shapes(n, d):
    """d and n not multiples of the kernel tile, underparametrised data, steps 0 and 1."""
    with pytest.warns(UserWarning) if d <= n else contextlib.nullcontext():
        p = dm.sparse_regression(n=n, d=d, s=2, seed=1, n_test=20)
    forms = ({"gradient": "data"}, {"gradient": "hessian", "tol": 1e-5}, {"batch_size": 2, "replace": True})
    for kw in forms:
        for steps in (0, 1, 777):
            sw = sweep(p, gammas=[0.01, 0.9], betas=[0.0, 0.8], steps=steps, seed=5, **kw)
            for ib, beta in enumerate([0.0, 0.8]):
                for ig, gamma in enumerate([0.01, 0.9]):
                    res = dm.mgd(p, gamma, beta, steps=steps, seed=5, **kw)
                    _assert_point_equals_run(sw, (0, ib, ig), res)


def test_reps_use_seed_plus_r_for_data_and_batches():
    sw = sweep(SPEC, gammas=[0.01, 0.05], betas=[0.5], steps=1500, reps=3, seed=4, batch_size=7)
    for r in range(3):
        p = dm.sparse_regression(**SPEC, seed=4 + r)
        for ig, gamma in enumerate([0.01, 0.05]):
            _assert_point_equals_run(sw, (r, 0, ig), dm.mgd(p, gamma, 0.5, steps=1500, batch_size=7,
                                                            seed=4 + r))
    assert not _same(sw.theta[0], sw.theta[1])


def test_kernel_state_equals_single_run_state(problem):
    """Beyond the reported fields: the whole kernel state (prev iterates, Neumaier parts, crossings)."""
    from dlnmomentum.driver import drive
    from dlnmomentum.runs.mgd import prepare_mgd

    plan = sweep_plan.Plan(sweep_plan.make_config(
        problem, [0.02, 0.3], [0.0,
                               0.9], None, 2001, None, 1, None, 0, None, 0.01, False, "auto", False, 1e-8)[0],
        problem)
    engine = lockstep.LockstepEngine(plan, 8)
    points = list(range(plan.npoints))
    out_f, out_i, out_status, out_steps = engine.run_wave(points, {"signum": None}, None)
    for p in points:
        _, ib, ig = np.unravel_index(p, plan.shape)
        run = prepare_mgd(problem, plan.gammas[ig], plan.betas[ib], steps=2001)
        status, _ = drive(run)
        assert status == out_status[p] and run.done == out_steps[p]
        assert np.array_equal(run.fstate, out_f[p]) and np.array_equal(run.istate, out_i[p])


# -- threads, blocks, divergence ----------------------------------------------------------------

def test_thread_count_and_block_size_do_not_change_bits(problem):
    grid = {"gammas": np.geomspace(2e-3, 0.4, 7), "betas": [0.0, 0.5, 0.8, 0.95], "steps": 2500}
    threads = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        base = sweep(problem, block_size=8, **grid)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        for block_size in (8, 16, 24, 64):
            _assert_sweeps_equal(base, sweep(problem, block_size=block_size, **grid))
        _assert_sweeps_equal(base, sweep(problem, block_size=8, wave_size=5, **grid))
    finally:
        numba.set_num_threads(threads)
    assert (base.status == dm.DIVERGED).any() and (base.status == dm.MAX_STEPS).any()


def test_diverging_point_does_not_affect_its_group(problem):
    steps = 2000
    calm = sweep(problem, gammas=[0.01, 0.02, 0.03], betas=[0.5], steps=steps, block_size=8)
    mixed = sweep(problem, gammas=[0.01, 0.02, 0.03, 5.0], betas=[0.5], steps=steps, block_size=8)
    assert mixed.status[0, 0, 3] == dm.DIVERGED and mixed.steps_done[0, 0, 3] < 20
    for name in FIELDS:
        assert _same(calm[name], mixed[name][:, :, :3]), name
    _assert_point_equals_run(mixed, (0, 0, 3), dm.mgd(problem, 5.0, 0.5, steps=steps))


# -- continuous time ----------------------------------------------------------------------------

def test_flow_sweep_points_equal_mgf(problem):
    from dlnmomentum import mgf

    lams = [0.0, 0.05, 0.4]
    sw = sweep(problem, lams=lams, t_max=15.0)
    assert sw.dims == ("rep", "lam") and sw.complete
    for il, lam in enumerate(lams):
        res = mgf(problem, lam, t_max=15.0)
        got = {name: sw[name][0, il] for name in SCALARS + VECTORS}
        assert _same(got["theta"], res.theta) and _same(got["s_plus"], res.i_plus)
        assert _same(got["s_minus"], res.i_minus) and got["train_loss"] == res.train_loss
        assert got["status"] == res.status and got["steps_done"] == res.steps_done
        assert got["delta_inf_norm"] == np.linalg.norm(res.delta_inf)
    assert _same(sw.lam[0], lams)


def _flow_runs(problems, specs, **kw):
    from dlnmomentum.runs.flow import prepare_flow

    runs = []
    for p in problems:
        for lam, extra in specs:
            run = prepare_flow(p, lam, **{**kw, **extra.get("args", {})})
            if "diverge" in extra:  # far outside the stability region, in the refined start or after it
                fine = extra["diverge"] == "fine"
                run.config = run.config._replace(h=5.0, n_steps=20, start_steps=3 if fine else 0,
                                                 start_substeps=4 if fine else 1)
                run.total = 20
            runs.append(run)
    return runs


@pytest.mark.parametrize("gradient", ["hessian", "data"])
def test_flow_lockstep_lanes_equal_single_runs_state_for_state(gradient):
    """Every array of every lane (state, crossing counts and log, counters) is the single run's, bit for bit."""
    from dlnmomentum.kernels import flow as KF

    problems = [dm.sparse_regression(**SPEC, seed=s) for s in (5, 6)]
    specs = [(0.0, {}), (0.05, {}), (0.4, {}), (2.0, {}), (0.1, {"args": {"tol": 0.03}}),
             (0.3, {"args": {"refine_start": None}}), (1.0, {"args": {"h": 0.3}}),
             (0.3, {"args": {"u0": np.full(30, 1.0)}, "diverge": "coarse"}),
             (0.3, {"args": {"u0": np.full(30, 1.0)}, "diverge": "fine"}), (0.2, {})]
    kw = {"t_max": 25.0, "gradient": gradient}
    lockstep = _flow_runs(problems, specs, **kw)
    reps = [r for r in range(len(problems)) for _ in specs]

    class _Engine:
        seconds_per_step = None

    flag = {"signum": None}
    statuses = flows._flow_batch(lockstep, reps, flag, None, _Engine())
    codes = {KF.RUNNING: dm.MAX_STEPS, KF.CONVERGED: dm.CONVERGED, KF.DIVERGED: dm.DIVERGED}
    seen = set()
    for run, got, status in zip(_flow_runs(problems, specs, **kw), lockstep, statuses, strict=True):
        block = run.new_block(0)
        code = KF.RUNNING
        while code == KF.RUNNING and run.done < run.total:  # the single run, in uneven chunks
            code = run.advance(min(37, run.total - run.done), block, 0)
        assert codes[code] == status
        seen.add(status)
        for name, want in run.state_arrays().items():
            if name != "cursor":
                assert _same(getattr(got, name), want), name
    assert seen == {dm.MAX_STEPS, dm.CONVERGED, dm.DIVERGED}
    assert any(run.counters[KF.N_CROSSINGS] > 0 for run in lockstep)


# -- the paper's λ collapse ---------------------------------------------------------------------

def test_lambda_collapse_ratio():
    """Figure 2: at convergence, points with equal λ = γ/(1-β)² agree much better than points with equal γ.

    The spread of a pair is |ln x_a - ln x_b| (x = ‖Δ∞‖ or the test loss, averaged over 2 data sets);
    the test reports mean spread over equal-λ pairs / mean spread over equal-γ pairs.
    """
    betas = np.array([0.0, 0.5, 0.75])
    lam_targets = np.array([0.02, 0.1])
    gammas = np.unique(np.round(np.outer(lam_targets, (1 - betas) ** 2).ravel(), 12))
    sw = sweep(SPEC, gammas=gammas, betas=betas, steps=200_000, reps=2, seed=1, tol=1e-8)
    m = sw.mean("rep")
    ok = (sw.status != dm.DIVERGED).all(axis=0)
    lam = m.lam

    def spread(values, pairs):
        return np.mean([abs(np.log(values[a]) - np.log(values[b])) for a, b in pairs])

    cells = [(ib, ig) for ib in range(len(betas)) for ig in range(len(gammas)) if ok[ib, ig]]
    same_lam = [(a, b) for i, a in enumerate(cells) for b in cells[i + 1:]
                if a[0] != b[0] and np.isclose(lam[a], lam[b], rtol=1e-9)]
    same_gamma = [(a, b) for i, a in enumerate(cells) for b in cells[i + 1:] if a[1] == b[1]]
    assert len(same_lam) >= 6 and len(same_gamma) >= 12
    ratios = {name: spread(m[name], same_lam) / spread(m[name], same_gamma) for name in ("delta_inf_norm",
                                                                                         "test_loss")}
    print(f"\nlambda collapse: spread(equal lambda)/spread(equal gamma) = "
          f"{ratios['delta_inf_norm']:.3f} (||Delta_inf||), {ratios['test_loss']:.3f} (test loss)")
    assert ratios["delta_inf_norm"] < 0.4
    assert ratios["test_loss"] < 0.4


# -- API: labelled arrays, reductions, xarray -----------------------------------------------------

def test_labels_reduction_and_xarray(problem):
    sw = sweep(SPEC, gammas="0.01:0.03:3", betas=[0.0, 0.5], steps=500, reps=2)
    assert sw.dims == ("rep", "beta", "gamma") and sw.shape == (2, 2, 3)
    assert np.allclose(sw.coords["gamma"], [0.01, 0.02, 0.03])
    assert sw.theta.shape == (2, 2, 3, 30) and sw.s_plus.shape == (2, 2, 3, 30)
    assert np.allclose(sw.lam[1, 1, 2], 0.03 / 0.25)
    m = sw.mean("rep")
    assert m.dims == ("beta", "gamma") and np.allclose(m.test_loss, sw.test_loss.mean(axis=0))
    assert "status" not in m.fields and np.allclose(m.crossed, sw.crossed.mean(axis=0))
    ds = sw.to_xarray()
    assert ds["test_loss"].dims == ("rep", "beta", "gamma") and ds["theta"].dims == ("rep", "beta", "gamma",
                                                                                     "coord")
    assert float(ds["test_loss"].sel(rep=1, beta=0.5).isel(gamma=1)) == sw.test_loss[1, 1, 1]
    assert np.all(np.isnan(sw.prediction_gap))


def test_theory_fields_for_converged_points(problem):
    sw = sweep(problem, gammas=[0.05], betas=[0.0, 0.3], steps=400_000, tol=1e-9, theory=True)
    assert (sw.status == dm.CONVERGED).all()
    res = dm.mgd(problem, 0.05, 0.3, steps=400_000, tol=1e-9)
    assert sw.prediction_gap[0, 1, 0] == pytest.approx(res.prediction_gap, rel=1e-6, abs=1e-12)
    assert sw.normalized_distance[0, 1, 0] == pytest.approx(res.normalized_distance, rel=1e-6)
    assert np.all(sw.normalized_distance < 0.05)


def test_parse_grid_and_validation(problem):
    assert np.allclose(parse_grid("1e-3:1e-1:3:log"), [1e-3, 1e-2, 1e-1])
    assert np.allclose(parse_grid("0:0.95:20"), np.linspace(0, 0.95, 20))
    assert np.allclose(parse_grid("0.1, 0.2"), [0.1, 0.2])
    for bad in ("1:2", "0:1:3:log", "a,b", "1:2:2.5"):
        with pytest.raises(ValueError):
            parse_grid(bad)
    with pytest.raises(ValueError, match="betas"):
        sweep(problem, gammas=[0.1], betas=[1.0], steps=10)
    with pytest.raises(ValueError, match="gammas"):
        sweep(problem, gammas=[0.0], betas=[0.5], steps=10)
    with pytest.raises(ValueError, match="block_size"):
        sweep(problem, gammas=[0.1], betas=[0.5], steps=10, block_size=6)
    with pytest.raises(ValueError, match="steps"):
        sweep(problem, gammas=[0.1], betas=[0.5])
    with pytest.raises(ValueError, match="not all three"):
        sweep(problem, gammas=[0.1], betas=[0.5], lams=[0.1], steps=10)
    with pytest.raises(ValueError, match="not both"):
        sweep(problem, gammas=[0.1], lams=[0.1], steps=10)
    with pytest.raises(ValueError, match="reps"):
        sweep(problem, gammas=[0.1], betas=[0.5], steps=10, reps=2)
    with pytest.raises(ValueError, match="seed"):
        sweep({"n": 20, "seed": 3}, gammas=[0.1], betas=[0.5], steps=10)
    with pytest.raises(TypeError):
        sweep([1, 2], gammas=[0.1], betas=[0.5], steps=10)


# -- store, resume, CLI -------------------------------------------------------------------------

def test_store_layout_opens_in_xarray(tmp_path):
    xr = pytest.importorskip("xarray")
    path = str(tmp_path / "s.h5")
    sw = sweep(SPEC, gammas=[0.01, 0.02], betas=[0.0, 0.5, 0.9], steps=800, reps=2, store=path)
    assert sw.path == path and sw.complete
    with h5py.File(path, "r") as f:
        assert f.attrs["kind"] == "sweep"
        cfg = json.loads(f.attrs["config"])
        assert cfg["gammas"] == [0.01, 0.02] and cfg["reps"] == 2
        assert f["done"][...].all() and (f["session"][...] == 1).all()
    ds = xr.open_dataset(path, engine="h5netcdf")
    try:
        assert ds["test_loss"].dims == ("rep", "beta", "gamma")
        assert ds["s_plus"].dims == ("rep", "beta", "gamma", "coord")
        assert np.array_equal(ds["gamma"].values, [0.01, 0.02])
        assert np.array_equal(ds["test_loss"].values, sw.test_loss)
    finally:
        ds.close()
    again = open_sweep(path)
    _assert_sweeps_equal(sw, again)
    with pytest.raises(FileExistsError):
        sweep(SPEC, gammas=[0.01, 0.02], betas=[0.0, 0.5, 0.9], steps=800, reps=2, store=path)
    with pytest.raises(OSError, match="steps"):
        sweep(SPEC, gammas=[0.01, 0.02], betas=[0.0, 0.5, 0.9], steps=900, reps=2, store=path, resume=True)
    done = sweep(SPEC, gammas=[0.01, 0.02], betas=[0.0, 0.5, 0.9], steps=800, reps=2, store=path, resume=True)
    _assert_sweeps_equal(sw, done)   # nothing left to compute


def test_problem_store_resumes_standalone(tmp_path, problem):
    path = str(tmp_path / "p.h5")
    full = sweep(problem, gammas=[0.01, 0.02, 0.04], betas=[0.2, 0.7], steps=700, batch_size=4)
    part = sweep(problem, gammas=[0.01, 0.02, 0.04], betas=[0.2, 0.7], steps=700, batch_size=4, store=path,
                 wave_size=4)
    _assert_sweeps_equal(full, part)
    with h5py.File(path, "r+") as f:  # forget half of the points, as after an interruption
        done = f["done"][...]
        done[:, 1, :] = 0
        f["done"][...] = done
    lines = []
    resumed = resume_sweep(path, log=lines.append)
    _assert_sweeps_equal(full, resumed)
    assert lines[-1].startswith("wrote 3/3 pending points")
    with h5py.File(path, "r") as f:
        session = f["session"][...]
    assert (session[:, 0, :] == 1).all() and (session[:, 1, :] == 2).all()


def _cli(*args):
    return [sys.executable, "-m", "dlnmomentum", *args]


def test_kill_and_resume_cli(tmp_path):
    """SIGKILL a CLI sweep after its first written wave; resume: nothing lost, nothing computed twice."""
    path = str(tmp_path / "k.h5")
    grid = ["--gammas", "2e-3:3e-2:8:log", "--betas", "0:0.9:8", "--steps", "60000", "--reps", "2",
            "--n", "20", "--d", "30", "--n-test", "100", "--block-size", "8", "--wave-size", "16",
            "--no-progress"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(_cli("sweep", *grid, "--store", path, "--log"), stderr=subprocess.PIPE, text=True,
                            env=env)
    deadline = time.monotonic() + 120
    try:
        while True:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "sweep ended before writing a wave"
            if line.startswith("[dlnm sweep] wrote"):
                break
            assert time.monotonic() < deadline
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    killed = open_sweep(path)
    first = killed.done.copy()
    assert 0 < first.sum() < first.size
    out = subprocess.run(_cli("sweep", "--resume", "--store", path, "--log", "--no-progress", "--json"),
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["complete"]
    wrote = [ln for ln in out.stderr.splitlines() if ln.startswith("[dlnm sweep] wrote")]
    assert wrote[-1].startswith(f"[dlnm sweep] wrote {first.size - first.sum()}/{first.size - first.sum()} ")
    final = open_sweep(path)
    with h5py.File(path, "r") as f:
        session = f["session"][...]
    assert final.complete and (session[first] == 1).all() and (session[~first] == 2).all()
    for name in FIELDS:  # points done before the kill were not touched
        assert _same(final[name][first], killed[name][first]), name
    reference = sweep(SPEC, gammas=parse_grid("2e-3:3e-2:8:log"), betas=parse_grid("0:0.9:8"), steps=60000,
                      reps=2)
    _assert_sweeps_equal(reference, final)
    shown = subprocess.run(_cli("inspect", path), capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "128/128 points" in shown.stdout and "2 session(s)" in shown.stdout


def test_sigterm_stops_between_chunks_and_keeps_store_consistent(tmp_path):
    path = str(tmp_path / "t.h5")
    args = ["--gammas", "1e-3:1e-2:4:log", "--betas", "0,0.3,0.5,0.7", "--steps", "1500000", "--n-test", "50",
            "--wave-size", "8", "--block-size", "8", "--no-progress", "--log"]
    proc = subprocess.Popen(_cli("sweep", *args, "--store", path), stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        line = proc.stderr.readline()
        assert line.startswith("[dlnm sweep] wrote"), line
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130 and "--resume" in err
    sw = open_sweep(path)
    assert 0 < sw.done.sum() < sw.done.size
    assert not os.path.exists(path + ".lock")


def test_inspect_lines_and_summary(tmp_path):
    path = str(tmp_path / "i.h5")
    sweep(SPEC, lams=[0.0, 0.2], t_max=5.0, store=path)
    lines = execute.inspect_lines(path)
    text = "\n".join(lines)
    assert "mgf" in text and "2/2 points" in text and "lambda" in text
    assert isinstance(open_sweep(path), Sweep)
