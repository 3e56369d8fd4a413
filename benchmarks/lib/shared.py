"""The shared real sets as the benchmarks read them (``../shared/data`` beside the repo):
MQ2008's five folds and LightGBM's ``group`` sizes of sorted query ids."""
import pathlib

import numpy as np

SHARED = pathlib.Path(__file__).resolve().parents[3] / "shared" / "data"
FOLDS = {1: ([1, 2, 3], 5), 2: ([2, 3, 4], 1), 3: ([3, 4, 5], 2), 4: ([4, 5, 1], 3),
         5: ([5, 1, 2], 4)}                  # MQ2008: training parts, test part


def sizes(qid):
    """LightGBM's ``group=``: the sizes of the runs of equal query ids, in row order."""
    return np.diff(np.flatnonzero(np.r_[True, qid[1:] != qid[:-1], True]))


def mq2008_folds(folds=(1, 2, 3, 4, 5)):
    """``(fold, (X, y, qid, X_test, y_test, qid_test))`` of MQ2008's folds: the three
    training parts (rows of a query together, as LightGBM wants them) and the test part."""
    import rankjax as rj
    parts = {i: rj.io.read_svmlight(SHARED / "mq2008" / f"S{i}.txt.gz") for i in range(1, 6)}
    for fold in folds:
        train, test = FOLDS[fold]
        X = np.concatenate([parts[i].X for i in train])
        y = np.concatenate([parts[i].y for i in train])
        q = np.concatenate([parts[i].qid for i in train])
        order = np.argsort(q, kind="stable")
        yield fold, (X[order], y[order], q[order], parts[test].X, parts[test].y, parts[test].qid)


def first_screen_sets(only=("lambdarank", "mq2008", "web"), folds=(1, 2, 3, 4, 5)):
    """``(set name, fold, (X, y, qid, X_test, y_test, qid_test))`` of the first screen, as its
    benchmarks read them: ``lambdarank_sample`` normalised to [0, 1] per query; MQ2008's
    folds (the three training parts, rows of a query together; the test part); raw
    web-search-like features (``make_web_data``, 250 training and 250 test queries) as given
    and normalised per query."""
    import rankjax as rj
    norm = lambda X, q: np.asarray(rj.io.normalize_per_query(X, q))      # noqa: E731
    if "lambdarank" in only:
        d = SHARED / "lambdarank_sample"
        tr = rj.io.read_svmlight(d / "rank.train")
        te = rj.io.read_svmlight(d / "rank.test", num_features=tr.X.shape[1], drop_extra=True)
        yield "lambdarank_sample", 0, (norm(tr.X, tr.qid), tr.y, tr.qid, norm(te.X, te.qid),
                                       te.y, te.qid)
    if "mq2008" in only:
        for fold, data in mq2008_folds(folds):
            yield "MQ2008", fold, data
    if "web" in only:
        tr = rj.make_web_data(250, seed=1)
        te = rj.make_web_data(250, seed=2, first_qid=10**6)
        yield "web, raw", 0, (tr.X, tr.y, tr.qid, te.X, te.y, te.qid)
        yield "web, normalised", 0, (norm(tr.X, tr.qid), tr.y, tr.qid, norm(te.X, te.qid), te.y,
                                     te.qid)
