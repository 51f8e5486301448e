"""Every kind of file the package writes, opened the way a researcher opens it: ``xarray.open_dataset`` on the file
and on its groups, and the package's own ``to_xarray``.

Before: ``xr.open_dataset(run, group="observables")`` gave ``step`` as a data variable, not a coordinate;
``Store.to_xarray()`` dropped the units and description of every variable, and ``Store.to_xarray(name)`` gave an
empty description (read from the group, where there is none).
"""

import os
import signal

import numpy as np
import pytest

import dlnmomentum as dm

xr = pytest.importorskip("xarray")
pytest.importorskip("h5netcdf")

SPEC = {"n": 8, "d": 13, "s": 3, "n_test": 50}
FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "v0.2.0")


@pytest.fixture(scope="module")
def run_store(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("xr") / "run.h5")
    res = dm.mgd(dm.sparse_regression(**SPEC, seed=1), 0.01, 0.5, steps=300, record=dm.Record(every=50), store=path)
    return path, res


def test_step_is_a_coordinate_of_the_observables_group(run_store):
    path, res = run_store
    with xr.open_dataset(path, engine="h5netcdf", group="observables") as ds:
        assert "step" in ds.coords and "time" in ds.indexes and not ds.data_vars
        np.testing.assert_array_equal(ds["step"].values, res.trajectory.step)
    with xr.open_dataset(path, engine="h5netcdf", group="observables", chunks={}) as ds:  # dask, lazily
        assert "step" in ds.coords
        np.testing.assert_array_equal(ds["step"].values, res.trajectory.step)
    with xr.open_datatree(path, engine="h5netcdf") as tree:  # the whole store, groups as nodes
        assert "step" in tree["observables"].coords and "step" in tree["observables/theta"].coords


def test_a_store_of_0_2_0_still_opens_in_xarray():
    path = os.path.join(FIXTURES, "mgd_complete.h5")
    with xr.open_dataset(path, engine="h5netcdf", group="observables") as ds:
        assert "step" in ds.variables and ds.sizes["time"] >= 2  # (a data variable there: no attribute says)
    with xr.open_dataset(path, engine="h5netcdf", group="observables/theta") as ds:
        assert "step" in ds.coords
    ds = dm.open_store(path).to_xarray()
    assert "step" in ds.coords and ds["theta"].attrs["description"].startswith("regression parameter")


def test_to_xarray_keeps_units_and_descriptions(run_store):
    path, _ = run_store
    s = dm.open_store(path)
    with xr.open_dataset(path, engine="h5netcdf", group="observables/theta") as raw:
        stored = raw["value"].attrs["description"]
    assert stored.startswith("regression parameter")
    one = s.to_xarray("theta")
    assert one["value"].attrs["description"] == stored and one["value"].attrs["units"] == "1"
    merged = s.to_xarray()
    for name in s.observables:
        assert merged[name].attrs["description"], name
        assert merged[name].attrs["units"], name
    assert merged["theta"].attrs["description"] == stored
    assert merged["time"].attrs["units"] == "1" and merged["step"].attrs["description"].startswith("number of")
    assert merged.attrs["kind"] == "mgd" and merged.attrs["source"] == path


# -- partial sweeps: a point not done is named so in the file itself ------------------------------------------------

def _stop_after_first_wave():
    """The sweep stops (as after Ctrl-C) once its first wave is written."""
    def log(message):
        os.kill(os.getpid(), signal.SIGINT)  # the package's handler notes it; the sweep stops after this wave
    return log


@pytest.fixture(scope="module")
def partial_stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("partial")
    sweep = str(folder / "grid.h5")
    # the suite may run in the background (nohup, CI), where SIGINT is inherited ignored and the package keeps it so:
    # Python's own handler while these sweeps stop themselves, then the inherited one again
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        sw = dm.sweep(SPEC, gammas="1e-3:1e-2:4:log", betas="0:0.9:4", steps=200, reps=1, theory=True, wave_size=1,
                      store=sweep, log=_stop_after_first_wave())
        network = str(folder / "network.h5")
        net = dm.networks_sweep({"generator": "teacher_student", "n": 6, "d": 2, "teacher_width": 2,
                                 "student_width": 3, "n_test": 20}, gammas=[0.01, 0.02, 0.03], betas=[0.0, 0.5],
                                steps=50, wave_size=1, store=network, log=_stop_after_first_wave())
    finally:
        signal.signal(signal.SIGINT, inherited)
    assert 0 < sw.done.sum() < sw.done.size and 0 < net.done.sum() < net.done.size  # partial, both
    return {"sweep": (sweep, ("status", "theory_reason")), "network": (network, ("status",))}


