"""The mutation check: deliberate mistakes in the library's own source, each of which the
suite must catch.

Each :class:`Mutation` is one textual change of one file of ``rankjax/`` (the text it
replaces must occur exactly once, so a refactoring that moves the code breaks the check
loudly instead of leaving it silently unmutated) and the tests that must fail on it. The
runner copies ``rankjax/`` to a scratch folder, applies one mutation at a time and runs
only that mutation's tests in a fresh process that imports the scratch copy (``-x``: the
first failure is enough; pytest puts the repository's root, where the top ``conftest.py``
lives, first on ``sys.path``: that conftest puts ``RANKJAX_MUTATION_ROOT`` before it and
refuses to run when another ``rankjax`` is imported). A mutation is

* **caught** when pytest exits with status 1 and a named test failed on an assertion
  (``AssertionError``, ``pytest.fail``, a ``pytest.raises`` that saw nothing: read from
  pytest's JUnit XML report), not on a crash (a ``TypeError`` from broken code is an error);
* **survived** when the tests pass: the tests do not protect that code;
* an **error** for anything else: a named test file or test that does not exist (status 4),
  a mutation that no longer applies, an import that breaks (status 2), a test that crashed.

The unmutated copy must pass every named test first (else everything would look caught).
``tests/test_mutations.py`` runs the whole list in the default suite; by hand::

    python tests/mutations.py                 # every mutation, one line each
    python tests/mutations.py lpo_correction  # some of them, by name

What it proves: for each listed mistake, the named tests fail. What it does not: that
mistakes not in the list are caught (the list grows with the bugs found). Left out: the
primal solves' own Cholesky factor below the shared ``eigh``'s floor skipped; no problem
small enough for the default run was found where the shared ``eigh`` is worse than 1e-2
there (it matters on ``lambdarank_sample``: ``tests/test_float32_real.py``, slow).
"""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
from typing import NamedTuple

TESTS = pathlib.Path(__file__).resolve().parent
PACKAGE = TESTS.parent / "rankjax"


class Mutation(NamedTuple):
    """``old`` replaced by ``new`` in ``rankjax/<file>``; ``tests``: pytest node ids
    (relative to ``tests/``) of which at least one must fail."""

    name: str
    file: str
    old: str
    new: str
    tests: tuple


def _scaled(name, file, verb, var, test_ids):
    """λ (or the grid) scaled by 1.02 on entry to one solver method."""
    arg = ("lam" if verb == "fit" else ("lams" if verb == "path" else "lams, folds")) + ", state"
    old = f"    def {verb}(self, problem, {arg}):\n"
    return Mutation(name, file, old, old + f"        {var} = {var} * 1.02\n",
                    tuple(f"test_solvers.py::test_verb_equals_its_numpy_reference[{t}]"
                          for t in test_ids))


REAL = ("test_memory_plans.py::test_every_planned_route_refuses_at_real_size_before_allocating"
        "[{}]")

SOLVER_VERBS = [
    ("primal", "solvers/primal.py", ["primal"]),
    ("dual", "solvers/dual.py", ["dual_gaussian", "dual_linear"]),
    ("nystrom", "solvers/nystrom.py", ["nystrom"]),
]

