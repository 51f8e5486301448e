r"""MGD / SMGD grids on a CUDA GPU: the host side of :mod:`dlnmomentum.kernels.cuda_mgd`.

:class:`CudaMGDSweep` holds many independent runs (points ``(rep, β, γ)``) in device arrays and
advances them in chunks (:meth:`~CudaMGDSweep.advance`); :meth:`~CudaMGDSweep.state` copies the
state back in the CPU single-run kernel's layout (``fstate (N_FLOAT_ROWS, d)``, ``istate
(N_INT_ROWS, d)`` per point, with the status and the steps done), so that the per-point code of the
CPU sweep turns it into fields unchanged. Each point is meant to be bit for bit the run of
``dlnmomentum.kernels.mgd._mgd_advance`` with the same arguments (see :mod:`.kernels.cuda_mgd`);
:func:`cpu_state` gives that reference state.

``numba.cuda`` is imported only when this engine is used (:func:`cuda_available`,
:class:`CudaMGDSweep`), never by ``import dlnmomentum``.
"""

import numpy as np

from ..kernels import layout as KL
from ..kernels import mgd as K
from ..kernels import status as KST
from ..problem import Problem
from ..runs.common import uses_hessian
from ..runs.mgd import initial_state
from ..validate import MAX_SEED, MAX_STEPS, as_array, as_float, as_int, check_data_scale, named

#: Modes by name (the kernel codes of :mod:`dlnmomentum.kernels.mgd`).
MODES = {"hessian": KL.MODE_HESSIAN, "data": KL.MODE_DATA, "minibatch": KL.MODE_MINIBATCH}

_INSTALL_HINT = ("install numba-cuda for your CUDA toolkit (e.g. pip install 'numba-cuda[cu12]') "
                 "and run on a machine with an NVIDIA GPU and driver")


def cuda_available():
    """(ok, reason): whether the CUDA engine can run here, and why (or why not).

    Imports ``numba.cuda`` (after the NumPy repair of :mod:`dlnmomentum.kernels.cuda_compat`) and
    asks it for a device; never raises.
    """
    try:
        from ..kernels import cuda_compat
    except Exception as exc:  # ImportError, or numba-cuda failing on its own imports
        return False, f"numba.cuda could not be imported ({type(exc).__name__}: {exc}); {_INSTALL_HINT}"
    if cuda_compat.SIMULATOR:
        return True, "CUDA simulator (NUMBA_ENABLE_CUDASIM=1): correct but very slow"
    cuda = cuda_compat.cuda
    try:
        if not cuda.is_available():
            return False, f"numba.cuda found no usable CUDA GPU or driver; {_INSTALL_HINT}"
        dev = cuda.get_current_device()
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        return True, f"{name} (compute capability {dev.compute_capability[0]}.{dev.compute_capability[1]})"
    except Exception as exc:
        return False, f"CUDA initialisation failed ({type(exc).__name__}: {exc}); {_INSTALL_HINT}"


class CudaUnavailableError(RuntimeError):
    """``device="cuda"`` was asked for where no GPU or no numba-cuda is available."""


def require_cuda():
    """Raise :class:`CudaUnavailableError` saying why ``device="cuda"`` cannot run here; else return the device."""
    ok, reason = cuda_available()
    if not ok:
        raise named(CudaUnavailableError(f"device='cuda' was requested but the CUDA engine cannot run: {reason}"),
                    "device=")
    return reason


def check_plan(plan):
    """Raise ValueError naming ``d``, ``n`` or ``batch_size`` when the kernels cannot run the plan's shape (d in
    [1, 512], n in [1, 1024]), with the way out (the CPU engine runs any shape). Called by
    :func:`.execute.check_device` before any work: a store is not created for a sweep that cannot run."""
    from ..kernels.cuda_limits import check_shape  # (no numba.cuda: a Dask client checks without a GPU)

    p0 = plan.problem_for(0)  # (every rep has its shape; cached, the engine uses it next)
    try:
        check_shape(p0.d, p0.n, int(plan.config["batch_size"] or 0))
    except ValueError as exc:
        raise ValueError(f"{exc}; device='cpu' runs this sweep") from None


