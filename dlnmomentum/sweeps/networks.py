"""Sweeps of MGD/SMGD on network problems over (γ, β) grids: :func:`networks_sweep`
(the user function is :func:`dlnmomentum.networks_sweep`).

Every point is the single run (:func:`dlnmomentum.runs.network.prepare_network`): the engine
(:mod:`.network_lockstep`) advances the points of a wave together, one compiled call per chunk in
parallel over points, each with the single run's own step and state, so a point equals
``dm.mgd(problem, γ, β, ...)`` bit for bit. Between chunks the points that ended are written to the
store and Ctrl-C/SIGTERM are checked. An interrupted sweep keeps its finished points and resumes
with only the missing ones. The result is the same labelled :class:`~dlnmomentum.Sweep` as
:func:`dlnmomentum.sweep`'s, with dims ``(rep, beta, gamma)`` and the fields of
:data:`dlnmomentum.runs.network.POINT_FIELDS`.
"""

import hashlib
import inspect
import os
import warnings

import numba
import numpy as np

from ..driver import deferred_signals
from ..networks import NetworkProblem, deep_linear, teacher_student
from ..progress import check as check_progress
from ..progress import resolve as resolve_progress
from ..progress import start as start_progress
from ..runs.network import POINT_FIELDS, prepare_network
from ..runs.network import make_config as make_run_config
from ..store import network_sweep as store
from ..store.files import (
    StoreBusyError,
    StoreError,
    StoreExistsError,
    real_path,
    to_jsonable,
)
from ..store.handles import sweep_stopped
from ..store.kinds import (
    repair_left_open,
    require_kind,
    require_overwritable,
    require_regular_or_absent,
    resume_or_overwrite,
)
from ..validate import MAX_GRID, ParameterValueError, as_int, as_seed, as_store_path, check_log, check_sweep_size
from .grid import as_grid
from .network_lockstep import NetworkLockstep, default_wave_size
from .result import Sweep

#: Problem generators a spec may name: rep ``r`` is ``generator(**spec, seed=seed + r)``.
GENERATORS = {"teacher_student": teacher_student, "deep_linear": deep_linear}

DIMS = ("rep", "beta", "gamma")


def _fingerprint(problem):
    h = hashlib.sha256()
    for arr in (problem.X, problem.y, problem.X_test, problem.y_test, problem.params0):
        a = np.ascontiguousarray(arr, dtype=np.float64)
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    h.update(repr((problem.widths, problem.biases, problem.activation)).encode())
    return h.hexdigest()


def _check_spec(spec):
    if not isinstance(spec, dict):
        raise TypeError("problem_or_spec must be a dlnmomentum.NetworkProblem or a dict with 'generator' "
                        f"({', '.join(GENERATORS)}) and its arguments, got {type(spec).__name__}")
    spec = dict(spec)
    generator = spec.pop("generator", None)
    if generator not in GENERATORS:
        raise ValueError(f"spec['generator'] must be one of {tuple(GENERATORS)}, got {generator!r}")
    if "seed" in spec:
        raise ValueError("spec must not hold 'seed': the data seed of rep r is seed + r (pass seed=)")
    if "widths" in spec:
        spec["widths"] = [as_int(f"widths[{i}]", w, low=1) for i, w in enumerate(spec["widths"])]  # never int(2.5)
    GENERATORS[generator](**spec, seed=0)  # validates the values
    return to_jsonable(dict(generator=generator, **{k: spec[k] for k in sorted(spec)}))


