"""New values for the round-trip tree, written the way the file writes them.

A patch value arrives as plain Python (JSON-like). Before it goes into the ruamel
tree it is wrapped so that the dump looks like the rest of the file:

* **Booleans** use the file's spelling (``True``/``False`` in mindformers files);
  replacing a boolean keeps that scalar's own spelling (``false`` stays lower case).
* **Floats** are written so that both YAML 1.2 (ruamel) and YAML 1.1 (PyYAML, which
  mindformers uses) read a float: always a ``.`` in the mantissa and a signed
  exponent (``1.0e-05``, never ``1e-05``, which PyYAML reads as a string). When the
  old value used exponent notation (``5.e-5``) the new one does too, in the same
  shape (``1.e-4``); ``1000000.`` style is kept for whole numbers.
* **Strings** keep the quote style of the string they replace; otherwise they follow
  their siblings (a new key in a mapping whose keys are all ``'quoted'`` is quoted
  the same way); otherwise they are plain when plain is unambiguous under both
  YAML 1.1 and 1.2 (``yes``, ``1e5``, ``null``, ``: x``, ``#`` are never plain) and
  contain no backslash (regexes are single-quoted, as mindformers writes them),
  else quoted with the file's usual quote character (double quotes for anything
  that needs escapes).
* **Lists** of scalars (or of lists of scalars) are flow style ``[a, b]`` when the
  file writes its scalar lists that way (mindformers does); lists holding mappings
  and all **mappings** are block style. A list or mapping that replaces one of the
  same kind keeps the old one's flow/block style.
* **Anchors** move to the new value: replacing ``&dp 1`` gives ``&dp 2``.
"""

from __future__ import annotations

import io
import math
import re
from dataclasses import dataclass
from typing import Any, Iterable

from ruamel.yaml.anchor import Anchor
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.representer import RoundTripRepresenter
from ruamel.yaml.resolver import implicit_resolvers
from ruamel.yaml.scalarbool import ScalarBoolean
from ruamel.yaml.scalarint import ScalarInt
from ruamel.yaml.scalarstring import (
    DoubleQuotedScalarString,
    FoldedScalarString,
    LiteralScalarString,
    PlainScalarString,
    ScalarString,
    SingleQuotedScalarString,
)

from advisor_core.config.document import YamlLayout, anchor_name, is_block, make_yaml

__all__ = [
    "FormattedBool",
    "FormattedFloat",
    "NewNull",
    "PatchRepresenter",
    "StyleHints",
    "UnsupportedValue",
    "build_key",
    "build_value",
    "format_float",
    "plain_ok",
    "render_inline",
    "string_style",
]

_FLOAT_TAG = "tag:yaml.org,2002:float"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_NULL_TAG = "tag:yaml.org,2002:null"
_STR_TAG = "tag:yaml.org,2002:str"
_PLAIN_FIRST_BAD = set("-?:,[]{}#&*!|>'\"%@`")
_EXP = re.compile(r"^[-+]?(?P<int>\d[\d_]*)(?P<dot>\.?)(?P<frac>[\d_]*)(?P<e>[eE])(?P<sign>[-+]?)(?P<digits>\d+)$")


class UnsupportedValue(ValueError):
    """A patch value that YAML configs cannot hold (e.g. a set, bytes, a non-string key)."""


class _Anchored:
    """Anchor support shared by the scalar wrappers (the same protocol ruamel's scalars use)."""

    @property
    def anchor(self) -> Anchor:
        if not hasattr(self, Anchor.attrib):
            setattr(self, Anchor.attrib, Anchor())
        return getattr(self, Anchor.attrib)

    def yaml_anchor(self, any: bool = False) -> Anchor | None:  # noqa: A002 - ruamel's name
        if not hasattr(self, Anchor.attrib):
            return None
        if any or self.anchor.always_dump:
            return self.anchor
        return None

    def yaml_set_anchor(self, value: str, always_dump: bool = False) -> None:
        self.anchor.value = value
        self.anchor.always_dump = always_dump


class FormattedFloat(_Anchored, float):
    """A float that dumps as exactly ``text``."""

    text: str

    def __new__(cls, value: float, text: str) -> FormattedFloat:
        obj = float.__new__(cls, value)
        obj.text = text
        return obj


