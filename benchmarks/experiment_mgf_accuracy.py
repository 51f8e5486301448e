"""Experiment (issue 22): θ accuracy of the MGF flow to train loss 1e-20, the package's Rodas5P against SciPy's LSODA.

Not part of the package and not a benchmark: no wall time is measured for speed, only errors and step counts.
Issue 22 asks for the package's MGF flow to be faster than SciPy's LSODA (analytic Jacobian, rtol 1e-10, atol 1e-12)
"at equal θ accuracy", while ``bench_rodas.py`` compares at the package's default tolerances (Rodas5P, rtol 1e-9,
atol 1e-11 at α = 0.01). This measures how accurate each is, against an independent tight reference, and which
package tolerances reach LSODA's accuracy.

The workload is ``bench_rodas.py``'s: ``dm.mgf(problem, lam, t_max=1e7, tol=1e-20)`` on
``sparse_regression(n=20, d=30, s=5, mu=1, sigma=1, seed=0)`` from u0 = 0.01, v0 = 0 (w± = 0.01), zero velocity,
for λ in ``LAMS``. t_end is the default call's t_done (where it reached train loss <= 1e-20). Measured per λ:

* the package (scheme ``"rodas"``) at each (rtol, atol) of ``PACKAGE_TOLERANCES``: a run to t_max = t_end with
  ``Record(times=T_ALONG)`` (records are written from the dense output at those exact times) gives θ along the way
  and θ(t_end); a second run with ``tol=1e-20`` gives the accepted (and rejected) steps of the flow to the limit and
  Theorem 1's prediction gap (``FlowResult.prediction_gap``: ‖θ − θ_pred‖₂/‖θ_pred‖₂, θ_pred from its own Δ∞, θ̃0);
* SciPy's LSODA as in ``bench_rodas.py`` (the first-order system (w, ẇ) of size 4d, analytic Jacobian, a terminal
  event on log10(train loss) + 20), with ``t_eval`` at T_ALONG and t_end (θ there from LSODA's own interpolant);
  when the event fires before t_end, a second LSODA run continues from the event to t_end.

Errors: max over T_ALONG of max_i |θ_i(T) − θ_ref,i(T)|, and max_i |θ_i(t_end) − θ_ref,i(t_end)|. The reference
θ_ref is SciPy's Radau with the analytic Jacobian on the same 4d system at rtol 1e-13, atol 1e-16 on the w rows and
1e-13 on the velocity rows (``REF_*``: why the velocity rows have a larger atol is said there), restarted at every
time of T_ALONG so that each is a step end (no interpolant); it is checked against the same Radau at rtol 1e-12,
atol 1e-15 / 1e-12 (``CHECK_*``), and that difference is printed.

Run: ``python benchmarks/experiment_mgf_accuracy.py`` (a few minutes, mostly the Radau reference).
"""

import os

# One BLAS thread: the 120 x 120 LAPACK calls of SciPy's solvers gain nothing from more, and the machine is shared.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import math  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

# bench_rodas.py imports tests/reference.py (benchmarks/conftest.py puts tests/ on the path under pytest)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
# the peer's system, Jacobian and stopping event, as bench_rodas.py times them (this file's folder is on the path)
from bench_rodas import ALPHA, _loss_event, _scipy_system, _theta  # noqa: E402

import dlnmomentum as dm  # noqa: E402

LAMS = (1e-3, 0.05, 1.0)
T_MAX = 1e7
TOL = 1e-20
#: The times along the way: every 0.25 from 0.5 to 10, where the weights leave the initialisation and errors grow
#: fastest (at λ = 1e-3 the default call's error peaks near t = 3, between the 2, 5, 10, ... this file used before
#: 2026-11-29, which put it at half its size), then the slow phase to 2000. ``experiment_gf_multistep.py`` uses them.
T_ALONG = tuple(0.5 + 0.25 * k for k in range(39)) + (12.0, 15.0, 20.0, 30.0, 50.0, 100.0, 200.0, 500.0, 1000.0,
                                                      2000.0)
LSODA_RTOL, LSODA_ATOL = 1e-10, 1e-12  # bench_rodas.py's peer tolerances
#: (rtol, atol) of the package; None: its default (rtol 1e-9, atol 1e-11 at α = 0.01).
#: After the first seven, (1e-8, 1e-9), (1e-7, 1e-9) on the loose side and four between (1e-10, 1e-12) and the
#: default, to bracket LSODA's accuracy.
PACKAGE_TOLERANCES = (None, (1e-10, 1e-12), (1e-9, 1e-10), (1e-9, 1e-9), (3e-9, 3e-11), (1e-8, 1e-10),
                      (1e-8, 1e-11), (1e-8, 1e-9), (1e-7, 1e-9), (2e-10, 2e-12), (3e-10, 3e-12), (5e-10, 5e-12),
                      (1e-9, 1e-12))
