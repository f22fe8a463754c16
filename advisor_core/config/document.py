"""Round-trip YAML training configs, addressed by JSON pointer.

A :class:`ConfigDocument` is one mindformers training YAML loaded with ruamel.yaml's
pure-Python round-trip loader (the C loader keeps no comments), together with its
original text and the layout the file is written in (indentation, how it spells
booleans, its usual quote character), which ruamel does not detect by itself.

Contracts:

* Loading never raises for bad input: a YAML syntax error, a duplicate key, an empty
  document, several documents in one file, a root that is not a mapping, a
  recursive alias or an alias bomb each add exactly one error diagnostic with
  ``file:line:column`` and give ``None``.
* Pointers are RFC 6901 JSON pointers: ``""`` is the whole document, ``/a/b/0``
  walks mappings by key and sequences by index; ``~1`` stands for ``/`` and ``~0``
  for ``~``. A mapping key that is not a string (``1: x``) is matched by its
  ``str()``. Keys merged in with ``<<`` are visible when reading.
* Aliases are resolved as loaded: ``dataset_config: *train_dataset`` *is* the
  mapping anchored at ``train_dataset``, so ``/train_dataset_task/dataset_config/x``
  and ``/train_dataset/x`` name the same value. :meth:`ConfigDocument.alias_sites`
  lists every other pointer that names the same value.
* Positions are 1-based ``(line, column)``; columns count Unicode code points.
  For a pointer that goes through an alias the position is where the anchored
  node is written (that is where the text is).
"""

from __future__ import annotations

import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, overload

from ruamel.yaml import YAML
from ruamel.yaml.anchor import Anchor
from ruamel.yaml.comments import CommentedMap, CommentedSeq, TaggedScalar
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.scalarbool import ScalarBoolean
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from advisor_core.diagnostics import Diagnostic, DiagnosticSink
from advisor_core.textio import read_text

__all__ = [
    "MAX_EXPANDED_NODES",
    "YAML_WIDTH",
    "ConfigDocument",
    "ConfigLoadError",
    "PointerError",
    "YamlLayout",
    "anchor_name",
    "detect_layout",
    "is_block",
    "lookup",
    "make_yaml",
    "pointer_escape",
    "pointer_join",
    "pointer_split",
    "pointer_unescape",
    "resolve",
    "to_plain",
]

#: Line width given to ruamel: wide enough that no scalar or flow list is ever re-wrapped.
YAML_WIDTH = 1_000_000

#: Most nodes an alias-expanded walk may visit; beyond this the file is an alias bomb, not a config.
MAX_EXPANDED_NODES = 200_000

_INDEX = re.compile(r"0|[1-9][0-9]*")
_BOOL_TEXT = re.compile(r"(true|false|True|False|TRUE|FALSE)\b")
_LITERAL = re.compile(r"[-+.\w]+")
_ANCHOR_PREFIX = re.compile(r"&[^\s,\[\]{}]+\s+")
_BOOL_STYLES = {"title": ("False", "True"), "lower": ("false", "true"), "upper": ("FALSE", "TRUE")}


# --------------------------------------------------------------------------- pointers


def pointer_escape(token: str | int) -> str:
    """Escape one reference token (RFC 6901 §3: ``~`` → ``~0`` first, then ``/`` → ``~1``)."""
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer_unescape(token: str) -> str:
    """Unescape one reference token; a ``~`` not followed by ``0`` or ``1`` is an error."""
    if re.search(r"~(?![01])", token):
        raise ValueError(f"invalid escape in JSON pointer token {token!r} (only ~0 and ~1 are allowed)")
    # Order matters (RFC 6901 §4): "~01" must become "~1", not "/".
    return token.replace("~1", "/").replace("~0", "~")


