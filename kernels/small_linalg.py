"""Small dense linear algebra in Numba: LU with partial pivoting and Cholesky, with their substitutions.

For the d × d (or 2d × 2d) systems of the adaptive scheme's steps (:func:`.flow_rodas._factor`,
:func:`.flow_rodas._solve_w`), tens of rows, factorised every step. The kernels never call LAPACK: these loops
compile under the package's one policy (:mod:`.config`: strict IEEE, no reassociation), so a factorisation
does not depend on which LAPACK is installed and its CPU-dependent code paths, nor start LAPACK's threads inside
``prange`` lanes. The loops are written as ``axpy`` passes over contiguous rows (they
vectorise); the substitutions take the factors transposed where a column pass needs contiguous columns.

The factors keep the **reciprocals of their diagonals** (U's of the LU, R's of the Cholesky factorisation), which the
factorisation computes anyway: the substitutions multiply by them. A division sits on the dependency chain of each
row of a substitution (13 cycles of latency against 3-4 of a product); with the eight solves of every step of the
adaptive scheme, that chain was the largest single cost of a stage solve at d = 30. A product differs from the
quotient by at most one rounding (x·(1/r) against x/r).
"""

import numpy as np
from numba import njit

from .config import LEAF_JIT_OPTIONS
from .vec_ir import _cholesky_row


