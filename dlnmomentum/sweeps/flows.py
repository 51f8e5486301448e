"""The CPU engine of flow sweeps: λ points advanced in lockstep RK4 groups, or one by one on threads.

Fixed-grid schemes: :func:`dlnmomentum.kernels.flow_sweep._flow_sweep_chunk` advances groups of up
to ``LANES`` flows on one data set stage by stage (the gradients of all lanes at once), groups in
parallel. The adaptive schemes ``"rodas"`` and ``"ndf"``: runs take steps of their own sizes (under the
sweep's ``rtol``, ``atol`` and ``max_steps``), so each point runs its single-run kernel (:func:`_adaptive_batch`),
points spread over threads (the kernel releases the GIL). Either way every point is bit for bit
``dlnmomentum.mgf``. Same engine protocol as :mod:`.lockstep`.
"""

import math
import time

import numpy as np

from ..driver import chunk_length
from ..kernels import flow as KF
from ..kernels import flow_run as KR
from ..kernels import flow_sweep as KFS
from ..runs.flow_adaptive import prepare_flow_run
from ..runs.points import flow_point
from ..status import Status
from .lockstep import CHUNK_SECONDS, threads
from .plan import flow_scheme, flow_settings


class FlowEngine:
    """Runs waves of flow points in lockstep groups (:func:`_flow_batch`)."""

    def __init__(self, plan, block_size):
        self.plan = plan
        self.block_size = block_size
        self.seconds_per_step = None
        self._runs = {}
        self._finished = None  # (points, outputs) that ended before a stop request cut their wave short

    def run_for(self, p):
        """The :class:`~dlnmomentum.runs.flow.FlowRun` of point ``p`` (validated like ``mgf``, with the sweep's
        ``rtol``, ``atol`` and ``max_steps``; cached)."""
        run = self._runs.get(p)
        if run is None:
            cfg = self.plan.config
            r, il = np.unravel_index(p, self.plan.shape)
            problem = self.plan.problem_for(int(r))
            run = prepare_flow_run(problem, float(self.plan.lams[il]), t_max=cfg["t_max"], alpha=cfg["alpha"],
                                   tol=cfg["tol"], gradient=cfg["gradient"], scheme=flow_scheme(cfg),
                                   **flow_settings(cfg))
            self._runs[p] = run
        return run

    def planned_steps(self, points):
        return sum(_planned(self.run_for(p)) for p in points)

    def cost_per_point(self):
        sample = self.run_for(0)
        d = self.plan.d
        if sample.config.scheme in KR.SCHEMES:
            per_step = self.seconds_per_step or 4 * (d * d + 60 * d) * 1e-10
        else:  # adaptive: a d × d factorisation and 8 stages a step
            per_step = (d**3 + 80 * d * d) * 1e-9
        return _planned(sample) * per_step

    def run_wave(self, points, flag, bar):
        runs = [self.run_for(p) for p in points]
        reps = [int(np.unravel_index(p, self.plan.shape)[0]) for p in points]
        statuses = _flow_batch(runs, reps, flag, bar, self)
        if any(s is None for s in statuses):  # interrupted: the points that ended are kept for take_finished
            ended = [k for k, s in enumerate(statuses) if s is not None]
            self._finished = ([points[k] for k in ended], ([runs[k] for k in ended], [statuses[k] for k in ended]))
            return None
        return runs, statuses

    def take_finished(self):
        """``(points, outputs)`` of the runs of an interrupted wave that had ended (for :meth:`finish_points`), or
        None: an adaptive wave can hold minutes of finished runs, which a stop request should not throw away."""
        finished, self._finished = self._finished, None
        return finished if finished is not None and finished[0] else None

    def finish_points(self, points, outputs):
        runs, statuses = outputs
        cfg = self.plan.config
        results = []
        for p, run, status in zip(points, runs, statuses, strict=True):
            res = run.finish(status)
            results.append(flow_point(res, run.problem, cfg["theory"], cfg["theory_tol"]))
            self._runs.pop(p, None)
        return results


def _flow_groups(runs, reps, nthreads, lanes):
    """Lanes of the lockstep groups: lists of run indices, one data set per group.

    Within a data set the runs are sorted by their number of RK4 steps (start refinement
    included) so that a group's lanes finish together; small sets are spread over at
    least ``nthreads`` groups so that every thread has work. (The runs are of one scheme:
    :func:`_flow_batch` advances each scheme's runs by its own kernel.)
    """
    groups = []
    for rep in sorted(set(reps)):
        members = [i for i in range(len(runs)) if reps[i] == rep]
        members.sort(key=lambda i: -(runs[i].total + runs[i].config.start_steps
                                     * (runs[i].config.start_substeps - 1)))
        count = max(math.ceil(len(members) / lanes), min(len(members), nthreads))
        size = math.ceil(len(members) / count)
        groups += [(rep, members[k:k + size]) for k in range(0, len(members), size)]
    return groups


