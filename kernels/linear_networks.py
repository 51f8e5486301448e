r"""Deep linear networks without biases and with a scalar output: loss, gradient and update in product form.

Why a second gradient
---------------------
A linear network :math:`f(x) = x W_0 W_1 \cdots W_{L-1}` (``W_l`` of shape :math:`(m_l, m_{l+1})`,
:math:`m_L = 1`) is the linear model :math:`f(x) = \langle x, P\rangle` with the end-to-end vector
:math:`P = W_0 W_1 \cdots W_{L-1} \in \mathbb R^{m_0}`. Backpropagation (:func:`.networks._loss_grad`)
pushes all n samples through every layer: :math:`2n\sum_l m_l m_{l+1}` multiply-adds forward and
twice that backward (about 2 MFLOP per step for the paper's (30, 60, 120, 60, 1) net on n = 20).
The product form needs only matrix-vector products, independent of n:

.. math::

    a_{L-1} = 1,\quad a_{l-1} = W_l\,a_l,\quad P = W_0\,a_0
        \qquad (a_l = W_{l+1}\cdots W_{L-1} \in \mathbb R^{m_{l+1}}),

    \delta = (XP - y)/n,\quad e_0 = X^\top\delta,\quad e_{l+1} = W_l^\top e_l
        \qquad (e_l = (W_0\cdots W_{l-1})^\top X^\top\delta \in \mathbb R^{m_l}),

    \nabla_{W_l} L = e_l\,a_l^\top,\qquad L = \|XP - y\|^2/(2n),

about :math:`3\sum_l m_l m_{l+1}` multiply-adds per step (n times fewer than backpropagating each of
the n samples: 20x for the paper's net), and the gradient of a layer is a rank-one outer product that
is never stored: one pass over each layer
computes :math:`e_{l+1}` and writes the heavy-ball update of its weights,
``new = fma(β, w - w_prev, fma(-γ, e_j·a_i, w))`` with the product :math:`e_j a_i` rounded on its own
(the form of :func:`.networks._heavy_ball`, with this gradient entry).

The two gradients are the same function; they differ only in rounding (the tests check them against
each other to 1e-13 relative, against central differences and against independent NumPy and torch
loops). Every sum has one fixed order, written out, so results do not depend on the compiler: sums
over samples and the e chain run over their index in increasing order from +0.0 with one fused
multiply-add per term; the row dot products of the suffix chain (:func:`_rows_dot`) use eight
interleaved partial sums (one vector register) combined pairwise, an order the tests check bit for
bit against an exact reference. (Numba's loop vectoriser cannot keep a strictly ordered sum in a
register, and a chain of dependent fused multiply-adds would bound the speed.)

Cost and limit: per step the kernel reads the weights twice (suffix chain, then the update pass) and
``w_prev``, and writes ``w_new``: about 4·8·Σ m_l m_{l+1} bytes, 0.5 MB for the paper's net, from the L2
cache. That traffic, not arithmetic, sets its speed (benchmarks/README.md).

Scratch (caller allocated, :func:`work_size` floats, split by :func:`_views`): ``suffix`` holds
:math:`a_0, \dots, a_{L-1}` (a_l at offset :math:`\sum_{1 \le k \le l} m_k`) followed by P
(:math:`\sum_l m_l` floats); ``evec`` two vectors of the widest layer (:math:`e_l` and :math:`e_{l+1}`,
alternating); ``part`` the (widest, 8) partial sums of :func:`_rows_dot`.
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS, OVERFLOW, fma
from .layout import block_view
from .rng import _draw_batch
from .status import CONVERGED, DIVERGED, RUNNING
from .vec_ir import LW, _rows_partial8


@njit(inline="always", **JIT_OPTIONS)
def is_product_net(relu, b_off, widths):
    """Whether the product form applies: no ReLU, no bias, a scalar output."""
    if relu or widths[widths.shape[0] - 1] != 1:
        return False
    for layer in range(b_off.shape[0]):
        if b_off[layer] >= 0:
            return False
    return True


@njit(**JIT_OPTIONS)
def _rows_dot(W, x, out, part):
    r"""out[j] = ⟨W[j], x⟩ for every row j, in one fixed order; ``part`` is (>= rows, LW) scratch.

    Order (independent of the compiler and of the row count): ``LW`` = 8 partial sums from +0.0,
    :math:`s_k = \sum_{i \equiv k \ (8)} W_{ji} x_i` with one fused multiply-add per term in
    increasing i (:func:`.vec_ir._rows_partial8`: one vector register per row, then the last
    ``cols mod 8`` columns), combined as :math:`((s_0 + s_1) + (s_2 + s_3)) + ((s_4 + s_5) + (s_6 + s_7))`.
    """
    rows, cols = W.shape
    _rows_partial8(W, x, part)
    base = (cols // LW) * LW
    for j in range(rows):
        s = part[j]
        r = W[j]
        for k in range(cols - base):
            s[k] = fma(r[base + k], x[base + k], s[k])
        out[j] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))


@njit(inline="always", **JIT_OPTIONS)
def _layer(params, w_off, widths, layer):
    """W_l as a (m_l, m_{l+1}) row-major view of the flat parameters."""
    return block_view(params, w_off[layer], widths[layer], widths[layer + 1])


@njit(inline="always", **JIT_OPTIONS)
def _width_sum_and_max(widths):
    """(Σ_l m_l, max_l m_l): the sizes of the scratch parts."""
    total = 0
    widest = 0
    for k in range(widths.shape[0]):
        total += widths[k]
        widest = max(widest, widths[k])
    return total, widest


@njit(**JIT_OPTIONS)
def work_size(widths):
    """Floats of the scratch buffer ``work`` of the functions below: Σ_l m_l + (2 + LW)·max_l m_l."""
    total, widest = _width_sum_and_max(widths)
    return total + (2 + LW) * widest


@njit(inline="always", **JIT_OPTIONS)
def _views(widths, work):
    """(suffix, evec, part, widest): the parts of ``work`` (see the module docstring)."""
    total, widest = _width_sum_and_max(widths)
    suffix = work[:total]
    evec = work[total:total + 2 * widest]
    part = work[total + 2 * widest:total + 2 * widest + LW * widest].reshape((widest, LW))
    return suffix, evec, part, widest


@njit(**JIT_OPTIONS)
def _end_to_end(params, widths, w_off, suffix, part):
    """Fill ``suffix`` with a_0 .. a_{L-1} and P = W_0 ⋯ W_{L-1}; returns P (a view of ``suffix``)."""
    n_layers = widths.shape[0] - 1
    # a_l lives at offset o_l = Σ_{1 <= k <= l} m_k (a_l has m_{l+1} entries); P after a_{L-1}.
    o_last = 0
    for k in range(1, n_layers):
        o_last += widths[k]
    suffix[o_last] = 1.0  # a_{L-1} = 1 (m_L = 1)
    o_next = o_last
    for layer in range(n_layers - 1, 0, -1):
        o = o_next - widths[layer]
        _rows_dot(_layer(params, w_off, widths, layer), suffix[o_next:o_next + widths[layer + 1]],
                  suffix[o:o + widths[layer]], part)
        o_next = o
    P = suffix[o_last + 1:o_last + 1 + widths[0]]
    _rows_dot(_layer(params, w_off, widths, 0), suffix[0:widths[1]], P, part)
    return P


@njit(**JIT_OPTIONS)
def _residual_sum(X, y, P, rows, count, res):
    """res[q] = ⟨X[m_q], P⟩ - y[m_q] for q < count, m_q = rows[q] (m_q = q when ``rows`` is empty); returns Σ res²."""
    d = X.shape[1]
    q = 0
    while q + 4 <= count:  # four rows at a time: four independent chains (the same sums, row by row)
        if rows.shape[0] > 0:
            m0, m1, m2, m3 = rows[q], rows[q + 1], rows[q + 2], rows[q + 3]
        else:
            m0, m1, m2, m3 = q, q + 1, q + 2, q + 3
        x0, x1, x2, x3 = X[m0], X[m1], X[m2], X[m3]
        s0 = s1 = s2 = s3 = 0.0
        for j in range(d):
            pj = P[j]
            s0 = fma(x0[j], pj, s0)
            s1 = fma(x1[j], pj, s1)
            s2 = fma(x2[j], pj, s2)
            s3 = fma(x3[j], pj, s3)
        res[q], res[q + 1], res[q + 2], res[q + 3] = s0 - y[m0], s1 - y[m1], s2 - y[m2], s3 - y[m3]
        q += 4
    while q < count:
        m = rows[q] if rows.shape[0] > 0 else q
        xr = X[m]
        s = 0.0
        for j in range(d):
            s = fma(xr[j], P[j], s)
        res[q] = s - y[m]
        q += 1
    total = 0.0
    for q in range(count):
        total = fma(res[q], res[q], total)
    return total


@njit(**JIT_OPTIONS)
def _product_loss(params, widths, w_off, X, y, work, res):
    """L(w) = ‖XP - y‖²/(2n) (NaN for an empty X); ``res`` holds at least n floats."""
    n = X.shape[0]
    if n == 0:
        return np.nan
    suffix, _, part, _ = _views(widths, work)
    P = _end_to_end(params, widths, w_off, suffix, part)
    return _residual_sum(X, y, P, np.empty(0, dtype=np.int64), n, res) / (2.0 * n)


@njit(**JIT_OPTIONS)
def _input_gradient(X, rows, res, count, e0):
    """e_0 = Xᵀδ over the given rows, δ = res/count, each entry summed over the rows in order from +0.0."""
    for j in range(e0.shape[0]):
        e0[j] = 0.0
    for q in range(count):
        m = rows[q] if rows.shape[0] > 0 else q
        c = res[q] / count
        xr = X[m]
        for j in range(e0.shape[0]):
            e0[j] = fma(xr[j], c, e0[j])


@njit(**JIT_OPTIONS)
def _update_layers(cur, prev, new, widths, w_off, suffix, evec, widest, gamma, beta, grad, keep_grad):
    """Heavy-ball update of every layer from e_0 (in ``evec[:m_0]``) and the suffix vectors a_l.

    One pass per layer: e_{l+1} = W_lᵀ e_l and ``new`` = the update with ∇W_l = e_l a_lᵀ. Writes the
    gradient to ``grad`` as well when ``keep_grad`` (for tests). Returns False if an updated entry
    leaves (-OVERFLOW, OVERFLOW) or is NaN.
    """
    n_layers = widths.shape[0] - 1
    ok = True
    e_at = 0
    a_off = 0
    for layer in range(n_layers):
        fan_in = widths[layer]
        fan_out = widths[layer + 1]
        W = _layer(cur, w_off, widths, layer)
        Wp = _layer(prev, w_off, widths, layer)
        Wn = _layer(new, w_off, widths, layer)
        e = evec[e_at:e_at + fan_in]
        nxt_at = widest - e_at
        e_next = evec[nxt_at:nxt_at + fan_out]
        a = suffix[a_off:a_off + fan_out]
        last = layer == n_layers - 1
        for i in range(fan_out):
            e_next[i] = 0.0
        for j in range(fan_in):
            ej = e[j]
            w = W[j]
            wp = Wp[j]
            wn = Wn[j]
            for i in range(fan_out):
                wv = w[i]
                v = fma(beta, wv - wp[i], fma(-gamma, ej * a[i], wv))
                wn[i] = v
                ok &= abs(v) < OVERFLOW  # False for NaN as well
            if not last:  # its own loop: both loops vectorise
                for i in range(fan_out):
                    e_next[i] = fma(w[i], ej, e_next[i])
            if keep_grad:
                gr = _layer(grad, w_off, widths, layer)[j]
                for i in range(fan_out):
                    gr[i] = ej * a[i]
        e_at = nxt_at
        a_off += fan_out
    return ok


@njit(**JIT_OPTIONS)
def _product_loss_grad(params, widths, w_off, X, y, work, res, grad):
    """∇L(w) into ``grad`` and L(w) in product form (for tests and :func:`.networks._net_loss_grad`)."""
    n = X.shape[0]
    suffix, evec, part, widest = _views(widths, work)
    P = _end_to_end(params, widths, w_off, suffix, part)
    rows = np.empty(0, dtype=np.int64)
    total = _residual_sum(X, y, P, rows, n, res)
    _input_gradient(X, rows, res, n, evec[:widths[0]])
    scratch = np.empty_like(params)
    _update_layers(params, params, scratch, widths, w_off, suffix, evec, widest, 0.0, 0.0, grad, True)
    return total / (2.0 * n)


@njit(inline="always", **JIT_OPTIONS)
def product_net_step(X, y, widths, w_off, gamma, beta, tol, rng_state, perm, batch_size, replace, batch,
                     cur, prev, new, work, res):
    """One heavy-ball update of a product-form net, with the contract of :func:`.networks._net_step`.

    Full batch (``batch_size = 0``): the loss of ``cur`` comes from the residuals of the gradient.
    SMGD: the full train loss is computed only when ``tol >= 0``, before the batch is drawn (as in
    :func:`.networks._net_step`: a converged run draws no batch), from the same P. ``work`` has
    :func:`work_size` floats, ``res`` at least n. Returns ``CONVERGED`` (train loss of ``cur``
    ``<= tol``), ``DIVERGED`` (``new`` is then not an iterate) or ``RUNNING``.
    """
    suffix, evec, part, widest = _views(widths, work)
    P = _end_to_end(cur, widths, w_off, suffix, part)
    n = X.shape[0]
    rows = batch[:0]
    count = n
    if batch_size == 0 or tol >= 0.0:
        loss = _residual_sum(X, y, P, rows, n, res) / (2.0 * n)
        if tol >= 0.0 and loss <= tol:
            return CONVERGED
    if batch_size > 0:
        rows = batch[:batch_size]
        _draw_batch(rng_state, perm, rows, replace)
        count = batch_size
        _residual_sum(X, y, P, rows, count, res)
    _input_gradient(X, rows, res, count, evec[:widths[0]])
    # (the grad argument is not written when keep_grad is False)
    if not _update_layers(cur, prev, new, widths, w_off, suffix, evec, widest, gamma, beta, new, False):
        return DIVERGED
    return RUNNING
