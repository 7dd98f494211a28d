"""The package's shape: no import circles, imports only downwards between the sub-packages,
ops/ on the op kit alone, a small top level, and the old flat module names still importing.

The import graph is read from the source with `ast` (imports inside functions count), so a
new module or a new circle is found without a list to keep up to date."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import networkx as nx
import pytest

import irrun

ROOT = Path(__file__).resolve().parent.parent

# The sub-packages from the bottom up: each may import only those before it (and the
# top-level modules errors and config, below all of them).
LAYERS = ("irrun.ir", "irrun.opkit", "irrun.run", "irrun.tools", "irrun.ui")
BASE = {"irrun.errors", "irrun.config"}


def module_files(root: Path) -> dict[str, Path]:
    """{module name: file} for irrun/ and ops/ under `root` (ops/ is installed as irrun.ops)."""
    out = {}
    for path in sorted(root.glob("irrun/**/*.py")) + sorted(root.glob("ops/**/*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[0] == "ops":
            parts = ["irrun", "ops", *parts[1:]]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path) -> nx.DiGraph:
    """Module -> module it imports, for every import statement anywhere in each file."""
    files = module_files(root)
    graph = nx.DiGraph()
    for name, path in files.items():
        graph.add_node(name)
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - node.level + 1]
                    prefix = ".".join(base + ([node.module] if node.module else []))
                else:
                    prefix = node.module or ""
                # `from pkg import mod` imports the module pkg.mod.
                targets = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in files else prefix
                           for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in files:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(target + "."):
                    graph.add_edge(name, target)
    return graph


def circles(root: Path) -> list[list[str]]:
    return sorted(nx.simple_cycles(import_graph(root)), key=len)


def layer_of(module: str) -> int | None:
    for i, package in enumerate(LAYERS):
        if module == package or module.startswith(package + "."):
            return i
    return None


def upward_imports(graph: nx.DiGraph) -> list[str]:
    bad = []
    for a, b in graph.edges:
        if a.startswith("irrun.ops"):
            if not b.startswith(("irrun.opkit", "irrun.ops")):
                bad.append(f"{a} -> {b} (ops/ imports only irrun.opkit)")
        elif a in BASE and b not in BASE:
            bad.append(f"{a} -> {b} ({a} is below every sub-package)")
        elif layer_of(a) is not None and layer_of(b) is not None and layer_of(b) > layer_of(a):
            bad.append(f"{a} -> {b}")
    return bad


def test_no_import_circles():
    found = circles(ROOT)
    assert not found, "import circles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_sub_packages_import_only_downwards():
    assert upward_imports(import_graph(ROOT)) == []


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_the_circle_test_finds_a_planted_circle(tmp_path):
    # One import inside a function closes the circle: it must count.
    root = _plant(tmp_path, {
        "irrun/__init__.py": "",
        "irrun/run/__init__.py": "",
        "irrun/run/executor.py": "from .bodies import Body\n",
        "irrun/run/bodies.py": "def run():\n    from .executor import execute\n",
        "irrun/run/model.py": "from . import executor\n",
        "ops/__init__.py": "",
    })
    assert circles(root) == [["irrun.run.bodies", "irrun.run.executor"]] or \
        circles(root) == [["irrun.run.executor", "irrun.run.bodies"]]
    (tmp_path / "irrun/run/bodies.py").write_text("def run():\n    pass\n")
    assert circles(root) == []


def test_the_direction_test_finds_an_upward_import(tmp_path):
    root = _plant(tmp_path, {
        "irrun/__init__.py": "",
        "irrun/ir/__init__.py": "",
        "irrun/ir/reader.py": "def f():\n    from ..tools import comparing\n",
        "irrun/tools/__init__.py": "",
        "irrun/tools/comparing.py": "",
        "ops/__init__.py": "",
        "ops/sparse.py": "from irrun.run import executor\n",
        "irrun/run/__init__.py": "",
        "irrun/run/executor.py": "",
    })
    assert sorted(upward_imports(import_graph(root))) == [
        "irrun.ir.reader -> irrun.tools.comparing",
        "irrun.ops.sparse -> irrun.run.executor (ops/ imports only irrun.opkit)"]


def test_top_level_is_small_and_each_sub_package_says_what_it_owns():
    top = [p.name for p in (ROOT / "irrun").glob("*.py")]
    assert len(top) <= 8, sorted(top)
    for package in LAYERS:
        doc = importlib.import_module(package).__doc__
        assert doc and len(doc.split()) >= 20, f"{package} has no docstring saying what it owns"
    assert (ROOT / "docs" / "architecture.md").exists()


@pytest.mark.parametrize("old", sorted(irrun.MOVED))
def test_old_module_names_import_the_moved_module(old):
    new = importlib.import_module(f"irrun.{irrun.MOVED[old]}")
    assert importlib.import_module(f"irrun.{old}") is new
    assert new.__spec__.name == new.__name__     # the alias left the module's own spec
    assert getattr(irrun, old) is new


def test_documented_imports_keep_working():
    from irrun.builder import GraphBuilder
    from irrun.registry import REGISTRY  # noqa: F401

    assert GraphBuilder is irrun.GraphBuilder
    assert irrun.etypes.convert_into is importlib.import_module("irrun.ir.etypes").convert_into
    for name in ("read_model", "validate", "save_model", "compare", "extract", "reduce",
                 "batch", "map_blocks", "register"):
        assert callable(getattr(irrun, name)), name
