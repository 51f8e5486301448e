"""What every run kind shares: argument checks, the initial weights and the gradient-form choice."""


import numpy as np

from ..kernels import layout as KL
from ..kernels.config import OVERFLOW
from ..problem import Problem
from ..progress import FLOPS_PER_SECOND
from ..progress import resolve as resolve_progress
from ..record import Record
from ..validate import ParameterValueError, as_array, as_float

#: Full-batch gradient forms: ``hessian`` is ``Hθ - b`` (d² per gradient), ``data`` is
#: ``Xᵀ(Xθ - y)/n`` (2nd), ``auto`` the cheaper of the two.
GRADIENT_FORMS = ("auto", "hessian", "data")


def check_problem(problem):
    if not isinstance(problem, Problem):
        raise TypeError(f"problem must be a dlnmomentum.Problem (see sparse_regression), got {type(problem).__name__}")


def check_record(record):
    if record is not None and not isinstance(record, Record):
        raise TypeError(f"record must be a dlnmomentum.Record or None, got {type(record).__name__}")


def check_gradient_form(gradient):
    if gradient not in GRADIENT_FORMS:
        raise ValueError(f"gradient must be one of {GRADIENT_FORMS}, got {gradient!r}")
    return gradient


def check_replace(replace, batch_size):
    """``replace`` as a bool, True only for SMGD: the one check of every MGD run kind (diagonal and network).

    ``batch_size`` is the validated one (None for full batch); without one a ``replace=True`` would be
    ignored, since a full-batch step draws no batch.
    """
    if not isinstance(replace, (bool, np.bool_)):
        raise TypeError(f"replace must be a bool, got {replace!r}")
    if replace and batch_size is None:
        raise ParameterValueError("replace=True draws SMGD batches with replacement: it needs a batch_size (without "
                                  "one the run is full-batch MGD)", "replace", "batch_size")
    return bool(replace)


def gradient_mode(gradient, n, d, minibatch=False):
    """The kernels' gradient mode (``kernels.layout.MODE_*``) for a gradient form on an (n, d) problem.

    The one rule of every engine: minibatches use ``MODE_MINIBATCH``; ``auto`` takes the Hessian
    form when it is not dearer than the data form (d² ≤ 2nd, i.e. d ≤ 2n).
    """
    if minibatch:
        return KL.MODE_MINIBATCH
    if gradient == "hessian" or (gradient == "auto" and d <= 2 * n):
        return KL.MODE_HESSIAN
    return KL.MODE_DATA


def uses_hessian(mode):
    """Whether a kernel in gradient ``mode`` reads H = XᵀX/n (the form ``Hθ - b``): the one rule of every engine
    (single run, CPU sweep, CUDA sweep) for forming that d × d matrix. The data and minibatch forms never read it,
    so wide data (d > 2n under ``auto``; d = 1e5 would make H 80 GB) works from X alone."""
    return mode == KL.MODE_HESSIAN


def gradient_cost(mode, n, d, batch_size=None):
    """Multiply-adds of one gradient in ``mode`` (chunk sizing)."""
    if mode == KL.MODE_HESSIAN:
        return d * d
    if mode == KL.MODE_DATA:
        return 2 * n * d
    return 2 * (batch_size or 1) * d


#: Initial weights are below this in magnitude: the kernels' divergence bound (an iterate that reaches it has
#: diverged), since they square the weights (w², θ = u·v, Δ = |u² - v²|) and squares below 1e300 stay finite. The
#: default initialisation ``u0 = α`` also needs α² (the balancedness Δ0) to be a normal float64, hence
#: α >= 1/WEIGHT_LIMIT.
WEIGHT_LIMIT = OVERFLOW


#: The initial scale of every user function's signature (``alpha=0.01``: the paper's).
DEFAULT_ALPHA = 0.01


def as_alpha(name, alpha):
    """The initial scale α (u0 = α·1) in [1/WEIGHT_LIMIT, WEIGHT_LIMIT): α² a normal float64, α below the divergence
    bound."""
    return as_float(name, alpha, low=1.0 / WEIGHT_LIMIT, high=WEIGHT_LIMIT, high_open=True)


def initial_weights(d, alpha, u0, v0):
    """(u0, v0) as validated float arrays; default ``u0 = α·1``, ``v0 = 0``. An ``alpha`` other than the default
    beside a given ``u0`` is refused (it would be ignored)."""
    alpha = as_alpha("alpha", alpha)
    if u0 is None:
        u0 = np.full(d, alpha)
    else:
        if alpha != DEFAULT_ALPHA:
            raise ValueError(f"alpha sets the default u0 = alpha * 1: give alpha ({alpha!r}) or u0, not both")
        u0 = as_bounded_vector("u0", u0, d)
    v0 = np.zeros(d) if v0 is None else as_bounded_vector("v0", v0, d)
    delta0 = np.abs(u0 * u0 - v0 * v0)
    if not np.all(delta0 > 0):
        bad = np.flatnonzero(~(delta0 > 0))[:5].tolist()
        underflow = [i for i in bad if abs(u0[i]) != abs(v0[i])]
        if underflow:
            raise ValueError(f"u0 and v0 are too small: the balancedness Delta0 = |u0^2 - v0^2| underflows to 0 in "
                             f"float64 at coordinates {underflow} (u0 = {float(u0[underflow[0]])!r}, v0 = "
                             f"{float(v0[underflow[0]])!r}); it must be a positive float64, which needs the larger "
                             f"of |u0_i|, |v0_i| above about 1e-162")
        raise ValueError(f"u0 and v0 must satisfy |u0_i| != |v0_i| for every i (balancedness "
                         f"Delta0 = |u0^2 - v0^2| must be > 0), violated at coordinates {bad}")
    return u0, v0


def as_bounded_vector(name, value, d):
    """A finite float vector of length d with entries below WEIGHT_LIMIT in magnitude: initial weights and velocities,
    which the kernels square (and count as diverged at that bound)."""
    w = as_array(name, value, ndim=1, shape=(d,))
    if np.any(np.abs(w) >= WEIGHT_LIMIT):  # (the kernels count |w| >= OVERFLOW = WEIGHT_LIMIT as diverged)
        i = int(np.flatnonzero(np.abs(w) >= WEIGHT_LIMIT)[0])
        raise ValueError(f"{name} must have entries in (-{WEIGHT_LIMIT:g}, {WEIGHT_LIMIT:g}) (their squares must "
                         f"stay finite), got {float(w[i])!r} at coordinate {i}")
    return w


def work_flops(run):
    """Multiply-adds of what is left of ``run``: a rough estimate, for the progress choice only."""
    estimate = getattr(run, "work_estimate", None)  # an adaptive run: total is a budget, not the plan
    if estimate is not None:
        return estimate()
    left = float(run.total - run.done)
    p = run.problem
    if run.family == "network":  # (backpropagation over the batch, or the product form of linear nets)
        return left * run.step_flops()
    return (1.0 if run.family == "mgd" else 4.0) * left * p.d * p.d  # (4: the stages of a flow step)


def auto_progress(progress, work):
    """The progress of a run of ``work`` flops: ``"bar"``, ``"log"`` or None (:func:`dlnmomentum.progress.resolve`:
    by default a bar for runs estimated over ten seconds, on a terminal or in Jupyter)."""
    return resolve_progress(progress, work / FLOPS_PER_SECOND)
