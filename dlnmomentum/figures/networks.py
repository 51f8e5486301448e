r"""The λ measure of the paper's network figures (Appendix "Additional Experiments"): does λ = γ/(1-β)² govern MGD?

:func:`lambda_spread` bins a sweep's points by λ (or a control combination of γ and β, :data:`SPREAD_KEYS`) and
compares the spread of a log loss along the level lines with the spread across them;
:func:`explained_shares` gives the share of its variance each combination explains. The figures themselves
are :mod:`.teacher_student` (Figure 2) and :mod:`.deep_linear` (Figure 6), made as every figure is, with
``dlnm figure teacher-student`` / ``dlnm figure deep-linear`` (:func:`dlnmomentum.figures.figure`).
"""

import numpy as np

#: The combinations of (γ, β) whose level lines :func:`lambda_spread` can follow: λ = γ/(1-β)² (the
#: paper's claim) and the controls it is compared with, ε = γ/(1-β) (the MGF time of one step: after
#: k steps MGD has run the flow for a time kε), γ alone and 1/(1-β) alone.
SPREAD_KEYS = {"lam": "lambda = gamma/(1-beta)^2", "eps": "eps = gamma/(1-beta)", "gamma": "gamma",
               "momentum": "1/(1-beta)"}


def _key_values(m, by):
    if by not in SPREAD_KEYS:
        raise ValueError(f"by must be one of {sorted(SPREAD_KEYS)}, got {by!r}")
    if by == "lam":
        return np.asarray(m["lam"], dtype=float)
    gamma, beta = _grid(m, "gamma"), _grid(m, "beta")
    return {"eps": gamma / (1.0 - beta), "gamma": gamma, "momentum": 1.0 / (1.0 - beta)}[by]


def _grid(m, name):
    """The field ``name`` (γ or β) on the sweep's grid: the stored field, or its coordinate broadcast."""
    if name in m.data:
        return np.asarray(m[name], dtype=float)
    shape = [1] * len(m.dims)
    shape[m.dims.index(name)] = -1
    return np.broadcast_to(np.asarray(m.coords[name], dtype=float).reshape(shape), np.shape(m["lam"]))


#: :func:`lambda_spread` needs at least this share of the points in bins that hold two or more (else NaN, with
#: a reason): a point alone in its bin adds nothing to the spread along the level lines, and counts for λ.
MIN_SHARED = 0.5


def lambda_spread(sw, field="test_loss", bins=12, mask=None, by="lam"):
    r"""How much of the variation of ``log10(field)`` over the (γ, β) grid λ (or another combination) explains.

    Points (finite, positive, ``mask`` where given; averaged over ``rep`` first) are grouped by
    λ into ``bins`` equal bins of log λ — bands along the λ level lines. Returns a dict with
    ``along`` (pooled standard deviation of log10(field) inside the bands: spread along λ level
    lines), ``across`` (standard deviation of the band means: spread across them), ``total``,
    ``ratio = along/across`` (small: λ governs) and ``r2 = 1 - along²/total²`` (the share of
    variance explained by λ), and the number of points used. ``by`` names another key of
    :data:`SPREAD_KEYS` to bin by instead of λ (the controls of :func:`explained_shares`).

    Fewer than 3 points, or fewer than :data:`MIN_SHARED` of them in bins holding two or more: ``along``,
    ``across``, ``ratio`` and ``r2`` are NaN and ``reason`` says why.
    """
    m = sw.mean("rep") if "rep" in sw.dims else sw
    vals = np.asarray(m[field], dtype=float)
    lam = _key_values(m, by)
    keep = np.isfinite(vals) & (vals > 0) & np.isfinite(lam) & (lam > 0)
    if mask is not None:
        keep &= np.asarray(mask, dtype=bool)
    y, x = np.log10(vals[keep]), np.log10(lam[keep])
    nan = float("nan")
    if y.size < 3:
        return {"along": nan, "across": nan, "total": nan, "ratio": nan, "r2": nan, "points": int(y.size),
                "reason": f"{y.size} points (finite, positive): at least 3 are needed"}
    edges = np.linspace(x.min(), x.max() + 1e-12, bins + 1)
    which = np.clip(np.digitize(x, edges) - 1, 0, bins - 1)
    counts = np.bincount(which, minlength=bins)
    shared = int(counts[counts >= 2].sum())
    if shared < MIN_SHARED * y.size:
        # a point alone in its bin has no spread along λ: with (almost) every bin holding one point the spread
        # along is 0 and λ "explains" a share 1.0 of any field (deep-linear --tiny: 9 points in 12 bins)
        return {"along": nan, "across": nan, "total": float(y.std()), "ratio": nan, "r2": nan, "points": int(y.size),
                "reason": f"only {shared} of {y.size} points share a bin (of {bins}) with another point; at least "
                          f"{MIN_SHARED:.0%} must for a spread along the level lines"}
    within, means, weights = 0.0, [], []
    for b in range(bins):
        sel = which == b
        if sel.sum() == 0:
            continue
        within += ((y[sel] - y[sel].mean()) ** 2).sum()
        means.append(y[sel].mean())
        weights.append(sel.sum())
    along = np.sqrt(within / y.size)
    means, weights = np.asarray(means), np.asarray(weights)
    across = np.sqrt(np.average((means - np.average(means, weights=weights)) ** 2, weights=weights))
    total = y.std()
    return {"along": float(along), "across": float(across), "total": float(total),
            "ratio": float(along / across) if across > 0 else np.nan,
            "r2": float(1.0 - along**2 / total**2) if total > 0 else np.nan, "points": int(y.size)}


def explained_shares(sw, field, mask=None):
    """``{key: r2}``: the share of the variance of log10(field) that each key of :data:`SPREAD_KEYS` explains.

    λ's share means little alone: a field that depends on γ/(1-β) (the time MGD has run after a fixed
    number of steps) also varies along λ's level lines. The controls say whether λ explains more.
    """
    return {key: lambda_spread(sw, field, mask=mask, by=key)["r2"] for key in SPREAD_KEYS}
