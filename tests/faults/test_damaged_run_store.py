"""Damaged HDF5 metadata of a finished run store: the reader's advice agrees with what resume then does (probe of
2026-11-27).

Before: damage to the structure of ``/final`` (a dataset's object header) was read as "the damage is in the file's
HDF5 metadata ..., which resuming cannot repair: restore the file from a copy ...; `dlnm resume PATH` computes the
run again" (both in one ``dlnm inspect`` line), and ``dm.resume`` then repaired it: it writes ``/final`` anew.
The damage, as in test_damaged_metadata.py: one byte flipped just after each metadata block's signature.
"""

import dataclasses
import re

import numpy as np
import pytest

import dlnmomentum as dm
from dlnmomentum.store.files import StoreError

SMALL = dict(n=8, d=13, s=3, n_test=50)
#: HDF5 metadata signatures (as test_damaged_metadata.py): object headers and continuations, B-trees, heaps, arrays.
SIGNATURES = (b"OHDR", b"OCHK", b"BTHD", b"BTLF", b"FRHP", b"FHDB", b"FHIB", b"FAHD", b"FADB", b"EAHD", b"EADB")


def metadata_offsets(data):
    return [(m.group().decode(), m.start()) for sig in SIGNATURES for m in re.finditer(re.escape(sig), data)]


def damaged_copy(src, offset, dst):
    data = bytearray(src.read_bytes())
    data[offset + 6] ^= 0xFF  # inside the block, past its signature and version: its checksum fails
    dst.write_bytes(bytes(data))
    return dst


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    path = tmp_path_factory.mktemp("run") / "run.h5"
    dm.mgd(dm.sparse_regression(**SMALL, seed=0), 0.01, 0.5, steps=2000, store=str(path))
    return path


def _read(path):
    """None when the store and its result read, else the error message (a StoreError naming the file)."""
    try:
        dm.open_store(str(path)).result  # noqa: B018 (read for its errors)
    except StoreError as exc:
        assert str(path) in str(exc), exc
        return str(exc)
    return None


def _fields(result):
    return {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
            if isinstance(getattr(result, f.name), (int, float, np.ndarray))}


@pytest.mark.filterwarnings("ignore:.*it is computed again:RuntimeWarning")
def test_every_damaged_metadata_block_is_advised_as_resume_then_does(finished, tmp_path):
    reference = _fields(dm.mgd(dm.sparse_regression(**SMALL, seed=0), 0.01, 0.5, steps=2000))  # (no store)
    offsets = metadata_offsets(finished.read_bytes())
    assert len(offsets) > 20, offsets
    said = {"resume": 0, "cannot": 0}
    for name, offset in offsets:
        path = damaged_copy(finished, offset, tmp_path / f"{name}{offset}.h5")
        message = _read(path)
        if message is None:
            continue  # (a block the reader does not read)
        cannot = "cannot repair" in message
        advised = "dlnm resume" in message
        assert cannot != advised, (name, offset, message)  # one piece of advice, not both, not none
        try:
            resumed = dm.resume(str(path), progress=False)
        except StoreError as exc:
            assert cannot, (name, offset, message, str(exc))  # advised to resume: it must work
            said["cannot"] += 1
            continue
        assert advised, (name, offset, message)  # said resume cannot repair it: then it must not
        said["resume"] += 1
        for key, value in reference.items():  # computed again: the uninterrupted run's result
            assert np.array_equal(_fields(resumed)[key], value, equal_nan=True), (name, offset, key)
        assert _read(path) is None
    assert said["resume"] > 5 and said["cannot"] > 5, said
