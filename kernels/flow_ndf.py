r"""Gradient flow by a variable-order NDF with Jacobian and factorisation reuse (``scheme="ndf"``): long horizons.

Why this method
---------------
Gradient flow to train loss 1e-20 (t ~ 3e5) is a few thousand steps of a smooth, stiff, *non-oscillatory* system:
in its mirror coordinate P = ∫∇L (:mod:`.flow_rodas_gf`) the Jacobian is :math:`-H\Sigma`, similar to the
symmetric negative semi-definite :math:`-\Sigma^{1/2}H\Sigma^{1/2}`, so every mode is a real decay. On that class
the backward-difference family is stable at every order it uses, and a multistep method needs about two
right-hand sides a step and one factorisation every several steps, where Rodas5P (:mod:`.flow_rodas`) needs
seven right-hand sides, eight solves and a factorisation every step. This is SciPy's ``BDF``
(``scipy/integrate/_ivp/bdf.py``): the NDF of Shampine and Reichelt, orders 1-5, a backward-difference array and
its step and order rules, with four changes: the Newton convergence test is CVODE's (the convergence rate
carried across steps, so one iteration suffices when the rate is known to be small); a change of step size by a
factor under ``MIN_CHANGE`` is not made (CVODE's ``THRESH``, below); the Jacobian is taken anew
with every factorisation and at least every ``MAX_LU_AGE`` steps (CVODE's rule; SciPy keeps it until Newton
fails, but here it costs only d exponentials, and with the one-iteration test a Jacobian kept while the weights
grow by orders of magnitude let BDF5 accept unsolved steps and go unstable, at α = 1e-150); and the error
weights are those of the Rodas scheme, so ``rtol``/``atol`` weigh errors alike in both (:mod:`.flow_rodas_gf`;
a multistep method's global error is larger at the same tolerances, so the NDF's default tolerances are tighter:
:data:`~dlnmomentum.runs.stepping.DEFAULT_RTOL_NDF`).
MGF(λ > 0) keeps Rodas5P: its momentum modes are oscillatory, where BDF of order > 2 is not A-stable (SciPy's BDF
with the analytic Jacobian took 3.5 times LSODA's time on MGF(0.05) to train loss 1e-20, 2026-11-29:
``benchmarks/README.md``, "Long horizons").
The measurements that chose it, on the paper's problem to train loss 1e-20: ``benchmarks/README.md``, "Long
horizons" (``benchmarks/experiment_gf_multistep.py`` for the coordinates and Newton tests tried).

Method (coefficients as data: ``KAPPA``, ``GAMMA_SUM``, ``ALPHA_NDF``, ``ERROR_CONST``)
--------------------------------------------------------------------------------------
State y = (P, G₂) with :math:`\dot P = g(P)`, :math:`\dot G_2 = g\odot g`, g = ∇L(θ(P)),
θ(P) = ¼(w₊(0)²e^{-2P} − w₋(0)²e^{2P}). With the backward differences :math:`D_j` (``D[j]``, rows P and G₂) of
the accepted points at spacing h, the step of order k solves

.. math::

    \alpha_k\,d + \sum_{j=1}^{k}\gamma_j D_j = h\,f\big(y^{(0)} + d\big),\qquad y_{n+1} = y^{(0)} + d,
    \quad\text{i.e.}\quad d - c\,f\big(y^{(0)} + d\big) + \psi = 0,

with the predictor :math:`y^{(0)} = \sum_{j\le k} D_j`, :math:`\psi = \sum_{j=1}^k\gamma_j D_j/\alpha_k`,
:math:`c = h/\alpha_k`, :math:`\alpha_k = (1-\kappa_k)\gamma_k`, :math:`\gamma_k = \sum_{j\le k} 1/j` and
Shampine-Reichelt's κ (0 at order 5: BDF5). The P rows are solved by Newton's method with the matrix
:math:`I + cH\Sigma_J` (Σ = diag((w₊² + w₋²)/2) at the Jacobian's point P_J; :func:`.flow_rodas_gf._factor_mirror`:
a Cholesky factorisation of :math:`\Sigma_J^{-1} + cH`, or where d ≥ 3n of the n × n matrix of its Woodbury form,
:mod:`.woodbury`); the G₂ rows are a quadrature, explicit once P is:
:math:`d_G = c\,g(P_{n+1})^{\odot 2} - \psi_G`. The local error estimate is :math:`\text{ERROR\_CONST}_k\,d`; after
k + 1 steps of equal size the order moves by at most one and the step by a factor in [``MIN_FACTOR``,
``MAX_FACTOR``] (SciPy's rule, from the error estimates of orders k − 1, k, k + 1), unless that factor is under
``MIN_CHANGE``: then the step size and order stay and the choice is made again two steps later (CVODE's rule; SciPy
changes h, and so c and the factorisation, for any factor). Measured on the paper's problem to train loss 1e-20 at
the default tolerances (2026-11-27): 2 036 steps, 4 438 right-hand sides and 129 factorisations against 1 741,
4 467 and 298 (a matrix kept at the same c lets Newton converge in 1.2 iterations a step instead of 1.6), and θ
along the way (at t = 2, 5, 10, 20, 50, 200, 2000, against SciPy's Radau at rtol 1e-13) within 3.9e-10 against
8.2e-10 (now 2 033 steps, and 5.5e-10 at every 0.25 to t = 10, then to 2000: ``DEFAULT_RTOL_NDF``).
The dense output of the last step is the interpolating polynomial of the difference array (SciPy's ``BdfDenseOutput``,
:mod:`.ndf_dense`):
:math:`y(t_n + s) = D_0 + \sum_{j=1}^k D_j\prod_{i<j}(s + ih)/((i+1)h)`, s ∈ [−h, 0].

Newton's iteration and the Jacobian
-----------------------------------
Iterates :math:`\delta = M^{-1}(c f(y) - \psi - d)`, :math:`d \mathrel{+}= \delta`, with the rate
:math:`\rho = \max(0.3\rho, \|\delta_m\|/\|\delta_{m-1}\|)` carried from step to step (1 after a new
factorisation), converged when :math:`\|\delta\|\min(1, \rho) \le` ``NEWTON_TOL`` (CVODE's test; SciPy's needs two
iterations a step to measure a rate). At most ``NEWTON_MAXITER`` iterations. A new matrix (the step size or order
changed, or ``MAX_LU_AGE`` steps passed) takes the Jacobian at the step's predicted point; a failure with an
older Jacobian takes a new one there, a failure with a fresh one halves the step. Norms are the weighted RMS over the
P rows with weights ``atol + rtol·max(|y⁽⁰⁾|, 1)``; the error norm is over P and G₂ with ``atol + rtol·max(|y|, 1)``.

State (everything a run needs to continue bit for bit)
------------------------------------------------------
``D`` (``N_D_ROWS``, 2, d), ``p_jac`` (the Jacobian's point P_J) and ``sstate``: the indices shared with
:mod:`.flow_rodas` (``T_NOW``, ``H_NEXT`` (here the current step size), ``T_LAST``, ``H_LAST``, ``FAILED``, the stall
rule's ``FLOOR_*``) and ``ORDER_NOW``, ``N_EQUAL``, ``CRATE``, ``LU_C`` (c of the current factorisation, 0: none),
``LU_AGE`` (accepted steps since it). After a step D[0] is set to the new point y itself (the update of the
differences gives it up to a rounding), so the state rows, records and the next step read one point.
The factorisation itself is not state: it is a function of (P_J, c), rebuilt bit for bit where a call starts
(without counting it), and so is ∇L at the current point, which the search for turns inside the next step reads;
so chunks and resumes change no bit and no count. After each accepted step the flow rows
of ``fstate`` (w±, ẇ±, P, G₂, J± = G₂, running min of Δ and max of w², the latter also at the turns of P inside
the step: :func:`.ndf_dense._turn_peaks`) are filled from (P, G₂) as :mod:`.flow_rodas_run` does, so results, stores and
theory read the same rows for every scheme.
"""

