"""A stop request in the middle of a flow sweep's wave keeps the points of that wave that had ended.

An adaptive (``rodas``) wave can hold minutes of finished runs: they are written to the store and not computed
again on resume; the resumed store equals an uninterrupted sweep's, and every point its single run.
"""

import os
import signal
import time

import numpy as np
from signal_helpers import sigint_default

import dlnmomentum as dm
from dlnmomentum.runs.points import FIELDS
from dlnmomentum.sweeps import flows

SPEC = {"n": 8, "d": 10, "s": 2}
LAMS = [0.05, 0.5]


def _sweep(**kw):
    return dm.sweep(SPEC, lams=LAMS, t_max=1e7, tol=1e-20, scheme="rodas", progress=False, **kw)


def test_a_stop_request_keeps_the_points_of_the_wave_that_had_ended(tmp_path, monkeypatch):
    reference = _sweep()
    assert reference.complete
    monkeypatch.setattr(flows, "threads", lambda: 1)  # the points run one after the other, the first ends first
    run_for = flows.FlowEngine.run_for

    def run_for_second_stops(self, p):
        run = run_for(self, p)
        if p == 1 and not getattr(run, "_stops", False):
            run._stops = True
            run.chunk_steps = 8  # several chunks, so that the stop request is read on the way
            advance = run.advance

            def advance_then_stop(*args):
                code = advance(*args)
                if not getattr(run, "_sent", False):
                    run._sent = True
                    os.kill(os.getpid(), signal.SIGINT)  # to the package's handler (main thread), which notes it
                    time.sleep(0.5)  # (the main thread runs the handler while it waits for this worker)
                return code

            run.advance = advance_then_stop
        return run

    monkeypatch.setattr(flows.FlowEngine, "run_for", run_for_second_stops)
    path = tmp_path / "line.h5"
    with sigint_default():
        first = _sweep(store=str(path), wave_size=2)
    assert first.interrupted
    assert first.done.tolist() == [[True, False]]  # the point that had ended is in the store
    monkeypatch.setattr(flows.FlowEngine, "run_for", run_for)
    resumed = _sweep(store=str(path), resume=True)
    assert resumed.complete and not resumed.interrupted
    for name in FIELDS:
        np.testing.assert_array_equal(np.asarray(resumed.data[name]), np.asarray(reference.data[name]), err_msg=name)
