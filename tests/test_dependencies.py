"""Every package our code imports is declared in pyproject.toml: a top-level import of a
third-party module must be provided by a distribution named in [project.dependencies]
(or brought by an extra we name there, e.g. psycopg[pool] -> psycopg-pool), not merely
installed because something else depends on it. bench/ may also use the dev extra, and
its peers' modules the peers' own environment (the allow-list below)."""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("awaken_site", "runs", "agents", "common")
FIRST_PARTY = {*PRODUCT, "bench", "tests", "manage"}

# The peers' benchmarks run in their own environment (.venv-peers, installed from
# bench/peers/requirements.txt by `make bench-peers`), never in the project's: these
# modules, and only these, may import the peers' packages, which pyproject does not declare.
PEERS_ALLOWED = {
    "bench/peers/dbos_bench.py": {"dbos"},
    "bench/peers/dbos_model_bench.py": {"dbos"},
    "bench/peers/langgraph/graph.py": {"langgraph", "langchain_core"},
    "bench/peers/langgraph/model_graph.py": {"langgraph", "langchain_core", "langchain_openai"},
}


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _declared(requirements: Iterable[str]) -> set[str]:
    """Canonical names of the requirements and of what the extras they name bring."""
    names: set[str] = set()
    for line in requirements:
        requirement = Requirement(line)
        names.add(canonicalize_name(requirement.name))
        for extra in requirement.extras:
            for brought in metadata.requires(requirement.name) or []:
                sub = Requirement(brought)
                if sub.marker is not None and sub.marker.evaluate({"extra": extra}):
                    names.add(canonicalize_name(sub.name))
    return names


def _modules(*roots: str) -> Iterator[Path]:
    for root in roots:
        path = ROOT / root
        yield from sorted(path.rglob("*.py")) if path.is_dir() else [path]


def top_level_imports(path: Path) -> set[str]:
    """The top-level names of the absolute imports in `path` (at any depth in it)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return {name for name in names if name not in sys.stdlib_module_names} - FIRST_PARTY


def undeclared(paths: Iterable[Path], declared: set[str], root: Path = ROOT) -> list[str]:
    providers = metadata.packages_distributions()
    missing = []
    for path in paths:
        relative = path.relative_to(root).as_posix()
        allowed = PEERS_ALLOWED.get(relative, set())
        for name in sorted(top_level_imports(path) - allowed):
            dists = {canonicalize_name(dist) for dist in providers.get(name, [])}
            if not dists & declared:
                missing.append(f"{relative}: {name} (installed by {sorted(dists) or 'nothing'})")
    return missing


def test_the_product_imports_only_declared_packages():
    declared = _declared(_pyproject()["project"]["dependencies"])
    assert undeclared(_modules(*PRODUCT, "manage.py"), declared) == []


def test_the_benchmarks_import_only_declared_packages_or_their_peers():
    project = _pyproject()["project"]
    declared = _declared([*project["dependencies"], *project["optional-dependencies"]["dev"]])
    assert undeclared(_modules("bench"), declared) == []


def test_the_check_catches_an_undeclared_import(tmp_path):
    """The check itself can fail: PyJWT is installed, but not declared here."""
    module = tmp_path / "module.py"
    module.write_text("import os\nimport jwt\nfrom django.db import models\nfrom . import x\n")
    assert top_level_imports(module) == {"jwt", "django"}
    assert undeclared([module], _declared(["django>=5.2"]), tmp_path) == [
        "module.py: jwt (installed by ['pyjwt'])"
    ]
    assert undeclared([module], _declared(["django>=5.2", "PyJWT>=2"]), tmp_path) == []
    # an extra we name declares what it brings: psycopg[pool] -> psycopg-pool
    module.write_text("import psycopg_pool\n")
    assert undeclared([module], _declared(["psycopg>=3"]), tmp_path) != []
    assert undeclared([module], _declared(["psycopg[pool]>=3"]), tmp_path) == []


def test_the_peers_allow_list_names_existing_modules_that_use_it():
    for relative, names in PEERS_ALLOWED.items():
        path = ROOT / relative
        assert path.exists(), relative
        assert names <= top_level_imports(path), relative
