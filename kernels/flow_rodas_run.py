r"""The driver of the adaptive Rodas5P flow (:mod:`.flow_rodas`): dense output, crossings, records, the step loop.

:func:`_rodas_advance` advances one run by accepted steps: it takes the steps of
:func:`.flow_rodas._attempt` under the PI controller of :mod:`.flow_rodas` (rejecting and retrying); a run of MGF
takes those of :func:`.flow_dop853._attempt_explicit` first, until the switch of :mod:`.flow_dop853`,
locates the sign crossings of w± of every accepted step on its dense output, writes the records owed
up to the current point, tests the stopping rule and keeps every quantity of the fixed-step flows
(:mod:`.flow`'s state rows: the integrals, crossing counts and times, the running minimum of Δ at the steps' points,
the largest w² also at the turns of w± inside a step, on its dense output: :func:`_turn_peaks`).
Gradient flow takes the steps of :func:`.flow_rodas_gf._attempt_mirror` on its mirror state (P, G₂) under the
same controller; after each accepted step the state rows are filled from it (w± = w±(0)e^{∓P}, ẇ± the vector
field, J± = G₂), so stores, theory and resume read the same rows for both flows, and P in ``fstate`` is what a
resumed run continues from, bit for bit. A step's dense c rows (:mod:`.dense_output`) are formed only when read
(:func:`_form_dense`: a record, a crossing, a turn of w±, the end of a call), from its stages kept in ``Kacc``,
which the next attempts do not write (a DOP853 step adds its three dense stages there).
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS, LEAF_JIT_OPTIONS
from .crossings import _hermite_crossings, _may_cross
from .dense_output import DENSE_STATE_ROWS, _dense_at, _dense_ends, _dense_extremes, _dense_root, _set_point_dense
from .flow import (
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
    MAX_W2,
    MIN_DELTA,
    N_CROSSINGS,
    N_RK_ROWS,
    P_INT,
    Q_INT,
    STEPS_DONE,
    V_MINUS,
    V_PLUS,
    W_MINUS,
    W_PLUS,
    _note_crossing,
)
from .flow_dop853 import (
    COST_RATIO,
    DENSE_H_RHO,
    N_DOP_DENSE_STAGES,
    ORDER_EXPLICIT,
    PHASE,
    SINCE_TRIAL,
    TRIAL_EVERY,
    _attempt_explicit,
    _dense_explicit,
    _error_norm_explicit,
    _explicit_hopeless,
    _explicit_point,
    _rho_hat,
    _stiff,
)
from .flow_rodas import (
    ERR_PREV,
    FAC_MAX,
    FAC_MIN,
    FAILED,
    H_LAST,
    H_MIN_REL,
    H_NEXT,
    N_COUNTERS,
    N_RHS,
    N_STAGES,
    ORDER,
    PI_ALPHA,
    PI_BETA,
    REJECTED,
    REJECTED_LAST,
    RODAS_H,
    SAFETY,
    T_LAST,
    T_NOW,
    _attempt,
    _error_norm,
    _flat_rows,
    _flat_stages,
    _gradient_adaptive,
    _rhs,
    _workspace,
)
from .flow_rodas_gf import (
    MIRROR_G2,
    MIRROR_P,
    N_MIRROR_ROWS,
    _attempt_mirror,
    _error_norm_mirror,
    _field_mirror,
    _rhs_mirror,
    _weights,
    _workspace_mirror,
)
from .flow_schedule import BLOCK_FULL, _initial_point_owed, _no_row_for_next_step, _owed_row, _step_of_record
from .flow_stop import _data_bounds, _stop_before_step
from .layout import REC_DELTA, REC_THETA, REC_W_MINUS, REC_W_PLUS
from .mgd import _record_losses
from .status import DIVERGED, RUNNING


@njit(**LEAF_JIT_OPTIONS)
def _crossings(Y0, Y1, F0, F1, dense, h, t0, istate, fstate, counters, log_time, log_coord, log_sign,
               valid_p, valid_m, roots):
    """Locate and log the sign changes of w± in the step [t0, t0 + h] (module docstring)."""
    d = Y0.shape[1]
    for which in range(2):
        row = W_PLUS if which == 0 else W_MINUS
        sign = 1 if which == 0 else -1
        count = istate[CROSS_PLUS if which == 0 else CROSS_MINUS]
        first = fstate[FIRST_CROSS_PLUS if which == 0 else FIRST_CROSS_MINUS]
        last = fstate[LAST_CROSS_PLUS if which == 0 else LAST_CROSS_MINUS]
        valid = valid_p if which == 0 else valid_m
        jrow = J_PLUS if which == 0 else J_MINUS
        krow = K_PLUS if which == 0 else K_MINUS
        for i in range(d):
            w0 = Y0[row, i]
            w1 = Y1[row, i]
            m0 = h * F0[row, i]
            m1 = h * F1[row, i]
            if not _may_cross(w0, w1, m0, m1):
                continue
            found = _hermite_crossings(w0, w1, m0, m1, roots)
            for k in range(found):
                s = _dense_root(dense, which, i, roots[2 + 2 * k], roots[3 + 2 * k], roots[k])
                _note_crossing(t0 + s * h, i, sign, count, first, last, counters, log_time, log_coord, log_sign)
            if found:
                fstate[MIN_DELTA, i] = 0.0  # Δ = |w₊w₋| vanishes at the crossing itself
            if found and valid[i]:
                valid[i] = False
                Y1[jrow, i] = Y0[jrow, i]
                Y1[krow, i] = Y0[krow, i]


@njit(**LEAF_JIT_OPTIONS)
def _any_may_cross(Y0, Y1, F0, F1, h):
    """Whether a coordinate of w± may cross zero in the step (:func:`.crossings._may_cross`, as :func:`_crossings`)."""
    for row in (W_PLUS, W_MINUS):
        for i in range(Y0.shape[1]):
            if _may_cross(Y0[row, i], Y1[row, i], h * F0[row, i], h * F1[row, i]):
                return True
    return False


@njit(inline="always", **LEAF_JIT_OPTIONS)
def _may_turn(gf, Y0, Y1, F0, F1, Fz0, Fz1, h, which, i):
    """Whether w₊ (``which`` 0) or w₋ (1) of coordinate ``i`` may turn inside the step: its velocity may change
    sign (:func:`.crossings._may_cross` of ẇ and its slope); gradient flow: P's slope ∇L changes sign (w± =
    w±(0)e^{∓P} turn where P does)."""
    if gf:
        return (Fz0[MIRROR_P, i] < 0.0) != (Fz1[MIRROR_P, i] < 0.0)
    r = V_PLUS if which == 0 else V_MINUS
    return _may_cross(Y0[r, i], Y1[r, i], h * F0[r, i], h * F1[r, i])


@njit(**LEAF_JIT_OPTIONS)
def _any_may_turn(gf, Y0, Y1, F0, F1, Fz0, Fz1, h):
    """Whether some w± may turn inside the step (:func:`_may_turn`)."""
    for which in range(1 if gf else 2):
        for i in range(Y0.shape[1]):
            if _may_turn(gf, Y0, Y1, F0, F1, Fz0, Fz1, h, which, i):
                return True
    return False


@njit(**LEAF_JIT_OPTIONS)
def _turn_peaks(gf, w_init, Y0, Y1, F0, F1, Fz0, Fz1, h, dense, fstate):
    """The running maximum of w² (``fstate[MAX_W2]``) at the turns of w± inside the step, located on its dense
    output (:func:`.dense_output._dense_extremes`): a long step passes over the peak its end points miss. Gradient
    flow: at the turns of P, where w₊² = w₊(0)²e^{-2P} peaks at P's least value and w₋² at its largest."""
    for which in range(1 if gf else 2):
        for i in range(Y0.shape[1]):
            if not _may_turn(gf, Y0, Y1, F0, F1, Fz0, Fz1, h, which, i):
                continue
            low, high = _dense_extremes(dense, which, i)
            if not low <= high:  # (no turn on the dense output)
                continue
            if gf:
                wp = w_init[0, i] / np.exp(low)
                wm = w_init[1, i] * np.exp(high)
                w2 = max(wp * wp, wm * wm)
            else:
                w2 = max(low * low, high * high)
            if w2 > fstate[MAX_W2, i]:
                fstate[MAX_W2, i] = w2


