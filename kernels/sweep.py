r"""Lockstep MGD / SMGD: many independent runs on the same data, advanced together.

What it computes
----------------
Every *lane* is one run of :func:`dlnmomentum.kernels.mgd._mgd_advance` with its
own ``(γ, β)`` (and, for SMGD, its own random state): the same update rule, the
same accumulators (sums :math:`A_\pm` of Lemma 4 with Neumaier compensation, the
mirror variable, sign crossings, the running minimum of :math:`\Delta`), the same
convergence test (``L(θ) <= tol`` before an update) and the same divergence test
(an update leaving ``(-OVERFLOW, OVERFLOW)`` is not committed). Every
floating-point operation of a lane is the single-run operation on the same
operands in the same order, so every lane is **bitwise equal** to the single-run
kernel; the test-suite checks this.

Layout
------
Lanes come in *groups* of ``LW = 8`` (two AVX2 registers of doubles). A group's
state is one flat float64 array of ``NF`` *frames*, one per coordinate
(``NF >= d`` and ``>= n`` (residuals), padded to a multiple of ``TILE``); frame
``i`` holds ``NSLOT`` *slots* of ``LW`` lanes (``S_*`` below)::

    st[i * FR + slot * LW + g]          FR = NSLOT * LW

so that everything one coordinate needs is contiguous (20 cache lines, one per
slot), a slot is one vector and a group's hot state is ~35 KB for d = 30 (L1 and L2). ``w±``,
``1/w±`` and θ live in two buffers each (``WPA/WPB``, ``IPA/IPB``, ``THA/THB``, ...) whose
roles swap every step (no copies): after an even number of steps the current
values are in ``A``; the update overwrites the previous iterate with the new one.

One step of a group is one call of :func:`_step_update_sub` (Hessian form) or
:func:`_step_update_div` (data form): for each tile of ``TILE`` rows the gradient
is a register-blocked product of ``TILE`` rows of ``H`` (or ``Xᵀ``) with the
``LW`` lanes of θ (or of the residuals, :func:`_residual_loss`), summed over the
column in increasing order from +0.0 with fused multiply-adds; the ``TILE x LW``
sums then feed the fused update of those rows (:func:`_emit_row_update`: the
iterate, θ, ``1/w``, the two compensated Lemma 4 sums, the momentum and the
compensated mirror sum, min Δ), one row at a time. The Lemma 4
term of an update needs ``1/w_new``; it is added one step late, from the stored
``w`` and ``1/w`` (two buffers each), which takes the division off the longest
dependency chain of a row without changing an operand; exporting a lane adds the
pending term (:func:`_flush_lemma4`). SMGD lanes compute their minibatch gradient
one lane at a time (:func:`_minibatch_gradient`) and share the update
(:func:`_update_div`).

The vector code is generated directly as LLVM IR (Numba's SLP vectoriser is off
and its loop vectoriser cannot keep the sums in registers here), in the small
vector language of :mod:`.vec_ir` (``<LW x double>`` operations without fast-math
flags, ``llvm.fma`` exactly where the single-run kernel calls :func:`.config.fma`,
the register-blocked tile product): every lane performs the single-run operations
on the same operands, in the same order. This module writes the MGD step in that
language (the section "The fused step of a group") and keeps the group bookkeeping
in plain Numba.

Rare events leave the hot loop
------------------------------
The fused pass returns two ``LW``-bit lane masks from cheap conservative tests
(:func:`_flags`): lanes that may have changed sign and lanes whose proposal may
have overflowed. The
flagged lanes are then checked with the single-run tests; sign changes are
logged exactly (count, first and last step). A lane that diverged has already
overwritten its accumulators with the rejected update, so it is *parked* and,
at the end of the chunk, replayed alone from the chunk's starting snapshot up to
the step before the divergence (same code, same bits) to recover the state the
single-run kernel returns. A lane that converged is exported at once and
parked. A parked lane holds ``w± = 1``, ``γ = β = 0`` and so stays constant and
finite while the other lanes of its group go on.

Work distribution
-----------------
:func:`_sweep_chunk` advances every group by ``n_steps`` with ``prange`` over
blocks of consecutive groups; a thread owns its block's arrays, no memory is
shared for writing, so neither the thread count nor the block size can change
a bit.

Module size
-----------
This module is longer than the others because it is one unit: the frame layout, the
IR of the fused step that updates the frames and the Numba bookkeeping that
initialises, parks, exports and replays them all address the same slots, and they
are read together against :mod:`.mgd` to check that a lane is the single run. What
knows nothing of the method lives elsewhere: the vector language and the tile
product in :mod:`.vec_ir`, the state rows and modes in :mod:`.layout`.
"""

