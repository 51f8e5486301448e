"""``dlnm run``: one heavy-ball MGD / SMGD run."""

from ..api import mgd
from .common import (
    add_checkpoint_argument,
    add_problem_arguments,
    add_record_arguments,
    option_table,
    parse_int,
    print_result,
    problem_from_args,
    progress_wanted,
    record_from_args,
    rows_left_in_store,
    seed_option,
)


def _cmd_run(args):
    problem = problem_from_args(args)
    with rows_left_in_store() as stored:  # (a stored run's rows are not read back: it prints none of them)
        result = mgd(problem, args.gamma, args.beta, steps=args.steps, alpha=args.alpha, batch_size=args.batch_size,
                     replace=args.replace, seed=args.seed, tol=args.tol, record=record_from_args(args),
                     progress=progress_wanted(args), store=args.store,
                     overwrite=args.overwrite, checkpoint_every=args.checkpoint_every)
    code = print_result(result, args, problem, theorem=2, stored=stored)
    return code


def register(subparsers):
    """Add ``dlnm run``."""
    run = subparsers.add_parser("run", help="run heavy-ball MGD / SMGD", description="Run heavy-ball MGD or SMGD "
                         "(w_{k+1} = w_k - gamma grad F(w_k) + beta (w_k - w_{k-1})) and print a summary.")
    run.add_argument("--gamma", type=float, required=True, help="step size gamma > 0")
    run.add_argument("--beta", type=float, required=True, help="momentum beta in [0, 1)")
    run.add_argument("--steps", type=parse_int, required=True, help="number of updates, e.g. 1e6")
    run.add_argument("--alpha", type=float, default=0.01, help="initialisation scale (u0 = alpha, v0 = 0)")
    run.add_argument("--batch-size", type=parse_int, default=None, help="SMGD batch size in [1, n] (default: full)")
    run.add_argument("--replace", action="store_true", help="sample batches with replacement")
    run.add_argument("--seed", type=seed_option("--seed"), default=0, help="seed of the batch sampling")
    run.add_argument("--tol", type=float, default=None, help="stop when the train loss is <= tol (status "
                     "converged); without it a run always uses its whole budget and never reports converged")
    add_record_arguments(run, parse_int, "record every K steps (K >= 1)")
    run.add_argument("--store", default=None, help="stream the run to this HDF5 file")
    run.add_argument("--overwrite", action="store_true", help="replace an existing --store file")
    add_checkpoint_argument(run)
    run.add_argument("--theory", action="store_true", help="also print Theorem 2's prediction gap")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_problem_arguments(run)
    run.set_defaults(func=_cmd_run, options=option_table(run, every="--record-every", log="--record-log"))
