"""Experiment (issue 22): what a Jacobian-reusing multistep method would give on gradient flow, measured.

Not part of the package and not a benchmark of it: a self-contained measurement that replaces the estimate
benchmarks/README.md used to give ("LSODA's counts priced at the package's pieces") by runs. It answers: how fast
is a compiled variable-order BDF (SciPy's NDF algorithm, ported to Numba here) on the workload of
``bench_rodas.py``'s gradient-flow row, at the accuracy along the way of the package's default call?

The coordinate. Under gradient flow w± = w±(0)e^{∓P} with Ṗ = g = Xᵀr/n, r = Xθ − y
(``kernels/flow_rodas_gf.py``), so P = Xᵀz/n with z = ∫r: gradient flow is the n-dimensional ODE
ż = r(θ(Xᵀz/n)), whose Jacobian −XΣXᵀ/n (σ = (w₊² + w₋²)/2) is symmetric negative semi-definite, so a
step's matrix I + cXΣXᵀ/n is factorised by an n × n Cholesky (n = 20 here against d = 30 for P). G₂ = ∫g⊙g is
carried as quadrature rows through the same multistep formula (its derivative at the converged z, one more
right-hand side a step, which also gives the train loss for the stopping rule).

The method: SciPy's ``BDF`` (``scipy/integrate/_ivp/bdf.py``: the NDF of Shampine and Reichelt, orders 1-5,
a backward-difference array, the Jacobian kept until the Newton iteration fails, the matrix refactorised when
h or the order change), with either SciPy's Newton test (a rate measured within the step, so at least two
iterations, tolerance max(10ε/rtol, min(0.03, √rtol))) or a CVODE-like one (the rate carried across steps,
converged when the scaled correction times min(1, rate) is under ``NEWTON_TOL_CVODE``).

Measured side by side, each the minimum over ``ROUNDS``: the package's call ``dm.gf(problem, t_max=1e7,
tol=1e-20, alpha=0.01)`` (since 2026-11-27 the NDF in P, ``kernels/flow_ndf.py``) and the same with
``scheme="rodas"`` (Rodas5P in P), the NDF in z at several rtol, numbalsoda's LSODA in z (if installed;
a Numba cfunc right-hand side, difference Jacobian) and SciPy's LSODA in w± at rtol 1e-10 (the peer of
``bench_rodas.py``). Accuracy: max|θ(20) − θ_ref(20)| and max|G₂(20) − G₂_ref(20)| against SciPy's Radau in z
at rtol 1e-13, atol 1e-16 with the analytic Jacobian (the package's θ at the end is not a measure of accuracy
in P or z: every path that keeps P in the row space of X ends at the same interpolator).

Run: ``python benchmarks/experiment_gf_multistep.py`` (about a minute).
"""

import itertools
import time

import numpy as np
from numba import njit
from scipy.integrate import solve_ivp

import dlnmomentum as dm
from dlnmomentum.kernels.small_linalg import _cholesky, _cholesky_solve

ALPHA = 0.01
T_MAX = 1e7
TOL = 1e-20
T_CHECK = 20.0  # the point along the way where accuracy is measured (the weights are still leaving 0.01)
# The points of the along-the-way accuracy, max over them of |θ − θ_ref|: the MGF experiment's (every 0.25 to t = 10,
# where the weights leave the initialisation and a multistep method's error builds up, then to 2000). This file's
# folder is on the path when it runs as a script.
from experiment_mgf_accuracy import T_ALONG  # noqa: E402

ROUNDS = 5
NEWTON_TOL_CVODE = 0.1

MAX_ORDER = 5
NEWTON_MAXITER = 4
MIN_FACTOR = 0.2
MAX_FACTOR = 10.0
KAPPA = np.array([0.0, -0.1850, -1.0 / 9.0, -0.0823, -0.0415, 0.0])
GAMMA = np.concatenate([[0.0], np.cumsum(1.0 / np.arange(1, MAX_ORDER + 1))])
ALPHA_NDF = (1.0 - KAPPA) * GAMMA
ERROR_CONST = KAPPA * GAMMA + 1.0 / np.arange(1, MAX_ORDER + 2)
COUNT_STEPS, COUNT_RHS, COUNT_LU, COUNT_JAC, COUNT_REJECTED = range(5)