def _planned(run):
    """Steps a run is expected to take (an adaptive run's ``total`` is a budget, not a plan)."""
    return run.total if run.config.scheme in KR.SCHEMES else min(run.total, ADAPTIVE_STEPS_GUESS)


#: What an adaptive run to the limit takes at most, about (progress and wave sizing only): about 1 000 steps
#: on the paper's problem at the default tolerances, more on harder data.
ADAPTIVE_STEPS_GUESS = 3000


def _flow_batch(runs, reps, flag, bar, engine):
    """Advance every run to its end; returns public statuses, None for the runs a stop request left unfinished.

    The runs are grouped by scheme (a lockstep group holds lanes of one scheme): the RK4 runs,
    then the exponential ones, each by :func:`dlnmomentum.kernels.flow_sweep._flow_sweep_chunk`
    with that scheme's code (:func:`_scheme_batch`), then the adaptive ones (:func:`_adaptive_batch`).
    """
    statuses = [None] * len(runs)
    adaptive = [i for i, run in enumerate(runs) if run.config.scheme not in KR.SCHEMES]
    stopped = False  # (after a stop request no further scheme's runs start)
    if adaptive:
        got = _adaptive_batch([runs[i] for i in adaptive], flag, bar)
        for i, status in zip(adaptive, got, strict=True):
            statuses[i] = status
        stopped = any(s is None for s in got)
    for scheme, code in KR.SCHEMES.items():
        members = [i for i, run in enumerate(runs) if run.config.scheme == scheme]
        if not members or stopped:
            continue
        got = _scheme_batch([runs[i] for i in members], [reps[i] for i in members], flag, bar, engine, code)
        for i, status in zip(members, got, strict=True):
            statuses[i] = status
        stopped = any(s is None for s in got)
    return statuses


def _adaptive_batch(runs, flag, bar):
    """Advance adaptive runs to their end, each by its own kernel chunk by chunk, on ``threads()`` threads.

    Every run is driven exactly as :func:`dlnmomentum.driver.drive` drives a single run (no records: a
    sweep keeps the point fields; chunks of ``chunk_steps`` cut at the end of the budget ``max_steps``), so each
    point is its single run bit for bit; ``flag`` (a stop
    request) is read between chunks. Returns public statuses, None for the runs it stopped.
    """
    from concurrent.futures import ThreadPoolExecutor

    def advance(run):
        block = run.new_block(0)
        while True:
            before = run.done
            code = run.advance(chunk_length(run), block, int(run.cursor[0]))
            if bar is not None:
                bar.update(run.done - before)
            if code != Status.RUNNING:
                return Status(code)
            if run.done >= run.total:
                return Status.MAX_STEPS
            if flag["signum"] is not None:
                return None

    for run in runs:  # a sweep records no rows: every record is owed and none is written
        run.schedule = run.schedule[:0]
    with ThreadPoolExecutor(max_workers=max(1, min(threads(), len(runs)))) as pool:
        return list(pool.map(advance, runs))