MUTATIONS = [
    *[_scaled(f"lam_1.02_{solver}_{verb}", file, verb, "lam" if verb == "fit" else "lams",
              [f"{e}-{verb}" for e in entries])
      for solver, file, entries in SOLVER_VERBS for verb in ("fit", "path", "holdout")],
    _scaled("lam_1.02_cg_fit", "solvers/cg.py", "fit", "lam", ["cg-fit", "cg_dual-fit"]),
    _scaled("lam_1.02_falkon_fit", "solvers/falkon.py", "fit", "lam", ["falkon-fit"]),
    Mutation("weighted_map_not_crossfitted", "selection/candidates.py",
             'return self.valid is None and (kind == "weighted" or len(self.c.categorical) > 0)',
             "return False",
             ("test_candidates.py::test_permuted_labels_hold_out_at_chance",)),
    Mutation("crossfit_own_part", "selection/candidates.py",
             "        mine = part == k\n",
             "        mine = part != k\n",
             ("test_candidates.py::test_the_crossfitted_holdout_equals_retraining_on_the_other_parts_map",)),
    Mutation("query_centring_dropped", "graphs/graph.py",
             "        return (row_sums(v, self.seg, self.num_segments) / expand(n, v))[self.seg]\n",
             "        return 0 * v\n",
             ("test_graph.py",)),
    Mutation("segment_ids_shifted", "_core/segments.py",
             "    return jax.ops.segment_sum(v, seg, num_segments=num_segments)\n",
             "    return jax.ops.segment_sum(v, seg + 1, num_segments=num_segments)\n",
             ("test_segments.py",)),
    Mutation("cholesky_solve_transpose", "_core/lapack.py",
             "return solve_triangular(L, solve_triangular(L, B), trans=True)",
             "return solve_triangular(L, solve_triangular(L, B))",
             ("test_ridge.py", "test_lapack.py")),
    Mutation("ridge_eigh_transpose", "solvers/ridge.py",
             'jnp.einsum("pq,lq...->lp...", eig.vectors, Dc, precision=HI)',
             'jnp.einsum("qp,lq...->lp...", eig.vectors, Dc, precision=HI)',
             ("test_ridge.py",)),
    Mutation("atomic_write_in_place", "_core/atomic.py",
             '    or older than :data:`STALE_S`) are removed by the next write of ``path``."""\n',
             '    or older than :data:`STALE_S`) are removed by the next write of ``path``."""\n'
             '    with open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as fh:\n'
             '        yield fh\n'
             '    return\n',
             ("test_io.py::test_a_write_cut_halfway_leaves_the_old_file_and_no_temporary",)),
    Mutation("stale_temporary_files_kept", "_core/atomic.py",
             "    _remove_stale(folder, name)\n", "",
             ("test_reliability.py::test_a_killed_save_leaves_nothing_behind_after_the_next",)),
    Mutation("model_file_imports_its_module", "io/models.py",
             "obj = given[0] if given else sys.modules.get(module)",
             "obj = given[0] if given else __import__('importlib').import_module(module)",
             ("test_reliability.py::test_a_file_naming_a_module_is_refused_without_importing_it",)),
    Mutation("blend_weights_swapped", "selection/candidates.py",
             "xp.asarray(w, dt)[:, None] * a + xp.asarray(1 - w, dt)[:, None] * b",
             "xp.asarray(1 - w, dt)[:, None] * a + xp.asarray(w, dt)[:, None] * b",
             ("test_candidates.py::test_the_blend_is_held_out_by_blending_the_candidates_held_out_predictions",)),
    Mutation("model_fields_unchecked", "io/models.py", "        check_saved(obj)\n", "",
             ("test_reliability.py::test_a_damaged_array_is_refused_at_load_naming_file_and_field",)),
    Mutation("program_entry_key_unchecked", "runtime/entries.py",
             "return (contents, skeleton) if got == key else None", "return (contents, skeleton)",
             ("test_reliability.py::test_bad_program_store_entries_are_ignored_and_replaced",)),
    *[Mutation(f"float32_{kind}_floor_skipped", "solvers/floors.py", f'"{kind}": {value}',
               f'"{kind}": 0.0', ("test_float32_shortcuts.py",))
      for kind, value in (("pairs", "200.0"),)],
    Mutation("float32_holdout_floor_skipped", "solvers/floors.py", "HOLDOUT_SQRT_EPS = 3.5\n",
             "HOLDOUT_SQRT_EPS = 0.0\n", ("test_float32_shortcuts.py",)),
    Mutation("refinement_skipped", "solvers/floors.py", "    if not refines(dtype) or steps == 0:\n",
             "    if True:\n", ("test_floors.py",)),
    Mutation("dual_rounding_probe_skipped", "solvers/dual.py",
             "    return spread(eig.values, dc) <= ROUNDING_RTOL ** 2 * spread(eig.values, coords)\n",
             "    return jnp.ones(lams.shape, bool)\n", ("test_float32_shortcuts.py",)),
    # float32 refines its path: its floor is "refined" (float64's "path" has no float32 test)
    Mutation("float32_path_floor_skipped", "solvers/floors.py", '"refined": 100.0',
             '"refined": 0.0', ("test_float32_shortcuts.py",)),
    Mutation("sharded_psum_local", "solvers/sharded.py",
             "    return lax.psum(G, axis), lax.psum(b, axis)\n",
             "    return G, b\n",
             ("test_distributed.py::test_two_simulated_devices_equal_one",)),
    Mutation("lpo_correction_dropped", "solvers/lpo.py",
             "jnp.stack([la - (u0 * z0 + u1 * z1 + u2 * z2), "
             "lb - (v0 * z0 + v1 * z1 + v2 * z2)], 1)",
             "jnp.stack([la, lb], 1)",
             tuple(f"test_solvers.py::test_verb_equals_its_numpy_reference[{e}-leave_pair_out]"
                   for e in ("primal", "dual_gaussian"))),
    Mutation("ndcg_discount_off_by_one", "metrics/graded.py",
             "1 / jnp.log2(rank.astype(f.dtype) + 2)", "1 / jnp.log2(rank.astype(f.dtype) + 3)",
             ("test_metrics.py",)),
    Mutation("blocked_root_dropped", "solvers/nystrom_blocked.py",
             "        Z = batch_rows(graph, idx, mask, Phi).reshape(-1, bp)\n",
             "        Z = Phi.reshape(-1, bp)\n",
             ("test_blocked.py::test_blocked_holdout_equals_the_whole_one",)),
    Mutation("falkon_batch_root_dropped", "solvers/falkon.py",
             "return acc + tdot(K, batch_mv(graph, idx, mask, v).reshape(-1))",
             "return acc + tdot(K, v.reshape(-1))",
             ("test_falkon.py::test_falkon_row_blocks_vmap_and_early_stopping",)),
    Mutation("fold_root_mean_dropped", "graphs/fold_blocks.py",
             "        return expand(scale, V) * (V - mean) * mf\n",
             "        return expand(scale, V) * V * mf\n",
             ("test_graph.py::test_fold_blocks_equal_the_dense_laplacian",)),
    Mutation("woodbury_filter_dropped", "solvers/holdout.py",
             "    Dz = D.reshape(D.shape + (1,) * (z.ndim - 2)) * jnp.einsum(",
             "    Dz = 1 + 0 * D.reshape(D.shape + (1,) * (z.ndim - 2)) * jnp.einsum(",
             ("test_solvers.py::test_verb_equals_its_numpy_reference[primal-holdout]",
              "test_solvers.py::test_verb_equals_its_numpy_reference[nystrom-holdout]")),
    Mutation("blocked_second_pass_unwhitened", "solvers/nystrom_blocked.py",
             "    Mv = wide_coef(C, live[:, None] * eig.vectors)",
             "    Mv = live[:, None] * eig.vectors",
             ("test_blocked.py::test_blocked_holdout_equals_the_whole_one",)),
    Mutation("features_floor_dropped", "solvers/ridge.py",
             "    return EIGH_RTOL * jnp.finfo(G.dtype).eps * jnp.linalg.norm(G)\n",
             "    return 0 * EIGH_RTOL * jnp.finfo(G.dtype).eps * jnp.linalg.norm(G)\n",
             ("test_blocked.py::test_blocked_equals_whole_below_the_float32_eigh_floor",
              "test_float32_ordering.py::test_float32_kernel_solvers_are_right_on_the_ordering_or_refused")),
    Mutation("nystrom_rows_not_shifted", "kernels/kernel.py",
             "    return shifted(kernel) if graph.annihilates_constants else kernel\n",
             "    return kernel\n",
             ("test_float32_ordering.py::test_float32_kernel_solvers_are_right_on_the_ordering_or_refused",)),
    Mutation("fold_constant_dropped", "solvers/holdout.py",
             "        return fu + HBz + const[:, None] * mf.reshape((1, -1) + (1,) * (z.ndim - 2))\n",
             "        return fu + HBz\n",
             ("test_solvers.py::test_verb_equals_its_numpy_reference[nystrom-holdout]",
              "test_blocked.py::test_blocked_holdout_equals_the_whole_one")),
    Mutation("falkon_preconditioner_weakened", "solvers/falkon.py",
             "    GU = gram_U(C)\n", "    GU = 0 * gram_U(C)\n",
             ("test_falkon.py::test_falkon_iterations_are_bounded_by_its_preconditioner",)),
    Mutation("subsample_lambda_not_rescaled", "selection/select.py",
             "    ladder = point.lam * factor * EVERY_ROW_LADDER\n",
             "    ladder = point.lam * EVERY_ROW_LADDER\n",
             ("test_blocked.py::test_ard_beyond_the_plan_learns_on_a_subsample_then_holds_out_"
              "every_row",)),
    Mutation("blocked_plan_batch_term_dropped", "solvers/nystrom_plan.py",
             "    need = (m * n + 3 * L * m * tail + 8 * batch * bp + batch * fold_rows",
             "    need = (m * n + 3 * L * m * tail + batch * fold_rows",
             ("test_blocked.py::test_the_plan_covers_the_compiled_programs",)),
    Mutation("sharded_nystrom_psum_local", "solvers/nystrom_blocked.py",
             "            return lax.psum(G, axis), lax.psum(r, axis), lax.pmax(t, axis)\n",
             "            return G, r, t\n",
             ("test_distributed.py::test_sharded_nystrom_holdout_returns_on_two_simulated_"
              "devices",)),
    Mutation("early_stopping_last_iterate", "solvers/cg_loop.py",
             "return CGResult(nan_unless(ok, bx), i, reason == _CODE[\"successful\"], reason, bi,",
             "return CGResult(nan_unless(ok, x), i, reason == _CODE[\"successful\"], reason, i,",
             ("test_cg.py::test_early_stopping_returns_the_rerun_iterate",)),
    Mutation("whole_holdout_fold_work_unplanned", "solvers/nystrom_plan.py",
             "        fold = whole_fold_entries(int(padded_size(fold_rows)), bp, L) if folds else 0",
             "        fold = 0",
             ("test_memory_plans.py::test_the_whole_holdout_plan_covers_folds_larger_than_the_basis",
              REAL.format("nystrom_two_huge_queries"))),
    Mutation("kernel_plan_linear_in_m", "_core/memory.py",
             "    check_memory(count * m * m * size,", "    check_memory(count * m * size,",
             (REAL.format("dual_fit"),)),
    Mutation("primal_plan_linear_in_n", "_core/checks.py",
             "    check_memory(3 * n * n * compute_dtype(X).itemsize,",
             "    check_memory(3 * n * compute_dtype(X).itemsize,", (REAL.format("primal_wide"),)),
    Mutation("falkon_plan_ignored", "solvers/falkon.py",
             "        check_memory((up * bp + 6 * bp * bp + 4 * m) * compute_dtype(problem.X)",
             "        check_memory(0 * (up * bp + 6 * bp * bp + 4 * m) * compute_dtype(problem.X)",
             (REAL.format("falkon"),)),
    Mutation("tune_nystrom_plan_ignored", "solvers/nystrom.py",
             "check_nystrom_memory(m, int(padded_size(b)), dtype, 10, \"tune with a Nyström",
             "check_nystrom_memory(m, int(padded_size(b)), dtype, 0, \"tune with a Nyström",
             (REAL.format("tune_nystrom"),)),
    Mutation("lapack_batched_on_the_cpu", "_core/lapack.py",
             "return batched_op if paths().batch_factorisations else looped_op",
             "return batched_op",
             ("test_lapack.py::test_no_compiled_program_batches_a_lapack_call_on_the_cpu",)),
    Mutation("selection_state_not_kept", "selection/grid.py",
             "        if solver not in self.states:\n", "        if True:\n",
             ("test_memory_plans.py::test_a_rankrlscv_fit_plans_once",
              "test_state.py::test_a_select_over_a_gamma_grid_calls_each_init_once")),
    Mutation("tune_state_not_read", "solvers/state.py",
             "    if state is not None and state.solver == solver and state.serves(method, L):\n",
             "    if False:\n",
             ("test_state.py::test_a_tune_calls_each_init_once",)),
    Mutation("refused_lane_gradient_hidden", "_core/traced.py",
             "    return lax.custom_linear_solve(lambda v: v, a, mask, mask_transpose)",
             "    return jnp.where(ok, a, jnp.nan)",
             ("test_float32.py::test_a_lane_below_the_float32_floor_never_hides_in_a_gradient"
              "[dual-holdout]",
              "test_under_jit.py::test_a_refused_lane_never_hides_in_a_gradient[primal-fit]")),
    Mutation("lams_rule_takes_negative", "_solution.py",
             "((lam >= 0) if allow_zero else (lam > 0))",
             "((lam >= -2) if allow_zero else (lam > -2))",
             tuple(f"test_under_jit.py::test_an_invalid_lambda_is_a_nan_lane_under_jit[{e}-fit]"
                   for e in ("primal", "dual_gaussian", "nystrom", "cg", "falkon", "auto"))),
]


