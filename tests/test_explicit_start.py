"""The explicit start of the adaptive MGF flow (kernels/flow_dop853.py) and the dense output's form
(kernels/dense_output.py).

Checked against independent references: the tableau's row sums and quadrature conditions from its own coefficients
(closed forms), one step and its dense output against SciPy's Radau at rtol 1e-13 (orders 8 and 7), the switch to
Rodas5P on runs (where it happens, what each phase costs), the dense form against a direct evaluation of DOP853's
nested interpolant, and checkpoints of earlier development stores (pure Rodas5P) continuing as they began.
The run machinery (chunks, SIGKILL and resume bit for bit, sweep points = single runs, crossings against RK4,
agreement with the fixed-step schemes) is tested in tests/test_rodas.py on runs that start by DOP853.
"""

import math

import numpy as np
import pytest
from reference import mgf_radau

import dlnmomentum as dm
from dlnmomentum.driver import drive
from dlnmomentum.kernels import dense_output as KD
from dlnmomentum.kernels import flow as KF
from dlnmomentum.kernels import flow_dop853 as KX
from dlnmomentum.kernels import flow_rodas as KR
from dlnmomentum.kernels.layout import MODE_HESSIAN
from dlnmomentum.runs.flow_adaptive import prepare_flow_run


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(n=20, d=30, s=5, mu=1.0, sigma=1.0, seed=0)


# -- the tableau (closed forms) ---------------------------------------------------------------------------

def test_tableau_row_sums_and_quadrature_conditions_of_order_eight():
    A, c, b = KX.DOP_A, KX.DOP_C, KX.DOP_B
    for i in range(1, KX.N_DOP_DENSE_STAGES):
        assert math.isclose(A[i, :i].sum(), c[i], rel_tol=0, abs_tol=1e-14), i
        assert not np.any(A[i, i:]), i  # explicit
    assert math.isclose(b.sum(), 1.0, rel_tol=0, abs_tol=1e-14)
    for k in range(8):  # Σ b_j c_j^k = 1/(k+1): the quadrature conditions up to order 8
        assert math.isclose(b @ c[:12] ** k, 1.0 / (k + 1), rel_tol=0, abs_tol=1e-13), k
    assert not math.isclose(b @ c[:12] ** 8, 1.0 / 9, rel_tol=0, abs_tol=1e-6)  # and not of order 9
    assert abs(KX.DOP_E5.sum()) < 1e-14 and abs(KX.DOP_E3.sum()) < 1e-14  # differences of two consistent weights
    assert np.array_equal(A[12, :12], b)  # the stage at y₁ (k₁₃ = f(y₁))


def test_the_dense_form_is_dop853_nested_interpolant():
    """The monomial coefficients c₀ … c₅ written by the kernel give Hairer's nested form, evaluated directly."""
    rng = np.random.default_rng(1)
    y0, y1, f1, f2, f3, f4, f5, f6 = rng.normal(size=8)
    dense = np.zeros((KD.N_DENSE_ROWS, 4, 1))
    dense[0, 0, 0], dense[1, 0, 0] = y0, y1
    dense[2:, 0, 0] = (f1, f2 + f3, f4 + f5 - f3, f6 - 2 * f5 - f4, f5 - 2 * f6, f6)
    f0 = y1 - y0
    for s in np.linspace(0.0, 1.0, 11):
        nested = y0 + s * (f0 + (1 - s) * (f1 + s * (f2 + (1 - s) * (f3 + s * (f4 + (1 - s) * (f5 + s * f6))))))
        value, slope = KD._dense_eval(dense, 0, 0, s)
        assert math.isclose(value, nested, rel_tol=1e-14, abs_tol=1e-14), s
        ds = 1e-6  # (a central difference, the polynomial extended past [0, 1])
        numeric = (KD._dense_eval(dense, 0, 0, s + ds)[0] - KD._dense_eval(dense, 0, 0, s - ds)[0]) / (2 * ds)
        assert math.isclose(slope, numeric, rel_tol=1e-7, abs_tol=1e-8), s