@pytest.mark.parametrize("kind", ["sweep", "network"])
@pytest.mark.parametrize("chunks", [None, {}])
def test_a_point_not_done_reads_not_done_in_xarray(partial_stores, kind, chunks):
    path, coded = partial_stores[kind]
    with xr.open_dataset(path, engine="h5netcdf", chunks=chunks) as ds:
        done = ds["done"].values.astype(bool)
        for name in coded:
            var = ds[name]
            assert var.dtype == np.int8  # (no _FillValue masking: the codes stay integers)
            codes = dict(zip(var.attrs["flag_values"].tolist(), var.attrs["flag_meanings"].split(), strict=True))
            values = var.values
            assert {codes[c] for c in values[~done].ravel()} == {"not_done"}, name  # was 0: running / computed
            assert "not_done" not in {codes[c] for c in values[done].ravel()}, name
    sw = dm.open_sweep(path) if kind == "sweep" else dm.open_networks_sweep(path)
    assert set(sw.status_names[~sw.done]) == {"not_done"}
    assert set(sw.status_names[sw.done]) <= {"max_steps", "converged", "diverged"}


# -- figure stores --------------------------------------------------------------------------------------------------

def test_a_figure_store_opens_over_shared_dimensions(tmp_path):
    """quadratic: the arrays over a trajectory's iterates share the dimension ``row`` (before: x_dim0, k_dim0,
    time_dim0, distance_dim0, four dimensions for one axis)."""
    from dlnmomentum.figures import compute_figure

    path, _ = compute_figure("quadratic", "tiny", out=str(tmp_path), log=lambda *a: None)
    with xr.open_dataset(path, engine="h5netcdf", group="runs/gd") as ds:
        assert set(ds.sizes) == {"row", "coordinate"}
        assert {"k", "time"} <= set(ds.coords) and ds["x"].dims == ("row", "coordinate")
        assert ds["distance"].dims == ("row",) and ds["x"].attrs["description"]
    with xr.open_dataset(path, engine="h5netcdf", group="flows/mgf", chunks={}) as ds:
        assert set(ds.sizes) == {"row", "coordinate"} and "time" in ds.coords


def test_a_figure_stores_sweep_describes_its_fields(tmp_path, stored_grid):
    """Before: the sweep groups of a figure store had flag attributes but no description (a sweep store has them)."""
    from dlnmomentum.figures import common

    figure = str(tmp_path / "mgd-grid.h5")
    f, tmp = common.new_store(figure, "mgd-grid", "tiny")
    common.put_sweep(f, "mgd", stored_grid)
    common.finish_store(f, tmp, figure, {"n": 8}, {"mgd": {"points": 4}})
    with xr.open_dataset(figure, engine="h5netcdf", group="mgd") as ds:
        for name in ds.data_vars:
            assert ds[name].attrs.get("description"), name
        assert ds["status"].attrs["flag_meanings"].split()[2] == "max_steps"


@pytest.fixture(scope="module")
def stored_grid():
    return dm.sweep(SPEC, gammas=[0.01, 0.05], betas=[0.0, 0.5], steps=100)


# -- sweeps: the run parameters over the grid are coordinates -------------------------------------------------------

@pytest.mark.parametrize("design", ["pairs", "grid", "network"])
def test_the_parameters_over_the_grid_are_coordinates(tmp_path, design):
    """Before: ``gamma``, ``beta`` (pairs) and ``lam`` (a (beta, gamma) grid) opened as data variables, fields
    beside test_loss; now coordinates of every field (``ds.test_loss.plot(x="lam")``), in the file and in
    ``to_xarray``, and the dims say what they index."""
    path = str(tmp_path / f"{design}.h5")
    if design == "network":
        sw = dm.networks_sweep({"generator": "teacher_student", "n": 6, "d": 2, "teacher_width": 2,
                                "student_width": 3, "n_test": 20}, gammas=[0.01, 0.02], betas=[0.0, 0.5],
                               steps=20, store=path)
        over = {"lam"}
    elif design == "pairs":
        sw = dm.sweep(SPEC, pairs=[(0.01, 0.5), (0.05, 0.0)], steps=100, store=path)
        over = {"gamma", "beta", "lam"}
    else:
        sw = dm.sweep(SPEC, gammas=[0.01, 0.05], betas=[0.0, 0.5], steps=100, store=path)
        over = {"lam"}
    for ds in (xr.open_dataset(path, engine="h5netcdf"), xr.open_dataset(path, engine="h5netcdf", chunks={}),
               sw.to_xarray(), dm.open_sweep(path).to_xarray() if design != "network" else sw.to_xarray()):
        with ds:
            assert over <= set(ds.coords) and not over & set(ds.data_vars)
            assert set(ds["test_loss"].coords) >= over
            np.testing.assert_array_equal(ds["lam"].values, sw.lam)
            if ds.encoding.get("source"):  # the file: every dim describes itself
                for dim in ds.dims:
                    assert ds[dim].attrs.get("description"), dim
