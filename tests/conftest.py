import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import dlnmomentum as dm  # noqa: E402


@pytest.fixture(scope="session")
def problem():
    """The paper's default setting: n=20, d=30, s=5, x ~ N(1, I)."""
    return dm.sparse_regression(n=20, d=30, s=5, mu=1.0, sigma=1.0, n_test=200, seed=0)


@pytest.fixture(scope="session")
def small_problem():
    return dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=4)


def rel(a, b):
    """Norm-wise relative difference."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))
