r"""The paper's network figures (Appendix "Additional Experiments"): does λ = γ/(1-β)² govern MGD?

* :func:`teacher_student_figure` (Figure 2): heatmap over (γ, β) of log₁₀ test loss of the
  teacher-student ReLU student once it reaches train loss ``tol`` (1e-5), one data set and one
  student initialisation for every point; points that did not reach it are blank.
* :func:`deep_linear_figure` (Figure 6): train and test loss of the deep linear network
  (30, 60, 120, 60, 1) after ``steps`` (1000) full-batch epochs, mean over ``reps`` (5) data
  sets and initialisations; points where a rep diverged are blank.

Both draw labelled λ level lines, write the sweep to an HDF5 store (resumable:
:func:`dlnmomentum.networks_sweep` with ``resume``) and the figure to a PNG, and return the
:class:`~dlnmomentum.Sweep` with :func:`lambda_spread` of the plotted loss.

Run: ``python -m dlnmomentum.figures.networks --out figures/ [--quick]``.
"""

import argparse
import os

import numpy as np

from ..api import networks_sweep
from ..networks import teacher_student
from ..status import Status

#: The combinations of (γ, β) whose level lines :func:`lambda_spread` can follow: λ = γ/(1-β)² (the
#: paper's claim) and the controls it is compared with, ε = γ/(1-β) (the MGF time of one step: after
#: k steps MGD has run the flow for a time kε), γ alone and 1/(1-β) alone.
SPREAD_KEYS = {"lam": "lambda = gamma/(1-beta)^2", "eps": "eps = gamma/(1-beta)", "gamma": "gamma",
               "momentum": "1/(1-beta)"}


def _key_values(m, by):
    if by not in SPREAD_KEYS:
        raise ValueError(f"by must be one of {sorted(SPREAD_KEYS)}, got {by!r}")
    if by == "lam":
        return np.asarray(m["lam"], dtype=float)
    gamma, beta = _grid(m, "gamma"), _grid(m, "beta")
    return {"eps": gamma / (1.0 - beta), "gamma": gamma, "momentum": 1.0 / (1.0 - beta)}[by]


def _grid(m, name):
    """The field ``name`` (γ or β) on the sweep's grid: the stored field, or its coordinate broadcast."""
    if name in m.data:
        return np.asarray(m[name], dtype=float)
    shape = [1] * len(m.dims)
    shape[m.dims.index(name)] = -1
    return np.broadcast_to(np.asarray(m.coords[name], dtype=float).reshape(shape), np.shape(m["lam"]))


def lambda_spread(sw, field="test_loss", bins=12, mask=None, by="lam"):
    r"""How much of the variation of ``log10(field)`` over the (γ, β) grid λ (or another combination) explains.

    Points (finite, positive, ``mask`` where given; averaged over ``rep`` first) are grouped by
    λ into ``bins`` equal bins of log λ — bands along the λ level lines. Returns a dict with
    ``along`` (pooled standard deviation of log10(field) inside the bands: spread along λ level
    lines), ``across`` (standard deviation of the band means: spread across them), ``total``,
    ``ratio = along/across`` (small: λ governs) and ``r2 = 1 - along²/total²`` (the share of
    variance explained by λ), and the number of points used. ``by`` names another key of
    :data:`SPREAD_KEYS` to bin by instead of λ (the controls of :func:`explained_shares`).
    """
    m = sw.mean("rep") if "rep" in sw.dims else sw
    vals = np.asarray(m[field], dtype=float)
    lam = _key_values(m, by)
    keep = np.isfinite(vals) & (vals > 0) & np.isfinite(lam) & (lam > 0)
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    y, x = np.log10(vals[keep]), np.log10(lam[keep])
    if y.size < 3:
        nan = float("nan")
        return {"along": nan, "across": nan, "total": nan, "ratio": nan, "r2": nan, "points": int(y.size)}
    edges = np.linspace(x.min(), x.max() + 1e-12, bins + 1)
    which = np.clip(np.digitize(x, edges) - 1, 0, bins - 1)
    within, means, weights = 0.0, [], []
    for b in range(bins):
        sel = which == b
        if sel.sum() == 0:
            continue
        within += ((y[sel] - y[sel].mean()) ** 2).sum()
        means.append(y[sel].mean())
        weights.append(sel.sum())
    along = np.sqrt(within / y.size)
    means, weights = np.asarray(means), np.asarray(weights)
    across = np.sqrt(np.average((means - np.average(means, weights=weights)) ** 2, weights=weights))
    total = y.std()
    return {"along": float(along), "across": float(across), "total": float(total),
            "ratio": float(along / across) if across > 0 else np.nan,
            "r2": float(1.0 - along**2 / total**2) if total > 0 else np.nan, "points": int(y.size)}


def explained_shares(sw, field, mask=None):
    """``{key: r2}``: the share of the variance of log10(field) that each key of :data:`SPREAD_KEYS` explains.

    λ's share means little alone: a field that depends on γ/(1-β) (the time MGD has run after a fixed
    number of steps) also varies along λ's level lines. The controls say whether λ explains more.
    """
    return {key: lambda_spread(sw, field, mask=mask, by=key)["r2"] for key in SPREAD_KEYS}


