r"""Adaptive Rosenbrock integration (Rodas5P) of MGF(λ) and gradient flow, for long horizons.

Why this method
---------------
The paper's continuous-time claims are about the limit θ∞: runs stop at train loss 1e-20, at
t ~ 1e5-1e6, while the fastest time scale of the problem is ~0.02 (the stiffness κ of the data)
or λ. Fixed-step schemes (:mod:`.flow`, :mod:`.flow_exp`) then take ~1e7 steps through what is
mostly a slow exponential tail. The system is stiff (fast modes -κ, -1/λ) and, at larger λ,
weakly damped oscillatory (λs² + s + κ = 0): a method for it must be stable on the whole left half-plane
(BDF of order > 2 is not A-stable on those oscillatory modes). A Rosenbrock-Wanner method needs no Newton
iteration (one Jacobian and one factorisation per step, then one linear solve per stage) and is a one-step
method: its whole state is the current point and the next step size, so a chunk boundary, a checkpoint or
a resume costs nothing and changes no bit, and crossings and records come from the dense output of one
step. **Rodas5P** (Steinebach 2023; 8 stages, order 5 with an embedded order-4 solution, stiffly accurate
and L-stable, order-4 dense output) is the modern member of Hairer and Wanner's RODAS family. Its cost is
a factorisation every step, where LSODA's BDF reuses one Jacobian over tens of steps; on MGF this scheme is
several times faster than SciPy's LSODA and BDF with the analytic Jacobian (the measurements: benchmarks/README.md,
"Long horizons"). A run of MGF starts by the explicit DOP853 while the flow is not stiff and switches to this method
for good (:mod:`.flow_dop853` says when and why). Gradient flow takes the same stages and controller in its mirror
coordinate P = ∫∇L (:mod:`.flow_rodas_gf`, which says why); this module's system, Jacobian and solve are MGF(λ)'s.

Method (coefficients as data: ``GAMMA``, ``RODAS_A``, ``RODAS_C``, ``RODAS_H``)
-------------------------------------------------------------------------------
For ``y' = f(y)`` (autonomous), step ``h``, ``c = hγ`` and the exact Jacobian ``A = f'(y₀)``,
stage ``i = 1..8`` solves

.. math::

    (I - cA)\,k_i = c\Big(f(u_i) + \tfrac1h\sum_{j<i} C_{ij}k_j\Big),\qquad
    u_i = y_0 + \sum_{j<i} a_{ij}k_j,

with ``u₇ = u₆ + k₆``, ``u₈ = u₇ + k₇`` (rows 7, 8 of ``RODAS_A``), the step ``y₁ = u₈ + k₈``
and the error estimate ``k₈`` (= y₁ minus the embedded solution u₈). The dense output is
``y(s) = (1-s)y₀ + s(y₁ + (1-s)(q₁ + s(q₂ + s q₃)))``, ``q_m = Σ_j RODAS_H[m, j] k_j``. The tests check the
method's order, its L-stability and the dense output against SciPy's Radau at rtol 1e-13.

The system and its Jacobian (structure used by the solves)
----------------------------------------------------------
The state rows are those of :mod:`.flow` (``W_PLUS .. G2_INT``): MGF(λ), Appendix B eq. (w_mgf),
:math:`\dot w = v,\ \lambda\dot v = -v - \nabla F(w)` with :math:`\nabla F = (g⊙w_+, -g⊙w_-)`,
:math:`g = \nabla L(\theta)`, and the integrals J±, K±, P, Q, G₂ as components. The Hessian of F in
w-space is

.. math::

    M = \mathrm{diag}(g, -g) + \tfrac12\,U H U^\top,\qquad U = \begin{pmatrix}\mathrm{diag}(w_+)\\
    -\mathrm{diag}(w_-)\end{pmatrix},\quad H = X^\top X/n .

Eliminating :math:`x_w = r_w + c\,x_v` from the MGF rows of :math:`(I - cA)x = r` leaves
:math:`(\alpha I + \beta M)x_v = \lambda r_v - cMr_w` with :math:`\alpha = \lambda + c,
\beta = c^2`. With :math:`a_\pm = \alpha \pm \beta g`, :math:`z = U^\top x` solves the **d × d**
system :math:`(I + \tfrac\beta2 E H)z = U^\top(a^{-1}s)`, :math:`E = w_+^2/a_+ + w_-^2/a_-`,
and :math:`x = a^{-1}(s - \tfrac\beta2 U H z)`: one d × d factorisation per step instead of a
(11d)³ or (4d)³ one. When every :math:`a_\pm > 0` (the usual case) it is the Cholesky factorisation of the
symmetric positive definite :math:`E^{-1} + \tfrac\beta2 H`, else an LU; where d ≥ 3n that case is solved in the
Woodbury form, through the n × n :math:`\tfrac{2n}{\beta}I + X E X^\top` (:mod:`.woodbury`: H has rank ≤ n; the
paper's n = 20, d = 30 keeps the d × d route). Where some :math:`|a_\pm|`
is small against α (E would be ill-conditioned) the step factorises the 2d × 2d matrix
:math:`\mathrm{diag}(a) + \tfrac\beta2 UHU^\top` instead (counted in ``N_DENSE``).
The integral rows are lower block-triangular: each is the exact Jacobian row applied to the solved :math:`x_w, x_v`
(through :math:`H\,\delta\theta`, :math:`\delta\theta = (w_+x_{w+} - w_-x_{w-})/2`), divided by :math:`1 + c/\lambda`
for K±, Q.

Error control and what it covers
--------------------------------
The weighted RMS norm of ``k₈`` with weights ``atol + rtol·max(|y₀|, |y₁|)`` is taken over w±,
ẇ± and P, Q, G₂ (gradient flow: over P and G₂, :mod:`.flow_rodas_gf`): the integrals whose integrands
are smooth. J± and K± (integrands :math:`(\dot w/w)^2`, singular where a coordinate crosses zero, after
which they are frozen) are carried by the same stages, outside the norm: they are order-5 quadratures on steps that
resolve w and ẇ, and inherit the accuracy of ẇ. The ẇ rows are weighted as what they do to w: an
error δẇ relaxes in a time λ and moves w by about λ·δẇ, so λ·δẇ is measured against the weight of
w (at small λ, ẇ is slaved to -∇F(w) and needs no more accuracy than w; this saves 2-4x the steps at
λ ≤ 0.05). With the default tolerances λJ± agrees with the fixed-step schemes to ~2e-8 at λ = 0.01
(tests/test_rodas.py). Where a weight becomes tiny without crossing (w₋ of a support coordinate at 4.6e-9 by
t = 300, λ = 0.058), its relative accuracy, and that of its J±, K± and Δ, is that of ln|w|, which integrates
the error of ∇L over the run: about 600·rtol for w and 60·rtol for J there, proportional to rtol and not
helped by a smaller atol (``scripts/accuracy_small_weights.py``). The controller is a PI controller
(``SAFETY``, exponents ``PI_ALPHA``, ``PI_BETA``, step factors in ``[FAC_MIN, FAC_MAX]``, no growth right
after a rejection); a step whose new point is not finite or overflows is rejected with a quarter of the step;
a step below ``H_MIN_REL·max(t, 1)`` that does not land on t_max ends the run as diverged (``sstate[FAILED] = 1``).

Crossings, records, state (the driver :mod:`.flow_rodas_run`)
--------------------------------------------------------------
Sign changes of w± in a step are bracketed by the cubic Hermite interpolant of the end values and slopes
(:func:`.crossings._hermite_crossings`, which also finds pairs) and then located on the step's dense output
(:mod:`.dense_output`) by safeguarded Newton; J±, K± of a coordinate are frozen at its first crossing as in
:mod:`.flow`. Records at the times of ``record_times`` are the dense output of the step that contains them (w± and
ẇ±; for gradient flow w± = w±(0)e^{∓P} from the dense output of P and ẇ± from the vector field there); the dense
coefficients of the last step are part of the state (``dense``), so a chunk can end with records still owed and the
next call writes them first. Everything a run needs to continue bit for bit is in ``fstate``, ``istate``,
``counters``, ``sstate``, ``dense`` and the crossing log: the chunk length never changes a bit.
"""

