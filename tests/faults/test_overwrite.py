"""``overwrite=True`` replaces only a store of the kind being written, one that dlnmomentum wrote (issue 23, B11).

Before: ``overwrite=True`` / ``--overwrite`` deleted whatever was at the path: a text or CSV file, another program's
HDF5 file, a store of another kind, and (run as root) ``/dev/null``, which it replaced by a regular file. Now
anything else is refused with a message naming the path and what is there, and left as it was.
"""

import os
import signal
import stat
import subprocess
import sys
import time

import h5py
import pytest

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.cli import main

SMALL = dict(n=8, d=13, s=3, n_test=50)
NETWORK = {"generator": "teacher_student", "n": 6, "d": 2, "teacher_width": 2, "student_width": 3, "n_test": 20}

WRITERS = {
    "run": lambda P, path: dm.mgd(P, 0.01, 0.5, steps=100, store=path, overwrite=True),
    "sweep": lambda P, path: dm.sweep(P, gammas=[0.01], betas=[0.5], steps=100, store=path, overwrite=True),
    "network-sweep": lambda P, path: dm.networks_sweep(NETWORK, gammas=[0.01], betas=[0.5], steps=100, store=path,
                                                       overwrite=True),
}
WHAT = {"run": "a run store", "sweep": "a sweep store", "network-sweep": "a network sweep store"}


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(**SMALL, seed=4)


@pytest.fixture(scope="module")
def stores(problem, tmp_path_factory):
    """One finished store of each kind (copied by the tests that overwrite them)."""
    base = tmp_path_factory.mktemp("kinds")
    out = {kind: base / f"{kind}.h5" for kind in WRITERS}
    for kind, path in out.items():
        WRITERS[kind](problem, path)
    return out


def _text(path):
    path.write_text("not a store\n")
    return "not an HDF5 file"


def _csv(path):
    path.write_text("gamma,beta,test_loss\n0.01,0.5,1e-3\n")
    return "not an HDF5 file"


def _foreign(path):
    with h5py.File(path, "w") as f:
        f["data"] = [1.0, 2.0]
        f.attrs["kind"] = "measurements"
    return "an HDF5 file that dlnmomentum did not write"


def _fifo(path):
    os.mkfifo(path)
    return "a FIFO"


TARGETS = {"text": _text, "csv": _csv, "foreign-hdf5": _foreign, "fifo": _fifo}


def _state(path):
    st = os.lstat(path)
    data = path.read_bytes() if stat.S_ISREG(st.st_mode) else None
    return stat.S_IFMT(st.st_mode), data


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("kind", list(WRITERS))
def test_anything_but_a_store_is_refused_and_kept(problem, tmp_path, kind, target):
    path = tmp_path / f"x.{target}"
    what = TARGETS[target](path)
    before = _state(path)
    with pytest.raises(S.StoreError, match=f"refusing to overwrite {path}: it is {what}, not {WHAT[kind]}"):
        WRITERS[kind](problem, path)
    assert _state(path) == before
    assert sorted(os.listdir(tmp_path)) == [path.name]  # no lock, no temporary left


@pytest.mark.parametrize("kind", list(WRITERS))
def test_a_store_of_another_kind_is_refused_and_kept(problem, stores, tmp_path, kind):
    for other, src in stores.items():
        if other == kind:
            continue
        path = tmp_path / f"{other}.h5"
        path.write_bytes(src.read_bytes())
        with pytest.raises(S.StoreError, match=f"refusing to overwrite {path}: it is {WHAT[other]}, not "
                                               f"{WHAT[kind]}"):
            WRITERS[kind](problem, path)
        assert path.read_bytes() == src.read_bytes()