#: The reference's tolerances: rtol, then atol of the w rows and of the velocity rows. The velocity rows tend to 0
#: (and likely carry the rounding of ∇F, a cancellation in Hθ − b, times 1/λ): with atol 1e-15 on them, Radau at
#: rtol 1e-12 took more than 6 minutes from t = 2000 to t_end at λ = 1 (its factorisations far outnumbered its steps:
#: 13 942 LU in 4 923 steps already between t = 200 and 2000), with 1e-12 on them 6 s. The check run differs in all
#: three.
REF_RTOL, REF_ATOL_W, REF_ATOL_V = 1e-13, 1e-16, 1e-13
CHECK_RTOL, CHECK_ATOL_W, CHECK_ATOL_V = 1e-12, 1e-15, 1e-12


def _system(problem, lam):
    """(fun, jac, z0) of MGF's first-order system (w, ẇ)' = (ẇ, -(ẇ + ∇F(w))/λ): bench_rodas.py's, without its
    wall-clock cap."""
    return _scipy_system(problem, lam, math.inf)


def reference(problem, lam, times, rtol, atol_w, atol_v):
    """θ at ``times`` (increasing) by Radau, restarted at each time so that every one is a step end."""
    fun, jac, z = _system(problem, lam)
    atol = np.concatenate([np.full(2 * problem.d, atol_w), np.full(2 * problem.d, atol_v)])
    out, t0 = [], 0.0
    for t in times:
        sol = solve_ivp(fun, (t0, t), z, method="Radau", jac=jac, rtol=rtol, atol=atol)
        assert sol.status == 0, sol.message
        z, t0 = sol.y[:, -1], t
        out.append(_theta(z, problem.d))
    return np.array(out)


def lsoda(problem, lam, times):
    """θ at ``times`` (the last is t_end) by LSODA stopped by the loss event, continued to t_end if need be."""
    fun, jac, z0 = _system(problem, lam)
    steps = [0, -1.0]
    sol = solve_ivp(fun, (0.0, T_MAX), z0, method="LSODA", jac=jac, rtol=LSODA_RTOL, atol=LSODA_ATOL,
                    events=_loss_event(problem, steps), t_eval=times)
    assert sol.status == 1, sol.message  # the event stopped it
    t_event = float(sol.t_events[0][0])
    zs = list(sol.y.T)
    continued = len(zs) < len(times)
    if continued:  # the event came before t_end: continue from it (not in the counts, which are the flow's)
        cont = solve_ivp(fun, (t_event, times[-1]), sol.y_events[0][0], method="LSODA", jac=jac, rtol=LSODA_RTOL,
                         atol=LSODA_ATOL, t_eval=times[len(zs):])
        zs += list(cont.y.T)
    theta = np.array([_theta(z, problem.d) for z in zs])
    return dict(theta=theta, steps=steps[0] - 1, rhs=int(sol.nfev), jac=int(sol.njev), t_stop=t_event,
                continued=continued)


def package(problem, lam, tolerances, t_end):
    """θ at T_ALONG and t_end (a run to t_max = t_end), and steps and prediction gap of the run to the limit."""
    kw = {} if tolerances is None else dict(rtol=tolerances[0], atol=tolerances[1])
    to_limit = dm.mgf(problem, lam, t_max=T_MAX, tol=TOL, **kw)
    assert to_limit.config.scheme == "rodas" and to_limit.status_name == "converged"
    at = dm.mgf(problem, lam, t_max=t_end, scheme="rodas", record=dm.Record(times=T_ALONG), **kw)
    assert at.t_done == t_end
    rows = []
    for t in T_ALONG:  # the recorded rows are at the times themselves (dense output), plus step 0 and t_end
        hit = np.flatnonzero(np.abs(at.trajectory.time - t) <= 1e-12 * t)
        assert hit.size == 1, (t, at.trajectory.time)
        rows.append(at.trajectory.theta[hit[0]])
    theta = np.array(rows + [at.theta])
    c = to_limit.config
    return dict(theta=theta, steps=int(to_limit.steps_done), rejected=int(to_limit.rejected_steps),
                t_stop=float(to_limit.t_done), gap=float(to_limit.prediction_gap), rtol=c.rtol, atol=c.atol)


