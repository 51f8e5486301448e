"""Validation helpers: every error names the parameter and the allowed range."""

import math
import numbers
import os

import numpy as np

#: The largest number of steps (and step number) a run accepts: the kernels count steps, record
#: schedules and rows in int64; 2**62 leaves room for a chunk added to any count.
MAX_STEPS = 2**62
#: The most values of one grid axis of a sweep (``gammas``, ``betas``, ``lams``, ``pairs``, ``reps``).
MAX_GRID = 10**6
#: The most points of one sweep (reps times the grid): every point keeps a few vectors of length d in memory.
MAX_SWEEP_POINTS = 10**7
#: The largest seed (of data, of SMGD batches) anything accepts: the kernels seed xoshiro256** from an int64,
#: run and sweep stores keep seeds as int64, and numpy's ``default_rng`` takes any non-negative int.
MAX_SEED = 2**63 - 1
#: The most float64 entries of one generated array (data ``(n + n_test) x d``, a layer's activations, the
#: flat parameters): 2**30 entries are 8 GiB, beyond which generation runs out of memory or takes hours.
MAX_ENTRIES = 2**30


class ParameterValueError(ValueError):
    """A ValueError about named arguments: ``parameters`` holds their API names, as the message writes them
    (``"t_max"``, ``"betas[0]"`` for an entry).  The message is the API's; the command line rewrites the names to
    the options the user typed (``--t-max``, ``--betas (entry 1)``) from ``parameters`` alone, so no message has to
    be written twice.  Still a ValueError: code that catches ValueError is unchanged."""

    def __init__(self, message, *parameters):
        super().__init__(message)
        self.parameters = parameters


class ParameterTypeError(TypeError):
    """The TypeError counterpart of :class:`ParameterValueError` (a bool, str or complex where a number goes)."""

    def __init__(self, message, *parameters):
        super().__init__(message)
        self.parameters = parameters


def named(exc, *parameters):
    """``exc`` (any exception, e.g. a FileNotFoundError about ``store``) marked as being about ``parameters``, as
    :class:`ParameterValueError` is: the command line names the options instead."""
    exc.parameters = parameters
    return exc


def _range_text(low, high, low_open, high_open):
    """The allowed range as an interval, e.g. ``(0, inf)`` or ``[0, 1)``; an absent end is open and infinite."""
    lo = "(" if low_open or low is None else "["
    hi = ")" if high_open or high is None else "]"
    return f"{lo}{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}{hi}"


def as_float(name, value, *, low=None, high=None, low_open=False, high_open=False, allow_none=False):
    """A finite real scalar within [low, high] (ends open when asked)."""
    if value is None and allow_none:
        return None
    rng = _range_text(low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise ParameterTypeError(f"{name} must be a real number in {rng}, got {type(value).__name__}", name)
    try:
        v = float(value)
    except OverflowError:  # an int beyond float64
        raise ParameterValueError(f"{name} must be finite and in {rng}, got {value!r}", name) from None
    if not math.isfinite(v):
        raise ParameterValueError(f"{name} must be finite and in {rng}, got {value!r}", name)
    if low is not None and (v < low or (low_open and v == low)):
        raise ParameterValueError(f"{name} must be in {rng}, got {value!r}", name)
    if high is not None and (v > high or (high_open and v == high)):
        raise ParameterValueError(f"{name} must be in {rng}, got {value!r}", name)
    return v


def as_int(name, value, *, low=None, high=None, allow_none=False):
    """An integer within [low, high]; floats are accepted only when integral (1e6)."""
    if value is None and allow_none:
        return None
    rng = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]".replace("inf]", "inf)")
    if isinstance(value, bool):
        raise ParameterTypeError(f"{name} must be an integer in {rng}, got bool", name)
    if isinstance(value, (numbers.Integral, np.integer)):
        v = int(value)
    elif isinstance(value, (numbers.Real, np.floating)) and math.isfinite(value) and float(value).is_integer():
        v = int(value)
    else:
        raise ParameterTypeError(f"{name} must be an integer in {rng}, got {value!r}", name)
    if (low is not None and v < low) or (high is not None and v > high):
        raise ParameterValueError(f"{name} must be an integer in {rng}, got {value!r}", name)
    return v