def _as_mode(mode, batch_size):
    if isinstance(mode, str):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {sorted(MODES)} or a kernels.mgd MODE_* code, got {mode!r}")
        mode = MODES[mode]
    mode = as_int("mode", mode, low=0, high=2)
    if (mode == KL.MODE_MINIBATCH) != (batch_size is not None):
        raise ValueError("batch_size is given exactly when mode is MODE_MINIBATCH (SMGD), "
                         f"got mode={mode}, batch_size={batch_size}")
    return mode


def _public_status(status, steps_done, total):
    """Kernel codes -> the sweep's: a run still running that has done every step is MAX_STEPS."""
    out = np.asarray(status, dtype=np.int64).copy()
    out[(out == K.RUNNING) & (np.asarray(steps_done) >= total)] = KST.MAX_STEPS
    return out


class CudaMGDSweep:
    """Many MGD/SMGD runs on one GPU, one warp per run, advanced in chunks.

    Parameters
    ----------
    problems_by_rep : mapping or sequence of Problem
        ``problems_by_rep[rep]`` is the data set of rep ``rep`` (all with the same n and d).
    points : array-like (P, 3)
        ``(rep, beta, gamma)`` of every run.
    steps : int
        Updates per run (``total``); a run stops earlier when it converges or diverges.
    batch_size : int or None
        SMGD batch size B in [1, n] (mode ``MODE_MINIBATCH``); None for full batch.
    replace : bool
        SMGD with replacement (default: B distinct samples per batch).
    seeds : int or array-like (P,)
        Seed of each run's xoshiro256** state (stream 0, as ``dlnmomentum.mgd`` and the CPU sweep
        seed it); the CPU sweep uses ``seed + rep`` for every point of rep ``rep``.
    tol : float or None
        Stop a run at the first iterate with train loss ``<= tol``.
    mode : int or str
        ``MODE_HESSIAN`` (∇L = Hθ - b), ``MODE_DATA`` (Xᵀ(Xθ - y)/n) or ``MODE_MINIBATCH``, or their
        names ``"hessian"``, ``"data"``, ``"minibatch"``.
    w_plus0, w_minus0 : arrays (d,)
        Initial w₊ = u₀ + v₀ and w₋ = u₀ - v₀ (the same for every run).
    warps_per_block : int, optional
        Runs per thread block (default :data:`~dlnmomentum.kernels.cuda_mgd.DEFAULT_WARPS_PER_BLOCK`).

    Raises ValueError naming ``d``, ``n`` or ``batch_size`` when the kernels do not support the shape
    (d in [1, 512], n in [1, 1024]) and RuntimeError when no CUDA device (or no numba-cuda) is there.
    """

    def __init__(self, problems_by_rep, points, steps, batch_size=None, replace=False, seeds=0, tol=None,
                 mode=KL.MODE_HESSIAN, w_plus0=None, w_minus0=None, *, warps_per_block=None):
        require_cuda()
        from ..kernels import cuda_mgd as KC

        self._args = (problems_by_rep, points, steps, batch_size, replace, seeds, tol, mode, w_plus0, w_minus0)
        self._kwargs = {"warps_per_block": warps_per_block}

        self.KC = KC
        cuda = KC.cuda
        if isinstance(problems_by_rep, dict):
            reps_available = dict(problems_by_rep)
        else:
            reps_available = dict(enumerate(problems_by_rep))
        if not reps_available:
            raise ValueError("problems_by_rep is empty")
        pts = np.asarray(points, dtype=np.float64)
        if pts.ndim != 2 or pts.shape[1] != 3 or pts.shape[0] < 1:
            raise ValueError(f"points must have shape (P, 3) of (rep, beta, gamma) with P >= 1, got {pts.shape}")
        rep_of = pts[:, 0].astype(np.int64)
        if not np.array_equal(rep_of, pts[:, 0]) or not set(rep_of.tolist()) <= set(reps_available):
            raise ValueError(f"point reps must be keys of problems_by_rep {sorted(reps_available)}")
        betas = np.ascontiguousarray(pts[:, 1])
        gammas = np.ascontiguousarray(pts[:, 2])
        if not (np.all(np.isfinite(gammas)) and np.all(gammas > 0)):
            raise ValueError("every gamma must be finite and in (0, inf)")
        if not (np.all(betas >= 0) and np.all(betas < 1)):
            raise ValueError("every beta must be in [0, 1)")
        used = sorted(set(rep_of.tolist()))
        probs = [reps_available[r] for r in used]
        for r, p in zip(used, probs, strict=True):
            if not isinstance(p, Problem):
                raise TypeError(f"problems_by_rep[{r}] must be a dlnmomentum.Problem, got {type(p).__name__}")
            check_data_scale(p)  # (X * 1e200: refused by name, as the CPU runs do, not runs that "diverge")
        n, d = probs[0].n, probs[0].d
        for r, p in zip(used, probs, strict=True):
            if (p.n, p.d) != (n, d):
                raise ValueError(f"every problem must have the same (n, d) = ({n}, {d}); rep {r} has ({p.n}, {p.d})")
        if batch_size is not None:
            batch_size = as_int("batch_size", batch_size, low=1, high=n)
        self.mode = _as_mode(mode, batch_size)
        self.batch_size = 0 if batch_size is None else batch_size
        KC.check_shape(d, n, self.batch_size)
        self.n, self.d, self.n_points = n, d, pts.shape[0]
        self.total = as_int("steps", steps, low=0, high=MAX_STEPS)
        self.replace = bool(replace)
        self.tol = as_float("tol", tol, low=0.0, allow_none=True)
        self.w_plus0 = as_array("w_plus0", w_plus0, ndim=1, shape=(d,))
        self.w_minus0 = as_array("w_minus0", w_minus0, ndim=1, shape=(d,))
        if not np.all(np.abs(self.w_plus0 * self.w_minus0) > 0):
            raise ValueError("w_plus0 and w_minus0 must be non-zero in every coordinate (balancedness > 0)")
        seeds = np.asarray(seeds)
        if seeds.ndim > 1 or (seeds.ndim == 1 and seeds.shape[0] != self.n_points):
            raise ValueError(f"seeds must be one seed or one per point ({self.n_points}), got shape {seeds.shape}")
        seeds = np.broadcast_to(seeds, (self.n_points,))
        # (the one seed range of validate.as_seed: a uint64 seed above 2**63 - 1 would wrap in the int64 below)
        if not np.issubdtype(seeds.dtype, np.integer) or np.any(seeds < 0) or np.any(seeds > MAX_SEED):
            raise ValueError(f"seeds must be integers in [0, {MAX_SEED}] (2**63 - 1), one or one per point")
        self.seeds = seeds.astype(np.int64)
        self.points = pts
        # (validated here, before the simulator ignores it: 0, -3 or 2.5 were taken as 1 or 2 without a word)
        warps_per_block = as_int("warps_per_block", warps_per_block, low=1, high=KC.MAX_WARPS_PER_BLOCK,
                                 allow_none=True)
        self.blocks, self.threads, self.warps_per_block = KC.launch_config(
            self.n_points, d, n, self.batch_size, warps_per_block)
        self._kernel = KC.get_kernel(d, n, self.batch_size, self.mode, self.replace, self.tol is not None,
                                     self.warps_per_block)

        slot = {r: i for i, r in enumerate(used)}
        Xs = np.stack([p.X for p in probs])
        # H = XᵀX/n only where the kernel reads it (the CPU engines' rule, runs.common.uses_hessian): the data and
        # minibatch forms get a (reps, 1, 1) placeholder they never read, so wide data never forms the d × d matrix
        # (1 × 1 rather than 0 × 0: zero-size device arrays have had copy and contiguity bugs in numba-cuda).
        Hs = np.stack([p.hessian for p in probs]) if uses_hessian(self.mode) else np.zeros((len(probs), 1, 1))
        self._data = tuple(cuda.to_device(np.ascontiguousarray(a)) for a in (
            Xs, np.transpose(Xs, (0, 2, 1)), np.stack([p.y for p in probs]), Hs, np.stack([p.b for p in probs])))
        self._params = tuple(cuda.to_device(a) for a in (
            np.array([slot[r] for r in rep_of.tolist()], dtype=np.int64), gammas, betas))
        fstate, istate = initial_state(self.w_plus0, self.w_minus0, self.n_points)
        status = np.zeros(self.n_points, dtype=np.int64)
        steps_done = np.zeros(self.n_points, dtype=np.int64)
        from ..kernels.rng import _seed_state

        rng = np.zeros((self.n_points, 4), dtype=np.uint64)
        for p in range(self.n_points):
            _seed_state(int(self.seeds[p]), 0, rng[p])
        perm = np.tile(np.arange(n, dtype=np.int64), (self.n_points, 1))
        self._state = None
        self.load_state(fstate, istate, status, steps_done, rng, perm)

    # -- running ---------------------------------------------------------------------------------
    def advance(self, n_steps):
        """Advance every unfinished run by up to ``n_steps`` updates (one kernel launch, asynchronous).

        Returns the number of steps the launch was asked for (0 when nothing is left to do).
        """
        n_steps = as_int("n_steps", n_steps, low=0)
        n_steps = min(n_steps, self.total)
        if n_steps == 0:
            return 0
        FS, IS, STATUS, STEPS, RNG, PERM = self._state
        self._kernel[self.blocks, self.threads](
            *self._data, *self._params,
            np.float64(-1.0 if self.tol is None else self.tol), np.int64(self.total), np.int64(n_steps),
            FS, IS, STATUS, STEPS, RNG, PERM)
        return n_steps

    def synchronize(self):
        """Wait for the launched chunks to finish."""
        self.KC.cuda.synchronize()

    def steps_done(self):
        """Updates done by every run (host copy, waits for the device)."""
        return self._state[3].copy_to_host()

    def done(self):
        """True when every run has converged, diverged or done ``steps`` updates."""
        status = self._state[2].copy_to_host()
        steps = self._state[3].copy_to_host()
        return bool(np.all((status != K.RUNNING) | (steps >= self.total)))

    # -- state -----------------------------------------------------------------------------------
    def state(self):
        """Host copies ``(fstate (P, N_FLOAT_ROWS, d), istate (P, N_INT_ROWS, d), status (P,), steps_done (P,))``.

        ``fstate[p]``/``istate[p]`` are the single-run kernel's arrays of point p; ``status`` uses
        the sweep's codes (:mod:`dlnmomentum.kernels.status`): 0 running, 1 converged, 2 max_steps
        (every step done), 3 diverged.
        """
        FS, IS, STATUS, STEPS, _, _ = self._state
        steps = STEPS.copy_to_host()
        return (FS.copy_to_host(), IS.copy_to_host(), _public_status(STATUS.copy_to_host(), steps, self.total),
                steps)

    def rng_state(self):
        """Host copies ``(rng (P, 4) uint64, perm (P, n) int64)``: the SMGD random state of every run."""
        return self._state[4].copy_to_host(), self._state[5].copy_to_host()

    def checkpoint(self):
        """Every array needed to continue bit for bit (pass them to :meth:`load_state`)."""
        fstate, istate, status, steps = self.state()
        rng, perm = self.rng_state()
        return {"fstate": fstate, "istate": istate, "status": status, "steps_done": steps, "rng": rng,
                "perm": perm}

    def load_state(self, fstate, istate, status, steps_done, rng=None, perm=None):
        """Replace the device state (resume from :meth:`checkpoint`/:meth:`state`; shapes as there).

        ``rng``/``perm`` (SMGD random state) keep their current values when not given.
        """
        P, d, n = self.n_points, self.d, self.n
        cuda = self.KC.cuda

        def conv(name, a, shape, dtype):
            a = np.asarray(a)
            if a.shape != shape:
                raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
            if np.issubdtype(dtype, np.integer) and not np.issubdtype(a.dtype, np.integer):
                # (a float array was cast: 0.5 steps read as 0, a NaN as a huge integer)
                raise TypeError(f"{name} must be an integer array (as state() returns it), got dtype {a.dtype}")
            if np.issubdtype(dtype, np.unsignedinteger) and np.issubdtype(a.dtype, np.signedinteger) and np.any(a < 0):
                raise ValueError(f"{name} must hold unsigned 64-bit integers, got a negative entry")
            return np.ascontiguousarray(a, dtype=dtype)

        fstate = conv("fstate", fstate, (P, KL.N_FLOAT_ROWS, d), np.float64)
        istate = conv("istate", istate, (P, KL.N_INT_ROWS, d), np.int64)
        status = conv("status", status, (P,), np.int64).copy()
        steps_done = conv("steps_done", steps_done, (P,), np.int64)
        if np.any((status < 0) | (status > KST.DIVERGED)):
            raise ValueError("status codes must be 0 running, 1 converged, 2 max_steps or 3 diverged")
        if np.any((steps_done < 0) | (steps_done > self.total)):
            raise ValueError(f"steps_done must be in [0, steps={self.total}] for every point")
        if np.any((status == KST.MAX_STEPS) & (steps_done != self.total)):  # (else it would be run on below)
            raise ValueError(f"status 2 (max_steps) means steps_done = steps = {self.total}")
        status[status == KST.MAX_STEPS] = K.RUNNING  # the kernel stops at steps_done >= total by itself
        if rng is None or perm is None:
            if self._state is None:
                raise ValueError("rng and perm are needed for the first load")
            old_rng, old_perm = self.rng_state()
            rng = old_rng if rng is None else rng
            perm = old_perm if perm is None else perm
        rng = conv("rng", rng, (P, 4), np.uint64)
        perm = conv("perm", perm, (P, n), np.int64)
        # The kernel trusts both: an all-zero xoshiro256** state draws 0 forever (the batch draw's rejection loop
        # then never ends for n not a power of two), and a row index outside [0, n) is read out of bounds.
        if np.any(np.all(rng == 0, axis=1)):
            raise ValueError("rng must be a xoshiro256** state of every point: a row of four zeros is not one (it "
                             "draws 0 forever)")
        if not np.array_equal(np.sort(perm, axis=1), np.broadcast_to(np.arange(n), (P, n))):
            raise ValueError(f"perm must hold a permutation of 0, ..., n - 1 = {n - 1} for every point")
        self._state = tuple(cuda.to_device(a) for a in (fstate, istate, status, steps_done, rng, perm))


