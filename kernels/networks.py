r"""Heavy-ball momentum (MGD / SMGD) on fully connected networks: a ReLU teacher-student net and deep linear nets.

Network
-------
Layer widths :math:`(m_0, m_1, \dots, m_L)`, input :math:`a^{(0)} = x \in \mathbb R^{m_0}`,

.. math::

    a^{(l+1)} = \sigma_l\big(a^{(l)} W_l + b_l\big),\qquad f(x) = a^{(L)} \in \mathbb R^{m_L},

with :math:`W_l` of shape :math:`(m_l, m_{l+1})`, :math:`\sigma_l` the ReLU on hidden layers when
``relu`` is set (identity otherwise) and the identity on the output layer. A layer has a bias
:math:`b_l` when ``b_off[l] >= 0``. All parameters live in one flat float64 vector: layer ``l``
holds ``W_l`` row-major (``W_l[j, i]`` at ``w_off[l] + j·m_{l+1} + i``) and ``b_l`` at
``b_off[l]``. (Row-major ``(in, out)`` makes the forward pass and the weight gradient contiguous
``axpy`` loops over the output units.)

Loss and gradient
-----------------
:math:`L(w) = \|f(X) - y\|^2/(2n)` (the output width is 1). Backpropagation with
:math:`\delta^{(L)} = (f(X) - y)/n`, :math:`\nabla_{W_l} L = a^{(l)\top}\delta^{(l+1)}`,
:math:`\nabla_{b_l} L = \mathbf 1^\top\delta^{(l+1)}`,
:math:`\delta^{(l)} = (\delta^{(l+1)} W_l^\top)\odot\sigma_{l-1}'`. ReLU kink convention:
:math:`\mathrm{relu}'(0) = 0`; the derivative is read as ``a > 0`` from the activation, so a
pre-activation exactly 0 passes no gradient (as in PyTorch).

Every sum runs over its index in increasing order from +0.0 with one fused multiply-add per
term (:func:`.config.fma`), so results do not depend on the compiler.

Update
------
Heavy ball, :math:`w_{k+1} = w_k - \gamma\nabla L_{\mathcal B_k}(w_k) + \beta(w_k - w_{k-1})`,
:math:`w_1 = w_0`, written ``fma(β, w - w_prev, fma(-γ, g, w))``. SMGD draws
:math:`\mathcal B_k` with :func:`.rng._draw_batch` from the caller's explicit random state
(the same generator and batch rule as the diagonal kernel :mod:`.mgd`).

Statuses (:mod:`.status`): ``CONVERGED`` when the full train loss of the current iterate is
``<= tol`` (checked before an update), ``DIVERGED`` when an update would leave
``(-OVERFLOW, OVERFLOW)`` or be non-finite (it is not committed: the state stays at the last
finite iterate), else ``RUNNING`` when the budget of the call is used up.
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS, OVERFLOW, fma
from .layout import block_view
from .linear_networks import _product_loss, _product_loss_grad, is_product_net, product_net_step, work_size
from .rng import _draw_batch
from .status import CONVERGED, DIVERGED, RUNNING


@njit(**JIT_OPTIONS)
def _activation_offsets(widths, n, offsets):
    """offsets[l] = n·Σ_{k<l} m_k: start of layer l's (n, m_l) block in the activation buffer; returns the size."""
    total = 0
    for k in range(widths.shape[0]):
        offsets[k] = total
        total += n * widths[k]
    return total


