"""Grids of a sweep: the ``start:stop:num[:log]`` text form and validated 1-D coordinate arrays."""

import numpy as np

from ..validate import as_float


def parse_grid(text, name="grid"):
    """A 1-D grid from ``"start:stop:num"`` (linear), ``"start:stop:num:log"`` (geometric) or ``"a,b,c"``.

    Both ends are included: ``parse_grid("1e-3:1e-1:3:log")`` is ``[1e-3, 1e-2, 1e-1]``. A text of another
    form is a ValueError naming ``name``, the allowed forms and the part that is wrong.
    """
    text = str(text).strip()
    forms = "'start:stop:num', 'start:stop:num:log' or a comma list of numbers"

    def bad(why):
        return ValueError(f"{name} must be {forms}; got {text!r} ({why})")

    def number(part, what):
        try:
            return float(part)
        except ValueError:
            raise bad(f"{what} {part.strip()!r} is not a number") from None

    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] not in ("log", "lin")):
            raise bad("expected start:stop:num with an optional :log or :lin")
        start, stop, num = number(parts[0], "start"), number(parts[1], "stop"), number(parts[2], "num")
        if not num.is_integer() or num < 1:
            raise bad(f"num must be an integer >= 1, got {parts[2].strip()!r}")
        num = int(num)
        if len(parts) == 4 and parts[3] == "log":
            if start <= 0 or stop <= 0:
                raise bad("a log grid needs positive ends")
            return np.geomspace(start, stop, num)
        return np.linspace(start, stop, num)
    values = [number(v, "value") for v in text.split(",") if v.strip()]
    if not values:
        raise bad("no values")
    return np.array(values)


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