import numpy as np
from numba import njit

from .config import INLINE_JIT_OPTIONS, JIT_OPTIONS, LEAF_JIT_OPTIONS, OVERFLOW
from .flow import G2_INT, MAX_W2, MIN_DELTA, P_INT, STEPS_DONE
from .flow_rodas import (
    FAILED,
    H_LAST,
    H_MIN_REL,
    H_NEXT,
    N_LU,
    N_RHS,
    N_SSTATE,
    REJECTED,
    T_LAST,
    T_NOW,
    _gradient_adaptive,
)
from .flow_rodas_gf import MIRROR_G2, MIRROR_P, N_MIRROR_ROWS, _factor_mirror, _solve_p_rows, _weights
from .flow_rodas_run import _mirror_point, _record_mirror, _valid_for_j
from .flow_schedule import BLOCK_FULL, _initial_point_owed, _no_row_for_next_step, _owed_row, _step_of_record
from .flow_stop import _data_bounds, _stop_before_step
from .ndf_dense import MAX_ORDER, _dense_p, _turn_peaks
from .status import DIVERGED, RUNNING
from .woodbury import _woodbury_matrices

# -- the NDF (Shampine & Reichelt 1997), as SciPy's BDF (MAX_ORDER: .ndf_dense) ----------------
#: κ_k of the NDF of order k (Shampine & Reichelt; κ₅ = 0: BDF5).
KAPPA = np.array([0.0, -0.1850, -1.0 / 9.0, -0.0823, -0.0415, 0.0])
#: γ_k = Σ_{j≤k} 1/j.
GAMMA_SUM = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, MAX_ORDER + 1))])
#: α_k = (1 − κ_k)γ_k: c = h/α_k.
ALPHA_NDF = (1.0 - KAPPA) * GAMMA_SUM
#: The local error of order k is ERROR_CONST[k]·d.
ERROR_CONST = KAPPA * GAMMA_SUM + 1.0 / np.arange(1, MAX_ORDER + 2)
#: Rows of the difference array: orders up to MAX_ORDER, and the two the order change reads.
N_D_ROWS = MAX_ORDER + 3
NEWTON_MAXITER = 4
#: CVODE-like convergence test: ‖δ‖·min(1, ρ) under this (weighted RMS, error weights).
NEWTON_TOL = 0.1
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
#: A step-size change by a factor under this is not made (CVODE's THRESH).
MIN_CHANGE = 1.5

