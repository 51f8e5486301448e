"""Sweeps on a Dask cluster: blocks of points run as tasks on the workers, the client writes the store.

``dlnmomentum.sweep(..., client=dask.distributed.Client(...))`` (``dlnm sweep --scheduler ADDRESS``)
runs the same plan as on one machine, on the workers of a cluster the user already runs (a
``LocalCluster``, ``dask worker`` processes, SLURM through dask-jobqueue, Kubernetes), and writes the
same store, bit for bit: every point is computed by the same engine (:func:`.execute.make_engine`: the
CPU lockstep or flow engine, or the CUDA engine with ``device="cuda"`` on workers that have a GPU),
whose lanes are the single-run kernel whatever the grouping of points.

How it runs
-----------
* The pending points (not ``done`` in the store) are cut into blocks of whole SIMD groups
  (:func:`task_blocks`); each block is one task, :func:`run_block`, which builds the engine on the
  worker (once per plan and process: :data:`_ENGINES`) and returns the point fields. The task's key is
  a hash of what it computes (the plan, the device and the block's points, :func:`block_key`), so a
  task recomputed after a lost worker, or submitted again by a restarted client while the cluster still
  holds it, is the same task with the same result.
* The plan reaches the workers as one task (:func:`_plan_payload`) the blocks depend on: data the
  scheduler can recompute, unlike scattered data, if every worker holding it is lost.
* Kernels never share a process between threads: a per-process lock (:data:`_KERNEL_LOCK`) serialises
  them (``parallel=True`` kernels are not safe to enter from several threads at once), and each task
  sets Numba's thread count to the cores of its host divided by the worker processes on that host
  (at most ``NUMBA_NUM_THREADS`` of the worker), so workers never oversubscribe the cores.
* Results stream back to the client as blocks finish; the client alone opens the store (no HDF5
  handle ever crosses a process boundary) and writes each batch of finished blocks as a wave
  (:meth:`~dlnmomentum.store.sweep_format.SweepFile.write_points`: points first, then the ``done``
  mask). A client killed at any moment leaves a store that ``resume=True`` (``dlnm sweep --resume``)
  continues with only the missing points; a point is written once per session. Ctrl-C or SIGTERM stops the
  sweep after the blocks already back are written (blocks still on the workers are cancelled).
* A block whose task fails :data:`RETRIES` + 1 times (or whose workers die more often than the
  scheduler's ``distributed.scheduler.allowed-failures``) is reported by :class:`BlockFailedError`,
  naming it, after every other block has been written (new blocks stop after :data:`MAX_FAILED_BLOCKS`
  failures).

``dask.distributed`` is imported only here and only when a client is used (the ``distributed``
extra: ``pip install "dlnmomentum[distributed]"``).
"""

import asyncio
import collections
import concurrent.futures
import hashlib
import json
import math
import os
import threading
import time

import numba
import numpy as np

from ..driver import deferred_signals
from ..progress import RUN_STEPS_PER_SECOND
from ..progress import resolve as resolve_progress
from ..progress import start as start_progress
from ..runs.points import point_columns
from ..store.files import StoreBusyError, StoreError, command, to_jsonable
from ..store.handles import sweep_stopped
from .execute import begin, execute, make_engine, record
from .flows import FlowEngine
from .plan import Plan

#: Attempts of a failing block beyond the first (worker deaths count separately, by the scheduler).
RETRIES = 2
#: New blocks stop being submitted once this many blocks have failed (the sweep then ends with the error).
MAX_FAILED_BLOCKS = 3
#: Blocks per worker process at least, when the grid allows it: the last blocks of a sweep leave
#: workers idle for about one block, 1/TASKS_PER_WORKER of a worker's share.
TASKS_PER_WORKER = 8
#: Longest work of one block, in single-core seconds (results come back and are written per block).
TASK_SECONDS = 60.0
#: Shortest work of one block, in single-core seconds, when the grid is large enough (per-task overhead).
MIN_TASK_SECONDS = 0.2
#: Seconds of the scheduler and the client per block (measured, ``benchmarks/README.md``): with W workers a block
#: must take more than W times this, or the scheduler, not the workers, sets the pace.
SECONDS_PER_TASK = 0.005
#: Estimated single-core cost of a discrete run-step per flop of its gradient (before any measurement).
SECONDS_PER_FLOP = 0.07e-9
#: Blocks in flight per worker thread at most (the scheduler queues the rest of those submitted).
IN_FLIGHT_PER_THREAD = 4
#: Seconds between checks of Ctrl-C / SIGTERM while waiting for blocks.
POLL_SECONDS = 0.5
#: Seconds to wait for a first worker, and for a connection to a scheduler.
CONNECT_SECONDS = 60.0

