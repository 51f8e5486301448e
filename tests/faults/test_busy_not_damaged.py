"""Busy is not damaged: a handle of the user's own process, another program's HDF5 lock (issue 23, B6 and B7).

Before: an ``h5py.File`` or ``xarray.open_dataset`` open on a store in the same process made ``dm.resume`` raise
``StoreCorruptError ... damaged ... (file locking flag values don't match)``; a sweep whose store another program
held with an HDF5 lock stopped with no word of what it kept or how to go on; a reader of a store that another
program had open for writing was told the store "was left open by a writer that died".
"""

import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
from store_checks import SPEC, assert_same_result, run_helper

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.cli import main
from dlnmomentum.runs.points import FIELDS
from dlnmomentum.store import files
from dlnmomentum.store import network_sweep as NS
from dlnmomentum.store import sweep_format as SF

SMALL = dict(n=8, d=13, s=3, n_test=50)
SMALL_ARGS = [x for k, v in SMALL.items() for x in (f"--{k.replace('_', '-')}", str(v))]
NETWORK = {"generator": "teacher_student", "n": 6, "d": 2, "teacher_width": 2, "student_width": 3, "n_test": 20}


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """``(path of a run store stopped by SIGTERM, the uninterrupted result)``, both by the writer helper."""
    base = tmp_path_factory.mktemp("busy")
    ref = base / "ref.h5"
    out = run_helper(dict(SPEC, path=str(ref), action="run", slow=0.0))
    assert out.returncode == 0, out.stderr
    path = base / "r.h5"
    out = run_helper(dict(SPEC, path=str(path), action="run", slow=0.0,
                          kill={"point": "chunk", "count": 6, "signal": "TERM"}))
    assert out.returncode == 0 and "STATUS interrupted" in out.stdout, out.stderr
    return path, S.open_store(ref).result


def _copy(src, dst):
    dst.write_bytes(src.read_bytes())
    return dst


def test_resume_with_an_h5py_handle_open_says_busy_and_which_handle(stopped, tmp_path):
    path = _copy(stopped[0], tmp_path / "r.h5")
    with h5py.File(path, "r"):
        assert S.open_store(path).state == "interrupted"  # reading alongside the user's handle works
        with pytest.raises(S.StoreBusyError, match=r"open in this process through 1 other HDF5 handle "
                                                   r"\(h5py\.File in mode 'r'.*close that handle first") as info:
            dm.resume(path)
        assert not isinstance(info.value, S.StoreCorruptError) and str(path) in str(info.value)
        assert "damaged" not in str(info.value)
    assert S.open_store(path).state == "interrupted"  # untouched: nothing was changed by the refused resume
    assert_same_result(stopped[1], dm.resume(path))  # once the handle is closed, bit for bit


def test_resume_with_an_xarray_dataset_open_says_busy(stopped, tmp_path):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    path = _copy(stopped[0], tmp_path / "r.h5")
    ds = xr.open_dataset(path, engine="h5netcdf", phony_dims="sort")
    try:
        with pytest.raises(S.StoreBusyError, match="xarray.open_dataset.*ds.close()"):
            dm.resume(path)
    finally:
        ds.close()
    assert_same_result(stopped[1], dm.resume(path))


def test_a_sweep_with_an_h5py_handle_open_says_busy(tmp_path):
    problem = dm.sparse_regression(**SMALL, seed=4)
    path = tmp_path / "s.h5"
    grid = dict(gammas=[0.01, 0.02], betas=[0.5], steps=100)
    dm.sweep(problem, store=path, **grid)
    with h5py.File(path, "r+") as f:  # one point still to compute (a complete store is resumed without writing)
        f["done"][0, 0, 1] = 0
    with h5py.File(path, "r"):
        assert not dm.open_sweep(path).complete
        with pytest.raises(S.StoreBusyError, match="open in this process through 1 other HDF5 handle"):
            dm.sweep(problem, store=path, resume=True, **grid)
    assert dm.sweep(problem, store=path, resume=True, **grid).complete


