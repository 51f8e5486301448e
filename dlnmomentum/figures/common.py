"""What every diagonal-network figure shares: sizes, the figure store, sweeps kept in it, titles, marks.

A figure is computed into an HDF5 *figure store* first (``<out>/<name>.h5``) and drawn from the store
alone, so re-plotting never re-runs anything (``dlnm plot STORE``). The store holds:

* root attributes ``kind = "figure"``, ``figure`` (the name), ``size``, ``package_version``,
  ``created``, ``setting`` (JSON: n, d, s, μ, σ, α, horizon, tolerance, replications, seeds) and
  ``summary`` (JSON: the numbers the figure's claims rest on, and the status counts);
* one group per sweep the figure ran (:func:`put_sweep`): the point fields over the sweep's dims
  (with dimension scales), ``done``, and the sweep's configuration as JSON; read back as a
  :class:`~dlnmomentum.Sweep` by :func:`get_sweep`;
* other datasets a figure needs (curves, trajectories).

The sweeps themselves run into resumable sweep stores under ``<out>/parts/`` named by a hash of their
configuration: an interrupted ``--full`` figure continues where it stopped, and two figures that need
the same sweep (``mgd-grid``, ``lambda-collapse``, ``crossings``) compute it once.
"""

import hashlib
import json
import os
import time

import h5py
import numpy as np

from ..api import sweep
from ..runs.points import converged, flag_attributes
from ..store.files import attr_str, to_jsonable
from ..store.kinds import kind_of, wrong_kind
from ..sweeps.result import Sweep, status_counts

#: Figure sizes: ``tiny`` (the test suite: seconds), ``quick`` (every figure together in minutes on 2
#: cores), ``full`` (the paper's setting and tolerances: hours).
SIZES = ("tiny", "quick", "full")

#: The paper's data setting (Appendix "Experiments with Diagonal Linear Networks").
PAPER_DATA = {"n": 20, "d": 30, "s": 5, "mu": 1.0, "sigma": 1.0, "n_test": 1000}
#: The paper's initialisation scale (u0 = α 1, v0 = 0).
ALPHA = 0.01


def check_size(size):
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    return size


# -- sweeps kept in the figure store -----------------------------------------------------------------

def run_sweep(parts_dir, spec, log=print, **kwargs):
    """``dlnmomentum.sweep(spec, **kwargs)`` into a resumable store under ``parts_dir`` named by its inputs.

    A finished store with the same inputs is read back without running anything; an interrupted one
    is continued.
    """
    key = hashlib.sha256(json.dumps(to_jsonable({"spec": spec, **kwargs}), sort_keys=True).encode()).hexdigest()
    os.makedirs(parts_dir, exist_ok=True)
    path = os.path.join(parts_dir, f"sweep-{key[:16]}.h5")
    sw = sweep(spec, store=path, resume=os.path.exists(path), progress=False, **kwargs)
    if not sw.complete:
        raise KeyboardInterrupt(f"sweep {path} interrupted; run the figure again to continue it")
    log(f"  sweep {os.path.basename(path)}: {status_line(sw)}")
    return sw


def put_sweep(h5, name, sw):
    """Write the fields, coordinates, ``done`` mask and configuration of ``sw`` into group ``name``."""
    g = h5.create_group(name)
    g.attrs["dims"] = ",".join(sw.dims)
    g.attrs["config"] = json.dumps(to_jsonable(sw.config))
    for dim in sw.dims + ("coord",):
        if dim in sw.coords:
            ds = g.create_dataset(dim, data=sw.coords[dim])
            ds.make_scale(dim)
    for field, arr in list(sw.data.items()) + [("done", sw.done.astype(np.uint8))]:
        if field in sw.dims:  # a parameter that is a dim (lam of a flow line): its coordinate holds it
            continue
        arr = np.asarray(arr)
        ds = g.create_dataset(field, data=arr, compression="gzip", shuffle=True)
        ds.attrs.update(flag_attributes(field, arr.dtype))  # status, theory_reason: the name of every code
        for axis, dim in enumerate(sw.dims):
            ds.dims[axis].attach_scale(g[dim])
        if arr.ndim == len(sw.dims) + 1 and "coord" in g:
            ds.dims[len(sw.dims)].attach_scale(g["coord"])
    return g


