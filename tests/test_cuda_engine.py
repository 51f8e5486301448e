"""The CUDA sweep engine (``device="cuda"``) as a user meets it: wide data, bad inputs, progress.

Without a GPU the engine runs in Numba's CUDA simulator, in a subprocess (numba decides once per process
whether ``numba.cuda`` is simulated); the subprocess runs this file as a script and prints one JSON report,
which the tests read. Problems are tiny (the simulator runs 32 Python threads per run).
"""

import json
import os
import sys

import numpy as np
import pytest
from cuda_sim import simulated_report
from reference import heavy_ball_theta


def _wide():
    """d = 40 > 2n = 8: the data form under gradient='auto', on the CPU and (now) on the GPU."""
    import dlnmomentum as dm

    report = {}
    p = dm.sparse_regression(n=4, d=40, s=3, n_test=0, seed=2)
    grid = dict(gammas=[0.05, 0.2], betas=[0.5], steps=25, progress=False)
    gpu = dm.sweep(p, **grid, device="cuda")
    report["hessian_formed"] = "hessian" in p.__dict__ or "_padded_hessian" in p.__dict__
    cpu = dm.sweep(p, **grid)
    report["unequal_fields"] = [name for name in cpu.fields
                                if not np.array_equal(cpu[name], gpu[name], equal_nan=True)]
    theta = np.asarray(gpu.data["theta"])
    rel = []
    for k, gamma in enumerate(grid["gammas"]):
        ref = heavy_ball_theta(p, gamma, 0.5, 25)
        rel.append(float(np.abs(theta[0, 0, k] - ref).max() / np.abs(ref).max()))
    report["numpy_rel"] = rel
    report["status"] = np.asarray(gpu.status).ravel().tolist()
    return report


def _refused_shape(tmp):
    """A shape the kernels cannot run (d = 513 > 512) is refused before a store is created."""
    import dlnmomentum as dm

    p = dm.Problem(np.random.default_rng(0).normal(size=(4, 513)), np.ones(4))
    path = os.path.join(tmp, "refused.h5")
    try:
        dm.sweep(p, gammas=[0.1], betas=[0.5], steps=3, store=path, progress=False, device="cuda")
        message = None
    except ValueError as exc:
        message = str(exc)
    return {"message": message, "left": sorted(os.listdir(tmp))}


def _progress_credit():
    """Run-steps the engine reports to the progress bar for a wave whose runs all converge early."""
    from dlnmomentum.sweeps.cuda import CudaEngine
    from dlnmomentum.sweeps.plan import Plan, make_config

    config, problem = make_config(dict(n=5, d=6, s=2, n_test=0), [0.3], [0.0, 0.5], None, 1000, None, 1, None, 0,
                                  1e3, 0.01, False, "auto", False, 1e-8)
    plan = Plan(config, problem)

    class Bar:
        n = 0

        def update(self, k):
            self.n += k

    bar = Bar()
    out = CudaEngine(plan).run_wave([0, 1], {"signum": None}, bar)
    return {"credited": bar.n, "expected": 2 * 1000, "steps_done": out[3].tolist(), "status": out[2].tolist()}


def _bad_inputs():
    """The message of each bad argument of CudaMGDSweep and of its load_state (None: accepted)."""
    import dlnmomentum as dm
    from dlnmomentum.sweeps import cuda as CE

    p = dm.sparse_regression(n=3, d=4, s=2, n_test=0)
    w = np.full(4, 0.1)
    kw = dict(w_plus0=w, w_minus0=w, batch_size=2, replace=True, mode="minibatch")
    out = {}

    def attempt(name, call):
        try:
            call()
            out[name] = None
        except Exception as exc:  # (the test says which kind it must be)
            # (the built-in kind: validate's ParameterValueError is a ValueError)
            kind = next((c for c in type(exc).__mro__ if c in (TypeError, ValueError)), type(exc))
            out[name] = [kind.__name__, str(exc)]

    for name, extra in {"warps_0": dict(warps_per_block=0), "warps_neg": dict(warps_per_block=-3),
                        "warps_frac": dict(warps_per_block=2.5), "warps_33": dict(warps_per_block=33),
                        "seeds_len": dict(seeds=[1, 2, 3])}.items():
        attempt(name, lambda extra=extra: CE.CudaMGDSweep([p], [(0, 0.5, 0.1), (0, 0.0, 0.1)], 5, **kw, **extra))
    attempt("problem_type", lambda: CE.CudaMGDSweep([p.X], [(0, 0.5, 0.1)], 5, **kw))
    huge = dm.Problem(p.X * 1e200, p.y)
    attempt("data_scale", lambda: CE.CudaMGDSweep([huge], [(0, 0.5, 0.1)], 5, **kw))
    eng = CE.CudaMGDSweep([p], [(0, 0.5, 0.1), (0, 0.0, 0.1)], 5, **kw)
    ckpt = eng.checkpoint()
    for name, change in {"rng_zero": ("rng", np.array([[0, 0, 0, 0], [1, 2, 3, 4]], dtype=np.uint64)),
                         "perm_range": ("perm", np.array([[0, 1, 7], [0, 1, 2]])),
                         "perm_repeat": ("perm", np.array([[0, 1, 1], [0, 1, 2]])),
                         "steps_neg": ("steps_done", np.array([-1, 0])),
                         "steps_over": ("steps_done", np.array([6, 0])),
                         "max_steps_early": ("status", np.array([2, 0])),
                         "steps_float": ("steps_done", np.array([0.5, 0.0])),
                         "perm_float": ("perm", np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]))}.items():
        attempt(name, lambda change=change: eng.load_state(**dict(ckpt, **{change[0]: change[1]})))
    attempt("checkpoint_itself", lambda: eng.load_state(**ckpt))
    from dlnmomentum.kernels import cuda_mgd as KC

    simulated, KC.SIMULATOR = KC.SIMULATOR, False  # (the launch rule of a real GPU; the simulator runs 1 warp)
    try:
        attempt("warps_shared", lambda: KC.launch_config(10, 512, 1024, 0, 32))
        attempt("warps_default", lambda: KC.launch_config(10, 512, 1024, 0, None))
    finally:
        KC.SIMULATOR = simulated
    return out


