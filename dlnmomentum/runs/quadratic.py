"""Heavy-ball MGD on a quadratic: the paper's Figure 1 setting and a closed-form check of the update rule."""

import numpy as np

from ..kernels import mgd as K
from ..status import DIVERGED, MAX_STEPS
from ..validate import as_array, as_float, as_int


def heavy_ball_quadratic(A, c, x0, gamma, beta, steps):
    """Heavy-ball MGD(γ, β) on the quadratic ``f(x) = ½xᵀAx - cᵀx`` from ``x1 = x0``.

    The paper's Figure 1 setting (and a check of the update rule against the
    closed form of the linear recurrence). ``A`` must be symmetric.

    Returns
    -------
    x : array
        The iterate after ``steps`` updates.
    status : int
        ``MAX_STEPS`` or ``DIVERGED``.
    """
    A = as_array("A", A, ndim=2)
    d = A.shape[0]
    if A.shape != (d, d) or not np.array_equal(A, A.T):
        raise ValueError(f"A must be a symmetric square matrix, got shape {A.shape}")
    c = as_array("c", c, ndim=1, shape=(d,))
    x = as_array("x0", x0, ndim=1, shape=(d,))
    gamma = as_float("gamma", gamma, low=0.0, low_open=True)
    beta = as_float("beta", beta, low=0.0, high=1.0, high_open=True)
    steps = as_int("steps", steps, low=0)
    x_prev = x.copy()
    code = K._heavy_ball_quadratic(A, c, gamma, beta, x, x_prev, steps)
    return x, (DIVERGED if code == DIVERGED else MAX_STEPS)
