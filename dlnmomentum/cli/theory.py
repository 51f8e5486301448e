"""``dlnm theory``: the paper's parameter maps and bounds."""

import numpy as np

from .. import theory
from ..runs.common import as_alpha
from .common import add_problem_arguments, option_table, print_json, problem_from_args


def _cmd_theory(args):
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
        # the initial scale the runs accept (u0 = alpha, v0 = 0: Delta0 = alpha^2)
        alpha = as_alpha("--alpha", args.alpha)
        delta0 = np.full(problem.d, alpha * alpha)
        out = {"small_lambda_bound": theory.small_lambda_bound(problem.X, problem.y, delta0),
               "alpha": args.alpha, "n": problem.n, "d": problem.d}
    if args.json:
        print_json(out)
    else:
        width = max(len(k) for k in out)
        for key, value in out.items():
            print(f"{key:<{width}} : {value:.10g}" if isinstance(value, float) else f"{key:<{width}} : {value}")
    return 0


def register(sub):
    """Add ``dlnm theory``."""
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
        p.set_defaults(func=_cmd_theory, options=option_table(p))


