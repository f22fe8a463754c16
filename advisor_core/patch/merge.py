"""From an edited round-trip tree back to text that differs from the original only where it must.

ruamel re-writes a few things it does not keep: a 3-space indented block becomes
2-space, ``[ 8, 8 ]`` becomes ``[8, 8]``, ``{"a":"b"}`` gets a space, a flow list
spread over several lines is joined into one, a missing final line break is added.
Dumping the whole edited tree would therefore touch lines no patch asked for.

So the text is produced by a three-way line merge:

* ``original`` — the file as it is;
* ``baseline`` — ruamel's dump of the file as loaded (no edits);
* ``edited`` — ruamel's dump of the edited tree.

The hunks between ``baseline`` and ``edited`` are exactly the edits (both are
ruamel's writing). They are carried over onto ``original`` through the alignment of
``baseline`` with ``original``. Where a hunk overlaps a line ruamel re-writes anyway
(or, for a pure insertion, touches one), that line is taken from ``edited`` as a
whole, so the edited region is consistent; every other line of ``original`` is
kept byte for byte. The caller re-loads and verifies the result (see
:mod:`advisor_core.patch.verify`).
"""

from __future__ import annotations

import io
from difflib import SequenceMatcher
from functools import lru_cache
from typing import Any

from advisor_core.config.document import ConfigDocument, YamlLayout, anchor_name, make_yaml
from advisor_core.patch.values import PatchRepresenter

__all__ = ["baseline_dump", "dump", "merge_lines", "split_lines"]


def split_lines(text: str) -> list[str]:
    """Lines with their ``\\n`` kept; only ``\\n`` breaks a line (unlike ``str.splitlines``)."""
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def _pin_anchors(node: Any, seen: set[int] | None = None) -> None:
    """Make every anchor written even when no alias is left (ruamel drops unused mapping anchors).

    The file had the anchor; removing its last alias must not also rewrite the anchor's line.
    """
    seen = set() if seen is None else seen
    if id(node) in seen:
        return
    seen.add(id(node))
    name = anchor_name(node)
    if name is not None:
        node.yaml_set_anchor(name, always_dump=True)
    if isinstance(node, dict):
        for value in node.values():
            _pin_anchors(value, seen)
    elif isinstance(node, list):
        for value in node:
            _pin_anchors(value, seen)


def dump(data: Any, layout: YamlLayout) -> str:
    """ruamel's text for ``data``. Dump a tree once only: ruamel's representer extends comment lists in place."""
    _pin_anchors(data)
    yaml = make_yaml(layout)
    yaml.Representer = PatchRepresenter
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


@lru_cache(maxsize=32)
def baseline_dump(text: str) -> str:
    """ruamel's dump of ``text`` loaded afresh, without edits (cached: documents are re-patched often)."""
    doc = ConfigDocument.from_text(text)
    return dump(doc.data, doc.layout)


class _Interval:
    """A run of baseline lines ``[b1, b2)`` that stands for ``other[o1:o2]`` (a noise run or an edit hunk)."""

    __slots__ = ("b1", "b2", "o1", "o2", "shape")

    def __init__(self, b1: int, b2: int, o1: int, o2: int, shape: bool = True) -> None:
        self.b1, self.b2, self.o1, self.o2 = b1, b2, o1, o2
        self.shape = shape  # whether the run changes line structure or indentation, not just words


def _touches(start: int, end: int, iv: _Interval, child: bool) -> bool:
    """Whether the region ``[start, end)`` of baseline lines must absorb ``iv`` whole.

    ``child``: the region is an insertion of lines indented deeper than the line before it
    (they are that line's value, as in ``b:`` + ``  k: v``).
    """
    if iv.b1 == iv.b2:
        # Lines only the other text has, at a point: absorbed only when strictly inside the region,
        # so an insertion next to them keeps them (it goes after them).
        return start < iv.b1 < end
    if start == end:
        # An insertion takes along a line it touches that ruamel re-indents (so that the block stays
        # consistently indented) and the line it is the value of; a line ruamel only re-spells next
        # to a sibling insertion ("b: ~" above "b2: 1") stays as written.
        return iv.b1 < start < iv.b2 or (iv.shape and iv.b1 <= start <= iv.b2) or (child and iv.b2 == start)
    return iv.b1 < end and start < iv.b2


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" "))]


def _intervals(a: list[str], b: list[str]) -> tuple[list[_Interval], dict[int, int]]:
    """Non-equal runs between ``a`` (baseline) and ``b``, and the map of equal lines ``a`` → ``b``."""
    runs: list[_Interval] = []
    same: dict[int, int] = {}
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            for k in range(i2 - i1):
                same[i1 + k] = j1 + k
        elif tag == "replace" and i2 - i1 == j2 - j1:
            # As many lines on both sides ("b: ~" / "b:", "x: False" / "x: false"): they pair up one
            # to one, so an edit next to one of them does not drag in the others.
            runs.extend(
                _Interval(i1 + k, i1 + k + 1, j1 + k, j1 + k + 1, _indent(a[i1 + k]) != _indent(b[j1 + k]))
                for k in range(i2 - i1)
            )
        else:
            runs.append(_Interval(i1, i2, j1, j2))
    return runs, same


