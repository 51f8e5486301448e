"""Smaller defects of stores, figures and the command line found by probing (2026-11-26), each fixed and tested here.

Before: a resumed complete sweep store was written to (``sessions`` 1 -> 2); ``dlnm network ... --resume`` continued
a diagonal sweep store; ``dlnm inspect`` of a stopped sweep store did not say it was unfinished nor how to go on;
``dlnm figure`` replaced a user's own ``<out>/<name>.png``; a figure store's curves opened in xarray with
``phony_dim_*`` names; a flow store's ``/final`` kept the empty axis scales of its template next to the real ones;
``--data-seed`` took 1e23 in ``dlnm run`` and said ``seed`` in ``dlnm sweep``; a run store without
``format_version`` was "format version -1 (upgrade the package)".
"""

import os
import warnings

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.cli import main

SMALL = dict(n=8, d=13, s=3, n_test=50)
NETWORK = {"generator": "teacher_student", "n": 6, "d": 2, "teacher_width": 2, "student_width": 3, "n_test": 20}


def test_resuming_a_complete_sweep_writes_nothing(tmp_path):
    for make, resume in ((lambda p: dm.sweep(SMALL, gammas=[0.01], betas=[0.5], steps=100, store=p), dm.resume_sweep),
                         (lambda p: dm.networks_sweep(NETWORK, gammas=[0.01], betas=[0.5], steps=100, store=p),
                          dm.resume_networks_sweep)):
        path = str(tmp_path / "s.h5")
        make(path)
        before = open(path, "rb").read()
        assert resume(path).complete
        assert open(path, "rb").read() == before
        os.unlink(path)


