"""Wrapping text for a terminal without cutting a word: what every text output of advisor prints through."""

from __future__ import annotations

import textwrap


def wrap_text(text: str, width: int, *, lead: str = "", hang: str = "") -> str:
    """``lead`` + ``text`` wrapped at spaces to ``width``, continuation lines indented by ``hang``.

    A word (a path, a ``file:line``, a scope, a pointer) is never cut: one longer than the
    line overflows it whole (a terminal folds it, a pipe or a file keeps it), where rich would
    fold it mid-token; ``lead`` stays on the line of the first word. Each ``\\n`` of ``text``
    starts a new paragraph. Widths below 40 are taken as 40.
    """
    width = max(width, 40)
    lines: list[str] = []
    for n, para in enumerate(text.split("\n")):
        wrapped = textwrap.wrap(para, width=width, initial_indent=lead if n == 0 else hang, subsequent_indent=hang,
                                break_long_words=False, break_on_hyphens=False) or [""]
        # a word that fits the line only without the indent gets the whole line
        lines += [wrapped[0]] + [w.lstrip() if len(w) > width >= len(w.lstrip()) else w for w in wrapped[1:]]
    return "\n".join(lines)
