r"""Heavy-ball MGD and its continuous limits on a quadratic: the paper's Figure 1 setting.

On :math:`f(x) = \tfrac12 x^\top A x - c^\top x` (``A`` symmetric):

* :func:`heavy_ball_quadratic` — MGD(γ, β), eq. (mgd), from :math:`x_1 = x_0`: the final iterate;
* :func:`heavy_ball_quadratic_path` — the same iterates, sampled, with their MGF times
  :math:`t_k = k\varepsilon`, :math:`\varepsilon = \gamma/(1-\beta)` (Proposition 1,
  ``prop:discretisation``), as a :class:`QuadraticPath`;
* :func:`quadratic_flow` — MGF(λ), eq. (mgf:lambda), :math:`\lambda\ddot x + \dot x + Ax - c = 0`,
  :math:`x(0) = x_0`, :math:`\dot x(0) = 0` (gradient flow for λ = 0), solved exactly mode by mode in
  the eigenbasis of ``A``, as a :class:`QuadraticFlowPath`.
"""

from dataclasses import dataclass

import numpy as np

from ..kernels import mgd as K
from ..status import DIVERGED, MAX_STEPS, Status
from ..theory.maps import eps as step_of
from ..theory.maps import lam as lam_of
from ..validate import MAX_STEPS as STEP_LIMIT
from ..validate import as_array, as_float, as_int


@dataclass(frozen=True)
class QuadraticPath:
    """Sampled iterates of MGD(γ, β) on a quadratic (:func:`heavy_ball_quadratic_path`).

    Attributes
    ----------
    x : ndarray, shape (m, d)
        Iterates ``x_k`` for ``k`` in :attr:`k` (row 0 is ``x_0``).
    k : ndarray of int64, shape (m,)
        Iterate indices: 0, every, 2·every, ..., and ``steps`` (always the last row unless diverged).
    time : ndarray, shape (m,)
        MGF time ``k·ε`` of each iterate, ε = γ/(1-β) (Proposition 1).
    status : Status
        ``MAX_STEPS``, or ``DIVERGED`` (the rows stop at the last recorded finite iterate).
    gamma, beta : float
        The MGD parameters.
    lam : float
        λ = γ/(1-β)² of the MGF(λ) the iterates discretise.
    eps : float
        The discretisation step ε = γ/(1-β).
    """

    x: np.ndarray
    k: np.ndarray
    time: np.ndarray
    status: Status
    gamma: float
    beta: float
    lam: float
    eps: float


@dataclass(frozen=True)
class QuadraticFlowPath:
    """MGF(λ) on a quadratic at given times (:func:`quadratic_flow`).

    Attributes
    ----------
    x : ndarray, shape (len(time), d)
        ``x(t)`` at each time.
    time : ndarray
        The times asked for.
    lam : float
        λ (0: gradient flow).
    """

    x: np.ndarray
    time: np.ndarray
    lam: float


def _quadratic(A, c, x0):
    """Validated (A, c, x0): A a symmetric (d, d) matrix, c and x0 of shape (d,), all finite."""
    A = as_array("A", A, ndim=2)
    d = A.shape[0]
    if A.shape != (d, d) or d < 1:
        raise ValueError(f"A must be a non-empty symmetric square matrix, got shape {A.shape}")
    if not np.array_equal(A, A.T):
        raise ValueError(f"A must be symmetric (A == A.T exactly), got max |A - A.T| = {np.max(np.abs(A - A.T))!r}")
    c = as_array("c", c, ndim=1, shape=(d,))
    x0 = as_array("x0", x0, ndim=1, shape=(d,))
    return A, c, x0


def _gamma_beta(gamma, beta):
    """``(gamma, beta, lam, eps)``: γ in (0, inf), β in [0, 1), and the MGF parameters λ = γ/(1-β)², ε = γ/(1-β)
    finite (a ValueError naming gamma and beta otherwise).  One domain for :func:`heavy_ball_quadratic` and
    :func:`heavy_ball_quadratic_path`: the path needs λ and ε, and the final iterate alone took γ = 1e308 (status
    DIVERGED) that the path refused."""
    gamma = as_float("gamma", gamma, low=0.0, low_open=True)
    beta = as_float("beta", beta, low=0.0, high=1.0, high_open=True)
    return gamma, beta, float(lam_of(gamma, beta)), float(step_of(gamma, beta))


