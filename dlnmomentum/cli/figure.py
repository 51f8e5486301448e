"""``dlnm figure NAME``, ``dlnm plot STORE``, ``dlnm reproduce``: the paper's figures from one command.

Each figure is computed into an HDF5 figure store (``<out>/<name>.h5``, its sweeps resumable under
``<out>/parts``) and drawn from the store (PNG and PDF); ``dlnm plot`` redraws a store without running
anything. Every figure prints the status of its runs (converged, at the step cap, diverged).
"""

import json
import sys
import time

from ..figures import FIGURES, figure, plot_store, reproduce
from ..figures.common import SIZES
from ..store.files import finite_json
from .common import EXIT_OK, option_table


def _log(line):
    print(line, file=sys.stderr, flush=True)


def _size(args):
    return "full" if args.full else "tiny" if args.tiny else "quick"


def _report(name, store, images, summary, as_json):
    if as_json:
        # standard JSON, as every --json of dlnm: a summary's NaN (a measure not computed, said on stderr) is null
        print(json.dumps(finite_json({"figure": name, "store": store, "images": images, "summary": summary}),
                         default=str, allow_nan=False))
        return
    print(f"{name}: {store} -> {', '.join(images)}")
    for key, value in summary.items():
        print(f"  {key}: {json.dumps(value, default=str)}")


def _cmd_figure(args):
    t0 = time.perf_counter()
    store, images, summary = figure(args.name, _size(args), args.out, args.overwrite, log=_log, spec=args.problem)
    _report(args.name, store, images, summary, args.json)
    _log(f"{args.name}: {time.perf_counter() - t0:.1f} s")
    return EXIT_OK


def _cmd_plot(args):
    images = plot_store(args.store, args.out)
    print("\n".join(images))
    return EXIT_OK


def _cmd_reproduce(args):
    t0 = time.perf_counter()
    results = reproduce(_size(args), args.out, args.overwrite, log=_log, names=args.only)
    for name, (store, images, summary) in results.items():
        _report(name, store, images, summary, args.json)
    _log(f"reproduce [{_size(args)}]: {len(results)} figures in {time.perf_counter() - t0:.1f} s")
    return EXIT_OK


def _size_flags(p):
    g = p.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="small grids and caps: every figure in minutes (default)")
    g.add_argument("--full", action="store_true",
                   help="the paper's sizes and tolerances (all figures: 738 s on 2 cores, benchmarks/README.md; "
                        "resumable)")
    g.add_argument("--tiny", action="store_true", help="seconds (for tests)")
    p.add_argument("--out", default="figures", help="folder for the stores and images (default: figures)")
    p.add_argument("--overwrite", action="store_true", help="recompute an existing figure store")
    p.add_argument("--json", action="store_true", help="print the summaries as JSON lines")


def register(subparsers):
    """Add ``dlnm figure``, ``dlnm plot`` and ``dlnm reproduce``."""
    sizes = "/".join(SIZES)
    p = subparsers.add_parser("figure", help="compute and draw one of the paper's figures",
                              description="Compute a figure into <out>/<name>.h5 (its sweeps resumable under "
                              f"<out>/parts) and draw it to PNG and PDF (<out>/<name>.png, .pdf: an existing file "
                              f"there is replaced only if dlnmomentum drew it). Sizes {sizes}. Figures: "
                              + ", ".join(FIGURES))
    p.add_argument("name", choices=tuple(FIGURES), metavar="NAME", help="one of: " + ", ".join(FIGURES))
    named = {n: m for n, m in FIGURES.items() if hasattr(m, "SPECS")}
    p.add_argument("--problem", metavar="SPEC", help="the named problem of a figure that has several: "
                   + "; ".join(f"{n}: {', '.join(m.SPECS)} (default {m.DEFAULT_SPEC})" for n, m in named.items()))
    _size_flags(p)
    p.set_defaults(func=_cmd_figure, options=option_table(p, spec="--problem"))
    p = subparsers.add_parser("plot", help="redraw a figure store (runs nothing)",
                              description="Draw a figure again, to PNG and PDF, from its figure store alone (runs "
                              "nothing). It accepts figure stores only: the <out>/<name>.h5 files that dlnm figure "
                              "and dlnm reproduce write (kind 'figure'). Run stores, sweep stores and network sweep "
                              "stores are data, not figures: dlnm inspect describes them, and "
                              "dlnmomentum.open_store / dlnmomentum.open_sweep read them.")
    p.add_argument("store", help="a figure store <out>/<name>.h5 written by dlnm figure / dlnm reproduce")
    p.add_argument("--out", default=None, help="folder for the images (default: next to the store)")
    p.set_defaults(func=_cmd_plot, options=option_table(p))
    p = subparsers.add_parser("reproduce", help="compute and draw every figure of the paper (diagonal and "
                              "small networks)",
                              description="Compute and draw every figure of the paper, the diagonal linear networks' "
                              "and the small networks' (teacher-student ReLU, deep linear), as dlnm figure does for "
                              f"one: each into <out>/<name>.h5 (its sweeps resumable under <out>/parts) and to PNG "
                              f"and PDF. Sizes {sizes}; an existing store of the same size is redrawn, not "
                              "recomputed. Figures: " + ", ".join(FIGURES))
    _size_flags(p)
    p.add_argument("--only", nargs="+", choices=tuple(FIGURES), default=None, metavar="NAME",
                   help="only these figures")
    p.set_defaults(func=_cmd_reproduce, options=option_table(p, names="--only"))
