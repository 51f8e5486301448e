r"""Exponential fourth-order Runge-Kutta (Hochbruck-Ostermann) for MGF(λ) at small λ: the fast mode exactly.

Why
---
MGF(λ) (Appendix B, eq. (w_mgf)), :math:`\lambda\ddot w_\pm + \dot w_\pm \pm \nabla L(\theta)\odot w_\pm = 0`,
has the fast linear mode :math:`-1/\lambda`: classic RK4 (:mod:`.flow`) needs :math:`h \lesssim 2.8\lambda`,
so its cost grows as :math:`1/\lambda`. This kernel integrates the damping exactly and only the
gradient explicitly, so its step is set by the gradient-flow time scale, whatever λ.

The split
---------
With :math:`a = 1/\lambda`, :math:`v = \dot w` and :math:`g(w) = \nabla F(w)` (the w-space gradient,
:math:`g_\pm = \pm\nabla L(\theta)\odot w_\pm`), MGF(λ) is :math:`\dot w = v`,
:math:`\dot v = -a v - a g(w)`. In the variables :math:`(m, v)`, :math:`m = w + \lambda v`, it is
:math:`u' = \mathcal L u + \mathcal N(u)` with the *diagonal* linear part
:math:`\mathcal L = \mathrm{diag}(0, -a)` and :math:`\mathcal N = (-g, -a g)` evaluated at
:math:`w = m - \lambda v`. The scheme is written back in :math:`(w, v)` (the state never holds
:math:`m`), with :math:`z = -ah = -h/\lambda` and the φ-functions
:math:`\varphi_0(x) = e^x`, :math:`\varphi_{k}(x) = (\varphi_{k-1}(x) - 1/(k-1)!)/x`, through
:math:`D_k(x) = 1/k! - \varphi_k(x) = -x\varphi_{k+1}(x)` (:func:`_phi_d`: a Taylor series for
:math:`|x| < 1`, the recurrence beyond, so there is no cancellation near 0 and no overflow as
:math:`x \to -\infty`, i.e. as λ → 0).

Tableau (Hochbruck & Ostermann 2005, stiff order 4)
---------------------------------------------------
Five stages, :math:`c = (0, \tfrac12, \tfrac12, 1, \tfrac12)`, with
:math:`\varphi_{j,i} = \varphi_j(c_i h\mathcal L)`:

.. math::

    a_{21} &= \tfrac12\varphi_{1,2}, \quad
    a_{31} = \tfrac12\varphi_{1,3} - \varphi_{2,3}, \quad a_{32} = \varphi_{2,3}, \\
    a_{41} &= \varphi_{1,4} - 2\varphi_{2,4}, \quad a_{42} = a_{43} = \varphi_{2,4}, \\
    a_{52} &= a_{53} = \tfrac12\varphi_{2,5} - \varphi_{3,4} + \tfrac14\varphi_{2,4} - \tfrac12\varphi_{3,5},
    \quad a_{54} = \tfrac14\varphi_{2,5} - a_{52}, \quad
    a_{51} = \tfrac12\varphi_{1,5} - 2a_{52} - a_{54}, \\
    b_1 &= \varphi_1 - 3\varphi_2 + 4\varphi_3, \quad b_2 = b_3 = 0, \quad
    b_4 = -\varphi_2 + 4\varphi_3, \quad b_5 = 4\varphi_2 - 8\varphi_3,

:math:`U_i = e^{c_i h\mathcal L}u_n + h\sum_j a_{ij}(h\mathcal L)\mathcal N(U_j)`,
:math:`u_{n+1} = e^{h\mathcal L}u_n + h\sum_i b_i(h\mathcal L)\mathcal N(U_i)`. For the
:math:`m` component (:math:`\mathcal L = 0`) the weights are the underlying Runge-Kutta method
:math:`a_{ij}(0), b_i(0)` (:math:`b(0) = (\tfrac16, 0, 0, \tfrac16, \tfrac23)`). Written in
:math:`(w, v)`, with :math:`E_i = e^{c_i z}`, :math:`g_j = g(W_j)`:

.. math::

    V_i &= E_i v_n - \sum_j \beta_{ij} g_j, \qquad \beta_{ij} = -z\,a_{ij}(z), \\
    W_i &= w_n + \lambda(1 - E_i) v_n - h\sum_j \gamma_{ij} g_j, \qquad \gamma_{ij} = a_{ij}(0) - a_{ij}(z),

and the same with :math:`b` for the step. Both :math:`\beta` and :math:`\gamma` are sums of
:math:`D_k(c_i z)` (since :math:`\varphi_k(0) - \varphi_k(x) = D_k(x)` and :math:`-x\varphi_k(x) =
D_{k-1}(x)`): bounded for every :math:`z \le 0`, and as λ → 0 (:math:`z \to -\infty`)
:math:`\lambda(1 - E_i) \to 0`, :math:`\gamma \to a(0)`: the scheme tends to the underlying
Runge-Kutta method for gradient flow (with :math:`v` slaved to :math:`-g`).

The integrals (see :mod:`.flow`) ride along: :math:`J_\pm, P, G_2` (no linear part) with the
weights :math:`b_i(0)`, and :math:`K_\pm, Q`, whose kernel :math:`e^{-(t-s)/\lambda}` is the same
stiff decay :math:`\dot K = f - aK`, exactly: :math:`K_{n+1} = e^z K_n + h\sum_i b_i(z) f_i`.

Start of a run: the initial layer
---------------------------------
From a velocity off the slow manifold :math:`v \approx -g(w)` (the paper's :math:`\dot w_0 = 0`),
:math:`v` relaxes on the time scale λ; the exponential scheme integrates the linear part of that
layer exactly but not its coupling through :math:`g`, and the error of steps much longer than
λ inside it is not of order four. So a grid step whose start ``t`` has
``LAYER_START·λ + LAYER_GROWTH·max(t - LAYER_SPAN·λ, 0)`` below its step is *tiled*: pieces of
at most that size (growing geometrically), i.e. a graded mesh over the layer, O(log(h/λ))
extra steps. The same tiling makes the refined start (``m_fine`` pieces of ``h/m_fine``), and
the layer's tiling belongs to it: a run without a refined start (``n_fine = 0``,
``refine_start=None``) takes uniform steps from t = 0 (for a start on the slow manifold, or a
convergence study).

Grid, state, crossings, divergence
----------------------------------
As RK4 (the same state rows and work array of :mod:`.flow`, crossing search
:func:`.flow._scan_crossings` with pairs, recording, convergence and divergence tests): only the
step differs. The drivers are those of either scheme: :func:`.flow_run._flow_advance` (single
run) and :func:`.flow_sweep._flow_group` (lockstep lanes, each bitwise the single run), which
take this module's pieces (:func:`_tiled`, :func:`_next_piece`) and steps.

Module size
-----------
Longer than most modules because it is one unit: the coefficient vector, the five stage passes
(which address the rows of :mod:`.flow`'s work array that the exponential step re-purposes for
its stored stage gradients) and the piece rule of the tiled start are read together to check
what a step does.
"""

