"""The per-point fields of a sweep: one table, and the functions that fill it from a run's final state.

A sweep point is a whole run reduced to a few numbers and vectors. The discrete fields come
from :func:`dlnmomentum.runs.mgd.derived_fields` — the very function :meth:`MGDRun.finish`
uses — so a sweep point equals the single run bit for bit; flow points come from the
:class:`~dlnmomentum.runs.flow.FlowResult` of the run itself.
"""

import enum
import warnings

import numpy as np

from ..kernels import layout as KL
from ..results import norm2
from ..status import Status
from .mgd import derived_fields


class TheoryReason(enum.IntEnum):
    """Why a sweep point's theory fields hold a value, or why they do not (the ``theory_reason`` field).

    A theory field that cannot be computed is NaN *and* says why here: never a silent NaN.
    """

    COMPUTED = 0
    NOT_REQUESTED = 1
    NOT_CONVERGED = 2
    DIVERGED = 3
    SOLVER_FAILED = 4
    INTERRUPTED = 5
    NOT_RECORDED = 6
    NO_REFERENCE = 7
    ZERO_DELTA_INF = 8

    @property
    def message(self):
        return _THEORY_MESSAGES[self]


_THEORY_MESSAGES = {
    TheoryReason.COMPUTED: "computed",
    TheoryReason.NOT_REQUESTED: "not requested (theory=False)",
    TheoryReason.NOT_CONVERGED: "not converged: the theorems describe the limit; status is not 'converged' and "
                                "the final train loss is above theory_tol",
    TheoryReason.DIVERGED: "the run diverged",
    TheoryReason.SOLVER_FAILED: "the implicit-bias solver failed (see the warning it raised)",
    TheoryReason.INTERRUPTED: "the run was interrupted",
    TheoryReason.NOT_RECORDED: "not recorded (a sweep store written before format 2)",
    TheoryReason.NO_REFERENCE: "theta0_tilde is NaN at some coordinate: an iterate of w+ or w- was exactly 0, "
                               "where Lemma 4's sums (which divide by w) are undefined, so Theorems 1-2 have no "
                               "reference point",
    TheoryReason.ZERO_DELTA_INF: "Delta_inf = |w_plus w_minus| is 0 at some coordinate (Assumption 2 fails): "
                                 "psi_Delta_inf is not defined there",
}

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
    "sign_changes": (np.int64, "number of sign changes of w_plus and w_minus, all coordinates together"),
    "prediction_gap": (np.float64, "Theorem 1/2 prediction gap ||theta - theta_pred||/||theta_pred|| "
                                   "(theory=True; NaN when not computed: see theory_reason)"),
    "normalized_distance": (np.float64,
                            "||theta - theta_GF(Delta_inf)||/||theta_GF(Delta_inf)||, the distance to the "
                            "Delta_inf-only prediction (theory=True)"),
    "pred_train_loss": (np.float64, "train loss of the predicted limit theta_pred (theory=True)"),
    "pred_test_loss": (np.float64, "test loss of the predicted limit theta_pred (theory=True)"),
    "theory_reason": (np.int8, "why the theory fields hold a value or NaN: "
                      + ", ".join(f"{int(r)} {r.name.lower()}" for r in TheoryReason)
                      + " (dlnmomentum.runs.points.TheoryReason)"),
}
#: Vector fields (a trailing ``coord`` axis): name -> (dtype, description).
VECTOR_FIELDS = {
    "s_plus": (np.float64, "S_plus of Lemma 4 (I_plus of Theorem 1 for flows)"),
    "s_minus": (np.float64, "S_minus of Lemma 4 (I_minus of Theorem 1 for flows)"),
    "theta": (np.float64, "final theta"),
    "delta_inf": (np.float64, "Delta_inf = |w_plus w_minus| at the end of the run"),
    "theta0_tilde": (np.float64, "the perturbed initialisation theta0_tilde of Theorems 1-2"),
    "theta_pred": (np.float64, "the predicted limit argmin_{X theta = y} D_psi_Delta_inf(theta, theta0_tilde) "
                               "(theory=True)"),
}
FIELDS = tuple(SCALAR_FIELDS) + tuple(VECTOR_FIELDS)


def point_columns(results):
    """The fields of finished points, a list of point dicts, as one array per field of :data:`FIELDS` (in its
    dtype; NaN where a point has no value). Columns already made are returned as they are: the writer and the
    in-memory grid of a sweep take the same columns, made once per wave (made for each, and field by field
    point by point, they cost as much as the kernels of a sweep of short runs)."""
    if isinstance(results, dict):
        return results
    dtypes = {name: dtype for name, (dtype, _) in {**SCALAR_FIELDS, **VECTOR_FIELDS}.items()}
    return {name: np.asarray([res.get(name, np.nan) for res in results], dtype=dtypes[name]) for name in FIELDS}