def pointer_split(ptr: str) -> list[str]:
    """Split a JSON pointer into unescaped tokens: ``"/a~1b/0"`` → ``["a/b", "0"]``; ``""`` → ``[]``."""
    if ptr == "":
        return []
    if not ptr.startswith("/"):
        raise ValueError(f"JSON pointer must be empty or start with '/': {ptr!r}")
    return [pointer_unescape(t) for t in ptr[1:].split("/")]


def pointer_join(*parts: str | int) -> str:
    """Build a pointer from unescaped tokens: ``pointer_join("a/b", 0)`` → ``"/a~1b/0"``."""
    return "".join("/" + pointer_escape(p) for p in parts)


class PointerError(LookupError):
    """A pointer does not resolve; ``message`` says at which token and why."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(f"{pointer}: {message}")
        self.pointer = pointer
        self.message = message


# --------------------------------------------------------------------------- tree helpers


def is_block(node: Any) -> bool:
    """True for a mapping or sequence written in block style (one entry per line)."""
    if not isinstance(node, (CommentedMap, CommentedSeq)):
        return False
    return not node.fa.flow_style()


def anchor_name(node: Any) -> str | None:
    """The anchor name (``&name``) a loaded node carries, or ``None``.

    Reads the attribute directly: ruamel's ``.anchor`` property *creates* an empty
    anchor on first access, which would change the object.
    """
    anchor = getattr(node, Anchor.attrib, None)
    return None if anchor is None else anchor.value


def lookup(container: Any, token: str, *, pointer: str = "") -> Any:
    """The key (mapping) or index (sequence) of ``container`` that ``token`` names.

    Mapping keys are matched exactly first, then by ``str(key)`` for non-string keys.
    Raises :class:`PointerError` when there is no such entry.
    """
    if isinstance(container, dict):
        if token in container:
            for key in container:  # return the stored key object (it carries quote style)
                if isinstance(key, str) and key == token:
                    return key
        for key in container:
            if not isinstance(key, str) and str(key) == token:
                return key
        raise PointerError(pointer, f"no key {token!r}")
    if isinstance(container, list):
        if not _INDEX.fullmatch(token):
            raise PointerError(pointer, f"{token!r} is not a sequence index")
        index = int(token)
        if index >= len(container):
            raise PointerError(pointer, f"index {index} is out of range (the sequence has {len(container)} items)")
        return index
    raise PointerError(pointer, f"cannot descend into a {type_name(container)} with {token!r}")


def resolve(root: Any, pointer: str) -> tuple[Any, Any, Any]:
    """Walk ``pointer`` from ``root``; returns ``(parent, key, value)`` (``(None, None, root)`` for ``""``)."""
    parent: Any = None
    key: Any = None
    node = root
    walked = ""
    for token in pointer_split(pointer):
        walked += "/" + pointer_escape(token)
        key = lookup(node, token, pointer=walked)
        parent, node = node, node[key]
    return parent, key, node


def owner_of(mapping: CommentedMap, key: Any) -> CommentedMap:
    """The mapping that really holds ``key``: ``mapping`` itself, or the one merged in with ``<<``."""
    if key in getattr(mapping, "_ok", ()):  # own keys (ruamel keeps merged ones in the dict too)
        return mapping
    for source in getattr(mapping, "merge", ()):
        candidate = source[1] if isinstance(source, tuple) else source
        if isinstance(candidate, CommentedMap) and key in candidate:
            return owner_of(candidate, key)
    return mapping


def type_name(value: Any) -> str:
    """A YAML-flavoured type name for messages."""
    if isinstance(value, dict):
        return "mapping"
    if isinstance(value, list):
        return "sequence"
    if value is None:
        return "null"
    if isinstance(value, (bool, ScalarBoolean)):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    return type(value).__name__


def to_plain(node: Any, _memo: dict[int, Any] | None = None) -> Any:
    """Convert a round-trip tree to plain ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``.

    A node reached through several aliases becomes one shared Python object, so a
    change to it is seen at every alias site (as in the YAML). ``ScalarBoolean``
    (an ``int`` in ruamel) becomes ``bool``; tagged scalars become their value.
    """
    memo: dict[int, Any] = {} if _memo is None else _memo
    if isinstance(node, dict):
        if id(node) in memo:
            return memo[id(node)]
        out: dict[Any, Any] = {}
        memo[id(node)] = out
        for key, value in node.items():
            out[to_plain(key, memo)] = to_plain(value, memo)
        return out
    if isinstance(node, list):
        if id(node) in memo:
            return memo[id(node)]
        seq: list[Any] = []
        memo[id(node)] = seq
        seq.extend(to_plain(v, memo) for v in node)
        return seq
    if isinstance(node, (bool, ScalarBoolean)):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, TaggedScalar):
        return to_plain(node.value, memo)
    if isinstance(node, tuple):
        return tuple(to_plain(v, memo) for v in node)
    return node


# --------------------------------------------------------------------------- layout


@dataclass(frozen=True)
class YamlLayout:
    """How a file is written, so that new text looks like the old.

    ``mapping``/``sequence``/``offset`` are ruamel's ``indent()`` arguments (for
    mindformers files 2/4/2: ``callbacks:`` then ``  - type: ...``). ``bools`` is the
    spelling of ``(False, True)``; ``quote`` the quote character used for new strings
    that must be quoted; ``flow_scalar_lists`` whether lists of scalars are written
    ``[a, b]``; ``crlf`` whether most lines end in ``\\r\\n``; ``final_newline`` whether the
    text ends with a line break.
    """

    mapping: int = 2
    sequence: int = 4
    offset: int = 2
    bools: tuple[str, str] = ("False", "True")
    quote: str = '"'
    flow_scalar_lists: bool = True
    crlf: bool = False
    final_newline: bool = True


def make_yaml(layout: YamlLayout | None = None) -> YAML:
    """A pure-Python round-trip ``YAML`` instance configured for ``layout``."""
    lay = layout or YamlLayout()
    yaml = YAML(typ="rt", pure=True)
    yaml.preserve_quotes = True
    yaml.width = YAML_WIDTH
    yaml.indent(mapping=lay.mapping, sequence=lay.sequence, offset=lay.offset)
    yaml.boolean_representation = list(lay.bools)  # per instance: no global representer change
    yaml.allow_unicode = True
    yaml.brace_single_entry_mapping_in_flow_sequence = True  # "[{k: 1}]", not the terse "[k: 1]"
    return yaml


def _walk_containers(node: Any, seen: set[int] | None = None) -> Iterator[Any]:
    """Every mapping and sequence once (aliases are not followed twice)."""
    seen = set() if seen is None else seen
    if isinstance(node, (CommentedMap, CommentedSeq)) and id(node) not in seen:
        seen.add(id(node))
        yield node
        for child in node.values() if isinstance(node, dict) else node:
            yield from _walk_containers(child, seen)


def _scalar_position(container: Any, key: Any) -> tuple[int, int] | None:
    try:
        if isinstance(container, CommentedMap):
            line, col = container.lc.value(key)
        else:
            line, col = container.lc.item(key)
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    return int(line), int(col)


def literal_at(lines: list[str], pos: tuple[int, int] | None) -> str | None:
    """The bool/number token written at a 0-based position (``"False"``, ``"1.e-8"``), if any."""
    if pos is None or pos[0] >= len(lines):
        return None
    line, col = lines[pos[0]], pos[1]
    anchor = _ANCHOR_PREFIX.match(line, col)  # "&dp 1": the position is the anchor's
    if anchor:
        col = anchor.end()
    match = _LITERAL.match(line, col)
    return match.group(0) if match else None


def _mode(values: list[Any], default: Any) -> Any:
    if not values:
        return default
    counts = Counter(values)
    best = max(counts.values())
    # Deterministic tie-break: the first value seen with the top count.
    return next(v for v in values if counts[v] == best)


def detect_layout(data: CommentedMap, text: str) -> YamlLayout:
    """Guess the file's layout from the loaded tree and its text (ruamel does not)."""
    lines = text.split("\n")
    map_steps: list[int] = []
    seq_shapes: list[tuple[int, int]] = []
    bool_spellings: list[str] = []
    quotes: list[str] = []
    scalar_lists: list[bool] = []
    for node in _walk_containers(data):
        items = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        if isinstance(node, CommentedSeq) and node and all(not isinstance(v, (dict, list)) for v in node):
            scalar_lists.append(not is_block(node))
        for key, value in items:
            if isinstance(value, (bool, ScalarBoolean)):
                token = literal_at(lines, _scalar_position(node, key))
                if token and _BOOL_TEXT.fullmatch(token):
                    bool_spellings.append("lower" if token.islower() else "upper" if token.isupper() else "title")
            elif isinstance(value, DoubleQuotedScalarString):
                quotes.append('"')
            elif isinstance(value, SingleQuotedScalarString):
                quotes.append("'")
            if not (isinstance(node, CommentedMap) and is_block(node) and is_block(value)):
                continue
            try:
                key_col = node.lc.key(key)[1]
                if isinstance(value, CommentedMap) and value:
                    map_steps.append(value.lc.key(next(iter(value)))[1] - key_col)
                elif isinstance(value, CommentedSeq) and value:
                    dash_col = value.lc.col
                    item_col = value.lc.item(0)[1]
                    seq_shapes.append((item_col - key_col, dash_col - key_col))
            except (KeyError, IndexError, TypeError, AttributeError):
                continue
    mapping = _mode([s for s in map_steps if s > 0], 2)
    sequence, offset = _mode([s for s in seq_shapes if s[0] >= s[1] + 2 and s[1] >= 0], (mapping + 2, mapping))
    bools = _BOOL_STYLES[_mode(bool_spellings, "title")]
    crlf = text.count("\r\n") * 2 > text.count("\n")  # most lines end in CRLF: new lines will too
    return YamlLayout(
        mapping=mapping,
        sequence=sequence,
        offset=offset,
        bools=bools,
        quote=_mode(quotes, '"'),
        flow_scalar_lists=_mode(scalar_lists, True),
        crlf=crlf,
        final_newline=text.endswith("\n"),
    )