import numpy as np
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .config import JIT_OPTIONS, OVERFLOW, PARALLEL_JIT_OPTIONS, fma
from .layout import (
    CROSS_MINUS,
    CROSS_PLUS,
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
    N_INT_ROWS,
    S_COMP_MINUS,
    S_COMP_PLUS,
    S_SUM_MINUS,
    S_SUM_PLUS,
    W_MINUS,
    W_MINUS_PREV,
    W_PLUS,
    W_PLUS_PREV,
    round_up,
)
from .rng import _draw_batch, _seed_state
from .status import CONVERGED, DIVERGED, MAX_STEPS  # the outcome of a lane, in OUT_STATUS
from .vec_ir import (
    _VEC,
    LW,
    TILE,
    _c64,
    _data_ptr,
    _emit_tile_sums,
    _is_c_array,
    _mv_tile,
    _vconst,
    _VecOps,
)

# slots of a frame
S_WPA = 0
S_WPB = 1
S_WMA = 2
S_WMB = 3
S_THA = 4
S_THB = 5
S_IPA = 6    # 1/w+ (two buffers, like w+)
S_IPB = 7
S_IMA = 8    # 1/w-
S_IMB = 9
S_SP = 10
S_CP = 11
S_SM = 12
S_CM = 13
S_MOM = 14
S_MIR = 15
S_MIRC = 16
S_MIND = 17
S_GR = 18
S_RES = 19
NSLOT = 20
FR = NSLOT * LW

# lane parameters (per group: LANE[q, LP_* * LW + g])
LP_GAMMA = 0
LP_BETA = 1
N_LANE_PARAMS = 2


def frames_for(n, d):
    """Number of frames of a group state: d and n rounded up to ``TILE``."""
    return max(round_up(d, TILE), round_up(n, TILE))


# ---------------------------------------------------------------------------------------------------
# The fused step of a group, generated as LLVM IR (in the vector language of .vec_ir)
# ---------------------------------------------------------------------------------------------------

class _Offsets:
    """Runtime arguments of the update: slot offsets (in doubles) of the buffers that swap
    roles every step (current / next of w±, 1/w±, θ) and ``pending`` (nonzero when the
    Lemma 4 term of the previous step is still to be added)."""

    def __init__(self, wpc, wpn, wmc, wmn, thn, ipc, ipn, imc, imn, pending):
        self.wpc, self.wpn, self.wmc, self.wmn, self.thn = wpc, wpn, wmc, wmn, thn
        self.ipc, self.ipn, self.imc, self.imn, self.pending = ipc, ipn, imc, imn, pending


