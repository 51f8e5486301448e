r"""Lockstep flows: many MGF(λ) / gradient-flow runs on the same data, advanced stage by stage together.

What it computes
----------------
Every *lane* is one run of :func:`dlnmomentum.kernels.flow_run._flow_advance` with its
own λ, grid step ``h``, start refinement ``(n_fine, m_fine)``, tolerance and
length; the lanes of a group share a stepping scheme (RK4 or the exponential RK4 of
:mod:`.flow_exp`). The same pieces, stages, integrals, crossing search, convergence and
divergence tests, in the same order on the same operands, so every lane is
**bitwise equal** to the single-run kernel (the test-suite checks this, crossings,
divergence and convergence included). Lanes do not record trajectories (a sweep
keeps final states).

How the lanes share the work
----------------------------
One lockstep iteration is one piece (one step of the scheme, of size ``h`` or smaller in a
tiled grid step) of every active lane. Its gradient evaluations (four for RK4, five for the
exponential scheme) are done for all lanes at once: the
stage inputs θ of the ``LANES`` lanes are gathered lane-innermost and multiplied by
``H`` (or ``X`` and ``Xᵀ``) with the register-blocked product that the MGD sweep uses too
(:func:`.vec_ir._mv_tile`: ``TILE x LW`` sums in registers, one broadcast of a
matrix element feeding all lanes, fused multiply-adds over the column in
increasing order from +0.0, which is exactly the single run's ``_axpy_columns``).
A single run's gradient is a chain of dependent multiply-adds along the column;
across lanes these chains are independent, which is what the SIMD units and the
out-of-order core need. The element-wise stage passes are the single-run functions
applied to each lane's own work array (they already vectorise along the
coordinates). A lane whose run has ended (converged, diverged, end of its grid or
of the chunk's budget) is skipped; the others go on.
"""

import numpy as np
from numba import njit, prange

from .config import JIT_OPTIONS, PARALLEL_JIT_OPTIONS
from .flow import (
    _A_SUB,
    _B,
    _NR,
    BLOCK,
    STEPS_DONE,
    _begin_step,
    _finish_step,
    _gf_stage,
    _gf_velocity,
    _gradient,
    _load_work,
    _mgf_stage,
    _store_work,
)
from .flow_exp import (
    C_H,
    N_COEF,
    _coefficients_of,
    _exp_coefficients,
    _exp_finish,
    _piece_coefficients,
    _stage_final,
    _stage_four,
    _stage_one,
    _stage_three,
    _stage_two,
)
from .flow_run import SCHEME_EXP, piece, tiled_step
from .layout import MODE_DATA, round_up
from .mgd import _half_mean_square_residual
from .status import CONVERGED, DIVERGED, RUNNING
from .vec_ir import LW, TILE, _mv_tile

#: Runs per lockstep group: the lanes of the register-blocked product :func:`.vec_ir._mv_tile`.
LANES = LW

#: Lanes left in a group below which gradients are computed lane by lane (see :func:`_lane_gradients`).
SOLO_LANES = 2

# Lane phases of _flow_group: whether a lane still takes steps in this call. Not run statuses: why a
# lane stopped (converged, diverged, budget used up) is its ``codes[g]``, a :mod:`.status` code.
_PHASE_STEPPING = 0
_PHASE_STOPPED = 1


def padded_rows(n, dp):
    """Rows of the zero-padded matrices of a group: ``X`` (rows ``nt`` x dp), ``Xᵀ`` and ``H``
    (rows ``dpt`` x n and x dp): n and the padded width dp rounded up to a multiple of ``TILE``
    (the tiles of :func:`.vec_ir._mv_tile`). Returns ``(nt, dpt)``."""
    return round_up(n, TILE), round_up(dp, TILE)


