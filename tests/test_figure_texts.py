"""The texts of every figure, not its pixels: axis labels, legends, λ level-line labels, text boxes, counts.

Every figure of :data:`dlnmomentum.figures.FIGURES` is computed once at ``tiny`` size into a temporary folder
and drawn (``fig.canvas.draw()``: the layout done, every text placed) as :func:`dlnmomentum.figures.plot_store`
draws it. The checks read the drawn matplotlib objects:

* every axes (not a colour bar) has an x and a y label (a twin shares its partner's x label), and no label,
  title or legend entry is a raw identifier (an underscore outside math, ``delta inf norm``);
* every legend holds exactly the entries expected of its figure, in a readable font;
* every λ = γ/(1-β)² level line drawn over a heatmap (found by its geometry: γ/(1-β)² constant along it) has
  one label naming its λ, placed on it, and no two labels overlap;
* text boxes and legends of Figure 1 cover none of its curves or markers;
* ``mgd-vs-mgf``'s legend counts the diverged runs the stored summary counts (on a store where runs and
  (β, λ) points differ);
* log axes have readable decade ticks; ``crossings`` draws the sign changes without an offset.
"""

import json
import re
import shutil

import h5py
import numpy as np
import pytest

from dlnmomentum.figures import FIGURES, common, compute_figure, designs, figure_title, mgf_lambda
from dlnmomentum.status import Status
from dlnmomentum.store.files import text_crc

#: Names of sweep fields written out that a label must not show (the label table has the real names).
RAW = ("delta inf", "l1 norm", "normalized distance", "theta0", "lam central", "lambda central", "prediction gap",
       "+ 0.5")
#: Smallest legend font (points) read at the saved 130 dpi.
MIN_LEGEND_FONT = 7.0


# -- drawing each tiny figure once ----------------------------------------------------------------------

@pytest.fixture(scope="session")
def tiny_stores(tmp_path_factory):
    """Every figure's store at tiny size (sweeps shared through one parts folder: about 10 s)."""
    out = tmp_path_factory.mktemp("figure-texts")
    for name in FIGURES:
        compute_figure(name, "tiny", str(out), log=lambda *args: None)
    return out


def draw(path):
    """The figure of the store at ``path``, drawn as :func:`dlnmomentum.figures.plot_store` draws it."""
    plt = common.pyplot()
    with h5py.File(path, "r") as h5:
        name, size, setting, _ = common.read_attrs(h5)
        module = FIGURES[name]
        fig = plt.figure(figsize=getattr(module, "FIGSIZE", (10.0, 5.0)), constrained_layout=True)
        module.plot(h5, fig)
        if setting:
            common.suptitle(fig, figure_title(module, setting), setting, size)
    fig.canvas.draw()
    return fig


@pytest.fixture(scope="session")
def drawn(tiny_stores):
    """name -> the drawn figure, each drawn once (closed at the end of the session)."""
    plt = common.pyplot()
    figs = {}

    def get(name):
        if name not in figs:
            figs[name] = draw(tiny_stores / f"{name}.h5")
        return figs[name]

    yield get
    for fig in figs.values():
        plt.close(fig)


def _summary(path):
    with h5py.File(path, "r") as h5:
        return common.read_attrs(h5)[3]


def _plain(text):
    """``text`` without its mathtext parts (``$x_{4k}$`` is math, not an identifier)."""
    return re.sub(r"\$[^$]*\$", "", text)


def _raw(text):
    plain = _plain(text)
    return "_" in plain or any(word in plain.lower() for word in RAW)


def _plot_axes(fig):
    return [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]


def _legends(fig):
    """Every legend: those of the axes in order, then the figure's."""
    return [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)


# -- labels -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(FIGURES))
def test_every_axes_is_labelled_without_raw_identifiers(drawn, name):
    fig = drawn(name)
    axes = _plot_axes(fig)
    assert axes
    for ax in axes:
        for which in ("x", "y"):
            label = getattr(ax, f"get_{which}label")()
            if not label.strip():  # a twin (mgf-lambda's second y axis) shares its partner's label
                shared = ax.get_shared_x_axes() if which == "x" else ax.get_shared_y_axes()
                partners = [o for o in axes if o is not ax and shared.joined(ax, o)]
                label = next((getattr(o, f"get_{which}label")() for o in partners
                              if getattr(o, f"get_{which}label")().strip()), "")
            assert label.strip(), (name, which, ax.get_title())
            assert not _raw(label), (name, which, label)
        assert not _raw(ax.get_title()), (name, ax.get_title())
    for ax in fig.axes:  # colour bars too
        for label in (ax.get_xlabel(), ax.get_ylabel()):
            assert not _raw(label), (name, label)