class _Region:
    """Baseline lines ``[start, end)`` replaced as a whole, with the runs absorbed into them."""

    def __init__(self, hunk: _Interval, baseline: list[str], edited: list[str]) -> None:
        self.start, self.end = hunk.b1, hunk.b2
        self.noise: list[_Interval] = []
        self.edits: list[_Interval] = [hunk]
        self.child = (
            hunk.b1 == hunk.b2 > 0
            and hunk.o2 > hunk.o1
            and len(_indent(edited[hunk.o1])) > len(_indent(baseline[hunk.b1 - 1]))
        )

    def grow(self, noise: list[_Interval], edits: list[_Interval]) -> None:
        changed = True
        while changed:  # to a fixpoint: absorbing a run may make the region touch another
            changed = False
            for pool, got in ((noise, self.noise), (edits, self.edits)):
                for iv in pool:
                    if not any(iv is g for g in got) and _touches(self.start, self.end, iv, self.child):
                        got.append(iv)
                        self.start, self.end = min(self.start, iv.b1), max(self.end, iv.b2)
                        changed = True

    def overlaps(self, other: _Region) -> bool:
        shared = any(a is b for a in self.noise for b in other.noise) or any(
            a is b for a in self.edits for b in other.edits
        )
        return shared or (other.start < self.end and self.start < other.end)

    def absorb(self, other: _Region) -> None:
        self.start, self.end = min(self.start, other.start), max(self.end, other.end)
        self.noise += [iv for iv in other.noise if not any(iv is g for g in self.noise)]
        self.edits += [iv for iv in other.edits if not any(iv is g for g in self.edits)]


def _map_range(region: _Region, runs: list[_Interval], all_runs: list[_Interval], same: dict[int, int],
               size: int) -> tuple[int, int]:
    """The lines of the other text that the region's baseline lines stand for."""
    lows = [same[i] for i in range(region.start, region.end) if i in same] + [iv.o1 for iv in runs]
    highs = [same[i] + 1 for i in range(region.start, region.end) if i in same] + [iv.o2 for iv in runs]
    if lows:
        return min(lows), max(highs)
    pos = _insertion_point(region.start, size, all_runs, same)
    return pos, pos


def _insertion_point(start: int, size: int, runs: list[_Interval], same: dict[int, int]) -> int:
    """Where, in the other text, the gap before baseline line ``start`` (of ``size``) is.

    Right after what line ``start - 1`` stands for. Lines only the other text has at that
    point (``---``/``%YAML`` before the first line, ``...`` after the last) stay on their
    side: after them inside the document, before them at its end.
    """
    extra = next((iv for iv in runs if iv.b1 == iv.b2 == start), None)
    if start == 0:
        return extra.o2 if extra is not None else 0
    if start - 1 in same:
        after = same[start - 1] + 1
    else:
        after = next(iv.o2 for iv in runs if iv.b1 < start <= iv.b2)
    return extra.o2 if extra is not None and start < size else after


def merge_lines(original: str, baseline: str, edited: str, layout: YamlLayout) -> str:
    """Carry the ``baseline`` → ``edited`` hunks over onto ``original`` (see module docstring)."""
    o_raw = split_lines(original)
    # Compare without "\r" (ruamel writes "\n"); untouched lines are written back raw, with their own ending.
    o_lines = [line[:-2] + "\n" if line.endswith("\r\n") else line for line in o_raw]
    b_lines = split_lines(baseline)
    n_lines = split_lines(edited)
    noise, b_to_o = _intervals(b_lines, o_lines)
    edits, b_to_n = _intervals(b_lines, n_lines)
    regions: list[_Region] = []
    for hunk in edits:
        if any(any(hunk is e for e in r.edits) for r in regions):
            continue
        region = _Region(hunk, b_lines, n_lines)
        region.grow(noise, edits)
        for other in [r for r in regions if r.overlaps(region)]:
            region.absorb(other)
            regions.remove(other)
        regions.append(region)
    regions.sort(key=lambda r: (r.start, r.end))
    newline = "\r\n" if layout.crlf else "\n"
    out: list[str] = []
    cursor = 0
    for region in regions:
        o1, o2 = _map_range(region, region.noise, noise, b_to_o, len(b_lines))
        n1, n2 = _map_range(region, region.edits, edits, b_to_n, len(b_lines))
        out.extend(o_raw[cursor:o1])
        out.extend(line[:-1] + newline if line.endswith("\n") else line for line in n_lines[n1:n2])
        cursor = max(cursor, o2)
    out.extend(o_raw[cursor:])
    text = "".join(out)
    if original and not original.endswith("\n") and text.endswith(newline):
        text = text[: -len(newline)]  # the file had no final line break: do not add one
    return text
