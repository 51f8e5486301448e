"""HDF5 run stores: round trips, crash safety and bitwise resume, h5py/xarray readability,
refusals, damaged files, chunk shapes.

Writers that must die are subprocesses (``tests/store_helpers/writer.py``) that SIGKILL/SIGTERM
themselves at a chosen point of the store's life (hooks in ``dlnmomentum.store.writer``) or are killed
from here; damaged files are opened in a subprocess with a timeout, so a hang fails the test.
"""

import json
import os
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from signal_helpers import sigint_default, sigint_once_handled
from store_checks import (
    HELPER,
    ROOT,
    SPEC,
    TIMEOUT,
    assert_same_result,
    assert_same_rows,
    open_in_subprocess,
    paused_writer,
    run_helper,
)

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.runs.flow import prepare_flow
from dlnmomentum.runs.mgd import prepare_mgd
from dlnmomentum.store import writer as store_writer
from dlnmomentum.store.files import clear_status_flags, lookup3, read_checkpoint_file, superblock_flags
from dlnmomentum.store.format import MAX_CHUNK_BYTES, MIN_CHUNK_BYTES, chunk_shape


def stored_run(problem, path, record=None, chunk_steps=None, checkpoint_every=60.0, **kwargs):
    run = prepare_mgd(problem, kwargs.pop("gamma", 0.05), kwargs.pop("beta", 0.8), record=record, **kwargs)
    if chunk_steps:
        run.chunk_steps = chunk_steps
    return S.run_with_store(run, path, checkpoint_every=checkpoint_every)


@pytest.fixture(scope="session", autouse=True)
def warm(tmp_path_factory, small_problem):
    """Load the compiled kernels and HDF5 once (subprocesses use the on-disk numba cache)."""
    path = tmp_path_factory.mktemp("warm") / "warm.h5"
    dm.mgd(small_problem, 0.05, 0.8, steps=100, record=dm.Record(every=10), store=path)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, small_problem):
    """The uninterrupted run of SPEC: live result and an uninterrupted store."""
    path = tmp_path_factory.mktemp("ref") / "ref.h5"
    record = dm.Record(**SPEC["record"])
    live = dm.mgd(small_problem, SPEC["gamma"], SPEC["beta"], steps=SPEC["steps"], record=record)
    stored = stored_run(small_problem, path, record=record, steps=SPEC["steps"],
                        chunk_steps=SPEC["chunk_steps"], checkpoint_every=0.0)
    assert_same_result(live, stored)
    return live, path


def check_resumed(path, reference):
    live, ref_path = reference
    result = S.resume(path)
    assert_same_result(live, result)
    assert_same_result(live, S.open_store(path).result)
    assert_same_rows(path, ref_path)
    s = S.open_store(path)
    assert s.state == "complete" and s.side_files() == {}
    return result


# -- round trip -----------------------------------------------------------------------------------

ROUND_TRIPS = {
    "mgd-log": dict(gamma=0.05, beta=0.8, steps=30_000, record=dm.Record(log=200)),
    "smgd-every": dict(gamma=0.02, beta=0.6, steps=20_000, batch_size=3, seed=5, record=dm.Record(every=500)),
    "smgd-replace": dict(gamma=0.02, beta=0.5, steps=5_000, batch_size=4, replace=True, seed=1,
                         record=dm.Record(steps=[0, 3, 17, 4000])),
    "converged": dict(gamma=0.05, beta=0.8, steps=10**6, tol=1e-6, record=dm.Record(log=50)),
    "diverged": dict(gamma=5.0, beta=0.9, steps=100_000, record=dm.Record(every=7)),
    "no-record": dict(gamma=0.05, beta=0.8, steps=10_000),
    "init-data-form": dict(gamma=0.03, beta=0.7, steps=10_000, u0=np.linspace(0.01, 0.02, 13),
                           v0=np.linspace(-0.005, 0.004, 13), gradient="data", record=dm.Record(every=1)),
}


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_round_trip_every_field_equals_live_result(small_problem, tmp_path, name):
    kwargs = ROUND_TRIPS[name]
    live = dm.mgd(small_problem, **kwargs)
    path = tmp_path / "run.h5"
    stored = dm.mgd(small_problem, **kwargs, store=path, checkpoint_every=0.0)
    assert_same_result(live, stored)
    s = S.open_store(path)
    assert s.state == "complete" and s.status == live.status and s.kind == live.kind
    assert_same_result(live, s.result)
    if live.trajectory is not None:
        traj = s.trajectory
        for key, value in live.trajectory.fields().items():
            assert np.array_equal(traj.fields()[key], value, equal_nan=True)
            obs = s[key] if key not in ("step", "time") else None
            if obs is not None:
                assert np.array_equal(obs.value, value, equal_nan=True)
                assert np.array_equal(obs.step, live.trajectory.step)
    assert s.side_files() == {}  # one file per finished run


