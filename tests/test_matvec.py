"""The adaptive schemes' matrix-vector product with its sums in registers (kernels/vec_ir.py, ``_matvec_columns``):
the same operations as the column ``axpy`` loop it stands for (``mgd._axpy_columns``: bit for bit), the product
itself (against exact rational arithmetic), and nothing written past the end of ``out``."""

from fractions import Fraction

import numpy as np
import pytest
from numba import njit

from dlnmomentum.kernels.mgd import _axpy_columns
from dlnmomentum.kernels.vec_ir import MV_GROUP, _matvec_columns

# every remainder of the four-wide blocks, one and several groups of MV_GROUP blocks, the schemes' d and n
WIDTHS = list(range(1, 14)) + [20, 30, 31, 4 * MV_GROUP, 4 * MV_GROUP + 1, 61, 8 * MV_GROUP + 3]


@njit
def _product(A, coef, count, out):
    _matvec_columns(A, coef, count, out)


@njit
def _loop(A, coef, count, out):
    _axpy_columns(A, coef, count, out)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("count", [0, 1, 3, 30])
def test_the_sums_in_registers_are_the_column_loop_bit_for_bit(width, count):
    rng = np.random.default_rng(1000 * count + width)
    A = rng.standard_normal((max(count, 1), width + 2))  # (more columns than outputs: the product reads `width`)
    coef = rng.standard_normal(max(count, 1))
    want = np.full(width, np.nan)
    _loop(A, coef, count, want)
    buffer = np.full(width + 5, -7.0)
    out = buffer[:width]
    _product(A, coef, count, out)
    assert np.array_equal(out.view(np.int64), want.view(np.int64)), (width, count)
    assert np.all(buffer[width:] == -7.0)  # the lanes past the end are not written


@pytest.mark.parametrize("width", [3, 30, 37])
def test_the_product_against_exact_arithmetic(width):
    """Each output is within a few roundings of the exact Σ_j A[j, i]·coef[j]."""
    rng = np.random.default_rng(width)
    count = 30
    A = rng.standard_normal((count, width))
    coef = rng.standard_normal(count)
    out = np.empty(width)
    _product(A, coef, count, out)
    for i in range(width):
        exact = sum(Fraction(float(A[j, i])) * Fraction(float(coef[j])) for j in range(count))
        bound = count * 2.0**-52 * float(np.abs(A[:, i]) @ np.abs(coef))
        assert abs(float(exact) - out[i]) <= bound, i
