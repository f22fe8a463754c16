"""Attribute values of MindSpore IR dumps: bracket matching, splitting and decoding.

Contract
--------
* :func:`find_close` and :func:`split_top` understand ``()``, ``[]``, ``{}`` nesting and skip
  double-quoted strings (``"a, (b"`` is one item). They never raise: an unclosed bracket gives
  ``-1`` / a best-effort split of what is there.
* :func:`decode_value` turns one attribute value as written in an IR dump into a Python value and
  never raises. Typed 2.3+ forms and the bare <= 2.2 forms both decode:

  ==================================  ==========================================
  written                             decoded
  ==================================  ==========================================
  ``Bool(1)`` ``true`` ``True``       ``True`` (``bool``)
  ``I64(42)`` ``U64(0)`` ``0``        ``42`` (``int``; the width tag is dropped)
  ``F32(0.1)``                        ``0.1`` (``float``)
  ``F16`` ``F32`` ``Float32``         :class:`TypeName` (a ``str``: ``"F16"``)
  ``"sum"``                           ``"sum"`` (``str``)
  ``sum`` ``4-6301172352641561019``   :class:`Bare` (a ``str``: ``"sum"``)
  ``[a, b]`` / ``(a, b)``             ``list`` / ``tuple`` (``(0)`` is a 1-tuple)
  ``None``                            ``None``
  ``Tensor(shape=[4], ...)``          :class:`TensorValue`
  ``UMonad[U]`` ``IOMonad[IO]``       :class:`Monad` (a ``str``)
  anything else                       :class:`Raw` (a ``str`` holding the text)
  ==================================  ==========================================

* :func:`decode_block` decodes the inside of ``{k: v, k2: v2}`` into a ``dict`` (keys as written,
  later duplicates win).
* :func:`render_value` writes a decoded value back in 2.3+ syntax (ints as ``I64(n)``); for values
  made of the types above ``decode_value(render_value(v)) == v``.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = [
    "Bare",
    "Monad",
    "Raw",
    "TensorValue",
    "TypeName",
    "decode_block",
    "decode_value",
    "find_close",
    "render_value",
    "split_top",
]

_OPENERS = "([{"
_CLOSERS = ")]}"
_PAIR = {"(": ")", "[": "]", "{": "}"}
_BRACKET_OR_QUOTE = re.compile(r'[()\[\]{}"]')
_SPLIT_TOKENS = re.compile(r'[()\[\]{}",]')


class _TaggedStr(str):
    """A ``str`` whose repr names its kind, so decoded values read unambiguously in tests and dumps."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str.__repr__(self)})"


class TypeName(_TaggedStr):
    """A type used as a value: ``dst_type: F16`` decodes to ``TypeName("F16")``."""

    __slots__ = ()


class Bare(_TaggedStr):
    """An unquoted word (<= 2.2 attribute values such as ``op: sum``; names in ``[x, y]``)."""

    __slots__ = ()


class Monad(_TaggedStr):
    """A monad value operand such as ``UMonad[U]``."""

    __slots__ = ()


class Raw(_TaggedStr):
    """Text that fits no value form; kept verbatim so nothing is lost."""

    __slots__ = ()


class TensorValue:
    """A constant tensor written as ``Tensor(shape=[4, 1], dtype=Float32, value=...)``.

    ``shape`` is ``None`` when it cannot be read; ``value`` is the value text as written (numpy
    repr, possibly spanning several lines).
    """

    __slots__ = ("shape", "dtype", "value", "raw")

    def __init__(self, shape: tuple[int, ...] | None, dtype: str | None, value: str | None, raw: str) -> None:
        self.shape = shape
        self.dtype = dtype
        self.value = value
        self.raw = raw

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TensorValue):
            return NotImplemented
        return (self.shape, self.dtype, self.value) == (other.shape, other.dtype, other.value)

    def __hash__(self) -> int:
        return hash((self.shape, self.dtype, self.value))

    def __repr__(self) -> str:
        return f"TensorValue(shape={self.shape!r}, dtype={self.dtype!r}, value={self.value!r})"


