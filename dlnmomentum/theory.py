"""The paper's closed-form theory as code.

Papazov, Pesme & Flammarion, *Leveraging continuous time to understand momentum when training
diagonal linear networks*.  This module is self-contained (NumPy and SciPy only) and holds

* the parameter maps between momentum gradient descent MGD(γ, β) and momentum gradient flow
  MGF(λ) (Proposition 1, Corollary 1 "acceleration rule", Appendix A's central-difference variant,
  Proposition 3's small-λ bound);
* the hyperbolic entropy ψ_Δ (eq. ``hyperbolic_entropy``), its gradient, Hessian and Bregman
  divergence, evaluated without overflow or catastrophic cancellation for Δ in [1e-300, 1e300];
* the implicit-bias problem of Theorems 1 and 2,
  ``argmin_{Xθ = y} D_{ψ_Δ}(θ, θ̃₀)``, solved by damped Newton on its n-dimensional dual, and the
  minimum-ℓ1 / minimum-ℓ2 interpolators it tends to as Δ → 0 / Δ → ∞;
* :func:`predict`, which bundles the Theorem 2 prediction used by the result objects.

Notation: ``a = arcsinh(2θ/Δ)`` is the "mirror coordinate" (``∇ψ_Δ(θ) = a/2``), so that
``θ = (Δ/2) sinh a`` and ``sqrt(4θ² + Δ²) = Δ cosh a``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.optimize

__all__ = [
    "ImplicitBiasResult",
    "Prediction",
    "accelerate",
    "bregman",
    "eps",
    "from_lam_eps",
    "hyperbolic_entropy",
    "hyperbolic_entropy_grad",
    "hyperbolic_entropy_hess",
    "implicit_bias",
    "lam",
    "lam_central",
    "min_l1_interpolator",
    "min_l2_interpolator",
    "predict",
    "small_lambda_bound",
]

_EPS = np.finfo(np.float64).eps
# Relative tolerance on ‖X θ_ls - y‖ / ‖y‖ above which y is declared outside range(X).
_RANGE_RTOL = 1e-10
# Largest change of the mirror coordinates arcsinh(2θ/Δ) allowed in one Newton iteration of implicit_bias.
_MAX_MIRROR_STEP = 20.0
_MAX_BACKTRACKS = 60
_ARMIJO = 1e-4
# Levenberg-Marquardt damping of the dual Newton steps (relative to the largest weight).
_DAMPING_DOWN = 0.1
_DAMPING_UP = 10.0
_DAMPING_MIN = 1e-12
# Primal polishing of implicit_bias: at most _POLISH_STEPS steps, once ‖Xθ - y‖/‖y‖ <= _POLISH_FROM.
_POLISH_FROM = 1e-3
_POLISH_STEPS = 3
# ... and only while the polishing step changes every mirror coordinate by at most this (linearisation valid).
_POLISH_MAX_MIRROR = 1e-6
# Continuation in Δ (implicit_bias): used when ln(C / min Δ) exceeds _HOMOTOPY_START (C = solution scale);
# stages clip Δ from below at C e^{-20}, C e^{-20-_HOMOTOPY_STEP}, ...; intermediate stages are solved to
# _HOMOTOPY_TOL.
_HOMOTOPY_START = 20.0
_HOMOTOPY_STEP = 40.0
_HOMOTOPY_TOL = 1e-6


# ---------------------------------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------------------------------

def _real_array(name, value):
    """``value`` as a float64 array (scalars become 0-d arrays); non-real input is a TypeError."""
    if isinstance(value, bool | np.bool_):
        raise TypeError(f"{name} must be real-valued, got bool")
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be real-valued: {exc}") from None
    return arr


def _check_range(name, arr, *, low=None, high=None, low_open=False, high_open=False):
    """Raise ``ValueError`` naming ``name`` and the allowed range unless all entries of ``arr`` lie in it."""
    lo = "(" if low_open or low is None else "["
    hi = ")" if high_open or high is None else "]"
    rng = f"{lo}{'-inf' if low is None else low}, {'inf' if high is None else high}{hi}"
    ok = np.isfinite(arr)
    if low is not None:
        ok &= (arr > low) if low_open else (arr >= low)
    if high is not None:
        ok &= (arr < high) if high_open else (arr <= high)
    if not np.all(ok):
        shown = float(arr[~ok].flat[0]) if arr.ndim else float(arr)
        raise ValueError(f"{name} must be finite and in {rng}, got {shown!r}")


def _scalar_or_array(arr):
    """Return a Python float for 0-d results, the array otherwise."""
    return float(arr) if np.ndim(arr) == 0 else arr


def _gamma_beta(gamma, beta):
    g = _real_array("gamma", gamma)
    b = _real_array("beta", beta)
    _check_range("gamma", g, low=0, low_open=True)
    _check_range("beta", b, low=0, high=1, high_open=True)
    return g, b


def _positive_vector(name, value, d):
    """A length-``d`` float64 vector of positive finite entries (scalars are broadcast)."""
    arr = _real_array(name, value)
    _check_range(name, arr, low=0, low_open=True)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] not in (1, d)):
        raise ValueError(f"{name} must be a scalar or have shape ({d},), got shape {arr.shape}")
    return np.ascontiguousarray(np.broadcast_to(arr, (d,)), dtype=np.float64)


def _finite_vector(name, value, d):
    arr = _real_array(name, value)
    _check_range(name, arr)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] not in (1, d)):
        raise ValueError(f"{name} must be a scalar or have shape ({d},), got shape {arr.shape}")
    return np.ascontiguousarray(np.broadcast_to(arr, (d,)), dtype=np.float64)


def _design(X, y):
    """Validate a design matrix X (n, d) and targets y (n,)."""
    X = _real_array("X", X)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-dimensional array of shape (n, d), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X must contain only finite values")
    y = _real_array("y", y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X of shape {X.shape}, got {y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("y must contain only finite values")
    return np.ascontiguousarray(X), np.ascontiguousarray(y)


def _theta_delta(theta, delta):
    t = _real_array("theta", theta)
    _check_range("theta", t)
    dl = _real_array("delta", delta)
    _check_range("delta", dl, low=0, low_open=True)
    try:
        t, dl = np.broadcast_arrays(t, dl)
    except ValueError:
        raise ValueError(f"theta of shape {t.shape} and delta of shape {dl.shape} do not broadcast") from None
    return t, dl


# ---------------------------------------------------------------------------------------------------
# 1. Parameter maps (Proposition 1, Corollary 1, Appendix A, Proposition 3)
# ---------------------------------------------------------------------------------------------------

def lam(gamma, beta):
    """MGF parameter λ = γ / (1 - β)² of MGD(γ, β) (Proposition 1, ``prop:discretisation``).

    Parameters
    ----------
    gamma : float or array_like
        Step size γ > 0 (finite).
    beta : float or array_like
        Momentum parameter β in [0, 1).  Broadcast against ``gamma``.

    Returns
    -------
    float or ndarray
        λ, such that MGD(γ, β) is the discretisation (eq. ``mgf:discretisation``) of
        ``λ ẅ + ẇ + ∇F(w) = 0`` with step ε = γ / (1 - β).

    Raises
    ------
    ValueError
        If γ ≤ 0, γ is not finite, or β is outside [0, 1).
    """
    g, b = _gamma_beta(gamma, beta)
    return _scalar_or_array(g / (1.0 - b) ** 2)


def eps(gamma, beta):
    """Discretisation step ε = γ / (1 - β) = sqrt(λγ) of MGD(γ, β) (Proposition 1).

    One MGD step advances MGF(λ) time by ε.

    Parameters
    ----------
    gamma : float or array_like
        Step size γ > 0 (finite).
    beta : float or array_like
        Momentum parameter β in [0, 1).

    Returns
    -------
    float or ndarray
        ε.

    Raises
    ------
    ValueError
        If γ ≤ 0, γ is not finite, or β is outside [0, 1).
    """
    g, b = _gamma_beta(gamma, beta)
    return _scalar_or_array(g / (1.0 - b))


def lam_central(gamma, beta):
    """λ of the central-first-difference discretisation, (1 + β) γ / (2 (1 - β)²) (Appendix A).

    Discretising ``λ ẅ + ẇ + ∇F(w) = 0`` with a central first-order difference instead of a
    backward one gives MGD(γ, β) with this λ and the same step ε = γ / (1 - β).  It agrees with
    :func:`lam` as β → 1.

    Parameters
    ----------
    gamma : float or array_like
        Step size γ > 0 (finite).
    beta : float or array_like
        Momentum parameter β in [0, 1).

    Returns
    -------
    float or ndarray
        The central-difference λ.

    Raises
    ------
    ValueError
        If γ ≤ 0, γ is not finite, or β is outside [0, 1).
    """
    g, b = _gamma_beta(gamma, beta)
    return _scalar_or_array((1.0 + b) * g / (2.0 * (1.0 - b) ** 2))


def from_lam_eps(lam, eps):
    """Invert Proposition 1: MGD parameters (γ, β) = (ε² / λ, 1 - ε / λ) for MGF(λ) at step ε.

    Parameters
    ----------
    lam : float or array_like
        MGF parameter λ > 0 (finite).
    eps : float or array_like
        Discretisation step ε in (0, λ] (finite); ε ≤ λ is what makes β ≥ 0.

    Returns
    -------
    gamma, beta : float or ndarray
        Step size and momentum parameter, β in [0, 1).

    Raises
    ------
    ValueError
        If λ ≤ 0, ε ≤ 0, either is not finite, or ε > λ (which would give β < 0).
    """
    lm = _real_array("lam", lam)
    ep = _real_array("eps", eps)
    _check_range("lam", lm, low=0, low_open=True)
    _check_range("eps", ep, low=0, low_open=True)
    lm, ep = np.broadcast_arrays(lm, ep)
    if np.any(ep > lm):
        raise ValueError("eps must be in (0, lam] so that beta = 1 - eps/lam is in [0, 1), "
                         f"got eps={float(ep[ep > lm].flat[0])!r} > lam={float(lm[ep > lm].flat[0])!r}")
    ratio = ep / lm
    return _scalar_or_array(ep * ratio), _scalar_or_array(1.0 - ratio)


def accelerate(gamma, beta, rho):
    """Acceleration rule (Corollary 1, ``cor:speedup``): (γ̂, β̂) = (ρ² γ, 1 - ρ (1 - β)).

    MGD(γ̂, β̂) discretises the same MGF(λ) as MGD(γ, β) (same λ) with step ε̂ = ρ ε, so it runs
    ρ times faster along the same path.

    Parameters
    ----------
    gamma : float or array_like
        Step size γ > 0 (finite).
    beta : float or array_like
        Momentum parameter β in [0, 1).
    rho : float or array_like
        Speed-up factor ρ > 0 (finite); must satisfy ρ (1 - β) ≤ 1 so that β̂ ≥ 0.

    Returns
    -------
    gamma_hat, beta_hat : float or ndarray
        The accelerated parameters, β̂ in [0, 1).

    Raises
    ------
    ValueError
        If γ, β or ρ are out of range, or β̂ = 1 - ρ(1 - β) would be negative.
    """
    g, b = _gamma_beta(gamma, beta)
    r = _real_array("rho", rho)
    _check_range("rho", r, low=0, low_open=True)
    g, b, r = np.broadcast_arrays(g, b, r)
    one_minus_beta_hat = r * (1.0 - b)
    if np.any(one_minus_beta_hat > 1.0):
        bad = one_minus_beta_hat > 1.0
        raise ValueError("rho must satisfy rho * (1 - beta) <= 1 so that beta_hat = 1 - rho*(1 - beta) is "
                         f"in [0, 1), got rho={float(r[bad].flat[0])!r}, beta={float(b[bad].flat[0])!r}")
    return _scalar_or_array(r * r * g), _scalar_or_array(1.0 - one_minus_beta_hat)


def small_lambda_bound(X, y, delta0):
    """Proposition 3 (``small_lambda``): λ ≤ n · min_i Δ₀,ᵢ / ‖y‖² keeps the balancedness positive.

    For MGF(λ) with λ below this bound the balancedness Δ_t never vanishes, so Corollary 2 applies
    and Δ_∞ < Δ₀ coordinate-wise.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Design matrix (only n and d are used).
    y : array_like, shape (n,)
        Targets, not all zero.
    delta0 : float or array_like, shape (d,)
        Initial balancedness Δ₀ = |u₀² - v₀²| ≥ 0 (finite).

    Returns
    -------
    float
        The bound n · min(Δ₀) / ‖y‖².

    Raises
    ------
    ValueError
        On malformed shapes, negative or non-finite Δ₀, or y = 0.
    """
    X, y = _design(X, y)
    n, d = X.shape
    d0 = _real_array("delta0", delta0)
    _check_range("delta0", d0, low=0)
    if d0.ndim > 1 or (d0.ndim == 1 and d0.shape[0] not in (1, d)):
        raise ValueError(f"delta0 must be a scalar or have shape ({d},), got shape {d0.shape}")
    y_norm = np.linalg.norm(y)
    if y_norm == 0.0:
        raise ValueError("y must not be identically zero (the bound divides by ||y||^2)")
    return float(n * np.min(d0) / y_norm**2)


# ---------------------------------------------------------------------------------------------------
# 2. Hyperbolic entropy (eq. hyperbolic_entropy), gradient, Hessian, Bregman divergence
# ---------------------------------------------------------------------------------------------------

def _mirror(theta, delta):
    """a = arcsinh(2θ/Δ), overflow-safe: for |2θ/Δ| = inf use arcsinh(x) = sign(x) ln(2|x|) + O(x⁻²)."""
    with np.errstate(over="ignore"):
        x = (2.0 * theta) / delta
    a = np.arcsinh(x)
    big = ~np.isfinite(x)
    if np.any(big):
        t = np.abs(theta[big])
        a[big] = np.sign(theta[big]) * ((np.log(t) + np.log(4.0)) - np.log(delta[big]))
    return a


def _theta_of_mirror(a, delta):
    """θ = (Δ/2) sinh a, evaluated in the log domain when sinh a would overflow (may return ±inf)."""
    small = np.abs(a) < 700.0
    out = np.empty(np.broadcast(a, delta).shape)
    a_b, d_b = np.broadcast_arrays(a, delta)
    out[small] = 0.5 * d_b[small] * np.sinh(a_b[small])
    if not np.all(small):
        big = ~small
        with np.errstate(over="ignore"):
            out[big] = np.sign(a_b[big]) * np.exp(np.abs(a_b[big]) + np.log(0.25 * d_b[big]))
    return out


def _plus_minus(theta, delta):
    """P = (Δ/2) eᵃ = θ + sqrt(θ² + Δ²/4) and N = (Δ/2) e⁻ᵃ = P⁻¹ Δ²/4, each without cancellation."""
    half_h = 0.5 * np.hypot(2.0 * theta, delta)
    half_d = 0.5 * delta
    pos = theta >= 0
    big = np.where(pos, theta + half_h, half_h - theta)      # the larger of P, N
    with np.errstate(under="ignore"):
        small = half_d * (half_d / big)
    return np.where(pos, big, small), np.where(pos, small, big)


# Taylor coefficients (in powers of s, starting at s²) of
#   ξ(s) = s - (1 - e^{-2s})/2            = Σ_{n≥2} (-1)ⁿ 2ⁿ⁻¹ sⁿ / n!
#   ζ(s) = (1 - e^{-2s})/2 - s e^{-2s}    = Σ_{n≥2} (-1)ⁿ 2ⁿ⁻¹ (n - 1) sⁿ / n!
def _taylor(n_terms, weight):
    coef = []
    fact = 2.0
    for n in range(2, n_terms + 2):
        if n > 2:
            fact *= n
        coef.append((-1.0) ** n * 2.0 ** (n - 1) * weight(n) / fact)
    return np.array(coef)


_XI_COEF = _taylor(26, lambda n: 1.0)
_ZETA_COEF = _taylor(26, lambda n: n - 1.0)
_SERIES_CUTOFF = 0.5


def _horner(coef, s):
    acc = np.zeros_like(s)
    for c in coef[::-1]:
        acc = acc * s + c
    return acc


def _xi_zeta_scaled(s):
    """ξ(s)/s² and ζ(s)/s² for s ≥ 0, where ξ(s) = s - (1 - e^{-2s})/2, ζ(s) = (1 - e^{-2s})/2 - s e^{-2s}.

    Both ξ and ζ are ≥ 0 and ~ s² at 0; returning them divided by s² lets callers multiply by s² last
    (no underflow of s²).  Taylor series below s = 0.5, closed forms with ``expm1`` above.
    """
    xi = np.empty_like(s)
    zeta = np.empty_like(s)
    low = s < _SERIES_CUTOFF
    sl = s[low]
    xi[low] = _horner(_XI_COEF, sl)
    zeta[low] = _horner(_ZETA_COEF, sl)
    sh = s[~low]
    half_one_minus_e = -0.5 * np.expm1(-2.0 * sh)
    xi[~low] = (sh - half_one_minus_e) / sh / sh
    with np.errstate(under="ignore"):
        zeta[~low] = (half_one_minus_e - sh * np.exp(-2.0 * sh)) / sh / sh
    return xi, zeta


def _mirror_difference(theta1, theta2, delta, a1, a2):
    """a₁ - a₂ = arcsinh(2θ₁/Δ) - arcsinh(2θ₂/Δ) without cancellation.

    For θ₁θ₂ > 0 it uses sinh(a₁ - a₂) = 2(θ₁ - θ₂)(θ₁ + θ₂) / (θ₁ H₂ + θ₂ H₁), H = sqrt(4θ² + Δ²),
    whose denominator has no cancellation; for θ₁θ₂ ≤ 0 the plain difference has none either.
    """
    diff = a1 - a2
    same = ((theta1 > 0) & (theta2 > 0)) | ((theta1 < 0) & (theta2 < 0))   # not θ₁θ₂ > 0: it can underflow
    if np.any(same):
        # Scale exactly by a power of two ~ max(|θ₁|, |θ₂|) so that the products θₖ Hⱼ cannot underflow
        # (the ratio is scale-invariant and θ₁ - θ₂ stays exact when θ₁ ≈ θ₂).
        _, exponent = np.frexp(np.maximum(np.abs(theta1[same]), np.abs(theta2[same])))
        with np.errstate(over="ignore", invalid="ignore", under="ignore"):
            t1, t2 = np.ldexp(theta1[same], -exponent), np.ldexp(theta2[same], -exponent)
            dl = np.ldexp(delta[same], -exponent)
            h1 = np.hypot(2.0 * t1, dl)
            h2 = np.hypot(2.0 * t2, dl)
            s = 2.0 * (t1 - t2) * ((t1 + t2) / (t1 * h2 + t2 * h1))
            refined = np.arcsinh(s)
        diff[same] = np.where(np.isfinite(refined), refined, diff[same])
    return diff


def _bregman_terms(theta1, theta2, delta):
    """Coordinate-wise D_ψΔ(θ₁, θ₂) for broadcast float arrays (no validation).

    With a = arcsinh(2θ/Δ), h = (a₁ - a₂)/2, P = (Δ/2)eᵃ, N = (Δ/2)e⁻ᵃ the integral form
    D = (Δ/4) ∫_{a₂}^{a₁} (a - a₂) cosh a da (substitute a = (a₁ + a₂)/2 + u) evaluates to

        D = ½ [P₁ ξ(h) + N₂ ζ(h)]          for h ≥ 0,
        D = ½ [N₁ ξ(-h) + P₂ ζ(-h)]        for h < 0,

    a sum of non-negative terms (ξ, ζ ≥ 0), hence free of cancellation.
    """
    theta1, theta2, delta = np.broadcast_arrays(theta1, theta2, delta)
    theta1 = np.array(theta1, dtype=np.float64, ndmin=1)
    theta2 = np.array(theta2, dtype=np.float64, ndmin=1)
    delta = np.array(delta, dtype=np.float64, ndmin=1)
    a1 = _mirror(theta1, delta)
    a2 = _mirror(theta2, delta)
    h = 0.5 * _mirror_difference(theta1, theta2, delta, a1, a2)
    s = np.abs(h)
    xi, zeta = _xi_zeta_scaled(s)
    p1, n1 = _plus_minus(theta1, delta)
    p2, n2 = _plus_minus(theta2, delta)
    up = h >= 0
    first = np.where(up, p1, n1)
    second = np.where(up, n2, p2)
    with np.errstate(under="ignore", over="ignore"):
        # weight * s² * (ξ/s²), ordered so that neither s² nor weight * s² under/overflows needlessly.
        small = s < 1.0
        t1 = np.where(small, (first * s) * (s * xi), first * (s * (s * xi)))
        t2 = np.where(small, (second * s) * (s * zeta), second * (s * (s * zeta)))
    return 0.5 * (t1 + t2)


def _entropy_terms(theta, delta):
    """Coordinate-wise ψ_Δ(θ) = (θ/2)(a - tanh(a/2)), a = arcsinh(2θ/Δ).

    Equal to ¼(2θa - sqrt(4θ² + Δ²) + Δ) since (sqrt(4θ²+Δ²) - Δ)/(2θ) = tanh(a/2); no cancellation.
    """
    theta = np.array(theta, dtype=np.float64, ndmin=1)
    delta = np.array(delta, dtype=np.float64, ndmin=1)
    a = _mirror(theta, delta)
    with np.errstate(under="ignore"):
        return 0.5 * theta * (a - np.tanh(0.5 * a))


def _sum_last(values, shape):
    values = values.reshape(shape)
    if values.ndim == 0:
        return float(values)
    total = np.sum(values, axis=-1)
    return float(total) if np.ndim(total) == 0 else total


def hyperbolic_entropy(theta, delta):
    """Hyperbolic entropy ψ_Δ(θ) (eq. ``hyperbolic_entropy``).

    ψ_Δ(θ) = ¼ Σᵢ (2θᵢ arcsinh(2θᵢ/Δᵢ) - sqrt(4θᵢ² + Δᵢ²) + Δᵢ).

    It interpolates between ½ Σ ln(1/Δᵢ)|θᵢ| as Δ → 0 and Σ θᵢ²/(2Δᵢ) as Δ → ∞.  (Lemma 5,
    ``entropy_asymptotics``, states the Δ → 0 equivalent with the constant ¼; with the definition above
    the constant is ½, since 2θ arcsinh(2θ/Δ) ~ 2|θ| ln(1/Δ).  The constant does not affect any argmin.)
    Evaluated as Σ (θᵢ/2)(aᵢ - tanh(aᵢ/2)), aᵢ = arcsinh(2θᵢ/Δᵢ) (computed in the log domain when 2θᵢ/Δᵢ
    overflows), which is accurate to a few ulps for Δ in [1e-300, 1e300].

    Parameters
    ----------
    theta : float or array_like, shape (..., d)
        Point θ (finite).
    delta : float or array_like, broadcastable with ``theta``
        Scale Δ > 0 (finite), e.g. the balancedness |u² - v²|.

    Returns
    -------
    float or ndarray
        ψ_Δ(θ) ≥ 0, summed over the last axis (a float for scalar or 1-d input).

    Raises
    ------
    ValueError
        If θ is not finite or Δ is not positive and finite.
    """
    t, dl = _theta_delta(theta, delta)
    return _sum_last(_entropy_terms(t, dl), t.shape)


def hyperbolic_entropy_grad(theta, delta):
    """Gradient ∇ψ_Δ(θ) = ½ arcsinh(2θ/Δ) of the hyperbolic entropy (coordinate-wise).

    Parameters
    ----------
    theta : float or array_like
        Point θ (finite).
    delta : float or array_like, broadcastable with ``theta``
        Scale Δ > 0 (finite).

    Returns
    -------
    float or ndarray
        ½ arcsinh(2θ/Δ), of the broadcast shape.

    Raises
    ------
    ValueError
        If θ is not finite or Δ is not positive and finite.
    """
    t, dl = _theta_delta(theta, delta)
    g = 0.5 * _mirror(np.array(t, ndmin=1), np.array(dl, ndmin=1))
    return _scalar_or_array(g.reshape(t.shape))


def hyperbolic_entropy_hess(theta, delta):
    """Diagonal of the Hessian ∇²ψ_Δ(θ) = diag(1 / sqrt(4θ² + Δ²)).

    Parameters
    ----------
    theta : float or array_like
        Point θ (finite).
    delta : float or array_like, broadcastable with ``theta``
        Scale Δ > 0 (finite).

    Returns
    -------
    float or ndarray
        The vector 1 / sqrt(4θ² + Δ²) (computed with ``hypot``, so no overflow), broadcast shape.

    Raises
    ------
    ValueError
        If θ is not finite or Δ is not positive and finite.
    """
    t, dl = _theta_delta(theta, delta)
    with np.errstate(over="ignore"):
        return _scalar_or_array(1.0 / np.hypot(2.0 * t, dl))


def bregman(theta1, theta2, delta):
    """Bregman divergence D_ψΔ(θ₁, θ₂) = ψ_Δ(θ₁) - ψ_Δ(θ₂) - ⟨∇ψ_Δ(θ₂), θ₁ - θ₂⟩.

    The divergence minimised in Theorems 1 and 2.  Each coordinate is evaluated from the integral
    form D = (Δ/4) ∫_{a₂}^{a₁} (a - a₂) cosh a da (aₖ = arcsinh(2θₖ/Δ)) rewritten as a sum of two
    non-negative terms, with a₁ - a₂ obtained from an arcsinh-difference identity; the result is
    therefore ≥ 0, exactly 0 at θ₁ = θ₂, and accurate to a few ulps relative even when θ₁ ≈ θ₂,
    for Δ in [1e-300, 1e300] and |θ| up to 1e6.

    Parameters
    ----------
    theta1, theta2 : float or array_like, shape (..., d)
        Points (finite).
    delta : float or array_like, broadcastable with the points
        Scale Δ > 0 (finite).

    Returns
    -------
    float or ndarray
        D_ψΔ(θ₁, θ₂) ≥ 0 summed over the last axis (a float for scalar or 1-d input).

    Raises
    ------
    ValueError
        If a point is not finite or Δ is not positive and finite.
    """
    t1 = _real_array("theta1", theta1)
    t2 = _real_array("theta2", theta2)
    _check_range("theta1", t1)
    _check_range("theta2", t2)
    dl = _real_array("delta", delta)
    _check_range("delta", dl, low=0, low_open=True)
    try:
        t1, t2, dl = np.broadcast_arrays(t1, t2, dl)
    except ValueError:
        raise ValueError(
            f"theta1 {t1.shape}, theta2 {t2.shape} and delta {dl.shape} do not broadcast") from None
    return _sum_last(_bregman_terms(t1, t2, dl), t1.shape)


# ---------------------------------------------------------------------------------------------------
# 3. Implicit bias: argmin_{Xθ = y} D_ψΔ(θ, θ̃₀) (Theorems 1 and 2) and the ℓ1 / ℓ2 limits
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ImplicitBiasResult:
    """Solution of ``argmin_{Xθ = y} D_ψΔ(θ, θ̃₀)`` (Theorem 1 with Δ = Δ₀, Theorem 2 with Δ = Δ_∞).

    Attributes
    ----------
    theta : ndarray, shape (d,)
        The minimiser θ = (Δ/2) sinh(arcsinh(2θ̃₀/Δ) + 2Xᵀν).
    nu : ndarray, shape (n,)
        Dual variable (Lagrange multiplier): ∇ψ_Δ(θ) - ∇ψ_Δ(θ̃₀) = Xᵀν.
    kkt_residual : float
        Primal feasibility ‖Xθ - y‖ / ‖y‖ (absolute ‖Xθ‖ if y = 0).
    iterations : int
        Newton iterations used (summed over continuation stages).
    converged : bool
        Whether ``kkt_residual`` reached ``tol`` (or the rounding floor 8 eps ‖|X||θ|‖/‖y‖ of evaluating Xθ).
    stationarity_residual : float
        ‖Π (∇ψ_Δ(θ) - ∇ψ_Δ(θ̃₀))‖ / ‖∇ψ_Δ(θ) - ∇ψ_Δ(θ̃₀)‖ with Π the projector onto range(Xᵀ)^⊥,
        recomputed from the returned θ (0 when the denominator is 0).  Holds by construction of θ(ν), up
        to rounding.
    """

    theta: np.ndarray
    nu: np.ndarray
    kkt_residual: float
    iterations: int
    converged: bool
    stationarity_residual: float = 0.0


def _range_check(X, y):
    """SVD of X; raise ValueError if y ∉ range(X).

    Returns (Vt restricted to the row space of X, ‖y‖, minimum-norm solution X⁺y).
    """
    u, sv, vt = np.linalg.svd(X, full_matrices=False)
    rank_tol = sv[0] * max(X.shape) * _EPS if sv.size and sv[0] > 0 else 0.0
    rank = int(np.sum(sv > rank_tol))
    y_norm = float(np.linalg.norm(y))
    if rank == 0:
        if y_norm > 0:
            raise ValueError("y is not in range(X): X is zero but y is not, so no interpolator exists")
        return vt[:0], y_norm, np.zeros(X.shape[1])
    coef = (u[:, :rank].T @ y)
    out_of_range = np.linalg.norm(y - u[:, :rank] @ coef)
    if y_norm > 0 and out_of_range > _RANGE_RTOL * y_norm:
        raise ValueError(
            f"y is not in range(X): the least-squares residual ||X theta_ls - y|| / ||y|| = "
            f"{out_of_range / y_norm:.3e} exceeds {_RANGE_RTOL:g}, so no interpolator exists")
    theta_ls = vt[:rank].T @ (coef / sv[:rank])
    return vt[:rank], y_norm, theta_ls


def _newton_direction(X, weights, rhs):
    """Solve (X diag(w) Xᵀ) p = rhs by Cholesky (least squares if singular).

    In floating point the Cholesky factor drops the directions carried only by weights below ~eps·max(w),
    a useful implicit regularisation of the dual Newton steps when Δ is tiny.
    """
    jac = (X * weights) @ X.T
    try:
        factor = scipy.linalg.cho_factor(jac, lower=True, check_finite=False)
        p = scipy.linalg.cho_solve(factor, rhs, check_finite=False)
        if np.all(np.isfinite(p)):
            return p
    except np.linalg.LinAlgError:
        pass
    return np.linalg.lstsq(jac, rhs, rcond=None)[0]


def _primal_correction(X, weights, rhs):
    """Minimum-W⁻¹-norm dθ with X dθ = rhs, i.e. dθ = W Xᵀ p with (X W Xᵀ) p = rhs; returns (dθ, p).

    With B = W^{1/2} Xᵀ = QR (Householder, rows sorted by decreasing weight so that strongly graded
    weights are resolved), dθ = W^{1/2} Q R⁻ᵀ rhs and p = R⁻¹ R⁻ᵀ rhs.  Returns None if R is singular.
    """
    order = np.argsort(-weights, kind="stable")
    root = np.sqrt(weights[order])
    q, r = scipy.linalg.qr(X.T[order] * root[:, None], mode="economic", check_finite=False)
    if not np.all(np.diag(r) != 0):
        return None
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        z = scipy.linalg.solve_triangular(r, rhs, trans="T", check_finite=False)
        p = scipy.linalg.solve_triangular(r, z, check_finite=False)
        d_theta = np.empty_like(weights)
        d_theta[order] = root * (q @ z)
    if not (np.all(np.isfinite(d_theta)) and np.all(np.isfinite(p))):
        return None
    return d_theta, p


def _dual_state(X, y, nu, a0, theta0, delta):
    """(a, θ(ν), y - Xθ(ν), G(ν)) for the dual of the implicit-bias problem, or None if not finite.

    a = a₀ + 2Xᵀν, θ(ν) = (Δ/2) sinh a and G(ν) = D_ψΔ(θ(ν), θ̃₀) - ⟨ν, Xθ(ν) - y⟩ (concave in ν).
    """
    a = a0 + 2.0 * (X.T @ nu)
    with np.errstate(over="ignore", invalid="ignore"):
        theta = _theta_of_mirror(a, delta)
        if not np.all(np.isfinite(theta)):
            return None
        residual = y - X @ theta
        value = float(np.sum(_bregman_terms(theta, theta0, delta)) + nu @ residual)
    if not (np.isfinite(value) and np.all(np.isfinite(residual))):
        return None
    return a, theta, residual, value


def _warm_start(X, y, nu, theta, theta0, old_delta, new_delta, scaling):
    """Dual starting point when Δ changes from ``old_delta`` to ``new_delta`` (previous solution ν, θ).

    Candidates: ν itself; ν·``scaling`` (the optimal ν grows like ln(1/Δ) when Δ → 0); and
    ν + t·(X W Xᵀ)⁻¹ X W g, t ∈ {1, ½, ¼}, where g = ½[(a(θ) - a(θ̃₀)) at new Δ - (same) at old Δ] is the
    mirror shift that would keep θ fixed, projected onto range(Xᵀ) in the metric W = diag(sqrt(4θ² + Δ²)).
    The candidate with the largest dual value G at the new Δ is returned (G is the objective maximised).
    """
    a0 = _mirror(theta0, new_delta)
    old_gap = _mirror(theta, old_delta) - _mirror(theta0, old_delta)
    shift = 0.5 * ((_mirror(theta, new_delta) - a0) - old_gap)
    weights = np.hypot(2.0 * theta, new_delta)
    direction = _newton_direction(X, weights, X @ (weights * shift))
    candidates = [nu, nu * scaling] + [nu + t * direction for t in (1.0, 0.5, 0.25)]
    candidates.append(np.zeros_like(nu))          # θ(0) = θ̃₀ is always finite
    best, best_value = np.zeros_like(nu), -np.inf
    for candidate in candidates:
        state = _dual_state(X, y, candidate, a0, theta0, new_delta)
        if state is not None and state[3] > best_value:
            best, best_value = candidate, state[3]
    return best


def _dual_newton(X, y, abs_x, delta, theta0, nu, scale, tol, max_iter, polish):
    """Maximise the concave dual G(ν) = D_ψΔ(θ(ν), θ̃₀) - ⟨ν, Xθ(ν) - y⟩ from ``nu``, then polish θ.

    Damped Newton ascent: direction (X diag(w + μ) Xᵀ)⁻¹ (y - Xθ(ν)) with w = sqrt(4θ² + Δ²) and a
    Levenberg-Marquardt damping μ (relative to max w) that is relaxed after full steps and tightened after
    shortened ones; the step is capped so that no mirror coordinate a = a₀ + 2Xᵀν moves by more than
    ``_MAX_MIRROR_STEP``, then Armijo backtracking on G.

    The dual parametrisation limits the attainable ‖Xθ - y‖ to about eps·Δᵢ|(Xᵀν)ᵢ| per coordinate
    (cancellation in a when Δ is large in some coordinates), so once the residual is small the result is
    polished by primal projection steps θ ← θ + W Xᵀp, ν ← ν + p, p = (X W Xᵀ)⁻¹(y - Xθ) (the same Newton
    step, applied to θ directly), which reach the rounding floor of Xθ.

    Returns (ν, θ, a₀, ‖Xθ - y‖/scale, iterations, converged).
    """
    a0 = _mirror(theta0, delta)

    def evaluate(nu):
        return _dual_state(X, y, nu, a0, theta0, delta)

    def norm_of(residual):
        with np.errstate(over="ignore"):
            return float(np.linalg.norm(residual)) / scale

    def floor_of(theta):
        # Rounding floor of ‖Xθ - y‖ / ‖y‖ for a θ known to working precision.
        return 8.0 * _EPS * float(np.linalg.norm(abs_x @ np.abs(theta))) / scale

    state = evaluate(nu)
    if state is None:
        raise ValueError("implicit_bias: theta0_tilde and delta give a non-finite starting point")
    a, theta, residual, value = state
    res_norm = norm_of(residual)
    iterations = 0
    damping = 0.0
    while res_norm > tol and iterations < max_iter:
        iterations += 1
        weights = np.hypot(2.0 * theta, delta)          # = Δ cosh a, without overflow
        step = _newton_direction(X, weights + damping * float(np.max(weights)), residual)
        slope = float(residual @ step)                  # directional derivative of G along the step
        if not (np.isfinite(slope) and slope > 0):
            break
        # Cap the change of the mirror coordinates per iteration: far from the solution (tiny Δ) the raw
        # Newton step moves a by ~1/Δ and θ(ν) would overflow.
        mirror_step = 2.0 * float(np.max(np.abs(X.T @ step)))
        t = min(1.0, _MAX_MIRROR_STEP / mirror_step) if mirror_step > 0 else 1.0
        accepted = None
        for _ in range(_MAX_BACKTRACKS):
            trial = evaluate(nu + t * step)
            if trial is not None:
                gain = trial[3] - value
                # Near the optimum G changes below its rounding error: then accept a non-decrease of G
                # (up to rounding) that reduces the residual.
                noise = 64.0 * _EPS * (abs(value) + abs(trial[3]) + abs(float(nu @ residual)))
                if gain >= _ARMIJO * t * slope or (gain >= -noise and norm_of(trial[2]) < res_norm):
                    accepted = trial
                    break
            t *= 0.5
        if accepted is None:
            break
        nu = nu + t * step
        a, theta, residual, value = accepted
        res_norm = norm_of(residual)
        damping = damping * _DAMPING_DOWN if t == 1.0 else min(1.0, max(damping * _DAMPING_UP, _DAMPING_MIN))

    # Primal polishing (see above), final stage only; each step must reduce the residual and keep the
    # mirror coordinates within the linearisation range.  The Cholesky-based step is tried first, the
    # graded-QR step (accurate for strongly graded weights, but costlier) if that one fails.
    if polish and res_norm <= _POLISH_FROM:
        for _ in range(_POLISH_STEPS):
            if res_norm <= floor_of(theta):
                break
            weights = np.hypot(2.0 * theta, delta)
            improved = False
            for graded in (False, True):
                if graded:
                    correction = _primal_correction(X, weights, residual)
                    if correction is None:
                        break
                    d_theta, p = correction
                else:
                    p = _newton_direction(X, weights, residual)
                    d_theta = weights * (X.T @ p)
                if not 2.0 * float(np.max(np.abs(X.T @ p))) <= _POLISH_MAX_MIRROR:
                    continue
                new_theta = theta + d_theta
                new_residual = y - X @ new_theta
                new_norm = norm_of(new_residual)
                if new_norm < res_norm:
                    theta, residual, res_norm, nu = new_theta, new_residual, new_norm, nu + p
                    improved = True
                    break
            if not improved:
                break
    converged = bool(np.isfinite(res_norm) and res_norm <= max(tol, floor_of(theta)))
    return nu, theta, a0, res_norm, iterations, converged


def implicit_bias(X, y, delta, theta0_tilde=0.0, *, tol=1e-12, max_iter=100, raise_on_failure=True):
    """Solve the implicit-bias problem θ = argmin_{Xθ = y} D_ψΔ(θ, θ̃₀) (Theorems 1 and 2).

    With Δ = Δ₀ and θ̃₀ = θ₀ this is the gradient-flow interpolator (eq. ``implicit_bias_GF``); with
    Δ = Δ_∞ and the perturbed initialisation θ̃₀ it is the MGF interpolator of Theorem 2
    (``main_mgf:general``).

    Method: the stationarity condition ∇ψ_Δ(θ) - ∇ψ_Δ(θ̃₀) = Xᵀν gives
    θ(ν) = (Δ/2) sinh(arcsinh(2θ̃₀/Δ) + 2Xᵀν); the concave dual
    G(ν) = D_ψΔ(θ(ν), θ̃₀) - ⟨ν, Xθ(ν) - y⟩ has gradient y - Xθ(ν) and Hessian -X diag(sqrt(4θ² + Δ²)) Xᵀ
    (= -X diag(Δ cosh(·)) Xᵀ, formed from θ so that cosh never overflows).  It is maximised by damped
    Newton steps (Levenberg-Marquardt damping, a cap on the change of arcsinh(2θ/Δ) per step, Armijo
    backtracking on G) from ν = 0.  When min Δ is tiny compared with the solution scale C (ln(C/Δ) > 20)
    the problem is solved along a continuation in Δ (Δ clipped from below at C e^{-20}, C e^{-60}, ...,
    then Δ itself), each stage warm-started from the previous one.  The final iterate is polished by
    primal Newton projections onto {Xθ = y}, so ``kkt_residual`` reaches the rounding floor of Xθ.

    Tested for Δ between 1e-300 and 1e8 (also coordinate-wise heterogeneous over ~30 decades) and
    d up to 1e4; extremely heterogeneous Δ (e.g. 1e-200 next to 1e8 in the same vector) can fail to
    converge, which is reported.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Design matrix.
    y : array_like, shape (n,)
        Targets; must lie in range(X).
    delta : float or array_like, shape (d,)
        Scale Δ > 0 (finite) of the hyperbolic entropy (balancedness Δ₀ or Δ_∞).
    theta0_tilde : float or array_like, shape (d,), optional
        Reference point θ̃₀ of the Bregman divergence (default 0, giving argmin ψ_Δ on the
        interpolators, eq. ``eq:MGF_approx``).
    tol : float, optional
        Target for the relative primal residual ‖Xθ - y‖ / ‖y‖.  If this is below the rounding floor
        of evaluating Xθ, convergence is declared at that floor.
    max_iter : int, optional
        Maximum number of Newton iterations per continuation stage.
    raise_on_failure : bool, optional
        If True (default) a ValueError is raised when Newton does not converge; if False the result is
        returned with ``converged=False``.

    Returns
    -------
    ImplicitBiasResult
        ``theta``, ``nu``, ``kkt_residual``, ``iterations``, ``converged``, ``stationarity_residual``.

    Raises
    ------
    ValueError
        On invalid input, if y ∉ range(X) (relative least-squares residual > 1e-10), or if Newton does
        not converge within ``max_iter`` iterations (unless ``raise_on_failure=False``).
    """
    X, y = _design(X, y)
    n, d = X.shape
    delta = _positive_vector("delta", delta, d)
    theta0 = _finite_vector("theta0_tilde", theta0_tilde, d)
    tol = float(tol)
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be finite and in (0, inf), got {tol!r}")
    if isinstance(max_iter, bool) or int(max_iter) != max_iter or max_iter < 1:
        raise ValueError(f"max_iter must be an integer in [1, inf), got {max_iter!r}")
    max_iter = int(max_iter)

    row_space, y_norm, theta_ls = _range_check(X, y)
    scale = y_norm if y_norm > 0 else 1.0
    abs_x = np.abs(X)

    # Continuation in Δ for tiny Δ (relative to the solution scale C): far from the optimum the dual is
    # nearly linear and Newton advances the mirror coordinates only a few units per iteration, while
    # the optimum has a ≈ ln(4|θ|/Δ).  Solve first with Δ clipped from below at C e^{-20}, then at
    # C e^{-60}, C e^{-100}, ..., finally with Δ itself, warm-starting each stage (see _warm_start).
    c_scale = max(float(np.max(np.abs(theta_ls))), float(np.max(np.abs(theta0))))
    log_gap = float(np.log(c_scale / np.min(delta))) if c_scale > 0 else 0.0
    floors_log = []                      # stage k clips Δ at C e^{-floors_log[k]}
    if log_gap > _HOMOTOPY_START:
        floors_log = list(np.arange(_HOMOTOPY_START, log_gap, _HOMOTOPY_STEP))
    floors_log.append(log_gap)           # last stage: Δ unchanged
    nu = np.zeros(n)
    iterations = 0
    stage_delta = theta = None
    for k, depth in enumerate(floors_log):
        last = k == len(floors_log) - 1
        previous_delta = stage_delta
        stage_delta = delta if last else np.maximum(delta, c_scale * np.exp(-depth))
        if k > 0:
            scaling = (depth + 1.0) / (floors_log[k - 1] + 1.0)
            nu = _warm_start(X, y, nu, theta, theta0, previous_delta, stage_delta, scaling)
        nu, theta, a0, res_norm, its, converged = _dual_newton(
            X, y, abs_x, stage_delta, theta0, nu, scale, tol if last else _HOMOTOPY_TOL, max_iter, last)
        iterations += its
        if not converged:
            break

    grad_gap = 0.5 * (_mirror(theta, stage_delta) - a0)
    gap_norm = float(np.linalg.norm(grad_gap))
    outside = grad_gap - row_space.T @ (row_space @ grad_gap)
    stationarity = float(np.linalg.norm(outside)) / gap_norm if gap_norm > 0 else 0.0
    result = ImplicitBiasResult(theta=theta, nu=nu, kkt_residual=res_norm, iterations=iterations,
                                converged=bool(converged), stationarity_residual=stationarity)
    if not converged and raise_on_failure:
        raise ValueError(
            f"implicit_bias: Newton did not converge in {iterations} iterations (relative residual "
            f"||X theta - y||/||y|| = {res_norm:.3e} > tol = {tol:g}); try a larger max_iter or tol, or "
            "check the scale of delta")
    return result


def min_l1_interpolator(X, y):
    """Minimum-ℓ1-norm interpolator argmin_{Xθ = y} ‖θ‖₁, the Δ → 0 limit of :func:`implicit_bias`.

    Solved as a linear programme with θ = p - q, p, q ≥ 0 (``scipy.optimize.linprog``, HiGHS).

    Parameters
    ----------
    X : array_like, shape (n, d)
        Design matrix.
    y : array_like, shape (n,)
        Targets in range(X).

    Returns
    -------
    ndarray, shape (d,)
        A minimum-ℓ1 interpolator (a vertex solution if it is not unique).

    Raises
    ------
    ValueError
        If y ∉ range(X) or the LP solver fails.
    """
    X, y = _design(X, y)
    _range_check(X, y)
    n, d = X.shape
    res = scipy.optimize.linprog(np.ones(2 * d), A_eq=np.hstack([X, -X]), b_eq=y,
                                 bounds=[(0, None)] * (2 * d), method="highs")
    if res.status != 0:
        raise ValueError(f"min_l1_interpolator: linprog failed: {res.message}")
    return res.x[:d] - res.x[d:]


def min_l2_interpolator(X, y):
    """Minimum-ℓ2-norm interpolator argmin_{Xθ = y} ‖θ‖₂ = X⁺y, the Δ → ∞ limit of :func:`implicit_bias`.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Design matrix.
    y : array_like, shape (n,)
        Targets in range(X).

    Returns
    -------
    ndarray, shape (d,)
        X⁺y (minimum-norm least-squares solution).

    Raises
    ------
    ValueError
        If y ∉ range(X).
    """
    X, y = _design(X, y)
    _range_check(X, y)
    return np.linalg.lstsq(X, y, rcond=None)[0]


# ---------------------------------------------------------------------------------------------------
# Theorem 2 prediction bundle for result objects
# ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Prediction:
    """Theorem 2's prediction for a finished run, compared with the recovered predictor.

    Attributes
    ----------
    predicted_theta : ndarray, shape (d,)
        argmin_{Xθ = y} D_ψ_{Δ_∞}(θ, θ̃₀) (Theorem 2, ``main_mgf:general``).
    prediction_gap : float
        ‖θ_final - predicted_theta‖ / ‖predicted_theta‖.
    theta_gf_delta_inf : ndarray, shape (d,)
        θ^GF_{Δ_∞} = argmin_{Xθ = y} ψ_{Δ_∞}(θ) (eq. ``eq:MGF_approx``: gradient flow started at
        u₀ = sqrt(Δ_∞), v₀ = 0).
    normalized_distance : float
        ‖θ_final - θ^GF_{Δ_∞}‖ / ‖θ^GF_{Δ_∞}‖ (the paper observes < 0.01).
    """

    predicted_theta: np.ndarray
    prediction_gap: float
    theta_gf_delta_inf: np.ndarray
    normalized_distance: float


def _relative_distance(a, b):
    nb = float(np.linalg.norm(b))
    diff = float(np.linalg.norm(a - b))
    if nb == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / nb


def predict(X, y, delta_inf, theta0_tilde, theta_final):
    """Theorem 2 prediction for a run that ended at ``theta_final``.

    Parameters
    ----------
    X : array_like, shape (n, d)
        Design matrix.
    y : array_like, shape (n,)
        Targets in range(X).
    delta_inf : float or array_like, shape (d,)
        Asymptotic balancedness Δ_∞ > 0 (Assumption 2).
    theta0_tilde : float or array_like, shape (d,)
        Perturbed initialisation θ̃₀ of Theorem 2.
    theta_final : array_like, shape (d,)
        Predictor recovered by the run.

    Returns
    -------
    Prediction
        ``predicted_theta``, ``prediction_gap``, ``theta_gf_delta_inf``, ``normalized_distance``.

    Raises
    ------
    ValueError
        On invalid input (e.g. a zero coordinate of Δ_∞), y ∉ range(X), or Newton failure.
    """
    X, y = _design(X, y)
    d = X.shape[1]
    final = _real_array("theta_final", theta_final)
    if final.shape != (d,):
        raise ValueError(f"theta_final must have shape ({d},), got {final.shape}")
    _check_range("theta_final", final)
    predicted = implicit_bias(X, y, delta_inf, theta0_tilde).theta
    theta_gf = implicit_bias(X, y, delta_inf, 0.0).theta
    return Prediction(predicted_theta=predicted, prediction_gap=_relative_distance(final, predicted),
                      theta_gf_delta_inf=theta_gf, normalized_distance=_relative_distance(final, theta_gf))
