"""The product code's layers import one way, and its modules stay small.

Each module is read with :mod:`ast` (nothing is imported): every
``import`` and ``from ... import`` names the layer it reaches, and no
module may reach a layer above its own. The layers, bottom up:

0. ``harness.kernel``: virtual time, the interleaver, the controlled bus
   and storage; of agentscope only the ``MessageBus`` interface.
1. ``fakes`` and ``reference_fix``: agentscope's boundaries, and the fixes.
2. ``harness.world``: agentscope's app and the façade.
3. ``properties``: catalog, invariants, rules, stories.
4. ``harness.tools``: the pytest plugin, the CLI, the gate, replay.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: Each layer's packages and its rank (higher may import lower).
LAYERS = {
    "harness.kernel": 0,
    "fakes": 1,
    "reference_fix": 1,
    "harness.world": 2,
    "properties": 3,
    "harness.tools": 4,
    "harness.__main__": 4,
}

#: Modules of agentscope the kernel may import (the bus interface).
KERNEL_MAY_IMPORT = ("agentscope.app.message_bus",)

#: No product module is longer than this many lines.
MAX_LINES = 400


def _layer_of(module: str) -> str | None:
    matches = [name for name in LAYERS if module == name or module.startswith(name + ".")]
    return max(matches, key=len) if matches else None


def _product_modules() -> list[tuple[str, Path]]:
    found = []
    for package in ("harness", "fakes", "properties", "reference_fix"):
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found.append((".".join(parts), path))
    return found


def _imports(module: str, path: Path) -> list[str]:
    """Every module ``path`` imports, relative imports resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
                if node.module is None:  # from . import a, b
                    names.extend(f"{target}.{alias.name}" for alias in node.names)
                    continue
                names.append(target)
            else:
                names.append(node.module)
    return names


MODULES = _product_modules()


def test_every_product_module_belongs_to_a_layer():
    unplaced = [m for m, _ in MODULES if m not in ("harness",) and _layer_of(m) is None]
    assert unplaced == []


@pytest.mark.parametrize("module,path", MODULES, ids=[m for m, _ in MODULES])
def test_no_module_imports_a_layer_above_its_own(module: str, path: Path):
    layer = _layer_of(module)
    if layer is None:  # the ``harness`` package's own docstring
        return
    upward = [
        name for name in _imports(module, path)
        if _layer_of(name) is not None and LAYERS[_layer_of(name)] > LAYERS[layer]
    ]
    assert upward == [], f"{module} ({layer}) imports layers above it"


@pytest.mark.parametrize(
    "module,path",
    [(m, p) for m, p in MODULES if _layer_of(m) == "harness.kernel"],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_the_kernel_knows_only_the_bus_interface_of_agentscope(module: str, path: Path):
    agentscope = [n for n in _imports(module, path) if n.split(".")[0] == "agentscope"]
    assert all(n.startswith(KERNEL_MAY_IMPORT) for n in agentscope), agentscope


def test_only_the_world_touches_agentscope_private_names():
    """``agentscope.<...>._private`` modules are imported by the world's
    surface alone (the reference fixes patch them, and are exempt)."""
    offenders = {}
    for module, path in MODULES:
        if module.startswith(("harness.world.surface", "reference_fix")):
            continue
        private = [
            n for n in _imports(module, path)
            if n.split(".")[0] == "agentscope" and any(p.startswith("_") for p in n.split("."))
        ]
        if private:
            offenders[module] = private
    assert offenders == {}


def test_no_module_is_oversized():
    long = {m: n for m, p in MODULES if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_checker_sees_an_upward_import(tmp_path: Path):
    """The parser is not blind: a kernel module importing the world is
    caught."""
    bad = tmp_path / "bad.py"
    bad.write_text("from harness.world.world import World\nfrom ..world import stage\n")
    names = _imports("harness.kernel.bad", bad)
    assert names == ["harness.world.world", "harness.world"]
    assert all(LAYERS[_layer_of(n)] > LAYERS["harness.kernel"] for n in names)


def test_the_readme_table_is_the_catalog():
    from properties.catalog import markdown_table

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split("<!-- catalog:start -->\n", 1)[1].split("\n<!-- catalog:end -->", 1)[0]
    assert table == markdown_table()
