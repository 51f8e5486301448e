"""Reading HDF5 run stores: :func:`open_store`, :class:`Store`, ``dlnm inspect``.

A store is opened per access (never held open), read-only; a store whose writer is
still running, or died, is read in HDF5's SWMR mode (the rows committed so far).
"""

import contextlib
import dataclasses
import json
import os
import warnings

import numpy as np

from .. import status as st
from ..results import Trajectory, trajectory_from_fields
from ..validate import as_row_slice, as_store_path
from .files import (  # noqa: F401 - check_readable and open_h5 are this module's API too
    READ_ERRORS,
    Checkpoint,
    StoreCorruptError,
    StoreError,
    attr_str,
    check_readable,
    command,
    lock_holder,
    open_h5,
    read_checkpoint_file,
    read_dataset,
    read_error,
    reading,
    side_paths,
    to_jsonable,
    verify_guarded,
)
from .final import FINAL_DAMAGED, read_final
from .format import (
    FORMAT_VERSION,
    OBSERVABLE_INFO,
    join_description,
    read_checkpoint_group,
    read_problem,
    schema_from_file,
)
from .integrity import intact_rows
from .kinds import kind_of, wrong_kind
from .observable import Description, Observable, _xarray


def _trajectory_field(result):
    for field in dataclasses.fields(result):
        if field.name == "trajectory" or isinstance(getattr(result, field.name), Trajectory):
            return field.name
    return None


def read_series(f, schema, rows=None):
    out = {}
    for key, s in schema.items():
        ds = f[s.path]
        n = ds.shape[0] if rows is None else min(rows, ds.shape[0])
        arr = read_dataset(ds, np.s_[:n])
        if s.is_bool:
            arr = arr.astype(bool)
        arr.setflags(write=False)
        out[key] = arr
    return out


# -- opening files ----------------------------------------------------------------------------

def store_path(path):
    """``path`` as a str, checked before any work (:func:`dlnmomentum.validate.as_store_path`)."""
    return as_store_path(path)


def _read_header(f, path, action="read"):
    """The root attributes of a run store; another kind of file (a sweep, network sweep or figure store, a
    foreign HDF5 file) is a :class:`StoreError` that names what it is and its reader (``action``: read or
    resume)."""
    attrs = {k: (attr_str(v) if isinstance(v, (bytes, str)) else v) for k, v in f.attrs.items()}
    kind = kind_of(attrs)
    if kind != "run":
        raise wrong_kind(path, kind, "run", action)
    verify_guarded(attrs, path, "the file's root")
    if "format_version" not in attrs:
        raise StoreCorruptError(f"store {path} has no format_version attribute: damaged, or not written by "
                                "dlnmomentum")
    version = int(attrs["format_version"])
    if version < 1:
        raise StoreCorruptError(f"store {path} has format version {version}, which no dlnmomentum writes: damaged, "
                                "or not written by dlnmomentum")
    if version > FORMAT_VERSION:
        raise StoreError(f"store {path} has format version {version}; this dlnmomentum reads versions "
                         f"1..{FORMAT_VERSION} (upgrade the package)")
    return attrs


# -- plans of resumable stores ---------------------------------------------------------------

@dataclasses.dataclass
class _Plan:
    header: dict
    description: dict
    problem: object
    initial: dict
    schema: dict
    lengths: dict
    clean: bool
    embedded: Checkpoint | None


def read_plan(path):
    f, live = open_h5(path)
    with f, reading(path):
        header = _read_header(f, path, action="resume")
        clean = not live and header.get("writer_state") == "closed"
        try:
            description = join_description(json.loads(header["config"]), f, arrays=True)
            problem = read_problem(f["problem"])
            initial = {k: np.asarray(v[()]) for k, v in f["initial"].items() if k in ("u0", "v0")}
            schema = schema_from_file(f)
            lengths = {k: f[s.path].shape[0] for k, s in schema.items()}
            embedded = read_checkpoint_group(f["checkpoint"]) if clean and "checkpoint" in f else None
        except READ_ERRORS as exc:
            error = read_error(path, exc)
            if isinstance(error, StoreCorruptError):
                error = StoreCorruptError(f"store {path} is incomplete or damaged ({exc}); it cannot be resumed")
            raise error from exc
    return _Plan(header, description, problem, initial, schema, lengths, clean, embedded)