_INSTALL_HINT = 'install the distributed extra: pip install "dlnmomentum[distributed]" (dask[distributed])'


class BlockFailedError(RuntimeError):
    """A block of a distributed sweep failed on the workers every time it was tried.

    ``key`` is its task key, ``points`` its flat point indices, ``cause`` the workers' exception.
    """

    def __init__(self, message, key=None, points=None, cause=None):
        super().__init__(message)
        self.key, self.points, self.cause = key, points, cause


class ClusterLostError(BlockFailedError):
    """The scheduler, or the connection to it, went away mid-sweep; the message says what the store keeps and how
    to go on (``--resume``)."""


class DistributedUnavailableError(ImportError):
    """A client or a scheduler was given but ``dask.distributed`` is not installed."""


def require_distributed():
    """The ``distributed`` module, or :class:`DistributedUnavailableError` naming the extra to install."""
    try:
        import distributed
    except ImportError as exc:
        raise DistributedUnavailableError(f"distributed sweeps need dask.distributed, which is not installed "
                                          f"({exc}); {_INSTALL_HINT}") from exc
    return distributed


def connect(address, timeout=CONNECT_SECONDS):
    """A ``dask.distributed.Client`` of the scheduler at ``address`` (e.g. ``tcp://host:8786``)."""
    if not isinstance(address, str) or not address.strip():
        raise ValueError(f"scheduler must be the address of a Dask scheduler (e.g. tcp://host:8786), got {address!r}")
    distributed = require_distributed()
    _check_address(address.strip())
    try:
        return distributed.Client(address.strip(), timeout=timeout, set_as_default=False)
    except OSError as exc:
        raise OSError(f"cannot reach the Dask scheduler at {address} within {timeout:g} s ({exc}); start one with "
                      "`dask scheduler` and workers with `dask worker ADDRESS`") from exc


def _check_address(address):
    """A malformed address (``garbage``, ``host`` without its port) refused before a client is made: a
    ``distributed.Client`` that fails on its address leaves a half-made client behind, whose close at exit waits
    120 s for a loop that is gone."""
    from distributed.comm import get_address_host_port, parse_address

    try:
        scheme, _ = parse_address(address)
        if scheme in ("tcp", "tls"):
            get_address_host_port(address)
    except ValueError as exc:
        raise ValueError(f"scheduler {address!r} is not the address of a Dask scheduler ({exc}); give it as "
                         "tcp://HOST:PORT (e.g. tcp://127.0.0.1:8786)") from None


def executor_for(client):
    """The executor of :func:`.execute.run_plan` for ``client``: this machine (None) or the cluster."""
    if client is None:
        return execute
    distributed = require_distributed()
    if not isinstance(client, distributed.Client):
        raise TypeError(f"client must be a dask.distributed.Client (or None: this machine), got "
                        f"{type(client).__name__}")

    def on_cluster(plan, store, progress, block_size, log, wave_size=None, device="cpu"):
        return execute_distributed(client, plan, store, progress, block_size, log, wave_size, device)

    return on_cluster


# -- keys ---------------------------------------------------------------------------------------------

