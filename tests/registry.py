"""The registry of solvers (as lineax's ``tests/helpers.py``): one list of :class:`Entry`
(a solver, the kind of problem it is tested on, and which closed form of
``tests/reference.py`` its predictions must equal). Every property file imports it:

* ``test_solvers.py`` — every (solver, verb) against a dense numpy reference (float64);
* ``test_under_jit.py`` — a traced λ under ``jit``, ``vmap`` (at the cost of about a path,
  never a fallback per lane) and ``grad``;
* ``test_float32.py`` — the precision rule; ``test_nan_inputs.py`` — bad and non-finite input;
* ``test_core.py`` — a second problem of the same shape compiles nothing;
* ``test_options.py`` — every option a solver carries; ``test_eager.py`` — numpy, pandas
  and JAX inputs; ``test_distributed.py`` — the sharded kinds;
* ``test_toy_solver.py`` — a solver defined in that file alone gets every property above.

The verbs an entry is tested on are the methods its class implements
(:func:`rankjax.capabilities`): adding a solver is one :class:`Entry` here. No rankjax
numerics run here: the twins are numpy.
"""
import dataclasses
import importlib

import numpy as np

import rankjax as rj
import reference as ref

GAMMA = 0.3
GAUSS = rj.gaussian_kernel(GAMMA)
ROWS = np.arange(0, 60, 3)                                      # a fixed basis of 20 rows
LAMS = np.array([0.1, 1.0, 10.0])
LOOP = rj.CG(tol=1e-12, max_iter=300)

PROPERTY_FILES = ["test_solvers", "test_under_jit", "test_float32", "test_nan_inputs",
                  "test_core", "test_options", "test_eager", "test_distributed"]
"""The property files: each defines ``check_*(entry, verb)`` functions (run over every entry
by its own tests, and over the toy solver by ``test_toy_solver.py``)."""


def data(seed=0, dtype=np.float64):
    """A small ranking problem: ``(X [m, 4], y [m], qid [m])``, 6 queries of 8-12 rows."""
    d = rj.make_ranking_data(6, num_features=4, docs_per_query=(8, 12), seed=seed)
    return np.asarray(d.X, dtype), np.asarray(d.y, dtype), np.asarray(d.qid)


@dataclasses.dataclass
class Entry:
    """One solver under test.

    Attributes:
      name: the test id.
      solver: the solver object.
      kind: ``"features"`` (the problem holds ``X``) or ``"kernel"`` (it holds ``K = X X^T``).
      model: the closed form its predictions equal: ``"linear"`` (``f = X w``),
        ``"gaussian"`` (the exact kernel ``exp(-GAMMA |x - x'|^2)``) or ``"nystrom"`` (the
        basis-vector model on ``ROWS``).
      rtol: agreement with the reference in float64, relative to its largest value.
    """

    name: str
    solver: object
    kind: str
    model: str
    rtol: float = 1e-10

    def verbs(self):
        """The verbs it serves: the methods its class implements."""
        caps = rj.capabilities(self.solver)
        return [v for v in ("fit", "path", "holdout", "leave_pair_out") if v in caps]


REGISTRY = [
    Entry("primal", rj.Primal(), "features", "linear"),
    Entry("dual_linear", rj.Dual(), "features", "linear"),
    Entry("dual_gaussian", rj.Dual(GAUSS), "features", "gaussian"),
    Entry("dual_precomputed", rj.Dual(), "kernel", "linear"),
    Entry("nystrom", rj.Nystrom(GAUSS, ROWS), "features", "nystrom", rtol=1e-8),
    Entry("nystrom_blocked", rj.Nystrom(GAUSS, ROWS, block_rows=16), "features", "nystrom",
          rtol=1e-8),
    Entry("cg", LOOP, "features", "linear", rtol=1e-9),
    Entry("cg_dual", LOOP, "kernel", "linear", rtol=1e-9),
    Entry("falkon", rj.Falkon(GAUSS, ROWS, options=LOOP), "features", "nystrom", rtol=1e-7),
    Entry("auto", rj.Auto(), "features", "linear"),
]


def cases(registry=None, verbs=("fit", "path", "holdout", "leave_pair_out")):
    """``[(entry, verb)]`` over the registry, and their test ids."""
    out = [(e, v) for e in (registry or REGISTRY) for v in e.verbs() if v in verbs]
    return out, [f"{e.name}-{v}" for e, v in out]


