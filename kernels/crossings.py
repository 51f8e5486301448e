r"""Where a coordinate of :math:`w_\pm` crosses zero inside one RK4 step: the crossing search of :mod:`.flow`.

Method
------
An RK4 step gives, at both ends of ``[t0, t0 + h]``, the values :math:`w_0, w_1` and the
slopes :math:`\dot w_0, \dot w_1` of a coordinate. On the step, rescaled to
:math:`s \in [0, 1]`, the trajectory is approximated by the cubic Hermite interpolant
of :math:`(w_0, w_1, h\dot w_0, h\dot w_1)` (:func:`_hermite`), whose zeros are the
crossing times (as fractions ``s`` of the step):

* one crossing when :math:`w_0` and :math:`w_1` differ in sign;
* a pair of crossings when they agree in sign but :math:`|w|` decreases at the start and
  increases at the end and the cubic's extremum in between has the other sign (possible
  for MGF only: gradient flow cannot cross zero).

Each zero is found by Newton's method safeguarded by bisection on a sign-changing bracket
(:func:`_hermite_root`, at most ``_ROOT_ITERATIONS`` iterations). The interpolation
error, O(h⁴), is of the order of the trajectory's own error, so a crossing time is as
accurate as the run.

What :mod:`.flow` does with a crossing (counts, first and last times, the crossing log,
freezing :math:`J_\pm, K_\pm`) is its own bookkeeping (:func:`.flow._scan_crossings`).
"""

import numpy as np
from numba import njit

from .config import JIT_OPTIONS

#: Newton/bisection iterations of the crossing search on the Hermite cubic.
_ROOT_ITERATIONS = 100


@njit(**JIT_OPTIONS)
def _hermite(w0, w1, m0, m1, s):
    """Cubic Hermite interpolant on [0, 1] (values w0, w1; slopes m0, m1 per unit s) and its slope."""
    s2 = s * s
    s3 = s2 * s
    p = ((2.0 * s3 - 3.0 * s2 + 1.0) * w0 + (s3 - 2.0 * s2 + s) * m0 + (-2.0 * s3 + 3.0 * s2) * w1
         + (s3 - s2) * m1)
    dp = (6.0 * s2 - 6.0 * s) * w0 + (3.0 * s2 - 4.0 * s + 1.0) * m0 + (-6.0 * s2 + 6.0 * s) * w1 \
        + (3.0 * s2 - 2.0 * s) * m1
    return p, dp


@njit(inline="always", **JIT_OPTIONS)
def _safeguarded_step(p, dp, s, lo, hi, neg_lo):
    """One step of Newton's method safeguarded by bisection, on a bracket [lo, hi] whose ``lo`` end has the sign
    ``neg_lo``: ``(next s, lo, hi, done)`` from the value ``p`` and slope ``dp`` at ``s`` (done: ``next s`` is the
    root to the last bit). The one iteration of every root search of the flows (also :mod:`.flow_rodas_run`)."""
    if p == 0.0:
        return s, lo, hi, True
    if (p < 0.0) == neg_lo:
        lo = s
    else:
        hi = s
    nxt = s - p / dp if dp != 0.0 else 0.5 * (lo + hi)
    if not (lo < nxt < hi):
        nxt = 0.5 * (lo + hi)
    return nxt, lo, hi, abs(nxt - s) <= 4e-16 or hi - lo <= 4e-16


@njit(**JIT_OPTIONS)
def _hermite_root(w0, w1, m0, m1, lo, hi):
    """A zero of the Hermite cubic in [lo, hi], where it changes sign (Newton safeguarded by bisection)."""
    neg_lo = _hermite(w0, w1, m0, m1, lo)[0] < 0.0
    s = 0.5 * (lo + hi)
    for _ in range(_ROOT_ITERATIONS):
        p, dp = _hermite(w0, w1, m0, m1, s)
        s, lo, hi, done = _safeguarded_step(p, dp, s, lo, hi, neg_lo)
        if done:
            return s
    return s


@njit(inline="always", **JIT_OPTIONS)
def _may_cross(w0, w1, m0, m1):
    """Whether the Hermite cubic of (w0, w1, m0, m1) may change sign on [0, 1]: the end values differ in sign, or
    |w| decreases at the start and increases at the end (:func:`_hermite_crossings` then decides)."""
    return ((w1 < 0.0) != (w0 < 0.0)) or ((w0 * m0 < 0.0) and (w1 * m1 > 0.0))


@njit(**JIT_OPTIONS)
def _hermite_crossings(w0, w1, m0, m1, out):
    """Sign changes of the Hermite cubic on [0, 1], as fractions of the step.

    One crossing when the end values differ in sign; two when they agree but |w|
    decreases at the start, increases at the end and the cubic's extremum in
    between has the other sign. ``out`` (length 6) receives the roots in
    ``out[0:2]`` and their brackets ``[out[2], out[3]]``, ``[out[4], out[5]]``.
    Returns the number found (0, 1 or 2).
    """
    if (w1 < 0.0) != (w0 < 0.0):
        out[0] = _hermite_root(w0, w1, m0, m1, 0.0, 1.0)
        out[2] = 0.0
        out[3] = 1.0
        return 1
    if not (w0 * m0 < 0.0 and w1 * m1 > 0.0):
        return 0
    # critical points of p(s) = a s³ + b s² + m0 s + w0, i.e. the roots of 3a s² + 2b s + m0
    a = 2.0 * w0 + m0 - 2.0 * w1 + m1
    b = -3.0 * w0 - 2.0 * m0 + 3.0 * w1 - m1
    qa = 3.0 * a
    qb = 2.0 * b
    r1 = -1.0
    r2 = -1.0
    if qa == 0.0:
        if qb != 0.0:
            r1 = -m0 / qb
    else:
        disc = qb * qb - 4.0 * qa * m0
        if disc >= 0.0:
            sq = np.sqrt(disc)
            r1 = (-qb - sq) / (2.0 * qa)
            r2 = (-qb + sq) / (2.0 * qa)
    neg0 = w0 < 0.0
    mid = -1.0
    if 0.0 < r1 < 1.0 and (_hermite(w0, w1, m0, m1, r1)[0] < 0.0) != neg0:
        mid = r1
    elif 0.0 < r2 < 1.0 and (_hermite(w0, w1, m0, m1, r2)[0] < 0.0) != neg0:
        mid = r2
    if mid < 0.0:
        return 0
    out[0] = _hermite_root(w0, w1, m0, m1, 0.0, mid)
    out[1] = _hermite_root(w0, w1, m0, m1, mid, 1.0)
    out[2] = 0.0
    out[3] = mid
    out[4] = mid
    out[5] = 1.0
    return 2
