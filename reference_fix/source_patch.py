"""One textual change to one agentscope method, in two forms.

A :class:`SourcePatch` replaces exact pieces of a method's source. The
same text gives the unified diff (for an upstream pull request) and the
runtime patch (``pytest --hitl-reference-fix``): the method's source with the
change is compiled in its module's namespace and set on its class, so the
two forms cannot drift apart. The replacement may define further methods
after the patched one (they are added to the class, and removed again).
A function of the module itself (``cls=None``, a route function, say) is
changed in place: it keeps its identity and takes the patched code, so every
name already bound to it (a web framework's route table, an ``import``
elsewhere) runs the fix; its decorators are not applied again.
Patches of one method stack: each applies to the method's source as the
patches before it left it, so two fixes may change different parts of one
method (their diffs stay separate, each against the released module).
A patch may need a module the patched module does not import yet
(``imports``): its diff adds the ``import`` line before the module's first
one, and the runtime patch compiles with it in the namespace.
A patch refuses any release it was not written for, and any source that
does not contain the exact text it replaces.
"""
from __future__ import annotations

import ast
import difflib
import importlib
import inspect
from dataclasses import dataclass
from pathlib import Path


class FixRefused(RuntimeError):
    """The installed agentscope is not one this fix was written for."""


#: Per patch applied: the class's attributes it replaced (None: it added
#: one); for a function of the module, the code object it replaced. Keyed
#: by the patch, so variants of one fix for different releases may share
#: its name.
_REPLACED: dict["SourcePatch", dict[str, object]] = {}

#: Per patched method: its source as the patches applied so far left it,
#: and the patches in the order they were applied.
_SOURCES: dict[tuple[str, str, str], str] = {}
_STACKS: dict[tuple[str, str, str], list["SourcePatch"]] = {}


