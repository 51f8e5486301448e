"""Regression problems: the paper's sparse teacher and user data."""

import numbers
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from .kernels.layout import PAD, round_up
from .validate import MAX_ENTRIES, as_array, as_float, as_int, as_seed, check_entries

#: The placeholder of H for kernels that take the data or minibatch form (they never read it).
_NO_HESSIAN = np.zeros((0, 0))
_NO_HESSIAN.setflags(write=False)
#: The largest diagonal entry of XᵀX/n accepted: every entry of H and of H + Hᵀ is then finite.
_MOMENT_MAX = 0.25 * np.finfo(np.float64).max


def _frozen(arr):
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class Problem:
    """Least-squares data ``L(θ) = ‖Xθ - y‖²/(2n)`` for a diagonal linear network.

    Parameters
    ----------
    X : array (n, d)
        Training inputs (finite).
    y : array (n,)
        Training targets (finite).
    X_test, y_test : arrays (n_test, d), (n_test,), optional
        Held-out data for the test loss; both or neither.
    theta_star : array (d,), optional
        The teacher, when known.
    params : dict, optional
        Generator parameters (stored with results).

    Arrays are copied to read-only C-contiguous float64. A warning is issued
    when ``d <= n`` (the network is then not overparametrised and the
    interpolating set may be a single point or empty).
    """

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray | None = None
    y_test: np.ndarray | None = None
    theta_star: np.ndarray | None = None
    params: dict = field(default_factory=dict)

    def __post_init__(self):
        X = as_array("X", self.X, ndim=2)
        n, d = X.shape
        if n < 1 or d < 1:
            raise ValueError(f"X must have at least one row and one column, got shape {X.shape}")
        y = as_array("y", self.y, ndim=1, shape=(n,))
        if (self.X_test is None) != (self.y_test is None):
            raise ValueError("X_test and y_test must be given together (both or neither)")
        if self.X_test is not None:
            X_test = as_array("X_test", self.X_test, ndim=2, shape=(None, d))
            y_test = as_array("y_test", self.y_test, ndim=1, shape=(X_test.shape[0],))
        else:
            X_test = np.zeros((0, d))
            y_test = np.zeros(0)
        theta_star = None
        if self.theta_star is not None:
            theta_star = _frozen(as_array("theta_star", self.theta_star, ndim=1, shape=(d,)))
        object.__setattr__(self, "X", _frozen(X))
        object.__setattr__(self, "y", _frozen(y))
        object.__setattr__(self, "X_test", _frozen(X_test))
        object.__setattr__(self, "y_test", _frozen(y_test))
        object.__setattr__(self, "theta_star", theta_star)
        if not isinstance(self.params, Mapping) or not all(isinstance(k, str) for k in self.params):
            raise TypeError(f"params must be a dict with str keys (generator parameters, stored as JSON), got "
                            f"{type(self.params).__name__}")
        _check_storable("params", self.params)
        object.__setattr__(self, "params", dict(self.params))
        if d <= n:
            warnings.warn(f"d = {d} <= n = {n}: the network is not overparametrised; the paper's "
                          "implicit-bias results assume d > n", UserWarning, stacklevel=3)

    @property
    def n(self):
        return self.X.shape[0]

    @property
    def d(self):
        return self.X.shape[1]

    @property
    def n_test(self):
        return self.X_test.shape[0]

    @cached_property
    def XT(self):
        """Xᵀ as a C-contiguous array (column access for the kernels)."""
        return _frozen(self.X.T)

    @cached_property
    def hessian(self):
        """H = XᵀX/n, made exactly symmetric."""
        H = self.X.T @ self.X / self.n
        return _frozen(0.5 * (H + H.T))

    @cached_property
    def b(self):
        """b = Xᵀy/n, so that ∇L(θ) = Hθ - b."""
        return _frozen(self.X.T @ self.y / self.n)

    @property
    def padded(self):
        """(X, Xᵀ, H, b) zero-padded to a multiple of ``kernels.layout.PAD`` columns, for the kernels.

        Padding lets the vectorised loops run without scalar tails; padded
        coordinates carry θ = 0 and ∇L = 0, so results are unchanged bit for bit.
        """
        return self.kernel_arrays(hessian=True)

    def kernel_arrays(self, hessian):
        """:attr:`padded`, with H only where the kernel takes the Hessian form (``hessian``); else a 0 × 0 array
        in its place, so that a wide problem (d = 1e5: H would be 80 GB) never forms the d × d matrix."""
        X, XT, b = self._padded_data
        return X, XT, (self._padded_hessian if hessian else _NO_HESSIAN), b

    @cached_property
    def _padded_data(self):
        d = self.d
        dp = round_up(d, PAD)
        X = np.zeros((self.n, dp))
        X[:, :d] = self.X
        b = np.zeros(dp)
        b[:d] = self.b
        return _frozen(X), _frozen(X.T), _frozen(b)

    @cached_property
    def _padded_hessian(self):
        d = self.d
        dp = round_up(d, PAD)
        H = np.zeros((dp, dp))
        H[:d, :d] = self.hessian
        return _frozen(H)

    def moments_finite(self):
        """Whether XᵀX/n and Xᵀy/n are finite, without forming the d × d matrix XᵀX/n: by Cauchy-Schwarz its
        entries are bounded by its diagonal, the column norms ‖X_j‖²/n, which are checked with room for the
        symmetrisation of :attr:`hessian` (H + Hᵀ)."""
        with np.errstate(over="ignore", invalid="ignore"):
            diag = np.einsum("ij,ij->j", self.X, self.X) / self.n
            return bool(np.all(diag <= _MOMENT_MAX) and np.all(np.isfinite(self.b)))

    def _theta(self, theta):
        """θ of shape (d,), real and finite (a NaN or inf entry made a NaN loss, a wrong shape a matmul error)."""
        return as_array("theta", theta, ndim=1, shape=(self.d,))

    def train_loss(self, theta):
        """L(θ) = ‖Xθ - y‖²/(2n) of a finite θ of shape (d,) (inf when a finite θ is so large that it overflows)."""
        return self._train_loss(self._theta(theta))

    def test_loss(self, theta):
        """Same loss on the test set (NaN without one); θ is checked as in :meth:`train_loss`."""
        return self._test_loss(self._theta(theta))

    # The losses of a θ already checked (a fresh C-contiguous finite float64 (d,) array, as `_theta` makes it):
    # the one arithmetic of both, called directly by the sweep points (`runs.points`), where the check of every
    # point's θ was most of the per-point cost of a sweep of short runs.
    def _train_loss(self, theta):
        with np.errstate(over="ignore", invalid="ignore"):
            r = self.X @ theta - self.y
            return _squared_mean(r)

    def _test_loss(self, theta):
        if self.n_test == 0:
            return float("nan")
        with np.errstate(over="ignore", invalid="ignore"):
            r = self.X_test @ theta - self.y_test
            return _squared_mean(r)

    # The losses of many checked θ at once (rows of a C-contiguous finite float64 (m, d) array), each the bits of
    # `_train_loss`/`_test_loss` of its row: np.matmul of a stack runs, for each matrix of the stack, the very
    # BLAS call of the single product (matrix @ vector: gemv; row @ column: the dot of `r @ r`) with the same
    # strides (numpy's matmul inner loop), and the rest is element-wise. A product of the whole stack at once
    # (X @ Θ.T, gemm) would round differently. Blocks of rows bound the residuals' memory (n_test may be large).
    def _train_losses(self, thetas):
        return _squared_means(self.X, thetas, self.y)

    def _test_losses(self, thetas):
        if self.n_test == 0:
            return np.full(len(thetas), np.nan)
        return _squared_means(self.X_test, thetas, self.y_test)

    def summary(self):
        shown = {"n", "d", "n_test"}
        extra = "".join(f", {k}={v}" for k, v in self.params.items() if k not in shown)
        return f"Problem(n={self.n}, d={self.d}, n_test={self.n_test}{extra})"

    def __repr__(self):
        return self.summary()


