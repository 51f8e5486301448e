r"""The array layouts shared by the MGD kernels and the Python layer, and the one padding rule.

Every name here is a plain module-level ``int`` (Numba freezes such globals into
compiled code as constants) or a function usable from Python and from ``@njit``
code alike. :mod:`.mgd` and :mod:`.sweep` import them (and the Python layer reads
them as ``kernels.mgd.W_PLUS`` etc.); this module is where they are defined.

The flow kernel (:mod:`.flow`) has its own state layout (RK4 components, crossing
times as floats), defined there; it shares the gradient modes, the record layout
and the padding rule below.

MGD run state
-------------
A run of :func:`.mgd._mgd_advance` continues bit for bit from ``fstate``, ``istate``
and ``counters`` (``counters[0]``: updates done so far). ``fstate`` is float64
``(N_FLOAT_ROWS, d)``, one column per coordinate:

======================  ==================================================================
``W_PLUS``              :math:`w_{+,k}` (:math:`w_\pm = u \pm v`), the current iterate
``W_MINUS``             :math:`w_{-,k}`
``W_PLUS_PREV``         :math:`w_{+,k-1}`, the previous iterate (heavy-ball memory;
                        equal to ``W_PLUS`` at the start: :math:`w_{\pm,1} = w_{\pm,0}`)
``W_MINUS_PREV``        :math:`w_{-,k-1}`
``S_SUM_PLUS``          :math:`A_+`, the Neumaier-compensated sum of the Lemma 4 terms
                        (see :mod:`.mgd`: :math:`S_+ = A_+/(1-\beta) - \ln|w_{+,N}/w_{+,0}|`)
``S_SUM_MINUS``         :math:`A_-`
``S_COMP_PLUS``         the Neumaier compensation of :math:`A_+`
``S_COMP_MINUS``        the Neumaier compensation of :math:`A_-`
``GRAD_MOMENTUM``       :math:`M_k = \beta M_{k-1} + \nabla L_{\mathcal B_k}(\theta_k)`
``MIRROR_SUM``          :math:`\sum_m \gamma M_m`, the mirror variable :math:`G_N` (compensated)
``MIRROR_COMP``         the Neumaier compensation of ``MIRROR_SUM``
``MIN_DELTA``           running minimum of :math:`\Delta_k = |w_{+,k} w_{-,k}|`
``N_FLOAT_ROWS``        number of rows of ``fstate``
======================  ==================================================================

``istate`` is int64 ``(N_INT_ROWS, d)``: sign crossings of :math:`w_+` and :math:`w_-`
per coordinate, a crossing being counted at the update after which the sign differs:

======================  ==================================================================
``CROSS_PLUS``          number of sign changes of :math:`w_+`
``CROSS_MINUS``         number of sign changes of :math:`w_-`
``FIRST_CROSS_PLUS``    update (step number) of the first sign change of :math:`w_+`; -1 if none
``FIRST_CROSS_MINUS``   the same for :math:`w_-`
``LAST_CROSS_PLUS``     update of the last sign change of :math:`w_+`; -1 if none
``LAST_CROSS_MINUS``    the same for :math:`w_-`
``N_INT_ROWS``          number of rows of ``istate``
======================  ==================================================================

Gradient modes
--------------
The ``mode`` argument of the MGD and flow kernels: how :math:`\nabla L(\theta)` is evaluated.

======================  ==================================================================
``MODE_HESSIAN``        :math:`H\theta - b`, :math:`H = X^\top X/n`, :math:`b = X^\top y/n` (:math:`d^2` work)
``MODE_DATA``           :math:`X^\top(X\theta - y)/n` (:math:`2nd` work; also yields the loss)
``MODE_MINIBATCH``      SMGD: the gradient on a random batch of rows (MGD kernels only)
======================  ==================================================================

Record layout
-------------
A recorded state goes to row ``r`` of the record buffers: ``rec_step[r]`` (the step, or
grid step for flows), ``rec_losses[r, 0]`` and ``rec_losses[r, 1]`` (train and test loss,
NaN without a test set) and the vectors ``rec_vectors[r, REC_*, :]`` (length ``d``):

======================  ==================================================================
``REC_THETA``           :math:`\theta = (w_+^2 - w_-^2)/4`
``REC_W_PLUS``          :math:`w_+`
``REC_W_MINUS``         :math:`w_-`
``REC_DELTA``           :math:`\Delta = |w_+ w_-|`
``N_REC_VECTORS``       number of recorded vectors (axis 1 of ``rec_vectors``)
======================  ==================================================================

Padding
-------
The kernels work on vectors of ``dp`` coordinates, ``dp = round_up(d, PAD)``: the problem
arrays are zero-padded to ``dp`` columns, and the padding coordinates hold ``w± = 1``,
``θ = 0``, ``∇L = 0`` so they never change and the real coordinates get exactly the bits
of an unpadded computation. ``PAD`` is 16 so that the vectorised loops (4 lanes x 4-way
interleave) never fall into scalar tails; the flow kernel's work-array block
(:data:`.flow.BLOCK`) divides it. :func:`round_up` is the one way the kernels round a
size up to a multiple (``PAD`` here, ``TILE`` for the lockstep sweeps' matrices).
:func:`block_view` is the one way the network kernels see a layer of a flat buffer.
"""

from numba.extending import register_jitable

# -- MGD float state rows (fstate) ----------------------------------------------------------------
W_PLUS = 0
W_MINUS = 1
W_PLUS_PREV = 2
W_MINUS_PREV = 3
S_SUM_PLUS = 4
S_SUM_MINUS = 5
S_COMP_PLUS = 6
S_COMP_MINUS = 7
GRAD_MOMENTUM = 8
MIRROR_SUM = 9
MIRROR_COMP = 10
MIN_DELTA = 11
N_FLOAT_ROWS = 12

# -- MGD int state rows (istate) ------------------------------------------------------------------
CROSS_PLUS = 0
CROSS_MINUS = 1
FIRST_CROSS_PLUS = 2
FIRST_CROSS_MINUS = 3
LAST_CROSS_PLUS = 4
LAST_CROSS_MINUS = 5
N_INT_ROWS = 6

# -- gradient modes -------------------------------------------------------------------------------
MODE_HESSIAN = 0
MODE_DATA = 1
MODE_MINIBATCH = 2

# -- recorded vectors, axis 1 of rec_vectors ------------------------------------------------------
REC_THETA = 0
REC_W_PLUS = 1
REC_W_MINUS = 2
REC_DELTA = 3
N_REC_VECTORS = 4

#: Working vectors are padded to a multiple of this length (see the module docstring).
PAD = 16


@register_jitable
def round_up(n, multiple):
    """The smallest multiple of ``multiple`` (> 0) that is ``>= n`` (n >= 0); callable from ``@njit`` code too."""
    return -(-n // multiple) * multiple


@register_jitable
def block_view(buf, offset, rows, cols):
    """The (rows, cols) row-major view of ``buf[offset:offset + rows·cols]`` (a layer of a network's flat
    parameters, or of its activations); callable from ``@njit`` code too.

    Why views: indexing a flat buffer with ``offset + i`` keeps Numba's negative-index
    wrap-around test in the inner loops and stops LLVM from vectorising them; rows of 2-D
    views indexed by a ``range`` variable vectorise (the same element order, the same bits).
    """
    return buf[offset:offset + rows * cols].reshape((rows, cols))

