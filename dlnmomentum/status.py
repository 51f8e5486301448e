"""Run status: one ``IntEnum`` built on the kernels' status table (:mod:`dlnmomentum.kernels.status`).

Every layer uses it: kernels return its integer codes, the driver maps them to members,
results, stores and sweep files hold the integers, and the command line turns them into
exit codes (:func:`dlnmomentum.cli.common.exit_code`).
"""

import enum

from .kernels.status import TABLE

Status = enum.IntEnum("Status", [(name.upper(), code) for code, name, _ in TABLE], module=__name__)
Status.__doc__ = "Status of a run: " + ", ".join(f"{code} {name}" for code, name, _ in TABLE) + "."

_MESSAGES = {code: message for code, _, message in TABLE}
Status.message = property(lambda self: _MESSAGES[int(self)], doc="One-line explanation of the status.")
Status.label = property(lambda self: self.name.lower(), doc="Short name: 'converged', 'diverged', ...")

RUNNING = Status.RUNNING
CONVERGED = Status.CONVERGED
MAX_STEPS = Status.MAX_STEPS
DIVERGED = Status.DIVERGED
INTERRUPTED = Status.INTERRUPTED
STALLED = Status.STALLED

#: Statuses that end a run for good (a store holding one is complete).
TERMINAL = (CONVERGED, MAX_STEPS, DIVERGED, STALLED)

#: code -> message (kept for code written against 0.2.0: ``dm.STATUS_MESSAGES``).
STATUS_MESSAGES = {s: s.message for s in Status}
#: code -> short name.
STATUS_NAMES = {s: s.label for s in Status}


def status_name(status):
    """Short name of a status code (``'converged'``, ``'diverged'``, ...)."""
    return Status(int(status)).label
