r"""MGD / SMGD on the GPU: many independent runs, one warp per run, advanced by a chunk of steps.

What it computes
----------------
Each run is one run of :func:`dlnmomentum.kernels.mgd._mgd_advance` with its own ``(γ, β)``, data set
and (SMGD) random state: with :math:`g_k = \nabla L_{\mathcal B_k}(\theta_k)` and ``fma(x, y, z) = x·y + z``
rounded once,

.. math::

    w_{+,k+1} = \mathrm{fma}(\beta,\ w_{+,k} - w_{+,k-1},\ \mathrm{fma}(-\gamma g_k,\ w_{+,k},\ w_{+,k})),\qquad
    w_{-,k+1} = \mathrm{fma}(\beta,\ w_{-,k} - w_{-,k-1},\ \mathrm{fma}(\gamma g_k,\ w_{-,k},\ w_{-,k})),

:math:`\theta = (w_+^2 - w_-^2)/4`, and the same accumulators, in the same state layout
(:mod:`.mgd` row constants): the Lemma 4 sums
:math:`A_\pm \mathrel{+}= (w' - w)\,\mathrm{fma}(-\beta, 1/w', 1/w)` with Neumaier compensation, the
gradient momentum :math:`M = \mathrm{fma}(\beta, M, g)` and the mirror sum :math:`G \mathrel{+}= \gamma M`
(compensated), sign crossings of :math:`w_\pm` (count, first and last step), the running minimum of
:math:`\Delta = |w_+ w_-|`; the convergence test :math:`L(\theta_k) \le` ``tol`` before an update and the
divergence test (an update leaving ``(-OVERFLOW, OVERFLOW)``, NaN included, is not committed).

Every floating-point operation of a run is the single-run kernel's operation on the same operands in
the same order: the gradient sums run over the column index in increasing order from +0.0 with one
fused multiply-add per term (each lane owns whole sums, there is no tree reduction), products that
feed an addition are rounded on their own (:func:`.cuda_compat.mul`), divisions are IEEE. So a run
is meant to be **bitwise equal** to the CPU kernel; the test-suite checks it under the simulator and
``benchmarks/cuda_check.py`` on a GPU.

Layout
------
One warp per run; lane ``l`` owns coordinates ``l, l + 32, ...`` (``NPL = ceil(d/32)`` per lane)
and, for the residuals ``Xθ - y``, samples ``l, l + 32, ...``. The run's state lives in registers
during a launch and in device arrays between launches, in the CPU layout:

* ``FS`` float64 ``(runs, N_FLOAT_ROWS, d)``: row ``r`` of run ``p`` is ``fstate[r]`` of the single-run
  kernel (w±, previous w±, A± and their compensations, momentum, mirror sum and compensation, min Δ);
* ``IS`` int64 ``(runs, N_INT_ROWS, d)``: ``istate`` (crossing counts, first and last crossing steps);
* ``STATUS`` int64 ``(runs,)``: ``RUNNING`` / ``CONVERGED`` / ``DIVERGED`` (kernel codes of :mod:`.mgd`);
* ``STEPS`` int64 ``(runs,)``: updates done (the single-run ``counters[0]``);
* ``RNG`` uint64 ``(runs, 4)`` and ``PERM`` int64 ``(runs, n)``: the xoshiro256** state and the
  persistent permutation of :func:`.rng._draw_batch` (SMGD only).

θ is exchanged through shared memory once per step (two buffers, alternating), the residuals of a
step through shared memory; the warp agrees on divergence with one vote. For ``d <= 32`` and
``n <= 32`` the lane's column of ``H`` (or of ``X`` and ``Xᵀ``) is held in registers for the whole
launch; otherwise it is read from global memory (cached: every run of a data set reads the same
matrix). 1/w± are recomputed from w± at the start of a launch, as the single-run kernel does at the
start of a call, so that chunking never changes a bit.

Kernels are specialised (compiled once per shape) on ``d``, ``n``, the batch size, the mode, the
sampling rule, whether the loss is tested and the warps per block: loops then have constant trip
counts and the per-lane columns stay in registers. :func:`get_kernel` builds and caches them;
:func:`launch_config` says how they are launched.
"""

