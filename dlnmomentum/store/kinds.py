"""The kinds of file the package writes (run, sweep, network sweep and figure stores): which kind a file is,
and, for a file of another kind than a reader wants, an error that says what it is and names its reader.

One reader per kind of file: :func:`dlnmomentum.open_store` (run stores), :func:`dlnmomentum.open_sweep` (sweep
and network sweep stores), :func:`dlnmomentum.figures.open_figure` (figure stores); ``dlnm inspect`` reads
them all.
"""

import contextlib
import os
import stat

from ..validate import as_bool
from .errors import shell_word
from .files import (
    StoreCorruptError,
    StoreError,
    attr_str,
    clear_status_flags,
    open_h5,
    reading,
    restore_superblock,
    superblock_version,
)

#: The ``format`` attribute of each kind of file (a root attribute; sweep, network sweep and figure stores also
#: have ``kind``): a file is one of the package's only if it carries its kind's format, since ``kind`` alone is
#: a name other programs use too (and ``overwrite=True`` must never replace their files).
RUN_FORMAT = "dlnmomentum-run"
SWEEP_FORMAT = "dlnmomentum-sweep"
NETWORK_SWEEP_FORMAT = "dlnmomentum-network-sweep"
FIGURE_FORMAT = "dlnmomentum-figure"
FORMATS = {"run": RUN_FORMAT, "sweep": SWEEP_FORMAT, "network-sweep": NETWORK_SWEEP_FORMAT, "figure": FIGURE_FORMAT}
#: The root attributes of a figure store written before 0.6.0, which had no ``format`` attribute.
_FIGURE_ATTRS_BEFORE_0_6 = ("figure", "size", "setting", "summary", "package_version")

#: Every kind of file the package writes: ``(what it is, its reader, how to continue it)``, templates of
#: :func:`how`: ``{path!r}`` the file in Python, ``{sh}`` the file as a shell word (:func:`.errors.shell_word`).
#: A reader given a file of another kind names what the file is and its reader (:func:`wrong_kind`).
FILE_KINDS = {
    "run": ("a run store", "dlnmomentum.open_store({path!r}) (`dlnm inspect {sh}`)",
            "dlnmomentum.resume({path!r}) (`dlnm resume {sh}`)"),
    "sweep": ("a sweep store", "dlnmomentum.open_sweep({path!r}) (`dlnm inspect {sh}`)",
              "dlnmomentum.resume_sweep({path!r}) (`dlnm sweep --store {sh} --resume`)"),
    "network-sweep": ("a network sweep store", "dlnmomentum.open_sweep({path!r}) (`dlnm inspect {sh}`)",
                      "dlnmomentum.resume_sweep({path!r}) (`dlnm network ARCHITECTURE --store {sh} --resume`)"),
    "figure": ("a figure store", "dlnmomentum.figures.open_figure({path!r}) (`dlnm inspect {sh}`; "
               "`dlnm plot {sh}` draws it)",
               "`dlnm figure NAME --out DIR` (a figure's sweeps continue from DIR/parts)"),
}


def how(kind, path, action="read"):
    """How to read (``action="read"``) or continue (``"resume"``) the file ``path`` of ``kind`` (:data:`FILE_KINDS`):
    the Python call and the command line, the path quoted for each (a copied command runs as it reads)."""
    template = FILE_KINDS[kind][2 if action == "resume" else 1]
    return template.format(path=str(path), sh=shell_word(path))


def kind_of(attrs):
    """The :data:`FILE_KINDS` key of a file from its root attributes (None: an HDF5 file not of this package).

    The ``format`` attribute decides (:data:`FORMATS`; a sweep, network sweep or figure store also names its kind
    in ``kind``); a figure store of a version before 0.6.0 is known by its kind and its other root attributes.
    """
    fmt = attr_str(attrs.get("format", ""))
    kind = attr_str(attrs.get("kind", ""))
    if fmt == RUN_FORMAT:
        return "run"
    for name, value in FORMATS.items():
        if name != "run" and fmt == value and kind == name:
            return name
    if kind == "figure" and "format" not in attrs and all(a in attrs for a in _FIGURE_ATTRS_BEFORE_0_6):
        return "figure"
    return None


def store_kind(path):
    """The :data:`FILE_KINDS` key of the file at ``path``, or None for an HDF5 file of no kind of this package.

    A missing, busy or unreadable file raises as :func:`open_h5` does.
    """
    f, _ = open_h5(path)
    with f, reading(path):
        return kind_of(f.attrs)


def wrong_kind(path, kind, wanted, action="read"):
    """The :class:`StoreError` for a file of ``kind`` met where a ``wanted`` file is read (``action="read"``) or
    continued (``"resume"``): it says what the file is and names the reader (or the command) for it."""
    want = FILE_KINDS[wanted][0]
    if kind is None:
        return StoreError(f"{path} is an HDF5 file but not {want}: it is none of the files dlnmomentum writes "
                          f"({', '.join(v[0] for v in FILE_KINDS.values())})")
    what = FILE_KINDS[kind][0]
    hint = how(kind, path, action)
    return StoreError(f"{path} is {what}, not {want}; {'continue' if action == 'resume' else 'read'} it with "
                      f"{hint}")


