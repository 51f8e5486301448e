"""Long trajectories in run stores: a window of rows is read as such, and the command line leaves the rows in the store.

Before: ``Store.observable`` (and ``store["theta"].value[a:b]``) read every recorded row to give a window of them
(10.9 s and 2.9 GB for 1000 rows of a store of 10⁷ rows at d = 30, where h5py reads them in milliseconds); a stored
run of ``dlnm run/flow/network/resume --store`` read its whole trajectory back at the end, or kept it in memory while
it ran, only to print a summary (10 GB at 10⁷ rows), and ``--json`` printed every recorded row (GBs of text).
"""

import json
import signal
import tracemalloc

import h5py
import numpy as np
import pytest
from store_checks import SPEC, TIMEOUT, paused_writer, run_helper

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.store import read as store_read
from dlnmomentum.store import writer as store_writer
from dlnmomentum.store.files import open_h5

SMALL = ["--n", "8", "--d", "13", "--s", "3", "--n-test", "50", "--data-seed", "4", "--no-progress"]
#: The writer helper's run recording every 100 steps: 2001 rows; ``theta`` (d = 13) is committed by chunks of 315
#: rows, ``step`` by chunks of 4096: while the run goes on, the rows past them are in the checkpoint only.
DENSE = dict(SPEC, record={"every": 100})
WINDOWS = [slice(None), slice(0, 1), slice(10, 20), slice(300, 340), slice(310, 700, 7), slice(-50, None),
           slice(-3, -1), slice(None, None, 97), slice(5, 5), slice(40, 10), slice(10**6, None), slice(-10**6, 3),
           slice(1, 10**6, 250)]
NAMES = ("theta", "train_loss", "delta")


def problem():
    return dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=4)


@pytest.fixture(scope="module")
def live():
    """The uninterrupted run, in memory: the rows every store of DENSE holds a prefix of."""
    return dm.mgd(problem(), DENSE["gamma"], DENSE["beta"], steps=DENSE["steps"], record=dm.Record(every=100))


def check_windows(path, live, rows_expected=None):
    """Every window of every observable against the whole observable sliced, the live run's rows sliced and (rows of
    the file's datasets) plain h5py."""
    s = dm.open_store(path)
    n = s.rows
    if rows_expected is not None:
        assert n == rows_expected
    f, _ = open_h5(str(path))
    with f:
        on_disk = {name: f[f"observables/{name}/value"][()] for name in NAMES}
    for name in NAMES:
        whole = s.observable(name)
        reference = getattr(live.trajectory, name)[:n]
        assert np.array_equal(whole.value, reference)
        for window in WINDOWS:
            part = s.observable(name, rows=window)
            assert np.array_equal(part.value, whole.value[window]), (name, window)
            assert np.array_equal(part.value, reference[window]), (name, window)
            assert np.array_equal(part.step, live.trajectory.step[:n][window]), (name, window)
            assert np.array_equal(part.time, live.trajectory.time[:n][window]), (name, window)
            assert part.value.dtype == whole.value.dtype and not part.value.flags.writeable
            assert part.value.shape[1:] == whole.value.shape[1:]
            k = len(on_disk[name])  # (h5py's rows: a prefix of them while the writer runs or after it died)
            in_file = range(n)[window]
            in_file = slice(in_file.start, min(in_file.stop, k), in_file.step) if in_file.start < k else slice(0, 0)
            assert np.array_equal(s.observable(name, rows=in_file).value, on_disk[name][in_file]), (name, window)
    whole = s.trajectory
    assert len(whole) == n
    for window in WINDOWS:  # every recorded quantity of a window at once: the whole trajectory's fields sliced
        part = s.read_trajectory(rows=window)
        fields = part.fields()
        assert fields.keys() == whole.fields().keys() and fields.keys() >= {"step", "time", *NAMES}
        for key, value in whole.fields().items():
            assert np.array_equal(fields[key], value[window]) and fields[key].dtype == value.dtype, (key, window)
        for key in ("step", "time", *NAMES):
            assert np.array_equal(fields[key], getattr(live.trajectory, key)[:n][window]), (key, window)
    return s