@njit(**JIT_OPTIONS)
def _forward(params, widths, w_off, b_off, relu, X, offsets, acts):
    """Activations of every layer for the rows of ``X`` into ``acts`` (layer 0 is a copy of X)."""
    n = X.shape[0]
    n_layers = widths.shape[0] - 1
    A0 = block_view(acts, offsets[0], n, widths[0])
    for m in range(n):
        xr = X[m]
        ar = A0[m]
        for j in range(widths[0]):
            ar[j] = xr[j]
    for layer in range(n_layers):
        fan_in = widths[layer]
        fan_out = widths[layer + 1]
        W = block_view(params, w_off[layer], fan_in, fan_out)
        bo = b_off[layer]
        hidden = layer < n_layers - 1
        A_in = block_view(acts, offsets[layer], n, fan_in)
        Z = block_view(acts, offsets[layer + 1], n, fan_out)
        if fan_out == 1:  # a scalar output: one dot product per sample (same order, same bits)
            for m in range(n):
                a_in = A_in[m]
                acc = params[bo] if bo >= 0 else 0.0
                for j in range(fan_in):
                    acc = fma(W[j, 0], a_in[j], acc)
                Z[m, 0] = acc if not (hidden and relu) or acc > 0.0 else 0.0
            continue
        for m in range(n):
            z = Z[m]
            a_in = A_in[m]
            if bo >= 0:
                b = params[bo:bo + fan_out]
                for i in range(fan_out):
                    z[i] = b[i]
            else:
                for i in range(fan_out):
                    z[i] = 0.0
            for j in range(fan_in):
                a = a_in[j]
                w = W[j]
                for i in range(fan_out):
                    z[i] = fma(w[i], a, z[i])
            if hidden and relu:
                for i in range(fan_out):
                    v = z[i]
                    z[i] = v if v > 0.0 else 0.0


@njit(**JIT_OPTIONS)
def _loss(params, widths, w_off, b_off, relu, X, y, offsets, acts):
    """L(w) = ‖f(X) - y‖²/(2n) (NaN for an empty X); in product form for linear nets without biases.

    ``acts`` has the size :func:`_workspace_size` gives (room for the product form's vectors too).
    """
    n = X.shape[0]
    if n == 0:
        return np.nan
    if is_product_net(relu, b_off, widths):
        return _product_loss(params, widths, w_off, X, y, acts[n:], acts[:n])
    _forward(params, widths, w_off, b_off, relu, X, offsets, acts)
    out = offsets[widths.shape[0] - 1]
    total = 0.0
    for m in range(n):
        r = acts[out + m] - y[m]
        total = fma(r, r, total)
    return total / (2.0 * n)


@njit(**JIT_OPTIONS)
def _loss_grad(params, widths, w_off, b_off, relu, X, y, offsets, acts, deltas, wt, grad):
    """∇L(w) into ``grad`` (every entry written) by backpropagation; returns L(w) from the same forward pass.

    ``deltas`` has the size of ``acts`` (δ of layer l in layer l's block); ``wt`` holds at least
    max_l m_l·m_{l+1} floats (the transpose of one weight matrix, so that δW_lᵀ is a contiguous axpy).
    """
    n = X.shape[0]
    n_layers = widths.shape[0] - 1
    _forward(params, widths, w_off, b_off, relu, X, offsets, acts)
    out = offsets[n_layers]
    total = 0.0
    for m in range(n):
        r = acts[out + m] - y[m]
        total = fma(r, r, total)
        deltas[out + m] = r / n
    for layer in range(n_layers - 1, -1, -1):
        fan_in = widths[layer]
        fan_out = widths[layer + 1]
        bo = b_off[layer]
        D = block_view(deltas, offsets[layer + 1], n, fan_out)
        A_in = block_view(acts, offsets[layer], n, fan_in)
        G = block_view(grad, w_off[layer], fan_in, fan_out)
        # ∇W[j, :] = Σ_m a[m, j] δ[m, :]
        for j in range(fan_in):
            g = G[j]
            for i in range(fan_out):
                g[i] = 0.0
        if fan_out == 1:  # (same order, same bits, without inner loops of length 1)
            gw = grad[w_off[layer]:w_off[layer] + fan_in]
            for m in range(n):
                c = D[m, 0]
                a_in = A_in[m]
                for j in range(fan_in):
                    gw[j] = fma(a_in[j], c, gw[j])
        else:
            for m in range(n):
                dm = D[m]
                a_in = A_in[m]
                for j in range(fan_in):
                    a = a_in[j]
                    g = G[j]
                    for i in range(fan_out):
                        g[i] = fma(a, dm[i], g[i])
        if bo >= 0:
            gb = grad[bo:bo + fan_out]
            for i in range(fan_out):
                gb[i] = 0.0
            for m in range(n):
                dm = D[m]
                for i in range(fan_out):
                    gb[i] += dm[i]
        if layer == 0:
            break
        # δ_in[m, :] = (Σ_i δ[m, i] W[:, i]) ⊙ σ'(a_in[m, :]), with Wᵀ contiguous
        W = block_view(params, w_off[layer], fan_in, fan_out)
        WT = block_view(wt, 0, fan_out, fan_in)
        for j in range(fan_in):
            w = W[j]
            for i in range(fan_out):
                WT[i, j] = w[i]
        D_in = block_view(deltas, offsets[layer], n, fan_in)
        for m in range(n):
            d_in = D_in[m]
            dm = D[m]
            for j in range(fan_in):
                d_in[j] = 0.0
            for i in range(fan_out):
                c = dm[i]
                wt_i = WT[i]
                for j in range(fan_in):
                    d_in[j] = fma(wt_i[j], c, d_in[j])
            if relu:  # hidden layer: relu'(z) = 1 iff a = relu(z) > 0 (relu'(0) = 0)
                a_in = A_in[m]
                for j in range(fan_in):
                    if not a_in[j] > 0.0:
                        d_in[j] = 0.0
    return total / (2.0 * n)


