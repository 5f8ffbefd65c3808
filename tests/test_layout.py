"""The package layout holds: no import cycle among the modules of framework/, pluginhost/, clients/ and
tools/, counting every import statement wherever it is (module level, inside a function, under
``TYPE_CHECKING``); the product packages never import the tools; every exception the project defines
derives from ``OutriggerError``; no hand-written module over 700 lines and no function over 80."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("framework", "pluginhost", "clients", "tools")
#: What a live cluster needs; :data:`TOOLS` may import these, never the other way round.
PRODUCT = ("framework", "pluginhost", "clients")
TOOLS = ("tools",)

# Cycles tolerated for now, each a sorted list of module names (none: every cycle fails the test).
KNOWN_CYCLES: list[list[str]] = []


def _modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of :data:`PACKAGES` under ``root``."""
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


def _imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The dotted names one import statement in ``module`` names (``from X import y``: ``X.y`` and ``X``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    return [f"{source}.{alias.name}" for alias in node.names] + [source]


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the project modules it imports anywhere in its source."""
    modules = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = _imported(node, module, is_package)
            if isinstance(node, ast.ImportFrom):
                # ``from pkg import sub``: the submodule when there is one, else the package itself.
                subs = [n for n in names[:-1] if n in modules]
                names = subs if len(subs) == len(names) - 1 else [*subs, names[-1]]
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name and name != module:
                    graph[module].add(name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return sorted(found)


def test_no_import_cycle_among_project_modules() -> None:
    assert cycles(import_graph(ROOT)) == []


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.mark.parametrize(
    ("files", "want"),
    [
        pytest.param({"framework/a.py": "from . import b\n", "framework/b.py": "x = 1\n"}, [], id="no-cycle"),
        pytest.param(
            {"framework/a.py": "from .b import x\n", "framework/b.py": "def f():\n    from .a import y\n"},
            [["framework.a", "framework.b"]],
            id="deferred-import-in-a-function",
        ),
        pytest.param(
            {
                "framework/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .b import B\n",
                "framework/b.py": "import framework.a\n",
            },
            [["framework.a", "framework.b"]],
            id="type-checking-import",
        ),
        pytest.param(
            {
                "framework/__init__.py": "",
                "framework/sub/__init__.py": "from .c import C\n",
                "framework/sub/c.py": "from ..d import D\n",
                "framework/d.py": "from .sub import c\n",
            },
            [["framework.d", "framework.sub.c"]],
            id="relative-imports-across-packages",
        ),
        pytest.param(
            {"pluginhost/p.py": "from framework import q\n", "framework/q.py": "import pluginhost.p as p\n"},
            [["framework.q", "pluginhost.p"]],
            id="across-the-two-packages",
        ),
    ],
)
def test_cycles_are_found_wherever_the_import_is(tmp_path: Path, files: dict[str, str], want: list[list[str]]) -> None:
    _write(tmp_path, files)
    assert cycles(import_graph(tmp_path)) == want


def _exception_classes(root: Path) -> list[tuple[str, str]]:
    """(module, class) of every public class of the project whose bases name an error or exception."""
    out = []
    for module, path in _modules(root).items():
        if "._gen" in module or module.startswith("pluginhost._gen"):
            continue
        for node in ast.parse(path.read_text()).body:
            if not isinstance(node, ast.ClassDef) or node.name.startswith("_"):
                continue
            bases = [ast.unparse(b) for b in node.bases]
            if any(b.endswith(("Error", "Exception", "Unreachable")) for b in bases):
                out.append((module, node.name))
    return out


def test_every_project_exception_derives_from_outrigger_error() -> None:
    import importlib

    from pluginhost.errors import OutriggerError

    found = _exception_classes(ROOT)
    assert len(found) >= 30  # the walk sees the project's exceptions (not an empty list)
    outside = []
    for module, name in found:
        cls = getattr(importlib.import_module(module), name)
        if issubclass(cls, BaseException) and not issubclass(cls, OutriggerError):
            outside.append(f"{module}.{name}")
    assert outside == []


def test_the_documented_exception_tree_names_every_exception() -> None:
    import re

    import pluginhost.errors

    documented = set(re.findall(r"[├└]── (\w+) ─", pluginhost.errors.__doc__ or ""))
    defined = {name for _, name in _exception_classes(ROOT)} - {"OutriggerError"}
    assert sorted(defined - documented) == [] and sorted(documented - defined) == []


# What each part may not import (docs/architecture.md, "What each package may import"): the SDK stands
# alone, clients speak only the contract, the core knows no remote wing, no server and no observer, and
# the remote wing is a plugin provider the core calls, never a caller of the scheduler or its servers.
# framework.observe holds both: its tracing and metrics are observers the remote wing feeds too, the rest
# serves (the secure port, its HTTP endpoints) or wraps the scheduler (instrument).
CORE = ("framework.runtime", "framework.outcomes", "framework.transformers", "framework.waiting", "framework.hooks")
SERVERS = ("framework.scheduler", "framework.service", "framework.cli", "framework.kube",
           "framework.observe.httpserver", "framework.observe.instrument",
           *(f"framework.observe.{m}" for m in ("auth", "certs", "configz", "delegated", "health", "serving")))
FORBIDDEN: list[tuple[tuple[str, ...], tuple[str, ...]]] = [
    (("pluginhost",), ("framework", "clients")),
    (("clients",), ("framework",)),
    (CORE, ("framework.remote", "framework.observe", *SERVERS)),
    (("framework.remote",), ("framework.runtime", *SERVERS)),
]


def _under(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def wrong_imports(graph: dict[str, set[str]], rules: list[tuple[tuple[str, ...], tuple[str, ...]]]) -> list[str]:
    """``module -> target`` for each import ``graph`` has that one of ``rules`` (importers, forbidden) forbids."""
    return sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        for parts, forbidden in rules
        if _under(module, parts)
        for target in targets
        if _under(target, forbidden)
    )


def test_each_part_imports_only_what_it_may() -> None:
    assert wrong_imports(import_graph(ROOT), FORBIDDEN) == []


def test_no_product_module_imports_the_tools() -> None:
    graph = import_graph(ROOT)
    assert len([m for m in graph if _under(m, TOOLS)]) >= 20  # the walk sees the tools (not an empty list)
    assert wrong_imports(graph, [(PRODUCT, TOOLS)]) == []


@pytest.mark.parametrize(
    ("files", "want"),
    [
        pytest.param({"tools/t.py": "from framework import k\n", "framework/k.py": "x = 1\n"}, [],
                     id="a-tool-imports-the-product"),
        pytest.param({"tools/t.py": "x = 1\n", "framework/k.py": "import tools.t\n"}, ["framework.k -> tools.t"],
                     id="product-imports-a-tool"),
        pytest.param({"tools/__init__.py": "", "tools/t.py": "x = 1\n",
                      "clients/c.py": "def f():\n    from tools import t\n"}, ["clients.c -> tools.t"],
                     id="deferred-import-of-a-tool"),
        pytest.param({"tools/__init__.py": "", "tools/t.py": "x = 1\n",
                      "pluginhost/__init__.py": "", "pluginhost/p.py": "from ..tools import t\n"},
                     ["pluginhost.p -> tools.t"], id="relative-import-of-a-tool"),
    ],
)
def test_product_imports_of_the_tools_are_found(tmp_path: Path, files: dict[str, str], want: list[str]) -> None:
    _write(tmp_path, files)
    assert wrong_imports(import_graph(tmp_path), [(PRODUCT, TOOLS)]) == want


# The size a newcomer can read in one sitting (docs/architecture.md); generated code aside.
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 80


def oversized(root: Path) -> list[str]:
    """``path: N lines`` for each module of :data:`PACKAGES` over :data:`MAX_MODULE_LINES`, and
    ``path:line name: N lines`` for each function over :data:`MAX_FUNCTION_LINES` (its ``def`` line to
    its last, decorators not counted)."""
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "_gen" in path.parts:
                continue
            text = path.read_text()
            name = path.relative_to(root).as_posix()
            lines = text.count("\n")
            if lines > MAX_MODULE_LINES:
                found.append(f"{name}: {lines} lines")
            for node in ast.walk(ast.parse(text, name)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > MAX_FUNCTION_LINES:
                        found.append(f"{name}:{node.lineno} {node.name}: {length} lines")
    return found


def test_no_module_or_function_is_over_its_size() -> None:
    assert oversized(ROOT) == []


def _function(lines: int) -> str:
    """A function of exactly ``lines`` lines."""
    return "def f():\n" + "    x = 1\n" * (lines - 1)


@pytest.mark.parametrize(
    ("files", "want"),
    [
        pytest.param({"framework/a.py": _function(80)}, [], id="function-at-the-limit"),
        pytest.param({"framework/a.py": _function(81)}, ["framework/a.py:1 f: 81 lines"], id="function-over"),
        pytest.param(
            {"pluginhost/b.py": "class C:\n    async " + _function(90).replace("\n    ", "\n        ")},
            ["pluginhost/b.py:2 f: 90 lines"],
            id="async-method-over",
        ),
        pytest.param({"clients/c.py": "x = 1\n" * 700}, [], id="module-at-the-limit"),
        pytest.param({"clients/c.py": "x = 1\n" * 701}, ["clients/c.py: 701 lines"], id="module-over"),
        pytest.param({"pluginhost/_gen/d.py": "x = 1\n" * 900}, [], id="generated-code-aside"),
    ],
)
def test_sizes_are_measured_as_documented(tmp_path: Path, files: dict[str, str], want: list[str]) -> None:
    _write(tmp_path, files)
    assert oversized(tmp_path) == want
