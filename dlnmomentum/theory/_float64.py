"""Float64 conventions shared by the theory modules.

* :data:`EPS`, the float64 machine epsilon, which sets the rounding floors of the implicit-bias solver and
  the rank tolerance of the range check;
* :func:`scalar_or_array`, the return convention of the element-wise functions: scalar input (a 0-d
  result) gives a Python float, array input an array of the broadcast shape;
* :func:`norm2`, the Euclidean norm without overflow or underflow of its squares (summaries, relative distances);
  :func:`norm2_rows`, the same of each row of a matrix, bit for bit;
* :func:`require_in_range`, the one error for a result that float64 cannot hold (it names the inputs that gave it).
"""

import numpy as np

EPS = np.finfo(np.float64).eps
#: The largest finite float64 (about 1.8e308).
FLOAT_MAX = float(np.finfo(np.float64).max)


def scalar_or_array(arr):
    """Return a Python float for 0-d results, the array otherwise."""
    return float(arr) if np.ndim(arr) == 0 else arr


#: A largest entry within [1/_PLAIN_NORM_LIMIT, _PLAIN_NORM_LIMIT] leaves the sum of squares a normal float64.
_PLAIN_NORM_LIMIT = 1e150


def norm2(x):
    """‖x‖₂: ``np.linalg.norm`` as it is (the same bits) where the largest |entry| s is within [1e-150, 1e150], else
    s‖x/s‖₂ (a diverged run's Δ of 1e180 has a finite norm that the plain sum of squares overflows to inf; a θ of
    1e-300, one that it rounds to 0). NaN or inf entries give what ``np.linalg.norm`` gives."""
    x = np.asarray(x, dtype=np.float64)
    s = float(np.abs(x).max(initial=0.0))
    if 0.0 < s < np.inf and not 1.0 / _PLAIN_NORM_LIMIT <= s <= _PLAIN_NORM_LIMIT:
        return s * float(np.linalg.norm(x / s))
    with np.errstate(invalid="ignore"):
        return float(np.linalg.norm(x))


def norm2_rows(x):
    """:func:`norm2` of each row of the 2-D ``x``, bit for bit, in a few array operations instead of one call per row
    (a sweep wave's ‖Δ∞‖ of each point).

    ``np.linalg.norm`` of a vector is ``sqrt(x.dot(x))``, and ``x.dot(x)`` is numpy's dot of two vectors (one BLAS
    ddot); np.matmul of the stack of rows as (1, d) @ (d, 1) runs that same dot for each row (numpy's matmul inner
    loop, for a 1 × 1 result), and sqrt is correctly rounded. The rows that :func:`norm2` scales (largest |entry|
    outside [1e-150, 1e150]: diverged points) take :func:`norm2` itself."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):  # (no warning from NaN or inf entries, as in norm2: the values say it)
        s = np.abs(x).max(axis=-1, initial=0.0)
        out = np.sqrt(np.matmul(x[:, None, :], x[:, :, None])[:, 0, 0])
    scaled = np.flatnonzero((0.0 < s) & (s < np.inf) & ~((1.0 / _PLAIN_NORM_LIMIT <= s) & (s <= _PLAIN_NORM_LIMIT)))
    for i in scaled:
        out[i] = norm2(x[i])
    return out


def inputs_at(bad, inputs):
    """``"gamma=..., beta=..."``: the inputs (arrays of ``bad``'s shape, by name) at the first entry where ``bad``
    holds."""
    i = np.flatnonzero(np.ravel(bad))[0]
    return ", ".join(f"{k}={float(np.ravel(v)[i])!r}" for k, v in inputs.items())


def require_in_range(what, value, inputs, rule):
    """``value`` unless an entry is inf or NaN: then a ValueError saying that ``what`` exceeds float64's range at
    the inputs of the first such entry (``inputs``: arrays of ``value``'s shape, by name) with ``rule``, the formula.
    For results that are finite wherever they are representable: inf or NaN means the exact value is beyond 1.8e308.
    """
    bad = ~np.isfinite(value)
    if np.any(bad):
        at = f" for {inputs_at(bad, inputs)}" if inputs else ""
        raise ValueError(f"{what} is beyond float64's range (above 1.8e308){at} ({rule})")
    return value
