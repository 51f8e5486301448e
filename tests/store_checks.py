"""Helpers shared by the store tests (``test_store.py``, ``faults/``): writer subprocesses, opening in
a fresh process, and bit-for-bit comparison of results and stored rows."""

import dataclasses
import json
import os
import subprocess
import sys
import time

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HELPER = os.path.join(HERE, "store_helpers", "writer.py")
ROOT = os.path.dirname(HERE)
TIMEOUT = 120

#: The run the crash tests kill and resume: 40 chunks, ~250 recorded rows, a checkpoint after every
#: chunk (the writer skips a checkpoint while the previous one is still being written: ``slow`` pauses
#: 10 ms after each chunk so that the kill points below are reached).
SPEC = {"gamma": 0.05, "beta": 0.8, "steps": 200_000, "record": {"log": 300}, "chunk_steps": 5000,
        "checkpoint_every": 0.0, "slow": 0.01}


# -- helpers ------------------------------------------------------------------------------------

def run_helper(spec, timeout=TIMEOUT):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, HELPER, json.dumps(spec)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=ROOT)


def paused_writer(spec, path, chunk):
    """The writer helper running ``spec`` into ``path`` in a subprocess, paused (alive, the lock held) after chunk
    ``chunk``: its ``Popen``, once it has said so (or after ``TIMEOUT``). The caller kills it and closes its pipes."""
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, HELPER, json.dumps(dict(spec, path=str(path), action="run",
                                                                       pause_at_chunk=chunk))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    deadline = time.monotonic() + TIMEOUT
    for line in proc.stdout:
        if line.startswith("PAUSED") or time.monotonic() > deadline:
            break
    return proc


def stored_reference(tmp_path_factory, spec=SPEC):
    """The uninterrupted run of ``spec``, stored by the writer helper (independent of the runs under test):
    ``(result, path)``, the reference of the kill/resume tests."""
    from dlnmomentum import store

    path = tmp_path_factory.mktemp("ref") / "ref.h5"
    out = run_helper(dict(spec, path=str(path), action="run", slow=0.0))
    assert out.returncode == 0, out.stderr
    return store.open_store(path).result, path


def open_in_subprocess(path, timeout=60):
    """Open the store in a fresh process (a hang fails the test through the timeout)."""
    code = ("import sys, json, dlnmomentum.store as S\n"
            "try:\n"
            "    s = S.open_store(sys.argv[1])\n"
            "    print(json.dumps({'ok': True, 'state': s.state, 'rows': s.rows, 'status': s.status_name}))\n"
            "except Exception as e:\n"
            "    print(json.dumps({'ok': False, 'type': type(e).__name__, 'message': str(e),\n"
            "                      'oserror': isinstance(e, OSError)}))\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def assert_same_result(a, b):
    """Every field of two results equal, bit for bit (NaN == NaN), same types and dtypes."""
    assert type(a) is type(b)
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if field.name == "trajectory":
            assert (x is None) == (y is None)
            if x is not None:
                fx, fy = x.fields(), y.fields()
                assert fx.keys() == fy.keys()
                for k in fx:
                    assert fx[k].dtype == fy[k].dtype and fx[k].shape == fy[k].shape, k
                    assert np.array_equal(fx[k], fy[k], equal_nan=True), k
        elif field.name == "problem":
            for name in ("X", "y", "X_test", "y_test", "theta_star", "hessian", "b"):
                u, v = getattr(x, name), getattr(y, name)
                assert (u is None) == (v is None) and (u is None or np.array_equal(u, v)), name
            assert x.params == y.params
        elif isinstance(x, np.ndarray):
            assert isinstance(y, np.ndarray) and x.dtype == y.dtype and x.shape == y.shape, field.name
            assert x.tobytes() == y.tobytes(), field.name
        else:
            assert type(x) is type(y), (field.name, type(x), type(y))
            assert x == y or (x != x and y != y), (field.name, x, y)


def observable_arrays(path):
    with h5py.File(path, "r") as f:
        out = {}
        for key, obj in f["observables"].items():
            ds = obj if isinstance(obj, h5py.Dataset) else obj["value"]
            out[key] = ds[()]
        return out


def assert_same_rows(path, ref_path):
    a, b = observable_arrays(path), observable_arrays(ref_path)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
        assert a[key].tobytes() == b[key].tobytes(), key


def sigkill_adaptive_flow(path, lam, record, kill_at_chunk, problem="n=20, d=30, s=5, mu=1.0, sigma=1.0, n_test=1000, "
                          "seed=0", t_max=1e6, tol=1e-20, chunk_steps=37):
    """Run an adaptive ("rodas") flow into the store ``path`` in a subprocess that SIGKILLs itself after
    ``kill_at_chunk`` chunks (``record``: the ``dm.Record(...)`` call as source text; ``problem``: the
    arguments of ``dm.sparse_regression``); the finished process."""
    script = (
        "import os, signal\n"
        "import dlnmomentum as dm, dlnmomentum.store as S, dlnmomentum.store.writer as W\n"
        "from dlnmomentum.runs.flow_adaptive import prepare_flow_run\n"
        f"p = dm.sparse_regression({problem})\n"
        f"run = prepare_flow_run(p, {lam!r}, t_max={t_max!r}, tol={tol!r}, record={record})\n"
        f"run.chunk_steps = {chunk_steps}\n"
        "count = [0]\n"
        "def hook(point):\n"
        "    if point == 'chunk':\n"
        "        count[0] += 1\n"
        f"        if count[0] == {kill_at_chunk}:\n"
        "            os.kill(os.getpid(), signal.SIGKILL)\n"
        "W._TEST_HOOK = hook\n"
        f"S.run_with_store(run, {str(path)!r}, checkpoint_every=0.0)\n")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
