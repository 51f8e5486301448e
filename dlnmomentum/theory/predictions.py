"""Theorem 2's prediction for a finished run, as reported by the result objects and sweeps.

:func:`predict` solves the implicit-bias problem twice at the run's asymptotic balancedness Δ_∞: with the
perturbed initialisation θ̃₀ (Theorem 2, ``main_mgf:general``: the predicted limit) and with θ̃₀ = 0
(eq. ``eq:MGF_approx``: the gradient-flow interpolator θ^GF_{Δ_∞}), and measures the run's final predictor
against both.  The result is the frozen :class:`Prediction`.
"""

from dataclasses import dataclass

import numpy as np

from ..validate import as_array, as_design, as_real_array, as_real_vector
from ._float64 import norm2
from .implicit_bias_solver import DELTA_MAX, implicit_bias


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
    """‖a - b‖ / ‖b‖; 0 when a = b = 0 and inf when only b is 0, so a zero prediction is never divided by. The norms
    are :func:`._float64.norm2` (a run's θ of 1e300 is a finite distance that plain sums of squares overflow; inf
    only where the ratio itself exceeds float64)."""
    nb = norm2(b)
    with np.errstate(over="ignore"):
        diff = norm2(a - b)
    if not np.isfinite(diff) and np.all(np.isfinite(a)) and np.all(np.isfinite(b)):
        diff = 2.0 * norm2(0.5 * a - 0.5 * b)  # (a - b itself overflowed)
    if nb == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / nb


def predict(X, y, delta_inf, theta0_tilde, theta_final, *, theta0_mirror=None):
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
        Perturbed initialisation θ̃₀ of Theorem 2 (±inf where it overflows float64).
    theta_final : array_like, shape (d,)
        Predictor recovered by the run.
    theta0_mirror : array_like, shape (d,), optional
        θ̃₀'s mirror coordinate arcsinh(2θ̃₀/Δ_∞) (:func:`~dlnmomentum.theory.reference_mirror`), used
        when ``theta0_tilde`` is not finite (after hundreds of sign crossings); a finite ``theta0_tilde`` is
        used as it is.

    Returns
    -------
    Prediction
        ``predicted_theta``, ``prediction_gap``, ``theta_gf_delta_inf``, ``normalized_distance``.

    Raises
    ------
    ValueError
        On invalid input (e.g. a zero coordinate of Δ_∞, a θ̃₀ that is NaN, or infinite without
        ``theta0_mirror``), y ∉ range(X), or Newton failure.
    """
    X, y = as_design(X, y)
    d = X.shape[1]
    # Validated here so that errors name predict's own parameters (implicit_bias calls Δ_∞ "delta").
    delta_inf = as_real_vector("delta_inf", delta_inf, d, low=0, low_open=True, high=DELTA_MAX)
    final = as_real_array("theta_final", theta_final)
    if final.shape != (d,):
        raise ValueError(f"theta_final must have shape ({d},), got {final.shape}")
    if theta0_mirror is None:
        reference = {"theta0_tilde": as_real_vector("theta0_tilde", theta0_tilde, d)}
    else:
        raw = as_array("theta0_tilde", np.broadcast_to(theta0_tilde, (d,)) if np.ndim(theta0_tilde) == 0
                       else theta0_tilde, ndim=1, shape=(d,), finite=False)
        if np.any(np.isnan(raw)):
            raise ValueError("theta0_tilde must not be NaN (infinite entries, where it overflows, are allowed "
                             "with theta0_mirror)")
        mirror = as_real_vector("theta0_mirror", theta0_mirror, d)  # (checked even where θ̃₀ makes it unused)
        reference = {"theta0_tilde": raw} if np.all(np.isfinite(raw)) else {"theta0_mirror": mirror}
    predicted = implicit_bias(X, y, delta_inf, **reference).theta
    theta_gf = implicit_bias(X, y, delta_inf, 0.0).theta
    return Prediction(predicted_theta=predicted, prediction_gap=_relative_distance(final, predicted),
                      theta_gf_delta_inf=theta_gf, normalized_distance=_relative_distance(final, theta_gf))
