"""The per-point fields of a sweep: one table, and the functions that fill it from a run's final state.

A sweep point is a whole run reduced to a few numbers and vectors. The discrete fields come
from :func:`dlnmomentum.runs.mgd.derived_fields` — the very function :meth:`MGDRun.finish`
uses — so a sweep point equals the single run bit for bit; flow points come from the
:class:`~dlnmomentum.runs.flow.FlowResult` of the run itself.
"""

import warnings

import numpy as np

from ..status import Status
from .mgd import derived_fields

#: Scalar fields: name -> (dtype, description).
SCALAR_FIELDS = {
    "test_loss": (np.float64, "test loss of the final theta (NaN without a test set)"),
    "train_loss": (np.float64, "train loss L(theta) = ||X theta - y||^2/(2n) of the final theta"),
    "delta_inf_norm": (np.float64, "||Delta_inf||_2, Delta_inf = |w_plus w_minus| at the end of the run"),
    "l1_norm": (np.float64, "||theta||_1 of the final theta"),
    "crossed": (np.int8, "1 if some coordinate of w_plus or w_minus changed sign"),
    "status": (np.int8, "run status: " + ", ".join(f"{int(s)} {s.label}" for s in Status if s)
               + " (dlnmomentum.Status)"),
    "steps_done": (np.int64, "updates (MGD/SMGD) or integration steps (flows) done"),
    "lam": (np.float64, "lambda = gamma/(1-beta)^2 (Proposition 1)"),
    "prediction_gap": (np.float64, "Theorem 2 prediction gap (theory=True; NaN if not computed)"),
    "normalized_distance": (np.float64,
                            "||theta - theta_GF(Delta_inf)||/||theta_GF(Delta_inf)|| (theory=True)"),
}
#: Vector fields (a trailing ``coord`` axis): name -> (dtype, description).
VECTOR_FIELDS = {
    "s_plus": (np.float64, "S_plus of Lemma 4 (I_plus of Theorem 1 for flows)"),
    "s_minus": (np.float64, "S_minus of Lemma 4 (I_minus of Theorem 1 for flows)"),
    "theta": (np.float64, "final theta"),
}
FIELDS = tuple(SCALAR_FIELDS) + tuple(VECTOR_FIELDS)
THEORY_FIELDS = ("prediction_gap", "normalized_distance")


def field_description(name):
    """The description of a point field (its name for an unknown one)."""
    return (SCALAR_FIELDS.get(name) or VECTOR_FIELDS.get(name) or (None, name))[1]


def theory_fields(problem, theta, delta_inf, theta0_tilde, status, train_loss, theory_tol):
    """Theorem 1/2's prediction gap and normalised distance of a converged point (else NaN, NaN).

    Converged: status ``converged``, or ``max_steps`` with a final train loss ``<= theory_tol``.
    """
    if not (status == Status.CONVERGED or (status == Status.MAX_STEPS and train_loss <= theory_tol)):
        return np.nan, np.nan
    from ..theory import predict

    try:
        pred = predict(problem.X, problem.y, delta_inf, theta0_tilde, theta)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError) as exc:
        warnings.warn(f"theory prediction failed for a sweep point: {exc}", RuntimeWarning, stacklevel=3)
        return np.nan, np.nan
    return float(pred.prediction_gap), float(pred.normalized_distance)


def mgd_point(problem, beta, fstate, istate, status, steps_done, w_plus0, w_minus0, theory, theory_tol):
    """The fields of one MGD/SMGD point from its kernel state (the formulas of ``MGDRun.finish``)."""
    f = derived_fields(fstate, istate, beta, w_plus0, w_minus0)
    theta = f["theta"]
    train_loss = problem.train_loss(theta)
    with np.errstate(over="ignore", invalid="ignore"):  # a diverged point may be huge
        delta_norm = float(np.linalg.norm(f["delta_inf"]))
    out = {"test_loss": problem.test_loss(theta), "train_loss": train_loss,
           "delta_inf_norm": delta_norm, "l1_norm": float(np.abs(theta).sum()),
           "crossed": int(f["crossed"]), "status": int(status), "steps_done": int(steps_done),
           "s_plus": f["s_plus"], "s_minus": f["s_minus"], "theta": theta}
    if theory:
        out["prediction_gap"], out["normalized_distance"] = theory_fields(
            problem, theta, f["delta_inf"], f["theta0_tilde"], status, train_loss, theory_tol)
    return out


def flow_point(result, problem, theory, theory_tol):
    """The fields of one flow point from its :class:`~dlnmomentum.runs.flow.FlowResult`."""
    out = {"test_loss": result.test_loss, "train_loss": result.train_loss,
           "delta_inf_norm": float(np.linalg.norm(result.delta_inf)), "l1_norm": result.l1_norm,
           "crossed": int(result.crossed), "status": int(result.status), "steps_done": int(result.steps_done),
           "s_plus": np.asarray(result.i_plus), "s_minus": np.asarray(result.i_minus),
           "theta": np.asarray(result.theta)}
    if theory:
        out["prediction_gap"], out["normalized_distance"] = theory_fields(
            problem, np.asarray(result.theta), np.asarray(result.delta_inf), np.asarray(result.theta0_tilde),
            result.status, result.train_loss, theory_tol)
    return out
