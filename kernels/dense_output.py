r"""The dense output of the adaptive MGF / gradient-flow steps: one polynomial form for both steppers.

A step from ``y₀`` to ``y₁`` of size ``h`` keeps, per coordinate of the rows w₊, w₋, ẇ₊, ẇ₋ (gradient flow: P in
the first, the others 0), the rows ``dense[0] = y₀``, ``dense[1] = y₁`` and ``dense[2 + m] = c_m``, m = 0 … 5, of

.. math::

    y(s) = (1-s)\,y_0 + s\,\big(y_1 + (1-s)\,(c_0 + s(c_1 + s(c_2 + s(c_3 + s(c_4 + s c_5))))))\big),
    \qquad s = (t - t_0)/h \in [0, 1]:

every polynomial of degree ≤ 7 that takes y₀ at s = 0 and y₁ at s = 1. Rodas5P's dense output (order 4,
:mod:`.flow_rodas`) fills c₀, c₁, c₂ (its q₁, q₂, q₃) and leaves c₃ … c₅ at 0; DOP853's (order 7,
:mod:`.flow_dop853`) fills all six. With c₃ = c₄ = c₅ = 0 the evaluation below performs, on every nonzero value,
the operations of the degree-4 form it replaced, so Rodas5P's records and crossings keep their bits.

Read for records (:func:`_dense_at`), for the sign crossings of w± (:func:`_dense_root`, zeros of a row) and for the
largest w² (:func:`_dense_extremes`, the values at the turns of a row: zeros of its slope :func:`_dense_slope`).
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS, LEAF_JIT_OPTIONS
from .crossings import _safeguarded_step
from .flow import P_INT, V_MINUS, V_PLUS, W_MINUS, W_PLUS

#: Rows of ``dense`` (shape (N_DENSE_ROWS, 4, d)): y₀, y₁, c₀ … c₅.
N_DENSE_ROWS = 8
#: Rows of ``dense`` before the explicit start (0.6.0 development checkpoints): y₀, y₁, c₀, c₁, c₂.
N_DENSE_ROWS_BEFORE_EXPLICIT = 5
#: The state rows the dense output covers, in the order of its second axis.
DENSE_STATE_ROWS = (W_PLUS, W_MINUS, V_PLUS, V_MINUS)
#: Newton iterations of a crossing (or a turn) on the dense output.
ROOT_ITERATIONS = 60
#: Equal parts of a step on each of which a turn of a row's dense output is looked for (:func:`_dense_extremes`).
TURN_PARTS = 8


@njit(inline="always", **JIT_OPTIONS)
def _dense_terms(dense, k, i, s):
    """y₀, y₁ and q, q', q'' at ``s`` of the dense output of row ``k``, coordinate ``i`` (the form of the module
    docstring, y(s) = (1-s)y₀ + s(y₁ + (1-s)q(s)))."""
    y0 = dense[0, k, i]
    y1 = dense[1, k, i]
    c0 = dense[2, k, i]
    c1 = dense[3, k, i]
    c2 = dense[4, k, i]
    c3 = dense[5, k, i]
    c4 = dense[6, k, i]
    c5 = dense[7, k, i]
    q = c0 + s * (c1 + s * (c2 + s * (c3 + s * (c4 + s * c5))))
    dq = (c1 + 2.0 * s * c2) + s * s * (3.0 * c3 + s * (4.0 * c4 + s * (5.0 * c5)))
    d2q = 2.0 * c2 + s * (6.0 * c3 + s * (12.0 * c4 + s * (20.0 * c5)))
    return y0, y1, q, dq, d2q


@njit(**LEAF_JIT_OPTIONS)
def _dense_eval(dense, k, i, s):
    """The dense output of row ``k``, coordinate ``i`` at fraction ``s`` of the step, and its derivative in ``s``."""
    y0, y1, q, dq, _ = _dense_terms(dense, k, i, s)
    s1 = 1.0 - s
    return s1 * y0 + s * (y1 + s1 * q), (y1 - y0) + (1.0 - 2.0 * s) * q + s * s1 * dq


@njit(**LEAF_JIT_OPTIONS)
def _dense_at(dense, k, i, s):
    """The dense output of row ``k`` (w₊, w₋, ẇ₊, ẇ₋) of coordinate ``i`` at fraction ``s`` of the last step."""
    return _dense_eval(dense, k, i, s)[0]


@njit(**LEAF_JIT_OPTIONS)
def _dense_root(dense, k, i, lo, hi, s):
    """A zero of the dense output of row ``k``, coordinate ``i`` in [lo, hi] started from ``s`` (Newton safeguarded
    by bisection)."""
    plo = _dense_eval(dense, k, i, lo)[0]
    phi = _dense_eval(dense, k, i, hi)[0]
    if (plo < 0.0) == (phi < 0.0):
        return s  # the dense output does not change sign on the Hermite bracket: keep the Hermite root
    neg_lo = plo < 0.0
    for _ in range(ROOT_ITERATIONS):
        p, dp = _dense_eval(dense, k, i, s)
        s, lo, hi, done = _safeguarded_step(p, dp, s, lo, hi, neg_lo)
        if done:
            return s
    return s


@njit(**LEAF_JIT_OPTIONS)
def _dense_slope(dense, k, i, s):
    """The slope in ``s`` of the dense output of row ``k``, coordinate ``i`` at fraction ``s`` of the step (as
    :func:`_dense_eval`'s), and its own slope: y' = (y₁ - y₀) + (1 - 2s)q + s(1-s)q', y'' = -2q + 2(1 - 2s)q' +
    s(1-s)q''."""
    y0, y1, q, dq, d2q = _dense_terms(dense, k, i, s)
    s1 = 1.0 - s
    return (y1 - y0) + (1.0 - 2.0 * s) * q + s * s1 * dq, -2.0 * q + 2.0 * (1.0 - 2.0 * s) * dq + s * s1 * d2q


@njit(**LEAF_JIT_OPTIONS)
def _dense_extremes(dense, k, i):
    """The least and the largest value of the dense output of row ``k``, coordinate ``i`` at its turns inside the
    step (``(inf, -inf)`` without one): a turn is a zero of its slope, located by Newton's method safeguarded by
    bisection on each of ``TURN_PARTS`` equal parts of [0, 1] whose ends the slope has of opposite signs (a
    pair of turns inside one part, a wiggle far under the step's error, is passed over). The ends are the
    step's points, which the caller sees anyway."""
    low = np.inf
    high = -np.inf
    lo = 0.0
    slo = _dense_slope(dense, k, i, 0.0)[0]
    for part in range(1, TURN_PARTS + 1):
        hi = part / TURN_PARTS
        shi = _dense_slope(dense, k, i, hi)[0]
        if (slo < 0.0) != (shi < 0.0):
            neg_lo = slo < 0.0
            a = lo
            b = hi
            s = 0.5 * (lo + hi)
            for _ in range(ROOT_ITERATIONS):
                p, dp = _dense_slope(dense, k, i, s)
                s, a, b, done = _safeguarded_step(p, dp, s, a, b, neg_lo)
                if done:
                    break
            v = _dense_at(dense, k, i, s)
            low = min(low, v)
            high = max(high, v)
        lo = hi
        slo = shi
    return low, high


@njit(**LEAF_JIT_OPTIONS)
def _set_point_dense(gf, Y, dense):
    """Dense rows of a step of length 0 at ``Y`` (the initial point: every s gives Y; gradient flow: row 0 is P)."""
    d = Y.shape[1]
    for k in range(4):
        r = P_INT if (gf and k == 0) else DENSE_STATE_ROWS[k]
        for i in range(d):
            v = 0.0 if (gf and k > 0) else Y[r, i]
            dense[0, k, i] = v
            dense[1, k, i] = v
            for m in range(2, N_DENSE_ROWS):
                dense[m, k, i] = 0.0


@njit(**LEAF_JIT_OPTIONS)
def _dense_ends(Y0, Y1, r, dense, k):
    """Rows y₀, y₁ of dense row ``k`` of the last step: row ``r`` of its end points (whole arrays and a row index,
    not row views: a view made in the step loop costs atomic reference counts)."""
    for i in range(Y0.shape[1]):
        dense[0, k, i] = Y0[r, i]
        dense[1, k, i] = Y1[r, i]
