"""A run store whose writer hits a file-size limit (``ulimit -f``: EFBIG) while streaming (issue 23 B9).

Before: the store was left shorter than the end HDF5 records; ``dm.resume`` and ``dlnm inspect`` refused it as
truncated with no advice, although its committed rows and checkpoints were intact, and the error named the
temporary file it was created as (``s.h5.creating<pid>.tmp``), which no longer exists. Now the error names the
store and says how to go on, inspect says how to repair it, and resume extends the file, rebuilds it from its
committed rows and continues bit for bit.
"""

import os
import resource
import subprocess
import sys

import h5py
import numpy as np
import pytest
from store_checks import ROOT, TIMEOUT, assert_same_result

import dlnmomentum as dm

ENV = dict(os.environ, PYTHONPATH=ROOT)
LIMIT = 1_000_000  # bytes: the run below writes about 2 MB
RUN = ["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "200000", "--record-every", "5", "--no-progress",
       "--checkpoint-every", "0", "--n", "8", "--d", "13", "--s", "3", "--n-test", "50"]


def _limited():
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def dlnm(*argv, limit=False):
    return subprocess.run([sys.executable, "-m", "dlnmomentum", *argv], capture_output=True, text=True,
                          timeout=TIMEOUT, env=ENV, cwd=ROOT, preexec_fn=_limited if limit else None)


@pytest.fixture(scope="module")
def cut_short(tmp_path_factory):
    """The store the limited writer left (a copy of it is taken by each test)."""
    path = tmp_path_factory.mktemp("efbig") / "s.h5"
    out = dlnm(*RUN, "--store", str(path), limit=True)
    return path, out


def test_the_error_names_the_store_and_the_way_on(cut_short):
    path, out = cut_short
    assert out.returncode == 2, out.stderr
    assert f"writing store {path} failed" in out.stderr and "File too large" in out.stderr, out.stderr
    assert ".creating" not in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert f"dlnm resume {path}" in out.stderr, out.stderr
    assert sorted(os.listdir(path.parent)) == ["s.h5"], os.listdir(path.parent)  # no lock, no temporary file
    assert os.path.getsize(path) <= LIMIT


def test_inspect_says_how_to_repair_it(cut_short, tmp_path):
    path, _ = cut_short
    copy = tmp_path / "s.h5"
    copy.write_bytes(path.read_bytes())
    out = dlnm("inspect", str(copy))
    assert out.returncode == 2, out.stderr
    assert "truncated" in out.stderr and f"`dlnm resume {copy}`" in out.stderr and "Traceback" not in out.stderr


def test_resume_extends_it_and_continues_bit_for_bit(cut_short, tmp_path):
    path, _ = cut_short
    copy = tmp_path / "s.h5"
    copy.write_bytes(path.read_bytes())
    live = dm.mgd(dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=0), 0.01, 0.5, steps=200_000,
                  record=dm.Record(every=5))
    with pytest.warns(RuntimeWarning, match="file-size limit"):
        resumed = dm.resume(copy)
    assert_same_result(live, resumed)
    assert_same_result(live, dm.open_store(copy).result)
    assert sorted(os.listdir(tmp_path)) == ["s.h5"]


def test_a_short_file_that_is_not_a_run_store_is_left_as_it_was(tmp_path):
    """The extension is undone when the file is no store resume can rebuild (here: a plain HDF5 file)."""
    path = tmp_path / "other.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f["x"] = np.arange(100_000.0)
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) - 1000])
    with pytest.raises(OSError, match="other.h5"):
        dm.resume(path)
    assert path.read_bytes() == whole[: len(whole) - 1000]
    assert sorted(os.listdir(tmp_path)) == ["other.h5"]


def test_a_copy_cut_short_in_its_metadata_is_said_so_by_resume(tmp_path):
    """Before: inspect said `dlnm resume` rebuilds a truncated run store; for one cut short in its HDF5 metadata (a
    partial copy of a finished store), resume then failed with "the file is damaged" (an attribute's checksum) and no
    word of the truncation. The reader now says when resume cannot, and resume says why, leaving the file as it was."""
    path = tmp_path / "s.h5"
    dm.mgd(dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=0), 0.01, 0.5, steps=20_000, store=str(path))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])  # (its second half holds part of its HDF5 metadata)
    with pytest.raises(dm.StoreError, match="unless the missing bytes held part of its HDF5 metadata"):
        dm.open_store(str(path))
    with pytest.raises(dm.StoreError, match=rf"store {path} is truncated: it has {len(data) // 2} bytes of the "
                                            rf"{len(data)} its HDF5 superblock records, and the missing bytes held "
                                            "part of its HDF5 metadata"):
        dm.resume(str(path))
    assert path.read_bytes() == data[: len(data) // 2]
    assert sorted(os.listdir(tmp_path)) == ["s.h5"]
