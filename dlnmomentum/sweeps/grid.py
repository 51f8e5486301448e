"""Grids of a sweep: the ``start:stop:num[:log]`` text form and validated 1-D coordinate arrays."""

import math

import numpy as np

from ..validate import MAX_GRID, as_real_sequence


def parse_grid(text, name="grid"):
    """A 1-D grid from ``"start:stop:num"`` (linear), ``"start:stop:num:log"`` (geometric) or ``"a,b,c"``.

    Both ends are included: ``parse_grid("1e-3:1e-1:3:log")`` is ``[1e-3, 1e-2, 1e-1]``. A text of another
    form is a ValueError naming ``name``, the allowed forms and the part that is wrong.
    """
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a text ('start:stop:num', ...), got {type(text).__name__}: pass a list of "
                        "numbers where the API takes one")
    text = text.strip()
    forms = "'start:stop:num', 'start:stop:num:log' or a comma list of numbers"

    def bad(why):
        return ValueError(f"{name} must be {forms}; got {text!r} ({why})")

    def number(part, what):
        try:
            value = float(part)
        except ValueError:
            raise bad(f"{what} {part.strip()!r} is not a number") from None
        if not math.isfinite(value):  # ('nan', 'inf', '1e400')
            raise bad(f"{what} {part.strip()!r} is not a finite number")
        return value

    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] not in ("log", "lin")):
            raise bad("expected start:stop:num with an optional :log or :lin")
        start, stop, num = number(parts[0], "start"), number(parts[1], "stop"), number(parts[2], "num")
        if not num.is_integer() or not 1 <= num <= MAX_GRID:
            raise bad(f"num must be an integer in [1, {MAX_GRID}], got {parts[2].strip()!r}")
        num = int(num)
        if len(parts) == 4 and parts[3] == "log":
            if start <= 0 or stop <= 0:
                raise bad("a log grid needs positive ends")
            return np.geomspace(start, stop, num)
        with np.errstate(over="ignore", invalid="ignore"):
            grid = np.linspace(start, stop, num)
        if not np.all(np.isfinite(grid)):  # (1e308:-1e308: the span overflows)
            raise bad("the span stop - start is beyond float64's range")
        return grid
    if not text:
        raise bad("no values")
    items = text.split(",")
    if len(items) > MAX_GRID:
        raise bad(f"at most {MAX_GRID} values, got {len(items)}")
    for i, item in enumerate(items):
        if not item.strip():  # "0.1,,0.2" or "0.1,": a value left out is not dropped silently
            raise bad(f"value {i + 1} of {len(items)} is empty")
    return np.array([number(v, "value") for v in items])


def as_grid(name, values, *, low=None, high=None, low_open=False, high_open=False):
    """A validated, non-empty, repetition-free 1-D float grid (text as in :func:`parse_grid`)."""
    if isinstance(values, str):
        values = parse_grid(values, name)
    # entry by entry: bool, str and complex entries are refused by name (never cast to 1.0, 0.1, ...)
    arr = as_real_sequence(name, values, low=low, high=high, low_open=low_open, high_open=high_open,
                           max_len=MAX_GRID)
    if arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers, got none")
    if len(np.unique(arr)) != arr.size:
        raise ValueError(f"{name} must not repeat values")
    return arr


# ---------------------------------------------------------------------------------------------------
