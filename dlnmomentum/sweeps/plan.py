"""What a sweep computes: its validated configuration and data sets (:class:`Plan`).

The configuration is a JSON-able dict (stored in the sweep file): the design, the run settings
and the data — a spec of :func:`~dlnmomentum.sparse_regression` arguments (rep ``r`` uses seed
``seed + r``) or one given :class:`~dlnmomentum.Problem` (recorded by its fingerprint).

Designs of a discrete (MGD/SMGD) sweep (``config["design"]``; a store without one is a ``grid``):

==========  =========================  ==============================================================
design      dims                       the point (γ, β)
==========  =========================  ==============================================================
grid        (rep, beta, gamma)         ``gammas × betas``
lam-grid    (rep, beta, lam)           ``γ = λ (1-β)²``: constant-λ lines (Proposition 1), ``lams × betas``
pairs       (rep, pair)                a list of (γ, β) pairs
==========  =========================  ==============================================================

A flow sweep has dims (rep, lam), its ``scheme`` and the settings of its adaptive points, ``rtol``, ``atol`` and
``max_steps`` (:data:`ADAPTIVE_SETTINGS`; None, or absent in a store written before 0.6.0: the defaults). Every point's
γ, β and λ are also fields of the result (:meth:`Plan.parameters`), whatever the dims.
"""

import hashlib
import inspect
import warnings

import numpy as np

from ..problem import Problem, sparse_regression
from ..runs.common import as_alpha, check_gradient_form, initial_weights
from ..runs.flow_adaptive import prepare_flow_run
from ..runs.mgd import make_config as make_mgd_config
from ..runs.points import SCALAR_FIELDS, VECTOR_FIELDS
from ..runs.stepping import LAM_MAX, as_lam, check_scheme
from ..store.files import to_jsonable
from ..store.sweep_format import FORMAT_NAME, FORMAT_VERSION
from ..validate import MAX_GRID, MAX_STEPS, ParameterValueError, as_bool, as_float, as_int, as_seed, check_sweep_size
from .grid import as_grid

# ---------------------------------------------------------------------------------------------------

def _fingerprint(problem):
    h = hashlib.sha256()
    for arr in (problem.X, problem.y, problem.X_test, problem.y_test):
        a = np.ascontiguousarray(arr, dtype=np.float64)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _check_spec(spec):
    if not isinstance(spec, dict):
        raise TypeError("problem_or_spec must be a dlnmomentum.Problem or a dict of sparse_regression "
                        f"arguments, got {type(spec).__name__}")
    allowed = {"n", "d", "s", "mu", "sigma", "n_test"}
    bad = set(spec) - allowed
    if bad:
        hint = " (the data seed of rep r is seed + r: pass seed= to sweep)" if "seed" in bad else ""
        raise ValueError(f"unknown spec keys {sorted(bad)}; allowed: {sorted(allowed)}{hint}")
    spec = {k: spec[k] for k in sorted(spec)}
    sparse_regression(**spec, seed=0)  # validates the values
    return to_jsonable(spec)


