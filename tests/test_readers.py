"""Reading what the package wrote (issue 23, A1-A4 and C19): every sweep design opens in xarray, live, reopened
and averaged; one reader per kind of file, and a wrong reader names the right one; codes carry their names;
configurations and reprs are summaries; summary statistics leave diverged points out and say so.

Before: ``to_xarray`` raised ``variables {'lam'} are found in both data_vars and coords`` for every sweep over
λ; ``dm.open_store`` called a healthy figure store damaged and pointed sweep stores at ``dlnmomentum.sweep``;
``dlnm inspect`` refused network sweep and figure stores; ``status``/``theory_reason`` were bare int8;
``store.config`` printed every recorded step; summaries gave ``l1_norm ... max 8.9e+285``.
"""

import json

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.figures import common, open_figure
from dlnmomentum.runs.points import TheoryReason
from dlnmomentum.sweeps.result import summary_dict

xr = pytest.importorskip("xarray")

SPEC = {"n": 8, "d": 13, "s": 3, "n_test": 50}
NETWORK = {"generator": "teacher_student", "n": 6, "d": 2, "teacher_width": 2, "student_width": 3, "n_test": 20}

#: Every design of a sweep: (arguments, dims); two reps each, so that ``mean("rep")`` reduces something.
DESIGNS = {
    "grid": (dict(gammas=[0.01, 0.05], betas=[0.0, 0.5], steps=200), ("rep", "beta", "gamma")),
    "lam-grid": (dict(lams=[0.01, 0.1], betas=[0.5, 0.9], steps=200), ("rep", "beta", "lam")),
    "pairs": (dict(pairs=[(0.01, 0.5), (0.05, 0.0)], steps=200), ("rep", "pair")),
    "mgf-line": (dict(lams=[0.0, 0.1], t_max=2.0), ("rep", "lam")),
    "network": (dict(gammas=[0.01, 0.05], betas=[0.0, 0.5], steps=50), ("rep", "beta", "gamma")),
}


@pytest.fixture(scope="module")
def stored(tmp_path_factory):
    """design -> (live Sweep returned by sweep(store=...), store path)."""
    out = {}
    folder = tmp_path_factory.mktemp("designs")
    for name, (kwargs, _) in DESIGNS.items():
        path = str(folder / f"{name}.h5")
        spec = NETWORK if name == "network" else SPEC
        out[name] = (dm.sweep(spec, reps=2, store=path, **kwargs), path)
    return out


def _check_dataset(ds, sw):
    assert ds["test_loss"].dims == sw.dims
    for dim in sw.dims:
        assert dim in ds.coords
    for name, arr in sw.data.items():
        if name in sw.dims:  # a parameter that is a dim (lam of a lambda line): its coordinate holds it
            np.testing.assert_array_equal(ds.coords[name].values, sw.coords[name])
        else:
            np.testing.assert_array_equal(ds[name].values, np.asarray(arr))
    if "lam" in sw.data:  # lambda of every point, whatever the design
        assert "lam" in ds


@pytest.mark.parametrize("design", list(DESIGNS))
@pytest.mark.parametrize("how", ["live", "reopened", "mean"])
def test_every_design_opens_in_xarray(stored, design, how):
    live, path = stored[design]
    sw = {"live": live, "reopened": dm.open_sweep(path), "mean": live.mean("rep")}[how]
    ds = sw.to_xarray()
    _check_dataset(ds, sw)
    assert ds.sizes["rep" if how != "mean" else sw.dims[0]] == sw.shape[0]
    if how != "mean":  # the codes carry their names (CF flag attributes)
        status = ds["status"]
        assert list(status.attrs["flag_values"]) == [int(s) for s in dm.Status]
        assert status.attrs["flag_meanings"].split() == [s.label for s in dm.Status]


@pytest.mark.parametrize("design", list(DESIGNS))
def test_every_store_opens_with_xarray_open_dataset(stored, design):
    live, path = stored[design]
    # (the fill -1 of a point not done first, named not_done: 0.6.0, test_xarray_readers.py)
    with xr.open_dataset(path, engine="h5netcdf") as ds:
        np.testing.assert_array_equal(ds["test_loss"].values, live.test_loss)
        assert ds["status"].attrs["flag_meanings"].split() == ["not_done"] + [s.label for s in dm.Status]
        if design != "network":
            assert ds["theory_reason"].attrs["flag_meanings"].split() == (
                ["not_done"] + [r.name.lower() for r in TheoryReason])
    with h5py.File(path, "r") as f:
        assert list(f["status"].attrs["flag_values"]) == [-1] + [int(s) for s in dm.Status]