@njit(**JIT_OPTIONS)
def _lane_gradients(X, XT, y, H, b, Xu, XTu, Hu, mode, n, d, theta, grad, resid, loss, need, buf):
    """``grad[g] = ∇L(theta[g])`` (and ``loss[g]`` in the data form) for every lane with ``need[g]``.

    Bitwise the single-run :func:`.flow._gradient`: the products are fused multiply-adds
    over the column in increasing order from +0.0 (:func:`.vec_ir._mv_tile` on lane-innermost
    copies in ``buf``: input vectors in its first half, products in its second); then
    ``- b`` (Hessian form) or the residuals, the loss and ``/ n`` (data form), element by
    element as there. With at most ``SOLO_LANES`` lanes left the single-run function itself is
    called for each (on ``Xu``, ``XTu``, ``Hu``: the same products, cheaper than a full group).
    """
    L = theta.shape[0]
    dp = theta.shape[1]
    out = buf.shape[0] // 2
    count = 0
    for g in range(L):
        count += need[g]
    if count <= SOLO_LANES:
        for g in range(L):
            if need[g]:
                loss[g] = _gradient(Xu, XTu, y, Hu, b, mode, theta[g], d, resid[g], grad[g])
        return
    for g in range(L):
        for c in range(dp):
            buf[c * LW + g] = theta[g, c] if need[g] else 0.0
    if mode == MODE_DATA:
        for r0 in range(0, X.shape[0], TILE):  # Xθ
            _mv_tile(X, buf, r0, d, 0, LW, out, LW)
        for g in range(L):
            if not need[g]:
                continue
            total = 0.0
            for m in range(n):
                r = buf[out + m * LW + g] - y[m]
                resid[g, m] = r
                total += r * r
            loss[g] = total / (2.0 * n)
        for g in range(L):
            for m in range(n):
                buf[m * LW + g] = resid[g, m] if need[g] else 0.0
        for r0 in range(0, XT.shape[0], TILE):  # Xᵀr
            _mv_tile(XT, buf, r0, n, 0, LW, out, LW)
        for g in range(L):
            if need[g]:
                for i in range(dp):
                    grad[g, i] = buf[out + i * LW + g] / n
    else:
        for r0 in range(0, H.shape[0], TILE):  # Hθ
            _mv_tile(H, buf, r0, d, 0, LW, out, LW)
        for g in range(L):
            if need[g]:
                for i in range(dp):
                    grad[g, i] = buf[out + i * LW + g] - b[i]
                loss[g] = -1.0


