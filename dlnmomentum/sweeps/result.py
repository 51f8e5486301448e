"""The labelled result of a sweep: :class:`Sweep` (arrays over ``(rep, beta, gamma)`` or ``(rep, lam)``)."""

import json
import warnings

import numpy as np

from ..runs.points import (
    CODED_FIELDS,
    NOT_DONE,
    PARAMETER_FIELDS,
    TheoryReason,
    code_names,
    field_description,
    flag_attributes,
)
from ..runs.stepping import GRID_SCHEMES
from ..status import Status
from ..store.files import to_jsonable
from .plan import flow_scheme, flow_settings

# The labelled result
# ---------------------------------------------------------------------------------------------------

class Sweep:
    """Labelled result of a sweep: arrays indexed ``(rep, beta, gamma)`` or ``(rep, lam)``.

    Fields (see the module docstring) are available as ``sweep.test_loss`` or
    ``sweep["test_loss"]``; vector fields (``s_plus``, ``s_minus``, ``theta``) have a trailing
    ``coord`` axis. Points not computed yet (``done`` False) hold NaN (0 for integer fields).

    Attributes
    ----------
    dims : tuple of str
    coords : dict
        Name → 1-D coordinate array (``rep``, ``beta``, ``gamma`` or ``lam``, ``coord``).
    data : dict
        Field name → array.
    done : ndarray of bool
    config : dict
        The sweep's configuration (as stored).
    path : str or None
        The store, when there is one.
    """

    def __init__(self, dims, coords, data, done, config, path=None):
        self.dims = tuple(dims)
        self.coords = {k: np.asarray(v) for k, v in coords.items()}
        self.data = dict(data)
        self.done = np.asarray(done, dtype=bool)
        self.config = dict(config)
        self.path = path

    # -- access ------------------------------------------------------------------------------------
    @property
    def fields(self):
        return tuple(self.data)

    @property
    def shape(self):
        return self.done.shape

    @property
    def complete(self):
        """True when every point is done."""
        return bool(self.done.all())

    def __getitem__(self, name):
        try:
            return self.data[name]
        except KeyError:
            # (sweep's docstring names gamma, beta, lam as the points' parameters: where one is a dim, say where it is)
            dim = (f"{name!r} is a dim of this sweep {self.dims}: its values are coords[{name!r}]; "
                   if name in self.coords else "")
            raise KeyError(f"{dim}no field {name!r}; fields: {', '.join(self.data)}") from None

    def __getattr__(self, name):
        data = self.__dict__.get("data")
        if data is not None and name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    # -- codes with their names ----------------------------------------------------------------
    def names(self, field):
        """The names of the codes of ``field`` (``"status"``, ``"theory_reason"``) as a str array of its shape;
        points not done are ``"not_done"``."""
        if field not in CODED_FIELDS:
            raise ValueError(f"field must be one of the coded fields {tuple(CODED_FIELDS)}, got {field!r}")
        return np.where(self.done, code_names(field, self[field]), "not_done")  # (as wide as its longest name)

    @property
    def status_names(self):
        """``status`` as names (``"converged"``, ``"max_steps"``, ``"diverged"``, ...); ``"not_done"`` where no
        point was computed yet."""
        return self.names("status")

    @property
    def theory_reason_names(self):
        """``theory_reason`` as names (``"computed"``, ``"not_converged"``, ...; see
        :class:`~dlnmomentum.runs.points.TheoryReason`); ``"not_done"`` where no point was computed yet."""
        return self.names("theory_reason")

    def __repr__(self):
        sizes = ", ".join(f"{d}={self.done.shape[i]}" for i, d in enumerate(self.dims))
        return (f"Sweep({self.config.get('kind', '?')}: {sizes}; "
                f"{int(self.done.sum())}/{self.done.size} points "
                f"done{'; store ' + self.path if self.path else ''})")

    # -- reductions --------------------------------------------------------------------------------
    def mean(self, dim="rep", skipna=False):
        """Average over one dimension (``"rep"`` by default); returns a :class:`Sweep` without it.

        Float fields are averaged (``skipna``: ignoring NaN, e.g. diverged points); ``crossed``
        becomes the fraction of crossed runs, ``steps_done`` the mean; the coded fields ``status`` and
        ``theory_reason`` are dropped (a mean of codes names nothing).
        Only points done along the whole reduced axis are reported (NaN elsewhere, with a ``UserWarning``
        saying how many).
        """
        if dim not in self.dims:
            raise ValueError(f"dim must be one of {self.dims}, got {dim!r}")
        axis = self.dims.index(dim)
        done = self.done.all(axis=axis)
        if not done.all():  # a NaN mean of a point not done is no result: say so
            warnings.warn(f"mean over {dim} of a partial sweep: {int(done.size - done.sum())} of {done.size} means "
                          f"are NaN because some point along {dim} is not done ({self._not_done_text()}); the "
                          "result's done marks the means computed", UserWarning, stacklevel=2)
        out = {}
        for name, arr in self.data.items():
            if name in CODED_FIELDS:
                continue
            values = np.asarray(arr, dtype=np.float64)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                red = np.nanmean(values, axis=axis) if skipna else values.mean(axis=axis)
            mask = done.reshape(done.shape + (1,) * (red.ndim - done.ndim))
            out[name] = np.where(mask, red, np.nan)
        dims = self.dims[:axis] + self.dims[axis + 1:]
        coords = {k: v for k, v in self.coords.items() if k != dim}
        config = dict(self.config, reduced=f"mean over {dim}")
        return Sweep(dims, coords, out, done, config, path=None)

    def to_xarray(self):
        """An :class:`xarray.Dataset` over the sweep's dims, with their coordinates.

        A run parameter that is a dim (``lam`` of a λ line or of constant-λ lines, ``gamma`` and ``beta`` of a
        grid) is its coordinate; the others (``lam`` of a (β, γ) grid, ``gamma`` and ``beta`` of pairs) are
        coordinates over the grid (not index coordinates), as ``xarray.open_dataset`` of the store gives them. The
        coded fields (``status``, ``theory_reason``) carry the CF attributes ``flag_values`` and ``flag_meanings``:
        the name of every code.

        A partial sweep (points not done) gives a ``UserWarning`` saying how many; its points not done hold NaN in
        the float fields, 0 in the integer ones and the code -1 ``not_done`` in the coded fields (whose 0 would
        read ``running`` / ``computed``); the variable ``done`` marks the points computed.
        """
        import xarray as xr

        partial = not self.complete
        if partial:  # NaN, 0 and the codes of points never computed are no results: say so
            warnings.warn(f"to_xarray of a partial sweep: {self._not_done_text()}; in the Dataset their float "
                          f"fields are NaN, their integer fields 0, their {' and '.join(CODED_FIELDS)} the code "
                          f"{NOT_DONE} 'not_done'; its variable done marks the points computed "
                          "(ds.where(ds.done))", UserWarning, stacklevel=2)
        variables = {}
        for name, arr in self.data.items():
            if name in self.dims:  # a parameter that is a dim: its coordinate holds it
                continue
            dims = self.dims + (("coord",) if np.ndim(arr) == len(self.dims) + 1 else ())
            arr = np.asarray(arr)
            attrs = {"description": field_description(name), **flag_attributes(name, arr.dtype)}
            if partial and name in CODED_FIELDS:
                # the fill 0 of a point not done is a code (status 'running', theory_reason 'computed'): a
                # point not done gets the code of its own name instead, as names() says
                arr = np.where(self.done, arr, np.asarray(NOT_DONE, dtype=arr.dtype))
                attrs.update(flag_attributes(name, arr.dtype, not_done=True))
            variables[name] = xr.Variable(dims, arr, attrs)
        variables["done"] = xr.Variable(self.dims, self.done)
        coords = {k: v for k, v in self.coords.items() if k in self.dims or k == "coord"}
        attrs = {"kind": "sweep", "config": json.dumps(to_jsonable(self.config))}
        # the run parameters over the grid label the points (ds.test_loss.plot(x="lam"), ds.where(ds.lam < 1)):
        # coordinates, as the store's attribute coordinates makes them for xarray.open_dataset (0.6.0)
        over_grid = [name for name in PARAMETER_FIELDS if name in variables]
        return xr.Dataset(variables, coords=coords, attrs=attrs).set_coords(over_grid)

    def _not_done_text(self):
        left = int(self.done.size - self.done.sum())
        where = f" ({self.path}: continue it with dlnmomentum.resume_sweep)" if self.path else ""
        return f"{left} of {self.done.size} points are not done{where}"

    def summary(self):
        """A few lines describing the sweep (the ``dlnm inspect`` text)."""
        return "\n".join(summary_lines(self))