def test_codes_have_names(stored):
    live, _ = stored["grid"]
    assert live.status_names.shape == live.shape and set(live.status_names.ravel()) == {"max_steps"}
    assert set(live.theory_reason_names.ravel()) == {"not_requested"}
    np.testing.assert_array_equal(live.names("status"), live.status_names)
    with pytest.raises(ValueError, match="coded fields"):
        live.names("test_loss")
    assert "theory_reason" not in live.mean("rep").fields  # a mean of codes names nothing
    net, _ = stored["network"]
    assert set(net.status_names.ravel()) == {"max_steps"}
    partial = dm.Sweep(live.dims, live.coords, live.data, np.zeros(live.shape, dtype=bool), live.config)
    assert set(partial.status_names.ravel()) == {"not_done"}
    # names shorter than "not_done" (and a store's fill code -1, as text): the str array was cut to their width,
    # "no" or "not_don"
    for fill, short in ((-1, "stalled"), (dm.Status.STALLED, "stalled"), (dm.Status.RUNNING, "running")):
        codes = np.full(live.shape, int(fill), dtype=np.int8)
        codes.ravel()[0] = int(dm.Status[short.upper()])
        done = np.zeros(live.shape, dtype=bool)
        done.ravel()[0] = True
        some = dm.Sweep(live.dims, live.coords, dict(live.data, status=codes), done, live.config)
        assert some.status_names.ravel()[0] == short and set(some.status_names.ravel()[1:]) == {"not_done"}


# -- one reader per kind of file --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def files(stored, tmp_path_factory):
    """A run store, a sweep store, a network sweep store and a (small, hand-made) figure store."""
    folder = tmp_path_factory.mktemp("kinds")
    run = str(folder / "run.h5")
    dm.mgd(dm.sparse_regression(**SPEC, seed=4), 0.01, 0.5, steps=2000, record=dm.Record(log=800), store=run)
    figure = str(folder / "mgd-grid.h5")
    f, tmp = common.new_store(figure, "mgd-grid", "tiny")
    common.put_sweep(f, "mgd", stored["grid"][0])
    common.put(f, "curve", np.arange(5.0), "a curve")
    common.finish_store(f, tmp, figure, {"n": 8}, {"mgd": {"points": 8}})
    return {"run": run, "sweep": stored["grid"][1], "network-sweep": stored["network"][1], "figure": figure}


def test_each_reader_reads_its_own_kind(files):
    assert dm.open_store(files["run"]).kind == "mgd"
    assert dm.open_sweep(files["sweep"]).config["kind"] == "mgd"
    assert dm.open_sweep(files["network-sweep"]).config["kind"] == "network-mgd"
    fs = open_figure(files["figure"])
    assert fs.name == "mgd-grid" and fs.size == "tiny" and fs.sweeps == ("mgd",) and fs.claims == {"mgd": {"points": 8}}
    assert fs.sweep("mgd").shape == (2, 2, 2) and list(fs["curve"]) == [0, 1, 2, 3, 4]
    assert "figure       : mgd-grid" in fs.summary()


@pytest.mark.parametrize("kind, reader, right", [
    ("figure", dm.open_store, r"is a figure store, not a run store; read it with dlnmomentum\.figures\.open_figure"),
    ("sweep", dm.open_store, r"is a sweep store, not a run store; read it with dlnmomentum\.open_sweep\("),
    ("network-sweep", dm.open_store, r"is a network sweep store, not a run store; read it with "
                                     r"dlnmomentum\.open_sweep\("),
    ("run", dm.open_sweep, r"is a run store, not a sweep store; read it with dlnmomentum\.open_store\("),
    ("figure", dm.open_sweep, r"is a figure store, not a sweep store; read it with dlnmomentum\.figures"),
    ("sweep", dm.resume, r"is a sweep store, not a run store; continue it with dlnmomentum\.resume_sweep\("),
    ("run", dm.resume_sweep, r"is a run store, not a sweep store; continue it with dlnmomentum\.resume\("),
    ("run", open_figure, r"is a run store, not a figure store; read it with dlnmomentum\.open_store\("),
])
def test_a_wrong_reader_names_the_right_one(files, kind, reader, right):
    with pytest.raises(dm.StoreError, match=right) as info:
        reader(files[kind])
    assert not isinstance(info.value, dm.StoreCorruptError)  # a healthy file of another kind is not damaged
    assert files[kind] in str(info.value)


