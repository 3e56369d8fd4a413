r"""Gaussian-process regression on pairwise data (docs/math.md; Tsivtsivadze et al. §5).

A zero-mean GP prior ``f ~ N(0, K)`` on item scores; each comparison ``l``
observes the difference :math:`d_l = f_{head_l} - f_{tail_l} = (A^T f)_l`:

(a) **Gaussian**: ``w_l ~ N(d_l, σ²)`` (the probabilistic RankRLS; the
    posterior mean equals dual RankRLS with λ = σ² on the preference graph);
(b) **probit**: ``p(w_l = ±1 | f) = Φ(w_l d_l)``, the posterior approximated by
    (parallel, damped) expectation propagation.

Both are handled in the space of the ``l`` differences, whose prior is
:math:`N(0, K_d = A^T K A)`: the likelihood depends on ``f`` only through ``d``.
Sites ``N(μ̃, 1/τ̃)`` (exact for (a)) give the posterior, predictions at new
items (Tsivtsivadze et al. eq. 11) and the (EP) log marginal likelihood; hyper-parameters
are fitted by maximising it with optax (:func:`gp_fit`).
"""
from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.scipy.stats import norm

from .._core import lapack
from .._core.products import HI, mm
from .._core.checks import (as_float_array, check_flag, check_count, check_indices, check_positive,
                            check_matrix, check_symmetric)
from .._core.host import is_concrete
from .._core.traced import finite_positive, nan_unless
from .._core.memory import check_memory
from ..kernels.kernel import gaussian_kernel, kernel_matrix
from .._core.log import Stages, check_verbose
from .._core.types import saveable

__all__ = ["PairwiseGP", "gp_pairwise_gaussian", "gp_pairwise_probit", "gp_predict",
           "gp_preference_probability", "gp_fit"]


@saveable
class PairwiseGP(NamedTuple):
    r"""A fitted pairwise GP (sites on the comparisons).

    Attributes:
      head, tail: ``[l]`` compared training items.
      site_prec: ``[l]`` site precisions ``τ̃`` (``1/σ²`` for the Gaussian model).
      site_nu: ``[l]`` site natural means ``ν̃ = τ̃ μ̃``.
      alpha: ``[l]`` :math:`(K_d + \Sigma ̃)^{-1} \mu ̃` (posterior mean of ``f`` is ``K A alpha``).
      chol: ``[l, l]`` lower Cholesky factor of :math:`B = I + S̃^{1/2} K_d S̃^{1/2}`.
      log_marginal: log marginal likelihood (EP approximation for probit).
      iterations: EP sweeps (0 for the Gaussian model).
    """

    head: jax.Array
    tail: jax.Array
    site_prec: jax.Array
    site_nu: jax.Array
    alpha: jax.Array
    chol: jax.Array
    log_marginal: jax.Array
    iterations: jax.Array

    def predict(self, K_test):
        """Posterior mean ``[t]`` of the scores of test items (``K_test [t, m]``)."""
        return _gp_mean(self, _check_test(self, K_test, "K_test"))


def _check_test(model, K, name):
    """``K [t, m]`` covariances with the training items: every compared item a column."""
    if not isinstance(model, PairwiseGP):
        raise TypeError(f"model must be a PairwiseGP, got {type(model).__name__}")
    K = check_matrix(K, name)
    if not is_concrete(model.head):             # a traced model (its caller's jit): unchecked
        return K
    top = int(max(np.max(np.asarray(model.head)), np.max(np.asarray(model.tail)))) + 1
    if K.shape[1] < top:
        raise ValueError(f"{name} has {K.shape[1]} columns but the model compares "
                         f"training item {top - 1}")
    return K


def _check_diag(v, t, name):
    v = as_float_array(v, name, finite=True)
    if v.shape != (t,):
        raise ValueError(f"{name} must have shape [{t}] (one per test row), got {tuple(v.shape)}")
    return v


