"""The text report lays out for the width there is: a table when it fits, one block per finding when not."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.report.base import RenderContext, location_text, primary_location_text
from advisor_core.report.formats import MIN_TITLE_WIDTH, TextFormat
from advisor_core.simulate import simulate_scenario


@pytest.fixture(scope="module")
def result(tmp_path_factory):  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("layout") / "ks"
    simulate_scenario("kitchen-sink", out, layers=2, steps=2, ground_truth=False)
    session = Session([out], SessionOptions(jobs=1), host=load_plugins(autoload=False))
    r = session.analyze()
    r.inputs = session.describe_inputs()
    return r


def _render(result, width: int) -> str:  # type: ignore[no-untyped-def]
    buf = io.StringIO()
    TextFormat().print(result, RenderContext(show_fixes=False), Console(file=buf, width=width, color_system=None))
    return buf.getvalue()


@pytest.mark.parametrize("width", [60, 80, 100, 120, 160, 200])
def test_titles_keep_30_columns_and_locations_are_whole(result, width: int) -> None:  # type: ignore[no-untyped-def]
    text = _render(result, width)
    head = text.split("\n\n[1]")[0]
    assert all(len(line) <= width for line in head.splitlines())
    for f in result.findings:
        where = primary_location_text(f, RenderContext(), short=True)
        assert re.search(rf"(^|\s){re.escape(where)}(\s|$)", head, re.M), (width, where)
    if "┃ finding" in head:  # the table: its finding column is at least MIN_TITLE_WIDTH wide
        header = next(line for line in head.splitlines() if "┃ finding" in line)
        column = header.split("┃")[5]
        assert len(column) >= MIN_TITLE_WIDTH + 2
    else:  # stacked: every title whole, wrapped at the width
        flat = " ".join(line.strip() for line in head.splitlines())
        for f in result.findings:
            assert f.title in flat


def test_wide_terminals_get_the_table_narrow_ones_the_blocks(result) -> None:  # type: ignore[no-untyped-def]
    assert "┃ finding" in _render(result, 160)
    narrow = _render(result, 80)
    assert "┃" not in narrow.split("\n\n[1]")[0]
    assert re.match(r"  1 [A-Z]{2}\d{3} (high|medium|low)  ", narrow.splitlines()[1])


def _blocks(detail: str) -> list[list[str]]:
    """The detail section cut into one list of lines per finding (from its ``[i]`` line)."""
    blocks: list[list[str]] = []
    for line in detail.splitlines():
        if re.match(r"\[\d+\] ", line):
            blocks.append([])
        if blocks:
            blocks[-1].append(line)
    return blocks


def _shown_locations(block: list[str]) -> list[str]:
    """Each ``  at …`` entry of a finding's block, its wrapped lines joined again."""
    entries: list[list[str]] = []
    for line in block:
        if line.startswith("  at "):
            entries.append([line])
        elif entries and line.strip() and not line.startswith(("  … and", "  fix", "  note")):
            entries[-1].append(line)
        elif entries:
            break
    return [" ".join(" ".join(e).split()) for e in entries]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_detail_lines_fit_and_never_cut_a_word(result, width: int) -> None:  # type: ignore[no-untyped-def]
    """Below the table: every line fits unless it is one word longer than the line; every location whole."""
    text = _render(result, width)
    detail = text[text.index("\n\n[1]") + 2:]
    for line in detail.splitlines():  # too long only as one word, with its "at" when it is a location
        words = line.split()
        assert len(line) <= width or len(words) == 1 or (len(words) == 2 and words[0] == "at"), (width, line)
    blocks = _blocks(detail)
    assert len(blocks) == len(result.findings)
    for f, block in zip(result.findings, blocks):
        assert " ".join(" ".join(block).split()).startswith(" ".join(f"[{len(blocks[:blocks.index(block)]) + 1}] "
                                                                     f"{f.code} {f.rule}: {f.title}".split()))
        wanted = [" ".join(f"at {location_text(loc, RenderContext())}".split()) for loc in f.locations[:4]]
        assert _shown_locations(block) == wanted, (width, f.code)


def test_plugins_listing_fits_80_columns_with_whole_names() -> None:
    import os
    import subprocess
    import sys

    env = dict(os.environ, ADVISOR_WIDTH="80")
    out = subprocess.run([sys.executable, "-m", "advisor_core", "plugins"], capture_output=True, text=True, env=env,
                         check=True).stdout
    lines = out.splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines)
    rows = {line.split("│")[0].strip(): [c.strip() for c in line.split("│")[1:]] for line in lines if "│" in line}
    assert rows["advisor_core.report.builtin"] == ["core", "loaded", "register_formats"]
    assert rows["builtin-rules"][0].startswith("ascend-advisor ")
