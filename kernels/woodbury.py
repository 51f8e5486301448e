r"""The Woodbury form of the adaptive schemes' step matrix, for d well above n.

Every implicit step of the adaptive schemes solves with a matrix of the form identity plus a diagonal times the
Hessian :math:`H = X^\top X/n` of the loss, of rank at most n (issue 22):

* MGF(λ) by Rodas5P (:mod:`.flow_rodas`): :math:`(I + \kappa EH)z = t` with :math:`\kappa = \beta/2` and
  :math:`E > 0` diagonal (the reduced system of its docstring);
* gradient flow in the mirror coordinate P, by Rodas5P (:mod:`.flow_rodas_gf`) and by the NDF's Newton iteration
  (:mod:`.flow_ndf`): :math:`(I + \kappa H\Sigma)z = t` with :math:`\kappa = c` and :math:`\Sigma > 0` diagonal.

The d × d route factorises :math:`E^{-1} + \kappa H` (or :math:`\Sigma^{-1} + \kappa H`) by Cholesky: about d³/6
operations, then 2d² a solve. With :math:`E = \mathrm{diag}(e)` and the n × n symmetric positive definite

.. math::

    M = \frac{n}{\kappa}\,I_n + X E X^\top,

the push-through identity :math:`(I + AB)^{-1} = I - A(I + BA)^{-1}B` gives

.. math::

    (I + \kappa EH)^{-1} t = t - E X^\top M^{-1} X t,\qquad
    (I + \kappa H E)^{-1} t = t - X^\top M^{-1} X (e \odot t),

so a step costs the n²d/2 operations of forming M and the n³/6 of its Cholesky factorisation
(:func:`.small_linalg._cholesky`), and a solve 4nd + 2n² (two products by X and the two triangular solves).
Rodas5P makes one factorisation and eight solves a step (the NDF about one solve per right-hand side): the
operation counts of the two routes cross near d = 2.7n (n = 20: d³/6 + 8.5d² against n²d/2 + n³/6 + 8(4nd + n²)
is 12 150 against 29 733 at d = 30, 66 600 against 54 933 at d = 60), so the Woodbury form is taken from
d ≥ ``WOODBURY_MIN_RATIO``·n on (:func:`_use_woodbury`). On the paper's problem (n = 20, d = 30) the schemes keep the
d × d route, and with it their bits. The two routes are the same linear algebra in another order: their solutions
agree to the rounding of the factorised matrix's condition (``tests/test_woodbury.py``).
"""

import numpy as np
from numba import njit

from .config import INLINE_JIT_OPTIONS, JIT_OPTIONS, LEAF_JIT_OPTIONS
from .small_linalg import _cholesky, _cholesky_solve

#: The Woodbury form is taken where d ≥ WOODBURY_MIN_RATIO·n (module docstring: the operation counts cross near
#: d = 2.7n).
WOODBURY_MIN_RATIO = 3


@njit(**INLINE_JIT_OPTIONS)
def _use_woodbury(n, d):
    """Whether the step matrix of n samples and d coordinates is factorised in the Woodbury form (module
    docstring)."""
    return d >= WOODBURY_MIN_RATIO * n


@njit(**LEAF_JIT_OPTIONS)
def _woodbury_factor(X, e, kappa, M, MT):
    """M = (n/κ)I + X diag(e) Xᵀ (n × n, from its upper triangle), factorised by :func:`.small_linalg._cholesky`
    into ``M`` and ``MT``; False if it is not positive definite (e > 0 and κ > 0 make it so, up to overflow)."""
    n, d = X.shape
    for a in range(n):
        for b in range(a, n):
            s = 0.0
            for i in range(d):
                s += (X[a, i] * e[i]) * X[b, i]
            M[a, b] = s
        M[a, a] += n / kappa
    return _cholesky(M, MT)


@njit(**INLINE_JIT_OPTIONS)
def _project(X, v, u):
    """u = X v (n-vector)."""
    n, d = X.shape
    for a in range(n):
        s = 0.0
        for i in range(d):
            s += X[a, i] * v[i]
        u[a] = s


@njit(**INLINE_JIT_OPTIONS)
def _column_dot(X, u, i):
    """(Xᵀu)_i = Σ_a X[a, i] u[a]."""
    s = 0.0
    for a in range(X.shape[0]):
        s += X[a, i] * u[a]
    return s


@njit(**LEAF_JIT_OPTIONS)
def _woodbury_solve_eh(X, e, M, MT, t, u):
    """t ← (I + κ diag(e) H)⁻¹ t = t − e ⊙ Xᵀ M⁻¹ X t, in place, with the factors of :func:`_woodbury_factor`;
    ``u``: an n-vector of work."""
    _project(X, t, u)
    _cholesky_solve(M, MT, u)
    for i in range(X.shape[1]):
        t[i] -= e[i] * _column_dot(X, u, i)


@njit(**LEAF_JIT_OPTIONS)
def _woodbury_solve_he(X, e, M, MT, t, u, v):
    """t ← (I + κ H diag(e))⁻¹ t = t − Xᵀ M⁻¹ X (e ⊙ t), in place, with the factors of :func:`_woodbury_factor`;
    ``u``: an n-vector, ``v``: a d-vector of work."""
    for i in range(X.shape[1]):
        v[i] = e[i] * t[i]
    _project(X, v, u)
    _cholesky_solve(M, MT, u)
    for i in range(X.shape[1]):
        t[i] -= _column_dot(X, u, i)


@njit(**JIT_OPTIONS)
def _woodbury_matrices(n, d):
    """(M, MT): the n × n work matrices of the Woodbury form where :func:`_use_woodbury`, else 1 × 1 placeholders
    (a problem of many samples and few coordinates never allocates n × n)."""
    m = n if _use_woodbury(n, d) else 1
    return np.zeros((m, m)), np.zeros((m, m))