import math

import numpy as np
from numba import njit

from .config import JIT_OPTIONS
from .flow import (
    _A,
    _N,
    _NR,
    _S,
    _S_KM,
    _S_KP,
    _S_VM,
    _S_VP,
    _S_WM,
    _S_WP,
    _VALID_M,
    _VALID_P,
    _Y,
    BLOCK,
    CROSS_MINUS,
    CROSS_PLUS,
    FIRST_CROSS_MINUS,
    FIRST_CROSS_PLUS,
    G2_INT,
    J_MINUS,
    J_PLUS,
    K_MINUS,
    K_PLUS,
    LAST_CROSS_MINUS,
    LAST_CROSS_PLUS,
    P_INT,
    Q_INT,
    V_MINUS,
    V_PLUS,
    W_MINUS,
    W_PLUS,
    _accept_step,
    _at,
    _begin_step,
    _gradient,
    _grid_point,
    _put_new_point,
    _scan_crossings,
)

#: Nodes of the five stages.
EXP_C = np.array([0.0, 0.5, 0.5, 1.0, 0.5])
#: Weights of the underlying Runge-Kutta method (z = 0) of stages 1, 4, 5 (b2 = b3 = 0).
EXP_B0 = np.array([1.0 / 6.0, 0.0, 0.0, 1.0 / 6.0, 2.0 / 3.0])
_B01 = 1.0 / 6.0
_B04 = 1.0 / 6.0
_B05 = 2.0 / 3.0

