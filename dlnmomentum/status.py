"""Integer run status and its message table (shared by every run kind)."""

RUNNING = 0
CONVERGED = 1
MAX_STEPS = 2
DIVERGED = 3
INTERRUPTED = 4

STATUS_MESSAGES = {
    RUNNING: "running",
    CONVERGED: "converged: train loss <= tol",
    MAX_STEPS: "max_steps: the step/time budget was used up",
    DIVERGED: "diverged: an iterate became non-finite or overflowed",
    INTERRUPTED: "interrupted: stopped early on request (Ctrl-C / signal)",
}

STATUS_NAMES = {RUNNING: "running", CONVERGED: "converged", MAX_STEPS: "max_steps",
                DIVERGED: "diverged", INTERRUPTED: "interrupted"}


def status_name(status):
    """Short name of an integer status (``'converged'``, ``'diverged'``, ...)."""
    return STATUS_NAMES[int(status)]
