import json
import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import LAMBDARANK
from rankjax import cli


def _last_json(out):
    return json.loads(out.strip().splitlines()[-1])


def test_main_job_on_builtin_data_then_predict(tmp_path, capsys):
    model = tmp_path / "m.npz"
    assert cli.main(["--save", str(model), "--lams", "0.1", "10", "1000"]) == 0
    res = _last_json(capsys.readouterr().out)
    assert res["ndcg@10"] > 0.8 and res["pairwise_accuracy"] > 0.8
    from rankjax import io
    from rankjax.io.synthetic import make_ranking_data
    d = make_ranking_data(3, seed=9)
    io.write_svmlight(tmp_path / "new.txt", d.X, d.y, d.qid)
    out = tmp_path / "scores.txt"
    assert cli.main(["--load", str(model), "--predict", str(tmp_path / "new.txt"),
                     "--output", str(out)]) == 0
    table = np.loadtxt(out)                       # qid, row, score
    from rankjax.estimators import load
    est = load(model)                          # the command line writes estimator files
    np.testing.assert_array_equal(table[:, 0], d.qid)
    np.testing.assert_array_equal(table[:, 1], np.arange(len(d.y)))
    np.testing.assert_allclose(table[:, 2], est.predict(d.X), rtol=1e-6)
    # a loaded model evaluated on a labelled file
    assert cli.main(["--load", str(model), "--test", str(tmp_path / "new.txt")]) == 0
    res = _last_json(capsys.readouterr().out)
    assert 0 <= res["ndcg@10"] <= 1 and "map" in res


@pytest.mark.skipif(not (LAMBDARANK / "rank.train").exists(), reason="shared data absent")
def test_lambdarank_ndcg10_reaches_072(tmp_path, capsys):
    assert cli.main(["--train", str(LAMBDARANK / "rank.train"), "--test",
                     str(LAMBDARANK / "rank.test"), "--save", str(tmp_path / "m.npz"),
                     "--float64"]) == 0
    out = capsys.readouterr().out
    res = _last_json(out)
    print(out)
    assert res["ndcg@10"] >= 0.72
    assert "rank.train: 3005 rows in" in out and "rows/s" in out       # read progress


def _console(*args, cwd=None):
    """The installed console script (``python -m rankjax`` if it is not on the path)."""
    script = os.path.join(os.path.dirname(sys.executable), "rankjax")
    cmd = [script] if os.path.exists(script) else [sys.executable, "-m", "rankjax"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, cwd=cwd,
                          timeout=300)


def _one_line_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("rankjax: error: "), r.stderr
    assert "Traceback" not in r.stderr + r.stdout
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from rankjax import io
    from rankjax.io.synthetic import make_ranking_data
    d = tmp_path_factory.mktemp("cli")
    tr, te = make_ranking_data(8, num_features=4, seed=1), make_ranking_data(4, num_features=6, seed=2)
    io.write_svmlight(d / "train.txt", tr.X, tr.y, tr.qid)
    io.write_svmlight(d / "wide.txt", te.X, te.y, te.qid)
    io.write_svmlight(d / "noqid.txt", tr.X, tr.y)
    (d / "bad.txt").write_text("1 qid:1 1:0.5\nnot-a-label qid:1 2:1\n")
    io.save_model(d / "m.npz", np.ones(4), lam=1.0)
    (d / "junk.npz").write_bytes(b"not a zip file")
    (d / "labels.txt").write_text("".join(f"{i % 3}\n" for i in range(20)))   # a .query-like file
    return d


