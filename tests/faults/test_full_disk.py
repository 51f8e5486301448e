"""A full disk during a sweep: a clear error naming the file, the points done before intact, and
``--resume`` completing bit for bit once there is space again.

Before: an uncaught h5py ``RuntimeError``, then "Fatal Python error: Segmentation fault" (HDF5 closing,
at exit, a file it could not flush) and a leftover ``.creating`` file. Real full disks are a small
tmpfs mounted in a private mount namespace (``unshare -rm``; skipped where that is not allowed); a
copy-on-write file system, where even an overwrite needs space, is simulated by failing dataset writes.
"""

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest
from store_checks import ROOT, TIMEOUT

import dlnmomentum as dm
from dlnmomentum.runs.points import FIELDS

HELPERS = os.path.join(ROOT, "tests", "store_helpers")
ENV = dict(os.environ, PYTHONPATH=ROOT)
SMALL = {"n": 8, "d": 13, "s": 3, "mu": 1.0, "sigma": 1.0, "n_test": 50}
GRID = {"gammas": "0.01:0.1:8", "betas": "0:0.9:4", "steps": 20_000, "reps": 2}
ARGV = ["--gammas", GRID["gammas"], "--betas", GRID["betas"], "--steps", str(GRID["steps"]), "--reps", "2",
        "--wave-size", "8", "--no-progress"] + [x for k, v in SMALL.items() for x in (f"--{k.replace('_', '-')}",
                                                                                        str(v))]


@pytest.fixture(scope="module")
def fresh():
    """The sweep computed in memory, without a store (the reference every stored one must equal)."""
    return dm.sweep(SMALL, **GRID)


def assert_same_sweep(path, fresh):
    stored = dm.open_sweep(path)
    assert stored.complete
    for name in FIELDS:
        assert np.array_equal(stored[name], fresh[name], equal_nan=True), name


def _namespaces_work():
    if not shutil.which("unshare") or not shutil.which("mount"):
        return False
    probe = subprocess.run(["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || "
                            "mount -t tmpfs -o size=64k tmpfs /tmp"], capture_output=True, timeout=30)
    return probe.returncode == 0


needs_tmpfs = pytest.mark.skipif(not _namespaces_work(), reason="cannot mount a tmpfs in a user namespace here")


SWEEP = ["sweep", *ARGV, "--store", "{store}", "--log"]


def on_small_tmpfs(tmp_path, **spec):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    spec = dict(spec, mnt=str(mnt), out=str(tmp_path / "s.h5"))
    out = subprocess.run(["unshare", "-rm", sys.executable, os.path.join(HELPERS, "full_disk.py"), json.dumps(spec)],
                         capture_output=True, text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1]), tmp_path / "s.h5"


def assert_clear_error(report):
    assert report["rc"] == 2, report  # an error, not a crash (139)
    assert any("No space left on device" in e and "s.h5" in e for e in report["errors"]), report
    assert not any("Traceback" in e or "Fatal" in e for e in report["errors"]), report


@needs_tmpfs
def test_disk_too_small_for_the_sweep_store_then_room_made(tmp_path, fresh):
    report, path = on_small_tmpfs(tmp_path, size="24k", grow="4m", first=SWEEP, then=SWEEP)
    assert_clear_error(report["first"])
    assert report["first"]["files"] == [], report  # no store, no .creating, no stale lock
    assert report["then"]["rc"] == 0, report
    assert_same_sweep(path, fresh)


@needs_tmpfs
def test_disk_full_after_the_sweep_store_was_created(tmp_path, fresh):
    """Every chunk of the store is allocated when it is created: the waves need no more space."""
    report, path = on_small_tmpfs(tmp_path, size="256k", fill_after_wave=2, first=SWEEP)
    first = report["first"]
    assert first["filled"] and first["rc"] == 0 and first["waves"] == 8, first
    assert_same_sweep(path, fresh)


RUN = ["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "200000", "--record-every", "5", "--no-progress",
       "--checkpoint-every", "0", "--n", "8", "--d", "13", "--s", "3", "--n-test", "50"]


@needs_tmpfs
@pytest.mark.parametrize("size", ["64k", "1m"], ids=["at-creation", "while-streaming"])
def test_disk_full_during_a_stored_run_then_resumed_bit_for_bit(tmp_path, size):
    from store_checks import assert_same_result

    live = dm.mgd(dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=0), 0.01, 0.5, steps=200_000,
                  record=dm.Record(every=5))
    then = ["resume", "{store}", "--no-progress"] if size == "1m" else [*RUN, "--store", "{store}"]
    report, path = on_small_tmpfs(tmp_path, size=size, grow="64m", first=[*RUN, "--store", "{store}"], then=then)
    assert_clear_error(report["first"])
    if size == "64k":
        assert report["first"]["files"] == [], report
    else:
        assert "s.h5" in report["first"]["files"] and "s.h5.lock" not in report["first"]["files"], report
    assert report["then"]["rc"] == 0, report
    assert_same_result(live, dm.open_store(path).result)


