"""``mgd-vs-mgf``: MGD on constant-λ lines against MGF(λ) (Proposition 1 along λ; the paper's Figure 7 is
``mgd-mgf-grid``).

Test loss and ‖Δ∞‖₂ (mean over the data sets) against λ: MGD(γ = λ(1-β)², β) for several β as
markers, MGF(λ) as a curve. Proposition 1: the smaller γ (the larger β at fixed λ), the closer MGD
follows MGF. Points that did not reach the fit tolerance (or diverged) are crossed.
"""

import numpy as np

from ..status import Status
from . import designs
from .common import converged_mask, get_sweep, mean_over_reps, put_sweep, summarize

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


def plot(h5, fig):
    lines, line = get_sweep(h5, "mgd"), get_sweep(h5, "mgf")
    ok = converged_mask(lines, designs.FIT_TOL).all(axis=0)
    diverged = (np.asarray(lines.data["status"]) == Status.DIVERGED).any(axis=0)  # not drawn: no limit
    lam_mgf = np.asarray(line.coords["lam"])
    for k, (field, label) in enumerate((("test_loss", "test loss"), ("delta_inf_norm", "‖Δ∞‖₂"))):
        ax = fig.add_subplot(1, 2, k + 1)
        curve = mean_over_reps(line, field)
        ax.plot(lam_mgf[lam_mgf > 0], curve[lam_mgf > 0], "k-", lw=1.5, label="MGF(λ)")
        y = mean_over_reps(lines, field)
        for ib, beta in enumerate(lines.coords["beta"]):
            lam = np.asarray(lines.coords["lam"])
            ax.plot(lam[ok[ib]], y[ib][ok[ib]], "o", ms=4, color=f"C{ib}", label=f"MGD, β = {beta:g}")
            bad = ~ok[ib] & ~diverged[ib] & np.isfinite(y[ib])
            ax.plot(lam[bad], y[ib][bad], "x", ms=5, color=f"C{ib}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("λ")
        ax.set_ylabel(label)
        if k == 0:
            ax.legend(fontsize=6, title=f"×: not converged; diverged: {int(diverged.sum())} (not drawn)",
                      title_fontsize=6)


def setting(size):
    s = designs.settings(size)
    return designs.setting(size, steps=s["steps"], t_max=s["t_max"])
