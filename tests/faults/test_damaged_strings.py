"""Damaged text: the strings that say what a store means (a run's configuration, the types of ``/final``, a
problem's parameters, a sweep's configuration, a figure's setting and summary).

HDF5 keeps the text of a variable-length string in its global heap, which has no checksum. Before, one flipped
byte of a stored run's configuration (γ = 0.02 read as 0.03) was read as another configuration: ``dlnm inspect``
showed it and ``dlnm resume`` continued the run with it, exit 0, a result stamped with the damaged γ and computed
half with each; a damaged ``/final`` attribute gave ``MGDResult.__init__() missing 1 required positional argument``.
Now such text carries its CRC-32 in a fixed-size attribute of the same object (in its checksummed header), and a
mismatch is a :class:`~dlnmomentum.store.files.StoreCorruptError` naming the file and the attribute.

The damage: one bit of a digit or letter inside the text, found by its bytes in the file.
"""

import h5py
import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum import store as S
from dlnmomentum.cli import main

SMALL = dict(n=8, d=13, s=3, n_test=50)


def flip_in_text(src, dst, needle, at, which=0):
    """Copy ``src`` to ``dst`` with one bit of byte ``at`` of occurrence ``which`` of ``needle`` flipped."""
    data = bytearray(src.read_bytes())
    start = -1
    for _ in range(which + 1):
        start = data.find(needle, start + 1)
        assert start >= 0, f"{needle!r} occurs fewer than {which + 1} times"
    data[start + at] ^= 0x01
    dst.write_bytes(bytes(data))
    return dst


@pytest.fixture(scope="module")
def run_store(tmp_path_factory):
    path = tmp_path_factory.mktemp("run") / "r.h5"
    res = dm.mgd(dm.sparse_regression(**SMALL, seed=1), 0.0213, 0.7, steps=3000, store=str(path),
                 record=dm.Record(every=500))
    return path, res


def test_a_damaged_run_configuration_is_an_error_and_never_resumed(run_store, tmp_path):
    src, _ = run_store
    bad = flip_in_text(src, tmp_path / "bad.h5", b'"gamma": 0.0213', len(b'"gamma": 0.02'))  # 0.0213 -> 0.0203
    with h5py.File(bad, "r") as f:
        assert '"gamma": 0.0203' in f.attrs["config"]  # the damage is in the text, where HDF5 does not look
    before = bad.read_bytes()
    for call in (S.open_store, S.resume):
        with pytest.raises(S.StoreCorruptError, match=f"store {bad}: the attribute 'config' of the file's root is "
                                                      "damaged"):
            call(str(bad))
    assert main(["inspect", str(bad)]) == 2
    assert bad.read_bytes() == before


def test_damaged_final_text_is_computed_again_by_resume(run_store, tmp_path):
    src, res = run_store
    for needle, at in ((b'"status": "int"', 12), (b'"config": "MGDConfig"', 12)):  # /final's types and classes
        bad = flip_in_text(src, tmp_path / "bad.h5", needle, at)
        with pytest.raises(S.StoreCorruptError, match="of /final is damaged"):
            _ = S.open_store(str(bad)).result
        with pytest.warns(RuntimeWarning, match="of /final is damaged .* it is computed again"):
            again = S.resume(str(bad))
        assert np.array_equal(again.theta, res.theta) and again.status == res.status
        assert np.array_equal(S.open_store(str(bad)).result.theta, res.theta)


def test_a_damaged_string_field_of_final_is_an_error(run_store, tmp_path):
    """String fields of the result (the run's config as JSON) are string datasets: guarded too."""
    src, _ = run_store
    with h5py.File(src, "r") as f:
        text = f["final/config"].asstr()[()]
    needle = text[text.index('"beta"'):text.index('"beta"') + 11].encode()  # '"beta": 0.7'
    data = src.read_bytes()
    which = 1 if data.count(needle) > 1 else 0  # (the root's configuration holds it too, written first)
    bad = flip_in_text(src, tmp_path / "bad.h5", needle, len(needle) - 1, which)
    with h5py.File(bad, "r") as f:
        assert f["final/config"].asstr()[()] != text
    with pytest.raises(S.StoreCorruptError, match="the text of dataset /final/config is damaged"):
        _ = S.open_store(str(bad)).result


def test_damaged_problem_parameters_are_an_error(run_store, tmp_path):
    src, _ = run_store
    bad = flip_in_text(src, tmp_path / "bad.h5", b'"generator": "sparse_regression"', 16)
    with pytest.raises(S.StoreCorruptError, match="the attribute 'params' of /problem is damaged"):
        S.resume(str(bad))


def test_a_damaged_sweep_configuration_is_an_error(tmp_path):
    path = tmp_path / "sw.h5"
    dm.sweep(SMALL, gammas=[0.0213, 0.05], betas=[0.0, 0.5], steps=500, store=str(path))
    bad = flip_in_text(path, tmp_path / "bad.h5", b"0.0213", 5)
    for call in (dm.open_sweep, dm.resume_sweep):
        with pytest.raises(S.StoreCorruptError, match="the attribute 'config' of the file's root is damaged"):
            call(str(bad))


def test_a_damaged_network_sweep_configuration_is_an_error(tmp_path):
    path = tmp_path / "ts.h5"
    dm.networks_sweep(dm.teacher_student(n=6, d=2, teacher_width=2, student_width=3, n_test=20, seed=0),
                      gammas=[0.0213], betas=[0.5], steps=200, store=str(path))
    bad = flip_in_text(path, tmp_path / "bad.h5", b"0.0213", 5)
    with pytest.raises(S.StoreCorruptError, match="the attribute 'config' of the file's root is damaged"):
        dm.open_networks_sweep(str(bad))


def test_a_damaged_figure_summary_is_an_error(tmp_path):
    from dlnmomentum.figures import compute_figure, open_figure

    compute_figure("quadratic", "tiny", str(tmp_path), log=lambda line: None)
    path = tmp_path / "quadratic.h5"
    bad = flip_in_text(path, tmp_path / "bad.h5", b'"rule_at_2k": 0.0', 16)  # a number of the summary
    with pytest.raises(S.StoreCorruptError, match="the attribute 'summary' of the file's root is damaged.*dlnm "
                                                  "figure NAME --overwrite"):
        open_figure(str(bad))


def test_stores_without_guards_are_read_as_before(run_store, tmp_path):
    """Stores written before 0.6.0 have no CRC attributes: nothing to check, read as they are."""
    src, res = run_store
    old = tmp_path / "old.h5"
    old.write_bytes(src.read_bytes())
    with h5py.File(old, "r+") as f:
        for obj in (f, f["final"], f["problem"]):
            for name in [k for k in obj.attrs if k.endswith("_crc32")]:
                del obj.attrs[name]
        for ds in f["final"].values():
            if "text_crc32" in ds.attrs:
                del ds.attrs["text_crc32"]
    assert np.array_equal(S.open_store(str(old)).result.theta, res.theta)