def _check_comparisons(K, head, tail):
    K = check_matrix(K, "K")
    m = check_symmetric(K).shape[0]
    check_indices(head, "head", m), check_indices(tail, "tail", m)
    h, t = np.asarray(head), np.asarray(tail)
    if h.shape != t.shape:
        raise ValueError(f"head and tail differ in length: {h.shape[0]} vs {t.shape[0]}")
    if np.any(h == t):
        raise ValueError("a comparison joins an item to itself (head == tail)")
    check_memory((2 * m * h.size + 6 * h.size * h.size) * jnp.dtype(K.dtype).itemsize,
                 f"the pairwise GP with {h.size} comparisons ({h.size} x {h.size} covariances)",
                 "use fewer comparisons, or RankRLS on the items' scores")
    return K, jnp.asarray(h), jnp.asarray(t)


def _KA(K, head, tail):
    """``K A`` (``[*, l]``): covariance of scores with the comparison differences."""
    K = jnp.asarray(K)
    return K[:, head] - K[:, tail]


def _Kd(K, head, tail):
    KA = _KA(K, head, tail)
    return KA[head] - KA[tail]                      # [l, l] = A^T K A


def _posterior(Kd, tau, nu):
    r"""GPML Alg. 3.5 posterior with sites (τ̃, ν̃): :math:`\Sigma = K_d - V^T V`, ``μ = Σ ν̃``."""
    l = Kd.shape[0]
    s = jnp.sqrt(jnp.maximum(tau, 0))
    B = jnp.eye(l, dtype=Kd.dtype) + s[:, None] * Kd * s[None, :]
    Lc = lapack.cholesky(B)
    V = lapack.solve_triangular(Lc, s[:, None] * Kd)
    Sigma = Kd - mm(V.T, V)
    return Sigma, mm(Sigma, nu), Lc


def _marginal_var(Sigma, Kd):
    r"""``diag(Σ)``, a cancellation :math:`K_d - V^T V`: kept at least the rounding level
    ``eps diag(K_d)`` (float32 may round it to 0 or below; ``1/diag`` follows). A negative
    ``diag(K_d)`` (``K`` indefinite) is left as it is, to fail the factor check."""
    eps = jnp.finfo(Sigma.dtype).eps
    d, prior = jnp.diag(Sigma), jnp.diag(Kd)
    return jnp.where(prior >= 0, jnp.maximum(d, eps * jnp.maximum(prior, eps)), d)


def _alpha(Kd, tau, nu, Lc):
    r""":math:`(K_d + \Sigma ̃)^{-1} \mu ̃ = ν̃ - S̃^{1/2} B^{-1} S̃^{1/2} K_d ν̃` (valid for τ̃ = 0 too)."""
    s = jnp.sqrt(jnp.maximum(tau, 0))
    return nu - s * lapack.cho_solve(Lc, s * (mm(Kd, nu)))


def _gaussian_logml(Kd, y, noise_var):
    C = Kd + noise_var * jnp.eye(Kd.shape[0], dtype=Kd.dtype)
    Lc = lapack.cholesky(C)
    a = lapack.cho_solve(Lc, y)
    return mm(-0.5 * y, a) - jnp.sum(jnp.log(jnp.diag(Lc))) - 0.5 * y.shape[0] * jnp.log(2 * jnp.pi)


def gp_pairwise_gaussian(K, head, tail, diffs, *, noise_var) -> PairwiseGP:
    r"""Pairwise GP regression (a): observed score differences
    ``w_l ~ N(f_head - f_tail, σ²)``, closed-form posterior (Tsivtsivadze et al. §5).

    The posterior mean of ``f`` at the training items is :math:`K A (K_d + \sigma^2 I)^{-1} w`:
    dual RankRLS on the preference graph with λ = σ² (``rj.fit`` with ``rj.Dual()`` and
    ``lam=σ²`` on the graph ``preference_graph(head, tail, diffs, cost="magnitude")``).

    Args:
      K: ``[m, m]`` prior covariance (kernel) of the items.
      head, tail: ``[l]`` compared items; diffs: ``[l]`` observed differences.
      noise_var: σ² > 0.

    Example:
      >>> import numpy as np
      >>> K = np.eye(3) + 0.5
      >>> gp = gp_pairwise_gaussian(K, [0, 1], [1, 2], [1., 1.], noise_var=0.1)
      >>> mean, var = gp_predict(gp, K, np.diag(K))
      >>> bool(mean[0] > mean[1] > mean[2])
      True
    """
    K, h, t = _check_comparisons(K, head, tail)
    w = as_float_array(diffs, "diffs", finite=True)
    if w.shape != h.shape:
        raise ValueError(f"diffs must have shape {h.shape}, got {w.shape}")
    check_positive(noise_var, name="noise_var", scalar=True)   # may be traced: NaN if not > 0
    noise_var = jnp.asarray(noise_var, K.dtype)
    Kd = _Kd(K, h, t)
    tau = jnp.full(h.shape, 1.0, K.dtype) / noise_var
    nu = tau * w
    _, _, Lc = _posterior(Kd, tau, nu)
    return _check_factor(nan_unless(finite_positive(noise_var), PairwiseGP(
        h, t, tau, nu, _alpha(Kd, tau, nu, Lc), Lc, _gaussian_logml(Kd, w, noise_var), jnp.int32(0))), K)


