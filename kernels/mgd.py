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
Every sum runs over the column index in increasing order, written as contiguous
``axpy`` loops, so that the lockstep sweep kernel reproduces the bits exactly.

State layout
------------
``fstate`` (float64, ``(N_FLOAT_ROWS, d)``) and ``istate`` (int64,
``(N_INT_ROWS, d)``) hold everything a run needs to continue bit for bit; the
row indices are the module constants below. ``counters[0]`` is the number of
updates done so far.
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS, OVERFLOW
from .rng import _draw_batch

# float state rows
W_PLUS = 0
W_MINUS = 1
W_PLUS_PREV = 2
W_MINUS_PREV = 3
S_SUM_PLUS = 4
S_SUM_MINUS = 5
S_COMP_PLUS = 6
S_COMP_MINUS = 7
GRAD_MOMENTUM = 8
MIRROR_SUM = 9
MIRROR_COMP = 10
MIN_DELTA = 11
N_FLOAT_ROWS = 12

# int state rows
CROSS_PLUS = 0
CROSS_MINUS = 1
FIRST_CROSS_PLUS = 2
FIRST_CROSS_MINUS = 3
LAST_CROSS_PLUS = 4
LAST_CROSS_MINUS = 5
N_INT_ROWS = 6

# gradient modes
MODE_HESSIAN = 0
MODE_DATA = 1
MODE_MINIBATCH = 2

# kernel return codes (the public status table lives in dlnmomentum.status)
RUNNING = 0
CONVERGED = 1
DIVERGED = 3

# recorded vector fields, axis 1 of ``rec_vectors``
REC_THETA = 0
REC_W_PLUS = 1
REC_W_MINUS = 2
REC_DELTA = 3
N_REC_VECTORS = 4


@njit(**JIT_OPTIONS)
def _neumaier_add(total, comp, term):
    """One step of Neumaier's compensated summation; returns (total, comp)."""
    t = total + term
    if abs(total) >= abs(term):
        comp += (total - t) + term
    else:
        comp += (term - t) + total
    return t, comp


@njit(**JIT_OPTIONS)
def _theta_from_w(w_plus, w_minus, theta):
    for i in range(theta.shape[0]):
        theta[i] = (w_plus[i] * w_plus[i] - w_minus[i] * w_minus[i]) * 0.25


@njit(**JIT_OPTIONS)
def _half_mean_square_residual(X, y, theta):
    """L(θ) = ‖Xθ - y‖²/(2n) in the data form (accurate down to tiny losses)."""
    n, d = X.shape
    total = 0.0
    for m in range(n):
        r = 0.0
        for j in range(d):
            r += X[m, j] * theta[j]
        r -= y[m]
        total += r * r
    return total / (2.0 * n)


@njit(**JIT_OPTIONS)
def _gradient_hessian(H, b, theta, grad):
    """grad = Hθ - b, the sum over columns j in increasing order (H symmetric)."""
    d = theta.shape[0]
    for i in range(d):
        grad[i] = 0.0
    for j in range(d):
        tj = theta[j]
        for i in range(d):
            grad[i] += H[j, i] * tj
    for i in range(d):
        grad[i] -= b[i]


@njit(**JIT_OPTIONS)
def _gradient_data(X, XT, y, theta, resid, grad):
    """grad = Xᵀ(Xθ - y)/n; returns L(θ) from the same residual."""
    n, d = X.shape
    for m in range(n):
        resid[m] = 0.0
    for j in range(d):
        tj = theta[j]
        for m in range(n):
            resid[m] += XT[j, m] * tj
    loss = 0.0
    for m in range(n):
        resid[m] -= y[m]
        loss += resid[m] * resid[m]
    for i in range(d):
        grad[i] = 0.0
    for m in range(n):
        rm = resid[m]
        for i in range(d):
            grad[i] += X[m, i] * rm
    for i in range(d):
        grad[i] /= n
    return loss / (2.0 * n)


@njit(**JIT_OPTIONS)
def _gradient_batch(X, y, batch, theta, resid, grad):
    """grad = Σ_{m∈B} x_m(⟨x_m, θ⟩ - y_m)/|B| over the rows listed in ``batch``."""
    d = theta.shape[0]
    nb = batch.shape[0]
    for i in range(d):
        grad[i] = 0.0
    for q in range(nb):
        row = batch[q]
        r = 0.0
        for j in range(d):
            r += X[row, j] * theta[j]
        resid[q] = r - y[row]
    for q in range(nb):
        row = batch[q]
        rq = resid[q]
        for i in range(d):
            grad[i] += X[row, i] * rq
    for i in range(d):
        grad[i] /= nb


@njit(**JIT_OPTIONS)
def _record_row(X, y, X_test, y_test, fstate, theta, step, row, rec_step, rec_vectors, rec_losses):
    d = theta.shape[0]
    _theta_from_w(fstate[W_PLUS], fstate[W_MINUS], theta)
    rec_step[row] = step
    for i in range(d):
        wp = fstate[W_PLUS, i]
        wm = fstate[W_MINUS, i]
        rec_vectors[row, REC_THETA, i] = theta[i]
        rec_vectors[row, REC_W_PLUS, i] = wp
        rec_vectors[row, REC_W_MINUS, i] = wm
        rec_vectors[row, REC_DELTA, i] = abs(wp * wm)
    rec_losses[row, 0] = _half_mean_square_residual(X, y, theta)
    if X_test.shape[0] > 0:
        rec_losses[row, 1] = _half_mean_square_residual(X_test, y_test, theta)
    else:
        rec_losses[row, 1] = np.nan