ERRORS = [
    (["--train", "{d}/train.txt"], ["--train and --test"]),
    (["--lams", "0", "1"], ["--lams"]),
    (["--valid-fraction", "0"], ["--valid-fraction"]),
    (["--valid-fraction", "1.5"], ["--valid-fraction"]),
    (["--predict", "{d}/train.txt", "--output", "{d}/s.txt"], ["--load"]),
    (["--load", "{d}/m.npz"], ["--predict"]),
    (["--folds", "1"], ["--folds"]),
    (["--folds", "x"], ["--folds"]),
    (["--seed", "-1"], ["--seed"]),
    (["--learner", "svm"], ["--learner"]),
    (["--learner", "ranksvm", "--folds", "3"], ["--folds"]),
    (["--train", "{d}/train.txt", "--test", "{d}/train.txt", "--folds", "50"], ["exceeds"]),
    (["--json", "{d}/nodir/r.json"], ["--json", "does not exist"]),
    (["--train", "{d}/missing.txt", "--test", "{d}/train.txt"], ["missing.txt", "no such file"]),
    (["--train", "{d}/bad.txt", "--test", "{d}/train.txt"], ["line 2"]),
    (["--train", "{d}/train.txt", "--test", "{d}/wide.txt"], ["num_features"]),
    (["--train", "{d}/noqid.txt", "--test", "{d}/train.txt"], ["one query"]),
    (["--train", "{d}/train.txt", "--test", "{d}/train.txt", "--save", "{d}/nodir/m.npz"],
     ["--save", "does not exist"]),
    (["--load", "{d}/m.npz", "--predict", "{d}/train.txt", "--output", "{d}"], ["directory"]),
    (["--load", "{d}/junk.npz", "--predict", "{d}/train.txt"], ["not a rankjax model"]),
    (["--load", "{d}/train.txt", "--predict", "{d}/train.txt"], ["not a rankjax model"]),
    (["--load", "{d}/m.npz", "--predict", "{d}/labels.txt"], ["no row has a nonzero feature"]),
    (["--learner", "ranksvm", "--lams", "0.5", "2"], ["--lams", "ranksvm"]),
    (["--learner", "rankrls", "--C", "2"], ["--C"]),
    (["--learner", "ranksvm", "--rounds", "5"], ["--rounds"]),
    (["--learner", "rankboost", "--graph", "unnormalized"], ["--graph"]),
    (["--learner", "rls", "--graph", "normalized"], ["--graph"]),
    (["--learner", "ranksvm", "--C", "-1"], ["--C"]),
    (["--load", "{d}/m.npz", "--predict", "{d}/train.txt", "--lams", "1"], ["--lams", "--load"]),
    (["--load", "{d}/m.npz", "--predict", "{d}/train.txt", "--normalize"], ["--normalize"]),
    (["--save", "{d}/same.npz", "--json", "{d}/same.npz"], ["--save", "--json", "same file"]),
    (["--load", "{d}/m.npz", "--predict", "{d}/train.txt", "--output", "{d}/train.txt"],
     ["--output", "--predict", "same file"]),
    (["--load", "{d}/m.npz", "--predict", "{d}/wide.txt"], ["num_features"]),
    (["--no-such-flag"], ["unrecognized"]),
]


def _in_process(args, cwd, monkeypatch, capsys):
    """``cli.main(args)`` in this process, as ``_console`` reports a run (its status, its
    output); a process of its own per case cost most of this file's time in imports."""
    monkeypatch.chdir(cwd)
    capsys.readouterr()
    try:
        code = cli.main([str(a) for a in args])
    except SystemExit as e:                     # argparse's own exit
        code = e.code
    out = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out.out, stderr=out.err)


@pytest.mark.parametrize("args,words", ERRORS)
def test_errors_are_one_line_with_status_2(files, args, words, monkeypatch, capsys):
    r = _in_process([a.format(d=files) for a in args], files, monkeypatch, capsys)
    _one_line_error(r, *words)
    assert not (files / "rankjax_model.npz").exists()
    assert not (files / "s.txt").exists()


@pytest.mark.parametrize("i", [0, 14, len(ERRORS) - 1])
def test_the_console_script_errors_in_one_line_with_status_2(files, i):
    """The installed script itself (a usage error, a data error, argparse's): one line,
    status 2, no traceback."""
    args, words = ERRORS[i]
    r = _console(*[a.format(d=files) for a in args], cwd=files)
    _one_line_error(r, *words)