import numpy as np

from . import cuda_compat
from .config import OVERFLOW
from .cuda_compat import cuda, device, fma, mul, warp_sync, warp_sync_all
from .cuda_limits import WARP, check_shape
from .mgd import (
    CONVERGED,
    CROSS_MINUS,
    CROSS_PLUS,
    DIVERGED,
    FIRST_CROSS_MINUS,
    FIRST_CROSS_PLUS,
    GRAD_MOMENTUM,
    LAST_CROSS_MINUS,
    LAST_CROSS_PLUS,
    MIN_DELTA,
    MIRROR_COMP,
    MIRROR_SUM,
    MODE_DATA,
    MODE_HESSIAN,
    MODE_MINIBATCH,
    RUNNING,
    S_COMP_MINUS,
    S_COMP_PLUS,
    S_SUM_MINUS,
    S_SUM_PLUS,
    W_MINUS,
    W_MINUS_PREV,
    W_PLUS,
    W_PLUS_PREV,
)

#: Static shared memory a block may use (bytes).
SHARED_LIMIT = 48 * 1024
#: Warps per block when the shared memory allows it (several resident runs per block).
DEFAULT_WARPS_PER_BLOCK = 4
#: Most warps a block may have (CUDA's limit of 1 024 threads per block).
MAX_WARPS_PER_BLOCK = 1024 // WARP
#: Software pipelining: the accumulator update (two IEEE divisions, compensated sums, crossings) of
#: step k is issued after the gradient of step k+1, in one straight-line block, so that the GPU may
#: overlap its latency with the gradient's chain of fused multiply-adds. The operations and their
#: operands are unchanged (every select picks what the branchy version would compute): bit for bit
#: the same results. Measured on an H100 (benchmarks/README.md): the straight-line commit took the
#: kernel from 0.456 to 0.353 ns per run-step; the deferral itself gains ~1 %, a register cap
#: (128, 96, 80) loses 10-60 %, and rcp.rn.f64 instead of div.rn.f64 changes nothing.
PIPELINE = True

SIMULATOR = cuda_compat.SIMULATOR

# ---------------------------------------------------------------------------------------------------
# xoshiro256** on scalars (the device version of .rng: same numbers, state in registers)
# ---------------------------------------------------------------------------------------------------

_U0 = np.uint64(0)
_U5 = np.uint64(5)
_U7 = np.uint64(7)
_U9 = np.uint64(9)
_U17 = np.uint64(17)
_U45 = np.uint64(45)
_U64 = np.uint64(64)


@device
def _rotl(x, k):
    return (x << k) | (x >> (_U64 - k))


@device
def _next_u64(s0, s1, s2, s3):
    """One xoshiro256** output and the next state (:func:`.rng._next_u64` on scalars)."""
    result = _rotl(s1 * _U5, _U7) * _U9
    t = s1 << _U17
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    s3 = _rotl(s3, _U45)
    return result, s0, s1, s2, s3


@device
def _below(n, s0, s1, s2, s3):
    """Uniform integer in [0, n) by rejection, as :func:`.rng._below`; returns it and the next state."""
    un = np.uint64(n)
    threshold = (_U0 - un) % un
    while True:
        x, s0, s1, s2, s3 = _next_u64(s0, s1, s2, s3)
        if x >= threshold:
            return np.int64(x % un), s0, s1, s2, s3


@device
def _neumaier(total, comp, term):
    """(t, comp') of the compensated sum total + term (the single-run kernels' Neumaier step)."""
    t = total + term
    if abs(total) >= abs(term):
        comp += (total - t) + term
    else:
        comp += (term - t) + total
    return t, comp