def test_network_resume_refuses_a_diagonal_sweep_store(tmp_path, capsys):
    path = tmp_path / "s.h5"
    dm.sweep(SMALL, gammas=[0.01], betas=[0.5], steps=100, store=str(path))
    before = path.read_bytes()
    assert main(["network", "teacher-student", "--store", str(path), "--resume", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert f"{path} is a sweep store, not a network sweep store; continue it with" in err, err
    assert f"dlnm sweep --store {path} --resume" in err
    assert path.read_bytes() == before


def test_inspect_says_a_stopped_sweep_is_unfinished_and_how_to_continue(tmp_path, capsys):
    path = tmp_path / "s.h5"
    dm.sweep(SMALL, gammas=[0.01, 0.02], betas=[0.5], steps=100, store=str(path))
    with h5py.File(path, "r+") as f:  # as a sweep stopped after one point leaves it
        f["done"][0, 0, 1] = 0
    assert main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"state        : unfinished: continue it with dlnmomentum.resume_sweep('{path}')" in out, out
    assert "(1 of 2 points still to compute)" in out


def test_figure_images_replace_only_images_the_package_drew(tmp_path):
    from dlnmomentum.figures import compute_figure, plot_store

    out = tmp_path / "figs"
    out.mkdir()
    mine = out / "quadratic.png"
    mine.write_bytes(b"my own picture")
    with pytest.raises(S.StoreError, match=f"refusing to overwrite {mine}: it is not an image dlnmomentum drew"):
        compute_figure("quadratic", "tiny", str(out), log=lambda line: None)
        plot_store(str(out / "quadratic.h5"))
    assert mine.read_bytes() == b"my own picture" and not (out / "quadratic.pdf").exists()
    mine.unlink()
    first = plot_store(str(out / "quadratic.h5"))
    assert [os.path.basename(p) for p in first] == ["quadratic.png", "quadratic.pdf"]
    for p in first:
        assert b"dlnmomentum figure image: quadratic" in open(p, "rb").read()
    assert plot_store(str(out / "quadratic.h5")) == first  # its own images: drawn again


def test_figure_curves_open_in_xarray_with_named_dimensions(tmp_path):
    xr = pytest.importorskip("xarray")
    from dlnmomentum.figures import compute_figure, open_figure

    compute_figure("quadratic", "tiny", str(tmp_path), log=lambda line: None)
    path = tmp_path / "quadratic.h5"
    with h5py.File(path, "r") as f:
        group = "runs/" + next(iter(f["runs"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (h5netcdf warns of phony dimensions)
        with xr.open_dataset(path, engine="h5netcdf", group=group) as ds:
            # (one dimension row for the arrays over the iterates, with k and time its coordinates)
            assert ds["x"].dims == ("row", "coordinate") and ds["x"].shape[1] == 2
            assert ds["distance"].dims == ("row",) and {"k", "time"} <= set(ds["x"].coords)
    datasets = open_figure(str(path)).datasets
    assert not any(k.endswith(("_dim0", "/row", "/coordinate")) for k in datasets)  # scales are not data


def test_flow_final_keeps_no_stale_axis_scales(tmp_path):
    path = tmp_path / "f.h5"
    res = dm.mgf(dm.sparse_regression(n=10, d=20, s=3, seed=0), 0.5, t_max=40.0, scheme="rk4", store=str(path))
    assert res.n_crossings > 0
    with h5py.File(path, "r") as f:
        scales = sorted(k for k in f["final"] if k.startswith("crossing_"))
        assert scales == ["crossing_coords", "crossing_coords_dim0", "crossing_signs", "crossing_signs_dim0",
                          "crossing_times", "crossing_times_dim0"], scales
        assert f["final/crossing_times_dim0"].shape == (res.n_crossings,)
    assert np.array_equal(S.open_store(path).result.crossing_times, res.crossing_times)


@pytest.mark.parametrize("command", [["run", "--gamma", "0.01", "--beta", "0.5", "--steps", "10"],
                                     ["sweep", "--gammas", "0.01", "--betas", "0", "--steps", "10"],
                                     ["network", "teacher-student", "--gamma", "0.01", "--beta", "0.5", "--steps",
                                      "10"]])
@pytest.mark.parametrize("seed", ["100000000000000000000000", "-1", "1.5"])
def test_data_seed_has_one_range_named_by_its_option(command, seed, capsys):
    with pytest.raises(SystemExit) as exc:
        main(command + ["--data-seed", seed, "--no-progress"])
    assert exc.value.code == 2
    assert "--data-seed must be an integer in [0, 9223372036854775807] (2**63 - 1)" in capsys.readouterr().err


def test_a_run_store_without_format_version_is_damaged_not_new(tmp_path):
    path = tmp_path / "r.h5"
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "dlnmomentum-run"
    with pytest.raises(S.StoreCorruptError, match="has no format_version attribute: damaged, or not written by "
                                                  "dlnmomentum"):
        S.open_store(str(path))


def test_a_lock_whose_pid_was_reused_is_stale(tmp_path):
    """A writer killed by SIGKILL leaves its lock; when the system gives its pid to another live process, the store
    was shown ``running`` for ever (and refused writers). The lock names the process by its pid and start time."""
    import json
    import socket
    import subprocess
    import sys

    from dlnmomentum.store.files import lock_holder, process_start

    path = tmp_path / "r.h5"
    dm.mgd(dm.sparse_regression(**SMALL, seed=0), 0.01, 0.5, steps=100, store=str(path))
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = process_start(other.pid)
        if started is None:
            pytest.skip("no /proc/<pid>/stat here: the start time of a process is unknown")
        lock = tmp_path / "r.h5.lock"
        info = {"pid": other.pid, "host": socket.gethostname(), "since": "2026-01-01T00:00:00+00:00",
                "purpose": "writing a mgd run", "token": "00"}
        lock.write_text(json.dumps(dict(info, process_start=started)))  # the live writer itself
        assert lock_holder(str(path)) is not None
        lock.write_text(json.dumps(dict(info, process_start=started - 1)))  # another process with its pid
        assert lock_holder(str(path)) is None
        assert dm.resume(str(path)).steps_done == 100  # a writer takes the stale lock over
    finally:
        other.kill()
        other.wait()
