"""The network sweep store has the diagonal sweep store's protections (since 0.5.0).

Before: it was a plain HDF5 file (older superblock, contiguous datasets without checksums) opened with
HDF5's file lock. A reader polling it while a sweep ran could make the writer's reopen fail; damaged
bytes came back as numbers; a full disk while it was created left a partial file. Now: built in memory and
renamed into place, the newest superblock (readers take no lock), Fletcher32 on chunked datasets, the
writer waits for readers that do hold a lock, and a damaged chunk is an error naming the dataset.
"""

import errno
import os
import subprocess
import sys
import threading
import time

import h5py
import numpy as np
import pytest
from store_checks import ROOT, TIMEOUT

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.runs.network import POINT_FIELDS
from dlnmomentum.store import network_sweep as NS
from dlnmomentum.store.files import open_h5, superblock_version

ENV = dict(os.environ, PYTHONPATH=ROOT)
#: A small teacher-student sweep of the CLI, and the same through the API.
ARGS = ["--gammas", "0.05,0.1,0.2", "--betas", "0,0.5,0.8", "--steps", "3000", "--n-test", "50"]
GRID = {"gammas": [0.05, 0.1, 0.2], "betas": [0.0, 0.5, 0.8], "steps": 3000}


def _fresh():
    return dm.networks_sweep(dm.teacher_student(n_test=50, seed=0), **GRID)


def _same_as_fresh(path):
    stored, fresh = dm.open_networks_sweep(path), _fresh()
    assert stored.complete
    for name in POINT_FIELDS:
        assert np.array_equal(stored[name], fresh[name], equal_nan=True), name


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    path = tmp_path_factory.mktemp("ns") / "ts.h5"
    dm.networks_sweep(dm.teacher_student(n_test=50, seed=0), store=str(path), **GRID)
    return path


def test_layout_checksums_and_an_unlocked_superblock(finished):
    assert superblock_version(str(finished)) in (2, 3)  # readers open it without a lock
    f, _ = open_h5(str(finished))
    with f:
        for name in (*POINT_FIELDS, "done", "session"):
            ds = f[name]
            assert ds.fletcher32 and ds.chunks == (1, 1, 3), name  # one line of the gamma axis per chunk


def test_a_polling_reader_never_breaks_a_network_sweep(tmp_path):
    path = tmp_path / "ts.h5"
    reads, other = [0], []
    stop = threading.Event()

    def poll():
        while not stop.is_set():
            try:
                dm.open_networks_sweep(path)
                reads[0] += 1
            except FileNotFoundError:
                pass
            except S.StoreBusyError:
                pass
            except Exception as exc:  # noqa: BLE001 - the test reports every other kind
                other.append(f"{type(exc).__name__}: {exc}")

    thread = threading.Thread(target=poll, daemon=True)
    thread.start()
    try:
        out = subprocess.run([sys.executable, "-m", "dlnmomentum", "network", "teacher-student", *ARGS, "--store",
                              str(path), "--no-progress"], capture_output=True, text=True, timeout=TIMEOUT, env=ENV,
                             cwd=ROOT)
        time.sleep(0.05)
    finally:
        stop.set()
        thread.join()
    assert out.returncode == 0, out.stderr
    assert other == [] and reads[0] > 0, other[:3]
    _same_as_fresh(path)


def _hold(path, seconds):
    """Another program's reader: ``h5py.File(path, "r")`` with HDF5's file lock, for ``seconds``."""
    code = ("import h5py, sys, time\nf = h5py.File(sys.argv[1], 'r')\nprint('open', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "open"
    return proc


def test_the_writer_waits_for_a_reader_holding_a_lock(finished, tmp_path):
    path = tmp_path / "ts.h5"
    path.write_bytes(finished.read_bytes())
    holder = _hold(path, 0.6)
    t0 = time.monotonic()
    session = NS.start_session(str(path))
    index = (np.array([0]), np.array([1]), np.array([2]))
    values = {name: np.array([7.0]) if np.issubdtype(dtype, np.floating) else np.array([0])
              for name, (dtype, _) in POINT_FIELDS.items()}
    NS.write_points(str(path), index, values, session)
    assert time.monotonic() - t0 > 0.3  # it waited for the reader, then wrote
    holder.wait()
    assert dm.open_networks_sweep(path)["test_loss"][0, 1, 2] == 7.0


def damage(path, dataset, chunk):
    """Overwrite bytes inside chunk number ``chunk`` of ``dataset`` (located with HDF5's chunk index)."""
    f, _ = open_h5(str(path))
    with f:
        info = f[dataset].id.get_chunk_info(chunk)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset + min(4, info.size // 2))
        fh.write(b"\x7f\xe0" * 2)  # big doubles: the kind of garbage that looks like a result


def test_a_damaged_chunk_is_named_not_read_as_numbers(finished, tmp_path):
    path = tmp_path / "ts.h5"
    path.write_bytes(finished.read_bytes())
    damage(path, "test_loss", 1)  # the line beta = 0.5
    with pytest.raises(S.StoreCorruptError, match=r"ts\.h5.*test_loss.*computes the points of a damaged chunk"):
        dm.open_networks_sweep(path)


@pytest.mark.parametrize("dataset", ["test_loss", "done"])
def test_resume_computes_the_points_of_a_damaged_chunk_again(finished, tmp_path, dataset):
    path = tmp_path / "ts.h5"
    path.write_bytes(finished.read_bytes())
    damage(path, dataset, 2)  # the line beta = 0.8: 3 points
    with pytest.warns(RuntimeWarning, match="3 points were in damaged chunks"):
        dm.resume_networks_sweep(path)
    _same_as_fresh(path)  # bit for bit: sweeps are deterministic
    assert NS.repair(str(path)) == 0


def test_a_full_disk_while_creating_leaves_nothing(tmp_path, monkeypatch):
    def full(f, p):
        f.close()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(NS, "write_h5_image", full)
    path = tmp_path / "ts.h5"
    with pytest.raises(S.StoreError, match="No space left.*nothing was written"):
        dm.networks_sweep(dm.teacher_student(n_test=50, seed=0), store=str(path), **GRID)
    assert not path.exists() and not (tmp_path / "ts.h5.creating").exists()


def test_a_store_of_the_older_layout_is_read_and_continued(finished, tmp_path):
    """A 0.4.0 store (contiguous datasets, default superblock) with missing points: resumed, then complete."""
    path = tmp_path / "old.h5"
    with h5py.File(finished, "r") as src, h5py.File(path, "w") as dst:  # h5py's defaults, as 0.4.0 wrote
        dst.attrs.update(dict(src.attrs))
        for name in ("rep", "beta", "gamma"):
            dst.create_dataset(name, data=src[name][...]).make_scale(name)
        for name in (*POINT_FIELDS, "done", "session"):
            data = src[name][...]
            if name == "done":
                data[0, 1:, :] = 0  # 6 of 9 points still to compute
            dst.create_dataset(name, data=data)
            for axis, dim in enumerate(("rep", "beta", "gamma")):
                dst[name].dims[axis].attach_scale(dst[dim])
        src.copy(src["problem"], dst)  # the given problem the sweep ran on
    assert superblock_version(str(path)) == 0 and not dm.open_networks_sweep(path).complete
    dm.resume_networks_sweep(path)
    _same_as_fresh(path)
