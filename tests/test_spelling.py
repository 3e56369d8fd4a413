"""One spelling per concept across the public signatures (issue 42): validation data is
``valid=`` (a ``Problem`` at the front door), folds ``folds=``, progress ``verbose=``, a basis
``basis=`` (an int, rows or ``rj.Basis``), a metric's direction ``higher_is_better``. The
other spellings below are found in no public signature (of ``rankjax``, ``io``,
``estimators``, ``scale``, ``plot``).
"""
import inspect

import rankjax as rj
from rankjax import estimators, io, plot

OTHER_SPELLINGS = {"X_valid": "valid", "K_valid": "valid", "basis_X": "basis",
                   "basis_method": "basis=rj.Basis(b, method=...)", "cv": "folds",
                   "progress": "verbose", "greater_is_better": "higher_is_better"}



def scan(items, prefix):
    """``{(prefix + name, parameter)}`` of the other spellings in ``items`` (name, object)."""
    found = set()
    for name, obj in items:
        try:
            params = inspect.signature(obj).parameters if callable(obj) else {}
        except (TypeError, ValueError):
            continue
        found |= {(prefix + name, p) for p in params if p in OTHER_SPELLINGS}
    return found


def other_spellings():
    """Over every public function and class of the package, its subpackages and plots."""
    found = set()
    for mod, prefix in ((rj, ""), (io, "io."), (estimators, "estimators."), (rj.scale, "scale."),
                        (plot, "plot.")):
        found |= scan(((n, getattr(mod, n)) for n in mod.__all__), prefix)
    return found


def test_every_public_signature_spells_each_concept_one_way():
    found = other_spellings()
    assert not found, "use the one spelling: " + ", ".join(
        f"{n}({p}=) -> {OTHER_SPELLINGS[p]}" for n, p in sorted(found))


def test_the_check_sees_another_spelling():
    """The scan is not vacuous: a function with ``cv=`` and a class with ``X_valid=``
    are found."""
    def f(X, *, cv=None):
        return X

    class C:
        def __init__(self, X_valid=None):
            pass
    assert scan({"f": f, "C": C}.items(), "") == {("f", "cv"), ("C", "X_valid")}


def test_the_front_door_uses_the_one_spelling():
    for fn in (rj.fit, rj.path, rj.holdout, rj.select, rj.Problem, rj.Nystrom, rj.Falkon):
        assert not set(inspect.signature(fn).parameters) & set(OTHER_SPELLINGS), fn
