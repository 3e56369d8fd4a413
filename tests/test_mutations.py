"""The mutation check (``tests/mutations.py``) in the default run: every listed mistake in the
library's source is caught by the tests it names, and the check itself fails when a named
test file is missing or a mutation no longer applies."""
import pathlib

import pytest

import mutations


def test_every_mutation_is_caught():
    result = mutations.check()
    survived = {k: v for k, v in result.items() if v != "caught"}
    assert not survived, survived
    assert len(result) == len(mutations.MUTATIONS) >= 23


def test_the_list_names_the_mutations_the_issue_asks_for():
    names = {m.name for m in mutations.MUTATIONS}
    for solver in ("primal", "dual", "nystrom"):
        assert {f"lam_1.02_{solver}_{v}" for v in ("fit", "path", "holdout")} <= names
    assert {"lam_1.02_cg_fit", "lam_1.02_falkon_fit", "query_centring_dropped",
            "segment_ids_shifted", "cholesky_solve_transpose", "atomic_write_in_place",
            "sharded_psum_local", "lpo_correction_dropped", "ndcg_discount_off_by_one",
            "early_stopping_last_iterate", "float32_path_floor_skipped",
            "float32_holdout_floor_skipped", "float32_pairs_floor_skipped"} <= names
    assert len(names) == len(mutations.MUTATIONS)
    for m in mutations.MUTATIONS:       # every named test file exists, every text still applies
        for t in m.tests:
            assert (mutations.TESTS / t.split("::")[0]).exists(), (m.name, t)
        assert (mutations.PACKAGE / m.file).read_text().count(m.old) == 1, m.name


def test_a_missing_test_file_or_a_stale_mutation_is_an_error(tmp_path):
    root = mutations.scratch_copy(tmp_path)
    assert mutations.outcome(mutations.run_tests(root, ["test_no_such_file.py"])).startswith("error")
    assert mutations.outcome((1, ["TypeError: broken code"])).startswith("error")
    assert mutations.outcome((1, ["AssertionError: 2 != 1"])) == "caught"
    stale = mutations.MUTATIONS[0]._replace(old="text that is nowhere in the file\n")
    with pytest.raises(ValueError, match="occurs 0 times"):
        mutations.apply(stale, root)
    assert pathlib.Path(root / "rankjax" / "__init__.py").exists()
