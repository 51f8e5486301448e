"""The chunked driver shared by every run kind.

A *run* object owns its state arrays and advances them with a kernel; the
driver calls it chunk by chunk, so that progress bars, recording, stores,
checkpoints and Ctrl-C/SIGTERM/SIGHUP are handled between chunks, never per step.
Because a run's whole state lives in its arrays, the chunk size never changes
a result bit.

Run protocol (duck-typed)
-------------------------
``total`` (planned steps), ``done`` (steps done), ``schedule`` (int64 record
steps), ``cursor`` (int64[1] index into the schedule), ``new_block(rows)``
(a dict of record buffers), ``advance(n_steps, block, offset)`` → kernel
status (a :class:`~dlnmomentum.Status` code: running, converged, diverged, or stalled for the adaptive flow),
``chunk_steps`` (a good chunk length), ``finish(status)`` → result, optionally ``total_is_planned`` (False
when ``total`` is only a budget: the progress bar then shows no total), and ``block_rows(n_steps)``
(the rows of the record block for a chunk of ``n_steps``; :class:`RunStateMixin` has the rule of
runs whose schedule lists step numbers; an adaptive run, whose schedule lists times, gives a bound
and its kernel returns early when the block is full).
"""

import contextlib
import signal
import threading
import time

import numpy as np

from . import status as st
from .progress import start as start_progress


class RunStateMixin:
    """Checkpoint restore shared by run objects: ``state_arrays()`` names every array of the state."""

    def load_state_arrays(self, arrays):
        """Copy a checkpoint's arrays into this run's state, in place (shapes must match)."""
        for name, target in self.state_arrays().items():
            src = np.asarray(arrays[name])
            if src.shape != target.shape:
                raise ValueError(f"checkpoint array {name!r} has shape {src.shape}, expected {target.shape}")
            target[...] = src

    def has_records(self):
        """Whether the run records rows (a store then has observables; the result a trajectory)."""
        return len(self.schedule) > 0

    def block_rows(self, n_steps):
        """Rows of the record block of a chunk of ``n_steps``: the schedule's steps up to ``done + n_steps``."""
        end = int(self.schedule.searchsorted(self.done + n_steps, side="right"))
        return max(end - int(self.cursor[0]), 0)


#: The signals a run turns into a stop request (SIGINT: Ctrl-C; SIGTERM: a job manager or ``kill``; SIGHUP: the
#: terminal was closed, which would otherwise kill the process between checkpoints). Each stays ignored
#: where the process inherited it ignored (``nohup`` ignores SIGHUP).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


def _in_main_thread():
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def deferred_signals(signums=STOP_SIGNALS):
    """Turn the given signals into a flag checked between chunks.

    A signal the process inherited as ignored (``SIG_IGN``: a background job of a shell, ``nohup``,
    ``trap '' INT``) stays ignored: whoever started the process asked not to be stopped by it. A
    second SIGINT means "now": it raises ``KeyboardInterrupt`` at once, except inside
    :func:`signals_held` (a write that must not be torn), where it waits for the end of the block.
    Only the main thread can install handlers; elsewhere the flag never sets and signals behave as
    usual.
    """
    flag = {"signum": None}
    if not _in_main_thread():
        yield flag
        return
    previous = {}

    def handler(signum, frame):
        if flag["signum"] is not None and signum == signal.SIGINT:
            # A second Ctrl-C means "now": restore and raise at once.
            raise KeyboardInterrupt
        flag["signum"] = signum

    for s in signums:
        if signal.getsignal(s) is signal.SIG_IGN:
            continue
        previous[s] = signal.signal(s, handler)
    try:
        yield flag
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _deliver(signum, handler):
    """Give a signal noted by :func:`signals_held` to the handler that was there before."""
    if callable(handler):
        handler(signum, None)
    elif handler is not signal.SIG_IGN:  # SIG_DFL, or a handler not installed from Python
        signal.raise_signal(signum)


