"""Censoring-aware concordance (rankjax.metrics.survival): Harrell's and Uno's C against the
comparable pairs enumerated and a Kaplan-Meier estimate written out (brute-force twins, float64),
against scikit-survival where it is installed, under jit/vmap, and bad input refused."""
import jax
import numpy as np
import pytest

import rankjax as rj
from rankjax.metrics.survival import censoring_km


def brute_c(r, t, e, w=None, strata=None):
    """Harrell's (``w`` None) or weighted C over every comparable pair enumerated."""
    w = np.ones(len(r)) if w is None else w
    s = np.zeros(len(r)) if strata is None else strata
    num = den = 0.0
    for i in range(len(r)):
        if not e[i]:
            continue
        for j in range(len(r)):
            if s[i] == s[j] and (t[j] > t[i] or (t[j] == t[i] and not e[j])):
                den += w[i]
                num += w[i] * (1.0 if r[i] > r[j] else 0.5 if r[i] == r[j] else 0.0)
    return num / den if den > 0 else np.nan


def brute_km(tt, te, at):
    """The censoring survival function, time by time (events leave before censorings)."""
    out = []
    for x in at:
        g = 1.0
        for s in np.unique(tt[tt <= x]):
            at_risk = np.sum(tt >= s) - np.sum((tt == s) & te)
            d = np.sum((tt == s) & ~te)
            if d:
                g *= 1 - d / at_risk
        out.append(g)
    return np.array(out)


def case(seed, m=40, levels=8, ties=True):
    rng = np.random.default_rng(seed)
    r = rng.integers(0, 5, m).astype(float) if ties else rng.normal(size=m)
    t = rng.integers(1, levels, m).astype(float)
    e = rng.random(m) < 0.6
    return r, t, e


