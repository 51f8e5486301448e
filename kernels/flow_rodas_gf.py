r"""Gradient flow for the adaptive Rodas5P scheme (:mod:`.flow_rodas`), integrated in its mirror coordinate.

Why this coordinate
-------------------
Gradient flow in the w± coordinates is :math:`\dot w_+ = -g\odot w_+,\ \dot w_- = g\odot w_-`
(:math:`g = \nabla L(\theta)`), so exactly

.. math::

    w_+(t) = w_+(0)\,e^{-P(t)},\qquad w_-(t) = w_-(0)\,e^{P(t)},\qquad P(t) = \int_0^t g,

with P the integral every flow carries (row ``P_INT``). Gradient flow is therefore the d-dimensional
ODE (the mirror flow of the hyperbolic entropy, the paper's Section 3)

.. math::

    \dot P = g(\theta(P)),\qquad \theta(P) = \tfrac14\big(w_+(0)^2e^{-2P} - w_-(0)^2e^{2P}\big),

carried with :math:`\dot G_2 = g\odot g` (row ``G2_INT``; J± equal G₂ under gradient flow, which never
crosses zero). The weights leave the small initialisation exponentially (w ∝ e^{∓P} with P growing
about linearly while g hardly changes): in w an adaptive method follows each exponential to a relative
accuracy, in P the same trajectory is nearly a straight line; and a state of d rows instead of the 11d
of :mod:`.flow_rodas` makes a step cheaper. Measured on the paper's problem, runs to train loss 1e-20
(2026-11-26, Intel Xeon, 2 cores): at the default tolerances 997 steps in P against 994 in w±, 19.5 ms
against 26.5 ms a run, θ within 1.4e-13 of SciPy's Radau in P at rtol 1e-13 (in w±: 5.1e-12 from the
package at rtol 1e-11); the accuracy along the way is that of w± at the same tolerances (θ(20) within
6.7e-11 and 4.9e-11 of DOP853 at rtol 1e-9), which is why the defaults are shared. What the coordinate
gives besides: the sign of every w± is fixed (gradient flow has no crossings), and Δ = |w₊w₋| keeps
its initial value up to the rounding of one product.

The system, its Jacobian and the solve
--------------------------------------
State rows ``MIRROR_P`` (P) and ``MIRROR_G2`` (G₂). With :math:`\sigma = (w_+^2 + w_-^2)/2 \ge 0`,
:math:`\partial\theta/\partial P = -\mathrm{diag}(\sigma)` and, in both gradient forms,
:math:`\partial g/\partial P = A = -H\,\mathrm{diag}(\sigma)` (H = XᵀX/n). A stage of
:mod:`.flow_rodas` solves :math:`(I - cA)x = r`:

* the P rows: :math:`(I + cH\Sigma)x_P = r_P`, i.e. :math:`(\Sigma^{-1} + cH)(\Sigma x_P) = r_P`:
  one Cholesky factorisation of the symmetric positive definite d × d matrix :math:`\Sigma^{-1} + cH` per
  step when every σ > 0 (the usual case; where d ≥ 3n, of the n × n matrix of its Woodbury form instead,
  :mod:`.woodbury`), else an LU factorisation of :math:`I + cH\Sigma`;
* the G₂ rows: their Jacobian rows are :math:`2g\odot A`, and :math:`cAx_P = x_P - r_P`, so
  :math:`x_G = r_G + 2g\odot(x_P - r_P)`: no further product.

Error control: the weighted RMS norm of the embedded error over P and G₂, each against
``atol + rtol·max(|y|, 1)``: an absolute error ε in the exponent P is a relative error ε in both w±,
which is what the w± rows of MGF are measured by (:func:`.flow_rodas._error_norm`), and G₂ enters the
theory as an exponent too. Where |P| > 1 (up to 5.3 on the paper's problem) the weight so allows w± a relative
error up to rtol·|P|. Weighing P absolutely instead (atol + rtol) was measured on the paper's problem (2026-11-29,
``benchmarks/experiment_gf_multistep.py``'s times): θ along the way 1.3-1.6 times closer to SciPy's Radau (NDF
4.3e-10 against 5.5e-10, Rodas5P 1.1e-9 against 1.8e-9, both worst at t = 1.25 as the weights escape) for 7 % and
15 % more steps to train loss 1e-20, about what tighter tolerances buy: not kept. A step whose weights overflow
(``OVERFLOW``) or are not finite is rejected.
"""