@njit(cache=True)
def _mean_rows(X, v, out):
    """out = Xᵀv/n, as passes over the rows of X (they vectorise)."""
    n, d = X.shape
    inv_n = 1.0 / n
    for j in range(d):
        out[j] = 0.0
    for k in range(n):
        vk = v[k] * inv_n
        for j in range(d):
            out[j] += X[k, j] * vk


@njit(cache=True)
def _residual(X, XT, y, wp0, wm0, z, P, wp, wm, theta, r, g, with_g):
    """r = Xθ − y at z (P = Xᵀz/n, w± = w±(0)e^{∓P}); with ``with_g`` also g = Xᵀr/n."""
    n, d = X.shape
    _mean_rows(X, z, P)
    for j in range(d):
        e = np.exp(P[j])
        wp[j] = wp0[j] / e
        wm[j] = wm0[j] * e
        theta[j] = 0.25 * (wp[j] * wp[j] - wm[j] * wm[j])
    for k in range(n):
        r[k] = -y[k]
    for j in range(d):
        tj = theta[j]
        for k in range(n):
            r[k] += XT[j, k] * tj
    if with_g:
        _mean_rows(X, r, g)


@njit(cache=True)
def _factor(XT, wp, wm, c, S, RT):
    """Cholesky factors (the package's ``_cholesky``: S = RᵀR, R upper) of I + cXΣXᵀ/n; False if not positive
    definite."""
    d, n = XT.shape
    for a in range(n):
        for b in range(n):
            S[a, b] = 0.0
    for j in range(d):
        sj = 0.5 * (wp[j] * wp[j] + wm[j] * wm[j]) * c / n
        for a in range(n):
            xa = XT[j, a] * sj
            for b in range(a, n):
                S[a, b] += xa * XT[j, b]
    for a in range(n):
        S[a, a] += 1.0
    return _cholesky(S, RT)


@njit(cache=True)
def _change_D(D, order, factor, R, U, RU, tmp):
    """Rescale the difference array to the step h·factor (SciPy's ``change_D``)."""
    m = D.shape[1]
    for which in range(2):
        f = factor if which == 0 else 1.0
        M = R if which == 0 else U
        for j in range(order + 1):
            M[0, j] = 1.0
        for i in range(1, order + 1):
            M[i, 0] = 0.0
            for j in range(1, order + 1):
                M[i, j] = M[i - 1, j] * (i - 1 - f * j) / i
    for i in range(order + 1):
        for j in range(order + 1):
            s = 0.0
            for k in range(order + 1):
                s += R[i, k] * U[k, j]
            RU[i, j] = s
    for i in range(order + 1):
        for q in range(m):
            s = 0.0
            for k in range(order + 1):
                s += RU[k, i] * D[k, q]
            tmp[i, q] = s
    for i in range(order + 1):
        for q in range(m):
            D[i, q] = tmp[i, q]


@njit(cache=True)
def _scaled_rms(v, coef, scale, m):
    s = 0.0
    for q in range(m):
        e = coef * v[q] / scale[q]
        s += e * e
    return np.sqrt(s / m)