def cpu_state(problem, gamma, beta, steps, *, mode=KL.MODE_HESSIAN, tol=None, batch_size=None, replace=False,
              seed=0, w_plus0, w_minus0, chunk=None):
    """The CPU single-run kernel's final state for one point: ``(fstate, istate, status, steps_done)``.

    Runs :func:`dlnmomentum.kernels.mgd._mgd_advance` (in chunks of ``chunk`` steps if given) from the
    same initial state and random state as :class:`CudaMGDSweep`; ``status`` uses the same codes as
    :meth:`CudaMGDSweep.state`. The reference the CUDA engine is checked against.
    """
    mode = _as_mode(mode, batch_size)
    d = problem.d
    fstate, istate = initial_state(np.asarray(w_plus0, dtype=np.float64), np.asarray(w_minus0, dtype=np.float64))
    counters = np.zeros(1, dtype=np.int64)
    from ..kernels.rng import _seed_state

    rng = np.zeros(4, dtype=np.uint64)
    _seed_state(int(seed), 0, rng)
    perm = np.arange(problem.n, dtype=np.int64)
    X, XT, H, b = problem.kernel_arrays(hessian=uses_hessian(mode))  # (as MGDRun: no d × d matrix for wide data)
    no_steps = np.zeros(0, dtype=np.int64)
    status = K.RUNNING
    chunk = steps if chunk is None else max(1, int(chunk))
    while counters[0] < steps and status == K.RUNNING:
        status = K._mgd_advance(
            X, XT, problem.y, H, b, problem.X_test, problem.y_test,
            float(gamma), float(beta), mode, -1.0 if tol is None else float(tol),
            rng, perm, batch_size or 0, bool(replace),
            fstate, istate, counters, min(chunk, steps - int(counters[0])),
            no_steps, np.zeros(1, dtype=np.int64), 0, np.zeros(0, dtype=np.int64), np.zeros((0, KL.N_REC_VECTORS, d)),
            np.zeros((0, 2)))
    final = _public_status(np.array([status]), counters, steps)[0]
    return fstate, istate, int(final), int(counters[0])


