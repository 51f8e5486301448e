"""The paper's figures: computed into an HDF5 figure store, drawn from the store alone.

Diagonal linear networks (``dlnm figure NAME``, ``dlnm reproduce``; :data:`FIGURES`):

===================  ==================================================================================
``quadratic``        Figure 1: (M)GD over (M)GF on a 2-D quadratic; the acceleration rule
``mgf-lambda``       Figure 3: MGF(λ) test loss and ‖Δ∞‖₂ against λ, no-crossing band, small-λ formulas
``mgd-grid``         Figure 4: MGD heatmaps over (β, γ) with λ level lines and marks
``mgd-mgf-grid``     Figure 7: MGD and MGF(λ = γ/(1-β)²) over (β, γ), and their difference
``mgd-vs-mgf``       MGD on constant-λ lines against MGF(λ)
``mgf-triple``       Figure 8: MGF(λ) with the normalised distance to θ_GF(Δ∞)
``data-mean``        Figure 9: the data mean μ ∈ {0, 0.5, 1, 1.5}
``lambda-collapse``  grid points against λ and λ_central (Appendix A), with the within-bin spreads
``crossings``        the normalised distance and |θ̃0| against the number of sign changes
``teacher-student``  Figure 2: a ReLU student over (γ, β), test loss at train loss 1e-5
``deep-linear``      Figure 6: a deep linear network over (γ, β), losses after 1000 epochs
===================  ==================================================================================

A figure module has ``NAME``, ``TITLE``, ``SIZES``, ``FIGSIZE`` (inches), ``compute(h5, size, log, [parts])`` (writes
everything into the open store, returns the summary of its claims) and ``plot(h5, fig)`` (draws from
the store only). :mod:`.networks` holds the λ measure of the network figures and their earlier functions.

:func:`open_figure` reads a figure store (:class:`FigureStore`: setting, claims, sweeps, datasets), as
:func:`dlnmomentum.open_store` reads run stores and :func:`dlnmomentum.open_sweep` sweep stores.
"""

import inspect
import json
import os
import re

import h5py

from ..store.files import READ_ERRORS, StoreError, attr_str, command, open_h5, read_error, reading
from ..validate import ParameterValueError, as_bool, as_store_path
from . import (
    common,
    crossings,
    data_mean,
    deep_linear,
    lambda_collapse,
    mgd_grid,
    mgd_mgf_grid,
    mgd_vs_mgf,
    mgf_lambda,
    mgf_triple,
    quadratic,
    teacher_student,
)

#: The figure modules by name, in the order of ``dlnm reproduce``.
FIGURES = {m.NAME: m for m in (quadratic, mgf_lambda, mgd_grid, mgd_mgf_grid, mgd_vs_mgf, mgf_triple, data_mean,
                               lambda_collapse, crossings, teacher_student, deep_linear)}


def figure_module(name):
    try:
        return FIGURES[name]
    except KeyError:
        raise ValueError(f"figure must be one of {', '.join(FIGURES)}; got {name!r}") from None


def _spec_kwargs(module, name, spec):
    """``{"spec": spec}`` for a figure with named problems (its ``SPECS``), ``{}`` for the default one."""
    if spec is None:
        return {}
    specs = getattr(module, "SPECS", None)
    if specs is None:
        with_specs = ", ".join(n for n, m in FIGURES.items() if hasattr(m, "SPECS"))
        raise ParameterValueError(f"spec: figure {name} has one problem; named problems are for {with_specs}", "spec")
    if spec not in specs:
        raise ParameterValueError(f"spec must be one of {', '.join(specs)} for figure {name}; got {spec!r}", "spec")
    return {"spec": spec}


def compute_figure(name, size="quick", out="figures", overwrite=False, log=print, spec=None):
    """Compute figure ``name`` at ``size`` into ``<out>/<name>.h5``; returns ``(store path, summary)``.

    Sweeps run into resumable stores under ``<out>/parts`` (an interrupted figure continues where it
    stopped). An existing figure store is kept unless ``overwrite``. ``spec``: for a figure with named
    problems (``teacher-student``: its ``SPECS``), which one (default: the module's ``DEFAULT_SPEC``).
    """
    module = figure_module(name)
    common.check_size(size)
    overwrite = as_bool("overwrite", overwrite)
    _check_out(out)
    extra = _spec_kwargs(module, name, spec)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"{name}.h5")
    f, tmp = common.new_store(path, name, size, overwrite)
    try:
        kwargs = {"log": log}
        if "parts" in inspect.signature(module.compute).parameters:
            kwargs["parts"] = os.path.join(out, "parts")
        log(f"{name} [{size}]: computing")
        summary = module.compute(f, size, **kwargs, **extra)
        setting = module.setting(size, **extra) if hasattr(module, "setting") else {}
    except BaseException:
        f.close()  # an in-memory file (common.new_store): nothing on disk to remove
        raise
    common.finish_store(f, tmp, path, setting, summary)
    return path, summary