def get_sweep(h5, name):
    """The :class:`~dlnmomentum.Sweep` stored by :func:`put_sweep` in group ``name``."""
    g = h5[name]
    dims = tuple(attr_str(g.attrs["dims"]).split(","))
    coords = {k: g[k][...] for k in dims + ("coord",) if k in g}
    data = {k: g[k][...] for k in g if k not in coords and k != "done"}
    shape = g["done"].shape
    for axis, dim in enumerate(dims):
        if dim in ("lam", "gamma", "beta"):  # the parameter field of a dim, as the sweep had it
            view = [1] * len(shape)
            view[axis] = shape[axis]
            data[dim] = np.broadcast_to(coords[dim].reshape(view), shape).copy()
    return Sweep(dims, coords, data, g["done"][...].astype(bool), json.loads(attr_str(g.attrs["config"])))


def put(h5, name, data, description):
    ds = h5.create_dataset(name, data=np.asarray(data))
    ds.attrs["description"] = description
    return ds


# -- status: what converged, what did not -------------------------------------------------------------

def status_line(sw):
    """``"40 points: converged 31, max_steps 9; crossed 12"`` (every sweep and figure prints one)."""
    counts = status_counts(sw)
    text = f"{int(sw.done.sum())} points: " + ", ".join(f"{k} {v}" for k, v in counts.items())
    if "crossed" in sw.data:
        text += f"; sign changes in {int(np.asarray(sw.data['crossed'])[sw.done].astype(bool).sum())}"
    return text


def converged_mask(sw, tol):
    """Points done whose run reached train loss ``tol`` (:func:`dlnmomentum.runs.points.converged`)."""
    return sw.done & converged(sw.data["status"], sw.data["train_loss"], tol)


def summarize(sweeps, tol):
    """Status counts of every sweep of a figure, and how many points reached ``tol`` (JSON-able)."""
    out = {}
    for name, sw in sweeps.items():
        ok = converged_mask(sw, tol)
        out[name] = {"points": int(sw.done.sum()), "status": status_counts(sw), "reached_tol": int(ok.sum())}
        if "crossed" in sw.data:  # (network sweeps have no sign crossings)
            out[name]["crossed"] = int(np.asarray(sw.data["crossed"])[sw.done].astype(bool).sum())
    return out


def mean_over_reps(sw, field, mask=None):
    """Mean over ``rep`` of ``field`` where ``mask`` (default: all) holds for every rep; NaN elsewhere."""
    vals = np.asarray(sw.data[field], dtype=float)
    keep = sw.done if mask is None else (sw.done & mask)
    keep = keep.reshape(keep.shape + (1,) * (vals.ndim - keep.ndim))
    ok = keep.all(axis=0)
    with np.errstate(invalid="ignore"):
        m = vals.mean(axis=0)
    return np.where(ok, m, np.nan)


# -- the store file -----------------------------------------------------------------------------------

def setting_text(setting):
    """One title line from a setting dict (n, d, s, μ, σ, α, horizon, tolerance, reps, seeds)."""
    names = {"mu": "μ", "sigma": "σ", "alpha": "α", "reps": "reps", "tol": "tol", "steps": "steps",
             "t_max": "t_max", "seed": "seed"}
    parts = []
    for key, value in setting.items():
        if isinstance(value, float):
            value = f"{value:g}"
        elif isinstance(value, (list, tuple)):
            value = ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
        parts.append(f"{names.get(key, key)}={value}")
    return ", ".join(parts)


