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


SLOW = bool(__import__("os").environ.get("RANKJAX_SLOW"))


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` (minutes each on a 2-core CPU) run with ``RANKJAX_SLOW=1``;
    the default run stays within the suite's time budget."""
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow: run with RANKJAX_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def surface(tmp_path_factory):
    """The small problem of the bad-input tables (``tests/surface.py``)."""
    from surface import make_problem
    return make_problem(tmp_path_factory.mktemp("surface"))


def tune_solver(kind="linear", basis=None, gamma=1.0):
    """The solver of ``rj.tune`` / ``rj.cv_loss`` for a model kind (``cv_loss`` takes γ from
    its ``params``; ``tune`` starts from ``gamma``)."""
    import rankjax as rj
    kernel = {"linear": None, "gaussian": rj.gaussian_kernel(gamma),
              "polynomial": rj.polynomial_kernel(2, gamma)}[kind]
    if basis is not None:
        return rj.Nystrom(rj.linear_kernel() if kernel is None else kernel, basis)
    return rj.Primal() if kernel is None else rj.Dual(kernel)