def _check_factor(gp, K):
    r"""Outside jit, a ValueError naming ``K`` when the posterior's Cholesky factor failed
    (:math:`I + S^{1/2} A^T K A S^{1/2}` not positive definite: ``K`` is not PSD); the figure,
    ``K``'s smallest eigenvalue, is computed only then. Under jit the model is NaN."""
    if is_concrete(gp.chol) and not bool(jnp.all(jnp.isfinite(gp.chol))):
        low = float(np.linalg.eigvalsh(np.asarray(K, np.float64))[0])
        raise ValueError(f"K is not positive semidefinite (smallest eigenvalue {low:.3g}): the "
                         "posterior's Cholesky factor failed; a prior covariance must be PSD")
    return gp


def _probit_moments(mu_c, var_c, y):
    """Moments of ``Φ(y x) N(x | μ_c, σ_c²)`` (GPML eq. 3.58)."""
    den = jnp.sqrt(1 + var_c)
    z = y * mu_c / den
    ratio = jnp.exp(norm.logpdf(z) - norm.logcdf(z))
    mu = mu_c + y * var_c * ratio / den
    var = var_c - var_c ** 2 * ratio * (z + ratio) / (1 + var_c)
    return mu, var, norm.logcdf(z)


def _ep(Kd, y, max_iter, tol, damping):
    l = Kd.shape[0]
    dtype = Kd.dtype

    def sweep(tau, nu):
        Sigma, mu, _ = _posterior(Kd, tau, nu)
        v = _marginal_var(Sigma, Kd)
        tau_c = 1 / v - tau
        nu_c = mu / v - nu
        m_hat, v_hat, _ = _probit_moments(nu_c / tau_c, 1 / tau_c, y)
        tau_new = jnp.maximum(1 / v_hat - tau_c, 0)
        nu_new = m_hat / v_hat - nu_c
        return (1 - damping) * tau + damping * tau_new, (1 - damping) * nu + damping * nu_new

    def cond(c):
        return (c[2] < max_iter) & (c[3] > tol)

    def body(c):
        tau, nu, it, _ = c
        tau2, nu2 = sweep(tau, nu)
        change = jnp.maximum(jnp.max(jnp.abs(tau2 - tau)), jnp.max(jnp.abs(nu2 - nu)))
        return tau2, nu2, it + 1, change

    zeros = jnp.zeros(l, dtype)
    tau, nu, it, _ = lax.while_loop(cond, body, (zeros, zeros, jnp.int32(0),
                                                 jnp.asarray(jnp.inf, dtype)))
    return tau, nu, it


def _ep_logml(Kd, y, tau, nu):
    """EP log marginal likelihood (GPML eq. 3.65) at the sites (τ̃ > 0)."""
    Sigma, mu, Lc = _posterior(Kd, tau, nu)
    v = _marginal_var(Sigma, Kd)
    tau_c = 1 / v - tau
    nu_c = mu / v - nu
    mu_c, var_c = nu_c / tau_c, 1 / tau_c
    _, _, logz = _probit_moments(mu_c, var_c, y)
    site_var = 1 / tau
    site_mu = nu / tau
    C = Kd + jnp.diag(site_var)
    Lf = lapack.cholesky(C)
    a = lapack.cho_solve(Lf, site_mu)
    return (-jnp.sum(jnp.log(jnp.diag(Lf))) - mm(0.5 * site_mu, a) + jnp.sum(logz)
            + 0.5 * jnp.sum(jnp.log(var_c + site_var))
            + jnp.sum((mu_c - site_mu) ** 2 / (2 * (var_c + site_var))))


