"""benchmarks/report.py: every benchmark is a job of the report, and the report is
rendered from the JSON lines of the run (figures, commands, devices, failures)."""
import json
import pathlib
import sys

import numpy as np

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
report = pytest.importorskip("report")


def test_every_benchmark_script_is_a_job_of_the_report():
    scripts = {p.name for p in BENCH.glob("bench_*.py")}
    run = {args[0] for _, _, _, cpu, full in report.JOBS for args in (cpu, full)}
    assert scripts == run
    keys = [k for k, *_ in report.JOBS]
    assert len(keys) == len(set(keys))


def line(**kw):
    return {"device": "cpu:cpu", **kw}


def test_render_takes_every_figure_from_the_results(tmp_path):
    results = [
        {"key": "noisy", "issue": 6, "title": "t", "command": "python benchmarks/x.py",
         "wall_s": 3.0, "returncode": 0, "error": "", "lines": [
             line(name=f"noisy labels {n}", sigma=s, disagreement_error_mean=m,
                  disagreement_error_std=0.01) for n, m0 in (("KPCRank", 0.2), ("RLS", 0.3))
             for s, m in ((0.5, m0), (1.0, m0 + 0.0123))]},
        {"key": "io", "issue": 12, "title": "t", "command": "python benchmarks/bench_io.py",
         "wall_s": 1.0, "returncode": 0, "error": "", "lines": [
             line(name="read_svmlight", rows=50000, run_s=0.4321, same=True,
                  long=list(range(20)))]},
        {"key": "cv", "issue": 4, "title": "t", "command": "python benchmarks/bench_cv.py",
         "wall_s": 1.0, "returncode": 1, "error": "ValueError: boom", "lines": []},
    ]
    report.render(results, tmp_path, ["--only", "noisy,io,cv"], "2026-01-01T00:00", 60.0,
                  partial=True)
    text = (tmp_path / "REPORT.md").read_text()
    assert "python benchmarks/report.py --only noisy,io,cv" in text.splitlines()[5]
    assert "**Partial run**" in text and "ValueError: boom" in text
    assert "0.2123 ± 0.0100" in text and "0.3000 ± 0.0100" in text     # noise table
    assert "| read_svmlight | 50000 | 0.4321 | True |" in text          # long list left out
    assert "(not run)" in text                                           # e.g. the paper
    assert (tmp_path / "report" / "label_noise.png").stat().st_size > 1000


def test_run_jobs_keeps_the_lines_and_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "JOBS", [
        ("echo", 0, "echo", ["-c", "print('{\"name\": \"a\", \"run_s\": 1.5}'); print('x')"],
         ["-c", "print(1)"])])
    (r,) = report.run_jobs(["echo"], False, tmp_path)
    assert r["returncode"] == 0 and r["lines"] == [{"name": "a", "run_s": 1.5}]
    saved = [json.loads(x) for x in (tmp_path / "report" / "results.jsonl").read_text()
             .splitlines()]
    assert saved == [r]


def test_first_screen_table_is_written_between_the_markers_from_the_lines(tmp_path):
    """The README's first table: every figure from the run's lines (mean over MQ2008's
    folds) and the run's own line (machine, minutes), only the text between the markers
    replaced, written atomically."""
    fs = pytest.importorskip("bench_first_screen")
    blocks = pytest.importorskip("lib.blocks")
    start, end = blocks.marks("first-screen")
    lines = [dict(name="first_screen", set="lambdarank_sample", fold=0, learner="A", fit_s=1.0,
                  ndcg10=0.75)]
    lines += [dict(name="first_screen", set="MQ2008", fold=f, learner="A", fit_s=float(f),
                   ndcg10=0.5 + f / 100) for f in (1, 2, 3, 4, 5)]
    lines += [dict(name="first_screen", set="MQ2008", fold=1, learner="B", fit_s=2.0, ndcg10=0.4)]
    lines += [dict(name="first_screen_run", machine="x86_64", cores=2, jax="0.10.2", minutes=17)]
    readme = tmp_path / "README.md"
    readme.write_text(f"top\n{start}\nold table\n{end}\nbottom\n")
    blocks.rewrite(readme, "first-screen", fs.body(lines))
    text = readme.read_text()
    assert text.startswith("top\n") and text.endswith(f"{end}\nbottom\n")
    assert "old table" not in text and "x86_64, 2 CPU cores, jax 0.10.2" in text and "17 min" in text
    lines += [dict(name="first_screen", set="web, raw", fold=0, learner="B", fit_s=4.0, ndcg10=0.8)]
    blocks.rewrite(readme, "first-screen", fs.body(lines))
    text = readme.read_text()
    assert "| A | 0.7500 | 1.0 | 0.5300 | 3.0 | – | – | – | – |" in text
    assert "| B | – | – | 0.4000 | 2.0 | 0.8000 | 4.0 | – | – |" in text
    readme.write_text("no markers")
    with pytest.raises(SystemExit):
        blocks.rewrite(readme, "first-screen", fs.body(lines))