# -- solver state: the entries of flow_rodas's sstate that mean the same here, then the NDF's own ----
ORDER_NOW = N_SSTATE     # the order k of the next step
N_EQUAL = N_SSTATE + 1   # accepted steps since the last change of step size or order
CRATE = N_SSTATE + 2     # Newton's convergence rate ρ
LU_C = N_SSTATE + 3      # c = h/α_k of the current factorisation (0: none)
LU_AGE = N_SSTATE + 4    # accepted steps since that factorisation
N_NDF_SSTATE = N_SSTATE + 5
#: A factorisation (and its Jacobian) is renewed after this many accepted steps at most (CVODE's MSBP).
MAX_LU_AGE = 20


@njit(**LEAF_JIT_OPTIONS)
def _change_D(D, order, factor, R, U, RU, tmp):
    """Rescale the difference array to the step h·factor (SciPy's ``change_D``): D[:k+1] ← (RU)ᵀD[:k+1], with
    R, U of :func:`_compute_R` at ``factor`` and 1. The polynomial it represents does not change."""
    _compute_R(order, factor, R)
    _compute_R(order, 1.0, U)
    k1 = order + 1
    for i in range(k1):
        for j in range(k1):
            s = 0.0
            for q in range(k1):
                s += R[i, q] * U[q, j]
            RU[i, j] = s
    rows, d = D.shape[1], D.shape[2]
    for i in range(k1):
        for r in range(rows):
            for q in range(d):
                tmp[i, r, q] = 0.0
        for k in range(k1):
            c = RU[k, i]
            for r in range(rows):
                for q in range(d):
                    tmp[i, r, q] += c * D[k, r, q]
    for i in range(k1):
        for r in range(rows):
            for q in range(d):
                D[i, r, q] = tmp[i, r, q]


@njit(**LEAF_JIT_OPTIONS)
def _compute_R(order, factor, M):
    """SciPy's ``compute_R``: M[i, j] = Π_{m=1}^{i} (m − 1 − factor·j)/m, M[0, :] = 1 (orders up to ``order``)."""
    for j in range(order + 1):
        M[0, j] = 1.0
    for i in range(1, order + 1):
        M[i, 0] = 0.0
        for j in range(1, order + 1):
            M[i, j] = M[i - 1, j] * (i - 1 - factor * j) / i