# byte budgets after the store is created: they run out in the second, third and sixth wave of 8 points (sweep
# format 2: 8, 16 and 40 points done before)
@pytest.mark.parametrize("budget", [8_000, 16_600, 32_000])
def test_writes_failing_in_a_wave_keep_the_points_before(tmp_path, fresh, budget):
    path = tmp_path / "g.h5"
    out = subprocess.run([sys.executable, os.path.join(HELPERS, "enospc.py"), str(budget), "sweep", *ARGV,
                          "--store", str(path)], capture_output=True, text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    assert "dlnm: error: writing sweep store" in out.stderr and str(path) in out.stderr, out.stderr
    assert "No space left on device" in out.stderr and "--resume" in out.stderr and "Traceback" not in out.stderr
    assert sorted(os.listdir(tmp_path)) == ["g.h5"]  # the lock is released, no temporary file
    partial = dm.open_sweep(path)
    assert 0 < partial.done.sum() < partial.done.size
    for name in FIELDS:  # every point marked done holds its final values
        assert np.array_equal(partial[name][partial.done], fresh[name][partial.done], equal_nan=True), name
    resumed = subprocess.run([sys.executable, "-m", "dlnmomentum", "sweep", "--resume", "--store", str(path),
                              "--no-progress"], capture_output=True, text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert resumed.returncode == 0, resumed.stderr
    assert_same_sweep(path, fresh)


# -- resuming a crashed run store, and figure stores, on a full disk (issue 23 B8) ----------------------------

@pytest.fixture(scope="module")
def crashed_run(tmp_path_factory):
    """A run store whose writer was SIGKILLed after 12 of 40 chunks (with its checkpoints and stale lock), and
    the uninterrupted run's result."""
    from store_checks import SPEC, run_helper, stored_reference

    reference, _ = stored_reference(tmp_path_factory)
    path = tmp_path_factory.mktemp("crashed") / "crashed.h5"
    out = run_helper(dict(SPEC, path=str(path), action="run", kill={"point": "chunk", "count": 12, "signal": "KILL"}))
    assert out.returncode == -9, out.stderr
    assert os.path.exists(f"{path}.lock")  # killed: the lock is left, and the file is rebuilt on resume
    return path, reference


@needs_tmpfs
@pytest.mark.parametrize("room", [0, 0.5], ids=["no-room", "half-a-store"])
def test_resuming_a_crashed_store_on_a_full_disk_then_room_made(tmp_path, crashed_run, room):
    """Before: exit -11/139 (HDF5 failing to flush its rebuilt copy crashed at close) or a traceback, a stale lock
    and a ``.rebuild<pid>.tmp`` left. Now: a clear error, the store as it was, and resume works with room."""
    from store_checks import assert_same_result

    path, reference = crashed_run
    leave = int(room * os.path.getsize(path))
    report, copied = on_small_tmpfs(tmp_path, size="1m", copy_in=str(path), fill_before=leave, grow="64m",
                                    first=["resume", "{store}", "--no-progress"],
                                    then=["resume", "{store}", "--no-progress"])
    assert_clear_error(report["first"])
    assert "dlnm resume" in report["first"]["errors"][-1], report  # says what to do next
    assert report["first"]["files"] == ["filler", "s.h5", "s.h5.ckpt", "s.h5.ckpt.prev"], report
    assert report["then"]["rc"] == 0, report
    assert_same_result(reference, dm.open_store(copied).result)


@pytest.fixture(scope="module")
def tiny_quadratic(tmp_path_factory):
    """The sizes of the tiny ``quadratic`` figure's files (store, PNG, PDF), written on a disk with room."""
    out = tmp_path_factory.mktemp("figure")
    run = subprocess.run([sys.executable, "-m", "dlnmomentum", "figure", "quadratic", "--tiny", "--out", str(out)],
                         capture_output=True, text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    return {ext: os.path.getsize(out / f"quadratic.{ext}") for ext in ("h5", "png", "pdf")}


FIGURE = ["figure", "quadratic", "--tiny", "--out", "{mnt}"]


def _kib(nbytes):
    return f"{-(-nbytes // 4096) * 4 + 8}k"  # whole 4 KiB pages, and two spare


@needs_tmpfs
@pytest.mark.parametrize("fails", ["h5", "png", "pdf"])
def test_figure_on_a_full_disk(tmp_path, tiny_quadratic, fails):
    """Before: a ``RuntimeError`` traceback from HDF5 (exit 1) leaving ``quadratic.h5.creating``, or
    ``[Errno 28] No space left on device`` naming no file, or a ``zlib.error`` traceback from the PDF writer.
    Now: exit 2 naming the file that could not be written, nothing half-written left, and what to run next."""
    sizes = tiny_quadratic
    room = {"h5": sizes["h5"] // 2, "png": sizes["h5"] + sizes["png"] // 2,
            "pdf": sizes["h5"] + sizes["png"] + sizes["pdf"] // 2}[fails]
    report, _ = on_small_tmpfs(tmp_path, size=_kib(room), first=FIGURE, grow="64m",
                               then=["plot", "{mnt}/quadratic.h5"] if fails != "h5" else FIGURE)
    first = report["first"]
    assert first["rc"] == 2, report
    error = first["errors"][-1]
    assert f"quadratic.{fails}" in error and "No space left on device" in error, report
    assert "Traceback" not in "\n".join(first["errors"]), report
    kept = {"h5": [], "png": ["quadratic.h5"], "pdf": ["quadratic.h5", "quadratic.png"]}[fails]
    assert first["files"] == kept, report  # no .creating, no half-written image
    if fails != "h5":
        assert "dlnm plot" in error, report
    assert report["then"]["rc"] == 0, report
    assert sorted(report["then"]["files"]) == ["quadratic.h5", "quadratic.pdf", "quadratic.png"], report