def test_default_run_writes_no_file(tmp_path):
    r = _console("--lams", "1", "100", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []
    assert "model not saved" in r.stdout


def test_new_flags(tmp_path, capsys):
    from rankjax import __version__
    r = _console("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"rankjax {__version__}"
    out = tmp_path / "r.json"
    assert cli.main(["--quiet", "--folds", "3", "--lams", "0.01", "1", "100", "--json", str(out)]) == 0
    printed = capsys.readouterr()
    assert len(printed.out.strip().splitlines()) == 1          # quiet: only the JSON line
    assert json.loads(out.read_text()) == _last_json(printed.out)
    assert cli.main(["--learner", "rankrls", "--folds", "loo", "--lams", "1000", "10000",
                     "100000", "--extend", "0"]) == 0
    printed = capsys.readouterr()
    assert "leave-query-out" in printed.out and "edge of the grid" in printed.err
    assert cli.main(["--learner", "rankrls", "--folds", "loo", "--lams", "1000", "10000",
                     "100000"]) == 0                       # the grid extends past its edge
    printed = capsys.readouterr()
    assert "(past the grid)" in printed.out and "edge of the grid" not in printed.err
    assert _last_json(printed.out)["lam"] <= 1000 and "λ=100 " in printed.out
    for learner, flags in (("rls", []), ("ranksvm", ["--C", "0.5"]), ("cg", []),
                           ("rankboost", ["--rounds", "20"])):
        save = tmp_path / f"{learner}.npz"
        assert cli.main(["--quiet", "--learner", learner, "--save", str(save), *flags]) == 0
        res = _last_json(capsys.readouterr().out)
        assert res["learner"] == learner and res["ndcg@10"] > 0.6
        if flags:
            assert res[flags[0][2:]] == float(flags[1])
        from rankjax import io
        from rankjax.io.synthetic import make_ranking_data
        d = make_ranking_data(3, seed=9)
        io.write_svmlight(tmp_path / "new.txt", d.X, d.y, d.qid)
        assert cli.main(["--quiet", "--load", str(save), "--test", str(tmp_path / "new.txt")]) == 0
        assert 0 <= _last_json(capsys.readouterr().out)["ndcg@10"] <= 1


def test_model_files_are_the_estimators_both_ways(tmp_path, capsys):
    """What ``--save`` writes the estimators load, and ``--load`` reads any estimator's
    ``save``; ``--json`` is honoured by ``--predict``; the file mode follows the umask."""
    from rankjax import estimators, io
    from rankjax.io.synthetic import make_ranking_data
    d = make_ranking_data(30, num_features=5, seed=3)
    io.write_svmlight(tmp_path / "tr.txt", d.X, d.y, d.qid)
    saved = tmp_path / "cli.npz"
    assert cli.main(["--quiet", "--train", str(tmp_path / "tr.txt"), "--test",
                     str(tmp_path / "tr.txt"), "--save", str(saved), "--lams", "0.1", "10",
                     "--learner", "rankrls", "--extend", "0"]) == 0
    capsys.readouterr()
    assert oct(os.stat(saved).st_mode & 0o777) == oct(0o666 & ~_umask())
    est = estimators.load(saved)
    assert isinstance(est, estimators.RankRLS) and est.lam in (0.1, 10.0)
    other = estimators.RankRLSCV(kernel="gaussian", lams=(0.1, 1.0)).fit(d.X, d.y, qid=d.qid)
    other.save(tmp_path / "est.npz")
    out, js = tmp_path / "s.txt", tmp_path / "p.json"
    assert cli.main(["--load", str(tmp_path / "est.npz"), "--predict", str(tmp_path / "tr.txt"),
                     "--output", str(out), "--json", str(js)]) == 0
    np.testing.assert_allclose(np.loadtxt(out)[:, 2], other.predict(d.X), rtol=1e-6, atol=1e-7)
    summary = json.loads(js.read_text())
    assert summary["rows"] == len(d.y) and summary["output"] == str(out)


def _umask():
    m = os.umask(0o022)
    os.umask(m)
    return m


def test_help_is_plain_text():
    r = _console("--help")
    assert r.returncode == 0 and "``" not in r.stdout and "qid row score" in r.stdout


def test_predict_with_a_multi_output_model_writes_one_column_per_output(tmp_path):
    """Weights ``[n, k]`` (k outputs learned at once, saved with io.save_model) score k
    columns; the command line died formatting an array as one number."""
    import rankjax as rj
    from rankjax import io
    from rankjax.io.synthetic import make_ranking_data
    d = make_ranking_data(6, num_features=5, seed=3)
    W = np.asarray(rj.fit(rj.Problem(d.X, np.stack([d.y, -d.y], 1), rj.query_graph(d.qid)), rj.Primal(),
                          lam=1.0).value.weights)
    io.save_model(tmp_path / "m2.npz", W)
    io.write_svmlight(tmp_path / "new.txt", d.X, d.y, d.qid)
    out = tmp_path / "scores.txt"
    assert cli.main(["--load", str(tmp_path / "m2.npz"), "--predict", str(tmp_path / "new.txt"),
                     "--output", str(out)]) == 0
    table = np.loadtxt(out)                       # qid, row, score of each output
    assert table.shape == (len(d.y), 4)
    np.testing.assert_allclose(table[:, 2:], d.X @ W, rtol=1e-6, atol=1e-9)


def test_load_a_library_model_and_evaluate_a_multi_output_model(tmp_path, capsys):
    """A model saved by ``io.save_model`` (LinearModel, KernelModel) scores and evaluates
    like the command line's own; a multi-output model reports one value per output (the
    command line refused the library models and died on ``--test`` with k outputs)."""
    import rankjax as rj
    from rankjax import io
    from rankjax.io.synthetic import make_ranking_data
    d = make_ranking_data(6, num_features=5, seed=3)
    g = rj.query_graph(d.qid)
    two = rj.fit(rj.Problem(d.X, np.stack([d.y, -d.y], 1), g), rj.Primal(), lam=1.0).value
    io.save_model(tmp_path / "lin.npz", two)
    io.save_model(tmp_path / "ker.npz", rj.fit(rj.Problem(d.X, d.y, g), rj.Dual(rj.gaussian_kernel(0.1)),
                                               lam=1.0).value)
    io.write_svmlight(tmp_path / "new.txt", d.X, d.y, d.qid)
    assert cli.main(["--quiet", "--load", str(tmp_path / "lin.npz"), "--test",
                     str(tmp_path / "new.txt")]) == 0
    out = _last_json(capsys.readouterr().out)
    want = [float(rj.ndcg(d.X @ np.asarray(two.weights)[:, j], d.y, d.qid, k=10)) for j in (0, 1)]
    np.testing.assert_allclose(out["ndcg@10"], want, atol=1e-6)
    assert out["ndcg@10"][0] > out["ndcg@10"][1]          # the negated output ranks worse
    assert cli.main(["--load", str(tmp_path / "ker.npz"), "--predict", str(tmp_path / "new.txt"),
                     "--output", str(tmp_path / "s.txt")]) == 0
    assert np.loadtxt(tmp_path / "s.txt").shape == (len(d.y), 3)
    io.save_model(tmp_path / "path.npz", rj.path(rj.Problem(d.X, d.y, g), rj.Primal(), lams=[1.0, 2.0]).value)
    capsys.readouterr()
    assert cli.main(["--load", str(tmp_path / "path.npz"), "--predict",
                     str(tmp_path / "new.txt")]) == 2
    assert "PrimalPath" in capsys.readouterr().err


def test_the_default_learner_is_the_readmes_and_every_kernel_option_is_reached(tmp_path, capsys):
    """``python -m rankjax`` trains ``RankRLSCV(kernel="gaussian")`` (the README's first
    recommendation) by default; ``--basis``, ``--optimize`` and ``--ard`` reach the
    estimator's options, the saved file is that estimator, and LightGBM's ``train`` /
    ``predict`` task words work."""
    from rankjax import estimators, io
    from rankjax.io.synthetic import make_ranking_data
    d = make_ranking_data(30, num_features=5, seed=3)
    t = make_ranking_data(10, num_features=5, seed=4, first_qid=100)
    io.write_svmlight(tmp_path / "tr.txt", d.X, d.y, d.qid)
    io.write_svmlight(tmp_path / "te.txt", t.X, t.y, t.qid)
    files = ["--train", str(tmp_path / "tr.txt"), "--test", str(tmp_path / "te.txt")]
    saved = tmp_path / "k.npz"
    assert cli.main(["train", *files, "--save", str(saved), "--float64"]) == 0
    res = _last_json(capsys.readouterr().out)
    assert res["learner"] == "kernel" and res["gamma"] > 0 and res["basis"] is None
    est = estimators.load(saved)
    assert type(est) is estimators.RankRLSCV and est.kernel == "gaussian"
    want = estimators.RankRLSCV(kernel="gaussian").fit(d.X, d.y, qid=d.qid)
    np.testing.assert_allclose(est.predict(t.X), want.predict(t.X), rtol=1e-6, atol=1e-9)
    assert res["lam"] == want.lam_
    for flags, check in ((["--basis", "40"], lambda r: r["basis"] == 40),
                         (["--optimize", "--basis", "none"], lambda r: r["optimize"]),
                         (["--ard", "--basis", "40"], lambda r: r["ard"] and r["optimize"]),
                         (["--kernel", "polynomial", "--gamma", "0.5"],
                          lambda r: r["gamma"] == 0.5)):
        assert cli.main(["--quiet", *files, *flags]) == 0, flags
        r = _last_json(capsys.readouterr().out)
        assert check(r) and r["ndcg@10"] > 0.5, (flags, r)
    out = tmp_path / "s.txt"
    assert cli.main(["predict", "--load", str(saved), "--predict", str(tmp_path / "te.txt"),
                     "--output", str(out)]) == 0
    np.testing.assert_allclose(np.loadtxt(out)[:, 2], want.predict(t.X), rtol=1e-6, atol=1e-7)
    assert cli.main(["predict", "--predict", str(tmp_path / "te.txt")]) == 2
    assert cli.main(["--learner", "ranksvm", "--basis", "40", *files]) == 2
    assert cli.main(["--basis", "0", *files]) == 2
    assert "--basis" in capsys.readouterr().err
    r = _console("--help")
    assert "kernel (default" in " ".join(r.stdout.split())


def test_survival_files_train_evaluate_and_score_as_the_estimator(tmp_path, capsys):
    """--learner survival: the label is the time, negative when censored (XGBoost's
    survival:cox), qid: the strata; the test C, the saved model's --test and --predict equal
    SurvivalRankRLSCV and harrell_c called directly; misuse is one line, status 2."""
    import rankjax as rj
    from rankjax import io
    from rankjax.estimators import SurvivalRankRLSCV, load
    d = rj.make_survival_data(240, num_features=5, seed=3)
    strata = np.arange(240) % 2
    label = np.where(d.event, d.time, -d.time)
    tr, te = np.arange(240) < 180, np.arange(240) >= 180
    io.write_svmlight(tmp_path / "train.txt", d.X[tr], label[tr], strata[tr])
    io.write_svmlight(tmp_path / "test.txt", d.X[te], label[te], strata[te])
    model = tmp_path / "m.npz"
    args = ["--learner", "survival", "--train", str(tmp_path / "train.txt"), "--test",
            str(tmp_path / "test.txt"), "--lams", "0.01", "1", "100", "--folds", "3",
            "--save", str(model)]
    assert cli.main(args) == 0
    res = _last_json(capsys.readouterr().out)
    # the file's values went through SVMlight text: read them back as the job did
    Xtr, Xte = io.read_svmlight(tmp_path / "train.txt").X, io.read_svmlight(tmp_path / "test.txt").X
    want = SurvivalRankRLSCV(lams=(0.01, 1, 100), folds=3).fit(
        Xtr, time=d.time[tr], event=d.event[tr], strata=strata[tr])
    assert res["lam"] == want.lam_
    c = float(rj.harrell_c(want.predict(Xte), d.time[te], d.event[te], strata[te]))
    assert res["harrell_c"] == pytest.approx(c, abs=1e-6)
    assert cli.main(["--load", str(model), "--test", str(tmp_path / "test.txt")]) == 0
    assert _last_json(capsys.readouterr().out)["harrell_c"] == pytest.approx(c, abs=1e-6)
    out = tmp_path / "risk.txt"
    assert cli.main(["--load", str(model), "--predict", str(tmp_path / "test.txt"),
                     "--output", str(out)]) == 0
    np.testing.assert_allclose(np.loadtxt(out)[:, 2], load(model).predict(Xte), rtol=1e-6)
    capsys.readouterr()
    for bad, words in ((["--folds", "loo"], "k-fold over patients"),
                       (["--optimize"], "does not apply to --learner survival")):
        assert cli.main(["--learner", "survival", *bad]) == 2
        assert words in capsys.readouterr().err
    assert cli.main(["--train", str(tmp_path / "train.txt"), "--test",
                     str(tmp_path / "test.txt")]) == 2           # a ranking learner: grades
    assert "--learner survival" in capsys.readouterr().err