def make_config(problem_or_spec, gammas, betas, steps, reps=1, seed=0, tol=None, batch_size=None, replace=False):
    """``(config, problem)``: the validated JSON-able configuration of a network sweep."""
    gammas = as_grid("gammas", gammas, low=0.0, low_open=True)
    betas = as_grid("betas", betas, low=0.0, high=1.0, high_open=True)
    reps = as_int("reps", reps, low=1, high=MAX_GRID)
    check_sweep_size(reps, {"betas": len(betas), "gammas": len(gammas)})
    seed = as_seed("seed", seed, reps=reps)
    if isinstance(problem_or_spec, NetworkProblem):
        problem, spec, fingerprint = problem_or_spec, None, _fingerprint(problem_or_spec)
    else:
        spec, fingerprint = _check_spec(problem_or_spec), None
        problem = None
    first = problem if problem is not None else _generate(spec, seed)
    # one run's validation (errors name the parameter), with the grid's first point
    c = make_run_config(first, gammas[0], betas[0], steps, batch_size, replace, seed, tol)
    config = {"kind": c.kind, "gammas": gammas.tolist(), "betas": betas.tolist(), "steps": c.steps,
              "reps": reps, "seed": seed, "tol": c.tol, "batch_size": c.batch_size, "replace": c.replace,
              "spec": spec, "fingerprint": fingerprint}
    return config, problem


def config_differences(stored, requested):
    """The keys of ``requested`` whose values differ from ``stored``'s, a spec compared with its generator's defaults
    filled in (``{"generator": "deep_linear"}`` and the command line's full spec are the same data)."""
    def value(config, key):
        v = config.get(key)
        if key == "spec" and isinstance(v, dict) and v.get("generator") in GENERATORS:
            parameters = inspect.signature(GENERATORS[v["generator"]]).parameters
            v = dict({k: p.default for k, p in parameters.items() if k != "seed"}, **v)
        return to_jsonable(v)

    return [k for k in requested if value(stored, k) != value(requested, k)]


def _generate(spec, seed):
    args = {k: v for k, v in spec.items() if k != "generator"}
    if "widths" in args:
        args["widths"] = tuple(args["widths"])
    return GENERATORS[spec["generator"]](**args, seed=seed)


class NetworkPlan:
    """What a network sweep computes: the grid, the data set of each rep and each point's run."""

    def __init__(self, config, problem=None):
        self.config = config
        self.problem = problem
        self.gammas = np.asarray(config["gammas"], dtype=np.float64)
        self.betas = np.asarray(config["betas"], dtype=np.float64)
        self.reps = int(config["reps"])
        self.shape = (self.reps, self.betas.size, self.gammas.size)
        self._problems = {}

    def problem_for(self, rep):
        p = self._problems.get(rep)
        if p is None:
            spec = self.config["spec"]
            p = self.problem if spec is None else _generate(spec, self.config["seed"] + rep)
            self._problems[rep] = p
        return p

    def coords(self):
        return {"rep": np.arange(self.reps, dtype=np.int64), "beta": self.betas, "gamma": self.gammas}

    def lam_grid(self):
        return np.broadcast_to(self.gammas[None, None, :] / (1.0 - self.betas[None, :, None]) ** 2,
                               self.shape).copy()

    def run_of(self, point):
        """The run of flat point index ``point``: exactly ``dm.mgd(problem_for(rep), γ, β, ...)``."""
        rep, ib, ig = np.unravel_index(point, self.shape)
        c = self.config
        # (a store written before replace=True needed a batch_size may hold it for full batch, where it was ignored:
        # it still resumes, with the same points)
        replace = c["replace"] and c["batch_size"] is not None
        return prepare_network(self.problem_for(int(rep)), float(self.gammas[ig]), float(self.betas[ib]),
                               steps=c["steps"], batch_size=c["batch_size"], replace=replace,
                               seed=c["seed"] + int(rep), tol=c["tol"])

    def empty_data(self):
        out = {}
        for name, (dtype, _) in POINT_FIELDS.items():
            fill = np.nan if np.issubdtype(dtype, np.floating) else 0
            out[name] = np.full(self.shape, fill, dtype=dtype)
        out["lam"] = self.lam_grid()
        return out


