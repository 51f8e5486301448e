"""The lockstep engine of network sweeps (:mod:`dlnmomentum.sweeps.network_lockstep`): every point is the
single run ``dm.mgd`` bit for bit, whatever the chunking, thread count and wave size; interrupted sweeps
resume to the uninterrupted result.

The reference of each point is an independent ``dm.mgd`` call (the single-run kernel, itself checked
against plain NumPy in tests/test_networks.py).
"""

import os
import signal

import numba
import numpy as np
import pytest
from signal_helpers import sigint_default

import dlnmomentum as dm
from dlnmomentum.sweeps import network_lockstep as NL
from dlnmomentum.sweeps.networks import NetworkPlan, make_config

SEED = 3
TOL = 1e-3
#: spec, gammas, betas, steps: each grid has points that reach the budget, converge (tol) and diverge
CASES = {
    "teacher_student": ({"generator": "teacher_student", "n_test": 50}, [0.02, 0.3, 1.0], [0.0, 0.9], 1500),
    "deep_linear": ({"generator": "deep_linear", "widths": (30, 8, 6, 1), "n_test": 20}, [0.003, 0.1],
                    [0.0, 0.9], 800),
}


def problem_of(spec, rep):
    args = {k: v for k, v in spec.items() if k != "generator"}
    return getattr(dm, spec["generator"])(**args, seed=SEED + rep)


def single(spec, rep, gamma, beta, steps, batch_size):
    return dm.mgd(problem_of(spec, rep), gamma, beta, steps=steps, batch_size=batch_size, seed=SEED + rep, tol=TOL)


def bits(x):
    return np.asarray(x).tobytes()


@pytest.mark.parametrize("batch_size", [None, 5])
@pytest.mark.parametrize("name", list(CASES))
def test_every_lane_is_the_single_run(name, batch_size, monkeypatch):
    spec, gammas, betas, steps = CASES[name]
    monkeypatch.setattr(NL, "CHUNK_SECONDS", 1e-6)  # one update per kernel call: every chunk boundary
    config, _ = make_config(spec, gammas, betas, steps, reps=2, seed=SEED, tol=TOL, batch_size=batch_size)
    plan = NetworkPlan(config)
    points = list(range(int(np.prod(plan.shape))))[::-1]  # reps interleaved in no particular order
    got = {}
    for finished, results in NL.NetworkLockstep(plan).run_wave_results(points):
        got.update(zip(finished, results, strict=True))
    assert sorted(got) == sorted(points)
    statuses = set()
    for p, res in got.items():
        rep, ib, ig = np.unravel_index(p, plan.shape)
        ref = single(spec, int(rep), gammas[ig], betas[ib], steps, batch_size)
        assert bits(res.params) == bits(ref.params), (p, ref.status_name)
        for field in ("train_loss", "test_loss", "param_norm", "lam"):
            assert bits(getattr(res, field)) == bits(getattr(ref, field)), (p, field)
        assert res.status == ref.status and res.steps_done == ref.steps_done, p
        statuses.add(ref.status)
    assert statuses == {dm.Status.MAX_STEPS, dm.Status.CONVERGED, dm.Status.DIVERGED}


@pytest.mark.parametrize("batch_size", [None, 5])
@pytest.mark.parametrize("name", list(CASES))
def test_sweep_fields_independent_of_threads_wave_size_and_chunks(name, batch_size, monkeypatch):
    spec, gammas, betas, steps = CASES[name]
    kwargs = dict(gammas=gammas, betas=betas, steps=steps, reps=2, seed=SEED, tol=TOL, batch_size=batch_size)
    threads_before = numba.get_num_threads()
    base = dm.networks_sweep(spec, **kwargs)
    assert base.complete and numba.get_num_threads() == threads_before
    for rep in range(2):
        for ib, beta in enumerate(betas):
            for ig, gamma in enumerate(gammas):
                ref = single(spec, rep, gamma, beta, steps, batch_size)
                for field in ("test_loss", "train_loss", "param_norm", "lam"):
                    assert bits(base[field][rep, ib, ig]) == bits(np.float64(getattr(ref, field))), field
                assert base.status[rep, ib, ig] == ref.status and base.steps_done[rep, ib, ig] == ref.steps_done
    monkeypatch.setattr(NL, "CHUNK_SECONDS", 1e-4)  # chunks of a few to ~100 updates
    for threads, wave_size in ((1, 1), (2, 5), (2, None)):
        other = dm.networks_sweep(spec, **kwargs, threads=threads, wave_size=wave_size)
        for field in base.fields:
            assert bits(other[field]) == bits(base[field]), (threads, wave_size, field)


@pytest.mark.parametrize("when", ["first finished points", "first wave"])
def test_interrupted_then_resumed_is_the_uninterrupted_sweep(when, tmp_path, monkeypatch):
    spec, gammas, betas, steps = CASES["teacher_student"]
    kwargs = dict(gammas=gammas, betas=betas, steps=steps, reps=2, seed=SEED, tol=TOL, batch_size=5)
    full = dm.networks_sweep(spec, **kwargs)
    monkeypatch.setattr(NL, "CHUNK_SECONDS", 1e-4)  # many chunks per wave
    path = tmp_path / "sweep.h5"
    wave = len(gammas) * len(betas)  # the first wave is rep 0
    lines = []

    def log(line):
        lines.append(line)
        written = int(line.split()[1].split("/")[0])
        if (when == "first finished points" and len(lines) == 1) or (when == "first wave" and written == wave):
            os.kill(os.getpid(), signal.SIGINT)

    with sigint_default():
        first = dm.networks_sweep(spec, **kwargs, store=path, wave_size=wave, threads=2, log=log)
    assert first.interrupted
    n_done = int(first.done.sum())
    if when == "first wave":
        assert n_done == wave and first.done[0].all()
    else:  # the points that diverged in the first chunks; the running ones are dropped, not stored
        assert 0 < n_done < wave and (np.asarray(first.status)[first.done] == dm.Status.DIVERGED).all()
    for field in full.fields:  # what was stored is final
        assert bits(np.asarray(first[field])[first.done]) == bits(np.asarray(full[field])[first.done]), field
    done = dm.resume_networks_sweep(path)
    assert done.complete and not done.interrupted
    for field in full.fields:
        assert bits(done[field]) == bits(full[field]), field