# --------------------------------------------------------------------------- loading


class ConfigLoadError(ValueError):
    """Raised by :meth:`ConfigDocument.from_text` without a sink; carries the diagnostic."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.render())
        self.diagnostic = diagnostic


class _Recursive(Exception):
    def __init__(self, pointer: str) -> None:
        super().__init__(pointer)
        self.pointer = pointer


class _TooBig(Exception):
    pass


@dataclass
class _Index:
    """Where every value sits, with aliases expanded (built once per tree)."""

    slots: dict[tuple[int, Any], list[str]] = field(default_factory=dict)
    nodes: dict[int, list[str]] = field(default_factory=dict)
    order: dict[str, int] = field(default_factory=dict)


def _build_index(root: CommentedMap) -> _Index:
    index = _Index()
    stack: set[int] = set()
    budget = [MAX_EXPANDED_NODES]

    def record(owner: Any, key: Any, ptr: str, value: Any) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooBig
        index.order.setdefault(ptr, len(index.order))
        index.slots.setdefault((id(owner), key), []).append(ptr)
        # Only containers and anchored scalars can be shared; unanchored ints and
        # strings may be the same Python object by interning, which means nothing.
        if isinstance(value, (dict, list)) or anchor_name(value) is not None:
            index.nodes.setdefault(id(value), []).append(ptr)

    def walk(node: Any, ptr: str) -> None:
        if not isinstance(node, (dict, list)):
            return
        if id(node) in stack:
            raise _Recursive(ptr)
        stack.add(id(node))
        if isinstance(node, dict):
            for key, value in node.items():
                child = ptr + "/" + pointer_escape(str(key))
                record(owner_of(node, key) if isinstance(node, CommentedMap) else node, key, child, value)
                walk(value, child)
        else:
            for i, value in enumerate(node):
                child = f"{ptr}/{i}"
                record(node, i, child, value)
                walk(value, child)
        stack.discard(id(node))

    index.order[""] = 0
    walk(root, "")
    return index


def _first_content_position(text: str) -> tuple[int, int]:
    """1-based position of the first character that is not blank, comment or ``---``."""
    for n, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#") and stripped != "---":
            return n, len(line) - len(line.lstrip()) + 1
    return 1, 1


def _offset_position(text: str, offset: int) -> tuple[int, int]:
    before = text[:offset]
    line = before.count("\n") + 1
    return line, offset - (before.rfind("\n") + 1) + 1


class ConfigDocument:
    """One training YAML: the round-trip tree (:attr:`data`), the original :attr:`text`, its :attr:`path`.

    Build one with :meth:`load` (a file, diagnostics into a sink) or :meth:`from_text`.
    The tree is ruamel's: ``CommentedMap``/``CommentedSeq`` and scalar subclasses that
    compare equal to plain Python values; :meth:`plain` gives plain copies.
    """

    def __init__(self, path: Path, text: str, data: CommentedMap, layout: YamlLayout) -> None:
        self.path = path
        self.text = text
        self.data = data
        self.layout = layout
        self._index: _Index | None = None
        self._lines = text.split("\n")

    # ------------------------------------------------------------------ construction

    @classmethod
    def load(cls, path: Path, sink: DiagnosticSink) -> ConfigDocument | None:
        """Read and parse ``path``; ``None`` after one diagnostic when it is not a usable config."""
        text = read_text(path, sink, what="training config")
        if text is None:
            return None
        return cls.from_text(text, path, sink)

    @overload
    @classmethod
    def from_text(cls, text: str, path: Path | str = ..., sink: None = None) -> ConfigDocument: ...

    @overload
    @classmethod
    def from_text(cls, text: str, path: Path | str, sink: DiagnosticSink) -> ConfigDocument | None: ...

    @classmethod
    def from_text(
        cls, text: str, path: Path | str = "<text>", sink: DiagnosticSink | None = None
    ) -> ConfigDocument | None:
        """Parse ``text`` as the content of ``path``.

        With a ``sink``: problems become diagnostics and the result is ``None``.
        Without one: problems raise :class:`ConfigLoadError` (for callers that hold
        text they produced themselves, where a failure is a bug).
        """
        own_sink = DiagnosticSink() if sink is None else sink
        doc = cls._parse(text, Path(path), own_sink)
        if doc is None and sink is None:
            raise ConfigLoadError(own_sink.items[-1])
        return doc

    @classmethod
    def _parse(cls, text: str, path: Path, sink: DiagnosticSink) -> ConfigDocument | None:
        yaml = make_yaml()
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                data = yaml.load(text)
        except MarkedYAMLError as exc:
            _report_marked(exc, path, sink)
            return None
        except ReaderError as exc:
            line, col = _offset_position(text, exc.position)
            sink.error(
                "yaml-syntax",
                f"training config contains a character YAML does not allow (code point {exc.character!r})",
                path,
                line=line,
                column=col,
            )
            return None
        except (YAMLError, RecursionError, ValueError, TypeError) as exc:
            # ruamel raises plain errors for a few inputs (deep nesting, odd tags): still one diagnostic.
            line, col = _first_content_position(text)
            sink.error("yaml-syntax", f"training config is not valid YAML: {exc}", path, line=line, column=col)
            return None
        for warning in caught:
            first = str(warning.message).strip().splitlines()[0] if str(warning.message).strip() else "warning"
            sink.warning("yaml-warning", f"YAML: {first}", path)
        if data is None:
            sink.error("yaml-empty", "training config is empty (no YAML content, only comments or blank lines)",
                       path, line=1, column=1)
            return None
        if not isinstance(data, CommentedMap):
            line, col = _first_content_position(text)
            sink.error(
                "yaml-root-not-mapping",
                f"training config must be a mapping of keys to values at the top level, not a {type_name(data)}",
                path,
                line=line,
                column=col,
            )
            return None
        doc = cls(path, text, data, detect_layout(data, text))
        try:
            doc._index = _build_index(data)
        except _Recursive as exc:
            pos = doc.position(exc.pointer.rsplit("/", 1)[0]) or (1, 1)
            sink.error("yaml-recursive-alias", f"training config contains a recursive alias at {exc.pointer}",
                       path, line=pos[0], column=pos[1])
            return None
        except _TooBig:
            sink.error(
                "yaml-alias-expansion",
                f"training config expands to more than {MAX_EXPANDED_NODES} values through aliases",
                path,
                line=1,
                column=1,
            )
            return None
        return doc

    def copy(self) -> ConfigDocument:
        """An independent document parsed again from :attr:`text` (for editing)."""
        return ConfigDocument.from_text(self.text, self.path)

    def reindex(self) -> None:
        """Forget cached alias information after :attr:`data` was edited."""
        self._index = None

    # ------------------------------------------------------------------ reading

    @property
    def index(self) -> _Index:
        """Where every value sits, aliases expanded: ``slots``/``nodes`` → pointers, ``order`` of pointers."""
        if self._index is None:
            self._index = _build_index(self.data)
        return self._index

    def resolve(self, pointer: str) -> tuple[Any, Any, Any]:
        """``(parent, key, value)`` for ``pointer``; raises :class:`PointerError`/``ValueError``."""
        return resolve(self.data, pointer)

    def get(self, pointer: str, default: Any = None) -> Any:
        """The round-trip value at ``pointer``, or ``default`` when it does not exist."""
        try:
            return self.resolve(pointer)[2]
        except PointerError:
            return default

    def exists(self, pointer: str) -> bool:
        """Whether ``pointer`` names a value (a key whose value is ``null`` exists)."""
        try:
            self.resolve(pointer)
        except PointerError:
            return False
        return True

    def plain(self, pointer: str = "", default: Any = None) -> Any:
        """Plain-Python copy of the value at ``pointer`` (see :func:`to_plain`), or ``default``."""
        try:
            return to_plain(self.resolve(pointer)[2])
        except PointerError:
            return default

    def _lc_position(self, pointer: str, *, value: bool) -> tuple[int, int] | None:
        try:
            parent, key, node = self.resolve(pointer)
        except (PointerError, ValueError):
            return None
        try:
            if parent is None:
                line, col = node.lc.line, node.lc.col
            elif isinstance(parent, CommentedMap):
                holder = owner_of(parent, key)
                line, col = holder.lc.value(key) if value else holder.lc.key(key)
            elif isinstance(parent, CommentedSeq):
                line, col = parent.lc.item(key)
            else:
                return None
        except (KeyError, IndexError, TypeError, AttributeError):
            return None  # a node added after loading has no position
        if line is None or col is None:
            return None
        return int(line) + 1, int(col) + 1

    def position(self, pointer: str) -> tuple[int, int] | None:
        """1-based ``(line, column)`` of the key (mapping entry) or the item (sequence element)."""
        return self._lc_position(pointer, value=False)

    def value_position(self, pointer: str) -> tuple[int, int] | None:
        """1-based ``(line, column)`` where the value at ``pointer`` starts."""
        return self._lc_position(pointer, value=True)

    def literal(self, pointer: str) -> str | None:
        """How a bool or number at ``pointer`` is spelled in the text (``"False"``, ``"1.e-8"``), else ``None``."""
        value = self.get(pointer)
        if isinstance(value, (dict, list, str)) or value is None:
            return None
        pos = self.value_position(pointer)
        return literal_at(self._lines, None if pos is None else (pos[0] - 1, pos[1] - 1))

    def anchor_of(self, pointer: str) -> str | None:
        """Name of the anchor on the value at ``pointer`` or on its nearest anchored ancestor."""
        try:
            tokens = pointer_split(pointer)
            node: Any = self.data
            found = anchor_name(node)
            walked = ""
            for token in tokens:
                walked += "/" + pointer_escape(token)
                node = node[lookup(node, token, pointer=walked)]
                found = anchor_name(node) or found
        except (PointerError, ValueError):
            return None
        return found

    def slot_sites(self, pointer: str) -> list[str]:
        """Other pointers to the very same slot, reached through an alias of an ancestor (document order)."""
        return self._sites(pointer, values=False)

    def value_sites(self, pointer: str) -> list[str]:
        """Other slots that hold the same anchored or shared value (``*dp`` for ``&dp``), in document order."""
        return self._sites(pointer, slots=False)

    def alias_sites(self, pointer: str) -> list[str]:
        """Every *other* pointer that names the same value, in document order.

        Non-empty when the value, or an ancestor of it, is an anchored node used
        through aliases: for ``/train_dataset/num_parallel_workers`` in a file with
        ``dataset_config: *train_dataset`` it is
        ``["/train_dataset_task/dataset_config/num_parallel_workers"]``; for an
        anchored scalar ``data_parallel: &dp 1`` it lists each ``*dp``.
        """
        return self._sites(pointer)

    def _sites(self, pointer: str, *, slots: bool = True, values: bool = True) -> list[str]:
        try:
            parent, key, value = self.resolve(pointer)
        except (PointerError, ValueError):
            return []
        if parent is None:
            return []
        owner = owner_of(parent, key) if isinstance(parent, CommentedMap) else parent
        index = self.index
        sites: set[str] = set()
        if slots:
            sites.update(index.slots.get((id(owner), key), []))
        if values and (isinstance(value, (dict, list)) or anchor_name(value) is not None):
            sites.update(index.nodes.get(id(value), []))
            if not slots:
                sites.difference_update(index.slots.get((id(owner), key), []))
        sites.discard(pointer)
        canonical = self._canonical(pointer)
        sites.discard(canonical)
        return sorted(sites, key=lambda p: index.order.get(p, len(index.order)))

    def _canonical(self, pointer: str) -> str:
        """The pointer spelled with the stored keys (``/1`` for an int key), for comparisons."""
        try:
            tokens = pointer_split(pointer)
            node: Any = self.data
            out = ""
            for token in tokens:
                key = lookup(node, token, pointer=out)
                out += "/" + pointer_escape(str(key))
                node = node[key]
        except (PointerError, ValueError):
            return pointer
        return out

    def iter_pointers(self) -> Iterator[str]:
        """Every pointer in the document, in document order, aliases expanded (root excluded)."""
        return (p for p in sorted(self.index.order, key=self.index.order.__getitem__) if p)


def _report_marked(exc: MarkedYAMLError, path: Path, sink: DiagnosticSink) -> None:
    mark = exc.problem_mark or exc.context_mark
    line = mark.line + 1 if mark is not None else None
    col = mark.column + 1 if mark is not None else None
    problem = (exc.problem or "").strip()
    context = (exc.context or "").strip()
    name = type(exc).__name__
    if name == "DuplicateKeyError":
        sink.error("yaml-duplicate-key", f"training config has a duplicate key: {problem}", path, line=line, column=col)
    elif name == "ComposerError" and "single document" in context:
        sink.error(
            "yaml-multiple-documents",
            "training config holds more than one YAML document (a second one starts here); expected exactly one",
            path,
            line=line,
            column=col,
        )
    else:
        what = f"{problem} ({context})" if context and problem else (problem or context or str(exc).strip())
        sink.error("yaml-syntax", f"training config is not valid YAML: {what}", path, line=line, column=col)
