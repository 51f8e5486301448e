"""``lambda-collapse`` (new): does MGD follow MGF at λ = γ/(1-β)² or at λ_central (Appendix A)?

Every grid point's test loss and ‖Δ∞‖₂ (mean over the data sets) against its λ (left) and against its
λ_central (right), coloured by β, with the MGF(λ) curve on top. The within-bin spread of log₁₀ of each
quantity (points binned by the map, pooled standard deviation inside the bins) is printed for both
maps: the smaller, the better the map collapses the grid; and the RMS distance (log₁₀) of the grid points to
the MGF(λ) curve read at each map (finding (b) of ``docs/findings.md``).
"""

import numpy as np

from ..theory.maps import lam_central
from . import designs
from .common import (
    FIELD_LABELS,
    LEGEND_FONT,
    converged_mask,
    get_sweep,
    mean_over_reps,
    not_converged_label,
    put,
    put_sweep,
    summarize,
)

NAME = "lambda-collapse"
TITLE = "λ collapse: MGD grid points against λ and λ_central, MGF(λ) on top"
SIZES = designs.SETTINGS.keys()
FIGSIZE = (12.0, 9.5)
FIELDS = ("test_loss", "delta_inf_norm")
BINS = 12
#: The x label of the λ_central panels: the map and where it comes from.
CENTRAL_LABEL = "λ$_{\\rm central}$ = (1+β)γ/(2(1-β)²)  (Appendix A: central first difference)"


def beta_cmap():
    """The colour map of β: plasma without its last sixth (its pale yellow end, β ≈ 0.95, vanished on white)."""
    import matplotlib
    from matplotlib.colors import ListedColormap

    return ListedColormap(matplotlib.colormaps["plasma"](np.linspace(0.0, 0.85, 256)), name="plasma_dark")


def binned_spread(x, y, bins=BINS):
    """Pooled within-bin standard deviation of ``log10 y`` over equal bins of ``log10 x`` (finite, positive)."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log10(x[keep]), np.log10(y[keep])
    if ly.size < 3:
        return float("nan")
    edges = np.linspace(lx.min(), lx.max() + 1e-12, bins + 1)
    which = np.clip(np.digitize(lx, edges) - 1, 0, bins - 1)
    within = sum(((ly[which == b] - ly[which == b].mean()) ** 2).sum() for b in range(bins) if (which == b).any())
    return float(np.sqrt(within / ly.size))


def distance_to_curve(x, y, curve_x, curve_y):
    """RMS of log10(y) - log10(curve(x)) over the points inside the curve's range (log-log interpolation)."""
    x, y = np.asarray(x, dtype=float).ravel(), np.asarray(y, dtype=float).ravel()
    cx, cy = np.asarray(curve_x, dtype=float), np.asarray(curve_y, dtype=float)
    good = (cx > 0) & np.isfinite(cy) & (cy > 0)
    cx, cy = np.log10(cx[good]), np.log10(cy[good])
    keep = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log10(x[keep]), np.log10(y[keep])
    inside = (lx >= cx.min()) & (lx <= cx.max())
    if not inside.any():
        return float("nan"), 0
    resid = ly[inside] - np.interp(lx[inside], cx, cy)
    return float(np.sqrt(np.mean(resid**2))), int(inside.sum())


def compute(h5, size, log=print, parts="parts"):
    grid = designs.mgd_grid(parts, size, log)
    line = designs.mgf_line(parts, size, log)
    put_sweep(h5, "mgd", grid)
    put_sweep(h5, "mgf", line)
    G, B = np.meshgrid(grid.coords["gamma"], grid.coords["beta"])
    lc = lam_central(G, B)
    put(h5, "lam_central", lc, "lambda_central(gamma, beta) of Appendix A over (beta, gamma)")
    ok = converged_mask(grid, designs.FIT_TOL).all(axis=0)
    lam = G / (1.0 - B) ** 2
    out = summarize({"mgd": grid, "mgf": line}, designs.FIT_TOL)
    out["spread"] = {}
    for field in FIELDS:
        y = np.where(ok, mean_over_reps(grid, field), np.nan)
        out["spread"][field] = {"lam": binned_spread(lam, y), "lam_central": binned_spread(lc, y),
                                "gamma": binned_spread(G, y), "points": int(np.isfinite(y).sum())}
        curve_x, curve_y = np.asarray(line.coords["lam"]), mean_over_reps(line, field)
        (d_lam, n_lam), (d_lc, n_lc) = (distance_to_curve(m, y, curve_x, curve_y) for m in (lam, lc))
        out.setdefault("distance_to_mgf", {})[field] = {"lam": d_lam, "lam_central": d_lc,
                                                        "points_lam": n_lam, "points_lam_central": n_lc}
    for field, s in out["spread"].items():
        log(f"  within-bin spread of log10 {field}: by lambda {s['lam']:.4f}, by lambda_central "
            f"{s['lam_central']:.4f}, by gamma alone {s['gamma']:.4f} ({s['points']} converged grid points)")
    for field, s in out["distance_to_mgf"].items():
        log(f"  rms log10 distance of {field} to the MGF(lambda) curve: at lambda {s['lam']:.4f}, at lambda_central "
            f"{s['lam_central']:.4f}")
    return out


def plot(h5, fig):
    import json

    from ..store.files import attr_str

    grid, line = get_sweep(h5, "mgd"), get_sweep(h5, "mgf")
    summary = json.loads(attr_str(h5.attrs["summary"])) if "summary" in h5.attrs else {}
    G, B = np.meshgrid(grid.coords["gamma"], grid.coords["beta"])
    lam = G / (1.0 - B) ** 2
    lc = h5["lam_central"][...]
    ok = converged_mask(grid, designs.FIT_TOL).all(axis=0)
    mlam = np.asarray(line.coords["lam"])
    for row, field in enumerate(FIELDS):
        y = mean_over_reps(grid, field)
        curve = mean_over_reps(line, field)
        for col, (x, name) in enumerate(((lam, "λ = γ/(1-β)²"), (lc, CENTRAL_LABEL))):
            ax = fig.add_subplot(2, 2, 2 * row + col + 1)
            sc = ax.scatter(x[ok], y[ok], c=B[ok], s=10, cmap=beta_cmap(), vmin=0, vmax=1)
            ax.scatter(x[~ok], y[~ok], marker="x", s=10, color="grey", label=not_converged_label(designs.FIT_TOL))
            ax.plot(mlam[mlam > 0], curve[mlam > 0], "k-", lw=1.2, label="MGF(λ)")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel(name)
            ax.set_ylabel(FIELD_LABELS[field])
            # both measures of finding (b): the spread inside λ bins and the distance to the MGF(λ) curve (the
            # finding rests on the latter: 0.206 at λ against 0.079 at λ_central for the quick test loss)
            key = "lam" if col == 0 else "lam_central"
            spread = summary.get("spread", {}).get(field, {}).get(key)
            distance = summary.get("distance_to_mgf", {}).get(field, {})
            parts = []
            if distance.get(key) is not None:
                parts.append(f"RMS distance to MGF(λ) {distance[key]:.3f} ({distance.get('points_' + key)} points)")
            if spread is not None:
                parts.append(f"within-bin spread {spread:.3f}")
            if parts:
                ax.set_title(", ".join(parts) + " (log₁₀)", fontsize=8)
            if row == 0 and col == 1:
                fig.colorbar(sc, ax=ax, label="β")
            if row == 0 and col == 0:
                ax.legend(fontsize=LEGEND_FONT)


def setting(size):
    s = designs.settings(size)
    return designs.setting(size, steps=s["steps"], t_max=s["t_max"])
