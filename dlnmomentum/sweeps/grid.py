"""Grids of a sweep: the ``start:stop:num[:log]`` text form and validated 1-D coordinate arrays."""

import numpy as np

from ..validate import as_float


def parse_grid(text, name="grid"):
    """A 1-D grid from ``"start:stop:num"`` (linear), ``"start:stop:num:log"`` (geometric) or ``"a,b,c"``.

    Both ends are included: ``parse_grid("1e-3:1e-1:3:log")`` is ``[1e-3, 1e-2, 1e-1]``.
    """
    text = str(text).strip()
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] not in ("log", "lin")):
                raise ValueError
            start, stop, num = float(parts[0]), float(parts[1]), float(parts[2])
            if not num.is_integer() or num < 1:
                raise ValueError
            num = int(num)
            if len(parts) == 4 and parts[3] == "log":
                if start <= 0 or stop <= 0:
                    raise ValueError(f"{name}: a log grid needs positive ends, got {text!r}")
                return np.geomspace(start, stop, num)
            return np.linspace(start, stop, num)
        values = [float(v) for v in text.split(",") if v.strip()]
        if not values:
            raise ValueError
        return np.array(values)
    except ValueError as exc:
        if str(exc):
            raise
        raise ValueError(f"{name} must be 'start:stop:num', 'start:stop:num:log' or a comma list, "
                         f"got {text!r}") from None


def as_grid(name, values, *, low=None, high=None, low_open=False, high_open=False):
    """A validated, non-empty, repetition-free 1-D float grid (text as in :func:`parse_grid`)."""
    if isinstance(values, str):
        values = parse_grid(values, name)
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers, got shape {arr.shape}")
    for i, v in enumerate(arr):
        as_float(f"{name}[{i}]", float(v), low=low, high=high, low_open=low_open, high_open=high_open)
    if len(np.unique(arr)) != arr.size:
        raise ValueError(f"{name} must not repeat values")
    return arr


# ---------------------------------------------------------------------------------------------------
