r"""Figure 1 of the paper (``fig:mgfmgd``): (M)GD over a 2-D ill-conditioned quadratic.

On :math:`f(x) = \tfrac12 x^\top A x - c^\top x`:

* left: gradient flow (curve, exact) and GD(γ), GD(4γ) (markers) — the iterates follow the flow
  (Proposition 1 at β = 0), GD(4γ) four times faster;
* middle: MGF(λ), λ = γ/(1-β)² (curve, exact) and MGD(γ, β), MGD(4γ, 1-2(1-β)), MGD(4γ, β²) (markers):
  the momentum iterates follow MGF(λ) (Proposition 1, ``prop:discretisation``);
* right: the acceleration rule (Corollary 1, ``cor:speedup``, ρ = 2): the distance to the minimiser
  against the iterate k; MGD(4γ, 1-2(1-β)) (same λ) and MGD(4γ, β²) (λ·4/(1+β)²) at k lie on MGD(γ, β)
  at 2k, while GD(4γ) at k lies on GD(γ) at 4k.

:func:`compute` runs everything into an open HDF5 group (every iterate of every run, the flows at the
iterates' times, the claim measures); :func:`plot` draws from that group only.

The paper gives no numbers for this figure; the setting here (:data:`A`, :data:`C`, :data:`X0`, γ = 0.01,
β = 0.9, so λ = 1: the stiff mode under-damped, λa = 1.01 > 1/4, the flat one over-damped) is ours, the
same for every size; the sizes differ only in K (:data:`STEPS`). Every run and flow costs well under a
second (d = 2), so ``full`` differs from ``quick`` only in how far the paths go.
"""

import numpy as np

from ..runs.quadratic import heavy_ball_quadratic_path, quadratic_flow
from ..theory.maps import accelerate
from .common import LEGEND_FONT, put

NAME = "quadratic"
TITLE = "Figure 1: (M)GD follows (M)GF on a 2-D quadratic; MGD(4γ, β²) runs twice, GD(4γ) four times as fast"
SIZES = ("tiny", "quick", "full")
#: A size that fits the three panels.
FIGSIZE = (15.0, 5.4)

#: The setting: an ill-conditioned quadratic (eigenvalues ≈ 1.01 and 0.040, condition number ≈ 25).
A = np.array([[0.8, 0.4], [0.4, 0.25]])
C = np.array([1.0, 0.5])
X0 = np.array([-1.5, 2.0])
GAMMA, BETA, RHO = 0.01, 0.9, 2
#: K, the iterates shown per run (MGD(γ, β) runs 2K steps, GD(γ) 4K, for the speed-up references).
STEPS = {"tiny": 100, "quick": 500, "full": 1000}

def _runs():
    """key -> (label, γ, β) of each run, in plotting order."""
    g_rule, b_rule = accelerate(GAMMA, BETA, RHO)
    return {
        "gd": ("GD(γ)", GAMMA, 0.0),
        "gd4": ("GD(4γ)", RHO**2 * GAMMA, 0.0),
        "mgd": ("MGD(γ, β)", GAMMA, BETA),
        "mgd_beta2": ("MGD(4γ, β²)", RHO**2 * GAMMA, BETA**2),
        "mgd_rule": ("MGD(4γ, 1-2(1-β))", float(g_rule), float(b_rule)),
    }


#: name -> description of each claim measure (all relative to ‖x0 - x*‖, maximum over k = 0..K).
CLAIMS = {
    "rule_at_2k": "max_k |MGD(4γ, 1-2(1-β))_k - MGD(γ, β)_2k| / |x0 - x*| (Corollary 1: small)",
    "rule_at_k": "max_k |MGD(4γ, 1-2(1-β))_k - MGD(γ, β)_k| / |x0 - x*| (same iterate: large)",
    "beta2_at_2k": "max_k |MGD(4γ, β²)_k - MGD(γ, β)_2k| / |x0 - x*| (β² ≈ 1-2(1-β): small)",
    "gd4_at_4k": "max_k |GD(4γ)_k - GD(γ)_4k| / |x0 - x*| (GD: four times as fast, small)",
    "gd4_at_2k": "max_k |GD(4γ)_k - GD(γ)_2k| / |x0 - x*| (GD is not twice as fast: large)",
    "mgd_vs_mgf": "max_k |MGD(γ, β)_k - x_MGF(λ)(kε)| / |x0 - x*|, k = 0..2K (Proposition 1: small)",
    "gd_vs_gf": "max_k |GD(γ)_k - x_GF(kγ)| / |x0 - x*|, k = 0..4K (small)",
}


