"""The implicit-bias problem θ = argmin_{Xθ = y} D_ψΔ(θ, θ̃₀) and its dual Newton solver.

With Δ = Δ₀ and θ̃₀ = θ₀ the minimiser is the limit of gradient flow (eq. ``implicit_bias_GF``, Theorem 1);
with Δ = Δ_∞ and the perturbed initialisation θ̃₀ it is the limit of momentum gradient flow (Theorem 2,
``main_mgf:general``); with θ̃₀ = 0 it is argmin_{Xθ = y} ψ_Δ(θ) (eqs. ``eq:IB_GF``, ``eq:MGF_approx``).
This module owns :func:`implicit_bias`, its result :class:`ImplicitBiasResult`, and the solver: damped
Newton on the n-dimensional concave dual, a continuation in Δ for tiny Δ, and primal polishing.  The
entropy numerics (mirror coordinates, Bregman terms) come from :mod:`.entropy`, the check y ∈ range(X)
from :mod:`.interpolators`.
"""

from dataclasses import dataclass, replace

import numpy as np

from ..validate import as_bool, as_design, as_float, as_int, as_real_vector
from ._float64 import EPS, norm2
from .entropy import _bregman_terms, _mirror_coordinate, _theta_of_mirror
from .interpolators import _require_interpolable

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
#: The largest Δ the solver takes: Δ² stays finite (as the runs' weights, below 1e150).
DELTA_MAX = 1e150
# A y with ‖y‖ outside [2^-300, 2^300] is solved at the scale 2⁻ᵏ that brings it to ‖y‖ ~ 1 (see implicit_bias).
_Y_SCALE_EXPONENT = 300


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
        recomputed from the returned θ at the Δ asked for (0 when the denominator is 0).  Holds by construction
        of θ(ν), up to rounding, when ``converged``; where a continuation stage failed it measures how far θ is
        from stationary at that Δ.
    """

    theta: np.ndarray
    nu: np.ndarray
    kkt_residual: float
    iterations: int
    converged: bool
    stationarity_residual: float = 0.0


def _newton_direction(X, weights, rhs):
    """Solve (X diag(w) Xᵀ) p = rhs by Cholesky (least squares if singular).

    In floating point the Cholesky factor drops the directions carried only by weights below ~eps·max(w),
    a useful implicit regularisation of the dual Newton steps when Δ is tiny.
    """
    import scipy.linalg  # (here: `import dlnmomentum` and the command line start without SciPy)

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
    import scipy.linalg

    order = np.argsort(-weights, kind="stable")
    root = np.sqrt(weights[order])
    q, r = scipy.linalg.qr(X.T[order] * root[:, None], mode="economic", check_finite=False)
    if r.shape[0] != r.shape[1] or not np.all(np.diag(r) != 0):  # (n > d: X W Xᵀ is singular, R is d × n)
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


def _start_far_from_reference(X, theta0, delta):
    """Dual starting point when θ̃₀ lies far outside the scale of the interpolators, or None.

    ν = 0 starts Newton at θ(0) = θ̃₀. After sign crossings MGF's perturbed initialisation can reach
    |θ̃₀| ~ 1e50 (a = arcsinh(2θ̃₀/Δ) ~ 100 and more), and from there the damped Newton steps, capped in
    the mirror coordinates, need hundreds of iterations or fail. At the optimum a = a₀ + 2Xᵀν is moderate
    (θ interpolates), and its part outside range(Xᵀ) is a₀'s whatever ν: the ν of :func:`_row_space_free`
    starts on the optimum's scale. Returns that ν, or None if its θ is not finite (the solver then starts
    from ν = 0).
    """
    start = _row_space_free(X, _mirror_coordinate(theta0, delta), delta)
    return None if start is None else start[0]


def _row_space_free(X, a0, delta):
    """(ν, θ) with ν = -½ argmin ‖a₀ + 2Xᵀν‖ and θ = (Δ/2) sinh(a₀ + 2Xᵀν) = (Δ/2) sinh((I - Π)a₀), or None if
    θ is not finite. θ is a reference point equivalent to the one of mirror coordinate a₀: the implicit bias
    depends on the reference only through a₀ modulo range(Xᵀ)."""
    nu = -0.5 * np.linalg.lstsq(X.T, a0, rcond=None)[0]
    with np.errstate(over="ignore", invalid="ignore"):
        theta = _theta_of_mirror(a0 + 2.0 * (X.T @ nu), delta)
    if not (np.all(np.isfinite(nu)) and np.all(np.isfinite(theta))):
        return None
    return nu, theta


def _warm_start(X, y, nu, theta, theta0, old_delta, new_delta, scaling):
    """Dual starting point when Δ changes from ``old_delta`` to ``new_delta`` (previous solution ν, θ).

    Candidates: ν itself; ν·``scaling`` (the optimal ν grows like ln(1/Δ) when Δ → 0); and
    ν + t·(X W Xᵀ)⁻¹ X W g, t ∈ {1, ½, ¼}, where g = ½[(a(θ) - a(θ̃₀)) at new Δ - (same) at old Δ] is the
    mirror shift that would keep θ fixed, projected onto range(Xᵀ) in the metric W = diag(sqrt(4θ² + Δ²)).
    The candidate with the largest dual value G at the new Δ is returned (G is the objective maximised).
    """
    a0 = _mirror_coordinate(theta0, new_delta)
    old_gap = _mirror_coordinate(theta, old_delta) - _mirror_coordinate(theta0, old_delta)
    shift = 0.5 * ((_mirror_coordinate(theta, new_delta) - a0) - old_gap)
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
    a0 = _mirror_coordinate(theta0, delta)

    def evaluate(nu):
        return _dual_state(X, y, nu, a0, theta0, delta)

    # (norm2, not np.linalg.norm: its sum of squares rounds a residual of 1e-170 to 0, and a y of 1e-300 was
    # "solved" by θ = 0 with converged=True)
    def norm_of(residual):
        with np.errstate(over="ignore"):
            return norm2(residual) / scale

    def floor_of(theta):
        # Rounding floor of ‖Xθ - y‖ / ‖y‖ for a θ known to working precision.
        return 8.0 * EPS * norm2(abs_x @ np.abs(theta)) / scale

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
                noise = 64.0 * EPS * (abs(value) + abs(trial[3]) + abs(float(nu @ residual)))
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


def _solve_rescaled(X, y, delta, theta0, theta0_mirror, tol, max_iter, raise_on_failure):
    """The problem at 2⁻ᵏ(y, Δ, θ̃₀) with θ scaled back by 2ᵏ, where ‖y‖ lies outside [2^-300, 2^300]; None elsewhere.

    D_ψΔ is homogeneous of degree 1 in (θ, θ̃₀, Δ) and the mirror coordinates arcsinh(2θ/Δ) are invariant, so the
    minimiser at (y, Δ, θ̃₀) is 2ᵏ times the one at 2⁻ᵏ(y, Δ, θ̃₀), with the same ν and relative residuals (and
    theta0_mirror unchanged); powers of two scale exactly. At ‖y‖ ~ 1e200 the solver's products X θ and its dual
    value overflowed, and no Δ converged. k is clamped so that 2⁻ᵏΔ stays within [1.5e-300, 1e150] (DELTA_MAX) and
    2⁻ᵏθ̃₀ below 2^1000: where those leave no room, the problem is solved as it is.
    """
    y_size = norm2(y)
    if y_size == 0.0 or 2.0**-_Y_SCALE_EXPONENT <= y_size <= 2.0**_Y_SCALE_EXPONENT:
        return None
    k = int(np.frexp(y_size)[1])
    low = int(np.frexp(np.max(delta))[1]) - 498                  # 2⁻ᵏ max Δ < 2^498 < DELTA_MAX
    biggest = float(np.max(np.abs(theta0)))
    if biggest > 0.0:
        low = max(low, int(np.frexp(biggest)[1]) - 1000)         # 2⁻ᵏ max |θ̃₀| < 2^1000
    high = int(np.frexp(np.min(delta))[1]) + 996                 # 2⁻ᵏ min Δ ≥ 2^-997
    k = min(max(k, low), high)
    if low > high or k == 0:
        return None
    result = implicit_bias(X, np.ldexp(y, -k), np.ldexp(delta, -k), np.ldexp(theta0, -k),
                           theta0_mirror=theta0_mirror, tol=tol, max_iter=max_iter, raise_on_failure=raise_on_failure)
    with np.errstate(over="ignore"):
        theta = np.ldexp(result.theta, k)
    if not np.all(np.isfinite(theta)):
        raise ValueError("implicit_bias: the minimiser is beyond float64's range (above 1.8e308)")
    return replace(result, theta=theta)


def implicit_bias(X, y, delta, theta0_tilde=0.0, *, theta0_mirror=None, tol=1e-12, max_iter=100,
                  raise_on_failure=True):
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

    A reference point far outside the interpolators' scale (|θ̃₀| beyond e^20 times it: MGF's perturbed
    initialisation after sign crossings reaches 1e50) is not a starting point: Newton then starts where the
    row-space part of arcsinh(2θ̃₀/Δ) is removed, which puts θ on the solution's scale.

    Tested for Δ between 1e-300 and 1e8 (also coordinate-wise heterogeneous over ~30 decades), d up to
    1e4, and θ̃₀ up to 1e103 with Δ between 5e-6 and 1.6e-2 (the range of MGF's Δ∞ on the paper's
    problem; MGD runs at β = 0.98 reach θ̃₀ ~ 1e181 and their predictions converge too); extremely
    heterogeneous Δ (e.g. 1e-200 next to 1e8 in the same vector), and θ̃₀ beyond 1e100 together with Δ
    down to 1e-100, can fail to converge, which is reported. A y with ‖y‖ outside [2^-300, 2^300] is solved at
    2⁻ᵏ(y, Δ, θ̃₀), ‖y‖ ~ 1, and θ scaled back (the problem is homogeneous); what decides convergence is the ratio
    of |θ| to Δ, and at |θ|/Δ ~ 1e-300 (the dual's values underflow) Newton fails, which is reported.

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
    theta0_mirror : array_like, shape (d,), optional
        The reference point given by its mirror coordinate a₀ = arcsinh(2θ̃₀/Δ) instead (finite), for a θ̃₀
        beyond floating-point range (:func:`~dlnmomentum.theory.reference_mirror`); pass one of
        ``theta0_tilde`` and ``theta0_mirror``. The problem is then solved from the equivalent reference
        (Δ/2) sinh((I - Π)a₀) (Π the projector onto range(Xᵀ): the minimiser depends on a₀ only modulo
        range(Xᵀ)), and ``nu`` is the multiplier for a₀ itself.
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
    X, y = as_design(X, y)
    n, d = X.shape
    # (Δ² and the Newton weights, about |θ| + Δ, must stay finite: Δ up to 1e150, as the runs' weights)
    delta = as_real_vector("delta", delta, d, low=0, low_open=True, high=DELTA_MAX)
    theta0 = as_real_vector("theta0_tilde", theta0_tilde, d)
    rescaled = _solve_rescaled(X, y, delta, theta0, theta0_mirror, tol, max_iter, raise_on_failure)
    if rescaled is not None:
        return rescaled
    shift = None                         # ν of the equivalent reference point (theta0_mirror)
    if theta0_mirror is not None:
        if np.any(theta0 != 0.0):
            raise ValueError("implicit_bias: pass theta0_tilde or theta0_mirror, not both")
        mirror = as_real_vector("theta0_mirror", theta0_mirror, d)
        equivalent = _row_space_free(X, mirror, delta)
        if equivalent is None:
            raise ValueError("theta0_mirror: the reference point has no finite equivalent (its mirror coordinates "
                             "outside range(X^T) exceed about 700 plus ln(4/delta))")
        shift, theta0 = equivalent
    tol = as_float("tol", tol, low=0, low_open=True, high=1.0, high_open=True)  # (at 1, θ = 0 would do)
    raise_on_failure = as_bool("raise_on_failure", raise_on_failure)
    max_iter = as_int("max_iter", max_iter, low=1)

    row_space, y_norm, theta_ls = _require_interpolable(X, y)
    scale = y_norm if y_norm > 0 else 1.0
    abs_x = np.abs(X)

    # Continuation in Δ for tiny Δ (relative to the solution scale C): far from the optimum the dual is
    # nearly linear and Newton advances the mirror coordinates only a few units per iteration, while
    # the optimum has a ≈ ln(4|θ|/Δ).  Solve first with Δ clipped from below at C e^{-20}, then at
    # C e^{-60}, C e^{-100}, ..., finally with Δ itself, warm-starting each stage (see _warm_start).
    # C is the larger of the interpolators' scale and θ̃₀'s, the start θ(0); a reference point beyond
    # e^{_HOMOTOPY_START} times the interpolators' scale is not the start (_start_far_from_reference) and
    # leaves C to the interpolators (measured on constructed problems with |θ̃₀| up to 1e103: with C from
    # that start, 3 of 24 failed for Δ down to 1e-100; with C from the interpolators, 1).
    ls_scale = float(np.max(np.abs(theta_ls)))
    c_scale = max(ls_scale, float(np.max(np.abs(theta0))))
    far_reference = c_scale > ls_scale * np.exp(_HOMOTOPY_START)
    if far_reference:
        c_scale = ls_scale
    log_gap = float(np.log(c_scale) - np.log(np.min(delta))) if c_scale > 0 else 0.0  # (c/Δ overflows for tiny Δ)
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
        elif far_reference:
            start = _start_far_from_reference(X, theta0, stage_delta)
            if start is not None:
                nu = start
        nu, theta, a0, res_norm, its, converged = _dual_newton(
            X, y, abs_x, stage_delta, theta0, nu, scale, tol if last else _HOMOTOPY_TOL, max_iter, last)
        iterations += its
        if not converged:
            break

    if shift is not None:
        nu = nu + shift
    if stage_delta is not delta:  # a stage before the last failed: the residual at the Δ asked for, not the stage's
        a0 = _mirror_coordinate(theta0, delta)
    with np.errstate(over="ignore", invalid="ignore"):
        grad_gap = 0.5 * (_mirror_coordinate(theta, delta) - a0)
    gap_norm = norm2(grad_gap)
    outside = grad_gap - row_space.T @ (row_space @ grad_gap)
    stationarity = norm2(outside) / gap_norm if gap_norm > 0 else 0.0
    result = ImplicitBiasResult(theta=theta, nu=nu, kkt_residual=res_norm, iterations=iterations,
                                converged=bool(converged), stationarity_residual=stationarity)
    if not converged and theta0_mirror is None and np.any(theta0 != 0.0):
        # Once more from the equivalent reference point of the same mirror coordinate a₀ (the minimiser depends on
        # a₀ only modulo range(Xᵀ)): with θ̃₀ ~ 1e-63 against Δ∞ ~ 1e-133..1e-104 (MGF from α = 1e-50,
        # tests/test_rodas_extremes.py) Newton from θ(0) = θ̃₀ stalled at a residual of 0.27 on an AMD EPYC (it
        # converged on an Intel Xeon: the BLAS's roundings differ), and from the equivalent point it converges.
        # (a0 is θ̃₀'s mirror coordinate at the Δ asked for: the last stage's, or set above after an earlier one failed)
        if np.all(np.isfinite(a0)):
            again = implicit_bias(X, y, delta, theta0_mirror=a0, tol=tol, max_iter=max_iter, raise_on_failure=False)
            if again.converged:
                return replace(again, iterations=iterations + again.iterations)
    if not converged and raise_on_failure:
        raise ValueError(
            f"implicit_bias: Newton did not converge in {iterations} iterations (relative residual "
            f"||X theta - y||/||y|| = {res_norm:.3e} > tol = {tol:g}); try a larger max_iter or tol, or "
            "check the scale of delta")
    return result