@njit(**LEAF_JIT_OPTIONS)
def _record(X, y, XT, H, b, mode, gf, w_init, X_test, y_test, dense, s, step, t_rec, row, theta, g, resid, wp_buf,
            wm_buf, rec_step, rec_time, rec_vectors, rec_losses, rec_vp, rec_vm):
    """Row ``row`` of the record buffers: the dense output at fraction ``s`` of the last step (gradient flow:
    of P, the row from :func:`_record_mirror`)."""
    d = theta.shape[0]
    if gf:
        for i in range(d):
            theta[i] = _dense_at(dense, 0, i, s)  # (P here; _record_mirror overwrites it with θ)
        _record_mirror(X, y, XT, H, b, mode, w_init, X_test, y_test, theta, step, t_rec, row, theta, g, resid, wp_buf,
                       wm_buf, rec_step, rec_time, rec_vectors, rec_losses, rec_vp, rec_vm)
        return
    for i in range(d):
        wp_buf[i] = _dense_at(dense, 0, i, s)
        wm_buf[i] = _dense_at(dense, 1, i, s)
    for i in range(d):
        theta[i] = (wp_buf[i] * wp_buf[i] - wm_buf[i] * wm_buf[i]) * 0.25
    for i in range(d):
        rec_vp[row, i] = _dense_at(dense, 2, i, s)
        rec_vm[row, i] = _dense_at(dense, 3, i, s)
    _write_row(X, y, X_test, y_test, step, t_rec, row, theta, wp_buf, wm_buf, rec_step, rec_time, rec_vectors,
               rec_losses)


