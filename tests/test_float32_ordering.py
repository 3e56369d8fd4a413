"""Issue 75: float32 measured on the ordering. A ranking model is blind to a constant within a
query, so its float32 error is that of the scores centred within each query, relative to their
spread (:func:`centred_error`); a small kernel width puts every kernel entry near its constant
part, whose rounding the centring leaves behind unless the kernel is evaluated minus it
(``rankjax.kernels.kernel.shifted``)."""
import warnings

import jax
import numpy as np
import pytest

import rankjax as rj
from precision import within
from rankjax.kernels.kernel import shifted
from reference import dense_laplacian, fit_kernel, gaussian

POINTS = [(6.5e-5, 1.5e-4), (1e-4, 1e-3), (1e-3, 1e-2), (1e-2, 5e-2), (1e-5, 1e-3), (1e-3, 1e-4)]
"""(λ, γ) of the issue: the first two answered ``successful`` 10-20 % off before the shift."""


def centred_error(got, want, qid):
    """``|| c(got) - c(want) || / || c(want) ||``, ``c`` the centring within each query."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    _, inv = np.unique(qid, return_inverse=True)
    c = lambda f: f - (np.bincount(inv, f) / np.bincount(inv))[inv]        # noqa: E731
    return np.linalg.norm(c(got) - c(want)) / np.linalg.norm(c(want))


@pytest.fixture(scope="module")
def sets():
    return (rj.make_ranking_data(30, num_features=20, seed=0),
            rj.make_ranking_data(30, num_features=20, seed=1))


@pytest.mark.parametrize("kind,degree,coef0", [("gaussian", None, None), ("polynomial", 1, 1.0),
                                               ("polynomial", 2, 1.0), ("polynomial", 3, 0.5),
                                               ("polynomial", 2, 0.0), ("linear", None, None)])
def test_a_shifted_kernel_is_the_kernel_minus_its_constant_part(kind, degree, coef0):
    rng = np.random.default_rng(0)
    A, B = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    k = {"gaussian": lambda: rj.gaussian_kernel(0.3), "linear": rj.linear_kernel,
         "polynomial": lambda: rj.polynomial_kernel(degree, 0.7, coef0)}[kind]()
    k0 = {"gaussian": 1.0, "linear": 0.0, "polynomial": (coef0 or 0.0) ** (degree or 1)}[kind]
    with jax.enable_x64(True):
        got = np.asarray(rj.kernel_matrix(shifted(k), A, B))
        want = np.asarray(rj.kernel_matrix(k, A, B)) - k0
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def test_the_dual_fit_of_the_shifted_kernel_is_the_kernels_closed_form(sets):
    """float64: the shifted evaluation changes no model (brute force: the closed form
    :math:`(L K + λ I)^{-1} L y` on the unshifted ``K``), and RLS is not shifted."""
    tr, te = sets
    X, Xt = np.asarray(tr.X, np.float64), np.asarray(te.X, np.float64)
    y = np.asarray(tr.y, np.float64)
    with jax.enable_x64(True):
        for lam, gamma in [(1e-3, 1e-2), (0.1, 0.2)]:
            L, K = dense_laplacian(tr.qid), gaussian(X, X, gamma)
            a = fit_kernel(K, y, L, lam)
            # the reference's own rounding: eps ||K|| / λ of its coefficients
            rtol = 100 * np.finfo(np.float64).eps * np.linalg.eigvalsh(K)[-1] / lam
            s = rj.fit(rj.Problem(X, y, tr.qid), rj.Dual(rj.gaussian_kernel(gamma)), lam=lam)
            assert s.value.kernel.shift
            np.testing.assert_allclose(np.asarray(s.value.coef), a, rtol=0,
                                       atol=rtol * np.abs(a).max())
            want = gaussian(Xt, X, gamma) @ a
            np.testing.assert_allclose(np.asarray(rj.predict(s.value, Xt)), want, rtol=0,
                                       atol=rtol * np.abs(a).sum())
        r = rj.fit(rj.Problem(X, y, rj.identity_graph(len(y))), rj.Dual(rj.gaussian_kernel(0.1)),
                   lam=1.0)
        assert not r.value.kernel.shift


KERNEL_SOLVERS = {"Dual": lambda k, m: rj.Dual(k), "Nystrom": lambda k, m: rj.Nystrom(k, m),
                  "Falkon": lambda k, m: rj.Falkon(k, m)}
"""Every solver that fits a kernel; the basis ones with every training row as basis, the
issue's case (1.8-7.2 % off, ``successful``, before the jitter's floor)."""
CASES = [(name, verb) for name in KERNEL_SOLVERS for verb in ("fit", "path", "holdout")
         if verb in rj.capabilities(KERNEL_SOLVERS[name](rj.gaussian_kernel(1.0), 2))]


@pytest.mark.parametrize("lam,gamma", POINTS)
@pytest.mark.parametrize("name,verb", CASES)
def test_float32_kernel_solvers_are_right_on_the_ordering_or_refused(sets, lam, gamma, name, verb):
    """Each point within 1e-2 of float64 on the centred measure, or its lane refused
    (``unresolved_lambda``, NaN, an :class:`UnresolvedLambdaWarning` naming λ)."""
    tr, te = sets
    solver = KERNEL_SOLVERS[name](rj.gaussian_kernel(gamma), len(tr.y))

    def scores(dtype):
        with jax.enable_x64(dtype == np.float64):
            p = rj.Problem(np.asarray(tr.X, dtype), np.asarray(tr.y, dtype), tr.qid)
            if verb == "fit":
                s = rj.fit(p, solver, lam=lam)
                return int(s.result), np.asarray(rj.predict(s.value, np.asarray(te.X, dtype))), te.qid
            if verb == "path":
                s = rj.path(p, solver, lams=[lam])
                return (int(s.result[0]), np.asarray(rj.predict(s.value, np.asarray(te.X, dtype)))[0],
                        te.qid)
            s = rj.holdout(p, solver, lams=[lam])
            return int(s.result[0]), np.asarray(s.value.predictions)[0], tr.qid

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", rj.UnresolvedLambdaWarning)
        code, got, qid = scores(np.float32)
    _, want, _ = scores(np.float64)
    named = [w for w in caught if issubclass(w.category, rj.UnresolvedLambdaWarning)]
    if code == int(rj.RESULTS.unresolved_lambda):
        assert np.isnan(got).all()
        assert any(f"{lam:.3g}" in str(w.message) for w in named), [str(w.message) for w in named]
        return
    assert code == int(rj.RESULTS.successful) and not named
    # the rule's 1e-2, or the rounding of the shifted system where tighter: A eps32 Γ / λ with
    # Γ the largest eigenvalue of S K S (computed here in float64; L a projection, S = L;
    # every row as basis, Φ Φ^T = K + O(ε) and Φ^T L Φ has the same Γ) and A = 100 for the
    # dual (observed about 2), 30 for the basis solvers (observed at most 0.2)
    X = np.asarray(tr.X, np.float64)
    L = dense_laplacian(tr.qid)
    top = np.linalg.eigvalsh(L @ gaussian(X, X, gamma) @ L)[-1]
    A = 100 if name == "Dual" else 30
    bound = min(1e-2, A * np.finfo(np.float32).eps * top / lam)
    within(centred_error(got, want, qid), bound, f"{name} {verb} centred")


@pytest.mark.slow
def test_lbfgs_over_scales_in_float32_ends_resolved():
    """Issue 75: ``tune(..., optimizer=optax.lbfgs())`` over per-feature scales in float32 on
    lambdarank_sample (its non-constant columns): the fit at the returned point answers within
    1e-2 of float64 on the centred measure, or its code says it does not."""
    optax = pytest.importorskip("optax")
    import pathlib
    path = pathlib.Path(__file__).resolve().parents[2] / "shared" / "data" / "lambdarank_sample"
    if not (path / "rank.train").exists():
        pytest.skip("../shared/data/lambdarank_sample is not beside the repository")
    d = rj.io.read_svmlight(str(path / "rank.train"))
    X, y, qid = np.asarray(d.X, np.float32), np.asarray(d.y, np.float32), np.asarray(d.qid)
    X = X[:, X.std(0) > 0]
    gamma = 1.0 / (X.shape[1] * X.var())
    with jax.enable_x64(False):
        r = rj.tune(rj.Problem(X, y, qid), rj.Dual(rj.gaussian_kernel(gamma)), lam=1.0, ard=True,
                    steps=8, optimizer=optax.lbfgs())
    scales = np.asarray(r.scales, np.float64)

    def refit(dtype):
        with jax.enable_x64(dtype == np.float64):
            Xs = np.asarray(X, dtype) * scales.astype(dtype)
            s = rj.fit(rj.Problem(Xs, np.asarray(y, dtype), qid),
                       rj.Dual(rj.gaussian_kernel(float(r.kernel.gamma))), lam=float(r.lam))
            return int(s.result), np.asarray(rj.predict(s.value, Xs))

    code, got = refit(np.float32)
    _, want = refit(np.float64)
    if code != int(rj.RESULTS.successful):
        assert np.isnan(got).all()
        return
    within(centred_error(got, want, qid), 1e-2, "lbfgs point, centred")