import numpy as np
from numba import njit

from .config import INLINE_JIT_OPTIONS, JIT_OPTIONS, LEAF_JIT_OPTIONS, OVERFLOW
from .flow_rodas import (
    GAMMA,
    N_LU,
    N_RHS,
    N_STAGES,
    _gradient_adaptive,
    _stage_point,
    _stage_right_side,
    _step_end,
)
from .small_linalg import _cholesky, _cholesky_solve, _lu, _lu_solve, _lu_transpose
from .woodbury import _use_woodbury, _woodbury_factor, _woodbury_matrices, _woodbury_solve_he

#: Rows of the mirror state (shape (N_MIRROR_ROWS, d)): P = ∫g and G₂ = ∫g⊙g.
MIRROR_P = 0
MIRROR_G2 = 1
N_MIRROR_ROWS = 2


@njit(**LEAF_JIT_OPTIONS)
def _weights(w_init, P, wp, wm):
    """w₊ = w₊(0)e^{-P}, w₋ = w₋(0)e^{P} (one exponential a coordinate): the one map from P to the weights (the
    steps, the error norm, the records)."""
    for i in range(P.shape[0]):
        e = np.exp(P[i])
        wp[i] = w_init[0, i] / e
        wm[i] = w_init[1, i] * e


@njit(**LEAF_JIT_OPTIONS)
def _rhs_mirror(X, XT, y, H, b, mode, w_init, Z, wp, wm, theta, g, resid, F):
    """F = (g, g⊙g) at ``Z``; w± into ``wp``, ``wm`` and ∇L(θ) into ``g``."""
    _weights(w_init, Z[MIRROR_P], wp, wm)
    _field_mirror(X, XT, y, H, b, mode, wp, wm, theta, g, resid, F)


@njit(**LEAF_JIT_OPTIONS)
def _field_mirror(X, XT, y, H, b, mode, wp, wm, theta, g, resid, F):
    """F = (g, g⊙g) and ∇L(θ) into ``g`` at the weights ``wp``, ``wm`` (those of :func:`_weights`)."""
    d = wp.shape[0]
    for i in range(d):
        theta[i] = (wp[i] * wp[i] - wm[i] * wm[i]) * 0.25
    _gradient_adaptive(X, XT, y, H, b, mode, theta, d, resid, g)
    for i in range(d):
        gi = g[i]
        F[MIRROR_P, i] = gi
        F[MIRROR_G2, i] = gi * gi


@njit(**LEAF_JIT_OPTIONS)
def _factor_mirror(X, H, c, wp, wm, sig, N, NT, piv, M, MT):
    """Factorise the P rows' matrix at the weights ``wp``, ``wm`` (σ into ``sig``).

    Returns 3 (Cholesky of Σ⁻¹ + cH: every σ > 0, the usual case), 4 (the same in the Woodbury form, Cholesky of
    the n × n M = (n/c)I + XΣXᵀ into ``M``, ``MT``: where d ≥ 3n, :mod:`.woodbury`), 1 (LU of I + cHΣ) or 0
    (singular).
    """
    d = wp.shape[0]
    positive = True
    for i in range(d):
        s = 0.5 * (wp[i] * wp[i] + wm[i] * wm[i])
        sig[i] = s
        positive = positive and s > 0.0 and 1.0 / s < np.inf
    if positive and _use_woodbury(X.shape[0], d):
        if _woodbury_factor(X, sig, c, M, MT):
            return 4
    elif positive:
        for i in range(d):
            for j in range(i, d):
                N[i, j] = c * H[i, j]
            N[i, i] += 1.0 / sig[i]
        if _cholesky(N, NT):
            return 3
    for i in range(d):
        for j in range(d):
            N[i, j] = c * H[i, j] * sig[j]
        N[i, i] += 1.0
    if not _lu(N, piv):
        return 0
    _lu_transpose(N, NT)
    return 1


@njit(**INLINE_JIT_OPTIONS)
def _solve_p_rows(X, how, sig, N, NT, piv, M, MT, t, u, v):
    """t ← (I + cHΣ)⁻¹ t, in place, with the factorisation ``how`` of :func:`_factor_mirror` (also the Newton
    matrix of the NDF of :mod:`.flow_ndf`); ``u``, ``v``: an n- and a d-vector of work (the Woodbury form's)."""
    if how == 3:
        _cholesky_solve(N, NT, t)
        for i in range(sig.shape[0]):
            t[i] /= sig[i]
    elif how == 4:
        _woodbury_solve_he(X, sig, M, MT, t, u, v)
    else:
        _lu_solve(NT, piv, t)


