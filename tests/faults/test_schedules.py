"""Record schedules of tens of millions of rows: built as one int64 array, never as Python objects.

Before: ``Record(every=1)`` over 2·10⁷ steps took 27 s and 1.5 GB before the run started (numpy's
hash-based ``unique`` and a Python list of every step in the run's description); the schedule is now 8
bytes per recorded row (a recorded row itself holds at least 4·d doubles), and a stored run writes it
to ``/config_arrays`` from the array.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from store_checks import ROOT

import dlnmomentum as dm
from dlnmomentum.validate import MAX_STEPS

BUILD = """
import json, resource, sys, time
import dlnmomentum as dm
from dlnmomentum.runs.mgd import prepare_mgd
from dlnmomentum.store.format import split_description
problem = dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=4)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
run = prepare_mgd(problem, 0.01, 0.5, steps=20_000_000, record=dm.Record(every=1))
_, arrays = split_description(run.description(arrays=True))
seconds = time.perf_counter() - t0
extra = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024
print(json.dumps({"seconds": seconds, "extra": extra, "rows": len(run.schedule),
                  "stored": int(arrays["/config_arrays/schedule"].nbytes)}))
"""


def test_twenty_million_recorded_steps_cost_their_array_only():
    out = subprocess.run([sys.executable, "-c", BUILD], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=ROOT), cwd=ROOT)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    schedule_bytes = 8 * 20_000_001
    assert got["rows"] == 20_000_001 and got["stored"] == schedule_bytes
    assert got["seconds"] < 5.0, got
    assert got["extra"] < 2.5 * schedule_bytes, got  # the array and a little; not a list of 20M ints


def reference_schedule(record, n, h=None):
    """The documented rule, written out in Python: 0, the steps asked for, and n (an explicit step or time beyond
    n: None, an error)."""
    if record.every is not None and h is not None and record.every / h > 1:
        # a flow: the grid step nearest to each time k·every, every one rounded on its own
        asked = [round(k * record.every / h) for k in range(int(n * h / record.every) + 2)]
    elif record.every is not None:
        stride = record.every / h if h is not None else record.every  # (a flow: every <= h, every grid step)
        stride = max(1, round(stride))
        asked = range(0, n + 1, stride)
    elif record.log is not None:
        asked = [round(float(x)) for x in np.geomspace(1, n, record.log)] if n >= 1 else []
    elif record.steps is not None:
        asked = record.steps
    else:
        asked = [round(t / h) for t in record.times]
    if (record.steps is not None or record.times is not None) and any(s > n for s in asked):
        return None
    return sorted({0, n} | {s for s in asked if 0 <= s <= n})


def test_schedules_follow_the_rule():
    rng = np.random.default_rng(7)
    for _ in range(400):
        n = int(rng.integers(0, 3000))
        kind = int(rng.integers(0, 4))
        h = float(rng.uniform(0.01, 3)) if kind in (1, 3) else None
        record = [dm.Record(every=int(rng.integers(1, 4000))), dm.Record(every=float(rng.uniform(0.01, 40))),
                  dm.Record(steps=rng.integers(0, 4000, int(rng.integers(0, 30)))),
                  dm.Record(times=rng.uniform(0, 200, int(rng.integers(0, 30))))][kind]
        if kind == 2 and rng.random() < 0.3:
            record = dm.Record(log=int(rng.integers(1, 500)))
        expected = reference_schedule(record, n, h)
        if expected is None:
            with pytest.raises(ValueError, match="(steps|times) must be in \\[0, "):
                record.step_schedule(n, h)
            continue
        got = record.step_schedule(n, h)
        assert got.dtype == np.int64 and got.tolist() == expected, (record, n, h)


def test_record_times_beyond_the_end_are_refused():
    """A row that can never be recorded is an error, not dropped: ``times=[5, 1, 20]`` with ``t_max = 10``
    recorded rows at 0, 1, 5, 10 and said nothing."""
    problem = dm.sparse_regression(n=6, d=9, s=2, n_test=10, seed=0)
    for grid in (dict(scheme="rk4", h=0.01), dict(scheme="rodas")):
        with pytest.raises(ValueError, match=r"times must be in \[0, t_max = 10"):
            dm.mgf(problem, 0.5, t_max=10.0, record=dm.Record(times=[5.0, 1.0, 20.0]), **grid)
        res = dm.mgf(problem, 0.5, t_max=10.0, record=dm.Record(times=[5.0, 1.0, 1.0, 10.0]), **grid)
        assert res.trajectory.time.tolist() == [0.0, 1.0, 5.0, 10.0]  # in increasing order, each once
    with pytest.raises(ValueError, match=r"steps must be in \[0, 100\] \(the run's budget of steps\), got 101"):
        dm.mgd(problem, 0.01, 0.5, steps=100, record=dm.Record(steps=[5, 101]))


@pytest.mark.parametrize("every, n, expected", [
    (1e300, 10, [0, 10]), (7, 0, [0]), (3, 10, [0, 3, 6, 9, 10]),
    (2**61, MAX_STEPS, [0, 2**61, 2**62]), (2**62, MAX_STEPS, [0, 2**62]), (1e30, MAX_STEPS, [0, 2**62]),
])
def test_every_at_the_extremes(every, n, expected):
    assert dm.Record(every=every).step_schedule(n).tolist() == expected


def test_flow_every_rows_stay_on_the_multiples_of_every():
    """``Record(every=...)`` on a grid flow records at the grid step nearest to each ``k·every``. Before, every/h
    was rounded once to a stride, and the rows drifted: every=1 with h ≈ 0.3 (stride 3) recorded at t = 0.898·k,
    113 rows to t = 100 with row 100 at t ≈ 90, where the adaptive scheme records at 0, 1, ..., 100."""
    problem = dm.sparse_regression(n=6, d=9, s=2, n_test=10, seed=0)
    grid = dm.gf(problem, t_max=100.0, h=0.3, refine_start=None, record=dm.Record(every=1.0))
    h = grid.h
    assert 0.29 < h < 0.3
    wanted = np.arange(101.0)  # the times asked for (t_max = 100 among them)
    assert len(grid.trajectory) == 101
    assert np.abs(grid.trajectory.time - wanted).max() <= h / 2
    assert np.array_equal(grid.trajectory.step, np.round(wanted / h).astype(np.int64))
    adaptive = dm.gf(problem, t_max=100.0, scheme="rodas", record=dm.Record(every=1.0))
    assert np.array_equal(adaptive.trajectory.time, wanted)