def _max_rel(u, v, scale):
    return float(np.max(np.linalg.norm(u - v, axis=1)) / scale)


def _dataset(group, name, data, description, dims=None, coordinates=None):
    return put(group, name, data, description, dims, coordinates)


def compute(h5, size, log=print):
    """Run Figure 1's (M)GD runs and flows into the open h5py group ``h5``; return the claim measures.

    Writes ``runs/<key>/{x, k, time, distance}`` for every run of :func:`_runs` (every iterate;
    attrs ``label``, ``gamma``, ``beta``, ``lam``, ``eps``, ``status``), ``flows/{gf, mgf}/{x, time}``
    (exact flows at the times of GD(γ) and MGD(γ, β)'s iterates), ``claims/<name>`` (:data:`CLAIMS`),
    and the setting in ``h5.attrs`` (``A``, ``c``, ``x0``, ``x_star``, ``gamma``, ``beta``, ``rho``,
    ``lam``, ``eps``, ``steps``, ``size``). ``size`` is one of :data:`SIZES` (only K changes).

    Returns
    -------
    dict
        Every claim measure of :data:`CLAIMS` (float) and ``holds`` (bool): the acceleration rule's
        errors are under a fifth of the same-iterate ones, and the discretisation errors under 0.1.
    """
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    K = STEPS[size]
    x_star = np.linalg.solve(A, C)
    scale = float(np.linalg.norm(X0 - x_star))
    lam = GAMMA / (1.0 - BETA) ** 2
    eps = GAMMA / (1.0 - BETA)
    h5.attrs.update({"A": A, "c": C, "x0": X0, "x_star": x_star, "gamma": GAMMA, "beta": BETA, "rho": RHO,
                     "lam": lam, "eps": eps, "steps": K, "size": size,
                     "description": TITLE + " on f(x) = x'Ax/2 - c'x"})
    steps = {"gd": RHO**2 * K, "mgd": RHO * K}
    paths = {}
    runs = h5.create_group("runs")
    for key, (label, g, b) in _runs().items():
        p = heavy_ball_quadratic_path(A, C, X0, g, b, steps.get(key, K))
        log(f"{NAME}: {label} (γ={g:g}, β={b:g}, λ={p.lam:.4g}): {p.k[-1]} steps, {p.status.label}")
        if p.status.label != "max_steps":
            raise RuntimeError(f"{label} did not run to the end: {p.status.label}")
        paths[key] = p
        grp = runs.create_group(key)
        grp.attrs.update({"label": label, "gamma": p.gamma, "beta": p.beta, "lam": p.lam, "eps": p.eps,
                          "status": p.status.label})
        # one dimension row for the four arrays over the iterates (xarray: x(row, coordinate) with k and time as
        # its coordinates; before, each had its own x_dim0, k_dim0, ... of the same length)
        _dataset(grp, "x", p.x, f"iterates x_k of {label}, k = 0..{p.k[-1]} (rows)", ("row", "coordinate"), "k time")
        _dataset(grp, "k", p.k, "iterate index k of each row", ("row",))
        _dataset(grp, "time", p.time, "MGF time k·ε, ε = γ/(1-β) (Proposition 1)", ("row",))
        _dataset(grp, "distance", np.linalg.norm(p.x - x_star, axis=1), "|x_k - x*|, x* = A^-1 c", ("row",),
                 "k time")
    flows = h5.create_group("flows")
    mgd, gd = paths["mgd"], paths["gd"]
    for key, lam_f, times, what in (("gf", 0.0, gd.time, "GD(γ)"), ("mgf", lam, mgd.time, "MGD(γ, β)")):
        fl = quadratic_flow(A, C, X0, lam_f, times)
        grp = flows.create_group(key)
        grp.attrs["lam"] = lam_f
        _dataset(grp, "x", fl.x, f"exact {'GF' if lam_f == 0 else 'MGF(λ)'} x(t), ẋ(0) = 0, at the times of {what}",
                 ("row", "coordinate"), "time")
        _dataset(grp, "time", fl.time, f"time t = k·ε of {what}'s iterates", ("row",))
    x = {key: p.x for key, p in paths.items()}
    measures = {
        "rule_at_2k": _max_rel(x["mgd_rule"], x["mgd"][::2], scale),
        "rule_at_k": _max_rel(x["mgd_rule"], x["mgd"][:K + 1], scale),
        "beta2_at_2k": _max_rel(x["mgd_beta2"], x["mgd"][::2], scale),
        "gd4_at_4k": _max_rel(x["gd4"], x["gd"][::4], scale),
        "gd4_at_2k": _max_rel(x["gd4"], x["gd"][:2 * K + 1:2], scale),
        "mgd_vs_mgf": _max_rel(x["mgd"], flows["mgf/x"][()], scale),
        "gd_vs_gf": _max_rel(x["gd"], flows["gf/x"][()], scale),
    }
    claims = h5.create_group("claims")
    for name, value in measures.items():
        _dataset(claims, name, value, CLAIMS[name])
    holds = (measures["rule_at_2k"] < 0.2 * measures["rule_at_k"]
             and measures["beta2_at_2k"] < 0.2 * measures["rule_at_k"]
             and measures["gd4_at_4k"] < 0.2 * measures["gd4_at_2k"]
             and max(measures["mgd_vs_mgf"], measures["gd_vs_gf"]) < 0.1)
    claims.attrs["holds"] = holds
    log(f"{NAME}: " + ", ".join(f"{k}={v:.3g}" for k, v in measures.items()) + f"; holds={holds}")
    return {**measures, "holds": holds}