@njit(**JIT_OPTIONS)
def _flow_group(scheme, X, XT, y, H, b, mode, lams, hs, tols, n_fines, m_fines, totals, live,
                F, I, C, LOG_T, LOG_C, LOG_S, codes, n_steps):
    """Advance the lanes of one group (``live[g]``, all of one ``scheme``) by at most ``n_steps`` grid steps each.

    Lane g is the single-run call ``_flow_advance(scheme, ..., lams[g], hs[g], mode, tols[g],
    n_fines[g], m_fines[g], F[g], I[g], C[g], min(n_steps, totals[g] - done), logs...)``
    (:func:`.flow_run._flow_advance`) without recording, bit for bit: the same pieces
    (:func:`.flow_run.tiled_step`, :func:`.flow_run.piece`), stage passes and gradients;
    ``codes[g]`` receives its return code. One lockstep iteration is one piece of every active
    lane; its gradient evaluations (three for RK4, four for the exponential scheme, after the
    one at the piece's start) are done for all lanes at once.
    """
    L = lams.shape[0]
    n = y.shape[0]
    d = F.shape[2]
    dp = b.shape[0]
    nblk = dp // BLOCK
    exp = scheme == SCHEME_EXP
    # the single-run functions get the single run's arrays: X (n, dp), Xᵀ (dp, n), H (dp, dp)
    Xu = X[:n]
    XTu = XT[:dp]
    Hu = H[:dp]
    zlen = nblk * _NR * BLOCK
    Z = np.zeros((L, zlen))
    saved = np.zeros((L, zlen))
    theta = np.zeros((L, dp))
    grad = np.zeros((L, dp))
    resid = np.zeros((L, max(n, 1)))
    vnew_p = np.zeros((L, dp))
    vnew_m = np.zeros((L, dp))
    roots = np.zeros(6)
    loss = np.zeros(L)
    rows = max(H.shape[0], X.shape[0], XT.shape[0], dp, n)
    buf = np.zeros(2 * rows * LW)
    need = np.zeros(L, dtype=np.bool_)
    gf = np.zeros(L, dtype=np.bool_)
    inv_lam = np.zeros(L)
    co_h = np.zeros((L, N_COEF))  # exponential scheme: coefficients of a piece of h, h/m_fine, other
    co_fine = np.zeros((L, N_COEF))
    co_tmp = np.zeros((L, N_COEF))
    co_idx = np.zeros(L, dtype=np.int64)  # this piece's: 0 co_h, 1 co_fine, 2 co_tmp
    step = np.zeros(L, dtype=np.int64)
    stop = np.zeros(L, dtype=np.int64)
    inside = np.zeros(L, dtype=np.bool_)  # between the pieces of a tiled grid step
    tiled = np.zeros(L, dtype=np.bool_)
    sub = np.zeros(L, dtype=np.int64)     # this piece's index in its grid step
    last = np.zeros(L, dtype=np.bool_)
    tend = np.zeros(L)                    # where the previous piece ended
    spiece = np.zeros(L)                  # this piece's size and start
    tpiece = np.zeros(L)
    phase = np.full(L, _PHASE_STOPPED, dtype=np.int64)
    active = 0
    for g in range(L):
        if not live[g]:
            continue
        Z[g] = _load_work(F[g], I[g], nblk)
        gf[g] = not (lams[g] > 0.0)
        inv_lam[g] = 0.0 if gf[g] else 1.0 / lams[g]
        if exp:
            _exp_coefficients(lams[g], hs[g], co_h[g])
            _exp_coefficients(lams[g], hs[g] / m_fines[g], co_fine[g])
        step[g] = C[g, STEPS_DONE]
        stop[g] = min(step[g] + n_steps, max(totals[g], step[g]))
        codes[g] = RUNNING
        phase[g] = _PHASE_STEPPING
        active += 1
        _begin_step(Z[g], theta[g], nblk)
    n_stages = 4 if exp else 3
    while active > 0:
        # the gradient at the current point of every active lane (before each piece)
        for g in range(L):
            need[g] = phase[g] == _PHASE_STEPPING
        _lane_gradients(X, XT, y, H, b, Xu, XTu, Hu, mode, n, d, theta, grad, resid, loss, need, buf)
        for g in range(L):
            if phase[g] != _PHASE_STEPPING:
                continue
            if gf[g]:
                _gf_velocity(Z[g], grad[g], nblk)
            if not inside[g]:  # at a grid point: its tests, then the first piece of the grid step
                if step[g] >= stop[g]:
                    phase[g] = _PHASE_STOPPED
                    active -= 1
                    continue
                if tols[g] >= 0.0:
                    lg = loss[g]
                    if mode != MODE_DATA:
                        for i in range(d):
                            vnew_p[g, i] = theta[g, i]
                        lg = _half_mean_square_residual(Xu, y, vnew_p[g, :d])
                    if lg <= tols[g]:
                        codes[g] = CONVERGED
                        phase[g] = _PHASE_STOPPED
                        active -= 1
                        continue
                tiled[g] = tiled_step(scheme, lams[g], hs[g], n_fines[g], m_fines[g], step[g])
                sub[g] = 0
                tend[g] = step[g] * hs[g]
                if tiled[g]:
                    saved[g] = Z[g]
            s, t0, lst = piece(scheme, lams[g], hs[g], n_fines[g], m_fines[g], step[g], sub[g], tend[g], tiled[g])
            spiece[g] = s
            tpiece[g] = t0
            last[g] = lst
            if exp:
                co_idx[g] = _piece_coefficients(lams[g], s, co_h[g], co_fine[g], co_tmp[g]) if tiled[g] else 0
        if active == 0:
            break
        for g in range(L):
            need[g] = phase[g] == _PHASE_STEPPING
        # one piece of every active lane: stages lane by lane, gradients for all lanes at once
        for st in range(n_stages):
            for g in range(L):
                if phase[g] != _PHASE_STEPPING:
                    continue
                if exp:
                    co = _coefficients_of(co_idx[g], co_h[g], co_fine[g], co_tmp[g])
                    if st == 0:
                        _stage_one(Z[g], grad[g], theta[g], nblk, co)
                    elif st == 1:
                        _stage_two(Z[g], grad[g], theta[g], nblk, co)
                    elif st == 2:
                        _stage_three(Z[g], grad[g], theta[g], nblk, co)
                    else:
                        _stage_four(Z[g], grad[g], theta[g], nblk, co)
                else:
                    hb = _B[st]
                    ha = spiece[g] * _A_SUB[st]
                    if gf[g]:
                        _gf_stage(Z[g], grad[g], theta[g], nblk, hb, ha)
                    else:
                        _mgf_stage(Z[g], grad[g], theta[g], nblk, inv_lam[g], hb, ha)
            _lane_gradients(X, XT, y, H, b, Xu, XTu, Hu, mode, n, d, theta, grad, resid, loss, need, buf)
        for g in range(L):
            if phase[g] != _PHASE_STEPPING:
                continue
            if exp:
                co = _coefficients_of(co_idx[g], co_h[g], co_fine[g], co_tmp[g])
                flags, bad = _stage_final(Z[g], grad[g], nblk, co)
                diverged = _exp_finish(Z[g], theta[g], nblk, flags, bad, tpiece[g], vnew_p[g], vnew_m[g], roots,
                                       I[g], F[g], C[g], LOG_T[g], LOG_C[g], LOG_S[g], co[C_H])
            else:
                diverged = _finish_step(Xu, XTu, y, Hu, b, mode, gf[g], inv_lam[g], _B[3], spiece[g], tpiece[g],
                                        Z[g], theta[g], grad[g], resid[g], d, nblk, vnew_p[g], vnew_m[g], roots,
                                        I[g], F[g], C[g], LOG_T[g], LOG_C[g], LOG_S[g])
            if diverged:
                if tiled[g]:  # undo the pieces already taken
                    Z[g] = saved[g]
                    _begin_step(Z[g], theta[g], nblk)
                inside[g] = False
                codes[g] = DIVERGED
                phase[g] = _PHASE_STOPPED
                active -= 1
                continue
            if last[g]:
                inside[g] = False
                step[g] += 1
            else:
                inside[g] = True
                sub[g] += 1
                tend[g] = tend[g] + spiece[g]
    for g in range(L):
        if live[g]:
            _store_work(Z[g], F[g], I[g])
            C[g, STEPS_DONE] = step[g]


