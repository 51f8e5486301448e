"""Experiment (issue 22): an explicit high-order start before Rodas5P, for MGF(λ) to train loss 1e-20.

Not part of the package and not a benchmark: it counts steps and measures θ errors; the only wall times are the
per-step costs of the cost model, measured in one process (``step_costs``).

What it asks (before the explicit start was built: every package run here is Rodas5P alone, ``_rodas_alone``).
Rodas5P (``scheme="rodas"``) pays a d × d factorisation and eight stage solves every step. Over the
first tens to hundreds of time units of MGF at λ >= 0.05 (the escape from α = 0.01 and the damped oscillations of
the momentum modes) the flow is *not* stiff at the accuracy asked: an explicit method of high order then takes far
fewer and cheaper steps, and that stretch is where the θ error "along the way" of issue 22's comparison at equal
accuracy is made (``experiment_mgf_accuracy.py``). Measured per λ in ``LAMS``:

* ``rodas``: the package's Rodas5P from t = 0, to the limit (steps) and to t_end with records at ``T_ALONG``
  (errors), at each rtol of ``RODAS_RTOLS`` (atol = rtol/100, the default call's ratio at α = 0.01);
* ``hybrid``: SciPy's DOP853 (Hairer's explicit order-8 pair, dense output of order 7) from t = 0 to ``t_switch``
  at each rtol of ``DOP_RTOLS`` (atol rtol/100), then the package's Rodas5P from that point (u, v, u̇, v̇ of the
  DOP853 state) to the limit, for each ``t_switch`` of ``SWITCHES``: DOP853's steps (its right-hand sides / 12),
  Rodas5P's steps, and θ errors at ``T_ALONG`` (DOP853's dense output before the switch, Rodas5P's records after
  it) and at t_end;
* ``stiffness``: where Hairer's stiffness test of DOP853 (h·ρ̂ > 3.25 in 15 accepted steps in a row, ρ̂ from the last
  two stages at the step end) would switch, and h·ρ at a few times, ρ the exact spectral radius of the Jacobian of
  the (w, ẇ) system at DOP853's step end (``numpy.linalg.eigvals``);
* ``step_costs``: the cost of a package Rodas5P step (a whole ``dm.mgf`` call to the limit over its steps), of one
  call of the package's compiled right-hand side ``flow_rodas._rhs`` (all eleven rows) and of a DOP853 step of a
  compiled prototype (``_dop853_steps``: twelve right-hand sides, its stage sums as axpy passes over the flat rows,
  its error norm; the three dense-output stages, needed only where a record or a crossing reads them, are not in it).

Errors are against SciPy's Radau at rtol 1e-13 (``experiment_mgf_accuracy.reference``).
Run: ``python benchmarks/experiment_nonstiff_start.py`` (a few minutes, mostly the Radau reference).
"""

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402
from scipy.integrate import DOP853, solve_ivp  # noqa: E402
from scipy.integrate._ivp import dop853_coefficients as C853  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from experiment_mgf_accuracy import REF_ATOL_V, REF_ATOL_W, REF_RTOL, T_ALONG, T_MAX, TOL, _system, reference  # noqa: E402,I001
from bench_rodas import _theta  # noqa: E402

import dlnmomentum as dm  # noqa: E402
from dlnmomentum.driver import drive  # noqa: E402
from dlnmomentum.kernels import flow_dop853 as KX  # noqa: E402
from dlnmomentum.kernels import flow_rodas as KR  # noqa: E402
from dlnmomentum.runs.flow_adaptive import prepare_flow_run  # noqa: E402

LAMS = (1e-3, 0.05, 0.5, 1.0)
RODAS_RTOLS = (1e-9, 3e-10, 1e-10)
DOP_RTOLS = (1e-10, 1e-9)
SWITCHES = (3.0, 10.0, 30.0, 100.0, 300.0)


def _rodas_alone(problem, lam, **kw):
    """``dm.mgf(problem, lam, scheme="rodas", **kw)`` by Rodas5P alone from its first step: the package's MGF runs
    start by DOP853 since this experiment (kernels/flow_dop853.py), so the run is built with its phase set to
    Rodas5P (``sstate[PHASE] = 1``), as a checkpoint from before the explicit start continues."""
    run = prepare_flow_run(problem, lam, scheme="rodas", **kw)
    run.sstate[KX.PHASE] = 1.0
    status, blocks = drive(run)
    return run.finish(status, blocks)


def _split(z, d):
    wp, wm, vp, vm = z[:d], z[d:2 * d], z[2 * d:3 * d], z[3 * d:]
    return dict(u0=(wp + wm) / 2, v0=(wp - wm) / 2, u_dot0=(vp + vm) / 2, v_dot0=(vp - vm) / 2)


def _along(res, times):
    out = []
    for t in times:
        hit = np.flatnonzero(np.abs(res.trajectory.time - t) <= 1e-12 * max(t, 1.0))
        assert hit.size == 1, (t, res.trajectory.time)
        out.append(res.trajectory.theta[hit[0]])
    return out


