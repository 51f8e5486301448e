"""A symlink to a store is the store: one lock, one file, the link kept; ``dlnm ... | head`` (issue 23, B17).

Before: the writer lock was keyed on the path's name, so resuming through ``link.h5 -> real.h5`` while another process
wrote ``real.h5`` took ``link.h5.lock``, treated the store as abandoned and replaced the symlink by a copy (a resume
rebuilds a crashed store into a new file); two sweeps through a symlink both wrote waves into one file; a new store
written through a symlink replaced the link. And ``dlnm inspect X | head`` could end in ``dlnm: error: [Errno 32]
Broken pipe``, exit 2.
"""

import os
import subprocess
import sys

import pytest
from store_checks import ROOT, SPEC, TIMEOUT, assert_same_result, assert_same_rows, run_helper, stored_reference

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.store.files import WriterLock

SMALL = dict(n=8, d=13, s=3, n_test=50)
NETWORK = {"generator": "teacher_student", "n": 6, "d": 2, "teacher_width": 2, "student_width": 3, "n_test": 20}
GRID = dict(gammas=[0.01, 0.02], betas=[0.5], steps=100)


@pytest.fixture(scope="module")
def problem():
    return dm.sparse_regression(**SMALL, seed=4)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    return stored_reference(tmp_path_factory)


def _linked(tmp_path):
    real, link = tmp_path / "real.h5", tmp_path / "link.h5"
    os.symlink(real.name, link)  # relative, as `ln -s real.h5 link.h5` makes it
    return real, link


WRITERS = {
    "resume": lambda P, link: dm.resume(link),
    "mgd": lambda P, link: dm.mgd(P, 0.01, 0.5, steps=100, store=link, overwrite=True),
    "sweep": lambda P, link: dm.sweep(P, store=link, resume=True, **GRID),
    "resume_sweep": lambda P, link: dm.resume_sweep(link),
    "networks_sweep": lambda P, link: dm.networks_sweep(NETWORK, store=link, resume=True, **GRID),
}
STORES = {"resume": "run", "mgd": "run", "sweep": "sweep", "resume_sweep": "sweep", "networks_sweep": "network"}


@pytest.mark.parametrize("writer", list(WRITERS))
def test_a_symlink_does_not_get_around_the_writer_lock(problem, tmp_path, writer):
    real, link = _linked(tmp_path)
    kind = STORES[writer]
    if kind == "run":
        dm.mgd(problem, 0.01, 0.5, steps=100, store=real)
    elif kind == "sweep":
        dm.sweep(problem, store=real, **GRID)
    else:
        dm.networks_sweep(NETWORK, store=real, **GRID)
    before = real.read_bytes()
    lock = WriterLock.acquire(str(real), "writing (another process)")  # this process's pid: a live writer
    try:
        with pytest.raises(S.StoreLockedError, match="is open for writing by process"):
            WRITERS[writer](problem, link)
    finally:
        lock.release()
    assert os.path.islink(link) and real.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["link.h5", "real.h5"]  # no link.h5.lock, nothing else


def test_a_crashed_store_resumed_through_a_symlink_keeps_the_link(tmp_path, reference):
    real, link = _linked(tmp_path)
    out = run_helper(dict(SPEC, path=str(real), action="run", kill={"point": "chunk", "count": 12, "signal": "KILL"}))
    assert out.returncode != 0
    assert S.open_store(link).state == "crashed"
    assert os.path.exists(str(real) + ".ckpt")  # its checkpoints are named after the store itself
    live, ref_path = reference
    assert_same_result(live, S.resume(link))  # rebuilt from the committed rows, into real.h5
    assert os.path.islink(link) and os.readlink(link) == "real.h5"  # before: replaced by a copy
    assert S.open_store(real).state == "complete"
    assert_same_rows(real, ref_path)
    assert sorted(os.listdir(tmp_path)) == ["link.h5", "real.h5"]


@pytest.mark.parametrize("kind", ["run", "sweep", "network"])
def test_a_new_store_written_through_a_symlink_keeps_the_link(problem, tmp_path, kind):
    real, link = _linked(tmp_path)
    for overwrite in (False, True):  # a dangling link (a new store), then a store replaced
        if kind == "run":
            dm.mgd(problem, 0.01, 0.5, steps=100, store=link, overwrite=overwrite)
            assert S.open_store(real).state == "complete"
        elif kind == "sweep":
            assert dm.sweep(problem, store=link, overwrite=overwrite, **GRID).complete
            assert dm.open_sweep(real).complete
        else:
            assert dm.networks_sweep(NETWORK, store=link, overwrite=overwrite, **GRID).complete
            assert dm.open_sweep(real).complete
        assert os.path.islink(link) and os.readlink(link) == "real.h5"
        assert sorted(os.listdir(tmp_path)) == ["link.h5", "real.h5"]


def test_inspect_into_a_closed_pipe_stops_quietly(problem, tmp_path):
    path = tmp_path / "s.h5"
    dm.sweep(problem, store=path, **GRID)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.Popen([sys.executable, "-m", "dlnmomentum", "inspect", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=ROOT)
    proc.stdout.close()  # `| head` that has read what it wanted (here: nothing) before dlnm writes
    _, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 141, (proc.returncode, err)  # 128 + SIGPIPE, as a command killed by it
    assert err == b"", err  # before: "dlnm: error: [Errno 32] Broken pipe", exit 2