def _emit_row_update(builder, v, s, base, grad, gam, bet, off, size_acc, sign_acc):
    """The single-run step of the coordinate at frame offset ``base`` for LW lanes, given its gradient.

    Reads the frame, writes the new iterate over the previous one (``off.wpn``/``off.wmn``),
    θ of the new iterate into ``off.thn`` and every accumulator in place. Per lane it adds
    ``w₊'² + w₋'²`` of the row to ``size_acc`` and lowers ``sign_acc`` to
    ``min(w₊'·w₊, w₋'·w₋)`` where that is smaller; :func:`_flags` turns them into lane masks.

    The Lemma 4 sums lag one update behind (see :func:`_flush_lemma4`): the term of
    this update needs ``1/w_new``, a division whose latency would otherwise sit in the
    middle of the longest dependency chain of the row.
    """
    one, quarter = _vconst(1.0), _vconst(0.25)

    def at(o):
        return builder.add(base, o)

    def slot(k):
        return builder.add(base, _c64(k * LW))

    wp = v.load(s, at(off.wpc))
    wpp = v.load(s, at(off.wpn))
    wm = v.load(s, at(off.wmc))
    wmp = v.load(s, at(off.wmn))
    # eq. (w_mgd) as the single-run _propose writes it:
    # w+' = fma(β, w+ - w+prev, fma(-γ∇L, w+, w+)), w-' = fma(β, w- - w-prev, fma(γ∇L, w-, w-))
    gg = v.mul(gam, grad)
    a = v.fma(bet, v.sub(wp, wpp), v.fma(v.neg(gg), wp, wp))
    c = v.fma(bet, v.sub(wm, wmp), v.fma(gg, wm, wm))
    inv_a = v.div(one, a)
    inv_c = v.div(one, c)
    a2 = v.mul(a, a)
    c2 = v.mul(c, c)
    theta = v.mul(v.sub(a2, c2), quarter)
    # Conservative lane filters, turned into masks once per step by _flags (see there).
    builder.store(v.add(builder.load(size_acc), v.add(a2, c2)), size_acc)
    builder.store(v.min_lt(v.min_lt(v.mul(a, wp), v.mul(c, wm)), builder.load(sign_acc)), sign_acc)
    # mirror variable: M = fma(β, M, ∇L), G += γM (Neumaier)
    mom = v.fma(bet, v.load(s, slot(S_MOM)), grad)
    mir, mirc = v.neumaier(v.load(s, slot(S_MIR)), v.load(s, slot(S_MIRC)), v.mul(gam, mom))
    md = v.min_lt(v.abs(v.mul(a, c)), v.load(s, slot(S_MIND)))
    for value, where in ((a, at(off.wpn)), (c, at(off.wmn)), (theta, at(off.thn)), (mom, slot(S_MOM)),
                         (mir, slot(S_MIR)), (mirc, slot(S_MIRC)), (md, slot(S_MIND))):
        v.store(value, s, where)
    # Lemma 4 sums, one step late: the term of the previous update (w_prev -> w),
    # A += δ·fma(-β, 1/w, 1/w_prev), δ = w - w_prev (Neumaier), from stored w and 1/w:
    # the same operands as in the single-run kernel, off the chain of the division.
    with builder.if_then(builder.icmp_signed("!=", off.pending, _c64(0)), likely=True):
        nbet = v.neg(bet)
        term = v.mul(v.sub(wp, wpp), v.fma(nbet, v.load(s, at(off.ipc)), v.load(s, at(off.ipn))))
        sp, cp = v.neumaier(v.load(s, slot(S_SP)), v.load(s, slot(S_CP)), term)
        term = v.mul(v.sub(wm, wmp), v.fma(nbet, v.load(s, at(off.imc)), v.load(s, at(off.imn))))
        sm, cm = v.neumaier(v.load(s, slot(S_SM)), v.load(s, slot(S_CM)), term)
        for value, where in ((sp, slot(S_SP)), (cp, slot(S_CP)), (sm, slot(S_SM)), (cm, slot(S_CM))):
            v.store(value, s, where)
    v.store(inv_a, s, at(off.ipn))
    v.store(inv_c, s, at(off.imn))


def _finish_gradient(builder, v, form, acc, bdata, row, scale_v):
    """∇L_i from the column sum: ``acc - b_i`` (Hessian form) or ``acc / scale``."""
    if form == "sub":
        return v.sub(acc, v.splat(builder.load(builder.gep(bdata, [row]))))
    return v.div(acc, scale_v)


def _emit_rows(builder, v, s, sums, r0, nrows, form, bdata, scale_v, gam, bet, off, size_acc, sign_acc):
    """Update rows ``r0 .. r0+nrows-1`` from the column sums ``sums[k]``, one row after the other.

    (Emitting the code of two rows interleaved, for the out-of-order core to overlap their
    dependency chains, spills registers at LW = 8 and was slower.)
    """
    with cgutils.for_range(builder, nrows) as loop:
        k = loop.index
        row = builder.add(r0, k)
        grad = _finish_gradient(builder, v, form, builder.load(builder.gep(sums, [k])), bdata, row, scale_v)
        _emit_row_update(builder, v, s, builder.mul(row, _c64(FR)), grad, gam, bet, off, size_acc, sign_acc)


def _filter_accumulators(builder):
    """(size_acc, sign_acc) of a step: the sum of ``w₊'² + w₋'²`` over rows (from 0) and the minimum
    of ``min(w₊'·w₊, w₋'·w₋)`` over rows (from +inf), per lane."""
    return (cgutils.alloca_once_value(builder, _vconst(0.0)),
            cgutils.alloca_once_value(builder, _vconst(float("inf"))))


