"""λ = γ/(1-β)² level lines over the (γ, β) heatmaps (:func:`.common.heatmap`), each labelled once.

Its own module: the lines, and the artist that places their labels when the figure is drawn, are one piece that
only the heatmaps use.
"""

import functools

import numpy as np

#: A level line is drawn only where it runs across at least this fraction of the axes (a corner is no line).
MIN_LEVEL_RUN = 0.25


def _lambda_label(level):
    return f"λ = {level:.2g}"


def lambda_levels(ax, gammas, betas, color="white"):
    """λ = γ/(1-β)² level lines over the (γ, β) axes ``ax`` (log γ), each labelled once, no two labels overlapping.

    The axes' current limits are kept (lines and marks drawn later do not move them). Levels are the decades 10^k
    (half decades when fewer than three decade lines cross the axes) between the least and the largest λ of the
    grid points ``gammas`` × ``betas``, whose line runs across at least :data:`MIN_LEVEL_RUN` of the axes. In
    (log γ, β) every level line is the same curve shifted along log γ. The labels are placed when the figure is
    drawn (:func:`_level_labels_class`), after the layout has sized the axes: on their line, inside the axes,
    clear of one another and of the legend. Returns the levels drawn.
    """
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    if not 0 < x0 < x1:
        raise ValueError(f"lambda_levels needs a log γ axis; its limits are {x0:g}..{x1:g}")
    ax.set_xlim(x0, x1)
    ax.set_ylim(y0, y1)
    grid_lam = np.asarray(gammas, dtype=float)[None, :] / (1.0 - np.asarray(betas, dtype=float)[:, None]) ** 2
    lam_lo, lam_hi = np.log10(grid_lam.min()), np.log10(grid_lam.max())
    g = np.geomspace(x0, x1, 400)
    u = (np.log(g) - np.log(x0)) / (np.log(x1) - np.log(x0))  # axes fractions, for the length of a line
    for step in (1.0, 0.5):
        curves = []
        for e in np.arange(np.ceil(lam_lo / step - 1e-9) * step, lam_hi + 1e-9, step):
            level = 10.0 ** e
            b = 1.0 - np.sqrt(g / level)
            inside = (b >= y0) & (b <= y1)
            if inside.sum() < 2:
                continue
            v = (b - y0) / (y1 - y0)
            if np.hypot(np.diff(u[inside]), np.diff(v[inside])).sum() >= MIN_LEVEL_RUN:
                curves.append((float(level), g[inside], b[inside]))
        if len(curves) >= 3:
            break
    from matplotlib import patheffects

    texts, lines = [], []
    for level, gs, bs in curves:
        line = ax.plot(gs, bs, color=color, lw=0.9, zorder=3)[0]
        line.set_path_effects([patheffects.withStroke(linewidth=2.0, foreground="0.15", alpha=0.6)])
        lines.append(line)  # (a dark edge: the line shows over blank cells too)
        texts.append(ax.text(gs[0], bs[0], _lambda_label(level), fontsize=7, ha="center", va="center", zorder=6,
                             bbox=dict(boxstyle="round,pad=0.2", fc="white", ec="none", alpha=0.85)))
        texts[-1].set_in_layout(False)
    ax.add_artist(_level_labels_class()(texts, lines, [(gs, bs) for _, gs, bs in curves]))
    return [level for level, _, _ in curves]


@functools.cache
def _level_labels_class():
    """The artist class that places :func:`lambda_levels`' labels (built on first use: matplotlib is imported only
    to draw)."""
    from matplotlib.artist import Artist
    from matplotlib.collections import PathCollection
    from matplotlib.transforms import Bbox

    class LevelLabels(Artist):
        """Places the labels of :func:`lambda_levels` when the axes are drawn: each on its line, as near its middle
        as room allows.

        At draw time because only then are the axes' final size (after the layout) and the labels' size in pixels
        known. It draws nothing itself: its zorder is below the lines' and the labels', so the axes draw it first,
        and the lines and labels then where it put them. Lines are labelled shortest first (they have the fewest
        places); a place is taken if the label lies inside the axes and overlaps no label already placed and no
        legend, and, where the line has such a place, covers none of the axes' marks (the scatter points of
        :func:`mark_points`: a label over a point hid its cross). A line with no place is not drawn, nor its label:
        every line drawn is labelled.
        """

        def __init__(self, texts, lines, curves):
            super().__init__()
            self.texts, self.lines, self.curves = texts, lines, curves
            self.set_in_layout(False)
            self.set_zorder(2.5)

        def draw(self, renderer):
            ax = self.axes
            frame = ax.bbox
            taken = [leg.get_window_extent(renderer) for leg in (ax.get_legend(),) if leg is not None]
            marks = [ax.transData.transform(np.asarray(c.get_offsets(), dtype=float)) for c in ax.collections
                     if isinstance(c, PathCollection) and len(c.get_offsets())]
            marks = np.concatenate(marks) if marks else np.zeros((0, 2))
            pad = 0.2 * 7 * renderer.points_to_pixels(1.0) + 2.0  # the box's pad, and 2 pixels between labels
            where = np.linspace(0.04, 0.96, 47)
            where = where[np.argsort(np.abs(where - 0.5), kind="stable")]  # fractions of the line, middle first
            paths = [ax.transData.transform(np.column_stack(c)) for c in self.curves]
            arcs = [np.concatenate([[0.0], np.cumsum(np.hypot(*np.diff(p, axis=0).T))]) for p in paths]
            for i in np.argsort([a[-1] for a in arcs], kind="stable"):
                text, line, (gs, bs), pts, arc = self.texts[i], self.lines[i], self.curves[i], paths[i], arcs[i]
                text.set_position((gs[0], bs[0]))
                ext = text.get_window_extent(renderer)
                w, h = ext.width + 2 * pad, ext.height + 2 * pad
                at = np.searchsorted(arc, where * arc[-1]).clip(0, len(arc) - 1)
                boxes = [Bbox.from_bounds(pts[k][0] - w / 2, pts[k][1] - h / 2, w, h) for k in at]
                free = [j for j, b in enumerate(boxes)
                        if b.x0 >= frame.x0 and b.x1 <= frame.x1 and b.y0 >= frame.y0 and b.y1 <= frame.y1
                        and not any(b.overlaps(t) for t in taken)]
                clear = [j for j in free if not np.any((marks[:, 0] >= boxes[j].x0) & (marks[:, 0] <= boxes[j].x1)
                                                       & (marks[:, 1] >= boxes[j].y0) & (marks[:, 1] <= boxes[j].y1))]
                free = clear or free
                text.set_visible(bool(free))
                line.set_visible(bool(free))
                if free:
                    taken.append(boxes[free[0]])
                    text.set_position((gs[at[free[0]]], bs[at[free[0]]]))
            self.stale = False

    return LevelLabels