def plot_store(path, out=None):
    """Draw the figure stored at ``path`` (PNG and PDF next to it, or in ``out``); returns the image paths.

    ``path`` is a figure store (``<out>/<name>.h5`` of ``dlnm figure``/``dlnm reproduce``); another kind of
    file is an error that says what it is and names its reader.
    """
    plt = common.pyplot()
    path = as_store_path(path)
    if out is not None:  # (a file as out was met at the image write, said as a full disk: "once there is room")
        _check_out(out)
    h5, _ = open_h5(path)
    fig = None
    try:
        with h5:
            with reading(path):
                name, size, setting, _ = common.read_attrs(h5)
            module = figure_module(name)
            fig = plt.figure(figsize=getattr(module, "FIGSIZE", (10.0, 5.0)), constrained_layout=True)
            try:
                module.plot(h5, fig)
            except READ_ERRORS as exc:  # raised by HDF5 reading the store: damage; by the drawing: a bug, as is
                if not _raised_by_h5py(exc):
                    raise
                raise read_error(path, exc, "the figure's data") from exc
            if setting:  # (a module without a setting function titles its figure itself: quadratic)
                common.suptitle(fig, figure_title(module, setting), setting, size)
        try:  # after the store is closed: an image that cannot be written is not a damaged store
            return common.save(fig, out or os.path.dirname(os.path.abspath(path)), name)
        except StoreError:  # (a file there that is not an image it drew: refused, named)
            raise
        except OSError as exc:  # (a full disk) the store is intact
            raise OSError(exc.errno, f"{exc.strerror} (the figure store {path} is complete: "
                          f"`{command('plot', path)}` draws it again once there is room)") from exc
    finally:
        if fig is not None:
            plt.close(fig)


def figure_title(module, setting):
    """``module.TITLE`` with the stored ``setting``'s values in its ``{key}`` fields (deep-linear's ``{epochs}``:
    a fixed "1000 epochs" was wrong for the tiny size's 100); a key the setting lacks leaves its field as written."""
    title = module.TITLE
    if "{" not in title:
        return title
    return re.sub(r"\{(\w+)\}", lambda m: str(setting[m.group(1)]) if m.group(1) in setting else m.group(0), title)