def _flags(builder, v, size_acc, sign_acc):
    """``bad | (changed << LW)`` lane masks from the filter accumulators of a step.

    Supersets, checked exactly by the caller for the lanes they flag: a row with |w₊'| >= B or
    |w₋'| >= B or NaN makes the sum of the nonnegative ``w₊'² + w₋'²`` NaN or >= fl(B²)
    (rounding is monotone), so ``not (sum < fl(B²))``; a sign change (or an exact zero, or an
    underflow) makes its row's ``min(w₊'·w₊, w₋'·w₋) <= 0`` and so the minimum over rows (a NaN
    product is a NaN or infinite iterate, which the first mask flags).
    """
    bad = v.mask_bits(v.widen(v.nlt(builder.load(size_acc), _vconst(OVERFLOW * OVERFLOW))))
    chg = v.mask_bits(v.widen(v.le(builder.load(sign_acc), _vconst(0.0))))
    return builder.or_(bad, builder.shl(chg, _c64(LW)))


_INT_ARGS = (types.intp,) * 10


def _make_step_update(form):
    """One full step of a group: gradient tiles fused with the row updates, rows 0 .. d-1.

    For each tile of TILE rows, the gradient of row r is ``Σ_{c<K} A[r, c]·V[c]`` with ``V[c]``
    the vector at ``st[vb + c·FR]`` (θ for the Hessian form, the residuals for the data form),
    summed over c in increasing order from +0.0, then finished by :func:`_finish_gradient`;
    the TILE x LW sums stay in registers while they accumulate and feed the row updates
    directly. ``A`` needs at least ``d`` rounded up to TILE rows. Returns ``bad | (changed << LW)``
    lane masks.
    """

    def typer(typingctx, A, st, lane, b, scale, K, d, vb, wpc, wpn, wmc, wmn, thn, ipc, ipn, imc, imn,
              pending):
        if not (_is_c_array(A, 2) and _is_c_array(st, 1) and _is_c_array(lane, 1) and _is_c_array(b, 1)):
            return None
        sig = types.int64(A, st, lane, b, types.float64, types.intp, types.intp, types.intp, *_INT_ARGS)

        def codegen(context, builder, signature, args):
            a_val, st_val, lane_val, b_val, scale_, k_, d_, vb_ = args[:8]
            off = _Offsets(*args[8:])
            v = _VecOps(builder)
            a_arr = context.make_array(signature.args[0])(context, builder, a_val)
            ncol = cgutils.unpack_tuple(builder, a_arr.shape, 2)[1]
            s = _data_ptr(context, builder, signature.args[1], st_val)
            lane_ptr = _data_ptr(context, builder, signature.args[2], lane_val)
            bdata = _data_ptr(context, builder, signature.args[3], b_val)
            gam = v.load(lane_ptr, _c64(LP_GAMMA * LW))
            bet = v.load(lane_ptr, _c64(LP_BETA * LW))
            scale_v = v.splat(scale_)
            size_acc, sign_acc = _filter_accumulators(builder)
            accs = [cgutils.alloca_once(builder, _VEC) for _ in range(TILE)]
            sums = cgutils.alloca_once(builder, _VEC, size=TILE)
            # round_up(d, TILE) / TILE tiles, in IR since d is only known at run time
            ntiles = builder.sdiv(builder.add(d_, _c64(TILE - 1)), _c64(TILE))
            with cgutils.for_range(builder, ntiles) as tiles:
                r0 = builder.mul(tiles.index, _c64(TILE))
                _emit_tile_sums(builder, v, a_arr.data, ncol, r0, k_, s, vb_, _c64(FR), accs)
                for k in range(TILE):
                    builder.store(builder.load(accs[k]), builder.gep(sums, [_c64(k)]))
                nrows = builder.sub(d_, r0)
                nrows = builder.select(builder.icmp_signed("<", nrows, _c64(TILE)), nrows, _c64(TILE))
                _emit_rows(builder, v, s, sums, r0, nrows, form, bdata, scale_v, gam, bet, off, size_acc,
                           sign_acc)
            return _flags(builder, v, size_acc, sign_acc)

        return sig, codegen

    typer.__name__ = f"_step_update_{form}"
    return intrinsic(typer)