def heavy_ball_quadratic(A, c, x0, gamma, beta, steps):
    """Heavy-ball MGD(γ, β) on the quadratic ``f(x) = ½xᵀAx - cᵀx`` from ``x1 = x0``.

    The paper's Figure 1 setting (and a check of the update rule against the
    closed form of the linear recurrence). ``A`` must be symmetric.

    ``gamma``, ``beta`` and the other arguments are checked as in :func:`heavy_ball_quadratic_path` (λ = γ/(1-β)²
    and ε = γ/(1-β) finite), so the two take the same inputs and end with the same status.

    Returns
    -------
    x : array
        The iterate after ``steps`` updates (``DIVERGED``: the last iterate within (-1e150, 1e150)).
    status : int
        ``MAX_STEPS`` or ``DIVERGED``.
    """
    A, c, x = _quadratic(A, c, x0)
    gamma, beta, _, _ = _gamma_beta(gamma, beta)
    steps = as_int("steps", steps, low=0, high=STEP_LIMIT)
    x_prev = x.copy()
    code = K._heavy_ball_quadratic(A, c, gamma, beta, x, x_prev, steps)
    return x, (DIVERGED if code == DIVERGED else MAX_STEPS)


def heavy_ball_quadratic_path(A, c, x0, gamma, beta, steps, every=1):
    r"""The iterates of MGD(γ, β) on ``f(x) = ½xᵀAx - cᵀx`` from ``x_1 = x_0``, every ``every``-th.

    :math:`x_{k+1} = x_k - \gamma(Ax_k - c) + \beta(x_k - x_{k-1})` (eq. (mgd)), the same arithmetic
    as :func:`heavy_ball_quadratic` (its final iterate is the last row, bit for bit). By
    Proposition 1 (``prop:discretisation``) ``x_k`` discretises MGF(λ), λ = γ/(1-β)², at time
    ``k·ε``, ε = γ/(1-β) (β = 0: gradient descent, ε = γ, gradient flow time).

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric matrix (finite).
    c, x0 : array_like, shape (d,)
        Linear term and initial iterate (finite).
    gamma : float
        Step size γ in (0, inf).
    beta : float
        Momentum β in [0, 1); λ = γ/(1-β)² and ε = γ/(1-β) must be finite (a ValueError naming gamma and beta).
    steps : int
        Number of updates, in [0, inf).
    every : int
        Record every ``every``-th iterate (and always the last), in [1, inf).

    Returns
    -------
    QuadraticPath
        ``x`` (m, d), ``k``, ``time``, ``status`` (``MAX_STEPS``, or ``DIVERGED`` when an iterate
        overflowed: the path then stops at the last recorded finite iterate, never NaN),
        ``gamma``, ``beta``, ``lam``, ``eps``.

    Raises
    ------
    ValueError, TypeError
        On malformed shapes, a non-symmetric ``A``, non-finite entries or parameters out of range
        (the message names the parameter).
    """
    A, c, x = _quadratic(A, c, x0)
    gamma, beta, lam, step = _gamma_beta(gamma, beta)
    steps = as_int("steps", steps, low=0, high=STEP_LIMIT)
    every = as_int("every", every, low=1, high=STEP_LIMIT)
    k = np.arange(0, steps + 1, every, dtype=np.int64)
    if k[-1] != steps:
        k = np.append(k, np.int64(steps))
    path = np.empty((k.size, x.size))
    filled = np.zeros(1, dtype=np.int64)
    code = K._heavy_ball_quadratic_path(A, c, gamma, beta, x, x.copy(), every, steps, path, filled)
    m = int(filled[0])
    with np.errstate(over="ignore"):
        time = k[:m] * step
    if not np.all(np.isfinite(time)):  # bounded iterates (x0 a minimiser) for more than realmax/ε steps
        first = int(np.argmin(np.isfinite(time)))
        raise ValueError(f"the MGF time k·eps of iterate k = {int(k[first])} overflows float64 (eps = gamma/(1-beta) = "
                         f"{step!r} for gamma = {gamma!r}, beta = {beta!r}): steps must be at most "
                         f"{np.finfo(np.float64).max / step:.3g} at this eps")
    return QuadraticPath(x=path[:m], k=k[:m], time=time,
                         status=Status.DIVERGED if code == DIVERGED else Status.MAX_STEPS,
                         gamma=gamma, beta=beta, lam=lam, eps=step)