@njit(**INLINE_JIT_OPTIONS)
def _solve_mirror(X, how, sig, N, NT, piv, M, MT, g0, R, Kout, t, u, v):
    """Kout = (I - cA)⁻¹ R for the factorisation ``how`` of :func:`_factor_mirror` (module docstring)."""
    d = sig.shape[0]
    for i in range(d):
        t[i] = R[MIRROR_P, i]
    _solve_p_rows(X, how, sig, N, NT, piv, M, MT, t, u, v)
    for i in range(d):
        Kout[MIRROR_P, i] = t[i]
        Kout[MIRROR_G2, i] = R[MIRROR_G2, i] + 2.0 * g0[i] * (t[i] - R[MIRROR_P, i])


@njit(**LEAF_JIT_OPTIONS)
def _attempt_mirror(X, XT, y, H, b, mode, w_init, h, Z0, F0, g0, wp0, wm0, ws, Kst, Z1, counters):
    """One Rodas5P step of size ``h`` of gradient flow from the mirror point ``Z0`` into ``Z1`` and ``Kst``.

    ``F0``, ``g0``, ``wp0``, ``wm0``: the vector field, ∇L and w± at ``Z0``; ``ws`` the work record of
    :func:`_workspace_mirror`. The stages are those of :func:`.flow_rodas._attempt` (the method's
    docstring there). Returns the factorisation used (1, 3, 4) or 0 if the matrix was singular.
    """
    (sig, N, NT, piv, U, F, R, t, wp, wm, theta, g, resid, M, MT) = ws
    c = h * GAMMA
    how = _factor_mirror(X, H, c, wp0, wm0, sig, N, NT, piv, M, MT)
    counters[N_LU] += 1
    if how == 0:
        return 0
    inv_h = 1.0 / h
    for s in range(N_STAGES):
        if s == 0:
            _stage_right_side(c, F0, R, False)
        else:
            _stage_point(s, inv_h, Z0, Kst, U, R)
            _rhs_mirror(X, XT, y, H, b, mode, w_init, U, wp, wm, theta, g, resid, F)
            counters[N_RHS] += 1
            _stage_right_side(c, F, R, True)
        _solve_mirror(X, how, sig, N, NT, piv, M, MT, g0, R, Kst[s], t, resid, theta)  # (work: resid, theta)
    _step_end(Z0, Kst, Z1)
    return how


@njit(**LEAF_JIT_OPTIONS)
def _error_norm_mirror(w_init, Z0, Z1, Kst, rtol, atol, wp, wm):
    """Weighted RMS norm of the error estimate k₈ over P and G₂ (module docstring); NaN when the new
    point is not finite or its weights overflow. The weights at ``Z1`` are left in ``wp``, ``wm``."""
    d = Z0.shape[1]
    total = 0.0
    for r in range(N_MIRROR_ROWS):
        for i in range(d):
            y1 = Z1[r, i]
            if not (abs(y1) < np.inf):
                return np.nan
            sc = atol + rtol * max(max(abs(Z0[r, i]), abs(y1)), 1.0)
            e = Kst[N_STAGES - 1, r, i] / sc
            total += e * e
    _weights(w_init, Z1[MIRROR_P], wp, wm)
    for i in range(d):
        if not (abs(wp[i]) < OVERFLOW and abs(wm[i]) < OVERFLOW):
            return np.nan
    return np.sqrt(total / (N_MIRROR_ROWS * d))


@njit(**JIT_OPTIONS)
def _workspace_mirror(n, d):
    """The work arrays of :func:`_attempt_mirror` (its first line names them), for ``n`` samples and ``d``
    coordinates."""
    return (np.zeros(d), np.zeros((d, d)), np.zeros((d, d)), np.zeros(d, dtype=np.int64),
            np.zeros((N_MIRROR_ROWS, d)), np.zeros((N_MIRROR_ROWS, d)), np.zeros((N_MIRROR_ROWS, d)),
            np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(max(n, 1))) + \
        _woodbury_matrices(n, d)