class FormattedBool(_Anchored, ScalarBoolean):
    """A boolean (an ``int`` subclass, as ruamel's) that dumps as exactly ``text`` (``False``, ``true``)."""

    text: str

    def __new__(cls, value: bool, text: str) -> FormattedBool:
        obj = int.__new__(cls, bool(value))
        obj.text = text
        return obj


class NewNull(_Anchored):
    """A null written as ``null`` (ruamel writes a loaded null as nothing, ``key:``; inside a flow list
    that would read badly)."""

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, NewNull)

    def __hash__(self) -> int:
        return hash(None)

    def __repr__(self) -> str:
        return "NewNull()"


class PatchRepresenter(RoundTripRepresenter):
    """Round-trip representer that also knows the wrappers above (a subclass: no global registration)."""

    def represent_formatted(self, data: Any) -> Any:
        tag = _BOOL_TAG if isinstance(data, FormattedBool) else _FLOAT_TAG
        return self.represent_scalar(tag, data.text, anchor=data.yaml_anchor(any=True))

    def represent_new_null(self, data: Any) -> Any:
        return self.represent_scalar(_NULL_TAG, "null", anchor=data.yaml_anchor(any=True))


PatchRepresenter.add_representer(FormattedFloat, PatchRepresenter.represent_formatted)
PatchRepresenter.add_representer(FormattedBool, PatchRepresenter.represent_formatted)
PatchRepresenter.add_representer(NewNull, PatchRepresenter.represent_new_null)


# --------------------------------------------------------------------------- scalars


def _resolves_to_str(text: str) -> bool:
    """True when neither YAML 1.1 nor 1.2 would read ``text`` (plain) as anything but a string."""
    for _versions, tag, regexp, first in implicit_resolvers:
        if tag == _STR_TAG:
            continue
        if (not text and "" in first) or (text and text[0] in first and regexp.match(text)):
            return False
    return True


def plain_ok(text: str) -> bool:
    """Whether ``text`` can be written unquoted anywhere (block or flow) and read back as this string."""
    if not text or text != text.strip() or not text.isprintable():
        return False
    if text[0] in _PLAIN_FIRST_BAD or text.endswith(":"):
        return False
    if ": " in text or " #" in text or any(c in text for c in ",[]{}\t"):
        return False
    return _resolves_to_str(text)


_STYLE_CLASS: dict[str, type[ScalarString]] = {
    "": PlainScalarString,
    "'": SingleQuotedScalarString,
    '"': DoubleQuotedScalarString,
    "|": LiteralScalarString,
    ">": FoldedScalarString,
}


def string_style(value: Any) -> str | None:
    """The style a loaded string was written in: ``""`` (plain), ``"'"``, ``'"'``, ``"|"``, ``">"``; else ``None``."""
    if not isinstance(value, str):
        return None
    if isinstance(value, ScalarString):
        return getattr(value, "style", "") or ""
    return ""


def _choose_string_style(text: str, preferred: str | None, layout: YamlLayout) -> str:
    """A style that can hold ``text``, as close to ``preferred`` as possible."""
    single_ok = text.isprintable() and "\n" not in text
    if preferred == "":
        if plain_ok(text) and "\\" not in text:
            return ""
        preferred = None
    if preferred in ("|", ">"):
        # Block scalars only make sense for multi-line text (ruamel falls back to quotes if it must).
        return preferred if "\n" in text else _choose_string_style(text, None, layout)
    if preferred == "'":
        return "'" if single_ok else '"'
    if preferred == '"':
        return '"'
    if plain_ok(text) and "\\" not in text:
        return ""
    if "\\" in text and single_ok:
        return "'"
    return layout.quote if (layout.quote == '"' or single_ok) else '"'


def _make_string(text: str, style: str) -> ScalarString:
    return _STYLE_CLASS[style](text)