def test_million_table_and_data_from_the_lines(tmp_path):
    """bench_million: the generated set (whole queries of 50-150 rows, disjoint test ids,
    grades 0-4) and the README table from a run's lines, the Nyström floor ``m b^2`` per γ
    (4 γ) at the run's measured GEMM rate."""
    bm = pytest.importorskip("bench_million")
    X, y, q = bm.make_million(3000, seed=0)
    _, counts = np.unique(q, return_counts=True)
    assert X.shape[1] == 136 and X.dtype == np.float32 and X.shape[0] >= 3000
    assert counts.min() >= 50 and counts.max() <= 150 and set(np.unique(y)) <= {0, 1, 2, 3, 4}
    assert np.all(np.diff(q) >= 0) and bm.make_million(500, seed=1, first_qid=10**7)[2].min() == 10**7
    lines = [dict(name="million_nystrom", shape=[10**6, 136], basis="auto", basis_rows=600,
                  gemm_gflops=100.0, floor_flops=4 * 10**6 * 600**2, fit_s=500.0,
                  peak_rss_gb=2.0, ndcg10=0.6, holdout_s=36.0, machine="x86_64", cores=2),
             dict(name="million_linear", shape=[10**6, 136], fit_s=30.0, peak_rss_gb=2.5,
                  ndcg10=0.5),
             dict(name="million_stage", stage="pass 1", s=1.0, floor_s=1.0)]
    blocks = pytest.importorskip("lib.blocks")
    start, end = blocks.marks("million")
    readme = tmp_path / "README.md"
    readme.write_text(f"top\n{start}\nOLD TABLE\n{end}\nbottom\n")
    blocks.rewrite(readme, "million", bm.table(lines))
    text = readme.read_text()
    assert "OLD TABLE" not in text and text.endswith(f"{end}\nbottom\n")
    # floor 4 m b^2 / 1e11 = 14.4 s; one γ's hold-out 36 s against m b^2 / 1e11 = 3.6 s
    assert ("basis='auto'): 600 basis rows | 1,000,000 | 500.0 | 14.4 | 100.0 | 2.00 | 0.6000 |"
            in text)
    assert "| rankjax RankRLSCV(), linear | 1,000,000 | 30.0 | – | – | 2.50 | 0.5000 |" in text
    assert "36.0 s, 10.0x its $m b^2$ floor (3.6 s)" in text and "x86_64, 2 CPU cores" in text


def test_accelerator_check_dry_run_prints_the_plan_and_passes_on_the_cpu():
    """``benchmarks/accelerator_check.py --dry-run``: every step's command and budget (the
    10^6-row line among them), the device line, the precision verdicts (emulated
    on the CPU), rc 0, in under 2 minutes."""
    import subprocess
    import time
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, str(BENCH / "accelerator_check.py"), "--dry-run"],
                         capture_output=True, text=True, timeout=300)
    wall = time.perf_counter() - t0
    assert out.returncode == 0, out.stderr[-2000:] + out.stdout[-2000:]
    lines = [json.loads(s) for s in out.stdout.splitlines()]
    plans = {d["step"]: d for d in lines if "plan" in d}
    import accelerator_check
    assert set(plans) == {s[0] for s in accelerator_check.STEPS}
    assert "bench_million.py --full --only nystrom,falkon" in plans["million"]["plan"]
    assert sum(s[2] for s in accelerator_check.STEPS) <= 600            # 10 minutes on a device
    device = [d for d in lines if d.get("step") == "device" and "platform" in d]
    assert device and device[0]["platform"] == "cpu"
    verdicts = [d for d in lines if d.get("step") == "precision" and "verdict" in d]
    assert {d["emulation"] for d in verdicts} >= {"tf32", "bf16"}          # a CPU: emulated only
    assert all(d["verdict"] == "passed" for d in verdicts) and len(verdicts) >= 10
    assert lines[-1] == {"step": "total", "ok": True, "wall_s": lines[-1]["wall_s"], "dry_run": True}
    assert wall < 120
    assert not [d for d in lines if d.get("step") in ("million", "twins") and "plan" not in d]
