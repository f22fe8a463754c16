"""``kernel_details`` tensor descriptions: ``';'``-separated shapes, dtypes and formats, parsed once per distinct value."""

from __future__ import annotations

import re
from typing import Any

_DIM = re.compile(r"-?\d+")
# ND spellings and CANN's short names, as formats are compared across ops.
_FORMAT_ALIASES = {"DEFAULTFORMAT": "ND", "NCHW": "ND", "FRACZ": "FRACTAL_Z"}


def _text(value: Any) -> str | None:
    """The text of a cell: ``None`` for missing (``None``, NaN, ``pd.NA``)."""
    if value is None or isinstance(value, float) and value != value:
        return None
    if not isinstance(value, str):
        try:
            if bool(value != value):  # pd.NA compares as NA, which raises in bool()
                return None
        except TypeError:
            return None
    return str(value)


def parse_shapes(text: Any) -> tuple[tuple[int, ...], ...]:
    """``"4096,4100;4100,11008"`` → ``((4096, 4100), (4100, 11008))``.

    One tuple per ``';'``-separated tensor, in operand order; signs kept (``-1`` is a
    dynamic dim); an empty or dimension-less part (a scalar) is ``()``. Missing text → ``()``.
    """
    s = _text(text)
    if not s:
        return ()
    return tuple(tuple(int(x) for x in _DIM.findall(part)) for part in s.strip('"').split(";"))


def norm_format(fmt: Any) -> str:
    """A format as rules compare them: ``FORMAT_`` dropped, upper case, ND spellings (``DefaultFormat``, ``NCHW``) → ``ND``."""
    f = _text(fmt) or ""
    f = f.upper().replace("FORMAT_", "")
    return _FORMAT_ALIASES.get(f, f)


def parse_formats(text: Any) -> tuple[str, ...]:
    """``"ND;FRACTAL_NZ"`` → ``("ND", "FRACTAL_NZ")`` (each normalised by :func:`norm_format`)."""
    s = _text(text)
    if s is None:
        return ()
    return tuple(norm_format(p) for p in s.split(";"))


def parse_dtypes(text: Any) -> tuple[str, ...]:
    """``"DT_BF16;FLOAT"`` → ``("DT_BF16", "FLOAT")``."""
    s = _text(text)
    if s is None:
        return ()
    return tuple(p.strip() for p in s.split(";"))