@dataclass(frozen=True)
class SourcePatch:
    """Replace ``before`` with ``after`` in ``module.cls.method`` (in
    ``module.method`` when ``cls`` is None), and each further ``(before,
    after)`` pair of ``more``, in order."""

    name: str
    module: str
    cls: str | None
    method: str
    before: str
    after: str
    targets: tuple[str, ...]
    covers: tuple[str, ...]
    what: str  # one line: what the fix does
    more: tuple[tuple[str, str], ...] = ()
    imports: tuple[str, ...] = ()  # standard-library modules the change uses

    @property
    def edits(self) -> tuple[tuple[str, str], ...]:
        """Every ``(before, after)`` pair, the first one first."""
        return ((self.before, self.after), *self.more)

    def _edit(self, source: str) -> str:
        for before, after in self.edits:
            source = source.replace(before, after, 1)
        return source

    def edit_module(self, source: str) -> str:
        """The whole module's text with the change and its ``imports``."""
        lines = source.splitlines(keepends=True)
        first = next(n for n, line in enumerate(lines) if line.startswith(("import ", "from ")))
        missing = [f"import {name}\n" for name in self.imports if f"import {name}\n" not in lines]
        return self._edit("".join(lines[:first] + missing + lines[first:]))

    def _unedit(self, source: str) -> str:
        for before, after in reversed(self.edits):
            source = source.replace(after, before, 1)
        return source

    # ── where it applies ──────────────────────────────────────────────

    def check_target(self, version: str, source: str) -> str:
        """Accept ``version`` and its module text, or raise
        :class:`FixRefused` saying why; returns the version."""
        if version not in self.targets:
            raise FixRefused(
                f"the {self.name} fix targets agentscope {', '.join(self.targets)};"
                f" this agentscope is {version}.",
            )
        if any(before not in source for before, _ in self.edits):
            raise FixRefused(
                f"agentscope {version}'s {self.path} does not contain the code "
                f"the {self.name} fix replaces (a modified checkout?)",
            )
        return version

    @property
    def where(self) -> str:
        """The patched method, ``Class.method`` (a module function: its name)."""
        return self.method if self.cls is None else f"{self.cls}.{self.method}"

    @property
    def path(self) -> str:
        """The module's path inside an agentscope source tree."""
        return "src/" + self.module.replace(".", "/") + ".py"

    def _module(self):
        return importlib.import_module(self.module)

    def _installed_source(self) -> tuple[Path, str]:
        path = Path(inspect.getsourcefile(self._module()))
        return path, path.read_text(encoding="utf-8")

    def refusal(self) -> str | None:
        """Why :meth:`apply` would refuse the installed agentscope."""
        import agentscope  # pylint: disable=import-outside-toplevel

        path, source = self._installed_source()
        try:
            self.check_target(agentscope.__version__, source)
        except FixRefused as refused:
            return f"{refused} [{path}]"
        return None

    # ── the runtime form ──────────────────────────────────────────────

    def is_applied(self) -> bool:
        return self in _REPLACED

    def apply(self) -> None:
        """Patch the class in this process (refuses as :meth:`refusal`)."""
        why = self.refusal()
        if why is not None:
            raise FixRefused(why)
        if self.is_applied():
            return
        module = self._module()
        owner = module if self.cls is None else getattr(module, self.cls)
        original = inspect.getattr_static(owner, self.method)
        method_source = _SOURCES.get(self._key) or inspect.getsource(original)
        if any(before not in method_source for before, _ in self.edits):
            raise FixRefused(f"the code the {self.name} fix replaces is not in {self.method}")
        if "super()" in method_source:
            raise FixRefused(f"{self.method} uses super(), which a replaced method cannot")
        patched = self._edit(method_source)
        if self.cls is None:
            if self.imports:
                raise FixRefused(f"a patch of the function {self.method} cannot add imports")
            _REPLACED[self] = {self.method: original.__code__}
            original.__code__ = _function_code(module, original, patched)
            _STACKS.setdefault(self._key, []).append(self)
            _SOURCES[self._key] = patched
            return
        # Compiled as the body of a stand-in class, so the method keeps its
        # indentation (dedenting would change its multi-line strings).
        fixed = "class _Fixed:\n" + patched
        # Keep tracebacks pointing at the right lines of the module.
        fixed = "\n" * (original.__code__.co_firstlineno - 2) + fixed
        namespace = dict(vars(module), **{name: importlib.import_module(name) for name in self.imports})
        exec(compile(fixed, inspect.getsourcefile(module), "exec"), namespace)  # pylint: disable=exec-used
        stand_in = namespace["_Fixed"]
        defined = [name for name, value in vars(stand_in).items() if inspect.isfunction(value)]
        _REPLACED[self] = {name: owner.__dict__.get(name) for name in defined}
        for name in defined:
            setattr(owner, name, stand_in.__dict__[name])
        _STACKS.setdefault(self._key, []).append(self)
        _SOURCES[self._key] = patched

    @property
    def _key(self) -> tuple[str, str, str]:
        return (self.module, self.cls, self.method)

    def remove(self) -> None:
        """Undo :meth:`apply` (the last patch of its method first)."""
        if self not in _REPLACED:
            return
        stack = _STACKS[self._key]
        if stack[-1] is not self:
            raise RuntimeError(f"remove {stack[-1].name} before {self.name}: it patched {self.method} after it")
        stack.pop()
        if stack:
            _SOURCES[self._key] = self._unedit(_SOURCES[self._key])
        else:
            del _SOURCES[self._key], _STACKS[self._key]
        replaced = _REPLACED.pop(self)
        if self.cls is None:
            getattr(self._module(), self.method).__code__ = replaced[self.method]
            return
        owner = getattr(self._module(), self.cls)
        for name, original in replaced.items():
            if original is None:
                delattr(owner, name)
            else:
                setattr(owner, name, original)

    # ── the upstream form ─────────────────────────────────────────────

    def unified_diff(self) -> str:
        """The fix as a unified diff against the installed module."""
        why = self.refusal()
        if why is not None:
            raise FixRefused(why)
        _, before = self._installed_source()
        after = self.edit_module(before)
        return "".join(
            difflib.unified_diff(
                before.splitlines(keepends=True),
                after.splitlines(keepends=True),
                fromfile=f"a/{self.path}",
                tofile=f"b/{self.path}",
            ),
        )


def _function_code(module, original, source: str):
    """The code of the module function ``original`` compiled from
    ``source`` (its patched text) in the module's namespace, without its
    decorators (they ran when the module was loaded: a route decorator run
    again would register a second route)."""
    tree = ast.parse(source)
    functions = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if len(tree.body) != 1 or len(functions) != 1:
        raise FixRefused(f"a patch of the function {original.__name__} must leave one function")
    functions[0].decorator_list = []
    # Keep tracebacks pointing at the right lines of the module (the
    # source starts at the first decorator, as the code object does).
    ast.increment_lineno(tree, original.__code__.co_firstlineno - 1)
    namespace = dict(vars(module))
    exec(compile(tree, inspect.getsourcefile(module), "exec"), namespace)  # pylint: disable=exec-used
    return namespace[original.__name__].__code__
