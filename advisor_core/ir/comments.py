"""Comment lines after a node: scope, ``# In file`` source locations, other notes.

Recognised forms (spec §2.9):

* ``# Fullname with scope: (<scope>)`` (2.3+), ``# Scope: (<scope>)`` (2.1–2.2 and early 2.10
  passes), ``#scope: (<scope>)`` (analyze_fail);
* ``# In file <file>:<l>[~<l2>][, <c>~<c2>]/<code>/[<~~This line ... duplicated./]`` (2.x) and
  ``# In file <file>(<l>)/<code>/`` (1.x);
* anything else (``# Corresponding forward node candidate:``, ``# Corresponding code candidate:``,
  ``# SideEffect: { load }``, ``# Comment: ...``) is kept verbatim in ``comments``.

Nothing here raises; an ``# In file`` line that does not fit the grammar is kept in ``comments``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from advisor_core.ir.values import SourceLoc

__all__ = ["NodeComments", "decode_comments", "parse_in_file", "parse_scope"]

_SCOPE = re.compile(r"^#\s*(?:Fullname with scope|Scope|scope)\s*:\s*\((.*)\)\s*$")
_IN_FILE = re.compile(
    r"^#\s*In file (?P<file>.+?)[:(](?P<line>\d{1,18})(?:~(?P<line_end>\d{1,18}))?\)?"
    r"(?:, (?P<col>\d{1,18})~(?P<col_end>\d{1,18}))?/(?P<src>.*)$"
)
_SHARED_SUFFIX = "/<~~This line of code can be shared by multiple nodes, and may be duplicated./"

_source_cache: dict[str, SourceLoc | None] = {}
_CACHE_LIMIT = 200_000


def parse_scope(text: str) -> str | None:
    """The scope of a scope comment (``text`` stripped of indentation), else ``None``."""
    m = _SCOPE.match(text)
    return m.group(1) if m else None


def parse_in_file(text: str) -> SourceLoc | None:
    """Decode an ``# In file`` comment (``text`` stripped of indentation); ``None`` if it does not fit."""
    if text in _source_cache:
        return _source_cache[text]
    loc = _parse_in_file(text)
    if len(_source_cache) < _CACHE_LIMIT:
        _source_cache[text] = loc
    return loc


def _parse_in_file(text: str) -> SourceLoc | None:
    m = _IN_FILE.match(text)
    if m is None:
        return None
    src = m.group("src")
    shared = src.endswith(_SHARED_SUFFIX)
    if shared:
        src = src[: -len(_SHARED_SUFFIX)]
    elif src.endswith("/"):
        src = src[:-1]
    line_end, col, col_end = m.group("line_end"), m.group("col"), m.group("col_end")
    return SourceLoc(
        file=m.group("file"),
        line=int(m.group("line")),
        line_end=int(line_end) if line_end is not None else None,
        col=int(col) if col is not None else None,
        col_end=int(col_end) if col_end is not None else None,
        code=src,
        shared=shared,
    )


class NodeComments(NamedTuple):
    """Decoded comment lines of one node."""

    scope: str | None
    sources: list[SourceLoc]
    comments: list[str]


def decode_comments(lines: list[str]) -> NodeComments:
    """Decode a node's comment lines (raw physical lines, indentation included).

    The first scope line wins; a second one is kept in ``comments``.
    """
    scope: str | None = None
    sources: list[SourceLoc] = []
    comments: list[str] = []
    for raw in lines:
        text = raw.strip()
        if text.startswith("# In file "):
            loc = parse_in_file(text)
            if loc is not None:
                sources.append(loc)
                continue
        elif scope is None and ("cope" in text[:25]):
            found = parse_scope(text)
            if found is not None:
                scope = found
                continue
        comments.append(text)
    return NodeComments(scope, sources, comments)