def test_schedule_rows_are_the_record_schedule(small_problem, tmp_path):
    records = [dm.Record(every=1000), dm.Record(log=100), dm.Record(steps=[5, 0, 99, 10_000])]
    for i, record in enumerate(records):
        run = prepare_mgd(small_problem, 0.05, 0.8, steps=10_000, record=record)
        schedule = run.schedule.copy()
        S.run_with_store(run, tmp_path / f"s{i}.h5")
        with h5py.File(tmp_path / f"s{i}.h5") as f:
            assert np.array_equal(f["observables/step"][()], schedule)
            assert np.array_equal(f["observables/time"][()], schedule * run.config.eps)


def test_config_problem_and_initial_are_stored(small_problem, tmp_path):
    u0 = np.linspace(0.01, 0.03, 13)
    dm.mgd(small_problem, 0.05, 0.8, steps=1000, u0=u0, record=dm.Record(every=100), store=tmp_path / "r.h5")
    s = S.open_store(tmp_path / "r.h5")
    assert s.config["config"]["gamma"] == 0.05 and s.config["config"]["steps"] == 1000
    assert s.config["schedule"] == list(range(0, 1001, 100))
    assert np.array_equal(s.initial["u0"], u0) and np.array_equal(s.initial["v0"], np.zeros(13))
    assert np.array_equal(s.problem.X, small_problem.X) and s.problem.params == small_problem.params
    assert np.array_equal(s.problem.theta_star, small_problem.theta_star)
    # long lists of the configuration are datasets, referenced from the root attribute
    dm.mgd(small_problem, 0.05, 0.8, steps=1000, record=dm.Record(every=1), store=tmp_path / "long.h5")
    with h5py.File(tmp_path / "long.h5") as f:
        config = json.loads(f.attrs["config"])
        assert config["schedule"] == {"$dataset": "/config_arrays/schedule"}
        assert np.array_equal(f["config_arrays/schedule"][()], np.arange(1001))
    assert S.open_store(tmp_path / "long.h5").config["schedule"] == list(range(1001))


def test_collected_rows_dropped_beyond_the_memory_cap(small_problem, tmp_path, monkeypatch):
    """Above the cap the writer keeps nothing in memory; the result reads its rows back from the file."""
    monkeypatch.setattr(store_writer, "MAX_COLLECT_BYTES", 0)
    monkeypatch.setattr(store_writer, "MAX_QUEUED_BYTES", 1)  # and waits for every chunk write
    kwargs = dict(steps=20_000, record=dm.Record(every=3))
    live = dm.mgd(small_problem, 0.05, 0.8, **kwargs)
    stored = dm.mgd(small_problem, 0.05, 0.8, **kwargs, store=tmp_path / "r.h5")
    assert_same_result(live, stored)