@njit(**LEAF_JIT_OPTIONS)
def _vector_field(X, XT, y, H, b, mode, w_init, P, wp, wm, theta, g, resid):
    """g = ∇L(θ(P)) into ``g`` (w± into ``wp``, ``wm``); False if a weight overflows or g is not finite."""
    d = P.shape[0]
    _weights(w_init, P, wp, wm)
    for i in range(d):
        if not (abs(wp[i]) < OVERFLOW and abs(wm[i]) < OVERFLOW):
            return False
        theta[i] = (wp[i] * wp[i] - wm[i] * wm[i]) * 0.25
    _gradient_adaptive(X, XT, y, H, b, mode, theta, d, resid, g)
    for i in range(d):
        if not (abs(g[i]) < np.inf):
            return False
    return True


@njit(**LEAF_JIT_OPTIONS)
def _rms(v, coef, scale):
    """Weighted RMS of coef·v over every entry of the rows ``v`` (shape (rows, d), as ``scale``), row by row.

    (Loops over both indices rather than over ``ravel()`` views: a view made in the step loop costs an atomic
    reference count and a reshape call: with the loop's other views, a tenth of a gradient-flow run's time before
    2026-11-27; the same sums.)"""
    s = 0.0
    for r in range(v.shape[0]):
        for q in range(v.shape[1]):
            e = coef * v[r, q] / scale[r, q]
            s += e * e
    return np.sqrt(s / (v.shape[0] * v.shape[1]))


@njit(**LEAF_JIT_OPTIONS)
def _rms_vector(v, coef, scale):
    """Weighted RMS of coef·v over the vector ``v`` (the P rows' Newton corrections)."""
    s = 0.0
    for q in range(v.shape[0]):
        e = coef * v[q] / scale[q]
        s += e * e
    return np.sqrt(s / v.shape[0])


@njit(**LEAF_JIT_OPTIONS)
def _error_weights(Y, rtol, atol, scale):
    """scale = atol + rtol·max(|Y|, 1), the weights of every norm of the method (Rodas's, :mod:`.flow_rodas_gf`)."""
    for r in range(Y.shape[0]):
        for q in range(Y.shape[1]):
            scale[r, q] = atol + rtol * max(abs(Y[r, q]), 1.0)


#: The NDF's smallest step near t = 0 (:func:`_h_min`).
H_MIN_ABS = 1e-300


@njit(**INLINE_JIT_OPTIONS)
def _h_min(t):
    """The smallest step of the NDF at time t ≥ 0, max(H_MIN_REL·t, H_MIN_ABS): a shorter one that does not land on
    t_max ends the run as diverged. Rodas5P's floor, H_MIN_REL·max(t, 1), was the NDF's until 2026-11-29: at order 1
    its first steps on data scaled by 1e3 are under 1e-14 (the G₂ row, whose rate g⊙g is 1e6 times the unscaled
    data's, sets them), and it ended "diverged" at t = 0 where Rodas5P, of order 5 from its first step, ran.
    Rodas5P keeps its floor: MGF from weights of 1e149, which it ends "diverged" at t = 0, ran for more than five
    minutes with this one."""
    return max(H_MIN_REL * t, H_MIN_ABS)


@njit(**LEAF_JIT_OPTIONS)
def _initial_step(X, XT, y, H, b, mode, w_init, Y0, F0, rtol, atol, t_max, ws):
    """Hairer's starting step for order 1 (SciPy's ``select_initial_step``) in the error weights, capped by t_max."""
    (wp, wm, theta, g, resid, Y1, F1, scale) = ws
    d = Y0.shape[1]
    _error_weights(Y0, rtol, atol, scale)
    d0 = _rms(Y0, 1.0, scale)
    d1 = _rms(F0, 1.0, scale)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    h0 = min(h0, t_max)
    for r in range(N_MIRROR_ROWS):
        for q in range(d):
            Y1[r, q] = Y0[r, q] + h0 * F0[r, q]
    if not _vector_field(X, XT, y, H, b, mode, w_init, Y1[MIRROR_P], wp, wm, theta, g, resid):
        return max(h0 * 1e-3, 10.0 * H_MIN_REL)
    for q in range(d):
        F1[MIRROR_P, q] = g[q] - F0[MIRROR_P, q]
        F1[MIRROR_G2, q] = g[q] * g[q] - F0[MIRROR_G2, q]
    d2 = _rms(F1, 1.0, scale) / h0
    big = max(d1, d2)
    h1 = max(1e-6, h0 * 1e-3) if big <= 1e-15 else (0.01 / big) ** 0.5
    return max(min(100.0 * h0, h1, t_max), 10.0 * H_MIN_REL)


