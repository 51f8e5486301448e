r"""The flow run kind: MGF(λ) and gradient flow integrated by fixed-step RK4 (configuration, run, result).

The compiled kernel is :func:`dlnmomentum.kernels.flow_run._flow_advance` with the run's
stepping scheme: classic RK4 (:mod:`dlnmomentum.kernels.flow`, whose module docstring states the
integrated system (Appendix B, eq. (w_mgf)), the extra integral components and the crossing
search) or, with ``scheme="exp-rk4"`` (``FlowConfig.scheme``; chosen by ``"auto"`` for small λ),
the exponential RK4 of :mod:`dlnmomentum.kernels.flow_exp`, which integrates the fast mode -1/λ
exactly, on the same state, grid and crossing search.

Integrals and derived quantities
--------------------------------
Per coordinate the run carries :math:`J_\pm = \int_0^t (\dot w_\pm/w_\pm)^2`,
:math:`K_\pm = \int_0^t (\dot w_\pm/w_\pm)^2 e^{-(t-s)/\lambda}\,ds`,
:math:`P = \int_0^t \nabla L(\theta_s)\,ds`, :math:`Q = \int_0^t \nabla L(\theta_s)e^{-(t-s)/\lambda}\,ds`
and :math:`G_2 = \int_0^t \nabla L(\theta_s)^2\,ds`. While a coordinate has not crossed zero,
integrating eq. (g_ode) of Appendix C.2 gives (eq. (w-formula-new), here with any initial
velocity, :math:`\dot g_{\pm,0} = \dot w_{\pm,0}/w_{\pm,0}`)

.. math::

    \ln\frac{w_{\pm,t}}{w_{\pm,0}} = \lambda\dot g_{\pm,0}(1 - e^{-t/\lambda})
        - \lambda(J_\pm - K_\pm) \mp (P - Q),

hence :math:`\ln\Delta_t - \ln\Delta_0 = \lambda(\dot g_{+,0} + \dot g_{-,0})(1 - e^{-t/\lambda})
- \lambda[(J_+ - K_+) + (J_- - K_-)]` (eq. (delta-formula-new)).

The implicit-bias quantities of Theorem 1 are reported two ways, both evaluated at the end
of the run (the proxy for :math:`t = \infty`):

* through :math:`\alpha_{\pm} = w_{\pm}\exp(\pm P)` (proof of Theorem 1, valid with or
  without crossings): :math:`I_\pm = \ln|w_{\pm,0}| - \ln|\alpha_\pm|`,
  :math:`\Delta_\infty = |\alpha_+\alpha_-| = \Delta_0 e^{-(I_+ + I_-)}`,
  :math:`\tilde\theta_0 = (\alpha_+^2 - \alpha_-^2)/4`;
* through Corollary 2 (only for coordinates that never crossed zero):
  :math:`I_\pm = \lambda(J_\pm - \dot g_{\pm,0})` (Corollary 2 has :math:`\dot g_0 = 0`).

The two agree as :math:`t \to \infty` (their difference is
:math:`-\lambda K_\pm \mp Q + \lambda\dot g_{\pm,0}e^{-t/\lambda}`); ``i_gap`` reports it. The
small-λ approximation of Appendix C.4 is
:math:`\Delta_\infty \approx \Delta_0\exp(-2\lambda\int_0^\infty\nabla L(\theta_s)^2ds)`
(``delta_inf_small_lam``; the appendix's derivation, :math:`J_+ + J_- \approx 2G_2`; the
main text's display has :math:`\Delta_\infty^2` and :math:`\Delta_0^2` on the two sides).

The step-size policy (stability region, default step, refined start) is
:mod:`dlnmomentum.runs.stepping`; users call :func:`dlnmomentum.mgf`, :func:`dlnmomentum.gf`
and :func:`dlnmomentum.mgf_from_mgd` (:mod:`dlnmomentum.api`), which build a :class:`FlowRun`
with :func:`prepare_flow` / :func:`.flow_from_mgd.prepare_mgf_from_mgd`.
"""

