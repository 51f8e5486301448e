"""Readers never break writers: polling a store while its writer streams, finalises or writes waves.

A reader that held an HDF5 lock made the writer's reopen fail ("unable to lock file"): the sweep died at
its first wave, a run stopped by SIGTERM was left ``crashed``. Readers now open stores without a lock
(HDF5's superblock flags keep them out of a file being changed), writers wait for readers that do hold
one, and a reader that meets a writer at work reports :class:`StoreBusyError`, never a damaged file.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest
from store_checks import HELPER, ROOT, SPEC, TIMEOUT, assert_same_result, assert_same_rows, stored_reference

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.runs.points import FIELDS
from dlnmomentum.store import files

ENV = dict(os.environ, PYTHONPATH=ROOT)
SMALL = {"n": 8, "d": 13, "s": 3, "mu": 1.0, "sigma": 1.0, "n_test": 50}


class Poller:
    """A thread that reads a store in a loop and sorts what it meets: reads, busy, anything else."""

    def __init__(self, read):
        self.read, self.reads, self.busy, self.other = read, 0, 0, []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while not self.stop.is_set():
            try:
                self.read()
                self.reads += 1
            except FileNotFoundError:
                pass
            except S.StoreBusyError:
                self.busy += 1
            except Exception as exc:  # noqa: BLE001 - the test reports every other kind
                self.other.append(f"{type(exc).__name__}: {exc}")

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def _read_run(path):
    s = dm.open_store(path)
    if s.rows:
        s["theta"]
    s.result  # noqa: B018 - the read is the point


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return stored_reference(tmp_path_factory)


SIGTERM_AT_CHUNKS = [3, 9, 17, 26, 34]


@pytest.mark.slow
def test_polling_reader_never_breaks_a_run_stopped_by_sigterm(tmp_path, reference):
    live, ref_path = reference
    for chunk in SIGTERM_AT_CHUNKS:
        path = tmp_path / f"r{chunk}.h5"
        with Poller(lambda p=path: _read_run(p)) as poller:
            proc = subprocess.Popen([sys.executable, HELPER, json.dumps(dict(SPEC, path=str(path), action="run"))],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
            try:
                for line in proc.stdout:
                    if line.startswith(f"CHUNK {chunk}"):
                        proc.send_signal(signal.SIGTERM)
                        break
                stdout, stderr = proc.communicate(timeout=TIMEOUT)
            finally:
                if proc.poll() is None:
                    proc.kill()
            time.sleep(0.05)  # a few reads of the closed file
        assert proc.returncode == 0 and "STATUS interrupted" in stdout, (chunk, stderr)
        assert poller.other == [] and poller.reads > 0, (chunk, poller.other[:3])
        assert S.open_store(path).state == "interrupted"
        assert_same_result(live, S.resume(path))
        assert_same_rows(path, ref_path)


def test_polling_reader_never_breaks_a_sweep(tmp_path):
    path = tmp_path / "g.h5"
    argv = ["sweep", "--gammas", "0.01:0.1:8", "--betas", "0:0.9:4", "--steps", "4000", "--reps", "2",
            "--wave-size", "8", "--no-progress", "--store", str(path)]
    argv += [x for k, v in SMALL.items() for x in (f"--{k.replace('_', '-')}", str(v))]
    with Poller(lambda: dm.open_sweep(path)) as poller:
        out = subprocess.run([sys.executable, "-m", "dlnmomentum", *argv], capture_output=True, text=True,
                             timeout=TIMEOUT, env=ENV, cwd=ROOT)
        time.sleep(0.05)
    assert out.returncode == 0, out.stderr
    assert poller.other == [] and poller.reads > 0, poller.other[:3]
    stored = dm.open_sweep(path)
    fresh = dm.sweep(SMALL, gammas="0.01:0.1:8", betas="0:0.9:4", steps=4000, reps=2)
    assert stored.complete
    for name in FIELDS:
        assert np.array_equal(stored[name], fresh[name], equal_nan=True), name


def _hold(path, seconds, **kwargs):
    """Another program's reader: ``h5py.File(path, "r")`` with HDF5's file lock, for ``seconds``."""
    code = ("import h5py, sys, time\nf = h5py.File(sys.argv[1], 'r', **eval(sys.argv[3]))\n"
            "print('open', flush=True)\ntime.sleep(float(sys.argv[2]))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(seconds), repr(kwargs)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "open"
    return proc


def test_a_writer_waits_for_a_reader_holding_a_lock(tmp_path):
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(4.0)
    holder = _hold(path, 0.6)
    t0 = time.monotonic()
    with files.open_h5_for_writing(str(path)) as f:
        f["x"][0] = 7.0
    assert time.monotonic() - t0 > 0.3  # it waited for the reader, then wrote
    holder.wait()
    holder = _hold(path, 5)
    try:
        with pytest.raises(S.StoreBusyError, match="x.h5"):
            files.open_h5_for_writing(str(path), wait=0.2)
    finally:
        holder.kill()
        holder.wait()


def test_a_reader_reports_busy_not_damaged_while_a_writer_has_the_file(tmp_path, monkeypatch):
    """A live writer outside SWMR mode: busy (retry); the same file after its writer died: repairable."""
    path = tmp_path / "r.h5"
    dm.mgd(dm.sparse_regression(**SMALL, seed=4), 0.05, 0.8, steps=100, store=path)
    code = ("import h5py, json, os, socket, sys, time\n"
            "f = h5py.File(sys.argv[1], 'r+', libver='latest')\n"
            "json.dump({'pid': os.getpid(), 'host': socket.gethostname()}, open(sys.argv[1] + '.lock', 'w'))\n"
            "print('open', flush=True)\ntime.sleep(30)\n")
    writer = subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert writer.stdout.readline().strip() == "open"
        monkeypatch.setattr(files, "READ_WAIT", 0.3)
        monkeypatch.setattr(files.open_h5, "__defaults__", (0.3,))
        with pytest.raises(S.StoreBusyError, match=f"r.h5 is being written.*process {writer.pid}"):
            dm.open_store(path)
    finally:
        writer.kill()
        writer.wait()
    with pytest.raises(S.StoreCorruptError, match="dlnm resume"):  # the writer is gone
        dm.open_store(path)
    assert dm.resume(path).status_name == "max_steps"
