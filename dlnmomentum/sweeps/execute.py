"""Running a sweep plan: waves of points through an engine, written to the store as they finish.

Points are computed in waves of whole blocks; after each wave the points go to the store
(when there is one) and Ctrl-C/SIGTERM are checked, so an interrupted sweep keeps every
finished wave and resumes with only the missing points.
"""

import math
import os
import warnings

import numpy as np

from ..driver import deferred_signals
from ..kernels.sweep import LW
from ..progress import RUN_STEPS_PER_SECOND
from ..progress import resolve as resolve_progress
from ..progress import start as start_progress
from ..runs.points import FIELDS, point_columns
from ..store.files import StoreBusyError, lock_holder
from ..store.handles import sweep_stopped
from ..store.kinds import how
from ..store.network_sweep import FORMAT_NAME as NETWORK_FORMAT_NAME
from ..store.network_sweep import FORMAT_VERSION as NETWORK_FORMAT_VERSION
from ..store.sweep_format import FORMAT_NAME, FORMAT_VERSION, SweepFile
from ..validate import MAX_SWEEP_POINTS, ParameterValueError, as_int, as_store_path
from .flows import FlowEngine
from .lockstep import LockstepEngine, threads
from .networks import is_network_sweep, open_networks_sweep
from .plan import Plan
from .result import Sweep, summary_lines

#: Runs per block when ``block_size`` is not given (a multiple of the kernel's group width).
DEFAULT_BLOCK_SIZE = 8
#: Target wall-clock seconds of one wave (points are written to the store after each wave).
WAVE_SECONDS = 20.0


#: Engines by device: ``cpu`` (lockstep SIMD kernels, threads over blocks) and ``cuda`` (one warp per run).
DEVICES = ("cpu", "cuda")


def check_device(device, plan=None, here=True):
    """``device`` validated (and, for ``cuda``, a GPU and numba-cuda found) before any work starts.

    ``here=False``: the points run elsewhere (Dask workers, :mod:`.distributed`), which check for
    their GPU themselves; only the name and the plan (its design and the shapes the kernels run) are checked here.
    """
    if device not in DEVICES:
        raise ParameterValueError(f"device must be one of {DEVICES}, got {device!r}", "device")
    if device == "cuda":
        if plan is not None and not plan.discrete:
            raise ParameterValueError("device='cuda' runs discrete (gammas, betas) sweeps; flow sweeps (lams=...) run "
                                      "on the CPU engine (device='cpu')", "device", "lams", "device=")
        from .cuda import check_plan, require_cuda

        if here:
            require_cuda()
        if plan is not None:  # (a shape the kernels refuse is refused before a store is created, also for Dask)
            check_plan(plan)
    return device


def make_engine(plan, block_size, device="cpu"):
    """The engine that advances the plan's points on ``device``."""
    if check_device(device) == "cuda":
        from .cuda import CudaEngine  # imports numba.cuda: only when asked for

        return CudaEngine(plan, block_size)
    return LockstepEngine(plan, block_size) if plan.discrete else FlowEngine(plan, block_size)


