"""MGD and MGF on a quadratic (the paper's Figure 1): sampled iterates, the exact flow, Proposition 1,
the acceleration rule of Corollary 1, and the Figure 1 module.

References are independent: a plain NumPy loop, ``scipy.integrate.solve_ivp``, the final iterate of
:func:`dlnmomentum.heavy_ball_quadratic` (bit for bit) and the paper's maps.
"""

import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.linalg import expm

import dlnmomentum as dm
from dlnmomentum.theory.maps import accelerate

#: A 2-D quadratic with eigenvalues 0.1 and 1.1 (condition number 11).
A = np.array([[1.0, 0.3], [0.3, 0.2]])
C = np.array([0.5, -0.2])
X0 = np.array([-1.5, 2.0])
A_MAX = float(np.linalg.eigvalsh(A)[-1])


def numpy_heavy_ball(A, c, x0, gamma, beta, steps):
    """Every iterate x_0..x_steps of x_{k+1} = x_k - γ(Ax_k - c) + β(x_k - x_{k-1}), x_1 from x_0 = x_{-1}."""
    xs = [np.array(x0, dtype=float)]
    prev = xs[0]
    for _ in range(steps):
        x = xs[-1]
        xs.append(x - gamma * (A @ x - c) + beta * (x - prev))
        prev = x
    return np.array(xs)


def solve_ivp_flow(A, c, x0, lam, times):
    """λẍ + ẋ + Ax - c = 0, x(0) = x0, ẋ(0) = 0 (λ = 0: ẋ = c - Ax) by DOP853 at tight tolerances."""
    d = len(x0)
    if lam == 0:
        sol = solve_ivp(lambda t, x: c - A @ x, (0, times[-1]), x0, method="DOP853", t_eval=times,
                        rtol=1e-13, atol=1e-14)
        return sol.y.T
    sol = solve_ivp(lambda t, y: np.concatenate([y[d:], (c - A @ y[:d] - y[d:]) / lam]), (0, times[-1]),
                    np.concatenate([x0, np.zeros(d)]), method="DOP853", t_eval=times, rtol=1e-13, atol=1e-14)
    return sol.y[:d].T


def expm_flow(A, c, x0, lam, times):
    """The same flow from the exponential of its first-order state matrix, without diagonalising A.

    λ > 0: (x, ẋ, 1)' = [[0, I, 0], [-A/λ, -I/λ, c/λ], [0, 0, 0]] (x, ẋ, 1); λ = 0: (x, 1)' = [[-A, c], [0, 0]].
    """
    d = len(x0)
    if lam == 0:
        M = np.zeros((d + 1, d + 1))
        M[:d, :d], M[:d, d] = -A, c
        y0 = np.concatenate([x0, [1.0]])
    else:
        M = np.zeros((2 * d + 1, 2 * d + 1))
        M[:d, d:2 * d] = np.eye(d)
        M[d:2 * d, :d], M[d:2 * d, d:2 * d], M[d:2 * d, 2 * d] = -A / lam, -np.eye(d) / lam, c / lam
        y0 = np.concatenate([x0, np.zeros(d), [1.0]])
    return np.array([(expm(M * t) @ y0)[:d] for t in times])


# -- heavy_ball_quadratic_path -----------------------------------------------------------------------

