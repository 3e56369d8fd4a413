"""The route and memory plan of a Nyström fit, path or hold-out, from the shapes alone
(before any work): ``K_mR`` whole or in row blocks, each figure checked against the free
memory (:class:`~rankjax._core.memory.MemoryPlanError`)."""


from typing import NamedTuple, Optional

import numpy as np

from .._core.checks import check_count
from .._core.host import is_concrete
from .._core.memory import check_memory
from .._core.segments import padded_size
from ..graphs.folds import FOLD_BUDGET
from .fold_batches import BATCH_ROWS

__all__ = ["Plan", "fold_bound", "nystrom_plan", "check_nystrom_memory", "whole_fold_entries", "PAD_WORK",
           "WHOLE_ENTRIES"]


class Plan(NamedTuple):
    """What a Nyström solve decides once, before any work (:meth:`~rankjax.Nystrom.plan`):
    ``rows`` of a batch of whole folds in row blocks (``None``: ``K_mR`` whole), for ``L`` λ
    and folds of up to ``fold_rows`` rows, its memory checked."""

    rows: Optional[int]
    L: int
    fold_rows: int

    def serves(self, L: int, fold_rows: int) -> bool:
        """Whether this plan covers a hold-out of ``L`` λ on folds of ``fold_rows`` rows."""
        return self.L >= L and self.fold_rows >= fold_rows


def largest_query(graph) -> int:
    """The rows of the graph's largest query: 1 without query counts (a preference or
    global graph) or when they are traced (nothing to read on the host)."""
    counts = getattr(graph, "counts", None)
    return 1 if counts is None or not is_concrete(counts) else int(np.max(np.asarray(counts)))


def fold_bound(graph, m: int, folds) -> int:
    """The rows of the largest fold: of drawn :class:`~rankjax.Folds` their widest block;
    before they are drawn, of leave-query-out (``folds=None``) the largest query, of ``k``
    folds of whole queries at most ``m // k`` rows and one query more, padded to the bucket
    the drawn folds take (:func:`~rankjax._core.segments.padded_size`)."""
    if hasattr(folds, "index"):
        return max(int(i.shape[1]) for i in folds.index)
    k = getattr(folds, "num_folds", folds)
    return int(padded_size(largest_query(graph) + (m // int(k) if k is not None else 0)))   # drawn: bucketed


PAD_WORK = 1e10
r"""Below this :math:`m b^2` the basis of the row-block passes is padded to its bucket
(:func:`~rankjax._core.segments.padded_size`: a new basis size in the bucket compiles
nothing); above it the basis is exact, where the padding costs more than a compilation
(measured: benchmarks/REPORT.md §8)."""


def check_nystrom_memory(m, b, dtype, count=4, what="the Nyström hold-out",
                         alternatives="use a smaller basis, or rj.Falkon(kernel, basis) "
                                      "(row blocks)"):
    """Refuses up front a Nyström computation whose ``count`` ``m x b`` blocks do not fit."""
    check_memory(count * m * b * np.dtype(dtype).itemsize,
                 f"{what} ({m} rows x {b} basis rows)", alternatives)


def whole_fold_entries(P, bp, L):
    """Entries a batch of folds of ``P`` (padded) rows holds in the whole hold-out: a fold
    larger than the basis is retrained without it, through the dense root of its ``P x P``
    Laplacian block and its ``P x b`` rows (:func:`~rankjax.solvers.holdout.holdout_from_system`),
    a smaller one solves its ``P x P`` system; the batch of folds takes at most
    :data:`~rankjax.graphs.folds.FOLD_BUDGET` entries beyond one fold."""
    return FOLD_BUDGET + P * P + 2 * P * bp + 2 * L * P


WHOLE_ENTRIES = 2 ** 21
"""Up to this many entries of ``K_mR`` (``m b``) the Nyström fit, path and hold-out hold it
whole without ``block_rows``: one program, where the row-block passes dispatch four
(measured: benchmarks/REPORT.md §8)."""


def nystrom_plan(m, n, bp, dtype, *, L=1, tail=1, fold_rows=1, block_rows=None,
                 what="the Nyström hold-out", folds=True):
    """The route and memory plan of a Nyström fit, path or hold-out on ``m`` rows and
    ``bp`` basis rows, from the shapes (before any work): the rows of a batch of whole
    folds (``block_rows``, default :data:`BATCH_ROWS`: the row-block passes, faster than
    holding ``K_mR`` above :data:`WHOLE_ENTRIES`, 10,000 x 1,000 to :math:`10^{6}` x 1,000), or ``None``
    (``K_mR`` and ``Φ`` whole) when ``block_rows`` is not given and a fold has more rows
    than the basis (the whole hold-out retrains without such a fold in ``b x b``, where the
    row-block one solves its ``P x P`` systems) or ``m b`` is at most
    :data:`WHOLE_ENTRIES`. Either figure is checked
    (:class:`MemoryPlanError`): whole, 4 ``m x b`` blocks and, for a hold-out
    (``folds``), a batch of folds (:func:`whole_fold_entries`); in row blocks, the rows ``m x
    n``, the ``[L, m]`` predictions, a batch's blocks and dense fold roots, the folds'
    systems of up to ``fold_rows`` rows and the ``b x b`` decomposition."""
    item = np.dtype(dtype).itemsize
    if block_rows is None and (fold_rows > bp or m * bp <= WHOLE_ENTRIES):
        fold = whole_fold_entries(int(padded_size(fold_rows)), bp, L) if folds else 0
        need = (4 * m * bp + fold) * item
        shape = f"{m} rows x {bp} basis rows" + (f", folds of up to {fold_rows} rows"
                                                  if folds else "")
        check_memory(need, f"{what} ({shape})", ("folds larger than the basis are retrained without them "
                               "through their P x P Laplacian blocks: use smaller folds or "
                               "queries, or fit rj.Falkon(kernel, basis) on a validation "
                               "split" if folds and fold_rows > bp else
                               "use a smaller basis, leave-query-out folds (folds=None, in "
                               "row blocks), or rj.Falkon(kernel, basis)"))
        return None
    rows = BATCH_ROWS if block_rows is None else check_count(block_rows, "block_rows")
    batch = max(rows, fold_rows)
    need = (m * n + 3 * L * m * tail + 8 * batch * bp + batch * fold_rows
            + 2 * L * batch * fold_rows + 10 * bp * bp) * item
    check_memory(need, f"{what} ({m} rows x {bp} basis rows, in row blocks of {rows})",
                 "use a smaller basis (rj.Nystrom(kernel, basis) / RankRLSCV(basis=...)), "
                 "leave-query-out folds (folds=None), or rj.Falkon(kernel, basis) (conjugate "
                 "gradients, early stopping)")
    return rows
