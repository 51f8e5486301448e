"""MGD/SMGD kernel against plain NumPy references, closed forms and the paper's identities."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import reference as ref
from conftest import rel
from signal_helpers import sigint_once_handled

import dlnmomentum as dm
from dlnmomentum.driver import drive
from dlnmomentum.runs.mgd import prepare_mgd

ALPHA = 0.01


def _reference(problem, gamma, beta, steps, batches=None, u0=None, v0=None):
    d = problem.d
    u0 = np.full(d, ALPHA) if u0 is None else u0
    v0 = np.zeros(d) if v0 is None else v0
    return ref.smgd_uv(problem.X, problem.y, gamma, beta, steps, u0, v0, batches)


# -- agreement with the NumPy reference ----------------------------------------------------------

@pytest.mark.parametrize("gamma, beta", [(0.01, 0.5), (0.02, 0.7), (0.05, 0.0), (0.005, 0.9)])
@pytest.mark.parametrize("gradient", ["hessian", "data"])
def test_full_batch_matches_numpy_reference(problem, gamma, beta, gradient):
    steps = 10_000
    res = dm.mgd(problem, gamma, beta, steps=steps, gradient=gradient)
    wp, wm, _ = _reference(problem, gamma, beta, steps)
    u, v = (wp[-1] + wm[-1]) / 2, (wp[-1] - wm[-1]) / 2
    assert res.steps_done == steps and res.status == dm.MAX_STEPS
    assert rel(res.u, u) < 1e-12
    assert rel(res.v, v) < 1e-12
    assert rel(res.theta, u * v) < 1e-12


@pytest.mark.parametrize("replace", [False, True])
@pytest.mark.parametrize("batch_size", [1, 5, 19])
def test_smgd_matches_numpy_reference_on_same_batches(problem, batch_size, replace):
    steps, gamma, beta = 10_000, 0.01, 0.6
    res = dm.mgd(problem, gamma, beta, steps=steps, batch_size=batch_size, replace=replace, seed=7)
    assert res.kind == "smgd"
    batches = dm.batch_indices(problem.n, batch_size, steps, seed=7, replace=replace)
    wp, wm, _ = _reference(problem, gamma, beta, steps, batches)
    u, v = (wp[-1] + wm[-1]) / 2, (wp[-1] - wm[-1]) / 2
    assert rel(res.u, u) < 1e-12 and rel(res.v, v) < 1e-12


def test_batch_sequences():
    b = dm.batch_indices(10, 4, 2000, seed=1)
    assert b.shape == (2000, 4) and b.min() >= 0 and b.max() < 10
    assert all(len(set(row)) == 4 for row in b)  # without replacement: distinct in a batch
    assert np.array_equal(b, dm.batch_indices(10, 4, 2000, seed=1))
    assert not np.array_equal(b, dm.batch_indices(10, 4, 2000, seed=2))
    counts = np.bincount(b.ravel(), minlength=10)
    assert np.all(np.abs(counts - 800) < 5 * np.sqrt(800))  # uniform marginals
    r = dm.batch_indices(3, 3, 3000, seed=1, replace=True)
    assert any(len(set(row)) < 3 for row in r)  # with replacement: repeats happen


def test_full_batch_size_n_without_replacement_is_full_batch(problem):
    a = dm.mgd(problem, 0.01, 0.5, steps=500, batch_size=problem.n)
    b = dm.mgd(problem, 0.01, 0.5, steps=500)
    assert a.kind == "mgd" and np.array_equal(a.theta, b.theta)


def test_matches_torch_style_momentum_buffer(problem):
    """`steps=k` equals k calls of torch.optim.SGD(lr=γ, momentum=β).step() (buffer form)."""
    gamma, beta, k = 0.02, 0.8, 3000
    u, v = np.full(problem.d, ALPHA), np.zeros(problem.d)
    bu = bv = None
    X, y, n = problem.X, problem.y, problem.n
    for _ in range(k):
        g = X.T @ (X @ (u * v) - y) / n
        gu, gv = g * v, g * u
        bu = gu if bu is None else beta * bu + gu
        bv = gv if bv is None else beta * bv + gv
        u, v = u - gamma * bu, v - gamma * bv
    res = dm.mgd(problem, gamma, beta, steps=k)
    assert rel(res.u, u) < 1e-11 and rel(res.v, v) < 1e-11


def test_heavy_ball_on_quadratic_matches_closed_form():
    rng = np.random.default_rng(3)
    M = rng.standard_normal((5, 5))
    A = M @ M.T + 0.2 * np.eye(5)
    A = 0.5 * (A + A.T)
    c, x0 = rng.standard_normal(5), rng.standard_normal(5)
    lmax = np.linalg.eigvalsh(A)[-1]
    for beta in (0.0, 0.5, 0.9):
        gamma = 0.5 / lmax
        for steps in (1, 7, 200):
            x, status = dm.heavy_ball_quadratic(A, c, x0, gamma, beta, steps)
            expected = ref.heavy_ball_quadratic_closed_form(A, c, x0, gamma, beta, steps)
            assert status == dm.MAX_STEPS
            assert np.allclose(x, expected, rtol=1e-11, atol=1e-11 * np.abs(expected).max())
    x, status = dm.heavy_ball_quadratic(A, c, x0, 10.0 / lmax, 0.9, 10_000)
    assert status == dm.DIVERGED


# -- Lemma 4, eq. (MGDmirror), Theorem 2, Corollary 3 ---------------------------------------------

@pytest.mark.parametrize("gamma, beta", [(0.01, 0.5), (0.05, 0.0), (0.03, 0.3)])
def test_s_sums_match_direct_summation_of_lemma_4(problem, gamma, beta):
    steps = 10_000
    res = dm.mgd(problem, gamma, beta, steps=steps)
    wp, wm, grads = _reference(problem, gamma, beta, steps)
    assert not res.crossed
    assert np.max(np.abs(res.s_plus - ref.s_sums(wp, beta)) / np.abs(ref.s_sums(wp, beta))) < 1e-10
    assert np.max(np.abs(res.s_minus - ref.s_sums(wm, beta)) / np.abs(ref.s_sums(wm, beta))) < 1e-10
    mirror = ref.mirror_double_sum(grads, gamma, beta)
    assert rel(res.mirror, mirror) < 1e-11


def test_s_sums_with_sign_crossings(problem):
    """With crossings the r(z) terms are large near zero; agreement relative to the sum's scale."""
    gamma, beta, steps = 0.02, 0.7, 10_000
    res = dm.mgd(problem, gamma, beta, steps=steps)
    assert res.crossed
    wp, wm, _ = _reference(problem, gamma, beta, steps)
    for got, w in ((res.s_plus, wp), (res.s_minus, wm)):
        want = ref.s_sums(w, beta)
        assert np.max(np.abs(got - want)) < 1e-8 * np.abs(want).max()
        # crossing counts and steps agree with the reference trajectory
    sign_changes = np.diff(np.signbit(wm), axis=0)
    assert np.array_equal(res.crossings_minus, sign_changes.sum(axis=0))
    first = np.where(sign_changes.any(axis=0), sign_changes.argmax(axis=0) + 1, -1)
    assert np.array_equal(res.first_crossing_minus, first)
    last = np.where(sign_changes.any(axis=0), steps - np.argmax(sign_changes[::-1], axis=0), -1)
    assert np.array_equal(res.last_crossing_minus, last)


