"""The CUDA engine on a real GPU: agreement with the CPU kernel, then speed. Prints a compact report.

Run from the repository root on a machine with an NVIDIA GPU and numba-cuda (the package need not be
installed; NumPy, Numba, SciPy and h5py must be)::

    PYTHONPATH=. python3 benchmarks/cuda_check.py            # agreement + benchmark
    PYTHONPATH=. python3 benchmarks/cuda_check.py --quick    # smaller agreement runs, shorter benchmark
    PYTHONPATH=. python3 benchmarks/cuda_check.py --json out.json

Agreement: every state field of every run (``fstate`` rows, ``istate`` rows, status, steps done) of
a few hundred runs of the paper's problem (n = 20, d = 30, two data sets, β in [0, 0.99], γ up to
diverging values), chunked and resumed from a checkpoint, against the CPU single-run kernel
``dlnmomentum.kernels.mgd._mgd_advance``: Hessian and data forms, with and without ``tol``, SMGD with
and without replacement, and a wide problem (d = 200: several coordinates per lane). For each field:
the worst relative difference ‖gpu - cpu‖/‖cpu‖ over runs and how many runs are equal bit for bit.

Speed: ns per run-step of 4,096 and 40,000 runs x 20,000 full-batch steps of
``sparse_regression(n=20, d=30, s=5, seed=0)`` with every accumulator (goal on an H100: <= 0.3 ns),
the same with the convergence test on, next to ``jax.vmap(lax.scan)`` of the plain heavy-ball update
(no accumulators) on the same GPU and the CPU lockstep sweep engine (all cores).
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np

# JAX would otherwise reserve 75 % of the GPU memory at import, before numba allocates anything.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

GOAL_NS = 0.3
BENCH_STEPS = 20_000
BENCH_RUNS = (4096, 40_000)


def _grid(count, gammas=(1e-3, 3e-2), betas=(0.0, 0.9)):
    """``count`` (β, γ) pairs of a stable grid (no run converges or diverges: every run does every step)."""
    side = int(np.ceil(np.sqrt(count)))
    g = np.geomspace(gammas[0], gammas[1], side)
    b = np.linspace(betas[0], betas[1], side)
    pairs = [(bb, gg) for bb in b for gg in g]
    return pairs[:count]


def _paper_points(reps, per_rep):
    """(rep, β, γ) over β in [0, 0.99] and γ log-spaced in [1e-3, 0.3] (the large γ diverge)."""
    betas = np.array([0.0, 0.5, 0.8, 0.9, 0.95, 0.99])
    gammas = np.geomspace(1e-3, 0.3, max(1, -(-per_rep // betas.size)))
    grid = [(b, g) for b in betas for g in gammas][:per_rep]
    return [(r, b, g) for r in range(reps) for b, g in grid]


# ---------------------------------------------------------------------------------------------------
# Agreement
# ---------------------------------------------------------------------------------------------------

def agreement_cases(quick=False):
    per_rep = 48 if quick else 160
    steps = 2000 if quick else 6000
    chunks = (steps // 3, steps // 6, steps - steps // 3 - steps // 6)
    paper = dict(spec=dict(n=20, d=30, s=5), reps=2, points=_paper_points(2, per_rep), steps=steps, chunks=chunks,
                 resume_after=0)
    wide = dict(spec=dict(n=40, d=200, s=5), reps=1,
                points=[(0, b, g) for b in (0.0, 0.9) for g in (3e-4, 1e-3, 3e-3, 0.3)],
                steps=steps // 4, chunks=(steps // 8, steps // 8), resume_after=None)
    return {
        "hessian": dict(paper, mode="hessian"),
        "hessian tol=1e-10": dict(paper, mode="hessian", tol=1e-10),
        "data tol=1e-10": dict(paper, mode="data", tol=1e-10),
        "smgd B=5": dict(paper, mode="minibatch", batch_size=5),
        "smgd B=5 replace tol=1e-8": dict(paper, mode="minibatch", batch_size=5, replace=True, tol=1e-8),
        "wide d=200 hessian tol=1e-8": dict(wide, mode="hessian", tol=1e-8),
        "wide d=200 data": dict(wide, mode="data"),
        "wide d=200 smgd B=7": dict(wide, mode="minibatch", batch_size=7),
    }


def run_agreement(spec, reps, points, steps, chunks, resume_after, mode, tol=None, batch_size=None,
                  replace=False):
    import dlnmomentum as dm
    from dlnmomentum.sweeps import cuda as CE

    problems = [dm.sparse_regression(**spec, seed=r) for r in range(reps)]
    d = problems[0].d
    w0 = np.full(d, 0.01)  # the default initialisation u0 = 0.01, v0 = 0
    seeds = [r for r, _, _ in points]  # the CPU sweep's seed + rep with seed = 0
    kw = dict(batch_size=batch_size, replace=replace, seeds=seeds, tol=tol, mode=mode, w_plus0=w0, w_minus0=w0)
    t0 = time.perf_counter()
    eng = CE.run_chunks(CE.CudaMGDSweep(problems, points, steps, **kw), chunks, resume_after)
    got = eng.state()
    t_gpu = time.perf_counter() - t0
    t0 = time.perf_counter()
    ref = CE.cpu_states(problems, points, steps, **kw)
    t_cpu = time.perf_counter() - t0
    fields = CE.compare_states(got, ref)
    status = {name: int((ref[2] == code).sum()) for code, name in ((1, "converged"), (2, "max_steps"),
                                                                   (3, "diverged"))}
    return {"fields": fields, "runs": len(points), "steps": steps, "cpu_status": status,
            "crossings": int(ref[1][:, :2].sum()), "gpu_s": t_gpu, "cpu_s": t_cpu}


def print_agreement(name, rep):
    fields = rep["fields"]
    P = rep["runs"]
    bitwise = [f for f, r in fields.items() if r["bitwise"] == r["points"]]
    worst = max(r["max_rel"] for r in fields.values())
    print(f"\n[{name}] {P} runs x {rep['steps']} steps, CPU outcome {rep['cpu_status']}, "
          f"{rep['crossings']} sign crossings; GPU {rep['gpu_s']:.2f} s (incl. compile), CPU {rep['cpu_s']:.2f} s")
    print(f"  worst max_rel {worst:.3g}; bitwise in every run: {len(bitwise)}/{len(fields)} fields")
    for f, r in fields.items():
        if r["bitwise"] != r["points"]:
            print(f"    {f:<18} max_rel {r['max_rel']:.3g}  bitwise {r['bitwise']}/{r['points']}")


# ---------------------------------------------------------------------------------------------------
# Speed
# ---------------------------------------------------------------------------------------------------

def gpu_ns_per_run_step(problem, runs, steps=BENCH_STEPS, tol=None, mode="hessian", chunk=5000,
                        warps_per_block=None):
    """ns per run-step of the CUDA engine (every accumulator), compile and transfers excluded."""
    from dlnmomentum.sweeps import cuda as CE

    d = problem.d
    w0 = np.full(d, 0.01)
    points = [(0, b, g) for b, g in _grid(runs)]
    kw = dict(tol=tol, mode=mode, w_plus0=w0, w_minus0=w0, warps_per_block=warps_per_block)
    warm = CE.CudaMGDSweep([problem], points[:64], 10, **kw)  # compile this specialisation
    warm.advance(10)
    warm.synchronize()
    eng = CE.CudaMGDSweep([problem], points, steps, **kw)
    eng.synchronize()
    t0 = time.perf_counter()
    done = 0
    while done < steps:
        done += eng.advance(min(chunk, steps - done))
    eng.synchronize()
    elapsed = time.perf_counter() - t0
    run_steps = int(eng.steps_done().sum())
    return elapsed / run_steps * 1e9, {"runs": runs, "steps": steps, "run_steps": run_steps, "seconds": elapsed,
                                       "warps_per_block": eng.warps_per_block}


def jax_ns_per_run_step(problem, runs, steps=BENCH_STEPS):
    """ns per run-step of jax.jit(jax.vmap(lax.scan)) of the plain heavy-ball update (float64), or None."""
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax
    except ImportError:
        return None, {"skipped": "jax is not installed"}
    jax.config.update("jax_enable_x64", True)
    H = jnp.asarray(problem.hessian)
    b = jnp.asarray(problem.b)
    d = problem.d
    pairs = np.array(_grid(runs))
    betas = jnp.asarray(pairs[:, 0])
    gammas = jnp.asarray(pairs[:, 1])

    def one(gamma, beta):
        w0 = jnp.full(d, 0.01)

        def step(carry, _):
            wp, wm, wpp, wmp = carry
            grad = H @ ((wp * wp - wm * wm) * 0.25) - b
            return (wp - gamma * grad * wp + beta * (wp - wpp), wm + gamma * grad * wm + beta * (wm - wmp), wp,
                    wm), None

        (wp, wm, _, _), _ = lax.scan(step, (w0, w0, w0, w0), None, length=steps)
        return wp, wm

    f = jax.jit(jax.vmap(one))
    f(gammas, betas)[0].block_until_ready()  # compile and warm
    t0 = time.perf_counter()
    f(gammas, betas)[0].block_until_ready()
    elapsed = time.perf_counter() - t0
    return elapsed / (runs * steps) * 1e9, {"runs": runs, "steps": steps, "seconds": elapsed,
                                            "device": str(jax.devices()[0])}


def cpu_ns_per_run_step(problem, runs=256, steps=5000):
    """ns per run-step of the CPU lockstep sweep (dm.sweep, all cores, every accumulator)."""
    import numba

    import dlnmomentum as dm

    side = int(np.sqrt(runs))
    pairs = _grid(side * side)
    gammas = sorted({g for _, g in pairs})
    betas = sorted({b for b, _ in pairs})
    dm.sweep(problem, gammas=gammas[:2], betas=betas[:4], steps=10, progress=False)  # load the compiled kernel
    t0 = time.perf_counter()
    res = dm.sweep(problem, gammas=gammas, betas=betas, steps=steps, progress=False)
    elapsed = time.perf_counter() - t0
    run_steps = int(res.steps_done.sum())
    return elapsed / run_steps * 1e9, {"runs": len(gammas) * len(betas), "steps": steps, "seconds": elapsed,
                                       "threads": numba.get_num_threads()}


def run_benchmark(quick=False):
    import dlnmomentum as dm

    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)
    steps = 5000 if quick else BENCH_STEPS
    out = {}
    for runs in BENCH_RUNS:
        ns, info = gpu_ns_per_run_step(problem, runs, steps)
        out[f"cuda {runs} runs"] = (ns, info)
        print(f"  cuda  {runs:>6} runs x {steps} steps, every accumulator: {ns:.4f} ns/run-step "
              f"({info['seconds']:.3f} s, {info['warps_per_block']} warps/block)  [goal <= {GOAL_NS} ns]", flush=True)
    for wpb in (1, 2, 8):
        ns, info = gpu_ns_per_run_step(problem, BENCH_RUNS[-1], steps, warps_per_block=wpb)
        out[f"cuda {BENCH_RUNS[-1]} runs wpb={wpb}"] = (ns, info)
        print(f"  cuda  {BENCH_RUNS[-1]:>6} runs, {wpb} warps/block: {ns:.4f} ns/run-step", flush=True)
    ns, info = gpu_ns_per_run_step(problem, BENCH_RUNS[-1], steps, tol=1e-30)
    out[f"cuda {BENCH_RUNS[-1]} runs tol"] = (ns, info)
    print(f"  cuda  {BENCH_RUNS[-1]:>6} runs, with the loss test (tol): {ns:.4f} ns/run-step", flush=True)
    ns, info = gpu_ns_per_run_step(problem, BENCH_RUNS[-1], steps, mode="data")
    out[f"cuda {BENCH_RUNS[-1]} runs data form"] = (ns, info)
    print(f"  cuda  {BENCH_RUNS[-1]:>6} runs, data form Xᵀ(Xθ-y)/n: {ns:.4f} ns/run-step", flush=True)
    for runs in BENCH_RUNS:
        ns, info = jax_ns_per_run_step(problem, runs, steps)
        out[f"jax {runs} runs"] = (ns, info)
        if ns is None:
            print(f"  jax: {info['skipped']}")
            break
        print(f"  jax   {runs:>6} runs x {steps} steps, plain heavy ball (no accumulators): {ns:.4f} ns/run-step "
              f"({info['seconds']:.3f} s)", flush=True)
    ns, info = cpu_ns_per_run_step(problem, steps=2000 if quick else 5000)
    out["cpu sweep"] = (ns, info)
    print(f"  cpu   {info['runs']:>6} runs x {info['steps']} steps, lockstep sweep ({info['threads']} threads): "
          f"{ns:.2f} ns/run-step", flush=True)
    return out


def environment():
    from dlnmomentum.sweeps import cuda as CE

    lines = [f"python {platform.python_version()}, numpy {np.__version__}"]
    try:
        import numba

        lines.append(f"numba {numba.__version__}")
    except ImportError:
        pass
    try:
        from importlib.metadata import version

        lines.append(f"numba-cuda {version('numba-cuda')}")
    except Exception:
        lines.append("numba-cuda: not installed as a distribution (numba's built-in numba.cuda)")
    ok, reason = CE.cuda_available()
    lines.append(f"cuda_available: {ok} ({reason})")
    return ok, reason, "; ".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="smaller agreement runs and a shorter benchmark")
    ap.add_argument("--json", help="also write the report to this file")
    ap.add_argument("--skip-agreement", action="store_true")
    ap.add_argument("--skip-benchmark", action="store_true")
    args = ap.parse_args(argv)
    import warnings

    warnings.simplefilter("ignore", UserWarning)  # d <= n warnings of the small problems
    warnings.filterwarnings("ignore", message=r".*[Gg]rid size.*")  # numba-cuda's low-occupancy note (warm-ups)
    ok, reason, env = environment()
    print(env, flush=True)
    if not ok or "simulator" in reason:
        print("no real CUDA GPU: nothing to check")
        return 2
    report = {"environment": env, "agreement": {}, "benchmark": {}}
    failures = []
    if not args.skip_agreement:
        print("\n== agreement with the CPU single-run kernel (relative difference, bitwise runs) ==")
        for name, case in agreement_cases(args.quick).items():
            rep = run_agreement(**case)
            report["agreement"][name] = rep
            print_agreement(name, rep)
            worst = max(r["max_rel"] for r in rep["fields"].values())
            if worst > 1e-12:
                failures.append(name)
        print("\nagreement:", "every field within 1e-12" if not failures else f"FAILED (> 1e-12) in {failures}")
    if not args.skip_benchmark:
        print(f"\n== speed (ns per run-step; goal <= {GOAL_NS} ns with every accumulator) ==", flush=True)
        report["benchmark"] = {k: {"ns_per_run_step": v[0], **v[1]} for k, v in run_benchmark(args.quick).items()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=float)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
