r"""The stopping rule of the adaptive flows, shared by both drivers (:func:`.flow_rodas_run._rodas_advance` and
:func:`.flow_ndf._ndf_advance`): what ends a call before its next step, in one order, and the stall rule.

Before every step a call stops at ``t_max`` (``MAX_STEPS``); with a ``tol``, when the train loss at the current
point is at most ``tol`` (``CONVERGED``) or the run has stalled at float64's rounding floor (``STALLED``); and once
the call's steps are taken (``RUNNING``: the Python layer calls again). The stall rule: a loss at the rounding floor
(at most ``FLOOR_FACTOR`` times :func:`.mgd._loss_rounding_scale`) no longer measures progress, and at the floor the
controller's error estimate is rounding noise that keeps the step size bounded (about 1e6 on the paper's problem),
so a ``tol`` below the floor with a large ``t_max`` took the whole step budget (1e8 steps, half an hour). A run
whose loss stays at the floor for ``FLOOR_STEPS`` accepted points in a row, without falling under ``FLOOR_GAIN``
times the loss where that count started, ends ``STALLED`` at its last point. The count is solver state (``sstate``
entries ``FLOOR_COUNT``, ``FLOOR_REF``, ``FLOOR_POINT`` of :mod:`.flow_rodas`), so chunks and resumes do not change
where a run stalls; a run that reaches its tol never meets the rule.
"""

import numpy as np
from numba import njit

from .config import LEAF_JIT_OPTIONS
from .flow import STEPS_DONE, W_MINUS, W_PLUS
from .flow_rodas import FLOOR_COUNT, FLOOR_POINT, FLOOR_REF, T_NOW
from .mgd import _half_mean_square_residual, _loss_rounding_scale
from .status import CONVERGED, MAX_STEPS, RUNNING, STALLED

#: A train loss at most FLOOR_FACTOR times :func:`.mgd._loss_rounding_scale` is at float64's rounding floor:
#: on the paper's problem the floor sat at 0.1-200 times that scale (measured on 36 runs of three data
#: shapes, λ ∈ {0, 0.05, 1}, at t = 1e9).
FLOOR_FACTOR = 1e4
#: A run whose loss stayed at the floor for FLOOR_STEPS accepted points in a row, without falling under
#: FLOOR_GAIN times the loss where the count started, ends ``STALLED``.
FLOOR_STEPS = 100
FLOOR_GAIN = 0.1


@njit(**LEAF_JIT_OPTIONS)
def _stop_before_step(X, y, Y, theta, tol, x_max, y_max, t_max, sstate, counters, taken, n_steps):
    """``(stop, status)`` before the next step of a call that has taken ``taken`` steps, in the order of the module
    docstring: ``MAX_STEPS`` at t_max, then the stopping rule (:func:`_stop_status` on ``Y``, with a ``tol``), then
    ``RUNNING`` once the call's ``n_steps`` are taken."""
    if sstate[T_NOW] >= t_max:
        return True, MAX_STEPS
    if tol >= 0.0:
        stop = _stop_status(X, y, Y, theta, tol, x_max, y_max, sstate, counters[STEPS_DONE] + 1.0)
        if stop != RUNNING:
            return True, stop
    return taken >= n_steps, RUNNING


@njit(**LEAF_JIT_OPTIONS)
def _stop_status(X, y, Y, theta, tol, x_max, y_max, sstate, point):
    """The stopping rule at the accepted point number ``point`` whose w± are the rows ``W_PLUS``, ``W_MINUS`` of ``Y``:
    ``CONVERGED`` (train loss ``<= tol``), ``STALLED`` (:func:`_stalled`) or ``RUNNING``; θ is left in ``theta``."""
    for i in range(theta.shape[0]):
        wp = Y[W_PLUS, i]
        wm = Y[W_MINUS, i]
        theta[i] = (wp * wp - wm * wm) * 0.25
    loss = _half_mean_square_residual(X, y, theta)
    if loss <= tol:
        return CONVERGED
    if _stalled(X, y, theta, loss, x_max, y_max, sstate, point):
        return STALLED
    return RUNNING


@njit(**LEAF_JIT_OPTIONS)
def _stalled(X, y, theta, loss, x_max, y_max, sstate, point):
    """The stall rule at the accepted point number ``point`` (1 + the steps before it) with train loss ``loss`` at
    θ (the module docstring): counts it in ``sstate`` (once, however many calls see the point) and
    returns whether the run has stalled."""
    if sstate[FLOOR_POINT] != point:  # (a later call sees the same point again: counted once)
        sstate[FLOOR_POINT] = point
        if _at_rounding_floor(X, y, theta, loss, x_max, y_max):
            if sstate[FLOOR_COUNT] == 0.0 or loss < FLOOR_GAIN * sstate[FLOOR_REF]:
                sstate[FLOOR_COUNT] = 1.0
                sstate[FLOOR_REF] = loss
            else:
                sstate[FLOOR_COUNT] += 1.0
        else:
            sstate[FLOOR_COUNT] = 0.0
    return sstate[FLOOR_COUNT] > FLOOR_STEPS


@njit(**LEAF_JIT_OPTIONS)
def _at_rounding_floor(X, y, theta, loss, x_max, y_max):
    """Whether ``loss`` is at most FLOOR_FACTOR times :func:`.mgd._loss_rounding_scale` at θ (``x_max``, ``y_max``:
    the largest |X| and |y|, which bound that scale by ½(ε(x_max‖θ‖₁ + y_max))² and spare its O(nd) pass while
    the loss is far above it)."""
    if not np.isfinite(loss):  # (an overflowed loss is not at a floor, whatever its scale)
        return False
    l1 = 0.0
    for j in range(theta.shape[0]):
        l1 += abs(theta[j])
    bound = 2.220446049250313e-16 * (x_max * l1 + y_max)
    if loss > FLOOR_FACTOR * 0.5 * bound * bound:
        return False
    return loss <= FLOOR_FACTOR * _loss_rounding_scale(X, y, theta)


@njit(**LEAF_JIT_OPTIONS)
def _data_bounds(X, y):
    """The largest |X| and |y| (the bounds of :func:`_at_rounding_floor`'s cheap test)."""
    x_max = 0.0
    y_max = 0.0
    for m in range(X.shape[0]):
        y_max = max(y_max, abs(y[m]))
        for j in range(X.shape[1]):
            x_max = max(x_max, abs(X[m, j]))
    return x_max, y_max