# -- legends ------------------------------------------------------------------------------------------

NOT_CONVERGED = rf"^not at train loss ≤ {common.short_number(designs.FIT_TOL)}$"
OFF_SCALE = r"^not converged, off scale: ▲▼ on the frame \(value beside\)$"
OUTLIER = r"^converged, > 1 decade off MGF\(λ\): △▽ on the frame \(value beside\)$"


def _betas(path, group):
    with h5py.File(path, "r") as h5:
        return [float(b) for b in h5[group]["beta"][()]]


def expected_legends(name, path):
    """Each legend of figure ``name``: ``[(pattern, required), ...]``; every entry matches one pattern."""
    band = "^" + re.escape(mgf_lambda.BAND_LABEL) + "$"
    if name == "quadratic":
        return [[(r"^GF \(exact\)$", True), (r"^GD\(γ\), γ = 0\.01: ", True), (r"^GD\(4γ\), γ = 0\.04: ", True)],
                [(r"^MGF\(λ = 1\) \(exact\)$", True), (r"^MGD\(γ, β\), λ = 1: ", True),
                 (r"^MGD\(4γ, 1-2\(1-β\)\), λ = 1: ", True), (r"^MGD\(4γ, β²\), λ = 1\.11: ", True)],
                [(r"^GD\(γ\): γ=0\.01, β=0$", True), (r"^GD\(4γ\): γ=0\.04, β=0$", True),
                 (r"^MGD\(γ, β\): γ=0\.01, β=0\.9$", True), (r"^MGD\(4γ, β²\): γ=0\.04, β=0\.81$", True),
                 (r"^MGD\(4γ, 1-2\(1-β\)\): γ=0\.04, β=0\.8$", True), (r"^MGD\(γ, β\) at 2k$", True),
                 (r"^GD\(γ\) at 4k$", True)]]
    if name == "mgf-lambda":
        small = re.escape(f", λ ≤ {mgf_lambda.SMALL_LAM_MAX:g}") + "$"
        return [[("^test loss$", True), ("^‖Δ∞‖₂$", True), (r"^App\. C\.4: Δ∞ ≈ Δ₀·exp\(-2λ∫∇L²\)" + small, True),
                 (r"^main text: Δ∞² ≈ Δ₀²·exp\(-2λ∫∇L²\)" + small, True), (band, False), (NOT_CONVERGED, False)]]
    if name == "mgd-grid":
        return [[("^no sign change$", False), (NOT_CONVERGED, False)]]
    if name == "mgd-mgf-grid":
        return [[(NOT_CONVERGED, False), ("^no difference: " + NOT_CONVERGED[1:], False)]]
    if name in ("mgd-vs-mgf", "data-mean"):
        group = "mgd" if name == "mgd-vs-mgf" else "mu=1/mgd"
        entries = [(r"^MGF\(λ\)$", True)] + [(f"^MGD, β = {b:g}$", True) for b in _betas(path, group)]
        entries += [(NOT_CONVERGED, False), (OFF_SCALE, False), (OUTLIER, False)]
        if name == "data-mean":
            entries.append((r"^GF \(λ = 0\)$", True))
        return [entries]
    if name == "mgf-triple":
        return [[(band, False), (NOT_CONVERGED, False), (r"^the paper's bound 0\.01$", True)]]
    if name == "lambda-collapse":
        return [[(NOT_CONVERGED, False), (r"^MGF\(λ\)$", True)]]
    if name == "crossings":
        runs = [f"^{re.escape(what)}, {how}$" for what in ("MGD grid", "MGF λ line")
                for how in ("no sign change", "sign changes")]
        return [[(p, False) for p in runs] + [(r"^the paper's bound 0\.01$", True)],
                [(r"^α² \(the bound without sign changes\)$", True)]]
    return []  # the network heatmaps: no legend


