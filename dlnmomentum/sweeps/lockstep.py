"""The CPU engine of discrete sweeps: waves of (β, γ) points advanced in lockstep groups.

:func:`dlnmomentum.kernels.sweep._sweep_chunk` advances groups of ``LW`` runs (one data set
per group) in SIMD lanes, blocks of groups in parallel; every lane is bit for bit the
single-run kernel. An engine exposes ``cost_per_point()``, ``run_wave(points, flag, bar)``
(the per-point outputs, or None when interrupted) and ``finish_points(points, outputs)``
(the point fields, :mod:`dlnmomentum.runs.points`). Optional, read by :func:`.execute.waves` and
:func:`.execute.execute`: ``wave_threads()`` (runs advanced at once at ``cost_per_point`` each; default
the CPU threads, 1 for the GPU), ``max_wave_points()`` (a memory bound on a wave) and ``take_finished()``
(the points of an interrupted wave that had ended, with their outputs: :mod:`.flows`).
"""

import time

import numba
import numpy as np

from ..kernels import layout as KL
from ..kernels import sweep as KS
from ..kernels.layout import round_up
from ..runs.common import gradient_mode, initial_weights, uses_hessian
from ..runs.points import mgd_columns

#: Target wall-clock seconds of one kernel call (progress and Ctrl-C granularity).
CHUNK_SECONDS = 0.25
#: The most bytes of an automatic wave's lane state and outputs (:meth:`LockstepEngine.max_wave_points`). A wave
#: sized by time alone held every point of a sweep of short runs at once: ~10 kB per point (n=20, d=30), 7 times
#: the point fields, 1 GB for 10^5 points.
WAVE_STATE_BYTES = 256 << 20