@pytest.mark.parametrize("claimed", ["sweep", "network-sweep", "figure"])
@pytest.mark.parametrize("fmt", ["my-lab-format", None])
def test_another_programs_file_that_names_a_kind_of_ours_is_refused_and_kept(problem, tmp_path, claimed, fmt):
    """``kind`` is an attribute name other programs use too: a file is one of the package's stores only if it
    carries the package's ``format`` for that kind. Before, ``kind = "sweep"`` alone let ``--overwrite`` delete
    another program's data (and reading such a file raised a raw ``KeyError`` as "damaged")."""
    from dlnmomentum.figures import compute_figure

    writers = dict(WRITERS, figure=lambda P, path: compute_figure("quadratic", "tiny", str(path.parent),
                                                                   overwrite=True, log=lambda line: None))
    for kind, write in writers.items():
        path = tmp_path / ("quadratic.h5" if kind == "figure" else f"{kind}.h5")
        with h5py.File(path, "w") as f:
            f["measurements"] = [1.0, 2.0, 3.0]
            f.attrs["kind"] = claimed
            if fmt is not None:
                f.attrs["format"] = fmt
            if claimed == "figure":  # even with every other attribute of a figure store
                f.attrs.update(figure="quadratic", size="tiny", setting="{}", summary="{}", package_version="0.5.0")
        before = path.read_bytes()
        if fmt is not None or claimed != "figure":
            with pytest.raises(S.StoreError, match=f"refusing to overwrite {path}: it is an HDF5 file that "
                                                   "dlnmomentum did not write"):
                write(problem, path)
            assert path.read_bytes() == before
            for read in (dm.open_sweep, S.open_store):
                with pytest.raises(S.StoreError, match="is an HDF5 file but not a .* store: it is none of the files "
                                                       "dlnmomentum writes"):
                    read(path)
        path.unlink()


def test_a_figure_store_of_an_earlier_version_is_still_one(tmp_path):
    """Figure stores written before 0.6.0 have no ``format`` attribute: known by their other root attributes."""
    from dlnmomentum.figures import compute_figure, open_figure

    compute_figure("quadratic", "tiny", str(tmp_path), log=lambda line: None)
    path = tmp_path / "quadratic.h5"
    with h5py.File(path, "r+") as f:
        assert f.attrs["format"] == "dlnmomentum-figure"
        del f.attrs["format"]
    assert open_figure(str(path)).name == "quadratic"
    compute_figure("quadratic", "tiny", str(tmp_path), overwrite=True, log=lambda line: None)  # replaced
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "dlnmomentum-figure"


@pytest.mark.parametrize("kind", list(WRITERS))
def test_a_device_behind_a_symlink_is_refused(problem, tmp_path, kind):
    """``/dev/null`` (through a link, so that the code before this fix removed only the link)."""
    link = tmp_path / "null.h5"
    os.symlink(os.devnull, link)
    with pytest.raises(S.StoreError, match=f"refusing to overwrite {os.devnull}: it is a character device"):
        WRITERS[kind](problem, link)
    assert os.path.islink(link) and stat.S_ISCHR(os.stat(os.devnull).st_mode)
    assert not os.path.exists(os.devnull + ".lock")


@pytest.mark.parametrize("kind", list(WRITERS))
def test_a_store_of_the_kind_is_replaced(problem, stores, tmp_path, kind):
    path = tmp_path / "s.h5"
    path.write_bytes(stores[kind].read_bytes())
    WRITERS[kind](problem, path)
    assert S.open_store(path).state == "complete" if kind == "run" else dm.open_sweep(path).complete


