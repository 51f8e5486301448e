r"""The record schedule of the adaptive flows, shared by both drivers (:func:`.flow_rodas_run._rodas_advance` and
:func:`.flow_ndf._ndf_advance`): which record is owed, the row it fills and the step it belongs to.

Records at times (``Record(every=...)``, ``times=``, ``log=``): before each step a call writes every record whose
time ``record_times[record_cursor[0]]`` (sorted) is at most the current point t, in order, into row
``record_cursor[0] - record_offset`` of the call's record block, from the last step's dense output. A record
strictly inside the last step (before t) belongs to it: its step number is the accepted steps before that step;
one at t to the steps done. Records at accepted points (``Record(accepted=True)``): the initial point of a fresh
run, then the point after every accepted step, written after it. When a record is owed and its block has no row
for it, or no row is left for the next step's point, the call returns ``RUNNING`` and the caller gives a new
block (``record_offset`` moves on): a record is never skipped, whatever the block and chunk sizes.
"""

from numba import njit

from .config import LEAF_JIT_OPTIONS

#: :func:`_owed_row`: no record is owed at the current point.
NONE_OWED = -1
#: :func:`_owed_row`: a record is owed and the block has no row for it.
BLOCK_FULL = -2


@njit(**LEAF_JIT_OPTIONS)
def _owed_row(record_times, record_cursor, record_offset, capacity, t):
    """The block row of the next record owed at the current point ``t``, ``NONE_OWED`` or ``BLOCK_FULL``."""
    k = record_cursor[0]
    if k >= record_times.shape[0] or record_times[k] > t:
        return NONE_OWED
    row = k - record_offset
    return BLOCK_FULL if row >= capacity else row


@njit(**LEAF_JIT_OPTIONS)
def _step_of_record(steps_done, h_last, t_record, t):
    """The step number of a record at ``t_record <= t``: a record inside the last step is before it."""
    return steps_done - 1 if (h_last > 0.0 and t_record < t) else steps_done


@njit(**LEAF_JIT_OPTIONS)
def _initial_point_owed(steps_done, record_cursor, record_offset, capacity):
    """``Record(accepted=True)``: whether the initial point of a fresh run is still to write (and has a row)."""
    return steps_done == 0 and record_cursor[0] == 0 and record_offset < capacity


@njit(**LEAF_JIT_OPTIONS)
def _no_row_for_next_step(record_cursor, record_offset, capacity):
    """``Record(accepted=True)``: whether the block is full before a step (its point would have no row)."""
    return record_cursor[0] - record_offset >= capacity
