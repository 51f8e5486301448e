"""Validation helpers: every error names the parameter and the allowed range."""

import math
import numbers

import numpy as np


def as_float(name, value, *, low=None, high=None, low_open=False, high_open=False, allow_none=False):
    """A finite real scalar within [low, high] (ends open when asked)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    lo = "(" if low_open or low is None else "["
    hi = ")" if high_open or high is None else "]"
    rng = f"{lo}{'-inf' if low is None else f'{low:g}'}, {'inf' if high is None else f'{high:g}'}{hi}"
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite and in {rng}, got {value!r}")
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    if high is not None and (v > high or (high_open and v == high)):
        raise ValueError(f"{name} must be in {rng}, got {value!r}")
    return v


def as_int(name, value, *, low=None, high=None, allow_none=False):
    """An integer within [low, high]; floats are accepted only when integral (1e6)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got bool")
    if isinstance(value, (numbers.Integral, np.integer)):
        v = int(value)
    elif isinstance(value, (numbers.Real, np.floating)) and math.isfinite(value) and float(value).is_integer():
        v = int(value)
    else:
        raise TypeError(f"{name} must be an integer, got {value!r}")
    rng = f"[{'-inf' if low is None else low}, {'inf' if high is None else high}]".replace("inf]", "inf)")
    if (low is not None and v < low) or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer in {rng}, got {value!r}")
    return v


def as_array(name, value, *, ndim, shape=None, finite=True):
    """A C-contiguous float64 copy with the given number of dimensions."""
    try:
        arr = np.array(value, dtype=np.float64, copy=True)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be a real array: {exc}") from None
    if arr.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {arr.shape}")
    if shape is not None:
        for axis, (got, want) in enumerate(zip(arr.shape, shape, strict=True)):
            if want is not None and got != want:
                raise ValueError(f"{name} must have shape {tuple('*' if s is None else s for s in shape)}, "
                                 f"got {arr.shape} (axis {axis})")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must contain only finite values")
    return np.ascontiguousarray(arr)
