"""What every ``dlnm`` command shares: problem and record options, exit codes, result output."""

import argparse
import json
import sys

from ..problem import sparse_regression
from ..record import Record
from ..status import Status
from ..store.files import to_jsonable

#: Exit codes of ``dlnm`` (also listed by ``dlnm --help``).
EXIT_OK = 0           # finished: converged or used its budget; a sweep complete; a command done
EXIT_DIVERGED = 1     # the run diverged (its result and store are still written)
EXIT_ERROR = 2        # bad arguments or input, a missing, locked or damaged file (message on stderr)
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C or SIGTERM; the state is kept and can be resumed

EXIT_CODES_HELP = (f"exit codes: {EXIT_OK} finished (converged or budget used; sweep complete), "
                   f"{EXIT_DIVERGED} the run diverged, {EXIT_ERROR} bad input or an unusable file, "
                   f"{EXIT_INTERRUPTED} interrupted (Ctrl-C/SIGTERM; resume with dlnm resume or "
                   "dlnm sweep --resume)")


def exit_code(status):
    """The exit code of a run that ended with ``status``."""
    status = Status(int(status))
    if status == Status.DIVERGED:
        return EXIT_DIVERGED
    if status in (Status.INTERRUPTED, Status.RUNNING):
        return EXIT_INTERRUPTED
    return EXIT_OK


def progress_wanted(args):
    return not args.no_progress and sys.stderr.isatty()


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
    return sparse_regression(n=args.n, d=args.d, s=args.s, mu=args.mu, sigma=args.sigma, n_test=args.n_test,
                             seed=args.data_seed)


def parse_int(text):
    """Integers written as 1e6 or 1_000_000 are accepted."""
    value = float(text)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(value)


def record_from_args(args):
    if getattr(args, "record_log", None):
        return Record(log=args.record_log)
    if getattr(args, "record_every", None):
        return Record(every=args.record_every)
    return None




def print_result(result, args, problem=None):
    """A run result as JSON (``--json``) or as its summary; returns the exit code."""
    if args.json:
        out = to_jsonable(result.to_dict())
        out["status_name"] = result.status_name
        out["message"] = result.message
        json.dump(out, sys.stdout)
        sys.stdout.write("\n")
    else:
        if problem is not None:
            print(problem.summary())
        print(result.summary())
    return exit_code(result.status)