#: Initial-layer tiling: first piece LAYER_START·λ ...
LAYER_START = 0.25
#: ... then pieces growing by this fraction of the time elapsed beyond LAYER_SPAN·λ.
LAYER_GROWTH = 0.2
LAYER_SPAN = 10.0

# -- the coefficient vector of one step size (``_exp_coefficients``) ----------------------------
C_H = 0       # the step h
C_EH = 1      # e^{z/2}
C_EZ = 2      # e^{z}
C_LH = 3      # λ(1 - e^{z/2})
C_LZ = 4      # λ(1 - e^{z})
C_HG21 = 5    # h·γ_ij (w from the stage gradients)
C_B21 = 6     # β_ij (v from the stage gradients)
C_HG31 = 7
C_HG32 = 8
C_B31 = 9
C_B32 = 10
C_HG41 = 11
C_HG42 = 12
C_B41 = 13
C_B42 = 14
C_HG51 = 15
C_HG52 = 16
C_HG54 = 17
C_B51 = 18
C_B52 = 19
C_B54 = 20
C_HG1 = 21    # the step: h·γ_i, β_i, h·b_i(z) (K, Q) for i = 1, 4, 5
C_HG4 = 22
C_HG5 = 23
C_B1 = 24
C_B4 = 25
C_B5 = 26
C_HW1 = 27
C_HW4 = 28
C_HW5 = 29
N_COEF = 30

# work-array rows of the stored stage gradients g_j = ∇F(W_j) (rows of flow.py's block layout that
# the exponential step does not use: the A rows of w, v and the K stage inputs)
_G1P = _A + W_PLUS
_G1M = _A + W_MINUS
_G4P = _A + V_PLUS
_G4M = _A + V_MINUS
_G23P = _S + _S_KP   # g_2, then g_2 + g_3 (a_{i2} = a_{i3} for i = 4, 5)
_G23M = _S + _S_KM

_SERIES_TERMS = 26
_INV_FACT = np.array([1.0 / math.factorial(k) for k in range(_SERIES_TERMS + 5)])


@njit(**JIT_OPTIONS)
def _phi_d(x, phi, dk):
    """φ_0..φ_3(x) into ``phi`` and D_k(x) = 1/k! - φ_k(x) = -x φ_{k+1}(x), k = 0..3, into ``dk``; x <= 0.

    Taylor series (Horner) for |x| < 1, where the recurrence would cancel; the recurrence
    φ_k = (φ_{k-1} - 1/(k-1)!)/x beyond (x = -inf gives φ_k = 0, D_k = 1/k!).
    """
    if abs(x) < 1.0:
        for k in range(5):
            s = 0.0
            for n in range(_SERIES_TERMS - 1, -1, -1):
                s = s * x + _INV_FACT[n + k]
            if k < 4:
                phi[k] = s
            if k >= 1:
                dk[k - 1] = -x * s
    else:
        p = math.exp(x)
        phi[0] = p
        for k in range(1, 4):
            p = (p - _INV_FACT[k - 1]) / x
            phi[k] = p
        for k in range(4):
            dk[k] = _INV_FACT[k] - phi[k]