def _heatmap(ax, sw2d, values, title, label):
    import matplotlib.colors as mcolors
    from matplotlib.ticker import NullFormatter

    gammas, betas = sw2d.coords["gamma"], sw2d.coords["beta"]
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log10(np.where(np.asarray(values) > 0, values, np.nan))
    mesh = ax.pcolormesh(gammas, betas, np.ma.masked_invalid(z), shading="nearest", cmap="viridis")
    ax.figure.colorbar(mesh, ax=ax, label=label)
    g = np.geomspace(gammas.min(), gammas.max(), 200)
    b = np.linspace(betas.min(), betas.max(), 200)
    G, B = np.meshgrid(g, b)
    lam = G / (1.0 - B) ** 2
    levels = 10.0 ** np.arange(np.floor(np.log10(lam.min())), np.ceil(np.log10(lam.max())) + 0.5, 0.5)
    cs = ax.contour(G, B, lam, levels=levels, colors="white", linewidths=0.8, norm=mcolors.LogNorm())
    ax.clabel(cs, fmt=lambda v: f"λ={v:.2g}", fontsize=7)
    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(r"step size $\gamma$")
    ax.set_ylabel(r"momentum $\beta$")
    ax.set_title(title)


def _figure(ncols):
    import matplotlib

    if os.environ.get("DISPLAY", "") == "" and matplotlib.get_backend().lower() not in ("agg", "pdf", "svg"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(1, ncols, figsize=(5.6 * ncols, 4.4), constrained_layout=True)


def teacher_student_figure(png, store, *, gammas="1e-2:3e-1:20:log", betas="0:0.9:20", max_steps=200_000,
                           tol=1e-5, seed=0, n_test=1000, resume=True, threads=None, log=None):
    """Figure 2: log test loss over (γ, β) after the student reaches train loss ``tol``; returns (Sweep, spread)."""
    import matplotlib.pyplot as plt

    problem = teacher_student(n=15, d=2, teacher_width=5, student_width=20, n_test=n_test, seed=seed)
    sw = networks_sweep(problem, gammas=gammas, betas=betas, steps=max_steps, tol=tol, store=store,
                        resume=resume and os.path.exists(store), threads=threads, log=log)
    converged = np.asarray(sw.status)[0] == Status.CONVERGED
    m = sw.mean("rep")
    test = np.where(converged, m["test_loss"], np.nan)
    spread = lambda_spread(sw, "test_loss", mask=converged)
    fig, ax = _figure(1)
    _heatmap(ax, m, test, f"teacher-student ReLU: test loss at train loss {tol:g}\n"
             f"spread along λ {spread['along']:.2f} vs across {spread['across']:.2f} (log10)",
             r"$\log_{10}$ test loss")
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return sw, spread


def deep_linear_figure(png, store, *, gammas="1e-3:5e-2:20:log", betas="0:0.95:20", steps=1000, reps=5,
                       widths=(30, 60, 120, 60, 1), n_test=1000, seed=0, resume=True, threads=None, log=None):
    """Figure 6: train and test loss after ``steps`` epochs over (γ, β), mean of ``reps``; returns (Sweep, spreads)."""
    import matplotlib.pyplot as plt

    spec = {"generator": "deep_linear", "widths": tuple(widths), "n_test": n_test}
    sw = networks_sweep(spec, gammas=gammas, betas=betas, steps=steps, reps=reps, seed=seed, store=store,
                        resume=resume and os.path.exists(store), threads=threads, log=log)
    m = sw.mean("rep")
    # a point where some rep diverged is blank (its last finite iterate's loss says nothing)
    ok = (np.asarray(sw.status) != Status.DIVERGED).all(axis=0)
    spreads = {name: lambda_spread(sw, name, mask=ok) for name in ("train_loss", "test_loss")}
    fig, axes = _figure(2)
    for ax, name in zip(axes, ("train_loss", "test_loss"), strict=True):
        s = spreads[name]
        _heatmap(ax, m, np.where(ok, m[name], np.nan),
                 f"deep linear {tuple(widths)}: {name.replace('_', ' ')} after {steps} epochs\n"
                 f"mean of {reps}; spread along λ {s['along']:.2f} vs across {s['across']:.2f} (log10)",
                 rf"$\log_{{10}}$ {name.replace('_', ' ')}")
    fig.savefig(png, dpi=120)
    plt.close(fig)
    return sw, spreads


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="figures")
    parser.add_argument("--quick", action="store_true", help="small grids, seconds")
    parser.add_argument("--only", choices=("teacher-student", "deep-linear"))
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    quick_ts = dict(gammas="3e-2:3e-1:6:log", betas="0:0.9:6", max_steps=50_000) if args.quick else {}
    quick_dl = dict(gammas="1e-3:5e-2:6:log", betas="0:0.9:6", steps=300, reps=2, widths=(30, 20, 1)) \
        if args.quick else {}
    if args.only in (None, "teacher-student"):
        _, spread = teacher_student_figure(os.path.join(args.out, "teacher-student.png"),
                                           os.path.join(args.out, "teacher-student.h5"), log=print, **quick_ts)
        print("teacher-student lambda spread:", spread)
    if args.only in (None, "deep-linear"):
        _, spreads = deep_linear_figure(os.path.join(args.out, "deep-linear.png"),
                                        os.path.join(args.out, "deep-linear.h5"), log=print, **quick_dl)
        print("deep-linear lambda spreads:", spreads)


if __name__ == "__main__":
    main()
