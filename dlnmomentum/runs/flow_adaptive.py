r"""The adaptive flow run: MGF(λ) and gradient flow by the Rosenbrock method Rodas5P (MGF started by the explicit
DOP853 while it is not stiff), or gradient flow by the variable-order NDF, for long horizons.

The kernels are :func:`dlnmomentum.kernels.flow_rodas_run._rodas_advance` (``scheme="rodas"``;
:mod:`dlnmomentum.kernels.flow_rodas` states the method, the structured linear algebra, what the error control
covers, how crossings and records are located on the dense output) and
:func:`dlnmomentum.kernels.flow_ndf._ndf_advance` (``scheme="ndf"``, gradient flow only; the same state rows,
records and statuses, its own solver state: :mod:`dlnmomentum.kernels.flow_ndf`); ``config.scheme`` chooses.
This module wraps them in the run protocol of :mod:`dlnmomentum.driver`, so that stores, checkpoints, resume and
sweeps work as for the fixed-grid schemes, with these differences:

* ``total``/``done`` count *accepted steps*; the run ends at ``t_max`` (status ``max_steps``), at
  train loss ``<= tol`` (``converged``), when its budget of steps (``max_steps``) is spent, when the train loss
  stays at float64's rounding floor above ``tol`` (``stalled``), or ``diverged``;
* records are taken at *times* (``Record(every=...)``, ``times=``, ``log=``; not ``steps=``): each
  row carries its ``time`` and, in ``step``, the number of accepted steps before it; or, with
  ``Record(accepted=True)``, at the initial point and after every accepted step (``record_accepted``:
  how many rows is known at the end; ``step`` is the step's number);
* the checkpointed state adds the solver's state (time, next step, controller history, and for MGF the
  phase of :mod:`dlnmomentum.kernels.flow_dop853`'s switch) and the dense output of the last step (the NDF: its
  difference array and the Jacobian's point), so a resumed run is
  the uninterrupted one bit for bit.

The result is the same :class:`~dlnmomentum.runs.flow.FlowResult` as the fixed-step schemes (every
integral, crossing and Theorem 1 field), with ``h`` the last step size and the solver's counts in
``rejected_steps``, ``rhs_evaluations`` and ``factorizations``.

:func:`prepare_flow_run` is the one entry point of every flow (it resolves ``scheme="auto"``, which
takes this scheme for long horizons: :func:`~dlnmomentum.runs.stepping.choose_flow_scheme`).
"""


import numpy as np

from ..kernels import dense_output as KD
from ..kernels import flow_dop853 as KX
from ..kernels import flow_ndf as KN
from ..kernels import flow_rodas as KR
from ..kernels import flow_rodas_run as KRR
from ..results import new_record_block
from ..validate import MAX_STEPS, ParameterValueError, as_float, as_int, check_data_scale
from .common import check_gradient_form, check_problem, check_record, initial_weights
from .flow import FlowConfig, FlowRun, _initial_velocity, prepare_flow
from .stepping import (
    ADAPTIVE_MAX_STEPS,
    ADAPTIVE_SCHEMES,
    DEFAULT_ATOL_NDF,
    DEFAULT_MAX_CROSSINGS,
    DEFAULT_RTOL,
    DEFAULT_RTOL_NDF,
    as_lam,
    check_scheme,
    choose_flow_scheme,
    choose_scheme,
    default_atol,
    stiffness_estimate,
)

#: How an adaptive run records at times, at its accepted steps, and how a grid run records every step, as the errors
#: write them (each declared as a parameter: the command line writes its options instead, cli/flow.py).
TIME_RECORDS = "Record(every=...), Record(times=...) or Record(log=...)"
ACCEPTED_RECORDS = "Record(accepted=True)"
GRID_RECORDS = "Record(every=h)"
#: Rows of one record block of an adaptive run (the kernel returns early when a block is full).
RECORD_BLOCK_ROWS = 4096
#: Work of one chunk in the multiply-adds counted by :func:`adaptive_chunk_steps`: about 0.1 s, as measured at
#: d = 200, n = 100 (a Rodas5P step, 9.0e6 of them, 357 µs; an NDF step, 1.3e6, 55 µs: both ~25 per ns).
CHUNK_WORK = 2.5e9
#: Accepted steps per chunk at most, per scheme: a Rodas5P step costs ~10-30 µs at d = 30, an NDF step ~3 µs
#: (about two right-hand sides and a factorisation every 10-20 steps), so a chunk is tens of milliseconds in
#: either, and the NDF's gradient flow to train loss 1e-20 on the paper's problem (2 033 steps) is one chunk.
CHUNK_STEPS = {"rodas": 2000, "ndf": 8000}


