import numpy as np
import pytest

SHARED_DATA = __import__("pathlib").Path(__file__).resolve().parents[1].parent / "shared" / "data"
LAMBDARANK = SHARED_DATA / "lambdarank_sample"


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def random_qids(rng, m, num_queries=6, singletons=2):
    """Unsorted, non-contiguous query ids with some size-1 queries."""
    ids = rng.choice(np.arange(100, 100 + 7 * num_queries, 7), m)
    ids[:singletons] = 1000 + np.arange(singletons)          # queries of size 1
    return rng.permutation(ids)


SLOW = bool(__import__("os").environ.get("RANKJAX_SLOW"))

SLOW_TESTS = (
    "test_lists.py::test_every_verb_on_lists_equals_the_kept_rows[dual]",
    "test_lists.py::test_every_verb_on_lists_equals_the_kept_rows[nystrom]",
    "test_lists.py::test_tune_on_lists_equals_tune_on_the_kept_rows",
    "test_metric_lists.py::test_lists_equal_the_kept_rows_with_query_ids[1]",
    "test_survival_estimator.py::test_the_survival_page_runs",
    "test_reliability.py::test_bad_program_store_entries_are_ignored_and_replaced",
    "test_guarantees.py::test_cg_early_stopping_with_a_criterion_undefined_at_the_start",
    "test_select.py::test_scores_equal_retraining_without_each_query[kernel1]",
    "test_cv.py::test_fold_buckets_merged_or_not_equal_retraining[dual-0.0-eager]",
    "test_feature_maps.py::test_the_eval_set_is_scored_through_the_training_map",
    "test_example_solver.py::test_a_fresh_process_finds_the_solver_in_the_module_it_imported",
    "test_ranksvm.py::test_sparse_equals_dense_and_float32_runs",
    "test_lapack.py::test_derivatives_equal_jax_under_every_transformation",
    r"test_lapack.py::test_no_compiled_program_batches_a_lapack_call_on_the_cpu[grad of the "
    r"nystrom hold-out by \u03b3, over \u03b3]",
    "test_float32.py::test_a_lane_below_the_float32_floor_never_hides_in_a_gradient[falkon-fit]",
    "test_feature_maps.py::test_distorted_rows_with_nan_and_categories_score_alike_everywhere",
    "test_feature_maps.py::test_the_kernel_default_does_not_see_a_monotone_map_of_a_column[cube]",
    "test_under_jit.py::test_an_invalid_lambda_is_a_nan_lane_under_jit[falkon-fit]",
    "test_metric_lists.py::test_the_coming_from_rax_page_runs_and_its_rax_loss_has_the_finite_difference_gradient",
    "test_survival_estimator.py::test_cv_scores_equal_each_fold_retrained_by_hand_and_the_best_is_refitted",
    "test_mutations.py::test_every_mutation_is_caught",
    "test_distributed.py::test_two_simulated_devices_equal_one",
    "test_distributed.py::test_sharded_nystrom_holdout_returns_on_two_simulated_devices",
    "test_readme.py::test_bash_blocks_run_as_written",
    "test_programs.py::test_an_error_while_a_program_compiles_ahead_exits_with_status_1",
    "test_cli.py::test_the_default_learner_is_the_readmes_and_every_kernel_option_is_reached",
    "test_cli.py::test_new_flags",
    "test_cli.py::test_default_run_writes_no_file",
    "test_cli.py::test_lambdarank_ndcg10_reaches_072",
    "test_estimators.py::test_scikit_learn_check_estimator_with_defaults[RankSVM]",
    "test_estimators.py::test_scikit_learn_check_estimator_with_defaults[KPCRank]",
    "test_estimators.py::test_scikit_learn_check_estimator_with_defaults[RankBoost]",
    "test_eager.py::test_eager_grad_returns_on_two_threads",
    "test_cache.py::test_the_command_line_uses_it",
    "test_cache.py::test_a_later_process_reads_the_traced_programs_back",
    "test_progress.py::test_nystrom_holdout_lines_are_in_order_and_the_time_left_is_right",
    "test_core.py::test_predict_works_on_every_model_type",
    "test_blocked.py::test_ard_beyond_the_plan_learns_on_a_subsample_then_holds_out_every_row",
    "test_report.py::test_accelerator_check_dry_run_prints_the_plan_and_passes_on_the_cpu",
    "test_example_solver.py::test_a_fresh_process_finds_the_solver_by_its_module",
    "test_tune.py::test_a_float32_nystrom_hold_out_is_finite_wherever_the_grid_resolves_it",
    "test_gp.py::test_gp_fit_increases_the_marginal_likelihood",
    "test_estimators.py::test_gamma_mean_and_scale_are_data_scaled",
    "test_tune.py::test_tune_with_ard_returns_what_it_learned[dual]",
    "test_log.py::test_verbose_logs_while_the_call_runs[tune]",
    "test_cache.py::test_the_switch_turns_it_off",
    "test_exact_tune_route.py::test_beyond_it_a_subsample_learns_and_every_row_decides[False]",
    "test_tune.py::test_tune_drives_an_optimizer_with_a_line_search",
    "test_feature_maps.py::test_the_learned_point_is_kept_only_for_a_gain_beyond_chance[False]",
    "test_tune.py::test_tune_with_ard_returns_what_it_learned[nystrom]",
    "test_cv.py::test_cross_validate_and_permutation_test",
    "test_plot.py::test_plots_take_fitted_estimators_and_cv_results",
    "test_backend.py::test_tune_same_on_both_paths[linear-2]",
    "test_under_jit.py::test_traced_indices_and_segment_ids_out_of_range_give_nan",
    "test_rankrls.py::test_jit_vmap_over_lambda_and_float32",
    "test_cg.py::test_early_stopping_returns_the_rerun_iterate[1.0-pairwise_error]",
    "test_falkon.py::test_falkon_iterations_are_bounded_by_its_preconditioner",
    "test_estimators.py::test_grid_search_with_group_k_fold",
    "test_cache.py::test_a_cache_the_user_configured_is_left_alone",
    "test_docs.py::test_every_public_name_has_a_page_and_the_guide_pages_exist",
    "test_docs.py::test_no_ascii_formula_outside_code_blocks",
    "test_docs.py::test_mathematics_is_typeset_by_a_mathjax_the_site_serves",
    "test_readme.py::test_python_blocks_run_as_written",
    "test_estimators.py::test_scikit_learn_check_estimator_with_defaults[RankRLSCV]",
    "test_metrics.py::test_metrics_under_jit_vmap_and_float32",
    "test_io.py::test_every_model_type_round_trips",
    "test_exact_tune_route.py::test_beyond_it_a_subsample_learns_and_every_row_decides[True]",
    "test_falkon.py::test_falkon_row_blocks_vmap_and_early_stopping",
    "test_grad.py::test_grad_in_log_gamma_through_holdout_and_path_eagerly_and_under_jit[nystrom-padded-holdout]",
    "test_grad.py::test_grad_in_log_gamma_through_holdout_and_path_eagerly_and_under_jit[dual-holdout]",
    "test_grid_edges.py::test_gamma_extends_past_a_gamma_grid_edge_and_eval_set_extends_too",
    "test_exact_tune_route.py::test_within_the_budget_the_descent_runs_on_every_row",
    "test_cache.py::test_a_fit_keeps_its_programs_in_the_user_cache_folder",
    "test_estimators.py::test_scikit_learn_check_estimator_with_defaults[RankRLS]",
    "test_cli.py::test_model_files_are_the_estimators_both_ways",
    "test_feature_maps.py::test_the_learned_kernel_says_when_it_did_not_move",
    "test_feature_maps.py::test_the_learned_point_is_kept_only_for_a_gain_beyond_chance[True]",
    "test_select.py::test_optimize_with_ard_refines_by_the_gradient_in_the_library[None]",
    "test_cg.py::test_vmap_over_eight_lambdas_and_over_outputs",
    "test_grad.py::test_grad_in_log_gamma_through_holdout_and_path_eagerly_and_under_jit[nystrom-holdout]",
    "test_select.py::test_optimize_with_ard_refines_by_the_gradient_in_the_library[40]",
    "test_float32.py::test_estimators_in_float32",
    "test_metrics.py::test_global_pairwise_error_of_a_million_rows_is_linear_memory",
    "test_feature_maps.py::test_feature_importances_are_shares_of_every_estimator",
    "test_feature_maps.py::test_ard_whose_loss_is_never_finite_warns_and_keeps_the_grid_point",
    "test_cache.py::test_a_first_fit_compiles_its_hold_out_and_its_selection_alone['gaussian'-_dual_holdout-False]",
    "test_grad.py::test_grad_through_dual_cg_and_under_vmap",
    "test_cache.py::test_a_first_fit_compiles_its_hold_out_and_its_selection_alone['gaussian'-_dual_holdout-True]",
    "test_mutations.py::test_a_missing_test_file_or_a_stale_mutation_is_an_error",
    "test_estimators.py::test_ranksvm_eval_set_keeps_the_best_newton_iterate",
    "test_tune.py::test_a_callable_loss_works_under_jit_and_grad",
    "test_io.py::test_every_model_type_exports_with_a_symbolic_batch",
    "test_tune.py::test_estimator_optimize_refines_the_grid_choice",
    "test_cg.py::test_early_stopping_returns_the_rerun_iterate[0.0-pairwise_error]",
    "test_core.py::test_metric_wrappers_choose_like_the_metric[pairwise_error-]",
    "test_plot.py::test_plots_show_the_data_and_the_choice",
    "test_cv.py::test_lambdarank_lqo_choice_is_near_the_best_in_hindsight",
    "test_cache.py::test_a_first_fit_compiles_its_hold_out_and_its_selection_alone[None-_primal_holdout-False]",
    "test_options.py::test_tune_takes_an_optax_optimizer",
    "test_estimators.py::test_every_input_type_gives_the_same_model[<lambda>6]",
    "test_tune.py::test_tune_with_ard_returns_what_it_learned[primal]",
    "test_cg.py::test_early_stopping_dual_and_edges",
    "test_backend.py::test_tune_same_on_both_paths[gaussian-None]",
    "test_gp.py::test_ep_converges_and_is_calibrated_on_data_from_the_model",
    # issue 88's stop: the suite ran 17-18 min with them on this machine
    "test_candidates.py::test_permuted_labels_hold_out_at_chance",
    "test_candidates.py::test_optimize_refines_the_kernel_and_the_linear_model_fits_on_many_rows",
    "test_state.py::test_a_tune_calls_each_init_once",
    "test_state.py::test_a_select_over_a_gamma_grid_calls_each_init_once",
)
"""The longest checks of the default run (``--durations`` on the 2-core machine, issue 78),
marked ``slow`` here as the decorated ones are: the slow job runs them (the README names it,
``RANKJAX_SLOW=1 .venv/bin/python -m pytest -m slow``), so the default run keeps within its
15 minutes and nothing is dropped."""


