"""The precision rule measured (issue 41): every function that solves for a λ, in float32
(x64 off) against the same call in float64, on ``lambdarank_sample`` and on a near-collinear
synthetic problem. One JSON line per function and data set: the λ it refuses (NaN lanes
with an ``UnresolvedLambdaWarning``), the largest error of the lanes it answers on the
ordering (:func:`centred`: the scores centred within each query, relative L2, as a ranking
model cannot see a constant within a query; leave-pair-out: the pairs' differences), the
largest share of within-query pairs whose order flips, and the float32 and float64 seconds of
the call (first call, compile included).

    python benchmarks/bench_precision.py --save benchmarks/lines/precision.jsonl  # both sets (~2 min)
    python benchmarks/bench_precision.py --lines benchmarks/lines/precision.jsonl --readme docs/precision.md
    python benchmarks/bench_precision.py --only near_collinear

``--readme`` rewrites the README's ``precision`` block from the lines (of the run, or of
``--lines``: the committed ones), the table of ``docs/precision.md`` too.

``tests/test_float32_real.py`` asserts the rule on the same calls (within 1e-2 or refused).
"""
import argparse
import os
import platform
import sys

sys.path.insert(0, os.path.dirname(__file__))
import jax  # noqa: E402
import numpy as np  # noqa: E402

from lib.blocks import add_arguments, from_lines, in_list_item, rewrite, save_lines  # noqa: E402
from lib.timing import emit  # noqa: E402
from lib.precision import LAMS, both, lambdarank, lane_errors, near_collinear  # noqa: E402

def _lams(values):
    return "none" if not values else (f"{values[0]:g}" if len(values) == 1
                                      else f"{values[0]:g} to {values[-1]:g}")


def table(lines):
    """The README's precision table (indented into its bullet) from the run's lines."""
    rows = ["| data | function | λ refused (NaN, one warning) | largest error of the rest, "
            "centred within queries | pairs flipped, at most |", "| --- | --- | --- | --- | --- |"]
    for ln in lines:
        err = "–" if ln["max_rel_err"] is None else f"{ln['max_rel_err']:.2g}"
        flip = "–" if ln["max_flipped"] is None else f"{ln['max_flipped']:.2g}"
        rows.append(f"| {ln['data']} | `{ln['name'].split(':', 1)[1]}` | "
                    f"{_lams(ln['refused_lams'])} | {err} | {flip} |")
    info = next(iter(lines), {})
    rows += ["", f"<sub>float32 against float64, λ in `logspace(-4, 3, 15)`; the error of the "
             "scores centred within each query, relative L2 (leave-pair-out: of the pairs' "
             "differences), and the share of within-query pairs whose order float32 reverses; "
             f"{info.get('machine', '?')}, jax {info.get('jax', '?')}; "
             "`python benchmarks/bench_precision.py --lines benchmarks/lines/precision.jsonl "
             "--readme docs/precision.md`.</sub>"]
    return in_list_item(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", help="lambdarank_sample or near_collinear")
    add_arguments(ap, "precision")
    a = ap.parse_args()
    if from_lines(a, "precision", table, indent="  "):
        return
    cases = {"lambdarank_sample": lambdarank, "near_collinear": near_collinear}
    found = []
    for case, load in cases.items():
        data = None if a.only not in (None, case) else load()
        if data is None:
            continue
        for name, (o64, o32, _, s64, s32) in both(data).items():
            refused, err, flips = lane_errors(o64, o32, data[2])
            line = dict(name=f"precision:{name}", data=case, shape=list(data[0].shape),
                        dtype="float32", machine=platform.machine(), jax=jax.__version__,
                        refused_lams=[float(f"{v:.3g}") for v in LAMS[refused]],
                        max_rel_err=float(np.max(err[~refused])) if (~refused).any() else None,
                        max_flipped=float(np.max(flips[~refused])) if (~refused).any() else None,
                        bound=1e-2, float32_first_s=round(s32, 3), float64_first_s=round(s64, 3))
            emit(**line)
            found.append(line)
    if a.save:
        save_lines(a.save, found)
    if a.readme:
        rewrite(a.readme, "precision", table(found), indent="  ")


if __name__ == "__main__":
    main()
