"""``dlnm sweep``: a (β, γ) grid of MGD/SMGD runs or a λ line of flows, optionally stored and resumed."""

import argparse
import logging
import os
import sys

import numba

from ..api import repair_left_open_sweep, resume_sweep, sweep
from ..runs.stepping import SCHEMES
from ..store.files import command
from ..store.kinds import resume_or_overwrite
from ..store.sweep_format import SweepFile
from ..sweeps.distributed import connect
from ..sweeps.networks import is_network_sweep
from ..sweeps.plan import DEFAULT_THEORY_TOL, config_differences, flow_scheme, flow_settings
from ..sweeps.plan import make_config as make_sweep_config
from ..validate import as_int
from .common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    add_adaptive_arguments,
    add_problem_arguments,
    grid_option,
    option_table,
    parse_int,
    print_sweep_json,
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
    # the client's own log of a lost scheduler (a traceback per reconnection attempt) is left out: the sweep
    # reports the loss itself, with what the store keeps and how to go on
    quiet = logging.getLogger("distributed.client")
    level = quiet.level
    quiet.setLevel(logging.CRITICAL)
    try:
        return _run(args, log, progress, client)
    finally:
        client.close()
        quiet.setLevel(level)


#: The options of ``dlnm sweep`` that define the sweep (its stored configuration): destination -> option.
DEFINING = {"gammas": "--gammas", "betas": "--betas", "lams": "--lams", "pairs": "--pairs", "steps": "--steps",
            "t_max": "--t-max", "scheme": "--scheme", "rtol": "--rtol", "atol": "--atol", "max_steps": "--max-steps",
            "reps": "--reps", "batch_size": "--batch-size",
            "replace": "--replace", "alpha": "--alpha", "tol": "--tol", "gradient": "--gradient", "theory": "--theory",
            "theory_tol": "--theory-tol", "data_seed": "--data-seed", "n": "--n", "d": "--d", "s": "--s",
            "mu": "--mu", "sigma": "--sigma", "n_test": "--n-test"}
_DATA = ("n", "d", "s", "mu", "sigma", "n_test")
#: Which options can make each key of a stored configuration differ (:func:`config_differences`).
_KEY_OPTIONS = {"kind": ("steps", "t_max", "lams", "gammas", "betas", "pairs", "batch_size"),
                "design": ("gammas", "betas", "lams", "pairs"), "seed": ("data_seed",), "spec": _DATA,
                "fingerprint": _DATA + ("data_seed",), "gammas": ("gammas", "pairs", "lams"),
                "betas": ("betas", "pairs"), "replace": ("replace", "batch_size")}


def _options_behind(given, differ):
    """The options of ``given`` that make the stored keys ``differ``: an option that is a differing key itself
    (``--batch-size`` for ``batch_size``) explains the keys it also changes (``kind``), so those name no more
    options; a key no option is itself names every given option that can change it."""
    named = [d for d in given if d in differ]
    for key in differ:
        candidates = [d for d in given if d in _KEY_OPTIONS.get(key, (key,))]
        if not any(d in named for d in candidates):
            named += [d for d in candidates if d not in named]
    return [d for d in given if d in named]


def _stored_arguments(config):
    """The arguments of :func:`dlnmomentum.sweep` that make the stored configuration ``config``."""
    get = config.get  # (stores of older versions may lack a key: the default it had)
    kw = dict(gammas=None, betas=None, lams=None, pairs=None, steps=get("steps"), t_max=get("t_max"),
              reps=get("reps", 1), batch_size=get("batch_size"), seed=get("seed", 0), tol=get("tol"),
              alpha=get("alpha", 0.01), replace=bool(get("replace", False)), gradient=get("gradient", "auto"),
              theory=bool(get("theory", False)), theory_tol=get("theory_tol", DEFAULT_THEORY_TOL),
              scheme=flow_scheme(config) if config["kind"] == "mgf" else "auto", **flow_settings(config))
    design = config.get("design") or ("line" if config["kind"] == "mgf" else "grid")
    if design == "pairs":
        kw["pairs"] = list(zip(config["gammas"], config["betas"], strict=True))
    else:
        kw.update({k: config[k] for k in {"grid": ("gammas", "betas"), "lam-grid": ("lams", "betas"),
                                          "line": ("lams",)}[design]})
    return kw


def _refuse_other_arguments(args, path):
    """``--resume`` continues the stored sweep as it is: options given with it that describe another sweep (9 gammas
    where 8 are stored, ``--batch-size 5`` on a full-batch sweep) are refused, named, before any work."""
    given = [d for d in DEFINING if d in getattr(args, "given", ())]
    if not given:
        return
    options = ", ".join(DEFINING[d] for d in given)
    how = (f"--resume continues the stored sweep as it is: drop them to continue it "
           f"({command('sweep', '--store', path, '--resume')}), or give another --store")
    if is_network_sweep(path):
        raise ValueError(f"--store {path} holds a network sweep, which {options} cannot describe; --resume "
                         f"continues the stored sweep as it is: continue it with "
                         f"{command('network', 'ARCHITECTURE', '--store', path, '--resume')}, or give another --store")
    stored, problem = SweepFile(path).read_config(action="resume")
    kw = _stored_arguments(stored)
    design = [d for d in ("gammas", "betas", "lams", "pairs") if d in given]
    if "pairs" in design:
        kw.update(gammas=None, betas=None, lams=None)
    elif design:
        kw["pairs"] = None
        if "lams" in design and "gammas" not in design:
            kw["gammas"] = None
        if "gammas" in design and "lams" not in design:
            kw["lams"] = None
    kw.update({d if d != "data_seed" else "seed": getattr(args, d) for d in given if d not in _DATA})
    spec = stored.get("spec")
    if spec is None:  # a sweep of a given Problem (Python API): the data options cannot describe it
        data = [d for d in given if d in _DATA]
        if data:
            raise ValueError(f"--store {path} holds a sweep of a given data set, which "
                             f"{', '.join(DEFINING[d] for d in data)} cannot describe; {how}")
    else:
        spec = dict(spec, **{d: getattr(args, d) for d in given if d in _DATA})
    try:
        requested, _ = make_sweep_config(spec if spec is not None else problem, **kw)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"--store {path} holds another sweep than {options} describe ({exc}); {how}") from None
    differ = config_differences(stored, requested)
    named = _options_behind(given, differ)
    if named:
        raise ValueError(f"--store {path} holds a sweep made with other arguments: "
                         f"{', '.join(DEFINING[d] for d in named)} {'differs' if len(named) == 1 else 'differ'} "
                         f"from the stored sweep (in {', '.join(differ)}); {how}")