@pytest.mark.parametrize("every", [1, 3, 7, 250])
@pytest.mark.parametrize("beta", [0.0, 0.9])
def test_path_rows_are_the_iterates_of_heavy_ball_quadratic_bit_for_bit(every, beta):
    steps = 250
    p = dm.heavy_ball_quadratic_path(A, C, X0, 0.05, beta, steps, every=every)
    assert p.status == dm.Status.MAX_STEPS
    expected_k = sorted(set(range(0, steps + 1, every)) | {steps})
    assert p.k.tolist() == expected_k and p.x.shape == (len(expected_k), 2)
    last, status = dm.heavy_ball_quadratic(A, C, X0, 0.05, beta, steps)
    assert status == dm.MAX_STEPS and np.array_equal(p.x[-1], last)
    assert np.array_equal(p.x[0], X0)
    for row in (1, len(p.k) // 2):
        x, _ = dm.heavy_ball_quadratic(A, C, X0, 0.05, beta, int(p.k[row]))
        assert np.array_equal(p.x[row], x)


def test_path_matches_a_plain_numpy_loop_and_carries_the_mgf_times():
    gamma, beta, steps = 0.05, 0.8, 300
    p = dm.heavy_ball_quadratic_path(A, C, X0, gamma, beta, steps)
    ref = numpy_heavy_ball(A, C, X0, gamma, beta, steps)
    assert np.allclose(p.x, ref, rtol=1e-12, atol=1e-12)
    assert np.array_equal(p.k, np.arange(steps + 1))
    eps = gamma / (1 - beta)
    assert p.eps == pytest.approx(eps, rel=1e-15) and p.lam == pytest.approx(gamma / (1 - beta) ** 2, rel=1e-15)
    assert np.allclose(p.time, np.arange(steps + 1) * eps, rtol=1e-15, atol=0)
    assert (p.gamma, p.beta) == (gamma, beta)


def test_zero_steps_is_the_initial_point():
    p = dm.heavy_ball_quadratic_path(A, C, X0, 0.1, 0.5, 0, every=5)
    assert p.k.tolist() == [0] and np.array_equal(p.x, X0[None, :]) and p.status == dm.Status.MAX_STEPS


def test_divergence_is_a_status_and_the_path_stops_at_finite_iterates():
    gamma = 10.0 / A_MAX          # far beyond the stability bound 2(1+β)/a_max
    p = dm.heavy_ball_quadratic_path(A, C, X0, gamma, 0.9, 100_000, every=10)
    assert p.status == dm.Status.DIVERGED
    assert np.all(np.isfinite(p.x)) and 1 <= len(p.k) and p.k[-1] < 100_000
    assert p.x.shape == (len(p.k), 2) and p.time.shape == p.k.shape
    assert np.array_equal(p.x[-1], dm.heavy_ball_quadratic(A, C, X0, gamma, 0.9, int(p.k[-1]))[0])
    assert dm.heavy_ball_quadratic(A, C, X0, gamma, 0.9, 100_000)[1] == dm.DIVERGED


# -- quadratic_flow: exact MGF(λ) ---------------------------------------------------------------------

@pytest.mark.parametrize("lam", [0.0, 0.01, 0.3, 1.0 / (4.0 * A_MAX), 5.0],
                         ids=["gradient-flow", "overdamped", "underdamped-top-mode", "critical-top-mode",
                              "underdamped"])
def test_quadratic_flow_matches_solve_ivp(lam):
    if lam == 0.3:
        assert 4 * lam * A_MAX > 1 > 4 * lam * 0.1   # under-damped top mode, over-damped bottom mode
    times = np.linspace(0.0, 20.0, 81)
    fl = dm.quadratic_flow(A, C, X0, lam, times)
    ref = solve_ivp_flow(A, C, X0, lam, times)
    assert fl.x.shape == (81, 2) and fl.lam == lam and np.array_equal(fl.time, times)
    assert np.abs(fl.x - ref).max() < 1e-9
    assert np.array_equal(fl.x[0], X0) or np.allclose(fl.x[0], X0, rtol=0, atol=1e-15)


@pytest.mark.parametrize("lam", [0.0, 1e-3, 0.3, 2.0, 40.0])
def test_quadratic_flow_matches_the_exponential_of_the_state_matrix_in_every_damping_regime(lam):
    """Modes a = 0, 1e-9 (drift), 0.04, critical 1/(4λ) and 1/(4λ)(1 ± 1e-9), 3: over-, critically and
    under-damped at once, in a rotated basis; the reference exponentiates the whole (2d+1) system."""
    rng = np.random.default_rng(7)
    crit = 0.25 / lam if lam else 1.0
    a = np.array([0.0, 1e-9, 0.04, crit, crit * (1 + 1e-9), crit * (1 - 1e-9), 3.0])
    Q, _ = np.linalg.qr(rng.standard_normal((a.size, a.size)))
    Ar = Q @ np.diag(a) @ Q.T
    Ar = 0.5 * (Ar + Ar.T)
    c, x0 = rng.standard_normal(a.size), rng.standard_normal(a.size)
    times = np.array([0.0, 1e-6, 0.01, 0.5, 3.0, 20.0])
    fl = dm.quadratic_flow(Ar, c, x0, lam, times)
    # the reference is the less accurate side when stiff (λ = 1e-3, t = 20: 4e-11 against 40-digit mpmath,
    # quadratic_flow 2e-12): its (2d+1) matrix has norm t/λ
    ref = expm_flow(Ar, c, x0, lam, times)
    assert np.abs(fl.x - ref).max() < 1e-10 * max(1.0, np.abs(ref).max())
    assert np.array_equal(fl.x[0], x0) or np.allclose(fl.x[0], x0, rtol=0, atol=1e-14)


def test_quadratic_flow_on_a_singular_matrix_drifts_along_the_null_space():
    """A = [[1, 1], [1, 1]] has the null direction (1, -1)/√2; c's component along it makes x drift."""
    As = np.array([[1.0, 1.0], [1.0, 1.0]])
    c = np.array([1.0, 0.0])
    times = np.linspace(0.0, 10.0, 21)
    for lam in (0.0, 0.7):
        fl = dm.quadratic_flow(As, c, X0, lam, times)
        assert np.abs(fl.x - solve_ivp_flow(As, c, X0, lam, times)).max() < 1e-9
        # along the null direction: λż̈ + ż = c_null exactly, z = z0 + c_null (t - λ(1 - e^{-t/λ}))
        n = np.array([1.0, -1.0]) / np.sqrt(2)
        drift = times - lam * (1 - np.exp(-times / lam)) if lam else times
        assert np.allclose(fl.x @ n, X0 @ n + (c @ n) * drift, rtol=1e-12, atol=1e-12)


def test_quadratic_flow_converges_to_the_minimiser():
    fl = dm.quadratic_flow(A, C, X0, 0.3, [0.0, 400.0])
    assert np.allclose(fl.x[-1], np.linalg.solve(A, C), rtol=0, atol=1e-12)


# -- Proposition 1: MGD(γ, β) discretises MGF(λ) at step ε ---------------------------------------------

@pytest.mark.parametrize("lam", [0.0, 0.5])
def test_mgd_approaches_mgf_at_order_one_in_eps_as_gamma_goes_to_zero_at_fixed_lambda(lam):
    """At fixed λ, ε = √(λγ) (β = 1 - ε/λ; λ = 0: GD, ε = γ); over a fixed horizon the error of the first-order
    discretisation (eq. mgf:discretisation) is O(ε): quartering γ halves it (order ½ in γ)."""
    horizon, errors, epss = 8.0, [], [0.1, 0.05, 0.025, 0.0125]
    for eps in epss:
        gamma, beta = (eps, 0.0) if lam == 0 else dm.theory.from_lam_eps(lam, eps)
        p = dm.heavy_ball_quadratic_path(A, C, X0, gamma, beta, int(round(horizon / eps)))
        assert p.eps == pytest.approx(eps, rel=1e-12)
        if lam:
            assert p.lam == pytest.approx(lam, rel=1e-12)
        errors.append(np.abs(p.x - dm.quadratic_flow(A, C, X0, lam, p.time).x).max())
    orders = np.log2(np.array(errors[:-1]) / np.array(errors[1:]))
    assert np.all((orders > 0.9) & (orders < 1.15)), orders
    assert errors[-1] < 0.02


# -- Corollary 1: the acceleration rule ----------------------------------------------------------------

def _distance(u, v):
    return np.linalg.norm(u - v, axis=1).max() / np.linalg.norm(X0 - np.linalg.solve(A, C))


def test_acceleration_rule_mgd_with_four_gamma_runs_twice_as_fast():
    gamma, beta, K = 0.01, 0.9, 400
    base = dm.heavy_ball_quadratic_path(A, C, X0, gamma, beta, 2 * K).x
    g_hat, b_hat = accelerate(gamma, beta, 2)
    assert (g_hat, b_hat) == pytest.approx((4 * gamma, 1 - 2 * (1 - beta)), rel=1e-15)
    rule = dm.heavy_ball_quadratic_path(A, C, X0, g_hat, b_hat, K)
    assert rule.lam == pytest.approx(gamma / (1 - beta) ** 2, rel=1e-12)   # same MGF(λ), step 2ε
    at_2k, at_k = _distance(rule.x, base[::2]), _distance(rule.x, base[:K + 1])
    assert at_2k < 0.05 and at_k > 0.2 and at_2k < at_k / 5
    squared = dm.heavy_ball_quadratic_path(A, C, X0, 4 * gamma, beta**2, K).x    # β² ≈ 1 - 2(1 - β)
    sq_2k = _distance(squared, base[::2])
    assert sq_2k < 0.06 and sq_2k < _distance(squared, base[:K + 1]) / 5


def test_gradient_descent_with_four_gamma_runs_four_times_as_fast():
    gamma, K = 0.01, 400
    base = dm.heavy_ball_quadratic_path(A, C, X0, gamma, 0.0, 4 * K).x
    fast = dm.heavy_ball_quadratic_path(A, C, X0, 4 * gamma, 0.0, K).x
    at_4k, at_2k = _distance(fast, base[::4]), _distance(fast, base[:2 * K + 1:2])
    assert at_4k < 0.01 and at_2k > 0.1 and at_4k < at_2k / 10


# -- validation ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(A=[[1.0, 0.2], [0.1, 1.0]]), ValueError, "A must be symmetric"),
    (dict(A=np.ones((2, 3))), ValueError, "A must be"),
    (dict(A=[[1.0, np.nan], [np.nan, 1.0]]), ValueError, "A must contain only finite"),
    (dict(c=[1.0, 2.0, 3.0]), ValueError, "c must have shape"),
    (dict(x0=[np.inf, 0.0]), ValueError, "x0 must contain only finite"),
    (dict(gamma=0.0), ValueError, r"gamma must be in \(0, inf\)"),
    (dict(beta=1.0), ValueError, r"beta must be in \[0, 1\)"),
    (dict(steps=-1), ValueError, "steps must be an integer"),
    (dict(every=0), ValueError, "every must be an integer"),
    (dict(every=2.5), TypeError, "every must be an integer"),
])
def test_path_validation_names_the_parameter(kwargs, exc, match):
    args = dict(A=A, c=C, x0=X0, gamma=0.1, beta=0.5, steps=10, every=1) | kwargs
    with pytest.raises(exc, match=match):
        dm.heavy_ball_quadratic_path(**args)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(A=[[1.0, 0.0], [0.0, -0.5]]), ValueError, "A must be positive semi-definite"),
    (dict(A=[[1.0, 0.2], [0.1, 1.0]]), ValueError, "A must be symmetric"),
    (dict(lam=-0.1), ValueError, r"lam must be in \[0, inf\)"),
    (dict(lam=np.inf), ValueError, "lam must be finite"),
    (dict(lam=np.nan), ValueError, "lam must be finite"),
    (dict(times=[0.0, 2.0, 1.0]), ValueError, "times must be .* strictly increasing"),
    (dict(times=[-1.0, 1.0]), ValueError, r"times must be .* in \[0, inf\)"),
    (dict(times=[0.0, np.nan]), ValueError, "times must contain only finite"),
    (dict(times=[]), ValueError, "times must be a non-empty"),
    (dict(times=[[0.0, 1.0]]), ValueError, "times must be 1-dimensional"),
])
def test_flow_validation_names_the_parameter(kwargs, exc, match):
    args = dict(A=A, c=C, x0=X0, lam=0.3, times=[0.0, 1.0]) | kwargs
    with pytest.raises(exc, match=match):
        dm.quadratic_flow(**args)


