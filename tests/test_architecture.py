"""The package's architecture as checked properties: imports run one way, no cycles, one status table.

The import graph is built from the source (module-level imports, imports inside functions and
``importlib.import_module("...")`` strings alike), so the property holds for code that has not
run yet. Layers, top to bottom (``docs/architecture.md``)::

    cli  ->  api  ->  store, sweeps  ->  runs  ->  driver, progress, results, problem, record, status, theory,
                                                   validate, plots  ->  kernels
"""

import ast
import os
import subprocess
import sys

import pytest

import dlnmomentum as dm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE_DIR = os.path.join(ROOT, "dlnmomentum")
KERNELS_DIR = os.path.join(ROOT, "kernels")

#: Layer of each top-level part of the package (higher may import lower or equal, never higher).
LAYERS = {"cli": 5, "__main__": 5, "figures": 5, "api": 4, "store": 3, "sweeps": 3, "runs": 2,
          "driver": 1, "progress": 1, "results": 1, "problem": 1, "networks": 1, "record": 1, "status": 1,
          "theory": 1, "validate": 1, "plots": 1, "kernels": 0}


def _modules():
    """Module name -> source path, for dlnmomentum/ and kernels/ (installed as dlnmomentum.kernels)."""
    out = {}
    for base, prefix in ((PACKAGE_DIR, "dlnmomentum"), (KERNELS_DIR, "dlnmomentum.kernels")):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if d not in ("__pycache__", "kernels")]
            rel = os.path.relpath(dirpath, base)
            parts = [] if rel == "." else rel.split(os.sep)
            for name in filenames:
                if name.endswith(".py"):
                    mod = parts + ([] if name == "__init__.py" else [name[:-3]])
                    out[".".join([prefix] + mod)] = os.path.join(dirpath, name)
    return out


def _resolve(module, is_package, level, name):
    if level == 0:
        return name
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[:len(base) - (level - 1)]
    return ".".join(base + ([name] if name else []))


def import_graph():
    """Module -> set of dlnmomentum modules it imports (including the packages on the way)."""
    modules = _modules()
    graph = {}
    for module, path in modules.items():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        is_package = path.endswith("__init__.py")
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node.level, node.module or "")
                targets.add(base)
                targets.update(f"{base}.{alias.name}" for alias in node.names)  # submodules imported by name
            elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None))
                  in ("import_module", "__import__") and node.args and isinstance(node.args[0], ast.Constant)):
                targets.add(str(node.args[0].value))
        edges = set()
        for t in targets:
            parts = t.split(".")
            # the module itself and every package it passes through (their __init__ runs first),
            # except the root package and the importer's own ancestors (already being imported)
            for k in range(2, len(parts) + 1):
                name = ".".join(parts[:k])
                if name in modules and name != module and not module.startswith(name + "."):
                    edges.add(name)
        graph[module] = edges
    return graph


def _layer(module):
    part = module.split(".")[1] if "." in module else "__init__"
    return LAYERS.get(part)


