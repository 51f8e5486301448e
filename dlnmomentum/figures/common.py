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

import contextlib
import hashlib
import io
import json
import os
import re
import textwrap
import time

import numpy as np

from ..api import sweep
from ..runs.points import converged, field_description, flag_attributes
from ..store.files import (
    StoreError,
    StoreLockedError,
    attr_str,
    guarded,
    memory_h5,
    to_jsonable,
    verify_guarded,
    write_h5_image,
)
from ..store.kinds import FIGURE_FORMAT, kind_of, wrong_kind
from ..sweeps.result import Sweep, status_counts
from .levels import lambda_levels

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

#: Seconds between two looks at a part sweep that another process is writing.
PART_WAIT_SECONDS = 1.0


def run_sweep(parts_dir, spec, log=print, **kwargs):
    """``dlnmomentum.sweep(spec, **kwargs)`` into a resumable store under ``parts_dir`` named by its inputs.

    A finished store with the same inputs is read back without running anything; an interrupted one
    is continued. One that another process is writing (figures that share a sweep, computed at the same
    time into the same ``parts_dir``) is waited for, then read back or continued.
    """
    key = hashlib.sha256(json.dumps(to_jsonable({"spec": spec, **kwargs}), sort_keys=True).encode()).hexdigest()
    os.makedirs(parts_dir, exist_ok=True)
    path = os.path.join(parts_dir, f"sweep-{key[:16]}.h5")
    waiting = False
    while True:
        try:  # (resume=True also creates a missing store: no window between an exists check and the lock)
            sw = sweep(spec, store=path, resume=True, progress=False, **kwargs)
            break
        except StoreLockedError as exc:
            if not waiting:
                log(f"  sweep {os.path.basename(path)}: waiting for the process that computes it ({exc})")
                waiting = True
            time.sleep(PART_WAIT_SECONDS)
    if not sw.complete:
        raise KeyboardInterrupt(f"sweep {path} interrupted; run the figure again to continue it")
    log(f"  sweep {os.path.basename(path)}: {status_line(sw)}")
    return sw


def put_sweep(h5, name, sw):
    """Write the fields, coordinates, ``done`` mask and configuration of ``sw`` into group ``name``."""
    g = h5.create_group(name)
    g.attrs["dims"] = ",".join(sw.dims)
    g.attrs.update(guarded({"config": json.dumps(to_jsonable(sw.config))}, "config"))
    for dim in sw.dims + ("coord",):
        if dim in sw.coords:
            ds = g.create_dataset(dim, data=sw.coords[dim])
            ds.make_scale(dim)
    for field, arr in list(sw.data.items()) + [("done", sw.done.astype(np.uint8))]:
        if field in sw.dims:  # a parameter that is a dim (lam of a flow line): its coordinate holds it
            continue
        arr = np.asarray(arr)
        ds = g.create_dataset(field, data=arr, compression="gzip", shuffle=True)
        # what the field is, as in a sweep store (xarray shows it; before, the figure's copy had no description)
        ds.attrs["description"] = ("1 where the point has been computed" if field == "done"
                                   else field_description(field))
        ds.attrs.update(flag_attributes(field, arr.dtype))  # status, theory_reason: the name of every code
        for axis, dim in enumerate(sw.dims):
            ds.dims[axis].attach_scale(g[dim])
        if arr.ndim == len(sw.dims) + 1 and "coord" in g:
            ds.dims[len(sw.dims)].attach_scale(g["coord"])
    return g


def get_sweep(h5, name):
    """The :class:`~dlnmomentum.Sweep` stored by :func:`put_sweep` in group ``name``."""
    g = h5[name]
    verify_guarded(g.attrs, h5.filename, f"/{name}", RECOMPUTE)
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


