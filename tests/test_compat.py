"""Stores written by 0.2.0 (``tests/fixtures/v0.2.0``, made by ``tests/fixtures/make_stores.py``) open and
resume bit for bit: type names in those files are module paths of the old layout, mapped by the registry."""

import json
import os
import shutil

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures", "v0.2.0")
with open(os.path.join(FIXTURES, "params.json")) as _f:
    PARAMS = json.load(_f)


@pytest.fixture
def stores(tmp_path):
    """A writable copy of the fixture files (resuming changes them)."""
    out = tmp_path / "v0.2.0"
    shutil.copytree(FIXTURES, out)
    return out


def _problem():
    return dm.sparse_regression(**PARAMS["problem"])


def _fresh(name):
    job = dict(PARAMS["jobs"][name])
    kind = job.pop("kind")
    record = dm.Record(log=job.pop("record_log"))
    if kind == "mgd":
        return dm.mgd(_problem(), job.pop("gamma"), job.pop("beta"), record=record, **job)
    return dm.mgf(_problem(), job.pop("lam"), record=record, **job)


def _assert_bitwise(a, b):
    for name, value in a.to_dict().items():
        other = getattr(b, name)
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, other, err_msg=name)
        elif isinstance(value, float) and np.isnan(value):
            assert np.isnan(other), name
        else:
            assert value == other, name
    for name, value in a.trajectory.fields().items():
        np.testing.assert_array_equal(value, b.trajectory.fields()[name], err_msg=f"trajectory.{name}")


def test_fixtures_hold_old_module_paths():
    """The point of the fixtures: they name types the way 0.2.0 did (no longer importable paths)."""
    with h5py.File(os.path.join(FIXTURES, "mgd_complete.h5"), "r") as f:
        assert f["final"].attrs["result_class"] == "dlnmomentum.mgd:MGDResult"
        assert f.attrs["package_version"] == "0.2.0"


def test_complete_store_reads_as_a_fresh_run(stores):
    s = dm.open_store(stores / "mgd_complete.h5")
    assert s.state == "complete" and s.result.status_name == "max_steps"
    _assert_bitwise(s.result, _fresh("mgd_complete.h5"))
    assert dm.resume(stores / "mgd_complete.h5").steps_done == 4000  # a finished store is returned as is


@pytest.mark.parametrize("name", ["smgd_interrupted.h5", "mgf_interrupted.h5"])
def test_interrupted_store_resumes_bit_for_bit(stores, name):
    path = stores / name
    before = dm.open_store(path)
    assert before.state == "interrupted"
    resumed = dm.resume(path)
    fresh = _fresh(name)
    assert resumed.status_name == fresh.status_name == "max_steps"
    _assert_bitwise(fresh, resumed)
    _assert_bitwise(fresh, dm.open_store(path).result)
    with h5py.File(path, "r") as f:  # the resumed file names its types by their stable names
        assert f["final"].attrs["result_class"] in ("MGDResult", "FlowResult") and f.attrs["format_version"] == 2


def test_interrupted_sweep_resumes_bit_for_bit(stores):
    path = stores / "sweep_interrupted.h5"
    before = dm.open_sweep(path)
    assert 0 < before.done.sum() < before.done.size
    job = dict(PARAMS["jobs"]["sweep_interrupted.h5"])
    job.pop("kind")
    job.pop("wave_size")
    spec = {k: v for k, v in PARAMS["problem"].items() if k != "seed"}
    resumed = dm.resume_sweep(path)
    fresh = dm.sweep(spec, seed=PARAMS["problem"]["seed"], **job)
    assert resumed.complete
    for field in fresh.fields:
        np.testing.assert_array_equal(resumed[field], fresh[field], err_msg=field)


def test_cli_inspects_old_stores(stores, capsys):
    for name in ("mgd_complete.h5", "smgd_interrupted.h5", "mgf_interrupted.h5", "sweep_interrupted.h5"):
        assert main(["inspect", str(stores / name)]) == 0
    out = capsys.readouterr().out
    assert "sweep" in out and "interrupted" in out
