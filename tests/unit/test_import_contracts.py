"""The design's import rules hold: the core is pure (standard library only) and layered, and
nothing in production imports the lab or the demo (contracts in pyproject.toml)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
CORE = SRC / "trainmedic" / "core"
HEAVY = ("torch", "fastapi", "sqlalchemy", "uvicorn", "httpx", "prometheus_client", "pydantic")


def _imported_roots(path: Path) -> set[str]:
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module)
    return roots


def test_core_imports_only_the_standard_library_and_itself() -> None:
    offenders = []
    for path in sorted(CORE.rglob("*.py")):
        for module in _imported_roots(path):
            top = module.split(".")[0]
            inside = module == "trainmedic.core" or module.startswith("trainmedic.core.")
            if top == "__future__" or inside or top in sys.stdlib_module_names:
                continue
            offenders.append(f"{path.relative_to(SRC)}: {module}")
    assert offenders == []


def test_import_linter_contracts_are_kept() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run(
        [str(lint), "--config", str(SRC.parent / "pyproject.toml")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=SRC.parent,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


def test_the_engine_and_policy_load_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "import trainmedic.core.engine.engine, trainmedic.core.policy.decide\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
