"""The command line ``dlnm`` (also ``python -m dlnmomentum``): one module per command group.

The CLI sits on top of the library and nothing in the library imports it. Every command
module defines ``register(subparsers)``; they are imported statically, so a command whose
module fails to import is an import error, never a missing command.
"""

import argparse
import os
import re
import sys
import warnings

from ..sweeps.cuda import CudaUnavailableError
from ..sweeps.distributed import BlockFailedError, DistributedUnavailableError
from . import figure, flow, network, run, store, sweep, theory
from .common import EXIT_BROKEN_PIPE, EXIT_CODES_HELP, EXIT_ERROR, EXIT_INTERRUPTED, given_options, option_message

#: The command modules, in the order of ``dlnm --help``.
COMMANDS = (run, flow, sweep, network, store, theory, figure)


class _Parser(argparse.ArgumentParser):
    """argparse's parser, reading every negative number as a value: its own test (Python 3.11) takes ``-5`` and
    ``-.5`` but not ``-1e3`` or ``-inf``, so ``--t-max -1e3`` failed with "expected one argument" instead of the
    option's range. (The sub-commands' parsers are of this class too: ``add_subparsers`` makes its caller's.)"""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER


#: A negative number as the options read one (``float``: exponents, ``inf``, ``nan``; digit groups with ``_``), or a
#: list (``--lams -1,2``, ``--gammas -1:1:3``) that starts with one.
_NUMBER = r"(?:(?:\d[\d_]*\.?[\d_]*|\.\d[\d_]*)(?:e[-+]?\d+)?|inf(?:inity)?|nan)"
NEGATIVE_NUMBER = re.compile(rf"^-{_NUMBER}(?:[,:][-+]?{_NUMBER})*$", re.IGNORECASE)


def build_parser():
    parser = _Parser(prog="dlnm", description="Momentum on 2-layer diagonal linear networks.",
                     epilog=EXIT_CODES_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMANDS:
        module.register(sub)
    return parser


def _warning_line(command):
    """How ``dlnm`` shows a warning of the library: one line on stderr, ``dlnm COMMAND: warning: MESSAGE``, not
    Python's default of the file, line number, category and a line of the package's source (before: ``.../runs/
    flow_adaptive.py:241: RuntimeWarning: ...`` and ``  return prepare_flow(problem, lam, ...``)."""
    def show(message, category, filename, lineno, file=None, line=None):
        print(f"dlnm {command}: warning: {message}", file=sys.stderr if file is None else file)

    return show


def main(argv=None):
    """Run ``dlnm`` with ``argv``; returns the exit code (see ``dlnm --help``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.given = given_options(build_parser(), sys.argv[1:] if argv is None else argv)
    try:
        with warnings.catch_warnings():  # (restores the warning display of the caller: main is also called in-process)
            warnings.showwarning = _warning_line(args.command)
            code = args.func(args)
        sys.stdout.flush()  # a reader that went away (`dlnm inspect X | head`) is met here, not at exit
        return code
    except BrokenPipeError:
        # the reader of stdout went away: stop quietly, as a command killed by SIGPIPE does (the shell's 141)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # the interpreter's last flush then has nowhere to fail
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # a second Ctrl-C: the state is kept as at the last chunk or wave
        print("dlnm: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, TypeError, OSError, CudaUnavailableError, DistributedUnavailableError,
            BlockFailedError) as exc:  # OSError: StoreError, missing files
        # the library's parameters as the options the user typed (t_max as --t-max): validate.ParameterValueError
        print(f"dlnm: error: {option_message(exc, getattr(args, 'options', {}))}", file=sys.stderr)
        return EXIT_ERROR
    except MemoryError:  # sizes this machine cannot hold (--n 1e12): said in a line, as bad input
        print(f"dlnm {args.command}: error: not enough memory for these sizes (--n, --d, --n-test, widths, the "
              "budget of a record): choose smaller ones", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