def adaptive_chunk_steps(n, d, scheme="rodas"):
    """Accepted steps per chunk of ``scheme``: :data:`CHUNK_WORK` (about 0.1 s), at most ``CHUNK_STEPS[scheme]``.

    A Rodas5P step costs about d³ (its factorisation) + 16d² (eight stage solves) + 16nd (eight right-hand
    sides) multiply-adds; an NDF step about two right-hand sides and Newton solves in the mirror coordinate
    (8nd + 4d²) and an eighth of a factorisation (129 in 2 033 steps on the paper's problem). A fixed count
    would make a chunk take seconds at d in the thousands, and a Ctrl-C or a scheduler's SIGTERM waits for the
    chunk to end; a chunk of a few milliseconds, in turn, pays the Python between chunks (signals, progress,
    the kernel's dispatch) every few milliseconds. The chunk length changes no bit.
    """
    if scheme == "ndf":
        cost = float(d) ** 3 / 8.0 + 4.0 * d * d + 8.0 * n * d
    else:
        cost = float(d) ** 3 + 16.0 * d * d + 16.0 * n * d
    return int(min(CHUNK_STEPS[scheme], max(1.0, CHUNK_WORK // cost)))  # (d = 2000: one Rodas5P step a chunk)


class AdaptiveFlowRun(FlowRun):
    """State of one adaptive MGF(λ) / gradient-flow run (see the module docstring).

    ``schedule`` holds record *times* (float64). The state arrays of :class:`FlowRun` are kept
    (``fstate``, ``istate``, the crossing log) with the adaptive counters (``counters``: accepted
    steps, crossings, rejected steps, right-hand sides, factorisations, dense fallbacks), the
    solver state ``sstate`` and the last step's dense output ``dense``.
    """

    family = "flow-adaptive"
    #: ``total`` is the budget of accepted steps (``max_steps``, 1e8 by default), not the steps the run takes
    #: (about a thousand to train loss 1e-20): progress shows the steps done without a total or an ETA.
    total_is_planned = False

    def __init__(self, problem, config, u0, v0, u_dot0=None, v_dot0=None, schedule=None, record_accepted=False):
        super().__init__(problem, config, u0, v0, u_dot0, v_dot0, None)
        self.record_accepted = bool(record_accepted)
        d = problem.d
        self.counters = np.zeros(KR.N_COUNTERS, dtype=np.int64)
        if config.scheme == "ndf":  # (kernels/flow_ndf.py: its solver state, difference array, Jacobian's point)
            self.sstate = np.zeros(KN.N_NDF_SSTATE)
            self.difference = np.zeros((KN.N_D_ROWS, 2, d))
            self.p_jac = np.zeros(d)
        else:
            self.sstate = np.zeros(KX.N_RODAS_SSTATE)  # (PHASE 0: MGF starts by DOP853, kernels/flow_dop853.py)
            self.dense = np.zeros((KD.N_DENSE_ROWS, 4, d))
        self.schedule = (np.zeros(0, dtype=np.float64) if schedule is None
                         else np.asarray(schedule, dtype=np.float64))
        self.chunk_steps = adaptive_chunk_steps(problem.n, d, config.scheme)
        # the initial weights, which gradient flow's mirror coordinate P maps to w± = w±(0)e^{∓P}
        self.w_init = np.ascontiguousarray(np.stack([self.w_plus0, self.w_minus0]), dtype=np.float64)
        self.arrays = (np.ascontiguousarray(problem.X), np.ascontiguousarray(problem.XT),
                       np.ascontiguousarray(problem.hessian), np.ascontiguousarray(problem.b))

    @classmethod
    def rebuild(cls, problem, description, u0, v0):
        """A fresh run equal to the one that produced ``description``."""
        run = super().rebuild(problem, description, u0, v0)
        run.record_accepted = bool(description.get("record_accepted", False))  # (absent before 0.6.0)
        return run

    @staticmethod
    def _stored_schedule(description):
        # record times, which reach t_max (up to 1e300): never through int64
        return np.asarray(description["schedule"], dtype=np.float64)

    def description(self, arrays=False):
        out = super().description(arrays)
        if self.record_accepted:
            out["record_accepted"] = True
        return out

    def has_records(self):
        return self.record_accepted or len(self.schedule) > 0

    def work_estimate(self):
        """Multiply-adds of a typical run (about a thousand steps), for the progress-bar choice."""
        d = self.problem.d
        return 3000.0 * (d**3 + 40.0 * d * d)

    def block_rows(self, n_steps):
        """Rows of the next record block: the records still owed (with ``record_accepted``: a row per step
        of the chunk and the initial point's), at most :data:`RECORD_BLOCK_ROWS`."""
        if self.record_accepted:
            return min(int(n_steps) + 1, RECORD_BLOCK_ROWS)
        return max(0, min(len(self.schedule) - int(self.cursor[0]), RECORD_BLOCK_ROWS))

    def time_of_step(self, step):
        # Rows carry their own time (the block's "time" column): this is never what a row reports.
        return np.full(np.shape(step), np.nan)

    def time_done(self):
        return float(self.sstate[KR.T_NOW])

    def last_step(self):
        return float(self.sstate[KR.H_LAST]) if self.done else float("nan")

    def solver_counts(self):
        c = self.counters
        return int(c[KR.REJECTED]), int(c[KR.N_RHS]), int(c[KR.N_LU])

    @property
    def step_failed(self):
        """True when the run stopped because its step size underflowed (reported as diverged)."""
        return bool(self.sstate[KR.FAILED])

    def new_block(self, rows):
        block = new_record_block(rows, self.problem.d, ("w_plus_dot", "w_minus_dot"))
        block["time"] = np.zeros(rows)
        return block

    def advance(self, n_steps, block, offset):
        p, c = self.problem, self.config
        tol = -1.0 if c.tol is None else c.tol
        X, XT, H, b = self.arrays
        if c.scheme == "ndf":
            return KN._ndf_advance(
                X, XT, p.y, H, b, p.X_test, p.y_test, self.w_init, self.mode, tol, c.t_max, c.rtol, c.atol,
                self.fstate, self.istate, self.counters, self.sstate, self.difference, self.p_jac, n_steps,
                self.schedule, self.record_accepted, self.cursor, offset, block["step"], block["time"],
                block["vectors"], block["losses"], block["w_plus_dot"], block["w_minus_dot"])
        return KRR._rodas_advance(
            X, XT, p.y, H, b, p.X_test, p.y_test, self.w_init, c.lam, self.mode, tol, c.t_max, c.rtol, c.atol,
            self.fstate, self.istate, self.counters, self.sstate, self.dense, n_steps,
            self.log_time, self.log_coord, self.log_sign,
            self.schedule, self.record_accepted, self.cursor, offset, block["step"], block["time"], block["vectors"],
            block["losses"],
            block["w_plus_dot"], block["w_minus_dot"])

    def state_arrays(self):
        out = super().state_arrays()
        if self.config.scheme == "ndf":
            out.update(sstate=self.sstate, difference=self.difference, p_jac=self.p_jac)
        else:
            out.update(sstate=self.sstate, dense=self.dense)
        return out

    def load_state_arrays(self, arrays):
        """As the base class, for checkpoints of earlier 0.6.0 development stores too: an ``sstate`` of
        ``N_SSTATE_BEFORE_STALL`` entries continues with the stall rule's count at 0; one from before the explicit
        start (``N_SSTATE`` entries, or fewer) and its dense output of ``N_DENSE_ROWS_BEFORE_EXPLICIT`` rows continue
        by Rodas5P, as they began (``PHASE`` = 1, the dense output's higher rows 0)."""
        if self.config.scheme == "rodas":
            sstate = np.asarray(arrays["sstate"])
            dense = np.asarray(arrays["dense"])
            if sstate.shape in ((KR.N_SSTATE_BEFORE_STALL,), (KR.N_SSTATE,)):
                sstate = np.concatenate([sstate, np.zeros(KX.N_RODAS_SSTATE - sstate.size)])
                sstate[KX.PHASE] = 1.0
            if dense.ndim == 3 and dense.shape[0] == KD.N_DENSE_ROWS_BEFORE_EXPLICIT:
                dense = np.concatenate([dense, np.zeros((KD.N_DENSE_ROWS - dense.shape[0],) + dense.shape[1:])])
            arrays = dict(arrays, sstate=sstate, dense=dense)
        super().load_state_arrays(arrays)


def make_adaptive_config(problem, lam, t_max, u0, v0, tol=None, gradient="auto", max_crossings=DEFAULT_MAX_CROSSINGS,
                         rtol=None, atol=None, max_steps=None, kappa=None, scheme="rodas"):
    """Validate the settings of an adaptive flow (``scheme`` ``"rodas"`` or ``"ndf"``) into a
    :class:`~dlnmomentum.runs.flow.FlowConfig`."""
    lam = as_lam("lam", lam)
    t_max = as_float("t_max", t_max, low=0.0, low_open=True)
    tol = as_float("tol", tol, low=0.0, allow_none=True)
    check_gradient_form(gradient)
    max_crossings = as_int("max_crossings", max_crossings, low=0, high=10**8)
    if rtol is None:
        rtol = DEFAULT_RTOL_NDF if scheme == "ndf" else DEFAULT_RTOL
    else:
        rtol = as_float("rtol", rtol, low=1e-15, high=1e-2)
    if atol is None:
        atol = DEFAULT_ATOL_NDF if scheme == "ndf" else max(default_atol(lam, u0, v0), 1e-300)
    else:
        atol = as_float("atol", atol, low=1e-300, high=1.0)
    max_steps = ADAPTIVE_MAX_STEPS if max_steps is None else as_int("max_steps", max_steps, low=1, high=MAX_STEPS)
    if kappa is None:  # huge data: refused by name, as the fixed-grid flows do
        kappa = check_data_scale(problem, lambda: stiffness_estimate(problem, u0, v0))
    return FlowConfig(lam=lam, t_max=t_max, h=0.0, n_steps=max_steps, tol=tol, gradient=gradient,
                      start_steps=0, start_substeps=1, max_crossings=max_crossings, kappa=kappa, scheme=scheme,
                      rtol=rtol, atol=atol)


def prepare_flow_run(problem, lam, *, t_max, h=None, alpha=0.01, u0=None, v0=None, u_dot0=None, v_dot0=None,
                     tol=None, record=None, gradient="auto", refine_start="auto", max_crossings=DEFAULT_MAX_CROSSINGS,
                     scheme="auto", rtol=None, atol=None, max_steps=None):
    """Validate the arguments of :func:`dlnmomentum.mgf` / :func:`dlnmomentum.gf` and build the run of
    the scheme they ask for (``"auto"``: :func:`~dlnmomentum.runs.stepping.choose_flow_scheme`).

    ``h``, an explicit ``refine_start`` and ``Record(steps=...)`` belong to the fixed grid; ``rtol``,
    ``atol`` and ``max_steps`` to the adaptive scheme: each is refused with the other.
    """
    check_problem(problem)
    check_record(record)
    fixed_grid = (h is not None or not (isinstance(refine_start, str) and refine_start == "auto")
                  or (record is not None and record.steps is not None))
    adaptive_args = [name for name, value in (("rtol", rtol), ("atol", atol), ("max_steps", max_steps))
                     if value is not None]
    lam_checked = as_lam("lam", lam)
    t_checked = as_float("t_max", t_max, low=0.0, low_open=True)
    # (h's own range before the choice of scheme, which compiles the exponential scheme's coefficients: h = -1 was
    # refused after seconds of that work)
    h = as_float("h", h, low=0.0, low_open=True, allow_none=True)
    if lam_checked == 0.0 and (u_dot0 is not None or v_dot0 is not None):
        raise ValueError("u_dot0 and v_dot0 are the initial velocity of MGF(lam > 0); gradient flow (lam = 0) is a "
                         "first-order flow and has none: leave them out, or give lam > 0")
    check_scheme(scheme)
    if scheme == "ndf":
        choose_scheme(scheme, lam_checked, 0.0)  # (refuses MGF(lam > 0) by name, before any work)
    adaptive_names = "'rodas' or 'ndf'" if lam_checked == 0.0 else "'rodas'"
    # what puts the run on the fixed grid, named in the messages below
    grid_cause = "h" if h is not None else ("refine_start" if not isinstance(refine_start, str)
                                            or refine_start != "auto" else "record=Record(steps=...)")
    if scheme in ADAPTIVE_SCHEMES and fixed_grid:
        raise ParameterValueError(f"{grid_cause} is for the fixed-grid schemes ('rk4', 'exp-rk4'); scheme={scheme!r} "
                                  f"chooses its own steps (set rtol and atol) and records at times ({TIME_RECORDS})",
                                  grid_cause, "scheme=", "rtol", "atol", TIME_RECORDS)
    if adaptive_args and (scheme in ("rk4", "exp-rk4") or fixed_grid):
        why = f"; got scheme={scheme!r}" if scheme in ("rk4", "exp-rk4") else f", which {grid_cause} rules out"
        raise ParameterValueError(f"{', '.join(adaptive_args)} {'is' if len(adaptive_args) == 1 else 'are'} for "
                                  f"the adaptive schemes ({adaptive_names}){why}", *adaptive_args, "scheme=", "h",
                                  "refine_start")
    accepted = record is not None and bool(record.accepted)
    if accepted and (scheme in ("rk4", "exp-rk4") or fixed_grid):
        # (a Record(accepted=True) has no steps=: a grid here is h's or refine_start's)
        what = f"scheme={scheme!r}" if scheme in ("rk4", "exp-rk4") else grid_cause
        raise ParameterValueError(f"{ACCEPTED_RECORDS} records the steps of an adaptive scheme ({adaptive_names}), "
                                  f"which {what} rules out; a flow on a grid records every step with {GRID_RECORDS}",
                                  ACCEPTED_RECORDS, GRID_RECORDS, "scheme=", "h", "refine_start")
    if scheme == "auto" and (adaptive_args or accepted):
        scheme = "rodas" if lam_checked > 0.0 else "ndf"
    if scheme == "auto" or scheme in ADAPTIVE_SCHEMES:
        u0w, v0w = initial_weights(problem.d, alpha, u0, v0)
        kappa = check_data_scale(problem, lambda: stiffness_estimate(problem, u0w, v0w))
        if scheme == "auto":
            scheme = choose_flow_scheme("auto", lam_checked, kappa, t_checked, tol, fixed_grid)
        if scheme in ADAPTIVE_SCHEMES:
            u_dot, v_dot = _initial_velocity(problem.d, u_dot0, v_dot0)
            config = make_adaptive_config(problem, lam, t_max, u0w, v0w, tol, gradient, max_crossings, rtol, atol,
                                          max_steps, kappa, scheme)
            schedule = record.time_schedule(config.t_max) if record is not None else None
            return AdaptiveFlowRun(problem, config, u0w, v0w, u_dot, v_dot, schedule,
                                   record_accepted=accepted)
    return prepare_flow(problem, lam, t_max=t_max, h=h, alpha=alpha, u0=u0, v0=v0, u_dot0=u_dot0, v_dot0=v_dot0,
                        tol=tol, record=record, gradient=gradient, refine_start=refine_start,
                        max_crossings=max_crossings, scheme=scheme)
