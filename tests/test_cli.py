import json

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
    from rankjax._synthetic import make_ranking_data
    d = make_ranking_data(3, seed=9)
    io.write_svmlight(tmp_path / "new.txt", d.X, d.y, d.qid)
    out = tmp_path / "scores.txt"
    assert cli.main(["--load", str(model), "--predict", str(tmp_path / "new.txt"),
                     "--output", str(out)]) == 0
    scores = np.loadtxt(out)
    w, _ = io.load_model(model)
    np.testing.assert_allclose(scores, d.X @ w, rtol=1e-6)


@pytest.mark.skipif(not (LAMBDARANK / "rank.train").exists(), reason="shared data absent")
def test_lambdarank_ndcg10_reaches_072(tmp_path, capsys):
    assert cli.main(["--train", str(LAMBDARANK / "rank.train"), "--test",
                     str(LAMBDARANK / "rank.test"), "--save", str(tmp_path / "m.npz"),
                     "--float64"]) == 0
    out = capsys.readouterr().out
    res = _last_json(out)
    print(out)
    assert res["ndcg@10"] >= 0.72


def test_cli_argument_errors(tmp_path):
    with pytest.raises(SystemExit):
        cli.main(["--train", "x.txt"])
    with pytest.raises(SystemExit):
        cli.main(["--lams", "0", "1"])