# -------------------------------------------------------------------------------------------------
# Agreement with the CPU kernel (used by the tests and benchmarks/cuda_check.py)
# -------------------------------------------------------------------------------------------------

_FLOAT_ROW_NAMES = ("W_PLUS", "W_MINUS", "W_PLUS_PREV", "W_MINUS_PREV", "S_SUM_PLUS", "S_SUM_MINUS", "S_COMP_PLUS",
                    "S_COMP_MINUS", "GRAD_MOMENTUM", "MIRROR_SUM", "MIRROR_COMP", "MIN_DELTA")
_INT_ROW_NAMES = ("CROSS_PLUS", "CROSS_MINUS", "FIRST_CROSS_PLUS", "FIRST_CROSS_MINUS", "LAST_CROSS_PLUS",
                  "LAST_CROSS_MINUS")
#: fstate row names (lower case), in row order.
FLOAT_FIELDS = tuple(name.lower() for name in sorted(_FLOAT_ROW_NAMES, key=lambda s: getattr(K, s)))
#: istate row names (lower case), in row order.
INT_FIELDS = tuple(name.lower() for name in sorted(_INT_ROW_NAMES, key=lambda s: getattr(K, s)))


def _rel(a, b):
    """‖a - b‖/‖b‖ (0 when equal, inf when b = 0 != a); non-finite entries compare by identity."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    if same.all():
        return 0.0
    if not (np.all(np.isfinite(a[~same])) and np.all(np.isfinite(b[~same]))):
        return float("inf")
    nb = float(np.linalg.norm(np.where(same, 0.0, b)))
    diff = float(np.linalg.norm(np.where(same, 0.0, a - b)))
    return diff / nb if nb > 0 else float("inf")


def compare_states(got, ref):
    """Field-by-field comparison of two ``(fstate, istate, status, steps_done)`` tuples of P points.

    Returns ``{field: {"max_rel": worst ‖got - ref‖/‖ref‖ over points, "bitwise": points equal bit for
    bit, "points": P}}`` for every fstate row, every istate row, ``status`` and ``steps_done``, plus
    the compensated sums ``a_plus`` (S_SUM_PLUS + S_COMP_PLUS), ``a_minus`` and ``mirror``: the
    compensations alone are rounding-level numbers whose relative difference means little.
    """
    gf, gi, gs, gk = (np.asarray(x) for x in got)
    rf, ri, rs, rk = (np.asarray(x) for x in ref)
    P = rf.shape[0]
    out = {}

    def put(name, a_rows, b_rows):
        rels = [_rel(a_rows[p], b_rows[p]) for p in range(P)]
        bits = sum(bool(np.array_equal(np.asarray(a_rows[p]).view(np.uint8), np.asarray(b_rows[p]).view(np.uint8)))
                   for p in range(P))
        out[name] = {"max_rel": max(rels) if rels else 0.0, "bitwise": bits, "points": P}

    for name in FLOAT_FIELDS:
        row = getattr(K, name.upper())
        put(name, gf[:, row], rf[:, row])
    for name in INT_FIELDS:
        row = getattr(K, name.upper())
        put(name, gi[:, row], ri[:, row])
    put("status", gs.astype(np.int64)[:, None], rs.astype(np.int64)[:, None])
    put("steps_done", gk.astype(np.int64)[:, None], rk.astype(np.int64)[:, None])
    for name, s, c in (("a_plus", KL.S_SUM_PLUS, KL.S_COMP_PLUS), ("a_minus", KL.S_SUM_MINUS, KL.S_COMP_MINUS),
                       ("mirror", KL.MIRROR_SUM, KL.MIRROR_COMP)):
        put(name, gf[:, s] + gf[:, c], rf[:, s] + rf[:, c])
    return out


def run_chunks(engine, chunks, resume_after=None):
    """Advance ``engine`` by each chunk in turn; after chunk ``resume_after`` copy its checkpoint into a
    fresh engine with the same arguments (a resumed run) and go on with that one. Returns the engine."""
    for i, n_steps in enumerate(chunks):
        engine.advance(n_steps)
        if resume_after is not None and i == resume_after:
            ckpt = engine.checkpoint()
            engine = CudaMGDSweep(*engine._args, **engine._kwargs)
            engine.load_state(**ckpt)
    return engine


def cpu_states(problems_by_rep, points, steps, *, batch_size=None, replace=False, seeds=0, tol=None,
               mode=KL.MODE_HESSIAN, w_plus0, w_minus0):
    """:func:`cpu_state` of every point, stacked like :meth:`CudaMGDSweep.state`."""
    pts = np.asarray(points, dtype=np.float64)
    seeds = np.broadcast_to(np.asarray(seeds), (pts.shape[0],))
    res = [cpu_state(problems_by_rep[int(r)], g, b, steps, mode=mode, tol=tol, batch_size=batch_size,
                     replace=replace, seed=int(s), w_plus0=w_plus0, w_minus0=w_minus0)
           for (r, b, g), s in zip(pts, seeds, strict=True)]
    return (np.stack([r[0] for r in res]), np.stack([r[1] for r in res]),
            np.array([r[2] for r in res], dtype=np.int64), np.array([r[3] for r in res], dtype=np.int64))


#: Bytes of one wave's run state on the device (and of its copy on the host): automatic waves are cut to fit, so that
#: a sweep of many short runs is not one wave of all its points (1e6 points at d = 512 would hold 74 GB).
WAVE_STATE_BYTES = 1 << 30


class CudaEngine:
    """The sweep engine of ``device="cuda"``: waves of discrete points on the GPU (:class:`CudaMGDSweep`).

    Same protocol as :class:`~dlnmomentum.sweeps.lockstep.LockstepEngine`; the state of a wave
    lives on the device between launches, chunks are sized to about ``CHUNK_SECONDS`` so that the
    progress bar and Ctrl-C respond, and the point fields are computed by the same function as on
    the CPU from the kernel state copied back.
    """

    def __init__(self, plan, block_size=None):
        from ..runs.common import gradient_mode, initial_weights

        if not plan.discrete:
            raise ValueError("device='cuda' runs discrete (gammas, betas) sweeps; flow sweeps (lams=...) run on "
                             "the CPU engine (device='cpu')")
        require_cuda()
        check_plan(plan)  # (again here: Dask workers build engines without check_device)
        self.plan = plan
        cfg = plan.config
        p0 = plan.problem_for(0)
        self.n, self.d = p0.n, p0.d
        u0, v0 = initial_weights(self.d, cfg["alpha"], None, None)
        self.w_plus0, self.w_minus0 = u0 + v0, u0 - v0
        self.mode = gradient_mode(cfg["gradient"], self.n, self.d, minibatch=cfg["batch_size"] is not None)
        self.steps = int(cfg["steps"])
        self.ns_per_run_step = 1.0  # refined after each launch

    def cost_per_point(self):
        return self.steps * self.ns_per_run_step * 1e-9

    def wave_threads(self):
        """1: :meth:`cost_per_point` is the device's time per point (its throughput, measured over whole waves), not
        one CPU thread's, so automatic waves are sized by it alone (:func:`.execute.waves`)."""
        return 1

    def max_wave_points(self):
        """Most points of an automatic wave: :data:`WAVE_STATE_BYTES` over one run's state (fstate, istate, the
        permutation, the random state, status and steps)."""
        per_point = 8 * ((KL.N_FLOAT_ROWS + KL.N_INT_ROWS) * self.d + self.n + 4 + 2)
        return max(1, WAVE_STATE_BYTES // per_point)

    def run_wave(self, points, flag, bar):
        import time

        from .lockstep import CHUNK_SECONDS

        plan, cfg = self.plan, self.plan.config
        rgb = np.array([plan.gamma_beta(p) for p in points], dtype=np.float64)  # (rep, gamma, beta)
        reps = rgb[:, 0].astype(np.int64)
        triples = np.stack([rgb[:, 0], rgb[:, 2], rgb[:, 1]], axis=1)
        problems = {int(r): plan.problem_for(int(r)) for r in np.unique(reps)}
        engine = CudaMGDSweep(problems, triples, self.steps, batch_size=cfg["batch_size"],
                              replace=bool(cfg["replace"]), seeds=np.array([plan.seed_of(int(r)) for r in reps]),
                              tol=cfg["tol"], mode=self.mode, w_plus0=self.w_plus0, w_minus0=self.w_minus0)
        npts, k0, chunk = len(points), 0, 256
        while k0 < self.steps:
            n_steps = min(chunk, self.steps - k0)
            t0 = time.perf_counter()
            engine.advance(n_steps)
            finished = engine.done()  # synchronises: the launch has run
            elapsed = time.perf_counter() - t0
            k0 += n_steps
            if bar is not None:
                bar.update(npts * n_steps)
            if elapsed > 0.02:
                self.ns_per_run_step = elapsed / (n_steps * npts) * 1e9
            chunk = int(min(max(16, n_steps * CHUNK_SECONDS / max(elapsed, 1e-9)), 1 << 24))
            if finished:
                break
            if flag["signum"] is not None:
                return None
        if bar is not None and k0 < self.steps:  # every run ended early: the bar counts the steps they did not need
            bar.update(npts * (self.steps - k0))
        return engine.state()

    def finish_points(self, points, outputs):
        from .lockstep import finish_mgd_points

        return finish_mgd_points(self.plan, points, outputs, self.w_plus0, self.w_minus0)
