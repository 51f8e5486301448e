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
    gamma = as_float("gamma", gamma, low=0.0, low_open=True)
    beta = as_float("beta", beta, low=0.0, high=1.0, high_open=True)
    return gamma, beta


def heavy_ball_quadratic(A, c, x0, gamma, beta, steps):
    """Heavy-ball MGD(γ, β) on the quadratic ``f(x) = ½xᵀAx - cᵀx`` from ``x1 = x0``.

    The paper's Figure 1 setting (and a check of the update rule against the
    closed form of the linear recurrence). ``A`` must be symmetric.

    Returns
    -------
    x : array
        The iterate after ``steps`` updates.
    status : int
        ``MAX_STEPS`` or ``DIVERGED``.
    """
    A, c, x = _quadratic(A, c, x0)
    gamma, beta = _gamma_beta(gamma, beta)
    steps = as_int("steps", steps, low=0)
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
        Momentum β in [0, 1).
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
    gamma, beta = _gamma_beta(gamma, beta)
    steps = as_int("steps", steps, low=0)
    every = as_int("every", every, low=1)
    k = np.arange(0, steps + 1, every, dtype=np.int64)
    if k[-1] != steps:
        k = np.append(k, np.int64(steps))
    path = np.empty((k.size, x.size))
    filled = np.zeros(1, dtype=np.int64)
    code = K._heavy_ball_quadratic_path(A, c, gamma, beta, x, x.copy(), every, steps, path, filled)
    m = int(filled[0])
    step = float(step_of(gamma, beta))
    return QuadraticPath(x=path[:m], k=k[:m], time=k[:m] * step,
                         status=Status.DIVERGED if code == DIVERGED else Status.MAX_STEPS,
                         gamma=gamma, beta=beta, lam=float(lam_of(gamma, beta)), eps=step)


def _phi1(z):
    """(e^z - 1)/z, element-wise, 1 at z = 0 (no cancellation for small z)."""
    out = np.ones_like(z)
    nz = z != 0
    out[nz] = np.expm1(z[nz]) / z[nz]
    return out


def _mode_responses(a, t, lam):
    r"""``h, φ`` of each eigen-mode ``a`` at each time ``t``, shape (len(t), len(a)).

    For the scalar mode :math:`\lambda\ddot z + \dot z + az = e`, :math:`z(0) = z_0`, :math:`\dot z(0) = 0`,
    :math:`z(t) = h(t)z_0 + \varphi(t)e`. λ = 0: :math:`h = e^{-at}`, :math:`\varphi = (1 - e^{-at})/a`
    (= t at a = 0), written with ``expm1`` to avoid cancellation. λ > 0: the state (z, ż, 1) obeys a linear
    ODE with the 3×3 matrix ``[[0, 1, 0], [-a/λ, -1/λ, 1/λ], [0, 0, 0]]``; ``h`` and ``φ`` are the (0, 0)
    and (0, 2) entries of its exponential at ``t`` (``scipy.linalg.expm``, one matrix per (t, a): no
    powers, so no error grows with t). One formula for over-, under- and critically damped modes
    (λa vs 1/4) and for a = 0.
    """
    if lam == 0.0:
        at = t[:, None] * a[None, :]
        return np.exp(-at), t[:, None] * _phi1(-at)
    from scipy.linalg import expm

    M = np.zeros((t.size, a.size, 3, 3))
    M[..., 0, 1] = t[:, None]
    M[..., 1, 0] = -(t[:, None] * a[None, :]) / lam
    M[..., 1, 1] = -t[:, None] / lam
    M[..., 1, 2] = t[:, None] / lam
    E = expm(M)
    return E[..., 0, 0], E[..., 0, 2]


def quadratic_flow(A, c, x0, lam, times):
    r"""MGF(λ) on ``f(x) = ½xᵀAx - cᵀx``: :math:`\lambda\ddot x + \dot x + Ax - c = 0`, solved exactly.

    Eq. (mgf:lambda) from :math:`x(0) = x_0`, :math:`\dot x(0) = 0` (the flow that MGD(γ, β) from
    :math:`x_1 = x_0` discretises, Proposition 1); λ = 0 is gradient flow :math:`\dot x = -(Ax - c)`. In
    the eigenbasis :math:`A = Q\,\mathrm{diag}(a)\,Q^\top` every mode is a scalar linear ODE solved in
    closed form (λ = 0) or by the exponential of its 3×3 state matrix (λ > 0; see
    :func:`_mode_responses`), valid for every damping λa (over-, under-, critically damped) and for
    a = 0 (singular ``A``: the flow then drifts along the null space when ``c`` has a component there).

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
        ``x`` of shape (T, d), ``time``, ``lam``.

    Raises
    ------
    ValueError, TypeError
        On malformed shapes, a non-symmetric or indefinite ``A``, a λ or times out of range (the message
        names the parameter).
    """
    A, c, x0 = _quadratic(A, c, x0)
    lam = as_float("lam", lam, low=0.0)
    t = as_array("times", times, ndim=1)
    if t.size < 1 or t[0] < 0 or np.any(np.diff(t) <= 0):
        raise ValueError("times must be a non-empty 1-dimensional array of finite times in [0, inf), "
                         f"strictly increasing, got {t if t.size <= 6 else f'an array of {t.size}'}")
    a, Q = np.linalg.eigh(A)
    scale = float(np.max(np.abs(a)))
    tol = 64 * np.finfo(float).eps * a.size * scale
    if a[0] < -tol:
        raise ValueError(f"A must be positive semi-definite, got the eigenvalue {a[0]!r} < 0")
    h, phi = _mode_responses(a, t, lam)
    z = h * (Q.T @ x0)[None, :] + phi * (Q.T @ c)[None, :]
    return QuadraticFlowPath(x=z @ Q.T, time=t, lam=lam)
