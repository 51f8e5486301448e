"""Damaged HDF5 metadata (object headers, chunk indexes, heaps, B-trees) of sweep and network sweep stores
(issue 23 B10).

Before: raw ``KeyError``/``AttributeError``/``OSError`` without the file's name (the CLI printed a traceback,
exit 1); the readers advised ``--resume`` where resume cannot repair (it rewrites chunks of numbers, never
the file's structure), and the failed resume said "free the space" and "0 points done" of a complete sweep.
Now every such file gives a :class:`~dlnmomentum.store.files.StoreError` naming it; advice to resume is given
only where resuming then works (damaged chunks of numbers: tests/faults/test_damaged_chunks.py).

The damage: one byte flipped just after each metadata block's signature (a checksummed part in files of the
newest superblock), for every block of the kinds below found in the file.
"""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
from store_checks import ROOT, TIMEOUT

import dlnmomentum as dm
from dlnmomentum.store.files import StoreError

ENV = dict(os.environ, PYTHONPATH=ROOT)
#: HDF5 metadata signatures: object header (and its continuation), v2 B-tree header and leaf, fractal heap
#: header, direct and indirect blocks, fixed and extensible array headers and data blocks (chunk indexes).
SIGNATURES = (b"OHDR", b"OCHK", b"BTHD", b"BTLF", b"FRHP", b"FHDB", b"FHIB", b"FAHD", b"FADB", b"EAHD", b"EADB")


def metadata_offsets(data):
    return [(m.group().decode(), m.start()) for sig in SIGNATURES for m in re.finditer(re.escape(sig), data)]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stores")
    sweep, network = folder / "sw.h5", folder / "ts.h5"
    dm.sweep({"n": 8, "d": 13, "s": 3, "n_test": 50}, gammas=[0.01, 0.05], betas=[0.0, 0.5], steps=2000,
             store=str(sweep))
    dm.networks_sweep(dm.teacher_student(n_test=50, seed=0), gammas=[0.05, 0.1], betas=[0.0, 0.5], steps=2000,
                      store=str(network))
    return {"sweep": (sweep, dm.open_sweep, dm.resume_sweep),
            "network": (network, dm.open_networks_sweep, dm.resume_networks_sweep)}


def damaged_copy(src, offset, dst):
    data = bytearray(src.read_bytes())
    data[offset + 6] ^= 0xFF  # inside the block, past its signature and version: its checksum fails
    dst.write_bytes(bytes(data))
    return dst


def _outcome(call, path):
    """None when ``call(path)`` works, else the error message; anything but a StoreError fails the test."""
    try:
        call(str(path))
    except StoreError as exc:
        assert str(path) in str(exc), exc
        return str(exc)
    return None


@pytest.mark.parametrize("kind", ["sweep", "network"])
def test_every_damaged_metadata_block_is_a_named_error_and_resume_is_advised_only_where_it_works(
        stores, tmp_path, kind):
    src, read, resume = stores[kind]
    original = read(str(src))
    offsets = metadata_offsets(src.read_bytes())
    assert len(offsets) > 20, offsets  # the file has its metadata where this test looks for it
    errors = 0
    for name, offset in offsets:
        path = damaged_copy(src, offset, tmp_path / f"{name}{offset}.h5")
        message = _outcome(read, path)
        if message is None:
            continue  # (the damaged block is not read by the reader: an unused free-space or heap block)
        errors += 1
        resumed = _outcome(resume, path)
        if "--resume" in message or "resume_" in message:  # advised: then it must work, bit for bit
            assert resumed is None, (name, offset, message, resumed)
            again = read(str(path))
            for field in ("status", "train_loss", "test_loss"):
                assert np.array_equal(again[field], original[field], equal_nan=True), (name, offset, field)
        elif resumed is not None:  # not advised, and resume says why not: no "free the space", no "0 points"
            assert "free the space" not in resumed and "0 points" not in resumed, (name, offset, resumed)
    assert errors > 10, errors


@pytest.mark.parametrize("kind, signature, command", [
    ("sweep", b"OHDR", ["sweep", "--resume", "--no-progress", "--store"]),
    ("network", b"OHDR", ["inspect"]),
    ("network", b"OHDR", ["network", "teacher-student", "--resume", "--no-progress", "--store"]),
    ("sweep", b"FAHD", ["sweep", "--resume", "--no-progress", "--store"])])
def test_the_command_line_exits_2_naming_the_file(stores, tmp_path, kind, signature, command):
    src = stores[kind][0]
    data = src.read_bytes()
    offset = data.index(signature)  # the root group's header; the first dataset's chunk index
    path = damaged_copy(src, offset, tmp_path / "x.h5")
    out = subprocess.run([sys.executable, "-m", "dlnmomentum", *command, str(path)], capture_output=True,
                         text=True, timeout=TIMEOUT, env=ENV, cwd=ROOT)
    assert out.returncode == 2, out.stderr
    assert "Traceback" not in out.stderr and str(path) in out.stderr, out.stderr
    assert "free the space" not in out.stderr and "cannot repair" in out.stderr, out.stderr
