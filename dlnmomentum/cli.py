"""Command line interface ``dlnm``.

Sub-commands are contributed by the modules that implement them: each module
listed in ``_COMMAND_MODULES`` may define ``register_cli(subparsers)`` adding
its parsers with ``set_defaults(func=...)``.
"""

import argparse
import importlib
import json
import sys

import numpy as np

from .store_files import to_jsonable

_COMMAND_MODULES = ("dlnmomentum.flow", "dlnmomentum.store", "dlnmomentum.sweep")


def add_problem_arguments(parser):
    """The sparse-regression generator options shared by every sub-command."""
    g = parser.add_argument_group("problem (sparse regression, x ~ N(mu 1, sigma^2 I), y = <x, theta*>)")
    g.add_argument("--n", type=int, default=20, help="number of training samples (default 20)")
    g.add_argument("--d", type=int, default=30, help="dimension (default 30)")
    g.add_argument("--s", type=int, default=5, help="sparsity of theta* (default 5)")
    g.add_argument("--mu", type=float, default=1.0, help="mean of the inputs (default 1)")
    g.add_argument("--sigma", type=float, default=1.0, help="std of the inputs (default 1)")
    g.add_argument("--n-test", type=int, default=1000, help="test samples (default 1000)")
    g.add_argument("--data-seed", type=int, default=0, help="seed of the data (default 0)")


def problem_from_args(args):
    from .problem import sparse_regression

    return sparse_regression(n=args.n, d=args.d, s=args.s, mu=args.mu, sigma=args.sigma, n_test=args.n_test,
                             seed=args.data_seed)


def parse_int(text):
    """Integers written as 1e6 or 1_000_000 are accepted."""
    value = float(text)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(value)


def record_from_args(args):
    from .record import Record

    if getattr(args, "record_log", None):
        return Record(log=args.record_log)
    if getattr(args, "record_every", None):
        return Record(every=args.record_every)
    return None


def _cmd_run(args):
    from .mgd import mgd

    problem = problem_from_args(args)
    result = mgd(problem, args.gamma, args.beta, steps=args.steps, alpha=args.alpha, batch_size=args.batch_size,
                 replace=args.replace, seed=args.seed, tol=args.tol, record=record_from_args(args),
                 progress=not args.no_progress and sys.stderr.isatty(), store=args.store,
                 overwrite=args.overwrite, checkpoint_every=args.checkpoint_every)
    if args.json:
        out = to_jsonable(result.to_dict())
        out["status_name"] = result.status_name
        out["message"] = result.message
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(problem.summary())
        print(result.summary())
        if args.theory:
            print(f"prediction gap (Thm 2)      : {result.prediction_gap:.3e}")
            print(f"normalized distance to GF_D : {result.normalized_distance:.3e}")
    return 0 if result.status_name in ("converged", "max_steps") else 1


def _cmd_theory(args):
    from . import theory

    if args.what == "lam":
        out = {"gamma": args.gamma, "beta": args.beta, "lam": theory.lam(args.gamma, args.beta),
               "eps": theory.eps(args.gamma, args.beta), "lam_central": theory.lam_central(args.gamma, args.beta)}
    elif args.what == "accelerate":
        g, b = theory.accelerate(args.gamma, args.beta, args.rho)
        out = {"gamma": args.gamma, "beta": args.beta, "rho": args.rho, "gamma_hat": g, "beta_hat": b,
               "lam": theory.lam(args.gamma, args.beta), "lam_hat": theory.lam(g, b),
               "eps": theory.eps(args.gamma, args.beta), "eps_hat": theory.eps(g, b)}
    elif args.what == "from-lam-eps":
        g, b = theory.from_lam_eps(args.lam, args.eps)
        out = {"lam": args.lam, "eps": args.eps, "gamma": g, "beta": b}
    else:  # bound
        problem = problem_from_args(args)
        delta0 = np.full(problem.d, args.alpha**2)
        out = {"small_lambda_bound": theory.small_lambda_bound(problem.X, problem.y, delta0),
               "alpha": args.alpha, "n": problem.n, "d": problem.d}
    if args.json:
        print(json.dumps(to_jsonable(out)))
    else:
        width = max(len(k) for k in out)
        for key, value in out.items():
            print(f"{key:<{width}} : {value:.10g}" if isinstance(value, float) else f"{key:<{width}} : {value}")
    return 0


