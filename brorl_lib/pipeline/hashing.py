"""Input hash of a notebook run: its source (no outputs), the brorl_lib modules it imports
(transitively), its parameters and the data files it reads."""

from __future__ import annotations

import ast
import hashlib
import json
import subprocess
from pathlib import Path

import nbformat

from brorl_lib.core.paths import LIB_DIR, REPO_ROOT
from brorl_lib.core.registry import NotebookSpec

PACKAGE = LIB_DIR.name


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    return sha256_bytes(Path(path).read_bytes())


def canonical_json(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()


def notebook_code(path: Path) -> list[tuple[str, str]]:
    """(cell type, source) of every cell; outputs, execution counts and metadata are ignored."""
    nb = nbformat.read(path, as_version=4)
    return [(c.cell_type, c.source) for c in nb.cells if "injected-parameters" not in c.metadata.get("tags", [])]


def _python_source(source: str) -> str:
    """Drop IPython magics and shell lines so the cell parses as Python."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())


def _module_file(module: str) -> Path | None:
    parts = module.split(".")
    if parts[0] != PACKAGE:
        return None
    base = REPO_ROOT.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imported_modules(tree: ast.AST, current: str | None = None) -> set[str]:
    """Fully qualified brorl_lib modules named by the imports in ``tree``."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level and current:
                pkg = current.split(".")[: -node.level]
                base = ".".join(pkg + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if _module_file(m)}


def library_files(code_cells: list[str]) -> list[Path]:
    """brorl_lib source files the given code reaches by imports, plus the package __init__."""
    todo = set()
    for src in code_cells:
        try:
            todo |= _imported_modules(ast.parse(_python_source(src)))
        except SyntaxError:
            continue
    seen: set[str] = set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _module_file(module)
        current = module if path.name != "__init__.py" else f"{module}.__init__"
        todo |= _imported_modules(ast.parse(path.read_text()), current)
        # a submodule also runs its parent packages' __init__
        todo |= {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
    return sorted({_module_file(m) for m in seen} | {LIB_DIR / "__init__.py"})


def git_ignored(paths: list[Path]) -> set[Path]:
    """The files among ``paths`` that git ignores (e.g. a run's console.log): a clone lacks them, so they are no
    input. None when the repository is not a git work tree (or git is missing)."""
    paths = [p for p in paths if p.is_relative_to(REPO_ROOT)]
    if not paths or not (REPO_ROOT / ".git").exists():
        return set()
    names = "\0".join(str(p.relative_to(REPO_ROOT)) for p in paths)
    try:
        done = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "check-ignore", "--stdin", "-z"],
            input=names,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except (OSError, subprocess.SubprocessError):
        return set()
    if done.returncode not in (0, 1):  # 1: none ignored; anything else: not a work tree
        return set()
    return {REPO_ROOT / name for name in done.stdout.split("\0") if name}


def data_files(spec: NotebookSpec, root: Path = REPO_ROOT) -> list[Path]:
    """The files under ``root`` the notebook's data patterns match, less those git ignores (a clone has exactly
    these)."""
    found = {p for pattern in spec.data_files for p in root.glob(pattern) if p.is_file()}
    return sorted(found - git_ignored(sorted(found)))


def data_hash(spec: NotebookSpec, root: Path = REPO_ROOT) -> str:
    """One hash of every data file the notebook declares: each one's path (relative to ``root``) and content."""
    return sha256_bytes(canonical_json({str(p.relative_to(root)): sha256_file(p) for p in data_files(spec, root)}))


def input_hashes(spec: NotebookSpec, parameters: dict) -> dict[str, str]:
    """Component hashes and their combination under ``"input"``."""
    cells = notebook_code(spec.path)
    lib = library_files([src for kind, src in cells if kind == "code"])
    parts = {
        "notebook": sha256_bytes(canonical_json(cells)),
        "library": sha256_bytes(canonical_json({str(p.relative_to(REPO_ROOT)): sha256_file(p) for p in lib})),
        "parameters": sha256_bytes(canonical_json(parameters)),
        "data": data_hash(spec),
    }
    parts["input"] = sha256_bytes(canonical_json(parts))
    return parts