import math
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ..driver import RunStateMixin, chunk_steps_for
from ..kernels import flow as K
from ..kernels import flow_run as KR
from ..kernels.flow_rodas import H_MIN_REL
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
from ..status import DIVERGED, Status
from ..validate import ParameterValueError, as_float, as_int, check_data_scale
from .common import (
    as_bounded_vector,
    check_gradient_form,
    check_problem,
    check_record,
    gradient_cost,
    gradient_mode,
    initial_weights,
)
from .stepping import (
    ADAPTIVE_SCHEMES,
    DEFAULT_MAX_CROSSINGS,
    GRID_SCHEMES,
    as_lam,
    check_grid,
    check_scheme,
    choose_scheme,
    default_step,
    max_stable_step,
    start_refinement,
    stiffness_at,
    stiffness_estimate,
    uniform_grid,
    warn_large_grid,
)


class FlowConfig(NamedTuple):
    """Settings of one MGF(λ) / gradient-flow run (validated by :func:`mgf` / :func:`gf`).

    ``h`` is the grid step actually used (``t_max/n_steps``); the first ``start_steps``
    grid steps are each made of ``start_substeps`` RK4 steps. ``scheme`` is the stepper used,
    ``"rk4"`` (:mod:`dlnmomentum.kernels.flow`), ``"exp-rk4"`` (:mod:`dlnmomentum.kernels.flow_exp`) or
    ``"rodas"`` (:mod:`dlnmomentum.kernels.flow_rodas`) or, for gradient flow, ``"ndf"``
    (:mod:`dlnmomentum.kernels.flow_ndf`), adaptive: then ``h`` is 0 (no grid), ``n_steps`` the budget
    of accepted steps and ``rtol``/``atol`` its tolerances (:mod:`dlnmomentum.runs.flow_adaptive`),
    never ``"auto"`` (resolved when the run is made; stores written before it existed read as ``"rk4"``).
    """

    lam: float
    t_max: float
    h: float
    n_steps: int
    tol: float | None = None
    gradient: str = "auto"
    start_steps: int = 0
    start_substeps: int = 1
    max_crossings: int = DEFAULT_MAX_CROSSINGS
    kappa: float = float("nan")
    scheme: str = "rk4"
    rtol: float | None = None
    atol: float | None = None
    #: :func:`mgf_from_mgd`'s grid: MGD's step ε = γ/(1-β) cut into ``mgd_substeps`` steps h (0: not such a grid).
    #: A row's time is then (k // substeps)·ε + (k % substeps)·h, so that the row of MGD step j is at j·ε, the bits
    #: of MGD's own row time (k·h differed from it in the last bit for about a fifth of the rows).
    mgd_eps: float = 0.0
    mgd_substeps: int = 0

    @property
    def kind(self):
        return "gf" if self.lam == 0.0 else "mgf"

    @property
    def start_time(self):
        """End of the refined start, ``start_steps·h``."""
        return self.start_steps * self.h


