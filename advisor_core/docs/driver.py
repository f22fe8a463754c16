"""The driver: which file each target writes, ``check`` (a diff against the committed file) and the CLI."""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

from advisor_core.docs.plugins import render_plugins
from advisor_core.docs.rules import render_rules
from advisor_core.docs.tables import render_tables

TARGETS: dict[str, str] = {"tables": "tables.md", "rules": "rules.md", "hooks": "plugins.md"}
DEFAULT_DOCS_DIR = Path(__file__).resolve().parent.parent.parent / "docs"


def expected(target: str, docs_dir: Path) -> tuple[Path, str, str | None]:
    """(path, generated text, current text or ``None``) for one target."""
    path = docs_dir / TARGETS[target]
    current = path.read_text(encoding="utf-8") if path.is_file() else None
    if target == "tables":
        text = render_tables()
    elif target == "rules":
        text = render_rules()
    else:
        text = render_plugins(current)
    if not text.endswith("\n"):
        text += "\n"
    return path, text, current


def check(target: str, docs_dir: Path = DEFAULT_DOCS_DIR) -> str | None:
    """``None`` when the document is current, else a unified diff (current → generated)."""
    path, text, current = expected(target, docs_dir)
    if current == text:
        return None
    diff = difflib.unified_diff(
        (current or "").splitlines(keepends=True),
        text.splitlines(keepends=True),
        fromfile=f"{path} (committed)" if current is not None else f"{path} (missing)",
        tofile=f"{path} (generated)",
    )
    return "".join(diff) or f"{path}: differs only in line endings\n"


def main(argv: list[str] | None = None) -> int:
    """The command line (see the package docstring); returns 1 when ``--check`` finds a stale document, else 0."""
    parser = argparse.ArgumentParser(
        prog="python -m advisor_core.docs",
        description="Generate docs/tables.md, docs/rules.md and the generated parts of docs/plugins.md.",
    )
    parser.add_argument("target", choices=[*TARGETS, "all"])
    parser.add_argument("--check", action="store_true", help="write nothing; print a diff and exit 1 when out of date")
    parser.add_argument("--docs-dir", type=Path, default=DEFAULT_DOCS_DIR, help=f"default: {DEFAULT_DOCS_DIR}")
    args = parser.parse_args(argv)
    targets = list(TARGETS) if args.target == "all" else [args.target]
    stale = 0
    for t in targets:
        if args.check:
            diff = check(t, args.docs_dir)
            path = args.docs_dir / TARGETS[t]
            if diff is None:
                print(f"{path}: up to date")
            else:
                stale += 1
                sys.stdout.write(diff if diff.endswith("\n") else diff + "\n")
                print(f"{path}: out of date; run `python -m advisor_core.docs {t}`", file=sys.stderr)
        else:
            path, text, current = expected(t, args.docs_dir)
            if current == text:
                print(f"{path}: unchanged")
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
            print(f"{path}: written")
    return 1 if stale else 0