# -- one step against Radau -----------------------------------------------------------------------------

def _point(problem, lam, t):
    d = problem.d
    w, v = mgf_radau(problem.hessian, problem.b, lam, t, np.full(2 * d, 0.01), np.zeros(2 * d), rtol=1e-13,
                     atol=1e-16, full=True)
    Y = np.zeros((KF.N_RK_ROWS, d))
    Y[KF.W_PLUS], Y[KF.W_MINUS], Y[KF.V_PLUS], Y[KF.V_MINUS] = w[:d], w[d:], v[:d], v[d:]
    return Y


def _field(problem, lam, Y):
    d = problem.d
    F = np.zeros_like(Y)
    ok = np.ones(d, dtype=bool)
    KR._rhs(problem.X, problem.XT, problem.y, problem.hessian, problem.b, MODE_HESSIAN, 1.0 / lam, Y, ok, ok,
            np.zeros(d), np.zeros(d), np.zeros(problem.n), F)
    return F


def _one_step(problem, lam, Y0, h):
    """(Y1, its order-5 error estimate, dense) of one DOP853 step of size h from Y0, with its dense output formed
    (whose stages take the estimate's slot)."""
    d = problem.d
    F0 = _field(problem, lam, Y0)
    ws = KR._workspace(problem.n, d)
    K = np.zeros((KX.N_DOP_DENSE_STAGES, KF.N_RK_ROWS, d))
    Y1 = np.zeros_like(Y0)
    ok = np.ones(d, dtype=bool)
    counters = np.zeros(KR.N_COUNTERS, dtype=np.int64)
    args = (problem.X, problem.XT, problem.y, problem.hessian, problem.b, MODE_HESSIAN, 1.0 / lam, h)
    KX._attempt_explicit(*args, Y0, F0, ok, ok, ws, K, Y1,
                         (KR._flat_rows(Y0), KR._flat_rows(F0), KR._flat_stages(K), KR._flat_rows(Y1)), counters)
    assert counters[KR.N_RHS] == KX.N_DOP_STAGES - 1 and counters[KR.N_LU] == 0
    estimate = K[KX.E5_SLOT].copy()
    dense = np.zeros((KD.N_DENSE_ROWS, 4, d))
    for k, r in enumerate(KD.DENSE_STATE_ROWS):
        KD._dense_ends(Y0, Y1, r, dense, k)
    F1 = _field(problem, lam, Y1)
    KX._dense_explicit(*args, Y0, F1, ok, ok, ws, K, (KR._flat_rows(Y0), KR._flat_rows(F1), KR._flat_stages(K)),
                       dense)
    return Y1, estimate, dense


def test_one_step_has_order_eight_and_its_dense_output_order_seven_against_radau(problem):
    """Local errors of the step shrink as h⁹ and of the dense output (at s = 0.37) as h⁸; the order-5 error
    estimate at least as h⁶, above the step's own error."""
    d, lam, t0 = problem.d, 1.0, 3.0
    Y0 = _point(problem, lam, t0)
    errs, dense_errs, ests = [], [], []
    for h in (0.4, 0.2, 0.1):
        Y1, estimate, dense = _one_step(problem, lam, Y0, h)
        ref1 = _point(problem, lam, t0 + h)
        refs = _point(problem, lam, t0 + 0.37 * h)
        errs.append(np.abs(Y1[:KF.J_PLUS] - ref1[:KF.J_PLUS]).max())
        dense_errs.append(max(abs(KD._dense_at(dense, k, i, 0.37) - refs[r, i])
                              for k, r in enumerate(KD.DENSE_STATE_ROWS) for i in range(d)))
        ests.append(np.abs(estimate[:KF.J_PLUS]).max())
    assert errs[0] / errs[1] > 2**8.3 and errs[1] / errs[2] > 2**8.3, errs
    assert dense_errs[0] / dense_errs[1] > 2**7.3 and dense_errs[1] / dense_errs[2] > 2**7.3, dense_errs
    assert ests[0] / ests[1] > 2**5.3 and ests[1] / ests[2] > 2**5.3, ests  # O(h⁶) or faster here
    assert all(e > err for e, err in zip(ests, errs, strict=True)), (ests, errs)  # and above the step's error


