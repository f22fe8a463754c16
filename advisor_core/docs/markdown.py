"""Markdown from docstrings and Python objects: reST roles, table cells, code spans, fences, type names, signatures."""

from __future__ import annotations

import enum
import inspect
import re
from typing import Any, Callable

_ROLE = re.compile(r":(?:class|func|meth|data|mod|attr|exc|obj):`(~?)([^`]+)`")


def _roles(text: str) -> str:
    def sub(m: re.Match[str]) -> str:
        target = m.group(2)
        return f"`{target.split('.')[-1] if m.group(1) else target}`"

    return _ROLE.sub(sub, text).replace("``", "`")


def rst_to_md(text: str | None) -> str:
    """A docstring (reST-flavoured, as this code base writes them) as Markdown.

    Roles become code spans, double backticks single ones, and a paragraph ending
    in ``::`` introduces a fenced code block made of the indented lines after it.
    """
    if not text:
        return ""
    lines = inspect.cleandoc(text).splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.rstrip().endswith("::"):
            head = line.rstrip()[:-2].rstrip()
            if head:
                out.append(_roles(head) + ":")
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block: list[str] = []
            while i < len(lines) and (not lines[i].strip() or lines[i].startswith((" ", "\t"))):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out.extend(["", "```", *inspect.cleandoc("\n".join(block)).splitlines(), "```", ""])
            continue
        out.append(_roles(line))
        i += 1
    return "\n".join(out).strip()


def first_paragraph(text: str | None) -> str:
    """The first paragraph of a docstring as one line of Markdown."""
    md = rst_to_md(text)
    para = md.split("\n\n", 1)[0]
    return " ".join(p.strip() for p in para.splitlines())


def _escape_html(text: str) -> str:
    """``<`` and ``>`` outside code spans, so ``NPU:<id>`` is not taken for an HTML tag."""
    parts = re.split(r"(`+[^`]*?`+)", text)
    return "".join(p if p.startswith("`") else p.replace("<", "&lt;").replace(">", "&gt;") for p in parts)


def table_cell(text: Any) -> str:
    """Text for a Markdown table cell (one line, pipes and angle brackets escaped)."""
    return _escape_html(" ".join(str(text).split())).replace("|", "\\|")


def code_span(text: Any) -> str:
    """``text`` as a Markdown code span (double backticks when it holds one)."""
    s = str(text)
    tick = "``" if "`" in s else "`"
    pad = " " if "`" in s else ""
    return f"{tick}{pad}{s}{pad}{tick}"


def type_name(tp: Any) -> str:
    """A type annotation as short text: ``Severity``, ``str | None`` (module paths and ``typing.`` dropped)."""
    if tp is None or tp is type(None):
        return "None"
    if isinstance(tp, str):
        s = tp.strip().strip("'\"")
    elif isinstance(tp, type) and not getattr(tp, "__args__", None):
        s = tp.__name__
    else:
        s = str(tp)
    s = s.replace("typing.", "").replace("NoneType", "None")
    # advisor_core.engine.findings.Severity -> Severity; <class 'str'> -> str
    s = re.sub(r"<class '([\w.]+)'>", r"\1", s)
    s = re.sub(r"\b(?:[A-Za-z_]\w*\.)+(?=[A-Za-z_]\w*)", "", s)
    return s


def fence(text: str, lang: str = "text") -> list[str]:
    """A fenced code block, its fence longer than any run of backticks in ``text``."""
    fence = "```"
    while fence in text:
        fence += "`"
    return [f"{fence}{lang}", text, fence]


def signature(fn: Callable[..., Any], name: str | None = None, *, skip_self: bool = False) -> str:
    """``name(a: int, *, b: str = 'x') -> T`` of a function (``skip_self`` drops the first parameter)."""
    sig = inspect.signature(fn)
    params = []
    for i, p in enumerate(sig.parameters.values()):
        if skip_self and i == 0:
            continue
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            text = "*" + text
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + text
        if p.annotation is not p.empty:
            text += f": {type_name(p.annotation)}"
        if p.default is not p.empty:
            d = p.default
            text += f" = {type(d).__name__}.{d.name}" if isinstance(d, enum.Enum) else f" = {d!r}"
        params.append(text)
    kw_only = [p for p in sig.parameters.values() if p.kind is p.KEYWORD_ONLY]
    if kw_only:
        first = list(sig.parameters.values()).index(kw_only[0]) - (1 if skip_self else 0)
        params.insert(first, "*")
    ret = "" if sig.return_annotation is sig.empty else f" -> {type_name(sig.return_annotation)}"
    return f"{name or fn.__name__}({', '.join(params)}){ret}"
