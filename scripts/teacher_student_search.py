"""Search the teacher-student problem's free choices for a setting where Figure 2's grid is defined.

The paper's Figure 2 plots the test loss of a ReLU student (2-20-1) "after the student reaches 10⁻⁵ training
error" at every (γ, β). The paper fixes the widths, n = 15 standard normal inputs, the square loss and one data
set and initialisation for all points; the seed, the student's initial scale and the biases are the package's
choices (:func:`dlnmomentum.teacher_student`: ``seed``, ``init_scale``, ``hidden_bias``, ``output_bias``). On the
package's 0.6 setting (seed 0, scale 1, hidden biases only) 184 of the 400 full-grid points never reach 1e-5: they
stop on non-interpolating plateaus (docs/findings.md (e)), so the figure's quantity is undefined there.

This script runs, for each candidate, the figure's sweep (MGD until train loss 1e-5 or the step cap, one data set
and initialisation for every point) on a grid and prints one row per candidate:

- ``reached``: points with train loss <= 1e-5 within the cap (the criterion: the figure is defined there);
- ``diverged`` and ``capped`` (stopped at the cap above 1e-5);
- ``plateaus``: the final train losses of the capped points, rounded to 3 digits, with how many points share
  each (points on one plateau share its value; a slow run's value is its own);
- ``max steps``: the most steps a point that reached 1e-5 needed (how close the cap is);
- ``r2 lam / eps / gamma``: the share of the variance of log10 test loss over the reached points that λ = γ/(1-β)²,
  ε = γ/(1-β) and γ explain (:func:`dlnmomentum.figures.networks.explained_shares`, as the figure prints; on the
  4 x 4 grid, 16 points in 12 bins, they are close to 1 whatever the data: read them on the quick grid or larger).

Then, per choice of (init_scale, biases), how many seeds had every point reached and how many points were reached
over all seeds, and the candidate :func:`choose` picks (the choice defined for the most seeds; seed 0, the 0.6
data set, when it qualifies).

    python scripts/teacher_student_search.py                 # the screen: 72 candidates, 4 x 4, cap 10⁶ (3 min)
    python scripts/teacher_student_search.py --grid quick --steps 1000000 --seeds 0 1 4 5 --scales 0.5 --biases h
    python scripts/teacher_student_search.py --grid full --steps 3000000 --seeds 0 --scales 0.5 --biases h

The grids span the figure's range (γ in [0.01, 0.3] log-spaced, β in [0, 0.9]): ``coarse`` 4 x 4, ``quick``
8 x 8 and ``full`` 20 x 20 (those of :data:`dlnmomentum.figures.teacher_student.SETTINGS`). Biases: ``h`` hidden
biases only (0.6), ``ho`` hidden and output, ``o`` output only, ``none``.
"""

import argparse
import sys
import time

import numpy as np

import dlnmomentum as dm
from dlnmomentum.figures import teacher_student as fig
from dlnmomentum.figures.networks import explained_shares
from dlnmomentum.status import Status

GRIDS = {"coarse": {"gammas": "1e-2:3e-1:4:log", "betas": "0:0.9:4"},
         "quick": {k: fig.SETTINGS["quick"][k] for k in ("gammas", "betas")},
         "full": {k: fig.SETTINGS["full"][k] for k in ("gammas", "betas")}}
BIASES = {"h": (True, False), "ho": (True, True), "o": (False, True), "none": (False, False)}
#: The paper's fixed part of the problem (widths, data size; the figure's test set): the 0.6 problem's spec.
BASE = fig.SPECS["package-0.6"]["problem"]


def candidate_spec(scale, biases):
    hidden, output = BIASES[biases]
    return dict(BASE, init_scale=scale, hidden_bias=hidden, output_bias=output)


