"""Print the numbers of ``docs/findings.md`` from figure stores (reads the stores; runs nothing).

    dlnm reproduce --quick --out figures        # or --full; writes figures/<name>.h5
    python scripts/findings.py figures [a|b|c|d|e|f|g|h]  # the findings, from those stores

(a) the distance to the Δ∞-only prediction after sign changes (``crossings.h5``), (b) λ against λ_central
as the map from MGD to MGF (``lambda-collapse.h5``), (c) the small-λ formulas for Δ∞ (``mgf-lambda.h5``),
(d) what λ explains in the network figures, against γ/(1-β), γ and 1/(1-β) (``deep-linear.h5``,
``teacher-student.h5``), (e) the teacher-student points that never reach train loss 1e-5
(``teacher-student.h5``), (f) how far MGD and MGF(λ) are apart over the (β, γ) grid, the paper's Figure 7
(``mgd-mgf-grid.h5``), (g) how much of the MGD grid reaches train loss 1e-8 within its step cap (``mgd-grid.h5``;
at ``--full`` the paper's 10⁶ epochs), (h) MGD against MGF(λ) where MGF's limit is beyond heavy ball's stability
edge (``data-mean.h5``; the sharpness at a run's end from its stored θ and Δ∞ and its data set, regenerated from
its seed: the one thing here computed rather than read).
"""

import os
import sys

import h5py
import numpy as np

from dlnmomentum.figures import common, designs
from dlnmomentum.status import Status


def _open(folder, name):
    path = os.path.join(folder, f"{name}.h5")
    if not os.path.exists(path):
        sys.exit(f"{path} does not exist: run `dlnm figure {name} --quick --out {folder}` first")
    return h5py.File(path, "r")


def finding_a(folder):
    with _open(folder, "crossings") as h5:
        size = common.read_attrs(h5)[1]
        print(f"(a) crossings.h5 [{size}]")
        for name in ("mgd", "mgf"):
            sw = common.get_sweep(h5, name)
            status = np.asarray(sw.data["status"])
            loss = np.asarray(sw.data["train_loss"])
            for label, keep in ((f"train loss <= {designs.FIT_TOL:g}", loss <= designs.FIT_TOL),
                                ("converged to 1e-20", status == Status.CONVERGED)):
                keep = keep & sw.done & (np.asarray(sw.data["theory_reason"]) == 0)
                crossed = np.asarray(sw.data["sign_changes"]) > 0
                dist = np.asarray(sw.data["normalized_distance"])
                gap = np.asarray(sw.data["prediction_gap"])
                theta0 = np.abs(np.asarray(sw.data["theta0_tilde"])).max(axis=-1)
                for what, sel in (("with sign changes", keep & crossed), ("without", keep & ~crossed)):
                    if sel.any():
                        print(f"  {name}, {label}, {what}: {int(sel.sum())} runs; normalised distance max "
                              f"{dist[sel].max():.3g} ({int((dist[sel] > 0.01).sum())} above 0.01); Theorem 1/2 "
                              f"prediction gap max {gap[sel].max():.2g}; max |theta0_tilde| {theta0[sel].max():.2g}")


def finding_b(folder):
    with _open(folder, "lambda-collapse") as h5:
        _, size, _, summary = common.read_attrs(h5)
        print(f"(b) lambda-collapse.h5 [{size}]: within-bin spread of log10 (smaller: the map collapses the grid)")
        for field, s in summary["spread"].items():
            print(f"  {field}: by lambda {s['lam']:.3f}, by lambda_central {s['lam_central']:.3f}"
                  + (f", by gamma alone {s['gamma']:.3f}" if "gamma" in s else "")
                  + f"  ({s['points']} grid points at train loss <= {designs.FIT_TOL:g})")
        print("  rms log10 distance of the grid points to the MGF(lambda) curve read at each map:")
        for field, s in summary.get("distance_to_mgf", {}).items():
            print(f"  {field}: at lambda {s['lam']:.3f} ({s['points_lam']} points), at lambda_central "
                  f"{s['lam_central']:.3f} ({s['points_lam_central']} points)")


def finding_c(folder):
    with _open(folder, "mgf-lambda") as h5:
        _, size, _, summary = common.read_attrs(h5)
        print(f"(c) mgf-lambda.h5 [{size}]: relative error of the small-lambda formulas for ||Delta_inf||_2")
        for lam, e in summary.get("small_lambda_relative_error", {}).items():
            print(f"  lambda = {lam}: appendix Delta0 exp(-2 lam G) {e['appendix']:+.1%}, main text "
                  f"Delta0^2 exp(-2 lam G) (Delta^2 on both sides) {e['main_text']:+.1%}")