def _wave_sizes():
    """Automatic waves of 20 000 short runs at d = 512 (no kernel runs: only how the points are cut)."""
    from dlnmomentum.sweeps.cuda import CudaEngine
    from dlnmomentum.sweeps.execute import WAVE_SECONDS, waves
    from dlnmomentum.sweeps.plan import Plan, make_config

    problem = _problem(4, 512)
    config, problem = make_config(problem, np.geomspace(1e-3, 1e-1, 200), np.linspace(0, 0.9, 100), None, 10, None,
                                  1, None, 0, None, 0.01, False, "auto", False, 1e-8)
    plan = Plan(config, problem)
    pending = list(range(plan.npoints))
    engine = CudaEngine(plan)
    sizes = [len(w) for w in waves(plan, pending, engine, 8)]
    # a measured device time per point of WAVE_SECONDS/1000: waves of about 1 000 points, whatever the CPU threads
    engine.ns_per_run_step = WAVE_SECONDS / 1000 / engine.steps * 1e9
    timed = [len(w) for w in waves(plan, pending, engine, 8)]
    return {"memory": sizes, "timed": timed}


def _problem(n, d):
    import dlnmomentum as dm

    return dm.Problem(np.random.default_rng(0).normal(size=(n, d)), np.ones(n))


def _simulate(tmp):
    import warnings

    warnings.simplefilter("ignore", RuntimeWarning)
    sys.setswitchinterval(5e-5)  # the simulator's barriers poll under the GIL
    from dlnmomentum.kernels import cuda_compat

    assert cuda_compat.SIMULATOR, "run with NUMBA_ENABLE_CUDASIM=1"
    print(json.dumps({"wide": _wide(), "refused_shape": _refused_shape(tmp),
                      "progress": _progress_credit(), "bad_inputs": _bad_inputs(),
                      "waves": _wave_sizes()}))


if __name__ == "__main__":
    _simulate(sys.argv[1])


@pytest.fixture(scope="module")
def simulated(tmp_path_factory):
    return simulated_report(__file__, tmp_path_factory.mktemp("cuda"), timeout=600)


def test_wide_data_uses_x_alone_and_equals_the_cpu_sweep(simulated):
    """The GPU engine takes the data form where the CPU sweep does (runs.common.uses_hessian): H = XᵀX/n is never
    formed (at n = 10, d = 1e5 it would be 80 GB), and every field is the CPU sweep's, bit for bit."""
    wide = simulated["wide"]
    assert not wide["hessian_formed"]
    assert wide["unequal_fields"] == []
    assert wide["status"] == [2, 2]  # (max_steps: the points ran their 25 steps, none diverged)
    assert max(wide["numpy_rel"]) <= 1e-12


def test_a_shape_the_kernels_refuse_is_refused_before_any_work(simulated):
    """(It was refused only when the first wave started: the store had been created and a session begun, so the
    same command on the CPU then failed with 'store exists'.)"""
    got = simulated["refused_shape"]
    assert got["message"] is not None and "d=513" in got["message"] and "[1, 512]" in got["message"]
    assert "device='cpu'" in got["message"]
    assert got["left"] == []


def test_the_progress_bar_reaches_its_total_when_runs_end_early(simulated):
    """The bar's total is points × steps; runs that converge (tol = 1e3: at their first iterate) are credited the
    steps they did not need, as the CPU engine does (the bar stopped at the first chunk, 512 of 2 000, and closed
    short)."""
    got = simulated["progress"]
    assert got["status"] == [1, 1] and got["steps_done"] == [0, 0]
    assert got["credited"] == got["expected"]


