"""Every public name of ``rankjax``, ``rankjax.io`` and ``rankjax.estimators`` has
bad-input cases (issue 11): the cases live beside the tests of each module, in its
``BAD_INPUT`` table (``tests/surface.py`` holds the harness); this test fails when a new
public name has none, or a table names something that is not public.
"""
import importlib
import pathlib

import rankjax as rj
from rankjax import estimators as est
from rankjax import io

TESTS = pathlib.Path(__file__).parent


def tables():
    """``{public name: test module}`` over every test module's ``BAD_INPUT``."""
    out = {}
    for path in sorted(TESTS.glob("test_*.py")):
        if "BAD_INPUT" not in path.read_text():
            continue
        mod = importlib.import_module(path.stem)
        for name in getattr(mod, "BAD_INPUT", {}):
            out.setdefault(name, []).append(path.name)
    return out


TYPES = {"CSRMatrix", "DualModel", "Folds", "IdentityGraph", "Kernel", "KernelModel",
         "LinearModel", "Metric", "PerQuery", "PreferenceGraph", "QueryGraph", "RankingData",
         "Segments", "Selection", "io.Dataset", "UnresolvedLambdaWarning", "CG", "Solution",
         "scale.QueryPartition", "scale.ShardedData", "scale.StreamedProblem", "NystromModel",
         "FeatureMap", "MappedModel", "ScaledModel", "BlendModel", "MemoryPlanError", "GridEdgeWarning",
         "SurvivalData"}
CONSTANTS = {"RESULTS", "io", "scale", "io.MODEL_FORMAT", "io.MODEL_VERSION",
             "scale.AXIS"}   # data, no input




def public_names():
    return ({n for n in rj.__all__} | {f"io.{n}" for n in io.__all__}
            | {f"estimators.{n}" for n in est.__all__} | {f"scale.{n}" for n in rj.scale.__all__})


def test_every_public_name_is_covered():
    cases = tables()
    missing = public_names() - set(cases) - TYPES - CONSTANTS
    assert not missing, f"public names without a bad-input case (a BAD_INPUT table): {sorted(missing)}"
    stale = (set(cases) | TYPES | CONSTANTS) - public_names()
    assert not stale, f"cases for names that are not public: {sorted(stale)}"
    twice = {n: fs for n, fs in cases.items() if len(fs) > 1}
    assert not twice, f"a public name's cases in two modules: {twice}"
    for name in TYPES:
        mod, _, short = name.rpartition(".")
        obj = getattr(getattr(rj, mod) if mod else rj, short)
        assert isinstance(obj, type), name