@pytest.mark.parametrize("name", list(FIGURES))
def test_legends_hold_the_expected_readable_entries(drawn, tiny_stores, name):
    fig = drawn(name)
    legends = _legends(fig)
    expected = expected_legends(name, tiny_stores / f"{name}.h5")
    if len(legends) < len(expected):  # a legend of marks only (mgd-grid's) is left out when nothing is marked
        expected = [spec for spec in expected if any(required for _, required in spec)]
    assert len(legends) == len(expected), (name, [[t.get_text() for t in leg.get_texts()] for leg in legends])
    for legend, patterns in zip(legends, expected, strict=True):
        texts = [t.get_text() for t in legend.get_texts()]
        assert texts and all(t.strip() for t in texts), (name, texts)
        for text in texts:
            assert not _raw(text), (name, text)
            matched = [p for p, _ in patterns if re.search(p, text)]
            assert len(matched) == 1, (name, text, "matches", matched)
        for pattern, required in patterns:
            if required:
                assert any(re.search(pattern, t) for t in texts), (name, pattern, texts)
        assert len(set(texts)) == len(texts), (name, texts)
        for t in legend.get_texts() + ([legend.get_title()] if legend.get_title().get_text() else []):
            assert t.get_fontsize() >= MIN_LEGEND_FONT, (name, t.get_text(), t.get_fontsize())
    for ax in _plot_axes(fig):  # a shaded band (axvspan) is explained in a legend
        for patch in ax.patches:
            assert any(patch.get_label() in [t.get_text() for t in leg.get_texts()] for leg in legends), \
                (name, patch.get_label())


# -- λ level lines ------------------------------------------------------------------------------------

def _lam(x, y):
    return np.asarray(x, dtype=float) / (1.0 - np.asarray(y, dtype=float)) ** 2


def level_lines(ax):
    """λ of every λ = γ/(1-β)² level line drawn in ``ax`` (a line, or a contour level with a segment)."""
    from matplotlib.contour import ContourSet

    levels = []
    for line in ax.lines:
        if not line.get_visible():
            continue
        x, y = (np.asarray(v, dtype=float) for v in line.get_data())
        keep = np.isfinite(x) & np.isfinite(y) & (y < 1)
        if keep.sum() >= 2:
            lam = _lam(x[keep], y[keep])
            if np.ptp(np.log(lam)) < 1e-9:
                levels.append(float(lam[0]))
    for cs in ax.collections:
        if isinstance(cs, ContourSet):
            levels += [float(v) for v, segs in zip(cs.levels, cs.allsegs, strict=True)
                       if any(len(s) >= 2 for s in segs)]
    return levels


def _lambda_texts(ax):
    from matplotlib.text import Text

    out = []
    for t in ax.findobj(Text):
        m = re.fullmatch(r"\s*λ\s*=\s*([0-9.eE+-]+)\s*", t.get_text())
        if m and t.get_visible():
            out.append((float(m.group(1)), t))
    return out


HEATMAPS = [name for name in FIGURES if name in ("mgd-grid", "mgd-mgf-grid", "teacher-student", "deep-linear")]


@pytest.mark.parametrize("name", HEATMAPS)
def test_every_level_line_has_one_label_on_it_and_labels_do_not_overlap(drawn, name):
    from matplotlib.collections import QuadMesh

    fig = drawn(name)
    renderer = fig.canvas.get_renderer()
    heatmaps = [ax for ax in _plot_axes(fig) if any(isinstance(c, QuadMesh) for c in ax.collections)]
    assert heatmaps
    for ax in heatmaps:
        levels = level_lines(ax)
        assert len(levels) >= 2, (name, levels)
        texts = _lambda_texts(ax)
        for lam in levels:
            labels = [t for value, t in texts if np.isclose(value, lam, rtol=0.05)]
            assert len(labels) == 1, (name, lam, [t.get_text() for _, t in texts])
            x, y = labels[0].get_position()
            assert np.isclose(_lam(x, y), lam, rtol=0.05), (name, lam, (x, y))  # on its line
        assert len(texts) == len(levels), (name, levels, [t.get_text() for _, t in texts])
        boxes = [t.get_window_extent(renderer) for _, t in texts]
        frame = ax.bbox
        for i, box in enumerate(boxes):
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1, \
                (name, texts[i][1].get_text())
            for j in range(i):
                assert not box.overlaps(boxes[j]), (name, texts[i][1].get_text(), texts[j][1].get_text())


# -- Figure 1: boxes clear of the data ------------------------------------------------------------------

