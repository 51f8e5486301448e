"""A bad scheduler address and a scheduler that dies mid-sweep end in a message, not a hang or a traceback (issue 23,
B15).

Before: ``dlnm sweep --scheduler garbage`` printed its error and then hung 120 s (the half-made Dask client's close at
exit); a scheduler that died mid-sweep ended in about 80 lines of Dask traceback, exit 1, with no word of the points
kept in the store or of ``--resume``, which continues the sweep.
"""

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.runs.points import FIELDS

pytest.importorskip("distributed")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = dict(os.environ, PYTHONPATH=ROOT, NUMBA_NUM_THREADS="1")
TIMEOUT = 120
DATA = {"n": 10, "d": 12, "s": 3, "mu": 1.0, "sigma": 1.0, "n_test": 100}
DATA_ARGS = ["--n", "10", "--d", "12", "--s", "3", "--n-test", "100"]
#: 64 points in 8 blocks of about 0.2 s each on the one worker thread: a kill after the first written block
#: lands mid-sweep.
GRID_ARGS = ["--gammas", "1e-3:3e-2:8:log", "--betas", "0:0.9:8", "--steps", "1e6", "--wave-size", "8"]


def _cli(*argv, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "dlnmomentum", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT, **kwargs)


def test_a_malformed_scheduler_address_is_refused_at_once():
    t0 = time.monotonic()
    proc = _cli("sweep", "--gammas", "0.01", "--betas", "0.5", "--steps", "10", "--no-progress",
                "--scheduler", "garbage")
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, err
    assert time.monotonic() - t0 < 30  # before: the error, then 120 s until the process ended
    assert err.startswith("dlnm: error: scheduler 'garbage' is not the address of a Dask scheduler") and "tcp://" in err
    assert "Traceback" not in err and "Exception ignored" not in err, err


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _lines(stream):
    """The lines of ``stream`` in a queue (None at its end), read by a thread."""
    q = queue.Queue()

    def pump():
        for line in stream:
            q.put(line)
        q.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return q


def _wait_for(q, text, seen):
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        try:
            line = q.get(timeout=1)
        except queue.Empty:
            continue
        if line is None:
            break
        seen.append(line)
        if text in line:
            return
    raise AssertionError(f"{text!r} not seen in:\n{''.join(seen)}")


def test_a_scheduler_that_dies_mid_sweep_is_a_message_with_the_next_step(tmp_path):
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    path = tmp_path / "c.h5"
    procs = []
    try:
        scheduler = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                                      "--port", str(port), "--no-dashboard"], stderr=subprocess.PIPE, text=True,
                                     env=ENV, cwd=str(tmp_path))
        procs.append(scheduler)
        seen = []
        _wait_for(_lines(scheduler.stderr), "Scheduler at", seen)
        worker = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                   "--nworkers", "1", "--no-dashboard"], stderr=subprocess.PIPE, text=True, env=ENV,
                                  cwd=str(tmp_path))
        procs.append(worker)
        _wait_for(_lines(worker.stderr), "Registered to", seen)
        sweep = _cli("sweep", *GRID_ARGS, *DATA_ARGS, "--scheduler", address, "--store", str(path), "--log",
                     "--no-progress")
        procs.append(sweep)
        err_lines = _lines(sweep.stderr)
        out = []
        _wait_for(err_lines, "wrote 8/64", out)
        scheduler.send_signal(signal.SIGKILL)
        sweep.wait(timeout=TIMEOUT)
        while (line := err_lines.get(timeout=TIMEOUT)) is not None:
            out.append(line)
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=60)
    err = "".join(out)
    assert sweep.returncode == 2, err  # before: 1, the "diverged" code
    assert "Traceback" not in err and "ERROR" not in err, err
    done = int(dm.open_sweep(path).done.sum())
    assert 8 <= done < 64
    assert (f"dlnm: error: the Dask cluster at {address} was lost mid-sweep" in err
            and f"the {done}/64 points done are in the store {path}: continue with `dlnm sweep --store {path} "
                "--resume`" in err), err
    resumed = _cli("sweep", "--store", str(path), "--resume", "--no-progress")  # on this machine
    _, rerr = resumed.communicate(timeout=TIMEOUT)
    assert resumed.returncode == 0, rerr
    stored = dm.open_sweep(path)
    fresh = dm.sweep(DATA, gammas="1e-3:3e-2:8:log", betas="0:0.9:8", steps=1_000_000)
    assert stored.complete
    for name in FIELDS:
        assert np.array_equal(stored[name], fresh[name], equal_nan=True), name


def test_a_scheduler_without_workers_says_to_start_them(tmp_path, monkeypatch):
    """A scheduler that no worker joins: after the wait, a TimeoutError that says so, how to start workers and what
    the store keeps. Before: Dask's "Only 0/1 workers arrived after 60", nothing more."""
    import logging

    import distributed

    from dlnmomentum.sweeps import distributed as D

    monkeypatch.setattr(D, "CONNECT_SECONDS", 1.0)
    path = str(tmp_path / "grid.h5")
    with distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None,
                                  silence_logs=logging.CRITICAL) as cluster, distributed.Client(cluster) as client:
        address = re.escape(client.scheduler.address)
        with pytest.raises(TimeoutError, match=rf"no Dask worker joined the scheduler at {address} within 1 s: start "
                                               rf"workers with `dask worker {address}`; the 0/2 points done are in "
                                               rf"the store .*grid.h5: continue with `dlnm sweep --store .*--resume`"):
            dm.sweep(DATA, gammas=[0.01, 0.02], betas=[0.0], steps=10, store=path, client=client)
    assert dm.open_sweep(path).done.sum() == 0