import numpy as np
from numba import njit

from .config import INLINE_JIT_OPTIONS, JIT_OPTIONS, LEAF_JIT_OPTIONS, OVERFLOW
from .flow import (
    G2_INT,
    J_MINUS,
    J_PLUS,
    K_MINUS,
    K_PLUS,
    N_RK_ROWS,
    P_INT,
    Q_INT,
    V_MINUS,
    V_PLUS,
    W_MINUS,
    W_PLUS,
)
from .layout import MODE_DATA
from .small_linalg import _cholesky, _cholesky_solve, _lu, _lu_solve, _lu_transpose
from .vec_ir import _matvec_columns
from .woodbury import _use_woodbury, _woodbury_factor, _woodbury_matrices, _woodbury_solve_eh

# -- Rodas5P (Steinebach 2023), in the W-transformed form of Hairer & Wanner ---------------------
GAMMA = 0.21193756319429014
N_STAGES = 8
_A6 = (-7.502846399306121, 2.561846144803919, -11.627539656261098, -0.18268767659942256,
       0.030198172008377946)
#: u_i = y₀ + Σ_j RODAS_A[i, j] k_j (0-based rows; rows 6, 7: u₇ = u₆ + k₆, u₈ = u₇ + k₇).
RODAS_A = np.array([
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [2.849394379747939, 0.45842242204463923, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [-6.954028509809101, 2.489845061869568, -10.358996098473584, 0.0, 0.0, 0.0, 0.0, 0.0],
    [2.8029986275628964, 0.5072464736228206, -0.3988312541770524, -0.04721187230404641, 0.0, 0.0, 0.0, 0.0],
    list(_A6) + [0.0, 0.0, 0.0],
    list(_A6) + [1.0, 0.0, 0.0],
    list(_A6) + [1.0, 1.0, 0.0],
])
#: y₁ = y₀ + Σ_j RODAS_B[j] k_j (= u₈ + k₈: the method is stiffly accurate).
RODAS_B = np.array(list(_A6) + [1.0, 1.0, 1.0])
#: The stage coupling C_ij (strictly lower triangular).
RODAS_C = np.array([
    [0.0] * 8,
    [-14.155112264123755, 0, 0, 0, 0, 0, 0, 0],
    [-17.97296035885952, -2.859693295451294, 0, 0, 0, 0, 0, 0],
    [147.12150275711716, -1.41221402718213, 71.68940251302358, 0, 0, 0, 0, 0],
    [165.43517024871676, -0.4592823456491126, 42.90938336958603, -5.961986721573306, 0, 0, 0, 0],
    [24.854864614690072, -3.0009227002832186, 47.4931110020768, 5.5814197821558125, -0.6610691825249471, 0, 0, 0],
    [30.91273214028599, -3.1208243349937974, 77.79954646070892, 34.28646028294783, -19.097331116725623,
     -28.087943162872662, 0, 0],
    [37.80277123390563, -3.2571969029072276, 112.26918849496327, 66.9347231244047, -40.06618937091002,
     -54.66780262877968, -9.48861652309627, 0],
], dtype=np.float64)
#: Dense output coefficients q_m = Σ_j RODAS_H[m, j] k_j, m = 1, 2, 3.
RODAS_H = np.array([
    [25.948786856663858, -2.5579724845846235, 10.433815404888879, -2.3679251022685204, 0.524948541321073,
     1.1241088310450404, 0.4272876194431874, -0.17202221070155493],
    [-9.91568850695171, -0.9689944594115154, 3.0438037242978453, -24.495224566215796, 20.176138334709044,
     15.98066361424651, -6.789040303419874, -6.710236069923372],
    [11.419903575922262, 2.8879645146136994, 72.92137995996029, 80.12511834622643, -52.072871366152654,
     -59.78993625266729, -0.15582684282751913, 4.883087185713722],
])
#: Order of the step (the embedded solution has order 4: the error estimate is O(h⁵)).
ORDER = 5

# -- step-size controller (the policy; the stepper above is separate) -----------------------------
SAFETY = 0.9
PI_ALPHA = 0.7 / ORDER  # exponent of the current error
PI_BETA = 0.4 / ORDER   # exponent of the previous accepted error
FAC_MIN = 0.2
FAC_MAX = 6.0
#: A step below H_MIN_REL·max(t, 1) that does not land on t_max cannot be told apart from t, or is a blow-up (weights
#: of 1e149, whose dynamics run on a time scale of about 1e-300): the run is reported as diverged. (The NDF, whose
#: first steps are of order 1, has a lower floor near t = 0: :func:`.flow_ndf._h_min`.)
H_MIN_REL = 1e-13
#: The reduced (d × d) solve is used while every |α ± βg| is at least this fraction of α.
REDUCED_MIN = 0.1

# -- solver state (``sstate``, float64) ----------------------------------------------------------
T_NOW = 0       # time of the current point
H_NEXT = 1      # proposed next step (0: not chosen yet)
ERR_PREV = 2    # error norm of the last accepted step (PI controller)
REJECTED_LAST = 3  # 1.0 if the last attempt was rejected
T_LAST = 4      # start time of the last accepted step (dense output)
H_LAST = 5      # its size (0: no step yet)
FAILED = 6      # 1.0: the step size underflowed
FLOOR_COUNT = 7  # points in a row at the loss's rounding floor without a FLOOR_GAIN fall (.flow_stop's stall rule)
FLOOR_REF = 8    # the train loss at the point that started that count
FLOOR_POINT = 9  # 1 + the accepted steps before the last point counted (0: none): each point counts once
N_SSTATE = 10
#: Length of ``sstate`` before the stall rule (0.6.0 development stores): those three entries read as 0.
N_SSTATE_BEFORE_STALL = 7

# -- counters (int64): STEPS_DONE and N_CROSSINGS as in .flow, then the solver's statistics -------
REJECTED = 2
N_RHS = 3
N_LU = 4
N_DENSE = 5
N_COUNTERS = 6


@njit(**INLINE_JIT_OPTIONS)
def _hmul(X, XT, H, mode, z, d, resid, out):
    """out = H z (H = XᵀX/n; in the data form through X): the products of :func:`.vec_ir._matvec_columns`, sums in
    registers."""
    if mode == MODE_DATA:
        n = X.shape[0]
        _matvec_columns(XT, z, d, resid)
        _matvec_columns(X, resid, n, out)
        for i in range(d):
            out[i] /= n
    else:
        _matvec_columns(H, z, d, out)


@njit(**LEAF_JIT_OPTIONS)
def _gradient_adaptive(X, XT, y, H, b, mode, theta, d, resid, grad):
    """∇L(θ) into ``grad`` for the adaptive schemes (also :mod:`.flow_rodas_gf`, :mod:`.flow_ndf`): the operations,
    and so the bits, of :func:`.flow._gradient` (``Hθ - b``, or ``Xᵀ(Xθ - y)/n`` in the data form), with its
    products by :func:`.vec_ir._matvec_columns` (2.4x faster at these unpadded sizes)."""
    if mode == MODE_DATA:
        n = X.shape[0]
        _matvec_columns(XT, theta, d, resid)
        for m in range(n):
            resid[m] -= y[m]
        _matvec_columns(X, resid, n, grad)
        for i in range(grad.shape[0]):
            grad[i] /= n
    else:
        _matvec_columns(H, theta, d, grad)
        for i in range(grad.shape[0]):
            grad[i] -= b[i]


@njit(**LEAF_JIT_OPTIONS)
def _rhs(X, XT, y, H, b, mode, inv_lam, Y, valid_p, valid_m, theta, g, resid, F):
    """F = f(Y) (all N_RK_ROWS rows of MGF(λ), ``inv_lam`` = 1/λ) and ∇L(θ(Y)) into ``g``."""
    d = Y.shape[1]
    for i in range(d):
        wp = Y[W_PLUS, i]
        wm = Y[W_MINUS, i]
        theta[i] = (wp * wp - wm * wm) * 0.25
    _gradient_adaptive(X, XT, y, H, b, mode, theta, d, resid, g)
    for i in range(d):
        gi = g[i]
        wp = Y[W_PLUS, i]
        wm = Y[W_MINUS, i]
        vp = Y[V_PLUS, i]
        vm = Y[V_MINUS, i]
        F[W_PLUS, i] = vp
        F[W_MINUS, i] = vm
        F[V_PLUS, i] = -(vp + gi * wp) * inv_lam
        F[V_MINUS, i] = -(vm - gi * wm) * inv_lam
        F[Q_INT, i] = gi - Y[Q_INT, i] * inv_lam
        F[P_INT, i] = gi
        F[G2_INT, i] = gi * gi
    # J± and K± in loops per sign, which vectorise with their divisions (the one loop over all rows stayed scalar)
    _jk_field_rows(inv_lam, Y[W_PLUS], Y[V_PLUS], Y[K_PLUS], valid_p, F[J_PLUS], F[K_PLUS])
    _jk_field_rows(inv_lam, Y[W_MINUS], Y[V_MINUS], Y[K_MINUS], valid_m, F[J_MINUS], F[K_MINUS])


@njit(**INLINE_JIT_OPTIONS)
def _jk_field_rows(inv_lam, w, v, k, valid, fj, fk):
    """The J and K rows of :func:`_rhs` for one sign: fj = (ẇ/w)² (0 once the coordinate has crossed), fk = fj - k/λ."""
    for i in range(w.shape[0]):
        r = v[i] / w[i]
        fj[i] = r * r if valid[i] else 0.0
    for i in range(w.shape[0]):
        fk[i] = fj[i] - k[i] * inv_lam


@njit(**LEAF_JIT_OPTIONS)
def _factor(X, H, lam, c, Y0, g0, ap, am, E, N, NT, piv, B2, B2T, piv2, M, MT):
    """Factorise the step's matrix (the factors into ``N`` and ``NT``, ``M`` and ``MT`` or ``B2``, ``B2T``).

    Returns 3 (the reduced d × d matrix, symmetric positive definite: Cholesky; the usual case), 4 (the same in the
    Woodbury form, the n × n ``M`` by Cholesky: d ≥ 3n, :mod:`.woodbury`), 1 (the reduced matrix by LU: some α ± βg
    < 0), 2 (the dense 2d × 2d matrix by LU: some |α ± βg| small) or 0 (singular).
    """
    d = Y0.shape[1]
    alpha = lam + c
    beta = c * c
    reduced = True
    for i in range(d):
        ap[i] = alpha + beta * g0[i]
        am[i] = alpha - beta * g0[i]
        if not (abs(ap[i]) >= REDUCED_MIN * alpha and abs(am[i]) >= REDUCED_MIN * alpha):
            reduced = False
    hb = 0.5 * beta
    if reduced:  # from here ap, am hold the reciprocals 1/(α ± βg) (the solves multiply by them)
        positive = True
        for i in range(d):
            positive = positive and ap[i] > 0.0 and am[i] > 0.0
            ap[i] = 1.0 / ap[i]
            am[i] = 1.0 / am[i]
            wp = Y0[W_PLUS, i]
            wm = Y0[W_MINUS, i]
            E[i] = wp * wp * ap[i] + wm * wm * am[i]
            positive = positive and E[i] > 0.0
        if positive and _use_woodbury(X.shape[0], d):  # (I + β/2 E H)⁻¹ through M = (2n/β)I + X E Xᵀ: E stays
            if _woodbury_factor(X, E, hb, M, MT):
                return 4
        elif positive:
            # E > 0: (I + β/2 E H) z = t is (E⁻¹ + β/2 H) z = E⁻¹t, symmetric positive definite (H is)
            for i in range(d):
                for j in range(i, d):
                    N[i, j] = hb * H[i, j]
                N[i, i] += 1.0 / E[i]
            if _cholesky(N, NT):
                for i in range(d):
                    E[i] = 1.0 / E[i]  # (the solve multiplies by E⁻¹)
                return 3
        for i in range(d):
            s = hb * E[i]
            for j in range(d):
                N[i, j] = s * H[i, j]
            N[i, i] += 1.0
        if not _lu(N, piv):
            return 0
        _lu_transpose(N, NT)
        return 1
    for i in range(d):
        wpi = Y0[W_PLUS, i]
        wmi = Y0[W_MINUS, i]
        for j in range(d):
            hij = hb * H[i, j]
            wpj = Y0[W_PLUS, j]
            wmj = Y0[W_MINUS, j]
            B2[i, j] = hij * wpi * wpj
            B2[i, d + j] = -hij * wpi * wmj
            B2[d + i, j] = -hij * wmi * wpj
            B2[d + i, d + j] = hij * wmi * wmj
        B2[i, i] += ap[i]
        B2[d + i, d + i] += am[i]
    if not _lu(B2, piv2):
        return 0
    _lu_transpose(B2, B2T)
    return 2


@njit(**INLINE_JIT_OPTIONS)
def _solve_w(X, XT, H, mode, how, beta, Y0, ap, am, E, factors, sp, sm, xp, xm, t, hz, resid, rhs2):
    """x = (αI + βM)⁻¹ s for the factorisation ``how`` of :func:`_factor` (s = (sp, sm), x = (xp, xm)).

    On return ``hz`` holds H Uᵀx (the reduced solve has it already; the dense one computes it). ``factors``: (N, NT,
    piv, B2T, piv2, M, MT) of :func:`_factor`, one argument (CPython makes a call of over 30 arguments ``*args``,
    which Numba's inliner refuses).
    """
    N, NT, piv, B2T, piv2, M, MT = factors
    d = Y0.shape[1]
    if how == 1 or how == 3 or how == 4:
        for i in range(d):
            t[i] = Y0[W_PLUS, i] * sp[i] * ap[i] - Y0[W_MINUS, i] * sm[i] * am[i]
        if how == 3:
            for i in range(d):
                t[i] *= E[i]
            _cholesky_solve(N, NT, t)
        elif how == 4:
            _woodbury_solve_eh(X, E, M, MT, t, resid)  # (resid: free until _hmul below)
        else:
            _lu_solve(NT, piv, t)
        _hmul(X, XT, H, mode, t, d, resid, hz)
        hb = 0.5 * beta
        for i in range(d):
            xp[i] = (sp[i] - hb * Y0[W_PLUS, i] * hz[i]) * ap[i]
            xm[i] = (sm[i] + hb * Y0[W_MINUS, i] * hz[i]) * am[i]
    else:
        for i in range(d):
            rhs2[i] = sp[i]
            rhs2[d + i] = sm[i]
        _lu_solve(B2T, piv2, rhs2)
        for i in range(d):
            xp[i] = rhs2[i]
            xm[i] = rhs2[d + i]
            t[i] = Y0[W_PLUS, i] * xp[i] - Y0[W_MINUS, i] * xm[i]
        _hmul(X, XT, H, mode, t, d, resid, hz)


@njit(**INLINE_JIT_OPTIONS)
def _solve(X, XT, H, mode, lam, inv_lam, c, how, Y0, g0, valid_p, valid_m, jrow, ap, am, E, factors, R, Kout, sp, sm,
           t, hz, hw, resid, rhs2):
    """Kout = (I - cA)⁻¹ R with A the exact Jacobian of :func:`_rhs` at ``Y0`` (module docstring); ``jrow`` the
    step's coefficients of the J± rows (:func:`_j_rows`)."""
    d = Y0.shape[1]
    beta = c * c
    # s = λ r_v - c M r_w, with M r_w = diag(g, -g) r_w + ½ U H (Uᵀ r_w)
    for i in range(d):
        t[i] = Y0[W_PLUS, i] * R[W_PLUS, i] - Y0[W_MINUS, i] * R[W_MINUS, i]
    _hmul(X, XT, H, mode, t, d, resid, hw)
    for i in range(d):
        mp = g0[i] * R[W_PLUS, i] + 0.5 * Y0[W_PLUS, i] * hw[i]
        mm = -g0[i] * R[W_MINUS, i] - 0.5 * Y0[W_MINUS, i] * hw[i]
        sp[i] = lam * R[V_PLUS, i] - c * mp
        sm[i] = lam * R[V_MINUS, i] - c * mm
    _solve_w(X, XT, H, mode, how, beta, Y0, ap, am, E, factors, sp, sm, Kout[V_PLUS], Kout[V_MINUS], t, hz, resid,
             rhs2)
    # x_w = r_w + c x_v, then the integral rows: their exact Jacobian rows applied to the solved w and ẇ parts,
    # through H δθ = ½ H Uᵀx_w = ½(H Uᵀr_w + c H Uᵀx_v) (both at hand), into ``t`` (free after the solve). A few rows
    # a loop, so that each vectorises: LLVM left one loop over all eleven rows scalar (too many arrays for its run-time
    # overlap checks; that loop alone took 250 ns, these 80 ns)
    damp = 1.0 / (1.0 + c * inv_lam)
    xwp, xwm, xvp, xvm, rwp, rwm = Kout[W_PLUS], Kout[W_MINUS], Kout[V_PLUS], Kout[V_MINUS], R[W_PLUS], R[W_MINUS]
    for i in range(d):
        xwp[i] = rwp[i] + c * xvp[i]
        xwm[i] = rwm[i] + c * xvm[i]
        t[i] = 0.5 * (hw[i] + c * hz[i])
    kp, rp, kg, rg, kq, rq = Kout[P_INT], R[P_INT], Kout[G2_INT], R[G2_INT], Kout[Q_INT], R[Q_INT]
    for i in range(d):
        kp[i] = rp[i] + c * t[i]
        kg[i] = rg[i] + c * (2.0 * g0[i] * t[i])
        kq[i] = (rq[i] + c * t[i]) * damp
    _jk_solve_rows(damp, jrow[0], jrow[1], xvp, xwp, valid_p, R[J_PLUS], R[K_PLUS], Kout[J_PLUS], Kout[K_PLUS])
    _jk_solve_rows(damp, jrow[2], jrow[3], xvm, xwm, valid_m, R[J_MINUS], R[K_MINUS], Kout[J_MINUS], Kout[K_MINUS])


@njit(**INLINE_JIT_OPTIONS)
def _jk_solve_rows(damp, j0, j1, xv, xw, valid, rj, rk, kj, kk):
    """The J and K rows of :func:`_solve` for one sign (``j0``, ``j1``: its rows of :func:`_j_rows`): kj = rj + j,
    kk = (rk + j)·damp, j = j0·(x_v - j1·x_w) (for every coordinate, then 0 selected for a crossed one: no branches)."""
    for i in range(xv.shape[0]):
        j = j0[i] * (xv[i] - j1[i] * xw[i])
        j = j if valid[i] else 0.0
        kj[i] = rj[i] + j
        kk[i] = (rk[i] + j) * damp


@njit(**INLINE_JIT_OPTIONS)
def _j_rows(c, Y0, valid_p, valid_m, jrow):
    """The step's coefficients of the J± rows of (I - cA)x = r (:func:`_solve`): the exact Jacobian row of
    (ẇ/w)² applied to (x_w, x_v) is (2ẇ/w²)(x_v - (ẇ/w)x_w), so ``jrow`` holds c·2ẇ₊/w₊², ẇ₊/w₊, c·2ẇ₋/w₋²,
    ẇ₋/w₋ at ``Y0`` (rows 0-3; 0 for a crossed coordinate). Once per step: the eight stage solves share them and
    divide no more."""
    d = Y0.shape[1]
    for i in range(d):
        jrow[0, i] = 0.0
        jrow[1, i] = 0.0
        jrow[2, i] = 0.0
        jrow[3, i] = 0.0
        if valid_p[i]:
            wp = Y0[W_PLUS, i]
            vp = Y0[V_PLUS, i]
            jrow[0, i] = c * (2.0 * vp / (wp * wp))
            jrow[1, i] = vp / wp
        if valid_m[i]:
            wm = Y0[W_MINUS, i]
            vm = Y0[V_MINUS, i]
            jrow[2, i] = c * (2.0 * vm / (wm * wm))
            jrow[3, i] = vm / wm


@njit(**INLINE_JIT_OPTIONS)
def _stage_point(s, inv_h, Y0, K, U, R):
    """Stage s ≥ 1 of the method: u_s = y₀ + Σ_j a_sj k_j into ``U`` and Σ_j C_sj k_j/h into ``R`` (rows of
    shape (rows, d); ``K`` the stages, (N_STAGES, rows, d)). Shared by both systems' steps (:mod:`.flow_rodas_gf`).

    Each element receives its terms in the order j = 0, 1, ..., s-1; the passes take four stages at a time
    (:func:`_add_stages`), which keeps the sums of the one-stage-a-pass loop, bit for bit, with a quarter of
    the loads and stores of ``U`` and ``R``.
    """
    rows, d = Y0.shape
    for r in range(rows):
        for q in range(d):
            U[r, q] = Y0[r, q]
            R[r, q] = 0.0
    j = 0
    while j < s:
        _add_stages(j, min(s - j, 4), RODAS_A[s], RODAS_C[s], inv_h, K, U, R)
        j += 4


@njit(**INLINE_JIT_OPTIONS)
def _add_stages(j, count, a, cc, inv_h, K, U, R):
    """U += Σ a_i k_i and R += Σ (cc_i/h) k_i over the ``count`` (1 to 4) stages i = j, j+1, ..., in that order for
    each element, in one pass over the elements."""
    rows, d = U.shape
    if count == 4:
        a0, a1, a2, a3 = a[j], a[j + 1], a[j + 2], a[j + 3]
        c0, c1, c2, c3 = cc[j] * inv_h, cc[j + 1] * inv_h, cc[j + 2] * inv_h, cc[j + 3] * inv_h
        for r in range(rows):
            k0 = K[j, r]
            k1 = K[j + 1, r]
            k2 = K[j + 2, r]
            k3 = K[j + 3, r]
            u = U[r]
            rr = R[r]
            for q in range(d):
                u[q] = (((u[q] + a0 * k0[q]) + a1 * k1[q]) + a2 * k2[q]) + a3 * k3[q]
                rr[q] = (((rr[q] + c0 * k0[q]) + c1 * k1[q]) + c2 * k2[q]) + c3 * k3[q]
    elif count == 3:
        a0, a1, a2 = a[j], a[j + 1], a[j + 2]
        c0, c1, c2 = cc[j] * inv_h, cc[j + 1] * inv_h, cc[j + 2] * inv_h
        for r in range(rows):
            k0 = K[j, r]
            k1 = K[j + 1, r]
            k2 = K[j + 2, r]
            u = U[r]
            rr = R[r]
            for q in range(d):
                u[q] = ((u[q] + a0 * k0[q]) + a1 * k1[q]) + a2 * k2[q]
                rr[q] = ((rr[q] + c0 * k0[q]) + c1 * k1[q]) + c2 * k2[q]
    elif count == 2:
        a0, a1 = a[j], a[j + 1]
        c0, c1 = cc[j] * inv_h, cc[j + 1] * inv_h
        for r in range(rows):
            k0 = K[j, r]
            k1 = K[j + 1, r]
            u = U[r]
            rr = R[r]
            for q in range(d):
                u[q] = (u[q] + a0 * k0[q]) + a1 * k1[q]
                rr[q] = (rr[q] + c0 * k0[q]) + c1 * k1[q]
    else:
        a0 = a[j]
        c0 = cc[j] * inv_h
        for r in range(rows):
            k0 = K[j, r]
            u = U[r]
            rr = R[r]
            for q in range(d):
                u[q] = u[q] + a0 * k0[q]
                rr[q] = rr[q] + c0 * k0[q]


@njit(**INLINE_JIT_OPTIONS)
def _stage_right_side(c, F, R, add):
    """The right side of a stage's system, r = c(f(u_s) + Σ_j C_sj k_j/h), into ``R`` (which holds the sum when ``add``;
    stage 1 has none: r = c·f(y₀)). Rows as :func:`_stage_point`; shared by both systems' steps."""
    rows, d = F.shape
    for r in range(rows):
        for q in range(d):
            R[r, q] = c * (F[r, q] + R[r, q]) if add else c * F[r, q]


@njit(**INLINE_JIT_OPTIONS)
def _step_end(Y0, K, Y1):
    """y₁ = y₀ + Σ_j b_j k_j (rows as :func:`_stage_point`; j increasing, four stages a pass as there)."""
    rows, d = Y0.shape
    for r in range(rows):
        for q in range(d):
            Y1[r, q] = Y0[r, q]
    for j in range(0, N_STAGES, 4):
        b0, b1, b2, b3 = RODAS_B[j], RODAS_B[j + 1], RODAS_B[j + 2], RODAS_B[j + 3]
        for r in range(rows):
            k0 = K[j, r]
            k1 = K[j + 1, r]
            k2 = K[j + 2, r]
            k3 = K[j + 3, r]
            y1 = Y1[r]
            for q in range(d):
                y1[q] = (((y1[q] + b0 * k0[q]) + b1 * k1[q]) + b2 * k2[q]) + b3 * k3[q]


@njit(**LEAF_JIT_OPTIONS)
def _attempt(X, XT, y, H, b, mode, lam, inv_lam, h, Y0, F0, g0, valid_p, valid_m, ws, Kst, Y1, flat, counters):
    """One Rodas5P step of size ``h`` from ``Y0`` (``F0 = f(Y0)``, ``g0 = ∇L``) into ``Y1`` and ``Kst``.

    Returns the factorisation used (1 to 4, :func:`_factor`) or 0 if the matrix was singular. ``ws`` is the work
    record of :func:`_workspace`; ``flat`` = (Y0, F0, Kst, Y1) seen as one row of all their elements
    (:func:`_flat_rows`, :func:`_flat_stages`), as ``ws`` ends with U, F, R: the stage sums, the right sides and the
    step end take all the rows in one pass there (a pass per row of d = 30 elements paid a loop's setup and scalar
    tail eleven times: 2.5 against 1.9 µs a step, measured).
    """
    (ap, am, E, N, NT, piv, B2, B2T, piv2, U, F, R, sp, sm, t, hz, hw, resid, rhs2, theta, g, jrow, Uf, Ff, Rf, M,
     MT) = ws
    Y0f, F0f, Kf, Y1f = flat
    c = h * GAMMA
    how = _factor(X, H, lam, c, Y0, g0, ap, am, E, N, NT, piv, B2, B2T, piv2, M, MT)
    factors = (N, NT, piv, B2T, piv2, M, MT)
    counters[N_LU] += 1
    if how == 2:
        counters[N_DENSE] += 1
    if how == 0:
        return 0
    inv_h = 1.0 / h
    _j_rows(c, Y0, valid_p, valid_m, jrow)
    for s in range(N_STAGES):
        if s == 0:
            _stage_right_side(c, F0f, Rf, False)
        else:
            _stage_point(s, inv_h, Y0f, Kf, Uf, Rf)
            _rhs(X, XT, y, H, b, mode, inv_lam, U, valid_p, valid_m, theta, g, resid, F)
            counters[N_RHS] += 1
            _stage_right_side(c, Ff, Rf, True)
        _solve(X, XT, H, mode, lam, inv_lam, c, how, Y0, g0, valid_p, valid_m, jrow, ap, am, E, factors, R, Kst[s], sp,
               sm, t, hz, hw, resid, rhs2)
    _step_end(Y0f, Kf, Y1f)
    return how


@njit(**LEAF_JIT_OPTIONS)
def _error_norm(lam, Y0, Y1, Kst, rtol, atol):
    """Weighted RMS norm of the error estimate k₈ over the controlled rows (module docstring); NaN when the new
    point is not finite or overflows."""
    total, count = _error_sums(lam, Y0, Y1, Kst, N_STAGES - 1, rtol, atol)
    return np.sqrt(total / count)


@njit(**LEAF_JIT_OPTIONS)
def _error_sums(lam, Y0, Y1, K, j, rtol, atol):
    """(Σ (e/sc)², terms) of the error estimate ``e = K[j]`` over the controlled rows, NaN when the new point is
    not finite or overflows: the one definition of the error weights (also :mod:`.flow_dop853`'s). The velocity rows
    are weighted as what they do to w: an error δẇ relaxes in a time λ and moves w by about λ·δẇ, so it is measured
    as λ·δẇ against the weight of its w (at small λ, ẇ is slaved to -∇F(w) and needs no more accuracy than w)."""
    d = Y0.shape[1]
    total = 0.0
    count = 0
    for r in (W_PLUS, W_MINUS, P_INT, Q_INT, G2_INT):
        # P, Q and G₂ enter the theory as exponents (α± = w±e^{±P}, Δ∞ ≈ Δ₀e^{-2λG₂}): an absolute error
        # rtol in them is a relative error rtol in what they give, so they are measured against max(|y|, 1)
        floor = 0.0 if r <= W_MINUS else 1.0
        for i in range(d):
            y1 = Y1[r, i]
            if r <= W_MINUS and not (abs(y1) < OVERFLOW):
                return np.nan, 1
            sc = atol + rtol * max(max(abs(Y0[r, i]), abs(y1)), floor)
            e = K[j, r, i] / sc
            total += e * e
            count += 1
    for k in range(2):
        r = V_PLUS + k
        rw = W_PLUS + k
        for i in range(d):
            v1 = Y1[r, i]
            if not (abs(v1) < OVERFLOW):
                return np.nan, 1
            big = max(max(abs(Y0[rw, i]), abs(Y1[rw, i])), lam * max(abs(Y0[r, i]), abs(v1)))
            e = lam * K[j, r, i] / (atol + rtol * big)
            total += e * e
            count += 1
    return total, count


@njit(**JIT_OPTIONS)
def _flat_rows(rows):
    """The rows (rows, d) seen as one row of all their elements, (1, rows·d): the same memory (the element-wise
    stage passes of :func:`_attempt` run over it)."""
    return rows.reshape(1, rows.size)


@njit(**JIT_OPTIONS)
def _flat_stages(K):
    """The stages (stages, rows, d) seen as (stages, 1, rows·d), as :func:`_flat_rows`."""
    return K.reshape(K.shape[0], 1, K.shape[1] * K.shape[2])


@njit(**JIT_OPTIONS)
def _workspace(n, d):
    """The work arrays of :func:`_attempt` (its first line names them), for ``n`` samples and ``d`` coordinates."""
    vec = (np.zeros(d), np.zeros(d), np.zeros(d))
    mats = (np.zeros((d, d)), np.zeros((d, d)), np.zeros(d, dtype=np.int64),
            np.zeros((2 * d, 2 * d)), np.zeros((2 * d, 2 * d)), np.zeros(2 * d, dtype=np.int64))
    rows = (np.zeros((N_RK_ROWS, d)), np.zeros((N_RK_ROWS, d)), np.zeros((N_RK_ROWS, d)))
    tail = (np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(d), np.zeros(max(n, 1)), np.zeros(2 * d),
            np.zeros(d), np.zeros(d), np.zeros((4, d)))
    flat = (_flat_rows(rows[0]), _flat_rows(rows[1]), _flat_rows(rows[2]))  # U, F, R seen flat
    return vec + mats + rows + tail + flat + _woodbury_matrices(n, d)  # (M, MT last: flow_dop853 reads ws[9..22])