class Plan:
    """The validated configuration of a sweep and its data sets."""

    def __init__(self, config, problem=None):
        self.config = config
        self.problem = problem
        self._problems = {}
        kind = config["kind"]
        self.discrete = kind in ("mgd", "smgd")
        self.design = config.get("design", "grid") if self.discrete else "line"
        if self.design == "grid":
            self.dims = ("rep", "beta", "gamma")
            self.gammas = np.asarray(config["gammas"], dtype=np.float64)
            self.betas = np.asarray(config["betas"], dtype=np.float64)
            self.grid_shape = (self.betas.size, self.gammas.size)
            self.point_gamma = np.broadcast_to(self.gammas[None, :], self.grid_shape).copy()
            self.point_beta = np.broadcast_to(self.betas[:, None], self.grid_shape).copy()
        elif self.design == "lam-grid":
            self.dims = ("rep", "beta", "lam")
            self.lams = np.asarray(config["lams"], dtype=np.float64)
            self.betas = np.asarray(config["betas"], dtype=np.float64)
            self.grid_shape = (self.betas.size, self.lams.size)
            self.point_gamma = lam_grid_gammas(self.lams, self.betas)
            self.point_beta = np.broadcast_to(self.betas[:, None], self.grid_shape).copy()
        elif self.design == "pairs":
            self.dims = ("rep", "pair")
            self.point_gamma = np.asarray(config["gammas"], dtype=np.float64)
            self.point_beta = np.asarray(config["betas"], dtype=np.float64)
            self.grid_shape = (self.point_gamma.size,)
        elif self.design == "line":
            self.dims = ("rep", "lam")
            self.lams = np.asarray(config["lams"], dtype=np.float64)
            self.grid_shape = (self.lams.size,)
        else:
            raise ValueError(f"unknown sweep design {self.design!r} (a store from a newer dlnmomentum?)")
        self.reps = int(config["reps"])
        self.shape = (self.reps,) + self.grid_shape
        self.npoints = int(np.prod(self.shape))

    def problem_for(self, rep):
        """The data set of rep ``rep`` (cached)."""
        p = self._problems.get(rep)
        if p is None:
            if self.config["spec"] is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", UserWarning)
                    p = sparse_regression(**self.config["spec"], seed=self.config["seed"] + rep)
            else:
                p = self.problem
            self._problems[rep] = p
        return p

    @property
    def d(self):
        return self.problem_for(0).d

    def coords(self):
        c = {"rep": np.arange(self.reps, dtype=np.int64), "coord": np.arange(self.d, dtype=np.int64)}
        if self.design == "grid":
            c.update(beta=self.betas, gamma=self.gammas)
        elif self.design == "lam-grid":
            c.update(beta=self.betas, lam=self.lams)
        elif self.design == "pairs":
            c["pair"] = np.arange(self.grid_shape[0], dtype=np.int64)
        else:
            c["lam"] = self.lams
        return c

    def gamma_beta(self, point):
        """``(rep, γ, β)`` of the flat point index ``point`` (discrete sweeps)."""
        rep, rest = divmod(int(point), int(np.prod(self.grid_shape)))
        return rep, float(self.point_gamma.flat[rest]), float(self.point_beta.flat[rest])

    def lam_grid(self):
        if self.discrete:
            lam = self.point_gamma / (1.0 - self.point_beta) ** 2
        else:
            lam = self.lams
        return np.broadcast_to(lam, self.shape).copy()

    def parameters(self):
        """The run parameters of every point over the whole grid (``plan.shape``), from the configuration.

        ``lam`` (λ = γ/(1-β)², also where it is a dim) and, for discrete designs, ``gamma`` and ``beta``
        where they are not dims. These are never stored per point.
        """
        out = {"lam": self.lam_grid()}
        if self.discrete:
            for name, arr in (("gamma", self.point_gamma), ("beta", self.point_beta)):
                if name not in self.dims:
                    out[name] = np.broadcast_to(arr, self.shape).copy()
        return out

    def empty_data(self):
        d = self.d
        data = {}
        for name, (dtype, _) in SCALAR_FIELDS.items():
            fill = np.nan if np.issubdtype(dtype, np.floating) else 0
            data[name] = np.full(self.shape, fill, dtype=dtype)
        for name, (dtype, _) in VECTOR_FIELDS.items():
            data[name] = np.full(self.shape + (d,), np.nan, dtype=dtype)
        return data

    def seed_of(self, rep):
        return int(self.config["seed"]) + rep


def lam_grid_gammas(lams, betas):
    """γ = λ(1-β)² over ``(beta, lam)``: the step sizes of constant-λ lines (Proposition 1)."""
    return np.asarray(lams, dtype=np.float64)[None, :] * (1.0 - np.asarray(betas, dtype=np.float64)[:, None]) ** 2


def _as_pairs(pairs):
    try:
        raw = None if isinstance(pairs, str) else np.asarray(pairs, dtype=object)
    except ValueError:  # ragged
        raw = None
    if raw is None or raw.ndim != 2 or raw.shape[1] != 2 or raw.shape[0] == 0:
        raise ValueError("pairs must be a non-empty sequence of (gamma, beta) pairs, e.g. [(0.01, 0.9), (0.1, 0)]; "
                         f"got {pairs!r:.80}")
    if raw.shape[0] > MAX_GRID:
        raise ValueError(f"pairs must have at most {MAX_GRID} pairs, got {raw.shape[0]}")
    arr = _plain_pairs(raw)
    if arr is None:  # entry by entry (bool, str, complex refused by name, never cast; the first bad one named)
        arr = np.array([(as_float(f"pairs[{i}] gamma", g, low=0.0, low_open=True),
                         as_float(f"pairs[{i}] beta", b, low=0.0, high=1.0, high_open=True))
                        for i, (g, b) in enumerate(raw.tolist())], dtype=np.float64)
    if len({(float(g), float(b)) for g, b in arr}) != arr.shape[0]:
        raise ValueError("pairs must not repeat a (gamma, beta) pair")
    return arr[:, 0].copy(), arr[:, 1].copy()