@pytest.mark.parametrize("kind, says", [
    ("run", "status      : max_steps"), ("sweep", "format dlnmomentum-sweep"),
    ("network-sweep", "format dlnmomentum-network-sweep"), ("figure", "figure       : mgd-grid"),
])
def test_inspect_reads_every_kind(files, kind, says, capsys):
    assert main(["inspect", files[kind]]) == 0
    assert says in capsys.readouterr().out
    assert main(["inspect", files[kind], "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == {"run": "mgd", "sweep": "mgd", "network-sweep": "network-mgd", "figure": "figure"}[kind]


@pytest.mark.parametrize("kind, command", [
    ("sweep", "dlnm sweep --store"), ("network-sweep", "dlnm network ARCHITECTURE --store"),
    ("figure", "dlnm figure NAME"),
])
def test_resume_names_the_command_that_continues_a_store(files, kind, command, capsys):
    assert main(["resume", files[kind], "--no-progress"]) == 2
    assert command in capsys.readouterr().err


def test_plot_says_what_it_accepts(files, capsys):
    assert main(["plot", files["run"]]) == 2
    assert "is a run store, not a figure store; read it with dlnmomentum.open_store" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["plot", "--help"])
    assert "figure stores only" in capsys.readouterr().out


# -- summaries, not hundreds of numbers --------------------------------------------------------------------

def test_config_and_reprs_are_summaries(files):
    s = dm.open_store(files["run"])
    schedule = s.config["schedule"]
    assert isinstance(schedule, list) and len(schedule) > 300  # the data: every recorded step
    for text in (repr(s.config), str(s.config), repr(s)):
        assert len(text) < 500 and str(schedule[150]) + "," not in text, text
    assert f"[{len(schedule)} values: 0, 1, ..., 2000]" in repr(s.config)
    traj = s.trajectory
    assert len(repr(traj)) < 300 and f"Trajectory({len(traj)} rows: step 0 ... 2000" in repr(traj)
    assert len(repr(s.result)) < 6000  # (its vectors have d = 13 entries; the trajectory is a summary)


def test_statistics_leave_diverged_points_out():
    sw = dm.sweep(dm.sparse_regression(**SPEC, seed=4), gammas=[0.01, 5.0], betas=[0.0, 0.5], steps=2000)
    assert (sw.status == dm.DIVERGED).sum() == 2
    text = sw.summary()
    assert "statistics   : over the 2 points that did not diverge (2 diverged points excluded)" in text
    l1 = next(line for line in text.splitlines() if line.startswith("l1_norm"))
    assert float(l1.split("max")[1].split()[0]) < 10.0, l1  # was max 8.9e+285
    out = summary_dict(sw)
    assert out["diverged_excluded"] == 2 and out["fields"]["l1_norm"]["points"] == 2
    assert out["fields"]["l1_norm"]["max"] < 10.0
    net = dm.networks_sweep(NETWORK, gammas=[0.01, 100.0], betas=[0.5], steps=200)  # (was test_loss max 1.4e+268)
    assert list(net.status_names.ravel()) == ["max_steps", "diverged"]
    assert "(1 diverged points excluded)" in net.summary()
    assert summary_dict(net)["fields"]["test_loss"]["max"] == net.test_loss[0, 0, 0]


def test_a_run_store_names_its_status_codes(tmp_path):
    """``/final/status`` carries the CF flag attributes, as the sweep stores' ``status`` does (before: a bare code,
    its name only in the root attribute ``status_name``)."""
    path = tmp_path / "r.h5"
    dm.mgd(dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=0), 0.05, 0.8, steps=100, store=str(path))
    with xr.open_dataset(path, engine="h5netcdf", group="final") as ds:
        status = ds["status"]
        assert int(status) == dm.Status.MAX_STEPS
        assert list(status.attrs["flag_values"]) == [int(s) for s in dm.Status]
        assert status.attrs["flag_meanings"].split() == [s.label for s in dm.Status]


@pytest.mark.parametrize("design", ["grid", "network"])
def test_a_partial_sweep_says_its_points_not_done(stored, design):
    """A sweep with points not done: to_xarray and mean("rep") say so (a warning naming the count), and in the
    Dataset a point not done has status/theory_reason 'not_done', not the fill 0 ('running' / 'computed')."""
    import warnings

    live, _ = stored[design]
    done = np.ones(live.shape, dtype=bool)
    done[1, 1] = False  # rep 1, beta 0.5: not done
    data = {name: np.array(arr, copy=True) for name, arr in live.data.items()}
    for name, arr in data.items():  # as a store holds them: the fill of each dtype
        if name not in ("gamma", "beta", "lam"):
            arr[1, 1] = np.nan if arr.dtype.kind == "f" else 0
    partial = dm.Sweep(live.dims, live.coords, data, done, live.config, path="partial.h5")
    left = int((~done).sum())
    with pytest.warns(UserWarning, match=rf"partial sweep: {left} of {done.size} points are not done"):
        ds = partial.to_xarray()
    for field in ("status", "theory_reason") if design == "grid" else ("status",):
        var = ds[field]
        meanings = dict(zip(var.attrs["flag_values"].tolist(), var.attrs["flag_meanings"].split(), strict=True))
        names = np.vectorize(meanings.get)(var.values)
        assert set(names[~done].ravel()) == {"not_done"}
        np.testing.assert_array_equal(names[done], partial.names(field)[done])
    with pytest.warns(UserWarning, match=r"mean over rep of a partial sweep: 2 of 4 means are NaN"):
        mean = partial.mean("rep")
    assert np.isnan(mean.test_loss[1]).all() and not mean.done[1].any() and mean.done[0].all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a complete sweep: no warning
        live.to_xarray()
        live.mean("rep")