def _threads(threads, pending):
    """Numba threads for the sweep kernel: ``threads`` (default: all), at most Numba's pool and the points."""
    threads = as_int("threads", threads, low=1, high=MAX_GRID, allow_none=True) or numba.config.NUMBA_NUM_THREADS
    return max(1, min(threads, numba.config.NUMBA_NUM_THREADS, max(pending, 1)))


def execute(plan, path, threads=None, wave_size=None, log=None, progress=None):
    """Run the pending points of ``plan`` (all, or those not done in the store at ``path``).

    Waves of ``wave_size`` points (default :func:`.network_lockstep.default_wave_size`) run on the
    lockstep engine with ``threads`` Numba threads; after every chunk the points that ended are
    written to the store and Ctrl-C/SIGTERM are checked (an interrupted wave drops its running points).
    ``progress`` as in :func:`dlnmomentum.progress.resolve`, over run-steps.
    """
    data = plan.empty_data()
    done = np.zeros(plan.shape, dtype=bool)
    session = 1
    if path is not None:
        config, _, sdata, sdone = store.read(path)
        data.update(sdata)
        done = sdone
        # a complete store stays as it is: no session, nothing written
        session = store.start_session(path) if not done.all() else int(config.get("sessions", 1))
    pending = np.flatnonzero(~done.ravel()).tolist()
    nthreads = _threads(threads, len(pending))
    size = as_int("wave_size", wave_size, low=1, allow_none=True) or default_wave_size(plan, nthreads)
    interrupted = False
    written = 0
    previous_threads = numba.get_num_threads()
    steps = plan.config["steps"]
    bar = None
    with deferred_signals() as flag:
        try:
            numba.set_num_threads(nthreads)  # restored below (the setting is per calling thread)
            engine = NetworkLockstep(plan)
            total = steps * len(pending)
            bar = start_progress(resolve_progress(progress, engine.ns_per_run_step * 1e-9 * total),
                                 total=total, desc=f"{plan.config['kind']} network sweep", unit="run-step")
            seen = 0
            for start in range(0, len(pending), size):
                for finished, results in engine.run_wave(pending[start:start + size]):  # after every chunk
                    if bar is not None:  # the steps run, and those a point that ended early will not need
                        credit = sum(steps - int(r["steps_done"]) for r in results)
                        bar.update(engine.run_steps - seen + credit)
                        seen = engine.run_steps
                    if finished:
                        index = np.unravel_index(np.asarray(finished), plan.shape)
                        values = {name: np.asarray([r[name] for r in results], dtype=dtype)
                                  for name, (dtype, _) in POINT_FIELDS.items()}
                        for name, v in values.items():
                            data[name][index] = v
                        if path is not None:
                            store.write_points(path, index, values, session)
                        done[index] = True  # (after the write: `done` counts the points in the store)
                        written += len(finished)
                        if log is not None:
                            log(f"wrote {written}/{len(pending)} pending points ({int(done.sum())}/{done.size} "
                                "done)")
                    if flag["signum"] is not None:  # stop within a chunk: the running points are dropped
                        break
                if flag["signum"] is not None:
                    interrupted = True
                    break
        except KeyboardInterrupt:
            interrupted = True
        except StoreBusyError as exc:  # another program holds an HDF5 lock on the store: how to go on
            raise sweep_stopped(exc, path, done, network=True) from exc
        finally:
            numba.set_num_threads(previous_threads)
            if bar is not None:
                bar.close()
    # a stop request that came with the last points is no interruption: the sweep is complete
    return data, done, interrupted and not done.all()


