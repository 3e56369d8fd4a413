"""The main job's console: progress lines (``--quiet`` keeps only the final JSON line),
one-line warnings, the report."""
from __future__ import annotations

import dataclasses
import json
import sys

from .._core.atomic import atomic_write

__all__ = ["CONSOLE", "say", "warn", "warned", "fmt", "rounded", "print_report"]


@dataclasses.dataclass
class _Console:
    """The console's one setting: ``quiet`` (``--quiet``, or stdout carries scores)."""
    quiet: bool = False


CONSOLE = _Console()


def say(msg):
    if not CONSOLE.quiet:
        print(msg, flush=True)


def warn(msg):
    sys.stderr.write(f"rankjax: warning: {msg}\n")


def warned(call):
    """``call()`` with every warning it raises printed as one ``rankjax: warning:`` line."""
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = call()
    for w in caught:
        if issubclass(w.category, UserWarning):
            warn(" ".join(str(w.message).split()))
    return out


def fmt(v):
    """A metric for the console: ``0.1234`` or, for a multi-output model, ``[0.1234, ...]``."""
    return "[" + ", ".join(f"{x:.4f}" for x in v) + "]" if isinstance(v, list) else f"{v:.4f}"


def rounded(v):
    return [round(x, 6) for x in v] if isinstance(v, list) else round(v, 6)


def print_report(out, args):
    line = json.dumps(out)
    print(line, flush=True)
    if args.json:
        with atomic_write(args.json) as fh:
            fh.write(line + "\n")
