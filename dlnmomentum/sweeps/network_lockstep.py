"""The CPU engine of network sweeps: a wave of points advanced together by one compiled call per chunk.

:func:`dlnmomentum.kernels.network_sweep._net_sweep_chunk` advances every running point of the
wave (one lane each, in parallel over lanes) by the single run's own step
(:func:`dlnmomentum.kernels.networks._net_step`). Each lane starts from the state of the point's
single run (:meth:`NetworkPlan.run_of <dlnmomentum.sweeps.networks.NetworkPlan.run_of>`, so the
same initial parameters and random state) and ends in the same run object, whose
:meth:`~dlnmomentum.runs.network.NetworkRun.finish` gives the point fields: every point is
``dm.mgd(problem, γ, β, ...)`` bit for bit by construction.

Python advances the wave in chunks of about :data:`CHUNK_SECONDS`, so that the caller writes
finished points and checks Ctrl-C/SIGTERM between chunks.
"""

import time

import numba
import numpy as np

from ..kernels import network_sweep as KNS
from ..runs.network import point_fields, step_flops
from ..status import Status
from .lockstep import CHUNK_SECONDS

#: Bytes of lane state (parameters, previous parameters, permutation) a default wave may hold.
WAVE_BYTES = 1 << 26


def default_wave_size(plan, threads):
    """Points per wave: every pending point, up to :data:`WAVE_BYTES` of lane state (at least 4 per thread)."""
    p = plan.problem_for(0)
    per_lane = 8 * (2 * p.n_params + p.n + 4)
    return max(4 * threads, WAVE_BYTES // per_lane)


class NetworkLockstep:
    """Runs waves of network sweep points with :func:`~dlnmomentum.kernels.network_sweep._net_sweep_chunk`."""

    def __init__(self, plan):
        self.plan = plan
        p = plan.problem_for(0)
        # a first guess (replaced by the measured rate after the first chunk): ~0.25 ns per
        # floating-point operation of a step (the single run's cost rule, runs.network.step_flops)
        flops = step_flops(p, plan.config["batch_size"])
        self.ns_per_run_step = 0.25 * flops / max(1, numba.get_num_threads())
        self.run_steps = 0  # run-steps advanced by this engine (for progress)

    def run_wave(self, points):
        """Advance the points (flat indices) of one wave to their ends, chunk by chunk.

        A generator: after each chunk it yields ``(finished, fields)``, the points that ended in that
        chunk (none, often: an empty list) and their point fields
        (:func:`dlnmomentum.runs.network.point_fields`); the caller may stop between chunks (the points
        still running are then dropped), so it sees Ctrl-C/SIGTERM within a chunk (~:data:`CHUNK_SECONDS`),
        not when the next point ends.
        """
        for finished, results in self.run_wave_results(points):
            yield finished, [point_fields(r) for r in results]

    def run_wave_results(self, points):
        """As :meth:`run_wave`, with each point's whole :class:`~dlnmomentum.runs.network.NetworkResult`."""
        plan = self.plan
        runs = [plan.run_of(p) for p in points]
        reps = [int(np.unravel_index(p, plan.shape)[0]) for p in points]
        used = sorted(set(reps))
        slot = {r: i for i, r in enumerate(used)}
        problems = [plan.problem_for(r) for r in used]
        Xs = np.ascontiguousarray(np.stack([q.X for q in problems]), dtype=np.float64)
        ys = np.ascontiguousarray(np.stack([q.y for q in problems]), dtype=np.float64)
        p0 = problems[0]
        widths, w_off, b_off = p0.layout
        c = runs[0].config
        tol = -1.0 if c.tol is None else float(c.tol)
        batch_size = c.batch_size or 0
        total = c.steps
        data_of = np.asarray([slot[r] for r in reps], dtype=np.int64)
        gammas = np.asarray([run.config.gamma for run in runs], dtype=np.float64)
        betas = np.asarray([run.config.beta for run in runs], dtype=np.float64)
        PARAMS = np.ascontiguousarray(np.stack([run.params for run in runs]))
        PREV = np.ascontiguousarray(np.stack([run.params_prev for run in runs]))
        RNG = np.ascontiguousarray(np.stack([run.rng_state for run in runs]))
        PERM = np.ascontiguousarray(np.stack([run.perm for run in runs]))
        STEPS = np.asarray([run.done for run in runs], dtype=np.int64)
        STATUS = np.full(len(runs), int(Status.RUNNING), dtype=np.int64)
        ended = np.zeros(len(runs), dtype=bool)
        chunks = 0
        while True:
            lanes = np.flatnonzero((STATUS == Status.RUNNING) & (STEPS < total)).astype(np.int64)
            finished = np.flatnonzero(~ended & ((STATUS != Status.RUNNING) | (STEPS >= total)))
            ended[finished] = True
            if finished.size or chunks:  # after every chunk, also when no point ended in it: the caller checks
                yield ([points[i] for i in finished],  # for a stop request
                       [self._result(runs[i], PARAMS[i], PREV[i], RNG[i], STEPS[i], STATUS[i], total)
                        for i in finished])
            if lanes.size == 0:
                return
            n_steps = int(min(max(1.0, CHUNK_SECONDS / (self.ns_per_run_step * 1e-9 * lanes.size)), 1 << 30))
            before = int(STEPS[lanes].sum())
            t0 = time.perf_counter()
            with numba.parallel_chunksize(1):  # lanes are handed out one at a time (balance)
                KNS._net_sweep_chunk(Xs, ys, widths, w_off, b_off, p0.relu, data_of, gammas, betas, tol,
                                     batch_size, c.replace, RNG, PERM, PARAMS, PREV, STEPS, STATUS, lanes,
                                     n_steps, total)
            chunks += 1
            elapsed = time.perf_counter() - t0
            run_steps = int(STEPS[lanes].sum()) - before
            self.run_steps += run_steps
            if run_steps > 0 and elapsed > 1e-3:  # (a chunk far shorter than planned must still correct the guess)
                self.ns_per_run_step = elapsed / run_steps * 1e9

    @staticmethod
    def _result(run, params, prev, rng, steps, status, total):
        """The result of a lane: its state put back into its single run, finished as the driver finishes it."""
        run.params[:] = params
        run.params_prev[:] = prev
        run.rng_state[:] = rng
        run.counters[0] = steps
        code = Status(int(status)) if status != Status.RUNNING else Status.MAX_STEPS
        assert code != Status.MAX_STEPS or steps >= total
        return run.finish(code)