def as_seed(name, value, *, reps=1):
    """A seed in [0, MAX_SEED] (2**63 - 1), the one range of every seed (data, SMGD batches, sweeps, ``--seed``).

    With ``reps`` > 1 (a sweep: rep r uses the seed ``value + r``) the last seed ``value + reps - 1`` must be in
    the range too, so that every rep is the single run or data set of its own seed.
    """
    v = as_int(name, value, low=0, high=MAX_SEED)
    if v + reps - 1 > MAX_SEED:
        # ("rep r uses {name} + r", not "the seed {name} + r": the word seed is the parameter's name, which the
        # command line rewrites to --data-seed wherever it stands)
        raise ParameterValueError(f"{name} must be an integer in [0, 2**63 - 1 - (reps - 1)] = "
                                  f"[0, {MAX_SEED - reps + 1}] for reps = {reps} (rep r uses {name} + r, "
                                  f"at most 2**63 - 1), got {value!r}", name)
    return v


def check_entries(what, factors, count=None):
    """A generated array of ``prod(factors)`` entries (``factors``: parameter name -> value) has at most
    MAX_ENTRIES; ``count`` when the number is not a plain product.  The error names the parameters."""
    count = math.prod(factors.values()) if count is None else count
    if count > MAX_ENTRIES:
        given = ", ".join(f"{k} = {v}" for k, v in factors.items())
        raise ParameterValueError(f"{given} make {what} of {count} float64 entries; at most {MAX_ENTRIES} (2**30, "
                                  f"8 GiB) are allowed in one array: choose smaller sizes", *factors)
    return count


def _check_object_entries(raw):
    """An object array holds Python/NumPy numbers only: None, numeric strings ('0.1'), Decimals and bools are not
    cast (np.asarray(['0.1'], dtype=object).astype(float) would read the string)."""
    if raw.dtype.kind == "O":
        for x in raw.flat:
            if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, float, np.integer, np.floating)):
                raise TypeError(f"got {x!r} ({type(x).__name__})")


def _refuse_masked(name, value):
    if isinstance(value, np.ma.MaskedArray):
        raise ParameterTypeError(f"{name} must be a plain array: the mask of a masked array would be dropped (pass "
                        f"value.filled(...) or the unmasked entries)", name)


def as_array(name, value, *, ndim, shape=None, finite=True):
    """A C-contiguous float64 copy with the given number of dimensions (complex, bool, string and masked input is
    refused, also as the entries of an object array)."""
    _refuse_masked(name, value)
    try:
        raw = np.asarray(value)
        if raw.dtype.kind not in "iufO":
            got = {"b": "bool", "c": "complex", "U": "str", "S": "bytes"}.get(raw.dtype.kind, f"dtype {raw.dtype}")
            raise TypeError(f"got {got} input")
        _check_object_entries(raw)
        arr = np.array(raw, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(f"{name} must be a real array: {exc}", name) from None
    if arr.ndim != ndim:
        raise ParameterValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}", name)
    if shape is not None:
        for axis, (got, want) in enumerate(zip(arr.shape, shape, strict=True)):
            if want is not None and got != want:
                raise ParameterValueError(f"{name} must have shape {tuple('*' if s is None else s for s in shape)}, "
                                 f"got {arr.shape} (axis {axis})", name)
    if finite and not np.all(np.isfinite(arr)):
        raise ParameterValueError(f"{name} must contain only finite values", name)
    return np.ascontiguousarray(arr)


# ---------------------------------------------------------------------------------------------------
# Arrays: the array-valued counterparts of as_float, for code that works element-wise on broadcast input
# ---------------------------------------------------------------------------------------------------