def errors(theta, theta_ref):
    """(max along the way, where: T, i and θ_ref,i(T), error at t_end, where: i and θ_ref,i(t_end)); rows of
    ``theta`` are T_ALONG, then t_end (no "|" in the text: it goes into a markdown table)."""
    err = np.abs(theta - theta_ref)
    along = err[:-1]
    k, i = np.unravel_index(np.argmax(along), along.shape)
    j = int(np.argmax(err[-1]))
    return (float(along.max()), f"T={T_ALONG[k]:g}, i={i}, θ_ref,i={theta_ref[k, i]:.2g}", float(err[-1, j]),
            f"i={j}, θ_ref,i={theta_ref[-1, j]:.2g}")


def main():
    start = time.perf_counter()
    problem = dm.sparse_regression(n=20, d=30, s=5, mu=1.0, sigma=1.0, seed=0)
    support = None if problem.theta_star is None else np.flatnonzero(problem.theta_star)
    print(f"MGF to train loss {TOL:g}: θ errors against Radau (rtol {REF_RTOL:g}, atol {REF_ATOL_W:g} on w, "
          f"{REF_ATOL_V:g} on ẇ); "
          f"n=20, d=30, s=5, seed 0, α = {ALPHA:g}, zero velocity; T_ALONG = {T_ALONG}")
    if support is not None:
        print(f"support of θ*: coordinates {support.tolist()}")
    summary = []
    for lam in LAMS:
        t_end = float(dm.mgf(problem, lam, t_max=T_MAX, tol=TOL).t_done)
        times = np.array([*T_ALONG, t_end])
        t0 = time.perf_counter()
        theta_ref = reference(problem, lam, times, REF_RTOL, REF_ATOL_W, REF_ATOL_V)
        ref_seconds = time.perf_counter() - t0
        theta_check = reference(problem, lam, times, CHECK_RTOL, CHECK_ATOL_W, CHECK_ATOL_V)
        check = np.abs(theta_check - theta_ref)
        print(f"\n## λ = {lam:g}  (t_end = package default t_done = {t_end:.6g})\n")
        print(f"reference check: max|θ(Radau rtol {CHECK_RTOL:g}, atol {CHECK_ATOL_W:g} on w, {CHECK_ATOL_V:g} on ẇ) "
              f"− θ_ref| along the way "
              f"{check[:-1].max():.2e}, at t_end {check[-1].max():.2e}  (reference run {ref_seconds:.0f} s of "
              f"wall time, for the feasibility of the tolerance only)")
        print(f"max|θ_ref| along the way: {np.abs(theta_ref[:-1]).max():.3g}, at t_end: "
              f"{np.abs(theta_ref[-1]).max():.3g}\n")
        print("| run | steps | max along the way | where | at t_end | where | prediction gap | stops at t |")
        print("|---|---|---|---|---|---|---|---|")
        peer = lsoda(problem, lam, times)
        e_al, where_al, e_end, where_end = errors(peer["theta"], theta_ref)
        cont = "; continued to t_end" if peer["continued"] else ""
        print(f"| SciPy LSODA (rtol {LSODA_RTOL:g}, atol {LSODA_ATOL:g}) | {peer['steps']} ({peer['rhs']} RHS, "
              f"{peer['jac']} Jacobians{cont}) | {e_al:.2e} | {where_al} | {e_end:.2e} | {where_end} | - | "
              f"{peer['t_stop']:.6g} (event) |")
        matching = []
        for tolerances in PACKAGE_TOLERANCES:
            run = package(problem, lam, tolerances, t_end)
            p_al, p_where_al, p_end, p_where_end = errors(run["theta"], theta_ref)
            name = f"package rodas (rtol {run['rtol']:g}, atol {run['atol']:g})" + (
                " [default]" if tolerances is None else "")
            print(f"| {name} | {run['steps']} ({run['rejected']} rejected) | {p_al:.2e} | {p_where_al} | "
                  f"{p_end:.2e} | {p_where_end} | {run['gap']:.2e} | {run['t_stop']:.6g} |")
            if p_al <= e_al and p_end <= e_end:
                matching.append((run["steps"], name))
        if matching:
            steps, name = min(matching)
            summary.append(f"λ = {lam:g}: fewest steps among the package runs with both errors <= LSODA's: {name}, "
                           f"{steps} steps (LSODA {peer['steps']} steps); matching: "
                           + ", ".join(n for _, n in sorted(matching)))
        else:
            summary.append(f"λ = {lam:g}: no tested package tolerance has both errors <= LSODA's")
    print("\n" + "\n".join(summary))
    print(f"\ntotal wall time of the script: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
