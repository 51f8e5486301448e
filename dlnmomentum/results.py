"""Result containers shared by every run kind, and the one reader of the kernels' record layout.

Recorded rows leave a kernel in record blocks (:func:`new_record_block`); :func:`block_fields`
names their columns, for live results (:func:`trajectory_from_blocks`) and for stores alike.
"""

import dataclasses
import warnings
from dataclasses import dataclass

import numpy as np

from .kernels.layout import N_REC_VECTORS
from .record import SCALAR_FIELDS, VECTOR_FIELDS
from .status import Status
from .theory._float64 import norm2  # noqa: F401 (the summaries' norm, re-exported for the run kinds)

#: A run that is not ``converged`` and ends above this train loss gets a warning with its prediction (the
#: theorems describe the limit); the threshold of the paper's Figure 4 and of sweeps' ``theory_tol``.
PREDICTION_TRAIN_LOSS = 1e-8

#: What a summary prints for a quantity of the limit (Δ∞, S± or I±, θ̃0) of a diverged run, which has none (the
#: summary's note says why; the result's fields keep the values at its last point).
DIVERGED_LIMIT_TEXT = "n/a (the run diverged, see note)"


def test_loss_text(value):
    """A summary's test loss: ``nan`` is said to be the absent test set (the one way it is NaN)."""
    return "nan (no test set)" if np.isnan(value) else f"{value:.6e}"


