"""Model files: a zip archive with a UTF-8 JSON header (format, version, the model's
structure) and one ``.npy`` member per array (each array once, however often the model
holds it). Reading one runs no code: the library's types are looked up in the model
registry (:mod:`rankjax._core.types`), and a type of one's own (a solver written with the
public API, its model) is saved with the name of the module that defines it and found,
when loaded, only among the modules the caller has imported or the ``types`` passed to
:func:`load_model`: a file never makes ``load`` import a module. Every array is checked
at load against its type's declared axes and finiteness
(:func:`~rankjax._core.types.check_saved`), the error naming the file and the field.
"""
from __future__ import annotations

import dataclasses
import os
import sys

import numpy as np

from .._core.types import FieldError, check_saved, model_type
from .._version import __version__
from .._core.atomic import atomic_write

MODEL_FORMAT = "rankjax-model"


MODEL_VERSION = 3
"""Model files are zip archives: ``header.json`` (UTF-8 JSON: ``format``, ``version``,
``rankjax_version``, ``model`` — the structure with arrays by name —, ``meta``) and one
``.npy`` member per array (``a0.npy``, ...). ``unzip -p model.npz header.json`` shows
the header; ``numpy.load`` reads the arrays. Version 2 files (header as a numpy
string) are still read."""


def is_weights(model) -> bool:
    """Whether a saved (or loaded) model is plain linear weights (an array), not a rankjax
    model or result type (the one place that tells them apart)."""
    return hasattr(model, "shape") and not hasattr(model, "_fields")


