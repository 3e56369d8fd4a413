"""Brute-force twins: explicit pair enumeration in numpy float64 (SPEC §1-2, §6)."""
import itertools

import numpy as np


def query_pairs(qid, y=None, *, normalized=True, exclude_ties=False, query_weights=None):
    """List every edge (i, j, weight c_ij) of a query graph by enumeration."""
    qid = np.asarray(qid)
    uq = np.unique(qid)
    out = []
    for c, q in enumerate(uq):
        rows = np.flatnonzero(qid == q)
        n = len(rows)
        pairs = [(i, j) for i, j in itertools.combinations(rows, 2)
                 if not (exclude_ties and y[i] == y[j])]
        omega = 1.0
        if isinstance(query_weights, str):
            omega = 1.0 / len(pairs) if pairs else 0.0
        elif query_weights is not None:
            omega = query_weights[c]
        for i, j in pairs:
            out.append((i, j, omega / n if normalized else omega))
    return out


def laplacian_from_pairs(m, pairs):
    L = np.zeros((m, m))
    for i, j, c in pairs:
        L[i, i] += c
        L[j, j] += c
        L[i, j] -= c
        L[j, i] -= c
    return L


def laplacian_from_edges(m, head, tail, weight):
    L = np.zeros((m, m))
    for h, j, w in zip(head, tail, weight):
        d = np.zeros(m)
        d[h], d[j] = w, -w
        L += np.outer(d, d)
    return L


def primal_pairs(X, y, pairs, lam):
    """argmin_w sum_{(i,j,c)} c ((x_i - x_j) w - (y_i - y_j))^2 + lam |w|^2."""
    n = X.shape[1]
    A = lam * np.eye(n)
    b = np.zeros((n,) + np.shape(y)[1:])
    for i, j, c in pairs:
        d = X[i] - X[j]
        A += c * np.outer(d, d)
        b += c * np.multiply.outer(d, y[i] - y[j])
    return np.linalg.solve(A, b)


def primal_edges(X, head, tail, z, w, lam):
    """argmin sum_t w_t^2 (z_t - (x_h - x_j) w)^2 + lam |w|^2."""
    n = X.shape[1]
    A = lam * np.eye(n)
    b = np.zeros(n)
    for h, j, zt, wt in zip(head, tail, z, w):
        d = X[h] - X[j]
        A += wt ** 2 * np.outer(d, d)
        b += wt ** 2 * zt * d
    return np.linalg.solve(A, b)


def feature_map(K):
    """R with R R^T = K (eigendecomposition), for kernel problems in primal form."""
    vals, vecs = np.linalg.eigh(K)
    return vecs * np.sqrt(np.maximum(vals, 0))


# ---- metrics ---------------------------------------------------------------

def _queries(qid, m):
    qid = np.zeros(m, int) if qid is None else np.asarray(qid)
    return [np.flatnonzero(qid == q) for q in np.unique(qid)]


def pairwise_error(f, y, qid=None, tie=0.5):
    vals = []
    for rows in _queries(qid, len(f)):
        num = den = 0
        for a in rows:
            for b in rows:
                if y[a] < y[b]:
                    den += 1
                    num += 1 if f[a] > f[b] else (tie if f[a] == f[b] else 0)
        if den:
            vals.append(num / den)
    return np.mean(vals) if vals else np.nan


def kendall_tau_b(f, y, qid=None):
    vals = []
    for rows in _queries(qid, len(f)):
        C = D = n1 = n2 = n0 = 0
        for a, b in itertools.combinations(rows, 2):
            n0 += 1
            sy, sf = np.sign(y[a] - y[b]), np.sign(f[a] - f[b])
            n1 += sy == 0
            n2 += sf == 0
            C += sy * sf > 0
            D += sy * sf < 0
        den = (n0 - n1) * (n0 - n2)
        if den > 0:
            vals.append((C - D) / np.sqrt(den))
    return np.mean(vals) if vals else np.nan


def _dcg(gains, k):
    r = np.arange(len(gains))
    return np.sum(np.where(r < k, gains / np.log2(r + 2), 0))


def ndcg(f, y, qid=None, k=10, gain="exp2", ties="average", no_relevant="skip"):
    """Ties 'average': the mean DCG over every order consistent with the scores
    (all permutations enumerated, so keep queries small)."""
    vals = []
    k = len(f) if k is None else k
    for rows in _queries(qid, len(f)):
        g = (2.0 ** y[rows] - 1) if gain == "exp2" else y[rows].astype(float)
        idcg = _dcg(np.sort(g)[::-1], k)
        if ties == "stable":
            dcg = _dcg(g[np.argsort(-f[rows], kind="stable")], k)
        else:
            perms = [p for p in itertools.permutations(range(len(rows)))
                     if all(f[rows][p[i]] >= f[rows][p[i + 1]] for i in range(len(p) - 1))]
            dcg = np.mean([_dcg(g[list(p)], k) for p in perms])
        if idcg > 0:
            vals.append(dcg / idcg)
        elif no_relevant == "one":
            vals.append(1.0)
        elif no_relevant == "zero":
            vals.append(0.0)
    return np.mean(vals) if vals else np.nan


def average_precision(f, y, qid=None, threshold=1.0, k=None):
    """MAP (k=None) or P@k with stable tie order; queries without relevant rows skipped."""
    vals = []
    for rows in _queries(qid, len(f)):
        rel = (y[rows] >= threshold)[np.argsort(-f[rows], kind="stable")]
        if not rel.any():
            continue
        if k is not None:
            vals.append(rel[:k].sum() / k)
        else:
            hits = np.cumsum(rel)
            vals.append(np.mean([hits[i] / (i + 1) for i in np.flatnonzero(rel)]))
    return np.mean(vals) if vals else np.nan


