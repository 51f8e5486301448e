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

The hot loops are written so that they vectorise without any of these flags
(the mat-vec products are column ``axpy`` loops, contiguous in memory).

Change the policy here and only here: the test-suite checks that kernels
compiled from this module are bitwise reproducible.
"""

FASTMATH = False

#: Options shared by every ``@njit`` kernel.
JIT_OPTIONS = dict(nogil=True, cache=True, fastmath=FASTMATH, error_model="numpy", boundscheck=False)

#: Options of kernels that use ``prange`` across independent runs.
PARALLEL_JIT_OPTIONS = dict(JIT_OPTIONS, parallel=True)

#: An iterate whose magnitude reaches this bound counts as diverged: squaring it
#: (θ = (w₊² - w₋²)/4) would overflow a float64.
OVERFLOW = 1e150
