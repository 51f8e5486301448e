"""The flow of an MGD run (Proposition 1): MGF(λ = γ/(1-β)²) on MGD's own time grid.

:func:`prepare_mgf_from_mgd` builds the :class:`~dlnmomentum.runs.flow.FlowRun` of
:func:`dlnmomentum.mgf_from_mgd`: its grid is MGD's step ε = γ/(1-β) cut into ``substeps`` steps, with the initial
velocity of MGD's first two iterates, and rows at MGD's times j·ε (``FlowConfig.mgd_eps``); :func:`mgd_time` is the
time of an MGD iterate.
"""

import math

import numpy as np

from ..validate import MAX_STEPS, as_array, as_float, as_int, as_real_array, check_data_scale
from .common import check_problem, check_record, initial_weights
from .flow import FlowRun, prepare_flow
from .stepping import (
    DEFAULT_MAX_CROSSINGS,
    LAM_MAX,
    check_scheme,
    choose_scheme,
    default_step,
    stiffness_estimate,
)


def mgd_time(step, gamma, beta):
    """MGF time ``k·ε`` of MGD iterate ``k`` (a step number >= 0, or an array of them), ε = γ/(1-β)
    (Proposition 1)."""
    from ..theory.maps import eps as eps_of  # (validates γ, β and refuses an ε beyond float64)

    eps = eps_of(gamma, beta)
    steps = as_real_array("step", step, low=0.0)
    if np.any(steps != np.floor(steps)):
        raise ValueError(f"step must be whole step numbers >= 0, got {step!r}")
    with np.errstate(over="raise"):
        try:
            return steps * eps
        except FloatingPointError:
            raise ValueError(f"step * eps is beyond float64's range (eps = {eps:.4g})") from None


def prepare_mgf_from_mgd(problem, gamma, beta, *, steps, substeps=None, alpha=0.01, u0=None, v0=None, u1=None,
                         v1=None, tol=None, record=None, gradient="auto", refine_start="auto",
                         max_crossings=DEFAULT_MAX_CROSSINGS, scheme="auto"):
    """Validate the arguments of :func:`dlnmomentum.mgf_from_mgd` (Proposition 1; see there) and build its run.

    λ = γ/(1-β)², grid step ε/``substeps`` with ε = γ/(1-β), initial velocity (w₁ - w₀)/√(λγ); the
    default ``substeps`` follow the default step of the scheme used (:func:`~.stepping.choose_scheme`).
    """
    gamma = as_float("gamma", gamma, low=0.0, low_open=True)
    beta = as_float("beta", beta, low=0.0, high=1.0, high_open=True)
    steps = as_int("steps", steps, low=1, high=MAX_STEPS)
    check_problem(problem)
    check_record(record)
    if record is not None:
        # record is in MGD steps: Record's own errors for times=/accepted=/a fractional every speak of "flows" and
        # "discrete runs", which said the opposite of what this flow takes
        if record.times is not None or record.accepted or (record.every is not None
                                                            and not float(record.every).is_integer()):
            asked = ("times=" if record.times is not None else "accepted=True" if record.accepted
                     else f"every={record.every!r}")
            raise ValueError(f"record of mgf_from_mgd is given in MGD steps: Record(every=k) with a whole number k, "
                             f"log= or steps=, got Record({asked}) (record a flow at times with dlnmomentum.mgf)")
    lam = gamma / (1.0 - beta) ** 2
    eps = gamma / (1.0 - beta)
    given = f"gamma = {gamma!r} and beta = {beta!r} give lambda = gamma/(1-beta)^2 = {lam:.4g}"
    if not 0.0 < lam <= LAM_MAX:
        raise ValueError(f"gamma and beta must give lambda = gamma/(1-beta)^2 in (0, {LAM_MAX:g}]: {given}")
    u0, v0 = initial_weights(problem.d, alpha, u0, v0)
    d = problem.d
    u_dot0 = v_dot0 = np.zeros(d)  # w_1 = w_0 (the default): no velocity, whatever the scale below
    if u1 is not None or v1 is not None:
        u1 = u0 if u1 is None else as_array("u1", u1, ndim=1, shape=(d,))
        v1 = v0 if v1 is None else as_array("v1", v1, ndim=1, shape=(d,))
        scale = math.sqrt(lam * gamma)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            u_dot0, v_dot0 = (u1 - u0) / scale, (v1 - v0) / scale
        if not (np.all(np.isfinite(u_dot0)) and np.all(np.isfinite(v_dot0))):
            raise ValueError(f"gamma must be large enough that the initial velocity (w1 - w0)/sqrt(lambda*gamma) "
                             f"is finite: {given} and sqrt(lambda*gamma) = {scale:.3g}")
    if check_scheme(scheme) == "rodas":  # (before any work: the flow's grid is MGD's step ε cut into substeps)
        raise ValueError("scheme of mgf_from_mgd must be 'auto', 'rk4' or 'exp-rk4', got 'rodas': the flow runs on "
                         "MGD's grid (step eps/substeps, a row per MGD step); for an adaptive flow at "
                         "lambda = gamma/(1-beta)^2 use dlnmomentum.mgf(problem, lam, scheme='rodas')")
    kappa = check_data_scale(problem, lambda: stiffness_estimate(problem, u0, v0))  # (X * 1e200 reached scipy's eigh)
    scheme = choose_scheme(scheme, lam, kappa)
    if substeps is None:
        ratio = eps / default_step(lam, kappa, scheme) * (1.0 - 1e-12)
        if not ratio <= MAX_STEPS // steps:  # the default, not an argument given: said in terms of what was given
            raise ValueError(f"{given} and eps = gamma/(1-beta) = {eps:.4g}: the {scheme} scheme's default step "
                             f"{default_step(lam, kappa, scheme):.3g} would need {ratio:.3g} substeps per MGD step, "
                             f"which for {steps} steps is beyond the budget of {MAX_STEPS} grid steps: choose a "
                             f"smaller gamma (or alpha), or pass substeps")
        substeps = max(1, math.ceil(ratio))
    substeps = as_int("substeps", substeps, low=1, high=MAX_STEPS // steps)
    try:
        run = prepare_flow(problem, lam, t_max=steps * eps, h=eps / substeps, u0=u0, v0=v0, u_dot0=u_dot0,
                           v_dot0=v_dot0, tol=tol, gradient=gradient, refine_start=refine_start,
                           max_crossings=max_crossings, scheme=scheme)
    except ValueError as exc:  # the flow's own parameters are this function's gamma, beta, steps, substeps
        raise ValueError(f"{given} and eps = gamma/(1-beta) = {eps:.4g}, for which: {exc}") from exc
    # the exact grid (t_max/h may have rounded the other way), its rows at MGD's times j·ε
    config = run.config._replace(n_steps=steps * substeps, h=eps / substeps, mgd_eps=eps, mgd_substeps=substeps)
    run = FlowRun(problem, config, u0, v0, u_dot0, v_dot0)
    if record is not None:
        run.schedule = record.step_schedule(steps) * substeps
    return run
