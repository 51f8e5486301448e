"""The public API at the edges of its documented ranges, checked against independent references (plain NumPy)."""

import re

import numpy as np
import pytest

import dlnmomentum as dm


def test_a_diverged_runs_summary_does_not_print_theorem_2_quantities_as_results():
    """`dlnm run --gamma 5 --beta 0.5 --steps 10` printed `S+ (mean) : -1.38e58` and `|theta0~|max : inf` as if they
    were Theorem 2's quantities: a diverged run has no limit, so the summary says n/a and why."""
    res = dm.mgd(dm.sparse_regression(seed=0), 5.0, 0.5, steps=10)
    assert res.status_name == "diverged"
    # the fields still hold the last iterate's values (NumPy: some overflowed or are far out of any sensible range)
    assert not np.all(np.isfinite(res.theta0_tilde)) or np.abs(res.s_plus).max() > 1e30
    text = res.summary()
    for label in ("|Delta_inf|", "S+- (mean)", "|theta0~|max"):
        line = next(x for x in text.splitlines() if x.startswith(label))
        assert "n/a (the run diverged" in line, line
    assert not re.search(r"S[+-] \(mean\)\s*:\s*[-0-9]", text) and "theta0~|max : inf" not in text
    assert "this run diverged after" in text and "Theorem 2" in text
    # a run that did not diverge still prints them
    ok = dm.mgd(dm.sparse_regression(seed=0), 0.05, 0.5, steps=10)
    assert re.search(r"S\+ \(mean\)\s*: [-0-9]", ok.summary()) and "n/a" not in ok.summary()



def test_a_diverged_flows_summary_does_not_print_theorem_1_quantities_as_results():
    """As MGD's: a flow that diverged (here the adaptive scheme gives up at t = 0 from weights of 1e149) has no limit,
    so Δ∞, I± and θ̃0 read n/a with a note, not the values of its last point; a flow that did not diverge prints them."""
    problem = dm.sparse_regression(seed=0)
    res = dm.mgf(problem, 0.5, t_max=3, alpha=1e149)
    assert res.status_name == "diverged"
    text = res.summary()
    for label in ("|Delta_inf|", "I+- (mean)", "|theta0~|max"):
        line = next(x for x in text.splitlines() if x.startswith(label))
        assert "n/a (the run diverged" in line, line
    assert "Theorem 1" in text and not re.search(r"I[+-] \(mean\)\s*:\s*[-0-9]", text)
    ok = dm.mgf(problem, 0.5, t_max=3)
    assert re.search(r"I\+ \(mean\)\s*: [-0-9]", ok.summary()) and "the run diverged" not in ok.summary()

def _plain_stiffness(X, u0, v0, log_scale):
    """λmax(S H S), S = diag((4θ0² + Δ0²)^(1/4)), H = XᵀX/n, in plain NumPy with S scaled down by 10^log_scale (so
    that nothing overflows) and the eigenvalue scaled back."""
    n = X.shape[0]
    theta, delta = u0 * v0, np.abs(u0 * u0 - v0 * v0)
    k = 10.0 ** -log_scale
    s = (4.0 * (theta * k) ** 2 + (delta * k) ** 2) ** 0.25  # = S / 10^(log_scale/2)
    return np.linalg.eigvalsh((X.T @ X / n) * np.outer(s, s))[-1] * 10.0 ** log_scale


def test_flows_take_alpha_up_to_its_documented_bound():
    """alpha is documented in [1e-150, 1e150); at alpha = 1e149 the stiffness estimate squared Δ0 = 1e298 and handed
    scipy an inf: mgf, gf and mgf_from_mgd died with scipy's "array must not contain infs or NaNs"."""
    from dlnmomentum.runs.stepping import stiffness_estimate

    p = dm.sparse_regression(n=8, d=13, s=3, n_test=0, seed=4)
    u0, v0 = np.full(p.d, 1e149), np.zeros(p.d)
    kappa = stiffness_estimate(p, u0, v0)  # (at the interpolators Δ0 dominates: the same S up to rounding)
    assert np.isclose(kappa, _plain_stiffness(p.X, u0, v0, 298), rtol=1e-12)
    res = dm.gf(p, t_max=1.0, alpha=1e149)  # runs (its status then says what became of it)
    assert res.status_name in {"diverged", "max_steps"}
    # where S H S itself overflows the refusal names the initialisation, not scipy's inner check
    big = dm.Problem(p.X * 1e10, p.y)
    for call in (lambda: dm.mgf(big, 0.5, t_max=1.0, alpha=1e149), lambda: dm.gf(big, t_max=1.0, alpha=1e149),
                 lambda: dm.mgf_from_mgd(big, 0.1, 0.5, steps=5, alpha=1e149)):
        with pytest.raises(ValueError, match=r"stiffness estimate .* at this initialisation overflows float64.*"
                                             r"smaller initialisation \(alpha, u0, v0\)"):
            call()


