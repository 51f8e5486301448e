"""End-to-end ``dlnmomentum.sweep(..., device="cuda")`` on a GPU machine: the same Sweep as the CPU engine.

Run from the repository root (the package need not be installed)::

    PYTHONPATH=. python3 benchmarks/cuda_sweep_check.py [--steps 100000] [--side 20] [--reps 5]

Runs the paper's Figure-4 grid (γ log-spaced in [1e-3, 1e-1], β in [0, 0.95]) over ``reps`` data sets
with the CPU lockstep engine (all cores) and with the CUDA engine, both through ``dlnmomentum.sweep``
(planning, waves, point fields included), prints the wall time of each and checks that every field of
every point is equal bit for bit; also an SMGD grid (B = 5) and a store interrupted on the GPU and
resumed on the CPU.
"""

import argparse
import os
import signal
import sys
import tempfile
import time

import numpy as np

import dlnmomentum as dm

SPEC = dict(n=20, d=30, s=5, n_test=1000)


def _timed(**kw):
    t0 = time.perf_counter()
    sw = dm.sweep(SPEC, **kw)
    return sw, time.perf_counter() - t0


def _same(a, b):
    return [name for name in a.fields if not np.array_equal(a[name], b[name], equal_nan=True)]


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--side", type=int, default=20)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    grid = dict(gammas=f"1e-3:1e-1:{args.side}:log", betas=f"0:0.95:{args.side}", steps=args.steps, reps=args.reps)
    dm.sweep(SPEC, gammas=[0.01], betas=[0.5], steps=10, device="cuda")  # compile the GPU kernel
    dm.sweep(SPEC, gammas=[0.01], betas=[0.5], steps=10)                 # and the CPU one
    points = args.side * args.side * args.reps
    gpu, t_gpu = _timed(**grid, device="cuda")
    cpu, t_cpu = _timed(**grid)
    status = {s.label: int((cpu.status == s).sum()) for s in dm.Status if (cpu.status == s).any()}
    print(f"grid {args.side}x{args.side} x {args.reps} reps x {args.steps} steps ({points} points; CPU outcome "
          f"{status}): cpu {t_cpu:.2f} s ({t_cpu / (points * args.steps) * 1e9:.2f} ns/run-step), "
          f"cuda {t_gpu:.2f} s ({t_gpu / (points * args.steps) * 1e9:.3f} ns/run-step), speed-up {t_cpu / t_gpu:.0f}x")
    print(f"  fields not bitwise equal: {_same(gpu, cpu) or 'none'}")
    smgd = dict(grid, steps=max(args.steps // 10, 1000), batch_size=5)
    gs, tg = _timed(**smgd, device="cuda")
    cs, tc = _timed(**smgd)
    print(f"smgd B=5, {smgd['steps']} steps: cpu {tc:.2f} s, cuda {tg:.2f} s; fields not bitwise equal: "
          f"{_same(gs, cs) or 'none'}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "g.h5")
        small = dict(grid, steps=max(args.steps // 10, 1000))

        def stop(line):
            os.kill(os.getpid(), signal.SIGINT)

        part = dm.sweep(SPEC, **small, store=path, wave_size=64, log=stop, device="cuda")
        done = int(part.done.sum())
        resumed = dm.resume_sweep(path)
        ref = dm.sweep(SPEC, **small)
        print(f"store: interrupted on the GPU with {done}/{part.done.size} points, resumed on the CPU: "
              f"complete {resumed.complete}; fields not bitwise equal: {_same(resumed, ref) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