def gp_pairwise_probit(K, head, tail, direction=None, *, max_iter: int = 200, tol=1e-6,
                       damping=0.5) -> PairwiseGP:
    """Pairwise GP preference learning (b): ``p(w_l | f) = Φ(w_l (f_head - f_tail))``
    (Tsivtsivadze et al. eq. 10), posterior by parallel EP with damping (GPML Alg. 3.5 on the
    comparison differences), EP log marginal likelihood (GPML eq. 3.65).

    Args:
      K: ``[m, m]`` prior covariance; its scale sets the noise level of the
        probit (``Φ`` has unit slope).
      head, tail: ``[l]`` compared items; direction: ``[l]`` ±1 (``None``: head won).
      max_iter: EP sweeps cap (static); tol: stop when no site moves more.
      damping: step of each site update (1 = undamped).

    Example:
      >>> import numpy as np
      >>> K = np.eye(3) + 0.5
      >>> gp = gp_pairwise_probit(K, [0, 1, 0], [1, 2, 2])
      >>> p = gp_preference_probability(gp, K[[0]], K[[2]], [1.5], [1.5], [0.5])
      >>> bool(p[0] > 0.5), int(gp.iterations) < 200
      (True, True)
    """
    K, h, t = _check_comparisons(K, head, tail)
    y = jnp.ones(h.shape, K.dtype) if direction is None else as_float_array(direction,
                                                                            "direction")
    if y.shape != h.shape or (not isinstance(y, jax.core.Tracer)
                              and not bool(jnp.all(jnp.abs(y) == 1))):
        raise ValueError("direction must be ±1 with the shape of head")
    if not 0 < damping <= 1:
        raise ValueError(f"damping must be in (0, 1], got {damping}")
    return _check_factor(_probit_fit(K, h, t, y.astype(K.dtype), max_iter,
                                     jnp.asarray(tol, K.dtype), jnp.asarray(damping, K.dtype)), K)


def _probit_fit(K, h, t, y, max_iter, tol, damping):
    Kd = _Kd(K, h, t)
    tau, nu, it = _ep(Kd, y, max_iter, tol, damping)
    _, _, Lc = _posterior(Kd, tau, nu)
    return PairwiseGP(h, t, tau, nu, _alpha(Kd, tau, nu, Lc), Lc,
                      _ep_logml(Kd, y, tau, nu), it)


def gp_predict(model: PairwiseGP, K_test, k_test_diag):
    """Posterior mean and variance of ``f`` at test items (Tsivtsivadze et al. §5).

    Args:
      K_test: ``[t, m]`` prior covariance between test and training items.
      k_test_diag: ``[t]`` prior variances of the test items.

    Returns:
      ``(mean [t], var [t])``.

    Example:
      >>> import numpy as np
      >>> K = np.eye(2)
      >>> mean, var = gp_predict(gp_pairwise_gaussian(K, [0], [1], [2.], noise_var=1.), K, [1., 1.])
      >>> print(np.round(np.asarray(mean), 4), np.round(np.asarray(var), 4))
      [ 0.6667 -0.6667] [0.6667 0.6667]
    """
    K_test = _check_test(model, K_test, "K_test")
    k_test_diag = _check_diag(k_test_diag, K_test.shape[0], "k_test_diag")
    KA = _KA(K_test, model.head, model.tail)
    mean = mm(KA, model.alpha)
    var = k_test_diag.astype(mean.dtype) - jnp.einsum("ij,ij->i", KA, mm(KA, _inv(model)), precision=HI)
    return mean, jnp.maximum(var, 0)          # a cancellation: rounding may go below 0


@jax.jit
def _gp_mean(model, K_test):
    return mm(_KA(K_test, model.head, model.tail), model.alpha)


def _inv(model: PairwiseGP):
    r""":math:`(K_d + \Sigma ̃)^{-1} = S̃^{1/2} B^{-1} S̃^{1/2}`."""
    s = jnp.sqrt(model.site_prec)
    return s[:, None] * lapack.cho_solve(model.chol, jnp.diag(s))


