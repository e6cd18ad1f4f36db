"""The layout's rules (docs/architecture.md): parts depend on the infrastructure (core/, figures, explore) and the
shared packages only, the shared packages on core/ and each other, core/ on nothing of ours, figures on core/,
explore on core/ and figures, nothing the notebooks import on the tools around them (the pipeline, the book), and
the import graph has no cycle."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter

import pytest

from brorl_lib.core.paths import LIB_DIR

PARTS = ("theory", "simulator", "paper", "rlvr", "verl_recipe", "evaluation")
# Modules any part may import besides core/: one source each for a fact several parts need.
SHARED = (
    "brorl_lib.tasks",
    "brorl_lib.models",
    "brorl_lib.facts.theorem",
    "brorl_lib.facts.reported",
    "brorl_lib.facts.setup",
)
ALSO_ALLOWED = {"verl_recipe": ("brorl_lib.evaluation",)}  # notebook 05 turns evaluations into tables
TOOLS = ("brorl_lib.pipeline", "brorl_lib.book")  # run and show the notebooks; no notebook imports them


def _module_name(path) -> str:
    rel = path.relative_to(LIB_DIR.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _imports() -> dict[str, set[str]]:
    """brorl_lib module -> the brorl_lib modules it imports (anywhere in the file)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(LIB_DIR.rglob("*.py")):
        name = _module_name(path)
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("brorl_lib"):
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    is_module = (LIB_DIR.parent / full.replace(".", "/")).with_suffix(".py").exists() or (
                        LIB_DIR.parent / full.replace(".", "/") / "__init__.py"
                    ).exists()
                    found.add(full if is_module else node.module)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("brorl_lib"))
        graph[name] = found - {name}
    return graph


def _part(module: str) -> str | None:
    bits = module.split(".")
    return bits[1] if len(bits) > 1 and bits[1] in PARTS else None


def test_parts_import_only_core_shared_modules_and_themselves():
    offenders = []
    for module, imported in _imports().items():
        part = _part(module)
        for target in imported:
            target_part = _part(target)
            if target_part is None or target_part == part:
                continue
            allowed = SHARED + ALSO_ALLOWED.get(part or "", ())
            if not any(target == a or target.startswith(a + ".") for a in allowed):
                offenders.append(f"{module} imports {target}")
    assert not offenders, "cross-part imports outside the shared modules:\n" + "\n".join(offenders)


def test_shared_packages_import_only_core_and_each_other():
    offenders = [
        f"{m} imports {t}"
        for m, ts in _imports().items()
        if m.startswith(SHARED)
        for t in ts
        if not t.startswith(("brorl_lib.core.", *SHARED))
    ]
    assert not offenders, "\n".join(offenders)


# infrastructure package -> what of ours it may import besides itself
INFRASTRUCTURE = {
    "brorl_lib.core": (),
    "brorl_lib.figures": ("brorl_lib.core",),
    "brorl_lib.explore": ("brorl_lib.core", "brorl_lib.figures"),
}


@pytest.mark.parametrize("package", INFRASTRUCTURE)
def test_infrastructure_imports_no_part_and_only_the_layers_below(package):
    graph = _imports()
    assert any(m.startswith(package + ".") for m in graph)  # the rule has subjects
    allowed = (package, *INFRASTRUCTURE[package])
    offenders = [
        f"{m} imports {t}"
        for m, ts in graph.items()
        if m.startswith(package + ".")
        for t in ts
        if not any(t == a or t.startswith(a + ".") for a in allowed)
    ]
    # the registry names each notebook's config class as a string, never by import
    assert not offenders, "\n".join(offenders)


def test_nothing_the_notebooks_import_imports_the_tools():
    graph = _imports()
    assert {"brorl_lib.pipeline.runner", "brorl_lib.book.build"} <= set(graph)  # the rule below has subjects
    offenders = [
        f"{m} imports {t}"
        for m, ts in graph.items()
        if not m.startswith(TOOLS) and m != "brorl_lib.__main__"
        for t in ts
        if t.startswith(TOOLS)
    ]
    assert not offenders, "\n".join(offenders)


def test_import_graph_has_no_cycle():
    imports = _imports()  # parsed once: every module's source is read
    graph = {m: {t for t in ts if t in imports} for m, ts in imports.items()}
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as err:  # pragma: no cover - the failure message is the point
        pytest.fail(f"import cycle: {err.args[1]}")


def test_architecture_map_names_functions_that_exist():
    """Every `part.module.function` (and the bare names after it in the same cell) in docs/architecture.md's
    figure map resolves to an attribute of brorl_lib."""
    import importlib
    import re

    text = (LIB_DIR.parent / "docs" / "architecture.md").read_text()
    rows = [line for line in text.split("## Figure → notebook → function")[1].splitlines() if line.startswith("| `")]
    missing, checked = [], 0
    for row in rows:
        for cell in row.split("|")[3:5]:
            names = re.findall(r"`([A-Za-z_][\w.]*)`", cell)
            module = None
            for name in names:
                if "." in name:
                    module_name, _, attr = name.rpartition(".")
                    module = importlib.import_module(f"brorl_lib.{module_name}")
                else:
                    attr = name
                if module is None:
                    continue
                checked += 1
                if not hasattr(module, attr):
                    missing.append(f"{module.__name__}.{attr}")
    assert checked > 40 and not missing, missing