@pytest.fixture(scope="module")
def converged_run(problem):
    res = dm.mgd(problem, 0.05, 0.1, steps=3_000_000, tol=1e-8)
    assert res.status == dm.CONVERGED and res.train_loss <= 1e-8
    return res


def test_theorem_2_identities_at_convergence(converged_run):
    r = converged_run
    # ln|w±_N| ± G_N = ln|w±_0| - S±
    assert np.max(np.abs(np.log(np.abs(r.w_plus)) + r.mirror - (np.log(np.abs(r.w_plus0)) - r.s_plus))) < 1e-9
    assert np.max(np.abs(np.log(np.abs(r.w_minus)) - r.mirror - (np.log(np.abs(r.w_minus0)) - r.s_minus))) < 1e-9
    # log Δ∞ - log Δ0 = -(S+ + S-)
    assert np.max(np.abs(np.log(r.delta_inf) - np.log(r.delta0) + r.s_plus + r.s_minus)) < 1e-9
    # θ̃0 of Theorem 2 is consistent with the limit: Δ∞ sinh(...) representation
    alpha_p2 = r.w_plus0**2 * np.exp(-2 * r.s_plus)
    alpha_m2 = r.w_minus0**2 * np.exp(-2 * r.s_minus)
    assert np.allclose(4 * r.theta0_tilde, alpha_p2 - alpha_m2, rtol=1e-14, atol=0)


