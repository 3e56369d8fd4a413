"""The LAPACK module (``rankjax._core.lapack``): equal to JAX's own factorisations and their
derivatives (float64), and on the CPU no compiled program of the verbs holds a batched
LAPACK call, under a caller's ``vmap`` included (jaxlib 0.10 to 0.11 runs a batched call's
chunks on the intra-op pool and waits on it: as many such calls at once as pool threads
never return; the module docstring has the whole story)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rankjax as rj
from rankjax._core import lapack
from rankjax._core.backend import forced_paths

RNG = np.random.default_rng(0)


def _spd(*batch, n=5):
    M = RNG.standard_normal(batch + (n, n))
    return M @ np.swapaxes(M, -1, -2) + n * np.eye(n)


def _tol(A):
    """The problem's own scale: a few hundred roundings of its condition number."""
    return 300 * np.finfo(np.float64).eps * np.linalg.cond(A).max()


@pytest.mark.parametrize("paths", ["cpu", "accelerator"])
def test_equal_to_jax_factorisations(paths):
    A = _spd(3)
    B = RNG.standard_normal((3, 5, 2))
    v = RNG.standard_normal(5)
    sl = jax.scipy.linalg.solve_triangular
    with forced_paths(paths):
        C = lapack.cholesky(A)
        Ct = jnp.swapaxes(C, -1, -2)
        pairs = [
            (C, np.linalg.cholesky(A)),
            (lapack.cholesky(jnp.tril(A), symmetrize=False), np.linalg.cholesky(A)),
            (lapack.solve_triangular(C, B), sl(C, B, lower=True)),
            (lapack.solve_triangular(C[0], B), sl(C[0], B, lower=True)),          # one factor
            (lapack.solve_triangular(C[1], v, trans=True), sl(C[1], v, lower=True, trans=1)),
            (lapack.solve_triangular(Ct, B, lower=False), sl(Ct, B, lower=False)),
            (lapack.cho_solve(C, B), np.linalg.solve(A, B)),
            (lapack.eigh(A)[0], np.linalg.eigvalsh(A)),
        ]
        w, V = lapack.eigh(A)
    for i, (got, want) in enumerate(pairs):
        np.testing.assert_allclose(got, want, rtol=_tol(A), atol=_tol(A) * np.abs(want).max(),
                                   err_msg=str(i))
    np.testing.assert_allclose(V @ (w[..., None] * np.swapaxes(V, -1, -2)), A, rtol=_tol(A))


def _mine(s, A, b):
    C = lapack.cholesky(A * s + jnp.eye(A.shape[0]))
    y = lapack.cho_solve(C, b)
    w, V = lapack.eigh(A * s)
    return jnp.sum(y ** 2) + jnp.sum(jnp.log(jnp.diag(C))) + jnp.sum(w ** 2) + jnp.sum(V[:, -1] ** 2)


def _jax(s, A, b):
    C = jnp.linalg.cholesky(A * s + jnp.eye(A.shape[0]))
    y = jax.scipy.linalg.cho_solve((C, True), b)
    w, V = jnp.linalg.eigh(A * s)
    return jnp.sum(y ** 2) + jnp.sum(jnp.log(jnp.diag(C))) + jnp.sum(w ** 2) + jnp.sum(V[:, -1] ** 2)


def test_derivatives_equal_jax_under_every_transformation():
    """``grad``, ``jacfwd``, ``hessian``, ``vmap`` of ``grad`` and ``grad`` of ``vmap``, and
    the gradient by the matrix itself: equal to JAX's own rules (distinct eigenvalues)."""
    A, b = _spd(), RNG.standard_normal(5)
    ss = jnp.array([0.5, 1.0, 2.0])
    tol = 1e3 * _tol(A)
    for s in (0.5, 2.0):
        np.testing.assert_allclose(_mine(s, A, b), _jax(s, A, b), rtol=tol)
        np.testing.assert_allclose(jax.grad(_mine)(s, A, b), jax.grad(_jax)(s, A, b), rtol=tol)
        np.testing.assert_allclose(jax.jacfwd(_mine)(s, A, b), jax.grad(_jax)(s, A, b), rtol=tol)
        np.testing.assert_allclose(jax.hessian(_mine)(s, A, b), jax.hessian(_jax)(s, A, b),
                                   rtol=10 * tol)
    want = jax.vmap(jax.grad(_jax), (0, None, None))(ss, A, b)
    np.testing.assert_allclose(jax.vmap(jax.grad(_mine), (0, None, None))(ss, A, b), want,
                               rtol=tol)
    np.testing.assert_allclose(
        jax.grad(lambda s: jnp.sum(jax.vmap(_mine, (0, None, None))(s, A, b)))(ss), want, rtol=tol)
    by_matrix = [jax.grad(lambda M, f=f: f(1.0, M, b))(A) for f in (_mine, _jax)]
    np.testing.assert_allclose(*by_matrix, rtol=tol, atol=tol * np.abs(by_matrix[1]).max())