def find_close(text: str, start: int) -> int:
    """Index of the bracket closing the one at ``text[start]``, or ``-1`` if it is never closed.

    Double-quoted strings are skipped; a closer of the wrong kind is accepted as closing (the
    dumps never mix them, and accepting keeps a damaged line usable).
    """
    depth = 0
    in_str = False
    for m in _BRACKET_OR_QUOTE.finditer(text, start):
        ch = m.group()
        if in_str:
            if ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in _OPENERS:
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                return m.start()
    return -1


def bracket_balance(text: str, depth: int = 0, in_str: bool = False) -> tuple[int, bool]:
    """Net count of open brackets after ``text`` (starting from ``depth``/``in_str``).

    Used to join physical lines of one logical line; negative means more closers than openers.
    """
    for m in _BRACKET_OR_QUOTE.finditer(text):
        ch = m.group()
        if in_str:
            if ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in _OPENERS:
            depth += 1
        else:
            depth -= 1
    return depth, in_str


def split_top(text: str, sep: str = ",") -> list[str]:
    """Split ``text`` on top-level ``sep`` (outside brackets and strings); items are stripped.

    An empty or blank ``text`` gives ``[]``.
    """
    if not text or text.isspace():
        return []
    if sep == "," and not _has_nesting(text):
        return [p.strip() for p in text.split(",")]
    parts: list[str] = []
    depth = 0
    in_str = False
    last = 0
    pattern = _SPLIT_TOKENS if sep == "," else re.compile(r'[()\[\]{}"' + re.escape(sep) + "]")
    for m in pattern.finditer(text):
        ch = m.group()
        if in_str:
            if ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth -= 1
        elif depth <= 0 and ch == sep:
            parts.append(text[last : m.start()].strip())
            last = m.end()
    parts.append(text[last:].strip())
    return parts


def _has_nesting(text: str) -> bool:
    return "(" in text or "[" in text or "{" in text or '"' in text


_INT_TAGGED = re.compile(r"^(?:I|U|Int|UInt)(?:8|16|32|64)\((-?\d{1,4000})\)$")
_FLOAT_TAGGED = re.compile(r"^(?:F|BF|Float|BFloat)(?:16|32|64)\(([^()]*)\)$")
_BOOL_TAGGED = re.compile(r"^Bool\(([01])\)$")
_INT = re.compile(r"^-?\d{1,4000}$")  # int() refuses > 4300 digits
_FLOAT = re.compile(r"^-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?$")
_TYPE_NAMES = frozenset(
    [f"{p}{w}" for p in ("I", "U", "F", "BF") for w in (8, 16, 32, 64)]
    + [f"{p}{w}" for p in ("Int", "UInt", "Float", "BFloat") for w in (4, 8, 16, 32, 64)]
    + ["Bool", "Complex64", "Complex128", "C64", "C128", "String", "TypeNone", "Number"]
)
_MONAD = re.compile(r"^(?:U|IO)Monad(?:\[\w*\])?$")
_TENSOR_FIELDS = re.compile(r"^Tensor\(shape=\[([-\d, ]*)\], dtype=(\w+)(?:, value=(.*))?\)$", re.S)


# Values and blocks repeat across nodes (``Bool(1)``, ``checkpoint: Bool(1)``): decode each text once.
_value_cache: dict[str, Any] = {}
_block_cache: dict[str, tuple[tuple[str, Any], ...] | None] = {}
_CACHE_LIMIT = 100_000
_IMMUTABLE_SCALARS = (bool, int, float, str, type(None))
_MISSING: Any = object()
_MAX_DEPTH = 64


def decode_value(text: str, _depth: int = 0) -> Any:
    """Decode one attribute or operand value (see the module docstring); never raises.

    Nesting deeper than 64 brackets is kept as :class:`Raw` (no recursion error on garbage).
    """
    cached = _value_cache.get(text, _MISSING)
    if cached is not _MISSING:
        return cached
    if _depth > _MAX_DEPTH:
        return Raw(text.strip())
    value = _decode_value(text, _depth)
    # Only immutable results are shared between callers.
    if isinstance(value, _IMMUTABLE_SCALARS) and len(_value_cache) < _CACHE_LIMIT:
        _value_cache[text] = value
    return value