def summary_dict(sw):
    """What :func:`summary_lines` says, as a JSON-able dict (``dlnm inspect --json`` of a sweep store)."""
    cfg = sw.config
    done = sw.done
    out = {"kind": cfg.get("kind"), "dims": list(sw.dims), "shape": list(sw.shape), "path": sw.path,
           "config": to_jsonable(cfg), "done": int(done.sum()), "points": int(done.size),
           "complete": sw.complete, "sessions": cfg.get("sessions")}
    if done.any():
        status = np.asarray(sw.data["status"])[done]
        out["status"] = {_status_label(c): int((status == c).sum()) for c in np.unique(status)}
        if "crossed" in sw.data:
            out["crossed"] = int(np.asarray(sw.data["crossed"])[done].sum())
        out["fields"], out["diverged_excluded"] = field_statistics(sw)
    return out


#: The fields whose statistics the summaries give (those of them a sweep has).
STATISTICS_FIELDS = ("test_loss", "train_loss", "delta_inf_norm", "l1_norm", "prediction_gap",
                     "normalized_distance", "param_norm")


def field_statistics(sw):
    """``({field: {min, median, max, finite, points}}, diverged)``: the statistics of the summaries.

    Taken over the points done that did not diverge (a diverged point's values, up to 1e+285, would be the
    max of every field); ``diverged`` says how many points that excludes, ``points`` how many were left and
    ``finite`` how many of them have a finite value (a test loss without a test set is NaN).
    """
    done = sw.done
    diverged = done & (np.asarray(sw.data["status"]) == Status.DIVERGED)
    keep = done & ~diverged
    stats = {}
    for name in STATISTICS_FIELDS:
        if name not in sw.data:
            continue
        vals = np.asarray(sw.data[name], dtype=float)[keep]
        finite = vals[np.isfinite(vals)]
        if finite.size:
            stats[name] = {"min": float(finite.min()), "median": float(np.median(finite)),
                           "max": float(finite.max()), "finite": int(finite.size), "points": int(vals.size)}
    return stats, int(diverged.sum())