@njit(**JIT_OPTIONS)
def _mgd_advance(
    X, XT, y, H, b, X_test, y_test,
    gamma, beta, mode, tol,
    rng_state, perm, batch_size, replace,
    fstate, istate, counters, n_steps,
    record_steps, record_cursor, record_offset, rec_step, rec_vectors, rec_losses,
):
    """Advance one run by at most ``n_steps`` updates, in place.

    Parameters are the problem arrays (``XT`` = Xᵀ contiguous; ``H``, ``b`` used in
    ``MODE_HESSIAN``), the hyperparameters, the random state (``rng_state``
    uint64[4] and permutation ``perm``, used in ``MODE_MINIBATCH``), the run
    state (``fstate``, ``istate``, ``counters``) and the recording schedule:
    the state after ``s`` updates is written to row ``record_cursor[0] -
    record_offset`` of the ``rec_*`` buffers when ``s == record_steps[record_cursor[0]]``.

    ``tol < 0`` disables the convergence test; otherwise the run stops, before
    updating, at the first iterate whose train loss is ``<= tol``.

    Returns ``RUNNING`` (budget of this call used up), ``CONVERGED`` or
    ``DIVERGED`` (the update would make an iterate non-finite or larger than
    ``OVERFLOW``; the state is left at the last finite iterate).
    """
    n, d = X.shape
    theta = np.empty(d)
    grad = np.empty(d)
    resid = np.empty(max(n, 1))
    batch = np.empty(max(batch_size, 1), dtype=np.int64)
    new_plus = np.empty(d)
    new_minus = np.empty(d)
    inv_plus = np.empty(d)
    inv_minus = np.empty(d)
    for i in range(d):
        inv_plus[i] = 1.0 / fstate[W_PLUS, i]
        inv_minus[i] = 1.0 / fstate[W_MINUS, i]
    n_record = record_steps.shape[0]
    step = counters[0]
    stop = step + n_steps
    status = RUNNING

    while True:
        cur = record_cursor[0]
        if cur < n_record and record_steps[cur] == step:
            _record_row(X, y, X_test, y_test, fstate, theta, step, cur - record_offset,
                        rec_step, rec_vectors, rec_losses)
            record_cursor[0] = cur + 1
        if step >= stop:
            break

        _theta_from_w(fstate[W_PLUS], fstate[W_MINUS], theta)
        if mode == MODE_DATA:
            loss = _gradient_data(X, XT, y, theta, resid, grad)
            if tol >= 0.0 and loss <= tol:
                status = CONVERGED
                break
        else:
            if tol >= 0.0 and _half_mean_square_residual(X, y, theta) <= tol:
                status = CONVERGED
                break
            if mode == MODE_HESSIAN:
                _gradient_hessian(H, b, theta, grad)
            else:
                _draw_batch(rng_state, perm, batch[:batch_size], replace)
                _gradient_batch(X, y, batch[:batch_size], theta, resid, grad)

        finite = True
        for i in range(d):
            gg = gamma * grad[i]
            wp = fstate[W_PLUS, i]
            wm = fstate[W_MINUS, i]
            a = wp - gg * wp + beta * (wp - fstate[W_PLUS_PREV, i])
            c = wm + gg * wm + beta * (wm - fstate[W_MINUS_PREV, i])
            new_plus[i] = a
            new_minus[i] = c
            if not (abs(a) < OVERFLOW and abs(c) < OVERFLOW):
                finite = False
        if not finite:
            status = DIVERGED
            break
        step += 1

        for i in range(d):
            wp = fstate[W_PLUS, i]
            wm = fstate[W_MINUS, i]
            a = new_plus[i]
            c = new_minus[i]
            inv_a = 1.0 / a
            inv_c = 1.0 / c
            dp = a - wp
            dm = c - wm
            fstate[S_SUM_PLUS, i], fstate[S_COMP_PLUS, i] = _neumaier_add(
                fstate[S_SUM_PLUS, i], fstate[S_COMP_PLUS, i], dp * (inv_plus[i] - beta * inv_a))
            fstate[S_SUM_MINUS, i], fstate[S_COMP_MINUS, i] = _neumaier_add(
                fstate[S_SUM_MINUS, i], fstate[S_COMP_MINUS, i], dm * (inv_minus[i] - beta * inv_c))
            mom = beta * fstate[GRAD_MOMENTUM, i] + grad[i]
            fstate[GRAD_MOMENTUM, i] = mom
            fstate[MIRROR_SUM, i], fstate[MIRROR_COMP, i] = _neumaier_add(
                fstate[MIRROR_SUM, i], fstate[MIRROR_COMP, i], gamma * mom)
            if (a < 0.0) != (wp < 0.0):
                istate[CROSS_PLUS, i] += 1
                if istate[CROSS_PLUS, i] == 1:
                    istate[FIRST_CROSS_PLUS, i] = step
                istate[LAST_CROSS_PLUS, i] = step
            if (c < 0.0) != (wm < 0.0):
                istate[CROSS_MINUS, i] += 1
                if istate[CROSS_MINUS, i] == 1:
                    istate[FIRST_CROSS_MINUS, i] = step
                istate[LAST_CROSS_MINUS, i] = step
            delta = abs(a * c)
            if delta < fstate[MIN_DELTA, i]:
                fstate[MIN_DELTA, i] = delta
            fstate[W_PLUS_PREV, i] = wp
            fstate[W_MINUS_PREV, i] = wm
            fstate[W_PLUS, i] = a
            fstate[W_MINUS, i] = c
            inv_plus[i] = inv_a
            inv_minus[i] = inv_c

    counters[0] = step
    return status