def _float_like_exponent(value: float, like: str) -> str | None:
    """``value`` in the exponent shape of ``like`` (``5.e-5`` → ``1.e-4``), or ``None``."""
    m = _EXP.match(like)
    if m is None:
        return None
    mant_s, exp_s = f"{value:.16e}".split("e")
    # Shortest mantissa that reads back as the same float.
    for digits in range(0, 17):
        cand_m, cand_e = f"{value:.{digits}e}".split("e")
        if float(f"{cand_m}e{cand_e}") == value:
            mant_s, exp_s = cand_m, cand_e
            break
    exp = int(exp_s)
    if "." not in mant_s:
        mant_s += "." if (m.group("dot") and not m.group("frac")) else ".0"
    width = len(m.group("digits")) if m.group("digits").startswith("0") else 1
    sign = "-" if exp < 0 else "+"  # always signed: PyYAML (YAML 1.1) needs it
    return f"{mant_s}{m.group('e')}{sign}{abs(exp):0{width}d}"


def format_float(value: float, like: str | None = None) -> str:
    """Text for a float that YAML 1.1 and 1.2 both read back as exactly ``value``."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    if like and "e" in like.lower():
        shaped = _float_like_exponent(value, like)
        if shaped is not None:
            return shaped
    text = repr(float(value))
    if "e" in text:
        mant, exp = text.split("e")
        if "." not in mant:
            mant += ".0"
        sign = "-" if exp.startswith("-") else "+"
        text = f"{mant}e{sign}{exp.lstrip('+-')}"
    elif like and re.fullmatch(r"[-+]?\d+\.", like) and text.endswith(".0"):
        text = text[:-1]  # keep the "1000000." spelling
    return text


def _bool_text(value: bool, like: str | None, layout: YamlLayout) -> str:
    if like and like.lower() in ("true", "false"):
        word = "true" if value else "false"
        if like.isupper():
            return word.upper()
        if like.islower():
            return word
        return word.capitalize()
    return layout.bools[1] if value else layout.bools[0]


# --------------------------------------------------------------------------- building


@dataclass(frozen=True)
class StyleHints:
    """What the surroundings say about how a new value should look.

    ``like``: the value being replaced (its style is kept); ``like_literal``: how
    ``like`` is spelled in the text when it is a bool or number; ``sibling_strings``:
    the string values next to the new one (their quote style is followed);
    ``in_flow``: the parent is a flow collection (everything inside must be flow).
    """

    layout: YamlLayout
    like: Any = None
    like_literal: str | None = None
    sibling_strings: tuple[str, ...] = ()
    in_flow: bool = False


def _majority_style(values: Iterable[Any]) -> str | None:
    styles = [string_style(v) for v in values if isinstance(v, str)]
    if not styles:
        return None
    best = max(set(styles), key=lambda s: (styles.count(s), s == '"', s == "'"))
    return best


def _all_scalars(items: list[Any]) -> bool:
    return all(not isinstance(v, (dict, list, tuple)) or (isinstance(v, (list, tuple)) and _all_scalars(list(v)))
               for v in items)


def build_key(text: Any, siblings: Iterable[Any], layout: YamlLayout) -> Any:
    """A new mapping key, quoted like the existing keys of the mapping (see module docstring)."""
    if not isinstance(text, str):
        raise UnsupportedValue(f"mapping keys from a JSON pointer are strings, got {type(text).__name__}")
    keys = [k for k in siblings if isinstance(k, str)]
    preferred = _majority_style(keys)
    if preferred == "":
        preferred = None  # plain siblings say nothing about a key that cannot be plain
    style = _choose_string_style(text, preferred, layout)
    return _make_string(text, style)


def build_value(value: Any, hints: StyleHints, *, keep_anchor: bool = True) -> Any:
    """Wrap plain ``value`` for the tree according to ``hints`` (see module docstring).

    With ``keep_anchor`` the anchor of ``hints.like`` moves to the new node; nested
    values only borrow style from the old ones, never their anchors.
    """
    like = hints.like
    layout = hints.layout
    if value is None:
        node: Any = NewNull()
    elif isinstance(value, bool):
        like_lit = hints.like_literal if isinstance(like, (bool, ScalarBoolean)) else None
        node = FormattedBool(value, _bool_text(value, like_lit, layout))
    elif isinstance(value, int):
        node = ScalarInt(value)
    elif isinstance(value, float):
        like_lit = hints.like_literal if isinstance(like, float) else None
        node = FormattedFloat(value, format_float(value, like_lit))
    elif isinstance(value, str):
        old_style = string_style(like)
        preferred = old_style if old_style is not None else _majority_style(hints.sibling_strings)
        node = _make_string(value, _choose_string_style(value, preferred, layout))
    elif isinstance(value, (list, tuple)):
        node = _build_seq(list(value), hints)
    elif isinstance(value, dict):
        node = _build_map(value, hints)
    else:
        raise UnsupportedValue(f"a {type(value).__name__} cannot be written to a YAML config")
    name = anchor_name(like) if keep_anchor else None
    if name is not None:
        old = getattr(like, Anchor.attrib)
        node.yaml_set_anchor(name, always_dump=bool(old.always_dump))
    return node


def render_inline(value: Any, layout: YamlLayout) -> str | None:
    """How ruamel writes ``value`` after ``key: `` (anchor included), or ``None`` if it takes several lines."""
    yaml = make_yaml(layout)
    yaml.Representer = PatchRepresenter
    buf = io.StringIO()
    yaml.dump({"k": value}, buf)
    lines = buf.getvalue().split("\n")
    if len(lines) != 2 or not lines[0].startswith("k: "):
        return None
    return lines[0][3:]


def _build_seq(items: list[Any], hints: StyleHints) -> CommentedSeq:
    like = hints.like
    seq = CommentedSeq()
    if isinstance(like, list) and not (isinstance(like, CommentedSeq) and not like and is_block(like)):
        flow = not is_block(like) if isinstance(like, CommentedSeq) else True
        item_like = [v for v in like if isinstance(v, str)]
    else:
        flow = _all_scalars(items) and hints.layout.flow_scalar_lists
        item_like = []
    # ruamel 0.19 writes invalid YAML for a block sequence whose first item is an empty "{}"/"[]" when
    # its key line has a comment ("- {}\n  - a   -"); such a list is written in flow style instead.
    first_empty = bool(items) and isinstance(items[0], (dict, list, tuple)) and not items[0]
    flow = flow or hints.in_flow or not items or first_empty
    strings = [v for v in items if isinstance(v, str)]
    if not item_like and strings:
        # A brand-new list quotes its strings uniformly: like the strings around it when every
        # item can be written that way, else single quotes for regexes, else the file's quote.
        around = _majority_style(hints.sibling_strings)
        if all(plain_ok(s) and "\\" not in s for s in strings):
            item_like = [_make_string("x", around or "")]
        elif any("\\" in s for s in strings):
            item_like = [SingleQuotedScalarString("x")]
        else:
            item_like = [_make_string("x", around if around in ("'", '"') else hints.layout.quote)]
    child = StyleHints(layout=hints.layout, sibling_strings=tuple(item_like), in_flow=flow)
    for item in items:
        seq.append(build_value(item, child, keep_anchor=False))
    seq.fa.set_flow_style() if flow else seq.fa.set_block_style()
    return seq


def _build_map(mapping: dict[Any, Any], hints: StyleHints) -> CommentedMap:
    like = hints.like
    cmap = CommentedMap()
    if isinstance(like, CommentedMap) and like:
        flow = not is_block(like)
        key_like = list(like.keys())
        value_like = tuple(v for v in like.values() if isinstance(v, str))
    else:
        flow = False
        key_like = []
        value_like = hints.sibling_strings  # a new mapping writes its strings like those around it
    flow = flow or hints.in_flow or not mapping
    child = StyleHints(layout=hints.layout, sibling_strings=value_like, in_flow=flow)
    for key, item in mapping.items():
        new_key = build_key(key, key_like, hints.layout)
        old = like.get(key) if isinstance(like, dict) else None
        item_hints = child if old is None else StyleHints(layout=hints.layout, like=old,
                                                          sibling_strings=value_like, in_flow=flow)
        cmap[new_key] = build_value(item, item_hints, keep_anchor=False)
    cmap.fa.set_flow_style() if flow else cmap.fa.set_block_style()
    return cmap