def _stepping(cfg):
    """A flow sweep's scheme and, where its points may run adaptively, their settings (a store before 0.6.0 has none:
    the defaults)."""
    scheme = flow_scheme(cfg)
    if scheme in GRID_SCHEMES:
        return scheme
    settings = ", ".join(f"{name}={'default' if value is None else value if isinstance(value, int) else f'{value:g}'}"
                         for name, value in flow_settings(cfg).items())
    return f"{scheme}; {'adaptive points' if scheme == 'auto' else 'every point'}: {settings}"


def summary_lines(sw):
    """The lines of :meth:`Sweep.summary` (and of ``dlnm inspect`` on a sweep store)."""
    cfg = sw.config
    kind = cfg.get("kind", "?")
    sizes = " x ".join(f"{d}={n}" for d, n in zip(sw.dims, sw.shape, strict=True))
    lines = [f"sweep        : {kind}, dims {sizes}" + (f"  ({sw.path})" if sw.path else "")]
    if kind in ("mgd", "smgd", "network-mgd", "network-smgd"):
        design = cfg.get("design", "grid")
        for name in ("gammas", "lams", "betas"):
            if name in cfg:
                v = np.asarray(cfg[name])
                label = {"gammas": "gamma", "lams": "lambda", "betas": "beta"}[name]
                lines.append(f"{label:<13}: {v.size} values in [{v.min():g}, {v.max():g}]"
                             + ("  (pairs with beta)" if design == "pairs" and name == "gammas" else "")
                             + ("  (gamma = lambda (1-beta)^2)" if name == "lams" else ""))
        batch = ""
        if cfg.get("batch_size"):
            batch = f", batch size {cfg['batch_size']}" + (", with replacement" if cfg.get("replace") else "")
        lines.append(f"steps        : {cfg['steps']}{batch}")
    else:
        lam = np.asarray(cfg["lams"])
        lines.append(f"lambda       : {lam.size} values in [{lam.min():g}, {lam.max():g}]")
        lines.append(f"t_max        : {cfg['t_max']:g}")
        lines.append(f"scheme       : {_stepping(cfg)}")
    data = cfg.get("spec") or {"problem": "given Problem", "fingerprint": str(cfg.get("fingerprint",
                                                                                      ""))[:12]}
    lines.append(f"data         : reps={cfg['reps']}, seed={cfg['seed']}, "
                 + ", ".join(f"{k}={v}" for k, v in data.items()))
    if "alpha" in cfg:  # (network sweeps have no alpha, gradient form or theory)
        lines.append(f"settings     : alpha={cfg['alpha']:g}, tol={cfg['tol']}, gradient={cfg['gradient']}, "
                     f"theory={cfg['theory']}")
    else:
        lines.append(f"settings     : tol={cfg['tol']}")
    done = sw.done
    lines.append(f"done         : {int(done.sum())}/{done.size} points"
                 + (f", {cfg.get('sessions', 1)} session(s)" if "sessions" in cfg else ""))
    if done.any():
        status = np.asarray(sw.data["status"])[done]
        counts = {_status_label(c): int((status == c).sum()) for c in np.unique(status)}
        lines.append("status       : " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        if "crossed" in sw.data:
            lines.append(f"crossed      : {int(np.asarray(sw.data['crossed'])[done].sum())} points")
        if "theory_reason" in sw.data and cfg.get("theory"):
            reasons = np.asarray(sw.data["theory_reason"])[done]
            lines.append("theory       : " + ", ".join(f"{_reason_label(c)} {int((reasons == c).sum())}"
                                                       for c in np.unique(reasons)))
        stats, diverged = field_statistics(sw)
        kept = int(done.sum()) - diverged
        lines.append(f"statistics   : over the {kept} points that did not diverge"
                     + (f" ({diverged} diverged points excluded)" if diverged else ""))
        for name, v in stats.items():
            lines.append(f"{name:<13}: min {v['min']:.4e}  median {v['median']:.4e}  max {v['max']:.4e}  "
                         f"({v['finite']} finite" + (f" of {v['points']})" if v["finite"] != v["points"] else ")"))
    return lines


# ---------------------------------------------------------------------------------------------------
# Plan: what a sweep computes


def _reason_label(code):
    try:
        return TheoryReason(int(code)).name.lower().replace("_", " ")
    except ValueError:
        return str(int(code))


def status_counts(sw):
    """``{status label: number of points}`` over the points done (what every sweep and figure reports)."""
    status = np.asarray(sw.data["status"])[sw.done]
    return {_status_label(c): int((status == c).sum()) for c in np.unique(status)}


def _status_label(code):
    try:
        return Status(int(code)).label
    except ValueError:  # a code this version does not know (a file from a newer one)
        return str(int(code))