def aligned(shape, dtype=np.float64, align=64):
    """Zeros with a 64-byte aligned start (every SIMD access of the kernel stays inside a cache line)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    buf = np.zeros(n + align // dtype.itemsize, dtype=dtype)
    off = (-buf.ctypes.data % align) // dtype.itemsize
    return buf[off:off + n].reshape(shape)


def threads():
    """Threads the parallel kernels use (``numba.get_num_threads``)."""
    return int(numba.get_num_threads())


class LockstepEngine:
    """Runs waves of discrete points with :func:`dlnmomentum.kernels.sweep._sweep_chunk`."""

    def __init__(self, plan, block_size):
        self.plan = plan
        cfg = plan.config
        self.block_size = block_size
        self.groups_per_block = block_size // KS.LW
        p0 = plan.problem_for(0)
        self.n, self.d = p0.n, p0.d
        u0, v0 = initial_weights(self.d, cfg["alpha"], None, None)
        self.w_plus0, self.w_minus0 = u0 + v0, u0 - v0
        self.mode = gradient_mode(cfg["gradient"], self.n, self.d, minibatch=cfg["batch_size"] is not None)
        self.tol = -1.0 if cfg["tol"] is None else float(cfg["tol"])
        self.batch_size = int(cfg["batch_size"] or 0)
        self.replace = bool(cfg["replace"])
        self.steps = int(cfg["steps"])
        self.ns_per_run_step = 150.0 / max(1, threads())  # refined after each chunk
        self._data = {}

    def cost_per_point(self):
        return self.steps * self.ns_per_run_step * 1e-9

    def wave_bytes_per_point(self):
        """Bytes :meth:`run_wave` allocates per point: the group state (a group's share), the lane parameters, the
        integer state, the random state and the permutation, and the outputs."""
        nf = KS.frames_for(self.n, self.d)
        state = nf * KS.FR + KS.N_LANE_PARAMS * KS.LW
        per_group = state + KS.LW * (KL.N_INT_ROWS * self.d + 1 + 4 + self.n + 2 + 2)
        outputs = (KL.N_FLOAT_ROWS + KL.N_INT_ROWS) * self.d + 2
        return 8 * (-(-per_group // KS.LW) + outputs)

    def max_wave_points(self):
        """Most points of an automatic wave: :data:`WAVE_STATE_BYTES` over :meth:`wave_bytes_per_point`. (Read by
        :func:`.execute.waves`; the results of the points do not depend on how they are cut into waves.)"""
        return max(1, WAVE_STATE_BYTES // self.wave_bytes_per_point())

    def _rep_data(self, rep):
        got = self._data.get(rep)
        if got is None:
            p = self.plan.problem_for(rep)
            n, d = p.n, p.d
            npad, dpad = round_up(n, KS.TILE), round_up(d, KS.TILE)
            X = np.zeros((npad, dpad))
            X[:n, :d] = p.X
            if uses_hessian(self.mode):
                H = np.zeros((dpad, dpad))
                H[:d, :d] = p.hessian
            else:  # (the lanes read H only in the Hessian form: d × d is never formed for wide data)
                H = np.zeros((0, 0))
            b = np.zeros(dpad)
            b[:d] = p.b
            y = np.zeros(npad)
            y[:n] = p.y
            got = (X, np.ascontiguousarray(X.T), y, H, b)
            self._data[rep] = got
        return got

    def run_wave(self, points, flag, bar):
        """Advance the wave's points to the end. Returns the per-point outputs, or None if interrupted.

        ``points``: list of flat point indices (all of one wave, grouped by rep by the caller).
        """
        plan = self.plan
        # groups of LW lanes, one rep per group
        reps = [np.unravel_index(p, plan.shape)[0] for p in points]
        groups = []
        cur, cur_rep = [], None
        for local, r in enumerate(reps):
            if cur and (r != cur_rep or len(cur) == KS.LW):
                groups.append((cur_rep, cur))
                cur = []
            cur.append(local)
            cur_rep = r
        if cur:
            groups.append((cur_rep, cur))
        used_reps = sorted({r for r, _ in groups})
        rep_slot = {r: i for i, r in enumerate(used_reps)}
        data = [self._rep_data(r) for r in used_reps]
        Xs, XTs, ys, Hs, bs = (np.ascontiguousarray(np.stack([dd[k] for dd in data])) for k in range(5))
        ng = len(groups)
        nf = KS.frames_for(self.n, self.d)
        gam = np.zeros((ng, KS.LW))
        bet = np.zeros((ng, KS.LW))
        seeds = np.zeros((ng, KS.LW), dtype=np.int64)
        valid = np.zeros((ng, KS.LW), dtype=np.bool_)
        pts = np.full((ng, KS.LW), -1, dtype=np.int64)
        group_rep = np.zeros(ng, dtype=np.int64)
        for q, (r, members) in enumerate(groups):
            group_rep[q] = rep_slot[r]
            for g, local in enumerate(members):
                _, gam[q, g], bet[q, g] = plan.gamma_beta(points[local])
                seeds[q, g] = plan.seed_of(int(r))
                valid[q, g] = True
                pts[q, g] = local
        ST = aligned((ng, nf * KS.FR))
        LANE = aligned((ng, KS.N_LANE_PARAMS * KS.LW))
        IST = np.zeros((ng, KL.N_INT_ROWS, self.d, KS.LW), dtype=np.int64)
        ACT = np.zeros((ng, KS.LW), dtype=np.int64)
        RNG = np.zeros((ng, KS.LW, 4), dtype=np.uint64)
        PERM = np.zeros((ng, KS.LW, self.n), dtype=np.int64)
        KS._init_groups(ST, LANE, IST, ACT, RNG, PERM, gam, bet, seeds, valid, self.w_plus0, self.w_minus0)
        npts = len(points)
        OUT_F = np.zeros((npts, KL.N_FLOAT_ROWS, self.d))
        OUT_I = np.zeros((npts, KL.N_INT_ROWS, self.d), dtype=np.int64)
        OUT_STATUS = np.zeros(npts, dtype=np.int64)
        OUT_STEPS = np.zeros(npts, dtype=np.int64)
        total = self.steps
        k0 = 0
        credited = 0
        chunk = max(16, min(total, 256))
        while True:
            n_steps = min(chunk, total - k0)
            t0 = time.perf_counter()
            with numba.parallel_chunksize(1):  # blocks are handed out one at a time (balance)
                KS._sweep_chunk(self.mode, Xs, XTs, ys, Hs, bs, self.n, self.d, self.tol, self.batch_size,
                                self.replace, group_rep, ST, LANE, IST, ACT, RNG, PERM, pts, k0, n_steps,
                                total, self.groups_per_block, OUT_F, OUT_I, OUT_STATUS, OUT_STEPS)
            elapsed = time.perf_counter() - t0
            k0 += n_steps
            if bar is not None:
                bar.update(npts * n_steps)
                credited += npts * n_steps
            if n_steps > 0 and elapsed > 0.02:
                self.ns_per_run_step = elapsed / (n_steps * npts) * 1e9
            if n_steps > 0:
                rate = elapsed / n_steps
                chunk = int(min(max(16, CHUNK_SECONDS / max(rate, 1e-9)), 1 << 20))
            if k0 >= total or not ACT.any():
                break
            if flag["signum"] is not None:
                return None
        if bar is not None and credited < npts * total:
            bar.update(npts * total - credited)
        return OUT_F, OUT_I, OUT_STATUS, OUT_STEPS

    def finish_points(self, points, outputs):
        return finish_mgd_points(self.plan, points, outputs, self.w_plus0, self.w_minus0)


def finish_mgd_points(plan, points, outputs, w_plus0, w_minus0):
    """The fields of a wave's MGD/SMGD points (their :func:`~dlnmomentum.runs.points.point_columns`) from the kernel
    outputs ``(fstate, istate, status, steps)``.

    Shared by every discrete engine (CPU lockstep, CUDA): the outputs are per point in the
    single-run kernel's layout, so the fields are exactly those of the single run.
    """
    OUT_F, OUT_I, OUT_STATUS, OUT_STEPS = outputs
    cfg = plan.config
    npts = len(points)
    # the whole wave at once (mgd_columns): one call per point was most of a short-run sweep's time
    reps, rest = np.divmod(np.asarray(points, dtype=np.int64), int(np.prod(plan.grid_shape)))
    betas = plan.point_beta.ravel()[rest]
    # (each point's Problem through an object array: no Python step per point)
    uniq, which = np.unique(reps, return_inverse=True)
    table = np.empty(len(uniq), dtype=object)
    for k, r in enumerate(uniq):
        table[k] = plan.problem_for(int(r))
    return mgd_columns(table[which], betas, OUT_F[:npts], OUT_I[:npts], OUT_STATUS, OUT_STEPS, w_plus0, w_minus0,
                       cfg["theory"], cfg["theory_tol"])
