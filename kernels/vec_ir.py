"""A small vector language for Numba intrinsics: ``<LW x double>`` LLVM IR, without fast-math flags.

The lockstep kernels (:mod:`.sweep`, :mod:`.flow_sweep`) advance ``LW`` runs (*lanes*)
at once and generate their hot loops directly as LLVM IR: Numba's SLP vectoriser is
off and its loop vectoriser cannot keep the sums of a matrix product in registers
there. This module owns the pieces of that IR that know nothing of a method:

* the types (``_VEC``: ``LW`` doubles, ``_IVEC``: ``LW`` int64) and constants (:func:`_c64`,
  :func:`_vconst`);
* :class:`_VecOps`, lane-wise arithmetic over an IRBuilder: ``fadd``/``fsub``/``fmul``/``fdiv``
  with no fast-math flags (nothing is contracted or re-associated), ``llvm.fma`` exactly
  where the single-run kernels call :func:`.config.fma`, compares, selects, a minimum that
  is ``vminpd`` on AVX hosts, the Neumaier step and lane masks: each operation is the
  single-run operation on the same operands, lane by lane (see :mod:`.config`);
* access to Numba arrays from a codegen (:func:`_data_ptr`, :func:`_is_c_array`);
* the register-blocked tile product, ``TILE`` rows of a matrix times ``LW`` vectors with
  the ``TILE x LW`` sums in registers: the emitter :func:`_emit_tile_sums` (also fused into
  the MGD step of :mod:`.sweep`) and the intrinsic :func:`_mv_tile` (used by both lockstep
  kernels). Every sum runs over the column in increasing order from +0.0 with fused
  multiply-adds, the per-element operations of the single-run ``_axpy_columns``;
* sums held in registers over rows of a matrix, :func:`_emit_register_sums` (up to ``MV_GROUP`` ``<4 x double>``
  sums, a lane mask for the last d mod 4), and its two uses by the adaptive schemes: the matrix-vector product
  :func:`_matvec_columns` (the operations of the single-run ``_axpy_columns``) and the row updates of their
  Cholesky factorisation :func:`_cholesky_row` (those of the outer-product loop of :mod:`.small_linalg`).

What a step computes (the MGD update rule, the frame layout of a group) lives in :mod:`.sweep`.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

#: Lanes per group: two AVX2 registers of doubles, so that every broadcast element of ``H`` feeds
#: two vector multiply-adds (the matrix product is then bound by arithmetic, not by loads).
LW = 8
#: Rows of the register-blocked matrix product (TILE x LW sums = 12 AVX2 registers); frames are
#: padded to a multiple, so d = 30 needs no padding row.
TILE = 6

_F64 = ir.DoubleType()
_I64 = ir.IntType(64)
_I32 = ir.IntType(32)
_VEC = ir.VectorType(_F64, LW)
_IVEC = ir.VectorType(_I64, LW)
_ALIGN = 8


def _host_has_avx():
    try:
        import llvmlite.binding as llvm

        return LW % 4 == 0 and llvm.get_host_cpu_features().flatten().find("+avx,") >= 0
    except Exception:  # pragma: no cover - exotic hosts
        return False


_X86_MIN = _host_has_avx()


def _c64(x):
    return ir.Constant(_I64, x)


def _vconst(x):
    return ir.Constant(_VEC, [float(x)] * LW)


class _VecOps:
    """Thin helpers over an IRBuilder for <LW x double> code (no fast-math flags)."""

    def __init__(self, builder):
        self.b = builder
        self.fabs_fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_VEC, [_VEC]), f"llvm.fabs.v{LW}f64")
        self.fma_fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(_VEC, [_VEC, _VEC, _VEC]), f"llvm.fma.v{LW}f64")

    def ptr(self, base, idx):
        return self.b.bitcast(self.b.gep(base, [idx]), _VEC.as_pointer())

    def load(self, base, idx):
        return self.b.load(self.ptr(base, idx), align=_ALIGN)

    def store(self, value, base, idx):
        self.b.store(value, self.ptr(base, idx), align=_ALIGN)

    def splat(self, x):
        v = self.b.insert_element(ir.Constant(_VEC, ir.Undefined), x, ir.Constant(_I32, 0))
        return self.b.shuffle_vector(v, ir.Constant(_VEC, ir.Undefined),
                                     ir.Constant(ir.VectorType(_I32, LW), [0] * LW))

    def add(self, x, y):
        return self.b.fadd(x, y)

    def sub(self, x, y):
        return self.b.fsub(x, y)

    def mul(self, x, y):
        return self.b.fmul(x, y)

    def div(self, x, y):
        return self.b.fdiv(x, y)

    def fma(self, x, y, z):
        """``x·y + z`` rounded once, lane by lane (``llvm.fma``; the single-run kernels' :func:`.config.fma`)."""
        return self.b.call(self.fma_fn, [x, y, z])

    def neg(self, x):
        return self.b.fneg(x)

    def abs(self, x):
        return self.b.call(self.fabs_fn, [x])

    def lt(self, x, y):
        return self.b.fcmp_ordered("<", x, y)

    def nlt(self, x, y):
        """not (x < y): true where x >= y or either is NaN."""
        return self.b.fcmp_unordered(">=", x, y)

    def le(self, x, y):
        return self.b.fcmp_ordered("<=", x, y)

    def ge(self, x, y):
        return self.b.fcmp_ordered(">=", x, y)

    def min_lt(self, x, y):
        """``x if x < y else y``.

        On x86 with AVX this is ``vminpd`` on each 4-lane half (MINPD returns its
        first operand iff it is less than the second: exactly this expression, NaN
        and signed zeros included). Elsewhere it is a select. (Written as a select on
        x86, LLVM turns the store of ``select(x < y, x, load(p))`` to ``p`` into a slow
        masked store.)
        """
        if not _X86_MIN:
            return self.select(self.lt(x, y), x, y)
        v4 = ir.VectorType(_F64, 4)
        fn = cgutils.get_or_insert_function(self.b.module, ir.FunctionType(v4, [v4, v4]), "llvm.x86.avx.min.pd.256")
        if LW == 4:
            return self.b.call(fn, [x, y])
        undef = ir.Constant(_VEC, ir.Undefined)
        parts = []
        for h in range(LW // 4):
            half = ir.Constant(ir.VectorType(_I32, 4), list(range(4 * h, 4 * h + 4)))
            parts.append(self.b.call(fn, [self.b.shuffle_vector(x, undef, half),
                                          self.b.shuffle_vector(y, undef, half)]))
        while len(parts) > 1:  # concatenate halves pairwise
            width = 2 * parts[0].type.count
            joined = ir.Constant(ir.VectorType(_I32, width), list(range(width)))
            parts = [self.b.shuffle_vector(parts[k], parts[k + 1], joined) for k in range(0, len(parts), 2)]
        return parts[0]

    def select(self, m, x, y):
        return self.b.select(m, x, y)

    def neumaier(self, total, comp, term):
        """(t, comp') with t = total + term and the Neumaier correction added to ``comp``.

        ``comp += ((s - t) + term) if |s| >= |term| else ((term - t) + s)`` written
        with selects: the same two operations on the same operands.
        """
        t = self.add(total, term)
        cond = self.ge(self.abs(total), self.abs(term))
        big = self.select(cond, total, term)
        small = self.select(cond, term, total)
        return t, self.add(comp, self.add(self.sub(big, t), small))

    def widen(self, m):
        """A <LW x i1> mask as <LW x i64> (all ones where set), the form compares produce."""
        return self.b.sext(m, _IVEC)

    def mask_bits(self, w):
        """A widened mask as an i64 with bit g set for lane g."""
        m = self.b.icmp_signed("!=", w, ir.Constant(_IVEC, [0] * LW))
        return self.b.zext(self.b.bitcast(m, ir.IntType(LW)), _I64)


def _data_ptr(context, builder, aryty, value):
    return context.make_array(aryty)(context, builder, value).data


def _is_c_array(t, ndim):
    return isinstance(t, types.Array) and t.ndim == ndim and t.layout == "C" and t.dtype == types.float64


def _emit_tile_sums(builder, v, a_data, ncol, r0, K, sdata, vb, vs, accs):
    """``accs[k] = Σ_{c<K} A[r0+k, c]·st[vb + c·vs + g]`` (k < TILE): from +0.0, ``acc = fma(A[r, c], v_c, acc)``
    for c = 0, 1, ..., K-1 in this order, the per-element operations of the single-run ``_axpy_columns``."""
    rows = [builder.gep(a_data, [builder.mul(builder.add(r0, _c64(k)), ncol)]) for k in range(TILE)]
    for acc in accs:
        builder.store(_vconst(0.0), acc)
    with cgutils.for_range(builder, K) as loop:
        c = loop.index
        t = v.load(sdata, builder.add(vb, builder.mul(c, vs)))
        for k in range(TILE):
            h = v.splat(builder.load(builder.gep(rows[k], [c])))
            builder.store(v.fma(h, t, builder.load(accs[k])), accs[k])


@intrinsic
def _mv_tile(typingctx, A, st, r0, K, vb, vs, ob, os):
    """``st[ob + (r0+k)·os + g] = Σ_{c<K} A[r0+k, c]·st[vb + c·vs + g]`` for k < TILE, g < LW.

    Each output starts at +0.0 and takes ``acc = fma(A[r, c], v_c, acc)`` for c = 0, 1, ..., K-1
    in this order, the per-element operations of the single-run ``_axpy_columns``; the
    TILE x LW partial sums stay in registers.
    ``A`` must be C-contiguous with at least ``r0 + TILE`` rows.
    """
    if not (_is_c_array(A, 2) and _is_c_array(st, 1)):
        return None
    sig = types.void(A, st, types.intp, types.intp, types.intp, types.intp, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        a_val, st_val, r0_, k_, vb_, vs_, ob_, os_ = args
        v = _VecOps(builder)
        a_arr = context.make_array(signature.args[0])(context, builder, a_val)
        ncol = cgutils.unpack_tuple(builder, a_arr.shape, 2)[1]
        sdata = _data_ptr(context, builder, signature.args[1], st_val)
        accs = [cgutils.alloca_once(builder, _VEC) for _ in range(TILE)]
        _emit_tile_sums(builder, v, a_arr.data, ncol, r0_, k_, sdata, vb_, vs_, accs)
        for k in range(TILE):
            idx = builder.add(ob_, builder.mul(builder.add(r0_, _c64(k)), os_))
            v.store(builder.load(accs[k]), sdata, idx)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _rows_partial8(typingctx, W, x, part):
    """``part[j, k] = Σ_b W[j, LW·b + k]·x[LW·b + k]`` over the whole blocks b < cols // LW, for every row j.

    Each partial sum starts at +0.0 and takes ``s = fma(W[j, i], x[i], s)`` for its columns i
    in increasing order (one ``<LW x double>`` fused multiply-add per block): the first stage of
    a dot product in a fixed order that vectorises (Numba's loop vectoriser cannot keep a sum
    in a register without re-associating it). ``W`` (rows, cols), ``x`` (>= cols) and ``part``
    (>= rows, LW) must be C-contiguous float64.
    """
    if not (_is_c_array(W, 2) and _is_c_array(x, 1) and _is_c_array(part, 2)):
        return None
    sig = types.void(W, x, part)

    def codegen(context, builder, signature, args):
        w_val, x_val, p_val = args
        v = _VecOps(builder)
        w_arr = context.make_array(signature.args[0])(context, builder, w_val)
        rows, cols = cgutils.unpack_tuple(builder, w_arr.shape, 2)
        xdata = _data_ptr(context, builder, signature.args[1], x_val)
        p_arr = context.make_array(signature.args[2])(context, builder, p_val)
        pcols = cgutils.unpack_tuple(builder, p_arr.shape, 2)[1]
        blocks = builder.udiv(cols, _c64(LW))
        acc = cgutils.alloca_once(builder, _VEC)
        with cgutils.for_range(builder, rows) as rloop:
            row = builder.gep(w_arr.data, [builder.mul(rloop.index, cols)])
            builder.store(_vconst(0.0), acc)
            with cgutils.for_range(builder, blocks) as bloop:
                i = builder.mul(bloop.index, _c64(LW))
                builder.store(v.fma(v.load(row, i), v.load(xdata, i), builder.load(acc)), acc)
            v.store(builder.load(acc), p_arr.data, builder.mul(rloop.index, pcols))
        return context.get_dummy_value()

    return sig, codegen


#: ``<4 x double>`` sums of :func:`_matvec_columns` held in registers at once (with the broadcast coefficient and
#: the loads, within the 16 AVX2 registers): a pass over the matrix's rows covers 4·MV_GROUP outputs.
MV_GROUP = 8
_V4 = ir.VectorType(_F64, 4)
_I64V4 = ir.VectorType(_I64, 4)
_SPLAT4 = ir.Constant(ir.VectorType(_I32, 4), [0] * 4)


def _emit_register_sums(builder, width, count, row_at, coef_at, out_at, start, combine):
    """For every output i < ``width``, in groups of ``MV_GROUP`` blocks of four with the sums in registers:
    ``s = start(i)`` (+0.0 when ``start`` is None), then ``s = combine(a_j(i), c_j, s)`` for j = 0, 1, ...,
    ``count``-1 in this order, then ``out(i) = s``, where ``a_j(i)`` is read from ``row_at(j, i0)`` (a pointer to the
    element of row j that serves output i0) and ``c_j = coef_at(j)`` (a scalar). A group's last block, when ``width``
    is not a multiple of four, loads and stores through a lane mask (``llvm.masked.load``/``store``: the lanes past
    the end are neither read nor written). The outputs are written after their sums: they may be a row that the
    sums do not read."""
    module = builder.module
    mask_t = ir.VectorType(ir.IntType(1), 4)
    mload = cgutils.get_or_insert_function(
        module, ir.FunctionType(_V4, [_V4.as_pointer(), _I32, mask_t, _V4]), "llvm.masked.load.v4f64.p0v4f64")
    mstore = cgutils.get_or_insert_function(
        module, ir.FunctionType(ir.VoidType(), [_V4, _V4.as_pointer(), _I32, mask_t]),
        "llvm.masked.store.v4f64.p0v4f64")
    zero = ir.Constant(_V4, [0.0] * 4)
    undef_i = ir.Constant(_I64V4, ir.Undefined)
    undef_f = ir.Constant(_V4, ir.Undefined)

    def at(base, k):
        return builder.bitcast(builder.gep(base, [_c64(4 * k)]), _V4.as_pointer())

    def load(base, k, mask):
        if mask is not None:
            return builder.call(mload, [at(base, k), ir.Constant(_I32, _ALIGN), mask, zero])
        return builder.load(at(base, k), align=_ALIGN)

    def splat(x, undef):
        """x in the four lanes of a vector of the type of ``undef``."""
        return builder.shuffle_vector(builder.insert_element(undef, x, ir.Constant(_I32, 0)), undef, _SPLAT4)

    def group(i0, nb, masked):
        """The outputs i0 .. i0 + 4·nb - 1 (the last block through the lane mask when ``masked``)."""
        mask = None
        if masked:
            first = splat(builder.add(i0, _c64(4 * (nb - 1))), undef_i)
            lanes = builder.add(first, ir.Constant(_I64V4, [0, 1, 2, 3]))
            mask = builder.icmp_signed("<", lanes, splat(width, undef_i))
        masks = [mask if k == nb - 1 else None for k in range(nb)]
        if start is None:
            accs = [cgutils.alloca_once_value(builder, zero) for _ in range(nb)]
        else:
            base = start(i0)
            accs = [cgutils.alloca_once_value(builder, load(base, k, masks[k])) for k in range(nb)]
        with cgutils.for_range(builder, count) as loop:
            j = loop.index
            row = row_at(j, i0)
            cj = splat(coef_at(j), undef_f)
            for k in range(nb):
                builder.store(combine(load(row, k, masks[k]), cj, builder.load(accs[k])), accs[k])
        obase = out_at(i0)
        for k in range(nb):
            if masks[k] is not None:
                builder.call(mstore, [builder.load(accs[k]), at(obase, k), ir.Constant(_I32, _ALIGN), masks[k]])
            else:
                builder.store(builder.load(accs[k]), at(obase, k), align=_ALIGN)

    fn = builder.function
    with cgutils.for_range_slice(builder, _c64(0), width, _c64(4 * MV_GROUP), inc=True) as (i0, _):
        left = builder.sub(width, i0)
        blocks = builder.sdiv(builder.add(left, _c64(3)), _c64(4))
        blocks = builder.select(builder.icmp_signed(">", blocks, _c64(MV_GROUP)), _c64(MV_GROUP), blocks)
        partial = builder.icmp_signed("<", left, builder.mul(blocks, _c64(4)))
        # one straight-line body per (block count, whether the last block is partial): the sums stay in registers
        key = builder.add(builder.mul(blocks, _c64(2)), builder.zext(partial, _I64))
        done = fn.append_basic_block("sums.group_done")
        switch = builder.switch(key, done)
        for nb in range(1, MV_GROUP + 1):
            for masked in (False, True):
                block = fn.append_basic_block(f"sums.nb{nb}{'m' if masked else ''}")
                switch.add_case(_c64(2 * nb + int(masked)), block)
                builder.position_at_end(block)
                group(i0, nb, masked)
                builder.branch(done)
        builder.position_at_end(done)


@intrinsic
def _matvec_columns(typingctx, A, coef, count, out):
    """``out[i] = Σ_{j<count} A[j, i]·coef[j]`` for every i < len(out): each sum from +0.0, ``s = fma(A[j, i], coef[j],
    s)`` for j = 0, 1, ..., count-1 in this order (the same operations, and so the same bits, as the column ``axpy``
    loop ``out[i] = fma(A[j, i], coef[j], out[i])``).

    Why: at the adaptive schemes' sizes (d = 30, unpadded) the loop over columns that LLVM vectorises
    (:func:`.mgd._axpy_columns`) stores and reloads ``out`` for every four columns, checks at run time that ``out``
    does not overlap the rows it reads, and ends in scalar iterations for the last d mod 4 elements: 155 ns for a
    30 × 30 product, measured, where keeping the sums in registers, one ``<4 x double>`` fused multiply-add per four
    outputs and column, takes 64 ns (the chain of 30 dependent multiply-adds is then the bound). (Inside the
    fixed-step kernels' steps, on padded arrays, it made MGD and RK4 about 10 % slower, measured: they keep
    ``_axpy_columns``.) The outputs go in groups of ``MV_GROUP`` blocks of four (:func:`_emit_register_sums`).
    ``A`` (rows >= count, columns >= len(out)), ``coef`` and ``out`` must be C-contiguous float64; ``out`` must
    not overlap ``A`` or ``coef`` (it is written after the sums).
    """
    if not (_is_c_array(A, 2) and _is_c_array(coef, 1) and _is_c_array(out, 1)):
        return None
    sig = types.void(A, coef, types.intp, out)

    def codegen(context, builder, signature, args):
        a_val, c_val, count_, o_val = args
        a_arr = context.make_array(signature.args[0])(context, builder, a_val)
        ncol = cgutils.unpack_tuple(builder, a_arr.shape, 2)[1]
        cdata = _data_ptr(context, builder, signature.args[1], c_val)
        o_arr = context.make_array(signature.args[3])(context, builder, o_val)
        width = cgutils.unpack_tuple(builder, o_arr.shape, 1)[0]
        fma4 = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_V4, [_V4, _V4, _V4]),
                                              "llvm.fma.v4f64")
        _emit_register_sums(
            builder, width, count_,
            row_at=lambda j, i0: builder.gep(a_arr.data, [builder.add(builder.mul(j, ncol), i0)]),
            coef_at=lambda j: builder.load(builder.gep(cdata, [j])),
            out_at=lambda i0: builder.gep(o_arr.data, [i0]),
            start=None,
            combine=lambda a, c, s: builder.call(fma4, [a, c, s]))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _cholesky_row(typingctx, S, k):
    """Row k of an up-looking Cholesky factorisation before its pivot: ``S[k, j] -= S[i, k]·S[i, j]`` for every j >= k,
    over the rows i = 0, 1, ..., k-1 in this order (a product, then a difference: two roundings, no fused
    multiply-add), with the ``m - k`` sums in registers (:func:`_emit_register_sums`). The rows above k hold the
    finished rows of R (S = RᵀR); row k is read once and written once.

    Each element receives its updates in the order of the right-looking (outer-product) loop, i = 0, 1, ..., with the
    same two operations, so :func:`.small_linalg._cholesky` gives the factors of that loop bit for bit; where the
    right-looking loop loads and stores the trailing rows for every row of R (and, at d = 30, spends much of its time
    in scalar tails of short rows and in run-time overlap checks), this reads each element of R once per later row
    and keeps the sums in registers. ``S`` must be C-contiguous float64 (m × m), 0 <= k < m.
    """
    if not _is_c_array(S, 2):
        return None
    sig = types.void(S, types.intp)

    def codegen(context, builder, signature, args):
        s_val, k_ = args
        s_arr = context.make_array(signature.args[0])(context, builder, s_val)
        m = cgutils.unpack_tuple(builder, s_arr.shape, 2)[1]

        def element(i, j):
            return builder.gep(s_arr.data, [builder.add(builder.mul(i, m), j)])

        _emit_register_sums(
            builder, builder.sub(m, k_), k_,
            row_at=lambda i, i0: element(i, builder.add(k_, i0)),
            coef_at=lambda i: builder.load(element(i, k_)),
            out_at=lambda i0: element(k_, builder.add(k_, i0)),
            start=lambda i0: element(k_, builder.add(k_, i0)),
            combine=lambda a, c, s: builder.fsub(s, builder.fmul(c, a)))
        return context.get_dummy_value()

    return sig, codegen
