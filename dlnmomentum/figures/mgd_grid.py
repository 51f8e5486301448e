"""``mgd-grid`` (the paper's Figure 4): MGD at convergence over (β, γ): test loss, ‖Δ∞‖₂ and ‖θ‖₁.

Heatmaps (mean over the data sets) with labelled λ = γ/(1-β)² level lines; points where no run changed
sign are ringed (Corollary 3: there Δ∞ < Δ0, checked in the summary), points where some run did not
reach the fit tolerance are crossed.
"""

import numpy as np

from . import designs
from .common import (
    FIELD_LABELS,
    converged_mask,
    get_sweep,
    grid_legend,
    heatmap,
    mark_points,
    mean_over_reps,
    not_converged_label,
    put_sweep,
    summarize,
)

NAME = "mgd-grid"
TITLE = "Figure 4: MGD at convergence over (β, γ)"
SIZES = designs.SETTINGS.keys()
FIGSIZE = (17.0, 5.0)


def corollary3(sw):
    """Among runs without sign changes: how many have Δ∞ < Δ0 in every coordinate (Corollary 3)."""
    alpha = float(sw.config["alpha"])
    delta0 = alpha * alpha  # u0 = α1, v0 = 0: w± = α, Δ0 = α²
    no_cross = sw.done & ~np.asarray(sw.data["crossed"]).astype(bool)
    below = (np.asarray(sw.data["delta_inf"]) < delta0).all(axis=-1)
    return {"runs_without_sign_changes": int(no_cross.sum()),
            "with_delta_inf_below_delta0": int((no_cross & below).sum())}


def compute(h5, size, log=print, parts="parts"):
    sw = designs.mgd_grid(parts, size, log)
    put_sweep(h5, "mgd", sw)
    out = summarize({"mgd": sw}, designs.FIT_TOL)
    out["corollary3"] = corollary3(sw)
    return out


def plot(h5, fig):
    sw = get_sweep(h5, "mgd")
    gammas, betas = sw.coords["gamma"], sw.coords["beta"]
    G, B = np.meshgrid(gammas, betas)
    no_cross = ~np.asarray(sw.data["crossed"]).astype(bool).any(axis=0)
    bad = ~converged_mask(sw, designs.FIT_TOL).all(axis=0)
    panels = (("test_loss", True), ("delta_inf_norm", True), ("l1_norm", False))
    axes = []
    for k, (field, log) in enumerate(panels):
        label = f"log₁₀ {FIELD_LABELS[field]}" if log else FIELD_LABELS[field]
        ax = fig.add_subplot(1, 3, k + 1)
        axes.append(ax)
        z = mean_over_reps(sw, field)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.log10(z) if log else z
        heatmap(ax, gammas, betas, z, label)
        mark_points(ax, G, B, no_cross, "no sign change", marker="o", color="white")
        mark_points(ax, G, B, bad, not_converged_label(designs.FIT_TOL), marker="x", color="red")
        ax.set_title(label, fontsize=8)
    grid_legend(fig, axes[:1])


def setting(size):
    return designs.setting(size, steps=designs.settings(size)["steps"])
