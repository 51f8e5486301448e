r"""The network run kind: heavy-ball MGD/SMGD on a :class:`~dlnmomentum.networks.NetworkProblem`.

:func:`dlnmomentum.mgd` dispatches here for a network problem (a ReLU teacher-student net,
a deep linear net). The update is the diagonal kernel's heavy ball in the network's flat
parameters,

.. math:: w_{k+1} = w_k - \gamma\nabla L_{\mathcal B_k}(w_k) + \beta(w_k - w_{k-1}),\qquad w_1 = w_0,

advanced by :func:`dlnmomentum.kernels.networks._net_advance` (its docstring has the network,
the flat layout, backpropagation and the ReLU kink convention relu'(0) = 0).
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..driver import RunStateMixin, chunk_steps_for
from ..kernels import networks as KN
from ..kernels.rng import _seed_state
from ..networks import NetworkProblem
from ..record import Record
from ..results import StatusMixin, Trajectory, norm2, readonly, test_loss_text, trajectory_from_blocks
from ..status import Status
from ..validate import MAX_STEPS, as_array, as_float, as_int, as_seed
from .common import check_replace


class NetworkConfig(NamedTuple):
    """Hyperparameters of one MGD/SMGD run on a network (validated by :func:`make_config`)."""

    gamma: float
    beta: float
    steps: int
    batch_size: int | None = None
    replace: bool = False
    seed: int = 0
    tol: float | None = None
    record_params: bool = False

    @property
    def lam(self):
        """λ = γ/(1-β)² (Proposition 1)."""
        return self.gamma / (1.0 - self.beta) ** 2

    @property
    def eps(self):
        """MGF time step ε = γ/(1-β) (Proposition 1)."""
        return self.gamma / (1.0 - self.beta)

    @property
    def kind(self):
        return "network-mgd" if self.batch_size is None else "network-smgd"


@dataclass(frozen=True, eq=False)
class NetworkResult(StatusMixin):
    """Outcome of an MGD/SMGD run on a network.

    ``params`` are the final parameters :math:`w_{k+1}` (``k = steps_done``; the last finite
    iterate of a diverged run), ``params0`` the initial ones, in the flat layout of
    :mod:`dlnmomentum.kernels.networks`; ``train_loss``/``test_loss`` are L at ``params``.
    ``trajectory`` (when recorded) has ``step``, ``time`` (= kε), ``train_loss``, ``test_loss``
    and, with ``record_params``, ``extra["params"]``.
    """

    kind: str
    config: NetworkConfig
    status: Status
    steps_done: int
    gamma: float
    beta: float
    lam: float
    eps: float
    params: np.ndarray
    params0: np.ndarray
    train_loss: float
    test_loss: float
    param_norm: float
    trajectory: Trajectory | None = None
    problem: NetworkProblem | None = None

    def summary(self):
        lines = [
            f"{self.kind.upper()}  gamma={self.gamma:g}  beta={self.beta:g}  lambda={self.lam:g}  eps={self.eps:g}",
            f"status       : {self.status_name} ({self.message}) after {self.steps_done} steps",
            f"train loss   : {self.train_loss:.6e}",
            f"test loss    : {test_loss_text(self.test_loss)}",
            f"|params|     : {self.param_norm:.6g} ({self.params.shape[0]} parameters)",
        ]
        if self.trajectory is not None:
            lines.append(f"recorded     : {len(self.trajectory)} rows")
        return "\n".join(lines)


def check_network_problem(problem):
    if not isinstance(problem, NetworkProblem):
        raise TypeError("problem must be a dlnmomentum.NetworkProblem (see teacher_student, deep_linear), "
                        f"got {type(problem).__name__}")


def make_config(problem, gamma, beta, steps, batch_size=None, replace=False, seed=0, tol=None,
                record_params=False):
    """Validate hyperparameters into a :class:`NetworkConfig` (errors name the parameter and its range)."""
    gamma = as_float("gamma", gamma, low=0.0, low_open=True)
    beta = as_float("beta", beta, low=0.0, high=1.0, high_open=True)
    steps = as_int("steps", steps, low=0, high=MAX_STEPS)
    if batch_size is not None:
        batch_size = as_int("batch_size", batch_size, low=1, high=problem.n)
        if batch_size == problem.n and not replace:
            batch_size = None  # every sample in every batch: full-batch MGD
    replace = check_replace(replace, batch_size)  # (was ignored without a batch_size)
    seed = as_seed("seed", seed)
    tol = as_float("tol", tol, low=0.0, allow_none=True)
    if not isinstance(record_params, (bool, np.bool_)):
        raise TypeError(f"record_params must be a bool, got {record_params!r}")
    return NetworkConfig(gamma, beta, steps, batch_size, bool(replace), seed, tol, bool(record_params))


def step_flops(problem, batch_size=None):
    """Floating-point operations of one update of ``problem``'s net (chunk sizing, progress, sweep chunks).

    The one cost rule of network runs: backpropagation costs ~6 per parameter and sample of the batch
    (+4 per parameter for the update), the product form of linear nets without biases
    (:func:`dlnmomentum.kernels.linear_networks.is_product_net`) ~10 per parameter whatever the samples.
    """
    widths, _, b_off = problem.layout
    if KN.is_product_net(problem.relu, b_off, widths):
        return 10.0 * problem.n_params
    return (6.0 * (batch_size or problem.n) + 4.0) * problem.n_params


class NetworkRun(RunStateMixin):
    """State of one network run, advanced chunk by chunk (driver protocol, see :mod:`dlnmomentum.driver`).

    For stores, the initial parameters are ``u0`` (the flat ``w_0``); ``v0`` is a zero vector of
    the same length, kept only because run stores hold both arrays.
    """

    family = "network"

    def __init__(self, problem, config, w0, schedule=None):
        self.problem = problem
        self.config = config
        self.w0 = np.array(w0, dtype=np.float64)
        self.u0, self.v0 = self.w0, np.zeros_like(self.w0)
        self.total = config.steps
        self.params = self.w0.copy()
        self.params_prev = self.w0.copy()  # w_1 = w_0
        self.counters = np.zeros(1, dtype=np.int64)
        self.rng_state = np.zeros(4, dtype=np.uint64)
        _seed_state(config.seed, 0, self.rng_state)
        self.perm = np.arange(problem.n, dtype=np.int64)
        # (sized by the gradient the kernel takes: a backpropagation cost for the product form made chunks of the
        # paper's deep linear net 24 steps long, and Python's work per chunk 3-5x the kernel's)
        self.chunk_steps = chunk_steps_for(step_flops(problem, config.batch_size))
        self.schedule = np.zeros(0, dtype=np.int64) if schedule is None else schedule
        self.cursor = np.zeros(1, dtype=np.int64)

    @property
    def done(self):
        return int(self.counters[0])

    def step_flops(self):
        """Operations of one update (:func:`step_flops`)."""
        return step_flops(self.problem, self.config.batch_size)

    @property
    def kind(self):
        return self.config.kind

    def description(self, arrays=False):
        """Hyperparameters and schedule as a JSON-serialisable dict (``arrays``: the schedule as its int64
        array, for stores), as :meth:`dlnmomentum.runs.mgd.MGDRun.description`."""
        return {"family": self.family, "kind": self.kind, "config": self.config._asdict(),
                "schedule": self.schedule if arrays else self.schedule.tolist()}

    @classmethod
    def rebuild(cls, problem, description, u0, v0=None):
        """A fresh run equal to the one that produced ``description`` (``u0``: the initial parameters)."""
        config = NetworkConfig(**description["config"])
        return cls(problem, config, np.asarray(u0, dtype=float),
                   np.asarray(description["schedule"], dtype=np.int64))

    def time_of_step(self, step):
        return np.asarray(step, dtype=np.float64) * self.config.eps

    def new_block(self, rows):
        block = {"step": np.zeros(rows, dtype=np.int64), "losses": np.zeros((rows, 2))}
        if self.config.record_params:
            block["params"] = np.zeros((rows, self.problem.n_params))
        return block

    def advance(self, n_steps, block, offset):
        p, c = self.problem, self.config
        widths, w_off, b_off = p.layout
        rec_params = block.get("params")
        if rec_params is None:
            rec_params = np.zeros((block["step"].shape[0], 0))
        return KN._net_advance(
            p.X, p.y, p.X_test, p.y_test, widths, w_off, b_off, p.relu,
            c.gamma, c.beta, -1.0 if c.tol is None else c.tol,
            self.rng_state, self.perm, c.batch_size or 0, c.replace,
            self.params, self.params_prev, self.counters, n_steps,
            self.schedule, self.cursor, offset, block["step"], block["losses"], rec_params)

    def state_arrays(self):
        """Every array needed to continue this run bit for bit."""
        return {"params": self.params, "params_prev": self.params_prev, "counters": self.counters,
                "rng_state": self.rng_state, "perm": self.perm, "cursor": self.cursor}

    def finish(self, status, blocks=()):
        c = self.config
        trajectory = None
        if self.has_records():
            names = ("params",) if c.record_params else ()
            blocks = list(blocks) or [(self.new_block(0), 0)]
            trajectory = trajectory_from_blocks(blocks, self.problem.n_params, self.time_of_step, names)
        # (norm2: the plain norm's bits, scaled where the sum of squares overflows (teacher_student(init_scale=1e200):
        # finite parameters, |params| = inf) or underflows)
        norm = norm2(self.params)
        return NetworkResult(
            kind=c.kind, config=c, status=int(status), steps_done=self.done,
            gamma=c.gamma, beta=c.beta, lam=c.lam, eps=c.eps,
            params=readonly(self.params), params0=readonly(self.w0),
            train_loss=self.problem.train_loss(self.params), test_loss=self.problem.test_loss(self.params),
            param_norm=norm, trajectory=trajectory, problem=self.problem)


def prepare_network(problem, gamma, beta, *, steps, w0=None, batch_size=None, replace=False, seed=0, tol=None,
                    record=None, record_params=False):
    """Validate the arguments of :func:`dlnmomentum.mgd` for a network problem and build its run."""
    check_network_problem(problem)
    if record is not None and not isinstance(record, Record):
        raise TypeError(f"record must be a dlnmomentum.Record or None, got {type(record).__name__}")
    config = make_config(problem, gamma, beta, steps, batch_size, replace, seed, tol, record_params)
    w0 = problem.params0 if w0 is None else as_array("w0", w0, ndim=1, shape=(problem.n_params,))
    schedule = record.step_schedule(config.steps) if record is not None else None
    return NetworkRun(problem, config, w0, schedule)


#: The per-point fields of a network sweep: name -> (dtype, description); filled by :func:`point_fields`.
POINT_FIELDS = {
    "test_loss": (np.float64, "test loss of the final parameters (NaN without a test set)"),
    "train_loss": (np.float64, "train loss L(w) = ||f_w(X) - y||^2/(2n) of the final parameters"),
    "param_norm": (np.float64, "||w||_2 of the final parameters"),
    "status": (np.int8, "run status: " + ", ".join(f"{int(s)} {s.label}" for s in Status if s)
               + " (dlnmomentum.Status)"),
    "steps_done": (np.int64, "updates done"),
    "lam": (np.float64, "lambda = gamma/(1-beta)^2 (Proposition 1)"),
}


def point_fields(result):
    """The sweep-point fields of a :class:`NetworkResult` (the very values of the single run)."""
    return {name: getattr(result, name) for name in POINT_FIELDS}