@njit(cache=True)
def ndf_gradient_flow(X, XT, y, wp0, wm0, rtol, atol, t_max, tol, cvode_test, out_state, counts):
    """Gradient flow in z to ``t_max`` or the first accepted point with train loss <= ``tol`` (< 0: none).

    ``out_state`` receives (z, G₂); ``counts`` steps, right-hand sides, factorisations, Jacobians, rejections.
    Returns the end time, or -1 on failure.
    """
    n, d = X.shape
    m = n + d
    D = np.zeros((MAX_ORDER + 3, m))
    R = np.zeros((MAX_ORDER + 1, MAX_ORDER + 1))
    U = np.zeros((MAX_ORDER + 1, MAX_ORDER + 1))
    RU = np.zeros((MAX_ORDER + 1, MAX_ORDER + 1))
    tmp = np.zeros((MAX_ORDER + 1, m))
    P = np.empty(d)
    wp = np.empty(d)
    wm = np.empty(d)
    theta = np.empty(d)
    r = np.empty(n)
    g = np.empty(d)
    S = np.empty((n, n))
    RT = np.empty((n, n))
    y_pred = np.empty(m)
    psi = np.empty(m)
    y_new = np.empty(m)
    corr = np.empty(m)
    dy = np.empty(n)
    scale = np.empty(m)
    for q in range(5):
        counts[q] = 0
    z0 = np.zeros(n)
    _residual(X, XT, y, wp0, wm0, z0, P, wp, wm, theta, r, g, True)
    counts[COUNT_RHS] += 1
    # Hairer's initial step on the z rows (z0 = 0: the 1e-6 branch)
    d0 = 0.0
    d1 = 0.0
    for k in range(n):
        d1 += (r[k] / atol) ** 2
    d1 = np.sqrt(d1 / n)
    h_abs = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    for k in range(n):
        D[1, k] = r[k] * h_abs
    for j in range(d):
        D[1, n + j] = g[j] * g[j] * h_abs
    wpJ = wp.copy()  # the weights where the Jacobian was taken
    wmJ = wm.copy()
    counts[COUNT_JAC] += 1
    order = 1
    n_equal = 0
    have_lu = False
    crate = 1.0
    newton_tol = NEWTON_TOL_CVODE if cvode_test else max(10.0 * 2.220446049250313e-16 / rtol, min(0.03, np.sqrt(rtol)))
    t = 0.0
    loss = 0.0
    for k in range(n):
        loss += r[k] * r[k]
    loss /= 2 * n
    while not (tol >= 0.0 and loss <= tol) and t < t_max:
        current_jac = False
        accepted = False
        error_norm = 0.0
        safety = 0.0
        t_new = t
        while not accepted:
            if h_abs < 1e-14 * max(t, 1.0):
                return -1.0
            t_new = t + h_abs
            if t_new > t_max:
                t_new = t_max
                _change_D(D, order, (t_new - t) / h_abs, R, U, RU, tmp)
                n_equal = 0
                have_lu = False
            h = t_new - t
            h_abs = h
            for q in range(m):
                s = 0.0
                for i in range(order + 1):
                    s += D[i, q]
                y_pred[q] = s
                scale[q] = atol + rtol * abs(s)
                p = 0.0
                for i in range(1, order + 1):
                    p += D[i, q] * GAMMA[i]
                psi[q] = p / ALPHA_NDF[order]
            c = h / ALPHA_NDF[order]
            converged = False
            n_iter = 0
            while not converged:
                if not have_lu:
                    if not _factor(XT, wpJ, wmJ, c, S, RT):
                        return -1.0
                    counts[COUNT_LU] += 1
                    have_lu = True
                    crate = 1.0
                for q in range(n):
                    y_new[q] = y_pred[q]
                    corr[q] = 0.0
                dy_old = -1.0
                for it in range(NEWTON_MAXITER):
                    n_iter = it + 1
                    _residual(X, XT, y, wp0, wm0, y_new[:n], P, wp, wm, theta, r, g, False)
                    counts[COUNT_RHS] += 1
                    finite = True
                    for q in range(n):
                        finite = finite and abs(r[q]) < np.inf
                    if not finite:
                        break
                    for q in range(n):
                        dy[q] = c * r[q] - psi[q] - corr[q]
                    _cholesky_solve(S, RT, dy)
                    nrm = _scaled_rms(dy, 1.0, scale, n)
                    if cvode_test:
                        if dy_old > 0.0:
                            crate = max(0.3 * crate, nrm / dy_old)
                        for q in range(n):
                            y_new[q] += dy[q]
                            corr[q] += dy[q]
                        if nrm * min(1.0, crate) <= newton_tol:
                            converged = True
                            break
                        if dy_old > 0.0 and nrm > 2.0 * dy_old:
                            break
                    else:
                        rate = nrm / dy_old if dy_old > 0.0 else -1.0
                        if dy_old > 0.0 and (rate >= 1.0 or rate ** (NEWTON_MAXITER - it) / (1.0 - rate) * nrm
                                              > newton_tol):
                            break
                        for q in range(n):
                            y_new[q] += dy[q]
                            corr[q] += dy[q]
                        if nrm == 0.0 or (dy_old > 0.0 and rate / (1.0 - rate) * nrm < newton_tol):
                            converged = True
                            break
                    dy_old = nrm
                if not converged:
                    if current_jac:
                        break
                    _residual(X, XT, y, wp0, wm0, y_pred[:n], P, wpJ, wmJ, theta, r, g, False)
                    counts[COUNT_JAC] += 1
                    have_lu = False
                    current_jac = True
            if not converged:
                h_abs *= 0.5
                _change_D(D, order, 0.5, R, U, RU, tmp)
                n_equal = 0
                have_lu = False
                counts[COUNT_REJECTED] += 1
                continue
            # the quadrature rows G₂ from g at the converged z (and the train loss there)
            _residual(X, XT, y, wp0, wm0, y_new[:n], P, wp, wm, theta, r, g, True)
            counts[COUNT_RHS] += 1
            for j in range(d):
                q = n + j
                corr[q] = c * g[j] * g[j] - psi[q]
                y_new[q] = y_pred[q] + corr[q]
            safety = 0.9 * (2 * NEWTON_MAXITER + 1) / (2 * NEWTON_MAXITER + n_iter)
            for q in range(m):
                scale[q] = atol + rtol * abs(y_new[q])
            error_norm = _scaled_rms(corr, ERROR_CONST[order], scale, m)
            if error_norm > 1.0:
                factor = max(MIN_FACTOR, safety * error_norm ** (-1.0 / (order + 1)))
                h_abs *= factor
                _change_D(D, order, factor, R, U, RU, tmp)
                n_equal = 0
                counts[COUNT_REJECTED] += 1
            else:
                accepted = True
        counts[COUNT_STEPS] += 1
        n_equal += 1
        t = t_new
        loss = 0.0
        for k in range(n):
            loss += r[k] * r[k]
        loss /= 2 * n
        for q in range(m):
            D[order + 2, q] = corr[q] - D[order + 1, q]
            D[order + 1, q] = corr[q]
        for i in range(order, -1, -1):
            for q in range(m):
                D[i, q] += D[i + 1, q]
        if n_equal < order + 1:
            continue
        f_minus = _scaled_rms(D[order], ERROR_CONST[order - 1], scale, m) ** (-1.0 / order) if order > 1 else 0.0
        f_same = error_norm ** (-1.0 / (order + 1)) if error_norm > 0.0 else np.inf
        f_plus = _scaled_rms(D[order + 2], ERROR_CONST[order + 1], scale, m) ** (-1.0 / (order + 2)) \
            if order < MAX_ORDER else 0.0
        best = f_minus
        delta = -1
        if f_same > best:
            best = f_same
            delta = 0
        if f_plus > best:
            best = f_plus
            delta = 1
        order += delta
        factor = min(MAX_FACTOR, safety * best)
        h_abs *= factor
        _change_D(D, order, factor, R, U, RU, tmp)
        n_equal = 0
        have_lu = False
    for q in range(m):
        out_state[q] = D[0, q]
    return t


