"""The speed guard: the change against its base, both measured on this machine in this run.

Runs ``bench_floor.quick()`` (the hot paths against their floors, and a small warm
``RankRLSCV`` fit of each kind) once on the *base* tree and once on the *head* tree, in
fresh processes that alternate (base, head, then head, base), and compares each path's
best ratio to its floor (fastest run over fastest floor run, the floor timed interleaved
in the same process; a shared CPU's timings are bimodal, the fastest are not) between the
two: a path fails when the head's best ratio is more than ``--tolerance`` (1.3) times the
base's, and a warm fit fails when its chosen λ or its cross-validated NDCG differs from the
base's (the answer of a speed change is the same answer: λ equal, the score within
``1e-9`` relative, float64). Failing groups are measured again in two more alternating rounds (a shared
machine's speed drifts by up to 25 % between runs). No figure of another machine enters
the verdict, so it does not depend on which CPU measured anything before; the base is a
commit (``benchmarks/guard_base``), not a set of numbers.

    python benchmarks/guard.py                       # the working tree against guard_base
    python benchmarks/guard.py --base b38fb65 --head 35b8738      # any two commits
    python benchmarks/guard.py --update              # make HEAD the base, on purpose only:
                                                     # say why in the commit message

Each tree's ``rankjax`` package is exported with ``git archive`` into a temporary folder
and imported from there (``PYTHONPATH``; each process prints the file it imported); the
benchmark code is the head's, so both trees are timed by the same harness. Run it on a
quiet machine: with other jobs running, ratios move and mean nothing.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from lib.commits import ROOT, export, git

HERE = os.path.dirname(os.path.abspath(__file__))
BASE_FILE = os.path.join(HERE, "guard_base")
BENCH = os.path.join(HERE, "bench_floor.py")
GROUPS = ["primal", "gram_wide", "lqo_primal", "dual", "ndcg",
          "fit_linear", "fit_kernel", "fit_nystrom", "fit_optimize"]


def measure(tree, groups, cache):
    """``{key: ratio}`` of ``groups`` with ``rankjax`` imported from ``tree``, in a fresh
    process (JSON lines of every measurement go to stderr as they come)."""
    env = dict(os.environ, PYTHONPATH=tree, JAX_COMPILATION_CACHE_DIR=cache,
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0")
    code = ("import sys, runpy; sys.argv = sys.argv[1:]; import rankjax; "
            "print(' imported', rankjax.__file__, file=sys.stderr); "
            "runpy.run_path(sys.argv[0], run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code, BENCH, "--quick", "--only", ",".join(groups)],
                          env=env, capture_output=True, text=True, cwd=HERE)
    sys.stderr.write(proc.stderr[-2000:] if proc.returncode else
                     "".join(line + "\n" for line in proc.stderr.splitlines() if "imported" in line))
    if proc.returncode:
        raise SystemExit(f"guard: the benchmark failed on {tree} (exit {proc.returncode})")
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            print(json.dumps(dict(rec, tree=os.path.basename(tree))), file=sys.stderr)
            out[rec["key"]] = rec
    return out


def rounds(trees, groups, count, cache, best, answers):
    """``count`` alternating rounds; ``best[side][key]`` keeps each side's lowest ratio,
    ``answers[side][key]`` the ``(λ, CV score)`` of each warm fit."""
    for r in range(count):
        for side in (("base", "head") if r % 2 == 0 else ("head", "base")):
            for k, rec in measure(trees[side], groups, cache).items():
                v = rec.get("ratio_best", rec["ratio"])
                best[side][k] = min(v, best[side].get(k, v))
                if "lam" in rec:
                    answers[side][k] = (rec["lam"], rec["cv_ndcg"])


def same_answers(answers):
    """The warm fits whose λ or CV score differ between head and base, and their lines."""
    failures, lines = [], []
    for k in sorted(answers["head"]):
        if k not in answers["base"]:
            continue
        (lh, sh), (lb, sb) = answers["head"][k], answers["base"][k]
        if lh != lb or abs(sh - sb) > 1e-9 * abs(sb):
            failures.append(k)
            lines.append(f"  FAIL  {k}: λ {lh:g}, CV {sh:.12g}; base λ {lb:g}, CV {sb:.12g}")
        else:
            lines.append(f"  same  {k}: λ {lh:g}, CV {sh:.12g}")
    return failures, lines


def compare(best, tolerance):
    failures, lines = [], []
    for k in sorted(best["head"]):
        h, b = best["head"][k], best["base"].get(k)
        if b is None:
            lines.append(f"  new   {k}: ratio {h:.3f} (not on the base)")
            continue
        tag = "FAIL" if h / b > tolerance else "ok"
        lines.append(f"  {tag:5} {k}: ratio {h:.3f}, base {b:.3f} ({h / b:.2f}x)")
        if h / b > tolerance:
            failures.append(k)
    return failures, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", help="base commit (default: the one in benchmarks/guard_base)")
    ap.add_argument("--head", help="head commit (default: the working tree)")
    ap.add_argument("--only", help="comma-separated groups: " + ",".join(GROUPS))
    ap.add_argument("--tolerance", type=float, default=1.3)
    ap.add_argument("--update", action="store_true", help="write HEAD's commit as the base")
    a = ap.parse_args()
    if a.update:
        sha = git("rev-parse", "HEAD")
        with open(BASE_FILE + ".tmp", "w") as fh:
            fh.write(sha + "\n")
        os.replace(BASE_FILE + ".tmp", BASE_FILE)
        print(f"guard: base is now {sha[:12]}", file=sys.stderr)
        return 0
    groups = a.only.split(",") if a.only else GROUPS
    base = a.base or open(BASE_FILE).read().strip()
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rankjax-guard-") as tmp:
        trees = {"base": export(base, os.path.join(tmp, "base")),
                 "head": export(a.head, os.path.join(tmp, "head")) if a.head else ROOT}
        best, answers = {"base": {}, "head": {}}, {"base": {}, "head": {}}
        rounds(trees, groups, 2, os.path.join(tmp, "cache"), best, answers)
        failures, lines = compare(best, a.tolerance)
        if failures:         # a noisy moment is not a regression: those groups, two more rounds
            print(f"guard: {len(failures)} ratio(s) over {a.tolerance}x, measuring again",
                  file=sys.stderr)
            again = sorted({k.split("/")[0].removesuffix("_path") for k in failures})
            rounds(trees, again, 2, os.path.join(tmp, "cache"), best, answers)
            failures, lines = compare(best, a.tolerance)
        wrong, answer_lines = same_answers(answers)
    took = time.perf_counter() - t0
    print(f"guard: head {a.head or 'working tree'} against base {base[:12]}", file=sys.stderr)
    print("\n".join(lines + answer_lines), file=sys.stderr)
    if wrong:
        print(f"guard: FAILED: {len(wrong)} warm fit(s) chose another λ or CV score than the "
              f"base: {', '.join(wrong)}", file=sys.stderr)
        return 1
    if failures:
        print(f"guard: FAILED ({took:.0f} s): {len(failures)} path(s) more than {a.tolerance}x "
              f"slower against their floor than on the base: {', '.join(failures)}", file=sys.stderr)
        return 1
    print(f"guard: passed ({took:.0f} s, {len(lines)} ratios within {a.tolerance}x of the base)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
