"""Recording schedules: which iterates of a run are stored."""

from dataclasses import dataclass

import numpy as np

from .validate import MAX_STEPS, ParameterValueError, as_float, as_int

#: Names of the recorded fields, in the order of the kernels' buffers.
VECTOR_FIELDS = ("theta", "w_plus", "w_minus", "delta")
SCALAR_FIELDS = ("train_loss", "test_loss")
#: The most log-spaced points ``Record(log=...)`` takes (the schedule is built as arrays of that length).
MAX_LOG = 10**7


@dataclass(frozen=True)
class Record:
    """Schedule of recorded iterates; give exactly one of the arguments.

    Parameters
    ----------
    every : int or float, optional
        Record every ``every`` steps (discrete runs; for flows, every ``every``
        time units: the grid steps nearest to the times ``0, every, 2·every, ...``, each rounded on its own).
    log : int, optional
        About ``log`` log-spaced points between the first update and the end
        (duplicates after rounding to whole steps are merged), 1 to :data:`MAX_LOG`.
    steps : sequence of int, optional
        Explicit step numbers (discrete) / integration-step numbers (flows), within the run's budget. Given
        steps or times are recorded in increasing order, each once; one beyond the end of the run is an
        error (a run stopped early by ``tol`` records those it reached).
    times : sequence of float, optional
        Explicit times (flows only), rounded to the integration grid (an adaptive flow records at the times
        themselves), within ``[0, t_max]``.
    accepted : True, optional
        Every accepted step of an adaptive scheme (``"rodas"``, ``"ndf"``; flows only): the initial point and the point
        after each step, where the solver put it (``step`` its number, ``time`` its time). How many rows
        that is is known only at the end (about a thousand for a flow to train loss 1e-20). A flow with
        ``scheme="auto"`` takes an adaptive scheme for it; a run on a grid records every step with ``every=1``
        (discrete) or ``every=h`` (flows).

    The initial state (step 0) and the final step of the budget are always
    in the schedule, so every record starts at the initialisation and ends at the
    planned end of the run. A run that stops before that end (converged by ``tol``, diverged,
    interrupted) has the rows up to where it stopped; its final state is the result's (``theta``,
    ``u``, ``v``, ``steps_done``). Step ``s`` is the state after ``s`` updates.
    """

    every: float | None = None
    log: int | None = None
    steps: tuple | None = None
    times: tuple | None = None
    accepted: bool | None = None

    def __post_init__(self):
        given = [k for k in ("every", "log", "steps", "times", "accepted") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ValueError("Record takes exactly one of every=, log=, steps=, times=, accepted=True; got "
                             f"{given or 'none'}")
        if self.accepted is not None and self.accepted is not True:
            raise ValueError(f"accepted must be True (record every accepted step of an adaptive scheme) or left out, "
                             f"got {self.accepted!r}")
        if self.every is not None:
            as_float("every", self.every, low=0.0, low_open=True)
        if self.log is not None:
            object.__setattr__(self, "log", as_int("log", self.log, low=1, high=MAX_LOG))
        if self.steps is not None:
            object.__setattr__(self, "steps", _step_numbers(self.steps))
        if self.times is not None:
            object.__setattr__(self, "times", _times(self.times))

    def step_schedule(self, n_steps, h=None):
        """Sorted unique int64 step numbers in ``[0, n_steps]``.

        ``h`` is the integration step of a flow: ``every`` and ``times`` are then
        in time units. Built without hashing or Python objects: 8 bytes per recorded row (a recorded
        row itself holds at least 4·d doubles; a flow's ``every`` takes about three times that while it is
        built), also for tens of millions of rows.
        """
        if self.accepted:
            raise ValueError("Record(accepted=True) records the accepted steps of an adaptive scheme ('rodas', 'ndf'; "
                             "flows); a run on a grid records every step with Record(every=1) (discrete runs) or "
                             "Record(every=h) (flows on a grid)")
        n_steps = int(n_steps)
        if self.every is not None and h is not None and float(self.every) / h > 1.0:
            # A flow: the grid steps nearest to the times 0, every, 2·every, ... (each rounded on its own, as
            # times= is and as the adaptive scheme records). Rounding every/h once to a stride instead made the
            # rows drift off those times by up to h/2 per row: every=1 with h ≈ 0.3 recorded at t = 0.898·k,
            # row 100 at t ≈ 90 instead of 100, and a fixed-grid and an adaptive run gave different rows.
            ratio = float(self.every) / h
            out = np.arange(int(n_steps / ratio) + 2, dtype=np.float64)  # (k·every up to past t_max)
            with np.errstate(over="ignore"):  # (an every beyond t_max: inf, dropped below)
                out *= float(self.every)
                out /= h
            np.round(out, out=out)  # (non-decreasing: every step of the computation is monotone in k)
            end = int(np.searchsorted(out, n_steps, side="right"))
            steps = np.empty(end + 1, dtype=np.int64)
            steps[:end] = out[:end]
            steps[end] = n_steps
            del out
            return _sorted_unique(steps)
        if self.every is not None:
            # (a flow whose every is at most its grid step h records every grid step: stride 1)
            stride = float(self.every) / h if h is not None else float(self.every)
            if h is None and not float(self.every).is_integer():
                raise ParameterValueError(f"every must be a whole number of steps for a discrete run, got {self.every}",
                                          "every")
            # a stride beyond the budget records the two ends (and never overflows int64)
            stride = n_steps + 1 if stride > n_steps else max(1, int(round(stride)))
            # 0, stride, ... (integer products: np.arange's float length is wrong near 2**62), then the end
            off_grid = n_steps % stride != 0
            out = np.arange(n_steps // stride + 1 + off_grid, dtype=np.int64)  # one array: 8 bytes per row
            out *= stride  # (in place; the last entry may wrap around when off the grid ...)
            out[-1] = n_steps if off_grid else out[-1]  # (... and is the end)
            return out
        if self.log is not None:
            if n_steps < 1:
                out = np.zeros(0, dtype=np.int64)
            else:
                # (in float64 a budget above 2**53 rounds, up as often as down: the points are clipped to it in
                # integers, and a rounded end of 2**62 = MAX_STEPS still converts)
                out = np.minimum(np.round(np.geomspace(1, n_steps, self.log)).astype(np.int64), n_steps)
        elif self.steps is not None:
            out = np.asarray(self.steps, dtype=np.int64)
            if out.size and out.max() > n_steps:
                raise ValueError(f"steps must be in [0, {n_steps}] (the run's budget of steps), got {int(out.max())}")
        else:
            if h is None:
                raise ValueError("times= is for flows; use steps= for discrete runs")
            out = np.round(np.asarray(self.times) / h)  # (compared as floats: 1e20 / h wraps around in int64)
            if out.size and out.max() > n_steps:
                raise ValueError(f"times must be in [0, t_max = {n_steps * h:.17g}] (rounded to the grid step h = "
                                 f"{h:.6g}), got {max(self.times)!r}")
            out = out.astype(np.int64)
        return _sorted_unique(np.concatenate([[0], out, [n_steps]]).astype(np.int64))

    def time_schedule(self, t_max):
        """Sorted unique float64 record times in ``[0, t_max]``, for an adaptive flow (no grid).

        ``every``: ``0, every, 2·every, ...`` and ``t_max``; ``log``: about ``log`` log-spaced times from
        ``FIRST_LOG_TIME`` to ``t_max`` (a ``t_max`` at most ``FIRST_LOG_TIME``: over the two decades below it);
        ``times``: as given. ``0`` and ``t_max`` are always
        included. ``steps=`` counts grid steps, which an adaptive run does not have (refused).
        """
        t_max = float(t_max)
        if self.accepted:  # (no times: the rows come from the solver's steps, AdaptiveFlowRun.record_accepted)
            return np.zeros(0, dtype=np.float64)
        if self.steps is not None:
            raise ValueError("Record(steps=...) counts grid steps, and the adaptive schemes ('rodas', 'ndf') have no "
                             "grid: record with every= or times= (time units) or log=, or choose a fixed-step scheme")
        if self.every is not None:
            count = t_max / float(self.every)
            if count > MAX_RECORD_ROWS:
                raise ParameterValueError(f"every must be at least t_max/{MAX_RECORD_ROWS:.0e} = "
                                          f"{t_max / MAX_RECORD_ROWS:.3g} for t_max = {t_max:g}: every = "
                                          f"{self.every!r} asks for {count:.3g} rows", "every", "t_max")
            out = np.arange(int(count) + 1, dtype=np.float64) * float(self.every)
        elif self.log is not None:
            if self.log > MAX_RECORD_ROWS:
                raise ParameterValueError(f"log must be at most {MAX_RECORD_ROWS:.0e}, got {self.log}", "log")
            # (from t_max itself, geomspace gave `log` copies of t_max, some an ulp below it: near-duplicate rows)
            start = FIRST_LOG_TIME if t_max > FIRST_LOG_TIME else t_max / 100.0
            out = np.geomspace(start, t_max, self.log) if t_max > 0.0 else np.zeros(0)
        else:
            out = np.asarray(self.times, dtype=np.float64)
            if out.size and out.max() > t_max:
                raise ValueError(f"times must be in [0, t_max = {t_max!r}], got {float(out.max())!r}")
        out = out[(out >= 0.0) & (out <= t_max)]
        return np.unique(np.concatenate([[0.0], out, [t_max]]))


#: The first time of a ``Record(log=...)`` of an adaptive flow (the escape from a small initialisation
#: takes a few time units).
FIRST_LOG_TIME = 1e-2
#: The most rows an adaptive flow's schedule may hold (8 bytes each, plus the rows themselves).
MAX_RECORD_ROWS = 10**8


def _step_numbers(value):
    """``steps=``: a 1-d sequence of integers in [0, MAX_STEPS], as a tuple of ints."""
    rng = f"[0, {MAX_STEPS}] (2**62)"
    if isinstance(value, (str, bytes)):
        raise TypeError(f"steps must be a 1-d sequence of integers in {rng}, got {type(value).__name__}")
    steps = np.asarray(value)
    if steps.ndim != 1 or (steps.size and steps.dtype.kind not in "iuO"):
        raise TypeError(f"steps must be a 1-d sequence of integers in {rng}, got {steps.dtype} of shape "
                        f"{steps.shape}")
    out = []
    for i, step in enumerate(steps.tolist()):  # Python ints: no wrap-around of uint64 or huge values
        if isinstance(step, bool) or not isinstance(step, int):
            raise TypeError(f"steps must be a 1-d sequence of integers in {rng}, got {step!r} at index {i}")
        if not 0 <= step <= MAX_STEPS:
            raise ValueError(f"steps must be integers in {rng}, got {step} at index {i}")
        out.append(step)
    return tuple(out)


def _times(value):
    """``times=``: a 1-d sequence of finite times >= 0, as a tuple of floats."""
    what = "times must be a 1-d sequence of finite real numbers in [0, inf)"
    if isinstance(value, (str, bytes)):
        raise TypeError(f"{what}, got {type(value).__name__}")
    try:
        raw = np.asarray(value)
        if raw.dtype.kind not in "iuf":
            raise TypeError
        times = raw.astype(float)
    except (TypeError, ValueError):
        raise TypeError(f"{what}, got {value!r:.80}") from None
    if times.ndim != 1:
        raise ValueError(f"{what}, got shape {times.shape}")
    bad = ~(np.isfinite(times) & (times >= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{what}, got {float(times[i])!r} at index {i}")
    return tuple(float(t) for t in times)


def _sorted_unique(steps):
    """``np.unique`` of an int64 array by sorting (numpy's hash-based unique is slow for long arrays)."""
    steps = np.sort(steps)
    keep = np.ones(steps.shape, dtype=bool)
    keep[1:] = steps[1:] != steps[:-1]
    return steps[keep]