@njit(**PARALLEL_JIT_OPTIONS)
def _flow_sweep_chunk(scheme, Xs, XTs, ys, Hs, bs, group_rep, mode, lams, hs, tols, n_fines, m_fines, totals,
                      live, F, I, C, LOG_T, LOG_C, LOG_S, codes, n_steps):
    """Advance every group of ``LANES`` lanes (all of one ``scheme``) by at most ``n_steps`` grid steps,
    groups in parallel.

    Lane ``q·LANES + g`` of the flat per-lane arrays belongs to group q, which runs on
    data set ``group_rep[q]`` (stacked, zero-padded: ``Xs`` rows a multiple of TILE,
    ``Hs`` and ``XTs`` rows ``dp``, see :func:`padded_rows`). A group's lanes are
    advanced by :func:`_flow_group`; no memory is written by two threads.
    """
    ngroups = group_rep.shape[0]
    for q in prange(ngroups):
        r = group_rep[q]
        lo = q * LANES
        hi = lo + LANES
        _flow_group(scheme, Xs[r], XTs[r], ys[r], Hs[r], bs[r], mode, lams[lo:hi], hs[lo:hi], tols[lo:hi],
                    n_fines[lo:hi], m_fines[lo:hi], totals[lo:hi], live[lo:hi], F[lo:hi], I[lo:hi], C[lo:hi],
                    LOG_T[lo:hi], LOG_C[lo:hi], LOG_S[lo:hi], codes[lo:hi], n_steps)
