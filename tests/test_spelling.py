"""One spelling per concept across the public signatures (issue 42): validation data is
``valid=`` (a ``Problem`` at the front door), folds ``folds=``, progress ``verbose=``, a basis
``basis=`` (an int, rows or ``rj.Basis``), a metric's direction ``higher_is_better``. The
parameters below are the other spellings still in the per-cell functions that are leaving
the top level; the list may only shrink: a new public signature with one of them fails.
"""
import inspect

import rankjax as rj
from rankjax import estimators, io

OTHER_SPELLINGS = {"X_valid": "valid", "K_valid": "valid", "basis_X": "basis",
                   "basis_method": "basis=rj.Basis(b, method=...)", "cv": "folds",
                   "progress": "verbose", "greater_is_better": "higher_is_better"}

STILL_THERE = {
    ("FalkonModel", "basis_X"), ("NystromPath", "basis_X"), ("RankSVMKernelModel", "basis_X"),
    ("cross_validate", "greater_is_better"), ("estimators.RankRLSCV", "basis_method"),
    ("estimators.RankRLSCV", "cv"), ("kpcrank_path", "K_valid"),
    ("permutation_test", "greater_is_better"), ("rankrls_cg", "greater_is_better"),
    ("rankrls_cg_dual", "greater_is_better"), ("rankrls_dual_path", "K_valid"),
    ("rankrls_falkon", "greater_is_better"), ("rankrls_nystrom_path", "X_valid"),
    ("rankrls_primal_path", "X_valid"),
    ("select_lambda", "greater_is_better"),
    ("sharded_cg", "greater_is_better"), ("sharded_falkon", "basis_X"),
    ("sharded_falkon", "greater_is_better"), ("sharded_kernel_grid", "greater_is_better"),
    ("validation_criterion", "greater_is_better"),
}
"""(public name, parameter) pairs with another spelling, to be removed by issue 42."""


def other_spellings():
    found = set()
    for mod, prefix in ((rj, ""), (io, "io."), (estimators, "estimators.")):
        for name in mod.__all__:
            obj = getattr(mod, name)
            try:
                params = inspect.signature(obj).parameters if callable(obj) else {}
            except (TypeError, ValueError):
                continue
            found |= {(prefix + name, p) for p in params if p in OTHER_SPELLINGS}
    return found


def test_no_new_signature_spells_a_concept_another_way():
    new = other_spellings() - STILL_THERE
    assert not new, "use the one spelling: " + ", ".join(
        f"{n}({p}=) -> {OTHER_SPELLINGS[p]}" for n, p in sorted(new))


def test_the_list_of_other_spellings_only_shrinks():
    gone = STILL_THERE - other_spellings()
    assert not gone, f"remove these from STILL_THERE: {sorted(gone)}"


def test_the_front_door_uses_the_one_spelling():
    for fn in (rj.fit, rj.path, rj.holdout, rj.select, rj.Problem, rj.Nystrom, rj.Falkon):
        assert not set(inspect.signature(fn).parameters) & set(OTHER_SPELLINGS), fn