def rodas(problem, lam, rtol, t_end):
    kw = dict(rtol=rtol, atol=rtol / 100)
    to_limit = _rodas_alone(problem, lam, t_max=T_MAX, tol=TOL, **kw)
    at = _rodas_alone(problem, lam, t_max=t_end, record=dm.Record(times=T_ALONG), **kw)
    return to_limit.steps_done, np.array(_along(at, T_ALONG) + [at.theta])


def hybrid(problem, lam, t_switch, rtol_e, rtol_r, t_end):
    d = problem.d
    fun, _, z0 = _system(problem, lam)
    early = [t for t in T_ALONG if t < t_switch]
    sol = solve_ivp(fun, (0.0, t_switch), z0, method="DOP853", rtol=rtol_e, atol=rtol_e / 100,
                    t_eval=early + [t_switch])
    assert sol.status == 0
    start = _split(sol.y[:, -1], d)
    kw = dict(rtol=rtol_r, atol=rtol_r / 100, **start)
    to_limit = _rodas_alone(problem, lam, t_max=T_MAX, tol=TOL, **kw)
    later = [t - t_switch for t in T_ALONG if t >= t_switch]
    at = _rodas_alone(problem, lam, t_max=t_end - t_switch, record=dm.Record(times=later) if later else None, **kw)
    rows = [_theta(z, d) for z in sol.y.T[:-1]] + (_along(at, later) if later else []) + [at.theta]
    return (sol.nfev - 1) / 12.0, to_limit.steps_done, np.array(rows)


def stiffness(problem, lam, t_stop):
    """(t where Hairer's test says stiff or None, DOP853 steps to t_stop, [(t, h, h·ρ)] at a few times)."""
    fun, jac, z0 = _system(problem, lam)
    solver = DOP853(fun, 0.0, z0, t_stop, rtol=DOP_RTOLS[0], atol=DOP_RTOLS[0] / 100)
    iasti = nonsti = steps = 0
    said = None
    marks, out = [1.0, 3.0, 10.0, 30.0, 100.0, 300.0], []
    while solver.status == "running":
        y_old = solver.y.copy()
        solver.step()
        steps += 1
        h, K = solver.step_size, solver.K
        # the stage at the step end before the last one (c = 1) against f(y₁): Hairer's ρ̂
        y_stage = y_old + h * (solver.A[11, :11] @ K[:11])
        num, den = np.linalg.norm(K[12] - K[11]), np.linalg.norm(solver.y - y_stage)
        h_rho_hat = h * num / den if den > 0 else 0.0
        if h_rho_hat > 3.25:
            nonsti, iasti = 0, iasti + 1
            if iasti == 15 and said is None:
                said = solver.t
        else:
            nonsti += 1
            if nonsti == 6:
                iasti = 0
        if marks and solver.t >= marks[0]:
            rho = np.abs(np.linalg.eigvals(jac(solver.t, solver.y))).max()
            out.append((solver.t, h, h * rho, h_rho_hat))
            marks.pop(0)
    return said, steps, out


@njit(cache=False)
def _dop853_steps(X, XT, y, H, b, inv_lam, Y0, h, A, B, E3, E5, K, U, valid, theta, g, resid, count):
    """``count`` DOP853 steps of size ``h`` from ``Y0`` (all eleven rows, the package's ``_rhs``) with the error
    norm of Hairer's DOP853 over every row: a prototype of a compiled DOP853 step, to price it. The stage sums are
    axpy passes over the flat rows (contiguous, so that LLVM vectorises them), as the package's Rodas5P sums."""
    rows, d = Y0.shape
    m = rows * d
    y0 = Y0.reshape(m)
    u = U.reshape(m)
    kf = K.reshape(K.shape[0], m)
    e3v = np.empty(m)
    e5v = np.empty(m)
    total = 0.0
    KR._rhs(X, XT, y, H, b, 0, inv_lam, Y0, valid, valid, theta, g, resid, K[0])
    for _ in range(count):
        for s in range(1, 12):
            u[:] = y0
            for j in range(s):
                c = h * A[s, j]
                if c != 0.0:
                    kj = kf[j]
                    for i in range(m):
                        u[i] += c * kj[i]
            KR._rhs(X, XT, y, H, b, 0, inv_lam, U, valid, valid, theta, g, resid, K[s])
        u[:] = y0
        e3v[:] = 0.0
        e5v[:] = 0.0
        for j in range(12):
            kj = kf[j]
            cb = h * B[j]
            c3 = E3[j]
            c5 = E5[j]
            for i in range(m):
                u[i] += cb * kj[i]
                e3v[i] += c3 * kj[i]
                e5v[i] += c5 * kj[i]
        e3 = 0.0
        e5 = 0.0
        for i in range(m):
            sc = 1e-12 + 1e-10 * abs(y0[i])
            e3 += (e3v[i] / sc) ** 2
            e5 += (e5v[i] / sc) ** 2
        KR._rhs(X, XT, y, H, b, 0, inv_lam, U, valid, valid, theta, g, resid, K[0])  # f(y₁): the next k₁
        total += e5 / np.sqrt(e5 + 0.01 * e3 + 1e-300)
    return total


