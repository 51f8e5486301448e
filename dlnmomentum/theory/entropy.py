"""The hyperbolic entropy ψ_Δ (eq. ``hyperbolic_entropy``), its gradient, Hessian and Bregman divergence.

ψ_Δ(θ) = ¼ Σᵢ (2θᵢ arcsinh(2θᵢ/Δᵢ) - sqrt(4θᵢ² + Δᵢ²) + Δᵢ) is the potential of the implicit bias of
gradient flow (eq. ``implicit_bias_GF``, scale Δ₀) and of momentum gradient flow (Theorem 2,
``main_mgf:general``, scale Δ_∞); its Bregman divergence D_ψΔ is the objective of
:func:`~dlnmomentum.theory.implicit_bias`.  This module owns

* the public functions :func:`hyperbolic_entropy`, :func:`hyperbolic_entropy_grad`,
  :func:`hyperbolic_entropy_hess` and :func:`bregman`, and :func:`reference_mirror` (the mirror coordinate of
  Theorems 1-2's perturbed initialisation, from the logarithms of its terms);
* their numerics, shared with the implicit-bias solver: the mirror coordinate ``a = arcsinh(2θ/Δ)``
  (``∇ψ_Δ(θ) = a/2``, so ``θ = (Δ/2) sinh a`` and ``sqrt(4θ² + Δ²) = Δ cosh a``) and its inverse, both
  overflow-safe; a cancellation-free difference of mirror coordinates; and the Taylor series of the two
  functions ξ, ζ that write the Bregman divergence as a sum of non-negative terms.

Everything is evaluated without overflow or catastrophic cancellation for every finite θ and Δ > 0 (Δ down to the
subnormal 5e-324, |θ| and Δ up to 1.8e308): a result is finite wherever its exact value is a float64, and a public
function raises a ValueError naming the inputs where the exact value exceeds 1.8e308.
"""

import numpy as np

from ..validate import as_real_array, broadcast_named
from ._float64 import FLOAT_MAX, require_in_range, scalar_or_array


def _theta_delta(theta, delta):
    """A point θ (finite) and a scale Δ (positive, finite), broadcast together."""
    t = as_real_array("theta", theta)
    dl = as_real_array("delta", delta, low=0, low_open=True)
    return broadcast_named(theta=t, delta=dl)


def _mirror_coordinate(theta, delta):
    """a = arcsinh(2θ/Δ), overflow-safe: where (2θ)/Δ is inf, 2(θ/Δ) if that is finite (2θ alone overflowed,
    |θ| > 9e307), else arcsinh(x) = sign(x) ln(2|x|) + O(x⁻²) (exact to rounding for |x| beyond 1.8e308; at
    θ = 1.7e308, Δ = 1e306 that form was off by 3e-7)."""
    with np.errstate(over="ignore"):
        x = (2.0 * theta) / delta
    a = np.arcsinh(x)
    big = ~np.isfinite(x)
    if np.any(big):
        t, d = theta[big], delta[big]
        with np.errstate(over="ignore"):
            x_half_first = 2.0 * (t / d)
        a[big] = np.where(np.isfinite(x_half_first), np.arcsinh(x_half_first),
                          np.sign(t) * ((np.log(np.abs(t)) + np.log(4.0)) - np.log(d)))
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


def reference_mirror(w_plus0, w_minus0, s_plus, s_minus, delta):
    """a₀ = arcsinh(2θ̃₀/Δ) of the perturbed initialisation θ̃₀ = ¼(w₊₀² e^{-2S₊} - w₋₀² e^{-2S₋}) of Theorems 1-2,
    finite where θ̃₀ itself overflows.

    After hundreds of sign crossings (MGF at λ ≳ 1e3, MGD at β → 1) the exponents S± (I± of a flow) reach
    hundreds and θ̃₀ leaves float64 (±inf), while the implicit bias depends on θ̃₀ only through a₀ = 2∇ψ_Δ(θ̃₀),
    of the order of the exponents. With l± = ln|w±₀| - S± and L = ln|e^{2l₊} - e^{2l₋}| - ln 2Δ
    (= 2 max l± + ln(1 - e^{-2|l₊ - l₋|}) - ln 2Δ), a₀ = ±(L + ln(1 + sqrt(1 + e^{-2L}))) with the sign of l₊ - l₋,
    the identity arcsinh x = ln x + ln(1 + sqrt(1 + x⁻²)); where L < 1, arcsinh(±e^L) directly. Where the two terms
    of θ̃₀ nearly cancel, l₊ - l₋ is taken as ln(1 + (|w₊₀| - |w₋₀|)/|w₋₀|) - (S₊ - S₋) (not as the difference of two
    large l±) and 1 - e^{-2|l₊ - l₋|} by expm1: a₀ keeps its digits (1.6e-6 lost before, on a probe's case).

    Parameters
    ----------
    w_plus0, w_minus0 : array_like
        The initial w± (finite, non-zero: Δ₀ = |w₊₀w₋₀| > 0).
    s_plus, s_minus : array_like
        The exponents S± (finite).
    delta : array_like
        Δ (finite, > 0). All five broadcast together.

    Raises
    ------
    ValueError
        An entry out of range, named with its parameter.
    """
    wp = as_real_array("w_plus0", w_plus0)
    wm = as_real_array("w_minus0", w_minus0)
    for name, w in (("w_plus0", wp), ("w_minus0", wm)):
        if np.any(w == 0.0):
            raise ValueError(f"{name} must be non-zero (Delta_0 = |w_plus0 * w_minus0| > 0), got 0 at index "
                             f"{int(np.flatnonzero(np.ravel(w) == 0.0)[0])}")
    sp = as_real_array("s_plus", s_plus)
    sm = as_real_array("s_minus", s_minus)
    dl = as_real_array("delta", delta, low=0.0, low_open=True)
    return scalar_or_array(_reference_mirror(*broadcast_named(w_plus0=wp, w_minus0=wm, s_plus=sp, s_minus=sm,
                                                               delta=dl)))