#: The run parameters of a point (a dim, or an array over the grid computed from the sweep's configuration).
PARAMETER_FIELDS = {
    "gamma": (np.float64, "step size gamma of the MGD/SMGD run"),
    "beta": (np.float64, "momentum beta of the MGD/SMGD run"),
    "lam": (np.float64, "lambda = gamma/(1-beta)^2 (Proposition 1), the MGF parameter"),
}
THEORY_FIELDS = ("prediction_gap", "normalized_distance", "pred_train_loss", "pred_test_loss", "theta_pred")
#: Fields added by sweep-store format 2, with the value a store written before holds for them (NaN, -1:
#: unknown, NOT_RECORDED); a session that continues such a store adds the datasets.
ADDED_IN_V2 = {"sign_changes": -1, "pred_train_loss": np.nan, "pred_test_loss": np.nan,
               "theory_reason": int(TheoryReason.NOT_RECORDED), "delta_inf": np.nan, "theta0_tilde": np.nan,
               "theta_pred": np.nan}


#: Fields that hold codes, with the name of every code: read by :meth:`dlnmomentum.Sweep.names`, and written
#: as the CF attributes ``flag_values``/``flag_meanings`` of their datasets (:func:`flag_attributes`), which
#: xarray shows.
CODED_FIELDS = {"status": {int(s): s.label for s in Status},
                "theory_reason": {int(r): r.name.lower() for r in TheoryReason}}


#: The code of a point not done in a coded field (``status``, ``theory_reason``): the fill value of those datasets in
#: a sweep store (since 0.6.0), and what ``Sweep.to_xarray`` shows there. Before, a store's fill 0 read ``running`` /
#: ``computed`` for a point never computed, in any reader that does not look at ``done`` (xarray, h5py).
NOT_DONE = -1


def flag_attributes(name, dtype=np.int8, not_done=False):
    """The CF attributes ``flag_values`` (codes, as ``dtype``) and ``flag_meanings`` (their names, space
    separated) of a coded field; ``{}`` for any other field. ``not_done``: the code :data:`NOT_DONE` first, named
    ``not_done`` (a grid whose points not done hold it)."""
    codes = CODED_FIELDS.get(name)
    if codes is None:
        return {}
    if not_done:
        codes = {NOT_DONE: "not_done", **codes}
    return {"flag_values": np.array(list(codes), dtype=dtype), "flag_meanings": " ".join(codes.values())}


def code_names(name, codes):
    """The names of the codes ``codes`` of the coded field ``name``, as a str array of the same shape (a code
    this version does not know, from a newer file: its number as text)."""
    table = CODED_FIELDS[name]
    codes = np.asarray(codes)
    out = np.empty(codes.shape, dtype=object)
    for code in np.unique(codes):
        out[codes == code] = table.get(int(code), str(int(code)))
    return out.astype(str)


def field_description(name):
    """The description of a point field (its name for an unknown one)."""
    return (SCALAR_FIELDS.get(name) or VECTOR_FIELDS.get(name) or PARAMETER_FIELDS.get(name) or (None, name))[1]


def no_theory(d, reason=TheoryReason.NOT_REQUESTED):
    """The theory fields of a point without a prediction: NaN, and ``theory_reason`` saying why."""
    return {"prediction_gap": np.nan, "normalized_distance": np.nan, "pred_train_loss": np.nan,
            "pred_test_loss": np.nan, "theta_pred": np.full(d, np.nan), "theory_reason": int(reason)}


def converged(status, train_loss, theory_tol):
    """The theorems' premise: status ``converged``, or ``max_steps`` or ``stalled`` with a final train loss
    ``<= theory_tol``.

    Element-wise for arrays (the figures' marks use the same rule as the theory fields).
    """
    with np.errstate(invalid="ignore"):
        status = np.asarray(status)
        ended = (status == Status.MAX_STEPS) | (status == Status.STALLED)
        return (status == Status.CONVERGED) | (ended & (np.asarray(train_loss) <= theory_tol))