def _phi1(z):
    """(e^z - 1)/z, element-wise, 1 at z = 0 (no cancellation for small z)."""
    out = np.ones_like(z)
    nz = z != 0
    out[nz] = np.expm1(z[nz]) / z[nz]
    return out


#: The largest error of an under-damped mode's response h from the rounding of its phase that quadratic_flow returns.
_PHASE_ERROR = 1e-6
#: Terms of the power series of φ (its argument is bounded by _SERIES_RADIUS where it is used).
_SERIES_TERMS = 60
_SERIES_RADIUS = 8.0


def _mode_responses(a, t, lam):
    r"""``h, φ`` of each eigen-mode ``a`` at each time ``t``, shape (len(t), len(a)).

    For the scalar mode :math:`\lambda\ddot z + \dot z + az = e`, :math:`z(0) = z_0`, :math:`\dot z(0) = 0`,
    :math:`z(t) = h(t)z_0 + \varphi(t)e` (:math:`\varphi = (1 - h)/a` for a ≠ 0, and :math:`\lambda\ddot\varphi
    + \dot\varphi + a\varphi = 1`). Closed forms, written so that no step cancels or overflows:

    * λ = 0: :math:`h = e^{-at}`, :math:`\varphi = t\,\varphi_1(-at)`, :math:`\varphi_1(z) = (e^z - 1)/z`;
    * λ > 0, with τ = t/(2λ) and D = 1 - 4λa (the damping: over D > 0, critical D = 0, under D < 0).
      Over-damped, r = √D, rates s₁ = μ₊t = -2at/(1+r) (no cancellation) and s₂ = s₁ - x, x = 2τr:
      :math:`h = e^{s_1}[(1 + e^{-x})/2 + (1 - e^{-x})/(2r)]` (positive terms). Under- or critically damped,
      θ = τ√(-D): :math:`h = e^{-\tau}[\cos\theta + \tau\,\sin\theta/\theta]`.
      φ three ways, each with a bound of its rounding error relative to φ; the smallest is used:
      (A) :math:`(1 - h)/a` (bad only when h ≈ 1); (B) over-damped,
      :math:`t\,[\varphi_1(s_1) - \varphi_1(s_2)]/r` (bad only when s₁ ≈ s₂); (C) the power series
      :math:`(t^2/\lambda)\sum_n h_n/(n+2)!`, :math:`h_n = p\,h_{n-1} - q\,h_{n-2}`, p = s₁+s₂ = -2τ,
      q = s₁s₂ = at²/λ (the divided differences of exp at 0, s₁, s₂; used only where |s| is small, which
      covers the early times where h ≈ 1 and s₁ ≈ s₂ near critical damping and a = 0).

    Checked against 50-digit exponentials of the 3×3 state matrix to a few units of rounding (relative
    in φ, absolute in h) over λ in [1e-8, 1e4], a in {0, 1e-12, critical ± 1e-10, ..., 1e8}, t in [0, 1e6].
    """
    T = np.broadcast_to(t[:, None], (t.size, a.size))
    A = np.broadcast_to(a[None, :], T.shape)
    if lam == 0.0:
        with np.errstate(over="ignore"):
            at = T * A
        # at >= 1: φ = (1 - e^{-at})/a directly (a > 0 there); t·φ₁(-at) = t·(1 - e^{-at})/(at) was 0 where at
        # overflowed (t = 1e308: t·0) and subnormal beyond at ≈ 4e307, not the limit 1/a
        big = at >= 1.0
        phi = np.where(big, -np.expm1(-at) / np.where(big, A, 1.0), T * _phi1(np.where(big, 0.0, -at)))
        return np.exp(-at), phi
    # Written for every finite t, λ and a, absurd horizons included (t = 1e308 gave NaN): 2λ, 4λa, t²/λ and
    # at²/λ overflowed where the quantities they stand for do not.
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        tau = 0.5 * (T / lam)
        D = 1.0 - 4.0 * (lam * A)  # (4λ·0 was NaN for λ > 4.5e307); -inf where λa overflows: under-damped
        over = D > 0
        r = np.sqrt(np.where(over, D, 0.0))
        r_safe = np.where(over, r, 1.0)
        # θ = τ√(-D); where 4λa overflowed, √(-D)/(2λ) is √(a/λ) to rounding
        theta = np.where(over, 0.0, np.where(np.isfinite(D), tau * np.sqrt(np.where(over, 0.0, -D)),
                                             T * (np.sqrt(A) / np.sqrt(lam))))
        s1 = (-2.0 * A / (1.0 + r)) * T
        x = 2.0 * tau * r
        h_over = np.exp(s1) * ((1.0 + np.exp(-x)) / 2.0 + (-np.expm1(-x)) / (2.0 * r_safe))
        sinc = np.sin(theta) / np.where(theta == 0, 1.0, theta)
        h_under = np.exp(-tau) * (np.cos(theta) + tau * np.where(theta == 0, 1.0, sinc))
        # |h_under| <= e^{-τ}(1 + τ) < 1e-340 beyond τ = 800: 0 in float64 (cos and sin of an overflowed θ were NaN)
        h_under = np.where(tau > 800.0, 0.0, h_under)
        h = np.where(over, h_over, h_under)
        # The phase θ carries a rounding error of a few θ·2⁻⁵³ (t, λ, a are rounded): h's error is up to
        # e^{-τ}(1 + τ) times that: beyond _PHASE_ERROR (θ ~ 1e9 while the envelope is not negligible, λa of
        # 1e17 and more) x(t) is refused, not returned as an arbitrary number in the envelope (it was)
        phase = np.where(over | (tau > 800.0), 0.0, np.exp(-tau) * (1.0 + tau) * theta * (4 * np.finfo(float).eps))
    if np.any(~(phase <= _PHASE_ERROR)):
        i, j = np.unravel_index(np.argmax(~(phase <= _PHASE_ERROR)), phase.shape)
        raise ValueError(f"x(t) of MGF(lam = {lam!r}) is not resolved at times[{i}] = {float(t[i])!r}: the mode of "
                         f"eigenvalue {float(a[j])!r} oscillates with phase t·sqrt(a/lam) ≈ {theta[i, j]:.3g} there, "
                         f"whose rounding error changes x(t) by more than {_PHASE_ERROR:g}; ask for earlier times")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        phi_a = (1.0 - h) / A
        err_a = np.where(A != 0, (1.0 + np.abs(h)) / np.abs(1.0 - h), np.inf)
        p1, p2 = _phi1(s1), _phi1(s1 - x)
        phi_b = T * (p1 - p2) / r_safe
        err_b = np.where(over & (x > 0), (p1 + p2) / np.abs(p1 - p2), np.inf)
        p, q = -2.0 * tau, A * T * (T / lam)
        small = np.abs(p) + np.sqrt(np.abs(q)) < _SERIES_RADIUS
        p, q = np.where(small, p, 0.0), np.where(small, q, 0.0)
        h_prev, h_n, coef = np.zeros_like(p), np.ones_like(p), 0.5
        total, magnitude = coef * h_n, np.abs(coef * h_n)
        for n in range(1, _SERIES_TERMS):
            h_prev, h_n = h_n, p * h_n - q * h_prev
            coef /= n + 2
            total = total + coef * h_n
            magnitude = magnitude + np.abs(coef * h_n)
        phi_c = T * ((T / lam) * total)  # (t²/λ overflowed for t > 1e154: φ <= t)
        err_c = np.where(small & (total != 0), magnitude / np.abs(total), np.inf)
    # a bound that is 0/0 (both φ₁ underflowed to 0 at s₁ = -inf) says nothing: never chosen (argmin picks NaN)
    errors = np.stack([err_a, err_b, err_c])
    best = np.argmin(np.where(np.isnan(errors), np.inf, errors), axis=0)
    phi = np.choose(best, [phi_a, phi_b, phi_c])
    return h, np.where(T == 0, 0.0, phi)


