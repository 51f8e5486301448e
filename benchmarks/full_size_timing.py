"""Time the sweeps behind ``dlnm reproduce --full``, one design per process, each pinned to its own 2 cores.

``dlnm reproduce --full`` computes a handful of sweeps (``dlnmomentum.figures.designs``; figures that share a
sweep compute it once) and two network grids; drawing takes seconds. This script times each of them at the
paper's size in its own process with ``NUMBA_NUM_THREADS=2`` and, where ``taskset`` exists, two dedicated cores,
so that a machine with 2·k cores measures k of them side by side as a 2-core machine would run them one after
the other (the sum is the 2-core estimate of the whole). Sweeps are resumable: a job cut short by ``--limit``
continues where it stopped the next time (its time adds up; the JSON lines say what was done when).

    python benchmarks/full_size_timing.py --out full-timing [--limit 540] [--jobs mgd-grid,mgf,...]

Prints one JSON line per job: its name, seconds, whether it finished, and the status counts of its sweeps.
"""

import argparse
import json
import os
import subprocess
import sys
import time

JOBS = {
    "mgd-grid": "designs.mgd_grid(parts, 'full', log)",
    "mgd-lines-mu1": "designs.mgd_lines(parts, 'full', log, 1.0)",
    "mgd-lines-mu0": "designs.mgd_lines(parts, 'full', log, 0.0)",
    "mgd-lines-mu0.5": "designs.mgd_lines(parts, 'full', log, 0.5)",
    "mgd-lines-mu1.5": "designs.mgd_lines(parts, 'full', log, 1.5)",
    "mgf": ("[designs.mgf_line(parts, 'full', log, mu) for mu in (1.0, 0.0, 0.5, 1.5)] + "
            "[designs.mgf_on_grid(parts, 'full', log)]"),
    "teacher-student": "compute_figure('teacher-student', 'full', out, log=log)",
    "deep-linear": "compute_figure('deep-linear', 'full', out, log=log)",
}

CHILD = """
import json, sys, time
from dlnmomentum.figures import compute_figure, designs
out, name, code = sys.argv[1], sys.argv[2], sys.argv[3]
parts = out + '/parts'
lines = []
log = lambda line: lines.append(str(line))
t0 = time.perf_counter()
eval(code)
print(json.dumps({'job': name, 'seconds': round(time.perf_counter() - t0, 1), 'finished': True,
                  'log': [x for x in lines if 'points' in x][:12]}), flush=True)
"""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="full-timing", help="folder of the stores (parts/ inside; resumable)")
    parser.add_argument("--limit", type=float, default=None, help="stop every job after this many seconds")
    parser.add_argument("--jobs", default=",".join(JOBS), help="comma-separated jobs (default: all)")
    args = parser.parse_args(argv)
    os.makedirs(os.path.join(args.out, "parts"), exist_ok=True)
    names = [j for j in args.jobs.split(",") if j]
    cores = os.cpu_count() or 2
    procs = []
    for k, name in enumerate(names):
        env = dict(os.environ, NUMBA_NUM_THREADS="2", OMP_NUM_THREADS="1", MPLBACKEND="Agg")
        cmd = [sys.executable, "-c", CHILD, args.out, name, JOBS[name]]
        pin = [str((2 * k) % cores), str((2 * k + 1) % cores)]
        if 2 * len(names) <= cores and subprocess.run(["which", "taskset"], capture_output=True).returncode == 0:
            cmd = ["taskset", "-c", ",".join(pin)] + cmd
        procs.append((name, time.perf_counter(), subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                                                   stderr=subprocess.PIPE, text=True)))
    for name, t0, proc in procs:
        try:
            left = None if args.limit is None else max(1.0, args.limit - (time.perf_counter() - t0))
            out, err = proc.communicate(timeout=left)
            print(out.strip() or json.dumps({"job": name, "error": err[-2000:]}), flush=True)
        except subprocess.TimeoutExpired:
            proc.terminate()  # a sweep stops cleanly between chunks on SIGTERM and keeps its finished points
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
            print(json.dumps({"job": name, "seconds": round(time.perf_counter() - t0, 1), "finished": False}),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
