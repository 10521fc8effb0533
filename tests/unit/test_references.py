"""Every reference to one of our modules resolves: `from tony_airflow.x import y` anywhere in the tree
(also inside functions, where a moved module is found only when that code runs) and every
`python -m <our module>` that the tests, docs, templates and examples name."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PY_DIRS = ("tony_airflow", "tests", "bench", "dags_examples")
TEXT_FILES = ["README.md", "Makefile", *[str(p.relative_to(ROOT)) for p in (
    *ROOT.glob("docs/**/*.md"),
    *ROOT.glob("oozie/**/*.xml"), *ROOT.glob("oozie/**/*.md"), *ROOT.glob("azkaban_jobtype/**/*.job"),
    *ROOT.glob("azkaban_jobtype/**/*.flow"), *ROOT.glob("azkaban_jobtype/**/*.properties"),
    *ROOT.glob("tony_airflow/**/*.j2"))]]
MODULE_RUN = re.compile(r"-m\s+\"?(tony_airflow(?:\.\w+)+)")


def _defines(module: str, name: str) -> bool:
    """Whether `module` has `name`: a submodule, or a top-level definition, assignment or import."""
    if importlib.util.find_spec(f"{module}.{name}") is not None if _is_package(module) else False:
        return True
    spec = importlib.util.find_spec(module)
    tree = ast.parse(Path(spec.origin).read_text())
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
            return True
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return True
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                return True
    return False


def _is_package(module: str) -> bool:
    spec = importlib.util.find_spec(module)
    return bool(spec and spec.submodule_search_locations)


def _imports() -> list[tuple[str, int, str, str]]:
    found = []
    for top in PY_DIRS:
        for path in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tony_airflow"):
                    found += [(str(path.relative_to(ROOT)), node.lineno, node.module, a.name) for a in node.names]
    return found


@pytest.mark.parametrize("where,line,module,name", _imports(), ids=lambda v: str(v))
def test_every_import_of_ours_resolves(where, line, module, name):
    assert importlib.util.find_spec(module) is not None, f"{where}:{line}: no module {module}"
    assert _defines(module, name), f"{where}:{line}: {module} has no {name}"


def test_every_module_run_with_dash_m_exists():
    missing = []
    for rel in TEXT_FILES + [str(p.relative_to(ROOT)) for top in PY_DIRS for p in (ROOT / top).rglob("*.py")]:
        for target in MODULE_RUN.findall((ROOT / rel).read_text()):
            if importlib.util.find_spec(target) is None:
                missing.append((rel, target))
    assert not missing
