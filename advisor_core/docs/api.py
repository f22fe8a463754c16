"""Generated regions of ``docs/plugins.md`` about the plugin API: Rule, RuleContext, the models, the test kit."""

from __future__ import annotations

import enum
import inspect
import re
from typing import Any, Iterable

from advisor_core.docs.api_notes import (
    CONTEXT_NOTES,
    MODEL_MEMBER_NOTES,
    NEED_NOTES,
    RANK_NOTES,
    RULE_ATTRIBUTE_NOTES,
    RULE_METHOD_NOTES,
    RUN_NOTES,
)
from advisor_core.docs.fields import model_fields_table
from advisor_core.docs.markdown import code_span, first_paragraph, rst_to_md, signature, table_cell, type_name


def _class_members(cls: type, *, skip: Iterable[str] = ()) -> list[tuple[str, Any]]:
    skip = set(skip)
    return [(n, v) for n, v in vars(cls).items() if not n.startswith("_") and n not in skip]


def member_lines(cls: type, notes: dict[str, str] | None = None, *, skip: Iterable[str] = ()) -> list[str]:
    """A table of a class's public properties and methods: signature and first docstring paragraph."""
    notes = notes or {}
    L = ["| member | description |", "|---|---|"]
    for name, value in _class_members(cls, skip=skip):
        if isinstance(value, property):
            ret = inspect.signature(value.fget).return_annotation if value.fget else inspect.Signature.empty
            sig = name + ("" if ret is inspect.Signature.empty else f": {type_name(ret)}")
            doc = value.fget.__doc__ if value.fget else None
        elif isinstance(value, (classmethod, staticmethod)):
            fn = value.__func__
            sig = signature(fn, name, skip_self=isinstance(value, classmethod))
            doc = fn.__doc__
        elif inspect.isfunction(value):
            sig = signature(value, name, skip_self=True)
            doc = value.__doc__
        else:
            continue
        text = first_paragraph(doc) or notes.get(name, "")
        L.append(f"| {table_cell(code_span(sig))} | {table_cell(text)} |")
    return L


def gen_rule_api() -> list[str]:
    """Region ``rule-api``: the ``Rule`` class attributes and methods, ``Need``, ``Requirements``, ``RuleOptions``."""
    from advisor_core.engine import rule as rule_mod
    from advisor_core.engine.rule import Need, Requirements, Rule, RuleOptions

    L = [
        "`from advisor_core.engine import Rule, RuleOptions, Requirements, Need, Severity`",
        "",
        "Class attributes of `Rule`:",
        "",
        "| attribute | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for name, ann in Rule.__annotations__.items():
        default = getattr(Rule, name, inspect.Parameter.empty)
        if default is inspect.Parameter.empty:
            dtext = "*required*"
        elif isinstance(default, type):
            dtext = f"`{default.__name__}`"
        elif isinstance(default, enum.Enum):
            dtext = f"`{type(default).__name__}.{default.name}`"
        else:
            dtext = code_span(repr(default))
        ann_text = type_name(ann)
        ann_text = re.sub(r"^ClassVar\[(.*)\]$", r"\1", ann_text)
        L.append(f"| `{name}` | {table_cell(code_span(ann_text))} | {table_cell(dtext)} | {table_cell(RULE_ATTRIBUTE_NOTES.get(name, ''))} |")
    L += [
        "",
        f"Validation (at registration): `CODE_PATTERN` = `{rule_mod.CODE_PATTERN.pattern}`, "
        f"`NAME_PATTERN` = `{rule_mod.NAME_PATTERN.pattern}`, "
        f"help-page sections `DOC_SECTIONS` = {', '.join(f'`{s}`' for s in rule_mod.DOC_SECTIONS)}.",
        "",
        "Methods of `Rule`:",
        "",
        *member_lines(Rule, RULE_METHOD_NOTES),
        "",
        "### `Need` and `Requirements`",
        "",
        rst_to_md(Need.__doc__),
        "",
        *member_lines(Need, NEED_NOTES),
        "",
        rst_to_md(Requirements.__doc__),
        "",
        "### `RuleOptions`",
        "",
        rst_to_md(RuleOptions.__doc__) + f" (pydantic `model_config` = `{dict(RuleOptions.model_config)}`)",
        "",
    ]
    return L


def gen_context_api() -> list[str]:
    """Region ``context-api``: ``RuleContext``, ``Run`` and ``Rank``."""
    from advisor_core.engine.context import RuleContext
    from advisor_core.model.run import Rank, Run

    return [
        rst_to_md(RuleContext.__doc__) + " Attributes: `options` (the validated `Options` instance), `code`.",
        "",
        *member_lines(RuleContext, CONTEXT_NOTES),
        "",
        "### `Run` and `Rank` (`ctx.run`)",
        "",
        rst_to_md(Run.__doc__),
        "",
        *member_lines(Run, RUN_NOTES),
        "",
        rst_to_md(Rank.__doc__) + " Tables are listed in [tables.md](tables.md).",
        "",
        *member_lines(Rank, RANK_NOTES),
        "",
    ]


def _enum_lines(cls: type[enum.Enum]) -> list[str]:
    return [rst_to_md(cls.__doc__), "", "Values: " + ", ".join(f"`{m.name}` = `{m.value!r}`" for m in cls), ""]


def gen_models() -> list[str]:
    """Region ``models``: ``Finding``, ``Evidence``, ``Location``, ``Patch``, ``PatchOp``, the enums, ranking."""
    from advisor_core.engine import findings as fm

    L = ["`from advisor_core.engine import Finding, Evidence, Location, Patch, PatchOp, Severity, Safety`", ""]
    for model in (fm.Finding, fm.Evidence, fm.Location, fm.Patch, fm.PatchOp):
        L += [f"### `{model.__name__}`", "", rst_to_md(model.__doc__), "", *model_fields_table(model), ""]
        props = [(n, v) for n, v in _class_members(model) if isinstance(v, property) or inspect.isfunction(v)]
        if props:
            L += ["Also:", ""]
            for n, v in props:
                fn = v.fget if isinstance(v, property) else v
                label = n if isinstance(v, property) else n + "()"
                doc = first_paragraph(fn.__doc__) or MODEL_MEMBER_NOTES.get(f"{model.__name__}.{n}", "")
                L.append(f"* {code_span(label)}" + (f" — {doc}" if doc else ""))
            L.append("")
    for e in (fm.Severity, fm.Safety):
        L += [f"### `{e.__name__}`", "", *_enum_lines(e)]
    L += ["### Ranking", "", f"`sort_findings`: {first_paragraph(fm.sort_findings.__doc__)}", ""]
    return L


def gen_testing_kit() -> list[str]:
    """Region ``testing-kit``: the test kit's functions and the keys of a case file."""
    from advisor_core import testing as kit

    L = [
        "`from advisor_core.testing import load_rule_cases, evaluate_case`",
        "",
        "| function | description |",
        "|---|---|",
    ]
    for name in ("load_rule_cases", "write_profile", "run_case", "evaluate_case"):
        fn = getattr(kit, name)
        L.append(f"| {table_cell(code_span(signature(fn)))} | {table_cell(first_paragraph(fn.__doc__))} |")
    L += ["", "Keys of one case (`cases: {name: {...}}` in the YAML file; `rule:` at the top):", ""]
    L += model_fields_table(kit.RuleCase)
    L += ["", "Keys of one `expect:` entry (fields left out are not checked):", ""]
    L += model_fields_table(kit.ExpectedFinding)
    L.append("")
    return L
