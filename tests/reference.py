"""Plain NumPy references, written straight from the paper's equations.

Independent of the package's kernels: (u, v) form of eq. (SMGD:diag), the
r(z) sums of Lemma 4 summed term by term, the mirror variable of
eq. (MGDmirror) by its double sum, MGF(λ) and gradient flow by SciPy's solvers.
"""

import numpy as np
from scipy.integrate import solve_ivp


def smgd_uv(X, y, gamma, beta, steps, u0, v0, batches=None):
    """Iterates of eq. (SMGD:diag) in the (u, v) form; returns arrays of w± for k = 0..steps.

    ``batches[k]`` lists the sample indices of update k (full batch when None).
    Row ``s`` of the output is the iterate after ``s`` updates (w_{s+1} in the
    paper's indexing, w_1 = w_0).
    """
    n, d = X.shape
    u, v = u0.astype(float).copy(), v0.astype(float).copy()
    u_prev, v_prev = u.copy(), v.copy()
    w_plus = np.empty((steps + 1, d))
    w_minus = np.empty((steps + 1, d))
    grads = np.empty((steps, d))
    w_plus[0], w_minus[0] = u + v, u - v
    for k in range(steps):
        theta = u * v
        if batches is None:
            g = X.T @ (X @ theta - y) / n
        else:
            rows = batches[k]
            g = X[rows].T @ (X[rows] @ theta - y[rows]) / len(rows)
        grads[k] = g
        u_new = u - gamma * g * v + beta * (u - u_prev)
        v_new = v - gamma * g * u + beta * (v - v_prev)
        u_prev, v_prev, u, v = u, v, u_new, v_new
        w_plus[k + 1], w_minus[k + 1] = u + v, u - v
    return w_plus, w_minus, grads


def heavy_ball_theta(problem, gamma, beta, steps, alpha=0.01):
    """θ after ``steps`` heavy-ball steps in w±, full batch, from w± = α·1:
    w±_{k+1} = w±_k ∓ γ g_k ⊙ w±_k + β(w±_k - w±_{k-1}), g = Xᵀ(Xθ - y)/n, θ = (w₊² - w₋²)/4, w_1 = w_0."""
    X, y = problem.X, problem.y
    wp = np.full(problem.d, alpha)
    wm = np.full(problem.d, alpha)
    wp_prev, wm_prev = wp.copy(), wm.copy()
    for _ in range(steps):
        theta = (wp * wp - wm * wm) / 4
        g = X.T @ (X @ theta - y) / problem.n
        wp, wp_prev = wp - gamma * g * wp + beta * (wp - wp_prev), wp
        wm, wm_prev = wm + gamma * g * wm + beta * (wm - wm_prev), wm
    return (wp * wp - wm * wm) / 4


def r(z):
    """r(z) = (z - 1) - ln|z| of Lemma 4."""
    return (z - 1.0) - np.log(np.abs(z))


def s_sums(w, beta):
    """S of Lemma 4 summed term by term over the recorded iterates ``w`` (rows k = 1, 2, ...)."""
    z = w[1:] / w[:-1]
    return (r(z) + beta * r(1.0 / z)).sum(axis=0) / (1.0 - beta)


def mirror_double_sum(grads, gamma, beta):
    """γ Σ_{m=1}^N Σ_{k=1}^m β^{m-k} ∇L(θ_k), by the double sum."""
    N = grads.shape[0]
    total = np.zeros(grads.shape[1])
    for m in range(N):
        weights = beta ** (m - np.arange(m + 1))
        total += weights @ grads[: m + 1]
    return gamma * total


def heavy_ball_quadratic_closed_form(A, c, x0, gamma, beta, steps):
    """Heavy ball on f(x) = ½xᵀAx - cᵀx via the eigen-decomposition of its linear recurrence.

    In the eigenbasis of A (eigenvalue a), e_k = x_k - x* obeys
    e_{k+1} = (1 + β - γa) e_k - β e_{k-1}, e_1 = e_0, solved by the roots of
    t² - (1+β-γa)t + β = 0 (complex in general).
    """
    a, Q = np.linalg.eigh(A)
    x_star = np.linalg.solve(A, c)
    e0 = Q.T @ (x0 - x_star)
    p = 1 + beta - gamma * a
    disc = np.sqrt((p * p - 4 * beta).astype(complex))
    t1, t2 = (p + disc) / 2, (p - disc) / 2
    # e_k = C1 t1^k + C2 t2^k with e_0 = e_1 = e0 (k counts iterates from w_0)
    with np.errstate(divide="ignore", invalid="ignore"):
        C1 = np.where(np.abs(t1 - t2) > 1e-14, e0 * (1 - t2) / (t1 - t2), e0)
        C2 = e0 - C1
    k = steps + 1  # iterate w_{steps+1}
    e = C1 * t1**k + C2 * t2**k
    return x_star + Q @ e.real


def _w_gradient(H, b, w):
    """(∇_w L for w = (w₊, w₋), ∇L(θ)) with θ = (w₊² - w₋²)/4, Hessian form ∇L = Hθ - b."""
    d = b.shape[0]
    wp, wm = w[:d], w[d:]
    g = H @ ((wp * wp - wm * wm) / 4) - b
    return np.concatenate([g * wp, -g * wm]), g