# ---- problems and calls ------------------------------------------------------------------

def inputs(entry, X):
    """What the entry's problem and models take: ``X``, or ``K = X X^T``."""
    return X @ X.T if entry.kind == "kernel" else X


def problem(entry, X, y, qid, queries=None, valid=None):
    queries = qid if queries is None else queries
    return rj.Problem(inputs(entry, X), y, queries, precomputed=entry.kind == "kernel",
                      valid=valid)


def call(verb, p, solver, lam_or_lams, pairs=None):
    """The front door: ``fit``/``path``/``holdout`` (``leave_pair_out``: ``holdout`` with
    :class:`rankjax.LeavePairOut` folds)."""
    if verb == "fit":
        return rj.fit(p, solver, lam=lam_or_lams)
    if verb == "leave_pair_out":
        return rj.holdout(p, solver, lams=lam_or_lams, folds=rj.LeavePairOut(pairs))
    return getattr(rj, verb)(p, solver, lams=lam_or_lams)


def predictions(verb, solution, A):
    """What a verb's solution predicts for the training rows (``A``: what its models take):
    ``[m]`` (fit), ``[L, m]`` (path; hold-out predictions for ``holdout``) or ``[L, p, 2]``."""
    if verb in ("holdout", "leave_pair_out"):
        return np.asarray(solution.value.predictions)
    return np.asarray(rj.predict(solution.value, A))


def solve(entry, verb, X, y, qid, lam=None):
    """``(solution, its predictions, the reference's predictions)`` of one case: the front
    door on ``X, y`` in their dtype, the reference in float64."""
    lam = (1.0 if verb == "fit" else LAMS) if lam is None else lam
    if verb == "leave_pair_out":
        pairs = np.asarray(rj.differing_pairs(y)[:15])
        p = problem(entry, X, y, qid, rj.global_graph(X.shape[0]))
        sol = call(verb, p, entry.solver, lam, pairs)
        return sol, predictions(verb, sol, None), reference(entry, verb, X, y, qid, lam, pairs)
    sol = call(verb, problem(entry, X, y, qid), entry.solver, lam)
    return sol, predictions(verb, sol, inputs(entry, X)), reference(entry, verb, X, y, qid, lam)


def run(entry, verb, X, y, qid, lam=None):
    """``(the front door's predictions, the reference's)`` of one case (float64 inputs)."""
    _, got, want = solve(entry, verb, X, y, qid, lam)
    return got, want


def model_kernel(entry, X):
    """``[m, m]`` the kernel of the entry's model on ``X`` (float64): ``X X^T``, the Gaussian,
    or the Nyström approximation ``K_Rm^T K_RR^+ K_Rm``."""
    X = np.asarray(X, np.float64)
    if entry.model == "linear":
        return X @ X.T
    if entry.model == "gaussian":
        return ref.gaussian(X, X, GAMMA)
    KR = ref.gaussian(X[ROWS], X, GAMMA)
    return KR.T @ np.linalg.pinv(basis_kernel(X)) @ KR


def basis_kernel(X):
    """``K_RR [b, b]``: the Gaussian kernel of the Nyström basis rows ``ROWS`` (float64)."""
    X = np.asarray(X, np.float64)
    return ref.gaussian(X[ROWS], X[ROWS], GAMMA)


def form(entry) -> str:
    """The system an entry's solver solves: ``"primal"`` (``X^T L X + λ I``), ``"dual"``
    (``L K + λ I``) or ``"nystrom"`` (``K_Rm L K_mR + λ K_RR``)."""
    if entry.model == "nystrom":
        return "nystrom"
    return "dual" if entry.kind == "kernel" or isinstance(entry.solver, rj.Dual) else "primal"