def waves(plan, pending, engine, block_size, wave_size=None):
    """Split the pending points (flat indices, increasing) into waves of whole blocks."""
    if not pending:
        return []
    # the runs an engine advances at once, each at its cost_per_point: the CPU threads, or 1 for an engine whose
    # cost is what the whole device takes per point (the GPU's): a wave is then about WAVE_SECONDS, not times the
    # CPU threads (320 s between store writes with 16 threads)
    nthreads = max(1, int(getattr(engine, "wave_threads", threads)()))
    if wave_size is not None:
        size = math.ceil(wave_size / block_size) * block_size
        return [pending[i:i + size] for i in range(0, len(pending), size)]
    unit = block_size * nthreads
    per_point = max(engine.cost_per_point(), 1e-9)
    size = max(2 * unit, int(WAVE_SECONDS * nthreads / per_point) // unit * unit)
    cap = getattr(engine, "max_wave_points", None)  # (waves that must fit a memory: the CPU lanes', the GPU's)
    if cap is not None:
        size = max(unit, min(size, cap() // unit * unit))
    # balance: equal waves, each a multiple of the per-thread unit where possible
    n = len(pending)
    nwaves = max(1, math.ceil(n / size))
    size = math.ceil(n / nwaves)
    size = math.ceil(size / unit) * unit
    return [pending[i:i + size] for i in range(0, n, size)]


class CompileAwareBar:
    """A tqdm bar whose rate (and ETA) starts after the first update: the first kernel call of a session
    compiles (seconds), and a rate measured over it would show a multi-hour ETA for a sweep of minutes."""

    def __init__(self, bar):
        self.bar = bar
        self.first = True

    def update(self, n):
        if self.first:
            self.first = False
            self.bar.reset(total=self.bar.total)  # the clock and the rate estimate start now
            self.bar.initial = self.bar.n = self.bar.last_print_n = n
            self.bar.refresh()
            return
        self.bar.update(n)

    def close(self):
        self.bar.close()


def _progress(progress, total, desc, initial=0):
    how = resolve_progress(progress, total / RUN_STEPS_PER_SECOND)
    bar = start_progress(how, total=total, initial=initial, desc=desc, unit="run-step")
    return CompileAwareBar(bar) if how == "bar" else bar  # (log lines measure their rate from the first update)


def begin(plan, store):
    """``(data, done, session)`` at the start of a session: the store's points (damaged chunks not done:
    their points run again) and a new session number, or empty data without a store.

    With a store, the point fields of ``data`` are the store writer's copy of its grid (``SweepFile.read`` with
    ``repair``), which :meth:`~dlnmomentum.store.sweep_format.SweepFile.write_points` fills: one copy of the grid,
    not two (``record(..., shared=True)`` then only marks the points done)."""
    done = np.zeros(plan.shape, dtype=bool)
    session = 1
    if store is None:
        data = plan.empty_data()
    else:
        sdata, sdone, _, stored = store.read(plan, repair=True)
        if store.repaired:  # points done before, lost to damaged chunks: computed again, and said so
            warnings.warn(f"sweep store {store.path}: {store.repaired} points were in damaged chunks (checksum "
                          "failed); they are computed again", RuntimeWarning, stacklevel=4)
        data = {name: sdata[name] for name in FIELDS}
        done = sdone.copy()
        # a complete store (every chunk intact) stays as it is: no session, nothing written
        session = store.start_session(plan) if not done.all() else int(stored.get("sessions", 1))
    data.update(plan.parameters())
    return data, done, session


def record(plan, data, done, points, results, shared=False):
    """Put finished points (flat indices and their fields: the point dicts or their :func:`point_columns`) into the
    in-memory grid; ``shared``: its fields are the store writer's copy, which holds them already (:func:`begin`),
    and only ``done`` is marked."""
    idx = np.unravel_index(np.asarray(points), plan.shape)
    if not shared:
        columns = point_columns(results)
        for name in FIELDS:
            data[name][idx] = columns[name].astype(data[name].dtype, copy=False)
    done[idx] = True


def execute(plan, store, progress, block_size, log, wave_size=None, device="cpu"):
    data, done, session = begin(plan, store)
    engine = make_engine(plan, block_size, device)
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
            for wave in waves(plan, pending, engine, block_size, wave_size):
                outputs = engine.run_wave(wave, flag, bar)
                if outputs is None:
                    interrupted = True
                    # the points of the wave that had ended are results: written, not computed again on resume
                    finished = getattr(engine, "take_finished", lambda: None)()
                    if finished is None:
                        break
                    wave, outputs = finished
                results = point_columns(engine.finish_points(wave, outputs))  # (once, for the store and the grid)
                if store is not None:
                    store.write_points(plan, wave, results, session)
                # (after the write: `done` counts the points in the store)
                record(plan, data, done, wave, results, shared=store is not None)
                written += len(wave)
                outputs = results = None  # (not held while the next wave allocates its own)
                if log is not None:
                    log(f"wrote {written}/{len(pending)} pending points ({int(done.sum())}/{done.size} done)")
                if interrupted or flag["signum"] is not None:
                    interrupted = True
                    break
    except KeyboardInterrupt:
        interrupted = True
    except StoreBusyError as exc:  # another program holds an HDF5 lock on the store: say how to go on
        raise sweep_stopped(exc, store.path, done) from exc
    finally:
        if bar is not None:
            bar.close()
    # a stop request that came with the last points is no interruption: the sweep is complete
    return data, done, interrupted and not done.all()


def open_sweep(path):
    """Read a sweep store (diagonal or network) into a :class:`Sweep` (points not done hold NaN)."""
    path = store_path(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"sweep store {path} does not exist")
    if is_network_sweep(path):
        return open_networks_sweep(path)
    sw = SweepFile(path)
    config, problem = sw.read_config()
    plan = Plan(config, problem)
    data, done, _, config = sw.read(plan)
    return Sweep(plan.dims, plan.coords(), data, done, config, path=path)


def run_plan(plan, store, progress, block_size, log, wave_size=None, device="cpu", executor=None):
    """Run the plan's pending points with ``executor`` (default :func:`execute`, on this machine; a Dask
    cluster: :func:`.distributed.executor_for`) and return the :class:`Sweep`."""
    executor = execute if executor is None else executor
    data, done, interrupted = executor(plan, store, progress, block_size, log, wave_size, device)
    if store is not None:
        # the executor's grid (the writer's copy, begin) goes before the final read: not two grids at once
        data = None
        store.release()
        result = open_sweep(store.path)
        result.interrupted = interrupted
        return result
    sw = Sweep(plan.dims, plan.coords(), data, done, plan.config)
    sw.interrupted = interrupted
    return sw


def block_size_of(block_size, lw=LW):
    """The validated ``block_size`` (default :data:`DEFAULT_BLOCK_SIZE`)."""
    if block_size is None:
        return DEFAULT_BLOCK_SIZE
    block_size = as_int("block_size", block_size, low=lw, high=MAX_SWEEP_POINTS)
    if block_size % lw:
        raise ParameterValueError(f"block_size must be a multiple of {lw} (runs per SIMD group), got {block_size}",
                                  "block_size")
    return block_size


def store_path(path):
    """``path`` as a str, checked before any work (:func:`dlnmomentum.validate.as_store_path`: not empty, not a
    directory, in a directory that exists)."""
    return as_store_path(path)


def store_format(path):
    """``(format name, version)`` of the sweep or network sweep store at ``path``."""
    if is_network_sweep(path):
        return NETWORK_FORMAT_NAME, NETWORK_FORMAT_VERSION
    return FORMAT_NAME, FORMAT_VERSION


def inspect_lines(path):
    """Text lines summarising the sweep (or network sweep) store at ``path`` (used by ``dlnm inspect``)."""
    sw = open_sweep(path)
    lines = summary_lines(sw)
    if not sw.complete:  # say so, and how to go on (a running writer, or one that stopped or died)
        left = int(sw.done.size - sw.done.sum())
        holder = lock_holder(path)
        kind = "network-sweep" if is_network_sweep(path) else "sweep"
        state = (f"running: written by process {holder.get('pid', '?')} now" if holder is not None
                 else f"unfinished: continue it with {how(kind, path, 'resume')}")
        lines.insert(1, f"state        : {state} ({left} of {sw.done.size} points still to compute)")
    try:
        size = os.path.getsize(path)
        name, version = store_format(path)
        lines.append(f"file         : {size / 1024:.1f} KiB, format {name} v{version}")
    except OSError:
        pass
    return lines
