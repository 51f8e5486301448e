"""Subprocess helper of tests/test_store.py: a stored run that can be killed at chosen points.

Usage: ``python writer.py SPEC_JSON``, where the spec holds

* ``path``: the store; ``action``: ``"run"`` (a new stored MGD run) or ``"resume"``;
* run parameters: ``gamma``, ``beta``, ``steps``, ``record`` (``{"log": 200}`` ...),
  ``batch_size``, ``seed``, ``chunk_steps`` (small, for many chunks), ``checkpoint_every``;
* ``kill``: optional ``{"point": "<hook point>", "count": N, "signal": "KILL" | "TERM" | "INT"}`` (or a
  list of them): at the N-th time the store passes that point the process sends itself the signal;
* ``idle_thread``: optional bool: start a thread that only sleeps, with no signal blocked (like numba's
  worker threads: the OS may deliver a process-directed signal to it);
* ``sigint_ignored``: optional bool: ignore SIGINT before running (a background job, ``nohup``);
* ``sighup_ignored``: optional bool: ignore SIGHUP before running (``nohup``; otherwise SIGHUP has its default);
* ``pause_at_chunk``: optional N: after N chunks print ``PAUSED`` and sleep (for lock tests);
* ``slow``: optional seconds to sleep after each chunk (gives external killers time).

Prints ``STATUS <name> <steps_done>`` when the run returns.
"""

import json
import os
import signal
import sys
import threading
import time

import numpy as np

import dlnmomentum as dm
import dlnmomentum.store as store
import dlnmomentum.store.writer as store_writer
from dlnmomentum.runs.mgd import prepare_mgd


def problem():
    return dm.sparse_regression(n=8, d=13, s=3, n_test=50, seed=4)


def main():
    spec = json.loads(sys.argv[1])
    counts = {}
    kills = spec.get("kill") or []
    kills = [kills] if isinstance(kills, dict) else kills
    if spec.get("idle_thread"):
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
    # as started from a terminal (Ctrl-C delivered), also when the test suite runs with SIGINT ignored, whose
    # children inherit that; or, asked for, as a background job
    signal.signal(signal.SIGINT, signal.SIG_IGN if spec.get("sigint_ignored") else signal.default_int_handler)
    # SIGHUP too: as from a terminal (nohup passes it on ignored), or ignored, asked for (nohup itself)
    signal.signal(signal.SIGHUP, signal.SIG_IGN if spec.get("sighup_ignored") else signal.SIG_DFL)
    pause = spec.get("pause_at_chunk")
    slow = spec.get("slow", 0.0)

    def hook(point):
        counts[point] = counts.get(point, 0) + 1
        for kill in kills:
            if point == kill["point"] and counts[point] == kill["count"]:
                sys.stdout.flush()
                os.kill(os.getpid(), getattr(signal, "SIG" + kill.get("signal", "KILL")))
                if kill.get("signal", "KILL") == "KILL":
                    time.sleep(60)  # never returns
        if point == "chunk":
            if pause is not None and counts[point] == pause:
                print("PAUSED", flush=True)
                time.sleep(600)
            if slow:
                time.sleep(slow)
            print(f"CHUNK {counts[point]}", flush=True)

    store_writer._TEST_HOOK = hook
    if spec["action"] == "run":
        record = dm.Record(**spec["record"]) if spec.get("record") else None
        run = prepare_mgd(problem(), spec["gamma"], spec["beta"], steps=spec["steps"], record=record,
                          batch_size=spec.get("batch_size"), seed=spec.get("seed", 0))
        if spec.get("chunk_steps"):
            run.chunk_steps = int(spec["chunk_steps"])
        result = store.run_with_store(run, spec["path"], overwrite=spec.get("overwrite", False),
                                      checkpoint_every=spec.get("checkpoint_every", 0.0))
    else:
        result = store.resume(spec["path"], checkpoint_every=spec.get("checkpoint_every", 0.0))
    print(f"STATUS {result.status_name} {result.steps_done} {np.abs(result.theta).sum():.17g}", flush=True)


if __name__ == "__main__":
    main()
