"""The result fields of a run store (``/final``): written from the result dataclass, read back as it was.

Numbers and arrays are datasets, strings and JSON are guarded string datasets (:func:`.files.guarded`); the
attribute ``types`` maps each field to its Python type (docs/store-format.md, ``/final``).
"""

import dataclasses
import json

import h5py
import numpy as np

from ..runs.points import flag_attributes
from .files import (
    TEXT_CRC,
    StoreCorruptError,
    StoreError,
    attr_str,
    dumps,
    guarded,
    reading,
    resolve_type,
    text_crc,
    type_name,
    verify_guarded,
)
from .format import delete_dataset, delete_group, read_text, set_attrs, string_dataset

#: What repairs a damaged ``/final``: the result is computed again (docs/store-format.md, "Resume").
FINAL_DAMAGED = "; `dlnm resume` computes the run again from step 0 (its result cannot be read)"


def write_final(f, dims, result, trajectory_type, problem_type, *, complete=True):
    """Every field of the result dataclass under ``/final`` (see docs/store-format.md).

    Numbers and arrays are datasets (0-d or labelled axes), strings and JSON (NamedTuple,
    dict, list) are string datasets; the attribute ``types`` maps each field to its
    Python type so that :func:`read_final` rebuilds the same values. An existing
    ``/final`` (pre-created from a template result) is updated in place where shapes
    and types agree, which is much cheaper than creating datasets.
    """
    previous = {}
    if "final" in f:
        try:
            verify_guarded(f["final"].attrs, f.filename, "/final")
            previous = json.loads(attr_str(f["final"].attrs.get("types", "{}")))
        except (StoreCorruptError, ValueError):  # a damaged /final (a resume computes it again): written anew
            delete_group(f, "final")
    fresh = "final" not in f
    g = f.create_group("final", track_order=True) if fresh else f["final"]
    types, classes, none_fields, fields = {}, {}, [], {}
    attrs = {"result_class": type_name(result)}
    for field in dataclasses.fields(result):
        name, value = field.name, getattr(result, field.name)
        if isinstance(value, trajectory_type):
            attrs["trajectory_field"] = name
        elif isinstance(value, problem_type):
            attrs["problem_field"] = name
        elif value is None:
            none_fields.append(name)
        else:
            types[name], data = _encode_value(name, value, classes)
            dsid = _put(g, dims, name, data, fresh)
            flags = flag_attributes(name, np.asarray(data).dtype) if not isinstance(data, str) else {}
            if flags:  # status: the name of every code (CF), as sweep stores have it
                set_attrs(dsid, flags)
            fields[name] = (types[name], (), data, dsid) if isinstance(data, str) else (
                types[name], np.shape(data), np.asarray(data).dtype, dsid)
    for name in previous:
        if name not in types and name in g:
            delete_dataset(g, name)
    attrs.update({"types": json.dumps(types), "classes": json.dumps(classes),
                  "none_fields": json.dumps(none_fields), "complete": np.int8(complete)})
    set_attrs(g, guarded(attrs, *(k for k, v in attrs.items() if isinstance(v, str))))
    return {"fields": fields, "result_class": attrs["result_class"], "classes": classes,
            "none_fields": none_fields, "group": g}


def final_handles(g):
    """``{field: (type, shape, dtype or str value, dataset id)}`` of a stored ``/final``, kept open
    by the writer so that closing the store only writes values."""
    verify_guarded(g.attrs, g.file.filename, "/final", FINAL_DAMAGED)
    types = json.loads(attr_str(g.attrs.get("types", "{}")))
    out = {}
    for name, kind in types.items():
        dsid = h5py.h5d.open(g.id, name.encode())
        if dsid.dtype.kind == "O":
            out[name] = (kind, (), read_text(h5py.Dataset(dsid), FINAL_DAMAGED), dsid)
        else:
            out[name] = (kind, dsid.shape, dsid.dtype, dsid)
    meta = {key: attr_str(g.attrs.get(key, default)) for key, default in
            (("result_class", ""), ("classes", "{}"), ("none_fields", "[]"))}
    return {"fields": out, "result_class": meta["result_class"], "classes": json.loads(meta["classes"]),
            "none_fields": json.loads(meta["none_fields"]), "group": g}


def update_final_in_place(handles, result, trajectory_type, problem_type):
    """Overwrite the values of a pre-created ``/final`` (see :func:`final_handles`), creating nothing.

    Only fixed-size writes into existing datasets (allowed while the file is in SWMR
    mode). Returns False, possibly after some writes, when the stored layout does not
    fit the result (then :func:`write_final` rewrites it after a normal reopen).
    """
    if handles is None or handles["result_class"] != type_name(result):
        return False
    fields = handles["fields"]
    classes, none_fields, writes, seen = {}, [], [], set()
    for field in dataclasses.fields(result):
        name, value = field.name, getattr(result, field.name)
        if isinstance(value, (trajectory_type, problem_type)):
            continue
        if value is None:
            none_fields.append(name)
            continue
        seen.add(name)
        kind, data = _encode_value(name, value, classes)
        stored = fields.get(name)
        if stored is None or stored[0] != kind:
            return False
        if isinstance(data, str):
            if data != stored[2]:
                return False
            continue
        data = np.asarray(data)
        if data.shape != stored[1] or data.dtype != stored[2]:
            return False
        writes.append((stored[3], data))
    if classes != handles["classes"] or none_fields != handles["none_fields"] or seen != set(fields):
        return False
    for dsid, data in writes:
        if data.size:
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
    handles["group"].attrs.modify("complete", np.int8(1))
    return True


