"""The paper's figures: computed into an HDF5 figure store, drawn from the store alone.

Diagonal linear networks (``dlnm figure NAME``, ``dlnm reproduce``; :data:`FIGURES`):

==================  =================================================================================
``quadratic``       Figure 1: (M)GD over (M)GF on a 2-D quadratic; the acceleration rule
``mgf-lambda``      Figure 3: MGF(λ) test loss and ‖Δ∞‖₂ against λ, no-crossing band, small-λ formulas
``mgd-grid``        Figure 4: MGD heatmaps over (β, γ) with λ level lines and marks
``mgd-vs-mgf``      Figure 7: MGD on constant-λ lines against MGF(λ)
``mgf-triple``      Figure 8: MGF(λ) with the normalised distance to θ_GF(Δ∞)
``data-mean``       Figure 9: the data mean μ ∈ {0, 0.5, 1, 1.5}
``lambda-collapse``  grid points against λ and λ_central (Appendix A), with the within-bin spreads
``crossings``       the normalised distance and |θ̃0| against the number of sign changes
``teacher-student``  Figure 2: a ReLU student over (γ, β), test loss at train loss 1e-5
``deep-linear``     Figure 6: a deep linear network over (γ, β), losses after 1000 epochs
==================  =================================================================================

A figure module has ``NAME``, ``TITLE``, ``SIZES``, ``FIGSIZE`` (inches), ``compute(h5, size, log, [parts])`` (writes
everything into the open store, returns the summary of its claims) and ``plot(h5, fig)`` (draws from
the store only). :mod:`.networks` holds the λ measure of the network figures and their earlier functions.
"""

import inspect
import os

import h5py

from . import (
    common,
    crossings,
    data_mean,
    deep_linear,
    lambda_collapse,
    mgd_grid,
    mgd_vs_mgf,
    mgf_lambda,
    mgf_triple,
    quadratic,
    teacher_student,
)

#: The figure modules by name, in the order of ``dlnm reproduce``.
FIGURES = {m.NAME: m for m in (quadratic, mgf_lambda, mgd_grid, mgd_vs_mgf, mgf_triple, data_mean,
                               lambda_collapse, crossings, teacher_student, deep_linear)}


def figure_module(name):
    try:
        return FIGURES[name]
    except KeyError:
        raise ValueError(f"figure must be one of {', '.join(FIGURES)}; got {name!r}") from None


def compute_figure(name, size="quick", out="figures", overwrite=False, log=print):
    """Compute figure ``name`` at ``size`` into ``<out>/<name>.h5``; returns ``(store path, summary)``.

    Sweeps run into resumable stores under ``<out>/parts`` (an interrupted figure continues where it
    stopped). An existing figure store is kept unless ``overwrite``.
    """
    module = figure_module(name)
    common.check_size(size)
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, f"{name}.h5")
    f, tmp = common.new_store(path, name, size, overwrite)
    try:
        kwargs = {"log": log}
        if "parts" in inspect.signature(module.compute).parameters:
            kwargs["parts"] = os.path.join(out, "parts")
        log(f"{name} [{size}]: computing")
        summary = module.compute(f, size, **kwargs)
        setting = module.setting(size) if hasattr(module, "setting") else {}
    except BaseException:
        f.close()
        os.remove(tmp)
        raise
    common.finish_store(f, tmp, path, setting, summary)
    return path, summary


def plot_store(path, out=None):
    """Draw the figure stored at ``path`` (PNG and PDF next to it, or in ``out``); returns the image paths."""
    plt = common.pyplot()
    with h5py.File(path, "r") as h5:
        name, size, setting, _ = common.read_attrs(h5)
        module = figure_module(name)
        fig = plt.figure(figsize=getattr(module, "FIGSIZE", (10.0, 5.0)), constrained_layout=True)
        try:
            module.plot(h5, fig)
            if setting:  # (a module without a setting function titles its figure itself: quadratic)
                common.suptitle(fig, module.TITLE, setting, size)
            return common.save(fig, out or os.path.dirname(os.path.abspath(path)), name)
        finally:
            plt.close(fig)


def figure(name, size="quick", out="figures", overwrite=False, log=print):
    """Compute (or reuse) figure ``name`` and draw it; returns ``(store, images, summary)``.

    An existing store of the same figure and size is drawn again without recomputing anything.
    """
    path = os.path.join(out, f"{name}.h5")
    if os.path.exists(path) and not overwrite:
        with h5py.File(path, "r") as h5:
            stored_name, stored_size, _, summary = common.read_attrs(h5)
        if stored_size != size or stored_name != name:
            raise ValueError(f"{path} holds {stored_name} at size {stored_size!r}, not {size!r}: use another --out "
                             "or --overwrite")
        log(f"{name} [{size}]: reusing {path}")
    else:
        path, summary = compute_figure(name, size, out, overwrite, log)
    return path, plot_store(path), summary


def reproduce(size="quick", out="figures", overwrite=False, log=print, names=None):
    """Every diagonal-network figure at ``size`` (see :func:`figure`); returns ``{name: (store, images, summary)}``."""
    return {name: figure(name, size, out, overwrite, log) for name in (names or FIGURES)}
