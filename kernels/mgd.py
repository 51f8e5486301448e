r"""Heavy-ball momentum (MGD / SMGD) on a 2-layer diagonal linear network.

Method
------
With :math:`w_{\pm} = u \pm v`, :math:`\theta = (w_+^2 - w_-^2)/4` and a batch
:math:`\mathcal B_k` (all samples for full-batch MGD), the kernel advances the
paper's recursion (Appendix B, eq. (w_mgd); eq. (SMGD:diag) in ``u, v``)

.. math::

    w_{\pm,k+1} = w_{\pm,k} \mp \gamma\,\nabla L_{\mathcal B_k}(\theta_k)\odot w_{\pm,k}
                  + \beta\,(w_{\pm,k} - w_{\pm,k-1}),\qquad w_{\pm,1} = w_{\pm,0},

and accumulates, per coordinate and without one logarithm per step,

* the sums of Lemma 4, :math:`S_\pm = \frac{1}{1-\beta}\sum_k [r(z_k) + \beta r(1/z_k)]`,
  :math:`z_k = w_{\pm,k+1}/w_{\pm,k}`, :math:`r(z) = z - 1 - \ln|z|`. Since
  :math:`r(z) + \beta r(1/z) = (z-1) + \beta(1/z - 1) - (1-\beta)\ln|z|` and the
  logarithms telescope,

  .. math:: S_\pm = \frac{A_\pm}{1-\beta} - \ln\left|\frac{w_{\pm,N+1}}{w_{\pm,0}}\right|,
            \qquad A_\pm = \sum_k \delta_k\left(\frac{1}{w_k} - \frac{\beta}{w_{k+1}}\right),
            \quad \delta_k = w_{k+1} - w_k,

  where :math:`\delta_k` is exact in floating point while the iterate changes by
  less than a factor two (Sterbenz), and :math:`A_\pm` is a Neumaier-compensated sum;
* the mirror variable of eq. (MGDmirror),
  :math:`G_N = \gamma\sum_{m=1}^N\sum_{k=1}^m\beta^{m-k}\nabla L_{\mathcal B_k}(\theta_k)`,
  through :math:`M_m = \beta M_{m-1} + \nabla L_{\mathcal B_m}(\theta_m)`,
  :math:`G_N = \gamma\sum_m M_m` (compensated);
* sign crossings of :math:`w_+` and :math:`w_-` (count, first and last step);
* the running minimum of the balancedness :math:`\Delta_k = |w_{+,k} w_{-,k}|`.

The gradient :math:`\nabla L(\theta) = X^\top(X\theta - y)/n` is evaluated in the
Hessian form :math:`H\theta - b` (:math:`H = X^\top X/n`, :math:`b = X^\top y/n`,
:math:`d^2` work) or the data form (:math:`2nd` work), whichever the caller picks.
Every sum runs over the column index in increasing order, from +0.0, one fused
multiply-add per term (:func:`.config.fma`), written as contiguous ``axpy``
loops, so that the lockstep sweep kernel reproduces the bits exactly. The update
rules use fused multiply-adds where :func:`_propose`, :func:`_accumulate_s` and
:func:`_accumulate_mirror` say so (same operands, one rounding fewer).

State layout
------------
``fstate`` (float64, ``(N_FLOAT_ROWS, d)``) and ``istate`` (int64,
``(N_INT_ROWS, d)``) hold everything a run needs to continue bit for bit;
``counters[0]`` is the number of updates done so far. Their rows, the gradient
modes, the record layout and the padding rule are defined and documented in
:mod:`.layout` (and importable from here, as the Python layer does).
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS, LEAF_JIT_OPTIONS, OVERFLOW, fma
from .layout import (  # the shared layouts, defined and documented in .layout
    CROSS_MINUS,
    CROSS_PLUS,
    FIRST_CROSS_MINUS,
    FIRST_CROSS_PLUS,
    GRAD_MOMENTUM,
    LAST_CROSS_MINUS,
    LAST_CROSS_PLUS,
    MIN_DELTA,
    MIRROR_COMP,
    MIRROR_SUM,
    MODE_DATA,
    MODE_HESSIAN,
    N_FLOAT_ROWS,
    REC_DELTA,
    REC_THETA,
    REC_W_MINUS,
    REC_W_PLUS,
    S_COMP_MINUS,
    S_COMP_PLUS,
    S_SUM_MINUS,
    S_SUM_PLUS,
    W_MINUS,
    W_MINUS_PREV,
    W_PLUS,
    W_PLUS_PREV,
)

# The Python layer reads every layout name as kernels.mgd.<NAME>; these four are not used here.
from .layout import MODE_MINIBATCH as MODE_MINIBATCH
from .layout import N_INT_ROWS as N_INT_ROWS
from .layout import N_REC_VECTORS as N_REC_VECTORS
from .layout import PAD as PAD
from .rng import _draw_batch
from .status import CONVERGED, DIVERGED, RUNNING  # the kernels' return codes; also read as kernels.mgd.DIVERGED


@njit(**JIT_OPTIONS)
def _theta_from_w(w_plus, w_minus, theta):
    for i in range(theta.shape[0]):
        theta[i] = (w_plus[i] * w_plus[i] - w_minus[i] * w_minus[i]) * 0.25


@njit(**LEAF_JIT_OPTIONS)
def _half_mean_square_residual(X, y, theta):
    """L(θ) = ‖Xθ - y‖²/(2n) in the data form (accurate down to tiny losses).

    Each residual is ``fma`` over j = 0, 1, ... from +0.0, then minus y, and the squares are summed over the rows
    in order; four rows advance together (four independent chains of fused multiply-adds instead of one: a
    single chain is bound by the fma latency, 4x slower at d = 30, and the adaptive flows test the loss every
    step), which changes no operation and no bit."""
    n = X.shape[0]
    d = theta.shape[0]
    total = 0.0
    m = 0
    while m + 3 < n:
        r0 = 0.0
        r1 = 0.0
        r2 = 0.0
        r3 = 0.0
        for j in range(d):
            tj = theta[j]
            r0 = fma(X[m, j], tj, r0)
            r1 = fma(X[m + 1, j], tj, r1)
            r2 = fma(X[m + 2, j], tj, r2)
            r3 = fma(X[m + 3, j], tj, r3)
        r0 -= y[m]
        r1 -= y[m + 1]
        r2 -= y[m + 2]
        r3 -= y[m + 3]
        total += r0 * r0
        total += r1 * r1
        total += r2 * r2
        total += r3 * r3
        m += 4
    while m < n:
        r = 0.0
        for j in range(d):
            r = fma(X[m, j], theta[j], r)
        r -= y[m]
        total += r * r
        m += 1
    return total / (2.0 * n)


@njit(**LEAF_JIT_OPTIONS)
def _loss_rounding_scale(X, y, theta):
    """Σ_m (ε·(Σ_j |X_mj θ_j| + |y_m|))²/(2n), ε = 2⁻⁵²: the train loss that one rounding of each term of the
    residual Xθ − y leaves, the scale under which :func:`_half_mean_square_residual` cannot resolve progress."""
    n = X.shape[0]
    d = theta.shape[0]
    eps = 2.220446049250313e-16
    total = 0.0
    for m in range(n):
        a = abs(y[m])
        for j in range(d):
            a += abs(X[m, j] * theta[j])
        total += (eps * a) * (eps * a)
    return total / (2.0 * n)


@njit(**LEAF_JIT_OPTIONS)
def _axpy_columns(A, coef, count, out):
    """out[i] = Σ_{j<count} A[j, i]·coef[j], summed over j in increasing order with fused multiply-adds.

    ``out[i]`` starts at +0.0 and becomes ``fma(A[j, i], coef[j], out[i])`` for j = 0, 1, ...
    Four columns per pass keep ``out`` in flight for fewer stores; the nesting
    keeps the per-element order of the plain loop.
    """
    width = out.shape[0]
    for i in range(width):
        out[i] = 0.0
    j = 0
    while j + 4 <= count:
        c0 = coef[j]
        c1 = coef[j + 1]
        c2 = coef[j + 2]
        c3 = coef[j + 3]
        a0 = A[j]
        a1 = A[j + 1]
        a2 = A[j + 2]
        a3 = A[j + 3]
        for i in range(width):
            out[i] = fma(a3[i], c3, fma(a2[i], c2, fma(a1[i], c1, fma(a0[i], c0, out[i]))))
        j += 4
    if j + 2 <= count:
        c0 = coef[j]
        c1 = coef[j + 1]
        a0 = A[j]
        a1 = A[j + 1]
        for i in range(width):
            out[i] = fma(a1[i], c1, fma(a0[i], c0, out[i]))
        j += 2
    if j < count:
        c0 = coef[j]
        a0 = A[j]
        for i in range(width):
            out[i] = fma(a0[i], c0, out[i])


@njit(**LEAF_JIT_OPTIONS)
def _gradient_hessian(H, b, theta, d, grad):
    """grad = Hθ - b (H symmetric, zero-padded), the sum over j < d in increasing order."""
    _axpy_columns(H, theta, d, grad)
    for i in range(grad.shape[0]):
        grad[i] -= b[i]


@njit(**LEAF_JIT_OPTIONS)
def _gradient_data(X, XT, y, theta, d, resid, grad):
    """grad = Xᵀ(Xθ - y)/n (X, XT zero-padded); returns L(θ) from the same residual."""
    n = X.shape[0]
    _axpy_columns(XT, theta, d, resid)
    loss = 0.0
    for m in range(n):
        resid[m] -= y[m]
        loss += resid[m] * resid[m]
    _axpy_columns(X, resid, n, grad)
    for i in range(grad.shape[0]):
        grad[i] /= n
    return loss / (2.0 * n)


@njit(**JIT_OPTIONS)
def _gradient_batch(X, y, batch, theta, d, resid, grad):
    """grad = Σ_{q} x_{B_q}(⟨x_{B_q}, θ⟩ - y_{B_q})/|B| over the rows listed in ``batch``."""
    nb = batch.shape[0]
    width = grad.shape[0]
    for q in range(nb):
        row = batch[q]
        r = 0.0
        for j in range(d):
            r = fma(X[row, j], theta[j], r)
        resid[q] = r - y[row]
    for i in range(width):
        grad[i] = 0.0
    for q in range(nb):
        xr = X[batch[q]]
        rq = resid[q]
        for i in range(width):
            grad[i] = fma(xr[i], rq, grad[i])
    for i in range(width):
        grad[i] /= nb


@njit(**JIT_OPTIONS)
def _propose(grad, gamma, beta, wp, wp_prev, wm, wm_prev, new_p, new_m, theta_new):
    """The update of eq. (w_mgd) into ``new_*`` and θ of the new iterate into ``theta_new``.

    With ``g = γ∇L`` and ``fma(x, y, z) = x·y + z`` rounded once:
    ``w₊' = fma(β, w₊ - w₊ᵖ, fma(-g, w₊, w₊))``, ``w₋' = fma(β, w₋ - w₋ᵖ, fma(g, w₋, w₋))``,
    and ``θ' = (w₊'·w₊' - w₋'·w₋')·¼`` as everywhere else θ is formed from ``w±``.

    Returns False if an iterate leaves (-OVERFLOW, OVERFLOW) (NaN included).
    """
    ok = True
    for i in range(grad.shape[0]):
        gg = gamma * grad[i]
        a = fma(beta, wp[i] - wp_prev[i], fma(-gg, wp[i], wp[i]))
        c = fma(beta, wm[i] - wm_prev[i], fma(gg, wm[i], wm[i]))
        new_p[i] = a
        new_m[i] = c
        theta_new[i] = (a * a - c * c) * 0.25
        ok &= (abs(a) < OVERFLOW) & (abs(c) < OVERFLOW)
    return ok


@njit(**JIT_OPTIONS)
def _accumulate_s(w, w_new, inv_w, beta, total, comp):
    """A += δ·fma(-β, 1/w_new, 1/w), δ = w_new - w (Neumaier); ``inv_w`` becomes 1/w_new.

    Returns the number of coordinates that changed sign.
    """
    changes = 0
    for i in range(w.shape[0]):
        a = w_new[i]
        inv_a = 1.0 / a
        term = (a - w[i]) * fma(-beta, inv_a, inv_w[i])
        s = total[i]
        t = s + term
        comp[i] += ((s - t) + term) if abs(s) >= abs(term) else ((term - t) + s)
        total[i] = t
        inv_w[i] = inv_a
        changes += (a < 0.0) != (w[i] < 0.0)
    return changes


@njit(**JIT_OPTIONS)
def _accumulate_mirror(grad, gamma, beta, momentum, total, comp):
    """M = fma(β, M, ∇L); G += γM (Neumaier)."""
    for i in range(grad.shape[0]):
        m = fma(beta, momentum[i], grad[i])
        momentum[i] = m
        term = gamma * m
        s = total[i]
        t = s + term
        comp[i] += ((s - t) + term) if abs(s) >= abs(term) else ((term - t) + s)
        total[i] = t


@njit(**JIT_OPTIONS)
def _update_min_delta(w_plus, w_minus, min_delta):
    for i in range(w_plus.shape[0]):
        delta = abs(w_plus[i] * w_minus[i])
        min_delta[i] = delta if delta < min_delta[i] else min_delta[i]


@njit(**JIT_OPTIONS)
def _log_crossings(old, new, step, count, first, last):
    for i in range(count.shape[0]):
        if (new[i] < 0.0) != (old[i] < 0.0):
            count[i] += 1
            if count[i] == 1:
                first[i] = step
            last[i] = step


@njit(**JIT_OPTIONS)
def _record_losses(X, y, X_test, y_test, theta, row, rec_losses):
    """Train and test loss of θ into ``rec_losses[row]`` (NaN test loss without a test set)."""
    rec_losses[row, 0] = _half_mean_square_residual(X, y, theta)
    if X_test.shape[0] > 0:
        rec_losses[row, 1] = _half_mean_square_residual(X_test, y_test, theta)
    else:
        rec_losses[row, 1] = np.nan


@njit(**JIT_OPTIONS)
def _record_row(X, y, X_test, y_test, wp, wm, theta, step, row, rec_step, rec_vectors, rec_losses):
    d = rec_vectors.shape[2]
    _theta_from_w(wp, wm, theta)
    rec_step[row] = step
    for i in range(d):
        rec_vectors[row, REC_THETA, i] = theta[i]
        rec_vectors[row, REC_W_PLUS, i] = wp[i]
        rec_vectors[row, REC_W_MINUS, i] = wm[i]
        rec_vectors[row, REC_DELTA, i] = abs(wp[i] * wm[i])
    _record_losses(X, y, X_test, y_test, theta[:d], row, rec_losses)


@njit(**JIT_OPTIONS)
def _mgd_advance(
    X, XT, y, H, b, X_test, y_test,
    gamma, beta, mode, tol,
    rng_state, perm, batch_size, replace,
    fstate, istate, counters, n_steps,
    record_steps, record_cursor, record_offset, rec_step, rec_vectors, rec_losses,
):
    """Advance one run by at most ``n_steps`` updates, in place.

    Parameters are the problem arrays, zero-padded to ``dp`` columns (``dp`` a
    multiple of ``PAD``; ``X`` (n, dp), ``XT`` (dp, n), ``H`` (dp, dp), ``b`` (dp,)
    used in ``MODE_HESSIAN``; ``X_test`` unpadded), the hyperparameters, the
    random state (``rng_state`` uint64[4] and permutation ``perm``, used in
    ``MODE_MINIBATCH``), the run state (``fstate``, ``istate``, ``counters``,
    unpadded ``d`` columns) and the recording schedule: the state after ``s``
    updates is written to row ``record_cursor[0] - record_offset`` of the
    ``rec_*`` buffers when ``s == record_steps[record_cursor[0]]``.

    ``tol < 0`` disables the convergence test; otherwise the run stops, before
    updating, at the first iterate whose train loss is ``<= tol``.

    Returns ``RUNNING`` (budget of this call used up), ``CONVERGED`` or
    ``DIVERGED`` (the update would make an iterate non-finite or larger than
    ``OVERFLOW``; the state is left at the last finite iterate).
    """
    n = X.shape[0]
    d = fstate.shape[1]
    dp = XT.shape[0]  # (H is 0 × 0 where the kernel takes the data or minibatch form)
    # Padded working copies: the padding coordinates hold w = 1, θ = 0, ∇L = 0
    # and never change, so the real coordinates get exactly the unpadded bits.
    work = np.ones((N_FLOAT_ROWS + 2, dp))
    work[S_SUM_PLUS:, :] = 0.0
    work[:N_FLOAT_ROWS, :d] = fstate
    wp = work[W_PLUS]
    wm = work[W_MINUS]
    wp_prev = work[W_PLUS_PREV]
    wm_prev = work[W_MINUS_PREV]
    new_p = work[N_FLOAT_ROWS]
    new_m = work[N_FLOAT_ROWS + 1]
    inv_p = 1.0 / wp
    inv_m = 1.0 / wm
    theta = np.zeros(dp)
    grad = np.zeros(dp)
    resid = np.zeros(max(n, batch_size, 1))
    batch = np.empty(max(batch_size, 1), dtype=np.int64)
    n_record = record_steps.shape[0]
    step = counters[0]
    stop = step + n_steps
    status = RUNNING

    _theta_from_w(wp, wm, theta)
    while True:
        cur = record_cursor[0]
        if cur < n_record and record_steps[cur] == step:
            _record_row(X, y, X_test, y_test, wp, wm, theta, step,
                        cur - record_offset, rec_step, rec_vectors, rec_losses)
            record_cursor[0] = cur + 1
        if step >= stop:
            break

        if mode == MODE_DATA:
            loss = _gradient_data(X, XT, y, theta, d, resid, grad)
            if tol >= 0.0 and loss <= tol:
                status = CONVERGED
                break
        else:
            if tol >= 0.0 and _half_mean_square_residual(X, y, theta[:d]) <= tol:
                status = CONVERGED
                break
            if mode == MODE_HESSIAN:
                _gradient_hessian(H, b, theta, d, grad)
            else:
                _draw_batch(rng_state, perm, batch[:batch_size], replace)
                _gradient_batch(X, y, batch[:batch_size], theta, d, resid, grad)

        if not _propose(grad, gamma, beta, wp, wp_prev, wm, wm_prev, new_p, new_m, theta):
            status = DIVERGED
            _theta_from_w(wp, wm, theta)
            break
        step += 1
        changes_p = _accumulate_s(wp, new_p, inv_p, beta, work[S_SUM_PLUS], work[S_COMP_PLUS])
        changes_m = _accumulate_s(wm, new_m, inv_m, beta, work[S_SUM_MINUS], work[S_COMP_MINUS])
        _accumulate_mirror(grad, gamma, beta, work[GRAD_MOMENTUM], work[MIRROR_SUM], work[MIRROR_COMP])
        _update_min_delta(new_p, new_m, work[MIN_DELTA])
        if changes_p:
            _log_crossings(wp, new_p, step, istate[CROSS_PLUS], istate[FIRST_CROSS_PLUS], istate[LAST_CROSS_PLUS])
        if changes_m:
            _log_crossings(wm, new_m, step, istate[CROSS_MINUS], istate[FIRST_CROSS_MINUS],
                           istate[LAST_CROSS_MINUS])
        # Rotate buffers instead of copying: prev <- current <- new <- old prev.
        wp_prev, wp, new_p = wp, new_p, wp_prev
        wm_prev, wm, new_m = wm, new_m, wm_prev

    fstate[W_PLUS] = wp[:d]
    fstate[W_MINUS] = wm[:d]
    fstate[W_PLUS_PREV] = wp_prev[:d]
    fstate[W_MINUS_PREV] = wm_prev[:d]
    for row in range(S_SUM_PLUS, N_FLOAT_ROWS):
        fstate[row] = work[row, :d]
    counters[0] = step
    return status


@njit(**JIT_OPTIONS)
def _heavy_ball_steps(A, c, gamma, beta, x, x_prev, n_steps, grad, new):
    """``n_steps`` heavy-ball steps on f(x) = ½xᵀAx - cᵀx, in place (``grad``, ``new``: scratch of length d).

    x_{k+1} = x_k - γ(Ax_k - c) + β(x_k - x_{k-1}) (eq. (mgd) with ∇f(x) = Ax - c), Ax_k summed as in
    :func:`_axpy_columns`. Returns ``DIVERGED`` (``x``, ``x_prev`` left at the last finite iterates) if an
    iterate leaves (-OVERFLOW, OVERFLOW), NaN included, else ``RUNNING``.
    """
    d = x.shape[0]
    for _ in range(n_steps):
        _axpy_columns(A, x, d, grad)
        ok = True
        for i in range(d):
            xi = x[i]
            v = xi - gamma * (grad[i] - c[i]) + beta * (xi - x_prev[i])
            new[i] = v
            ok &= abs(v) < OVERFLOW
        if not ok:
            return DIVERGED
        for i in range(d):
            x_prev[i] = x[i]
            x[i] = new[i]
    return RUNNING


@njit(**JIT_OPTIONS)
def _heavy_ball_quadratic(A, c, gamma, beta, x, x_prev, n_steps):
    """Heavy ball on f(x) = ½xᵀAx - cᵀx, in place: x_{k+1} = x_k - γ(Ax_k - c) + β(x_k - x_{k-1}).

    Returns ``DIVERGED`` if an iterate leaves (-OVERFLOW, OVERFLOW), else ``RUNNING``.
    """
    d = x.shape[0]
    return _heavy_ball_steps(A, c, gamma, beta, x, x_prev, n_steps, np.empty(d), np.empty(d))


@njit(**JIT_OPTIONS)
def _heavy_ball_quadratic_path(A, c, gamma, beta, x, x_prev, every, n_steps, path, filled):
    """Heavy ball on f(x) = ½xᵀAx - cᵀx (as :func:`_heavy_ball_steps`), recording iterates into ``path``.

    ``path[0]`` is the iterate on entry; ``path[r]`` for r ≥ 1 the iterate after ``min(r·every, n_steps)``
    steps (so the last row, ``path.shape[0] - 1``, holds the iterate after ``n_steps``; the caller sizes
    ``path`` to ``ceil(n_steps / every) + 1`` rows). ``filled[0]`` is set to the number of rows written.
    Returns ``DIVERGED`` when an iterate leaves (-OVERFLOW, OVERFLOW): the rows after the last finite
    recorded iterate are left untouched. Else ``RUNNING``.
    """
    d = x.shape[0]
    grad = np.empty(d)
    new = np.empty(d)
    for i in range(d):
        path[0, i] = x[i]
    filled[0] = 1
    done = 0
    for r in range(1, path.shape[0]):
        n = min(every, n_steps - done)
        if _heavy_ball_steps(A, c, gamma, beta, x, x_prev, n, grad, new) == DIVERGED:
            return DIVERGED
        done += n
        for i in range(d):
            path[r, i] = x[i]
        filled[0] = r + 1
    return RUNNING