def _reference_mirror(w_plus0, w_minus0, s_plus, s_minus, delta):
    """:func:`reference_mirror` without checks (the results' and sweep points' fields: a diverged run's NaN
    exponents give NaN, as its other theory fields are)."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        wp = np.abs(np.asarray(w_plus0, dtype=np.float64))
        wm = np.abs(np.asarray(w_minus0, dtype=np.float64))
        sp = np.asarray(s_plus, dtype=np.float64)
        sm = np.asarray(s_minus, dtype=np.float64)
        l_plus = np.log(wp) - sp
        l_minus = np.log(wm) - sm
        # ln(w₊/w₋) for l₊ - l₋: as log1p((wp - wm)/wm) where wp - wm is exact (wp ≈ wm); below wm/2 that
        # quotient is ratio - 1 and loses the ratio (ln(1e-300/1) came out as -inf, a₀ of the wrong sign),
        # and it can overflow (1e200/1e-200): there ln(ratio), or ln wp - ln wm where the ratio leaves float64.
        ratio = wp / wm
        log_ratio = np.where((ratio >= 0.5) & np.isfinite(ratio), np.log1p((wp - wm) / wm),
                             np.where((ratio > 1e-300) & np.isfinite(ratio), np.log(ratio), np.log(wp) - np.log(wm)))
        gap = log_ratio - (sp - sm)  # l₊ - l₋
        sign = np.where(gap >= 0.0, 1.0, -1.0)
        dl = np.asarray(delta, dtype=np.float64)
        log_2delta = np.where(dl < 0.5 * FLOAT_MAX, np.log(2.0 * dl), np.log(dl) + np.log(2.0))  # (2Δ overflows)
        log_x = (2.0 * np.maximum(l_plus, l_minus) + np.log(-np.expm1(-2.0 * np.abs(gap)))  # (no 1 - e^{-2g})
                 - log_2delta)
        large = log_x >= 1.0
        return np.where(large, sign * (log_x + np.log1p(np.sqrt(1.0 + np.exp(-2.0 * np.where(large, log_x, 1.0))))),
                        np.arcsinh(sign * np.exp(np.minimum(log_x, 1.0))))


def _plus_minus(theta, delta):
    """P = (Δ/2) eᵃ = θ + sqrt(θ² + Δ²/4) and N = (Δ/2) e⁻ᵃ = P⁻¹ Δ²/4, each without cancellation."""
    half_h = 0.5 * np.hypot(2.0 * theta, delta)
    half_d = 0.5 * delta
    pos = theta >= 0
    big = np.where(pos, theta + half_h, half_h - theta)      # the larger of P, N
    with np.errstate(under="ignore", invalid="ignore"):
        # (big = 0 only where θ = 0 and Δ/2 rounds to 0, a subnormal Δ: then P = N = Δ/2 = 0, not 0/0)
        small = np.where(big > 0.0, half_d * (half_d / big), half_d)
    return np.where(pos, big, small), np.where(pos, small, big)


# Taylor coefficients (in powers of s, starting at s²) of
#   ξ(s) = s - (1 - e^{-2s})/2            = Σ_{n≥2} (-1)ⁿ 2ⁿ⁻¹ sⁿ / n!
#   ζ(s) = (1 - e^{-2s})/2 - s e^{-2s}    = Σ_{n≥2} (-1)ⁿ 2ⁿ⁻¹ (n - 1) sⁿ / n!
def _taylor(n_terms, weight):
    """The coefficients (-1)ⁿ 2ⁿ⁻¹ weight(n) / n! for n = 2, ..., n_terms + 1 (the series above)."""
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
    """Σₖ coef[k] sᵏ by Horner's rule, element-wise."""
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
        # (0/0 or x/0 where both scaled terms underflow, |θ₁| ≪ |θ₂| and Δ small: the plain difference is kept)
        with np.errstate(over="ignore", invalid="ignore", under="ignore", divide="ignore"):
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
    a1 = _mirror_coordinate(theta1, delta)
    a2 = _mirror_coordinate(theta2, delta)
    h = 0.5 * _mirror_difference(theta1, theta2, delta, a1, a2)
    s = np.abs(h)
    xi, zeta = _xi_zeta_scaled(s)
    up = h >= 0
    with np.errstate(under="ignore", over="ignore", invalid="ignore"):
        p1, n1 = _plus_minus(theta1, delta)
        p2, n2 = _plus_minus(theta2, delta)
        first = np.where(up, p1, n1)
        second = np.where(up, n2, p2)
        # weight * s² * (ξ/s²), ordered so that neither s² nor weight * s² under/overflows needlessly.
        small = s < 1.0
        t1 = np.where(small, (first * s) * (s * xi), first * (s * (s * xi)))
        t2 = np.where(small, (second * s) * (s * zeta), second * (s * (s * zeta)))
        out = 0.5 * (t1 + t2)
    redo = ~np.isfinite(out)
    if np.any(redo):
        out[redo] = _bregman_terms_rescaled(theta1[redo], theta2[redo], delta[redo], up[redo], s[redo],
                                            xi[redo], zeta[redo])
    return out


