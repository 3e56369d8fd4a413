"""Mixed-precision refinement and the rounding probe (issue 88; ``rankjax.solvers.floors``).

A float32 ``eigh`` answers ``(G + λ I) x = b`` only to about ``eps Γ / λ``; refined with
residuals formed in float64 it answers to float32's own rounding, and its last correction
says, a posteriori, which lanes settled."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rankjax._core.linalg import eigh_psd
from rankjax.solvers.floors import REFINE_RTOL, refined_coords, refines, rounding_signs

EPS32 = float(np.finfo(np.float32).eps)


def _system(p=120, seed=0):
    """A PSD system with a kernel's decaying spectrum (largest 1, down to 1e-9) and a
    right-hand side in its range."""
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((p, p)))
    G = (Q * np.logspace(0, -9, p)) @ Q.T
    return (G + G.T) / 2, G @ rng.standard_normal(p)


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def test_refinement_answers_in_float32_what_the_float32_eigh_misses():
    G, b = _system()
    lams = np.array([1e-9, 3e-6, 1e-5, 1e-3, 1.0])          # 1e-9 below eps Γ: cannot settle
    exact = [np.linalg.solve(G + lam * np.eye(len(b)), b) for lam in lams]
    with jax.enable_x64(False):
        assert refines(jnp.float32)
        G32, b32 = jnp.asarray(G, jnp.float32), jnp.asarray(b, jnp.float32)
        eig = eigh_psd(G32)
        c, settled = refined_coords(eig, G32, b32, jnp.asarray(lams, jnp.float32))
        c0, _ = refined_coords(eig, G32, b32, jnp.asarray(lams, jnp.float32), steps=0)
        U = np.asarray(eig.vectors, np.float64)
        x, x0 = np.asarray(c, np.float64) @ U.T, np.asarray(c0, np.float64) @ U.T
    settled = np.asarray(settled)
    assert not settled[0] and settled[1:].all()
    # G rounded to float32 moves the solution by eps ||G|| / λ at most; refined, the answer is
    # within that of the exact one wherever it settled, and the unrefined one was far off
    for i in range(1, len(lams)):
        bound = 10 * EPS32 / lams[i] + 10 * EPS32
        assert _rel(x[i], exact[i]) <= bound, (lams[i], _rel(x[i], exact[i]))
    for i in (1, 2):                                          # λ near eps Γ: refinement matters
        assert _rel(x0[i], exact[i]) >= 10 * _rel(x[i], exact[i])


def test_float64_is_not_refined():
    G, b = _system(40)
    with jax.enable_x64(True):
        assert not refines(jnp.float64)
        eig = eigh_psd(jnp.asarray(G))
        c, settled = refined_coords(eig, jnp.asarray(G), jnp.asarray(b), jnp.asarray([1e-3, 1.0]))
        assert np.asarray(settled).all()
        x = np.asarray(c) @ np.asarray(eig.vectors).T
    assert _rel(x[0], np.linalg.solve(G + 1e-3 * np.eye(40), b)) <= 1e-9
    assert REFINE_RTOL == pytest.approx(1e-3)


def test_rounding_signs_are_symmetric_balanced_and_not_a_pattern():
    S = np.asarray(rounding_signs((300, 300), np.float32))
    assert set(np.unique(S)) == {-1.0, 1.0} and np.array_equal(S, S.T)
    assert abs(S.mean()) < 0.02
    # not low-rank: a random-sign matrix has singular values near sqrt(m), none dominant
    s = np.linalg.svd(S, compute_uv=False)
    assert s[0] < 3 * np.sqrt(300)
    R = np.asarray(rounding_signs((50, 7), np.float32))
    assert R.shape == (50, 7) and set(np.unique(R)) == {-1.0, 1.0}
