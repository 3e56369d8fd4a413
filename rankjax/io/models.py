"""Model files: a zip archive with a UTF-8 JSON header (format, version, the model's
structure) and one ``.npy`` member per array; the library's types are looked up in the
model registry (:mod:`rankjax._core.types`), never by importing the package. A type of
one's own (a solver written with the public API, its model) is saved with the module
that defines it and found there when loaded, as ``pickle`` finds classes: loading imports
that module (it must be importable, or already imported, where the file is read).
"""
from __future__ import annotations

import dataclasses
import importlib
import os
import sys

import numpy as np

from .._core.types import model_type
from .._version import __version__
from .files import atomic_write

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


def _encode(obj, arrays):
    """A model as JSON-able structure; arrays go to ``arrays`` (names ``a0, a1 ..``)."""
    if obj is None or isinstance(obj, (str, bool, int, float)):
        return obj
    if isinstance(obj, np.generic):
        return obj.item()
    if hasattr(obj, "_fields"):                                  # a NamedTuple
        return {**_type_of(obj),
                "fields": {f: _encode(getattr(obj, f), arrays) for f in obj._fields}}
    if dataclasses.is_dataclass(obj):                            # Kernel, a solver
        return {**_type_of(obj),
                "fields": {f.name: _encode(getattr(obj, f.name), arrays)
                           for f in dataclasses.fields(obj)}}
    if isinstance(obj, (list, tuple)):
        return {"list": [_encode(v, arrays) for v in obj]}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError("model dictionaries must have string keys")
        return {"dict": {k: _encode(v, arrays) for k, v in obj.items()}}
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        a = np.asarray(obj)
        if a.dtype.kind not in "biufU":                          # numbers, text (no objects)
            raise TypeError(f"cannot save an array of dtype {a.dtype}")
        key = f"a{len(arrays)}"
        arrays[key] = a
        return {"array": key}
    raise TypeError(f"cannot save a value of type {type(obj).__name__}")


def _decode(tree, arrays):
    if not isinstance(tree, dict):
        return tree
    if "array" in tree:
        return arrays[tree["array"]]
    if "list" in tree:
        return tuple(_decode(v, arrays) for v in tree["list"])
    if "dict" in tree:
        return {k: _decode(v, arrays) for k, v in tree["dict"].items()}
    cls = model_type(tree["type"]) if "module" not in tree else _imported(tree)
    return cls(**{k: _decode(v, arrays) for k, v in tree["fields"].items()})


def _type_of(obj):
    """The type's name, and for a type defined outside the library its module."""
    cls = type(obj)
    if cls.__module__.split(".")[0] == "rankjax":
        return {"type": cls.__name__}
    return {"type": cls.__qualname__, "module": cls.__module__}


def _imported(tree):
    """The class ``tree["type"]`` of module ``tree["module"]`` (imported if it is not
    yet), a dataclass or NamedTuple; a ValueError naming both otherwise."""
    name, module = tree["type"], tree["module"]
    try:
        obj = sys.modules.get(module) or importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"the model holds a {name} of module {module!r}, which cannot be "
                         f"found here ({type(e).__name__}: {e}): import the module that "
                         "defines it before loading") from None
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
    tree = _encode(model, arrays)
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
                np.lib.format.write_array(member, np.ascontiguousarray(a), allow_pickle=False)


def load_model(path):
    """Loads what :func:`save_model` wrote: ``(model, meta_dict)`` — the weights array
    for linear weights, else the rankjax model. A file that is not a rankjax model,
    is damaged, or has another format version is a ``ValueError``.

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
        model = _decode(header["model"], contents)
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path} is a damaged rankjax model file ({e})") from None
    return model, header["meta"]