def test_in_process_sigint_then_resume(small_problem, tmp_path, reference, monkeypatch):
    """Ctrl-C stops between chunks with a final checkpoint and a cleanly closed file."""
    monkeypatch.setattr(store_writer, "_TEST_HOOK", lambda point: time.sleep(0.002) if point == "chunk" else None)
    path = tmp_path / "r.h5"
    run = prepare_mgd(small_problem, SPEC["gamma"], SPEC["beta"], steps=SPEC["steps"],
                      record=dm.Record(**SPEC["record"]))
    run.chunk_steps = 200
    with sigint_once_handled(delay=0.3) as sent:
        result = S.run_with_store(run, path, checkpoint_every=0.05)
    assert sent["sent"]
    monkeypatch.setattr(store_writer, "_TEST_HOOK", None)
    assert result.status_name == "interrupted" and 0 < result.steps_done < SPEC["steps"]
    s = S.open_store(path)
    assert s.state == "interrupted" and s.complete
    assert_same_result(result, s.result)
    assert "checkpoint" in s.side_files()
    check_resumed(path, reference)


# -- layout: h5py alone and xarray ----------------------------------------------------------------

@pytest.fixture(scope="module")
def layout_store(tmp_path_factory, small_problem):
    path = tmp_path_factory.mktemp("layout") / "run.h5"
    result = dm.mgd(small_problem, 0.05, 0.8, steps=20_000, record=dm.Record(log=100), store=path)
    return path, result


def test_h5py_alone_reads_everything(layout_store, small_problem):
    path, result = layout_store
    with h5py.File(path, "r") as f:
        a = f.attrs
        assert a["format"] == "dlnmomentum-run" and a["format_version"] == 2
        for key in ("package_version", "numba_version", "numpy_version", "h5py_version", "created", "kind"):
            assert key in a, key
        assert a["kind"] == "mgd" and a["status_name"] == "max_steps" and a["writer_state"] == "closed"
        assert json.loads(a["config"])["config"]["beta"] == 0.8
        assert np.array_equal(f["problem/X"][()], small_problem.X)
        assert np.array_equal(f["problem/y_test"][()], small_problem.y_test)
        # step and time are one dataset each, hard-linked into every observable group
        for name in ("theta", "w_plus", "w_minus", "delta", "train_loss", "test_loss"):
            g = f[f"observables/{name}"]
            assert g["step"] == f["observables/step"] and g["time"] == f["observables/time"]
            assert g["value"].attrs["units"] and g["value"].attrs["description"]
        assert f["observables/step"].dtype == np.int64 and f["observables/time"].dtype == np.float64
        assert np.array_equal(f["observables/theta/value"][()], result.trajectory.theta)
        assert np.array_equal(f["final/theta"][()], result.theta)
        assert f["final/steps_done"][()] == result.steps_done

        def check(name, obj):
            if isinstance(obj, h5py.Dataset):
                assert obj.dtype != np.bool_, name
                if not obj.is_scale:  # every axis carries a dimension scale
                    for axis in range(obj.ndim):
                        assert len(obj.dims[axis]) >= 1, (name, axis)
                obj[()]  # readable
        f.visititems(check)


def test_xarray_opens_every_group_with_labelled_dims(layout_store):
    xr = pytest.importorskip("xarray")
    pytest.importorskip("h5netcdf")
    path, result = layout_store
    for name in ("theta", "w_plus", "w_minus", "delta"):
        with xr.open_dataset(path, engine="h5netcdf", group=f"observables/{name}") as ds:
            assert ds["value"].dims == ("time", "coordinate")
            assert np.array_equal(ds["step"].values, result.trajectory.step)
            assert np.array_equal(ds["time"].values, result.trajectory.time)
            assert np.array_equal(ds["coordinate"].values, np.arange(13))
            assert np.array_equal(ds["value"].values, getattr(result.trajectory, name))
            assert ds["value"].attrs["units"]
    for name in ("train_loss", "test_loss"):
        with xr.open_dataset(path, engine="h5netcdf", group=f"observables/{name}") as ds:
            assert ds["value"].dims == ("time",) and "step" in ds.coords
            assert np.array_equal(ds["value"].values, getattr(result.trajectory, name), equal_nan=True)
    with xr.open_dataset(path, engine="h5netcdf", group="final") as ds:
        assert ds["theta"].dims == ("coordinate",) and np.array_equal(ds["theta"].values, result.theta)
        assert float(ds["train_loss"]) == result.train_loss
    for group in ("problem", "initial", "observables"):
        with xr.open_dataset(path, engine="h5netcdf", group=group) as ds:
            assert len(ds.sizes) >= 1
    s = S.open_store(path)
    merged = s.to_xarray()
    assert merged["theta"].dims == ("time", "coordinate") and merged.sizes["time"] == len(result.trajectory)
    one = s.to_xarray("delta")
    assert np.array_equal(one["value"].values, result.trajectory.delta)


