"""Weak scaling of the sharded primal path: a fixed number of rows per device, 1, 2, 4
and 8 devices (simulated CPU devices: one process per device count, since XLA fixes
the count at start-up), plus one line for the first accelerator when there is one.

    python benchmarks/bench_scaling.py [--rows-per-device 250000] [--features 136]

Each line: compile s, median run s of ``rj.path(rj.scale.shard(problem), rj.Primal())``
(13 λ) over 3 runs, and the accuracy check max |w - w_single| against the single-device
``rj.path(problem, rj.Primal())`` on the same data. Weak-scaling efficiency = t(1) / t(D).
On a CPU with fewer cores than simulated devices the devices share the cores, so the
CPU lines measure the overhead of the layout and the collectives, not a speed-up.
"""
import argparse
import json
import os
import subprocess
import sys


def worker(devices, rows_per_device, n, platform):
    if platform == "cpu":
        os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                                   f" --xla_force_host_platform_device_count={devices}")
        os.environ["JAX_PLATFORMS"] = "cpu"
    sys.path.insert(0, os.path.dirname(__file__))
    import jax
    import numpy as np

    import rankjax as rj
    from lib.timing import emit, median_s

    devs = jax.devices()[:devices]
    m = rows_per_device * devices
    rng = np.random.default_rng(0)
    sizes = rng.integers(20, 201, m // 20 + 1)
    qid = np.repeat(np.arange(sizes.size), sizes)[:m]
    X = rng.standard_normal((m, n), dtype=np.float32)
    y = (X @ rng.standard_normal(n, dtype=np.float32) + rng.standard_normal(m, dtype=np.float32))
    g = rj.query_graph(qid)
    lams = np.logspace(-2, 4, 13).astype(np.float32)
    mesh = jax.sharding.Mesh(np.array(devs), ("queries",))
    data = rj.scale.shard(rj.Problem(X, y, g), mesh)
    import time
    t0 = time.perf_counter()
    jax.block_until_ready(rj.path(data, rj.Primal(), lams=lams).value.weights)
    compile_s = time.perf_counter() - t0
    run_s = median_s(lambda: rj.path(data, rj.Primal(), lams=lams).value.weights, repeats=3)
    w = np.asarray(rj.path(data, rj.Primal(), lams=lams).value.weights)
    ref = np.asarray(
        rj.path(rj.Problem(jax.device_put(X, devs[0]), y, g), rj.Primal(), lams=lams).value.weights
    )
    emit(name="sharded_primal_path_weak_scaling", platform=platform, devices=devices,
         dtype="float32", shape=[m, n], rows_per_device=rows_per_device, lams=len(lams),
         compile_s=compile_s, run_s=run_s, rows_per_s=m / run_s,
         max_abs_diff_vs_single_device=float(np.max(np.abs(w - ref))),
         weight_scale=float(np.max(np.abs(ref))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows-per-device", type=int, default=250_000)
    p.add_argument("--features", type=int, default=136)
    p.add_argument("--devices", default="1,2,4,8")
    p.add_argument("--worker", type=int, default=0)
    p.add_argument("--platform", default="cpu")
    a = p.parse_args()
    if a.worker:
        worker(a.worker, a.rows_per_device, a.features, a.platform)
        return
    lines = []
    for d in [int(x) for x in a.devices.split(",")]:
        out = subprocess.run([sys.executable, __file__, "--worker", str(d), "--rows-per-device",
                              str(a.rows_per_device), "--features", str(a.features)],
                             capture_output=True, text=True)
        if out.returncode:
            sys.exit(out.stderr[-3000:])
        line = json.loads(out.stdout.strip().splitlines()[-1])
        lines.append(line)
    t1 = lines[0]["run_s"]
    for line in lines:
        line["weak_scaling_efficiency"] = round(t1 / line["run_s"], 3)
        print(json.dumps(line), flush=True)
    # one accelerator, the largest data of the CPU runs on one device
    probe = subprocess.run([sys.executable, "-c", "import jax; print(jax.default_backend())"],
                           capture_output=True, text=True)
    backend = probe.stdout.strip()
    if backend in ("gpu", "cuda", "rocm", "tpu"):
        biggest = max(int(x) for x in a.devices.split(","))
        out = subprocess.run([sys.executable, __file__, "--worker", "1", "--platform", backend,
                              "--rows-per-device", str(a.rows_per_device * biggest),
                              "--features", str(a.features)], capture_output=True, text=True)
        print(out.stdout.strip().splitlines()[-1] if out.returncode == 0 else
              json.dumps({"name": "sharded_primal_path_weak_scaling", "platform": backend,
                          "error": out.stderr[-500:]}), flush=True)
    else:
        print(json.dumps({"name": "sharded_primal_path_weak_scaling", "platform": "accelerator",
                          "skipped": f"no accelerator here (default backend {backend})"}))


if __name__ == "__main__":
    main()
