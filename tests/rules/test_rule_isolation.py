"""Rules never import each other: shared code lives in ``advisor_rules._common`` or ``advisor_core``.

A rule is a module ``advisor_rules/X.py`` or a package ``advisor_rules/X/``. Every module of
rule X may import ``advisor_rules.X`` and its submodules, and ``advisor_rules._common`` (the
re-exporting package, not its submodules) — no other ``advisor_rules`` module. The modules of
``advisor_rules._common`` import only each other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import advisor_rules

RULES_DIR = Path(advisor_rules.__file__).parent
ROOT = "advisor_rules"
COMMON = f"{ROOT}._common"


def _module_name(path: Path, root_dir: Path) -> str:
    """``<root_dir>/cm001_comm/fusion.py`` → ``advisor_rules.cm001_comm.fusion`` (a package's ``__init__`` → the package)."""
    parts = path.relative_to(root_dir).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join((ROOT, *parts))


def _is_module(name: str, root_dir: Path) -> bool:
    """Whether ``advisor_rules.a.b`` names a module or package under ``root_dir``."""
    rel = Path(*name.split(".")[1:]) if "." in name else Path()
    return (root_dir / rel).with_suffix(".py").is_file() or (root_dir / rel / "__init__.py").is_file()


def _imports(path: Path, root_dir: Path = RULES_DIR) -> set[str]:
    """Absolute names of the modules ``path`` imports.

    Relative imports are resolved against the module's package; ``from P import m`` counts
    as importing ``P.m`` when ``m`` is a module of ``P`` (``from advisor_rules import x``).
    """
    here = _module_name(path, root_dir)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names.add(module)
            if module == ROOT or module.startswith(ROOT + "."):
                names.update(f"{module}.{a.name}" for a in node.names if _is_module(f"{module}.{a.name}", root_dir))
    return names


def _rule_files(root_dir: Path = RULES_DIR) -> dict[str, list[Path]]:
    """Rule name → its files: ``X.py`` alone, or every module under the package ``X/``."""
    units: dict[str, list[Path]] = {}
    for entry in sorted(root_dir.iterdir()):
        if entry.name.startswith(("_", ".")):
            continue  # __init__.py (the registry), _common, __pycache__
        if entry.is_dir():
            assert (entry / "__init__.py").is_file(), f"{entry.name}/ holds rule code but is not a package"
            units[entry.name] = sorted(entry.rglob("*.py"))
        elif entry.suffix == ".py":
            units[entry.stem] = [entry]
    return units


def _offenders(units: dict[str, list[Path]], root_dir: Path) -> dict[str, list[str]]:
    out = {}
    for rule, files in units.items():
        own = f"{ROOT}.{rule}"
        for path in files:
            bad = sorted(
                m for m in _imports(path, root_dir)
                if (m == ROOT or m.startswith(ROOT + ".")) and m != COMMON and m != own and not m.startswith(own + ".")
            )
            if bad:
                out[str(path.relative_to(root_dir))] = bad
    return out


def test_rule_modules_import_no_other_rule_module() -> None:
    units = _rule_files()
    assert len(units) >= 11 and any(len(files) > 1 for files in units.values())  # the walk sees packages
    assert _offenders(units, RULES_DIR) == {}


def test_common_imports_no_rule_module() -> None:
    files = sorted((RULES_DIR / "_common").rglob("*.py"))
    assert files
    bad = {
        str(p.relative_to(RULES_DIR)): sorted(
            m for m in _imports(p) if (m == ROOT or m.startswith(ROOT + ".")) and not m.startswith(COMMON + ".")
        )
        for p in files
    }
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_check_sees_every_import_form(tmp_path: Path) -> None:
    """Absolute, ``from``-package, relative and ``_common``-submodule imports of another rule are all caught."""
    for pkg in ("aa001_a", "bb001_b", "_common"):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "_common" / "units.py").write_text("", encoding="utf-8")
    (tmp_path / "bb001_b" / "est.py").write_text("", encoding="utf-8")
    (tmp_path / "aa001_a" / "ok.py").write_text(
        "from advisor_rules._common import x\nfrom advisor_rules.aa001_a import bad\nfrom . import ok\n"
        "from .ok import y\nimport advisor_rules.aa001_a.ok\n",
        encoding="utf-8",
    )
    (tmp_path / "aa001_a" / "bad.py").write_text(
        "import advisor_rules.bb001_b\nfrom advisor_rules import bb001_b\nfrom ..bb001_b.est import z\n"
        "from advisor_rules._common.units import w\n",
        encoding="utf-8",
    )
    assert _offenders(_rule_files(tmp_path), tmp_path) == {
        "aa001_a/bad.py": ["advisor_rules", "advisor_rules._common.units", "advisor_rules.bb001_b", "advisor_rules.bb001_b.est"],
    }
