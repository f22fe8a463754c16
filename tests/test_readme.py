"""The README is the front door: its two commands, its CI block and its CLI tour stay true."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from advisor_core.cli import cli

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _ci_command() -> str:
    """What .ci/run extracts from the README (the same awk program it runs)."""
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (awk,) = re.findall(r"awk '([^']+)' README\.md", script)
    return subprocess.run(["awk", awk, str(ROOT / "README.md")], capture_output=True, text=True, check=True).stdout


def test_ci_runs_the_readme_test_command() -> None:
    cmd = _ci_command().strip()
    assert cmd.splitlines() == [
        'python3 -m venv .venv && . .venv/bin/activate && pip install -e ".[test]" && pip install ./plugins/advisor-aicpu '
        "&& python -m pytest"
    ]
    # the whole suite, interop included: no -m/-k filter and no skipped directories
    assert " -m " not in cmd.split("pytest", 1)[1] and " -k " not in cmd


def test_ci_script_fails_on_failure() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "set -euo pipefail" in script and 'exec bash -euo pipefail -c "$cmd"' in script


def test_first_command_runs_the_main_job() -> None:
    first = re.search(r"```bash\n(.+?)\n```", README, re.S).group(1)
    assert first == "python3 -m venv .venv && . .venv/bin/activate && pip install . && advisor demo"


def test_tour_covers_every_command() -> None:
    missing = [name for name in cli.commands if f"advisor {name}" not in README]
    assert missing == []


def test_documents_linked_from_the_readme_exist() -> None:
    links = re.findall(r"\]\(((?!https?:|#)[^)]+)\)", README)
    assert links and [p for p in links if not (ROOT / p).exists()] == []


def _tool_output_lines() -> list[tuple[int, str]]:
    """``(README line number, line)`` of every line the tool printed in the ```text blocks of the tour.

    Left out: the commands the user types (``$ …``) and unified-diff lines (from ``--- a/`` to the
    end of the hunk), which are printed raw because a wrapped diff would not apply.
    """
    out: list[tuple[int, str]] = []
    in_text = in_diff = False
    for n, line in enumerate(README.splitlines(), 1):
        if line.startswith("```"):
            in_text, in_diff = line == "```text" and not in_text, False
            continue
        if not in_text:
            continue
        if line.startswith("--- a/"):
            in_diff = True
        elif in_diff and not line.startswith((" ", "+", "-", "@@")):
            in_diff = False
        if not in_diff and not line.startswith("$ "):
            out.append((n, line))
    return out


def test_tool_output_in_the_readme_fits_80_columns() -> None:
    lines = _tool_output_lines()
    assert len(lines) > 200  # the tour is there
    assert [(n, len(line), line) for n, line in lines if len(line) > 80] == []


def test_rule_table_lists_every_builtin_rule_and_nothing_else() -> None:
    from advisor_core.engine.plugins import load_plugins

    table = README.split("| code | finds | evidence | fix |", 1)[1].split("\n\n", 1)[0]
    listed = set()
    for row in table.strip().splitlines()[1:]:
        for item in row.split("|")[1].split(","):
            first, _, last = item.strip().partition("–")
            if last:  # a range: LC004–LC006
                prefix = first[:2]
                listed |= {f"{prefix}{n:03d}" for n in range(int(first[2:]), int(last[2:]) + 1)}
            else:
                listed.add(first)
    builtin = {code for code, r in load_plugins(autoload=False).rules().items() if r.plugin.builtin}
    assert listed == builtin