@contextlib.contextmanager
def signals_held(signums=STOP_SIGNALS):
    """Hold the stop signals (:data:`STOP_SIGNALS`: SIGINT, SIGTERM, SIGHUP) back until the block ends, around work
    that must not be torn.

    Python runs signal handlers in the main thread whichever thread the OS delivers a signal to
    (numba's worker threads, a store's writer thread), so blocking the signals in the main thread
    alone does not keep a ``KeyboardInterrupt`` out of the block: the handlers are replaced by one
    that notes the signal, and the noted signals go to the previous handlers, in order, when the
    block ends. The signals are also blocked in the main thread, so that C code in the block (HDF5
    writes) sees no interrupted system calls. Elsewhere than in the main thread nothing is needed:
    handlers never run there.
    """
    if not _in_main_thread():
        yield
        return
    noted = []
    previous = {}
    mask = None
    try:
        # (inside the try: a pending signal runs its handler when signal.signal is called, and a second Ctrl-C's
        # KeyboardInterrupt there must not leave a noting handler installed for good)
        for s in signums:
            handler = signal.getsignal(s)
            if handler is signal.SIG_IGN:
                continue
            previous[s] = handler
            signal.signal(s, lambda signum, frame: noted.append(signum))
        if hasattr(signal, "pthread_sigmask"):
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, set(signums))
        yield
    finally:
        if mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # pending ones reach the noting handler here
        interrupt = None
        for s, handler in previous.items():
            while True:  # every handler restored, even when a restored one raises for a pending signal meanwhile
                try:
                    signal.signal(s, handler)
                    break
                except KeyboardInterrupt as exc:
                    interrupt = exc
        for s in noted:
            _deliver(s, previous[s])
        if interrupt is not None:
            raise interrupt


def _progress_bar(progress, total, initial, desc):
    return start_progress(progress, total=total, initial=initial, desc=desc, unit="step")


def drive(run, *, progress=False, desc="run", sink=None, collect=True):
    """Advance ``run`` to the end of its budget (or convergence/divergence).

    Parameters
    ----------
    run : run object (see module docstring)
    progress : bool or "log"
        Show a tqdm progress bar (True, ``"bar"``) or log lines (``"log"``): :func:`dlnmomentum.progress.start`.
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
    # an adaptive run's total is a budget of steps (1e8), not the steps it will take: a bar without a total, no ETA
    bar = _progress_bar(progress, run.total if getattr(run, "total_is_planned", True) else None, run.done, desc)
    status = st.RUNNING
    # With a sink, a chunk and its recording are one step that a signal cannot cut in two (the sink
    # would miss rows the run has recorded); signals noted meanwhile take effect between chunks.
    atomic = signals_held if sink is not None else contextlib.nullcontext
    with deferred_signals() as flag:
        try:
            while status == st.RUNNING:
                with atomic():
                    status = _one_chunk(run, flag, bar, sink, blocks if collect else None)
                if status == st.RUNNING and flag["signum"] is not None:
                    # a signal held during the chunk reached the flag only when the block ended, after the chunk
                    # looked at it: stop here, not after one more chunk
                    status = st.INTERRUPTED
        except KeyboardInterrupt:
            if status == st.RUNNING:
                status = st.INTERRUPTED
        finally:
            # A second Ctrl-C means "now", surfacing as KeyboardInterrupt once the store is closed. Its interrupt
            # can land after the loop and before this block holds the signals (the store was then left as
            # crashed, unclosed), or at the block's end: either way the close is done (again: sink.close does
            # nothing twice), then the interrupt goes on.
            interrupt = None
            while True:
                try:
                    with atomic():
                        if bar is not None:
                            bar.close()
                            bar = None
                        if sink is not None:
                            sink.close(run, status)
                    break
                except KeyboardInterrupt as exc:
                    interrupt = exc
                    if status == st.RUNNING:
                        status = st.INTERRUPTED
            if interrupt is not None:
                raise interrupt
    run.interrupt_signal = flag["signum"]
    return status, blocks


def chunk_length(run):
    """The steps of ``run``'s next chunk: its ``chunk_steps``, cut at the end of its budget ``total`` (also the
    chunks of a sweep's adaptive points, :func:`dlnmomentum.sweeps.flows._adaptive_batch`: each point its single
    run)."""
    return min(run.total - run.done, run.chunk_steps)


def _one_chunk(run, flag, bar, sink, blocks):
    """Advance ``run`` by one chunk, hand its rows to ``sink``/``blocks``; the status after it."""
    n = chunk_length(run)
    start = int(run.cursor[0])
    block = run.new_block(run.block_rows(n))
    before = run.done
    code = run.advance(n, block, start)
    rows = int(run.cursor[0]) - start
    if rows:
        if blocks is not None:
            blocks.append((block, rows))
        if sink is not None:
            sink.append(block, rows)
    if bar is not None:
        bar.update(run.done - before)
    status = st.RUNNING
    if code != st.RUNNING:  # the kernel stopped the run: converged or diverged
        status = st.Status(code)
    elif run.done >= run.total:
        status = st.MAX_STEPS
    elif flag["signum"] is not None:
        status = st.INTERRUPTED
    if sink is not None:
        sink.chunk_done(run, status)
    return status


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
