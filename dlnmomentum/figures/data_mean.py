"""``data-mean`` (the paper's Figure 9): the effect of the data mean μ ∈ {0, 0.5, 1, 1.5}.

For each μ: test loss (top) and ‖Δ∞‖₂ (bottom) against λ for MGF(λ) (curve, gradient flow as the
dotted line) and for MGD on the constant-λ lines (markers), mean over the data sets. The paper: for
uncentred data there is a range of λ where MGF beats GF and a smaller ‖Δ∞‖ goes with a smaller test
loss; for centred data (μ = 0) the relationship breaks. MGD points that did not reach the fit tolerance
are crossed; diverged ones are not drawn (the summary counts them).
"""

import numpy as np

from ..status import Status
from . import designs
from .common import converged_mask, get_sweep, mean_over_reps, put_sweep, summarize

NAME = "data-mean"
TITLE = "Figure 9: the data mean μ, MGF(λ) and MGD against λ"
SIZES = designs.SETTINGS.keys()
FIGSIZE = (16.0, 8.0)


def compute(h5, size, log=print, parts="parts"):
    out = {"mus": designs.settings(size)["mus"]}
    for mu in out["mus"]:
        line = designs.mgf_line(parts, size, log, mu=mu)
        lines = designs.mgd_lines(parts, size, log, mu=mu)
        put_sweep(h5, f"mu={mu:g}/mgf", line)
        put_sweep(h5, f"mu={mu:g}/mgd", lines)
        s = summarize({"mgf": line, "mgd": lines}, designs.FIT_TOL)
        test = mean_over_reps(line, "test_loss")
        lams = np.asarray(line.coords["lam"])
        if lams[0] == 0:
            s["gf_test_loss"] = float(test[0])
            s["best_mgf_test_loss"] = float(np.nanmin(test[1:]))
            s["best_lam"] = float(lams[1:][np.nanargmin(test[1:])])
        out[f"mu={mu:g}"] = s
    return out


def plot(h5, fig):
    mus = sorted(float(k.split("=")[1]) for k in h5 if k.startswith("mu="))
    for col, mu in enumerate(mus):
        line, lines = get_sweep(h5, f"mu={mu:g}/mgf"), get_sweep(h5, f"mu={mu:g}/mgd")
        lams = np.asarray(line.coords["lam"])
        ok = converged_mask(lines, designs.FIT_TOL).all(axis=0)
        diverged = (np.asarray(lines.data["status"]) == Status.DIVERGED).any(axis=0)  # no limit: not drawn
        for row, (field, label) in enumerate((("test_loss", "test loss"), ("delta_inf_norm", "‖Δ∞‖₂"))):
            ax = fig.add_subplot(2, len(mus), row * len(mus) + col + 1)
            y = mean_over_reps(line, field)
            ax.plot(lams[lams > 0], y[lams > 0], "k-", lw=1.3, label="MGF(λ)")
            if lams[0] == 0:
                ax.axhline(y[0], color="k", ls=":", lw=1, label="GF")
            ym = mean_over_reps(lines, field)
            for ib, beta in enumerate(lines.coords["beta"]):
                lam = np.asarray(lines.coords["lam"])
                ax.plot(lam[ok[ib]], ym[ib][ok[ib]], "o", ms=3, color=f"C{ib}", label=f"MGD β={beta:g}")
                bad = ~ok[ib] & ~diverged[ib] & np.isfinite(ym[ib])
                ax.plot(lam[bad], ym[ib][bad], "x", ms=4, color=f"C{ib}",
                        label="not converged" if ib == 0 and row == 0 else None)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"μ = {mu:g}: {label}", fontsize=8)
            ax.set_xlabel("λ")
            if row == 0 and col == 0:
                ax.legend(fontsize=5)


def setting(size):
    s = designs.settings(size)
    return designs.setting(size, mu=",".join(f"{m:g}" for m in s["mus"]), steps=s["steps"], t_max=s["t_max"])