def test_chunk_shapes_are_explicit_and_within_range(layout_store):
    path, _ = layout_store
    with h5py.File(path, "r") as f:
        keys = ["observables/step", "observables/time"] + [
            f"observables/{k}/value" for k, g in f["observables"].items() if isinstance(g, h5py.Group)]
        for key in keys:
            ds = f[key]
            assert ds.chunks is not None and ds.maxshape[0] is None, key
            assert ds.chunks[1:] == ds.shape[1:], key  # chunks run along time, whole rows
            nbytes = ds.dtype.itemsize * int(np.prod(ds.chunks))
            assert MIN_CHUNK_BYTES <= nbytes <= MAX_CHUNK_BYTES, (key, ds.chunks, nbytes)
            assert ds.compression == "gzip" and ds.shuffle, key


@pytest.mark.parametrize("row_shape", [(), (1,), (13,), (30,), (1000,), (140_000,), (300_000,), (3, 50_000)])
def test_chunk_shape_rule(row_shape):
    chunks = chunk_shape(row_shape, 8)
    assert len(chunks) == len(row_shape) + 1
    assert MIN_CHUNK_BYTES <= 8 * int(np.prod(chunks)) <= MAX_CHUNK_BYTES, chunks
    assert all(1 <= c <= s for c, s in zip(chunks[1:], row_shape, strict=True))


# -- refusals and damaged files -------------------------------------------------------------------

def test_existing_store_is_never_overwritten(small_problem, tmp_path):
    path = tmp_path / "r.h5"
    first = dm.mgd(small_problem, 0.05, 0.8, steps=1000, record=dm.Record(every=100), store=path)
    before = (os.path.getsize(path), os.path.getmtime(path))
    with pytest.raises(S.StoreExistsError, match="already exists.*overwrite=True") as info:
        dm.mgd(small_problem, 0.02, 0.5, steps=500, store=path)
    assert isinstance(info.value, FileExistsError) and str(path) in str(info.value)
    assert (os.path.getsize(path), os.path.getmtime(path)) == before
    assert_same_result(first, S.open_store(path).result)
    other = dm.mgd(small_problem, 0.02, 0.5, steps=500, store=path, overwrite=True)
    assert_same_result(other, S.open_store(path).result)
    with pytest.raises(S.StoreExistsError):  # any existing file
        dm.mgd(small_problem, 0.02, 0.5, steps=10, store=tmp_path / "r.h5")
    (tmp_path / "notes.txt").write_text("keep me")
    with pytest.raises(S.StoreExistsError):
        dm.mgd(small_problem, 0.02, 0.5, steps=10, store=tmp_path / "notes.txt")
    assert (tmp_path / "notes.txt").read_text() == "keep me"


def test_store_written_by_another_process_just_before_the_lock_is_kept(small_problem, tmp_path, monkeypatch):
    # Between the "exists?" check and the lock, another writer may create the store, finish and let go of its lock
    # (processes started together on the same store): the store it wrote must stay, not be deleted and replaced.
    path = tmp_path / "r.h5"
    acquire = store_writer.WriterLock.acquire
    other = {}

    def finishes_first(store, purpose):
        if not other:
            monkeypatch.setattr(store_writer.WriterLock, "acquire", acquire)
            other["result"] = dm.mgd(small_problem, 0.05, 0.8, steps=300, store=path)  # the other process
        return acquire(store, purpose)

    monkeypatch.setattr(store_writer.WriterLock, "acquire", finishes_first)
    with pytest.raises(S.StoreExistsError, match="already exists"):
        dm.mgd(small_problem, 0.02, 0.5, steps=200, store=path)
    kept = S.open_store(path).result
    assert (kept.gamma, kept.beta, kept.steps_done) == (0.05, 0.8, 300)
    assert_same_result(other["result"], kept)
    assert not os.path.exists(str(path) + ".lock")