@njit(**JIT_OPTIONS)
def _workspace_size(widths, n):
    """(offsets, size, largest): activation offsets for n rows, the size of ``acts``/``deltas`` and of ``wt``.

    ``size`` is n·Σm_k for backpropagation plus :func:`.linear_networks.work_size`, so that the
    product form finds its residuals and its scratch (after the first n floats) in ``acts``;
    ``largest`` is max_l m_l·m_{l+1} (one transposed weight matrix).
    """
    offsets = np.zeros(widths.shape[0], dtype=np.int64)
    size = _activation_offsets(widths, n, offsets)
    largest = 0
    for k in range(widths.shape[0] - 1):
        largest = max(largest, widths[k] * widths[k + 1])
    return offsets, size + work_size(widths), largest


@njit(**JIT_OPTIONS)
def _net_loss(params, widths, w_off, b_off, relu, X, y):
    """L(w) on (X, y) (allocates its workspace; for results and tests)."""
    offsets, size, _ = _workspace_size(widths, X.shape[0])
    acts = np.zeros(max(size, 1))
    return _loss(params, widths, w_off, b_off, relu, X, y, offsets, acts)


@njit(**JIT_OPTIONS)
def _net_loss_grad(params, widths, w_off, b_off, relu, X, y, grad, product=True):
    """∇L(w) into ``grad``; returns L(w) (allocates its workspace; for tests).

    The gradient the kernels use: the product form (:mod:`.linear_networks`) where it applies and
    ``product`` is set, else backpropagation (:func:`_loss_grad`).
    """
    offsets, size, largest = _workspace_size(widths, X.shape[0])
    acts = np.zeros(max(size, 1))
    deltas = np.zeros(max(size, 1))
    wt = np.zeros(max(largest, 1))
    if product and is_product_net(relu, b_off, widths):
        return _product_loss_grad(params, widths, w_off, X, y, acts[X.shape[0]:], acts, grad)
    return _loss_grad(params, widths, w_off, b_off, relu, X, y, offsets, acts, deltas, wt, grad)


