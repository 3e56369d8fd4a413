import numpy as np
import pytest

import rankjax as rj
import reference as ref
from rankjax.learners.rankboost import _thresholds


@pytest.mark.parametrize("levels", [2, 5])
def test_rankboost_equals_enumerated_pairs(rng, levels):
    for _ in range(3):
        m, n = 60, 4
        X = rng.standard_normal((m, n))
        X[:, 0] = np.round(X[:, 0])                 # repeated values
        y = rng.integers(0, levels, m).astype(float)
        qid = rng.integers(0, 4, m)
        model = rj.rankboost(X, y, qid, rounds=8, num_thresholds=6)
        T, _ = _thresholds(X, 6)
        expect = ref.rankboost(X, y, qid, T, 8)
        for t, (f, th, alpha, r) in enumerate(expect):
            assert int(model.feature[t]) == f and float(model.threshold[t]) == th
            assert abs(float(model.alpha[t]) - alpha) < 1e-9 and abs(float(model.r[t]) - r) < 1e-9
        f_ref = sum(a * (X[:, f] > th) for f, th, a, _ in expect)
        np.testing.assert_allclose(rj.rankboost_predict(model, X), f_ref, atol=1e-9)


def test_rankboost_input_errors(rng):
    X = rng.standard_normal((10, 2))
    with pytest.raises(ValueError, match="rounds"):
        rj.rankboost(X, np.arange(10.), rounds=0)
    with pytest.raises(ValueError, match="rows"):
        rj.rankboost(X, np.arange(5.))


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, surface_test  # noqa: E402

BAD_INPUT = {}
BAD_INPUT["rankboost"] = [
        (lambda d: rj.rankboost(d.X, d.y, d.qid, rounds=2.5), E(TypeError, "rounds")),
        (lambda d: rj.rankboost(d.X, d.y, d.qid, num_thresholds=0), E(ValueError, "num_thresholds")),
        (lambda d: rj.rankboost(np.c_[d.X[:, :-1], d.nanv], d.y, d.qid), E(ValueError, "X")),
    ]
BAD_INPUT["rankboost_predict"] = [
        (lambda d: rj.rankboost_predict(rj.rankboost(d.X, d.y, d.qid, rounds=2), d.X[:, :2]),
         E(ValueError, "trained on")),
        (lambda d: rj.rankboost_predict(d.X, d.X), E(TypeError, "model")),
    ]

test_bad_and_degenerate_input = surface_test(BAD_INPUT)