def _add_theory_parser(sub):
    theory = sub.add_parser("theory", help="parameter maps of the paper (lambda, acceleration, bounds)",
                            description="The paper's parameter maps: lam = gamma/(1-beta)^2 and eps = "
                            "gamma/(1-beta) (Prop. 1), the acceleration rule (Cor. 1), the small-lambda bound "
                            "(Prop. 3).")
    tsub = theory.add_subparsers(dest="what", metavar="WHAT")
    tsub.required = True
    lam = tsub.add_parser("lam", help="lambda, eps and the central-difference lambda of (gamma, beta)")
    lam.add_argument("--gamma", type=float, required=True, help="step size gamma > 0")
    lam.add_argument("--beta", type=float, required=True, help="momentum beta in [0, 1)")
    acc = tsub.add_parser("accelerate", help="(rho^2 gamma, 1 - rho (1 - beta)): same lambda, eps * rho")
    acc.add_argument("--gamma", type=float, required=True, help="step size gamma > 0")
    acc.add_argument("--beta", type=float, required=True, help="momentum beta in [0, 1)")
    acc.add_argument("--rho", type=float, required=True, help="speed-up factor rho > 0")
    inv = tsub.add_parser("from-lam-eps", help="(gamma, beta) with gamma/(1-beta)^2 = lam and gamma/(1-beta) = eps")
    inv.add_argument("--lam", type=float, required=True, help="lambda > 0")
    inv.add_argument("--eps", type=float, required=True, help="eps in (0, lambda]")
    bound = tsub.add_parser("bound", help="Proposition 3: n min(Delta0)/||y||^2 for u0 = alpha, v0 = 0")
    bound.add_argument("--alpha", type=float, default=0.01, help="initialisation scale (default 0.01)")
    add_problem_arguments(bound)
    for p in (lam, acc, inv, bound):
        p.add_argument("--json", action="store_true", help="print JSON")
        p.set_defaults(func=_cmd_theory)


def build_parser():
    parser = argparse.ArgumentParser(prog="dlnm", description="Momentum on 2-layer diagonal linear networks.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    run = sub.add_parser("run", help="run heavy-ball MGD / SMGD", description="Run heavy-ball MGD or SMGD "
                         "(w_{k+1} = w_k - gamma grad F(w_k) + beta (w_k - w_{k-1})) and print a summary.")
    run.add_argument("--gamma", type=float, required=True, help="step size gamma > 0")
    run.add_argument("--beta", type=float, required=True, help="momentum beta in [0, 1)")
    run.add_argument("--steps", type=parse_int, required=True, help="number of updates, e.g. 1e6")
    run.add_argument("--alpha", type=float, default=0.01, help="initialisation scale (u0 = alpha, v0 = 0)")
    run.add_argument("--batch-size", type=int, default=None, help="SMGD batch size in [1, n] (default: full)")
    run.add_argument("--replace", action="store_true", help="sample batches with replacement")
    run.add_argument("--seed", type=int, default=0, help="seed of the batch sampling")
    run.add_argument("--tol", type=float, default=None, help="stop when the train loss is <= tol")
    run.add_argument("--record-log", type=int, default=None, help="record ~N log-spaced iterates")
    run.add_argument("--record-every", type=int, default=None, help="record every K steps")
    run.add_argument("--store", default=None, help="stream the run to this HDF5 file")
    run.add_argument("--overwrite", action="store_true", help="replace an existing --store file")
    run.add_argument("--checkpoint-every", type=float, default=60.0, help="seconds between checkpoints")
    run.add_argument("--theory", action="store_true", help="also print Theorem 2's prediction gap")
    run.add_argument("--json", action="store_true", help="print the result as JSON")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_problem_arguments(run)
    run.set_defaults(func=_cmd_run)
    _add_theory_parser(sub)

    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        register = getattr(module, "register_cli", None)
        if register is not None:
            register(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, TypeError, FileExistsError, FileNotFoundError, OSError) as exc:
        print(f"dlnm: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