def _plain_pairs(raw):
    """The pairs of the object array ``raw`` as float64 when every entry is a Python or NumPy float or int (not a
    bool) and every pair is in range, converted as :func:`as_float` converts them; None otherwise (the caller then
    checks them one by one, to name the first bad entry). One pass instead of a check per value: 10⁵ pairs took
    about a second."""
    if not {type(x) for x in raw.flat} <= {float, int, np.float64, np.float32, np.int64, np.int32}:
        return None
    try:
        arr = raw.astype(np.float64)  # (float(x) of each entry, as as_float converts it)
    except OverflowError:  # an int beyond float64
        return None
    gamma, beta = arr[:, 0], arr[:, 1]
    if not (np.isfinite(arr).all() and (gamma > 0.0).all() and (beta >= 0.0).all() and (beta < 1.0).all()):
        return None
    return arr


#: The default ``theory_tol`` of a sweep: points that end with a train loss at most this count as converged.
DEFAULT_THEORY_TOL = 1e-8


#: The settings of a flow sweep's adaptive points (``config`` keys, as :func:`dlnmomentum.mgf` names them; None: the
#: scheme's defaults, :mod:`dlnmomentum.runs.stepping`).
ADAPTIVE_SETTINGS = ("rtol", "atol", "max_steps")