def _decode_value(text: str, depth: int) -> Any:
    t = text.strip()
    if not t:
        return Raw(t)
    c = t[0]
    if c == '"':
        if len(t) >= 2 and t[-1] == '"' and t.find('"', 1) == len(t) - 1:
            return t[1:-1]
        return Raw(t)
    if c == "[" or c == "(":
        if find_close(t, 0) != len(t) - 1:
            return Raw(t)
        items = [decode_value(x, depth + 1) for x in split_top(t[1:-1])]
        return items if c == "[" else tuple(items)
    m = _BOOL_TAGGED.match(t)
    if m:
        return m.group(1) == "1"
    m = _INT_TAGGED.match(t)
    if m:
        return int(m.group(1))
    m = _FLOAT_TAGGED.match(t)
    if m:
        try:
            return float(m.group(1))
        except ValueError:
            return Raw(t)
    if t in ("true", "True"):
        return True
    if t in ("false", "False"):
        return False
    if t == "None":
        return None
    if _INT.match(t):
        return int(t)
    if _FLOAT.match(t):
        return float(t)
    if t in _TYPE_NAMES:
        return TypeName(t)
    if t.startswith("Tensor("):
        return _decode_tensor(t)
    if _MONAD.match(t):
        return Monad(t)
    if _has_nesting(t) or ", " in t or ": " in t:
        return Raw(t)
    return Bare(t)


def _decode_tensor(t: str) -> Any:
    m = _TENSOR_FIELDS.match(t)
    if m is None or find_close(t, len("Tensor")) != len(t) - 1:
        return Raw(t)
    dims = m.group(1).strip()
    try:
        shape = tuple(int(x) for x in dims.split(",")) if dims else ()
    except ValueError:
        shape = None
    value = m.group(3)
    return TensorValue(shape, m.group(2), value.strip() if value is not None else None, t)


def decode_block(inner: str) -> dict[str, Any]:
    """Decode the text between ``{`` and ``}`` of an attribute block into a dict.

    An item without ``:`` is kept under its own text with value :class:`Raw` ``""`` so that no
    text is lost silently. Each call returns a new dict (lists inside are new too).
    """
    cached = _block_cache.get(inner, _MISSING)
    if cached is not _MISSING and cached is not None:
        return {k: _thaw(v) for k, v in cached}
    out: dict[str, Any] = {}
    for item in split_top(inner):
        if not item:
            continue
        key, sep, value = item.partition(":")
        if not sep:
            out[item] = Raw("")
            continue
        out[key.strip()] = decode_value(value)
    if cached is _MISSING and len(_block_cache) < _CACHE_LIMIT:
        # Blocks repeat (same op, same attrs); cache those made of values that can be copied.
        # Store copies: the caller owns (and may mutate) the lists in ``out``.
        _block_cache[inner] = (
            tuple((k, _thaw(v)) for k, v in out.items()) if all(_copyable(v) for v in out.values()) else None
        )
    return out


def _copyable(value: Any) -> bool:
    """True when :func:`_thaw` can give an independent copy (no list hidden in a tuple)."""
    if isinstance(value, list):
        return all(_copyable(v) for v in value)
    if isinstance(value, tuple):
        return all(isinstance(v, _IMMUTABLE_SCALARS) or (isinstance(v, tuple) and _copyable(v)) for v in value)
    return isinstance(value, _IMMUTABLE_SCALARS)


def _thaw(value: Any) -> Any:
    if type(value) is list:
        return [_thaw(v) for v in value]
    return value


def render_value(value: Any) -> str:
    """Write a decoded value in 2.3+ syntax (inverse of :func:`decode_value` for its outputs)."""
    if value is None:
        return "None"
    if isinstance(value, bool):
        return "Bool(1)" if value else "Bool(0)"
    if isinstance(value, int):
        return f"I64({value})"
    if isinstance(value, float):
        return f"F32({value!r})"
    if isinstance(value, (TypeName, Bare, Monad, Raw)):
        return str(value)
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, list):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(render_value(v) for v in value) + ")"
    if isinstance(value, TensorValue):
        return value.raw
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {render_value(v)}" for k, v in value.items()) + "}"
    return str(value)
