"""``deep-linear`` (the paper's Figure 6): train and test loss of a deep linear network (30, 60, 120, 60, 1)
after 1000 full-batch epochs over (γ, β), mean over 5 data sets and initialisations, with labelled λ
level lines; points where a replication diverged are blank and counted. The λ measure is printed and stored.
"""

import numpy as np

from ..status import Status
from . import designs
from .common import FIELD_LABELS, get_sweep, heatmap, mean_over_reps, put_sweep, run_sweep, summarize
from .networks import explained_shares, lambda_spread

NAME = "deep-linear"
TITLE = "Figure 6: deep linear network, train and test loss after {epochs} epochs over (γ, β)"
SIZES = ("tiny", "quick", "full")
FIGSIZE = (13.0, 5.0)
WIDTHS = (30, 60, 120, 60, 1)
SETTINGS = {"tiny": {"gammas": "1e-3:5e-2:3:log", "betas": "0:0.9:3", "steps": 100, "reps": 1,
                     "widths": (30, 20, 1)},
            "quick": {"gammas": "1e-3:5e-2:8:log", "betas": "0:0.95:8", "steps": 1000, "reps": 2, "widths": WIDTHS},
            "full": {"gammas": "1e-3:5e-2:20:log", "betas": "0:0.95:20", "steps": 1000, "reps": 5, "widths": WIDTHS}}


def _spec(size):
    return {"generator": "deep_linear", "widths": list(SETTINGS[size]["widths"]), "n_test": 1000}


def compute(h5, size, log=print, parts="parts"):
    s = SETTINGS[size]
    sw = run_sweep(parts, _spec(size), log, gammas=s["gammas"], betas=s["betas"], steps=s["steps"], reps=s["reps"],
                   seed=0)
    put_sweep(h5, "network", sw)
    ok = (np.asarray(sw.data["status"]) != Status.DIVERGED).all(axis=0)
    out = summarize({"network": sw}, np.inf)
    del out["network"]["reached_tol"]  # no target loss: every run trains for the same epochs
    out["lambda_spread"] = {name: lambda_spread(sw, name, mask=ok) for name in ("train_loss", "test_loss")}
    out["explained_share"] = {name: explained_shares(sw, name, mask=ok) for name in ("train_loss", "test_loss")}
    log(f"  lambda spread: {out['lambda_spread']}")
    for name, spread in out["lambda_spread"].items():
        if "reason" in spread:
            log(f"  lambda spread of {name} not computed: {spread['reason']}")
    log(f"  share of the variance explained by each combination: {out['explained_share']}")
    return out


def plot(h5, fig):
    sw = get_sweep(h5, "network")
    gammas, betas = sw.coords["gamma"], sw.coords["beta"]
    ok = (np.asarray(sw.data["status"]) != Status.DIVERGED).all(axis=0)
    for k, name in enumerate(("train_loss", "test_loss")):
        ax = fig.add_subplot(1, 2, k + 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(ok, np.log10(mean_over_reps(sw, name)), np.nan)
        heatmap(ax, gammas, betas, z, f"log₁₀ {FIELD_LABELS[name]}")
        ax.set_title(f"{FIELD_LABELS[name]}; blank: a replication diverged ({int((~ok).sum())} points)",
                     fontsize=8)


def setting(size):
    s = SETTINGS[size]
    return {"widths": "-".join(map(str, s["widths"])), "n": 20, "d": 30, "s": 5, "mu": 1.0, "sigma": 1.0,
            "init_std": 0.1, "epochs": s["steps"], **designs.seeds(s["reps"])}
