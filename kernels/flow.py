r"""Fixed-step RK4 for momentum gradient flow MGF(λ) and gradient flow on a diagonal linear network.

Systems
-------
For λ > 0 the kernel integrates the paper's MGF(λ) in the :math:`w_\pm` form
(Appendix B, eq. (w_mgf)), written as a first-order system in
:math:`(w_+, w_-, \dot w_+, \dot w_-)`,

.. math::

    \lambda\ddot w_{\pm} + \dot w_{\pm} \pm \nabla L(\theta)\odot w_{\pm} = 0,
    \qquad \theta = (w_+^2 - w_-^2)/4,

from any :math:`(w_{\pm,0}, \dot w_{\pm,0})`; for λ = 0 it integrates gradient
flow, :math:`\dot w_\pm = \mp\nabla L(\theta)\odot w_\pm`. Each coordinate
additionally carries, as extra RK4 components (so they share the fourth-order
accuracy of the state),

* :math:`J_\pm = \int_0^t (\dot w_\pm/w_\pm)^2\,ds`,
* :math:`K_\pm = \int_0^t (\dot w_\pm/w_\pm)^2 e^{-(t-s)/\lambda}\,ds`, i.e. :math:`\dot K = f - K/\lambda`,
* :math:`P = \int_0^t \nabla L(\theta_s)\,ds` (the mirror integral of Theorem 1),
* :math:`Q = \int_0^t \nabla L(\theta_s) e^{-(t-s)/\lambda}\,ds`, :math:`\dot Q = \nabla L - Q/\lambda`,
* :math:`G_2 = \int_0^t \nabla L(\theta_s)^2\,ds` (the small-λ approximation of Appendix C.4).

With zero initial velocity and no sign crossing, eq. (w-formula-new) reads
:math:`w_{\pm,t} = w_{\pm,0}\,e^{-\lambda(J_\pm - K_\pm)}e^{\mp(P - Q)}` (for gradient flow,
K and Q are identically zero and :math:`J_\pm = G_2`).

RK4 tableau
-----------
``RK4_A``, ``RK4_B``, ``RK4_C`` hold the classic four-stage Butcher tableau. The
kernel reads its coefficients from them and relies on ``RK4_A`` being
sub-diagonal (one previous stage per stage), which the test-suite checks along
with the fourth-order conditions.

Sign crossings
--------------
After each step every coordinate of :math:`w_+` and :math:`w_-` is checked for a
sign change (and, for MGF, a possible pair of them); :func:`_scan_crossings` logs
the crossing times that :mod:`.crossings` locates inside the step. The first
crossing of a coordinate freezes its :math:`J_\pm, K_\pm` at their values
before the crossing step and marks them invalid (the integrand
:math:`(\dot w/w)^2` is not integrable across a zero); :math:`P, Q, G_2` remain valid.

Grid and start refinement
-------------------------
The output grid is uniform, ``t_k = k·h``. The first ``n_fine`` grid steps may each
be made of ``m_fine`` RK4 steps of size ``h/m_fine`` (the escape from a small
initialisation is where a run makes most of its error); every later grid step is
one RK4 step of size ``h``.

State layout
------------
``fstate`` (float64, ``(N_FLOAT_ROWS, d)``): rows ``0 .. N_RK_ROWS-1`` are the RK4
components, the others bookkeeping (the row constants below; this kernel's own, not
those of :mod:`.layout`, since its crossing times are floats). ``istate`` (int64, ``(N_INT_ROWS, d)``) holds
crossing counts. ``counters`` (int64, ``(N_COUNTERS,)``) the number of steps done
and the number of crossings seen. The crossing log (``log_time``, ``log_coord``,
``log_sign``, capacity = their common length) lists the first ``capacity``
crossings in order of detection. Everything a run needs to continue bit for bit
lives in these arrays, so chunking does not change a bit.

Inside a call the kernel works on one flat array made of blocks of ``BLOCK``
coordinates (rows ``_Y``, ``_S``, ``_A``, ``_N``, ... of each block at constant
offsets): Numba gives LLVM no aliasing information about separate arrays, and
constant distances between the rows are what lets the element-wise RK4 passes
vectorise (about 5x faster than row arrays).

Module size
-----------
This module is longer than the others because it is one unit: every function here
addresses the same private block layout of the work array, and the stage passes,
the crossing bookkeeping and the step are read together (and against the drivers
:mod:`.flow_run` and :mod:`.flow_sweep`, which call them for a run and lane by lane) to check
what a step does. What
needs no layout lives elsewhere: the crossing search in :mod:`.crossings`, the
gradients in :mod:`.mgd`, the shared modes, record layout and padding in :mod:`.layout`.
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS, LEAF_JIT_OPTIONS, OVERFLOW
from .crossings import _hermite as _hermite  # re-exported: the tests check the interpolant as kernels.flow._hermite
from .crossings import _hermite_crossings
from .layout import MODE_DATA, REC_DELTA, REC_THETA, REC_W_MINUS, REC_W_PLUS  # shared with the MGD kernels
from .mgd import (
    _axpy_columns,
    _gradient_data,
    _record_losses,
)
from .status import CONVERGED, DIVERGED, RUNNING  # noqa: F401 (the drivers' return codes, read as kernels.flow.DIVERGED)

# -- classic RK4 Butcher tableau (module-level data, checked by the tests) --------------------------
RK4_A = np.array([[0.0, 0.0, 0.0, 0.0],
                  [0.5, 0.0, 0.0, 0.0],
                  [0.0, 0.5, 0.0, 0.0],
                  [0.0, 0.0, 1.0, 0.0]])
RK4_B = np.array([1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0])
RK4_C = np.array([0.0, 0.5, 0.5, 1.0])
#: The coefficients the kernel uses: ``RK4_A[s, s-1]`` (the tableau is sub-diagonal) and ``RK4_B``.
_A_SUB = (float(RK4_A[1, 0]), float(RK4_A[2, 1]), float(RK4_A[3, 2]))
_B = (float(RK4_B[0]), float(RK4_B[1]), float(RK4_B[2]), float(RK4_B[3]))

# -- float state rows: RK4 components ------------------------------------------------------------
W_PLUS = 0
W_MINUS = 1
V_PLUS = 2   # dw+/dt (for gradient flow: set from the vector field, not integrated)
V_MINUS = 3
J_PLUS = 4
J_MINUS = 5
K_PLUS = 6
K_MINUS = 7
P_INT = 8
Q_INT = 9
G2_INT = 10
N_RK_ROWS = 11
# -- float state rows: bookkeeping ---------------------------------------------------------------
MIN_DELTA = 11         # running min over the grid of |w+ w-|
MAX_W2 = 12            # running max over the grid of max(w+², w-²) (stiffness monitor)
FIRST_CROSS_PLUS = 13  # crossing times: NaN until the first crossing
FIRST_CROSS_MINUS = 14
LAST_CROSS_PLUS = 15
LAST_CROSS_MINUS = 16
N_FLOAT_ROWS = 17

# -- int state rows ------------------------------------------------------------------------------
CROSS_PLUS = 0
CROSS_MINUS = 1
N_INT_ROWS = 2

# -- counters ------------------------------------------------------------------------------------
STEPS_DONE = 0
N_CROSSINGS = 1  # all crossings seen (the log keeps the first ``capacity``)
N_COUNTERS = 2

#: Coordinates per block of the kernel's work array: a multiple of the vector width that divides
#: :data:`.layout.PAD`, so that the padded width ``dp`` is a whole number of blocks.
BLOCK = 16

# rows of one block of the work array
_Y = 0              # the N_RK_ROWS components at the grid point
_S = 11             # stage input of the components with feedback (7 rows, order below)
_S_WP = 0
_S_WM = 1
_S_VP = 2
_S_VM = 3
_S_KP = 4
_S_KM = 5
_S_Q = 6
_A = 18             # weighted stage sum Σ b_s k_s (N_RK_ROWS rows)
_N = 29             # the components after the step (N_RK_ROWS rows)
_VALID_P = 40       # 1.0 while J+/K+ are valid (no crossing yet), else 0.0
_VALID_M = 41
_MIN_DELTA = 42
_MAX_W2 = 43
_NR = 44


@njit(**LEAF_JIT_OPTIONS)
def _gradient(X, XT, y, H, b, mode, theta, d, resid, grad):
    """∇L(θ) into ``grad``; returns L(θ) in the data form, -1 in the Hessian form."""
    if mode == MODE_DATA:
        return _gradient_data(X, XT, y, theta, d, resid, grad)
    _axpy_columns(H, theta, d, grad)
    for i in range(grad.shape[0]):
        grad[i] -= b[i]
    return -1.0


# -- the work array -------------------------------------------------------------------------------
# The kernel keeps every per-coordinate quantity in one flat array ``Z`` made of blocks of ``BLOCK``
# coordinates; inside a block, row ``r`` occupies ``Z[base + r*BLOCK : base + (r+1)*BLOCK]``. All rows
# of a loop are then at compile-time constant distances from each other, which lets LLVM vectorise
# the element-wise RK4 passes (Numba gives it no aliasing information about separate arrays).

@njit(**JIT_OPTIONS)
def _at(row, i):
    """Index of coordinate ``i``, row ``row`` in the work array."""
    return (i // BLOCK) * (_NR * BLOCK) + row * BLOCK + i % BLOCK


@njit(**JIT_OPTIONS)
def _load_work(fstate, istate, nblk):
    d = fstate.shape[1]
    Z = np.zeros(nblk * _NR * BLOCK)
    for i in range(nblk * BLOCK):
        if i < d:
            for r in range(N_RK_ROWS):
                Z[_at(_Y + r, i)] = fstate[r, i]
            Z[_at(_VALID_P, i)] = 1.0 if istate[CROSS_PLUS, i] == 0 else 0.0
            Z[_at(_VALID_M, i)] = 1.0 if istate[CROSS_MINUS, i] == 0 else 0.0
            Z[_at(_MIN_DELTA, i)] = fstate[MIN_DELTA, i]
            Z[_at(_MAX_W2, i)] = fstate[MAX_W2, i]
        else:
            # padding: w = 1, everything else 0, so θ = 0, ∇L = 0 and nothing ever changes
            Z[_at(_Y + W_PLUS, i)] = 1.0
            Z[_at(_Y + W_MINUS, i)] = 1.0
            Z[_at(_VALID_P, i)] = 1.0
            Z[_at(_VALID_M, i)] = 1.0
    return Z


@njit(**JIT_OPTIONS)
def _store_work(Z, fstate, istate):
    d = fstate.shape[1]
    for i in range(d):
        for r in range(N_RK_ROWS):
            fstate[r, i] = Z[_at(_Y + r, i)]
        fstate[MIN_DELTA, i] = Z[_at(_MIN_DELTA, i)]
        fstate[MAX_W2, i] = Z[_at(_MAX_W2, i)]


@njit(**JIT_OPTIONS)
def _begin_step(Z, theta, nblk):
    """Stage input S = Y, stage sum A = 0 and θ(Y) into ``theta``."""
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for k in range(N_RK_ROWS * BLOCK):
            Z[base + _A * BLOCK + k] = 0.0
        for j in range(BLOCK):
            i = base + j
            wp = Z[i + (_Y + W_PLUS) * BLOCK]
            wm = Z[i + (_Y + W_MINUS) * BLOCK]
            Z[i + (_S + _S_WP) * BLOCK] = wp
            Z[i + (_S + _S_WM) * BLOCK] = wm
            Z[i + (_S + _S_VP) * BLOCK] = Z[i + (_Y + V_PLUS) * BLOCK]
            Z[i + (_S + _S_VM) * BLOCK] = Z[i + (_Y + V_MINUS) * BLOCK]
            Z[i + (_S + _S_KP) * BLOCK] = Z[i + (_Y + K_PLUS) * BLOCK]
            Z[i + (_S + _S_KM) * BLOCK] = Z[i + (_Y + K_MINUS) * BLOCK]
            Z[i + (_S + _S_Q) * BLOCK] = Z[i + (_Y + Q_INT) * BLOCK]
            theta[tb + j] = (wp * wp - wm * wm) * 0.25


@njit(**JIT_OPTIONS)
def _accept_step(Z, theta, nblk):
    """Y = N (the state after the step), then :func:`_begin_step`'s work, in one pass.

    Also updates the running minimum of Δ = |w+ w-| and maximum of max(w+², w-²).
    """
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for k in range(N_RK_ROWS * BLOCK):
            Z[base + _Y * BLOCK + k] = Z[base + _N * BLOCK + k]
            Z[base + _A * BLOCK + k] = 0.0
        for j in range(BLOCK):
            i = base + j
            wp = Z[i + (_N + W_PLUS) * BLOCK]
            wm = Z[i + (_N + W_MINUS) * BLOCK]
            Z[i + (_S + _S_WP) * BLOCK] = wp
            Z[i + (_S + _S_WM) * BLOCK] = wm
            Z[i + (_S + _S_VP) * BLOCK] = Z[i + (_N + V_PLUS) * BLOCK]
            Z[i + (_S + _S_VM) * BLOCK] = Z[i + (_N + V_MINUS) * BLOCK]
            Z[i + (_S + _S_KP) * BLOCK] = Z[i + (_N + K_PLUS) * BLOCK]
            Z[i + (_S + _S_KM) * BLOCK] = Z[i + (_N + K_MINUS) * BLOCK]
            Z[i + (_S + _S_Q) * BLOCK] = Z[i + (_N + Q_INT) * BLOCK]
            theta[tb + j] = (wp * wp - wm * wm) * 0.25
            delta = abs(wp * wm)
            md = Z[i + _MIN_DELTA * BLOCK]
            Z[i + _MIN_DELTA * BLOCK] = delta if delta < md else md
            w2 = max(wp * wp, wm * wm)
            mw = Z[i + _MAX_W2 * BLOCK]
            Z[i + _MAX_W2 * BLOCK] = w2 if w2 > mw else mw


@njit(**JIT_OPTIONS)
def _gf_velocity(Z, grad, nblk):
    """Gradient flow: ẇ± = ∓∇L w± at the grid point, stored in the velocity rows of Y."""
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for j in range(BLOCK):
            i = base + j
            g = grad[tb + j]
            Z[i + (_Y + V_PLUS) * BLOCK] = -g * Z[i + (_Y + W_PLUS) * BLOCK]
            Z[i + (_Y + V_MINUS) * BLOCK] = g * Z[i + (_Y + W_MINUS) * BLOCK]


@njit(**JIT_OPTIONS)
def _mgf_stage(Z, grad, theta, nblk, inv_lam, hb, ha):
    """One MGF stage: k = F(S) with ∇L(θ(S)) in ``grad``; A += b·k; S = Y + h·a·k; θ(S) into ``theta``.

    ``hb`` is the weight b_s of this stage, ``ha`` the step times the coefficient
    a_{s+1,s} of the next stage.
    """
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for j in range(BLOCK):
            i = base + j
            g = grad[tb + j]
            wp = Z[i + (_S + _S_WP) * BLOCK]
            wm = Z[i + (_S + _S_WM) * BLOCK]
            vp = Z[i + (_S + _S_VP) * BLOCK]
            vm = Z[i + (_S + _S_VM) * BLOCK]
            kp = Z[i + (_S + _S_KP) * BLOCK]
            km = Z[i + (_S + _S_KM) * BLOCK]
            q = Z[i + (_S + _S_Q) * BLOCK]
            rp = vp / wp
            rm = vm / wm
            # J/K integrands switched off after a coordinate's first crossing (select: never inf*0)
            fp = rp * rp if Z[i + _VALID_P * BLOCK] > 0.0 else 0.0
            fm = rm * rm if Z[i + _VALID_M * BLOCK] > 0.0 else 0.0
            avp = -(vp + g * wp) * inv_lam
            avm = -(vm - g * wm) * inv_lam
            dkp = fp - kp * inv_lam
            dkm = fm - km * inv_lam
            dq = g - q * inv_lam
            Z[i + (_A + W_PLUS) * BLOCK] += hb * vp
            Z[i + (_A + W_MINUS) * BLOCK] += hb * vm
            Z[i + (_A + V_PLUS) * BLOCK] += hb * avp
            Z[i + (_A + V_MINUS) * BLOCK] += hb * avm
            Z[i + (_A + J_PLUS) * BLOCK] += hb * fp
            Z[i + (_A + J_MINUS) * BLOCK] += hb * fm
            Z[i + (_A + K_PLUS) * BLOCK] += hb * dkp
            Z[i + (_A + K_MINUS) * BLOCK] += hb * dkm
            Z[i + (_A + P_INT) * BLOCK] += hb * g
            Z[i + (_A + Q_INT) * BLOCK] += hb * dq
            Z[i + (_A + G2_INT) * BLOCK] += hb * (g * g)
            nwp = Z[i + (_Y + W_PLUS) * BLOCK] + ha * vp
            nwm = Z[i + (_Y + W_MINUS) * BLOCK] + ha * vm
            Z[i + (_S + _S_WP) * BLOCK] = nwp
            Z[i + (_S + _S_WM) * BLOCK] = nwm
            Z[i + (_S + _S_VP) * BLOCK] = Z[i + (_Y + V_PLUS) * BLOCK] + ha * avp
            Z[i + (_S + _S_VM) * BLOCK] = Z[i + (_Y + V_MINUS) * BLOCK] + ha * avm
            Z[i + (_S + _S_KP) * BLOCK] = Z[i + (_Y + K_PLUS) * BLOCK] + ha * dkp
            Z[i + (_S + _S_KM) * BLOCK] = Z[i + (_Y + K_MINUS) * BLOCK] + ha * dkm
            Z[i + (_S + _S_Q) * BLOCK] = Z[i + (_Y + Q_INT) * BLOCK] + ha * dq
            theta[tb + j] = (nwp * nwp - nwm * nwm) * 0.25


@njit(**JIT_OPTIONS)
def _mgf_final(Z, grad, nblk, inv_lam, hb, h):
    """Last MGF stage: N = Y + h·(A + b₄k₄); J/K of invalid coordinates keep their values.

    Returns ``(flags, bad)``: the number of coordinates whose w± changed sign or
    turned (|w| decreasing at the start, increasing at the end: a possible pair of
    crossings), and the number of w, ẇ entries outside (-OVERFLOW, OVERFLOW)
    (NaN included).
    """
    flags = 0
    bad = 0
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for j in range(BLOCK):
            i = base + j
            g = grad[tb + j]
            wp = Z[i + (_S + _S_WP) * BLOCK]
            wm = Z[i + (_S + _S_WM) * BLOCK]
            vp = Z[i + (_S + _S_VP) * BLOCK]
            vm = Z[i + (_S + _S_VM) * BLOCK]
            kp = Z[i + (_S + _S_KP) * BLOCK]
            km = Z[i + (_S + _S_KM) * BLOCK]
            q = Z[i + (_S + _S_Q) * BLOCK]
            okp = Z[i + _VALID_P * BLOCK] > 0.0
            okm = Z[i + _VALID_M * BLOCK] > 0.0
            rp = vp / wp
            rm = vm / wm
            fp = rp * rp if okp else 0.0
            fm = rm * rm if okm else 0.0
            avp = -(vp + g * wp) * inv_lam
            avm = -(vm - g * wm) * inv_lam
            dkp = fp - kp * inv_lam
            dkm = fm - km * inv_lam
            dq = g - q * inv_lam
            y_wp, y_wm, y_vp, y_vm, y_jp, y_jm, y_kp, y_km = _grid_point(Z, i)
            n_wp = y_wp + h * (Z[i + (_A + W_PLUS) * BLOCK] + hb * vp)
            n_wm = y_wm + h * (Z[i + (_A + W_MINUS) * BLOCK] + hb * vm)
            n_vp = y_vp + h * (Z[i + (_A + V_PLUS) * BLOCK] + hb * avp)
            n_vm = y_vm + h * (Z[i + (_A + V_MINUS) * BLOCK] + hb * avm)
            n_jp = y_jp + h * (Z[i + (_A + J_PLUS) * BLOCK] + hb * fp)
            n_jm = y_jm + h * (Z[i + (_A + J_MINUS) * BLOCK] + hb * fm)
            n_kp = y_kp + h * (Z[i + (_A + K_PLUS) * BLOCK] + hb * dkp)
            n_km = y_km + h * (Z[i + (_A + K_MINUS) * BLOCK] + hb * dkm)
            n_p = Z[i + (_Y + P_INT) * BLOCK] + h * (Z[i + (_A + P_INT) * BLOCK] + hb * g)
            n_q = Z[i + (_Y + Q_INT) * BLOCK] + h * (Z[i + (_A + Q_INT) * BLOCK] + hb * dq)
            n_g2 = Z[i + (_Y + G2_INT) * BLOCK] + h * (Z[i + (_A + G2_INT) * BLOCK] + hb * (g * g))
            flag, over = _put_new_point(Z, i, okp, okm, n_wp, n_wm, n_vp, n_vm, n_jp, n_jm, n_kp, n_km, n_p, n_q,
                                        n_g2)
            flags += flag
            bad += over
    return flags, bad


@njit(inline="always", **JIT_OPTIONS)
def _grid_point(Z, i):
    """(w₊, w₋, ẇ₊, ẇ₋, J₊, J₋, K₊, K₋) of the grid point Y in work slot ``i``."""
    return (Z[i + (_Y + W_PLUS) * BLOCK], Z[i + (_Y + W_MINUS) * BLOCK], Z[i + (_Y + V_PLUS) * BLOCK],
            Z[i + (_Y + V_MINUS) * BLOCK], Z[i + (_Y + J_PLUS) * BLOCK], Z[i + (_Y + J_MINUS) * BLOCK],
            Z[i + (_Y + K_PLUS) * BLOCK], Z[i + (_Y + K_MINUS) * BLOCK])


@njit(inline="always", **JIT_OPTIONS)  # inlined into both final stages: their loops still vectorise
def _put_new_point(Z, i, okp, okm, n_wp, n_wm, n_vp, n_vm, n_jp, n_jm, n_kp, n_km, n_p, n_q, n_g2):
    """Write the new MGF point N of work slot ``i`` (the last stage of either scheme: :func:`_mgf_final`,
    :func:`.flow_exp._stage_final`); J± and K± of an invalid coordinate keep the values of Y.

    Returns ``(flag, over)``: whether w± changed sign or turned (|w| decreasing at Y, increasing at
    N: a possible pair of crossings), and whether a w or ẇ entry is outside (-OVERFLOW, OVERFLOW)
    (NaN included).
    """
    y_wp, y_wm, y_vp, y_vm, y_jp, y_jm, y_kp, y_km = _grid_point(Z, i)
    Z[i + (_N + W_PLUS) * BLOCK] = n_wp
    Z[i + (_N + W_MINUS) * BLOCK] = n_wm
    Z[i + (_N + V_PLUS) * BLOCK] = n_vp
    Z[i + (_N + V_MINUS) * BLOCK] = n_vm
    Z[i + (_N + J_PLUS) * BLOCK] = n_jp if okp else y_jp
    Z[i + (_N + J_MINUS) * BLOCK] = n_jm if okm else y_jm
    Z[i + (_N + K_PLUS) * BLOCK] = n_kp if okp else y_kp
    Z[i + (_N + K_MINUS) * BLOCK] = n_km if okm else y_km
    Z[i + (_N + P_INT) * BLOCK] = n_p
    Z[i + (_N + Q_INT) * BLOCK] = n_q
    Z[i + (_N + G2_INT) * BLOCK] = n_g2
    flip = ((n_wp < 0.0) != (y_wp < 0.0)) | ((n_wm < 0.0) != (y_wm < 0.0))
    turn = ((y_wp * y_vp < 0.0) & (n_wp * n_vp > 0.0)) | ((y_wm * y_vm < 0.0) & (n_wm * n_vm > 0.0))
    over = not ((abs(n_wp) < OVERFLOW) & (abs(n_wm) < OVERFLOW) & (abs(n_vp) < OVERFLOW) & (abs(n_vm) < OVERFLOW))
    return flip | turn, over


@njit(**JIT_OPTIONS)
def _gf_stage(Z, grad, theta, nblk, hb, ha):
    """One gradient-flow stage (ẇ± = ∓∇L w±, J± and G₂ integrands ∇L², P integrand ∇L)."""
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for j in range(BLOCK):
            i = base + j
            g = grad[tb + j]
            wp = Z[i + (_S + _S_WP) * BLOCK]
            wm = Z[i + (_S + _S_WM) * BLOCK]
            gg = g * g
            dwp = -g * wp
            dwm = g * wm
            Z[i + (_A + W_PLUS) * BLOCK] += hb * dwp
            Z[i + (_A + W_MINUS) * BLOCK] += hb * dwm
            Z[i + (_A + J_PLUS) * BLOCK] += hb * (gg if Z[i + _VALID_P * BLOCK] > 0.0 else 0.0)
            Z[i + (_A + J_MINUS) * BLOCK] += hb * (gg if Z[i + _VALID_M * BLOCK] > 0.0 else 0.0)
            Z[i + (_A + P_INT) * BLOCK] += hb * g
            Z[i + (_A + G2_INT) * BLOCK] += hb * gg
            nwp = Z[i + (_Y + W_PLUS) * BLOCK] + ha * dwp
            nwm = Z[i + (_Y + W_MINUS) * BLOCK] + ha * dwm
            Z[i + (_S + _S_WP) * BLOCK] = nwp
            Z[i + (_S + _S_WM) * BLOCK] = nwm
            theta[tb + j] = (nwp * nwp - nwm * nwm) * 0.25


@njit(**JIT_OPTIONS)
def _gf_final(Z, grad, nblk, hb, h):
    """Last gradient-flow stage; returns ``(sign changes, overflowing entries)`` like :func:`_mgf_final`."""
    flags = 0
    bad = 0
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for j in range(BLOCK):
            i = base + j
            g = grad[tb + j]
            gg = g * g
            wp = Z[i + (_S + _S_WP) * BLOCK]
            wm = Z[i + (_S + _S_WM) * BLOCK]
            okp = Z[i + _VALID_P * BLOCK] > 0.0
            okm = Z[i + _VALID_M * BLOCK] > 0.0
            y_wp = Z[i + (_Y + W_PLUS) * BLOCK]
            y_wm = Z[i + (_Y + W_MINUS) * BLOCK]
            y_jp = Z[i + (_Y + J_PLUS) * BLOCK]
            y_jm = Z[i + (_Y + J_MINUS) * BLOCK]
            n_wp = y_wp + h * (Z[i + (_A + W_PLUS) * BLOCK] + hb * (-g * wp))
            n_wm = y_wm + h * (Z[i + (_A + W_MINUS) * BLOCK] + hb * (g * wm))
            n_jp = y_jp + h * (Z[i + (_A + J_PLUS) * BLOCK] + hb * (gg if okp else 0.0))
            n_jm = y_jm + h * (Z[i + (_A + J_MINUS) * BLOCK] + hb * (gg if okm else 0.0))
            Z[i + (_N + W_PLUS) * BLOCK] = n_wp
            Z[i + (_N + W_MINUS) * BLOCK] = n_wm
            Z[i + (_N + V_PLUS) * BLOCK] = Z[i + (_Y + V_PLUS) * BLOCK]
            Z[i + (_N + V_MINUS) * BLOCK] = Z[i + (_Y + V_MINUS) * BLOCK]
            Z[i + (_N + J_PLUS) * BLOCK] = n_jp if okp else y_jp
            Z[i + (_N + J_MINUS) * BLOCK] = n_jm if okm else y_jm
            Z[i + (_N + K_PLUS) * BLOCK] = 0.0
            Z[i + (_N + K_MINUS) * BLOCK] = 0.0
            Z[i + (_N + P_INT) * BLOCK] = Z[i + (_Y + P_INT) * BLOCK] + h * (Z[i + (_A + P_INT) * BLOCK]
                                                                            + hb * g)
            Z[i + (_N + Q_INT) * BLOCK] = 0.0
            Z[i + (_N + G2_INT) * BLOCK] = Z[i + (_Y + G2_INT) * BLOCK] + h * (Z[i + (_A + G2_INT) * BLOCK]
                                                                              + hb * gg)
            flags += ((n_wp < 0.0) != (y_wp < 0.0)) | ((n_wm < 0.0) != (y_wm < 0.0))
            bad += not ((abs(n_wp) < OVERFLOW) & (abs(n_wm) < OVERFLOW))
    return flags, bad


# -- sign crossings (located by .crossings) -------------------------------------------------------

@njit(inline="always", **JIT_OPTIONS)
def _note_crossing(t, i, sign, count, first, last, counters, log_time, log_coord, log_sign):
    """The bookkeeping of one crossing of coordinate ``i`` of w₊ (``sign = 1``) or w₋ (``-1``) at time ``t``: its
    count, first and last times, and the log (the first ``capacity`` crossings in time; ``counters`` counts them
    all). Shared by every flow scheme (also :mod:`.flow_rodas_run`).

    The log is kept sorted by time by insertion: one step visits its coordinates in index order, not in time
    order, so an append-only log that fills up inside a step with several crossings (common with the long steps
    of ``"rodas"``) would keep a later crossing and drop an earlier one. Crossings of later steps come later in
    time, so an insertion shifts only entries of the same step, and a full log drops a later crossing at once.
    """
    count[i] += 1
    if count[i] == 1:
        first[i] = t
    last[i] = t
    n = counters[N_CROSSINGS]
    cap = log_time.shape[0]
    k = min(n, cap)  # entries held
    if k == cap and (cap == 0 or not (t < log_time[cap - 1])):
        counters[N_CROSSINGS] = n + 1  # full, and t is not earlier than the latest kept crossing
        return
    j = k if k < cap else cap - 1  # (full: the latest entry is dropped)
    while j > 0 and log_time[j - 1] > t:
        log_time[j] = log_time[j - 1]
        log_coord[j] = log_coord[j - 1]
        log_sign[j] = log_sign[j - 1]
        j -= 1
    log_time[j] = t
    log_coord[j] = i
    log_sign[j] = sign
    counters[N_CROSSINGS] = n + 1


@njit(**JIT_OPTIONS)
def _scan_crossings(Z, row_w, row_v, row_valid, vnew, h, t0, sign, count, first, last,
                    counters, log_time, log_coord, log_sign, roots, with_pairs):
    """Locate and log the crossings of w+ (``sign = 1``) or w- (``sign = -1``) in the step [t0, t0 + h].

    ``vnew`` holds ẇ at the end of the step (dense). A coordinate's first
    crossing marks its J/K invalid and restores them to their values at the
    start of the step. (The located time is as accurate as the trajectory: the
    interpolant's error, O(h⁴), is of the order of the global RK4 error.)
    """
    d = count.shape[0]
    for i in range(d):
        w0 = Z[_at(_Y + row_w, i)]
        w1 = Z[_at(_N + row_w, i)]
        v0 = Z[_at(_Y + row_v, i)]
        flip = (w1 < 0.0) != (w0 < 0.0)
        turn = with_pairs and (w0 * v0 < 0.0) and (w1 * vnew[i] > 0.0)
        if not (flip or turn):
            continue
        found = _hermite_crossings(w0, w1, h * v0, h * vnew[i], roots)
        for k in range(found):
            _note_crossing(t0 + roots[k] * h, i, sign, count, first, last, counters, log_time, log_coord, log_sign)
        if found and Z[_at(row_valid, i)] > 0.0:
            Z[_at(row_valid, i)] = 0.0
            jrow = J_PLUS if sign > 0 else J_MINUS
            krow = K_PLUS if sign > 0 else K_MINUS
            Z[_at(_N + jrow, i)] = Z[_at(_Y + jrow, i)]
            Z[_at(_N + krow, i)] = Z[_at(_Y + krow, i)]


@njit(**JIT_OPTIONS)
def _record_row(X, y, X_test, y_test, Z, theta, step, row, rec_step, rec_vectors, rec_losses, rec_vp, rec_vm):
    d = rec_vectors.shape[2]
    rec_step[row] = step
    for i in range(d):
        wp = Z[_at(_Y + W_PLUS, i)]
        wm = Z[_at(_Y + W_MINUS, i)]
        th = (wp * wp - wm * wm) * 0.25
        theta[i] = th
        rec_vectors[row, REC_THETA, i] = th
        rec_vectors[row, REC_W_PLUS, i] = wp
        rec_vectors[row, REC_W_MINUS, i] = wm
        rec_vectors[row, REC_DELTA, i] = abs(wp * wm)
        rec_vp[row, i] = Z[_at(_Y + V_PLUS, i)]
        rec_vm[row, i] = Z[_at(_Y + V_MINUS, i)]
    _record_losses(X, y, X_test, y_test, theta[:d], row, rec_losses)


@njit(**JIT_OPTIONS)
def _rk4_step(X, XT, y, H, b, mode, gf, inv_lam, hs, t0, Z, theta, grad, resid, d, nblk,
              vnew_p, vnew_m, roots, istate, fstate, counters, log_time, log_coord, log_sign):
    """One RK4 step of size ``hs`` from the grid point Y at time ``t0``, in place.

    On entry ``theta`` holds θ(Y), ``grad`` ∇L(θ(Y)) and S, A are prepared by
    :func:`_begin_step`; on return Y is the new point, prepared the same way.
    Returns True (leaving Y unchanged) if the step overflows.
    """
    b0, b1, b2, b3 = _B
    ha1 = hs * _A_SUB[0]
    ha2 = hs * _A_SUB[1]
    ha3 = hs * _A_SUB[2]
    if gf:
        _gf_stage(Z, grad, theta, nblk, b0, ha1)
        _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
        _gf_stage(Z, grad, theta, nblk, b1, ha2)
        _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
        _gf_stage(Z, grad, theta, nblk, b2, ha3)
        _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
    else:
        _mgf_stage(Z, grad, theta, nblk, inv_lam, b0, ha1)
        _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
        _mgf_stage(Z, grad, theta, nblk, inv_lam, b1, ha2)
        _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
        _mgf_stage(Z, grad, theta, nblk, inv_lam, b2, ha3)
        _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
    return _finish_step(X, XT, y, H, b, mode, gf, inv_lam, b3, hs, t0, Z, theta, grad, resid, d, nblk,
                        vnew_p, vnew_m, roots, istate, fstate, counters, log_time, log_coord, log_sign)


@njit(**JIT_OPTIONS)
def _finish_step(X, XT, y, H, b, mode, gf, inv_lam, b3, hs, t0, Z, theta, grad, resid, d, nblk,
                 vnew_p, vnew_m, roots, istate, fstate, counters, log_time, log_coord, log_sign):
    """The last stage of an RK4 step (``grad`` holds the third stage's gradient), the crossing
    search and the acceptance of the new point; returns True (Y unchanged) if the step overflows."""
    if gf:
        flags, bad = _gf_final(Z, grad, nblk, b3, hs)
    else:
        flags, bad = _mgf_final(Z, grad, nblk, inv_lam, b3, hs)
    if bad:
        _begin_step(Z, theta, nblk)
        return True
    if flags:
        dp = theta.shape[0]
        if gf:
            # ẇ at the end of the step from the vector field (gradient flow cannot change sign in exact
            # arithmetic: this only runs with a far too large step)
            for i in range(dp):
                wp = Z[_at(_N + W_PLUS, i)]
                wm = Z[_at(_N + W_MINUS, i)]
                theta[i] = (wp * wp - wm * wm) * 0.25
            _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
            for i in range(dp):
                vnew_p[i] = -grad[i] * Z[_at(_N + W_PLUS, i)]
                vnew_m[i] = grad[i] * Z[_at(_N + W_MINUS, i)]
        else:
            for i in range(dp):
                vnew_p[i] = Z[_at(_N + V_PLUS, i)]
                vnew_m[i] = Z[_at(_N + V_MINUS, i)]
        _scan_crossings(Z, W_PLUS, V_PLUS, _VALID_P, vnew_p, hs, t0, 1, istate[CROSS_PLUS],
                        fstate[FIRST_CROSS_PLUS], fstate[LAST_CROSS_PLUS], counters,
                        log_time, log_coord, log_sign, roots, not gf)
        _scan_crossings(Z, W_MINUS, V_MINUS, _VALID_M, vnew_m, hs, t0, -1, istate[CROSS_MINUS],
                        fstate[FIRST_CROSS_MINUS], fstate[LAST_CROSS_MINUS], counters,
                        log_time, log_coord, log_sign, roots, not gf)
    _accept_step(Z, theta, nblk)
    return False