def test_quadratic_text_boxes_and_legends_cover_no_curve(drawn):
    from matplotlib.text import Text

    fig = drawn("quadratic")
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_bbox_patch().get_window_extent(renderer)) for t in fig.findobj(Text)
             if t.get_bbox_patch() is not None and t.get_visible() and t.get_text().strip()]
    boxes += [(" / ".join(t.get_text() for t in leg.get_texts()), leg.get_window_extent(renderer))
              for leg in _legends(fig)]
    assert len(boxes) >= 4  # the claims' box and three legends
    for ax in _plot_axes(fig):
        for line in ax.lines:
            xy = np.column_stack(line.get_data())
            pts = line.get_transform().transform(xy)
            pts = pts[np.isfinite(pts).all(axis=1)]
            for what, box in boxes:
                inside = ((pts[:, 0] > box.x0) & (pts[:, 0] < box.x1) & (pts[:, 1] > box.y0) & (pts[:, 1] < box.y1))
                assert not inside.any(), (what[:60], line.get_label(), int(inside.sum()))


# -- counts: the legend says what the summary counts ----------------------------------------------------

def _legend_count(fig):
    (legend,) = _legends(fig)
    m = re.search(r"diverged runs: (\d+) of (\d+)", legend.get_title().get_text())
    assert m, legend.get_title().get_text()
    return int(m.group(1)), int(m.group(2))


def test_mgd_vs_mgf_legend_counts_the_diverged_runs_of_the_summary(drawn, tiny_stores, tmp_path):
    summary = _summary(tiny_stores / "mgd-vs-mgf.h5")["mgd"]
    assert _legend_count(drawn("mgd-vs-mgf")) == (summary["status"].get("diverged", 0), summary["points"])

    # two replications, one point with both diverged and one with one of two: 3 runs in 2 (β, λ) points
    path = tmp_path / "mgd-vs-mgf.h5"
    shutil.copy(tiny_stores / "mgd-vs-mgf.h5", path)
    with h5py.File(path, "r+") as h5:
        sw = common.get_sweep(h5, "mgd")
        data = {k: np.concatenate([v, v]) for k, v in sw.data.items() if k not in sw.dims}
        status = data["status"]
        status[status == Status.DIVERGED] = Status.MAX_STEPS  # (its fields stay NaN: not drawn either way)
        status[:, 0, 0] = Status.DIVERGED
        status[1, 1, 1] = Status.DIVERGED
        coords = dict(sw.coords, rep=np.arange(2)) if "rep" in sw.coords else dict(sw.coords)
        doubled = type(sw)(sw.dims, coords, data, np.concatenate([sw.done, sw.done]), sw.config)
        del h5["mgd"]
        common.put_sweep(h5, "mgd", doubled)
        stored = json.loads(h5.attrs["summary"])
        stored["mgd"] = common.summarize({"mgd": doubled}, designs.FIT_TOL)["mgd"]
        h5.attrs["summary"] = json.dumps(stored)
        h5.attrs["summary_crc32"] = text_crc(h5.attrs["summary"])  # (as the package writes it: guarded text)
    assert stored["mgd"]["status"]["diverged"] == 3
    fig = draw(path)
    try:
        assert _legend_count(fig) == (3, stored["mgd"]["points"])
    finally:
        common.pyplot().close(fig)


# -- axes and curves --------------------------------------------------------------------------------------

NICE_STRIDES = (1, 2, 3, 4, 5, 10, 20, 25, 50, 100)


@pytest.mark.parametrize("name", list(FIGURES))
def test_log_axes_have_readable_decade_ticks(drawn, name):
    for ax in _plot_axes(drawn(name)):
        for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
            if axis.get_scale() != "log":
                continue
            lo, hi = sorted(lim)
            ticks = np.array([t for t in axis.get_majorticklocs() if lo <= t <= hi])
            exps = np.log10(ticks)
            decades = exps[np.isclose(exps, np.round(exps))]
            if decades.size >= 2:
                strides = set(np.round(np.diff(decades)).astype(int).tolist())
                assert strides <= set(NICE_STRIDES), (name, ax.get_title(), strides)


def test_crossings_counts_sign_changes_without_an_offset(drawn):
    fig = drawn("crossings")
    for ax in _plot_axes(fig):
        assert ax.get_xscale() in ("symlog", "linear"), ax.get_xscale()
        assert "sign changes" in ax.get_xlabel() and "+" not in _plain(ax.get_xlabel())
        xs = np.concatenate([np.asarray(c.get_offsets())[:, 0] for c in ax.collections if len(c.get_offsets())])
        assert np.all(xs == np.round(xs)) and xs.min() >= 0  # the counts themselves