#: Residual entries of one block of :func:`_squared_means` (1 MB).
_RESIDUAL_BLOCK = 1 << 17


def _squared_means(X, thetas, y):
    """:func:`_squared_mean` of ``X @ θ - y`` for each row θ of ``thetas``, bit for bit (see ``_train_losses``)."""
    out = np.empty(len(thetas))
    rows = max(1, _RESIDUAL_BLOCK // max(1, X.shape[0]))
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(0, len(thetas), rows):
            t = thetas[start:start + rows]
            r = np.matmul(X, t[:, :, None])[:, :, 0] - y  # (each (n, d) @ (d, 1): gemv, as X @ θ)
            sq = np.matmul(r[:, None, :], r[:, :, None])[:, 0, 0]  # (each (1, n) @ (n, 1): the dot of r @ r)
            loss = sq / (2 * r.shape[1])
            out[start:start + rows] = np.where(np.isnan(loss), np.inf, loss)
    return out


def _squared_mean(r):
    """‖r‖²/(2·len(r)); inf when a residual overflowed (inf - inf in Xθ - y is NaN: the loss is then inf too)."""
    loss = float(r @ r / (2 * r.shape[0]))
    return loss if not np.isnan(loss) else float("inf")


def _check_storable(name, value):
    """``value`` is what stores keep as JSON: None, bools, numbers, strings, lists/tuples/arrays of them, dicts with
    str keys (a store of a problem with other params failed at creation, reported as an interruption)."""
    if value is None or isinstance(value, (bool, np.bool_, numbers.Real, str)):
        return
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return
    if isinstance(value, Mapping):
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"{name} must have str keys (it is stored as JSON), got the key {k!r}")
            _check_storable(f"{name}[{k!r}]", v)
        return
    if isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_storable(f"{name}[{i}]", v)
        return
    raise TypeError(f"{name} must be JSON data (None, bools, numbers, strings, lists and dicts of them, numeric "
                    f"arrays): stores keep it as JSON; got {type(value).__name__}")


