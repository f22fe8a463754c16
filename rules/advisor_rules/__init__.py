"""Built-in rules of the advisor, one module per rule.

Installed as the top-level package ``advisor_rules`` (the ``rules/`` directory
itself is not a package and never lands in site-packages). It registers through
the ``advisor`` entry-point group exactly like a third-party plugin.
"""

from __future__ import annotations

from advisor_core.engine import hookimpl


@hookimpl
def advisor_register_rules():  # type: ignore[no-untyped-def]
    from advisor_rules import BUILTIN_RULES

    return list(BUILTIN_RULES)


BUILTIN_RULES: tuple = ()