def test_corollary_3_without_sign_crossings(converged_run):
    r = converged_run
    assert not r.crossed
    assert np.all(r.s_plus > 0) and np.all(r.s_minus > 0)
    assert np.all(r.delta_inf < r.delta0)
    assert np.all(np.abs(r.theta0_tilde) < ALPHA**2)
    assert np.all(r.min_delta <= r.delta_inf)


# -- chunking, recording, reproducibility ---------------------------------------------------------

def _run_with_chunks(problem, chunk, record=None, **kw):
    run = prepare_mgd(problem, 0.02, 0.7, steps=20_011, record=record, **kw)
    run.chunk_steps = chunk
    status, blocks = drive(run)
    return run.finish(status, blocks)


@pytest.mark.parametrize("kw", [{}, {"batch_size": 3, "seed": 5}, {"batch_size": 4, "replace": True}])
def test_chunking_and_recording_do_not_change_bits(problem, kw):
    base = dm.mgd(problem, 0.02, 0.7, steps=20_011, **kw)
    for chunk in (1, 17, 4096):
        for record in (None, dm.Record(every=1000), dm.Record(log=50)):
            if chunk == 1 and record is not None:
                continue
            other = _run_with_chunks(problem, chunk if chunk > 1 else 997, record, **kw)
            for name in ("theta", "w_plus", "w_minus", "s_plus", "s_minus", "mirror", "min_delta",
                         "crossings_plus", "crossings_minus", "first_crossing_minus", "last_crossing_plus"):
                assert np.array_equal(getattr(base, name), getattr(other, name)), name
    again = dm.mgd(problem, 0.02, 0.7, steps=20_011, **kw)
    assert np.array_equal(again.theta, base.theta) and np.array_equal(again.s_plus, base.s_plus)


def test_recorded_rows_match_reference(problem):
    steps = 3000
    res = dm.mgd(problem, 0.02, 0.7, steps=steps, record=dm.Record(every=250))
    tr = res.trajectory
    assert list(tr.step) == list(range(0, steps + 1, 250))
    wp, wm, _ = _reference(problem, 0.02, 0.7, steps)
    theta = (wp[tr.step] ** 2 - wm[tr.step] ** 2) / 4
    assert rel(tr.theta, theta) < 1e-12
    assert np.allclose(tr.w_plus, wp[tr.step], rtol=1e-11, atol=1e-14)
    assert np.allclose(tr.delta, np.abs(tr.w_plus * tr.w_minus), rtol=0, atol=0)
    train = [problem.train_loss(t) for t in tr.theta]
    test = [problem.test_loss(t) for t in tr.theta]
    assert np.allclose(tr.train_loss, train, rtol=1e-10) and np.allclose(tr.test_loss, test, rtol=1e-10)
    assert np.allclose(tr.time, tr.step * res.eps)
    assert np.array_equal(tr.theta[-1], res.theta)


def test_record_schedules():
    assert list(dm.Record(every=3).step_schedule(10)) == [0, 3, 6, 9, 10]
    log = dm.Record(log=20).step_schedule(10**6)
    assert log[0] == 0 and log[-1] == 10**6 and np.all(np.diff(log) > 0) and 15 <= len(log) <= 21
    assert list(dm.Record(steps=[5, 2, 2, 10]).step_schedule(10)) == [0, 2, 5, 10]
    with pytest.raises(ValueError, match=r"steps must be in \[0, 10\]"):
        dm.Record(steps=[5, 2, 2, 50]).step_schedule(10)  # a row the run never reaches: refused, not dropped
    assert list(dm.Record(times=[0.5, 1.0]).step_schedule(100, h=0.1)) == [0, 5, 10, 100]
    with pytest.raises(ValueError, match="exactly one"):
        dm.Record(every=2, log=3)
    with pytest.raises(ValueError, match="every"):
        dm.Record(every=0)
    with pytest.raises(ValueError, match="log"):
        dm.Record(log=0)


