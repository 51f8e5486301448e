"""``mgf-triple`` (the paper's Figure 8): MGF(λ) on μ = 1 data — test loss, ‖Δ∞‖₂, ‖θ‖₁ and the
normalised distance to the Δ∞-only prediction θ_GF(Δ∞) against λ, with the paper's 0.01 line.

Mean over the data sets; the no-crossing band shaded (as in ``mgf-lambda``); points that did not reach the fit
tolerance crossed (their normalised distance is not computed: ``theory_reason``); one legend for the figure.
"""

import numpy as np

from . import designs
from .common import (
    FIELD_LABELS,
    LEGEND_FONT,
    converged_mask,
    get_sweep,
    mark_points,
    mean_over_reps,
    not_converged_label,
    put_sweep,
    summarize,
)
from .mgf_lambda import BAND_LABEL, no_crossing_band

NAME = "mgf-triple"
TITLE = "Figure 8: MGF(λ) on μ = 1 data, with the distance to θ_GF(Δ∞)"
SIZES = designs.SETTINGS.keys()
FIGSIZE = (18.0, 4.8)
PANELS = (("test_loss", True), ("delta_inf_norm", True), ("l1_norm", False), ("normalized_distance", True))


def compute(h5, size, log=print, parts="parts"):
    sw = designs.mgf_line(parts, size, log)
    put_sweep(h5, "mgf", sw)
    out = summarize({"mgf": sw}, designs.FIT_TOL)
    dist = np.asarray(sw.data["normalized_distance"], dtype=float)
    out["max_normalized_distance"] = float(np.nanmax(dist)) if np.isfinite(dist).any() else None
    out["runs_above_0.01"] = int(np.nansum(dist > 0.01))
    return out


def plot(h5, fig):
    sw = get_sweep(h5, "mgf")
    lams = np.asarray(sw.coords["lam"])
    bad = ~converged_mask(sw, designs.FIT_TOL).all(axis=0)
    band = no_crossing_band(sw)
    entries = {}  # one legend for the figure: the band, the marks and the paper's line, each once
    for k, (field, log) in enumerate(PANELS):
        ax = fig.add_subplot(1, 4, k + 1)
        y = mean_over_reps(sw, field)
        keep = np.ones(lams.shape, dtype=bool)
        if field == "normalized_distance":
            # λ = 0 is gradient flow against its own prediction θ_GF(Δ∞): a distance at rounding level (7e-10)
            # that stretched the log axis over eight decades; left out, and the panel says so
            keep = lams > 0
            ax.set_title("λ = 0 (GF against itself) left out", fontsize=8)
        ax.plot(lams[keep], y[keep], "o-", ms=4)
        mark_points(ax, lams[keep], y[keep], bad[keep], not_converged_label(designs.FIT_TOL))
        if band > 0:
            ax.axvspan(0, band, color="grey", alpha=0.2, lw=0, label=BAND_LABEL)
        if field == "normalized_distance":
            ax.axhline(0.01, color="k", ls="--", lw=1, label="the paper's bound 0.01")
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("λ")
        ax.set_ylabel(FIELD_LABELS[field])
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(label, handle)
    fig.legend(entries.values(), entries.keys(), loc="outside lower center", ncols=len(entries),
               fontsize=LEGEND_FONT + 1)


def setting(size):
    return designs.setting(size, t_max=designs.settings(size)["t_max"])
