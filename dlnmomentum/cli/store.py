"""``dlnm inspect`` and ``dlnm resume``: what a store holds, and continuing a stored run."""

import os
import sys

from ..store import StoreError, resume
from ..store.read import DAMAGED, file_kind, inspect_json, inspect_lines
from ..store.sweep_format import FORMAT_NAME as SWEEP_FORMAT
from ..store.sweep_format import FORMAT_VERSION as SWEEP_VERSION
from ..sweeps.execute import inspect_lines as sweep_inspect_lines
from ..sweeps.execute import open_sweep
from ..sweeps.result import summary_dict
from .common import EXIT_ERROR, EXIT_OK, print_json, print_result, progress_wanted


def _sweep_json(path):
    out = summary_dict(open_sweep(path))
    out.update(file_size=os.path.getsize(path), format=SWEEP_FORMAT, format_version=SWEEP_VERSION)
    return out


def _cmd_inspect(args):
    if file_kind(args.path) == "sweep":
        if args.json:
            print_json(_sweep_json(args.path))
        else:
            for line in sweep_inspect_lines(args.path):
                print(line)
        return EXIT_OK
    if args.json:
        out = inspect_json(args.path)
        print_json(out)
        damaged = "damaged" in out
    else:
        lines = inspect_lines(args.path)
        for line in lines:
            print(line)
        damaged = any(line.startswith(DAMAGED) for line in lines)
    if damaged:  # everything readable was shown; the file itself is not usable as it is
        print(f"dlnm: error: {args.path} is damaged; `dlnm resume {args.path}` computes the run again",
              file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def _cmd_resume(args):
    if file_kind(args.path) == "sweep":
        raise StoreError(f"{args.path} is a sweep store; continue it with "
                         f"`dlnm sweep ... --store {args.path} --resume` (dlnmomentum.resume_sweep)")
    result = resume(args.path, progress=progress_wanted(args), checkpoint_every=args.checkpoint_every)
    return print_result(result, args)


def register(subparsers):
    """Add ``dlnm inspect PATH`` and ``dlnm resume PATH``."""
    p = subparsers.add_parser("inspect", help="describe a stored run (or sweep): configuration, status, "
                              "final metrics, recorded fields, file size",
                              description="Print what an HDF5 store holds. Damaged files give an error, "
                              "never a hang.")
    p.add_argument("path", help="the .h5 store")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_inspect)
    r = subparsers.add_parser("resume", help="continue an interrupted or crashed stored run",
                              description="Continue a stored run from its last checkpoint (bitwise "
                              "identical to an uninterrupted run) and print its summary.")
    r.add_argument("path", help="the .h5 store")
    r.add_argument("--checkpoint-every", type=float, default=60.0,
                   help="seconds between checkpoints (default 60)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.set_defaults(func=_cmd_resume)