@njit(**JIT_OPTIONS)
def _exp_coefficients(lam, h, out):
    """The coefficients of one exponential step of size ``h`` for MGF(λ) into ``out`` (layout ``C_*``)."""
    z = -h / lam if lam > 0.0 else -np.inf
    ph = np.empty(4)
    dh = np.empty(4)
    pz = np.empty(4)
    dz = np.empty(4)
    _phi_d(0.5 * z, ph, dh)
    _phi_d(z, pz, dz)
    out[C_H] = h
    out[C_EH] = ph[0]
    out[C_EZ] = pz[0]
    out[C_LH] = lam * dh[0]
    out[C_LZ] = lam * dz[0]
    # γ = a(0) - a(z) from D_k(c z); β = -z a(z) from D_{k-1}(c z)/c (c = 1/2 or 1)
    g21 = 0.5 * dh[1]
    b21 = dh[0]
    g31 = 0.5 * dh[1] - dh[2]
    g32 = dh[2]
    b31 = dh[0] - 2.0 * dh[1]
    b32 = 2.0 * dh[1]
    g41 = dz[1] - 2.0 * dz[2]
    g42 = dz[2]
    b41 = dz[0] - 2.0 * dz[1]
    b42 = dz[1]
    g52 = 0.5 * dh[2] - dz[3] + 0.25 * dz[2] - 0.5 * dh[3]
    b52 = dh[1] - dz[2] + 0.25 * dz[1] - dh[2]
    g54 = 0.25 * dh[2] - g52
    b54 = 0.5 * dh[1] - b52
    g51 = 0.5 * dh[1] - 2.0 * g52 - g54
    b51 = dh[0] - 2.0 * b52 - b54
    out[C_HG21] = h * g21
    out[C_B21] = b21
    out[C_HG31] = h * g31
    out[C_HG32] = h * g32
    out[C_B31] = b31
    out[C_B32] = b32
    out[C_HG41] = h * g41
    out[C_HG42] = h * g42
    out[C_B41] = b41
    out[C_B42] = b42
    out[C_HG51] = h * g51
    out[C_HG52] = h * g52
    out[C_HG54] = h * g54
    out[C_B51] = b51
    out[C_B52] = b52
    out[C_B54] = b54
    out[C_HG1] = h * (dz[1] - 3.0 * dz[2] + 4.0 * dz[3])
    out[C_HG4] = h * (-dz[2] + 4.0 * dz[3])
    out[C_HG5] = h * (4.0 * dz[2] - 8.0 * dz[3])
    out[C_B1] = dz[0] - 3.0 * dz[1] + 4.0 * dz[2]
    out[C_B4] = -dz[1] + 4.0 * dz[2]
    out[C_B5] = 4.0 * dz[1] - 8.0 * dz[2]
    out[C_HW1] = h * (pz[1] - 3.0 * pz[2] + 4.0 * pz[3])
    out[C_HW4] = h * (-pz[2] + 4.0 * pz[3])
    out[C_HW5] = h * (4.0 * pz[2] - 8.0 * pz[3])


def exp_coefficients(lam, h):
    """The coefficient vector (layout ``C_*``) of one step of size ``h`` for MGF(λ), as a new array."""
    out = np.empty(N_COEF)
    _exp_coefficients(float(lam), float(h), out)
    return out


@njit(**JIT_OPTIONS)
def _layer_piece(lam, t):
    """Largest piece at time ``t`` inside the initial layer (see the module docstring)."""
    return LAYER_START * lam + LAYER_GROWTH * max(t - LAYER_SPAN * lam, 0.0)


# -- stage passes (element-wise on the work array) -----------------------------------------------

