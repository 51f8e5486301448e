"""The chunked driver shared by every run kind.

A *run* object owns its state arrays and advances them with a kernel; the
driver calls it chunk by chunk, so that progress bars, recording, stores,
checkpoints and Ctrl-C/SIGTERM are handled between chunks, never per step.
Because a run's whole state lives in its arrays, the chunk size never changes
a result bit.

Run protocol (duck-typed)
-------------------------
``total`` (planned steps), ``done`` (steps done), ``schedule`` (int64 record
steps), ``cursor`` (int64[1] index into the schedule), ``new_block(rows)``
(a dict of record buffers), ``advance(n_steps, block, offset)`` → kernel
status (a :class:`~dlnmomentum.Status` code: running, converged or diverged),
``chunk_steps`` (a good chunk length), ``finish(status)`` → result.
"""

import contextlib
import signal
import threading
import time

import numpy as np

from . import status as st


class RunStateMixin:
    """Checkpoint restore shared by run objects: ``state_arrays()`` names every array of the state."""

    def load_state_arrays(self, arrays):
        """Copy a checkpoint's arrays into this run's state, in place (shapes must match)."""
        for name, target in self.state_arrays().items():
            src = np.asarray(arrays[name])
            if src.shape != target.shape:
                raise ValueError(f"checkpoint array {name!r} has shape {src.shape}, expected {target.shape}")
            target[...] = src


@contextlib.contextmanager
def deferred_signals(signums=(signal.SIGINT, signal.SIGTERM)):
    """Turn the given signals into a flag checked between chunks.

    Only the main thread can install handlers; elsewhere the flag never sets
    and signals behave as usual.
    """
    flag = {"signum": None}
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = {}

    def handler(signum, frame):
        if flag["signum"] is not None and signum == signal.SIGINT:
            # A second Ctrl-C means "now": restore and raise at once.
            raise KeyboardInterrupt
        flag["signum"] = signum

    for s in signums:
        previous[s] = signal.signal(s, handler)
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _progress_bar(progress, total, initial, desc):
    if not progress:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, unit="step", unit_scale=True, dynamic_ncols=True)


def drive(run, *, progress=False, desc="run", sink=None, collect=True):
    """Advance ``run`` to the end of its budget (or convergence/divergence).

    Parameters
    ----------
    run : run object (see module docstring)
    progress : bool
        Show a tqdm progress bar.
    sink : object, optional
        Receives ``sink.append(block, rows)`` after each chunk with recorded
        rows, ``sink.chunk_done(run)`` after every chunk (checkpoints) and
        ``sink.close(run, status)`` at the end, also on interruption.
    collect : bool
        Keep the recorded rows in memory and return them.

    Returns
    -------
    status : int
        A public status code (:mod:`dlnmomentum.status`).
    blocks : list of (block, rows)
        The recorded blocks, when ``collect``.
    """
    blocks = []
    bar = _progress_bar(progress, run.total, run.done, desc)
    status = st.RUNNING
    with deferred_signals() as flag:
        try:
            while True:
                remaining = run.total - run.done
                n = min(remaining, run.chunk_steps)
                start = int(run.cursor[0])
                end = int(np.searchsorted(run.schedule, run.done + n, side="right"))
                block = run.new_block(max(end - start, 0))
                before = run.done
                code = run.advance(n, block, start)
                rows = int(run.cursor[0]) - start
                if rows:
                    if collect:
                        blocks.append((block, rows))
                    if sink is not None:
                        sink.append(block, rows)
                if bar is not None:
                    bar.update(run.done - before)
                if code != st.RUNNING:  # the kernel stopped the run: converged or diverged
                    status = st.Status(code)
                elif run.done >= run.total:
                    status = st.MAX_STEPS
                elif flag["signum"] is not None:
                    status = st.INTERRUPTED
                if sink is not None:
                    sink.chunk_done(run, status)
                if status != st.RUNNING:
                    break
        except KeyboardInterrupt:
            status = st.INTERRUPTED
        finally:
            if bar is not None:
                bar.close()
            if sink is not None:
                sink.close(run, status)
    run.interrupt_signal = flag["signum"]
    return status, blocks


def chunk_steps_for(cost_per_step, target_flops=5e7, largest=1 << 16):
    """Chunk length so that one chunk is ~``target_flops`` of work (≈ 50 ms)."""
    return int(min(largest, max(16, target_flops // max(cost_per_step, 1.0))))


class Stopwatch:
    """Wall-clock seconds since construction (for checkpoint cadence)."""

    def __init__(self):
        self.t0 = time.monotonic()

    def elapsed(self):
        return time.monotonic() - self.t0

    def reset(self):
        self.t0 = time.monotonic()
