"""Distributed sweeps on a Dask cluster (``sweep(..., client=)``, ``dlnm sweep --scheduler``).

The reference is the sweep of the same plan on this machine (its lanes are the single-run kernel,
checked in ``test_sweep.py``): a store written through the cluster must equal it dataset by dataset,
bit for bit, also after a worker process or the client itself is killed mid-sweep.
"""

import logging
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.sweeps import distributed as D
from dlnmomentum.sweeps.plan import Plan, make_config

distributed = pytest.importorskip("distributed")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 240  # seconds: generous, the machine may be loaded

#: One grid for every test: 128 points, 16 blocks of 8 (``wave_size=8``) of about 0.2 s each on one core,
#: so that a kill after the first written block lands mid-sweep.
SPEC = {"n": 10, "d": 12, "s": 3, "mu": 1.0, "sigma": 1.0, "n_test": 100}
GRID = {"gammas": np.geomspace(1e-3, 3e-2, 8), "betas": np.linspace(0.0, 0.9, 8), "reps": 2, "steps": 1_000_000}
NPOINTS = 2 * 8 * 8


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                       silence_logs=logging.CRITICAL, death_timeout=TIMEOUT)
    c = distributed.Client(cluster, timeout=TIMEOUT)
    try:
        c.wait_for_workers(2, timeout=TIMEOUT)
        yield c
    finally:
        c.close()
        cluster.close()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The grid swept on this machine (no cluster)."""
    path = str(tmp_path_factory.mktemp("reference") / "local.h5")
    result = dm.sweep(SPEC, **GRID, store=path)
    assert result.complete
    return path


def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def assert_same_store(a, b, skip=()):
    """Every dataset of the two stores equal byte for byte (same names, dtypes, shapes)."""
    da, db = datasets(a), datasets(b)
    assert sorted(da) == sorted(db)
    for name in da:
        if name in skip:
            continue
        x, y = da[name], db[name]
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert x.tobytes() == y.tobytes(), f"dataset {name} differs"


def wait_workers(client, n=2):
    client.wait_for_workers(n, timeout=TIMEOUT)


# -- without a cluster --------------------------------------------------------------------------------

def _plan(**grid):
    config, problem = make_config(SPEC, grid["gammas"], grid["betas"], None, grid["steps"], None, grid["reps"],
                                  None, 0, None, 0.01, False, "auto", False, 1e-8)
    return Plan(config, problem)


@pytest.mark.parametrize("workers", [1, 2, 3, 100])
def test_blocks_cover_the_pending_points_once_in_whole_groups(workers):
    plan = _plan(**GRID)
    pending = np.setdiff1d(np.arange(plan.npoints), [3, 17, 18, 60])  # some points already done
    blocks = D.task_blocks(plan, pending, workers, 8)
    assert np.array_equal(np.concatenate(blocks), pending)
    sizes = [b.size for b in blocks]
    assert all(s % 8 == 0 for s in sizes[:-1]) and max(sizes) - min(sizes[:-1] or sizes) <= 8
    fixed = D.task_blocks(plan, pending, workers, 8, wave_size=20)  # rounded up to whole blocks of 8
    assert [b.size for b in fixed[:-1]] == [24] * (len(fixed) - 1)


def test_block_keys_name_what_is_computed():
    plan = _plan(**GRID)
    key = D.plan_key(plan)
    assert D.block_key(key, "cpu", [0, 1, 2]) == D.block_key(key, "cpu", np.array([0, 1, 2]))
    assert D.block_key(key, "cpu", [0, 1, 2]) != D.block_key(key, "cpu", [0, 1, 3])
    assert D.block_key(key, "cpu", [0, 1, 2]) != D.block_key(key, "cuda", [0, 1, 2])
    other = _plan(**dict(GRID, steps=GRID["steps"] + 1))
    assert D.plan_key(other) != key


def test_without_dask_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed now raises ImportError
    with pytest.raises(ImportError, match=r"pip install \"dlnmomentum\[distributed\]\""):
        D.executor_for(object())
    assert D.executor_for(None) is D.execute  # no client: this machine, dask not needed


def test_client_must_be_a_dask_client():
    with pytest.raises(TypeError, match="client must be a dask.distributed.Client"):
        dm.sweep(SPEC, gammas=[0.01], betas=[0.0], steps=10, client="tcp://127.0.0.1:8786")


# -- on a LocalCluster --------------------------------------------------------------------------------

def test_cluster_store_is_the_local_store_bit_for_bit(client, reference, tmp_path):
    path = str(tmp_path / "cluster.h5")
    lines = []
    result = dm.sweep(SPEC, **GRID, store=path, client=client, wave_size=8, log=lines.append)
    assert result.complete and not result.interrupted
    assert lines[0].startswith(f"{NPOINTS} pending points of {NPOINTS} in 16 blocks of <= 8 points on 2 Dask")
    assert_same_store(reference, path)
    with h5py.File(reference, "r") as a, h5py.File(path, "r") as b:
        assert a.attrs["config"] == b.attrs["config"]


@pytest.mark.parametrize("grid", [{"lams": [0.0, 0.05, 0.5, 2.0], "t_max": 10.0, "reps": 2},
                                  {"lams": [0.0, 0.05, 0.5, 2.0], "t_max": 1e7, "tol": 1e-20, "reps": 2},
                                  {"lams": [0.0, 0.05, 0.5, 2.0], "t_max": 1e7, "tol": 1e-20, "reps": 2,
                                   "rtol": 1e-7, "atol": 1e-9, "max_steps": 600}],
                         ids=["rk4", "rodas", "rodas-settings"])  # (a tol: the adaptive scheme)
def test_flow_sweep_on_the_cluster_is_the_local_one(client, tmp_path, grid):
    local, remote = str(tmp_path / "local.h5"), str(tmp_path / "cluster.h5")
    dm.sweep(SPEC, **grid, store=local)
    result = dm.sweep(SPEC, **grid, store=remote, client=client, wave_size=1)
    assert result.complete
    assert_same_store(local, remote)
    if "rtol" in grid:  # the workers' points ran with the sweep's settings, not the defaults
        assert (result.config["rtol"], result.config["atol"], result.config["max_steps"]) == (1e-7, 1e-9, 600)
        default = dm.sweep(SPEC, **{k: v for k, v in grid.items() if k not in ("rtol", "atol", "max_steps")})
        assert not np.array_equal(result.steps_done, default.steps_done)
        for k, lam in enumerate(grid["lams"]):
            single = dm.mgf(dm.sparse_regression(**SPEC, seed=1), lam, t_max=1e7, tol=1e-20, rtol=1e-7, atol=1e-9,
                            max_steps=600)
            assert np.array_equal(result.theta[1, k], single.theta) and result.steps_done[1, k] == single.steps_done


def test_a_worker_killed_mid_sweep_loses_no_point(client, reference, tmp_path):
    wait_workers(client)
    path = str(tmp_path / "cluster.h5")
    lines, killed = [], {}

    def log(line):
        lines.append(line)
        if line.startswith("wrote") and not killed:
            processing = client.processing()
            busy = [a for a, keys in processing.items() if any(str(k).startswith("dlnm-block-") for k in keys)]
            assert busy, f"no worker busy with a block after the first write: {processing} {lines}"
            addr = busy[0]
            pid = client.run(os.getpid, workers=[addr])[addr]
            os.kill(pid, signal.SIGKILL)
            killed.update(addr=addr, pid=pid, keys=list(processing[addr]))

    result = dm.sweep(SPEC, **GRID, store=path, client=client, wave_size=8, log=log)
    assert killed and killed["keys"], "the worker was not killed mid-sweep"
    with pytest.raises(ProcessLookupError):
        os.kill(killed["pid"], 0)
    assert result.complete
    written = [int(m.group(1)) for m in (re.match(r"wrote (\d+)/", line) for line in lines) if m]
    assert written[-1] == NPOINTS  # every point written once: none missing, none twice
    assert_same_store(reference, path)
    wait_workers(client)  # the nanny restarts the worker: leave the cluster as found


def _read_lines(stream, out):
    for line in stream:
        out.put(line)
    out.put(None)


def _cli_sweep(client, path):
    """``dlnm sweep --scheduler`` of the grid in a subprocess, its stderr lines in a queue."""
    grid_args = ["--gammas", ",".join(repr(float(g)) for g in GRID["gammas"]),
                 "--betas", ",".join(repr(float(b)) for b in GRID["betas"]),
                 "--reps", str(GRID["reps"]), "--steps", str(GRID["steps"])]
    data_args = [f"--{k.replace('_', '-')}={v}" for k, v in SPEC.items()]
    cmd = [sys.executable, "-m", "dlnmomentum", "sweep", *grid_args, *data_args, "--store", path,
           "--scheduler", client.scheduler.address, "--wave-size", "8", "--log", "--no-progress"]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    threading.Thread(target=_read_lines, args=(proc.stderr, lines), daemon=True).start()
    return proc, lines


def _signal_after_first_write(proc, lines, signum):
    """Send ``signum`` once the subprocess has written its first block; returns the lines seen."""
    seen = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=1.0)
        except queue.Empty:
            continue
        if line is None:
            break
        seen.append(line)
        if "wrote" in line:
            proc.send_signal(signum)
            break
    return seen


def test_a_client_killed_mid_sweep_resumes_with_only_the_missing_points(client, reference, tmp_path):
    wait_workers(client)
    path = str(tmp_path / "cluster.h5")
    proc, lines = _cli_sweep(client, path)
    try:
        seen = _signal_after_first_write(proc, lines, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "".join(seen)
    first = dm.open_sweep(path)
    done_before = int(first.done.sum())
    assert 0 < done_before < NPOINTS, f"not killed mid-sweep ({done_before} points done)"

    resumed = []
    result = dm.resume_sweep(path, client=client, wave_size=8, log=resumed.append)
    assert result.complete
    pending = int(re.match(r"(\d+) pending points of (\d+)", resumed[0]).group(1))
    assert pending == NPOINTS - done_before  # only the missing points are computed
    with h5py.File(path, "r") as f:
        session = f["session"][()]
        assert f.attrs["sessions"] == 2
    assert int((session == 1).sum()) == done_before and int((session == 2).sum()) == pending
    assert_same_store(reference, path, skip={"session"})


def test_sigterm_stops_the_client_with_the_finished_blocks_kept(client, tmp_path):
    wait_workers(client)
    path = str(tmp_path / "cluster.h5")
    proc, lines = _cli_sweep(client, path)
    try:
        seen = _signal_after_first_write(proc, lines, signal.SIGTERM)
        proc.wait(timeout=TIMEOUT)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    seen += [line for line in iter(lines.get, None)]
    assert proc.returncode == 130, "".join(seen)  # interrupted, resumable
    assert any("dlnm sweep --resume --store" in line for line in seen), "".join(seen)
    done = dm.open_sweep(path).done
    assert 0 < int(done.sum()) < NPOINTS


def test_a_failing_block_is_named_and_the_store_kept(client, tmp_path):
    from dlnmomentum.sweeps.cuda import cuda_available

    if cuda_available()[0]:
        pytest.skip("a GPU is available here: device='cuda' would not fail")
    wait_workers(client)
    path = str(tmp_path / "cluster.h5")
    # device="cuda" goes through the same block path; workers without a GPU fail every block
    with pytest.raises(D.BlockFailedError, match=r"block dlnm-block-[0-9a-f]{32} \(points \d+\.\.\d+ \(8 points: "
                                                 r"rep 0\.\.0, beta .*, gamma .*CUDA engine cannot run") as info:
        dm.sweep(SPEC, gammas=GRID["gammas"], betas=GRID["betas"], steps=10, store=path, client=client,
                 device="cuda", wave_size=8)
    assert "dlnm sweep --store" in str(info.value) and info.value.points.size == 8
    assert os.path.exists(path) and int(dm.open_sweep(path).done.sum()) == 0


def test_a_stop_request_writes_the_blocks_already_back(client, reference, tmp_path):
    """Ctrl-C while blocks are finished but not yet written: they are written before the sweep stops (dropping
    them would compute them again on --resume), and a stop that comes with the last points is no interruption."""
    from signal_helpers import sigint_default

    wait_workers(client)
    path = str(tmp_path / "cluster.h5")
    state = {}

    def log(line):
        if state or not line.startswith("wrote"):
            return
        state["first"] = int(re.match(r"wrote (\d+)/", line).group(1))
        os.kill(os.getpid(), signal.SIGINT)  # the sweep's handler sets its stop flag
        deadline = time.monotonic() + TIMEOUT  # every block (4 of 32 points: all in flight) ends on the workers
        while any(str(k).startswith("dlnm-block-") for keys in client.processing().values() for k in keys):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(1.0)  # (their results reach this client)

    with sigint_default():
        result = dm.sweep(SPEC, **GRID, store=path, client=client, wave_size=32, log=log)
    assert state["first"] < NPOINTS, "the first write was the whole sweep"
    assert result.complete and not result.interrupted
    assert_same_store(reference, path)