@njit(**LEAF_JIT_OPTIONS)
def _write_row(X, y, X_test, y_test, step, t_rec, row, theta, wp_buf, wm_buf, rec_step, rec_time, rec_vectors,
               rec_losses):
    """Row ``row`` of the record buffers at θ and w± (``wp_buf``, ``wm_buf``): step, time, θ, w±, Δ, the losses."""
    rec_step[row] = step
    rec_time[row] = t_rec
    for i in range(theta.shape[0]):
        wp = wp_buf[i]
        wm = wm_buf[i]
        rec_vectors[row, REC_THETA, i] = theta[i]
        rec_vectors[row, REC_W_PLUS, i] = wp
        rec_vectors[row, REC_W_MINUS, i] = wm
        rec_vectors[row, REC_DELTA, i] = abs(wp * wm)
    _record_losses(X, y, X_test, y_test, theta, row, rec_losses)


@njit(**LEAF_JIT_OPTIONS)
def _record_mirror(X, y, XT, H, b, mode, w_init, X_test, y_test, P, step, t_rec, row, theta, g, resid, wp_buf, wm_buf,
                   rec_step, rec_time, rec_vectors, rec_losses, rec_vp, rec_vm):
    """Row ``row`` of the record buffers of gradient flow at the mirror point ``P``: w± = w±(0)e^{∓P}
    (:func:`.flow_rodas_gf._weights`), θ, Δ, the losses and ẇ± = ∓∇L(θ)⊙w± from the vector field. ``P`` may be
    ``theta`` itself (it is read before θ is written)."""
    d = theta.shape[0]
    _weights(w_init, P, wp_buf, wm_buf)
    for i in range(d):
        theta[i] = (wp_buf[i] * wp_buf[i] - wm_buf[i] * wm_buf[i]) * 0.25
    _gradient_adaptive(X, XT, y, H, b, mode, theta, d, resid, g)
    for i in range(d):
        rec_vp[row, i] = -g[i] * wp_buf[i]
        rec_vm[row, i] = g[i] * wm_buf[i]
    _write_row(X, y, X_test, y_test, step, t_rec, row, theta, wp_buf, wm_buf, rec_step, rec_time, rec_vectors,
               rec_losses)


@njit(**LEAF_JIT_OPTIONS)
def _mirror_point(Z, F, g, wp, wm, valid_p, valid_m, Y, FY):
    """The kernel's rows ``Y`` (and the w± rows of ``FY``) of gradient flow at the mirror point ``Z``, with its
    vector field ``F``, ∇L ``g`` and weights ``wp``, ``wm``: w±, ẇ± (the velocity rows), P, G₂, and J± = G₂
    (while valid; gradient flow does not cross zero); K± and Q are 0."""
    d = Z.shape[1]
    for i in range(d):
        Y[W_PLUS, i] = wp[i]
        Y[W_MINUS, i] = wm[i]
        Y[V_PLUS, i] = -g[i] * wp[i]
        Y[V_MINUS, i] = g[i] * wm[i]
        FY[W_PLUS, i] = Y[V_PLUS, i]
        FY[W_MINUS, i] = Y[V_MINUS, i]
        Y[P_INT, i] = Z[MIRROR_P, i]
        Y[G2_INT, i] = Z[MIRROR_G2, i]
        if valid_p[i]:
            Y[J_PLUS, i] = Z[MIRROR_G2, i]
        if valid_m[i]:
            Y[J_MINUS, i] = Z[MIRROR_G2, i]
        Y[K_PLUS, i] = 0.0
        Y[K_MINUS, i] = 0.0
        Y[Q_INT, i] = 0.0