def require_kind(path, wanted, action="read"):
    """Raise :func:`wrong_kind`'s error unless the file at ``path`` is of kind ``wanted``."""
    kind = store_kind(path)
    if kind != wanted:
        raise wrong_kind(path, kind, wanted, action)


def _refusal(path, wanted, what):
    want = FILE_KINDS[wanted][0]
    return StoreError(f"refusing to overwrite {path}: it is {what}, not {want}; overwrite=True (--overwrite) replaces "
                      f"only {want} that dlnmomentum wrote: choose another path, or remove the file yourself")


def require_regular_or_absent(path, wanted):
    """Refuse ``overwrite=True`` when ``path`` is something other than a regular file (a device such as
    ``/dev/null``, a FIFO, a socket); nothing at ``path`` is fine. Only a ``stat``: nothing is opened."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISREG(mode):
        raise _refusal(path, wanted, "a directory" if stat.S_ISDIR(mode) else
                       "a character device" if stat.S_ISCHR(mode) else
                       "a block device" if stat.S_ISBLK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
                       "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def resume_or_overwrite(resume, overwrite, names=("resume=True", "overwrite=True")):
    """``(resume, overwrite)`` as bools, at most one of them True: what to do with a sweep store that exists.

    The one check of every sweep writer (:func:`dlnmomentum.sweep`, :func:`dlnmomentum.networks_sweep`, and their
    command lines, which name their options in ``names``): with both, ``overwrite`` replaced the store that
    ``resume`` asked to continue (or the command line continued the store that ``--overwrite`` asked to replace).
    """
    resume, overwrite = as_bool("resume", resume), as_bool("overwrite", overwrite)  # "no" is not False
    if resume and overwrite:
        raise ValueError(f"{names[0]} continues the store and {names[1]} replaces it: give one of them, not both")
    return resume, overwrite


def require_overwritable(path, wanted):
    """Refuse ``overwrite=True`` (``--overwrite``) unless ``path`` holds a store of kind ``wanted`` that this package
    wrote: the package never deletes a file it did not write (a text or CSV file, a device such as
    ``/dev/null``, another program's HDF5 file) nor a store of another kind. ``path`` is the resolved path
    (:func:`.files.real_path`), checked by the holder of its writer lock; nothing at it is fine. The error
    names the path and says what is there.
    """
    require_regular_or_absent(path, wanted)
    if not os.path.exists(path):
        return
    if superblock_version(path) is None:
        raise _refusal(path, wanted, "not an HDF5 file")
    try:
        kind = store_kind(path)
    except StoreCorruptError as exc:
        if "left open by a writer" not in str(exc):
            raise _refusal(path, wanted, f"an HDF5 file that cannot be read ({exc})") from exc
        # a store whose writer died while it had the file open: clear HDF5's "open" flags (as h5clear and a
        # resume do) to read what it is, and put them back if it is not to be replaced (left as it was)
        with flags_restored_unless_kept(path) as keep:
            kind = store_kind(path)
            if kind != wanted:
                raise _refusal(path, wanted, FILE_KINDS[kind][0] if kind is not None else
                               "an HDF5 file that dlnmomentum did not write") from exc
            keep()
        return
    if kind != wanted:
        raise _refusal(path, wanted, FILE_KINDS[kind][0] if kind is not None else
                       "an HDF5 file that dlnmomentum did not write")


def left_open(path):
    """True when ``path`` is an HDF5 file whose writer died with it open outside SWMR mode (its superblock's "open
    for writing" flags are set, and no live process holds it)."""
    try:
        f, _ = open_h5(path)
    except StoreCorruptError as exc:
        return "left open by a writer" in str(exc)
    f.close()
    return False


@contextlib.contextmanager
def flags_restored_unless_kept(path):
    """Clear the "open for writing" flags a dead writer left in ``path`` (as h5clear does) for the body to read the
    file; unless the body calls the ``keep`` it is given (the file is one to continue or replace), they are put back
    on leaving, so a file refused after its flags were cleared is left byte for byte as it was. The caller holds
    the store's writer lock."""
    saved = clear_status_flags(path) if left_open(path) else None
    kept = []
    try:
        yield lambda: kept.append(True)
    finally:
        if saved is not None and not kept:
            restore_superblock(path, saved)


def repair_left_open(path, wanted):
    """For a resume of a ``wanted`` store (a kind, or a tuple of kinds; its writer lock held): clear the flags a
    writer killed outside SWMR mode left (the sweep writers open the file outside SWMR mode for each wave), once the
    file is known to be of that kind; a file of another kind (or not the package's) is refused as
    :func:`require_kind` refuses it, and left as it was. Returns True when the flags were cleared."""
    if not left_open(path):
        return False
    kinds = (wanted,) if isinstance(wanted, str) else tuple(wanted)
    with flags_restored_unless_kept(path) as keep:
        kind = store_kind(path)
        if kind not in kinds:
            raise wrong_kind(path, kind, kinds[0], "resume")
        keep()
    return True
