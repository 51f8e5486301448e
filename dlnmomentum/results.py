"""Result containers shared by every run kind."""

import dataclasses
from dataclasses import dataclass

import numpy as np

from .kernels.mgd import N_REC_VECTORS
from .status import STATUS_MESSAGES, status_name


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
    """

    step: np.ndarray
    time: np.ndarray
    theta: np.ndarray
    w_plus: np.ndarray
    w_minus: np.ndarray
    delta: np.ndarray
    train_loss: np.ndarray
    test_loss: np.ndarray
    extra: dict = dataclasses.field(default_factory=dict)

    def __len__(self):
        return int(self.step.shape[0])

    def fields(self):
        """Name → array of every recorded quantity (including ``extra``)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "extra"}
        out.update(self.extra)
        return out


def new_record_block(rows, d, extra_names=()):
    """Empty record buffers for ``rows`` rows, in the kernels' layout (read back by :func:`trajectory_from_blocks`).

    ``vectors`` holds θ, w₊, w₋, Δ (axis 1, the kernels' ``REC_*`` order), ``losses`` the train and test loss;
    each name in ``extra_names`` gets a ``(rows, d)`` array.
    """
    block = {"step": np.zeros(rows, dtype=np.int64), "vectors": np.zeros((rows, N_REC_VECTORS, d)),
             "losses": np.zeros((rows, 2))}
    for name in extra_names:
        block[name] = np.zeros((rows, d))
    return block


def trajectory_from_blocks(blocks, d, time_of_step, extra_names=()):
    """Concatenate the driver's record blocks into a :class:`Trajectory`."""
    if blocks:
        step = np.concatenate([b["step"][:r] for b, r in blocks])
        vectors = np.concatenate([b["vectors"][:r] for b, r in blocks])
        losses = np.concatenate([b["losses"][:r] for b, r in blocks])
        extra = {name: readonly(np.concatenate([b[name][:r] for b, r in blocks])) for name in extra_names}
    else:
        step = np.zeros(0, dtype=np.int64)
        vectors = np.zeros((0, N_REC_VECTORS, d))
        losses = np.zeros((0, 2))
        extra = {name: readonly(np.zeros((0, d))) for name in extra_names}
    return Trajectory(
        step=readonly(step, np.int64), time=readonly(time_of_step(step), np.float64),
        theta=readonly(vectors[:, 0]), w_plus=readonly(vectors[:, 1]), w_minus=readonly(vectors[:, 2]),
        delta=readonly(vectors[:, 3]), train_loss=readonly(losses[:, 0]), test_loss=readonly(losses[:, 1]),
        extra=extra)


class ResultMixin:
    """Status helpers and lazy theory predictions for frozen result classes."""

    @property
    def message(self):
        return STATUS_MESSAGES[int(self.status)]

    @property
    def status_name(self):
        return status_name(self.status)

    @property
    def converged(self):
        return self.status_name == "converged"

    def prediction(self):
        """Theorem 1 (flows) / Theorem 2 (MGD, SMGD) for this run, computed on request and cached.

        ``predicted_theta`` is the Bregman projection of ``theta0_tilde`` onto the interpolators for
        ψ at scale ``delta_inf``; ``theta_gf_delta_inf`` the same with θ̃0 = 0 (gradient flow from
        ``u0 = √Δ∞, v0 = 0``); the gaps are relative ℓ2 distances of ``theta`` to them.
        """
        cached = self.__dict__.get("_prediction")
        if cached is None:
            from .theory import predict

            cached = predict(self.problem.X, self.problem.y, self.delta_inf, self.theta0_tilde, self.theta)
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

    def to_dict(self):
        """Every field as plain Python / NumPy values (``problem`` and ``trajectory`` left out)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name not in ("problem", "trajectory")}