def test_mgf_lambda_small_lambda_curves_stay_in_their_range(drawn, tiny_stores):
    fig = drawn("mgf-lambda")
    curves = [line for ax in fig.axes for line in ax.lines if "exp(-2λ" in line.get_label()]
    assert len(curves) == 2
    for line in curves:
        assert np.max(line.get_xdata()) <= mgf_lambda.SMALL_LAM_MAX
        assert f"λ ≤ {mgf_lambda.SMALL_LAM_MAX:g}" in line.get_label()


def test_lambda_collapse_defines_lambda_central(drawn):
    labels = [ax.get_xlabel() for ax in _plot_axes(drawn("lambda-collapse"))]
    central = [label for label in labels if "central" in label]
    assert len(central) == 2 and all("(1+β)γ/(2(1-β)²)" in label for label in central), labels


def test_setting_lines_read_as_words():
    """The titles' setting lines: no raw identifiers (``stop_tol=``, ``t_max=``) and plain exponents."""
    from dlnmomentum.figures import FIGURES, common

    for name, module in FIGURES.items():
        if not hasattr(module, "setting"):
            continue
        for size in module.SIZES:
            text = common.setting_text(module.setting(size))
            assert "_" not in text and "e+" not in text and "e-0" not in text, (name, size, text)


def test_a_drawing_bug_is_not_reported_as_a_damaged_store(tmp_path, monkeypatch):
    """``dlnm plot`` used to call any ``ValueError`` raised while drawing "the file is damaged"; an error raised
    by HDF5 reading the store still is one, naming the file."""
    import h5py

    from dlnmomentum.figures import FIGURES, compute_figure, plot_store
    from dlnmomentum.store.files import StoreCorruptError

    path, _ = compute_figure("quadratic", "tiny", out=str(tmp_path), log=lambda *a: None)

    def broken(h5, fig):
        raise ValueError("a bug in the drawing code")

    monkeypatch.setattr(FIGURES["quadratic"], "plot", broken)
    with pytest.raises(ValueError, match="a bug in the drawing code"):
        plot_store(path)

    def reads_a_missing_dataset(h5, fig):
        h5["no such dataset"]

    monkeypatch.setattr(FIGURES["quadratic"], "plot", reads_a_missing_dataset)
    with pytest.raises(StoreCorruptError, match="quadratic.h5"):
        plot_store(path)
    with h5py.File(path, "r") as f:  # (the store itself is fine)
        assert f.attrs["kind"] == "figure"


@pytest.mark.parametrize("name", list(FIGURES))
def test_the_title_fits_in_the_figure(drawn, name):
    """The title, its setting line, the axes' titles and labels lie inside the figure: a long setting line used to
    run off both sides."""
    fig = drawn(name)
    box = fig.bbox
    renderer = fig.canvas.get_renderer()
    texts = [fig._suptitle, *fig.texts]
    for ax in _plot_axes(fig):
        texts += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
    for text in texts:
        if text is None or not text.get_visible() or not str(text.get_text()).strip():
            continue
        ext = text.get_window_extent(renderer)
        assert ext.x0 >= box.x0 - 1 and ext.x1 <= box.x1 + 1, (name, text.get_text(), ext, box)


# -- heatmaps, legends and stores of the figures (probed 2026-11-26) ---------------------------------------------

def test_heatmap_cells_are_centred_on_their_log_gamma():
    """``shading="nearest"`` took linear midpoints of log-spaced γ: at tiny size (γ = 1e-2, 3.16e-2, 1e-1) the
    edges were [-0.0008, 0.021, 0.066, 0.134], so the γ = 1e-2 column and its marks were off the axes."""
    gammas = np.array([1e-2, 10 ** -1.5, 1e-1])
    edges = common.cell_edges(gammas, log=True)
    assert np.allclose(np.diff(np.log10(edges)), 0.5) and np.allclose(np.log10(edges[[0, -1]]), [-2.25, -0.75])
    assert np.allclose(common.cell_edges([0.0, 0.45, 0.9]), [-0.225, 0.225, 0.675, 1.125])
    fig = common.pyplot().figure()
    try:
        ax = fig.add_subplot()
        common.heatmap(ax, gammas, np.array([0.0, 0.45, 0.9]), np.ones((3, 3)), "z")
        lo, hi = ax.get_xlim()
        assert lo < gammas[0] and gammas[-1] < hi
    finally:
        common.pyplot().close(fig)