def _make_update(form):
    """Update of rows 0 .. d-1 of a group from the column sums stored in slot GR (minibatch)."""

    def typer(typingctx, st, lane, b, scale, d, wpc, wpn, wmc, wmn, thn, ipc, ipn, imc, imn, pending):
        if not (_is_c_array(st, 1) and _is_c_array(lane, 1) and _is_c_array(b, 1)):
            return None
        sig = types.int64(st, lane, b, types.float64, types.intp, *_INT_ARGS)

        def codegen(context, builder, signature, args):
            st_val, lane_val, b_val, scale_, d_ = args[:5]
            off = _Offsets(*args[5:])
            v = _VecOps(builder)
            s = _data_ptr(context, builder, signature.args[0], st_val)
            lane_ptr = _data_ptr(context, builder, signature.args[1], lane_val)
            bdata = _data_ptr(context, builder, signature.args[2], b_val)
            gam = v.load(lane_ptr, _c64(LP_GAMMA * LW))
            bet = v.load(lane_ptr, _c64(LP_BETA * LW))
            scale_v = v.splat(scale_)
            size_acc, sign_acc = _filter_accumulators(builder)
            with cgutils.for_range(builder, d_) as loop:
                base = builder.mul(loop.index, _c64(FR))
                acc = v.load(s, builder.add(base, _c64(S_GR * LW)))
                grad = _finish_gradient(builder, v, form, acc, bdata, loop.index, scale_v)
                _emit_row_update(builder, v, s, base, grad, gam, bet, off, size_acc, sign_acc)
            return _flags(builder, v, size_acc, sign_acc)

        return sig, codegen

    typer.__name__ = f"_update_{form}"
    return intrinsic(typer)


_step_update_sub = _make_step_update("sub")
_step_update_div = _make_step_update("div")
_update_div = _make_update("div")


# ---------------------------------------------------------------------------------------------------
# Group bookkeeping (plain Numba)
# ---------------------------------------------------------------------------------------------------

@njit(**JIT_OPTIONS)
def _init_groups(ST, LANE, IST, ACT, RNG, PERM, gammas, betas, seeds, valid, w_plus0, w_minus0):
    """Fresh runs: lane g of group q gets (γ, β, seed) = (gammas, betas, seeds)[q, g] if valid[q, g].

    Invalid (padding) lanes are parked from the start.
    """
    ngroups = ST.shape[0]
    d = w_plus0.shape[0]
    nf = ST.shape[1] // FR
    n = PERM.shape[2]
    for q in range(ngroups):
        st = ST[q]
        for i in range(nf):
            base = i * FR
            for g in range(LW):
                for k in range(NSLOT):
                    st[base + k * LW + g] = 0.0
                if i < d and valid[q, g]:
                    wp = w_plus0[i]
                    wm = w_minus0[i]
                else:
                    wp = 1.0
                    wm = 1.0
                st[base + S_WPA * LW + g] = wp
                st[base + S_WPB * LW + g] = wp
                st[base + S_WMA * LW + g] = wm
                st[base + S_WMB * LW + g] = wm
                theta = (wp * wp - wm * wm) * 0.25
                st[base + S_THA * LW + g] = theta
                st[base + S_THB * LW + g] = theta
                st[base + S_IPA * LW + g] = 1.0 / wp
                st[base + S_IPB * LW + g] = 1.0 / wp
                st[base + S_IMA * LW + g] = 1.0 / wm
                st[base + S_IMB * LW + g] = 1.0 / wm
                st[base + S_MIND * LW + g] = abs(wp * wm)
        for g in range(LW):
            ok = valid[q, g]
            LANE[q, LP_GAMMA * LW + g] = gammas[q, g] if ok else 0.0
            LANE[q, LP_BETA * LW + g] = betas[q, g] if ok else 0.0
            ACT[q, g] = 1 if ok else 0
            for i in range(d):
                IST[q, CROSS_PLUS, i, g] = 0
                IST[q, CROSS_MINUS, i, g] = 0
                IST[q, FIRST_CROSS_PLUS, i, g] = -1
                IST[q, FIRST_CROSS_MINUS, i, g] = -1
                IST[q, LAST_CROSS_PLUS, i, g] = -1
                IST[q, LAST_CROSS_MINUS, i, g] = -1
            _seed_state(seeds[q, g], 0, RNG[q, g])
            for j in range(n):
                PERM[q, g, j] = j


@njit(**JIT_OPTIONS)
def _park(st, lane, act, g):
    """Freeze lane g at w± = 1, θ = 0, γ = β = 0 (constant and finite from then on)."""
    nf = st.shape[0] // FR
    for i in range(nf):
        base = i * FR
        for k in range(NSLOT):
            st[base + k * LW + g] = 0.0
        st[base + S_WPA * LW + g] = 1.0
        st[base + S_WPB * LW + g] = 1.0
        st[base + S_WMA * LW + g] = 1.0
        st[base + S_WMB * LW + g] = 1.0
        st[base + S_IPA * LW + g] = 1.0
        st[base + S_IPB * LW + g] = 1.0
        st[base + S_IMA * LW + g] = 1.0
        st[base + S_IMB * LW + g] = 1.0
        st[base + S_MIND * LW + g] = 1.0
    lane[LP_GAMMA * LW + g] = 0.0
    lane[LP_BETA * LW + g] = 0.0
    act[g] = 0