def condition(entry, verb, X, L, lam) -> float:
    """The condition of the system the entry solves for ``lam`` (float64), on the subspace the
    predictions live in: ``(σ_max + λ) / (σ_min + λ)`` over the nonzero eigenvalues ``σ`` of
    ``X^T L X``, of ``S K S`` (``L = S^2``) or of the whitened basis system ``W^T K_Rm L
    K_mR W`` (``W = K_RR^{-1/2}``); dual leave-pair-out (a cancellation divided by λ, eq. 38-39
    of Pahikkala et al. 2009) ``1 + |L| |K| / λ``."""
    X = np.asarray(X, np.float64)
    kind = form(entry)
    if kind == "dual" and verb == "leave_pair_out":
        return 1 + np.linalg.norm(L, 2) * np.linalg.norm(model_kernel(entry, X), 2) / lam
    if kind == "primal":
        return shifted_condition(X.T @ L @ X, lam)
    if kind == "dual":
        return dual_condition(L, model_kernel(entry, X), lam)
    KR = ref.gaussian(X, X[ROWS], GAMMA)
    bw, bV = np.linalg.eigh(basis_kernel(X))
    keep = bw > 1e-12 * bw.max()
    W = bV[:, keep] / np.sqrt(bw[keep])
    return shifted_condition(W.T @ KR.T @ L @ KR @ W, lam)


def shifted_condition(A, lam) -> float:
    """``(σ_max + λ) / (σ_min + λ)`` over the nonzero eigenvalues ``σ`` of symmetric PSD ``A``."""
    ev = np.maximum(np.linalg.eigvalsh(A), 0)
    top = ev.max()
    return float((top + lam) / (ev[ev > 1e-10 * top].min() + lam))


def dual_condition(L, K, lam) -> float:
    """The condition of ``L K + λ I`` on the subspace the predictions ``K a`` live in:
    :func:`shifted_condition` of ``S K S`` (``L = S^2``)."""
    w, V = np.linalg.eigh(L)
    S = (V * np.sqrt(np.maximum(w, 0))) @ V.T
    return shifted_condition(S @ K @ S, lam)


# ---- the references (numpy, float64) -----------------------------------------------------

def _trainer(entry, X, y, qid, lam, global_graph=False):
    """``(train, test) -> predictions of test`` by the entry's closed form on ``train``."""
    X, y = np.asarray(X, np.float64), np.asarray(y, np.float64)
    qid = np.asarray(qid)
    if entry.model == "linear":
        K = X @ X.T
    elif entry.model == "gaussian":
        K = ref.gaussian(X, X, GAMMA)
    else:
        KR, KRR = ref.gaussian(X[ROWS], X, GAMMA), ref.gaussian(X[ROWS], X[ROWS], GAMMA)

    def laplacian(train):
        if global_graph:
            return ref.dense_laplacian(np.zeros(train.size, int), normalized=False)
        return ref.dense_laplacian(qid[train])

    def train_predict(train, test):
        L = laplacian(train)
        if entry.model == "linear":
            return X[test] @ ref.fit_linear(X[train], y[train], L, lam)
        if entry.model == "gaussian":
            return K[np.ix_(test, train)] @ ref.fit_kernel(K[np.ix_(train, train)], y[train], L, lam)
        return KR[:, test].T @ ref.fit_nystrom(KR[:, train], KRR, y[train], L, lam)
    return train_predict


def reference(entry, verb, X, y, qid, lam, pairs=None):
    X, y, qid = np.asarray(X, np.float64), np.asarray(y, np.float64), np.asarray(qid)
    m = X.shape[0]
    every = np.arange(m)
    if verb == "fit":
        return _trainer(entry, X, y, qid, lam)(every, every)
    if verb == "path":
        return np.stack([_trainer(entry, X, y, qid, v)(every, every) for v in lam])
    if verb == "holdout":
        folds = [np.flatnonzero(qid == q) for q in np.unique(qid)]
        return np.stack([ref.refit_per_fold(_trainer(entry, X, y, qid, v), folds) for v in lam])
    out = []
    for v in lam:
        tp = _trainer(entry, X, y, qid, v, global_graph=True)
        out.append([tp(np.setdiff1d(every, pr), np.asarray(pr)) for pr in np.asarray(pairs)])
    return np.asarray(out)


def checks(module_names=PROPERTY_FILES):
    """Every ``check_*(entry, verb)`` of the property files, ``{name: function}``."""
    out = {}
    for name in module_names:
        mod = importlib.import_module(name)
        for attr in dir(mod):
            if attr.startswith("check_"):
                out[f"{name}.{attr}"] = getattr(mod, attr)
    return out