def readonly(arr, dtype=None):
    """A read-only C-contiguous copy (results never alias live state)."""
    out = np.array(arr, dtype=dtype, copy=True, order="C")
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class Trajectory:
    """Recorded iterates of a run: one row per recorded step.

    ``step`` counts updates (integration steps for flows); ``time`` is the
    matching MGF time (``kε`` for MGD, ``kh`` for flows). Vector fields have
    shape ``(rows, d)``; losses ``(rows,)``. Flows add velocities in ``extra``.
    Runs without diagonal weights (networks, :mod:`dlnmomentum.runs.network`) leave the
    vector fields ``None`` and record their parameters, if at all, in ``extra``.
    """

    step: np.ndarray
    time: np.ndarray
    theta: np.ndarray | None = None
    w_plus: np.ndarray | None = None
    w_minus: np.ndarray | None = None
    delta: np.ndarray | None = None
    train_loss: np.ndarray | None = None
    test_loss: np.ndarray | None = None
    extra: dict = dataclasses.field(default_factory=dict)

    def __len__(self):
        return int(self.step.shape[0])

    def __repr__(self):
        """A summary (rows, step and time range, the fields and their shapes), not every recorded number."""
        n = len(self)
        span = (f": step {int(self.step[0])} ... {int(self.step[-1])}, time {float(self.time[0]):g} ... "
                f"{float(self.time[-1]):g}") if n else ""
        shapes = ", ".join(f"{k} {tuple(np.shape(v))}" for k, v in self.fields().items() if k not in ("step", "time"))
        return f"Trajectory({n} rows{span}; {shapes})"

    def fields(self):
        """Name → array of every recorded quantity (including ``extra``)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
               if f.name != "extra" and getattr(self, f.name) is not None}
        out.update(self.extra)
        return out


def new_record_block(rows, d, extra_names=()):
    """Empty record buffers for ``rows`` rows, in the kernels' layout (read back by :func:`block_fields`).

    ``vectors`` holds θ, w₊, w₋, Δ (axis 1, the kernels' ``REC_*`` order), ``losses`` the train and test loss;
    each name in ``extra_names`` gets a ``(rows, d)`` array.
    """
    block = {"step": np.zeros(rows, dtype=np.int64), "vectors": np.zeros((rows, N_REC_VECTORS, d)),
             "losses": np.zeros((rows, 2))}
    for name in extra_names:
        block[name] = np.zeros((rows, d))
    return block


#: Record-buffer keys of the kernels' layout that are not themselves recorded fields.
LAYOUT_KEYS = ("step", "vectors", "losses")


def block_fields(block, rows, time_of_step):
    """The one reader of the kernels' record layout: name -> array ``(rows, ...)`` of a record block.

    ``step``, ``time`` (``time_of_step(step)``), the vectors (:data:`~dlnmomentum.record.VECTOR_FIELDS`,
    axis 1 of ``vectors``), the losses (:data:`~dlnmomentum.record.SCALAR_FIELDS`) and every other key of
    the block as an extra field. Arrays may be views of the block (callers copy what they keep).
    """
    step = block["step"][:rows]
    out = {"step": step, "time": np.asarray(time_of_step(step), dtype=np.float64)}
    if "vectors" in block:  # (network runs have no diagonal weights)
        vectors = block["vectors"][:rows]
        out.update({name: vectors[:, i] for i, name in enumerate(VECTOR_FIELDS)})
    losses = block["losses"][:rows]
    out.update({name: losses[:, i] for i, name in enumerate(SCALAR_FIELDS)})
    out.update({k: block[k][:rows] for k in block if k not in LAYOUT_KEYS})
    return out


def _owned(arr, dtype=None):
    """``arr`` itself, made read-only, where it already has ``dtype`` and is C-contiguous; else :func:`readonly`."""
    if isinstance(arr, np.ndarray) and arr.flags.c_contiguous and (dtype is None or arr.dtype == np.dtype(dtype)):
        arr.setflags(write=False)
        return arr
    return readonly(arr, dtype)


def trajectory_from_fields(fields, owned=False):
    """A :class:`Trajectory` from name -> rows arrays (as :func:`block_fields` or a store gives them).

    Returns None when ``step``, ``time`` or a loss is missing; the vector fields (θ, w±, Δ) are
    None when all of them are missing (network runs). Keys beyond the base fields go to ``extra``.
    ``owned``: the arrays are fresh and nobody else keeps them (just read from a file, or concatenated): they
    are kept as they are, made read-only, instead of copied. A copy of GBs of recorded rows doubled the peak
    memory of reading a long trajectory (``Store.trajectory``) or of finishing a run that recorded it.
    """
    base = [f.name for f in dataclasses.fields(Trajectory) if f.name != "extra"]
    if not all(name in fields for name in ("step", "time") + SCALAR_FIELDS):
        return None
    if not all(name in fields for name in VECTOR_FIELDS):
        if any(name in fields for name in VECTOR_FIELDS):
            return None
        base = [name for name in base if name not in VECTOR_FIELDS]
    dtypes = {"step": np.int64}
    keep = _owned if owned else readonly
    return Trajectory(**{k: keep(fields[k], dtypes.get(k, np.float64)) for k in base},
                      extra={k: keep(v) for k, v in fields.items() if k not in base})


def trajectory_from_blocks(blocks, d, time_of_step, extra_names=()):
    """Concatenate the driver's record blocks ``[(block, rows), ...]`` into a :class:`Trajectory`."""
    if not blocks:
        blocks = [(new_record_block(0, d, extra_names), 0)]
    parts = [block_fields(b, r, time_of_step) for b, r in blocks]
    # (np.concatenate always returns a new array, even of one part: the trajectory owns it)
    return trajectory_from_fields({k: np.concatenate([p[k] for p in parts]) for k in parts[0]}, owned=True)


class StatusMixin:
    """Status helpers of frozen result classes (``status`` always a :class:`~dlnmomentum.Status`)."""

    def __post_init__(self):
        # ``status`` is always a Status member, whether the result comes from a live run or a store.
        object.__setattr__(self, "status", Status(int(self.status)))

    @property
    def message(self):
        return Status(self.status).message

    @property
    def status_name(self):
        return Status(self.status).label

    @property
    def converged(self):
        return self.status == Status.CONVERGED

    def to_dict(self):
        """Every field as plain Python / NumPy values (``problem`` and ``trajectory`` left out)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("problem", "trajectory")}


class ResultMixin(StatusMixin):
    """Status helpers and lazy theory predictions for frozen result classes of diagonal networks."""

    #: The fields holding the exponents S± of θ̃0 = ¼(w₊₀² e^{-2S₊} - w₋₀² e^{-2S₋}) (Lemma 4's sums for MGD,
    #: I± for a flow, which sets its own).
    _THETA0_EXPONENTS = ("s_plus", "s_minus")

    @property
    def theta0_tilde_mirror(self):
        """arcsinh(2θ̃0/Δ∞), θ̃0's mirror coordinate at Δ∞, from the logarithms of θ̃0's two terms: finite where
        ``theta0_tilde`` overflows (±inf after hundreds of sign crossings), and what the prediction uses there."""
        from .theory.entropy import _reference_mirror

        plus, minus = (getattr(self, name) for name in self._THETA0_EXPONENTS)
        return _reference_mirror(self.w_plus0, self.w_minus0, plus, minus, self.delta_inf)

    def _theta0_tilde_notes(self, label):
        """The summary's line for θ̃0 entries that overflow float64 (a run that did not diverge: never a silent inf).

        θ̃0 = ¼(w₊₀² e^{-2S₊} - w₋₀² e^{-2S₋}) is a real number beyond float64 where an exponent is below about -354
        (a large λ, many sign crossings); ``label`` is the summary's padded "note" label."""
        inf = np.flatnonzero(np.isinf(self.theta0_tilde))
        if not inf.size:
            return []
        plus, minus = (np.asarray(getattr(self, name)) for name in self._THETA0_EXPONENTS)
        low = float(np.min(np.minimum(plus, minus)[inf]))
        return [f"{label}: theta0~ overflows float64 at {inf.size} coordinates {inf[:5].tolist()}"
                f"{' ...' if inf.size > 5 else ''} ({'/'.join(self._THETA0_EXPONENTS)} down to {low:.4g}: "
                "w0² e^(-2 x) exceeds 1.8e308); the prediction uses its finite mirror coordinate, theta0_tilde_mirror"]

    def prediction(self):
        """Theorem 1 (flows) / Theorem 2 (MGD, SMGD) for this run, computed on request and cached.

        ``predicted_theta`` is the Bregman projection of ``theta0_tilde`` onto the interpolators for
        ψ at scale ``delta_inf``; ``theta_gf_delta_inf`` the same with θ̃0 = 0 (gradient flow from
        ``u0 = √Δ∞, v0 = 0``); the gaps are relative ℓ2 distances of ``theta`` to them.
        """
        cached = self.__dict__.get("_prediction")
        if cached is None:
            from .theory import predict

            status = getattr(self, "status", None)
            if status == Status.DIVERGED:
                raise ValueError("this run diverged: there is no limit for Theorems 1-2 to predict")
            plus, minus = (np.asarray(getattr(self, name)) for name in self._THETA0_EXPONENTS)
            undefined = np.flatnonzero(np.isnan(plus) | np.isnan(minus))
            if undefined.size:
                raise ValueError(f"theta0_tilde is undefined at coordinates {undefined[:5].tolist()}: "
                                 f"{' and '.join(self._THETA0_EXPONENTS)} are NaN there, since an iterate of w+ or w- "
                                 "was exactly 0 (Lemma 4's sums divide by w), so there is no reference point for "
                                 "Theorems 1-2")
            loss = float(getattr(self, "train_loss", 0.0))
            if status != Status.CONVERGED and not loss <= PREDICTION_TRAIN_LOSS:
                warnings.warn(f"the theorems describe the limit, and this run ended at train loss {loss:.3g} "
                              f"(status {getattr(status, 'label', status)}), above {PREDICTION_TRAIN_LOSS:g}: its "
                              "prediction gap also measures how far it is from converging (run longer or pass tol=)",
                              RuntimeWarning, stacklevel=2)
            cached = predict(self.problem.X, self.problem.y, self.delta_inf, self.theta0_tilde, self.theta,
                             theta0_mirror=self.theta0_tilde_mirror)
            object.__setattr__(self, "_prediction", cached)
        return cached

    @property
    def predicted_theta(self):
        return self.prediction().predicted_theta

    @property
    def prediction_gap(self):
        """‖θ∞ - predicted‖/‖predicted‖."""
        return self.prediction().prediction_gap

    @property
    def theta_gf_delta_inf(self):
        return self.prediction().theta_gf_delta_inf

    @property
    def normalized_distance(self):
        """The paper's check ‖θ∞ - θ^GF_Δ∞‖/‖θ^GF_Δ∞‖."""
        return self.prediction().normalized_distance
