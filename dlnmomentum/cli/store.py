"""``dlnm inspect`` and ``dlnm resume``: what a store holds (every kind of file the package writes), and
continuing a stored run."""

import os
import sys

from ..figures import open_figure
from ..store import resume
from ..store.files import StoreError, command
from ..store.kinds import store_kind, wrong_kind
from ..store.read import DAMAGED, inspect_json, inspect_lines
from ..sweeps.execute import inspect_lines as sweep_inspect_lines
from ..sweeps.execute import open_sweep, store_format
from ..sweeps.result import summary_dict
from ..validate import as_store_path
from .common import (
    EXIT_ERROR,
    EXIT_OK,
    add_checkpoint_argument,
    named_status,
    option_table,
    print_json,
    print_result,
    progress_wanted,
    rows_left_in_store,
)


def _sweep_json(path):
    out = summary_dict(open_sweep(path))
    name, version = store_format(path)
    out.update(file_size=os.path.getsize(path), format=name, format_version=version)
    return out


def _cmd_inspect(args):
    as_store_path(args.path, "path")  # ('' said "store  does not exist"; a directory is named as one)
    kind = store_kind(args.path)  # one reader per kind of file: run, sweep, network sweep, figure stores
    if kind in ("sweep", "network-sweep"):
        if args.json:
            print_json(_sweep_json(args.path))
        else:
            for line in sweep_inspect_lines(args.path):
                print(line)
        return EXIT_OK
    if kind == "figure":
        fs = open_figure(args.path)
        if args.json:
            print_json(fs.to_dict())
        else:
            print(fs.summary())
        return EXIT_OK
    if args.json:  # a run store (or a foreign HDF5 file: the reader says so)
        out = inspect_json(args.path)
        if "final" in out:  # the result as dlnm run/flow/resume --json give it: its status by name
            out["final"] = named_status(out["final"])
        print_json(out)
        damaged = "damaged" in out
    else:
        lines = inspect_lines(args.path)
        for line in lines:
            print(line)
        damaged = any(line.startswith(DAMAGED) for line in lines)
    if damaged:  # everything readable was shown; the file itself is not usable as it is
        print(f"dlnm: error: {args.path} is damaged; `{command('resume', args.path)}` computes the run again",
              file=sys.stderr)
        return EXIT_ERROR
    return EXIT_OK


def _cmd_resume(args):
    try:
        kind = store_kind(args.path)
    except StoreError:  # (a run store left open by a writer that died: resume repairs it)
        kind = "run"
    if kind != "run":  # a sweep, network sweep or figure store: named, with the command that continues it
        raise wrong_kind(args.path, kind, "run", action="resume")
    with rows_left_in_store() as stored:  # (the rows are not read back: it prints none of them)
        result = resume(args.path, progress=progress_wanted(args), checkpoint_every=args.checkpoint_every)
    return print_result(result, args, stored=stored)


def register(subparsers):
    """Add ``dlnm inspect PATH`` and ``dlnm resume PATH``."""
    p = subparsers.add_parser("inspect", help="describe a store: a run, sweep, network sweep or figure store "
                              "(configuration, status, results, file size)",
                              description="Print what an HDF5 file written by dlnmomentum holds: a run store "
                              "(dlnm run/flow/network --store), a sweep or network sweep store (dlnm sweep/network "
                              "--store) or a figure store (dlnm figure/reproduce). Damaged files give an error, "
                              "never a hang.")
    p.add_argument("path", help="the .h5 store (any kind)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cmd_inspect, options=option_table(p))
    r = subparsers.add_parser("resume", help="continue an interrupted or crashed stored run",
                              description="Continue a stored run from its last checkpoint (bitwise "
                              "identical to an uninterrupted run) and print its summary.")
    r.add_argument("path", help="the .h5 store")
    add_checkpoint_argument(r)
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--json", action="store_true", help="print the result as JSON")
    r.set_defaults(func=_cmd_resume, options=option_table(r))
