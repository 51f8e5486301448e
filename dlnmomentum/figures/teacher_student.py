"""``teacher-student`` (the paper's Figure 2): log₁₀ test loss of a ReLU student once it reaches train loss
1e-5, over (γ, β), one data set and one student initialisation for every point, with labelled λ level
lines; points that never reached it are blank and counted. The λ measure (:func:`.networks.lambda_spread`:
the spread of log test loss along λ level lines against the spread across them) is printed and stored.
"""

import numpy as np

from ..status import Status
from .common import get_sweep, heatmap, put_sweep, run_sweep, summarize
from .networks import explained_shares, lambda_spread

NAME = "teacher-student"
TITLE = "Figure 2: teacher-student ReLU network, test loss at train loss 1e-5 over (γ, β)"
SIZES = ("tiny", "quick", "full")
FIGSIZE = (7.0, 5.5)
TOL = 1e-5
#: The paper's setting: 15 inputs in R², teacher width 5, student width 20.
SPEC = {"generator": "teacher_student", "n": 15, "d": 2, "teacher_width": 5, "student_width": 20, "n_test": 1000}
SETTINGS = {"tiny": {"gammas": "3e-2:3e-1:3:log", "betas": "0:0.9:3", "steps": 5_000},
            "quick": {"gammas": "1e-2:3e-1:8:log", "betas": "0:0.9:8", "steps": 200_000},
            "full": {"gammas": "1e-2:3e-1:20:log", "betas": "0:0.9:20", "steps": 200_000}}


def compute(h5, size, log=print, parts="parts"):
    s = SETTINGS[size]
    sw = run_sweep(parts, SPEC, log, gammas=s["gammas"], betas=s["betas"], steps=s["steps"], tol=TOL, seed=0)
    put_sweep(h5, "network", sw)
    converged = np.asarray(sw.data["status"])[0] == Status.CONVERGED
    out = summarize({"network": sw}, TOL)
    out["lambda_spread"] = lambda_spread(sw, "test_loss", mask=converged)
    out["explained_share"] = {"test_loss": explained_shares(sw, "test_loss", mask=converged)}
    log(f"  lambda spread of log10 test loss: {out['lambda_spread']}")
    log(f"  share of its variance explained by each combination: {out['explained_share']['test_loss']}")
    return out


def plot(h5, fig):
    sw = get_sweep(h5, "network")
    gammas, betas = sw.coords["gamma"], sw.coords["beta"]
    converged = np.asarray(sw.data["status"])[0] == Status.CONVERGED
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(converged, np.log10(np.asarray(sw.data["test_loss"])[0]), np.nan)
    ax = fig.add_subplot(1, 1, 1)
    heatmap(ax, gammas, betas, z, "log₁₀ test loss")
    ax.set_title(f"blank: never reached train loss {TOL:g} ({int((~converged).sum())} of {converged.size})",
                 fontsize=8)


def setting(size):
    s = SETTINGS[size]
    return {k: v for k, v in SPEC.items() if k != "generator"} | {"steps_cap": s["steps"], "tol": TOL, "seed": 0}
