"""How accurate are the quantities of a weight that becomes tiny, under the adaptive scheme ``"rodas"``?

On the paper's problem at λ = 0.058 the weight w₋ of the support coordinate 14 falls from 0.01 to 4.6e-9 by
t = 300 without changing sign (the momentum drives |Δ| of that coordinate down: λJ ≈ 8.7 there). θ does not see
it (w₋² ~ 1e-17), but Δ = |w₊w₋|, J± = ∫(ẇ/w)² and everything Corollary 2 builds from them do, relatively. This
script integrates the same MGF(λ) with SciPy's DOP853 at rtol 1e-13 (J± as ODE components, so under its error
control) and prints, for ``dm.mgf(..., scheme="rodas")`` at a range of ``rtol`` (``atol = rtol/100``), the worst
relative error of J± over the coordinates without crossings, of w± and the absolute error of θ. The errors are
proportional to rtol: ln|w| integrates the error of ∇L over the run, so a tiny weight's relative accuracy is
that of ∇L times the time it took to shrink (docs/guide/flows.md, "Schemes").

    python scripts/accuracy_small_weights.py            # about 90 s, most of it the reference
"""

import time

import numpy as np
from scipy.integrate import solve_ivp

import dlnmomentum as dm

LAM, T_MAX = 0.058, 300.0


def reference(problem, w0):
    """(J±, w±) at T_MAX from DOP853 at rtol 1e-13 on (w, ẇ, J) with w = (w₊, w₋)."""
    H = problem.X.T @ problem.X / problem.n
    b = problem.X.T @ problem.y / problem.n
    d = problem.d

    def rhs(t, z):
        w, v = z[:2 * d], z[2 * d:4 * d]
        wp, wm = w[:d], w[d:]
        g = H @ ((wp * wp - wm * wm) / 4) - b          # ∇L(θ), Hessian form
        grad_w = np.concatenate([g * wp, -g * wm])      # ∇F in w±: (g⊙w₊, -g⊙w₋)
        return np.concatenate([v, -(v + grad_w) / LAM, (v / w) ** 2])

    z0 = np.concatenate([w0, np.zeros(4 * d)])
    sol = solve_ivp(rhs, (0.0, T_MAX), z0, method="DOP853", rtol=1e-13, atol=1e-22)
    if not sol.success:
        raise RuntimeError(sol.message)
    return sol.y[4 * d:, -1], sol.y[:2 * d, -1]


def main():
    problem = dm.sparse_regression(n=20, d=30, s=5, mu=1, sigma=1, seed=0)
    first = dm.mgf(problem, LAM, t_max=T_MAX, scheme="rodas")
    start = time.perf_counter()
    j_ref, w_ref = reference(problem, np.concatenate([first.w_plus0, first.w_minus0]))
    d = problem.d
    theta_ref = (w_ref[:d] ** 2 - w_ref[d:] ** 2) / 4
    print(f"reference (DOP853, rtol 1e-13): {time.perf_counter() - start:.0f} s; "
          f"smallest |w±| at t = {T_MAX:g}: {np.abs(w_ref).min():.2e} (coordinate {np.argmin(np.abs(w_ref)) % d})")
    print("rtol     steps   max rel err J±   max rel err w±   max |err θ|")
    for rtol in (1e-8, 1e-9, 1e-10, 1e-11, 1e-12):
        run = dm.mgf(problem, LAM, t_max=T_MAX, scheme="rodas", rtol=rtol, atol=rtol / 100)
        j = np.concatenate([run.j_plus, run.j_minus])
        valid = np.concatenate([run.j_valid_plus, run.j_valid_minus])
        w = np.concatenate([run.w_plus, run.w_minus])
        print(f"{rtol:<8.0e} {run.steps_done:<7d} {np.max(np.abs(j - j_ref)[valid] / j_ref[valid]):<16.1e} "
              f"{np.max(np.abs(w - w_ref) / np.abs(w_ref)):<16.1e} {np.max(np.abs(run.theta - theta_ref)):.1e}")


if __name__ == "__main__":
    main()
