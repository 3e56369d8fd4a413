"""The house rules of the package layout (docs/design.md, "Layout"), read from the source:

* no underscore name is imported across modules (``from ._x import _name`` or
  ``_x._name``): what another module needs has a public-internal name;
* no module imports the package root (``import rankjax``, ``from . import name`` of
  a non-module): the arrows run one way, down the pipeline;
* kinds of ``X`` (dense, scipy, BCOO, BCSR, CSRMatrix) are told apart only in
  ``_core/sparse.py``, graph types only in ``graphs/graph.py``, model and result types only in
  the module that defines them (and plain weights only in ``io/models.py``);
* no module is over ``MAX_LINES`` lines.
"""
import ast
import pathlib

import pytest

import rankjax as rj

PKG = pathlib.Path(rj.__file__).parent
MAX_LINES = 500

X_KIND_NAMES = {"BCOO", "BCSR", "CSRMatrix", "spmatrix", "sparray", "csr_matrix", "coo_matrix"}
X_KIND_ATTRS = {"todense", "toarray", "tocsr", "tocoo", "nnz", "indices", "indptr"}
GRAPH_NAMES = {"QueryGraph", "PreferenceGraph", "IdentityGraph"}
GRAPH_ATTRS = {"shard_blocks", "head", "tail", "seg", "pair_counts", "incidence_mv", "block_root"}


def modules():
    return sorted(PKG.rglob("*.py"))


def rel(path):
    return str(path.relative_to(PKG))


def module_names():
    """Importable names inside the package: ``_cg``, ``io``, ``io.models`` ..."""
    out = set()
    for p in modules():
        parts = list(p.relative_to(PKG).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts:
            out.add(".".join(parts))
    return out


def model_types():
    """Public model and result types (``*Model``, ``*Path``, ``*Result``, ``PairwiseGP``)
    -> the file defining them."""
    out = {}
    for name in rj.__all__:
        obj = getattr(rj, name)
        if isinstance(obj, type) and (name.endswith(("Model", "Path", "Result")) or name == "PairwiseGP"):
            out[name] = obj.__module__.split(".", 1)[1].replace(".", "/") + ".py"
    return out


def names_in(node):
    return ({n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            | {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)})


def switches(tree):
    """``(lineno, kind, names)`` for every ``isinstance``/``hasattr``/``issparse`` call."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if fn == "isinstance" and len(node.args) == 2:
            yield node.lineno, "isinstance", names_in(node.args[1])
        elif fn == "hasattr" and len(node.args) == 2 and isinstance(node.args[1], ast.Constant):
            yield node.lineno, "hasattr", {node.args[1].value}
        elif fn == "issparse":
            yield node.lineno, "issparse", {"spmatrix"}


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_no_underscore_name_crosses_a_module(path):
    mods = module_names()
    tree = ast.parse(path.read_text())
    imported_modules = set()
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            for a in node.names:
                base = (node.module + "." if node.module else "")
                full = base + a.name
                if a.name.startswith("_") and not a.name.startswith("__"):
                    if full.lstrip(".") in mods or a.name in {m.split(".")[-1] for m in mods}:
                        imported_modules.add(a.asname or a.name)     # a private *module*
                    else:
                        bad.append(f"{rel(path)}:{node.lineno} imports {a.name}")
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in imported_modules and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            bad.append(f"{rel(path)}:{node.lineno} uses {node.value.id}.{node.attr}")
    assert not bad, bad


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_no_module_imports_the_package_root(path):
    mods = {m.split(".")[-1] for m in module_names()}
    depth = len(path.relative_to(PKG).parts) - 1
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "rankjax" for a in node.names):
            bad.append(f"{rel(path)}:{node.lineno} import rankjax")
        if (isinstance(node, ast.ImportFrom) and node.level == depth + 1 and node.module is None
                and path.name != "__init__.py" or
                isinstance(node, ast.ImportFrom) and node.level == depth + 1 and node.module is None
                and depth > 0):
            for a in node.names:
                if a.name not in mods:
                    bad.append(f"{rel(path)}:{node.lineno} from {'.' * node.level} import {a.name}")
    assert not bad, bad


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_kinds_are_told_apart_only_in_their_home(path):
    name = rel(path)
    models = model_types()
    bad = []
    for line, how, names in switches(ast.parse(path.read_text())):
        where = f"{name}:{line} {how} {sorted(names)}"
        if names & (X_KIND_NAMES | (X_KIND_ATTRS if how == "hasattr" else set())):
            if name != "_core/sparse.py":
                bad.append(where + " (kinds of X live in _core/sparse.py)")
        if names & GRAPH_NAMES or how == "hasattr" and names & GRAPH_ATTRS:
            if name != "graphs/graph.py":
                bad.append(where + " (graph types live in graphs/graph.py)")
        for t in names & set(models):
            if name != models[t]:
                bad.append(where + f" ({t} lives in {models[t]})")
        if how == "hasattr" and names & {"_fields", "shape"} and name.startswith("cli/"):
            bad.append(where + " (weights vs models: io/models.is_weights)")
    assert not bad, bad


def type_name_switches(tree):
    """Lines comparing ``type(x).__name__`` with names: a type switch in disguise."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Compare) and isinstance(node.left, ast.Attribute)
                and node.left.attr == "__name__" and isinstance(node.left.value, ast.Call)
                and getattr(node.left.value.func, "id", None) == "type"):
            yield node.lineno
        if (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get"
                and isinstance(node.func.value, ast.Dict) and node.args
                and "type(" in ast.unparse(node.args[0]) and "__name__" in ast.unparse(node.args[0])):
            yield node.lineno


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_no_switch_on_type_names(path):
    lines = list(type_name_switches(ast.parse(path.read_text())))
    assert not lines, f"{rel(path)}: type(...).__name__ switches at lines {lines}"