def as_real_array(name, value, *, low=None, high=None, low_open=False, high_open=False):
    """A float64 array (0-d for a scalar) of finite entries within [low, high] (ends open when asked).

    bool, complex and non-numeric input is a TypeError naming ``name``: complex input is refused rather
    than cast to its real part.  An entry that is not finite or out of range is a ValueError naming
    ``name``, the allowed range and the first offending entry.  No copy is made when ``value`` already is a
    float64 array, so element-wise kernels on large arrays pay only for the range check.
    """
    _refuse_masked(name, value)
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError) as exc:          # e.g. ragged nested sequences
        raise ParameterTypeError(f"{name} must be real-valued: {exc}", name) from None
    # Integers, floats, and object arrays of Python numbers (float() refuses complex ones below).
    if raw.dtype.kind not in "iufO":
        got = {"b": "bool", "c": "complex", "U": "str", "S": "bytes"}.get(raw.dtype.kind, f"dtype {raw.dtype}")
        raise ParameterTypeError(f"{name} must be real-valued, got {got} input", name)
    try:
        _check_object_entries(raw)
    except TypeError as exc:
        raise ParameterTypeError(f"{name} must be real-valued, {exc}", name) from None
    try:
        arr = raw.astype(np.float64, copy=False)
    except (TypeError, ValueError) as exc:
        raise ParameterTypeError(f"{name} must be real-valued: {exc}", name) from None
    ok = np.isfinite(arr)
    if low is not None:
        ok &= (arr > low) if low_open else (arr >= low)
    if high is not None:
        ok &= (arr < high) if high_open else (arr <= high)
    if not np.all(ok):
        shown = float(arr[~ok].flat[0]) if arr.ndim else float(arr)
        raise ParameterValueError(f"{name} must be finite and in {_range_text(low, high, low_open, high_open)}, "
                         f"got {shown!r}", name)
    return arr


def as_real_vector(name, value, length, *, low=None, high=None, low_open=False, high_open=False):
    """A per-coordinate parameter as a new float64 vector of shape (length,), entries as in :func:`as_real_array`.

    A scalar, or an array of shape (1,), stands for the same value in every coordinate and is broadcast;
    any other shape than (length,) is a ValueError naming ``name`` and the expected shape.
    """
    arr = as_real_array(name, value, low=low, high=high, low_open=low_open, high_open=high_open)
    if arr.ndim > 1 or (arr.ndim == 1 and arr.shape[0] not in (1, length)):
        raise ParameterValueError(f"{name} must be a scalar or have shape ({length},), got shape {arr.shape}", name)
    return np.array(np.broadcast_to(arr, (length,)))


def broadcast_named(**arrays):
    """``np.broadcast_arrays`` of two or more keyword arrays, in order, as a tuple of (read-only) views.

    Shapes that do not broadcast are a ValueError naming every parameter with its shape.
    """
    try:
        return tuple(np.broadcast_arrays(*arrays.values()))
    except ValueError:
        shapes = [f"{name} of shape {np.shape(arr)}" for name, arr in arrays.items()]
        raise ValueError(f"{', '.join(shapes[:-1])} and {shapes[-1]} do not broadcast") from None


def as_design(X, y):
    """A regression design: X of shape (n, d) with n, d >= 1 and targets y of shape (n,), finite and real.

    Returns C-contiguous float64 arrays (no copy when the input already is one); errors name ``X`` or ``y``
    as :func:`as_real_array` does, and a shape mismatch names both shapes.
    """
    X = as_real_array("X", X)
    if X.ndim != 2 or X.shape[0] < 1 or X.shape[1] < 1:
        raise ValueError(f"X must be a non-empty 2-dimensional array of shape (n, d), got shape {X.shape}")
    y = as_real_array("y", y)
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise ValueError(f"y must have shape ({X.shape[0]},) to match X of shape {X.shape}, got {y.shape}")
    return np.ascontiguousarray(X), np.ascontiguousarray(y)


def check_log(log):
    """``log`` of the sweeps: None or a callable that takes a line of text (``print``); checked before any work."""
    if log is not None and not callable(log):
        raise TypeError(f"log must be None or a callable that takes a line of text (e.g. print), got {log!r}")
    return log


def as_bool(name, value):
    """A bool (or numpy bool); anything else, ``"no"`` and ``1`` included, is a TypeError naming ``name``."""
    if not isinstance(value, (bool, np.bool_)):
        raise ParameterTypeError(f"{name} must be True or False, got {value!r}", name)
    return bool(value)


def as_row_slice(name, value):
    """A window of recorded rows: None (every row) or a ``slice`` of integers (``slice(1000, 2000)``,
    ``np.s_[-1000:]``) whose step is at least 1; returned as a slice of ints (ends not yet cut to a length: that is
    ``slice.indices(rows)``). A negative step is refused: rows are read forwards, in the order they were recorded."""
    if value is None:
        return None
    if not isinstance(value, slice):
        raise ParameterTypeError(f"{name} must be None or a slice of rows such as slice(1000, 2000) or np.s_[-1000:], "
                        f"got {value!r}", name)
    start = as_int(f"{name}.start", value.start, allow_none=True)
    stop = as_int(f"{name}.stop", value.stop, allow_none=True)
    step = as_int(f"{name}.step", value.step, low=1, allow_none=True)
    return slice(start, stop, step)


