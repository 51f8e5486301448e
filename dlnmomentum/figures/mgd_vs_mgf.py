"""``mgd-vs-mgf``: MGD on constant-λ lines against MGF(λ) (Proposition 1 along λ; the paper's Figure 7 is
``mgd-mgf-grid``).

Test loss and ‖Δ∞‖₂ (mean over the data sets) against λ: MGD(γ = λ(1-β)², β) for several β as
markers, MGF(λ) as a curve. Proposition 1: the smaller γ (the larger β at fixed λ), the closer MGD
follows MGF. The y limits come from the converged points: MGD means that did not reach the fit tolerance are
crossed, or marked ▲/▼ at the axis edge when off that scale; means with a diverged run are not drawn, and the
legend counts the diverged runs as the summary does.
"""

import numpy as np

from ..status import Status
from . import designs
from .common import (
    FIELD_LABELS,
    LEGEND_FONT,
    converged_mask,
    get_sweep,
    log_limits,
    log_ticks_125,
    mean_over_reps,
    not_converged_label,
    off_scale,
    off_scale_handle,
    put_sweep,
    status_counts,
    summarize,
)

NAME = "mgd-vs-mgf"
TITLE = "MGD(λ(1-β)², β) on constant-λ lines against MGF(λ)"
SIZES = designs.SETTINGS.keys()
FIGSIZE = (12.0, 5.0)


def relative_gaps(lines, line, field):
    """Max over λ of |MGD - MGF|/MGF for each β (converged points only)."""
    mgf = mean_over_reps(line, field)
    lam_mgf = np.asarray(line.coords["lam"])
    ok = converged_mask(lines, designs.FIT_TOL).all(axis=0)
    y = mean_over_reps(lines, field)
    out = {}
    for ib, beta in enumerate(lines.coords["beta"]):
        gaps = []
        for il, lam in enumerate(lines.coords["lam"]):
            k = np.flatnonzero(np.isclose(lam_mgf, lam, rtol=1e-12))
            if ok[ib, il] and k.size:
                gaps.append(abs(y[ib, il] - mgf[k[0]]) / abs(mgf[k[0]]))
        out[f"{beta:g}"] = float(max(gaps)) if gaps else None
    return out


def compute(h5, size, log=print, parts="parts"):
    lines = designs.mgd_lines(parts, size, log)
    line = designs.mgf_line(parts, size, log)
    put_sweep(h5, "mgd", lines)
    put_sweep(h5, "mgf", line)
    out = summarize({"mgd": lines, "mgf": line}, designs.FIT_TOL)
    out["max_relative_gap_to_mgf"] = {f: relative_gaps(lines, line, f) for f in ("test_loss", "delta_inf_norm")}
    log(f"  max relative gap MGD/MGF by beta: {out['max_relative_gap_to_mgf']}")
    return out


#: An MGD mean that converged but lies more than this many decades outside the range of the MGF curve (and
#: ``extra``) is an outlier: drawn off scale with its value (:func:`draw_against_lambda`), not taken into the
#: limits. (data-mean, μ = 0.5, quick: one run at β = 0, λ = 0.75 reached train loss 1e-20 with test loss 0.37;
#: limits taken from its mean spread the panel over four decades and flattened every other point.)
OUTLIER_DECADES = 1.0
#: The legend entry of an outlier's mark.
OUTLIER_LABEL = f"converged, > {OUTLIER_DECADES:g} decade off MGF(λ): △▽ on the frame (value beside)"