@pytest.mark.parametrize("t_max", [1e-300, 0.005, 0.01, 0.02, 7.3, 2000.0, 3e5])
def test_adaptive_log_schedules_are_distinct_log_spaced_times(t_max):
    """A t_max at most FIRST_LOG_TIME (0.01) gave ``log`` copies of t_max, some an ulp below it: near-duplicate
    rows and no point inside the run. Now distinct times, log-spaced (equal ratios) after 0, ending at t_max."""
    times = dm.Record(log=12).time_schedule(t_max)
    assert times[0] == 0.0 and times[-1] == t_max and len(times) == 13
    ratios = times[2:] / times[1:-1]
    assert np.all(ratios > 1.0) and np.allclose(ratios, ratios[0], rtol=1e-9)


# -- stopping: tolerance, divergence, interruption -----------------------------------------------

def test_tolerance_stops_at_first_iterate_below_tol(problem):
    tol = 1e-4
    res = dm.mgd(problem, 0.02, 0.7, steps=100_000, tol=tol)
    assert res.status == dm.CONVERGED and res.train_loss <= tol
    before = dm.mgd(problem, 0.02, 0.7, steps=res.steps_done - 1)
    assert before.train_loss > tol
    assert res.message.startswith("converged")


def test_divergence_is_a_status_not_a_crash(problem):
    res = dm.mgd(problem, 5.0, 0.9, steps=100_000)
    assert res.status == dm.DIVERGED and res.status_name == "diverged"
    assert 0 < res.steps_done < 100_000
    assert np.all(np.isfinite(res.w_plus)) and np.all(np.isfinite(res.w_minus))
    # the state is the last finite iterate: replaying steps_done updates gives the same bits
    replay = dm.mgd(problem, 5.0, 0.9, steps=res.steps_done)
    assert replay.status == dm.MAX_STEPS and np.array_equal(replay.w_plus, res.w_plus)


def test_ctrl_c_stops_cleanly_between_chunks(problem):
    run = prepare_mgd(problem, 0.01, 0.5, steps=10**10)
    run.chunk_steps = 1000
    with sigint_once_handled(delay=0.3) as sent:
        status, _ = drive(run)
        # signal handlers are restored afterwards (to the one the test installed)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert sent["sent"]
    assert status == dm.INTERRUPTED and 0 < run.done < 10**10 and run.done % 1000 == 0
    res = run.finish(status)
    assert res.status_name == "interrupted" and np.all(np.isfinite(res.theta))


# -- validation -------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(gamma=0.0), ValueError, r"gamma must be in \(0, inf\)"),
    (dict(gamma=-1.0), ValueError, "gamma"),
    (dict(gamma=float("inf")), ValueError, "gamma must be finite"),
    (dict(gamma=float("nan")), ValueError, "gamma"),
    (dict(gamma="0.1"), TypeError, "gamma"),
    (dict(beta=1.0), ValueError, r"beta must be in \[0, 1\)"),
    (dict(beta=-0.1), ValueError, "beta"),
    (dict(steps=-1), ValueError, r"steps must be an integer in \[0, 4611686018427387904\]"),
    (dict(steps=2.5), TypeError, "steps"),
    (dict(alpha=0.0), ValueError, "alpha"),
    (dict(batch_size=0), ValueError, r"batch_size must be an integer in \[1, 20\]"),
    (dict(batch_size=21), ValueError, "batch_size"),
    (dict(tol=-1.0), ValueError, "tol"),
    (dict(seed=-3), ValueError, "seed"),
    (dict(gradient="fast"), ValueError, "gradient"),
    (dict(u0=np.ones(3)), ValueError, "u0"),
    (dict(u0=np.ones(30), v0=np.ones(30)), ValueError, "balancedness"),
    (dict(u0=np.full(30, np.nan)), ValueError, "u0 must contain only finite"),
    (dict(record=5), TypeError, "record"),
])
def test_validation_errors_name_the_parameter(problem, kwargs, exc, match):
    args = dict(gamma=0.01, beta=0.5, steps=10)
    args.update(kwargs)
    gamma, beta = args.pop("gamma"), args.pop("beta")
    with pytest.raises(exc, match=match):
        dm.mgd(problem, gamma, beta, **args)