def test_a_window_of_a_finished_store(tmp_path, live):
    path = tmp_path / "r.h5"
    dm.mgd(problem(), DENSE["gamma"], DENSE["beta"], steps=DENSE["steps"], record=dm.Record(every=100), store=path)
    s = check_windows(path, live, rows_expected=2001)
    ds = s.to_xarray("theta", rows=slice(100, 110))
    assert ds.sizes["time"] == 10 and np.array_equal(ds["value"].values, live.trajectory.theta[100:110])
    assert np.array_equal(ds["step"].values, live.trajectory.step[100:110])
    assert s.to_xarray(rows=np.s_[-4:]).sizes["time"] == 4


@pytest.mark.parametrize("kill", [{"point": "checkpoint:done", "count": 12},
                                  {"point": "chunk", "count": 25, "signal": "TERM"}], ids=["crashed", "interrupted"])
def test_a_window_of_a_crashed_or_interrupted_store(tmp_path, live, kill):
    path = tmp_path / "r.h5"
    out = run_helper(dict(DENSE, path=str(path), action="run", kill=kill))
    assert out.returncode in (-signal.SIGKILL, 130) or "interrupted" in out.stdout, out.stderr
    s = dm.open_store(path)
    assert s.state == ("crashed" if kill.get("signal", "KILL") == "KILL" else "interrupted")
    if s.state == "crashed":  # rows past the datasets' whole chunks, from the checkpoint
        f, _ = open_h5(str(path))
        with f:
            assert 0 < f["observables/theta/value"].shape[0] < s.rows and f["observables/step"].shape[0] < s.rows
    check_windows(path, live)


def test_a_window_of_a_running_store(tmp_path, live):
    path = tmp_path / "r.h5"
    proc = paused_writer(DENSE, path, 16)
    try:
        assert proc.poll() is None
        s = check_windows(path, live)
        assert s.state == "running" and s.rows > 315  # (rows in the file and after it)
    finally:
        proc.kill()
        proc.wait(timeout=TIMEOUT)
        proc.stdout.close()
        proc.stderr.close()


def test_a_window_reads_only_its_rows(tmp_path):
    d, steps = 30, 20_000
    path = tmp_path / "long.h5"
    res = dm.mgd(dm.sparse_regression(d=d, seed=0), 0.02, 0.7, steps=steps, record=dm.Record(every=1), store=path)
    s = dm.open_store(path)
    s.observable("theta", rows=slice(0, 1))  # (what it imports, once)
    tracemalloc.start()
    try:
        part = s.observable("theta", rows=slice(12_345, 12_445))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(part.value, res.trajectory.theta[12_345:12_445])
    assert peak < 0.1 * res.trajectory.theta.nbytes, peak  # (the whole observable is 4.8 MB; its chunks ~33 KB)
    s.read_trajectory(rows=slice(0, 1))
    tracemalloc.start()
    try:
        window = s.read_trajectory(rows=slice(12_345, 12_445))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.array_equal(window.w_plus, res.trajectory.w_plus[12_345:12_445])
    assert peak < 0.1 * res.trajectory.theta.nbytes, peak  # (every quantity's rows: 19 MB)


def test_a_window_is_a_slice_of_rows(tmp_path):
    path = tmp_path / "r.h5"
    dm.mgd(problem(), 0.05, 0.8, steps=100, record=dm.Record(every=10), store=path)
    s = dm.open_store(path)
    for rows, error, says in [(5, TypeError, "rows must be None or a slice"), ([1, 2], TypeError, "a slice"),
                              (slice(0, 5, -1), ValueError, r"rows.step must be an integer in \[1, inf\)"),
                              (slice(0, 5, 0), ValueError, "rows.step"), (slice("a", 3), TypeError, "rows.start"),
                              (slice(0, 1.5), TypeError, "rows.stop")]:
        with pytest.raises(error, match=says):
            s.observable("theta", rows=rows)
        with pytest.raises(error, match=says):
            s.to_xarray(rows=rows)
        with pytest.raises(error, match=says):
            s.read_trajectory(rows=rows)


# -- the command line leaves the rows in the store --------------------------------------------------------------------

