"""The command line ``dlnm`` (also ``python -m dlnmomentum``): one module per command group.

The CLI sits on top of the library and nothing in the library imports it. Every command
module defines ``register(subparsers)``; they are imported statically, so a command whose
module fails to import is an import error, never a missing command.
"""

import argparse
import sys

from ..sweeps.cuda import CudaUnavailableError
from ..sweeps.distributed import BlockFailedError, DistributedUnavailableError
from . import figure, flow, network, run, store, sweep, theory
from .common import EXIT_CODES_HELP, EXIT_ERROR, EXIT_INTERRUPTED

#: The command modules, in the order of ``dlnm --help``.
COMMANDS = (run, flow, sweep, network, store, theory, figure)


def build_parser():
    parser = argparse.ArgumentParser(prog="dlnm", description="Momentum on 2-layer diagonal linear networks.",
                                     epilog=EXIT_CODES_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in COMMANDS:
        module.register(sub)
    return parser


def main(argv=None):
    """Run ``dlnm`` with ``argv``; returns the exit code (see ``dlnm --help``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:  # a second Ctrl-C: the state is kept as at the last chunk or wave
        print("dlnm: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (ValueError, TypeError, OSError, CudaUnavailableError, DistributedUnavailableError,
            BlockFailedError) as exc:  # OSError: StoreError, missing files
        print(f"dlnm: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
