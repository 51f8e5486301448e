"""``data-mean`` (the paper's Figure 9): the effect of the data mean μ ∈ {0, 0.5, 1, 1.5}.

For each μ: test loss (top) and ‖Δ∞‖₂ (bottom) against λ for MGF(λ) (curve, gradient flow as the
dotted line) and for MGD on the constant-λ lines (markers), mean over the data sets. The paper: for
uncentred data there is a range of λ where MGF beats GF and a smaller ‖Δ∞‖ goes with a smaller test
loss; for centred data (μ = 0) the relationship breaks. Drawn as ``mgd-vs-mgf`` draws it
(:func:`.mgd_vs_mgf.draw_against_lambda`: y limits from the converged points, MGD points that did not reach the
fit tolerance crossed, or marked at the axis edge when off that scale; diverged ones not drawn, the legend counts
them per μ), with one legend for the figure.
"""

import numpy as np

from ..status import Status
from . import designs
from .common import LEGEND_FONT, converged_mask, get_sweep, mean_over_reps, put_sweep, status_counts, summarize
from .mgd_vs_mgf import draw_against_lambda, legend_columns, mark_handles

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
    marks = [False, False, False]
    entries = {}  # one legend for the figure: every entry once, from whichever panel has it
    diverged = {}  # the diverged MGD runs of each μ (their (β, λ) means are not drawn), counted as mgd-vs-mgf does
    for col, mu in enumerate(mus):
        line, lines = get_sweep(h5, f"mu={mu:g}/mgf"), get_sweep(h5, f"mu={mu:g}/mgd")
        diverged[mu] = (status_counts(lines).get(Status.DIVERGED.label, 0), int(lines.done.sum()))
        lams = np.asarray(line.coords["lam"])
        for row, field in enumerate(("test_loss", "delta_inf_norm")):
            ax = fig.add_subplot(2, len(mus), row * len(mus) + col + 1)
            y = mean_over_reps(line, field)
            gf = [y[0]] if lams[0] == 0 and converged_mask(line, designs.FIT_TOL)[..., 0].all() else []
            drew = draw_against_lambda(ax, line, lines, field, extra=gf)
            marks = [a or b for a, b in zip(marks, drew, strict=True)]
            if lams[0] == 0:
                ax.axhline(y[0], color="k", ls=":", lw=1, label="GF (λ = 0)")
            ax.set_title(f"μ = {mu:g}", fontsize=9)
            for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
                entries.setdefault(label, handle)
    handles = list(entries.values()) + mark_handles(*marks)
    title = "diverged MGD runs (their (β, λ) means not drawn): " + ", ".join(
        f"μ = {mu:g}: {n} of {total}" for mu, (n, total) in diverged.items())
    fig.legend(handles=handles, loc="outside lower center", ncols=legend_columns(len(handles)),
               fontsize=LEGEND_FONT + 1.5, title=title, title_fontsize=LEGEND_FONT + 1.5)


def setting(size):
    s = designs.settings(size)
    return designs.setting(size, mu=",".join(f"{m:g}" for m in s["mus"]), steps=s["steps"], t_max=s["t_max"])
