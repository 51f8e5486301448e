"""The paper's closed-form theory as code.

Papazov, Pesme & Flammarion, *Leveraging continuous time to understand momentum when training
diagonal linear networks*.  NumPy and SciPy only; every public name is re-exported here, so
``from dlnmomentum import theory; theory.lam(...)`` is the interface.  The modules:

* :mod:`.maps`: the parameter maps between MGD(γ, β) and MGF(λ) (Proposition 1, Corollary 1
  "acceleration rule", Appendix A's central-difference variant) and Proposition 3's small-λ bound;
* :mod:`.entropy`: the hyperbolic entropy ψ_Δ (eq. ``hyperbolic_entropy``), its gradient, Hessian and
  Bregman divergence, evaluated without overflow or catastrophic cancellation for every finite θ and Δ > 0 (a
  ValueError where the exact value exceeds float64);
* :mod:`.implicit_bias_solver`: the implicit-bias problem of Theorems 1 and 2,
  ``argmin_{Xθ = y} D_{ψ_Δ}(θ, θ̃₀)``, solved by damped Newton on its n-dimensional dual;
* :mod:`.interpolators`: the check y ∈ range(X) and the minimum-ℓ1 / minimum-ℓ2 interpolators, the
  limits of the implicit bias as Δ → 0 / Δ → ∞;
* :mod:`.predictions`: :func:`predict`, Theorem 2's prediction bundle used by the result objects.

Input validation is :mod:`dlnmomentum.validate`'s: a value out of range is a ValueError naming the parameter
and its allowed range; complex or non-numeric input is a TypeError naming the parameter.

Notation: ``a = arcsinh(2θ/Δ)`` is the "mirror coordinate" (``∇ψ_Δ(θ) = a/2``), so that
``θ = (Δ/2) sinh a`` and ``sqrt(4θ² + Δ²) = Δ cosh a``.
"""

from .entropy import bregman, hyperbolic_entropy, hyperbolic_entropy_grad, hyperbolic_entropy_hess, reference_mirror
from .implicit_bias_solver import ImplicitBiasResult, implicit_bias
from .interpolators import min_l1_interpolator, min_l2_interpolator
from .maps import accelerate, eps, from_lam_eps, lam, lam_central, small_lambda_bound
from .predictions import Prediction, predict

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
    "reference_mirror",
    "small_lambda_bound",
]