def plan_key(plan):
    """Hash of what the plan computes: its configuration (with the given problem's fingerprint)."""
    config = {k: v for k, v in plan.config.items() if k != "sessions"}
    text = json.dumps(to_jsonable(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def block_key(pkey, device, points):
    """Task key of a block: a hash of the plan, the device and the block's points."""
    h = hashlib.sha256()
    h.update(pkey.encode())
    h.update(device.encode())
    h.update(np.ascontiguousarray(points, dtype=np.int64).tobytes())
    return f"dlnm-block-{h.hexdigest()[:32]}"


def describe_block(plan, points):
    """The block's points in words: flat indices and the ranges of their coordinates."""
    points = np.asarray(points, dtype=np.int64)
    idx = np.unravel_index(points, plan.shape)
    text = f"points {points.min()}..{points.max()} ({points.size} points: rep {idx[0].min()}..{idx[0].max()}"
    if plan.discrete:  # every design: the points' own (gamma, beta)
        g, b = (np.array([plan.gamma_beta(p)[k] for p in points]) for k in (1, 2))
        text += f", beta {b.min():.6g}..{b.max():.6g}, gamma {g.min():.6g}..{g.max():.6g})"
    else:
        lam = plan.lams[idx[1]]
        text += f", lam {lam.min():.6g}..{lam.max():.6g})"
    return text


# -- blocks -------------------------------------------------------------------------------------------

def point_seconds(plan, block_size):
    """Estimated single-core seconds of one pending point (before any measurement)."""
    if plan.discrete:
        d = plan.d
        return max(int(plan.config["steps"]), 1) * 2.0 * d * d * SECONDS_PER_FLOP
    engine = FlowEngine(plan, block_size)
    return engine.cost_per_point()


def task_blocks(plan, pending, workers, block_size, device="cpu", wave_size=None):
    """Cut the pending points (flat indices, increasing) into the blocks that become tasks.

    ``wave_size`` given: blocks of that many points (rounded up to whole ``block_size``). Otherwise
    about :data:`TASKS_PER_WORKER` blocks per worker, each of :data:`TASK_SECONDS` of estimated work at
    most and at least :data:`MIN_TASK_SECONDS`, or ``workers`` x :data:`SECONDS_PER_TASK` (the scheduler's
    pace), where the grid allows (``device="cuda"``: two per worker,
    a GPU wants many runs at once), of nearly equal sizes in whole ``block_size``.
    """
    pending = np.asarray(pending, dtype=np.int64)
    n = pending.size
    if n == 0:
        return []
    if wave_size is not None:
        size = math.ceil(wave_size / block_size) * block_size
        return [pending[i:i + size] for i in range(0, n, size)]
    unit = block_size
    workers = max(1, int(workers))
    if device == "cuda":
        ntasks = 2 * workers
    else:
        total = n * point_seconds(plan, block_size)
        ntasks = max(TASKS_PER_WORKER * workers, math.ceil(total / TASK_SECONDS))
        shortest = max(MIN_TASK_SECONDS, workers * SECONDS_PER_TASK)
        ntasks = min(ntasks, max(workers, int(total / shortest)))
    ntasks = max(1, min(ntasks, math.ceil(n / unit)))
    # equal shares in whole units (sizes differ by one unit at most)
    units = math.ceil(n / unit)
    bounds = [min(n, (units * i // ntasks) * unit) for i in range(ntasks + 1)]
    return [pending[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


# -- on a worker --------------------------------------------------------------------------------------

#: One kernel at a time per process: ``parallel=True`` kernels must not be entered by several threads.
_KERNEL_LOCK = threading.Lock()
_ENGINES_LOCK = threading.Lock()
#: Engines of this process by (plan key, device, block size): data sets and compiled state reused by blocks.
_ENGINES = collections.OrderedDict()
_MAX_ENGINES = 4


def _plan_payload(pkey, config_json, problem, hosts):
    """The task the blocks depend on: what a worker needs to rebuild the plan (recomputable by the scheduler)."""
    return pkey, config_json, problem, hosts


def _cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def worker_threads(hosts):
    """Numba threads of a task here: this host's cores shared by its worker processes (``hosts``: host ->
    worker processes), at most the ``NUMBA_NUM_THREADS`` of this process."""
    host = None
    try:
        from distributed import get_worker
        from distributed.comm import get_address_host

        host = get_address_host(get_worker().address)
    except (ImportError, ValueError):
        pass
    share = max(1, int(hosts.get(host, 1))) if host is not None else 1
    return max(1, min(int(numba.config.NUMBA_NUM_THREADS), _cpus() // share))


def _engine(payload, device, block_size):
    pkey, config_json, problem, _ = payload
    key = (pkey, device, block_size)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is None:
            engine = make_engine(Plan(json.loads(config_json), problem), block_size, device)
            _ENGINES[key] = engine
            while len(_ENGINES) > _MAX_ENGINES:
                _ENGINES.popitem(last=False)
        else:
            _ENGINES.move_to_end(key)
    return engine


def run_block(payload, points, device, block_size):
    """The task of one block: ``(points, fields of each point, info)`` computed by the plan's engine."""
    engine = _engine(payload, device, block_size)
    points = [int(p) for p in points]
    threads = worker_threads(payload[3])
    with _KERNEL_LOCK:
        numba.set_num_threads(threads)  # per thread: this task's kernels only
        t0 = time.perf_counter()
        outputs = engine.run_wave(points, {"signum": None}, None)
        seconds = time.perf_counter() - t0
    results = engine.finish_points(points, outputs)
    return points, results, {"seconds": seconds, "threads": threads, "pid": os.getpid()}


# -- on the client ------------------------------------------------------------------------------------

def _hosts(client, store=None, done=None):
    """host -> worker processes, of the workers now connected (waits for a first one)."""
    try:
        client.wait_for_workers(1, timeout=CONNECT_SECONDS)
    except TimeoutError as exc:  # Dask's own words ("Only 0/1 workers arrived after 60") say neither why nor how on
        address = client.scheduler.address
        kept = (f"; the {int(done.sum())}/{done.size} points done are in the store {store.path}: continue with "
                f"`{command('sweep', '--store', store.path, '--resume')}` (dlnmomentum.resume_sweep)"
                if store is not None else "")
        raise TimeoutError(f"no Dask worker joined the scheduler at {address} within {CONNECT_SECONDS:g} s: start "
                           f"workers with `dask worker {address}`{kept}") from exc
    workers = client.scheduler_info(n_workers=-1)["workers"]
    hosts = collections.Counter(str(w.get("host")) for w in workers.values())
    return dict(hosts), sum(int(w.get("nthreads", 1)) for w in workers.values()), len(workers)


def _bar(progress, total, work, desc):
    how = resolve_progress(progress, work / RUN_STEPS_PER_SECOND)
    return start_progress(how, total=total, desc=f"{desc} (dask)", unit="point")


def execute_distributed(client, plan, store, progress, block_size, log, wave_size=None, device="cpu"):
    """Run the plan's pending points as tasks on ``client``'s cluster; returns ``(data, done, interrupted)``."""
    distributed = require_distributed()
    data, done, session = begin(plan, store)
    pending = np.flatnonzero(~done.ravel())
    if pending.size == 0:
        return data, done, False
    hosts, nthreads, nworkers = _hosts(client, store, done)
    blocks = task_blocks(plan, pending, nworkers, block_size, device, wave_size)
    pkey = plan_key(plan)
    config_json = json.dumps(to_jsonable({k: v for k, v in plan.config.items() if k != "sessions"}))
    payload = client.submit(_plan_payload, pkey, config_json, plan.problem, hosts, key=f"dlnm-plan-{pkey[:32]}")
    if log is not None:
        log(f"{pending.size} pending points of {plan.npoints} in {len(blocks)} blocks of <= "
            f"{max(b.size for b in blocks)} points on {nworkers} Dask workers ({nthreads} threads) at "
            f"{client.scheduler.address}")
    steps = plan.config.get("steps") or 0
    bar = _bar(progress, int(pending.size), float(pending.size) * steps if plan.discrete else math.inf,
               plan.config["kind"])
    queue = collections.deque(blocks)
    inflight = {}  # future -> block points
    failures = []
    written = 0
    interrupted = False
    cap = max(2, IN_FLIGHT_PER_THREAD * nthreads)

    def submit():
        while queue and len(inflight) < cap and len(failures) < MAX_FAILED_BLOCKS:
            points = queue.popleft()
            fut = client.submit(run_block, payload, points, device, block_size, key=block_key(pkey, device, points),
                                retries=RETRIES)
            inflight[fut] = points

    try:
        with deferred_signals() as flag:
            submit()
            while inflight:
                try:
                    with client.as_current():  # wait() asks for the current client, maybe not the default one
                        distributed.wait(list(inflight), timeout=POLL_SECONDS, return_when="FIRST_COMPLETED")
                except TimeoutError:
                    pass
                # a stop request ends the sweep after the blocks already back are written (their points are
                # computed: dropping them would compute them again on --resume); no new block is submitted
                stopping = flag["signum"] is not None
                ended = [f for f in inflight if f.status in ("finished", "error", "cancelled")]
                finished = [f for f in ended if f.status == "finished"]
                for fut in ended:
                    points = inflight.pop(fut)
                    if fut.status != "finished":
                        failures.append((fut, points))
                if not stopping:
                    submit()  # the workers go on while this process writes
                batch_points, batch_results = [], []
                for points, results, _ in (client.gather(finished) if finished else []):
                    fresh = ~done.flat[np.asarray(points, dtype=np.int64)]  # a point is written once per session
                    if fresh.any():
                        # (an engine's fields come as point dicts or as columns: columns here, once)
                        batch_points.extend(np.asarray(points)[fresh].tolist())
                        batch_results.append({k: v[fresh] for k, v in point_columns(results).items()})
                del finished, ended
                if batch_points:
                    batch_results = {k: np.concatenate([r[k] for r in batch_results]) for k in batch_results[0]}
                    if store is not None:
                        store.write_points(plan, batch_points, batch_results, session)
                    # (after the write: as in the store)
                    record(plan, data, done, batch_points, batch_results, shared=store is not None)
                    written += len(batch_points)
                    if bar is not None:
                        bar.update(len(batch_points))
                    if log is not None:
                        log(f"wrote {written}/{pending.size} pending points ({int(done.sum())}/{done.size} done)")
                if stopping:
                    interrupted = True
                    break
    except KeyboardInterrupt:
        interrupted = True
    except StoreBusyError as exc:  # another program holds an HDF5 lock on the store: say how to go on
        raise sweep_stopped(exc, store.path, done) from exc
    except StoreError:
        raise
    except (OSError, TimeoutError, concurrent.futures.CancelledError, asyncio.CancelledError) as exc:
        inflight.clear()  # (nothing to cancel on a cluster that is gone)
        raise _lost(client, store, done, exc) from exc
    finally:
        if bar is not None:
            bar.close()
        if inflight:  # interrupted: queued blocks go (running ones end on their own, unread)
            client.cancel(list(inflight))
    if failures and not interrupted:
        raise _failed(plan, store, done, failures, pkey, device, queue)
    # a stop request that came with the last points is no interruption: the sweep is complete (as in execute)
    return data, done, interrupted and not done.all()


def _lost(client, store, done, exc):
    """The :class:`ClusterLostError` of a sweep whose scheduler (or the connection to it) went away: what was kept
    and how to go on, instead of Dask's traceback."""
    try:
        address = client.scheduler.address
    except Exception:  # noqa: BLE001 - only for the message
        address = "?"
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    said = [line.split(":", 1)[1].strip() for line in lines if line.startswith("Message:")]  # Dask's own words
    why = (said or lines or [""])[0]
    kept = (f"the {int(done.sum())}/{done.size} points done are in the store {store.path}: continue with "
            f"`{command('sweep', '--store', store.path, '--resume')}` (dlnmomentum.resume_sweep), with --scheduler "
            "once a scheduler runs again or without it on this machine" if store is not None else
            f"{int(done.sum())}/{done.size} points were computed (no store: nothing was kept)")
    return ClusterLostError(f"the Dask cluster at {address} was lost mid-sweep ({type(exc).__name__}"
                            f"{': ' + why if why else ''}); {kept}", cause=exc)


def _failed(plan, store, done, failures, pkey, device, queue):
    fut, points = failures[0]
    key = block_key(pkey, device, points)
    try:
        cause = fut.exception(timeout=5)
    except Exception as exc:  # cancelled, or the scheduler gone
        cause = exc
    why = f"{type(cause).__name__}: {cause}" if cause is not None else f"task {fut.status}"
    others = f"; {len(failures) - 1} more blocks failed" if len(failures) > 1 else ""
    skipped = f", {sum(b.size for b in queue)} points of blocks not submitted after the failures" if queue else ""
    kept = (f"the {int(done.sum())}/{done.size} points done are in the store {store.path}: fix the cause and "
            f"continue with `{command('sweep', '--store', store.path, '--resume')}` (dlnmomentum.resume_sweep)"
            if store is not None else f"{int(done.sum())}/{done.size} points were computed (no store)")
    return BlockFailedError(f"block {key} ({describe_block(plan, points)}) failed on the Dask workers after "
                            f"{RETRIES + 1} attempts: {why}{others}{skipped}; {kept}", key=key,
                            points=np.asarray(points), cause=cause)