# -- the switch, on runs --------------------------------------------------------------------------------

def _phase_counts(problem, lam, t_max, **kw):
    """(result, factorisations, explicit steps) of a run: Rodas5P factorises once an attempt, DOP853 never."""
    res = dm.mgf(problem, lam, t_max=t_max, scheme="rodas", **kw)
    return res, res.factorizations, res.steps_done + res.rejected_steps - res.factorizations


def test_runs_start_by_dop853_and_switch_to_rodas5p_for_good(problem):
    """λ = 1: DOP853 through the escape (a few hundred steps), then Rodas5P to the limit; λ = 1e-3 (stiff at once):
    the first trial switches, after TRIAL_EVERY explicit steps."""
    res, lu, explicit = _phase_counts(problem, 1.0, 1e7, tol=1e-20)
    assert res.status_name == "converged"
    assert 100 < explicit < 1000 and lu > 100, (explicit, lu)
    res, lu, explicit = _phase_counts(problem, 1e-3, 1e7, tol=1e-20)
    assert res.status_name == "converged"
    assert explicit <= 2 * KX.TRIAL_EVERY and lu > 500, (explicit, lu)
    # short horizon in the non-stiff stretch: DOP853 only (no trial takes over)
    res, lu, explicit = _phase_counts(problem, 1.0, 3.0)
    assert explicit > 0 and lu <= explicit // KX.TRIAL_EVERY + 1, (explicit, lu)


def _dense_on_a_decaying_mode(z):
    """(max over s of |y(s) − e^{zs}|, |y₁ − e^z|): one DOP853 step of size 1 on y' = zy, y₀ = 1, and its dense
    output, from the tableau (DOP_A, DOP_B, DOP_D) by plain NumPy."""
    A, b, D = KX.DOP_A, KX.DOP_B, KX.DOP_D
    k = np.zeros(KX.N_DOP_DENSE_STAGES)
    for i in range(KX.N_DOP_DENSE_STAGES):
        if i == KX.N_DOP_STAGES:
            k[i] = z * (1.0 + b[:KX.N_DOP_STAGES] @ k[:KX.N_DOP_STAGES])
        else:
            k[i] = z * (1.0 + A[i, :i] @ k[:i])
    y1 = 1.0 + b[:KX.N_DOP_STAGES] @ k[:KX.N_DOP_STAGES]
    f0, f1, f2 = y1 - 1.0, k[0] - (y1 - 1.0), 2.0 * (y1 - 1.0) - (k[KX.N_DOP_STAGES] + k[0])
    f3, f4, f5, f6 = D @ k
    s = np.linspace(0.0, 1.0, 401)
    ys = 1.0 + s * (f0 + (1 - s) * (f1 + s * (f2 + (1 - s) * (f3 + s * (f4 + (1 - s) * (f5 + s * f6))))))
    return np.abs(ys - np.exp(z * s)).max(), abs(y1 - np.exp(z))


def test_the_step_cap_is_where_the_dense_output_holds_on_a_fast_mode():
    """Why DENSE_H_RHO: within the stability boundary (6.1) the dense output of a decaying mode degrades far faster
    than the step's end; at the cap it errs by a few thousandths of the mode's amplitude, at h·ρ = 4.4 (where
    uncapped steps ran at λ = 0.003) by a sixth."""
    assert KX.STIFF_H_RHO < KX.DENSE_H_RHO < KX.STABLE_H_RHO
    at_cap, end_at_cap = _dense_on_a_decaying_mode(-KX.DENSE_H_RHO)
    beyond, end_beyond = _dense_on_a_decaying_mode(-4.4)
    assert at_cap < 5e-3 and end_at_cap < 2e-4
    assert beyond > 0.1 and end_beyond < 0.02
    assert _dense_on_a_decaying_mode(-1.0)[0] < 1e-6  # (order 7: small steps are accurate)


