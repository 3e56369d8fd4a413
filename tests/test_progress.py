"""Progress that tells the truth (issue 76): with ``verbose=1`` the lines of a pass come
in order (a line counts the stages finished so far, whichever finished), and once a
tenth of a pass is done every time-left estimate is within 2x of the time the pass
actually had left (the time of its last line)."""
import logging
import re
import time

import numpy as np
import pytest

import rankjax as rj
from rankjax.estimators import RankRLSCV

LINE = re.compile(r"^(?P<what>.+?) (?P<i>\d+)/(?P<n>\d+)(?::.*)? \((?P<t>[\d.]+) s"
                  r"(?:, ~(?P<left>[\d.]+) s left[^)]*)?\)$")


class Lines(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.lines = []

    def emit(self, record):
        self.lines.append((time.perf_counter(), record.getMessage()))


@pytest.fixture
def lines():
    h, logger = Lines(), logging.getLogger("rankjax")
    saved = logger.level
    logger.addHandler(h)
    logger.setLevel(logging.INFO)
    yield h.lines
    logger.removeHandler(h)
    logger.setLevel(saved)


def passes(lines):
    """``{what: [(time, i, n, left), ...]}`` of every counted line."""
    out = {}
    for t, msg in lines:
        m = LINE.match(msg)
        if m:
            left = None if m["left"] is None else float(m["left"])
            out.setdefault(m["what"], []).append((t, int(m["i"]), int(m["n"]), left))
    return out


def check_truthful(lines, min_stages=8):
    found = {w: p for w, p in passes(lines).items() if p[0][2] >= min_stages}
    assert found, lines
    for what, p in found.items():
        counts = [i for _, i, _, _ in p]
        assert counts == sorted(counts) and counts[-1] == p[0][2], (what, counts)
        end = p[-1][0]
        for t, i, n, left in p:
            if left is None or i < 0.1 * n:
                continue
            actual = end - t
            # within 2x, with the line's own rounding (0.05 s) and a 0.05 s clock floor
            assert left <= 2 * actual + 0.1 and actual <= 2 * left + 0.1, (what, i, left, actual)


def test_nystrom_holdout_lines_are_in_order_and_the_time_left_is_right(lines):
    d = rj.make_ranking_data(1600, num_features=20, docs_per_query=(20, 30), seed=0)
    RankRLSCV(kernel="gaussian", basis=rj.Basis(600), verbose=1).fit(d.X, d.y, qid=d.qid)
    check_truthful(lines)


def test_gated_stages_count_as_they_finish_whatever_their_order():
    """The host side of a gated line: stages reported out of order are counted in order,
    and the time left comes from the work done since the first finished stage."""
    from rankjax._core import log
    log.begin()
    got = []
    for i in (5, 3, 4, 1, 2):
        got.append(log._left(("demo", 5), 2.0, 10.0))
        time.sleep(0.01)
    assert [d for d, _ in got] == [1, 2, 3, 4, 5]
    assert got[0][1] is None and got[-1][1] is None
    assert all(np.isfinite(left) and left >= 0 for _, left in got[1:-1])