@njit(**JIT_OPTIONS)
def _slots(step):
    """(w+ current, w+ previous, w- current, w- previous, θ current, θ next,
    1/w+ current, 1/w+ previous, 1/w- current, 1/w- previous) after ``step`` updates."""
    if step % 2 == 0:
        return S_WPA, S_WPB, S_WMA, S_WMB, S_THA, S_THB, S_IPA, S_IPB, S_IMA, S_IMB
    return S_WPB, S_WPA, S_WMB, S_WMA, S_THB, S_THA, S_IPB, S_IPA, S_IMB, S_IMA


@njit(**JIT_OPTIONS)
def _neumaier(total, comp, term):
    s = total
    t = s + term
    comp += ((s - t) + term) if abs(s) >= abs(term) else ((term - t) + s)
    return t, comp


@njit(**JIT_OPTIONS)
def _flush_lemma4(st, base, beta, wc, wp, ic, ip, s_sum, s_comp):
    """The pending Lemma 4 term of the last update, as the single-run ``_accumulate_s`` adds it."""
    a = st[base + wc * LW]
    w = st[base + wp * LW]
    term = (a - w) * fma(-beta, st[base + ic * LW], st[base + ip * LW])
    return _neumaier(st[base + s_sum * LW], st[base + s_comp * LW], term)


@njit(**JIT_OPTIONS)
def _export(st, ist, lane, g, step, d, out_f, out_i):
    """Write lane g in the single-run kernel's ``fstate``/``istate`` layout (after ``step`` updates)."""
    wpc, wpp, wmc, wmp, _, _, ipc, ipp, imc, imp = _slots(step)
    beta = lane[LP_BETA * LW + g]
    for i in range(d):
        base = i * FR + g
        sp, cp = st[base + S_SP * LW], st[base + S_CP * LW]
        sm, cm = st[base + S_SM * LW], st[base + S_CM * LW]
        if step > 0:  # the sums lag one update behind in the lockstep kernel
            sp, cp = _flush_lemma4(st, base, beta, wpc, wpp, ipc, ipp, S_SP, S_CP)
            sm, cm = _flush_lemma4(st, base, beta, wmc, wmp, imc, imp, S_SM, S_CM)
        out_f[W_PLUS, i] = st[base + wpc * LW]
        out_f[W_MINUS, i] = st[base + wmc * LW]
        out_f[W_PLUS_PREV, i] = st[base + wpp * LW]
        out_f[W_MINUS_PREV, i] = st[base + wmp * LW]
        out_f[S_SUM_PLUS, i] = sp
        out_f[S_SUM_MINUS, i] = sm
        out_f[S_COMP_PLUS, i] = cp
        out_f[S_COMP_MINUS, i] = cm
        out_f[GRAD_MOMENTUM, i] = st[base + S_MOM * LW]
        out_f[MIRROR_SUM, i] = st[base + S_MIR * LW]
        out_f[MIRROR_COMP, i] = st[base + S_MIRC * LW]
        out_f[MIN_DELTA, i] = st[base + S_MIND * LW]
        for r in range(N_INT_ROWS):
            out_i[r, i] = ist[r, i, g]


@njit(**JIT_OPTIONS)
def _finish_lane(st, ist, lane, g, step, code, d, pts, OUT_F, OUT_I, OUT_STATUS, OUT_STEPS):
    p = pts[g]
    if p < 0:
        return
    _export(st, ist, lane, g, step, d, OUT_F[p], OUT_I[p])
    OUT_STATUS[p] = code
    OUT_STEPS[p] = step


@njit(**JIT_OPTIONS)
def _overflowed(st, g, d, new_p, new_m):
    """The single-run divergence test on lane g's proposal: not all |w±| < OVERFLOW (NaN included)."""
    for i in range(d):
        base = i * FR + g
        if not ((abs(st[base + new_p * LW]) < OVERFLOW) & (abs(st[base + new_m * LW]) < OVERFLOW)):
            return True
    return False