def draw_against_lambda(ax, line, lines, field, extra=()):
    """MGF(λ) of ``line`` (curve) and MGD of ``lines`` (markers, a colour per β) of ``field`` against λ, log-log.

    The y limits span the converged points (the MGF curve where every data set reached the fit tolerance, the
    MGD means whose runs all did, and ``extra``) and the MGD means that did not converge but lie within
    :data:`OUTLIER_DECADES` of the range of the curve and ``extra``; an MGD mean that did not converge is a ×
    where it falls inside them and a ▲/▼ on the frame where it does not (:func:`~.common.off_scale`); a
    converged MGD mean more than :data:`OUTLIER_DECADES` outside the range of the curve and ``extra`` is an
    outlier, an open △/▽ on the frame with its value; a mean with a diverged run is not drawn. Returns
    ``(any ×, any off scale, any outlier)``: which of the marks the legend must explain.
    """
    lam_mgf = np.asarray(line.coords["lam"])
    curve = mean_over_reps(line, field)
    flow_ok = converged_mask(line, designs.FIT_TOL).all(axis=0) & (lam_mgf > 0)
    ax.plot(lam_mgf[lam_mgf > 0], curve[lam_mgf > 0], "k-", lw=1.5, label="MGF(λ)")
    ok = converged_mask(lines, designs.FIT_TOL).all(axis=0)
    diverged = (np.asarray(lines.data["status"]) == Status.DIVERGED).any(axis=0)  # no limit: not drawn
    lam, y = np.asarray(lines.coords["lam"]), mean_over_reps(lines, field)
    reference = np.concatenate([curve[flow_ok], np.asarray(extra, dtype=float).ravel()])
    reference = reference[np.isfinite(reference) & (reference > 0)]
    outlier = np.zeros_like(ok)
    if reference.size:
        with np.errstate(divide="ignore", invalid="ignore"):
            ly = np.log10(y)
        lo_ref, hi_ref = np.log10(reference.min()), np.log10(reference.max())
        outlier = ok & np.isfinite(ly) & ((ly > hi_ref + OUTLIER_DECADES) | (ly < lo_ref - OUTLIER_DECADES))
    drawn = ok & ~outlier
    for ib, beta in enumerate(lines.coords["beta"]):
        ax.plot(lam[drawn[ib]], y[ib][drawn[ib]], "o", ms=4, color=f"C{ib}", label=f"MGD, β = {beta:g}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    # the limits: the converged points, and the means that did not converge but lie as near the curve as an
    # outlier may (drawn as ×); a mean further off is drawn on the frame, not stretching the panel
    near = ~ok & ~diverged & np.isfinite(y) & (y > 0)
    if reference.size:
        with np.errstate(divide="ignore", invalid="ignore"):
            near &= (ly <= hi_ref + OUTLIER_DECADES) & (ly >= lo_ref - OUTLIER_DECADES)
    log_limits(ax, np.concatenate([reference, y[drawn], y[near]]))
    log_ticks_125(ax.yaxis)
    lo, hi = ax.get_ylim()
    crossed = edge = outliers = 0
    for ib in range(len(lines.coords["beta"])):
        bad = ~ok[ib] & ~diverged[ib] & np.isfinite(y[ib])
        inside = bad & (y[ib] >= lo) & (y[ib] <= hi)
        if inside.any():
            ax.plot(lam[inside], y[ib][inside], "x", ms=5, color=f"C{ib}")
            crossed += int(inside.sum())
        edge += off_scale(ax, lam[bad], y[ib][bad], f"C{ib}")
        outliers += off_scale(ax, lam[outlier[ib]], y[ib][outlier[ib]], f"C{ib}", filled=False)
    ax.set_xlabel("λ")
    ax.set_ylabel(FIELD_LABELS[field])
    return crossed > 0, edge > 0, outliers > 0


def legend_columns(entries, most=6):
    """Columns of a figure's one-row legend: every entry in one row up to ``most``, else two rows (a longer row ran
    off the figure's edges)."""
    return entries if entries <= most else -(-entries // 2)


def mark_handles(crossed, edge, outlier=False):
    """Legend proxies of the marks :func:`draw_against_lambda` drew (grey: the marks take their β's colour)."""
    from matplotlib.lines import Line2D

    handles = []
    if crossed:
        handles.append(Line2D([], [], ls="none", marker="x", ms=5, color="0.3",
                              label=not_converged_label(designs.FIT_TOL)))
    if edge:
        handles.append(off_scale_handle())
    if outlier:
        handles.append(off_scale_handle(OUTLIER_LABEL, filled=False))
    return handles


def plot(h5, fig):
    """Test loss and ‖Δ∞‖₂ against λ. The legend counts the diverged *runs* (one per data set and point), as the
    summary's status counts do; a (β, λ) mean with one of them is not drawn."""
    lines, line = get_sweep(h5, "mgd"), get_sweep(h5, "mgf")
    counts = status_counts(lines)
    marks = [False, False, False]
    axes = []
    for k, field in enumerate(("test_loss", "delta_inf_norm")):
        ax = fig.add_subplot(1, 2, k + 1)
        axes.append(ax)
        marks = [a or b for a, b in zip(marks, draw_against_lambda(ax, line, lines, field), strict=True)]
    handles, _ = axes[0].get_legend_handles_labels()
    handles += mark_handles(*marks)
    fig.legend(handles=handles, loc="outside lower center", ncols=legend_columns(len(handles)),
               fontsize=LEGEND_FONT + 1, title_fontsize=LEGEND_FONT + 1,
               title=f"diverged runs: {counts.get(Status.DIVERGED.label, 0)} of {int(lines.done.sum())} "
                     "(their (β, λ) means not drawn)")


def setting(size):
    s = designs.settings(size)
    return designs.setting(size, steps=s["steps"], t_max=s["t_max"])
