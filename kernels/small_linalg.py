"""Small dense linear algebra in Numba: LU with partial pivoting and Cholesky, with their substitutions.

For the d × d (or 2d × 2d) systems of the adaptive scheme's steps (:func:`.flow_rodas._factor`,
:func:`.flow_rodas._solve_w`), tens of rows, factorised every step. The kernels never call LAPACK: these loops
compile under the package's one policy (:mod:`.config`: strict IEEE, no reassociation), so a factorisation
does not depend on which LAPACK is installed and its CPU-dependent code paths, nor start LAPACK's threads inside
``prange`` lanes. The loops are written as ``axpy`` passes over contiguous rows (they
vectorise); the substitutions take the factors transposed where a column pass needs contiguous columns.
"""

import numpy as np
from numba import njit

from .config import LEAF_JIT_OPTIONS


@njit(**LEAF_JIT_OPTIONS)
def _lu(Am, piv):
    """In-place LU of the square ``Am`` with partial pivoting; returns False if it is singular."""
    m = Am.shape[0]
    for k in range(m):
        p = k
        best = abs(Am[k, k])
        for i in range(k + 1, m):
            v = abs(Am[i, k])
            if v > best:
                best = v
                p = i
        piv[k] = p
        if best == 0.0 or not (best < np.inf):
            return False
        if p != k:
            for j in range(m):
                tmp = Am[k, j]
                Am[k, j] = Am[p, j]
                Am[p, j] = tmp
        inv = 1.0 / Am[k, k]
        for i in range(k + 1, m):
            Am[i, k] *= inv
            lik = Am[i, k]
            if lik != 0.0:
                for j in range(k + 1, m):
                    Am[i, j] -= lik * Am[k, j]
    return True


@njit(**LEAF_JIT_OPTIONS)
def _lu_transpose(LU, LUT):
    """LUT = LUᵀ (contiguous columns of the factors, for :func:`_lu_solve`)."""
    m = LU.shape[0]
    for i in range(m):
        for j in range(m):
            LUT[j, i] = LU[i, j]


@njit(**LEAF_JIT_OPTIONS)
def _lu_solve(LUT, piv, x):
    """Solve in place with the factors of :func:`_lu`, given transposed (``LUT``): column-oriented
    substitutions, whose inner loops are ``axpy`` passes (they vectorise; a row-oriented one is a chain
    of dependent additions)."""
    m = LUT.shape[0]
    for k in range(m):
        p = piv[k]
        if p != k:
            tmp = x[k]
            x[k] = x[p]
            x[p] = tmp
    for j in range(m):
        xj = x[j]
        col = LUT[j]
        for i in range(j + 1, m):
            x[i] -= col[i] * xj
    _upper_solve_by_columns(LUT, x)


@njit(**LEAF_JIT_OPTIONS)
def _upper_solve_by_columns(UT, x):
    """Solve U x = b in place (``x`` holds b), U upper triangular given transposed (``UT[j]`` its column j)."""
    for j in range(UT.shape[0] - 1, -1, -1):
        col = UT[j]
        xj = x[j] / col[j]
        x[j] = xj
        for i in range(j):
            x[i] -= col[i] * xj


@njit(**LEAF_JIT_OPTIONS)
def _cholesky(S, RT):
    """In-place Cholesky S = RᵀR of the symmetric ``S`` (its upper triangle; R upper, row-major) and RT = Rᵀ;
    returns False if S is not positive definite.

    Outer-product form: row k of R updates the trailing rows, four at a time in one pass over row k (a load of
    R[k, j] serves four updates; in place, one row at a time, the loop is bound by those loads: 4x slower at
    d = 30). Each element still receives its updates in the order k = 0, 1, ..., so the factors are those of
    the one-row-at-a-time loop, bit for bit.
    """
    m = S.shape[0]
    for k in range(m):
        pivot = S[k, k]
        if not (pivot > 0.0 and pivot < np.inf):
            return False
        r = np.sqrt(pivot)
        S[k, k] = r
        inv = 1.0 / r
        for j in range(k + 1, m):
            S[k, j] *= inv
        i = k + 1
        while i + 3 < m:
            f0 = S[k, i]
            f1 = S[k, i + 1]
            f2 = S[k, i + 2]
            f3 = S[k, i + 3]
            # the upper triangle of the four rows left of column i + 3, then the columns they share
            S[i, i] -= f0 * S[k, i]
            S[i, i + 1] -= f0 * S[k, i + 1]
            S[i + 1, i + 1] -= f1 * S[k, i + 1]
            S[i, i + 2] -= f0 * S[k, i + 2]
            S[i + 1, i + 2] -= f1 * S[k, i + 2]
            S[i + 2, i + 2] -= f2 * S[k, i + 2]
            for j in range(i + 3, m):
                rk = S[k, j]
                S[i, j] -= f0 * rk
                S[i + 1, j] -= f1 * rk
                S[i + 2, j] -= f2 * rk
                S[i + 3, j] -= f3 * rk
            i += 4
        while i < m:
            f0 = S[k, i]
            for j in range(i, m):
                S[i, j] -= f0 * S[k, j]
            i += 1
    for i in range(m):
        for j in range(m):
            RT[j, i] = S[i, j] if j >= i else 0.0
    return True


@njit(**LEAF_JIT_OPTIONS)
def _cholesky_solve(R, RT, x):
    """Solve RᵀR z = x in place with the factors of :func:`_cholesky` (column-oriented, as :func:`_lu_solve`)."""
    m = R.shape[0]
    for k in range(m):
        row = R[k]
        xk = x[k] / row[k]
        x[k] = xk
        for j in range(k + 1, m):
            x[j] -= row[j] * xk
    _upper_solve_by_columns(RT, x)
