"""Keeping comments where they belong when entries are added, replaced or removed.

ruamel attaches a comment to the node *before* it: the comment lines and blank
lines between two entries are stored in one token on the last scalar written
before them, e.g. ``model_name: 'glm4_9b'`` carries ``"\\n# if True do, …\\n"``
that visually introduces the next top-level key ``do_eval``. A token's text is the
end of its own line (an end-of-line comment, or just ``"\\n"``) followed by the
*after* part: whole lines that follow. Entries written after an alias sometimes
carry such lines as *pre* comments instead (slot 1 of the next key).

Hence the known pitfalls (conventions §6.3) and what this module does about them:

* appending an entry after ``E`` would put it below ``E``'s after-part, visually
  under the next section → the after-part moves to the new entry;
* removing ``E`` would drop the after-part (and any pre comments) with it → they
  move to the entry before ``E`` (or before the next one, or after the parent);
* replacing a block value drops its last line's token → the after-part moves to
  the new value's last line; an end-of-line comment on the key line stays.
"""

from __future__ import annotations

from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.tokens import CommentToken

from advisor_core.config.document import anchor_name, is_block

__all__ = [
    "FirstSites",
    "aligned_with_neighbours",
    "entry_tokens",
    "eol_token",
    "keep_comment_gap",
    "forget_tokens",
    "give_after",
    "give_after_key_line",
    "give_pre",
    "split_token_text",
    "take_after",
    "take_pre",
]

_MAP_POST = 2
_SEQ_POST = 0
_PRE = 1