@device
def _neumaier_if(do, total, comp, term):
    """:func:`_neumaier` when ``do``, else ``(total, comp)`` unchanged; straight-line code (selects)."""
    t = total + term
    c1 = (total - t) + term
    c2 = (term - t) + total
    nc = comp + (c1 if abs(total) >= abs(term) else c2)
    return (t if do else total), (nc if do else comp)


@device
def _commit(do, k, step, beta, gamma, a, e, g, wp, wm, wpp, wmp, ip, im, sp, cp, sm, cm, mom, mir, mirc, mind,
            ist):
    """Commit the accepted update ``w±[k] -> (a, e)`` of update number ``step`` with gradient ``g`` when ``do``.

    The single-run kernel's accumulator step, in straight-line code: the Lemma 4 sums
    ``A± += (w' - w)·fma(-β, 1/w', 1/w)`` (compensated), sign crossings (count, first, last step),
    the momentum ``M = fma(β, M, g)`` and mirror sum ``G += γM`` (compensated), ``min Δ``, and the
    rotation of w± and their previous values. Every value is computed and then selected, so the
    result is exactly the branchy version's, and nothing changes when ``do`` is false.
    """
    wpk = wp[k]
    wmk = wm[k]
    inv_a = 1.0 / a
    inv_e = 1.0 / e
    sp[k], cp[k] = _neumaier_if(do, sp[k], cp[k], mul(a - wpk, fma(-beta, inv_a, ip[k])))
    sm[k], cm[k] = _neumaier_if(do, sm[k], cm[k], mul(e - wmk, fma(-beta, inv_e, im[k])))
    ip[k] = inv_a if do else ip[k]
    im[k] = inv_e if do else im[k]
    cross_p = do and ((a < 0.0) != (wpk < 0.0))
    cross_m = do and ((e < 0.0) != (wmk < 0.0))
    count_p = ist[CROSS_PLUS, k] + (1 if cross_p else 0)
    count_m = ist[CROSS_MINUS, k] + (1 if cross_m else 0)
    ist[FIRST_CROSS_PLUS, k] = step if (cross_p and count_p == 1) else ist[FIRST_CROSS_PLUS, k]
    ist[FIRST_CROSS_MINUS, k] = step if (cross_m and count_m == 1) else ist[FIRST_CROSS_MINUS, k]
    ist[LAST_CROSS_PLUS, k] = step if cross_p else ist[LAST_CROSS_PLUS, k]
    ist[LAST_CROSS_MINUS, k] = step if cross_m else ist[LAST_CROSS_MINUS, k]
    ist[CROSS_PLUS, k] = count_p
    ist[CROSS_MINUS, k] = count_m
    mk = fma(beta, mom[k], g)
    mom[k] = mk if do else mom[k]
    mir[k], mirc[k] = _neumaier_if(do, mir[k], mirc[k], mul(gamma, mk))
    delta = abs(mul(a, e))
    mind[k] = delta if (do and delta < mind[k]) else mind[k]
    wpp[k] = wpk if do else wpp[k]
    wmp[k] = wmk if do else wmp[k]
    wp[k] = a if do else wpk
    wm[k] = e if do else wmk


# ---------------------------------------------------------------------------------------------------
# Launch configuration
# ---------------------------------------------------------------------------------------------------

