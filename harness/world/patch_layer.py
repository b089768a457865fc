"""A user's own runtime patch layer, put under test with agentscope.

A team that runs a mitigation of its own on top of agentscope (a module
that wraps some of agentscope's functions) tests the program it deploys:
agentscope *and* that layer. ``--patch MODULE`` names it: a dotted module
name importable on ``sys.path``, or a path to a ``.py`` file. The module
has ``install()`` and may have ``uninstall()``; the harness imports it and
calls ``install()`` once before any story, ``uninstall()`` at the end.

The harness itself never patches agentscope: the layer is the user's
code, run as they run it. What a story records of it is its name and a
digest of its source (:meth:`Layer.record`), never where it lies.
"""
from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType


class PatchRefused(ValueError):
    """The layer cannot be used (one line: why)."""


@dataclass(frozen=True)
class Source:
    """Where a layer's code is, found without running it."""

    name: str  # the module's dotted name (a file's: its stem)
    file: Path  # its source file
    given: str  # as the user named it (a path made absolute)
    digest: str  # ``sha256:<16 hex>`` of the source's bytes, as found

    def record(self) -> dict[str, str]:
        """What ``story.json`` and the verdicts keep: name and digest."""
        return {"name": self.name, "digest": self.digest}

    def describe(self) -> str:
        """``team_parked_guard (sha256:...)``."""
        return f"{self.name} ({self.digest})"


def is_path(text: str) -> bool:
    """Whether ``text`` names a file rather than a dotted module."""
    return text.endswith(".py") or "/" in text or "\\" in text


def resolved(text: str) -> str:
    """``text`` as another process in another folder can use it: a path
    made absolute (a module name as it is)."""
    return str(Path(text).resolve()) if is_path(text) else text


def find(text: str) -> Source:
    """The layer ``text`` names, its source read and compiled and its
    ``install`` found, with nothing of it run (nor agentscope imported)."""
    if is_path(text):
        file = Path(text).resolve()
        if not file.is_file():
            raise PatchRefused("no such file")
        if file.suffix != ".py":
            raise PatchRefused("not a .py file")
        name = file.stem
        if not name.isidentifier():
            raise PatchRefused(f"{file.name} is not a module name")
    else:
        try:
            spec = importlib.util.find_spec(text)
        except (ImportError, ValueError) as missing:
            raise PatchRefused(f"cannot find it: {type(missing).__name__}: {missing}") from None
        if spec is None:
            raise PatchRefused(f"no module named {text!r} on sys.path")
        if not spec.origin or not spec.origin.endswith(".py"):
            raise PatchRefused("not a Python source module")
        file, name = Path(spec.origin), text
    try:
        code = file.read_bytes()
        tree = ast.parse(code, filename=str(file))
    except (OSError, SyntaxError, ValueError) as broken:
        raise PatchRefused(f"cannot be read: {type(broken).__name__}: {broken}") from None
    if "install" not in _top_level_names(tree):
        raise PatchRefused("defines no install()")
    digest = f"sha256:{hashlib.sha256(code).hexdigest()[:16]}"
    return Source(name=name, file=file, given=resolved(text), digest=digest)


def _top_level_names(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level (functions, classes,
    assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def load(text: str) -> tuple[Source, ModuleType]:
    """Import the layer ``text`` names (its ``install`` not yet called)."""
    source = find(text)
    try:
        if is_path(text):
            module = _import_file(source)
        else:
            module = importlib.import_module(source.name)
    except Exception as failed:  # pylint: disable=broad-except
        raise PatchRefused(f"fails to import: {type(failed).__name__}: {failed}") from None
    if not callable(getattr(module, "install", None)):
        raise PatchRefused("has no callable install()")
    return source, module


def _import_file(source: Source) -> ModuleType:
    known = sys.modules.get(source.name)
    if known is not None:
        if Path(getattr(known, "__file__", "") or "").resolve() == source.file:
            return known
        raise ImportError(f"a module named {source.name} is already imported from elsewhere")
    spec = importlib.util.spec_from_file_location(source.name, source.file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[source.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[source.name]
        raise
    return module


#: The layer installed in this process, and its module.
_INSTALLED: list[tuple[Source, ModuleType]] = []


def install(text: str) -> Source:
    """Import the layer and call its ``install()`` (once per process: a
    second call for the same layer does nothing)."""
    if _INSTALLED:
        if _INSTALLED[0][0].file == find(text).file:
            return _INSTALLED[0][0]
        raise PatchRefused(f"another layer is installed: {_INSTALLED[0][0].describe()}")
    source, module = load(text)
    try:
        module.install()
    except Exception as failed:  # pylint: disable=broad-except
        raise PatchRefused(f"install() failed: {type(failed).__name__}: {failed}") from None
    _INSTALLED.append((source, module))
    return source


def uninstall() -> None:
    """Call the installed layer's ``uninstall()``, if it has one."""
    if not _INSTALLED:
        return
    _source, module = _INSTALLED.pop()
    undo = getattr(module, "uninstall", None)
    if callable(undo):
        undo()


def in_effect() -> Source | None:
    """The layer installed in this process (None: agentscope as it is)."""
    return _INSTALLED[0][0] if _INSTALLED else None


def record() -> dict[str, str]:
    """The installed layer's name and digest; ``{}`` when none is."""
    layer = in_effect()
    return layer.record() if layer is not None else {}