def apply(m: Mutation, root: pathlib.Path) -> None:
    """Writes ``m`` into the copy of the package at ``root``; ``ValueError`` when its text
    does not occur exactly once."""
    path = root / "rankjax" / m.file
    text = (PACKAGE / m.file).read_text()
    if text.count(m.old) != 1:
        raise ValueError(f"{m.name}: the text to mutate occurs {text.count(m.old)} times in "
                         f"rankjax/{m.file} (expected once)")
    path.write_text(text.replace(m.old, m.new))


def restore(m: Mutation, root: pathlib.Path) -> None:
    shutil.copyfile(PACKAGE / m.file, root / "rankjax" / m.file)


ASSERTED = ("AssertionError", "assert ", "Failed:", "Failed ", "DID NOT RAISE")
"""How a failure reported by an assertion begins in pytest's JUnit XML (its ``message``)."""


def run_tests(root: pathlib.Path, tests, timeout: int = 900):
    """``(status, failures)`` of ``tests`` against the package copy at ``root``: pytest's exit
    status and the message of every failed test (from its JUnit XML report)."""
    import xml.etree.ElementTree as ET
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               RANKJAX_MUTATION_ROOT=str(root), RANKJAX_SLOW="1")   # the named tests, slow or not
    report = root / "report.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:randomly",
                        "-p", "no:cacheprovider", "-o", "addopts=", f"--junitxml={report}",
                        *tests], cwd=TESTS, env=env, capture_output=True, text=True,
                       timeout=timeout)
    failures = []
    if report.exists():
        failures = [f.get("message", "") for f in ET.parse(report).iter()
                    if f.tag in ("failure", "error")]
        report.unlink()
    return r.returncode, failures