def gp_preference_probability(model: PairwiseGP, K_a, K_b, k_aa, k_bb, k_ab, *,
                              latent: bool = False):
    r"""Predictive probability that item ``a`` beats item ``b`` (Tsivtsivadze et al. eq. 11).

    Args:
      K_a, K_b: ``[t, m]`` prior covariances of the ``a`` and ``b`` items with
        the training items; k_aa, k_bb, k_ab: ``[t]`` their prior (co)variances.
      latent: ``True``: :math:`P(f_a > f_b) = \Phi (\mu / \sqrt{r11 + r22 - 2 r12})` exactly as
        eq. 11; ``False`` (default): the probability of *observing* ``a ≻ b``
        under the probit likelihood, :math:`\Phi (\mu / \sqrt{1 + r11 + r22 - 2 r12})`
        (the calibrated one for comparisons drawn from the model).

    Returns:
      ``[t]`` probabilities.

    Example:
      >>> import numpy as np
      >>> K = np.eye(2)
      >>> gp = gp_pairwise_gaussian(K, [0], [1], [2.], noise_var=1.)
      >>> p = gp_preference_probability(gp, K[[0]], K[[1]], [1.], [1.], [0.])
      >>> bool(0.5 < p[0] < 1)
      True
    """
    K_a, K_b = _check_test(model, K_a, "K_a"), _check_test(model, K_b, "K_b")
    if K_b.shape != K_a.shape:
        raise ValueError(f"K_a and K_b must have one shape, got {K_a.shape} and {K_b.shape}")
    k_aa, k_bb, k_ab = (_check_diag(v, K_a.shape[0], n)
                        for v, n in ((k_aa, "k_aa"), (k_bb, "k_bb"), (k_ab, "k_ab")))
    KAa, KAb = _KA(K_a, model.head, model.tail), _KA(K_b, model.head, model.tail)
    mu = mm(KAa - KAb, model.alpha)
    D = KAa - KAb
    var = (jnp.asarray(k_aa) + jnp.asarray(k_bb) - 2 * jnp.asarray(k_ab)
           - jnp.einsum("ij,ij->i", D, mm(D, _inv(model)), precision=HI))
    var = jnp.maximum(var, 0) + (0.0 if check_flag(latent, "latent") else 1.0)
    return norm.cdf(mu / jnp.sqrt(var))


