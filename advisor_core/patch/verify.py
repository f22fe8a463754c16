"""Check the written text before anyone writes it to disk.

Two checks, both must pass or :class:`PatchVerificationError` is raised:

1. **Semantics**: the new text re-loads, and its plain tree equals the expected
   tree computed by :mod:`advisor_core.patch.reference` — so only the intended
   pointers changed (and they changed to the intended values).
2. **Comments**: every whole-line comment of the original is still there, except
   those inside a value that was removed or replaced (a removed block takes its
   inner comments with it). Comments moving to the wrong place are covered by the
   golden-file tests; comments silently disappearing are caught here.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

from ruamel.yaml.comments import CommentedMap, CommentedSeq

from advisor_core.config.document import (
    ConfigDocument,
    ConfigLoadError,
    is_block,
    pointer_escape,
    pointer_split,
    resolve,
    to_plain,
)
from advisor_core.patch.reference import describe, diff_pointers

__all__ = ["PatchVerificationError", "dropped_spans", "full_line_comments", "verify_result"]


class PatchVerificationError(RuntimeError):
    """The patched text is not what the patches asked for; nothing must be written.

    This is a bug in the advisor (or an unsupported YAML construct), not a user
    error: the message says what differed.
    """


def full_line_comments(text: str, skip: Iterable[tuple[int, int]] = ()) -> Counter[str]:
    """Whole-line ``#`` comments (stripped) of ``text``, leaving out 0-based inclusive line ranges ``skip``."""
    spans = list(skip)
    out: Counter[str] = Counter()
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n")):
        stripped = line.strip()
        if stripped.startswith("#") and not any(a <= number <= b for a, b in spans):
            out[stripped] += 1
    return out


def verify_result(
    original: ConfigDocument,
    new_text: str,
    expected: Any,
    dropped: list[tuple[int, int]],
) -> ConfigDocument:
    """Re-load ``new_text`` and run both checks; returns the re-loaded document."""
    try:
        reloaded = ConfigDocument.from_text(new_text, original.path)
    except ConfigLoadError as exc:
        raise PatchVerificationError(
            f"{original.path}: the patched text does not load as YAML ({exc.diagnostic.render()}); nothing was written"
        ) from None
    actual = to_plain(reloaded.data)
    differing = diff_pointers(expected, actual)
    if differing:
        details = []
        for ptr in differing[:5]:
            want = _safe_get(expected, ptr)
            got = _safe_get(actual, ptr)
            details.append(f"{ptr}: expected {want}, the new text has {got}")
        raise PatchVerificationError(
            f"{original.path}: the round trip changed values no patch asked for (or missed intended ones): "
            + "; ".join(details)
            + "; nothing was written"
        )
    missing = full_line_comments(original.text, dropped) - full_line_comments(new_text)
    if missing:
        lost = ", ".join(repr(c) for c in sorted(missing))
        raise PatchVerificationError(f"{original.path}: the patched text would lose comment lines: {lost}; nothing was written")
    return reloaded


def _safe_get(tree: Any, pointer: str) -> str:
    try:
        return describe(resolve(tree, "" if pointer == "/" else pointer)[2])
    except (LookupError, ValueError, TypeError):
        return "(absent)"


def _subtree_last_line(node: Any, seen: set[int]) -> int:
    """Largest 0-based line at which an entry of ``node`` starts (-1 if unknown)."""
    if id(node) in seen or not isinstance(node, (CommentedMap, CommentedSeq)):
        return -1
    seen.add(id(node))
    best = -1
    for key in list(node.keys()) if isinstance(node, dict) else range(len(node)):
        try:
            if isinstance(node, CommentedMap):
                best = max(best, int(node.lc.key(key)[0]), int(node.lc.value(key)[0]))
            else:
                best = max(best, int(node.lc.item(key)[0]))
        except (KeyError, IndexError, TypeError, AttributeError):
            pass
        best = max(best, _subtree_last_line(node[key], seen))
    return best


def dropped_spans(doc: ConfigDocument, op: str, pointer: str) -> list[tuple[int, int]]:
    """0-based inclusive line ranges of ``doc`` whose comments ``op`` at ``pointer`` may take away.

    A removed entry takes its own lines; a replaced value the lines below its key. A
    shared (anchored) value is written in full at one place only: its lines there go
    too when it is replaced, wherever the pointer names it.
    """
    if op not in ("remove", "replace", "add"):
        return []
    spans: list[tuple[int, int]] = _flow_span(doc, pointer)
    if not doc.exists(pointer):
        return spans
    value = doc.get(pointer)
    sites = [pointer]
    if isinstance(value, (dict, list)) and op != "remove":
        sites += doc.value_sites(pointer)
    written = min(sites, key=lambda p: doc.index.order.get(p, 0))
    for site in dict.fromkeys([pointer, written]):
        pos = doc.position(site)
        if pos is None:
            continue
        first = pos[0] - 1
        seen: set[int] = set() if site == written else {id(value)}
        last = max(first, _subtree_last_line(value, seen))
        if op == "remove" and site == pointer:
            spans.append((first, last))
        elif last > first:
            spans.append((first + 1, last))
    return spans


def _flow_span(doc: ConfigDocument, pointer: str) -> list[tuple[int, int]]:
    """All lines of the outermost flow collection around ``pointer``: an edit inside one rewrites it whole,
    and ruamel keeps no comment written between its items."""
    tokens = pointer_split(pointer)
    for depth in range(len(tokens)):
        sub = "".join("/" + pointer_escape(t) for t in tokens[:depth])
        node = doc.get(sub)
        if isinstance(node, (CommentedMap, CommentedSeq)) and not is_block(node) and sub:
            pos = doc.position(sub)
            if pos is None:
                return []
            first = pos[0] - 1
            last = max(first, _subtree_last_line(node, set()))
            lines = doc.text.split("\n")
            probe = last + 1
            while probe < len(lines) and (not lines[probe].strip() or lines[probe].strip().startswith("#")):
                probe += 1
            if probe < len(lines) and lines[probe].strip().startswith(("]", "}")):
                last = probe
            return [(first, last)]
    return []
