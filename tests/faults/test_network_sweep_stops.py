"""A stop request stops a network sweep within a chunk, and never makes a complete sweep "interrupted" (issue 23, B5).

Before: ``NetworkLockstep.run_wave_results`` yielded only when a point ended, so the stop flag was read only then: a
Ctrl-C/SIGTERM waited for the whole wave (26 s in the probe; a job manager's grace period can be shorter), and the
sweep, complete by then, returned ``interrupted`` (``dlnm network`` exit 130, "continue with --resume"). The same
held for a diagonal sweep whose stop request came with its last wave.

The signal is sent by the engine wrapper below, on the main thread, once the sweep's handler is installed: Python
runs the handler before the next kernel call, so every run sees the request at the same place.
"""

import os
import signal

import numpy as np
import pytest
from signal_helpers import sigint_default

import dlnmomentum as dm
from dlnmomentum.cli import main
from dlnmomentum.sweeps import lockstep as LS
from dlnmomentum.sweeps import network_lockstep as NL

SPEC = {"generator": "teacher_student", "n": 6, "d": 2, "teacher_width": 2, "student_width": 3, "n_test": 20}
GRID = dict(gammas=[0.01, 0.02], betas=[0.0, 0.5])
CLI_SPEC = ["--n", "6", "--d", "2", "--teacher-width", "2", "--student-width", "3", "--n-test", "20"]
SMALL = dict(n=8, d=13, s=3, n_test=50)


@pytest.fixture
def stop_at_the_first_wave(monkeypatch):
    """SIGINT to this process as the first wave starts (the sweep's handler is installed by then)."""
    sent = []

    def wrap(cls):
        original = cls.run_wave

        def run_wave(self, *args, **kwargs):
            if not sent:
                assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler  # the sweep's own
                sent.append(True)
                os.kill(os.getpid(), signal.SIGINT)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, "run_wave", run_wave)

    with sigint_default():  # also when the suite runs with SIGINT ignored (nohup)
        yield wrap
    assert sent


def test_a_network_sweep_stops_within_a_chunk(tmp_path, stop_at_the_first_wave, monkeypatch):
    stop_at_the_first_wave(NL.NetworkLockstep)
    chunks = []
    kernel = NL.KNS._net_sweep_chunk
    monkeypatch.setattr(NL.KNS, "_net_sweep_chunk", lambda *args: chunks.append(args[-2]) or kernel(*args))
    path = tmp_path / "ts.h5"
    sw = dm.networks_sweep(SPEC, **GRID, steps=3_000_000, threads=1, store=path)  # ~11 s for the whole wave
    assert sw.interrupted and not sw.complete
    # one chunk (~CHUNK_SECONDS of work; the first runs on a guessed speed), not the wave: counted, not timed, so
    # that a loaded machine cannot fail it
    assert len(chunks) == 1 and chunks[0] < 3_000_000, chunks
    stored = dm.open_sweep(path)
    assert not stored.complete and int(stored.done.sum()) == 0  # the running points were dropped, as documented


def test_a_network_sweep_complete_at_the_stop_request_is_not_interrupted(tmp_path, monkeypatch, capsys,
                                                                         stop_at_the_first_wave):
    stop_at_the_first_wave(NL.NetworkLockstep)
    monkeypatch.setattr(NL, "CHUNK_SECONDS", 1e9)  # one chunk runs every point to its end
    path = tmp_path / "ts.h5"
    argv = ["network", "teacher-student", "--gammas", "0.01,0.02", "--betas", "0,0.5", "--steps", "2000",
            "--store", str(path), "--no-progress", *CLI_SPEC]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "interrupted" not in err, err
    assert dm.open_sweep(path).complete


def test_a_diagonal_sweep_complete_at_the_stop_request_is_not_interrupted(tmp_path, stop_at_the_first_wave):
    stop_at_the_first_wave(LS.LockstepEngine)
    problem = dm.sparse_regression(**SMALL, seed=4)
    sw = dm.sweep(problem, gammas=[0.01, 0.02], betas=[0.0, 0.5], steps=200, store=tmp_path / "s.h5")  # one chunk
    assert sw.complete and not sw.interrupted
    fresh = dm.sweep(problem, gammas=[0.01, 0.02], betas=[0.0, 0.5], steps=200)
    assert np.array_equal(sw["test_loss"], fresh["test_loss"])