class FirstSites:
    """Which ``(parent, key)`` slot writes each shared container in full (the others write ``*alias``).

    The dump writes a node in full at its first occurrence in document order, so
    comments inside a shared node are emitted there only.
    """

    def __init__(self, root: Any) -> None:
        self._first: dict[int, tuple[int, Any]] = {}
        self._walk(root)

    def _walk(self, node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            if isinstance(value, (dict, list)) or anchor_name(value) is not None:
                if id(value) in self._first:
                    continue
                self._first[id(value)] = (id(node), key)
                self._walk(value)

    def written_here(self, parent: Any, key: Any) -> bool:
        """Whether ``parent[key]`` writes its value in full (not as ``*alias``)."""
        value = parent[key]
        return self._first.get(id(value), (id(parent), key)) == (id(parent), key)


def split_token_text(text: str) -> tuple[str, str]:
    """``(end_of_line, after)``: the token's own line (ending with ``\\n``) and the whole lines after it."""
    cut = text.find("\n")
    if cut < 0:
        return text, ""
    return text[: cut + 1], text[cut + 1 :]


def _post_index(container: Any) -> int:
    return _MAP_POST if isinstance(container, CommentedMap) else _SEQ_POST


def _last_key(container: Any) -> Any:
    if isinstance(container, CommentedMap):
        own = [k for k in container if k in getattr(container, "_ok", container)]
        return own[-1] if own else None
    return len(container) - 1 if len(container) else None


def _trailing_holder(parent: Any, key: Any, sites: FirstSites) -> tuple[Any, Any]:
    """The ``(container, key)`` whose post-comment token follows the last line of entry ``parent[key]``."""
    value = parent[key]
    while is_block(value) and len(value) and sites.written_here(parent, key):
        last = _last_key(value)
        if last is None:
            break
        parent, key, value = value, last, value[last]
    return parent, key


def _slot(container: Any, key: Any, index: int, create: bool) -> list[Any] | None:
    items = container.ca.items
    entry = items.get(key)
    if entry is None:
        if not create:
            return None
        entry = [None, None, None, None] if isinstance(container, CommentedMap) else [None, None]
        items[key] = entry
    while len(entry) <= index:
        entry.append(None)
    return entry


def take_after(parent: Any, key: Any, sites: FirstSites) -> str:
    """Detach and return the after-part that follows entry ``parent[key]`` (``""`` if none)."""
    holder, hkey = _trailing_holder(parent, key, sites)
    index = _post_index(holder)
    entry = _slot(holder, hkey, index, create=False)
    token = None if entry is None else entry[index]
    if token is None:
        return ""
    eol, after = split_token_text(token.value)
    if eol.strip():
        token.value = eol
    else:
        entry[index] = None  # only the line break was left: no comment at all
    return after


def give_after(parent: Any, key: Any, text: str, sites: FirstSites) -> bool:
    """Append whole comment/blank lines ``text`` after the last line of entry ``parent[key]``.

    Returns ``False`` (and does nothing) when that last line is an ``*alias``: ruamel
    would hang the lines on the anchored node and write them at the anchor instead.
    """
    if not text:
        return True
    holder, hkey = _trailing_holder(parent, key, sites)
    if not sites.written_here(holder, hkey):
        return False
    index = _post_index(holder)
    entry = _slot(holder, hkey, index, create=True)
    assert entry is not None
    token = entry[index]
    if token is None:
        entry[index] = CommentToken("\n" + text, CommentMark(0), None)
    else:
        value = token.value
        token.value = (value if value.endswith("\n") else value + "\n") + text
    return True


def give_after_key_line(parent: Any, key: Any, text: str) -> None:
    """Append whole lines ``text`` to the token of entry ``parent[key]`` itself (its key line), not its last line."""
    if not text:
        return
    index = _post_index(parent)
    entry = _slot(parent, key, index, create=True)
    assert entry is not None
    token = entry[index]
    if token is None:
        entry[index] = CommentToken("\n" + text, CommentMark(0), None)
    else:
        token.value = (token.value if token.value.endswith("\n") else token.value + "\n") + text


def take_pre(parent: Any, key: Any) -> str:
    """Detach and return the comment lines stored *before* entry ``parent[key]`` (pre comments)."""
    entry = parent.ca.items.get(key)
    if not entry or len(entry) <= _PRE or not entry[_PRE]:
        return ""
    tokens = entry[_PRE]
    entry[_PRE] = None
    return "".join(t.value for t in tokens if t is not None)


def give_pre(parent: Any, key: Any, text: str) -> None:
    """Put whole lines ``text`` before entry ``parent[key]`` (ahead of any pre comments it has)."""
    if not text:
        return
    entry = _slot(parent, key, _PRE, create=True)
    assert entry is not None
    existing = entry[_PRE] or []
    entry[_PRE] = [CommentToken(text, CommentMark(0), None), *existing]


def eol_token(parent: Any, key: Any) -> Any:
    """The end-of-line comment token of entry ``parent[key]``, if it has one on its own line."""
    entry = parent.ca.items.get(key)
    index = _post_index(parent)
    if not entry or len(entry) <= index or entry[index] is None:
        return None
    token = entry[index]
    return token if not token.value.startswith("\n") else None


def keep_comment_gap(token: Any, line: str, new_end: int) -> None:
    """Keep the spaces between a value and its end-of-line comment when the value's width changes.

    ruamel keeps a comment's *column*, which pads ``'./out'    # c`` when
    ``'./output' # c`` gets shorter. The gap is kept instead, unless the comment is
    aligned with a comment on the line above or below (then the column is kept, so
    the block stays aligned). ``line`` is the original line, ``new_end`` the column
    where the new value ends.
    """
    column = token.column
    if column is None or column > len(line) or line[column:column + 1] != "#":
        return
    old_end = len(line[:column].rstrip())
    gap = column - old_end
    if gap < 1 or new_end == old_end:
        return
    token.start_mark = CommentMark(max(new_end + gap, new_end + 1))


def aligned_with_neighbours(lines: list[str], number: int, column: int) -> bool:
    """Whether line ``number`` (0-based) has its comment at the same column as the line above or below."""
    for other in (number - 1, number + 1):
        if 0 <= other < len(lines):
            text = lines[other]
            if text[column:column + 1] == "#" and text[:column].strip():
                return True
    return False


def entry_tokens(parent: Any, key: Any) -> list[Any]:
    """The comment tokens stored on entry ``parent[key]`` itself."""
    entry = parent.ca.items.get(key) or []
    out: list[Any] = []
    for slot in entry:
        if isinstance(slot, list):
            out.extend(t for t in slot if t is not None)
        elif slot is not None:
            out.append(slot)
    return out


def forget_tokens(root: Any, tokens: list[Any]) -> None:
    """Drop every other reference to ``tokens`` in the tree.

    ruamel's loader copies a comment that follows an anchored scalar onto each of
    its alias sites; when the anchor's entry is removed, the value is written at the
    first alias site, and the removed line's comment would come back there.
    """
    if not tokens:
        return
    doomed = {id(t) for t in tokens}
    seen: set[int] = set()

    def clean(slot: Any) -> Any:
        if isinstance(slot, list):
            kept = [t for t in slot if t is None or id(t) not in doomed]
            return kept if any(t is not None for t in kept) else None
        return None if slot is not None and id(slot) in doomed else slot

    def walk(node: Any) -> None:
        if not isinstance(node, (CommentedMap, CommentedSeq)) or id(node) in seen:
            return
        seen.add(id(node))
        for entry in node.ca.items.values():
            for i, slot in enumerate(entry):
                entry[i] = clean(slot)
        if node.ca.comment:
            node.ca.comment = [clean(slot) for slot in node.ca.comment]
        for child in node.values() if isinstance(node, dict) else node:
            walk(child)

    walk(root)

