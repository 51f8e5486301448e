"""``crossings`` (new): is θ̃0 negligible after sign changes? (finding (a) of ``docs/findings.md``).

For every MGD grid run and every MGF run trained to the fit tolerance: the normalised distance
‖θ - θ_GF(Δ∞)‖/‖θ_GF(Δ∞)‖ to the Δ∞-only prediction (the paper: < 0.01) and ‖θ̃0‖∞ against the number
of sign changes of w±, runs with and without crossings in two colours, the paper's 0.01 line and α²
(the bound on θ̃0 without crossings). The full Theorem 1/2 prediction gap is printed for comparison.
"""

import re

import numpy as np

from ..status import Status
from . import designs
from .common import (
    FIELD_LABELS,
    LEGEND_FONT,
    converged_mask,
    decade_ticks,
    get_sweep,
    put_sweep,
    short_number,
    summarize,
)

NAME = "crossings"
TITLE = "Sign changes: the distance to the Δ∞-only prediction and ‖θ̃0‖∞"
SIZES = designs.SETTINGS.keys()
FIGSIZE = (12.0, 5.0)
PAPER_BOUND = 0.01


def _runs(sw):
    ok = converged_mask(sw, designs.FIT_TOL) & (np.asarray(sw.data["theory_reason"]) == 0)
    changes = np.asarray(sw.data["sign_changes"])[ok]
    dist = np.asarray(sw.data["normalized_distance"])[ok]
    theta0 = np.abs(np.asarray(sw.data["theta0_tilde"])[ok]).max(axis=-1)
    gap = np.asarray(sw.data["prediction_gap"])[ok]
    return changes, dist, theta0, gap


def _sci(v):
    """``6.3e-6``, ``1e-4``: two digits, in the notation of the figures' other numbers."""
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m.group(1) == "-" else "") + m.group(2),
                  f"{v:.1e}".replace(".0e", "e"))


def _at_stop_tol(sw):
    """Among the runs of :func:`_runs` (in its order): those that ended at the sweep's stop tolerance (status
    ``converged``)."""
    ok = converged_mask(sw, designs.FIT_TOL) & (np.asarray(sw.data["theory_reason"]) == 0)
    return np.asarray(sw.data["status"])[ok] == Status.CONVERGED


def compute(h5, size, log=print, parts="parts"):
    grid = designs.mgd_grid(parts, size, log)
    line = designs.mgf_line(parts, size, log)
    put_sweep(h5, "mgd", grid)
    put_sweep(h5, "mgf", line)
    out = summarize({"mgd": grid, "mgf": line}, designs.FIT_TOL)
    for name, sw in (("mgd", grid), ("mgf", line)):
        changes, dist, theta0, gap = _runs(sw)
        crossed = changes > 0
        out[name]["normalized_distance"] = {
            "max_without_crossings": float(dist[~crossed].max()) if (~crossed).any() else None,
            "max_with_crossings": float(dist[crossed].max()) if crossed.any() else None,
            "above_0.01_with_crossings": int((dist[crossed] > PAPER_BOUND).sum()),
            "above_0.01_without_crossings": int((dist[~crossed] > PAPER_BOUND).sum()),
            "runs": int(dist.size)}
        out[name]["max_prediction_gap"] = float(gap.max()) if gap.size else None
        # the same gap on the runs that ended at the stop tolerance (train loss 1e-20, status converged), not
        # at their cap between it and the fit tolerance: the prediction's own accuracy (docs/findings.md (a))
        at_stop = _at_stop_tol(sw)
        out[name]["max_prediction_gap_at_stop_tol"] = float(gap[at_stop].max()) if at_stop.any() else None
        out[name]["runs_at_stop_tol"] = int(at_stop.sum())
        out[name]["max_theta0_tilde_without_crossings"] = float(theta0[~crossed].max()) if (~crossed).any() else None
        nd = out[name]["normalized_distance"]
        log(f"  {name}: normalised distance max {nd['max_without_crossings']} without crossings, "
            f"{nd['max_with_crossings']} with ({nd['above_0.01_with_crossings']} runs above 0.01); "
            f"Theorem 1/2 prediction gap max {out[name]['max_prediction_gap']}, "
            f"{out[name]['max_prediction_gap_at_stop_tol']} on the {out[name]['runs_at_stop_tol']} runs trained "
            f"to train loss {short_number(float(sw.config['tol']))}")
    return out


def plot(h5, fig):
    from matplotlib.ticker import FuncFormatter

    grid, line = get_sweep(h5, "mgd"), get_sweep(h5, "mgf")
    alpha = float(grid.config["alpha"])
    axes = [fig.add_subplot(1, 2, k + 1) for k in range(2)]
    for name, sw, marker in (("MGD grid", grid, "o"), ("MGF λ line", line, "s")):
        changes, dist, theta0, _ = _runs(sw)
        crossed = changes > 0
        for mask, color, what in ((~crossed, "C2", "no sign change"), (crossed, "C3", "sign changes")):
            if mask.any():
                axes[0].scatter(changes[mask], dist[mask], marker=marker, s=12, color=color, alpha=0.7,
                                label=f"{name}, {what}")
                axes[1].scatter(changes[mask], theta0[mask], marker=marker, s=12, color=color, alpha=0.7)
    axes[0].axhline(PAPER_BOUND, color="k", ls="--", lw=1, label=f"the paper's bound {PAPER_BOUND:g}")
    axes[1].axhline(alpha * alpha, color="k", ls=":", lw=1, label="α² (the bound without sign changes)")
    axes[0].set_ylabel(FIELD_LABELS["normalized_distance"])
    axes[1].set_ylabel(FIELD_LABELS["theta0_tilde"])
    for ax in axes:
        ax.set_xlabel("sign changes of w± (symlog axis: linear up to 1)")
        if not ax.collections:
            ax.text(0.5, 0.5, f"no run reached train loss ≤ {short_number(designs.FIT_TOL)}", ha="center",
                    transform=ax.transAxes)
            continue
        # 0 sign changes is the point of the figure: a symmetric log axis shows it at 0, the counts as they are
        ax.set_xscale("symlog", linthresh=1.0, linscale=0.5)
        ax.set_xlim(left=-0.3)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))  # 0, 1, 10, 100: counts
        ax.set_yscale("log")
        decade_ticks(ax.yaxis)
    # the right panel's point: the runs without sign changes end below α². Its axis spans every run (up to
    # 1e68 with sign changes), where the green points cannot be read against the line: their largest value,
    # written on the panel, can
    lines = []
    for name, sw in (("MGD grid", grid), ("MGF λ line", line)):
        changes, _, theta0, _ = _runs(sw)
        if (changes == 0).any():
            top = float(theta0[changes == 0].max())
            lines.append(f"{name}: {_sci(top)} {'<' if top < alpha * alpha else '≥'} α² = {_sci(alpha * alpha)}")
    if lines:
        axes[1].text(0.98, 0.03, "largest ‖θ̃0‖∞ without sign changes\n" + "\n".join(lines),
                     transform=axes[1].transAxes, ha="right", va="bottom", fontsize=LEGEND_FONT,
                     bbox=dict(boxstyle="round", fc="white", ec="0.7"))
    axes[0].legend(fontsize=LEGEND_FONT, loc="best")
    axes[1].legend(fontsize=LEGEND_FONT, loc="upper left")  # (the top right holds the largest |θ̃0|)


def setting(size):
    s = designs.settings(size)
    return designs.setting(size, steps=s["steps"], t_max=s["t_max"])