@njit(**JIT_OPTIONS)
def _stage_one(Z, grad, theta, nblk, co):
    """Stage 1 (the grid point, S = Y): store g_1, accumulate its integrands, S = stage 2, θ(S)."""
    eh = co[C_EH]
    lh = co[C_LH]
    hg = co[C_HG21]
    bb = co[C_B21]
    hw = co[C_HW1]
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for j in range(BLOCK):
            i = base + j
            g = grad[tb + j]
            wp = Z[i + (_Y + W_PLUS) * BLOCK]
            wm = Z[i + (_Y + W_MINUS) * BLOCK]
            vp = Z[i + (_Y + V_PLUS) * BLOCK]
            vm = Z[i + (_Y + V_MINUS) * BLOCK]
            gp = g * wp
            gm = -g * wm
            rp = vp / wp
            rm = vm / wm
            fp = rp * rp if Z[i + _VALID_P * BLOCK] > 0.0 else 0.0
            fm = rm * rm if Z[i + _VALID_M * BLOCK] > 0.0 else 0.0
            Z[i + _G1P * BLOCK] = gp
            Z[i + _G1M * BLOCK] = gm
            Z[i + (_A + J_PLUS) * BLOCK] += _B01 * fp
            Z[i + (_A + J_MINUS) * BLOCK] += _B01 * fm
            Z[i + (_A + K_PLUS) * BLOCK] += hw * fp
            Z[i + (_A + K_MINUS) * BLOCK] += hw * fm
            Z[i + (_A + P_INT) * BLOCK] += _B01 * g
            Z[i + (_A + Q_INT) * BLOCK] += hw * g
            Z[i + (_A + G2_INT) * BLOCK] += _B01 * (g * g)
            nwp = wp + lh * vp - hg * gp
            nwm = wm + lh * vm - hg * gm
            Z[i + (_S + _S_WP) * BLOCK] = nwp
            Z[i + (_S + _S_WM) * BLOCK] = nwm
            Z[i + (_S + _S_VP) * BLOCK] = eh * vp - bb * gp
            Z[i + (_S + _S_VM) * BLOCK] = eh * vm - bb * gm
            theta[tb + j] = (nwp * nwp - nwm * nwm) * 0.25


@njit(**JIT_OPTIONS)
def _stage_two(Z, grad, theta, nblk, co):
    """Stage 2: store g_2, S = stage 3 (a_31 g_1 + a_32 g_2), θ(S)."""
    eh = co[C_EH]
    lh = co[C_LH]
    hg1 = co[C_HG31]
    hg2 = co[C_HG32]
    b1 = co[C_B31]
    b2 = co[C_B32]
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for j in range(BLOCK):
            i = base + j
            g = grad[tb + j]
            gp = g * Z[i + (_S + _S_WP) * BLOCK]
            gm = -g * Z[i + (_S + _S_WM) * BLOCK]
            Z[i + _G23P * BLOCK] = gp
            Z[i + _G23M * BLOCK] = gm
            g1p = Z[i + _G1P * BLOCK]
            g1m = Z[i + _G1M * BLOCK]
            vp = Z[i + (_Y + V_PLUS) * BLOCK]
            vm = Z[i + (_Y + V_MINUS) * BLOCK]
            nwp = Z[i + (_Y + W_PLUS) * BLOCK] + lh * vp - (hg1 * g1p + hg2 * gp)
            nwm = Z[i + (_Y + W_MINUS) * BLOCK] + lh * vm - (hg1 * g1m + hg2 * gm)
            Z[i + (_S + _S_WP) * BLOCK] = nwp
            Z[i + (_S + _S_WM) * BLOCK] = nwm
            Z[i + (_S + _S_VP) * BLOCK] = eh * vp - (b1 * g1p + b2 * gp)
            Z[i + (_S + _S_VM) * BLOCK] = eh * vm - (b1 * g1m + b2 * gm)
            theta[tb + j] = (nwp * nwp - nwm * nwm) * 0.25


