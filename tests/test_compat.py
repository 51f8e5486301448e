"""Stores written by 0.2.0 (``tests/fixtures/v0.2.0``, made by ``tests/fixtures/make_stores.py``) open and
resume bit for bit: type names in those files are module paths of the old layout, mapped by the registry.

Bit for bit holds where the fixtures were made: the data's Gram matrix ``XᵀX/n`` (and κ) come from the
machine's BLAS/LAPACK, whose summation order depends on the CPU (seen: the same file differs by
3.8e-13 relative between an AMD EPYC and an Intel Xeon with the same OpenBLAS). On a machine whose Gram
matrix differs from the fixtures' machine the comparison with the stored numbers is to 1e-10 relative;
everything computed here (a resumed run against a run resumed again) stays bit for bit.
"""

import json
import os
import shutil

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.runs.points import ADDED_IN_V2

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
    # 0.2.0 integrated every flow with RK4 on a grid (its stores resume so); "auto" now takes the adaptive scheme
    # for this long horizon
    return dm.mgf(_problem(), job.pop("lam"), record=record, scheme="rk4", **job)


def _same_arithmetic():
    """True when this machine's BLAS gives the fixtures' machine's Gram matrix bit for bit."""
    with h5py.File(os.path.join(FIXTURES, "mgd_complete.h5"), "r") as f:
        stored = f["problem/hessian"][...]
    return bool(np.array_equal(stored, _problem().hessian))


EXACT = _same_arithmetic()


def _assert_equal(actual, desired, err_msg):
    if EXACT:
        np.testing.assert_array_equal(actual, desired, err_msg=err_msg)
        return
    desired = np.asarray(desired, dtype=float)
    finite = desired[np.isfinite(desired)]
    scale = float(np.abs(finite).max()) if finite.size else 0.0
    # quantities that vanish at convergence (velocities, K±, gaps, tiny losses) sit at round-off level, where
    # two machines' orders of summation differ relatively: an absolute floor of 1e-12 for them
    atol = max(1e-9 * scale, 1e-12)
    np.testing.assert_allclose(actual, desired, rtol=1e-8, atol=atol, err_msg=err_msg)


def _assert_bitwise(a, b):
    for name, value in a.to_dict().items():
        other = getattr(b, name)
        if name == "config":
            for key, v in value._asdict().items():
                _assert_equal(getattr(other, key), v, err_msg=f"config.{key}") if isinstance(v, float) \
                    else np.testing.assert_equal(getattr(other, key), v, err_msg=f"config.{key}")
        elif isinstance(value, np.ndarray) or (isinstance(value, float) and not np.isnan(value)):
            _assert_equal(value, other, err_msg=name)
        elif isinstance(value, float):
            assert np.isnan(other), name
        else:
            assert value == other, name
    for name, value in a.trajectory.fields().items():
        _assert_equal(value, b.trajectory.fields()[name], err_msg=f"trajectory.{name}")


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
    old = before.done  # points of the 0.2.0 session: the fields added since read as "not recorded"
    for field in fresh.fields:
        if field in ADDED_IN_V2:
            np.testing.assert_array_equal(resumed[field][~old], fresh[field][~old], err_msg=field)
            fill = ADDED_IN_V2[field]
            assert np.all(resumed[field][old] == fill) if fill == fill else np.all(np.isnan(resumed[field][old]))
        elif field in ("status", "crossed", "steps_done"):
            np.testing.assert_array_equal(resumed[field], fresh[field], err_msg=field)
        else:
            _assert_equal(resumed[field], fresh[field], err_msg=field)
    with h5py.File(path, "r") as f:  # the session added the new datasets
        assert all(name in f for name in ADDED_IN_V2)


def test_cli_inspects_old_stores(stores, capsys):
    for name in ("mgd_complete.h5", "smgd_interrupted.h5", "mgf_interrupted.h5", "sweep_interrupted.h5"):
        assert main(["inspect", str(stores / name)]) == 0
    out = capsys.readouterr().out
    assert "sweep" in out and "interrupted" in out