def finding_d(folder):
    for name, fields in (("deep-linear", ("train_loss", "test_loss")), ("teacher-student", ("test_loss",))):
        with _open(folder, name) as h5:
            _, size, _, summary = common.read_attrs(h5)
            print(f"(d) {name}.h5 [{size}]: share of the variance of log10 explained by the level lines of each "
                  "combination (r2)")
            spreads = summary["lambda_spread"]
            for field in fields:
                shares = summary["explained_share"][field]
                spread = spreads[field] if field in spreads else spreads
                print(f"  {field}: " + ", ".join(f"{k} {v:.2f}" for k, v in shares.items())
                      + f"  ({spread['points']} points; std of log10 over them {spread['total']:.3g})")
                if "reason" in spread:  # (NaN shares: too few points per bin)
                    print(f"  {field}: not computed: {spread['reason']}")


def finding_e(folder):
    with _open(folder, "teacher-student") as h5:
        _, size, setting, summary = common.read_attrs(h5)
        cap = setting.get("steps_cap")
        nr = summary["not_reached"]
        spec = summary.get("spec", "package-0.6")  # (stores written before the named problems: 0.6's)
        print(f"(e) teacher-student.h5 [{size}], problem {spec!r} (init scale {setting.get('init_scale', 1.0):g}, "
              f"seed {setting.get('seed')}), cap {cap} steps: {nr['of'] - nr['points']} of {nr['of']} points reach "
              f"train loss 1e-5, {nr['points']} never do", end="")
        if nr["points"]:
            print(f"; their final train losses {nr['train_loss_min']:.3g} .. {nr['train_loss_max']:.3g}; "
                  "most common (value, points): " + ", ".join(f"({v:.3g}, {c})" for v, c in nr["plateaus"]), end="")
        shares = summary["explained_share"]["test_loss"]
        print("\n  share of the variance of log10 test loss explained (r2): "
              + ", ".join(f"{k} {v:.2f}" for k, v in shares.items())
              + f"; std of log10 test loss over the points {summary['lambda_spread']['total']:.3g}")


def finding_f(folder):
    with _open(folder, "mgd-mgf-grid") as h5:
        _, size, _, summary = common.read_attrs(h5)
        diff = summary["log10_difference"]
        print(f"(f) mgd-mgf-grid.h5 [{size}]: |log10 test loss MGD - MGF(lambda)| over {diff['points']} grid points "
              f"where MGD reached train loss {designs.FIT_TOL:g}: median {diff['median_abs']:.3g}, max "
              f"{diff['max_abs']:.3g} (at gamma = {diff['at_gamma']:.3g}, beta = {diff['at_beta']:.3g}); max over the "
              f"smaller half of the step sizes {diff.get('max_abs_small_gamma', float('nan')):.3g}")


def finding_g(folder):
    with _open(folder, "mgd-grid") as h5:
        _, size, setting, _ = common.read_attrs(h5)
        sw = common.get_sweep(h5, "mgd")
        loss = np.asarray(sw.data["train_loss"])
        done = sw.done
        gamma = np.asarray(sw.data["gamma"])
        beta = np.asarray(sw.data["beta"])
        eps = gamma / (1.0 - beta)
        fit = done & (loss <= designs.FIT_TOL)
        print(f"(g) mgd-grid.h5 [{size}]: cap {setting.get('steps')} steps; {int(fit.sum())} of {int(done.sum())} runs "
              f"reach train loss {designs.FIT_TOL:g} ({int((done & ~fit).sum())} do not)")
        low = done & ~fit
        if low.any():
            print(f"  the runs that do not: eps = gamma/(1-beta) {eps[low].min():.3g} .. {eps[low].max():.3g}, final "
                  f"train loss {loss[low].min():.3g} .. {loss[low].max():.3g}; the smallest eps of a run that does: "
                  f"{eps[fit].min() if fit.any() else float('nan'):.3g}")
            flat = np.moveaxis(low, sw.dims.index("rep"), -1).reshape(-1, low.shape[sw.dims.index("rep")]) \
                if "rep" in sw.dims else low.reshape(-1, 1)
            print(f"  (beta, gamma) points where no data set reaches it: {int(flat.all(axis=1).sum())}, where some "
                  f"do not: {int(flat.any(axis=1).sum())} of {flat.shape[0]}")