@njit(**JIT_OPTIONS)
def _stage_three(Z, grad, theta, nblk, co):
    """Stage 3: g_2 + g_3 stored, S = stage 4 (a_41 g_1 + a_42 (g_2 + g_3)), θ(S)."""
    ez = co[C_EZ]
    lz = co[C_LZ]
    hg1 = co[C_HG41]
    hg2 = co[C_HG42]
    b1 = co[C_B41]
    b2 = co[C_B42]
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for j in range(BLOCK):
            i = base + j
            g = grad[tb + j]
            gp = Z[i + _G23P * BLOCK] + g * Z[i + (_S + _S_WP) * BLOCK]
            gm = Z[i + _G23M * BLOCK] - g * Z[i + (_S + _S_WM) * BLOCK]
            Z[i + _G23P * BLOCK] = gp
            Z[i + _G23M * BLOCK] = gm
            g1p = Z[i + _G1P * BLOCK]
            g1m = Z[i + _G1M * BLOCK]
            vp = Z[i + (_Y + V_PLUS) * BLOCK]
            vm = Z[i + (_Y + V_MINUS) * BLOCK]
            nwp = Z[i + (_Y + W_PLUS) * BLOCK] + lz * vp - (hg1 * g1p + hg2 * gp)
            nwm = Z[i + (_Y + W_MINUS) * BLOCK] + lz * vm - (hg1 * g1m + hg2 * gm)
            Z[i + (_S + _S_WP) * BLOCK] = nwp
            Z[i + (_S + _S_WM) * BLOCK] = nwm
            Z[i + (_S + _S_VP) * BLOCK] = ez * vp - (b1 * g1p + b2 * gp)
            Z[i + (_S + _S_VM) * BLOCK] = ez * vm - (b1 * g1m + b2 * gm)
            theta[tb + j] = (nwp * nwp - nwm * nwm) * 0.25


@njit(**JIT_OPTIONS)
def _stage_four(Z, grad, theta, nblk, co):
    """Stage 4: store g_4, accumulate its integrands, S = stage 5, θ(S)."""
    eh = co[C_EH]
    lh = co[C_LH]
    hg1 = co[C_HG51]
    hg2 = co[C_HG52]
    hg4 = co[C_HG54]
    b1 = co[C_B51]
    b2 = co[C_B52]
    b4 = co[C_B54]
    hw = co[C_HW4]
    for blk in range(nblk):
        base = blk * (_NR * BLOCK)
        tb = blk * BLOCK
        for j in range(BLOCK):
            i = base + j
            g = grad[tb + j]
            wp = Z[i + (_S + _S_WP) * BLOCK]
            wm = Z[i + (_S + _S_WM) * BLOCK]
            svp = Z[i + (_S + _S_VP) * BLOCK]
            svm = Z[i + (_S + _S_VM) * BLOCK]
            gp = g * wp
            gm = -g * wm
            rp = svp / wp
            rm = svm / wm
            fp = rp * rp if Z[i + _VALID_P * BLOCK] > 0.0 else 0.0
            fm = rm * rm if Z[i + _VALID_M * BLOCK] > 0.0 else 0.0
            Z[i + _G4P * BLOCK] = gp
            Z[i + _G4M * BLOCK] = gm
            Z[i + (_A + J_PLUS) * BLOCK] += _B04 * fp
            Z[i + (_A + J_MINUS) * BLOCK] += _B04 * fm
            Z[i + (_A + K_PLUS) * BLOCK] += hw * fp
            Z[i + (_A + K_MINUS) * BLOCK] += hw * fm
            Z[i + (_A + P_INT) * BLOCK] += _B04 * g
            Z[i + (_A + Q_INT) * BLOCK] += hw * g
            Z[i + (_A + G2_INT) * BLOCK] += _B04 * (g * g)
            g1p = Z[i + _G1P * BLOCK]
            g1m = Z[i + _G1M * BLOCK]
            g2p = Z[i + _G23P * BLOCK]
            g2m = Z[i + _G23M * BLOCK]
            vp = Z[i + (_Y + V_PLUS) * BLOCK]
            vm = Z[i + (_Y + V_MINUS) * BLOCK]
            nwp = Z[i + (_Y + W_PLUS) * BLOCK] + lh * vp - (hg1 * g1p + hg2 * g2p + hg4 * gp)
            nwm = Z[i + (_Y + W_MINUS) * BLOCK] + lh * vm - (hg1 * g1m + hg2 * g2m + hg4 * gm)
            Z[i + (_S + _S_WP) * BLOCK] = nwp
            Z[i + (_S + _S_WM) * BLOCK] = nwm
            Z[i + (_S + _S_VP) * BLOCK] = eh * vp - (b1 * g1p + b2 * g2p + b4 * gp)
            Z[i + (_S + _S_VM) * BLOCK] = eh * vm - (b1 * g1m + b2 * g2m + b4 * gm)
            theta[tb + j] = (nwp * nwp - nwm * nwm) * 0.25


