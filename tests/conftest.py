import numpy as np
import pytest

SHARED_DATA = __import__("pathlib").Path(__file__).resolve().parents[1].parent / "shared" / "data"
LAMBDARANK = SHARED_DATA / "lambdarank_sample"


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def random_qids(rng, m, num_queries=6, singletons=2):
    """Unsorted, non-contiguous query ids with some size-1 queries."""
    ids = rng.choice(np.arange(100, 100 + 7 * num_queries, 7), m)
    ids[:singletons] = 1000 + np.arange(singletons)          # queries of size 1
    return rng.permutation(ids)
