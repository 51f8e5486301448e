"""Recording schedules: which iterates of a run are stored."""

from dataclasses import dataclass

import numpy as np

from .validate import as_float, as_int

#: Names of the recorded fields, in the order of the kernels' buffers.
VECTOR_FIELDS = ("theta", "w_plus", "w_minus", "delta")
SCALAR_FIELDS = ("train_loss", "test_loss")


@dataclass(frozen=True)
class Record:
    """Schedule of recorded iterates; give exactly one of the arguments.

    Parameters
    ----------
    every : int or float, optional
        Record every ``every`` steps (discrete runs; for flows, every ``every``
        time units, rounded to the integration grid).
    log : int, optional
        About ``log`` log-spaced points between the first update and the end
        (duplicates after rounding to whole steps are merged).
    steps : sequence of int, optional
        Explicit step numbers (discrete) / integration-step numbers (flows).
    times : sequence of float, optional
        Explicit times (flows only), rounded to the integration grid.

    The initial state (step 0) and the final step of the budget are always
    included, so every record starts at the initialisation and ends at the
    planned end of the run. Step ``s`` is the state after ``s`` updates.
    """

    every: float | None = None
    log: int | None = None
    steps: tuple | None = None
    times: tuple | None = None

    def __post_init__(self):
        given = [k for k in ("every", "log", "steps", "times") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError(f"Record takes exactly one of every=, log=, steps=, times=; got {given or 'none'}")
        if self.every is not None:
            as_float("every", self.every, low=0.0, low_open=True)
        if self.log is not None:
            object.__setattr__(self, "log", as_int("log", self.log, low=1))
        if self.steps is not None:
            steps = np.asarray(self.steps)
            if steps.ndim != 1 or (steps.size and not np.issubdtype(steps.dtype, np.integer)):
                raise TypeError("steps must be a 1-d sequence of integers")
            if steps.size and steps.min() < 0:
                raise ValueError("steps must be integers >= 0")
            object.__setattr__(self, "steps", tuple(int(s) for s in steps))
        if self.times is not None:
            times = np.asarray(self.times, dtype=float)
            if times.ndim != 1 or not np.all(np.isfinite(times)) or (times.size and times.min() < 0):
                raise ValueError("times must be a 1-d sequence of finite values >= 0")
            object.__setattr__(self, "times", tuple(float(t) for t in times))

    def step_schedule(self, n_steps, h=None):
        """Sorted unique int64 step numbers in ``[0, n_steps]``.

        ``h`` is the integration step of a flow: ``every`` and ``times`` are then
        in time units.
        """
        n_steps = int(n_steps)
        if self.every is not None:
            stride = float(self.every) / h if h is not None else float(self.every)
            if h is None and not float(self.every).is_integer():
                raise ValueError(f"every must be a whole number of steps for a discrete run, got {self.every}")
            stride = max(1, int(round(stride)))
            out = np.arange(0, n_steps + 1, stride, dtype=np.int64)
        elif self.log is not None:
            if n_steps < 1:
                out = np.zeros(0, dtype=np.int64)
            else:
                out = np.unique(np.round(np.geomspace(1, n_steps, self.log)).astype(np.int64))
        elif self.steps is not None:
            out = np.asarray(self.steps, dtype=np.int64)
        else:
            if h is None:
                raise ValueError("times= is for flows; use steps= for discrete runs")
            out = np.round(np.asarray(self.times) / h).astype(np.int64)
        out = out[(out >= 0) & (out <= n_steps)]
        return np.unique(np.concatenate([[0], out, [n_steps]]).astype(np.int64))