@dataclass(frozen=True, eq=False)
class FlowResult(ResultMixin):
    r"""Outcome of an MGF(λ) or gradient-flow run (arrays are read-only, shape ``(d,)`` unless noted).

    The run ends at ``t_done = steps_done·h``; quantities "at infinity" are evaluated there.
    ``i_plus, i_minus, delta_inf, theta0_tilde`` come from :math:`\alpha_\pm = w_\pm e^{\pm P}`
    (Theorem 1; valid with crossings), the ``*_cor`` versions from Corollary 2 (NaN for
    coordinates that crossed zero), ``i_gap`` is the largest difference of the two over the
    coordinates where both exist. ``j_*``/``k_*`` are NaN where invalid (after a crossing;
    see ``j_valid_*``). Crossing times are NaN where a coordinate never crossed;
    ``crossing_times`` (sorted), ``crossing_coords`` and ``crossing_signs`` (+1: w₊, -1: w₋)
    list at most ``config.max_crossings`` crossings (``n_crossings`` counts all).
    """

    _THETA0_EXPONENTS = ("i_plus", "i_minus")  # θ̃0 = ¼(w₊₀² e^{-2I₊} - w₋₀² e^{-2I₋}) (ResultMixin)

    kind: str
    config: FlowConfig
    status: Status
    steps_done: int
    t_done: float
    lam: float
    h: float
    theta: np.ndarray
    u: np.ndarray
    v: np.ndarray
    w_plus: np.ndarray
    w_minus: np.ndarray
    w_plus_dot: np.ndarray
    w_minus_dot: np.ndarray
    w_plus0: np.ndarray
    w_minus0: np.ndarray
    w_plus_dot0: np.ndarray
    w_minus_dot0: np.ndarray
    delta0: np.ndarray
    delta: np.ndarray
    alpha_plus: np.ndarray
    alpha_minus: np.ndarray
    i_plus: np.ndarray
    i_minus: np.ndarray
    delta_inf: np.ndarray
    theta0_tilde: np.ndarray
    i_plus_cor: np.ndarray
    i_minus_cor: np.ndarray
    delta_inf_cor: np.ndarray
    theta0_tilde_cor: np.ndarray
    i_gap: float
    delta_inf_small_lam: np.ndarray
    j_plus: np.ndarray
    j_minus: np.ndarray
    k_plus: np.ndarray
    k_minus: np.ndarray
    j_valid_plus: np.ndarray
    j_valid_minus: np.ndarray
    p_integral: np.ndarray
    q_integral: np.ndarray
    grad_sq_integral: np.ndarray
    crossings_plus: np.ndarray
    crossings_minus: np.ndarray
    first_crossing_plus: np.ndarray
    first_crossing_minus: np.ndarray
    last_crossing_plus: np.ndarray
    last_crossing_minus: np.ndarray
    crossing_times: np.ndarray
    crossing_coords: np.ndarray
    crossing_signs: np.ndarray
    n_crossings: int
    delta_stayed_positive: bool
    min_delta: np.ndarray
    max_w2: float
    h_stable: float
    train_loss: float
    test_loss: float
    l1_norm: float
    trajectory: Trajectory | None = None
    problem: object = None
    rejected_steps: int = 0
    rhs_evaluations: int = 0
    factorizations: int = 0

    @property
    def crossed(self):
        """True when some coordinate of w₊ or w₋ crossed zero."""
        return not self.delta_stayed_positive

    @property
    def crossings_truncated(self):
        """True when the crossing-time log is shorter than the number of crossings."""
        return self.n_crossings > len(self.crossing_times)

    def w_formula(self):
        r"""w± rebuilt from the integrals by eq. (w-formula-new) (NaN for coordinates that crossed).

        :math:`w_{\pm,0}\exp(\lambda\dot g_{\pm,0}(1 - e^{-t/\lambda}) - \lambda(J_\pm - K_\pm) \mp (P - Q))`;
        for gradient flow :math:`w_{\pm,0}e^{\mp P}`.
        """
        out = []
        for sign, w0, wd0, j, k in ((1.0, self.w_plus0, self.w_plus_dot0, self.j_plus, self.k_plus),
                                    (-1.0, self.w_minus0, self.w_minus_dot0, self.j_minus, self.k_minus)):
            with np.errstate(over="ignore", invalid="ignore"):
                if self.lam == 0.0:
                    expo = -sign * self.p_integral + 0.0 * j
                else:
                    decay = -math.expm1(-self.t_done / self.lam)
                    expo = (self.lam * (wd0 / w0) * decay - self.lam * (j - k)
                            - sign * (self.p_integral - self.q_integral))
                out.append(w0 * np.exp(expo))
        return tuple(out)

    def _cor2_text(self):
        """|Δ∞| by Corollary 2's route, or why it has none: the corollary holds for coordinates that never crossed
        zero, and the route is NaN at the others (a bare ``nan`` said nothing)."""
        crossed = int(np.isnan(self.delta_inf_cor).sum())
        if crossed:
            return f"n/a, {crossed} of {self.delta_inf_cor.size} coordinates crossed zero"
        return f"{norm2(self.delta_inf_cor):.6e}"

    def _small_lam_text(self):
        """|Δ∞| by the small-λ route Δ0·exp(-2λG₂), or that it underflows (λ = 1e100 printed a bare 0)."""
        value = norm2(self.delta_inf_small_lam)
        if value == 0.0 and norm2(self.delta0) > 0.0:
            return "0 (exp(-2 lambda G2) underflows float64)"
        return f"{value:.6e}"

    def _theorem1_lines(self):
        """Δ∞, I± and θ̃0: Theorem 1's quantities of the limit of a flow that converges. A diverged flow has no limit
        (as :meth:`MGDResult._theorem2_lines <dlnmomentum.runs.mgd.MGDResult._theorem2_lines>`): not printed as
        results, a note says why; the fields keep the values at its last point."""
        if self.status == Status.DIVERGED:
            na = DIVERGED_LIMIT_TEXT
            return [f"|Delta_inf|   : {na}", f"I+- (mean)    : {na}", f"|theta0~|max  : {na}",
                    f"note          : Delta_inf, I+-, theta0~ describe the limit of a converging flow (Theorem 1); "
                    f"this run diverged at t = {self.t_done:g}, so they have none (the result's fields hold their "
                    "values at its last point)"]
        return [f"|Delta_inf|   : {norm2(self.delta_inf):.6e}   (Cor. 2: {self._cor2_text()}, small-lambda: "
                f"{self._small_lam_text()})",
                f"I+ (mean)     : {self.i_plus.mean():.6e}   I- (mean): {self.i_minus.mean():.6e}   "
                f"gap alpha/Cor. 2: " + (f"{self.i_gap:.2e}" if np.isfinite(self.i_gap)
                                         else "n/a (every coordinate crossed zero)"),
                f"|theta0~|max  : {np.abs(self.theta0_tilde).max():.3e}"]

    def summary(self):
        c = self.config
        head = "GF" if self.kind == "gf" else f"MGF  lambda={self.lam:g}"
        if c.scheme != "rk4":
            head += f"  scheme={c.scheme}"
        start = (f"  refined start [0, {c.start_time:g}) x{c.start_substeps}" if c.start_steps and
                 c.start_substeps > 1 else "")
        if c.scheme in ADAPTIVE_SCHEMES:
            grid = (f"adaptive, rtol={c.rtol:g} atol={c.atol:g}: {self.steps_done} steps accepted, "
                    f"{self.rejected_steps} rejected, last h="
                    + (f"{self.h:.4g}" if self.steps_done else "- (no step)"))
        else:
            grid = f"h={self.h:.4g} (stable up to {self.h_stable:.3g}){start}"
        lines = [
            f"{head}  t_max={c.t_max:g}  {grid}",
            f"status        : {self.status_name} ({self.message}) at t = {self.t_done:g} "
            f"({self.steps_done} steps)",
            f"train loss    : {self.train_loss:.6e}",
            f"test loss     : {test_loss_text(self.test_loss)}",
            f"l1 norm       : {self.l1_norm:.6g}",
            f"|Delta_0|     : {norm2(self.delta0):.6e}",
            *self._theorem1_lines(),
            f"sign crossings: w+ {int(self.crossings_plus.sum())}, w- {int(self.crossings_minus.sum())} "
            f"(coordinates: {int((self.crossings_plus > 0).sum())}, {int((self.crossings_minus > 0).sum())}); "
            f"Delta_t stayed positive: {self.delta_stayed_positive}",
        ]
        if self.trajectory is not None:
            lines.append(f"recorded      : {len(self.trajectory)} rows")
        lines += self._theta0_tilde_notes("note          ")  # (|theta0~|max : inf at lambda = 1e6, said why)
        return "\n".join(lines)

    @property
    def message(self):
        """The status's message; a diverged adaptive run's says what ended it, its step size's underflow."""
        if (self.config.scheme in ADAPTIVE_SCHEMES and self.status == Status.DIVERGED
                and np.isfinite(self.train_loss)):
            # the adaptive schemes reject a step whose point overflows: "diverged" is the step size falling below
            # H_MIN_REL·t, which a blow-up causes, and so does a horizon where t itself leaves too few digits
            why = ("far past the limit, time has too few digits to resolve its last rounding-level drift; pass "
                   "tol= to stop at the limit, or a smaller t_max" if self.train_loss < 1e-8 else
                   "the solver could not continue the flow there (a blow-up, or stiffness beyond float64)")
            floor = f"{H_MIN_REL:g}·t" if self.config.scheme == "ndf" else f"{H_MIN_REL:g}·max(t, 1)"
            return (f"diverged: the adaptive step size fell below {floor} at a finite state "
                    f"(train loss {self.train_loss:.3g}): {why}")
        return super().message


