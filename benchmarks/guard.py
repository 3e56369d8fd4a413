"""The speed guard: the quick subset of ``bench_floor.py`` against the committed baseline.

Runs ``bench_floor.quick()`` (about 30 s on a 2-core CPU, compile included) and compares
every path's ratio to its floor (``run_s / floor_s``, measured in the same run: not
seconds, so another machine of the same kind gives comparable figures) with
``benchmarks/baseline.json``. Exits 1, naming the path, when a ratio is more than
``--tolerance`` (1.3) times its baseline in two runs (a failing group is measured once more:
a shared machine's speed drifts by up to 25 % between runs); a path without a baseline is
reported, not failed.

    python benchmarks/guard.py                    # before a change lands
    python benchmarks/guard.py --update           # rewrite the baseline, on purpose only:
                                                  # say why in the commit message

Run it on a quiet machine: with other jobs running, ratios move and mean nothing.
"""
import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import bench_floor  # noqa: E402  (imports rankjax first)
import jax  # noqa: E402

BASELINE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "baseline.json")


def measure(only=None):
    """``{key: ratio}`` of the quick subset (the groups in ``only``, every group when None);
    JSON lines of every measurement on stdout."""
    return {k: round(r, 3) for k, r in bench_floor.run(bench_floor.quick(), only)}


def compare(now, base, tolerance):
    """``(failures, lines)``: every key worse than ``tolerance`` x its baseline fails."""
    failures, lines = [], []
    for k, r in sorted(now.items()):
        b = base.get(k)
        if b is None:
            lines.append(f"  new   {k}: ratio {r:.3f} (no baseline)")
            continue
        worse = r / b
        tag = "FAIL" if worse > tolerance else "ok"
        lines.append(f"  {tag:5} {k}: ratio {r:.3f}, baseline {b:.3f} ({worse:.2f}x)")
        if worse > tolerance:
            failures.append(k)
    return failures, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="write the measured ratios as the baseline")
    ap.add_argument("--tolerance", type=float, default=1.3)
    ap.add_argument("--baseline", default=BASELINE)
    a = ap.parse_args()
    t0 = time.perf_counter()
    now = measure()
    took = time.perf_counter() - t0
    if a.update:
        meta = dict(machine=platform.machine(), processor=platform.processor() or None,
                    cpus=os.cpu_count(), device=jax.devices()[0].platform, jax=jax.__version__)
        with open(a.baseline + ".tmp", "w") as fh:
            json.dump(dict(ratios=now, measured_on=meta), fh, indent=1, sort_keys=True)
            fh.write("\n")
        os.replace(a.baseline + ".tmp", a.baseline)
        print(f"guard: baseline written ({len(now)} ratios, {took:.0f} s)", file=sys.stderr)
        return 0
    with open(a.baseline) as fh:
        base = json.load(fh)["ratios"]
    failures, lines = compare(now, base, a.tolerance)
    if failures:             # a noisy moment is not a regression: measure those groups again
        print(f"guard: {len(failures)} ratio(s) over {a.tolerance}x, measuring again", file=sys.stderr)
        again = measure({k.split("/")[0].removesuffix("_path") for k in failures})
        now = {k: min(r, again.get(k, r)) for k, r in now.items()}
        failures, lines = compare(now, base, a.tolerance)
        took = time.perf_counter() - t0
    print("\n".join(lines), file=sys.stderr)
    if failures:
        print(f"guard: FAILED ({took:.0f} s): {len(failures)} path(s) more than {a.tolerance}x slower "
              f"against their floor than the baseline: {', '.join(failures)}", file=sys.stderr)
        return 1
    print(f"guard: passed ({took:.0f} s, {len(now)} ratios within {a.tolerance}x of the baseline)",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
