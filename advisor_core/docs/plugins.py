"""``docs/plugins.md``: its generated regions (hookspecs, plugin API, models, test kit) refreshed in the prose."""

from __future__ import annotations

import inspect
import re
from typing import Any, Callable

from advisor_core.docs.api import gen_context_api, gen_models, gen_rule_api, gen_testing_kit
from advisor_core.docs.markdown import code_span, fence, rst_to_md, signature, table_cell, type_name

BEGIN = "<!-- BEGIN GENERATED: {name} (python -m advisor_core.docs hooks; do not edit inside) -->"
END = "<!-- END GENERATED: {name} -->"
_REGION = re.compile(
    r"<!-- BEGIN GENERATED: (?P<name>[\w-]+)[^>]*-->\n.*?<!-- END GENERATED: (?P=name) -->", re.DOTALL
)


def hookspecs() -> list[tuple[str, Callable[..., Any], dict[str, Any]]]:
    """(name, function, spec options) of every hookspec, in source order."""
    from advisor_core.engine import hookspecs as hs

    marker = f"{hs.PROJECT}_spec"
    out = []
    for name, fn in vars(hs).items():
        if inspect.isfunction(fn) and getattr(fn, marker, None) is not None:
            out.append((name, fn, dict(getattr(fn, marker))))
    return sorted(out, key=lambda t: t[1].__code__.co_firstlineno)


def _gen_hookspecs() -> list[str]:
    """Region ``hookspecs``: the entry-point group, a summary table, then each hookspec's signature and contract."""
    from advisor_core.engine import hookspecs as hs

    L = [
        f"Entry-point group: `{hs.ENTRY_POINT_GROUP}`. Markers: `from advisor_core.engine import hookimpl` "
        "(and `hookspec`, for hosts only).",
        "",
        "| hook | kind | returns |",
        "|---|---|---|",
    ]
    specs = hookspecs()
    for name, fn, opts in specs:
        kind = ", ".join(k for k in ("firstresult", "historic") if opts.get(k)) or "all results collected"
        ret = type_name(inspect.signature(fn).return_annotation)
        L.append(f"| [`{name}`](#{name}) | {kind} | {table_cell(code_span(ret))} |")
    L.append("")
    for name, fn, opts in specs:
        flags = [f"{k}=True" for k in ("firstresult", "historic", "warn_on_impl") if opts.get(k)]
        deco = f"@hookspec({', '.join(flags)})" if flags else "@hookspec"
        L += [f"### `{name}`", "", *fence(f"{deco}\ndef {signature(fn)}: ...", "python"), "", rst_to_md(fn.__doc__), ""]
    return L


REGIONS: dict[str, Callable[[], list[str]]] = {
    "hookspecs": _gen_hookspecs,
    "rule-api": gen_rule_api,
    "context-api": gen_context_api,
    "models": gen_models,
    "testing-kit": gen_testing_kit,
}


def _region_text(name: str) -> str:
    body = "\n".join(REGIONS[name]()).strip("\n")
    return f"{BEGIN.format(name=name)}\n\n{body}\n\n{END.format(name=name)}"


def render_plugins(current: str | None) -> str:
    """``current`` with every generated region refreshed; missing regions are appended."""
    text = current if current is not None else "# Writing advisor plugins\n"
    found: set[str] = set()

    def sub(m: re.Match[str]) -> str:
        name = m.group("name")
        if name not in REGIONS:
            return m.group(0)
        found.add(name)
        return _region_text(name)

    text = _REGION.sub(sub, text)
    for name in REGIONS:
        if name not in found:
            text = text.rstrip("\n") + f"\n\n## {name}\n\n{_region_text(name)}\n"
    return text if text.endswith("\n") else text + "\n"