class FlowRun(RunStateMixin):
    """State of one MGF(λ) / gradient-flow run, advanced chunk by chunk (see :mod:`dlnmomentum.driver`).

    Follows the protocol of :class:`dlnmomentum.runs.mgd.MGDRun`: ``total`` and ``done`` count grid
    steps, ``time_of_step(s) = s·h``; :meth:`description` and :meth:`rebuild` let a store
    recreate the run (the initial velocity is part of the description).
    """

    family = "flow"

    def __init__(self, problem, config, u0, v0, u_dot0=None, v_dot0=None, schedule=None):
        d = problem.d
        self.problem = problem
        self.config = config
        self.u0, self.v0 = u0, v0
        self.u_dot0 = np.zeros(d) if u_dot0 is None else np.asarray(u_dot0, dtype=float)
        self.v_dot0 = np.zeros(d) if v_dot0 is None else np.asarray(v_dot0, dtype=float)
        self.w_plus0 = u0 + v0
        self.w_minus0 = u0 - v0
        self.w_plus_dot0 = self.u_dot0 + self.v_dot0
        self.w_minus_dot0 = self.u_dot0 - self.v_dot0
        if config.lam == 0.0:  # gradient flow: the velocity is the vector field, not a state
            self.w_plus_dot0 = np.zeros(d)
            self.w_minus_dot0 = np.zeros(d)
        if problem.padded[2].shape[0] % K.BLOCK:
            raise ValueError(f"the problem's padded width must be a multiple of {K.BLOCK}")
        self.total = config.n_steps
        self.fstate, self.istate, self.counters = _init_state(self.w_plus0, self.w_minus0, self.w_plus_dot0,
                                                              self.w_minus_dot0)
        cap = config.max_crossings
        self.log_time = np.full(cap, np.nan)
        self.log_coord = np.full(cap, -1, dtype=np.int64)
        self.log_sign = np.zeros(cap, dtype=np.int64)
        self.mode = gradient_mode(config.gradient, problem.n, d)
        stages = 5 if config.scheme == "exp-rk4" else 4
        cost = stages * (gradient_cost(self.mode, problem.n, d) + 50 * d)
        self.chunk_steps = chunk_steps_for(cost)
        self.schedule = (np.zeros(0, dtype=np.int64) if schedule is None
                         else np.asarray(schedule, dtype=np.int64))
        self.cursor = np.zeros(1, dtype=np.int64)

    @property
    def done(self):
        return int(self.counters[K.STEPS_DONE])

    @property
    def kind(self):
        return self.config.kind

    def description(self, arrays=False):
        """Settings, schedule and initial velocity as a JSON-serialisable dict (``arrays``: the schedule as
        its int64 array, for stores)."""
        velocity = None
        if np.any(self.u_dot0) or np.any(self.v_dot0):
            velocity = {"u_dot0": self.u_dot0.tolist(), "v_dot0": self.v_dot0.tolist()}
        return {"family": self.family, "kind": self.kind, "config": self.config._asdict(),
                "schedule": self.schedule if arrays else self.schedule.tolist(), "velocity": velocity}

    @classmethod
    def rebuild(cls, problem, description, u0, v0):
        """A fresh run equal to the one that produced ``description``."""
        config = FlowConfig(**description["config"])
        velocity = description.get("velocity") or {}
        u_dot0 = velocity.get("u_dot0")
        v_dot0 = velocity.get("v_dot0")
        return cls(problem, config, np.asarray(u0, dtype=float), np.asarray(v0, dtype=float),
                   None if u_dot0 is None else np.asarray(u_dot0, dtype=float),
                   None if v_dot0 is None else np.asarray(v_dot0, dtype=float),
                   cls._stored_schedule(description))

    @staticmethod
    def _stored_schedule(description):
        """The record schedule of a stored description: step numbers (the adaptive run's are times)."""
        return np.asarray(description["schedule"], dtype=np.int64)

    def time_of_step(self, step):
        c = self.config
        if c.mgd_substeps:  # (mgf_from_mgd: see FlowConfig.mgd_eps)
            whole, part = np.divmod(np.asarray(step, dtype=np.int64), c.mgd_substeps)
            return whole.astype(np.float64) * c.mgd_eps + part.astype(np.float64) * c.h
        return np.asarray(step, dtype=np.float64) * c.h

    def time_done(self):
        """The time the run has reached."""
        if self.config.mgd_substeps:
            return float(self.time_of_step(self.done))
        return self.done * self.config.h

    def last_step(self):
        """The (last) integration step size, reported as the result's ``h``."""
        return self.config.h

    def solver_counts(self):
        """(rejected steps, right-hand sides, factorisations) of an adaptive scheme; zeros here."""
        return 0, 0, 0

    def new_block(self, rows):
        return new_record_block(rows, self.problem.d, ("w_plus_dot", "w_minus_dot"))

    def advance(self, n_steps, block, offset):
        p, c = self.problem, self.config
        tol = -1.0 if c.tol is None else c.tol
        X, XT, H, b = p.padded
        return KR._flow_advance(
            KR.SCHEMES[c.scheme], X, XT, p.y, H, b, p.X_test, p.y_test,
            c.lam, c.h, self.mode, tol, c.start_steps, c.start_substeps,
            self.fstate, self.istate, self.counters, n_steps,
            self.log_time, self.log_coord, self.log_sign,
            self.schedule, self.cursor, offset, block["step"], block["vectors"], block["losses"],
            block["w_plus_dot"], block["w_minus_dot"])

    # -- checkpoints ---------------------------------------------------------
    def state_arrays(self):
        """Every array needed to continue this run bit for bit."""
        return {"fstate": self.fstate, "istate": self.istate, "counters": self.counters,
                "log_time": self.log_time, "log_coord": self.log_coord, "log_sign": self.log_sign,
                "cursor": self.cursor}

    # -- result --------------------------------------------------------------
    def finish(self, status, blocks=()):
        f, i, c = self.fstate, self.istate, self.config
        lam = c.lam
        t_done = self.time_done()
        wp, wm = f[K.W_PLUS].copy(), f[K.W_MINUS].copy()
        vp, vm = f[K.V_PLUS].copy(), f[K.V_MINUS].copy()
        theta = 0.25 * (wp * wp - wm * wm)
        wp0, wm0 = self.w_plus0, self.w_minus0
        delta0 = np.abs(wp0 * wm0)
        P, Q, G2 = f[K.P_INT].copy(), f[K.Q_INT].copy(), f[K.G2_INT].copy()
        valid_p = i[K.CROSS_PLUS] == 0
        valid_m = i[K.CROSS_MINUS] == 0
        nan = np.full(wp.shape, np.nan)
        jp = np.where(valid_p, f[K.J_PLUS], nan)
        jm = np.where(valid_m, f[K.J_MINUS], nan)
        kp = np.where(valid_p, f[K.K_PLUS], nan)
        km = np.where(valid_m, f[K.K_MINUS], nan)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            # through α± = w± exp(±P): valid with or without crossings
            log_ap = np.log(np.abs(wp)) + P
            log_am = np.log(np.abs(wm)) - P
            i_plus = np.log(np.abs(wp0)) - log_ap
            i_minus = np.log(np.abs(wm0)) - log_am
            alpha_plus = wp * np.exp(P)
            alpha_minus = wm * np.exp(-P)
            delta_inf = delta0 * np.exp(-(i_plus + i_minus))
            theta0_tilde = 0.25 * (wp0**2 * np.exp(-2.0 * i_plus) - wm0**2 * np.exp(-2.0 * i_minus))
            # Corollary 2: I± = λ(J± - ẇ±0/w±0), only where the coordinate never crossed
            i_plus_cor = lam * (jp - self.w_plus_dot0 / wp0)
            i_minus_cor = lam * (jm - self.w_minus_dot0 / wm0)
            delta_inf_cor = delta0 * np.exp(-(i_plus_cor + i_minus_cor))
            theta0_tilde_cor = 0.25 * (wp0**2 * np.exp(-2.0 * i_plus_cor)
                                       - wm0**2 * np.exp(-2.0 * i_minus_cor))
            gaps = np.concatenate([np.abs(i_plus - i_plus_cor)[valid_p],
                                   np.abs(i_minus - i_minus_cor)[valid_m]])
            i_gap = float(gaps.max()) if gaps.size else float("nan")
            delta_inf_small_lam = delta0 * np.exp(-2.0 * lam * G2)
        n_cross = int(self.counters[K.N_CROSSINGS])
        kept = min(n_cross, len(self.log_time))
        order = np.argsort(self.log_time[:kept], kind="stable")
        fixed = c.scheme in GRID_SCHEMES  # an adaptive scheme controls its own error and stability
        h_stable = (max_stable_step(lam, c.kappa, c.scheme) if fixed and math.isfinite(c.kappa)
                    else float("nan"))
        final_kappa = stiffness_at(self.problem.hessian, theta, np.abs(wp * wm)) if fixed else 0.0
        h_final = max_stable_step(lam, final_kappa, c.scheme) if final_kappa > c.kappa else math.inf
        if status != DIVERGED and c.h > h_final * (1.0 + 1e-9):
            region = "RK4" if c.scheme == "rk4" else "exponential RK4"
            warnings.warn(f"h = {c.h:.4g} is outside the {region} stability region of the linearisation at the "
                          f"final point (stiffness {final_kappa:.4g}, stable for h <= {h_final:.4g}); the "
                          "result is not reliable: rerun with a smaller h", RuntimeWarning, stacklevel=3)
        trajectory = None
        if self.has_records():
            trajectory = trajectory_from_blocks(list(blocks), self.problem.d, self.time_of_step,
                                                extra_names=("w_plus_dot", "w_minus_dot"))
        rejected, rhs, lus = self.solver_counts()
        return FlowResult(
            kind=c.kind, config=c, status=int(status), steps_done=self.done, t_done=t_done, lam=lam,
            h=self.last_step(), rejected_steps=rejected, rhs_evaluations=rhs, factorizations=lus,
            theta=readonly(theta), u=readonly(0.5 * (wp + wm)), v=readonly(0.5 * (wp - wm)),
            w_plus=readonly(wp), w_minus=readonly(wm), w_plus_dot=readonly(vp), w_minus_dot=readonly(vm),
            w_plus0=readonly(wp0), w_minus0=readonly(wm0),
            w_plus_dot0=readonly(self.w_plus_dot0), w_minus_dot0=readonly(self.w_minus_dot0),
            delta0=readonly(delta0), delta=readonly(np.abs(wp * wm)),
            alpha_plus=readonly(alpha_plus), alpha_minus=readonly(alpha_minus),
            i_plus=readonly(i_plus), i_minus=readonly(i_minus), delta_inf=readonly(delta_inf),
            theta0_tilde=readonly(theta0_tilde),
            i_plus_cor=readonly(i_plus_cor), i_minus_cor=readonly(i_minus_cor),
            delta_inf_cor=readonly(delta_inf_cor), theta0_tilde_cor=readonly(theta0_tilde_cor), i_gap=i_gap,
            delta_inf_small_lam=readonly(delta_inf_small_lam),
            j_plus=readonly(jp), j_minus=readonly(jm), k_plus=readonly(kp), k_minus=readonly(km),
            j_valid_plus=readonly(valid_p), j_valid_minus=readonly(valid_m),
            p_integral=readonly(P), q_integral=readonly(Q), grad_sq_integral=readonly(G2),
            crossings_plus=readonly(i[K.CROSS_PLUS]), crossings_minus=readonly(i[K.CROSS_MINUS]),
            first_crossing_plus=readonly(f[K.FIRST_CROSS_PLUS]),
            first_crossing_minus=readonly(f[K.FIRST_CROSS_MINUS]),
            last_crossing_plus=readonly(f[K.LAST_CROSS_PLUS]),
            last_crossing_minus=readonly(f[K.LAST_CROSS_MINUS]),
            crossing_times=readonly(self.log_time[:kept][order]),
            crossing_coords=readonly(self.log_coord[:kept][order]),
            crossing_signs=readonly(self.log_sign[:kept][order]),
            n_crossings=n_cross, delta_stayed_positive=n_cross == 0,
            min_delta=readonly(_min_delta(f[K.MIN_DELTA], i[K.CROSS_PLUS] + i[K.CROSS_MINUS])),
            max_w2=float(f[K.MAX_W2].max()), h_stable=h_stable,
            train_loss=self.problem.train_loss(theta), test_loss=self.problem.test_loss(theta),
            l1_norm=float(np.abs(theta).sum()), trajectory=trajectory, problem=self.problem)