@njit(cache=False)
def _rhs_loop(X, XT, y, H, b, inv_lam, Y, valid, theta, g, resid, F, count):
    for _ in range(count):
        KR._rhs(X, XT, y, H, b, 0, inv_lam, Y, valid, valid, theta, g, resid, F)
    return F[0, 0]


def step_costs(problem, lam):
    """(µs a Rodas5P step: the whole ``dm.mgf`` call to the limit over its steps, µs a right-hand side, µs a
    DOP853 step of the prototype), each the minimum of seven rounds in this process."""
    res = _rodas_alone(problem, lam, t_max=T_MAX, tol=TOL)
    d, n = problem.d, problem.n
    X, XT, H, b = (np.ascontiguousarray(a) for a in (problem.X, problem.XT, problem.hessian, problem.b))
    Y = np.zeros((KR.N_RK_ROWS, d))
    Y[KR.W_PLUS], Y[KR.W_MINUS], Y[KR.V_PLUS] = 0.3, 0.01, 0.1
    valid = np.ones(d, dtype=np.bool_)
    theta, g, resid = np.zeros(d), np.zeros(d), np.zeros(n)
    K = np.zeros((13, KR.N_RK_ROWS, d))
    U = np.zeros_like(Y)
    A, B, E3, E5 = (np.ascontiguousarray(np.asarray(a, dtype=np.float64)) for a in (
        C853.A[:12, :12], C853.B, C853.E3[:12], C853.E5[:12]))
    rhs_args = (X, XT, problem.y, H, b, 1.0 / lam, Y, valid, theta, g, resid, K[1])
    dop_args = (X, XT, problem.y, H, b, 1.0 / lam, Y, 1e-3, A, B, E3, E5, K, U, valid, theta, g, resid)
    _rhs_loop(*rhs_args, 1)
    _dop853_steps(*dop_args, 1)
    best = [np.inf, np.inf, np.inf]
    for _ in range(7):
        t0 = time.perf_counter()
        _rodas_alone(problem, lam, t_max=T_MAX, tol=TOL)
        t1 = time.perf_counter()
        _rhs_loop(*rhs_args, 20000)
        t2 = time.perf_counter()
        _dop853_steps(*dop_args, 2000)
        t3 = time.perf_counter()
        best = [min(best[0], (t1 - t0) / res.steps_done), min(best[1], (t2 - t1) / 20000),
                min(best[2], (t3 - t2) / 2000)]
    return [1e6 * x for x in best]


def main():
    start = time.perf_counter()
    problem = dm.sparse_regression(n=20, d=30, s=5, mu=1.0, sigma=1.0, seed=0)
    for lam in LAMS:
        t_end = float(_rodas_alone(problem, lam, t_max=T_MAX, tol=TOL).t_done)
        times = np.array([*T_ALONG, t_end])
        ref = reference(problem, lam, times, REF_RTOL, REF_ATOL_W, REF_ATOL_V)
        print(f"\n## λ = {lam:g} (t_end {t_end:.4g})\n")
        print("| run | explicit steps | Rodas5P steps | max error along the way | at t_end |")
        print("|---|---|---|---|---|")
        for rtol in RODAS_RTOLS:
            steps, theta = rodas(problem, lam, rtol, t_end)
            err = np.abs(theta - ref).max(axis=1)
            print(f"| Rodas5P from t = 0, rtol {rtol:g} | 0 | {steps} | {err[:-1].max():.1e} | {err[-1]:.1e} |")
        for rtol_e in DOP_RTOLS:
            for rtol in RODAS_RTOLS:
                for t_switch in SWITCHES:
                    n_exp, steps, theta = hybrid(problem, lam, t_switch, rtol_e, rtol, t_end)
                    err = np.abs(theta - ref).max(axis=1)
                    print(f"| DOP853 (rtol {rtol_e:g}) to t = {t_switch:g}, then Rodas5P rtol {rtol:g} | {n_exp:.0f} "
                          f"| {steps} | {err[:-1].max():.1e} | {err[-1]:.1e} |")
        sys.stdout.flush()
        said, steps, marks = stiffness(problem, lam, 3000.0)
        print(f"\nHairer's stiffness test: {f'stiff at t = {said:.4g}' if said else 'not stiff'} by t = 3000 "
              f"({steps} DOP853 steps to t = 3000); at t ≈ " + ", ".join(
                  f"{t:.3g}: h {h:.3g}, h·ρ {hr:.2f}, h·ρ̂ {hh:.2f}" for t, h, hr, hh in marks))
        c_rodas, c_rhs, c_dop = step_costs(problem, lam)
        print(f"\ncosts (minimum of seven rounds): a Rodas5P step {c_rodas:.1f} µs (the whole call over its steps), "
              f"a right-hand side {c_rhs:.2f} µs, a DOP853 step of the prototype {c_dop:.1f} µs "
              f"({c_dop / c_rodas:.2f} of a Rodas5P step)")
        sys.stdout.flush()
    print(f"\ntotal wall time of the script: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