@njit(**JIT_OPTIONS)
def _log_lane_crossings(st, ist, g, d, old_p, new_p, old_m, new_m, step):
    """Exact sign-change bookkeeping of lane g (the single-run ``_log_crossings``)."""
    for i in range(d):
        base = i * FR + g
        if (st[base + new_p * LW] < 0.0) != (st[base + old_p * LW] < 0.0):
            ist[CROSS_PLUS, i, g] += 1
            if ist[CROSS_PLUS, i, g] == 1:
                ist[FIRST_CROSS_PLUS, i, g] = step
            ist[LAST_CROSS_PLUS, i, g] = step
        if (st[base + new_m * LW] < 0.0) != (st[base + old_m * LW] < 0.0):
            ist[CROSS_MINUS, i, g] += 1
            if ist[CROSS_MINUS, i, g] == 1:
                ist[FIRST_CROSS_MINUS, i, g] = step
            ist[LAST_CROSS_MINUS, i, g] = step


@njit(**JIT_OPTIONS)
def _residual_loss(X, y, st, n, d, th, write_back, loss):
    """loss[g] = ‖Xθ_g - y‖²/(2n) with the single-run order (θ in slot ``th``).

    The residuals ``Xθ - y`` go to slot RES when ``write_back``.
    """
    npad = X.shape[0]
    for r0 in range(0, npad, TILE):
        _mv_tile(X, st, r0, d, th * LW, FR, S_RES * LW, FR)
    for g in range(LW):
        total = 0.0
        for m in range(n):
            idx = m * FR + S_RES * LW + g
            r = st[idx] - y[m]
            if write_back:
                st[idx] = r
            total += r * r
        loss[g] = total / (2.0 * n)


@njit(**JIT_OPTIONS)
def _minibatch_gradient(X, y, st, d, th, g, rng, perm, replace, batch, resid):
    """Unscaled minibatch gradient of lane g into slot GR (the single-run ``_gradient_batch``)."""
    nb = batch.shape[0]
    _draw_batch(rng, perm, batch, replace)
    for q in range(nb):
        row = batch[q]
        r = 0.0
        for j in range(d):
            r = fma(X[row, j], st[j * FR + th * LW + g], r)
        resid[q] = r - y[row]
    for i in range(d):
        acc = 0.0
        for q in range(nb):
            acc = fma(X[batch[q], i], resid[q], acc)
        st[i * FR + S_GR * LW + g] = acc


@njit(**JIT_OPTIONS)
def _group_steps(mode, X, XT, y, H, b, n, d, tol, batch_size, replace,
                 st, lane, ist, act, rng, perm, pts, k_start, count, diverged_at,
                 OUT_F, OUT_I, OUT_STATUS, OUT_STEPS):
    """Advance one group by ``count`` steps starting at step ``k_start``.

    Converged lanes are exported and parked; diverged lanes are parked and get
    ``diverged_at[g] = k`` (the number of committed updates); the caller
    replays them.
    """
    loss = np.zeros(LW)
    batch = np.zeros(max(batch_size, 1), dtype=np.int64)
    resid = np.zeros(max(batch_size, 1))
    scale = float(n) if mode == MODE_DATA else float(max(batch_size, 1))
    check = tol >= 0.0
    for k in range(k_start, k_start + count):
        active = 0
        for g in range(LW):
            active += act[g]
        if active == 0:
            break
        wpc, wpn, wmc, wmn, thc, thn, ipc, ipn, imc, imn = _slots(k)
        pending = 1 if k > 0 else 0
        if check or mode == MODE_DATA:
            _residual_loss(X, y, st, n, d, thc, mode == MODE_DATA, loss)
            if check:
                for g in range(LW):
                    if act[g] and loss[g] <= tol:
                        _finish_lane(st, ist, lane, g, k, CONVERGED, d, pts, OUT_F, OUT_I, OUT_STATUS,
                                     OUT_STEPS)
                        _park(st, lane, act, g)
                        active -= 1
                if active == 0:
                    break
        flags = 0
        if mode == MODE_HESSIAN:
            flags = _step_update_sub(H, st, lane, b, 1.0, d, d, thc * LW, wpc * LW, wpn * LW, wmc * LW,
                                     wmn * LW, thn * LW, ipc * LW, ipn * LW, imc * LW, imn * LW, pending)
        elif mode == MODE_DATA:
            flags = _step_update_div(XT, st, lane, b, scale, n, d, S_RES * LW, wpc * LW, wpn * LW, wmc * LW,
                                     wmn * LW, thn * LW, ipc * LW, ipn * LW, imc * LW, imn * LW, pending)
        else:
            for g in range(LW):
                if act[g]:
                    _minibatch_gradient(X, y, st, d, thc, g, rng[g], perm[g], replace, batch, resid)
            flags = _update_div(st, lane, b, scale, d, wpc * LW, wpn * LW, wmc * LW, wmn * LW, thn * LW,
                                ipc * LW, ipn * LW, imc * LW, imn * LW, pending)
        if flags != 0:
            for g in range(LW):
                if not act[g]:
                    continue
                if (flags >> g) & 1 and _overflowed(st, g, d, wpn, wmn):
                    diverged_at[g] = k
                    _park(st, lane, act, g)
                elif (flags >> g) & 1 or (flags >> (LW + g)) & 1:
                    _log_lane_crossings(st, ist, g, d, wpc, wpn, wmc, wmn, k + 1)