def test_records_between_explicit_steps_keep_their_accuracy_at_small_lambda(problem):
    """λ = 0.003: DOP853 ran at h/λ ≈ 4-5, inside its stability region, and records between its steps erred by up
    to 1.2e-8 in θ and 1.7e-8 in w₊ where its steps' ends were within 3e-10. Records at the midpoints of the
    longest steps (in λ) up to t = 3, against SciPy's Radau at rtol 1e-13."""
    lam = 0.003
    acc = dm.mgf(problem, lam, t_max=3.0, scheme="rodas", record=dm.Record(accepted=True)).trajectory
    h = np.diff(acc.time)
    longest = np.sort(np.argsort(h)[-5:])
    mids = (acc.time[longest] + acc.time[longest + 1]) / 2
    assert h.max() / lam > 2.0  # (the steps are long against the fast mode)
    res = dm.mgf(problem, lam, t_max=3.0, scheme="rodas", record=dm.Record(times=mids)).trajectory
    d = problem.d
    for t in mids:
        row = np.flatnonzero(np.abs(res.time - t) <= 1e-12)[0]
        w, _ = mgf_radau(problem.hessian, problem.b, lam, t, np.full(2 * d, 0.01), np.zeros(2 * d), rtol=1e-13,
                         atol=1e-16, full=True)
        assert np.abs(res.w_plus[row] - w[:d]).max() < 2e-9, t
        assert np.abs(res.theta[row] - (w[:d] ** 2 - w[d:] ** 2) / 4).max() < 1e-9, t


def test_records_between_explicit_steps_are_as_accurate_as_the_steps_ends(problem):
    """λ = 0.05 early on (h/λ = 1-2, under the step cap): DOP853's dense output of order 7 erred by up to 22 times
    the steps' ends on the fast mode (records every 0.01 to t = 40: θ within 1.6e-9, w± 1.8e-8, against 1.5e-10 and
    8.1e-10 at the steps). A record inside an explicit step is now the end of a DOP853 step from that step's start
    (``flow_dop853._explicit_point``). Records at the midpoints of the steps in [0.5, 1.5], the worst place for an
    interpolant, against SciPy's Radau at rtol 1e-13, within the error of the steps' ends around them (measured:
    θ within 4.0e-11, w₊ 3.3e-10)."""
    lam = 0.05
    d = problem.d
    acc = dm.mgf(problem, lam, t_max=2.0, scheme="rodas", record=dm.Record(accepted=True)).trajectory
    assert acc.time.size > 20  # (the run is still in its explicit start)
    mids = (acc.time[:-1] + acc.time[1:]) / 2
    mids = mids[(mids > 0.5) & (mids < 1.5)]
    assert mids.size >= 5
    res = dm.mgf(problem, lam, t_max=2.0, scheme="rodas", record=dm.Record(times=mids)).trajectory
    # (records do not move the run: the accepted steps' rows are the run's own points either way)
    ends = [t for t in acc.time if 0.5 < t < 1.5]

    def radau(t):
        w, _ = mgf_radau(problem.hessian, problem.b, lam, t, np.full(2 * d, 0.01), np.zeros(2 * d), rtol=1e-13,
                         atol=1e-16, full=True)
        return w[:d], (w[:d] ** 2 - w[d:] ** 2) / 4

    end_err = 0.0
    for t in ends:
        row = np.flatnonzero(acc.time == t)[0]
        end_err = max(end_err, np.abs(acc.theta[row] - radau(t)[1]).max())
    assert end_err < 3e-10
    mid_err = w_err = 0.0
    for t in mids:
        row = np.flatnonzero(np.abs(res.time - t) <= 1e-12)[0]
        wp, theta = radau(t)
        mid_err = max(mid_err, np.abs(res.theta[row] - theta).max())
        w_err = max(w_err, np.abs(res.w_plus[row] - wp).max())
    assert mid_err < max(end_err, 1e-10) and w_err < 1e-9, (mid_err, end_err, w_err)  # (by the dense output:
    # 9.8e-10 and 1.3e-8)