def outcome(result) -> str:
    status, failures = result
    if status == 0:
        return "survived"
    if status == 1 and failures and all(f.startswith(ASSERTED) for f in failures):
        return "caught"
    why = "; ".join(f[:120] for f in failures) or "no failure reported"
    return f"error (pytest exit status {status}: {why})"


def scratch_copy(folder) -> pathlib.Path:
    """A copy of ``rankjax/`` under ``folder`` (no byte-code), and a check that a process
    started as :func:`run_tests` starts it imports that copy."""
    root = pathlib.Path(folder)
    shutil.copytree(PACKAGE, root / "rankjax", ignore=shutil.ignore_patterns("__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(root))
    got = subprocess.run([sys.executable, "-c", "import rankjax; print(rankjax.__file__)"],
                         cwd=TESTS, env=env, capture_output=True, text=True, check=True)
    if not got.stdout.strip().startswith(str(root)):
        raise RuntimeError(f"the scratch copy is not what a test process imports: {got.stdout}")
    return root


def check(names=None, report=print) -> dict:
    """``{name: outcome}`` of the mutations (all, or those named), after the baseline."""
    chosen = [m for m in MUTATIONS if names is None or m.name in names]
    with tempfile.TemporaryDirectory(prefix="rankjax-mutations-") as folder:
        root = scratch_copy(folder)
        base, failures = run_tests(root, sorted({t for m in chosen for t in m.tests}))
        if base != 0:
            raise RuntimeError(f"the unmutated copy fails the named tests (pytest status {base}: "
                               f"{failures})")
        out = {}
        for m in chosen:
            try:
                apply(m, root)
            except ValueError as e:
                out[m.name] = f"error ({e})"
                report(f"{m.name}: {out[m.name]}")
                continue
            try:
                out[m.name] = outcome(run_tests(root, m.tests))
            finally:
                restore(m, root)
            report(f"{m.name}: {out[m.name]}")
    return out


if __name__ == "__main__":
    result = check(set(sys.argv[1:]) or None)
    bad = {k: v for k, v in result.items() if v != "caught"}
    print(f"{len(result) - len(bad)} of {len(result)} mutations caught" +
          (f"; not caught: {sorted(bad)}" if bad else ""))
    sys.exit(1 if bad else 0)
