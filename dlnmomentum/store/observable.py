"""What a run store's reader hands out besides results: :class:`Observable`, one recorded quantity (``step``,
``time``, ``value``; ``to_xarray``), and :class:`Description`, a stored run's description shown by its lengths."""

import numpy as np

from .format import OBSERVABLE_AXES, OBSERVABLE_INFO


class Observable:
    """One recorded quantity: ``step``, ``time`` and ``value`` (rows first) with its units."""

    __slots__ = ("name", "step", "time", "value", "units", "description")

    def __init__(self, name, step, time, value, units, description):
        self.name, self.step, self.time, self.value = name, step, time, value
        self.units, self.description = units, description

    def __len__(self):
        return int(self.step.shape[0])

    def __repr__(self):
        return f"Observable({self.name!r}, rows={len(self)}, value shape={self.value.shape})"

    def to_xarray(self):
        xr = _xarray()
        named = OBSERVABLE_AXES.get(self.name, ())  # (a network's params: parameter, as in the file)
        dims = ("time",) + tuple(named[i - 1] if i <= len(named) else "coordinate" if i == 1 else f"axis{i}"
                                 for i in range(1, self.value.ndim))
        coords = {axis: ("time", values, dict(zip(("units", "description"), OBSERVABLE_INFO[axis], strict=True)))
                  for axis, values in (("time", self.time), ("step", self.step))}  # (as in the file)
        for i, dim in enumerate(dims[1:], start=1):
            coords[dim] = np.arange(self.value.shape[i], dtype=np.int64)
        value = xr.DataArray(self.value, dims=dims, coords=coords, name="value",
                             attrs={"units": self.units, "description": self.description,
                                    "long_name": self.name})
        return value.to_dataset()


def _xarray():
    try:
        import xarray as xr
    except ImportError as exc:  # pragma: no cover - optional extra
        raise ImportError("to_xarray needs xarray: pip install 'dlnmomentum[xarray]'") from exc
    return xr


class Description(dict):
    """A stored run's description (:attr:`Store.config`): a plain dict (``config["schedule"]`` is every recorded
    step), shown as a summary: a long list by its length and its ends, not hundreds of step numbers."""

    def __repr__(self):
        return "{" + ", ".join(f"{k!r}: {_short_repr(v)}" for k, v in self.items()) + "}"

    __str__ = __repr__

    def _repr_pretty_(self, p, cycle):  # IPython / Jupyter
        p.text(repr(self))


def _short_repr(value):
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) > 8:
        return f"[{len(value)} values: {value[0]!r}, {value[1]!r}, ..., {value[-1]!r}]"
    return repr(value)