def pytest_collection_modifyitems(config, items):
    """Tests marked ``slow`` (minutes each on a 2-core CPU, or in :data:`SLOW_TESTS`) run
    with ``RANKJAX_SLOW=1``; the default run stays within the suite's time budget."""
    for item in items:
        if item.nodeid.split("tests/", 1)[-1] in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
    if SLOW:
        return
    skip = pytest.mark.skip(reason="slow: run with RANKJAX_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def surface(tmp_path_factory):
    """The small problem of the bad-input tables (``tests/surface.py``)."""
    from surface import make_problem
    return make_problem(tmp_path_factory.mktemp("surface"))


def tune_solver(kind="linear", basis=None, gamma=1.0):
    """The solver of ``rj.tune`` / ``rj.cv_loss`` for a model kind (``cv_loss`` takes γ from
    its ``params``; ``tune`` starts from ``gamma``)."""
    import rankjax as rj
    kernel = {"linear": None, "gaussian": rj.gaussian_kernel(gamma),
              "polynomial": rj.polynomial_kernel(2, gamma)}[kind]
    if basis is not None:
        return rj.Nystrom(rj.linear_kernel() if kernel is None else kernel, basis)
    return rj.Primal() if kernel is None else rj.Dual(kernel)


def run_page(name):
    """The namespace after running every ```python block of ``docs/{name}`` in order."""
    import pathlib
    import re
    page = (pathlib.Path(__file__).parent.parent / "docs" / name).read_text(encoding="utf-8")
    namespace = {}
    for i, code in enumerate(re.findall(r"```python\n(.*?)```", page, re.S)):
        exec(compile(code, f"docs/{name} block {i}", "exec"), namespace)
    return namespace