def _encode(obj, arrays, seen):
    """A model as JSON-able structure; arrays go to ``arrays`` (names ``a0, a1 ..``), each
    once (``seen``: id -> (name, array) of those already there)."""
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if hasattr(obj, "_fields"):                                  # a NamedTuple
        return {**_type_of(obj),
                "fields": {f: _encode(getattr(obj, f), arrays, seen) for f in obj._fields}}
    if dataclasses.is_dataclass(obj):                            # Kernel, a solver
        return {**_type_of(obj),
                "fields": {f.name: _encode(getattr(obj, f.name), arrays, seen)
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, (list, tuple)):
        return {"list": [_encode(v, arrays, seen) for v in obj]}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError("model dictionaries must have string keys")
        return {"dict": {k: _encode(v, arrays, seen) for k, v in obj.items()}}
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        if id(obj) not in seen:
            a = np.asarray(obj)
            if a.dtype.kind not in "biufU":                      # numbers, text (no objects)
                raise TypeError(f"cannot save an array of dtype {a.dtype}")
            seen[id(obj)] = (f"a{len(arrays)}", obj)            # obj kept: its id stays its own
            arrays[seen[id(obj)][0]] = a
        return {"array": seen[id(obj)][0]}
    raise TypeError(f"cannot save a value of type {type(obj).__name__}")


def _decode(tree, arrays, types=(), where=""):
    """The model of a header's structure ``tree``: arrays by name, the library's types by
    name, one's own among ``types`` and the imported modules; each object checked
    (:func:`~rankjax._core.types.check_saved`); a :class:`FieldError` naming the field."""
    at = lambda k: f"{where}.{k}" if where else str(k)       # noqa: E731
    if not isinstance(tree, dict):
        return tree
    if "array" in tree:
        return arrays[tree["array"]]
    if "list" in tree:
        return tuple(_decode(v, arrays, types, at(i)) for i, v in enumerate(tree["list"]))
    if "dict" in tree:
        return {k: _decode(v, arrays, types, at(k)) for k, v in tree["dict"].items()}
    cls = model_type(tree["type"]) if "module" not in tree else _imported(tree, types)
    fields = {k: _decode(v, arrays, types, at(k)) for k, v in tree["fields"].items()}
    try:
        obj = cls(**fields)
        check_saved(obj)
    except FieldError as e:
        raise e.under(where) from None                  # a field of this object
    except (ValueError, TypeError) as e:
        raise FieldError(where, str(e)) from None
    return obj


def _type_of(obj):
    """The type's name, and for a type defined outside the library its module."""
    cls = type(obj)
    if cls.__module__.split(".")[0] == "rankjax":
        return {"type": cls.__name__}
    return {"type": cls.__qualname__, "module": cls.__module__}


def _imported(tree, types=()):
    """The class ``tree["type"]`` of module ``tree["module"]``: one of ``types`` of that
    name and module, or found in the module if the caller has imported it (never imported
    here: a file naming a module runs none of its code); a dataclass or NamedTuple, else a
    ValueError naming both."""
    name, module = tree["type"], tree["module"]
    given = [t for t in types if t.__qualname__ == name and t.__module__ == module]
    obj = given[0] if given else sys.modules.get(module)
    for part in ([] if given or obj is None else name.split(".")):
        obj = getattr(obj, part, None)
    if obj is None:
        raise ValueError(f"the model holds a {name} of module {module!r}, which is not "
                         f"{'imported' if module not in sys.modules else 'found'} here (a model "
                         f"file imports nothing): import the module that defines it first, or "
                         f"pass types=[{name}]")
    if not (isinstance(obj, type) and (dataclasses.is_dataclass(obj) or hasattr(obj, "_fields"))):
        raise ValueError(f"{module}.{name} is not a dataclass or NamedTuple type")
    return obj


def save_model(path, model, **meta) -> None:
    """Saves a model to ``.npz`` with a format name and version; the file is replaced
    atomically. ``model`` is linear weights ``[n]`` / ``[n, k]`` or any rankjax model
    (``LinearModel``, ``KernelModel``, ``DualModel``, a path, ``KPCModel``,
    ``RankSVMKernelModel``, ``RankBoostModel``, ``PairwiseGP``, ``CGResult`` ...).
    ``meta``: scalar metadata (str, bool, int, float) or lists of them (feature
    names). Read back with :func:`load_model`.

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.npz"
      >>> save_model(p, np.array([0.5, -1.0]), lam=10.0)
      >>> w, meta = load_model(p); w.tolist(), meta
      ([0.5, -1.0], {'lam': 10.0})
    """
    import json
    if is_weights(model):
        w = np.asarray(model)
        if w.dtype.kind != "f" or w.ndim not in (1, 2) or not np.all(np.isfinite(w)):
            raise ValueError(f"weights must be a finite float array [n] or [n, k], got {w.dtype} "
                             f"{w.shape}")
    for k, v in meta.items():
        ok = (isinstance(v, (str, bool, int, float, np.generic)) or
              isinstance(v, (list, tuple)) and all(isinstance(e, (str, int, float)) for e in v))
        if not ok:
            raise TypeError(f"metadata {k!r} must be a str, bool, int, float or a list of them, "
                            f"got {type(v).__name__}")
    arrays = {}
    tree = _encode(model, arrays, {})
    meta = {k: (v.item() if isinstance(v, np.generic) else list(v) if isinstance(v, tuple) else v)
            for k, v in meta.items()}
    import zipfile
    header = json.dumps({"format": MODEL_FORMAT, "version": MODEL_VERSION,
                         "rankjax_version": __version__, "model": tree, "meta": meta},
                        indent=1, ensure_ascii=False)
    with atomic_write(path, "wb") as fh, zipfile.ZipFile(fh, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("header.json", header.encode("utf-8"))
        for key, a in arrays.items():
            with z.open(key + ".npy", "w") as member:
                np.lib.format.write_array(member, np.asarray(a, order="C"), allow_pickle=False)


def load_model(path, types=()):
    """Loads what :func:`save_model` wrote: ``(model, meta_dict)`` — the weights array
    for linear weights, else the rankjax model. A file that is not a rankjax model,
    is damaged, has another format version, or holds an array its type does not declare
    (a shape, a NaN) is a ``ValueError`` naming the file (and the field). ``types``:
    classes of one's own the file may hold (else found only in imported modules).

    Example:
      >>> import tempfile, pathlib
      >>> p = pathlib.Path(tempfile.mkdtemp()) / "m.npz"
      >>> save_model(p, np.ones(2), graph="normalized")
      >>> load_model(p)[1]
      {'graph': 'normalized'}
    """
    import json
    import zipfile
    if not os.path.isfile(os.fspath(path)):
        raise FileNotFoundError(f"{path}: no such file")
    if not zipfile.is_zipfile(os.fspath(path)):
        with open(os.fspath(path), "rb") as fh:
            damaged = fh.read(2) == b"PK"
        raise ValueError(f"{path} is not a {'readable ' if damaged else ''}rankjax model file ("
                         + ("a damaged zip archive)" if damaged else
                            "a model is a zip archive written by save / save_model)"))
    try:
        with zipfile.ZipFile(os.fspath(path)) as z:
            names = set(z.namelist())
            contents = {}
            for name in names:
                if name == "header.json":
                    contents["header"] = z.read(name).decode("utf-8")
                elif name.endswith(".npy"):
                    with z.open(name) as fh:
                        contents[name[:-4]] = np.lib.format.read_array(fh, allow_pickle=False)
    except (zipfile.BadZipFile, EOFError, OSError, KeyError, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"{path} is not a readable rankjax model file ({e})") from None
    try:
        header = json.loads(str(contents["header"]))
        fmt, version = header["format"], header["version"]
    except (KeyError, ValueError, TypeError):
        if {"format", "version"} <= contents.keys() and str(contents["format"]).startswith("rankjax"):
            raise ValueError(f"{path} is a rankjax model of format version "
                             f"{int(contents['version'])}; this rankjax reads version "
                             f"{MODEL_VERSION}") from None
        raise ValueError(f"{path} is not a rankjax model file") from None
    if fmt != MODEL_FORMAT:
        raise ValueError(f"{path} is not a rankjax model file")
    if version not in (2, MODEL_VERSION):
        raise ValueError(f"{path} is a rankjax model of format version {version}; "
                         f"this rankjax reads version {MODEL_VERSION}")
    try:
        model = _decode(header["model"], contents, tuple(types))
    except ValueError as e:                           # a field, an unknown or unimported type
        raise ValueError(f"{path}: {e}") from None
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path} is a damaged rankjax model file ({e})") from None
    if is_weights(model) and (model.dtype.kind != "f" or model.ndim not in (1, 2)
                              or not np.all(np.isfinite(model))):
        raise ValueError(f"{path}: weights: must be a finite float array [n] or [n, k]")
    return model, header["meta"]