@njit(**LEAF_JIT_OPTIONS)
def _dense_slopes(Kst, r, dense, k):
    """Rows q₁, q₂, q₃ of dense row ``k`` of the last step from row ``r`` of its stages: q_m = Σ_j RODAS_H[m, j] k_j,
    summed over j in increasing order, in one pass over the coordinates with the three sums in registers."""
    for i in range(Kst.shape[2]):
        q1 = 0.0
        q2 = 0.0
        q3 = 0.0
        for j in range(N_STAGES):
            kji = Kst[j, r, i]
            q1 = q1 + RODAS_H[0, j] * kji
            q2 = q2 + RODAS_H[1, j] * kji
            q3 = q3 + RODAS_H[2, j] * kji
        dense[2, k, i] = q1
        dense[3, k, i] = q2
        dense[4, k, i] = q3
        dense[5, k, i] = 0.0  # (Rodas5P's dense output has degree 4: .dense_output)
        dense[6, k, i] = 0.0
        dense[7, k, i] = 0.0


@njit(**LEAF_JIT_OPTIONS)
def _form_dense(owed, gf, explicit, problem, inv_lam, h, Ys, F1, valid_p, valid_m, ws, Kst, Kz, flat, dense):
    """The c rows of ``dense`` of the last accepted step, from its stages (``Kz``: gradient flow's, whose row 0 is
    P; ``Kst``: MGF's), formed only when something reads them (the module docstring) and only once: when ``owed``.
    Returns False, what is owed after it (``dense_owed = _form_dense(dense_owed, ...)``). A DOP853 step
    (``explicit``) takes its three dense stages here (:func:`.flow_dop853._dense_explicit`: ``problem`` = (X, XT, y,
    H, b, mode), ``h`` the step, ``Ys`` its start, ``F1`` f at its end, ``flat`` = (Ys, F1, Kst) seen flat)."""
    if not owed:
        return False
    if gf:
        _dense_slopes(Kz, MIRROR_P, dense, 0)
    elif explicit:
        X, XT, y, H, b, mode = problem
        _dense_explicit(X, XT, y, H, b, mode, inv_lam, h, Ys, F1, valid_p, valid_m, ws, Kst, flat, dense)
    else:
        for k in range(4):
            _dense_slopes(Kst, DENSE_STATE_ROWS[k], dense, k)
    return False


@njit(**LEAF_JIT_OPTIONS)
def _initial_step(gf, Y0, F0, rtol, atol, t_max):
    """Hairer's first guess 0.01·‖y₀‖/‖f(y₀)‖ in the error norm's weights, capped by t_max."""
    d = Y0.shape[1]
    n0 = 0.0
    n1 = 0.0
    count = 0
    for r in (W_PLUS, W_MINUS, V_PLUS, V_MINUS):
        if gf and r >= V_PLUS:
            continue
        for i in range(d):
            sc = atol + rtol * abs(Y0[r, i])
            n0 += (Y0[r, i] / sc) ** 2
            n1 += (F0[r, i] / sc) ** 2
            count += 1
    n0 = np.sqrt(n0 / count)
    n1 = np.sqrt(n1 / count)
    h = 1e-6 if (n0 < 1e-5 or n1 < 1e-5) else 0.01 * n0 / n1
    # not below what the run accepts (H_MIN_REL at t = 0): at λ = 1e-12 the guess, about λ, was, and the run
    # ended "diverged" before its first step; the L-stable method takes that step and the controller grows it
    return min(max(h, 10.0 * H_MIN_REL), t_max)


@njit(**JIT_OPTIONS)
def _valid_for_j(istate):
    """The coordinates whose J±, K± still integrate, as two new boolean arrays (``valid_p``, ``valid_m``): those whose
    w₊ (w₋) has not crossed zero (``istate`` rows ``CROSS_PLUS``, ``CROSS_MINUS``). Built once per call of a driver
    (:func:`_rodas_advance`, :func:`.flow_ndf._ndf_advance`), outside the step loop, which allocates nothing; the
    per-step functions take them and a crossing clears its entry."""
    d = istate.shape[1]
    valid_p = np.empty(d, dtype=np.bool_)
    valid_m = np.empty(d, dtype=np.bool_)
    for i in range(d):
        valid_p[i] = istate[CROSS_PLUS, i] == 0
        valid_m[i] = istate[CROSS_MINUS, i] == 0
    return valid_p, valid_m


