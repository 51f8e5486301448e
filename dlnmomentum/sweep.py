r"""Sweeps: many MGD / SMGD runs over a (β, γ) grid, or flows over a λ line, as one labelled grid.

Public entry points: :func:`sweep` (run or resume a sweep, optionally streamed to an HDF5
store), :func:`resume_sweep` (continue a store from its stored configuration),
:func:`open_sweep` (read a store), :class:`Sweep` (the labelled result),
:func:`parse_grid` (the CLI's ``start:stop:num[:log]`` grids) and, for the command line,
:func:`register_cli` (``dlnm sweep``) and :func:`inspect_lines` (``dlnm inspect`` of a sweep
store).

Discrete time
-------------
A ``(β, γ)`` grid of MGD (or SMGD with ``batch_size``) runs of ``steps`` updates each,
over ``reps`` data sets, is advanced in lockstep by the compiled kernel
:func:`dlnmomentum.kernels.sweep._sweep_chunk` (eight runs per SIMD group, blocks of groups
in parallel). Every point is **bit for bit** the result of
``dlnmomentum.mgd(problem_r, γ, β, steps=steps, alpha=alpha, batch_size=batch_size,
replace=replace, seed=seed + r, tol=tol, gradient=gradient)``, whatever the thread count,
the block size or an interruption:

* rep ``r`` uses the data set ``sparse_regression(**spec, seed=seed + r)`` when a spec
  (a dict of :func:`~dlnmomentum.sparse_regression` arguments) is given, or the given
  :class:`~dlnmomentum.Problem` for every rep;
* SMGD batches of every grid point of rep ``r`` come from the seed ``seed + r`` (common
  random numbers across the grid: points differ by (β, γ) only).

Continuous time
---------------
``lams=[...]`` sweeps MGF(λ) (λ = 0 is gradient flow) up to ``t_max``: every point is
``dlnmomentum.mgf(problem_r, λ, t_max=t_max, alpha=alpha, tol=tol, gradient=gradient)``
(its own default RK4 step and start refinement), bit for bit. The points of a data set
advance in lockstep groups of up to eight (:func:`dlnmomentum.kernels.flow_sweep._flow_sweep_chunk`,
groups in parallel): one RK4 step of every lane at a time, each lane with its own step
size, the gradients of all lanes of a stage in one register-blocked product; points with
similar numbers of steps share a group. ``s_plus``/``s_minus`` are then the integrals
:math:`I_\pm` of Theorem 1.

Fields
------
Indexed ``(rep, beta, gamma)`` (or ``(rep, lam)``); vectors add a trailing ``coord`` axis:

=========================  =====================================================================
``test_loss``              test loss of the final θ
``train_loss``             train loss of the final θ
``delta_inf_norm``         ‖Δ∞‖₂, Δ∞ = |w₊w₋| at the end of the run
``l1_norm``                ‖θ‖₁
``crossed``                1 if some coordinate of w₊ or w₋ changed sign, else 0
``status``                 :mod:`dlnmomentum.status` code (converged / max_steps / diverged)
``steps_done``             updates (integration steps for flows) done
``lam``                    λ = γ/(1-β)² (Proposition 1)
``s_plus``, ``s_minus``    the sums S± of Lemma 4 (I± for flows), ``coord`` vectors
``theta``                  final θ, ``coord`` vector
``prediction_gap``         Theorem 2: ‖θ - argmin D_ψΔ∞(·, θ̃₀)‖/‖·‖ (``theory=True``)
``normalized_distance``    ‖θ - θ^GF_Δ∞‖/‖θ^GF_Δ∞‖ (``theory=True``)
=========================  =====================================================================

The theory fields need a Newton solve per point: they are computed only with
``theory=True`` and only for converged points: status ``converged`` (``tol`` reached) or a
final train loss ``<= theory_tol`` (NaN elsewhere).

Store
-----
One HDF5 file (root attribute ``kind = "sweep"``, configuration JSON in ``config``):
dimension scales ``rep``, ``beta``, ``gamma`` (or ``lam``) and ``coord``, a dataset per field,
a ``done`` mask and a ``session`` number per point (which run of the sweep computed it).
Points are written in waves of whole blocks as they complete (the file is opened only for
those writes); an interrupted sweep (Ctrl-C, SIGTERM, or a killed process) resumes with
``sweep(..., store=path, resume=True)`` / :func:`resume_sweep` / ``dlnm sweep --resume`` and
computes only the points not yet marked done. The file opens in xarray
(``xarray.open_dataset(path, engine="h5netcdf")``).
"""

import hashlib
import json
import math
import os
import sys
import time
import warnings

import numpy as np

from . import status as st
from .problem import Problem, sparse_regression
from .validate import as_float, as_int

FORMAT_NAME = "dlnmomentum-sweep"
FORMAT_VERSION = 1

SCALAR_FIELDS = {
    "test_loss": (np.float64, "test loss of the final theta (NaN without a test set)"),
    "train_loss": (np.float64, "train loss L(theta) = ||X theta - y||^2/(2n) of the final theta"),
    "delta_inf_norm": (np.float64, "||Delta_inf||_2, Delta_inf = |w_plus w_minus| at the end of the run"),
    "l1_norm": (np.float64, "||theta||_1 of the final theta"),
    "crossed": (np.int8, "1 if some coordinate of w_plus or w_minus changed sign"),
    "status": (np.int8, "run status: 1 converged, 2 max_steps, 3 diverged (dlnmomentum.status)"),
    "steps_done": (np.int64, "updates (MGD/SMGD) or integration steps (flows) done"),
    "lam": (np.float64, "lambda = gamma/(1-beta)^2 (Proposition 1)"),
    "prediction_gap": (np.float64, "Theorem 2 prediction gap (theory=True; NaN if not computed)"),
    "normalized_distance": (np.float64,
                            "||theta - theta_GF(Delta_inf)||/||theta_GF(Delta_inf)|| (theory=True)"),
}
VECTOR_FIELDS = {
    "s_plus": (np.float64, "S_plus of Lemma 4 (I_plus of Theorem 1 for flows)"),
    "s_minus": (np.float64, "S_minus of Lemma 4 (I_minus of Theorem 1 for flows)"),
    "theta": (np.float64, "final theta"),
}
FIELDS = tuple(SCALAR_FIELDS) + tuple(VECTOR_FIELDS)
THEORY_FIELDS = ("prediction_gap", "normalized_distance")

#: Runs per block when ``block_size`` is not given (a multiple of the kernel's group width).
DEFAULT_BLOCK_SIZE = 8
#: Target wall-clock seconds of one kernel call (progress and Ctrl-C granularity).
CHUNK_SECONDS = 0.25
#: Target wall-clock seconds of one wave (points are written to the store after each wave).
WAVE_SECONDS = 20.0


# ---------------------------------------------------------------------------------------------------
# Grids
# ---------------------------------------------------------------------------------------------------

