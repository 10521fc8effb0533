"""The layers import one way (docs/ARCHITECTURE.md, "Layers"): a change below never needs one above.

Every `import` of every module counts, also those inside functions: a deferred
import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "tony_airflow"

# From the bottom up; a module may import its own layer and the layers below it.
LAYERS = [
    ("errors", "files", "retries", "lean", "progress"),
    ("yarn.hadoop_conf", "yarn.jvm", "yarn.discovery", "yarn.rest", "yarn.hdfs", "yarn.logs", "yarn"),
    ("local", "core", "examples"),
    ("engines", "providers", "local.containers"),
    ("cli",),
]
# Pairs in one layer that must still not know each other.
FORBIDDEN = [
    ("core", "local"), ("local.cluster", "core"), ("engines", "local"), ("providers", "local"), ("examples", "core"),
    ("engines", "providers"), ("providers", "engines"), ("local.containers", "engines"), ("local.containers", "providers"),
    ("core.executor", "core.am"), ("core.executor", "core.client"),
    ("core.am", "core.executor"), ("core.am", "core.client"),
    ("providers.yarn.hooks", "providers.yarn.triggers"), ("providers.yarn.hooks", "providers.yarn.operators"),
    ("providers.yarn.hooks", "providers.yarn.sensors"), ("providers.yarn.triggers", "providers.yarn.operators"),
    ("providers.yarn.triggers", "providers.yarn.sensors"),
]
NO_AIRFLOW = ("providers.yarn.connection", "core", "yarn", "engines", "errors")


def _name(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    parts = [p for p in rel.parts if p != "__init__"]
    return ".".join(parts) or "__init__"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def _ours(imported: set[str], modules: set[str]) -> set[str]:
    prefix = "tony_airflow."
    return {m[len(prefix):] for m in imported if m.startswith(prefix) and m[len(prefix):] in modules}


MODULES = {_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {name: _ours(_imports(path), set(MODULES)) - {name} for name, path in MODULES.items()}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def _layer(module: str) -> int:
    best, depth = -1, -1
    for level, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if _under(module, prefix) and len(prefix) > depth:
                best, depth = level, len(prefix)
    return best


def test_every_module_has_a_layer():
    assert not [m for m in MODULES if m != "__init__" and _layer(m) < 0]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_only(module):
    up = [dep for dep in GRAPH[module] if _layer(dep) > _layer(module)]
    assert not up, f"{module} (layer {_layer(module)}) imports a higher layer: {up}"
    crossed = [(module, dep) for dep in GRAPH[module] for a, b in FORBIDDEN if _under(module, a) and _under(dep, b)]
    assert not crossed, f"{module} imports across a forbidden line: {crossed}"


def test_the_data_model_and_the_protocol_stand_alone():
    """Every front end and both sides of the registry read these two: they depend on nothing of ours."""
    assert GRAPH["core.spec"] <= {"errors", "core.spec_values"}
    assert GRAPH["core.spec_values"] <= {"errors"}
    assert GRAPH["core.protocol"] == set()


def test_only_the_cli_imports_the_cli():
    outside = [(m, d) for m, deps in GRAPH.items() for d in deps if _under(d, "cli") and not _under(m, "cli")]
    assert not outside


def test_no_import_cycles():
    """Also through function-level imports: those hid the old cli <-> submit <-> oozie circle."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for dep in GRAPH[node]:
            if dep.startswith(node + ".") or node.startswith(dep + "."):
                continue  # a package and its own modules
            if state.get(dep) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(dep):] + [dep]))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)


def test_modules_that_need_no_airflow_import_none():
    for module, path in MODULES.items():
        if any(_under(module, p) for p in NO_AIRFLOW):
            assert not [i for i in _imports(path) if i == "airflow" or i.startswith("airflow.")], module


SHIPPED_ALONE = ("examples.digits_keras", "examples.digits_ps", "examples.digits_data")


def test_the_examples_shipped_alone_into_images_import_only_each_other():
    """They run from --src_dir in images without tony-airflow (tests/e2e/test_docker_engine.py copies just
    these files): an import of the package there fails in the image (ModuleNotFoundError), found once."""
    for module in SHIPPED_ALONE:
        outside = {dep for dep in GRAPH[module] if dep not in SHIPPED_ALONE and dep != "examples"}
        assert not outside, f"{module} imports {sorted(outside)}: it must run without the package"
