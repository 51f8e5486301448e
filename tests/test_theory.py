"""Tests of dlnmomentum.theory against independent references.

References used: the MGD / discretised-MGF recursions themselves (parameter maps), mpmath at high precision
(entropy, Bregman divergence), finite differences (gradient, Hessian), closed-form limits (Lemma 5, the
quadratic regime, Euclidean projection), scipy's trust-constr and HiGHS LP solvers (implicit bias), and
a brute-force vertex enumeration (minimum-ℓ1 interpolator).
"""

import itertools
import warnings

import numpy as np
import pytest
import scipy.linalg
import scipy.optimize
from hypothesis import given, settings
from hypothesis import strategies as st

from dlnmomentum import theory

EPS = np.finfo(float).eps


def sparse_regression(n, d, s, seed, mu=1.0, sigma=1.0):
    """The paper's data: x_i ~ N(mu 1, sigma² I), y = X θ*, θ* s-sparse with entries 1/sqrt(s)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(mu, sigma, size=(n, d))
    theta_star = np.zeros(d)
    theta_star[:s] = 1.0 / np.sqrt(s)
    return X, X @ theta_star, theta_star


def kkt_residuals(X, y, theta, delta, theta0):
    """Independent KKT check: (‖Xθ - y‖/‖y‖, ‖Π_null(X)(∇ψ(θ) - ∇ψ(θ̃₀))‖ / ‖∇ψ(θ) - ∇ψ(θ̃₀)‖)."""
    primal = np.linalg.norm(X @ theta - y) / np.linalg.norm(y)
    delta = np.broadcast_to(delta, theta.shape)
    theta0 = np.broadcast_to(theta0, theta.shape)
    gap = 0.5 * (np.arcsinh(2 * theta / delta) - np.arcsinh(2 * theta0 / delta))
    gap = gap / np.abs(gap).max()                 # (a ratio: scaled so that the squares of a tiny gap do not underflow)
    null = scipy.linalg.null_space(X)
    stationarity = np.linalg.norm(null.T @ gap) / np.linalg.norm(gap)
    return primal, stationarity


# ------------------------------------------------------------------------------------------------
# 1. Parameter maps
# ------------------------------------------------------------------------------------------------

def test_parameter_maps_closed_forms():
    assert theory.lam(0.1, 0.9) == pytest.approx(10.0, rel=1e-13)
    assert theory.eps(0.1, 0.9) == pytest.approx(1.0, rel=1e-13)
    assert theory.lam_central(0.1, 0.9) == pytest.approx(1.9 * 0.1 / (2 * 0.01), rel=1e-13)
    assert theory.lam(0.3, 0.0) == pytest.approx(0.3, rel=1e-15)        # no momentum: λ = γ
    assert theory.lam_central(0.3, 0.0) == pytest.approx(0.15, rel=1e-15)
    gamma, beta = theory.from_lam_eps(10.0, 1.0)
    assert (gamma, beta) == (pytest.approx(0.1, rel=1e-14), pytest.approx(0.9, rel=1e-14))
    assert isinstance(theory.lam(0.1, 0.5), float)


@pytest.mark.parametrize("gamma, beta", [(0.01, 0.0), (0.05, 0.5), (0.2, 0.9), (1e-4, 0.999)])
def test_maps_reproduce_the_discretisations(gamma, beta):
    """Proposition 1 and Appendix A: one MGD step solves the backward / central discretised MGF(λ)."""
    rng = np.random.default_rng(0)
    w_prev, w, grad = rng.normal(size=(3, 7))
    w_next = w - gamma * grad + beta * (w - w_prev)                      # MGD(γ, β)
    lam, step = theory.lam(gamma, beta), theory.eps(gamma, beta)
    backward = lam * (w_next - 2 * w + w_prev) / step**2 + (w - w_prev) / step + grad
    np.testing.assert_allclose(backward, 0.0, atol=1e-9 * (1 + lam / step**2))
    lam_c = theory.lam_central(gamma, beta)
    central = lam_c * (w_next - 2 * w + w_prev) / step**2 + (w_next - w_prev) / (2 * step) + grad
    np.testing.assert_allclose(central, 0.0, atol=1e-9 * (1 + lam_c / step**2))
    # the two λ's differ by the factor (1 + β)/2 and agree as β → 1
    assert lam_c / lam == pytest.approx((1 + beta) / 2, rel=1e-13)


@settings(max_examples=60, deadline=None)
@given(gamma=st.floats(1e-8, 10.0), beta=st.floats(0.0, 0.9999))
def test_from_lam_eps_round_trip(gamma, beta):
    g, b = theory.from_lam_eps(theory.lam(gamma, beta), theory.eps(gamma, beta))
    assert g == pytest.approx(gamma, rel=1e-9)
    assert b == pytest.approx(beta, rel=1e-9, abs=1e-12)
    lam, step = theory.lam(gamma, beta), theory.eps(gamma, beta)
    assert step == pytest.approx(np.sqrt(lam * gamma), rel=1e-12)       # ε = sqrt(λγ)


@settings(max_examples=60, deadline=None)
@given(gamma=st.floats(1e-6, 1.0), beta=st.floats(0.5, 0.999), rho=st.floats(0.01, 2.0))
def test_accelerate_keeps_lambda_and_scales_eps(gamma, beta, rho):
    if rho * (1 - beta) > 1:
        return
    g_hat, b_hat = theory.accelerate(gamma, beta, rho)
    assert g_hat == pytest.approx(rho**2 * gamma, rel=1e-14)
    assert b_hat == pytest.approx(1 - rho * (1 - beta), rel=1e-12, abs=1e-15)
    assert theory.lam(g_hat, b_hat) == pytest.approx(theory.lam(gamma, beta), rel=1e-9)
    assert theory.eps(g_hat, b_hat) == pytest.approx(rho * theory.eps(gamma, beta), rel=1e-9)


def test_accelerate_examples():
    assert theory.accelerate(0.1, 0.9, 2.0) == (pytest.approx(0.4), pytest.approx(0.8))
    assert theory.accelerate(0.1, 0.9, 1.0) == (pytest.approx(0.1), pytest.approx(0.9))
    # Corollary 1's footnote: 1 - ρ(1 - β) = β^ρ + O((1 - β)²)
    for one_minus_beta in (1e-2, 1e-3):
        _, b_hat = theory.accelerate(1.0, 1 - one_minus_beta, 3.0)
        assert abs(b_hat - (1 - one_minus_beta) ** 3) <= 4 * one_minus_beta**2


def test_parameter_maps_broadcast_arrays():
    gammas = np.array([0.1, 0.2, 0.4])
    np.testing.assert_allclose(theory.lam(gammas, 0.5), gammas / 0.25, rtol=1e-14)
    betas = np.array([[0.0], [0.5]])
    out = theory.eps(gammas, betas)
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out, gammas / (1 - betas), rtol=1e-14)
    g, b = theory.from_lam_eps(np.array([10.0, 4.0]), np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, [0.1, 1.0], rtol=1e-14)
    np.testing.assert_allclose(b, [0.9, 0.5], rtol=1e-14)
    g, b = theory.accelerate(0.1, np.array([0.9, 0.95]), 2.0)
    np.testing.assert_allclose(b, [0.8, 0.9], rtol=1e-14)


@pytest.mark.parametrize("call, name", [
    (lambda: theory.lam(0.0, 0.5), "gamma"),
    (lambda: theory.lam(-1.0, 0.5), "gamma"),
    (lambda: theory.lam(np.inf, 0.5), "gamma"),
    (lambda: theory.eps(np.nan, 0.5), "gamma"),
    (lambda: theory.lam(0.1, 1.0), "beta"),
    (lambda: theory.eps(0.1, -0.1), "beta"),
    (lambda: theory.lam_central(0.1, np.array([0.5, 1.5])), "beta"),
    (lambda: theory.from_lam_eps(0.0, 0.1), "lam"),
    (lambda: theory.from_lam_eps(1.0, -0.1), "eps"),
    (lambda: theory.from_lam_eps(1.0, 2.0), "eps"),
    (lambda: theory.accelerate(0.1, 0.5, 0.0), "rho"),
    (lambda: theory.accelerate(0.1, 0.5, 3.0), "rho"),
    (lambda: theory.accelerate(0.1, 1.0, 2.0), "beta"),
])
def test_parameter_validation(call, name):
    with pytest.raises(ValueError, match=name):
        call()


def test_small_lambda_bound():
    X = np.arange(12.0).reshape(3, 4)
    y = np.array([1.0, 2.0, 2.0])                    # ‖y‖² = 9
    assert theory.small_lambda_bound(X, y, [0.5, 0.2, 0.3, 0.9]) == pytest.approx(3 * 0.2 / 9, rel=1e-15)
    assert theory.small_lambda_bound(X, y, 0.4) == pytest.approx(3 * 0.4 / 9, rel=1e-15)
    with pytest.raises(ValueError, match="delta0"):
        theory.small_lambda_bound(X, y, [0.5, -0.2, 0.3, 0.9])
    with pytest.raises(ValueError, match="delta0"):
        theory.small_lambda_bound(X, y, [0.5, 0.2])
    with pytest.raises(ValueError, match="y"):
        theory.small_lambda_bound(X, np.zeros(3), 0.1)


# ------------------------------------------------------------------------------------------------
# 2. Hyperbolic entropy, gradient, Hessian, Bregman divergence
# ------------------------------------------------------------------------------------------------

def _mp_entropy(mp, t, d):
    t, d = mp.mpf(t), mp.mpf(d)
    return (2 * t * mp.asinh(2 * t / d) - mp.sqrt(4 * t * t + d * d) + d) / 4


def _mp_bregman(mp, t1, t2, d):
    grad2 = mp.asinh(2 * mp.mpf(t2) / mp.mpf(d)) / 2
    return _mp_entropy(mp, t1, d) - _mp_entropy(mp, t2, d) - grad2 * (mp.mpf(t1) - mp.mpf(t2))


def _relative_ulps(value, reference):
    return float(abs((value - reference) / reference)) / EPS


THETAS = [0.0, 1e-300, -1e-200, 1e-20, -1e-3, 0.5, -1.0, 7.0, -1e3, 1e6, -1e6]
DELTAS = [1e-300, 1e-150, 1e-12, 1e-3, 1.0, 1e3, 1e12, 1e150, 1e300]


def test_entropy_matches_mpmath_at_extreme_scales():
    mpmath = pytest.importorskip("mpmath")
    with mpmath.workdps(1300):                    # enough digits for the naive formula at Δ/θ ~ 1e600
        for d in DELTAS:
            values = theory.hyperbolic_entropy(np.array(THETAS)[:, None], d)
            for t, value in zip(THETAS, values, strict=True):
                ref = _mp_entropy(mpmath, t, d)
                assert np.isfinite(value) and value >= 0
                if abs(ref) > 1e-290:             # normal (non-subnormal) results: a few ulps
                    assert _relative_ulps(value, ref) < 4, (t, d, value, ref)
                else:
                    assert value <= 1e-280


def test_bregman_matches_mpmath():
    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(1)
    cases = []
    for d in DELTAS:
        for t in (1e-250, 3e-7, 0.8, 1e6):
            cases.append((t, -0.6 * t, d))                       # opposite signs
            cases.append((t, t * (1 + 3e-14), d))                # nearly equal: θ₁ - θ₂ exact
            cases.append((-t, -t * (1 + 1e-5), d))
            cases.append((t, 0.0, d))
    for _ in range(40):                                          # random scales
        d = 10.0 ** rng.uniform(-300, 300)
        t1, t2 = rng.choice([-1, 1], 2) * 10.0 ** rng.uniform(-300, 6, 2)
        cases.append((t1, t2, d))
    with mpmath.workdps(1300):
        for t1, t2, d in cases:
            value = theory.bregman(t1, t2, d)
            ref = _mp_bregman(mpmath, t1, t2, d)
            assert np.isfinite(value) and value >= 0
            if abs(ref) > 1e-290:
                assert _relative_ulps(value, ref) < 8, (t1, t2, d, value, ref)
            else:
                assert value <= 1e-280


def test_reference_mirror_matches_mpmath_where_theta0_tilde_overflows():
    """arcsinh(2θ̃₀/Δ) for θ̃₀ = ¼(w₊₀² e^{-2S₊} - w₋₀² e^{-2S₋}), exponents up to ±600 (θ̃₀ up to e^1200)."""
    from dlnmomentum.theory.entropy import _mirror_coordinate, reference_mirror

    mpmath = pytest.importorskip("mpmath")
    rng = np.random.default_rng(3)
    n = 400
    w_plus0 = rng.uniform(1e-3, 2e-2, n)
    w_minus0 = rng.uniform(1e-3, 2e-2, n) * rng.choice([-1.0, 1.0], n)
    s_plus = rng.normal(size=n) * 10.0 ** rng.uniform(-1, np.log10(600), n)
    s_minus = rng.normal(size=n) * 10.0 ** rng.uniform(-1, np.log10(600), n)
    s_minus[:20] = s_plus[:20] + np.log(np.abs(w_minus0[:20] / w_plus0[:20]))   # θ̃₀ = 0 up to rounding
    delta = 10.0 ** rng.uniform(-8, 0, n)
    a0 = reference_mirror(w_plus0, w_minus0, s_plus, s_minus, delta)
    assert np.all(np.isfinite(a0))
    eps = np.finfo(float).eps
    with mpmath.workdps(50):
        for i in range(n):
            big_a = mpmath.mpf(w_plus0[i]) ** 2 * mpmath.exp(-2 * mpmath.mpf(s_plus[i]))
            big_b = mpmath.mpf(w_minus0[i]) ** 2 * mpmath.exp(-2 * mpmath.mpf(s_minus[i]))
            dl = mpmath.mpf(delta[i])
            x = (big_a - big_b) / (2 * dl)
            ref = float(mpmath.asinh(x))
            # the condition of a₀ in the log-terms l± = ln|w±₀| - S± (rounded to a few eps each): ∂a₀/∂l±
            # = (A or B)/Δ / sqrt(1 + x²), large where θ̃₀ ~ 0 but its terms are not small against Δ
            slope_a = float(big_a / dl / mpmath.sqrt(1 + x * x))
            slope_b = float(big_b / dl / mpmath.sqrt(1 + x * x))
            size_a = abs(s_plus[i]) + abs(np.log(w_plus0[i]))
            size_b = abs(s_minus[i]) + abs(np.log(abs(w_minus0[i])))
            bound = 1e-13 * (1 + abs(ref)) + 4 * eps * (slope_a * size_a + slope_b * size_b)
            assert abs(a0[i] - ref) <= bound, (i, a0[i], ref, bound)
    with np.errstate(over="ignore", invalid="ignore"):
        theta0 = 0.25 * (w_plus0**2 * np.exp(-2 * s_plus) - w_minus0**2 * np.exp(-2 * s_minus))
    finite = np.isfinite(theta0)
    assert 0 < finite.sum() < n
    finite[:20] = False            # (θ̃₀ ~ 0 by cancellation: the formula in θ̃₀ is the inaccurate one there)
    np.testing.assert_allclose(a0[finite], _mirror_coordinate(theta0[finite], delta[finite]), rtol=1e-12,
                               atol=1e-12 * np.abs(s_plus[finite]).max())


def test_entropy_and_bregman_vectorised_and_finite_at_extremes():
    theta = np.array([1e6, -1e6, 1e6, -1e6, 0.0])
    delta = np.array([1e-300, 1e-300, 1e300, 1e300, 1e-300])
    value = theory.hyperbolic_entropy(theta, delta)
    assert np.isfinite(value)
    # θ ≫ Δ: ψ ≈ (|θ|/2)(ln(4|θ|/Δ) - 1) (error O(Δ/|θ|)), θ ≪ Δ: ψ ≈ θ²/(2Δ)
    big = 0.5e6 * (np.log(4e6) - np.log(1e-300) - 1.0)
    assert value == pytest.approx(2 * big + 2 * 1e12 / 2e300, rel=1e-15)
    div = theory.bregman(theta, theta[::-1], delta)
    assert np.isfinite(div) and div > 0
    assert theory.bregman(theta, theta, delta) == 0.0
    # scalar / batched shapes
    batch = theory.hyperbolic_entropy(np.ones((4, 3)), 1.0)
    assert batch.shape == (4,)
    np.testing.assert_allclose(batch, 3 * theory.hyperbolic_entropy(1.0, 1.0), rtol=1e-15)


def test_bregman_identities():
    rng = np.random.default_rng(2)
    theta = rng.normal(size=50) * 10.0 ** rng.uniform(-5, 5, 50)
    delta = 10.0 ** rng.uniform(-10, 10, 50)
    # ψ(0) = 0 and ∇ψ(0) = 0, so D(θ, 0) = ψ(θ)
    psi = theory.hyperbolic_entropy(theta, delta)
    assert theory.bregman(theta, 0.0, delta) == pytest.approx(psi, rel=1e-13)
    # Three-point identity D(a,c) = D(a,b) + D(b,c) + <∇ψ(b) - ∇ψ(c), a - b>, on well-conditioned data
    a, b, c = rng.normal(size=(3, 20))
    dl = rng.uniform(0.5, 2.0, 20)
    lhs = theory.bregman(a, c, dl)
    cross = np.dot(theory.hyperbolic_entropy_grad(b, dl) - theory.hyperbolic_entropy_grad(c, dl), a - b)
    rhs = theory.bregman(a, b, dl) + theory.bregman(b, c, dl) + cross
    assert lhs == pytest.approx(rhs, rel=1e-12)


@settings(max_examples=150, deadline=None)
@given(
    t1=st.floats(-1e6, 1e6, allow_subnormal=False),
    t2=st.floats(-1e6, 1e6, allow_subnormal=False),
    log_delta=st.floats(-300, 300),
)
def test_bregman_nonnegative_property(t1, t2, log_delta):
    delta = 10.0**log_delta
    value = theory.bregman(t1, t2, delta)
    assert np.isfinite(value) and value >= 0.0
    if t1 != t2 and abs(t1 - t2) > 1e-150 * max(1.0, delta):
        assert value > 0.0
    psi = theory.hyperbolic_entropy(t1, delta)
    assert np.isfinite(psi) and psi >= 0.0


def test_entropy_tends_to_weighted_l1_as_delta_vanishes():
    """Lemma 5 (entropy_asymptotics): ψ_Δ(θ) ∝ Σ ln(1/Δᵢ)|θᵢ| as Δ → 0.

    NOTE: with eq. hyperbolic_entropy the equivalent is ½ Σ ln(1/Δᵢ)|θᵢ| (2θ arcsinh(2θ/Δ) ~ 2|θ| ln(1/Δ));
    the paper's Lemma 5 writes ¼, for which the ratio tends to 2.  Checked here: ratio → 1 with ½.
    """
    theta = np.array([0.3, -1.2, 2.0, 0.0])
    errors = []
    for k in (10, 30, 100, 300):
        delta = 10.0**-k
        psi = theory.hyperbolic_entropy(theta, delta)
        ratio = psi / (0.5 * np.log(1 / delta) * np.abs(theta).sum())
        errors.append(abs(ratio - 1))
        # expansion: ψ = Σ (|θ|/2)(ln(4|θ|/Δ) - 1) + Δ/4 + O(Δ²): relative error ≲ max|ln 4|θ| - 1| / ln(1/Δ)
        assert abs(ratio - 1) <= np.max(np.abs(np.log(4 * np.abs(theta[:3])) - 1)) / np.log(1 / delta)
        nonzero = np.abs(theta[:3])
        expansion = np.sum(0.5 * nonzero * (np.log(4 * nonzero / delta) - 1) + delta / 4)
        assert psi == pytest.approx(expansion, rel=1e-14)
        paper_ratio = psi / (0.25 * np.log(1 / delta) * np.abs(theta).sum())
        assert abs(paper_ratio - 2) <= 2 * errors[-1] + 1e-15
    assert errors == sorted(errors, reverse=True)
    assert errors[-1] < 0.01
    # coordinate-wise Δ
    delta = np.array([1e-300, 1e-200, 1e-250, 1e-100])
    ratio = theory.hyperbolic_entropy(theta, delta) / (0.5 * np.sum(np.log(1 / delta) * np.abs(theta)))
    assert abs(ratio - 1) < 0.01


def test_entropy_tends_to_quadratic_as_delta_grows():
    theta = np.array([0.3, -1.2, 2.0, 1e6])
    for delta in (1e3, 1e8, 1e20, 1e300):
        exact = np.sum(theta**2 / (2 * delta))
        # ψ = Σ θ²/(2Δ) (1 - θ²/(3Δ²) + ...)
        assert theory.hyperbolic_entropy(theta, delta) == pytest.approx(
            exact, rel=max(4 * EPS, (np.max(np.abs(theta)) / delta) ** 2))


@pytest.mark.parametrize("delta", [0.01, 1.0, 100.0])
def test_gradient_and_hessian_match_finite_differences(delta):
    theta = np.array([-3.0, -0.4, -1e-3, 0.0, 2e-3, 0.7, 5.0]) * np.sqrt(delta)
    grad = theory.hyperbolic_entropy_grad(theta, delta)
    hess = theory.hyperbolic_entropy_hess(theta, delta)
    for i, t in enumerate(theta):
        h = 1e-4 * max(abs(t), delta)
        plus, minus = theta.copy(), theta.copy()
        plus[i] += h
        minus[i] -= h
        fd_grad = (theory.hyperbolic_entropy(plus, delta) - theory.hyperbolic_entropy(minus, delta)) / (2 * h)
        assert grad[i] == pytest.approx(fd_grad, rel=1e-6, abs=1e-9)
        grad_plus, grad_minus = theory.hyperbolic_entropy_grad(np.array([t + h, t - h]), delta)
        fd_hess = (grad_plus - grad_minus) / (2 * h)
        assert hess[i] == pytest.approx(fd_hess, rel=1e-6)
    np.testing.assert_allclose(hess, 1 / np.sqrt(4 * theta**2 + delta**2), rtol=1e-14)


def test_gradient_and_hessian_at_extremes():
    # arcsinh(x) = ln(2x) + O(x⁻²) for x = 2e306
    assert theory.hyperbolic_entropy_grad(1e6, 1e-300) == pytest.approx(0.5 * np.log(4e306), rel=1e-15)
    expected = -0.5 * (np.log(4e6) - np.log(1e-310))             # 2θ/Δ overflows: log-domain branch
    assert theory.hyperbolic_entropy_grad(-1e6, 1e-310) == pytest.approx(expected, rel=1e-15)
    assert theory.hyperbolic_entropy_grad(1e-6, 1e300) == pytest.approx(1e-306, rel=1e-15)
    assert theory.hyperbolic_entropy_hess(1e6, 1e300) == pytest.approx(1e-300, rel=1e-15)
    assert theory.hyperbolic_entropy_hess(1e6, 1e-300) == pytest.approx(0.5e-6, rel=1e-15)


@pytest.mark.parametrize("call, name", [
    (lambda: theory.hyperbolic_entropy(1.0, 0.0), "delta"),
    (lambda: theory.hyperbolic_entropy(1.0, -1.0), "delta"),
    (lambda: theory.hyperbolic_entropy_grad(1.0, np.inf), "delta"),
    (lambda: theory.hyperbolic_entropy_hess(np.nan, 1.0), "theta"),
    (lambda: theory.bregman(1.0, np.inf, 1.0), "theta2"),
    (lambda: theory.bregman(np.nan, 1.0, 1.0), "theta1"),
    (lambda: theory.hyperbolic_entropy(np.ones(3), np.ones(2)), "broadcast"),
])
def test_entropy_validation(call, name):
    with pytest.raises(ValueError, match=name):
        call()


# ------------------------------------------------------------------------------------------------
# 3. Implicit bias and the ℓ1 / ℓ2 interpolators
# ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("seed, mu, delta_kind, with_theta0", [
    (0, 1.0, 1e-4, False),
    (1, 1.0, 1e-12, True),
    (2, 0.0, 1.0, True),
    (3, 1.0, "vector", True),
    (4, 0.0, "vector", False),
    (5, 1.0, 1e-300, False),
    (6, 1.0, "wide vector", False),      # Δ from 1e-10 to 1e6: needs the final primal polishing
])
def test_implicit_bias_kkt(seed, mu, delta_kind, with_theta0):
    X, y, _ = sparse_regression(20, 30, 5, seed, mu=mu)
    rng = np.random.default_rng(100 + seed)
    if delta_kind == "vector":
        delta = 10.0 ** rng.uniform(-20, 2, 30)
    elif delta_kind == "wide vector":
        delta = 10.0 ** rng.uniform(-10, 6, 30)
    else:
        delta = delta_kind
    theta0 = 1e-4 * rng.normal(size=30) if with_theta0 else 0.0
    res = theory.implicit_bias(X, y, delta, theta0)
    assert res.converged
    primal, stationarity = kkt_residuals(X, y, res.theta, delta, theta0)
    assert primal < 1e-10
    assert stationarity < 1e-10
    assert res.kkt_residual == pytest.approx(primal, rel=1e-3, abs=1e-15)
    assert primal <= 1e-12                                      # the default tol
    assert res.stationarity_residual < 1e-10
    # ν is the Lagrange multiplier: ∇ψ(θ) - ∇ψ(θ̃₀) = Xᵀν
    gap = theory.hyperbolic_entropy_grad(res.theta, delta) - theory.hyperbolic_entropy_grad(theta0, delta)
    np.testing.assert_allclose(X.T @ res.nu, gap, rtol=1e-8, atol=1e-8 * np.abs(gap).max())


@pytest.mark.parametrize("seed, n, d", [(0, 3, 6), (1, 4, 8), (2, 5, 10)])
def test_implicit_bias_matches_trust_constr(seed, n, d):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.normal(size=n)
    delta = rng.uniform(0.1, 3.0, d)
    theta0 = 0.3 * rng.normal(size=d)
    grad0 = 0.5 * np.arcsinh(2 * theta0 / delta)

    def objective(t):                       # D_ψ(θ, θ̃₀) up to a constant, written independently
        return 0.25 * np.sum(2 * t * np.arcsinh(2 * t / delta) - np.sqrt(4 * t**2 + delta**2)) - grad0 @ t

    ref = scipy.optimize.minimize(
        objective, np.linalg.pinv(X) @ y, method="trust-constr",
        jac=lambda t: 0.5 * np.arcsinh(2 * t / delta) - grad0,
        hess=lambda t: np.diag(1 / np.sqrt(4 * t**2 + delta**2)),
        constraints=[scipy.optimize.LinearConstraint(X, y, y)],
        options={"gtol": 1e-12, "xtol": 1e-14, "maxiter": 5000},
    )
    res = theory.implicit_bias(X, y, delta, theta0)
    np.testing.assert_allclose(res.theta, ref.x, rtol=1e-6, atol=1e-6 * np.abs(ref.x).max())


@pytest.mark.parametrize("seed", [0, 2, 5])
def test_implicit_bias_reference_point_far_outside_the_interpolators(seed):
    """θ̃₀ up to ~1e100 (MGF's perturbed initialisation after many sign crossings reaches 1e50-1e66 on the
    paper's problem): a problem built with a known minimiser. θ is the minimiser iff its mirror coordinates
    arcsinh(2θ/Δ) differ from θ̃₀'s by a vector of range(Xᵀ), so θ̃₀ is built from the min-norm interpolator
    by moving its mirror coordinates by -2Xᵀν, ν ~ 10·N(0, 1)."""
    X, y, _ = sparse_regression(20, 30, 5, seed)
    rng = np.random.default_rng(seed)
    theta_true = np.linalg.pinv(X) @ y
    delta = 10.0 ** rng.uniform(-5.3, -1.8, 30)           # the range of Δ∞ of those MGF runs
    nu = 10.0 * rng.normal(size=20)
    theta0 = 0.5 * delta * np.sinh(np.arcsinh(2 * theta_true / delta) - 2 * X.T @ nu)
    assert np.abs(theta0).max() > 1e60
    res = theory.implicit_bias(X, y, delta, theta0)
    assert res.converged
    np.testing.assert_allclose(res.theta, theta_true, rtol=0, atol=1e-12 * np.abs(theta_true).max())
    primal, stationarity = kkt_residuals(X, y, res.theta, delta, theta0)
    assert primal < 1e-12 and stationarity < 1e-12


def test_implicit_bias_from_the_mirror_coordinate_of_a_reference_beyond_float_range():
    """theta0_mirror: a reference point given by its mirror coordinate a₀ (entries up to ~±2000: θ̃₀ = ±inf in
    float64), a problem built with a known minimiser as above; ν is the multiplier for a₀ itself."""
    X, y, _ = sparse_regression(20, 30, 5, 4)
    rng = np.random.default_rng(4)
    theta_true = np.linalg.pinv(X) @ y
    delta = 10.0 ** rng.uniform(-5.3, -1.8, 30)
    a_true = np.arcsinh(2 * theta_true / delta)
    a0 = a_true - 2 * X.T @ (150.0 * rng.normal(size=20))
    assert np.abs(a0).max() > 800                                 # (Δ/2) sinh a₀ overflows
    res = theory.implicit_bias(X, y, delta, theta0_mirror=a0)
    assert res.converged
    np.testing.assert_allclose(res.theta, theta_true, rtol=0, atol=1e-12 * np.abs(theta_true).max())
    np.testing.assert_allclose(2 * X.T @ res.nu, np.arcsinh(2 * res.theta / delta) - a0, rtol=0,
                               atol=1e-10 * np.abs(a0).max())
    # a reference inside float range: the same minimiser from either argument
    a_mid = a_true - 2 * X.T @ (0.5 * rng.normal(size=20))
    via_theta = theory.implicit_bias(X, y, delta, 0.5 * delta * np.sinh(a_mid))
    via_mirror = theory.implicit_bias(X, y, delta, theta0_mirror=a_mid)
    np.testing.assert_allclose(via_mirror.theta, via_theta.theta, rtol=0, atol=1e-13 * np.abs(theta_true).max())
    with pytest.raises(ValueError, match="not both"):
        theory.implicit_bias(X, y, delta, np.ones(30), theta0_mirror=a_mid)
    # predict: an infinite θ̃₀ needs its mirror coordinate, a NaN is refused
    theta0_inf = np.where(a0 > 0, np.inf, -np.inf)
    with pytest.raises(ValueError, match="theta0_tilde"):
        theory.predict(X, y, delta, theta0_inf, theta_true)
    with pytest.raises(ValueError, match="NaN"):
        theory.predict(X, y, delta, np.full(30, np.nan), theta_true, theta0_mirror=a0)
    pred = theory.predict(X, y, delta, theta0_inf, theta_true, theta0_mirror=a0)
    assert pred.prediction_gap < 1e-12


def test_large_delta_gives_euclidean_projection():
    X, y, _ = sparse_regression(20, 30, 5, 7)
    theta0 = np.random.default_rng(7).normal(size=30)
    projection = theta0 + np.linalg.pinv(X) @ (y - X @ theta0)        # argmin ‖θ - θ̃₀‖ on Xθ = y
    for delta in (1e8, np.full(30, 3e8)):
        res = theory.implicit_bias(X, y, delta, theta0)
        np.testing.assert_allclose(res.theta, projection, rtol=1e-6, atol=1e-6 * np.abs(projection).max())
    np.testing.assert_allclose(theory.implicit_bias(X, y, 1e8).theta, theory.min_l2_interpolator(X, y),
                               rtol=1e-6, atol=1e-9)


def test_small_delta_approaches_min_l1_interpolator():
    X, y, theta_star = sparse_regression(20, 30, 5, 0)
    l1 = theory.min_l1_interpolator(X, y)
    # the LP optimum is unique here: perturbing the objective does not move it, and it is θ*
    perturbed = scipy.optimize.linprog(1 + 1e-6 * np.random.default_rng(0).uniform(size=60),
                                       A_eq=np.hstack([X, -X]), b_eq=y, bounds=(0, None), method="highs")
    np.testing.assert_allclose(perturbed.x[:30] - perturbed.x[30:], l1, atol=1e-8)
    np.testing.assert_allclose(l1, theta_star, atol=1e-8)
    errors = []
    for delta in (1e-2, 1e-4, 1e-8, 1e-16, 1e-30):
        res = theory.implicit_bias(X, y, delta)
        errors.append(np.linalg.norm(res.theta - l1) / np.linalg.norm(l1))
    assert errors == sorted(errors, reverse=True)
    assert errors[-1] < 1e-6
    res = theory.implicit_bias(X, y, 1e-300)
    assert np.linalg.norm(res.theta - l1) / np.linalg.norm(l1) < 1e-8


def test_implicit_bias_large_d():
    X, y, _ = sparse_regression(50, 10_000, 5, 3)
    res = theory.implicit_bias(X, y, 1e-6)
    assert res.converged
    assert np.linalg.norm(X @ res.theta - y) / np.linalg.norm(y) < 1e-10
    assert res.stationarity_residual < 1e-10


def test_implicit_bias_rank_deficient_and_zero_targets():
    X, y, _ = sparse_regression(6, 12, 2, 11)
    X = np.vstack([X, X[:2]])                                # duplicated rows: rank 6 < n = 8
    y = np.concatenate([y, y[:2]])
    res = theory.implicit_bias(X, y, 0.01)
    primal, stationarity = kkt_residuals(X, y, res.theta, 0.01, 0.0)
    assert primal < 1e-10 and stationarity < 1e-10
    # y = 0 and θ̃₀ = 0: θ = 0; y = 0 and θ̃₀ ≠ 0: Bregman projection onto ker X
    assert np.all(theory.implicit_bias(X, np.zeros(8), 0.1).theta == 0)
    theta0 = np.random.default_rng(0).normal(size=12)
    res = theory.implicit_bias(X, np.zeros(8), 0.5, theta0)
    assert np.linalg.norm(X @ res.theta) < 1e-10 * np.linalg.norm(X) * np.linalg.norm(res.theta)
    gap = theory.hyperbolic_entropy_grad(res.theta, 0.5) - theory.hyperbolic_entropy_grad(theta0, 0.5)
    null = scipy.linalg.null_space(X)
    assert np.linalg.norm(null.T @ gap) < 1e-10 * np.linalg.norm(gap)


def test_implicit_bias_errors():
    X = np.array([[1.0, 0.0, 2.0], [1.0, 0.0, 2.0]])
    with pytest.raises(ValueError, match="range"):
        theory.implicit_bias(X, np.array([1.0, 2.0]), 1.0)
    with pytest.raises(ValueError, match="range"):
        theory.min_l1_interpolator(X, np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="range"):
        theory.min_l2_interpolator(X, np.array([1.0, 2.0]))
    X, y, _ = sparse_regression(5, 8, 2, 0)
    with pytest.raises(ValueError, match="delta"):
        theory.implicit_bias(X, y, 0.0)
    with pytest.raises(ValueError, match="delta"):
        theory.implicit_bias(X, y, -np.ones(8))
    with pytest.raises(ValueError, match="delta"):
        theory.implicit_bias(X, y, np.ones(7))
    with pytest.raises(ValueError, match="theta0_tilde"):
        theory.implicit_bias(X, y, 1.0, np.ones(3))
    with pytest.raises(ValueError, match="y"):
        theory.implicit_bias(X, y[:3], 1.0)
    with pytest.raises(ValueError, match="X"):
        theory.implicit_bias(X[0], y, 1.0)
    with pytest.raises(ValueError, match="max_iter"):
        theory.implicit_bias(X, y, 1.0, max_iter=0)
    with pytest.raises(ValueError, match="converge"):
        theory.implicit_bias(X, y, 1e-12, max_iter=1)
    res = theory.implicit_bias(X, y, 1e-12, max_iter=1, raise_on_failure=False)
    assert not res.converged and res.kkt_residual > 1e-12


def test_min_l2_interpolator_closed_form():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(4, 9))
    y = rng.normal(size=4)
    np.testing.assert_allclose(theory.min_l2_interpolator(X, y), X.T @ np.linalg.solve(X @ X.T, y),
                               rtol=1e-12, atol=1e-14)


def test_min_l1_interpolator_against_vertex_enumeration():
    # n = 1: all the mass on the largest |X_j|
    np.testing.assert_allclose(theory.min_l1_interpolator([[1.0, -3.0, 2.0]], [6.0]), [0.0, -2.0, 0.0],
                               atol=1e-12)
    # n = 2: an optimum is a basic solution supported on 2 columns
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2, 6))
    y = rng.normal(size=2)
    best = min(np.abs(np.linalg.solve(X[:, list(cols)], y)).sum()
               for cols in itertools.combinations(range(6), 2))
    theta = theory.min_l1_interpolator(X, y)
    assert np.abs(theta).sum() == pytest.approx(best, rel=1e-9)
    np.testing.assert_allclose(X @ theta, y, atol=1e-10)


# ------------------------------------------------------------------------------------------------
# Prediction bundle
# ------------------------------------------------------------------------------------------------

def test_predict():
    X, y, _ = sparse_regression(20, 30, 5, 8)
    rng = np.random.default_rng(8)
    delta_inf = 10.0 ** rng.uniform(-6, -3, 30)
    theta0 = 1e-5 * rng.normal(size=30)
    predicted = theory.implicit_bias(X, y, delta_inf, theta0).theta
    noise = 1e-3 * rng.normal(size=30)
    pred = theory.predict(X, y, delta_inf, theta0, predicted + noise)
    np.testing.assert_allclose(pred.predicted_theta, predicted, rtol=1e-12, atol=1e-15)
    primal, stationarity = kkt_residuals(X, y, pred.theta_gf_delta_inf, delta_inf, 0.0)
    assert primal < 1e-10 and stationarity < 1e-10
    assert pred.prediction_gap == pytest.approx(np.linalg.norm(noise) / np.linalg.norm(predicted), rel=1e-9)
    gf = pred.theta_gf_delta_inf
    expected = np.linalg.norm(predicted + noise - gf) / np.linalg.norm(gf)
    assert pred.normalized_distance == pytest.approx(expected, rel=1e-12)
    # θ̃₀ = 0: the two predictions coincide
    same = theory.predict(X, y, delta_inf, 0.0, predicted)
    np.testing.assert_allclose(same.predicted_theta, same.theta_gf_delta_inf, rtol=0, atol=0)
    with pytest.raises(ValueError, match="theta_final"):
        theory.predict(X, y, delta_inf, theta0, np.ones(5))
    with pytest.raises(ValueError, match="delta_inf"):
        theory.predict(X, y, np.zeros(30), theta0, predicted)
    with pytest.raises(AttributeError):
        pred.prediction_gap = 0.0                                  # frozen


# -- inputs and float64 range of the maps and of reference_mirror (probed 2026-11-26) ---------------------------

@pytest.mark.parametrize("call, match", [
    (lambda: theory.lam(1e308, 0.99), r"lam is beyond float64's range for gamma=1e\+308, beta=0.99"),
    (lambda: theory.eps(1e308, 0.99), r"eps is beyond float64's range"),
    (lambda: theory.lam_central(1e308, 0.99), r"lam_central is beyond float64's range"),
    (lambda: theory.from_lam_eps(1.0, 1e-17), r"beta rounds to 1 in float64 for lam=1.0, eps=1e-17"),
    (lambda: theory.from_lam_eps(1e200, 1e-200), r"gamma rounds to 0 in float64 \(below its smallest positive"),
    (lambda: theory.accelerate(0.05, 0.9, 1e-300), r"gamma_hat rounds to 0 in float64"),
    (lambda: theory.accelerate(0.01, 0.9, 1e-17), r"beta_hat rounds to 1 in float64"),
    (lambda: theory.reference_mirror(1.0, 0.5, 0.0, 0.0, -1.0), r"delta must be finite and in \(0, inf\)"),
    (lambda: theory.reference_mirror(1.0, 0.5, 0.0, 0.0, 0.0), r"delta must be finite and in \(0, inf\)"),
    (lambda: theory.reference_mirror(1.0, 0.5, np.nan, 0.0, 1.0), r"s_plus must be finite"),
    (lambda: theory.reference_mirror(np.inf, 0.5, 0.0, 0.0, 1.0), r"w_plus0 must be finite"),
    (lambda: theory.reference_mirror(1.0, 0.0, 0.0, 0.0, 1.0), r"w_minus0 must be non-zero"),
])
def test_maps_and_reference_mirror_refuse_what_float64_cannot_hold(call, match):
    """Before: lam(1e308, 0.99) was inf (a RuntimeWarning), from_lam_eps(1, 1e-17) gave beta = 1.0 outside [0, 1),
    reference_mirror returned NaN or inf for a negative or zero delta, a NaN exponent, an infinite weight."""
    with pytest.raises(ValueError, match=match):
        call()


def test_reference_mirror_keeps_its_digits_where_the_two_terms_nearly_cancel():
    """S₊ = S₋ and w₊₀ ≈ w₋₀ (θ̃₀ a difference of nearly equal terms): 1.6e-6 lost before, now to rounding."""
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 60
    rng = np.random.default_rng(3)
    worst = 0.0
    for _ in range(200):
        wm = -rng.uniform(0.5, 5.0)
        wp = wm * (1.0 + rng.uniform(-1e-8, 1e-8))
        s = rng.uniform(-50.0, 50.0)
        delta = 10.0 ** rng.uniform(-8.0, 0.0)
        exact = mp.asinh(2 * (mp.mpf(wp) ** 2 - mp.mpf(wm) ** 2) * mp.exp(-2 * mp.mpf(s)) / 4 / mp.mpf(delta))
        got = theory.reference_mirror(wp, wm, s, s, delta)
        worst = max(worst, abs(got - float(exact)) / max(1.0, abs(float(exact))))
    assert worst < 1e-12, worst


def test_object_arrays_of_strings_or_none_are_not_numbers():
    """An object array of numeric strings was converted ('1' read as 1.0) where a str array was refused."""
    X = np.array([["1", "0"], ["0", "1"]], dtype=object)
    with pytest.raises(TypeError, match=r"X must be real-valued, got '1' \(str\)"):
        theory.implicit_bias(X, np.ones(2), 1.0)
    with pytest.raises(TypeError, match=r"gamma must be real-valued, got None"):
        theory.lam(np.array([None], dtype=object), 0.5)


# ------------------------------------------------------------------------------------------------
# Float64's ends: finite where the exact value is representable, a ValueError saying so where it is not
# ------------------------------------------------------------------------------------------------

_HUGE = 1.7e308
_EXTREME_THETAS = [0.0, 1e-310, -1e-300, 1e-160, 1.0, -1e20, 1e160, -1e300, 1e306, -1e307, _HUGE]
_EXTREME_DELTAS = [5e-324, 1e-310, 1e-300, 1.0, 1e300, 1e306, _HUGE]


def _mp_entropy_stable(mp, t, d):
    """ψ_Δ(θ) with sqrt(4θ² + Δ²) - Δ written as 4θ²/(sqrt(4θ² + Δ²) + Δ) (exact algebra, no cancellation)."""
    t, d = mp.mpf(t), mp.mpf(d)
    return (2 * t * mp.asinh(2 * t / d) - 4 * t * t / (mp.sqrt(4 * t * t + d * d) + d)) / 4


def _check_against(mp, value_or_error, ref, ulps, what):
    """A value within ``ulps`` of ``ref`` where ``ref`` is a normal float64, within 1e-320 of it where it is
    subnormal (products of subnormals keep few digits), and a ValueError naming float64's range where |ref| exceeds
    1.8e308."""
    if abs(ref) > np.finfo(float).max:
        assert isinstance(value_or_error, ValueError), (what, value_or_error, ref)
        assert "beyond float64's range" in str(value_or_error), (what, value_or_error)
        return
    assert not isinstance(value_or_error, Exception), (what, value_or_error, ref)
    assert np.isfinite(value_or_error), (what, value_or_error, ref)
    if abs(ref) >= np.finfo(float).tiny:
        assert _relative_ulps(mp.mpf(value_or_error), ref) < ulps, (what, value_or_error, ref)
    else:
        assert abs(mp.mpf(value_or_error) - ref) <= 1e-320, (what, value_or_error, ref)


def _value_or_error(function, *args):
    """``function(*args)``, or the ValueError it raised; a RuntimeWarning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            return function(*args)
        except ValueError as exc:
            return exc


def test_entropy_gradient_and_hessian_at_the_ends_of_float64():
    """Before: ψ_Δ(1e306, 1) was inf (a RuntimeWarning), ∇ψ(1.7e308) at Δ = 1e306 off by 3e-7 (arcsinh x ~ ln 2x
    used at x = 340 where 2θ overflowed), ∇²ψ(1.7e308) = 0 instead of 2.9e-309, ∇²ψ(0) at Δ = 1e-310 inf."""
    mp = pytest.importorskip("mpmath")
    with mp.workdps(60):
        for t, d in itertools.product(_EXTREME_THETAS, _EXTREME_DELTAS):
            psi = _value_or_error(theory.hyperbolic_entropy, t, d)
            grad = _value_or_error(theory.hyperbolic_entropy_grad, t, d)
            hess = _value_or_error(theory.hyperbolic_entropy_hess, t, d)
            _check_against(mp, psi, _mp_entropy_stable(mp, t, d), 8, ("psi", t, d))
            _check_against(mp, grad, mp.asinh(2 * mp.mpf(t) / mp.mpf(d)) / 2, 4, ("grad", t, d))
            _check_against(mp, hess, 1 / mp.sqrt(4 * mp.mpf(t) ** 2 + mp.mpf(d) ** 2), 4, ("hess", t, d))
    with pytest.raises(ValueError, match=r"hyperbolic_entropy is beyond float64's range .*sum over the last axis"):
        theory.hyperbolic_entropy([4e307] * 3, 1e306)                 # each term 8.2e307, their sum is not finite


def test_bregman_at_the_ends_of_float64():
    """Before: D(0, 1.7e308) at Δ = 1 was inf (exact 8.5e307: the weight P ~ 2θ overflowed), D(1e307, -1e307) at
    Δ = 1e300 inf (exact 1.75e308), D(2e305, 0) at Δ = 1e-300 inf (exact 1.39e308), D(0, 1) at Δ = 5e-324 NaN (0/0),
    and a D beyond 1.8e308 came back as inf or NaN."""
    mp = pytest.importorskip("mpmath")
    thetas = [0.0, 1e-310, 1e-160, 1.0, 1e160, 2e305, 1e307, _HUGE]
    deltas = [5e-324, 1e-300, 1.0, 1e300, _HUGE]
    cases = [(s1 * t1, s2 * t2, d) for t1, t2, d in itertools.product(thetas, thetas, deltas)
             for s1, s2 in ((1, 1), (1, -1))]
    cases += [(t, t * (1 + 2.0**-50), d) for t in (1e-300, 1.0, 1e300, _HUGE / 2) for d in (5e-324, 1.0, _HUGE)]
    with mp.workdps(1400):                                 # the definition cancels over up to ~1300 digits here
        for t1, t2, d in cases:
            ref = _mp_bregman(mp, t1, t2, d)
            value = _value_or_error(theory.bregman, t1, t2, d)
            _check_against(mp, value, ref, 16, (t1, t2, d))
    with pytest.raises(ValueError, match=r"bregman is beyond float64's range .*sum over the last axis"):
        theory.bregman([4e307] * 3, 0.0, 1e306)


def test_reference_mirror_at_the_ends_of_float64():
    """Before: w₊₀ = 1e-300 against w₋₀ = 1 with S₊ = -700 gave a₀ = -18.4 instead of +18.4 (ln(w₊₀/w₋₀) taken as
    log1p(w₊₀/w₋₀ - 1) = -inf), and Δ = 1.7e308 gave 0 (ln 2Δ = inf) where a₀ = 690."""
    mp = pytest.importorskip("mpmath")
    cases = [(1e-300, 1.0, -700.0, 0.0, 1.0), (1e-300, 1.0, -700.0, 0.0, 1e-300), (1e-300, 1.0, -700.0, 300.0, 1e300),
             (1e-300, 1.0, -700.0, -700.0, _HUGE), (1e-300, 1e-300, -700.0, 0.0, _HUGE),
             (1e200, 1e-200, 500.0, -420.0, 1.0), (1e-200, -1e200, -420.0, 500.0, 1.0), (0.3, 0.01, 0.0, -3.0, 1e-3)]
    with mp.workdps(60):
        for wp, wm, sp, sm, d in cases:
            theta = (mp.mpf(wp) ** 2 * mp.exp(-2 * mp.mpf(sp)) - mp.mpf(wm) ** 2 * mp.exp(-2 * mp.mpf(sm))) / 4
            ref = mp.asinh(2 * theta / mp.mpf(d))
            got = theory.reference_mirror(wp, wm, sp, sm, d)
            assert abs(mp.mpf(got) - ref) <= 1e-13 * max(1, abs(ref)), (wp, wm, sp, sm, d, got, ref)


def test_maps_at_the_ends_of_float64():
    """Before: small_lambda_bound said 'y must not be identically zero' for y = 1e-300 (‖y‖ underflowed), gave inf
    for ‖y‖ = 1e-160 (exact 4e319, not representable: now a ValueError) and for Δ₀ = 1.7e308, ‖y‖ = 2.2 (exact 7e307),
    0 or NaN for ‖y‖ ≥ 1e160 (exact 4e-21 at Δ₀ = 1e300); lam_central(1.7e308, 0.1) was refused though it is
    1.15e308; accelerate(1e300, 0.5, 1e-200) blamed gamma_hat (1e-100), not beta_hat, which rounds to 1."""
    mp = pytest.importorskip("mpmath")
    X = np.ones((2, 3))
    with mp.workdps(60):
        for scale in (1e-300, 1e-200, 1e-160, 1e-20, 1.0, 1e20, 1e160, 1e300):
            y = np.array([scale, -2.0 * scale])
            for d0 in (0.0, 5e-324, 1e-300, 1.0, 1e300, _HUGE):
                ref = 2 * mp.mpf(d0) / (mp.mpf(scale) ** 2 * 5)
                got = _value_or_error(theory.small_lambda_bound, X, y, d0)
                if ref != 0 and abs(ref) < mp.mpf(2) ** -1075:            # rounds to 0
                    assert isinstance(got, ValueError) and "below 4.9e-324" in str(got), (scale, d0, got)
                else:
                    _check_against(mp, got, ref, 4, (scale, d0))
        for gamma, beta in ((1.7e308, 0.1), (5e-324, 1 - 1e-10)):
            ref = mp.mpf(gamma) * (1 + mp.mpf(beta)) / (2 * (1 - mp.mpf(beta)) ** 2)
            assert _relative_ulps(mp.mpf(theory.lam_central(gamma, beta)), ref) < 4, (gamma, beta)
    with pytest.raises(ValueError, match="beta_hat rounds to 1"):
        theory.accelerate(1e300, 0.5, 1e-200)


@pytest.mark.parametrize("y_exp, delta", [(-1000, 2.0**-1000), (-660, 1.0), (665, 1.0), (1000, 2.0**490),
                                          (1000, 2.0**-20)])
def test_implicit_bias_far_from_unit_scale(y_exp, delta):
    """A y of 1e-300 or 1e-200 was 'solved' by θ = 0 with converged=True (‖y‖ and the residual norms underflowed
    to 0); at 1e200 and beyond no Δ converged (overflow in Xθ). Checked by the independent KKT conditions on the
    exactly unscaled problem (powers of two), which the problem at 2⁻ᵏ(y, Δ, θ̃₀) satisfies iff this one does."""
    X, y, _ = sparse_regression(6, 10, 3, 4)
    scale = 2.0**y_exp
    theta0 = 1e-3 * np.random.default_rng(4).normal(size=10) * scale
    res = theory.implicit_bias(X, y * scale, delta, theta0)
    assert res.converged and np.all(np.isfinite(res.theta)) and np.any(res.theta != 0.0)
    primal, stationarity = kkt_residuals(X, y, res.theta / scale, delta / scale, theta0 / scale)
    assert primal < 1e-10 and stationarity < 1e-8, (primal, stationarity)


def test_implicit_bias_does_not_call_zero_a_solution_of_a_tiny_y():
    """θ/Δ ~ 1e-300 is beyond the dual solver (its values underflow): that is a failure, not θ = 0 'converged'."""
    X, y, _ = sparse_regression(6, 10, 3, 4)
    res = theory.implicit_bias(X, y * 1e-300, 1.0, raise_on_failure=False)
    assert not res.converged or np.linalg.norm(X @ (res.theta * 1e300) - y) < 1e-8 * np.linalg.norm(y)


@pytest.mark.parametrize("x_scale, y_scale", [(1.0, 1e-8), (1.0, 1e-300), (1.0, 1e150), (1.0, 1e300),
                                              (1e-300, 1.0), (1e200, 1e-100)])
def test_min_l1_interpolator_far_from_unit_scale(x_scale, y_scale):
    """HiGHS's absolute tolerances: a y of 1e-8 gave θ = 0 (accepted as feasible), a y of 1e150 a model error.
    Reference: the best basic solution by enumeration, which scales exactly as y_scale / x_scale."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(2, 6))
    y = rng.normal(size=2)
    best = min(np.abs(np.linalg.solve(X[:, list(cols)], y)).sum() for cols in itertools.combinations(range(6), 2))
    theta = theory.min_l1_interpolator(X * x_scale, y * y_scale) / (y_scale / x_scale)
    assert np.abs(theta).sum() == pytest.approx(best, rel=1e-9)
    np.testing.assert_allclose(X @ theta, y, atol=1e-10)