def _matrix_text(M):
    return "[" + ", ".join("[" + ", ".join(f"{v:g}" for v in row) + "]" for row in M) + "]"


def _marker_iterates(K, speed, count=45):
    """Iterates to mark: k·speed for about ``count`` k in 0..K, log-spaced (the first steps move fastest).

    ``speed`` is 4 for GD(γ), 2 for MGD(γ, β) and 1 for the runs with 4γ, so that where the claims hold
    the markers of a run and of its faster counterpart fall on each other.
    """
    k = np.unique(np.rint(np.geomspace(1, K, count)).astype(np.int64))
    return np.concatenate([[0], k]) * speed


def plot(h5, fig):
    """Draw Figure 1 into the matplotlib Figure ``fig`` from the group written by :func:`compute`."""
    attrs = h5.attrs
    A_, c_, x0, x_star = (np.asarray(attrs[k]) for k in ("A", "c", "x0", "x_star"))
    gamma, beta, lam, K = float(attrs["gamma"]), float(attrs["beta"]), float(attrs["lam"]), int(attrs["steps"])
    runs = {key: h5["runs"][key] for key in h5["runs"]}
    order = [k for k in ("gd", "gd4", "mgd", "mgd_beta2", "mgd_rule") if k in runs]
    colors = {"gd": "tab:blue", "gd4": "tab:cyan", "mgd": "tab:red", "mgd_beta2": "tab:orange",
              "mgd_rule": "tab:purple"}
    ax_gd, ax_mgd, ax_acc = fig.subplots(1, 3)

    # the level sets of f, over a box around the paths
    pts = np.vstack([runs[k]["x"][()] for k in order])
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = 0.08 * (hi - lo)
    g1, g2 = np.meshgrid(np.linspace(lo[0] - pad[0], hi[0] + pad[0], 200),
                         np.linspace(lo[1] - pad[1], hi[1] + pad[1], 200))
    xy = np.stack([g1, g2], axis=-1)
    f = 0.5 * np.einsum("...i,ij,...j->...", xy, A_, xy) - xy @ c_
    for ax in (ax_gd, ax_mgd):
        # one line style: matplotlib dashes the negative levels of a one-colour contour, and f < 0 near x*
        ax.contour(g1, g2, f, levels=15, colors="0.85", linewidths=0.6, linestyles="solid")
        ax.plot(*x0, "ko", ms=5)
        ax.plot(*x_star, "k*", ms=10)
        ax.set_xlabel("$x_1$")
        ax.set_ylabel("$x_2$")

    style = {"gd": ("o", 7), "gd4": ("x", 4), "mgd": ("o", 7), "mgd_rule": ("s", 4), "mgd_beta2": ("^", 4)}
    speed = {"gd": 4, "mgd": 2}

    def marked(ax, key):
        x = runs[key]["x"][()]
        at = _marker_iterates(K, speed.get(key, 1))
        a = runs[key].attrs
        marker, ms = style[key]
        # GD (β = 0) is drawn over GF, the flow it discretises (the paper's Figure 1, left): its γ, not
        # λ = γ/(1-β)² = γ, which in a panel titled "λ = 0" read as a contradiction
        value = f"γ = {a['gamma']:.3g}" if float(a["beta"]) == 0 else f"λ = {a['lam']:.3g}"
        ax.plot(x[at, 0], x[at, 1], marker, ms=ms, mfc="none", color=colors[key],
                label=f"{a['label']}, {value}: $x_{{{speed.get(key, 1)}k}}$" if key in speed
                else f"{a['label']}, {value}: $x_k$")

    gf = h5["flows/gf/x"][()]
    ax_gd.plot(gf[:, 0], gf[:, 1], "k-", lw=1.2, label="GF (exact)")
    for key in ("gd", "gd4"):
        marked(ax_gd, key)
    ax_gd.set_title(f"GD over GF (MGF at λ = 0): γ = {gamma:g}, {4 * K} and {K} steps", fontsize=10)
    ax_gd.legend(fontsize=LEGEND_FONT, loc="best", title="markers: log-spaced k ≤ K", title_fontsize=LEGEND_FONT)

    mgf = h5["flows/mgf/x"][()]
    ax_mgd.plot(mgf[:, 0], mgf[:, 1], "k-", lw=1.2, label=f"MGF(λ = {lam:g}) (exact)")
    for key in ("mgd", "mgd_rule", "mgd_beta2"):
        marked(ax_mgd, key)
    ax_mgd.set_title(f"MGD over MGF(λ): γ = {gamma:g}, β = {beta:g}, λ = γ/(1-β)² = {lam:g}", fontsize=10)
    ax_mgd.legend(fontsize=LEGEND_FONT, loc="best", title="markers: log-spaced k ≤ K", title_fontsize=LEGEND_FONT)

    k = np.arange(K + 1)
    for key in order:
        dist = runs[key]["distance"][()][:K + 1]
        a = runs[key].attrs
        ax_acc.semilogy(k, dist, color=colors[key], lw=1.5, label=f"{a['label']}: γ={a['gamma']:g}, β={a['beta']:g}")
    ax_acc.semilogy(k, runs["mgd"]["distance"][()][: 2 * K + 1: 2], "k--", lw=0.9, label="MGD(γ, β) at 2k")
    ax_acc.semilogy(k, runs["gd"]["distance"][()][: 4 * K + 1: 4], "k:", lw=1.1, label="GD(γ) at 4k")
    cl = h5["claims"]
    ax_acc.set_title(f"acceleration rule, ρ = 2 (Corollary 1), K = {K}", fontsize=10)
    ax_acc.set_xlabel("iterate k")
    # the claims' numbers under the axes, below the x label: every place inside holds a curve at some K
    ax_acc.annotate("max gap / $\\|x_0 - x^*\\|$ over k ≤ K\n"
                    f"to MGD(γ, β)$_{{2k}}$: MGD(4γ, 1-2(1-β))$_k$ {cl['rule_at_2k'][()]:.2g}, "
                    f"MGD(4γ, β²)$_k$ {cl['beta2_at_2k'][()]:.2g}\n"
                    f"to MGD(γ, β)$_k$: MGD(4γ, 1-2(1-β))$_k$ {cl['rule_at_k'][()]:.2g};  "
                    f"GD(4γ)$_k$ to GD(γ)$_{{4k}}$: {cl['gd4_at_4k'][()]:.2g}",
                    xy=(0.5, 0.0), xycoords=ax_acc.xaxis.label, xytext=(0, -6), textcoords="offset points",
                    ha="center", va="top", fontsize=7.5, bbox=dict(boxstyle="round", fc="white", ec="0.7"))
    ax_acc.set_ylabel("$\\|x_k - x^*\\|$")
    ax_acc.legend(fontsize=LEGEND_FONT, loc="lower left")
    fig.suptitle(f"{TITLE.split(':')[0]}: f(x) = ½xᵀAx - cᵀx, A = {_matrix_text(A_)}, c = {list(map(float, c_))}, "
                 f"x0 = {list(map(float, x0))}; γ = {gamma:g}, β = {beta:g}, λ = {lam:g}, K = {K} iterates"
                 f"  [{h5.file.attrs.get('size', '?')}]", fontsize=10)  # (the size, as every figure's title has it)
