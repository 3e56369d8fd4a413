"""The tables of ``bench_million.py``'s lines (the README's million block and the
row-block hold-out stage by stage), shared with ``report.py``."""


LEARNERS = {"million_linear": "rankjax RankRLSCV(), linear",
            "million_lightgbm": "LightGBM LGBMRanker(), defaults",
            "million_nystrom": "rankjax RankRLSCV(kernel=\"gaussian\", gammas=4, lams=13, "
                               "basis={basis!r}): {basis_rows:,} basis rows",
            "million_ard": "rankjax RankRLSCV(kernel=\"gaussian\", optimize=True, ard=True, "
                           "basis={basis!r}): learned on {subsample_rows:,} rows, "
                           "{basis_rows:,} basis rows",
            "million_falkon": "rankjax rj.fit(p, rj.Falkon(k, {basis}), lam={lam})"}


def _floor(ln):
    """The line's floor in seconds at its own GEMM rate, or '–'."""
    if "floor_flops" not in ln or not ln.get("gemm_gflops"):
        return "–"
    return f"{ln['floor_flops'] / (ln['gemm_gflops'] * 1e9):.1f}"


def table(lines):
    """The README block (markdown) of JSON lines of this script: every learner's row with the
    GEMM rate measured in its own process, the γ grid's one hold-out against its floor."""
    out = ["| learner | rows | fit s | floor s | GEMM GFLOP/s | peak RSS GB | test NDCG@10 |",
           "| --- | --- | --- | --- | --- | --- | --- |"]
    notes = []
    for ln in lines:
        if ln["name"] not in LEARNERS or "fit_s" not in ln:
            continue
        extra = (f" (closed form {ln['closed_form_s']:.0f} s, predictions within "
                 f"{ln['rel_diff']:.1e})") if "rel_diff" in ln else ""
        out.append(f"| {LEARNERS[ln['name']].format(**ln)}{extra} | {ln['shape'][0]:,} | "
                   f"{ln['fit_s']:.1f} | {_floor(ln)} | {ln.get('gemm_gflops', '–')} | "
                   f"{ln['peak_rss_gb']:.2f} | {ln['ndcg10']:.4f} |")
        if "holdout_s" in ln:
            floor = ln["shape"][0] * ln["basis_rows"] ** 2 / (ln["gemm_gflops"] * 1e9)
            notes.append(f"one γ's hold-out of 13 λ alone (warm): {ln['holdout_s']:.1f} s, "
                         f"{ln['holdout_s'] / floor:.1f}x its $m b^2$ floor ({floor:.1f} s)")
        if "best_score" in ln:
            notes.append(f"the learned model's hold-out NDCG@10 on every training row "
                         f"(`best_score_`) {ln['best_score']:.4f}")
    info = next((ln for ln in lines if "machine" in ln), {})
    note = (f"{info.get('machine', '?')}, {info.get('cores', '?')} CPU cores, jax "
            f"{info.get('jax', '?')}, float32; each learner in a fresh process, its float32 "
            "GEMM rate measured there (the floor: $m b^2$ flops per γ for the Nyström "
            "hold-out, one `2 m b n` product an iteration for FALKON)"
            + "".join(f"; {n}" for n in notes)
            + "; `python benchmarks/bench_million.py --lines benchmarks/lines/million.jsonl "
              "--readme README.md`")
    return "\n".join(out) + f"\n\n<sub>{note}.</sub>"


def stage_table(lines):
    """The stage table of a ``stages`` line: seconds, floor seconds and ratio per stage."""
    ln = next((x for x in lines if x.get("name") == "million_stages"), None)
    if ln is None:
        return "(no stage line)"
    rows = ["| stage | s | floor s | x floor |", "| --- | --- | --- | --- |"]
    for st in ln["stages"]:
        ratio = st["s"] / st["floor_s"] if st["floor_s"] else float("nan")
        rows.append(f"| {st['stage']} | {st['s']:.2f} | {st['floor_s']:.2f} | {ratio:.1f} |")
    rows.append(f"| the hold-out (13 λ) | {ln['total_s']:.2f} | {ln['floor_s']:.2f} (`m b^2`) | "
                f"{ln['total_s'] / ln['floor_s']:.1f} |")
    return (f"{ln['shape'][0]:,} rows x {ln['shape'][1]} features, {ln['basis_rows']:,} basis "
            f"rows, {ln['padded_rows']:,} rows padded into batches of whole queries, 13 λ, "
            f"float32, GEMM {ln['gemm_gflops']} GFLOP/s measured in the same process; each "
            "stage the difference of cumulative warm programs (median of 3), against its own "
            "flops at that rate (the triangular solve and the Gram counted at `m b^2` each, "
            "the fold systems at `L sum P^2 b`).\n\n" + "\n".join(rows))