@njit(**JIT_OPTIONS)
def _heavy_ball(cur, prev, grad, gamma, beta, new):
    """new = fma(β, w - w_prev, fma(-γ, ∇L, w)); False if an entry leaves (-OVERFLOW, OVERFLOW) or is NaN."""
    ok = True
    for k in range(cur.shape[0]):
        w = cur[k]
        v = fma(beta, w - prev[k], fma(-gamma, grad[k], w))
        new[k] = v
        ok &= abs(v) < OVERFLOW  # False for NaN as well
    return ok


@njit(**JIT_OPTIONS)
def _net_workspace(widths, b_off, relu, n, d, n_params, batch_size):
    """The scratch arrays of :func:`_net_step` for ``n`` train rows (one set per call of a kernel, not per step).

    Returns ``(off_n, acts, deltas, wt, grad, Xb, yb, batch, new)``: activation offsets of the train
    set, activations and deltas, one transposed weight matrix, the gradient, the batch rows and
    indices, and the buffer of the next iterate. Each is sized for what a step of this net reads: a
    product-form net (:func:`.linear_networks.is_product_net`) uses only ``acts`` (its n residuals and
    :func:`.linear_networks.work_size` floats), ``batch`` and ``new``, so the backpropagation buffers
    are then one float each (they were n·Σm_l floats, allocated and zeroed in every chunk). A test
    set's buffer is the caller's, and only when it records (:func:`_test_workspace`).
    """
    off_n = np.zeros(widths.shape[0], dtype=np.int64)
    _activation_offsets(widths, n, off_n)
    batch = np.empty(max(batch_size, 1), dtype=np.int64)
    new = np.empty(n_params)
    if is_product_net(relu, b_off, widths):
        acts = np.zeros(n + work_size(widths))
        one = np.zeros(1)
        return off_n, acts, one, one, one, np.zeros((1, d)), one, batch, new
    nb = n if batch_size == 0 else batch_size
    _, size, largest = _workspace_size(widths, n)
    acts = np.zeros(max(size, 1))
    deltas = np.zeros(max(size, 1))
    wt = np.zeros(max(largest, 1))
    grad = np.zeros(n_params)
    Xb = np.zeros((nb, d))
    yb = np.zeros(nb)
    return off_n, acts, deltas, wt, grad, Xb, yb, batch, new


@njit(**JIT_OPTIONS)
def _test_workspace(widths, n_test):
    """(offsets, acts) for :func:`_loss` on ``n_test`` rows: allocated by :func:`_net_advance` only in a call that
    records (a 1000-row test set of the paper's deep linear net is 2.2 MB)."""
    offsets, size, _ = _workspace_size(widths, n_test)
    return offsets, np.zeros(max(size, 1))


@njit(inline="always", **JIT_OPTIONS)  # inlined into both callers: no call, no reference counting per step
def _net_step(
    X, y, widths, w_off, b_off, relu, gamma, beta, tol, rng_state, perm, batch_size, replace,
    cur, prev, new, off_n, acts, deltas, wt, grad, Xb, yb, batch,
):
    """One heavy-ball update: ``new`` = :math:`w_{k+1}` from ``cur`` = :math:`w_k` and ``prev`` = :math:`w_{k-1}`.

    The one definition of a step, shared by the single run (:func:`_net_advance`) and the sweep
    lanes (:func:`.network_sweep._net_sweep_chunk`), so that every sweep point is the single run
    bit for bit. Returns ``CONVERGED`` (full train loss of ``cur`` ``<= tol``, checked before the
    update; ``tol < 0`` disables it), ``DIVERGED`` (the update left ``(-OVERFLOW, OVERFLOW)``;
    ``new`` is then not an iterate) or ``RUNNING`` (``new`` holds :math:`w_{k+1}`).

    Linear nets without biases take the product form (:func:`.linear_networks.product_net_step`:
    the same update with the gradient from end-to-end products, about 15x fewer operations for the
    paper's deep linear net); every other net backpropagates.
    """
    if is_product_net(relu, b_off, widths):
        return product_net_step(X, y, widths, w_off, gamma, beta, tol, rng_state, perm, batch_size, replace,
                                batch, cur, prev, new, acts[X.shape[0]:], acts)
    if batch_size == 0:
        loss = _loss_grad(cur, widths, w_off, b_off, relu, X, y, off_n, acts, deltas, wt, grad)
        if tol >= 0.0 and loss <= tol:
            return CONVERGED
    else:
        if tol >= 0.0 and _loss(cur, widths, w_off, b_off, relu, X, y, off_n, acts) <= tol:
            return CONVERGED
        _draw_batch(rng_state, perm, batch[:batch_size], replace)
        for q in range(batch_size):
            r = batch[q]
            for j in range(X.shape[1]):
                Xb[q, j] = X[r, j]
            yb[q] = y[r]
        _loss_grad(cur, widths, w_off, b_off, relu, Xb, yb, off_n, acts, deltas, wt, grad)
    if not _heavy_ball(cur, prev, grad, gamma, beta, new):
        return DIVERGED
    return RUNNING