def test_steps_accepts_integral_floats_and_zero(problem):
    res = dm.mgd(problem, 0.01, 0.5, steps=1e3)
    assert res.steps_done == 1000
    res0 = dm.mgd(problem, 0.01, 0.5, steps=0)
    assert res0.steps_done == 0 and np.array_equal(res0.theta, np.zeros(problem.d))


def test_u0_replaces_the_default_alpha_and_an_alpha_beside_it_is_refused(problem):
    """u0 replaces the default u0 = alpha * 1; an alpha given beside it was ignored (-1.0 ran), and is refused."""
    u0 = np.linspace(0.01, 0.02, problem.d)
    v0 = np.linspace(-0.005, 0.005, problem.d)
    res = dm.mgd(problem, 0.01, 0.5, steps=2000, u0=u0, v0=v0)
    wp, wm, _ = _reference(problem, 0.01, 0.5, 2000, u0=u0, v0=v0)
    assert rel(res.u, (wp[-1] + wm[-1]) / 2) < 1e-12
    for alpha in (-1.0, 0.5):
        with pytest.raises(ValueError, match="alpha"):
            dm.mgd(problem, 0.01, 0.5, steps=10, u0=u0, v0=v0, alpha=alpha)


def test_problem_validation_and_generator():
    p = dm.sparse_regression(n=10, d=40, s=4, mu=0.5, sigma=2.0, n_test=7, seed=3)
    assert p.X.shape == (10, 40) and p.X_test.shape == (7, 40)
    assert np.count_nonzero(p.theta_star) == 4
    assert np.allclose(p.theta_star[p.theta_star != 0], 0.5)
    assert np.allclose(p.y, p.X @ p.theta_star)
    assert abs(p.X.mean() - 0.5) < 0.3
    with pytest.raises(ValueError):
        p.X[0, 0] = 1.0  # read-only
    with pytest.warns(UserWarning, match="overparametrised"):
        dm.Problem(np.ones((5, 3)) + np.eye(5, 3), np.ones(5))
    with pytest.raises(ValueError, match="y must have shape"):
        dm.Problem(np.ones((5, 8)), np.ones(4))
    with pytest.raises(ValueError, match="X must contain only finite"):
        dm.Problem(np.full((5, 8), np.inf), np.ones(5))
    with pytest.raises(ValueError, match="X_test and y_test"):
        dm.Problem(np.ones((5, 8)), np.ones(5), X_test=np.ones((2, 8)))
    with pytest.raises(ValueError, match="s must be"):
        dm.sparse_regression(d=5, s=6)
    with pytest.raises(ValueError, match="sigma"):
        dm.sparse_regression(sigma=0.0)


def test_results_are_frozen_and_readonly(problem):
    res = dm.mgd(problem, 0.01, 0.5, steps=10)
    with pytest.raises(AttributeError):
        res.theta = None
    with pytest.raises(ValueError):
        res.theta[0] = 1.0
    assert res.lam == pytest.approx(0.01 / 0.25) and res.eps == pytest.approx(0.02)


# -- CLI --------------------------------------------------------------------------------------

def test_cli_run_json_and_help():
    out = subprocess.run([sys.executable, "-m", "dlnmomentum", "run", "--gamma", "0.01", "--beta", "0.5",
                          "--steps", "1e4", "--json", "--n-test", "10"], capture_output=True, text=True,
                         check=True)
    data = json.loads(out.stdout)
    assert data["steps_done"] == 10_000 and data["status_name"] == "max_steps" and len(data["theta"]) == 30
    help_text = subprocess.run([sys.executable, "-m", "dlnmomentum", "run", "--help"], capture_output=True,
                               text=True, check=True).stdout
    assert "--gamma" in help_text and "--batch-size" in help_text
    bad = subprocess.run([sys.executable, "-m", "dlnmomentum", "run", "--gamma", "0.01", "--beta", "1.5",
                          "--steps", "10"], capture_output=True, text=True)
    assert bad.returncode == 2 and "beta must be in [0, 1)" in bad.stderr