@pytest.mark.parametrize("name", ["mgd-grid", "mgd-mgf-grid", "teacher-student", "deep-linear"])
def test_every_grid_column_is_inside_the_axes(drawn, tiny_stores, name):
    with h5py.File(tiny_stores / f"{name}.h5", "r") as h5:
        group = next(k for k in h5 if isinstance(h5[k], h5py.Group) and "dims" in h5[k].attrs)
        gammas = h5[group]["gamma"][()]
    for ax in drawn(name).axes:
        if ax.get_xscale() == "log" and ax.get_xlabel() == "step size γ":
            lo, hi = ax.get_xlim()
            assert lo < gammas.min() and gammas.max() < hi, (name, ax.get_xlim(), gammas)


def test_mgd_mgf_grid_compares_on_one_scale_and_greys_what_it_cannot_compare(drawn):
    """The MGD and MGF panels shared no colour scale; the difference panel's missing cells were white, the colour
    of 'MGD = MGF' on its red-blue scale."""
    fig = drawn("mgd-mgf-grid")
    meshes = [ax.collections[0] for ax in fig.axes if ax.get_xlabel() == "step size γ"]
    assert meshes[0].get_clim() == meshes[1].get_clim()
    bad = meshes[2].get_cmap().get_bad()
    assert tuple(bad[:3]) != (1.0, 1.0, 1.0) and bad[3] > 0


def test_data_mean_legend_counts_the_diverged_runs_per_mu(drawn, tiny_stores):
    (legend,) = _legends(drawn("data-mean"))
    title = legend.get_title().get_text()
    with h5py.File(tiny_stores / "data-mean.h5", "r") as h5:
        for key in (k for k in h5 if k.startswith("mu=")):
            status = h5[key]["mgd"]["status"][()]
            mu = key.split("=")[1]
            assert f"μ = {mu}: {int((status == Status.DIVERGED).sum())} of {status.size}" in title, title


def test_a_figure_store_lists_its_nested_sweeps(tiny_stores):
    from dlnmomentum.figures import open_figure

    fs = open_figure(str(tiny_stores / "data-mean.h5"))
    assert "mu=0/mgf" in fs.sweeps and fs.sweep("mu=0/mgf").dims == ("rep", "lam")
    assert not any(key.startswith("mu=") for key in fs.datasets)  # a sweep's arrays are not listed as data


@pytest.mark.parametrize("name", ["mgd-grid", "mgd-mgf-grid"])
def test_level_labels_hide_no_mark(drawn, name):
    """A λ label placed over a point covered its cross (the point looked converged)."""
    from matplotlib.collections import PathCollection

    fig = drawn(name)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = [t for t in ax.texts if t.get_visible() and t.get_text().startswith("λ =")]
        marks = [ax.transData.transform(np.asarray(c.get_offsets(), dtype=float)) for c in ax.collections
                 if isinstance(c, PathCollection) and len(c.get_offsets())]
        if not labels or not marks:
            continue
        marks = np.concatenate(marks)
        for t in labels:
            box = t.get_bbox_patch().get_window_extent(renderer)
            inside = ((marks[:, 0] >= box.x0) & (marks[:, 0] <= box.x1)
                      & (marks[:, 1] >= box.y0) & (marks[:, 1] <= box.y1))
            assert not inside.any(), (name, t.get_text(), marks[inside])


# -- counts, axes, titles and marks (probed 2026-11-27: dlnm reproduce --quick) -------------------------------------

def test_status_line_counts_runs_and_the_tolerance_the_marks_use():
    """It said "288 points: converged 39" while counting runs (data sets × points) and calling "converged" the stop
    tolerance 1e-20; the figures mark reaching 1e-8 at every data set. Counts checked against plain NumPy."""
    from dlnmomentum.sweeps.result import Sweep

    rng = np.random.default_rng(3)
    status = rng.choice([int(Status.CONVERGED), int(Status.MAX_STEPS)], size=(2, 3, 4))
    loss = np.where(status == Status.CONVERGED, 1e-21, 10.0 ** rng.uniform(-10, -6, size=(2, 3, 4)))
    sw = Sweep(("rep", "beta", "gamma"), {"rep": np.arange(2), "beta": np.arange(3.0) / 4, "gamma": np.ones(4)},
               {"status": status, "train_loss": loss}, np.ones((2, 3, 4), bool), {"tol": 1e-20, "theory_tol": 1e-8})
    reached = (status == Status.CONVERGED) | (loss <= 1e-8)
    text = common.status_line(sw)
    assert text.startswith("24 runs (2 data sets × 12 points): ")
    assert f"converged (train loss ≤ 1e-20) {int((status == Status.CONVERGED).sum())}" in text
    assert (f"reached train loss ≤ 1e-8: {int(reached.sum())} runs, at {int(reached.all(axis=0).sum())} of 12 "
            "points in every data set") in text