def make_config(problem_or_spec, gammas, betas, lams, steps, t_max, reps, batch_size, seed, tol, alpha,
                replace, gradient, theory, theory_tol, scheme="auto", pairs=None, rtol=None, atol=None,
                max_steps=None):
    if isinstance(problem_or_spec, Problem):
        problem, spec = problem_or_spec, None
    else:
        problem, spec = None, _check_spec(problem_or_spec)
    reps = as_int("reps", reps, low=1, high=MAX_GRID)
    seed = as_seed("seed", seed, reps=reps)
    tol = as_float("tol", tol, low=0.0, allow_none=True)
    replace = as_bool("replace", replace)
    alpha = as_alpha("alpha", alpha)  # (the range of a run's alpha: (0, inf) was said where 0 < alpha < 1e-150 failed)
    theory_tol = as_float("theory_tol", theory_tol, low=0.0)
    if not isinstance(theory, (bool, np.bool_)):
        raise TypeError(f"theory must be a bool, got {theory!r}")
    check_gradient_form(gradient)
    example = problem if problem is not None else _spec_problem(spec, seed)
    initial_weights(example.d, alpha, None, None)
    config = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "reps": reps, "seed": seed, "tol": tol,
              "alpha": alpha, "gradient": gradient, "theory": bool(theory), "theory_tol": theory_tol,
              "spec": spec, "fingerprint": _fingerprint(problem) if problem is not None else None,
              "n": example.n, "d": example.d}
    designs = ("gammas and betas: a (beta, gamma) grid of MGD; lams and betas: constant-lambda lines of MGD, "
               "gamma = lam (1-beta)^2; pairs: a list of (gamma, beta) of MGD; lams alone: a flow line of MGF")
    if pairs is not None:
        if gammas is not None or betas is not None or lams is not None:
            raise ParameterValueError("pairs= is a design of its own: give no gammas, betas or lams with it "
                                      f"({designs})", "pairs", "gammas", "betas", "lams")
        design = "pairs"
    elif betas is not None and lams is not None:
        if gammas is not None:
            raise ParameterValueError(f"give two of gammas, betas, lams, not all three ({designs})",
                                      "gammas", "betas", "lams")
        design = "lam-grid"
    elif gammas is not None or betas is not None:
        if lams is not None:
            raise ParameterValueError("give either gammas and betas (a discrete (beta, gamma) grid) or lams (a flow "
                                      "line), not both", "gammas", "betas", "lams")
        if gammas is None or betas is None:
            raise ParameterValueError(f"a discrete sweep needs both gammas and betas ({designs})",
                                      "gammas", "betas", "lams", "pairs")
        design = "grid"
    else:
        design = "line"
    discrete = design != "line"
    if discrete:
        if steps is None:
            raise ParameterValueError("a discrete sweep needs steps (updates per run)", "steps")
        if t_max is not None:
            raise ParameterValueError("t_max is for flow sweeps (lams=...); a discrete sweep takes steps",
                                      "t_max", "lams", "steps")
        if scheme != "auto":
            raise ValueError("scheme is for flow sweeps (lams=...); a discrete sweep has no stepping scheme")
        given = [name for name, value in zip(ADAPTIVE_SETTINGS, (rtol, atol, max_steps), strict=True)
                 if value is not None]
        if given:
            raise ParameterValueError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for flow sweeps "
                                      "(lams=...) whose points run by an adaptive scheme ('rodas', 'ndf'); a discrete "
                                      "sweep has no stepping scheme (its budget is steps)", *given, "lams", "steps")
        if design == "grid":
            gammas = as_grid("gammas", gammas, low=0.0, low_open=True)
            betas = as_grid("betas", betas, low=0.0, high=1.0, high_open=True)
            g_all = gammas
        elif design == "lam-grid":
            lams = as_grid("lams", lams, low=0.0, low_open=True)
            betas = as_grid("betas", betas, low=0.0, high=1.0, high_open=True)
            g_all = lam_grid_gammas(lams, betas).ravel()
            if not np.all(g_all > 0):
                raise ParameterValueError("lams and betas give a step size gamma = lam (1-beta)^2 that underflows to 0",
                                          "lams", "betas")
        else:
            gammas, betas = _as_pairs(pairs)
            g_all = gammas
        steps = as_int("steps", steps, low=0, high=MAX_STEPS)
        check_sweep_size(reps, {"pairs": len(gammas)} if design == "pairs" else
                         {"betas": len(betas), "lams": len(lams)} if design == "lam-grid" else
                         {"betas": len(betas), "gammas": len(gammas)})
        c = make_mgd_config(example, g_all[0], betas[0], steps, batch_size, replace, 0, tol, gradient)
        if problem is not None and reps > 1 and c.batch_size is None:
            raise ValueError("reps > 1 with a fixed Problem and full-batch MGD would repeat identical runs; "
                             "pass a spec (dict of sparse_regression arguments) to vary the data, or a "
                             "batch_size")
        config.update(kind=c.kind, design=design, betas=betas.tolist(), steps=steps,
                      batch_size=c.batch_size, replace=replace if c.batch_size is not None else False)
        if design == "lam-grid":
            config["lams"] = lams.tolist()
        else:
            config["gammas"] = gammas.tolist()
    else:
        if lams is None:
            raise ParameterValueError("give gammas and betas (discrete sweep) or lams (flow sweep)",
                                      "gammas", "betas", "lams")
        if steps is not None:
            raise ParameterValueError("steps is for discrete sweeps; a flow sweep (lams=...) takes t_max",
                                      "steps", "lams", "t_max")
        if t_max is None:
            raise ParameterValueError("a flow sweep (lams=...) needs t_max", "lams", "t_max")
        if batch_size is not None:
            raise ParameterValueError("batch_size is for discrete (SMGD) sweeps", "batch_size")
        if problem is not None and reps > 1:
            raise ValueError("reps > 1 with a fixed Problem would repeat identical flows; pass a spec")
        lams = as_grid("lams", lams, low=0.0, high=LAM_MAX)  # (the range of dm.mgf's lam; LAM_MIN: as_lam, below)
        for i, lam in enumerate(lams):  # each a flow's lambda: 0 or in [LAM_MIN, LAM_MAX], as dm.mgf checks it
            as_lam(f"lams[{i}]", float(lam))
        check_sweep_size(reps, {"lams": len(lams)})
        t_max = as_float("t_max", t_max, low=0.0, low_open=True)
        check_scheme(scheme)
        if scheme == "exp-rk4" and not np.all(lams > 0.0):
            raise ValueError("scheme must be 'rk4', 'rodas', 'ndf' or 'auto' for a line with lam = 0 (gradient flow): "
                             "the exponential scheme needs lambda > 0")
        if scheme == "ndf" and np.any(lams > 0.0):
            raise ValueError("scheme 'ndf' is for gradient flow (lam = 0), and the line has lam > 0: MGF(lambda)'s "
                             "momentum modes are oscillatory, where a BDF of order > 2 is not stable; use 'rodas' or "
                             "'auto' (which takes 'ndf' for the line's lam = 0 points)")
        settings = _adaptive_settings(example, lams, t_max, alpha, tol, gradient, scheme, rtol, atol, max_steps)
        config.update(kind="mgf", lams=lams.tolist(), t_max=t_max, scheme=scheme, **settings)
    return config, problem