def _encode_value(name, value, classes):
    """(type name, numpy array or str) of one result field."""
    if isinstance(value, (bool, np.bool_)):
        return "bool", np.int8(value)
    if isinstance(value, (int, np.integer)):
        return "int", np.int64(value)
    if isinstance(value, (float, np.floating)):
        return "float", np.float64(value)
    if isinstance(value, str):
        return "str", value
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        if value.dtype == np.bool_:
            return "bool_array", value.astype(np.int8)
        return "array", value
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        classes[name] = type_name(value)
        return "namedtuple", dumps(value._asdict())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        classes[name] = type_name(value)
        return "dataclass", dumps(dataclasses.asdict(value))
    if isinstance(value, (dict, list, tuple)):
        return {dict: "json", list: "json_list"}.get(type(value), "json_tuple"), dumps(value)
    raise StoreError(f"cannot store result field {name!r} of type {type(value).__name__}")


def _put(g, dims, name, data, fresh=False):
    """Write ``data`` to ``g[name]``: in place when the dataset fits, else (re)created; returns its id."""
    if not fresh and name in g:
        dsid = h5py.h5d.open(g.id, name.encode())
        if isinstance(data, str):
            if dsid.dtype.kind == "O" and dsid.shape == ():
                ds = h5py.Dataset(dsid)
                if ds.asstr()[()] != data:
                    ds[()] = data
                    ds.attrs[TEXT_CRC] = text_crc(data)
                return dsid
        else:
            data = np.asarray(data)
            if dsid.shape == data.shape and dsid.dtype == data.dtype:
                if data.size:
                    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.ascontiguousarray(data))
                return dsid
        own = [f"{name}_dim{axis}" for axis in range(len(dsid.shape))]
        own += [k for k in g if any(k.startswith(o + "_") for o in own)]  # (an earlier length's, named so)
        delete_dataset(g, name)
        for scale in own:  # the field's own axis scales, of the old length: recreated with the new one
            if scale in g and not _scale_in_use(g, scale):
                del g[scale]
    if isinstance(data, str):
        return string_dataset(g, name, data).id
    return dims.array(g, name, data)


def _scale_in_use(g, scale):
    """Whether a dataset of ``g`` other than the scale itself is attached to the dimension scale ``g[scale]``."""
    target = g[scale]
    for key in g:
        ds = g[key]
        if key == scale or not isinstance(ds, h5py.Dataset) or ds.is_scale:
            continue
        for axis in range(ds.ndim):
            if any(s == target for s in ds.dims[axis].values()):
                return True
    return False


def read_final(g):
    """(result class, {field: value}) for the stored fields (trajectory/problem excluded)."""
    verify_guarded(g.attrs, g.file.filename, "/final", FINAL_DAMAGED)
    cls = resolve_type(attr_str(g.attrs["result_class"]), "result class")
    out = {name: None for name in json.loads(attr_str(g.attrs.get("none_fields", "[]")))}
    types = json.loads(attr_str(g.attrs.get("types", "{}")))
    classes = json.loads(attr_str(g.attrs.get("classes", "{}")))
    for name in (f.name for f in dataclasses.fields(cls)):
        if name not in types:
            continue
        # (damaged HDF5 metadata here too is mended by a resume: it writes /final anew and computes the result again)
        with reading(g.file.filename, f"dataset {g.name}/{name}", FINAL_DAMAGED, rebuilt=True):
            out[name] = _decode_value(g[name], types[name], classes, name)
    return cls, out


def _decode_value(ds, kind, classes, name):
    """One field of ``/final`` as the Python value :func:`write_final` stored."""
    from ..results import readonly

    scalars = {"bool": bool, "int": int, "float": float}
    if kind in scalars:
        return scalars[kind](ds[()])
    if kind == "array":
        return readonly(ds[()])
    if kind == "bool_array":
        return readonly(ds[()].astype(bool))
    if kind not in ("str", "namedtuple", "dataclass", "json", "json_list", "json_tuple"):
        raise StoreError(f"{ds.file.filename}: unknown stored type {kind!r} of {ds.name}")
    text = read_text(ds, FINAL_DAMAGED)
    if kind == "str":
        return text
    if kind in ("namedtuple", "dataclass"):
        return resolve_type(classes[name], "field class")(**json.loads(text))
    return {"json": dict, "json_list": list, "json_tuple": tuple}[kind](json.loads(text))
