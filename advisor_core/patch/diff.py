"""Unified diffs of config patches, as reviewers expect them (``--diff``, PR comments, snapshots)."""

from __future__ import annotations

import difflib
from pathlib import Path, PurePath
from typing import Mapping

from advisor_core.config.document import ConfigDocument
from advisor_core.engine.findings import Patch
from advisor_core.patch.apply import preview_patches
from advisor_core.patch.merge import split_lines

__all__ = ["diff_path", "render_patch_diff", "unified_diff"]

_NO_EOL = "\\ No newline at end of file\n"


def diff_path(path: str | PurePath) -> str:
    """The path as it appears after ``a/`` and ``b/``: forward slashes, no leading ``/`` or ``./``."""
    text = PurePath(path).as_posix()
    while text.startswith("./"):
        text = text[2:]
    return text.lstrip("/")


def unified_diff(old_text: str, new_text: str, path: str | PurePath) -> str:
    """``difflib`` unified diff with ``a/<path>``/``b/<path>`` headers and 3 lines of context.

    Empty string when the texts are equal. A last line without a line break is
    marked ``\\ No newline at end of file`` as ``diff``/``git`` do.
    """
    name = diff_path(path)
    out: list[str] = []
    for line in difflib.unified_diff(
        split_lines(old_text), split_lines(new_text), fromfile=f"a/{name}", tofile=f"b/{name}", n=3
    ):
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n")
            out.append(_NO_EOL)
    return "".join(out)


def render_patch_diff(
    doc: ConfigDocument,
    patch: Patch,
    *,
    path: str | Path | None = None,
    insert_after: Mapping[str, str] | None = None,
) -> str | None:
    """The diff of applying ``patch`` alone to ``doc`` (``None`` if its preconditions fail).

    ``display_only`` patches are rendered too (showing them is their purpose).
    ``path`` overrides the name in the headers (default: the document's path).
    """
    result = preview_patches(doc, [patch], insert_after=insert_after)
    if not result.ok or result.new_text is None:
        return None
    return unified_diff(doc.text, result.new_text, path if path is not None else doc.path)