@pytest.mark.parametrize("lam", [5e-324, 1e-300, 1e-16, 1e-14])
def test_a_fast_mode_dop853_cannot_step_is_rodas5ps_from_the_start(problem, lam):
    """At λ ≤ 1e-14 DOP853's stable steps (about 6.1λ) are under the smallest step the run takes: its rejected
    attempts ended the run "diverged" at t = 0 (the default call, ``scheme="auto"``). Rodas5P from the start reaches
    gradient flow's limit: MGF(λ) is within O(λ) of it (Appendix C), so θ agrees to the scheme's accuracy."""
    if lam < np.finfo(float).tiny:  # (a subnormal λ is refused by name, as every value under the smallest normal)
        with pytest.raises(ValueError, match="lam"):
            dm.mgf(problem, lam, t_max=1e7, tol=1e-20)
        return
    res, lu, explicit = _phase_counts(problem, lam, 1e7, tol=1e-20)
    assert res.status_name == "converged", res.message
    assert explicit == 0 and lu > 0, (explicit, lu)
    default = dm.mgf(problem, lam, t_max=1e7, tol=1e-20)
    assert default.config.scheme == "rodas" and np.array_equal(default.theta, res.theta)
    gf = dm.gf(problem, t_max=1e7, tol=1e-20, scheme="rodas")
    assert np.abs(res.theta - gf.theta).max() < 1e-9
    assert abs(res.prediction_gap) < 1e-8


@pytest.mark.parametrize("lam", [0.5, 1.0])
def test_explicit_stretch_agrees_with_radau_along_the_way(problem, lam):
    """Records from DOP853's dense output (t ≤ 20, before any switch) within 1e-10 of Radau at rtol 1e-13."""
    times = (0.3, 1.7, 4.2, 9.9, 20.0)
    res = dm.mgf(problem, lam, t_max=20.0, scheme="rodas", record=dm.Record(times=times))
    for t in times:
        row = np.flatnonzero(np.abs(res.trajectory.time - t) <= 1e-12 * t)[0]
        ref = mgf_radau(problem.hessian, problem.b, lam, t, np.full(2 * problem.d, 0.01), np.zeros(2 * problem.d),
                        rtol=1e-13, atol=1e-16)
        assert np.abs(res.trajectory.theta[row] - ref).max() < 1e-10, t


def test_a_checkpoint_from_before_the_explicit_start_continues_by_rodas5p_bit_for_bit(problem):
    """A run state of the earlier layout (``sstate`` of N_SSTATE entries, ``dense`` of 5 rows) loads as a run in
    Rodas5P's phase: continued, it equals the run that was in that phase all along."""
    def fresh():
        run = prepare_flow_run(problem, 0.5, t_max=300.0, scheme="rodas")
        run.sstate[KX.PHASE] = 1.0  # Rodas5P from the start, as before the explicit start
        run.chunk_steps = 40
        return run

    whole = fresh()
    status, blocks = drive(whole)
    part = fresh()
    part.advance(40, part.new_block(0), 0)
    old = {k: np.array(v) for k, v in part.state_arrays().items()}
    assert not np.any(old["dense"][KD.N_DENSE_ROWS_BEFORE_EXPLICIT:])  # Rodas5P's dense output: degree 4
    old["sstate"] = old["sstate"][:KR.N_SSTATE]
    old["dense"] = old["dense"][:KD.N_DENSE_ROWS_BEFORE_EXPLICIT]
    resumed = fresh()
    resumed.sstate[KX.PHASE] = 0.0
    resumed.load_state_arrays(old)
    assert resumed.sstate[KX.PHASE] == 1.0
    status2, _ = drive(resumed)
    assert status2 == status
    for name, arr in whole.state_arrays().items():
        assert np.array_equal(getattr(resumed, name), arr, equal_nan=True), name
