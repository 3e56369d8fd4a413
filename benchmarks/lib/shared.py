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
