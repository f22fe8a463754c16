"""Type lines after a node: classification by content and decoding.

A node is followed by up to four ``: (...)`` lines (none with ``MS_DEV_DUMP_IR_FORMAT=0``). The
first is the host/abstract type line; the others are recognised by content, not position
(spec §2.5):

* ``S:``/``V:`` elements → symbolic shapes (kept raw);
* ``<DtypexFormat[const vector]{..}>`` elements → device types;
* no ``<`` and ``->`` → kernel object types (kept raw);
* no ``<`` and no ``->`` with a ``/`` or ``-opN`` → the 1.x scope line ``: (Default/.../Conv2D-op89)``;
* ``: full_name_with_scope: (...)`` (dump.md form) → scope.

Decoders never raise; what cannot be read keeps its ``raw`` text with ``None`` fields.
Decoded :class:`TensorType`/:class:`DeviceType` objects are cached by their text and shared.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from advisor_core.ir.attrs import find_close, split_top
from advisor_core.ir.values import DeviceType, TensorType

__all__ = [
    "TypeLines",
    "classify_type_line",
    "decode_type_lines",
    "parse_device_type",
    "parse_tensor_type",
    "split_angle_elements",
    "split_arrow",
]

_SHORT_DTYPES = {
    "F16": "Float16", "F32": "Float32", "F64": "Float64", "BF16": "BFloat16",
    "I8": "Int8", "I16": "Int16", "I32": "Int32", "I64": "Int64",
    "U8": "UInt8", "U16": "UInt16", "U32": "UInt32", "U64": "UInt64",
    "Bool": "Bool", "C64": "Complex64", "C128": "Complex128",
}
_SCALAR_DTYPES = frozenset(
    ["Bool", "String", "Int", "UInt", "Float", "Number", "BFloat16", "Complex64", "Complex128"]
    + [f"{p}{w}" for p in ("Int", "UInt", "Float") for w in (4, 8, 16, 32, 64)]
)
_MONADS = frozenset(["UMonad", "IOMonad", "Monad"])

# <Tensor[Float32], (8, 32)...>, <Ref[Tensor[Float32]], (32, 32), ref_key=w...>,
# 1.x <Tensor[Float32]x[const vector][2, 3]>
_TENSOR = re.compile(
    r"(Ref\[)?Tensor\[(\w+)\]\]?(?:, \(([-\d, ]*)\)|x\[const vector\]\[([-\d, ]*)\])?"
)
# <= 2.2: <Ref[Tensor(F32)], (16)>
_TENSOR_OLD = re.compile(r"(Ref\[)?Tensor\((\w+)\)\]?(?:, \(([-\d, ]*)\))?")
_REF_KEY = re.compile(r"ref_key=:?([^,>]+)")
_DEVICE = re.compile(r"^(\w+)x(\w+)(?:\[const vector\])?[{\[]([-\d, ]*)[}\]]$")
_SYMBOLIC = re.compile(r"(?:^|[(,]\s*)[SV]:")
_SCOPE_LIKE = re.compile(r"/|-op\d+")
_FULL_NAME = re.compile(r"^full_name_with_scope:\s*\((.*)\)\s*$")
_EMPTY_ARROW = re.compile(r"^\(\s*\) -> \(\s*\)\s*$")
_ANGLE = re.compile(r"<([^<>]*)>")

_tensor_cache: dict[str, TensorType] = {}
_device_cache: dict[str, DeviceType] = {}
_CACHE_LIMIT = 200_000


def _dims(text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    text = text.strip()
    if not text:
        return ()
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        return None


_MAX_DEPTH = 32
_MAX_TUPLE_EXPANSION = 4096


def parse_tensor_type(raw: str, _depth: int = 0) -> TensorType:
    """Decode one abstract type; ``raw`` is the text between ``<`` and ``>``.

    Tuples nested deeper than 32 levels keep ``elements=None`` (no recursion error on garbage).
    """
    cached = _tensor_cache.get(raw)
    if cached is not None:
        return cached
    t = _parse_tensor_type(raw, _depth)
    if len(_tensor_cache) < _CACHE_LIMIT:
        _tensor_cache[raw] = t
    return t


def _parse_tensor_type(raw: str, depth: int) -> TensorType:
    head, _, rest = raw.partition(", ")
    name = head.split("[", 1)[0]
    if name in ("Tensor", "Ref") or head.startswith("Tensor"):
        m = _TENSOR.match(raw) or _TENSOR_OLD.match(raw)
        if m is not None:
            dtype = _SHORT_DTYPES.get(m.group(2), m.group(2))
            if m.re is _TENSOR:
                shape = _dims(m.group(3) if m.group(3) is not None else m.group(4))
            else:
                shape = _dims(m.group(3))
            extra = raw[m.end():]
            key = _REF_KEY.search(extra)
            return TensorType(
                kind="tensor",
                dtype=dtype,
                shape=shape,
                is_ref=m.group(1) is not None,
                ref_key=key.group(1).strip() if key else None,
                is_constant="value=" in extra,
                raw=raw,
            )
    if name in ("Tuple", "List"):
        elements = _tuple_elements(raw, depth + 1) if depth < _MAX_DEPTH else None
        return TensorType("tuple", None, None, False, None, False, raw, elements)
    if name in _MONADS:
        return TensorType("monad", None, None, False, None, False, raw)
    if name == "Func":
        return TensorType("func", None, None, False, None, False, raw)
    if name in _SCALAR_DTYPES or name in _SHORT_DTYPES:
        if not rest or rest.startswith("NoShape") or rest.startswith("value="):
            return TensorType("scalar", _SHORT_DTYPES.get(name, name), None, False, None, "value=" in rest, raw)
    return TensorType("other", None, None, False, None, False, raw)


def _tuple_elements(raw: str, depth: int) -> tuple[TensorType, ...] | None:
    """Element types of ``Tuple[A*2, B], TupleShape(s1, s2, s3)``; ``None`` when not spelled out."""
    open_at = raw.find("[")
    if open_at < 0:
        return None
    close_at = find_close(raw, open_at)
    if close_at < 0:
        return None
    types: list[str] = []
    for item in split_top(raw[open_at + 1 : close_at]):
        base, star, count = item.rpartition("*")
        if star and count.isdigit() and find_close(base, 0) in (-1, len(base) - 1):
            if len(count) > 4 or len(types) + int(count) > _MAX_TUPLE_EXPANSION:
                return None  # absurd repeat count: do not expand
            types.extend([base] * int(count))
        elif item:
            types.append(item)
    shapes: list[str] | None = None
    sh_at = raw.find("TupleShape(", close_at)
    if sh_at >= 0:
        sh_open = sh_at + len("TupleShape")
        sh_close = find_close(raw, sh_open)
        if sh_close > 0:
            shapes = split_top(raw[sh_open + 1 : sh_close])
    if shapes is not None and len(shapes) == len(types):
        return tuple(parse_tensor_type(f"{t}, {s}", depth) for t, s in zip(types, shapes))
    return tuple(parse_tensor_type(t, depth) for t in types)


def parse_device_type(raw: str) -> DeviceType:
    """Decode one device type; ``raw`` is the text between ``<`` and ``>``."""
    cached = _device_cache.get(raw)
    if cached is not None:
        return cached
    m = _DEVICE.match(raw)
    if m is None:
        d = DeviceType(None, None, None, raw)
    else:
        d = DeviceType(m.group(1), m.group(2), _dims(m.group(3)), raw)
    if len(_device_cache) < _CACHE_LIMIT:
        _device_cache[raw] = d
    return d


def split_arrow(body: str) -> tuple[str, str | None]:
    """``(<a>, <b>) -> (<c>)`` → (``<a>, <b>``, ``<c>``); no arrow → (inside of the parens, None)."""
    arrow = body.find(") -> (")
    if arrow >= 0:
        return _strip_parens(body[: arrow + 1]), _strip_parens(body[arrow + 5 :])
    return _strip_parens(body), None


def _strip_parens(s: str) -> str:
    s = s.strip()
    if s.startswith("(") and s.endswith(")"):
        return s[1:-1]
    return s


def split_angle_elements(text: str) -> list[str]:
    """The ``<...>`` elements of a type list, without the angle brackets (nesting-aware)."""
    flat = _ANGLE.findall(text)
    if len(flat) == text.count("<"):
        # No element nests another '<': the common case, done by the regex engine.
        return flat
    out: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "<":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(text[start:i])
    return out


def classify_type_line(body: str, first: bool) -> str:
    """Kind of a type line (``body`` is the text after ``: ``).

    Returns ``"host"``, ``"symbolic"``, ``"device"``, ``"kernel_object"`` or ``"scope"``.
    ``first`` says no host line was seen yet for this node: the first line with ``<`` elements
    is the host line (real dumps always print it first).
    """
    if body.startswith("full_name_with_scope:"):
        return "scope"
    if "<" in body:
        if first:
            return "host"
        if _SYMBOLIC.search(body):
            return "symbolic"
        for el in split_angle_elements(body):
            if el != "null":
                return "device" if _DEVICE.match(el) else "host"
        return "host"
    if _SYMBOLIC.search(body):
        return "symbolic"
    if "->" in body:
        return "host" if first and _EMPTY_ARROW.match(body) else "kernel_object"
    if _SCOPE_LIKE.search(body):
        return "scope"
    return "kernel_object"


class TypeLines(NamedTuple):
    """Decoded type lines of one node (see :func:`decode_type_lines`)."""

    in_types: list[TensorType]
    out_types: list[TensorType]
    device_in: list[DeviceType] | None
    device_out: list[DeviceType] | None
    symbolic: str | None
    kernel_object_types: str | None
    scope: str | None
    extra: list[str]


_line_cache: dict[tuple[str, bool], tuple[str, object]] = {}


def _decode_line(body: str, first: bool) -> tuple[str, object]:
    """(kind, payload) of one type line; cached, since type lines repeat across nodes."""
    key = (body, first)
    got = _line_cache.get(key)
    if got is not None:
        return got
    kind = classify_type_line(body, first)
    payload: object = body
    if kind == "host":
        ins, outs = split_arrow(body)
        payload = (
            tuple(parse_tensor_type(e) for e in split_angle_elements(ins)),
            tuple(parse_tensor_type(e) for e in split_angle_elements(outs)) if outs is not None else (),
        )
    elif kind == "device":
        ins, outs = split_arrow(body)
        payload = (
            tuple(parse_device_type(e) for e in split_angle_elements(ins)),
            tuple(parse_device_type(e) for e in split_angle_elements(outs)) if outs is not None else (),
        )
    elif kind == "scope":
        m = _FULL_NAME.match(body)
        payload = m.group(1) if m else _strip_parens(body)
    got = (kind, payload)
    if len(_line_cache) < _CACHE_LIMIT:
        _line_cache[key] = got
    return got


def decode_type_lines(bodies: list[str]) -> TypeLines:
    """Decode the type lines of one node (each ``body`` is the text after ``: ``).

    A second host-looking line (never seen in real dumps) is kept in ``extra``.
    """
    in_types: list[TensorType] = []
    out_types: list[TensorType] = []
    device_in: list[DeviceType] | None = None
    device_out: list[DeviceType] | None = None
    symbolic: str | None = None
    kernel: str | None = None
    scope: str | None = None
    extra: list[str] = []
    seen_host = False
    for body in bodies:
        kind, payload = _decode_line(body, not seen_host)
        if kind == "host" and not seen_host:
            seen_host = True
            ins, outs = payload  # type: ignore[misc]
            in_types, out_types = list(ins), list(outs)
        elif kind == "device" and device_in is None:
            ins, outs = payload  # type: ignore[misc]
            device_in, device_out = list(ins), list(outs)
        elif kind == "symbolic" and symbolic is None:
            symbolic = body
        elif kind == "kernel_object" and kernel is None:
            kernel = body
        elif kind == "scope" and scope is None:
            scope = payload  # type: ignore[assignment]
        else:
            extra.append(body)
    return TypeLines(in_types, out_types, device_in, device_out, symbolic, kernel, scope, extra)