def put(h5, name, data, description, dims=None, coordinates=None):
    """A dataset of a figure (a curve, a trajectory) with its ``description`` and an index dimension scale on every
    axis, beside it (xarray then names its dimensions, instead of ``phony_dim_*``): ``<name>_dim<k>``, or the name
    ``dims[k]`` (not None) that datasets of the same group share, so that arrays over one axis (the rows of a
    trajectory: its iterates, their times) open in xarray over one dimension, not one each. ``coordinates``: the
    CF attribute (names of the group's variables that xarray makes coordinates of this one, ``"k time"``)."""
    ds = h5.create_dataset(name, data=np.asarray(data))
    ds.attrs["description"] = description
    if coordinates:
        ds.attrs["coordinates"] = coordinates
    parent, leaf = ds.parent, name.rsplit("/", 1)[-1]
    for axis, length in enumerate(ds.shape):
        label = dims[axis] if dims is not None and dims[axis] else f"{leaf}_dim{axis}"
        if label in parent:  # a dimension shared with a dataset written before
            scale = parent[label]
            if scale.shape != (length,):
                raise ValueError(f"{name}: axis {axis} has length {length}, dimension {label!r} {scale.shape[0]}")
        else:
            scale = parent.create_dataset(label, data=np.arange(length, dtype=np.int64))
            scale.make_scale(label)
            scale.attrs["description"] = (f"index along axis {axis} of {leaf}" if label == f"{leaf}_dim{axis}"
                                          else f"index {label}")
        ds.dims[axis].attach_scale(scale)
    return ds


# -- status: what converged, what did not -------------------------------------------------------------

def status_line(sw, tol=None):
    """What a sweep ran to, in the counts a reader can match to the figure's marks:
    ``"288 runs (2 data sets × 144 points): converged (train loss ≤ 1e-20) 39, max_steps 249; reached train loss
    ≤ 1e-8: 208 runs, at 94 of 144 points in every data set; sign changes in 104 runs"``.

    *Runs* are data sets × grid points (a figure draws the points, mean over the data sets). ``converged`` is
    the status: the run reached the sweep's stop tolerance (``config["tol"]``, 1e-20 for the diagonal figures).
    The figures mark instead whether a run reached ``tol`` (default: the sweep's ``theory_tol``; none: left out),
    the rule of :func:`converged_mask`; a point is drawn as reached when every data set reached it.
    """
    counts = status_counts(sw)
    reps = sw.shape[sw.dims.index("rep")] if "rep" in sw.dims else 1
    points = int(sw.done.size) // reps
    done = int(sw.done.sum())
    runs = f"{done} runs" if done == sw.done.size else f"{done} of {int(sw.done.size)} runs"
    text = f"{runs} ({reps} data set{'s' if reps != 1 else ''} × {points} points): "
    stop = sw.config.get("tol")
    text += ", ".join(f"{k}{f' (train loss ≤ {short_number(float(stop))})' if k == 'converged' and stop else ''} {v}"
                      for k, v in counts.items())
    if tol is None:
        tol = sw.config.get("theory_tol")
    if tol is not None and "train_loss" in sw.data:
        ok = converged_mask(sw, float(tol))
        every = ok.all(axis=sw.dims.index("rep")) if "rep" in sw.dims else ok
        text += (f"; reached train loss ≤ {short_number(float(tol))}: {int(ok.sum())} runs, at {int(every.sum())} "
                 f"of {points} points in every data set")
    if "crossed" in sw.data:
        text += f"; sign changes in {int(np.asarray(sw.data['crossed'])[sw.done].astype(bool).sum())} runs"
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

#: How a setting key reads in a title: a template for ``{v}`` (the value), or a symbol written ``symbol=value``.
SETTING_WORDS = {"mu": "μ={v}", "sigma": "σ={v}", "alpha": "α={v}", "stop_tol": "stop at train loss {v}",
                 "fit_tol": "fit: train loss ≤ {v}", "tol": "stop at train loss {v}", "steps": "MGD ≤ {v} steps",
                 "steps_cap": "≤ {v} steps", "epochs": "{v} epochs", "t_max": "MGF t ≤ {v}",
                 "n_test": "{v} test points", "seed": "seeds {v}", "widths": "widths {v}"}


