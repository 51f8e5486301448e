"""The command line's stored runs: a result without its trajectory, the recorded rows left in the store.

:func:`rows_left_in_store` is read by the store writer (:mod:`.writer`) and :func:`~dlnmomentum.store.resume`; the
command line (``dlnm run/flow/network/resume --store``) runs its stored runs inside it, since it prints no rows of
them. The API's stored runs return their whole trajectory, as a run in memory does.
"""

import contextlib
import contextvars
import dataclasses

from .read import _trajectory_field

#: Set inside :func:`rows_left_in_store`: the dict that block's stored runs tell their path and row count.
_ROWS_LEFT = contextvars.ContextVar("dlnm_rows_left_in_store", default=None)


@contextlib.contextmanager
def rows_left_in_store():
    """Within this block, the result of a stored run (:func:`run_with_store`, :func:`~dlnmomentum.store.resume`) has
    no trajectory (``None``): its recorded rows stay in the store, neither kept in memory during the run nor read
    back at its end. The block's value, a dict, gets the store's ``path`` and its recorded ``rows``.

    For the command line, which prints no rows of a stored run: a run that recorded 10⁷ rows at d = 30 read 10 GB
    back only to print a summary, and one below 256 MiB of rows kept them all in memory while it ran."""
    told = {}
    token = _ROWS_LEFT.set(told)
    try:
        yield told
    finally:
        _ROWS_LEFT.reset(token)


def rows_left_request():
    """The dict of the enclosing :func:`rows_left_in_store` block, or None outside one."""
    return _ROWS_LEFT.get()


def without_trajectory(result, told):
    """``result`` with its trajectory field None inside a :func:`rows_left_in_store` block (``told``, its dict, not
    None); ``result`` itself outside one, or when it has no trajectory field."""
    name = _trajectory_field(result) if told is not None else None
    return result if name is None else dataclasses.replace(result, **{name: None})
