r"""The one driver of a flow run, for either stepping scheme, and the grid-step pieces both drivers share.

A flow run advances on the uniform grid ``t_k = k·h``. Each grid step is taken by a *scheme*
(the stepper; which one is method as data, a code passed to the kernels):

* ``SCHEME_RK4`` (:mod:`.flow`): classic RK4 for MGF(λ) and for gradient flow (λ = 0);
* ``SCHEME_EXP`` (:mod:`.flow_exp`): the exponential RK4 of Hochbruck and Ostermann for MGF(λ), λ > 0.

A grid step is one *piece* of size ``h``, or, where the grid step is *tiled*, several pieces
(:func:`tiled_step`, :func:`piece`): for RK4 the first ``n_fine`` grid steps are made of ``m_fine``
pieces of ``h/m_fine`` (the start refinement; piece ``j`` starts at ``k·h + j·(h/m_fine)``); for the
exponential scheme the pieces also resolve the initial layer of width ~λ (:func:`.flow_exp._next_piece`;
each piece starts where the previous one ended). If a piece overflows, the grid step is undone: the
state returns to its grid point, and the run reports ``DIVERGED``.

:func:`_flow_advance` is the single run; the lockstep lanes of a flow sweep
(:func:`.flow_sweep._flow_group`) take the same pieces with the same functions, so every lane is
the single run bit for bit.
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS
from .flow import (
    BLOCK,
    STEPS_DONE,
    _begin_step,
    _gf_velocity,
    _gradient,
    _load_work,
    _record_row,
    _rk4_step,
    _store_work,
)
from .flow_exp import (
    N_COEF,
    _coefficients_of,
    _exp_coefficients,
    _exp_step,
    _next_piece,
    _piece_coefficients,
    _tiled,
)
from .layout import MODE_DATA
from .mgd import _half_mean_square_residual
from .status import CONVERGED, DIVERGED, RUNNING

#: Stepping schemes (the ``scheme`` argument of the kernels).
SCHEME_RK4 = 0
SCHEME_EXP = 1
#: Scheme codes by the names the Python layer uses.
SCHEMES = {"rk4": SCHEME_RK4, "exp-rk4": SCHEME_EXP}


@njit(inline="always", **JIT_OPTIONS)  # (per grid step: no call)
def tiled_step(scheme, lam, h, n_fine, m_fine, step):
    """Is grid step ``step`` made of several pieces?"""
    if scheme == SCHEME_EXP:
        return _tiled(lam, h, n_fine, m_fine, step)
    return not (step >= n_fine or m_fine == 1)


@njit(inline="always", **JIT_OPTIONS)
def piece(scheme, lam, h, n_fine, m_fine, step, sub, t, tiled):
    """``(size, start time, last)`` of piece ``sub`` of grid step ``step``; ``t`` is where the previous
    piece ended (``step·h`` for the first)."""
    if not tiled:
        return h, step * h, True
    if scheme == SCHEME_EXP:
        s, last = _next_piece(lam, h, n_fine, m_fine, step, t)
        return s, t, last
    h_fine = h / m_fine
    return h_fine, step * h + sub * h_fine, sub + 1 == m_fine


@njit(**JIT_OPTIONS)
def _flow_advance(
    scheme, X, XT, y, H, b, X_test, y_test,
    lam, h, mode, tol, n_fine, m_fine,
    fstate, istate, counters, n_steps,
    log_time, log_coord, log_sign,
    record_steps, record_cursor, record_offset, rec_step, rec_vectors, rec_losses, rec_vp, rec_vm,
):
    """Advance one MGF(λ) (``lam > 0``) or gradient-flow (``lam == 0``, RK4 only) run by ``<= n_steps`` grid steps.

    Parameters are the stepping ``scheme``, the problem arrays zero-padded to ``dp`` columns
    (``dp`` a multiple of ``PAD``; ``X`` (n, dp), ``XT`` (dp, n), ``H`` (dp, dp), ``b`` (dp,);
    ``X_test`` unpadded), λ ≥ 0, the grid step ``h > 0``, the gradient ``mode`` (``MODE_HESSIAN``:
    ``Hθ - b``; ``MODE_DATA``: ``Xᵀ(Xθ - y)/n``), ``tol`` (``< 0`` disables the convergence test),
    the start refinement ``(n_fine, m_fine)`` (see the module docstring), the run state (``fstate``,
    ``istate``, ``counters``, the crossing log; unpadded ``d`` columns; :mod:`.flow`) and the
    recording schedule: the state after ``s`` grid steps (time ``s·h``) is written to row
    ``record_cursor[0] - record_offset`` of the ``rec_*`` buffers when
    ``s == record_steps[record_cursor[0]]`` (velocities to ``rec_vp``/``rec_vm``).

    For gradient flow the velocity rows are not integrated: they hold the vector field
    ``∓∇L(θ)w±`` at the grid point.

    Returns ``RUNNING`` (budget of this call used up), ``CONVERGED`` (train loss ``<= tol`` at a
    grid point, checked before stepping) or ``DIVERGED`` (a step would make w or ẇ non-finite or
    larger than ``OVERFLOW``; the state is left at the last finite grid point).
    """
    n = X.shape[0]
    d = fstate.shape[1]
    dp = H.shape[0]
    nblk = dp // BLOCK
    gf = not (lam > 0.0)
    inv_lam = 0.0 if gf else 1.0 / lam
    Z = _load_work(fstate, istate, nblk)
    saved = np.empty_like(Z)
    theta = np.zeros(dp)
    grad = np.zeros(dp)
    resid = np.zeros(max(n, 1))
    vnew_p = np.zeros(dp)
    vnew_m = np.zeros(dp)
    roots = np.zeros(6)
    co_h = np.zeros(N_COEF)  # the exponential scheme's coefficients of a piece of h, h/m_fine, other
    co_fine = np.zeros(N_COEF)
    co_tmp = np.zeros(N_COEF)
    if scheme == SCHEME_EXP:
        _exp_coefficients(lam, h, co_h)
        _exp_coefficients(lam, h / m_fine, co_fine)
    n_record = record_steps.shape[0]
    step = counters[STEPS_DONE]
    stop = step + n_steps
    status = RUNNING

    _begin_step(Z, theta, nblk)
    while True:
        loss = _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
        if gf:
            _gf_velocity(Z, grad, nblk)
        cur = record_cursor[0]
        if cur < n_record and record_steps[cur] == step:
            _record_row(X, y, X_test, y_test, Z, vnew_p, step, cur - record_offset,
                        rec_step, rec_vectors, rec_losses, rec_vp, rec_vm)
            record_cursor[0] = cur + 1
        if step >= stop:
            break
        if tol >= 0.0:
            if mode != MODE_DATA:
                for i in range(d):
                    vnew_p[i] = theta[i]
                loss = _half_mean_square_residual(X, y, vnew_p[:d])
            if loss <= tol:
                status = CONVERGED
                break
        tiled = tiled_step(scheme, lam, h, n_fine, m_fine, step)
        if tiled:
            saved[:] = Z
        diverged = False
        t = step * h
        sub = 0
        while True:
            if sub > 0:  # the gradient (and gradient flow's velocity) at the end of the previous piece
                _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
                if gf:
                    _gf_velocity(Z, grad, nblk)
            s, t0, last = piece(scheme, lam, h, n_fine, m_fine, step, sub, t, tiled)
            if scheme == SCHEME_EXP:
                which = _piece_coefficients(lam, s, co_h, co_fine, co_tmp) if tiled else 0
                co = _coefficients_of(which, co_h, co_fine, co_tmp)
                diverged = _exp_step(X, XT, y, H, b, mode, co, t0, Z, theta, grad, resid, d, nblk,
                                     vnew_p, vnew_m, roots, istate, fstate, counters, log_time, log_coord, log_sign)
            else:
                diverged = _rk4_step(X, XT, y, H, b, mode, gf, inv_lam, s, t0, Z, theta, grad, resid, d, nblk,
                                     vnew_p, vnew_m, roots, istate, fstate, counters, log_time, log_coord, log_sign)
            if diverged:
                if tiled:  # undo the pieces already taken
                    Z[:] = saved
                    _begin_step(Z, theta, nblk)
                break
            if last:
                break
            sub += 1
            t = t + s
        if diverged:
            status = DIVERGED
            break
        step += 1

    _store_work(Z, fstate, istate)
    counters[STEPS_DONE] = step
    return status