def _hold(path, mode="r"):
    """Another program with ``path`` open through h5py (with HDF5's file lock) until it reads a line."""
    code = ("import h5py, sys\nf = h5py.File(sys.argv[1], sys.argv[2])\nprint('open', flush=True)\n"
            "sys.stdin.readline()\nf.close()\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "open"
    return proc


def _release(proc):
    if proc.poll() is None:
        proc.communicate("close\n", timeout=30)


@pytest.fixture
def short_waits(monkeypatch):
    """Writers give up on a foreign lock after 0.3 s, readers after 0.3 s (instead of 60 s and 10 s)."""
    monkeypatch.setattr(files, "READ_WAIT", 0.3)
    monkeypatch.setattr(files.open_h5, "__defaults__", (0.3,))
    monkeypatch.setattr(files.retry_busy, "__defaults__", (0.3,))
    monkeypatch.setattr(files.open_h5_for_writing, "__defaults__", (0.3,))


def test_a_sweep_stopped_by_a_foreign_lock_names_the_file_and_the_next_step(tmp_path, monkeypatch, capsys,
                                                                              short_waits):
    path = tmp_path / "g.h5"
    holders = []
    write_points = SF.SweepFile.write_points

    def write_then_let_another_program_in(self, *args, **kwargs):
        if len(holders) == 0 and os.path.exists(path) and dm.open_sweep(path).done.any():
            holders.append(_hold(path))  # after the first wave: another program opens the store
        return write_points(self, *args, **kwargs)

    monkeypatch.setattr(SF.SweepFile, "write_points", write_then_let_another_program_in)
    argv = ["sweep", "--gammas", "0.01:0.1:8", "--betas", "0,0.5", "--steps", "300", "--wave-size", "8",
            "--no-progress", "--store", str(path), *SMALL_ARGS]
    try:
        assert main(argv) == 2
    finally:
        for proc in holders:
            _release(proc)
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("dlnm: error: ")
    assert f"store {path} cannot be opened for writing: another program keeps it open" in err, err
    assert (f"the sweep stopped with 8/16 points in the store {path}: once the other program has closed it, "
            f"continue with `dlnm sweep --store {path} --resume`") in err, err
    monkeypatch.setattr(SF.SweepFile, "write_points", write_points)
    assert main(argv + ["--resume"]) == 0
    stored = dm.open_sweep(path)
    fresh = dm.sweep(SMALL, gammas="0.01:0.1:8", betas="0,0.5", steps=300)
    assert stored.complete
    for name in FIELDS:
        assert np.array_equal(stored[name], fresh[name], equal_nan=True), name


def test_a_network_sweep_stopped_by_a_foreign_lock_says_how_to_go_on(tmp_path, monkeypatch, short_waits):
    path = tmp_path / "ts.h5"
    holders = []
    write_points = NS.write_points

    def write_then_let_another_program_in(*args, **kwargs):
        if holders:
            return write_points(*args, **kwargs)
        write_points(*args, **kwargs)
        holders.append(_hold(path))  # after the first points: another program opens the store
        return None

    monkeypatch.setattr(NS, "write_points", write_then_let_another_program_in)
    try:
        with pytest.raises(S.StoreBusyError) as info:
            dm.networks_sweep(NETWORK, gammas=[0.01, 0.02], betas=[0.0, 0.5], steps=200, wave_size=2, threads=1,
                              store=path)
    finally:
        for proc in holders:
            _release(proc)
    message = str(info.value)
    assert "another program keeps it open" in message, message
    assert (f"the sweep stopped with 2/4 points in the store {path}: once the other program has closed it, "
            f"continue with `dlnm network ARCHITECTURE --store {path} --resume`") in message, message
    assert dm.resume_sweep(path).complete


def test_a_reader_meeting_another_programs_writer_says_busy_not_died(tmp_path, short_waits):
    path = tmp_path / "s.h5"
    dm.sweep(SMALL, gammas=[0.01, 0.02], betas=[0.5], steps=100, store=path)
    holder = _hold(path, "r+")  # another program's writer (no dlnmomentum lock file)
    try:
        with pytest.raises(S.StoreBusyError, match=f"store {path} is being written by another process") as info:
            dm.open_sweep(path)
        assert "died" not in str(info.value)
    finally:
        _release(holder)
    assert dm.open_sweep(path).complete  # it closed the file: readable again


def test_in_process_handles_are_named_only_for_the_file(tmp_path):
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    for p in (a, b):
        with h5py.File(p, "w") as f:
            f["x"] = 1
    with h5py.File(a, "r"), h5py.File(os.path.join(tmp_path, ".", "a.h5"), "r"):
        assert files.open_handles(str(a)).startswith("2 other HDF5 handles")  # (one file, two handles)
        assert files.open_handles(str(b)) == ""
    assert files.open_handles(str(a)) == ""