def short_number(v):
    """A number as the figures write it: 1e-08 -> 1e-8, 2000000 -> 2e6 (anything else: ``str``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        return str(v)
    if isinstance(v, (int, np.integer)):
        exp = len(str(abs(int(v)))) - 1
        mantissa = int(v) / 10**exp
        return f"{mantissa:g}e{exp}" if exp >= 5 and round(mantissa, 1) == mantissa else str(v)
    return re.sub(r"e([+-])0*(\d)", lambda m: "e" + ("-" if m.group(1) == "-" else "") + m.group(2), f"{v:g}")


def setting_text(setting):
    """One title line from a setting dict (n, d, s, μ, σ, α, horizon, tolerance, reps, seeds), in words
    (:data:`SETTING_WORDS`; another key reads ``key=value`` with spaces for underscores)."""
    parts = []
    for key, value in setting.items():
        value = ",".join(map(short_number, value)) if isinstance(value, (list, tuple)) else short_number(value)
        template = SETTING_WORDS.get(key, key.replace("_", " ") + "={v}")
        if key == "seed" and ".." not in value:  # one seed: "seed 0", not "seeds 0"
            template = "seed {v}"
        parts.append(template.format(v=value))
    return ", ".join(parts)


def new_store(path, name, size, overwrite=False):
    """Create the figure store ``path`` (as ``path.creating<pid>.tmp``, renamed when complete).

    An existing store is never replaced without ``overwrite``. The temporary name is the process's own: two
    processes computing the same figure into one ``--out`` never write the same temporary file.
    """
    if os.path.exists(path) and not overwrite:
        from ..store.files import StoreExistsError, command

        raise StoreExistsError(f"figure store {path} exists; `{command('plot', path)}` redraws it, --overwrite "
                               "recomputes it")
    if overwrite:  # only a figure store this package wrote is ever replaced
        from ..store.kinds import require_overwritable

        require_overwritable(path, "figure")
    tmp = f"{path}.creating{os.getpid()}.tmp"
    f = memory_h5(tmp)  # built in memory, written once complete: a full disk cannot leave a half-made file
    from .. import __version__

    f.attrs.update(kind="figure", format=FIGURE_FORMAT, figure=name, size=size, package_version=__version__,
                   created=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    return f, tmp


def finish_store(f, tmp, path, setting, summary):
    """Write the store built by :func:`new_store` to ``path`` (through ``tmp``, renamed when complete).

    A full disk is a :class:`~dlnmomentum.store.files.StoreError` naming ``path``; nothing is left behind.
    """
    f.attrs.update(guarded({"setting": json.dumps(to_jsonable(setting)), "summary": json.dumps(to_jsonable(summary))},
                           "setting", "summary"))
    try:
        write_h5_image(f, tmp)
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise StoreError(f"cannot write figure store {path}: {exc.strerror or exc}; nothing was written (its "
                         f"sweeps are kept under parts/: free space, then run the same command again)") from exc


#: What repairs a damaged figure store: computing it again (its sweeps under parts/ are reused where intact).
RECOMPUTE = "; compute the figure again with `dlnm figure NAME --overwrite` (it reuses the intact sweeps under parts/)"


def read_attrs(h5):
    """``(name, size, setting, summary)`` of an open figure store (another kind of file: an error naming
    what it is and its reader)."""
    kind = kind_of(h5.attrs)
    if kind != "figure":
        raise wrong_kind(h5.filename, kind, "figure")
    verify_guarded(h5.attrs, h5.filename, "the file's root", RECOMPUTE)
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
    """The figure's title and its setting line, the setting wrapped at commas to the figure's width (about 14
    characters an inch at 9 pt) so that no part of it is cut off."""
    width = max(40, int(fig.get_figwidth() * 14))
    setting_line = textwrap.fill(f"{setting_text(setting)}  [{size}]", width=width, break_long_words=False)
    fig.suptitle(f"{math_subscripts(title)}\n{setting_line}", fontsize=9)


def math_subscripts(text):
    """``θ_GF`` and ``λ_central`` of a plain-text title (as the terminal prints it) as mathtext subscripts, written
    as the axis labels write them (``θ$_{\\rm GF}$``): a drawn title showed the underscore."""
    return re.sub(r"(?<=\S)_([A-Za-z]+)", r"$_{\\rm \1}$", text)


#: How the figures name the sweep fields (axis labels, titles, colour bars): one name for each.
FIELD_LABELS = {
    "test_loss": "test loss",
    "train_loss": "train loss",
    "delta_inf_norm": "‖Δ∞‖₂",
    "l1_norm": "‖θ‖₁",
    "normalized_distance": r"‖θ - θ$_{\rm GF}$(Δ∞)‖ / ‖θ$_{\rm GF}$(Δ∞)‖",
    "theta0_tilde": "‖θ̃₀‖∞",
}
#: Legend font size (points): readable at the saved 130 dpi.
LEGEND_FONT = 7.5


def not_converged_label(tol):
    """The legend entry of the marks on runs that did not reach train loss ``tol`` (every figure says it so)."""
    return f"not at train loss ≤ {short_number(float(tol))}"


def mark_points(ax, x, y, mask, label, marker="x", color="red"):
    """Overlay marks (non-converged runs, runs without sign changes) at the points where ``mask`` holds."""
    mask = np.asarray(mask, dtype=bool)
    if mask.any():
        ax.scatter(np.asarray(x)[mask], np.asarray(y)[mask], marker=marker, s=22, color=color, label=label,
                   zorder=5, linewidths=1.0, facecolors="none" if marker == "o" else None,
                   clip_on=False)  # (a mark on the β = 0 row sits on the frame: whole, not halved)


# -- log axes: limits from the converged points, the others marked at the edge --------------------------

#: The legend entry of :func:`off_scale`'s marks.
OFF_SCALE_LABEL = "not converged, off scale: ▲▼ on the frame (value beside)"


def log_limits(ax, values, pad=0.08):
    """Log y limits spanning the finite positive ``values`` (the converged points), padded by ``pad`` of the span.

    A run that did not converge can end decades away from the rest; limits taken from it would flatten every
    curve of the panel, so those points are drawn by :func:`off_scale` instead.
    """
    v = np.asarray(values, dtype=float).ravel()
    v = np.log10(v[np.isfinite(v) & (v > 0)])
    if not v.size:
        return
    lo, hi = float(v.min()), float(v.max())
    span = max(hi - lo, 0.2)  # (a flat panel still shows a fifth of a decade)
    ax.set_ylim(10.0 ** (lo - pad * span), 10.0 ** (hi + pad * span))


def off_scale(ax, x, y, color, filled=True):
    """Draw the points of ``y`` outside the y limits as ▲ (above) / ▼ (below) on the frame, each with its value
    beside it; returns how many.

    The marks stand at their x on the frame line, half outside the axes (drawn inside, at 97.5 % of the height,
    a mark sat on a tick and read as that tick's value), and their value is written next to them: the legend
    (:data:`OFF_SCALE_LABEL`) says so. ``filled=False`` draws open marks (a run that converged, off scale).
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    lo, hi = ax.get_ylim()
    edge = ax.get_xaxis_transform()  # x in data, y in axes fractions
    count = 0
    for mask, where, marker in ((np.isfinite(y) & (y > hi), 1.0, "^"), (np.isfinite(y) & (y < lo), 0.0, "v")):
        if mask.any():
            ax.plot(x[mask], np.full(int(mask.sum()), where), marker, ls="none", ms=6, color=color,
                    mfc=color if filled else "white", transform=edge, clip_on=False, zorder=6)
            for xv, yv in zip(x[mask], y[mask], strict=True):
                # upright under (over) the mark: the labels of neighbouring λ do not run into each other
                ax.annotate(short_number(float(f"{yv:.2g}")), (xv, where), xycoords=edge,
                            xytext=(0, -6 if where else 6), textcoords="offset points", ha="center",
                            va="top" if where else "bottom", rotation=90,
                            fontsize=6.5, color=color, annotation_clip=False)
            count += int(mask.sum())
    return count


def off_scale_handle(label=OFF_SCALE_LABEL, filled=True):
    """The legend proxy of :func:`off_scale`'s marks."""
    from matplotlib.lines import Line2D

    return Line2D([], [], ls="none", marker="^", ms=6, color="0.3", mfc="0.3" if filled else "white", label=label)


def log_ticks_125(axis):
    """The ticks of a log ``axis`` spanning under two decades, in one style for every panel: 1, 2 and 5 × 10ᵏ,
    labelled ``2×10⁻⁴`` / ``10⁻⁴``, minor ticks unlabelled; the limits widened to the next such tick where fewer
    than two lie inside (a flat panel: matplotlib labelled it 1.45×10⁻⁴, 1.5×10⁻⁴, ..., unlike its neighbours).
    An axis over two decades or more gets :func:`decade_ticks`."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter

    lo, hi = sorted(axis.get_view_interval())
    if not (lo > 0 and np.isfinite(hi)):
        return
    if np.log10(hi / lo) >= 2:
        decade_ticks(axis)
        return
    exps = np.arange(np.floor(np.log10(lo)) - 1, np.ceil(np.log10(hi)) + 2)
    ticks = np.sort((10.0 ** exps[:, None] * np.array([1.0, 2.0, 5.0])).ravel())
    inside = ticks[(ticks >= lo) & (ticks <= hi)]
    below, above = ticks[ticks < lo].max(), ticks[ticks > hi].min()
    if inside.size == 0:
        lo, hi = below, above
    elif inside.size == 1:  # the nearer of the two (in log)
        lo, hi = (below, hi) if np.log10(lo / below) <= np.log10(above / hi) else (lo, above)
    set_limits = axis.axes.set_ylim if axis is axis.axes.yaxis else axis.axes.set_xlim
    set_limits(lo, hi)

    def label(v, _):
        e = int(np.floor(np.log10(v) + 1e-9))
        m = round(v / 10.0**e)
        # (as matplotlib's LogFormatterSciNotation writes the decades of decade_ticks: the same font)
        return f"$\\mathdefault{{10^{{{e}}}}}$" if m == 1 else f"$\\mathdefault{{{m}\\times10^{{{e}}}}}$"

    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(label))
    axis.set_minor_formatter(NullFormatter())


def decade_ticks(axis, most=8):
    """Major ticks of a log ``axis`` at every 1, 2, 5, 10, 20, 50 or 100 decades: at most ``most`` ticks.

    (matplotlib's own choice over 80 decades is every 11, unreadable.)
    """
    from matplotlib.ticker import FixedLocator, LogFormatterSciNotation, NullLocator

    lo, hi = sorted(axis.get_view_interval())
    if not (lo > 0 and np.isfinite(hi)):
        return
    first, last = np.ceil(np.log10(lo) - 1e-9), np.floor(np.log10(hi) + 1e-9)
    stride = next((s for s in (1, 2, 5, 10, 20, 50, 100) if (last - first) / s < most), 100)
    exps = np.arange(np.ceil(first / stride) * stride, last + 0.5, stride)
    axis.set_major_locator(FixedLocator(10.0 ** exps))
    axis.set_major_formatter(LogFormatterSciNotation())
    if stride > 1:  # minor ticks between sparse decades would read as decades
        axis.set_minor_locator(NullLocator())


# -- heatmaps over (γ, β) with λ level lines (:mod:`.levels`) ----------------------------------------

def cell_edges(centres, log=False):
    """The edges of the cells of a heatmap around ``centres`` (monotone): midpoints between neighbours (in log
    space for a log axis, where cells are then equally wide), the outer cells as wide as their neighbours (one
    centre: a decade, or 0.1, wide)."""
    c = np.log10(np.asarray(centres, dtype=float)) if log else np.asarray(centres, dtype=float)
    if c.size == 1:
        edges = c[0] + np.array([-0.5, 0.5]) * (1.0 if log else 0.1)
    else:
        mid = 0.5 * (c[1:] + c[:-1])
        edges = np.concatenate([[c[0] - (mid[0] - c[0])], mid, [c[-1] + (c[-1] - mid[-1])]])
    return 10.0 ** edges if log else edges


def heatmap(ax, gammas, betas, z, label, diverging=False, limits=None):
    """``z`` over the (γ, β) grid with its colour bar and the λ level lines; log γ axis, each cell centred on its
    (γ, β) in log γ (matplotlib's ``shading="nearest"`` takes linear midpoints: on a log axis the outer columns
    came out wider or narrower, and a first column off the axes). NaN cells are blank.

    ``diverging``: a signed quantity (a difference), on a blue-red scale symmetric about 0, whose white is 0: there
    a NaN cell is grey instead. ``limits``: the colour scale's ``(vmin, vmax)`` (panels to be compared share one).
    """
    import matplotlib

    kwargs = {"cmap": "viridis"}
    if diverging:
        top = float(np.nanmax(np.abs(z))) if np.isfinite(z).any() else 1.0
        cmap = matplotlib.colormaps["RdBu_r"].with_extremes(bad="0.75")
        kwargs = {"cmap": cmap, "vmin": -top, "vmax": top}
    if limits is not None:
        kwargs.update(vmin=limits[0], vmax=limits[1])
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    # β is a momentum in [0, 1): the outer cells stop at 0 and 1 (as wide as their neighbours they reached
    # β = -0.2 or 1.1, values no run has)
    beta_edges = np.clip(cell_edges(betas), 0.0, 1.0)
    mesh = ax.pcolormesh(cell_edges(gammas, log=True), beta_edges, np.ma.masked_invalid(z), shading="flat", **kwargs)
    ax.figure.colorbar(mesh, ax=ax, label=label)
    ax.autoscale_view()
    # the γ axis spans one or two decades: matplotlib then labels the minor ticks too, and their labels overlap
    # ("3×10⁻²4×10⁻²"); the decades alone are labelled
    ax.xaxis.set_minor_formatter(NullFormatter())
    lambda_levels(ax, gammas, betas)
    ax.set_xlabel("step size γ")
    ax.set_ylabel("momentum β")


def grid_legend(fig, axes):
    """One legend for a figure of heatmaps, below them (not over the cells of a corner): every entry once, on a grey
    box on which the white rings of :func:`mark_points` show."""
    entries = {}
    for ax in axes:
        for handle, text in zip(*ax.get_legend_handles_labels(), strict=True):
            entries.setdefault(text, handle)
    if entries:
        legend = fig.legend(list(entries.values()), list(entries), loc="outside lower center", ncols=len(entries),
                            fontsize=LEGEND_FONT + 1)
        legend.get_frame().set_facecolor("0.7")


#: The text every image the package draws carries in its metadata (PNG ``Software``, PDF ``Creator``): an existing
#: image is replaced only if it has it, so a file of the user's own at ``<out>/<name>.png`` is never overwritten.
IMAGE_MARK = "dlnmomentum figure image"


def _image_is_ours(path):
    with open(path, "rb") as fh:
        return IMAGE_MARK.encode() in fh.read()


def save(fig, out_dir, name):
    """Write ``<name>.png`` and ``<name>.pdf`` into ``out_dir``; returns the two paths. An existing file there is
    replaced only if it is an image the package drew (:data:`IMAGE_MARK`), else :class:`StoreError`."""
    from .. import __version__

    os.makedirs(out_dir, exist_ok=True)
    paths = [os.path.join(out_dir, f"{name}.{ext}") for ext in ("png", "pdf")]
    for p in paths:  # before either is written
        if os.path.lexists(p) and not (os.path.isfile(p) and _image_is_ours(p)):
            raise StoreError(f"refusing to overwrite {p}: it is not an image dlnmomentum drew (images drawn before "
                             f"0.6.0 carry no mark either): remove it yourself, or draw into another folder (--out)")
    mark = f"{IMAGE_MARK}: {name} (dlnmomentum {__version__})"
    for p in paths:
        ext = p.rsplit(".", 1)[1]
        image = io.BytesIO()  # rendered in memory, written by Python: a full disk is one OSError of one write
        fig.savefig(image, format=ext, dpi=130 if ext == "png" else None,
                    metadata={"Software": mark} if ext == "png" else {"Creator": mark})
        try:
            with open(p, "wb") as fh:
                fh.write(image.getbuffer())
        except OSError as exc:  # name the image, leave no half-written one
            with contextlib.suppress(OSError):
                os.unlink(p)
            raise OSError(exc.errno, f"cannot write figure image {p}: {exc.strerror or exc}") from exc
    return paths