def networks_sweep(problem_or_spec, *, gammas, betas, steps, reps=1, seed=0, tol=None, batch_size=None,
                  replace=False, store_path=None, resume=False, overwrite=False, threads=None, wave_size=None,
                  log=None, progress=None):
    """MGD/SMGD on a network problem over a (β, γ) grid (the engine of :func:`dlnmomentum.networks_sweep`)."""
    check_progress(progress)  # before any work
    check_log(log)
    resume, overwrite = resume_or_overwrite(resume, overwrite)
    config, problem = make_config(problem_or_spec, gammas, betas, steps, reps, seed, tol, batch_size, replace)
    path = None if store_path is None else real_path(as_store_path(store_path))  # a symlink: the file it leads to
    plan = NetworkPlan(config, problem)
    if path is None:
        if resume:
            raise ParameterValueError("resume=True needs a store", "resume=", "store")
        data, done, interrupted = execute(plan, None, threads, wave_size, log, progress)
        sw = Sweep(DIMS, plan.coords(), data, done, config)
        sw.interrupted = interrupted
        return sw
    if overwrite:
        require_regular_or_absent(path, store.KIND)  # a device, FIFO, ...: refused before a lock file is made
    lock = store.lock(path)
    try:
        if os.path.exists(path):
            if overwrite:
                require_overwritable(path, store.KIND)  # only a network sweep store this package wrote is replaced
                os.remove(path)
            elif resume:
                repair_left_open(path, store.KIND)  # (a writer killed while it wrote a wave left HDF5's "open" flags)
                require_kind(path, store.KIND, action="resume")  # another kind of store: named, with how to continue it
                _repair(path)
                stored, _, _, _ = store.read(path)
                diff = config_differences(stored, config)
                if diff:
                    raise StoreError(f"network sweep store {path} was created with a different configuration "
                                     f"(differs in {', '.join(diff)}); use another store or overwrite=True")
            else:
                # (the command line's options too, as a run store's message names them)
                raise StoreExistsError(f"network sweep store {path} exists; pass resume=True (--resume) to continue "
                                       "it or overwrite=True (--overwrite) to replace it")
        if not os.path.exists(path):
            store.create(path, config, DIMS, plan.coords(), plan.shape, problem)
        _, _, interrupted = execute(plan, path, threads, wave_size, log, progress)
    finally:
        lock.release()
    sw = open_networks_sweep(path)
    sw.interrupted = interrupted
    return sw


def _repair(path):
    """Points of damaged chunks are computed again: say so (a warning names the store and the count)."""
    lost = store.repair(path)
    if lost:
        warnings.warn(f"network sweep store {path}: {lost} points were in damaged chunks (checksum failed); "
                      "they are computed again", RuntimeWarning, stacklevel=3)


def is_network_sweep(path):
    """True when ``path`` is a network sweep store."""
    return store.is_network_sweep(os.fspath(path))


def open_networks_sweep(path):
    """Read a network sweep store into a :class:`~dlnmomentum.Sweep` (points not done hold NaN)."""
    path = as_store_path(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"network sweep store {path} does not exist")
    config, problem, data, done = store.read(path)
    plan = NetworkPlan(config, problem)
    return Sweep(DIMS, plan.coords(), data, done, config, path=path)


def resume_networks_sweep(path, *, threads=None, wave_size=None, log=None, progress=None):
    """Continue the network sweep stored at ``path`` (only missing points run)."""
    check_progress(progress)
    check_log(log)
    path = real_path(as_store_path(path))  # through a symlink: the file it leads to is locked and written
    if not os.path.exists(path):
        raise FileNotFoundError(f"network sweep store {path} does not exist")
    lock = store.lock(path)
    try:
        repair_left_open(path, store.KIND)  # (a writer killed while it wrote a wave left HDF5's "open" flags)
        require_kind(path, store.KIND, action="resume")  # another kind of store: named, with how to continue it
        _repair(path)
        config, problem, _, _ = store.read(path)
        config.pop("sessions", None)
        plan = NetworkPlan(config, problem)
        _, _, interrupted = execute(plan, path, threads, wave_size, log, progress)
    finally:
        lock.release()
    sw = open_networks_sweep(path)
    sw.interrupted = interrupted
    return sw
