"""Progress of long calls: one ``verbose`` convention, one ``logging`` logger.

Every estimator and every public function that can run for more than a couple of
seconds takes ``verbose``: ``0`` (or ``False``) is silent, ``1`` (or ``True``) logs one
line per stage (a grid point, a γ, a fold bucket, an optimisation step, a block of
boosting rounds or of CG/FALKON/TRON iterations, a stream chunk), ``k > 1`` every k-th
stage. Lines carry the elapsed time and, where the number of stages is known, an
estimate of the time left. Inside compiled loops they are sent by
``jax.debug.callback`` while the loop runs.

The lines go to the ``logging`` logger named ``"rankjax"`` at level ``INFO``. When
nothing is configured, the first line installs one stderr handler on that logger;
``logging.getLogger("rankjax").setLevel(logging.WARNING)`` silences every line, and a
handler of your own (on the logger or on the root, e.g. ``logging.basicConfig``)
receives them instead.

Example:
  >>> import logging
  >>> from rankjax._core.log import Stages
  >>> for i in Stages(3, "demo", verbose=0):   # verbose=0: silent
  ...     pass
"""
from __future__ import annotations

import functools
import inspect
import logging
import os
import sys
import threading
import time

import jax
import numpy as np

from .cores import core as jit_core

logger = logging.getLogger("rankjax")
_clock: dict = {}          # the start of the compiled loops of the running call (callbacks)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def user_stacklevel() -> int:
    """The ``stacklevel`` for ``warnings.warn`` called right here that names the first
    frame outside the rankjax package: the user's line, however deep the library's own
    calls run (``rj.select`` -> the solver's hold-out -> the warning is deeper than
    ``rj.holdout`` -> the warning); ``functools``' dispatch frames (a solver method's
    ``singledispatchmethod``) are the library's too."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE)
                                 or frame.f_code.co_filename == functools.__file__):
        frame, level = frame.f_back, level + 1
    return level


def check_verbose(verbose, name: str = "verbose") -> int:
    """``verbose`` as the number of stages between two lines (0: silent): a bool, or an
    int >= 0."""
    if isinstance(verbose, (bool, np.bool_)):
        return int(bool(verbose))
    if isinstance(verbose, (int, np.integer)) and verbose >= 0:
        return int(verbose)
    raise ValueError(f"{name} must be a bool or an int >= 0, got {verbose!r}")


def _ready():
    """The logger at INFO with somewhere to write (only when nothing is configured)."""
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if not logger.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[rankjax] %(message)s"))
        logger.addHandler(handler)


def info(verbose: int, msg: str, *args) -> None:
    """One line when ``verbose`` is on."""
    if verbose:
        _ready()
        logger.info(msg, *args)


def _timing(start: float, done: int, total) -> str:
    elapsed = time.perf_counter() - start
    if total and 0 < done < total:
        return f"{elapsed:.1f} s, ~{elapsed / done * (total - done):.1f} s left"
    return f"{elapsed:.1f} s"


class Stages:
    """Iterates over ``items`` (or ``range(items)``), logging ``what i/n: detail`` every
    ``verbose``-th stage and at the last, with the elapsed time and the time left.
    ``note(text)`` sets the detail of the stage that just finished. Stages that are not a
    loop call ``done(detail)`` after each instead of iterating."""

    def __init__(self, items, what: str, verbose: int):
        self.items = range(items) if isinstance(items, (int, np.integer)) else items
        self.what, self.every = what, check_verbose(verbose)
        self.detail, self._done, self._start = "", 0, time.perf_counter()

    def note(self, text: str) -> None:
        self.detail = text

    def done(self, detail: str = "") -> None:
        """One more stage finished (``detail`` its line)."""
        self._done += 1
        self.detail = detail
        self._log(self._done)

    def _log(self, i):
        n = len(self.items) if hasattr(self.items, "__len__") else None
        if self.every and (i % self.every == 0 or i == n):
            info(1, "%s %d/%s%s (%s)", self.what, i, n if n is not None else "?",
                 f": {self.detail}" if self.detail else "", _timing(self._start, i, n))

    def __iter__(self):
        self._start = time.perf_counter()
        for i, item in enumerate(self.items, 1):
            self.detail = ""
            yield item
            self._log(i)


def begin() -> None:
    """Starts the clock of the compiled loops of a public call (on the host, before
    them); the first line of a loop that finds it used restarts it. Forgets the counts
    of the gated stages (:func:`gated_step`)."""
    with _lock:
        _clock["start"], _clock["fresh"] = time.perf_counter(), True
        _counts.clear()


_counts: dict = {}         # (what, total) -> [stages done, work done, first time, first work]
_lock = threading.Lock()   # callbacks arrive on XLA's threads


def _left(key, weight, total_work):
    """``(done, seconds left or None)`` of one more finished stage of the gated loop
    ``key``: stages counted as they finish (independent blocks finish in any order), the
    time left from the rate of the work done since the first stage finished (what ran
    before it, compiling and the decompositions, is not the loop's rate)."""
    now = time.perf_counter()
    with _lock:
        c = _counts.setdefault(key, [0, 0.0, now, 0.0])
        c[0] += 1
        c[1] += weight
        if c[0] == 1:
            c[2], c[3] = now, c[1]
        done, work, t0, w0 = c
        if done >= key[1]:
            del _counts[key]
    if done < 2 or work <= w0 or done >= key[1]:
        return done, None
    return done, (now - t0) / (work - w0) * max(total_work - work, 0.0)


def _from_loop(what, total, every, i, *values, fmt, gated=None):
    """One loop line; ``gated``: ``(weight index or None, total work)`` of a gated stage,
    counted as it finishes (:func:`gated_step`)."""
    i, left = int(i), None
    if gated is not None and total:
        index, total_work = gated
        weight = 1.0 if index is None else float(values[index])
        i, left = _left((what, total), weight, total_work)
    if i % every and i != total:
        return
    if i <= every:                           # the first line of this loop
        if not _clock.get("fresh"):
            _clock["start"] = time.perf_counter()
        _clock["fresh"] = False
    start = _clock["start"]
    text = fmt.format(*(float(v) for v in values)) if fmt else ""
    count = f"{i}/{total}" if total else f"{i}"
    if gated is not None:
        elapsed = time.perf_counter() - start
        timing = f"{elapsed:.1f} s" + ("" if left is None else f", ~{left:.1f} s left in this pass")
    else:
        timing = _timing(start, i, total)
    info(1, "%s %s%s (%s)", what, count, f": {text}" if text else "", timing)


def loop_step(every: int, what: str, total, i, *values, fmt: str = "") -> None:
    """Inside a compiled loop (``every``, ``what``, ``total`` and ``fmt`` static; ``total``
    None when the count is traced): a line at every ``every``-th step ``i`` (1-based) and
    at the last, formatting ``values``
    with ``fmt`` (``str.format``), sent to the host while the loop runs. Nothing is
    traced when ``every`` is 0."""
    if every:
        jax.debug.callback(lambda i, *v: _from_loop(what, total, every, i, *v, fmt=fmt),
                           i, *values)


_active = [0]          # the verbose level of the public call running now (gated callbacks)
_tracing_logged = [False]   # tracing a program's logged twin (:func:`run`)


class active:
    """``with active(verbose):`` around a public call turns on the lines of the few-stage
    callbacks compiled into its logged programs (:func:`gated_step`; a global, since
    callbacks run on XLA's threads)."""

    def __init__(self, verbose):
        self.every = check_verbose(verbose)

    def __enter__(self):
        self.saved, _active[0] = _active[0], self.every
        begin()
        return self

    def __exit__(self, *exc):
        _active[0] = self.saved


def level() -> int:
    """The verbose level of the public call running now (0: silent)."""
    return _active[0]


def _gated(what, total, i, *values, fmt, gated):
    if _active[0]:
        _from_loop(what, total, _active[0], i, *values, fmt=fmt, gated=gated)


def gated_step(what: str, total: int, i, *values, fmt: str = "", weight=None,
               total_work=None) -> None:
    """A line for stage ``i`` (1-based) of ``total`` of a compiled program with few
    stages (fold buckets, row blocks), traced only into the program's logged twin that
    :func:`run` calls when ``verbose`` asks: the default program has no host callback, so
    JAX's on-disk cache can keep it. Pass a value computed by the stage among ``values``
    so the line follows it. Independent stages may finish in any order: a line counts the
    stages finished so far (``3/56`` is the third to finish, whichever it is), and the time
    left is the rate of the work finished since the first stage times the work left, the
    work of a stage being ``values[weight]`` out of ``total_work`` (default: one per
    stage, ``total``)."""
    if _tracing_logged[0]:
        gated = (weight, float(total if total_work is None else total_work))
        jax.debug.callback(lambda i, *v: _gated(what, total, i, *v, fmt=fmt, gated=gated),
                           i, *values)


def logged(core):
    """The twin of the jitted ``core`` whose trace carries the :func:`gated_step` lines
    (one per core, compiled on first use; same static arguments)."""
    twin = _twins.get(core)
    if twin is None:
        fn = core.__wrapped__

        @functools.wraps(fn)
        def traced(*args, **kwargs):
            saved, _tracing_logged[0] = _tracing_logged[0], True
            try:
                return fn(*args, **kwargs)
            finally:
                _tracing_logged[0] = saved

        twin = _twins[core] = jax.jit(traced, static_argnames=core.static_argnames)
    return twin


_twins: dict = {}


def compiled(*, static_argnames=()):
    """A compiled core (:func:`rankjax._core.cores.core`) that :func:`run` may call with
    ``verbose``; its logged twin (:func:`logged`) takes the same static arguments from it."""
    return lambda fn: jit_core(fn, static_argnames=static_argnames)


def run(verbose, core, *args, **kwargs):
    """``core(*args, **kwargs)``; with ``verbose``, its logged twin with the
    :func:`gated_step` lines on (waiting for the result there, so that the lines come while
    the call runs)."""
    every = check_verbose(verbose)
    if not every:
        return core(*args, **kwargs)
    with active(every):
        return jax.block_until_ready(logged(core)(*args, **kwargs))


def ready(tree):
    """``tree`` once computed (so that a stage's line follows its work)."""
    return jax.block_until_ready(tree)


def stage(verbose, what: str, call):
    """``call()`` with, for ``verbose``, a line when it starts and one with the elapsed time
    when its result is ready, and the few-stage lines of its programs on (:class:`active`)."""
    every = check_verbose(verbose)
    if not every:
        return call()
    start = time.perf_counter()
    info(1, "%s: started", what)
    with active(every):
        out = ready(call())
    info(1, "%s: done (%.1f s)", what, time.perf_counter() - start)
    return out


def timed(fn):
    """Gives a public function of one compiled program a ``verbose`` keyword: a line when
    it starts and one, with the elapsed time, when its result is ready."""
    sig = inspect.signature(fn)
    params = list(sig.parameters.values())
    at = next((i for i, p in enumerate(params) if p.kind is p.VAR_KEYWORD), len(params))
    params.insert(at, inspect.Parameter("verbose", inspect.Parameter.KEYWORD_ONLY, default=0))

    @functools.wraps(fn)
    def wrapper(*args, verbose=0, **kw):
        if not check_verbose(verbose):
            return fn(*args, **kw)
        start = time.perf_counter()
        info(1, "%s: started", fn.__name__)
        out = ready(fn(*args, **kw))
        info(1, "%s: done (%.1f s)", fn.__name__, time.perf_counter() - start)
        return out
    wrapper.__signature__ = sig.replace(parameters=params)
    return wrapper