def _bregman_terms_rescaled(theta1, theta2, delta, up, s, xi, zeta):
    """The terms of :func:`_bregman_terms` where its plain evaluation is not finite: a weight P or N (about 2|θ|)
    overflowed for |θ| near 1.8e308, or one of the two products exceeded float64 where half their sum does not, or
    a subnormal Δ gave 0/0.

    D is homogeneous of degree 1 in (θ₁, θ₂, Δ) (ψ_cΔ(cθ) = c ψ_Δ(θ); the mirror coordinates, h and s, are
    invariant): the weights are formed at the scale 2⁻ᵉ that brings max(|θ₁|, |θ₂|, Δ) into [0.5, 1), where they
    cannot overflow, and with s = m 2ᵏ (m in [0.5, 1)) D = ldexp((P ξ/s² + N ζ/s²) m², e + 2k - 1), rounded once
    at the end: inf only where D itself exceeds float64. Entries lost to underflow in the scaled frame are
    weights below 2⁻¹⁰⁷⁴ times the larger of the two, which is at least about max(|θ|, Δ/2)/4 there.
    """
    _, e = np.frexp(np.maximum(np.maximum(np.abs(theta1), np.abs(theta2)), delta))
    with np.errstate(under="ignore", invalid="ignore"):
        t1, t2, dl = np.ldexp(theta1, -e), np.ldexp(theta2, -e), np.ldexp(delta, -e)
        p1, n1 = _plus_minus(t1, dl)
        p2, n2 = _plus_minus(t2, dl)
        mantissa = np.where(up, p1, n1) * xi + np.where(up, n2, p2) * zeta
        m, k = np.frexp(s)
        with np.errstate(over="ignore"):
            return np.ldexp(mantissa * m * m, e + 2 * k - 1)


def _entropy_terms(theta, delta):
    """Coordinate-wise ψ_Δ(θ) = (θ/2)(a - tanh(a/2)), a = arcsinh(2θ/Δ).

    Equal to ¼(2θa - sqrt(4θ² + Δ²) + Δ) since (sqrt(4θ²+Δ²) - Δ)/(2θ) = tanh(a/2); no cancellation.
    """
    theta = np.array(theta, dtype=np.float64, ndmin=1)
    delta = np.array(delta, dtype=np.float64, ndmin=1)
    a = _mirror_coordinate(theta, delta)
    with np.errstate(under="ignore", over="ignore"):
        return 0.5 * theta * (a - np.tanh(0.5 * a))  # (inf only where ψ itself exceeds float64)


def _sum_last(values, shape):
    """Coordinate-wise terms of the broadcast ``shape`` summed over the last axis; a float for 0-d or 1-d shapes."""
    values = values.reshape(shape)
    if values.ndim == 0:
        return float(values)
    with np.errstate(over="ignore"):
        total = np.sum(values, axis=-1)
    return float(total) if np.ndim(total) == 0 else total