@njit(**LEAF_JIT_OPTIONS)
def _note_extremes(fstate, wp, wm):
    """The running minimum of Δ = |w₊w₋| and maximum of max(w₊², w₋²) in ``fstate`` at the weights ``wp``, ``wm``."""
    for i in range(wp.shape[0]):
        delta = abs(wp[i] * wm[i])
        if delta < fstate[MIN_DELTA, i]:
            fstate[MIN_DELTA, i] = delta
        w2 = max(wp[i] * wp[i], wm[i] * wm[i])
        if w2 > fstate[MAX_W2, i]:
            fstate[MAX_W2, i] = w2


@njit(**LEAF_JIT_OPTIONS)
def _set_rows(D, g, wp, wm, fstate, valid_p, valid_m, Z, F, FY):
    """The flow rows of ``fstate`` at the current point D[0], whose ∇L and weights are ``g``, ``wp``, ``wm``
    (:func:`.flow_rodas_run._mirror_point`; ``valid_p``, ``valid_m``: the coordinates that have not crossed zero), and
    its running min of Δ and max of w²; the point and its vector field are left in ``Z`` and ``F``."""
    d = fstate.shape[1]
    for q in range(d):
        Z[MIRROR_P, q] = D[0, MIRROR_P, q]
        Z[MIRROR_G2, q] = D[0, MIRROR_G2, q]
        F[MIRROR_P, q] = g[q]
        F[MIRROR_G2, q] = g[q] * g[q]
    _mirror_point(Z, F, g, wp, wm, valid_p, valid_m, fstate, FY)
    _note_extremes(fstate, wp, wm)