def _adaptive_settings(example, lams, t_max, alpha, tol, gradient, scheme, rtol, atol, max_steps):
    """``{rtol, atol, max_steps}`` of a flow sweep, validated by :func:`dlnmomentum.mgf`'s own check (each point is
    that call): refused with a grid scheme (``"rk4"``, ``"exp-rk4"``), in range otherwise (None: the default of the
    scheme each point runs). A value given makes ``"auto"`` take the adaptive scheme at every λ, as it makes
    ``mgf``'s."""
    settings = dict(zip(ADAPTIVE_SETTINGS, (rtol, atol, max_steps), strict=True))
    if all(value is None for value in settings.values()):
        return settings
    # (the first lambda's run: the ranges are those of every lambda; a grid scheme is refused before any work)
    c = prepare_flow_run(example, float(lams[0]), t_max=t_max, alpha=alpha, tol=tol, gradient=gradient,
                         scheme=scheme, **settings).config
    checked = {"rtol": c.rtol, "atol": c.atol, "max_steps": c.n_steps}  # (as float, float, int)
    return {name: None if value is None else checked[name] for name, value in settings.items()}


def _spec_problem(spec, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return sparse_regression(**spec, seed=seed)


_SEMANTIC_KEYS = ("kind", "design", "reps", "seed", "tol", "alpha", "gradient", "theory", "theory_tol", "spec",
                  "fingerprint", "gammas", "betas", "steps", "batch_size", "replace", "lams", "t_max", "n",
                  "d", "scheme") + ADAPTIVE_SETTINGS


def flow_scheme(config):
    """The stepping scheme of a flow sweep's configuration (stores written before it existed: ``"rk4"``)."""
    return config.get("scheme", "rk4")


def flow_settings(config):
    """``{rtol, atol, max_steps}`` of a flow sweep's configuration, the arguments of each point's
    :func:`~dlnmomentum.runs.flow_adaptive.prepare_flow_run` (None: the scheme's default; stores written before
    0.6.0 have none, and their points ran with the defaults)."""
    return {name: config.get(name) for name in ADAPTIVE_SETTINGS}


def _semantic(config, key):
    value = config.get(key)
    if key == "design" and value is None and config.get("kind") in ("mgd", "smgd"):
        return "grid"  # a store written before designs existed
    if key == "scheme":
        return flow_scheme(config) if config.get("kind") == "mgf" else None
    if key == "spec" and isinstance(value, dict):  # {n: 20} and the CLI's full spec are the same data
        return to_jsonable(dict(_SPEC_DEFAULTS, **value))
    return to_jsonable(value)


#: The arguments of sparse_regression a sweep's ``spec`` may leave out (its seed is the sweep's ``seed + rep``).
_SPEC_DEFAULTS = {name: parameter.default for name, parameter in inspect.signature(sparse_regression).parameters.items()
                  if name != "seed"}


def config_differences(a, b):
    return [k for k in _SEMANTIC_KEYS if _semantic(a, k) != _semantic(b, k)]


def resume_hint(stored, differ):
    """How to continue the flow sweep configured ``stored`` when its stepping settings alone differ (``differ``, from
    :func:`config_differences`) from those asked for: with its own; ``""`` for other differences."""
    if not differ or not set(differ) <= {"scheme", *ADAPTIVE_SETTINGS}:
        return ""
    values = dict(flow_settings(stored), scheme=flow_scheme(stored))
    ran = ", ".join(f"{name} {values[name]!r}" for name in differ)
    notes = (["a store before 0.4.0 ran 'rk4'"] if "scheme" in differ else []) + \
        (["None: the defaults, as in a store before 0.6.0"] if set(differ) - {"scheme"} else [])
    return (f"; its flows ran with {ran} ({'; '.join(notes)}): pass {'that' if len(differ) == 1 else 'those'}, or "
            "dlnmomentum.resume_sweep(path), to continue it")