def _checked_sum(what, terms, inputs, rule):
    """:func:`_sum_last` of non-negative ``terms`` (finite wherever the exact term is representable) with a
    ValueError where a term, or the sum of a row, exceeds float64 (a silent inf before)."""
    shape = next(iter(inputs.values())).shape
    require_in_range(what, terms.reshape(shape), inputs, rule)
    total = _sum_last(terms, shape)
    require_in_range(what, np.asarray(total), {}, f"{rule}: the sum over the last axis")
    return total


def hyperbolic_entropy(theta, delta):
    """Hyperbolic entropy ψ_Δ(θ) (eq. ``hyperbolic_entropy``).

    ψ_Δ(θ) = ¼ Σᵢ (2θᵢ arcsinh(2θᵢ/Δᵢ) - sqrt(4θᵢ² + Δᵢ²) + Δᵢ).

    It interpolates between ½ Σ ln(1/Δᵢ)|θᵢ| as Δ → 0 and Σ θᵢ²/(2Δᵢ) as Δ → ∞.  (Lemma 5,
    ``entropy_asymptotics``, states the Δ → 0 equivalent with the constant ¼; with the definition above
    the constant is ½, since 2θ arcsinh(2θ/Δ) ~ 2|θ| ln(1/Δ).  The constant does not affect any argmin.)
    Evaluated as Σ (θᵢ/2)(aᵢ - tanh(aᵢ/2)), aᵢ = arcsinh(2θᵢ/Δᵢ) (computed in the log domain when 2θᵢ/Δᵢ
    overflows), which is accurate to a few ulps for every finite θ and Δ > 0 where ψ_Δ(θ) is a normal float64.

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
        If θ is not finite, Δ is not positive and finite, or ψ_Δ(θ) (a term or the sum) exceeds 1.8e308.
    """
    t, dl = _theta_delta(theta, delta)
    return _checked_sum("hyperbolic_entropy", _entropy_terms(t, dl), {"theta": t, "delta": dl},
                        "psi = (2 theta arcsinh(2 theta/delta) - sqrt(4 theta^2 + delta^2) + delta)/4")


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
    g = 0.5 * _mirror_coordinate(np.array(t, ndmin=1), np.array(dl, ndmin=1))
    return scalar_or_array(g.reshape(t.shape))


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
        If θ is not finite, Δ is not positive and finite, or 1 / sqrt(4θ² + Δ²) exceeds 1.8e308 (θ and Δ both
        below about 5.6e-309).
    """
    t, dl = _theta_delta(theta, delta)
    with np.errstate(over="ignore", divide="ignore"):
        h = np.hypot(2.0 * t, dl)
        out = 1.0 / h
        # 2θ overflowed (|θ| > 9e307; 1/hypot gave 0): 0.25/hypot(θ/2, Δ/4), a subnormal result, not 0
        out = np.where(np.isinf(h), 0.25 / np.hypot(0.5 * t, 0.25 * dl), out)
    rule = "1/sqrt(4 theta^2 + delta^2) with sqrt(4 theta^2 + delta^2) below 5.6e-309"
    return scalar_or_array(require_in_range("hyperbolic_entropy_hess", out, {"theta": t, "delta": dl}, rule))


def bregman(theta1, theta2, delta):
    """Bregman divergence D_ψΔ(θ₁, θ₂) = ψ_Δ(θ₁) - ψ_Δ(θ₂) - ⟨∇ψ_Δ(θ₂), θ₁ - θ₂⟩.

    The divergence minimised in Theorems 1 and 2.  Each coordinate is evaluated from the integral
    form D = (Δ/4) ∫_{a₂}^{a₁} (a - a₂) cosh a da (aₖ = arcsinh(2θₖ/Δ)) rewritten as a sum of two
    non-negative terms, with a₁ - a₂ obtained from an arcsinh-difference identity; the result is
    therefore ≥ 0, exactly 0 at θ₁ = θ₂, and accurate to a few ulps relative even when θ₁ ≈ θ₂, for every finite
    θ and Δ > 0 where D is a normal float64 (where a weight about 2|θ| overflows, the terms are formed at an exact
    power-of-two scale of the inputs: D is homogeneous of degree 1).

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
        If a point is not finite, Δ is not positive and finite, or D (a term or the sum) exceeds 1.8e308.
    """
    t1 = as_real_array("theta1", theta1)
    t2 = as_real_array("theta2", theta2)
    dl = as_real_array("delta", delta, low=0, low_open=True)
    t1, t2, dl = broadcast_named(theta1=t1, theta2=t2, delta=dl)
    return _checked_sum("bregman", _bregman_terms(t1, t2, dl), {"theta1": t1, "theta2": t2, "delta": dl},
                        "D = psi(theta1) - psi(theta2) - <grad psi(theta2), theta1 - theta2>")

