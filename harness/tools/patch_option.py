"""``--patch MODULE`` (``--hitl-patch`` under pytest): the user's own patch
layer (:mod:`harness.world.patch_layer`) as the commands take it, checked
before any work and described the same everywhere."""
from __future__ import annotations

import importlib.util

from harness.world import patch_layer

#: ``--patch``'s help, the same on every command.
HELP = (
    "your own runtime patch layer, put under test with agentscope: a dotted module "
    "name importable on sys.path, or a path to a .py file, with install() and "
    "optionally uninstall(); installed once before any story (after the reference "
    "fixes), its name and source digest recorded in every story and verdict. A "
    "module that cannot be imported or has no install() is refused before any work "
    "(exit 2)"
)


class Refused(Exception):
    """``--patch`` names no usable layer (the one-line message)."""


def checked(given: str | None, *, importing: bool) -> str | None:
    """``--patch`` as the suite's processes can use it (a path made
    absolute), checked before any work: its source found, readable and
    defining ``install``, and with ``importing`` (or when agentscope is
    installed here) imported, so a layer that fails to import is one line.
    Its ``install()`` is not called here."""
    if given is None:
        return None
    try:
        patch_layer.find(given)
        if importing or importlib.util.find_spec("agentscope") is not None:
            patch_layer.load(given)
    except patch_layer.PatchRefused as refused:
        raise Refused(f"--patch {given}: {refused}") from None
    return patch_layer.resolved(given)


def in_use() -> str:
    """The pytest header's line: which layer is installed over agentscope."""
    layer = patch_layer.in_effect()
    if layer is None:
        return "patch layer: none (agentscope as it is; --hitl-patch MODULE tests your own)"
    return f"patch layer: {layer.describe()} from {layer.file}"


def install_for_pytest(given: str | None) -> None:
    """``--hitl-patch``: the layer installed once in this process (each xdist
    worker too) before any story, over any reference fix; refused as a
    pytest usage error (one line)."""
    if not given:
        return
    import pytest  # pylint: disable=import-outside-toplevel

    try:
        patch_layer.install(given)
    except patch_layer.PatchRefused as refused:
        raise pytest.UsageError(f"--hitl-patch {given}: {refused}") from None