def gp_fit(X, head, tail, target=None, *, likelihood: str = "probit", gamma=1.0,
           amplitude=1.0, noise_var=1.0, steps: int = 100, learning_rate=0.05,
           ep_iter: int = 100, verbose: int = 0):
    r"""Hyper-parameters by maximising the (EP) log marginal likelihood with optax
    Adam over ``log γ``, ``log amplitude`` (and ``log σ²`` for the Gaussian model),
    with a Gaussian kernel :math:`amplitude \cdot \exp(-\gamma \lVert x - x' \rVert^2)` (Tsivtsivadze et
    al. §5).

    Args:
      X: ``[m, n]`` item features.
      head, tail: ``[l]`` comparisons; target: ``[l]`` differences (Gaussian) or
        ±1 directions (probit; ``None`` = head won).
      likelihood: ``"probit"`` or ``"gaussian"``.
      gamma, amplitude, noise_var: initial values (may be traced: under ``jit`` the steps
        run in one ``lax.fori_loop``).
      steps, learning_rate: Adam settings (``steps=0``: the posterior at the given
        hyper-parameters). ep_iter: EP sweeps per step.
      verbose: log every that many steps (0: silent; logger ``"rankjax"``; not under ``jit``).

    Returns:
      ``(model, params)`` with ``params = dict(gamma, amplitude, noise_var)`` (Python floats;
      scalar arrays under ``jit``).

    Raises:
      ValueError: a probit ``target`` other than ±1 (under ``jit``: a NaN model), an
        invalid hyper-parameter, a comparison out of range or of an item with itself.

    Example:
      >>> import numpy as np
      >>> X = np.linspace(0, 1, 8)[:, None]
      >>> model, params = gp_fit(X, np.arange(7), np.arange(1, 8), steps=5)
      >>> sorted(params)
      ['amplitude', 'gamma', 'noise_var']
    """
    import optax
    X = check_matrix(X)
    steps, ep_iter = check_count(steps, "steps", minimum=0), check_count(ep_iter, "ep_iter")
    check_verbose(verbose)
    for value, name in ((gamma, "gamma"), (amplitude, "amplitude"), (noise_var, "noise_var"),
                        (learning_rate, "learning_rate")):
        check_positive(value, name=name, scalar=True)
    if likelihood not in ("probit", "gaussian"):
        raise ValueError(f"likelihood must be 'probit' or 'gaussian', got {likelihood!r}")
    K0 = kernel_matrix(gaussian_kernel(gamma), X)
    _, h, t = _check_comparisons(K0, head, tail)
    if likelihood == "gaussian":
        if target is None:
            raise ValueError("the Gaussian likelihood needs target differences")
        w = as_float_array(target, "target", finite=True).astype(X.dtype)
    else:
        w = jnp.ones(h.shape, X.dtype) if target is None else as_float_array(
            target, "target", finite=True).astype(X.dtype)
        if w.shape != h.shape:
            raise ValueError(f"target must have the shape of head {tuple(h.shape)}, got "
                             f"{tuple(w.shape)}")
        if is_concrete(w) and not bool(jnp.all(jnp.abs(w) == 1)):
            raise ValueError("target must be ±1 directions for the probit likelihood (+1: "
                             "head won, -1: tail won)")
    traced = not all(is_concrete(v) for v in (X, w, gamma, amplitude, noise_var, learning_rate))

    def kd(p):
        K = jnp.exp(p["log_amp"]) * kernel_matrix(gaussian_kernel(jnp.exp(p["log_gamma"])), X)
        return K, _Kd(K, h, t) + 1e-8 * jnp.eye(h.shape[0], dtype=X.dtype)

    def neg_logml(p):
        K, Kd = kd(p)
        if likelihood == "gaussian":
            return -_gaussian_logml(Kd, w, jnp.exp(p["log_noise"]))
        tau, nu, _ = _ep(lax.stop_gradient(Kd), w, ep_iter, 1e-6, 0.5)
        tau, nu = lax.stop_gradient(tau), lax.stop_gradient(nu)
        # at the EP fixed point the gradient is that of the Gaussian sites' evidence
        site_var = 1 / tau
        C = Kd + jnp.diag(site_var)
        Lf = lapack.cholesky(C)
        a = lapack.cho_solve(Lf, nu / tau)
        return jnp.sum(jnp.log(jnp.diag(Lf))) + mm(0.5 * (nu / tau), a)

    dtype = X.dtype
    p = {"log_gamma": jnp.log(jnp.asarray(gamma, dtype)),
         "log_amp": jnp.log(jnp.asarray(amplitude, dtype)),
         "log_noise": jnp.log(jnp.asarray(noise_var, dtype))}
    opt = optax.adam(learning_rate)
    state = opt.init(p)

    @jax.jit
    def step(p, state):
        g = jax.grad(neg_logml)(p)
        upd, state = opt.update(g, state)
        return optax.apply_updates(p, upd), state

    if traced:                          # under the caller's jit: one loop, no host lines
        p, state = lax.fori_loop(0, steps, lambda i, c: step(*c), (p, state))
    else:
        stages = Stages(steps, "gp_fit step", verbose)
        for _ in stages:
            p, state = step(p, state)
            if stages.every:
                stages.note(f"γ {float(jnp.exp(p['log_gamma'])):.4g}, "
                            f"amplitude {float(jnp.exp(p['log_amp'])):.4g}")
    K, Kd = kd(p)
    if likelihood == "gaussian":
        model = gp_pairwise_gaussian(K, head, tail, w, noise_var=jnp.exp(p["log_noise"]))
    else:
        model = nan_unless(jnp.all(jnp.abs(w) == 1),
                           _probit_fit(K, h, t, w, ep_iter, jnp.asarray(1e-8, dtype),
                                       jnp.asarray(0.5, dtype)))
    params = {"gamma": jnp.exp(p["log_gamma"]), "amplitude": jnp.exp(p["log_amp"]),
              "noise_var": jnp.exp(p["log_noise"])}
    return model, params if traced else {k: float(v) for k, v in params.items()}
