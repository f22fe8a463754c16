"""RFC 6902 ``add``/``replace``/``remove`` on the ruamel round-trip tree.

Every edit is made on the tree; nothing edits text. The rules:

* **replace** (and ``add`` of a key that exists) puts a new node in the same slot:
  the key, its position and its end-of-line comment stay; the new value is styled
  like the old one (see :mod:`advisor_core.patch.values`).
* **Aliases**: a pointer is resolved on the document as loaded. When the replaced
  value is an anchored or shared node, the new value takes the anchor and goes
  into *every* slot that held the old one (``&dp 1`` → ``&dp 2``, each ``*dp``
  follows); a pointer that passes *through* an alias edits the anchored node, so
  the change shows at every alias site. Each such case adds a note naming the
  sites.
* **add** of a new key appends it at the end of the mapping, or right after the
  sibling named in ``insert_after``; comment lines that followed the entry it is
  placed after move below the new entry, so it never lands under the comment
  block that introduces the next section. ``add`` into a sequence takes an index
  ``0..len`` or ``-`` (append).
* **remove** deletes the entry's own lines; comment lines around it are kept and
  re-homed on the previous entry (or the next one, or the parent's key line).
* Mappings that use, or are used by, a merge key ``<<`` are not edited (an
  :class:`EditError` says so): the merged view has no single place to write to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml.comments import CommentedMap, CommentedSeq, merge_attrib

from advisor_core.config.document import (
    ConfigDocument,
    PointerError,
    anchor_name,
    is_block,
    literal_at,
    lookup,
    pointer_escape,
    pointer_split,
    resolve,
    to_plain,
    type_name,
)
from advisor_core.patch.comments import (
    FirstSites,
    aligned_with_neighbours,
    entry_tokens,
    eol_token,
    forget_tokens,
    keep_comment_gap,
    give_after,
    give_after_key_line,
    give_pre,
    take_after,
    take_pre,
)
from advisor_core.patch.reference import strict_equal
from advisor_core.patch.values import StyleHints, UnsupportedValue, build_key, build_value, render_inline

__all__ = ["EditError", "EditRecord", "TreeEditor"]


class EditError(Exception):
    """An operation cannot be applied: ``pointer`` and a plain-words ``reason``."""

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(f"{pointer or '(document root)'}: {reason}")
        self.pointer = pointer
        self.reason = reason


@dataclass
class EditRecord:
    """What one operation did: the pointers whose values changed and notes for the user."""

    op: str
    pointer: str
    changed: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _parent_pointer(pointer: str) -> tuple[str, str]:
    tokens = pointer_split(pointer)
    if not tokens:
        raise EditError(pointer, "the whole document cannot be added, replaced or removed")
    return "".join("/" + pointer_escape(t) for t in tokens[:-1]), tokens[-1]


def _own_keys(mapping: CommentedMap) -> list[Any]:
    own = getattr(mapping, "_ok", None)
    return [k for k in mapping if own is None or k in own]


class TreeEditor:
    """Applies operations to ``work`` (an editable copy; see :meth:`ConfigDocument.copy`)."""

    def __init__(self, work: ConfigDocument) -> None:
        self.work = work
        self.layout = work.layout

    # ------------------------------------------------------------------ helpers

    def _resolve(self, pointer: str) -> tuple[Any, Any, Any]:
        try:
            return resolve(self.work.data, pointer)
        except PointerError as exc:
            raise EditError(pointer, f"path does not exist ({exc.message} at {exc.pointer})") from None
        except ValueError as exc:
            raise EditError(pointer, str(exc)) from None

    @staticmethod
    def _check_merge(container: Any, pointer: str) -> None:
        if isinstance(container, CommentedMap) and (getattr(container, merge_attrib, None) or container._ref):
            raise EditError(pointer, "the mapping uses or is used by a YAML merge key (<<); editing it is not supported")

    def _literal(self, parent: Any, key: Any) -> str | None:
        value = parent[key]
        text = getattr(value, "text", None)  # a value an earlier operation wrote
        if isinstance(text, str):
            return text
        try:
            line, col = parent.lc.value(key) if isinstance(parent, CommentedMap) else parent.lc.item(key)
        except (KeyError, IndexError, TypeError, AttributeError):
            return None
        return literal_at(self.work.text.split("\n"), (int(line), int(col)))

    def _keep_gap(self, parent: Any, key: Any, new: Any) -> None:
        """Keep the spaces before the end-of-line comment of a replaced one-line value."""
        token = eol_token(parent, key)
        if token is None or is_block(new):
            return
        try:
            line_no, col = parent.lc.value(key) if isinstance(parent, CommentedMap) else parent.lc.item(key)
        except (KeyError, IndexError, TypeError, AttributeError):
            return
        lines = self.work.text.split("\n")
        if line_no >= len(lines) or token.column is None:
            return
        if getattr(token.start_mark, "line", line_no) != line_no:
            return  # the comment is not on the value's line (the old value spans several lines)
        if aligned_with_neighbours(lines, line_no, token.column):
            return
        rendered = render_inline(new, self.layout)
        if rendered is not None:
            keep_comment_gap(token, lines[line_no], col + len(rendered))

    def _alias_note(self, pointer: str, sites: list[str]) -> list[str]:
        if not sites:
            return []
        anchor = self.work.anchor_of(pointer)
        name = f"&{anchor}" if anchor else "a shared node"
        return [
            f"{pointer} is resolved on the document as loaded: it names {name}, which is also used at "
            f"{', '.join(sites)}; the anchored node changes, so every one of those sites changes too"
        ]

    def _build(self, value: Any, hints: StyleHints, pointer: str) -> Any:
        try:
            return build_value(value, hints)
        except UnsupportedValue as exc:
            raise EditError(pointer, str(exc)) from None

    # ------------------------------------------------------------------ operations

    def apply(self, op: str, pointer: str, value: Any = None, *, after: str | None = None) -> EditRecord:
        """Apply one change operation; raises :class:`EditError` and leaves the reason in it."""
        if op == "replace":
            record = self.replace(pointer, value)
        elif op == "add":
            record = self.add(pointer, value, after=after)
        elif op == "remove":
            record = self.remove(pointer)
        else:
            raise EditError(pointer, f"unsupported operation {op!r}")
        self._avoid_empty_first_item(pointer)
        self.work.reindex()  # aliases and positions are recomputed for the next operation
        return record

    def _avoid_empty_first_item(self, pointer: str) -> None:
        """Write a block sequence whose first item became ``{}``/``[]`` in flow style.

        ruamel 0.19 writes invalid YAML for such a sequence when its key line has a
        comment (``- {}`` then ``- a   -``); flow style (``[{}, a]``) is always valid.
        """
        parent_ptr = pointer.rsplit("/", 1)[0] if pointer else ""
        try:
            holder, key, parent = resolve(self.work.data, parent_ptr)
        except (PointerError, ValueError):
            return
        if not (isinstance(parent, CommentedSeq) and is_block(parent) and parent and holder is not None):
            return
        first = parent[0]
        if isinstance(first, (dict, list)) and not first and self._key_line_comment(holder, key, parent):
            parent.fa.set_flow_style()

    @staticmethod
    def _key_line_comment(holder: Any, key: Any, value: Any) -> bool:
        """Whether the line that introduces ``value`` (``key:``) carries an end-of-line comment."""
        if isinstance(holder, CommentedMap) and eol_token(holder, key) is not None:
            return True
        own = getattr(value.ca, "comment", None)
        return bool(own and own[0] is not None and not own[0].value.startswith("\n"))

    def replace(self, pointer: str, value: Any) -> EditRecord:
        parent, key, old = self._resolve(pointer)
        if parent is None:
            raise EditError(pointer, "the whole document cannot be replaced")
        self._check_merge(parent, pointer)
        if strict_equal(to_plain(old), value):
            return EditRecord("replace", pointer)  # the same value: leave its text exactly as it is
        sites = self.work.alias_sites(pointer)
        slots = [(parent, key)]
        for site in self.work.value_sites(pointer):
            site_parent, site_key, site_value = resolve(self.work.data, site)
            # Identity, not equality: five equal "[*dp, 1]" lists are five different slots.
            if site_value is old and not any(p is site_parent and k == site_key for p, k in slots):
                slots.append((site_parent, site_key))
        hints = StyleHints(
            layout=self.layout,
            like=old,
            like_literal=self._literal(parent, key),
            sibling_strings=tuple(v for v in (parent.values() if isinstance(parent, dict) else parent)
                                  if isinstance(v, str)),
            in_flow=not is_block(parent),
        )
        new = self._build(value, hints, pointer)
        first_sites = FirstSites(self.work.data)
        # The slot that writes the old value in full also carries the comment lines after it.
        written = next(((p, k) for p, k in slots if first_sites.written_here(p, k)), slots[0])
        moved = take_after(*written, first_sites) if is_block(written[0]) else ""
        self._keep_gap(parent, key, new)
        if not (is_block(new) and len(new)):
            # Comment lines between "key:" and the first entry of the old block had their place inside
            # it; in front of a one-line value ruamel would write the value below them (invalid YAML).
            for slot_parent, slot_key in slots:
                entry = slot_parent.ca.items.get(slot_key) if isinstance(slot_parent, CommentedMap) else None
                if entry is not None and len(entry) > 3:
                    entry[3] = None
        for slot_parent, slot_key in slots:
            slot_parent[slot_key] = new
        if moved:
            give_after(*written, moved, FirstSites(self.work.data))
        return EditRecord("replace", pointer, changed=[pointer, *sites], notes=self._alias_note(pointer, sites))

    def add(self, pointer: str, value: Any, *, after: str | None = None) -> EditRecord:
        parent_ptr, token = _parent_pointer(pointer)
        _, _, parent = self._resolve(parent_ptr)
        if isinstance(parent, dict):
            try:
                lookup(parent, token)
            except PointerError:
                pass
            else:
                if after is not None:
                    raise EditError(pointer, "the key exists already; insert_after only applies to new keys")
                record = self.replace(pointer, value)
                record.op = "add"
                return record
            return self._add_key(pointer, parent_ptr, parent, token, value, after)
        if isinstance(parent, list):
            return self._add_item(pointer, parent_ptr, parent, token, value)
        raise EditError(pointer, f"cannot add to a {type_name(parent)} (the parent must be a mapping or a sequence)")

    def _add_key(self, pointer: str, parent_ptr: str, parent: CommentedMap, token: str, value: Any,
                 after: str | None) -> EditRecord:
        self._check_merge(parent, pointer)
        own = _own_keys(parent)
        if after is None:
            pos = len(own)
        else:
            try:
                sibling = lookup(parent, after)
            except PointerError:
                raise EditError(pointer, f"insert_after names {after!r}, which is not a key of {parent_ptr or 'the root'}"
                                ) from None
            pos = own.index(sibling) + 1
        try:
            new_key = build_key(token, own, self.layout)
        except UnsupportedValue as exc:
            raise EditError(pointer, str(exc)) from None
        hints = StyleHints(
            layout=self.layout,
            sibling_strings=tuple(v for v in parent.values() if isinstance(v, str)),
            in_flow=not is_block(parent),
        )
        new = self._build(value, hints, pointer)
        sites = self.work.alias_sites(parent_ptr) if parent_ptr else []
        first_sites = FirstSites(self.work.data)
        previous = own[pos - 1] if pos > 0 else None
        moved = take_after(parent, previous, first_sites) if previous is not None and is_block(parent) else ""
        parent.insert(pos, new_key, new)
        if moved:
            give_after(parent, new_key, moved, FirstSites(self.work.data))
        child_sites = [s + "/" + pointer_escape(token) for s in sites]
        return EditRecord("add", pointer, changed=[pointer, *child_sites], notes=self._alias_note(pointer, child_sites))

    def _add_item(self, pointer: str, parent_ptr: str, parent: CommentedSeq, token: str, value: Any) -> EditRecord:
        if token == "-":
            index = len(parent)
        elif token.isdigit() and (token == "0" or not token.startswith("0")) and int(token) <= len(parent):
            index = int(token)
        else:
            raise EditError(pointer, f"{token!r} is not a valid position to add at (0..{len(parent)} or '-')")
        hints = StyleHints(
            layout=self.layout,
            sibling_strings=tuple(v for v in parent if isinstance(v, str)),
            in_flow=not is_block(parent),
        )
        new = self._build(value, hints, pointer)
        sites = self.work.alias_sites(parent_ptr) if parent_ptr else []
        first_sites = FirstSites(self.work.data)
        moved = take_after(parent, index - 1, first_sites) if index > 0 and is_block(parent) else ""
        parent.insert(index, new)
        if moved:
            give_after(parent, index, moved, FirstSites(self.work.data))
        child_sites = [f"{s}/{index}" for s in sites]
        return EditRecord("add", pointer, changed=[pointer, *child_sites], notes=self._alias_note(pointer, child_sites))

    def remove(self, pointer: str) -> EditRecord:
        parent, key, old = self._resolve(pointer)
        if parent is None:
            raise EditError(pointer, "the whole document cannot be removed")
        self._check_merge(parent, pointer)
        parent_ptr, _ = _parent_pointer(pointer)
        through = self.work.slot_sites(pointer)
        notes = self._alias_note(pointer, through)
        first_sites = FirstSites(self.work.data)
        name = anchor_name(old)
        users = self.work.value_sites(pointer)
        if name is not None and users and (not isinstance(old, (dict, list)) or first_sites.written_here(parent, key)):
            notes.append(
                f"{pointer} defines the anchor &{name}, which is still used at {', '.join(users)}; "
                f"the value is now written in full at {users[0]}"
            )
        rehome = ""
        if is_block(parent):
            pre = take_pre(parent, key) if isinstance(parent, CommentedMap) else ""
            rehome = pre + take_after(parent, key, first_sites)
        dropped_tokens = entry_tokens(parent, key)
        if isinstance(parent, CommentedMap):
            own = _own_keys(parent)
            pos = own.index(key)
            del parent[key]
            parent.ca.items.pop(key, None)  # ruamel keeps comments of deleted keys and would revive them
            previous = own[pos - 1] if pos > 0 else None
            following = own[pos + 1] if pos + 1 < len(own) else None
        else:
            pos = key
            del parent[key]  # CommentedSeq shifts the comments of the later items
            previous = pos - 1 if pos > 0 else None
            following = pos if pos < len(parent) else None
        forget_tokens(self.work.data, dropped_tokens)
        if not len(parent):
            # An empty collection can only be written "{}"/"[]"; flagged block, ruamel would put the
            # comments of its key line between the key and the "{}".
            parent.fa.set_flow_style()
        if rehome:
            self._rehome(parent_ptr, parent, previous, following, rehome)
        return EditRecord("remove", pointer, changed=[pointer, *through], notes=notes)

    def _rehome(self, parent_ptr: str, parent: Any, previous: Any, following: Any, text: str) -> None:
        """Put the comment lines of a removed entry back where the entry was.

        In order of preference: after the previous entry; before the next entry at
        this or an outer level (when the previous entry ends in an ``*alias``, which
        cannot carry comments); after the parent's key line.
        """
        if previous is not None and give_after(parent, previous, text, FirstSites(self.work.data)):
            return
        if following is not None and isinstance(parent, CommentedMap):
            give_pre(parent, following, text)
            return
        ptr = parent_ptr
        while previous is not None and ptr:
            up_ptr, token = _parent_pointer(ptr)
            _, _, up = resolve(self.work.data, up_ptr)
            if isinstance(up, CommentedMap):
                own = _own_keys(up)
                key = lookup(up, token)
                pos = own.index(key)
                if pos + 1 < len(own):
                    give_pre(up, own[pos + 1], text)
                    return
            ptr = up_ptr
        if parent_ptr:
            # First entry of a nested container (or it is now empty, written "{}" on its key line):
            # the lines go right after the parent's key line.
            grand, gkey, _ = resolve(self.work.data, parent_ptr)
            give_after_key_line(grand, gkey, text)