def test_the_rules_see_a_violation(tmp_path):
    # the scanners above are not vacuous: each finds the fault it is written for
    src = ("from ._cv import _over_folds\nimport rankjax\n"
           "def f(X, g):\n    return hasattr(X, 'todense'), isinstance(g, QueryGraph)\n")
    tree = ast.parse(src)
    found = {how for _, how, names in switches(tree) if names & (X_KIND_ATTRS | GRAPH_NAMES)}
    assert found == {"hasattr", "isinstance"}
    assert any(isinstance(n, ast.ImportFrom) and n.names[0].name == "_over_folds"
               for n in ast.walk(tree))


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_no_module_is_over_the_line_budget(path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_LINES, f"{rel(path)} has {n} lines (split it by concern)"


def test_one_name_one_concept_among_private_helpers():
    # a private helper name defined in two modules means two things under one name
    where = {}
    for path in modules():
        for node in ast.parse(path.read_text()).body:
            names = ([node.name] if isinstance(node, (ast.FunctionDef, ast.ClassDef)) else
                     [t.id for t in getattr(node, "targets", []) if isinstance(t, ast.Name)])
            for n in names:
                if n.startswith("_") and not n.startswith("__") and n != "_":
                    where.setdefault(n, []).append(rel(path))
    twice = {n: ps for n, ps in where.items() if len(ps) > 1}
    assert not twice, twice


# --- the upper floors (issue 32) -------------------------------------------------------

MAX_CORE_PARAMS = 8


def _n_params(fn):
    a = fn.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)


def jitted_cores(tree):
    """``(name, parameter count)`` of every function compiled by ``jax.jit``: decorated
    (``@jax.jit``, ``@partial(jax.jit, ...)``) or wrapped (``name = jax.jit(fn, ...)``)."""
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and any("jit" in ast.unparse(d)
                                                     for d in node.decorator_list):
            yield node.name, _n_params(node)
        elif (isinstance(node, ast.Call) and ast.unparse(node.func) in ("jax.jit", "jit")
              and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in defs):
            yield node.args[0].id, _n_params(defs[node.args[0].id])


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_no_jitted_core_has_more_than_8_parameters(path):
    # data and options travel as pytrees passed whole (a Basis, a CG, a ValidSet, a
    # (X, y, graph) problem) and static options as one hashable tuple
    big = [(n, k) for n, k in jitted_cores(ast.parse(path.read_text())) if k > MAX_CORE_PARAMS]
    assert not big, f"{rel(path)}: jitted cores with more than {MAX_CORE_PARAMS} parameters: {big}"


