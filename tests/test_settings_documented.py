"""Every environment variable the code reads is documented twice: in `.env.example` and in
the README's settings table (the table under "## Settings"). Read means a call of one of
awaken_site/env.py's readers (`env_int("NAME", …)`), or `os.environ.get("NAME")`,
`os.environ["NAME"]`, `os.getenv("NAME")` or `environ.get("NAME")` on a mapping passed in,
with the name written out, anywhere in the product's packages."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("awaken_site", "runs", "agents", "common")
READERS = {"env_str", "env_bool", "env_int", "env_float", "env_list", "env_bool_or_networks"}
NAME = re.compile(r"[A-Z][A-Z0-9_]*")


def _literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value if NAME.fullmatch(node.value) else None
    return None


def _is_environ(node: ast.AST) -> bool:
    """`os.environ`, or a mapping named `environ` (handed the environment)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ"
    return isinstance(node, ast.Name) and node.id == "environ"


def _read_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        return _literal(node.slice)
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    if isinstance(func, ast.Name) and func.id in READERS:
        return _literal(node.args[0])
    if isinstance(func, ast.Attribute):
        if func.attr == "get" and _is_environ(func.value):
            return _literal(node.args[0])
        if func.attr == "getenv" and isinstance(func.value, ast.Name) and func.value.id == "os":
            return _literal(node.args[0])
    return None


def variables_read(paths: Iterable[Path]) -> dict[str, str]:
    """Each variable read, with the first module that reads it."""
    found: dict[str, str] = {}
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            name = _read_name(node)
            if name is not None:
                found.setdefault(name, path.relative_to(ROOT).as_posix())
    return found


def in_env_example(text: str) -> set[str]:
    """Names set in `.env.example`, commented out (`# NAME=value`) or not."""
    return set(re.findall(r"^#?\s*([A-Z][A-Z0-9_]*)=", text, flags=re.MULTILINE))


def in_settings_table(readme: str) -> set[str]:
    """The names in the first column of the table under "## Settings"."""
    section = readme.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for line in section.splitlines():
        if line.startswith("|"):
            first = line.split("|")[1]
            names.update(re.findall(r"`([A-Z][A-Z0-9_]*)`", first))
    return names


def _product_modules() -> list[Path]:
    return [
        path
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def test_every_setting_read_is_in_env_example_and_the_readme_table():
    read = variables_read(_product_modules())
    assert len(read) > 60, sorted(read)  # the scan finds the settings
    example = in_env_example((ROOT / ".env.example").read_text())
    table = in_settings_table((ROOT / "README.md").read_text())
    missing = [
        f"{name} (read in {where}):"
        + (" not in .env.example" if name not in example else "")
        + (" not in the README's settings table" if name not in table else "")
        for name, where in sorted(read.items())
        if name not in example or name not in table
    ]
    assert missing == []


def test_the_scan_finds_each_way_of_reading(tmp_path):
    module = ROOT / "tests" / "_settings_scan_sample.py"
    try:
        module.write_text(
            "import os\n"
            'A = env_int("ONE", 1, minimum=0)\n'
            'B = os.environ.get("TWO", "") or os.environ["THREE"]\n'
            'C = os.getenv("FOUR")\n'
            'def f(environ): return environ.get("FIVE", "")\n'
            'os.environ.setdefault("NOT_READ", "x")\n'
            "D = os.environ.get(name)\n"
            'E = settings.get("lower")\n'
        )
        assert set(variables_read([module])) == {"ONE", "TWO", "THREE", "FOUR", "FIVE"}
    finally:
        module.unlink()


def test_the_documents_are_read_as_written():
    example = "# --- a section ---\n# ONE=1   # comment\nTWO=\n#   THREE=x\nnot_a_name=1\n"
    assert in_env_example(example) == {"ONE", "TWO", "THREE"}
    readme = (
        "## Settings\n\nIntro.\n\n| variable | default | meaning |\n|---|---|---|\n"
        "| `ONE`, `TWO` | `1` | mentions `NOT_FIRST_COLUMN` |\n\n## Next\n\n| `AFTER` | x | y |\n"
    )
    assert in_settings_table("# Title\n" + readme) == {"ONE", "TWO"}
