"""``mgf-lambda`` (the paper's Figure 3): test loss and ‖Δ∞‖₂ of MGF(λ) against λ, mean over the data sets.

The range of λ where Δ_t never reaches 0 (no weight changes sign, for every data set; Theorem 1 holds)
is shaded as one band from λ = 0. The small-λ approximation of Appendix C.4,
Δ∞ ≈ Δ0 exp(-2λ∫‖∇L‖²) with the integral of gradient flow, is drawn over ‖Δ∞‖₂, and so is the main
text's Δ∞² ≈ Δ0² exp(-2λ∫‖∇L‖²) (finding (c) of ``docs/findings.md``). Runs that did not reach the
fit tolerance are marked.
"""

import numpy as np

from ..api import gf
from ..problem import sparse_regression
from . import designs
from .common import (
    FIELD_LABELS,
    LEGEND_FONT,
    converged_mask,
    mark_points,
    mean_over_reps,
    not_converged_label,
    put,
    put_sweep,
    summarize,
)

NAME = "mgf-lambda"
TITLE = "Figure 3: MGF(λ) at convergence, test loss and ‖Δ∞‖₂ against λ"
SIZES = designs.SETTINGS.keys()
FIGSIZE = (7.5, 5.0)
#: The small-λ formulas are first-order in λ (Appendix C.4: λ → 0); they are drawn, and compared with the
#: measured ‖Δ∞‖₂ in the summary, for λ up to this (the appendix form is 29 % off at 0.1 in ``docs/findings.md`` (c)).
SMALL_LAM_MAX = 0.2
#: The legend entry of the shaded band (:func:`no_crossing_band`); ``mgf-triple`` draws the same band.
BAND_LABEL = "no sign change of w± (Δₜ never 0), all data sets"


def small_lambda_curves(size, lams):
    """‖Δ∞‖₂ by the appendix's and the main text's small-λ formulas, mean over reps (GF's ∫∇L² per rep)."""
    s = designs.settings(size)
    appendix, main_text = [], []
    for rep in range(s["reps"]):
        problem = sparse_regression(**designs.data_spec(), seed=rep)
        r = gf(problem, t_max=s["t_max"], tol=designs.STOP_TOL, alpha=designs.ALPHA)
        g2 = np.asarray(r.grad_sq_integral)
        delta0 = np.asarray(r.delta0)
        appendix.append([np.linalg.norm(delta0 * np.exp(-2.0 * lam * g2)) for lam in lams])
        main_text.append([np.linalg.norm(np.sqrt(delta0**2 * np.exp(-2.0 * lam * g2))) for lam in lams])
    return np.mean(appendix, axis=0), np.mean(main_text, axis=0)


def compute(h5, size, log=print, parts="parts"):
    sw = designs.mgf_line(parts, size, log)
    put_sweep(h5, "mgf", sw)
    lams = np.asarray(sw.coords["lam"])
    fine = np.linspace(0.0, min(SMALL_LAM_MAX, lams.max()), 60)
    appendix, main_text = small_lambda_curves(size, np.concatenate([fine, lams]))  # one GF run per rep
    appendix, at_app = appendix[:fine.size], appendix[fine.size:]
    main_text, at_main = main_text[:fine.size], main_text[fine.size:]
    put(h5, "small_lam/lam", fine, f"lambda of the small-lambda curves (up to SMALL_LAM_MAX = {SMALL_LAM_MAX:g})")
    put(h5, "small_lam/appendix", appendix, "||Delta0 exp(-2 lam int grad^2)||_2 (Appendix C.4), mean over reps")
    put(h5, "small_lam/main_text", main_text, "||sqrt(Delta0^2 exp(-2 lam int grad^2))||_2 (main text)")
    put(h5, "small_lam/at_line_appendix", at_app, "the appendix's small-lambda ||Delta_inf||_2 at the line's lambda")
    put(h5, "small_lam/at_line_main_text", at_main, "the main text's small-lambda ||Delta_inf||_2 at the line's lambda")
    delta = mean_over_reps(sw, "delta_inf_norm")
    test = mean_over_reps(sw, "test_loss")
    small = lams <= 0.1
    out = summarize({"mgf": sw}, designs.FIT_TOL)
    with np.errstate(invalid="ignore", divide="ignore"):
        out["small_lambda_relative_error"] = {
            f"{lam:g}": {"appendix": float(a / m - 1), "main_text": float(b / m - 1)}
            for lam, a, b, m in zip(lams, at_app, at_main, delta, strict=True) if 0 < lam <= SMALL_LAM_MAX}
    out["delta_decreases_for_small_lam"] = bool(np.all(np.diff(delta[small]) < 0))
    out["best_mgf_test_loss"] = float(np.nanmin(test[1:])) if lams[0] == 0 else float(np.nanmin(test))
    out["gf_test_loss"] = float(test[0]) if lams[0] == 0 else None
    return out


def no_crossing_band(sw):
    """The largest λ such that no run at any λ' ≤ λ changed sign (0 if the first λ's runs cross)."""
    lams = np.asarray(sw.coords["lam"])
    crossed = np.asarray(sw.data["crossed"]).astype(bool).any(axis=0)
    last = 0.0
    for lam, c in zip(lams, crossed, strict=True):
        if c:
            break
        last = lam
    return last


def plot(h5, fig):
    from .common import get_sweep

    sw = get_sweep(h5, "mgf")
    lams = np.asarray(sw.coords["lam"])
    ax = fig.add_subplot(1, 1, 1)
    test = mean_over_reps(sw, "test_loss")
    delta = mean_over_reps(sw, "delta_inf_norm")
    ax.plot(lams, test, "o-", color="C0", label=FIELD_LABELS["test_loss"])
    ax.set_yscale("log")
    ax.set_xlabel("λ")
    ax.set_ylabel(FIELD_LABELS["test_loss"], color="C0")
    ax2 = ax.twinx()
    ax2.plot(lams, delta, "s-", color="C3", label=FIELD_LABELS["delta_inf_norm"])
    small = h5["small_lam/lam"][...]
    keep = small <= SMALL_LAM_MAX  # (a store written before the curves stopped there holds them to λ = 1)
    ax2.plot(small[keep], h5["small_lam/appendix"][...][keep], "--", color="C3", lw=1,
             label=f"App. C.4: Δ∞ ≈ Δ₀·exp(-2λ∫∇L²), λ ≤ {SMALL_LAM_MAX:g}")
    ax2.plot(small[keep], h5["small_lam/main_text"][...][keep], ":", color="k", lw=1,
             label=f"main text: Δ∞² ≈ Δ₀²·exp(-2λ∫∇L²), λ ≤ {SMALL_LAM_MAX:g}")
    ax2.set_yscale("log")
    ax2.set_ylabel(FIELD_LABELS["delta_inf_norm"], color="C3")
    band = no_crossing_band(sw)
    if band > 0:
        ax.axvspan(0, band, color="grey", alpha=0.2, lw=0, label=BAND_LABEL)
    bad = ~converged_mask(sw, designs.FIT_TOL).all(axis=0)
    mark_points(ax, lams, test, bad, not_converged_label(designs.FIT_TOL))
    mark_points(ax2, lams, delta, bad, None)
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    fig.legend(h1 + h2, l1 + l2, fontsize=LEGEND_FONT, loc="outside lower center", ncols=2)


def setting(size):
    s = designs.settings(size)
    return designs.setting(size, t_max=s["t_max"])
