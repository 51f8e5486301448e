"""Sending SIGINT to the test process, also when the suite runs with SIGINT ignored.

A shell's background job, ``nohup`` or ``trap '' INT`` start the process with SIGINT ignored, and the
package respects that (it never installs its handler over ``SIG_IGN``). A test that means to interrupt
a run therefore first gives SIGINT Python's default handler, then sends the signal once the code under
test has replaced that handler with its own, and finally puts back whatever was there before.
"""

import contextlib
import os
import signal
import threading


@contextlib.contextmanager
def sigint_default():
    """SIGINT with Python's default handler inside the block; the handler found before is restored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def sigint_once_handled(delay=0.0):
    """One SIGINT to this process ``delay`` seconds after the code in the block installed its handler.

    Inside :func:`sigint_default`; yields a dict whose ``sent`` says whether the signal went out.
    """
    done = threading.Event()
    state = {"sent": False}

    def interrupt_when_handled():
        while not done.is_set():
            if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
                if delay:
                    done.wait(delay)
                state["sent"] = True
                os.kill(os.getpid(), signal.SIGINT)
                return
            done.wait(0.005)

    with sigint_default():
        thread = threading.Thread(target=interrupt_when_handled, daemon=True)
        thread.start()
        try:
            yield state
        finally:
            done.set()
            thread.join()