def valid_checkpoints(path, plan):
    """Valid checkpoints of this store, best (most advanced) first."""
    found = [plan.embedded] if plan.embedded is not None else []
    sides = side_paths(path)
    for name in ("checkpoint", "previous"):
        if os.path.exists(sides[name]):
            try:
                found.append(read_checkpoint_file(sides[name]))
            except StoreCorruptError:
                continue
    ok = []
    for ckpt in found:
        if ckpt.store_id != plan.header.get("store_id"):
            continue
        written = ckpt.written
        if set(written) != set(plan.schema) or any(written[k] > plan.lengths[k] for k in written):
            continue
        ok.append(ckpt)
    ok.sort(key=lambda c: (c.done, c.rows, int(c.meta.get("sequence", 0))), reverse=True)
    return ok


# -- reading ----------------------------------------------------------------------------------

class Store:
    """A run store opened for reading (see :func:`open_store`). The file is opened per access."""

    def __init__(self, path):
        self.path = store_path(path)
        f, live = open_h5(self.path)
        with f, reading(self.path):
            self.attrs = _read_header(f, self.path)
            self._schema = schema_from_file(f)
            self._config = json.loads(self.attrs.get("config", "{}"))  # joined on use (long lists: datasets)
            self._lengths = {k: f[s.path].shape[0] for k, s in self._schema.items()}
        self.live = live
        self._cache = {}

    @contextlib.contextmanager
    def _file(self):
        f, _ = open_h5(self.path)
        with f, reading(self.path):
            yield f

    # -- description --------------------------------------------------------------------
    @property
    def kind(self):
        return self.attrs.get("kind")

    @property
    def family(self):
        return self.attrs.get("family")

    @property
    def format_version(self):
        return int(self.attrs["format_version"])

    @property
    def config(self):
        """The run description (hyperparameters and record schedule) as stored: a dict whose ``schedule`` is the
        whole list of recorded steps, shown (repr, print) by its length and ends (:class:`Description`)."""
        if "config" not in self._cache:
            with self._file() as f:
                self._cache["config"] = Description(join_description(self._config, f))
        return self._cache["config"]

    def _config_arrays(self):
        """The description with its long lists as arrays (cheap to summarise)."""
        with self._file() as f:
            return join_description(self._config, f, arrays=True)

    @property
    def versions(self):
        keys = ("package_version", "numba_version", "numpy_version", "h5py_version", "hdf5_version",
                "python_version")
        return {k: self.attrs.get(k) for k in keys}

    @property
    def status(self):
        return int(self.attrs.get("status", st.RUNNING))

    @property
    def status_name(self):
        return st.status_name(self.status)

    @property
    def complete(self):
        """The writer closed the file (finished, or stopped cleanly by a signal)."""
        return not self.live and self.attrs.get("writer_state") == "closed"

    @property
    def state(self):
        """``complete`` | ``interrupted`` | ``running`` (a live writer) | ``crashed`` (resumable)."""
        if self.complete:
            return "interrupted" if self.status == st.INTERRUPTED else "complete"
        return "running" if lock_holder(self.path) is not None else "crashed"

    @property
    def observables(self):
        return tuple(k for k in self._schema if k not in ("step", "time"))

    def _checkpointed(self):
        """The newest valid checkpoint of a store that is not complete, when it holds more rows than the file's
        datasets all do, else None. A running or crashed writer commits rows by whole chunks, each dataset at its
        own pace (a chunk of ``step`` holds 4096 rows, one of ``theta`` at d = 30 136), and its checkpoint keeps
        the rows after them: without it a reader saw 0 rows of a run that had recorded a thousand."""
        if self.complete or not self._schema:
            return None
        try:
            ckpt = self.checkpoint
        except StoreError:  # (a damaged side file: the file's own rows are what there is)
            return None
        return ckpt if ckpt is not None and ckpt.rows > min(self._lengths.values()) else None

    @property
    def rows(self):
        """Recorded rows readable: all of them once the file is complete; while a writer runs, or after it died,
        those of its newest checkpoint where the file's datasets hold fewer."""
        if not self._lengths:
            return 0
        ckpt = self._checkpointed()
        return ckpt.rows if ckpt is not None else min(self._lengths.values())

    def _series(self, f, keys, window=None):
        """The rows of the series ``keys`` that :attr:`rows` counts (from the file, completed from the newest
        checkpoint's rows where the file's datasets hold fewer); ``window``: only the rows of this slice of them
        (:func:`~dlnmomentum.validate.as_row_slice`), read as such from the file."""
        schema = {k: self._schema[k] for k in keys}
        ckpt = self._checkpointed()
        if window is not None:
            return self._series_window(f, schema, ckpt, window)
        if ckpt is None:
            return read_series(f, schema, min(self._lengths.values()))
        out = {}
        for key, s in schema.items():
            disk = read_series(f, {key: s}, ckpt.written[key])[key]
            tail = np.asarray(ckpt.pending[key]) if key in ckpt.pending else np.zeros((0,) + s.row_shape, s.dtype)
            arr = np.concatenate([disk, tail.astype(bool) if s.is_bool else tail])[:ckpt.rows]
            arr.setflags(write=False)
            out[key] = arr
        return out

    def _series_window(self, f, schema, ckpt, window):
        """The rows ``window`` of :meth:`_series`: each dataset is read at that selection only (HDF5 reads the chunks
        it touches), and the rows past the file's whole chunks come from the checkpoint ``ckpt`` (None: the file
        holds them all). Reading everything to slice it took 10.9 s and 2.9 GB for 1000 rows of a store of 10⁷."""
        total = ckpt.rows if ckpt is not None else min(self._lengths.values())
        start, stop, step = window.indices(total)
        out = {}
        for key, s in schema.items():
            on_disk = total if ckpt is None else min(ckpt.written[key], total)
            parts = [np.zeros((0,) + s.row_shape, s.dtype)]
            if start < min(stop, on_disk):
                parts.append(read_dataset(f[s.path], np.s_[start:min(stop, on_disk):step]))
            if ckpt is not None and stop > on_disk:
                # the first row of the window at or past the file's rows, in the checkpoint's rows after them
                first = start if start >= on_disk else start + -(-(on_disk - start) // step) * step
                tail = ckpt.pending.get(key)
                if first < stop and tail is not None:
                    parts.append(np.asarray(tail)[first - on_disk:stop - on_disk:step])
            # (a read from the file alone is a fresh array; rows of the checkpoint are copied by concatenate)
            arr = parts[1] if len(parts) == 2 and start < on_disk else np.concatenate(parts)
            if s.is_bool:
                arr = arr.astype(bool)
            arr.setflags(write=False)
            out[key] = arr
        return out

    @property
    def file_size(self):
        return os.path.getsize(self.path)

    def side_files(self):
        return {name: p for name, p in side_paths(self.path).items() if os.path.exists(p)}

    # -- content ------------------------------------------------------------------------
    @property
    def problem(self):
        if "problem" not in self._cache:
            with self._file() as f:
                self._cache["problem"] = read_problem(f["problem"])
        return self._cache["problem"]

    @property
    def initial(self):
        with self._file() as f:
            return {k: np.asarray(v[()]) for k, v in f["initial"].items() if k in ("u0", "v0")}

    def observable(self, name, rows=None):
        """The recorded quantity ``name`` (an :class:`Observable`: ``step``, ``time``, ``value``, rows first).

        ``rows``: a slice of the recorded rows, as :attr:`rows` counts them (``slice(1000, 2000)``, ``np.s_[-100:]``,
        ``np.s_[::1000]``; step >= 1): only those rows are read from the file, the same values as the whole
        observable sliced. None (the default): every row.
        """
        window = as_row_slice("rows", rows)
        if name not in self.observables:
            raise KeyError(f"{name!r} is not recorded in {self.path}; "
                           f"recorded: {', '.join(self.observables)}")
        with self._file() as f:
            series = self._series(f, ("step", "time", name), window)
            # units and description are attributes of the dataset ``value`` (every format version), not of its
            # group: read from the group, the description was always "" in to_xarray
            attrs = f[f"observables/{name}/value"].attrs
            info = OBSERVABLE_INFO.get(name, ("1", ""))
            units = attr_str(attrs.get("units", info[0]))
            description = attr_str(attrs.get("description", info[1]))
        return Observable(name, series["step"], series["time"], series[name], units, description)

    def __getitem__(self, name):
        return self.observable(name)

    def __contains__(self, name):
        return name in self.observables

    def __iter__(self):
        return iter(self.observables)

    @property
    def trajectory(self):
        """The recorded rows as a :class:`~dlnmomentum.results.Trajectory` (None without a record)."""
        return self.read_trajectory()

    def read_trajectory(self, rows=None):
        """The recorded rows as a :class:`~dlnmomentum.results.Trajectory` (None without a record).

        ``rows``: a slice of the recorded rows, as in :meth:`observable`: every quantity of those rows only, read
        as such from the file (the values of :attr:`trajectory`'s fields sliced, without a long run's GBs)."""
        window = as_row_slice("rows", rows)
        if not self._schema:
            return None
        with self._file() as f:
            # (the rows were just read: the trajectory keeps them, no second copy of GBs)
            return trajectory_from_fields(self._series(f, tuple(self._schema), window), owned=True)

    @property
    def result(self):
        """The final result (the run's own result class), or None while the run has not closed the file."""
        if "result" not in self._cache:
            result = self._final(trajectory=True)
            if result is not None:
                self._cache["result"] = result
        return self._cache.get("result")

    def _result_without_rows(self):
        """The final result with no trajectory (``None``), after its recorded rows are checked chunk by chunk (a damaged
        chunk is a :class:`StoreCorruptError`, as reading them for :attr:`result` says): what a command that prints
        no rows needs (``dlnm resume`` of a finished store), without reading GBs of them."""
        damaged = _damaged_rows(self)
        if damaged:
            raise StoreCorruptError(damaged)
        return self._final(trajectory=False)

    def _final(self, trajectory):
        """The final result; without ``trajectory`` its trajectory field is None (a summary: the recorded rows, GBs
        for long run, are not read)."""
        with self._file() as f:
            if "final" not in f or self.live:
                return None
            # (/final's own structure may be damaged too: a resume writes it anew, so that is its repair as well)
            with reading(self.path, "/final", FINAL_DAMAGED, rebuilt=True):
                g = f["final"]
                if not int(g.attrs.get("complete", 1)):
                    return None  # a pre-created /final holds the template values until the writer closes
                cls, fields = read_final(g)
                traj_field = attr_str(g.attrs.get("trajectory_field", "")) or None
                problem_field = attr_str(g.attrs.get("problem_field", "")) or None
        if traj_field:
            fields[traj_field] = self.trajectory if trajectory else None
        if problem_field:
            fields[problem_field] = self.problem
        try:
            return cls(**fields)
        except (TypeError, ValueError) as exc:  # fields missing or of the wrong kind: damage the guards missed
            raise StoreCorruptError(f"store {self.path}: /final is damaged: its fields do not make a "
                                    f"{cls.__name__} ({exc}); `dlnm resume` computes the run again") from exc

    @property
    def checkpoint(self):
        """The newest valid checkpoint (side file or /checkpoint), or None."""
        plan = read_plan(self.path)
        found = valid_checkpoints(self.path, plan)
        return found[0] if found else None

    def to_xarray(self, name=None, rows=None):
        """One observable as an xarray Dataset (``value(time, coordinate)``), or all of them merged; ``rows``: only
        these rows (a slice, as :meth:`observable` takes it)."""
        xr = _xarray()
        as_row_slice("rows", rows)
        if name is not None:
            return self.observable(name, rows).to_xarray()
        parts = []
        for obs in self.observables:
            ds = self.observable(obs, rows).to_xarray().rename({"value": obs})
            parts.append(ds)
        # combine_attrs applies to the variables too: "drop" left every variable (time, step, theta...) without its
        # units and description; the attributes of the shared time and step are the same in every part
        merged = xr.merge(parts, compat="override", join="exact", combine_attrs="drop_conflicts") if parts else (
            xr.Dataset())
        merged.attrs.clear()  # (the parts have no dataset attributes; the store's are set here)
        merged.attrs.update({"kind": self.kind, "config": json.dumps(self.config), "source": self.path})
        return merged

    def __repr__(self):
        return (f"Store({self.path!r}, kind={self.kind!r}, state={self.state!r}, rows={self.rows}, "
                f"observables={list(self.observables)})")

    def summary(self):
        return "\n".join(inspect_lines(self.path, store=self))


def open_store(path):
    """Open a run store for reading: configuration, problem, final result, observables.

    Raises ``FileNotFoundError`` for a missing file and :class:`StoreError` (an
    ``OSError``) naming the path for a damaged file or one that is not a store.
    """
    return Store(path)


# -- inspect ----------------------------------------------------------------------------------

def _size(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes} B"


def _short(value):
    if isinstance(value, (list, np.ndarray)) and len(value) > 8:
        return f"[{len(value)} values: {value[0]} ... {value[-1]}]"
    if isinstance(value, np.ndarray):
        value = value.tolist()
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


def _config_lines(config, indent="  "):
    lines = []
    for key, value in config.items():
        if key in ("family", "kind"):
            continue
        if isinstance(value, dict):
            lines.append(f"{indent}{key}: " + ", ".join(f"{k}={_short(v)}" for k, v in value.items()))
        else:
            lines.append(f"{indent}{key}: {_short(value)}")
    return lines


def _theory_lines(result):
    """Theorem 1/2 checked on a stored result: prediction gap and the paper's normalized distance."""
    if not hasattr(result, "prediction"):
        return []
    try:
        with warnings.catch_warnings():  # a run that is not converged: said on the line itself
            warnings.simplefilter("ignore", RuntimeWarning)
            pred = result.prediction()
    except ValueError as exc:  # e.g. a zero in Δ∞, y outside range(X), a diverged run
        return [f"theory      : not available ({exc})"]
    return [f"theory      : prediction gap (Theorem 1/2) {pred.prediction_gap:.3e}; "
            f"normalized distance to GF(Delta_inf) {pred.normalized_distance:.3e}"
            + ("" if result.status_name == "converged" else "  (run not converged: gaps include the residual)")]


#: The head of the ``dlnm inspect`` line that reports damaged bytes (the command then exits with an error).
DAMAGED = "DAMAGED     "


def _damaged_rows(s):
    """What is damaged among the recorded rows of the store ``s`` (a sentence naming the file and the datasets), or
    None: each stored chunk is checked by its checksums (:func:`.integrity.intact_rows`), one chunk in memory at a
    time. (``dlnm inspect`` read every row into arrays for this: memory twice the rows, GBs for a long run.)"""
    if not s._schema:
        return None
    with s._file() as f:
        intact = intact_rows(f, s._schema)
        bad = [f"{series.path} from row {intact[key]}" for key, series in s._schema.items()
               if intact[key] < f[series.path].shape[0]]
    if not bad:
        return None
    return (f"store {s.path}: the recorded rows of dataset {', '.join(bad)} are damaged (a stored chunk does not "
            "match its checksum)")


def inspect_lines(path, store=None):
    """Lines describing a store (``dlnm inspect``)."""
    s = store or open_store(path)
    a = s.attrs
    out = [f"store       : {s.path}  ({_size(s.file_size)}; {a.get('format')} v{a.get('format_version')})",
           f"kind        : {s.kind} (family {s.family}), created {a.get('created')}, "
           f"updated {a.get('updated')}",
           "written by  : " + ", ".join(f"{k.replace('_version', '')} {v}" for k, v in s.versions.items())]
    state = s.state
    note = {"complete": "", "interrupted": f" -- `{command('resume', s.path)}` continues it",
            "running": f" -- written by process {(lock_holder(s.path) or {}).get('pid')}",
            "crashed": f" -- the writer died; `{command('resume', s.path)}` continues it"}[state]
    if state in ("complete", "interrupted"):
        budget = ("adaptive steps (a budget)" if s.family == "flow-adaptive" else "steps")
        out.append(f"status      : {s.status_name} ({st.STATUS_MESSAGES[s.status]}) after "
                   f"{int(a.get('steps_done', 0))} of {int(a.get('steps_total', 0))} {budget}{note}")
    else:
        out.append(f"status      : {state}{note}")
    out.append("config      :")
    out.extend(_config_lines(s._config_arrays()))
    out.append(f"problem     : {s.problem.summary()}")
    result = None
    if state in ("complete", "interrupted"):
        try:
            # without the recorded rows: `recorded` below counts them, and reading them all (GBs for a long run) only
            # to print a summary took memory twice their size; their checksums are checked a chunk at a time below
            result = s._final(trajectory=False)
        except StoreCorruptError as exc:
            out.append(f"{DAMAGED}: {str(exc).removesuffix(FINAL_DAMAGED)}; `{command('resume', s.path)}` computes "
                       "the run again")
        damaged = _damaged_rows(s)
        if damaged:
            out.append(f"{DAMAGED}: {damaged}; `{command('resume', s.path)}` computes the run again")
    if result is not None:
        out.append("final       :")
        summary = result.summary() if hasattr(result, "summary") else "\n".join(
            f"{k}: {v}" for k, v in result.to_dict().items() if np.ndim(v) == 0)
        out.extend("  " + line for line in summary.splitlines())
        out.extend(_theory_lines(result))
    if s._schema:
        out.append(f"recorded    : {s.rows} rows")
        with s._file() as f:
            for key, series in s._schema.items():
                ds = f[series.path]
                filters = f"{ds.compression}+shuffle" if ds.shuffle else str(ds.compression)
                out.append(f"  {key:<14} {str(ds.shape):<14} {str(ds.dtype):<8} chunks {ds.chunks} "
                           f"({_size(series.chunk_bytes)}, {filters})")
    else:
        out.append("recorded    : nothing (no record schedule)")
    ckpt = s.checkpoint if state != "complete" else None
    if ckpt is not None:
        out.append(f"checkpoint  : step {ckpt.done}, {ckpt.rows} rows ({os.path.basename(ckpt.source)}, "
                   f"{ckpt.meta.get('time')})")
    files = [f"{os.path.basename(s.path)} {_size(s.file_size)}"]
    files += [f"{os.path.basename(p)} {_size(os.path.getsize(p))}" for p in s.side_files().values()]
    out.append("files       : " + ", ".join(files))
    if s.rows:
        out.append(f"per row     : {_size(s.file_size / s.rows)} of file per recorded row")
    return out


def inspect_json(path):
    s = open_store(path)
    out = {"path": s.path, "file_size": s.file_size, "format": s.attrs.get("format"),
           "format_version": s.format_version, "kind": s.kind, "family": s.family, "state": s.state,
           "status": s.status_name, "config": s.config, "versions": s.versions, "rows": s.rows,
           "observables": {}, "side_files": s.side_files()}
    with s._file() as f:
        for key, series in s._schema.items():
            ds = f[series.path]
            out["observables"][key] = {"shape": list(ds.shape), "dtype": str(ds.dtype),
                                       "chunks": list(ds.chunks)}
    try:
        result = s._final(trajectory=False) if s.complete else None  # (to_dict leaves the trajectory out)
        damaged = _damaged_rows(s) if s.complete else None
        if damaged:
            out["damaged"] = damaged
    except StoreCorruptError as exc:
        result, out["damaged"] = None, str(exc)
    if result is not None:
        out["final"] = to_jsonable(result.to_dict())
    return out
