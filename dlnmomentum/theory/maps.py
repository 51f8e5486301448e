"""Parameter maps between momentum gradient descent MGD(γ, β) and momentum gradient flow MGF(λ).

* :func:`lam` and :func:`eps`: Proposition 1 (``prop:discretisation``): MGD(γ, β) discretises
  ``λ ẅ + ẇ + ∇F(w) = 0`` (eq. ``mgf:lambda``) with λ = γ/(1 - β)² at step ε = γ/(1 - β)
  (eq. ``mgf:discretisation``);
* :func:`lam_central`: the central-first-difference discretisation of Appendix A
  (``app:sec:notations``);
* :func:`from_lam_eps`: the inverse map (λ, ε) → (γ, β);
* :func:`accelerate`: the acceleration rule of Corollary 1 (``cor:speedup``);
* :func:`small_lambda_bound`: Proposition 3's (``small_lambda``) bound on λ that keeps the balancedness
  positive.

All maps broadcast their arguments and return floats for scalar input.
"""

import numpy as np

from ..validate import ParameterValueError, as_design, as_real_array, as_real_vector, broadcast_named
from ._float64 import FLOAT_MAX, inputs_at, norm2, scalar_or_array


def _gamma_beta(gamma, beta):
    """(γ, β) of MGD, broadcast together: γ in (0, inf), β in [0, 1)."""
    g = as_real_array("gamma", gamma, low=0, low_open=True)
    b = as_real_array("beta", beta, low=0, high=1, high_open=True)
    return broadcast_named(gamma=g, beta=b)


def _representable(what, value, gamma_beta_or_more, rule):
    """``value`` (an array) unless an entry left float64's range (inf, or a positive quantity rounded to 0): then
    a ValueError naming ``what``, which end, the inputs of the first such entry and ``rule``."""
    over, under = ~np.isfinite(value), value == 0.0
    if np.any(over | under):
        # (which end: "beyond float64's range" for a result that rounded to 0 sent users looking for an overflow)
        where = ("is beyond float64's range" if np.any(over)
                 else "rounds to 0 in float64 (below its smallest positive number, 5e-324)")
        raise ValueError(f"{what} {where} for {inputs_at(over | under, gamma_beta_or_more)} ({rule})")
    return value