def _best(fn, rounds=ROUNDS):
    out, best = None, np.inf
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def main():
    problem = dm.sparse_regression(n=20, d=30, s=5, seed=0)
    X = np.ascontiguousarray(problem.X, dtype=float)
    XT = np.ascontiguousarray(X.T)
    y = np.asarray(problem.y, dtype=float)
    n, d = X.shape
    wp0 = np.full(d, ALPHA)
    wm0 = np.full(d, ALPHA)

    def theta_of(P):
        return (wp0 ** 2 * np.exp(-2 * P) - wm0 ** 2 * np.exp(2 * P)) / 4

    def fun(t, u):  # z (n) and G₂ (d)
        P = X.T @ u[:n] / n
        r = X @ theta_of(P) - y
        g = X.T @ r / n
        return np.concatenate([r, g * g])

    def jac(t, u):
        P = X.T @ u[:n] / n
        sig = (wp0 ** 2 * np.exp(-2 * P) + wm0 ** 2 * np.exp(2 * P)) / 2
        r = X @ theta_of(P) - y
        g = X.T @ r / n
        Jz = -(X * sig) @ X.T / n
        out = np.zeros((n + d, n + d))
        out[:n, :n] = Jz
        out[n:, :n] = 2 * g[:, None] * (X.T @ Jz) / n
        return out

    ref = solve_ivp(fun, (0, T_CHECK), np.zeros(n + d), method="Radau", jac=jac, rtol=1e-13, atol=1e-16)
    theta_ref = theta_of(X.T @ ref.y[:n, -1] / n)
    g2_ref = ref.y[n:, -1]
    along = solve_ivp(fun, (0, T_ALONG[-1]), np.zeros(n + d), method="Radau", jac=jac, rtol=1e-13, atol=1e-16,
                      t_eval=T_ALONG)
    theta_along = [theta_of(X.T @ along.y[:n, i] / n) for i in range(len(T_ALONG))]

    def along_error(theta_at):  # max over T_ALONG of |θ − θ_ref|, θ_at(T) the run's θ at time T
        return max(np.abs(theta_at(T) - th).max() for T, th in zip(T_ALONG, theta_along, strict=True))

    rows = []

    # the package, the whole call: its default (the NDF in P since 0.6.0) and Rodas5P in P
    # (and the NDF at tighter tolerances: where its accuracy along the way meets the LSODA peer's)
    for scheme, name, kw in (("ndf", "package, NDF in P (default: auto, rtol 1e-11)", {}),
                             ("ndf", "package, NDF in P, rtol 5e-12, atol 5e-14", dict(rtol=5e-12, atol=5e-14)),
                             ("ndf", "package, NDF in P, rtol 2e-12, atol 2e-14", dict(rtol=2e-12, atol=2e-14)),
                             ("ndf", "package, NDF in P, rtol 1e-12, atol 1e-14", dict(rtol=1e-12, atol=1e-14)),
                             ("rodas", "package, Rodas5P in P (scheme rodas, rtol 1e-9)", dict(scheme="rodas"))):
        dm.gf(problem, t_max=T_MAX, tol=TOL, alpha=ALPHA, **kw)
        res, sec = _best(lambda kw=kw: dm.gf(problem, t_max=T_MAX, tol=TOL, alpha=ALPHA, **kw))
        assert res.config.scheme == scheme
        kw = dict(kw, scheme=scheme)
        at20 = dm.gf(problem, t_max=T_CHECK, alpha=ALPHA, **kw)
        e_along = along_error(lambda T, kw=kw: dm.gf(problem, t_max=T, alpha=ALPHA, **kw).theta)
        rows.append((name, sec, res.steps_done, res.rhs_evaluations, res.factorizations, float(res.t_done),
                     np.abs(at20.theta - theta_ref).max(), np.abs(at20.j_plus - g2_ref).max(), e_along))

    # the NDF in z
    state = np.zeros(n + d)
    counts = np.zeros(5, dtype=np.int64)
    for rtol, cvode in itertools.product((1e-9, 1e-10, 1e-11), (False, True)):
        atol = rtol * 1e-2
        ndf_gradient_flow(X, XT, y, wp0, wm0, rtol, atol, T_CHECK, -1.0, cvode, state, counts)
        th20 = theta_of(X.T @ state[:n] / n)
        g20 = state[n:].copy()

        def z_theta(T, rtol=rtol, atol=atol, cvode=cvode):
            ndf_gradient_flow(X, XT, y, wp0, wm0, rtol, atol, T, -1.0, cvode, state, counts)
            return theta_of(X.T @ state[:n] / n)

        e_along = along_error(z_theta)
        t_end, sec = _best(lambda rtol=rtol, atol=atol, cvode=cvode: ndf_gradient_flow(
            X, XT, y, wp0, wm0, rtol, atol, T_MAX, TOL, cvode, state, counts))
        rows.append((f"NDF in z, rtol {rtol:g}, {'CVODE-like' if cvode else 'SciPy'} Newton test", sec,
                     counts[COUNT_STEPS], counts[COUNT_RHS], counts[COUNT_LU], t_end,
                     np.abs(th20 - theta_ref).max(), np.abs(g20 - g2_ref).max(), e_along))

    # numbalsoda's compiled LSODA in z (difference Jacobian): what a compiled LSODA reaches in this coordinate
    try:
        import numba as nb
        from numbalsoda import lsoda, lsoda_sig
    except ImportError:
        lsoda = None
    if lsoda is not None:
        size = 1 + n * d + n

        @nb.cfunc(lsoda_sig)
        def rhs(t, u, du, p):
            data = nb.carray(p, (size,))
            data[0] += 1.0
            th = np.empty(d)
            for j in range(d):
                s = 0.0
                for k in range(n):
                    s += data[1 + k * d + j] * u[k]
                e = np.exp(s / n)
                th[j] = 0.25 * (ALPHA * ALPHA / (e * e) - ALPHA * ALPHA * e * e)
            for k in range(n):
                s = -data[1 + n * d + k]
                for j in range(d):
                    s += data[1 + k * d + j] * th[j]
                du[k] = s

        data0 = np.concatenate([[0.0], X.ravel(), y])
        for rtol in (1e-9, 1e-10):
            data = data0.copy()
            lsoda(rhs.address, np.zeros(n), np.array([0.0, T_CHECK, float(res.t_done)]), data=data, rtol=rtol,
                  atol=rtol * 1e-2, mxstep=10 ** 9)

            def run(rtol=rtol, data=data):
                data[0] = 0.0
                return lsoda(rhs.address, np.zeros(n), np.array([0.0, T_CHECK, float(res.t_done)]), data=data,
                             rtol=rtol, atol=rtol * 1e-2, mxstep=10 ** 9)

            (usol, ok), sec = _best(run)
            rows.append((f"numbalsoda LSODA in z, rtol {rtol:g} (to the package's t_done)", sec, None,
                         int(data[0]), None, float(res.t_done), np.abs(theta_of(X.T @ usol[1] / n) - theta_ref).max(),
                         np.nan, np.nan))

    # SciPy's LSODA in w± at rtol 1e-10: the peer of bench_rodas.py (event on the train loss)
    H = X.T @ X / n
    b = X.T @ y / n

    def fun_w(t, w):
        g = H @ ((w[:d] ** 2 - w[d:] ** 2) / 4) - b
        return np.concatenate([-g * w[:d], g * w[d:]])

    def jac_w(t, w):
        g = H @ ((w[:d] ** 2 - w[d:] ** 2) / 4) - b
        dtheta = np.concatenate([w[:d] / 2, -w[d:] / 2])
        G = H[np.r_[np.arange(d), np.arange(d)]][:, np.r_[np.arange(d), np.arange(d)]] * dtheta[None, :]
        G = np.concatenate([-w[:d, None] * G[:d], w[d:, None] * G[d:]])
        return G + np.diag(np.concatenate([-g, g]))

    def event(t, w):
        r = X @ ((w[:d] ** 2 - w[d:] ** 2) / 4) - y
        return np.log10(max(r @ r / (2 * n), 1e-300)) + 20

    event.terminal = True
    w0 = np.full(2 * d, ALPHA)
    sol20 = solve_ivp(fun_w, (0, T_CHECK), w0, method="LSODA", jac=jac_w, rtol=1e-10, atol=1e-12)
    sol, sec = _best(lambda: solve_ivp(fun_w, (0, T_MAX), w0, method="LSODA", jac=jac_w, rtol=1e-10, atol=1e-12,
                                       events=event), rounds=3)

    def lsoda_theta(T):
        w = solve_ivp(fun_w, (0, T), w0, method="LSODA", jac=jac_w, rtol=1e-10, atol=1e-12).y[:, -1]
        return (w[:d] ** 2 - w[d:] ** 2) / 4

    rows.append(("SciPy LSODA in w±, rtol 1e-10 (bench_rodas.py's peer)", sec, len(sol.t) - 1, sol.nfev, sol.nlu,
                 float(sol.t[-1]), np.abs((sol20.y[:d, -1] ** 2 - sol20.y[d:, -1] ** 2) / 4 - theta_ref).max(),
                 np.nan, along_error(lsoda_theta)))

    peer = rows[-1][1]
    print(f"\n{'run':<62} {'time':>9} {'x LSODA':>8} {'steps':>6} {'RHS':>6} {'LU':>5} {'t_end':>9} "
          f"{'θ(20) err':>10} {'G₂(20) err':>10} {'θ err, t = 0.5-2000':>20}")
    for name, sec, steps, rhs_n, lu, t_end, e_theta, e_g2, e_along in rows:
        print(f"{name:<62} {sec * 1e3:7.2f} ms {peer / sec:7.1f}x {steps if steps is not None else '-':>6} "
              f"{rhs_n:>6} {lu if lu is not None else '-':>5} {t_end:9.4g} {e_theta:10.1e} {e_g2:10.1e} "
              f"{e_along:20.1e}")


if __name__ == "__main__":
    main()
