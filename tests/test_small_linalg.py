"""The small dense factorisations of the adaptive scheme (kernels/small_linalg.py) against NumPy's LAPACK solves, and
their four-column substitutions against the one-column loops they replace (plain Python, bit for bit)."""

import math

import numpy as np
import pytest

from dlnmomentum.kernels import small_linalg as SL

SIZES = list(range(1, 14)) + [30, 61]  # every remainder of the four-column blocks, and the scheme's d, 2d + 1


def _spd(m, rng):
    B = rng.standard_normal((m, m))
    return B @ B.T / m + np.diag(rng.uniform(0.5, 2.0, m))


def _lower_one_column(LT, b, divide):
    """x of L x = b by the one-column loop with the stored reciprocals (L given transposed), in Python floats."""
    m = LT.shape[0]
    x = [float(v) for v in b]
    for j in range(m):
        xj = x[j] * float(LT[j, j]) if divide else x[j]
        x[j] = xj
        for i in range(j + 1, m):
            x[i] = x[i] - float(LT[j, i]) * xj
    return np.array(x)


def _upper_one_column(UT, b):
    m = UT.shape[0]
    x = [float(v) for v in b]
    for j in range(m - 1, -1, -1):
        xj = x[j] * float(UT[j, j])
        x[j] = xj
        for i in range(j):
            x[i] = x[i] - float(UT[j, i]) * xj
    return np.array(x)


@pytest.mark.parametrize("m", SIZES)
def test_cholesky_solves_as_lapack(m):
    rng = np.random.default_rng(m)
    S = _spd(m, rng)
    b = rng.standard_normal(m)
    R = S.copy()
    RT = np.zeros_like(S)
    assert SL._cholesky(R, RT)
    x = b.copy()
    SL._cholesky_solve(R, RT, x)
    want = np.linalg.solve(S, b)
    assert np.max(np.abs(x - want)) <= 1e-12 * np.max(np.abs(want)), np.max(np.abs(x - want))
    # the factor: R upper with the reciprocals of its diagonal on the diagonal, RT's lower triangle Rᵀ
    Rf = np.triu(R, 1) + np.diag(1.0 / np.diag(R))
    assert np.allclose(Rf.T @ Rf, S, rtol=1e-13, atol=1e-13 * np.abs(S).max())
    assert np.array_equal(np.tril(RT), np.tril(R.T))


@pytest.mark.parametrize("m", SIZES)
def test_lu_solves_as_lapack(m):
    rng = np.random.default_rng(100 + m)
    A = rng.standard_normal((m, m)) + np.diag(rng.uniform(-3.0, 3.0, m))
    b = rng.standard_normal(m)
    LU = A.copy()
    piv = np.zeros(m, dtype=np.int64)
    assert SL._lu(LU, piv)
    LUT = np.zeros_like(A)
    SL._lu_transpose(LU, LUT)
    x = b.copy()
    SL._lu_solve(LUT, piv, x)
    want = np.linalg.solve(A, b)
    cond = np.linalg.cond(A)
    assert np.max(np.abs(x - want)) <= 1e-14 * cond * np.max(np.abs(want)), (np.max(np.abs(x - want)), cond)


def test_a_matrix_that_is_not_positive_definite_is_refused():
    S = np.diag([1.0, 2.0, -1.0, 3.0, 1.0])
    assert not SL._cholesky(S.copy(), np.zeros_like(S))
    singular = np.ones((5, 5))
    assert not SL._lu(singular, np.zeros(5, dtype=np.int64))


@pytest.mark.parametrize("m", SIZES)
def test_the_four_column_substitutions_are_the_one_column_loops_bit_for_bit(m):
    """Each element receives its updates in the order of the one-column loop: the same roundings."""
    rng = np.random.default_rng(200 + m)
    T = rng.standard_normal((m, m))
    np.fill_diagonal(T, 1.0 / rng.uniform(0.5, 2.0, m))  # (the stored reciprocals)
    b = rng.standard_normal(m)
    for divide in (True, False):
        x = b.copy()
        SL._lower_solve_by_columns(T, x, divide)
        assert np.array_equal(x, _lower_one_column(T, b, divide)), (m, divide)
    x = b.copy()
    SL._upper_solve_by_columns(T, x)
    assert np.array_equal(x, _upper_one_column(T, b)), m


def _cholesky_outer_product(S):
    """R of S = RᵀR (upper, the reciprocals of its diagonal on the diagonal) by the outer-product loop, one row of R
    at a time updating the rows below it, in Python floats (math.sqrt is correctly rounded, as the kernel's)."""
    m = S.shape[0]
    A = [[float(S[i, j]) for j in range(m)] for i in range(m)]
    for k in range(m):
        inv = 1.0 / math.sqrt(A[k][k])
        A[k][k] = inv
        for j in range(k + 1, m):
            A[k][j] = A[k][j] * inv
        for i in range(k + 1, m):
            f = A[k][i]
            for j in range(i, m):
                A[i][j] = A[i][j] - f * A[k][j]
    return np.triu(np.array(A))


@pytest.mark.parametrize("m", SIZES + [32, 33, 40])
def test_the_up_looking_cholesky_is_the_outer_product_loop_bit_for_bit(m):
    """Row k receives the updates of rows 0, 1, ..., k-1 in that order, a product and a difference each (no fused
    multiply-add): the factors of the outer-product loop, and the lower triangle of S is neither read nor written."""
    rng = np.random.default_rng(300 + m)
    S = _spd(m, rng)
    S[np.tril_indices(m, -1)] = np.nan  # (only the upper triangle is read)
    R = S.copy()
    RT = np.zeros_like(S)
    assert SL._cholesky(R, RT)
    want = _cholesky_outer_product(np.triu(np.nan_to_num(S)))
    assert np.array_equal(np.triu(R).view(np.int64), want.view(np.int64)), m
    assert np.all(np.isnan(R[np.tril_indices(m, -1)]))