@pytest.mark.parametrize("case, words", [
    ("warps_0", "warps_per_block must be an integer in [1, 32]"),
    ("warps_neg", "warps_per_block must be an integer in [1, 32]"),
    ("warps_frac", "warps_per_block must be an integer in [1, 32]"),
    ("warps_33", "warps_per_block must be an integer in [1, 32]"),
    ("seeds_len", "seeds must be one seed or one per point (2)"),
    ("problem_type", "problems_by_rep[0] must be a dlnmomentum.Problem, got ndarray"),
    ("data_scale", "X must be scaled so that XᵀX/n and Xᵀy/n are finite"),
    ("rng_zero", "rng must be a xoshiro256** state"),
    ("perm_range", "perm must hold a permutation of 0, ..., n - 1 = 2"),
    ("perm_repeat", "perm must hold a permutation"),
    ("steps_neg", "steps_done must be in [0, steps=5]"),
    ("steps_over", "steps_done must be in [0, steps=5]"),
    ("max_steps_early", "status 2 (max_steps) means steps_done = steps = 5"),
    ("steps_float", "steps_done must be an integer array"),
    ("perm_float", "perm must be an integer array"),
    ("warps_shared", "warps_per_block=32 needs more than the 49152 bytes of shared memory"),
])
def test_bad_engine_inputs_are_refused_naming_the_parameter(simulated, case, words):
    """(Before: warps_per_block 0, -3, 2.5 and 33 were taken without a word, seeds of the wrong length failed in
    NumPy's broadcasting, an array for a Problem failed on a missing attribute, data scaled past float64 (X * 1e200)
    ran as runs that diverge, and load_state took an all-zero random state (the SMGD draw then never ends), rows of
    perm that are no permutation (read out of bounds on the GPU), steps_done outside [0, steps] and a max_steps
    point with steps left, which it ran on; a float steps_done or perm was cast (0.5 steps read as 0), and an
    explicit warps_per_block the shared memory cannot hold was lowered without a word.)"""
    got = simulated["bad_inputs"][case]
    assert got is not None and got[0] in ("TypeError", "ValueError") and words in got[1], got
    assert simulated["bad_inputs"]["checkpoint_itself"] is None
    assert simulated["bad_inputs"]["warps_default"] is None  # (the default is lowered to fit)


def test_the_cpu_reference_state_uses_x_alone_in_the_data_form():
    """cpu_state (the reference the GPU engine is checked against; no numba.cuda needed) takes the kernel arrays by
    the same rule as a run: in the data form H = XᵀX/n is not formed (it took problem.padded, H included)."""
    import dlnmomentum as dm
    from dlnmomentum.sweeps import cuda as CE

    p = dm.sparse_regression(n=4, d=40, s=3, n_test=0, seed=2)
    w = np.full(40, 0.01)
    fstate, _, status, steps = CE.cpu_state(p, 0.05, 0.5, 25, mode="data", w_plus0=w, w_minus0=w)
    assert "hessian" not in p.__dict__ and "_padded_hessian" not in p.__dict__
    theta = (fstate[0] ** 2 - fstate[1] ** 2) / 4  # (rows W_PLUS, W_MINUS)
    ref = heavy_ball_theta(p, 0.05, 0.5, 25)
    assert (status, steps) == (2, 25)
    assert np.abs(theta - ref).max() <= 1e-12 * np.abs(ref).max()


def test_automatic_gpu_waves_fit_a_bounded_memory(simulated):
    """A wave's run state lives on the device and is copied back whole: fstate (12 rows) and istate (6 rows) of d
    float64/int64 each, 144·d bytes a run. 20 000 runs at d = 512 are 1.47 GB; the waves stay within 1 GiB (they
    were one wave of every point: 1e6 such points would have asked for 74 GB)."""
    sizes = simulated["waves"]["memory"]
    assert sum(sizes) == 20_000
    assert max(sizes) * 144 * 512 <= 2**30


def test_automatic_gpu_waves_last_about_wave_seconds(simulated):
    """The GPU engine's cost per point is the device's (its throughput over a wave), so a wave is WAVE_SECONDS of
    it, not that times the CPU threads (with 16 threads, 320 s between store writes)."""
    sizes = simulated["waves"]["timed"]
    assert sum(sizes) == 20_000
    assert all(abs(n - 1000) <= 8 for n in sizes), sizes


def test_a_dask_client_refuses_a_shape_the_kernels_cannot_run_without_a_gpu(monkeypatch):
    """Where the points run on Dask workers (``here=False``) the client, which may have no GPU, checks the shape
    before a store is created (it was left to each worker block to fail); numba.cuda is not needed for it."""
    from dlnmomentum.sweeps import cuda as CE
    from dlnmomentum.sweeps.execute import check_device
    from dlnmomentum.sweeps.plan import Plan, make_config

    def no_gpu():
        raise AssertionError("the client must not look for a GPU")

    monkeypatch.setattr(CE, "require_cuda", no_gpu)
    config, problem = make_config(_problem(4, 600), [0.01], [0.5], None, 10, None, 1, None, 0, None, 0.01, False,
                                  "auto", False, 1e-8)
    with pytest.raises(ValueError, match=r"supports d in \[1, 512\].*got d=600; device='cpu' runs this sweep"):
        check_device("cuda", Plan(config, problem), here=False)