def parse_grid(text, name="grid"):
    """A 1-D grid from ``"start:stop:num"`` (linear), ``"start:stop:num:log"`` (geometric) or ``"a,b,c"``.

    Both ends are included: ``parse_grid("1e-3:1e-1:3:log")`` is ``[1e-3, 1e-2, 1e-1]``.
    """
    text = str(text).strip()
    try:
        if ":" in text:
            parts = text.split(":")
            if len(parts) not in (3, 4) or (len(parts) == 4 and parts[3] not in ("log", "lin")):
                raise ValueError
            start, stop, num = float(parts[0]), float(parts[1]), float(parts[2])
            if not num.is_integer() or num < 1:
                raise ValueError
            num = int(num)
            if len(parts) == 4 and parts[3] == "log":
                if start <= 0 or stop <= 0:
                    raise ValueError(f"{name}: a log grid needs positive ends, got {text!r}")
                return np.geomspace(start, stop, num)
            return np.linspace(start, stop, num)
        values = [float(v) for v in text.split(",") if v.strip()]
        if not values:
            raise ValueError
        return np.array(values)
    except ValueError as exc:
        if str(exc):
            raise
        raise ValueError(f"{name} must be 'start:stop:num', 'start:stop:num:log' or a comma list, "
                         f"got {text!r}") from None


def _as_grid(name, values, *, low=None, high=None, low_open=False, high_open=False):
    if isinstance(values, str):
        values = parse_grid(values, name)
    arr = np.atleast_1d(np.asarray(values, dtype=np.float64))
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of numbers, got shape {arr.shape}")
    for i, v in enumerate(arr):
        as_float(f"{name}[{i}]", float(v), low=low, high=high, low_open=low_open, high_open=high_open)
    if len(np.unique(arr)) != arr.size:
        raise ValueError(f"{name} must not repeat values")
    return arr


# ---------------------------------------------------------------------------------------------------
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
            raise KeyError(f"no field {name!r}; fields: {', '.join(self.data)}") from None

    def __getattr__(self, name):
        data = self.__dict__.get("data")
        if data is not None and name in data:
            return data[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self):
        sizes = ", ".join(f"{d}={self.done.shape[i]}" for i, d in enumerate(self.dims))
        return (f"Sweep({self.config.get('kind', '?')}: {sizes}; "
                f"{int(self.done.sum())}/{self.done.size} points "
                f"done{'; store ' + self.path if self.path else ''})")

    # -- reductions --------------------------------------------------------------------------------
    def mean(self, dim="rep", skipna=False):
        """Average over one dimension (``"rep"`` by default); returns a :class:`Sweep` without it.

        Float fields are averaged (``skipna``: ignoring NaN, e.g. diverged points); ``crossed``
        becomes the fraction of crossed runs, ``steps_done`` the mean; ``status`` is dropped.
        Only points done along the whole reduced axis are reported (NaN elsewhere).
        """
        if dim not in self.dims:
            raise ValueError(f"dim must be one of {self.dims}, got {dim!r}")
        axis = self.dims.index(dim)
        done = self.done.all(axis=axis)
        out = {}
        for name, arr in self.data.items():
            if name == "status":
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
        """An :class:`xarray.Dataset` with the grid coordinates (and λ as a coordinate)."""
        import xarray as xr

        variables = {}
        for name, arr in self.data.items():
            dims = self.dims + (("coord",) if np.ndim(arr) == len(self.dims) + 1 else ())
            attrs = {"description": (SCALAR_FIELDS.get(name) or VECTOR_FIELDS.get(name) or (None, name))[1]}
            variables[name] = xr.Variable(dims, np.asarray(arr), attrs)
        variables["done"] = xr.Variable(self.dims, self.done)
        coords = {k: v for k, v in self.coords.items() if k in self.dims or k == "coord"}
        attrs = {"kind": "sweep", "config": json.dumps(_jsonable(self.config))}
        return xr.Dataset(variables, coords=coords, attrs=attrs)

    def summary(self):
        """A few lines describing the sweep (the ``dlnm inspect`` text)."""
        return "\n".join(_summary_lines(self))


