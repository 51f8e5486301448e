"""Matplotlib figures of runs and sweeps (imported on demand; uses the Agg backend when headless)."""

import numpy as np


def _axes(ax, ncols=1, figsize=None):
    import matplotlib.pyplot as plt

    if ax is not None:
        return ax.figure, ax
    fig, ax = plt.subplots(1, ncols, figsize=figsize or (5.0 * ncols, 3.6), constrained_layout=True)
    return fig, ax


def plot_trajectory(result, axes=None):
    """Train/test loss and balancedness ‖Δ_k‖₂ of a recorded run against its step (or time for flows).

    Parameters
    ----------
    result : result with a ``trajectory`` (a run with ``record=``)
    axes : pair of matplotlib axes, optional

    Returns
    -------
    matplotlib.figure.Figure
    """
    tr = result.trajectory
    if tr is None or len(tr) == 0:
        raise ValueError("result has no recorded trajectory: run it with record=dlnmomentum.Record(...)")
    fig, (ax_loss, ax_delta) = _axes(axes, ncols=2, figsize=(10, 3.6))
    x = tr.step if result.kind in ("mgd", "smgd") else tr.time
    xlabel = "step k" if result.kind in ("mgd", "smgd") else "time t"
    keep = x > 0
    ax_loss.loglog(x[keep], tr.train_loss[keep], label="train loss")
    if np.isfinite(tr.test_loss).any():
        ax_loss.loglog(x[keep], tr.test_loss[keep], label="test loss")
    ax_loss.set_xlabel(xlabel)
    ax_loss.legend()
    ax_delta.semilogx(x[keep], np.linalg.norm(tr.delta[keep], axis=1), label=r"$\|\Delta\|_2$")
    ax_delta.axhline(np.linalg.norm(result.delta0), color="grey", ls="--", label=r"$\|\Delta_0\|_2$")
    ax_delta.set_xlabel(xlabel)
    ax_delta.legend()
    title = f"{result.kind.upper()}"
    if hasattr(result, "gamma"):
        title += f"  γ={result.gamma:g}, β={result.beta:g}, λ={result.lam:g}"
    elif hasattr(result, "lam"):
        title += f"  λ={result.lam:g}"
    fig.suptitle(title)
    return fig


def plot_against_lambda(lams, values, labels=None, ax=None, ylabel=None, logy=True):
    """Scatter one or more per-run quantities against λ (the paper's collapse plots).

    ``values`` is an array shaped like ``lams`` or a list of such arrays (one per label).
    """
    fig, ax = _axes(ax)
    lams = np.asarray(lams, dtype=float)
    series = values if isinstance(values, (list, tuple)) else [values]
    labels = labels or [None] * len(series)
    for vals, label in zip(series, labels, strict=True):
        ax.scatter(lams.ravel(), np.asarray(vals, dtype=float).ravel(), s=10, label=label)
    ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(r"$\lambda = \gamma/(1-\beta)^2$")
    if ylabel:
        ax.set_ylabel(ylabel)
    if any(labels):
        ax.legend()
    return fig