def theory_fields(problem, theta, delta_inf, theta0_tilde, status, train_loss, theory_tol, theta0_mirror=None):
    """Theorem 1/2's prediction of a converged point, as sweep fields (see :class:`TheoryReason`).

    ``theta0_mirror`` is θ̃0's mirror coordinate (:func:`~dlnmomentum.theory.reference_mirror`), which
    the prediction uses where θ̃0 overflows. Returns a dict with ``prediction_gap``, ``normalized_distance``,
    ``pred_train_loss``, ``pred_test_loss``, ``theta_pred`` and ``theory_reason``; for a point that is not
    converged (:func:`converged`) the values are NaN and ``theory_reason`` says why.
    """
    out = no_theory(np.asarray(theta).shape[0])
    if status == Status.DIVERGED:
        return dict(out, theory_reason=int(TheoryReason.DIVERGED))
    if status == Status.INTERRUPTED:
        return dict(out, theory_reason=int(TheoryReason.INTERRUPTED))
    if not converged(status, train_loss, theory_tol):
        return dict(out, theory_reason=int(TheoryReason.NOT_CONVERGED))
    # Theorem 1/2's premises, checked here so that a point says which one fails (predict would refuse both
    # with a ValueError, reported as SOLVER_FAILED, a solver failure that did not happen).
    if np.any(np.isnan(theta0_tilde)):
        return dict(out, theory_reason=int(TheoryReason.NO_REFERENCE))
    if not np.all(np.asarray(delta_inf) > 0.0):
        return dict(out, theory_reason=int(TheoryReason.ZERO_DELTA_INF))
    from ..theory import predict

    try:
        pred = predict(problem.X, problem.y, delta_inf, theta0_tilde, theta, theta0_mirror=theta0_mirror)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError) as exc:
        warnings.warn(f"theory prediction failed for a sweep point: {exc}", RuntimeWarning, stacklevel=3)
        return dict(out, theory_reason=int(TheoryReason.SOLVER_FAILED))
    tp = np.asarray(pred.predicted_theta, dtype=np.float64)
    return {"prediction_gap": float(pred.prediction_gap), "normalized_distance": float(pred.normalized_distance),
            "pred_train_loss": problem.train_loss(tp), "pred_test_loss": problem.test_loss(tp), "theta_pred": tp,
            "theory_reason": int(TheoryReason.COMPUTED)}


def mgd_point(problem, beta, fstate, istate, status, steps_done, w_plus0, w_minus0, theory, theory_tol):
    """The fields of one MGD/SMGD point from its kernel state (the formulas of ``MGDRun.finish``)."""
    return mgd_points([problem], [beta], np.asarray(fstate)[None], np.asarray(istate)[None], [status],
                      [steps_done], w_plus0, w_minus0, theory, theory_tol)[0]


def mgd_points(problems, betas, fstates, istates, statuses, steps_done, w_plus0, w_minus0, theory, theory_tol):
    """The fields of many MGD/SMGD points (a list of dicts, as :func:`mgd_point` each): :func:`mgd_columns` cut
    into points."""
    cols = mgd_columns(problems, betas, fstates, istates, statuses, steps_done, w_plus0, w_minus0, theory,
                       theory_tol)
    scalar = {"crossed": int, "status": int, "steps_done": int, "sign_changes": int, "theory_reason": int}
    return [{name: (col[i] if name in VECTOR_FIELDS else scalar.get(name, float)(col[i]))
             for name, col in cols.items()} for i in range(len(problems))]