def test_heatmap_beta_axis_stays_in_0_1_and_minor_gamma_ticks_are_unlabelled(drawn):
    from matplotlib.ticker import NullFormatter

    fig = common.pyplot().figure()
    try:
        ax = fig.add_subplot()
        common.heatmap(ax, np.array([1e-2, 3e-2, 1e-1]), np.array([0.0, 0.45, 0.9]), np.ones((3, 3)), "z")
        assert ax.get_ylim() == (0.0, 1.0), ax.get_ylim()  # the outer cells reached -0.225 and 1.125
    finally:
        common.pyplot().close(fig)
    for name in ("teacher-student", "deep-linear", "mgd-grid"):
        for ax in _plot_axes(drawn(name)):
            if ax.get_xlabel() == "step size γ":
                assert 0.0 <= ax.get_ylim()[0] and ax.get_ylim()[1] <= 1.0, (name, ax.get_ylim())
                assert isinstance(ax.xaxis.get_minor_formatter(), NullFormatter), name
                assert not any(t.get_text() for t in ax.xaxis.get_minorticklabels()), name


def test_titles_say_one_seed_and_write_subscripts_as_math(drawn):
    from dlnmomentum.figures import deep_linear

    for setting in (designs.setting("tiny"), deep_linear.setting("tiny")):
        text = common.setting_text(setting)
        assert "seed 0" in text and "reps=1" not in text and "0..0" not in text, text
    assert "seeds 0..1" in common.setting_text(designs.setting("quick"))
    for name in ("mgf-triple", "lambda-collapse"):
        title = drawn(name)._suptitle.get_text().split("\n")[0]
        assert "$_{\\rm" in title and "_" not in _plain(title), title


def test_deep_linear_title_takes_the_epochs_from_the_store(drawn, tiny_stores):
    from dlnmomentum.figures import deep_linear, open_figure

    epochs = deep_linear.SETTINGS["tiny"]["steps"]
    assert f"after {epochs} epochs" in drawn("deep-linear")._suptitle.get_text()
    assert f"after {epochs} epochs" in open_figure(str(tiny_stores / "deep-linear.h5")).title


def test_lambda_spread_of_one_point_per_bin_is_not_computed():
    """Nine points in twelve bins of log λ, each alone: the spread along λ was 0 and λ's share 1.0."""
    from dlnmomentum.figures.networks import lambda_spread
    from dlnmomentum.sweeps.result import Sweep

    gammas, betas = np.array([1e-3, 7e-3, 5e-2]), np.array([0.0, 0.45, 0.9])
    lam = gammas[None, None, :] / (1 - betas[None, :, None]) ** 2
    loss = np.random.default_rng(0).uniform(0.1, 1.0, size=(1, 3, 3))
    sw = Sweep(("rep", "beta", "gamma"), {"rep": [0], "beta": betas, "gamma": gammas},
               {"test_loss": loss, "lam": lam}, np.ones((1, 3, 3), bool), {})
    x = np.log10(lam.ravel())
    edges = np.linspace(x.min(), x.max() + 1e-12, 13)
    assert np.bincount(np.clip(np.digitize(x, edges) - 1, 0, 11)).max() == 1  # (the premise: one point a bin)
    out = lambda_spread(sw, "test_loss")
    assert np.isnan(out["r2"]) and np.isnan(out["along"]) and "share a bin" in out["reason"], out
    dense = Sweep(("rep", "beta", "gamma"), {"rep": [0], "beta": betas, "gamma": gammas},
                  {"test_loss": loss, "lam": np.ones_like(lam)}, np.ones((1, 3, 3), bool), {})
    assert "reason" not in lambda_spread(dense, "test_loss", bins=1)


def test_mgf_triple_distance_panel_leaves_out_gradient_flow(drawn):
    ax = next(a for a in _plot_axes(drawn("mgf-triple")) if "θ" in a.get_ylabel() and "GF" in a.get_ylabel())
    xs = np.concatenate([line.get_xdata() for line in ax.lines if line.get_marker() == "o"])
    assert xs.min() > 0 and "λ = 0" in ax.get_title()


def test_quadratic_contours_are_solid_and_gd_is_labelled_by_its_step(drawn):
    from matplotlib.contour import ContourSet

    sets = [c for ax in drawn("quadratic").axes for c in ax.collections if isinstance(c, ContourSet)]
    assert sets
    for cs in sets:
        assert all(dashes is None for _, dashes in cs.get_linestyle()), cs.get_linestyle()