def as_real_sequence(name, values, *, low=None, high=None, low_open=False, high_open=False, max_len=None):
    """A 1-D float64 array of real numbers within [low, high], checked entry by entry (``name[i]`` named).

    A scalar is a sequence of one. bool, str, complex and other non-real entries are a TypeError (never
    cast: ``[True]`` is not 1.0, ``['0.1']`` is not 0.1); more than ``max_len`` entries is a ValueError.
    """
    raw = values if isinstance(values, np.ndarray) else np.asarray(values, dtype=object)
    if raw.ndim == 0:
        raw = raw.reshape(1)
    if raw.ndim != 1:
        raise ParameterValueError(f"{name} must be a 1-D sequence of numbers, got shape {raw.shape}", name)
    if max_len is not None and raw.size > max_len:
        raise ParameterValueError(f"{name} must have at most {max_len} values, got {raw.size}", name)
    return np.array([as_float(f"{name}[{i}]", v, low=low, high=high, low_open=low_open, high_open=high_open)
                     for i, v in enumerate(raw.tolist())], dtype=np.float64)


def check_sweep_size(reps, grid):
    """A sweep of ``reps`` data sets over ``grid`` (name -> number of values) has at most MAX_SWEEP_POINTS."""
    points = int(reps) * math.prod(int(n) for n in grid.values())
    if points > MAX_SWEEP_POINTS:
        sizes = " x ".join([f"reps={int(reps)}"] + [f"{k}={int(n)}" for k, n in grid.items()])
        raise ParameterValueError(f"a sweep takes at most {MAX_SWEEP_POINTS} points (reps times the grid), got "
                                  f"{sizes} = {points} points: split it into several sweeps", "reps", *grid)
    return points


def as_store_path(value, name="store"):
    """A store's path as a ``str`` (``str`` or ``os.PathLike``): not empty, not a directory, in a directory that exists.

    Checked before any work starts: an empty path, a directory or a missing parent directory would
    otherwise surface only when the file is created (or as a missing lock file).
    """
    try:
        path = os.fspath(value)
    except TypeError:
        raise ParameterTypeError(f"{name} must be a path (str or os.PathLike), got {type(value).__name__}",
                                 name) from None
    if not isinstance(path, str):
        raise ParameterTypeError(f"{name} must be a path as str (or os.PathLike giving a str), "
                                 f"got {type(path).__name__}", name)
    if not path.strip():
        raise ParameterValueError(f"{name} must be a file path, got {path!r} (empty)", name)
    if os.path.isdir(path):
        raise named(IsADirectoryError(f"{name} {path} is a directory; give the path of a file in it "
                                      f"(e.g. {os.path.join(path, 'store.h5')})"), name)
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.lexists(path) and not os.path.isdir(parent):
        raise named(FileNotFoundError(f"{name} {path}: directory {parent} does not exist (create it first)"), name)
    return path


def check_data_scale(problem, stiffness=None):
    """The data's moments XᵀX/n and Xᵀy/n (``problem.hessian``, ``problem.b``) finite, and, for flows, the
    stiffness estimate ``stiffness()`` too (returned): data scaled beyond them (X * 1e200) overflows in every
    gradient, so it is refused by name before any work."""
    with np.errstate(over="ignore", invalid="ignore"):
        finite = problem.moments_finite()  # (without forming XᵀX/n: d × d, 80 GB at d = 1e5)
        kappa = None if stiffness is None else (stiffness() if finite else math.inf)
    if finite and kappa is not None and not math.isfinite(kappa):
        # the moments are finite: the initialisation's scale makes the w-space Hessian S H S overflow (alpha = 1e149)
        raise ValueError("the stiffness estimate of this problem at this initialisation overflows float64 (the "
                         "largest eigenvalue of S H S, H = XᵀX/n, S = diag((4θ0² + Δ0²)^(1/4)), got kappa = inf): use "
                         "a smaller initialisation (alpha, u0, v0) or rescale X and y")
    if not finite:
        what = "XᵀX/n and Xᵀy/n are" if stiffness is None else \
            "XᵀX/n, Xᵀy/n and the stiffness estimate of this problem are"
        got = "" if stiffness is None else f" (got kappa = {kappa!r})"
        raise ValueError(f"X must be scaled so that {what} finite{got}: rescale X and y")
    return kappa