def w_hessian(H, b, w):
    """The Jacobian of ∇_w L (:func:`_w_gradient`) in w = (w₊, w₋): the Hessian of F in w-space,
    diag(g, -g) + ½ U H Uᵀ with U = (diag(w₊); -diag(w₋))."""
    d = b.shape[0]
    wp, wm = w[:d], w[d:]
    _, g = _w_gradient(H, b, w)
    return np.block([[np.diag(g) + wp[:, None] * H * (wp / 2)[None, :], -wp[:, None] * H * (wm / 2)[None, :]],
                     [-wm[:, None] * H * (wp / 2)[None, :], -np.diag(g) + wm[:, None] * H * (wm / 2)[None, :]]])


def mgf_radau(H, b, lam, t_max, w0, v0, rtol=1e-12, atol=1e-15, full=False):
    """θ(t_max) of MGF(λ), λ > 0, from (w₀, ẇ₀) (both ``(2d,)``, w = (w₊, w₋)): SciPy's Radau on the
    first-order system in (w, ẇ), λẅ + ẇ + ∇_w L = 0, with its exact Jacobian (``full``: (w, ẇ) instead)."""
    d = b.shape[0]

    def rhs(t, z):
        w, v = z[:2 * d], z[2 * d:]
        return np.concatenate([v, -(v + _w_gradient(H, b, w)[0]) / lam])

    def jac(t, z):
        Jg = w_hessian(H, b, z[:2 * d])
        J = np.zeros((4 * d, 4 * d))
        J[:2 * d, 2 * d:] = np.eye(2 * d)
        J[2 * d:, :2 * d] = -Jg / lam
        J[2 * d:, 2 * d:] = -np.eye(2 * d) / lam
        return J

    sol = solve_ivp(rhs, (0.0, t_max), np.concatenate([w0, v0]), method="Radau", rtol=rtol, atol=atol, jac=jac)
    if not sol.success:
        raise RuntimeError(f"Radau failed for lambda = {lam}: {sol.message}")
    w = sol.y[:2 * d, -1]
    if full:
        return w, sol.y[2 * d:, -1]
    return (w[:d] ** 2 - w[d:] ** 2) / 4


def gf_dop853(H, b, t_max, w0, rtol=1e-13, atol=1e-16, full=False):
    """θ(t_max) of gradient flow ẇ = -∇_w L from w₀ (``(2d,)``): SciPy's DOP853 (``full``: w instead)."""
    d = b.shape[0]
    sol = solve_ivp(lambda t, w: -_w_gradient(H, b, w)[0], (0.0, t_max), w0, method="DOP853", rtol=rtol,
                    atol=atol)
    if not sol.success:
        raise RuntimeError(f"DOP853 failed: {sol.message}")
    w = sol.y[:, -1]
    if full:
        return w
    return (w[:d] ** 2 - w[d:] ** 2) / 4



def gf_radau(H, b, t_max, w0, rtol=1e-10, atol=1e-13):
    """θ(t_max) of gradient flow ẇ = -∇_w L from w₀ (``(2d,)``): SciPy's Radau with the exact Jacobian (a stiff
    reference for long horizons, where DOP853 would take ~1e6 steps)."""
    d = b.shape[0]

    def jac(t, w):
        return -w_hessian(H, b, w)

    sol = solve_ivp(lambda t, w: -_w_gradient(H, b, w)[0], (0.0, t_max), w0, method="Radau", rtol=rtol, atol=atol,
                    jac=jac)
    if not sol.success:
        raise RuntimeError(f"Radau failed: {sol.message}")
    w = sol.y[:, -1]
    return (w[:d] ** 2 - w[d:] ** 2) / 4


def largest_w2_dop853(H, b, lam, t_max, w0, rtol=1e-12, atol=1e-15):
    """The largest w² of w₊, w₋ over [0, t_max] of MGF(λ) (λ > 0, from rest) or gradient flow (λ = 0) from w₀
    (``(2d,)``): SciPy's DOP853 with an event at each zero of each coordinate's velocity (where |w| turns; gradient
    flow: ẇ = ∓∇L⊙w± turns where ∇L_i does), the largest of w² at the events and the two ends."""
    d = b.shape[0]
    n = 2 * d

    def grad_w(w):
        return _w_gradient(H, b, w)[0]

    if lam > 0.0:
        def rhs(t, z):
            return np.concatenate([z[n:], -(z[n:] + grad_w(z[:n])) / lam])
        z0 = np.concatenate([w0, np.zeros(n)])
        events = [(lambda t, z, j=j: z[n + j]) for j in range(n)]
    else:
        def rhs(t, z):
            return -grad_w(z)
        z0 = np.asarray(w0, float)
        events = [(lambda t, z, j=j: _w_gradient(H, b, z)[1][j]) for j in range(d)]
    sol = solve_ivp(rhs, (0.0, t_max), z0, method="DOP853", rtol=rtol, atol=atol, events=events)
    if not sol.success:
        raise RuntimeError(f"DOP853 failed for lambda = {lam}: {sol.message}")
    points = [z0[:n], sol.y[:n, -1]] + [ye[:, :n] for ye in sol.y_events if len(ye)]
    return max(float(np.max(np.square(p))) for p in points)
