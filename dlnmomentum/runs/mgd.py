r"""The MGD/SMGD run kind: its configuration, run object, result and derived fields.

Heavy-ball momentum gradient descent (MGD) and its stochastic version (SMGD). Users call
:func:`dlnmomentum.mgd` (:mod:`dlnmomentum.api`), which validates its arguments with
:func:`prepare_mgd` into an :class:`MGDRun` and hands that to the driver or to a store.
The compiled kernel is :func:`dlnmomentum.kernels.mgd._mgd_advance`; its docstring states
the update rule (paper, Appendix B, eq. (w_mgd); Section 4, eq. (SMGD:diag)).
:func:`derived_fields` turns a kernel state into Theorem 2's quantities, for single runs
(:meth:`MGDRun.finish`) and sweep points alike.
"""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..driver import RunStateMixin, chunk_steps_for
from ..kernels import layout as KL
from ..kernels import mgd as K
from ..kernels.rng import _fill_batches, _seed_state
from ..problem import Problem
from ..results import (
    DIVERGED_LIMIT_TEXT,
    ResultMixin,
    Trajectory,
    new_record_block,
    norm2,
    readonly,
    test_loss_text,
    trajectory_from_blocks,
)
from ..status import Status
from ..validate import MAX_STEPS, ParameterValueError, as_bool, as_float, as_int, as_seed, check_data_scale
from .common import (
    check_gradient_form,
    check_problem,
    check_record,
    check_replace,
    gradient_cost,
    gradient_mode,
    initial_weights,
    uses_hessian,
)


class MGDConfig(NamedTuple):
    """Hyperparameters of one MGD/SMGD run (validated by :func:`mgd`)."""

    gamma: float
    beta: float
    steps: int
    batch_size: int | None = None
    replace: bool = False
    seed: int = 0
    tol: float | None = None
    gradient: str = "auto"

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
        return "mgd" if self.batch_size is None else "smgd"