def mrr(f, y, qid=None, threshold=1.0, k=None, ties="average", no_relevant="skip"):
    """Mean reciprocal rank of the first relevant row; ties 'average': the mean over every
    order consistent with the scores (all permutations enumerated: keep queries small)."""
    vals = []
    for rows in _queries(qid, len(f)):
        rel, s = y[rows] >= threshold, f[rows]
        kk = len(rows) if k is None else k
        if ties == "stable":
            orders = [np.argsort(-s, kind="stable")]
        else:
            orders = [list(p) for p in itertools.permutations(range(len(rows)))
                      if all(s[p[i]] >= s[p[i + 1]] for i in range(len(p) - 1))]
        if not rel.any():
            if no_relevant != "skip":
                vals.append(1.0 if no_relevant == "one" else 0.0)
            continue
        rr = [1 / (np.flatnonzero(rel[o])[0] + 1) if np.flatnonzero(rel[o])[0] < kk else 0.0
              for o in orders]
        vals.append(np.mean(rr))
    return np.mean(vals) if vals else np.nan


def ranksvm_pairs(y, qid):
    """Every pair (i, j) of one query with y_i > y_j, enumerated."""
    qid = np.zeros(len(y), int) if qid is None else np.asarray(qid)
    return [(i, j) for i in range(len(y)) for j in range(len(y))
            if qid[i] == qid[j] and y[i] > y[j]]


def ranksvm_fgh(w, X, y, qid, C, v):
    """f, grad and generalised Hv of the L2-loss RankSVM over enumerated pairs; a
    pair violates when fl(z_i - 1) < z_j (margin exactly 0 excluded)."""
    z = X @ w
    f, g, hv = 0.5 * w @ w, w.copy(), v.copy()
    for i, j in ranksvm_pairs(y, qid):
        if z[i] - 1.0 < z[j]:
            d = X[i] - X[j]
            mgn = 1.0 - (z[i] - z[j])
            f += C * mgn ** 2
            g -= 2 * C * mgn * d
            hv += 2 * C * d * (d @ v)
    return f, g, hv


def rankboost(X, y, qid, thresholds, rounds):
    """RankBoost over enumerated crucial pairs with an explicit distribution D."""
    pairs = np.array(ranksvm_pairs(y, qid))
    D = np.full(len(pairs), 1.0 / len(pairs))
    out = []
    for _ in range(rounds):
        best = None
        for f in range(X.shape[1]):
            for b, th in enumerate(thresholds[f]):
                if np.isnan(th):
                    continue
                h = (X[:, f] > th).astype(float)
                r = np.sum(D * (h[pairs[:, 0]] - h[pairs[:, 1]]))
                if best is None or abs(r) > abs(best[2]):
                    best = (f, th, r)
        f, th, r = best
        alpha = 0.5 * np.log((1 + r) / (1 - r))
        h = (X[:, f] > th).astype(float)
        D = D * np.exp(alpha * (h[pairs[:, 1]] - h[pairs[:, 0]]))
        D /= D.sum()
        out.append((f, th, alpha, r))
    return out


# ---- the solvers' closed forms, by dense numpy (the registry's twins) ------------------

def gaussian(A, B, gamma):
    """``exp(-gamma |a - b|^2)`` by explicit differences."""
    d = A[:, None, :] - B[None, :, :]
    return np.exp(-gamma * np.sum(d * d, axis=-1))


def dense_laplacian(qid, y=None, **graph):
    """The query graph's ``L`` from its enumerated pairs."""
    return laplacian_from_pairs(len(qid), query_pairs(qid, y, **graph))


def fit_linear(X, y, L, lam):
    """``w = (X^T L X + lam I)^{-1} X^T L y`` (Pahikkala et al. 2009, eq. 28)."""
    return np.linalg.solve(X.T @ L @ X + lam * np.eye(X.shape[1]), X.T @ L @ y)


def fit_kernel(K, y, L, lam):
    """``a = (L K + lam I)^{-1} L y`` (Pahikkala et al. 2007, Thm 1)."""
    return np.linalg.solve(L @ K + lam * np.eye(K.shape[0]), L @ y)


def nystrom_jitter(KRR):
    """The documented jitter of the Nyström regulariser, ``b eps32 max diag K_RR`` in every
    dtype (docs/precision.md)."""
    return KRR.shape[0] * np.finfo(np.float32).eps * np.max(np.diag(KRR))


def fit_nystrom(KR, KRR, y, L, lam):
    """Basis coefficients ``a = (K_R L K_R^T + lam (K_RR + ε I))^{-1} K_R L y`` (§3.5, eq.
    40-42, ``ε`` the model's :func:`nystrom_jitter`); ``KR [b, m]``."""
    eps = nystrom_jitter(KRR)
    return np.linalg.solve(KR @ L @ KR.T + lam * (KRR + eps * np.eye(len(KRR))), KR @ L @ y)


def refit_per_fold(train_predict, folds):
    """Hold-out predictions by retraining without each fold: ``train_predict(train, test)``
    returns the predictions of the rows ``test`` by the model of the rows ``train``."""
    m = sum(len(f) for f in folds)
    out = np.zeros(m)
    every = np.arange(m)
    for f in folds:
        out[f] = train_predict(np.setdiff1d(every, f), f)
    return out


def pair_folds(pairs):
    """Leave-pair-out: for each pair, its two rows held out (the global graph, cost (21))."""
    return [np.asarray(p) for p in pairs]