def test_crossings_store_the_gap_at_the_stop_tolerance_and_show_the_bound(drawn, tiny_stores):
    path = tiny_stores / "crossings.h5"
    summary = _summary(path)
    with h5py.File(path, "r") as h5:
        for name in ("mgd", "mgf"):
            g = h5[name]
            status, gap, reason = g["status"][()], g["prediction_gap"][()], g["theory_reason"][()]
            at_stop = (status == Status.CONVERGED) & (reason == 0) & g["done"][()].astype(bool)
            want = float(gap[at_stop].max()) if at_stop.any() else None
            assert summary[name]["max_prediction_gap_at_stop_tol"] == want, name
            assert summary[name]["runs_at_stop_tol"] == int(at_stop.sum())
        changes, theta0 = h5["mgd/sign_changes"][()], np.abs(h5["mgd/theta0_tilde"][()]).max(axis=-1)
        ok = (h5["mgd/theory_reason"][()] == 0) & (changes == 0)
    box = [t.get_text() for ax in drawn("crossings").axes for t in ax.texts if "without sign changes" in t.get_text()]
    if ok.any():
        assert len(box) == 1
        shown = float(re.search(r"MGD grid: ([0-9.e+-]+)", box[0]).group(1))
        assert np.isclose(shown, theta0[ok].max(), rtol=0.05) and "< α² = 1e-4" in box[0]


def test_lambda_collapse_titles_give_the_distance_to_mgf_and_beta_stays_dark(drawn, tiny_stores):
    summary = _summary(tiny_stores / "lambda-collapse.h5")
    titles = [ax.get_title() for ax in _plot_axes(drawn("lambda-collapse"))]
    for field, row in (("test_loss", titles[:2]), ("delta_inf_norm", titles[2:])):
        for key, title in zip(("lam", "lam_central"), row, strict=True):
            assert f"RMS distance to MGF(λ) {summary['distance_to_mgf'][field][key]:.3f}" in title, title
    ax = _plot_axes(drawn("lambda-collapse"))[0]
    r, g, b, _ = ax.collections[0].get_cmap()(1.0)
    assert 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.8  # (plasma's end, β = 1, is pale yellow: 0.92)


def test_an_outlier_is_drawn_on_the_frame_with_its_value(tiny_stores, tmp_path):
    """data-mean at μ = 0.5 (quick): one converged run with test loss 0.37 set the panel's limits over four
    decades. A converged MGD mean more than a decade off the MGF curve is now an open mark on the frame with its
    value; the limits come from the rest. Checked on a copy of the tiny store with one mean made 1e3 times larger."""
    from dlnmomentum.figures.mgd_vs_mgf import OUTLIER_LABEL

    path = tmp_path / "data-mean.h5"
    shutil.copy(tiny_stores / "data-mean.h5", path)
    with h5py.File(path, "r+") as h5:
        g = h5["mu=1/mgd"]
        status, train = g["status"][()], g["train_loss"][()]
        ok = ((status == Status.CONVERGED) | ((status == Status.MAX_STEPS) & (train <= designs.FIT_TOL))).all(axis=0)
        ib, il = np.argwhere(ok)[0]
        loss = g["test_loss"][()]
        loss[:, ib, il] *= 1e3
        g["test_loss"][...] = loss
        value = loss[:, ib, il].mean()
    fig = draw(path)
    try:
        ax = next(a for a in _plot_axes(fig) if a.get_title() == "μ = 1" and a.get_ylabel() == "test loss")
        assert ax.get_ylim()[1] < value / 10
        labels = [t.get_text() for t in ax.texts]
        assert common.short_number(float(f"{value:.2g}")) in labels, labels
        frame = [line for line in ax.lines if line.get_marker() in ("^", "v")]
        assert frame and all(set(np.asarray(line.get_ydata(), float)) <= {0.0, 1.0} for line in frame)
        assert OUTLIER_LABEL in [t.get_text() for leg in _legends(fig) for t in leg.get_texts()]
        for a in _plot_axes(fig):  # one style of y tick labels in every panel: 10⁻⁴ or 2×10⁻⁴
            for t in a.yaxis.get_majorticklabels():
                assert re.fullmatch(r"(\$\\mathdefault\{(\d\\times)?10\^\{-?\d+\}\}\$)?", t.get_text()), t.get_text()
    finally:
        common.pyplot().close(fig)
