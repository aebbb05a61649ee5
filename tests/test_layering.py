"""The shape of the code: imports run one way without cycles, modules and functions stay a
readable size, and the import contracts catch what they are there to catch.

The import graph is built from the source with `ast`, counting every import: at module
level, inside functions, under `if TYPE_CHECKING`. import-linter (`lint-imports`, run by
`make lint`) checks the layers; these tests add what it does not: cycles anywhere among
first-party modules, and the size limits."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("awaken_site", "runs", "agents", "common", "bench")
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources(with_migrations: bool = True) -> Iterator[Path]:
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if with_migrations or "migrations" not in path.parts:
                yield path


def _imported_names(path: Path, module: str) -> Iterator[str]:
    """Every module name an import statement of `path` may refer to."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph() -> dict[str, set[str]]:
    """First-party module -> the first-party modules it imports (anywhere in it)."""
    paths = {_module_name(path): path for path in _sources()}

    def known(name: str) -> str | None:
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        targets = {known(name) for name in _imported_names(path, module)}
        graph[module] = {target for target in targets if target and target != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
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

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(graph)))
    try:
        for node in sorted(graph):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_the_cycle_finder_finds_a_cycle_through_a_function_level_import(tmp_path):
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from a import x\n")
    graph = {
        name: {n for n in _imported_names(tmp_path / f"{name}.py", name) if n in {"a", "b"}}
        for name in ("a", "b")
    }
    assert cycles(graph) == [["a", "b"]]


def test_no_import_cycle_among_first_party_modules():
    assert cycles(import_graph()) == []


def test_agents_and_common_never_import_runs_beyond_the_runtime():
    graph = import_graph()
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith(("agents", "common"))
        for target in targets
        if (target.startswith("runs") and not target.startswith("runs.runtime"))
        or (module.startswith("common") and target.startswith("agents"))
    )
    assert wrong == []


def test_the_runtime_imports_nothing_first_party_outside_itself():
    graph = import_graph()
    wrong = sorted(
        f"{module} -> {target}"
        for module, targets in graph.items()
        if module.startswith("runs.runtime")
        for target in targets
        if not target.startswith("runs.runtime") and target != "runs"
    )
    assert wrong == []


def test_the_runtime_contract_forbids_every_other_part_of_runs():
    """import-linter's forbidden contract lists the runs modules one by one: a module added
    to runs must be added there too, or the runtime could import it unseen."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c.get("source_modules") == ["runs.runtime"]]
    siblings = {
        f"runs.{path.stem if path.is_file() else path.name}"
        for path in (ROOT / "runs").iterdir()
        if (path.suffix == ".py" and path.name != "__init__.py")
        or (path.is_dir() and (path / "__init__.py").exists())
    } - {"runs.runtime"}
    assert siblings - set(contract["forbidden_modules"]) == set()


def _too_long_functions(tree: ast.AST) -> Iterator[tuple[str, int]]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > MAX_FUNCTION_LINES:
                yield f"{node.name} (line {node.lineno})", length


def test_modules_and_functions_stay_a_readable_size():
    too_big = []
    for path in _sources(with_migrations=False):
        source = path.read_text()
        name = path.relative_to(ROOT)
        lines = source.count("\n")
        if lines > MAX_MODULE_LINES:
            too_big.append(f"{name}: {lines} lines")
        for function, length in _too_long_functions(ast.parse(source, str(path))):
            too_big.append(f"{name}: {function} is {length} lines")
    assert too_big == []


# --- the import contracts fail where they should ------------------------------------------------


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory) -> Path:
    """The packages and the contracts, copied: a planted import must not touch the tree."""
    copy = tmp_path_factory.mktemp("layers")
    for package in ("awaken_site", "runs", "agents", "common"):
        shutil.copytree(
            ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    return subprocess.run(
        [str(lint_imports), "--no-cache"],
        cwd=tree,
        env={"PYTHONPATH": str(tree), "PATH": str(lint_imports.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _lint_imports_with(tree: Path, module: str, source: str) -> subprocess.CompletedProcess[str]:
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(source)
    try:
        return _lint_imports(tree)
    finally:
        path.unlink()


def test_the_contracts_hold_on_the_tree(tree_copy):
    result = _lint_imports(tree_copy)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("module", "source", "says"),
    [
        ("agents.planted", "from runs.models import Run\n", "agents is not allowed to import runs"),
        (
            "agents.planted",
            "def later():\n    from runs.services import runs\n",
            "agents is not allowed to import runs",
        ),
        ("common.planted", "import agents.models\n", "common is not allowed to import agents"),
        (
            "runs.services.planted",
            "from runs.replays.services import forks\n",
            "runs.services is not allowed to import runs.replays",
        ),
        ("runs.runtime.planted", "import django.db\n", "runs.runtime is not allowed to import"),
        (
            "runs.runtime.planted",
            "from runs import selectors\n",
            "runs.runtime is not allowed to import runs.selectors",
        ),
    ],
)
def test_a_planted_import_against_the_layers_breaks_a_contract(tree_copy, module, source, says):
    result = _lint_imports_with(tree_copy, module, source)
    assert result.returncode != 0
    assert says in result.stdout, result.stdout


def test_a_web_process_knows_the_tasks_the_services_enqueue_by_name():
    """Services look tasks up by name (the tasks module imports them, not the other way
    round): a process that never imported `runs.tasks` itself must still know them."""
    script = (
        "import django; django.setup()\n"
        "from celery import current_app\n"
        "print(sorted(n for n in current_app.tasks if n.startswith('runs.')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "awaken_site.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "'runs.advance_run'" in result.stdout
    assert "'runs.abort_remote'" in result.stdout
    # operations' (runs.operations.tasks), enqueued by name and sent by beat
    assert "'runs.deliver_notifications'" in result.stdout
    assert "'runs.fire_schedules'" in result.stdout
    assert "'runs.prune_old_runs'" in result.stdout
