"""The one compilation policy of every kernel in :mod:`dlnmomentum.kernels`.

Why no ``fastmath``
-------------------
Every kernel here is compiled with strict IEEE semantics (``fastmath=False``):

* the loops test iterates for divergence with comparisons such as
  ``not (abs(w) < OVERFLOW)``; under ``nnan``/``ninf`` LLVM may assume that no
  NaN or inf exists and delete those checks;
* ``reassoc`` would let LLVM re-order the reductions of the gradient, so the
  single-run kernel and the lockstep sweep kernel (which vectorises across
  runs instead of along the sum) would no longer agree bit for bit, and the
  compensated (Neumaier) sums of the accumulators would be optimised away;
* ``contract`` (fused multiply-add) is applied by LLVM opportunistically and
  differently in scalar and vector code, again breaking bitwise agreement.

Fused multiply-adds are instead written out where the method wants them, with
:func:`fma` (one rounding of ``x·y + z``, IEEE 754 ``fusedMultiplyAdd``): every
product with the data (``Hθ``, ``Xθ``, ``Xᵀr``) accumulates with it, and the
update rules use it where their docstrings say so. The single-run kernels and the
lockstep sweep kernel write the same fused operations on the same operands, so
they still agree bit for bit; the result does not depend on the compiler's
choices either (without FMA hardware LLVM calls the correctly rounded libm
``fma``). Why: the lockstep sweep is bound by the number of floating-point
operations, and a fused product-sum halves those of the gradient (one rounding
instead of two also makes it slightly more accurate); the single-run kernel,
bound by latency, is as fast either way.

The hot loops are written so that they vectorise without any of these flags
(the mat-vec products are column ``axpy`` loops, contiguous in memory).

Change the policy here and only here: the test-suite checks that kernels
compiled from this module are bitwise reproducible.
"""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

FASTMATH = False

#: Options shared by every ``@njit`` kernel.
JIT_OPTIONS = dict(nogil=True, cache=True, fastmath=FASTMATH, error_model="numpy", boundscheck=False)

#: Options of kernels that use ``prange`` across independent runs.
PARALLEL_JIT_OPTIONS = dict(JIT_OPTIONS, parallel=True)

#: Options of small helpers called many times per step with long argument lists (the adaptive scheme's stage
#: solves, :func:`.flow_rodas._solve` and what it calls and :func:`.flow_rodas_gf._solve_mirror`, and its stage
#: sums :func:`.flow_rodas._stage_point`, :func:`.flow_rodas._step_end`): inlined into their caller at Numba's IR
#: level. A call
#: of a compiled function passes every array as its data pointer, shape and strides and checks a status on
#: return; with twenty-odd arrays that cost about a quarter of a stage solve (measured 2026-11-26: whole
#: ``dm.gf``/``dm.mgf`` runs to train loss 1e-20 10-13 % faster, the same bits, since inlining changes no
#: floating-point operation under this policy). Inlining the right-hand side too gained nothing more and cost
#: 5 s more compilation, so it stays a call.
INLINE_JIT_OPTIONS = dict(JIT_OPTIONS, inline="always")
#: Options of the functions the adaptive schemes (:mod:`.flow_rodas`, :mod:`.flow_rodas_gf`, :mod:`.flow_rodas_run`,
#: :mod:`.flow_ndf`) call every step or stage, and of what they call (the gradient, the small factorisations and
#: solves): compiled without Numba's reference-counted runtime (NRT). With it, every call of a compiled function
#: increments and decrements the reference count of each array argument and of each view it makes, an atomic
#: operation each: measured with ``perf`` on runs to train loss 1e-20 (2026-11-27), the two instructions of those
#: counts took 14 % of an MGF(0.05) run and 11 % of a gradient-flow run. Such a function must allocate no array
#: and return none (Numba refuses to compile one that does: ``np.empty``, ``ravel`` and ``reshape`` are out); it
#: may take and slice arrays its caller owns. No floating-point operation changes: the same bits.
LEAF_JIT_OPTIONS = dict(JIT_OPTIONS, _nrt=False)

#: An iterate whose magnitude reaches this bound counts as diverged: squaring it
#: (θ = (w₊² - w₋²)/4) would overflow a float64.
OVERFLOW = 1e150


@intrinsic
def fma(typingctx, x, y, z):
    """``x·y + z`` rounded once (``llvm.fma.f64``), for float64 ``x, y, z``; vectorises in loops."""
    if not all(t == types.float64 for t in (x, y, z)):
        return None
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        f64 = ir.DoubleType()
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(f64, [f64, f64, f64]), "llvm.fma.f64")
        return builder.call(fn, args)

    return sig, codegen