LOOP_OPTIONS = {"tol", "max_iter", "patience", "recompute_every"}
OWN_LOOPS = {
    "learners/gp.py": "the expectation-propagation loop of the probit GP, not CG",
    "learners/ranksvm.py": "TRON's outer loop (Newton steps with an inner CG of its own)",
    "estimators/iterative.py": "scikit-learn constructor parameters, translated into a CG",
    "estimators/rankrls.py": "scikit-learn constructor parameters, translated into a CG",
}


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_loop_options_only_through_CG(path):
    # the CG solvers take options=CG(...); the keyword spellings are forwarded by the
    # loop_keywords decorator, never a parameter
    if rel(path) in OWN_LOOPS:
        return
    bad = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef) and node.name != "with_tol":
            a = node.args
            hit = {x.arg for x in a.posonlyargs + a.args + a.kwonlyargs} & LOOP_OPTIONS
            if hit:
                bad.append((node.name, sorted(hit)))
    assert not bad, f"{rel(path)}: loop options as parameters (use CG): {bad}"


NYSTROM_HOME = "kernels/basis.py"
NYSTROM_NAMES = {"take_basis": "the one basis check", "basis_cholesky": "the one feature map's factor",
                 "features": "the one feature map"}


def test_one_nystrom_feature_map_and_one_basis_check():
    defined, factorised, basis_errors = {}, [], []
    for path in modules():
        src = path.read_text()
        tree = ast.parse(src)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef) and node.name in NYSTROM_NAMES:
                defined.setdefault(node.name, []).append(rel(path))
        if rel(path) != NYSTROM_HOME:
            factorised += [rel(path) for n in ast.walk(tree) if isinstance(n, ast.Call)
                           and ast.unparse(n.func).endswith("basis_cholesky")]
            if "basis holds" in src or "nystrom_map" in src or "padded_basis" in src:
                basis_errors.append(rel(path))
    assert defined == {n: [NYSTROM_HOME] for n in NYSTROM_NAMES}, defined
    assert not factorised, f"basis factorised outside {NYSTROM_HOME}: {factorised}"
    assert not basis_errors, f"a second basis check or feature map in {basis_errors}"


def test_no_array_computation_in_estimators():
    # the estimators translate scikit-learn's conventions; every computation is a
    # library call (jax.Array in isinstance and jax.block_until_ready are conversions)
    allowed = {"jax.Array", "jax.block_until_ready"}
    for path in sorted((PKG / "estimators").rglob("*.py")):
        tree = ast.parse(path.read_text())
        bad = [n.lineno for n in ast.walk(tree)
               if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult)]
        bad += [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                and ast.unparse(n).startswith(("jax.", "jnp.", "lax."))
                and ast.unparse(n) not in allowed and not isinstance(n.value, ast.Attribute)]
        bad += [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                and any(a.name.startswith(("jax.numpy", "jax.lax", "jnp")) or
                        getattr(n, "module", "") in ("jax", "jax.numpy") for a in n.names)]
        assert not bad, f"{rel(path)}: array computation at lines {sorted(bad)}"


def test_the_upper_floor_rules_see_a_violation():
    src = ("import jax\nfrom functools import partial\n"
           "@partial(jax.jit, static_argnames='k')\n"
           "def core(a, b, c, d, e, f, g, h, k):\n    return a\n"
           "def solve(X, *, tol=1e-5):\n    return X @ X\n"
           "g = jax.jit(core)\n")
    tree = ast.parse(src)
    assert [k for _, k in jitted_cores(tree)] == [9, 9]
    assert any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult) for n in ast.walk(tree))


PRODUCTS = ("dot", "matmul", "einsum", "dot_general", "tensordot", "vdot", "inner")


def bare_products(source: str):
    """Line numbers of the products that state no precision: ``a @ b``, or ``dot``,
    ``matmul``, ``einsum``, ``dot_general``... without ``precision=``; a line marked
    ``# precision: <reason>`` is allowed (issue 35: TF32 / bfloat16 passes on an
    accelerator)."""
    lines = source.splitlines()
    marked = {i + 1 for i, ln in enumerate(lines) if "# precision:" in ln}
    bad = []
    for n in ast.walk(ast.parse(source)):
        if isinstance(n, ast.BinOp) and isinstance(n.op, ast.MatMult):
            bad.append(n.lineno)
        elif isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            if name in PRODUCTS and "precision" not in {k.arg for k in n.keywords}:
                bad.append(n.lineno)
    return sorted(ln for ln in bad if ln not in marked)


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_every_product_states_its_precision(path):
    bad = bare_products(path.read_text())
    assert not bad, (f"{rel(path)}: products without a precision at lines {bad} (use "
                     "rankjax._core.products.mm or precision=HI, or mark '# precision: <reason>')")