def test_stiffness_estimate_is_kept_per_problem_and_initialisation():
    """The estimate is kept per problem and initialisation (three eigenvalue problems were 7% of a 15 ms flow call):
    a kept value must answer only the same question. Every answer is checked against plain NumPy (at the
    initialisation and the two interpolators, the largest), asked twice, for inits that differ in u0 alone, in v0
    alone, in one element, and on a second problem with the same data shape."""
    from dlnmomentum.runs.stepping import _interpolators, stiffness_estimate

    p = dm.sparse_regression(n=8, d=13, s=3, n_test=0, seed=4)
    q = dm.sparse_regression(n=8, d=13, s=3, n_test=0, seed=5)

    def plain(problem, u0, v0):
        H = problem.X.T @ problem.X / problem.n
        delta = np.abs(u0 * u0 - v0 * v0)
        out = []
        for theta in [u0 * v0, *_interpolators(problem)]:
            s = (4.0 * theta * theta + delta * delta) ** 0.25
            out.append(np.linalg.eigvalsh(H * np.outer(s, s))[-1])
        return max(out)

    base = np.full(p.d, 0.3)
    one = base.copy()
    one[7] = 0.31
    inits = [(base, np.zeros(p.d)), (2.0 * base, np.zeros(p.d)), (base, np.full(p.d, 0.1)), (one, np.zeros(p.d))]
    for problem in (p, q, p):
        for u0, v0 in inits:
            for _ in range(2):
                assert stiffness_estimate(problem, u0, v0) == pytest.approx(plain(problem, u0, v0), rel=1e-12)


def test_mgf_from_mgd_refuses_data_beyond_float64_by_name():
    """mgf_from_mgd computed the stiffness estimate before the data check that mgf and mgd make: X * 1e200 came back
    as scipy's "array must not contain infs or NaNs"."""
    p = dm.sparse_regression(n=8, d=13, s=3, n_test=0, seed=4)
    with pytest.raises(ValueError, match=r"X must be scaled so that .* finite"):
        dm.mgf_from_mgd(dm.Problem(p.X * 1e200, p.y), 0.1, 0.5, steps=5)


def test_a_theta0_tilde_beyond_float64_is_said_in_the_summary():
    """MGF at a large lambda (valid, up to 1e100) ends with |I-| in the hundreds or more: theta0~ is a real number
    beyond float64 and the summary printed `|theta0~|max : inf` for a run that finished normally, saying nothing."""
    import mpmath

    rng = np.random.default_rng(1)
    p = dm.Problem(rng.standard_normal((3, 5)), rng.standard_normal(3))
    res = dm.mgf(p, 1e30, t_max=1e16, alpha=0.1)
    assert res.status_name == "max_steps"
    inf = np.flatnonzero(np.isinf(res.theta0_tilde))
    assert inf.size
    for i in inf:  # the exact value (mpmath, from the run's own I± and w0) is indeed beyond float64
        exact = (mpmath.mpf(res.w_plus0[i]) ** 2 * mpmath.exp(-2 * mpmath.mpf(res.i_plus[i]))
                 - mpmath.mpf(res.w_minus0[i]) ** 2 * mpmath.exp(-2 * mpmath.mpf(res.i_minus[i]))) / 4
        assert abs(exact) > np.finfo(np.float64).max
    text = res.summary()
    assert f"theta0~ overflows float64 at {inf.size} coordinates {inf[:5].tolist()}" in text
    assert "theta0_tilde_mirror" in text


def test_a_sweep_dim_asked_as_a_field_points_to_coords():
    """sweep's docstring said every point's gamma, beta and lam are fields of the result; in a (beta, gamma) grid
    gamma and beta are dims, and sw["gamma"] was a KeyError listing the fields only."""
    rng = np.random.default_rng(1)
    sw = dm.sweep(dm.Problem(rng.standard_normal((3, 5)), rng.standard_normal(3)), gammas=[0.1, 0.2], betas=[0.5],
                  steps=5, progress=False)
    with pytest.raises(KeyError, match=r"'gamma' is a dim of this sweep .*coords\['gamma'\]"):
        sw["gamma"]
    assert sw.coords["gamma"].tolist() == [0.1, 0.2]
    assert np.allclose(sw["lam"], [[[0.4, 0.8]]])  # lam = gamma/(1-beta)^2, a field everywhere


def test_a_network_runs_parameter_norm_is_finite_where_its_parameters_are():
    """param_norm was sqrt(w @ w): parameters of 1e200 (teacher_student(init_scale=1e200), a valid scale) gave
    `|params| : inf` for finite parameters, and parameters of 1e-200 a norm of 0."""
    for scale in (1e200, 1e-200):
        p = dm.teacher_student(n=4, d=2, teacher_width=1, student_width=2, n_test=0, init_scale=scale)
        res = dm.mgd(p, 0.1, 0.5, steps=0)
        assert np.all(np.isfinite(res.params)) and np.abs(res.params).max() > 0
        s = np.abs(res.params).max()  # plain NumPy, scaled: ||w|| = s ||w/s||
        expected = s * np.sqrt(np.sum((res.params / s) ** 2))
        assert np.isclose(res.param_norm, expected, rtol=1e-14), (res.param_norm, expected)
        assert f"|params|     : {expected:.6g}" in res.summary()



def test_the_small_lambda_delta_inf_that_underflows_is_said():
    """At λ = 1e100 the small-λ route Δ0·exp(-2λG₂) is below float64 (a positive number: NumPy's exp(-2λG₂) of the
    run's G₂ is 0 for every coordinate): the summary says it underflows, not a bare 0.000000e+00."""
    res = dm.mgf(dm.sparse_regression(seed=0), 1e100, t_max=1e50, alpha=0.1)
    assert not np.any(res.delta_inf_small_lam) and np.all(res.delta0 > 0)
    line = next(x for x in res.summary().splitlines() if x.startswith("|Delta_inf|"))
    assert "small-lambda: 0 (exp(-2 lambda G2) underflows float64)" in line and "0.000000e+00" not in line