def _below_one(what, value, inputs, rule):
    """``value`` (β or β̂, an array in [0, 1)) unless an entry rounded to 1: a ValueError naming it."""
    bad = value >= 1.0
    if np.any(bad):
        raise ValueError(f"{what} rounds to 1 in float64 for {inputs_at(bad, inputs)} ({rule} is below 1.1e-16), "
                         "outside [0, 1)")
    return value


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
        If γ ≤ 0, γ is not finite, β is outside [0, 1), or λ overflows float64.
    """
    g, b = _gamma_beta(gamma, beta)
    with np.errstate(over="ignore"):
        out = g / (1.0 - b) ** 2
    return scalar_or_array(_representable("lam", out, {"gamma": g, "beta": b}, "lam = gamma/(1-beta)^2"))


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
    with np.errstate(over="ignore"):
        out = g / (1.0 - b)
    return scalar_or_array(_representable("eps", out, {"gamma": g, "beta": b}, "eps = gamma/(1-beta)"))


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
    with np.errstate(over="ignore", under="ignore"):
        out = (1.0 + b) * g / (2.0 * (1.0 - b) ** 2)
        # (1 + β)γ can overflow where the quotient does not (γ = 1.7e308, β = 0.1: 1.15e308), or be rounded to the
        # subnormal grid (γ = 5e-324): there (1 + β)(γ/(2(1 - β)²)), dividing first
        redo = ~np.isfinite(out) | ((1.0 + b) * g < np.finfo(np.float64).tiny)
        out = np.where(redo, (1.0 + b) * (g / (2.0 * (1.0 - b) ** 2)), out)
    return scalar_or_array(_representable("lam_central", out, {"gamma": g, "beta": b},
                                          "lam_central = (1+beta) gamma/(2(1-beta)^2)"))


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
        If λ ≤ 0, ε ≤ 0, either is not finite, ε > λ (which would give β < 0), or γ or β leave float64 (γ
        underflows to 0, or ε/λ is so small that β rounds to 1).
    """
    lm = as_real_array("lam", lam, low=0, low_open=True)
    ep = as_real_array("eps", eps, low=0, low_open=True)
    lm, ep = broadcast_named(lam=lm, eps=ep)
    if np.any(ep > lm):
        raise ParameterValueError("eps must be in (0, lam] so that beta = 1 - eps/lam is in [0, 1), got "
                                  f"eps={float(ep[ep > lm].flat[0])!r} > lam={float(lm[ep > lm].flat[0])!r}",
                                  "eps=", "lam=")
    ratio = ep / lm
    with np.errstate(under="ignore"):
        gamma = _representable("gamma", ep * ratio, {"lam": lm, "eps": ep}, "gamma = eps^2/lam")
    beta = _below_one("beta", 1.0 - ratio, {"lam": lm, "eps": ep}, "beta = 1 - eps/lam: eps/lam")
    return scalar_or_array(gamma), scalar_or_array(beta)


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
        If γ, β or ρ are out of range, β̂ = 1 - ρ(1 - β) would be negative, γ̂ leaves float64 or β̂ rounds to 1.
    """
    g, b = _gamma_beta(gamma, beta)
    r = as_real_array("rho", rho, low=0, low_open=True)
    g, b, r = broadcast_named(gamma=g, beta=b, rho=r)
    one_minus_beta_hat = r * (1.0 - b)
    if np.any(one_minus_beta_hat > 1.0):
        bad = one_minus_beta_hat > 1.0
        raise ParameterValueError("rho must satisfy rho * (1 - beta) <= 1 so that beta_hat = 1 - rho*(1 - beta) "
                                  f"is in [0, 1), got rho={float(r[bad].flat[0])!r}, beta={float(b[bad].flat[0])!r}",
                                  "rho=", "beta=")
    given = {"gamma": g, "beta": b, "rho": r}
    with np.errstate(over="ignore", under="ignore"):
        gamma_hat = r * r * g
        # (ρ² underflows for ρ < 1e-154 where ρ²γ need not: ρ(ργ) there, so that the error names what fails)
        gamma_hat = _representable("gamma_hat", np.where(np.isfinite(gamma_hat) & (gamma_hat > 0.0), gamma_hat,
                                                         r * (r * g)), given, "gamma_hat = rho^2 gamma")
    beta_hat = _below_one("beta_hat", 1.0 - one_minus_beta_hat, given, "beta_hat = 1 - rho(1-beta): rho(1-beta)")
    return scalar_or_array(gamma_hat), scalar_or_array(beta_hat)


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
        On malformed shapes, negative or non-finite Δ₀, y = 0, or a bound beyond float64 (above 1.8e308, or
        positive but below 4.9e-324).
    """
    X, y = as_design(X, y)
    n, d = X.shape
    d0 = as_real_vector("delta0", delta0, d, low=0)
    y_norm = norm2(y)  # (np.linalg.norm's sum of squares underflows to 0 for a y of 1e-170, overflows at 1e160)
    if y_norm == 0.0:
        raise ValueError("y must not be identically zero (the bound divides by ||y||^2)")
    smallest = float(np.min(d0))
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        bound = float(n * smallest / np.float64(y_norm) ** 2)
    if not (1e-150 <= y_norm <= 1e150 and bound <= FLOAT_MAX and (bound > 0.0 or smallest == 0.0)):
        # ‖y‖² or n min Δ₀ left float64 (or ‖y‖² lost digits as a subnormal): the mantissas and the exponents
        # apart, rounded once at the end
        m_d, e_d = np.frexp(smallest)
        m_y, e_y = np.frexp(y_norm)
        with np.errstate(over="ignore", under="ignore"):
            bound = float(np.ldexp(n * m_d / (m_y * m_y), e_d - 2 * e_y))
    if not bound <= FLOAT_MAX or (bound == 0.0 and smallest > 0.0):
        where = "above 1.8e308" if bound else "below 4.9e-324"
        raise ValueError(f"small_lambda_bound is beyond float64's range for n={n}, min(delta0)={smallest!r}, "
                         f"||y||={y_norm!r} (n min(delta0)/||y||^2 is {where})")
    return bound
