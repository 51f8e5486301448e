r"""The NDF's dense output (:mod:`.flow_ndf`): the interpolating polynomial of its difference array, its slope, and
the turns of P on it.

After a step of order k and size h from the current point, the backward differences :math:`D_0, \dots, D_k` (rows P
and G₂, :mod:`.flow_rodas_gf`) define the polynomial through the last k + 1 points (SciPy's ``BdfDenseOutput``)

.. math::

    y(t_n + s) = \sum_{j=0}^{k} D_j\,p_j(s),\qquad p_0 = 1,\quad p_j(s) = p_{j-1}(s)\,\frac{s + (j-1)h}{jh},
    \qquad s \in [-h, 0],

which the records read (:func:`_dense_p`), and whose slope the search for the peaks of w² inside a step reads
(:func:`_turn_peaks`; at the step's ends in closed form: ``SLOPE_AT_START``, ``SLOPE_AT_END``).
"""

import numpy as np
from numba import njit

from .config import INLINE_JIT_OPTIONS, LEAF_JIT_OPTIONS
from .flow import MAX_W2
from .flow_rodas_gf import MIRROR_P

#: The NDF's orders are 1 to MAX_ORDER (:mod:`.flow_ndf`): the degree of its polynomial.
MAX_ORDER = 5


@njit(**LEAF_JIT_OPTIONS)
def _dense_p(D, order, t, h, tr, out):
    """P at time ``tr`` (in the last step, [t − h, t]) from the difference array (module docstring)."""
    d = out.shape[0]
    for q in range(d):
        out[q] = D[0, MIRROR_P, q]
    p = 1.0
    for j in range(1, order + 1):
        p *= (tr - (t - (j - 1) * h)) / (h * j)
        for q in range(d):
            out[q] += D[j, MIRROR_P, q] * p


@njit(**INLINE_JIT_OPTIONS)
def _basis(order, h, s, basis, r):
    """The interpolating polynomial's basis at ``s`` ∈ [−h, 0] after the current point (:func:`_dense_p`) and its
    slope, into rows ``r`` and ``r + 1`` of ``basis``: p₀ = 1, p_j = p_{j−1}(s + (j−1)h)/(jh), and by the product
    rule p_j' = p_{j−1}'(s + (j−1)h)/(jh) + p_{j−1}/(jh). The same for every coordinate: P_q(s) = Σ_j D_j,q p_j,
    dP_q/dt = Σ_j D_j,q p_j'. (Rows by index, not views: a view made in the step loop costs an atomic reference
    count, :func:`.flow_ndf._rms`.)"""
    basis[r, 0] = 1.0
    basis[r + 1, 0] = 0.0
    for j in range(1, order + 1):
        a = (s + (j - 1) * h) / (h * j)
        basis[r + 1, j] = basis[r + 1, j - 1] * a + basis[r, j - 1] / (h * j)
        basis[r, j] = basis[r, j - 1] * a


@njit(**INLINE_JIT_OPTIONS)
def _combine(D, order, q, basis, r):
    """Σ_{j ≤ order} D_j,q c_j on the P row, c row ``r`` of ``basis`` (:func:`_basis`)."""
    total = 0.0
    for j in range(order + 1):
        total += D[j, MIRROR_P, q] * basis[r, j]
    return total


#: h·p_j' at the end of the step (s = 0, where p_j = 0 for j ≥ 1): 1/j (:func:`_basis`).
SLOPE_AT_END = np.array([0.0] + [1.0 / j for j in range(1, MAX_ORDER + 1)])
#: h·p_j' at its start (s = −h, where p₁ = −1 and p_j = 0 for j ≥ 2): 1, then −1/(j(j − 1)) for j ≥ 2.
SLOPE_AT_START = np.array([0.0, 1.0] + [-1.0 / (j * (j - 1)) for j in range(2, MAX_ORDER + 1)])
#: Bisections of the slope that locate a turn of P inside a step (:func:`_turn_peaks`): to 2^-40 of the step, where
#: P, flat at its turn, is off its extreme by about 2^-80 h² |P''|.
TURN_BISECTIONS = 40


@njit(**LEAF_JIT_OPTIONS)
def _turn_peaks(D, order, h, w_init, F, g, fstate, basis):
    """The running maximum of w² (``fstate[MAX_W2]``) at the turns of P inside the step just taken, on its
    interpolating polynomial (the difference array of the step, before a change of step size or order). A coordinate
    whose ∇L changes sign between the step's start (``F[MIRROR_P]``) and its end (``g``), as
    :func:`.flow_rodas_run._may_turn` asks, and whose polynomial's slope does too, has the root of that slope
    bisected; w₊² = w₊(0)²e^{-2P} and w₋² = w₋(0)²e^{2P} are taken there (w₊² peaks at a least P, w₋² at a
    largest). A long step passes over the peak its end points miss (``tests/test_dense_peaks.py``);
    :func:`.flow_rodas_run._turn_peaks` does the same on Rodas5P's dense output. Reads D only: no other bit of the run
    changes. ``basis``: (2, MAX_ORDER + 1) work rows for :func:`_basis` at a bisection point. (∇L's signs screen the
    coordinates: the polynomial's slopes of every coordinate at every step, dependent sums, cost 5-10 % of a
    gradient-flow run's time, measured 2026-11-29.)"""
    for q in range(D.shape[2]):
        if (F[MIRROR_P, q] < 0.0) == (g[q] < 0.0):
            continue
        slope_lo = 0.0  # h times the polynomial's slopes at the step's ends
        slope_hi = 0.0
        for j in range(1, order + 1):
            slope_lo += D[j, MIRROR_P, q] * SLOPE_AT_START[j]
            slope_hi += D[j, MIRROR_P, q] * SLOPE_AT_END[j]
        if not slope_lo * slope_hi < 0.0:  # (no turn of the polynomial, or one at an end point)
            continue
        s_lo = -h
        s_hi = 0.0
        for _ in range(TURN_BISECTIONS):
            s_mid = 0.5 * (s_lo + s_hi)
            _basis(order, h, s_mid, basis, 0)
            if (_combine(D, order, q, basis, 1) < 0.0) == (slope_lo < 0.0):
                s_lo = s_mid
            else:
                s_hi = s_mid
        _basis(order, h, 0.5 * (s_lo + s_hi), basis, 0)
        e = np.exp(_combine(D, order, q, basis, 0))  # (the map of flow_rodas_gf._weights)
        wp = w_init[0, q] / e
        wm = w_init[1, q] * e
        w2 = max(wp * wp, wm * wm)
        if w2 > fstate[MAX_W2, q]:
            fstate[MAX_W2, q] = w2