@dataclass(frozen=True, eq=False)
class MGDResult(ResultMixin):
    """Outcome of an MGD/SMGD run (arrays are read-only, shape ``(d,)`` unless noted).

    ``steps_done`` counts updates: the final iterate is :math:`w_{k+1}` in the
    paper's indexing with ``k = steps_done`` (:math:`w_1 = w_0` is not an update).
    ``s_plus``/``s_minus`` are the sums of Lemma 4, ``mirror`` the variable
    :math:`G_N = \\gamma\\sum_{m\\le N}\\sum_{k\\le m}\\beta^{m-k}\\nabla L_{B_k}(\\theta_k)` of
    eq. (MGDmirror), ``delta_inf = |w_+ w_-|`` at the last iterate and
    ``theta0_tilde`` the perturbed initialisation of Theorem 2. Crossing steps are
    ``-1`` where a coordinate never changed sign.
    """

    kind: str
    config: MGDConfig
    status: Status
    steps_done: int
    gamma: float
    beta: float
    lam: float
    eps: float
    theta: np.ndarray
    u: np.ndarray
    v: np.ndarray
    w_plus: np.ndarray
    w_minus: np.ndarray
    w_plus0: np.ndarray
    w_minus0: np.ndarray
    delta0: np.ndarray
    delta_inf: np.ndarray
    s_plus: np.ndarray
    s_minus: np.ndarray
    theta0_tilde: np.ndarray
    mirror: np.ndarray
    crossings_plus: np.ndarray
    crossings_minus: np.ndarray
    first_crossing_plus: np.ndarray
    first_crossing_minus: np.ndarray
    last_crossing_plus: np.ndarray
    last_crossing_minus: np.ndarray
    min_delta: np.ndarray
    train_loss: float
    test_loss: float
    l1_norm: float
    trajectory: Trajectory | None = None
    problem: Problem | None = None

    @property
    def crossed(self):
        """True when some coordinate of w₊ or w₋ changed sign."""
        return bool(self.crossings_plus.any() or self.crossings_minus.any())

    def summary(self):
        with np.errstate(over="ignore", invalid="ignore"):  # a diverged run's norms are inf: printed as such
            return self._summary()

    def _summary(self):
        lines = [
            f"{self.kind.upper()}  gamma={self.gamma:g}  beta={self.beta:g}  lambda={self.lam:g}  eps={self.eps:g}",
            f"status       : {self.status_name} ({self.message}) after {self.steps_done} steps",
            f"train loss   : {self.train_loss:.6e}",
            f"test loss    : {test_loss_text(self.test_loss)}",
            f"l1 norm      : {self.l1_norm:.6g}",
            f"|Delta_0|    : {norm2(self.delta0):.6e}",
            *self._theorem2_lines(),
            f"sign changes : w+ {int(self.crossings_plus.sum())}, w- {int(self.crossings_minus.sum())}"
            f" (coordinates: {int((self.crossings_plus > 0).sum())}, {int((self.crossings_minus > 0).sum())})",
        ]
        if self.trajectory is not None:
            lines.append(f"recorded     : {len(self.trajectory)} rows")
        lines += self._why_not_finite()
        return "\n".join(lines)

    def _theorem2_lines(self):
        """Delta_inf, S+- and theta0~: Theorem 2's quantities of the limit of a run that converges. A diverged run
        has no limit: its last iterate gave inf or meaningless values (S+ = -1.4e58), so they are not printed as
        if they were results; the fields keep them."""
        min_delta = f"min_k min_i Delta: {self.min_delta.min():.3e}"
        if self.status == Status.DIVERGED:
            na = DIVERGED_LIMIT_TEXT
            return [f"|Delta_inf|  : {na}   {min_delta}", f"S+- (mean)   : {na}", f"|theta0~|max : {na}"]
        return [f"|Delta_inf|  : {norm2(self.delta_inf):.6e}   {min_delta}",
                f"S+ (mean)    : {self.s_plus.mean():.6e}   S- (mean): {self.s_minus.mean():.6e}",
                f"|theta0~|max : {np.abs(self.theta0_tilde).max():.3e}"]

    def _why_not_finite(self):
        """Lines that say why a value is not finite or not shown (never a silent NaN or inf)."""
        if self.status == Status.DIVERGED:  # (its status says why the losses are inf)
            return [f"note         : Delta_inf, S+-, theta0~ describe the limit of a converging run (Theorem 2); "
                    f"this run diverged after {self.steps_done} steps, so they have none (the result's fields "
                    "hold the values at its last iterate)"]
        out = []
        if np.isinf(self.train_loss) or np.isinf(self.test_loss):  # (no test set: a NaN test loss, as documented)
            out.append(f"note         : a loss overflows float64 at this theta (max |theta| = "
                       f"{np.abs(self.theta).max():.3e}, max |w| = "
                       f"{max(np.abs(self.w_plus).max(), np.abs(self.w_minus).max()):.3e}): the run is diverging")
        out += self._theta0_tilde_notes("note         ")
        undefined = np.flatnonzero(np.isnan(self.s_plus) | np.isnan(self.s_minus))
        if undefined.size:
            out.append(f"note         : S+-, theta0~ undefined at coordinates {undefined[:5].tolist()}: an iterate of "
                       "w+ or w- was exactly 0 (Lemma 4's sums divide by w)")
        return out


def make_config(problem, gamma, beta, steps, batch_size=None, replace=False, seed=0, tol=None,
                gradient="auto"):
    """Validate hyperparameters into an :class:`MGDConfig`."""
    gamma = as_float("gamma", gamma, low=0.0, low_open=True)
    beta = as_float("beta", beta, low=0.0, high=1.0, high_open=True)
    steps = as_int("steps", steps, low=0, high=MAX_STEPS)
    if batch_size is not None:
        batch_size = as_int("batch_size", batch_size, low=1, high=problem.n)
        if batch_size == problem.n and not replace:
            batch_size = None  # every sample in every batch: full-batch MGD
    replace = check_replace(replace, batch_size)
    seed = as_seed("seed", seed)
    tol = as_float("tol", tol, low=0.0, allow_none=True)
    check_gradient_form(gradient)
    if batch_size is not None and gradient != "auto":
        raise ParameterValueError(f"gradient={gradient!r} chooses the form of the full-batch gradient; an SMGD run "
                                  f"(batch_size={batch_size}) computes each batch's from its samples: leave "
                                  "gradient='auto'", "gradient=", "batch_size")
    check_data_scale(problem)  # X * 1e200: refused by name, as flows do, not a run that "diverges"
    return MGDConfig(gamma, beta, steps, batch_size, bool(replace), seed, tol, gradient)