@njit(**JIT_OPTIONS)
def _rodas_advance(
    X, XT, y, H, b, X_test, y_test, w_init, lam, mode, tol, t_max, rtol, atol,
    fstate, istate, counters, sstate, dense, n_steps,
    log_time, log_coord, log_sign,
    record_times, record_steps, record_cursor, record_offset, rec_step, rec_time, rec_vectors, rec_losses, rec_vp,
    rec_vm,
):
    """Advance one MGF(λ) (``lam > 0``) or gradient-flow (``lam == 0``) run by ``<= n_steps`` accepted steps.

    The problem arrays are unpadded (``X`` (n, d), ``XT`` (d, n), ``H`` (d, d), ``b`` (d,)); ``w_init``
    (2, d) the run's initial w₊, w₋ (gradient flow is integrated in P, :mod:`.flow_rodas_gf`); ``mode``
    the gradient form of ``g`` and of the products ``H z`` (the factorised matrix always uses ``H``);
    ``tol < 0`` disables the convergence test; the run ends at ``t_max`` (status ``MAX_STEPS``).
    Records: the state at ``record_times[k]`` (sorted) goes to row ``k - record_offset`` of the
    ``rec_*`` buffers (``rec_time`` the time, ``rec_step`` the accepted steps before it); the call
    returns ``RUNNING`` early when the buffers are full and a record is still owed. With
    ``record_steps`` (and no ``record_times``) the rows are the initial point and the point after every
    accepted step (``rec_step`` its number), row ``record_cursor[0] - record_offset`` the next one; the
    call returns before a step whose row would not fit.

    Returns ``RUNNING``, ``CONVERGED`` (train loss ``<= tol`` at an accepted point, checked before
    stepping), ``MAX_STEPS`` (t = t_max), ``DIVERGED`` (the step size underflowed; the state is
    the last accepted point and ``sstate[FAILED] = 1``) or ``STALLED``.

    The stopping rule, its order and the stall rule (runs with a ``tol``) are :mod:`.flow_stop`'s; which record is
    owed, its row and its step number, :mod:`.flow_schedule`'s.
    """
    n = X.shape[0]
    d = fstate.shape[1]
    gf = not (lam > 0.0)
    inv_lam = 0.0 if gf else 1.0 / lam
    ws = _workspace(n, d)
    theta = ws[19]
    g_tmp = ws[20]
    resid = ws[17]
    Y0 = np.empty((N_RK_ROWS, d))
    Y1 = np.empty((N_RK_ROWS, d))
    F0 = np.empty((N_RK_ROWS, d))
    F1 = np.empty((N_RK_ROWS, d))
    g0 = np.empty(d)
    g1 = np.empty(d)
    Kst = np.zeros((N_DOP_DENSE_STAGES, N_RK_ROWS, d))  # (room for either method's stages)
    Kacc = np.zeros((N_DOP_DENSE_STAGES, N_RK_ROWS, d))  # (the stages of the last accepted step)
    # the same arrays seen flat (flow_rodas._attempt), swapped with them
    Y0f, Y1f, F0f, F1f = _flat_rows(Y0), _flat_rows(Y1), _flat_rows(F0), _flat_rows(F1)
    Kstf, Kaccf = _flat_stages(Kst), _flat_stages(Kacc)
    wp_buf = np.empty(d)
    wm_buf = np.empty(d)
    roots = np.zeros(6)
    # a record inside a step of the explicit start: its DOP853 step from the step's start and its point (_record reads)
    Ys = np.zeros((N_RK_ROWS, d))
    Ye = np.zeros((N_RK_ROWS, d))
    Fs = np.zeros((N_RK_ROWS, d))
    Ks = np.zeros((N_DOP_DENSE_STAGES, N_RK_ROWS, d))
    flat_sub = (_flat_rows(Ys), _flat_rows(Fs), _flat_stages(Ks), _flat_rows(Ye))
    sub = (Ys, Fs, Ks, Ye, flat_sub, np.zeros(N_COUNTERS, np.int64))
    point = np.zeros_like(dense)
    # gradient flow: the mirror state (P, G₂), its vector field and work arrays, the weights at Z0 and Z1
    wsm = _workspace_mirror(n, d)
    Z0 = np.empty((N_MIRROR_ROWS, d))
    Z1 = np.empty((N_MIRROR_ROWS, d))
    Fz0 = np.empty((N_MIRROR_ROWS, d))
    Fz1 = np.empty((N_MIRROR_ROWS, d))
    Kz = np.zeros((N_STAGES, N_MIRROR_ROWS, d))
    Kz_acc = np.zeros((N_STAGES, N_MIRROR_ROWS, d))
    wp0 = np.empty(d)
    wm0 = np.empty(d)
    wp1 = np.empty(d)
    wm1 = np.empty(d)
    valid_p, valid_m = _valid_for_j(istate)
    for r in range(N_RK_ROWS):
        for i in range(d):
            Y0[r, i] = fstate[r, i]
            Y1[r, i] = fstate[r, i]  # (rows a step leaves alone, as J± of a crossed coordinate, stay)
    capacity = rec_step.shape[0]
    x_max, y_max = _data_bounds(X, y) if tol >= 0.0 else (0.0, 0.0)  # (bounds of the stall rule's cheap test)
    if gf:
        for i in range(d):
            Z0[MIRROR_P, i] = Y0[P_INT, i]
            Z0[MIRROR_G2, i] = Y0[G2_INT, i]
        _rhs_mirror(X, XT, y, H, b, mode, w_init, Z0, wp0, wm0, theta, g0, resid, Fz0)
        for i in range(d):
            F0[W_PLUS, i] = -g0[i] * wp0[i]
            F0[W_MINUS, i] = g0[i] * wm0[i]
    else:
        _rhs(X, XT, y, H, b, mode, inv_lam, Y0, valid_p, valid_m, theta, g0, resid, F0)
    if sstate[H_LAST] == 0.0:  # no step yet: the dense output of the initial point
        _set_point_dense(gf, Y0, dense)
    if counters[N_RHS] == 0:  # counted once (a later call recomputes what an earlier one counted; a call may
        counters[N_RHS] += 1  # return before the first step when its record block is full)
    problem = (X, XT, y, H, b, mode)
    last_explicit = False  # (the last accepted step was DOP853's: its dense output comes from its own stages)
    taken = 0
    status = RUNNING
    dense_owed = False  # the q rows of the last step's dense output are still to form from Kacc (Kz_acc)
    while True:
        t = sstate[T_NOW]
        # records owed up to the current point, from the last step's dense output
        row = _owed_row(record_times, record_cursor, record_offset, capacity, t)
        while row >= 0:
            dense_owed = _form_dense(dense_owed, gf, last_explicit, problem, inv_lam, sstate[H_LAST], Y1, F0, valid_p,
                                     valid_m, ws, Kacc, Kz_acc, (Y1f, F0f, Kaccf), dense)
            tr = record_times[record_cursor[0]]
            hl = sstate[H_LAST]
            s = 1.0 if hl == 0.0 else min(max((tr - sstate[T_LAST]) / hl, 0.0), 1.0)
            source = dense
            if s < 1.0 and not gf and sstate[PHASE] == 0.0:  # inside a step of the explicit start: by a DOP853 step
                _explicit_point(X, XT, y, H, b, mode, inv_lam, s * hl, dense, valid_p, valid_m, ws, sub, point)
                source, s = point, 1.0
            _record(X, y, XT, H, b, mode, gf, w_init, X_test, y_test, source, s,
                    _step_of_record(counters[STEPS_DONE], hl, tr, t), tr, row, theta, g_tmp, resid, wp_buf, wm_buf,
                    rec_step, rec_time, rec_vectors, rec_losses, rec_vp, rec_vm)
            record_cursor[0] += 1
            row = _owed_row(record_times, record_cursor, record_offset, capacity, t)
        if row == BLOCK_FULL:
            break
        if record_steps:
            if _initial_point_owed(counters[STEPS_DONE], record_cursor, record_offset, capacity):
                _record(X, y, XT, H, b, mode, gf, w_init, X_test, y_test, dense, 1.0, 0, t, -record_offset, theta,
                        g_tmp, resid, wp_buf, wm_buf, rec_step, rec_time, rec_vectors, rec_losses, rec_vp, rec_vm)
                record_cursor[0] += 1
            if _no_row_for_next_step(record_cursor, record_offset, capacity):
                break
        stop, status = _stop_before_step(X, y, Y0, theta, tol, x_max, y_max, t_max, sstate, counters, taken, n_steps)
        if stop:
            break
        h = sstate[H_NEXT]
        if h == 0.0:
            h = _initial_step(gf, Y0, F0, rtol, atol, t_max)
        # MGF starts by DOP853 and tries a Rodas5P step every TRIAL_EVERY of its steps (.flow_dop853: the switch);
        # at a λ whose fast mode DOP853 cannot step stably (small λ), Rodas5P's from the start
        if not gf and sstate[PHASE] == 0.0 and _explicit_hopeless(lam, t):
            sstate[PHASE] = 1.0
        explicit = not gf and sstate[PHASE] == 0.0
        trial = explicit and sstate[SINCE_TRIAL] >= TRIAL_EVERY
        # one accepted step (with as many rejected attempts as it takes)
        accepted = False
        by_dop = explicit and not trial
        while True:
            last = False
            if t + h >= t_max or t + 1.0001 * h >= t_max:
                h = t_max - t
                last = True
            if not (last or h >= H_MIN_REL * max(t, 1.0)):
                break
            by_dop = explicit and not trial
            if gf:
                how = _attempt_mirror(X, XT, y, H, b, mode, w_init, h, Z0, Fz0, g0, wp0, wm0, wsm, Kz, Z1, counters)
                err = _error_norm_mirror(w_init, Z0, Z1, Kz, rtol, atol, wp1, wm1) if how else np.nan
            elif by_dop:
                _attempt_explicit(X, XT, y, H, b, mode, inv_lam, h, Y0, F0, valid_p, valid_m, ws, Kst, Y1,
                                  (Y0f, F0f, Kstf, Y1f), counters)
                err = _error_norm_explicit(lam, Y0, Y1, Kst, rtol, atol)
            else:
                how = _attempt(X, XT, y, H, b, mode, lam, inv_lam, h, Y0, F0, g0, valid_p, valid_m, ws, Kst, Y1,
                               (Y0f, F0f, Kstf, Y1f), counters)
                err = _error_norm(lam, Y0, Y1, Kst, rtol, atol) if how else np.nan
            if err <= 1.0:
                accepted = True
                break
            counters[REJECTED] += 1
            if trial:  # Rodas5P does not take this step: DOP853 goes on, at the same h
                trial = False
                sstate[SINCE_TRIAL] = 0.0
                continue
            sstate[REJECTED_LAST] = 1.0
            if err > 0.0 and err < np.inf:
                h *= max(FAC_MIN, SAFETY * err ** (-1.0 / (ORDER_EXPLICIT if by_dop else ORDER)))
            else:
                h *= 0.25
        if not accepted:
            sstate[FAILED] = 1.0
            status = DIVERGED
            break
        # the step is taken: controller, dense output, crossings, bookkeeping
        e = max(err, 1e-10)
        if by_dop:
            fac = SAFETY * e ** (-1.0 / ORDER_EXPLICIT)
        elif sstate[ERR_PREV] > 0.0:
            fac = SAFETY * e ** (-PI_ALPHA) * sstate[ERR_PREV] ** PI_BETA
        else:
            fac = SAFETY * e ** (-1.0 / ORDER)
        fac = min(FAC_MAX, max(FAC_MIN, fac))
        if sstate[REJECTED_LAST] > 0.0:
            fac = min(fac, 1.0)
        h_used = h
        h_next = h * fac
        if trial:  # a Rodas5P trial that took the step: Rodas5P goes on if it would outstep DOP853 by its cost
            sstate[SINCE_TRIAL] = 0.0
            if fac * COST_RATIO > 1.0:
                sstate[PHASE] = 1.0
            else:
                h_next = h
        elif by_dop:
            sstate[SINCE_TRIAL] += 1.0
        if last and h_next < sstate[H_NEXT]:
            h_next = sstate[H_NEXT]  # a step shortened to land on t_max does not shrink the next guess
        # the step's stages stay in Kacc (Kz_acc) for its dense q rows (_form_dense); the next attempts write Kst
        Kst, Kacc = Kacc, Kst
        Kstf, Kaccf = Kaccf, Kstf
        Kz, Kz_acc = Kz_acc, Kz
        dense_owed = True
        last_explicit = by_dop
        if gf:  # dense row 0 is P (_record maps it to w±), the others stay 0
            _dense_ends(Z0, Z1, MIRROR_P, dense, 0)
            _field_mirror(X, XT, y, H, b, mode, wp1, wm1, theta, g1, resid, Fz1)  # (wp1, wm1: the error norm's)
            counters[N_RHS] += 1
            _mirror_point(Z1, Fz1, g1, wp1, wm1, valid_p, valid_m, Y1, F1)
        else:
            for k in range(4):
                _dense_ends(Y0, Y1, DENSE_STATE_ROWS[k], dense, k)
            _rhs(X, XT, y, H, b, mode, inv_lam, Y1, valid_p, valid_m, theta, g1, resid, F1)
            counters[N_RHS] += 1
            if by_dop:
                rho = _rho_hat(Y1, ws[9], F1, Kacc)  # (ws[9]: the last stage's point)
                if _stiff(h_used * rho, sstate):
                    sstate[PHASE] = 1.0
                elif h_next * rho > DENSE_H_RHO:
                    h_next = DENSE_H_RHO / rho
            seen = counters[N_CROSSINGS]
            if _any_may_cross(Y0, Y1, F0, F1, h_used):  # (the crossings are located on the dense output)
                dense_owed = _form_dense(dense_owed, gf, last_explicit, problem, inv_lam, h_used, Y0, F1, valid_p,
                                         valid_m, ws, Kacc, Kz_acc, (Y0f, F1f, Kaccf), dense)
                _crossings(Y0, Y1, F0, F1, dense, h_used, t, istate, fstate, counters, log_time, log_coord,
                           log_sign, valid_p, valid_m, roots)
            if counters[N_CROSSINGS] != seen:  # J±, K± of a crossed coordinate are frozen from here: f as a resume
                _rhs(X, XT, y, H, b, mode, inv_lam, Y1, valid_p, valid_m, theta, g1, resid, F1)  # sees it
                counters[N_RHS] += 1
        if _any_may_turn(gf, Y0, Y1, F0, F1, Fz0, Fz1, h_used):  # (a peak of w² between the step's points)
            dense_owed = _form_dense(dense_owed, gf, last_explicit, problem, inv_lam, h_used, Y0, F1, valid_p, valid_m,
                                     ws, Kacc, Kz_acc, (Y0f, F1f, Kaccf), dense)
            _turn_peaks(gf, w_init, Y0, Y1, F0, F1, Fz0, Fz1, h_used, dense, fstate)
        t_new = t_max if last else t + h_used
        sstate[T_LAST] = t
        sstate[H_LAST] = h_used
        sstate[T_NOW] = t_new
        sstate[H_NEXT] = h_next
        if not by_dop and (not explicit or sstate[PHASE] > 0.0):  # (Rodas5P's history: from its first step on)
            sstate[ERR_PREV] = e
        sstate[REJECTED_LAST] = 0.0
        # the new point becomes the current one (the next attempt and vector field write the old arrays before a read)
        Y0, Y1 = Y1, Y0
        F0, F1 = F1, F0
        Y0f, Y1f = Y1f, Y0f
        F0f, F1f = F1f, F0f
        g0, g1 = g1, g0
        if gf:
            for i in range(d):
                Z0[MIRROR_P, i] = Z1[MIRROR_P, i]
                Z0[MIRROR_G2, i] = Z1[MIRROR_G2, i]
                Fz0[MIRROR_P, i] = Fz1[MIRROR_P, i]
                Fz0[MIRROR_G2, i] = Fz1[MIRROR_G2, i]
                wp0[i] = wp1[i]
                wm0[i] = wm1[i]
        for i in range(d):
            wp = Y0[W_PLUS, i]
            wm = Y0[W_MINUS, i]
            delta = abs(wp * wm)
            if delta < fstate[MIN_DELTA, i]:
                fstate[MIN_DELTA, i] = delta
            w2 = max(wp * wp, wm * wm)
            if w2 > fstate[MAX_W2, i]:
                fstate[MAX_W2, i] = w2
        counters[STEPS_DONE] += 1
        taken += 1
        if record_steps:  # (a row is free: checked before the step)
            dense_owed = _form_dense(dense_owed, gf, last_explicit, problem, inv_lam, h_used, Y1, F0, valid_p, valid_m,
                                     ws, Kacc, Kz_acc, (Y1f, F0f, Kaccf), dense)
            _record(X, y, XT, H, b, mode, gf, w_init, X_test, y_test, dense, 1.0, counters[STEPS_DONE], t_new,
                    record_cursor[0] - record_offset, theta, g_tmp, resid, wp_buf, wm_buf, rec_step, rec_time,
                    rec_vectors, rec_losses, rec_vp, rec_vm)
            record_cursor[0] += 1
    _form_dense(dense_owed, gf, last_explicit, problem, inv_lam, sstate[H_LAST], Y1, F0, valid_p, valid_m, ws, Kacc,
                Kz_acc, (Y1f, F0f, Kaccf), dense)  # (the state carries the last step's whole dense output)
    for r in range(N_RK_ROWS):
        for i in range(d):
            fstate[r, i] = Y0[r, i]
    return status
