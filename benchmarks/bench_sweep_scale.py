"""Scaling of the sweep layer in the number of points: short runs, so that the kernels do not hide the rest.

For a (β, γ) grid × 5 data sets (n=20, d=30, ``steps=20``) written to a sweep store, each size reports the wall time
split into planning, store creation, the kernels (``run_wave``), the point fields (``finish_points``), the store
writes, the final read (``open_sweep``), and then the file size, the peak RSS of the process, resuming the
finished store (the scan of ``done``), ``Sweep.to_xarray()``, ``.mean("rep")``, ``xarray.open_dataset`` and
``dlnm inspect`` on it. Every size runs in a fresh process, so that its peak RSS is its own.

Targets (no absolute times, which depend on the machine): the time per point of the work outside the kernels
grows by at most 2× from the smallest to the largest size (nothing super-linear), and the peak RSS stays under
6× the bytes of the result arrays plus a fixed 400 MB (the interpreter, Numba and its kernels): a wave's lane
state is bounded (``lockstep.WAVE_STATE_BYTES``) instead of growing with the sweep.

Default sizes (1e3, 1e4 points) run in well under a minute; ``DLNM_BENCH_SWEEP_SIZES=1000,10000,100000,450000``
sets others. ``DLNM_BENCH_SWEEP_DESIGN=pairs`` runs one line of (γ, β) pairs instead (one data set, the same number
of points): a sweep whose chunks lie along one long line, which every wave touches.

Run: ``python -m pytest benchmarks/bench_sweep_scale.py --benchmark-only -s``
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

SIZES = [int(float(s)) for s in os.environ.get("DLNM_BENCH_SWEEP_SIZES", "1000,10000").split(",")]
DESIGN = os.environ.get("DLNM_BENCH_SWEEP_DESIGN", "grid")
STEPS = 20
REPS = 5
FIXED_RSS_MB = 400.0
RSS_PER_RESULT = 6.0
GROWTH = 2.0

_SCRIPT = textwrap.dedent(r"""
    import functools, json, os, resource, subprocess, sys, time
    import numpy as np
    import dlnmomentum as dm
    from dlnmomentum.store import sweep_format as SF
    from dlnmomentum import api
    from dlnmomentum.sweeps import execute as EX, lockstep as LS

    T = {}
    def timed(obj, name, key):
        f = getattr(obj, name)
        @functools.wraps(f)
        def w(*a, **k):
            t = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                T[key] = T.get(key, 0.0) + time.perf_counter() - t
        setattr(obj, name, w)

    for obj, name, key in [(api, "make_sweep_config", "plan"), (SF.SweepFile, "create", "create"),
                           (SF.SweepFile, "read", "read"), (LS.LockstepEngine, "run_wave", "kernels"),
                           (LS.LockstepEngine, "finish_points", "fields"), (SF.SweepFile, "write_points", "write"),
                           (EX, "open_sweep", "open_sweep")]:
        timed(obj, name, key)
    npoints, steps, reps, path, design = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    side = max(1, round((npoints / reps) ** 0.5))
    spec = dict(n=20, d=30, s=5)
    dm.sweep(spec, gammas=[0.01], betas=[0.5], steps=2, progress=False)  # (loads the compiled kernel)
    if design == "pairs":  # one line of pairs, one data set
        design_kw = dict(pairs=list(zip(np.geomspace(1e-3, 3e-2, npoints), np.linspace(0.0, 0.9, npoints))))
    else:
        design_kw = dict(gammas=np.geomspace(1e-3, 3e-2, side), betas=np.linspace(0.0, 0.9, side), reps=reps)
    T.clear()
    t0 = time.perf_counter()
    sw = dm.sweep(spec, **design_kw, steps=steps, store=path, progress=False)
    out = {"points": int(sw.done.size), "total": time.perf_counter() - t0, **T,
           "result_MB": sum(a.nbytes for a in sw.data.values()) / 1e6, "file_MB": os.path.getsize(path) / 1e6,
           "peak_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    del sw
    def clock(key, fn):
        t = time.perf_counter()
        value = fn()
        out[key] = time.perf_counter() - t
        return value
    clock("resume_done", lambda: dm.resume_sweep(path, progress=False))
    s2 = clock("reopen", lambda: dm.open_sweep(path))
    clock("to_xarray", s2.to_xarray)
    clock("mean_rep", lambda: s2.mean("rep"))
    import xarray as xr
    def xr_load():
        with xr.open_dataset(path, engine="h5netcdf") as ds:
            ds.load()
    clock("xr_open_load", xr_load)
    cli = "import sys; from dlnmomentum.cli import main; sys.exit(main())"
    rc = clock("inspect", lambda: subprocess.run([sys.executable, "-c", cli, "inspect", path],
                                                 capture_output=True).returncode)
    out["inspect_rc"] = rc
    print("RESULT " + json.dumps(out))
""")


def _measure(npoints, tmp_path):
    path = str(tmp_path / f"sweep_{npoints}.h5")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, str(npoints), str(STEPS), str(REPS), path, DESIGN],
                          capture_output=True, text=True, env=dict(os.environ), check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line is not None, proc.stderr[-3000:]
    return json.loads(line[len("RESULT "):])


_results = {}


@pytest.mark.parametrize("npoints", SIZES)
def test_sweep_scale(benchmark, npoints, machine, tmp_path):
    out = benchmark.pedantic(lambda: _measure(npoints, tmp_path), rounds=1, iterations=1)
    _results[npoints] = out
    benchmark.extra_info.update(machine=machine, **out)
    outside = out["total"] - out.get("kernels", 0.0)
    print(f"\n{DESIGN}: {out['points']} points x {STEPS} steps: total {out['total']:.2f} s = "
          f"plan {out.get('plan', 0):.3f} + "
          f"create {out.get('create', 0):.2f} + read {out.get('read', 0):.2f} + kernels {out.get('kernels', 0):.2f} + "
          f"fields {out.get('fields', 0):.2f} + write {out.get('write', 0):.2f} + open_sweep "
          f"{out.get('open_sweep', 0):.2f}; outside the kernels {outside / out['points'] * 1e6:.1f} us/point; "
          f"file {out['file_MB']:.1f} MB, result {out['result_MB']:.1f} MB, peak RSS {out['peak_rss_MB']:.0f} MB; "
          f"resume (done) {out['resume_done']:.2f} s, reopen {out['reopen']:.2f} s, "
          f"to_xarray {out['to_xarray']:.2f} s, "
          f"mean {out['mean_rep']:.3f} s, xarray open+load {out['xr_open_load']:.2f} s, inspect {out['inspect']:.2f} s "
          f"[{machine}]")
    assert out["inspect_rc"] == 0
    assert out["peak_rss_MB"] <= FIXED_RSS_MB + RSS_PER_RESULT * out["result_MB"]
    if len(_results) > 1:
        small = _results[min(_results)]
        per = [(r["total"] - r.get("kernels", 0.0)) / r["points"] for r in (small, out)]
        # (the smallest size's fixed costs make its per-point time an upper bound: growth is measured against it)
        assert per[1] <= GROWTH * per[0]
