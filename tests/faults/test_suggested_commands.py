"""The commands that messages suggest run as they read when copied, whatever the path (probe of 2026-11-27).

Before: ``dlnm resume {path}`` and ``dlnmomentum.resume('{path}')`` were written with the path as it is: a store in
``my runs/`` gave a command of two paths, one named ``it's.h5`` an unbalanced quote (in the shell and in Python).
"""

import ast
import os
import re
import shlex
import subprocess
import sys
import time

import pytest

import dlnmomentum as dm
from dlnmomentum.store.errors import command
from dlnmomentum.store.read import inspect_lines

SMALL = dict(n=8, d=13, s=3, n_test=50)


@pytest.fixture
def awkward(tmp_path):
    """A directory whose name a shell splits and quotes: ``my runs/it's $HOME (1)``."""
    path = tmp_path / "my runs" / "it's $HOME (1)"
    path.mkdir(parents=True)
    return path


def _check_commands(message, path):
    """Every `dlnm ...` command in ``message`` has ``path`` as one shell word; every ``dlnmomentum.f('...')`` call has
    it as its Python string argument. Returns how many were checked."""
    path = str(path)
    shell = re.findall(r"`(dlnm [^`]*)`", message)
    for cmd in shell:
        assert path in shlex.split(cmd), (cmd, message)
    calls = re.findall(r"dlnmomentum(?:\.\w+)+\(((?:'[^']*'|\"[^\"]*\"|[^)])*)\)", message)
    for arg in calls:
        assert ast.literal_eval(arg) == path, (arg, message)
    return len(shell) + len(calls)


def test_the_command_builder_quotes_each_word():
    for path in ("/a b/c.h5", "it's.h5", 'say "hi".h5', "$HOME.h5", "plain.h5"):
        assert shlex.split(command("resume", path)) == ["dlnm", "resume", path]
    assert command("network", "ARCHITECTURE", "--store", "x.h5", "--resume") == \
        "dlnm network ARCHITECTURE --store x.h5 --resume"  # (placeholders and plain paths as they were)


def test_messages_about_a_run_store_suggest_commands_that_run(awkward):
    path = awkward / "run.h5"
    dm.mgd(dm.sparse_regression(**SMALL, seed=0), 0.01, 0.5, steps=2000, store=str(path))
    checked = 0
    with pytest.raises(dm.StoreError) as info:  # read as a sweep: names the reader of run stores
        dm.open_sweep(str(path))
    checked += _check_commands(str(info.value), path)
    with pytest.raises(dm.StoreError) as info:  # an existing store
        dm.mgd(dm.sparse_regression(**SMALL, seed=0), 0.01, 0.5, steps=10, store=str(path))
    checked += _check_commands(str(info.value), path)

    data = open(path, "rb").read()
    cut = awkward / "cut.h5"
    cut.write_bytes(data[: len(data) // 2])  # cut short: "`dlnm resume PATH` extends it"
    with pytest.raises(dm.StoreError) as info:
        dm.open_store(str(cut))
    assert "truncated" in str(info.value)
    checked += _check_commands(str(info.value).replace(str(path), str(cut)), cut)

    code = ("import h5py, os, sys\nf = h5py.File(sys.argv[1], 'r+')\nf.attrs['x'] = 1\nf.flush()\n"
            "os.kill(os.getpid(), 9)\n")  # a writer killed with the file open: "left open", resume repairs it
    subprocess.run([sys.executable, "-c", code, str(path)], timeout=60)
    with pytest.raises(dm.StoreError) as info:
        dm.open_store(str(path))
    assert "left open" in str(info.value)
    checked += _check_commands(str(info.value), path)
    assert checked >= 8  # (the messages above suggest commands at all)


def test_inspect_of_a_crashed_run_store_suggests_a_command_that_runs(awkward):
    path = awkward / "run.h5"
    code = ("import sys\nimport dlnmomentum as dm\n"
            "dm.mgd(dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=0), 0.01, 0.5, steps=10**9, "
            "store=sys.argv[1], checkpoint_every=0.0, progress=False)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(path)])
    try:  # killed once it has written a checkpoint: a crashed store
        deadline = time.monotonic() + 120
        while not os.path.exists(f"{path}.ckpt") and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        child.kill()
        child.wait()
    lines = "\n".join(inspect_lines(str(path)))
    assert "crashed" in lines and "dlnm resume" in lines, lines
    assert _check_commands(lines, path) >= 1
