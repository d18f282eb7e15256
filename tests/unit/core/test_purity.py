"""controller/core imports only the standard library, pydantic, contracts and itself.

The layering between packages is import-linter's job (``make lint``, pyproject.toml); this test
keeps the stricter rule for the core: an allow-list, so a new third-party import fails here.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[3] / "controller" / "core"
ALLOWED = {"pydantic", "pydantic_core", "typing_extensions", "controller", "contracts"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_core_imports_only_stdlib_and_pydantic() -> None:
    offenders = {}
    for path in sorted(CORE.rglob("*.py")):
        for name in _imports(path):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top in ALLOWED:
                if top == "controller" and not name.startswith("controller.core"):
                    offenders.setdefault(path.name, []).append(name)
                continue
            offenders.setdefault(path.name, []).append(name)
    assert offenders == {}, f"controller/core must stay pure: {offenders}"


def test_core_does_not_read_the_clock() -> None:
    """Time is a parameter: no time.time(), datetime.now() or monotonic() in the core."""
    calls = []
    for path in sorted(CORE.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        for bad in ("time.time(", "datetime.now(", "monotonic(", "utcnow("):
            if bad in text:
                calls.append(f"{path.name}: {bad}")
    assert calls == []
