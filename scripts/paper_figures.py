"""Reproduce the paper's discrete-time (Figure 2) and continuous-time (Figure 3) plots with sweeps.

Figure 2: test loss, ‖Δ∞‖₂ and ‖θ∞‖₁ of full-batch MGD over a (β, γ) grid against λ = γ/(1-β)²,
averaged over data replications; points with the same λ collapse onto one curve (Proposition 1).
Figure 3: test loss and ‖Δ∞‖₂ of MGF(λ) against λ, with the runs whose balancedness never vanished marked.

Usage (the defaults are the paper's sizes and take a while; --quick runs a small version in seconds):

    python scripts/paper_figures.py --out figures/ [--quick] [--store-dir stores/]
"""

import argparse
import os

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

import dlnmomentum as dm  # noqa: E402
from dlnmomentum.plots import plot_against_lambda  # noqa: E402


def figure_2(out, quick, store_dir):
    spec = dict(n=20, d=30, s=5, mu=1.0, sigma=1.0, n_test=1000)
    grid = dict(gammas="1e-3:1e-1:8:log", betas="0:0.9:6", steps=2e4, reps=2) if quick else \
        dict(gammas="1e-3:1e-1:20:log", betas="0:0.95:20", steps=1e6, reps=5)
    store = os.path.join(store_dir, "figure2.h5") if store_dir else None
    sw = dm.sweep(spec, tol=1e-12, store=store, resume=bool(store and os.path.exists(store)), progress=True,
                  **grid)
    m = sw.mean("rep")
    lam = m.data["lam"]
    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), constrained_layout=True)
    for ax, field, label in zip(axes, ("test_loss", "delta_inf_norm", "l1_norm"),
                                ("test loss", r"$\|\Delta_\infty\|_2$", r"$\|\theta_\infty\|_1$"), strict=True):
        plot_against_lambda(lam, m.data[field], ax=ax, ylabel=label, logy=field != "l1_norm")
    fig.suptitle("MGD over a (β, γ) grid: the limit depends on λ = γ/(1-β)² only")
    path = os.path.join(out, "figure2_mgd_lambda_collapse.png")
    fig.savefig(path, dpi=120)
    return path


def figure_3(out, quick, store_dir):
    spec = dict(n=20, d=30, s=5, mu=1.0, sigma=1.0, n_test=1000)
    lams = np.geomspace(1e-3, 3.0, 8 if quick else 30)
    store = os.path.join(store_dir, "figure3.h5") if store_dir else None
    sw = dm.sweep(spec, lams=np.concatenate([[0.0], lams]), t_max=200 if quick else 2000, reps=1 if quick else 5,
                  store=store, resume=bool(store and os.path.exists(store)), progress=True)
    m = sw.mean("rep")
    lam, crossed = m.data["lam"][1:], m.data["crossed"][1:]
    fig, ax = plt.subplots(figsize=(6, 4), constrained_layout=True)
    ax.loglog(lam, m.data["test_loss"][1:], "o-", label="test loss")
    ax.loglog(lam, m.data["delta_inf_norm"][1:], "s-", label=r"$\|\Delta_\infty\|_2$")
    ax.axhline(m.data["test_loss"][0], color="C0", ls=":", label="gradient flow test loss")
    for x, c in zip(lam, crossed, strict=True):
        if c == 0:
            ax.axvspan(x * 0.9, x * 1.1, color="grey", alpha=0.2, lw=0)
    ax.set_xlabel(r"$\lambda$")
    ax.legend()
    ax.set_title("MGF(λ): shaded where no weight crossed zero")
    path = os.path.join(out, "figure3_mgf_lambda.png")
    fig.savefig(path, dpi=120)
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="figures", help="output folder for the PNG files")
    parser.add_argument("--store-dir", default=None, help="keep the sweeps in HDF5 stores here (resumable)")
    parser.add_argument("--quick", action="store_true", help="small grids (seconds instead of hours)")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.store_dir:
        os.makedirs(args.store_dir, exist_ok=True)
    print(figure_2(args.out, args.quick, args.store_dir))
    print(figure_3(args.out, args.quick, args.store_dir))


if __name__ == "__main__":
    main()