def shared_bytes_per_warp(d, n, batch_size):
    """Upper bound of one warp's shared memory: two θ buffers, residuals, permutation, batch rows and
    residuals, votes (8-byte words; the compiler drops the arrays a specialisation does not use)."""
    dp = -(-d // WARP) * WARP
    np_ = -(-n // WARP) * WARP
    bp = -(-max(batch_size, 1) // WARP) * WARP
    return 8 * (2 * dp + 2 * np_ + 2 * bp + 2 * WARP)


def launch_config(n_runs, d, n, batch_size, warps_per_block=None):
    """(blocks, threads per block, warps per block) for ``n_runs`` runs.

    The simulator runs one warp per block (its warp primitives are block barriers). An explicit
    ``warps_per_block`` that the shared memory cannot hold is refused; the default is lowered to fit.
    """
    if SIMULATOR:
        wpb = 1
    else:
        fit = max(1, SHARED_LIMIT // shared_bytes_per_warp(d, n, batch_size))
        if warps_per_block is not None and int(warps_per_block) > fit:  # (asked for: said, not lowered silently)
            raise ValueError(f"warps_per_block={int(warps_per_block)} needs more than the {SHARED_LIMIT} bytes of "
                             f"shared memory a block may use at d={d}, n={n}, batch_size={batch_size}: at most {fit}")
        wpb = min(DEFAULT_WARPS_PER_BLOCK if warps_per_block is None else int(warps_per_block), fit)
    blocks = max(1, -(-n_runs // wpb))
    return blocks, wpb * WARP, wpb


_KERNELS = {}


def get_kernel(d, n, batch_size, mode, replace, check, warps_per_block, pipeline=None):
    """The kernel for this shape (built on first use, then cached). ``check``: test ``L(θ) <= tol``;
    ``pipeline``: defer each step's accumulator update past the next gradient (default :data:`PIPELINE`)."""
    pipeline = PIPELINE if pipeline is None else bool(pipeline)
    key = (int(d), int(n), int(batch_size), int(mode), bool(replace), bool(check), int(warps_per_block),
           pipeline)
    kern = _KERNELS.get(key)
    if kern is None:
        check_shape(d, n, batch_size)
        if mode not in (MODE_HESSIAN, MODE_DATA, MODE_MINIBATCH):
            raise ValueError(f"unknown mode {mode}")
        if mode == MODE_MINIBATCH and batch_size < 1:
            raise ValueError("MODE_MINIBATCH needs batch_size >= 1")
        kern = _build_kernel(*key)
        _KERNELS[key] = kern
    return kern


# ---------------------------------------------------------------------------------------------------
# The kernel
# ---------------------------------------------------------------------------------------------------

def _build_kernel(d, n, batch_size, mode, replace, check, warps_per_block, pipeline):
    """Compile-time constants of one specialisation, closed over by the kernel below."""
    D = d
    N = n
    B = max(batch_size, 1)
    WPB = warps_per_block
    NPL = -(-D // WARP)          # coordinates per lane
    NPN = -(-N // WARP)          # full-data residuals per lane
    NPB = -(-B // WARP)          # batch residuals per lane
    DP = NPL * WARP
    NP = NPN * WARP
    BP = NPB * WARP
    NF = float(N)
    BF = float(B)
    TWO_N = 2.0 * N
    HESS = mode == MODE_HESSIAN
    DATA = mode == MODE_DATA
    MINI = mode == MODE_MINIBATCH
    REPLACE = bool(replace)
    CHECK = bool(check)
    PIPE = bool(pipeline)
    RES = CHECK or DATA                  # full-data residuals needed every step
    # Columns in registers: one coordinate and one residual per lane (d, n <= 32).
    CACHE = NPL == 1 and NPN == 1 and not MINI
    HC = D if (CACHE and HESS) else 1    # column of H
    XC = N if (CACHE and DATA) else 1    # column of X (gradient Xᵀr)
    TC = D if (CACHE and RES) else 1     # column of Xᵀ (residual Xθ)
    f64 = np.float64
    i64 = np.int64

    @cuda.jit
    def kernel(Xs, XTs, ys, Hs, bs, reps, gammas, betas, tol, total, n_steps,
               FS, IS, STATUS, STEPS, RNG, PERM):
        th = cuda.shared.array((WPB, 2, DP), f64)      # θ of the current / next iterate
        rs = cuda.shared.array((WPB, NP), f64)         # residuals Xθ - y
        pm = cuda.shared.array((WPB, NP), i64)         # SMGD permutation
        bq = cuda.shared.array((WPB, BP), i64)         # SMGD batch rows
        br = cuda.shared.array((WPB, BP), f64)         # SMGD batch residuals
        votes = cuda.shared.array((WPB, 2, WARP), i64)  # divergence votes (simulator only)
        tid = cuda.threadIdx.x
        lane = tid % WARP
        wib = tid // WARP
        run = cuda.blockIdx.x * WPB + wib
        # Whole warps return together (the run index, status and steps are per warp).
        if run >= FS.shape[0]:
            return
        if STATUS[run] != RUNNING:
            return
        step = STEPS[run]
        stop = min(step + n_steps, total)
        if step >= stop:
            return
        rep = reps[run]
        gamma = gammas[run]
        beta = betas[run]
        X = Xs[rep]
        XT = XTs[rep]
        y = ys[rep]
        H = Hs[rep]
        b = bs[rep]

        wp = cuda.local.array(NPL, f64)
        wm = cuda.local.array(NPL, f64)
        wpp = cuda.local.array(NPL, f64)
        wmp = cuda.local.array(NPL, f64)
        ip = cuda.local.array(NPL, f64)
        im = cuda.local.array(NPL, f64)
        sp = cuda.local.array(NPL, f64)
        cp = cuda.local.array(NPL, f64)
        sm = cuda.local.array(NPL, f64)
        cm = cuda.local.array(NPL, f64)
        mom = cuda.local.array(NPL, f64)
        mir = cuda.local.array(NPL, f64)
        mirc = cuda.local.array(NPL, f64)
        mind = cuda.local.array(NPL, f64)
        bb = cuda.local.array(NPL, f64)
        g = cuda.local.array(NPL, f64)
        ap = cuda.local.array(NPL, f64)
        am = cuda.local.array(NPL, f64)
        pg = cuda.local.array(NPL, f64)
        racc = cuda.local.array(NPN, f64)
        ist = cuda.local.array((6, NPL), i64)
        hc = cuda.local.array(HC, f64)
        xc = cuda.local.array(XC, f64)
        tc = cuda.local.array(TC, f64)

        for k in range(NPL):
            c = lane + WARP * k
            if c < D:
                wp[k] = FS[run, W_PLUS, c]
                wm[k] = FS[run, W_MINUS, c]
                wpp[k] = FS[run, W_PLUS_PREV, c]
                wmp[k] = FS[run, W_MINUS_PREV, c]
                sp[k] = FS[run, S_SUM_PLUS, c]
                cp[k] = FS[run, S_COMP_PLUS, c]
                sm[k] = FS[run, S_SUM_MINUS, c]
                cm[k] = FS[run, S_COMP_MINUS, c]
                mom[k] = FS[run, GRAD_MOMENTUM, c]
                mir[k] = FS[run, MIRROR_SUM, c]
                mirc[k] = FS[run, MIRROR_COMP, c]
                mind[k] = FS[run, MIN_DELTA, c]
                for r in range(6):
                    ist[r, k] = IS[run, r, c]
                bb[k] = b[c] if HESS else 0.0
                theta = (mul(wp[k], wp[k]) - mul(wm[k], wm[k])) * 0.25
            else:
                # Padding coordinates: w = 1, θ = 0, ∇L = 0; never committed.
                wp[k] = 1.0
                wm[k] = 1.0
                wpp[k] = 1.0
                wmp[k] = 1.0
                sp[k] = 0.0
                cp[k] = 0.0
                sm[k] = 0.0
                cm[k] = 0.0
                mom[k] = 0.0
                mir[k] = 0.0
                mirc[k] = 0.0
                mind[k] = 1.0
                for r in range(6):
                    ist[r, k] = 0
                bb[k] = 0.0
                theta = 0.0
            ip[k] = 1.0 / wp[k]
            im[k] = 1.0 / wm[k]
            ap[k] = wp[k]  # a harmless operand for the commit's straight-line code while nothing is pending
            am[k] = wm[k]
            pg[k] = 0.0
            th[wib, 0, c] = theta
            th[wib, 1, c] = 0.0
        if CACHE:
            cl = lane if lane < D else 0
            ml = lane if lane < N else 0
            if HESS:
                for j in range(D):
                    hc[j] = H[j, cl] if lane < D else 0.0
            if DATA:
                for m in range(N):
                    xc[m] = X[m, cl] if lane < D else 0.0
            if RES:
                for j in range(D):
                    tc[j] = XT[j, ml] if lane < N else 0.0
        s0 = s1 = s2 = s3 = np.uint64(0)
        if MINI:
            s0 = RNG[run, 0]
            s1 = RNG[run, 1]
            s2 = RNG[run, 2]
            s3 = RNG[run, 3]
            for kk in range(NPN):
                m = lane + WARP * kk
                if m < N:
                    pm[wib, m] = PERM[run, m]
        warp_sync()

        cur = 0
        status = RUNNING
        pend = False  # an accepted proposal (ap, am, pg) whose commit is pending (PIPE)
        pstep = step
        while step < stop:
            # -- gradient (and residuals of the full data) at θ = th[cur] --------------------------
            if HESS:
                for k in range(NPL):
                    g[k] = 0.0
            if RES:
                for kk in range(NPN):
                    racc[kk] = 0.0
            if HESS or RES:
                # g_c = Σ_j H[j, c] θ_j and r_m = Σ_j Xᵀ[j, m] θ_j, j increasing, one θ_j load for both.
                for j in range(D):
                    t = th[wib, cur, j]
                    if HESS:
                        for k in range(NPL):
                            if CACHE:
                                hv = hc[j]
                            else:
                                c = lane + WARP * k
                                hv = H[j, c if c < D else 0]
                            g[k] = fma(hv, t, g[k])
                    if RES:
                        for kk in range(NPN):
                            if CACHE:
                                xv = tc[j]
                            else:
                                m = lane + WARP * kk
                                xv = XT[j, m if m < N else 0]
                            racc[kk] = fma(xv, t, racc[kk])
            if HESS:
                for k in range(NPL):
                    g[k] = g[k] - bb[k]
            if RES:
                for kk in range(NPN):
                    m = lane + WARP * kk
                    if m < N:
                        rs[wib, m] = racc[kk] - y[m]
                warp_sync()
                if CHECK:
                    # Every lane sums the same residuals in the same order: the test is warp-uniform.
                    tot = 0.0
                    for m in range(N):
                        v = rs[wib, m]
                        tot = tot + mul(v, v)
                    if tot / TWO_N <= tol:
                        status = CONVERGED
                        break
            if DATA:
                for k in range(NPL):
                    acc = 0.0
                    c = lane + WARP * k
                    cc = c if c < D else 0
                    for m in range(N):
                        xv = xc[m] if CACHE else X[m, cc]
                        acc = fma(xv, rs[wib, m], acc)
                    g[k] = acc / NF
            if MINI:
                if lane == 0:
                    for q in range(B):
                        if REPLACE:
                            row, s0, s1, s2, s3 = _below(N, s0, s1, s2, s3)
                        else:
                            kq, s0, s1, s2, s3 = _below(N - q, s0, s1, s2, s3)
                            kq += q
                            tmp = pm[wib, q]
                            pm[wib, q] = pm[wib, kq]
                            pm[wib, kq] = tmp
                            row = pm[wib, q]
                        bq[wib, q] = row
                warp_sync()
                for kb in range(NPB):
                    q = lane + WARP * kb
                    if q < B:
                        row = bq[wib, q]
                        acc = 0.0
                        for j in range(D):
                            acc = fma(X[row, j], th[wib, cur, j], acc)
                        br[wib, q] = acc - y[row]
                warp_sync()
                for k in range(NPL):
                    c = lane + WARP * k
                    cc = c if c < D else 0
                    acc = 0.0
                    for q in range(B):
                        acc = fma(X[bq[wib, q], cc], br[wib, q], acc)
                    g[k] = acc / BF

            if PIPE:
                # The previous step's commit, issued after this step's gradient: independent of it, in
                # the same straight-line block, so its divisions overlap the gradient's FMA chain.
                for k in range(NPL):
                    _commit(pend and lane + WARP * k < D, k, pstep, beta, gamma, ap[k], am[k], pg[k], wp, wm,
                            wpp, wmp, ip, im, sp, cp, sm, cm, mom, mir, mirc, mind, ist)
                pend = False

            # -- proposal, θ of the proposal, one barrier with the divergence vote -------------------
            # θ' goes to the other buffer before the vote, so that one barrier both publishes it and
            # agrees on divergence; a rejected proposal leaves only that buffer written.
            nxt = 1 - cur
            ok = True
            for k in range(NPL):
                c = lane + WARP * k
                if c < D:
                    gg = mul(gamma, g[k])
                    a = fma(beta, wp[k] - wpp[k], fma(-gg, wp[k], wp[k]))
                    e = fma(beta, wm[k] - wmp[k], fma(gg, wm[k], wm[k]))
                    ap[k] = a
                    am[k] = e
                    th[wib, nxt, c] = (mul(a, a) - mul(e, e)) * 0.25
                    ok = ok and abs(a) < OVERFLOW and abs(e) < OVERFLOW
            if not warp_sync_all(ok, votes, wib, nxt, lane):
                status = DIVERGED
                break

            # -- commit: accumulators, crossings, rotation (registers only) -------------------------
            step += 1
            for k in range(NPL):
                pg[k] = g[k]  # the gradient of this update (the next gradient overwrites g)
            pend = True
            pstep = step
            if not PIPE:
                for k in range(NPL):
                    _commit(lane + WARP * k < D, k, pstep, beta, gamma, ap[k], am[k], pg[k], wp, wm, wpp, wmp,
                            ip, im, sp, cp, sm, cm, mom, mir, mirc, mind, ist)
                pend = False
            cur = nxt
        if pend:  # a pipelined commit still pending when the loop ended (budget used or converged)
            for k in range(NPL):
                _commit(lane + WARP * k < D, k, pstep, beta, gamma, ap[k], am[k], pg[k], wp, wm, wpp, wmp,
                        ip, im, sp, cp, sm, cm, mom, mir, mirc, mind, ist)

        for k in range(NPL):
            c = lane + WARP * k
            if c < D:
                FS[run, W_PLUS, c] = wp[k]
                FS[run, W_MINUS, c] = wm[k]
                FS[run, W_PLUS_PREV, c] = wpp[k]
                FS[run, W_MINUS_PREV, c] = wmp[k]
                FS[run, S_SUM_PLUS, c] = sp[k]
                FS[run, S_COMP_PLUS, c] = cp[k]
                FS[run, S_SUM_MINUS, c] = sm[k]
                FS[run, S_COMP_MINUS, c] = cm[k]
                FS[run, GRAD_MOMENTUM, c] = mom[k]
                FS[run, MIRROR_SUM, c] = mir[k]
                FS[run, MIRROR_COMP, c] = mirc[k]
                FS[run, MIN_DELTA, c] = mind[k]
                for r in range(6):
                    IS[run, r, c] = ist[r, k]
        if MINI:
            warp_sync()
            for kk in range(NPN):
                m = lane + WARP * kk
                if m < N:
                    PERM[run, m] = pm[wib, m]
        if lane == 0:
            STATUS[run] = status
            STEPS[run] = step
            if MINI:
                RNG[run, 0] = s0
                RNG[run, 1] = s1
                RNG[run, 2] = s2
                RNG[run, 3] = s3

    return kernel
