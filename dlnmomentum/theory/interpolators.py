"""The interpolation constraint Xθ = y and its minimum-norm solutions.

* :func:`_require_interpolable` checks that y ∈ range(X), i.e. that the set S = {θ : Xθ = y} over which
  eq. ``implicit_bias_GF`` and Theorem 2 (``main_mgf:general``) minimise is not empty; the implicit-bias
  solver shares it (and the row space of X and the minimum-ℓ2 solution it returns);
* :func:`min_l1_interpolator`, argmin_{Xθ = y} ‖θ‖₁, is the limit of the implicit bias as Δ → 0, where
  ψ_Δ(θ) behaves like ln(1/Δ)‖θ‖₁ up to a constant factor (Lemma 5, ``entropy_asymptotics``; the "rich"
  regime);
* :func:`min_l2_interpolator`, argmin_{Xθ = y} ‖θ‖₂ = X⁺y, is its limit as Δ → ∞, where ψ_Δ(θ) behaves
  like Σ θᵢ²/(2Δᵢ) (the "kernel" regime).
"""

import numpy as np

from ..validate import as_design
from ._float64 import EPS, norm2

# Relative tolerance on ‖X θ_ls - y‖ / ‖y‖ above which y is declared outside range(X).
_RANGE_RTOL = 1e-10
# min_l1_interpolator solves at ‖y‖, max|X| in [0.5, 1) where either is outside [2^-_LP_PLAIN, 2^_LP_PLAIN].
_LP_PLAIN = 10


def _require_interpolable(X, y):
    """Raise ValueError unless y ∈ range(X) (relative least-squares residual at most ``_RANGE_RTOL``).

    From one SVD of X, returns (Vt restricted to the row space of X, ‖y‖, minimum-norm solution X⁺y).
    """
    u, sv, vt = np.linalg.svd(X, full_matrices=False)
    rank_tol = sv[0] * max(X.shape) * EPS if sv.size and sv[0] > 0 else 0.0
    rank = int(np.sum(sv > rank_tol))
    y_norm = norm2(y)  # (np.linalg.norm's sum of squares is 0 for a y of 1e-170: a y ≠ 0 was taken for y = 0)
    if rank == 0:
        if y_norm > 0:
            raise ValueError("y is not in range(X): X is zero but y is not, so no interpolator exists")
        return vt[:0], y_norm, np.zeros(X.shape[1])
    coef = (u[:, :rank].T @ y)
    out_of_range = norm2(y - u[:, :rank] @ coef)
    if y_norm > 0 and out_of_range > _RANGE_RTOL * y_norm:
        raise ValueError(
            f"y is not in range(X): the least-squares residual ||X theta_ls - y|| / ||y|| = "
            f"{out_of_range / y_norm:.3e} exceeds {_RANGE_RTOL:g}, so no interpolator exists")
    theta_ls = vt[:rank].T @ (coef / sv[:rank])
    return vt[:rank], y_norm, theta_ls


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
    X, y = as_design(X, y)
    _require_interpolable(X, y)
    n, d = X.shape
    # HiGHS's tolerances are absolute (primal feasibility 1e-7): a y of 1e-8 gave θ = 0, "feasible", and one of
    # 1e150 a model error. argmin_{Xθ = y} ‖θ‖₁ is homogeneous, θ(2⁻ʲX, 2⁻ᵏy) = 2^(j-k) θ(X, y): away from unit
    # scale it is solved at ‖y‖, max|X| in [0.5, 1) (powers of two: exact) and scaled back.
    _, k = np.frexp(norm2(y))
    _, j = np.frexp(float(np.max(np.abs(X))))
    if max(abs(int(k)), abs(int(j))) <= _LP_PLAIN:
        k = j = 0
    import scipy.optimize  # (here: `import dlnmomentum` and the command line start without SciPy)

    res = scipy.optimize.linprog(np.ones(2 * d), A_eq=np.hstack([np.ldexp(X, -j), -np.ldexp(X, -j)]),
                                 b_eq=np.ldexp(y, -k), bounds=[(0, None)] * (2 * d), method="highs")
    if res.status != 0:
        raise ValueError(f"min_l1_interpolator: linprog failed: {res.message}")
    with np.errstate(over="ignore"):
        theta = np.ldexp(res.x[:d] - res.x[d:], int(k) - int(j))
    if not np.all(np.isfinite(theta)):
        raise ValueError("min_l1_interpolator: the interpolator is beyond float64's range (above 1.8e308)")
    return theta


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
    X, y = as_design(X, y)
    _require_interpolable(X, y)
    return np.linalg.lstsq(X, y, rcond=None)[0]