def _scheme_batch(runs, reps, flag, bar, engine, scheme):
    """Advance runs of one scheme to their end in lockstep groups; public statuses, None for the runs a stop
    request left unfinished.

    :func:`~dlnmomentum.kernels.flow_sweep._flow_sweep_chunk` with the ``scheme`` code advances
    groups of up to ``LANES`` runs on one data set stage by stage (gradients of all lanes at once),
    groups in parallel, chunk by chunk; every lane is bit for bit the single-run kernel, so every
    point is exactly ``dlnmomentum.mgf``. The runs' state arrays are updated at the end.
    """
    modes = {run.mode for run in runs}
    if len(modes) != 1:
        raise RuntimeError("a flow sweep needs one gradient form for all points")
    groups = _flow_groups(runs, reps, max(1, threads()), KFS.LANES)
    used = sorted({rep for rep, _ in groups})
    slot = {rep: k for k, rep in enumerate(used)}
    p0 = runs[0].problem
    X0 = p0.padded[0]
    n, dp = X0.shape
    nt, dpt = KFS.padded_rows(n, dp)
    Xs = np.zeros((len(used), nt, dp))
    XTs = np.zeros((len(used), dpt, n))
    Hs = np.zeros((len(used), dpt, dp))
    ys = np.zeros((len(used), n))
    bs = np.zeros((len(used), dp))
    for rep, k in slot.items():
        i = next(i for i in range(len(runs)) if reps[i] == rep)
        X, XT, H, b = runs[i].problem.padded
        Xs[k, :n], XTs[k, :dp], Hs[k, :dp], ys[k], bs[k] = X, XT, H, runs[i].problem.y, b
    ng = len(groups)
    nl = ng * KFS.LANES
    lane_of = np.full(nl, -1, dtype=np.int64)
    group_rep = np.zeros(ng, dtype=np.int64)
    for q, (rep, members) in enumerate(groups):
        group_rep[q] = slot[rep]
        lane_of[q * KFS.LANES:q * KFS.LANES + len(members)] = members
    r0 = runs[0]
    F = np.zeros((nl,) + r0.fstate.shape)
    I = np.zeros((nl,) + r0.istate.shape, dtype=np.int64)  # noqa: E741 - the kernel's name
    C = np.zeros((nl,) + r0.counters.shape, dtype=np.int64)
    cap = max(run.log_time.shape[0] for run in runs)
    LOG_T = np.full((nl, cap), np.nan)
    LOG_C = np.full((nl, cap), -1, dtype=np.int64)
    LOG_S = np.zeros((nl, cap), dtype=np.int64)
    lams, hs, tols = np.zeros(nl), np.ones(nl), np.full(nl, -1.0)
    n_fines, m_fines = np.zeros(nl, dtype=np.int64), np.ones(nl, dtype=np.int64)
    totals = np.zeros(nl, dtype=np.int64)
    live = np.zeros(nl, dtype=np.bool_)
    codes = np.zeros(nl, dtype=np.int64)
    for k in range(nl):
        i = lane_of[k]
        if i < 0:
            continue
        run, c = runs[i], runs[i].config
        if run.log_time.shape[0] != cap:
            raise RuntimeError("a flow sweep needs one crossing-log capacity for all points")
        F[k], I[k], C[k] = run.fstate, run.istate, run.counters
        LOG_T[k], LOG_C[k], LOG_S[k] = run.log_time, run.log_coord, run.log_sign
        lams[k], hs[k], tols[k] = c.lam, c.h, (-1.0 if c.tol is None else c.tol)
        n_fines[k], m_fines[k], totals[k] = c.start_steps, c.start_substeps, c.n_steps
        live[k] = run.done < run.total
    mode = modes.pop()
    chunk = 64
    interrupted = False
    while live.any():
        before = int(C[live, KF.STEPS_DONE].sum())
        t0 = time.perf_counter()
        KFS._flow_sweep_chunk(scheme, Xs, XTs, ys, Hs, bs, group_rep, mode, lams, hs, tols, n_fines, m_fines, totals,
                     live, F, I, C, LOG_T, LOG_C, LOG_S, codes, chunk)
        elapsed = time.perf_counter() - t0
        advanced = int(C[live, KF.STEPS_DONE].sum()) - before
        if bar is not None:
            bar.update(advanced)
        if advanced and elapsed > 0.01:
            engine.seconds_per_step = elapsed * max(1, threads()) / advanced
        chunk = int(min(max(16, chunk * max(0.25, min(4.0, CHUNK_SECONDS / max(elapsed, 1e-9)))), 1 << 24))
        live &= (codes == Status.RUNNING) & (C[:, KF.STEPS_DONE] < totals)
        if live.any() and flag["signum"] is not None:
            interrupted = True
            break
    for k in range(nl):  # the runs' own arrays (a later wave or a store sees them)
        i = lane_of[k]
        if i >= 0:
            run = runs[i]
            run.fstate[...], run.istate[...], run.counters[...] = F[k], I[k], C[k]
            run.log_time[...], run.log_coord[...], run.log_sign[...] = LOG_T[k], LOG_C[k], LOG_S[k]
    statuses = [Status.MAX_STEPS] * len(runs)
    for k in range(nl):
        i = lane_of[k]
        if i >= 0 and codes[k] != Status.RUNNING:
            statuses[i] = Status(codes[k])
        elif i >= 0 and interrupted and live[k]:  # stopped on the way (a lane that used its budget has ended)
            statuses[i] = None
    return statuses


# ---------------------------------------------------------------------------------------------------
# The HDF5 store