def _raised_by_h5py(exc):
    """True when ``exc`` was raised inside h5py (reading the file), not by the drawing code."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        return False
    parts = tb.tb_frame.f_code.co_filename.replace("\\", "/").split("/")  # (h5py's Cython frames: "h5py/h5o.pyx")
    return "h5py" in parts[:-1]


class FigureStore:
    """A figure store opened for reading (:func:`open_figure`): what a figure computed, without drawing it.

    Attributes
    ----------
    path : str
    name, title, size : str
        The figure (a key of :data:`FIGURES`), its title and the size it was computed at.
    setting : dict
        The data setting of its title (n, d, s, μ, σ, α, horizon, tolerance, reps, seeds).
    claims : dict
        The numbers the figure's claims rest on, and the status counts of its runs (``dlnm figure`` prints them).
    sweeps : tuple of str
        The sweeps it keeps: ``fs.sweep(name)`` is a :class:`~dlnmomentum.Sweep`.
    datasets : dict
        Its other datasets (curves, trajectories): name -> shape; ``fs[name]`` reads one.
    """

    def __init__(self, path):
        self.path = as_store_path(path)
        f, _ = open_h5(self.path)
        with f, reading(self.path):
            self.name, self.size, self.setting, self.claims = common.read_attrs(f)
            self.created = attr_str(f.attrs.get("created", ""))
            self.package_version = attr_str(f.attrs.get("package_version", ""))
            groups = []  # every sweep, also one nested in a group (data-mean's "mu=0/mgd")
            f.visititems(lambda key, obj: groups.append(key) if isinstance(obj, h5py.Group) and "dims" in obj.attrs
                         else None)
            self.sweeps = tuple(groups)
            self.datasets = {}
            f.visititems(lambda key, obj: self.datasets.__setitem__(key, obj.shape)
                         if isinstance(obj, h5py.Dataset) and not obj.is_scale
                         and not any(key.startswith(g + "/") for g in self.sweeps) else None)
        module = FIGURES.get(self.name)
        self.title = figure_title(module, self.setting) if module is not None else self.name

    def sweep(self, name):
        """The sweep ``name`` (one of :attr:`sweeps`) as a :class:`~dlnmomentum.Sweep`."""
        if name not in self.sweeps:
            raise KeyError(f"figure store {self.path} has no sweep {name!r}; sweeps: {', '.join(self.sweeps)}")
        f, _ = open_h5(self.path)
        with f, reading(self.path, f"sweep {name}"):
            return common.get_sweep(f, name)

    def __getitem__(self, name):
        """The dataset ``name`` (one of :attr:`datasets`) as an array."""
        if name not in self.datasets:
            raise KeyError(f"figure store {self.path} has no dataset {name!r}; datasets: {', '.join(self.datasets)}")
        f, _ = open_h5(self.path)
        with f, reading(self.path, f"dataset {name}"):
            return f[name][()]

    def plot(self, out=None):
        """Draw it (:func:`plot_store`); returns the image paths."""
        return plot_store(self.path, out)

    def __repr__(self):
        return (f"FigureStore({self.path!r}, figure={self.name!r}, size={self.size!r}, "
                f"sweeps={list(self.sweeps)}, datasets={len(self.datasets)})")

    def to_dict(self):
        """What :meth:`summary` says, as a JSON-able dict (``dlnm inspect --json`` of a figure store)."""
        sweeps = {}
        for name in self.sweeps:
            sw = self.sweep(name)
            sweeps[name] = {"dims": list(sw.dims), "shape": list(sw.shape), "done": int(sw.done.sum()),
                            "points": int(sw.done.size), "status": common.status_counts(sw)}
        return {"kind": "figure", "path": self.path, "file_size": os.path.getsize(self.path), "figure": self.name,
                "title": self.title, "size": self.size, "created": self.created,
                "package_version": self.package_version, "setting": self.setting, "claims": self.claims,
                "sweeps": sweeps, "datasets": {k: list(v) for k, v in self.datasets.items()}}

    def summary_lines(self):
        """The lines of :meth:`summary` (``dlnm inspect`` of a figure store)."""
        lines = [f"figure       : {self.name} ({self.title})  ({self.path})",
                 f"size         : {self.size}, created {self.created} by dlnmomentum {self.package_version}",
                 f"setting      : {common.setting_text(self.setting)}"]
        for name in self.sweeps:
            sw = self.sweep(name)
            sizes = " x ".join(f"{d}={n}" for d, n in zip(sw.dims, sw.shape, strict=True))
            lines.append(f"sweep        : {name} ({sw.config.get('kind', '?')}, {sizes}): {common.status_line(sw)}")
        if self.datasets:
            lines.append("datasets     : " + ", ".join(f"{k} {tuple(v)}" for k, v in self.datasets.items()))
        lines.append("claims       :")
        lines.extend(f"  {key}: {json.dumps(value, default=str)}" for key, value in self.claims.items())
        lines.append(f"file         : {os.path.getsize(self.path) / 1024:.1f} KiB; "
                     f"`{command('plot', self.path)}` draws it")
        return lines

    def summary(self):
        return "\n".join(self.summary_lines())


def open_figure(path):
    """Open the figure store at ``path`` for reading (:class:`FigureStore`): its setting, claims, sweeps and data.

    The reader of figure stores, as :func:`dlnmomentum.open_store` is of run stores and
    :func:`dlnmomentum.open_sweep` of sweep stores; another kind of file is an error naming its reader.
    """
    return FigureStore(path)


def figure(name, size="quick", out="figures", overwrite=False, log=print, spec=None):
    """Compute (or reuse) figure ``name`` and draw it; returns ``(store, images, summary)``.

    An existing store of the same figure, size (and ``spec``, see :func:`compute_figure`) is drawn again
    without recomputing anything.
    """
    module = figure_module(name)
    common.check_size(size)
    overwrite = as_bool("overwrite", overwrite)
    _check_out(out)
    _spec_kwargs(module, name, spec)  # (checked before anything is read or run)
    path = os.path.join(out, f"{name}.h5")
    if os.path.exists(path) and not overwrite:
        h5, _ = open_h5(path)
        with h5, reading(path):
            stored_name, stored_size, _, summary = common.read_attrs(h5)
        wanted = spec or getattr(module, "DEFAULT_SPEC", None)
        stored_spec = summary.get("spec", "package-0.6" if hasattr(module, "SPECS") else None)
        if stored_size != size or stored_name != name or stored_spec != wanted:
            held = f"{stored_name} at size {stored_size!r}" + (f" on {stored_spec!r}" if stored_spec else "")
            asked = f"{size!r}" + (f" on {wanted!r}" if wanted else "")
            raise ValueError(f"{path} holds {held}, not {asked}: use another --out or --overwrite")
        log(f"{name} [{size}]: reusing {path}")
    else:
        path, summary = compute_figure(name, size, out, overwrite, log, spec)
    return path, plot_store(path), summary


def reproduce(size="quick", out="figures", overwrite=False, log=print, names=None):
    """Every figure of :data:`FIGURES` (diagonal and small networks) at ``size`` (see :func:`figure`), or those
    in ``names``; returns ``{name: (store, images, summary)}``."""
    if names is None:
        names = list(FIGURES)
    elif isinstance(names, str) or not all(isinstance(n, str) for n in names) or not len(names):
        raise TypeError(f"names must be a non-empty list of figure names (None: every figure), got {names!r}")
    for name in names:
        figure_module(name)  # (every name checked before the first figure runs)
    return {name: figure(name, size, out, overwrite, log) for name in names}


def _check_out(out):
    """``out`` is a folder path (created if missing): a str or path-like, not empty, not an existing file."""
    if not isinstance(out, (str, os.PathLike)) or not os.fspath(out):
        raise TypeError(f"out must be a folder path (str), got {out!r}")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ParameterValueError(f"out must be a folder: {os.fspath(out)} is a file", "out")
