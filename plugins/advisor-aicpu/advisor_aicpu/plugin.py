"""Hook implementations: what this distribution contributes to advisor."""

from __future__ import annotations

from advisor_core.engine import hookimpl


@hookimpl
def advisor_register_rules():  # type: ignore[no-untyped-def]
    # Import inside the hook: `advisor plugins` stays fast, and an import error here is
    # reported against this plugin instead of breaking the host.
    from advisor_aicpu.rule import AicpuShare

    return [AicpuShare]
