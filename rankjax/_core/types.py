"""What the library's parts agree on: the protocols of a metric and of a graph operator
(``typing.Protocol``; the code and ``docs/design.md`` refer to them), and the registry of
model types that model files are decoded through (each type registers where it is defined,
:func:`saveable`, so that :mod:`rankjax.io` never imports the package).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Dict, Optional, Protocol, Tuple, runtime_checkable

import numpy as np


@runtime_checkable
class MetricFn(Protocol):
    """A ranking metric: ``fn(scores [m(, k)], y [m], qid [m] | None, *, num_queries,
    **options) -> value``, with its direction. Every rankjax metric and
    :class:`rankjax.Metric` satisfy it; the selectors (``select_lambda``,
    ``cross_validate``, CG's validation criterion) call nothing else."""

    higher_is_better: bool

    def __call__(self, scores, y, qid=None, *, num_queries: Optional[int] = None,
                 **options) -> Any: ...


@runtime_checkable
class GraphOperator(Protocol):
    r"""What the solvers use of a graph ``L`` on ``m`` rows (``QueryGraph``,
    ``PreferenceGraph``, ``IdentityGraph``; Pahikkala et al. 2009, §3): ``L v`` by
    segment sums, the symmetric systems :math:`X^T L X` / ``S K S`` and the hold-out blocks.
    The solvers call only these methods, so they know no graph type."""

    num_rows: int
    takes_labels: bool

    def mv(self, v) -> Any: ...                                  # L v
    def check_labels(self, y, name: str = "y") -> Any: ...
    def normal_equations(self, X, y, root: bool = False) -> Tuple[Any, Any]: ...  # X^T L X, X^T L y
    def dual_root(self, dtype) -> Any: ...                       # S = L^{1/2} (apply, rhs)
    def segments(self) -> Tuple[Any, int]: ...                   # (segment ids, count)
    def fold_units(self) -> Tuple[Any, int]: ...                 # hold-out units per row
    def fold_order(self) -> Any: ...                             # rows of a unit contiguous
    def restrict(self, rows, size: Optional[int] = None) -> "GraphOperator": ...
    def prefix(self, u: int) -> "GraphOperator": ...             # the first u rows' graph
    def check_splittable(self, what: str) -> None: ...           # raises for edges across splits
    def rhs(self, y, dtype) -> Any: ...                          # L y (edges: M N)
    def root_mv(self, v) -> Any: ...                             # S v, S S^T = L
    def factor(self) -> Tuple[Any, Any, Any]: ...                # (R, R^T, rhs), R R^T = L
    def block_root(self, idx, mask, dtype) -> Any: ...           # B, B B^T = L_UU (a fold)
    def root_rows(self, idx, mask, V) -> Any: ...                # B^T V of a fold
    def block_mv(self, idx, mask, v) -> Any: ...                 # L_UU v of a fold
    def criterion(self, y, metric="pairwise_error", higher_is_better=None, **kw) -> Any: ...
    def loss(self, f, y) -> Any: ...                             # (y - f)^T L (y - f)


MODEL_TYPES: Dict[str, type] = {}
"""Model and result types by name, for decoding model files (:mod:`rankjax.io.models`)."""


def register_model_types(*types: type) -> None:
    """Adds NamedTuple / dataclass types to ``MODEL_TYPES`` (a type must be registered
    before a file holding it is loaded: :func:`saveable` registers it where it is defined),
    and to ``jax.export``'s pytree serialization (as ``rankjax.<name>``), so that a
    function taking a model as an argument exports, serializes and loads."""
    for t in types:
        if not isinstance(t, type):
            raise TypeError(f"a model type must be a class, got {t!r}")
        if MODEL_TYPES.get(t.__name__) is not t:
            _exportable(t)
        MODEL_TYPES[t.__name__] = t


def _exportable(t: type) -> None:
    """Registers ``t`` with ``jax.export``: a NamedTuple by its fields, a dataclass pytree
    with its static fields (strings, numbers, tuples of them) as JSON. A class that is no
    pytree (a description such as ``Basis``: a leaf) or whose name another class holds
    already is left out."""
    from jax import export
    name = f"rankjax.{t.__name__}"
    try:
        if issubclass(t, tuple) and hasattr(t, "_fields"):
            export.register_namedtuple_serialization(t, serialized_name=name)
        elif dataclasses.is_dataclass(t):
            export.register_pytree_node_serialization(
                t, serialized_name=name, serialize_auxdata=lambda aux: json.dumps(aux).encode(),
                deserialize_auxdata=lambda b: _tuples(json.loads(b.decode())))
    except ValueError:
        pass


def _tuples(v):
    """JSON's lists back to the tuples they were (static fields are hashable)."""
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def model_type(name: str) -> type:
    """The registered type called ``name``; a ValueError for an unknown one."""
    try:
        return MODEL_TYPES[name]
    except KeyError:
        raise ValueError(f"unknown model type {name!r}") from None


class FieldError(ValueError):
    """A field of a model that is not what its type declares; ``field`` names it (from the
    object checked; a model file's reader prefixes its way from the top, ``state.model_.coef``)."""

    def __init__(self, field: str, msg: str):
        super().__init__(f"{field}: {msg}" if field else msg)
        self.field, self.msg = field, msg

    def under(self, where: str) -> "FieldError":
        """The same error with ``where`` before its field."""
        return FieldError(".".join(p for p in (where, self.field) if p), self.msg)


def check_saved(obj) -> None:
    """Raises :class:`FieldError` where ``obj``'s arrays disagree with what its
    type declares (what a model file is checked against when it is read): ``DIMS``,
    ``{field: ("m", "n", "k?")}`` (each field's axes by name, a trailing ``?`` axis optional;
    an axis name stands for one size across the fields), ``FINITE`` (fields that hold no
    NaN or infinity) and an optional ``check_parts()`` (how its parts fit together)."""
    cls, bound = type(obj), {}
    for name, spec in getattr(cls, "DIMS", {}).items():
        a = getattr(obj, name)
        if a is None:
            continue
        shape = tuple(np.shape(a))
        if len(shape) not in (len(spec), len(spec) - spec[-1].endswith("?")):
            raise FieldError(name, f"an array of shape {list(shape)}, expected "
                                   f"[{', '.join(spec)}]")
        for axis, size in zip(spec, shape):
            axis = axis.rstrip("?")
            size0, where = bound.setdefault(axis, (size, name))
            if size0 != size:
                raise FieldError(name, f"{axis} = {size} (shape {list(shape)}), but {where} "
                                       f"has {axis} = {size0}")
    for name in getattr(cls, "FINITE", ()):
        a = getattr(obj, name)
        if a is not None and np.asarray(a).dtype.kind in "fc" and not np.all(np.isfinite(a)):
            raise FieldError(name, "holds NaN or infinite values")
    if hasattr(obj, "check_parts"):
        obj.check_parts()


def width_of(model) -> Optional[int]:
    """The columns of the rows ``model`` scores, where it records them (else ``None``)."""
    n = getattr(model, "num_features", None)
    return int(n) if isinstance(n, (int, np.integer)) and n >= 0 else None


def saveable(cls: type) -> type:
    """Class decorator: ``cls`` may be saved with :func:`rankjax.io.save_model` and read
    back (registered in ``MODEL_TYPES`` under its name)."""
    register_model_types(cls)
    return cls