@njit(**JIT_OPTIONS)
def _ndf_advance(
    X, XT, y, H, b, X_test, y_test, w_init, mode, tol, t_max, rtol, atol,
    fstate, istate, counters, sstate, D, p_jac, n_steps,
    record_times, record_steps, record_cursor, record_offset, rec_step, rec_time, rec_vectors, rec_losses, rec_vp,
    rec_vm,
):
    """Advance one gradient-flow run by ``<= n_steps`` accepted NDF steps (module docstring).

    Arguments, records, statuses and the stall rule as :func:`.flow_rodas_run._rodas_advance` (gradient flow), with
    the solver state ``sstate`` (``N_NDF_SSTATE``), the difference array ``D`` and the Jacobian's point ``p_jac``
    in place of Rodas's ``sstate`` and ``dense``. A fresh run (``sstate[H_NEXT] == 0``) starts from the P and G₂
    rows of ``fstate``.
    """
    n = X.shape[0]
    d = fstate.shape[1]
    wp = np.empty(d)
    wm = np.empty(d)
    theta = np.empty(d)
    g = np.empty(d)
    resid = np.empty(max(n, 1))
    wpJ = np.empty(d)
    wmJ = np.empty(d)
    Z = np.empty((N_MIRROR_ROWS, d))
    F = np.empty((N_MIRROR_ROWS, d))
    FY = np.empty(fstate.shape)
    y_pred = np.empty((N_MIRROR_ROWS, d))
    psi = np.empty((N_MIRROR_ROWS, d))
    y_new = np.empty((N_MIRROR_ROWS, d))
    corr = np.empty((N_MIRROR_ROWS, d))
    scale = np.empty((N_MIRROR_ROWS, d))
    dy = np.empty(d)
    sig = np.empty(d)
    N = np.empty((d, d))
    NT = np.empty((d, d))
    piv = np.zeros(d, dtype=np.int64)
    M, MT = _woodbury_matrices(n, d)  # (the Woodbury form's, where d ≥ 3n: .woodbury)
    R = np.empty((MAX_ORDER + 1, MAX_ORDER + 1))
    U = np.empty((MAX_ORDER + 1, MAX_ORDER + 1))
    RU = np.empty((MAX_ORDER + 1, MAX_ORDER + 1))
    tmp = np.empty((MAX_ORDER + 1, N_MIRROR_ROWS, d))
    basis = np.empty((2, MAX_ORDER + 1))
    # views made once (a view made in the step loop costs an atomic reference count: see _rms)
    p_new = y_new[MIRROR_P]
    scale_p = scale[MIRROR_P]
    # (gradient flow never crosses zero: the coordinates valid for J± are those of the state, fixed for the call)
    valid_p, valid_m = _valid_for_j(istate)
    capacity = rec_step.shape[0]
    x_max, y_max = _data_bounds(X, y) if tol >= 0.0 else (0.0, 0.0)
    if sstate[H_NEXT] == 0.0:  # a fresh run: the difference array of order 1 at the initial point
        for i in range(N_D_ROWS):
            for r in range(N_MIRROR_ROWS):
                for q in range(d):
                    D[i, r, q] = 0.0
        for q in range(d):
            D[0, MIRROR_P, q] = fstate[P_INT, q]
            D[0, MIRROR_G2, q] = fstate[G2_INT, q]
        if not _vector_field(X, XT, y, H, b, mode, w_init, D[0, MIRROR_P], wp, wm, theta, g, resid):
            sstate[FAILED] = 1.0
            return DIVERGED
        counters[N_RHS] += 1
        _set_rows(D, g, wp, wm, fstate, valid_p, valid_m, Z, F, FY)
        h0 = _initial_step(X, XT, y, H, b, mode, w_init, Z, F, rtol, atol, t_max,
                           (wp, wm, theta, g, resid, y_new, corr, scale))
        counters[N_RHS] += 1
        for r in range(N_MIRROR_ROWS):
            for q in range(d):
                D[1, r, q] = F[r, q] * h0
        for q in range(d):
            p_jac[q] = D[0, MIRROR_P, q]
        sstate[H_NEXT] = h0
        sstate[ORDER_NOW] = 1.0
        sstate[N_EQUAL] = 0.0
        sstate[CRATE] = 1.0
        sstate[LU_C] = 0.0
        sstate[LU_AGE] = 0.0
    else:  # a run resumed: ∇L at its point into F, as the last step left it (the turn search compares the next
        # step's end with it); a function of the state, as the factorisation below: not counted
        _vector_field(X, XT, y, H, b, mode, w_init, D[0, MIRROR_P], wp, wm, theta, g, resid)
        for q in range(d):
            F[MIRROR_P, q] = g[q]
    h = sstate[H_NEXT]
    order = int(sstate[ORDER_NOW])
    n_equal = int(sstate[N_EQUAL])
    crate = sstate[CRATE]
    lu_c = sstate[LU_C]
    lu_age = int(sstate[LU_AGE])
    how = 0
    _weights(w_init, p_jac, wpJ, wmJ)
    if lu_c > 0.0:  # the factorisation the run holds, rebuilt bit for bit (not a new one: not counted)
        how = _factor_mirror(X, H, lu_c, wpJ, wmJ, sig, N, NT, piv, M, MT)
        if how == 0:
            lu_c = 0.0
    taken = 0
    status = RUNNING
    while True:
        t = sstate[T_NOW]
        # records owed up to the current point, from the last step's interpolating polynomial
        row = _owed_row(record_times, record_cursor, record_offset, capacity, t)
        while row >= 0:
            tr = record_times[record_cursor[0]]
            _dense_p(D, order, t, h, tr, Z[MIRROR_P])
            _record_mirror(X, y, XT, H, b, mode, w_init, X_test, y_test, Z[MIRROR_P],
                           _step_of_record(counters[STEPS_DONE], sstate[H_LAST], tr, t), tr, row, theta, g, resid, wp,
                           wm, rec_step, rec_time, rec_vectors, rec_losses, rec_vp, rec_vm)
            record_cursor[0] += 1
            row = _owed_row(record_times, record_cursor, record_offset, capacity, t)
        if row == BLOCK_FULL:
            break
        if record_steps:
            if _initial_point_owed(counters[STEPS_DONE], record_cursor, record_offset, capacity):
                _record_mirror(X, y, XT, H, b, mode, w_init, X_test, y_test, D[0, MIRROR_P], 0, t, -record_offset,
                               theta, g, resid, wp, wm, rec_step, rec_time, rec_vectors, rec_losses, rec_vp, rec_vm)
                record_cursor[0] += 1
            if _no_row_for_next_step(record_cursor, record_offset, capacity):
                break
        stop, status = _stop_before_step(X, y, fstate, theta, tol, x_max, y_max, t_max, sstate, counters, taken,
                                         n_steps)
        if stop:
            break
        # one accepted step (with as many rejected attempts as it takes)
        accepted = False
        last = False
        error_norm = 0.0
        safety = 0.0
        while True:
            if t + h >= t_max or t + 1.0001 * h >= t_max:
                if h != t_max - t:
                    _change_D(D, order, (t_max - t) / h, R, U, RU, tmp)
                    h = t_max - t
                    n_equal = 0
                last = True
            if not (last or h >= _h_min(t)):
                break
            # the predictor, ψ and the Newton weights
            # (passes over the rows of D, which vectorise; each sum in the order i = 0, 1, ...)
            for r in range(N_MIRROR_ROWS):
                for q in range(d):
                    y_pred[r, q] = D[0, r, q]
                    psi[r, q] = 0.0
            for i in range(1, order + 1):
                gi = GAMMA_SUM[i]
                for r in range(N_MIRROR_ROWS):
                    for q in range(d):
                        y_pred[r, q] += D[i, r, q]
                        psi[r, q] += D[i, r, q] * gi
            alpha = ALPHA_NDF[order]
            for r in range(N_MIRROR_ROWS):
                for q in range(d):
                    psi[r, q] /= alpha
            _error_weights(y_pred, rtol, atol, scale)
            c = h / alpha
            converged = False
            current_jac = False
            n_iter = 0
            while True:
                if lu_c != c or lu_age >= MAX_LU_AGE:
                    # a new matrix takes the Jacobian at this step's predicted point: it costs d exponentials,
                    # and a Jacobian kept while the weights grow by orders of magnitude let the one-iteration
                    # Newton test accept steps that were not solved (BDF5 then went unstable at alpha = 1e-150)
                    if not current_jac:
                        for q in range(d):
                            p_jac[q] = y_pred[MIRROR_P, q]
                        _weights(w_init, p_jac, wpJ, wmJ)
                        current_jac = True
                    how = _factor_mirror(X, H, c, wpJ, wmJ, sig, N, NT, piv, M, MT)
                    counters[N_LU] += 1
                    lu_c = c if how != 0 else 0.0
                    lu_age = 0
                    crate = 1.0
                if how != 0:
                    for q in range(d):
                        y_new[MIRROR_P, q] = y_pred[MIRROR_P, q]
                        corr[MIRROR_P, q] = 0.0
                    dy_old = -1.0
                    for it in range(NEWTON_MAXITER):
                        n_iter = it + 1
                        ok = _vector_field(X, XT, y, H, b, mode, w_init, p_new, wp, wm, theta, g, resid)
                        counters[N_RHS] += 1
                        if not ok:
                            break
                        for q in range(d):
                            dy[q] = c * g[q] - psi[MIRROR_P, q] - corr[MIRROR_P, q]
                        _solve_p_rows(X, how, sig, N, NT, piv, M, MT, dy, resid, theta)  # (work: free here)
                        nrm = _rms_vector(dy, 1.0, scale_p)
                        if dy_old > 0.0:
                            crate = max(0.3 * crate, nrm / dy_old)
                        for q in range(d):
                            y_new[MIRROR_P, q] += dy[q]
                            corr[MIRROR_P, q] += dy[q]
                        if nrm * min(1.0, crate) <= NEWTON_TOL:
                            converged = True
                            break
                        if dy_old > 0.0 and nrm > 2.0 * dy_old:
                            break
                        dy_old = nrm
                if converged or current_jac:
                    break
                lu_c = 0.0  # failed with an older Jacobian: a new matrix, at a new Jacobian, then once more
            if converged:
                # the G₂ rows, a quadrature of g⊙g at the new P (and w± there, for the rows of fstate)
                converged = _vector_field(X, XT, y, H, b, mode, w_init, p_new, wp, wm, theta, g, resid)
                counters[N_RHS] += 1
            if not converged:
                h *= 0.5
                _change_D(D, order, 0.5, R, U, RU, tmp)
                n_equal = 0
                last = False
                counters[REJECTED] += 1
                continue
            for q in range(d):
                corr[MIRROR_G2, q] = c * g[q] * g[q] - psi[MIRROR_G2, q]
                y_new[MIRROR_G2, q] = y_pred[MIRROR_G2, q] + corr[MIRROR_G2, q]
            _error_weights(y_new, rtol, atol, scale)
            error_norm = _rms(corr, ERROR_CONST[order], scale)
            safety = 0.9 * (2 * NEWTON_MAXITER + 1) / (2 * NEWTON_MAXITER + n_iter)
            if error_norm > 1.0:
                factor = max(MIN_FACTOR, safety * error_norm ** (-1.0 / (order + 1)))
                h *= factor
                _change_D(D, order, factor, R, U, RU, tmp)
                n_equal = 0
                last = False
                counters[REJECTED] += 1
                continue
            accepted = True
            break
        if not accepted:
            sstate[FAILED] = 1.0
            status = DIVERGED
            break
        # the step is taken: the difference array, the rows of fstate, then the next step's size and order
        for r in range(N_MIRROR_ROWS):
            for q in range(d):
                D[order + 2, r, q] = corr[r, q] - D[order + 1, r, q]
                D[order + 1, r, q] = corr[r, q]
        for i in range(order, -1, -1):
            for r in range(N_MIRROR_ROWS):
                for q in range(d):
                    D[i, r, q] += D[i + 1, r, q]
        for r in range(N_MIRROR_ROWS):
            for q in range(d):
                # the new point is y_new itself (the sum above is it up to a rounding): the state rows, records and
                # the next step then read one point, whose weights and g the G₂ evaluation computed
                D[0, r, q] = y_new[r, q]
        # the largest w² at the turns inside the step (F: ∇L at its start; the step's polynomial: before the change of
        # h and order below), then the rows at the new point (the weights and g: the G₂ evaluation's, at y_new)
        _turn_peaks(D, order, h, w_init, F, g, fstate, basis)
        _set_rows(D, g, wp, wm, fstate, valid_p, valid_m, Z, F, FY)
        t_new = t_max if last else t + h
        sstate[T_LAST] = t
        sstate[H_LAST] = h
        sstate[T_NOW] = t_new
        n_equal += 1
        if n_equal >= order + 1:
            f_minus = _rms(D[order], ERROR_CONST[order - 1], scale) ** (-1.0 / order) if order > 1 else 0.0
            f_same = error_norm ** (-1.0 / (order + 1)) if error_norm > 0.0 else np.inf
            f_plus = _rms(D[order + 2], ERROR_CONST[order + 1], scale) ** (-1.0 / (order + 2)) \
                if order < MAX_ORDER else 0.0
            best = f_minus
            delta_order = -1
            if f_same > best:
                best = f_same
                delta_order = 0
            if f_plus > best:
                best = f_plus
                delta_order = 1
            factor = min(MAX_FACTOR, safety * best)
            if factor < MIN_CHANGE:  # (the step passed its error test: keep h, c and the factorisation)
                n_equal = order - 1  # (chosen again two steps later)
            else:
                order += delta_order
                _change_D(D, order, factor, R, U, RU, tmp)
                h *= factor
                n_equal = 0
        sstate[H_NEXT] = h
        sstate[ORDER_NOW] = float(order)
        sstate[N_EQUAL] = float(n_equal)
        sstate[CRATE] = crate
        lu_age += 1
        sstate[LU_C] = lu_c
        sstate[LU_AGE] = float(lu_age)
        counters[STEPS_DONE] += 1
        taken += 1
        if record_steps:  # (a row is free: checked before the step)
            _record_mirror(X, y, XT, H, b, mode, w_init, X_test, y_test, D[0, MIRROR_P], counters[STEPS_DONE], t_new,
                           record_cursor[0] - record_offset, theta, g, resid, wp, wm, rec_step, rec_time, rec_vectors,
                           rec_losses, rec_vp, rec_vm)
            record_cursor[0] += 1
    sstate[CRATE] = crate
    sstate[LU_C] = lu_c
    return status