@njit(**JIT_OPTIONS)
def _stage_final(Z, grad, nblk, co):
    """Stage 5 and the step: N = the new point; J/K of invalid coordinates keep their values.

    Returns ``(flags, bad)`` as :func:`.flow._mgf_final`: coordinates whose w± changed sign or
    turned, and w, ẇ entries outside (-OVERFLOW, OVERFLOW) (NaN included).
    """
    h = co[C_H]
    ez = co[C_EZ]
    lz = co[C_LZ]
    hg1 = co[C_HG1]
    hg4 = co[C_HG4]
    hg5 = co[C_HG5]
    b1 = co[C_B1]
    b4 = co[C_B4]
    b5 = co[C_B5]
    hw = co[C_HW5]
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
            svp = Z[i + (_S + _S_VP) * BLOCK]
            svm = Z[i + (_S + _S_VM) * BLOCK]
            okp = Z[i + _VALID_P * BLOCK] > 0.0
            okm = Z[i + _VALID_M * BLOCK] > 0.0
            gp = g * wp
            gm = -g * wm
            rp = svp / wp
            rm = svm / wm
            fp = rp * rp if okp else 0.0
            fm = rm * rm if okm else 0.0
            g1p = Z[i + _G1P * BLOCK]
            g1m = Z[i + _G1M * BLOCK]
            g4p = Z[i + _G4P * BLOCK]
            g4m = Z[i + _G4M * BLOCK]
            y_wp, y_wm, y_vp, y_vm, y_jp, y_jm, y_kp, y_km = _grid_point(Z, i)
            n_wp = y_wp + lz * y_vp - (hg1 * g1p + hg4 * g4p + hg5 * gp)
            n_wm = y_wm + lz * y_vm - (hg1 * g1m + hg4 * g4m + hg5 * gm)
            n_vp = ez * y_vp - (b1 * g1p + b4 * g4p + b5 * gp)
            n_vm = ez * y_vm - (b1 * g1m + b4 * g4m + b5 * gm)
            n_jp = y_jp + h * (Z[i + (_A + J_PLUS) * BLOCK] + _B05 * fp)
            n_jm = y_jm + h * (Z[i + (_A + J_MINUS) * BLOCK] + _B05 * fm)
            n_kp = ez * y_kp + (Z[i + (_A + K_PLUS) * BLOCK] + hw * fp)
            n_km = ez * y_km + (Z[i + (_A + K_MINUS) * BLOCK] + hw * fm)
            n_p = Z[i + (_Y + P_INT) * BLOCK] + h * (Z[i + (_A + P_INT) * BLOCK] + _B05 * g)
            n_q = ez * Z[i + (_Y + Q_INT) * BLOCK] + (Z[i + (_A + Q_INT) * BLOCK] + hw * g)
            n_g2 = Z[i + (_Y + G2_INT) * BLOCK] + h * (Z[i + (_A + G2_INT) * BLOCK] + _B05 * (g * g))
            flag, over = _put_new_point(Z, i, okp, okm, n_wp, n_wm, n_vp, n_vm, n_jp, n_jm, n_kp, n_km, n_p, n_q,
                                        n_g2)
            flags += flag
            bad += over
    return flags, bad


