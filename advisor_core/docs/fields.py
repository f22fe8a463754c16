"""Pydantic models and their fields as Markdown and TOML: defaults, constraints, field tables."""

from __future__ import annotations

import enum
import json
from typing import Any

from advisor_core.docs.markdown import code_span, table_cell, type_name


def toml_value(value: Any) -> str:
    """A Python value as a TOML literal (enums by value, sets sorted)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return toml_value(value.value)
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        return "[" + ", ".join(toml_value(v) for v in items) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(str(value))


def field_default(fi: Any) -> Any:
    """A pydantic field's default (its factory called), ``PydanticUndefined`` when required."""
    from pydantic_core import PydanticUndefined

    if fi.default_factory is not None:
        try:
            return fi.default_factory()
        except TypeError:  # pragma: no cover - factories taking validated data
            return "…"
    if fi.default is PydanticUndefined:
        return PydanticUndefined
    return fi.default


def default_text(fi: Any) -> str:
    """A pydantic field's default as a code span, ``*required*`` when it has none."""
    from pydantic_core import PydanticUndefined

    d = field_default(fi)
    if d is PydanticUndefined:
        return "*required*"
    if isinstance(d, enum.Enum):
        d = d.value
    return code_span(repr(d))


def constraints(fi: Any) -> str:
    """A pydantic field's bounds as text: ``≥ 0, < 100``."""
    parts = []
    for m in fi.metadata:
        for attr, sym in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "min length"), ("max_length", "max length"), ("multiple_of", "multiple of")):
            v = getattr(m, attr, None)
            if v is not None:
                parts.append(f"{sym} {v}")
    return ", ".join(parts)


def model_fields_table(model: Any, *, with_source: dict[str, str] | None = None) -> list[str]:
    """Markdown table of a pydantic model's fields."""
    head = "| field | type | default | description |"
    if with_source is not None:
        head = "| field | type | source | description |"
    lines = [head, "|---|---|---|---|"]
    for name, fi in model.model_fields.items():
        desc = fi.description or ""
        if with_source is not None:
            third = with_source.get(name, "")
        else:
            third = default_text(fi)
        lines.append(f"| `{name}` | {table_cell(code_span(type_name(fi.annotation)))} | {table_cell(third)} | {table_cell(desc)} |")
    return lines
