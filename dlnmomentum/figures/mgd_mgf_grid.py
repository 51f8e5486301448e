"""``mgd-mgf-grid`` (the paper's Figure 7, Appendix ``fig:app:mgd_mgf``): MGD and MGF(λ) over the same (β, γ) grid.

Three heatmaps (mean over the data sets): the log test loss of MGD(γ, β) at convergence (the grid of
``mgd-grid``: train loss 1e-20 or its step cap), that of MGF(λ) with λ = γ/(1-β)² converged to an
interpolator (train loss 1e-20, by the adaptive scheme ``rodas``: one flow per distinct λ of the grid),
and their point-by-point difference. The paper's claim: the two agree where γ is small (Proposition 1),
so MGF(λ) explains MGD's generalisation through λ alone. Points where an MGD run did not reach the fit
tolerance are crossed; the summary gives the largest difference over the converged points and where it is.
"""

import numpy as np

from . import designs
from .common import (
    converged_mask,
    get_sweep,
    grid_legend,
    heatmap,
    mark_points,
    mean_over_reps,
    not_converged_label,
    put,
    put_sweep,
    summarize,
)

NAME = "mgd-mgf-grid"
TITLE = "Figure 7: MGD and MGF(λ = γ/(1-β)²) over (β, γ)"
SIZES = designs.SETTINGS.keys()
FIGSIZE = (17.0, 5.0)


def _mgf_on_grid(line, lam_grid):
    """MGF's mean test loss at each grid point's λ, shape (β, γ), from the λ line (NaN where not converged)."""
    lams = np.asarray(line.coords["lam"])
    mean = mean_over_reps(line, "test_loss")
    ok = converged_mask(line, designs.FIT_TOL).all(axis=0)
    index = np.searchsorted(lams, lam_grid)
    if not np.allclose(lams[index], lam_grid, rtol=1e-12, atol=0.0):
        raise RuntimeError("the MGF line does not hold every λ of the grid")
    return np.where(ok[index], mean[index], np.nan)


def compute(h5, size, log=print, parts="parts"):
    grid = designs.mgd_grid(parts, size, log)
    lam_grid, _ = designs.grid_lams(size)
    line = designs.mgf_on_grid(parts, size, log)
    put_sweep(h5, "mgd", grid)
    put_sweep(h5, "mgf", line)
    mgf = _mgf_on_grid(line, lam_grid)
    put(h5, "mgf_test_loss_on_grid", mgf, "MGF(λ = γ/(1-β)²) mean test loss at each (β, γ) point (NaN: not converged)")
    out = summarize({"mgd": grid, "mgf": line}, designs.FIT_TOL)
    ok = converged_mask(grid, designs.FIT_TOL).all(axis=0) & np.isfinite(mgf)
    with np.errstate(divide="ignore", invalid="ignore"):
        diff = np.log10(mean_over_reps(grid, "test_loss")) - np.log10(mgf)
    if ok.any():
        worst = np.unravel_index(np.argmax(np.where(ok, np.abs(diff), -1.0)), diff.shape)
        gammas, betas = grid.coords["gamma"], grid.coords["beta"]
        out["log10_difference"] = {
            "max_abs": float(np.abs(diff[ok]).max()), "median_abs": float(np.median(np.abs(diff[ok]))),
            "at_gamma": float(gammas[worst[1]]), "at_beta": float(betas[worst[0]]), "points": int(ok.sum())}
        small = ok & (gammas[None, :] <= np.median(gammas))
        if small.any():
            out["log10_difference"]["max_abs_small_gamma"] = float(np.abs(diff[small]).max())
        log(f"  log10 test loss MGD - MGF: max |.| {out['log10_difference']['max_abs']:.3g} over "
            f"{int(ok.sum())} converged points (at gamma = {out['log10_difference']['at_gamma']:.3g}, "
            f"beta = {out['log10_difference']['at_beta']:.3g})")
    return out


def plot(h5, fig):
    grid = get_sweep(h5, "mgd")
    mgf = np.asarray(h5["mgf_test_loss_on_grid"][()])
    gammas, betas = grid.coords["gamma"], grid.coords["beta"]
    G, B = np.meshgrid(gammas, betas)
    bad = ~converged_mask(grid, designs.FIT_TOL).all(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        mgd = np.log10(mean_over_reps(grid, "test_loss"))
        flow = np.log10(mgf)
    panels = ((mgd, "log₁₀ test loss, MGD"), (flow, "log₁₀ test loss, MGF(λ = γ/(1-β)²)"),
              (np.where(bad, np.nan, mgd - flow), "difference MGD - MGF (log₁₀)"))
    both = np.concatenate([mgd[np.isfinite(mgd)], flow[np.isfinite(flow)]])
    shared = (float(both.min()), float(both.max())) if both.size else None  # one scale for the two compared panels
    axes = []
    for k, (z, label) in enumerate(panels):
        ax = fig.add_subplot(1, 3, k + 1)
        axes.append(ax)
        heatmap(ax, gammas, betas, z, label, diverging=k == 2, limits=shared if k < 2 else None)
        if k < 2:
            mark_points(ax, G, B, bad if k == 0 else ~np.isfinite(flow), not_converged_label(designs.FIT_TOL),
                        marker="x", color="red")
        else:  # grey cells: no difference is drawn where MGD did not converge (white would read as MGD = MGF)
            mark_points(ax, G, B, bad, "no difference: " + not_converged_label(designs.FIT_TOL), marker="x",
                        color="0.35")
        ax.set_title(label, fontsize=8)
    grid_legend(fig, axes)


def setting(size):
    s = designs.settings(size)
    return designs.setting(size, steps=s["steps"], t_max=s["t_max"])
