"""The text report lays out for the width there is: a table when it fits, one block per finding when not."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from advisor_core.engine.plugins import load_plugins
from advisor_core.engine.session import Session, SessionOptions
from advisor_core.report.base import RenderContext, primary_location_text
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
