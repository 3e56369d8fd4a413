"""The one command to run when an accelerator is lent (about 30 minutes of it): every
check that must confirm, not debug, in under 10 minutes, as JSON lines.

    python benchmarks/accelerator_check.py             # on the GPU/TPU machine
    python benchmarks/accelerator_check.py --dry-run   # anywhere: the plan, and the cheap steps

Steps, in order of what matters most (each a subprocess with its own time budget; a step
that would pass the total budget is skipped and says so):

1. ``device``: platform, device kind, memory limit (``memory_stats``), jax version.
2. ``precision``: ``tests/test_float32.py`` with x64 off: every solver against float64
   references within ``30 eps32 cond``, on the device's own float32 products and under the
   TF32 / bfloat16 emulation; one verdict line per case.
3. ``million``: ``bench_million.py --full --only nystrom,falkon``: the blocked Nyström
   hold-out (4 γ x 13 λ) and FALKON (and its closed form) at 10^6 x 136, float32, each
   with its floor and the device's peak memory.
4. ``floor``: ``bench_floor.py --quick`` (the guard's hot paths against their floors).
5. ``twins``: the float64 brute-force twins of the core (``test_backend.py``: the CPU paths
   against the accelerator's on the device itself; ``test_cv.py``, ``test_rankrls.py``,
   ``test_cg.py``, ``test_falkon.py``), summarised in one line.
6. ``core``, ``cg``, ``path``: the paper-scale accelerator lines of ``bench_core.py``,
   ``bench_cg.py --only b`` and ``bench_path.py``.

Benchmark lines carry ``device_peak_mb`` where the backend reports it
(``benchmarks/lib/timing.emit``). ``--dry-run`` prints every step's command and budget, and
runs step 1 and the emulated cases of step 2 (a CPU's own products are exact, so only the
emulation's verdicts say anything there): about 20 s on a 2-core CPU
(``tests/test_report.py`` runs it).
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
TOTAL_S = 570
PY = sys.executable
PYTEST = [PY, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=--doctest-modules", "-q"]
DEVICE = ("import json, jax; d = jax.devices()[0]; s = d.memory_stats() or {}; "
          "print(json.dumps(dict(platform=d.platform, device=getattr(d, 'device_kind', ''), "
          "count=jax.device_count(), jax=jax.__version__, "
          "memory_limit_gb=round(s['bytes_limit'] / 2**30, 2) if 'bytes_limit' in s else None)))")

# name, command (with {junit}), budget in seconds, what the dry run adds to the command
# (None: the step is not run), what it shows
STEPS = [
    ("device", [PY, "-c", DEVICE], 30, [], "the device and its memory"),
    ("precision", PYTEST + ["--junitxml={junit}", "tests/test_float32.py"], 90,
     ["-k", "tf32 or bf16 or emulation"],           # a CPU has only the emulated verdicts
     "float32 solvers against float64 references, real and emulated reduced precision"),
    ("million", [PY, "benchmarks/bench_million.py", "--full", "--only", "nystrom,falkon"], 170,
     None, "kernel RankRLS at 10^6 x 136: the blocked Nyström hold-out (4 γ x 13 λ), FALKON"),
    ("floor", [PY, "benchmarks/bench_floor.py", "--quick"], 60, None,
     "hot paths against their floors"),
    ("twins", PYTEST + ["--junitxml={junit}", "tests/test_backend.py", "tests/test_cv.py",
                        "tests/test_rankrls.py", "tests/test_cg.py", "tests/test_falkon.py"], 100,
     None, "float64 brute-force twins on the device"),
    ("core", [PY, "benchmarks/bench_core.py"], 40, None, "segment sums and the primal system"),
    ("cg", [PY, "benchmarks/bench_cg.py", "--only", "b"], 40, None, "early-stopped CG"),
    ("path", [PY, "benchmarks/bench_path.py"], 40, None, "primal and dual λ paths"),
]


def emit(**fields):
    print(json.dumps(fields), flush=True)


def verdicts(junit, step):
    """One line per test case of a junit file: ``verdict`` passed / failed / skipped."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for case in ET.parse(junit).getroot().iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        verdict = "failed" if failed else "skipped" if case.find("skipped") is not None else "passed"
        counts[verdict] += 1
        if step == "precision":
            name = case.get("name")
            emulation = name[name.index("[") + 1:-1] if "[" in name else None
            emit(step=step, test=name, emulation=emulation if emulation != "None" else "device",
                 verdict=verdict)
    return counts


def run_step(name, cmd, budget, env, tmp):
    junit = str(pathlib.Path(tmp) / f"{name}.xml")
    cmd = [c.replace("{junit}", junit) for c in cmd]
    t0 = time.perf_counter()
    try:
        out = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=budget)
    except subprocess.TimeoutExpired as e:
        lines = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        forward(name, lines)
        emit(step=name, ok=False, wall_s=round(time.perf_counter() - t0, 1),
             error=f"over its budget of {budget} s")
        return False
    wall = round(time.perf_counter() - t0, 1)
    summary = dict(step=name, ok=out.returncode == 0, wall_s=wall, rc=out.returncode)
    if os.path.exists(junit):
        summary.update(verdicts(junit, name))
    else:
        forward(name, out.stdout)
    if out.returncode:
        summary["error"] = (out.stderr or out.stdout).strip().splitlines()[-1:] or ""
    emit(**summary)
    return out.returncode == 0


def forward(step, text):
    """A benchmark's JSON lines, tagged with the step."""
    for line in text.splitlines():
        try:
            emit(step=step, **json.loads(line))
        except (ValueError, TypeError):
            pass


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true",
                    help="print the plan; run only the device and precision steps")
    ap.add_argument("--only", help="comma-separated steps: " + ",".join(s[0] for s in STEPS))
    ap.add_argument("--budget", type=float, default=TOTAL_S, help="total seconds")
    args = ap.parse_args(argv)
    names = [s[0] for s in STEPS]
    only = args.only.split(",") if args.only else names
    if set(only) - set(names):
        ap.error(f"--only takes {','.join(names)}")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    start = time.perf_counter()
    ok = True
    with tempfile.TemporaryDirectory(prefix="rankjax-accel-") as tmp:
        for name, cmd, budget, dry, what in STEPS:
            if name not in only:
                continue
            left = args.budget - (time.perf_counter() - start)
            if args.dry_run:
                emit(step=name, plan=" ".join(c if c != PY else "python" for c in cmd),
                     budget_s=budget, what=what, runs_in_dry_run=dry is not None)
                if dry is None:
                    continue
                cmd = cmd + dry
            if budget > left:
                emit(step=name, skipped=f"needs {budget} s, {left:.0f} s of the budget left")
                continue
            ok &= run_step(name, cmd, budget, env, tmp)
    emit(step="total", ok=bool(ok), wall_s=round(time.perf_counter() - start, 1), dry_run=args.dry_run)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
