"""RFC 6902 on plain Python trees: ``test`` equality and the expected result of a patch.

The expected tree is computed here, independently of the ruamel edit, from the
plain view of the document (aliases kept as shared objects, so an edit inside an
anchored mapping shows at its alias sites exactly as in the YAML). After the text is
written it is re-loaded and compared with this tree: any difference means the
round trip changed something no patch asked for.

Equality is RFC 6902 §4.6 equality on the values YAML loads: types matter
(``1`` ≠ ``1.0`` ≠ ``True``, ``"1"`` ≠ ``1``), mappings compare without order,
sequences with order.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

from advisor_core.config.document import PointerError, lookup, pointer_escape, pointer_split

__all__ = ["describe", "diff_pointers", "plain_apply", "strict_equal"]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, (list, tuple)):
        return "seq"
    return type(value).__name__


def strict_equal(a: Any, b: Any) -> bool:
    """Type-strict structural equality (see module docstring); NaN equals NaN."""
    kind = _kind(a)
    if kind != _kind(b):
        return False
    if kind == "map":
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    if kind == "seq":
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b))
    if kind == "float" and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def describe(value: Any) -> str:
    """A short JSON-like rendering for messages (``False`` → ``false``, ``"x"`` quoted)."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def diff_pointers(expected: Any, actual: Any, pointer: str = "", limit: int = 10) -> list[str]:
    """Pointers where ``actual`` differs from ``expected`` (at most ``limit``)."""
    out: list[str] = []

    def walk(e: Any, a: Any, ptr: str) -> None:
        if len(out) >= limit:
            return
        if _kind(e) != _kind(a):
            out.append(ptr or "/")
            return
        if isinstance(e, dict):
            for k in list(e) + [k for k in a if k not in e]:
                if k not in e or k not in a:
                    out.append(f"{ptr}/{pointer_escape(str(k))}")
                else:
                    walk(e[k], a[k], f"{ptr}/{pointer_escape(str(k))}")
        elif isinstance(e, (list, tuple)):
            if len(e) != len(a):
                out.append(ptr or "/")
                return
            for i, (x, y) in enumerate(zip(e, a)):
                walk(x, y, f"{ptr}/{i}")
        elif not strict_equal(e, a):
            out.append(ptr or "/")

    walk(expected, actual, pointer)
    return out


def _parent(root: Any, pointer: str) -> tuple[Any, str]:
    tokens = pointer_split(pointer)
    node = root
    walked = ""
    for token in tokens[:-1]:
        walked += "/" + pointer_escape(token)
        node = node[lookup(node, token, pointer=walked)]
    return node, tokens[-1]


def plain_apply(root: Any, op: str, pointer: str, value: Any = None, value_sites: list[str] | None = None) -> None:
    """Apply one change op to the plain tree ``root`` in place (RFC 6902 semantics).

    ``value_sites``: for ``replace`` (or ``add`` onto an existing key), the other
    pointers holding the same anchored value; they receive the new value as well.
    Raises :class:`PointerError` when the path does not resolve.
    """
    parent, token = _parent(root, pointer)
    new = copy.deepcopy(value)
    if op == "remove":
        del parent[lookup(parent, token, pointer=pointer)]
        return
    if isinstance(parent, list) and op == "add":
        index = len(parent) if token == "-" else int(token)
        parent.insert(index, new)
        return
    if isinstance(parent, dict) and op == "add":
        try:
            key: Any = lookup(parent, token, pointer=pointer)
        except PointerError:
            parent[token] = new
            return
    else:
        key = lookup(parent, token, pointer=pointer)
    parent[key] = new
    for site in value_sites or ():
        site_parent, site_token = _parent(root, site)
        site_parent[lookup(site_parent, site_token, pointer=site)] = new