def _run(args, log, progress, client):
    resume_or_overwrite(args.resume, args.overwrite, ("--resume", "--overwrite"))  # (--resume won: store kept)
    if args.resume and args.store and os.path.exists(args.store):
        repair_left_open_sweep(args.store)  # (before the stored configuration is read to compare the options)
        _refuse_other_arguments(args, args.store)
        result = resume_sweep(args.store, progress=progress, block_size=args.block_size, log=log,
                              wave_size=args.wave_size, device=args.device, client=client)
    else:
        if args.lams is None and args.pairs is None and (args.gammas is None or args.betas is None):
            raise ValueError("dlnm sweep needs --gammas and --betas, --lams (with --betas: constant-lambda lines "
                             "of MGD), or --pairs, or --resume with an existing --store")
        if args.theory_tol is not None and not args.theory:  # (it was ignored: no prediction is computed)
            raise ValueError("--theory-tol is the train loss under which --theory counts a point as converged: give "
                             "--theory with it, or leave it out")
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
                       client=client, scheme=args.scheme, rtol=args.rtol, atol=args.atol, max_steps=args.max_steps)
    if args.json:
        print_sweep_json(result)
    else:
        print(result.summary())
    if getattr(result, "interrupted", False):
        print(f"dlnm sweep: interrupted; {int(result.done.sum())}/{result.done.size} points done"
              + (f"; continue with: {command('sweep', '--resume', '--store', result.path)}" if result.path else ""),
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _pairs(text):
    """``--pairs 'g/b,g/b'``: a list of (gamma, beta); a malformed entry is named."""
    out = []
    items = str(text).split(",")
    for i, item in enumerate(items):
        if not item.strip():  # "0.01/0.9,,0.1/0": a pair left out is not dropped silently
            raise argparse.ArgumentTypeError(f"--pairs must be 'gamma/beta,gamma/beta,...'; got {text!r} (pair "
                                             f"{i + 1} of {len(items)} is empty)")
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
    p.add_argument("--scheme", choices=("auto",) + SCHEMES, default="auto",
                   help="stepper of a flow sweep, as dlnm flow --scheme (default auto: per lambda)")
    add_adaptive_arguments(p)  # (a flow sweep's adaptive points, as dlnm flow's; kept in --store, used by --resume)
    p.add_argument("--reps", type=parse_int, default=1, help="data replications (default 1)")
    p.add_argument("--batch-size", type=parse_int, default=None, help="SMGD batch size (default: full batch)")
    p.add_argument("--replace", action="store_true", help="SMGD batches with replacement")
    p.add_argument("--alpha", type=float, default=0.01, help="initialisation scale u0 = alpha, v0 = 0")
    p.add_argument("--tol", type=float, default=None, help="stop a run when its train loss is <= tol (status "
                   "converged); without it every run uses its whole budget and none reports converged")
    p.add_argument("--gradient", choices=("auto", "hessian", "data"), default="auto",
                   help="how full-batch gradients are computed (same result up to rounding): hessian H theta - b "
                   "(d^2 per gradient), data X^T (X theta - y)/n (2nd), auto the cheaper of the two (default)")
    p.add_argument("--theory", action="store_true", help="compute Theorem 2's prediction gap and the "
                   "normalized distance for converged points")
    p.add_argument("--theory-tol", type=float, default=None, help="with --theory: points that end with a "
                   "train loss <= this count as converged (default 1e-8)")
    p.add_argument("--store", default=None, help="HDF5 file to stream the sweep to")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted sweep in --store (its stored "
                   "configuration is used); starts it if the file does not exist")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --store")
    p.add_argument("--block-size", type=parse_int, default=None, help="runs per parallel block (multiple of 8)")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="cpu: lockstep SIMD engine on all cores (default); cuda: one warp per run on an NVIDIA "
                   "GPU (discrete sweeps; needs numba-cuda)")
    p.add_argument("--threads", type=parse_int, default=None, help="number of threads (default: all cores)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the points on the Dask cluster of this scheduler (e.g. tcp://host:8786; start it "
                   "with `dask scheduler` and `dask worker ADDRESS`); this process writes --store. Needs the "
                   "distributed extra")
    p.add_argument("--wave-size", type=parse_int, default=None, help="points written to the store together, "
                   "rounded up to whole blocks (--block-size; default: about 20 s of work); with --scheduler: points "
                   "per task (default: about 8 tasks per worker)")
    p.add_argument("--log", action="store_true", help="print a line to stderr after every written wave")
    p.add_argument("--json", action="store_true", help="print JSON: the summary and, without --store (where "
                   "the points would be lost), every point's fields with the coordinates")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_problem_arguments(p)
    p.set_defaults(func=_cmd_sweep, options=option_table(p, seed="--data-seed"))