@njit(**JIT_OPTIONS)
def _net_advance(
    X, y, X_test, y_test, widths, w_off, b_off, relu,
    gamma, beta, tol,
    rng_state, perm, batch_size, replace,
    params, params_prev, counters, n_steps,
    record_steps, record_cursor, record_offset, rec_step, rec_losses, rec_params,
):
    """Advance one network run by at most ``n_steps`` heavy-ball updates, in place.

    ``params``/``params_prev`` are :math:`w_k` and :math:`w_{k-1}` (equal at the start),
    ``counters[0]`` the number of updates done. ``batch_size = 0`` is full batch; otherwise
    each update draws a batch from ``rng_state``/``perm`` (:func:`.rng._draw_batch`).
    The state after ``s`` updates is recorded (step, train and test loss, and the parameters
    when ``rec_params`` has columns) into row ``record_cursor[0] - record_offset`` when
    ``s == record_steps[record_cursor[0]]``. ``tol < 0`` disables the convergence test.
    Each update is :func:`_net_step`.
    Returns ``RUNNING``, ``CONVERGED`` or ``DIVERGED`` (see the module docstring).
    """
    n_params = params.shape[0]
    off_n, acts, deltas, wt, grad, Xb, yb, batch, new = _net_workspace(
        widths, b_off, relu, X.shape[0], X.shape[1], n_params, batch_size)
    off_t, acts_t = _test_workspace(widths, 0)  # replaced at the first record of this call
    have_test = False
    cur = params.copy()
    prev = params_prev.copy()
    n_record = record_steps.shape[0]
    step = counters[0]
    stop = step + n_steps
    status = RUNNING
    record_params = rec_params.shape[1] > 0

    while True:
        rc = record_cursor[0]
        if rc < n_record and record_steps[rc] == step:
            row = rc - record_offset
            rec_step[row] = step
            rec_losses[row, 0] = _loss(cur, widths, w_off, b_off, relu, X, y, off_n, acts)
            if not have_test:
                off_t, acts_t = _test_workspace(widths, X_test.shape[0])
                have_test = True
            rec_losses[row, 1] = _loss(cur, widths, w_off, b_off, relu, X_test, y_test, off_t, acts_t)
            if record_params:
                for k in range(n_params):
                    rec_params[row, k] = cur[k]
            record_cursor[0] = rc + 1
        if step >= stop:
            break
        status = _net_step(X, y, widths, w_off, b_off, relu, gamma, beta, tol, rng_state, perm, batch_size,
                           replace, cur, prev, new, off_n, acts, deltas, wt, grad, Xb, yb, batch)
        if status != RUNNING:
            break
        step += 1
        # Rotate buffers instead of copying: prev <- current <- new <- old prev.
        prev, cur, new = cur, new, prev

    for k in range(n_params):
        params[k] = cur[k]
        params_prev[k] = prev[k]
    counters[0] = step
    return status