@pytest.mark.parametrize("seed", range(6))
def test_harrell_c_equals_the_comparable_pairs_enumerated(seed):
    r, t, e = case(seed, ties=seed % 2 == 0)
    assert float(rj.harrell_c(r, t, e)) == pytest.approx(brute_c(r, t, e), abs=1e-12)
    strata = np.random.default_rng(seed).integers(0, 3, r.size)
    assert float(rj.harrell_c(r, t, e, strata)) == pytest.approx(brute_c(r, t, e, strata=strata),
                                                                abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_uno_c_equals_its_weights_written_out(seed):
    r, t, e = case(seed, ties=seed % 2 == 1)
    rng = np.random.default_rng(100 + seed)
    tt, te = rng.integers(1, 10, 50).astype(float), rng.random(50) < 0.5
    G = brute_km(tt, te, t)
    np.testing.assert_allclose(censoring_km(tt, te, t), G, atol=1e-12)
    for tau in (None, 6.0):
        keep = e & (True if tau is None else t < tau)
        w = np.where(keep, 1 / np.where(G > 0, G, 1) ** 2, 0.0)
        want = brute_c(r, t, keep, w)
        assert float(rj.uno_c(r, t, e, tt, te, tau=tau)) == pytest.approx(want, abs=1e-12)


def test_equal_to_scikit_survival_where_installed():
    metrics = pytest.importorskip("sksurv.metrics")
    from sksurv.util import Surv
    for seed in range(4):
        r, t, e = case(seed, m=60, ties=seed % 2 == 0)
        rng = np.random.default_rng(7 + seed)
        tt, te = rng.integers(1, 10, 80).astype(float), rng.random(80) < 0.5
        assert float(rj.harrell_c(r, t, e)) == pytest.approx(
            metrics.concordance_index_censored(e, t, r)[0], abs=1e-12)
        assert float(rj.uno_c(r, t, e, tt, te, tau=7.0)) == pytest.approx(
            metrics.concordance_index_ipcw(Surv.from_arrays(te, tt), Surv.from_arrays(e, t), r,
                                           tau=7.0)[0], abs=1e-12)


def real_set(name):
    """``(X standardised one-hot, event, time)`` of scikit-survival's (or lifelines') set."""
    if name == "rossi":
        r = pytest.importorskip("lifelines.datasets").load_rossi()
        return (r.drop(columns=["week", "arrest"]).to_numpy(float), r["arrest"].to_numpy(bool),
                r["week"].to_numpy(float))
    datasets = pytest.importorskip("sksurv.datasets")
    from sksurv.preprocessing import OneHotEncoder
    X, y = getattr(datasets, {"veterans": "load_veterans_lung_cancer", "whas500": "load_whas500",
                              "gbsg2": "load_gbsg2"}[name])()
    ev, tm = y.dtype.names
    return OneHotEncoder().fit_transform(X).to_numpy(float), y[ev].astype(bool), y[tm].astype(float)


@pytest.mark.parametrize("name", ["veterans", "whas500", "gbsg2", "rossi"])
def test_equal_to_scikit_survival_on_its_data_sets(name):
    """The acceptance of issue 91: both indices equal scikit-survival's to 1e-12 on the real
    sets, on a linear risk and on the same risk rounded (ties), Uno's with and without tau."""
    metrics = pytest.importorskip("sksurv.metrics")
    from sksurv.util import Surv
    X, e, t = real_set(name)
    X = (X - X.mean(0)) / np.where(X.std(0) > 0, X.std(0), 1)
    risk = X @ np.random.default_rng(0).normal(size=X.shape[1])
    train = np.random.default_rng(1).random(t.size) < 0.75
    tau = float(np.quantile(t[train], 0.8))
    for r in (risk, np.round(risk)):
        assert float(rj.harrell_c(r, t, e)) == pytest.approx(
            metrics.concordance_index_censored(e, t, r)[0], abs=1e-12)
        te = ~train & (t < t[train].max())     # Uno's C needs test times inside the training's
        for cut in (None, tau):
            want = metrics.concordance_index_ipcw(Surv.from_arrays(e[train], t[train]),
                                                  Surv.from_arrays(e[te], t[te]), r[te], tau=cut)
            got = rj.uno_c(r[te], t[te], e[te], t[train], e[train], tau=cut)
            assert float(got) == pytest.approx(want[0], abs=1e-12)


def test_under_jit_and_vmap():
    r, t, e = case(3)
    strata = np.arange(r.size) % 2
    eager = float(rj.harrell_c(r, t, e, strata))
    jitted = jax.jit(lambda r, t, e, s: rj.harrell_c(r, t, e, s, num_strata=2))
    assert float(jitted(r, t, e, strata)) == pytest.approx(eager, abs=1e-12)
    lanes = np.stack([r, -r, 2 * r + 1])
    got = jax.vmap(lambda a: rj.harrell_c(a, t, e))(lanes)
    np.testing.assert_allclose(got, [brute_c(a, t, e) for a in lanes], atol=1e-12)
    # reversing the risks mirrors the index (no risk ties)
    r2 = np.random.default_rng(0).normal(size=r.size)
    assert float(rj.harrell_c(r2, t, e)) + float(rj.harrell_c(-r2, t, e)) == pytest.approx(1.0)


def test_bad_survival_input_is_refused_by_name():
    r, t, e = case(4)
    with pytest.raises(ValueError, match="time must have the shape"):
        rj.harrell_c(r, t[:-1], e)
    with pytest.raises(ValueError, match="event must be bool"):
        rj.harrell_c(r, t, e * 2.0)
    with pytest.raises(ValueError, match="risk contains NaN"):
        rj.harrell_c(np.r_[np.nan, r[1:]], t, e)
    with pytest.raises(ValueError, match="tau must be a finite scalar"):
        rj.uno_c(r, t, e, t, e, tau=np.ones(2))
    with pytest.raises(ValueError, match="choose tau below the last training time"):
        rj.uno_c(r, t + 100, e, t, e)                # every test event past the training data
    assert np.isnan(float(rj.harrell_c(r, t, np.zeros_like(e))))    # no event: no pair


# --- bad and degenerate input: the public-surface contract (tests/surface.py) ---

from surface import E, V, nan, surface_test  # noqa: E402

BAD_INPUT = {
    "harrell_c": [
        (lambda d: rj.harrell_c(d.y, d.y, d.y > 0, d.qid[:-1]), E(ValueError, "strata")),
        (lambda d: rj.harrell_c(d.y[:, None], d.y, d.y > 0), E(ValueError, "risk must be")),
        (lambda d: rj.harrell_c(d.y, d.y, (d.y > 0)[:-1]), E(ValueError, "event must have")),
        (lambda d: rj.harrell_c(d.y, d.y, np.zeros(d.m, bool)), V(nan)),
        (lambda d: rj.harrell_c(d.y, d.y, d.y > 0, d.qid), V(lambda v: 0 <= float(v) <= 1)),
    ],
    "uno_c": [
        (lambda d: rj.uno_c(d.y, d.y, d.y > 0, d.y, (d.y > 0)[:-1]), E(ValueError, "event")),
        (lambda d: rj.uno_c(d.y, d.y, d.y > 0, d.y, d.y > 0, tau=np.nan), E(ValueError, "tau")),
        (lambda d: rj.uno_c(d.y, d.y, d.y > 0, d.y + 1, d.y > 0), V(lambda v: 0 <= float(v) <= 1)),
    ],
}
test_bad_and_degenerate_input = surface_test(BAD_INPUT)