def new_store(path, name, size, overwrite=False):
    """Create the figure store ``path`` (as ``path.creating``, renamed when complete).

    An existing store is never replaced without ``overwrite``.
    """
    if os.path.exists(path) and not overwrite:
        from ..store.files import StoreExistsError

        raise StoreExistsError(f"figure store {path} exists; `dlnm plot {path}` redraws it, --overwrite "
                               "recomputes it")
    if overwrite:  # only a figure store this package wrote is ever replaced
        from ..store.kinds import require_overwritable

        require_overwritable(path, "figure")
    tmp = path + ".creating"
    f = h5py.File(tmp, "w")
    from .. import __version__

    f.attrs.update(kind="figure", figure=name, size=size, package_version=__version__,
                   created=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    return f, tmp


def finish_store(f, tmp, path, setting, summary):
    f.attrs["setting"] = json.dumps(to_jsonable(setting))
    f.attrs["summary"] = json.dumps(to_jsonable(summary))
    f.close()
    os.replace(tmp, path)


def read_attrs(h5):
    """``(name, size, setting, summary)`` of an open figure store (another kind of file: an error naming
    what it is and its reader)."""
    kind = kind_of(h5.attrs)
    if kind != "figure":
        raise wrong_kind(h5.filename, kind, "figure")
    return (attr_str(h5.attrs["figure"]), attr_str(h5.attrs["size"]), json.loads(attr_str(h5.attrs["setting"])),
            json.loads(attr_str(h5.attrs["summary"])))


# -- drawing ------------------------------------------------------------------------------------------

def pyplot():
    import matplotlib

    if matplotlib.get_backend().lower() not in ("agg", "pdf", "svg", "cairo"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def suptitle(fig, title, setting, size):
    fig.suptitle(f"{title}\n{setting_text(setting)}  [{size}]", fontsize=9)


def mark_points(ax, x, y, mask, label, marker="x", color="red"):
    """Overlay marks (non-converged runs, runs without sign changes) at the points where ``mask`` holds."""
    mask = np.asarray(mask, dtype=bool)
    if mask.any():
        ax.scatter(np.asarray(x)[mask], np.asarray(y)[mask], marker=marker, s=22, color=color, label=label,
                   zorder=5, linewidths=1.0, facecolors="none" if marker == "o" else None)


def lambda_levels(ax, gammas, betas, color="white"):
    """Labelled λ = γ/(1-β)² level lines over a (γ, β) heatmap."""
    import matplotlib.colors as mcolors

    g = np.geomspace(np.min(gammas), np.max(gammas), 200)
    b = np.linspace(np.min(betas), np.max(betas), 200)
    G, B = np.meshgrid(g, b)
    lam = G / (1.0 - B) ** 2
    levels = 10.0 ** np.arange(np.floor(np.log10(lam.min())), np.ceil(np.log10(lam.max())) + 0.5, 0.5)
    cs = ax.contour(G, B, lam, levels=levels, colors=color, linewidths=0.7, norm=mcolors.LogNorm())
    ax.clabel(cs, fmt=lambda v: f"λ={v:.2g}", fontsize=6)


def heatmap(ax, gammas, betas, z, label, diverging=False):
    """``z`` over the (γ, β) grid (NaN blank) with its colour bar and the λ level lines; log γ axis.

    ``diverging``: a signed quantity (a difference), on a blue-red scale symmetric about 0.
    """
    kwargs = {"cmap": "viridis"}
    if diverging:
        top = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
        kwargs = {"cmap": "RdBu_r", "vmin": -top, "vmax": top}
    mesh = ax.pcolormesh(gammas, betas, np.ma.masked_invalid(z), shading="nearest", **kwargs)
    ax.figure.colorbar(mesh, ax=ax, label=label)
    lambda_levels(ax, gammas, betas)
    ax.set_xscale("log")
    ax.set_xlabel("step size γ")
    ax.set_ylabel("momentum β")


def save(fig, out_dir, name):
    """Write ``<name>.png`` and ``<name>.pdf`` into ``out_dir``; returns the two paths."""
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for ext in ("png", "pdf"):
        p = os.path.join(out_dir, f"{name}.{ext}")
        fig.savefig(p, dpi=130 if ext == "png" else None)
        paths.append(p)
    return paths
