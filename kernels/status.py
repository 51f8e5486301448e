"""The one table of run status codes, shared by the kernels and the Python layer.

Kernels return these plain integers (Numba sees module-level ``int`` globals as
compile-time constants); :class:`dlnmomentum.status.Status` is the ``IntEnum`` built
from :data:`TABLE`, and stores and sweep files hold the same integers.
"""

RUNNING = 0
CONVERGED = 1
MAX_STEPS = 2
DIVERGED = 3
INTERRUPTED = 4
STALLED = 5

#: ``(code, name, message)`` of every status, in code order.
TABLE = (
    (RUNNING, "running", "running"),
    (CONVERGED, "converged", "converged: train loss <= tol"),
    (MAX_STEPS, "max_steps", "max_steps: the step/time budget was used up"),
    (DIVERGED, "diverged", "diverged: an iterate became non-finite or overflowed"),
    (INTERRUPTED, "interrupted", "interrupted: stopped early on request (Ctrl-C / signal)"),
    (STALLED, "stalled", "stalled: the train loss stayed at float64's rounding floor, above tol (tol cannot be "
                         "reached)"),
)
