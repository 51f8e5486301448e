"""Many network runs (the points of a (γ, β) sweep) advanced in one compiled call, in parallel over runs.

Every lane is the single run of :func:`.networks._net_advance` without recording: the same
:func:`.networks._net_step` per update, the same stop rule (a lane stops at its budget before
the convergence test, and tests convergence at the start of the next call), so each lane is
bit for bit ``dm.mgd`` of its point whatever the chunking, the thread count or the other lanes.

State, allocated by the caller, one row per lane ``r``: ``PARAMS[r]``/``PREV[r]``
(:math:`w_k`, :math:`w_{k-1}`), ``RNG[r]``/``PERM[r]`` (the lane's random state, SMGD),
``STEPS[r]`` (updates done) and ``STATUS[r]`` (``RUNNING`` until the kernel stops the lane:
``CONVERGED`` or ``DIVERGED``). Lane ``r`` trains on data set ``data_of[r]`` of the stacked
``Xs``/``ys`` (one per rep).
"""

from numba import njit, prange

from .config import PARALLEL_JIT_OPTIONS
from .networks import _net_step, _net_workspace
from .status import RUNNING


@njit(**PARALLEL_JIT_OPTIONS)
def _net_sweep_chunk(
    Xs, ys, widths, w_off, b_off, relu, data_of, gammas, betas, tol, batch_size, replace,
    RNG, PERM, PARAMS, PREV, STEPS, STATUS, lanes, n_steps, total,
):
    """Advance lanes ``lanes`` (indices of rows) by at most ``n_steps`` updates each, up to ``total``, in place.

    Lanes whose ``STATUS`` is not ``RUNNING`` or that have done ``total`` updates are left alone.
    """
    n, d = Xs.shape[1], Xs.shape[2]
    n_params = PARAMS.shape[1]
    for i in prange(lanes.shape[0]):
        r = lanes[i]
        if STATUS[r] != RUNNING or STEPS[r] >= total:
            continue
        off_n, acts, deltas, wt, grad, Xb, yb, batch, new = _net_workspace(widths, b_off, relu, n, d, n_params,
                                                                          batch_size)
        X = Xs[data_of[r]]
        y = ys[data_of[r]]
        cur = PARAMS[r].copy()
        prev = PREV[r].copy()
        rng_state = RNG[r]
        perm = PERM[r]
        step = STEPS[r]
        stop = min(step + n_steps, total)
        status = RUNNING
        while step < stop:
            status = _net_step(X, y, widths, w_off, b_off, relu, gammas[r], betas[r], tol, rng_state, perm,
                               batch_size, replace, cur, prev, new, off_n, acts, deltas, wt, grad, Xb, yb, batch)
            if status != RUNNING:
                break
            step += 1
            prev, cur, new = cur, new, prev  # rotate, as the single run
        for k in range(n_params):
            PARAMS[r, k] = cur[k]
            PREV[r, k] = prev[k]
        STEPS[r] = step
        STATUS[r] = status