def test_the_precision_rule_sees_a_violation():
    assert bare_products("y = a @ b\n") == [1]
    assert bare_products("y = jnp.dot(a, b)\nz = jnp.einsum('ij,j', a, b)\n") == [1, 2]
    assert bare_products("y = jnp.matmul(a, b, precision=HI)\n") == []
    assert bare_products("y = a @ b   # precision: integers\n") == []
    assert bare_products("y = lax.dot_general(a, b, dims)\n") == [1]


def test_the_backend_is_consulted_in_one_place():
    """Code paths that depend on the backend are chosen by ``rankjax._core.backend.paths()``
    alone (issue 35): no other module asks ``jax.default_backend()``."""
    asking = [rel(p) for p in modules() if "default_backend" in p.read_text()
              and rel(p) != "_core/backend.py"]
    assert not asking, f"modules choosing by backend outside _backend.paths(): {asking}"


@pytest.mark.parametrize("path", sorted((PKG / "solvers").glob("*.py")), ids=rel)
def test_no_solver_branches_on_a_problem_kind(path):
    """Problem kinds are types (issue 78): a solver dispatches on the problem's type
    (``singledispatchmethod``) and reads what the type supplies, never its ``kind``."""
    import re
    hits = [i + 1 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines())
            if re.search(r"\b(problem|data|valid)\.kind\s*(==|!=|in\b|not\s+in\b)", line)]
    assert not hits, f"{rel(path)}: lines {hits} test a problem's kind"


OUTSIDE_NUMERICS = ("runtime/", "estimators/", "cli/", "__init__.py", "__main__.py")


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_the_numerics_never_import_the_runtime(path):
    """Compile caches, XLA's flags and the program store live in ``runtime/`` (issue 78):
    the package imports it first, the estimators and the command line turn the cache on,
    and no numerics module imports it (the cores' seat is how it serves them)."""
    if rel(path).startswith(OUTSIDE_NUMERICS):
        return
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = ("." * node.level) + (node.module or "")
            assert "runtime" not in mod.split("."), f"{rel(path)} imports {mod}"
        elif isinstance(node, ast.Import):
            assert not any("rankjax.runtime" in a.name for a in node.names), rel(path)


LAPACK_CALL = (r"\b(jnp|jax\.numpy|xp)\.linalg\.(cholesky|eigh|eigvalsh|solve|inv|qr|svd|lstsq|pinv"
               r"|det|slogdet)\b|\blax\.linalg\.|\bjax\.scipy\.linalg\b")
LAPACK_ELSEWHERE = {"solvers/small_solve.py": "the accelerator's batched fold solve (jnp.linalg.solve)",
                    "features/learn.py": "one inverse, the numpy and jax.numpy twin of one body"}


@pytest.mark.parametrize("path", modules(), ids=rel)
def test_every_factorisation_goes_through_the_lapack_module(path):
    """Cholesky factors, triangular solves and ``eigh`` are ``rankjax._core.lapack``'s (one
    unbatched call a matrix on the CPU, where jaxlib's batched kernels can wait forever on
    XLA's pool): no other module calls ``jnp.linalg``/``lax.linalg``/``jax.scipy.linalg``
    factorisations, but the two named in :data:`LAPACK_ELSEWHERE` (host numpy on host
    arrays is not a program: ``np.linalg`` in a host check is allowed)."""
    import re
    if rel(path) in ("_core/lapack.py",) + tuple(LAPACK_ELSEWHERE):
        return
    hits = [i + 1 for i, line in enumerate(path.read_text(encoding="utf-8").splitlines())
            if re.search(LAPACK_CALL, line.split("#")[0]) and ">>>" not in line]
    assert not hits, f"{rel(path)}: lines {hits} call a factorisation outside _core/lapack.py"


def test_the_lapack_rule_sees_a_violation():
    import re
    for bad in ("C = jnp.linalg.cholesky(A)", "x = lax.linalg.triangular_solve(C, b)",
                "x = jax.scipy.linalg.solve_triangular(C, b)", "w, V = jnp.linalg.eigh(A)"):
        assert re.search(LAPACK_CALL, bad), bad