def _sharpness(X, theta, delta):
    """λmax of ∇²F at an interpolator in the (u, v) a step acts on: the Hessian there is J H Jᵀ with
    J = [diag(v); diag(u)], H = XᵀX/n, whose non-zero eigenvalues are those of H^½ diag(u² + v²) H^½, and
    u² + v² = (w₊² + w₋²)/2 = √(4θ² + Δ²) (from w₊² − w₋² = 4θ and |w₊w₋| = Δ): stored θ and Δ∞ give it."""
    root = np.sqrt(np.sqrt(4.0 * theta ** 2 + delta ** 2))
    return float(np.linalg.eigvalsh((X * root).T @ (X * root) / X.shape[0])[-1])


def finding_h(folder):
    """MGD against MGF(λ) at the same λ on ``data-mean``'s constant-λ lines, with heavy ball's stability edge.

    Heavy ball on a quadratic of curvature S is stable iff γS < 2(1 + β); ρ = γS/(2(1 + β)) at the end of a run
    (S from the stored θ, Δ∞ and the data set of its rep, regenerated from its seed)."""
    from dlnmomentum import sparse_regression

    with _open(folder, "data-mean") as h5:
        size = common.read_attrs(h5)[1]
        print(f"(h) data-mean.h5 [{size}]: converged MGD (train loss <= {designs.FIT_TOL:g}) against MGF(λ), same λ "
              "and data set; rho = gamma S / (2 (1 + beta)), S the sharpness at the end")
        for mu in sorted((k for k in h5 if k.startswith("mu=")), key=lambda k: float(k[3:])):
            mgd, mgf = common.get_sweep(h5, f"{mu}/mgd"), common.get_sweep(h5, f"{mu}/mgf")
            spec, seed = mgd.config["spec"], mgd.config["seed"]
            flams = [float(v) for v in np.asarray(mgf.coords["lam"])]
            lams, betas = np.asarray(mgd.coords["lam"]), np.asarray(mgd.coords["beta"])
            ok = (np.asarray(mgd.data["train_loss"]) <= designs.FIT_TOL) & mgd.done
            rows = []
            for r, b, k in np.argwhere(ok):
                j = flams.index(float(lams[k]))
                if not mgf.done[r, j] or mgf.data["status"][r, j] != Status.CONVERGED:
                    continue
                X = sparse_regression(**spec, seed=seed + r).X
                gamma, beta = float(mgd.data["gamma"][r, b, k]), float(betas[b])
                edge = 2.0 * (1.0 + beta) / gamma
                rho_gd = _sharpness(X, mgd.data["theta"][r, b, k], mgd.data["delta_inf"][r, b, k]) / edge
                rho_f = _sharpness(X, mgf.data["theta"][r, j], mgf.data["delta_inf"][r, j]) / edge
                ratio = float(mgd.data["test_loss"][r, b, k] / mgf.data["test_loss"][r, j])
                done = mgd.data["status"][r, b, k] == Status.CONVERGED
                rows.append((rho_f, rho_gd, ratio, r, beta, gamma, done))
            if not rows:
                print(f"  {mu}: no run reached it with MGF(λ) converged at its λ")
                continue
            rows = np.array(rows)
            sharp = rows[:, 0] > 1.0
            print(f"  {mu}: {len(rows)} runs; MGF's limit beyond MGD's edge (rho > 1) in {int(sharp.sum())}; "
                  f"elsewhere (rho of MGF's limit at most {rows[~sharp, 0].max():.3f}) the test-loss ratio MGD/MGF, "
                  "min, median and max:", "; ".join(
                      f"{label} ({int(sel.sum())}) {rows[sel, 2].min():.3g}, {np.median(rows[sel, 2]):.3g}, "
                      f"{rows[sel, 2].max():.3g}"
                      for label, sel in (("converged to 1e-20", ~sharp & (rows[:, 6] == 1)),
                                         ("stopped at the cap", ~sharp & (rows[:, 6] == 0))) if sel.any()))
            for rho_f, rho_gd, ratio, r, beta, gamma, _ in rows[sharp]:
                print(f"    data set {int(r)}, beta {beta:g}, gamma {gamma:.4g}: rho of MGF's limit {rho_f:.3f}, of "
                      f"MGD's end {rho_gd:.4f}; test loss {ratio:.3g}x MGF's")


def main(argv):
    if not argv:
        sys.exit(__doc__)
    folder, which = argv[0], (argv[1:] or ["a", "b", "c", "d", "e", "f", "g", "h"])
    for w in which:
        {"a": finding_a, "b": finding_b, "c": finding_c, "d": finding_d, "e": finding_e, "f": finding_f,
         "g": finding_g, "h": finding_h}[w](folder)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