def _min_delta(running, crossings):
    """The result's ``min_delta``: the minimum of Δ = |w₊w₋| over the run, 0 for a coordinate that changed sign (Δ
    vanishes at the crossing itself; the kernels' running minimum is over the points they visit: the grid schemes'
    missed it by 1e-9 to 1e-7, the adaptive scheme's sets 0 at each located crossing)."""
    return np.where(crossings > 0, 0.0, running)


def _init_state(w_plus0, w_minus0, w_plus_dot0, w_minus_dot0):
    d = w_plus0.shape[0]
    fstate = np.zeros((K.N_FLOAT_ROWS, d))
    fstate[K.W_PLUS] = w_plus0
    fstate[K.W_MINUS] = w_minus0
    fstate[K.V_PLUS] = w_plus_dot0
    fstate[K.V_MINUS] = w_minus_dot0
    fstate[K.MIN_DELTA] = np.abs(w_plus0 * w_minus0)
    fstate[K.MAX_W2] = np.maximum(w_plus0**2, w_minus0**2)
    fstate[K.FIRST_CROSS_PLUS:K.LAST_CROSS_MINUS + 1] = np.nan
    istate = np.zeros((K.N_INT_ROWS, d), dtype=np.int64)
    return fstate, istate, np.zeros(K.N_COUNTERS, dtype=np.int64)