def _lapack_shapes(fn, *args):
    """The result shapes of every LAPACK custom call in ``fn``'s compiled program."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    return [tuple(int(d) for d in m.group(1).split(",") if d)
            for line in text.splitlines() if 'custom_call_target="lapack_' in line
            for m in [re.search(r"=\s*\(?\s*[a-z0-9]+\[([\d,]*)\]", line)]]


def _programs():
    """``(name, function, argument)``: each verb's program under a caller's ``vmap``
    (over λ, γ or label columns) and ``grad``."""
    d = rj.make_ranking_data(8, num_features=4, docs_per_query=(5, 9), seed=1)
    X, y, q = (np.asarray(a) for a in (d.X, d.y, d.qid))
    p = rj.Problem(X, y, q)
    folds = rj.make_folds(p.graph)
    lams = jnp.array([0.1, 1.0])
    gammas = jnp.array([0.1, 0.5, 2.0])
    g = rj.gaussian_kernel
    ho = lambda s: rj.holdout(p, s, lams=lams, folds=folds).value.predictions       # noqa: E731
    return [
        ("primal fit over λ", jax.vmap(lambda lam: rj.fit(p, rj.Primal(), lam=lam).value.weights),
         jnp.array([0.1, 1.0, 10.0])),
        ("primal hold-out over labels", jax.vmap(lambda Y: rj.holdout(
            rj.Problem(X, Y, q), rj.Primal(), lams=lams, folds=folds).value.predictions),
         jnp.stack([y, X[:, 0], X[:, 1]])),
        ("dual hold-out over γ", jax.vmap(lambda t: ho(rj.Dual(g(t)))), gammas),
        ("dual fit over γ", jax.vmap(lambda t: rj.fit(p, rj.Dual(g(t)), lam=1.0).value.coef), gammas),
        ("nystrom hold-out over γ", jax.vmap(lambda t: ho(rj.Nystrom(g(t), 20))), gammas),
        ("nystrom row blocks over γ", jax.vmap(lambda t: ho(rj.Nystrom(g(t), 20, block_rows=16))),
         gammas),
        ("nystrom path over γ", jax.vmap(lambda t: rj.path(p, rj.Nystrom(g(t), 20), lams=lams)
                                         .value.coef), gammas),
        ("falkon fit over γ", jax.vmap(lambda t: rj.fit(p, rj.Falkon(g(t), 20), lam=1.0).value.coef),
         gammas),
        ("grad of the nystrom hold-out by γ, over γ", jax.vmap(jax.grad(
            lambda t: jnp.sum(ho(rj.Nystrom(g(t), 20)) ** 2))), gammas),
    ]


PROGRAMS = _programs()


@pytest.mark.parametrize("i", range(len(PROGRAMS)), ids=[c[0] for c in PROGRAMS])
def test_no_compiled_program_batches_a_lapack_call_on_the_cpu(i):
    name, fn, arg = PROGRAMS[i]
    with forced_paths("cpu"):
        shapes = _lapack_shapes(fn, arg)
    assert shapes, f"{name}: no LAPACK call seen (the parse broke?)"
    batched = [s for s in shapes if len(s) > 2]
    assert not batched, f"{name}: batched LAPACK calls {batched}"


def test_the_accelerator_paths_batch_them():
    """The other side: on the accelerator paths the same vmapped program is one batched
    call (cuSOLVER's), which also shows the parse above sees a batched call."""
    name, fn, arg = PROGRAMS[0]
    with forced_paths("accelerator"):
        shapes = _lapack_shapes(fn, arg)
    assert any(len(s) > 2 for s in shapes), shapes
