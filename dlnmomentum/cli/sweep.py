"""``dlnm sweep``: a (β, γ) grid of MGD/SMGD runs or a λ line of flows, optionally stored and resumed."""

import argparse
import os
import sys

import numba

from ..api import resume_sweep, sweep
from ..sweeps.distributed import connect
from ..validate import as_int
from .common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    add_problem_arguments,
    grid_option,
    parse_int,
    print_json,
    problem_from_args,
    progress_wanted,
)


def _cmd_sweep(args):
    log = None
    if args.log:
        def log(line):
            print(f"[dlnm sweep] {line}", file=sys.stderr, flush=True)

    progress = progress_wanted(args)
    if args.threads is not None:
        if args.scheduler is not None:
            raise ValueError("--threads sets the threads of this machine; with --scheduler every Dask worker uses "
                             "the cores of its host shared by its worker processes (NUMBA_NUM_THREADS of the "
                             "worker caps them)")
        numba.set_num_threads(as_int("threads", args.threads, low=1, high=numba.config.NUMBA_NUM_THREADS))
    if args.scheduler is None:
        return _run(args, log, progress, None)
    client = connect(args.scheduler)
    try:
        return _run(args, log, progress, client)
    finally:
        client.close()


def _run(args, log, progress, client):
    if args.resume and args.store and os.path.exists(args.store):
        result = resume_sweep(args.store, progress=progress, block_size=args.block_size, log=log,
                              wave_size=args.wave_size, device=args.device, client=client)
    else:
        if args.lams is None and args.pairs is None and (args.gammas is None or args.betas is None):
            raise ValueError("dlnm sweep needs --gammas and --betas, --lams (with --betas: constant-lambda lines "
                             "of MGD), or --pairs, or --resume with an existing --store")
        spec = {"n": args.n, "d": args.d, "s": args.s, "mu": args.mu, "sigma": args.sigma,
                "n_test": args.n_test}
        problem_from_args(args)  # validates the data arguments
        result = sweep(spec, gammas=args.gammas, betas=args.betas, lams=args.lams, pairs=args.pairs,
                       steps=args.steps,
                       t_max=args.t_max, reps=args.reps, batch_size=args.batch_size, seed=args.data_seed,
                       store=args.store, tol=args.tol, progress=progress, alpha=args.alpha,
                       replace=args.replace, gradient=args.gradient, block_size=args.block_size,
                       theory=args.theory, theory_tol=args.theory_tol, overwrite=args.overwrite,
                       resume=args.resume, log=log, wave_size=args.wave_size, device=args.device,
                       client=client, scheme=args.scheme)
    if args.json:
        out = {"complete": result.complete, "interrupted": bool(getattr(result, "interrupted", False)),
               "done": int(result.done.sum()), "points": int(result.done.size), "store": result.path}
        print_json(out)
    else:
        print(result.summary())
    if getattr(result, "interrupted", False):
        print(f"dlnm sweep: interrupted; {int(result.done.sum())}/{result.done.size} points done"
              + (f"; continue with: dlnm sweep --resume --store {result.path}" if result.path else ""),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _pairs(text):
    """``--pairs 'g/b,g/b'``: a list of (gamma, beta); a malformed entry is named."""
    out = []
    for item in str(text).split(","):
        if not item.strip():
            continue
        parts = item.split("/")
        try:
            if len(parts) != 2:
                raise ValueError
            out.append((float(parts[0]), float(parts[1])))
        except ValueError:
            raise argparse.ArgumentTypeError(f"--pairs must be 'gamma/beta,gamma/beta,...'; got {item.strip()!r} "
                                             "in it") from None
    if not out:
        raise argparse.ArgumentTypeError("--pairs must name at least one gamma/beta pair")
    return out


def register(subparsers):
    """Add ``dlnm sweep``."""
    p = subparsers.add_parser(
        "sweep", help="run a (beta, gamma) grid of MGD/SMGD runs (or a lambda line of flows) over data reps",
        description="Run MGD/SMGD over a (beta, gamma) grid, in lockstep on all cores, for --reps data sets "
                    "(rep r: data seed --data-seed + r), optionally streamed to a resumable HDF5 store. "
                    "Grids: 'start:stop:num' (linear), 'start:stop:num:log' (geometric) or 'a,b,c'. "
                    "Example: dlnm sweep --gammas 1e-3:1e-1:20:log --betas 0:0.95:20 --steps 1e6 --reps 5 "
                    "--store f.h5")
    p.add_argument("--gammas", type=grid_option("--gammas"), default=None, help="step sizes gamma")
    p.add_argument("--betas", type=grid_option("--betas"), default=None, help="momenta beta in [0, 1)")
    p.add_argument("--lams", type=grid_option("--lams"), default=None,
                   help="lambda values of a flow sweep (0 = gradient flow); with --betas and --steps: MGD on "
                   "constant-lambda lines, gamma = lambda (1-beta)^2")
    p.add_argument("--pairs", type=_pairs, default=None,
                   help="MGD points as 'gamma/beta,gamma/beta,...' (e.g. 0.01/0.9,0.1/0)")
    p.add_argument("--steps", type=parse_int, default=None, help="updates per discrete run, e.g. 1e6")
    p.add_argument("--t-max", type=float, default=None, help="end time of a flow sweep")
    p.add_argument("--scheme", choices=("auto", "rk4", "exp-rk4"), default="auto",
                   help="stepper of a flow sweep, as dlnm flow --scheme (default auto: per lambda)")
    p.add_argument("--reps", type=int, default=1, help="data replications (default 1)")
    p.add_argument("--batch-size", type=int, default=None, help="SMGD batch size (default: full batch)")
    p.add_argument("--replace", action="store_true", help="SMGD batches with replacement")
    p.add_argument("--alpha", type=float, default=0.01, help="initialisation scale u0 = alpha, v0 = 0")
    p.add_argument("--tol", type=float, default=None, help="stop a run when its train loss is <= tol")
    p.add_argument("--gradient", choices=("auto", "hessian", "data"), default="auto", help="gradient form")
    p.add_argument("--theory", action="store_true", help="compute Theorem 2's prediction gap and the "
                   "normalized distance for converged points")
    p.add_argument("--theory-tol", type=float, default=1e-8, help="with --theory: points that end with a "
                   "train loss <= this count as converged (default 1e-8)")
    p.add_argument("--store", default=None, help="HDF5 file to stream the sweep to")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted sweep in --store (its stored "
                   "configuration is used); starts it if the file does not exist")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --store")
    p.add_argument("--block-size", type=int, default=None, help="runs per parallel block (multiple of 8)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu: lockstep SIMD engine on all cores (default); cuda: one warp per run on an NVIDIA "
                   "GPU (discrete sweeps; needs numba-cuda)")
    p.add_argument("--threads", type=int, default=None, help="number of threads (default: all cores)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the points on the Dask cluster of this scheduler (e.g. tcp://host:8786; start it "
                   "with `dask scheduler` and `dask worker ADDRESS`); this process writes --store. Needs the "
                   "distributed extra")
    p.add_argument("--wave-size", type=int, default=None, help="points written to the store together "
                   "(default: about 20 s of work); with --scheduler: points per task (default: about 8 tasks "
                   "per worker)")
    p.add_argument("--log", action="store_true", help="print a line to stderr after every written wave")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_problem_arguments(p)
    p.set_defaults(func=_cmd_sweep)