def _check_input_scale(X, X_test, n, s, mu, sigma):
    """Inputs x = mu + sigma z whose moments XᵀX/n, Xᵀy/n (y = ⟨x, θ*⟩, ‖θ*‖₁ = √s) are finite, or a ValueError naming
    mu and sigma: every partial sum of those moments is at most n·√s·max|x|², and ½(H + Hᵀ) doubles it."""
    largest = max(float(np.max(np.abs(X), initial=0.0)), float(np.max(np.abs(X_test), initial=0.0)))
    limit = float(np.sqrt(np.finfo(np.float64).max / (2.0 * n * max(1.0, np.sqrt(s)))))
    if not largest <= limit:  # (NaN and inf included)
        got = "overflow float64" if not np.isfinite(largest) else f"reach |x| = {largest:.3g}"
        raise ValueError(f"mu = {mu!r} and sigma = {sigma!r} give inputs x = mu + sigma z (z standard normal) that "
                         f"{got}: the data's moments XᵀX/n and Xᵀy/n need every |x| <= {limit:.3g} (n = {n}, s = {s});"
                         f" choose |mu| + 10 sigma below that")


def sparse_regression(n=20, d=30, s=5, mu=1.0, sigma=1.0, n_test=1000, seed=0):
    """The paper's noiseless sparse regression with uncentred data.

    ``x ~ N(μ1, σ²I_d)``, ``y = ⟨x, θ*⟩`` with θ* s-sparse, non-zero entries ``1/√s``
    on a support drawn uniformly at random. Defaults are the paper's main setting
    ``(n, d, s) = (20, 30, 5)``, ``(μ, σ) = (1, 1)``.

    Parameters
    ----------
    n, d : int
        Training samples and dimension (each >= 1), with ``(n + n_test) * d`` at most ``MAX_ENTRIES`` = 2**30
        (8 GiB of float64 inputs).
    s : int
        Sparsity of θ*: non-zero entries, in [0, d] (0: θ* = 0, y = 0).
    mu : float
        Mean μ of every input coordinate (finite; the paper's "uncentred data": 1; 0 centres them).
    sigma : float
        Standard deviation σ of every input coordinate (> 0). Every drawn input must be at most
        ``sqrt(realmax / (2 n max(1, √s)))`` (about 1e153 for the defaults) in magnitude, so that the data's
        moments ``XᵀX/n`` and ``Xᵀy/n`` are finite: a larger ``|mu|`` or ``sigma`` is a ValueError naming them.
    n_test : int
        Test samples from the same distribution (>= 0; 0: no test set, test losses are NaN).
    seed : int
        Seed, in [0, 2**63 - 1], of ``numpy.random.default_rng``: θ*'s support, then X, then X_test, in that order.

    Returns
    -------
    Problem
        With ``X_test, y_test`` drawn from the same distribution and ``params``
        holding the generator parameters.
    """
    n = as_int("n", n, low=1, high=MAX_ENTRIES)
    d = as_int("d", d, low=1, high=MAX_ENTRIES)
    s = as_int("s", s, low=0, high=d)
    mu = as_float("mu", mu)
    sigma = as_float("sigma", sigma, low=0.0, low_open=True)
    n_test = as_int("n_test", n_test, low=0, high=MAX_ENTRIES)
    seed = as_seed("seed", seed)
    # refused before any allocation: n = 10**9 was a MemoryError (or minutes of swapping), not an error naming n
    check_entries("the inputs X and X_test ((n + n_test) x d)", {"n": n, "n_test": n_test, "d": d}, (n + n_test) * d)
    rng = np.random.default_rng(seed)
    theta_star = np.zeros(d)
    if s > 0:
        theta_star[np.sort(rng.choice(d, size=s, replace=False))] = 1.0 / np.sqrt(s)
    with np.errstate(over="ignore", invalid="ignore"):
        X = mu + sigma * rng.standard_normal((n, d))
        X_test = mu + sigma * rng.standard_normal((n_test, d))
    _check_input_scale(X, X_test, n, s, mu, sigma)
    params = dict(generator="sparse_regression", n=n, d=d, s=s, mu=mu, sigma=sigma, n_test=n_test, seed=seed)
    return Problem(X, X @ theta_star, X_test if n_test else None, X_test @ theta_star if n_test else None,
                   theta_star=theta_star, params=params)
