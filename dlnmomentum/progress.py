"""Progress of long work (runs, sweeps): one rule for when to show it, and how.

``progress`` arguments of the API take:

* ``None`` (default): a tqdm bar when the work is estimated to take longer than :data:`AUTO_SECONDS` and someone
  is watching: stderr is a terminal, or the code runs in Jupyter (tqdm's notebook widget, ``tqdm.auto``);
* ``True`` / ``False``: a bar always / never;
* ``"log"``: a plain line on stderr every :data:`LOG_SECONDS` seconds (and one at the end): for batch jobs,
  ``nohup`` and log files, where a bar's carriage returns would be noise.

A bar or a log follows the tqdm subset the drivers use: ``update(n)`` and ``close()``. This module imports
nothing of the package, so every layer (driver, runs, sweeps, API) uses the same rule.
"""

import sys
import time

#: Work estimated to take longer than this (seconds) shows progress by default, where someone watches.
AUTO_SECONDS = 10.0
#: Seconds between two lines of ``progress="log"``.
LOG_SECONDS = 5.0
#: Rough speeds that turn a work estimate into seconds (one core of a 2020s x86 machine): the flops of a run
#: (its kernels run at about this rate), and the run-steps of a sweep of diagonal networks (d ~ 30).
FLOPS_PER_SECOND = 2e9
RUN_STEPS_PER_SECOND = 1e7
#: The accepted ``progress`` values, for error messages.
ALLOWED = 'None (automatic), True, False or "log"'


def check(progress):
    """``progress`` as given, after refusing anything but :data:`ALLOWED` (``"yes"`` is not True)."""
    if progress is None or progress is True or progress is False or progress == "log":
        return progress
    raise ValueError(f"progress must be {ALLOWED}; got {progress!r}")


def in_notebook():
    """True inside a Jupyter kernel (where stderr is not a terminal but a bar is seen)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # (an IPython too old or half-imported: no notebook)
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def watched():
    """True when someone sees progress as it happens: stderr is a terminal, or a notebook."""
    try:
        tty = sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        tty = False
    return tty or in_notebook()


def resolve(progress, seconds):
    """``"bar"``, ``"log"`` or None for a ``progress`` argument and work estimated to take ``seconds``."""
    progress = check(progress)
    if progress is None:
        return "bar" if seconds > AUTO_SECONDS and watched() else None
    if progress == "log":
        return "log"
    return "bar" if progress else None


def start(how, *, total, desc, unit, initial=0):
    """A bar (``how`` ``"bar"`` or True), a log (``"log"``) or None (None, False) over ``total`` ``unit``s,
    ``initial`` of them done already."""
    if how is None or how is False:
        return None
    if how == "log":
        return LogLines(total, desc, unit, initial)
    if how is not True and how != "bar":
        raise ValueError(f"progress must be {ALLOWED}; got {how!r}")
    from tqdm.auto import tqdm  # in Jupyter: the notebook widget

    return tqdm(total=total, initial=initial, desc=desc, unit=unit, unit_scale=True, dynamic_ncols=True,
                smoothing=0.1)


def _duration(seconds):
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class LogLines:
    """``progress="log"``: ``[dlnm] DESC: N/TOTAL UNITs (P %), T elapsed, about R left`` on stderr every
    :data:`LOG_SECONDS` seconds, and a last line at :meth:`close`. The rate is measured from the first update
    on (the first kernel call of a session compiles), as :class:`~dlnmomentum.sweeps.execute.CompileAwareBar`."""

    def __init__(self, total, desc, unit, initial=0, stream=None, every=None):
        self.total, self.desc, self.unit = total, desc, unit
        self.n = self.initial = initial
        self.stream = stream
        self.every = LOG_SECONDS if every is None else every
        self.start = time.monotonic()
        self.rate_from = None  # (time, n) of the first update
        self.last = self.start

    def update(self, n):
        self.n += n
        now = time.monotonic()
        if self.rate_from is None:
            self.rate_from = (now, self.n)
        if now - self.last >= self.every:
            self.last = now
            self._line(now)

    def close(self):
        self._line(time.monotonic(), final=True)

    def _line(self, now, final=False):
        total = self.total if self.total else None
        share = f" ({100.0 * self.n / total:.0f} %)" if total else ""
        text = f"[dlnm] {self.desc}: {self.n:.4g}/{total:.4g} {self.unit}s{share}" if total else \
            f"[dlnm] {self.desc}: {self.n:.4g} {self.unit}s"
        text += f", {_duration(now - self.start)} elapsed"
        if final:
            text += ", ended"
        elif total and self.rate_from is not None and self.n > self.rate_from[1]:
            rate = (self.n - self.rate_from[1]) / max(now - self.rate_from[0], 1e-9)
            text += f", about {_duration(max(total - self.n, 0) / rate)} left"
        print(text, file=self.stream or sys.stderr, flush=True)