# -- the Figure 1 module -------------------------------------------------------------------------------

def test_figure_one_computes_stores_the_claims_and_plots(tmp_path):
    h5py = pytest.importorskip("h5py")
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    from dlnmomentum.figures import quadratic as fig1

    assert fig1.NAME == "quadratic" and "tiny" in fig1.SIZES and "\n" not in fig1.TITLE
    path = tmp_path / "fig1.h5"
    with h5py.File(path, "w") as f:
        summary = fig1.compute(f.create_group(fig1.NAME), "tiny", log=lambda *a: None)
    assert summary["holds"] is True
    with h5py.File(path, "r") as f:
        g = f[fig1.NAME]
        fig = Figure(figsize=fig1.FIGSIZE)
        fig1.plot(g, fig)
        png = tmp_path / "fig1.png"
        fig.savefig(png, dpi=60)
        assert png.stat().st_size > 10_000

        # the claims, as stored
        claims = {name: float(g["claims"][name][()]) for name in g["claims"]}
        assert set(claims) == set(fig1.CLAIMS)
        assert all("description" in g["claims"][name].attrs for name in claims)
        assert claims["rule_at_2k"] < claims["rule_at_k"] / 5 and claims["rule_at_2k"] < 0.05
        assert claims["beta2_at_2k"] < claims["rule_at_k"] / 5
        assert claims["gd4_at_4k"] < claims["gd4_at_2k"] / 10
        assert claims["mgd_vs_mgf"] < 0.05 and claims["gd_vs_gf"] < 0.01

        # and from the stored iterates: the runs are what their attributes say, the claims what they measure
        K, gamma, beta = int(g.attrs["steps"]), float(g.attrs["gamma"]), float(g.attrs["beta"])
        Af, cf, x0f = (np.asarray(g.attrs[k]) for k in ("A", "c", "x0"))
        runs = g["runs"]
        assert all("description" in runs[key][ds].attrs for key in runs for ds in runs[key])
        assert (runs["mgd_rule"].attrs["gamma"], runs["mgd_rule"].attrs["beta"]) == pytest.approx(
            (4 * gamma, 1 - 2 * (1 - beta)), rel=1e-15)
        assert runs["mgd_beta2"].attrs["beta"] == pytest.approx(beta**2, rel=1e-15)
        assert len(runs["mgd"]["x"]) == 2 * K + 1 and len(runs["gd"]["x"]) == 4 * K + 1
        ref = numpy_heavy_ball(Af, cf, x0f, 4 * gamma, 1 - 2 * (1 - beta), K)
        assert np.allclose(runs["mgd_rule"]["x"][()], ref, rtol=1e-12, atol=1e-12)
        scale = np.linalg.norm(x0f - np.asarray(g.attrs["x_star"]))
        gap = np.linalg.norm(runs["mgd_rule"]["x"][()] - runs["mgd"]["x"][()][::2], axis=1).max() / scale
        assert gap == pytest.approx(claims["rule_at_2k"], rel=1e-12)
        mgf = g["flows/mgf/x"][()]
        assert np.abs(mgf - solve_ivp_flow(Af, cf, x0f, float(g.attrs["lam"]), g["flows/mgf/time"][()])).max() < 1e-8


def test_figure_one_refuses_an_unknown_size(tmp_path):
    h5py = pytest.importorskip("h5py")
    from dlnmomentum.figures import quadratic as fig1

    with h5py.File(tmp_path / "x.h5", "w") as f, pytest.raises(ValueError, match="size must be one of"):
        fig1.compute(f, "huge")