def _refuse_reading_rows(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("the recorded rows were read back")

    monkeypatch.setattr(store_writer, "MAX_COLLECT_BYTES", 0)  # (every run reads its rows back, as long ones do)
    monkeypatch.setattr(store_writer, "read_series", refused)
    monkeypatch.setattr(store_read, "read_series", refused)


@pytest.mark.parametrize("command", [
    ["run", "--gamma", "0.05", "--beta", "0.8", "--steps", "3000", "--record-every", "10"],
    ["flow", "--lam", "0.5", "--t-max", "30", "--record-every", "1"],
    ["network", "deep-linear", "--gamma", "0.05", "--beta", "0.5", "--steps", "300", "--record-every", "10",
     "--widths", "10,6,1"],
], ids=["run", "flow", "network"])
def test_stored_commands_do_not_read_their_rows_back(tmp_path, monkeypatch, capsys, command):
    path = tmp_path / "r.h5"
    small = SMALL if command[0] != "network" else ["--no-progress"]
    _refuse_reading_rows(monkeypatch)
    assert main(command + ["--store", str(path)] + small) == 0
    text = capsys.readouterr().out
    monkeypatch.undo()
    with h5py.File(path, "r") as f:
        rows = f["observables/step"].shape[0]
        assert rows > 10 and np.array_equal(f["observables/step"][()], dm.open_store(path).result.trajectory.step)
    assert f"rows, in {path}" in text and f": {rows} rows, in " in text
    _refuse_reading_rows(monkeypatch)
    assert main(command + ["--store", str(path), "--overwrite", "--json"] + small) == 0
    out = json.loads(capsys.readouterr().out)
    assert "trajectory" not in out and out["store"] == str(path) and out["rows"] == rows
    assert main(["resume", str(path), "--json"]) == 0  # (a finished store: its result, its rows left unread)
    again = json.loads(capsys.readouterr().out)
    assert "trajectory" not in again and again["rows"] == rows and again["steps_done"] == out["steps_done"]


def test_a_stored_run_of_the_command_line_keeps_no_rows_in_memory(tmp_path, capsys, monkeypatch):
    """Below 256 MiB the writer kept every recorded block in memory to build the result's trajectory: the peak was
    2.3 times the trajectory (224 MB for 100 MB of rows), now half of it (the driver's block and the writer's queue).

    The writer's queue may hold ``MAX_QUEUED_BYTES`` (64 MiB) before the run waits for it, most of this trajectory:
    on a slow machine it filled up and the peak reached 94.8 MB (an AMD EPYC, 2026-11-27). Its cap is 16 MiB here, so
    the bound measures what is kept, not how fast the writer thread compresses."""
    monkeypatch.setattr(store_writer, "MAX_QUEUED_BYTES", 16 * 2**20)
    d, steps = 30, 100_000
    trajectory = (steps + 1) * (4 * d + 4) * 8  # θ, w±, Δ, two losses, step and time
    argv = ["run", "--gamma", "0.02", "--beta", "0.7", "--steps", str(steps), "--record-every", "1", "--d", str(d),
            "--no-progress"]
    assert main(argv + ["--store", str(tmp_path / "warm.h5")]) == 0  # (what it imports and compiles, once)
    capsys.readouterr()
    tracemalloc.start()
    try:
        assert main(argv + ["--store", str(tmp_path / "r.h5")]) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 0.75 * trajectory, (peak, trajectory)  # (0.51 alone, AMD EPYC, 2026-11-27)
    assert dm.open_store(tmp_path / "r.h5").rows == steps + 1
    res = dm.mgd(dm.sparse_regression(d=d, seed=0), 0.02, 0.7, steps=1000, record=dm.Record(every=1),
                 store=tmp_path / "api.h5")  # the API's stored run still returns every row
    assert len(res.trajectory) == 1001


def test_resume_of_the_command_line_still_finds_damaged_rows(tmp_path, capsys):
    """``dlnm resume`` of a finished store no longer reads its rows: their chunks are checked, and a damaged one is
    computed again as before."""
    path = tmp_path / "r.h5"
    dm.mgd(problem(), 0.05, 0.8, steps=20_000, record=dm.Record(every=10), store=path)
    f, _ = open_h5(str(path))
    with f:
        info = f["observables/theta/value"].id.get_chunk_info(3)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset + info.size // 4)
        fh.write(b"\x7f\xe0" * 8)
    assert main(["resume", str(path), "--json", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "/observables/theta/value from row" in captured.err and "computed again from step 0" in captured.err
    out = json.loads(captured.out)
    live = dm.mgd(problem(), 0.05, 0.8, steps=20_000, record=dm.Record(every=10))
    assert out["rows"] == len(live.trajectory)
    assert np.array_equal(dm.open_store(path).result.trajectory.theta, live.trajectory.theta)