class MGDRun(RunStateMixin):
    """State of one MGD/SMGD run, advanced chunk by chunk (see :mod:`dlnmomentum.driver`).

    Besides the driver protocol, a run describes itself for stores:
    :meth:`description` (JSON-serialisable hyperparameters and record schedule;
    the initial weights are the arrays ``u0``/``v0``) and :meth:`rebuild` creates
    the same fresh run from a problem, that description and ``u0``/``v0``.
    """

    family = "mgd"

    def __init__(self, problem, config, u0, v0, schedule=None):
        self.problem = problem
        self.config = config
        self.u0, self.v0 = u0, v0
        self.w_plus0 = u0 + v0
        self.w_minus0 = u0 - v0
        n, d = problem.n, problem.d
        self.total = config.steps
        self.fstate, self.istate = initial_state(self.w_plus0, self.w_minus0)
        self.counters = np.zeros(1, dtype=np.int64)
        self.rng_state = np.zeros(4, dtype=np.uint64)
        _seed_state(config.seed, 0, self.rng_state)
        self.perm = np.arange(n, dtype=np.int64)
        self.mode = gradient_mode(config.gradient, n, d, minibatch=config.batch_size is not None)
        self.chunk_steps = chunk_steps_for(gradient_cost(self.mode, n, d, config.batch_size) + 40 * d)
        self.schedule = np.zeros(0, dtype=np.int64) if schedule is None else schedule
        self.cursor = np.zeros(1, dtype=np.int64)

    @property
    def done(self):
        return int(self.counters[0])

    @property
    def uses_hessian(self):
        """Whether the kernel takes the gradient as Hθ - b: only then is H = XᵀX/n formed and stored (d × d; the
        data and minibatch forms, for d > 2n, never need it)."""
        return uses_hessian(self.mode)

    @property
    def kind(self):
        return self.config.kind

    def description(self, arrays=False):
        """Hyperparameters and schedule as a JSON-serialisable dict (``arrays``: the schedule as its int64
        array, for stores: no Python list of millions of ints)."""
        return {"family": self.family, "kind": self.kind, "config": self.config._asdict(),
                "schedule": self.schedule if arrays else self.schedule.tolist()}

    @classmethod
    def rebuild(cls, problem, description, u0, v0):
        """A fresh run equal to the one that produced ``description``."""
        config = MGDConfig(**description["config"])
        return cls(problem, config, np.asarray(u0, dtype=float), np.asarray(v0, dtype=float),
                   np.asarray(description["schedule"], dtype=np.int64))

    def time_of_step(self, step):
        return np.asarray(step, dtype=np.float64) * self.config.eps

    def new_block(self, rows):
        return new_record_block(rows, self.problem.d)

    def advance(self, n_steps, block, offset):
        p, c = self.problem, self.config
        tol = -1.0 if c.tol is None else c.tol
        X, XT, H, b = p.kernel_arrays(hessian=self.uses_hessian)
        return K._mgd_advance(
            X, XT, p.y, H, b, p.X_test, p.y_test,
            c.gamma, c.beta, self.mode, tol,
            self.rng_state, self.perm, c.batch_size or 0, c.replace,
            self.fstate, self.istate, self.counters, n_steps,
            self.schedule, self.cursor, offset, block["step"], block["vectors"], block["losses"])

    # -- checkpoints ---------------------------------------------------------
    def state_arrays(self):
        """Every array needed to continue this run bit for bit."""
        return {"fstate": self.fstate, "istate": self.istate, "counters": self.counters,
                "rng_state": self.rng_state, "perm": self.perm, "cursor": self.cursor}

    # -- result --------------------------------------------------------------
    def finish(self, status, blocks=()):
        c = self.config
        f = derived_fields(self.fstate, self.istate, c.beta, self.w_plus0, self.w_minus0)
        i = self.istate
        wp, wm, theta = f["w_plus"], f["w_minus"], f["theta"]
        trajectory = None
        if self.has_records():
            trajectory = trajectory_from_blocks(list(blocks), self.problem.d, self.time_of_step)
        return MGDResult(
            kind=c.kind, config=c, status=int(status), steps_done=self.done,
            gamma=c.gamma, beta=c.beta, lam=c.lam, eps=c.eps,
            theta=readonly(theta), u=readonly(0.5 * (wp + wm)), v=readonly(0.5 * (wp - wm)),
            w_plus=readonly(wp), w_minus=readonly(wm),
            w_plus0=readonly(self.w_plus0), w_minus0=readonly(self.w_minus0),
            delta0=readonly(np.abs(self.w_plus0 * self.w_minus0)), delta_inf=readonly(f["delta_inf"]),
            s_plus=readonly(f["s_plus"]), s_minus=readonly(f["s_minus"]),
            theta0_tilde=readonly(f["theta0_tilde"]), mirror=readonly(f["mirror"]),
            crossings_plus=readonly(i[KL.CROSS_PLUS]), crossings_minus=readonly(i[KL.CROSS_MINUS]),
            first_crossing_plus=readonly(i[KL.FIRST_CROSS_PLUS]),
            first_crossing_minus=readonly(i[KL.FIRST_CROSS_MINUS]),
            last_crossing_plus=readonly(i[KL.LAST_CROSS_PLUS]), last_crossing_minus=readonly(i[KL.LAST_CROSS_MINUS]),
            min_delta=readonly(self.fstate[KL.MIN_DELTA]),
            train_loss=self.problem.train_loss(theta), test_loss=self.problem.test_loss(theta),
            l1_norm=float(np.abs(theta).sum()), trajectory=trajectory, problem=self.problem)