@njit(**JIT_OPTIONS)
def _group_chunk(mode, X, XT, y, H, b, n, d, tol, batch_size, replace,
                 st, lane, ist, act, rng, perm, pts, k0, n_steps, total,
                 OUT_F, OUT_I, OUT_STATUS, OUT_STEPS):
    """Advance one group by a chunk, then replay diverged lanes and export finished ones."""
    active = 0
    for g in range(LW):
        active += act[g]
    if active == 0:
        return
    st0 = st.copy()
    lane0 = lane.copy()
    ist0 = ist.copy()
    rng0 = rng.copy()
    perm0 = perm.copy()
    diverged_at = np.full(LW, -1, dtype=np.int64)
    _group_steps(mode, X, XT, y, H, b, n, d, tol, batch_size, replace, st, lane, ist, act, rng, perm, pts,
                 k0, n_steps, diverged_at, OUT_F, OUT_I, OUT_STATUS, OUT_STEPS)
    for g in range(LW):
        kd = diverged_at[g]
        if kd < 0:
            continue
        # Replay lane g alone from the chunk's start to the last committed update.
        rst = st0.copy()
        rlane = lane0.copy()
        rist = ist0.copy()
        rrng = rng0.copy()
        rperm = perm0.copy()
        ract = np.zeros(LW, dtype=np.int64)
        for h in range(LW):
            if h != g:
                _park(rst, rlane, ract, h)
        ract[g] = 1
        never = np.full(LW, -1, dtype=np.int64)
        _group_steps(mode, X, XT, y, H, b, n, d, tol, batch_size, replace, rst, rlane, rist, ract, rrng,
                     rperm,
                     pts, k0, kd - k0, never, OUT_F, OUT_I, OUT_STATUS, OUT_STEPS)
        _finish_lane(rst, rist, rlane, g, kd, DIVERGED, d, pts, OUT_F, OUT_I, OUT_STATUS, OUT_STEPS)
    if k0 + n_steps >= total:
        for g in range(LW):
            if act[g]:
                _finish_lane(st, ist, lane, g, total, MAX_STEPS, d, pts, OUT_F, OUT_I, OUT_STATUS,
                             OUT_STEPS)


@njit(**PARALLEL_JIT_OPTIONS)
def _sweep_chunk(mode, Xs, XTs, ys, Hs, bs, n, d, tol, batch_size, replace, group_rep,
                 ST, LANE, IST, ACT, RNG, PERM, PTS, k0, n_steps, total, groups_per_block,
                 OUT_F, OUT_I, OUT_STATUS, OUT_STEPS):
    """Advance every group from step ``k0`` by ``n_steps`` (of ``total``), blocks in parallel.

    Group q runs on data set ``group_rep[q]`` (stacked, zero-padded ``Xs`` (R, F, F'),
    ``XTs``, ``ys``, ``Hs``, ``bs``). Lane g of group q is point ``PTS[q, g]`` (-1:
    padding) whose outcome goes to row ``PTS[q, g]`` of the ``OUT_*`` arrays when
    the lane stops (converged, diverged) or reaches ``total``.
    """
    ngroups = ST.shape[0]
    nblocks = (ngroups + groups_per_block - 1) // groups_per_block
    for blk in prange(nblocks):
        stop = min(ngroups, (blk + 1) * groups_per_block)
        for q in range(blk * groups_per_block, stop):
            r = group_rep[q]
            _group_chunk(mode, Xs[r], XTs[r], ys[r], Hs[r], bs[r], n, d, tol, batch_size, replace,
                         ST[q], LANE[q], IST[q], ACT[q], RNG[q], PERM[q], PTS[q], k0, n_steps, total,
                         OUT_F, OUT_I, OUT_STATUS, OUT_STEPS)
