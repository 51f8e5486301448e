"""Float64 conventions shared by the theory modules.

* :data:`EPS`, the float64 machine epsilon, which sets the rounding floors of the implicit-bias solver and
  the rank tolerance of the range check;
* :func:`scalar_or_array`, the return convention of the element-wise functions: scalar input (a 0-d
  result) gives a Python float, array input an array of the broadcast shape.
"""

import numpy as np

EPS = np.finfo(np.float64).eps


def scalar_or_array(arr):
    """Return a Python float for 0-d results, the array otherwise."""
    return float(arr) if np.ndim(arr) == 0 else arr