def derived_fields(fstate, istate, beta, w_plus0, w_minus0):
    r"""Theorem 2's quantities from an MGD/SMGD kernel state (``fstate``/``istate`` in the kernels' layout).

    With :math:`\Sigma_\pm` the kernel's compensated sums (Lemma 4, telescoped),
    :math:`S_\pm = \Sigma_\pm/(1-\beta) - \ln|w_\pm/w_{\pm,0}|`,
    :math:`\Delta_\infty = |w_+ w_-|` at the last iterate and
    :math:`\tilde\theta_0 = (w_{+,0}^2 e^{-2S_+} - w_{-,0}^2 e^{-2S_-})/4`; ``mirror`` is the
    variable of eq. (MGDmirror). Used by :meth:`MGDRun.finish` and by every sweep point, so a
    sweep point and the single run agree bit for bit. A diverged state gives inf/NaN entries
    without warnings (its status says why).

    The states of many runs at once: ``fstate``/``istate`` with leading axes ``(..., rows, d)`` and ``beta`` an
    array of the leading shape; the fields then have those leading axes (``crossed`` a bool array). Every
    operation is element-wise (a sum only over the integer crossing counts), so each run's fields are the bits
    of its single run: a sweep wave takes one call instead of one per point (the per-point calls were most of
    the time of a sweep of short runs).
    """
    f = fstate
    wp, wm = f[..., KL.W_PLUS, :].copy(), f[..., KL.W_MINUS, :].copy()
    theta = 0.25 * (wp * wp - wm * wm)
    one_minus_beta = 1.0 - np.asarray(beta, dtype=np.float64)[..., None]
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        s_plus = (f[..., KL.S_SUM_PLUS, :] + f[..., KL.S_COMP_PLUS, :]) / one_minus_beta - np.log(np.abs(wp / w_plus0))
        s_minus = ((f[..., KL.S_SUM_MINUS, :] + f[..., KL.S_COMP_MINUS, :]) / one_minus_beta
                   - np.log(np.abs(wm / w_minus0)))
        theta0_tilde = 0.25 * (w_plus0**2 * np.exp(-2 * s_plus) - w_minus0**2 * np.exp(-2 * s_minus))
    crossed = istate[..., KL.CROSS_PLUS, :].any(axis=-1) | istate[..., KL.CROSS_MINUS, :].any(axis=-1)
    return {"w_plus": wp, "w_minus": wm, "theta": theta, "delta_inf": np.abs(wp * wm), "s_plus": s_plus,
            "s_minus": s_minus, "theta0_tilde": theta0_tilde,
            "mirror": f[..., KL.MIRROR_SUM, :] + f[..., KL.MIRROR_COMP, :],
            "crossed": bool(crossed) if crossed.ndim == 0 else crossed}