def mgd_columns(problems, betas, fstates, istates, statuses, steps_done, w_plus0, w_minus0, theory, theory_tol):
    """The fields of many MGD/SMGD points as :func:`point_columns` (one array per field of :data:`FIELDS`, a leading
    point axis) from their kernel states ``fstates``/``istates`` (a leading point axis),
    ``problems``/``betas``/``statuses``/``steps_done`` one per point.

    Every field is the bits of the single run's (``MGDRun.finish``): :func:`~dlnmomentum.runs.mgd.derived_fields`
    is element-wise; the losses are ``Problem._train_losses``/``_test_losses`` (for each point the BLAS calls of
    ``Problem.train_loss``), ``delta_inf_norm`` :func:`~dlnmomentum.theory._float64.norm2_rows` (each row's
    :func:`norm2`) and ``l1_norm`` the sum of each row of |θ| (numpy's pairwise sum of the row, as
    ``np.abs(theta).sum()``). Per point in Python are only the predictions of converged points (``theory=True``)
    and a θ that is not finite (never from the kernels, which stop a diverging run; the checked loss says what is
    wrong). One call per point of those whole-wave operations was twice the kernels' time of a sweep of short
    runs.
    """
    from ..theory._float64 import norm2_rows

    betas = np.asarray(betas, dtype=np.float64)
    npts = len(problems)
    f = derived_fields(fstates, istates, betas, w_plus0, w_minus0)
    theta = np.ascontiguousarray(f["theta"])
    d = theta.shape[-1]
    cols = {"test_loss": np.empty(npts), "train_loss": np.empty(npts),
            "delta_inf_norm": norm2_rows(f["delta_inf"]), "l1_norm": np.abs(theta).sum(axis=-1),
            "crossed": np.asarray(f["crossed"], dtype=np.int8),
            "status": np.asarray(statuses, dtype=np.int64)[:npts].astype(np.int8),
            "steps_done": np.asarray(steps_done, dtype=np.int64)[:npts].copy(),
            "sign_changes": istates[:, KL.CROSS_PLUS, :].sum(axis=-1) + istates[:, KL.CROSS_MINUS, :].sum(axis=-1),
            "s_plus": f["s_plus"], "s_minus": f["s_minus"], "theta": theta, "delta_inf": f["delta_inf"],
            "theta0_tilde": f["theta0_tilde"]}
    theory_cols = no_theory(d)
    for name, value in theory_cols.items():
        shape = (npts,) + np.shape(value)
        dtype = (SCALAR_FIELDS.get(name) or VECTOR_FIELDS[name])[0]
        cols[name] = np.full(shape, value, dtype=dtype)
    finite = np.isfinite(theta).all(axis=-1)
    # the losses, a block of rows per data set (the points of a rep share one Problem; grouped without a Python
    # step per point)
    ids = np.fromiter(map(id, problems), dtype=np.uint64, count=npts)
    _, first, which = np.unique(ids, return_index=True, return_inverse=True)
    for k, i0 in enumerate(first):
        problem = problems[i0]
        rows = np.flatnonzero(which == k)
        ok = rows[finite[rows]]
        if ok.size:
            t = theta[ok]
            cols["train_loss"][ok] = problem._train_losses(t)
            cols["test_loss"][ok] = problem._test_losses(t)
        for i in rows[~finite[rows]]:  # (the checked call says what is wrong)
            cols["train_loss"][i], cols["test_loss"][i] = problem.train_loss(theta[i]), problem.test_loss(theta[i])
    if theory:
        _theory_columns(cols, problems, w_plus0, w_minus0, theory_tol)
    return cols


def _theory_columns(cols, problems, w_plus0, w_minus0, theory_tol):
    """Fill the theory fields of :func:`mgd_columns`: the reason of every point that gets no prediction (diverged,
    interrupted, not converged: :func:`theory_fields`'s first rules) as whole-wave operations, then
    :func:`theory_fields` for each converged point. Per point, those rules and θ̃0's mirror coordinate cost about
    100 µs a point in Python, twice a sweep's kernels and other fields for short runs, on points none of which has a
    prediction to compute."""
    from ..theory.entropy import _reference_mirror

    status = cols["status"].astype(np.int64)
    reason = cols["theory_reason"]
    no_prediction = ~converged(status, cols["train_loss"], theory_tol)
    reason[no_prediction] = int(TheoryReason.NOT_CONVERGED)
    reason[status == Status.INTERRUPTED] = int(TheoryReason.INTERRUPTED)
    reason[status == Status.DIVERGED] = int(TheoryReason.DIVERGED)
    rest = np.flatnonzero(~no_prediction & (status != Status.DIVERGED) & (status != Status.INTERRUPTED))
    if not rest.size:
        return
    # θ̃0's mirror coordinate is element-wise: one call for the points that use it, the same bits as one per point
    mirrors = _reference_mirror(w_plus0, w_minus0, cols["s_plus"][rest], cols["s_minus"][rest],
                                cols["delta_inf"][rest])
    theta = cols["theta"]
    for k, i in enumerate(rest):
        point = theory_fields(problems[i], theta[i].copy(), cols["delta_inf"][i], cols["theta0_tilde"][i],
                              int(status[i]), float(cols["train_loss"][i]), theory_tol, mirrors[k])
        for name, value in point.items():
            cols[name][i] = value


def flow_point(result, problem, theory, theory_tol):
    """The fields of one flow point from its :class:`~dlnmomentum.runs.flow.FlowResult`."""
    out = {"test_loss": result.test_loss, "train_loss": result.train_loss,
           "delta_inf_norm": norm2(result.delta_inf), "l1_norm": result.l1_norm,
           "crossed": int(result.crossed), "status": int(result.status), "steps_done": int(result.steps_done),
           "sign_changes": int(result.n_crossings),
           "s_plus": np.asarray(result.i_plus), "s_minus": np.asarray(result.i_minus),
           "theta": np.asarray(result.theta), "delta_inf": np.asarray(result.delta_inf),
           "theta0_tilde": np.asarray(result.theta0_tilde)}
    out.update(no_theory(out["theta"].shape[0]))
    if theory:
        out.update(theory_fields(problem, np.asarray(result.theta), np.asarray(result.delta_inf),
                                 np.asarray(result.theta0_tilde), result.status, result.train_loss, theory_tol,
                                 result.theta0_tilde_mirror))
    return out
