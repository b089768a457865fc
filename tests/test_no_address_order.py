"""Nothing in the product code orders by memory address.

``id()`` and the default ``hash()`` of an object are its address, which
differs run by run (address-space randomisation): a sort, a set or a dict
keyed by it reaches a trace in a different order each time. Each module is
read with :mod:`ast`; the one use of ``id()`` left is a membership check
(an exception chain's cycle guard), which orders nothing.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Where ``id()`` may be called, and why it orders nothing there.
ID_ALLOWED = {
    "harness/world/failures.py": "a cycle guard over an exception chain: membership only",
}


def _calls(name: str) -> dict[str, list[int]]:
    """Product modules calling the builtin ``name``, with their lines."""
    found: dict[str, list[int]] = {}
    for package in ("harness", "fakes", "properties", "reference_fix"):
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            lines = [
                node.lineno for node in ast.walk(tree)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name
            ]
            keyed = [
                node.lineno for node in ast.walk(tree)
                if isinstance(node, ast.keyword) and node.arg == "key"
                and isinstance(node.value, ast.Name) and node.value.id == name
            ]
            if lines or keyed:
                found[str(path.relative_to(ROOT))] = sorted(lines + keyed)
    return found


def test_no_module_sorts_or_keys_by_id_but_the_one_membership_check():
    assert set(_calls("id")) == set(ID_ALLOWED), _calls("id")


def test_no_module_hashes_an_object():
    assert _calls("hash") == {}