@njit(**LEAF_JIT_OPTIONS)
def _lu(Am, piv):
    """In-place LU of the square ``Am`` with partial pivoting (L unit lower, its diagonal not stored; U upper with
    the reciprocals of its diagonal on the diagonal); returns False if it is singular."""
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
        Am[k, k] = inv  # (not read again by the elimination; the substitution multiplies by it)
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
    substitutions (:func:`_lower_solve_by_columns`, :func:`_upper_solve_by_columns`)."""
    m = LUT.shape[0]
    for k in range(m):
        p = piv[k]
        if p != k:
            tmp = x[k]
            x[k] = x[p]
            x[p] = tmp
    _lower_solve_by_columns(LUT, x, False)
    _upper_solve_by_columns(LUT, x)


@njit(**LEAF_JIT_OPTIONS)
def _lower_solve_by_columns(LT, x, divide):
    r"""Solve L x = b in place (``x`` holds b), L lower triangular given transposed (``LT[j]`` its column j;
    ``divide``: by its diagonal, whose reciprocals ``LT``'s diagonal holds; else L has a unit diagonal and ``LT``'s
    diagonal is not read).

    Column-oriented: x_j = x_j / L_jj (a product with the stored reciprocal), then x_i -= L_ij x_j for i > j, an
    ``axpy`` pass (it vectorises; a row-oriented substitution is a chain of dependent additions). Four columns at a
    time: the 4 × 4 diagonal block in registers, then one pass over the rows below applies the four columns, each
    element still receiving its updates in the order j = 0, 1, ... (so the result is that of the one-column loop,
    bit for bit) with a quarter of the loads and stores of ``x``, which bound the one-column loop at these sizes.
    """
    m = LT.shape[0]
    j = 0
    while j + 4 <= m:
        c0 = LT[j]
        c1 = LT[j + 1]
        c2 = LT[j + 2]
        c3 = LT[j + 3]
        x0 = x[j]
        if divide:
            x0 = x0 * c0[j]
        x1 = x[j + 1] - c0[j + 1] * x0
        if divide:
            x1 = x1 * c1[j + 1]
        x2 = (x[j + 2] - c0[j + 2] * x0) - c1[j + 2] * x1
        if divide:
            x2 = x2 * c2[j + 2]
        x3 = ((x[j + 3] - c0[j + 3] * x0) - c1[j + 3] * x1) - c2[j + 3] * x2
        if divide:
            x3 = x3 * c3[j + 3]
        x[j] = x0
        x[j + 1] = x1
        x[j + 2] = x2
        x[j + 3] = x3
        for i in range(j + 4, m):
            x[i] = (((x[i] - c0[i] * x0) - c1[i] * x1) - c2[i] * x2) - c3[i] * x3
        j += 4
    while j < m:
        col = LT[j]
        xj = x[j]
        if divide:
            xj = xj * col[j]
        x[j] = xj
        for i in range(j + 1, m):
            x[i] -= col[i] * xj
        j += 1


@njit(**LEAF_JIT_OPTIONS)
def _upper_solve_by_columns(UT, x):
    """Solve U x = b in place (``x`` holds b), U upper triangular given transposed (``UT[j]`` its column j, with the
    reciprocal of U_jj in place of U_jj).

    Column-oriented from the last column, four columns at a time as :func:`_lower_solve_by_columns` (the same
    bits as the one-column loop)."""
    j = UT.shape[0] - 1
    while j >= 3:
        c0 = UT[j]
        c1 = UT[j - 1]
        c2 = UT[j - 2]
        c3 = UT[j - 3]
        x0 = x[j] * c0[j]
        x1 = (x[j - 1] - c0[j - 1] * x0) * c1[j - 1]
        x2 = ((x[j - 2] - c0[j - 2] * x0) - c1[j - 2] * x1) * c2[j - 2]
        x3 = (((x[j - 3] - c0[j - 3] * x0) - c1[j - 3] * x1) - c2[j - 3] * x2) * c3[j - 3]
        x[j] = x0
        x[j - 1] = x1
        x[j - 2] = x2
        x[j - 3] = x3
        for i in range(j - 3):
            x[i] = (((x[i] - c0[i] * x0) - c1[i] * x1) - c2[i] * x2) - c3[i] * x3
        j -= 4
    while j >= 0:
        col = UT[j]
        xj = x[j] * col[j]
        x[j] = xj
        for i in range(j):
            x[i] -= col[i] * xj
        j -= 1


@njit(**LEAF_JIT_OPTIONS)
def _cholesky(S, RT):
    """In-place Cholesky S = RᵀR of the symmetric ``S`` (its upper triangle; R upper, row-major, with the reciprocals
    of its diagonal on the diagonal) and Rᵀ into the lower triangle of ``RT`` (the same diagonal; the substitutions
    read nothing else, and its upper triangle is not written); returns False if S is not positive definite.

    Up-looking: row k receives the updates of the finished rows above it, ``S[k, j] -= R[i, k]·R[i, j]`` for i = 0,
    1, ..., k-1, with its sums in registers (:func:`.vec_ir._cholesky_row`), then its pivot. Each element receives
    the updates of the outer-product (right-looking) loop in that loop's order, so the factors are that loop's, bit
    for bit. At d = 30 the outer-product loop, which loads and stores the trailing rows for every row of R, took
    2.8 µs, this 1.74 µs (each with a copy of the matrix, about 0.4 µs; writing Rᵀ is about 0.2 µs), the minima of
    15 alternating rounds in one process. (Issuing the updates of row k + 1 by rows 0 .. k-1 before the pivot of
    row k, to overlap its square root and reciprocal, was slower, 2.0 µs: a second pass over each row.)
    """
    m = S.shape[0]
    for k in range(m):
        _cholesky_row(S, k)
        pivot = S[k, k]
        if not (pivot > 0.0 and pivot < np.inf):
            return False
        r = np.sqrt(pivot)
        inv = 1.0 / r
        S[k, k] = inv  # (not read again by the factorisation; the substitutions multiply by it)
        for j in range(k + 1, m):
            S[k, j] *= inv
    for j in range(m):  # (RT's upper triangle is never read: only the lower one is written)
        for i in range(j + 1):
            RT[j, i] = S[i, j]
    return True


@njit(**LEAF_JIT_OPTIONS)
def _cholesky_solve(R, RT, x):
    """Solve RᵀR z = x in place with the factors of :func:`_cholesky` (column-oriented, as :func:`_lu_solve`:
    Rᵀ is lower triangular with columns the rows of ``R``)."""
    _lower_solve_by_columns(R, x, True)
    _upper_solve_by_columns(RT, x)