def _jsonable(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (np.floating, np.integer, np.bool_)):
        return value.item()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _summary_lines(sw):
    cfg = sw.config
    kind = cfg.get("kind", "?")
    sizes = " x ".join(f"{d}={n}" for d, n in zip(sw.dims, sw.shape, strict=True))
    lines = [f"sweep        : {kind}, dims {sizes}" + (f"  ({sw.path})" if sw.path else "")]
    if kind in ("mgd", "smgd"):
        g, b = np.asarray(cfg["gammas"]), np.asarray(cfg["betas"])
        lines.append(f"gamma        : {g.size} values in [{g.min():g}, {g.max():g}]")
        lines.append(f"beta         : {b.size} values in [{b.min():g}, {b.max():g}]")
        batch = ""
        if cfg.get("batch_size"):
            batch = f", batch size {cfg['batch_size']}" + (", with replacement" if cfg.get("replace") else "")
        lines.append(f"steps        : {cfg['steps']}{batch}")
    else:
        lam = np.asarray(cfg["lams"])
        lines.append(f"lambda       : {lam.size} values in [{lam.min():g}, {lam.max():g}]")
        lines.append(f"t_max        : {cfg['t_max']:g}")
    data = cfg.get("spec") or {"problem": "given Problem", "fingerprint": str(cfg.get("fingerprint",
                                                                                      ""))[:12]}
    lines.append(f"data         : reps={cfg['reps']}, seed={cfg['seed']}, "
                 + ", ".join(f"{k}={v}" for k, v in data.items()))
    lines.append(f"settings     : alpha={cfg['alpha']:g}, tol={cfg['tol']}, gradient={cfg['gradient']}, "
                 f"theory={cfg['theory']}")
    done = sw.done
    lines.append(f"done         : {int(done.sum())}/{done.size} points"
                 + (f", {cfg.get('sessions', 1)} session(s)" if "sessions" in cfg else ""))
    if done.any():
        status = np.asarray(sw.data["status"])[done]
        counts = {st.STATUS_NAMES.get(int(c), str(c)): int((status == c).sum()) for c in np.unique(status)}
        lines.append("status       : " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        lines.append(f"crossed      : {int(np.asarray(sw.data['crossed'])[done].sum())} points")
        for name in ("test_loss", "train_loss", "delta_inf_norm", "l1_norm", "prediction_gap",
                     "normalized_distance"):
            vals = np.asarray(sw.data[name], dtype=float)[done]
            vals = vals[np.isfinite(vals)]
            if vals.size:
                lines.append(f"{name:<13}: min {vals.min():.4e}  median {np.median(vals):.4e}  "
                             f"max {vals.max():.4e}  ({vals.size} finite)")
    return lines


# ---------------------------------------------------------------------------------------------------
# Plan: what a sweep computes
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
    return _jsonable(spec)


class _Plan:
    """The validated configuration of a sweep and its data sets."""

    def __init__(self, config, problem=None):
        self.config = config
        self.problem = problem
        self._problems = {}
        kind = config["kind"]
        self.discrete = kind in ("mgd", "smgd")
        if self.discrete:
            self.dims = ("rep", "beta", "gamma")
            self.gammas = np.asarray(config["gammas"], dtype=np.float64)
            self.betas = np.asarray(config["betas"], dtype=np.float64)
            self.grid_shape = (self.betas.size, self.gammas.size)
        else:
            self.dims = ("rep", "lam")
            self.lams = np.asarray(config["lams"], dtype=np.float64)
            self.grid_shape = (self.lams.size,)
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
        if self.discrete:
            c.update(beta=self.betas, gamma=self.gammas)
        else:
            c["lam"] = self.lams
        return c

    def lam_grid(self):
        if self.discrete:
            lam = self.gammas[None, :] / (1.0 - self.betas[:, None]) ** 2
        else:
            lam = self.lams
        return np.broadcast_to(lam, self.shape).copy()

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


def _make_config(problem_or_spec, gammas, betas, lams, steps, t_max, reps, batch_size, seed, tol, alpha,
                 replace,
                 gradient, theory, theory_tol):
    from .mgd import GRADIENT_FORMS, initial_weights, make_config

    if isinstance(problem_or_spec, Problem):
        problem, spec = problem_or_spec, None
    else:
        problem, spec = None, _check_spec(problem_or_spec)
    reps = as_int("reps", reps, low=1)
    seed = as_int("seed", seed, low=0, high=2**62)
    tol = as_float("tol", tol, low=0.0, allow_none=True)
    alpha = as_float("alpha", alpha, low=0.0, low_open=True)
    theory_tol = as_float("theory_tol", theory_tol, low=0.0)
    if not isinstance(theory, (bool, np.bool_)):
        raise TypeError(f"theory must be a bool, got {theory!r}")
    if gradient not in GRADIENT_FORMS:
        raise ValueError(f"gradient must be one of {GRADIENT_FORMS}, got {gradient!r}")
    example = problem if problem is not None else _spec_problem(spec, seed)
    initial_weights(example.d, alpha, None, None)
    config = {"format": FORMAT_NAME, "version": FORMAT_VERSION, "reps": reps, "seed": seed, "tol": tol,
              "alpha": alpha, "gradient": gradient, "theory": bool(theory), "theory_tol": theory_tol,
              "spec": spec, "fingerprint": _fingerprint(problem) if problem is not None else None,
              "n": example.n, "d": example.d}
    discrete = gammas is not None or betas is not None
    if discrete and lams is not None:
        raise ValueError("give either gammas and betas (a discrete (beta, gamma) grid) or lams (a flow "
                         "line), not both")
    if discrete:
        if gammas is None or betas is None:
            raise ValueError("a discrete sweep needs both gammas and betas")
        if steps is None:
            raise ValueError("a discrete sweep needs steps (updates per run)")
        if t_max is not None:
            raise ValueError("t_max is for flow sweeps (lams=...); a discrete sweep takes steps")
        gammas = _as_grid("gammas", gammas, low=0.0, low_open=True)
        betas = _as_grid("betas", betas, low=0.0, high=1.0, high_open=True)
        steps = as_int("steps", steps, low=0)
        replace = bool(replace)
        c = make_config(example, gammas[0], betas[0], steps, batch_size, replace, 0, tol, gradient)
        if problem is not None and reps > 1 and c.batch_size is None:
            raise ValueError("reps > 1 with a fixed Problem and full-batch MGD would repeat identical runs; "
                             "pass a spec (dict of sparse_regression arguments) to vary the data, or a "
                             "batch_size")
        config.update(kind=c.kind, gammas=gammas.tolist(), betas=betas.tolist(), steps=steps,
                      batch_size=c.batch_size, replace=replace if c.batch_size is not None else False)
    else:
        if lams is None:
            raise ValueError("give gammas and betas (discrete sweep) or lams (flow sweep)")
        if steps is not None:
            raise ValueError("steps is for discrete sweeps; a flow sweep (lams=...) takes t_max")
        if t_max is None:
            raise ValueError("a flow sweep (lams=...) needs t_max")
        if batch_size is not None:
            raise ValueError("batch_size is for discrete (SMGD) sweeps")
        if problem is not None and reps > 1:
            raise ValueError("reps > 1 with a fixed Problem would repeat identical flows; pass a spec")
        lams = _as_grid("lams", lams, low=0.0)
        t_max = as_float("t_max", t_max, low=0.0, low_open=True)
        config.update(kind="mgf", lams=lams.tolist(), t_max=t_max)
    return config, problem


def _spec_problem(spec, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return sparse_regression(**spec, seed=seed)


_SEMANTIC_KEYS = ("kind", "reps", "seed", "tol", "alpha", "gradient", "theory", "theory_tol", "spec",
                  "fingerprint", "gammas", "betas", "steps", "batch_size", "replace", "lams", "t_max", "n",
                  "d")


def _config_differences(a, b):
    return [k for k in _SEMANTIC_KEYS if _jsonable(a.get(k)) != _jsonable(b.get(k))]


# ---------------------------------------------------------------------------------------------------
# Per-point results
# ---------------------------------------------------------------------------------------------------

def _theory_fields(problem, theta, delta_inf, theta0_tilde, status, train_loss, theory_tol):
    """Theorem 2's fields for a converged point (status converged, or a train loss <= theory_tol)."""
    if not (status == st.CONVERGED or (status == st.MAX_STEPS and train_loss <= theory_tol)):
        return np.nan, np.nan
    from .theory import predict

    try:
        pred = predict(problem.X, problem.y, delta_inf, theta0_tilde, theta)
    except (ValueError, FloatingPointError, np.linalg.LinAlgError) as exc:
        warnings.warn(f"theory prediction failed for a sweep point: {exc}", RuntimeWarning, stacklevel=3)
        return np.nan, np.nan
    return float(pred.prediction_gap), float(pred.normalized_distance)


def _mgd_point(problem, beta, f, i, status, steps_done, w_plus0, w_minus0, theory, theory_tol):
    """The fields of one point from the kernel's fstate/istate (the formulas of ``MGDRun.finish``)."""
    from .kernels import mgd as K

    wp, wm = f[K.W_PLUS].copy(), f[K.W_MINUS].copy()
    theta = 0.25 * (wp * wp - wm * wm)
    one_minus_beta = 1.0 - beta
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        s_plus = (f[K.S_SUM_PLUS] + f[K.S_COMP_PLUS]) / one_minus_beta - np.log(np.abs(wp / w_plus0))
        s_minus = (f[K.S_SUM_MINUS] + f[K.S_COMP_MINUS]) / one_minus_beta - np.log(np.abs(wm / w_minus0))
    delta_inf = np.abs(wp * wm)
    train_loss = problem.train_loss(theta)
    with np.errstate(over="ignore", invalid="ignore"):  # a diverged point may be huge
        delta_norm = float(np.linalg.norm(delta_inf))
    out = {"test_loss": problem.test_loss(theta), "train_loss": train_loss,
           "delta_inf_norm": delta_norm, "l1_norm": float(np.abs(theta).sum()),
           "crossed": int(bool(i[K.CROSS_PLUS].any() or i[K.CROSS_MINUS].any())), "status": int(status),
           "steps_done": int(steps_done), "s_plus": s_plus, "s_minus": s_minus, "theta": theta}
    if theory:
        with np.errstate(over="ignore"):
            theta0_tilde = 0.25 * (w_plus0**2 * np.exp(-2 * s_plus) - w_minus0**2 * np.exp(-2 * s_minus))
        out["prediction_gap"], out["normalized_distance"] = _theory_fields(
            problem, theta, delta_inf, theta0_tilde, status, train_loss, theory_tol)
    return out


def _flow_point(result, problem, theory, theory_tol):
    out = {"test_loss": result.test_loss, "train_loss": result.train_loss,
           "delta_inf_norm": float(np.linalg.norm(result.delta_inf)), "l1_norm": result.l1_norm,
           "crossed": int(result.crossed), "status": int(result.status), "steps_done": int(result.steps_done),
           "s_plus": np.asarray(result.i_plus), "s_minus": np.asarray(result.i_minus),
           "theta": np.asarray(result.theta)}
    if theory:
        out["prediction_gap"], out["normalized_distance"] = _theory_fields(
            problem, np.asarray(result.theta), np.asarray(result.delta_inf), np.asarray(result.theta0_tilde),
            result.status, result.train_loss, theory_tol)
    return out


# ---------------------------------------------------------------------------------------------------
# Engines
# ---------------------------------------------------------------------------------------------------

def _aligned(shape, dtype=np.float64, align=64):
    """Zeros with a 64-byte aligned start (every SIMD access of the kernel stays inside a cache line)."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    buf = np.zeros(n + align // dtype.itemsize, dtype=dtype)
    off = (-buf.ctypes.data % align) // dtype.itemsize
    return buf[off:off + n].reshape(shape)


def _threads():
    import numba

    return int(numba.get_num_threads())


class _LockstepEngine:
    """Runs waves of discrete points with :func:`dlnmomentum.kernels.sweep._sweep_chunk`."""

    def __init__(self, plan, block_size):
        from .kernels import mgd as K
        from .kernels import sweep as KS
        from .mgd import initial_weights

        self.K, self.KS = K, KS
        self.plan = plan
        cfg = plan.config
        self.block_size = block_size
        self.groups_per_block = block_size // KS.LW
        p0 = plan.problem_for(0)
        self.n, self.d = p0.n, p0.d
        u0, v0 = initial_weights(self.d, cfg["alpha"], None, None)
        self.w_plus0, self.w_minus0 = u0 + v0, u0 - v0
        if cfg["batch_size"] is not None:
            self.mode = K.MODE_MINIBATCH
        elif cfg["gradient"] == "hessian" or (cfg["gradient"] == "auto" and self.d <= 2 * self.n):
            self.mode = K.MODE_HESSIAN
        else:
            self.mode = K.MODE_DATA
        self.tol = -1.0 if cfg["tol"] is None else float(cfg["tol"])
        self.batch_size = int(cfg["batch_size"] or 0)
        self.replace = bool(cfg["replace"])
        self.steps = int(cfg["steps"])
        self.ns_per_run_step = 150.0 / max(1, _threads())  # refined after each chunk
        self._data = {}

    def cost_per_point(self):
        return self.steps * self.ns_per_run_step * 1e-9

    def _rep_data(self, rep):
        got = self._data.get(rep)
        if got is None:
            KS = self.KS
            p = self.plan.problem_for(rep)
            n, d = p.n, p.d
            npad, dpad = -(-n // KS.TILE) * KS.TILE, -(-d // KS.TILE) * KS.TILE
            X = np.zeros((npad, dpad))
            X[:n, :d] = p.X
            H = np.zeros((dpad, dpad))
            H[:d, :d] = p.hessian
            b = np.zeros(dpad)
            b[:d] = p.b
            y = np.zeros(npad)
            y[:n] = p.y
            got = (X, np.ascontiguousarray(X.T), y, H, b)
            self._data[rep] = got
        return got

    def run_wave(self, points, flag, bar):
        """Advance the wave's points to the end. Returns the per-point outputs, or None if interrupted.

        ``points``: list of flat point indices (all of one wave, grouped by rep by the caller).
        """
        import numba

        KS, K = self.KS, self.K
        plan = self.plan
        # groups of LW lanes, one rep per group
        reps = [np.unravel_index(p, plan.shape)[0] for p in points]
        groups = []
        cur, cur_rep = [], None
        for local, r in enumerate(reps):
            if cur and (r != cur_rep or len(cur) == KS.LW):
                groups.append((cur_rep, cur))
                cur = []
            cur.append(local)
            cur_rep = r
        if cur:
            groups.append((cur_rep, cur))
        used_reps = sorted({r for r, _ in groups})
        rep_slot = {r: i for i, r in enumerate(used_reps)}
        data = [self._rep_data(r) for r in used_reps]
        Xs, XTs, ys, Hs, bs = (np.ascontiguousarray(np.stack([dd[k] for dd in data])) for k in range(5))
        ng = len(groups)
        nf = KS.frames_for(self.n, self.d)
        gam = np.zeros((ng, KS.LW))
        bet = np.zeros((ng, KS.LW))
        seeds = np.zeros((ng, KS.LW), dtype=np.int64)
        valid = np.zeros((ng, KS.LW), dtype=np.bool_)
        pts = np.full((ng, KS.LW), -1, dtype=np.int64)
        group_rep = np.zeros(ng, dtype=np.int64)
        for q, (r, members) in enumerate(groups):
            group_rep[q] = rep_slot[r]
            for g, local in enumerate(members):
                _, ib, ig = np.unravel_index(points[local], plan.shape)
                gam[q, g] = plan.gammas[ig]
                bet[q, g] = plan.betas[ib]
                seeds[q, g] = plan.seed_of(int(r))
                valid[q, g] = True
                pts[q, g] = local
        ST = _aligned((ng, nf * KS.FR))
        LANE = _aligned((ng, KS.N_LANE_PARAMS * KS.LW))
        IST = np.zeros((ng, K.N_INT_ROWS, self.d, KS.LW), dtype=np.int64)
        ACT = np.zeros((ng, KS.LW), dtype=np.int64)
        RNG = np.zeros((ng, KS.LW, 4), dtype=np.uint64)
        PERM = np.zeros((ng, KS.LW, self.n), dtype=np.int64)
        KS._init_groups(ST, LANE, IST, ACT, RNG, PERM, gam, bet, seeds, valid, self.w_plus0, self.w_minus0)
        npts = len(points)
        OUT_F = np.zeros((npts, K.N_FLOAT_ROWS, self.d))
        OUT_I = np.zeros((npts, K.N_INT_ROWS, self.d), dtype=np.int64)
        OUT_STATUS = np.zeros(npts, dtype=np.int64)
        OUT_STEPS = np.zeros(npts, dtype=np.int64)
        total = self.steps
        k0 = 0
        credited = 0
        chunk = max(16, min(total, 256))
        while True:
            n_steps = min(chunk, total - k0)
            t0 = time.perf_counter()
            with numba.parallel_chunksize(1):  # blocks are handed out one at a time (balance)
                KS._sweep_chunk(self.mode, Xs, XTs, ys, Hs, bs, self.n, self.d, self.tol, self.batch_size,
                                self.replace, group_rep, ST, LANE, IST, ACT, RNG, PERM, pts, k0, n_steps,
                                total, self.groups_per_block, OUT_F, OUT_I, OUT_STATUS, OUT_STEPS)
            elapsed = time.perf_counter() - t0
            k0 += n_steps
            if bar is not None:
                bar.update(npts * n_steps)
                credited += npts * n_steps
            if n_steps > 0 and elapsed > 0.02:
                self.ns_per_run_step = elapsed / (n_steps * npts) * 1e9
            if n_steps > 0:
                rate = elapsed / n_steps
                chunk = int(min(max(16, CHUNK_SECONDS / max(rate, 1e-9)), 1 << 20))
            if k0 >= total or not ACT.any():
                break
            if flag["signum"] is not None:
                return None
        if bar is not None and credited < npts * total:
            bar.update(npts * total - credited)
        return OUT_F, OUT_I, OUT_STATUS, OUT_STEPS

    def finish_points(self, points, outputs):
        OUT_F, OUT_I, OUT_STATUS, OUT_STEPS = outputs
        plan = self.plan
        cfg = plan.config
        results = []
        for local, p in enumerate(points):
            r, ib, _ = np.unravel_index(p, plan.shape)
            res = _mgd_point(plan.problem_for(int(r)), float(plan.betas[ib]), OUT_F[local], OUT_I[local],
                             OUT_STATUS[local], OUT_STEPS[local], self.w_plus0, self.w_minus0, cfg["theory"],
                             cfg["theory_tol"])
            results.append(res)
        return results


class _FlowEngine:
    """Runs waves of flow points in lockstep groups (:func:`_flow_batch`)."""

    def __init__(self, plan, block_size):
        self.plan = plan
        self.block_size = block_size
        self.seconds_per_step = None
        self._runs = {}

    def run_for(self, p):
        """The :class:`~dlnmomentum.flow.FlowRun` of point ``p`` (validated like ``mgf``; cached)."""
        run = self._runs.get(p)
        if run is None:
            from .flow import prepare_flow

            cfg = self.plan.config
            r, il = np.unravel_index(p, self.plan.shape)
            problem = self.plan.problem_for(int(r))
            run = prepare_flow(problem, float(self.plan.lams[il]), t_max=cfg["t_max"], alpha=cfg["alpha"],
                               tol=cfg["tol"], gradient=cfg["gradient"])
            self._runs[p] = run
        return run

    def planned_steps(self, points):
        return sum(self.run_for(p).total for p in points)

    def cost_per_point(self):
        sample = self.run_for(0)
        d = self.plan.d
        per_step = self.seconds_per_step or 4 * (d * d + 60 * d) * 1e-10
        return sample.total * per_step

    def run_wave(self, points, flag, bar):
        runs = [self.run_for(p) for p in points]
        reps = [int(np.unravel_index(p, self.plan.shape)[0]) for p in points]
        statuses = _flow_batch(runs, reps, flag, bar, self)
        if statuses is None:
            return None
        return runs, statuses

    def finish_points(self, points, outputs):
        runs, statuses = outputs
        cfg = self.plan.config
        results = []
        for p, run, status in zip(points, runs, statuses, strict=True):
            res = run.finish(status)
            results.append(_flow_point(res, run.problem, cfg["theory"], cfg["theory_tol"]))
            self._runs.pop(p, None)
        return results


def _flow_groups(runs, reps, threads, lanes):
    """Lanes of the lockstep groups: lists of run indices, one data set per group.

    Within a data set the runs are sorted by their number of RK4 steps (start refinement
    included) so that a group's lanes finish together; small sets are spread over at
    least ``threads`` groups so that every thread has work.
    """
    groups = []
    for rep in sorted(set(reps)):
        members = [i for i in range(len(runs)) if reps[i] == rep]
        members.sort(key=lambda i: -(runs[i].total + runs[i].config.start_steps
                                     * (runs[i].config.start_substeps - 1)))
        count = max(math.ceil(len(members) / lanes), min(len(members), threads))
        size = math.ceil(len(members) / count)
        groups += [(rep, members[k:k + size]) for k in range(0, len(members), size)]
    return groups


def _flow_batch(runs, reps, flag, bar, engine):
    """Advance every run to its end in lockstep groups; returns public statuses, or None if interrupted.

    :func:`dlnmomentum.kernels.flow_sweep._flow_sweep_chunk` advances groups of up to
    ``LANES`` runs on one data set stage by stage (gradients of all lanes at once), groups in
    parallel, chunk by chunk; every lane is bit for bit the single-run kernel, so every point
    is exactly ``dlnmomentum.mgf``. The runs' state arrays are updated at the end.
    """
    from .kernels import flow as KF
    from .kernels import flow_sweep as KFS

    modes = {run.mode for run in runs}
    if len(modes) != 1:
        raise RuntimeError("a flow sweep needs one gradient form for all points")
    groups = _flow_groups(runs, reps, max(1, _threads()), KFS.LANES)
    used = sorted({rep for rep, _ in groups})
    slot = {rep: k for k, rep in enumerate(used)}
    p0 = runs[0].problem
    X0 = p0.padded[0]
    n, dp = X0.shape
    nt, dpt = KFS.padded_rows(n, dp)
    Xs = np.zeros((len(used), nt, dp))
    XTs = np.zeros((len(used), dpt, n))
    Hs = np.zeros((len(used), dpt, dp))
    ys = np.zeros((len(used), n))
    bs = np.zeros((len(used), dp))
    for rep, k in slot.items():
        i = next(i for i in range(len(runs)) if reps[i] == rep)
        X, XT, H, b = runs[i].problem.padded
        Xs[k, :n], XTs[k, :dp], Hs[k, :dp], ys[k], bs[k] = X, XT, H, runs[i].problem.y, b
    ng = len(groups)
    nl = ng * KFS.LANES
    lane_of = np.full(nl, -1, dtype=np.int64)
    group_rep = np.zeros(ng, dtype=np.int64)
    for q, (rep, members) in enumerate(groups):
        group_rep[q] = slot[rep]
        lane_of[q * KFS.LANES:q * KFS.LANES + len(members)] = members
    r0 = runs[0]
    F = np.zeros((nl,) + r0.fstate.shape)
    I = np.zeros((nl,) + r0.istate.shape, dtype=np.int64)  # noqa: E741 - the kernel's name
    C = np.zeros((nl,) + r0.counters.shape, dtype=np.int64)
    cap = max(run.log_time.shape[0] for run in runs)
    LOG_T = np.full((nl, cap), np.nan)
    LOG_C = np.full((nl, cap), -1, dtype=np.int64)
    LOG_S = np.zeros((nl, cap), dtype=np.int64)
    lams, hs, tols = np.zeros(nl), np.ones(nl), np.full(nl, -1.0)
    n_fines, m_fines = np.zeros(nl, dtype=np.int64), np.ones(nl, dtype=np.int64)
    totals = np.zeros(nl, dtype=np.int64)
    live = np.zeros(nl, dtype=np.bool_)
    codes = np.zeros(nl, dtype=np.int64)
    for k in range(nl):
        i = lane_of[k]
        if i < 0:
            continue
        run, c = runs[i], runs[i].config
        if run.log_time.shape[0] != cap:
            raise RuntimeError("a flow sweep needs one crossing-log capacity for all points")
        F[k], I[k], C[k] = run.fstate, run.istate, run.counters
        LOG_T[k], LOG_C[k], LOG_S[k] = run.log_time, run.log_coord, run.log_sign
        lams[k], hs[k], tols[k] = c.lam, c.h, (-1.0 if c.tol is None else c.tol)
        n_fines[k], m_fines[k], totals[k] = c.start_steps, c.start_substeps, c.n_steps
        live[k] = run.done < run.total
    mode = modes.pop()
    chunk = 64
    interrupted = False
    while live.any():
        before = int(C[live, KF.STEPS_DONE].sum())
        t0 = time.perf_counter()
        KFS._flow_sweep_chunk(Xs, XTs, ys, Hs, bs, group_rep, mode, lams, hs, tols, n_fines, m_fines, totals,
                              live, F, I, C, LOG_T, LOG_C, LOG_S, codes, chunk)
        elapsed = time.perf_counter() - t0
        advanced = int(C[live, KF.STEPS_DONE].sum()) - before
        if bar is not None:
            bar.update(advanced)
        if advanced and elapsed > 0.01:
            engine.seconds_per_step = elapsed * max(1, _threads()) / advanced
        chunk = int(min(max(16, chunk * max(0.25, min(4.0, CHUNK_SECONDS / max(elapsed, 1e-9)))), 1 << 24))
        live &= (codes == KF.RUNNING) & (C[:, KF.STEPS_DONE] < totals)
        if live.any() and flag["signum"] is not None:
            interrupted = True
            break
    for k in range(nl):  # the runs' own arrays (a later wave or a store sees them)
        i = lane_of[k]
        if i >= 0:
            run = runs[i]
            run.fstate[...], run.istate[...], run.counters[...] = F[k], I[k], C[k]
            run.log_time[...], run.log_coord[...], run.log_sign[...] = LOG_T[k], LOG_C[k], LOG_S[k]
    if interrupted:
        return None
    statuses = [st.MAX_STEPS] * len(runs)
    for k in range(nl):
        i = lane_of[k]
        if i >= 0 and codes[k] == KF.CONVERGED:
            statuses[i] = st.CONVERGED
        elif i >= 0 and codes[k] == KF.DIVERGED:
            statuses[i] = st.DIVERGED
    return statuses


# ---------------------------------------------------------------------------------------------------
# The HDF5 store
# ---------------------------------------------------------------------------------------------------

def _h5():
    import h5py

    return h5py


def _store_errors():
    from .store_files import StoreCorruptError, StoreError, StoreExistsError

    return StoreError, StoreExistsError, StoreCorruptError


def _attr_str(value):
    return value.decode() if isinstance(value, bytes) else str(value)


class _SweepStore:
    """Create / reopen a sweep store and write finished points into it."""

    def __init__(self, path):
        self.path = path

    # -- creation ------------------------------------------------------------------------------------
    def create(self, plan):
        h5py = _h5()
        tmp = self.path + ".creating"
        with h5py.File(tmp, "w") as f:
            f.attrs["kind"] = "sweep"
            f.attrs["format"] = FORMAT_NAME
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["config"] = json.dumps(_jsonable(plan.config))
            f.attrs["dims"] = ",".join(plan.dims)
            f.attrs["sessions"] = 0
            f.attrs["created"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            coords = plan.coords()
            for name in plan.dims + ("coord",):
                ds = f.create_dataset(name, data=coords[name])
                ds.make_scale(name)
            for name, (dtype, desc) in SCALAR_FIELDS.items():
                if name == "lam" and not plan.discrete:
                    continue  # a flow sweep's lambda is its dimension scale
                self._field(f, plan, name, dtype, desc, vector=False)
            for name, (dtype, desc) in VECTOR_FIELDS.items():
                self._field(f, plan, name, dtype, desc, vector=True)
            if plan.discrete:
                f["lam"][...] = plan.lam_grid()
            done = f.create_dataset("done", shape=plan.shape, dtype=np.uint8, fillvalue=0)
            done.attrs["description"] = "1 where the point has been computed and written"
            session = f.create_dataset("session", shape=plan.shape, dtype=np.int16, fillvalue=0)
            session.attrs["description"] = "the run (1, 2, ...) of the sweep that computed the point, 0: none"
            for ds in (done, session):
                for axis, dim in enumerate(plan.dims):
                    ds.dims[axis].attach_scale(f[dim])
            if plan.problem is not None:
                g = f.create_group("problem")
                for name in ("X", "y", "X_test", "y_test"):
                    g.create_dataset(name, data=getattr(plan.problem, name))
                if plan.problem.theta_star is not None:
                    g.create_dataset("theta_star", data=plan.problem.theta_star)
                g.attrs["params"] = json.dumps(_jsonable(plan.problem.params))
        os.replace(tmp, self.path)

    @staticmethod
    def _field(f, plan, name, dtype, desc, vector):
        shape = plan.shape + ((plan.d,) if vector else ())
        kw = {"fillvalue": np.nan} if np.issubdtype(dtype, np.floating) else {}
        ds = f.create_dataset(name, shape=shape, dtype=dtype, **kw)
        ds.attrs["description"] = desc
        for axis, dim in enumerate(plan.dims):
            ds.dims[axis].attach_scale(f[dim])
        if vector:
            ds.dims[len(plan.dims)].attach_scale(f["coord"])

    # -- reading -------------------------------------------------------------------------------------
    def read_config(self):
        h5py = _h5()
        StoreError, _, StoreCorruptError = _store_errors()
        try:
            with h5py.File(self.path, "r") as f:
                if _attr_str(f.attrs.get("kind", "")) != "sweep":
                    raise StoreError(f"{self.path} is not a sweep store (kind {f.attrs.get('kind')!r})")
                config = json.loads(_attr_str(f.attrs["config"]))
                config["sessions"] = int(f.attrs.get("sessions", 0))
                problem = None
                if "problem" in f:
                    g = f["problem"]
                    problem = Problem(g["X"][...], g["y"][...],
                                      g["X_test"][...] if g["X_test"].size else None,
                                      g["y_test"][...] if g["y_test"].size else None,
                                      theta_star=g["theta_star"][...] if "theta_star" in g else None,
                                      params=json.loads(_attr_str(g.attrs.get("params", "{}"))))
                return config, problem
        except OSError as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreCorruptError(f"sweep store {self.path} cannot be read: {exc}") from exc

    def read(self, plan):
        h5py = _h5()
        with h5py.File(self.path, "r") as f:
            data = {}
            for name in FIELDS:
                if name == "lam" and not plan.discrete:
                    data[name] = np.broadcast_to(f["lam"][...], plan.shape).copy()
                else:
                    data[name] = f[name][...]
            done = f["done"][...].astype(bool)
            session = f["session"][...]
            config = json.loads(_attr_str(f.attrs["config"]))
            config["sessions"] = int(f.attrs.get("sessions", 0))
        return data, done, session, config

    # -- writing -------------------------------------------------------------------------------------
    def start_session(self):
        h5py = _h5()
        with h5py.File(self.path, "r+") as f:
            n = int(f.attrs.get("sessions", 0)) + 1
            f.attrs["sessions"] = n
        return n

    def write_points(self, plan, points, results, session):
        """Write finished points; the done mask is written last (a torn write leaves them not done)."""
        from .store_files import signals_blocked

        h5py = _h5()
        idx = tuple(np.array(ix) for ix in np.unravel_index(np.asarray(points), plan.shape))
        with signals_blocked(), h5py.File(self.path, "r+") as f:
            for name in FIELDS:
                if name == "lam":
                    continue
                ds = f[name]
                arr = ds[...]
                values = [res.get(name, np.nan) for res in results]
                arr[idx] = np.asarray(values, dtype=arr.dtype)
                ds[...] = arr
            sess = f["session"][...]
            sess[idx] = session
            f["session"][...] = sess
            done = f["done"][...]
            done[idx] = 1
            f["done"][...] = done
            f.flush()


def _lock(path):
    from .store_files import WriterLock

    return WriterLock.acquire(path, "writing a sweep")


# ---------------------------------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------------------------------

def _waves(plan, pending, engine, block_size, wave_size=None):
    """Split the pending points (flat indices, increasing) into waves of whole blocks."""
    if not pending:
        return []
    threads = max(1, _threads())
    if wave_size is not None:
        size = math.ceil(wave_size / block_size) * block_size
        return [pending[i:i + size] for i in range(0, len(pending), size)]
    unit = block_size * threads
    per_point = max(engine.cost_per_point(), 1e-9)
    size = max(2 * unit, int(WAVE_SECONDS * threads / per_point) // unit * unit)
    # balance: equal waves, each a multiple of the per-thread unit where possible
    n = len(pending)
    nwaves = max(1, math.ceil(n / size))
    size = math.ceil(n / nwaves)
    size = math.ceil(size / unit) * unit
    return [pending[i:i + size] for i in range(0, n, size)]


def _progress(progress, total, desc, initial=0):
    if progress is None:
        progress = bool(total > 1e8 and sys.stderr.isatty())
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="run-step", unit_scale=True, dynamic_ncols=True,
                smoothing=0.1)


def _execute(plan, store, progress, block_size, log, wave_size=None):
    from ._driver import deferred_signals

    data = plan.empty_data()
    done = np.zeros(plan.shape, dtype=bool)
    session = 1
    if store is not None:
        sdata, sdone, _, _ = store.read(plan)
        for name in FIELDS:
            data[name] = sdata[name]
        done = sdone.copy()
        session = store.start_session()
    data["lam"] = plan.lam_grid()
    engine = _LockstepEngine(plan, block_size) if plan.discrete else _FlowEngine(plan, block_size)
    pending = np.flatnonzero(~done.ravel()).tolist()
    interrupted = False
    if plan.discrete:
        work = len(pending) * plan.config["steps"] * 1.0
    else:
        work = engine.planned_steps(pending) * 1.0 if (progress or progress is None) else 0.0
    bar = _progress(progress, work, plan.config["kind"])
    written = 0
    try:
        with deferred_signals() as flag:
            for wave in _waves(plan, pending, engine, block_size, wave_size):
                outputs = engine.run_wave(wave, flag, bar)
                if outputs is None:
                    interrupted = True
                    break
                results = engine.finish_points(wave, outputs)
                idx = np.unravel_index(np.asarray(wave), plan.shape)
                for name in FIELDS:
                    if name == "lam":
                        continue
                    values = [res.get(name, np.nan) for res in results]
                    data[name][idx] = np.asarray(values, dtype=data[name].dtype)
                done[idx] = True
                if store is not None:
                    store.write_points(plan, wave, results, session)
                written += len(wave)
                if log is not None:
                    log(f"wrote {written}/{len(pending)} pending points ({int(done.sum())}/{done.size} done)")
                if flag["signum"] is not None:
                    interrupted = True
                    break
    except KeyboardInterrupt:
        interrupted = True
    finally:
        if bar is not None:
            bar.close()
    return data, done, interrupted


def sweep(problem_or_spec, *, gammas=None, betas=None, lams=None, steps=None, t_max=None, reps=1,
          batch_size=None, seed=0, store=None, tol=None, progress=None, alpha=0.01, replace=False,
          gradient="auto", block_size=None, theory=False, theory_tol=1e-8, resume=False, overwrite=False,
          log=None, wave_size=None):
    r"""Run MGD/SMGD over a (β, γ) grid, or MGF(λ) over a λ line, for ``reps`` data sets.

    Parameters
    ----------
    problem_or_spec : Problem or dict
        A :class:`~dlnmomentum.Problem` (the same data for every rep) or a dict of
        :func:`~dlnmomentum.sparse_regression` arguments (``n, d, s, mu, sigma, n_test``):
        rep ``r`` is generated with seed ``seed + r``.
    gammas, betas : sequence of float or str
        Step sizes γ > 0 and momenta β in [0, 1) of a discrete sweep (strings as in
        :func:`parse_grid`, e.g. ``"1e-3:1e-1:20:log"``).
    lams : sequence of float or str
        λ ≥ 0 of a flow sweep (λ = 0: gradient flow).
    steps : int
        Updates per discrete run (as ``steps`` of :func:`dlnmomentum.mgd`).
    t_max : float
        End time of every flow.
    reps : int
        Number of data replications.
    batch_size : int, optional
        SMGD batch size (``None``: full batch), as in :func:`dlnmomentum.mgd`.
    seed : int
        Data seed of rep 0 (rep r: ``seed + r``) and the batch seed of every point of rep r.
    store : path, optional
        Stream the sweep to this HDF5 file (see the module docstring).
    tol : float, optional
        Stop a run at the first iterate whose train loss is ``<= tol``.
    progress : bool, optional
        tqdm bar over run-steps with an ETA; default: only for long sweeps on a terminal.
    alpha : float
        Initialisation ``u0 = α·1``, ``v0 = 0``.
    replace : bool
        SMGD batches with replacement.
    gradient : {"auto", "hessian", "data"}
        Full-batch gradient form, as in :func:`dlnmomentum.mgd`.
    block_size : int, optional
        Runs per parallel block (a multiple of 8, the lanes of a SIMD group; default 8). Never changes a result bit.
    theory : bool
        Also compute ``prediction_gap`` and ``normalized_distance`` (a Newton solve per point).
    theory_tol : float
        Theory fields only for converged points: status ``converged``, or a final train loss
        ``<= theory_tol`` (runs without ``tol``).
    resume : bool
        Continue an existing ``store`` with the same configuration (only missing points run).
    overwrite : bool
        Replace an existing ``store``.
    log : callable, optional
        Called with a line of text after every written wave.
    wave_size : int, optional
        Points per wave (rounded up to whole blocks); a wave's points are written together.
        Default: about ``WAVE_SECONDS`` of work.

    Returns
    -------
    Sweep
        ``complete`` is False when the sweep was interrupted (Ctrl-C / SIGTERM); the points
        done so far are in the store.
    """
    from .kernels.sweep import LW

    config, problem = _make_config(problem_or_spec, gammas, betas, lams, steps, t_max, reps, batch_size,
                                   seed, tol,
                                   alpha, replace, gradient, theory, theory_tol)
    block_size = _block_size(block_size, LW)
    wave_size = as_int("wave_size", wave_size, low=1, allow_none=True)
    plan = _Plan(config, problem)
    if store is None:
        if resume:
            raise ValueError("resume=True needs a store")
        return _run_plan(plan, None, progress, block_size, log, wave_size)
    path = _store_path(store)
    StoreError, StoreExistsError, _ = _store_errors()
    lock = _lock(path)
    try:
        sw = _SweepStore(path)
        if os.path.exists(path):
            if overwrite:
                os.remove(path)
            elif resume:
                stored, _ = sw.read_config()
                diff = _config_differences(stored, config)
                if diff:
                    raise StoreError(f"sweep store {path} was created with a different configuration "
                                     f"(differs in {', '.join(diff)}); use another store or overwrite=True")
            else:
                raise StoreExistsError(f"sweep store {path} exists; pass resume=True to continue it or "
                                       "overwrite=True to replace it")
        if not os.path.exists(path):
            sw.create(plan)
        return _run_plan(plan, sw, progress, block_size, log, wave_size)
    finally:
        lock.release()


def resume_sweep(path, *, progress=None, block_size=None, log=None, wave_size=None):
    """Continue the sweep stored at ``path`` with its stored configuration (only missing points run)."""
    from .kernels.sweep import LW

    path = _store_path(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"sweep store {path} does not exist")
    block_size = _block_size(block_size, LW)
    lock = _lock(path)
    try:
        sw = _SweepStore(path)
        config, problem = sw.read_config()
        config.pop("sessions", None)
        plan = _Plan(config, problem)
        return _run_plan(plan, sw, progress, block_size, log, as_int("wave_size", wave_size, low=1,
                                                                     allow_none=True))
    finally:
        lock.release()


def open_sweep(path):
    """Read a sweep store into a :class:`Sweep` (points not done hold NaN)."""
    path = _store_path(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"sweep store {path} does not exist")
    sw = _SweepStore(path)
    config, problem = sw.read_config()
    plan = _Plan(config, problem)
    data, done, _, config = sw.read(plan)
    return Sweep(plan.dims, plan.coords(), data, done, config, path=path)


def _run_plan(plan, store, progress, block_size, log, wave_size=None):
    data, done, interrupted = _execute(plan, store, progress, block_size, log, wave_size)
    if store is not None:
        result = open_sweep(store.path)
        result.interrupted = interrupted
        return result
    sw = Sweep(plan.dims, plan.coords(), data, done, plan.config)
    sw.interrupted = interrupted
    return sw


def _block_size(block_size, lw):
    if block_size is None:
        return DEFAULT_BLOCK_SIZE
    block_size = as_int("block_size", block_size, low=lw)
    if block_size % lw:
        raise ValueError(f"block_size must be a multiple of {lw} (runs per SIMD group), got {block_size}")
    return block_size


def _store_path(path):
    try:
        return os.fspath(path)
    except TypeError:
        raise TypeError(f"store must be a path (str or os.PathLike), got {type(path).__name__}") from None


# ---------------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------------

def inspect_lines(path):
    """Text lines summarising the sweep store at ``path`` (used by ``dlnm inspect``)."""
    sw = open_sweep(path)
    lines = _summary_lines(sw)
    try:
        size = os.path.getsize(path)
        lines.append(f"file         : {size / 1024:.1f} KiB, format {FORMAT_NAME} v{FORMAT_VERSION}")
    except OSError:
        pass
    return lines


def _cmd_sweep(args):
    from .cli import problem_from_args

    log = None
    if args.log:
        def log(line):
            print(f"[dlnm sweep] {line}", file=sys.stderr, flush=True)

    progress = not args.no_progress and sys.stderr.isatty()
    if args.threads is not None:
        import numba

        numba.set_num_threads(as_int("threads", args.threads, low=1, high=numba.config.NUMBA_NUM_THREADS))
    if args.resume and args.store and os.path.exists(args.store):
        result = resume_sweep(args.store, progress=progress, block_size=args.block_size, log=log,
                              wave_size=args.wave_size)
    else:
        if args.lams is None and (args.gammas is None or args.betas is None):
            raise ValueError("dlnm sweep needs --gammas and --betas (or --lams), or --resume with an "
                             "existing --store")
        spec = {"n": args.n, "d": args.d, "s": args.s, "mu": args.mu, "sigma": args.sigma,
                "n_test": args.n_test}
        problem_from_args(args)  # validates the data arguments
        result = sweep(spec, gammas=args.gammas, betas=args.betas, lams=args.lams, steps=args.steps,
                       t_max=args.t_max, reps=args.reps, batch_size=args.batch_size, seed=args.data_seed,
                       store=args.store, tol=args.tol, progress=progress, alpha=args.alpha,
                       replace=args.replace, gradient=args.gradient, block_size=args.block_size,
                       theory=args.theory, theory_tol=args.theory_tol, overwrite=args.overwrite,
                       resume=args.resume, log=log, wave_size=args.wave_size)
    if args.json:
        out = {"complete": result.complete, "interrupted": bool(getattr(result, "interrupted", False)),
               "done": int(result.done.sum()), "points": int(result.done.size), "store": result.path}
        print(json.dumps(out))
    else:
        print(result.summary())
    if getattr(result, "interrupted", False):
        print(f"dlnm sweep: interrupted; {int(result.done.sum())}/{result.done.size} points done"
              + (f"; continue with: dlnm sweep --resume --store {result.path}" if result.path else ""),
              file=sys.stderr)
        return 130
    return 0


def register_cli(subparsers):
    """Add ``dlnm sweep``."""
    from .cli import add_problem_arguments, parse_int

    p = subparsers.add_parser(
        "sweep", help="run a (beta, gamma) grid of MGD/SMGD runs (or a lambda line of flows) over data reps",
        description="Run MGD/SMGD over a (beta, gamma) grid, in lockstep on all cores, for --reps data sets "
                    "(rep r: data seed --data-seed + r), optionally streamed to a resumable HDF5 store. "
                    "Grids: 'start:stop:num' (linear), 'start:stop:num:log' (geometric) or 'a,b,c'. "
                    "Example: dlnm sweep --gammas 1e-3:1e-1:20:log --betas 0:0.95:20 --steps 1e6 --reps 5 "
                    "--store f.h5")
    p.add_argument("--gammas", type=lambda t: parse_grid(t, "--gammas"), default=None,
                   help="step sizes gamma")
    p.add_argument("--betas", type=lambda t: parse_grid(t, "--betas"), default=None,
                   help="momenta beta in [0, 1)")
    p.add_argument("--lams", type=lambda t: parse_grid(t, "--lams"), default=None,
                   help="lambda values of a flow sweep (0 = gradient flow)")
    p.add_argument("--steps", type=parse_int, default=None, help="updates per discrete run, e.g. 1e6")
    p.add_argument("--t-max", type=float, default=None, help="end time of a flow sweep")
    p.add_argument("--reps", type=int, default=1, help="data replications (default 1)")
    p.add_argument("--batch-size", type=int, default=None, help="SMGD batch size (default: full batch)")
    p.add_argument("--replace", action="store_true", help="SMGD batches with replacement")
    p.add_argument("--alpha", type=float, default=0.01, help="initialisation scale u0 = alpha, v0 = 0")
    p.add_argument("--tol", type=float, default=None, help="stop a run when its train loss is <= tol")
    p.add_argument("--gradient", choices=("auto", "hessian", "data"), default="auto", help="gradient form")
    p.add_argument("--theory", action="store_true", help="compute Theorem 2's prediction gap and the "
                   "normalized distance for converged points")
    p.add_argument("--theory-tol", type=float, default=1e-8, help="with --theory: points that end with a "
                   "train loss <= this count as converged (default 1e-8)")
    p.add_argument("--store", default=None, help="HDF5 file to stream the sweep to")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted sweep in --store (its stored "
                   "configuration is used); starts it if the file does not exist")
    p.add_argument("--overwrite", action="store_true", help="replace an existing --store")
    p.add_argument("--block-size", type=int, default=None, help="runs per parallel block (multiple of 8)")
    p.add_argument("--threads", type=int, default=None, help="number of threads (default: all cores)")
    p.add_argument("--wave-size", type=int, default=None, help="points written to the store together "
                   "(default: about 20 s of work)")
    p.add_argument("--log", action="store_true", help="print a line to stderr after every written wave")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_problem_arguments(p)
    p.set_defaults(func=_cmd_sweep)