def test_fastmath_policy_is_strict():
    from dlnmomentum.kernels import config
    from dlnmomentum.kernels import mgd as K

    assert config.FASTMATH is False
    assert K._mgd_advance.targetoptions["fastmath"] is False


def test_config_fma_rounds_once():
    """The kernels' ``fma`` is a true fused multiply-add (one rounding), scalar and inside a vectorised loop."""
    from numba import njit

    from dlnmomentum.kernels.config import JIT_OPTIONS, fma

    @njit(**dict(JIT_OPTIONS, cache=False))
    def fused(a, b, c, out):
        for i in range(out.shape[0]):
            out[i] = fma(a[i], b[i], c[i])

    eps = 2.0**-30
    a = np.full(37, 1.0 + eps)
    b = np.full(37, 1.0 - eps)
    c = np.full(37, -1.0)
    out = np.empty(37)
    fused(a, b, c, out)
    assert (a * b + c == 0.0).all()  # (1 - 2^-60) rounds to 1 before the addition
    assert (out == -(2.0**-60)).all()


def test_in_tree_numba_cache_is_dropped_when_any_kernel_source_changes(tmp_path, monkeypatch):
    from numba.core import config

    from dlnmomentum.kernels import drop_stale_caches

    monkeypatch.setattr(config, "CACHE_DIR", "")  # (a NUMBA_CACHE_DIR would take the place of __pycache__)

    (tmp_path / "mgd.py").write_text("x = 1\n")
    (tmp_path / "flow.py").write_text("y = 2\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()

    def fill():
        for name in ("flow._f-1.py311.nbi", "flow._f-1.py311.1.nbc", "flow.cpython-311.pyc"):
            (cache / name).write_text("cached")

    fill()
    assert drop_stale_caches(str(tmp_path))  # no stamp yet: dropped
    assert sorted(p.name for p in cache.iterdir()) == ["flow.cpython-311.pyc", "kernels-sources.sha256"]
    fill()
    assert not drop_stale_caches(str(tmp_path))  # sources unchanged: kept
    assert (cache / "flow._f-1.py311.nbi").exists()
    (tmp_path / "mgd.py").write_text("x = 3\n")  # an edit of another module
    assert drop_stale_caches(str(tmp_path))
    assert not (cache / "flow._f-1.py311.nbi").exists() and not (cache / "flow._f-1.py311.1.nbc").exists()


_CROSS_MODULE = """
import sys
sys.path.insert(0, {src!r})
from dlnmomentum.kernels.cache import drop_stale_caches
drop_stale_caches({src!r})
import outer
print(outer.f())
"""


@pytest.mark.parametrize("where", ["NUMBA_CACHE_DIR", "user-wide"])
def test_numba_cache_outside_the_tree_is_dropped_when_any_source_changes(tmp_path, where):
    # Numba caches in NUMBA_CACHE_DIR when it is set, and in the user-wide cache directory when the in-tree
    # __pycache__ cannot be written (a read-only install; here a file of that name): a cached function that inlines
    # another module's must not come back from there after that module changed (it used to: 1 after the edit).
    src = tmp_path / "src"
    src.mkdir()
    (src / "outer.py").write_text("from numba import njit\nimport inner\n\n\n@njit(cache=True)\n"
                                  "def f():\n    return inner.g()\n")
    (src / "inner.py").write_text("from numba import njit\n\n\n@njit\ndef g():\n    return 1\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(dm.__file__)),
                                                       os.environ.get("PYTHONPATH", "")]))
    env.pop("NUMBA_CACHE_DIR", None)
    if where == "NUMBA_CACHE_DIR":
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")
    else:
        (src / "__pycache__").write_text("not a directory")
        env["XDG_CACHE_HOME"] = str(tmp_path / "user-cache")
        env["PYTHONDONTWRITEBYTECODE"] = "1"

    def run():
        out = subprocess.run([sys.executable, "-c", _CROSS_MODULE.format(src=str(src))], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0 and "Warning" not in out.stderr, out.stderr
        return int(out.stdout)

    assert run() == 1
    (src / "inner.py").write_text("from numba import njit\n\n\n@njit\ndef g():\n    return 2\n")
    assert run() == 2
    cached = list((tmp_path / ("numba-cache" if where == "NUMBA_CACHE_DIR" else "user-cache")).rglob("outer.f-*.nbi"))
    assert len(cached) == 1 and (cached[0].parent / "kernels-sources.sha256").exists()


def test_cache_subpath_is_numbas():
    from numba.core import caching

    from dlnmomentum.kernels.cache import cache_subpath

    locator = getattr(caching, "UserWideCacheLocator", None) or caching._UserWideCacheLocator
    here = os.path.join(os.path.dirname(dm.__file__), "kernels")
    assert cache_subpath(here) == locator.get_suitable_cache_subpath(os.path.join(here, "mgd.py"))


def test_the_adaptive_schemes_step_functions_count_no_references():
    """What the adaptive schemes call every step is compiled without Numba's reference-counted runtime
    (``LEAF_JIT_OPTIONS``, kernels/config.py): no atomic reference count on its array arguments and views. Compiled
    with those options the gradient's column pass has no reference-count call in its code; with ``JIT_OPTIONS``, one
    for each array argument."""
    from numba import njit

    from dlnmomentum.kernels import (
        config,
        dense_output,
        flow_dop853,
        flow_ndf,
        flow_rodas,
        flow_rodas_gf,
        flow_rodas_run,
        flow_schedule,
        flow_stop,
        ndf_dense,
        small_linalg,
        woodbury,
    )
    from dlnmomentum.kernels import mgd as K

    for f in (flow_rodas._attempt, flow_rodas._rhs, flow_rodas._factor, flow_rodas._error_norm,
              flow_rodas_gf._attempt_mirror, flow_rodas_gf._error_norm_mirror, flow_ndf._vector_field,
              flow_ndf._rms, flow_ndf._change_D, flow_ndf._set_rows, flow_rodas_run._dense_ends,
              flow_rodas_run._dense_slopes, flow_rodas_run._form_dense, flow_rodas_run._any_may_cross,
              flow_rodas_run._any_may_turn, flow_rodas_run._turn_peaks,
              flow_rodas_run._crossings, flow_stop._stop_status, flow_stop._stop_before_step, small_linalg._cholesky,
              small_linalg._cholesky_solve, K._axpy_columns, flow_dop853._attempt_explicit,
              flow_dop853._error_norm_explicit, flow_dop853._dense_explicit, flow_dop853._stiff,
              flow_dop853._rho_hat, flow_dop853._explicit_hopeless, flow_dop853._explicit_point,
              dense_output._dense_eval, dense_output._dense_root, dense_output._dense_slope,
              dense_output._dense_extremes, flow_schedule._owed_row,
              flow_schedule._step_of_record, flow_schedule._initial_point_owed, flow_schedule._no_row_for_next_step,
              woodbury._woodbury_factor, woodbury._woodbury_solve_eh, woodbury._woodbury_solve_he,
              ndf_dense._dense_p, ndf_dense._turn_peaks):
        assert f.targetoptions.get("_nrt") is False, f.py_func.__name__

    def reference_counts(options):  # the gradient's column pass, compiled anew with ``options``
        compiled = njit(**dict(options, cache=False))(K._axpy_columns.py_func)
        A = np.arange(12.0).reshape(4, 3)
        out = np.empty(3)
        compiled(A, np.ones(4), 4, out)
        assert out.tolist() == A.sum(axis=0).tolist()
        return next(iter(compiled.inspect_llvm().values())).count("call void @NRT_incref")

    assert reference_counts(config.JIT_OPTIONS) > 0
    assert reference_counts(config.LEAF_JIT_OPTIONS) == 0
