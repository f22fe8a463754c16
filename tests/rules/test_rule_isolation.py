"""Rules never import each other: shared code lives in ``advisor_rules._common`` or ``advisor_core``."""

from __future__ import annotations

import ast
from pathlib import Path

import advisor_rules

RULES_DIR = Path(advisor_rules.__file__).parent


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names


def test_rule_modules_import_no_other_rule_module() -> None:
    offenders = {}
    for path in sorted(RULES_DIR.glob("*.py")):
        if path.name in ("__init__.py", "_common.py"):
            continue
        bad = sorted(m for m in _imports(path) if m.startswith("advisor_rules.") and m != "advisor_rules._common")
        if bad:
            offenders[path.name] = bad
    assert offenders == {}


def test_common_imports_no_rule_module() -> None:
    assert sorted(m for m in _imports(RULES_DIR / "_common.py") if m.startswith("advisor_rules.")) == []