def quadratic_flow(A, c, x0, lam, times):
    r"""MGF(λ) on ``f(x) = ½xᵀAx - cᵀx``: :math:`\lambda\ddot x + \dot x + Ax - c = 0`, solved exactly.

    Eq. (mgf:lambda) from :math:`x(0) = x_0`, :math:`\dot x(0) = 0` (the flow that MGD(γ, β) from
    :math:`x_1 = x_0` discretises, Proposition 1); λ = 0 is gradient flow :math:`\dot x = -(Ax - c)`. In
    the eigenbasis :math:`A = Q\,\mathrm{diag}(a)\,Q^\top` every mode is a scalar linear ODE solved in
    closed form (:func:`_mode_responses`), valid for every damping λa (over-, under-, critically damped)
    and for a = 0 (singular ``A``: the flow then drifts along the null space when ``c`` has a component
    there), accurate to a few units of rounding at any time (no error grows with t: nothing is stepped).

    Parameters
    ----------
    A : array_like, shape (d, d)
        Symmetric positive semi-definite matrix (finite).
    c, x0 : array_like, shape (d,)
        Linear term and initial point (finite).
    lam : float
        λ in [0, inf).
    times : array_like, shape (T,)
        Times, finite, in [0, inf) and strictly increasing, T ≥ 1.

    Returns
    -------
    QuadraticFlowPath
        ``x`` of shape (T, d), ``time``, ``lam``: finite at every finite time, the limits included
        (x(1e308) is the minimiser for a positive definite ``A``).

    Raises
    ------
    ValueError, TypeError
        On malformed shapes, a non-symmetric or indefinite ``A``, a λ or times out of range (the message
        names the parameter), or where x(t) is not representable in float64 (it overflows: a drift along the
        null space of ``A`` at t near 1e308; the message names the first such time).
    """
    A, c, x0 = _quadratic(A, c, x0)
    lam = as_float("lam", lam, low=0.0)
    t = as_array("times", times, ndim=1)
    if t.size < 1 or t[0] < 0 or np.any(np.diff(t) <= 0):
        raise ValueError("times must be a non-empty 1-dimensional array of finite times in [0, inf), "
                         f"strictly increasing, got {t if t.size <= 6 else f'an array of {t.size}'}")
    with np.errstate(over="ignore", invalid="ignore"):
        a, Q = np.linalg.eigh(A)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(Q))):
        raise ValueError(f"A's eigen-decomposition overflows float64 (largest |A| entry {np.max(np.abs(A))!r}): "
                         "rescale A, c and x0")
    scale = float(np.max(np.abs(a)))
    tol = 64 * np.finfo(float).eps * a.size * scale
    if a[0] < -tol:
        raise ValueError(f"A must be positive semi-definite, got the eigenvalue {a[0]!r} < 0")
    h, phi = _mode_responses(a, t, lam)
    with np.errstate(over="ignore", invalid="ignore"):
        z = h * (Q.T @ x0)[None, :] + phi * (Q.T @ c)[None, :]
        x = z @ Q.T
    bad = ~np.all(np.isfinite(x), axis=1)
    if np.any(bad):  # x(t) itself beyond float64 (a drift c·t along A's null space at t ~ 1e308, a ~ 1e-320 modes)
        i = int(np.argmax(bad))
        raise ValueError(f"x(t) of MGF(lam = {lam!r}) overflows float64 at times[{i}] = {float(t[i])!r}: ask for "
                         "earlier times or rescale A, c, x0")
    return QuadraticFlowPath(x=x, time=t, lam=lam)
