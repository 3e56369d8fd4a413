"""Tolerances of the float32 tests: ``within(err, bound, what)`` asserts ``err <= bound``
and, with ``RANKJAX_PRECISION_LOG=file`` set, records the error beside its bound, so that
``docs/float32_tests.md`` can list every bound with the error its test observes (the rule:
a bound derived from eps, scale and condition, at most about 100x the observed error).

    RANKJAX_PRECISION_LOG=/tmp/p.jsonl python -m pytest -o addopts= tests/test_float32*.py
    python tests/precision.py /tmp/p.jsonl        # the table, worst ratio per bound
"""
import json
import os
import sys


def within(err, bound, what: str = ""):
    """Asserts ``err <= bound`` (``err`` a float; NaN fails); records both when logging."""
    err, bound = float(err), float(bound)
    log = os.environ.get("RANKJAX_PRECISION_LOG")
    if log:
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").split(" ")[0]
        with open(log, "a") as fh:
            fh.write(json.dumps({"test": test, "what": what, "err": err, "bound": bound}) + "\n")
    assert err <= bound, f"{what}: error {err:.3g} above its bound {bound:.3g}"


def table(path):
    """Markdown rows ``| test | what | bound | observed | ratio |``: per test case the
    assertion with the largest error (the error the case's own problem shows) beside its
    bound; per test function and check the case whose bound is furthest above that error."""
    worst_case = {}
    for line in open(path):
        r = json.loads(line)
        key = (r["test"], r["what"])
        if key not in worst_case or r["err"] > worst_case[key]["err"]:
            worst_case[key] = r
    worst = {}
    for (test, what), r in worst_case.items():
        key = (test.split("[")[0], what)
        ratio = r["bound"] / max(r["err"], 1e-300)
        if key not in worst or ratio > worst[key][2]:
            worst[key] = (r["bound"], r["err"], ratio)
    rows = ["| test | check | bound | observed | bound / observed |",
            "| --- | --- | --- | --- | --- |"]
    for (test, what), (b, e, ratio) in sorted(worst.items()):
        rows.append(f"| `{test.split('::')[-1]}` | {what} | {b:.2g} | {e:.2g} | {ratio:.0f} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(sys.argv[1]))
