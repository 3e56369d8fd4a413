"""Multi-process RankRLS on JAX's own distributed runtime: every process holds its own
queries, the devices of all processes form one mesh, and the normal equations are
joined by one ``psum`` (``rj.scale.shard`` and the verbs).

Two processes on this machine over loopback (CPU devices, 2 simulated in each, even on a
machine with a GPU)::

    python examples/multihost.py --launch 2

On a cluster, start one process per host with the same coordinator (see the README,
"Many devices and hosts")::

    python examples/multihost.py --coordinator HOST0:12355 --num-processes 4 --process-id $RANK

Process 0 prints one JSON line: the weights, the leave-query-out NDCG@10 of every λ, the
CG weights and the λ that ``tune`` learns (its loss at each step and its model's weights),
computed over all processes' queries; ``--out`` saves them (.npz).
"""
import argparse
import json
import os
import socket
import subprocess
import sys


def _args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--launch", type=int, default=0,
                   help="start this many processes on this machine (loopback) and wait")
    p.add_argument("--coordinator", default="127.0.0.1:12355", help="host:port of process 0")
    p.add_argument("--num-processes", type=int, default=1)
    p.add_argument("--process-id", type=int, default=0)
    p.add_argument("--local-devices", type=int, default=2,
                   help="simulated CPU devices per process (CPU only)")
    p.add_argument("--queries", type=int, default=60, help="queries of the synthetic data")
    p.add_argument("--out", default=None, help="process 0 saves its results here (.npz)")
    return p.parse_args(argv)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(n, args):
    """Runs ``n`` processes of this script over loopback; returns process 0's output."""
    coord = f"127.0.0.1:{_free_port()}"
    procs = []
    for pid in range(n):
        cmd = [sys.executable, os.path.abspath(__file__), "--coordinator", coord,
               "--num-processes", str(n), "--process-id", str(pid),
               "--local-devices", str(args.local_devices), "--queries", str(args.queries)]
        if args.out:
            cmd += ["--out", args.out]
        # the loopback demo runs on simulated CPU devices, also on a GPU machine (several
        # processes on one GPU would each claim most of its memory)
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env))
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        if p.returncode:
            sys.exit(f"a process failed (exit {p.returncode}):\n{err[-3000:]}")
    return outs[0][0]


def main(args):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               f" --xla_force_host_platform_device_count={args.local_devices}")
    import jax
    jax.config.update("jax_enable_x64", True)
    if args.num_processes > 1:
        jax.distributed.initialize(coordinator_address=args.coordinator,
                                   num_processes=args.num_processes, process_id=args.process_id)
    import numpy as np
    import rankjax as rj

    d = rj.make_ranking_data(args.queries, num_features=20, seed=0)
    mine = np.unique(d.qid) % args.num_processes == args.process_id    # this process's queries
    rows = np.isin(d.qid, np.unique(d.qid)[mine])
    X, y, qid = d.X[rows], d.y[rows], d.qid[rows]

    mesh = jax.make_mesh((jax.device_count(),), ("queries",))
    data = rj.scale.shard(rj.Problem(X, y, qid), mesh)
    lams = np.logspace(-2, 3, 6)
    path = rj.path(data, rj.Primal(), lams=lams).value
    holdout = rj.holdout(data, rj.Primal(), lams=lams).value
    ndcg = data.score(holdout.predictions, rj.ndcg, k=10)
    cg = rj.fit(data, rj.CG(tol=1e-12), lam=1.0).value
    tuned = rj.tune(data, rj.Primal(), lam=1.0, steps=5)    # λ by descent on the hold-out loss
    result = dict(processes=jax.process_count(), devices=jax.device_count(),
                  weights=np.asarray(path.weights).tolist(),
                  holdout_ndcg=np.asarray(ndcg).tolist(), cg_weights=np.asarray(cg.weights).tolist(),
                  tune_loss=np.asarray(tuned.loss_history).tolist(), tune_lam=float(tuned.lam),
                  tune_weights=np.asarray(tuned.model.weights).tolist())
    if jax.process_index() == 0:
        print(json.dumps(result))
        if args.out:
            np.savez(args.out, **{k: np.asarray(v) for k, v in result.items()})


if __name__ == "__main__":
    a = _args()
    if a.launch:
        print(launch(a.launch, a), end="")
    else:
        main(a)