def initial_state(w_plus0, w_minus0, count=None):
    """The kernel state ``(fstate, istate)`` of fresh runs from (w₊⁰, w₋⁰), in ``kernels.layout``'s rows.

    w± and their previous values start at w±⁰ (``w_1 = w_0``), min Δ at Δ0, the sums at 0, crossing steps
    at -1. With ``count``, a leading axis of that many identical runs (the GPU engine's arrays).
    """
    lead = () if count is None else (int(count),)
    d = w_plus0.shape[0]
    fstate = np.zeros(lead + (KL.N_FLOAT_ROWS, d))
    fstate[..., KL.W_PLUS, :] = w_plus0
    fstate[..., KL.W_MINUS, :] = w_minus0
    fstate[..., KL.W_PLUS_PREV, :] = w_plus0
    fstate[..., KL.W_MINUS_PREV, :] = w_minus0
    fstate[..., KL.MIN_DELTA, :] = np.abs(w_plus0 * w_minus0)
    istate = np.zeros(lead + (KL.N_INT_ROWS, d), dtype=np.int64)
    istate[..., KL.FIRST_CROSS_PLUS:, :] = -1
    return fstate, istate


def prepare_mgd(problem, gamma, beta, *, steps, alpha=0.01, u0=None, v0=None, batch_size=None,
                replace=False, seed=0, tol=None, record=None, gradient="auto"):
    """Validate the arguments of :func:`mgd` and build its run object."""
    check_problem(problem)
    check_record(record)
    config = make_config(problem, gamma, beta, steps, batch_size, replace, seed, tol, gradient)
    u0, v0 = initial_weights(problem.d, alpha, u0, v0)
    schedule = record.step_schedule(config.steps) if record is not None else None
    return MGDRun(problem, config, u0, v0, schedule)


def batch_indices(n, batch_size, steps, *, seed=0, replace=False):
    """The batch sequence an SMGD run with these arguments uses, shape ``(steps, batch_size)``.

    Draws from the same explicit random state as the kernel, for checking
    against independent implementations.

    Parameters
    ----------
    n : int
        Samples of the problem (>= 1).
    batch_size : int
        Samples per step, in [1, n].
    steps : int
        Steps (rows), >= 0.
    seed : int
        The run's batch seed, in [0, 2**63 - 1].
    replace : bool
        Draw each batch with replacement (``smgd(..., replace=True)``); otherwise ``batch_size`` distinct
        samples, uniformly. A run with ``batch_size = n`` and ``replace=False`` takes every sample at every step:
        it is full-batch MGD (the gradient summed in index order, bit for bit ``mgd``), so it draws none of these
        permutations.
    """
    n = as_int("n", n, low=1)
    batch_size = as_int("batch_size", batch_size, low=1, high=n)
    steps = as_int("steps", steps, low=0, high=MAX_STEPS)
    seed = as_seed("seed", seed)
    state = np.zeros(4, dtype=np.uint64)
    _seed_state(seed, 0, state)
    out = np.zeros((steps, batch_size), dtype=np.int64)
    _fill_batches(state, np.arange(n, dtype=np.int64), as_bool("replace", replace), out)
    return out