def test_concurrent_writer_is_refused_then_killed_writer_resumes(tmp_path, reference):
    path = tmp_path / "r.h5"
    proc = paused_writer(SPEC, path, 12)
    try:
        assert proc.poll() is None
        with pytest.raises(S.StoreLockedError, match=f"process {proc.pid}"):
            dm.mgd(dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=4), 0.05, 0.8, steps=10,
                   store=path, overwrite=True)
        with pytest.raises(S.StoreLockedError, match="open for writing"):
            S.resume(path)
        live = S.open_store(path)  # readers are welcome while the writer streams (SWMR)
        assert live.state == "running" and live.result is None
        proc.send_signal(signal.SIGKILL)  # the writer dies while paused
        proc.wait(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    assert open_in_subprocess(path)["state"] == "crashed"
    check_resumed(path, reference)


def test_stale_lock_of_a_dead_process_is_taken_over(small_problem, tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    path = tmp_path / "r.h5"
    import socket

    (tmp_path / "r.h5.lock").write_text(json.dumps({"pid": int(dead.stdout), "host": socket.gethostname()}))
    dm.mgd(small_problem, 0.05, 0.8, steps=100, store=path)
    assert not os.path.exists(tmp_path / "r.h5.lock")


def test_damaged_files_give_a_clear_error_never_a_hang(layout_store, tmp_path):
    good, _ = layout_store
    data = open(good, "rb").read()
    cases = {"garbage.h5": os.urandom(50_000), "empty.h5": b"", "truncated.h5": data[: len(data) // 2],
             "head.h5": data[:600], "text.h5": b"definitely not hdf5\n" * 100}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
    with h5py.File(tmp_path / "foreign.h5", "w") as f:
        f["x"] = np.arange(3)
    for name in list(cases) + ["foreign.h5"]:
        out = open_in_subprocess(tmp_path / name)
        assert not out["ok"] and out["oserror"], (name, out)
        assert out["type"] in ("StoreCorruptError", "StoreError"), (name, out)
        assert str(tmp_path / name) in out["message"], (name, out)
    with pytest.raises(FileNotFoundError):
        S.open_store(tmp_path / "missing.h5")
    with pytest.raises(S.StoreError, match="garbage.h5"):
        S.resume(tmp_path / "garbage.h5")
    out = subprocess.run([sys.executable, "-m", "dlnmomentum", "inspect", str(tmp_path / "truncated.h5")],
                         capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 2 and "dlnm: error:" in out.stderr and "truncated" in out.stderr


def test_superblock_checksum_and_flag_repair(tmp_path):
    """lookup3 reproduces HDF5's superblock checksum; clearing the flags of a killed writer's file."""
    path = tmp_path / "x.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f["x"] = np.arange(10)
    raw = open(path, "rb").read(48)
    assert lookup3(raw[:44]) == int.from_bytes(raw[44:48], "little")
    assert lookup3(b"") == 0xDEADBEEF and lookup3(b"Four score and seven years ago") == 0x17770551
    assert superblock_flags(path) == 0 and not clear_status_flags(path)
    code = ("import h5py, os, sys\nf = h5py.File(sys.argv[1], 'r+', libver='latest')\nf['y'] = [1]\n"
            "f.flush()\nos.kill(os.getpid(), 9)\n")
    subprocess.run([sys.executable, "-c", code, str(path)], timeout=60)
    assert superblock_flags(path) != 0
    with pytest.raises(OSError):
        h5py.File(path, "r")
    assert clear_status_flags(path)
    with h5py.File(path, "r") as f:
        assert np.array_equal(f["x"][()], np.arange(10))


# -- crash safety: SIGKILL at several points, SIGTERM -----------------------------------------------

KILL_POINTS = [("checkpoint:flush", 1), ("chunk", 23), ("checkpoint:flush", 5), ("checkpoint:write", 9),
               ("checkpoint:done", 14), ("close:start", 1), ("close:final-written", 1)]


@pytest.mark.parametrize("point, count", KILL_POINTS, ids=[f"{p}-{c}" for p, c in KILL_POINTS])
def test_sigkill_then_resume_is_bitwise_identical(tmp_path, reference, point, count):
    path = tmp_path / "r.h5"
    out = run_helper(dict(SPEC, path=str(path), action="run", kill={"point": point, "count": count}))
    assert out.returncode == -signal.SIGKILL, out.stderr
    assert "STATUS" not in out.stdout
    opened = open_in_subprocess(path)
    assert opened["ok"] and opened["state"] == "crashed", opened
    check_resumed(path, reference)


def test_a_crashed_store_shows_the_rows_of_its_checkpoint(tmp_path, reference):
    """The file commits rows by whole chunks, each dataset at its own pace (``step`` 4096 rows a chunk, ``theta``
    at d = 13 315): a reader of a running or crashed store saw 0 rows although the checkpoint held ~170. Readers
    now complete the file's rows from the newest checkpoint, which are the uninterrupted run's first rows."""
    path = tmp_path / "r.h5"
    out = run_helper(dict(SPEC, path=str(path), action="run", kill={"point": "checkpoint:done", "count": 20}))
    assert out.returncode == -signal.SIGKILL, out.stderr
    with h5py.File(path, "r", swmr=True) as f:  # (a writer killed in SWMR mode)
        on_disk = min(f["observables/step"].shape[0], f["observables/theta/value"].shape[0])
    s = S.open_store(path)
    ckpt = s.checkpoint
    assert s.state == "crashed" and ckpt.rows > on_disk and s.rows == ckpt.rows
    live, ref_path = reference
    traj = s.trajectory
    for name in ("step", "time", "theta", "w_plus", "train_loss", "test_loss", "delta"):
        assert np.array_equal(getattr(traj, name), getattr(live.trajectory, name)[:ckpt.rows]), name
    obs = s.observable("theta")
    assert np.array_equal(obs.value, live.trajectory.theta[:ckpt.rows]) and len(obs.step) == ckpt.rows
    assert s.to_xarray().sizes["time"] == ckpt.rows
    assert open_in_subprocess(path)["rows"] == ckpt.rows
    check_resumed(path, reference)


def test_smgd_sigkill_then_resume_restores_the_random_state(tmp_path, small_problem):
    spec = dict(SPEC, steps=60_000, chunk_steps=2000, batch_size=3, seed=11, record={"every": 700})
    live = dm.mgd(small_problem, spec["gamma"], spec["beta"], steps=spec["steps"], batch_size=3, seed=11,
                  record=dm.Record(every=700))
    assert live.kind == "smgd"
    path = tmp_path / "r.h5"
    out = run_helper(dict(spec, path=str(path), action="run", kill={"point": "checkpoint:done", "count": 6}))
    assert out.returncode == -signal.SIGKILL, out.stderr
    ckpt = S.open_store(path).checkpoint
    assert 0 < ckpt.done < spec["steps"] and "rng_state" in ckpt.state
    assert_same_result(live, S.resume(path))
    assert_same_result(live, S.open_store(path).result)


def test_killed_while_creating_leaves_no_store(tmp_path, small_problem):
    path = tmp_path / "r.h5"
    out = run_helper(dict(SPEC, path=str(path), action="run", kill={"point": "create:layout", "count": 1}))
    assert out.returncode == -signal.SIGKILL
    assert not path.exists()  # no half-made store; the temporary file and the stale lock are cleared
    with pytest.raises(FileNotFoundError):
        S.resume(path)
    dm.mgd(small_problem, 0.05, 0.8, steps=100, store=path)
    assert sorted(os.listdir(tmp_path)) == ["r.h5"]


def test_sigkill_during_resume_and_damaged_checkpoint(tmp_path, reference):
    """A writer killed outside its streaming phase (flags repaired), and a torn .ckpt (.ckpt.prev used)."""
    path = tmp_path / "r.h5"
    out = run_helper(dict(SPEC, path=str(path), action="run", kill={"point": "checkpoint:done", "count": 8}))
    assert out.returncode == -signal.SIGKILL
    sides = S.open_store(path).side_files()
    assert {"checkpoint", "previous", "lock"} <= set(sides)
    older = read_checkpoint_file(sides["previous"])
    assert older.done < read_checkpoint_file(sides["checkpoint"]).done
    with open(sides["checkpoint"], "r+b") as fh:  # tear the newest checkpoint
        fh.truncate(os.path.getsize(sides["checkpoint"]) // 2)
    assert S.open_store(path).checkpoint.done == older.done
    out = run_helper(dict(path=str(path), action="resume", kill={"point": "resume:reopened", "count": 1}))
    assert out.returncode == -signal.SIGKILL, out.stderr
    assert superblock_flags(path) != 0  # killed outside SWMR mode: HDF5 refuses the file as is
    opened = open_in_subprocess(path)
    assert not opened["ok"] and "resume" in opened["message"], opened
    check_resumed(path, reference)


def test_killed_before_any_checkpoint_restarts_from_scratch(tmp_path, reference):
    path = tmp_path / "r.h5"
    out = run_helper(dict(SPEC, path=str(path), action="run", checkpoint_every=1e9,
                          kill={"point": "chunk", "count": 30}))
    assert out.returncode == -signal.SIGKILL
    assert S.open_store(path).checkpoint is None
    check_resumed(path, reference)


def test_sigterm_writes_a_final_checkpoint_and_closes_cleanly(tmp_path, reference):
    path = tmp_path / "r.h5"
    out = run_helper(dict(SPEC, path=str(path), action="run", kill={"point": "chunk", "count": 9,
                                                                     "signal": "TERM"}))
    assert out.returncode == 0, out.stderr
    # the signal arrives in chunk 9's bookkeeping (held while the chunk and its recording complete): the driver
    # stops right after that chunk (before 0.6.0 it ran chunk 10 first)
    assert "STATUS interrupted 45000" in out.stdout
    with h5py.File(path, "r") as f:  # a normal open: the file was closed cleanly
        assert f.attrs["status_name"] == "interrupted" and f.attrs["writer_state"] == "closed"
        assert f["final/steps_done"][()] == 45_000 and f["final"].attrs["complete"] == 1
        assert "checkpoint" in f
    s = S.open_store(path)
    assert s.state == "interrupted" and s.checkpoint.done == 45_000 and "lock" not in s.side_files()
    check_resumed(path, reference)


def test_external_sigterm_and_cli_resume(tmp_path, reference, capsys):
    path = tmp_path / "r.h5"
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, HELPER, json.dumps(dict(SPEC, path=str(path), action="run",
                                                                       slow=0.01))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    try:
        for line in proc.stdout:
            if line.startswith("CHUNK 6"):
                proc.send_signal(signal.SIGTERM)
                break
        stdout, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr
    assert "STATUS interrupted" in stdout
    assert S.open_store(path).state == "interrupted"
    from dlnmomentum.cli import main

    assert main(["resume", str(path), "--no-progress"]) == 0
    assert "max_steps" in capsys.readouterr().out
    live, ref_path = reference
    assert_same_result(live, S.open_store(path).result)
    assert_same_rows(path, ref_path)


def test_resume_of_a_finished_store_changes_nothing(layout_store):
    path, result = layout_store
    before = open(path, "rb").read()
    assert_same_result(result, S.resume(path))
    assert open(path, "rb").read() == before


# -- command line -----------------------------------------------------------------------------------

def test_cli_inspect(layout_store, capsys):
    from dlnmomentum.cli import main

    path, result = layout_store
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    shape = f"({len(result.trajectory)}, 13)"
    for text in ("max_steps", "gamma=0.05", "theta", shape, "chunks", "KiB", "train loss", "per row",
                 "prediction gap", "normalized distance"):
        assert text in out, text
    gap = float(out.split("prediction gap (Theorem 1/2) ")[1].split(";")[0])
    assert gap == pytest.approx(result.prediction_gap, rel=1e-3)
    assert main(["inspect", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["state"] == "complete"
    assert info["observables"]["theta"]["shape"] == [len(result.trajectory), 13]
    assert info["final"]["steps_done"] == result.steps_done and info["file_size"] == os.path.getsize(path)


def test_cli_run_store_refuses_to_overwrite(tmp_path, capsys):
    from dlnmomentum.cli import main

    path = str(tmp_path / "cli.h5")
    args = ["run", "--gamma", "0.05", "--beta", "0.8", "--steps", "2000", "--n", "8", "--d", "13", "--s", "3",
            "--n-test", "50", "--record-every", "100", "--store", path, "--no-progress"]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and "--overwrite" in err and path in err
    assert main(args + ["--overwrite"]) == 0
    assert S.open_store(path).state == "complete"


def test_cli_inspect_delegates_sweep_stores(tmp_path, monkeypatch, capsys):

    from dlnmomentum.cli import main

    path = tmp_path / "sweep.h5"
    with h5py.File(path, "w") as f:
        f.attrs.update(kind="sweep", format="dlnmomentum-sweep")
    import dlnmomentum.cli.store as cli_store

    monkeypatch.setattr(cli_store, "sweep_inspect_lines", lambda p: [f"SWEEP STORE {os.path.basename(p)}"])
    assert main(["inspect", str(path)]) == 0
    assert "SWEEP STORE sweep.h5" in capsys.readouterr().out


# -- flows: the same store, through the run protocol ------------------------------------------------

FLOWS = {"mgf-crossings": ("mgf", dict(lam=2.0, t_max=30.0, record=dm.Record(every=1.0))),
         "mgf-velocity": ("mgf", dict(lam=0.2, t_max=10.0, u_dot0=np.full(13, 1e-3),
                                      record=dm.Record(log=40))),
         "gf": ("gf", dict(t_max=20.0, record=dm.Record(log=50))),
         "gf-no-record": ("gf", dict(t_max=5.0))}


@pytest.mark.parametrize("name", list(FLOWS))
def test_flow_runs_round_trip(small_problem, tmp_path, name):
    fn_name, kwargs = FLOWS[name]
    fn = getattr(dm, fn_name)
    args = (kwargs.pop("lam"),) if "lam" in kwargs else ()
    live = fn(small_problem, *args, **kwargs)
    path = tmp_path / "flow.h5"
    stored = fn(small_problem, *args, **kwargs, store=path)
    assert_same_result(live, stored)
    s = S.open_store(path)
    assert s.kind == fn_name and s.state == "complete"
    assert_same_result(live, s.result)
    if live.trajectory is not None:
        assert {"w_plus_dot", "w_minus_dot"} <= set(s.observables)


def test_flow_interrupted_then_resumed(small_problem, tmp_path, monkeypatch):
    kwargs = dict(t_max=30.0, record=dm.Record(every=0.5))
    live = dm.mgf(small_problem, 2.0, **kwargs)
    run = prepare_flow(small_problem, 2.0, **kwargs)
    run.chunk_steps = 50
    calls = []

    def hook(point):  # Ctrl-C after a few chunks
        calls.append(point)
        if point == "chunk" and calls.count("chunk") == 7:
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(store_writer, "_TEST_HOOK", hook)
    path = tmp_path / "flow.h5"
    with sigint_default():
        first = S.run_with_store(run, path, checkpoint_every=0.0)
    monkeypatch.setattr(store_writer, "_TEST_HOOK", None)
    assert first.status_name == "interrupted" and 0 < first.steps_done < live.steps_done
    assert_same_result(live, S.resume(path))
    assert_same_result(live, S.open_store(path).result)