def evaluate(spec, seed, grid, steps, tol=fig.TOL):
    """The row of one candidate: counts, plateaus, steps and λ shares of its sweep."""
    t0 = time.perf_counter()
    sw = dm.sweep(spec, **GRIDS[grid], steps=steps, tol=tol, seed=seed, progress=False)
    seconds = time.perf_counter() - t0
    status = np.asarray(sw.data["status"])[0]
    loss = np.asarray(sw.data["train_loss"])[0]
    done = np.asarray(sw.data["steps_done"])[0]
    reached = status == Status.CONVERGED
    capped = status == Status.MAX_STEPS
    values, counts = np.unique(np.array([float(f"{v:.3g}") for v in loss[capped]]), return_counts=True)
    order = np.argsort(-counts)
    shares = explained_shares(sw, "test_loss", mask=reached) if reached.sum() >= 3 else {}
    return {"seed": seed, "init_scale": spec["init_scale"],
            "biases": next(k for k, v in BIASES.items() if v == (spec["hidden_bias"], spec["output_bias"])),
            "reached": int(reached.sum()), "of": int(reached.size),
            "diverged": int((status == Status.DIVERGED).sum()), "capped": int(capped.sum()),
            "plateaus": [(float(values[k]), int(counts[k])) for k in order[:3]],
            "max_steps": int(done[reached].max()) if reached.any() else 0,
            "shares": shares, "seconds": seconds}


def row_text(r):
    plateaus = " ".join(f"{v:.3g}x{c}" for v, c in r["plateaus"]) or "-"
    shares = " / ".join(f"{r['shares'].get(k, float('nan')):.2f}" for k in ("lam", "eps", "gamma"))
    return (f"{r['seed']:>4} {r['init_scale']:>5g} {r['biases']:>4} {r['reached']:>4}/{r['of']:<4} {r['diverged']:>4} "
            f"{r['capped']:>4}  {plateaus:<32} {r['max_steps']:>9} {shares:>18} {r['seconds']:>6.1f}")


HEADER = (f"{'seed':>4} {'scale':>5} {'bias':>4} {'reached':>9} {'div':>4} {'cap':>4}  "
          f"{'plateaus (loss x points)':<32} "
          f"{'max steps':>9} {'r2 lam/eps/gamma':>18} {'s':>6}")


def changes(r):
    """How many of the free choices differ from the package's 0.6 setting (seed 0, scale 1, hidden biases)."""
    return (r["seed"] != 0) + (r["init_scale"] != 1.0) + (r["biases"] != "h")


def by_choice(rows):
    """``{(init_scale, biases): (seeds whose every point reached, points reached over all seeds, seeds tried)}``:
    how robust a choice is across data sets."""
    out = {}
    for r in rows:
        full, reached, tried = out.get((r["init_scale"], r["biases"]), (0, 0, 0))
        out[(r["init_scale"], r["biases"])] = (full + (r["reached"] == r["of"]), reached + r["reached"], tried + 1)
    return out


def choose(rows):
    """The selection rule: the (init_scale, biases) whose grid is defined (every point reached) for the most
    seeds, so that a defined grid is not the accident of one data set (ties: the most points reached over all
    its seeds); with it the candidate that reaches the most points, among ties the fewest changes from 0.6
    (seed 0 kept: the 0.6 data set and teacher), then the lowest seed."""
    robust = by_choice(rows)
    return max(rows, key=lambda r: (robust[(r["init_scale"], r["biases"])][:2], r["reached"], -changes(r),
                                    -r["seed"]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--grid", choices=tuple(GRIDS), default="coarse")
    ap.add_argument("--steps", type=int, default=1_000_000, help="step cap per point (default 10⁶)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--scales", type=float, nargs="+", default=[0.25, 0.5, 1.0, 2.0])
    ap.add_argument("--biases", choices=tuple(BIASES), nargs="+", default=["h", "ho", "none"])
    args = ap.parse_args(argv)
    g = GRIDS[args.grid]
    print(f"grid {args.grid} (gammas {g['gammas']}, betas {g['betas']}), cap {args.steps} steps, "
          f"target train loss {fig.TOL:g}")
    print(HEADER, flush=True)
    rows = []
    for biases in args.biases:
        for scale in args.scales:
            for seed in args.seeds:
                r = evaluate(candidate_spec(scale, biases), seed, args.grid, args.steps)
                rows.append(r)
                print(row_text(r), flush=True)
    print("\nby choice: seeds with every point reached, points reached over all seeds")
    for (scale, biases), (full, reached, tried) in sorted(by_choice(rows).items(),
                                                          key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"  init_scale {scale:<5g} biases {biases:<4}: {full} of {tried} seeds, {reached} points")
    best = choose(rows)
    print(f"chosen: seed {best['seed']}, init_scale {best['init_scale']:g}, biases {best['biases']} "
          f"({best['reached']} of {best['of']} points reached)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