@njit(**JIT_OPTIONS)
def _exp_finish(Z, theta, nblk, flags, bad, t0, vnew_p, vnew_m, roots, istate, fstate, counters,
                log_time, log_coord, log_sign, hs):
    """After :func:`_stage_final`: the crossing search and the acceptance of the new point.

    Returns True (Y unchanged, S and A reset) if the step overflowed.
    """
    if bad:
        _begin_step(Z, theta, nblk)
        return True
    if flags:
        dp = theta.shape[0]
        for i in range(dp):
            vnew_p[i] = Z[_at(_N + V_PLUS, i)]
            vnew_m[i] = Z[_at(_N + V_MINUS, i)]
        _scan_crossings(Z, W_PLUS, V_PLUS, _VALID_P, vnew_p, hs, t0, 1, istate[CROSS_PLUS],
                        fstate[FIRST_CROSS_PLUS], fstate[LAST_CROSS_PLUS], counters,
                        log_time, log_coord, log_sign, roots, True)
        _scan_crossings(Z, W_MINUS, V_MINUS, _VALID_M, vnew_m, hs, t0, -1, istate[CROSS_MINUS],
                        fstate[FIRST_CROSS_MINUS], fstate[LAST_CROSS_MINUS], counters,
                        log_time, log_coord, log_sign, roots, True)
    _accept_step(Z, theta, nblk)
    return False


@njit(**JIT_OPTIONS)
def _exp_step(X, XT, y, H, b, mode, co, t0, Z, theta, grad, resid, d, nblk,
              vnew_p, vnew_m, roots, istate, fstate, counters, log_time, log_coord, log_sign):
    """One exponential step (coefficients ``co``) from the grid point Y at time ``t0``, in place.

    On entry ``theta`` holds θ(Y), ``grad`` ∇L(θ(Y)), S and A are prepared by
    :func:`.flow._begin_step`; on return Y is the new point, prepared the same way.
    Returns True (leaving Y unchanged) if the step overflows.
    """
    _stage_one(Z, grad, theta, nblk, co)
    _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
    _stage_two(Z, grad, theta, nblk, co)
    _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
    _stage_three(Z, grad, theta, nblk, co)
    _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
    _stage_four(Z, grad, theta, nblk, co)
    _gradient(X, XT, y, H, b, mode, theta, d, resid, grad)
    flags, bad = _stage_final(Z, grad, nblk, co)
    return _exp_finish(Z, theta, nblk, flags, bad, t0, vnew_p, vnew_m, roots, istate, fstate, counters,
                       log_time, log_coord, log_sign, co[C_H])


@njit(**JIT_OPTIONS)
def _tiled(lam, h, n_fine, m_fine, step):
    """Is grid ``step`` made of several pieces (refined start or initial layer; the layer's tiling is
    part of the refined start: none without one)?"""
    if n_fine <= 0:
        return False
    if step < n_fine and m_fine > 1:
        return True
    return _layer_piece(lam, step * h) < h


@njit(**JIT_OPTIONS)
def _next_piece(lam, h, n_fine, m_fine, step, t):
    """Size of the next piece of tiled grid ``step`` from time ``t``, and whether it is the last one."""
    end = (step + 1) * h
    s = h / m_fine if step < n_fine else h
    layer = _layer_piece(lam, t)
    if layer < s:
        s = layer
    rest = end - t
    if rest <= s * (1.0 + 1e-9):
        return rest, True
    return s, False


@njit(**JIT_OPTIONS)
def _piece_coefficients(lam, s, co_h, co_fine, co_tmp):
    """Which coefficients a piece of size ``s`` takes: 0 those of h (``co_h``), 1 those of h/m_fine
    (``co_fine``), 2 ``co_tmp``, computed here for ``s`` (see :func:`_coefficients_of`)."""
    if s == co_h[C_H]:
        return 0
    if s == co_fine[C_H]:
        return 1
    _exp_coefficients(lam, s, co_tmp)
    return 2


@njit(inline="always", **JIT_OPTIONS)
def _coefficients_of(which, co_h, co_fine, co_tmp):
    """The coefficient vector :func:`_piece_coefficients` chose."""
    if which == 0:
        return co_h
    return co_fine if which == 1 else co_tmp
