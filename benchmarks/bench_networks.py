"""Performance of MGD on the network problems (issue 12): the teacher-student ReLU net (80 parameters,
n = 15) and the paper's deep linear net (widths (30, 60, 120, 60, 1), 16,260 parameters, n = 20).

* ns per step of one full-batch run (``dm.mgd``), against a plain NumPy heavy-ball loop (matmul
  forward/backward on the same problem) and a ``torch.optim.SGD(momentum=β, dampening=0)`` loop in
  float64 (skipped without torch), all in the same session;
* ns per run-step of a 400-point (20 x 20) (γ, β) sweep (``dm.networks_sweep``: the lockstep engine, every
  running point advanced by one compiled call per chunk, in parallel over points on all cores), counted over
  the steps actually done (diverged points stop early); the target is the single run's ns/step divided by
  the cores.

Run: ``python -m pytest benchmarks/bench_networks.py --benchmark-only -s``
"""

import os
import time

import numpy as np
import pytest

import dlnmomentum as dm

_measured = {}


@pytest.fixture(scope="module")
def problems():
    return {"teacher_student": dm.teacher_student(seed=0, n_test=100),
            "deep_linear": dm.deep_linear(seed=0, n_test=100)}


#: (steps of the kernel run, steps of the NumPy / torch loops, sweep steps, sweep gammas)
SETTINGS = {"teacher_student": (200_000, 20_000, 20_000, (1e-3, 1e-1)),
            "deep_linear": (20_000, 300, 1_000, (1e-4, 1e-2))}
GAMMA, BETA = {"teacher_student": 0.05, "deep_linear": 0.005}, 0.8


def numpy_loop(problem, gamma, beta, steps):
    layers = [(W.copy(), None if b is None else b.copy()) for W, b in problem.unflatten(problem.params0)]
    prev = [(W.copy(), None if b is None else b.copy()) for W, b in layers]
    X, y, n = problem.X, problem.y, problem.n
    relu = problem.relu
    for _ in range(steps):
        acts = [X]
        for k, (W, b) in enumerate(layers):
            z = acts[-1] @ W
            if b is not None:
                z += b
            acts.append(np.maximum(z, 0.0) if relu and k < len(layers) - 1 else z)
        delta = (acts[-1] - y[:, None]) / n
        grads = [None] * len(layers)
        for k in range(len(layers) - 1, -1, -1):
            W, b = layers[k]
            grads[k] = (acts[k].T @ delta, None if b is None else delta.sum(axis=0))
            if k:
                delta = delta @ W.T
                if relu:
                    delta *= acts[k] > 0
        new = []
        for (W, b), (Wp, bp), (gW, gb) in zip(layers, prev, grads, strict=True):
            Wn = W - gamma * gW + beta * (W - Wp)
            bn = None if b is None else b - gamma * gb + beta * (b - bp)
            new.append((Wn, bn))
        prev, layers = layers, new
    return layers


def torch_loop(torch, problem, gamma, beta, steps):
    params = []
    for W, b in problem.unflatten(problem.params0):
        params.append(torch.tensor(W.copy(), requires_grad=True))
        if b is not None:
            params.append(torch.tensor(b.copy(), requires_grad=True))
    X = torch.tensor(problem.X)
    y = torch.tensor(problem.y)
    opt = torch.optim.SGD(params, lr=gamma, momentum=beta, dampening=0)
    biased = [b is not None for _, b in problem.unflatten(problem.params0)]
    for _ in range(steps):
        opt.zero_grad()
        a, i = X, 0
        for k, has_b in enumerate(biased):
            a = a @ params[i]
            i += 1
            if has_b:
                a = a + params[i]
                i += 1
            if problem.relu and k < len(biased) - 1:
                a = torch.relu(a)
        loss = ((a[:, 0] - y) ** 2).sum() / (2 * problem.n)
        loss.backward()
        opt.step()


def _timed(fn, *args):
    t0 = time.perf_counter()
    fn(*args)
    return time.perf_counter() - t0


@pytest.mark.parametrize("name", ["teacher_student", "deep_linear"])
def test_single_run(benchmark, problems, machine, name):
    p = problems[name]
    steps, loop_steps, _, _ = SETTINGS[name]
    dm.mgd(p, GAMMA[name], BETA, steps=10)  # compiled / loaded
    res = benchmark.pedantic(dm.mgd, args=(p, GAMMA[name], BETA), kwargs=dict(steps=steps), rounds=3,
                             iterations=1)
    assert res.steps_done == steps
    kernel_ns = benchmark.stats.stats.min / steps * 1e9
    numpy_ns = min(_timed(numpy_loop, p, GAMMA[name], BETA, loop_steps) for _ in range(2)) / loop_steps * 1e9
    _measured[name] = {"kernel": kernel_ns, "numpy": numpy_ns}
    line = (f"\n{name}: dm.mgd {kernel_ns:,.0f} ns/step; NumPy loop {numpy_ns:,.0f} ns/step "
            f"({numpy_ns / kernel_ns:.1f}x)")
    try:
        import torch
    except ImportError:
        line += "; torch not installed"
    else:
        torch.set_num_threads(1)
        torch_ns = min(_timed(torch_loop, torch, p, GAMMA[name], BETA, loop_steps) for _ in range(2)) / loop_steps * 1e9
        _measured[name]["torch"] = torch_ns
        line += f"; torch SGD loop {torch_ns:,.0f} ns/step ({torch_ns / kernel_ns:.1f}x)"
    benchmark.extra_info.update(machine=machine, **_measured[name])
    print(line + f"  [{machine}]")


@pytest.mark.parametrize("name", ["teacher_student", "deep_linear"])
def test_sweep_400_points(benchmark, problems, machine, name):
    p = problems[name]
    _, _, steps, (g0, g1) = SETTINGS[name]
    gammas, betas = np.geomspace(g0, g1, 20), np.linspace(0.0, 0.95, 20)
    dm.networks_sweep(p, gammas=gammas[:2], betas=betas[:1], steps=2)  # compiled / loaded
    sw = benchmark.pedantic(dm.networks_sweep, args=(p,), kwargs=dict(gammas=gammas, betas=betas, steps=steps),
                            rounds=1, iterations=1)
    run_steps = int(np.asarray(sw.steps_done).sum())
    ns = benchmark.stats.stats.min / run_steps * 1e9
    statuses = {dm.Status(int(c)).label: int((np.asarray(sw.status) == c).sum()) for c in np.unique(sw.status)}
    benchmark.extra_info.update(machine=machine, ns_per_run_step=ns, run_steps=run_steps, statuses=statuses)
    single = _measured.get(name, {})
    rel = "".join(f"; {k} loop per step {v / ns:.1f}x slower" for k, v in single.items() if k != "kernel")
    if "kernel" in single:
        cores = os.cpu_count() or 1
        rel += f"; single run / {cores} cores = {single['kernel'] / cores:,.0f} ns"
    print(f"\n{name} sweep 20x20, {steps} steps: {ns:,.0f} ns per run-step ({run_steps:,} run-steps, {statuses})"
          f"{rel}  [{machine}]")
