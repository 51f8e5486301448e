"""Damaged bytes: every read names the file and the dataset, and resume computes the lost part again.

Before: a run store whose chunk bytes were overwritten raised a bare h5py ``OSError`` without a file
name (from ``.result``, ``["theta"]``, ``dlnm inspect``, ``dm.resume``) while ``open_store`` said
``complete``; resuming a crashed store copied the damaged chunk unchecked and failed at the end, on
every attempt; sweep stores returned flipped bytes as numbers (a test loss of 1e306), and large
fixed-size datasets (``/problem/X_test``) too. The bytes are damaged here by writing over the middle of
a chunk, located with HDF5's own chunk index.
"""

import json
import os
import subprocess
import sys
import warnings

import h5py
import numpy as np
import pytest
from store_checks import ROOT, SPEC, TIMEOUT, assert_same_result, assert_same_rows, run_helper, stored_reference

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.runs.points import FIELDS
from dlnmomentum.store.files import open_h5
from dlnmomentum.store.integrity import fletcher32, intact_rows

ENV = dict(os.environ, PYTHONPATH=ROOT)
SMALL = {"n": 8, "d": 13, "s": 3, "mu": 1.0, "sigma": 1.0, "n_test": 50}


def damage(path, dataset, chunk=0, nbytes=16):
    """Overwrite ``nbytes`` in the middle of chunk number ``chunk`` of ``dataset`` (or of its data)."""
    f, _ = open_h5(str(path))  # also a store whose writer died
    with f:
        ds = f[dataset]
        if ds.chunks is None:
            offset, size = ds.id.get_offset(), ds.id.get_storage_size()
        else:
            info = ds.id.get_chunk_info(chunk)
            offset, size = info.byte_offset, info.size
    nbytes = max(2, min(nbytes, size // 4 * 2))  # within the chunk, also a tiny one
    with open(path, "r+b") as fh:
        fh.seek(offset + size // 4)
        fh.write(b"\x7f\xe0" * (nbytes // 2))  # big doubles, the kind of garbage that looks like a result


#: SPEC recording every 100 steps: 2001 rows, 7 chunks of each dataset, checkpoints every chunk.
DENSE = dict(SPEC, record={"every": 100})


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return stored_reference(tmp_path_factory, DENSE)


def test_fletcher32_is_hdf5s(tmp_path):
    rng = np.random.default_rng(1)
    for n in (1, 2, 3, 719, 720, 721, 4097, 33_333):
        data = np.full(n, 255, np.uint8) if n % 2 else rng.integers(0, 256, n, dtype=np.uint8)  # 0xff: overflow
        with h5py.File(tmp_path / "f.h5", "w") as f:
            _, raw = f.create_dataset("x", data=data, chunks=(n,), fletcher32=True).id.read_direct_chunk((0,))
        assert fletcher32(raw[:-4]) == int.from_bytes(raw[-4:], "little"), n


def test_damaged_rows_of_a_finished_store_are_named_and_computed_again(tmp_path):
    problem = dm.sparse_regression(**SMALL, seed=4)
    kwargs = dict(steps=20_000, record=dm.Record(every=10))
    live = dm.mgd(problem, 0.05, 0.8, **kwargs)
    path = tmp_path / "r.h5"
    dm.mgd(problem, 0.05, 0.8, store=path, **kwargs)
    damage(path, "observables/theta/value", chunk=3)
    for read in (lambda s: s.result, lambda s: s["theta"], lambda s: s.trajectory):
        with pytest.raises(S.StoreCorruptError, match="r.h5.*/observables/theta/value"):
            read(dm.open_store(path))
    out = subprocess.run([sys.executable, "-m", "dlnmomentum", "inspect", str(path)], capture_output=True,
                         text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert out.returncode == 2 and "/observables/theta/value" in out.stdout + out.stderr, out
    assert "Traceback" not in out.stderr
    with pytest.warns(RuntimeWarning, match="computed again from step 0"):
        resumed = dm.resume(path)
    assert_same_result(live, resumed)
    assert_same_result(live, dm.open_store(path).result)


@pytest.mark.parametrize("kill", [{"point": "checkpoint:done", "count": 14},
                                  {"point": "chunk", "count": 30, "signal": "TERM"}], ids=["crashed", "interrupted"])
def test_resume_skips_damaged_chunks_back_to_a_good_checkpoint(tmp_path, reference, kill):
    live, ref_path = reference
    path = tmp_path / "r.h5"
    out = run_helper(dict(DENSE, path=str(path), action="run", kill=kill))
    assert "STATUS" not in out.stdout or "interrupted" in out.stdout, out.stderr
    s = dm.open_store(path)
    newest = s.checkpoint
    assert newest.written["theta"] >= 2 * s._schema["theta"].chunk_rows
    damage(path, "observables/theta/value", chunk=1)
    f, _ = open_h5(str(path))
    with f:
        assert intact_rows(f, s._schema)["theta"] == s._schema["theta"].chunk_rows
    with pytest.warns(RuntimeWarning, match="damaged chunks in /observables/theta/value from row"):
        resumed = S.resume(path)
    assert_same_result(live, resumed)
    assert_same_rows(path, ref_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second resume finds nothing to repair
        assert_same_result(live, S.resume(path))


def test_damaged_problem_data_is_an_error_not_silent_numbers(tmp_path):
    problem = dm.sparse_regression(**dict(SMALL, n_test=200), seed=4)  # X_test: 200 x 13 doubles, chunked
    path = tmp_path / "r.h5"
    dm.mgd(problem, 0.05, 0.8, steps=100, store=path)
    damage(path, "problem/X_test")
    with pytest.raises(S.StoreCorruptError, match="r.h5.*/problem/X_test"):
        dm.open_store(path).problem  # noqa: B018 - reading is the point


SWEEP = {"gammas": "0.01:0.1:8", "betas": "0:0.9:4", "steps": 3000, "reps": 2}


@pytest.fixture(scope="module")
def fresh_sweep():
    return dm.sweep(SMALL, **SWEEP)


@pytest.mark.parametrize("dataset, chunk", [("test_loss", 5), ("theta", 2), ("done", 7)])
def test_damaged_sweep_chunks_are_named_and_computed_again(tmp_path, fresh_sweep, dataset, chunk):
    path = tmp_path / "g.h5"
    dm.sweep(SMALL, **SWEEP, store=path)
    damage(path, dataset, chunk=chunk)
    with pytest.raises(S.StoreCorruptError, match=f"g.h5.*dataset /{dataset}.*--resume"):
        dm.open_sweep(path)
    out = subprocess.run([sys.executable, "-m", "dlnmomentum", "sweep", "--resume", "--store", str(path),
                          "--no-progress", "--json"], capture_output=True, text=True, timeout=TIMEOUT, env=ENV,
                         cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["complete"]
    stored = dm.open_sweep(path)
    for name in FIELDS:
        assert np.array_equal(stored[name], fresh_sweep[name], equal_nan=True), name


def test_a_resume_says_how_many_points_damaged_chunks_lost(tmp_path):
    """The points of a damaged chunk are computed again by a resume, and the resume says so (as a network sweep's
    does): before, a complete store with a damaged chunk started a session of recomputation without a word."""
    path = tmp_path / "g.h5"
    dm.sweep(SMALL, **SWEEP, store=path)
    damage(path, "test_loss", chunk=5)  # one chunk: one line of the last grid axis, 8 gammas
    with pytest.warns(RuntimeWarning, match=r"g.h5: 8 points were in damaged chunks \(checksum failed\); they are "
                                             "computed again"):
        assert dm.resume_sweep(path, progress=False).complete
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second resume finds nothing to repair
        dm.resume_sweep(path, progress=False)