def _find_cycle(graph):
    color, stack = {}, []

    def visit(node):
        color[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if color.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if color.get(nxt) is None:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        color[node] = 2
        return None

    for node in sorted(graph):
        if color.get(node) is None:
            found = visit(node)
            if found:
                return found
    return None


def test_graph_sees_every_kind_of_import():
    graph = import_graph()
    assert "dlnmomentum.runs.mgd" in graph["dlnmomentum.api"]          # module-level, relative
    assert "dlnmomentum.theory" in graph["dlnmomentum.runs.points"]    # inside a function
    assert "dlnmomentum.kernels.status" in graph["dlnmomentum.status"]  # the kernels, installed as a subpackage
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_import_graph_has_no_cycle():
    cycle = _find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_imports_run_one_way():
    bad = []
    for module, targets in import_graph().items():
        here = _layer(module)
        if module == "dlnmomentum":
            continue  # the package's public names come from every layer
        assert here is not None, f"{module} is in no layer: add it to LAYERS and docs/architecture.md"
        for t in targets:
            there = _layer(t)
            if there is not None and there > here:
                bad.append(f"{module} (layer {here}) imports {t} (layer {there})")
    assert not bad, "\n".join(sorted(bad))


def test_a_cycle_or_an_upward_import_would_be_caught(tmp_path):
    """The checks can fail: an upward import planted in a copy of the graph is reported."""
    graph = import_graph()
    graph["dlnmomentum.runs.mgd"] = graph["dlnmomentum.runs.mgd"] | {"dlnmomentum.api"}
    assert _find_cycle(graph) is not None
    assert _layer("dlnmomentum.api") > _layer("dlnmomentum.runs.mgd")


def test_status_is_one_table():
    from dlnmomentum.kernels import flow as KF
    from dlnmomentum.kernels import mgd as KM
    from dlnmomentum.kernels import status as KS

    assert [(int(s), s.label, s.message) for s in dm.Status] == [tuple(row) for row in KS.TABLE]
    for kernel in (KM, KF):
        for s in ("RUNNING", "CONVERGED", "DIVERGED"):
            assert getattr(kernel, s) == getattr(dm.Status, s)
    assert dm.CONVERGED is dm.Status.CONVERGED and dm.STATUS_MESSAGES[3] == dm.Status.DIVERGED.message


def test_theory_is_an_attribute_of_the_package():
    assert dm.theory.lam(0.05, 0.5) == pytest.approx(0.2)


def test_a_command_module_that_fails_to_import_is_an_error():
    code = ("import sys; sys.modules['dlnmomentum.cli.flow'] = None\n"
            "try:\n    import dlnmomentum.cli\nexcept ImportError as e:\n    print('ImportError', e)\n"
            "else:\n    print('imported')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.startswith("ImportError"), out.stdout + out.stderr


def test_modules_stay_small_unless_cohesive():
    """No module over about 600 lines unless its docstring says why it is one cohesive thing (a "Module size"
    section, or the word cohesive)."""
    too_big = []
    for module, path in _modules().items():
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if text.count("\n") > 650:
            doc = ast.get_docstring(ast.parse(text)) or ""
            if "cohesive" not in doc.lower() and "module size" not in doc.lower():
                too_big.append(f"{module}: {text.count(chr(10))} lines")
    assert not too_big, too_big


def test_figures_load_on_first_use_as_the_messages_write_them():
    """`dm.figures.open_figure(...)`, as a reader given a figure store advises, works after `import dlnmomentum as dm`,
    and the import itself does not load Matplotlib."""
    script = ("import sys, dlnmomentum as dm\n"
              "assert 'matplotlib' not in sys.modules and 'dlnmomentum.figures' not in sys.modules\n"
              "assert callable(dm.figures.open_figure)\n"
              "try:\n    dm.no_such_name\nexcept AttributeError as exc:\n    assert 'no_such_name' in str(exc)\n"
              "else:\n    raise SystemExit('no AttributeError')\n")
    _run_in_a_fresh_interpreter(script)


def test_import_and_the_command_line_start_without_scipy_solvers():
    """`import dlnmomentum` (and so every `dlnm` command, `--help` and `inspect` too) does not load SciPy's linear
    algebra or optimisation (about 0.55 s of a 1.4 s import); the theory and the flows' stiffness estimate import
    them where they use them, and work after the light import (no kernel runs here: nothing to compile)."""
    script = ("import sys, numpy as np, dlnmomentum as dm\n"
              "from dlnmomentum.runs.stepping import stiffness_estimate\n"
              "heavy = [m for m in ('scipy.linalg', 'scipy.optimize') if m in sys.modules]\n"
              "assert not heavy, heavy\n"
              "p = dm.sparse_regression(n=20, d=30, s=5, seed=0)\n"
              "l1 = dm.theory.min_l1_interpolator(p.X, p.y)\n"
              "assert np.allclose(p.X @ l1, p.y, atol=1e-10)\n"
              "r = dm.theory.implicit_bias(p.X, p.y, np.full(p.d, 1e-4))\n"
              "assert r.converged and np.allclose(p.X @ r.theta, p.y, atol=1e-10), r.kkt_residual\n"
              "assert stiffness_estimate(p, np.full(p.d, 0.01), np.zeros(p.d)) > 0.0\n")
    _run_in_a_fresh_interpreter(script)


def _run_in_a_fresh_interpreter(script):
    """Run ``script`` in a new Python with this checkout first on its path; fails the test with its stderr."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