def _initial_velocity(d, u_dot0, v_dot0):
    u_dot0 = np.zeros(d) if u_dot0 is None else as_bounded_vector("u_dot0", u_dot0, d)
    v_dot0 = np.zeros(d) if v_dot0 is None else as_bounded_vector("v_dot0", v_dot0, d)
    return u_dot0, v_dot0


def make_config(problem, lam, t_max, h, u0, v0, tol=None, gradient="auto", refine_start="auto",
                max_crossings=DEFAULT_MAX_CROSSINGS, scheme="rk4"):
    """Validate the settings of a flow into a :class:`FlowConfig` (λ = 0: gradient flow).

    ``scheme`` is ``"rk4"``, ``"exp-rk4"`` or ``"auto"`` (:func:`~dlnmomentum.runs.stepping.choose_scheme`).
    """
    lam = as_lam("lam", lam)
    check_scheme(scheme)
    t_max = as_float("t_max", t_max, low=0.0, low_open=True)
    tol = as_float("tol", tol, low=0.0, allow_none=True)
    check_gradient_form(gradient)
    max_crossings = as_int("max_crossings", max_crossings, low=0, high=10**8)
    kappa = check_data_scale(problem, lambda: stiffness_estimate(problem, u0, v0))  # huge data: refused by name
    scheme = choose_scheme(scheme, lam, kappa)
    h_max = max_stable_step(lam, kappa, scheme)
    user_h = h is not None
    if h is None:
        h = min(default_step(lam, kappa, scheme), t_max)
    else:
        h = as_float("h", h, low=0.0, low_open=True)
        if h > h_max:  # (outside the stability region of the scheme: one message, the scheme's region in it)
            exp = scheme == "exp-rk4"
            what = f"MGF(lambda={lam:g}) with scheme 'exp-rk4'" if exp else \
                "gradient flow" if lam == 0.0 else f"MGF(lambda={lam:g})"
            region, modes = (("the stability region of the exponential RK4 scheme",
                              "gradient time scale 1/kappa and oscillatory") if exp else
                             ("the RK4 stability region", "fast mode -1/lambda, oscillatory"))
            raise ParameterValueError(f"h must be in (0, {h_max:.6g}] for {what} on this problem: h = {h!r} is outside "
                                      f"{region} (stiffness estimate kappa = {kappa:.4g}; {modes} modes "
                                      "sqrt(kappa/lambda)); see dlnmomentum.runs.stepping.max_stable_step", "h")
    check_grid(t_max, h, lam, kappa, h_max, user_h, scheme)
    n_steps, h = uniform_grid(t_max, h)
    start_steps, substeps = start_refinement(refine_start, problem, lam, u0, v0, t_max, h)
    what = "gradient flow" if lam == 0.0 else f"MGF(lambda={lam:g})"
    warn_large_grid(n_steps, start_steps, substeps, f"{what} to t_max = {t_max:g} with h = {h:.3g}")
    return FlowConfig(lam=lam, t_max=t_max, h=h, n_steps=n_steps, tol=tol, gradient=gradient,
                      start_steps=start_steps, start_substeps=substeps, max_crossings=max_crossings,
                      kappa=kappa, scheme=scheme)


def prepare_flow(problem, lam, *, t_max, h=None, alpha=0.01, u0=None, v0=None, u_dot0=None, v_dot0=None,
                 tol=None, record=None, gradient="auto", refine_start="auto",
                 max_crossings=DEFAULT_MAX_CROSSINGS, scheme="rk4"):
    """Validate the arguments of :func:`mgf` (``lam = 0``: :func:`gf`) and build the run object."""
    check_problem(problem)
    check_record(record)
    u0, v0 = initial_weights(problem.d, alpha, u0, v0)
    u_dot0, v_dot0 = _initial_velocity(problem.d, u_dot0, v_dot0)
    config = make_config(problem, lam, t_max, h, u0, v0, tol, gradient, refine_start, max_crossings, scheme)
    schedule = record.step_schedule(config.n_steps, h=config.h) if record is not None else None
    return FlowRun(problem, config, u0, v0, u_dot0, v_dot0, schedule)
