"""``dlnm flow``: one MGF(λ) or gradient-flow run."""

from ..api import gf, mgf
from ..runs.flow_adaptive import ACCEPTED_RECORDS, GRID_RECORDS, TIME_RECORDS
from .common import (
    add_adaptive_arguments,
    add_checkpoint_argument,
    add_problem_arguments,
    add_record_arguments,
    option_table,
    print_result,
    problem_from_args,
    progress_wanted,
    record_from_args,
    rows_left_in_store,
)


def _cmd_flow(args):
    problem = problem_from_args(args)
    refine = None if args.no_refine_start else "auto"
    if args.gf and args.lam is not None:
        raise ValueError(f"--gf is gradient flow (lambda = 0) and --lam {args.lam:g} asks for MGF(lambda): give one "
                         "of them")
    with rows_left_in_store() as stored:  # (a stored run's rows are not read back: it prints none of them)
        result = _flow(args, problem, refine)
    code = print_result(result, args, problem, theorem=1, stored=stored)
    return code


def _flow(args, problem, refine):
    if args.gf:
        result = gf(problem, t_max=args.t_max, h=args.h, alpha=args.alpha, tol=args.tol,
                    record=record_from_args(args), progress=progress_wanted(args),
                    refine_start=refine, store=args.store, overwrite=args.overwrite,
                    checkpoint_every=args.checkpoint_every, scheme=args.scheme, rtol=args.rtol, atol=args.atol,
                    max_steps=args.max_steps)
    else:
        if args.lam is None:
            raise ValueError("dlnm flow needs --lam LAMBDA (MGF(lambda)) or --gf (gradient flow)")
        result = mgf(problem, args.lam, t_max=args.t_max, h=args.h, alpha=args.alpha, tol=args.tol,
                     record=record_from_args(args), progress=progress_wanted(args),
                     refine_start=refine, store=args.store, overwrite=args.overwrite,
                     checkpoint_every=args.checkpoint_every, scheme=args.scheme, rtol=args.rtol, atol=args.atol,
                     max_steps=args.max_steps)
    return result


def register(subparsers):
    """Add the ``dlnm flow`` sub-command."""
    p = subparsers.add_parser(
        "flow", help="integrate momentum gradient flow MGF(lambda) or gradient flow (RK4, exponential RK4, Rodas5P, "
                     "NDF)",
        description="Integrate MGF(lambda): lambda w'' + w' + grad F(w) = 0 (or gradient flow with --gf) "
                    "on a 2-layer diagonal linear network, with the paper's integrals and every sign crossing of w+ "
                    "and w-, and print a summary. Schemes (--scheme): fixed-step RK4; an exponential RK4 that "
                    "integrates the fast mode -1/lambda exactly (small lambda); or the adaptive schemes for long "
                    "horizons (runs to --tol 1e-20 at t ~ 1e5-1e6 in one to two thousand steps): rodas, the "
                    "Rosenbrock method Rodas5P (MGF started by the explicit DOP853 while it is not stiff), and, for "
                    "gradient flow only, ndf, a variable-order NDF (about twice as "
                    "fast there). "
                    "auto (the default) takes an adaptive one (ndf for gradient flow, rodas for MGF) with --tol or a "
                    "long --t-max, else the cheaper fixed-step one.")
    # (it said "lambda > 0", but 0 is accepted: MGF(0) is gradient flow, as the library's mgf takes it)
    p.add_argument("--lam", type=float, default=None, help="lambda of MGF(lambda), >= 0 (0: gradient flow, as --gf)")
    p.add_argument("--gf", action="store_true", help="gradient flow (lambda = 0) instead of MGF")
    p.add_argument("--t-max", type=float, required=True, help="end time > 0")
    p.add_argument("--h", type=float, default=None, help="fixed grid step of rk4/exp-rk4 (default: from lambda and the "
                   "curvature)")
    p.add_argument("--alpha", type=float, default=0.01, help="initialisation scale (u0 = alpha, v0 = 0)")
    p.add_argument("--tol", type=float, default=None, help="stop when the train loss is <= tol (status converged; "
                   "without it a run ends at --t-max, status max_steps; with rodas or ndf, a tol below the loss's "
                   "float64 rounding floor ends the run 'stalled' there)")
    p.add_argument("--no-refine-start", action="store_true", help="no refined steps at the start")
    p.add_argument("--scheme", choices=("auto", "rk4", "exp-rk4", "rodas", "ndf"), default="auto",
                   help="stepper: classic RK4, the exponential RK4 (the fast mode -1/lambda exactly: a step set by "
                        "the gradient time scale, for small lambda), rodas (adaptive, L-stable: long horizons), ndf "
                        "(adaptive multistep, gradient flow only: long horizons) or auto (ndf for gradient flow, "
                        "rodas for MGF, with --tol or a long --t-max, else the cheaper fixed-step one; default)")
    add_adaptive_arguments(p)
    add_record_arguments(p, float, "record every T time units (T > 0)", accepted=True)
    p.add_argument("--store", default=None, help="stream the run to this HDF5 file")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --store file")
    add_checkpoint_argument(p)
    p.add_argument("--theory", action="store_true", help="also print Theorem 1's prediction gap and the normalized "
                   "distance to GF(Delta_inf)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_problem_arguments(p)
    # (the API's record phrases and refine_start as the options that give them)
    p.set_defaults(func=_cmd_flow, options=option_table(
        p, every="--record-every", log="--record-log", refine_start="--no-refine-start",
        **{TIME_RECORDS: "--record-every or --record-log", ACCEPTED_RECORDS: "--record-accepted",
           GRID_RECORDS: "--record-every equal to --h"}))