def test_a_store_whose_writer_died_with_it_open_is_replaced(problem, stores, tmp_path):
    """The superblock still says "open for writing" (the flags a killed writer leaves): it is still a sweep store."""
    path = tmp_path / "s.h5"
    path.write_bytes(stores["sweep"].read_bytes())
    code = ("import h5py, os, sys\nf = h5py.File(sys.argv[1], 'r+')\nprint('open', flush=True)\n"
            "os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL and out.stdout.strip() == "open"
    with pytest.raises(S.StoreCorruptError, match="left open by a writer that died"):
        dm.open_sweep(path)
    assert WRITERS["sweep"](problem, path).complete


def test_cli_overwrite_refuses_a_text_file(tmp_path, capsys):
    path = tmp_path / "notes.txt"
    path.write_text("my notes\n")
    assert main(["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "100", "--store", str(path), "--overwrite",
                 "--n", "8", "--d", "13", "--n-test", "50"]) == 2
    err = capsys.readouterr().err
    assert f"refusing to overwrite {path}: it is not an HDF5 file, not a run store" in err, err
    assert path.read_text() == "my notes\n"


def test_figure_overwrite_replaces_only_a_figure_store(tmp_path):
    """``dlnm figure NAME --overwrite`` leaves a file that is not a figure store alone (and says what it is)."""
    from dlnmomentum.figures import compute_figure
    from dlnmomentum.store.files import StoreError

    path = tmp_path / "quadratic.h5"
    path.write_text("not a store\n")
    with pytest.raises(StoreError, match="quadratic.h5"):
        compute_figure("quadratic", "tiny", str(tmp_path), overwrite=True, log=lambda line: None)
    assert path.read_text() == "not a store\n"
    compute_figure("quadratic", "tiny", str(tmp_path / "ok"), log=lambda line: None)  # a figure store ...
    compute_figure("quadratic", "tiny", str(tmp_path / "ok"), overwrite=True, log=lambda line: None)  # ... is replaced


def _leave_open(path):
    """Open ``path`` for writing and SIGKILL the process: the superblock keeps HDF5's "open for writing" flags."""
    code = ("import h5py, os, sys\nf = h5py.File(sys.argv[1], 'r+')\nprint('open', flush=True)\n"
            "os.kill(os.getpid(), 9)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode == -signal.SIGKILL and out.stdout.strip() == "open"


@pytest.mark.parametrize("kind", ["sweep", "network-sweep"])
def test_a_sweep_killed_while_it_wrote_a_wave_resumes(problem, stores, tmp_path, kind):
    """Its writer opens the file outside SWMR mode for each wave: killed there, the store kept HDF5's "open" flags,
    which every reader and --resume refused, with advice (`dlnm sweep --store F --resume`) that did not work."""
    path = tmp_path / "s.h5"
    path.write_bytes(stores[kind].read_bytes())
    _leave_open(path)
    argv = (["sweep", "--store", str(path), "--resume"] if kind == "sweep" else
            ["network", "teacher-student", "--store", str(path), "--resume"])
    assert main(argv + ["--no-progress"]) == 0
    again, ref = dm.open_sweep(path), dm.open_sweep(stores[kind])
    assert again.complete and (again["train_loss"] == ref["train_loss"]).all()


def test_a_foreign_file_left_open_is_refused_and_left_as_it_was(tmp_path, capsys):
    """Commands that refused another program's HDF5 file, left open by its dead writer, cleared its flags (and
    rewrote its superblock checksum) first."""
    path = tmp_path / "g.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f.attrs["kind"] = "sweep"
        f["x"] = [1.0, 2.0, 3.0]
    _leave_open(path)
    before = path.read_bytes()
    small = ["--n", "8", "--d", "13", "--n-test", "50", "--no-progress"]
    for argv in (["run", "--gamma", "0.05", "--beta", "0.5", "--steps", "10", "--store", str(path), "--overwrite"]
                 + small, ["resume", str(path)], ["sweep", "--store", str(path), "--resume"],
                 ["network", "deep-linear", "--store", str(path), "--resume"],
                 ["sweep", "--gammas", "0.01", "--betas", "0", "--steps", "10", "--store", str(path), "--overwrite"]
                 + small):
        assert main(argv) == 2, argv
        assert path.read_bytes() == before, argv
    assert "dlnmomentum did not write" in capsys.readouterr().err


def _killed_store(path, steps):
    """A crashed run store at ``path``: an MGD run of ``steps`` steps SIGKILLed once its first checkpoint is written
    (the test is skipped if the writer finished first)."""
    code = ("import sys, dlnmomentum as dm\n"
            "p = dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=4)\n"
            f"dm.mgd(p, 0.01, 0.5, steps={steps}, store=sys.argv[1], checkpoint_every=0.0)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path)])
    deadline = time.monotonic() + 60
    while not os.path.exists(str(path) + ".ckpt") and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    if S.open_store(path).state != "crashed":
        pytest.skip("the writer finished before it was killed")


def test_resume_keeps_a_stores_permissions_and_cleans_a_finished_one(problem, stores, tmp_path):
    """A rebuilt crashed store came back 644 whatever it was (a 444 one was replaced all the same); a finished store
    next to a stale .ckpt.prev (a writer killed between the two removals at close) kept it for ever."""
    path = tmp_path / "r.h5"
    path.write_bytes(stores["run"].read_bytes())
    stale = tmp_path / "r.h5.ckpt.prev"
    stale.write_bytes(_own_checkpoint(tmp_path)[:5000])  # (torn: the package's own all the same)
    dm.resume(str(path))
    assert not stale.exists()
    os.chmod(path, 0o444)
    assert dm.resume(str(path)).status_name == "max_steps"  # finished: returned as it is, nothing written
    copy = tmp_path / "c.h5"
    _killed_store(copy, 5 * 10**6)
    os.chmod(copy, 0o444)
    with pytest.raises(dm.StoreError, match="is read-only: resuming writes to it"):
        dm.resume(str(copy))
    os.chmod(copy, 0o600)
    assert dm.resume(str(copy)).status_name == "max_steps"
    assert stat.S_IMODE(os.stat(copy).st_mode) == 0o600


def test_a_directory_without_write_permission_is_said_and_a_finished_store_still_resumes(problem, stores, tmp_path,
                                                                                         monkeypatch):
    """In a read-only directory `dlnm resume` of a finished store failed with "[Errno 13] Permission denied:
    'done.h5.lock'" (it needs no lock: nothing to write), and a writer with a raw errno message."""
    from dlnmomentum.store import files

    path = tmp_path / "done.h5"
    path.write_bytes(stores["run"].read_bytes())
    real_open = os.open

    def no_lock_files(name, *args, **kw):  # (as a read-only directory does; the tests may run as root)
        if str(name).endswith(".lock"):
            raise PermissionError(13, "Permission denied", str(name))
        return real_open(name, *args, **kw)

    monkeypatch.setattr(files.os, "open", no_lock_files)
    assert dm.resume(str(path)).status_name == "max_steps"
    with pytest.raises(dm.StoreError, match=r"cannot create the lock file .*x.h5.lock of store .*: writing a mgd "
                                            r"run needs a writable directory"):
        dm.mgd(problem, 0.01, 0.5, steps=10, store=str(tmp_path / "x.h5"))


@pytest.mark.parametrize("overwrite", [False, True])
@pytest.mark.parametrize("side_kind", ["text", "hdf5", "symlink"])
def test_a_users_file_named_like_a_checkpoint_is_refused_and_kept(problem, stores, tmp_path, overwrite, side_kind):
    """``<store>.ckpt`` and ``<store>.ckpt.prev`` were deleted unread when a store was started or overwritten. Now
    a side file that is not a checkpoint this package wrote stops the run, by name, and stays as it was."""
    path = tmp_path / "run.h5"
    if overwrite:
        path.write_bytes(stores["run"].read_bytes())
    before = path.read_bytes() if overwrite else None
    sides = [tmp_path / "run.h5.ckpt", tmp_path / "run.h5.ckpt.prev"]
    for side in sides:
        _user_file(side, side_kind)
    contents = [side.read_bytes() for side in sides]
    with pytest.raises(S.StoreExistsError, match=r"run\.h5\.ckpt(\.prev)? is in the way of store .*run\.h5"):
        dm.mgd(problem, 0.01, 0.5, steps=100, store=path, overwrite=overwrite)
    assert [side.read_bytes() for side in sides] == contents
    assert (path.read_bytes() == before) if overwrite else not path.exists()
    assert not (tmp_path / "run.h5.lock").exists()


def _own_checkpoint(tmp_path):
    """The bytes of a checkpoint as the package writes one (meta as a run's, with arrays after it)."""
    import numpy as np

    from dlnmomentum.store.files import CHECKPOINT_FORMAT, Checkpoint, write_checkpoint_file

    scratch = tmp_path / "scratch" / "x.h5"
    scratch.parent.mkdir(exist_ok=True)
    meta = {"format": CHECKPOINT_FORMAT, "version": 1, "store_id": "0" * 32,
            "written": {f"k{i}": i for i in range(300)}}
    write_checkpoint_file(str(scratch), Checkpoint(meta, {"fstate": np.arange(5000.0)}, {"step": np.arange(7)}))
    return (tmp_path / "scratch" / "x.h5.ckpt").read_bytes()


def _user_file(side, kind):
    if kind == "text":
        side.write_text("my notes\n")
    elif kind == "hdf5":
        with h5py.File(side, "w") as f:
            f["x"] = [1.0]
    else:
        side.with_name(f"{side.name}.target").write_text("kept\n")
        side.symlink_to(side.with_name(f"{side.name}.target"))


@pytest.mark.parametrize("damage", ["intact", "torn", "torn-early", "empty", "bytes-zeroed"])
def test_the_package_tells_its_own_checkpoints_damaged_or_not(tmp_path, damage):
    """Only the opening bytes are read: a checkpoint torn or zeroed after them is the package's own (so a resume
    may pass it over and replace it); a zip or HDF5 file of another program, text, or a checkpoint torn inside its
    mark is not."""
    from dlnmomentum.store.files import CHECKPOINT_MARK, read_checkpoint_file, written_as_checkpoint

    data = _own_checkpoint(tmp_path)
    end_of_mark = data.index(CHECKPOINT_MARK) + len(CHECKPOINT_MARK)
    changed = {"intact": data, "torn": data[:len(data) // 2], "torn-early": data[:end_of_mark], "empty": b"",
               "bytes-zeroed": data[:end_of_mark] + bytes(len(data) - end_of_mark)}[damage]
    side = tmp_path / "r.h5.ckpt"
    side.write_bytes(changed)
    assert written_as_checkpoint(side)
    if damage != "intact":
        with pytest.raises(S.StoreCorruptError):
            read_checkpoint_file(side)
    side.write_bytes(data[:end_of_mark - 1])  # the mark itself cut: a file the package cannot claim
    assert not written_as_checkpoint(side)
    import zipfile
    with zipfile.ZipFile(side, "w") as z:  # another program's zip whose text names the format further on
        z.writestr("readme.txt", "x" * 5000 + CHECKPOINT_MARK.decode())
    assert not written_as_checkpoint(side)
    with h5py.File(side, "w") as f:
        f["x"] = [1.0]
    assert not written_as_checkpoint(side)


@pytest.mark.parametrize("side_kind", ["text", "hdf5", "symlink"])
def test_resume_refuses_a_users_file_named_like_a_checkpoint_and_keeps_it(stores, tmp_path, side_kind):
    """``resume`` read a side file it could not parse as a damaged checkpoint and replaced or removed it later. Now it
    refuses by name before it reads or repairs anything (a finished store too: a stale checkpoint would be removed),
    and once the file is moved away the resume goes on."""
    path = tmp_path / "run.h5"
    path.write_bytes(stores["run"].read_bytes())
    before = path.read_bytes()
    side = tmp_path / "run.h5.ckpt.prev"
    _user_file(side, side_kind)
    content = side.read_bytes()
    with pytest.raises(S.StoreExistsError, match=r"run\.h5\.ckpt\.prev is in the way of store .*run\.h5: it is "
                                                 r"(not a checkpoint dlnmomentum wrote|a symbolic link)"):
        dm.resume(str(path))
    assert side.read_bytes() == content and path.read_bytes() == before
    assert not (tmp_path / "run.h5.lock").exists()
    assert main(["resume", str(path)]) == 2  # (the command line says it too, without a traceback)
    assert side.read_bytes() == content
    side.rename(tmp_path / "mine")
    assert dm.resume(str(path)).status_name == "max_steps"
    assert (tmp_path / "mine").read_bytes() == content


def test_a_killed_run_is_not_repaired_while_a_users_file_is_in_the_way(tmp_path):
    """A crashed store's repair (its HDF5 flags cleared, the file rebuilt) waits until the user's file is moved: a
    repair followed by the refusal would leave the next resume a file that no longer says it was left open."""
    path = tmp_path / "k.h5"
    _killed_store(path, 3 * 10**6)
    side = tmp_path / "k.h5.ckpt.prev"
    side.unlink(missing_ok=True)
    _user_file(side, "text")
    before = path.read_bytes()
    with pytest.raises(S.StoreExistsError, match=r"k\.h5\.ckpt\.prev is in the way"):
        dm.resume(str(path))
    assert path.read_bytes() == before and side.read_text() == "my notes\n"
    side.rename(tmp_path / "mine")
    assert dm.resume(str(path)).status_name == "max_steps"
    assert (tmp_path / "mine").read_text() == "my notes\n"


def test_its_own_checkpoints_are_replaced_with_the_store(problem, stores, tmp_path):
    """Checkpoints this package wrote next to a store it wrote go with it on ``overwrite=True``."""
    from dlnmomentum.store.files import CHECKPOINT_FORMAT, Checkpoint, write_checkpoint_file

    path = tmp_path / "run.h5"
    path.write_bytes(stores["run"].read_bytes())
    for _ in range(2):  # (the second write moves the first to .ckpt.prev)
        write_checkpoint_file(str(path), Checkpoint({"format": CHECKPOINT_FORMAT}, {}, {}))
    prev = tmp_path / "run.h5.ckpt.prev"
    prev.write_bytes(prev.read_bytes()[:-40])  # (a damaged one of its own goes too: its central directory torn off)
    res = dm.mgd(problem, 0.01, 0.5, steps=100, store=path, overwrite=True)
    assert res.steps_done == 100 and dm.open_store(path).result.steps_done == 100
    assert not (tmp_path / "run.h5.ckpt").exists() and not (tmp_path / "run.h5.ckpt.prev").exists()
